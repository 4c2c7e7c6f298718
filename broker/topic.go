package broker

// A served topic's operations (Topic, registry.go): stats, subscriptions,
// limits, the policies' view (PolicyTopic) and the admin REST's
// (ServedTopic).
//
// Stats (TopicStats, Pulsar's shape).
//
// What is measured and what is not:
//   - rates (msgRateIn/Out, throughput) are per second over the interval
//     since the previous stats request at least 1 s before (broker.RateMeter),
//     counted on this node: publishers by their receipts, consumers by the
//     messages delivered to them;
//   - msgInCounter / bytesInCounter count every record / payload byte
//     appended since the log was created (not since this node started);
//   - storageSize is the payload bytes of the readable entries (no index or
//     object overhead);
//   - msgBacklog counts the readable records not acknowledged (above the
//     mark-delete point and not individually acknowledged), from the
//     cursor's state (the running subscription's snapshot of it, or the
//     persisted one); backlogSize is the payload bytes from the mark-delete
//     point on, individually acknowledged entries included;
//   - publishers carry producerName, producerId, accessMode, address,
//     clientVersion and metadata;
//   - consumers[] lists the consumers connected to this node with their
//     name, address, clientVersion, metadata, rates, availablePermits
//     (permits asked for and not used yet) and unackedMessages (records
//     delivered and not acknowledged), the last two from the subscription
//     actor; the subscription's unackedMessages sums every consumer's;
//   - a subscription whose cursor is not loaded has type "" (the type is a
//     property of connected consumers, not stored).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// Stats (ServedTopic) builds one topic's (or partition's) stats.
func (t *Topic[P, C]) Stats(ctx context.Context, createdMs int64) (TopicStats, error) {
	st := NewTopicStats(createdMs)
	first, err := t.log.FirstOffset(ctx)
	if err != nil {
		return st, err
	}
	next, err := t.log.NextOffset(ctx)
	if err != nil {
		return st, err
	}
	var last lakestream.EntryHeader
	if next > first {
		if last, err = t.log.EntryHeader(ctx, next-1); err != nil {
			return st, err
		}
		if st.StorageSize, err = BytesFrom(ctx, t.log, first, last); err != nil {
			return st, err
		}
		st.MsgInCounter, st.BytesInCounter = next, last.CumulativeSize
		st.AverageMsgSize = float64(last.CumulativeSize) / float64(next)
		st.LastPublishTimestamp = last.PublishTimeMs
	}
	st.BacklogSize = st.StorageSize
	_, _, rec, err := t.compaction.Status(ctx)
	if err != nil {
		return st, err
	}
	st.Compaction = CompactionStats{LastCompactionRemovedEventCount: rec.Removed, LastCompactionSucceedTimestamp: rec.SucceededMs,
		LastCompactionFailedTimestamp: rec.FailedMs, LastCompactionDurationTimeInMills: rec.DurationMs}

	now := time.Now()
	t.mu.Lock()
	for _, p := range t.mu.producers {
		ps := p.PublisherStats(now)
		st.Publishers = append(st.Publishers, ps)
		st.MsgRateIn += ps.MsgRateIn
		st.MsgThroughputIn += ps.MsgThroughputIn
	}
	t.mu.Unlock()

	names, err := t.subscriptionNames(ctx)
	if err != nil {
		return st, err
	}
	for _, name := range names {
		ss, ok, err := t.subscriptionStats(ctx, name, next, last)
		if err != nil {
			return st, err
		}
		if ok {
			st.Subscriptions[name] = ss
			st.MsgRateOut += ss.MsgRateOut
			st.MsgThroughputOut += ss.MsgThroughputOut
		}
	}
	return st, nil
}

// subscriptionStats reports one subscription; ok is false when it vanished
// meanwhile.
func (t *Topic[P, C]) subscriptionStats(ctx context.Context, name string, next int64, last lakestream.EntryHeader) (SubscriptionStats, bool, error) {
	ss := SubscriptionStats{Consumers: []ConsumerStats{}, IsDurable: true}
	t.mu.Lock()
	sub := t.liveSubLocked(name)
	t.mu.Unlock()
	if sub == nil {
		b, ok, err := t.IdleBacklog(ctx, name)
		if !ok || err != nil {
			if sub = t.liveSub(name); sub == nil || err != nil {
				return ss, false, err
			}
		} else {
			ss.MsgBacklog, ss.BacklogSize = b.Records, b.Bytes
			return ss, true, nil
		}
	}
	info, err := sub.Info()
	if err != nil {
		return ss, false, nil // stopped meanwhile
	}
	ss.Type = info.Type.String()
	ss.MsgDelayed = int64(info.Delayed)
	ss.BlockedOnUnacked = info.BlockedOnUnacked
	ss.KeySharedMode = info.KeySharedMode
	durable, err := t.hasCursor(ctx, name)
	if err != nil {
		return ss, false, err
	}
	ss.IsDurable = durable
	now := time.Now()
	for _, c := range t.end.Watchers(name) {
		cs := c.ConsumerStats(now, info)
		ss.Consumers = append(ss.Consumers, cs)
		ss.DrainingHashesCount += cs.DrainingHashesCount
		ss.DrainingHashesClearedTotal += cs.DrainingHashesClearedTotal
		ss.DrainingHashesUnackedMessages += cs.DrainingHashesUnackedMessages
		ss.MsgRateOut += cs.MsgRateOut
		ss.MsgThroughputOut += cs.MsgThroughputOut
		ss.MsgRateRedeliver += cs.MsgRateRedeliver
	}
	for _, cc := range info.ConsumerCounts {
		ss.UnackedMessages += cc.UnackedRecords // every consumer's, wherever connected
	}
	if ss.MsgBacklog, err = t.Backlog(ctx, info, next); err != nil {
		return ss, false, err
	}
	if from := info.MarkDeleteOffset + 1; from < next {
		if ss.BacklogSize, err = BytesFrom(ctx, t.log, from, last); err != nil {
			return ss, false, err
		}
	}
	return ss, true, nil
}

// IdleBacklog counts the backlog of a durable subscription no actor
// runs, from its stored cursor. ok is false when there is no such cursor
// or an actor runs the subscription now (ask it instead).
func (t *Topic[P, C]) IdleBacklog(ctx context.Context, name string) (lakestream.Backlog, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock() // no actor can load the cursor while t.mu is held
	if t.liveSubLocked(name) != nil {
		return lakestream.Backlog{}, false, nil
	}
	c, err := t.log.LoadCursor(ctx, name)
	if errors.Is(err, lakestream.ErrNoSuchCursor) {
		return lakestream.Backlog{}, false, nil
	}
	if err != nil {
		return lakestream.Backlog{}, false, err
	}
	b, err := c.Backlog(ctx)
	c.Close(ctx)
	return b, err == nil, err
}

// liveSub returns the running actor of subscription name, or nil.
func (t *Topic[P, C]) liveSub(name string) *actors.SubscriptionActor {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.liveSubLocked(name)
}

// Backlog is the number of records a running subscription has not
// acknowledged: the readable ones above its mark-delete point less the
// ones acknowledged individually (Pulsar's msgBacklog). next is the log's
// head.
func (t *Topic[P, C]) Backlog(ctx context.Context, info actors.SubscriptionInfo, next int64) (int64, error) {
	from := info.MarkDeleteOffset + 1
	if from >= next {
		return 0, nil
	}
	n, err := t.log.MessageCount(ctx, from, next) // readable records in [from, next)
	if err != nil {
		return 0, err
	}
	return info.UnackedRecords(next-n, next), nil
}

// liveSubLocked returns the running actor of subscription name, or nil.
// Needs t.mu.
func (t *Topic[P, C]) liveSubLocked(name string) *actors.SubscriptionActor {
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
func (t *Topic[P, C]) subscriptionNames(ctx context.Context) ([]string, error) {
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

func (t *Topic[P, C]) hasCursor(ctx context.Context, name string) (bool, error) {
	names, err := t.log.CursorNames(ctx)
	if err != nil {
		return false, err
	}
	return slices.Contains(names, name), nil
}

// CreateSubscription implements ServedTopic.
func (t *Topic[P, C]) CreateSubscription(ctx context.Context, name string, first func(context.Context) (int64, error)) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	exists, err := t.hasCursor(ctx, name)
	if err != nil {
		return err
	}
	if exists || t.liveSubLocked(name) != nil {
		return fmt.Errorf("%w: subscription %s already exists on %s", ErrConflict, name, t.name)
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

// DeleteSubscription implements ServedTopic. Disconnected consumers
// may subscribe again, creating the subscription anew, as with Pulsar.
func (t *Topic[P, C]) DeleteSubscription(ctx context.Context, name string, force bool) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	found := false
	if sub := t.liveSubLocked(name); sub != nil {
		found = true
		info, err := sub.Info()
		if err == nil && info.Consumers > 0 {
			if !force {
				return true, fmt.Errorf("%w: subscription %s of %s has %d connected consumers (use ?force=true)", ErrPrecondition, name, t.name, info.Consumers)
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

// ResetSubscription implements ServedTopic: target is the next
// offset delivered and nothing at or above it is acknowledged.
func (t *Topic[P, C]) ResetSubscription(ctx context.Context, name string, target int64) (bool, error) {
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
		return true, fmt.Errorf("%w: subscription %s of %s was loaded during the reset: try again", ErrConflict, name, t.name)
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

// SubscriptionInfo implements ServedTopic.
func (t *Topic[P, C]) SubscriptionInfo(ctx context.Context, name string) (actors.SubscriptionInfo, error) {
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

// Attached implements ServedTopic.
func (t *Topic[P, C]) Attached() (producers int, consumers bool) {
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

// Terminate implements ServedTopic: the log is fenced (every later
// append fails: producers get TopicTerminatedError), new producers are
// refused, and consumers are sent REACHED_END_OF_TOPIC once they have read
// everything (broker/end_of_topic.go).
func (t *Topic[P, C]) Terminate(ctx context.Context) error {
	if err := t.log.Fence(ctx); err != nil {
		return err
	}
	t.part.Terminate() // new producers are refused at once
	if end, err := t.log.NextOffset(ctx); err == nil {
		t.end.MarkTerminated(end) // consumers that read everything are told now
	}
	return nil
}

// LastMessageID implements ServedTopic.
func (t *Topic[P, C]) LastMessageID(ctx context.Context) (protocol.MessageID, error) {
	return t.lastMessageID(ctx)
}

// Partition implements ServedTopic.
func (t *Topic[P, C]) Partition() int32 { return t.partition }

// WriteLatency is the latency of the appends of the producers attached
// through this node since the topic was loaded here; the front door that
// answers SENDs observes it.
func (t *Topic[P, C]) WriteLatency() *WriteLatency { return &t.writeLatency }

// guardOpts are the cursor options of writes only the owner may make.
func (t *Topic[P, C]) guardOpts() []lakestream.CursorOption { return GuardOpts(t.owner) }

// The topic as the enforcement of policies sees it (enforcement.go) and
// the admin REST (ServedTopic).

// Name implements PolicyTopic.
func (t *Topic[P, C]) Name() string { return t.name.String() }

// Stream implements PolicyTopic.
func (t *Topic[P, C]) Stream() lakestream.StreamIdentifier { return t.stream }

// Log implements PolicyTopic.
func (t *Topic[P, C]) Log() lakestream.Log { return t.log }

// Compaction implements PolicyTopic.
func (t *Topic[P, C]) Compaction() *TopicCompaction { return t.compaction }

// Closing implements PolicyTopic.
func (t *Topic[P, C]) Closing() bool { return t.closing.Load() }

// ApplyLimits implements PolicyTopic (limits.go).
func (t *Topic[P, C]) ApplyLimits(l TopicLimits) { t.applyLimits(l) }

// SubscriptionNames implements PolicyTopic
// (topic.go).
func (t *Topic[P, C]) SubscriptionNames(ctx context.Context) ([]string, error) {
	return t.subscriptionNames(ctx)
}

// LiveSubscription implements PolicyTopic.
func (t *Topic[P, C]) LiveSubscription(name string) *actors.SubscriptionActor { return t.liveSub(name) }

// ExpireBelow implements PolicyTopic: it acknowledges every record of subscription name below
// offset before: through its actor when it runs, else in its stored
// cursor (written under the topic's ownership).
func (t *Topic[P, C]) ExpireBelow(ctx context.Context, name string, before int64) error {
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

// DisconnectProducers implements PolicyTopic: it closes the topic's producers (CLOSE_PRODUCER: they
// reconnect, and meet the backlog quota). Their SENDs in flight are still
// answered. It returns how many it closed.
func (t *Topic[P, C]) DisconnectProducers() int {
	t.mu.Lock()
	ps := make([]P, 0, len(t.mu.producers))
	for _, p := range t.mu.producers {
		ps = append(ps, p)
	}
	t.mu.Unlock()
	n := 0
	for _, p := range ps {
		if p.Disconnect() {
			n++
		}
	}
	return n
}

// Limits returns the topic's current limits.
func (t *Topic[P, C]) Limits() TopicLimits { return t.lim.Limits() }

// RefreshLimits rereads the topic's limits and applies them.
func (t *Topic[P, C]) RefreshLimits(ctx context.Context) error {
	md, err := t.brk.cfg.Catalog.LoadStream(ctx, t.stream)
	if err != nil {
		return err
	}
	l, err := t.brk.LimitsOf(ctx, md)
	if err != nil {
		return err
	}
	t.applyLimits(l)
	return nil
}

// applyLimits makes l the topic's limits: the rates at once, the
// unacknowledged limits by telling the running subscriptions.
func (t *Topic[P, C]) applyLimits(l TopicLimits) {
	t.lim.applying.Lock()
	defer t.lim.applying.Unlock()
	old := t.lim.Apply(l)
	if old != nil && old.MaxUnackedPerConsumer == l.MaxUnackedPerConsumer && old.MaxUnackedPerSubscription == l.MaxUnackedPerSubscription {
		return
	}
	t.mu.Lock()
	subs := make([]*actors.SubscriptionActor, 0, len(t.mu.subs))
	for _, sub := range t.mu.subs {
		subs = append(subs, sub)
	}
	t.mu.Unlock()
	for _, sub := range subs {
		sub.SetUnackedLimits(l.MaxUnackedPerConsumer, l.MaxUnackedPerSubscription)
	}
}

// AddProducer attaches producer p (its partition actor id: id), refusing
// it beyond MaxProducers (t.mu.producers holds the producers attached
// through this node, the owner's).
func (t *Topic[P, C]) AddProducer(id uint64, p P) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.lim.AdmitProducer(len(t.mu.producers)); err != nil {
		return err
	}
	t.mu.producers[id] = p
	return nil
}

// ReserveConsumer and ReleaseConsumer: TopicAdmission's
// ReserveConsumer and ReleaseConsumer.
func (t *Topic[P, C]) ReserveConsumer(sub string) error { return t.lim.ReserveConsumer(sub) }

func (t *Topic[P, C]) ReleaseConsumer(sub string) { t.lim.ReleaseConsumer(sub) }

// checkSubscriptionLimitLocked refuses subscription name when it is new and
// the topic has MaxSubscriptions already (durable cursors and running
// subscriptions count). t.mu held (no subscription starts meanwhile).
func (t *Topic[P, C]) checkSubscriptionLimitLocked(ctx context.Context, name string) error {
	n := t.Limits().MaxSubscriptions
	if n <= 0 || t.liveSubLocked(name) != nil {
		return nil
	}
	names, err := t.log.CursorNames(ctx)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, c := range names {
		if !actors.IsInternalCursor(c) {
			have[c] = true
		}
	}
	if have[name] {
		return nil
	}
	for s := range t.mu.subs {
		if t.liveSubLocked(s) != nil {
			have[s] = true
		}
	}
	return t.lim.AdmitSubscription(len(have))
}

// Subscription returns the running subscription actor of the subscription
// c names, starting it (and opening or creating its cursor) if needed; a
// new one is throttled by limiters (the topic's and the subscription's
// dispatch rates).
func (t *Topic[P, C]) Subscription(ctx context.Context, c *pb.CommandSubscribe, durable bool, limiters []actors.DispatchLimiter) (*actors.SubscriptionActor, error) {
	name := c.GetSubscription()
	if name == "" || strings.ContainsAny(name, "\x00") || actors.IsInternalCursor(name) {
		return nil, fmt.Errorf("%w: subscription name %q", lakestream.ErrInvalidArgument, name)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if sub := t.mu.subs[name]; sub != nil {
		select {
		case <-sub.Done():
			delete(t.mu.subs, name)
		default:
			return sub, nil
		}
	}
	if err := t.checkSubscriptionLimitLocked(ctx, name); err != nil { // limits.go
		return nil, err
	}
	var (
		cursor   lakestream.LogCursor
		readFrom int64
		err      error
	)
	latest := c.GetInitialPosition() == pb.CommandSubscribe_Latest
	// A readCompacted subscription from the earliest (a durable one's
	// initial position, a reader's start id) reads the compacted view
	// from its start (compactedFrom), even where retention trimmed the log
	// below the horizon, as from Pulsar's compacted ledger.
	var compactedFrom int64 = -1
	earliest := !latest
	if !durable {
		m := c.GetStartMessageId()
		earliest = m == nil && !latest || m != nil && protocol.MessageIDFromPB(m).IsEarliest()
	}
	if c.GetReadCompacted() && earliest {
		if _, horizon, ok, err := t.compaction.View().Current(ctx); err != nil {
			return nil, err
		} else if ok && horizon > 0 {
			compactedFrom = 0
		}
	}
	if durable {
		initial := int64(-1)
		if latest {
			if initial, err = t.log.LastOffset(ctx); err != nil {
				return nil, err
			}
		} else {
			first, err := t.log.FirstOffset(ctx)
			if err != nil {
				return nil, err
			}
			initial = first - 1
			if compactedFrom >= 0 {
				initial = compactedFrom - 1
			}
		}
		if cursor, err = t.log.OpenCursor(ctx, name, initial); err != nil {
			return nil, err
		}
		readFrom = cursor.MarkDeleteOffset() + 1
	} else {
		start, err := t.readerStart(ctx, c.GetStartMessageId(), latest)
		if err != nil {
			return nil, err
		}
		if compactedFrom >= 0 {
			start = compactedFrom
		}
		if cursor, err = t.log.OpenEphemeralCursor(ctx, name, start); err != nil {
			return nil, err
		}
		readFrom = start
	}
	opts := actors.SubscriptionOptions{
		Name:           t.name.String() + "/" + name,
		Type:           actors.SubType(c.GetSubType()),
		PartitionIndex: t.partition,
		Log:            t.log,
		Cursor:         cursor,
		ReadFrom:       readFrom,
		Logger:         t.brk.cfg.Logger,
	}
	if c.GetReadCompacted() {
		// The subscription's mode is its first consumer's (broker/compaction.go).
		opts.Compacted = t.compaction.View()
	}
	l := t.Limits()
	opts.MaxUnackedPerConsumer, opts.MaxUnackedPerSubscription = l.MaxUnackedPerConsumer, l.MaxUnackedPerSubscription
	opts.DispatchLimiters = limiters
	sub := actors.StartSubscription(t.rt, opts)
	if durable {
		// Acknowledgements in transactions not ended yet (txn_acks.go).
		if err := t.restoreTxnAcks(ctx, sub, name); err != nil {
			sub.Close()
			return nil, err
		}
	}
	t.mu.subs[name] = sub
	return sub, nil
}

// readerStart is where a non-durable subscription starts reading: the
// first offset for earliest, the head for latest, else the entry the id
// names, whole entry or batch index alike. As with Pulsar's broker (which
// steps its non-durable cursor one entry back), the client filters: the
// Java, C++ and Go clients drop the start entry itself unless the reader
// is startMessageIdInclusive, and batch indexes before the start.
func (t *Topic[P, C]) readerStart(ctx context.Context, m *pb.MessageIdData, latest bool) (int64, error) {
	if m == nil {
		if latest {
			return t.log.NextOffset(ctx)
		}
		return t.log.FirstOffset(ctx)
	}
	id := protocol.MessageIDFromPB(m)
	switch {
	case id.IsEarliest() || id.EntryID < 0:
		return t.log.FirstOffset(ctx)
	case id.IsLatest():
		return t.log.NextOffset(ctx)
	}
	h, err := t.log.EntryHeader(ctx, id.EntryID)
	if errors.Is(err, lakestream.ErrOffsetOutOfRange) {
		return t.log.NextOffset(ctx)
	}
	if errors.Is(err, lakestream.ErrOffsetTrimmed) {
		return t.log.FirstOffset(ctx)
	}
	if err != nil {
		return 0, err
	}
	return h.Offset, nil
}

// lastMessageID is the id of the last message of the log: its last entry
// with batch index = size-1 when the entry is a batch, entry -1 when empty.
func (t *Topic[P, C]) lastMessageID(ctx context.Context) (protocol.MessageID, error) {
	ledger := int64(t.log.ID())
	last, err := t.log.LastOffset(ctx)
	if err != nil {
		return protocol.MessageID{}, err
	}
	if last < 0 {
		return protocol.NewMessageID(ledger, -1, -1, t.partition), nil
	}
	e, err := t.log.ReadEntry(ctx, last)
	if errors.Is(err, lakestream.ErrOffsetTrimmed) {
		return protocol.NewMessageID(ledger, -1, -1, t.partition), nil
	}
	if err != nil {
		return protocol.MessageID{}, err
	}
	batch := int32(-1)
	if meta, _, err := protocol.SplitEntry(e.Payload); err == nil {
		if md, err := protocol.ParseMetadata(meta); err == nil && md.NumMessagesInBatch != nil {
			batch = e.Records - 1
		}
	}
	return protocol.NewMessageID(ledger, e.Offset, batch, t.partition), nil
}

// SeekTarget is the offset a SEEK resets to.
func (t *Topic[P, C]) SeekTarget(ctx context.Context, c *pb.CommandSeek) (int64, error) {
	if c.MessagePublishTime != nil {
		return t.log.FindOffsetByTime(ctx, time.UnixMilli(int64(c.GetMessagePublishTime())))
	}
	if c.MessageId == nil {
		return 0, fmt.Errorf("%w: SEEK without message id or publish time", ErrNotAllowed)
	}
	id := protocol.MessageIDFromPB(c.GetMessageId())
	switch {
	case id.IsEarliest():
		return t.log.FirstOffset(ctx)
	case id.IsLatest():
		return t.log.NextOffset(ctx)
	case id.LedgerID != int64(t.log.ID()):
		return 0, fmt.Errorf("%w: message id %v is not of %s (ledger %d)", ErrNotAllowed, id, t.name, t.log.ID())
	}
	// The entry that holds the message; the client drops the messages of a
	// batch before the one it sought.
	return max(id.EntryID, 0), nil
}

// ForgetProducer detaches the producer of partition actor id id.
func (t *Topic[P, C]) ForgetProducer(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.mu.producers, id)
}
