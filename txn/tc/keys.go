package tc

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/lakegate/lakegate/txn"
)

func encode(r txn.Record) []byte {
	b, _ := json.Marshal(r) // plain fields: cannot fail
	return b
}

func decodeRecord(b []byte) (txn.Record, error) {
	var r txn.Record
	if err := json.Unmarshal(b, &r); err != nil {
		return txn.Record{}, fmt.Errorf("txn: corrupt transaction record: %w", err)
	}
	return r, nil
}

// keys builds the coordinator's metadata keys under one root.
type keys struct{ root string }

func (k keys) tcPrefix(tc uint64) string  { return fmt.Sprintf("%stxn/%d/", k.root, tc) }
func (k keys) next(tc uint64) string      { return k.tcPrefix(tc) + "next" }
func (k keys) recPrefix(tc uint64) string { return k.tcPrefix(tc) + "t/" }
func (k keys) rec(id txn.ID) string       { return fmt.Sprintf("%s%016x", k.recPrefix(id.Most), id.Least) }
func (k keys) txnPrefix() string          { return k.root + "txn/" }

// idOfRec parses a transaction record's key.
func (k keys) idOfRec(key string) (txn.ID, bool) {
	rest, ok := strings.CutPrefix(key, k.txnPrefix())
	if !ok {
		return txn.ID{}, false
	}
	tcs, least, ok := strings.Cut(rest, "/t/")
	if !ok {
		return txn.ID{}, false
	}
	tc, err1 := strconv.ParseUint(tcs, 10, 64)
	l, err2 := strconv.ParseUint(least, 16, 64)
	if err1 != nil || err2 != nil || len(least) != 16 {
		return txn.ID{}, false
	}
	return txn.ID{Most: tc, Least: l}, true
}

// Pending acknowledgements: txn-acks/<topic>/<sub>/<most>-<least>, topic
// and subscription path-escaped so that neither's slashes can make two
// pairs share a prefix.
func (k keys) acksPrefix(topic, sub string) string {
	return k.root + "txn-acks/" + url.PathEscape(topic) + "/" + url.PathEscape(sub) + "/"
}
func (k keys) acks(topic, sub string, id txn.ID) string {
	return fmt.Sprintf("%s%d-%d", k.acksPrefix(topic, sub), id.Most, id.Least)
}

func parseAcksID(s string) (txn.ID, bool) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return txn.ID{}, false
	}
	most, err1 := strconv.ParseUint(a, 10, 64)
	least, err2 := strconv.ParseUint(b, 10, 64)
	return txn.ID{Most: most, Least: least}, err1 == nil && err2 == nil
}

// Kafka transactional producers: txn-kafka/<transactional.id>, the id
// path-escaped.
func (k keys) producerPrefix() string { return k.root + "txn-kafka/" }
func (k keys) producer(transactionalID string) string {
	return k.producerPrefix() + url.PathEscape(transactionalID)
}
