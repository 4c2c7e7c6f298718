package main

import (
	"context"
	"encoding/base64"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakehouse"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/objstore"
	"github.com/lakegate/lakegate/tables"
)

const tableUsage = `usage: lakegate table scan [flags] <topic>

Prints the rows of a topic's table (its compacted messages) straight from
the object store; no running node is needed. <topic> is
persistent://tenant/namespace/topic, tenant/namespace/topic or a topic of
public/default.

flags:
`

// runTable runs `lakegate table …`.
func runTable(args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "scan" {
		return errors.New("usage: lakegate table scan [flags] <topic> (lakegate table scan -h)")
	}
	fs := flag.NewFlagSet("table scan", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), tableUsage); fs.PrintDefaults() }
	dataDir := fs.String("data-dir", "data", "data directory of a standalone node (objects under it)")
	objects := fs.String("objects", "", "object store URL (as the node's objects setting); overrides --data-dir")
	format := fs.String("format", "table", "output: table (aligned, payload shortened), csv, json (one object per line) or parquet")
	out := fs.String("out", "", "write to this file instead of standard output (required for parquet on a terminal)")
	limit := fs.Int64("limit", 0, "stop after this many rows (0: all)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("table scan: give exactly one topic")
	}
	id, err := tableStreamID(fs.Arg(0))
	if err != nil {
		return err
	}
	url := *objects
	if url == "" {
		abs, err := filepath.Abs(*dataDir)
		if err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(abs, "tables")); err != nil {
			return fmt.Errorf("table scan: no tables under %s (give --data-dir or --objects)", *dataDir)
		}
		url = "file://" + filepath.ToSlash(abs)
	}
	w := stdout
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	sink, err := newRowSink(*format, w)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	store, err := objstore.Open(ctx, url)
	if err != nil {
		return err
	}
	defer store.Close()
	var rows int64
	errLimit := errors.New("limit reached")
	err = tables.ScanTable(ctx, store, tables.TableRoot(id), func(rec arrow.RecordBatch) error {
		if *limit > 0 && rows+rec.NumRows() > *limit {
			rec = rec.NewSlice(0, *limit-rows)
			defer rec.Release()
		}
		rows += rec.NumRows()
		if err := sink.write(rec); err != nil {
			return err
		}
		if *limit > 0 && rows >= *limit {
			return errLimit
		}
		return nil
	})
	if errors.Is(err, lakestream.ErrNotMaterialized) {
		return fmt.Errorf("table scan: %s has no table yet (nothing compacted; see tables.age in docs/configuration.md)", id)
	}
	if err != nil && !errors.Is(err, errLimit) {
		return err
	}
	if err := sink.close(); err != nil {
		return err
	}
	if *format == "table" {
		fmt.Fprintf(stdout, "(%d rows)\n", rows)
	}
	return nil
}

// tableStreamID maps a topic name to its stream.
func tableStreamID(name string) (lakestream.StreamIdentifier, error) {
	if !strings.Contains(name, "://") {
		switch strings.Count(name, "/") {
		case 0:
			name = "public/default/" + name
		case 2:
		default:
			return lakestream.StreamIdentifier{}, fmt.Errorf("table scan: topic %q: want tenant/namespace/topic", name)
		}
		name = "persistent://" + name
	}
	tn, err := broker.ParseTopicName(name)
	if err != nil {
		return lakestream.StreamIdentifier{}, err
	}
	return tn.StreamID(), nil
}

// rowSink writes record batches in one output format.
type rowSink interface {
	write(rec arrow.RecordBatch) error
	close() error
}

func newRowSink(format string, w io.Writer) (rowSink, error) {
	switch format {
	case "table":
		return &textSink{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}, nil
	case "csv":
		return &csvSink{w: csv.NewWriter(w)}, nil
	case "json":
		return jsonSink{w}, nil
	case "parquet":
		if f, ok := w.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
				return nil, errors.New("table scan: --format parquet writes binary: give --out FILE or redirect")
			}
		}
		return &parquetSink{w: w}, nil
	}
	return nil, fmt.Errorf("table scan: --format %q is not one of table, csv, json, parquet", format)
}

// textSink prints the columns people look at, payloads shortened.
type textSink struct {
	tw     *tabwriter.Writer
	header bool
}

var textColumns = []string{lakehouse.ColPartition, lakehouse.ColOffset, "message id", lakehouse.ColKey, lakehouse.ColPublishTime, lakehouse.ColProperties, lakehouse.ColPayload}

func (s *textSink) write(rec arrow.RecordBatch) error {
	if !s.header {
		fmt.Fprintln(s.tw, strings.Join(textColumns, "\t"))
		s.header = true
	}
	col := func(name string) arrow.Array {
		if i := rec.Schema().FieldIndices(name); len(i) > 0 {
			return rec.Column(i[0])
		}
		return nil
	}
	str := func(a arrow.Array, i int) string {
		if a == nil || a.IsNull(i) {
			return ""
		}
		return a.ValueStr(i)
	}
	ledger, entry, batch := col(lakehouse.ColLedgerID), col(lakehouse.ColEntryID), col(lakehouse.ColBatchIndex)
	payload := col(lakehouse.ColPayload)
	for i := 0; i < int(rec.NumRows()); i++ {
		p := ""
		if b, ok := payload.(*array.Binary); ok && !b.IsNull(i) {
			p = shorten(b.Value(i), 60)
		}
		fmt.Fprintf(s.tw, "%s\t%s\t%s:%s:%s\t%s\t%s\t%s\t%s\n",
			str(col(lakehouse.ColPartition), i), str(col(lakehouse.ColOffset), i),
			str(ledger, i), str(entry, i), str(batch, i),
			str(col(lakehouse.ColKey), i), str(col(lakehouse.ColPublishTime), i),
			str(col(lakehouse.ColProperties), i), p)
	}
	return nil
}

func (s *textSink) close() error { return s.tw.Flush() }

// shorten renders a payload: text when it is printable UTF-8, else base64,
// cut to n characters.
func shorten(b []byte, n int) string {
	s := string(b)
	printable := utf8.Valid(b)
	for _, r := range s {
		if r < 0x20 && r != '\t' {
			printable = false
			break
		}
	}
	if !printable {
		s = "base64:" + base64.StdEncoding.EncodeToString(b)
	}
	s = strings.ReplaceAll(s, "\t", " ")
	if utf8.RuneCountInString(s) > n {
		r := []rune(s)
		s = string(r[:n-1]) + "…"
	}
	return s
}

// csvSink writes every column; binary columns base64, timestamps ISO-8601.
type csvSink struct {
	w      *csv.Writer
	header bool
}

func (s *csvSink) write(rec arrow.RecordBatch) error {
	if !s.header {
		names := make([]string, rec.NumCols())
		for i, f := range rec.Schema().Fields() {
			names[i] = f.Name
		}
		if err := s.w.Write(names); err != nil {
			return err
		}
		s.header = true
	}
	row := make([]string, rec.NumCols())
	for i := 0; i < int(rec.NumRows()); i++ {
		for c := range row {
			a := rec.Column(c)
			if a.IsNull(i) {
				row[c] = ""
			} else {
				row[c] = a.ValueStr(i)
			}
		}
		if err := s.w.Write(row); err != nil {
			return err
		}
	}
	return nil
}

func (s *csvSink) close() error { s.w.Flush(); return s.w.Error() }

// jsonSink writes one JSON object per row (binary as base64).
type jsonSink struct{ w io.Writer }

func (s jsonSink) write(rec arrow.RecordBatch) error { return array.RecordToJSON(rec, s.w) }
func (s jsonSink) close() error                      { return nil }

// parquetSink writes every row into one Parquet file with the table's
// schema (zstd).
type parquetSink struct {
	w      io.Writer
	fw     *pqarrow.FileWriter
	schema *arrow.Schema
}

func (s *parquetSink) write(rec arrow.RecordBatch) error {
	if s.fw == nil {
		fw, err := pqarrow.NewFileWriter(rec.Schema(), s.w, lakehouse.WriteOptions{}.WriterProperties(), pqarrow.DefaultWriterProps())
		if err != nil {
			return err
		}
		s.fw, s.schema = fw, rec.Schema()
	}
	if !s.schema.Equal(rec.Schema()) {
		return errors.New("table scan: the table's files have different schemas (typed columns were added); use --format json or csv")
	}
	return s.fw.WriteBuffered(rec)
}

func (s *parquetSink) close() error {
	if s.fw == nil {
		return nil
	}
	return s.fw.Close()
}
