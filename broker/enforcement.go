package broker

// Retention, message TTL and backlog quotas (docs/policies.md), enforced on
// the topics this node serves — their owner — every policy check interval
// (RunPolicies), and backlog quotas also when a producer attaches
// (CheckBacklogQuota):
//
//   - message TTL: on every subscription, the messages published more than
//     TTL ago are acknowledged (expired), as Pulsar's expiry monitor does;
//   - backlog quota, per type (destination_storage: the bytes a
//     subscription has not acknowledged; message_age: the age of its oldest
//     unacknowledged message), when a subscription exceeds it:
//     producer_request_hold and producer_exception refuse producers
//     (ProducerBlockedQuotaExceededError, which clients retry: the sends
//     wait; ProducerBlockedQuotaExceededException, which fails their
//     pending sends) and disconnect the attached ones, which then meet
//     that refusal; consumer_backlog_eviction acknowledges the oldest
//     messages of the subscriptions over the quota until they fit;
//   - retention: the log is trimmed (Log.SoftTrim and LogStorage.HardTrim;
//     GC deletes the objects no log references any more) below the first
//     record that is still needed. A record is needed while a durable
//     subscription has not acknowledged it (its persisted mark-delete
//     position: what a restarted node would resume from), while it is not
//     yet in the stream's table (when the stream is materialized: its
//     compacted end), and while the retention policy keeps it: published
//     within retentionTimeInMinutes, or among the newest retentionSizeInMB
//     of the log (-1: without limit). A topic whose namespace has no
//     retention policy either has the node's default (Config.
//     DefaultRetention), Pulsar's 0/0 unless configured: what every durable
//     subscription acknowledged and the table (of a materialized stream)
//     holds goes. The table keeps its rows: a trim removes the log's index
//     entries and WAL objects, never table files. Trims stop at entry
//     boundaries.
//
// A topic that no node has loaded (no client, no admin request since the
// last restart) is not checked, as on a Pulsar broker. The compaction
// threshold (CompactionThreshold) is checked in the same rounds.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/lakestream"
)

// PolicyTopic is what the enforcement of policies needs of a
// topic-partition served: its log, its compaction, its subscriptions and
// producers. The registry of the topics served implements it.
type PolicyTopic interface {
	// Name is the topic-partition's canonical name (logs, errors).
	Name() string
	// Stream is the topic's stream.
	Stream() lakestream.StreamIdentifier
	// Log is the topic-partition's log.
	Log() lakestream.Log
	// Compaction is the topic-partition's TopicCompaction.
	Compaction() *TopicCompaction
	// Closing reports whether the topic is being unloaded: it is skipped.
	Closing() bool
	// ApplyLimits makes l the topic's limits (they may have changed on
	// another member).
	ApplyLimits(l TopicLimits)
	// SubscriptionNames lists the durable cursors and running
	// subscriptions, internal cursors excepted, sorted.
	SubscriptionNames(ctx context.Context) ([]string, error)
	// LiveSubscription is the running actor of subscription name, or nil.
	LiveSubscription(name string) *actors.SubscriptionActor
	// ExpireBelow acknowledges every record of subscription name below
	// offset before: through its actor when it runs, else in its stored
	// cursor (written under the topic's ownership).
	ExpireBelow(ctx context.Context, name string, before int64) error
	// DisconnectProducers closes the topic's producers (they reconnect,
	// and meet the backlog quota) and returns how many it closed.
	DisconnectProducers() int
}

// PolicyHooks tell the caller (its metrics) what the enforcement did.
type PolicyHooks struct {
	// Action is called once per action taken, by label: "ttl_expiry",
	// "quota_eviction", "quota_producers_blocked", "retention_trim",
	// "compaction".
	Action func(label string)
	// Checked is called after a topic's round succeeded.
	Checked func()
}

func (h PolicyHooks) action(label string) {
	if h.Action != nil {
		h.Action(label)
	}
}

// subPosition is where one subscription of a topic stands.
type subPosition struct {
	name string
	// markDelete: every record at or below it is acknowledged (in memory
	// for a running subscription); persisted: the persisted one.
	markDelete, persisted int64
	durable               bool
}

// subscriptionPositions lists the topic's subscriptions (durable cursors
// and running subscriptions, internal cursors excepted).
func subscriptionPositions(ctx context.Context, t PolicyTopic) ([]subPosition, error) {
	names, err := t.SubscriptionNames(ctx)
	if err != nil {
		return nil, err
	}
	durable, err := t.Log().CursorNames(ctx)
	if err != nil {
		return nil, err
	}
	isDurable := map[string]bool{}
	for _, n := range durable {
		isDurable[n] = true
	}
	var out []subPosition
	for _, name := range names {
		p := subPosition{name: name, durable: isDurable[name]}
		if sub := t.LiveSubscription(name); sub != nil {
			info, err := sub.Info()
			if err == nil {
				p.markDelete, p.persisted = info.MarkDeleteOffset, info.PersistedMarkDeleteOffset
				out = append(out, p)
				continue
			}
		}
		if !p.durable {
			continue // a reader that just left
		}
		c, err := t.Log().LoadCursor(ctx, name)
		if errors.Is(err, lakestream.ErrNoSuchCursor) {
			continue
		}
		if err != nil {
			return nil, err
		}
		p.markDelete, p.persisted = c.MarkDeleteOffset(), c.PersistedMarkDeleteOffset()
		c.Close(ctx)
		out = append(out, p)
	}
	return out, nil
}

// logView is what the policy checks read of a log once per round.
type logView struct {
	first, next int64
	last        lakestream.EntryHeader // valid when next > first
}

// boundsReader is a log that reads its first and next offsets in one
// read of its head (the engine's logs): a policy round of an idle topic
// does one read fewer.
type boundsReader interface {
	Bounds(ctx context.Context) (first, next int64, err error)
}

func viewOf(ctx context.Context, log lakestream.Log) (logView, error) {
	var v logView
	var err error
	if b, ok := log.(boundsReader); ok {
		if v.first, v.next, err = b.Bounds(ctx); err != nil {
			return v, err
		}
	} else {
		if v.first, err = log.FirstOffset(ctx); err != nil {
			return v, err
		}
		if v.next, err = log.NextOffset(ctx); err != nil {
			return v, err
		}
	}
	if v.next > v.first {
		v.last, err = log.EntryHeader(ctx, v.next-1)
	}
	return v, err
}

// newestWithin is the first offset from which the log holds at most
// limit payload bytes (the head when even the last entry is larger).
func newestWithin(ctx context.Context, log lakestream.Log, v logView, limit int64) (int64, error) {
	if v.next <= v.first {
		return v.next, nil
	}
	return log.SearchOffset(ctx, v.first, v.next, func(h lakestream.EntryHeader) bool {
		return v.last.CumulativeSize-h.CumulativeSize+int64(h.Size) <= limit
	})
}

// quotaState says whether the topic's backlog exceeds a quota.
type quotaState struct {
	typ   string
	quota BacklogQuota
	// evictTo: the offset the subscriptions over the quota are expired to.
	evictTo int64
	over    []subPosition
}

// quotasExceeded checks the backlog quotas against every subscription.
func quotasExceeded(ctx context.Context, log lakestream.Log, quotas map[string]BacklogQuota, v logView, subs []subPosition) ([]quotaState, error) {
	var out []quotaState
	for _, typ := range []string{QuotaDestinationStorage, QuotaMessageAge} {
		q, ok := quotas[typ]
		if !ok {
			continue
		}
		st := quotaState{typ: typ, quota: q}
		switch limit := max(q.LimitSize, q.Limit); {
		case typ == QuotaDestinationStorage && limit > 0:
			for _, s := range subs {
				b, err := BytesFrom(ctx, log, s.markDelete+1, v.last)
				if err != nil {
					return nil, err
				}
				if v.next > v.first && b > limit {
					st.over = append(st.over, s)
				}
			}
			if len(st.over) > 0 {
				to, err := newestWithin(ctx, log, v, limit)
				if err != nil {
					return nil, err
				}
				st.evictTo = to
			}
		case typ == QuotaMessageAge && q.LimitTime > 0:
			cutoff := time.Now().Add(-time.Duration(q.LimitTime) * time.Second)
			to, err := log.FindOffsetByTime(ctx, cutoff)
			if err != nil {
				return nil, err
			}
			for _, s := range subs {
				if s.markDelete+1 < to && s.markDelete+1 < v.next {
					st.over = append(st.over, s)
				}
			}
			st.evictTo = to
		}
		if len(st.over) > 0 {
			out = append(out, st)
		}
	}
	return out, nil
}

// CheckBacklogQuota answers whether a producer may attach to t: an error
// (ErrQuotaHold, ErrQuotaException) while a producer-blocking quota is
// exceeded.
func (b *Broker) CheckBacklogQuota(ctx context.Context, t PolicyTopic) error {
	md, err := b.cfg.Catalog.LoadStream(ctx, t.Stream())
	if err != nil {
		return err
	}
	pol, err := b.PoliciesOf(ctx, md)
	if err != nil || len(pol.Quotas) == 0 {
		return err
	}
	v, err := viewOf(ctx, t.Log())
	if err != nil {
		return err
	}
	subs, err := subscriptionPositions(ctx, t)
	if err != nil {
		return err
	}
	states, err := quotasExceeded(ctx, t.Log(), pol.Quotas, v, subs)
	if err != nil {
		return err
	}
	for _, st := range states {
		switch st.quota.Policy {
		case QuotaHold:
			return fmt.Errorf("%w: %s quota of %s, subscription %q", ErrQuotaHold, st.typ, t.Name(), st.over[0].name)
		case QuotaException:
			return fmt.Errorf("%w: %s quota of %s, subscription %q", ErrQuotaException, st.typ, t.Name(), st.over[0].name)
		}
	}
	return nil
}

// RunPolicies enforces the policies of the topics served (served lists
// them) every interval, until ctx ends.
func (b *Broker) RunPolicies(ctx context.Context, interval time.Duration, served func() []PolicyTopic, hooks PolicyHooks) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// One read of each namespace per round, whatever the number of
		// its topics (a change made during the round is seen next round).
		// And one fresh read of the logs' state per second of the round,
		// not one per topic (lakestream.WithStaleReads).
		rctx := lakestream.WithStaleReads(withNamespaceMemo(ctx), time.Second)
		for _, t := range served() {
			if t.Closing() || ctx.Err() != nil {
				continue
			}
			tctx, cancel := context.WithTimeout(rctx, policyTopicTimeout)
			if err := b.EnforcePolicies(tctx, t, hooks); err != nil {
				if tctx.Err() == nil && !t.Closing() {
					b.cfg.Logger.Warn("enforcing a topic's policies", "topic", t.Name(), "err", err)
				}
			} else if hooks.Checked != nil {
				hooks.Checked()
			}
			cancel()
		}
	}
}

// policyTopicTimeout bounds one topic's policy round.
const policyTopicTimeout = 30 * time.Second

// EnforcePolicies applies the limits, the compaction threshold, TTL,
// backlog quotas and retention to one topic.
func (b *Broker) EnforcePolicies(ctx context.Context, t PolicyTopic, hooks PolicyHooks) error {
	md, err := b.cfg.Catalog.LoadStream(ctx, t.Stream())
	if err != nil {
		return err
	}
	pol, err := b.PoliciesOf(ctx, md)
	if err != nil {
		return err
	}
	lim, err := b.LimitsOf(ctx, md) // changed on another member
	if err != nil {
		return err
	}
	t.ApplyLimits(lim)
	if threshold, err := b.CompactionThreshold(ctx, md); err != nil {
		return err
	} else if threshold > 0 {
		v, err := viewOf(ctx, t.Log())
		if err != nil {
			return err
		}
		if err := maybeCompact(ctx, t, threshold, v, hooks); err != nil {
			return fmt.Errorf("compaction threshold: %w", err)
		}
	}
	if pol.None() {
		return nil
	}
	v, err := viewOf(ctx, t.Log())
	if err != nil {
		return err
	}
	if v.next <= v.first {
		return nil // an empty log: nothing to expire, evict or trim
	}
	subs, err := subscriptionPositions(ctx, t)
	if err != nil {
		return err
	}
	if pol.TTLSeconds > 0 {
		before, err := t.Log().FindOffsetByTime(ctx, time.Now().Add(-time.Duration(pol.TTLSeconds)*time.Second))
		if err != nil {
			return err
		}
		for i, sp := range subs {
			if sp.markDelete+1 < before {
				if err := t.ExpireBelow(ctx, sp.name, before); err != nil {
					return fmt.Errorf("expiring subscription %q: %w", sp.name, err)
				}
				subs[i].markDelete = before - 1
				hooks.action("ttl_expiry")
			}
		}
	}
	if len(pol.Quotas) > 0 {
		states, err := quotasExceeded(ctx, t.Log(), pol.Quotas, v, subs)
		if err != nil {
			return err
		}
		for _, st := range states {
			switch st.quota.Policy {
			case QuotaEviction:
				for _, sp := range st.over {
					if err := t.ExpireBelow(ctx, sp.name, st.evictTo); err != nil {
						return fmt.Errorf("evicting the backlog of subscription %q: %w", sp.name, err)
					}
					hooks.action("quota_eviction")
				}
			case QuotaHold, QuotaException:
				if n := t.DisconnectProducers(); n > 0 {
					hooks.action("quota_producers_blocked")
					b.cfg.Logger.Info("backlog quota exceeded: producers disconnected", "topic", t.Name(), "type", st.typ, "policy", st.quota.Policy, "producers", n)
				}
			}
		}
	}
	if pol.Retention != nil {
		return b.retain(ctx, t, md, *pol.Retention, v, subs, hooks)
	}
	return nil
}

// retain trims the log below what retention, the durable subscriptions
// and the table still need (see the file comment).
func (b *Broker) retain(ctx context.Context, t PolicyTopic, md lakestream.StreamMetadata, r RetentionPolicy, v logView, subs []subPosition, hooks PolicyHooks) error {
	log := t.Log()
	if v.next <= v.first || (r.TimeMinutes < 0 && r.SizeMB < 0) {
		return nil
	}
	// What retention would let go: entries older than the time limit or
	// beyond the size limit (either suffices).
	cut := v.first
	if r.TimeMinutes >= 0 {
		c, err := log.FindOffsetByTime(ctx, time.Now().Add(-time.Duration(r.TimeMinutes)*time.Minute))
		if err != nil {
			return err
		}
		cut = max(cut, c)
	}
	if r.SizeMB >= 0 {
		c, err := newestWithin(ctx, log, v, r.SizeMB<<20)
		if err != nil {
			return err
		}
		cut = max(cut, c)
	}
	// Never younger than the minimum age (Config.RetentionMinAge).
	if age := b.cfg.RetentionMinAge; age > 0 && cut > v.first {
		c, err := log.FindOffsetByTime(ctx, time.Now().Add(-age))
		if err != nil {
			return err
		}
		cut = min(cut, c)
	}
	// What must stay (lakestream.TrimFloor): every durable subscription's
	// persisted position, a compacted topic's next key compaction and
	// what the table has not taken yet.
	holds := lakestream.NoHolds()
	for _, sp := range subs {
		if sp.durable {
			holds.Subscriptions = append(holds.Subscriptions, sp.persisted+1)
		}
	}
	if gen, horizon, err := t.Compaction().Horizon(ctx); err != nil {
		return err
	} else if gen > 0 {
		holds.KeyCompaction = horizon
	}
	if cut = lakestream.TrimFloor(cut, holds); cut <= v.first {
		return nil
	}
	mat, err := b.cfg.Catalog.ResolveMaterialization(ctx, md.ID)
	if err != nil {
		return err
	}
	if mat.Enabled != nil && *mat.Enabled {
		if holds.TableEnd, err = b.tableEnd(ctx, md.ID, log.ID()); err != nil {
			return err
		}
		cut = lakestream.TrimFloor(cut, holds)
	}
	if cut >= v.next {
		cut = v.next
	} else if cut > v.first {
		// Never split an entry: stop at the start of the one holding cut.
		h, err := log.EntryHeader(ctx, cut)
		if err != nil {
			return err
		}
		cut = h.Offset
	}
	if cut <= v.first {
		return nil
	}
	if err := b.cfg.Catalog.Storage().HardTrim(ctx, log.ID(), cut); err != nil {
		return err
	}
	hooks.action("retention_trim")
	b.cfg.Logger.Debug("retention: trimmed a log", "topic", t.Name(), "below", cut)
	return nil
}

// tableEnd is the offset just past the last record of log id of stream
// that its table holds (0 when the table has none yet).
func (b *Broker) tableEnd(ctx context.Context, stream lakestream.StreamIdentifier, id lakestream.LogID) (int64, error) {
	st, err := b.cfg.Catalog.Stream(ctx, stream)
	if err != nil {
		return 0, err
	}
	info, err := st.Table().Info(ctx)
	if errors.Is(err, lakestream.ErrNotMaterialized) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	for _, p := range info.Partitions {
		if p.Log == id {
			return p.CompactedEnd, nil
		}
	}
	return 0, nil
}

// maybeCompact starts a compaction when the bytes of the log past the
// horizon exceed the threshold.
func maybeCompact(ctx context.Context, t PolicyTopic, threshold int64, v logView, hooks PolicyHooks) error {
	c := t.Compaction()
	if threshold <= 0 || v.next <= v.first || c.Running() {
		return nil
	}
	_, horizon, err := c.Horizon(ctx)
	if err != nil {
		return err
	}
	b, err := BytesFrom(ctx, t.Log(), max(horizon, v.first), v.last)
	if err != nil || b <= threshold {
		return err
	}
	if c.Start() {
		hooks.action("compaction")
	}
	return nil
}

// BytesFrom is the payload bytes of log from the entry holding offset
// from to the head, given the last entry's header (from the first entry
// when from is trimmed already).
func BytesFrom(ctx context.Context, log lakestream.Log, from int64, last lakestream.EntryHeader) (int64, error) {
	if from >= last.End() {
		return 0, nil
	}
	h, err := log.EntryHeader(ctx, from)
	if errors.Is(err, lakestream.ErrOffsetTrimmed) {
		first, ferr := log.FirstOffset(ctx)
		if ferr != nil {
			return 0, ferr
		}
		if first >= last.End() {
			return 0, nil
		}
		h, err = log.EntryHeader(ctx, first)
	}
	if err != nil {
		return 0, err
	}
	return last.CumulativeSize - h.CumulativeSize + int64(h.Size), nil
}
