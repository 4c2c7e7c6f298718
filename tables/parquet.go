package tables

// Parquet chunks: building a table file from log entries (materialization) and
// reading one back as a chunk (the engine's read path, through Decoder).
// docs/compaction.md.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/apache/arrow-go/v18/parquet/metadata"

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

// DecodeChunk implements engine.ChunkDecoder. An entry with Offset 0 is
// a whole file (one GET); one with Offset > 0 is a span of row groups of a
// bin-packed file (docs/index-format.md): the footer and the span are read,
// nothing else.
func (Decoder) DecodeChunk(ctx context.Context, read engine.ReadRange, c index.Entry) ([]wal.DecodedEntry, error) {
	if c.Offset == 0 {
		data, err := read(ctx, 0, -1)
		if err != nil {
			return nil, err
		}
		if c.Length != 0 && int64(len(data)) != c.Length {
			return nil, fmt.Errorf("%w: %d bytes, index says %d", wal.ErrCorrupt, len(data), c.Length)
		}
		return decodeParquet(ctx, data, c.First, c.Entries)
	}
	md, tail, err := readFooter(ctx, read, c.Length)
	if err != nil {
		return nil, err
	}
	rgs, end, err := spanRowGroups(md, c.Offset, c.Records)
	if err != nil {
		return nil, err
	}
	span, err := read(ctx, c.Offset, end-c.Offset)
	if err != nil {
		return nil, err
	}
	if int64(len(span)) != end-c.Offset {
		return nil, fmt.Errorf("%w: span %d..%d: got %d bytes", wal.ErrCorrupt, c.Offset, end, len(span))
	}
	r := &sparseFile{size: c.Length, parts: []filePart{{c.Offset, span}, {c.Length - int64(len(tail)), tail}}}
	rows, err := lakehouse.ReadParquetRowGroups(ctx, r, nil, md, rgs)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", wal.ErrCorrupt, err)
	}
	return entriesOfRows(rows, c.First, c.Entries)
}

// footerTailBytes is how much of a file's end one GET takes to find its
// footer (a second GET when the footer is longer).
const footerTailBytes = 64 << 10

// readFooter reads and parses the footer of a Parquet file of size bytes;
// tail is the file's end it read (footer, length, magic).
func readFooter(ctx context.Context, read engine.ReadRange, size int64) (*metadata.FileMetaData, []byte, error) {
	if size < 12 {
		return nil, nil, fmt.Errorf("%w: a %d-byte file is not Parquet", wal.ErrCorrupt, size)
	}
	n := min(size, footerTailBytes)
	tail, err := read(ctx, size-n, n)
	if err != nil {
		return nil, nil, err
	}
	if int64(len(tail)) != n || string(tail[len(tail)-4:]) != "PAR1" {
		return nil, nil, fmt.Errorf("%w: no Parquet footer", wal.ErrCorrupt)
	}
	flen := int64(binary.LittleEndian.Uint32(tail[len(tail)-8:]))
	if flen+12 > size {
		return nil, nil, fmt.Errorf("%w: footer of %d bytes in a %d-byte file", wal.ErrCorrupt, flen, size)
	}
	if flen+8 > int64(len(tail)) {
		if tail, err = read(ctx, size-8-flen, flen+8); err != nil {
			return nil, nil, err
		}
		if int64(len(tail)) != flen+8 {
			return nil, nil, fmt.Errorf("%w: short footer read", wal.ErrCorrupt)
		}
	}
	md, err := metadata.NewFileMetaData(tail[int64(len(tail))-8-flen:len(tail)-8], nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: footer: %w", wal.ErrCorrupt, err)
	}
	return md, tail, nil
}

// rowGroupBytes returns the byte range [start, end) of row group i's column
// chunks.
func rowGroupBytes(md *metadata.FileMetaData, i int) (start, end int64, err error) {
	rg := md.RowGroup(i)
	start = math.MaxInt64
	for c := range rg.NumColumns() {
		cc, err := rg.ColumnChunk(c)
		if err != nil {
			return 0, 0, fmt.Errorf("%w: row group %d: %w", wal.ErrCorrupt, i, err)
		}
		s := cc.DataPageOffset()
		if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 {
			s = min(s, cc.DictionaryPageOffset())
		}
		start = min(start, s)
		end = max(end, s+cc.TotalCompressedSize())
	}
	if rg.NumColumns() == 0 || start < 4 || end <= start {
		return 0, 0, fmt.Errorf("%w: row group %d has no byte range", wal.ErrCorrupt, i)
	}
	return start, end, nil
}

// spanRowGroups returns the row groups of the span starting at byte offset
// and holding rows rows, and the end of their bytes.
func spanRowGroups(md *metadata.FileMetaData, offset, rows int64) (rgs []int, end int64, err error) {
	var n int64
	for i := range md.NumRowGroups() {
		start, e, err := rowGroupBytes(md, i)
		if err != nil {
			return nil, 0, err
		}
		if len(rgs) == 0 && start != offset {
			continue
		}
		rgs = append(rgs, i)
		n += md.RowGroup(i).NumRows()
		end = max(end, e)
		if n >= rows {
			break
		}
	}
	if len(rgs) == 0 || n != rows {
		return nil, 0, fmt.Errorf("%w: no span of %d rows at byte %d", wal.ErrCorrupt, rows, offset)
	}
	return rgs, end, nil
}

// sparseFile is the parts of a file that were read, as a
// parquet.ReaderAtSeeker: a read outside them is an error.
type sparseFile struct {
	size  int64
	pos   int64
	parts []filePart
}

type filePart struct {
	off  int64
	data []byte
}

func (f *sparseFile) ReadAt(p []byte, off int64) (int, error) {
	for _, pt := range f.parts {
		if off >= pt.off && off+int64(len(p)) <= pt.off+int64(len(pt.data)) {
			return copy(p, pt.data[off-pt.off:]), nil
		}
	}
	return 0, fmt.Errorf("tables: read of %d bytes at %d outside the parts of the file read", len(p), off)
}

func (f *sparseFile) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		f.pos = offset
	case io.SeekCurrent:
		f.pos += offset
	case io.SeekEnd:
		f.pos = f.size + offset
	}
	return f.pos, nil
}

func (f *sparseFile) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.pos)
	f.pos += int64(n)
	return n, err
}

// decodeParquet rebuilds the entries of a table file whose first entry is
// at offset first; it must hold exactly wantEntries entries, in offset
// order.
func decodeParquet(ctx context.Context, data []byte, first, wantEntries int64) ([]wal.DecodedEntry, error) {
	rows, err := lakehouse.ReadParquet(ctx, bytes.NewReader(data), nil)
	if err != nil {
		return nil, err
	}
	return entriesOfRows(rows, first, wantEntries)
}

// entriesOfRows rebuilds the entries of rows (whole entries, in offset
// order) whose first entry is at offset first; they must be exactly
// wantEntries entries.
func entriesOfRows(rows []lakehouse.Message, first, wantEntries int64) ([]wal.DecodedEntry, error) {
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
