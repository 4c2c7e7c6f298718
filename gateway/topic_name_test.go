package gateway

import (
	"errors"
	"testing"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/protocol/pb"
)

// TestParseTopicNameRules: the names Pulsar's clients use parse; names with
// path steps, ':', '*', control characters, bad UTF-8, or tenants and
// namespaces outside Pulsar's named-entity characters are
// broker.ErrInvalidTopicName (InvalidTopicName to clients); partition suffixes
// are read only in canonical form.
func TestParseTopicNameRules(t *testing.T) {
	good := map[string]int{
		"orders":                -1,
		"public/default/orders": -1,
		"persistent://t-1/ns_2/orders.v2=eu west":    -1,
		"persistent://a.b/c=d/é-topic":               -1,
		"persistent://public/default/x-partition-0":  0,
		"persistent://public/default/x-partition-12": 12,
		"persistent://public/default/x-partition-01": -1, // a topic of its own, as in Pulsar
		"persistent://public/default/x-partition-+1": -1,
		"persistent://public/default/x-partition--1": -1,
		"persistent://public/default/x-partition-":   -1,
		"non-persistent://public/default/np":         -1,
		"persistent://public/default/%2e%2e":         -1, // encoded, not a path step
	}
	for name, part := range good {
		tn, err := broker.ParseTopicName(name)
		if err != nil {
			t.Errorf("%q: %v", name, err)
			continue
		}
		if tn.Partition != part {
			t.Errorf("%q: partition %d, want %d", name, tn.Partition, part)
		}
	}
	bad := []string{
		"persistent://public/default/.",
		"persistent://public/default/..",
		"..",
		"persistent://public/default/a:b",
		"a:b",
		"persistent://public/default/a*",
		"persistent://public/default/a\x00b",
		"persistent://public/default/a\tb",
		"persistent://public/default/a\x7fb",
		"persistent://public/default/a\u0085b",
		"persistent://public/default/a\xffb",
		"persistent://pub:lic/default/x",
		"persistent://pub*lic/default/x",
		"persistent://públic/default/x",
		"persistent://public/de fault/x",
		"persistent://./default/x",
		"persistent://public/../x",
		"persistent://public/default/",
		"persistent://public/default/a/b",
		"http://public/default/t",
	}
	for _, name := range bad {
		_, err := broker.ParseTopicName(name)
		if !errors.Is(err, broker.ErrInvalidTopicName) || serverError(err) != pb.ServerError_InvalidTopicName {
			t.Errorf("%q: %v, want broker.ErrInvalidTopicName", name, err)
		}
	}
	for _, name := range []string{"persistent://__lakegate/compacted/1-1", "non-persistent://__lakegate/x/y"} {
		if _, err := clientTopicName(name); !errors.Is(err, broker.ErrNotAllowed) {
			t.Errorf("clientTopicName(%q) = %v, want broker.ErrNotAllowed", name, err)
		}
		if _, err := broker.ParseTopicName(name); err != nil {
			t.Errorf("broker.ParseTopicName(%q) = %v: the node's own names parse", name, err)
		}
	}
}
