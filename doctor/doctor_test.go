package doctor

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// healthy is the facts of a sound three-member cluster.
func healthy() Facts {
	m := func(name string) EtcdMember {
		return EtcdMember{Name: name, Endpoint: "http://" + name, ID: uint64(len(name)), Leader: 7, DBSizeBytes: 100 << 20, DBSizeInUseBytes: 60 << 20, Latency: time.Millisecond}
	}
	return Facts{
		Node: "n1", EtcdKnown: true, EtcdMembers: []EtcdMember{m("e1"), m("e2"), m("e3")}, EtcdQuotaBytes: 8 << 30,
		StoreURL: "s3://bucket", StoreLatency: 30 * time.Millisecond,
		Members: []Member{{ID: "n1"}, {ID: "n2"}}, SelfIsMember: true,
		Owners: map[string]int{"n1": 4, "n2": 5},
	}
}

func check(t *testing.T, r Report, name string) Check {
	t.Helper()
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, r.Checks)
	return Check{}
}

// Each fact that is wrong turns exactly its check to the status the
// table names, with a detail that says what and a hint that says what to
// do; the report's status is the worst.
func TestDiagnose(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Facts)
		check  string
		want   Status
		detail string
	}{
		{"healthy", func(*Facts) {}, "etcd members", OK, "3 of 3 answer"},
		{"draining", func(f *Facts) { f.Draining = true }, "node", Warn, "shutting down"},
		{"etcd unreachable", func(f *Facts) { f.EtcdErr = "context deadline exceeded" }, "etcd", Fail, "does not answer"},
		{"one etcd member down", func(f *Facts) { f.EtcdMembers[2].Err = "connection refused" }, "etcd members", Warn, "2 of 3 answer; down: e3"},
		{"etcd quorum lost", func(f *Facts) { f.EtcdMembers[1].Err, f.EtcdMembers[2].Err = "refused", "refused" }, "etcd members", Fail, "no quorum"},
		{"no leader", func(f *Facts) { f.EtcdMembers[0].Leader = 0 }, "etcd members", Fail, "do not agree on a leader"},
		{"slow etcd", func(f *Facts) { f.EtcdMembers[0].Latency = 3 * time.Second }, "etcd members", Warn, "slow: e1"},
		{"etcd near quota", func(f *Facts) { f.EtcdMembers[1].DBSizeBytes = 7 << 30 }, "etcd size", Warn, "(88%)"},
		{"etcd at quota", func(f *Facts) { f.EtcdMembers[1].DBSizeBytes = 8 << 30 }, "etcd size", Fail, "(100%)"},
		{"quota unknown", func(f *Facts) { f.EtcdQuotaBytes = 0 }, "etcd size", OK, "quota unknown"},
		{"NOSPACE", func(f *Facts) { f.EtcdAlarms = []string{"NOSPACE on member 1"} }, "etcd alarms", Fail, "NOSPACE"},
		{"alarms unreadable", func(f *Facts) { f.EtcdAlarmsErr = "permission denied" }, "etcd alarms", Warn, "permission denied"},
		{"store down", func(f *Facts) { f.StoreErr = "writing the probe object: access denied" }, "object store", Fail, "access denied"},
		{"store slow", func(f *Facts) { f.StoreLatency = 5 * time.Second }, "object store", Warn, "in 5s"},
		{"session gone", func(f *Facts) { f.SelfIsMember = false; f.Members = f.Members[1:] }, "lakegate members", Fail, "not among them"},
		{"members unreadable", func(f *Facts) { f.MembersErr = "unavailable" }, "lakegate members", Fail, "could not be listed"},
		{"orphan owner", func(f *Facts) { f.Owners["n9"] = 2 }, "owners", Warn, "without a session: n9"},
		{"owners listed", func(*Facts) {}, "owners", OK, "9 units owned (topic partitions and other per-unit work): n1 4, n2 5"},
		{"table lag", func(f *Facts) { f.TableLagRecords, f.TableLagLogs = 2_000_000, 3 }, "table lag", Warn, "2000000 records"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := healthy()
			tc.change(&f)
			r := Diagnose(f, Thresholds{})
			c := check(t, r, tc.check)
			if c.Status != tc.want || !strings.Contains(c.Detail, tc.detail) {
				t.Fatalf("%s: %s %q, want %s containing %q", tc.check, c.Status, c.Detail, tc.want, tc.detail)
			}
			if (c.Status == OK) != (c.Hint == "") {
				t.Fatalf("%s: status %s with hint %q: a hint goes with every warning and failure, only with them", tc.check, c.Status, c.Hint)
			}
			if r.Status != Worst(r.Checks) || (tc.name == "healthy" && r.Status != OK) {
				t.Fatalf("report status %s, checks %+v", r.Status, r.Checks)
			}
		})
	}
}

// A store that is not etcd skips the etcd checks; a report survives JSON.
func TestDiagnoseWithoutEtcdAndJSON(t *testing.T) {
	f := healthy()
	f.EtcdKnown = false
	r := Diagnose(f, Thresholds{})
	for _, c := range r.Checks {
		if strings.HasPrefix(c.Name, "etcd") {
			t.Fatalf("etcd check %+v without etcd", c)
		}
	}
	f.StoreErr = "boom"
	r = Diagnose(f, Thresholds{})
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Status != Fail || len(back.Checks) != len(r.Checks) || !strings.Contains(string(b), `"status":"fail"`) {
		t.Fatalf("round trip: %s", b)
	}
}
