package tables

// The materialization worker's job runner: actors.MaterializationWorker
// schedules (which log, when), this runs one lakestream.MaterializationJob
// as Materialize. cmd/lakegate wires it: actors never sees the engine or
// the tables, the tables never see actors (the job's types are the
// contract's).

import (
	"context"
	"errors"

	"github.com/lakegate/lakegate/engine"
	"github.com/lakegate/lakegate/lakehouse"
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

// Materializer runs materialization jobs on t.
func (t *Tables) Materializer() lakestream.Materializer { return jobRunner{t} }

type jobRunner struct{ t *Tables }

// MaterializeLog materializes the job's log into its stream's tables: one range
// per call; a call that moved records reports More, so the worker calls
// again at once until nothing is eligible. Between materializations it
// bin-packs the log every BinpackInterval, and the first partition's job
// maintains the table every MaintenanceInterval (table retention, then
// Maintain, then orphan removal).
// Idle implements lakestream.IdleMaterializer: the log is caught up at
// its current revision and neither bin-packing nor the table's
// maintenance is due, so MaterializeLog would do nothing.
func (r jobRunner) Idle(j lakestream.MaterializationJob) bool {
	if _, skip := r.t.unchanged(j.Log); !skip || r.t.isBinpackDue(j.Log) {
		return false
	}
	return j.Partition > 0 || !r.t.isMaintenanceDue(TargetOf(j.Stream, j.Partition, j.Delta, j.Iceberg, j.Schema).Root)
}

func (r jobRunner) MaterializeLog(ctx context.Context, j lakestream.MaterializationJob) (lakestream.MaterializationResult, error) {
	tg := TargetOf(j.Stream, j.Partition, j.Delta, j.Iceberg, j.Schema)
	tg.Writers = lakehouse.SchemaHistory(j.Properties)
	tg.Logs = j.Logs
	var st engine.CompactStats
	err := errNothingNew
	if rev, skip := r.t.unchanged(j.Log); !skip {
		st, err = r.t.Materialize(ctx, j.Log, tg)
		if errors.Is(err, errCaughtUp) {
			r.t.markCaughtUp(j.Log, rev)
		}
	}
	idle := err == nil || errors.Is(err, engine.ErrNothingToCompact)
	if idle && r.t.binpackDue(j.Log) {
		rs, rerr := r.t.Binpack(ctx, j.Log, tg)
		if rerr != nil {
			r.t.opts.Logger.Warn("tables: bin-packing failed", "table", tg.Root, "log", j.Log, "err", rerr)
		} else if rs.Groups+rs.Abandoned > 0 {
			r.t.opts.Logger.Info("tables: bin-packed", "table", tg.Root, "log", j.Log, "files_in", rs.FilesIn,
				"files_out", rs.Groups, "bytes_in", rs.BytesIn, "bytes_out", rs.BytesOut, "abandoned", rs.Abandoned)
		}
	}
	if j.Partition <= 0 && idle && r.t.maintenanceDue(tg.Root) {
		// One log per table (the first partition) triggers its
		// maintenance; the worker runs a table's jobs on its compaction
		// owner only, so it runs once across the cluster. Retention goes
		// first: the snapshot expiry and orphan removal after it then see
		// its removals.
		if ret := (Retention{Ms: j.RetentionMs, Bytes: j.RetentionBytes}); ret.on() && len(j.Logs) > 0 {
			rst, rerr := r.t.ApplyRetention(ctx, tg, j.Logs, ret)
			if rerr == nil {
				// What GET …/{topic}/table shows as lastRetention.
				rerr = r.t.RecordRetention(ctx, tg.Root, ret, rst)
			}
			if rerr != nil {
				r.t.opts.Logger.Warn("tables: retention failed", "table", tg.Root, "err", rerr)
			} else if rst.Files+rst.Held+len(rst.Trimmed) > 0 {
				r.t.opts.Logger.Info("tables: retention applied", "table", tg.Root, "files_removed", rst.Files,
					"bytes_removed", rst.Bytes, "files_held", rst.Held, "live_bytes", rst.LiveBytes, "logs_trimmed", rst.Trimmed,
					"retention_ms", ret.Ms, "retention_bytes", ret.Bytes)
			}
		}
		ms, merr := r.t.Maintain(ctx, tg)
		if merr != nil {
			r.t.opts.Logger.Warn("tables: maintenance failed", "table", tg.Root, "err", merr)
		} else if ms.SnapshotsExpired+ms.DeltaCommitsDeleted > 0 {
			r.t.opts.Logger.Info("tables: maintained", "table", tg.Root, "snapshots_expired", ms.SnapshotsExpired,
				"snapshots_kept", ms.SnapshotsKept, "manifest_files_deleted", ms.ManifestFilesDeleted,
				"delta_commits_deleted", ms.DeltaCommitsDeleted, "delta_checkpoints_deleted", ms.DeltaCheckpointsDeleted)
		}
		if len(j.Logs) > 0 {
			ost, oerr := r.t.RemoveOrphans(ctx, tg, j.Logs)
			if oerr != nil {
				r.t.opts.Logger.Warn("tables: orphan removal failed", "table", tg.Root, "err", oerr)
			} else if ost.Deleted > 0 {
				r.t.opts.Logger.Info("tables: orphans removed", "table", tg.Root, "files", ost.Deleted, "bytes", ost.Bytes)
			}
		}
	}
	if errors.Is(err, engine.ErrNothingToCompact) {
		return lakestream.MaterializationResult{}, nil
	}
	if err != nil {
		return lakestream.MaterializationResult{}, err
	}
	return lakestream.MaterializationResult{Records: st.Records, Bytes: st.FileBytes, More: st.Records > 0}, nil
}
