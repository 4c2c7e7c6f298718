package doctor

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Status is a check's outcome. The order matters: a report's status is
// its worst check's.
type Status int

// The statuses, from best to worst.
const (
	OK Status = iota
	Warn
	Fail
)

func (s Status) String() string {
	switch s {
	case OK:
		return "ok"
	case Warn:
		return "warn"
	}
	return "fail"
}

// MarshalText writes the status as "ok", "warn" or "fail".
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads "ok", "warn" or "fail".
func (s *Status) UnmarshalText(b []byte) error {
	for _, v := range []Status{OK, Warn, Fail} {
		if string(b) == v.String() {
			*s = v
			return nil
		}
	}
	return fmt.Errorf("doctor: unknown status %q", b)
}

// Check is one finding: what was checked, its status, what was found and,
// unless OK, what to do about it.
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Hint   string `json:"hint,omitempty"`
}

// Member is a lakegate member as the report lists it: its ID and the
// URL of its admin REST ("" when it advertises none).
type Member struct {
	ID      string `json:"id"`
	HTTPURL string `json:"httpUrl,omitempty"`
}

// Report is one node's diagnosis.
type Report struct {
	Node    string    `json:"node"`
	Time    time.Time `json:"time"`
	Status  Status    `json:"status"` // the worst check's
	Checks  []Check   `json:"checks"`
	Members []Member  `json:"members"` // the cluster's members, for a cluster-wide run
}

// Worst returns the worst status among checks (OK for none).
func Worst(checks []Check) Status {
	w := OK
	for _, c := range checks {
		w = max(w, c.Status)
	}
	return w
}

// EtcdMember is one etcd member's status as the node read it.
type EtcdMember struct {
	Name, Endpoint   string
	ID, Leader       uint64
	DBSizeBytes      int64
	DBSizeInUseBytes int64
	Errors           []string
	Latency          time.Duration
	Err              string // why it did not answer
}

// Facts is what a node gathered for its diagnosis. An Err field says why
// the facts next to it could not be gathered.
type Facts struct {
	Node     string
	Draining bool // the node is shutting down (SIGTERM): it hands its topics over
	// Etcd: the metadata cluster. EtcdKnown is false when the store is
	// not etcd (a test's in-memory store): the etcd checks are skipped.
	EtcdKnown      bool
	EtcdErr        string
	EtcdMembers    []EtcdMember
	EtcdAlarms     []string
	EtcdAlarmsErr  string
	EtcdQuotaBytes int64 // the backend quota the node knows of (0: unknown)
	// The object store: a probe object written, read back and deleted.
	StoreURL     string
	StoreErr     string // the probe's failure, else ""
	StoreLatency time.Duration
	// lakegate's members (live sessions) and the units each owns.
	Members       []Member
	MembersErr    string
	SelfIsMember  bool
	Owners        map[string]int // member ID → units owned
	OwnersErr     string
	OwnersPartial bool // more ownership records than were read
	// Table lag on this node (engine.Engine.MaterializationLag).
	TableLagRecords int64
	TableLagLogs    int
}

// Thresholds turn facts into warnings and failures. Zero fields take the
// defaults of DefaultThresholds.
type Thresholds struct {
	// EtcdQuotaWarn and EtcdQuotaFail: fractions of the backend quota.
	EtcdQuotaWarn, EtcdQuotaFail float64
	// SlowEtcd and SlowStore: a member's status or the store probe slower
	// than this is a warning.
	SlowEtcd, SlowStore time.Duration
	// TableLagRecords: more records than this not yet in the tables is a
	// warning.
	TableLagRecords int64
}

// DefaultThresholds are the thresholds `lakegate admin doctor` uses.
var DefaultThresholds = Thresholds{
	EtcdQuotaWarn: 0.8, EtcdQuotaFail: 0.95,
	SlowEtcd: time.Second, SlowStore: 2 * time.Second,
	TableLagRecords: 1_000_000,
}

func (t Thresholds) withDefaults() Thresholds {
	d := DefaultThresholds
	if t.EtcdQuotaWarn > 0 {
		d.EtcdQuotaWarn = t.EtcdQuotaWarn
	}
	if t.EtcdQuotaFail > 0 {
		d.EtcdQuotaFail = t.EtcdQuotaFail
	}
	if t.SlowEtcd > 0 {
		d.SlowEtcd = t.SlowEtcd
	}
	if t.SlowStore > 0 {
		d.SlowStore = t.SlowStore
	}
	if t.TableLagRecords > 0 {
		d.TableLagRecords = t.TableLagRecords
	}
	return d
}

// Diagnose turns f into a report (Time is left for the caller). Pure.
func Diagnose(f Facts, th Thresholds) Report {
	th = th.withDefaults()
	var cs []Check
	cs = append(cs, nodeCheck(f))
	if f.EtcdKnown {
		cs = append(cs, etcdChecks(f, th)...)
	}
	cs = append(cs, storeCheck(f, th), membersCheck(f), ownersCheck(f), tableLagCheck(f, th))
	return Report{Node: f.Node, Status: Worst(cs), Checks: cs, Members: slices.Clone(f.Members)}
}

func nodeCheck(f Facts) Check {
	if f.Draining {
		return Check{Name: "node", Status: Warn, Detail: "shutting down: handing its topics over to the other members",
			Hint: "expected during a rolling restart; otherwise find what sent it SIGTERM"}
	}
	return Check{Name: "node", Status: OK, Detail: "serving"}
}

func etcdChecks(f Facts, th Thresholds) []Check {
	if f.EtcdErr != "" {
		return []Check{{Name: "etcd", Status: Fail, Detail: "the metadata cluster does not answer: " + f.EtcdErr,
			Hint: "check the etcd endpoints (metadata.etcd.endpoints), their TLS and credentials, and that a majority of members run"}}
	}
	out := []Check{etcdMembersCheck(f, th)}
	out = append(out, etcdSizeCheck(f, th))
	switch {
	case len(f.EtcdAlarms) > 0:
		out = append(out, Check{Name: "etcd alarms", Status: Fail, Detail: strings.Join(f.EtcdAlarms, "; "),
			Hint: "NOSPACE: etcd refuses writes — compact, defragment (etcdctl defrag) and disarm (etcdctl alarm disarm), or raise --quota-backend-bytes; CORRUPT: replace the member"})
	case f.EtcdAlarmsErr != "":
		out = append(out, Check{Name: "etcd alarms", Status: Warn, Detail: "could not be read: " + f.EtcdAlarmsErr,
			Hint: "with etcd authentication on, reading alarms takes the root role; check them with etcdctl alarm list"})
	default:
		out = append(out, Check{Name: "etcd alarms", Status: OK, Detail: "none"})
	}
	return out
}

func etcdMembersCheck(f Facts, th Thresholds) Check {
	n := len(f.EtcdMembers)
	var down, slow []string
	leaders := map[uint64]bool{}
	for _, m := range f.EtcdMembers {
		switch {
		case m.Err != "":
			down = append(down, fmt.Sprintf("%s (%s): %s", m.Name, m.Endpoint, m.Err))
		default:
			leaders[m.Leader] = true
			if m.Latency > th.SlowEtcd {
				slow = append(slow, fmt.Sprintf("%s answered in %v", m.Name, m.Latency.Round(time.Millisecond)))
			}
		}
	}
	up := n - len(down)
	c := Check{Name: "etcd members", Status: OK, Detail: fmt.Sprintf("%d of %d answer", up, n)}
	switch {
	case n == 0:
		c.Status, c.Detail = Fail, "the member list is empty"
	case up <= n/2:
		c.Status, c.Detail = Fail, fmt.Sprintf("only %d of %d members answer: no quorum, every write fails: %s", up, n, strings.Join(down, "; "))
		c.Hint = "restart the members that are down, or restore the cluster from a snapshot"
	case leaders[0] || len(leaders) > 1:
		c.Status, c.Detail = Fail, fmt.Sprintf("the members do not agree on a leader (%d views)", len(leaders))
		c.Hint = "an election is under way or the network is partitioned; if it lasts, check the members' peer connectivity"
	case len(down) > 0:
		c.Status, c.Detail = Warn, fmt.Sprintf("%d of %d answer; down: %s", up, n, strings.Join(down, "; "))
		c.Hint = "the cluster has quorum but one more loss stops it: restart or replace the members that are down"
	case len(slow) > 0:
		c.Status, c.Detail = Warn, "slow: "+strings.Join(slow, "; ")
		c.Hint = "etcd wants fast disks (fsync latency) and an unloaded network; check the members' disks"
	}
	return c
}

func etcdSizeCheck(f Facts, th Thresholds) Check {
	var largest int64
	var inUse int64
	for _, m := range f.EtcdMembers {
		if m.DBSizeBytes > largest {
			largest, inUse = m.DBSizeBytes, m.DBSizeInUseBytes
		}
	}
	c := Check{Name: "etcd size", Status: OK, Detail: fmt.Sprintf("%s (%s in use)", bytesText(largest), bytesText(inUse))}
	if f.EtcdQuotaBytes <= 0 {
		c.Detail += "; quota unknown to this node"
		return c
	}
	frac := float64(largest) / float64(f.EtcdQuotaBytes)
	c.Detail += fmt.Sprintf(" of a %s quota (%.0f%%)", bytesText(f.EtcdQuotaBytes), 100*frac)
	switch {
	case frac >= th.EtcdQuotaFail:
		c.Status = Fail
		c.Hint = "etcd stops accepting writes at its quota: defragment (etcdctl defrag) if much is free, else raise --quota-backend-bytes"
	case frac >= th.EtcdQuotaWarn:
		c.Status = Warn
		c.Hint = "defragment (etcdctl defrag) if much is free, else plan a larger --quota-backend-bytes"
	}
	return c
}

func storeCheck(f Facts, th Thresholds) Check {
	c := Check{Name: "object store", Status: OK, Detail: fmt.Sprintf("%s: write, read and delete in %v", f.StoreURL, f.StoreLatency.Round(time.Millisecond))}
	switch {
	case f.StoreErr != "":
		c.Status, c.Detail = Fail, fmt.Sprintf("%s: %s", f.StoreURL, f.StoreErr)
		c.Hint = "producers' appends fail until the store answers: check the bucket, its credentials and permissions (put, get, delete, list), and the endpoint"
	case f.StoreLatency > th.SlowStore:
		c.Status = Warn
		c.Hint = "every append waits for a PUT: check the network to the store and its region"
	}
	return c
}

func membersCheck(f Facts) Check {
	ids := make([]string, 0, len(f.Members))
	for _, m := range f.Members {
		ids = append(ids, m.ID)
	}
	c := Check{Name: "lakegate members", Status: OK, Detail: fmt.Sprintf("%d: %s", len(ids), strings.Join(ids, ", "))}
	switch {
	case f.MembersErr != "":
		c.Status, c.Detail = Fail, "could not be listed: "+f.MembersErr
		c.Hint = "the metadata store does not answer this node"
	case !f.SelfIsMember:
		c.Status, c.Detail = Fail, fmt.Sprintf("this node (%s) is not among them: its session is gone, it owns no topic", f.Node)
		c.Hint = "the node lost etcd for longer than its session TTL; it starts a new session once etcd answers — check its connectivity"
	}
	return c
}

func ownersCheck(f Facts) Check {
	if f.OwnersErr != "" {
		return Check{Name: "owners", Status: Fail, Detail: "could not be listed: " + f.OwnersErr, Hint: "the metadata store does not answer this node"}
	}
	live := map[string]bool{}
	for _, m := range f.Members {
		live[m.ID] = true
	}
	ids := make([]string, 0, len(f.Owners))
	for id := range f.Owners {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var parts, orphans []string
	total := 0
	for _, id := range ids {
		total += f.Owners[id]
		parts = append(parts, fmt.Sprintf("%s %d", id, f.Owners[id]))
		if !live[id] {
			orphans = append(orphans, id)
		}
	}
	c := Check{Name: "owners", Status: OK, Detail: fmt.Sprintf("%d units owned (topic partitions and other per-unit work)", total)}
	if len(parts) > 0 {
		c.Detail += ": " + strings.Join(parts, ", ")
	}
	if f.OwnersPartial {
		c.Detail += " (first records only)"
	}
	if len(orphans) > 0 {
		c.Status = Warn
		c.Detail += "; owned by members without a session: " + strings.Join(orphans, ", ")
		c.Hint = "ownerships end with their owner's session (its TTL); if this lasts, the owner's lease outlives it — check etcd's leases"
	}
	return c
}

func tableLagCheck(f Facts, th Thresholds) Check {
	c := Check{Name: "table lag", Status: OK,
		Detail: fmt.Sprintf("%d records not yet in the tables over the %d logs this node materializes", f.TableLagRecords, f.TableLagLogs)}
	if f.TableLagRecords > th.TableLagRecords {
		c.Status = Warn
		c.Hint = "materialization falls behind: check lakegate_materialization_runs_total{result=\"error\"}, the store's latency and the nodes' CPU; more nodes share the tables"
	}
	return c
}

func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
