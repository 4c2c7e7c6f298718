package actors

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakegate/lakegate/lakestream"
)

// oneStreamCatalog lists one stream of two logs, materialized (the worker's
// scan reads nothing else).
type oneStreamCatalog struct{ lakestream.StreamCatalog }

func (oneStreamCatalog) ListNamespaces(context.Context) ([]string, error) {
	return []string{"public/default"}, nil
}

func (oneStreamCatalog) ListStreamPolicies(context.Context, string) ([]lakestream.StreamMetadata, []lakestream.TableMaterializationPolicy, error) {
	on := true
	md := lakestream.StreamMetadata{ID: lakestream.MustParseStreamID("public/default/idle"), State: lakestream.StreamActive, LogIDs: []lakestream.LogID{1, 2}}
	md.Partitioning.NumPartitions = 2
	return []lakestream.StreamMetadata{md}, []lakestream.TableMaterializationPolicy{{Enabled: &on}}, nil
}

// idleMaterializer says log 1 is idle; it counts the calls per log.
type idleMaterializer struct {
	mu    sync.Mutex
	calls map[lakestream.LogID]int
	asked atomic.Int64
}

func (m *idleMaterializer) Idle(j lakestream.MaterializationJob) bool {
	m.asked.Add(1)
	return j.Log == 1
}

func (m *idleMaterializer) MaterializeLog(_ context.Context, j lakestream.MaterializationJob) (lakestream.MaterializationResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls[j.Log]++
	return lakestream.MaterializationResult{}, nil
}

// A Materializer that says a job is idle (lakestream.IdleMaterializer)
// gets no call for it: the worker counts it skipped and schedules it
// again like a call that found nothing; the other logs are called.
func TestMaterializationWorkerSkipsIdleLogs(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	rt := NewRuntime(quiet)
	t.Cleanup(rt.Shutdown)
	m := &idleMaterializer{calls: map[lakestream.LogID]int{}}
	w := StartMaterializationWorker(rt, MaterializationWorkerOptions{
		Catalog:      oneStreamCatalog{},
		Materializer: m,
		Policy:       MaterializationPolicy{Interval: 10 * time.Millisecond},
		Logger:       quiet,
	})
	t.Cleanup(w.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		st, err := w.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Skipped >= 3 && st.Runs >= 3 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("stats %+v: want log 1 skipped and log 2 called, again and again", st)
		case <-time.After(5 * time.Millisecond):
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.calls[1] != 0 || m.calls[2] < 3 {
		t.Fatalf("calls per log %v: want none for the idle log 1, several for log 2", m.calls)
	}
}
