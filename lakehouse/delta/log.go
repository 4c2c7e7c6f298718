package delta

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/lakegate/lakegate/objstore"
)

// Snapshot is the table state at one version. It is a copy: the caller owns
// it.
type Snapshot struct {
	Version  int64
	Protocol Protocol
	Metadata Metadata
	Schema   Schema
	// Files are the live data files, sorted by Path (DataChange is false:
	// reconciled state, as Spark replays and checkpoints it).
	Files []AddFile
	// Txns maps appId → latest txn version.
	Txns map[string]int64
	// Tombstones are the remove actions of files not live again, sorted
	// by Path (those the log or checkpoint still holds: a checkpoint keeps
	// them for the tombstone retention).
	Tombstones []RemoveFile
	// CheckpointVersion is the checkpoint the replay started from (-1: none,
	// replayed from commit 0). Informational.
	CheckpointVersion int64
}

// NumRecords sums stats.numRecords of the live files; ok is false when a
// file has no stats.
func (s Snapshot) NumRecords() (n int64, ok bool) {
	for _, f := range s.Files {
		st := f.Stats
		if st == nil && f.StatsJSON != "" {
			st, _ = ParseStats(f.StatsJSON)
		}
		if st == nil {
			return n, false
		}
		n += st.NumRecords
	}
	return n, true
}

// state is the replayed log; mutated by apply, copied out by snapshot.
type state struct {
	version    int64
	checkpoint int64
	protocol   *Protocol
	metadata   *Metadata
	schema     Schema
	files      map[string]AddFile // by decoded path
	txns       map[string]Txn
	tombstones map[string]RemoveFile // by decoded path
}

func newState() *state {
	return &state{version: -1, checkpoint: -1, files: map[string]AddFile{}, txns: map[string]Txn{}, tombstones: map[string]RemoveFile{}}
}

func (s *state) clone() *state {
	c := *s
	c.files = maps.Clone(s.files)
	c.txns = maps.Clone(s.txns)
	c.tombstones = maps.Clone(s.tombstones)
	return &c
}

func (s *state) snapshot() Snapshot {
	sn := Snapshot{
		Version:           s.version,
		Schema:            s.schema,
		Txns:              make(map[string]int64, len(s.txns)),
		CheckpointVersion: s.checkpoint,
	}
	if s.protocol != nil {
		sn.Protocol = *s.protocol
	}
	if s.metadata != nil {
		sn.Metadata = *s.metadata
	}
	for id, t := range s.txns {
		sn.Txns[id] = t.Version
	}
	sn.Files = slices.Collect(maps.Values(s.files))
	slices.SortFunc(sn.Files, func(a, b AddFile) int { return strings.Compare(a.Path, b.Path) })
	sn.Tombstones = slices.Collect(maps.Values(s.tombstones))
	slices.SortFunc(sn.Tombstones, func(a, b RemoveFile) int { return strings.Compare(a.Path, b.Path) })
	return sn
}

// apply replays one action (from a commit or a checkpoint row).
func (s *state) apply(a *action) error {
	switch {
	case a.Protocol != nil:
		p := *a.Protocol
		s.protocol = &p
	case a.MetaData != nil:
		m := *a.MetaData
		sc, err := m.Schema()
		if err != nil {
			return err
		}
		s.metadata, s.schema = &m, sc
	case a.Txn != nil:
		if cur, ok := s.txns[a.Txn.AppID]; !ok || a.Txn.Version >= cur.Version {
			s.txns[a.Txn.AppID] = *a.Txn
		}
	case a.Add != nil:
		if len(a.Add.DeletionVector) > 0 && string(a.Add.DeletionVector) != "null" {
			return fmt.Errorf("%w: add %s has a deletion vector", ErrUnsupportedProtocol, a.Add.Path)
		}
		f, err := a.Add.toAddFile()
		if err != nil {
			return err
		}
		// Reconciled state, as in Spark's log replay (and so in its
		// checkpoints): a live file is not itself a data change.
		f.DataChange = false
		s.files[f.Path] = f
		delete(s.tombstones, f.Path)
	case a.Remove != nil:
		p, err := decodePath(a.Remove.Path)
		if err != nil {
			return fmt.Errorf("remove path %q: %v", a.Remove.Path, err)
		}
		delete(s.files, p)
		r := *a.Remove
		r.Path = p
		r.DataChange = false // reconciled state, as for adds
		s.tombstones[p] = r
	}
	return nil
}

// logKeys names the objects of a table's log.
type logKeys struct{ root string }

func (k logKeys) dir() string           { return k.root + "/_delta_log/" }
func (k logKeys) commit(v int64) string { return fmt.Sprintf("%s%020d.json", k.dir(), v) }
func (k logKeys) checkpoint(v int64) string {
	return fmt.Sprintf("%s%020d.checkpoint.parquet", k.dir(), v)
}
func (k logKeys) lastCheckpoint() string { return k.dir() + "_last_checkpoint" }

// parseLogName returns the version and kind ("json", "checkpoint") of a log
// object name relative to the log dir; ok false for anything else.
func parseLogName(name string) (v int64, kind string, ok bool) {
	if len(name) < 21 || name[20] != '.' {
		return 0, "", false
	}
	switch name[21:] {
	case "json":
		kind = "json"
	case "checkpoint.parquet":
		kind = "checkpoint"
	default:
		return 0, "", false
	}
	v, err := strconv.ParseInt(name[:20], 10, 64)
	if err != nil || v < 0 {
		return 0, "", false
	}
	return v, kind, true
}

// parseCommit decodes a commit object into actions.
func parseCommit(key string, data []byte) ([]action, error) {
	var out []action
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), len(data)+1)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var a action
		if err := json.Unmarshal(b, &a); err != nil {
			return nil, fmt.Errorf("%w: %s line %d: %v", ErrCorruptLog, key, line, err)
		}
		out = append(out, a)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorruptLog, key, err)
	}
	return out, nil
}

// applyCommit reads and applies commit v on top of s (s.version must be v-1).
// found is false when the commit does not exist.
func applyCommit(ctx context.Context, store objstore.Store, k logKeys, s *state, v int64) (found bool, err error) {
	key := k.commit(v)
	data, err := store.Get(ctx, key)
	if errors.Is(err, objstore.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	acts, err := parseCommit(key, data)
	if err != nil {
		return false, err
	}
	for i := range acts {
		if err := s.apply(&acts[i]); err != nil {
			return false, fmt.Errorf("%w: %s: %w", ErrCorruptLog, key, err)
		}
	}
	s.version = v
	return true, nil
}

// loadState replays the log from scratch: newest checkpoint, then commits.
func loadState(ctx context.Context, store objstore.Store, k logKeys) (*state, error) {
	var commits, checkpoints []int64
	dir := k.dir()
	err := store.List(ctx, dir, func(oi objstore.ObjectInfo) error {
		v, kind, ok := parseLogName(strings.TrimPrefix(oi.Key, dir))
		if !ok {
			return nil
		}
		if kind == "json" {
			commits = append(commits, v)
		} else {
			checkpoints = append(checkpoints, v)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("delta: list %s: %w", dir, err)
	}
	slices.Sort(commits)
	slices.Sort(checkpoints)
	s := newState()
	if len(checkpoints) > 0 {
		cp := checkpoints[len(checkpoints)-1]
		if err := readCheckpoint(ctx, store, k, cp, s); err != nil {
			return nil, err
		}
	}
	// Commits after the checkpoint must be contiguous.
	for _, v := range commits {
		if v <= s.version {
			continue
		}
		if v != s.version+1 {
			return nil, fmt.Errorf("%w: %s: commit %d missing (next found is %d)", ErrCorruptLog, dir, s.version+1, v)
		}
		found, err := applyCommit(ctx, store, k, s, v)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, fmt.Errorf("%w: %s vanished during replay", ErrCorruptLog, k.commit(v))
		}
	}
	// Commits that landed after the listing.
	if err := catchUp(ctx, store, k, s); err != nil {
		return nil, err
	}
	if s.version < 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoTable, k.root)
	}
	if s.protocol == nil || s.metadata == nil {
		return nil, fmt.Errorf("%w: %s: no protocol or metaData action up to version %d", ErrCorruptLog, k.root, s.version)
	}
	return s, nil
}

// catchUp applies commits s.version+1, +2, … until one is missing.
func catchUp(ctx context.Context, store objstore.Store, k logKeys, s *state) error {
	for {
		found, err := applyCommit(ctx, store, k, s, s.version+1)
		if err != nil || !found {
			return err
		}
	}
}
