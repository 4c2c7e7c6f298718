package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/lakegate/lakegate/txn"
)

// The transactional.id record reads back as written (docs/kafka.md,
// "Transactions").
func TestProducerRecordRoundTrip(t *testing.T) {
	id, last := txn.ID{Most: 7, Least: 42}, txn.ID{Most: 7, Least: 41}
	rec := producerRecord{PID: 123, Epoch: 4, TimeoutMs: 60000, Txn: &id,
		Partitions: []string{"persistent://public/default/t-partition-0"}, Groups: []string{"g"}, Last: &last, LastCommit: true, Owner: "app"}
	b := encodeProducer(rec)
	want := `{"pid":123,"epoch":4,"timeoutMs":60000,"txn":{"Most":7,"Least":42},"partitions":["persistent://public/default/t-partition-0"],"groups":["g"],"last":{"Most":7,"Least":41},"lastCommit":true,"owner":"app"}`
	if string(b) != want {
		t.Fatalf("encoded %s\nwant    %s", b, want)
	}
	got, err := decodeProducer(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.PID != rec.PID || got.Epoch != rec.Epoch || *got.Txn != id || *got.Last != last || !got.LastCommit || got.Groups[0] != "g" || got.Owner != "app" {
		t.Fatalf("decoded %+v", got)
	}
	if _, err := decodeProducer([]byte("{")); err == nil {
		t.Fatal("a corrupt record decoded")
	}
}

// The epoch rules: the current epoch passes, an older one is fenced, a
// newer one or another producer id is refused; InitProducerId bumps the
// epoch (a new id at the first and past the last epoch) and closes the
// transaction; a recovering producer (KIP-360) must name the current ids.
func TestEpochRules(t *testing.T) {
	id := txn.ID{Most: 1, Least: 2}
	rec := producerRecord{PID: 9, Epoch: 3, Txn: &id, Partitions: []string{"p"}}
	for _, tc := range []struct {
		pid   int64
		epoch int16
		want  error
	}{
		{9, 3, nil},
		{9, 2, errFenced},
		{9, 4, kerr.InvalidProducerEpoch},
		{8, 3, kerr.InvalidProducerIDMapping},
	} {
		if err := checkEpoch(rec, tc.pid, tc.epoch); !errors.Is(err, tc.want) && err != tc.want {
			t.Errorf("checkEpoch(%d, %d) = %v, want %v", tc.pid, tc.epoch, err, tc.want)
		}
	}
	pids := int64(100)
	newPID := func() int64 { pids++; return pids }
	next := bump(rec, true, 5000, newPID)
	if next.PID != 9 || next.Epoch != 4 || next.Txn != nil || next.Partitions != nil || next.TimeoutMs != 5000 {
		t.Fatalf("bump: %+v", next)
	}
	if first := bump(producerRecord{}, false, 1, newPID); first.PID != 101 || first.Epoch != 0 {
		t.Fatalf("first init: %+v", first)
	}
	if wrapped := bump(producerRecord{PID: 9, Epoch: math.MaxInt16 - 1}, true, 1, newPID); wrapped.PID != 102 || wrapped.Epoch != 0 {
		t.Fatalf("epoch overflow: %+v", wrapped)
	}
	for _, tc := range []struct {
		exists bool
		pid    int64
		epoch  int16
		want   error
	}{
		{false, -1, -1, nil},
		{true, -1, -1, nil},
		{true, 9, 3, nil},
		{true, 9, 2, errFenced},
		{true, 8, 3, kerr.InvalidProducerIDMapping},
		{false, 9, 3, kerr.InvalidProducerIDMapping},
	} {
		if err := checkReinit(rec, tc.exists, tc.pid, tc.epoch); !errors.Is(err, tc.want) && err != tc.want {
			t.Errorf("checkReinit(%v, %d, %d) = %v, want %v", tc.exists, tc.pid, tc.epoch, err, tc.want)
		}
	}
	// PRODUCER_FENCED from KIP-588's versions on; INVALID_PRODUCER_EPOCH
	// before (and always in Produce).
	if got := fencedCode(errFenced, 1, 2); got != kerr.InvalidProducerEpoch.Code {
		t.Errorf("fenced v1: %d", got)
	}
	if got := fencedCode(errFenced, 2, 2); got != kerr.ProducerFenced.Code {
		t.Errorf("fenced v2: %d", got)
	}
	for err, want := range map[error]int16{
		txn.ErrNotCoordinator: kerr.NotCoordinator.Code,
		txn.ErrNotOwner:       kerr.TransactionalIDAuthorizationFailed.Code,
		txn.ErrInvalidStatus:  kerr.InvalidTxnState.Code,
		txn.ErrTooMany:        kerr.PolicyViolation.Code,
		errConflict:           kerr.ConcurrentTransactions.Code,
		errTxnOff:             kerr.TransactionalIDAuthorizationFailed.Code,
	} {
		if got := txnErrCode(err); got != want {
			t.Errorf("txnErrCode(%v) = %d, want %d", err, got, want)
		}
	}
}

// A pending transactional offset is the Pulsar pending-ack format (a
// cumulative acknowledgement of the record before it) plus the Kafka
// commit; a Pulsar consumer's value is not taken for a Kafka one.
func TestPendingOffsetFormat(t *testing.T) {
	b := encodePending(kafkaCommit{Topic: "t", Partition: 2, Offset: 10, Metadata: "m"})
	want := `{"ranges":[[9,10]],"cumulative":true,"kafka":{"topic":"t","partition":2,"offset":10,"metadata":"m"}}`
	if string(b) != want {
		t.Fatalf("encoded %s\nwant    %s", b, want)
	}
	k, err := decodePending(b)
	if err != nil || k.Offset != 10 || k.Partition != 2 || k.Metadata != "m" {
		t.Fatalf("decoded %+v, %v", k, err)
	}
	if b := encodePending(kafkaCommit{Topic: "t", Offset: 0}); !bytes.Contains(b, []byte(`"ranges":[]`)) {
		t.Fatalf("offset 0: %s", b)
	}
	if _, err := decodePending([]byte(`{"ranges":[[0,5]],"cumulative":false}`)); !errors.Is(err, errNotKafka) {
		t.Fatalf("a Pulsar consumer's pending acks: %v", err)
	}
}

// A transactional batch is accepted in a transactional produce and its
// flag is not kept (the entry is staged instead).
func TestBatchEntryTransactional(t *testing.T) {
	b := makeBatch(t, "none", sample, 7001, 0)
	b[22] |= attrTransactional
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[crcFrom:], castagnoli))
	entry, n, err := EntryFromBatch(b, EntryOptions{MaxBytes: 1 << 20, Transactional: true})
	if err != nil || n != len(sample) {
		t.Fatalf("%d records, %v", n, err)
	}
	out, err := AppendBatch(nil, 0, entry, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if rb, got := readBatch(t, out); rb.Attributes&attrTransactional != 0 || rb.ProducerID != 7001 {
		t.Fatalf("read back with attributes %#x, producer %d", rb.Attributes, rb.ProducerID)
	} else {
		sameRecords(t, got, sample)
	}
	if txnCoordinatorOf("a", 16) != txnCoordinatorOf("a", 16) || txnCoordinatorOf("a", 1) != 0 {
		t.Fatal("txnCoordinatorOf is not a function of the id")
	}
	if validTransactionalID("") == nil || validTransactionalID(string(make([]byte, maxTransactionalIDBytes+1))) == nil || validTransactionalID("x") != nil {
		t.Fatal("transactional.id bounds")
	}
}

// The decoders of the stored values refuse what they cannot read and
// never panic.
func FuzzTxnValues(f *testing.F) {
	id := txn.ID{Most: 1, Least: 2}
	f.Add(encodeProducer(producerRecord{PID: 1, Epoch: 2, Txn: &id, Partitions: []string{"p"}}))
	f.Add(encodePending(kafkaCommit{Topic: "t", Partition: 1, Offset: 7}))
	f.Add([]byte(`{"ranges":[[0,5]],"cumulative":true}`))
	f.Add([]byte(`{"pid":`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if rec, err := decodeProducer(b); err == nil {
			if _, err := decodeProducer(encodeProducer(rec)); err != nil {
				t.Fatalf("a decoded record does not decode again: %v", err)
			}
		}
		if k, err := decodePending(b); err == nil && (k.Topic == "" || k.Offset < 0) {
			t.Fatalf("decoded an invalid pending offset %+v", k)
		}
	})
}

// A transactional.id is its first role's: another role is refused
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), a superuser is not, nor anyone
// for an id never initialised or initialised without authentication; a
// new epoch keeps the owner.
func TestTransactionalIDOwner(t *testing.T) {
	rec := producerRecord{PID: 9, Epoch: 3, Owner: "app"}
	if err := checkIDOwner(rec, true, "tid", "app", false); err != nil {
		t.Fatalf("the owner: %v", err)
	}
	err := checkIDOwner(rec, true, "tid", "intruder", false)
	if !errors.Is(err, txn.ErrNotOwner) || txnErrCode(err) != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("another role: %v (code %d)", err, txnErrCode(err))
	}
	if err := checkIDOwner(rec, true, "tid", "admin", true); err != nil {
		t.Fatalf("a superuser: %v", err)
	}
	if err := checkIDOwner(producerRecord{}, false, "tid", "intruder", false); err != nil {
		t.Fatalf("a new id: %v", err)
	}
	if err := checkIDOwner(producerRecord{PID: 1}, true, "tid", "intruder", false); err != nil {
		t.Fatalf("an id without an owner: %v", err)
	}
	if next := bump(rec, true, 1000, func() int64 { return 77 }); next.Owner != "app" {
		t.Fatalf("bumped owner %q", next.Owner)
	}
}

// Settlers of one (partition, group) take turns, and no entry outlives
// its users.
func TestSettleLock(t *testing.T) {
	var w txnAwaits
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock := w.lockSettle("p", "g")
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			runtime.Gosched()
			inside.Add(-1)
			unlock()
		}()
	}
	wg.Wait()
	if m := most.Load(); m != 1 {
		t.Fatalf("%d settlers of (p, g) at once, want 1", m)
	}
	// Another pair is not held up by a held one.
	unlock := w.lockSettle("p", "g")
	w.lockSettle("p", "h")()
	unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.mu.settling); n != 0 {
		t.Fatalf("%d settling entries left, want 0", n)
	}
}
