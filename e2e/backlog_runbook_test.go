package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// TestAdminBacklogRunbook: the backlog commands of an operator's runbook
// (pulsar-admin topics skip, clear-backlog, expire-messages by time and by
// message id, expire-messages-all-subscriptions) through pulsaradmin, each
// checked on the subscription's backlog and on what a consumer receives
// next; on a stored cursor and on a running subscription.
func TestAdminBacklogRunbook(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startCluster(t)
	srv := admServer(t, c)
	a := admClient(t, srv)
	const name = "persistent://public/default/runbook"
	topic := admTopic(t, name)
	if err := a.Topics().Create(topic, 0); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"a", "b", "c"} {
		if err := a.Subscriptions().Create(topic, sub, utils.Earliest); err != nil {
			t.Fatal(err)
		}
	}
	cl := c.client()
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: name, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var ids []pulsar.MessageID
	for i := range 10 {
		id, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	backlog := func(sub string) int64 {
		t.Helper()
		st, err := a.Topics().GetStats(topic)
		if err != nil {
			t.Fatal(err)
		}
		return st.Subscriptions[sub].MsgBacklog
	}

	// skip on a stored cursor, twice: the first 5 entries are acknowledged.
	if err := a.Subscriptions().SkipMessages(topic, "a", 3); err != nil {
		t.Fatal(err)
	}
	if err := a.Subscriptions().SkipMessages(topic, "a", 2); err != nil {
		t.Fatal(err)
	}
	if got := backlog("a"); got != 5 {
		t.Fatalf("backlog of a after skipping 3 and 2: %d, want 5", got)
	}
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: name, SubscriptionName: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	m, err := cons.Receive(ctx)
	if err != nil || string(m.Payload()) != "m5" {
		t.Fatalf("first message after skipping 5: %v, %v; want m5", m, err)
	}
	// clear-backlog on the running subscription (a consumer attached).
	if err := a.Subscriptions().ClearBacklog(topic, "a"); err != nil {
		t.Fatal(err)
	}
	if got := backlog("a"); got != 0 {
		t.Fatalf("backlog of a after clear-backlog: %d, want 0", got)
	}

	// expire-messages by time: nothing is an hour old; then everything
	// older than 0 s, on every subscription.
	if err := a.Subscriptions().ExpireMessages(topic, "b", 3600); err != nil {
		t.Fatal(err)
	}
	if got := backlog("b"); got != 10 {
		t.Fatalf("backlog of b after expiring what is older than an hour: %d, want 10", got)
	}
	// expire-messages by message id: m0..m4 expire (the id's message
	// included).
	body := fmt.Sprintf(`{"ledgerId":%d,"entryId":%d,"partitionIndex":-1,"isExcluded":false}`, ids[4].LedgerID(), ids[4].EntryID())
	if code := admDo(t, "POST", srv.URL+"/admin/v2/persistent/public/default/runbook/subscription/c/expireMessages", "application/json", body, nil); code != http.StatusNoContent {
		t.Fatalf("expire-messages by id: HTTP %d", code)
	}
	if got := backlog("c"); got != 5 {
		t.Fatalf("backlog of c after expiring up to m4: %d, want 5", got)
	}
	if err := a.Subscriptions().ExpireAllMessages(topic, 0); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"a", "b", "c"} {
		if got := backlog(sub); got != 0 {
			t.Fatalf("backlog of %s after expire-messages-all-subscriptions 0: %d", sub, got)
		}
	}

	// Refusals: an unknown subscription, a bad count, a body without an id.
	admWantCode(t, a.Subscriptions().SkipMessages(topic, "nope", 1), http.StatusNotFound)
	admWantCode(t, a.Subscriptions().ClearBacklog(topic, "nope"), http.StatusNotFound)
	if code := admDo(t, "POST", srv.URL+"/admin/v2/persistent/public/default/runbook/subscription/b/skip/-1", "", "", nil); code != http.StatusBadRequest {
		t.Fatalf("skip -1: HTTP %d, want 400", code)
	}
	if code := admDo(t, "POST", srv.URL+"/admin/v2/persistent/public/default/runbook/subscription/b/expireMessages", "application/json", "", nil); code != http.StatusBadRequest {
		t.Fatalf("expire-messages without an id: HTTP %d, want 400", code)
	}
}
