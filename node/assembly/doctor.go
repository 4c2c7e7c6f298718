package assembly

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/lakegate/lakegate/doctor"
	"github.com/lakegate/lakegate/meta"
)

// doctorTimeout bounds the facts one diagnosis gathers; ownerRecordsMax
// bounds the ownership records it reads.
const (
	doctorTimeout   = 15 * time.Second
	ownerRecordsMax = 100_000
)

// etcdStatus is what a metadata store that is etcd can say of its cluster
// (meta.Etcd).
type etcdStatus interface {
	Status(ctx context.Context) (meta.ClusterStatus, error)
}

// Doctor gathers this node's facts — its etcd cluster's status, an
// object-store probe (docs/storage.md, "Keys": doctor/), the members and
// owners, the table lag — and diagnoses them (package doctor).
func (n *Node) Doctor(ctx context.Context) doctor.Report {
	ctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	f := doctor.Facts{Node: n.Member.Self().ID, Draining: n.Gateway.Closing(), StoreURL: redactURL(n.Node.Config.ObjectURL)}
	if es, ok := n.Node.Meta.(etcdStatus); ok {
		f.EtcdKnown = true
		n.etcdFacts(ctx, es, &f)
	}
	f.StoreLatency, f.StoreErr = n.probeStore(ctx)
	if ms, err := n.Member.Members(ctx); err != nil {
		f.MembersErr = err.Error()
	} else {
		for _, m := range ms {
			u := m.Endpoints["https"]
			if u == "" {
				u = m.Endpoints["http"]
			}
			f.Members = append(f.Members, doctor.Member{ID: m.ID, HTTPURL: u})
			f.SelfIsMember = f.SelfIsMember || m.ID == n.Member.Self().ID
		}
	}
	if owners, complete, err := n.Member.OwnerCounts(ctx, ownerRecordsMax); err != nil {
		f.OwnersErr = err.Error()
	} else {
		f.Owners, f.OwnersPartial = owners, !complete
	}
	f.TableLagRecords, f.TableLagLogs = n.Engine.MaterializationLag()
	r := doctor.Diagnose(f, doctor.Thresholds{})
	r.Time = time.Now().UTC()
	return r
}

func (n *Node) etcdFacts(ctx context.Context, es etcdStatus, f *doctor.Facts) {
	if n.Node.Embedded != nil {
		f.EtcdQuotaBytes = n.Node.Embedded.Config().QuotaBackendBytes
	}
	st, err := es.Status(ctx)
	if err != nil {
		f.EtcdErr = err.Error()
		return
	}
	for _, m := range st.Members {
		f.EtcdMembers = append(f.EtcdMembers, doctor.EtcdMember{Name: m.Name, Endpoint: m.Endpoint, ID: m.ID, Leader: m.Leader,
			DBSizeBytes: m.DBSizeBytes, DBSizeInUseBytes: m.DBSizeInUseBytes, Errors: m.Errors, Latency: m.Latency, Err: m.Err})
	}
	f.EtcdAlarms, f.EtcdAlarmsErr = st.Alarms, st.AlarmsErr
}

// probeStore writes a probe object, reads it back and deletes it,
// returning the time the three took or what failed.
func (n *Node) probeStore(ctx context.Context) (time.Duration, string) {
	key := "doctor/" + n.Engine.NodeID() + "/" + strconv.FormatInt(time.Now().UnixNano(), 10)
	want := []byte("lakegate doctor probe")
	start := time.Now()
	if err := n.Node.Store.PutIfAbsent(ctx, key, want); err != nil {
		return 0, fmt.Sprintf("writing the probe object %s: %v", key, err)
	}
	got, err := n.Node.Store.Get(ctx, key)
	switch {
	case err != nil:
		return 0, fmt.Sprintf("reading the probe object %s back: %v", key, err)
	case !bytes.Equal(got, want):
		return 0, fmt.Sprintf("the probe object %s read back differs from what was written (%d bytes, want %d)", key, len(got), len(want))
	}
	if err := n.Node.Store.Delete(ctx, key); err != nil {
		return 0, fmt.Sprintf("deleting the probe object %s: %v", key, err)
	}
	return time.Since(start), ""
}

// redactURL is an object-store URL without its query (which may carry
// credentials or endpoints with them) and user info.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable object store URL)"
	}
	u.RawQuery, u.User = "", nil
	return u.String()
}
