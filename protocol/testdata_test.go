package protocol

import (
	"bufio"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

// Frame files in testdata/ hold one frame per record:
//
//	# comment
//	frame <name> [key=value ...]
//	<hex, 32 bytes a line>
//	end
//
// client_frames.txt is captured from pulsar-client-go's encoder
// (testdata/crosscheck.sh -capture); server_frames.txt is lakegate's encoder
// output for the gateway's commands, rewritten by `go test -run
// TestServerFramesGolden ./protocol/ -update`.

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

type namedFrame struct {
	name  string
	attrs map[string]string
	raw   []byte
}

func readFrameFile(t testing.TB, path string) []namedFrame {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		out []namedFrame
		cur *namedFrame
		hx  strings.Builder
	)
	sc := bufio.NewScanner(f)
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "frame "):
			fields := strings.Fields(line)
			cur = &namedFrame{name: fields[1], attrs: map[string]string{}}
			for _, kv := range fields[2:] {
				k, v, _ := strings.Cut(kv, "=")
				cur.attrs[k] = v
			}
			hx.Reset()
		case line == "end":
			if cur == nil {
				t.Fatalf("%s:%d: end without frame", path, ln)
			}
			b, err := hex.DecodeString(hx.String())
			if err != nil {
				t.Fatalf("%s:%d: %s: %v", path, ln, cur.name, err)
			}
			cur.raw = b
			out = append(out, *cur)
			cur = nil
		default:
			if cur == nil {
				t.Fatalf("%s:%d: hex outside a frame", path, ln)
			}
			hx.WriteString(line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func formatFrameFile(header string, frames []namedFrame) []byte {
	var sb strings.Builder
	sb.WriteString(header)
	for _, f := range frames {
		fmt.Fprintf(&sb, "\nframe %s", f.name)
		for _, k := range []string{"type", "compression", "messages"} {
			if v, ok := f.attrs[k]; ok {
				fmt.Fprintf(&sb, " %s=%s", k, v)
			}
		}
		sb.WriteString("\n")
		for b := f.raw; len(b) > 0; {
			n := min(32, len(b))
			sb.WriteString(hex.EncodeToString(b[:n]))
			sb.WriteString("\n")
			b = b[n:]
		}
		sb.WriteString("end\n")
	}
	return []byte(sb.String())
}
