package catalog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
)

// partitionsMax bounds a stream's partition count (count): the stream
// record holds one log id per partition in one metadata value.
const partitionsMax = 10_000

// loadStream reads a stream record and its ModRevision. Absent streams give
// lakestream.ErrNoSuchStream, or *StreamDeletedError when tombstoned.
func (c *Catalog) loadStream(ctx context.Context, op string, id lakestream.StreamIdentifier) (*streamRecord, int64, error) {
	key, kv, err := c.getStream(ctx, op, id)
	if err != nil {
		return nil, 0, err
	}
	r, err := decodeStream(key, kv.Value)
	if err != nil {
		return nil, 0, err
	}
	return r, kv.ModRevision, nil
}

// loadStreamShared is loadStream for callers that only read the record
// (toMetadata copies it): the record may be shared with other callers and
// is reused while the stored record's ModRevision stays the same.
func (c *Catalog) loadStreamShared(ctx context.Context, op string, id lakestream.StreamIdentifier) (*streamRecord, error) {
	key, kv, err := c.getStream(ctx, op, id)
	if err != nil {
		return nil, err
	}
	if r := c.decoded.get(key, kv.ModRevision); r != nil {
		return r, nil
	}
	r, err := decodeStream(key, kv.Value)
	if err != nil {
		return nil, err
	}
	c.decoded.put(key, kv.ModRevision, r, len(kv.Value))
	return r, nil
}

// getStream reads a stream's key. An absent one is an error: the stream
// was dropped (*StreamDeletedError) if its tombstone is there, else
// ErrNoSuchStream.
func (c *Catalog) getStream(ctx context.Context, op string, id lakestream.StreamIdentifier) (string, meta.KV, error) {
	key := c.keys.stream(id)
	kv, found, err := c.get(ctx, op, key)
	if err != nil || found {
		return key, kv, err
	}
	ts, found, err := c.loadTombstone(ctx, op, id)
	if err != nil {
		return key, kv, err
	}
	if found {
		return key, kv, &StreamDeletedError{ID: id, DroppedAtMs: ts.DroppedAtMs}
	}
	return key, kv, fmt.Errorf("%w: %s", lakestream.ErrNoSuchStream, id)
}

func decodeStream(key string, b []byte) (*streamRecord, error) {
	var r streamRecord
	if err := decode(key, b, &r, func() int { return r.V }); err != nil {
		return nil, err
	}
	return &r, nil
}

// recordCache maps a stream key to its last decoded record and the
// ModRevision it was decoded at (a write gives the key a new ModRevision,
// so a stale entry is never returned). Bounded by the stored size of the
// records it holds (recordCacheBytes; the record of a stream of 10 000
// partitions is ≈ 60 KB of JSON, its decoded form of the same order) and
// by entries (recordCacheMax): when either would be exceeded, it starts
// over.
type recordCache struct {
	mu    sync.Mutex
	m     map[string]cachedRecord
	bytes int
}

type cachedRecord struct {
	modRev int64
	r      *streamRecord
	size   int
}

const (
	recordCacheMax   = 4096
	recordCacheBytes = 16 << 20
)

func (rc *recordCache) get(key string, modRev int64) *streamRecord {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if e, ok := rc.m[key]; ok && e.modRev == modRev {
		return e.r
	}
	return nil
}

// put keeps r, decoded from size stored bytes at modRev.
func (rc *recordCache) put(key string, modRev int64, r *streamRecord, size int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if size > recordCacheBytes {
		return
	}
	old, ok := rc.m[key]
	if ok {
		rc.bytes -= old.size
	}
	if rc.m == nil || (!ok && len(rc.m) >= recordCacheMax) || rc.bytes+size > recordCacheBytes {
		rc.m, rc.bytes = make(map[string]cachedRecord), 0
	}
	rc.m[key] = cachedRecord{modRev: modRev, r: r, size: size}
	rc.bytes += size
}

func (c *Catalog) loadTombstone(ctx context.Context, op string, id lakestream.StreamIdentifier) (*tombstoneRecord, bool, error) {
	key := c.keys.tombstone(id)
	kv, found, err := c.get(ctx, op, key)
	if err != nil || !found {
		return nil, false, err
	}
	var r tombstoneRecord
	if err := decode(key, kv.Value, &r, func() int { return r.V }); err != nil {
		return nil, false, err
	}
	return &r, true, nil
}

// allocator reads the log-id allocator: the first free id and the
// ModRevision to compare (0 when the key does not exist yet).
func (c *Catalog) allocator(ctx context.Context, op string) (lakestream.LogID, int64, error) {
	key := c.keys.nextLogID()
	kv, found, err := c.get(ctx, op, key)
	if err != nil {
		return 0, 0, err
	}
	if !found {
		return 1, 0, nil
	}
	next, err := parseNextLogID(key, kv.Value)
	if err != nil {
		return 0, 0, err
	}
	return next, kv.ModRevision, nil
}

// allocate returns the compare and the put that take n ids from next.
func (c *Catalog) allocate(next lakestream.LogID, rev int64, n int) ([]lakestream.LogID, meta.Cmp, meta.Op) {
	ids := make([]lakestream.LogID, n)
	for i := range ids {
		ids[i] = next + lakestream.LogID(i)
	}
	key := c.keys.nextLogID()
	return ids, meta.Cmp{Key: key, ModRevision: rev},
		meta.Put(key, []byte(strconv.FormatInt(int64(next)+int64(n), 10)))
}

func validatePartitioning(p lakestream.Partitioning) error {
	if p.NumPartitions < 0 || p.NumPartitions > partitionsMax {
		return fmt.Errorf("%w: %d partitions (want 0..%d)", lakestream.ErrInvalidArgument, p.NumPartitions, partitionsMax)
	}
	if p.Strategy != lakestream.PartitionIndexed && p.Strategy != lakestream.PartitionRange {
		return fmt.Errorf("%w: partition strategy %d", lakestream.ErrInvalidArgument, p.Strategy)
	}
	return nil
}

func schemaRecordOf(s lakestream.SchemaConfig) schemaRecord {
	t := s.Type
	if t == "" {
		t = lakestream.SchemaNone
	}
	return schemaRecord{Type: t, Definition: slices.Clone(s.Definition), Properties: cloneMap(s.Properties)}
}

// CreateStream creates a stream in an existing namespace with
// max(1, p.NumPartitions) new logs. Errors: ErrNoSuchNamespace,
// ErrAlreadyExists (also wrapping ErrStreamDeleted when the name is
// tombstoned), ErrInvalidArgument.
func (c *Catalog) CreateStream(ctx context.Context, id lakestream.StreamIdentifier, cfg lakestream.StreamConfig,
	p lakestream.Partitioning, schema lakestream.SchemaConfig, props map[string]string,
	m *lakestream.TableMaterializationPolicy) (lakestream.StreamMetadata, error) {
	if err := validateStreamID(id); err != nil {
		return lakestream.StreamMetadata{}, err
	}
	if err := validatePartitioning(p); err != nil {
		return lakestream.StreamMetadata{}, err
	}
	if err := validatePolicy(m); err != nil {
		return lakestream.StreamMetadata{}, err
	}
	const op = "create stream"
	var md lakestream.StreamMetadata
	err := c.commit(ctx, op, func() (*plan, error) {
		nsKey := c.keys.namespace(id.Namespace)
		ns, found, err := c.get(ctx, op, nsKey)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, fmt.Errorf("%w: %s", lakestream.ErrNoSuchNamespace, id.Namespace)
		}
		streamKey, tombKey := c.keys.stream(id), c.keys.tombstone(id)
		if _, found, err := c.get(ctx, op, streamKey); err != nil {
			return nil, err
		} else if found {
			return nil, fmt.Errorf("%w: stream %s", lakestream.ErrAlreadyExists, id)
		}
		if _, found, err := c.get(ctx, op, tombKey); err != nil {
			return nil, err
		} else if found {
			return nil, fmt.Errorf("%w: stream %s was dropped and its name cannot be reused: %w",
				lakestream.ErrAlreadyExists, id, lakestream.ErrStreamDeleted)
		}
		next, allocRev, err := c.allocator(ctx, op)
		if err != nil {
			return nil, err
		}
		ids, allocCmp, allocPut := c.allocate(next, allocRev, p.LogCount())
		r := streamRecord{
			V:               recordVersion,
			Namespace:       id.Namespace,
			Name:            id.Name,
			Config:          cloneMap(cfg.Properties),
			Partitioning:    partitioningRecord{Strategy: strategyString(p.Strategy), Partitions: p.NumPartitions},
			Schema:          schemaRecordOf(schema),
			Properties:      cloneMap(props),
			Materialization: toPolicyRecord(m),
			State:           lakestream.StreamActive,
			LogIDs:          ids,
			Version:         1,
			CreatedAtMs:     c.nowMs(),
		}
		md = r.toMetadata()
		return &plan{
			cmps: []meta.Cmp{
				{Key: streamKey}, {Key: tombKey},
				{Key: nsKey, ModRevision: ns.ModRevision},
				allocCmp,
			},
			ops: []meta.Op{
				meta.Put(streamKey, encode(&r)),
				allocPut,
				// Touch the namespace: a concurrent DropNamespace that saw no
				// streams now fails its compare (docs/catalog.md).
				meta.Put(nsKey, ns.Value),
			},
		}, nil
	})
	if err != nil {
		return lakestream.StreamMetadata{}, err
	}
	return md, nil
}

// LoadStream returns a stream's metadata: ErrNoSuchStream, or a
// *StreamDeletedError (ErrNoSuchStream and ErrStreamDeleted) when dropped.
func (c *Catalog) LoadStream(ctx context.Context, id lakestream.StreamIdentifier) (lakestream.StreamMetadata, error) {
	if err := c.check(); err != nil {
		return lakestream.StreamMetadata{}, err
	}
	if err := validateStreamID(id); err != nil {
		return lakestream.StreamMetadata{}, err
	}
	r, err := c.loadStreamShared(ctx, "load stream", id)
	if err != nil {
		return lakestream.StreamMetadata{}, err
	}
	return r.toMetadata(), nil
}

// StreamExists reports whether the stream exists (false once dropped).
func (c *Catalog) StreamExists(ctx context.Context, id lakestream.StreamIdentifier) (bool, error) {
	if err := c.check(); err != nil {
		return false, err
	}
	if err := validateStreamID(id); err != nil {
		return false, err
	}
	_, found, err := c.get(ctx, "stream exists", c.keys.stream(id))
	return found, err
}

// ListStreams returns the streams of a namespace sorted by name
// (ErrNoSuchNamespace).
func (c *Catalog) ListStreams(ctx context.Context, namespace string) ([]lakestream.StreamIdentifier, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := validateNamespace(namespace); err != nil {
		return nil, err
	}
	const op = "list streams"
	if _, found, err := c.get(ctx, op, c.keys.namespace(namespace)); err != nil {
		return nil, err
	} else if !found {
		return nil, fmt.Errorf("%w: %s", lakestream.ErrNoSuchNamespace, namespace)
	}
	p := c.keys.streamPrefix(namespace)
	kvs, err := c.rangePrefix(ctx, op, p)
	if err != nil {
		return nil, err
	}
	out := make([]lakestream.StreamIdentifier, 0, len(kvs))
	for _, kv := range kvs {
		name, err := unescapeSegment(strings.TrimPrefix(kv.Key, p))
		if err != nil {
			return nil, err
		}
		out = append(out, lakestream.StreamIdentifier{Namespace: namespace, Name: name})
	}
	slices.SortFunc(out, func(a, b lakestream.StreamIdentifier) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// updateStream applies change to a stream record in one CAS and returns the
// resulting metadata. change returns false to leave the record as it is.
func (c *Catalog) updateStream(ctx context.Context, op string, id lakestream.StreamIdentifier,
	change func(r *streamRecord) (write bool, extra *plan, err error)) (lakestream.StreamMetadata, bool, error) {
	if err := validateStreamID(id); err != nil {
		return lakestream.StreamMetadata{}, false, err
	}
	var (
		md      lakestream.StreamMetadata
		written bool
	)
	err := c.commit(ctx, op, func() (*plan, error) {
		r, rev, err := c.loadStream(ctx, op, id)
		if err != nil {
			return nil, err
		}
		write, extra, err := change(r)
		if err != nil {
			return nil, err
		}
		written = write
		if !write {
			md = r.toMetadata()
			return nil, nil
		}
		r.Version++
		md = r.toMetadata()
		key := c.keys.stream(id)
		p := &plan{
			cmps: []meta.Cmp{{Key: key, ModRevision: rev}},
			ops:  []meta.Op{meta.Put(key, encode(r))},
		}
		if extra != nil {
			p.cmps = append(p.cmps, extra.cmps...)
			p.ops = append(p.ops, extra.ops...)
		}
		return p, nil
	})
	if err != nil {
		return lakestream.StreamMetadata{}, false, err
	}
	return md, written, nil
}

// IncreasePartitions grows a partitioned stream to target partitions,
// allocating one new log per new partition; a target at or below the
// current count is a no-op returning the metadata. A non-partitioned stream
// cannot become partitioned (ErrInvalidArgument for target > 0).
func (c *Catalog) IncreasePartitions(ctx context.Context, id lakestream.StreamIdentifier, target int) (lakestream.StreamMetadata, error) {
	if target > partitionsMax {
		return lakestream.StreamMetadata{}, fmt.Errorf("%w: %d partitions (max %d)", lakestream.ErrInvalidArgument, target, partitionsMax)
	}
	const op = "increase partitions"
	md, _, err := c.updateStream(ctx, op, id, func(r *streamRecord) (bool, *plan, error) {
		cur := r.Partitioning.Partitions
		if cur == 0 {
			if target > 0 {
				return false, nil, fmt.Errorf("%w: stream %s is not partitioned", lakestream.ErrInvalidArgument, id)
			}
			return false, nil, nil
		}
		if target <= cur {
			return false, nil, nil
		}
		next, allocRev, err := c.allocator(ctx, op)
		if err != nil {
			return false, nil, err
		}
		ids, cmp, put := c.allocate(next, allocRev, target-cur)
		r.LogIDs = append(r.LogIDs, ids...)
		r.Partitioning.Partitions = target
		return true, &plan{cmps: []meta.Cmp{cmp}, ops: []meta.Op{put}}, nil
	})
	return md, err
}

// ReplaceStreamProperties replaces the stream's properties when its
// MetadataVersion is sourceVersion; otherwise (including after losing a race)
// it changes nothing and returns the current metadata and false.
func (c *Catalog) ReplaceStreamProperties(ctx context.Context, id lakestream.StreamIdentifier, props map[string]string,
	sourceVersion int64) (lakestream.StreamMetadata, bool, error) {
	return c.updateStream(ctx, "replace stream properties", id, func(r *streamRecord) (bool, *plan, error) {
		if r.Version != sourceVersion {
			return false, nil, nil
		}
		r.Properties = cloneMap(props)
		return true, nil, nil
	})
}

// SetStreamSchema replaces the stream's schema (an empty type means NONE).
func (c *Catalog) SetStreamSchema(ctx context.Context, id lakestream.StreamIdentifier, schema lakestream.SchemaConfig) (lakestream.StreamMetadata, error) {
	md, _, err := c.updateStream(ctx, "set stream schema", id, func(r *streamRecord) (bool, *plan, error) {
		r.Schema = schemaRecordOf(schema)
		return true, nil, nil
	})
	return md, err
}

// SetStreamMaterialization sets the stream's own policy (nil clears it, so
// every field inherits).
func (c *Catalog) SetStreamMaterialization(ctx context.Context, id lakestream.StreamIdentifier, p *lakestream.TableMaterializationPolicy) error {
	if err := validatePolicy(p); err != nil {
		return err
	}
	_, _, err := c.updateStream(ctx, "set stream materialization", id, func(r *streamRecord) (bool, *plan, error) {
		r.Materialization = toPolicyRecord(p)
		return true, nil, nil
	})
	return err
}

// ResolveMaterialization merges the stream's policy over its namespace's over
// the cluster default, field by field (a set field wins over an unset one;
// for lists nil is unset and empty is set). Enabled is never nil in the
// result: false when no level sets it. Other unset fields stay nil.
func (c *Catalog) ResolveMaterialization(ctx context.Context, id lakestream.StreamIdentifier) (lakestream.TableMaterializationPolicy, error) {
	if err := c.check(); err != nil {
		return lakestream.TableMaterializationPolicy{}, err
	}
	if err := validateStreamID(id); err != nil {
		return lakestream.TableMaterializationPolicy{}, err
	}
	const op = "resolve materialization"
	r, _, err := c.loadStream(ctx, op, id)
	if err != nil {
		return lakestream.TableMaterializationPolicy{}, err
	}
	ns, _, err := c.loadNamespace(ctx, op, id.Namespace)
	if err != nil {
		return lakestream.TableMaterializationPolicy{}, err
	}
	def, err := c.DefaultMaterialization(ctx)
	if err != nil {
		return lakestream.TableMaterializationPolicy{}, err
	}
	out := resolvePolicy(def, fromPolicyRecord(ns.Materialization), fromPolicyRecord(r.Materialization))
	return out, nil
}

// resolvePolicy is the pure merge of ResolveMaterialization.
func resolvePolicy(def, ns, stream *lakestream.TableMaterializationPolicy) lakestream.TableMaterializationPolicy {
	out := mergePolicy(mergePolicy(def, ns), stream)
	if out.Enabled == nil {
		f := false
		out.Enabled = &f
	}
	return *out
}

// DropStream deletes the stream and writes its permanent tombstone in one
// transaction; with purge it then deletes each log's data
// (LogStorage.DeleteLog, ErrNoSuchLog ignored). A purge failure is returned
// but the stream stays dropped; the tombstone keeps the log ids so the purge
// can be finished later. Dropping a dropped stream returns a
// *StreamDeletedError.
func (c *Catalog) DropStream(ctx context.Context, id lakestream.StreamIdentifier, purge bool) error {
	if err := validateStreamID(id); err != nil {
		return err
	}
	const op = "drop stream"
	var logIDs []lakestream.LogID
	err := c.commit(ctx, op, func() (*plan, error) {
		r, rev, err := c.loadStream(ctx, op, id)
		if err != nil {
			return nil, err
		}
		logIDs = r.LogIDs
		ts := tombstoneRecord{
			V: recordVersion, Namespace: id.Namespace, Name: id.Name, LogIDs: r.LogIDs,
			DroppedAtMs: c.nowMs(), Purge: purge, Version: r.Version,
		}
		streamKey, tombKey := c.keys.stream(id), c.keys.tombstone(id)
		return &plan{
			cmps: []meta.Cmp{{Key: streamKey, ModRevision: rev}, {Key: tombKey}},
			ops:  []meta.Op{meta.Delete(streamKey), meta.Put(tombKey, encode(&ts))},
		}, nil
	})
	if err != nil || !purge {
		return err
	}
	var errs []error
	for _, l := range logIDs {
		if err := c.logs.DeleteLog(ctx, l); err != nil && !errors.Is(err, lakestream.ErrNoSuchLog) {
			errs = append(errs, fmt.Errorf("log %d: %w", l, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("catalog: stream %s dropped, purge incomplete: %w", id, errors.Join(errs...))
	}
	return nil
}

// ListStreamPolicies returns every stream of a namespace, sorted by name,
// with its resolved materialization policy (ResolveMaterialization's), read
// with one range of the namespace's stream records, its namespace record
// and the cluster default — instead of three reads per stream: what the
// materialization worker's periodic scan (actors.ScanMaterializationJobs)
// costs an idle node with many topics (ErrNoSuchNamespace).
func (c *Catalog) ListStreamPolicies(ctx context.Context, namespace string) ([]lakestream.StreamMetadata, []lakestream.TableMaterializationPolicy, error) {
	if err := c.check(); err != nil {
		return nil, nil, err
	}
	if err := validateNamespace(namespace); err != nil {
		return nil, nil, err
	}
	const op = "list stream policies"
	ns, _, err := c.loadNamespace(ctx, op, namespace)
	if err != nil {
		return nil, nil, err
	}
	def, err := c.DefaultMaterialization(ctx)
	if err != nil {
		return nil, nil, err
	}
	nsPolicy := fromPolicyRecord(ns.Materialization)
	kvs, err := c.rangePrefix(ctx, op, c.keys.streamPrefix(namespace))
	if err != nil {
		return nil, nil, err
	}
	mds := make([]lakestream.StreamMetadata, 0, len(kvs))
	pols := make([]lakestream.TableMaterializationPolicy, 0, len(kvs))
	for _, kv := range kvs {
		r := c.decoded.get(kv.Key, kv.ModRevision)
		if r == nil {
			if r, err = decodeStream(kv.Key, kv.Value); err != nil {
				return nil, nil, err
			}
			c.decoded.put(kv.Key, kv.ModRevision, r, len(kv.Value))
		}
		mds = append(mds, r.toMetadata())
		pols = append(pols, resolvePolicy(def, nsPolicy, fromPolicyRecord(r.Materialization)))
	}
	return mds, pols, nil
}
