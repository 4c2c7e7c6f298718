package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// EtcdConfig is one `lakegate bench etcd` invocation: how many commit
// records per second one etcd cluster carries (docs/benchmarks.md,
// "Capacity model"). Every writer is one node's commit loop: one
// transaction at a time, shaped as the WAL writer's (a compare that the
// record key is new; puts of the record and of the writer's sync key; the
// delete of a record written earlier, as folding does), and every watcher
// is one node's watch of the commit records. One run per record size.
type EtcdConfig struct {
	Endpoints   []string
	RecordBytes []int // commit record sizes, one run each
	Writers     int   // concurrent commit loops (nodes)
	Watchers    int   // watches of the record prefix (nodes)
	Duration    time.Duration
}

// etcdResult is one run's measurement.
type etcdResult struct {
	recordBytes int
	txns        int64
	seconds     float64
	lat         latencyHist
	delivered   int64 // records received by the watchers, all together
}

// RunEtcd runs cfg against the cluster and prints a Markdown table to out
// (progress to stderr).
func RunEtcd(ctx context.Context, cfg EtcdConfig, out io.Writer) error {
	if len(cfg.Endpoints) == 0 || len(cfg.RecordBytes) == 0 || cfg.Writers < 1 || cfg.Watchers < 0 || cfg.Duration <= 0 {
		return errors.New("bench etcd: needs endpoints, record sizes, writers ≥ 1, watchers ≥ 0 and a duration")
	}
	var rs []*etcdResult
	for i, size := range cfg.RecordBytes {
		r, err := runEtcdOnce(ctx, cfg, i, size)
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	fmt.Fprintf(out, "%d writers (one transaction at a time each), %d watchers, %s per run\n\n", cfg.Writers, cfg.Watchers, cfg.Duration)
	fmt.Fprintln(out, "| record bytes | txns/s | MB/s into etcd | txn p50 ms | p99 ms | records/s delivered to watchers |")
	fmt.Fprintln(out, "|---:|---:|---:|---:|---:|---:|")
	for _, r := range rs {
		tps := float64(r.txns) / r.seconds
		fmt.Fprintf(out, "| %d | %.0f | %.1f | %.2f | %.2f | %.0f |\n", r.recordBytes, tps, tps*float64(r.recordBytes)/1e6,
			ms(r.lat.Quantile(0.5)), ms(r.lat.Quantile(0.99)), float64(r.delivered)/r.seconds)
	}
	return nil
}

func runEtcdOnce(ctx context.Context, cfg EtcdConfig, run, size int) (*etcdResult, error) {
	prefix := fmt.Sprintf("/lakegate-bench-etcd/%d-%d/", time.Now().UnixNano(), run)
	dial := func() (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, DialTimeout: 5 * time.Second})
	}
	admin, err := dial()
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	defer func() {
		// Leave nothing behind: the keys, then the history.
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if resp, err := admin.Delete(dctx, prefix, clientv3.WithPrefix()); err == nil {
			_, _ = admin.Compact(dctx, resp.Header.Revision)
		}
	}()

	// The watchers: each its own client (connection), as nodes are.
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	var delivered atomic.Int64
	var measuring atomic.Bool
	var wwg sync.WaitGroup
	for range cfg.Watchers {
		cli, err := dial()
		if err != nil {
			return nil, err
		}
		defer cli.Close()
		wch := cli.Watch(wctx, prefix+"records/", clientv3.WithPrefix())
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			for resp := range wch {
				if !measuring.Load() {
					continue
				}
				for _, ev := range resp.Events {
					if ev.Type == clientv3.EventTypePut { // a record (the deletes stand for folding)
						delivered.Add(1)
					}
				}
			}
		}()
	}

	value := []byte(strings.Repeat("r", size))
	warmup := time.Now().Add(time.Second)
	stop := warmup.Add(cfg.Duration)
	hists := make([]latencyHist, cfg.Writers)
	counts := make([]int64, cfg.Writers)
	errs := make([]error, cfg.Writers)
	var wg sync.WaitGroup
	for w := range cfg.Writers {
		cli, err := dial()
		if err != nil {
			return nil, err
		}
		defer cli.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			const foldLag = 64 // a record is deleted this many records later
			syncKey := fmt.Sprintf("%ssync/%d", prefix, w)
			for seq := 0; ; seq++ {
				now := time.Now()
				if now.After(stop) || ctx.Err() != nil {
					return
				}
				key := fmt.Sprintf("%srecords/%d/%012d", prefix, w, seq)
				ops := []clientv3.Op{clientv3.OpPut(key, string(value)), clientv3.OpPut(syncKey, key)}
				if seq >= foldLag {
					ops = append(ops, clientv3.OpDelete(fmt.Sprintf("%srecords/%d/%012d", prefix, w, seq-foldLag)))
				}
				_, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).Then(ops...).Commit()
				if err != nil {
					errs[w] = err
					return
				}
				if now.After(warmup) {
					hists[w].Record(time.Since(now))
					counts[w]++
				}
			}
		}()
	}
	// Progress, one line a second, until the writers stop.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	started := false
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		case <-tick.C:
			if !started && time.Now().After(warmup) {
				measuring.Store(true)
				started = true
			}
			var n int64
			for i := range counts {
				n += atomic.LoadInt64(&counts[i])
			}
			fmt.Fprintf(os.Stderr, "bench etcd: record %d B: %d transactions measured\n", size, n)
		}
	}
	measuring.Store(false)
	stopWatch()
	wwg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("bench etcd: %w", err)
		}
	}
	r := &etcdResult{recordBytes: size, seconds: cfg.Duration.Seconds(), delivered: delivered.Load()}
	for i := range hists {
		r.txns += counts[i]
		r.lat.Merge(&hists[i])
	}
	return r, nil
}
