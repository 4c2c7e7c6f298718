package e2e

// Producer deduplication switched on and off through the admin REST API
// (…/{topic}/deduplicationEnabled), the way Pulsar users do it with
// pulsar-admin or a client admin library. Run:
// go test -p 1 -count=1 -run DedupAdmin ./e2e/

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

func TestDedupAdminPolicy(t *testing.T) {
	c := startCluster(t)
	adm := admClient(t, admServer(t, c))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic = "persistent://public/default/dedup-admin"
	tn := admTopic(t, topic)
	if err := adm.Topics().Create(tn, 0); err != nil {
		t.Fatal(err)
	}
	if on, err := adm.Topics().GetDeduplicationStatus(tn); err != nil || on {
		t.Fatalf("default deduplication status %v, %v; want false", on, err)
	}

	// Load the topic without dedup: a producer sends, a duplicate sequence
	// id is appended.
	cl := c.client()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "pa", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range append(sendSeqs(t, ctx, p, 0, 2), sendSeqs(t, ctx, p, 1, 2)...) {
		if isDupID(id) {
			t.Fatalf("dedup off: message %d answered as a duplicate", i)
		}
	}

	// Enabled with the producer connected: the topic is reloaded under it
	// (the producer reconnects by itself) and deduplicates at once.
	if err := adm.Topics().SetDeduplicationStatus(tn, true); err != nil {
		t.Fatal(err)
	}
	if on, err := adm.Topics().GetDeduplicationStatus(tn); err != nil || !on {
		t.Fatalf("deduplication status %v, %v; want true", on, err)
	}
	for i, id := range append(sendSeqs(t, ctx, p, 10, 12), sendSeqs(t, ctx, p, 10, 12)...) {
		if isDupID(id) != (i >= 2) {
			t.Fatalf("dedup turned on under a live producer: send %d id %v, duplicate want %v", i, id, i >= 2)
		}
	}
	p.Close()

	// Effective for the next producer too.
	p, err = cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "pb", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	ids := append(sendSeqs(t, ctx, p, 0, 3), sendSeqs(t, ctx, p, 1, 4)...)
	for i, want := range []bool{false, false, false, true, true, false} {
		if isDupID(ids[i]) != want {
			t.Fatalf("dedup on: send %d id %v, duplicate want %v", i, ids[i], want)
		}
	}
	p.Close()

	// Removed: back to off.
	if err := adm.Topics().RemoveDeduplicationStatus(tn); err != nil {
		t.Fatal(err)
	}
	if on, err := adm.Topics().GetDeduplicationStatus(tn); err != nil || on {
		t.Fatalf("after remove: deduplication status %v, %v; want false", on, err)
	}
	p, err = cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "pb", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if id := sendSeqs(t, ctx, p, 0, 1)[0]; isDupID(id) {
		t.Fatalf("dedup removed: sequence 0 answered as a duplicate")
	}

	// Bad input and unknown topics get clear errors.
	admWantCode(t, adm.Topics().SetDeduplicationStatus(admTopic(t, "persistent://public/default/nope"), true), http.StatusNotFound)
	srv := admServer(t, c)
	req, _ := http.NewRequest("POST", srv.URL+"/admin/v2/persistent/public/default/dedup-admin/deduplicationEnabled", http.NoBody)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("POST without a body: HTTP %d, want 400", resp.StatusCode)
	}
}

// The namespace policy is the default for topics without a topic policy;
// a topic policy overrides it.
func TestDedupAdminNamespacePolicy(t *testing.T) {
	c := startCluster(t)
	srv := admServer(t, c)
	adm := admClient(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := adm.Namespaces().SetDeduplicationStatus("public/default", true); err != nil {
		t.Fatal(err)
	}
	var on *bool
	if code := admRawJSON(t, srv, "GET", "/admin/v2/namespaces/public/default/deduplication", &on); code != http.StatusOK || on == nil || !*on {
		t.Fatalf("GET namespace deduplication: %d %v", code, on)
	}
	cl := c.client()
	send := func(topic string) []bool {
		t.Helper()
		p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "nsp", DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		var dups []bool
		for _, id := range append(sendSeqs(t, ctx, p, 0, 2), sendSeqs(t, ctx, p, 1, 2)...) {
			dups = append(dups, isDupID(id))
		}
		return dups
	}
	if got := send("persistent://public/default/ns-dedup"); !slices.Equal(got, []bool{false, false, true}) {
		t.Fatalf("namespace policy on: duplicates %v, want [false false true]", got)
	}
	// A topic policy "false" overrides the namespace's "true".
	tn := admTopic(t, "persistent://public/default/ns-dedup-off")
	if err := adm.Topics().Create(tn, 0); err != nil {
		t.Fatal(err)
	}
	if err := adm.Topics().SetDeduplicationStatus(tn, false); err != nil {
		t.Fatal(err)
	}
	if got := send(tn.String()); !slices.Equal(got, []bool{false, false, false}) {
		t.Fatalf("topic policy off under namespace policy on: duplicates %v", got)
	}
	// Removed: a topic loaded afterwards does not deduplicate.
	req, _ := http.NewRequest("DELETE", srv.URL+"/admin/v2/namespaces/public/default/deduplication", http.NoBody)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE namespace deduplication: HTTP %d", resp.StatusCode)
	}
	if got := send("persistent://public/default/ns-dedup-later"); !slices.Equal(got, []bool{false, false, false}) {
		t.Fatalf("namespace policy removed: duplicates %v", got)
	}
	if code := admRawJSON(t, srv, "GET", "/admin/v2/namespaces/nope/nope/deduplication", nil); code != http.StatusNotFound {
		t.Fatalf("unknown namespace: HTTP %d, want 404", code)
	}
}

// admRawJSON makes a request and decodes a JSON body into out (when not nil).
func admRawJSON(t *testing.T, srv *httptest.Server, method, path string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, http.NoBody)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}
