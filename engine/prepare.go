package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/lakegate/lakegate/objstore"
)

// walObjectName names a WAL object: wal/<node>/<ms:013d>-<seq:08x>-<random>
// (docs/index-format.md), ms being when the name was made.
func walObjectName(node string, ms int64, seq uint64) string {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	return fmt.Sprintf("wal/%s/%013d-%08x-%s", node, ms, seq, hex.EncodeToString(rnd[:]))
}

// preparedNames keeps the WAL objects made ahead of their flushes on a
// store that can (objstore.Preparer, file:// only): each name counted in
// its window intent, then created in the store, so that the flush's PUT
// fills an existing file (docs/index-format.md, "Prepared WAL objects";
// docs/storage.md, "Prepared objects"). The batch loop takes a flush's
// name when it cuts it (take) and asks for the next ones (kick); one
// goroutine makes them, and deletes the names that will not be used.
type preparedNames struct {
	w      *walWriter
	store  objstore.Preparer // nil: preparing is off
	maxAge time.Duration     // a name older than this is not used
	kick   chan struct{}
	stop   chan struct{}
	done   sync.WaitGroup
	mu     struct {
		sync.Mutex
		m   map[uint64]preparedName // by the seq of the flush they are for
		cut uint64                  // the last seq cut
	}
}

type preparedName struct {
	key    string
	window int64 // start of the window intent it is counted in
	made   time.Time
}

func (p *preparedNames) init(w *walWriter, store objstore.Preparer) {
	p.w = w
	if w.opts.PrepareAhead > 0 {
		p.store = store
	}
	p.maxAge = min(w.opts.PendingWindow, w.opts.PendingIntentTTL/4)
	p.kick = make(chan struct{}, 1)
	p.stop = make(chan struct{})
	p.mu.m = map[uint64]preparedName{}
	if store != nil {
		p.done.Add(1)
		go p.loop()
	}
}

// take returns the prepared name of flush seq, if there is a fresh one,
// and asks for the next ones. Called in seq order by the batch loop.
func (p *preparedNames) take(seq uint64) (key string, window int64, ok bool) {
	if p.store == nil {
		return "", 0, false
	}
	p.mu.Lock()
	n, ok := p.mu.m[seq]
	if ok && p.w.opts.Now().Sub(n.made) <= p.maxAge {
		delete(p.mu.m, seq)
	} else {
		ok = false // an old one is left to dropOld: no delete on this path
	}
	p.mu.cut = max(p.mu.cut, seq)
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
	if !ok {
		return "", 0, false
	}
	return n.key, n.window, true
}

// loop makes names for the flushes after the last cut, and drops names
// that grew old while the writer was idle.
func (p *preparedNames) loop() {
	defer p.done.Done()
	t := time.NewTicker(max(p.maxAge/2, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-p.kick:
			p.fill()
		case <-t.C:
			p.dropOld()
		}
	}
}

// fill prepares the names of the PrepareAhead flushes after the last cut
// that have none yet, once at least half of them have none (so that one
// directory sync serves several files).
func (p *preparedNames) fill() {
	ahead := p.w.opts.PrepareAhead
	p.mu.Lock()
	cut := p.mu.cut
	var seqs []uint64
	for s := cut + 1; s <= cut+uint64(ahead); s++ {
		if _, ok := p.mu.m[s]; !ok {
			seqs = append(seqs, s)
		}
	}
	p.mu.Unlock()
	if len(seqs) == 0 || len(seqs) < (ahead+1)/2 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.w.opts.CommitTimeout)
	defer cancel()
	made := p.w.opts.Now() // the clock of the window intents and of GC
	ms := made.UnixMilli()
	// Counted in the window before the files exist: GC lists an object
	// only while its intent protects it (docs/gc.md).
	window, err := p.w.windows.protect(ctx, ms, len(seqs))
	if err != nil {
		return // the flushes name their own objects
	}
	names := make([]preparedName, len(seqs))
	keys := make([]string, len(seqs))
	for i, s := range seqs {
		keys[i] = walObjectName(p.w.opts.NodeID, ms, s)
		names[i] = preparedName{key: keys[i], window: window, made: made}
	}
	start := time.Now()
	err = p.store.Prepare(ctx, keys)
	p.w.e.metrics.observeObject("prepare", start, err)
	if err != nil {
		p.w.opts.Logger.Debug("engine: preparing WAL objects failed", "err", err)
		p.w.windows.release(window, len(names))
		return
	}
	var late []preparedName
	p.mu.Lock()
	for i, s := range seqs {
		if s > p.mu.cut {
			p.mu.m[s] = names[i]
		} else {
			late = append(late, names[i]) // its flush was cut meanwhile
		}
	}
	p.mu.Unlock()
	if h := p.w.opts.hooks.prepared; h != nil {
		h(keys) // the names are ready to be taken
	}
	for _, n := range late {
		p.drop(n)
	}
}

// dropOld drops the names older than maxAge and those of seqs cut
// without them.
func (p *preparedNames) dropOld() {
	var old []preparedName
	p.mu.Lock()
	for s, n := range p.mu.m {
		if s <= p.mu.cut || p.w.opts.Now().Sub(n.made) > p.maxAge {
			old = append(old, n)
			delete(p.mu.m, s)
		}
	}
	p.mu.Unlock()
	for _, n := range old {
		p.drop(n)
	}
}

// drop deletes an unused name's file, then releases its window.
func (p *preparedNames) drop(n preparedName) {
	ctx, cancel := context.WithTimeout(context.Background(), p.w.opts.CommitTimeout)
	defer cancel()
	// A file that cannot be deleted stays an orphan for GC (it is not
	// referenced, and its window ends).
	_ = p.w.e.store.Delete(ctx, n.key)
	p.w.windows.release(n.window, 1)
}

// close stops the loop and drops every name left (before the window
// intents are swept).
func (p *preparedNames) close() {
	if p.store == nil {
		return
	}
	close(p.stop)
	p.done.Wait()
	p.mu.Lock()
	p.mu.cut = ^uint64(0)
	p.mu.Unlock()
	p.dropOld()
}
