package tables

// The compaction worker's job runner: actors.CompactionWorker schedules
// (which log, when), this runs one job as CompactToTable. cmd/lakegate
// wires it: actors never sees the engine, the engine never sees actors.

import (
	"context"
	"errors"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/lakestream"
)

// TargetOf is the table target of one log of a stream: the stream's table
// root (TableRoot), the log's partition (-1: not partitioned), the formats
// to commit to, the Iceberg identifier (IcebergIdent) and the stream's
// latest schema.
func TargetOf(stream lakestream.StreamIdentifier, partition int, delta, iceberg bool, schema lakestream.SchemaConfig) Target {
	return Target{
		Root: TableRoot(stream), Partition: int32(partition),
		Delta: delta, Iceberg: iceberg, Ident: IcebergIdent(stream), Schema: schema,
	}
}

// Compactor runs compaction jobs on t: it implements actors.TableCompactor.
func (t *Tables) Compactor() actors.TableCompactor { return jobRunner{t} }

type jobRunner struct{ t *Tables }

// CompactLog compacts the job's log into its stream's tables: one range
// per call; a call that moved records reports More, so the worker calls
// again at once until nothing is eligible.
func (r jobRunner) CompactLog(ctx context.Context, j actors.CompactionJob) (actors.CompactionResult, error) {
	st, err := r.t.CompactToTable(ctx, j.Log, TargetOf(j.Stream, j.Partition, j.Delta, j.Iceberg, j.Schema))
	if errors.Is(err, engine.ErrNothingToCompact) {
		return actors.CompactionResult{}, nil
	}
	if err != nil {
		return actors.CompactionResult{}, err
	}
	return actors.CompactionResult{Records: st.Records, Bytes: st.FileBytes, More: st.Records > 0}, nil
}
