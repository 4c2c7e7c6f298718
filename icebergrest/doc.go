// Package icebergrest serves an Iceberg catalog over the Apache Iceberg
// REST catalog API (the OpenAPI spec of apache/iceberg
// open-api/rest-catalog-open-api.yaml): config, OAuth2 client-credentials
// tokens, namespaces, tables (create, stage-create, register, load,
// commit with requirements and updates, drop, rename), per-table storage
// credentials and metrics reports. Behind it is any iceberg-go
// catalog.Catalog; lakegate puts its metadata-store catalog (metacat)
// there, so every node serves the same catalog and commits are
// linearizable (docs/iceberg-catalog.md). Views, multi-table transactions
// and server-side scan planning are not served (not advertised in
// /v1/config, so clients do not call them).
//
// It is a read/commit path for lakegate's tables, not a file-writing
// service: clients' locations stay inside the warehouse, their storage
// properties are dropped, the streams' identifiers are reserved
// (policy.go); an Authorizer decides who reads and writes what, and
// without one the catalog is read-only unless Options.AllowWrites
// (access.go).
//
// It imports iceberg-go and metacat (for its sentinel errors) only:
// nothing of the engine or the table layer.
//
// Files:
//
//	server.go  Handler, Options, Stager: the routes of the REST API over a
//	           catalog.Catalog, metrics reports, storage credentials
//	auth.go    Auth: OAuth2 client credentials exchanged at
//	           POST /v1/oauth/tokens, other bearer tokens by a Verify function
//	access.go  Authorizer: who may read and write what
//	policy.go  the storage policy: locations inside the warehouse, storage
//	           properties dropped, the streams' identifiers reserved
package icebergrest
