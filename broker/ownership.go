package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/lakegate/lakegate/lakestream"
)

// Own takes the ownership of unit (a topic's canonical name) for this
// node before it serves the topic (docs/cluster.md). A unit another
// member owns is ErrServiceNotReady, naming the owner: the client looks
// the topic up again and is sent there. Every node is a cluster member
// (standalone: the only one), so a topic served always has an owner.
func (b *Broker) Own(ctx context.Context, unit string) (lakestream.Ownership, error) {
	owner, err := b.cfg.Membership.Acquire(ctx, unit)
	var owned *lakestream.OwnedError
	if errors.As(err, &owned) {
		return nil, fmt.Errorf("%w: %s is served by %s", ErrServiceNotReady, unit, owned.Owner.ID)
	}
	if err != nil {
		return nil, err
	}
	return owner, nil
}
