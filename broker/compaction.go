package broker

// Topic compaction, Pulsar's (docs/compacted-topics.md): a compaction of a
// topic-partition computes the latest record of every key up to a horizon
// (the log's head when it starts) and writes the original entries holding
// them to a compacted log — an internal stream of its own,
// __lakegate/compacted/<log id>-<generation>, never materialized as a
// table — in offset order (actors/compacted.go gives the entry format). It
// then records the new generation and horizon in the log's internal
// durable cursor __lakegate.compaction — the compaction record
// (actors/compacted_record.go: mark-delete = horizon − 1, properties
// generation, kept, removed and the last outcome: status, times, reason) —
// under the topic's ownership, and drops the previous compacted stream. A
// failed compaction records its failure there too, so the status and
// stats move with the topic; only RUNNING is this owner's alone. A
// compaction starts from the previous compacted log and the log after its
// horizon, so each one reads what is new once.
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
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
)

const (
	// ReservedTenant is lakegate's own tenant: its bookkeeping (the admin
	// tenant records, the compacted logs), hidden from listings, which no
	// client may use.
	ReservedTenant = "__lakegate"
	// compactionCursor is the internal cursor recording the compacted view.
	compactionCursor = actors.CompactionCursor
	// compactedNamespace holds the compacted logs (hidden from listings).
	compactedNamespace = ReservedTenant + "/compacted"
	// compactionKeysMax bounds the keys one compaction holds in memory.
	compactionKeysMax = 1_000_000
	// compactionGenerationTriesMax bounds the generations one compaction
	// tries when the names above the record's are taken (each by a
	// compaction that an unload or a crash interrupted).
	compactionGenerationTriesMax = 8
	// compactionLeftoversMax bounds the abandoned generations below a new
	// one that its compaction drops (one DropStream each).
	compactionLeftoversMax = 64
	// compactionReadRecords and compactionReadBytes bound one read of a
	// compaction.
	compactionReadRecords = 1000
	compactionReadBytes   = 8 << 20
)

// compactedState is a partition's compaction record and the compacted
// log it names.
type compactedState struct {
	gen     int64 // 0: never compacted
	horizon int64
	log     lakestream.Log
	rec     actors.CompactionRecord
}

// TopicCompaction is what a topic-partition keeps of its compactions, on
// its owner: the record (read from the compaction cursor, replaced by
// each compaction that ends) and whether one runs here now — RUNNING is
// known only to this owner; a compaction an unload interrupts records
// nothing, and the next owner reports the last one that ended. Safe for
// concurrent use.
type TopicCompaction struct {
	b    *Broker
	opts TopicCompactionOptions
	// running is set while a compaction runs here.
	running atomic.Bool
	// state is the current compacted view and record; nil until loaded.
	state atomic.Pointer[compactedState]
	// tried is the highest generation a compaction run here tried.
	tried atomic.Int64
}

// TopicCompactionOptions are what a topic-partition's compactions need of
// the topic that its owner serves.
type TopicCompactionOptions struct {
	// Name is the topic-partition's canonical name (for logs and errors).
	Name string
	// Log is the topic-partition's log.
	Log lakestream.Log
	// Guard are the options of cursor writes only the owner may make (the
	// compaction record).
	Guard []lakestream.CursorOption
	// Context ends every compaction run here when it is done (the node
	// shuts down).
	Context context.Context
	// Unloaded is closed when the topic is unloaded: a running compaction
	// stops. Closing reports whether its unload has begun.
	Unloaded <-chan struct{}
	Closing  func() bool
}

// NewTopicCompaction returns the compactions of one topic-partition this
// node serves.
func (b *Broker) NewTopicCompaction(opts TopicCompactionOptions) *TopicCompaction {
	return &TopicCompaction{b: b, opts: opts}
}

// compactedStreamID is the internal stream of log's compacted log gen.
func compactedStreamID(log lakestream.LogID, gen int64) lakestream.StreamIdentifier {
	return lakestream.StreamIdentifier{Namespace: compactedNamespace, Name: fmt.Sprintf("%d-%d", log, gen)}
}

// View returns the topic's view for readCompacted subscriptions.
func (t *TopicCompaction) View() actors.CompactedView { return topicCompactedView{t} }

type topicCompactedView struct{ t *TopicCompaction }

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
func (t *TopicCompaction) loadCompactedState(ctx context.Context) (*compactedState, error) {
	if st := t.state.Load(); st != nil {
		return st, nil
	}
	st := &compactedState{}
	c, err := t.opts.Log.LoadCursor(ctx, compactionCursor)
	switch {
	case errors.Is(err, lakestream.ErrNoSuchCursor):
	case err != nil:
		return nil, err
	default:
		st.rec, err = actors.DecodeCompactionRecord(c.MarkDeleteOffset(), c.Properties())
		c.Close(ctx)
		if err != nil {
			return nil, fmt.Errorf("compaction record of %s: %w", t.opts.Name, err)
		}
		st.gen, st.horizon = st.rec.Generation, st.rec.Horizon
		if st.gen > 0 {
			if st.log, err = t.b.cfg.Catalog.OpenLog(ctx, compactedStreamID(t.opts.Log.ID(), st.gen), 0); err != nil {
				return nil, fmt.Errorf("compacted log of %s: %w", t.opts.Name, err)
			}
		}
	}
	t.state.CompareAndSwap(nil, st)
	return t.state.Load(), nil
}

// Start starts a compaction of the topic in the background; false when
// one is running already.
func (t *TopicCompaction) Start() bool {
	if !t.running.CompareAndSwap(false, true) {
		return false
	}
	go func() {
		defer t.running.Store(false)
		start := time.Now()
		ctx, cancel := context.WithCancel(t.opts.Context)
		defer cancel()
		go func() {
			select {
			case <-t.opts.Unloaded:
				cancel()
			case <-ctx.Done():
			}
		}()
		err := t.compact(ctx, start)
		switch {
		case err == nil:
		case ctx.Err() != nil || t.opts.Closing() || errors.Is(err, lakestream.ErrGuardLost):
			// Interrupted by an unload, a shutdown or the loss of the
			// topic: the next owner reports the last compaction that
			// ended, and runs the next.
			t.b.cfg.Logger.Info("topic compaction interrupted", "topic", t.opts.Name, "err", err)
		default:
			t.b.cfg.Logger.Warn("topic compaction failed", "topic", t.opts.Name, "err", err)
			t.recordCompactionFailure(ctx, err)
		}
	}()
	return true
}

// recordCompaction writes rec to the compaction cursor under the topic's
// ownership, then makes it (with log, the compacted log it names) the
// current state.
func (t *TopicCompaction) recordCompaction(ctx context.Context, rec actors.CompactionRecord, log lakestream.Log) error {
	c, err := t.opts.Log.OpenCursor(ctx, compactionCursor, -1, t.opts.Guard...)
	if err != nil {
		return err
	}
	err = c.MarkDelete(ctx, rec.MarkDelete(), rec.Properties())
	c.Close(ctx)
	if err != nil {
		return err
	}
	t.state.Store(&compactedState{gen: rec.Generation, horizon: rec.Horizon, log: log, rec: rec})
	return nil
}

// recordCompactionFailure records that a compaction failed with cause: the
// compacted view stays. The record is written under the ownership; if that
// write fails, this node still reports the failure.
func (t *TopicCompaction) recordCompactionFailure(ctx context.Context, cause error) {
	st, err := t.loadCompactedState(ctx)
	if err != nil {
		t.b.cfg.Logger.Warn("recording a failed compaction", "topic", t.opts.Name, "err", err)
		return
	}
	rec := st.rec
	rec.Fail(time.Now().UnixMilli(), t.tried.Load(), cause.Error())
	if err := t.recordCompaction(ctx, rec, st.log); err != nil {
		t.b.cfg.Logger.Warn("recording a failed compaction", "topic", t.opts.Name, "err", err)
		t.state.Store(&compactedState{gen: st.gen, horizon: st.horizon, log: st.log, rec: rec})
	}
}

// Status is Pulsar's LongRunningProcessStatus (status, lastError)
// and the stats' compaction record: RUNNING while a compaction runs here,
// else the outcome of the last one that ended, from its record.
func (t *TopicCompaction) Status(ctx context.Context) (status, lastError string, rec actors.CompactionRecord, err error) {
	running := t.running.Load()
	st, err := t.loadCompactedState(ctx)
	if err != nil {
		return "", "", rec, err
	}
	if running {
		return "RUNNING", "", st.rec, nil
	}
	return st.rec.Outcome.String(), st.rec.Error, st.rec, nil
}

// Running reports whether a compaction runs here now.
func (t *TopicCompaction) Running() bool { return t.running.Load() }

// Horizon returns the horizon of the current compacted view: the log is
// compacted below it (gen 0: never compacted, horizon 0).
func (t *TopicCompaction) Horizon(ctx context.Context) (gen, horizon int64, err error) {
	st, err := t.loadCompactedState(ctx)
	if err != nil {
		return 0, 0, err
	}
	return st.gen, st.horizon, nil
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

// compact runs one compaction of the topic (see the file comment), started at
// start, and records its success.
func (t *TopicCompaction) compact(ctx context.Context, start time.Time) error {
	s := t.b
	old, err := t.loadCompactedState(ctx)
	if err != nil {
		return err
	}
	horizon, err := t.opts.Log.NextOffset(ctx)
	if err != nil {
		return err
	}
	if old.gen > 0 && horizon == old.horizon {
		// Nothing new: a success that removed nothing.
		rec := old.rec
		rec.Succeed(old.gen, old.horizon, old.rec.Kept, 0, time.Now().UnixMilli(), time.Since(start).Milliseconds())
		if err := t.recordCompaction(ctx, rec, old.log); err != nil {
			return fmt.Errorf("recording the compaction: %w", err)
		}
		return nil
	}
	sources, err := t.compactionSources(ctx, old, horizon)
	if err != nil {
		return err
	}
	maxBytes := s.cfg.MaxMessageSize * 4

	// Pass 1: the latest record of each key.
	kc := actors.NewKeyCompactor(compactionKeysMax)
	for _, src := range sources {
		err := src.each(ctx, func(off int64, records int32, entry []byte) error {
			keys, err := protocol.EntryRecordKeys(entry, maxBytes)
			if err != nil {
				keys = nil // unreadable: kept whole
			}
			return kc.Add(off, records, keys)
		})
		if err != nil {
			return err
		}
	}
	survivors, removed := kc.Survivors()

	// Pass 2: the surviving entries into a new compacted log.
	gen, err := t.createCompactedLog(ctx, old)
	if err != nil {
		return err
	}
	id := compactedStreamID(t.opts.Log.ID(), gen)
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
		return err
	}
	if err := writeSurvivors(ctx, clog, sources, survivors, maxBytes); err != nil {
		return err
	}

	// Switch: the record names the new generation, under the ownership.
	rec := old.rec
	rec.Succeed(gen, horizon, kc.Records()-removed, removed, time.Now().UnixMilli(), time.Since(start).Milliseconds())
	if err := t.recordCompaction(ctx, rec, clog); err != nil {
		return fmt.Errorf("recording the compaction: %w", err)
	}
	done = true
	t.dropReplaced(ctx, old.gen, gen)
	s.cfg.Logger.Info("topic compacted", "topic", t.opts.Name, "horizon", horizon, "generation", gen, "removed", removed, "keys", kc.Keys())
	return nil
}

// compactionSources returns what a compaction up to horizon reads: the
// current compacted log, if any, then the topic's log from where that one
// ends (or the log's first offset, if trimmed above it).
func (t *TopicCompaction) compactionSources(ctx context.Context, old *compactedState, horizon int64) ([]compactedSource, error) {
	var sources []compactedSource
	if old.gen > 0 {
		first, err := old.log.FirstOffset(ctx)
		if err != nil {
			return nil, err
		}
		next, err := old.log.NextOffset(ctx)
		if err != nil {
			return nil, err
		}
		sources = append(sources, compactedSource{log: old.log, compacted: true, clogFirst: first, clogNext: next})
	}
	from := old.horizon
	if first, err := t.opts.Log.FirstOffset(ctx); err != nil {
		return nil, err
	} else if first > from {
		from = first
	}
	return append(sources, compactedSource{log: t.opts.Log, from: from, to: horizon}), nil
}

// createCompactedLog creates the compacted log of a new generation: above
// every one tried before (a dropped stream's name is never reused; a node
// that died mid-compaction leaves its log).
func (t *TopicCompaction) createCompactedLog(ctx context.Context, old *compactedState) (int64, error) {
	s := t.b
	gen := max(old.gen, old.rec.Tried, t.tried.Load()) + 1
	if _, err := s.cfg.Catalog.CreateNamespace(ctx, compactedNamespace, nil); err != nil && !errors.Is(err, lakestream.ErrAlreadyExists) {
		return 0, err
	}
	disabled := false
	for tries := 1; ; tries++ {
		t.tried.Store(gen)
		_, err := s.cfg.Catalog.CreateStream(ctx, compactedStreamID(t.opts.Log.ID(), gen), lakestream.StreamConfig{}, lakestream.Partitioning{},
			lakestream.SchemaConfig{Type: lakestream.SchemaNone}, nil, &lakestream.TableMaterializationPolicy{Enabled: &disabled})
		if err == nil {
			return gen, nil
		}
		if !errors.Is(err, lakestream.ErrAlreadyExists) || tries == compactionGenerationTriesMax {
			return 0, fmt.Errorf("creating the compacted log: %w", err)
		}
		gen++
	}
}

// writeSurvivors appends the surviving entries of sources to clog, in
// order, and waits for every append.
func writeSurvivors(ctx context.Context, clog lakestream.Log, sources []compactedSource, survivors map[int64][]int32, maxBytes int) error {
	var (
		wg      sync.WaitGroup
		errMu   sync.Mutex
		appendE error
	)
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
	for _, src := range sources {
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
			return err
		}
	}
	wg.Wait()
	if appendE != nil {
		return fmt.Errorf("writing the compacted log: %w", appendE)
	}
	return nil
}

// dropReplaced drops the replaced generation and the ones between it and
// gen: each was created by a compaction that failed or whose node died
// before recording it, and none can become current any more (a compaction
// still running elsewhere lost the ownership its record needs).
func (t *TopicCompaction) dropReplaced(ctx context.Context, oldGen, gen int64) {
	s := t.b
	for g := max(oldGen, gen-compactionLeftoversMax); g < gen; g++ {
		if g == 0 {
			continue
		}
		if err := s.cfg.Catalog.DropStream(ctx, compactedStreamID(t.opts.Log.ID(), g), true); err != nil && !errors.Is(err, lakestream.ErrNoSuchStream) {
			s.cfg.Logger.Warn("dropping a replaced or abandoned compacted log", "topic", t.opts.Name, "generation", g, "err", err)
		}
	}
}

// DropCompactedLogs drops the compacted logs of a stream's partitions
// (the stream is being deleted).
func (b *Broker) DropCompactedLogs(ctx context.Context, md lakestream.StreamMetadata) error {
	var errs []error
	for i := range md.Partitioning.LogCount() {
		lg, err := b.cfg.Catalog.OpenLog(ctx, md.ID, i)
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
			if err := b.cfg.Catalog.DropStream(ctx, compactedStreamID(lg.ID(), gen), true); err != nil && !errors.Is(err, lakestream.ErrNoSuchStream) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
