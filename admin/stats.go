package admin

// Admin REST: topic stats and partitioned stats, in Pulsar's JSON shape
// (broker.TopicStats, built by the node serving the topic: broker/topic.go
// says what is measured).

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/lakegate/lakegate/broker"
)

type partitionedStatsJSON struct {
	broker.TopicStats
	Metadata   partitionedMetadata          `json:"metadata"`
	Partitions map[string]broker.TopicStats `json:"partitions"`
}

func (a *admin) topicStats(r *http.Request) (any, error) {
	ref, err := a.refOf(r)
	if err == nil && ref.partitioned() {
		err = fmt.Errorf("%w: %s is a partitioned topic: use partitioned-stats, or the stats of a partition", errAdminNotFound, ref.name)
	}
	if err != nil {
		return nil, err
	}
	ts, err := a.topics(r.Context(), ref)
	if err != nil {
		return nil, err
	}
	st, err := ts[0].Stats(r.Context(), ref.md.CreatedAtMs)
	if err != nil {
		return nil, err
	}
	withSubProps(st, ref.md.Properties, ref.partition) // subprops.go
	return st, nil
}

func (a *admin) partitionedStats(r *http.Request) (any, error) {
	ref, err := a.refOf(r)
	if err == nil && !ref.partitioned() {
		err = fmt.Errorf("%w: partitioned topic %s not found (it is not partitioned: use stats)", errAdminNotFound, ref.name)
	}
	if err != nil {
		return nil, err
	}
	rs, err := a.fanOut(r, ref, "/stats") // each partition's stats, from its owner
	if err != nil {
		return nil, err
	}
	perPartition := r.URL.Query().Get("perPartition") != "false"
	out := partitionedStatsJSON{
		TopicStats: broker.TopicStats{
			Publishers:             []broker.PublisherStats{},
			Subscriptions:          map[string]broker.SubscriptionStats{},
			Replication:            map[string]any{},
			DeduplicationStatus:    "Disabled",
			TopicCreationTimeStamp: ref.md.CreatedAtMs,
		},
		Metadata:   partitionedMetadata{Partitions: ref.md.Partitioning.NumPartitions},
		Partitions: map[string]broker.TopicStats{},
	}
	for _, res := range rs {
		if !res.ok() {
			return nil, res.err()
		}
		var st broker.TopicStats
		if err := json.Unmarshal(res.body.Bytes(), &st); err != nil {
			return nil, fmt.Errorf("stats of partition %d: %w", res.partition, err)
		}
		if perPartition {
			out.Partitions[partitionName(ref.name, res.partition)] = st
		}
		agg := &out.TopicStats
		agg.MsgInCounter += st.MsgInCounter
		agg.BytesInCounter += st.BytesInCounter
		agg.StorageSize += st.StorageSize
		agg.MsgRateIn += st.MsgRateIn
		agg.MsgRateOut += st.MsgRateOut
		agg.MsgThroughputIn += st.MsgThroughputIn
		agg.MsgThroughputOut += st.MsgThroughputOut
		agg.BacklogSize += st.BacklogSize
		agg.LastPublishTimestamp = max(agg.LastPublishTimestamp, st.LastPublishTimestamp)
		agg.Publishers = append(agg.Publishers, st.Publishers...)
		for name, ss := range st.Subscriptions {
			sum, ok := agg.Subscriptions[name]
			if !ok {
				sum = broker.SubscriptionStats{Consumers: []broker.ConsumerStats{}, IsDurable: ss.IsDurable}
			}
			sum.MsgBacklog += ss.MsgBacklog
			sum.BacklogSize += ss.BacklogSize
			sum.MsgRateOut += ss.MsgRateOut
			sum.MsgThroughputOut += ss.MsgThroughputOut
			sum.Consumers = append(sum.Consumers, ss.Consumers...)
			if sum.Type == "" {
				sum.Type = ss.Type
			}
			if sum.SubscriptionProperties == nil {
				sum.SubscriptionProperties = ss.SubscriptionProperties
			}
			agg.Subscriptions[name] = sum
		}
	}
	if out.MsgInCounter > 0 {
		out.AverageMsgSize = float64(out.BytesInCounter) / float64(out.MsgInCounter)
	}
	return out, nil
}
