package actors

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
)

// Loading a partition's persisted producer state (docs/dedup.md):
//
//   - The topic epoch is the property "epoch" of the internal durable
//     cursor EpochCursorName, created the first time an exclusive producer
//     takes the partition.
//   - The deduplication state is a snapshot — the properties of the
//     internal cursor DedupCursorName (producer name → highest sequence id)
//     covering every entry up to its mark-delete offset — plus a replay of
//     the log after it (producer_name, sequence_id and highest_sequence_id
//     of every entry's metadata), so it is exact after any crash.
//   - Termination is the log's fence.
//   - What earlier owners staged into staging sets still open is not in
//     the log: the load reads the sets open on the log (up to
//     loadStagedSetsMax; Log.OpenStagedSets) before the replay, so a set
//     that commits meanwhile is in the replay and one still open is in the
//     state; a set found later is read when a SEND first names it
//     (stagedSequences; docs/dedup.md, "Transactional sends").

const (
	// InternalCursorPrefix starts the names of the log cursors the broker
	// keeps for itself; they are not subscriptions (listings skip them and
	// SUBSCRIBE refuses the names): lakestream.InternalCursorPrefix.
	InternalCursorPrefix = lakestream.InternalCursorPrefix
	// CompactionCursor is the internal cursor of a compacted topic
	// (lakestream.CompactionCursor: the trim floor honours it).
	CompactionCursor = lakestream.CompactionCursor
	// DedupCursorName is the cursor holding the deduplication snapshot.
	DedupCursorName = InternalCursorPrefix + "dedup"
	// EpochCursorName is the cursor holding the topic epoch.
	EpochCursorName = InternalCursorPrefix + "epoch"

	epochProperty = "epoch"
	// dedupReplayRecordsMax and dedupReplayBytesMax bound one read of the
	// replay on load.
	dedupReplayRecordsMax = 1000
	dedupReplayBytesMax   = 4 << 20
	// loadStagedSetsMax bounds the open staging sets a load reads (each:
	// a metadata range read, and the reads of the log's staged chunks).
	loadStagedSetsMax = 10000
)

// IsInternalCursor reports whether a log cursor is the broker's own.
func IsInternalCursor(name string) bool { return lakestream.IsInternalCursor(name) }

// LoadedPartition is a partition's persisted producer state, with the open
// internal cursors that persist it.
type LoadedPartition struct {
	State       PartitionState
	log         lakestream.Log
	epochCursor lakestream.LogCursor // nil until the first epoch persist
	dedupCursor lakestream.LogCursor // nil without deduplication
	opts        []lakestream.CursorOption
}

// LoadPartition reads a partition's persisted producer state. Cursor
// options (an ownership guard) apply to the internal cursors it opens, so
// that a node that lost the partition cannot write them.
func LoadPartition(ctx context.Context, log lakestream.Log, dedup bool, opts ...lakestream.CursorOption) (*LoadedPartition, error) {
	lp := &LoadedPartition{log: log, opts: opts}
	fenced, err := log.Fenced(ctx)
	if err != nil {
		return nil, err
	}
	lp.State.Terminated = fenced
	ec, err := log.LoadCursor(ctx, EpochCursorName, opts...)
	switch {
	case errors.Is(err, lakestream.ErrNoSuchCursor):
	case err != nil:
		return nil, err
	default:
		lp.epochCursor = ec
		if e, ok := ec.Properties()[epochProperty]; ok {
			lp.State.Epoch, lp.State.HasEpoch = uint64(e), true
		}
	}
	var cur lakestream.LogCursor
	if !dedup {
		// Off for the topic: the state is still kept when its cursor
		// exists (producers that ask for deduplication: ProducerSpec.Dedup).
		cur, err = log.LoadCursor(ctx, DedupCursorName, opts...)
		switch {
		case errors.Is(err, lakestream.ErrNoSuchCursor):
			return lp, nil
		case err != nil:
			lp.Close(ctx)
			return nil, err
		}
	}
	if err := lp.loadDedup(ctx, cur); err != nil {
		lp.Close(ctx)
		return nil, err
	}
	return lp, nil
}

// EnsureDedupCursor creates a partition's deduplication cursor at the head
// when it has none, so that the partition keeps a deduplication state
// from its next load (ProducerSpec.Dedup).
func EnsureDedupCursor(ctx context.Context, log lakestream.Log, opts ...lakestream.CursorOption) error {
	last, err := log.LastOffset(ctx)
	if err != nil {
		return err
	}
	cur, err := log.OpenCursor(ctx, DedupCursorName, last, opts...)
	if err != nil {
		return err
	}
	return cur.Close(ctx)
}

// loadDedup loads the deduplication state from cur, or (nil) from the
// cursor it opens, created at the head when absent.
func (lp *LoadedPartition) loadDedup(ctx context.Context, cur lakestream.LogCursor) error {
	if cur == nil {
		last, err := lp.log.LastOffset(ctx)
		if err != nil {
			return err
		}
		// A new cursor starts at the head: deduplication turned on for a
		// topic with history only knows producers from now on.
		if cur, err = lp.log.OpenCursor(ctx, DedupCursorName, last, lp.opts...); err != nil {
			return err
		}
	}
	lp.dedupCursor = cur
	seqs := maps.Clone(cur.Properties())
	if seqs == nil {
		seqs = map[string]int64{}
	}
	// The open staging sets first, then the replay: a set that commits
	// in between has its entries in the log by the replay's end.
	sets, err := lp.log.OpenStagedSets(ctx, loadStagedSetsMax)
	if err != nil {
		return err
	}
	for _, set := range sets {
		staged, err := stagedSequences(ctx, lp.log, set)
		switch {
		case errors.Is(err, lakestream.ErrStageEnded):
			// Committed (the replay reads it) or discarded since listed.
		case errors.Is(err, lakestream.ErrStageTooLarge):
			// Not learned: a SEND naming it reads it again, and fails.
			continue
		case err != nil:
			return err
		}
		for name, seq := range staged {
			if prev, ok := seqs[name]; !ok || seq > prev {
				seqs[name] = seq
			}
		}
		lp.State.Staged = append(lp.State.Staged, set)
	}
	start := cur.MarkDeleteOffset() + 1
	end := start
	for {
		es, err := lp.log.ReadEntries(ctx, start, dedupReplayRecordsMax, dedupReplayBytesMax)
		if errors.Is(err, lakestream.ErrOffsetTrimmed) {
			if start, err = lp.log.FirstOffset(ctx); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if len(es) == 0 {
			break
		}
		for _, e := range es {
			addSequence(seqs, e.Payload)
		}
		start = es[len(es)-1].End()
		end = start
	}
	lp.State.Sequences, lp.State.DedupEnd = seqs, end
	return nil
}

// addSequence raises seqs[name] to the highest sequence id of a stored
// entry (max(sequence_id, highest_sequence_id) of its metadata), if it is
// a named producer's entry.
func addSequence(seqs map[string]int64, entry []byte) {
	meta, _, err := protocol.SplitEntry(entry)
	if err != nil {
		return
	}
	md, err := protocol.ParseMetadata(meta)
	if err != nil || md.GetProducerName() == "" {
		return
	}
	h := int64(max(md.GetSequenceId(), md.GetHighestSequenceId()))
	if prev, ok := seqs[md.GetProducerName()]; !ok || h > prev {
		seqs[md.GetProducerName()] = h
	}
}

// stagedSequences reads a staging set's staged entries of log
// (LoadStaged; docs/dedup.md, "Transactional sends") and returns, per
// producer name, their highest sequence id. Errors are log.ReadStaged's
// (lakestream.ErrStageEnded: the set was committed or discarded).
func stagedSequences(ctx context.Context, log lakestream.LogStaged, set string) (map[string]int64, error) {
	seqs := map[string]int64{}
	err := log.ReadStaged(ctx, set, func(e lakestream.Entry) bool {
		addSequence(seqs, e.Payload)
		return true
	})
	if err != nil {
		return nil, err
	}
	return seqs, nil
}

// epochCursorFor returns the epoch cursor, creating it on first use.
func (lp *LoadedPartition) epochCursorFor(ctx context.Context, c lakestream.LogCursor) (lakestream.LogCursor, error) {
	if c != nil {
		return c, nil
	}
	last, err := lp.log.LastOffset(ctx)
	if err != nil {
		return nil, err
	}
	c, err = lp.log.OpenCursor(ctx, EpochCursorName, last, lp.opts...)
	if err != nil {
		return nil, fmt.Errorf("opening the epoch cursor: %w", err)
	}
	return c, nil
}

// Close releases the internal cursors (persisting nothing new: every write
// of them is explicit). The partition actor calls it when it stops; call it
// only for a LoadedPartition no actor was started with.
func (lp *LoadedPartition) Close(ctx context.Context) {
	if lp.epochCursor != nil {
		lp.epochCursor.Close(ctx)
	}
	if lp.dedupCursor != nil {
		lp.dedupCursor.Close(ctx)
	}
}
