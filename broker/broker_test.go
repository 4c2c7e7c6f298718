package broker_test

// The broker's API called without a socket, over a real catalog (an
// embedded lakegate node in a temporary directory).

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/internal/testmember"
	"github.com/lakegate/lakegate/lakestream"
	_ "github.com/lakegate/lakegate/node" // lakegate:// catalogs
	"github.com/lakegate/lakegate/protocol/pb"
)

func newBroker(t *testing.T, cfg broker.Config) (*broker.Broker, lakestream.StreamCatalog) {
	t.Helper()
	ctx := context.Background()
	cat, err := lakestream.Open(ctx, "lakegate://"+filepath.ToSlash(t.TempDir()), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	if _, err := cat.CreateNamespace(ctx, "public/default", nil); err != nil {
		t.Fatal(err)
	}
	cfg.Catalog = cat
	// A node on its own is the one member of its cluster.
	cfg.Membership = testmember.New(lakestream.Member{ID: "test"})
	b, err := broker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b, cat
}

func TestBrokerTopicsSchemasPolicies(t *testing.T) {
	ctx := context.Background()
	b, cat := newBroker(t, broker.Config{TopicLimits: broker.TopicLimits{MaxProducers: 3}})

	// Resolve auto-creates a non-partitioned topic; a "-partition-N" name
	// without a partitioned stream is one too.
	ref, err := b.Resolve(ctx, "t1", true)
	if err != nil {
		t.Fatal(err)
	}
	if ref.Unit() != "persistent://public/default/t1" || ref.Partition != -1 || ref.Index != 0 {
		t.Fatalf("Resolve(t1) = %+v", ref)
	}
	if _, err := cat.CreateStream(ctx, lakestream.StreamIdentifier{Namespace: "public/default", Name: "p"},
		lakestream.StreamConfig{}, lakestream.Partitioning{NumPartitions: 2}, lakestream.SchemaConfig{Type: lakestream.SchemaNone}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Partitions(ctx, "persistent://public/default/p", false); err != nil || n != 2 {
		t.Fatalf("Partitions(p) = %d, %v; want 2", n, err)
	}
	if ref, err := b.Resolve(ctx, "persistent://public/default/p-partition-1", false); err != nil || ref.Index != 1 || ref.Partition != 1 {
		t.Fatalf("Resolve(p-partition-1) = %+v, %v", ref, err)
	}
	if _, err := b.Resolve(ctx, "persistent://public/default/p", false); !errors.Is(err, broker.ErrNotAllowed) {
		t.Fatalf("Resolve of a partitioned topic: %v, want ErrNotAllowed", err)
	}
	if _, err := b.Resolve(ctx, "persistent://public/default/a:b", false); !errors.Is(err, broker.ErrInvalidTopicName) {
		t.Fatalf("Resolve of an invalid name: %v, want ErrInvalidTopicName", err)
	}
	topics, err := b.TopicsOfNamespace(ctx, "public/default", false)
	want := []string{"persistent://public/default/p-partition-0", "persistent://public/default/p-partition-1", "persistent://public/default/t1"}
	if err != nil || !slices.Equal(topics, want) {
		t.Fatalf("TopicsOfNamespace = %v, %v; want %v", topics, err, want)
	}

	// Schemas: a first version, the same again, an incompatible one (FULL
	// by default: a field without a default added).
	sc := func(def string) *pb.Schema {
		return &pb.Schema{Name: proto.String("s"), Type: pb.Schema_Avro.Enum(), SchemaData: []byte(def)}
	}
	v0 := `{"type":"record","name":"r","fields":[{"name":"a","type":"int"}]}`
	ver, err := b.GetOrCreateSchema(ctx, ref.Stream, sc(v0), true)
	if err != nil || !slices.Equal(ver, broker.SchemaVersionBytes(0)) {
		t.Fatalf("first schema: version %x, %v", ver, err)
	}
	if again, err := b.GetOrCreateSchema(ctx, ref.Stream, sc(v0), true); err != nil || !slices.Equal(again, ver) {
		t.Fatalf("same schema again: version %x, %v", again, err)
	}
	v1 := `{"type":"record","name":"r","fields":[{"name":"a","type":"int"},{"name":"b","type":"string"}]}`
	if _, err := b.GetOrCreateSchema(ctx, ref.Stream, sc(v1), true); !errors.Is(err, broker.ErrIncompatibleSchema) {
		t.Fatalf("incompatible schema: %v, want ErrIncompatibleSchema", err)
	}
	if st, v, err := b.GetSchema(ctx, ref.Stream, nil); err != nil || v != 0 || string(st.Data) != v0 {
		t.Fatalf("GetSchema = %+v, %d, %v", st, v, err)
	}
	if _, err := b.DeleteSchema(ctx, ref.Stream, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.GetSchema(ctx, ref.Stream, nil); !errors.Is(err, broker.ErrNoSchema) {
		t.Fatalf("GetSchema after delete: %v, want ErrNoSchema", err)
	}

	// Policies: the namespace's apply unless the topic sets its own; the
	// limits start from the node's defaults.
	if err := cat.SetNamespaceProperties(ctx, "public/default", map[string]string{
		broker.MessageTTLProperty:   "60",
		broker.MaxProducersProperty: "5",
		broker.DedupProperty:        "true",
	}); err != nil {
		t.Fatal(err)
	}
	md, err := cat.LoadStream(ctx, ref.Stream)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := b.PoliciesOf(ctx, md)
	// No retention set: the node's default, Pulsar's 0/0.
	if err != nil || pol.TTLSeconds != 60 || pol.Retention == nil || !pol.RetentionDefault || *pol.Retention != (broker.RetentionPolicy{}) {
		t.Fatalf("PoliciesOf = %+v, %v", pol, err)
	}
	lim, err := b.LimitsOf(ctx, md)
	if err != nil || lim.MaxProducers != 5 {
		t.Fatalf("LimitsOf = %+v, %v; want MaxProducers 5", lim, err)
	}
	if on, err := b.DedupEnabled(ctx, md); err != nil || !on {
		t.Fatalf("DedupEnabled = %v, %v", on, err)
	}
	props := map[string]string{broker.MaxProducersProperty: "7", broker.DedupProperty: "false"}
	if md, _, err = cat.ReplaceStreamProperties(ctx, ref.Stream, props, md.MetadataVersion); err != nil {
		t.Fatal(err)
	}
	if lim, err := b.LimitsOf(ctx, md); err != nil || lim.MaxProducers != 7 {
		t.Fatalf("LimitsOf with a topic policy = %+v, %v; want MaxProducers 7", lim, err)
	}
	if on, err := b.DedupEnabled(ctx, md); err != nil || on {
		t.Fatalf("DedupEnabled with a topic policy = %v, %v", on, err)
	}
}
