package kafka

// Tests of the classic group coordinator (group.go). A harness drives one
// coordinator on a fake clock: h.advance(d) moves the clock and fires what
// is due (tick), so sessions, rebalance timeouts and the initial delay are
// tested without sleeping. Join and Sync answers are captured in joinCall
// and syncCall, which fail the test if a request is answered twice or in
// another version than asked. TestGroupTimerArmed runs the production
// timer under testing/synctest (virtual time, no sleep).
//
//	go test -race -run TestGroup ./kafka/

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Timeouts every join of these tests asks for.
const (
	testSession   = 10 * time.Second
	testRebalance = 60 * time.Second
)

type harness struct {
	t   *testing.T
	c   *groupCoordinator
	now time.Time
}

// newHarness returns a coordinator on a fake clock; the initial rebalance
// delay is none unless o sets one.
func newHarness(t *testing.T, o groupOptions) *harness {
	t.Helper()
	h := &harness{t: t, now: time.Unix(1_700_000_000, 0)}
	o.Clock = func() time.Time { return h.now }
	if o.InitialRebalanceDelay == 0 {
		o.InitialRebalanceDelay = -1
	}
	h.c = newGroupCoordinator(o)
	t.Cleanup(h.c.Close)
	return h
}

// advance moves the clock by d and fires the deadlines due.
func (h *harness) advance(d time.Duration) {
	h.now = h.now.Add(d)
	h.c.tick(h.now)
}

func joinReq(group, member string, protocols ...string) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = 9
	r.Group, r.MemberID = group, member
	r.SessionTimeoutMillis = int32(testSession / time.Millisecond)
	r.RebalanceTimeoutMillis = int32(testRebalance / time.Millisecond)
	r.ProtocolType = "consumer"
	if len(protocols) == 0 {
		protocols = []string{"range"}
	}
	for _, p := range protocols {
		r.Protocols = append(r.Protocols, kmsg.JoinGroupRequestProtocol{Name: p, Metadata: []byte(p + "/meta")})
	}
	return r
}

func syncReq(group, member string, gen int32, assign map[string]string) *kmsg.SyncGroupRequest {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version = 4
	r.Group, r.MemberID, r.Generation = group, member, gen
	for id, a := range assign {
		r.GroupAssignment = append(r.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: []byte(a)})
	}
	return r
}

func hbReq(group, member string, gen int32) *kmsg.HeartbeatRequest {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version = 4
	r.Group, r.MemberID, r.Generation = group, member, gen
	return r
}

func leaveReq(group string, members ...kmsg.LeaveGroupRequestMember) *kmsg.LeaveGroupRequest {
	r := kmsg.NewPtrLeaveGroupRequest()
	r.Version = 5
	r.Group, r.Members = group, members
	return r
}

func strp(s string) *string { return &s }

// joinCall is one JoinGroup's answer, once it comes.
type joinCall struct {
	t      *testing.T
	member string
	resp   *kmsg.JoinGroupResponse
	n      int
}

func (h *harness) join(r *kmsg.JoinGroupRequest) *joinCall { return h.joinAs(r, "client") }

func (h *harness) joinAs(r *kmsg.JoinGroupRequest, clientID string) *joinCall {
	jc := &joinCall{t: h.t, member: r.MemberID}
	version := r.Version
	h.c.Join(r, clientID, "/10.0.0.1", func(resp *kmsg.JoinGroupResponse) {
		jc.n++
		if jc.n > 1 {
			h.t.Errorf("join of %q answered twice", jc.member)
		}
		if resp.Version != version {
			h.t.Errorf("join of %q answered in v%d, asked v%d", jc.member, resp.Version, version)
		}
		jc.resp = resp
	})
	return jc
}

// code is the answer's error code; the join must be answered.
func (jc *joinCall) code() int16 {
	jc.t.Helper()
	if jc.resp == nil {
		jc.t.Fatalf("join of %q not answered", jc.member)
	}
	return jc.resp.ErrorCode
}

// ok is the answer, which must be a success.
func (jc *joinCall) ok() *kmsg.JoinGroupResponse {
	jc.t.Helper()
	if c := jc.code(); c != codeNone {
		jc.t.Fatalf("join of %q: error %d", jc.member, c)
	}
	return jc.resp
}

func (jc *joinCall) parked() {
	jc.t.Helper()
	if jc.resp != nil {
		jc.t.Fatalf("join of %q answered (error %d), want it parked", jc.member, jc.resp.ErrorCode)
	}
}

// syncCall is one SyncGroup's answer, once it comes.
type syncCall struct {
	t      *testing.T
	member string
	resp   *kmsg.SyncGroupResponse
	n      int
}

func (h *harness) sync(r *kmsg.SyncGroupRequest) *syncCall {
	sc := &syncCall{t: h.t, member: r.MemberID}
	version := r.Version
	h.c.Sync(r, func(resp *kmsg.SyncGroupResponse) {
		sc.n++
		if sc.n > 1 {
			h.t.Errorf("sync of %q answered twice", sc.member)
		}
		if resp.Version != version {
			h.t.Errorf("sync of %q answered in v%d, asked v%d", sc.member, resp.Version, version)
		}
		sc.resp = resp
	})
	return sc
}

func (sc *syncCall) code() int16 {
	sc.t.Helper()
	if sc.resp == nil {
		sc.t.Fatalf("sync of %q not answered", sc.member)
	}
	return sc.resp.ErrorCode
}

// assignment is the answered assignment, which must be a success.
func (sc *syncCall) assignment() string {
	sc.t.Helper()
	if c := sc.code(); c != codeNone {
		sc.t.Fatalf("sync of %q: error %d", sc.member, c)
	}
	return string(sc.resp.MemberAssignment)
}

func (sc *syncCall) parked() {
	sc.t.Helper()
	if sc.resp != nil {
		sc.t.Fatalf("sync of %q answered (error %d), want it parked", sc.member, sc.resp.ErrorCode)
	}
}

// memberID joins group without a member id (v9) and returns the member id
// the coordinator requires (KIP-394).
func (h *harness) memberID(group, clientID string, protocols ...string) string {
	h.t.Helper()
	jc := h.joinAs(joinReq(group, "", protocols...), clientID)
	if c := jc.code(); c != codeMemberIDRequired {
		h.t.Fatalf("join without member id: error %d, want MEMBER_ID_REQUIRED", c)
	}
	if !strings.HasPrefix(jc.resp.MemberID, clientID+"-") {
		h.t.Fatalf("member id %q is not %s-<uuid>", jc.resp.MemberID, clientID)
	}
	return jc.resp.MemberID
}

func (h *harness) heartbeat(group, member string, gen int32) int16 {
	return h.c.Heartbeat(hbReq(group, member, gen)).ErrorCode
}

func (h *harness) wantState(group, want string) {
	h.t.Helper()
	if got := h.c.State(group); got != want {
		h.t.Fatalf("group %s is %s, want %s", group, got, want)
	}
}

// syncAll syncs a completed join phase: followers first (they wait), then
// the leader assigning "assign-<id>" to each; every member must get its
// assignment and the group be Stable.
func (h *harness) syncAll(group string, joins map[string]*joinCall) {
	h.t.Helper()
	var leader string
	var gen int32
	for _, jc := range joins {
		r := jc.ok()
		leader, gen = r.LeaderID, r.Generation
	}
	assign := map[string]string{}
	syncs := map[string]*syncCall{}
	for id := range joins {
		assign[id] = "assign-" + id
		if id != leader {
			syncs[id] = h.sync(syncReq(group, id, gen, nil))
			syncs[id].parked()
		}
	}
	syncs[leader] = h.sync(syncReq(group, leader, gen, assign))
	for id, sc := range syncs {
		if got := sc.assignment(); got != "assign-"+id {
			h.t.Fatalf("member %s assigned %q", id, got)
		}
	}
	h.wantState(group, "Stable")
}

// stable builds a Stable group of n dynamic members, joining one at a
// time (each join rebalances); it returns the member ids in join order (the
// first is the leader). The generation is then n.
func (h *harness) stable(group string, n int) []string {
	h.t.Helper()
	var ids []string
	for i := range n {
		id := h.memberID(group, fmt.Sprintf("client%d", i))
		joins := map[string]*joinCall{id: h.join(joinReq(group, id))}
		for _, old := range ids {
			if c := h.heartbeat(group, old, int32(i)); c != codeRebalanceInProgress {
				h.t.Fatalf("heartbeat of %s during a rebalance: %d", old, c)
			}
			joins[old] = h.join(joinReq(group, old))
		}
		ids = append(ids, id)
		for id, jc := range joins {
			if r := jc.ok(); r.Generation != int32(i+1) {
				h.t.Fatalf("member %s joined generation %d, want %d", id, r.Generation, i+1)
			}
		}
		h.syncAll(group, joins)
	}
	return ids
}

func TestGroupTwoMembersJoinSyncHeartbeat(t *testing.T) {
	h := newHarness(t, groupOptions{InitialRebalanceDelay: 3 * time.Second})
	a := h.memberID("g", "ca")
	h.wantState("g", "Empty")
	ja := h.join(joinReq("g", a))
	ja.parked()
	h.wantState("g", "PreparingRebalance")
	b := h.memberID("g", "cb")
	jb := h.join(joinReq("g", b))
	jb.parked()

	// b joined during the initial delay: it is extended once.
	h.advance(3 * time.Second)
	ja.parked()
	jb.parked()
	h.advance(3 * time.Second)
	ra, rb := ja.ok(), jb.ok()
	if ra.Generation != 1 || ra.LeaderID != a || ra.MemberID != a || *ra.Protocol != "range" || *ra.ProtocolType != "consumer" {
		t.Fatalf("leader's join: %+v", ra)
	}
	if len(ra.Members) != 2 || ra.Members[0].MemberID != a || ra.Members[1].MemberID != b || string(ra.Members[1].ProtocolMetadata) != "range/meta" {
		t.Fatalf("leader's members: %+v", ra.Members)
	}
	if rb.Generation != 1 || rb.LeaderID != a || rb.MemberID != b || len(rb.Members) != 0 {
		t.Fatalf("follower's join: %+v", rb)
	}
	h.wantState("g", "CompletingRebalance")
	if c := h.heartbeat("g", b, 1); c != codeNone {
		t.Fatalf("heartbeat between join and sync: %d", c)
	}

	// The follower's sync waits for the leader's.
	sb := h.sync(syncReq("g", b, 1, nil))
	sb.parked()
	sa := h.sync(syncReq("g", a, 1, map[string]string{a: "A", b: "B", "ghost": "X"}))
	if sa.assignment() != "A" || sb.assignment() != "B" {
		t.Fatalf("assignments %q %q", sa.resp.MemberAssignment, sb.resp.MemberAssignment)
	}
	h.wantState("g", "Stable")

	// Heartbeats keep both sessions.
	for range 4 {
		h.advance(8 * time.Second)
		for _, m := range []string{a, b} {
			if c := h.heartbeat("g", m, 1); c != codeNone {
				t.Fatalf("heartbeat of %s: %d", m, c)
			}
		}
	}
	// A late sync in Stable gets the member's assignment.
	if got := h.sync(syncReq("g", b, 1, nil)).assignment(); got != "B" {
		t.Fatalf("sync in Stable: %q", got)
	}
}

func TestGroupJoinValidation(t *testing.T) {
	h := newHarness(t, groupOptions{})
	r := joinReq("", "")
	if c := h.join(r).code(); c != codeInvalidGroupID {
		t.Fatalf("empty group id: %d", c)
	}
	r = joinReq("g", "")
	r.SessionTimeoutMillis = 1000
	if c := h.join(r).code(); c != codeInvalidSessionTimeout {
		t.Fatalf("1 s session: %d", c)
	}
	r = joinReq("g", "")
	r.SessionTimeoutMillis = int32(31 * time.Minute / time.Millisecond)
	if c := h.join(r).code(); c != codeInvalidSessionTimeout {
		t.Fatalf("31 min session: %d", c)
	}
	if c := h.join(joinReq("g", "someone")).code(); c != codeUnknownMemberID {
		t.Fatalf("member id for an unknown group: %d", c)
	}
	h.wantState("g", "Dead")
}

func TestGroupMemberIDRequired(t *testing.T) {
	h := newHarness(t, groupOptions{})
	m1 := h.memberID("g", "cl")
	h.wantState("g", "Empty")
	r := h.join(joinReq("g", m1)).ok()
	if r.Generation != 1 || r.LeaderID != m1 {
		t.Fatalf("join with the required id: %+v", r)
	}
	if h.sync(syncReq("g", m1, 1, map[string]string{m1: "x"})).assignment() != "x" {
		t.Fatal("sync")
	}

	// A pending member id not used within the session timeout expires.
	m2 := h.memberID("g", "cl")
	h.wantState("g", "Stable") // a pending member does not rebalance
	h.advance(5 * time.Second)
	if c := h.heartbeat("g", m1, 1); c != codeNone {
		t.Fatalf("heartbeat: %d", c)
	}
	h.advance(5 * time.Second)
	if c := h.join(joinReq("g", m2)).code(); c != codeUnknownMemberID {
		t.Fatalf("join with an expired pending id: %d", c)
	}

	// A pending member holds a join phase until it joins or expires.
	h.memberID("g", "cl")
	j1 := h.join(joinReq("g", m1)) // the leader's rejoin rebalances
	j1.parked()
	h.wantState("g", "PreparingRebalance")
	h.advance(testSession)
	if r := j1.ok(); r.Generation != 2 || len(r.Members) != 1 {
		t.Fatalf("join after the pending member expired: %+v", r)
	}

	// Before v4 a member joins without being given an id first.
	r3 := joinReq("g3", "")
	r3.Version = 3
	if r := h.joinAs(r3, "old").ok(); !strings.HasPrefix(r.MemberID, "old-") || r.Generation != 1 {
		t.Fatalf("v3 join: %+v", r)
	}
}

func TestGroupRebalanceOnNewMember(t *testing.T) {
	h := newHarness(t, groupOptions{})
	ids := h.stable("g", 2)
	a, b := ids[0], ids[1]
	c := h.memberID("g", "cc")
	jc := h.join(joinReq("g", c))
	jc.parked()
	h.wantState("g", "PreparingRebalance")
	for _, m := range ids {
		if code := h.heartbeat("g", m, 2); code != codeRebalanceInProgress {
			t.Fatalf("heartbeat of %s: %d, want REBALANCE_IN_PROGRESS", m, code)
		}
	}
	ja := h.join(joinReq("g", a))
	ja.parked()
	jb := h.join(joinReq("g", b))
	joins := map[string]*joinCall{a: ja, b: jb, c: jc}
	for id, j := range joins {
		if r := j.ok(); r.Generation != 3 || r.LeaderID != a {
			t.Fatalf("member %s: %+v", id, r)
		}
	}
	if n := len(ja.resp.Members); n != 3 {
		t.Fatalf("leader sees %d members", n)
	}
	if code := h.heartbeat("g", a, 2); code != codeIllegalGeneration {
		t.Fatalf("heartbeat of the old generation: %d", code)
	}
	h.syncAll("g", joins)
}

func TestGroupSessionExpiry(t *testing.T) {
	h := newHarness(t, groupOptions{})
	ids := h.stable("g", 2)
	a, b := ids[0], ids[1]
	h.advance(6 * time.Second)
	if c := h.heartbeat("g", a, 2); c != codeNone {
		t.Fatalf("heartbeat: %d", c)
	}
	h.advance(5 * time.Second) // b's session ends 10 s after its sync
	h.wantState("g", "PreparingRebalance")
	if c := h.heartbeat("g", b, 2); c != codeUnknownMemberID {
		t.Fatalf("expired member's heartbeat: %d", c)
	}
	if c := h.heartbeat("g", a, 2); c != codeRebalanceInProgress {
		t.Fatalf("survivor's heartbeat: %d", c)
	}
	r := h.join(joinReq("g", a)).ok()
	if r.Generation != 3 || len(r.Members) != 1 || r.Members[0].MemberID != a {
		t.Fatalf("rejoin: %+v", r)
	}
}

func TestGroupLeave(t *testing.T) {
	h := newHarness(t, groupOptions{})
	ids := h.stable("g", 3)
	a, b, c := ids[0], ids[1], ids[2]
	resp := h.c.Leave(leaveReq("g",
		kmsg.LeaveGroupRequestMember{MemberID: b},
		kmsg.LeaveGroupRequestMember{MemberID: "nope"},
		kmsg.LeaveGroupRequestMember{InstanceID: strp("ghost")},
	))
	if resp.ErrorCode != 0 || len(resp.Members) != 3 || resp.Members[0].ErrorCode != 0 ||
		resp.Members[1].ErrorCode != codeUnknownMemberID || resp.Members[2].ErrorCode != codeUnknownMemberID {
		t.Fatalf("leave: %+v", resp)
	}
	h.wantState("g", "PreparingRebalance")
	ja := h.join(joinReq("g", a))
	jc := h.join(joinReq("g", c))
	if r := ja.ok(); r.Generation != 4 || len(r.Members) != 2 {
		t.Fatalf("rejoin after a leave: %+v", r)
	}
	jc.ok()

	// v0-v2 answer the one member's code at the top level.
	old := kmsg.NewPtrLeaveGroupRequest()
	old.Version, old.Group, old.MemberID = 0, "g", c
	if r := h.c.Leave(old); r.ErrorCode != 0 || r.Members != nil || r.Version != 0 {
		t.Fatalf("v0 leave: %+v", r)
	}
	old.Version = 1
	if r := h.c.Leave(old); r.ErrorCode != codeUnknownMemberID {
		t.Fatalf("v1 leave of a gone member: %+v", r)
	}
	// The last member's leave empties the group, which can then be deleted.
	if c := h.c.DeleteGroup("g"); c != codeNonEmptyGroup {
		t.Fatalf("delete a group with members: %d", c)
	}
	h.c.Leave(leaveReq("g", kmsg.LeaveGroupRequestMember{MemberID: a}))
	h.wantState("g", "Empty")
	if c := h.c.DeleteGroup("g"); c != 0 {
		t.Fatalf("delete an Empty group: %d", c)
	}
	h.wantState("g", "Dead")
	if c := h.c.DeleteGroup("g"); c != codeGroupIDNotFound {
		t.Fatalf("delete again: %d", c)
	}
	if r := h.c.Leave(leaveReq("g", kmsg.LeaveGroupRequestMember{MemberID: a})); r.Members[0].ErrorCode != codeUnknownMemberID {
		t.Fatalf("leave an unknown group: %+v", r)
	}
	if r := h.c.Leave(leaveReq("")); r.ErrorCode != codeInvalidGroupID {
		t.Fatalf("leave group \"\": %+v", r)
	}
}

func TestGroupRebalanceTimeoutDropsMember(t *testing.T) {
	h := newHarness(t, groupOptions{})
	ids := h.stable("g", 3)
	a, b, c := ids[0], ids[1], ids[2]
	d := h.memberID("g", "cd")
	jd := h.join(joinReq("g", d))
	jb := h.join(joinReq("g", b))
	jc := h.join(joinReq("g", c))
	// The leader keeps heartbeating but never rejoins.
	for range 11 {
		h.advance(5 * time.Second)
		if code := h.heartbeat("g", a, 3); code != codeRebalanceInProgress {
			t.Fatalf("heartbeat: %d", code)
		}
		jd.parked()
	}
	h.advance(5 * time.Second) // the rebalance timeout
	joins := map[string]*joinCall{b: jb, c: jc, d: jd}
	for id, j := range joins {
		if r := j.ok(); r.Generation != 4 || r.LeaderID != b {
			t.Fatalf("member %s after the rebalance timeout: %+v", id, r)
		}
	}
	if n := len(jb.resp.Members); n != 3 {
		t.Fatalf("new leader sees %d members", n)
	}
	if code := h.heartbeat("g", a, 3); code != codeUnknownMemberID {
		t.Fatalf("dropped member's heartbeat: %d", code)
	}
	h.syncAll("g", joins)
}

func TestGroupSyncTimeoutDropsMember(t *testing.T) {
	h := newHarness(t, groupOptions{})
	ids := h.stable("g", 1)
	a := ids[0]
	b := h.memberID("g", "cb")
	jb := h.join(joinReq("g", b))
	ja := h.join(joinReq("g", a))
	ja.ok()
	jb.ok()
	if h.sync(syncReq("g", a, 2, map[string]string{a: "A", b: "B"})).assignment() != "A" {
		t.Fatal("leader's sync")
	}
	// b heartbeats but never syncs: dropped at the rebalance timeout.
	for range 11 {
		h.advance(5 * time.Second)
		if code := h.heartbeat("g", b, 2); code != codeNone {
			t.Fatalf("heartbeat: %d", code)
		}
		if code := h.heartbeat("g", a, 2); code != codeNone {
			t.Fatalf("heartbeat: %d", code)
		}
	}
	h.advance(5 * time.Second)
	h.wantState("g", "PreparingRebalance")
	if code := h.heartbeat("g", b, 2); code != codeUnknownMemberID {
		t.Fatalf("unsynced member's heartbeat: %d", code)
	}
	if code := h.heartbeat("g", a, 2); code != codeRebalanceInProgress {
		t.Fatalf("leader's heartbeat: %d", code)
	}
}

func TestGroupNewMemberJoinTimeout(t *testing.T) {
	h := newHarness(t, groupOptions{})
	ids := h.stable("g", 1)
	a := ids[0]
	r := joinReq("g", "")
	r.Version = 3
	r.RebalanceTimeoutMillis = int32(10 * time.Minute / time.Millisecond)
	jb := h.join(r)
	jb.parked()
	// a never rejoins; b's parked first join does not keep b: it expires
	// after 5 minutes.
	for range 59 {
		h.advance(5 * time.Second)
		h.heartbeat("g", a, 1)
	}
	jb.parked()
	h.advance(5 * time.Second)
	if c := jb.code(); c != codeUnknownMemberID || jb.resp.MemberID != "" {
		t.Fatalf("expired new member: %+v", jb.resp)
	}
}

func TestGroupInconsistentProtocols(t *testing.T) {
	h := newHarness(t, groupOptions{})
	r := joinReq("g", "")
	r.ProtocolType = ""
	if c := h.join(r).code(); c != codeInconsistentGroupProtocol {
		t.Fatalf("no protocol type: %d", c)
	}
	r = joinReq("g", "")
	r.Protocols = nil
	if c := h.join(r).code(); c != codeInconsistentGroupProtocol {
		t.Fatalf("no protocols: %d", c)
	}
	h.wantState("g", "Dead") // refused first joins leave no group

	ids := h.stable("g", 1)
	if c := h.join(joinReq("g", "", "roundrobin")).code(); c != codeInconsistentGroupProtocol {
		t.Fatalf("no common protocol: %d", c)
	}
	r = joinReq("g", "")
	r.ProtocolType = "connect"
	if c := h.join(r).code(); c != codeInconsistentGroupProtocol {
		t.Fatalf("another protocol type: %d", c)
	}
	jc := h.join(joinReq("g", ids[0], "roundrobin"))
	if jc.code() != codeInconsistentGroupProtocol || jc.resp.MemberID != ids[0] {
		t.Fatalf("member rejoining with no common protocol: %+v", jc.resp)
	}
	h.wantState("g", "Stable")
	// A member supporting the group's protocol among others joins.
	b := h.memberID("g", "cb")
	jb := h.join(joinReq("g", b, "roundrobin", "range"))
	ja := h.join(joinReq("g", ids[0]))
	if p := *ja.ok().Protocol; p != "range" || *jb.ok().Protocol != "range" {
		t.Fatalf("protocol %q", p)
	}
}

func TestGroupProtocolSelection(t *testing.T) {
	h := newHarness(t, groupOptions{InitialRebalanceDelay: time.Second})
	// Each member votes for its first common protocol; the most voted wins.
	var calls []*joinCall
	for i, protocols := range [][]string{{"x", "y", "z"}, {"y", "x"}, {"y", "x", "z"}} {
		id := h.memberID("g", fmt.Sprintf("c%d", i), protocols...)
		calls = append(calls, h.join(joinReq("g", id, protocols...)))
	}
	h.advance(time.Second)
	h.advance(time.Second)
	for _, c := range calls {
		if p := *c.ok().Protocol; p != "y" {
			t.Fatalf("selected %q, want y", p)
		}
	}
	if md := string(calls[0].resp.Members[0].ProtocolMetadata); md != "y/meta" {
		t.Fatalf("leader gets metadata %q for the selected protocol", md)
	}
}

func TestGroupSyncErrors(t *testing.T) {
	h := newHarness(t, groupOptions{})
	if c := h.sync(syncReq("nope", "m", 1, nil)).code(); c != codeUnknownMemberID {
		t.Fatalf("sync to an unknown group: %d", c)
	}
	if c := h.sync(syncReq("", "m", 1, nil)).code(); c != codeInvalidGroupID {
		t.Fatalf("sync to group \"\": %d", c)
	}
	ids := h.stable("g", 2)
	a, b := ids[0], ids[1]
	if c := h.sync(syncReq("g", "nope", 2, nil)).code(); c != codeUnknownMemberID {
		t.Fatalf("unknown member: %d", c)
	}
	if c := h.sync(syncReq("g", b, 1, nil)).code(); c != codeIllegalGeneration {
		t.Fatalf("old generation: %d", c)
	}
	v5 := syncReq("g", b, 2, nil)
	v5.Version = 5
	if c := h.sync(v5).code(); c != codeInconsistentGroupProtocol {
		t.Fatalf("v5 without protocol: %d", c)
	}
	v5.ProtocolType, v5.Protocol = strp("consumer"), strp("roundrobin")
	if c := h.sync(v5).code(); c != codeInconsistentGroupProtocol {
		t.Fatalf("v5 with another protocol: %d", c)
	}
	v5.Protocol = strp("range")
	sc := h.sync(v5)
	if sc.assignment() != "assign-"+b || *sc.resp.Protocol != "range" || *sc.resp.ProtocolType != "consumer" {
		t.Fatalf("v5 sync: %+v", sc.resp)
	}

	// During the join phase: REBALANCE_IN_PROGRESS.
	jb := h.join(joinReq("g", b, "range", "roundrobin"))
	if c := h.sync(syncReq("g", b, 2, nil)).code(); c != codeRebalanceInProgress {
		t.Fatalf("sync while preparing: %d", c)
	}
	ja := h.join(joinReq("g", a))
	ja.ok()
	jb.ok()
	// A parked sync superseded by another is answered; a rebalance
	// answers the parked ones.
	s1 := h.sync(syncReq("g", b, 3, nil))
	s2 := h.sync(syncReq("g", b, 3, nil))
	if c := s1.code(); c != codeRebalanceInProgress {
		t.Fatalf("superseded sync: %d", c)
	}
	s2.parked()
	c := h.memberID("g", "cc")
	h.join(joinReq("g", c)).parked()
	if code := s2.code(); code != codeRebalanceInProgress {
		t.Fatalf("parked sync at a rebalance: %d", code)
	}
}

func TestGroupLimits(t *testing.T) {
	h := newHarness(t, groupOptions{MaxMembers: 2, MaxGroups: 1, MaxMemberBytes: 1000})
	ids := h.stable("g", 2)
	if c := h.join(joinReq("g", "")).code(); c != codeGroupMaxSizeReached {
		t.Fatalf("third member (v9): %d", c)
	}
	r := joinReq("g", "")
	r.Version = 3
	if c := h.join(r).code(); c != codeGroupMaxSizeReached {
		t.Fatalf("third member (v3): %d", c)
	}
	h.wantState("g", "Stable")
	r = joinReq("g", ids[1])
	r.Protocols[0].Metadata = make([]byte, 1000)
	if c := h.join(r).code(); c != codeInvalidRequest {
		t.Fatalf("metadata over the bound: %d", c)
	}

	// The one group slot is taken by a group with members.
	if c := h.join(joinReq("h", "")).code(); c != codeCoordinatorNotAvailable {
		t.Fatalf("a group beyond MaxGroups: %d", c)
	}
	h.c.Leave(leaveReq("g", kmsg.LeaveGroupRequestMember{MemberID: ids[0]}, kmsg.LeaveGroupRequestMember{MemberID: ids[1]}))
	h.wantState("g", "Empty")
	// An Empty group is evicted for a new one.
	h.memberID("h", "ch")
	h.wantState("g", "Dead")
	h.wantState("h", "Empty")
	// Pending member ids are bounded by MaxMembers too.
	h.memberID("h", "ch")
	if c := h.join(joinReq("h", "")).code(); c != codeGroupMaxSizeReached {
		t.Fatalf("third pending member: %d", c)
	}
}

func TestGroupAssignmentTooLarge(t *testing.T) {
	h := newHarness(t, groupOptions{MaxMemberBytes: 1000})
	a := h.stable("g", 1)[0]
	b := h.memberID("g", "cb")
	jb := h.join(joinReq("g", b))
	h.join(joinReq("g", a)).ok()
	jb.ok()
	sb := h.sync(syncReq("g", b, 2, nil))
	sa := h.sync(syncReq("g", a, 2, map[string]string{a: "A", b: strings.Repeat("x", 1001)}))
	if sa.code() != codeUnknownServerError || sb.code() != codeUnknownServerError {
		t.Fatalf("oversized assignment: leader %d follower %d", sa.code(), sb.code())
	}
	h.wantState("g", "PreparingRebalance")
}

func TestGroupCommitAllowed(t *testing.T) {
	h := newHarness(t, groupOptions{})
	for _, tc := range []struct {
		member  string
		gen     int32
		version int16
		want    int16
	}{
		{"", -1, 8, codeNone},
		{"m", 1, 8, codeIllegalGeneration},
		{"m", 1, 9, codeGroupIDNotFound},
	} {
		if c := h.c.CommitAllowed("nope", tc.member, tc.gen, nil, tc.version); c != tc.want {
			t.Fatalf("unknown group, %+v: %d", tc, c)
		}
	}
	if c := h.c.CommitAllowed("", "", -1, nil, 8); c != codeInvalidGroupID {
		t.Fatalf("group \"\": %d", c)
	}
	ids := h.stable("g", 2)
	a, b := ids[0], ids[1]
	for _, tc := range []struct {
		member string
		gen    int32
		inst   *string
		want   int16
	}{
		{"", -1, nil, codeUnknownMemberID}, // a standalone commit to a live group
		{a, 2, nil, codeNone},
		{a, 1, nil, codeIllegalGeneration},
		{"nope", 2, nil, codeUnknownMemberID},
		{a, 2, strp("i"), codeUnknownMemberID},
	} {
		if c := h.c.CommitAllowed("g", tc.member, tc.gen, tc.inst, 8); c != tc.want {
			t.Fatalf("Stable group, %+v: %d", tc, c)
		}
	}
	// A commit keeps the member's session, as a heartbeat does.
	h.advance(8 * time.Second)
	h.heartbeat("g", b, 2)
	if c := h.c.CommitAllowed("g", a, 2, nil, 8); c != codeNone {
		t.Fatalf("commit: %d", c)
	}
	h.advance(8 * time.Second)
	h.wantState("g", "Stable")

	// PreparingRebalance: members of the current generation still commit.
	jb := h.join(joinReq("g", b, "range", "roundrobin"))
	if c := h.c.CommitAllowed("g", a, 2, nil, 8); c != codeNone {
		t.Fatalf("commit while preparing: %d", c)
	}
	h.join(joinReq("g", a)).ok()
	jb.ok()
	// CompletingRebalance: REBALANCE_IN_PROGRESS.
	if c := h.c.CommitAllowed("g", a, 3, nil, 8); c != codeRebalanceInProgress {
		t.Fatalf("commit while completing: %d", c)
	}
	h.c.Leave(leaveReq("g", kmsg.LeaveGroupRequestMember{MemberID: a}, kmsg.LeaveGroupRequestMember{MemberID: b}))
	h.wantState("g", "Empty")
	if c := h.c.CommitAllowed("g", "", -1, nil, 8); c != codeNone {
		t.Fatalf("standalone commit to an Empty group: %d", c)
	}
	if c := h.c.CommitAllowed("g", a, 3, nil, 8); c != codeUnknownMemberID {
		t.Fatalf("old member's commit to an Empty group: %d", c)
	}
}

func TestGroupDescribeList(t *testing.T) {
	h := newHarness(t, groupOptions{})
	ids := h.stable("s", 2)
	h.memberID("e", "ce") // an Empty group with a pending member
	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.Version = 5
	dreq.Groups = []string{"s", "e", "nope"}
	d := h.c.DescribeGroups(dreq)
	if d.Version != 5 || len(d.Groups) != 3 {
		t.Fatalf("describe: %+v", d)
	}
	s := d.Groups[0]
	if s.Group != "s" || s.State != "Stable" || s.ProtocolType != "consumer" || s.Protocol != "range" || len(s.Members) != 2 {
		t.Fatalf("describe Stable: %+v", s)
	}
	m := s.Members[0]
	if m.MemberID != ids[0] || m.ClientID != "client" || m.ClientHost != "/10.0.0.1" ||
		string(m.ProtocolMetadata) != "range/meta" || string(m.MemberAssignment) != "assign-"+ids[0] {
		t.Fatalf("described member: %+v", m)
	}
	if e := d.Groups[1]; e.State != "Empty" || len(e.Members) != 0 {
		t.Fatalf("describe Empty: %+v", e)
	}
	if n := d.Groups[2]; n.State != "Dead" || n.ErrorCode != 0 {
		t.Fatalf("describe unknown: %+v", n)
	}
	// While rebalancing, members are described without metadata.
	h.join(joinReq("s", ids[1], "range", "sticky")).parked()
	dreq.Groups = []string{"s"}
	if p := h.c.DescribeGroups(dreq).Groups[0]; p.State != "PreparingRebalance" || p.Protocol != "" || p.Members[0].ProtocolMetadata != nil {
		t.Fatalf("describe PreparingRebalance: %+v", p)
	}

	list := func(states, types []string) []string {
		r := kmsg.NewPtrListGroupsRequest()
		r.Version, r.StatesFilter, r.TypesFilter = 5, states, types
		resp := h.c.ListGroups(r)
		var out []string
		for _, g := range resp.Groups {
			if g.GroupType != "classic" {
				t.Fatalf("listed type %q", g.GroupType)
			}
			out = append(out, g.Group+":"+g.GroupState+":"+g.ProtocolType)
		}
		return out
	}
	if got := fmt.Sprint(list(nil, nil)); got != "[e:Empty: s:PreparingRebalance:consumer]" {
		t.Fatalf("list all: %s", got)
	}
	if got := fmt.Sprint(list([]string{" empty "}, nil)); got != "[e:Empty:]" {
		t.Fatalf("list Empty: %s", got)
	}
	if got := fmt.Sprint(list(nil, []string{"Classic"})); got != "[e:Empty: s:PreparingRebalance:consumer]" {
		t.Fatalf("list classic: %s", got)
	}
	if got := list(nil, []string{"consumer"}); got != nil {
		t.Fatalf("list consumer-protocol groups: %v", got)
	}
}

func TestGroupStaticMembership(t *testing.T) {
	h := newHarness(t, groupOptions{})
	sr := joinReq("g", "")
	sr.InstanceID = strp("ia")
	a := h.joinAs(sr, "ca").ok().MemberID // static: no MEMBER_ID_REQUIRED
	if !strings.HasPrefix(a, "ia-") {
		t.Fatalf("static member id %q", a)
	}
	h.sync(syncReq("g", a, 1, map[string]string{a: "A1"})).assignment()
	b := h.memberID("g", "cb")
	jb := h.join(joinReq("g", b))
	sr = joinReq("g", a)
	sr.InstanceID = strp("ia")
	ja := h.join(sr)
	h.syncAll("g", map[string]*joinCall{a: ja, b: jb})

	// A restarted static member (no member id) replaces its old id without
	// a rebalance; at v9 the leader is told to skip the assignment.
	sr = joinReq("g", "")
	sr.InstanceID = strp("ia")
	r := h.join(sr).ok()
	a2 := r.MemberID
	if a2 == a || r.Generation != 2 || r.LeaderID != a2 || !r.SkipAssignment || len(r.Members) != 2 {
		t.Fatalf("static rejoin (v9): %+v", r)
	}
	h.wantState("g", "Stable")
	old := hbReq("g", a, 2)
	old.InstanceID = strp("ia")
	if c := h.c.Heartbeat(old).ErrorCode; c != codeFencedInstanceID {
		t.Fatalf("old id's heartbeat: %d", c)
	}
	if c := h.heartbeat("g", a, 2); c != codeUnknownMemberID {
		t.Fatalf("old id's heartbeat without instance: %d", c)
	}
	if got := h.sync(syncReq("g", a2, 2, nil)).assignment(); got != "assign-"+a {
		t.Fatalf("replaced member's assignment %q", got)
	}
	// Before v9 the answer names the old leader id, so the new one does
	// not assign.
	sr.Version = 8
	r = h.join(sr).ok()
	if r.LeaderID != a2 || r.SkipAssignment || len(r.Members) != 0 || r.Generation != 2 {
		t.Fatalf("static rejoin (v8): %+v", r)
	}
	// Removal by instance id.
	lr := h.c.Leave(leaveReq("g", kmsg.LeaveGroupRequestMember{InstanceID: strp("ia")}))
	if lr.Members[0].ErrorCode != 0 {
		t.Fatalf("leave by instance id: %+v", lr)
	}
	h.wantState("g", "PreparingRebalance")
	if r := h.join(joinReq("g", b)).ok(); r.Generation != 3 || len(r.Members) != 1 {
		t.Fatalf("after the static member left: %+v", r)
	}
}

func TestGroupStaticMemberKeptAtJoinTimeout(t *testing.T) {
	h := newHarness(t, groupOptions{})
	sr := joinReq("g", "")
	sr.InstanceID = strp("s")
	s := h.join(sr).ok().MemberID
	h.sync(syncReq("g", s, 1, map[string]string{s: "S"})).assignment()
	d := h.memberID("g", "cd")
	jd := h.join(joinReq("g", d))
	// s heartbeats but does not rejoin: a static member is not removed at
	// the rebalance timeout; the leadership goes to a member that joined.
	for range 12 {
		h.advance(5 * time.Second)
		h.c.Heartbeat(&kmsg.HeartbeatRequest{Version: 4, Group: "g", MemberID: s, Generation: 1, InstanceID: strp("s")})
	}
	r := jd.ok()
	if r.Generation != 2 || r.LeaderID != d || len(r.Members) != 2 {
		t.Fatalf("join phase end with a static member not rejoined: %+v", r)
	}
}

func TestGroupRejoinWhileStable(t *testing.T) {
	h := newHarness(t, groupOptions{})
	ids := h.stable("g", 2)
	a, b := ids[0], ids[1]
	// A follower rejoining with unchanged metadata gets the current
	// generation back: no rebalance (cooperative-sticky relies on it).
	r := h.join(joinReq("g", b)).ok()
	if r.Generation != 2 || r.LeaderID != a || len(r.Members) != 0 {
		t.Fatalf("follower rejoin: %+v", r)
	}
	h.wantState("g", "Stable")
	// With changed metadata it rebalances.
	jb := h.join(joinReq("g", b, "cooperative-sticky", "range"))
	jb.parked()
	h.wantState("g", "PreparingRebalance")
	ja := h.join(joinReq("g", a))
	ja.ok()
	jb.ok()
	// CompletingRebalance: a rejoin with the same metadata gets the
	// generation again (the leader's with the members).
	if r := h.join(joinReq("g", a)).ok(); r.Generation != 3 || len(r.Members) != 2 {
		t.Fatalf("leader rejoin while completing: %+v", r)
	}
	h.syncAll("g", map[string]*joinCall{a: ja, b: jb})
	// The leader's rejoin always rebalances.
	h.join(joinReq("g", a)).parked()
	h.wantState("g", "PreparingRebalance")
}

func TestGroupDropAndClose(t *testing.T) {
	h := newHarness(t, groupOptions{})
	ids := h.stable("g", 2)
	c := h.memberID("g", "cc")
	jc := h.join(joinReq("g", c))
	ja := h.join(joinReq("g", ids[0]))
	jc.parked()
	ja.parked()
	h.c.Drop("g")
	if jc.code() != codeNotCoordinator || ja.code() != codeNotCoordinator {
		t.Fatalf("parked joins at Drop: %d %d", jc.code(), ja.code())
	}
	h.wantState("g", "Dead")
	if code := h.heartbeat("g", ids[0], 2); code != codeUnknownMemberID {
		t.Fatalf("heartbeat after Drop: %d", code)
	}
	h.advance(time.Hour) // the dropped group's timers are gone

	ids = h.stable("k", 2)
	d := h.memberID("k", "cd")
	jd := h.join(joinReq("k", d))
	ja = h.join(joinReq("k", ids[0]))
	jb := h.join(joinReq("k", ids[1]))
	jd.ok()
	ja.ok()
	jb.ok()
	sd := h.sync(syncReq("k", d, 3, nil))
	sd.parked()
	h.c.Close()
	if sd.code() != codeNotCoordinator {
		t.Fatalf("parked sync at Close: %d", sd.code())
	}
	if code := h.join(joinReq("k", "")).code(); code != codeCoordinatorNotAvailable {
		t.Fatalf("join after Close: %d", code)
	}
	if code := h.heartbeat("k", d, 3); code != codeCoordinatorNotAvailable {
		t.Fatalf("heartbeat after Close: %d", code)
	}
	if code := h.sync(syncReq("k", d, 3, nil)).code(); code != codeCoordinatorNotAvailable {
		t.Fatalf("sync after Close: %d", code)
	}
	if code := h.c.CommitAllowed("k", "", -1, nil, 8); code != codeCoordinatorNotAvailable {
		t.Fatalf("commit after Close: %d", code)
	}
	if r := h.c.ListGroups(kmsg.NewPtrListGroupsRequest()); r.ErrorCode != codeCoordinatorNotAvailable {
		t.Fatalf("list after Close: %+v", r)
	}
}

// TestGroupTimerArmed runs the production timer (no Clock) in a synctest
// bubble: virtual time moves when every goroutine waits on a reply, so
// the deadlines fire through time.AfterFunc without a real wait.
func TestGroupTimerArmed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newGroupCoordinator(groupOptions{})
		defer c.Close()
		join := func(r *kmsg.JoinGroupRequest) chan *kmsg.JoinGroupResponse {
			ch := make(chan *kmsg.JoinGroupResponse, 1)
			c.Join(r, "client", "host", func(resp *kmsg.JoinGroupResponse) { ch <- resp })
			return ch
		}
		start := time.Now()
		r := joinReq("g", "")
		r.Version = 3
		a := <-join(r) // answered by the timer after the 3 s initial delay
		if a.ErrorCode != 0 || a.Generation != 1 || time.Since(start) != 3*time.Second {
			t.Fatalf("initial join: %+v after %v", a, time.Since(start))
		}
		c.Sync(syncReq("g", a.MemberID, 1, nil), func(*kmsg.SyncGroupResponse) {})
		// b joins; a neither heartbeats nor rejoins: its session expires
		// and b's join completes without it.
		b := <-join(r)
		if b.ErrorCode != 0 || b.Generation != 2 || len(b.Members) != 1 || time.Since(start) != 3*time.Second+testSession {
			t.Fatalf("join after the session expiry: %+v after %v", b, time.Since(start))
		}
	})
}

// TestGroupConcurrent exercises the lock under -race: members heartbeat,
// describe and commit from goroutines while others join and leave.
func TestGroupConcurrent(t *testing.T) {
	h := newHarness(t, groupOptions{})
	ids := h.stable("g", 3)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			group := fmt.Sprintf("c%d", i)
			for range 50 {
				for _, id := range ids {
					h.c.Heartbeat(hbReq("g", id, 3))
					h.c.CommitAllowed("g", id, 3, nil, 8)
				}
				h.c.DescribeGroups(&kmsg.DescribeGroupsRequest{Groups: []string{"g", group}})
				h.c.ListGroups(kmsg.NewPtrListGroupsRequest())
				r := joinReq(group, "")
				r.Version = 3
				done := make(chan *kmsg.JoinGroupResponse, 1)
				h.c.Join(r, "x", "y", func(resp *kmsg.JoinGroupResponse) { done <- resp })
				resp := <-done
				h.c.Leave(leaveReq(group, kmsg.LeaveGroupRequestMember{MemberID: resp.MemberID}))
			}
		}()
	}
	wg.Wait()
	h.wantState("g", "Stable")
}

func TestGroupOptionDefaults(t *testing.T) {
	o := groupOptions{}.withDefaults()
	if o.MaxGroups != 10_000 || o.MaxMembers != 1000 || o.MaxMemberBytes != 1<<20 || o.MinSession != 6*time.Second ||
		o.MaxSession != 30*time.Minute || o.InitialRebalanceDelay != 3*time.Second || o.NewMemberJoinTimeout != 5*time.Minute {
		t.Fatalf("defaults: %+v", o)
	}
	if o := (groupOptions{InitialRebalanceDelay: -1}).withDefaults(); o.InitialRebalanceDelay != 0 {
		t.Fatalf("negative initial delay: %v", o.InitialRebalanceDelay)
	}
}
