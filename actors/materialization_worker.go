package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/lakegate/lakegate/lakestream"
)

// MaterializationWorkerOptions configure StartMaterializationWorker.
type MaterializationWorkerOptions struct {
	Catalog lakestream.StreamCatalog
	// Materializer materializes the eligible committed WAL chunks of one
	// log into its stream's tables (tables.Tables.Materializer() behind
	// it, wired by node/assembly: actors sees neither the engine nor the
	// table layer).
	Materializer lakestream.Materializer
	Policy       MaterializationPolicy
	// Membership, when set, makes the worker compact only the tables this
	// node owns for compaction, one owner per table across the cluster
	// (compaction_cluster.go); nil compacts every log (one node).
	Membership lakestream.Membership
	// ScanInterval is how often the catalog is listed for streams and
	// their materialization policy. Default 10 s.
	ScanInterval time.Duration
	// CallTimeout bounds one compaction call. Default 5 min.
	CallTimeout time.Duration
	// OnResult, when set, is called after every compaction call (metrics).
	// It runs on the worker's goroutine and must not block.
	OnResult func(j lakestream.MaterializationJob, r lakestream.MaterializationResult, err error, took time.Duration)
	Logger   *slog.Logger
}

// MaterializationWorker runs compactions by age for every materialized stream
// of a catalog: an actor driving a MaterializationSchedule, with the catalog scan
// and the compaction calls on their own goroutines.
type MaterializationWorker struct {
	ref    Ref
	cancel context.CancelFunc
	wg     sync.WaitGroup
	done   chan struct{}
}

type (
	compactTickMsg struct{ gen uint64 }
	compactScanMsg struct {
		jobs   []lakestream.MaterializationJob
		tables int
		err    error
	}
	compactDoneMsg struct {
		job  lakestream.MaterializationJob
		res  lakestream.MaterializationResult
		err  error
		took time.Duration
	}
	compactKickMsg  struct{}
	compactStatsMsg struct {
		reply chan MaterializationWorkerStats
	}
)

// MaterializationWorkerStats is a snapshot of the worker's state.
type MaterializationWorkerStats struct {
	Logs     int   // logs scheduled
	Inflight int   // calls running
	Runs     int64 // calls finished
	Skipped  int64 // calls not made: the Materializer said they would do nothing (lakestream.IdleMaterializer)
	Failures int64 // calls that failed
	Records  int64 // records compacted
	Scans    int64 // catalog scans finished
	Tables   int   // tables this node compacts (owned, with a Membership)
}

// StartMaterializationWorker starts the worker; it scans the catalog at once.
func StartMaterializationWorker(rt Runtime, o MaterializationWorkerOptions) *MaterializationWorker {
	if o.ScanInterval <= 0 {
		o.ScanInterval = 10 * time.Second
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 5 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &MaterializationWorker{cancel: cancel, done: make(chan struct{})}
	h := &materializationHandler{w: w, o: o, ctx: ctx, sched: NewMaterializationSchedule(o.Policy)}
	w.ref = rt.Spawn(h, Mailbox{SendMsgs: 64})
	h.self = w.ref
	w.ref.Send(compactKickMsg{})
	return w
}

// Kick makes the worker scan the catalog now (instead of at the next scan
// interval) and run whatever is due.
func (w *MaterializationWorker) Kick() { w.ref.Send(compactKickMsg{}) }

// Stats returns the worker's counters.
func (w *MaterializationWorker) Stats(ctx context.Context) (MaterializationWorkerStats, error) {
	reply := make(chan MaterializationWorkerStats, 1)
	w.ref.Send(compactStatsMsg{reply})
	select {
	case s := <-reply:
		return s, nil
	case <-w.done:
		return MaterializationWorkerStats{}, errors.New("actors: compaction worker stopped")
	case <-ctx.Done():
		return MaterializationWorkerStats{}, ctx.Err()
	}
}

// Stop cancels running calls (they leave their log resumable) and waits for
// the worker's goroutines.
func (w *MaterializationWorker) Stop() {
	w.cancel()
	w.ref.Stop()
	<-w.done
	w.wg.Wait()
}

type materializationHandler struct {
	w     *MaterializationWorker
	o     MaterializationWorkerOptions
	ctx   context.Context
	self  Ref
	sched *MaterializationSchedule
	stats MaterializationWorkerStats

	scanning bool
	lastScan time.Time
	timer    *time.Timer
	timerGen uint64
}

func (h *materializationHandler) Receive(msg any) {
	now := time.Now()
	switch m := msg.(type) {
	case compactKickMsg:
		h.startScan()
	case compactScanMsg:
		h.scanning = false
		h.lastScan = now
		if m.err != nil {
			h.o.Logger.Warn("compaction: catalog scan failed", "err", m.err)
			if h.o.Membership != nil {
				// Which tables this node owns is unknown (a lost session,
				// etcd unreachable): compact none until a scan succeeds.
				h.sched.SetJobs(now, nil)
				h.stats.Tables = 0
			}
		} else {
			h.stats.Scans++
			h.stats.Tables = m.tables
			h.sched.SetJobs(now, m.jobs)
		}
	case compactDoneMsg:
		h.stats.Runs++
		h.stats.Records += m.res.Records
		if m.err != nil {
			h.stats.Failures++
		}
		backoff := h.sched.Done(now, m.job.Log, m.res, m.err)
		if m.err != nil && h.ctx.Err() == nil {
			h.o.Logger.Warn("compaction failed", "stream", m.job.Stream.String(), "partition", m.job.Partition,
				"log", m.job.Log, "err", m.err, "retry_in", backoff)
		} else if m.res.Records > 0 {
			h.o.Logger.Debug("compacted", "stream", m.job.Stream.String(), "partition", m.job.Partition,
				"log", m.job.Log, "records", m.res.Records, "took", m.took)
		}
		if h.o.OnResult != nil {
			h.o.OnResult(m.job, m.res, m.err, m.took)
		}
	case compactTickMsg:
		if m.gen != h.timerGen {
			return
		}
	case compactStatsMsg:
		s := h.stats
		s.Logs, s.Inflight = h.sched.Jobs(), h.sched.Inflight()
		m.reply <- s
		return
	default:
		return
	}
	if h.ctx.Err() != nil {
		return
	}
	if !h.scanning && now.Sub(h.lastScan) >= h.o.ScanInterval {
		h.startScan()
	}
	idle, _ := h.o.Materializer.(lakestream.IdleMaterializer)
	for _, j := range h.sched.Start(now) {
		if idle != nil && idle.Idle(j) {
			// Nothing to do (a caught-up log): no goroutine, no call.
			h.sched.Done(now, j.Log, lakestream.MaterializationResult{}, nil)
			h.stats.Skipped++
			continue
		}
		h.startCall(j)
	}
	h.arm(now)
}

func (h *materializationHandler) Stopped() {
	if h.timer != nil {
		h.timer.Stop()
	}
	close(h.w.done)
}

// arm sets the timer for the next due job or scan, whichever is first.
func (h *materializationHandler) arm(now time.Time) {
	next := h.lastScan.Add(h.o.ScanInterval)
	if due, ok := h.sched.NextDue(); ok && due.Before(next) {
		next = due
	}
	// Wakes fall on a grid of a twentieth of the interval, so that the jobs
	// due within one slot start in one wake: a thousand idle logs due every
	// 5 s cost 4 wakes a second, not 200 (each a timer, a message and a
	// goroutine woken).
	if g := h.o.Policy.withDefaults().Interval / 20; g > 0 {
		next = next.Add(g - 1).Truncate(g)
	}
	d := max(next.Sub(now), time.Millisecond)
	h.timerGen++
	gen := h.timerGen
	if h.timer != nil {
		h.timer.Stop()
	}
	h.timer = time.AfterFunc(d, func() { h.self.Send(compactTickMsg{gen}) })
}

func (h *materializationHandler) startScan() {
	if h.scanning || h.ctx.Err() != nil {
		return
	}
	h.scanning = true
	h.w.wg.Add(1)
	go func() {
		defer h.w.wg.Done()
		ctx, cancel := context.WithTimeout(h.ctx, h.o.CallTimeout)
		defer cancel()
		jobs, err := ScanMaterializationJobs(ctx, h.o.Catalog)
		tables := 0
		if err == nil && h.o.Membership != nil {
			jobs, tables, err = clusterJobs(ctx, h.o.Membership, jobs, h.o.Logger)
		}
		h.self.Send(compactScanMsg{jobs, tables, err})
	}()
}

func (h *materializationHandler) startCall(j lakestream.MaterializationJob) {
	h.w.wg.Add(1)
	go func() {
		defer h.w.wg.Done()
		ctx, cancel := context.WithTimeout(h.ctx, h.o.CallTimeout)
		defer cancel()
		start := time.Now()
		r, err := h.o.Materializer.MaterializeLog(ctx, j)
		h.self.Send(compactDoneMsg{job: j, res: r, err: err, took: time.Since(start)})
	}()
}

// ScanMaterializationJobs lists every log of every active or sealed stream whose
// resolved materialization policy is enabled, with the formats it names.
func ScanMaterializationJobs(ctx context.Context, cat lakestream.StreamCatalog) ([]lakestream.MaterializationJob, error) {
	nss, err := cat.ListNamespaces(ctx)
	if err != nil {
		return nil, err
	}
	var jobs []lakestream.MaterializationJob
	formats := map[string][2]bool{} // TableFormats by catalog names, once per scan
	for _, ns := range nss {
		mds, pols, err := streamPolicies(ctx, cat, ns)
		if errors.Is(err, lakestream.ErrNoSuchNamespace) {
			continue // dropped meanwhile
		}
		if err != nil {
			return nil, err
		}
		for i, md := range mds {
			p := pols[i]
			if md.State != lakestream.StreamActive && md.State != lakestream.StreamSealed {
				continue
			}
			if p.Enabled == nil || !*p.Enabled {
				continue
			}
			key := strings.Join(p.Catalogs, "\x00")
			f, ok := formats[key]
			if !ok {
				useDelta, useIceberg, err := TableFormats(ctx, cat, p.Catalogs)
				if err != nil {
					return nil, fmt.Errorf("stream %s: %w", md.ID, err)
				}
				f = [2]bool{useDelta, useIceberg}
				formats[key] = f
			}
			if !f[0] && !f[1] {
				continue
			}
			var retMs, retBytes int64
			if p.RetentionMs != nil {
				retMs = *p.RetentionMs
			}
			if p.RetentionBytes != nil {
				retBytes = *p.RetentionBytes
			}
			for i, log := range md.LogIDs {
				part := -1
				if md.Partitioning.NumPartitions > 0 {
					part = i
				}
				jobs = append(jobs, lakestream.MaterializationJob{Stream: md.ID, Partition: part, Log: log, Logs: md.LogIDs, Delta: f[0], Iceberg: f[1],
					Schema: md.Schema, Properties: md.Properties, RetentionMs: retMs, RetentionBytes: retBytes})
			}
		}
	}
	return jobs, nil
}

// streamPolicyLister is a catalog that lists a namespace's streams with
// their resolved policies in one read (engine/catalog.Catalog).
type streamPolicyLister interface {
	ListStreamPolicies(ctx context.Context, namespace string) ([]lakestream.StreamMetadata, []lakestream.TableMaterializationPolicy, error)
}

// streamPolicies returns the streams of namespace ns and their resolved
// materialization policies: in one read when the catalog can, else stream
// by stream (streams dropped meanwhile left out).
func streamPolicies(ctx context.Context, cat lakestream.StreamCatalog, ns string) ([]lakestream.StreamMetadata, []lakestream.TableMaterializationPolicy, error) {
	if l, ok := cat.(streamPolicyLister); ok {
		return l.ListStreamPolicies(ctx, ns)
	}
	ids, err := cat.ListStreams(ctx, ns)
	if err != nil {
		return nil, nil, err
	}
	var mds []lakestream.StreamMetadata
	var pols []lakestream.TableMaterializationPolicy
	for _, id := range ids {
		md, err := cat.LoadStream(ctx, id)
		if errors.Is(err, lakestream.ErrNoSuchStream) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		p, err := cat.ResolveMaterialization(ctx, id)
		if errors.Is(err, lakestream.ErrNoSuchStream) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		mds, pols = append(mds, md), append(pols, p)
	}
	return mds, pols, nil
}

// TableFormats resolves a policy's catalog names to the formats to commit:
// "delta" and "iceberg" name the built-in tables (case-insensitive), any
// other name a registered table catalog of that type; none names both.
func TableFormats(ctx context.Context, cat lakestream.StreamCatalog, names []string) (useDelta, useIceberg bool, err error) {
	if len(names) == 0 {
		return true, true, nil
	}
	for _, n := range names {
		switch strings.ToUpper(n) {
		case string(lakestream.TableDelta):
			useDelta = true
			continue
		case string(lakestream.TableIceberg):
			useIceberg = true
			continue
		}
		tc, err := cat.GetTableCatalog(ctx, n)
		if err != nil {
			return false, false, fmt.Errorf("table catalog %q: %w", n, err)
		}
		switch tc.Type {
		case lakestream.TableDelta:
			useDelta = true
		case lakestream.TableIceberg:
			useIceberg = true
		default:
			return false, false, fmt.Errorf("%w: table catalog %q has type %q", lakestream.ErrInvalidArgument, n, tc.Type)
		}
	}
	return useDelta, useIceberg, nil
}
