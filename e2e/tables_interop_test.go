package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin"

	"github.com/lakegate/lakegate/lakehouse/iceberg"
)

// payloadDigest is read_table.py's digest: the sum modulo 2^64 of the first
// 8 bytes (big-endian) of SHA-256 of every payload.
type payloadDigest struct {
	sum  uint64
	rows int64
}

func (d *payloadDigest) add(p []byte) {
	h := sha256.Sum256(p)
	d.sum += binary.BigEndian.Uint64(h[:8])
	d.rows++
}

func (d payloadDigest) hex() string { return fmt.Sprintf("%016x", d.sum) }

// readerSummary is read_table.py's JSON line.
type readerSummary struct {
	Reader     string           `json:"reader"`
	Error      string           `json:"error"`
	Rows       int64            `json:"rows"`
	Digest     string           `json:"digest"`
	Partitions map[string]int64 `json:"partitions"`
	Typed      map[string]struct {
		NonNull int64    `json:"non_null"`
		Sum     *float64 `json:"sum"`
	} `json:"typed"`
}

// interopEnv returns a required environment variable of the tables interop
// run; the run is opted into, so a missing one fails the test.
func interopEnv(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set (e2e/interop/tables/run.sh sets it)", name)
	}
	return v
}

// priceSchema is the record of the typed-column topics (Avro record
// definition, as Pulsar stores both JSON and AVRO schemas).
const priceSchema = `{"type":"record","name":"Price","namespace":"lakegate.e2e","fields":[` +
	`{"name":"id","type":"long"},{"name":"name","type":["null","string"],"default":null},{"name":"price","type":"double"}]}`

type price struct {
	ID    int64   `json:"id" avro:"id"`
	Name  *string `json:"name" avro:"name"`
	Price float64 `json:"price" avro:"price"`
}

// TestTablesInterop is issue #4's scenario: 100 000 messages to a
// 4-partition topic (keys, properties, event times, batching, ZSTD) and
// 1 000 each to a JSON- and an AVRO-schema topic, through a real lakegate
// binary; once compacted, Spark + delta-spark, delta-rs and pyiceberg (SQL
// catalog) each read every table: exactly the rows sent, the same payload
// multiset (digest), four partitions, and correct typed columns.
//
// It runs under `make interop` (e2e/interop/tables/run.sh), which installs
// the readers and sets LAKEGATE_TABLES_INTEROP=1 with their paths.
func TestTablesInterop(t *testing.T) {
	if os.Getenv("LAKEGATE_TABLES_INTEROP") == "" {
		t.Skip("set by e2e/interop/tables/run.sh (make interop)")
	}
	script := interopEnv(t, "LAKEGATE_TABLES_SCRIPT")
	deltaPy := interopEnv(t, "LAKEGATE_PYTHON")
	sparkPy := interopEnv(t, "LAKEGATE_SPARK_PYTHON")
	sparkJars := interopEnv(t, "LAKEGATE_SPARK_JARS")
	icebergPy := interopEnv(t, "LAKEGATE_ICEBERG_PYTHON")
	n := 100_000
	if s := os.Getenv("LAKEGATE_TABLES_MESSAGES"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}

	bin := lakegateBinary(t)
	dir := t.TempDir()
	node := startLakegate(t, bin, dir, "--tables-age", "1s", "--tables-interval", "200ms", "--tables-scan-interval", "500ms",
		"--engine-gc-interval", "500ms")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	adm, err := pulsaradmin.NewClient(&pulsaradmin.Config{WebServiceURL: node.httpURL})
	if err != nil {
		t.Fatal(err)
	}
	const orders = "persistent://public/default/orders"
	if err := adm.Topics().Create(admTopic(t, orders), 4); err != nil {
		t.Fatal(err)
	}
	cl := binClient(t, node.pulsarURL)

	// A consumer reads the messages as they are produced (from the WAL).
	before, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: orders, SubscriptionName: "before", Type: pulsar.Exclusive,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, ReceiverQueueSize: 2000})
	if err != nil {
		t.Fatal(err)
	}
	beforeMsgs := make(chan map[string]string, 1)
	go func() {
		got := make(map[string]string, n)
		for range n {
			m, err := before.Receive(ctx)
			if err != nil {
				t.Error(err)
				break
			}
			got[msgKey(m)] = msgFingerprint(m)
			before.Ack(m)
		}
		beforeMsgs <- got
	}()

	// The 100 000 messages.
	start := time.Now()
	var want payloadDigest
	p, err := cl.CreateProducer(pulsar.ProducerOptions{
		Topic: orders, CompressionType: pulsar.ZSTD,
		BatchingMaxMessages: 200, BatchingMaxPublishDelay: 5 * time.Millisecond, MaxPendingMessages: 5000,
	})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour)
	msgs := make([]*pulsar.ProducerMessage, 0, n)
	for i := range n {
		payload := fmt.Appendf(nil, `{"order":%d,"customer":"c%d","amount":%d.%02d}`, i, i%997, i%500, i%100)
		want.add(payload)
		msgs = append(msgs, &pulsar.ProducerMessage{
			Key: "c" + strconv.Itoa(i%997), Payload: payload,
			Properties: map[string]string{"i": strconv.Itoa(i), "kind": "order"},
			EventTime:  base.Add(time.Duration(i) * time.Microsecond),
		})
	}
	sendAllAsync(t, ctx, p, msgs)
	t.Logf("produced %d messages in %v", n, time.Since(start).Round(time.Millisecond))

	// The typed topics.
	const typedN = 1000
	var typedWant struct {
		idSum, priceSum float64
		names           int64
		digest          payloadDigest
	}
	for i := range typedN {
		typedWant.idSum += float64(i)
		typedWant.priceSum += float64(i) / 4
		if i%3 != 0 {
			typedWant.names++
		}
	}
	for _, kind := range []string{"json", "avro"} {
		var sch pulsar.Schema
		if kind == "json" {
			sch = pulsar.NewJSONSchema(priceSchema, nil)
		} else {
			sch = pulsar.NewAvroSchema(priceSchema, nil)
		}
		tp, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/prices_" + kind, Schema: sch})
		if err != nil {
			t.Fatal(err)
		}
		msgs := make([]*pulsar.ProducerMessage, 0, typedN)
		for i := range typedN {
			v := price{ID: int64(i), Price: float64(i) / 4}
			if i%3 != 0 {
				s := "item-" + strconv.Itoa(i)
				v.Name = &s
			}
			msgs = append(msgs, &pulsar.ProducerMessage{Value: v})
		}
		sendAllAsync(t, ctx, tp, msgs)
		tp.Close()
	}

	// Compaction by age, on the node's own schedule.
	tj := waitForTable(t, ctx, node.httpURL, "public/default/orders", int64(n), "DELTA", "ICEBERG")
	t.Logf("orders compacted %v after the last send: %+v", time.Since(start).Round(time.Millisecond), tj.Formats)
	for _, kind := range []string{"json", "avro"} {
		waitForTable(t, ctx, node.httpURL, "public/default/prices_"+kind, typedN, "DELTA", "ICEBERG")
	}

	// The WAL objects of the compacted ranges are collected (every log is
	// compacted to its end, so none stays); then a new consumer from the
	// earliest position, served from Parquet, gets what the first one got.
	readBefore := <-beforeMsgs
	if len(readBefore) != n {
		t.Fatalf("the consumer before compaction got %d distinct messages, want %d", len(readBefore), n)
	}
	waitNoWAL(t, ctx, filepath.Join(dir, "wal"))
	after, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: orders, SubscriptionName: "after", Type: pulsar.Exclusive,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, ReceiverQueueSize: 2000})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		m, err := after.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		k := msgKey(m)
		if fp, ok := readBefore[k]; !ok || fp != msgFingerprint(m) {
			t.Fatalf("message %d after compaction, id %s: %q; before compaction: %q (found %v)", i, k, msgFingerprint(m), fp, ok)
		}
		delete(readBefore, k)
		after.Ack(m)
	}
	after.Close()
	t.Logf("a consumer after compaction and GC got the same %d messages (ids, keys, properties, event times, payloads)", n)

	tablesDir := filepath.Join(dir, "tables", "public", "default")
	catalogURI := "sqlite:///" + filepath.Join(dir, "iceberg", "catalog.db")
	warehouse := "file://" + dir
	// Every reader reads the three tables in one process (one Spark
	// session: starting one takes 10-15 s).
	type tableRead struct {
		topic string
		typed []string
	}
	typedCols := []string{"id", "name", "price"}
	reads := []tableRead{{"orders", nil}, {"prices_json", typedCols}, {"prices_avro", typedCols}}
	pyRead := func(py, reader string, table func(topic string) string) func() []readerSummary {
		return func() []readerSummary {
			t.Helper()
			args := []string{script, reader}
			for i, r := range reads {
				if i > 0 {
					args = append(args, "++")
				}
				args = append(args, table(r.topic), "--typed", strings.Join(r.typed, ","))
				switch reader {
				case "spark":
					args = append(args, "--jars", sparkJars)
				case "pyiceberg":
					args = append(args, "--catalog-uri", catalogURI, "--warehouse", warehouse)
				}
			}
			started := time.Now()
			cmd := exec.CommandContext(ctx, py, args...)
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) < len(reads) {
				t.Fatalf("%s: %d output lines for %d tables (%v): %q", reader, len(lines), len(reads), err, out)
			}
			var sums []readerSummary
			for i, line := range lines[len(lines)-len(reads):] {
				var s readerSummary
				if jerr := json.Unmarshal([]byte(line), &s); jerr != nil {
					t.Fatalf("%s %s: %v, output %q (%v)", reader, reads[i].topic, err, out, jerr)
				}
				if s.Error != "" || err != nil {
					t.Fatalf("%s %s: %s (%v)", reader, reads[i].topic, s.Error, err)
				}
				sums = append(sums, s)
			}
			t.Logf("%s read %d tables in %v: %d, %d and %d rows", reader, len(reads), time.Since(started).Round(time.Millisecond),
				sums[0].Rows, sums[1].Rows, sums[2].Rows)
			return sums
		}
	}
	icat, err := iceberg.Open(ctx, iceberg.CatalogConfig{URI: filepath.Join(dir, "iceberg", "catalog.db"), StoreURL: "file://" + dir})
	if err != nil {
		t.Fatal(err)
	}
	defer icat.Close()
	inDir := func(topic string) string { return filepath.Join(tablesDir, topic) }
	readers := []struct {
		name string
		read func() []readerSummary
	}{
		{"deltars", pyRead(deltaPy, "deltars", inDir)},
		{"spark", pyRead(sparkPy, "spark", inDir)},
		{"pyiceberg", pyRead(icebergPy, "pyiceberg", func(topic string) string { return "public.default." + topic })},
		{"iceberg-go", func() []readerSummary {
			var sums []readerSummary
			for _, r := range reads {
				sums = append(sums, readIcebergGo(t, ctx, icat, r.topic, r.typed))
			}
			return sums
		}},
	}
	passed := 0
	for _, r := range readers {
		sums := r.read()
		s := sums[0]
		if s.Rows != int64(n) || s.Digest != want.hex() {
			t.Errorf("%s orders: %d rows digest %s, want %d rows digest %s", r.name, s.Rows, s.Digest, n, want.hex())
			continue
		}
		if len(s.Partitions) != 4 {
			t.Errorf("%s orders: partitions %v, want 4", r.name, s.Partitions)
			continue
		}
		ok := true
		for i, kind := range []string{"json", "avro"} {
			s := sums[1+i]
			id, name, pr := s.Typed["id"], s.Typed["name"], s.Typed["price"]
			switch {
			case s.Rows != typedN:
				t.Errorf("%s prices_%s: %d rows, want %d", r.name, kind, s.Rows, typedN)
			case id.NonNull != typedN || id.Sum == nil || *id.Sum != typedWant.idSum:
				t.Errorf("%s prices_%s: id %d non-null, sum %v; want %d, %v", r.name, kind, id.NonNull, id.Sum, typedN, typedWant.idSum)
			case name.NonNull != typedWant.names:
				t.Errorf("%s prices_%s: name non-null %d, want %d", r.name, kind, name.NonNull, typedWant.names)
			case pr.Sum == nil || math.Abs(*pr.Sum-typedWant.priceSum) > 1e-6:
				t.Errorf("%s prices_%s: price sum %v, want %v", r.name, kind, pr.Sum, typedWant.priceSum)
			default:
				continue
			}
			ok = false
		}
		if ok {
			passed++
		}
	}
	t.Logf("tables interop: %d/%d readers saw every table exactly", passed, len(readers))
}

// readIcebergGo reads a table of public/default with iceberg-go (the
// library lakegate commits with, reading back what it wrote) and
// summarizes it as read_table.py does.
func readIcebergGo(t *testing.T, ctx context.Context, cat *iceberg.Catalog, topic string, typed []string) readerSummary {
	t.Helper()
	started := time.Now()
	tbl, err := cat.Catalog().LoadTable(ctx, table.Identifier{"public", "default", topic})
	if err != nil {
		t.Fatalf("iceberg-go load %s: %v", topic, err)
	}
	at, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		t.Fatalf("iceberg-go scan %s: %v", topic, err)
	}
	defer at.Release()
	s := readerSummary{Reader: "iceberg-go", Rows: at.NumRows(), Partitions: map[string]int64{}}
	s.Typed = map[string]struct {
		NonNull int64    `json:"non_null"`
		Sum     *float64 `json:"sum"`
	}{}
	col := func(name string) *arrow.Chunked {
		idx := at.Schema().FieldIndices(name)
		if len(idx) == 0 {
			t.Fatalf("iceberg-go %s: no column %s", topic, name)
		}
		return at.Column(idx[0]).Data()
	}
	var d payloadDigest
	for _, c := range col("__payload").Chunks() {
		b := c.(*array.Binary)
		for i := range b.Len() {
			d.add(b.Value(i))
		}
	}
	s.Digest = d.hex()
	for _, c := range col("__partition").Chunks() {
		p := c.(*array.Int32)
		for i := range p.Len() {
			s.Partitions[strconv.Itoa(int(p.Value(i)))]++
		}
	}
	for _, name := range typed {
		var nonNull int64
		var sum float64
		numeric := false
		for _, c := range col(name).Chunks() {
			nonNull += int64(c.Len() - c.NullN())
			for i := range c.Len() {
				if c.IsNull(i) {
					continue
				}
				switch v := c.(type) {
				case *array.Int64:
					sum, numeric = sum+float64(v.Value(i)), true
				case *array.Float64:
					sum, numeric = sum+v.Value(i), true
				}
			}
		}
		e := s.Typed[name]
		e.NonNull = nonNull
		if numeric {
			e.Sum = &sum
		}
		s.Typed[name] = e
	}
	t.Logf("iceberg-go read %s: %d rows in %v", topic, s.Rows, time.Since(started).Round(time.Millisecond))
	return s
}

// msgKey is a message's id as a map key.
func msgKey(m pulsar.Message) string {
	id := m.ID()
	return fmt.Sprintf("%d:%d:%d:%d", id.PartitionIdx(), id.LedgerID(), id.EntryID(), id.BatchIdx())
}

// msgFingerprint is what a consumer sees of a message, besides its id.
func msgFingerprint(m pulsar.Message) string {
	h := sha256.Sum256(m.Payload())
	return fmt.Sprintf("%x|%s|%v|%d", h[:8], m.Key(), m.Properties(), m.EventTime().UnixMicro())
}

// waitNoWAL polls until no WAL object is left under dir.
func waitNoWAL(t *testing.T, ctx context.Context, dir string) {
	t.Helper()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		files := 0
		err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files++
			}
			return err
		})
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if files == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d WAL objects left under %s after compaction and GC", files, dir)
		case <-tick.C:
		}
	}
}

// lastLine returns the last non-empty line of b.
func lastLine(b []byte) []byte {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return []byte(lines[len(lines)-1])
}
