// Package iceberg commits lakegate's compacted Parquet files to Apache
// Iceberg tables, through an Iceberg catalog (apache/iceberg-go): an
// embedded SQL catalog on a sqlite file by default, or a REST catalog.
//
// It owns: opening the catalog (Open), mapping object-store URLs to Iceberg
// locations and FileIO properties (StoreLocation), the table's schema and
// partition spec (Schema, Spec), and the idempotent commit of existing data
// files (Catalog.Commit). The format — identifier, location, field ids,
// partition spec, the lakegate.log.<id>.end table property — is specified in
// docs/iceberg.md.
//
// It must not write data files: the Parquet files are written once by the
// table layer's compaction (tables/compact.go) and shared with the Delta table
// (lakehouse/delta). It never deletes files either. It knows tables and
// files, not logs' offsets beyond the numbers it is given.
package iceberg
