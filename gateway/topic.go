package gateway

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// TopicName is a parsed Pulsar topic name.
//
//	persistent://tenant/ns/topic            → stream tenant/ns/topic, Partition -1
//	persistent://tenant/ns/topic-partition-3 → partition 3 of that stream (when
//	                                           the stream is partitioned)
//	topic                                   → persistent://public/default/topic
type TopicName struct {
	Tenant, Namespace, Local string
	// Partition is the "-partition-N" suffix of Local, or -1.
	Partition int
}

const partitionSuffix = "-partition-"

// ParseTopicName parses a Pulsar topic name. Only persistent topics exist.
func ParseTopicName(s string) (TopicName, error) {
	rest, ok := strings.CutPrefix(s, "persistent://")
	if !ok {
		if strings.HasPrefix(s, "non-persistent://") {
			// NotAllowedError, not InvalidTopicName: the C++ and Python
			// clients retry InvalidTopicName until their operation timeout.
			return TopicName{}, fmt.Errorf("%w: %q: non-persistent topics are not supported by lakegate (every topic is persistent)", ErrNotAllowed, s)
		}
		if strings.Contains(s, "://") {
			return TopicName{}, fmt.Errorf("%w: %q: only persistent:// topics are supported", ErrInvalidTopicName, s)
		}
		if !strings.Contains(s, "/") {
			rest = "public/default/" + s
		} else {
			rest = s
		}
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return TopicName{}, fmt.Errorf("%w: %q", ErrInvalidTopicName, s)
	}
	t := TopicName{Tenant: parts[0], Namespace: parts[1], Local: parts[2], Partition: -1}
	if i := strings.LastIndex(t.Local, partitionSuffix); i > 0 {
		if n, err := strconv.Atoi(t.Local[i+len(partitionSuffix):]); err == nil && n >= 0 {
			t.Partition = n
		}
	}
	return t, nil
}

// String is the full name.
func (t TopicName) String() string {
	return "persistent://" + t.Tenant + "/" + t.Namespace + "/" + t.Local
}

// Base is the name without the partition suffix.
func (t TopicName) Base() TopicName {
	if t.Partition < 0 {
		return t
	}
	b := t
	b.Local = t.Local[:strings.LastIndex(t.Local, partitionSuffix)]
	b.Partition = -1
	return b
}

// StreamID is the lakestream stream of the (base) topic.
func (t TopicName) StreamID() lakestream.StreamIdentifier {
	return lakestream.StreamIdentifier{Namespace: t.Tenant + "/" + t.Namespace, Name: t.Base().Local}
}

// topic is one log served by this node: a non-partitioned topic or one
// partition. It holds the producers and subscriptions attached here.
//
// Lock order: Server.mu before topic.mu.
type topic struct {
	name      TopicName // full name (with partition suffix if any)
	stream    lakestream.StreamIdentifier
	log       lakestream.Log
	partition int32       // -1 for a non-partitioned topic
	dedup     *dedupState // nil unless deduplication is on (dedup.go)
	// terminated: the log is known to be fenced (admin terminate through
	// this gateway, or an append that failed with ErrFenced); new
	// producers are refused with TopicTerminatedError. A log fenced by
	// another node is learnt at the first append.
	terminated atomic.Bool
	// end: the end offset of a terminated topic and the consumers told
	// when they reach it (end_of_topic.go).
	end topicEnd

	mu struct {
		sync.Mutex
		producers map[string]*producer // by name
		// exclusive is the producer holding exclusive access (modes
		// Exclusive, WaitForExclusive once ready, ExclusiveWithFencing).
		exclusive *producer
		// waiting are the WaitForExclusive producers not ready yet, in
		// arrival order; the first is promoted when producers empties.
		waiting []*producer
		// epoch is the topic epoch: incremented on each exclusive
		// acquisition, echoed in PRODUCER_SUCCESS. Held in memory only
		// (not persisted across restarts). Valid when hasEpoch.
		epoch        uint64
		hasEpoch     bool
		nextProducer uint64
		subs         map[string]*actors.SubscriptionActor
	}
}

// resolveTopic returns the topic for a name, opening (and, when allowed,
// creating) its stream. A "-partition-N" name is a partition of a
// partitioned stream if one exists under the base name; otherwise the full
// name is a non-partitioned topic.
func (s *Server) resolveTopic(ctx context.Context, name string, create bool) (*topic, error) {
	tn, err := ParseTopicName(name)
	if err != nil {
		return nil, err
	}
	key := tn.String()
	s.mu.Lock()
	if t := s.mu.topics[key]; t != nil {
		s.mu.Unlock()
		return t, nil
	}
	s.mu.Unlock()

	id, partition := tn.StreamID(), 0
	logPartition := int32(-1)
	if tn.Partition < 0 {
		md, err := s.cfg.Catalog.LoadStream(ctx, id)
		if err == nil && md.Partitioning.NumPartitions > 0 {
			return nil, fmt.Errorf("%w: %s is partitioned: use its partitions (%s%s0...)", ErrNotAllowed, tn, tn, partitionSuffix)
		}
	} else {
		md, err := s.cfg.Catalog.LoadStream(ctx, tn.StreamID())
		if err == nil && md.Partitioning.NumPartitions > 0 {
			if tn.Partition >= md.Partitioning.NumPartitions {
				return nil, fmt.Errorf("%w: %s: stream has %d partitions", lakestream.ErrNoSuchStream, tn, md.Partitioning.NumPartitions)
			}
			partition, logPartition = tn.Partition, int32(tn.Partition)
		} else if err != nil && !errors.Is(err, lakestream.ErrNoSuchStream) {
			return nil, err
		} else {
			tn.Partition = -1 // a non-partitioned topic whose name looks like a partition
			id = lakestream.StreamIdentifier{Namespace: tn.Tenant + "/" + tn.Namespace, Name: tn.Local}
		}
	}
	log, err := s.cfg.Catalog.OpenLog(ctx, id, partition)
	if errors.Is(err, lakestream.ErrNoSuchStream) && !errors.Is(err, lakestream.ErrStreamDeleted) && create && s.autoCreate() {
		_, cerr := s.cfg.Catalog.CreateStream(ctx, id, lakestream.StreamConfig{}, lakestream.Partitioning{}, lakestream.SchemaConfig{Type: lakestream.SchemaNone}, nil, nil)
		if cerr != nil && !errors.Is(cerr, lakestream.ErrAlreadyExists) {
			return nil, cerr
		}
		log, err = s.cfg.Catalog.OpenLog(ctx, id, partition)
	}
	if err != nil {
		return nil, err
	}
	t := &topic{name: tn, stream: id, log: log, partition: logPartition}
	t.mu.producers = map[string]*producer{}
	t.mu.subs = map[string]*actors.SubscriptionActor{}
	if md, err := s.cfg.Catalog.LoadStream(ctx, id); err != nil {
		return nil, err
	} else if on, err := s.dedupEnabled(ctx, md); err != nil { // admin_dedup.go
		return nil, err
	} else if on {
		if t.dedup, err = loadDedup(ctx, t, s.cfg.Logger); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.mu.topics[key]; old != nil {
		if t.dedup != nil {
			t.dedup.cursor.Close(ctx) // lost a race to load the topic
		}
		return old, nil
	}
	s.mu.topics[key] = t
	return t, nil
}

// partitions returns the partition count of a topic name's stream: 0 for a
// non-partitioned topic or a partition; with create, a missing topic is
// auto-created non-partitioned (when AutoCreateTopics).
func (s *Server) partitions(ctx context.Context, name string, create bool) (int, error) {
	tn, err := ParseTopicName(name)
	if err != nil {
		return 0, err
	}
	if tn.Partition >= 0 {
		md, err := s.cfg.Catalog.LoadStream(ctx, tn.StreamID())
		if err == nil && md.Partitioning.NumPartitions > 0 {
			return 0, nil // a partition of a partitioned topic
		}
		if err != nil && !errors.Is(err, lakestream.ErrNoSuchStream) {
			return 0, err
		}
	}
	id := lakestream.StreamIdentifier{Namespace: tn.Tenant + "/" + tn.Namespace, Name: tn.Local}
	md, err := s.cfg.Catalog.LoadStream(ctx, id)
	if err == nil {
		return md.Partitioning.NumPartitions, nil
	}
	if errors.Is(err, lakestream.ErrNoSuchStream) && create && s.autoCreate() {
		_, err := s.resolveTopic(ctx, name, true)
		return 0, err
	}
	return 0, err
}

// handleGetTopicsOfNamespace lists the persistent topics of a namespace as
// Pulsar does: a partitioned topic as its partitions ("t-partition-i"), a
// non-partitioned one by its name. An unknown (or invalid) namespace and
// mode NON_PERSISTENT give an empty list. A topics_pattern (matched
// against names without the "persistent://" scheme and partition suffix,
// the whole name, as Pulsar's TopicList.filterTopics) filters the list;
// pulsar-client-go v0.19.0 sends none and filters itself.
func (s *session) handleGetTopicsOfNamespace(c *pb.CommandGetTopicsOfNamespace) {
	ctx, cancel := s.ctx()
	defer cancel()
	var topics []string
	if c.GetMode() != pb.CommandGetTopicsOfNamespace_NON_PERSISTENT {
		var err error
		if topics, err = s.srv.topicsOfNamespace(ctx, c.GetNamespace()); err != nil {
			s.sendError(c.GetRequestId(), err)
			return
		}
	}
	filtered := false
	if p := c.GetTopicsPattern(); p != "" {
		p = strings.TrimPrefix(p, "persistent://")
		if re, err := regexp.Compile("^(?:" + p + ")$"); err == nil {
			filtered = true
			topics = slices.DeleteFunc(topics, func(name string) bool {
				tn, err := ParseTopicName(name)
				return err != nil || !re.MatchString(strings.TrimPrefix(tn.Base().String(), "persistent://"))
			})
		}
	}
	if topics == nil {
		topics = []string{}
	}
	s.send(protocol.GetTopicsOfNamespaceResponse(c.GetRequestId(), topics, filtered, ""))
}

// topicsOfNamespace lists the topic names (partitions expanded) of a
// namespace "tenant/ns", sorted; nil for an unknown namespace.
func (s *Server) topicsOfNamespace(ctx context.Context, namespace string) ([]string, error) {
	if strings.HasPrefix(namespace, "__lakegate/") {
		return nil, nil // the gateway's own bookkeeping (admin tenants), not topics
	}
	ids, err := s.cfg.Catalog.ListStreams(ctx, namespace)
	if errors.Is(err, lakestream.ErrNoSuchNamespace) || errors.Is(err, lakestream.ErrInvalidArgument) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range ids {
		md, err := s.cfg.Catalog.LoadStream(ctx, id)
		if errors.Is(err, lakestream.ErrNoSuchStream) {
			continue // dropped meanwhile
		}
		if err != nil {
			return nil, err
		}
		if md.State == lakestream.StreamDeleting {
			continue
		}
		base := "persistent://" + id.Namespace + "/" + id.Name
		if n := md.Partitioning.NumPartitions; n > 0 {
			for i := range n {
				out = append(out, base+partitionSuffix+strconv.Itoa(i))
			}
			continue
		}
		out = append(out, base)
	}
	slices.Sort(out)
	return out, nil
}
