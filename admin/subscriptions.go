package admin

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
	"github.com/lakegate/lakegate/broker"
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

// offsetOf is the first offset of t to deliver for a message id given over REST:
// earliest → the first offset, latest → the head, else the entry the id
// names (inclusive: its message is delivered again), clamped to the log.
func offsetOf(ctx context.Context, t broker.ServedTopic, m messageIDJSON) (int64, error) {
	log := t.Log()
	id := protocol.MessageID{LedgerID: m.LedgerID, EntryID: m.EntryID, BatchIndex: -1, Partition: m.PartitionIndex}
	switch {
	case m.sentinel() && !id.IsLatest():
		return log.FirstOffset(ctx)
	case id.IsLatest():
		return log.NextOffset(ctx)
	case id.LedgerID != int64(log.ID()):
		return 0, fmt.Errorf("%w: message id %d:%d is not of %s (its ledger is %d)", errAdminPrecondition, id.LedgerID, id.EntryID, t.Name(), log.ID())
	}
	first, err := log.FirstOffset(ctx)
	if err != nil {
		return 0, err
	}
	next, err := log.NextOffset(ctx)
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
	if out, err = ts[0].SubscriptionNames(ctx); err != nil {
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
	if errors.Is(err, errAdminNotFound) && !a.cfg.DisableTopicAutoCreation {
		// As Pulsar's broker: a subscription created on a topic that does
		// not exist creates the topic (non-partitioned) when topics are
		// auto-created.
		if tn, perr := pathTopic(r); perr == nil {
			if _, cerr := a.brk.Resolve(ctx, tn.String(), true); cerr == nil {
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
	first := func(ctx context.Context) (int64, error) { return offsetOf(ctx, ts[0], m) }
	if err := ts[0].CreateSubscription(ctx, name, first); err != nil {
		return nil, err
	}
	return nil, nil
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
	var ts []broker.ServedTopic
	if err == nil {
		ts, err = a.topics(ctx, ref)
	}
	if err != nil {
		return nil, err
	}
	force, found := queryBool(r, "force"), false
	for _, t := range ts {
		ok, err := t.DeleteSubscription(ctx, name, force)
		if err != nil {
			return nil, err
		}
		found = found || ok
	}
	if !found {
		return nil, fmt.Errorf("%w: subscription %s not found on %s", errAdminNotFound, name, ref.name)
	}
	a.forgetSubProps(ctx, ref, name) // subprops.go
	return nil, nil
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
	err = a.resetEveryPartition(ctx, ref, name, func(t broker.ServedTopic) (int64, error) {
		return t.Log().FindOffsetByTime(ctx, time.UnixMilli(ms))
	})
	if err != nil {
		return nil, err
	}
	return nil, nil
}

// resetEveryPartition resets subscription name on every partition of ref to
// the offset target picks per partition. Not found on any → errAdminNotFound.
func (a *admin) resetEveryPartition(ctx context.Context, ref topicRef, name string, target func(broker.ServedTopic) (int64, error)) error {
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
		ok, err := t.ResetSubscription(ctx, name, off)
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
	target, err := offsetOf(ctx, t, m)
	if err != nil {
		return nil, err
	}
	ok, err := t.ResetSubscription(ctx, name, target)
	if err == nil && !ok {
		err = fmt.Errorf("%w: subscription %s not found on %s", errAdminNotFound, name, t.Name())
	}
	if err != nil {
		return nil, err
	}
	return nil, nil
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
	var ts []broker.ServedTopic
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
	info, err := t.SubscriptionInfo(ctx, name)
	if errors.Is(err, lakestream.ErrNoSuchCursor) {
		err = fmt.Errorf("%w: subscription %s of %s not found", errAdminNotFound, name, ref.name)
	}
	if err != nil {
		return nil, err
	}
	from, seen := info.MarkDeleteOffset+1, 0
	for read := 0; read < peekScanEntriesMax; {
		es, err := t.Log().ReadEntries(ctx, from, 100, 4<<20)
		if errors.Is(err, lakestream.ErrOffsetTrimmed) {
			if from, err = t.Log().FirstOffset(ctx); err == nil {
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
				return entryPayload(int64(t.Log().ID()), t.Partition(), e)
			}
		}
		from = es[len(es)-1].End()
	}
	return nil, fmt.Errorf("%w: subscription %s of %s has fewer than %d messages in its backlog", errAdminNotFound, name, ref.name, n)
}
