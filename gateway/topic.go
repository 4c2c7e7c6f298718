package gateway

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// clientTopicName parses a topic name a client sent: broker.ParseTopicName, and
// the tenant must not be the reserved one (adminHiddenTenant: the tenant
// records and compacted logs), which no client may look up, create,
// produce to or subscribe to (broker.ErrNotAllowed).
func clientTopicName(name string) (broker.TopicName, error) {
	tn, err := broker.ParseTopicName(name)
	if err != nil {
		return tn, err
	}
	if tn.Tenant == adminHiddenTenant {
		return tn, fmt.Errorf("%w: %s: tenant %s is reserved for lakegate's own bookkeeping", broker.ErrNotAllowed, name, adminHiddenTenant)
	}
	return tn, nil
}

// partRef is what a topic name resolves to in the catalog, without loading
// or owning anything.
type partRef struct {
	// name is the canonical name: a "-partition-N" name that is not a
	// partition of a partitioned stream has Partition -1.
	name   broker.TopicName
	stream lakestream.StreamIdentifier
	// index is the log's index in its stream (0 for a non-partitioned
	// topic); partition is the Pulsar partition (-1 for a non-partitioned
	// topic).
	index     int
	partition int32
}

// unit is the name ownership is taken under: the canonical topic name.
func (r partRef) unit() string { return r.name.String() }

// resolveName resolves a topic name to its stream and log. A
// "-partition-N" name is a partition of a partitioned stream if one exists
// under the base name; otherwise the full name is a non-partitioned topic,
// auto-created (when allowed) with create.
func (s *Server) resolveName(ctx context.Context, name string, create bool) (partRef, error) {
	tn, err := broker.ParseTopicName(name)
	if err != nil {
		return partRef{}, err
	}
	if tn.NonPersistent {
		// Callers that may meet a non-persistent topic handle it first.
		return partRef{}, fmt.Errorf("%w: %s is non-persistent: it has no stream", broker.ErrNotAllowed, tn)
	}
	if tn.Partition < 0 {
		md, err := s.cfg.Catalog.LoadStream(ctx, tn.StreamID())
		if err == nil && md.Partitioning.NumPartitions > 0 {
			return partRef{}, fmt.Errorf("%w: %s is partitioned: use its partitions (%s%s0...)", broker.ErrNotAllowed, tn, tn, broker.PartitionSuffix)
		}
	} else {
		md, err := s.cfg.Catalog.LoadStream(ctx, tn.StreamID())
		switch {
		case err == nil && md.Partitioning.NumPartitions > 0:
			if tn.Partition >= md.Partitioning.NumPartitions {
				return partRef{}, fmt.Errorf("%w: %s: stream has %d partitions", lakestream.ErrNoSuchStream, tn, md.Partitioning.NumPartitions)
			}
			return partRef{name: tn, stream: tn.StreamID(), index: tn.Partition, partition: int32(tn.Partition)}, nil
		case err != nil && !errors.Is(err, lakestream.ErrNoSuchStream):
			return partRef{}, err
		}
		tn.Partition = -1 // a non-partitioned topic whose name looks like a partition
	}
	ref := partRef{name: tn, stream: broker.FullStreamID(tn), partition: -1}
	_, err = s.cfg.Catalog.LoadStream(ctx, ref.stream)
	if errors.Is(err, lakestream.ErrNoSuchStream) && !errors.Is(err, lakestream.ErrStreamDeleted) && create && s.autoCreate() {
		_, err = s.cfg.Catalog.CreateStream(ctx, ref.stream, lakestream.StreamConfig{}, lakestream.Partitioning{}, lakestream.SchemaConfig{Type: lakestream.SchemaNone}, nil, nil)
		if errors.Is(err, lakestream.ErrAlreadyExists) {
			err = nil
		}
	}
	if err != nil {
		return partRef{}, err
	}
	return ref, nil
}

// topic is one topic-partition (or non-partitioned topic) this node owns
// and serves: the partition actor (producers, deduplication, access modes,
// epochs, appends), the subscription actors and the end of a terminated
// topic. It lives from the first use after this node took ownership until
// it is unloaded: handed over, released by an admin unload, or lost.
//
// Lock order: Server.mu before topic.mu.
type topic struct {
	srv       *Server
	name      broker.TopicName // canonical full name (with partition suffix if any)
	stream    lakestream.StreamIdentifier
	log       lakestream.Log
	partition int32 // -1 for a non-partitioned topic
	// owner is this node's ownership of the topic (nil without a cluster
	// membership: a node on its own serves every topic).
	owner lakestream.Ownership
	part  *actors.PartitionActor
	// end: the end offset of a terminated topic and the consumers told
	// when they reach it (end_of_topic.go).
	end topicEnd
	// closing is set when the unload begins: new requests for the topic
	// are refused (the client looks it up again); unloaded is closed when
	// it is done.
	closing  atomic.Bool
	unloaded chan struct{}
	// compaction: the compacted view and the compactions run here
	// (compaction.go).
	compaction compaction
	// lim: the topic's limits, rate buckets and consumer counts (limits.go).
	lim topicLimitState

	mu struct {
		sync.Mutex
		// producers are the producers attached through this node, by
		// their partition actor id (stats and metrics; the rules are the
		// partition actor's).
		producers map[uint64]*producer
		subs      map[string]*actors.SubscriptionActor
	}
}

// guardOpts are the cursor options of writes only the owner may make.
func (t *topic) guardOpts() []lakestream.CursorOption {
	if t.owner == nil {
		return nil
	}
	return []lakestream.CursorOption{lakestream.WithGuard(t.owner)}
}

// serveTopic returns the topic for a name, loading it — and taking its
// ownership first, when this node is a cluster member — if it is not
// loaded. A topic owned by another member fails with broker.ErrServiceNotReady
// (the client looks it up again and is sent to the owner).
func (s *Server) serveTopic(ctx context.Context, name string, create bool) (*topic, error) {
	if s.closed() {
		return nil, broker.ErrServiceNotReady
	}
	ref, err := s.resolveName(ctx, name, create)
	if err != nil {
		return nil, err
	}
	if t, err := s.loadedTopic(ref.unit()); t != nil || err != nil {
		return t, err
	}
	var owner lakestream.Ownership
	if m := s.cfg.Membership; m != nil {
		owner, err = m.Acquire(ctx, ref.unit())
		var owned *lakestream.OwnedError
		if errors.As(err, &owned) {
			return nil, fmt.Errorf("%w: %s is served by %s", broker.ErrServiceNotReady, ref.unit(), owned.Owner.ID)
		}
		if err != nil {
			return nil, err
		}
	}
	// One load of the stream gives both the log and the metadata.
	st, err := s.cfg.Catalog.Stream(ctx, ref.stream)
	if err != nil {
		return nil, err
	}
	log, err := st.Log(ctx, ref.index)
	if err != nil {
		return nil, err
	}
	dedup, err := s.brk.DedupEnabled(ctx, st.Metadata()) // admin_dedup.go
	if err != nil {
		return nil, err
	}
	t := &topic{srv: s, name: ref.name, stream: ref.stream, log: log, partition: ref.partition, owner: owner, unloaded: make(chan struct{})}
	t.mu.producers = map[uint64]*producer{}
	t.mu.subs = map[string]*actors.SubscriptionActor{}
	lim, err := s.brk.LimitsOf(ctx, st.Metadata()) // limits.go
	if err != nil {
		return nil, err
	}
	t.applyLimits(lim)
	lp, err := actors.LoadPartition(ctx, log, dedup, t.guardOpts()...)
	if err != nil {
		return nil, err
	}
	var end int64
	if lp.State.Terminated {
		if end, err = log.NextOffset(ctx); err != nil {
			lp.Close(ctx)
			return nil, err
		}
	}
	s.mu.Lock()
	if old := s.mu.topics[ref.unit()]; old != nil || s.mu.closed {
		s.mu.Unlock()
		lp.Close(ctx) // lost a race to load the topic
		if old == nil {
			return nil, broker.ErrServiceNotReady
		}
		return s.loadedTopic(ref.unit())
	}
	t.part = actors.StartPartition(s.rt, actors.PartitionOptions{
		Name:   ref.unit(),
		Log:    log,
		Guard:  owner,
		State:  lp,
		Config: actors.PartitionConfig{Dedup: dedup},
		OnLost: func(err error) { s.unloadTopic(t, false, "") },
		Logger: s.cfg.Logger,
	})
	s.mu.topics[ref.unit()] = t
	s.mu.Unlock()
	if lp.State.Terminated {
		t.markTerminated(end)
	}
	if owner != nil {
		go func() {
			select {
			case <-owner.Lost():
				if !t.closing.Load() { // not a release by the unload itself
					s.cfg.Logger.Warn("lost the ownership of a topic: unloading it", "topic", ref.unit())
					s.unloadTopic(t, false, "")
				}
			case <-t.unloaded:
			}
		}()
	}
	return t, nil
}

// loadedTopic returns the loaded topic of a unit, nil if none, or
// broker.ErrServiceNotReady while it is being unloaded.
func (s *Server) loadedTopic(unit string) (*topic, error) {
	s.mu.Lock()
	t := s.mu.topics[unit]
	s.mu.Unlock()
	if t == nil {
		return nil, nil
	}
	if t.closing.Load() {
		return nil, fmt.Errorf("%w: %s is being unloaded", broker.ErrServiceNotReady, unit)
	}
	return t, nil
}

// unloadTopic stops serving t. Graceful (a hand-over or an admin unload):
// appends in flight complete and are answered, cursors and the
// deduplication state are persisted, the ownership is released, and the
// producers and consumers are told to reconnect — to assignedURL when it
// is set. Not graceful (the ownership was lost): clients are told at once;
// nothing more is written. Returns once t is unloaded; concurrent calls
// wait for the first.
func (s *Server) unloadTopic(t *topic, graceful bool, assignedURL string) {
	if !t.closing.CompareAndSwap(false, true) {
		<-t.unloaded
		return
	}
	defer close(t.unloaded)
	reason := "lost"
	if graceful {
		reason = "handover"
	}
	s.metrics.unloads.WithLabelValues(reason).Inc()
	t.part.Unload(graceful, assignedURL)
	t.mu.Lock()
	subs := slices.Collect(maps.Values(t.mu.subs))
	clear(t.mu.subs)
	t.mu.Unlock()
	for _, sub := range subs {
		// Persists the cursor (refused, harmlessly, once the ownership is
		// lost) and stops dispatching.
		if err := sub.Close(); err != nil && graceful && !errors.Is(err, actors.ErrSubscriptionClosed) {
			s.cfg.Logger.Warn("unloading a topic: persisting a cursor failed", "topic", t.name.String(), "err", err)
		}
	}
	for _, c := range t.endWatchers("") {
		c.disconnect(assignedURL)
	}
	if graceful && t.owner != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := t.owner.Release(ctx); err != nil {
			s.cfg.Logger.Warn("unloading a topic: releasing its ownership failed (it expires with the session)", "topic", t.name.String(), "err", err)
		}
		cancel()
	}
	s.mu.Lock()
	if s.mu.topics[t.name.String()] == t {
		delete(s.mu.topics, t.name.String())
	}
	s.mu.Unlock()
}

// loadedTopics returns the loaded topics (any order).
func (s *Server) loadedTopics() []*topic {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Values(s.mu.topics))
}

// partitions returns the partition count of a topic name's stream: 0 for a
// non-partitioned topic or a partition; with create, a missing topic is
// auto-created non-partitioned (when allowed).
func (s *Server) partitions(ctx context.Context, name string, create bool) (int, error) {
	tn, err := broker.ParseTopicName(name)
	if err != nil {
		return 0, err
	}
	if tn.NonPersistent {
		return 0, nil // never partitioned (nonpersistent.go)
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
	md, err := s.cfg.Catalog.LoadStream(ctx, broker.FullStreamID(tn))
	if err == nil {
		return md.Partitioning.NumPartitions, nil
	}
	if errors.Is(err, lakestream.ErrNoSuchStream) && create && s.autoCreate() {
		_, err := s.resolveName(ctx, name, true)
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
	if s.srv.authzOn() {
		if err := s.authorize(func(role string) error { return s.srv.checkNamespaceLookup(ctx, role, c.GetNamespace()) }); err != nil {
			s.srv.metrics.authFailures.WithLabelValues("unauthorized").Inc()
			s.sendError(c.GetRequestId(), err)
			return
		}
	}
	var topics []string
	if c.GetMode() != pb.CommandGetTopicsOfNamespace_NON_PERSISTENT {
		var err error
		if topics, err = s.srv.topicsOfNamespace(ctx, c.GetNamespace(), false); err != nil {
			s.sendError(c.GetRequestId(), err)
			return
		}
	}
	if c.GetMode() != pb.CommandGetTopicsOfNamespace_PERSISTENT {
		// The non-persistent topics served by this node.
		topics = append(topics, s.srv.npTopicsOf(c.GetNamespace())...)
	}
	filtered := false
	if p := c.GetTopicsPattern(); p != "" {
		p = strings.TrimPrefix(strings.TrimPrefix(p, "non-persistent://"), "persistent://")
		if re, err := regexp.Compile("^(?:" + p + ")$"); err == nil {
			filtered = true
			topics = slices.DeleteFunc(topics, func(name string) bool {
				tn, err := broker.ParseTopicName(name)
				return err != nil || !re.MatchString(tn.Tenant+"/"+tn.Namespace+"/"+tn.Base().Local)
			})
		}
	}
	if topics == nil {
		topics = []string{}
	}
	s.send(protocol.GetTopicsOfNamespaceResponse(c.GetRequestId(), topics, filtered, ""))
}

// topicsOfNamespace lists the topic names of a namespace "tenant/ns",
// sorted; nil for an unknown namespace. Partitioned topics are listed as
// their partitions, or (partitioned) only partitioned topics are listed,
// by their base names.
func (s *Server) topicsOfNamespace(ctx context.Context, namespace string, partitioned bool) ([]string, error) {
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
		n := md.Partitioning.NumPartitions
		switch {
		case partitioned && n > 0:
			out = append(out, base)
		case partitioned:
		case n > 0:
			for i := range n {
				out = append(out, base+broker.PartitionSuffix+strconv.Itoa(i))
			}
		default:
			out = append(out, base)
		}
	}
	slices.Sort(out)
	return out, nil
}
