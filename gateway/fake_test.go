package gateway

import (
	"bufio"
	"context"
	"testing"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

// fakeCatalog serves one non-partitioned stream backed by log.
type fakeCatalog struct {
	lakestream.StreamCatalog // nil: other methods panic (recovered per session)
	log                      lakestream.Log
}

func (c *fakeCatalog) LoadStream(ctx context.Context, id lakestream.StreamIdentifier) (lakestream.StreamMetadata, error) {
	return lakestream.StreamMetadata{ID: id}, nil
}

func (c *fakeCatalog) OpenLog(ctx context.Context, id lakestream.StreamIdentifier, partition int) (lakestream.Log, error) {
	return c.log, nil
}

// LoadNamespace: a topic load reads the namespace's deduplication policy.
func (c *fakeCatalog) LoadNamespace(ctx context.Context, name string) (lakestream.Namespace, error) {
	return lakestream.Namespace{Name: name}, nil
}

func readCmd(t *testing.T, br *bufio.Reader) *pb.BaseCommand {
	t.Helper()
	f, err := protocol.ReadFrame(br, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f.Cmd
}
