// Package iceberg commits lakegate's compacted Parquet files to Apache
// Iceberg tables, through an Iceberg catalog (apache/iceberg-go): an
// embedded SQL catalog on a sqlite file, a REST catalog, or lakegate's own
// catalog in the metadata store (KindLakegate, package metacat).
//
// It owns: opening the catalog (Open), mapping object-store URLs to Iceberg
// locations and FileIO properties (StoreLocation, ClientProps), the table's
// schema and partition spec (Schema, Spec), the idempotent commit of
// existing data files (Catalog.Commit), the bin-packing replace
// (Catalog.Replace), the removal of files from the table by retention
// (Catalog.RemoveFiles), the listing of the files a table references
// (DataFiles, LiveFiles) and snapshot expiry (Catalog.Expire). The format —
// identifier, location, field ids, partition spec, the
// lakegate.log.<id>.end table property — is specified in docs/iceberg.md.
//
// It must not write data files: the Parquet files are written once by the
// table layer (tables/compact.go, tables/repack.go) and shared with the
// Delta table (lakehouse/delta). It never deletes data files either:
// RemoveFiles drops them from the table's current snapshot only, and
// Expire deletes only the metadata files (manifests, manifest lists) that
// nothing but expired snapshots used. It knows tables and files, not logs'
// offsets beyond the numbers it is given.
//
// Files:
//
//	catalog.go   Catalog, CatalogConfig and the catalog kinds, Open,
//	             FileIOProps, the sentinel errors
//	location.go  StoreLocation and ClientProps: object-store URLs as
//	             Iceberg locations and FileIO properties
//	table.go     Schema, Spec, Commit (idempotent per log by
//	             LogEndProperty), RecordedEnd
//	replace.go   Replace (bin-packing), DataFiles, LiveFiles, RemoveFiles
//	maintain.go  Expire: snapshot expiry (docs/iceberg.md, "Maintenance")
package iceberg
