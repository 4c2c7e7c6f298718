package e2e

// Helpers of the transaction tests (txn_*_test.go): a client with
// transactions on, reading a topic up to a sentinel, counting the
// messages a consumer received.

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/sirupsen/logrus"
)

// newTxnClient is a client of url with transactions on, closed at t's
// cleanup; operation bounds a lookup, a producer's creation and a
// coordinator request, connect a connection's. It logs with
// LAKEGATE_E2E_DEBUG set.
func newTxnClient(t *testing.T, url string, operation, connect time.Duration) pulsar.Client {
	t.Helper()
	logger := plog.DefaultNopLogger()
	if os.Getenv("LAKEGATE_E2E_DEBUG") != "" {
		logger = plog.NewLoggerWithLogrus(logrus.StandardLogger())
	}
	cl, err := pulsar.NewClient(pulsar.ClientOptions{
		URL: url, OperationTimeout: operation, ConnectionTimeout: connect,
		EnableTransaction: true, Logger: logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// readToSentinel reads r until a message whose payload is sentinel and
// returns the messages before it: a sentinel published after a
// transaction ended shows what the topic holds of it without waiting.
func readToSentinel(t *testing.T, ctx context.Context, r pulsar.Reader, sentinel string) []pulsar.Message {
	t.Helper()
	var got []pulsar.Message
	for {
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("reading to %s, after %v: %v", sentinel, payloads(got), err)
		}
		if string(m.Payload()) == sentinel {
			return got
		}
		got = append(got, m)
	}
}

// payloads are ms's payloads, as strings.
func payloads(ms []pulsar.Message) []string {
	ps := make([]string, len(ms))
	for i, m := range ms {
		ps[i] = string(m.Payload())
	}
	return ps
}

// distinctReads counts what a consumer received, each message (id) once:
// a message received again (redelivered: its ack was lost with a node) is
// one message, a payload stored twice is two. Payloads starting with
// "sentinel-" are counted apart.
type distinctReads struct {
	ids       map[string]bool
	payloads  map[string]int // payload → distinct messages
	sentinels int
}

func newDistinctReads() *distinctReads {
	return &distinctReads{ids: map[string]bool{}, payloads: map[string]int{}}
}

// add counts a received message.
func (d *distinctReads) add(payload, id string) {
	switch {
	case d.ids[id]:
	case strings.HasPrefix(payload, "sentinel-"):
		d.sentinels++
	default:
		d.payloads[payload]++
	}
	d.ids[id] = true
}
