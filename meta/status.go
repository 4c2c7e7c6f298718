package meta

import (
	"context"
	"fmt"
	"time"
)

// ClusterStatus is what an etcd cluster says about itself: its members
// as the one answering lists them, each member's own status, and the
// alarms raised (NOSPACE: the backend reached its quota and refuses
// writes; CORRUPT: a member's data differs from the others').
type ClusterStatus struct {
	Members []MemberStatus
	Alarms  []string
	// AlarmsErr is why the alarms could not be read (with authentication
	// on, reading them takes the root role), else "".
	AlarmsErr string
}

// MemberStatus is one etcd member's status (etcd's StatusResponse), read
// from its first client URL. Err is why it did not answer (the other
// fields are then zero).
type MemberStatus struct {
	ID       uint64
	Name     string
	Endpoint string
	// DBSizeBytes is the backend file's size, DBSizeInUseBytes the part
	// holding data (the rest is free pages a defragmentation returns);
	// the quota (--quota-backend-bytes) applies to DBSizeBytes.
	DBSizeBytes      int64
	DBSizeInUseBytes int64
	// Leader is the member's view of the leader's ID (0: none).
	Leader    uint64
	RaftIndex uint64
	Errors    []string // the member's own errors (etcd's StatusResponse.Errors)
	Latency   time.Duration
	Err       string
}

// memberStatusTimeout bounds one member's status request.
const memberStatusTimeout = 3 * time.Second

// Status reads the cluster's members and alarms and each member's
// status. An error is returned only when the member list cannot be read;
// a member that does not answer has its MemberStatus.Err set. Cost: one
// request per member, plus the member list and the alarms.
func (e *Etcd) Status(ctx context.Context) (ClusterStatus, error) {
	ctx, done, err := e.call(ctx)
	if err != nil {
		return ClusterStatus{}, err
	}
	defer done()
	list, err := e.cli.MemberList(ctx)
	if err != nil {
		return ClusterStatus{}, fmt.Errorf("%w: etcd member list: %w", ErrUnavailable, err)
	}
	var st ClusterStatus
	for _, m := range list.Members {
		ms := MemberStatus{ID: m.ID, Name: m.Name}
		if len(m.ClientURLs) == 0 {
			ms.Err = "no client URL (a member being added, not started yet)"
			st.Members = append(st.Members, ms)
			continue
		}
		ms.Endpoint = m.ClientURLs[0]
		mctx, cancel := context.WithTimeout(ctx, memberStatusTimeout)
		start := time.Now()
		resp, err := e.cli.Status(mctx, ms.Endpoint)
		ms.Latency = time.Since(start)
		cancel()
		if err != nil {
			ms.Err = err.Error()
		} else {
			ms.DBSizeBytes, ms.DBSizeInUseBytes = resp.DbSize, resp.DbSizeInUse
			ms.Leader, ms.RaftIndex, ms.Errors = resp.Leader, resp.RaftIndex, resp.Errors
		}
		st.Members = append(st.Members, ms)
	}
	alarms, err := e.cli.AlarmList(ctx)
	if err != nil {
		st.AlarmsErr = err.Error()
	} else {
		for _, a := range alarms.Alarms {
			st.Alarms = append(st.Alarms, fmt.Sprintf("%s on member %x", a.Alarm, a.MemberID))
		}
	}
	return st, nil
}
