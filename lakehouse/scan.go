package lakehouse

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// scanBatchRows bounds the rows of one batch ScanParquet hands out.
const scanBatchRows = 16 << 10

// ScanParquet calls fn with the rows of a message-table file as Arrow
// record batches of at most 16 Ki rows, in file order, every column
// (system and typed). A batch is valid only during fn; fn's error stops the
// scan and is returned as is.
func ScanParquet(ctx context.Context, r parquet.ReaderAtSeeker, mem memory.Allocator, fn func(arrow.RecordBatch) error) error {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	pf, err := file.NewParquetReader(r, file.WithReadProps(parquet.NewReaderProperties(mem)))
	if err != nil {
		return fmt.Errorf("lakehouse: opening parquet: %w", err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: scanBatchRows}, mem)
	if err != nil {
		return fmt.Errorf("lakehouse: opening parquet: %w", err)
	}
	rr, err := fr.GetRecordReader(ctx, nil, nil)
	if err != nil {
		return fmt.Errorf("lakehouse: reading parquet: %w", err)
	}
	defer rr.Release()
	for rr.Next() {
		if err := fn(rr.RecordBatch()); err != nil {
			return err
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("lakehouse: reading parquet: %w", err)
	}
	return nil
}
