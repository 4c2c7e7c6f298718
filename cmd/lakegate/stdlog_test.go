package main

import (
	"bytes"
	"log"
	"log/slog"
	"os"
	"strings"
	"testing"
)

// What iceberg-go prints when lakegate's catalog already deleted an old
// metadata file goes to DEBUG; any other line of the standard logger,
// including that warning with another cause, stays at INFO.
func TestLibraryLog(t *testing.T) {
	var buf bytes.Buffer
	routeLibraryLog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	t.Cleanup(func() { log.SetOutput(os.Stderr); log.SetFlags(log.LstdFlags) })
	log.Printf("Warning: Failed to delete old metadata file: /d/t/metadata/00001-a.metadata.json error: remove /d/t/metadata/00001-a.metadata.json: no such file or directory")
	log.Printf("Warning: Failed to delete old metadata file: s3://b/t/metadata/00002-b.metadata.json error: blob (key \"t/metadata/00002-b.metadata.json\") (code=NotFound): not found")
	log.Printf("Warning: Failed to delete old metadata file: /d/t/metadata/00003-c.metadata.json error: permission denied")
	log.Printf("something else")
	out := buf.String()
	if strings.Contains(out, "00001-a") || strings.Contains(out, "00002-b") {
		t.Errorf("a delete of an already deleted file was logged at INFO:\n%s", out)
	}
	for _, want := range []string{"level=INFO msg=\"Warning: Failed to delete old metadata file: /d/t/metadata/00003-c", "level=INFO msg=\"something else\""} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}
