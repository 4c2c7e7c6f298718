package admin

// Admin REST: topics. A partitioned topic t with N partitions is one
// lakestream stream tenant/ns/t with Partitioning.NumPartitions = N; its
// partitions are the topics t-partition-0 … t-partition-(N-1) (see topic.go).
// A non-partitioned topic is a stream with NumPartitions 0.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// topicRef is what an admin topic path denotes.
type topicRef struct {
	// name is the requested topic (a partition keeps its suffix).
	name broker.TopicName
	md   lakestream.StreamMetadata
	// partition is the partition index when name is one partition of a
	// partitioned stream, else -1 (a non-partitioned topic, or the
	// partitioned topic as a whole).
	partition int
}

// partitioned reports whether the ref is a partitioned topic as a whole.
func (r topicRef) partitioned() bool {
	return r.partition < 0 && r.md.Partitioning.NumPartitions > 0
}

// partitionName is the name of partition i of base.
func partitionName(base broker.TopicName, i int) string {
	return base.String() + broker.PartitionSuffix + strconv.Itoa(i)
}

// pathTopic parses the {tenant}/{ns}/{topic} of a request.
func pathTopic(r *http.Request) (broker.TopicName, error) {
	tenant, ns, local := r.PathValue("tenant"), r.PathValue("ns"), r.PathValue("topic")
	if err := errors.Join(validName("tenant", tenant), validName("namespace", ns), validName("topic", local)); err != nil {
		return broker.TopicName{}, err
	}
	return broker.ParseTopicName("persistent://" + tenant + "/" + ns + "/" + local)
}

// lookup resolves a topic name the way resolveTopic does: "-partition-N" is
// a partition when the base stream is partitioned, else part of the name.
func (a *admin) lookup(ctx context.Context, tn broker.TopicName) (topicRef, error) {
	if tn.Partition >= 0 {
		md, err := a.cat.LoadStream(ctx, tn.StreamID())
		if err == nil && md.Partitioning.NumPartitions > 0 {
			if tn.Partition >= md.Partitioning.NumPartitions {
				return topicRef{}, fmt.Errorf("%w: topic %s not found: the partitioned topic has %d partitions", errAdminNotFound, tn, md.Partitioning.NumPartitions)
			}
			return topicRef{name: tn, md: md, partition: tn.Partition}, nil
		}
		if err != nil && !errors.Is(err, lakestream.ErrNoSuchStream) {
			return topicRef{}, err
		}
	}
	md, err := a.cat.LoadStream(ctx, broker.FullStreamID(tn))
	if errors.Is(err, lakestream.ErrNoSuchStream) {
		return topicRef{}, fmt.Errorf("%w: topic %s not found", errAdminNotFound, tn)
	}
	if err != nil {
		return topicRef{}, err
	}
	tn.Partition = -1
	return topicRef{name: tn, md: md, partition: -1}, nil
}

// topics returns the live topics of a ref: every partition of a
// partitioned topic, else the one topic. Opening them does not create
// anything.
func (a *admin) topics(ctx context.Context, ref topicRef) ([]broker.ServedTopic, error) {
	if a.node.Closing() {
		return nil, broker.ErrServiceNotReady
	}
	if !ref.partitioned() {
		t, err := a.node.ServedTopic(ctx, ref.name.String())
		if err != nil {
			return nil, err
		}
		return []broker.ServedTopic{t}, nil
	}
	out := make([]broker.ServedTopic, 0, ref.md.Partitioning.NumPartitions)
	for i := range ref.md.Partitioning.NumPartitions {
		t, err := a.node.ServedTopic(ctx, partitionName(ref.name, i))
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// refOf parses and looks up the request's topic.
func (a *admin) refOf(r *http.Request) (topicRef, error) {
	tn, err := pathTopic(r)
	if err != nil {
		return topicRef{}, err
	}
	return a.lookup(r.Context(), tn)
}

// --- lists ---

// topicNames lists the topics of a namespace: non-partitioned topics and the
// partitions of partitioned ones (plain), or the partitioned topics
// themselves (partitioned); 404 for an unknown namespace.
func (a *admin) topicNames(ctx context.Context, tenant, ns string, partitioned bool) ([]string, error) {
	if err := a.checkNamespace(ctx, tenant, ns); err != nil {
		return nil, err
	}
	out, err := a.brk.TopicsOfNamespace(ctx, tenant+"/"+ns, partitioned)
	if out == nil {
		out = []string{}
	}
	return out, err
}

func (a *admin) listTopics(r *http.Request) (any, error) {
	names, err := a.topicNames(r.Context(), r.PathValue("tenant"), r.PathValue("ns"), false)
	if err != nil {
		return nil, err
	}
	return names, nil
}

func (a *admin) listPartitionedTopics(r *http.Request) (any, error) {
	names, err := a.topicNames(r.Context(), r.PathValue("tenant"), r.PathValue("ns"), true)
	if err != nil {
		return nil, err
	}
	return names, nil
}

// --- create / grow / delete ---

// partitionedMetadata is Pulsar's PartitionedTopicMetadata.
type partitionedMetadata struct {
	Partitions int               `json:"partitions"`
	Properties map[string]string `json:"properties,omitempty"`
}

// parsePartitions reads a body that is an int or a partitionedMetadata.
func parsePartitions(r *http.Request) (partitionedMetadata, error) {
	b, err := readBody(r)
	if err != nil {
		return partitionedMetadata{}, err
	}
	if b == nil {
		return partitionedMetadata{}, fmt.Errorf("%w: the body must be the number of partitions", errAdminBadRequest)
	}
	var m partitionedMetadata
	if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
		m.Partitions = n
	} else if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%w: partitions body %q: want an int or {\"partitions\":N}", errAdminBadRequest, b)
	}
	return m, nil
}

// createErr turns CreateStream's errors into the admin's.
func createErr(err error, tn broker.TopicName) error {
	switch {
	case errors.Is(err, lakestream.ErrStreamDeleted):
		return fmt.Errorf("%w: topic %s was deleted and lakestream keeps its name tombstoned: choose another name", errAdminConflict, tn)
	case errors.Is(err, lakestream.ErrAlreadyExists):
		return fmt.Errorf("%w: this topic already exists: %s", errAdminConflict, tn)
	case errors.Is(err, lakestream.ErrNoSuchNamespace):
		return fmt.Errorf("%w: namespace %s/%s does not exist", errAdminNotFound, tn.Tenant, tn.Namespace)
	}
	return err
}

func (a *admin) createPartitionedTopic(r *http.Request) (any, error) {
	ctx := r.Context()
	tn, err := pathTopic(r)
	if err != nil {
		return nil, err
	}
	m, err := parsePartitions(r)
	if err == nil && m.Partitions <= 0 {
		err = fmt.Errorf("%w: number of partitions should be more than 0", errAdminPrecondition)
	}
	if err == nil && strings.Contains(tn.Local, broker.PartitionSuffix) {
		err = fmt.Errorf("%w: a partitioned topic name may not contain %q", errAdminPrecondition, broker.PartitionSuffix)
	}
	if err == nil {
		err = a.checkNamespace(ctx, tn.Tenant, tn.Namespace)
	}
	if err != nil {
		return nil, err
	}
	_, err = a.cat.CreateStream(ctx, broker.FullStreamID(tn), lakestream.StreamConfig{},
		lakestream.Partitioning{NumPartitions: m.Partitions}, lakestream.SchemaConfig{Type: lakestream.SchemaNone}, m.Properties, nil)
	if err != nil {
		return nil, createErr(err, tn)
	}
	return nil, nil
}

func (a *admin) createTopic(r *http.Request) (any, error) {
	ctx := r.Context()
	tn, err := pathTopic(r)
	if err != nil {
		return nil, err
	}
	var props map[string]string
	b, err := readBody(r)
	if err == nil && b != nil {
		if jerr := json.Unmarshal(b, &props); jerr != nil {
			err = fmt.Errorf("%w: topic properties must be a JSON object of strings: %v", errAdminBadRequest, jerr)
		}
	}
	if err == nil {
		err = a.checkNamespace(ctx, tn.Tenant, tn.Namespace)
	}
	if err == nil && tn.Partition >= 0 {
		if md, lerr := a.cat.LoadStream(ctx, tn.StreamID()); lerr == nil && md.Partitioning.NumPartitions > 0 {
			err = fmt.Errorf("%w: %s is a partition of the partitioned topic %s", errAdminConflict, tn, tn.Base())
		}
	}
	if err != nil {
		return nil, err
	}
	_, err = a.cat.CreateStream(ctx, broker.FullStreamID(tn), lakestream.StreamConfig{},
		lakestream.Partitioning{}, lakestream.SchemaConfig{Type: lakestream.SchemaNone}, props, nil)
	if err != nil {
		return nil, createErr(err, tn)
	}
	return nil, nil
}

func (a *admin) growPartitionedTopic(r *http.Request) (any, error) {
	ctx := r.Context()
	ref, err := a.refOf(r)
	if err != nil {
		return nil, err
	}
	m, err := parsePartitions(r)
	switch {
	case err != nil:
	case !ref.partitioned():
		err = fmt.Errorf("%w: %s is not a partitioned topic", errAdminConflict, ref.name)
	case m.Partitions <= ref.md.Partitioning.NumPartitions:
		err = fmt.Errorf("%w: desired partitions %d must be more than the current %d", errAdminUnprocessable, m.Partitions, ref.md.Partitioning.NumPartitions)
	default:
		_, err = a.cat.IncreasePartitions(ctx, broker.FullStreamID(ref.name), m.Partitions)
	}
	if err != nil {
		return nil, err
	}
	return nil, nil
}

func (a *admin) getPartitions(r *http.Request) (any, error) {
	ref, err := a.refOf(r)
	if err != nil {
		return nil, err
	}
	n := 0
	if ref.partitioned() {
		n = ref.md.Partitioning.NumPartitions
	}
	props := maps.Clone(ref.md.Properties)
	maps.DeleteFunc(props, func(k, _ string) bool { return strings.HasPrefix(k, subPropsPrefix) })
	return partitionedMetadata{Partitions: n, Properties: props}, nil
}

func (a *admin) deletePartitionedTopic(r *http.Request) (any, error) {
	ref, err := a.refOf(r)
	if err == nil && !ref.partitioned() {
		err = fmt.Errorf("%w: partitioned topic %s does not exist (it is not partitioned: DELETE the topic itself)", errAdminNotFound, ref.name)
	}
	if err == nil {
		err = a.dropStream(r.Context(), broker.FullStreamID(ref.name), queryBool(r, "force"))
	}
	if err != nil {
		return nil, err
	}
	return nil, nil
}

func (a *admin) deleteTopic(r *http.Request) (any, error) {
	ref, err := a.refOf(r)
	switch {
	case err != nil:
	case ref.partitioned():
		err = fmt.Errorf("%w: %s is a partitioned topic: DELETE %s/partitions", errAdminConflict, ref.name, r.URL.Path)
	case ref.partition >= 0:
		err = fmt.Errorf("%w: %s is one partition of %s: partitions are deleted with their topic", errAdminPrecondition, ref.name, ref.name.Base())
	default:
		err = a.dropStream(r.Context(), broker.FullStreamID(ref.name), queryBool(r, "force"))
	}
	if err != nil {
		return nil, err
	}
	return nil, nil
}

// dropStream deletes a stream and forgets its topics on this node. Without
// force it refuses (412) while producers or consumers are attached; with
// force they stay attached to a deleted log and fail on their next use.
func (a *admin) dropStream(ctx context.Context, id lakestream.StreamIdentifier, force bool) error {
	md, err := a.cat.LoadStream(ctx, id)
	if errors.Is(err, lakestream.ErrNoSuchStream) {
		return fmt.Errorf("%w: topic %s/%s not found", errAdminNotFound, id.Namespace, id.Name)
	}
	if err != nil {
		return err
	}
	if !force {
		for _, t := range a.node.LoadedTopics() {
			if t.Stream() != id {
				continue
			}
			producers, consumers := t.Attached()
			if producers > 0 {
				return fmt.Errorf("%w: topic %s has %d connected producers (use ?force=true)", errAdminPrecondition, t.Name(), producers)
			}
			if consumers {
				return fmt.Errorf("%w: topic %s has connected consumers (use ?force=true)", errAdminPrecondition, t.Name())
			}
		}
	}
	err = a.brk.DropTopic(ctx, md, func(ctx context.Context, unit string) error { return a.node.UnloadUnit(ctx, unit, "") })
	if errors.Is(err, lakestream.ErrNoSuchStream) {
		return fmt.Errorf("%w: topic %s/%s not found", errAdminNotFound, id.Namespace, id.Name)
	}
	return err
}

// --- message ids, terminate, unload, entries ---

// messageIDJSON is Pulsar's MessageIdImpl as the REST API shows it.
type messageIDJSON struct {
	LedgerID       int64 `json:"ledgerId"`
	EntryID        int64 `json:"entryId"`
	PartitionIndex int32 `json:"partitionIndex"`
	BatchIndex     int32 `json:"batchIndex,omitempty"`
}

func toMessageIDJSON(id protocol.MessageID) messageIDJSON {
	m := messageIDJSON{LedgerID: id.LedgerID, EntryID: id.EntryID, PartitionIndex: id.Partition}
	if id.BatchIndex >= 0 {
		m.BatchIndex = id.BatchIndex
	}
	return m
}

// refTopics resolves a request's topic and its live topics (the partitions
// of a partitioned topic as a whole).
func (a *admin) refTopics(r *http.Request) (topicRef, []broker.ServedTopic, error) {
	ref, err := a.refOf(r)
	if err != nil {
		return ref, nil, err
	}
	ts, err := a.topics(r.Context(), ref)
	return ref, ts, err
}

// singleTopic returns the one live topic of a request; partitioned topics as
// a whole answer 405 with what.
func (a *admin) singleTopic(r *http.Request, what string) (broker.ServedTopic, error) {
	ref, err := a.refOf(r)
	if err != nil {
		return nil, err
	}
	if ref.partitioned() {
		return nil, fmt.Errorf("%w: %s is not allowed on partitioned topic %s: use its partitions", errAdminMethodNotAllowed, what, ref.name)
	}
	ts, err := a.topics(r.Context(), ref)
	if err != nil {
		return nil, err
	}
	return ts[0], nil
}

func (a *admin) lastMessageID(r *http.Request) (any, error) {
	t, err := a.singleTopic(r, "lastMessageId")
	if err != nil {
		return nil, err
	}
	id, err := t.LastMessageID(r.Context())
	if err != nil {
		return nil, err
	}
	return toMessageIDJSON(id), nil
}

// terminate fences the log: every later append fails (producers get
// TopicTerminatedError), new producers are refused, and consumers are sent
// REACHED_END_OF_TOPIC once they have read everything (broker/end_of_topic.go).
func (a *admin) terminate(r *http.Request) (any, error) {
	t, err := a.singleTopic(r, "terminate")
	if err == nil {
		err = t.Terminate(r.Context())
	}
	if err != nil {
		return nil, err
	}
	id, err := t.LastMessageID(r.Context())
	if err != nil {
		return nil, err
	}
	return toMessageIDJSON(id), nil
}

// unload stops serving the topic (every partition of a partitioned one)
// where it is served, gracefully: appends in flight are answered, cursors
// persisted, the ownership released; its clients reconnect and the next
// lookup places it again — on destinationBroker (a member id) when given.
func (a *admin) unload(r *http.Request) (any, error) {
	ref, err := a.refOf(r)
	if err != nil {
		return nil, err
	}
	dest := r.URL.Query().Get("destinationBroker")
	units := []string{ref.name.String()}
	if ref.partitioned() {
		units = broker.StreamUnits(ref.md)
	}
	var errs []error
	for _, u := range units {
		if r.Header.Get(broker.ForwardedHeader) != "" {
			errs = append(errs, a.node.UnloadLocal(r.Context(), u, dest))
		} else {
			errs = append(errs, a.node.UnloadUnit(r.Context(), u, dest))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return nil, nil
}

// logOfLedger opens the log of ref with id ledger (one of its partitions)
// and returns its Pulsar partition index (-1: not partitioned).
func (a *admin) logOfLedger(ctx context.Context, ref topicRef, ledger int64) (lakestream.Log, int32, error) {
	id, first, n := broker.FullStreamID(ref.name), 0, 1
	switch {
	case ref.partitioned():
		id, n = ref.name.StreamID(), ref.md.Partitioning.NumPartitions
	case ref.partition >= 0:
		id, first = ref.name.StreamID(), ref.partition
	}
	for i := first; i < first+n; i++ {
		log, err := a.cat.OpenLog(ctx, id, i)
		if err != nil {
			return nil, 0, err
		}
		if int64(log.ID()) == ledger {
			if ref.md.Partitioning.NumPartitions == 0 {
				return log, -1, nil
			}
			return log, int32(i), nil
		}
	}
	return nil, 0, fmt.Errorf("%w: ledger %d is not a log of %s", errAdminNotFound, ledger, ref.name)
}

// getEntry answers the raw entry {ledger}:{entry} the way Pulsar's
// GET …/ledger/{l}/entry/{e} does: the message payload (the whole batch
// payload for a batch, still compressed if it was) as the body, metadata as
// X-Pulsar-* headers.
func (a *admin) getEntry(r *http.Request) (any, error) {
	ctx := r.Context()
	ledger, lerr := strconv.ParseInt(r.PathValue("ledger"), 10, 64)
	entry, eerr := strconv.ParseInt(r.PathValue("entry"), 10, 64)
	if lerr != nil || eerr != nil {
		return nil, fmt.Errorf("%w: ledger and entry ids must be integers", errAdminBadRequest)
	}
	ref, err := a.refOf(r)
	if err != nil {
		return nil, err
	}
	// A read of storage: any node serves it, no ownership needed.
	log, partition, err := a.logOfLedger(ctx, ref, ledger)
	if err != nil {
		return nil, err
	}
	e, err := log.ReadEntry(ctx, entry)
	if err == nil && e.Offset != entry {
		err = fmt.Errorf("%w: no entry starts at offset %d (entry %d holds it)", errAdminNotFound, entry, e.Offset)
	}
	if err != nil {
		return nil, err
	}
	return entryPayload(ledger, partition, e)
}

// isoMillis formats Unix ms as ISO 8601 in UTC with milliseconds.
func isoMillis(ms uint64) string {
	return time.UnixMilli(int64(ms)).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// entryPayload is one stored entry answered as Pulsar's admin API does (the
// payload, its metadata in X-Pulsar-* headers): what pulsar-admin's
// get-message-by-id and peek-messages read.
func entryPayload(ledger int64, partition int32, e lakestream.Entry) (any, error) {
	entry := e.Offset
	meta, payload, err := protocol.SplitEntry(e.Payload)
	var md *pb.MessageMetadata
	if err == nil {
		md, err = protocol.ParseMetadata(meta)
	}
	if err != nil {
		return nil, fmt.Errorf("stored entry %d:%d is not a Pulsar message: %w", ledger, entry, err)
	}
	h := http.Header{}
	h.Set("Content-Type", "application/octet-stream")
	h.Set("X-Pulsar-Message-ID", fmt.Sprintf("%d:%d:%d", ledger, entry, partition))
	h.Set("X-Pulsar-producer-name", md.GetProducerName())
	h.Set("X-Pulsar-sequence-id", strconv.FormatUint(md.GetSequenceId(), 10))
	// Times as Pulsar's DateFormatter writes them (ISO 8601 with an
	// offset): the Java admin client parses them so.
	h.Set("X-Pulsar-publish-time", isoMillis(md.GetPublishTime()))
	if md.GetEventTime() > 0 {
		h.Set("X-Pulsar-event-time", isoMillis(md.GetEventTime()))
	}
	if k := md.GetPartitionKey(); k != "" {
		h.Set("X-Pulsar-partition-key", k)
	}
	props := map[string]string{}
	for _, kv := range md.GetProperties() {
		h.Set("X-Pulsar-PROPERTY-"+kv.GetKey(), kv.GetValue())
		props[kv.GetKey()] = kv.GetValue()
	}
	if len(props) > 0 { // PIP-279: one JSON header, keys keep their case
		b, _ := json.Marshal(props)
		h.Set("X-Pulsar-Property", string(b))
	}
	if md.NumMessagesInBatch != nil {
		h.Set("X-Pulsar-num-batch-message", strconv.Itoa(int(md.GetNumMessagesInBatch())))
		h.Set("X-Pulsar-batch-size", strconv.Itoa(len(payload)))
	}
	if md.Compression != nil {
		h.Set("X-Pulsar-compression", md.GetCompression().String())
		h.Set("X-Pulsar-uncompressed-size", strconv.Itoa(int(md.GetUncompressedSize())))
	}
	return octets{header: h, body: payload}, nil
}
