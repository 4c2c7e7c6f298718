package engine

// The commit log (docs/index-format.md, "The commit log"): WAL flushes and
// control operations are commit records under commits/rec/, ordered by the
// metadata revision that created them. Every engine watches the prefix and
// applies the records, in order, to the logs it has open; the fold writes
// the records' effect into the logs' heads and index entries and deletes
// them.
//
// Lock order: commitLog.mu, then Engine.mu, then logHandle.mu.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lakegate/lakegate/engine/index"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
)

// heldRecord is a commit record the engine holds until the fold deletes it.
type heldRecord struct {
	key       string
	rev       int64
	rec       index.Record // zero Kind for a void key
	appliedAt time.Time
	// joint marks the record's chunks in the index when it is a kind-3
	// record holding chunks of two or more logs (jointOf); nil otherwise.
	joint *index.Joint
}

// jointOf is the Joint of the chunks of record rec at revision rev: set
// for a kind-3 record (a committed staging set) with chunks of two or more
// logs, whose chunks the tables must materialize together
// (docs/index-format.md, "Index entry"); nil for any other record.
func jointOf(rec index.Record, rev int64) *index.Joint {
	if rec.Kind != index.RecordStaged {
		return nil
	}
	var logs []int64
	for _, ch := range rec.Chunks {
		if !slices.Contains(logs, ch.Log) {
			logs = append(logs, ch.Log)
		}
	}
	if len(logs) < 2 {
		return nil
	}
	slices.Sort(logs)
	return &index.Joint{Rev: rev, Logs: logs}
}

// chunkResult is the outcome of one log's chunk of a record, as applied.
type chunkResult struct {
	first     int64 // offset of the chunk's first record
	prevBytes int64 // cumulative bytes of the log before the chunk
	err       error // ErrFenced / ErrNoSuchLog: the chunk is void
}

// pendingRecord is a record this engine committed (or is committing): the
// commit log calls done with its results once it applies it (a void of its
// key answers nothing: the writer settles it).
type pendingRecord struct {
	rev   int64     // the commit's revision once known (0: not yet)
	at    time.Time // when rev became known
	epoch int64     // commitLog.mu.epoch when it was expected
	done  func(rev int64, results map[lakestream.LogID]chunkResult)
}

type commitLog struct {
	e *Engine

	mu struct {
		sync.Mutex
		applied  int64                     // every record with a revision ≤ applied is applied
		held     []*heldRecord             // by revision, ascending
		byKey    map[string]*heldRecord    // held, by key
		waiters  []revWaiter               // woken when applied ≥ rev
		pending  map[string]*pendingRecord // this engine's records awaiting their application
		loads    int                       // log loads in flight: record deletions wait
		deferred []string                  // keys deleted while loads were in flight
		epoch    int64                     // incremented by every resync
		// lastRec is the revision of the last chunk or control record
		// applied here, by the watch or by applyOwn, when every record
		// below it is applied too (0: unknown, after a resync). Every such
		// record writes commits/sync in its transaction, so a commit whose
		// transaction found commits/sync still at lastRec follows it with
		// no record in between (applyOwn).
		lastRec int64
		// ahead counts the records applyOwn applied that the watch has
		// not delivered yet (bounded by maxOwnAhead: a stalled watch stops
		// the appends it would stop without applyOwn).
		ahead int
		// touched is, per log, the revision of the newest record naming
		// it that this engine applied; resynced the revision of the last
		// resync (which may have missed records) or of the last time
		// touched outgrew touchedMax and was cleared. LogRevision answers
		// the larger: never lower than an earlier answer, and higher once
		// a new record names the log.
		touched  map[lakestream.LogID]int64
		resynced int64
		// lastSync is the revision of commits/sync that the newest
		// successful sync read, and syncStart when that read began
		// (lakestream.WithStaleReads).
		lastSync  int64
		syncStart time.Time
	}
	started chan struct{}
	kick    chan struct{} // asks the fold loop for a fold now
	foldMu  sync.Mutex    // one fold at a time per engine
	// foldHeads caches the heads the fold read or wrote, with their
	// ModRevision (guarded by foldMu).
	foldHeads map[lakestream.LogID]cachedHead
}

type cachedHead struct {
	h      head
	modRev int64
}

type revWaiter struct {
	rev int64
	ch  chan struct{}
}

func newCommitLog(e *Engine) *commitLog {
	c := &commitLog{e: e, started: make(chan struct{}), kick: make(chan struct{}, 1), foldHeads: map[lakestream.LogID]cachedHead{}}
	c.mu.byKey = map[string]*heldRecord{}
	c.mu.pending = map[string]*pendingRecord{}
	c.mu.touched = map[lakestream.LogID]int64{}
	return c
}

// start reads the records held in the store and starts the watch and the
// fold loop. It returns once the records are loaded.
func (c *commitLog) start(ctx context.Context) error {
	rev, err := c.resyncRead(ctx)
	if err != nil {
		return err
	}
	close(c.started)
	c.e.bg.Add(2)
	go c.watchLoop(rev)
	go c.foldLoop()
	return nil
}

// resyncRead replaces the held records by the store's, as of a revision it
// returns (the watch goes on after it).
func (c *commitLog) resyncRead(ctx context.Context) (int64, error) {
	_, rev, err := c.e.meta.Txn(ctx, nil, nil)
	if err != nil {
		return 0, fmt.Errorf("%w: commit log: %w", lakestream.ErrUnavailable, err)
	}
	p := c.e.keys.recordPrefix()
	var held []*heldRecord
	start, end := p, prefixEnd(p)
	for {
		kvs, err := c.e.meta.Range(ctx, start, end, 1000)
		if err != nil {
			return 0, fmt.Errorf("%w: commit log: %w", lakestream.ErrUnavailable, err)
		}
		for _, kv := range kvs {
			if kv.ModRevision > rev {
				continue // the watch delivers it
			}
			hr, err := decodeHeld(kv)
			if err != nil {
				c.e.opts.Logger.Error("engine: undecodable commit record left in place", "key", kv.Key, "err", err)
				continue
			}
			held = append(held, hr)
		}
		if len(kvs) < 1000 {
			break
		}
		start = kvs[len(kvs)-1].Key + "\x00"
	}
	sort.Slice(held, func(i, j int) bool { return held[i].rev < held[j].rev })
	c.mu.Lock()
	c.mu.held = held
	c.mu.byKey = make(map[string]*heldRecord, len(held))
	for _, hr := range held {
		c.mu.byKey[hr.key] = hr
	}
	c.mu.applied = max(c.mu.applied, rev)
	c.mu.lastRec = 0
	c.mu.ahead = 0
	c.mu.epoch++
	c.mu.resynced = max(c.mu.resynced, rev)
	clear(c.mu.touched)
	c.wakeLocked()
	c.mu.Unlock()
	return rev, nil
}

func decodeHeld(kv meta.KV) (*heldRecord, error) {
	hr := &heldRecord{key: kv.Key, rev: kv.ModRevision, appliedAt: time.Now()}
	if index.IsVoid(kv.Value) {
		return hr, nil
	}
	r, err := index.DecodeRecord(kv.Value)
	if err != nil {
		return nil, err
	}
	hr.rec = r
	hr.joint = jointOf(r, hr.rev)
	return hr, nil
}

// watchLoop applies the records as the watch delivers them. When the watch
// ends (compaction, lag, store trouble) it re-reads everything and reloads
// the open logs.
func (c *commitLog) watchLoop(after int64) {
	defer c.e.bg.Done()
	ctx := c.e.ctx
	p := c.e.keys.commitsPrefix()
	for attempt := 0; ctx.Err() == nil; {
		for ev := range c.e.meta.Watch(ctx, p, after) {
			attempt = 0
			after = ev.KV.ModRevision
			c.apply(ev)
		}
		if ctx.Err() != nil {
			return
		}
		attempt++
		if backoff(ctx, attempt) != nil {
			return
		}
		rev, err := c.resyncRead(ctx)
		if err != nil {
			continue
		}
		c.reloadAll(ctx)
		after = rev
	}
}

// apply handles one watch event.
func (c *commitLog) apply(ev meta.Event) {
	rp := c.e.keys.recordPrefix()
	var calls []func()
	c.mu.Lock()
	switch {
	case ev.Kind == meta.EventPut && strings.HasPrefix(ev.KV.Key, rp):
		if _, ok := c.mu.byKey[ev.KV.Key]; ok || ev.KV.ModRevision <= c.mu.applied {
			if ok && ev.KV.ModRevision > c.mu.applied && c.mu.ahead > 0 {
				c.mu.ahead-- // applied by applyOwn
			}
			break // seen (a resync read it, or applyOwn applied it)
		}
		hr, err := decodeHeld(ev.KV)
		if err != nil {
			c.e.opts.Logger.Error("engine: undecodable commit record ignored", "key", ev.KV.Key, "err", err)
			break
		}
		c.holdLocked(hr)
		results := c.applyRecordLocked(hr)
		if hr.rec.Kind != 0 {
			c.mu.lastRec = max(c.mu.lastRec, hr.rev)
		}
		// A void of this engine's key (writer.resolveRecord) answers
		// nothing: the writer, waiting for the watch to pass it
		// (watchedThrough), settles the record itself.
		if pr := c.mu.pending[hr.key]; pr != nil && hr.rec.Kind != 0 {
			delete(c.mu.pending, hr.key)
			if !pr.at.IsZero() {
				c.e.metrics.applyWaits.Add(1)
				c.e.metrics.applyWaitNanos.Add(int64(time.Since(pr.at)))
			}
			rev := hr.rev
			calls = append(calls, func() { pr.done(rev, results) })
		}
	case ev.Kind == meta.EventDelete && strings.HasPrefix(ev.KV.Key, rp):
		if c.mu.loads > 0 {
			c.mu.deferred = append(c.mu.deferred, ev.KV.Key)
		} else {
			c.dropLocked(ev.KV.Key)
		}
	}
	c.mu.applied = max(c.mu.applied, ev.KV.ModRevision)
	c.wakeLocked()
	c.mu.Unlock()
	for _, f := range calls {
		f()
	}
}

// applyRecordLocked applies a record to the open logs and returns its
// chunks' results (for the logs that are open).
func (c *commitLog) applyRecordLocked(hr *heldRecord) map[lakestream.LogID]chunkResult {
	var results map[lakestream.LogID]chunkResult
	switch hr.rec.Kind {
	case index.RecordChunks, index.RecordStaged:
		// A kind-3 record holds several chunks of a log: they are applied
		// together, in their order, at the record's revision.
		results = make(map[lakestream.LogID]chunkResult, len(hr.rec.Chunks))
		for id, chs := range chunksByLog(hr.rec.Chunks) {
			if l := c.e.openLog(id); l != nil {
				if r, ok := l.applyChunks(hr, chs); ok {
					results[id] = r
				}
			}
		}
	case index.RecordControl:
		for _, op := range hr.rec.Controls {
			if l := c.e.openLog(lakestream.LogID(op.Log)); l != nil {
				l.applyControl(hr.rev, op)
			}
		}
	}
	return results
}

// chunksByLog groups a record's chunks by log, keeping their order.
func chunksByLog(chs []index.RecordChunk) map[lakestream.LogID][]index.RecordChunk {
	m := make(map[lakestream.LogID][]index.RecordChunk, len(chs))
	for _, ch := range chs {
		id := lakestream.LogID(ch.Log)
		m[id] = append(m[id], ch)
	}
	return m
}

// maxOwnAhead bounds the records applyOwn applies ahead of the watch.
const maxOwnAhead = 256

// holdLocked adds hr to the held records, in revision order: a void key
// the watch delivers can be older than a record applyOwn applied first.
func (c *commitLog) holdLocked(hr *heldRecord) {
	i := len(c.mu.held)
	for i > 0 && c.mu.held[i-1].rev > hr.rev {
		i--
	}
	c.mu.held = slices.Insert(c.mu.held, i, hr)
	c.mu.byKey[hr.key] = hr
	for _, ch := range hr.rec.Chunks {
		c.touchLocked(lakestream.LogID(ch.Log), hr.rev)
	}
	for _, op := range hr.rec.Controls {
		c.touchLocked(lakestream.LogID(op.Log), hr.rev)
	}
}

// touchedMax bounds commitLog.mu.touched (≈ 40 bytes an entry).
const touchedMax = 1 << 16

func (c *commitLog) touchLocked(id lakestream.LogID, rev int64) {
	if _, ok := c.mu.touched[id]; !ok && len(c.mu.touched) >= touchedMax {
		// Every log's answer becomes this revision: higher than any
		// earlier one (each caller sees a change once), never lower.
		for _, r := range c.mu.touched {
			c.mu.resynced = max(c.mu.resynced, r)
		}
		clear(c.mu.touched)
	}
	c.mu.touched[id] = max(c.mu.touched[id], rev)
}

// logRevision is Engine.LogRevision.
func (c *commitLog) logRevision(id lakestream.LogID) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(c.mu.touched[id], c.mu.resynced)
}

// lastRecord returns lastRec (see commitLog.mu).
func (c *commitLog) lastRecord() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.lastRec
}

// applyOwn applies this engine's record rec, committed at rev by a
// transaction that compared commits/sync to after (a lastRecord value):
// no chunk or control record lies between after and rev, and every record
// up to after is applied here, so applying rec now gives the offsets the
// watch would give — without waiting for it. The watch skips the record
// when it arrives (byKey). It reports false, leaving the record to the
// watch, when the state moved on (a resync) since after was read.
func (c *commitLog) applyOwn(key string, rev, after int64, rec index.Record) bool {
	c.mu.Lock()
	if _, ok := c.mu.byKey[key]; ok {
		c.mu.Unlock()
		c.e.metrics.ownWatchFirst.Add(1)
		return true // the watch was first; it answered
	}
	if c.mu.lastRec != after || rev <= c.mu.applied || c.mu.ahead >= maxOwnAhead {
		c.mu.Unlock()
		return false
	}
	hr := &heldRecord{key: key, rev: rev, rec: rec, appliedAt: time.Now(), joint: jointOf(rec, rev)}
	c.holdLocked(hr)
	results := c.applyRecordLocked(hr)
	c.mu.lastRec = rev
	c.mu.ahead++
	pr := c.mu.pending[key]
	delete(c.mu.pending, key)
	c.mu.Unlock()
	c.e.metrics.ownApplies.Add(1)
	if pr != nil {
		// On the commit loop: appends are answered in commit order.
		pr.done(rev, results)
	}
	return true
}

// dropLocked forgets a deleted (folded) record and its chunks in the open
// logs' tails.
func (c *commitLog) dropLocked(key string) {
	hr := c.mu.byKey[key]
	if hr == nil {
		return
	}
	delete(c.mu.byKey, key)
	if i := slices.Index(c.mu.held, hr); i >= 0 {
		c.mu.held = slices.Delete(c.mu.held, i, i+1)
	}
	for _, ch := range hr.rec.Chunks {
		if l := c.e.openLog(lakestream.LogID(ch.Log)); l != nil {
			l.dropTail(hr.rev)
		}
	}
}

func (c *commitLog) wakeLocked() {
	keep := c.mu.waiters[:0]
	for _, w := range c.mu.waiters {
		if w.rev <= c.mu.applied {
			close(w.ch)
		} else {
			keep = append(keep, w)
		}
	}
	c.mu.waiters = keep
}

// waitApplied returns once every record with a revision ≤ rev is applied.
func (c *commitLog) waitApplied(ctx context.Context, rev int64) error {
	c.mu.Lock()
	if c.mu.applied >= rev {
		c.mu.Unlock()
		return nil
	}
	w := revWaiter{rev: rev, ch: make(chan struct{})}
	c.mu.waiters = append(c.mu.waiters, w)
	c.mu.Unlock()
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.e.ctx.Done():
		return lakestream.ErrClosed
	}
}

// sync waits until every record committed before the call (on any node) is
// applied: one linearizable read of commits/sync.
//
// Under lakestream.WithStaleReads(ctx, d) a sync whose read began at most d
// ago serves instead: the caller waits for what that read saw.
func (c *commitLog) sync(ctx context.Context) error {
	if d := lakestream.StaleReadsOf(ctx); d > 0 {
		c.mu.Lock()
		rev, at := c.mu.lastSync, c.mu.syncStart
		c.mu.Unlock()
		if !at.IsZero() && time.Since(at) <= d {
			return c.waitApplied(ctx, rev)
		}
	}
	start := time.Now()
	kv, found, err := c.e.meta.Get(ctx, c.e.keys.commitSync())
	if err != nil {
		return fmt.Errorf("%w: commit log: %w", lakestream.ErrUnavailable, err)
	}
	var rev int64
	if found {
		rev = kv.ModRevision
	}
	c.mu.Lock()
	if start.After(c.mu.syncStart) {
		c.mu.lastSync, c.mu.syncStart = rev, start
	}
	c.mu.Unlock()
	return c.waitApplied(ctx, rev)
}

// forgetIfFolded drops a held record that the store no longer has (it was
// folded and deleted before this engine's watch delivered the delete).
func (c *commitLog) forgetIfFolded(ctx context.Context, key string) error {
	_, found, err := c.e.meta.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("%w: commit log: %w", lakestream.ErrUnavailable, err)
	}
	if !found {
		c.mu.Lock()
		if c.mu.loads > 0 {
			c.mu.deferred = append(c.mu.deferred, key)
		} else {
			c.dropLocked(key)
		}
		c.mu.Unlock()
	}
	return nil
}

// expect registers a record this engine is about to commit.
func (c *commitLog) expect(key string, pr *pendingRecord) {
	c.mu.Lock()
	pr.epoch = c.mu.epoch
	c.mu.pending[key] = pr
	c.mu.Unlock()
}

// watchedThrough waits until the watch has passed voidRev, the revision at
// which this engine voided its record key after a lost reply
// (writer.resolveRecord), and reports whether the watch ran unbroken since
// the record was expected. The void finds the key absent both when the
// record never applied and when it applied and was folded and deleted
// before the void: an unbroken watch delivered the record's put before
// the void's, so if the record applied it has been answered by now (the
// pending record is gone); a resync may have skipped the put, and then
// nobody can tell.
func (c *commitLog) watchedThrough(ctx context.Context, key string, voidRev int64) (bool, error) {
	if err := c.waitApplied(ctx, voidRev); err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	pr := c.mu.pending[key]
	return pr == nil || pr.epoch == c.mu.epoch, nil
}

// unexpect forgets a record that will never apply (voided, or given up);
// it reports false when the record was applied meanwhile (done was or is
// being called).
func (c *commitLog) unexpect(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.mu.pending[key]; !ok {
		return false
	}
	delete(c.mu.pending, key)
	return true
}

// load computes the state of log l from its head (read now) and the held
// records after it.
func (c *commitLog) load(ctx context.Context, l *logHandle, create bool) error {
	c.mu.Lock()
	c.mu.loads++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.mu.loads--
		if c.mu.loads == 0 {
			for _, k := range c.mu.deferred {
				c.dropLocked(k)
			}
			c.mu.deferred = nil
		}
		c.mu.Unlock()
	}()
	h, found, err := l.readHead(ctx)
	if err != nil {
		return err
	}
	if !found && create {
		key := c.e.keys.head(l.id)
		ok, _, err := c.e.meta.Txn(ctx, []meta.Cmp{{Key: key}}, []meta.Op{meta.Put(key, head{}.Encode())})
		if err != nil {
			return fmt.Errorf("%w: create log %d: %w", lakestream.ErrUnavailable, l.id, err)
		}
		if !ok { // created concurrently: read it
			if h, _, err = l.readHead(ctx); err != nil {
				return err
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	l.resetState(h, c.mu.applied, c.mu.held)
	return nil
}

// reloadAll reloads every open log after a resync.
func (c *commitLog) reloadAll(ctx context.Context) {
	c.e.mu.Lock()
	logs := make([]*logHandle, 0, len(c.e.mu.logs))
	for _, l := range c.e.mu.logs {
		logs = append(logs, l)
	}
	c.e.mu.Unlock()
	for _, l := range logs {
		if !l.loaded() {
			continue
		}
		for attempt := 1; ctx.Err() == nil; attempt++ {
			if err := c.load(ctx, l, false); err == nil {
				break
			}
			if backoff(ctx, attempt) != nil {
				return
			}
		}
	}
	// Records of this engine: those held now are answered from the tails;
	// those applied (their revision is known and passed) but folded away
	// while the watch was down cannot tell their offsets any more: their
	// appends end indeterminate. The others are still to come.
	type answer struct {
		pr      *pendingRecord
		rev     int64
		results map[lakestream.LogID]chunkResult
	}
	var answers []answer
	c.mu.Lock()
	for k, pr := range c.mu.pending {
		if hr := c.mu.byKey[k]; hr != nil && hr.rec.Kind == 0 {
			continue // a void: the writer settles it (watchedThrough)
		} else if hr != nil {
			delete(c.mu.pending, k)
			res := map[lakestream.LogID]chunkResult{}
			for _, ch := range hr.rec.Chunks {
				if l := c.e.openLog(lakestream.LogID(ch.Log)); l != nil {
					if r, ok := l.resultOf(hr.rev); ok {
						res[lakestream.LogID(ch.Log)] = r
					} else if h := l.snapshot(); h.Deleted || h.Fenced {
						res[lakestream.LogID(ch.Log)] = chunkResult{err: fmt.Errorf("%w: log %d", lakestream.ErrFenced, ch.Log)}
					}
				}
			}
			answers = append(answers, answer{pr, hr.rev, res})
		} else if pr.rev > 0 && pr.rev <= c.mu.applied {
			delete(c.mu.pending, k)
			answers = append(answers, answer{pr, -1, nil})
		}
	}
	c.mu.Unlock()
	for _, a := range answers {
		a.pr.done(a.rev, a.results)
	}
}

// setRev records the revision of a record this engine committed; if the
// watch went past it and the record is gone, it was folded unseen.
func (c *commitLog) setRev(key string, rev int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pr := c.mu.pending[key]; pr != nil {
		pr.rev, pr.at = rev, time.Now()
	}
}

// abandonPending answers every record still expected as indeterminate (the
// engine closes and its watch cannot deliver them).
func (c *commitLog) abandonPending() {
	c.mu.Lock()
	prs := c.mu.pending
	c.mu.pending = map[string]*pendingRecord{}
	c.mu.Unlock()
	for _, pr := range prs {
		pr.done(-1, nil)
	}
}

// --- the fold ---------------------------------------------------------------------

func (c *commitLog) foldLoop() {
	defer c.e.bg.Done()
	t := time.NewTicker(c.e.opts.FoldInterval)
	defer t.Stop()
	for {
		select {
		case <-c.e.ctx.Done():
			return
		case <-t.C:
		case <-c.kick:
		}
		ctx, cancel := context.WithTimeout(c.e.ctx, c.e.opts.CommitTimeout)
		if err := c.fold(ctx, time.Now().Add(-c.e.opts.FoldDelay)); err != nil && c.e.ctx.Err() == nil {
			c.e.opts.Logger.Warn("engine: fold of the commit log failed; retrying", "err", err)
		}
		cancel()
	}
}

// foldLag is what the commit log holds applied and not folded yet: the
// records, and the time since the oldest of them was applied (0 with none).
// Records wait FoldDelay, then the next fold (FoldInterval).
func (c *commitLog) foldLag(now time.Time) (records int, age time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.mu.held) == 0 {
		return 0, 0
	}
	return len(c.mu.held), max(0, now.Sub(c.mu.held[0].appliedAt))
}

// foldNow folds every record applied so far (the port, compaction, trims).
func (c *commitLog) foldNow(ctx context.Context) error {
	// Records applyOwn applied are folded once the watch has passed them.
	c.mu.Lock()
	var last int64
	if n := len(c.mu.held); n > 0 {
		last = c.mu.held[n-1].rev
	}
	c.mu.Unlock()
	if err := c.waitApplied(ctx, last); err != nil {
		return err
	}
	return c.fold(ctx, time.Now().Add(time.Hour))
}

// fold writes the records applied before cutoff (a prefix of the order)
// into the heads and index entries of their logs, then deletes them.
func (c *commitLog) fold(ctx context.Context, cutoff time.Time) error {
	c.foldMu.Lock()
	defer c.foldMu.Unlock()
	c.mu.Lock()
	var recs []*heldRecord
	for _, hr := range c.mu.held {
		// A record applyOwn applied before the watch delivered it waits
		// for the watch: deleting it first would let the watch apply it
		// a second time.
		if hr.appliedAt.After(cutoff) || hr.rev > c.mu.applied {
			break
		}
		recs = append(recs, hr)
	}
	c.mu.Unlock()
	if len(recs) == 0 {
		return nil
	}
	upTo := recs[len(recs)-1].rev
	// Each log's part of the records, in order (one pass over them).
	var logs []lakestream.LogID
	parts := map[lakestream.LogID][]foldItem{}
	for _, hr := range recs {
		for i := range hr.rec.Chunks {
			id := lakestream.LogID(hr.rec.Chunks[i].Log)
			if _, ok := parts[id]; !ok {
				logs = append(logs, id)
			}
			parts[id] = append(parts[id], foldItem{hr: hr, chunk: &hr.rec.Chunks[i]})
		}
		for i := range hr.rec.Controls {
			id := lakestream.LogID(hr.rec.Controls[i].Log)
			if _, ok := parts[id]; !ok {
				logs = append(logs, id)
			}
			parts[id] = append(parts[id], foldItem{hr: hr, control: &hr.rec.Controls[i]})
		}
	}
	var err error
	for attempt := 1; attempt <= 8; attempt++ {
		// A conflict (a head changed: another engine folded, a log was
		// deleted) dropped the cached heads: the next attempt re-reads them.
		if err = c.foldLogs(ctx, logs, parts, upTo); !errors.Is(err, lakestream.ErrConflict) {
			break
		}
		if berr := backoff(ctx, attempt); berr != nil {
			break
		}
	}
	if err != nil {
		return err
	}
	// Every log of the records is folded past them: delete them.
	maxOps := c.e.meta.MaxTxnOps()
	for i := 0; i < len(recs); i += maxOps {
		batch := recs[i:min(i+maxOps, len(recs))]
		ops := make([]meta.Op, len(batch))
		for j, hr := range batch {
			ops[j] = meta.Delete(hr.key)
		}
		if _, _, err := c.e.meta.Txn(ctx, nil, ops); err != nil {
			return fmt.Errorf("%w: commit log: delete folded records: %w", lakestream.ErrUnavailable, err)
		}
	}
	c.e.metrics.folds.Add(1)
	return nil
}

// foldPlan is one log's part of a fold transaction.
type foldPlan struct {
	id   lakestream.LogID
	prev cachedHead
	next head
	ops  []meta.Op
}

// foldItem is one chunk or control operation of a record, for one log.
type foldItem struct {
	hr      *heldRecord
	chunk   *index.RecordChunk
	control *index.Control
}

// foldLogs folds the records' parts (revisions ≤ upTo) into the given
// logs, in transactions of at most MaxTxnOps operations and compares.
func (c *commitLog) foldLogs(ctx context.Context, logs []lakestream.LogID, parts map[lakestream.LogID][]foldItem, upTo int64) error {
	maxOps := c.e.meta.MaxTxnOps()
	var batch []foldPlan
	nops := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := c.foldTxn(ctx, batch)
		batch, nops = batch[:0], 0
		return err
	}
	for _, id := range logs {
		prev, err := c.foldHead(ctx, id)
		if err != nil {
			return err
		}
		if prev.h.Rev >= upTo {
			continue // folded already (by another engine)
		}
		p := c.planFold(id, prev, parts[id], upTo)
		if len(p.ops) > maxOps {
			if err := flush(); err != nil {
				return err
			}
			if err := c.foldLarge(ctx, p, maxOps); err != nil {
				return err
			}
			continue
		}
		if nops+len(p.ops) > maxOps || len(batch)+1 > maxOps {
			if err := flush(); err != nil {
				return err
			}
		}
		batch = append(batch, p)
		nops += len(p.ops)
	}
	return flush()
}

// foldLarge folds one log whose plan needs more than maxOps operations (a
// kind-3 record may hold thousands of its chunks): its index entries go
// first, in transactions compared on the head like the last one, which
// writes the head with the rest. A crash in between leaves entries the
// next fold writes again, at the same keys with the same values (the head
// did not move); a head changed meanwhile fails every one of them.
func (c *commitLog) foldLarge(ctx context.Context, p foldPlan, maxOps int) error {
	hd, idx := p.ops[0], p.ops[1:]
	cmps := []meta.Cmp{{Key: c.e.keys.head(p.id), ModRevision: p.prev.modRev}}
	for len(idx) >= maxOps {
		ok, _, err := c.e.meta.Txn(ctx, cmps, idx[:maxOps])
		c.e.metrics.foldTxns.Add(1)
		if err != nil || !ok {
			delete(c.foldHeads, p.id)
			if err != nil {
				return fmt.Errorf("%w: fold: %w", lakestream.ErrUnavailable, err)
			}
			return fmt.Errorf("%w: fold: a head changed meanwhile", lakestream.ErrConflict)
		}
		idx = idx[maxOps:]
	}
	p.ops = append([]meta.Op{hd}, idx...)
	return c.foldTxn(ctx, []foldPlan{p})
}

func (c *commitLog) foldHead(ctx context.Context, id lakestream.LogID) (cachedHead, error) {
	if ch, ok := c.foldHeads[id]; ok {
		return ch, nil
	}
	kv, found, err := c.e.meta.Get(ctx, c.e.keys.head(id))
	if err != nil {
		return cachedHead{}, fmt.Errorf("%w: log %d head: %w", lakestream.ErrUnavailable, id, err)
	}
	var ch cachedHead
	if found {
		h, err := decodeHead(kv.Value)
		if err != nil {
			return cachedHead{}, err
		}
		ch = cachedHead{h: h, modRev: kv.ModRevision}
	}
	c.foldHeads[id] = ch
	return ch, nil
}

// planFold applies the log's parts of the records after prev's revision to
// prev and returns the head (folded up to upTo) and index entries to write.
func (c *commitLog) planFold(id lakestream.LogID, prev cachedHead, items []foldItem, upTo int64) foldPlan {
	h := prev.h
	var runs []indexEntry
	var run []indexEntry // single chunks of the open run
	closeRun := func() {
		if len(run) > 0 {
			runs = append(runs, runOf(run))
			run = nil
		}
	}
	for _, it := range items {
		if it.hr.rev <= prev.h.Rev {
			continue
		}
		if it.control != nil {
			applyControlOp(&h, *it.control)
			continue
		}
		ch := it.chunk
		if h.Fenced || h.Deleted {
			continue // void
		}
		first := h.Next
		h.Next += ch.Records
		h.Bytes += ch.PayloadBytes
		if h.Next <= h.First {
			continue // trimmed before it was folded: never indexed
		}
		if len(run) >= index.MaxSegments {
			closeRun()
		}
		object, writeMs := it.hr.rec.ChunkObject(*ch)
		one := indexEntry{Kind: kindWAL, First: first, Records: ch.Records, Entries: ch.Entries,
			BytesEnd: h.Bytes, PayloadBytes: ch.PayloadBytes, MinPublishMs: ch.MinPublishMs, MaxPublishMs: ch.MaxPublishMs,
			WriteMs: writeMs, Object: object, Offset: ch.Offset, Length: ch.Length, CRC: ch.CRC}
		// A run holds chunks of one joint record only, or of none: the
		// mark (the record's) holds for every chunk of an entry.
		if len(run) > 0 && run[0].Joint != it.hr.joint {
			closeRun()
		}
		one.Joint = it.hr.joint
		run = append(run, one)
	}
	closeRun()
	h.Rev = max(h.Rev, upTo)
	p := foldPlan{id: id, prev: prev, next: h}
	p.ops = append(p.ops, meta.Put(c.e.keys.head(id), h.Encode()))
	if !h.Deleted {
		for _, r := range runs {
			p.ops = append(p.ops, meta.Put(c.e.keys.idx(id, r.Last()), r.Encode()))
		}
	}
	return p
}

func (c *commitLog) foldTxn(ctx context.Context, batch []foldPlan) error {
	cmps := make([]meta.Cmp, 0, len(batch))
	var ops []meta.Op
	for _, p := range batch {
		cmps = append(cmps, meta.Cmp{Key: c.e.keys.head(p.id), ModRevision: p.prev.modRev})
		ops = append(ops, p.ops...)
	}
	ok, rev, err := c.e.meta.Txn(ctx, cmps, ops)
	c.e.metrics.foldTxns.Add(1)
	if err != nil {
		for _, p := range batch {
			delete(c.foldHeads, p.id)
		}
		return fmt.Errorf("%w: fold: %w", lakestream.ErrUnavailable, err)
	}
	if ok {
		for _, p := range batch {
			c.foldHeads[p.id] = cachedHead{h: p.next, modRev: rev}
		}
		return nil
	}
	// A head changed (another engine folded, or a log was deleted): the
	// next round re-reads them.
	for _, p := range batch {
		delete(c.foldHeads, p.id)
	}
	return fmt.Errorf("%w: fold: a head changed meanwhile", lakestream.ErrConflict)
}

// applyControlOp applies a control operation to a head (monotone).
func applyControlOp(h *head, op index.Control) {
	switch op.Op {
	case index.OpFence:
		h.Fenced = true
	case index.OpTrim:
		h.First = max(h.First, min(op.First, h.Next))
	case index.OpDelete:
		h.Fenced, h.Deleted = true, true
		h.First = h.Next
	}
}

// commitControl writes a control record and waits until it is applied.
func (c *commitLog) commitControl(ctx context.Context, ops ...index.Control) error {
	return c.commitControlWith(ctx, nil, ops...)
}

// commitControlWith writes a control record with extra operations in the
// same transaction and waits until it is applied.
func (c *commitLog) commitControlWith(ctx context.Context, extra []meta.Op, ops ...index.Control) error {
	key := c.e.writer.nextRecordKey()
	v := index.Record{Kind: index.RecordControl, Controls: ops}.Encode()
	txnOps := append([]meta.Op{meta.Put(key, v), meta.Put(c.e.keys.commitSync(), []byte(key))}, extra...)
	for attempt := 0; ; attempt++ {
		ok, rev, err := c.e.meta.Txn(ctx, []meta.Cmp{{Key: key}}, txnOps)
		if err == nil && ok {
			return c.waitApplied(ctx, rev)
		}
		if err == nil {
			// The key exists: an earlier attempt applied.
			kv, found, gerr := c.e.meta.Get(ctx, key)
			if gerr != nil {
				return fmt.Errorf("%w: control record: %w", lakestream.ErrUnavailable, gerr)
			}
			if found {
				return c.waitApplied(ctx, kv.ModRevision)
			}
			// Folded and deleted already: applied.
			return c.sync(ctx)
		}
		if errors.Is(err, meta.ErrTooManyOps) || errors.Is(err, meta.ErrInvalid) || errors.Is(err, meta.ErrClosed) {
			return fmt.Errorf("%w: control record: %w", lakestream.ErrUnavailable, err)
		}
		if berr := backoff(ctx, attempt+1); berr != nil {
			return fmt.Errorf("%w: control record: %w", lakestream.ErrUnavailable, err)
		}
	}
}
