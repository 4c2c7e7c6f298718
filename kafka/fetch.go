package kafka

// Fetch, ListOffsets and OffsetForLeaderEpoch (docs/kafka.md, "Fetch:
// Pulsar entries → Kafka record batches"). A partition is fetched from its
// owner (NOT_LEADER_OR_FOLLOWER elsewhere); the entries are read from the
// log — WAL or Parquet, as the log serves them — and each becomes one
// uncompressed RecordBatch v2. A fetch with too little data waits for the
// first of its partitions to grow, up to its MaxWaitMillis.

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
)

// fetchRecordsMax bounds the records one partition's read asks for (the
// byte bounds usually end it first).
const fetchRecordsMax = 100_000

// maxFetchWait bounds how long a fetch waits for data.
const maxFetchWait = 30 * time.Second

func handleFetch(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.FetchRequest)
	go c.srv.fetch(c, r, a) // may wait: the reader goes on (answers stay in order)
}

// fetchPart is one partition of a fetch.
type fetchPart struct {
	topic string
	req   *kmsg.FetchRequestTopicPartition
	out   *kmsg.FetchResponseTopicPartition
	t     broker.ServedPartition
	// records counts the records of the batches in out.
	records int
}

func (s *Server) fetch(c *conn, r *kmsg.FetchRequest, a *answer) {
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	var parts []*fetchPart
	for ti := range r.Topics {
		rt := &r.Topics[ti]
		st := kmsg.NewFetchResponseTopic()
		st.Topic = rt.Topic
		st.TopicID = rt.TopicID
		st.Partitions = make([]kmsg.FetchResponseTopicPartition, len(rt.Partitions))
		resp.Topics = append(resp.Topics, st)
		outs := resp.Topics[len(resp.Topics)-1].Partitions
		for pi := range rt.Partitions {
			out := &outs[pi]
			*out = kmsg.NewFetchResponseTopicPartition()
			out.Partition, out.RecordBatches = rt.Partitions[pi].Partition, []byte{}
			out.HighWatermark, out.LastStableOffset, out.LogStartOffset = -1, -1, -1
			fp := &fetchPart{topic: rt.Topic, req: &rt.Partitions[pi], out: out}
			if err := c.authorize(ctx, rt.Topic, broker.ActionConsume); err != nil {
				out.ErrorCode = errCode(err)
				continue
			}
			t, err := s.partition(ctx, rt.Topic, fp.req.Partition, false)
			if err != nil {
				out.ErrorCode = errCode(err)
				continue
			}
			fp.t = t
			parts = append(parts, fp)
		}
	}
	maxBytes := min(int(r.MaxBytes), s.cfg.MaxFetchBytes)
	if r.Version < 3 || maxBytes <= 0 {
		maxBytes = s.cfg.MaxFetchBytes
	}
	maxBytes = s.holdFetch(a, maxBytes)
	wait := min(time.Duration(r.MaxWaitMillis)*time.Millisecond, maxFetchWait)
	deadline := time.Now().Add(wait)
	for {
		total := s.readParts(ctx, parts, maxBytes)
		if total >= int(max(r.MinBytes, 1)) || len(parts) == 0 || !time.Now().Before(deadline) {
			break
		}
		if !s.waitParts(ctx, parts, deadline) {
			break
		}
	}
	for _, fp := range parts {
		if n := len(fp.out.RecordBatches); n > 0 {
			s.metrics.fetchedBytes.Add(float64(n))
			s.metrics.fetchedRecords.Add(float64(fp.records))
		}
	}
	a.set(resp)
}

// holdFetch weighs a fetch answer of up to maxBytes in the node's
// in-flight bytes, released once it is written, and returns the bound the
// answer must keep. It never waits (the answers the fetch's connection has
// queued before it may hold the weight it would wait for): with too little
// left, the answer shrinks to what is left, at worst to fetchFloorBytes,
// unweighed.
func (s *Server) holdFetch(a *answer, maxBytes int) int {
	for n := maxBytes; n >= fetchFloorBytes; n /= 2 {
		if s.inflight.TryAcquire(int64(n)) {
			a.held.Add(int64(n))
			return n
		}
	}
	return min(maxBytes, fetchFloorBytes)
}

// fetchFloorBytes is the least a fetch answer may hold when the node is
// at its in-flight bound.
const fetchFloorBytes = 64 << 10

// readParts reads every partition from its fetch offset, the answer's
// bytes bounded by maxBytes (the first partition with data gets at least
// one batch, as Kafka's), and returns the record bytes read.
func (s *Server) readParts(ctx context.Context, parts []*fetchPart, maxBytes int) int {
	total := 0
	for _, fp := range parts {
		out := fp.out
		out.RecordBatches = out.RecordBatches[:0]
		fp.records = 0
		if out.RecordBatches == nil {
			out.RecordBatches = []byte{} // empty, never null: librdkafka refuses a null record set
		}
		out.ErrorCode = 0
		log := fp.t.Log()
		first, err := log.FirstOffset(ctx)
		if err == nil {
			var next int64
			if next, err = log.NextOffset(ctx); err == nil {
				out.HighWatermark, out.LastStableOffset, out.LogStartOffset = next, next, first
				off := fp.req.FetchOffset
				switch {
				case off < first || off > next:
					out.ErrorCode = kerr.OffsetOutOfRange.Code
					continue
				case off == next:
					continue
				}
				left := min(int(fp.req.PartitionMaxBytes), maxBytes-total)
				if left <= 0 && total > 0 {
					continue
				}
				var es []lakestream.Entry
				es, err = log.ReadEntries(ctx, off, fetchRecordsMax, int64(max(left, 1)))
				for _, e := range es {
					n := len(out.RecordBatches)
					if out.RecordBatches, err = AppendBatch(out.RecordBatches, e.Offset, e.Payload, defaultMaxMessageSize*4); err != nil {
						if n > 0 {
							out.RecordBatches, err = out.RecordBatches[:n], nil // answer what converted; the next fetch meets the error
						}
						break
					}
					if len(out.RecordBatches) >= left && n > 0 {
						out.RecordBatches = out.RecordBatches[:n]
						break
					}
					fp.records += int(e.Records)
				}
				total += len(out.RecordBatches)
			}
		}
		if err != nil {
			if errors.Is(err, lakestream.ErrOffsetTrimmed) {
				out.ErrorCode = kerr.OffsetOutOfRange.Code
			} else {
				out.ErrorCode = errCode(err)
				s.log.Warn("kafka fetch", "topic", fp.t.Name(), "offset", fp.req.FetchOffset, "err", err)
			}
		}
	}
	return total
}

// waitParts waits until one partition's log grows past its fetch offset
// or the deadline passes; false when the fetch should answer now.
func (s *Server) waitParts(ctx context.Context, parts []*fetchPart, deadline time.Time) bool {
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	grew := make(chan struct{}, len(parts))
	for _, fp := range parts {
		if fp.out.ErrorCode != 0 {
			continue
		}
		go func() {
			if _, err := fp.t.Log().WaitForEntries(wctx, fp.req.FetchOffset); err == nil {
				grew <- struct{}{}
			}
		}()
	}
	select {
	case <-grew:
		return true
	case <-wctx.Done():
		return false
	}
}

func handleListOffsets(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.ListOffsetsRequest)
	s := c.srv
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition, sp.Timestamp, sp.Offset = rp.Partition, -1, -1
			off, ts, err := int64(-1), int64(-1), c.authorize(ctx, rt.Topic, broker.ActionLookup)
			if err == nil {
				off, ts, err = s.listOffset(ctx, rt.Topic, rp.Partition, rp.Timestamp)
			}
			if err != nil {
				sp.ErrorCode = errCode(err)
			} else {
				sp.Offset, sp.Timestamp = off, ts
				if r.Version == 0 {
					sp.OldStyleOffsets = []int64{off}
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	a.set(resp)
}

// listOffset answers one partition of ListOffsets: -2 earliest, -1
// latest, -3 the record with the largest timestamp (the last one: publish
// times only grow), -4 earliest local (the same as earliest), -5 latest
// tiered (none: -1), else the first offset at or after a time.
func (s *Server) listOffset(ctx context.Context, topic string, p int32, ts int64) (int64, int64, error) {
	t, err := s.partition(ctx, topic, p, false)
	if err != nil {
		return -1, -1, err
	}
	log := t.Log()
	switch ts {
	case -2, -4:
		off, err := log.FirstOffset(ctx)
		return off, -1, err
	case -1:
		off, err := log.NextOffset(ctx)
		return off, -1, err
	case -5:
		return -1, -1, nil
	case -3:
		first, err := log.FirstOffset(ctx)
		if err != nil {
			return -1, -1, err
		}
		next, err := log.NextOffset(ctx)
		if err != nil || next == first {
			return -1, -1, err
		}
		h, err := log.EntryHeader(ctx, next-1)
		if err != nil {
			return -1, -1, err
		}
		return next - 1, h.PublishTimeMs, nil
	}
	if ts < 0 {
		return -1, -1, kerr.InvalidRequest
	}
	off, err := log.FindOffsetByTime(ctx, time.UnixMilli(ts))
	if err != nil {
		return -1, -1, err
	}
	next, err := log.NextOffset(ctx)
	if err != nil {
		return -1, -1, err
	}
	if off >= next {
		return -1, -1, nil // no record at or after ts
	}
	// The entry's publish time is its records' latest timestamp: the
	// first record at or after ts is in it.
	e, err := log.ReadEntry(ctx, off)
	if err != nil {
		return -1, -1, err
	}
	times, err := recordTimes(e.Payload, defaultMaxMessageSize*4)
	if err != nil {
		return e.Offset, e.PublishTimeMs, nil
	}
	for i, rt := range times {
		if rt >= ts {
			return e.Offset + int64(i), rt, nil
		}
	}
	return e.Offset, e.PublishTimeMs, nil
}

// OffsetForLeaderEpoch: the leader epoch is always 0 (ownership moves
// carry no data: no replica ever diverges), so the end of epoch 0 is the
// log's head.
func handleOffsetForLeaderEpoch(c *conn, req kmsg.Request, a *answer) {
	r := req.(*kmsg.OffsetForLeaderEpochRequest)
	s := c.srv
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition, sp.LeaderEpoch, sp.EndOffset = rp.Partition, -1, -1
			t, err := broker.ServedPartition(nil), c.authorize(ctx, rt.Topic, broker.ActionLookup)
			if err == nil {
				t, err = s.partition(ctx, rt.Topic, rp.Partition, false)
			}
			if err == nil {
				var next int64
				if next, err = t.Log().NextOffset(ctx); err == nil {
					sp.LeaderEpoch, sp.EndOffset = 0, next
				}
			}
			sp.ErrorCode = errCode(err)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	a.set(resp)
}
