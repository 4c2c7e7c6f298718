package catalog

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/lakegate/lakegate/lakestream"
)

// Stream returns a handle on a stream. The handle is a snapshot of the
// metadata at open time: re-open it to see partitions added since.
func (c *Catalog) Stream(ctx context.Context, id lakestream.StreamIdentifier) (lakestream.Stream, error) {
	return c.openStream(ctx, id)
}

func (c *Catalog) openStream(ctx context.Context, id lakestream.StreamIdentifier) (*streamHandle, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := validateStreamID(id); err != nil {
		return nil, err
	}
	r, err := c.loadStreamShared(ctx, "open stream", id)
	if err != nil {
		return nil, err
	}
	md := r.toMetadata()
	s := &streamHandle{c: c, md: md, layout: newLayout(md.Partitioning, md.LogIDs)}
	if c.opts.TableProvider != nil {
		s.table = c.opts.TableProvider(cloneMetadata(md))
	}
	if s.table == nil {
		s.table = notMaterialized{id: id}
	}
	return s, nil
}

// OpenLog returns partition's log of the stream (-1 is accepted for the one
// log of a non-partitioned stream).
func (c *Catalog) OpenLog(ctx context.Context, id lakestream.StreamIdentifier, partition int) (lakestream.Log, error) {
	s, err := c.openStream(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.Log(ctx, partition)
}

// OpenWriter returns a writer on the stream (see Stream).
func (c *Catalog) OpenWriter(ctx context.Context, id lakestream.StreamIdentifier) (lakestream.StreamWriter, error) {
	s, err := c.openStream(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.NewWriter(), nil
}

// OpenReader returns a reader on the stream (see Stream).
func (c *Catalog) OpenReader(ctx context.Context, id lakestream.StreamIdentifier) (lakestream.StreamReader, error) {
	s, err := c.openStream(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.NewReader(), nil
}

func cloneMetadata(md lakestream.StreamMetadata) lakestream.StreamMetadata {
	out := md
	out.Config.Properties = maps.Clone(md.Config.Properties)
	out.Schema.Definition = slices.Clone(md.Schema.Definition)
	out.Schema.Properties = maps.Clone(md.Schema.Properties)
	out.Properties = maps.Clone(md.Properties)
	out.Materialization = clonePolicy(md.Materialization)
	out.LogIDs = slices.Clone(md.LogIDs)
	return out
}

// streamHandle implements lakestream.Stream.
type streamHandle struct {
	c      *Catalog
	md     lakestream.StreamMetadata // immutable
	layout *layout
	table  lakestream.Table
}

var _ lakestream.Stream = (*streamHandle)(nil)

func (s *streamHandle) Metadata() lakestream.StreamMetadata { return cloneMetadata(s.md) }
func (s *streamHandle) Layout() lakestream.StreamLayout     { return s.layout }
func (s *streamHandle) Table() lakestream.Table             { return s.table }
func (s *streamHandle) NewWriter() lakestream.StreamWriter  { return writer{s} }
func (s *streamHandle) NewReader() lakestream.StreamReader  { return reader{s} }

// Log returns partition's log through the catalog's LogStorage.
func (s *streamHandle) Log(ctx context.Context, partition int) (lakestream.Log, error) {
	if err := s.c.check(); err != nil {
		return nil, err
	}
	p, err := s.layout.checkPartition(partition)
	if err != nil {
		return nil, err
	}
	return s.c.logs.Log(ctx, s.layout.ids[p])
}

// layout implements lakestream.StreamLayout over a metadata snapshot.
// Safe for concurrent use: only the round-robin counter changes.
type layout struct {
	p     lakestream.Partitioning
	ids   []lakestream.LogID
	index map[lakestream.LogID]int
	rr    atomic.Uint64
}

func newLayout(p lakestream.Partitioning, ids []lakestream.LogID) *layout {
	l := &layout{p: p, ids: ids, index: make(map[lakestream.LogID]int, len(ids))}
	for i, id := range ids {
		l.index[id] = i
	}
	return l
}

var _ lakestream.StreamLayout = (*layout)(nil)

func (l *layout) Partitioning() lakestream.Partitioning { return l.p }
func (l *layout) LogIDs() []lakestream.LogID            { return slices.Clone(l.ids) }
func (l *layout) LogCount() int                         { return len(l.ids) }

// ResolveForWrite returns the partition index of a write: an explicit
// partition as given (-1 → 0 on a non-partitioned stream; the writer rejects
// indexes out of range), a non-empty key by PartitionForKey, otherwise the
// next partition round-robin.
func (l *layout) ResolveForWrite(k lakestream.RoutingKey) int {
	n := len(l.ids)
	switch {
	case k.Explicit:
		if k.Partition == -1 && l.p.NumPartitions == 0 {
			return 0
		}
		return k.Partition
	case k.Key != "":
		return PartitionForKey(k.Key, n)
	default:
		return int((l.rr.Add(1) - 1) % uint64(n))
	}
}

func (l *layout) checkPartition(p int) (int, error) {
	if p == -1 && l.p.NumPartitions == 0 {
		return 0, nil
	}
	if p < 0 || p >= len(l.ids) {
		return 0, fmt.Errorf("%w: partition %d of %d", lakestream.ErrInvalidArgument, p, len(l.ids))
	}
	return p, nil
}

// writer implements lakestream.StreamWriter: route, then LogStorage.Append.
type writer struct{ s *streamHandle }

func (w writer) Write(ctx context.Context, k lakestream.RoutingKey, records int, payload []byte,
	opts ...lakestream.AppendOption) (lakestream.WriteResult, error) {
	if err := w.s.c.check(); err != nil {
		return lakestream.WriteResult{}, err
	}
	p, err := w.s.layout.checkPartition(w.s.layout.ResolveForWrite(k))
	if err != nil {
		return lakestream.WriteResult{}, err
	}
	id := w.s.layout.ids[p]
	h, err := w.s.c.logs.Append(ctx, id, records, payload, opts...)
	if err != nil {
		return lakestream.WriteResult{}, err
	}
	return lakestream.WriteResult{LogID: id, Partition: p, Header: h}, nil
}

func (w writer) Append(ctx context.Context, k lakestream.RoutingKey, records int, payload []byte,
	opts ...lakestream.AppendOption) (lakestream.WriteResult, error) {
	return w.Write(ctx, k, records, payload, opts...)
}

// reader implements lakestream.StreamReader over LogStorage.ReadEntries.
type reader struct{ s *streamHandle }

// Read reads whole entries of one of the stream's logs from start
// (ErrNoSuchLog for a log that is not the stream's). NextOffset is the end
// of the last entry returned, or start when none was.
func (r reader) Read(ctx context.Context, log lakestream.LogID, start int64, maxRecords int, maxBytes int64) (lakestream.ReadResult, error) {
	if err := r.s.c.check(); err != nil {
		return lakestream.ReadResult{}, err
	}
	if _, ok := r.s.layout.index[log]; !ok {
		return lakestream.ReadResult{}, fmt.Errorf("%w: log %d is not a log of stream %s", lakestream.ErrNoSuchLog, log, r.s.md.ID)
	}
	entries, err := r.s.c.logs.ReadEntries(ctx, log, start, maxRecords, maxBytes)
	if err != nil {
		return lakestream.ReadResult{}, err
	}
	next := start
	if len(entries) > 0 {
		next = entries[len(entries)-1].End()
	}
	return lakestream.ReadResult{Entries: entries, NextOffset: next}, nil
}

// notMaterialized is the Table of a stream without a TableProvider.
type notMaterialized struct{ id lakestream.StreamIdentifier }

func (t notMaterialized) Scan(context.Context) ([][]byte, error) {
	return nil, fmt.Errorf("%w: stream %s", lakestream.ErrNotMaterialized, t.id)
}

func (t notMaterialized) Info(context.Context) (lakestream.TableInfo, error) {
	return lakestream.TableInfo{}, fmt.Errorf("%w: stream %s", lakestream.ErrNotMaterialized, t.id)
}
