package e2e

// Nested columns end to end (docs/table-schema.md, "Nested columns"): a
// pulsar-client-go producer with an Avro schema whose record nests a
// record (two levels), an array of ints, an array of records, a
// map<string,long> and an optional record produces to the real binary;
// once compacted (short tables age), `lakegate table scan --format json`
// prints every message's nested values as JSON objects, arrays and map
// entries — typed struct, list and map columns, not JSON text — equal to
// what was sent, and a consumer with the same schema still receives every
// message as sent (now served from the Parquet files).
// Run: go test -count=1 -run TestTablesNestedAvro ./e2e/

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// nestedOrderSchema is the Avro definition of TestTablesNestedAvro's topic.
const nestedOrderSchema = `{"type":"record","name":"Order","namespace":"lakegate.e2e","fields":[
	{"name":"id","type":"long"},
	{"name":"customer","type":{"type":"record","name":"Customer","fields":[
		{"name":"name","type":"string"},
		{"name":"address","type":{"type":"record","name":"Address","fields":[
			{"name":"city","type":"string"},{"name":"zip","type":"int"}]}}]}},
	{"name":"quantities","type":{"type":"array","items":"int"}},
	{"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line","fields":[
		{"name":"sku","type":"string"},{"name":"qty","type":"int"}]}}},
	{"name":"counters","type":{"type":"map","values":"long"}},
	{"name":"gift","type":["null",{"type":"record","name":"Gift","fields":[{"name":"message","type":"string"}]}],"default":null}]}`

// nestedOrder is a message of nestedOrderSchema; the json tags are the
// table's column and field names, as the JSON scan prints them.
type nestedOrder struct {
	ID         int64            `avro:"id" json:"id"`
	Customer   nestedCustomer   `avro:"customer" json:"customer"`
	Quantities []int32          `avro:"quantities" json:"quantities"`
	Lines      []nestedLine     `avro:"lines" json:"lines"`
	Counters   map[string]int64 `avro:"counters" json:"-"`
	Gift       *nestedGift      `avro:"gift" json:"gift"`
}

type nestedCustomer struct {
	Name    string        `avro:"name" json:"name"`
	Address nestedAddress `avro:"address" json:"address"`
}

type nestedAddress struct {
	City string `avro:"city" json:"city"`
	Zip  int32  `avro:"zip" json:"zip"`
}

type nestedLine struct {
	SKU string `avro:"sku" json:"sku"`
	Qty int32  `avro:"qty" json:"qty"`
}

type nestedGift struct {
	Message string `avro:"message" json:"message"`
}

// makeNestedOrder is message i: empty and several-element lists and maps,
// a gift on every third.
func makeNestedOrder(i int) nestedOrder {
	o := nestedOrder{
		ID: int64(i),
		Customer: nestedCustomer{Name: "customer-" + strconv.Itoa(i%7),
			Address: nestedAddress{City: "city-" + strconv.Itoa(i%5), Zip: int32(10000 + i)}},
		Quantities: []int32{},
		Lines:      []nestedLine{},
		Counters:   map[string]int64{},
	}
	for k := range i % 4 {
		o.Quantities = append(o.Quantities, int32(i*10+k))
		o.Lines = append(o.Lines, nestedLine{SKU: fmt.Sprintf("sku-%d-%d", i, k), Qty: int32(k + 1)})
		o.Counters["c"+strconv.Itoa(k)] = int64(i)<<32 + int64(k)
	}
	if i%3 == 0 {
		o.Gift = &nestedGift{Message: "for order " + strconv.Itoa(i)}
	}
	return o
}

func TestTablesNestedAvro(t *testing.T) {
	bin := lakegateBinary(t)
	dir := t.TempDir()
	node := startLakegate(t, bin, dir, "--tables-age", "300ms", "--tables-interval", "100ms", "--tables-scan-interval", "200ms")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const topic = "persistent://public/default/nested_orders"
	cl := binClient(t, node.pulsarURL)
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: topic, Schema: pulsar.NewAvroSchema(nestedOrderSchema, nil),
		BatchingMaxMessages: 20, BatchingMaxPublishDelay: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const n = 200
	sent := make([]nestedOrder, n)
	msgs := make([]*pulsar.ProducerMessage, n)
	for i := range n {
		sent[i] = makeNestedOrder(i)
		msgs[i] = &pulsar.ProducerMessage{Value: sent[i]}
	}
	sendAllAsync(t, ctx, p, msgs)
	waitForTable(t, ctx, node.httpURL, "public/default/nested_orders", n, "DELTA", "ICEBERG")

	// The table, read from the object store by the CLI.
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "table", "scan", "--data-dir", dir, "--format", "json", "nested_orders")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("table scan: %v\n%s", err, stderr.String())
	}
	seen := make([]bool, n)
	rows := 0
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		// The nested columns must be JSON structure: a string (JSON
		// text in a string column) does not unmarshal into these.
		var row struct {
			nestedOrder
			Counters []struct {
				Key   string `json:"key"`
				Value int64  `json:"value"`
			} `json:"counters"`
		}
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		if err := dec.Decode(&row); err != nil {
			t.Fatalf("row %d: %v: %s", rows, err, sc.Text())
		}
		rows++
		got := row.nestedOrder
		if got.ID < 0 || got.ID >= n || seen[got.ID] {
			t.Fatalf("row %d: id %d (out of range or twice): %s", rows, got.ID, sc.Text())
		}
		seen[got.ID] = true
		got.Counters = map[string]int64{}
		for _, kv := range row.Counters {
			got.Counters[kv.Key] = kv.Value
		}
		if want := sent[got.ID]; !reflect.DeepEqual(got, want) {
			t.Fatalf("message %d in the table:\n got %+v\nwant %+v\nrow %s", got.ID, got, want, sc.Text())
		}
		if rows == 4 {
			t.Logf("a row: %s", sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if rows != n {
		t.Fatalf("table scan printed %d rows, want %d", rows, n)
	}

	// A consumer with the schema receives every message as sent.
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "after-compaction",
		Schema: pulsar.NewAvroSchema(nestedOrderSchema, nil), SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for i := range n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got nestedOrder
		if err := m.GetSchemaValue(&got); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, sent[i]) {
			t.Fatalf("message %d received:\n got %+v\nwant %+v", i, got, sent[i])
		}
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
}
