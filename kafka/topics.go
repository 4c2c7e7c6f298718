package kafka

// Topics and partitions as Kafka sees them (docs/kafka.md, "Offsets,
// topics and partitions"): names, the partitions served here (a cache of
// the shared registry's topics), Metadata, CreateTopics, FindCoordinator,
// DescribeCluster.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/txn"
)

// requestTimeout bounds the storage calls of one request.
const requestTimeout = 30 * time.Second

// validTopic reports whether a Kafka topic name is legal (Kafka's rule:
// 1-249 of [a-zA-Z0-9._-], not "." or "..").
func validTopic(name string) bool {
	if name == "" || len(name) > 249 || name == "." || name == ".." {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// pulsarName is the full Pulsar name of a Kafka topic.
func (s *Server) pulsarName(topic string) string {
	return "persistent://" + s.cfg.Namespace + "/" + topic
}

// partitionName is the Pulsar name of a Kafka topic's partition: its
// "-partition-N" name, or the topic's own for a non-partitioned topic
// (partition 0).
func (s *Server) partitionName(topic string, partition int32, partitioned bool) string {
	if !partitioned {
		return s.pulsarName(topic)
	}
	return s.pulsarName(topic) + broker.PartitionSuffix + strconv.Itoa(int(partition))
}

// topicInfo is what Kafka requests need of a topic: its partition count
// (Pulsar non-partitioned: 1) and whether it is partitioned.
type topicInfo struct {
	partitions  int
	partitioned bool
	id          [16]byte
}

// topicInfo reads a topic's layout from the catalog (create: auto-create
// it as the namespace's policy says).
func (s *Server) topicInfo(ctx context.Context, topic string, create bool) (topicInfo, error) {
	if !validTopic(topic) {
		return topicInfo{}, kerr.InvalidTopicException
	}
	n, err := s.cfg.Broker.Partitions(ctx, s.pulsarName(topic), false)
	if errors.Is(err, lakestream.ErrNoSuchStream) && !errors.Is(err, lakestream.ErrStreamDeleted) && create && s.cfg.AutoCreate {
		// As the namespace's auto topic creation says, with Kafka's
		// default retention (configs.go).
		if err = s.cfg.Broker.AutoCreateTopic(ctx, s.pulsarName(topic), kafkaTopicProps(defaultRetention())); err == nil {
			s.keepDedup(ctx, topic, 0)
			n, err = s.cfg.Broker.Partitions(ctx, s.pulsarName(topic), false)
		}
	}
	if err != nil {
		if errors.Is(err, lakestream.ErrNoSuchStream) {
			return topicInfo{}, kerr.UnknownTopicOrPartition
		}
		return topicInfo{}, err
	}
	tn, _ := broker.ParseTopicName(s.pulsarName(topic))
	md, err := s.cfg.Catalog.LoadStream(ctx, broker.FullStreamID(tn))
	if errors.Is(err, lakestream.ErrNoSuchStream) {
		return topicInfo{}, kerr.UnknownTopicOrPartition
	}
	if err != nil {
		return topicInfo{}, err
	}
	ti := topicInfo{partitions: max(n, 1), partitioned: n > 0, id: topicID(md)}
	return ti, nil
}

// keepDedup gives the partitions from index `from` on of a topic the
// listener just created (or grew) a deduplication cursor, so that the partitions keep a deduplication state
// from their first load: an idempotent producer's first batch is judged at
// once, not after a reload (produce.go, enableDedup). A failure only logs:
// the first idempotent batch then makes the cursor.
func (s *Server) keepDedup(ctx context.Context, topic string, from int) {
	tn, _ := broker.ParseTopicName(s.pulsarName(topic))
	st, err := s.cfg.Catalog.Stream(ctx, broker.FullStreamID(tn))
	if err == nil {
		for i := from; i < st.Metadata().Partitioning.LogCount(); i++ {
			var log lakestream.Log
			if log, err = st.Log(ctx, i); err == nil {
				err = actors.EnsureDedupCursor(ctx, log)
			}
			if err != nil {
				break
			}
		}
	}
	if err != nil {
		s.log.Warn("kafka: a new topic's deduplication cursors", "topic", topic, "err", err)
	}
}

// topicID is a topic's Kafka id: a hash of its stream and creation time,
// so a topic deleted and created again gets a new one.
func topicID(md lakestream.StreamMetadata) [16]byte {
	h := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d", md.ID.String(), md.CreatedAtMs))
	var id [16]byte
	copy(id[:], h[:16])
	id[6] = id[6]&0x0f | 0x40 // a version-4-shaped UUID
	id[8] = id[8]&0x3f | 0x80
	return id
}

// servedCache holds the partitions this node served to Kafka requests, so
// a produce or fetch does not resolve its topic in the catalog each time;
// an entry is dropped once its topic is being unloaded.
type servedCache struct {
	mu struct {
		sync.Mutex
		m map[servedKey]servedEntry
	}
}

type servedKey struct {
	topic     string
	partition int32
}

type servedEntry struct {
	t    broker.ServedPartition
	info topicInfo
}

// maxServedCache bounds the cache; beyond it, it starts over.
const maxServedCache = 100_000

// partition returns a Kafka topic's partition, served by this node:
// kerr.NotLeaderForPartition when another member owns it,
// kerr.UnknownTopicOrPartition when it does not exist.
func (s *Server) partition(ctx context.Context, topic string, p int32, create bool) (broker.ServedPartition, error) {
	k := servedKey{topic, p}
	s.served.mu.Lock()
	e, ok := s.served.mu.m[k]
	s.served.mu.Unlock()
	if ok && !e.t.Closing() {
		return e.t, nil
	}
	info, err := s.topicInfo(ctx, topic, create)
	if err != nil {
		return nil, err
	}
	if p < 0 || int(p) >= info.partitions {
		return nil, kerr.UnknownTopicOrPartition
	}
	t, err := s.cfg.Serve(ctx, s.partitionName(topic, p, info.partitioned), false)
	if err != nil {
		if errors.Is(err, broker.ErrServiceNotReady) {
			return nil, kerr.NotLeaderForPartition
		}
		return nil, err
	}
	s.served.mu.Lock()
	if s.served.mu.m == nil || len(s.served.mu.m) >= maxServedCache {
		s.served.mu.m = map[servedKey]servedEntry{}
	}
	s.served.mu.m[k] = servedEntry{t: t, info: info}
	s.served.mu.Unlock()
	return t, nil
}

// forget drops a topic's partitions from the cache (deleted, grown).
func (s *Server) forget(topic string) {
	s.served.mu.Lock()
	defer s.served.mu.Unlock()
	for k := range s.served.mu.m {
		if k.topic == topic {
			delete(s.served.mu.m, k)
		}
	}
}

// kafkaBroker is a member as a Kafka broker: its id and advertised Kafka
// address (members without a Kafka listener are not Kafka brokers).
type kafkaBroker struct {
	id   int32
	host string
	port int32
}

// kafkaBrokers lists the members with a Kafka listener, by member id.
func (s *Server) kafkaBrokers(ctx context.Context) (map[string]kafkaBroker, error) {
	ms, err := s.cfg.Broker.Members(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]kafkaBroker{}
	for _, m := range ms {
		if b, ok := asKafkaBroker(m); ok {
			out[m.ID] = b
		}
	}
	return out, nil
}

// asKafkaBroker is a member's Kafka endpoint ("kafka": host:port).
func asKafkaBroker(m lakestream.Member) (kafkaBroker, bool) {
	hp := m.Endpoints["kafka"]
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		return kafkaBroker{}, false
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return kafkaBroker{}, false
	}
	return kafkaBroker{id: nodeID(m), host: host, port: int32(p)}, true
}

// namespaceTopics lists the Kafka topics of the namespace: its
// partitioned topics and its non-partitioned ones.
func (s *Server) namespaceTopics(ctx context.Context) ([]string, error) {
	b := s.cfg.Broker
	parted, err := b.TopicsOfNamespace(ctx, s.cfg.Namespace, true)
	if err != nil {
		return nil, err
	}
	all, err := b.TopicsOfNamespace(ctx, s.cfg.Namespace, false)
	if err != nil {
		return nil, err
	}
	prefix := "persistent://" + s.cfg.Namespace + "/"
	seen := map[string]bool{}
	var out []string
	for _, full := range append(parted, all...) {
		local := strings.TrimPrefix(full, prefix)
		if i := strings.LastIndex(local, broker.PartitionSuffix); i > 0 && slices.Contains(parted, prefix+local[:i]) {
			continue // a partition of a partitioned topic listed above
		}
		if !seen[local] && validTopic(local) {
			seen[local] = true
			out = append(out, local)
		}
	}
	slices.Sort(out)
	return out, nil
}

func handleMetadata(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.MetadataRequest)
	s := c.srv
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	brokers, err := s.kafkaBrokers(ctx)
	if err != nil {
		s.log.Warn("kafka metadata: members", "err", err)
	}
	for _, kb := range brokers {
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = kb.id, kb.host, kb.port
		resp.Brokers = append(resp.Brokers, mb)
	}
	slices.SortFunc(resp.Brokers, func(x, y kmsg.MetadataResponseBroker) int { return int(x.NodeID) - int(y.NodeID) })
	resp.ClusterID = new(string)
	*resp.ClusterID = "lakegate"
	resp.ControllerID = -1
	if self, ok := asKafkaBroker(s.cfg.Broker.Self()); ok {
		resp.ControllerID = self.id
	}
	var names []string
	if r.Topics == nil {
		if names, err = s.namespaceTopics(ctx); err != nil {
			s.log.Warn("kafka metadata: listing topics", "err", err)
		}
	} else {
		for _, t := range r.Topics {
			if t.Topic != nil {
				names = append(names, *t.Topic)
			}
		}
	}
	create := r.Topics != nil && (r.Version < 4 || r.AllowAutoTopicCreation)
	for _, name := range names {
		if err := c.authorize(ctx, name, broker.ActionLookup); err != nil {
			if r.Topics == nil {
				continue // listing: only the topics the role may see
			}
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.ErrorCode = kmsg.StringPtr(name), errCode(err)
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, s.topicMetadata(ctx, name, create && c.authorize(ctx, name, broker.ActionProduce) == nil, brokers))
	}
	a.set(resp)
}

// topicMetadata is one topic's Metadata answer: each partition's leader is
// its owner, or the member placement picks (as a Pulsar LOOKUP).
func (s *Server) topicMetadata(ctx context.Context, name string, create bool, brokers map[string]kafkaBroker) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = &name
	info, err := s.topicInfo(ctx, name, create)
	if err != nil {
		mt.ErrorCode = errCode(err)
		return mt
	}
	mt.TopicID = info.id
	for p := range int32(info.partitions) {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p
		unit := s.partitionName(name, p, info.partitioned)
		if tn, err := broker.ParseTopicName(unit); err == nil {
			unit = tn.String()
		}
		owner, err := s.cfg.Broker.OwnerOrPlacement(ctx, unit)
		kb, ok := brokers[owner.ID]
		switch {
		case err != nil:
			mp.ErrorCode, mp.Leader = kerr.LeaderNotAvailable.Code, -1
		case !ok:
			// Served by a member without a Kafka listener.
			mp.ErrorCode, mp.Leader = kerr.LeaderNotAvailable.Code, -1
		default:
			mp.Leader = kb.id
			mp.Replicas, mp.ISR = []int32{kb.id}, []int32{kb.id}
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

func handleDescribeCluster(c *conn, req kmsg.Request, a *answer) {
	s := c.srv
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.ClusterID = "lakegate"
	resp.ControllerID = -1
	if self, ok := asKafkaBroker(s.cfg.Broker.Self()); ok {
		resp.ControllerID = self.id
	}
	brokers, err := s.kafkaBrokers(ctx)
	if err != nil {
		resp.ErrorCode = errCode(err)
	}
	for _, kb := range brokers {
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port = kb.id, kb.host, kb.port
		resp.Brokers = append(resp.Brokers, b)
	}
	slices.SortFunc(resp.Brokers, func(x, y kmsg.DescribeClusterResponseBroker) int { return int(x.NodeID) - int(y.NodeID) })
	a.set(resp)
}

// maxCreatePartitions bounds a created topic's partitions.
const maxCreatePartitions = 10_000

func handleCreateTopics(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.CreateTopicsRequest)
	s := c.srv
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	admin := c.authorizeAdmin(ctx)
	for _, t := range r.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		n := int(t.NumPartitions)
		if n == -1 {
			n = 1 // the broker's default (num.partitions)
		}
		msg := ""
		switch {
		case admin != nil:
			rt.ErrorCode, msg = errCode(admin), admin.Error()
		case !validTopic(t.Topic):
			rt.ErrorCode, msg = kerr.InvalidTopicException.Code, "topic names are 1-249 of [a-zA-Z0-9._-]"
		case n < 1 || n > maxCreatePartitions:
			rt.ErrorCode, msg = kerr.InvalidPartitions.Code, fmt.Sprintf("partitions must be 1..%d", maxCreatePartitions)
		case len(t.ReplicaAssignment) > 0:
			rt.ErrorCode, msg = kerr.InvalidReplicaAssignment.Code, "lakegate places partitions itself: no replica assignment"
		case t.ReplicationFactor != -1 && t.ReplicationFactor < 1:
			rt.ErrorCode, msg = kerr.InvalidReplicationFactor.Code, "replication factor must be -1 or at least 1 (the object store keeps the copies)"
		case r.ValidateOnly:
		default:
			tn, _ := broker.ParseTopicName(s.pulsarName(t.Topic))
			ret, cerr := createConfigs(t.Configs)
			if cerr != nil {
				rt.ErrorCode, msg = errCode(cerr), cerr.Error()
				break
			}
			_, err := s.cfg.Catalog.CreateStream(ctx, broker.FullStreamID(tn), lakestream.StreamConfig{},
				lakestream.Partitioning{NumPartitions: n}, lakestream.SchemaConfig{Type: lakestream.SchemaNone}, kafkaTopicProps(ret), nil)
			switch {
			case errors.Is(err, lakestream.ErrAlreadyExists):
				rt.ErrorCode, msg = kerr.TopicAlreadyExists.Code, "topic "+t.Topic+" already exists"
			case err != nil:
				rt.ErrorCode, msg = errCode(err), err.Error()
			default:
				s.keepDedup(ctx, t.Topic, 0)
			}
			s.forget(t.Topic)
		}
		if msg != "" {
			rt.ErrorMessage = &msg
		}
		rt.NumPartitions, rt.ReplicationFactor = int32(n), 1
		rt.Configs = []kmsg.CreateTopicsResponseTopicConfig{} // never null: the Java admin reads it
		if rt.ErrorCode == 0 && !r.ValidateOnly {
			cfgs, err := s.topicConfigs(ctx, t.Topic)
			if err != nil {
				s.log.Warn("kafka create topics: reading the configs back", "topic", t.Topic, "err", err)
			}
			for _, d := range cfgs {
				cfg := kmsg.NewCreateTopicsResponseTopicConfig()
				cfg.Name, cfg.Value, cfg.ReadOnly, cfg.Source = d.Name, d.Value, d.ReadOnly, int8(d.Source)
				rt.Configs = append(rt.Configs, cfg)
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	a.set(resp)
}

// groupUnit is the ownership unit of a consumer group: its coordinator is
// the unit's owner.
func groupUnit(group string) string { return "kafka-group:" + group }

// IsGroupUnit reports whether an ownership unit is a Kafka consumer
// group's (not a topic: the gateway does not hand it over as one).
func IsGroupUnit(unit string) bool { return strings.HasPrefix(unit, "kafka-group:") }

func handleFindCoordinator(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.FindCoordinatorRequest)
	s := c.srv
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := r.CoordinatorKeys
	if r.Version < 4 {
		keys = []string{r.CoordinatorKey}
	}
	for _, key := range keys {
		rc := kmsg.NewFindCoordinatorResponseCoordinator()
		rc.Key, rc.NodeID = key, -1
		var msg string
		unit := groupUnit(key)
		switch {
		case r.CoordinatorType == 1 && s.cfg.Broker.Txn() == nil:
			rc.ErrorCode, msg = kerr.TransactionalIDAuthorizationFailed.Code, errTxnOff.Error()
		case r.CoordinatorType == 1 && validTransactionalID(key) != nil:
			rc.ErrorCode, msg = kerr.InvalidRequest.Code, validTransactionalID(key).Error()
		case r.CoordinatorType == 1:
			// The member serving the transaction coordinator of the id
			// (txn.go).
			unit = txn.Unit(txnCoordinatorOf(key, s.cfg.Broker.Txn().Coordinators()))
			fallthrough
		case r.CoordinatorType == 0:
			owner, err := s.cfg.Broker.OwnerOrPlacement(ctx, unit)
			kb, ok := asKafkaBroker(owner)
			switch {
			case err != nil:
				rc.ErrorCode, msg = kerr.CoordinatorNotAvailable.Code, err.Error()
			case !ok:
				rc.ErrorCode, msg = kerr.CoordinatorNotAvailable.Code, "the coordinator has no Kafka listener"
			default:
				rc.NodeID, rc.Host, rc.Port = kb.id, kb.host, kb.port
			}
		default:
			rc.ErrorCode, msg = kerr.InvalidRequest.Code, fmt.Sprintf("coordinator type %d", r.CoordinatorType)
		}
		if msg != "" {
			rc.ErrorMessage = &msg
		}
		resp.Coordinators = append(resp.Coordinators, rc)
	}
	if r.Version < 4 {
		rc := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = rc.ErrorCode, rc.ErrorMessage, rc.NodeID, rc.Host, rc.Port
		resp.Coordinators = nil
	}
	a.set(resp)
}

func handleDeleteTopics(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.DeleteTopicsRequest)
	s := c.srv
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
	names := r.TopicNames
	if r.Version >= 6 {
		names = names[:0]
		for _, t := range r.Topics {
			if t.Topic != nil {
				names = append(names, *t.Topic)
			}
		}
	}
	for _, name := range names {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic = kmsg.StringPtr(name)
		err := c.authorizeAdmin(ctx)
		if err == nil {
			err = s.deleteTopic(ctx, name)
		}
		rt.ErrorCode = errCode(err)
		if err != nil {
			rt.ErrorMessage = kmsg.StringPtr(err.Error())
		}
		resp.Topics = append(resp.Topics, rt)
	}
	a.set(resp)
}

// deleteTopic deletes a Kafka topic (the Pulsar topic, with its
// partitions, wherever they are served): Kafka does not wait for its
// clients to leave.
func (s *Server) deleteTopic(ctx context.Context, name string) error {
	if !validTopic(name) {
		return kerr.InvalidTopicException
	}
	tn, err := broker.ParseTopicName(s.pulsarName(name))
	if err != nil {
		return kerr.InvalidTopicException
	}
	md, err := s.cfg.Catalog.LoadStream(ctx, broker.FullStreamID(tn))
	if err != nil {
		if errors.Is(err, lakestream.ErrNoSuchStream) {
			return kerr.UnknownTopicOrPartition
		}
		return err
	}
	defer s.forget(name)
	err = s.cfg.Broker.DropTopic(ctx, md, func(ctx context.Context, unit string) error { return s.cfg.UnloadUnit(ctx, unit, "") })
	if errors.Is(err, lakestream.ErrNoSuchStream) {
		return kerr.UnknownTopicOrPartition
	}
	return err
}

func handleCreatePartitions(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.CreatePartitionsRequest)
	s := c.srv
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		err := c.authorizeAdmin(ctx)
		if err == nil {
			err = s.growTopic(ctx, t.Topic, int(t.Count), len(t.Assignment) > 0, r.ValidateOnly)
		}
		rt.ErrorCode = errCode(err)
		if err != nil {
			rt.ErrorMessage = kmsg.StringPtr(err.Error())
		}
		resp.Topics = append(resp.Topics, rt)
	}
	a.set(resp)
}

// growTopic grows a partitioned topic to n partitions. A Pulsar
// non-partitioned topic (one Kafka partition) cannot grow.
func (s *Server) growTopic(ctx context.Context, name string, n int, assigned, validateOnly bool) error {
	info, err := s.topicInfo(ctx, name, false)
	switch {
	case err != nil:
		return err
	case assigned:
		return fmt.Errorf("%w: lakegate places partitions itself: no replica assignment", kerr.InvalidReplicaAssignment)
	case !info.partitioned:
		return fmt.Errorf("%w: %s is a non-partitioned Pulsar topic: it has one partition for good", kerr.InvalidPartitions, name)
	case n <= info.partitions || n > maxCreatePartitions:
		return fmt.Errorf("%w: %s has %d partitions; a new count must be more, up to %d", kerr.InvalidPartitions, name, info.partitions, maxCreatePartitions)
	case validateOnly:
		return nil
	}
	tn, _ := broker.ParseTopicName(s.pulsarName(name))
	_, err = s.cfg.Catalog.IncreasePartitions(ctx, broker.FullStreamID(tn), n)
	s.forget(name)
	if err == nil {
		s.keepDedup(ctx, name, info.partitions)
	}
	return err
}
