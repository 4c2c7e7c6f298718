package e2e

// Readers started from a given message id, exclusive and inclusive, over
// unbatched and batched entries. The gateway starts the non-durable
// subscription AT the entry the id names and the client drops what is
// before its start (the start entry itself unless inclusive), as with
// Pulsar's broker. Regression: the gateway used to start after a whole
// entry, so an inclusive reader (Python/C++ client, issue 6) lost its
// first message. Run: go test -p 1 -count=1 -run ReaderFromID ./e2e/

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

func TestReaderFromIDExclusiveAndInclusive(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, batched := range []bool{false, true} {
		topic := fmt.Sprintf("persistent://public/default/reader-from-id-%v", batched)
		p, err := cl.CreateProducer(pulsar.ProducerOptions{
			Topic: topic, DisableBatching: !batched,
			BatchingMaxMessages: 4, BatchingMaxPublishDelay: time.Hour,
		})
		if err != nil {
			t.Fatal(err)
		}
		const n = 12
		ids := make([]pulsar.MessageID, n)
		done := make(chan error, n)
		for i := range n {
			p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprint(i))},
				func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) { ids[i] = id; done <- err })
		}
		if err := p.FlushWithCtx(ctx); err != nil {
			t.Fatal(err)
		}
		for range n {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		p.Close()
		for _, start := range []int{0, 5, 6, n - 1} {
			for _, inclusive := range []bool{false, true} {
				want := start + 1
				if inclusive {
					want = start
				}
				r, err := cl.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: ids[start], StartMessageIDInclusive: inclusive})
				if err != nil {
					t.Fatal(err)
				}
				if want == n {
					if r.HasNext() {
						t.Fatalf("batched=%v start %d exclusive: HasNext true after the last message", batched, start)
					}
					r.Close()
					continue
				}
				m, err := r.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if got := string(m.Payload()); got != fmt.Sprint(want) {
					t.Fatalf("batched=%v start %d inclusive=%v: first message %s, want %d", batched, start, inclusive, got, want)
				}
				r.Close()
			}
		}
	}
}
