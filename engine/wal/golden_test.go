package wal

// The golden file pins format version 1 byte for byte, in both directions:
// the Builder must produce exactly these bytes, and the decoders must read
// them. After an intended format change (and a version bump):
//
//	go test ./engine/wal/ -run TestGolden -update

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

const goldenPath = "testdata/tiny.golden"

// annotate renders an object as an annotated hex dump: one field per line,
// "offset  hex bytes  | field = value", long payloads split every 16 bytes.
// It walks the layout of docs/wal-format.md on its own, reading the raw bytes
// rather than trusting the decoders.
func annotate(obj []byte) string {
	var sb strings.Builder
	pos := 0
	field := func(n int, format string, args ...any) {
		fmt.Fprintf(&sb, "%04x  %-48s| %s\n", pos, hexBytes(obj[pos:pos+n]), fmt.Sprintf(format, args...))
		pos += n
	}
	u16 := func(at int) uint16 { return le.Uint16(obj[at:]) }
	u32 := func(at int) uint32 { return le.Uint32(obj[at:]) }
	i64 := func(at int) int64 { return int64(le.Uint64(obj[at:])) }

	sb.WriteString("# WAL object, format version 1 (docs/wal-format.md); little-endian.\n")
	sb.WriteString("# Regenerate: go test ./engine/wal/ -run TestGolden -update\n")
	sb.WriteString("# offset bytes                                        | field\n")
	sb.WriteString("# --- object header ---\n")
	field(8, "magic %q", obj[pos:pos+8])
	field(2, "version %d", u16(pos))
	field(2, "flags %#04x", u16(pos))
	n := int(u32(pos))
	field(4, "chunkCount %d", n)
	field(8, "writeTimeMs %d", i64(pos))
	for i := range n {
		fmt.Fprintf(&sb, "# --- chunk directory record %d ---\n", i)
		field(8, "log %d", i64(pos))
		field(8, "offset %d", i64(pos))
		field(8, "length %d", i64(pos))
		field(4, "entries %d", u32(pos))
		field(4, "records %d", u32(pos))
		field(8, "payloadBytes %d", i64(pos))
		field(8, "minPublishTimeMs %d", i64(pos))
		field(8, "maxPublishTimeMs %d", i64(pos))
		field(4, "crc %08x", u32(pos))
		field(4, "reserved")
	}
	field(4, "header+directory crc32c %08x", u32(pos))
	for i := range n {
		fmt.Fprintf(&sb, "# --- chunk %d ---\n", i)
		field(4, "chunk magic %q", obj[pos:pos+4])
		field(2, "version %d", u16(pos))
		field(2, "flags %#04x", u16(pos))
		field(8, "log %d", i64(pos))
		m := int(u32(pos))
		field(4, "entryCount %d", m)
		field(4, "recordCount %d", u32(pos))
		field(8, "writeTimeMs %d", i64(pos))
		sizes := make([]int, m)
		for j := range m {
			field(4, "entry %d records %d", j, u32(pos))
			sizes[j] = int(u32(pos))
			field(4, "entry %d payloadLength %d", j, sizes[j])
			field(8, "entry %d publishTimeMs %d", j, i64(pos))
		}
		field(4, "prefix crc32c %08x", u32(pos))
		for j, size := range sizes {
			if size == 0 {
				fmt.Fprintf(&sb, "# entry %d payload: empty\n", j)
			}
			for k := 0; k < size; k += 16 {
				w := min(16, size-k)
				field(w, "entry %d payload %q", j, obj[pos:pos+w])
			}
		}
		field(4, "chunk crc32c (trailer) %08x", u32(pos))
	}
	if pos != len(obj) {
		fmt.Fprintf(&sb, "# %d unexpected trailing bytes\n", len(obj)-pos)
	}
	return sb.String()
}

func hexBytes(b []byte) string {
	parts := make([]string, len(b))
	for i, c := range b {
		parts[i] = hex.EncodeToString([]byte{c})
	}
	return strings.Join(parts, " ")
}

// parseGolden reads the bytes back from an annotated dump.
func parseGolden(t *testing.T, text string) []byte {
	t.Helper()
	var out []byte
	for ln, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		data, _, ok := strings.Cut(line, "|")
		fields := strings.Fields(data)
		if !ok || len(fields) < 2 {
			t.Fatalf("%s:%d: malformed line %q", goldenPath, ln+1, line)
		}
		if off, err := strconv.ParseUint(fields[0], 16, 64); err != nil || int(off) != len(out) {
			t.Fatalf("%s:%d: offset %q, expected %04x", goldenPath, ln+1, fields[0], len(out))
		}
		for _, h := range fields[1:] {
			b, err := hex.DecodeString(h)
			if err != nil || len(b) != 1 {
				t.Fatalf("%s:%d: bad byte %q", goldenPath, ln+1, h)
			}
			out = append(out, b[0])
		}
	}
	return out
}

func TestGolden(t *testing.T) {
	obj, refs := tinyObject()
	got := annotate(obj)
	if *update {
		if err := os.MkdirAll(filepath.Dir(goldenPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenPath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("Builder output differs from %s (format change? bump the version, then -update):\n--- got\n%s", goldenPath, got)
	}

	// The stored bytes decode, whatever the Builder does today.
	stored := parseGolden(t, string(want))
	if !bytes.Equal(stored, obj) {
		t.Errorf("bytes in %s differ from the Builder's", goldenPath)
	}
	checkObject(t, stored, refs, model{
		7: {
			{Records: 3, PublishTimeMs: 1_700_000_000_001, Payload: []byte("hello")},
			{Records: 1, PublishTimeMs: 1_699_999_999_999, Payload: []byte{}},
		},
		3: {{Records: 1, PublishTimeMs: 1_700_000_000_000, Payload: []byte("pulsar!")}},
	}, 1_700_000_000_123)
}
