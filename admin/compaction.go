package admin

// Admin REST of topic compaction (broker/compaction.go):
//
//	PUT    /admin/v2/persistent/{t}/{ns}/{topic}/compaction           start a compaction (204; 409 while one runs)
//	GET    /admin/v2/persistent/{t}/{ns}/{topic}/compaction           its status: {"status": NOT_RUN|RUNNING|SUCCESS|ERROR, "lastError"}
//	                                                                  (RUNNING on the owner running it; else the last
//	                                                                  one that ended, from the compaction record)
//	GET|POST|DELETE /admin/v2/persistent/{t}/{ns}/{topic}/compactionThreshold   the threshold policy (bytes)
//	GET|PUT|DELETE  /admin/v2/namespaces/{t}/{ns}/compactionThreshold
//
// A partitioned topic as a whole fans out to its partitions (each routed
// to its owner).

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/lakegate/lakegate/broker"
)

// compactionTopic resolves the request's one partition (or
// non-partitioned topic) to its loaded topic on this node (its owner).
func (a *admin) compactionTopic(r *http.Request) (broker.ServedTopic, error) {
	ref, err := a.refOf(r)
	if err != nil {
		return nil, err
	}
	ts, err := a.topics(r.Context(), ref)
	if err != nil {
		return nil, err
	}
	return ts[0], nil
}

func (a *admin) triggerCompaction(r *http.Request) (any, error) {
	ref, err := a.refOf(r)
	if err == nil && ref.partitioned() {
		rs, err := a.fanOut(r, ref, "")
		if err != nil {
			return nil, err
		}
		return combineWrites(rs, false)
	}
	var t broker.ServedTopic
	if err == nil {
		t, err = a.compactionTopic(r)
	}
	if err == nil && !t.Compaction().Start() {
		err = fmt.Errorf("%w: a compaction of %s is already running", errAdminConflict, t.Name())
	}
	if err != nil {
		return nil, err
	}
	return nil, nil
}

// compactionStatusJSON is Pulsar's LongRunningProcessStatus.
type compactionStatusJSON struct {
	Status    string `json:"status"`
	LastError string `json:"lastError"`
}

func (a *admin) compactionStatus(r *http.Request) (any, error) {
	ref, err := a.refOf(r)
	if err == nil && ref.partitioned() {
		err = fmt.Errorf("%w: %s is a partitioned topic: ask one of its partitions", errAdminMethodNotAllowed, ref.name)
	}
	var (
		t                 broker.ServedTopic
		status, lastError string
	)
	if err == nil {
		t, err = a.compactionTopic(r)
	}
	if err == nil {
		status, lastError, _, err = t.Compaction().Status(r.Context())
	}
	if err != nil {
		return nil, err
	}
	return compactionStatusJSON{Status: status, LastError: lastError}, nil
}

// thresholdOf reads a compaction threshold body: bytes ≥ 0.
func thresholdOf(r *http.Request) (string, error) {
	b, err := readBody(r)
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(b))
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return "", fmt.Errorf("%w: compaction threshold %q: want a number of bytes ≥ 0", errAdminPrecondition, v)
	}
	return strconv.FormatInt(n, 10), nil
}

func (a *admin) getTopicCompactionThreshold(r *http.Request) (any, error) {
	if queryBool(r, "applied") {
		ref, err := a.refOf(r)
		var n int64
		if err == nil {
			n, err = a.brk.CompactionThreshold(r.Context(), ref.md)
		}
		if err != nil {
			return nil, err
		}
		return n, nil
	}
	return a.getTopicProperty(r, broker.CompactionThresholdProperty)
}

func (a *admin) setTopicCompactionThreshold(r *http.Request) (any, error) {
	v, err := thresholdOf(r)
	if err != nil {
		return nil, err
	}
	return a.changeTopicProperty(r, broker.CompactionThresholdProperty, &v, false)
}

func (a *admin) removeTopicCompactionThreshold(r *http.Request) (any, error) {
	return a.changeTopicProperty(r, broker.CompactionThresholdProperty, nil, false)
}
