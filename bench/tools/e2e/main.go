// Command lakegate-e2e measures end-to-end latency through a Pulsar server
// with the Go client: one producer sends at a fixed rate and one consumer
// on the same topic receives, both in this process, so a message's latency
// is its receive time minus its send time on one clock (the send time
// travels in the first 8 bytes of the payload). Unlike pulsar-perf's
// consumer it has no JIT to warm up, so its first seconds measure the
// server rather than the client.
//
// Progress (one line a second) goes to stderr; the result is one line on
// stdout that bench/compare.sh parses:
//
//	e2e-result sent=N counted=N publish_ms=p50,p95,p99,p99.9,max e2e_ms=p50,p95,p99,p99.9,max
//
// Messages sent during -warmup are received but not counted (counted is
// how many messages the end-to-end percentiles cover).
//
// With -drain N it only consumes: N messages from subscription -sub (which
// must exist, holding a backlog written before), acknowledging each, and
// prints the catch-up rate:
//
//	drain-result received=N seconds=S msgps=R
//
// -consumers K reads with K consumers, each with its own client (its own
// connection and reading goroutines, as K reader processes would have): on
// one Shared subscription, or with -per-partition one Exclusive consumer on
// each of the topic's first K partitions (a consumer group reading a
// partitioned topic).
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "lakegate-e2e:", err)
		os.Exit(1)
	}
}

type config struct {
	url, topic string
	rate, size int
	duration   time.Duration
	warmup     time.Duration
	maxRecords int
	drain      int
	sub        string
	consumers  int
	perPart    bool
	cpuprofile string
}

func run() error {
	var c config
	flag.StringVar(&c.url, "u", "pulsar://127.0.0.1:6650", "service URL")
	flag.StringVar(&c.topic, "topic", "persistent://public/default/e2e", "topic")
	flag.IntVar(&c.rate, "r", 10000, "messages per second")
	flag.IntVar(&c.size, "s", 1024, "payload bytes (at least 8)")
	flag.DurationVar(&c.duration, "time", 15*time.Second, "how long to send")
	flag.DurationVar(&c.warmup, "warmup", time.Second, "messages sent in this first part are not counted")
	flag.IntVar(&c.maxRecords, "max-records", 10_000_000, "bound on the latencies kept (rate × time must not exceed it)")
	flag.IntVar(&c.drain, "drain", 0, "only consume this many messages from -sub and print the rate")
	flag.StringVar(&c.sub, "sub", "drain", "the subscription -drain reads")
	flag.IntVar(&c.consumers, "consumers", 1, "-drain: consumers on the subscription (more than one: Shared), a client each")
	flag.BoolVar(&c.perPart, "per-partition", false, "-drain: consumer i reads partition i of -topic (Exclusive)")
	flag.StringVar(&c.cpuprofile, "cpuprofile", "", "write the client's CPU profile to this file")
	flag.Parse()
	if c.cpuprofile != "" {
		f, err := os.Create(c.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if c.drain > 0 {
		return runDrain(c)
	}
	switch {
	case c.size < 8:
		return errors.New("-s must be at least 8 (the send time travels in the payload)")
	case c.rate < 1 || c.rate > 1_000_000:
		return errors.New("-r must be in [1, 1000000]")
	case c.duration <= c.warmup:
		return errors.New("-time must exceed -warmup")
	case float64(c.rate)*c.duration.Seconds() > float64(c.maxRecords):
		return fmt.Errorf("-r × -time exceeds -max-records (%d)", c.maxRecords)
	}
	client, err := newClient(c.url)
	if err != nil {
		return err
	}
	defer client.Close()
	consumer, err := client.Subscribe(pulsar.ConsumerOptions{
		Topic: c.topic, SubscriptionName: "e2e", ReceiverQueueSize: 1000,
	})
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	defer consumer.Close()
	// pulsar-perf's producer settings: batches of up to 1 ms, 1000 pending.
	producer, err := client.CreateProducer(pulsar.ProducerOptions{
		Topic: c.topic, BatchingMaxPublishDelay: time.Millisecond, MaxPendingMessages: 1000,
	})
	if err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	defer producer.Close()
	return measure(c, producer, consumer)
}

func newClient(url string) (pulsar.Client, error) {
	return pulsar.NewClient(pulsar.ClientOptions{
		URL:    url,
		Logger: plog.NewLoggerWithSlog(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	})
}

// runDrain consumes c.drain messages from the existing subscription c.sub
// (its backlog) with c.consumers consumers (Shared when more than one, or
// one per partition), each with pulsar-perf's receiver queue (1000), and
// prints the rate from the first message to the last.
func runDrain(c config) error {
	typ := pulsar.Exclusive
	if c.consumers > 1 && !c.perPart {
		typ = pulsar.Shared
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var consumers []pulsar.Consumer
	for i := range max(1, c.consumers) {
		topic := c.topic
		if c.perPart {
			topic = fmt.Sprintf("%s-partition-%d", c.topic, i)
		}
		// A client each: its own connection and reading goroutine, as
		// readers in separate processes would have.
		client, err := newClient(c.url)
		if err != nil {
			return err
		}
		defer client.Close()
		consumer, err := client.Subscribe(pulsar.ConsumerOptions{
			Topic: topic, SubscriptionName: c.sub, Type: typ, ReceiverQueueSize: 1000,
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		})
		if err != nil {
			return fmt.Errorf("subscribe: %w", err)
		}
		defer consumer.Close()
		consumers = append(consumers, consumer)
	}
	var (
		received  atomic.Int64
		firstOnce sync.Once
		first     time.Time
		errs      = make(chan error, len(consumers))
	)
	done := make(chan struct{})
	for _, consumer := range consumers {
		go func() {
			for {
				m, err := consumer.Receive(ctx)
				if err != nil {
					errs <- fmt.Errorf("receive after %d messages: %w", received.Load(), err)
					return
				}
				firstOnce.Do(func() { first = time.Now() })
				consumer.AckID(m.ID())
				if received.Add(1) == int64(c.drain) {
					close(done)
					return
				}
			}
		}()
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-done:
			secs := time.Since(first).Seconds()
			fmt.Printf("drain-result received=%d seconds=%.3f msgps=%.0f\n", c.drain, secs, float64(c.drain)/secs)
			return nil
		case err := <-errs:
			return err
		case <-tick.C:
			fmt.Fprintf(os.Stderr, "lakegate-e2e: drained %d of %d\n", received.Load(), c.drain)
		}
	}
}

// recorder keeps the latencies of counted messages, for exact percentiles.
type recorder struct {
	mu  sync.Mutex
	all []time.Duration
	sec []time.Duration // since the last progress line
}

func (r *recorder) add(d time.Duration, counted bool) {
	r.mu.Lock()
	if counted {
		r.all = append(r.all, d)
	}
	r.sec = append(r.sec, d)
	r.mu.Unlock()
}

func (r *recorder) takeSecond() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sec
	r.sec = nil
	return s
}

func measure(c config, producer pulsar.Producer, consumer pulsar.Consumer) error {
	start := time.Now()
	var e2e, pub recorder
	var sendErr error
	var errOnce sync.Once
	total := int(float64(c.rate) * c.duration.Seconds())
	warmupEnd := start.Add(c.warmup)

	recvDone := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for n := 0; n < total; n++ {
			m, err := consumer.Receive(ctx)
			if err != nil {
				recvDone <- fmt.Errorf("receive after %d messages: %w", n, err)
				return
			}
			now := time.Now()
			p := m.Payload()
			if len(p) < 8 {
				recvDone <- fmt.Errorf("message %v: payload of %d bytes has no send time", m.ID(), len(p))
				return
			}
			sent := time.Unix(0, int64(binary.BigEndian.Uint64(p)))
			e2e.add(now.Sub(sent), !sent.Before(warmupEnd))
			consumer.AckID(m.ID())
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
			fmt.Fprintf(os.Stderr, "lakegate-e2e: %5.1fs received %6d/s e2e p50 %.1f p99 %.1f max %.1f ms, publish p99 %.1f ms\n",
				time.Since(start).Seconds(), len(s), ms(q[0]), ms(q[2]), ms(q[4]), ms(p[2]))
		}
	}()

	// Pace by elapsed time: at every millisecond send what is due.
	sent := 0
	for sent < total {
		due := min(total, int(time.Since(start).Seconds()*float64(c.rate))+1)
		for ; sent < due; sent++ {
			payload := make([]byte, c.size)
			t := time.Now()
			binary.BigEndian.PutUint64(payload, uint64(t.UnixNano()))
			counted := !t.Before(warmupEnd)
			producer.SendAsync(ctx, &pulsar.ProducerMessage{Payload: payload},
				func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					if err != nil {
						errOnce.Do(func() { sendErr = err })
						return
					}
					pub.add(time.Since(t), counted)
				})
		}
		time.Sleep(time.Millisecond)
	}
	if err := producer.FlushWithCtx(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	select {
	case err := <-recvDone:
		if err != nil {
			return err
		}
	case <-time.After(30 * time.Second):
		return fmt.Errorf("not every message arrived within 30 s of the last send")
	}
	if sendErr != nil {
		return fmt.Errorf("send: %w", sendErr)
	}
	pub.mu.Lock()
	pq := quantiles(pub.all)
	pub.mu.Unlock()
	e2e.mu.Lock()
	eq := quantiles(e2e.all)
	n := len(e2e.all)
	e2e.mu.Unlock()
	fmt.Printf("e2e-result sent=%d counted=%d publish_ms=%s e2e_ms=%s\n", total, n, join(pq), join(eq))
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
