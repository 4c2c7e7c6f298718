package txn

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ID names a transaction as Pulsar does: Most is its coordinator, Least
// its sequence there.
type ID struct{ Most, Least uint64 }

func (id ID) String() string { return fmt.Sprintf("(%d,%d)", id.Most, id.Least) }

// Set is the engine staging set holding the transaction's messages.
func (id ID) Set() string { return fmt.Sprintf("txn-%d-%d", id.Most, id.Least) }

// State is where a transaction stands.
type State string

// States. Committing and aborting are decisions not yet carried out: the
// coordinator serving the transaction finishes them.
const (
	Open       State = "open"
	Committing State = "committing"
	Aborting   State = "aborting"
	Committed  State = "committed"
	Aborted    State = "aborted"
)

// Ended reports whether the state is an outcome.
func (s State) Ended() bool { return s == Committed || s == Aborted }

// Sub names a subscription of a topic (a partition's full name).
type Sub struct {
	Topic string `json:"topic"`
	Sub   string `json:"sub"`
}

// Record is a transaction as the metadata store keeps it.
type Record struct {
	State State `json:"state"`
	// Owner is the role that opened it ("" without authentication): only
	// it (or a superuser) may use it.
	Owner         string   `json:"owner,omitempty"`
	OpenMs        int64    `json:"openMs"`
	TimeoutMs     int64    `json:"timeoutMs"`
	Partitions    []string `json:"partitions,omitempty"`
	Subscriptions []Sub    `json:"subscriptions,omitempty"`
	EndMs         int64    `json:"endMs,omitempty"`
	// Reason says why an abort that the client did not ask for happened
	// (timeout, a set too large to commit).
	Reason string `json:"reason,omitempty"`
}

// Unit is the ownership unit of coordinator tc.
func Unit(tc uint64) string { return "txn-coordinator:" + strconv.FormatUint(tc, 10) }

// IsUnit reports whether an ownership unit is a coordinator's (not a
// topic: it is not handed over as one).
func IsUnit(unit string) bool { return strings.HasPrefix(unit, "txn-coordinator:") }

// Errors of the coordinator. The front doors map them to their protocol's
// codes (Pulsar: TransactionNotFound, InvalidTxnStatus,
// TransactionCoordinatorNotFound, NotAllowedError).
var (
	// ErrNotFound: no such transaction (never opened, or ended long ago).
	ErrNotFound = errors.New("txn: transaction not found")
	// ErrInvalidStatus: the request does not fit where the transaction
	// stands (adding to an ended one, committing an aborted one).
	ErrInvalidStatus = errors.New("txn: invalid transaction status")
	// ErrNotCoordinator: this node does not serve the coordinator (another
	// member owns it, or there is no such coordinator).
	ErrNotCoordinator = errors.New("txn: transaction coordinator not found")
	// ErrTooMany: a bound of docs/transactions.md "Limits" was reached.
	ErrTooMany = errors.New("txn: too many")
	// ErrNotOwner: the transaction belongs to another role.
	ErrNotOwner = errors.New("txn: the transaction belongs to another role")
)

// Coordinator is the transaction coordinator as the front doors and the
// broker use it (txn/tc implements it on the metadata store). Roles are
// the clients' authenticated roles ("" without authentication).
type Coordinator interface {
	// Coordinators is how many coordinators there are.
	Coordinators() int
	// Serve makes this node serve coordinator tc (ErrNotCoordinator if
	// another member owns it).
	Serve(ctx context.Context, tc uint64) error
	// Open opens a transaction at coordinator tc (timeout 0: the default).
	Open(ctx context.Context, tc uint64, timeout time.Duration, role string) (ID, error)
	// AddPartitions and AddSubscriptions register what the transaction
	// writes and acknowledges.
	AddPartitions(ctx context.Context, id ID, partitions []string, role string) error
	AddSubscriptions(ctx context.Context, id ID, subs []Sub, role string) error
	// TrackSubscription is AddSubscriptions of one subscription from any
	// node (the subscription's owner, for an acknowledgement in the
	// transaction).
	TrackSubscription(ctx context.Context, id ID, sub Sub, role string) error
	// End commits or aborts the transaction; it returns once the outcome
	// is decided and carried out.
	End(ctx context.Context, id ID, commit bool, role string) error
	// Status reads the transaction's record.
	Status(ctx context.Context, id ID) (Record, error)
	// Usable reports whether role may still add to the transaction (it
	// is open and the role's).
	Usable(ctx context.Context, id ID, role string) error
	// List returns coordinator tc's transactions; Serving the coordinators
	// this node serves; Abort aborts a transaction from any node.
	List(ctx context.Context, tc uint64) (map[ID]Record, error)
	Serving() []uint64
	Abort(ctx context.Context, id ID, reason string) error
	// SaveAcks, DeleteAcks, LoadAcks keep a subscription's pending
	// acknowledgements of a transaction; Await calls fn once the
	// transaction has ended, with its outcome.
	SaveAcks(ctx context.Context, topic, sub string, id ID, value []byte) error
	DeleteAcks(ctx context.Context, topic, sub string, id ID) error
	LoadAcks(ctx context.Context, topic, sub string) (map[ID][]byte, error)
	Await(ctx context.Context, id ID, fn func(committed bool)) error
	// LoadProducer and SaveProducer keep the record of a Kafka
	// transactional.id (its producer id, epoch and current transaction;
	// the kafka package owns the value's format, docs/kafka.md): rev is
	// the record's revision, 0 when there is none. SaveProducer writes
	// value iff the record is still at rev and reports whether it did,
	// with the new revision.
	LoadProducer(ctx context.Context, transactionalID string) (value []byte, rev int64, err error)
	SaveProducer(ctx context.Context, transactionalID string, value []byte, rev int64) (ok bool, newRev int64, err error)
	// ListProducers returns a page of the transactional.id records: those
	// after transactional.id after ("" from the first), in the store's
	// order of their keys, at most limit of them (limit ≤ 0 or above
	// MaxProducersPage: MaxProducersPage). A page shorter than the limit
	// is the last. The slice and its values are the caller's.
	ListProducers(ctx context.Context, after string, limit int) ([]Producer, error)
	// DeleteProducer deletes a transactional.id's record iff it is still
	// at rev (> 0) and reports whether it did (false: it changed or went
	// meanwhile). The kafka package's expiry (docs/kafka.md).
	DeleteProducer(ctx context.Context, transactionalID string, rev int64) (ok bool, err error)
}

// MaxProducersPage bounds a page of ListProducers.
const MaxProducersPage = 1000

// Producer is one transactional.id record as ListProducers returns it:
// Rev its revision (> 0), for SaveProducer and DeleteProducer.
type Producer struct {
	TransactionalID string
	Value           []byte
	Rev             int64
}
