package tables

// Parquet chunks: building a table file from log entries (compaction) and
// reading one back as a chunk (the engine's read path, through Decoder).
// docs/compaction.md.

import (
	"bytes"
	"context"
	"fmt"
	"math"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/engine/index"
	"github.com/lakegate/lakegate/engine/wal"
	"github.com/lakegate/lakegate/lakehouse"
	"github.com/lakegate/lakegate/lakestream"
)

// tableEntry is one log entry on its way into a table file.
type tableEntry struct {
	offset    int64
	records   int32
	publishMs int64 // as the log reports it (write time when none was given)
	writeMs   int64 // of its source chunk
	bytesEnd  int64 // cumulative payload bytes of the log through this entry
	payload   []byte
}

func (te tableEntry) day() string { return lakehouse.PublishDate(te.publishMs) }

// splitRuns cuts entries into runs of consecutive entries with the same
// publish day: one table file each. The result aliases ents.
func splitRuns(ents []tableEntry) [][]tableEntry {
	var out [][]tableEntry
	for i := 0; i < len(ents); {
		j := i + 1
		for j < len(ents) && ents[j].day() == ents[i].day() {
			j++
		}
		out = append(out, ents[i:j:j])
		i = j
	}
	return out
}

// entryRows decodes one entry into its table rows: a Pulsar entry is
// decompressed and unbatched; anything else becomes one opaque row. Every
// row gets the entry's publish time as the log records it.
func entryRows(te tableEntry, partition int32, ledger int64) ([]lakehouse.Message, error) {
	e := lakestream.Entry{
		EntryHeader: lakestream.EntryHeader{Offset: te.offset, Records: te.records, PublishTimeMs: te.publishMs, Size: int32(len(te.payload))},
		Payload:     te.payload,
	}
	msgs, err := lakehouse.DecodeEntry(e, partition, ledger, 0)
	if err != nil {
		m, oerr := lakehouse.OpaqueEntry(e, partition, ledger)
		if oerr != nil {
			return nil, fmt.Errorf("tables: entry at offset %d cannot go into a table: %w", te.offset, err)
		}
		msgs = []lakehouse.Message{m}
	}
	for i := range msgs {
		msgs[i].PublishTimeMs = te.publishMs
	}
	return msgs, nil
}

// buildParquet writes one run as a Parquet file (with typed columns typed,
// nil for none) and returns its bytes and
// the decoded chunk read back from them. The read-back is checked against
// the run (every rebuilt entry byte-identical): a file that would not serve
// reads exactly is never written.
func buildParquet(ctx context.Context, run []tableEntry, partition int32, ledger int64, typed *lakehouse.TypedSchema) ([]byte, []wal.DecodedEntry, lakehouse.FileStats, error) {
	var rows []lakehouse.Message
	for _, te := range run {
		msgs, err := entryRows(te, partition, ledger)
		if err != nil {
			return nil, nil, lakehouse.FileStats{}, err
		}
		rows = append(rows, msgs...)
	}
	rb := lakehouse.NewRecordBuilder(nil, typed, lakehouse.RecordLimits{})
	defer rb.Release()
	recs := rb.AppendAll(rows)
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	var buf bytes.Buffer
	// The range is bounded by CompactMaxBytes; the file takes all of it.
	st, err := lakehouse.WriteParquet(&buf, rb.Schema(), recs, lakehouse.WriteOptions{MaxFileBytes: math.MaxInt64})
	if err != nil {
		return nil, nil, st, fmt.Errorf("tables: write parquet: %w", err)
	}
	if st.Records != len(recs) || st.Rows != int64(len(rows)) {
		return nil, nil, st, fmt.Errorf("tables: parquet took %d of %d records", st.Records, len(recs))
	}
	data := buf.Bytes()
	ents, err := decodeParquet(ctx, data, run[0].offset, int64(len(run)))
	if err != nil {
		return nil, nil, st, fmt.Errorf("tables: parquet read-back: %w", err)
	}
	for i, de := range ents {
		te := run[i]
		if de.Records != te.records || de.PublishTimeMs != te.publishMs || !bytes.Equal(de.Payload, te.payload) {
			return nil, nil, st, fmt.Errorf("tables: parquet read-back differs at offset %d", te.offset)
		}
	}
	return data, ents, st, nil
}

// Decoder is the engine's engine.ChunkDecoder for index entries of kind
// index.KindParquet: it rebuilds a table file's entries from its rows
// (docs/compaction.md, "Reads"). The zero value is ready to use.
type Decoder struct{}

var _ engine.ChunkDecoder = Decoder{}

// DecodeChunk implements engine.ChunkDecoder.
func (Decoder) DecodeChunk(ctx context.Context, read engine.ReadRange, c index.Entry) ([]wal.DecodedEntry, error) {
	data, err := read(ctx, 0, -1)
	if err != nil {
		return nil, err
	}
	if c.Length != 0 && int64(len(data)) != c.Length {
		return nil, fmt.Errorf("%w: %d bytes, index says %d", wal.ErrCorrupt, len(data), c.Length)
	}
	return decodeParquet(ctx, data, c.First, c.Entries)
}

// decodeParquet rebuilds the entries of a table file whose first entry is
// at offset first; it must hold exactly wantEntries entries, in offset
// order.
func decodeParquet(ctx context.Context, data []byte, first, wantEntries int64) ([]wal.DecodedEntry, error) {
	rows, err := lakehouse.ReadParquet(ctx, bytes.NewReader(data), nil)
	if err != nil {
		return nil, err
	}
	groups := lakehouse.SplitEntries(rows)
	if int64(len(groups)) != wantEntries {
		return nil, fmt.Errorf("%w: parquet file holds %d entries, index says %d", wal.ErrCorrupt, len(groups), wantEntries)
	}
	out := make([]wal.DecodedEntry, len(groups))
	off := first
	for i, g := range groups {
		if g[0].EntryID != off {
			return nil, fmt.Errorf("%w: parquet entry %d at offset %d, want %d", wal.ErrCorrupt, i, g[0].EntryID, off)
		}
		p, err := lakehouse.RebuildEntry(g)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", wal.ErrCorrupt, err)
		}
		n := g[0].BatchSize
		if n < 1 {
			return nil, fmt.Errorf("%w: parquet entry at offset %d has %d records", wal.ErrCorrupt, off, n)
		}
		out[i] = wal.DecodedEntry{Records: n, PublishTimeMs: g[0].PublishTimeMs, Payload: p, PayloadSize: len(p)}
		off += int64(n)
	}
	return out, nil
}
