package kafka

// Consumer groups (docs/kafka.md, "Consumer groups"): the coordinator of a
// group is the owner of its unit; the membership protocol runs in
// group.go; committed offsets are the lakestream cursors named after the
// group, one per partition, so a Kafka group is a Pulsar subscription.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
)

// ownedGroups are the group units this node owns (it is their
// coordinator), each watched: its loss drops the group's state.
type ownedGroups struct {
	mu struct {
		sync.Mutex
		m map[string]lakestream.Ownership
	}
}

// maxOwnedGroups bounds the groups a node coordinates (each one an
// ownership and a goroutine watching it).
const maxOwnedGroups = 10_000

// coordinate takes (or confirms) this node's coordinatorship of a group:
// kerr.NotCoordinator when another member owns it.
func (s *Server) coordinate(ctx context.Context, group string) error {
	if group == "" {
		return kerr.InvalidGroupID
	}
	s.owned.mu.Lock()
	o := s.owned.mu.m[group]
	s.owned.mu.Unlock()
	if o != nil {
		select {
		case <-o.Lost():
		default:
			return nil
		}
	}
	s.owned.mu.Lock()
	full := len(s.owned.mu.m) >= maxOwnedGroups
	s.owned.mu.Unlock()
	if full {
		return fmt.Errorf("%w: this node coordinates %d groups, its most", kerr.CoordinatorNotAvailable, maxOwnedGroups)
	}
	o, err := s.cfg.Broker.Own(ctx, groupUnit(group))
	if errors.Is(err, broker.ErrServiceNotReady) {
		return kerr.NotCoordinator
	}
	if err != nil {
		return kerr.CoordinatorNotAvailable
	}
	s.owned.mu.Lock()
	if s.owned.mu.m == nil {
		s.owned.mu.m = map[string]lakestream.Ownership{}
	}
	s.owned.mu.m[group] = o
	s.owned.mu.Unlock()
	go func() {
		select {
		case <-o.Lost():
			s.owned.mu.Lock()
			if s.owned.mu.m[group] == o {
				delete(s.owned.mu.m, group)
			}
			s.owned.mu.Unlock()
			s.groups.Drop(group)
		case <-s.ctx.Done():
		}
	}()
	return nil
}

// clientHost is the client's address as group descriptions show it.
func (c *conn) clientHost() string {
	host, _, err := net.SplitHostPort(c.nc.RemoteAddr().String())
	if err != nil {
		return c.nc.RemoteAddr().String()
	}
	return "/" + host
}

func handleJoinGroup(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.JoinGroupRequest)
	ctx, cancel := context.WithTimeout(c.srv.ctx, requestTimeout)
	defer cancel()
	if err := c.srv.coordinate(ctx, r.Group); err != nil {
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation = errCode(err), -1
		a.set(resp)
		return
	}
	c.srv.groups.Join(r, c.clientID, c.clientHost(), func(resp *kmsg.JoinGroupResponse) { a.set(resp) })
}

func handleSyncGroup(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.SyncGroupRequest)
	ctx, cancel := context.WithTimeout(c.srv.ctx, requestTimeout)
	defer cancel()
	if err := c.srv.coordinate(ctx, r.Group); err != nil {
		resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = errCode(err)
		a.set(resp)
		return
	}
	c.srv.groups.Sync(r, func(resp *kmsg.SyncGroupResponse) { a.set(resp) })
}

func handleHeartbeat(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.HeartbeatRequest)
	ctx, cancel := context.WithTimeout(c.srv.ctx, requestTimeout)
	defer cancel()
	if err := c.srv.coordinate(ctx, r.Group); err != nil {
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = errCode(err)
		a.set(resp)
		return
	}
	a.set(c.srv.groups.Heartbeat(r))
}

func handleLeaveGroup(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.LeaveGroupRequest)
	ctx, cancel := context.WithTimeout(c.srv.ctx, requestTimeout)
	defer cancel()
	if err := c.srv.coordinate(ctx, r.Group); err != nil {
		resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = errCode(err)
		a.set(resp)
		return
	}
	a.set(c.srv.groups.Leave(r))
}

func handleDescribeGroups(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.DescribeGroupsRequest)
	a.set(c.srv.groups.DescribeGroups(r))
}

func handleListGroups(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.ListGroupsRequest)
	a.set(c.srv.groups.ListGroups(r))
}

func handleDeleteGroups(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.DeleteGroupsRequest)
	s := c.srv
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, g := range r.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = g
		if err := s.coordinate(ctx, g); err != nil {
			rg.ErrorCode = errCode(err)
		} else {
			rg.ErrorCode = s.groups.DeleteGroup(g)
		}
		// The group's offsets (its cursors) stay: they are Pulsar
		// subscriptions too; OffsetDelete or pulsar-admin remove them.
		resp.Groups = append(resp.Groups, rg)
	}
	a.set(resp)
}

func handleOffsetCommit(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.OffsetCommitRequest)
	s := c.srv
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	code := int16(0)
	if err := s.coordinate(ctx, r.Group); err != nil {
		code = errCode(err)
	} else {
		code = s.groups.CommitAllowed(r.Group, r.MemberID, r.Generation, r.InstanceID, r.Version)
	}
	for _, rt := range r.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			if code == 0 {
				err := c.authorizeGroup(ctx, r.Group, rt.Topic)
				if err == nil {
					err = s.commit(ctx, r.Group, rt.Topic, rp.Partition, rp.Offset, rp.Metadata)
				}
				sp.ErrorCode = errCode(err)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	a.set(resp)
}

// commit stores a group's committed offset of a partition: its cursor's
// mark-delete point becomes offset − 1. On the partition's owner with the
// subscription running (Pulsar consumers of the same name), the running
// subscription is reset; otherwise the cursor is written in the catalog.
func (s *Server) commit(ctx context.Context, group, topic string, p int32, offset int64, metadata *string) error {
	if offset < 0 {
		return kerr.InvalidCommitOffsetSize
	}
	props, err := metadataProps(metadata)
	if err != nil {
		return err
	}
	info, err := s.topicInfo(ctx, topic, false)
	if err != nil {
		return err
	}
	if p < 0 || int(p) >= info.partitions {
		return kerr.UnknownTopicOrPartition
	}
	name := s.partitionName(topic, p, info.partitioned)
	if t, err := s.partition(ctx, topic, p, false); err == nil && t.LiveSubscription(group) != nil {
		_, err := t.ResetSubscription(ctx, group, offset)
		return err
	}
	log, err := s.openLog(ctx, name)
	if err != nil {
		return err
	}
	cur, err := log.OpenCursor(ctx, group, offset-1) // created there when absent
	if err != nil {
		return err
	}
	if cur.MarkDeleteOffset() > offset-1 {
		// Backwards (a seek, then a commit): the cursor starts over there.
		cur.Close(ctx)
		if err := log.DeleteCursor(ctx, group); err != nil && !errors.Is(err, lakestream.ErrNoSuchCursor) {
			return err
		}
		if cur, err = log.OpenCursor(ctx, group, offset-1); err != nil {
			return err
		}
	}
	if cur.MarkDeleteOffset() < offset-1 || !maps.Equal(cur.Properties(), props) {
		err = cur.MarkDelete(ctx, offset-1, props)
	}
	return errors.Join(err, cur.Close(ctx))
}

// Commit metadata (the string a commit carries) is kept in the cursor's
// mark-delete properties, 8 bytes per property: "__kafka.md.len" and
// "__kafka.md.<i>" (docs/kafka.md).
const (
	metadataMaxBytes = 256
	metadataLenKey   = "__kafka.md.len"
	metadataKey      = "__kafka.md."
)

// metadataProps encodes commit metadata as cursor properties (nil for
// none); kerr.OffsetMetadataTooLarge beyond metadataMaxBytes.
func metadataProps(md *string) (map[string]int64, error) {
	if md == nil || *md == "" {
		return nil, nil
	}
	b := []byte(*md)
	if len(b) > metadataMaxBytes {
		return nil, fmt.Errorf("%w: %d bytes of commit metadata, at most %d", kerr.OffsetMetadataTooLarge, len(b), metadataMaxBytes)
	}
	props := map[string]int64{metadataLenKey: int64(len(b))}
	for i := 0; i*8 < len(b); i++ {
		var chunk [8]byte
		copy(chunk[:], b[i*8:])
		props[metadataKey+strconv.Itoa(i)] = int64(binary.BigEndian.Uint64(chunk[:]))
	}
	return props, nil
}

// propsMetadata decodes metadataProps ("" without).
func propsMetadata(props map[string]int64) string {
	n, ok := props[metadataLenKey]
	if !ok || n <= 0 || n > metadataMaxBytes {
		return ""
	}
	b := make([]byte, 0, n+8)
	for i := 0; int64(i*8) < n; i++ {
		b = binary.BigEndian.AppendUint64(b, uint64(props[metadataKey+strconv.Itoa(i)]))
	}
	return string(b[:n])
}

// openLog opens a topic-partition's log from the catalog (any node may
// read and write cursors; appends are the owner's).
func (s *Server) openLog(ctx context.Context, name string) (lakestream.Log, error) {
	ref, err := s.cfg.Broker.Resolve(ctx, name, false)
	if err != nil {
		return nil, err
	}
	st, err := s.cfg.Catalog.Stream(ctx, ref.Stream)
	if err != nil {
		return nil, err
	}
	return st.Log(ctx, ref.Index)
}

func handleOffsetFetch(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.OffsetFetchRequest)
	s := c.srv
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	if r.Version >= 8 {
		for _, g := range r.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group = g.Group
			if err := s.coordinate(ctx, g.Group); err != nil {
				rg.ErrorCode = errCode(err)
			} else {
				rg.Topics = s.fetchOffsets(ctx, c, g.Group, groupTopics(g.Topics), r.RequireStable)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		a.set(resp)
		return
	}
	if err := s.coordinate(ctx, r.Group); err != nil {
		resp.ErrorCode = errCode(err)
		a.set(resp)
		return
	}
	var want map[string][]int32
	if r.Topics != nil {
		want = map[string][]int32{}
		for _, t := range r.Topics {
			want[t.Topic] = t.Partitions
		}
	}
	for _, gt := range s.fetchOffsets(ctx, c, r.Group, want, r.RequireStable) {
		st := kmsg.NewOffsetFetchResponseTopic()
		st.Topic = gt.Topic
		for _, gp := range gt.Partitions {
			sp := kmsg.NewOffsetFetchResponseTopicPartition()
			sp.Partition, sp.Offset, sp.LeaderEpoch, sp.Metadata, sp.ErrorCode = gp.Partition, gp.Offset, gp.LeaderEpoch, gp.Metadata, gp.ErrorCode
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	a.set(resp)
}

// groupTopics is a v8 request group's topics as a map (nil: all).
func groupTopics(ts []kmsg.OffsetFetchRequestGroupTopic) map[string][]int32 {
	if ts == nil {
		return nil
	}
	out := map[string][]int32{}
	for _, t := range ts {
		out[t.Topic] = t.Partitions
	}
	return out
}

// fetchOffsets reads a group's committed offsets: for each partition
// asked (want nil: every partition of every topic of the namespace with a
// cursor named after the group), its cursor's mark-delete + 1, or -1
// without one. The offsets committed by ended transactions are settled
// first; with requireStable (KIP-447), a partition whose offset an open
// transaction commits is answered UNSTABLE_OFFSET_COMMIT.
func (s *Server) fetchOffsets(ctx context.Context, c *conn, group string, want map[string][]int32, requireStable bool) []kmsg.OffsetFetchResponseGroupTopic {
	all := want == nil
	if all {
		want = map[string][]int32{}
		topics, err := s.namespaceTopics(ctx)
		if err != nil {
			s.log.Warn("kafka offset fetch: listing topics", "err", err)
		}
		for _, t := range topics {
			want[t] = nil
		}
	}
	var out []kmsg.OffsetFetchResponseGroupTopic
	for topic, parts := range want {
		gt := kmsg.NewOffsetFetchResponseGroupTopic()
		gt.Topic = topic
		err := c.authorizeGroup(ctx, group, topic)
		if err != nil && all {
			continue // listing: only the topics the role may read the group's offsets of
		}
		var info topicInfo
		if err == nil {
			info, err = s.topicInfo(ctx, topic, false)
		}
		if parts == nil && err == nil {
			for p := range int32(info.partitions) {
				parts = append(parts, p)
			}
		}
		for _, p := range parts {
			gp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			gp.Partition, gp.Offset, gp.LeaderEpoch = p, -1, -1
			empty := ""
			gp.Metadata = &empty
			switch {
			case err != nil:
				gp.ErrorCode = errCode(err)
			case p < 0 || int(p) >= info.partitions:
				gp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				name := s.partitionName(topic, p, info.partitioned)
				pending, err := s.settlePending(ctx, group, name) // txn_offsets.go
				var off int64
				var md string
				var ok bool
				if err == nil {
					off, md, ok, err = s.committed(ctx, group, name)
				}
				switch {
				case err == nil && pending && requireStable:
					gp.ErrorCode = kerr.UnstableOffsetCommit.Code
				case err != nil:
					gp.ErrorCode = errCode(err)
				case ok:
					gp.Offset, gp.Metadata = off, &md
				case all:
					continue // listing: only the partitions with an offset
				}
			}
			gt.Partitions = append(gt.Partitions, gp)
		}
		if !all || len(gt.Partitions) > 0 {
			out = append(out, gt)
		}
	}
	return out
}

// committed is a group's committed offset of a partition (its cursor's
// mark-delete + 1) and the commit's metadata (ok false: no cursor).
func (s *Server) committed(ctx context.Context, group, name string) (int64, string, bool, error) {
	log, err := s.openLog(ctx, name)
	if err != nil {
		return -1, "", false, err
	}
	cur, err := log.LoadCursor(ctx, group)
	if errors.Is(err, lakestream.ErrNoSuchCursor) {
		return -1, "", false, nil
	}
	if err != nil {
		return -1, "", false, err
	}
	defer cur.Close(ctx)
	return cur.MarkDeleteOffset() + 1, propsMetadata(cur.Properties()), true, nil
}

func handleOffsetDelete(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.OffsetDeleteRequest)
	s := c.srv
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if err := s.coordinate(ctx, r.Group); err != nil {
		resp.ErrorCode = errCode(err)
		a.set(resp)
		return
	}
	for _, rt := range r.Topics {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		err := c.authorizeGroup(ctx, r.Group, rt.Topic)
		var info topicInfo
		if err == nil {
			info, err = s.topicInfo(ctx, rt.Topic, false)
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case err != nil:
				sp.ErrorCode = errCode(err)
			case rp.Partition < 0 || int(rp.Partition) >= info.partitions:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				log, lerr := s.openLog(ctx, s.partitionName(rt.Topic, rp.Partition, info.partitioned))
				if lerr == nil {
					if lerr = log.DeleteCursor(ctx, r.Group); errors.Is(lerr, lakestream.ErrNoSuchCursor) {
						lerr = nil
					}
				}
				sp.ErrorCode = errCode(lerr)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	a.set(resp)
}
