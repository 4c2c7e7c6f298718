package gateway

// Topic compaction, Pulsar's (docs/compacted-topics.md): a compaction of a
// topic-partition computes the latest record of every key up to a horizon
// (the log's head when it starts) and writes the original entries holding
// them to a compacted log — an internal stream of its own,
// __lakegate/compacted/<log id>-<generation>, never materialized as a
// table — in offset order (actors/compacted.go gives the entry format). It
// then records the new generation and horizon in the log's internal
// durable cursor __lakegate.compaction (mark-delete = horizon − 1,
// properties generation, kept, removed) under the topic's ownership, and
// drops the previous compacted stream. A compaction starts from the
// previous compacted log and the log after its horizon, so each one reads
// what is new once.
//
// readCompacted subscriptions (Exclusive, Failover, readers) read the
// compacted log below the horizon and the log from it (actors.CompactedView,
// subscription_actor.go readCompacted). The compaction cursor holds the log
// back from retention below the horizon until compacted.
//
// A compaction runs on the topic's owner, one at a time per partition,
// started by the admin API (PUT …/compaction) or by the compaction
// threshold policy (the bytes of the log past the horizon exceed
// compactionThreshold; checked every policies.checkInterval). Bounded by
// compactionKeysMax keys: past it the compaction fails (ERROR status) and
// the previous compacted view stays.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
)

const (
	// compactionCursor is the internal cursor recording the compacted view.
	compactionCursor = actors.CompactionCursor
	// compactedNamespace holds the compacted logs (hidden from listings).
	compactedNamespace = adminHiddenTenant + "/compacted"
	// compactionKeysMax bounds the keys one compaction holds in memory.
	compactionKeysMax = 1_000_000
	// compactionReadRecords and compactionReadBytes bound one read of a
	// compaction.
	compactionReadRecords = 1000
	compactionReadBytes   = 8 << 20
	// compactionThresholdProperty is the stream and namespace property of
	// the compaction threshold policy (bytes; docs/policies.md).
	compactionThresholdProperty = "lakegate.compactionThreshold"
)

// compactedState is a partition's compacted view.
type compactedState struct {
	gen     int64 // 0: never compacted
	horizon int64
	log     lakestream.Log
}

// compaction is what a topic keeps of its compactions.
type compaction struct {
	running atomic.Bool
	// state is the current compacted view; nil until loaded.
	state atomic.Pointer[compactedState]
	mu    struct {
		sync.Mutex
		status      string // NOT_RUN, RUNNING, SUCCESS, ERROR (Pulsar's LongRunningProcessStatus)
		lastError   string
		removed     int64
		succeededMs int64
		failedMs    int64
		durationMs  int64
	}
}

// compactedStreamID is the internal stream of log's compacted log gen.
func compactedStreamID(log lakestream.LogID, gen int64) lakestream.StreamIdentifier {
	return lakestream.StreamIdentifier{Namespace: compactedNamespace, Name: fmt.Sprintf("%d-%d", log, gen)}
}

// compactedView returns the topic's view for readCompacted subscriptions.
func (t *topic) compactedView() actors.CompactedView { return topicCompactedView{t} }

type topicCompactedView struct{ t *topic }

// Current implements actors.CompactedView.
func (v topicCompactedView) Current(ctx context.Context) (lakestream.Log, int64, bool, error) {
	st, err := v.t.loadCompactedState(ctx)
	if err != nil || st.gen == 0 {
		return nil, 0, false, err
	}
	return st.log, st.horizon, true, nil
}

// loadCompactedState returns the current compacted view, reading the
// compaction cursor the first time.
func (t *topic) loadCompactedState(ctx context.Context) (*compactedState, error) {
	if st := t.compaction.state.Load(); st != nil {
		return st, nil
	}
	st := &compactedState{}
	c, err := t.log.LoadCursor(ctx, compactionCursor)
	switch {
	case errors.Is(err, lakestream.ErrNoSuchCursor):
	case err != nil:
		return nil, err
	default:
		st.gen, st.horizon = c.Properties()["generation"], c.MarkDeleteOffset()+1
		c.Close(ctx)
		if st.gen > 0 {
			if st.log, err = t.srv.cfg.Catalog.OpenLog(ctx, compactedStreamID(t.log.ID(), st.gen), 0); err != nil {
				return nil, fmt.Errorf("compacted log of %s: %w", t.name, err)
			}
		}
	}
	t.compaction.state.CompareAndSwap(nil, st)
	return t.compaction.state.Load(), nil
}

// startCompaction starts a compaction of t in the background; false when
// one is running already.
func (t *topic) startCompaction() bool {
	if !t.compaction.running.CompareAndSwap(false, true) {
		return false
	}
	t.setCompactionStatus("RUNNING", "", 0, 0)
	go func() {
		defer t.compaction.running.Store(false)
		start := time.Now()
		ctx, cancel := context.WithCancel(t.srv.ctx)
		defer cancel()
		go func() {
			select {
			case <-t.unloaded:
				cancel()
			case <-ctx.Done():
			}
		}()
		removed, err := t.compact(ctx)
		if err != nil {
			t.srv.cfg.Logger.Warn("topic compaction failed", "topic", t.name.String(), "err", err)
			t.setCompactionStatus("ERROR", err.Error(), 0, time.Since(start))
			return
		}
		t.setCompactionStatus("SUCCESS", "", removed, time.Since(start))
	}()
	return true
}

func (t *topic) setCompactionStatus(status, lastError string, removed int64, took time.Duration) {
	t.compaction.mu.Lock()
	defer t.compaction.mu.Unlock()
	c := &t.compaction.mu
	c.status, c.lastError = status, lastError
	switch status {
	case "SUCCESS":
		c.removed, c.succeededMs, c.durationMs = removed, time.Now().UnixMilli(), took.Milliseconds()
	case "ERROR":
		c.failedMs = time.Now().UnixMilli()
	}
}

// compactionStatus is Pulsar's LongRunningProcessStatus and the stats'
// compaction record.
func (t *topic) compactionStatus() (status, lastError string, removed, succeededMs, failedMs, durationMs int64) {
	t.compaction.mu.Lock()
	defer t.compaction.mu.Unlock()
	c := &t.compaction.mu
	status = c.status
	if status == "" {
		status = "NOT_RUN"
	}
	return status, c.lastError, c.removed, c.succeededMs, c.failedMs, c.durationMs
}

// compactedSource is one source of entries a compaction reads, in offset
// order: the previous compacted log, then the log from its horizon.
type compactedSource struct {
	log       lakestream.Log
	from, to  int64 // original offsets [from, to)
	compacted bool  // entries are compacted-log entries
	clogFirst int64
	clogNext  int64
}

// each calls f with every entry of src in [from, to), in order: its
// offset, record count and bytes (for a compacted log: its entries, whole
// or single messages out of batches).
func (src compactedSource) each(ctx context.Context, f func(off int64, records int32, entry []byte) error) error {
	pos, end := src.from, src.to
	if src.compacted {
		pos, end = src.clogFirst, src.clogNext
	}
	for pos < end {
		es, err := src.log.ReadEntries(ctx, pos, compactionReadRecords, compactionReadBytes)
		if errors.Is(err, lakestream.ErrOffsetTrimmed) && !src.compacted {
			if pos, err = src.log.FirstOffset(ctx); err == nil {
				continue
			}
		}
		if err != nil {
			return err
		}
		if len(es) == 0 {
			return nil
		}
		for _, e := range es {
			if !src.compacted {
				if e.Offset >= end {
					return nil
				}
				if err := f(e.Offset, e.Records, e.Payload); err != nil {
					return err
				}
				continue
			}
			ce, err := actors.DecodeCompactedEntry(e.Payload)
			if err != nil {
				return fmt.Errorf("compacted log %d at %d: %w", src.log.ID(), e.Offset, err)
			}
			if err := f(ce.Offset, ce.Records, ce.Entry); err != nil {
				return err
			}
		}
		pos = es[len(es)-1].End()
	}
	return nil
}

// compact runs one compaction of t (see the file comment) and returns how
// many records it removed.
func (t *topic) compact(ctx context.Context) (int64, error) {
	s := t.srv
	old, err := t.loadCompactedState(ctx)
	if err != nil {
		return 0, err
	}
	horizon, err := t.log.NextOffset(ctx)
	if err != nil {
		return 0, err
	}
	if old.gen > 0 && horizon == old.horizon {
		return 0, nil // nothing new
	}
	var sources []compactedSource
	if old.gen > 0 {
		first, err := old.log.FirstOffset(ctx)
		if err != nil {
			return 0, err
		}
		next, err := old.log.NextOffset(ctx)
		if err != nil {
			return 0, err
		}
		sources = append(sources, compactedSource{log: old.log, compacted: true, clogFirst: first, clogNext: next})
	}
	from := old.horizon
	if first, err := t.log.FirstOffset(ctx); err != nil {
		return 0, err
	} else if first > from {
		from = first
	}
	sources = append(sources, compactedSource{log: t.log, from: from, to: horizon})

	// Pass 1: the latest record of each key.
	kc := actors.NewKeyCompactor(compactionKeysMax)
	maxBytes := s.cfg.MaxMessageSize * 4
	for _, src := range sources {
		err := src.each(ctx, func(off int64, records int32, entry []byte) error {
			keys, err := protocol.EntryRecordKeys(entry, maxBytes)
			if err != nil {
				keys = nil // unreadable: kept whole
			}
			return kc.Add(off, records, keys)
		})
		if err != nil {
			return 0, err
		}
	}
	survivors, removed := kc.Survivors()

	// Pass 2: the surviving entries into a new compacted log.
	gen := old.gen + 1
	id := compactedStreamID(t.log.ID(), gen)
	if _, err := s.cfg.Catalog.CreateNamespace(ctx, compactedNamespace, nil); err != nil && !errors.Is(err, lakestream.ErrAlreadyExists) {
		return 0, err
	}
	disabled := false
	if _, err := s.cfg.Catalog.CreateStream(ctx, id, lakestream.StreamConfig{}, lakestream.Partitioning{},
		lakestream.SchemaConfig{Type: lakestream.SchemaNone}, nil, &lakestream.TableMaterializationPolicy{Enabled: &disabled}); err != nil {
		return 0, fmt.Errorf("creating the compacted log: %w", err)
	}
	done := false
	defer func() {
		if !done {
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			s.cfg.Catalog.DropStream(dctx, id, true)
			cancel()
		}
	}()
	clog, err := s.cfg.Catalog.OpenLog(ctx, id, 0)
	if err != nil {
		return 0, err
	}
	var (
		wg      sync.WaitGroup
		errMu   sync.Mutex
		appendE error
	)
	for _, src := range sources {
		appendOne := func(e actors.CompactedEntry) error {
			wg.Add(1)
			err := clog.AppendAsync(ctx, 1, actors.EncodeCompactedEntry(nil, e), func(_ lakestream.EntryHeader, err error) {
				if err != nil {
					errMu.Lock()
					appendE = errors.Join(appendE, err)
					errMu.Unlock()
				}
				wg.Done()
			}, lakestream.WithPublishTime(e.Offset+1), lakestream.WithDonatedPayload())
			if err != nil {
				wg.Done()
			}
			return err
		}
		err := src.each(ctx, func(off int64, records int32, entry []byte) error {
			keep, ok := survivors[off]
			if !ok {
				return nil
			}
			if keep == nil || len(keep) == int(records) {
				return appendOne(actors.CompactedEntry{Offset: off, Records: records, Entry: entry})
			}
			// Some messages of a batch survive: each becomes an entry of
			// its own at its record's offset.
			slices.Sort(keep)
			for _, i := range keep {
				single, err := protocol.SingleFromBatch(entry, int(i), maxBytes)
				if err != nil {
					return fmt.Errorf("entry %d, message %d: %w", off, i, err)
				}
				if err := appendOne(actors.CompactedEntry{Offset: off + int64(i), Records: 1, Entry: single}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			wg.Wait()
			return 0, err
		}
	}
	wg.Wait()
	if appendE != nil {
		return 0, fmt.Errorf("writing the compacted log: %w", appendE)
	}

	// Switch: the cursor names the new generation, under the ownership.
	c, err := t.log.OpenCursor(ctx, compactionCursor, -1, t.guardOpts()...)
	if err != nil {
		return 0, err
	}
	err = c.MarkDelete(ctx, horizon-1, map[string]int64{"generation": gen, "removed": removed, "kept": kc.Records() - removed})
	c.Close(ctx)
	if err != nil {
		return 0, fmt.Errorf("recording the compaction: %w", err)
	}
	done = true
	t.compaction.state.Store(&compactedState{gen: gen, horizon: horizon, log: clog})
	if old.gen > 0 {
		if err := s.cfg.Catalog.DropStream(ctx, compactedStreamID(t.log.ID(), old.gen), true); err != nil && !errors.Is(err, lakestream.ErrNoSuchStream) {
			s.cfg.Logger.Warn("dropping a replaced compacted log", "topic", t.name.String(), "generation", old.gen, "err", err)
		}
	}
	s.cfg.Logger.Info("topic compacted", "topic", t.name.String(), "horizon", horizon, "generation", gen, "removed", removed, "keys", kc.Keys())
	return removed, nil
}

// compactionThreshold is the compaction threshold policy that applies to
// md's stream (bytes; 0: none).
func (s *Server) compactionThreshold(ctx context.Context, md lakestream.StreamMetadata) (int64, error) {
	v, ok := md.Properties[compactionThresholdProperty]
	if !ok {
		ns, err := s.cfg.Catalog.LoadNamespace(ctx, md.ID.Namespace)
		if err != nil && !errors.Is(err, lakestream.ErrNoSuchNamespace) {
			return 0, err
		}
		if v, ok = ns.Properties[compactionThresholdProperty]; !ok {
			return 0, nil
		}
	}
	return strconv.ParseInt(v, 10, 64)
}

// maybeCompact starts a compaction when the bytes of the log past the
// horizon exceed the threshold.
func (t *topic) maybeCompact(ctx context.Context, threshold int64, v logView) error {
	if threshold <= 0 || v.next <= v.first || t.compaction.running.Load() {
		return nil
	}
	st, err := t.loadCompactedState(ctx)
	if err != nil {
		return err
	}
	b, err := t.bytesFrom(ctx, max(st.horizon, v.first), v.last)
	if err != nil || b <= threshold {
		return err
	}
	if t.startCompaction() {
		t.srv.metrics.policyActions.WithLabelValues("compaction").Inc()
	}
	return nil
}

// dropCompactedLogs drops the compacted logs of a stream's partitions
// (the stream is being deleted).
func (s *Server) dropCompactedLogs(ctx context.Context, md lakestream.StreamMetadata) error {
	var errs []error
	for i := range md.Partitioning.LogCount() {
		lg, err := s.cfg.Catalog.OpenLog(ctx, md.ID, i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c, err := lg.LoadCursor(ctx, compactionCursor)
		if errors.Is(err, lakestream.ErrNoSuchCursor) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		gen := c.Properties()["generation"]
		c.Close(ctx)
		if gen > 0 {
			if err := s.cfg.Catalog.DropStream(ctx, compactedStreamID(lg.ID(), gen), true); err != nil && !errors.Is(err, lakestream.ErrNoSuchStream) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
