package e2e

// Hostile clients and topic names (issue 25, item 9): names Pulsar would
// refuse, lakegate's reserved __lakegate tenant, a grant stretched to a
// look-alike partition name, and GET_SCHEMA telling a stranger whether a
// topic exists. Real Go clients and raw protocol connections against real
// nodes.

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol/pb"
)

// badTopicNames are names a client must not be able to use: each is
// refused with InvalidTopicName before anything is created.
var badTopicNames = []string{
	"persistent://public/default/.",
	"persistent://public/default/..",
	"persistent://public/default/a:b",
	"persistent://public/default/a*",
	"persistent://public/default/tab\there",
	"persistent://public/default/nl\nhere",
	"persistent://public/default/del\x7fhere",
	"persistent://public/default/c1\u0085here",
	"persistent://public/default/bad\xffutf8",
	"persistent://pub:lic/default/x",
	"persistent://public/./x",
	"persistent://../default/x",
	"persistent://public/def*ault/x",
	"persistent://public/de fault/x",
	"non-persistent://public/default/..",
	"..",
	"a:b",
}

// rawTopicCommand sends one topic-naming command and returns the
// ServerError of its answer (UnknownError with ok=false when it succeeded).
func rawTopicCommand(r *rawConn, kind string, topic string, id uint64) (pb.ServerError, string, bool) {
	r.t.Helper()
	switch kind {
	case "LOOKUP":
		r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{
			Topic: proto.String(topic), RequestId: proto.Uint64(id)}})
		lr := r.read().GetLookupTopicResponse()
		return lr.GetError(), lr.GetMessage(), lr.GetResponse() == pb.CommandLookupTopicResponse_Failed
	case "PARTITIONED_METADATA":
		r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_PARTITIONED_METADATA.Enum(), PartitionMetadata: &pb.CommandPartitionedTopicMetadata{
			Topic: proto.String(topic), RequestId: proto.Uint64(id)}})
		pm := r.read().GetPartitionMetadataResponse()
		return pm.GetError(), pm.GetMessage(), pm.GetResponse() == pb.CommandPartitionedTopicMetadataResponse_Failed
	case "PRODUCER":
		r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
			Topic: proto.String(topic), ProducerId: proto.Uint64(id), RequestId: proto.Uint64(id)}})
	case "SUBSCRIBE":
		r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{
			Topic: proto.String(topic), Subscription: proto.String("s"), SubType: pb.CommandSubscribe_Exclusive.Enum(),
			ConsumerId: proto.Uint64(id), RequestId: proto.Uint64(id)}})
	case "GET_SCHEMA":
		r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_GET_SCHEMA.Enum(), GetSchema: &pb.CommandGetSchema{
			Topic: proto.String(topic), RequestId: proto.Uint64(id)}})
		gs := r.read().GetGetSchemaResponse()
		return gs.GetErrorCode(), gs.GetErrorMessage(), gs.ErrorCode != nil
	case "GET_OR_CREATE_SCHEMA":
		r.cmd(&pb.BaseCommand{Type: pb.BaseCommand_GET_OR_CREATE_SCHEMA.Enum(), GetOrCreateSchema: &pb.CommandGetOrCreateSchema{
			Topic: proto.String(topic), RequestId: proto.Uint64(id),
			Schema: &pb.Schema{Name: proto.String("s"), Type: pb.Schema_String.Enum(), SchemaData: []byte{}}}})
		gs := r.read().GetGetOrCreateSchemaResponse()
		return gs.GetErrorCode(), gs.GetErrorMessage(), gs.ErrorCode != nil
	default:
		r.t.Fatalf("unknown command %s", kind)
	}
	for {
		c := r.read()
		switch c.GetType() {
		case pb.BaseCommand_ERROR:
			return c.GetError().GetError(), c.GetError().GetMessage(), true
		case pb.BaseCommand_PRODUCER_SUCCESS, pb.BaseCommand_SUCCESS:
			return pb.ServerError_UnknownError, "", false
		}
		// e.g. an ACTIVE_CONSUMER_CHANGE before SUCCESS: keep reading
	}
}

var topicCommands = []string{"LOOKUP", "PARTITIONED_METADATA", "PRODUCER", "SUBSCRIBE", "GET_SCHEMA", "GET_OR_CREATE_SCHEMA"}

// TestTopicNamesValidated: names with ".", "..", ':', '*', control
// characters or bad UTF-8 (and tenants or namespaces outside Pulsar's
// character set) are refused by every command that names a topic with
// InvalidTopicName, nothing is created, the Go client reports the reason,
// and ordinary names (dots, '=', '-' inside) keep working.
func TestTopicNamesValidated(t *testing.T) {
	c := startCluster(t)
	r := dialRaw(t, c)
	r.connect()
	id := uint64(0)
	for _, name := range badTopicNames {
		for _, kind := range topicCommands {
			id++
			code, msg, failed := rawTopicCommand(r, kind, name, id)
			if !failed || code != pb.ServerError_InvalidTopicName || msg == "" {
				t.Errorf("%s %q: failed=%v %s %q, want InvalidTopicName with a reason", kind, name, failed, code, msg)
			}
		}
	}
	ids, err := c.catalog.ListStreams(context.Background(), "public/default")
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 0 {
		t.Fatalf("streams created from bad names: %v", ids)
	}

	cl := c.client()
	_, err = cl.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/a:b"})
	if err == nil || !strings.Contains(err.Error(), "InvalidTopicName") {
		t.Fatalf("Go client on a:b: %v, want InvalidTopicName", err)
	}
	const good = "persistent://public/default/orders.v2=eu-west_1"
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: good})
	if err != nil {
		t.Fatalf("a valid name: %v", err)
	}
	defer p.Close()
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: good, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ctx := ctxFor(t, 30*time.Second)
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("ok")}); err != nil {
		t.Fatal(err)
	}
	if m, err := cons.Receive(ctx); err != nil || string(m.Payload()) != "ok" {
		t.Fatalf("receive on a valid name: %v %v", m, err)
	}
}

// TestReservedTenant: the __lakegate tenant holds the node's own
// bookkeeping (tenant records, compacted logs); no client may look up,
// create, produce to, subscribe to or register a schema on a topic in it.
func TestReservedTenant(t *testing.T) {
	c := startCluster(t)
	// What a node keeps there once tenants were created and a topic
	// compacted: the namespaces exist, a compacted log is a stream.
	ctx := context.Background()
	for _, ns := range []string{"__lakegate/compacted", "__lakegate/tenants"} {
		if _, err := c.catalog.CreateNamespace(ctx, ns, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.catalog.CreateStream(ctx, lakestream.StreamIdentifier{Namespace: "__lakegate/compacted", Name: "1-1"},
		lakestream.StreamConfig{}, lakestream.Partitioning{}, lakestream.SchemaConfig{Type: lakestream.SchemaNone}, nil, nil); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, c)
	r.connect()
	id := uint64(0)
	for _, name := range []string{
		"persistent://__lakegate/compacted/1-1",
		"persistent://__lakegate/tenants/t",
		"persistent://__lakegate/new/x",
		"non-persistent://__lakegate/compacted/x",
	} {
		for _, kind := range topicCommands {
			id++
			code, msg, failed := rawTopicCommand(r, kind, name, id)
			if !failed || code != pb.ServerError_NotAllowedError || !strings.Contains(msg, "reserved") {
				t.Errorf("%s %q: failed=%v %s %q, want NotAllowedError naming the reserved tenant", kind, name, failed, code, msg)
			}
		}
	}
	for ns, want := range map[string]int{"__lakegate/compacted": 1, "__lakegate/tenants": 0, "__lakegate/new": 0} {
		if ids, err := c.catalog.ListStreams(ctx, ns); err == nil && len(ids) != want {
			t.Fatalf("streams in %s: %v, want %d", ns, ids, want)
		}
	}

	_, err := c.client().CreateProducer(pulsar.ProducerOptions{Topic: "persistent://__lakegate/compacted/1-1"})
	if err == nil || !strings.Contains(err.Error(), "NotAllowedError") {
		t.Fatalf("Go client producing to __lakegate: %v, want NotAllowedError", err)
	}
}

// TestGrantsAndSchemaDisclosure: with authorization on, a grant on topic x
// covers the partitions of a partitioned x only — not a non-partitioned
// topic that merely is named x-partition-0 (nor creating one) — and
// GET_SCHEMA answers a role without grants "not authorized" whether the
// topic exists or not.
func TestGrantsAndSchemaDisclosure(t *testing.T) {
	n := startSecureNode(t)
	admin := n.admin(t, n.token(t, "admin", time.Hour))
	const plain = "persistent://public/default/x"
	const parted = "persistent://public/default/y"
	if err := admin.Topics().Create(admTopic(t, plain), 0); err != nil {
		t.Fatal(err)
	}
	if err := admin.Topics().Create(admTopic(t, parted), 2); err != nil {
		t.Fatal(err)
	}
	both := []utils.AuthAction{"produce", "consume"}
	for _, topic := range []string{plain, parted} {
		if err := admin.Topics().GrantPermission(admTopic(t, topic), "app", both); err != nil {
			t.Fatal(err)
		}
	}
	app, err := n.client(t, pulsar.NewAuthenticationToken(n.token(t, "app", time.Hour)))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("LookAlikePartition", func(t *testing.T) {
		// The real partitions of y are covered by the grant on y.
		p, err := app.CreateProducer(pulsar.ProducerOptions{Topic: parted + "-partition-1"})
		if err != nil {
			t.Fatalf("a partition of the granted partitioned topic: %v", err)
		}
		p.Close()
		// x is not partitioned: x-partition-0 is another topic, which the
		// grant on x does not cover — neither creating it nor using it.
		_, err = app.CreateProducer(pulsar.ProducerOptions{Topic: plain + "-partition-0"})
		wantRefused(t, "producing to x-partition-0 with a grant on x", err, "AuthorizationError")
		_, err = app.Subscribe(pulsar.ConsumerOptions{Topic: plain + "-partition-0", SubscriptionName: "s"})
		wantRefused(t, "subscribing to x-partition-0 with a grant on x", err, "AuthorizationError")
		// Nor the partitions y does not have.
		_, err = app.CreateProducer(pulsar.ProducerOptions{Topic: parted + "-partition-7"})
		wantRefused(t, "producing to y-partition-7 (y has 2)", err, "AuthorizationError")
		partitionedTopics, topics, err := admin.Topics().List(*mustNamespace(t, "public/default"))
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(topics, plain+"-partition-0") || slices.Contains(partitionedTopics, plain+"-partition-0") {
			t.Fatalf("x-partition-0 was created: %v", topics)
		}
		// A superuser who creates x-partition-0 and grants it makes it usable.
		if err := admin.Topics().Create(admTopic(t, plain+"-partition-0"), 0); err != nil {
			t.Fatal(err)
		}
		_, err = app.CreateProducer(pulsar.ProducerOptions{Topic: plain + "-partition-0"})
		wantRefused(t, "producing to an existing x-partition-0 without its own grant", err, "AuthorizationError")
		if err := admin.Topics().GrantPermission(admTopic(t, plain+"-partition-0"), "app", both); err != nil {
			t.Fatal(err)
		}
		p, err = app.CreateProducer(pulsar.ProducerOptions{Topic: plain + "-partition-0"})
		if err != nil {
			t.Fatalf("x-partition-0 with its own grant: %v", err)
		}
		p.Close()
	})

	t.Run("GetSchemaAuthorizesFirst", func(t *testing.T) {
		r := rawTLS(t, n)
		if c := r.connectWith("token", []byte(n.token(t, "stranger", time.Hour))); c.GetType() != pb.BaseCommand_CONNECTED {
			t.Fatalf("CONNECT: %v", c)
		}
		for i, topic := range []string{plain, "persistent://public/default/does-not-exist", "persistent://nosuch/ns/t"} {
			code, msg, failed := rawTopicCommand(r, "GET_SCHEMA", topic, uint64(i+1))
			if !failed || code != pb.ServerError_AuthorizationError {
				t.Errorf("GET_SCHEMA %s as a stranger: failed=%v %s %q, want AuthorizationError", topic, failed, code, msg)
			}
		}
	})
}

func mustNamespace(t *testing.T, ns string) *utils.NameSpaceName {
	t.Helper()
	n, err := utils.GetNamespaceName(ns)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
