package protocol

import (
	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/protocol/pb"
)

// Constructors for the commands the gateway sends to clients. Each returns a
// BaseCommand with its type and body set and every required field filled, so
// AppendFrame never fails on them. Optional fields not covered by the
// arguments can be set on the body afterwards (for example
// cmd.ProducerSuccess.TopicEpoch).

func base(t pb.BaseCommand_Type) *pb.BaseCommand {
	return &pb.BaseCommand{Type: t.Enum()}
}

// Connected answers CONNECT. protocolVersion should be
// min(client's, ProtocolVersion); maxMessageSize is in bytes (<= 0 omits it,
// which clients read as 5 MiB). flags may be nil.
func Connected(serverVersion string, protocolVersion, maxMessageSize int32, flags *pb.FeatureFlags) *pb.BaseCommand {
	c := base(pb.BaseCommand_CONNECTED)
	c.Connected = &pb.CommandConnected{
		ServerVersion:   proto.String(serverVersion),
		ProtocolVersion: proto.Int32(protocolVersion),
		FeatureFlags:    flags,
	}
	if maxMessageSize > 0 {
		c.Connected.MaxMessageSize = proto.Int32(maxMessageSize)
	}
	return c
}

// ProtocolVersion is the highest protocol version lakegate speaks.
const ProtocolVersion = int32(pb.ProtocolVersion_v21)

// AuthChallenge asks the client to (re)authenticate with method and data.
func AuthChallenge(serverVersion string, protocolVersion int32, method string, data []byte) *pb.BaseCommand {
	c := base(pb.BaseCommand_AUTH_CHALLENGE)
	c.AuthChallenge = &pb.CommandAuthChallenge{
		ServerVersion:   proto.String(serverVersion),
		ProtocolVersion: proto.Int32(protocolVersion),
		Challenge:       &pb.AuthData{AuthMethodName: proto.String(method), AuthData: data},
	}
	return c
}

// Ping probes the client; it answers with Pong.
func Ping() *pb.BaseCommand {
	c := base(pb.BaseCommand_PING)
	c.Ping = &pb.CommandPing{}
	return c
}

// Pong answers PING.
func Pong() *pb.BaseCommand {
	c := base(pb.BaseCommand_PONG)
	c.Pong = &pb.CommandPong{}
	return c
}

// Success answers requests that only need an acknowledgement (SUBSCRIBE,
// UNSUBSCRIBE, SEEK, CLOSE_PRODUCER, CLOSE_CONSUMER, ...).
func Success(requestID uint64) *pb.BaseCommand {
	c := base(pb.BaseCommand_SUCCESS)
	c.Success = &pb.CommandSuccess{RequestId: proto.Uint64(requestID)}
	return c
}

// Error fails the request requestID with code and a human-readable message.
func Error(requestID uint64, code pb.ServerError, msg string) *pb.BaseCommand {
	c := base(pb.BaseCommand_ERROR)
	c.Error = &pb.CommandError{
		RequestId: proto.Uint64(requestID),
		Error:     code.Enum(),
		Message:   proto.String(msg),
	}
	return c
}

// ProducerSuccess answers PRODUCER. lastSequenceID is -1 when no
// deduplication state exists. ready=false tells a WaitForExclusive producer
// to wait for a second ProducerSuccess. schemaVersion may be nil (a topic
// without schema): schema_version is then sent present and empty, as the
// Java broker does, because the Java client reads it unconditionally
// (a PRODUCER_SUCCESS without it fails the producer's creation).
func ProducerSuccess(requestID uint64, producerName string, lastSequenceID int64, schemaVersion []byte, ready bool) *pb.BaseCommand {
	if schemaVersion == nil {
		schemaVersion = []byte{}
	}
	c := base(pb.BaseCommand_PRODUCER_SUCCESS)
	c.ProducerSuccess = &pb.CommandProducerSuccess{
		RequestId:      proto.Uint64(requestID),
		ProducerName:   proto.String(producerName),
		LastSequenceId: proto.Int64(lastSequenceID),
		SchemaVersion:  schemaVersion,
		ProducerReady:  proto.Bool(ready),
	}
	return c
}

// SendReceipt confirms a SEND once it is durable. id names the entry
// (BatchIndex -1); highestSequenceID echoes the SEND's highest_sequence_id.
func SendReceipt(producerID, sequenceID, highestSequenceID uint64, id MessageID) *pb.BaseCommand {
	c := base(pb.BaseCommand_SEND_RECEIPT)
	c.SendReceipt = &pb.CommandSendReceipt{
		ProducerId:        proto.Uint64(producerID),
		SequenceId:        proto.Uint64(sequenceID),
		MessageId:         id.PB(),
		HighestSequenceId: proto.Uint64(highestSequenceID),
	}
	return c
}

// SendError fails one SEND. Clients close the connection on any code other
// than NotAllowedError and TopicTerminatedError.
func SendError(producerID, sequenceID uint64, code pb.ServerError, msg string) *pb.BaseCommand {
	c := base(pb.BaseCommand_SEND_ERROR)
	c.SendError = &pb.CommandSendError{
		ProducerId: proto.Uint64(producerID),
		SequenceId: proto.Uint64(sequenceID),
		Error:      code.Enum(),
		Message:    proto.String(msg),
	}
	return c
}

// LookupResponse answers LOOKUP with response=Connect: the client should use
// brokerURL (and brokerURLTLS, empty to omit) for the topic.
func LookupResponse(requestID uint64, brokerURL, brokerURLTLS string, authoritative, proxyThroughServiceURL bool) *pb.BaseCommand {
	c := base(pb.BaseCommand_LOOKUP_RESPONSE)
	c.LookupTopicResponse = &pb.CommandLookupTopicResponse{
		RequestId:              proto.Uint64(requestID),
		Response:               pb.CommandLookupTopicResponse_Connect.Enum(),
		BrokerServiceUrl:       proto.String(brokerURL),
		Authoritative:          proto.Bool(authoritative),
		ProxyThroughServiceUrl: proto.Bool(proxyThroughServiceURL),
	}
	if brokerURLTLS != "" {
		c.LookupTopicResponse.BrokerServiceUrlTls = proto.String(brokerURLTLS)
	}
	return c
}

// LookupError answers LOOKUP with response=Failed.
func LookupError(requestID uint64, code pb.ServerError, msg string) *pb.BaseCommand {
	c := base(pb.BaseCommand_LOOKUP_RESPONSE)
	c.LookupTopicResponse = &pb.CommandLookupTopicResponse{
		RequestId: proto.Uint64(requestID),
		Response:  pb.CommandLookupTopicResponse_Failed.Enum(),
		Error:     code.Enum(),
		Message:   proto.String(msg),
	}
	return c
}

// PartitionedMetadataResponse answers PARTITIONED_METADATA; partitions is 0
// for a non-partitioned topic.
func PartitionedMetadataResponse(requestID uint64, partitions uint32) *pb.BaseCommand {
	c := base(pb.BaseCommand_PARTITIONED_METADATA_RESPONSE)
	c.PartitionMetadataResponse = &pb.CommandPartitionedTopicMetadataResponse{
		RequestId:  proto.Uint64(requestID),
		Response:   pb.CommandPartitionedTopicMetadataResponse_Success.Enum(),
		Partitions: proto.Uint32(partitions),
	}
	return c
}

// PartitionedMetadataError answers PARTITIONED_METADATA with response=Failed.
func PartitionedMetadataError(requestID uint64, code pb.ServerError, msg string) *pb.BaseCommand {
	c := base(pb.BaseCommand_PARTITIONED_METADATA_RESPONSE)
	c.PartitionMetadataResponse = &pb.CommandPartitionedTopicMetadataResponse{
		RequestId: proto.Uint64(requestID),
		Response:  pb.CommandPartitionedTopicMetadataResponse_Failed.Enum(),
		Error:     code.Enum(),
		Message:   proto.String(msg),
	}
	return c
}

// Message is the command of a MESSAGE frame delivering the entry id names
// (send it with the stored entry as the frame's Entry). redeliveryCount is
// omitted when 0; ackSet (may be nil) is the stored batch-index ack state.
func Message(consumerID uint64, id MessageID, redeliveryCount uint32, ackSet []int64) *pb.BaseCommand {
	c := base(pb.BaseCommand_MESSAGE)
	c.Message = &pb.CommandMessage{
		ConsumerId: proto.Uint64(consumerID),
		MessageId:  id.PB(),
		AckSet:     ackSet,
	}
	if redeliveryCount != 0 {
		c.Message.RedeliveryCount = proto.Uint32(redeliveryCount)
	}
	return c
}

// ActiveConsumerChange tells a Failover/Exclusive consumer whether it is now
// the active one.
func ActiveConsumerChange(consumerID uint64, isActive bool) *pb.BaseCommand {
	c := base(pb.BaseCommand_ACTIVE_CONSUMER_CHANGE)
	c.ActiveConsumerChange = &pb.CommandActiveConsumerChange{
		ConsumerId: proto.Uint64(consumerID),
		IsActive:   proto.Bool(isActive),
	}
	return c
}

// CloseProducer tells the client the gateway closed its producer; the client
// looks the topic up again and reconnects. requestID is the gateway's own
// (clients ignore it).
func CloseProducer(producerID, requestID uint64) *pb.BaseCommand {
	c := base(pb.BaseCommand_CLOSE_PRODUCER)
	c.CloseProducer = &pb.CommandCloseProducer{
		ProducerId: proto.Uint64(producerID),
		RequestId:  proto.Uint64(requestID),
	}
	return c
}

// CloseProducerAssigned tells the client the broker closed its producer (the
// topic moved); the client reconnects to assignedURL when it is set, else
// looks the topic up again.
func CloseProducerAssigned(producerID uint64, assignedURL string) *pb.BaseCommand {
	c := CloseProducer(producerID, 0)
	if assignedURL != "" {
		c.CloseProducer.AssignedBrokerServiceUrl = proto.String(assignedURL)
	}
	return c
}

// CloseConsumerAssigned is CloseConsumer naming where the topic moved.
func CloseConsumerAssigned(consumerID uint64, assignedURL string) *pb.BaseCommand {
	c := CloseConsumer(consumerID, 0)
	if assignedURL != "" {
		c.CloseConsumer.AssignedBrokerServiceUrl = proto.String(assignedURL)
	}
	return c
}

// LookupRedirect answers LOOKUP with response=Redirect: ask again at
// brokerURL (authoritative: that broker should take the topic).
func LookupRedirect(requestID uint64, brokerURL, brokerURLTLS string, authoritative bool) *pb.BaseCommand {
	c := LookupResponse(requestID, brokerURL, brokerURLTLS, authoritative, false)
	c.LookupTopicResponse.Response = pb.CommandLookupTopicResponse_Redirect.Enum()
	return c
}

// CloseConsumer tells the client the gateway closed its consumer; the client
// resubscribes.
func CloseConsumer(consumerID, requestID uint64) *pb.BaseCommand {
	c := base(pb.BaseCommand_CLOSE_CONSUMER)
	c.CloseConsumer = &pb.CommandCloseConsumer{
		ConsumerId: proto.Uint64(consumerID),
		RequestId:  proto.Uint64(requestID),
	}
	return c
}

// GetLastMessageIDResponse answers GET_LAST_MESSAGE_ID. last carries the
// batch index of the last message (batch size - 1, or -1); for an empty
// topic its EntryID is -1. markDelete may be nil.
func GetLastMessageIDResponse(requestID uint64, last MessageID, markDelete *MessageID) *pb.BaseCommand {
	c := base(pb.BaseCommand_GET_LAST_MESSAGE_ID_RESPONSE)
	c.GetLastMessageIdResponse = &pb.CommandGetLastMessageIdResponse{
		RequestId:     proto.Uint64(requestID),
		LastMessageId: last.PB(),
	}
	if markDelete != nil {
		c.GetLastMessageIdResponse.ConsumerMarkDeletePosition = markDelete.PB()
	}
	return c
}

// GetTopicsOfNamespaceResponse answers GET_TOPICS_OF_NAMESPACE. filtered
// says topics was filtered by the request's pattern; topicsHash (empty to
// omit) lets the client skip unchanged lists.
func GetTopicsOfNamespaceResponse(requestID uint64, topics []string, filtered bool, topicsHash string) *pb.BaseCommand {
	c := base(pb.BaseCommand_GET_TOPICS_OF_NAMESPACE_RESPONSE)
	c.GetTopicsOfNamespaceResponse = &pb.CommandGetTopicsOfNamespaceResponse{
		RequestId: proto.Uint64(requestID),
		Topics:    topics,
		Filtered:  proto.Bool(filtered),
		Changed:   proto.Bool(true),
	}
	if topicsHash != "" {
		c.GetTopicsOfNamespaceResponse.TopicsHash = proto.String(topicsHash)
	}
	return c
}

// GetSchemaResponse answers GET_SCHEMA with a schema and its version.
func GetSchemaResponse(requestID uint64, schema *pb.Schema, version []byte) *pb.BaseCommand {
	c := base(pb.BaseCommand_GET_SCHEMA_RESPONSE)
	c.GetSchemaResponse = &pb.CommandGetSchemaResponse{
		RequestId:     proto.Uint64(requestID),
		Schema:        schema,
		SchemaVersion: version,
	}
	return c
}

// GetSchemaError answers GET_SCHEMA with an error (TopicNotFound when the
// topic has no schema).
func GetSchemaError(requestID uint64, code pb.ServerError, msg string) *pb.BaseCommand {
	c := base(pb.BaseCommand_GET_SCHEMA_RESPONSE)
	c.GetSchemaResponse = &pb.CommandGetSchemaResponse{
		RequestId:    proto.Uint64(requestID),
		ErrorCode:    code.Enum(),
		ErrorMessage: proto.String(msg),
	}
	return c
}

// GetOrCreateSchemaResponse answers GET_OR_CREATE_SCHEMA with the version
// assigned to the schema. A nil version (an untyped BYTES schema) is sent
// present and empty, Pulsar's SchemaVersion.Empty: the Java client reads
// the field unconditionally.
func GetOrCreateSchemaResponse(requestID uint64, version []byte) *pb.BaseCommand {
	if version == nil {
		version = []byte{}
	}
	c := base(pb.BaseCommand_GET_OR_CREATE_SCHEMA_RESPONSE)
	c.GetOrCreateSchemaResponse = &pb.CommandGetOrCreateSchemaResponse{
		RequestId:     proto.Uint64(requestID),
		SchemaVersion: version,
	}
	return c
}

// GetOrCreateSchemaError answers GET_OR_CREATE_SCHEMA with an error
// (IncompatibleSchema, ...).
func GetOrCreateSchemaError(requestID uint64, code pb.ServerError, msg string) *pb.BaseCommand {
	c := base(pb.BaseCommand_GET_OR_CREATE_SCHEMA_RESPONSE)
	c.GetOrCreateSchemaResponse = &pb.CommandGetOrCreateSchemaResponse{
		RequestId:    proto.Uint64(requestID),
		ErrorCode:    code.Enum(),
		ErrorMessage: proto.String(msg),
	}
	return c
}

// AckResponse confirms an ACK that carried request_id.
func AckResponse(consumerID, requestID uint64) *pb.BaseCommand {
	c := base(pb.BaseCommand_ACK_RESPONSE)
	c.AckResponse = &pb.CommandAckResponse{
		ConsumerId: proto.Uint64(consumerID),
		RequestId:  proto.Uint64(requestID),
	}
	return c
}

// AckError fails an ACK that carried request_id.
func AckError(consumerID, requestID uint64, code pb.ServerError, msg string) *pb.BaseCommand {
	c := AckResponse(consumerID, requestID)
	c.AckResponse.Error = code.Enum()
	c.AckResponse.Message = proto.String(msg)
	return c
}

// ReachedEndOfTopic tells a consumer that its terminated topic has no more
// messages for it.
func ReachedEndOfTopic(consumerID uint64) *pb.BaseCommand {
	c := base(pb.BaseCommand_REACHED_END_OF_TOPIC)
	c.ReachedEndOfTopic = &pb.CommandReachedEndOfTopic{ConsumerId: proto.Uint64(consumerID)}
	return c
}

// ConsumerStats is what CONSUMER_STATS_RESPONSE reports. Rates are per
// second, throughput in bytes per second.
type ConsumerStats struct {
	MsgRateOut                   float64
	MsgThroughputOut             float64
	MsgRateRedeliver             float64
	ConsumerName                 string
	AvailablePermits             uint64
	UnackedMessages              uint64
	BlockedConsumerOnUnackedMsgs bool
	Address                      string
	ConnectedSince               string // RFC 3339
	Type                         string // subscription type name: Exclusive, Shared, Failover, Key_Shared
	MsgRateExpired               float64
	MsgBacklog                   uint64
	MessageAckRate               float64
}

// ConsumerStatsResponse answers CONSUMER_STATS.
func ConsumerStatsResponse(requestID uint64, s ConsumerStats) *pb.BaseCommand {
	c := base(pb.BaseCommand_CONSUMER_STATS_RESPONSE)
	c.ConsumerStatsResponse = &pb.CommandConsumerStatsResponse{
		RequestId:                    proto.Uint64(requestID),
		MsgRateOut:                   proto.Float64(s.MsgRateOut),
		MsgThroughputOut:             proto.Float64(s.MsgThroughputOut),
		MsgRateRedeliver:             proto.Float64(s.MsgRateRedeliver),
		ConsumerName:                 proto.String(s.ConsumerName),
		AvailablePermits:             proto.Uint64(s.AvailablePermits),
		UnackedMessages:              proto.Uint64(s.UnackedMessages),
		BlockedConsumerOnUnackedMsgs: proto.Bool(s.BlockedConsumerOnUnackedMsgs),
		Address:                      proto.String(s.Address),
		ConnectedSince:               proto.String(s.ConnectedSince),
		Type:                         proto.String(s.Type),
		MsgRateExpired:               proto.Float64(s.MsgRateExpired),
		MsgBacklog:                   proto.Uint64(s.MsgBacklog),
		MessageAckRate:               proto.Float64(s.MessageAckRate),
	}
	return c
}

// ConsumerStatsError answers CONSUMER_STATS with an error.
func ConsumerStatsError(requestID uint64, code pb.ServerError, msg string) *pb.BaseCommand {
	c := base(pb.BaseCommand_CONSUMER_STATS_RESPONSE)
	c.ConsumerStatsResponse = &pb.CommandConsumerStatsResponse{
		RequestId:    proto.Uint64(requestID),
		ErrorCode:    code.Enum(),
		ErrorMessage: proto.String(msg),
	}
	return c
}
