package gateway

// Retention, message TTL and backlog quotas (docs/policies.md), enforced on
// the topics this node serves — their owner — every
// Config.PolicyCheckInterval, and backlog quotas also when a producer
// attaches:
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
//     of the log (-1: without limit). A log is never trimmed when neither
//     the topic nor its namespace has a retention policy: lakegate keeps
//     streams (and tables) by default, unlike Pulsar's default of 0/0. The
//     table keeps its rows: a trim removes the log's index entries and WAL
//     objects, never table files. Trims stop at entry boundaries.
//
// A topic that no node has loaded (no client, no admin request since the
// last restart) is not checked, as on a Pulsar broker.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
)

// subPosition is where one subscription of a topic stands.
type subPosition struct {
	name string
	live *actors.SubscriptionActor
	// markDelete: every record at or below it is acknowledged (in memory
	// for a running subscription); persisted: the persisted one.
	markDelete, persisted int64
	durable               bool
}

// subscriptionPositions lists the topic's subscriptions (durable cursors
// and running subscriptions, the gateway's internal cursors excepted).
func (t *topic) subscriptionPositions(ctx context.Context) ([]subPosition, error) {
	names, err := t.subscriptionNames(ctx)
	if err != nil {
		return nil, err
	}
	durable, err := t.log.CursorNames(ctx)
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
		if sub := t.liveSub(name); sub != nil {
			info, err := sub.Info()
			if err == nil {
				p.live, p.markDelete, p.persisted = sub, info.MarkDeleteOffset, info.PersistedMarkDeleteOffset
				out = append(out, p)
				continue
			}
		}
		if !p.durable {
			continue // a reader that just left
		}
		c, err := t.log.LoadCursor(ctx, name)
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

// expireBelow acknowledges every record of subscription name below
// offset before: through its actor when it runs, else in its stored
// cursor (written under the topic's ownership).
func (t *topic) expireBelow(ctx context.Context, name string, before int64) error {
	t.mu.Lock()
	if sub := t.liveSubLocked(name); sub != nil {
		t.mu.Unlock()
		return sub.Expire(before)
	}
	defer t.mu.Unlock() // no actor can open the cursor meanwhile
	c, err := t.log.LoadCursor(ctx, name, t.guardOpts()...)
	if errors.Is(err, lakestream.ErrNoSuchCursor) {
		return nil
	}
	if err != nil {
		return err
	}
	if before-1 > c.MarkDeleteOffset() {
		err = c.MarkDelete(ctx, before-1, c.Properties())
	}
	return errors.Join(err, c.Close(ctx))
}

// logView is what the policy checks read of a log once per round.
type logView struct {
	first, next int64
	last        lakestream.EntryHeader // valid when next > first
}

func (t *topic) view(ctx context.Context) (logView, error) {
	var v logView
	var err error
	if v.first, err = t.log.FirstOffset(ctx); err != nil {
		return v, err
	}
	if v.next, err = t.log.NextOffset(ctx); err != nil {
		return v, err
	}
	if v.next > v.first {
		v.last, err = t.log.EntryHeader(ctx, v.next-1)
	}
	return v, err
}

// newestWithin is the first offset from which the log holds at most
// limit payload bytes (the head when even the last entry is larger).
func (t *topic) newestWithin(ctx context.Context, v logView, limit int64) (int64, error) {
	if v.next <= v.first {
		return v.next, nil
	}
	return t.log.SearchOffset(ctx, v.first, v.next, func(h lakestream.EntryHeader) bool {
		return v.last.CumulativeSize-h.CumulativeSize+int64(h.Size) <= limit
	})
}

// quotaState says whether the topic's backlog exceeds a quota.
type quotaState struct {
	typ   string
	quota broker.BacklogQuota
	// evictTo: the offset the subscriptions over the quota are expired to.
	evictTo int64
	over    []subPosition
}

// quotasExceeded checks the backlog quotas against every subscription.
func (t *topic) quotasExceeded(ctx context.Context, quotas map[string]broker.BacklogQuota, v logView, subs []subPosition) ([]quotaState, error) {
	var out []quotaState
	for _, typ := range []string{broker.QuotaDestinationStorage, broker.QuotaMessageAge} {
		q, ok := quotas[typ]
		if !ok {
			continue
		}
		st := quotaState{typ: typ, quota: q}
		switch limit := max(q.LimitSize, q.Limit); {
		case typ == broker.QuotaDestinationStorage && limit > 0:
			for _, s := range subs {
				b, err := t.bytesFrom(ctx, s.markDelete+1, v.last)
				if err != nil {
					return nil, err
				}
				if v.next > v.first && b > limit {
					st.over = append(st.over, s)
				}
			}
			if len(st.over) > 0 {
				to, err := t.newestWithin(ctx, v, limit)
				if err != nil {
					return nil, err
				}
				st.evictTo = to
			}
		case typ == broker.QuotaMessageAge && q.LimitTime > 0:
			cutoff := time.Now().Add(-time.Duration(q.LimitTime) * time.Second)
			to, err := t.log.FindOffsetByTime(ctx, cutoff)
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

// checkBacklogQuota answers whether a producer may attach to t: an error
// (broker.ErrQuotaHold, broker.ErrQuotaException) while a producer-blocking quota is
// exceeded.
func (t *topic) checkBacklogQuota(ctx context.Context) error {
	md, err := t.srv.cfg.Catalog.LoadStream(ctx, t.stream)
	if err != nil {
		return err
	}
	pol, err := t.srv.brk.PoliciesOf(ctx, md)
	if err != nil || len(pol.Quotas) == 0 {
		return err
	}
	v, err := t.view(ctx)
	if err != nil {
		return err
	}
	subs, err := t.subscriptionPositions(ctx)
	if err != nil {
		return err
	}
	states, err := t.quotasExceeded(ctx, pol.Quotas, v, subs)
	if err != nil {
		return err
	}
	for _, st := range states {
		switch st.quota.Policy {
		case broker.QuotaHold:
			return fmt.Errorf("%w: %s quota of %s, subscription %q", broker.ErrQuotaHold, st.typ, t.name, st.over[0].name)
		case broker.QuotaException:
			return fmt.Errorf("%w: %s quota of %s, subscription %q", broker.ErrQuotaException, st.typ, t.name, st.over[0].name)
		}
	}
	return nil
}

// policyLoop enforces the policies of the served topics every
// PolicyCheckInterval.
func (s *Server) policyLoop() {
	defer s.wg.Done()
	tick := time.NewTicker(s.cfg.PolicyCheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		for _, t := range s.loadedTopics() {
			if t.closing.Load() || s.ctx.Err() != nil {
				continue
			}
			ctx, cancel := context.WithTimeout(s.ctx, policyTopicTimeout)
			if err := s.enforcePolicies(ctx, t); err != nil {
				if ctx.Err() == nil && !t.closing.Load() {
					s.cfg.Logger.Warn("enforcing a topic's policies", "topic", t.name.String(), "err", err)
				}
			} else {
				s.metrics.policyChecks.Inc()
			}
			cancel()
		}
	}
}

// policyTopicTimeout bounds one topic's policy round.
const policyTopicTimeout = 30 * time.Second

// enforcePolicies applies TTL, backlog quotas and retention to one topic.
func (s *Server) enforcePolicies(ctx context.Context, t *topic) error {
	md, err := s.cfg.Catalog.LoadStream(ctx, t.stream)
	if err != nil {
		return err
	}
	pol, err := s.brk.PoliciesOf(ctx, md)
	if err != nil {
		return err
	}
	lim, err := s.brk.LimitsOf(ctx, md) // limits.go: changed on another member
	if err != nil {
		return err
	}
	t.applyLimits(lim)
	if threshold, err := s.brk.CompactionThreshold(ctx, md); err != nil {
		return err
	} else if threshold > 0 {
		v, err := t.view(ctx)
		if err != nil {
			return err
		}
		if err := t.maybeCompact(ctx, threshold, v); err != nil {
			return fmt.Errorf("compaction threshold: %w", err)
		}
	}
	if pol.None() {
		return nil
	}
	subs, err := t.subscriptionPositions(ctx)
	if err != nil {
		return err
	}
	if pol.TTLSeconds > 0 {
		before, err := t.log.FindOffsetByTime(ctx, time.Now().Add(-time.Duration(pol.TTLSeconds)*time.Second))
		if err != nil {
			return err
		}
		for i, sp := range subs {
			if sp.markDelete+1 < before {
				if err := t.expireBelow(ctx, sp.name, before); err != nil {
					return fmt.Errorf("expiring subscription %q: %w", sp.name, err)
				}
				subs[i].markDelete = before - 1
				s.metrics.policyActions.WithLabelValues("ttl_expiry").Inc()
			}
		}
	}
	v, err := t.view(ctx)
	if err != nil {
		return err
	}
	if len(pol.Quotas) > 0 {
		states, err := t.quotasExceeded(ctx, pol.Quotas, v, subs)
		if err != nil {
			return err
		}
		for _, st := range states {
			switch st.quota.Policy {
			case broker.QuotaEviction:
				for _, sp := range st.over {
					if err := t.expireBelow(ctx, sp.name, st.evictTo); err != nil {
						return fmt.Errorf("evicting the backlog of subscription %q: %w", sp.name, err)
					}
					s.metrics.policyActions.WithLabelValues("quota_eviction").Inc()
				}
			case broker.QuotaHold, broker.QuotaException:
				if n := t.disconnectProducers(); n > 0 {
					s.metrics.policyActions.WithLabelValues("quota_producers_blocked").Inc()
					s.cfg.Logger.Info("backlog quota exceeded: producers disconnected", "topic", t.name.String(), "type", st.typ, "policy", st.quota.Policy, "producers", n)
				}
			}
		}
	}
	if pol.Retention != nil {
		return s.retain(ctx, t, md, *pol.Retention, v, subs)
	}
	return nil
}

// retain trims the log below what retention, the durable subscriptions
// and the table still need (see the file comment).
func (s *Server) retain(ctx context.Context, t *topic, md lakestream.StreamMetadata, r broker.RetentionPolicy, v logView, subs []subPosition) error {
	if v.next <= v.first || (r.TimeMinutes < 0 && r.SizeMB < 0) {
		return nil
	}
	// What retention would let go: entries older than the time limit or
	// beyond the size limit (either suffices).
	cut := v.first
	if r.TimeMinutes >= 0 {
		c, err := t.log.FindOffsetByTime(ctx, time.Now().Add(-time.Duration(r.TimeMinutes)*time.Minute))
		if err != nil {
			return err
		}
		cut = max(cut, c)
	}
	if r.SizeMB >= 0 {
		c, err := t.newestWithin(ctx, v, r.SizeMB<<20)
		if err != nil {
			return err
		}
		cut = max(cut, c)
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
	if gen, horizon, err := t.compaction.Horizon(ctx); err != nil {
		return err
	} else if gen > 0 {
		holds.KeyCompaction = horizon
	}
	if cut = lakestream.TrimFloor(cut, holds); cut <= v.first {
		return nil
	}
	mat, err := s.cfg.Catalog.ResolveMaterialization(ctx, md.ID)
	if err != nil {
		return err
	}
	if mat.Enabled != nil && *mat.Enabled {
		if holds.TableEnd, err = t.tableEnd(ctx); err != nil {
			return err
		}
		cut = lakestream.TrimFloor(cut, holds)
	}
	if cut >= v.next {
		cut = v.next
	} else if cut > v.first {
		// Never split an entry: stop at the start of the one holding cut.
		h, err := t.log.EntryHeader(ctx, cut)
		if err != nil {
			return err
		}
		cut = h.Offset
	}
	if cut <= v.first {
		return nil
	}
	if err := s.cfg.Catalog.Storage().HardTrim(ctx, t.log.ID(), cut); err != nil {
		return err
	}
	s.metrics.policyActions.WithLabelValues("retention_trim").Inc()
	s.cfg.Logger.Debug("retention: trimmed a log", "topic", t.name.String(), "below", cut)
	return nil
}

// tableEnd is the offset just past the last record of t's log that its
// table holds (0 when the table has none yet).
func (t *topic) tableEnd(ctx context.Context) (int64, error) {
	st, err := t.srv.cfg.Catalog.Stream(ctx, t.stream)
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
		if p.Log == t.log.ID() {
			return p.CompactedEnd, nil
		}
	}
	return 0, nil
}

// disconnectProducers closes the topic's producers (CLOSE_PRODUCER: they
// reconnect, and meet the backlog quota). Their SENDs in flight are still
// answered. It returns how many it closed.
func (t *topic) disconnectProducers() int {
	t.mu.Lock()
	ps := make([]*producer, 0, len(t.mu.producers))
	for _, p := range t.mu.producers {
		ps = append(ps, p)
	}
	t.mu.Unlock()
	n := 0
	for _, p := range ps {
		if !p.gone.CompareAndSwap(false, true) {
			continue
		}
		t.part.CloseProducer(p.actorID)
		p.sess.send(protocol.CloseProducer(p.id, 0))
		n++
	}
	return n
}

// maybeCompact starts a compaction when the bytes of the log past the
// horizon exceed the threshold.
func (t *topic) maybeCompact(ctx context.Context, threshold int64, v logView) error {
	if threshold <= 0 || v.next <= v.first || t.compaction.Running() {
		return nil
	}
	_, horizon, err := t.compaction.Horizon(ctx)
	if err != nil {
		return err
	}
	b, err := t.bytesFrom(ctx, max(horizon, v.first), v.last)
	if err != nil || b <= threshold {
		return err
	}
	if t.compaction.Start() {
		t.srv.metrics.policyActions.WithLabelValues("compaction").Inc()
	}
	return nil
}
