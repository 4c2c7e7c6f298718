package broker

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/lakegate/lakegate/lakestream"
)

// TopicName is a parsed Pulsar topic name.
//
//	persistent://tenant/ns/topic            → stream tenant/ns/topic, Partition -1
//	persistent://tenant/ns/topic-partition-3 → partition 3 of that stream (when
//	                                           the stream is partitioned)
//	topic                                   → persistent://public/default/topic
//	non-persistent://tenant/ns/topic        → a non-persistent topic (NonPersistent;
//	                                           no stream: nonpersistent.go)
type TopicName struct {
	Tenant, Namespace, Local string
	// Partition is the "-partition-N" suffix of Local, or -1.
	Partition int
	// NonPersistent: a non-persistent:// topic (in-memory fan-out, never
	// stored).
	NonPersistent bool
}

// PartitionSuffix joins a partitioned topic's name and a partition index.
const PartitionSuffix = "-partition-"

// ParseTopicName parses a Pulsar topic name (persistent:// or
// non-persistent://) and checks its parts (checkTopicNameParts): a name
// that fails is ErrInvalidTopicName, with the reason.
func ParseTopicName(s string) (TopicName, error) {
	nonPersistent := false
	rest, ok := strings.CutPrefix(s, "persistent://")
	if !ok {
		if rest, ok = strings.CutPrefix(s, "non-persistent://"); ok {
			nonPersistent = true
		} else if strings.Contains(s, "://") {
			return TopicName{}, fmt.Errorf("%w: %q: only persistent:// and non-persistent:// topics exist", ErrInvalidTopicName, s)
		} else if !strings.Contains(s, "/") {
			rest = "public/default/" + s
		} else {
			rest = s
		}
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return TopicName{}, fmt.Errorf("%w: %q", ErrInvalidTopicName, s)
	}
	if reason := checkTopicNameParts(parts[0], parts[1], parts[2]); reason != "" {
		return TopicName{}, fmt.Errorf("%w: %q: %s", ErrInvalidTopicName, s, reason)
	}
	t := TopicName{Tenant: parts[0], Namespace: parts[1], Local: parts[2], Partition: -1, NonPersistent: nonPersistent}
	if i := strings.LastIndex(t.Local, PartitionSuffix); i > 0 {
		t.Partition = partitionIndex(t.Local[i+len(PartitionSuffix):])
	}
	return t, nil
}

// partitionIndex is the partition a "-partition-" suffix names: decimal
// digits in canonical form (as Pulsar's TopicName reads them: "01", "+1"
// and "-1" name no partition, so that no two names mean one partition),
// else -1.
func partitionIndex(s string) int {
	if s == "" || len(s) > 9 || (len(s) > 1 && s[0] == '0') {
		return -1
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return -1
		}
	}
	n, _ := strconv.Atoi(s)
	return n
}

// checkTopicNameParts returns why a topic name's parts are invalid, or "".
// Tenants and namespaces: Pulsar's named-entity characters (ASCII letters,
// digits, '_', '-', '=', '.'; Pulsar's ':' is refused too: the names are
// table paths, where a colon is a URI scheme), and neither "." nor "..".
// Local names: valid UTF-8 without ':', '*' or control characters, and
// neither "." nor "..". They name object-store paths, table locations and
// regex subscriptions' matches, so nothing in them may act as a path
// step, a scheme, a wildcard or a terminal escape.
func checkTopicNameParts(tenant, namespace, local string) string {
	for _, p := range [2][2]string{{"tenant", tenant}, {"namespace", namespace}} {
		kind, v := p[0], p[1]
		if v == "." || v == ".." {
			return fmt.Sprintf("%s %q is a path step", kind, v)
		}
		for i := 0; i < len(v); i++ {
			c := v[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '=' || c == '.') {
				return fmt.Sprintf("%s %q: only letters, digits and _ - = . are allowed", kind, v)
			}
		}
	}
	if local == "." || local == ".." {
		return fmt.Sprintf("topic %q is a path step", local)
	}
	if !utf8.ValidString(local) {
		return "topic name is not UTF-8"
	}
	for _, r := range local {
		switch {
		case r == ':' || r == '*':
			return fmt.Sprintf("topic names may not contain %q", r)
		case unicode.IsControl(r):
			return fmt.Sprintf("topic names may not contain control characters (%U)", r)
		}
	}
	return ""
}

// String is the full name.
func (t TopicName) String() string {
	scheme := "persistent://"
	if t.NonPersistent {
		scheme = "non-persistent://"
	}
	return scheme + t.Tenant + "/" + t.Namespace + "/" + t.Local
}

// Base is the name without the partition suffix.
func (t TopicName) Base() TopicName {
	if t.Partition < 0 {
		return t
	}
	b := t
	b.Local = t.Local[:strings.LastIndex(t.Local, PartitionSuffix)]
	b.Partition = -1
	return b
}

// StreamID is the lakestream stream of the (base) topic.
func (t TopicName) StreamID() lakestream.StreamIdentifier {
	return lakestream.StreamIdentifier{Namespace: t.Tenant + "/" + t.Namespace, Name: t.Base().Local}
}

// FullStreamID is the stream a name denotes when it is not a partition:
// the whole local name, suffix included.
func FullStreamID(tn TopicName) lakestream.StreamIdentifier {
	return lakestream.StreamIdentifier{Namespace: tn.Tenant + "/" + tn.Namespace, Name: tn.Local}
}
