package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/lakegate/lakegate/engine/index"
	"github.com/lakegate/lakegate/engine/wal"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
)

// walWriter is the node's single WAL writer. It batches entries of every log
// into one object per flush (on FlushBytes or Linger, or at once when the
// writer is idle on a local store), PUTs objects concurrently (at most
// MaxInflightFlushes) and commits each with one commit record
// (commitlog.go), strictly in flush order and without waiting for the
// previous commit's acknowledgement, so entries appended to one log in order
// get increasing offsets.
//
// Goroutines: batch (owns the open batch), one PUT goroutine per in-flight
// flush, commit (sends the commit transactions), window (writes and drops
// the window intents). Appends are answered when the commit log applies
// their record: on the transaction's reply when no other record came
// between (commitLog.applyOwn), else by its watch.
type walWriter struct {
	e        *Engine
	opts     Options
	reqs     chan *appendReq // bounded by count; bytes bounded by pending
	pending  *semaphore.Weighted
	commitCh chan *flush // flushes in seq order; cap MaxInflightFlushes
	inflight chan struct{}
	waiting  atomic.Int32  // flushes cut whose commit has not started, PUT or not (the idle flush cuts when none is)
	idleCh   chan struct{} // a commit started: the batch loop may cut
	stop     chan struct{}
	done     sync.WaitGroup

	// closeMu orders Append's enqueue before close: senders hold it shared,
	// close takes it exclusively to set closed, so nothing is enqueued
	// after the batch loop's final drain.
	closeMu sync.RWMutex
	closed  bool

	// records counts commit records sent and not yet answered.
	records sync.WaitGroup
	// recordID names this writer's commit records: unique per engine start.
	recordID  string
	recordSeq atomic.Uint64

	// ownOff: until this time (Unix ns) commits go without the commits/sync
	// compare of applyOwn (set when one missed).
	ownOff atomic.Int64

	windows windowIntents
	segs    walSegments
	// committed is the seq of the last flush whose commit transactions are
	// done (committed or failed): flushes commit in seq order, so every
	// flush up to it is (window intents' "done", docs/index-format.md).
	committed atomic.Uint64
}

type appendReq struct {
	log       lakestream.LogID
	records   int32
	publishMs int64
	guard     *ownership   // nil: unguarded
	chain     *appendChain // nil: not chained
	stage     string       // the staging set ("": not staged)
	payload   []byte       // owned by the request
	// done is called once with the outcome (it releases the request's
	// pending bytes); it never blocks.
	done func(appendResult)
}

type appendResult struct {
	h   lakestream.EntryHeader
	err error
}

// flush is one WAL object on its way to the store and the commit log.
type flush struct {
	seq     uint64
	object  string
	writeMs int64
	window  int64              // start of the window intent protecting the object
	logs    []lakestream.LogID // first-append order
	byLog   map[lakestream.LogID][]*appendReq
	// stage is the staging set of each log whose chunk is staged: a chunk
	// is staged or not as a whole (its appends share one set or none).
	stage   map[lakestream.LogID]string
	bytes   int64
	budget  wal.Budget // what the object will hold: every WAL limit is checked on it before an entry is taken
	data    []byte
	refs    []wal.ChunkRef
	putDone chan struct{}
	putErr  error
	size    int          // bytes of the object
	started time.Time    // when put began (lakegate_wal_flush_seconds)
	parts   atomic.Int32 // commit records of this flush not answered yet
}

// ownApplyPause is how long commits go without the commits/sync compare
// after it failed: while other engines commit too, most compares would.
const ownApplyPause = time.Second

func newWALWriter(e *Engine) *walWriter {
	o := e.opts
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	w := &walWriter{
		e:        e,
		opts:     o,
		reqs:     make(chan *appendReq, 4096),
		pending:  semaphore.NewWeighted(o.MaxPendingBytes),
		commitCh: make(chan *flush, o.MaxInflightFlushes),
		inflight: make(chan struct{}, o.MaxInflightFlushes),
		idleCh:   make(chan struct{}, 1),
		stop:     make(chan struct{}),
		recordID: hex.EncodeToString(rnd[:]),
	}
	w.windows.init(w)
	w.segs.init(w, e.appender)
	w.done.Add(2)
	go w.batchLoop()
	go w.commitLoop()
	w.windows.done.Add(1)
	go w.windows.loop()
	return w
}

// nextRecordKey returns a new commit-record key of this writer.
func (w *walWriter) nextRecordKey() string {
	return fmt.Sprintf("%s%s/%s-%016x", w.e.keys.recordPrefix(), w.opts.NodeID, w.recordID, w.recordSeq.Add(1))
}

// append queues one entry and waits for its commit. The caller has
// validated the arguments.
func (w *walWriter) append(ctx context.Context, id lakestream.LogID, records int32, payload []byte, publishMs int64, guard *ownership, chain *appendChain, stage string) (lakestream.EntryHeader, error) {
	done := make(chan appendResult, 1)
	if err := w.enqueue(ctx, id, records, append([]byte(nil), payload...), publishMs, guard, chain, stage, func(r appendResult) { done <- r }); err != nil {
		return lakestream.EntryHeader{}, err
	}
	select {
	case r := <-done:
		return r.h, r.err
	case <-ctx.Done():
		// The request goes on (its bytes are released when it completes);
		// an unknown outcome breaks its chain.
		err := fmt.Errorf("%w: %w", lakestream.ErrIndeterminate, ctx.Err())
		chain.breakWith(err)
		return lakestream.EntryHeader{}, err
	}
}

// enqueue queues one entry for the batch loop and returns once it is in
// reqs: entries leave reqs in order and keep that order through flush and
// commit, so an entry enqueued after another (by any goroutine) gets higher
// offsets in its log if both commit. It blocks while MaxPendingBytes are in
// flight (backpressure) or reqs is full, until ctx ends. done is called
// exactly once with the outcome, from the writer's goroutines, unless
// enqueue returns an error; it must not block. The payload is the
// request's from then on. A guarded entry commits only while its guard
// holds (ErrGuardLost otherwise). A chained entry commits only if the
// entries of its chain enqueued before it do (chain.go); every failure of
// it, returned or reported, breaks its chain first. A staged entry (stage
// not "") is committed into that staging set instead of its log
// (stage.go).
func (w *walWriter) enqueue(ctx context.Context, id lakestream.LogID, records int32, payload []byte, publishMs int64, guard *ownership, chain *appendChain, stage string, done func(appendResult)) error {
	err := w.enqueueReq(ctx, id, records, payload, publishMs, guard, chain, stage, done)
	chain.breakWith(err)
	return err
}

func (w *walWriter) enqueueReq(ctx context.Context, id lakestream.LogID, records int32, payload []byte, publishMs int64, guard *ownership, chain *appendChain, stage string, done func(appendResult)) error {
	if err := guard.held(); err != nil {
		return err
	}
	size := int64(len(payload))
	if size == 0 {
		size = 1 // every entry holds back at least one unit of the bound
	}
	if err := w.pending.Acquire(ctx, size); err != nil {
		return err
	}
	req := &appendReq{
		log:       id,
		records:   records,
		publishMs: publishMs,
		guard:     guard,
		chain:     chain,
		stage:     stage,
		payload:   payload,
		done: func(r appendResult) {
			w.pending.Release(size)
			if r.err != nil {
				// Before done: the submitter learns of the failure
				// with the chain broken already.
				chain.breakWith(r.err)
			}
			done(r)
		},
	}
	w.closeMu.RLock()
	defer w.closeMu.RUnlock()
	if w.closed {
		w.pending.Release(size)
		return lakestream.ErrClosed
	}
	if err := chain.errOrNil(); err != nil {
		// Broken while this call waited for room.
		w.pending.Release(size)
		return err
	}
	select {
	case w.reqs <- req:
		return nil
	case <-ctx.Done():
		w.pending.Release(size)
		return ctx.Err()
	}
}

// close flushes what is queued, waits until every commit record sent is
// answered (the commit log's watch still runs), and stops.
func (w *walWriter) close() {
	w.closeMu.Lock()
	w.closed = true
	w.closeMu.Unlock()
	close(w.stop)
	w.done.Wait()
	answered := make(chan struct{})
	go func() { w.records.Wait(); close(answered) }()
	select {
	case <-answered:
	case <-time.After(w.opts.CommitTimeout):
		// The watch is stuck: what it did not answer stays unknown.
		w.e.clog.abandonPending()
		<-answered
	}
	w.segs.close()
	w.windows.close()
}

func (w *walWriter) idleFlush() bool {
	return !w.opts.RemoteStore && !w.opts.NoIdleFlush && w.opts.lingerDefault
}

// idle: no flush is being PUT or waits for the commit loop, so a flush cut
// now is PUT while the commit loop sends the previous one's record, and
// committed next.
func (w *walWriter) idle() bool {
	return w.waiting.Load() == 0
}

func (w *walWriter) signalIdle() {
	select {
	case w.idleCh <- struct{}{}:
	default:
	}
}

func (w *walWriter) batchLoop() {
	defer w.done.Done()
	defer close(w.commitCh)
	var (
		seq   uint64
		cur   *flush
		timer = time.NewTimer(time.Hour)
	)
	timer.Stop()
	cut := func() {
		if cur == nil {
			return
		}
		timer.Stop()
		w.inflight <- struct{}{} // bounded in-flight flushes: backpressure
		f := cur
		cur = nil
		w.waiting.Add(1)
		go w.put(f)
		w.commitCh <- f
	}
	add := func(r *appendReq) {
		// Every limit of the WAL format (records and entries per chunk,
		// logs and bytes per object) is checked before the entry is taken:
		// an entry that would break one goes into the next object. An
		// empty object takes any entry Append accepted.
		e := wal.Entry{Records: r.records, Payload: r.payload}
		if cur != nil && !cur.budget.Fits(int64(r.log), e) {
			cut()
		}
		if cur != nil && cur.byLog[r.log] != nil && cur.stage[r.log] != r.stage {
			// An object holds one chunk per log, and a chunk is staged
			// into one set or not at all: the entry goes into the next.
			cut()
		}
		if cur == nil {
			seq++
			cur = &flush{seq: seq, byLog: map[lakestream.LogID][]*appendReq{}, putDone: make(chan struct{})}
			timer.Reset(w.opts.Linger)
		}
		if err := cur.budget.Add(int64(r.log), e); err != nil {
			// Unreachable for an entry Append validated; fail it, never the node.
			r.done(appendResult{err: fmt.Errorf("%w: %w", lakestream.ErrInvalidArgument, err)})
			return
		}
		if _, ok := cur.byLog[r.log]; !ok {
			cur.logs = append(cur.logs, r.log)
			if r.stage != "" {
				if cur.stage == nil {
					cur.stage = map[lakestream.LogID]string{}
				}
				cur.stage[r.log] = r.stage
			}
		}
		cur.byLog[r.log] = append(cur.byLog[r.log], r)
		cur.bytes += int64(len(r.payload))
		if cur.bytes >= int64(w.opts.FlushBytes) {
			cut()
		}
	}
	for {
		select {
		case r := <-w.reqs:
			add(r)
			// Take what is queued already, then cut at once if no flush
			// is being PUT or waits for the commit loop (idle flush): an
			// idle writer adds no linger.
			for more := true; more; {
				select {
				case r := <-w.reqs:
					add(r)
				default:
					more = false
				}
			}
			if cur != nil && w.idleFlush() && w.idle() {
				cut()
			}
		case <-w.idleCh:
			if cur != nil && w.idleFlush() && w.idle() {
				cut()
			}
		case <-timer.C:
			if w.idleFlush() && w.waiting.Load() > 0 {
				// The commit loop has a flush waiting already: this one
				// would only queue behind it. It grows until the commit
				// loop takes that one (idleCh), then goes.
				continue
			}
			cut()
		case <-w.stop:
			// Take what is already queued, flush it, and stop.
			for {
				select {
				case r := <-w.reqs:
					add(r)
					continue
				default:
				}
				break
			}
			cut()
			return
		}
	}
}

// put writes the object under its window intent. It runs concurrently with
// other puts; the commit loop waits for putDone.
func (w *walWriter) put(f *flush) {
	defer close(f.putDone)
	f.started = time.Now()
	f.writeMs = w.opts.Now().UnixMilli()
	b := wal.NewBuilder()
	for _, id := range f.logs {
		for _, r := range f.byLog[id] {
			if r.publishMs == 0 {
				// No publish time given: it is the write time, stored, so
				// the index's per-chunk time bounds are exact.
				r.publishMs = f.writeMs
			}
			if _, err := b.Add(int64(id), wal.Entry{Records: r.records, PublishTimeMs: r.publishMs, Payload: r.payload}); err != nil {
				// The batch loop's budget admitted exactly these entries, so
				// this is a bug; the flush fails, the node stays up.
				f.putErr = fmt.Errorf("engine: build WAL object: %w", err)
				return
			}
		}
	}
	f.data, f.refs = b.Build(f.writeMs)
	f.size = len(f.data)

	ctx, cancel := context.WithTimeout(context.Background(), w.opts.CommitTimeout)
	defer cancel()
	putStart := time.Now()
	if !w.segs.append(ctx, f) { // no WAL segment (segment.go): the flush is its own object
		f.object = walObjectName(w.opts.NodeID, f.writeMs, f.seq)
		start, err := w.windows.protect(ctx, f.writeMs, 1)
		if err != nil {
			f.putErr = fmt.Errorf("engine: write pending intent: %w", err)
			return
		}
		f.window = start
		if err := w.putObject(ctx, f); err != nil { // retried until ctx ends (putretry.go)
			f.putErr = fmt.Errorf("engine: put %s: %w", f.object, err)
			return
		}
	}
	w.e.metrics.observePut(len(f.data), time.Since(putStart))
	for _, ref := range f.refs {
		w.e.cache.put(chunkLoc{f.object, ref.Offset}, f.chunk(ref))
	}
}

// chunk returns ref's chunk of f as a reader decoding the object would see
// it, made from the appended entries themselves: the object was built from
// them, so there is nothing to decode or verify, and the cache holds the
// requests' payloads rather than a copy of the chunk (the object's buffer
// is not pinned). One chunk per log per object, entries in append order.
// Its size counts what it keeps alive: the chunk's bytes and, per entry,
// cachedEntryOverhead.
func (f *flush) chunk(ref wal.ChunkRef) *loadedChunk {
	reqs := f.byLog[lakestream.LogID(ref.Log)]
	entries := make([]wal.DecodedEntry, len(reqs))
	for i, r := range reqs {
		n := len(r.payload)
		entries[i] = wal.DecodedEntry{Records: r.records, PublishTimeMs: r.publishMs, Payload: r.payload[:n:n], PayloadSize: n}
	}
	return &loadedChunk{size: ref.Length + int64(len(reqs))*cachedEntryOverhead, writeMs: f.writeMs, entries: entries}
}

// cachedEntryOverhead is what a chunk cached from its requests holds per
// entry beyond the chunk's own bytes: the decoded entry (48 bytes) and the
// rest of the buffer the payload came in (a donated SEND frame: its
// command, checksum and sizes, 30–80 bytes), so that the cache's bound
// holds for chunks of many small entries too.
const cachedEntryOverhead = 128

func (w *walWriter) commitLoop() {
	defer w.done.Done()
	for f := range w.commitCh {
		<-f.putDone
		if w.waiting.Add(-1) == 0 {
			w.signalIdle()
		}
		w.commitFlush(f)
		w.committed.Store(f.seq)
		f.data = nil
		<-w.inflight
	}
}

func (w *walWriter) failAll(f *flush, err error) {
	for _, id := range f.logs {
		for _, r := range f.byLog[id] {
			r.done(appendResult{err: err})
		}
	}
}

// commitFlush sends the commit record(s) of f. Its appends are answered
// when the commit log applies them (recordApplied), or here on failure.
func (w *walWriter) commitFlush(f *flush) {
	if f.putErr != nil {
		w.e.metrics.observeFlush(len(f.data), time.Since(f.started), f.putErr)
		w.failAll(f, fmt.Errorf("%w: %w", lakestream.ErrUnavailable, f.putErr))
		if f.window != 0 {
			w.windows.release(f.window, 1)
		}
		return
	}
	if h := w.opts.hooks.afterPut; h != nil {
		if err := h(f.object); err != nil {
			w.failAll(f, fmt.Errorf("%w: %w", lakestream.ErrUnavailable, err))
			return // "crashed": the intent stays, the object is an orphan
		}
	}
	refByLog := make(map[lakestream.LogID]wal.ChunkRef, len(f.refs))
	for _, r := range f.refs {
		refByLog[lakestream.LogID(r.Log)] = r
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.opts.CommitTimeout)
	defer cancel()
	// Every log of the record is open here, so the commit log computes its
	// offsets when it applies the record; logs that cannot take appends
	// now fail at once.
	var ids []lakestream.LogID
	for _, id := range f.logs {
		l, err := w.e.log(ctx, id)
		if err == nil {
			h := l.snapshot()
			switch {
			case h.Deleted:
				err = fmt.Errorf("%w: log %d", lakestream.ErrNoSuchLog, id)
			case h.Fenced:
				err = fmt.Errorf("%w: log %d", lakestream.ErrFenced, id)
			default:
				err = heldAll(guardsOf(f.byLog[id]))
			}
		} else if !errors.Is(err, lakestream.ErrNoSuchLog) {
			err = fmt.Errorf("%w: %w", lakestream.ErrUnavailable, err)
		}
		if err != nil {
			w.failLogs(f, []lakestream.LogID{id}, err)
			continue
		}
		if err := brokenChain(f.byLog[id]); err != nil {
			// An earlier append of a chain in this chunk failed: the
			// chunk is not committed (chain.go).
			w.failChunk(f, id, err)
			continue
		}
		ids = append(ids, id)
	}
	parts := w.splitParts(f, ids)
	f.parts.Store(int32(len(parts)))
	if len(parts) == 0 {
		w.flushDone(f)
		return
	}
	for _, part := range parts {
		w.commitRecord(ctx, f, part, refByLog)
	}
}

// flushPart is what one commit transaction of a flush carries: the chunks
// of logs, as one commit record, and the staged chunks of staging sets,
// one staged record per set (stage.go).
type flushPart struct {
	logs   []lakestream.LogID
	staged map[string][]lakestream.LogID // by set
	sets   []string                      // staged's keys, in first-append order
}

func (p *flushPart) empty() bool { return len(p.logs) == 0 && len(p.sets) == 0 }

// allLogs returns the part's logs, staged or not.
func (p *flushPart) allLogs() []lakestream.LogID {
	out := slices.Clone(p.logs)
	for _, set := range p.sets {
		out = append(out, p.staged[set]...)
	}
	return out
}

// dropStaged removes log id of set from the part (and the set with its
// last log).
func (p *flushPart) dropStaged(set string, id lakestream.LogID) {
	p.staged[set] = slices.DeleteFunc(p.staged[set], func(x lakestream.LogID) bool { return x == id })
	if len(p.staged[set]) == 0 {
		delete(p.staged, set)
		p.sets = slices.DeleteFunc(p.sets, func(x string) bool { return x == set })
	}
}

// splitParts splits ids into parts whose transactions carry at most
// MaxTxnOps compares (one for the record key, one for commits/sync when the
// record is to be applied on its reply, one per distinct guard, one per
// staging set) and operations (two for the record; per staging set two,
// and one per log: its logs/<log>/staged/<set> key). A log's chunk is
// never split; a set's logs are kept together while they fit one part,
// else spread over parts (its staged records keep each log's order:
// CommitStaged orders them by revision, then position).
func (w *walWriter) splitParts(f *flush, ids []lakestream.LogID) []flushPart {
	var out []flushPart
	var cur flushPart
	var guards []*ownership
	stagedLogs := 0 // staged logs in cur
	maxOps := w.e.meta.MaxTxnOps()
	add := func(id lakestream.LogID, set string) {
		var gs []*ownership
		for _, g := range guardsOf(f.byLog[id]) {
			if !slices.Contains(guards, g) {
				gs = append(gs, g)
			}
		}
		newSet := set != "" && !slices.Contains(cur.sets, set)
		sets, logs := len(cur.sets), stagedLogs
		if newSet {
			sets++
		}
		if set != "" {
			logs++
		}
		if !cur.empty() && (2+len(guards)+len(gs)+sets > maxOps || 2+2*sets+logs > maxOps) {
			out = append(out, cur)
			cur, guards, stagedLogs = flushPart{}, nil, 0
			gs = guardsOf(f.byLog[id])
			newSet = set != ""
		}
		guards = append(guards, gs...)
		if set == "" {
			cur.logs = append(cur.logs, id)
			return
		}
		if newSet {
			if cur.staged == nil {
				cur.staged = map[string][]lakestream.LogID{}
			}
			cur.sets = append(cur.sets, set)
		}
		cur.staged[set] = append(cur.staged[set], id)
		stagedLogs++
	}
	bySet := map[string][]lakestream.LogID{}
	var sets []string
	for _, id := range ids {
		set := f.stage[id]
		if set == "" {
			add(id, "")
			continue
		}
		if _, ok := bySet[set]; !ok {
			sets = append(sets, set)
		}
		bySet[set] = append(bySet[set], id)
	}
	for _, set := range sets {
		if n := len(bySet[set]); n+2 <= maxOps && !cur.empty() && 2+2*(len(cur.sets)+1)+stagedLogs+n > maxOps {
			// The set fits a part of its own but not the rest of this
			// one: it starts the next, whole.
			out = append(out, cur)
			cur, guards, stagedLogs = flushPart{}, nil, 0
		}
		for _, id := range bySet[set] {
			add(id, set)
		}
	}
	if !cur.empty() {
		out = append(out, cur)
	}
	return out
}

// commitRecord commits part p of f: its logs' chunks as one commit record,
// its staging sets' chunks as one staged record per set, in one
// transaction. Lost guards fail their logs, ended sets their staged
// appends, and the rest is retried; an unknown outcome is resolved by
// voiding the record key (or, with no record, a staged record's key).
func (w *walWriter) commitRecord(ctx context.Context, f *flush, p flushPart, refs map[lakestream.LogID]wal.ChunkRef) {
	var noOwn, again bool
	for attempt := 0; !p.empty(); attempt++ {
		if attempt > 0 && !again {
			if err := backoff(ctx, attempt); err != nil {
				w.partFailed(f, p, fmt.Errorf("%w: commit %s: %w", lakestream.ErrUnavailable, f.object, err))
				return
			}
		}
		ids := p.logs
		var guards []*ownership
		for _, id := range p.allLogs() {
			for _, g := range guardsOf(f.byLog[id]) {
				if !slices.Contains(guards, g) {
					guards = append(guards, g)
				}
			}
		}
		var cmps []meta.Cmp
		var ops []meta.Op
		// The record's key, when the part has one, tells a lost reply's
		// outcome (resolveRecord); a part of staged chunks only has none,
		// and its first staged record's key tells it (resolveStaged).
		var key string
		var rec index.Record
		if len(ids) > 0 {
			rec = index.Record{Kind: index.RecordChunks, WriteMs: f.writeMs, Object: f.object}
			for _, id := range ids {
				rec.Chunks = append(rec.Chunks, recordChunk(id, refs[id]))
			}
			key = w.nextRecordKey()
			part := slices.Clone(ids)
			w.records.Add(1)
			w.e.clog.expect(key, &pendingRecord{done: func(rev int64, results map[lakestream.LogID]chunkResult) {
				defer w.records.Done()
				w.recordApplied(f, part, rev, results)
			}})
			cmps = append(cmps, meta.Cmp{Key: key})
			ops = append(ops, meta.Put(key, rec.Encode()), meta.Put(w.e.keys.commitSync(), []byte(key)))
		}
		staged := make([]string, len(p.sets)) // staged record keys, by p.sets
		for i, set := range p.sets {
			staged[i] = w.e.keys.stagedRecord(set, w.nextStagedName())
			if key == "" && i == 0 {
				cmps = append(cmps, meta.Cmp{Key: staged[i]})
			}
			sr := index.Record{Kind: index.RecordChunks, WriteMs: f.writeMs, Object: f.object}
			for _, id := range p.staged[set] {
				sr.Chunks = append(sr.Chunks, recordChunk(id, refs[id]))
			}
			cmps = append(cmps, meta.Cmp{Key: w.e.keys.stageEnd(set)})
			ops = append(ops, meta.Put(staged[i], sr.Encode()), meta.Put(w.e.keys.stageLast(set), []byte(staged[i])))
			// Each log lists the set as open (OpenStagedSets), until
			// its end deletes the key.
			for _, id := range p.staged[set] {
				ops = append(ops, meta.Put(w.e.keys.logStaged(id, set), []byte(staged[i])))
			}
		}
		again = false
		for _, g := range guards {
			cmps = g.cmps(cmps...)
		}
		// Applied on its reply (commitLog.applyOwn) when commits/sync is
		// still where the last record applied here left it: no record of
		// any engine lies between, so the watch is not waited for. After
		// a miss (another engine committed in between) the compare is left
		// out for ownApplyPause: a failed compare costs a round trip.
		var after int64
		if key != "" && !noOwn && time.Now().UnixNano() >= w.ownOff.Load() {
			after = w.e.clog.lastRecord()
		}
		if after > 0 {
			cmps = append(cmps, meta.Cmp{Key: w.e.keys.commitSync(), ModRevision: after})
		}
		start := time.Now()
		w.e.metrics.txns.Add(1) // counted when sent: the appends may be answered before Txn returns
		ok, rev, err := w.e.meta.Txn(ctx, cmps, ops)
		w.e.metrics.observeTxn(time.Since(start), ok, err)
		switch {
		case err == nil && ok:
			// The staged chunks are durable: answered now, before the next
			// flush commits (chains).
			w.stagedDone(f, p)
			if key == "" {
				w.flushPartDone(f)
				return
			}
			if after > 0 && w.e.clog.applyOwn(key, rev, after, rec) {
				return // answered
			}
			w.e.clog.setRev(key, rev)
			return // answered when the commit log applies it
		case err == nil && after > 0:
			// commits/sync moved (or a guard was lost, or a set ended; the
			// retry finds out): nothing was written, the same record goes
			// again at once without the compare.
			w.ownOff.Store(time.Now().Add(ownApplyPause).UnixNano())
			if !w.forget(key) {
				return
			}
			noOwn, again = true, true
		case err == nil:
			// A guard was lost or a staging set ended (the keys are new):
			// fail their appends, retry the rest.
			if key != "" && !w.forget(key) {
				return
			}
			var keep []lakestream.LogID
			for _, id := range ids {
				if gerr := checkGuards(ctx, w.e.meta, guardsOf(f.byLog[id])); gerr != nil {
					w.failLogs(f, []lakestream.LogID{id}, gerr)
					continue
				}
				keep = append(keep, id)
			}
			p.logs = keep
			for _, set := range slices.Clone(p.sets) {
				serr := w.stageOpen(ctx, set)
				for _, id := range slices.Clone(p.staged[set]) {
					gerr := serr
					if gerr == nil {
						gerr = checkGuards(ctx, w.e.meta, guardsOf(f.byLog[id]))
					}
					if gerr != nil {
						w.failLogs(f, []lakestream.LogID{id}, gerr)
						p.dropStaged(set, id)
					}
				}
			}
		case key == "":
			applied, rerr := w.resolveStaged(ctx, p.sets[0], staged[0])
			switch {
			case rerr != nil:
				w.partFailed(f, p, fmt.Errorf("%w: commit %s: %w (resolving: %w)", lakestream.ErrIndeterminate, f.object, err, rerr))
				return
			case applied:
				w.stagedDone(f, p)
				w.flushPartDone(f)
				return
			}
			// Never applied: the same chunks go again under new keys.
		default:
			applied, voidRev, rerr := w.resolveRecord(ctx, key)
			unbroken := true
			if rerr == nil && !applied {
				// The void may have come after the record applied and
				// was folded away: the watch tells (watchedThrough).
				unbroken, rerr = w.e.clog.watchedThrough(ctx, key, voidRev)
			}
			switch {
			case rerr != nil || !unbroken:
				if rerr == nil {
					rerr = errors.New("the commit log was re-read meanwhile")
				}
				uerr := fmt.Errorf("%w: commit %s: %w (resolving: %w)", lakestream.ErrIndeterminate, f.object, err, rerr)
				if w.forget(key) {
					w.partFailed(f, p, uerr)
					return
				}
				// Else the commit log applied the record meanwhile (it
				// did commit, with the staged chunks) and answered these
				// appends.
				w.stagedDone(f, p)
				return
			case applied:
				w.stagedDone(f, p)
				return // answered when the commit log applies it
			default:
				if !w.forget(key) {
					// The watch applied the record (it did commit,
					// before the void) and answered these appends.
					w.stagedDone(f, p)
					return
				}
				// Never applied: the same chunks go again under a new key.
			}
		}
	}
	w.flushPartDone(f)
}

// recordChunk is the commit-record chunk of log id's chunk ref.
func recordChunk(id lakestream.LogID, ref wal.ChunkRef) index.RecordChunk {
	return index.RecordChunk{Log: int64(id), Records: int64(ref.Records), Entries: int64(ref.Entries),
		PayloadBytes: ref.PayloadBytes, Offset: ref.Offset, Length: ref.Length, CRC: ref.CRC,
		MinPublishMs: ref.MinPublishTimeMs, MaxPublishMs: ref.MaxPublishTimeMs}
}

// forget withdraws a record that will not apply; false means the commit
// log applied it meanwhile (its answer is under way).
func (w *walWriter) forget(key string) bool {
	if !w.e.clog.unexpect(key) {
		return false
	}
	w.records.Done()
	return true
}

// resolveRecord finds out whether a commit transaction with a lost reply
// applied: it voids the key if it is absent (so the lost request can never
// apply later). applied = the key holds the record; otherwise voidRev is
// the revision of the void (the record may still have applied before it
// and been folded away: commitLog.watchedThrough).
func (w *walWriter) resolveRecord(ctx context.Context, key string) (applied bool, voidRev int64, err error) {
	for attempt := 1; ; attempt++ {
		var ok bool
		var rev int64
		ok, rev, err = w.e.meta.Txn(ctx, []meta.Cmp{{Key: key}}, []meta.Op{meta.Put(key, index.VoidRecord)})
		if err == nil {
			if ok {
				return false, rev, nil
			}
			kv, found, gerr := w.e.meta.Get(ctx, key)
			if gerr == nil {
				if found && index.IsVoid(kv.Value) {
					return false, kv.ModRevision, nil // our own void of an earlier attempt
				}
				if found {
					w.e.clog.setRev(key, kv.ModRevision)
				}
				// Found, or folded and deleted already: it applied.
				return true, 0, nil
			}
			err = gerr
		}
		if berr := backoff(ctx, attempt); berr != nil {
			return false, 0, err
		}
	}
}

// recordApplied answers the appends of the logs ids of f, as the commit log
// applied their record at rev (rev < 0: the record applied but its results
// are lost).
func (w *walWriter) recordApplied(f *flush, ids []lakestream.LogID, rev int64, results map[lakestream.LogID]chunkResult) {
	for _, id := range ids {
		r, ok := results[id]
		switch {
		case rev < 0 || !ok:
			w.failLogs(f, []lakestream.LogID{id}, fmt.Errorf("%w: commit %s: applied, offsets unknown", lakestream.ErrIndeterminate, f.object))
			continue
		case r.err != nil:
			w.failLogs(f, []lakestream.LogID{id}, r.err)
			continue
		}
		off, bytes := r.first, r.prevBytes
		var payload int64
		for _, q := range f.byLog[id] {
			bytes += int64(len(q.payload))
			payload += int64(len(q.payload))
			pub := q.publishMs
			if pub == 0 {
				pub = f.writeMs
			}
			q.done(appendResult{h: lakestream.EntryHeader{
				Offset:         off,
				Records:        q.records,
				PublishTimeMs:  pub,
				WriteTimeMs:    f.writeMs,
				Size:           int32(len(q.payload)),
				CumulativeSize: bytes,
			}})
			off += int64(q.records)
		}
		w.e.metrics.observeAppends(len(f.byLog[id]), payload)
	}
	w.flushPartDone(f)
}

// partFailed fails the appends of p and counts it as done.
func (w *walWriter) partFailed(f *flush, p flushPart, err error) {
	w.failLogs(f, p.allLogs(), err)
	w.flushPartDone(f)
}

func (w *walWriter) flushPartDone(f *flush) {
	if f.parts.Add(-1) == 0 {
		w.flushDone(f)
	}
}

// flushDone: every record of f is answered; its window intent may go.
func (w *walWriter) flushDone(f *flush) {
	w.e.metrics.observeFlush(f.size, time.Since(f.started), nil)
	if h := w.opts.hooks.afterCommit; h != nil {
		if err := h(f.object); err != nil {
			return // "crashed": the window intent stays
		}
	}
	w.windows.release(f.window, 1)
}

// guardsOf returns the distinct guards of reqs.
func guardsOf(reqs []*appendReq) []*ownership {
	var out []*ownership
	for _, r := range reqs {
		if r.guard != nil && !slices.Contains(out, r.guard) {
			out = append(out, r.guard)
		}
	}
	return out
}

func (w *walWriter) failLogs(f *flush, ids []lakestream.LogID, err error) {
	for _, id := range ids {
		for _, r := range f.byLog[id] {
			r.done(appendResult{err: err})
		}
	}
}

// failChunk fails the appends of log id in f, which holds appends of a
// broken chain (err is the first such chain's error): each chained append
// with its chain's error once that is broken, the others — sharing the
// chunk by chance — with ErrUnavailable.
func (w *walWriter) failChunk(f *flush, id lakestream.LogID, err error) {
	w.e.metrics.chainRefusals.Add(int64(len(f.byLog[id])))
	for _, r := range f.byLog[id] {
		if cerr := r.chain.errOrNil(); cerr != nil {
			r.done(appendResult{err: cerr})
			continue
		}
		r.done(appendResult{err: fmt.Errorf("%w: log %d: the WAL chunk holds appends of a broken chain (%v)", lakestream.ErrUnavailable, id, err)})
	}
}

// heldAll returns the first lost guard's error.
func heldAll(gs []*ownership) error {
	for _, g := range gs {
		if err := g.held(); err != nil {
			return err
		}
	}
	return nil
}

// checkGuards re-reads the guards after a failed commit (ErrGuardLost for
// the first that is lost).
func checkGuards(ctx context.Context, ms meta.Store, gs []*ownership) error {
	for _, g := range gs {
		if err := g.check(ctx, ms); err != nil {
			return err
		}
	}
	return nil
}

// backoff waits before retry attempt n (1-based) of a metadata operation:
// 1 ms doubling to 200 ms, no jitter (retryBackoff).
func backoff(ctx context.Context, n int) error {
	return metaRetry.wait(ctx, n)
}

// --- window intents --------------------------------------------------------------

// windowIntents keeps the WAL writer's window intents
// (docs/index-format.md, "Pending-object intent"): one intent protects
// every object the node names in a PendingWindow-long time window. It is
// written before the window's first PUT (normally ahead of time) and
// deleted once the window is over and every flush in it is answered.
type windowIntents struct {
	w    *walWriter
	stop chan struct{}
	done sync.WaitGroup
	mu   struct {
		sync.Mutex
		m map[int64]*windowIntent // by start ms
	}
}

type windowIntent struct {
	written     chan struct{} // closed once the intent is durable
	err         error         // of the write, when it failed (retried by the next protect)
	outstanding int           // flushes named in the window, not answered yet
	done        uint64        // the "done" seq last written
}

func (wi *windowIntents) init(w *walWriter) {
	wi.w = w
	wi.stop = make(chan struct{})
	wi.mu.m = map[int64]*windowIntent{}
}

func (wi *windowIntents) span() int64 { return wi.w.opts.PendingWindow.Milliseconds() }

// protect makes sure the window of writeMs has a durable intent and counts
// n more flushes in it (n ≥ 1); on error none is counted.
func (wi *windowIntents) protect(ctx context.Context, writeMs int64, n int) (int64, error) {
	start := writeMs - writeMs%wi.span()
	for {
		wi.mu.Lock()
		x := wi.mu.m[start]
		if x == nil || (isClosed(x.written) && x.err != nil) { // the close orders the read of err after its write
			x = &windowIntent{written: make(chan struct{})}
			wi.mu.m[start] = x
			x.outstanding += n
			wi.mu.Unlock()
			x.done = wi.w.committed.Load()
			x.err = wi.write(ctx, start, x.done)
			close(x.written)
			if x.err != nil {
				wi.release(start, n)
			}
			return start, x.err
		}
		x.outstanding += n
		wi.mu.Unlock()
		select {
		case <-x.written:
		case <-ctx.Done():
			wi.release(start, n)
			return 0, ctx.Err()
		}
		if x.err == nil {
			return start, nil
		}
		wi.release(start, n)
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (wi *windowIntents) write(ctx context.Context, start int64, done uint64) error {
	v := fmt.Appendf(nil, `{"created":%d,"from":%d,"to":%d,"done":%d}`, wi.w.opts.Now().UnixMilli(), start, start+wi.span(), done)
	_, _, err := wi.w.e.meta.Txn(ctx, nil, []meta.Op{meta.Put(wi.w.e.keys.windowIntent(wi.w.opts.NodeID, start), v)})
	return err
}

// release counts n flushes of the window as answered.
func (wi *windowIntents) release(start int64, n int) {
	wi.mu.Lock()
	defer wi.mu.Unlock()
	if x := wi.mu.m[start]; x != nil {
		x.outstanding -= n
	}
}

// loop writes the next window's intent ahead of time and deletes the
// intents of finished windows.
func (wi *windowIntents) loop() {
	defer wi.done.Done()
	t := time.NewTicker(wi.w.opts.PendingWindow / 4)
	defer t.Stop()
	for {
		select {
		case <-wi.stop:
			return
		case <-t.C:
		}
		now := wi.w.opts.Now().UnixMilli()
		next := now - now%wi.span() + wi.span()
		ctx, cancel := context.WithTimeout(context.Background(), wi.w.opts.CommitTimeout)
		if _, err := wi.protect(ctx, next, 1); err == nil {
			wi.release(next, 1)
		}
		wi.publish(ctx)
		wi.w.segs.retireOld()
		wi.sweep(ctx, now)
		cancel()
	}
}

// publish rewrites the live windows' intents whose "done" seq moved, so
// that GC on any node can take the objects of committed flushes that were
// replaced since (compaction, trims) before the window ends.
func (wi *windowIntents) publish(ctx context.Context) {
	done := wi.w.committed.Load()
	wi.mu.Lock()
	var starts []int64
	for start, x := range wi.mu.m {
		if isClosed(x.written) && x.err == nil && x.done < done {
			starts = append(starts, start)
		}
	}
	wi.mu.Unlock()
	for _, start := range starts {
		if wi.write(ctx, start, done) == nil {
			wi.mu.Lock()
			if x := wi.mu.m[start]; x != nil {
				x.done = max(x.done, done)
			}
			wi.mu.Unlock()
		}
	}
}

// sweep deletes the intents of windows that are over and fully answered.
func (wi *windowIntents) sweep(ctx context.Context, now int64) {
	wi.mu.Lock()
	var done []int64
	for start, x := range wi.mu.m {
		if start+wi.span() <= now && x.outstanding == 0 && isClosed(x.written) {
			done = append(done, start)
		}
	}
	wi.mu.Unlock()
	for _, start := range done {
		if _, _, err := wi.w.e.meta.Txn(ctx, nil, []meta.Op{meta.Delete(wi.w.e.keys.windowIntent(wi.w.opts.NodeID, start))}); err != nil {
			continue // next round
		}
		wi.mu.Lock()
		if x := wi.mu.m[start]; x != nil && x.outstanding == 0 {
			delete(wi.mu.m, start)
		}
		wi.mu.Unlock()
	}
}

// close stops the loop and drops the intents of windows with nothing
// outstanding (a window still counting flushes keeps its intent).
func (wi *windowIntents) close() {
	close(wi.stop)
	wi.done.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), wi.w.opts.CommitTimeout)
	defer cancel()
	wi.sweep(ctx, 1<<62)
}
