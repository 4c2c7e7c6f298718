package protocol

import (
	"bufio"
	"bytes"
	"os"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/lakegate/lakegate/protocol/pb"
)

// serverFrames lists one frame per command the gateway sends, built with the
// constructors. Their encoding is pinned in testdata/server_frames.txt and
// decoded by pulsar-client-go's reader in testdata/crosscheck.sh.
func serverFrames(t testing.TB) []struct {
	name  string
	frame Frame
} {
	t.Helper()
	// A batch of two messages, uncompressed, as a producer would send it.
	meta, payload := sampleEntry(t)
	batchEntry, err := AppendEntry(nil, meta, payload)
	if err != nil {
		t.Fatal(err)
	}
	// A non-batched message (no num_messages_in_batch).
	single, err := MarshalMetadata(&pb.MessageMetadata{
		ProducerName: proto.String("p"), SequenceId: proto.Uint64(1), PublishTime: proto.Uint64(1700000000000),
		PartitionKey: proto.String("k"),
	})
	if err != nil {
		t.Fatal(err)
	}
	singleEntry, err := AppendEntry(nil, single, []byte("value"))
	if err != nil {
		t.Fatal(err)
	}
	bem, err := proto.Marshal(&pb.BrokerEntryMetadata{BrokerTimestamp: proto.Uint64(1700000000001), Index: proto.Uint64(11)})
	if err != nil {
		t.Fatal(err)
	}
	md := NewMessageID(7, 9, -1, -1)
	stringSchema := &pb.Schema{Name: proto.String("orders"), SchemaData: []byte{}, Type: pb.Schema_String.Enum()}
	simple := func(c *pb.BaseCommand) Frame { return Frame{Cmd: c} }

	return []struct {
		name  string
		frame Frame
	}{
		{"connected", simple(Connected("lakegate 0.1.0", ProtocolVersion, DefaultMaxMessageSize,
			&pb.FeatureFlags{SupportsAuthRefresh: proto.Bool(true), SupportsBrokerEntryMetadata: proto.Bool(true)}))},
		{"auth-challenge", simple(AuthChallenge("lakegate 0.1.0", ProtocolVersion, "token", []byte("refresh")))},
		{"ping", simple(Ping())},
		{"pong", simple(Pong())},
		{"success", simple(Success(4))},
		{"error", simple(Error(5, pb.ServerError_ConsumerBusy, "Exclusive consumer is already connected"))},
		{"producer-success", simple(ProducerSuccess(3, "standalone-0-1", -1, nil, true))},
		{"producer-success-pending", simple(ProducerSuccess(3, "p", -1, []byte{0, 0, 0, 0, 0, 0, 0, 1}, false))},
		{"send-receipt", simple(SendReceipt(1, 10, 12, NewMessageID(7, 100, -1, -1)))},
		{"send-receipt-duplicate", simple(SendReceipt(1, 10, 10, NewMessageID(-1, -1, -1, -1)))},
		{"send-error", simple(SendError(1, 11, pb.ServerError_TopicTerminatedError, "topic terminated"))},
		{"lookup-response", simple(LookupResponse(2, "pulsar://localhost:6650", "", true, false))},
		{"lookup-error", simple(LookupError(2, pb.ServerError_ServiceNotReady, "not ready"))},
		{"partitioned-metadata-response", simple(PartitionedMetadataResponse(6, 4))},
		{"partitioned-metadata-error", simple(PartitionedMetadataError(6, pb.ServerError_TopicNotFound, "no topic"))},
		{"message-single", Frame{Cmd: Message(1, NewMessageID(7, 99, -1, -1), 0, nil), Entry: singleEntry}},
		{"message-batch", Frame{Cmd: Message(1, NewMessageID(7, 100, -1, -1), 0, nil), Entry: batchEntry}},
		{"message-batch-redelivered", Frame{Cmd: Message(1, NewMessageID(7, 100, -1, 2), 3, []int64{2}), Entry: batchEntry}},
		{"message-broker-entry-metadata", Frame{Cmd: Message(1, NewMessageID(7, 100, -1, -1), 0, nil), Entry: batchEntry, BrokerEntryMetadata: bem}},
		{"active-consumer-change", simple(ActiveConsumerChange(1, true))},
		{"close-producer", simple(CloseProducer(1, 100))},
		{"close-consumer", simple(CloseConsumer(1, 101))},
		{"get-last-message-id-response", simple(GetLastMessageIDResponse(8, NewMessageID(7, 100, 1, -1), &md))},
		{"get-last-message-id-response-empty", simple(GetLastMessageIDResponse(8, NewMessageID(7, -1, -1, -1), nil))},
		{"get-topics-of-namespace-response", simple(GetTopicsOfNamespaceResponse(9,
			[]string{"persistent://public/default/a", "persistent://public/default/b-partition-0"}, false, ""))},
		{"get-schema-response", simple(GetSchemaResponse(10, stringSchema, []byte{0, 0, 0, 0, 0, 0, 0, 0}))},
		{"get-schema-error", simple(GetSchemaError(10, pb.ServerError_TopicNotFound, "no schema"))},
		{"get-or-create-schema-response", simple(GetOrCreateSchemaResponse(11, []byte{0, 0, 0, 0, 0, 0, 0, 0}))},
		{"get-or-create-schema-error", simple(GetOrCreateSchemaError(11, pb.ServerError_IncompatibleSchema, "incompatible"))},
		{"ack-response", simple(AckResponse(1, 12))},
		{"ack-error", simple(AckError(1, 12, pb.ServerError_NotAllowedError, "no"))},
		{"reached-end-of-topic", simple(ReachedEndOfTopic(1))},
		{"consumer-stats-response", simple(ConsumerStatsResponse(13, ConsumerStats{
			ConsumerName: "c1", AvailablePermits: 1000, Type: "Shared", MsgBacklog: 5, ConnectedSince: "2024-01-01T00:00:00Z",
		}))},
		{"consumer-stats-error", simple(ConsumerStatsError(13, pb.ServerError_ConsumerNotFound, "no consumer"))},
	}
}

const serverFramesHeader = `# Frames lakegate's encoder produces for the commands the gateway sends
# (protocol/commands_test.go serverFrames). Rewrite with:
#   go test -run TestServerFramesGolden ./protocol/ -update
# testdata/crosscheck.sh decodes every frame here with pulsar-client-go.
`

func TestServerFramesGolden(t *testing.T) {
	const path = "testdata/server_frames.txt"
	var got []namedFrame
	for _, sf := range serverFrames(t) {
		b, err := AppendFrame(nil, sf.frame)
		if err != nil {
			t.Fatalf("%s: %v", sf.name, err)
		}
		got = append(got, namedFrame{name: sf.name, attrs: map[string]string{"type": sf.frame.Cmd.GetType().String()}, raw: b})

		// Each decodes back to what was encoded.
		f, err := DecodeFrame(b[4:])
		if err != nil {
			t.Fatalf("%s: decode: %v", sf.name, err)
		}
		if !proto.Equal(f.Cmd, sf.frame.Cmd) || !bytes.Equal(f.Entry, sf.frame.Entry) ||
			!bytes.Equal(f.BrokerEntryMetadata, sf.frame.BrokerEntryMetadata) {
			t.Fatalf("%s: decoded %+v", sf.name, f)
		}
	}
	if *update {
		if err := os.WriteFile(path, formatFrameFile(serverFramesHeader, got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := readFrameFile(t, path)
	if len(want) != len(got) {
		t.Fatalf("%d frames, golden has %d (run with -update)", len(got), len(want))
	}
	for i := range got {
		if got[i].name != want[i].name || !bytes.Equal(got[i].raw, want[i].raw) {
			t.Errorf("%s: encoding changed (run with -update if intended)\ngot  %x\nwant %x", got[i].name, got[i].raw, want[i].raw)
		}
	}
}

// TestConstructorsComplete checks every constructor sets the body its type
// names and all required fields.
func TestConstructorsComplete(t *testing.T) {
	for _, sf := range serverFrames(t) {
		c := sf.frame.Cmd
		if err := proto.CheckInitialized(c); err != nil {
			t.Errorf("%s: %v", sf.name, err)
		}
		m := c.ProtoReflect()
		body := m.Descriptor().Fields().ByNumber(protoreflect.FieldNumber(c.GetType()))
		set := 0
		m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
			if fd.Number() != 1 {
				set++
				if fd != body {
					t.Errorf("%s: sets %s, not its body", sf.name, fd.Name())
				}
			}
			return true
		})
		if set != 1 {
			t.Errorf("%s: %d bodies set", sf.name, set)
		}
	}
}

func TestConstructorFields(t *testing.T) {
	c := Connected("v", 21, 0, nil)
	if c.Connected.MaxMessageSize != nil {
		t.Error("max_message_size set though 0 was passed")
	}
	if got := Message(1, NewMessageID(1, 2, -1, 0), 0, nil).Message; got.RedeliveryCount != nil || got.GetMessageId().GetPartition() != 0 {
		t.Errorf("message: %v", got)
	}
	if got := SendReceipt(1, 2, 3, EarliestMessageID).SendReceipt.GetMessageId(); got.GetLedgerId() != ^uint64(0) || got.GetEntryId() != ^uint64(0) {
		t.Errorf("duplicate receipt id %v", got)
	}
	if got := GetLastMessageIDResponse(1, NewMessageID(3, 4, 5, -1), nil).GetLastMessageIdResponse; got.GetLastMessageId().GetBatchIndex() != 5 || got.ConsumerMarkDeletePosition != nil {
		t.Errorf("last message id %v", got)
	}
	// The Java client reads schema_version unconditionally: present (empty)
	// even without a schema, after an encode/decode round trip.
	ps := ProducerSuccess(1, "p", -1, nil, true)
	var buf []byte
	buf, err := AppendFrame(buf, Frame{Cmd: ps})
	if err != nil {
		t.Fatal(err)
	}
	f, err := ReadFrame(bufio.NewReader(bytes.NewReader(buf)), DefaultMaxFrameSize)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Cmd.GetProducerSuccess(); got.SchemaVersion == nil || len(got.SchemaVersion) != 0 {
		t.Errorf("producer success without schema: schema_version %v, want present and empty", got.SchemaVersion)
	}
	if got := LookupResponse(1, "pulsar://a:6650", "pulsar+ssl://a:6651", true, false).LookupTopicResponse; got.GetResponse() != pb.CommandLookupTopicResponse_Connect || got.GetBrokerServiceUrlTls() != "pulsar+ssl://a:6651" {
		t.Errorf("lookup %v", got)
	}
}
