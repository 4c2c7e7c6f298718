package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// TestCompressionCodecs: every compression codec of the client, with
// batching on and off, carries payloads, keys, properties and event times
// through the gateway unchanged (the gateway stores entries byte-exact; the
// consumer decompresses).
func TestCompressionCodecs(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	codecs := []struct {
		name string
		typ  pulsar.CompressionType
	}{
		{"none", pulsar.NoCompression},
		{"lz4", pulsar.LZ4},
		{"zlib", pulsar.ZLib},
		{"zstd", pulsar.ZSTD},
		{"snappy", pulsar.SNAPPY},
	}
	const n = 200
	for _, codec := range codecs {
		for _, batching := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/batch=%v", codec.name, batching), func(t *testing.T) {
				topic := fmt.Sprintf("persistent://public/default/codec-%s-%v", codec.name, batching)
				s := produceCompressed(t, cl, topic, codec.typ, batching, n)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				cons := subscribe(t, cl, topic, "c", pulsar.Exclusive)
				defer cons.Close()
				for want := range n {
					m, err := cons.Receive(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if i := s.check(t, m); i != want {
						t.Fatalf("got message %d, want %d", i, want)
					}
					cons.Ack(m)
				}
				expectOnlySentinel(t, ctx, cl, topic, cons)
			})
		}
	}
}

// produceCompressed is produce (same messages, so sent.check applies) with
// a compression codec; with batching a batch of up to 50 messages is
// compressed as one payload.
func produceCompressed(t *testing.T, cl pulsar.Client, topic string, typ pulsar.CompressionType, batching bool, n int) sent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{
		Topic:                   topic,
		CompressionType:         typ,
		DisableBatching:         !batching,
		BatchingMaxPublishDelay: 5 * time.Millisecond,
		BatchingMaxMessages:     50,
	})
	if err != nil {
		t.Fatalf("create producer: %v", err)
	}
	defer p.Close()
	s := sent{run: t.Name(), base: time.UnixMilli(time.Now().UnixMilli()), ids: make([]pulsar.MessageID, n)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := range n {
		wg.Add(1)
		p.SendAsync(ctx, &pulsar.ProducerMessage{
			Payload:    []byte("payload-" + strconv.Itoa(i)),
			Key:        fmt.Sprintf("key-%d", i%17),
			Properties: map[string]string{"i": strconv.Itoa(i), "run": s.run},
			EventTime:  s.base.Add(time.Duration(i) * time.Millisecond),
		}, func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			s.ids[i] = id
		})
	}
	if err := p.FlushWithCtx(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("send: %v", firstErr)
	}
	return s
}
