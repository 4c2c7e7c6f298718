package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"

	"github.com/lakegate/lakegate/gateway"
	"github.com/lakegate/lakegate/internal/testnode"
)

// Tests of the policies as code (admin/policycode.go, broker/autocreate.go,
// docs/policies.md "Policies as code"): set, read back and removed through
// pulsaradmin (plain HTTP where it has no call), and met by Go clients.

// TestAutoTopicCreationPolicy: a namespace's autoTopicCreation overrides
// the node's: off, a producer on a missing topic gets TopicNotFound and
// nothing is created; partitioned, the first producer creates a topic of
// defaultNumPartitions partitions (answered in PARTITIONED_METADATA) that
// carries messages; removed, the node's default (non-partitioned) applies.
func TestAutoTopicCreationPolicy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startPolicyNode(t, testnode.Config{})
	srv := admServer(t, c)
	a := admClient(t, srv)
	if err := a.Namespaces().CreateNamespace("public/autons"); err != nil {
		t.Fatal(err)
	}
	ns, _ := utils.GetNamespaceName("public/autons")
	if got, err := a.Namespaces().GetTopicAutoCreation(*ns); err != nil || (got != nil && got.Allow) {
		t.Fatalf("no policy yet: %+v, %v", got, err)
	}
	if err := a.Namespaces().SetTopicAutoCreation(*ns, utils.TopicAutoCreationConfig{Allow: false, Type: utils.NonPartitioned}); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Namespaces().GetTopicAutoCreation(*ns); err != nil || got == nil || got.Allow || got.Type != utils.NonPartitioned {
		t.Fatalf("read back %+v, %v", got, err)
	}
	cl := c.client()
	_, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/autons/missing"})
	if err == nil || !strings.Contains(err.Error(), "TopicNotFound") {
		t.Fatalf("producer on a missing topic with auto creation off: %v, want TopicNotFound", err)
	}
	_, err = cl.Subscribe(pulsar.ConsumerOptions{Topic: "persistent://public/autons/missing", SubscriptionName: "s"})
	if err == nil || !strings.Contains(err.Error(), "TopicNotFound") {
		t.Fatalf("consumer on a missing topic with auto creation off: %v, want TopicNotFound", err)
	}
	if parted, plain, err := a.Topics().List(*ns); err != nil || len(parted)+len(plain) != 0 {
		t.Fatalf("topics after refused clients: %v %v, %v", parted, plain, err)
	}

	three := 3
	if err := a.Namespaces().SetTopicAutoCreation(*ns, utils.TopicAutoCreationConfig{Allow: true, Type: utils.Partitioned, Partitions: &three}); err != nil {
		t.Fatal(err)
	}
	_, body := httpDo(t, ctx, "GET", srv.URL+"/admin/v2/namespaces/public/autons", "")
	var pol struct {
		Override *utils.TopicAutoCreationConfig `json:"autoTopicCreationOverride"`
	}
	if err := json.Unmarshal([]byte(body), &pol); err != nil || pol.Override == nil || pol.Override.Type != utils.Partitioned ||
		pol.Override.Partitions == nil || *pol.Override.Partitions != 3 {
		t.Fatalf("namespace policies: %s, %v", body, err)
	}
	const auto = "persistent://public/autons/auto-part"
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: auto, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if parts, err := cl.TopicPartitions(auto); err != nil || len(parts) != 3 {
		t.Fatalf("partitions of the auto-created topic: %v, %v", parts, err)
	}
	if md, err := a.Topics().GetMetadata(admTopic(t, auto)); err != nil || md.Partitions != 3 {
		t.Fatalf("admin partitioned metadata: %+v, %v", md, err)
	}
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: auto, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	produceNumbered(t, ctx, prod, 0, 6, 4)
	seen := map[string]bool{}
	for range 6 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen[strings.TrimSpace(string(m.Payload()))] = true
		cons.Ack(m)
	}
	if len(seen) != 6 {
		t.Fatalf("received %v", seen)
	}

	// A partitioned type without a partition count is refused.
	err = a.Namespaces().SetTopicAutoCreation(*ns, utils.TopicAutoCreationConfig{Allow: true, Type: utils.Partitioned})
	admWantCode(t, err, 412)
	// Removed: the node's default, non-partitioned.
	if err := a.Namespaces().RemoveTopicAutoCreation(*ns); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Namespaces().GetTopicAutoCreation(*ns); err != nil || (got != nil && got.Allow) {
		t.Fatalf("after remove: %+v, %v", got, err)
	}
	p2, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/autons/plain"})
	if err != nil {
		t.Fatal(err)
	}
	p2.Close()
	if md, err := a.Topics().GetMetadata(admTopic(t, "persistent://public/autons/plain")); err != nil || md.Partitions != 0 {
		t.Fatalf("default auto creation: %+v, %v", md, err)
	}
}

// TestAutoTopicCreationNodeDefault: with the node's allowAutoTopicCreation
// off, a producer on a missing topic gets TopicNotFound unless its
// namespace allows it.
func TestAutoTopicCreationNodeDefault(t *testing.T) {
	c := startPolicyNode(t, testnode.Config{Gateway: gateway.Config{DisableTopicAutoCreation: true}})
	srv := admServer(t, c)
	a := admClient(t, srv)
	cl := c.client()
	_, body := httpDo(t, context.Background(), "GET", srv.URL+"/admin/v2/brokers/configuration/runtime", "")
	var rc map[string]string
	if err := json.Unmarshal([]byte(body), &rc); err != nil || rc["allowAutoTopicCreation"] != "false" ||
		rc["allowAutoTopicCreationType"] != "non-partitioned" || rc["defaultRetentionTimeInMinutes"] != "0" {
		t.Fatalf("runtime configuration: %s, %v", body, err)
	}
	_, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/nope"})
	if err == nil || !strings.Contains(err.Error(), "TopicNotFound") {
		t.Fatalf("producer on a missing topic, node default off: %v, want TopicNotFound", err)
	}
	ns, _ := utils.GetNamespaceName("public/default")
	if err := a.Namespaces().SetTopicAutoCreation(*ns, utils.TopicAutoCreationConfig{Allow: true, Type: utils.NonPartitioned}); err != nil {
		t.Fatal(err)
	}
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/nope"})
	if err != nil {
		t.Fatalf("namespace allows auto creation: %v", err)
	}
	p.Close()
}

// TestPolicyPathsAsCode: each policy path answers Pulsar's shapes: what
// lakegate does is accepted, stored and read back (namespace GET
// included); what it would not enforce is refused with 405 and the
// reason, and stays unset; offload is refused as not applicable.
func TestPolicyPathsAsCode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startPolicyNode(t, testnode.Config{})
	srv := admServer(t, c)
	a := admClient(t, srv)
	ns, _ := utils.GetNamespaceName("public/default")
	tn := admTopic(t, "persistent://public/default/codes")
	if err := a.Topics().Create(tn, 0); err != nil {
		t.Fatal(err)
	}
	// Persistence: stored and answered (not applicable: no bookies).
	pp := utils.PersistencePolicies{BookkeeperEnsemble: 3, BookkeeperWriteQuorum: 2, BookkeeperAckQuorum: 2, ManagedLedgerMaxMarkDeleteRate: 1}
	if err := a.Namespaces().SetPersistence(ns.String(), pp); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Namespaces().GetPersistence(ns.String()); err != nil || got == nil || *got != pp {
		t.Fatalf("persistence read back %+v, %v", got, err)
	}
	err := a.Namespaces().SetPersistence(ns.String(), utils.PersistencePolicies{BookkeeperEnsemble: 1, BookkeeperWriteQuorum: 2, BookkeeperAckQuorum: 2})
	admWantCode(t, err, 412)
	// Inactive topic policies: accepted without deletion, refused with.
	itp := utils.InactiveTopicPolicies{InactiveTopicDeleteMode: nil, MaxInactiveDurationSeconds: 60, DeleteWhileInactive: false}
	if err := a.Namespaces().SetInactiveTopicPolicies(*ns, itp); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Namespaces().GetInactiveTopicPolicies(*ns); err != nil || got.MaxInactiveDurationSeconds != 60 || got.DeleteWhileInactive {
		t.Fatalf("inactive topic policies read back %+v, %v", got, err)
	}
	itp.DeleteWhileInactive = true
	admWantCode(t, a.Namespaces().SetInactiveTopicPolicies(*ns, itp), 405)
	// Subscription expiration: 0 accepted, a time refused.
	if err := a.Namespaces().SetSubscriptionExpirationTime(*ns, 0); err != nil {
		t.Fatal(err)
	}
	admWantCode(t, a.Namespaces().SetSubscriptionExpirationTime(*ns, 10), 405)
	if got, err := a.Namespaces().GetSubscriptionExpirationTime(*ns); err != nil || got != 0 {
		t.Fatalf("subscription expiration after the refusal: %d, %v", got, err)
	}
	// Schema validation (honoured: TestSchemaValidationEnforced).
	if err := a.Namespaces().SetSchemaValidationEnforced(*ns, true); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Namespaces().GetSchemaValidationEnforced(*ns); err != nil || !got {
		t.Fatalf("schema validation enforced: %v, %v", got, err)
	}
	if err := a.Namespaces().SetSchemaValidationEnforced(*ns, false); err != nil {
		t.Fatal(err)
	}
	// Offload: refused, with the reason.
	err = a.Namespaces().SetOffloadThreshold(*ns, 1<<20)
	admWantCode(t, err, 405)
	if !strings.Contains(err.Error(), "offload does not apply") {
		t.Fatalf("offload refusal reason: %v", err)
	}
	if got, err := a.Namespaces().GetOffloadThreshold(*ns); err != nil || got != -1 {
		t.Fatalf("offload threshold: %d, %v", got, err)
	}

	// Plain HTTP where pulsaradmin has no call.
	base := srv.URL + "/admin/v2/persistent/public/default/codes/"
	nsBase := srv.URL + "/admin/v2/namespaces/public/default/"
	for _, tc := range []struct {
		method, url, body string
		code              int
		reason            string // in the refusal
	}{
		{"POST", nsBase + "delayedDelivery", `{"active": true, "tickTime": 1000, "maxDeliveryDelayInMillis": 0}`, 204, ""},
		{"POST", base + "delayedDelivery", `{"active": false, "tickTime": 1000}`, 405, "delivers delayed messages at their time"},
		{"POST", base + "delayedDelivery", `{"active": true, "tickTime": 1000, "maxDeliveryDelayInMillis": 5000}`, 405, "maxDeliveryDelayInMillis"},
		{"POST", base + "maxMessageSize", `1024`, 204, ""},
		{"POST", base + "maxMessageSize", `104857600`, 412, "node's maxMessageSize"},
		{"POST", base + "maxMessageSize", `x`, 400, "want an integer"},
		{"POST", base + "schemaValidationEnforced", `maybe`, 400, "want true or false"},
		{"POST", base + "persistence", `{"bookkeeperEnsemble": 2, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 1, "managedLedgerMaxMarkDeleteRate": 0}`, 204, ""},
		{"POST", base + "offloadPolicies", `{"managedLedgerOffloadDriver": "aws-s3"}`, 405, "offload does not apply"},
		{"POST", nsBase + "subscribeRate", `{"subscribeThrottlingRatePerConsumer": 5, "ratePeriodInSecond": 30}`, 405, "subscribes"},
		{"POST", nsBase + "autoTopicCreation", `{"allowAutoTopicCreation": true, "topicType": "sometimes"}`, 412, "topicType"},
	} {
		code, body := httpDo(t, ctx, tc.method, tc.url, tc.body)
		if code != tc.code || !strings.Contains(body, tc.reason) {
			t.Fatalf("%s %s %s: %d %s, want %d with %q", tc.method, tc.url, tc.body, code, body, tc.code, tc.reason)
		}
	}
	for url, want := range map[string]string{
		base + "delayedDelivery":   "null",
		base + "maxMessageSize":    "1024",
		base + "persistence":       `{"bookkeeperEnsemble":2,"bookkeeperWriteQuorum":2,"bookkeeperAckQuorum":1,"managedLedgerMaxMarkDeleteRate":0}`,
		nsBase + "delayedDelivery": `{"tickTime":1000,"active":true,"maxDeliveryDelayInMillis":0}`,
		nsBase + "subscribeRate":   "null",
	} {
		if code, body := httpDo(t, ctx, "GET", url, ""); code != 200 || body != want {
			t.Fatalf("GET %s: %d %s, want %s", url, code, body, want)
		}
	}
	// The namespace's policies carry them under Pulsar's field names.
	_, body := httpDo(t, ctx, "GET", srv.URL+"/admin/v2/namespaces/public/default", "")
	var pol map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &pol); err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]string{
		"persistence":                          `{"bookkeeperEnsemble":3,"bookkeeperWriteQuorum":2,"bookkeeperAckQuorum":2,"managedLedgerMaxMarkDeleteRate":1}`,
		"inactive_topic_policies":              `{"inactiveTopicDeleteMode":"","maxInactiveDurationSeconds":60,"deleteWhileInactive":false}`,
		"subscription_expiration_time_minutes": `0`,
		"delayed_delivery_policies":            `{"tickTime":1000,"active":true,"maxDeliveryDelayInMillis":0}`,
		"schema_validation_enforced":           `false`,
		"offload_threshold":                    `-1`,
	} {
		if string(pol[field]) != want {
			t.Fatalf("namespace policies %s = %s, want %s (all: %s)", field, pol[field], want, body)
		}
	}
	// Removed: unset again.
	if code, _ := httpDo(t, ctx, "DELETE", base+"persistence", ""); code != 204 {
		t.Fatalf("DELETE persistence: %d", code)
	}
	if code, body := httpDo(t, ctx, "GET", base+"persistence", ""); code != 200 || body != "null" {
		t.Fatalf("persistence after DELETE: %d %s", code, body)
	}
	if err := a.Namespaces().RemovePersistence(ns.String()); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Namespaces().GetPersistence(ns.String()); err != nil || (got != nil && *got != utils.PersistencePolicies{}) {
		t.Fatalf("namespace persistence after remove: %+v, %v", got, err)
	}
}

// TestDefaultRetentionTrimsAcknowledged: with no retention policy the
// node's default, Pulsar's 0/0, trims what every durable subscription
// acknowledged — never a message one still needs; a namespace policy of
// -1/-1 keeps everything.
func TestDefaultRetentionTrimsAcknowledged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startPolicyNode(t, testnode.Config{})
	a := admClient(t, admServer(t, c))
	if err := a.Namespaces().CreateNamespace("public/keepall"); err != nil {
		t.Fatal(err)
	}
	if err := a.Namespaces().SetRetention("public/keepall", utils.RetentionPolicies{RetentionTimeInMinutes: -1, RetentionSizeInMB: -1}); err != nil {
		t.Fatal(err)
	}
	cl := c.client()
	for _, topic := range []string{"public/default/defret", "public/keepall/defret"} {
		name := "persistent://" + topic
		cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: name, SubscriptionName: "s", Type: pulsar.Shared, AckWithResponse: true,
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: name, DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		defer prod.Close()
		produceNumbered(t, ctx, prod, 0, 20, 8)
		for i := range 20 {
			m, err := cons.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if i < 12 {
				if err := cons.Ack(m); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	tn := admTopic(t, "persistent://public/default/defret")
	if r, err := a.Topics().GetRetention(tn, true); err != nil || r == nil || r.RetentionTimeInMinutes != 0 || r.RetentionSizeInMB != 0 {
		t.Fatalf("applied retention: %+v, %v", r, err)
	}
	waitFor(t, ctx, "the default retention's trim up to what s acknowledged", func() bool {
		return firstOffset(t, ctx, c, "public/default/defret") == 12
	})
	afterChecks(t, ctx, c, 3)
	if f := firstOffset(t, ctx, c, "public/default/defret"); f != 12 {
		t.Fatalf("trimmed to %d, past the unacknowledged message 12", f)
	}
	if f := firstOffset(t, ctx, c, "public/keepall/defret"); f != 0 {
		t.Fatalf("namespace retention -1/-1: trimmed to %d", f)
	}
}

// TestMaxMessageSizePolicy: a topic's maxMessageSize refuses a larger
// SEND (SendError NotAllowedError: the Go client fails that send) and
// lets smaller ones through; removed, the node's limit applies again.
func TestMaxMessageSizePolicy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startPolicyNode(t, testnode.Config{})
	srv := admServer(t, c)
	const name = "persistent://public/default/small-msgs"
	cl := c.client()
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: name, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	url := srv.URL + "/admin/v2/persistent/public/default/small-msgs/maxMessageSize"
	if code, body := httpDo(t, ctx, "POST", url, "1024"); code != 204 {
		t.Fatalf("set maxMessageSize: %d %s", code, body)
	}
	big, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: name, DisableBatching: true, SendTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	if _, err := big.Send(ctx, &pulsar.ProducerMessage{Payload: make([]byte, 2000)}); err == nil {
		t.Fatal("a 2000-byte message was accepted over a maxMessageSize of 1024")
	}
	small, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: name, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	if _, err := small.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("fits")}); err != nil {
		t.Fatal(err)
	}
	if m, err := cons.Receive(ctx); err != nil || string(m.Payload()) != "fits" {
		t.Fatalf("received %v, %v; want only the message that fits", m, err)
	}
	if code, _ := httpDo(t, ctx, "DELETE", url, ""); code != 204 {
		t.Fatalf("remove maxMessageSize: %d", code)
	}
	if _, err := small.Send(ctx, &pulsar.ProducerMessage{Payload: make([]byte, 2000)}); err != nil {
		t.Fatalf("2000 bytes after the policy's removal: %v", err)
	}
	if m, err := cons.Receive(ctx); err != nil || len(m.Payload()) != 2000 {
		t.Fatalf("received %v, %v; want the 2000-byte message", m, err)
	}
}

// TestSchemaValidationEnforced: with schemaValidationEnforced on (the
// namespace's, then the topic's), a producer without a schema is refused
// with IncompatibleSchema on a topic that has a schema, and accepted on
// one that has none; off again, it is accepted.
func TestSchemaValidationEnforced(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startPolicyNode(t, testnode.Config{})
	srv := admServer(t, c)
	a := admClient(t, srv)
	cl := c.client()
	const typed = "persistent://public/default/typed"
	js := pulsar.NewJSONSchema(`{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}`, nil)
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: typed, Schema: js})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	ns, _ := utils.GetNamespaceName("public/default")
	if err := a.Namespaces().SetSchemaValidationEnforced(*ns, true); err != nil {
		t.Fatal(err)
	}
	_, err = cl.CreateProducer(pulsar.ProducerOptions{Topic: typed})
	if err == nil || !strings.Contains(err.Error(), "IncompatibleSchema") {
		t.Fatalf("schemaless producer on a topic with a schema, validation enforced: %v, want IncompatibleSchema", err)
	}
	p, err = cl.CreateProducer(pulsar.ProducerOptions{Topic: typed, Schema: js})
	if err != nil {
		t.Fatalf("producer with the schema: %v", err)
	}
	p.Close()
	p, err = cl.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/untyped"})
	if err != nil {
		t.Fatalf("schemaless producer on a topic without a schema: %v", err)
	}
	p.Close()
	// The topic's policy wins over the namespace's.
	url := srv.URL + "/admin/v2/persistent/public/default/typed/schemaValidationEnforced"
	if code, body := httpDo(t, ctx, "POST", url, "false"); code != 204 {
		t.Fatalf("topic schemaValidationEnforced: %d %s", code, body)
	}
	if code, body := httpDo(t, ctx, "GET", url, ""); code != 200 || body != "false" {
		t.Fatalf("GET topic schemaValidationEnforced: %d %s", code, body)
	}
	p, err = cl.CreateProducer(pulsar.ProducerOptions{Topic: typed})
	if err != nil {
		t.Fatalf("schemaless producer, topic policy false: %v", err)
	}
	p.Close()
}

// TestRetentionMinAgeKeepsRecent: under a minimum age (policies.
// retentionMinAge, 10 minutes by default in the binary) Pulsar's 0/0 trims
// nothing published within it, so what a subscription just acknowledged
// can be replayed with reset-cursor, as from a Pulsar ledger that has not
// rolled over yet.
func TestRetentionMinAgeKeepsRecent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := testnode.Config{}
	cfg.Gateway.RetentionMinAge = time.Hour
	c := startPolicyNode(t, cfg)
	a := admClient(t, admServer(t, c))
	const name = "persistent://public/default/minage"
	before := time.Now()
	cons, err := c.client().Subscribe(pulsar.ConsumerOptions{Topic: name, SubscriptionName: "s", AckWithResponse: true})
	if err != nil {
		t.Fatal(err)
	}
	prod, err := c.client().CreateProducer(pulsar.ProducerOptions{Topic: name, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produceNumbered(t, ctx, prod, 0, 10, 8)
	for range 10 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	cons.Close()
	afterChecks(t, ctx, c, 3)
	if f := firstOffset(t, ctx, c, "public/default/minage"); f != 0 {
		t.Fatalf("trimmed to %d within the minimum age", f)
	}
	tn := admTopic(t, name)
	if err := a.Subscriptions().ResetCursorToTimestamp(tn, "s", before.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	st, err := a.Topics().GetStats(tn)
	if err != nil {
		t.Fatal(err)
	}
	if b := st.Subscriptions["s"].MsgBacklog; b != 10 {
		t.Fatalf("backlog after reset-cursor: %d, want the 10 acknowledged messages back", b)
	}
}

// TestCreateNamespaceWithPolicies: the Policies body of a namespace
// creation (pulsaradmin's CreateNsWithPolices, the Java client's
// createNamespace(ns, policies)) sets the namespace's retention and message
// TTL, which then read back as if set through their own paths.
func TestCreateNamespaceWithPolicies(t *testing.T) {
	c := startPolicyNode(t, testnode.Config{})
	a := admClient(t, admServer(t, c))
	ttl := 120
	pol := utils.NewDefaultPolicies()
	pol.RetentionPolicies = &utils.RetentionPolicies{RetentionTimeInMinutes: 60, RetentionSizeInMB: 10}
	pol.MessageTTLInSeconds = &ttl
	if err := a.Namespaces().CreateNsWithPolices("public/withpol", *pol); err != nil {
		t.Fatal(err)
	}
	r, err := a.Namespaces().GetRetention("public/withpol")
	if err != nil || r == nil || r.RetentionTimeInMinutes != 60 || r.RetentionSizeInMB != 10 {
		t.Fatalf("retention %+v, %v", r, err)
	}
	if got, err := a.Namespaces().GetNamespaceMessageTTL("public/withpol"); err != nil || got != 120 {
		t.Fatalf("message TTL %d, %v", got, err)
	}
	// Without policies in the body: none set.
	if err := a.Namespaces().CreateNsWithPolices("public/nopol", *utils.NewDefaultPolicies()); err != nil {
		t.Fatal(err)
	}
	if r, err := a.Namespaces().GetRetention("public/nopol"); err != nil || r != nil && (r.RetentionTimeInMinutes != 0 || r.RetentionSizeInMB != 0) {
		t.Fatalf("retention of a namespace created without: %+v, %v", r, err)
	}
}
