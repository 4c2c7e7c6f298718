package main

import (
	"context"
	"log"
	"log/slog"
	"strings"
)

// libraryLog carries what dependencies print with the standard library's
// log package (iceberg-go does) into slog at INFO, with one message known to
// be expected demoted to DEBUG: after each of its own table commits
// iceberg-go deletes the old metadata files the commit dropped, and
// lakegate's Iceberg catalog has deleted them already (a catalog does that
// after every commit, for REST clients too), so iceberg-go's "Failed to
// delete old metadata file … not found" says nothing an operator can act on.
type libraryLog struct{ l *slog.Logger }

func (w libraryLog) Write(p []byte) (int, error) {
	msg := strings.TrimRight(string(p), "\n")
	level := slog.LevelInfo
	if strings.HasPrefix(msg, "Warning: Failed to delete old metadata file") && notFound(msg) {
		level = slog.LevelDebug
	}
	w.l.Log(context.Background(), level, msg)
	return len(p), nil
}

// notFound: the error text of a delete of a missing object, on a file
// system or through gocloud.dev/blob.
func notFound(msg string) bool {
	return strings.Contains(msg, "no such file or directory") || strings.Contains(msg, "code=NotFound")
}

// routeLibraryLog sends the standard logger's output to l.
func routeLibraryLog(l *slog.Logger) {
	log.SetFlags(0)
	log.SetOutput(libraryLog{l})
}
