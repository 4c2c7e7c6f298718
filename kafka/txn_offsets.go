package kafka

// Offsets committed in a transaction (TxnOffsetCommit; docs/kafka.md,
// "Transactions"): pending acknowledgements of the transaction, saved by
// the group's coordinator in the metadata store under (partition, group)
// and applied to the group's cursor once the transaction commits — by the
// node that saved them (Await), or by whichever node answers an
// OffsetFetch of the partition first (settlePending), so a crash in
// between loses nothing; an abort drops them.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/txn"
)

// pendingOffset is the value of a pending transactional offset: the
// Pulsar pending-ack format (a cumulative acknowledgement up to the
// offset's record before, half-open ranges; none for offset 0), which a
// Pulsar subscription of the group's name restores too, and the Kafka
// commit.
type pendingOffset struct {
	Ranges     [][2]int64  `json:"ranges"`
	Cumulative bool        `json:"cumulative"`
	Kafka      kafkaCommit `json:"kafka"`
}

// kafkaCommit is one partition's commit in a transaction.
type kafkaCommit struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Metadata  string `json:"metadata,omitempty"`
}

func encodePending(k kafkaCommit) []byte {
	v := pendingOffset{Ranges: [][2]int64{}, Cumulative: true, Kafka: k}
	if k.Offset > 0 {
		v.Ranges = [][2]int64{{k.Offset - 1, k.Offset}}
	}
	b, _ := json.Marshal(v) // plain fields: cannot fail
	return b
}

func decodePending(b []byte) (kafkaCommit, error) {
	var v pendingOffset
	if err := json.Unmarshal(b, &v); err != nil {
		return kafkaCommit{}, fmt.Errorf("kafka: corrupt pending offset: %w", err)
	}
	if v.Kafka.Topic == "" || v.Kafka.Offset < 0 {
		return kafkaCommit{}, errNotKafka
	}
	return v.Kafka, nil
}

// errNotKafka: a Pulsar consumer's pending acknowledgement (left to its
// subscription).
var errNotKafka = errors.New("kafka: a pending acknowledgement of a Pulsar consumer")

// txnAwaits are the (transaction, group) pairs this node waits for, with
// the partitions (Pulsar names) of their pending offsets, and the
// (partition, group) pairs being settled now.
type txnAwaits struct {
	mu struct {
		sync.Mutex
		m map[txnGroup]map[string]struct{}
		// settling: one settler at a time per (partition, group) on this
		// node, so the awaited outcome and an OffsetFetch do not write
		// the group's cursor concurrently (the loser's write would fail
		// as a conflict); an entry lives while someone holds or waits.
		settling map[[2]string]*settleLock
	}
}

type settleLock struct {
	sync.Mutex
	users int
}

// lockSettle takes the settling lock of (name, group); the function
// returned releases it.
func (w *txnAwaits) lockSettle(name, group string) func() {
	k := [2]string{name, group}
	w.mu.Lock()
	if w.mu.settling == nil {
		w.mu.settling = map[[2]string]*settleLock{}
	}
	l := w.mu.settling[k]
	if l == nil {
		l = &settleLock{}
		w.mu.settling[k] = l
	}
	l.users++
	w.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		w.mu.Lock()
		if l.users--; l.users == 0 {
			delete(w.mu.settling, k)
		}
		w.mu.Unlock()
	}
}

type txnGroup struct {
	id    txn.ID
	group string
}

func handleTxnOffsetCommit(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.TxnOffsetCommitRequest)
	s := c.srv
	resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	id, err := s.txnOffsetsAllowed(ctx, c, r)
	for _, rt := range r.Topics {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			perr := err
			if perr == nil {
				perr = s.commitInTxn(ctx, c, id, r.Group, rt.Topic, rp.Partition, rp.Offset, rp.Metadata)
			}
			sp.ErrorCode = fencedCode(perr, r.Version, 3)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	a.set(resp)
}

// txnOffsetsAllowed checks a TxnOffsetCommit on the group's coordinator:
// the producer's epoch, the group added to its open transaction, the
// member's generation (v3+), and returns the transaction.
func (s *Server) txnOffsetsAllowed(ctx context.Context, c *conn, r *kmsg.TxnOffsetCommitRequest) (txn.ID, error) {
	tc, err := s.txnTC()
	if err != nil {
		return txn.ID{}, err
	}
	if err := s.coordinate(ctx, r.Group); err != nil {
		return txn.ID{}, err
	}
	if r.Version >= 3 && r.Generation >= 0 {
		// Judged as an OffsetCommit v8's (a group unknown: ILLEGAL_GENERATION).
		if code := s.groups.CommitAllowed(r.Group, r.MemberID, r.Generation, r.InstanceID, 8); code != 0 {
			return txn.ID{}, kerr.ErrorForCode(code)
		}
	}
	return s.txnState(ctx, tc, r.TransactionalID, c.role(), r.ProducerID, r.ProducerEpoch, func(rec producerRecord) bool {
		for _, g := range rec.Groups {
			if g == r.Group {
				return true
			}
		}
		return false
	})
}

// commitInTxn saves one partition's offset pending in transaction id and
// waits for the outcome to apply it.
func (s *Server) commitInTxn(ctx context.Context, c *conn, id txn.ID, group, topic string, p int32, offset int64, metadata *string) error {
	tc, err := s.txnTC()
	if err != nil {
		return err
	}
	if offset < 0 {
		return kerr.InvalidCommitOffsetSize
	}
	if _, err := metadataProps(metadata); err != nil {
		return err
	}
	if err := c.authorizeGroup(ctx, group, topic); err != nil {
		return err
	}
	info, err := s.topicInfo(ctx, topic, false)
	if err != nil {
		return err
	}
	if p < 0 || int(p) >= info.partitions {
		return kerr.UnknownTopicOrPartition
	}
	name := s.partitionName(topic, p, info.partitioned)
	k := kafkaCommit{Topic: topic, Partition: p, Offset: offset}
	if metadata != nil {
		k.Metadata = *metadata
	}
	// The transaction lists (name, group): the coordinator keeps its
	// record, and so its outcome, while the pending offset is saved, so
	// that a node settling it late still learns whether it committed.
	if err := tc.TrackSubscription(ctx, id, txn.Sub{Topic: name, Sub: group}, c.role()); err != nil {
		return err
	}
	if err := tc.SaveAcks(ctx, name, group, id, encodePending(k)); err != nil {
		return err
	}
	s.awaitTxnOffsets(ctx, tc, id, group, name)
	return nil
}

// awaitTxnOffsets makes this node apply or drop the pending offset of
// (name, group) once transaction id ends (beyond maxTxnAwaits pairs, the
// next OffsetFetch of the partition settles it).
func (s *Server) awaitTxnOffsets(ctx context.Context, tc txn.Coordinator, id txn.ID, group, name string) {
	k := txnGroup{id, group}
	s.awaits.mu.Lock()
	if s.awaits.mu.m == nil {
		s.awaits.mu.m = map[txnGroup]map[string]struct{}{}
	}
	names, waiting := s.awaits.mu.m[k]
	if !waiting && len(s.awaits.mu.m) >= maxTxnAwaits {
		s.awaits.mu.Unlock()
		return
	}
	if !waiting {
		names = map[string]struct{}{}
		s.awaits.mu.m[k] = names
	}
	names[name] = struct{}{}
	s.awaits.mu.Unlock()
	if waiting {
		return
	}
	err := tc.Await(ctx, id, func(committed bool) {
		s.awaits.mu.Lock()
		names := s.awaits.mu.m[k]
		delete(s.awaits.mu.m, k)
		s.awaits.mu.Unlock()
		go func() { // Await's callbacks must not block
			ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
			defer cancel()
			for name := range names {
				if err := s.settleOne(ctx, tc, id, group, name, committed); err != nil {
					s.log.Warn("kafka: applying a transaction's offsets (the next OffsetFetch settles them)", "txn", id, "group", group, "partition", name, "err", err)
				}
			}
		}()
	})
	if err != nil {
		s.awaits.mu.Lock()
		delete(s.awaits.mu.m, k)
		s.awaits.mu.Unlock()
		s.log.Warn("kafka: awaiting a transaction (the next OffsetFetch settles its offsets)", "txn", id, "err", err)
	}
}

// settleOne applies (committed) or drops the pending offset of
// transaction id on (name, group). Settlers on this node take turns; one
// on another node (the group's coordinator moved) can still race this
// one's cursor write, which then fails as a conflict: the settling is
// tried again, and finds the offset settled or applies it once more (the
// same offset: idempotent).
func (s *Server) settleOne(ctx context.Context, tc txn.Coordinator, id txn.ID, group, name string, committed bool) error {
	unlock := s.awaits.lockSettle(name, group)
	defer unlock()
	var err error
	for range settleTries {
		if err = s.settleOnce(ctx, tc, id, group, name, committed); !errors.Is(err, lakestream.ErrConflict) {
			return err
		}
	}
	return err
}

// settleTries bounds settleOne's tries after conflicting cursor writes.
const settleTries = 3

func (s *Server) settleOnce(ctx context.Context, tc txn.Coordinator, id txn.ID, group, name string, committed bool) error {
	if committed {
		saved, err := tc.LoadAcks(ctx, name, group)
		if err != nil {
			return err
		}
		v, ok := saved[id]
		if !ok {
			return nil // settled already
		}
		k, err := decodePending(v)
		if errors.Is(err, errNotKafka) {
			return nil
		}
		if err != nil {
			return err
		}
		md := k.Metadata
		if err := s.commit(ctx, group, k.Topic, k.Partition, k.Offset, &md); err != nil {
			return err
		}
	}
	return tc.DeleteAcks(ctx, name, group, id)
}

// settlePending settles the pending transactional offsets of (name,
// group) whose transactions have ended, and reports whether one is still
// pending (an open transaction's).
func (s *Server) settlePending(ctx context.Context, group, name string) (bool, error) {
	tc := s.cfg.Broker.Txn()
	if tc == nil {
		return false, nil
	}
	saved, err := tc.LoadAcks(ctx, name, group)
	if err != nil || len(saved) == 0 {
		return false, err
	}
	pending := false
	for id, v := range saved {
		if _, err := decodePending(v); err != nil {
			continue // a Pulsar consumer's, or unreadable: its subscription's
		}
		rec, err := tc.Status(ctx, id)
		switch {
		case errors.Is(err, txn.ErrNotFound):
			err = s.settleOne(ctx, tc, id, group, name, false)
		case err != nil:
		case rec.State.Ended():
			err = s.settleOne(ctx, tc, id, group, name, rec.State == txn.Committed)
		default:
			pending = true
		}
		if err != nil {
			return pending, err
		}
	}
	return pending, nil
}
