package kafka

// Kafka transactions (docs/kafka.md, "Transactions"; issue #30) on the
// transaction coordinator the Pulsar gateway uses (txn.Coordinator): a
// Kafka transaction is one coordinator transaction, its batches are staged
// into the transaction's staging set as a Pulsar client's transactional
// messages are, and the coordinator commits or discards them.
//
// A transactional.id's state is one record in the metadata store
// (txn.Coordinator.LoadProducer, SaveProducer; the JSON of producerRecord),
// changed by compare-and-put only, by the node serving transaction
// coordinator hash(transactional.id) mod Coordinators() — its Kafka
// coordinator — and deleted by compare-and-delete by that node once
// unused for Config.TransactionalIDExpiration (txn_expiry.go). The partition owners read it (cached) to judge a
// transactional Produce; the group coordinators to judge a
// TxnOffsetCommit.
//
// The offsets a transaction commits are pending acknowledgements of the
// coordinator (SaveAcks under the partition and the group, in the Pulsar
// format broker/txn_acks.go reads, a cumulative acknowledgement), applied
// to the group's cursors when the transaction commits (Await), dropped
// when it aborts; a node that did not see the outcome settles them before
// it answers an OffsetFetch of the partition.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/txn"
)

// Bounds of Kafka transactions (docs/kafka.md, "Limits").
const (
	// maxTransactionalIDBytes bounds a transactional.id.
	maxTransactionalIDBytes = 1024
	// maxTxnProducers bounds the transactional.id records a node caches;
	// a new id past it starts the cache over (txnProducers.entry: the
	// records are read back from the store).
	maxTxnProducers = 10_000
	// maxTxnGroups bounds the groups one transaction commits offsets of.
	maxTxnGroups = 100
	// maxTxnAwaits bounds the (transaction, group) pairs whose outcome a
	// node waits for to apply their offsets; beyond, OffsetFetch settles
	// them.
	maxTxnAwaits = 100_000
)

// producerRecord is a transactional.id's record (JSON, docs/kafka.md).
type producerRecord struct {
	PID       int64 `json:"pid"`
	Epoch     int16 `json:"epoch"`
	TimeoutMs int64 `json:"timeoutMs"`
	// Txn is the transaction open (nil: none); Partitions the Pulsar
	// partitions it produces to, Groups the groups it commits offsets of.
	Txn        *txn.ID  `json:"txn,omitempty"`
	Partitions []string `json:"partitions,omitempty"`
	Groups     []string `json:"groups,omitempty"`
	// Last is the transaction EndTxn ended last, LastCommit its outcome
	// (a retried EndTxn is answered with it).
	Last       *txn.ID `json:"last,omitempty"`
	LastCommit bool    `json:"lastCommit,omitempty"`
	// Owner is the role that first initialised the id ("" without
	// authentication): only it, or a superuser, may use the id.
	Owner string `json:"owner,omitempty"`
	// UsedMs is when the record was last written (Unix ms; every save
	// sets it): the id expires TransactionalIDExpiration after it, with
	// no transaction open (txn_expiry.go). 0 in a record written before
	// the field existed: a sweep sets it to the sweep's time.
	UsedMs int64 `json:"usedMs,omitempty"`
}

func encodeProducer(r producerRecord) []byte {
	b, _ := json.Marshal(r) // plain fields: cannot fail
	return b
}

func decodeProducer(b []byte) (producerRecord, error) {
	var r producerRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return producerRecord{}, fmt.Errorf("kafka: corrupt transactional producer record: %w", err)
	}
	return r, nil
}

// errFenced: a request of an older epoch of the transactional.id (a
// zombie). Answered PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH by the
// versions before KIP-588's (fencedCode).
var errFenced = kerr.ProducerFenced

// checkEpoch judges a request's producer id and epoch against the record.
func checkEpoch(rec producerRecord, pid int64, epoch int16) error {
	switch {
	case pid != rec.PID:
		return kerr.InvalidProducerIDMapping
	case epoch < rec.Epoch:
		return errFenced
	case epoch > rec.Epoch:
		return kerr.InvalidProducerEpoch
	}
	return nil
}

// bump is the record after InitProducerId: the next epoch (a new producer
// id when the epoch would overflow, newPID), no transaction open.
func bump(rec producerRecord, exists bool, timeoutMs int64, newPID func() int64) producerRecord {
	next := producerRecord{PID: rec.PID, Epoch: rec.Epoch + 1, TimeoutMs: timeoutMs, Last: rec.Last, LastCommit: rec.LastCommit, Owner: rec.Owner}
	if !exists || rec.Epoch >= math.MaxInt16-1 {
		next.PID, next.Epoch = newPID(), 0
	}
	return next
}

// checkReinit judges InitProducerId's producer id and epoch (KIP-360:
// -1 for a new producer; a producer recovering names its current ones).
func checkReinit(rec producerRecord, exists bool, pid int64, epoch int16) error {
	if pid < 0 && epoch < 0 {
		return nil
	}
	if !exists || pid != rec.PID {
		return kerr.InvalidProducerIDMapping
	}
	if epoch != rec.Epoch {
		return errFenced
	}
	return nil
}

// fencedCode is the code of err in a request of version v, PRODUCER_FENCED
// answered from version fencedFrom on.
func fencedCode(err error, v, fencedFrom int16) int16 {
	if errors.Is(err, errFenced) && v < fencedFrom {
		return kerr.InvalidProducerEpoch.Code
	}
	return txnErrCode(err)
}

// txnErrCode maps the coordinator's errors (and the broker layer's).
func txnErrCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errTxnOff):
		return kerr.TransactionalIDAuthorizationFailed.Code
	case errors.Is(err, txn.ErrNotCoordinator):
		return kerr.NotCoordinator.Code
	case errors.Is(err, txn.ErrNotOwner):
		return kerr.TransactionalIDAuthorizationFailed.Code
	case errors.Is(err, txn.ErrTooMany):
		return kerr.PolicyViolation.Code
	case errors.Is(err, txn.ErrInvalidStatus), errors.Is(err, txn.ErrNotFound):
		return kerr.InvalidTxnState.Code
	case errors.Is(err, errConflict):
		return kerr.ConcurrentTransactions.Code
	}
	return errCode(err)
}

// errTxnOff: transactions.enabled is off on this node.
var errTxnOff = errors.New("kafka: transactions are off (transactions.enabled)")

// errConflict: the record changed under the request (another node
// believed it coordinated the id): the client retries.
var errConflict = errors.New("kafka: the transactional.id's record changed meanwhile")

// txnCoordinatorOf is the coordinator serving a transactional.id.
func txnCoordinatorOf(tid string, coordinators int) uint64 {
	h := fnv.New32a()
	h.Write([]byte(tid))
	return uint64(h.Sum32()) % uint64(max(coordinators, 1))
}

// txnProducers caches transactional.id records, by id.
type txnProducers struct {
	mu struct {
		sync.Mutex
		m map[string]*txnProducer
	}
}

// txnProducer is one transactional.id on this node. mu serializes the
// requests of the id here: it is held across one request's calls of the
// coordinator and the store (a transactional Produce waits while the
// coordinator changes the id on this node), and taken before
// txnProducers.mu and the other leaves (kafka/doc.go).
type txnProducer struct {
	mu     sync.Mutex
	loaded bool
	rec    producerRecord
	rev    int64
	// usable is the transaction checked open (Produce).
	usable *txn.ID
}

// entry returns the cached entry of tid, created empty when absent.
func (tp *txnProducers) entry(tid string) *txnProducer {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	e := tp.mu.m[tid]
	if e == nil {
		if tp.mu.m == nil || len(tp.mu.m) >= maxTxnProducers {
			tp.mu.m = map[string]*txnProducer{} // the ids come back from the store
		}
		e = &txnProducer{}
		tp.mu.m[tid] = e
	}
	return e
}

// txnTC returns the coordinator; errTxnOff when transactions are off.
func (s *Server) txnTC() (txn.Coordinator, error) {
	tc := s.cfg.Broker.Txn()
	if tc == nil {
		return nil, errTxnOff
	}
	return tc, nil
}

// validTransactionalID checks a transactional.id's form.
func validTransactionalID(tid string) error {
	if tid == "" || len(tid) > maxTransactionalIDBytes {
		return fmt.Errorf("%w: a transactional.id of %d bytes (1 to %d)", kerr.InvalidRequest, len(tid), maxTransactionalIDBytes)
	}
	return nil
}

// coordinateTxn locks tid's entry on its coordinator and loads its record
// fresh: NOT_COORDINATOR when another member serves it, txn.ErrNotOwner
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) when the id belongs to a role
// other than role. The caller unlocks e.mu.
func (s *Server) coordinateTxn(ctx context.Context, tid, role string) (txn.Coordinator, *txnProducer, bool, error) {
	tc, err := s.txnTC()
	if err != nil {
		return nil, nil, false, err
	}
	if err := validTransactionalID(tid); err != nil {
		return nil, nil, false, err
	}
	if err := tc.Serve(ctx, txnCoordinatorOf(tid, tc.Coordinators())); err != nil {
		return nil, nil, false, err
	}
	e := s.txns.entry(tid)
	e.mu.Lock()
	exists, err := e.load(ctx, tc, tid)
	if err == nil {
		b := s.cfg.Broker
		err = checkIDOwner(e.rec, exists, tid, role, !b.AuthzOn() || b.IsSuperUser(role))
	}
	if err != nil {
		e.mu.Unlock()
		return nil, nil, false, err
	}
	return tc, e, exists, nil
}

// checkIDOwner judges role's use of a transactional.id: the role that
// first initialised it (rec.Owner), or a superuser (super; everyone when
// authorization is off).
func checkIDOwner(rec producerRecord, exists bool, tid, role string, super bool) error {
	if !exists || rec.Owner == "" || rec.Owner == role || super {
		return nil
	}
	return fmt.Errorf("%w: transactional.id %q was initialised by another role", txn.ErrNotOwner, tid)
}

// load reads the record from the store (e.mu held).
func (e *txnProducer) load(ctx context.Context, tc txn.Coordinator, tid string) (bool, error) {
	v, rev, err := tc.LoadProducer(ctx, tid)
	if err != nil {
		return false, err
	}
	e.rec, e.rev, e.loaded, e.usable = producerRecord{}, rev, true, nil
	if rev == 0 {
		return false, nil
	}
	if e.rec, err = decodeProducer(v); err != nil {
		return false, err
	}
	return true, nil
}

// save writes rec at the revision read (e.mu held); errConflict when it
// changed meanwhile (reloaded).
func (e *txnProducer) save(ctx context.Context, tc txn.Coordinator, tid string, rec producerRecord) error {
	rec.UsedMs = time.Now().UnixMilli()
	ok, rev, err := tc.SaveProducer(ctx, tid, encodeProducer(rec), e.rev)
	if err != nil {
		e.loaded = false
		return err
	}
	if !ok {
		e.loaded = false
		return errConflict
	}
	e.rec, e.rev = rec, rev
	return nil
}

// endOpen ends rec's open transaction (e.mu held): commit or abort,
// already ended as asked counting as done. It reports the transaction's
// outcome: false also when the coordinator aborted it (a timeout).
func (s *Server) endOpen(ctx context.Context, tc txn.Coordinator, id txn.ID, commit bool, role string) (bool, error) {
	err := tc.End(ctx, id, commit, role)
	if err == nil {
		return commit, nil
	}
	if !errors.Is(err, txn.ErrInvalidStatus) && !errors.Is(err, txn.ErrNotFound) {
		return false, err
	}
	rec, serr := tc.Status(ctx, id)
	switch {
	case errors.Is(serr, txn.ErrNotFound):
		return false, nil // ended long ago, or never written to: nothing commits
	case serr != nil:
		return false, serr
	case rec.State == txn.Committed:
		return true, nil
	case rec.State == txn.Aborted:
		return false, nil
	}
	return false, err
}

func handleInitProducerTxn(c *conn, r *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) {
	s := c.srv
	tid := *r.TransactionalID
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	if r.TransactionTimeoutMillis <= 0 {
		resp.ErrorCode = kerr.InvalidTransactionTimeout.Code
		return
	}
	tc, e, exists, err := s.coordinateTxn(ctx, tid, c.role())
	if err != nil {
		resp.ErrorCode = fencedCode(err, r.Version, 4)
		return
	}
	defer e.mu.Unlock()
	if err := checkReinit(e.rec, exists, r.ProducerID, r.ProducerEpoch); err != nil {
		resp.ErrorCode = fencedCode(err, r.Version, 4)
		return
	}
	if e.rec.Txn != nil {
		// The previous producer's transaction is aborted: its zombie
		// cannot commit it, and the new producer starts clean.
		err := tc.Abort(ctx, *e.rec.Txn, "fenced by a new producer of its transactional.id")
		if err != nil && !errors.Is(err, txn.ErrInvalidStatus) && !errors.Is(err, txn.ErrNotFound) {
			resp.ErrorCode = txnErrCode(err)
			return
		}
	}
	next := bump(e.rec, exists, int64(r.TransactionTimeoutMillis), s.nextProducerID)
	if next.Owner == "" {
		next.Owner = c.role() // the first role to initialise it owns it
	}
	if err := e.save(ctx, tc, tid, next); err != nil {
		resp.ErrorCode = txnErrCode(err)
		return
	}
	resp.ProducerID, resp.ProducerEpoch = next.PID, next.Epoch
}

// openTxn opens the record's transaction when none is (the first
// addition), with the producer's timeout (e.mu held).
func (s *Server) openTxn(ctx context.Context, tc txn.Coordinator, e *txnProducer, tid, role string) (producerRecord, error) {
	rec := e.rec
	if rec.Txn != nil {
		return rec, nil
	}
	id, err := tc.Open(ctx, txnCoordinatorOf(tid, tc.Coordinators()), time.Duration(rec.TimeoutMs)*time.Millisecond, role)
	if err != nil {
		return rec, err
	}
	rec.Txn, rec.Partitions, rec.Groups = &id, nil, nil
	return rec, nil
}

// addFailed is an addition to a transaction the coordinator refused as
// ended: it aborted it (a timeout). The producer is fenced, as Kafka's
// coordinator bumps the epoch of a timed-out transaction.
func (s *Server) addFailed(ctx context.Context, tc txn.Coordinator, e *txnProducer, tid string, err error) error {
	if !errors.Is(err, txn.ErrInvalidStatus) && !errors.Is(err, txn.ErrNotFound) {
		return err
	}
	next := e.rec
	next.Epoch++
	next.Txn, next.Partitions, next.Groups = nil, nil, nil
	if serr := e.save(ctx, tc, tid, next); serr != nil {
		return serr
	}
	return fmt.Errorf("%w: the transaction ended (timed out)", errFenced)
}

func handleAddPartitionsToTxn(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.AddPartitionsToTxnRequest)
	s := c.srv
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	codes := map[string]map[int32]int16{}
	all := func(code int16) {
		for _, rt := range r.Topics {
			codes[rt.Topic] = map[int32]int16{}
			for _, p := range rt.Partitions {
				codes[rt.Topic][p] = code
			}
		}
	}
	defer func() {
		for _, rt := range r.Topics {
			st := kmsg.NewAddPartitionsToTxnResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p, codes[rt.Topic][p]
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		a.set(resp)
	}()
	tc, e, _, err := s.coordinateTxn(ctx, r.TransactionalID, c.role())
	if err != nil {
		all(fencedCode(err, r.Version, 2))
		return
	}
	defer e.mu.Unlock()
	if err := checkEpoch(e.rec, r.ProducerID, r.ProducerEpoch); err != nil {
		all(fencedCode(err, r.Version, 2))
		return
	}
	// Every partition is checked first: one refused fails the request,
	// the others answered OPERATION_NOT_ATTEMPTED, as Kafka.
	var names []string
	failed := false
	for _, rt := range r.Topics {
		codes[rt.Topic] = map[int32]int16{}
		err := c.authorize(ctx, rt.Topic, broker.ActionProduce)
		var info topicInfo
		if err == nil {
			info, err = s.topicInfo(ctx, rt.Topic, false)
		}
		for _, p := range rt.Partitions {
			code := errCode(err)
			if err == nil && (p < 0 || int(p) >= info.partitions) {
				code = kerr.UnknownTopicOrPartition.Code
			}
			codes[rt.Topic][p] = code
			failed = failed || code != 0
			if code == 0 {
				names = append(names, s.partitionName(rt.Topic, p, info.partitioned))
			}
		}
	}
	if failed {
		for t, ps := range codes {
			for p, code := range ps {
				if code == 0 {
					codes[t][p] = kerr.OperationNotAttempted.Code
				}
			}
		}
		return
	}
	rec, err := s.openTxn(ctx, tc, e, r.TransactionalID, c.role())
	if err == nil {
		err = tc.AddPartitions(ctx, *rec.Txn, names, c.role())
		if e.rec.Txn != nil {
			err = s.addFailed(ctx, tc, e, r.TransactionalID, err)
		} else if err != nil {
			// The transaction this request opened is in no record: abort
			// it, or it would hold a place among the coordinator's open
			// transactions until its timeout (a refused addition: over
			// the coordinator's partitions per transaction).
			if aerr := tc.Abort(ctx, *rec.Txn, "its first AddPartitionsToTxn was refused"); aerr != nil {
				s.log.Debug("kafka: aborting a transaction no record holds", "txn", *rec.Txn, "err", aerr)
			}
		}
	}
	if err == nil {
		for _, n := range names {
			if !slices.Contains(rec.Partitions, n) {
				rec.Partitions = append(rec.Partitions, n)
			}
		}
		err = e.save(ctx, tc, r.TransactionalID, rec)
	}
	all(fencedCode(err, r.Version, 2))
}

func handleAddOffsetsToTxn(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.AddOffsetsToTxnRequest)
	s := c.srv
	resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	resp.ErrorCode = fencedCode(s.addOffsetsToTxn(ctx, c, r), r.Version, 2)
	a.set(resp)
}

func (s *Server) addOffsetsToTxn(ctx context.Context, c *conn, r *kmsg.AddOffsetsToTxnRequest) error {
	if r.Group == "" {
		return kerr.InvalidGroupID
	}
	tc, e, _, err := s.coordinateTxn(ctx, r.TransactionalID, c.role())
	if err != nil {
		return err
	}
	defer e.mu.Unlock()
	if err := checkEpoch(e.rec, r.ProducerID, r.ProducerEpoch); err != nil {
		return err
	}
	if e.rec.Txn != nil && slices.Contains(e.rec.Groups, r.Group) {
		return nil
	}
	rec, err := s.openTxn(ctx, tc, e, r.TransactionalID, c.role())
	if err != nil {
		return err
	}
	if e.rec.Txn != nil {
		// Still open? (The coordinator may have aborted it: a timeout.)
		if err := tc.Usable(ctx, *rec.Txn, c.role()); err != nil {
			return s.addFailed(ctx, tc, e, r.TransactionalID, err)
		}
	}
	if len(rec.Groups) >= maxTxnGroups {
		return fmt.Errorf("%w: %d groups in one transaction", txn.ErrTooMany, maxTxnGroups)
	}
	rec.Groups = append(rec.Groups, r.Group)
	return e.save(ctx, tc, r.TransactionalID, rec)
}

func handleEndTxn(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.EndTxnRequest)
	s := c.srv
	resp := r.ResponseKind().(*kmsg.EndTxnResponse)
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	resp.ErrorCode = fencedCode(s.endTxn(ctx, c, r), r.Version, 2)
	a.set(resp)
}

func (s *Server) endTxn(ctx context.Context, c *conn, r *kmsg.EndTxnRequest) error {
	tc, e, _, err := s.coordinateTxn(ctx, r.TransactionalID, c.role())
	if err != nil {
		return err
	}
	defer e.mu.Unlock()
	if err := checkEpoch(e.rec, r.ProducerID, r.ProducerEpoch); err != nil {
		return err
	}
	if e.rec.Txn == nil {
		if e.rec.Last != nil && e.rec.LastCommit == r.Commit {
			return nil // a retry of the EndTxn that ended it
		}
		return fmt.Errorf("%w: no transaction is open", kerr.InvalidTxnState)
	}
	id := *e.rec.Txn
	committed, err := s.endOpen(ctx, tc, id, r.Commit, c.role())
	if err != nil {
		return err
	}
	if r.Commit && !committed {
		// The coordinator aborted it first (its timeout): the producer is
		// fenced, as Kafka's coordinator bumps a timed-out producer.
		return s.addFailed(ctx, tc, e, r.TransactionalID, txn.ErrInvalidStatus)
	}
	next := e.rec
	next.Txn, next.Partitions, next.Groups, next.Last, next.LastCommit = nil, nil, nil, &id, committed
	return e.save(ctx, tc, r.TransactionalID, next)
}

// txnState is the transaction a transactional request of (pid, epoch)
// writes in, from tid's record (cached; read again when the cache does
// not allow the request). allowed says whether the record lets the
// request through (its partition or group added); role must own tid
// (checkIDOwner).
func (s *Server) txnState(ctx context.Context, tc txn.Coordinator, tid, role string, pid int64, epoch int16, allowed func(producerRecord) bool) (txn.ID, error) {
	if err := validTransactionalID(tid); err != nil {
		return txn.ID{}, err
	}
	e := s.txns.entry(tid)
	e.mu.Lock()
	defer e.mu.Unlock()
	for try := 0; ; try++ {
		if !e.loaded || try > 0 {
			if _, err := e.load(ctx, tc, tid); err != nil {
				return txn.ID{}, err
			}
		}
		b := s.cfg.Broker
		err := checkIDOwner(e.rec, true, tid, role, !b.AuthzOn() || b.IsSuperUser(role))
		if err == nil {
			err = checkEpoch(e.rec, pid, epoch)
		}
		if err == nil && (e.rec.Txn == nil || !allowed(e.rec)) {
			err = fmt.Errorf("%w: not added to the transaction", kerr.InvalidTxnState)
		}
		if err == nil {
			id := *e.rec.Txn
			if e.usable == nil || *e.usable != id {
				st, err := tc.Status(ctx, id)
				if errors.Is(err, txn.ErrNotFound) || err == nil && st.State != txn.Open {
					// Ended (a timeout): Kafka answers a timed-out
					// producer's produce INVALID_PRODUCER_EPOCH.
					return txn.ID{}, fmt.Errorf("%w: transaction %v ended", kerr.InvalidProducerEpoch, id)
				}
				if err != nil {
					return txn.ID{}, err
				}
				e.usable = &id
				// Forget the record when the transaction ends, so that the
				// producer's next transaction is read from the store (a
				// request arriving before the news finds the set ended
				// and is resent: producePartition).
				if err := tc.Await(ctx, id, func(bool) { go s.forgetTxnState(tid) }); err != nil {
					s.log.Debug("kafka: awaiting a transaction's end", "txn", id, "err", err)
				}
			}
			return id, nil
		}
		if try > 0 {
			return txn.ID{}, err
		}
	}
}

// forgetTxnState drops tid's cached record (a staged send found its
// transaction ended: the next request reads the record again).
func (s *Server) forgetTxnState(tid string) {
	s.txns.mu.Lock()
	delete(s.txns.mu.m, tid)
	s.txns.mu.Unlock()
}

// txnStage judges a transactional Produce of one partition — the batches'
// producer id and epoch those of tid, the partition added to its open
// transaction — and returns the staging set the batches go to.
func (s *Server) txnStage(ctx context.Context, tid, role, topic string, rp *kmsg.ProduceRequestTopicPartition) (string, error) {
	tc, err := s.txnTC()
	if err != nil {
		return "", err
	}
	batches, err := SplitBatches(rp.Records)
	if err != nil || len(batches) == 0 {
		return "", fmt.Errorf("%w: no record batch", ErrMalformed)
	}
	pid, epoch, _ := batchProducer(batches[0])
	for _, b := range batches[1:] {
		if p, e, _ := batchProducer(b); p != pid || e != epoch {
			return "", fmt.Errorf("%w: batches of two producers in one transactional produce", kerr.InvalidRecord)
		}
	}
	info, err := s.topicInfo(ctx, topic, false)
	if err != nil {
		return "", err
	}
	if rp.Partition < 0 || int(rp.Partition) >= info.partitions {
		return "", kerr.UnknownTopicOrPartition
	}
	name := s.partitionName(topic, rp.Partition, info.partitioned)
	id, err := s.txnState(ctx, tc, tid, role, pid, epoch, func(rec producerRecord) bool {
		return slices.Contains(rec.Partitions, name)
	})
	if err != nil {
		return "", err
	}
	return id.Set(), nil
}
