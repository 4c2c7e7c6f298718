// Package objstore is lakegate's boundary to object storage — the ground
// floor that the engine, the table layer (tables) and the Delta log writer
// (lakehouse/delta) all use: the Store
// interface (whole-object put, atomic put-if-absent, ranged get, delete,
// ordered listing) and its implementation over gocloud.dev/blob URLs.
//
// # What it owns
//
//   - Store, its sentinel errors (ErrNotFound, ErrExists, ErrInvalid,
//     ErrClosed) and the key rules (ValidKey), identical on every backend.
//   - Open: mem://, file://, s3://, gs://, azblob:// (see docs/storage.md for
//     URL forms, credentials and what conditional create means on each).
//   - The file:// write path (file.go): put-if-absent by link(2) (of an
//     O_TMPFILE file on Linux, file_linux.go), atomic
//     across processes, with fsync of data and directories; fileblob's own
//     IfNotExist is check-then-rename and is not used.
//   - Appender (append.go): file:// objects written by appends, each
//     durable when it returns, with one create per object rather than per
//     write (docs/storage.md, "Appended objects").
//   - Instrument: counters of operations, errors and bytes (Stats), read by
//     the metrics exporter.
//   - NewFaulty: a wrapper for tests that injects failures before an
//     operation, lost replies after it (the ambiguous PUT), random faults
//     from a seed, and a hook to hold operations in flight without sleeping.
//   - objstoretest: the acceptance suite every backend passes.
//
// # What it must not touch
//
// Object names, formats and layout (WAL objects, Parquet files, Delta and
// Iceberg metadata) belong to the packages that write them (engine/wal,
// tables, lakehouse/delta, lakehouse/iceberg); this
// package moves opaque bytes under opaque keys. It knows nothing of etcd,
// offsets or topics, and it does not retry: a failed call is reported, and
// after a failed Put or PutIfAbsent the outcome is unknown (the caller
// decides, e.g. by reading back or by writing under a new unique name).
//
// # Concurrency
//
// Every Store in this package is safe for concurrent use. PutIfAbsent is the
// one primitive with a cross-writer guarantee: of racing creators of one key
// exactly one succeeds and the object is its data, whole. Put is last writer
// wins, whole objects only. Delete and List give no atomicity beyond the
// single object.
//
// Files:
//
//	store.go       the Store interface, ObjectInfo, the sentinel errors
//	keys.go        ValidKey: the key rules every backend enforces
//	blob.go        Open: the gocloud.dev/blob backends (mem, file, s3, gs,
//	               azblob), S3 uploads cut into parts for large objects
//	file.go        the file:// write path: put-if-absent by link(2), fsync
//	               of data and directories
//	file_linux.go  O_TMPFILE files linked into place, fdatasync (Linux)
//	file_other.go  the same without O_TMPFILE (other systems)
//	append.go      Appender: file:// objects written by appends
//	metrics.go     Instrument: operation, error and byte counters (Stats)
//	faulty.go      NewFaulty: fault injection for tests (Op, Hook,
//	               ErrInjected)
package objstore
