package broker

// The broker's health check (pulsar-admin brokers healthcheck): Pulsar's
// broker produces a message to a heartbeat topic of its own and reads it
// back; lakegate appends one entry to a heartbeat log of this member —
// through the same WAL writer and metadata commit as every topic — and
// reads it back from storage.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lakegate/lakegate/lakestream"
)

// ErrUnhealthy is returned by Heartbeat when the heartbeat entry could not
// be written or read back as written (the admin REST answers 503 with it).
var ErrUnhealthy = errors.New("broker: health check failed")

// heartbeatNamespace holds one heartbeat log per member (hidden from
// listings: the reserved tenant).
const heartbeatNamespace = ReservedTenant + "/heartbeat"

// HeartbeatStream is the stream of member's heartbeat log.
func HeartbeatStream(member string) lakestream.StreamIdentifier {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, member)
	return lakestream.StreamIdentifier{Namespace: heartbeatNamespace, Name: "member-" + name}
}

// Heartbeat appends one entry to this member's heartbeat log, reads it
// back and compares it, then trims the log below it (the log holds the
// last heartbeat only). It returns the offset written; ErrUnhealthy wraps
// the reason of a failure.
func (b *Broker) Heartbeat(ctx context.Context) (int64, error) {
	id := HeartbeatStream(b.Self().ID)
	cat := b.cfg.Catalog
	if _, err := cat.CreateNamespace(ctx, heartbeatNamespace, nil); err != nil && !errors.Is(err, lakestream.ErrAlreadyExists) {
		return 0, fmt.Errorf("%w: creating the heartbeat namespace: %w", ErrUnhealthy, err)
	}
	disabled := false
	_, err := cat.CreateStream(ctx, id, lakestream.StreamConfig{}, lakestream.Partitioning{},
		lakestream.SchemaConfig{Type: lakestream.SchemaNone}, nil, &lakestream.TableMaterializationPolicy{Enabled: &disabled})
	if err != nil && !errors.Is(err, lakestream.ErrAlreadyExists) {
		return 0, fmt.Errorf("%w: creating the heartbeat log: %w", ErrUnhealthy, err)
	}
	log, err := cat.OpenLog(ctx, id, 0)
	if err != nil {
		return 0, fmt.Errorf("%w: opening the heartbeat log: %w", ErrUnhealthy, err)
	}
	payload := []byte("heartbeat " + b.Self().ID + " " + strconv.FormatInt(time.Now().UnixNano(), 10))
	h, err := log.Append(ctx, 1, payload)
	if err != nil {
		return 0, fmt.Errorf("%w: appending the heartbeat: %w", ErrUnhealthy, err)
	}
	e, err := log.ReadEntry(ctx, h.Offset)
	if err != nil {
		return 0, fmt.Errorf("%w: reading the heartbeat back: %w", ErrUnhealthy, err)
	}
	if e.Offset != h.Offset || !bytes.Equal(e.Payload, payload) {
		return 0, fmt.Errorf("%w: the heartbeat read back at offset %d is not the one written at %d", ErrUnhealthy, e.Offset, h.Offset)
	}
	if h.Offset > 0 {
		if _, err := log.SoftTrim(ctx, h.Offset-1); err != nil {
			b.cfg.Logger.Warn("health check: trimming the heartbeat log", "err", err)
		}
	}
	return h.Offset, nil
}
