package compactor

import (
	"context"
	"errors"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/engine"
)

// Engine runs compaction jobs on an engine; it implements
// actors.TableCompactor.
type Engine struct{ E *engine.Engine }

var _ actors.TableCompactor = Engine{}

// CompactLog compacts the job's log into its stream's tables: one range
// per call; a call that moved records reports More, so the worker calls
// again at once until nothing is eligible.
func (c Engine) CompactLog(ctx context.Context, j actors.CompactionJob) (actors.CompactionResult, error) {
	st, err := c.E.CompactToTable(ctx, j.Log, engine.TableTarget{
		Root: engine.TableRoot(j.Stream), Partition: int32(j.Partition),
		Delta: j.Delta, Iceberg: j.Iceberg, Ident: engine.IcebergIdent(j.Stream), Schema: j.Schema,
	})
	if errors.Is(err, engine.ErrNothingToCompact) {
		return actors.CompactionResult{}, nil
	}
	if err != nil {
		return actors.CompactionResult{}, err
	}
	return actors.CompactionResult{Records: st.Records, Bytes: st.FileBytes, More: st.Records > 0}, nil
}
