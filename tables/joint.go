package tables

// The joint job: a transaction's chunks in several logs of one table
// materialized together, so that a table snapshot holds all of the
// transaction's records or none (docs/compaction.md, "Transactions across
// partitions"; the marks: docs/index-format.md, "Versions 3 and 4").

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/engine/index"
	"github.com/lakegate/lakegate/engine/wal"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
)

// jointLogs returns the logs of mark j that are logs of tg's table, in
// ascending order, when there are two or more of them; nil otherwise (no
// mark, or the transaction's other logs are other tables': the chunk is
// materialized as any other).
func jointLogs(j *index.Joint, tg Target) []lakestream.LogID {
	if j == nil || len(tg.Logs) < 2 {
		return nil
	}
	var out []lakestream.LogID
	for _, l := range j.Logs {
		if slices.Contains(tg.Logs, lakestream.LogID(l)) {
			out = append(out, lakestream.LogID(l))
		}
	}
	if len(out) < 2 {
		return nil
	}
	return out
}

// jointWait is where a log's materialization waits for a joint job.
type jointWait struct {
	rev    int64 // the marked record's revision
	since  int64 // Unix ms of the first wait at it, on this node
	passed bool  // gave up: materialize the chunks alone
}

// jointWaitsMax bounds Tables.jointWaits (one entry per log).
const jointWaitsMax = 1 << 14

// jointPassed reports whether log id's materialization no longer waits at
// mark j: it has waited Options.JointWait (since its first wait on this
// node; then its siblings logs, the table's logs of j, give up too: the
// joint job can no longer be), or a joint job of j was found impossible
// (jointGiveUp). A first wait at j starts the clock.
func (t *Tables) jointPassed(id lakestream.LogID, j *index.Joint, logs []lakestream.LogID) bool {
	now := t.opts.Now().UnixMilli()
	t.jointWaits.Lock()
	defer t.jointWaits.Unlock()
	if t.jointWaits.m == nil || len(t.jointWaits.m) >= jointWaitsMax {
		t.jointWaits.m = map[lakestream.LogID]jointWait{}
	}
	w, ok := t.jointWaits.m[id]
	if !ok || w.rev != j.Rev {
		t.jointWaits.m[id] = jointWait{rev: j.Rev, since: now}
		return false
	}
	if !w.passed && now-w.since >= t.opts.JointWait.Milliseconds() {
		t.opts.Logger.Warn("tables: a transaction's logs did not all reach it in time: materialized per log", "log", id, "logs", logs, "record", j.Rev, "wait", t.opts.JointWait)
		t.e.ObserveJointFallback()
		for _, l := range logs {
			t.jointWaits.m[l] = jointWait{rev: j.Rev, passed: true}
		}
		return true
	}
	return w.passed
}

// jointGiveUp makes every log of logs materialize its chunks of mark j
// alone (a joint job that cannot be done: too large for one claim).
func (t *Tables) jointGiveUp(logs []lakestream.LogID, j *index.Joint, why string) {
	t.opts.Logger.Warn("tables: a transaction's chunks are materialized per log", "logs", logs, "record", j.Rev, "why", why)
	t.e.ObserveJointFallback()
	t.jointWaits.Lock()
	defer t.jointWaits.Unlock()
	if t.jointWaits.m == nil || len(t.jointWaits.m) >= jointWaitsMax {
		t.jointWaits.m = map[lakestream.LogID]jointWait{}
	}
	for _, l := range logs {
		t.jointWaits.m[l] = jointWait{rev: j.Rev, passed: true}
	}
}

// jointPart is one log of a joint job being planned.
type jointPart struct {
	claimPart
	tg      Target
	prev    tableClaim
	prevRev int64
	ents    []tableEntry
	payload int64
}

// materializeJoint runs the joint job of mark j, at which log id's range
// stopped: when every log of j in tg's table has materialized up to its
// first chunk of j (or holds none: void, trimmed, deleted), their chunks
// of j go into the table together — files per log, the claims in one
// metadata transaction, one Delta commit, one Iceberg commit, then each
// log's index and cursor. Not ready yet is engine.ErrNothingToCompact.
func (t *Tables) materializeJoint(ctx context.Context, id lakestream.LogID, tg Target, j *index.Joint) (engine.CompactStats, error) {
	var st engine.CompactStats
	formats, err := t.targetFormats(ctx, tg)
	if err != nil {
		return st, err
	}
	ms := t.st.Meta
	filesCap := max(1, min(maxFilesPerRange, (ms.MaxTxnOps()-1)/2))
	maxChunks := ms.MaxTxnOps() - 1 - filesCap
	logs := jointLogs(j, tg)
	if maxChunks < 1 || len(logs) > ms.MaxTxnOps() {
		t.jointGiveUp(logs, j, "more logs than one metadata transaction can claim")
		return st, engine.ErrNothingToCompact
	}
	cutoffMs := t.opts.Now().Add(-t.opts.CompactAge).UnixMilli()
	var parts []*jointPart
	for _, l := range logs {
		p := &jointPart{claimPart: claimPart{id: l}, tg: tg}
		p.tg.Partition = int32(slices.Index(tg.Logs, l))
		kv, found, err := ms.Get(ctx, t.claimKey(l))
		if err != nil {
			return st, fmt.Errorf("%w: table claim: %w", lakestream.ErrUnavailable, err)
		}
		if found {
			if err := json.Unmarshal(kv.Value, &p.prev); err != nil {
				return st, fmt.Errorf("%w: table claim of log %d: %v", index.ErrCorrupt, l, err)
			}
			if !p.prev.Indexed {
				return st, engine.ErrNothingToCompact // its own job resumes it first
			}
			p.prevRev = kv.ModRevision
		}
		// FirstOffset waits until this engine has applied every record
		// committed before the call, j's among them: Chunks below then
		// sees l's chunks of j, if it has any.
		first, err := t.e.FirstOffset(ctx, l)
		if errors.Is(err, lakestream.ErrNoSuchLog) {
			continue // deleted: not in it
		}
		if err != nil {
			return st, err
		}
		chunks, err := t.e.Chunks(ctx, l, max(first, p.prev.End), maxChunks+1)
		if errors.Is(err, lakestream.ErrNoSuchLog) {
			continue
		}
		if err != nil {
			return st, err
		}
		if len(chunks) == 0 {
			// The record applied at one revision to every log: a log
			// without a chunk of it by now has none (void or trimmed).
			continue
		}
		if c := chunks[0]; c.Joint == nil || c.Joint.Rev != j.Rev {
			return st, engine.ErrNothingToCompact // not there yet
		}
		var old []engine.Chunk
		for _, c := range chunks {
			if c.Joint == nil || c.Joint.Rev != j.Rev {
				break
			}
			if c.Kind != index.KindWAL || c.WriteMs > cutoffMs {
				return st, engine.ErrNothingToCompact
			}
			if len(old) == 0 && c.First < p.prev.End {
				return st, fmt.Errorf("%w: log %d: WAL chunk %d..%d straddles the table's end %d", lakestream.ErrConflict, l, c.First, c.Last(), p.prev.End)
			}
			if len(old) > 0 && c.First != old[len(old)-1].End() {
				break
			}
			old = append(old, c)
			p.payload += c.PayloadBytes
		}
		if len(old) > maxChunks || p.payload > t.opts.CompactMaxBytes {
			t.jointGiveUp(logs, j, fmt.Sprintf("log %d's chunks of it do not fit one range", l))
			return st, engine.ErrNothingToCompact
		}
		for _, c := range old {
			es, err := t.e.ChunkEntries(ctx, l, c.Entry)
			if err != nil {
				return st, err
			}
			for _, e := range es {
				p.ents = append(p.ents, tableEntry{offset: e.Offset, records: e.Records, publishMs: e.PublishTimeMs, writeMs: e.WriteTimeMs, bytesEnd: e.CumulativeSize, payload: e.Payload})
			}
		}
		if len(splitRuns(p.ents)) > filesCap {
			t.jointGiveUp(logs, j, fmt.Sprintf("log %d's chunks of it need more than %d files", l, filesCap))
			return st, engine.ErrNothingToCompact
		}
		p.c = tableClaim{From: old[0].First, End: old[len(old)-1].End(), Root: tg.Root, Formats: formats}
		if tg.Iceberg {
			p.c.Ident = slices.Clone(tg.Ident)
		}
		parts = append(parts, p)
	}
	if !slices.ContainsFunc(parts, func(p *jointPart) bool { return p.id == id }) {
		return st, engine.ErrNothingToCompact // id's own chunk moved meanwhile
	}
	joint := &claimJoint{Rev: j.Rev}
	for _, p := range parts {
		joint.Logs = append(joint.Logs, p.id)
	}

	typed, err := t.tableSchema(ctx, tg.Root, tg.Schema)
	if err != nil {
		return st, err
	}
	typed = typed.WithWriters(tg.Writers)

	// Step 1: every log's files, under pending intents.
	decoded := map[string][]wal.DecodedEntry{}
	for _, p := range parts {
		p.c.Joint = joint
		files, des, err := t.buildFiles(ctx, p.id, p.tg, p.ents, typed, &p.c)
		if err != nil {
			return st, err
		}
		if p.c.Intents, err = t.e.PutPending(ctx, files); err != nil {
			return st, err
		}
		for k, v := range des {
			decoded[k] = v
		}
	}
	if err := t.hook(id, "put"); err != nil {
		return st, err
	}

	// Step 2: claim every log's range in one transaction, each compared
	// on the claim read above.
	var cmps []meta.Cmp
	var ops []meta.Op
	for _, p := range parts {
		value, err := json.Marshal(p.c)
		if err != nil {
			return st, fmt.Errorf("tables: table claim: %w", err)
		}
		k := t.claimKey(p.id)
		cmps = append(cmps, meta.Cmp{Key: k, ModRevision: p.prevRev})
		ops = append(ops, meta.Put(k, value))
		for _, i := range p.prev.Intents {
			ops = append(ops, meta.Delete(i))
		}
	}
	ok, rev, err := ms.Txn(ctx, cmps, ops)
	if errors.Is(err, meta.ErrTooManyOps) {
		// The claims (with the previous claims' leftover intents) do not
		// fit one transaction: the files are orphans for GC.
		t.jointGiveUp(logs, j, "the claims do not fit one metadata transaction")
		return st, engine.ErrNothingToCompact
	}
	if err != nil {
		return st, fmt.Errorf("%w: table claim: %w", lakestream.ErrUnavailable, err)
	}
	if !ok {
		return st, fmt.Errorf("%w: log %d: another materialization claimed a range of the joint job", lakestream.ErrConflict, id)
	}
	claims := make([]claimPart, len(parts))
	for i, p := range parts {
		claims[i] = claimPart{id: p.id, c: p.c, rev: rev}
	}
	if err := t.hook(id, "claim"); err != nil {
		return st, err
	}
	return t.finishJoint(ctx, id, claims, false, decoded)
}

// resumeJoint finishes the joint job of log id's unfinished claim c as
// its claims were written: those of its logs still unfinished (a log
// whose claim was indexed, or replaced since, is done; then so are both
// table commits, which precede every log's step 4). A log deleted since
// is left out; the table commits, if they must run again, then hold the
// others' files and ends only (skipped if they had landed with all).
func (t *Tables) resumeJoint(ctx context.Context, id lakestream.LogID, c tableClaim) (engine.CompactStats, error) {
	var pending []claimPart
	committed := false
	for _, l := range c.Joint.Logs {
		kv, found, err := t.st.Meta.Get(ctx, t.claimKey(l))
		if err != nil {
			return engine.CompactStats{}, fmt.Errorf("%w: table claim: %w", lakestream.ErrUnavailable, err)
		}
		if !found {
			continue // the log was deleted since: nothing of it to finish
		}
		var lc tableClaim
		if err := json.Unmarshal(kv.Value, &lc); err != nil {
			return engine.CompactStats{}, fmt.Errorf("%w: table claim of log %d: %v", index.ErrCorrupt, l, err)
		}
		if lc.Indexed || lc.Joint == nil || lc.Joint.Rev != c.Joint.Rev {
			// Indexed, or replaced by a later claim (which only follows
			// an indexed one): its step 4 ran, after both table commits.
			committed = true
			continue
		}
		pending = append(pending, claimPart{id: l, c: lc, rev: kv.ModRevision})
	}
	if !slices.ContainsFunc(pending, func(p claimPart) bool { return p.id == id }) {
		return engine.CompactStats{}, fmt.Errorf("%w: log %d: its joint claim changed meanwhile", lakestream.ErrConflict, id)
	}
	return t.finishJoint(ctx, id, pending, committed, nil)
}

// finishJoint runs steps 3–5 of a joint job's claims (each at its key's
// revision): one Delta commit and one Iceberg commit of every claim's
// files and ends (unless committed: done before), then each log's index
// replacement and cursor. decoded are the files' entries by object key
// (nil on resume).
func (t *Tables) finishJoint(ctx context.Context, id lakestream.LogID, claims []claimPart, committed bool, decoded map[string][]wal.DecodedEntry) (engine.CompactStats, error) {
	var st engine.CompactStats
	c := claims[0].c
	st.From, st.End = c.From, c.End
	for _, p := range claims {
		st.Records += p.c.End - p.c.From
		st.Files += len(p.c.Files)
		for _, f := range p.c.Files {
			st.FileBytes += f.Size
		}
	}
	if !committed {
		// Steps 3 and 3b: one Delta commit, one Iceberg commit.
		if err := t.commitTables(ctx, id, claims); err != nil {
			return st, err
		}
	}

	// Step 4, per log: its index entries replaced and its claim indexed,
	// in one transaction compared on its claim.
	for _, p := range claims {
		news := make([]engine.NewChunk, len(p.c.Files))
		for i, f := range p.c.Files {
			ie, err := index.DecodeEntry(f.Index)
			if err != nil {
				return st, fmt.Errorf("table claim of log %d: %w", p.id, err)
			}
			news[i] = engine.NewChunk{Entry: ie, Decoded: decoded[ie.Object]}
		}
		k := t.claimKey(p.id)
		ic := p.c
		ic.Indexed = true
		value, err := json.Marshal(ic)
		if err != nil {
			return st, fmt.Errorf("tables: table claim: %w", err)
		}
		n, err := t.e.ReplaceChunks(ctx, p.id, p.c.From, p.c.End, news,
			[]meta.Cmp{{Key: k, ModRevision: p.rev}}, []meta.Op{meta.Put(k, value)})
		if err != nil {
			return st, err
		}
		st.Chunks += n
		if err := t.hook(p.id, "replace"); err != nil {
			return st, err
		}
	}

	// Step 5, per log: the cursor, then the intents.
	for _, p := range claims {
		if err := t.e.AdvanceCompacted(ctx, p.id, p.c.End); err != nil {
			return st, err
		}
		if err := t.hook(p.id, "cursor"); err != nil {
			return st, err
		}
		for _, k := range p.c.Intents {
			t.e.DropIntent(ctx, k)
		}
	}
	return st, nil
}
