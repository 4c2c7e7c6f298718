package iceberg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"

	"github.com/lakegate/lakegate/lakehouse/iceberg/metacat"
	"github.com/lakegate/lakegate/meta"
	_ "modernc.org/sqlite" // pure-Go "sqlite" driver: CGO_ENABLED=0 builds keep the SQL catalog
)

// Catalog kinds (CatalogConfig.Kind).
const (
	// KindSQL is the embedded SQL catalog on a sqlite file (the JDBC
	// catalog's tables, so pyiceberg's SqlCatalog and Spark's JdbcCatalog
	// open it too).
	KindSQL = "sql"
	// KindREST is an Iceberg REST catalog.
	KindREST = "rest"
	// KindLakegate is lakegate's own catalog, kept in the metadata store
	// (package metacat) and served over the Iceberg REST API by every node
	// (package icebergrest): the cluster's shared catalog.
	KindLakegate = "lakegate"
)

// WarehouseDir is the key prefix, in the node's object store, under which
// clients' tables live (user tables created through the REST API):
// <store>/warehouse/<namespace levels>/<table> by default, and never
// outside <store>/warehouse/<first level>/ (docs/iceberg-catalog.md).
const WarehouseDir = "warehouse"

// DefaultCatalogName is the catalog name used when CatalogConfig.Name is
// empty. The SQL catalog stores it in every row (catalog_name): a reader
// must open the catalog under the same name.
const DefaultCatalogName = "lakegate"

// sqlCreateMu serialises the creation of SQL catalogs in this process.
var sqlCreateMu sync.Mutex

// Errors. They surface from Open and Catalog.Commit.
var (
	// ErrInvalid: a configuration, identifier, URL or request is malformed.
	ErrInvalid = errors.New("iceberg: invalid argument")
	// ErrUnsupportedStore: the object store has no Iceberg FileIO (mem://).
	ErrUnsupportedStore = errors.New("iceberg: object store not supported")
	// ErrConflict: the commit lost the catalog's compare-and-swap to other
	// committers more than commitAttemptsMax times; nothing was committed
	// by this call. Retry later.
	ErrConflict = errors.New("iceberg: commit conflict")
	// ErrTableMismatch: the catalog's table is not the one lakegate would
	// write (another location, another schema field id, a property that
	// does not parse). Nothing is committed to it.
	ErrTableMismatch = errors.New("iceberg: table does not match")
)

// CatalogConfig says which catalog to open and where the object store is.
type CatalogConfig struct {
	// Kind is KindSQL or KindREST. Default KindSQL.
	Kind string
	// URI: for KindSQL the sqlite file (a path; created with its directory
	// if missing), required; for KindREST the catalog's base URL, required.
	URI string
	// Props are passed to the catalog. KindREST understands "credential",
	// "token", "warehouse" and passes every other key to the server config;
	// KindSQL takes none of its own. For both, FileIO keys ("s3.*", "gcs.*",
	// "adls.*") override what StoreLocation derives from StoreURL.
	Props map[string]string
	// Name is the catalog name. Default DefaultCatalogName.
	Name string
	// StoreURL is the object store, as objstore.Open takes it; table
	// locations are built from it (StoreLocation). Required.
	StoreURL string
	// Meta and MetaRoot (a key prefix ending in "/") are the metadata
	// store of KindLakegate; the catalog keeps its keys under
	// MetaRoot (docs/iceberg-catalog.md). Required for KindLakegate.
	Meta     meta.Store
	MetaRoot string
}

// Catalog is an open Iceberg catalog plus the store's location. Its methods
// are safe for concurrent use.
type Catalog struct {
	cat  catalog.Catalog
	db   *sql.DB // KindSQL only; owned
	base string  // Iceberg location of the store's key ""
}

// Open opens the catalog cfg names. Close releases it.
func Open(ctx context.Context, cfg CatalogConfig) (*Catalog, error) {
	if cfg.Name == "" {
		cfg.Name = DefaultCatalogName
	}
	base, props, err := StoreLocation(cfg.StoreURL)
	if err != nil {
		return nil, err
	}
	maps.Copy(props, cfg.Props)
	c := &Catalog{base: base}
	switch cfg.Kind {
	case "", KindSQL:
		if cfg.URI == "" {
			return nil, fmt.Errorf("%w: sql catalog needs a sqlite file (URI)", ErrInvalid)
		}
		path, err := filepath.Abs(cfg.URI)
		if err != nil {
			return nil, fmt.Errorf("%w: sqlite file %q: %v", ErrInvalid, cfg.URI, err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("iceberg: catalog dir: %w", err)
		}
		// WAL lets readers (pyiceberg) read while a node writes; the busy
		// timeout makes concurrent writers (several engines on one file)
		// wait for the lock instead of failing.
		dsn := (&url.URL{Scheme: "file", Path: path,
			RawQuery: "_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_txlock=immediate"}).String()
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			return nil, fmt.Errorf("iceberg: open %s: %w", path, err)
		}
		// Creating the catalog's tables (and switching a new file to WAL)
		// can answer SQLITE_BUSY at once, without the busy timeout, when
		// another catalog of this process does the same: one at a time.
		if _, ok := props["warehouse"]; !ok {
			props["warehouse"] = c.Warehouse()
		}
		sqlCreateMu.Lock()
		cat, err := sqlcat.NewCatalog(cfg.Name, db, sqlcat.SQLite, ice.Properties(props))
		sqlCreateMu.Unlock()
		if err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("iceberg: sql catalog %s: %w", path, err)
		}
		c.cat, c.db = cat, db
	case KindREST:
		if cfg.URI == "" {
			return nil, fmt.Errorf("%w: rest catalog needs a URI", ErrInvalid)
		}
		var opts []rest.Option
		extra := ice.Properties{}
		for k, v := range props {
			switch k {
			case "credential":
				opts = append(opts, rest.WithCredential(v))
			case "token":
				opts = append(opts, rest.WithOAuthToken(v))
			case "warehouse":
				opts = append(opts, rest.WithWarehouseLocation(v))
			default:
				extra[k] = v
			}
		}
		opts = append(opts, rest.WithAdditionalProps(extra))
		cat, err := rest.NewCatalog(ctx, cfg.Name, cfg.URI, opts...)
		if err != nil {
			return nil, fmt.Errorf("iceberg: rest catalog %s: %w", cfg.URI, err)
		}
		c.cat = cat
	case KindLakegate:
		if cfg.Meta == nil || !strings.HasSuffix(cfg.MetaRoot, "/") {
			return nil, fmt.Errorf("%w: the lakegate catalog needs a metadata store and a key root", ErrInvalid)
		}
		cat, err := metacat.Open(cfg.Meta, metacat.Options{
			Root: cfg.MetaRoot, Warehouse: c.Warehouse(), Props: ice.Properties(props),
			Protected: IsStreamTable,
		})
		if err != nil {
			return nil, fmt.Errorf("iceberg: lakegate catalog: %w", err)
		}
		c.cat = cat
	default:
		return nil, fmt.Errorf("%w: catalog kind %q (want %q, %q or %q)", ErrInvalid, cfg.Kind, KindSQL, KindREST, KindLakegate)
	}
	return c, nil
}

// Location returns the Iceberg location of the table whose root key in the
// object store is root ("tables/<tenant>/<ns>/<topic>").
func (c *Catalog) Location(root string) string { return c.base + "/" + root }

// Warehouse is the location of the store's WarehouseDir: where the REST
// API puts clients' tables.
func (c *Catalog) Warehouse() string { return c.base + "/" + WarehouseDir }

// Close releases the catalog.
func (c *Catalog) Close() error {
	var errs []error
	if cl, ok := c.cat.(interface{ Close() error }); ok {
		errs = append(errs, cl.Close())
	}
	if c.db != nil {
		errs = append(errs, c.db.Close())
	}
	return errors.Join(errs...)
}

// IsStreamTable reports whether table properties are those of a stream's
// table, which lakegate creates and writes (the lakegate.format property):
// the lakegate catalog refuses to drop or rename such a table, and the
// REST API refuses other writers' commits to it.
func IsStreamTable(props ice.Properties) bool { _, ok := props[formatProp]; return ok }

// OwnsTable reports whether tbl is the stream table lakegate keeps at
// root: marked as a stream's table and located at Location(root). A table
// found at a stream's identifier that is not (a client's, made before the
// REST API reserved those identifiers) is not the stream's: nothing of it
// is reported or read as the stream's.
func (c *Catalog) OwnsTable(tbl *table.Table, root string) bool {
	return IsStreamTable(tbl.Properties()) && strings.TrimSuffix(tbl.Location(), "/") == c.Location(root)
}

// FileIOProps returns the FileIO properties of the store (StoreLocation)
// with cfg.Props over them: what a reader needs to open the store's files.
func FileIOProps(cfg CatalogConfig) (map[string]string, error) {
	_, props, err := StoreLocation(cfg.StoreURL)
	if err != nil {
		return nil, err
	}
	maps.Copy(props, cfg.Props)
	return props, nil
}

// Catalog returns the underlying iceberg-go catalog (for readers and
// tests).
func (c *Catalog) Catalog() catalog.Catalog { return c.cat }
