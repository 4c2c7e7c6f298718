package e2e

// The Databricks path, as far as it can be run here (docs/delta.md,
// "Databricks"): a topic's Delta table on S3 (SeaweedFS) read by Spark 3.5
// + delta-spark through s3a://, registered as an external table (CREATE
// TABLE … USING DELTA LOCATION), with the protocol and properties a
// Databricks reader sees checked. Needs LAKEGATE_SPARK_PYTHON and
// LAKEGATE_SPARK_S3_JARS (e2e/interop/databricks/run.sh sets them).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/internal/testnode"
	"github.com/lakegate/lakegate/internal/testservers"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/node"
)

func TestDatabricksPathS3(t *testing.T) {
	python, jars := os.Getenv("LAKEGATE_SPARK_PYTHON"), os.Getenv("LAKEGATE_SPARK_S3_JARS")
	if python == "" || jars == "" {
		t.Skip("LAKEGATE_SPARK_PYTHON or LAKEGATE_SPARK_S3_JARS not set (e2e/interop/databricks/run.sh)")
	}
	root, err := testservers.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	s3 := testservers.StartSeaweed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cfg := node.Config{ObjectURL: s3.URL + "&prefix=lakegate/", GCInterval: time.Second}
	cfg.Tables.CompactAge = 200 * time.Millisecond
	cfg.Engine.Linger = 5 * time.Millisecond
	on := true
	c := startNode(t, testnode.Config{
		Node:            cfg,
		Materialization: &lakestream.TableMaterializationPolicy{Enabled: &on},
		Materializer: &actors.MaterializationWorkerOptions{
			ScanInterval: 200 * time.Millisecond,
			Policy:       actors.MaterializationPolicy{Interval: 100 * time.Millisecond, BackoffMin: 100 * time.Millisecond, BackoffMax: time.Second},
		},
	})
	id := lakestream.StreamIdentifier{Namespace: "public/default", Name: "orders"}
	if _, err := c.catalog.CreateStream(ctx, id, lakestream.StreamConfig{}, lakestream.Partitioning{NumPartitions: 2},
		lakestream.SchemaConfig{Type: lakestream.SchemaNone}, nil, nil); err != nil {
		t.Fatal(err)
	}
	cl, err := pulsar.NewClient(pulsar.ClientOptions{URL: c.gw.ServiceURL(), OperationTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/orders", BatchingMaxPublishDelay: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const total = 300
	for i := range total {
		p.SendAsync(ctx, &pulsar.ProducerMessage{Key: fmt.Sprint(i % 11), Payload: fmt.Appendf(nil, `{"order":%d}`, i)},
			func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				if err != nil {
					t.Errorf("send: %v", err)
				}
			})
	}
	if err := p.FlushWithCtx(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := c.catalog.Stream(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		info, err := s.Table().Info(ctx)
		done := err == nil && len(info.Formats) > 0
		for _, f := range info.Formats {
			done = done && f.Rows == total
		}
		if done {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("table not complete: %+v, %v", info, err)
		case <-tick.C:
		}
	}

	location := "s3a://" + s3.Bucket + "/lakegate/tables/public/default/orders"
	cmd := exec.CommandContext(ctx, python, filepath.Join(root, "e2e", "interop", "databricks", "check_s3.py"),
		"--jars", jars, "--endpoint", s3.Endpoint, "--location", location, "--rows", fmt.Sprint(total))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("check_s3.py: %v\n%s\n%s", err, out, tail(stderr.String(), 4000))
	}
	var res struct {
		RowsByPath  int `json:"rows_by_path"`
		RowsByTable int `json:"rows_by_table"`
		Distinct    int `json:"distinct_offsets"`
		RowsInPart0 int `json:"rows_partition_0"`
		Detail      struct {
			Format           string            `json:"format"`
			MinReaderVersion int               `json:"minReaderVersion"`
			MinWriterVersion int               `json:"minWriterVersion"`
			TableFeatures    []string          `json:"tableFeatures"`
			PartitionColumns []string          `json:"partitionColumns"`
			Properties       map[string]string `json:"properties"`
		} `json:"detail"`
		TblProperties map[string]string `json:"tblproperties"`
		Spark         string            `json:"spark"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("check_s3.py output %q: %v", out, err)
	}
	t.Logf("check_s3.py: %s", out)
	if res.RowsByPath != total || res.RowsByTable != total || res.Distinct != total || res.RowsInPart0 == 0 || res.RowsInPart0 == total {
		t.Fatalf("Spark over s3a: %+v, want %d rows in two partitions", res, total)
	}
	d := res.Detail
	if d.Format != "delta" || d.MinReaderVersion != 1 || d.MinWriterVersion != 2 || !slices.Equal(d.PartitionColumns, []string{"__partition", "__publish_date"}) {
		t.Fatalf("DESCRIBE DETAIL: %+v", d)
	}
	// Protocol 1/2 has no explicit features; Spark lists the legacy ones it
	// implies. Nothing a reader must support beyond them.
	for _, f := range d.TableFeatures {
		if f != "appendOnly" && f != "invariants" {
			t.Fatalf("table feature %q (features %v)", f, d.TableFeatures)
		}
	}
	for k := range res.TblProperties {
		if strings.HasPrefix(k, "delta.columnMapping") || strings.HasPrefix(k, "delta.enableDeletionVectors") || strings.HasPrefix(k, "delta.feature.") {
			t.Fatalf("table property %s=%s", k, res.TblProperties[k])
		}
	}
}
