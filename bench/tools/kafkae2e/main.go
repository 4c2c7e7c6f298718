// Command lakegate-kafka-e2e measures end-to-end latency through a Kafka
// listener (Apache Kafka or lakegate's) with franz-go: one producer sends at
// a fixed rate and one consumer reads the topic, both in this process, so a
// record's latency is its receive time minus its send time on one clock
// (the send time travels in the first 8 bytes of the value). It is the
// Kafka counterpart of bench/tools/e2e (lakegate-e2e) and prints the same
// result line, which bench/compare.sh parses (load ke2e10k):
//
//	e2e-result sent=N counted=N publish_ms=p50,p95,p99,p99.9,max e2e_ms=p50,p95,p99,p99.9,max msgps=R
//
// publish_ms is the time from handing a record to the producer to its
// acknowledgement (acks=all); records sent during -warmup are received but
// not counted. msgps is the rate the server took: the records handed to the
// producer after the warm-up over the time from the warm-up's end to the
// last acknowledgement (the -r rate when the server keeps up; the
// producer blocks when 32 MiB are waiting, so a slower server lowers it). Progress (one line a second) goes to stderr, and so does the
// line "lakegate-kafka-e2e: In steady state." when the first counted record
// is sent (bench/compare.sh starts measuring the server's CPU there, as at
// kafka-producer-perf-test's own "In steady state.").
//
// Apache Kafka's own end-to-end tool (org.apache.kafka.tools.EndToEndLatency)
// sends one record at a time and waits for it, so it cannot hold a rate;
// this tool does, with the Java producer's settings of the other Kafka loads
// (kafka-producer-perf-test through bench/kafka/producer-perf.sh): acks=all,
// idempotence on (the client default), linger 5 ms, batches of at most
// 16 384 bytes; and the Java consumer's fetch.min.bytes=1 and
// fetch.max.wait.ms=500. The producer and the consumer have a client (a
// connection) each; the consumer reads every partition from the start
// without a group (the topic is new), so nothing depends on a rebalance.
//
// Before the clock starts the producer sends one record and waits for its
// acknowledgement (the priming record, not counted anywhere): the
// producer id, the partition's leader and its idempotence state are then
// settled. Without it a server that refuses the first idempotent produce
// with a retriable error (NOT_LEADER_OR_FOLLOWER) costs franz-go a
// metadata refresh, which it does at most every 5 s (MetadataMinAge), and
// the first seconds of the run would be a backlog.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "lakegate-kafka-e2e:", err)
		os.Exit(1)
	}
}

type config struct {
	brokers, topic string
	rate, size     int
	duration       time.Duration
	warmup         time.Duration
	linger         time.Duration
	batchBytes     int
	maxRecords     int
}

func run() error {
	var c config
	flag.StringVar(&c.brokers, "b", "127.0.0.1:9092", "bootstrap servers, comma-separated")
	flag.StringVar(&c.topic, "topic", "e2e", "topic (must exist)")
	flag.IntVar(&c.rate, "r", 10000, "records per second")
	flag.IntVar(&c.size, "s", 1024, "value bytes (at least 8)")
	flag.DurationVar(&c.duration, "time", 15*time.Second, "how long to send")
	flag.DurationVar(&c.warmup, "warmup", time.Second, "records sent in this first part are not counted")
	flag.DurationVar(&c.linger, "linger", 5*time.Millisecond, "producer linger (linger.ms)")
	flag.IntVar(&c.batchBytes, "batch-bytes", 16384, "producer batch size cap (batch.size)")
	flag.IntVar(&c.maxRecords, "max-records", 10_000_000, "bound on the latencies kept (rate × time must not exceed it)")
	flag.Parse()
	switch {
	case c.size < 8:
		return errors.New("-s must be at least 8 (the send time travels in the value)")
	case c.rate < 1 || c.rate > 1_000_000:
		return errors.New("-r must be in [1, 1000000]")
	case c.duration <= c.warmup:
		return errors.New("-time must exceed -warmup")
	case float64(c.rate)*c.duration.Seconds() > float64(c.maxRecords):
		return fmt.Errorf("-r × -time exceeds -max-records (%d)", c.maxRecords)
	}
	seeds := strings.Split(c.brokers, ",")
	producer, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.DefaultProduceTopic(c.topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(c.linger),
		kgo.ProducerBatchMaxBytes(int32(c.batchBytes)),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		// The Java producer's buffer.memory (32 MiB) rather than a count.
		kgo.MaxBufferedBytes(32<<20),
		kgo.MaxBufferedRecords(1_000_000),
	)
	if err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	defer producer.Close()
	consumer, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.ConsumeTopics(c.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMinBytes(1),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	defer consumer.Close()
	// Both clients connected and the topic known before the clock starts.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, cl := range []*kgo.Client{producer, consumer} {
		if err := cl.Ping(ctx); err != nil {
			return fmt.Errorf("ping %s: %w", c.brokers, err)
		}
	}
	primed := time.Now()
	if err := producer.ProduceSync(ctx, &kgo.Record{Value: make([]byte, c.size)}).FirstErr(); err != nil {
		return fmt.Errorf("priming record: %w", err)
	}
	fmt.Fprintf(os.Stderr, "lakegate-kafka-e2e: priming record acknowledged in %.1f ms\n", ms(time.Since(primed)))
	return measure(c, producer, consumer)
}

// recorder keeps the latencies of counted records, for exact percentiles.
type recorder struct {
	mu   sync.Mutex
	all  []time.Duration
	sec  []time.Duration // since the last progress line
	last time.Time       // when the last value was added
}

func (r *recorder) add(d time.Duration, counted bool) {
	r.mu.Lock()
	if counted {
		r.all = append(r.all, d)
	}
	r.sec = append(r.sec, d)
	r.last = time.Now()
	r.mu.Unlock()
}

func (r *recorder) takeSecond() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sec
	r.sec = nil
	return s
}

func measure(c config, producer, consumer *kgo.Client) error {
	start := time.Now()
	var e2e, pub recorder
	var sendErr error
	var errOnce sync.Once
	total := int(float64(c.rate) * c.duration.Seconds())
	warmupEnd := start.Add(c.warmup)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var received atomic.Int64
	recvDone := make(chan error, 1)
	go func() {
		for received.Load() < int64(total) {
			fs := consumer.PollFetches(ctx)
			if ctx.Err() != nil {
				recvDone <- ctx.Err()
				return
			}
			var ferr error
			fs.EachError(func(t string, p int32, err error) {
				if ferr == nil {
					ferr = fmt.Errorf("fetch %s[%d] after %d records: %w", t, p, received.Load(), err)
				}
			})
			if ferr != nil {
				recvDone <- ferr
				return
			}
			now := time.Now()
			var bad error
			fs.EachRecord(func(r *kgo.Record) {
				if len(r.Value) < 8 {
					bad = fmt.Errorf("record %s[%d]@%d: value of %d bytes has no send time", r.Topic, r.Partition, r.Offset, len(r.Value))
					return
				}
				ns := int64(binary.BigEndian.Uint64(r.Value))
				if ns == 0 {
					return // the priming record
				}
				sent := time.Unix(0, ns)
				e2e.add(now.Sub(sent), !sent.Before(warmupEnd))
				received.Add(1)
			})
			if bad != nil {
				recvDone <- bad
				return
			}
		}
		recvDone <- nil
	}()

	progress := time.NewTicker(time.Second)
	defer progress.Stop()
	go func() {
		for range progress.C {
			s := e2e.takeSecond()
			p := quantiles(pub.takeSecond())
			if len(s) == 0 {
				continue
			}
			q := quantiles(s)
			fmt.Fprintf(os.Stderr, "lakegate-kafka-e2e: %5.1fs received %6d/s e2e p50 %.1f p99 %.1f max %.1f ms, publish p99 %.1f ms\n",
				time.Since(start).Seconds(), len(s), ms(q[0]), ms(q[2]), ms(q[4]), ms(p[2]))
		}
	}()

	// Pace by elapsed time: at every millisecond send what is due.
	sent := 0
	steady := false
	for sent < total {
		due := min(total, int(time.Since(start).Seconds()*float64(c.rate))+1)
		for ; sent < due; sent++ {
			value := make([]byte, c.size)
			t := time.Now()
			binary.BigEndian.PutUint64(value, uint64(t.UnixNano()))
			counted := !t.Before(warmupEnd)
			if counted && !steady {
				steady = true
				fmt.Fprintln(os.Stderr, "lakegate-kafka-e2e: In steady state.")
			}
			producer.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					errOnce.Do(func() { sendErr = err })
					return
				}
				pub.add(time.Since(t), counted)
			})
		}
		time.Sleep(time.Millisecond)
	}
	fctx, fcancel := context.WithTimeout(ctx, 60*time.Second)
	defer fcancel()
	if err := producer.Flush(fctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	if sendErr != nil {
		return fmt.Errorf("send: %w", sendErr)
	}
	select {
	case err := <-recvDone:
		if err != nil {
			return err
		}
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%d of %d records arrived within 30 s of the last acknowledgement", received.Load(), total)
	}
	pub.mu.Lock()
	rate := float64(len(pub.all)) / pub.last.Sub(warmupEnd).Seconds()
	pq := quantiles(pub.all)
	pub.mu.Unlock()
	e2e.mu.Lock()
	eq := quantiles(e2e.all)
	n := len(e2e.all)
	e2e.mu.Unlock()
	fmt.Printf("e2e-result sent=%d counted=%d publish_ms=%s e2e_ms=%s msgps=%.0f\n", total, n, join(pq), join(eq), rate)
	return nil
}

// quantiles returns p50, p95, p99, p99.9 and max of ds (sorted in place).
func quantiles(ds []time.Duration) [5]time.Duration {
	var q [5]time.Duration
	if len(ds) == 0 {
		return q
	}
	slices.Sort(ds)
	at := func(f float64) time.Duration { return ds[min(len(ds)-1, int(f*float64(len(ds))))] }
	return [5]time.Duration{at(0.5), at(0.95), at(0.99), at(0.999), ds[len(ds)-1]}
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func join(q [5]time.Duration) string {
	return fmt.Sprintf("%.3f,%.3f,%.3f,%.3f,%.3f", ms(q[0]), ms(q[1]), ms(q[2]), ms(q[3]), ms(q[4]))
}
