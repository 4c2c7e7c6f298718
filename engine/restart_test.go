package engine_test

// Restart tests: a node (node.Start: embedded etcd + file objects in
// one data dir) is stopped and started again on the same dir; everything
// acknowledged must be there, identical.
//
//	go test -p 1 -run 'TestRestart|TestKill9' -v ./engine/
//
// This file: a clean Close. cmd_restart_test.go: SIGKILL of a child process.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/node"
)

// restartTimeout bounds a restart test (a failure deadline, not a wait).
const restartTimeout = 120 * time.Second

func restartCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), restartTimeout)
	t.Cleanup(cancel)
	return ctx
}

// startNode starts a node on dir; the returned stop closes it once (also
// at the end of the test if the test did not).
func startNode(t *testing.T, dir string, opts engine.Options) (*node.Node, func()) {
	t.Helper()
	n, err := node.Start(restartCtx(t), node.Config{DataDir: dir, Engine: opts})
	if err != nil {
		t.Fatalf("StartNode(%s): %v", dir, err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			if err := n.Close(); err != nil {
				t.Errorf("closing node: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return n, stop
}

// logState is everything observable about a log.
type logState struct {
	Err                 string // the error of Log/FirstOffset, if any
	First, Next, Last   int64
	Entries             []lakestream.Entry
	Index               []lakestream.EntryHeader
	CursorNames         []string
	Cursors             map[string]cursorState
	FindByTime          []int64 // FindOffsetByTime at a few times
	MessageCountAll     int64
	ReadInsideFirstEntr []int64 // offsets returned by a read starting inside the first entry
}

type cursorState struct {
	MarkDelete   int64
	Ranges       [][2]int64
	Count        int64
	FirstUnacked int64
	Props        map[string]int64
	Backlog      lakestream.Backlog
}

func stateOfCursor(t *testing.T, c lakestream.LogCursor) cursorState {
	t.Helper()
	bl, err := c.Backlog(restartCtx(t))
	if err != nil {
		t.Fatalf("cursor %s backlog: %v", c.Name(), err)
	}
	s := cursorState{
		MarkDelete: c.MarkDeleteOffset(), Ranges: c.AckedRanges(), Count: c.IndividualDeleteCount(),
		FirstUnacked: c.FirstNonDeletedOffset(), Props: c.Properties(), Backlog: bl,
	}
	if len(s.Ranges) == 0 { // nil and empty mean the same
		s.Ranges = nil
	}
	if len(s.Props) == 0 {
		s.Props = nil
	}
	return s
}

// captureLog reads a log's state. Cursor states come from open (given)
// handles when there are any — the in-memory truth — and are loaded
// otherwise.
func captureLog(t *testing.T, e *engine.Engine, id lakestream.LogID, open map[string]lakestream.LogCursor) logState {
	t.Helper()
	ctx := restartCtx(t)
	l, err := e.Log(ctx, id)
	if errors.Is(err, lakestream.ErrNoSuchLog) {
		return logState{Err: lakestream.ErrNoSuchLog.Error()}
	}
	if err != nil {
		t.Fatalf("Log(%d): %v", id, err)
	}
	var s logState
	var err1, err2, err3 error
	s.First, err1 = l.FirstOffset(ctx)
	s.Next, err2 = l.NextOffset(ctx)
	s.Last, err3 = l.LastOffset(ctx)
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatalf("log %d heads: %v", id, err)
	}
	if s.Entries, err = l.ReadEntries(ctx, s.First, math.MaxInt32, math.MaxInt64); err != nil {
		t.Fatalf("log %d read: %v", id, err)
	}
	if s.Index, err = l.IndexRange(ctx, 0, s.Next); err != nil {
		t.Fatalf("log %d index: %v", id, err)
	}
	if s.MessageCountAll, err = l.MessageCount(ctx, 0, math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	for _, ms := range []int64{0, 1500, 2500, 1 << 50} {
		o, err := l.FindOffsetByTime(ctx, time.UnixMilli(ms))
		if err != nil {
			t.Fatal(err)
		}
		s.FindByTime = append(s.FindByTime, o)
	}
	if len(s.Entries) > 0 {
		es, err := l.ReadEntries(ctx, s.Entries[0].End()-1, 3, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			s.ReadInsideFirstEntr = append(s.ReadInsideFirstEntr, e.Offset)
		}
	}
	if s.CursorNames, err = l.CursorNames(ctx); err != nil {
		t.Fatal(err)
	}
	s.Cursors = map[string]cursorState{}
	for _, name := range s.CursorNames {
		c, ok := open[name]
		if !ok {
			lc, err := l.LoadCursor(ctx, name)
			if err != nil {
				t.Fatalf("log %d cursor %q: %v", id, name, err)
			}
			defer lc.Close(ctx)
			c = lc
		}
		s.Cursors[name] = stateOfCursor(t, c)
	}
	return s
}

func TestRestartKeepsEverything(t *testing.T) {
	ctx := restartCtx(t)
	dir := t.TempDir()
	n, stop := startNode(t, dir, engine.Options{})
	e := n.Engine
	logs := []lakestream.LogID{1, 2, 3, 4, 5}
	h := map[lakestream.LogID]lakestream.Log{}
	for _, id := range logs {
		l, err := e.Log(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		h[id] = l
	}
	// Sequential appends to every log, with and without publish times, an
	// empty payload among them.
	for i := range 12 {
		for _, id := range logs {
			var opts []lakestream.AppendOption
			if i%3 != 2 {
				opts = append(opts, lakestream.WithPublishTime(1000+int64(i)*100))
			}
			p := fmt.Appendf(nil, "log %d entry %d %s", id, i, make([]byte, i*int(id)))
			if i == 4 && id == 1 {
				p = nil
			}
			if _, err := h[id].Append(ctx, 1+(i+int(id))%4, p, opts...); err != nil {
				t.Fatalf("log %d append %d: %v", id, i, err)
			}
		}
	}
	// Concurrent appends: several entries per WAL object, several logs
	// per object.
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for g := range 8 {
		wg.Go(func() {
			for i := range 5 {
				id := logs[(g+i)%3]
				if _, err := h[id].Append(ctx, 2, fmt.Appendf(nil, "burst %d.%d", g, i)); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// Cursors: persisted by MarkDelete, by PersistState, and by Close of
	// the node (acks still only in memory when it stops).
	open := map[lakestream.LogID]map[string]lakestream.LogCursor{}
	cur := func(id lakestream.LogID, name string, initial int64) lakestream.LogCursor {
		c, err := h[id].OpenCursor(ctx, name, initial)
		if err != nil {
			t.Fatal(err)
		}
		if open[id] == nil {
			open[id] = map[string]lakestream.LogCursor{}
		}
		open[id][name] = c
		return c
	}
	c := cur(1, "md-only", -1)
	if err := c.MarkDelete(ctx, 9, map[string]int64{"ledger": 3, "entry": -7}); err != nil {
		t.Fatal(err)
	}
	c = cur(1, "acks-persisted", 2)
	for _, r := range [][2]int64{{5, 2}, {10, 1}, {12, 3}, {20, 1}} {
		if err := c.IndividualDelete(r[0], r[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.PersistState(ctx); err != nil {
		t.Fatal(err)
	}
	c = cur(1, "acks-on-close", -1)
	if err := c.MarkDelete(ctx, 3, map[string]int64{"k": 1}); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int64{{4, 1}, {7, 2}, {15, 1}} { // 4 advances mark-delete to 4
		if err := c.IndividualDelete(r[0], r[1]); err != nil {
			t.Fatal(err)
		}
	}
	c = cur(2, "sub", -1)
	if err := c.IndividualDelete(1, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.MarkDelete(ctx, 6, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.IndividualDelete(9, 4); err != nil {
		t.Fatal(err)
	}
	cur(3, "untouched", -1)
	// Trims, a fence, a deletion.
	if _, err := h[3].SoftTrim(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if err := e.HardTrim(ctx, 2, 10); err != nil {
		t.Fatal(err)
	}
	if err := h[4].Fence(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteLog(ctx, 5); err != nil {
		t.Fatal(err)
	}

	before := map[lakestream.LogID]logState{}
	for _, id := range logs {
		before[id] = captureLog(t, e, id, open[id])
	}
	if before[1].Cursors["acks-on-close"].Count == 0 || before[5].Err == "" {
		t.Fatalf("test setup: %+v %+v", before[1].Cursors, before[5])
	}
	for _, id := range logs {
		b := before[id]
		t.Logf("log %d before restart: err %q first %d next %d, %d entries, cursors %+v", id, b.Err, b.First, b.Next, len(b.Entries), b.Cursors)
	}
	stop()

	n2, _ := startNode(t, dir, engine.Options{})
	for _, id := range logs {
		after := captureLog(t, n2.Engine, id, nil)
		compareLogState(t, id, after, before[id])
	}
	// The node goes on: appends continue at the head; the fenced and the
	// deleted log stay so.
	for _, id := range logs[:3] {
		hd, err := n2.Engine.Append(ctx, id, 1, []byte("after restart"))
		if err != nil || hd.Offset != before[id].Next {
			t.Fatalf("log %d: append after restart at %d (%v), want %d", id, hd.Offset, err, before[id].Next)
		}
		if hd.CumulativeSize != before[id].Index[len(before[id].Index)-1].CumulativeSize+13 {
			t.Fatalf("log %d: cumulative size after restart %d, want %d", id, hd.CumulativeSize, before[id].Index[len(before[id].Index)-1].CumulativeSize+13)
		}
	}
	if _, err := n2.Engine.Append(ctx, 4, 1, []byte("x")); !errors.Is(err, lakestream.ErrFenced) {
		t.Fatalf("append to the fenced log after restart: %v", err)
	}
	if _, err := n2.Engine.Append(ctx, 5, 1, []byte("x")); !errors.Is(err, lakestream.ErrNoSuchLog) {
		t.Fatalf("append to the deleted log after restart: %v", err)
	}
}

func compareLogState(t *testing.T, id lakestream.LogID, got, want logState) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	if got.Err != want.Err || got.First != want.First || got.Next != want.Next || got.Last != want.Last {
		t.Fatalf("log %d after restart: err %q first/next/last %d/%d/%d, want %q %d/%d/%d", id, got.Err, got.First, got.Next, got.Last, want.Err, want.First, want.Next, want.Last)
	}
	if len(got.Entries) != len(want.Entries) {
		t.Fatalf("log %d after restart: %d entries, want %d", id, len(got.Entries), len(want.Entries))
	}
	for i := range got.Entries {
		if !reflect.DeepEqual(got.Entries[i], want.Entries[i]) {
			t.Fatalf("log %d after restart: entry %d = %+v %q, want %+v %q", id, i, got.Entries[i].EntryHeader, got.Entries[i].Payload, want.Entries[i].EntryHeader, want.Entries[i].Payload)
		}
	}
	names := make([]string, 0, len(want.Cursors))
	for n := range want.Cursors {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !reflect.DeepEqual(got.Cursors[n], want.Cursors[n]) {
			t.Fatalf("log %d cursor %q after restart: %+v, want %+v", id, n, got.Cursors[n], want.Cursors[n])
		}
	}
	t.Fatalf("log %d after restart:\n got %+v\nwant %+v", id, got, want)
}
