// Package protocol is lakegate's codec for the Apache Pulsar binary protocol
// (version 21): frames and their CRC32C, the entry (the byte-exact unit a
// SEND carries and the gateway stores), batches, payload compression,
// message ids, and constructors for the commands the gateway sends.
//
// It is pure code: no sockets, goroutines, clocks or storage. Callers (the
// gateway's sessions, the partition and subscription actors, topic
// compaction, the table layer's decoder in lakehouse) hand it
// bytes and get bytes or values back. Decoders never panic on any input and
// never allocate from a length they have not first checked against a limit;
// each is fuzzed (fuzz_test.go: frames, batches, decompression, record
// keys).
//
// What it owns:
//   - pb/pulsar_api.proto and its generated code (package pb), wire-compatible
//     with Pulsar's PulsarApi.proto; regenerate with protocol/gen.sh.
//   - The frame layout, the definition of an entry, and the mapping from
//     Pulsar message ids to log offsets, all specified in docs/protocol.md.
//
// What it must not do: know about topics, subscriptions, sessions, storage
// or the Lakestream API; map engine errors to ServerError codes (the gateway
// does that, in one place); log.
//
// Ownership: decoded frames and split batches alias the caller's buffer;
// nothing here retains or reuses a buffer after returning. Errors are the
// sentinels ErrFrameTooLarge, ErrChecksum, ErrMalformed, ErrUnknownCommand,
// ErrCompressionUnsupported, ErrUncompressedTooLarge and
// ErrCorruptCompressed, wrapped with detail: test with errors.Is. All
// functions are safe for concurrent use.
//
// Files:
//
//	frame.go      frames (ReadFrame, DecodeFrame, the CRC32C Checksum) and
//	              the entry (SplitEntry, AppendEntry); the frame errors
//	batch.go      batches: record counts (EntryRecords), SplitBatch,
//	              building batches, the record keys topic compaction reads
//	              (EntryRecordKeys), SingleFromBatch
//	compress.go   payload compression (Compress, Decompress: LZ4, ZLIB,
//	              ZSTD, SNAPPY) within a size limit
//	messageid.go  MessageID ↔ log offsets (docs/message-ids.md), ack sets
//	commands.go   constructors of the commands the gateway sends
//	gen.sh        regenerates pb/pulsar_api.pb.go (pinned protoc-gen-go)
package protocol
