package txn

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
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

func (r Record) encode() []byte {
	b, _ := json.Marshal(r) // plain fields: cannot fail
	return b
}

func decodeRecord(b []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("txn: corrupt transaction record: %w", err)
	}
	return r, nil
}

// keys builds the coordinator's metadata keys under one root.
type keys struct{ root string }

func (k keys) tcPrefix(tc uint64) string  { return fmt.Sprintf("%stxn/%d/", k.root, tc) }
func (k keys) next(tc uint64) string      { return k.tcPrefix(tc) + "next" }
func (k keys) recPrefix(tc uint64) string { return k.tcPrefix(tc) + "t/" }
func (k keys) rec(id ID) string           { return fmt.Sprintf("%s%016x", k.recPrefix(id.Most), id.Least) }
func (k keys) txnPrefix() string          { return k.root + "txn/" }

// idOfRec parses a transaction record's key.
func (k keys) idOfRec(key string) (ID, bool) {
	rest, ok := strings.CutPrefix(key, k.txnPrefix())
	if !ok {
		return ID{}, false
	}
	tcs, least, ok := strings.Cut(rest, "/t/")
	if !ok {
		return ID{}, false
	}
	tc, err1 := strconv.ParseUint(tcs, 10, 64)
	l, err2 := strconv.ParseUint(least, 16, 64)
	if err1 != nil || err2 != nil || len(least) != 16 {
		return ID{}, false
	}
	return ID{Most: tc, Least: l}, true
}

// Pending acknowledgements: txn-acks/<topic>/<sub>/<most>-<least>, topic
// and subscription path-escaped so that neither's slashes can make two
// pairs share a prefix.
func (k keys) acksPrefix(topic, sub string) string {
	return k.root + "txn-acks/" + url.PathEscape(topic) + "/" + url.PathEscape(sub) + "/"
}
func (k keys) acks(topic, sub string, id ID) string {
	return fmt.Sprintf("%s%d-%d", k.acksPrefix(topic, sub), id.Most, id.Least)
}

func parseAcksID(s string) (ID, bool) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return ID{}, false
	}
	most, err1 := strconv.ParseUint(a, 10, 64)
	least, err2 := strconv.ParseUint(b, 10, 64)
	return ID{Most: most, Least: least}, err1 == nil && err2 == nil
}

// Unit is the ownership unit of coordinator tc.
func Unit(tc uint64) string { return "txn-coordinator:" + strconv.FormatUint(tc, 10) }

// IsUnit reports whether an ownership unit is a coordinator's (not a
// topic: it is not handed over as one).
func IsUnit(unit string) bool { return strings.HasPrefix(unit, "txn-coordinator:") }
