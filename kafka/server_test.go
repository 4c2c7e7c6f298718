package kafka

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
)

func TestSASLToken(t *testing.T) {
	for _, c := range []struct {
		mech, msg, want string
		ok              bool
	}{
		{mechPlain, "\x00user\x00tok", "tok", true},
		{mechPlain, "authz\x00user\x00tok", "tok", true},
		{mechPlain, "user\x00tok", "", false},
		{mechPlain, "\x00user\x00", "", false},
		{mechOAuthBearer, "n,,\x01auth=Bearer abc.def\x01\x01", "abc.def", true},
		{mechOAuthBearer, "n,,\x01host=x\x01auth=Bearer t\x01\x01", "t", true},
		{mechOAuthBearer, "n,,\x01auth=Basic t\x01\x01", "", false},
		{mechOAuthBearer, "", "", false},
		{"SCRAM-SHA-256", "x", "", false},
	} {
		got, err := saslToken(c.mech, []byte(c.msg))
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("%s %q: %q, %v; want %q ok=%v", c.mech, c.msg, got, err, c.want, c.ok)
		}
	}
}

func TestCommitMetadataProps(t *testing.T) {
	for _, md := range []string{"", "m0", "exactly8", "a longer one, with ünïcödé, of more than eight bytes", strings.Repeat("x", metadataMaxBytes)} {
		props, err := metadataProps(&md)
		if err != nil {
			t.Fatalf("%q: %v", md, err)
		}
		if got := propsMetadata(props); got != md {
			t.Fatalf("%q read back as %q", md, got)
		}
		if len(props) > 64 {
			t.Fatalf("%q: %d properties (a cursor holds 64)", md, len(props))
		}
	}
	big := strings.Repeat("x", metadataMaxBytes+1)
	if _, err := metadataProps(&big); !errors.Is(err, kerr.OffsetMetadataTooLarge) {
		t.Fatalf("oversized metadata: %v", err)
	}
	if props, err := metadataProps(nil); props != nil || err != nil {
		t.Fatalf("no metadata: %v %v", props, err)
	}
	if got := propsMetadata(map[string]int64{metadataLenKey: 1 << 40}); got != "" {
		t.Fatalf("a corrupt length read back %q", got)
	}
}

func TestValidTopic(t *testing.T) {
	for name, ok := range map[string]bool{"orders": true, "a.b-c_D9": true, "": false, ".": false, "..": false,
		strings.Repeat("a", 249): true, strings.Repeat("a", 250): false, "a/b": false, "a b": false, "ünï": false} {
		if validTopic(name) != ok {
			t.Errorf("validTopic(%q) = %v", name, !ok)
		}
	}
}

func TestSkipTags(t *testing.T) {
	rest, err := skipTags([]byte{2, 0, 1, 'x', 5, 2, 'y', 'z', 0xAA})
	if err != nil || len(rest) != 1 || rest[0] != 0xAA {
		t.Fatalf("skipTags: %v %x", err, rest)
	}
	for _, bad := range [][]byte{{}, {1}, {1, 0}, {1, 0, 5, 'x'}, {0x80}} {
		if _, err := skipTags(bad); err == nil {
			t.Errorf("skipTags(%x) accepted", bad)
		}
	}
}

func TestBatchPublishMs(t *testing.T) {
	recs := []testRecord{{value: []byte("a"), ts: 1000}, {value: []byte("b"), ts: 3000}, {value: []byte("c"), ts: 2000}}
	b := makeBatch(t, "none", recs, -1, -1)
	if got := batchPublishMs(b, 99); got != 3000 {
		t.Fatalf("publish time %d, want the largest timestamp 3000", got)
	}
	b[22] |= attrLogAppendTime
	if got := batchPublishMs(b, 99); got != 99 {
		t.Fatalf("LogAppendTime batch: %d, want now", got)
	}
	if got := batchPublishMs(b[:10], 99); got != 99 {
		t.Fatalf("short batch: %d", got)
	}
	entry, _, err := EntryFromBatch(makeBatch(t, "lz4", recs, -1, -1), EntryOptions{MaxBytes: 1 << 20, PublishMs: 3000, ProducerName: "p"})
	if err != nil {
		t.Fatal(err)
	}
	times, err := recordTimes(entry, 1<<20)
	if err != nil || len(times) != 3 || times[0] != 1000 || times[1] != 3000 || times[2] != 2000 {
		t.Fatalf("record times %v %v", times, err)
	}
}

func TestIdempotentNames(t *testing.T) {
	for _, c := range []struct {
		pid   int64
		epoch int16
		name  string
	}{{7, 0, "kafka-7"}, {7, 3, "kafka-7.3"}, {1 << 50, 32767, "kafka-1125899906842624.32767"}} {
		if got := idempotentName(c.pid, c.epoch); got != c.name {
			t.Errorf("idempotentName(%d, %d) = %q", c.pid, c.epoch, got)
		}
		pid, epoch, ok := parseIdempotentName(c.name)
		if !ok || pid != c.pid || epoch != c.epoch {
			t.Errorf("parse %q: %d %d %v", c.name, pid, epoch, ok)
		}
	}
	for _, bad := range []string{"kafka@node0", "kafka-", "kafka-x", "kafka--1", "kafka-1.0", "kafka-1.x", "pulsar-1"} {
		if _, _, ok := parseIdempotentName(bad); ok {
			t.Errorf("parseIdempotentName(%q) accepted", bad)
		}
	}
}

func TestErrCode(t *testing.T) {
	for _, c := range []struct {
		err  error
		want *kerr.Error
	}{
		{broker.ErrServiceNotReady, kerr.NotLeaderForPartition},
		{errProducerGone, kerr.NotLeaderForPartition},
		{lakestream.ErrNoSuchStream, kerr.UnknownTopicOrPartition},
		{actors.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
		{ErrMalformed, kerr.CorruptMessage},
		{ErrTooLarge, kerr.MessageTooLarge},
		{kerr.TopicAuthorizationFailed, kerr.TopicAuthorizationFailed},
		{errors.New("x"), kerr.UnknownServerError},
	} {
		if got := errCode(c.err); got != c.want.Code {
			t.Errorf("errCode(%v) = %v, want %v", c.err, kerr.ErrorForCode(got), c.want)
		}
	}
	if errCode(nil) != 0 {
		t.Error("errCode(nil)")
	}
}

// Every request served has a handler and versions kmsg can read.
func TestAPIsServed(t *testing.T) {
	resp := apiVersionsAnswer(0)
	if len(resp.ApiKeys) != len(apis) {
		t.Fatalf("ApiVersions lists %d keys, %d served", len(resp.ApiKeys), len(apis))
	}
	for key, a := range apis {
		req := kmsg.RequestForKey(key)
		if req == nil || a.handle == nil || a.min > a.max || a.max > req.MaxVersion() {
			t.Errorf("key %d: %+v (kmsg max %d)", key, a, req.MaxVersion())
		}
	}
}
