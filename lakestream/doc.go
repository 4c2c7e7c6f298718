// Package lakestream is the contract between lakegate's Pulsar-facing layers
// (gateway, actors) and the storage beneath them (the engine, and the table
// layer behind Stream.Table()). It holds Go
// interfaces and value types only — no implementation — mirroring the public
// Lakestream API (Java package io.lakestream.api) with Go conventions:
// context first, (T, error) instead of futures, []byte payloads, sentinel
// errors.
//
// The API has three levels:
//
//   - Level 0, Log and LogCursor: an append-only sequence of records. An
//     entry (one producer SEND, e.g. a Pulsar batch of N messages) occupies N
//     consecutive record offsets and is never split. Cursors remember what a
//     subscription has consumed: a mark-delete offset (every record at or
//     below it is acknowledged) plus individually acknowledged records above
//     it.
//   - Level 1, LogStorage: the same operations addressed by LogID, plus
//     hard trims, deletes and prefetch. Logs are not created here; their ids
//     come from a stream's layout.
//   - Level 2, StreamCatalog: namespaces, streams (a named set of
//     partitions, each one log), schemas, properties, table catalogs and the
//     materialization policy that turns a stream into Delta/Iceberg tables,
//     and the data-plane handles StreamWriter and StreamReader.
//
// The ergonomic entry point (the lakegate:// scheme is registered by
// importing package node):
//
//	cat, err := lakestream.Open(ctx, "lakegate:///tmp/d", nil)
//	s, err := cat.Stream(ctx, lakestream.MustParseStreamID("public/orders"))
//	res, err := s.NewWriter().Append(ctx, lakestream.ByKey("k"), 1, payload)
//	rows, err := s.Table().Scan(ctx)
//
// Offsets are int64 record counts starting at 0. Ranges are half-open
// [start, end) unless a name says "inclusive". Payload slices passed in are
// copied by the implementation before the call returns unless a method says
// otherwise; payload slices returned are owned by the caller and must not be
// assumed to be shared with anything.
//
// The big interfaces are made of facets, smaller interfaces embedded in
// them, so that a caller takes only the part it uses: Log is LogAppender,
// LogReader, LogControl and LogCursors; LogCursor is CursorPosition,
// CursorReader and CursorAcker (with Delete and Close); StreamCatalog is
// TableCatalogs, Namespaces, StreamMetadataStore and StreamData.
//
// Beside the API, lakegate's extensions that both sides of the contract
// share: cluster membership and ownership (cluster.go); the trim floor,
// the one rule of how far a log may be trimmed, used by Pulsar retention
// and by table retention, with the broker's internal cursor names it
// depends on (trim.go); and the table materialization job that the
// broker's worker schedules and the table layer runs (materialize.go).
//
// Implementations register themselves by URI scheme with Register; Open picks
// the one named by the URI. This package must not import any implementation.
//
// Files:
//
//	log.go          level 0: Log, LogCursor, their facets and options
//	storage.go      level 1: LogStorage
//	catalog.go      level 2: StreamCatalog, its facets, streams, tables
//	cluster.go      membership, ownership and guards
//	trim.go         the trim floor (TrimHolds, TrimFloor), internal cursors
//	materialize.go  the materialization job (Materializer)
//	errors.go       sentinel errors
//	open.go         Register and Open by URI scheme
package lakestream
