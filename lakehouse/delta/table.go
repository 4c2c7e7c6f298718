package delta

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lakegate/lakegate/objstore"
)

const (
	// maxCommitAttempts bounds the versions one Commit tries before
	// ErrTooManyConflicts.
	maxCommitAttempts = 100
	// defaultCheckpointInterval: a checkpoint after every commit whose
	// version is a multiple of it (Spark's default).
	defaultCheckpointInterval = 10
	engineInfo                = "lakegate"
	// defaultTombstoneRetention: Delta's default
	// delta.deletedFileRetentionDuration.
	defaultTombstoneRetention = 7 * 24 * time.Hour
)

// Option configures a Table.
type Option func(*Table)

// WithClock sets the clock used for commitInfo.timestamp, txn.lastUpdated
// and metaData.createdTime (default time.Now).
func WithClock(now func() time.Time) Option { return func(t *Table) { t.now = now } }

// WithTombstoneRetention sets how long a checkpoint keeps the tombstone of
// a removed file (by its deletionTimestamp): Delta's
// delta.deletedFileRetentionDuration. Default 7 days.
func WithTombstoneRetention(d time.Duration) Option {
	return func(t *Table) { t.tombstoneRetention = d }
}

// WithCheckpointInterval sets the checkpoint interval in commits (default
// 10; 0 disables checkpoints).
func WithCheckpointInterval(n int64) Option { return func(t *Table) { t.checkpointEvery = n } }

// Table is one Delta table under a key prefix of a store. Safe for
// concurrent use; several Tables (in several processes) may write the same
// table.
type Table struct {
	store           objstore.Store
	keys            logKeys
	now             func() time.Time
	checkpointEvery int64
	// tombstoneRetention: checkpoints keep removes younger than this.
	tombstoneRetention time.Duration

	// mu is held across the store reads of a refresh, so one Table replays
	// the log once for concurrent callers.
	mu struct {
		sync.Mutex
		// state is the last replayed state (nil before the first read). It
		// is replaced, never mutated in place, so it may be read after
		// unlocking.
		state *state
	}
}

// Open returns the table rooted at root (a key prefix such as
// "tables/public/default/orders", no leading or trailing slash). It does no
// I/O: the table need not exist yet (see Create).
func Open(ctx context.Context, store objstore.Store, root string, opts ...Option) (*Table, error) {
	root = strings.TrimSuffix(root, "/")
	if root == "" || strings.HasPrefix(root, "/") {
		return nil, fmt.Errorf("%w: table root %q", ErrInvalid, root)
	}
	t := &Table{store: store, keys: logKeys{root: root}, now: time.Now, checkpointEvery: defaultCheckpointInterval,
		tombstoneRetention: defaultTombstoneRetention}
	for _, o := range opts {
		o(t)
	}
	return t, nil
}

// Root returns the table's key prefix.
func (t *Table) Root() string { return t.keys.root }

// Snapshot returns the latest table state (ErrNoTable if there is none,
// ErrUnsupportedProtocol if its minReaderVersion is above 1).
func (t *Table) Snapshot(ctx context.Context) (Snapshot, error) {
	s, err := t.refresh(ctx)
	if err != nil {
		return Snapshot{}, err
	}
	return s.snapshot(), nil
}

// refresh brings the cached state to the latest version and returns it.
func (t *Table) refresh(ctx context.Context) (*state, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var s *state
	if t.mu.state == nil {
		ns, err := loadState(ctx, t.store, t.keys)
		if err != nil {
			return nil, err
		}
		s = ns
	} else {
		s = t.mu.state.clone()
		if err := catchUp(ctx, t.store, t.keys, s); err != nil {
			return nil, err
		}
	}
	if !s.protocol.readable() {
		return nil, fmt.Errorf("%w: %s: table needs reader version %d (we read %d)",
			ErrUnsupportedProtocol, t.keys.root, s.protocol.MinReaderVersion, readerVersion)
	}
	t.mu.state = s
	return s, nil
}

// setState installs s if it is newer than the cached state.
func (t *Table) setState(s *state) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.state == nil || s.version > t.mu.state.version {
		t.mu.state = s
	}
}

// Create writes version 0 (commitInfo, protocol 1/2, metaData). If the table
// exists with the same schema and partition columns it returns nil
// (idempotent); with a different one, ErrTableExists.
func (t *Table) Create(ctx context.Context, schema Schema, partitionCols []string, config map[string]string) error {
	if err := schema.Validate(); err != nil {
		return err
	}
	for _, c := range partitionCols {
		f, ok := schema.Field(c)
		if !ok {
			return fmt.Errorf("%w: partition column %q is not in the schema", ErrInvalid, c)
		}
		if f.Type.Name == "struct" || f.Type.Name == "array" || f.Type.Name == "map" {
			return fmt.Errorf("%w: partition column %q has complex type %s", ErrInvalid, c, f.Type.Name)
		}
	}
	if partitionCols == nil {
		partitionCols = []string{}
	}
	if config == nil {
		config = map[string]string{}
	}
	now := t.now().UnixMilli()
	md := Metadata{
		ID:               newUUID(),
		Format:           Format{Provider: "parquet", Options: map[string]string{}},
		SchemaString:     schema.JSON(),
		PartitionColumns: partitionCols,
		Configuration:    config,
		CreatedTime:      &now,
	}
	pr := Protocol{MinReaderVersion: readerVersion, MinWriterVersion: writerVersion}
	ci := CommitInfo{
		Timestamp: now, Operation: "CREATE TABLE", EngineInfo: engineInfo, IsBlindAppend: true,
		OperationParameters: map[string]string{
			"partitionBy": mustJSON(partitionCols),
			"properties":  mustJSON(config),
		},
	}
	data, err := encodeActions([]action{{CommitInfo: &ci}, {Protocol: &pr}, {MetaData: &md}})
	if err != nil {
		return err
	}
	err = t.store.PutIfAbsent(ctx, t.keys.commit(0), data)
	if err != nil && !errors.Is(err, objstore.ErrExists) {
		return fmt.Errorf("delta: create %s: %w", t.keys.root, err)
	}
	if err == nil {
		s := newState()
		if err := s.apply(&action{Protocol: &pr}); err != nil {
			return err
		}
		if err := s.apply(&action{MetaData: &md}); err != nil {
			return err
		}
		s.version = 0
		t.setState(s)
		return nil
	}
	// Exists: same definition?
	s, err := t.refresh(ctx)
	if err != nil {
		return err
	}
	if !s.protocol.writable() {
		return fmt.Errorf("%w: %s: protocol %d/%d", ErrUnsupportedProtocol, t.keys.root,
			s.protocol.MinReaderVersion, s.protocol.MinWriterVersion)
	}
	if s.schema.JSON() != schema.JSON() || !slices.Equal(s.metadata.PartitionColumns, partitionCols) {
		return fmt.Errorf("%w: %s has schema %s partitioned by %v", ErrTableExists, t.keys.root,
			s.metadata.SchemaString, s.metadata.PartitionColumns)
	}
	return nil
}

// CommitRequest is one append.
type CommitRequest struct {
	// AppID and TxnVersion make the commit idempotent: if the log already
	// records a txn version >= TxnVersion for AppID, nothing is written and
	// Commit reports skipped. Both empty/zero: no txn action.
	AppID      string
	TxnVersion int64
	// MoreTxns are further txn actions of the same commit, one per
	// application id (distinct, none AppID): a commit that records the
	// progress of several writers at once (the tables' joint commit of a
	// transaction's logs, docs/transactions.md). The commit is skipped
	// when every txn (AppID's and these) is recorded at its version or
	// above; when some are and some are not, Commit fails ErrConflict
	// (part of what this commit claims was committed without the rest).
	MoreTxns []TxnVersion
	// Adds are the new data files (may be empty, e.g. to record progress or
	// a schema change alone). Each must carry a value for every partition
	// column and none other.
	Adds []AddFile
	// NewSchema, when set, is written as a new metaData (same id, partition
	// columns and configuration). It must keep the partition columns.
	NewSchema *Schema
	// Removes are the paths (relative to the table root, not encoded) of
	// live files to remove. Each must be live in the state the commit lands
	// on, else ErrConflict.
	Removes []string
	// NoDataChange marks a rearrangement of the same rows (bin-packing:
	// operation OPTIMIZE): its adds and removes carry dataChange false, so
	// streaming readers skip the commit.
	NoDataChange bool
	// AddColumns, when set, are top-level fields added to the current
	// schema unless a field of that name exists, in which case the nested
	// struct fields the existing one lacks (at any depth, through arrays
	// and maps) are added to it (mergeType): merged against the table
	// state of each attempt, so concurrent writers adding columns never
	// drop each other's. Ignored when NewSchema is set.
	AddColumns []Field
	// Operation for commitInfo (default "WRITE").
	Operation string
}

// TxnVersion is one txn action of a CommitRequest's MoreTxns.
type TxnVersion struct {
	AppID   string
	Version int64
}

// txns returns every txn of req (AppID's first), checked: app ids
// non-empty and distinct.
func (req CommitRequest) txns() ([]TxnVersion, error) {
	if req.AppID == "" && req.TxnVersion != 0 {
		return nil, fmt.Errorf("%w: TxnVersion without AppID", ErrInvalid)
	}
	if req.AppID == "" && len(req.MoreTxns) > 0 {
		return nil, fmt.Errorf("%w: MoreTxns without AppID", ErrInvalid)
	}
	var all []TxnVersion
	if req.AppID != "" {
		all = append(all, TxnVersion{AppID: req.AppID, Version: req.TxnVersion})
	}
	for _, tv := range req.MoreTxns {
		if tv.AppID == "" || slices.ContainsFunc(all, func(o TxnVersion) bool { return o.AppID == tv.AppID }) {
			return nil, fmt.Errorf("%w: txn app id %q empty or repeated", ErrInvalid, tv.AppID)
		}
		all = append(all, tv)
	}
	return all, nil
}

// Commit appends req as the next version and returns it. skipped is true
// (and version the current one) when the txn version for req.AppID (and
// for each of req.MoreTxns) is already >= req.TxnVersion (theirs). Conflicts with other writers are retried on the
// next version. When the version is a checkpoint version, the checkpoint is
// written after the commit; its failure is returned as an error wrapping
// ErrCheckpoint together with the committed version.
func (t *Table) Commit(ctx context.Context, req CommitRequest) (version int64, skipped bool, err error) {
	txns, err := req.txns()
	if err != nil {
		return 0, false, err
	}
	if req.NewSchema != nil {
		if err := req.NewSchema.Validate(); err != nil {
			return 0, false, err
		}
	}
	op := req.Operation
	if op == "" {
		op = "WRITE"
	}
	for attempt := 0; attempt < maxCommitAttempts; attempt++ {
		s, err := t.refresh(ctx)
		if err != nil {
			return 0, false, err
		}
		if !s.protocol.writable() {
			return 0, false, fmt.Errorf("%w: %s: protocol %d/%d (we write %d/%d)", ErrUnsupportedProtocol,
				t.keys.root, s.protocol.MinReaderVersion, s.protocol.MinWriterVersion, readerVersion, writerVersion)
		}
		done := 0 // txns recorded at their version or above
		for _, tv := range txns {
			if cur, ok := s.txns[tv.AppID]; ok && cur.Version >= tv.Version {
				done++
			}
		}
		switch {
		case done > 0 && done == len(txns):
			return s.version, true, nil
		case done > 0:
			return 0, false, fmt.Errorf("%w: %s: %d of the commit's %d txns are recorded already", ErrConflict, t.keys.root, done, len(txns))
		}
		acts, err := t.buildActions(s, req, op)
		if err != nil {
			return 0, false, err
		}
		data, err := encodeActions(acts)
		if err != nil {
			return 0, false, err
		}
		v := s.version + 1
		err = t.store.PutIfAbsent(ctx, t.keys.commit(v), data)
		if errors.Is(err, objstore.ErrExists) {
			continue // another writer took v: replay it and retry
		}
		if err != nil {
			// Outcome unknown; a retry with the same AppID/TxnVersion is safe.
			return 0, false, fmt.Errorf("delta: commit %s: %w", t.keys.commit(v), err)
		}
		ns := s.clone()
		for i := range acts {
			if err := ns.apply(&acts[i]); err != nil {
				return 0, false, err
			}
		}
		ns.version = v
		t.setState(ns)
		if t.checkpointEvery > 0 && v%t.checkpointEvery == 0 {
			if err := writeCheckpoint(ctx, t.store, t.keys, ns, t.tombstoneCutoff()); err != nil {
				return v, false, fmt.Errorf("%w: version %d: %w", ErrCheckpoint, v, err)
			}
		}
		return v, false, nil
	}
	return 0, false, fmt.Errorf("%w: %s: %d attempts", ErrTooManyConflicts, t.keys.root, maxCommitAttempts)
}

// Checkpoint writes a checkpoint of the latest version now (and the
// _last_checkpoint hint), whatever the interval.
func (t *Table) Checkpoint(ctx context.Context) (version int64, err error) {
	s, err := t.refresh(ctx)
	if err != nil {
		return 0, err
	}
	if err := writeCheckpoint(ctx, t.store, t.keys, s, t.tombstoneCutoff()); err != nil {
		return 0, fmt.Errorf("%w: version %d: %w", ErrCheckpoint, s.version, err)
	}
	return s.version, nil
}

// tombstoneCutoff is the oldest deletionTimestamp (Unix ms) a checkpoint
// written now keeps.
func (t *Table) tombstoneCutoff() int64 { return t.now().Add(-t.tombstoneRetention).UnixMilli() }

func (t *Table) buildActions(s *state, req CommitRequest, op string) ([]action, error) {
	now := t.now().UnixMilli()
	ci := CommitInfo{
		Timestamp: now, Operation: op, EngineInfo: engineInfo, IsBlindAppend: req.NewSchema == nil,
		OperationParameters: map[string]string{"mode": "Append"},
		ReadVersion:         &s.version,
	}
	acts := []action{{CommitInfo: &ci}}
	newSchema := req.NewSchema
	if newSchema == nil && len(req.AddColumns) > 0 {
		merged := Schema{Fields: append([]Field(nil), s.schema.Fields...)}
		changed := false
		for _, f := range req.AddColumns {
			i := slices.IndexFunc(merged.Fields, func(g Field) bool { return g.Name == f.Name })
			if i < 0 {
				merged.Fields = append(merged.Fields, f)
				changed = true
				continue
			}
			if t, grown := mergeType(merged.Fields[i].Type, f.Type); grown {
				merged.Fields[i].Type, merged.Fields[i].Metadata = t, f.Metadata
				changed = true
			}
		}
		if changed {
			if err := merged.Validate(); err != nil {
				return nil, err
			}
			newSchema = &merged
		}
	}
	ci.IsBlindAppend = newSchema == nil && len(req.Removes) == 0
	switch {
	case len(req.Removes) > 0 && req.NoDataChange: // bin-packing, as Spark's OPTIMIZE
		ci.OperationParameters = map[string]string{"predicate": "[]", "zOrderBy": "[]", "auto": "true"}
	case len(req.Removes) > 0: // whole files deleted (table retention), as a DELETE
		ci.OperationParameters = map[string]string{"predicate": "[]"}
	}
	if newSchema != nil {
		md := *s.metadata
		md.SchemaString = newSchema.JSON()
		for _, c := range md.PartitionColumns {
			if _, ok := newSchema.Field(c); !ok {
				return nil, fmt.Errorf("%w: new schema drops partition column %q", ErrInvalid, c)
			}
		}
		acts = append(acts, action{MetaData: &md})
	}
	if req.AppID != "" {
		acts = append(acts, action{Txn: &Txn{AppID: req.AppID, Version: req.TxnVersion, LastUpdated: &now}})
	}
	for _, tv := range req.MoreTxns {
		acts = append(acts, action{Txn: &Txn{AppID: tv.AppID, Version: tv.Version, LastUpdated: &now}})
	}
	pcols := s.metadata.PartitionColumns
	removed := map[string]bool{}
	for _, p := range req.Removes {
		f, ok := s.files[p]
		if !ok || removed[p] {
			return nil, fmt.Errorf("%w: %s: remove %s: not a live file at version %d", ErrConflict, t.keys.root, p, s.version)
		}
		removed[p] = true
		ext, size, ts := true, f.Size, now
		acts = append(acts, action{Remove: &RemoveFile{
			Path: encodePath(p), DeletionTimestamp: &ts, DataChange: !req.NoDataChange,
			ExtendedFileMetadata: &ext, PartitionValues: f.PartitionValues, Size: &size,
		}})
	}
	for _, a := range req.Adds {
		if a.Path == "" || strings.HasPrefix(a.Path, "/") || strings.Contains(a.Path, "://") {
			return nil, fmt.Errorf("%w: add path %q must be relative to the table root", ErrInvalid, a.Path)
		}
		if len(a.PartitionValues) != len(pcols) {
			return nil, fmt.Errorf("%w: add %s: partition values %v, table partitioned by %v", ErrInvalid, a.Path, a.PartitionValues, pcols)
		}
		for _, c := range pcols {
			if _, ok := a.PartitionValues[c]; !ok {
				return nil, fmt.Errorf("%w: add %s: no value for partition column %q", ErrInvalid, a.Path, c)
			}
		}
		a.DataChange = !req.NoDataChange
		if a.ModificationTime == 0 {
			a.ModificationTime = now
		}
		j, err := a.toJSON()
		if err != nil {
			return nil, err
		}
		acts = append(acts, action{Add: j})
	}
	if len(req.Removes) == 0 {
		ci.OperationParameters["numFiles"] = strconv.Itoa(len(req.Adds))
	}
	return acts, nil
}

func encodeActions(acts []action) ([]byte, error) {
	var out []byte
	for i := range acts {
		b, err := json.Marshal(&acts[i])
		if err != nil {
			return nil, fmt.Errorf("%w: encode action: %v", ErrInvalid, err)
		}
		out = append(out, b...)
		out = append(out, '\n')
	}
	return out, nil
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// newUUID returns a random RFC 4122 version 4 UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// mergeType returns cur with the struct fields of add that it lacks
// appended, at any depth through structs, arrays and maps, and whether
// anything was added. Fields of cur are never removed or retyped: where the
// two disagree on a type, cur's stays.
func mergeType(cur, add DataType) (DataType, bool) {
	if cur.Name != add.Name {
		return cur, false
	}
	switch cur.Name {
	case "struct":
		out := cur
		out.Fields = append([]Field(nil), cur.Fields...)
		grown := false
		for _, af := range add.Fields {
			i := slices.IndexFunc(out.Fields, func(g Field) bool { return g.Name == af.Name })
			if i < 0 {
				out.Fields = append(out.Fields, af)
				grown = true
				continue
			}
			if t, ok := mergeType(out.Fields[i].Type, af.Type); ok {
				out.Fields[i].Type = t
				grown = true
			}
		}
		return out, grown
	case "array":
		if cur.Element == nil || add.Element == nil {
			return cur, false
		}
		if t, ok := mergeType(*cur.Element, *add.Element); ok {
			out := cur
			out.Element = &t
			return out, true
		}
	case "map":
		if cur.Value == nil || add.Value == nil {
			return cur, false
		}
		if t, ok := mergeType(*cur.Value, *add.Value); ok {
			out := cur
			out.Value = &t
			return out, true
		}
	}
	return cur, false
}
