package gateway

// Admin REST: subscriptions. A durable subscription is a durable cursor of
// the log, named like the subscription; while consumers (or a recent SEEK)
// keep it loaded, a subscription actor owns the cursor (topic.mu.subs).
//
// Every change here either goes through the running actor or, when none
// runs, edits the cursor with topic.mu held: topic.subscription starts
// actors under the same lock, so no actor can load the cursor half-changed.
//
// Locks: the admin may hold topic.mu while it waits for a subscription
// actor (Info, ResetCursor, Close) — subscription actors and the sinks they
// call never take topic.mu — and takes Server.mu before topic.mu, as
// topic.go says.
//
// Reset cursor with consumers connected does what SEEK does
// (SubscriptionActor.ResetCursor): every consumer is disconnected
// (CLOSE_CONSUMER) and the clients subscribe again from the new position,
// like Pulsar. On a partitioned topic, a reset by time resets every
// partition; a reset by message id resets the partition its partitionIndex
// names.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
)

// subscriptionName is the {sub} of a request: 412 for an empty name or one
// of the gateway's internal cursors.
func subscriptionName(r *http.Request) (string, error) {
	name := r.PathValue("sub")
	if err := validName("subscription", name); err != nil {
		return "", err
	}
	if actors.IsInternalCursor(name) {
		return "", fmt.Errorf("%w: subscription names starting with %q are reserved", errAdminPrecondition, actors.InternalCursorPrefix)
	}
	return name, nil
}

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

// offsetOf is the first offset to deliver for a message id given over REST:
// earliest → the first offset, latest → the head, else the entry the id
// names (inclusive: its message is delivered again), clamped to the log.
func (t *topic) offsetOf(ctx context.Context, m messageIDJSON) (int64, error) {
	id := protocol.MessageID{LedgerID: m.LedgerID, EntryID: m.EntryID, BatchIndex: -1, Partition: m.PartitionIndex}
	switch {
	case m.sentinel() && !id.IsLatest():
		return t.log.FirstOffset(ctx)
	case id.IsLatest():
		return t.log.NextOffset(ctx)
	case id.LedgerID != int64(t.log.ID()):
		return 0, fmt.Errorf("%w: message id %d:%d is not of %s (its ledger is %d)", errAdminPrecondition, id.LedgerID, id.EntryID, t.name, t.log.ID())
	}
	first, err := t.log.FirstOffset(ctx)
	if err != nil {
		return 0, err
	}
	next, err := t.log.NextOffset(ctx)
	if err != nil {
		return 0, err
	}
	return min(max(id.EntryID, first), next), nil
}

// sentinel reports whether m is the earliest or the latest id.
func (m messageIDJSON) sentinel() bool {
	id := protocol.MessageID{LedgerID: m.LedgerID, EntryID: m.EntryID}
	return id.IsEarliest() || id.IsLatest() || (m.LedgerID < 0 && m.EntryID < 0)
}

// parseMessageID reads an optional MessageId body; def when empty.
func parseMessageID(r *http.Request, def protocol.MessageID) (messageIDJSON, error) {
	m := messageIDJSON{LedgerID: def.LedgerID, EntryID: def.EntryID, PartitionIndex: def.Partition}
	b, err := readBody(r)
	if err != nil || b == nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%w: message id body: %v", errAdminBadRequest, err)
	}
	return m, nil
}

func (a *admin) listSubscriptions(r *http.Request) (any, error) {
	ctx := r.Context()
	ref, err := a.refOf(r)
	if err != nil {
		return nil, err
	}
	out := []string{}
	if ref.partitioned() {
		rs, err := a.fanOut(r, ref, "")
		if err != nil {
			return nil, err
		}
		for _, res := range rs {
			var names []string
			if !res.ok() {
				return nil, res.err()
			}
			if err := json.Unmarshal(res.body.Bytes(), &names); err != nil {
				return nil, fmt.Errorf("subscriptions of partition %d: %w", res.partition, err)
			}
			for _, n := range names {
				if !slices.Contains(out, n) {
					out = append(out, n)
				}
			}
		}
		slices.Sort(out)
		return out, nil
	}
	ts, err := a.topics(ctx, ref)
	if err != nil {
		return nil, err
	}
	if out, err = ts[0].subscriptionNames(ctx); err != nil {
		return nil, err
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

func (a *admin) createSubscription(r *http.Request) (any, error) {
	ctx := r.Context()
	name, err := subscriptionName(r)
	var ref topicRef
	if err == nil {
		ref, err = a.refOf(r)
	}
	if errors.Is(err, errAdminNotFound) && a.srv.autoCreate() {
		// As Pulsar's broker: a subscription created on a topic that does
		// not exist creates the topic (non-partitioned) when topics are
		// auto-created.
		if tn, perr := pathTopic(r); perr == nil {
			if _, cerr := a.srv.brk.Resolve(ctx, tn.String(), true); cerr == nil {
				ref, err = a.refOf(r)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	m, err := parseMessageID(r, protocol.LatestMessageID)
	if err != nil {
		return nil, err
	}
	if ref.partitioned() && !m.sentinel() {
		return nil, fmt.Errorf("%w: a subscription of partitioned topic %s starts at earliest or latest; create it on a partition to start at a message id", errAdminPrecondition, ref.name)
	}
	if ref.partitioned() {
		rs, err := a.fanOut(r, ref, "")
		if err != nil {
			return nil, err
		}
		return combineWrites(rs, false)
	}
	ts, err := a.topics(ctx, ref)
	if err != nil {
		return nil, err
	}
	if err := ts[0].createCursor(ctx, name, m); err != nil {
		return nil, err
	}
	return nil, nil
}

// createCursor creates the durable cursor of subscription name so that the
// message m is the first delivered. 409 when the subscription exists.
func (t *topic) createCursor(ctx context.Context, name string, m messageIDJSON) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	exists, err := t.hasCursor(ctx, name)
	if err != nil {
		return err
	}
	if exists || t.liveSubLocked(name) != nil {
		return fmt.Errorf("%w: subscription %s already exists on %s", errAdminConflict, name, t.name)
	}
	if err := t.checkSubscriptionLimitLocked(ctx, name); err != nil { // limits.go
		return err
	}
	target, err := t.offsetOf(ctx, m)
	if err != nil {
		return err
	}
	c, err := t.log.OpenCursor(ctx, name, target-1)
	if err != nil {
		return err
	}
	return c.Close(ctx)
}

func (a *admin) deleteSubscription(r *http.Request) (any, error) {
	ctx := r.Context()
	name, err := subscriptionName(r)
	if err != nil {
		return nil, err
	}
	ref, err := a.refOf(r)
	if err == nil && ref.partitioned() {
		rs, err := a.fanOut(r, ref, "")
		if err != nil {
			return nil, err
		}
		return combineWrites(rs, true)
	}
	var ts []*topic
	if err == nil {
		ts, err = a.topics(ctx, ref)
	}
	if err != nil {
		return nil, err
	}
	force, found := queryBool(r, "force"), false
	for _, t := range ts {
		ok, err := t.deleteSubscription(ctx, name, force)
		if err != nil {
			return nil, err
		}
		found = found || ok
	}
	if !found {
		return nil, fmt.Errorf("%w: subscription %s not found on %s", errAdminNotFound, name, ref.name)
	}
	return nil, nil
}

// deleteSubscription stops the subscription's actor and deletes its cursor;
// it reports whether there was anything to delete. With consumers
// connected it fails (412) unless force, which disconnects them first (they
// may subscribe again, creating the subscription anew, as with Pulsar).
func (t *topic) deleteSubscription(ctx context.Context, name string, force bool) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	found := false
	if sub := t.liveSubLocked(name); sub != nil {
		found = true
		info, err := sub.Info()
		if err == nil && info.Consumers > 0 {
			if !force {
				return true, fmt.Errorf("%w: subscription %s of %s has %d connected consumers (use ?force=true)", errAdminPrecondition, name, t.name, info.Consumers)
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

func (a *admin) resetCursorByTime(r *http.Request) (any, error) {
	ctx := r.Context()
	name, err := subscriptionName(r)
	if err != nil {
		return nil, err
	}
	ms, err := strconv.ParseInt(r.PathValue("timestamp"), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: timestamp %q is not Unix milliseconds", errAdminBadRequest, r.PathValue("timestamp"))
	}
	ref, err := a.refOf(r)
	if err != nil {
		return nil, err
	}
	if ref.partitioned() {
		rs, err := a.fanOut(r, ref, "")
		if err != nil {
			return nil, err
		}
		return combineWrites(rs, true)
	}
	err = a.resetEveryPartition(ctx, ref, name, func(t *topic) (int64, error) {
		return t.log.FindOffsetByTime(ctx, time.UnixMilli(ms))
	})
	if err != nil {
		return nil, err
	}
	return nil, nil
}

// resetEveryPartition resets subscription name on every partition of ref to
// the offset target picks per partition. Not found on any → errAdminNotFound.
func (a *admin) resetEveryPartition(ctx context.Context, ref topicRef, name string, target func(*topic) (int64, error)) error {
	ts, err := a.topics(ctx, ref)
	if err != nil {
		return err
	}
	found := false
	for _, t := range ts {
		off, err := target(t)
		if err != nil {
			return err
		}
		ok, err := t.resetCursor(ctx, name, off)
		if err != nil {
			return err
		}
		found = found || ok
	}
	if !found {
		return fmt.Errorf("%w: subscription %s not found on %s", errAdminNotFound, name, ref.name)
	}
	return nil
}

func (a *admin) resetCursorByID(r *http.Request) (any, error) {
	ctx := r.Context()
	name, err := subscriptionName(r)
	if err != nil {
		return nil, err
	}
	ref, err := a.refOf(r)
	if err != nil {
		return nil, err
	}
	m, err := parseMessageID(r, protocol.EarliestMessageID)
	if err != nil {
		return nil, err
	}
	if ref.partitioned() && m.sentinel() {
		// Earliest or latest: every partition.
		rs, err := a.fanOut(r, ref, "")
		if err != nil {
			return nil, err
		}
		return combineWrites(rs, true)
	}
	if ref.partitioned() {
		n := ref.md.Partitioning.NumPartitions
		if m.PartitionIndex < 0 || int(m.PartitionIndex) >= n {
			return nil, fmt.Errorf("%w: resetting %s (%d partitions) by message id needs the partitionIndex of the id", errAdminPrecondition, ref.name, n)
		}
		// The partition the id names, at its owner.
		rs, err := a.fanOut(r, ref, "", int(m.PartitionIndex))
		if err != nil {
			return nil, err
		}
		return combineWrites(rs, false)
	}
	ts, err := a.topics(ctx, ref)
	if err != nil {
		return nil, err
	}
	t := ts[0]
	target, err := t.offsetOf(ctx, m)
	if err != nil {
		return nil, err
	}
	ok, err := t.resetCursor(ctx, name, target)
	if err == nil && !ok {
		err = fmt.Errorf("%w: subscription %s not found on %s", errAdminNotFound, name, t.name)
	}
	if err != nil {
		return nil, err
	}
	return nil, nil
}

// resetCursor moves subscription name so that target is the next offset
// delivered and nothing at or above it is acknowledged. It reports false
// when the topic has no such subscription.
func (t *topic) resetCursor(ctx context.Context, name string, target int64) (bool, error) {
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
		return true, fmt.Errorf("%w: subscription %s of %s was loaded during the reset: try again", errAdminConflict, name, t.name)
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

// peekScanEntriesMax bounds the entries one peek reads, in entries.
const peekScanEntriesMax = 10000

// peekMessage serves GET …/subscription/{sub}/position/{n} (pulsar-admin
// topics peek-messages): the n-th entry (from 1) of the subscription's
// backlog — entries it acknowledged wholly are skipped — answered as
// getEntry answers an entry; 404 past the backlog. It reads at most
// peekScanEntriesMax entries.
func (a *admin) peekMessage(r *http.Request) (any, error) {
	ctx := r.Context()
	n, err := strconv.Atoi(r.PathValue("pos"))
	if err != nil || n < 1 {
		return nil, fmt.Errorf("%w: message position %q: want 1 or more", errAdminBadRequest, r.PathValue("pos"))
	}
	name, err := subscriptionName(r)
	var ref topicRef
	if err == nil {
		ref, err = a.refOf(r)
	}
	var ts []*topic
	if err == nil {
		ts, err = a.topics(ctx, ref)
	}
	if err == nil && len(ts) != 1 {
		err = fmt.Errorf("%w: %s is a partitioned topic: peek one of its partitions", errAdminMethodNotAllowed, ref.name)
	}
	if err != nil {
		return nil, err
	}
	t := ts[0]
	var info actors.SubscriptionInfo
	if sub := t.liveSub(name); sub != nil {
		info, err = sub.Info()
	} else {
		var c lakestream.LogCursor
		if c, err = t.log.LoadCursor(ctx, name); err == nil {
			info = actors.SubscriptionInfo{MarkDeleteOffset: c.MarkDeleteOffset(), AckedRanges: c.AckedRanges()}
			c.Close(ctx)
		}
	}
	if errors.Is(err, lakestream.ErrNoSuchCursor) {
		err = fmt.Errorf("%w: subscription %s of %s not found", errAdminNotFound, name, ref.name)
	}
	if err != nil {
		return nil, err
	}
	from, seen := info.MarkDeleteOffset+1, 0
	for read := 0; read < peekScanEntriesMax; {
		es, err := t.log.ReadEntries(ctx, from, 100, 4<<20)
		if errors.Is(err, lakestream.ErrOffsetTrimmed) {
			if from, err = t.log.FirstOffset(ctx); err == nil {
				continue
			}
		}
		if err != nil {
			return nil, err
		}
		if len(es) == 0 {
			break
		}
		for _, e := range es {
			read++
			if info.UnackedRecords(e.Offset, e.End()) == 0 {
				continue
			}
			if seen++; seen == n {
				return entryPayload(int64(t.log.ID()), t.partition, e)
			}
		}
		from = es[len(es)-1].End()
	}
	return nil, fmt.Errorf("%w: subscription %s of %s has fewer than %d messages in its backlog", errAdminNotFound, name, ref.name, n)
}
