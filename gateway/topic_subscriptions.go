package gateway

// The topics this node serves, as the admin REST sees them
// (broker.ServedTopic): their subscriptions. A durable subscription is a
// durable cursor of the log, named like the subscription; while consumers
// (or a recent SEEK) keep it loaded, a subscription actor owns the cursor
// (topic.mu.subs).
//
// Every change here either goes through the running actor or, when none
// runs, edits the cursor with topic.mu held: topic.subscription starts
// actors under the same lock, so no actor can load the cursor half-changed.
// Locks: topic.mu may be held while waiting for a subscription actor (Info,
// ResetCursor, Close) — subscription actors and the sinks they call never
// take topic.mu.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
)

// liveSubLocked returns the running actor of subscription name, or nil.
// Needs t.mu.
func (t *topic) liveSubLocked(name string) *actors.SubscriptionActor {
	sub := t.mu.subs[name]
	if sub == nil {
		return nil
	}
	select {
	case <-sub.Done():
		delete(t.mu.subs, name)
		return nil
	default:
		return sub
	}
}

// subscriptionNames lists the durable cursors and running subscriptions of
// a topic (readers' non-durable subscriptions included), sorted; the
// gateway's internal cursors are not subscriptions.
func (t *topic) subscriptionNames(ctx context.Context) ([]string, error) {
	names, err := t.log.CursorNames(ctx)
	if err != nil {
		return nil, err
	}
	names = slices.DeleteFunc(names, actors.IsInternalCursor) // the gateway's own (dedup.go)
	t.mu.Lock()
	for name := range t.mu.subs {
		if t.liveSubLocked(name) != nil && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	t.mu.Unlock()
	slices.Sort(names)
	return names, nil
}

func (t *topic) hasCursor(ctx context.Context, name string) (bool, error) {
	names, err := t.log.CursorNames(ctx)
	if err != nil {
		return false, err
	}
	return slices.Contains(names, name), nil
}

// CreateSubscription implements broker.ServedTopic.
func (t *topic) CreateSubscription(ctx context.Context, name string, first func(context.Context) (int64, error)) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	exists, err := t.hasCursor(ctx, name)
	if err != nil {
		return err
	}
	if exists || t.liveSubLocked(name) != nil {
		return fmt.Errorf("%w: subscription %s already exists on %s", broker.ErrConflict, name, t.name)
	}
	if err := t.checkSubscriptionLimitLocked(ctx, name); err != nil { // limits.go
		return err
	}
	target, err := first(ctx)
	if err != nil {
		return err
	}
	c, err := t.log.OpenCursor(ctx, name, target-1)
	if err != nil {
		return err
	}
	return c.Close(ctx)
}

// DeleteSubscription implements broker.ServedTopic. Disconnected consumers
// may subscribe again, creating the subscription anew, as with Pulsar.
func (t *topic) DeleteSubscription(ctx context.Context, name string, force bool) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	found := false
	if sub := t.liveSubLocked(name); sub != nil {
		found = true
		info, err := sub.Info()
		if err == nil && info.Consumers > 0 {
			if !force {
				return true, fmt.Errorf("%w: subscription %s of %s has %d connected consumers (use ?force=true)", broker.ErrPrecondition, name, t.name, info.Consumers)
			}
			next, err := t.log.NextOffset(ctx)
			if err != nil {
				return true, err
			}
			if err := sub.ResetCursor(next); err != nil && !errors.Is(err, actors.ErrSubscriptionClosed) {
				return true, err // disconnects every consumer
			}
		}
		if err := sub.Close(); err != nil && !errors.Is(err, actors.ErrSubscriptionClosed) {
			return true, err
		}
		delete(t.mu.subs, name)
	}
	exists, err := t.hasCursor(ctx, name)
	if err != nil {
		return found, err
	}
	if exists {
		found = true
		if err := t.log.DeleteCursor(ctx, name); err != nil && !errors.Is(err, lakestream.ErrNoSuchCursor) {
			return true, err
		}
	}
	return found, nil
}

// ResetSubscription implements broker.ServedTopic: target is the next
// offset delivered and nothing at or above it is acknowledged.
func (t *topic) ResetSubscription(ctx context.Context, name string, target int64) (bool, error) {
	for attempt := 0; ; attempt++ {
		t.mu.Lock()
		sub := t.liveSubLocked(name)
		t.mu.Unlock()
		if sub == nil {
			break
		}
		err := sub.ResetCursor(target) // the SEEK path: consumers are disconnected
		if errors.Is(err, actors.ErrSubscriptionClosed) && attempt < 3 {
			continue // the actor stopped meanwhile: edit the cursor instead
		}
		return true, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.liveSubLocked(name) != nil {
		return true, fmt.Errorf("%w: subscription %s of %s was loaded during the reset: try again", broker.ErrConflict, name, t.name)
	}
	exists, err := t.hasCursor(ctx, name)
	if err != nil || !exists {
		return false, err
	}
	if err := t.log.DeleteCursor(ctx, name); err != nil && !errors.Is(err, lakestream.ErrNoSuchCursor) {
		return true, err
	}
	c, err := t.log.OpenCursor(ctx, name, target-1)
	if err != nil {
		return true, err
	}
	return true, c.Close(ctx)
}

// SubscriptionInfo implements broker.ServedTopic.
func (t *topic) SubscriptionInfo(ctx context.Context, name string) (actors.SubscriptionInfo, error) {
	if sub := t.liveSub(name); sub != nil {
		return sub.Info()
	}
	c, err := t.log.LoadCursor(ctx, name)
	if err != nil {
		return actors.SubscriptionInfo{}, err
	}
	defer c.Close(ctx)
	return actors.SubscriptionInfo{MarkDeleteOffset: c.MarkDeleteOffset(), AckedRanges: c.AckedRanges()}, nil
}

// Attached implements broker.ServedTopic.
func (t *topic) Attached() (producers int, consumers bool) {
	t.mu.Lock()
	producers = len(t.mu.producers)
	subs := make([]*actors.SubscriptionActor, 0, len(t.mu.subs))
	for _, sub := range t.mu.subs {
		subs = append(subs, sub)
	}
	t.mu.Unlock()
	for _, sub := range subs {
		if info, err := sub.Info(); err == nil && info.Consumers > 0 {
			return producers, true
		}
	}
	return producers, false
}

// Terminate implements broker.ServedTopic: the log is fenced (every later
// append fails: producers get TopicTerminatedError), new producers are
// refused, and consumers are sent REACHED_END_OF_TOPIC once they have read
// everything (broker/end_of_topic.go).
func (t *topic) Terminate(ctx context.Context) error {
	if err := t.log.Fence(ctx); err != nil {
		return err
	}
	t.part.Terminate() // new producers are refused at once
	if end, err := t.log.NextOffset(ctx); err == nil {
		t.end.MarkTerminated(end) // consumers that read everything are told now
	}
	return nil
}

// LastMessageID implements broker.ServedTopic.
func (t *topic) LastMessageID(ctx context.Context) (protocol.MessageID, error) {
	return t.lastMessageID(ctx)
}

// Partition implements broker.ServedTopic.
func (t *topic) Partition() int32 { return t.partition }

var _ broker.ServedTopic = (*topic)(nil)
