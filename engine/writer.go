package engine

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/lakegate/lakegate/engine/wal"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
)

// walWriter is the node's single WAL writer. It batches entries of every log
// into one object per flush (on FlushBytes or Linger), PUTs objects
// concurrently (at most MaxInflightFlushes) and commits them to the metadata
// store strictly in flush order, so entries appended to one log in order get
// increasing offsets.
//
// Goroutines: batch (owns the open batch), one PUT goroutine per in-flight
// flush, commit (owns the head cache). Appenders only send requests and wait.
type walWriter struct {
	e        *Engine
	opts     Options
	reqs     chan *appendReq // bounded by count; bytes bounded by pending
	pending  *semaphore.Weighted
	commitCh chan *flush // flushes in seq order; cap MaxInflightFlushes
	inflight chan struct{}
	stop     chan struct{}
	done     sync.WaitGroup

	// closeMu orders Append's enqueue before close: senders hold it shared,
	// close takes it exclusively to set closed, so nothing is enqueued
	// after the batch loop's final drain.
	closeMu sync.RWMutex
	closed  bool

	// headsMu guards heads, the committer's cache of log heads and their
	// ModRevision (the groups of one flush commit concurrently).
	headsMu sync.Mutex
	heads   map[lakestream.LogID]cachedHead
	// intents tracks background deletions of pending intents; intentSlots
	// bounds how many run at once.
	intents     sync.WaitGroup
	intentSlots chan struct{}
}

type cachedHead struct {
	h      head
	modRev int64
}

type appendReq struct {
	log       lakestream.LogID
	records   int32
	publishMs int64
	guard     *ownership // nil: unguarded
	payload   []byte     // owned by the request (copied from the caller)
	// done is called once with the outcome (it releases the request's
	// pending bytes); it never blocks.
	done func(appendResult)
}

type appendResult struct {
	h   lakestream.EntryHeader
	err error
}

// flush is one WAL object on its way to the store and the index.
type flush struct {
	seq     uint64
	object  string
	writeMs int64
	logs    []lakestream.LogID // first-append order
	byLog   map[lakestream.LogID][]*appendReq
	bytes   int64
	budget  wal.Budget // what the object will hold: every WAL limit is checked on it before an entry is taken
	data    []byte
	refs    []wal.ChunkRef
	putDone chan struct{}
	putErr  error
	started time.Time // when put began (lakegate_wal_flush_seconds)
}

func newWALWriter(e *Engine) *walWriter {
	o := e.opts
	w := &walWriter{
		e:        e,
		opts:     o,
		reqs:     make(chan *appendReq, 4096),
		pending:  semaphore.NewWeighted(o.MaxPendingBytes),
		commitCh: make(chan *flush, o.MaxInflightFlushes),
		inflight: make(chan struct{}, o.MaxInflightFlushes),
		stop:     make(chan struct{}),
		heads:    map[lakestream.LogID]cachedHead{},

		intentSlots: make(chan struct{}, 64),
	}
	w.done.Add(2)
	go w.batchLoop()
	go w.commitLoop()
	return w
}

// append queues one entry and waits for its commit. The caller has
// validated the arguments.
func (w *walWriter) append(ctx context.Context, id lakestream.LogID, records int32, payload []byte, publishMs int64, guard *ownership) (lakestream.EntryHeader, error) {
	done := make(chan appendResult, 1)
	if err := w.enqueue(ctx, id, records, append([]byte(nil), payload...), publishMs, guard, func(r appendResult) { done <- r }); err != nil {
		return lakestream.EntryHeader{}, err
	}
	select {
	case r := <-done:
		return r.h, r.err
	case <-ctx.Done():
		// The request goes on (its bytes are released when it completes).
		return lakestream.EntryHeader{}, fmt.Errorf("%w: %w", lakestream.ErrIndeterminate, ctx.Err())
	}
}

// enqueue queues one entry for the batch loop and returns once it is in
// reqs: entries leave reqs in order and keep that order through flush and
// commit, so an entry enqueued after another (by any goroutine) gets higher
// offsets in its log if both commit. It blocks while MaxPendingBytes are in
// flight (backpressure) or reqs is full, until ctx ends. done is called
// exactly once with the outcome, from the writer's goroutines, unless
// enqueue returns an error; it must not block. The payload is copied. A
// guarded entry commits only while its guard holds (ErrFenced otherwise).
func (w *walWriter) enqueue(ctx context.Context, id lakestream.LogID, records int32, payload []byte, publishMs int64, guard *ownership, done func(appendResult)) error {
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
		payload:   payload,
		done: func(r appendResult) {
			w.pending.Release(size)
			done(r)
		},
	}
	w.closeMu.RLock()
	defer w.closeMu.RUnlock()
	if w.closed {
		w.pending.Release(size)
		return lakestream.ErrClosed
	}
	select {
	case w.reqs <- req:
		return nil
	case <-ctx.Done():
		w.pending.Release(size)
		return ctx.Err()
	}
}

func (w *walWriter) close() {
	w.closeMu.Lock()
	w.closed = true
	w.closeMu.Unlock()
	close(w.stop)
	w.done.Wait()
	w.intents.Wait()
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
		case <-timer.C:
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

// put writes the pending intent and the object. It runs concurrently with
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
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	f.object = fmt.Sprintf("wal/%s/%013d-%08x-%s", w.opts.NodeID, f.writeMs, f.seq, hex.EncodeToString(rnd[:]))

	ctx, cancel := context.WithTimeout(context.Background(), w.opts.CommitTimeout)
	defer cancel()
	intent := fmt.Appendf(nil, `{"created":%d}`, f.writeMs)
	if _, _, err := w.e.meta.Txn(ctx, nil, []meta.Op{meta.Put(w.e.keys.pending(w.opts.NodeID, f.object), intent)}); err != nil {
		f.putErr = fmt.Errorf("engine: write pending intent: %w", err)
		return
	}
	start := time.Now()
	if err := w.putObject(ctx, f); err != nil { // retried until ctx ends (putretry.go)
		f.putErr = fmt.Errorf("engine: put %s: %w", f.object, err)
		return
	}
	w.e.metrics.observePut(len(f.data), time.Since(start))
	for _, ref := range f.refs {
		if ch, err := chunkFromObject(f.data, ref); err == nil {
			w.e.cache.put(chunkLoc{f.object, ref.Offset}, ch)
		}
	}
}

func (w *walWriter) commitLoop() {
	defer w.done.Done()
	for f := range w.commitCh {
		<-f.putDone
		w.commitFlush(f)
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

func (w *walWriter) commitFlush(f *flush) {
	if f.putErr != nil {
		w.e.metrics.observeFlush(len(f.data), time.Since(f.started), f.putErr)
		w.failAll(f, fmt.Errorf("%w: %w", lakestream.ErrUnavailable, f.putErr))
		w.dropIntent(f)
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
	// Groups hold disjoint logs, so they commit concurrently.
	var groups sync.WaitGroup
	for _, group := range w.groups(f) {
		groups.Add(1)
		go func() {
			defer groups.Done()
			w.commitGroup(ctx, f, group, refByLog)
		}()
	}
	groups.Wait()
	w.e.metrics.observeFlush(len(f.data), time.Since(f.started), nil)
	if h := w.opts.hooks.afterCommit; h != nil {
		if err := h(f.object); err != nil {
			return
		}
	}
	w.dropIntent(f)
}

// dropIntent deletes the flush's pending intent in the background (off the
// commit path: a late delete only delays GC of an orphan).
func (w *walWriter) dropIntent(f *flush) {
	key := w.e.keys.pending(w.opts.NodeID, f.object)
	w.intentSlots <- struct{}{}
	w.intents.Add(1)
	go func() {
		defer func() { <-w.intentSlots; w.intents.Done() }()
		ctx, cancel := context.WithTimeout(context.Background(), w.opts.CommitTimeout)
		defer cancel()
		w.e.dropIntentKey(ctx, key)
	}()
}

func (w *walWriter) cachedHead(id lakestream.LogID) (cachedHead, bool) {
	w.headsMu.Lock()
	defer w.headsMu.Unlock()
	ch, ok := w.heads[id]
	return ch, ok
}

func (w *walWriter) setHead(id lakestream.LogID, ch cachedHead) {
	w.headsMu.Lock()
	defer w.headsMu.Unlock()
	w.heads[id] = ch
}

func (w *walWriter) forgetHead(id lakestream.LogID) {
	w.headsMu.Lock()
	defer w.headsMu.Unlock()
	delete(w.heads, id)
}

// groups splits the logs of f into commit transactions: at most
// logsPerTxn logs each (two ops per log), and at most MaxTxnOps compares
// (one per log, plus one per distinct guard of its entries).
func (w *walWriter) groups(f *flush) [][]lakestream.LogID {
	var (
		out   [][]lakestream.LogID
		start int
		cmps  int
	)
	for i, id := range f.logs {
		n := 1 + len(guardsOf(f.byLog[id]))
		if i > start && (i-start >= w.e.logsPerTxn || cmps+n > w.e.meta.MaxTxnOps()) {
			out = append(out, f.logs[start:i])
			start, cmps = i, 0
		}
		cmps += n
	}
	if start < len(f.logs) {
		out = append(out, f.logs[start:])
	}
	return out
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

// planned is one log's part of a commit transaction.
type planned struct {
	id     lakestream.LogID
	ref    wal.ChunkRef
	prev   cachedHead
	next   head
	entry  indexEntry
	guards []*ownership
}

// commitGroup commits the chunks of some logs of f in one transaction,
// retrying on head conflicts, and answers their appends.
func (w *walWriter) commitGroup(ctx context.Context, f *flush, group []lakestream.LogID, refs map[lakestream.LogID]wal.ChunkRef) {
	todo := append([]lakestream.LogID(nil), group...)
	for attempt := 0; len(todo) > 0; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				w.failLogs(f, todo, fmt.Errorf("%w: commit %s: %w", lakestream.ErrUnavailable, f.object, err))
				return
			}
		}
		plans, failed := w.plan(ctx, f, todo, refs)
		for id, err := range failed {
			w.failLogs(f, []lakestream.LogID{id}, err)
		}
		if len(plans) == 0 {
			return
		}
		cmps := make([]meta.Cmp, 0, len(plans))
		ops := make([]meta.Op, 0, 2*len(plans))
		for _, p := range plans {
			cmps = append(cmps, meta.Cmp{Key: w.e.keys.head(p.id), ModRevision: p.prev.modRev})
			for _, g := range p.guards {
				cmps = g.cmps(cmps...)
			}
			ops = append(ops,
				meta.Put(w.e.keys.head(p.id), p.next.Encode()),
				meta.Put(w.e.keys.idx(p.id, p.entry.Last()), p.entry.Encode()))
		}
		start := time.Now()
		ok, rev, err := w.e.meta.Txn(ctx, cmps, ops)
		w.e.metrics.observeTxn(time.Since(start), ok, err)
		switch {
		case err != nil:
			// The outcome is unknown: find out, per log, whether it applied.
			todo = todo[:0]
			for _, p := range plans {
				applied, rerr := w.resolve(ctx, f, p)
				switch {
				case rerr != nil:
					w.failLogs(f, []lakestream.LogID{p.id}, fmt.Errorf("%w: commit %s: %w (resolving: %w)", lakestream.ErrIndeterminate, f.object, err, rerr))
				case applied:
					w.acked(f, p, 0)
				default:
					todo = append(todo, p.id)
				}
			}
		case ok:
			for _, p := range plans {
				w.acked(f, p, rev)
			}
			return
		default:
			// A head moved under us (another writer, a fence or a trim),
			// or a guard was lost.
			todo = todo[:0]
			for _, p := range plans {
				w.forgetHead(p.id)
				if err := checkGuards(ctx, w.e.meta, p.guards); err != nil {
					w.failLogs(f, []lakestream.LogID{p.id}, err)
					continue
				}
				todo = append(todo, p.id)
			}
		}
	}
}

// plan reads (or reuses) the heads of ids and computes their new heads and
// index entries. Logs that cannot take appends are returned in failed.
func (w *walWriter) plan(ctx context.Context, f *flush, ids []lakestream.LogID, refs map[lakestream.LogID]wal.ChunkRef) ([]planned, map[lakestream.LogID]error) {
	var plans []planned
	failed := map[lakestream.LogID]error{}
	for _, id := range ids {
		ch, ok := w.cachedHead(id)
		if !ok {
			kv, found, err := w.e.meta.Get(ctx, w.e.keys.head(id))
			if err != nil {
				failed[id] = fmt.Errorf("%w: read head of log %d: %w", lakestream.ErrUnavailable, id, err)
				continue
			}
			if found {
				h, err := decodeHead(kv.Value)
				if err != nil {
					failed[id] = err
					continue
				}
				ch = cachedHead{h: h, modRev: kv.ModRevision}
			}
			w.setHead(id, ch)
		}
		switch {
		case ch.h.Deleted:
			failed[id] = fmt.Errorf("%w: log %d", lakestream.ErrNoSuchLog, id)
			continue
		case ch.h.Fenced:
			failed[id] = fmt.Errorf("%w: log %d", lakestream.ErrFenced, id)
			continue
		}
		guards := guardsOf(f.byLog[id])
		if err := heldAll(guards); err != nil {
			failed[id] = err
			continue
		}
		ref := refs[id]
		e := indexEntry{
			Kind:         kindWAL,
			First:        ch.h.Next,
			Records:      int64(ref.Records),
			Entries:      int64(ref.Entries),
			BytesEnd:     ch.h.Bytes + ref.PayloadBytes,
			PayloadBytes: ref.PayloadBytes,
			MinPublishMs: ref.MinPublishTimeMs,
			MaxPublishMs: ref.MaxPublishTimeMs,
			WriteMs:      f.writeMs,
			Object:       f.object,
			Offset:       ref.Offset,
			Length:       ref.Length,
			CRC:          ref.CRC,
		}
		next := ch.h
		next.Next += e.Records
		next.Bytes = e.BytesEnd
		plans = append(plans, planned{id: id, ref: ref, prev: ch, next: next, entry: e, guards: guards})
	}
	return plans, failed
}

// resolve establishes whether plan p was applied by a transaction whose
// outcome was not reported. Fast path: the index key at the planned last
// offset names this object and chunk. Otherwise (the key may have been
// replaced by a compaction since) it was applied iff the head passed the
// planned range and the entries there are exactly this flush's entries.
func (w *walWriter) resolve(ctx context.Context, f *flush, p planned) (bool, error) {
	w.forgetHead(p.id)
	var err error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if berr := backoff(ctx, attempt); berr != nil {
				return false, err
			}
		}
		var applied, sure bool
		applied, sure, err = w.tryResolve(ctx, f, p)
		if err == nil && sure {
			return applied, nil
		}
	}
}

func (w *walWriter) tryResolve(ctx context.Context, f *flush, p planned) (applied, sure bool, err error) {
	kv, found, err := w.e.meta.Get(ctx, w.e.keys.idx(p.id, p.entry.Last()))
	if err != nil {
		return false, false, err
	}
	if found {
		e, err := decodeIndexEntry(kv.Value)
		if err != nil {
			return false, true, err
		}
		if e.Object == f.object && e.Offset == p.entry.Offset {
			return true, true, nil
		}
	}
	l, err := w.e.log(ctx, p.id)
	if err != nil {
		return false, false, err
	}
	h, err := l.refresh(ctx)
	if err != nil {
		return false, false, err
	}
	if h.Next < p.entry.End() {
		return false, true, nil
	}
	ents, err := l.readEntries(ctx, h, p.entry.First, int(p.entry.Records), 1<<62)
	if err != nil {
		return false, false, err
	}
	reqs := f.byLog[p.id]
	if len(ents) != len(reqs) || ents[0].Offset != p.entry.First {
		return false, true, nil
	}
	for i, r := range reqs {
		if ents[i].Records != r.records || !bytes.Equal(ents[i].Payload, r.payload) {
			return false, true, nil
		}
	}
	return true, true, nil
}

// acked answers the appends of one committed log and publishes the new head.
// rev is the transaction's revision (the head's new ModRevision), or 0 when
// unknown (the head is then re-read on next use).
func (w *walWriter) acked(f *flush, p planned, rev int64) {
	if rev > 0 {
		w.setHead(p.id, cachedHead{h: p.next, modRev: rev})
	} else {
		w.forgetHead(p.id)
	}
	off := p.entry.First
	bytes := p.prev.h.Bytes
	for _, r := range f.byLog[p.id] {
		bytes += int64(len(r.payload))
		pub := r.publishMs
		if pub == 0 {
			pub = f.writeMs
		}
		r.done(appendResult{h: lakestream.EntryHeader{
			Offset:         off,
			Records:        r.records,
			PublishTimeMs:  pub,
			WriteTimeMs:    f.writeMs,
			Size:           int32(len(r.payload)),
			CumulativeSize: bytes,
		}})
		off += int64(r.records)
	}
	w.e.metrics.observeAppends(len(f.byLog[p.id]), p.entry.PayloadBytes)
	w.e.headAdvanced(p.id, p.next)
}

func (w *walWriter) failLogs(f *flush, ids []lakestream.LogID, err error) {
	for _, id := range ids {
		w.forgetHead(id)
		for _, r := range f.byLog[id] {
			r.done(appendResult{err: err})
		}
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
