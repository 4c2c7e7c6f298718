package admin

// Admin REST: the backlog runbook — skip messages, clear a subscription's
// backlog (skip_all), expire messages older than a time or up to a message
// id, for one subscription or every subscription of a topic.
//
// Each acknowledges records below an offset (broker.PolicyTopic's
// ExpireBelow: through the running subscription actor, else in the stored
// cursor under the topic's ownership), as Pulsar's broker moves the
// cursor's mark-delete position; consumers stay connected and are not
// sent what was acknowledged. On a partitioned topic the request goes to
// every partition's owner (a message id names its partition).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
)

// skipScanWindow is the offsets one index read of skip covers.
const skipScanWindow = 1 << 16

// expireBelow acknowledges, on subscription name of the request's topic
// (every subscription when name is ""), every record below the offset
// target picks. A partitioned topic is fanned out to its partitions'
// owners (only: the partitions to send it to; none: every one).
func (a *admin) expireBelow(r *http.Request, name string, target func(context.Context, broker.ServedTopic) (int64, error), only ...int) (any, error) {
	ctx := r.Context()
	ref, err := a.refOf(r)
	if err != nil {
		return nil, err
	}
	if ref.partitioned() {
		rs, err := a.fanOut(r, ref, "", only...)
		if err != nil {
			return nil, err
		}
		return combineWrites(rs, name != "")
	}
	ts, err := a.topics(ctx, ref)
	if err != nil {
		return nil, err
	}
	t := ts[0]
	names, err := t.SubscriptionNames(ctx)
	if err != nil {
		return nil, err
	}
	if name != "" {
		if !slices.Contains(names, name) {
			return nil, fmt.Errorf("%w: subscription %s not found on %s", errAdminNotFound, name, ref.name)
		}
		names = []string{name}
	}
	off, err := target(ctx, t)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if err := t.ExpireBelow(ctx, n, off); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// clearBacklog serves POST …/subscription/{sub}/skip_all (pulsar-admin
// topics clear-backlog): everything published so far is acknowledged.
func (a *admin) clearBacklog(r *http.Request) (any, error) {
	name, err := subscriptionName(r)
	if err != nil {
		return nil, err
	}
	return a.expireBelow(r, name, func(ctx context.Context, t broker.ServedTopic) (int64, error) {
		return t.Log().NextOffset(ctx)
	})
}

// expireSeconds reads {expireTimeInSeconds}: the records published before
// now minus that many seconds expire.
func expireSeconds(r *http.Request) (time.Time, error) {
	s, err := strconv.ParseInt(r.PathValue("seconds"), 10, 64)
	if err != nil || s < 0 {
		return time.Time{}, fmt.Errorf("%w: expireTimeInSeconds %q: want 0 or more seconds", errAdminBadRequest, r.PathValue("seconds"))
	}
	return time.Now().Add(-time.Duration(s) * time.Second), nil
}

// byPublishTime expires the records published before cutoff.
func byPublishTime(cutoff time.Time) func(context.Context, broker.ServedTopic) (int64, error) {
	return func(ctx context.Context, t broker.ServedTopic) (int64, error) {
		return t.Log().FindOffsetByTime(ctx, cutoff)
	}
}

// expireByTime serves POST …/subscription/{sub}/expireMessages/{seconds}
// (pulsar-admin topics expire-messages -t).
func (a *admin) expireByTime(r *http.Request) (any, error) {
	name, err := subscriptionName(r)
	if err != nil {
		return nil, err
	}
	cutoff, err := expireSeconds(r)
	if err != nil {
		return nil, err
	}
	return a.expireBelow(r, name, byPublishTime(cutoff))
}

// expireAllByTime serves POST …/all_subscription/expireMessages/{seconds}
// (pulsar-admin topics expire-messages-all-subscriptions).
func (a *admin) expireAllByTime(r *http.Request) (any, error) {
	cutoff, err := expireSeconds(r)
	if err != nil {
		return nil, err
	}
	return a.expireBelow(r, "", byPublishTime(cutoff))
}

// expireByID serves POST …/subscription/{sub}/expireMessages with a
// message id (Pulsar's ResetCursorData; pulsar-admin topics
// expire-messages -m): the messages up to and including it expire (its
// whole entry), or up to it excluded with isExcluded.
func (a *admin) expireByID(r *http.Request) (any, error) {
	name, err := subscriptionName(r)
	if err != nil {
		return nil, err
	}
	ref, err := a.refOf(r)
	if err != nil {
		return nil, err
	}
	var m struct {
		messageIDJSON
		IsExcluded bool `json:"isExcluded"`
	}
	b, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, fmt.Errorf("%w: expire-messages by message id needs the id in the body", errAdminBadRequest)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: message id body: %v", errAdminBadRequest, err)
	}
	id := protocol.MessageID{LedgerID: m.LedgerID, EntryID: m.EntryID}
	if id.IsEarliest() || id.IsLatest() || m.LedgerID < 0 || m.EntryID < 0 {
		return nil, fmt.Errorf("%w: expire-messages needs the id of a message (not earliest or latest)", errAdminBadRequest)
	}
	var only []int
	if ref.partitioned() {
		n := ref.md.Partitioning.NumPartitions
		if m.PartitionIndex < 0 || int(m.PartitionIndex) >= n {
			return nil, fmt.Errorf("%w: expiring on %s (%d partitions) by message id needs the partitionIndex of the id", errAdminPrecondition, ref.name, n)
		}
		only = []int{int(m.PartitionIndex)}
	}
	return a.expireBelow(r, name, func(ctx context.Context, t broker.ServedTopic) (int64, error) {
		if m.LedgerID != int64(t.Log().ID()) {
			return 0, fmt.Errorf("%w: message id %d:%d is not of %s (its ledger is %d)", errAdminPrecondition, m.LedgerID, m.EntryID, t.Name(), t.Log().ID())
		}
		next, err := t.Log().NextOffset(ctx)
		if err != nil {
			return 0, err
		}
		if m.IsExcluded {
			return min(m.EntryID, next), nil
		}
		h, err := t.Log().EntryHeader(ctx, m.EntryID)
		switch {
		case errors.Is(err, lakestream.ErrOffsetOutOfRange):
			return next, nil
		case errors.Is(err, lakestream.ErrOffsetTrimmed):
			return t.Log().FirstOffset(ctx)
		case err != nil:
			return 0, err
		}
		return h.End(), nil
	}, only...)
}

// skipMessages serves POST …/subscription/{sub}/skip/{n} (pulsar-admin
// topics skip): the first n entries of the backlog — entries not
// acknowledged wholly, in order — are acknowledged, as Pulsar's broker
// skips entries.
func (a *admin) skipMessages(r *http.Request) (any, error) {
	name, err := subscriptionName(r)
	if err != nil {
		return nil, err
	}
	n, err := strconv.ParseInt(r.PathValue("n"), 10, 64)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("%w: number of messages %q: want 0 or more", errAdminBadRequest, r.PathValue("n"))
	}
	return a.expireBelow(r, name, func(ctx context.Context, t broker.ServedTopic) (int64, error) {
		return skipTarget(ctx, t, name, n)
	})
}

// skipTarget is the offset below which the first n entries of the backlog
// of subscription name lie.
func skipTarget(ctx context.Context, t broker.ServedTopic, name string, n int64) (int64, error) {
	info, err := t.SubscriptionInfo(ctx, name)
	if err != nil {
		return 0, err
	}
	log := t.Log()
	first, err := log.FirstOffset(ctx)
	if err != nil {
		return 0, err
	}
	next, err := log.NextOffset(ctx)
	if err != nil {
		return 0, err
	}
	pos := max(first, info.MarkDeleteOffset+1)
	for pos < next && n > 0 {
		hs, err := log.IndexRange(ctx, pos, min(pos+skipScanWindow, next))
		if err != nil {
			return 0, err
		}
		if len(hs) == 0 {
			break
		}
		for _, h := range hs {
			end := h.End()
			if end <= pos {
				continue
			}
			if info.UnackedRecords(h.Offset, end) > 0 {
				n--
			}
			pos = end
			if n == 0 {
				break
			}
		}
	}
	return pos, nil
}
