package gateway

// Producer deduplication (Pulsar's brokerDeduplication, per topic).
//
// Off by default; on for a stream whose property "lakegate.dedup" is
// "true" (read when the gateway loads the topic: changing it takes effect
// when the topic is next loaded, e.g. after a restart or an unload).
//
// State: per producer name, the highest sequence id whose entry is
// durable in this partition's log. A SEND whose highest sequence id
// (max(sequence_id, highest_sequence_id)) is not above it is a duplicate:
// it is not appended and its receipt names message id (-1, -1), as in
// Pulsar. PRODUCER_SUCCESS carries it as last_sequence_id, so a client
// that restarts under the same name continues numbering after it.
//
// A SEND racing an append in flight that may cover it (a client resending
// on a new connection while its old connection's append is still running)
// waits for that append, then is judged against the outcome. Decisions
// are taken at the producer's ordering point (see producer.submit), so one
// producer's SENDs are judged in order.
//
// Persistence: the durable cursor dedupCursorName of each log keeps a
// snapshot in its properties (producer name → highest sequence id) with
// its mark-delete offset at the last entry the snapshot covers. Snapshots
// are taken when the topic has no append in flight, at most every
// dedupSnapshotEntries appends, and when a producer closes. Loading the
// topic reads the snapshot and replays the log after it (producer_name,
// sequence_id and highest_sequence_id of every entry's metadata), so the
// state survives restarts and crashes exactly.
//
// Failed appends: appends are pipelined, so an append can fail (store or
// etcd unavailable) while a later one of the same producer succeeds,
// leaving the failed sequence id below the highest durable one. The
// state remembers such failures (per producer name, the highest sequence
// ids of failed appends, at most dedupFailedMax, lowest evicted first) and
// appends their resends instead of answering them as duplicates, which
// would acknowledge a message that was never stored. An append whose
// outcome was indeterminate counts as failed: its resend may then be
// stored twice, never lost. (Pulsar instead fences the topic on a write
// failure; e2e TestEtcdClusterMemberLoss found the loss.)
//
// Limits (documented, not yet handled): the state is per gateway node (two
// nodes serving one partition would not share it); the failures above are
// remembered in memory only (a resend after a gateway restart is judged by
// the durable state alone); a continuously busy topic (never without appends in flight) takes no
// snapshot until a producer closes, so the replay on load may be long.

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
)

const (
	// dedupProperty is the stream property that turns deduplication on.
	dedupProperty = "lakegate.dedup"
	// dedupCursorName is the log cursor holding the dedup snapshot. Admin
	// listings should hide cursors named with the "__lakegate." prefix.
	dedupCursorName = "__lakegate.dedup"
	// dedupSnapshotEntries: appends between snapshots, at most.
	dedupSnapshotEntries = 1000
	// dedupReplayRecordsMax bounds one read of the replay on load, in records.
	dedupReplayRecordsMax = 1000
	// dedupReplayBytesMax bounds one read of the replay on load, in bytes.
	dedupReplayBytesMax = 4 << 20
	// dedupFailedMax bounds the failed appends remembered per producer
	// name (a client resends at most its pending queue, 1000 messages by
	// default in the Go client).
	dedupFailedMax = 10000
)

// internalCursorPrefix starts the names of cursors the gateway keeps for
// itself (dedupCursorName); they are not subscriptions.
const internalCursorPrefix = "__lakegate."

// isInternalCursor reports whether a log cursor is the gateway's own, not a
// subscription (admin listings and stats should skip it).
func isInternalCursor(name string) bool { return strings.HasPrefix(name, internalCursorPrefix) }

// dedupState is one log's deduplication state. Safe for concurrent use.
type dedupState struct {
	cursor lakestream.LogCursor
	topic  string
	logger *slog.Logger

	mu struct {
		sync.Mutex
		persisted map[string]int64              // producer name → highest durable sequence id
		inflight  map[string]map[int64]int      // producer name → highest seq ids of appends in flight (counts)
		failed    map[string]map[int64]struct{} // producer name → highest seq ids of failed appends (not known durable)
		changed   chan struct{}                 // closed and replaced whenever an append ends
		appended  int                           // appends since the last snapshot
		lastEnd   int64                         // end offset of the highest completed append
		pending   int                           // appends in flight, all producers
		snapshot  bool                          // a snapshot is being written
	}
}

// loadDedup opens the dedup cursor of t's log and rebuilds the state.
func loadDedup(ctx context.Context, t *topic, logger *slog.Logger) (*dedupState, error) {
	last, err := t.log.LastOffset(ctx)
	if err != nil {
		return nil, err
	}
	// A new cursor starts at the head: dedup turned on for a topic with
	// history only knows producers from now on.
	cur, err := t.log.OpenCursor(ctx, dedupCursorName, last)
	if err != nil {
		return nil, err
	}
	d := &dedupState{cursor: cur, topic: t.name.String(), logger: logger}
	d.mu.persisted = map[string]int64{}
	d.mu.inflight = map[string]map[int64]int{}
	d.mu.failed = map[string]map[int64]struct{}{}
	d.mu.changed = make(chan struct{})
	maps.Copy(d.mu.persisted, cur.Properties())
	start := cur.MarkDeleteOffset() + 1
	d.mu.lastEnd = start
	for {
		es, err := t.log.ReadEntries(ctx, start, dedupReplayRecordsMax, dedupReplayBytesMax)
		if errors.Is(err, lakestream.ErrOffsetTrimmed) {
			if start, err = t.log.FirstOffset(ctx); err != nil {
				cur.Close(ctx)
				return nil, err
			}
			continue
		}
		if err != nil {
			cur.Close(ctx)
			return nil, err
		}
		if len(es) == 0 {
			break
		}
		for _, e := range es {
			meta, _, err := protocol.SplitEntry(e.Payload)
			if err != nil {
				continue
			}
			md, err := protocol.ParseMetadata(meta)
			if err != nil || md.GetProducerName() == "" {
				continue
			}
			h := int64(max(md.GetSequenceId(), md.GetHighestSequenceId()))
			if prev, ok := d.mu.persisted[md.GetProducerName()]; !ok || h > prev {
				d.mu.persisted[md.GetProducerName()] = h
			}
		}
		start = es[len(es)-1].End()
		d.mu.lastEnd = start
	}
	return d, nil
}

// lastSequenceID is what PRODUCER_SUCCESS reports for a producer name.
func (d *dedupState) lastSequenceID(name string) int64 {
	if d == nil {
		return -1
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if v, ok := d.mu.persisted[name]; ok {
		return v
	}
	return -1
}

// admit judges a SEND of producer name with sequence ids [seq, highest].
// dup: answer (-1,-1) without appending. Otherwise the caller appends and
// must call finish(name, highest, ...) exactly once.
func (d *dedupState) admit(ctx context.Context, name string, seq, highest int64) (dup bool, err error) {
	for {
		d.mu.Lock()
		if p, ok := d.mu.persisted[name]; ok && highest <= p {
			if _, failed := d.mu.failed[name][highest]; !failed {
				d.mu.Unlock()
				return true, nil
			}
		}
		covered := false
		for h := range d.mu.inflight[name] {
			if h >= seq {
				covered = true
				break
			}
		}
		if !covered {
			if d.mu.inflight[name] == nil {
				d.mu.inflight[name] = map[int64]int{}
			}
			d.mu.inflight[name][highest]++
			d.mu.pending++
			d.mu.Unlock()
			return false, nil
		}
		changed := d.mu.changed
		d.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// finish records the outcome of an admitted append.
func (d *dedupState) finish(name string, highest int64, h lakestream.EntryHeader, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if m := d.mu.inflight[name]; m != nil {
		if m[highest]--; m[highest] <= 0 {
			delete(m, highest)
		}
		if len(m) == 0 {
			delete(d.mu.inflight, name)
		}
	}
	d.mu.pending--
	if err != nil {
		d.rememberFailedLocked(name, highest)
	} else if f := d.mu.failed[name]; f != nil {
		delete(f, highest)
		if len(f) == 0 {
			delete(d.mu.failed, name)
		}
	}
	if err == nil {
		if p, ok := d.mu.persisted[name]; !ok || highest > p {
			d.mu.persisted[name] = highest
		}
		d.mu.lastEnd = max(d.mu.lastEnd, h.End())
		d.mu.appended++
	}
	close(d.mu.changed)
	d.mu.changed = make(chan struct{})
	if d.mu.appended >= dedupSnapshotEntries {
		d.snapshotLocked()
	}
}

// rememberFailedLocked records that the append of name up to highest
// failed, evicting the lowest remembered failure beyond dedupFailedMax.
func (d *dedupState) rememberFailedLocked(name string, highest int64) {
	if d.mu.failed == nil {
		d.mu.failed = map[string]map[int64]struct{}{}
	}
	f := d.mu.failed[name]
	if f == nil {
		f = map[int64]struct{}{}
		d.mu.failed[name] = f
	}
	f[highest] = struct{}{}
	if len(f) > dedupFailedMax {
		lowest := highest
		for h := range f {
			lowest = min(lowest, h)
		}
		delete(f, lowest)
	}
}

// snapshotLocked writes a snapshot in the background when no append is in
// flight (so the state covers every entry below lastEnd).
func (d *dedupState) snapshotLocked() {
	if d.mu.pending > 0 || d.mu.snapshot || d.mu.appended == 0 {
		return
	}
	d.mu.snapshot = true
	d.mu.appended = 0
	props := maps.Clone(d.mu.persisted)
	upTo := d.mu.lastEnd - 1
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := d.cursor.MarkDelete(ctx, upTo, props); err != nil {
			d.logger.Warn("dedup snapshot failed", "topic", d.topic, "err", err)
		}
		d.mu.Lock()
		d.mu.snapshot = false
		d.mu.Unlock()
	}()
}

// snapshot takes a snapshot now if one is due (a producer closed).
func (d *dedupState) snapshot() {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.snapshotLocked()
}
