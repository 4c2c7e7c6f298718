package catalog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/lakegate/lakegate/lakestream"
)

// Reference vectors of MurmurHash3 x86_32, seed 0.
func TestMurmur3Vectors(t *testing.T) {
	for _, v := range []struct {
		in   string
		want uint32
	}{
		{"", 0x00000000},
		{"a", 0x3c2569b2},
		{"ab", 0x9bbfd75f},
		{"abc", 0xb3dd93fa},
		{"abcd", 0x43ed676a},
		{"hello", 0x248bfa47},
		{"test", 0xba6bd213},
		{"Hello, world!", 0xc0363e43},
		{"The quick brown fox jumps over the lazy dog", 0x2e4ff723},
		{"日本語", 0xa5a47297},
	} {
		if got := Murmur3Sum32([]byte(v.in)); got != v.want {
			t.Errorf("Murmur3Sum32(%q) = %#08x, want %#08x", v.in, got, v.want)
		}
	}
}

// The Pulsar Go client's own vectors for Murmur3_32Hash (31-bit masked;
// pulsar-client-go pulsar/internal/hash_test.go) fix the key→partition map.
func TestPartitionForKeyMatchesPulsar(t *testing.T) {
	for _, v := range []struct {
		key  string
		hash uint32
	}{{"", 0x0}, {"hello", 0x248bfa47}, {"test", 0x3a6bd213}} {
		for _, n := range []int{1, 2, 3, 7, 16, 100} {
			if got, want := PartitionForKey(v.key, n), int(v.hash%uint32(n)); got != want {
				t.Errorf("PartitionForKey(%q, %d) = %d, want %d", v.key, n, got, want)
			}
		}
	}
}

func TestKeyRoutingDistribution(t *testing.T) {
	const (
		partitions = 8
		keys       = 80_000
	)
	var counts [partitions]int
	l := newLayout(lakestream.Partitioning{NumPartitions: partitions}, []lakestream.LogID{1, 2, 3, 4, 5, 6, 7, 8})
	for i := range keys {
		k := fmt.Sprintf("key-%d", i)
		p := l.ResolveForWrite(lakestream.ByKey(k))
		if p2 := l.ResolveForWrite(lakestream.ByKey(k)); p2 != p {
			t.Fatalf("key %q routed to %d then %d", k, p, p2)
		}
		counts[p]++
	}
	for p, n := range counts {
		// Expected 10000 each; ±5% is ~15 standard deviations.
		if n < keys/partitions*95/100 || n > keys/partitions*105/100 {
			t.Fatalf("partition %d got %d of %d keys: %v", p, n, keys, counts)
		}
	}
}

func TestRoundRobinAndExplicitRouting(t *testing.T) {
	l := newLayout(lakestream.Partitioning{NumPartitions: 3}, []lakestream.LogID{10, 11, 12})
	var got []int
	for range 6 {
		got = append(got, l.ResolveForWrite(lakestream.RoutingKey{}))
	}
	if fmt.Sprint(got) != "[0 1 2 0 1 2]" {
		t.Fatalf("round robin = %v", got)
	}
	if p := l.ResolveForWrite(lakestream.ToPartition(2)); p != 2 {
		t.Fatalf("explicit = %d", p)
	}
	single := newLayout(lakestream.Partitioning{}, []lakestream.LogID{9})
	for _, k := range []lakestream.RoutingKey{{}, lakestream.ByKey("k"), lakestream.ToPartition(0), lakestream.ToPartition(-1)} {
		if p := single.ResolveForWrite(k); p != 0 {
			t.Fatalf("non-partitioned %+v → %d", k, p)
		}
	}
	if single.LogCount() != 1 || single.Partitioning().NumPartitions != 0 {
		t.Fatalf("non-partitioned layout %+v", single)
	}

	// Concurrent round-robin spreads evenly.
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[int]int{}
	for range 3 {
		wg.Go(func() {
			for range 300 {
				p := l.ResolveForWrite(lakestream.RoutingKey{})
				mu.Lock()
				counts[p]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if counts[0] != 300 || counts[1] != 300 || counts[2] != 300 {
		t.Fatalf("concurrent round robin = %v", counts)
	}
}

func testWriterReaderRoundTrip(t *testing.T, mk storeFactory) {
	ctx := context.Background()
	f := newFixture(t, mk)
	c := f.cat
	mustNS(t, c, "public/default")
	md := mustStream(t, c, "public/default/orders", 4)

	s, err := c.Stream(ctx, md.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s.Layout().LogCount() != 4 || fmt.Sprint(s.Layout().LogIDs()) != fmt.Sprint(md.LogIDs) {
		t.Fatalf("layout %v", s.Layout().LogIDs())
	}
	w := s.NewWriter()
	want := map[lakestream.LogID][]string{}
	for i := range 20 {
		payload := fmt.Sprintf("msg-%d", i)
		res, err := w.Append(ctx, lakestream.ByKey(fmt.Sprintf("k%d", i%5)), 2, []byte(payload), lakestream.WithPublishTime(int64(1000+i)))
		if err != nil {
			t.Fatal(err)
		}
		if res.Partition != PartitionForKey(fmt.Sprintf("k%d", i%5), 4) || res.LogID != md.LogIDs[res.Partition] ||
			res.Header.Records != 2 || res.Header.PublishTimeMs != int64(1000+i) {
			t.Fatalf("write %d = %+v", i, res)
		}
		want[res.LogID] = append(want[res.LogID], payload)
	}
	res, err := w.Write(ctx, lakestream.ToPartition(3), 1, []byte("explicit"))
	if err != nil || res.Partition != 3 {
		t.Fatalf("explicit write = %+v, %v", res, err)
	}
	want[md.LogIDs[3]] = append(want[md.LogIDs[3]], "explicit")
	_, err = w.Write(ctx, lakestream.ToPartition(4), 1, []byte("x"))
	wantErr(t, err, lakestream.ErrInvalidArgument)

	r := s.NewReader()
	for _, l := range md.LogIDs {
		var got []string
		next := int64(0)
		for {
			rr, err := r.Read(ctx, l, next, 3, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if len(rr.Entries) == 0 {
				if rr.NextOffset != next {
					t.Fatalf("empty read moved NextOffset %d → %d", next, rr.NextOffset)
				}
				break
			}
			if rr.NextOffset != rr.Entries[len(rr.Entries)-1].End() {
				t.Fatalf("NextOffset %d after entries ending at %d", rr.NextOffset, rr.Entries[len(rr.Entries)-1].End())
			}
			for _, e := range rr.Entries {
				got = append(got, string(e.Payload))
			}
			next = rr.NextOffset
		}
		if fmt.Sprint(got) != fmt.Sprint(want[l]) {
			t.Fatalf("log %d read %v, want %v", l, got, want[l])
		}
	}
	_, err = r.Read(ctx, 999, 0, 1, 1)
	wantErr(t, err, lakestream.ErrNoSuchLog)

	lg, err := s.Log(ctx, 2)
	if err != nil || lg.ID() != md.LogIDs[2] {
		t.Fatalf("Log(2) = %v, %v", lg, err)
	}
	_, err = s.Log(ctx, 4)
	wantErr(t, err, lakestream.ErrInvalidArgument)
	lg, err = c.OpenLog(ctx, md.ID, 1)
	if err != nil || lg.ID() != md.LogIDs[1] {
		t.Fatalf("OpenLog(1) = %v, %v", lg, err)
	}

	// OpenWriter / OpenReader on a non-partitioned stream: one log.
	single := mustStream(t, c, "public/default/single", 0)
	ow, err := c.OpenWriter(ctx, single.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []lakestream.RoutingKey{{}, lakestream.ByKey("x"), lakestream.ToPartition(-1)} {
		res, err := ow.Write(ctx, k, 1, []byte("p"))
		if err != nil || res.LogID != single.LogIDs[0] || res.Partition != 0 {
			t.Fatalf("single write %+v = %+v, %v", k, res, err)
		}
	}
	or, err := c.OpenReader(ctx, single.ID)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := or.Read(ctx, single.LogIDs[0], 1, 100, 1<<20)
	if err != nil || len(rr.Entries) != 2 || rr.Entries[0].Offset != 1 || rr.NextOffset != 3 {
		t.Fatalf("single read = %+v, %v", rr, err)
	}
	if lg, err := c.OpenLog(ctx, single.ID, -1); err != nil || lg.ID() != single.LogIDs[0] {
		t.Fatalf("OpenLog(-1) = %v, %v", lg, err)
	}
	if c.Storage() != f.logs {
		t.Fatal("Storage() is not the LogStorage given to New")
	}
}

func testStreamHandleIsASnapshot(t *testing.T, mk storeFactory) {
	ctx := context.Background()
	c := newFixture(t, mk).cat
	mustNS(t, c, "t/ns")
	md := mustStream(t, c, "t/ns/s", 2)
	s, err := c.Stream(ctx, md.ID)
	if err != nil {
		t.Fatal(err)
	}
	m := s.Metadata()
	m.LogIDs[0] = -1
	m.Properties["mutated"] = "yes"
	if s.Metadata().LogIDs[0] == -1 || s.Metadata().Properties["mutated"] != "" {
		t.Fatal("Metadata() shares state with the handle")
	}
	ids := s.Layout().LogIDs()
	ids[0] = -1
	if s.Layout().LogIDs()[0] == -1 {
		t.Fatal("LogIDs() shares state with the layout")
	}
	if _, err := c.IncreasePartitions(ctx, md.ID, 3); err != nil {
		t.Fatal(err)
	}
	if s.Layout().LogCount() != 2 {
		t.Fatal("open handle changed under IncreasePartitions")
	}
	s2, _ := c.Stream(ctx, md.ID)
	if s2.Layout().LogCount() != 3 {
		t.Fatal("re-opened handle does not see new partitions")
	}
}

type fakeTable struct{ md lakestream.StreamMetadata }

func (t fakeTable) Scan(context.Context) ([][]byte, error) {
	return [][]byte{[]byte(t.md.ID.String())}, nil
}

func (t fakeTable) Info(context.Context) (lakestream.TableInfo, error) {
	return lakestream.TableInfo{Location: t.md.ID.String()}, nil
}

func testTable(t *testing.T, mk storeFactory) {
	ctx := context.Background()
	f := newFixture(t, mk)
	mustNS(t, f.cat, "t/ns")
	md := mustStream(t, f.cat, "t/ns/s", 0)
	s, err := f.cat.Stream(ctx, md.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Table().Scan(ctx); !errors.Is(err, lakestream.ErrNotMaterialized) {
		t.Fatalf("Scan without provider = %v", err)
	}
	withTables := New(f.store, f.logs, Options{TableProvider: func(md lakestream.StreamMetadata) lakestream.Table { return fakeTable{md} }})
	s, err = withTables.Stream(ctx, md.ID)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.Table().Scan(ctx)
	if err != nil || len(rows) != 1 || string(rows[0]) != "t/ns/s" {
		t.Fatalf("Scan with provider = %q, %v", rows, err)
	}
}
