package engine

// Staging sets (docs/transactions.md, "Staging (engine)"): an append made
// with lakestream.WithStage(set) goes through the WAL writer like any
// other, but its chunk is committed as a staged record of the set
// (stage/<set>/c/…) instead of as a chunk of its log. CommitStaged turns
// every staged chunk of the set into one kind-3 commit record, so the
// set's entries enter all their logs at one point of the commit order;
// DiscardStaged drops them. A log's ReadStaged reads its entries of an
// open set back.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lakegate/lakegate/engine/index"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
	"github.com/lakegate/lakegate/objstore"
)

var (
	_ lakestream.Staging   = (*Engine)(nil)
	_ lakestream.LogStaged = (*logHandle)(nil)
)

// The values of stage/<set>/end.
const (
	stageCommitted = "commit"
	stageAborted   = "abort"
)

// stageMaxSetBytes bounds a set's name: it is part of every key of the set.
const stageMaxSetBytes = 128

// stageMaxRecordBytes bounds a kind-3 record: with its transaction's other
// keys it must fit one metadata request (etcd's default limit is 1.5 MiB).
const stageMaxRecordBytes = 1 << 20

// checkStageName validates a staging set's name ("" is no set, allowed
// when empty is true).
func checkStageName(set string, empty bool) error {
	switch {
	case set == "" && empty:
		return nil
	case set == "", len(set) > stageMaxSetBytes, strings.ContainsAny(set, "/\x00"):
		return fmt.Errorf("%w: staging set %q", lakestream.ErrInvalidArgument, set)
	}
	return nil
}

// nextStagedName names a staged record of this writer: <node>/<id>-<seq>,
// unique like a commit-record key.
func (w *walWriter) nextStagedName() string {
	return fmt.Sprintf("%s/%s-%016x", w.opts.NodeID, w.recordID, w.recordSeq.Add(1))
}

// stagedDone answers the staged appends of p, whose staged records are
// durable: no offset (the set's commit gives them one).
func (w *walWriter) stagedDone(f *flush, p flushPart) {
	for _, set := range p.sets {
		for _, id := range p.staged[set] {
			var payload int64
			for _, q := range f.byLog[id] {
				payload += int64(len(q.payload))
				pub := q.publishMs
				if pub == 0 {
					pub = f.writeMs
				}
				q.done(appendResult{h: lakestream.EntryHeader{
					Offset:        -1,
					Records:       q.records,
					PublishTimeMs: pub,
					WriteTimeMs:   f.writeMs,
					Size:          int32(len(q.payload)),
				}})
			}
			w.e.metrics.observeAppends(len(f.byLog[id]), payload)
		}
	}
}

// stageOpen returns ErrStageEnded if set has ended (after a staged
// record's transaction failed its compares).
func (w *walWriter) stageOpen(ctx context.Context, set string) error {
	kv, found, err := w.e.meta.Get(ctx, w.e.keys.stageEnd(set))
	switch {
	case err != nil:
		return fmt.Errorf("%w: staging set %s: %w", lakestream.ErrUnavailable, set, err)
	case found:
		return fmt.Errorf("%w: staging set %s: %s", lakestream.ErrStageEnded, set, kv.Value)
	}
	return nil
}

// resolveStaged finds out whether a transaction of staged records only,
// whose reply was lost, applied: key is its first staged record's key. It
// voids the key if it is absent while the set is open, so the lost request
// (which compared the key's absence) can never apply later. A key that is
// absent once the set ended tells nothing: the set's end deleted its staged
// records, which may have held this one (an error: indeterminate).
func (w *walWriter) resolveStaged(ctx context.Context, set, key string) (applied bool, err error) {
	for attempt := 1; ; attempt++ {
		var ok bool
		ok, _, err = w.e.meta.Txn(ctx, []meta.Cmp{{Key: key}, {Key: w.e.keys.stageEnd(set)}}, []meta.Op{meta.Put(key, index.VoidRecord)})
		if err == nil {
			if ok {
				return false, nil
			}
			kv, found, gerr := w.e.meta.Get(ctx, key)
			if gerr == nil {
				if found {
					return !index.IsVoid(kv.Value), nil // a void is ours, of an earlier attempt
				}
				return false, fmt.Errorf("staging set %s ended meanwhile", set)
			}
			err = gerr
		}
		if berr := backoff(ctx, attempt); berr != nil {
			return false, err
		}
	}
}

// CommitStaged implements lakestream.Staging: one kind-3 commit record of
// every staged chunk of set, in the transaction that ends the set and
// deletes its staged records (docs/transactions.md). It returns once the
// record is applied here.
func (e *Engine) CommitStaged(ctx context.Context, set string) error {
	if err := checkStageName(set, false); err != nil {
		return err
	}
	if e.closed() {
		return lakestream.ErrClosed
	}
	var lastErr error
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			if err := backoff(ctx, attempt-1); err != nil {
				if lastErr != nil {
					return fmt.Errorf("%w: commit staging set %s: %w", lakestream.ErrIndeterminate, set, lastErr)
				}
				return fmt.Errorf("%w: commit staging set %s: %w", lakestream.ErrUnavailable, set, err)
			}
		}
		st, err := e.readStage(ctx, set)
		if err != nil {
			return err
		}
		switch st.end {
		case stageCommitted:
			// This call's transaction (its reply lost) or another's: the
			// record is in the commit order; wait until it is applied here.
			return e.clog.sync(ctx)
		case stageAborted:
			return fmt.Errorf("%w: staging set %s was discarded", lakestream.ErrStageEnded, set)
		}
		chunks, err := e.stagedChunks(set, st.records)
		if err != nil {
			return err
		}
		cmps := []meta.Cmp{{Key: e.keys.stageEnd(set)}, {Key: e.keys.stageLast(set), ModRevision: st.lastRev}}
		ops := []meta.Op{
			meta.Put(e.keys.stageEnd(set), []byte(stageCommitted)),
			meta.Delete(e.keys.stageLast(set)),
			meta.DeletePrefix(e.keys.stageChunks(set)),
		}
		if len(chunks) > 0 {
			v := index.Record{Kind: index.RecordStaged, Chunks: chunks}.Encode()
			if len(v) > stageMaxRecordBytes {
				return fmt.Errorf("%w: staging set %s: a commit record of %d bytes (limit %d)", lakestream.ErrStageTooLarge, set, len(v), stageMaxRecordBytes)
			}
			key := e.writer.nextRecordKey()
			cmps = append(cmps, meta.Cmp{Key: key})
			ops = append(ops, meta.Put(key, v), meta.Put(e.keys.commitSync(), []byte(key)))
		}
		logs := chunkLogs(chunks)
		ops, after := e.withLogStagedDeletes(ops, set, logs)
		ok, rev, err := e.meta.Txn(ctx, cmps, ops)
		switch {
		case err == nil && ok:
			e.dropLogStaged(ctx, set, after)
			if len(chunks) == 0 {
				return nil
			}
			return e.clog.waitApplied(ctx, rev)
		case err == nil:
			// The set ended, or a staged record came, meanwhile: read it
			// again.
		case errors.Is(err, meta.ErrTooManyOps):
			return fmt.Errorf("%w: staging set %s: %w", lakestream.ErrStageTooLarge, set, err)
		case errors.Is(err, meta.ErrInvalid), errors.Is(err, meta.ErrClosed):
			return fmt.Errorf("%w: commit staging set %s: %w", lakestream.ErrUnavailable, set, err)
		default:
			// Unknown outcome: the next read of the end key tells
			// ("commit": it applied; the transaction compared the end's
			// absence, so it cannot apply after that read finds it absent
			// and another attempt is made with a new record key).
			lastErr = err
		}
	}
}

// stageState is a staging set as read by one pass.
type stageState struct {
	end     string    // "" while open
	lastRev int64     // ModRevision of stage/<set>/last (0: absent)
	records []meta.KV // the staged records (voids included)
}

// readStage reads set: its end, then its last key, then its staged
// records — in that order, so that a staged record committed after the
// records were read moves the last key from the revision read here.
func (e *Engine) readStage(ctx context.Context, set string) (stageState, error) {
	var st stageState
	kv, found, err := e.meta.Get(ctx, e.keys.stageEnd(set))
	if err != nil {
		return st, fmt.Errorf("%w: staging set %s: %w", lakestream.ErrUnavailable, set, err)
	}
	if found {
		st.end = string(kv.Value)
		return st, nil
	}
	kv, found, err = e.meta.Get(ctx, e.keys.stageLast(set))
	if err != nil {
		return st, fmt.Errorf("%w: staging set %s: %w", lakestream.ErrUnavailable, set, err)
	}
	if found {
		st.lastRev = kv.ModRevision
	}
	p := e.keys.stageChunks(set)
	start, end := p, prefixEnd(p)
	for {
		kvs, err := e.meta.Range(ctx, start, end, 1000)
		if err != nil {
			return st, fmt.Errorf("%w: staging set %s: %w", lakestream.ErrUnavailable, set, err)
		}
		st.records = append(st.records, kvs...)
		if len(st.records) > e.opts.StageMaxChunks {
			break // ErrStageTooLarge: every record holds at least one chunk
		}
		if len(kvs) < 1000 {
			break
		}
		start = kvs[len(kvs)-1].Key + "\x00"
	}
	return st, nil
}

// stagedChunks returns the chunks of the staged records in the order they
// were staged: by the revision of their record, then their position in it
// (per log: the order of its appends). ErrStageTooLarge beyond
// StageMaxChunks.
func (e *Engine) stagedChunks(set string, records []meta.KV) ([]index.RecordChunk, error) {
	recs := slices.Clone(records)
	slices.SortStableFunc(recs, func(a, b meta.KV) int { return cmp.Compare(a.ModRevision, b.ModRevision) })
	var out []index.RecordChunk
	for _, kv := range recs {
		if index.IsVoid(kv.Value) {
			continue // a lost staging transaction's key, voided: it never applied
		}
		r, err := index.DecodeRecord(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("engine: staging set %s: %s: %w", set, kv.Key, err)
		}
		for _, ch := range r.Chunks {
			ch.Object, ch.WriteMs = r.Object, r.WriteMs
			out = append(out, ch)
		}
		if len(out) > e.opts.StageMaxChunks {
			return nil, fmt.Errorf("%w: staging set %s: more than %d staged chunks", lakestream.ErrStageTooLarge, set, e.opts.StageMaxChunks)
		}
	}
	return out, nil
}

// DiscardStaged implements lakestream.Staging: end = "abort" and the
// staged records deleted, in one transaction (idempotent), with the
// logs' keys listing the set (read from its records first; those of a
// record staged between that read and the end are left to
// OpenStagedSets, which sweeps keys of ended sets).
func (e *Engine) DiscardStaged(ctx context.Context, set string) error {
	if err := checkStageName(set, false); err != nil {
		return err
	}
	endKey := e.keys.stageEnd(set)
	for attempt := 1; ; attempt++ {
		records, end, err := e.readStagedKeys(ctx, set)
		if err == nil {
			var ok bool
			switch {
			case end == stageCommitted:
				return fmt.Errorf("%w: staging set %s was committed", lakestream.ErrStageEnded, set)
			case end != "":
				// Aborted already (by this call's lost reply, or another
				// call): its transaction deleted the staged records, and
				// none comes after an end.
				return nil
			default:
				ops := []meta.Op{meta.Put(endKey, []byte(stageAborted)), meta.Delete(e.keys.stageLast(set)), meta.DeletePrefix(e.keys.stageChunks(set))}
				var after []lakestream.LogID
				ops, after = e.withLogStagedDeletes(ops, set, recordLogs(records))
				ok, _, err = e.meta.Txn(ctx, []meta.Cmp{{Key: endKey}}, ops)
				if err == nil && ok {
					e.dropLogStaged(ctx, set, after)
				}
			}
			if err == nil && ok {
				return nil
			}
		}
		if err != nil && (errors.Is(err, meta.ErrInvalid) || errors.Is(err, meta.ErrClosed) || errors.Is(err, meta.ErrTooManyOps)) {
			return fmt.Errorf("%w: discard staging set %s: %w", lakestream.ErrUnavailable, set, err)
		}
		if berr := backoff(ctx, attempt); berr != nil {
			if err == nil {
				err = berr
			}
			return fmt.Errorf("%w: discard staging set %s: %w", lakestream.ErrUnavailable, set, err)
		}
	}
}

// chunkLogs returns the distinct logs of chunks, in order.
func chunkLogs(chunks []index.RecordChunk) []lakestream.LogID {
	var out []lakestream.LogID
	for _, ch := range chunks {
		if id := lakestream.LogID(ch.Log); !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// recordLogs returns the distinct logs of staged records (voids and
// records that do not decode are skipped: their keys, if any, are swept).
func recordLogs(records []meta.KV) []lakestream.LogID {
	var out []lakestream.LogID
	for _, kv := range records {
		if index.IsVoid(kv.Value) {
			continue
		}
		r, err := index.DecodeRecord(kv.Value)
		if err != nil {
			continue
		}
		for _, id := range chunkLogs(r.Chunks) {
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	return out
}

// withLogStagedDeletes adds to a set's ending transaction ops the deletes
// of its logs' keys listing it (logs/<log>/staged/<set>) while the
// transaction stays within MaxTxnOps; it returns the logs left for
// dropLogStaged after it.
func (e *Engine) withLogStagedDeletes(ops []meta.Op, set string, logs []lakestream.LogID) ([]meta.Op, []lakestream.LogID) {
	n := min(len(logs), max(e.meta.MaxTxnOps()-len(ops), 0))
	for _, id := range logs[:n] {
		ops = append(ops, meta.Delete(e.keys.logStaged(id, set)))
	}
	return ops, logs[n:]
}

// dropLogStaged deletes the keys listing an ended set on logs, in
// transactions of at most MaxTxnOps deletes. A failure leaves keys that
// OpenStagedSets sweeps: logged only.
func (e *Engine) dropLogStaged(ctx context.Context, set string, logs []lakestream.LogID) {
	for len(logs) > 0 {
		n := min(len(logs), e.meta.MaxTxnOps())
		var ops []meta.Op
		for _, id := range logs[:n] {
			ops = append(ops, meta.Delete(e.keys.logStaged(id, set)))
		}
		if _, _, err := e.meta.Txn(ctx, nil, ops); err != nil {
			e.opts.Logger.Warn("engine: deleting an ended staging set's log keys (swept at a later listing)", "set", set, "err", err)
			return
		}
		logs = logs[n:]
	}
}

// OpenStagedSets implements lakestream.LogStaged: the sets listed under
// logs/<log>/staged/, each checked with one range read of its first key —
// a staged record: open; its end, or nothing (its end forgotten): ended,
// and the listing key is swept (deleted if unchanged since read).
func (l *logHandle) OpenStagedSets(ctx context.Context, limit int) ([]string, error) {
	if l.e.closed() {
		return nil, lakestream.ErrClosed
	}
	p := l.e.keys.logStagedPrefix(l.id)
	start, stop := p, prefixEnd(p)
	var out []string
	for len(out) < limit {
		kvs, err := l.e.meta.Range(ctx, start, stop, stageReadPage)
		if err != nil {
			return nil, fmt.Errorf("%w: log %d: staging sets: %w", lakestream.ErrUnavailable, l.id, err)
		}
		for _, kv := range kvs {
			set := strings.TrimPrefix(kv.Key, p)
			first, err := l.e.meta.Range(ctx, l.e.keys.stageSet(set), prefixEnd(l.e.keys.stageSet(set)), 1)
			if err != nil {
				return nil, fmt.Errorf("%w: staging set %s: %w", lakestream.ErrUnavailable, set, err)
			}
			if len(first) == 1 && strings.HasPrefix(first[0].Key, l.e.keys.stageChunks(set)) {
				if out = append(out, set); len(out) == limit {
					break
				}
				continue
			}
			if _, _, err := l.e.meta.Txn(ctx, []meta.Cmp{{Key: kv.Key, ModRevision: kv.ModRevision}}, []meta.Op{meta.Delete(kv.Key)}); err != nil {
				l.e.opts.Logger.Warn("engine: sweeping an ended staging set's log key", "log", l.id, "set", set, "err", err)
			}
		}
		if len(kvs) < stageReadPage {
			break
		}
		start = kvs[len(kvs)-1].Key + "\x00"
	}
	return out, nil
}

// ForgetStaged implements lakestream.Staging: deletes the set's end (and
// its last key). An open set has no end: nothing to forget.
func (e *Engine) ForgetStaged(ctx context.Context, set string) error {
	if err := checkStageName(set, false); err != nil {
		return err
	}
	endKey := e.keys.stageEnd(set)
	for attempt := 1; ; attempt++ {
		kv, found, err := e.meta.Get(ctx, endKey)
		if err == nil && !found {
			return nil
		}
		if err == nil {
			var ok bool
			ok, _, err = e.meta.Txn(ctx, []meta.Cmp{{Key: endKey, ModRevision: kv.ModRevision}},
				[]meta.Op{meta.Delete(endKey), meta.Delete(e.keys.stageLast(set))})
			if err == nil && ok {
				return nil
			}
		}
		if berr := backoff(ctx, attempt); berr != nil {
			if err == nil {
				err = berr
			}
			return fmt.Errorf("%w: forget staging set %s: %w", lakestream.ErrUnavailable, set, err)
		}
	}
}

// ReadStaged implements lakestream.LogStaged: one range read of the set's
// keys (its staged records, then end and last, which sort after them),
// then this log's staged chunks in the order CommitStaged would apply
// them, each read as a chunk of the log is (cache, else one ranged GET).
func (l *logHandle) ReadStaged(ctx context.Context, set string, fn func(lakestream.Entry) bool) error {
	if err := checkStageName(set, false); err != nil {
		return err
	}
	if l.e.closed() {
		return lakestream.ErrClosed
	}
	records, end, err := l.e.readStagedKeys(ctx, set)
	if err != nil {
		return err
	}
	if end != "" {
		return fmt.Errorf("%w: staging set %s: %s", lakestream.ErrStageEnded, set, end)
	}
	chunks, err := l.e.stagedChunks(set, records)
	if err != nil {
		return err
	}
	for _, ch := range chunks {
		if lakestream.LogID(ch.Log) != l.id {
			continue
		}
		c, err := l.loadChunk(ctx, indexEntry{
			Kind: kindWAL, Records: ch.Records, Entries: ch.Entries, PayloadBytes: ch.PayloadBytes,
			MinPublishMs: ch.MinPublishMs, MaxPublishMs: ch.MaxPublishMs, WriteMs: ch.WriteMs,
			Object: ch.Object, Offset: ch.Offset, Length: ch.Length, CRC: ch.CRC,
		})
		if errors.Is(err, objstore.ErrNotFound) {
			// An abort deleted the staged records and GC the object
			// since the records were read.
			if serr := l.e.writer.stageOpen(ctx, set); serr != nil {
				return serr
			}
		}
		if err != nil {
			return err
		}
		for _, de := range c.entries {
			h := lakestream.EntryHeader{
				Offset:        -1,
				Records:       de.Records,
				PublishTimeMs: de.PublishTimeMs,
				WriteTimeMs:   c.writeMs,
				Size:          int32(len(de.Payload)),
			}
			if h.PublishTimeMs == 0 {
				h.PublishTimeMs = c.writeMs
			}
			if !fn(lakestream.Entry{EntryHeader: h, Payload: de.Payload}) {
				return nil
			}
		}
	}
	return nil
}

// readStagedKeys reads set's keys in one range (pages of stageReadPage
// keys): its staged records (voids included) and its end ("" while open).
// A staged record is deleted only with the set's end, so every record
// committed before the call is read, whatever the pages' revisions.
func (e *Engine) readStagedKeys(ctx context.Context, set string) (records []meta.KV, end string, err error) {
	p := e.keys.stageSet(set)
	chunks, endKey := e.keys.stageChunks(set), e.keys.stageEnd(set)
	start, stop := p, prefixEnd(p)
	for {
		kvs, err := e.meta.Range(ctx, start, stop, stageReadPage)
		if err != nil {
			return nil, "", fmt.Errorf("%w: staging set %s: %w", lakestream.ErrUnavailable, set, err)
		}
		for _, kv := range kvs {
			switch {
			case strings.HasPrefix(kv.Key, chunks):
				records = append(records, kv)
			case kv.Key == endKey:
				end = string(kv.Value)
			}
		}
		if len(records) > e.opts.StageMaxChunks {
			// ErrStageTooLarge (stagedChunks): every record holds at
			// least one chunk.
			return records, end, nil
		}
		if len(kvs) < stageReadPage {
			return records, end, nil
		}
		start = kvs[len(kvs)-1].Key + "\x00"
	}
}

// stageReadPage is the page size of readStagedKeys, in keys.
const stageReadPage = 1000
