// Package lakehouse turns log entries into tables: Arrow encoding of decoded
// Pulsar messages, Parquet files (zstd, µs UTC timestamps, field ids), the
// Delta Lake log writer, Iceberg commits and table scans. It knows nothing of
// sockets or actors.
package lakehouse
