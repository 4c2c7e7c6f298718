package tables

// BenchmarkCompactToTable: compaction throughput, WAL chunks → Parquet →
// Delta (and Iceberg), per core. One op is one stored entry: a Pulsar batch
// of benchBatchMsgs JSON messages (~100 B each, LZ4). The entries are
// appended with the timer stopped; the timed part is compacting them all
// (decode, Arrow, Parquet zstd, read-back check, PUT, commits, index
// replacement). MB/s is of stored (compressed) entry bytes; rows/s is
// messages. GOMAXPROCS bounds the cores used (the compaction of one log
// is one goroutine).
//
//	go test -run '^$' -bench Materialize -benchtime 5000x ./tables/

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/lakegate/lakegate/protocol"
	"github.com/lakegate/lakegate/protocol/pb"
)

const benchBatchMsgs = 100

// benchBatchEntry is one LZ4-compressed Pulsar batch of JSON messages.
func benchBatchEntry(b *testing.B) []byte {
	var raw []byte
	for i := range benchBatchMsgs {
		sm := &pb.SingleMessageMetadata{PartitionKey: proto.String(fmt.Sprintf("customer-%d", i%17)),
			Properties: []*pb.KeyValue{{Key: proto.String("kind"), Value: proto.String("order")}},
			EventTime:  proto.Uint64(1_764_500_000_000 + uint64(i))}
		payload := fmt.Appendf(nil, `{"order":%d,"customer":"c%d","amount":%d.%02d,"note":"benchmark row"}`, i, i%97, i%500, i%100)
		var err error
		if raw, err = protocol.AppendBatchMessage(raw, sm, payload); err != nil {
			b.Fatal(err)
		}
	}
	comp, err := protocol.Compress(nil, pb.CompressionType_LZ4, raw)
	if err != nil {
		b.Fatal(err)
	}
	md := &pb.MessageMetadata{ProducerName: proto.String("bench"), SequenceId: proto.Uint64(1),
		PublishTime: proto.Uint64(1_764_500_000_000), NumMessagesInBatch: proto.Int32(benchBatchMsgs),
		Compression: pb.CompressionType_LZ4.Enum(), UncompressedSize: proto.Uint32(uint32(len(raw)))}
	meta, err := protocol.MarshalMetadata(md)
	if err != nil {
		b.Fatal(err)
	}
	entry, err := protocol.AppendEntry(nil, meta, comp)
	if err != nil {
		b.Fatal(err)
	}
	return entry
}

func BenchmarkCompactToTable(b *testing.B) {
	for _, formats := range []string{"delta", "delta+iceberg"} {
		b.Run(formats, func(b *testing.B) {
			var e testNode
			target := Target{Root: "tables/public/default/bench", Partition: 0, Delta: true}
			clk := &testClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
			opts := Options{Now: clk.now, Logger: quietLogger, CompactMaxBytes: 64 << 20}
			if formats == "delta" {
				e = newMemEnv(b).engine(b, opts)
			} else {
				env := newIcebergEnv(b)
				opts.IcebergCatalog = env.catalog
				e = env.engine(b, opts)
				target.Iceberg, target.Ident = true, []string{"public", "default", "bench"}
			}
			entry := benchBatchEntry(b)
			const id = 1
			ctx := ctxT(b)
			// Append b.N entries from 64 goroutines (bigger WAL chunks).
			var wg sync.WaitGroup
			next := make(chan struct{}, b.N)
			for range b.N {
				next <- struct{}{}
			}
			close(next)
			for range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range next {
						if _, err := e.Append(ctx, id, benchBatchMsgs, entry); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			clk.advance(time.Hour)
			b.SetBytes(int64(len(entry)))
			b.ResetTimer()
			start := time.Now()
			ranges := compactAllTo(b, e, id, target)
			took := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N*benchBatchMsgs)/took.Seconds(), "rows/s")
			b.ReportMetric(float64(ranges), "ranges")
		})
	}
}
