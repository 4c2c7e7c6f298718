package kafka

// The classic consumer-group coordinator (docs/kafka.md, "Consumer groups"):
// JoinGroup, SyncGroup, Heartbeat and LeaveGroup, with ListGroups,
// DescribeGroups, DeleteGroups and the membership check of OffsetCommit.
// It follows Apache Kafka's classic GroupCoordinator rule for rule (4.x
// group-coordinator: GroupMetadataManager's classicGroup* methods and
// classic/ClassicGroup); where it departs from Kafka, the comment at the
// place says so. It holds membership only: committed offsets are cursors
// and are the caller's (the OffsetCommit/OffsetFetch handlers).
//
// State machine of one group (Kafka's ClassicGroupState):
//
//	Empty               -> PreparingRebalance   a member joins
//	PreparingRebalance  -> CompletingRebalance  the join phase ends with members
//	PreparingRebalance  -> Empty                the join phase ends with none
//	CompletingRebalance -> Stable               the leader's SyncGroup
//	CompletingRebalance -> PreparingRebalance   a join with new metadata, a leave, an expiry
//	Stable              -> PreparingRebalance   a new member, the leader's rejoin, a rejoin
//	                                            with new metadata, a leave, an expiry
//
//   - Empty: no members (pending KIP-394 member ids may exist). The first
//     member's join starts the initial rebalance, which waits
//     InitialRebalanceDelay (extended while members keep arriving, up to the
//     rebalance timeout) before it completes.
//   - PreparingRebalance: the join phase. JoinGroups are parked until every
//     member has rejoined and no pending member is left, or the rebalance
//     timeout (the largest of the members') expires: then dynamic members
//     that did not rejoin are removed, the generation is bumped, a protocol
//     is selected, and every parked JoinGroup is answered (the leader's with
//     every member's metadata).
//   - CompletingRebalance: SyncGroups are parked until the leader's
//     arrives with the assignment; all are then answered and the group is
//     Stable. Members that do not sync within the rebalance timeout are
//     removed and the group rebalances again.
//   - Stable: heartbeats keep sessions; a new member, the leader's rejoin,
//     a member's rejoin with changed metadata, a leave or a session expiry
//     start a rebalance; members learn it from REBALANCE_IN_PROGRESS on
//     their heartbeat and rejoin.
//   - Dead: a group this coordinator does not hold (never stored).
//
// Concurrency: all state is under groupCoordinator.mu (one mutex for every
// group; the work under it is a few map operations). Parked requests are
// answered through their reply functions, which are queued while the lock
// is held and called after it is released (groupCoordinator.unlock), so a
// reply may call back into the coordinator. Timers are entries of one heap
// under the same lock (session expiry per member, join and sync deadlines
// per group, KIP-394 pending-member expiry); tick(now) fires the due ones.
// In production one time.AfterFunc, re-armed to the earliest entry, calls
// tick; with groupOptions.Clock set no timer is armed and the caller (a
// test) drives time with tick. No goroutine is started per group or member.

import (
	"container/heap"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka error codes the group coordinator answers (Kafka's Errors.java).
const (
	codeNone                      int16 = 0
	codeUnknownServerError        int16 = -1
	codeCoordinatorNotAvailable   int16 = 15
	codeNotCoordinator            int16 = 16
	codeIllegalGeneration         int16 = 22
	codeInconsistentGroupProtocol int16 = 23
	codeInvalidGroupID            int16 = 24
	codeUnknownMemberID           int16 = 25
	codeInvalidSessionTimeout     int16 = 26
	codeRebalanceInProgress       int16 = 27
	codeInvalidRequest            int16 = 42
	codeNonEmptyGroup             int16 = 68
	codeGroupIDNotFound           int16 = 69
	codeMemberIDRequired          int16 = 79
	codeGroupMaxSizeReached       int16 = 81
	codeFencedInstanceID          int16 = 82
)

// groupType is the type ListGroups v5+ answers for every group here: the
// classic protocol is the only one this coordinator runs.
const groupType = "classic"

// Defaults of groupOptions.
const (
	defaultMaxGroups             = 10_000
	defaultMaxMembers            = 1000
	defaultMaxMemberBytes        = 1 << 20
	defaultMinSession            = 6 * time.Second
	defaultMaxSession            = 30 * time.Minute
	defaultInitialRebalanceDelay = 3 * time.Second
	defaultNewMemberJoinTimeout  = 5 * time.Minute
)

// protocolEntryBytes is what one protocol of a JoinGroup counts against
// MaxMemberBytes beyond its name and metadata, so that many empty
// protocols are bounded too.
const protocolEntryBytes = 32

// groupOptions configures a groupCoordinator. A zero field takes its
// default.
type groupOptions struct {
	// MaxGroups bounds the groups held at once (default 10 000). A
	// JoinGroup creating a group beyond it first evicts the Empty group
	// that has been Empty longest; when every group has members it is
	// refused with COORDINATOR_NOT_AVAILABLE (retriable: the client backs
	// off and joins again). Kafka has no such limit.
	MaxGroups int
	// MaxMembers bounds one group's members, Kafka's group.max.size
	// (default 1000; Kafka's default is unbounded): a member beyond it is
	// refused with GROUP_MAX_SIZE_REACHED. It also bounds the KIP-394
	// pending member ids of a group (Kafka does not bound them).
	MaxMembers int
	// MaxMemberBytes bounds one member's protocols (names, metadata and
	// protocolEntryBytes each; default 1 MiB): a JoinGroup above it is
	// refused with INVALID_REQUEST. A leader's assignment of more bytes to
	// one member fails the SyncGroup as Kafka fails a group record too
	// large to append: every parked SyncGroup gets UNKNOWN_SERVER_ERROR and
	// the group rebalances.
	MaxMemberBytes int
	// MinSession and MaxSession bound a JoinGroup's session timeout,
	// Kafka's group.min.session.timeout.ms and group.max.session.timeout.ms
	// (defaults 6 s and 30 min); outside them: INVALID_SESSION_TIMEOUT.
	MinSession, MaxSession time.Duration
	// InitialRebalanceDelay is how long an Empty group's first rebalance
	// waits for more members, Kafka's group.initial.rebalance.delay.ms
	// (default 3 s; negative: none, the first join completes at once).
	InitialRebalanceDelay time.Duration
	// NewMemberJoinTimeout expires a new member whose first JoinGroup is
	// still parked (Kafka's 5 min classicGroupNewMemberJoinTimeoutMs;
	// default 5 min): it is answered UNKNOWN_MEMBER_ID and removed.
	NewMemberJoinTimeout time.Duration
	// Clock, when set, replaces time.Now and disables the coordinator's
	// own timer: the caller fires due deadlines with tick (tests).
	Clock func() time.Time
}

// withDefaults returns o with its zero fields at their defaults.
func (o groupOptions) withDefaults() groupOptions {
	if o.MaxGroups <= 0 {
		o.MaxGroups = defaultMaxGroups
	}
	if o.MaxMembers <= 0 {
		o.MaxMembers = defaultMaxMembers
	}
	if o.MaxMemberBytes <= 0 {
		o.MaxMemberBytes = defaultMaxMemberBytes
	}
	if o.MinSession <= 0 {
		o.MinSession = defaultMinSession
	}
	if o.MaxSession <= 0 {
		o.MaxSession = defaultMaxSession
	}
	switch {
	case o.InitialRebalanceDelay == 0:
		o.InitialRebalanceDelay = defaultInitialRebalanceDelay
	case o.InitialRebalanceDelay < 0:
		o.InitialRebalanceDelay = 0
	}
	if o.NewMemberJoinTimeout <= 0 {
		o.NewMemberJoinTimeout = defaultNewMemberJoinTimeout
	}
	return o
}

// groupState is a group's state; its String is the name Kafka answers in
// ListGroups and DescribeGroups.
type groupState int8

const (
	groupEmpty groupState = iota
	groupPreparingRebalance
	groupCompletingRebalance
	groupStable
	groupDead
)

var groupStateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

// String is the state's name in Kafka's answers.
func (s groupState) String() string { return groupStateNames[s] }

// groupCoordinator runs the classic group protocol for the groups this node
// coordinates. Its methods are safe for concurrent use; Join and Sync
// answer through reply, exactly once, possibly later (from another request
// or from the timer goroutine), never while holding the lock; the other
// methods answer by returning. Responses carry the request's version.
// Response slices may alias the coordinator's stored metadata and
// assignments: they are read-only. Requests are not retained (what is kept
// is copied).
type groupCoordinator struct {
	o      groupOptions
	now    func() time.Time
	manual bool // Clock was set: tick is driven by the caller

	mu struct {
		sync.Mutex
		groups  map[string]*group
		timers  timerHeap
		seq     uint64   // orders timers due at the same instant
		out     []func() // replies to call once mu is released
		closed  bool
		timer   *time.Timer // fires tick at armedAt; nil until first armed
		armed   bool
		armedAt time.Time
	}
}

// newGroupCoordinator returns a coordinator holding no group.
func newGroupCoordinator(o groupOptions) *groupCoordinator {
	o = o.withDefaults()
	c := &groupCoordinator{o: o, now: o.Clock, manual: o.Clock != nil}
	if c.now == nil {
		c.now = time.Now
	}
	c.mu.groups = make(map[string]*group)
	return c
}

// group is one consumer group's membership (Kafka's ClassicGroup).
type group struct {
	id         string
	state      groupState
	prevState  groupState
	stateSince time.Time
	// protocolType is the members' protocol type ("consumer" for Kafka
	// consumers), set by the first member and kept while Empty.
	protocolType    string
	hasProtocolType bool
	protocol        string // the selected protocol (assignor); "" when Empty
	generation      int32
	leader          string // "" when none

	members map[string]*groupMember
	// order holds the members in join order: leader re-election takes the
	// first, and the leader's member list is in this order.
	order []*groupMember
	// static maps a group.instance.id to its member id (KIP-345).
	static map[string]string
	// pending holds the KIP-394 member ids handed out with
	// MEMBER_ID_REQUIRED and not yet joined, with their expiry.
	pending      map[string]*groupTimer
	awaitingJoin int            // members with a parked JoinGroup
	supported    map[string]int // protocol name -> members supporting it
	// pendingSync holds the members that have not sent SyncGroup since the
	// join phase completed.
	pendingSync    map[string]struct{}
	newMemberAdded bool // a member joined during the initial rebalance's delay

	joinTimer *groupTimer // end of the join phase (or initial delay)
	syncTimer *groupTimer // end of the sync phase
}

// groupMember is one member of a group (Kafka's ClassicGroupMember).
type groupMember struct {
	id               string
	instanceID       *string // group.instance.id; nil: a dynamic member
	clientID         string
	clientHost       string
	protocolType     string
	protocols        []groupProtocol // in the member's order of preference
	rebalanceTimeout time.Duration
	sessionTimeout   time.Duration
	assignment       []byte
	join             *joinWaiter // a parked JoinGroup
	sync             *syncWaiter // a parked SyncGroup
	// isNew: joined and not yet through a completed join phase; a new
	// member's session is not kept by its parked JoinGroup.
	isNew     bool
	heartbeat *groupTimer // session expiry
}

// groupProtocol is one protocol (assignor) a member supports.
type groupProtocol struct {
	name     string
	metadata []byte
}

// joinWaiter and syncWaiter are parked requests: the version to answer
// with and where the answer goes.
type joinWaiter struct {
	version int16
	reply   func(*kmsg.JoinGroupResponse)
}

type syncWaiter struct {
	version int16
	reply   func(*kmsg.SyncGroupResponse)
}

// joinInput is a JoinGroup's member, copied out of the request.
type joinInput struct {
	version          int16
	memberID         string
	instanceID       *string
	clientID         string
	clientHost       string
	protocolType     string
	protocols        []groupProtocol
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
}

// unlock releases mu after re-arming the timer, then calls the replies
// queued while it was held, in order.
func (c *groupCoordinator) unlock() {
	out := c.mu.out
	c.mu.out = nil
	c.armLocked()
	c.mu.Unlock()
	for _, f := range out {
		f()
	}
}

// Join handles a JoinGroup (any version). clientID and clientHost are the
// connection's, as DescribeGroups shows them; a generated member id is
// clientID-<uuid> (group.instance.id-<uuid> for a static member). reply is
// called once, now or when the join phase completes; it must not block.
func (c *groupCoordinator) Join(req *kmsg.JoinGroupRequest, clientID, clientHost string, reply func(*kmsg.JoinGroupResponse)) {
	c.mu.Lock()
	defer c.unlock()
	now := c.now()
	w := &joinWaiter{version: req.Version, reply: reply}
	in := &joinInput{
		version:        req.Version,
		memberID:       req.MemberID,
		instanceID:     clonePtr(req.InstanceID),
		clientID:       clientID,
		clientHost:     clientHost,
		protocolType:   req.ProtocolType,
		sessionTimeout: msDuration(req.SessionTimeoutMillis),
	}
	// v0 has no rebalance timeout: the session timeout is used (Kafka's
	// JoinGroupRequest does the same).
	in.rebalanceTimeout = in.sessionTimeout
	if req.Version >= 1 {
		in.rebalanceTimeout = msDuration(req.RebalanceTimeoutMillis)
	}
	fail := func(code int16, memberID string) { c.answerJoinLocked(w, joinError(code, memberID)) }
	switch {
	case c.mu.closed:
		fail(codeCoordinatorNotAvailable, req.MemberID)
		return
	case req.Group == "":
		fail(codeInvalidGroupID, req.MemberID)
		return
	case in.sessionTimeout < c.o.MinSession || in.sessionTimeout > c.o.MaxSession:
		fail(codeInvalidSessionTimeout, req.MemberID)
		return
	}
	size := 0
	for _, p := range req.Protocols {
		size += len(p.Name) + len(p.Metadata) + protocolEntryBytes
	}
	if size > c.o.MaxMemberBytes {
		fail(codeInvalidRequest, req.MemberID)
		return
	}
	in.protocols = make([]groupProtocol, len(req.Protocols))
	for i, p := range req.Protocols {
		in.protocols[i] = groupProtocol{name: p.Name, metadata: slices.Clone(p.Metadata)}
	}

	g := c.mu.groups[req.Group]
	created := false
	if g == nil {
		// A group is created by a join without a member id; a member id
		// for a group not held is unknown (Kafka: GroupIdNotFound, answered
		// UNKNOWN_MEMBER_ID).
		if req.MemberID != "" {
			fail(codeUnknownMemberID, req.MemberID)
			return
		}
		if g = c.newGroupLocked(req.Group, now); g == nil {
			fail(codeCoordinatorNotAvailable, req.MemberID)
			return
		}
		created = true
	}
	c.joinLocked(g, in, w, now)
	if created && g.state == groupEmpty && len(g.members) == 0 && len(g.pending) == 0 {
		// A refused first join leaves nothing behind (Kafka stores the
		// empty group; here it would only take a slot).
		delete(c.mu.groups, g.id)
	}
}

// newGroupLocked creates an Empty group, evicting the longest-Empty group
// without pending members when MaxGroups are held; nil when none can go.
func (c *groupCoordinator) newGroupLocked(id string, now time.Time) *group {
	if len(c.mu.groups) >= c.o.MaxGroups {
		var victim *group
		for _, g := range c.mu.groups {
			if g.state == groupEmpty && len(g.pending) == 0 &&
				(victim == nil || g.stateSince.Before(victim.stateSince)) {
				victim = g
			}
		}
		if victim == nil {
			return nil
		}
		c.forgetLocked(victim, codeNotCoordinator)
	}
	g := &group{
		id:          id,
		state:       groupEmpty,
		prevState:   groupDead,
		stateSince:  now,
		members:     make(map[string]*groupMember),
		static:      make(map[string]string),
		pending:     make(map[string]*groupTimer),
		supported:   make(map[string]int),
		pendingSync: make(map[string]struct{}),
	}
	c.mu.groups[id] = g
	return g
}

// joinLocked is Kafka's classicGroupJoinToClassicGroup past the group
// lookup.
func (c *groupCoordinator) joinLocked(g *group, in *joinInput, w *joinWaiter, now time.Time) {
	if !c.acceptJoiningLocked(g, in.memberID) {
		// Kafka removes a refused member (so that the last ones to rejoin
		// an over-full group are the ones kicked out).
		if t, ok := g.pending[in.memberID]; ok {
			c.cancelLocked(t)
			delete(g.pending, in.memberID)
		} else if m := g.members[in.memberID]; m != nil {
			c.removeMemberLocked(g, m)
		}
		c.answerJoinLocked(w, joinError(codeGroupMaxSizeReached, ""))
		return
	}
	if in.memberID == "" {
		c.joinNewMemberLocked(g, in, w, now)
	} else {
		c.joinExistingMemberLocked(g, in, w, now)
	}
}

// acceptJoiningLocked is Kafka's acceptJoiningMember: whether the group
// has room for memberID.
func (c *groupCoordinator) acceptJoiningLocked(g *group, memberID string) bool {
	m := g.members[memberID]
	switch g.state {
	case groupEmpty, groupDead:
		return true
	case groupPreparingRebalance:
		// Counting parked joins, not members, lets the last members to
		// rejoin an over-full group be the ones refused.
		return (m != nil && m.join != nil) || g.awaitingJoin < c.o.MaxMembers
	default:
		return m != nil || len(g.members) < c.o.MaxMembers
	}
}

// joinNewMemberLocked handles a JoinGroup without a member id.
func (c *groupCoordinator) joinNewMemberLocked(g *group, in *joinInput, w *joinWaiter, now time.Time) {
	if !g.supportsProtocols(in.protocolType, in.protocols) {
		c.answerJoinLocked(w, joinError(codeInconsistentGroupProtocol, ""))
		return
	}
	prefix := in.clientID
	if in.instanceID != nil {
		prefix = *in.instanceID
	}
	id := prefix + "-" + uuid.NewString()
	switch {
	case in.instanceID != nil:
		if old, ok := g.static[*in.instanceID]; ok {
			c.replaceStaticMemberLocked(g, in, old, id, w, now)
		} else {
			c.addMemberLocked(g, in, id, w, now)
		}
	case in.version >= 4:
		// KIP-394: hand out a member id and wait for the member to join
		// with it; the id expires after the session timeout.
		if len(g.pending) >= c.o.MaxMembers {
			c.answerJoinLocked(w, joinError(codeGroupMaxSizeReached, ""))
			return
		}
		t := &groupTimer{index: -1}
		g.pending[id] = t
		c.scheduleLocked(t, now.Add(in.sessionTimeout), func(now time.Time) { c.expirePendingLocked(g, id, now) })
		c.answerJoinLocked(w, joinError(codeMemberIDRequired, id))
	default:
		c.addMemberLocked(g, in, id, w, now)
	}
}

// joinExistingMemberLocked handles a JoinGroup with a member id: a
// pending member's first join or a member's rejoin.
func (c *groupCoordinator) joinExistingMemberLocked(g *group, in *joinInput, w *joinWaiter, now time.Time) {
	if !g.supportsProtocols(in.protocolType, in.protocols) {
		c.answerJoinLocked(w, joinError(codeInconsistentGroupProtocol, in.memberID))
		return
	}
	if _, ok := g.pending[in.memberID]; ok {
		if in.instanceID != nil {
			// A pending id is only given to dynamic members; Kafka fails
			// the request with an IllegalStateException.
			c.answerJoinLocked(w, joinError(codeUnknownServerError, in.memberID))
			return
		}
		c.addMemberLocked(g, in, in.memberID, w, now)
		return
	}
	if code := g.validateMember(in.memberID, in.instanceID); code != codeNone {
		c.answerJoinLocked(w, joinError(code, in.memberID))
		return
	}
	m := g.members[in.memberID]
	switch g.state {
	case groupPreparingRebalance:
		c.updateMemberLocked(g, m, in, w)
		c.maybePrepareRebalanceOrCompleteJoinLocked(g, now)
	case groupCompletingRebalance:
		if m.matches(in.protocols) {
			// The same metadata (the member missed its JoinGroup answer):
			// the current generation again.
			c.answerJoinLocked(w, g.joinResponse(m, g.leader == m.id))
			return
		}
		c.updateMemberLocked(g, m, in, w)
		c.maybePrepareRebalanceOrCompleteJoinLocked(g, now)
	case groupStable:
		if g.leader == m.id || !m.matches(in.protocols) {
			// The leader's rejoin always rebalances (it may have seen a
			// change the metadata does not show, such as new partitions);
			// so does a follower's with changed metadata.
			c.updateMemberLocked(g, m, in, w)
			c.maybePrepareRebalanceOrCompleteJoinLocked(g, now)
			return
		}
		// A follower with unchanged metadata gets the current generation
		// and syncs for its current assignment: no rebalance.
		c.answerJoinLocked(w, g.joinResponse(m, false))
	default:
		c.answerJoinLocked(w, joinError(codeUnknownMemberID, in.memberID))
	}
}

// addMemberLocked adds a new member with a parked JoinGroup and
// rebalances (Kafka's addMemberThenRebalanceOrCompleteJoin).
func (c *groupCoordinator) addMemberLocked(g *group, in *joinInput, id string, w *joinWaiter, now time.Time) {
	m := &groupMember{
		id:               id,
		instanceID:       in.instanceID,
		clientID:         in.clientID,
		clientHost:       in.clientHost,
		protocolType:     in.protocolType,
		protocols:        in.protocols,
		rebalanceTimeout: in.rebalanceTimeout,
		sessionTimeout:   in.sessionTimeout,
		isNew:            true,
	}
	if g.state == groupPreparingRebalance && g.prevState == groupEmpty {
		g.newMemberAdded = true
	}
	if t, ok := g.pending[id]; ok {
		c.cancelLocked(t)
		delete(g.pending, id)
	}
	if len(g.members) == 0 {
		g.protocolType, g.hasProtocolType = m.protocolType, true
	}
	if m.instanceID != nil {
		g.static[*m.instanceID] = id
	}
	if g.leader == "" {
		g.leader = id
	}
	g.members[id] = m
	g.order = append(g.order, m)
	g.count(m, 1)
	m.join = w
	g.awaitingJoin++
	// A new member's parked join does not keep its session: if it never
	// completes (the client went away), the member expires.
	c.scheduleHeartbeatLocked(g, m, c.o.NewMemberJoinTimeout, now)
	c.maybePrepareRebalanceOrCompleteJoinLocked(g, now)
}

// updateMemberLocked sets a rejoining member's protocols and timeouts and
// parks its JoinGroup. A JoinGroup already parked for it is answered
// REBALANCE_IN_PROGRESS (retriable: the client joins again); Kafka drops
// it unanswered.
func (c *groupCoordinator) updateMemberLocked(g *group, m *groupMember, in *joinInput, w *joinWaiter) {
	g.count(m, -1)
	m.protocols = in.protocols
	g.count(m, 1)
	m.rebalanceTimeout = in.rebalanceTimeout
	m.sessionTimeout = in.sessionTimeout
	if m.join != nil {
		c.answerJoinLocked(m.join, joinError(codeRebalanceInProgress, m.id))
	} else {
		g.awaitingJoin++
	}
	m.join = w
}

// replaceStaticMemberLocked handles a known group.instance.id joining
// without a member id (a restarted static member, KIP-345): the new
// member id takes the old one's place, assignment and leadership; the old
// id's parked requests are fenced. In a Stable group whose selected
// protocol stays, the member gets the current generation without a
// rebalance.
func (c *groupCoordinator) replaceStaticMemberLocked(g *group, in *joinInput, oldID, newID string, w *joinWaiter, now time.Time) {
	currentLeader := g.leader
	old := g.members[oldID]
	if old.join != nil {
		r := joinError(codeFencedInstanceID, oldID)
		c.answerJoinLocked(old.join, r)
		old.join = nil
		g.awaitingJoin--
	}
	if old.sync != nil {
		c.answerSyncLocked(old.sync, syncError(codeFencedInstanceID))
		old.sync = nil
	}
	c.cancelLocked(old.heartbeat)
	m := &groupMember{
		id:               newID,
		instanceID:       old.instanceID,
		clientID:         old.clientID,
		clientHost:       old.clientHost,
		protocolType:     old.protocolType,
		protocols:        old.protocols,
		rebalanceTimeout: old.rebalanceTimeout,
		sessionTimeout:   old.sessionTimeout,
		assignment:       old.assignment,
	}
	delete(g.members, oldID)
	g.members[newID] = m
	g.order[slices.Index(g.order, old)] = m
	if g.leader == oldID {
		g.leader = newID
	}
	g.static[*m.instanceID] = newID
	c.updateMemberLocked(g, m, in, w)
	c.scheduleHeartbeatLocked(g, m, m.sessionTimeout, now)
	switch g.state {
	case groupStable:
		if g.selectProtocol() != g.protocol {
			c.maybePrepareRebalanceOrCompleteJoinLocked(g, now)
			return
		}
		var r *kmsg.JoinGroupResponse
		if in.version >= 9 {
			// v9+: a static leader gets the members and is told to skip
			// the assignment (KIP-814).
			leader := g.leader == newID
			r = g.joinResponse(m, leader)
			r.SkipAssignment = leader
		} else {
			// Before v9 the leader id answered is the old one, so a
			// replaced leader does not assign again: it syncs for its
			// assignment like a follower.
			r = g.joinResponse(m, false)
			r.LeaderID = currentLeader
		}
		c.completeJoinLocked(g, m, r)
	case groupCompletingRebalance:
		// The leader may have been sent the old member id: rebalance so
		// that the assignment names the new one.
		c.prepareRebalanceLocked(g, now)
	default:
		c.maybeCompleteJoinPhaseLocked(g, now)
	}
}

// maybePrepareRebalanceOrCompleteJoinLocked starts a rebalance when the
// state allows one, else tries to end the join phase.
func (c *groupCoordinator) maybePrepareRebalanceOrCompleteJoinLocked(g *group, now time.Time) {
	switch g.state {
	case groupStable, groupCompletingRebalance, groupEmpty:
		c.prepareRebalanceLocked(g, now)
	default:
		c.maybeCompleteJoinPhaseLocked(g, now)
	}
}

// prepareRebalanceLocked enters PreparingRebalance: parked SyncGroups are
// answered REBALANCE_IN_PROGRESS, and the join phase ends when all members
// have rejoined or at the rebalance timeout; an Empty group's first
// rebalance waits InitialRebalanceDelay instead.
func (c *groupCoordinator) prepareRebalanceLocked(g *group, now time.Time) {
	if g.state == groupCompletingRebalance {
		for _, m := range g.order {
			m.assignment = nil
		}
		c.propagateLocked(g, codeRebalanceInProgress, now)
	}
	clear(g.pendingSync)
	c.cancelLocked(g.syncTimer)
	initial := g.state == groupEmpty
	g.transition(groupPreparingRebalance, now)
	if initial {
		delay := c.o.InitialRebalanceDelay
		c.initialRebalanceLocked(g, delay, max(g.rebalanceTimeout()-delay, 0), now)
		return
	}
	if g.allJoined() {
		c.completeJoinPhaseLocked(g, now)
		return
	}
	c.scheduleJoinTimerLocked(g, now.Add(g.rebalanceTimeout()), func(now time.Time) { c.completeJoinPhaseLocked(g, now) })
}

// initialRebalanceLocked waits delay before the initial rebalance's join
// phase ends; while members keep joining the wait is extended by up to
// InitialRebalanceDelay at a time, until remaining is spent (Kafka's
// tryCompleteInitialRebalanceElseSchedule). A zero delay ends it now.
func (c *groupCoordinator) initialRebalanceLocked(g *group, delay, remaining time.Duration, now time.Time) {
	if delay <= 0 {
		c.tryCompleteInitialRebalanceLocked(g, delay, remaining, now)
		return
	}
	c.scheduleJoinTimerLocked(g, now.Add(delay), func(now time.Time) {
		c.tryCompleteInitialRebalanceLocked(g, delay, remaining, now)
	})
}

// tryCompleteInitialRebalanceLocked is the end of one initial-delay wait.
func (c *groupCoordinator) tryCompleteInitialRebalanceLocked(g *group, delay, remaining time.Duration, now time.Time) {
	if g.newMemberAdded && remaining != 0 {
		g.newMemberAdded = false
		c.initialRebalanceLocked(g, min(c.o.InitialRebalanceDelay, remaining), max(remaining-delay, 0), now)
		return
	}
	c.completeJoinPhaseLocked(g, now)
}

// maybeCompleteJoinPhaseLocked ends the join phase if every member has
// rejoined, except during the initial rebalance's delay.
func (c *groupCoordinator) maybeCompleteJoinPhaseLocked(g *group, now time.Time) {
	if g.state == groupPreparingRebalance && g.prevState != groupEmpty && g.allJoined() {
		c.completeJoinPhaseLocked(g, now)
	}
}

// completeJoinPhaseLocked ends the join phase (Kafka's
// completeClassicGroupJoin): dynamic members that did not rejoin are
// removed, the generation is bumped, a protocol selected, and every parked
// JoinGroup answered; the group waits for SyncGroups until the rebalance
// timeout. With no member left the group is Empty.
func (c *groupCoordinator) completeJoinPhaseLocked(g *group, now time.Time) {
	c.cancelLocked(g.joinTimer)
	for _, m := range slices.Clone(g.order) {
		if m.join == nil && m.instanceID == nil {
			c.removeMemberLocked(g, m)
		}
	}
	if !g.electJoinedLeader() && len(g.members) > 0 {
		// Only static members that did not rejoin are left: wait another
		// rebalance timeout (their sessions may expire meanwhile).
		c.scheduleJoinTimerLocked(g, now.Add(g.rebalanceTimeout()), func(now time.Time) { c.completeJoinPhaseLocked(g, now) })
		return
	}
	g.generation++
	clear(g.pendingSync)
	if len(g.members) == 0 {
		g.protocol = ""
		g.transition(groupEmpty, now)
		return
	}
	g.protocol = g.selectProtocol()
	g.transition(groupCompletingRebalance, now)
	for _, m := range g.order {
		if m.join != nil {
			c.completeJoinLocked(g, m, g.joinResponse(m, g.leader == m.id))
		}
		c.scheduleHeartbeatLocked(g, m, m.sessionTimeout, now)
		m.isNew = false
		g.pendingSync[m.id] = struct{}{}
	}
	gen := g.generation
	c.scheduleLocked(g.syncTimerEntry(), now.Add(g.rebalanceTimeout()), func(now time.Time) { c.expirePendingSyncLocked(g, gen, now) })
}

// completeJoinLocked answers m's parked JoinGroup with r.
func (c *groupCoordinator) completeJoinLocked(g *group, m *groupMember, r *kmsg.JoinGroupResponse) {
	if m.join == nil {
		return
	}
	c.answerJoinLocked(m.join, r)
	m.join = nil
	g.awaitingJoin--
}

// expirePendingSyncLocked ends the sync phase of generation gen: members
// that have not sent SyncGroup are removed and the group rebalances.
func (c *groupCoordinator) expirePendingSyncLocked(g *group, gen int32, now time.Time) {
	if gen != g.generation || (g.state != groupCompletingRebalance && g.state != groupStable) || len(g.pendingSync) == 0 {
		return
	}
	for _, m := range slices.Clone(g.order) {
		if _, ok := g.pendingSync[m.id]; ok {
			c.removeMemberLocked(g, m)
		}
	}
	c.prepareRebalanceLocked(g, now)
}

// expireHeartbeatLocked is m's session expiry: a member whose parked
// request does not keep it alive is removed and the group rebalances.
func (c *groupCoordinator) expireHeartbeatLocked(g *group, m *groupMember, now time.Time) {
	if g.members[m.id] != m {
		return
	}
	// A member parked in a join or sync phase keeps its session, except a
	// new member (its parked first join may be from a client gone away).
	if !m.isNew && (m.join != nil || m.sync != nil) {
		return
	}
	c.removeMemberLocked(g, m)
	switch g.state {
	case groupStable, groupCompletingRebalance:
		c.maybePrepareRebalanceOrCompleteJoinLocked(g, now)
	case groupPreparingRebalance:
		if g.allJoined() {
			c.completeJoinPhaseLocked(g, now)
		}
	}
}

// expirePendingLocked forgets a KIP-394 member id that was not used to
// join within the session timeout.
func (c *groupCoordinator) expirePendingLocked(g *group, id string, now time.Time) {
	if _, ok := g.pending[id]; !ok {
		return
	}
	delete(g.pending, id)
	if g.state == groupPreparingRebalance && g.allJoined() {
		c.completeJoinPhaseLocked(g, now)
	}
}

// removeMemberLocked removes m. Its parked requests are answered
// UNKNOWN_MEMBER_ID (Kafka answers a parked JoinGroup so; it leaves a
// parked SyncGroup unanswered, which cannot be here: every request gets
// one answer).
func (c *groupCoordinator) removeMemberLocked(g *group, m *groupMember) {
	if m.join != nil {
		c.completeJoinLocked(g, m, joinError(codeUnknownMemberID, ""))
	}
	if m.sync != nil {
		c.answerSyncLocked(m.sync, syncError(codeUnknownMemberID))
		m.sync = nil
	}
	c.cancelLocked(m.heartbeat)
	delete(g.members, m.id)
	g.order = slices.DeleteFunc(g.order, func(o *groupMember) bool { return o == m })
	g.count(m, -1)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	delete(g.pendingSync, m.id)
	if g.leader == m.id {
		g.leader = ""
		if len(g.order) > 0 {
			g.leader = g.order[0].id
		}
	}
}

// Sync handles a SyncGroup (any version). A follower's SyncGroup during
// CompletingRebalance is parked until the leader's brings the assignment;
// reply is called once, now or then; it must not block.
func (c *groupCoordinator) Sync(req *kmsg.SyncGroupRequest, reply func(*kmsg.SyncGroupResponse)) {
	c.mu.Lock()
	defer c.unlock()
	now := c.now()
	w := &syncWaiter{version: req.Version, reply: reply}
	if code := c.syncLocked(req, w, now); code != codeNone {
		c.answerSyncLocked(w, syncError(code))
	}
}

// syncLocked is Sync under the lock; a non-zero code is the answer.
func (c *groupCoordinator) syncLocked(req *kmsg.SyncGroupRequest, w *syncWaiter, now time.Time) int16 {
	switch {
	case c.mu.closed:
		return codeCoordinatorNotAvailable
	case req.Group == "":
		return codeInvalidGroupID
	case req.Version >= 5 && (req.ProtocolType == nil || req.Protocol == nil):
		// v5+ must name the protocol type and protocol (KafkaApis).
		return codeInconsistentGroupProtocol
	}
	g := c.mu.groups[req.Group]
	if g == nil || g.state == groupEmpty {
		return codeUnknownMemberID
	}
	if code := g.validateMember(req.MemberID, req.InstanceID); code != codeNone {
		return code
	}
	if req.Generation != g.generation {
		return codeIllegalGeneration
	}
	if inconsistent(req.ProtocolType, g.protocolTypePtr()) || inconsistent(req.Protocol, g.protocolPtr()) {
		return codeInconsistentGroupProtocol
	}
	m := g.members[req.MemberID]
	switch g.state {
	case groupPreparingRebalance:
		return codeRebalanceInProgress
	case groupCompletingRebalance:
		if m.sync != nil {
			// Superseded: answered so (Kafka drops it unanswered).
			c.answerSyncLocked(m.sync, syncError(codeRebalanceInProgress))
		}
		m.sync = w
		c.removePendingSyncLocked(g, m.id)
		if g.leader != m.id {
			return codeNone
		}
		assignment := make(map[string][]byte, len(req.GroupAssignment))
		for _, a := range req.GroupAssignment {
			if g.members[a.MemberID] == nil {
				continue
			}
			if len(a.MemberAssignment) > c.o.MaxMemberBytes {
				// As Kafka when the group record is too large to append.
				for _, m := range g.order {
					m.assignment = nil
				}
				c.propagateLocked(g, codeUnknownServerError, now)
				c.maybePrepareRebalanceOrCompleteJoinLocked(g, now)
				return codeNone
			}
			assignment[a.MemberID] = slices.Clone(a.MemberAssignment)
		}
		for _, m := range g.order {
			m.assignment = assignment[m.id] // none: empty
		}
		c.propagateLocked(g, codeNone, now)
		g.transition(groupStable, now)
	case groupStable:
		c.removePendingSyncLocked(g, m.id)
		r := kmsg.NewPtrSyncGroupResponse()
		r.ProtocolType, r.Protocol = g.protocolTypePtr(), g.protocolPtr()
		r.MemberAssignment = m.assignment
		c.answerSyncLocked(w, r)
	}
	return codeNone
}

// propagateLocked answers every parked SyncGroup with its member's
// assignment and code, and restarts those members' sessions.
func (c *groupCoordinator) propagateLocked(g *group, code int16, now time.Time) {
	for _, m := range g.order {
		if m.sync == nil {
			continue
		}
		r := syncError(code)
		if code == codeNone {
			r.ProtocolType, r.Protocol = g.protocolTypePtr(), g.protocolPtr()
		}
		r.MemberAssignment = m.assignment
		c.answerSyncLocked(m.sync, r)
		m.sync = nil
		c.scheduleHeartbeatLocked(g, m, m.sessionTimeout, now)
	}
}

// removePendingSyncLocked notes id's SyncGroup; the sync deadline is
// cancelled once every member has synced.
func (c *groupCoordinator) removePendingSyncLocked(g *group, id string) {
	delete(g.pendingSync, id)
	if len(g.pendingSync) == 0 || (g.state != groupCompletingRebalance && g.state != groupStable) {
		c.cancelLocked(g.syncTimer)
	}
}

// Heartbeat handles a Heartbeat (any version): it restarts the member's
// session and answers REBALANCE_IN_PROGRESS during a join phase.
func (c *groupCoordinator) Heartbeat(req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	r := kmsg.NewPtrHeartbeatResponse()
	r.Version = req.Version
	c.mu.Lock()
	defer c.unlock()
	r.ErrorCode = c.heartbeatLocked(req, c.now())
	return r
}

// heartbeatLocked is Heartbeat under the lock.
func (c *groupCoordinator) heartbeatLocked(req *kmsg.HeartbeatRequest, now time.Time) int16 {
	switch {
	case c.mu.closed:
		return codeCoordinatorNotAvailable
	case req.Group == "":
		return codeInvalidGroupID
	}
	g := c.mu.groups[req.Group]
	if g == nil {
		return codeUnknownMemberID
	}
	if code := g.validateMember(req.MemberID, req.InstanceID); code != codeNone {
		return code
	}
	if req.Generation != g.generation {
		return codeIllegalGeneration
	}
	m := g.members[req.MemberID]
	switch g.state {
	case groupPreparingRebalance:
		c.scheduleHeartbeatLocked(g, m, m.sessionTimeout, now)
		return codeRebalanceInProgress
	case groupCompletingRebalance, groupStable:
		// A member may heartbeat between its JoinGroup answer and its
		// SyncGroup: a normal heartbeat.
		c.scheduleHeartbeatLocked(g, m, m.sessionTimeout, now)
		return codeNone
	default:
		return codeUnknownMemberID
	}
}

// Leave handles a LeaveGroup (any version; v3+ carries several members,
// each answered with its own code, by member id or, with an empty member
// id, by group.instance.id; v0-v2 answer their one member's code at the top
// level).
func (c *groupCoordinator) Leave(req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	r := kmsg.NewPtrLeaveGroupResponse()
	r.Version = req.Version
	c.mu.Lock()
	defer c.unlock()
	switch {
	case c.mu.closed:
		r.ErrorCode = codeCoordinatorNotAvailable
		return r
	case req.Group == "":
		r.ErrorCode = codeInvalidGroupID
		return r
	}
	idents := req.Members
	if req.Version < 3 {
		idents = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	results := make([]kmsg.LeaveGroupResponseMember, len(idents))
	for i, id := range idents {
		results[i] = kmsg.NewLeaveGroupResponseMember()
		results[i].MemberID, results[i].InstanceID = id.MemberID, clonePtr(id.InstanceID)
	}
	if g := c.mu.groups[req.Group]; g == nil {
		for i := range results {
			results[i].ErrorCode = codeUnknownMemberID
		}
	} else {
		c.leaveLocked(g, idents, results, c.now())
	}
	if req.Version >= 3 {
		r.Members = results
		return r
	}
	for _, res := range results {
		if res.ErrorCode != codeNone {
			r.ErrorCode = res.ErrorCode
			break
		}
	}
	return r
}

// leaveLocked removes the members named and rebalances if any left.
func (c *groupCoordinator) leaveLocked(g *group, idents []kmsg.LeaveGroupRequestMember, results []kmsg.LeaveGroupResponseMember, now time.Time) {
	left := false
	for i, id := range idents {
		if id.MemberID == "" {
			// Administrative removal by group.instance.id.
			if id.InstanceID == nil {
				results[i].ErrorCode = codeUnknownMemberID
				continue
			}
			mid, ok := g.static[*id.InstanceID]
			if !ok {
				results[i].ErrorCode = codeUnknownMemberID
				continue
			}
			c.removeMemberLocked(g, g.members[mid])
			left = true
			continue
		}
		if t, ok := g.pending[id.MemberID]; ok {
			c.cancelLocked(t)
			delete(g.pending, id.MemberID)
			left = true
			continue
		}
		if code := g.validateMember(id.MemberID, id.InstanceID); code != codeNone {
			results[i].ErrorCode = code
			continue
		}
		c.removeMemberLocked(g, g.members[id.MemberID])
		left = true
	}
	if !left {
		return
	}
	switch g.state {
	case groupStable, groupCompletingRebalance:
		c.maybePrepareRebalanceOrCompleteJoinLocked(g, now)
	case groupPreparingRebalance:
		c.maybeCompleteJoinPhaseLocked(g, now)
	}
}

// ListGroups answers the groups this coordinator holds, by group id,
// filtered by state (v4+, case-insensitive) and type (v5+: only
// "classic" groups exist here). Groups known only by their committed
// offsets (cursors) are not here: the caller adds them.
func (c *groupCoordinator) ListGroups(req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	r := kmsg.NewPtrListGroupsResponse()
	r.Version = req.Version
	c.mu.Lock()
	defer c.unlock()
	if c.mu.closed {
		r.ErrorCode = codeCoordinatorNotAvailable
		return r
	}
	states := lowerSet(req.StatesFilter)
	types := lowerSet(req.TypesFilter)
	if len(types) > 0 && !types[groupType] {
		return r
	}
	for _, g := range c.mu.groups {
		if len(states) > 0 && !states[strings.ToLower(g.state.String())] {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.id, g.protocolType, g.state.String(), groupType
		r.Groups = append(r.Groups, lg)
	}
	slices.SortFunc(r.Groups, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
	return r
}

// DescribeGroups describes each group asked, in order: a group not held is
// Dead, as in Kafka (the caller may describe it from its cursors instead);
// members' protocol metadata is given only when Stable, their assignment
// always.
func (c *groupCoordinator) DescribeGroups(req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	r := kmsg.NewPtrDescribeGroupsResponse()
	r.Version = req.Version
	c.mu.Lock()
	defer c.unlock()
	for _, id := range req.Groups {
		d := kmsg.NewDescribeGroupsResponseGroup()
		d.Group = id
		g := c.mu.groups[id]
		switch {
		case c.mu.closed:
			d.ErrorCode = codeCoordinatorNotAvailable
		case g == nil:
			d.State = groupDead.String()
		default:
			d.State, d.ProtocolType = g.state.String(), g.protocolType
			if g.state == groupStable {
				d.Protocol = g.protocol
			}
			for _, m := range g.order {
				dm := kmsg.NewDescribeGroupsResponseGroupMember()
				dm.MemberID, dm.InstanceID = m.id, m.instanceID
				dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
				if g.state == groupStable {
					dm.ProtocolMetadata = m.metadata(g.protocol)
				}
				dm.MemberAssignment = m.assignment
				d.Members = append(d.Members, dm)
			}
		}
		r.Groups = append(r.Groups, d)
	}
	return r
}

// CommitAllowed checks an OffsetCommit's member and generation as Kafka's
// ClassicGroup.validateOffsetCommit does, and returns the Kafka error code
// to answer for each of its partitions (0: commit). Generation -1 with no
// member id (a standalone consumer or an admin tool) commits to an Empty
// group or one not held; version is the OffsetCommit's (v9+ answers
// GROUP_ID_NOT_FOUND where older ones answer ILLEGAL_GENERATION for a
// member of a group not held). A successful commit by a member of a Stable
// or PreparingRebalance group restarts its session, as in Kafka. Unlike
// Kafka, a standalone commit does not create a group here: its offsets are
// cursors, and the coordinator holds membership only.
func (c *groupCoordinator) CommitAllowed(group, memberID string, generation int32, instanceID *string, version int16) int16 {
	c.mu.Lock()
	defer c.unlock()
	switch {
	case c.mu.closed:
		return codeCoordinatorNotAvailable
	case group == "":
		return codeInvalidGroupID
	}
	g := c.mu.groups[group]
	if g == nil {
		switch {
		case generation < 0:
			return codeNone
		case version >= 9:
			return codeGroupIDNotFound
		default:
			return codeIllegalGeneration
		}
	}
	if generation < 0 && g.state == groupEmpty {
		return codeNone
	}
	if generation >= 0 || memberID != "" || instanceID != nil {
		if code := g.validateMember(memberID, instanceID); code != codeNone {
			return code
		}
		if generation != g.generation {
			return codeIllegalGeneration
		}
	} else if g.state != groupEmpty {
		return codeUnknownMemberID
	}
	switch g.state {
	case groupCompletingRebalance:
		return codeRebalanceInProgress
	case groupStable, groupPreparingRebalance:
		if m := g.members[memberID]; m != nil {
			c.scheduleHeartbeatLocked(g, m, m.sessionTimeout, c.now())
		}
	}
	return codeNone
}

// DeleteGroup deletes a group's membership for DeleteGroups: NONE for an
// Empty group, NON_EMPTY_GROUP for one with members, GROUP_ID_NOT_FOUND for
// one not held (the caller answers NONE instead when the group has
// offsets, which it deletes).
func (c *groupCoordinator) DeleteGroup(group string) int16 {
	c.mu.Lock()
	defer c.unlock()
	if c.mu.closed {
		return codeCoordinatorNotAvailable
	}
	g := c.mu.groups[group]
	switch {
	case g == nil:
		return codeGroupIDNotFound
	case g.state != groupEmpty:
		return codeNonEmptyGroup
	}
	c.forgetLocked(g, codeNotCoordinator)
	return codeNone
}

// Drop forgets a group whose coordinatorship this node lost: its parked
// JoinGroups and SyncGroups are answered NOT_COORDINATOR (the clients find
// the new coordinator and rejoin), as Kafka does when it unloads a group.
func (c *groupCoordinator) Drop(group string) {
	c.mu.Lock()
	defer c.unlock()
	if g := c.mu.groups[group]; g != nil {
		c.forgetLocked(g, codeNotCoordinator)
	}
}

// Close drops every group (parked requests are answered NOT_COORDINATOR)
// and stops the timer; later calls answer COORDINATOR_NOT_AVAILABLE.
func (c *groupCoordinator) Close() {
	c.mu.Lock()
	defer c.unlock()
	c.mu.closed = true
	for _, g := range c.mu.groups {
		c.forgetLocked(g, codeNotCoordinator)
	}
	if c.mu.timer != nil {
		c.mu.timer.Stop()
	}
}

// State returns a group's state name ("Empty", "PreparingRebalance",
// "CompletingRebalance", "Stable"; "Dead" when not held).
func (c *groupCoordinator) State(group string) string {
	c.mu.Lock()
	defer c.unlock()
	if g := c.mu.groups[group]; g != nil {
		return g.state.String()
	}
	return groupDead.String()
}

// forgetLocked removes g and its timers, answering its parked requests
// with code.
func (c *groupCoordinator) forgetLocked(g *group, code int16) {
	for _, m := range g.order {
		if m.join != nil {
			c.completeJoinLocked(g, m, joinError(code, m.id))
		}
		if m.sync != nil {
			c.answerSyncLocked(m.sync, syncError(code))
			m.sync = nil
		}
		c.cancelLocked(m.heartbeat)
	}
	for _, t := range g.pending {
		c.cancelLocked(t)
	}
	c.cancelLocked(g.joinTimer)
	c.cancelLocked(g.syncTimer)
	g.state = groupDead
	delete(c.mu.groups, g.id)
}

// answerJoinLocked queues w's answer r (given w's version).
func (c *groupCoordinator) answerJoinLocked(w *joinWaiter, r *kmsg.JoinGroupResponse) {
	r.Version = w.version
	reply := w.reply
	c.mu.out = append(c.mu.out, func() { reply(r) })
}

// answerSyncLocked queues w's answer r (given w's version).
func (c *groupCoordinator) answerSyncLocked(w *syncWaiter, r *kmsg.SyncGroupResponse) {
	r.Version = w.version
	reply := w.reply
	c.mu.out = append(c.mu.out, func() { reply(r) })
}

// joinError is a JoinGroup answer carrying only an error and a member id.
func joinError(code int16, memberID string) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.ErrorCode, r.MemberID = code, memberID
	return r
}

// syncError is a SyncGroup answer carrying only an error.
func syncError(code int16) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.ErrorCode = code
	return r
}

// joinResponse is the current generation's JoinGroup answer for m; the
// leader's lists every member with its metadata for the selected protocol.
func (g *group) joinResponse(m *groupMember, withMembers bool) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Generation = g.generation
	r.ProtocolType, r.Protocol = g.protocolTypePtr(), g.protocolPtr()
	r.LeaderID = g.leader
	r.MemberID = m.id
	if withMembers {
		r.Members = make([]kmsg.JoinGroupResponseMember, len(g.order))
		for i, o := range g.order {
			r.Members[i] = kmsg.NewJoinGroupResponseMember()
			r.Members[i].MemberID, r.Members[i].InstanceID = o.id, o.instanceID
			r.Members[i].ProtocolMetadata = o.metadata(g.protocol)
		}
	}
	return r
}

// validateMember is Kafka's ClassicGroup.validateMember: a static member
// must be the instance's current member id (FENCED_INSTANCE_ID otherwise),
// and the member must exist.
func (g *group) validateMember(id string, instanceID *string) int16 {
	if instanceID != nil {
		cur, ok := g.static[*instanceID]
		switch {
		case !ok:
			return codeUnknownMemberID
		case cur != id:
			return codeFencedInstanceID
		}
	}
	if g.members[id] == nil {
		return codeUnknownMemberID
	}
	return codeNone
}

// supportsProtocols tells whether a member of this protocol type and
// protocols can join: any non-empty ones when the group is Empty, else
// the group's type and one protocol every member supports.
func (g *group) supportsProtocols(protocolType string, protocols []groupProtocol) bool {
	if g.state == groupEmpty {
		return protocolType != "" && len(protocols) > 0
	}
	if !g.hasProtocolType || g.protocolType != protocolType {
		return false
	}
	for _, p := range protocols {
		if g.supported[p.name] == len(g.members) {
			return true
		}
	}
	return false
}

// count adds d to the support count of each protocol m names (once per
// name, however often m repeats it).
func (g *group) count(m *groupMember, d int) {
	for i, p := range m.protocols {
		if !slices.ContainsFunc(m.protocols[:i], func(q groupProtocol) bool { return q.name == p.name }) {
			g.supported[p.name] += d
			if g.supported[p.name] == 0 {
				delete(g.supported, p.name)
			}
		}
	}
}

// selectProtocol is Kafka's: of the protocols every member supports, each
// member votes for the first in its own order of preference, and the most
// voted wins (a tie goes to the one voted for first, in member order;
// Kafka's tie-break is a hash map's order).
func (g *group) selectProtocol() string {
	votes := make(map[string]int)
	var order []string
	for _, m := range g.order {
		for _, p := range m.protocols {
			if g.supported[p.name] == len(g.members) {
				if votes[p.name] == 0 {
					order = append(order, p.name)
				}
				votes[p.name]++
				break
			}
		}
	}
	best := ""
	for _, name := range order {
		if best == "" || votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

// electJoinedLeader keeps the leader if it rejoined, else makes the first
// rejoined member leader; false when no member rejoined.
func (g *group) electJoinedLeader() bool {
	if g.leader == "" {
		return false
	}
	if g.members[g.leader].join != nil {
		return true
	}
	for _, m := range g.order {
		if m.join != nil {
			g.leader = m.id
			return true
		}
	}
	return false
}

// allJoined: every member has a parked JoinGroup and no pending member id
// is outstanding.
func (g *group) allJoined() bool {
	return g.awaitingJoin == len(g.members) && len(g.pending) == 0
}

// rebalanceTimeout is the largest of the members' rebalance timeouts.
func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.order {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// transition enters state s.
func (g *group) transition(s groupState, now time.Time) {
	g.prevState, g.state, g.stateSince = g.state, s, now
}

// protocolTypePtr and protocolPtr are the group's protocol type and
// selected protocol as Kafka's nullable fields.
func (g *group) protocolTypePtr() *string {
	if !g.hasProtocolType {
		return nil
	}
	s := g.protocolType
	return &s
}

func (g *group) protocolPtr() *string {
	if g.protocol == "" {
		return nil
	}
	s := g.protocol
	return &s
}

// syncTimerEntry returns the group's sync timer, allocating it.
func (g *group) syncTimerEntry() *groupTimer {
	if g.syncTimer == nil {
		g.syncTimer = &groupTimer{index: -1}
	}
	return g.syncTimer
}

// matches: the member's protocols are exactly these, in this order.
func (m *groupMember) matches(protocols []groupProtocol) bool {
	return slices.EqualFunc(m.protocols, protocols, func(a, b groupProtocol) bool {
		return a.name == b.name && string(a.metadata) == string(b.metadata)
	})
}

// metadata is m's metadata for protocol name.
func (m *groupMember) metadata(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			return p.metadata
		}
	}
	return nil
}

// inconsistent: a request names a protocol (type) other than the group's;
// a missing one on either side is not a conflict.
func inconsistent(req, group *string) bool {
	return req != nil && group != nil && *req != *group
}

// msDuration converts a request's milliseconds (negative: 0).
func msDuration(ms int32) time.Duration {
	return time.Duration(max(ms, 0)) * time.Millisecond
}

// clonePtr copies a nullable string so that no request memory is kept.
func clonePtr(s *string) *string {
	if s == nil {
		return nil
	}
	v := strings.Clone(*s)
	return &v
}

// lowerSet is a filter list as a set, lower-cased and trimmed.
func lowerSet(list []string) map[string]bool {
	if len(list) == 0 {
		return nil
	}
	set := make(map[string]bool, len(list))
	for _, s := range list {
		set[strings.ToLower(strings.TrimSpace(s))] = true
	}
	return set
}

// groupTimer is one deadline in the coordinator's timer heap.
type groupTimer struct {
	at    time.Time
	seq   uint64
	index int // in the heap; -1 when not scheduled
	fire  func(now time.Time)
}

// timerHeap orders timers by deadline, then by scheduling order
// (container/heap).
type timerHeap []*groupTimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*groupTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.index = -1
	return t
}

// scheduleLocked sets t to fire at at (rescheduling it if set).
func (c *groupCoordinator) scheduleLocked(t *groupTimer, at time.Time, fire func(now time.Time)) {
	c.mu.seq++
	t.at, t.seq, t.fire = at, c.mu.seq, fire
	if t.index >= 0 {
		heap.Fix(&c.mu.timers, t.index)
	} else {
		heap.Push(&c.mu.timers, t)
	}
}

// cancelLocked unschedules t (nil or unscheduled: nothing).
func (c *groupCoordinator) cancelLocked(t *groupTimer) {
	if t != nil && t.index >= 0 {
		heap.Remove(&c.mu.timers, t.index)
	}
}

// scheduleHeartbeatLocked (re)starts m's session: it expires after d.
func (c *groupCoordinator) scheduleHeartbeatLocked(g *group, m *groupMember, d time.Duration, now time.Time) {
	if m.heartbeat == nil {
		m.heartbeat = &groupTimer{index: -1}
	}
	c.scheduleLocked(m.heartbeat, now.Add(d), func(now time.Time) { c.expireHeartbeatLocked(g, m, now) })
}

// scheduleJoinTimerLocked sets the group's join-phase deadline.
func (c *groupCoordinator) scheduleJoinTimerLocked(g *group, at time.Time, fire func(now time.Time)) {
	if g.joinTimer == nil {
		g.joinTimer = &groupTimer{index: -1}
	}
	c.scheduleLocked(g.joinTimer, at, fire)
}

// tick fires every deadline due at now, in deadline order (deadlines that
// firing makes due fire too). The coordinator's timer calls it; so do
// tests driving a Clock.
func (c *groupCoordinator) tick(now time.Time) {
	c.mu.Lock()
	defer c.unlock()
	c.mu.armed = false
	for len(c.mu.timers) > 0 && !c.mu.timers[0].at.After(now) {
		t := heap.Pop(&c.mu.timers).(*groupTimer)
		t.fire(now)
	}
}

// armLocked points the coordinator's timer at the earliest deadline when
// it is not already set as early (a later timer firing early finds nothing
// due and re-arms). Nothing is armed with a Clock or once closed.
func (c *groupCoordinator) armLocked() {
	if c.manual || c.mu.closed || len(c.mu.timers) == 0 {
		return
	}
	next := c.mu.timers[0].at
	if c.mu.armed && !next.Before(c.mu.armedAt) {
		return
	}
	d := next.Sub(c.now())
	if c.mu.timer == nil {
		c.mu.timer = time.AfterFunc(d, func() { c.tick(c.now()) })
	} else {
		c.mu.timer.Reset(d)
	}
	c.mu.armed, c.mu.armedAt = true, next
}
