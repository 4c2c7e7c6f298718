package metacat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/lakegate/lakegate/meta"
)

// CatalogType is what CatalogType returns: the REST type, since this is
// the catalog lakegate serves over the Iceberg REST API.
const CatalogType catalog.Type = "lakegate"

// Errors, beside iceberg-go's catalog errors (ErrNoSuchTable, …), which
// are returned where the catalog interface documents them.
var (
	// ErrUnavailable: the metadata store could not be reached, or a write's
	// outcome is unknown (read the table again to see whether it applied).
	ErrUnavailable = errors.New("metacat: metadata store unavailable")
	// ErrForbidden: the operation is refused on a table lakegate owns
	// (Options.Protected).
	ErrForbidden = errors.New("metacat: forbidden")
	// ErrInvalid: a malformed identifier or request.
	ErrInvalid = errors.New("metacat: invalid request")
)

// Options configure Open.
type Options struct {
	// Root is the key prefix of the catalog's keys in the metadata store,
	// ending in "/". Required (node: <engine root>iceberg/).
	Root string
	// Warehouse is the location under which tables created without a
	// location are placed: <Warehouse>/<ns levels>/<table>. Required for
	// such creates.
	Warehouse string
	// Props are the FileIO properties (s3.*, gcs.*, adls.*) used to read
	// and write metadata files — the only ones: a table's own properties
	// never configure the catalog's storage access (a client could name
	// its own endpoint or credentials there).
	Props ice.Properties
	// Protected reports whether a table (by its current properties) is
	// owned by lakegate; DropTable and RenameTable refuse such tables with
	// ErrForbidden. Nil: none is.
	Protected func(props ice.Properties) bool
	// MetadataCacheEntries bounds the parsed metadata files kept in memory
	// (keyed by their location: files never change). Default 64.
	MetadataCacheEntries int
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Catalog is the catalog; safe for concurrent use.
type Catalog struct {
	ms   meta.Store
	opts Options

	cache struct {
		sync.Mutex
		m     map[string]table.Metadata
		order []string // insertion order, oldest first
	}
}

var _ catalog.Catalog = (*Catalog)(nil)

// Open returns the catalog on ms. It does not own ms.
func Open(ms meta.Store, opts Options) (*Catalog, error) {
	if !strings.HasSuffix(opts.Root, "/") {
		return nil, fmt.Errorf("%w: root %q must end in /", ErrInvalid, opts.Root)
	}
	if opts.MetadataCacheEntries <= 0 {
		opts.MetadataCacheEntries = 64
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Props == nil {
		opts.Props = ice.Properties{}
	}
	c := &Catalog{ms: ms, opts: opts}
	c.cache.m = map[string]table.Metadata{}
	return c, nil
}

// Keys (docs/iceberg-catalog.md). A namespace is one key segment: its
// levels joined by 0x1F, then escaped (every byte outside [A-Za-z0-9._-]
// as %XX), so the unit separator shows as %1F and a level's own "/" as
// %2F. A table is <root>tables/<ns segment>/<escaped name>.
const levelSep = "\x1f"

func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

func unescape(s string) (string, error) { return url.PathUnescape(s) }

func nsSegment(ns table.Identifier) string { return escape(strings.Join(ns, levelSep)) }

func (c *Catalog) nsKey(ns table.Identifier) string { return c.opts.Root + "ns/" + nsSegment(ns) }
func (c *Catalog) nsPrefix() string                 { return c.opts.Root + "ns/" }
func (c *Catalog) tablesPrefix(ns table.Identifier) string {
	return c.opts.Root + "tables/" + nsSegment(ns) + "/"
}
func (c *Catalog) tableKey(ident table.Identifier) string {
	return c.tablesPrefix(catalog.NamespaceFromIdent(ident)) + escape(catalog.TableNameFromIdent(ident))
}

// prefixEnd is the end of the range of keys beginning with p.
func prefixEnd(p string) string { return p[:len(p)-1] + string(p[len(p)-1]+1) }

// nsRecord is the value of a namespace key.
type nsRecord struct {
	V          int               `json:"v"`
	Properties map[string]string `json:"properties"`
}

// tableRecord is the value of a table key.
type tableRecord struct {
	V                        int    `json:"v"`
	MetadataLocation         string `json:"metadataLocation"`
	PreviousMetadataLocation string `json:"previousMetadataLocation,omitempty"`
	UpdatedMs                int64  `json:"updatedMs"`
}

func unavailable(what string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
}

func checkNamespace(ns table.Identifier) error {
	if len(ns) == 0 {
		return fmt.Errorf("%w: empty namespace", catalog.ErrNoSuchNamespace)
	}
	for _, l := range ns {
		if l == "" || strings.ContainsAny(l, levelSep+"\x00") {
			return fmt.Errorf("%w: namespace level %q", ErrInvalid, l)
		}
	}
	return nil
}

// CatalogType implements catalog.Catalog.
func (c *Catalog) CatalogType() catalog.Type { return CatalogType }

// ---- namespaces ----

// CreateNamespace implements catalog.Catalog. Parent levels need not exist.
func (c *Catalog) CreateNamespace(ctx context.Context, ns table.Identifier, props ice.Properties) error {
	if err := checkNamespace(ns); err != nil {
		return err
	}
	v, _ := json.Marshal(nsRecord{V: 1, Properties: nonNil(props)})
	ok, _, err := c.ms.Txn(ctx, []meta.Cmp{{Key: c.nsKey(ns)}}, []meta.Op{meta.Put(c.nsKey(ns), v)})
	if err != nil {
		return unavailable("create namespace", err)
	}
	if !ok {
		return fmt.Errorf("%w: %s", catalog.ErrNamespaceAlreadyExists, strings.Join(ns, "."))
	}
	return nil
}

func nonNil(p map[string]string) map[string]string {
	if p == nil {
		return map[string]string{}
	}
	return p
}

func (c *Catalog) loadNamespace(ctx context.Context, ns table.Identifier) (nsRecord, int64, error) {
	if err := checkNamespace(ns); err != nil {
		return nsRecord{}, 0, err
	}
	kv, found, err := c.ms.Get(ctx, c.nsKey(ns))
	if err != nil {
		return nsRecord{}, 0, unavailable("load namespace", err)
	}
	if !found {
		return nsRecord{}, 0, fmt.Errorf("%w: %s", catalog.ErrNoSuchNamespace, strings.Join(ns, "."))
	}
	var r nsRecord
	if err := json.Unmarshal(kv.Value, &r); err != nil || r.V != 1 {
		return nsRecord{}, 0, fmt.Errorf("metacat: namespace %s: corrupt record", strings.Join(ns, "."))
	}
	r.Properties = nonNil(r.Properties)
	return r, kv.ModRevision, nil
}

// CheckNamespaceExists implements catalog.Catalog.
func (c *Catalog) CheckNamespaceExists(ctx context.Context, ns table.Identifier) (bool, error) {
	_, _, err := c.loadNamespace(ctx, ns)
	if errors.Is(err, catalog.ErrNoSuchNamespace) {
		return false, nil
	}
	return err == nil, err
}

// LoadNamespaceProperties implements catalog.Catalog.
func (c *Catalog) LoadNamespaceProperties(ctx context.Context, ns table.Identifier) (ice.Properties, error) {
	r, _, err := c.loadNamespace(ctx, ns)
	return r.Properties, err
}

// ListNamespaces implements catalog.Catalog: the namespaces one level
// below parent (top-level ones for an empty parent).
func (c *Catalog) ListNamespaces(ctx context.Context, parent table.Identifier) ([]table.Identifier, error) {
	start := c.nsPrefix()
	if len(parent) > 0 {
		if _, _, err := c.loadNamespace(ctx, parent); err != nil {
			return nil, err
		}
		start += nsSegment(parent) + escape(levelSep)
	}
	kvs, err := c.ms.Range(ctx, start, prefixEnd(start), 0)
	if err != nil {
		return nil, unavailable("list namespaces", err)
	}
	var out []table.Identifier
	for _, kv := range kvs {
		seg, err := unescape(strings.TrimPrefix(kv.Key, c.nsPrefix()))
		if err != nil {
			continue
		}
		levels := strings.Split(seg, levelSep)
		if len(levels) == len(parent)+1 {
			out = append(out, levels)
		}
	}
	return out, nil
}

// UpdateNamespaceProperties implements catalog.Catalog.
func (c *Catalog) UpdateNamespaceProperties(ctx context.Context, ns table.Identifier, removals []string, updates ice.Properties) (catalog.PropertiesUpdateSummary, error) {
	for _, k := range removals {
		if _, ok := updates[k]; ok {
			return catalog.PropertiesUpdateSummary{}, fmt.Errorf("%w: property %q both removed and updated", ErrInvalid, k)
		}
	}
	for range 16 {
		r, rev, err := c.loadNamespace(ctx, ns)
		if err != nil {
			return catalog.PropertiesUpdateSummary{}, err
		}
		sum := catalog.PropertiesUpdateSummary{Removed: []string{}, Updated: []string{}, Missing: []string{}}
		for _, k := range removals {
			if _, ok := r.Properties[k]; ok {
				delete(r.Properties, k)
				sum.Removed = append(sum.Removed, k)
			} else {
				sum.Missing = append(sum.Missing, k)
			}
		}
		for k, v := range updates {
			r.Properties[k] = v
			sum.Updated = append(sum.Updated, k)
		}
		slices.Sort(sum.Updated)
		v, _ := json.Marshal(r)
		ok, _, err := c.ms.Txn(ctx, []meta.Cmp{{Key: c.nsKey(ns), ModRevision: rev}}, []meta.Op{meta.Put(c.nsKey(ns), v)})
		if err != nil {
			return sum, unavailable("update namespace", err)
		}
		if ok {
			return sum, nil
		}
	}
	return catalog.PropertiesUpdateSummary{}, fmt.Errorf("%w: namespace %s kept changing", table.ErrCommitFailed, strings.Join(ns, "."))
}

// DropNamespace implements catalog.Catalog: only an empty namespace (no
// tables, no child namespaces) is dropped. Creating a table re-puts its
// namespace key, so a table created between the emptiness check and the
// delete makes the delete's compare fail.
func (c *Catalog) DropNamespace(ctx context.Context, ns table.Identifier) error {
	for range 16 {
		_, rev, err := c.loadNamespace(ctx, ns)
		if err != nil {
			return err
		}
		tp := c.tablesPrefix(ns)
		tbls, err := c.ms.Range(ctx, tp, prefixEnd(tp), 1)
		if err != nil {
			return unavailable("drop namespace", err)
		}
		children, err := c.ListNamespaces(ctx, ns)
		if err != nil {
			return err
		}
		if len(tbls) > 0 || len(children) > 0 {
			return fmt.Errorf("%w: %s", catalog.ErrNamespaceNotEmpty, strings.Join(ns, "."))
		}
		ok, _, err := c.ms.Txn(ctx, []meta.Cmp{{Key: c.nsKey(ns), ModRevision: rev}}, []meta.Op{meta.Delete(c.nsKey(ns))})
		if err != nil {
			return unavailable("drop namespace", err)
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("%w: namespace %s kept changing", table.ErrCommitFailed, strings.Join(ns, "."))
}

// ---- tables ----

func checkTable(ident table.Identifier) error {
	if err := catalog.ValidateTableIdentifier(ident); err != nil {
		return err
	}
	return checkNamespace(catalog.NamespaceFromIdent(ident))
}

// record reads a table's key (found false: no such table).
func (c *Catalog) record(ctx context.Context, ident table.Identifier) (tableRecord, int64, bool, error) {
	kv, found, err := c.ms.Get(ctx, c.tableKey(ident))
	if err != nil {
		return tableRecord{}, 0, false, unavailable("load table", err)
	}
	if !found {
		return tableRecord{}, 0, false, nil
	}
	var r tableRecord
	if err := json.Unmarshal(kv.Value, &r); err != nil || r.V != 1 || r.MetadataLocation == "" {
		return tableRecord{}, 0, false, fmt.Errorf("metacat: table %s: corrupt record", strings.Join(ident, "."))
	}
	return r, kv.ModRevision, true, nil
}

// ioProps are the FileIO properties the catalog opens storage with:
// Options.Props, whatever the table's properties say.
func (c *Catalog) ioProps() ice.Properties { return maps.Clone(c.opts.Props) }

// ReadMetadata reads the table metadata file at loc with Options.Props
// (what the REST API checks before it registers a table).
func (c *Catalog) ReadMetadata(ctx context.Context, loc string) (table.Metadata, error) {
	return c.metadata(ctx, loc)
}

// metadata reads (or finds in the cache) the metadata file at loc.
func (c *Catalog) metadata(ctx context.Context, loc string) (table.Metadata, error) {
	c.cache.Lock()
	md, ok := c.cache.m[loc]
	c.cache.Unlock()
	if ok {
		return md, nil
	}
	fs, err := icebergio.LoadFS(ctx, c.opts.Props, loc)
	if err != nil {
		return nil, fmt.Errorf("metacat: file io for %s: %w", loc, err)
	}
	f, err := fs.Open(loc)
	if err != nil {
		return nil, fmt.Errorf("metacat: open %s: %w", loc, err)
	}
	defer f.Close()
	md, err = table.ParseMetadata(f)
	if err != nil {
		return nil, fmt.Errorf("metacat: parse %s: %w", loc, err)
	}
	c.remember(loc, md)
	return md, nil
}

func (c *Catalog) remember(loc string, md table.Metadata) {
	c.cache.Lock()
	defer c.cache.Unlock()
	if _, ok := c.cache.m[loc]; ok {
		return
	}
	c.cache.m[loc] = md
	c.cache.order = append(c.cache.order, loc)
	for len(c.cache.order) > c.opts.MetadataCacheEntries {
		delete(c.cache.m, c.cache.order[0])
		c.cache.order = c.cache.order[1:]
	}
}

func (c *Catalog) newTable(ident table.Identifier, md table.Metadata, loc string) *table.Table {
	return table.New(ident, md, loc, icebergio.LoadFSFunc(c.ioProps(), loc), c)
}

// LoadTable implements catalog.Catalog.
func (c *Catalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	if err := checkTable(ident); err != nil {
		return nil, err
	}
	r, _, found, err := c.record(ctx, ident)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%w: %s", catalog.ErrNoSuchTable, strings.Join(ident, "."))
	}
	md, err := c.metadata(ctx, r.MetadataLocation)
	if err != nil {
		return nil, err
	}
	return c.newTable(ident, md, r.MetadataLocation), nil
}

// CheckTableExists implements catalog.Catalog.
func (c *Catalog) CheckTableExists(ctx context.Context, ident table.Identifier) (bool, error) {
	if err := checkTable(ident); err != nil {
		return false, err
	}
	_, _, found, err := c.record(ctx, ident)
	return found, err
}

// ListTables implements catalog.Catalog.
func (c *Catalog) ListTables(ctx context.Context, ns table.Identifier) iter.Seq2[table.Identifier, error] {
	return func(yield func(table.Identifier, error) bool) {
		if _, _, err := c.loadNamespace(ctx, ns); err != nil {
			yield(nil, err)
			return
		}
		p := c.tablesPrefix(ns)
		kvs, err := c.ms.Range(ctx, p, prefixEnd(p), 0)
		if err != nil {
			yield(nil, unavailable("list tables", err))
			return
		}
		for _, kv := range kvs {
			name, err := unescape(strings.TrimPrefix(kv.Key, p))
			if err != nil {
				continue
			}
			if !yield(append(slices.Clone(ns), name), nil) {
				return
			}
		}
	}
}

// DefaultLocation is where a table created without a location goes:
// <Warehouse>/<ns levels>/<name>.
func (c *Catalog) DefaultLocation(ident table.Identifier) (string, error) {
	if c.opts.Warehouse == "" {
		return "", fmt.Errorf("%w: no warehouse: give the table a location", ErrInvalid)
	}
	parts := append([]string{strings.TrimSuffix(c.opts.Warehouse, "/")}, ident...)
	return strings.Join(parts, "/"), nil
}

// StageTable returns the metadata a CreateTable would commit, without
// committing it (the REST API's stage-create): a later CommitTable with
// assert-create and the same updates creates it.
func (c *Catalog) StageTable(ctx context.Context, ident table.Identifier, sc *ice.Schema, opts ...catalog.CreateTableOpt) (table.Metadata, error) {
	if err := checkTable(ident); err != nil {
		return nil, err
	}
	var cfg catalog.CreateTableCfg
	cfg.SortOrder = table.UnsortedSortOrder
	for _, o := range opts {
		o(&cfg)
	}
	if _, _, err := c.loadNamespace(ctx, catalog.NamespaceFromIdent(ident)); err != nil {
		return nil, err
	}
	loc := cfg.Location
	if loc == "" {
		var err error
		if loc, err = c.DefaultLocation(ident); err != nil {
			return nil, err
		}
	}
	return table.NewMetadata(sc, cfg.PartitionSpec, cfg.SortOrder, loc, cfg.Properties)
}

// CreateTable implements catalog.Catalog: fresh field ids are assigned as
// in every Iceberg catalog (lakegate's own tables are created through
// CommitTable with assert-create to keep theirs).
func (c *Catalog) CreateTable(ctx context.Context, ident table.Identifier, sc *ice.Schema, opts ...catalog.CreateTableOpt) (*table.Table, error) {
	md, err := c.StageTable(ctx, ident, sc, opts...)
	if err != nil {
		return nil, err
	}
	loc, err := c.writeMetadata(ctx, md, 0)
	if err != nil {
		return nil, err
	}
	if err := c.swap(ctx, ident, 0, tableRecord{}, loc); err != nil {
		c.removeFile(ctx, md, loc)
		if errors.Is(err, table.ErrCommitFailed) {
			return nil, fmt.Errorf("%w: %s", catalog.ErrTableAlreadyExists, strings.Join(ident, "."))
		}
		return nil, err
	}
	c.remember(loc, md)
	return c.newTable(ident, md, loc), nil
}

// CommitTable implements catalog.Catalog: it checks reqs against the
// current metadata, applies updates, writes the new metadata file and
// swaps the table key in one transaction comparing its revision. A lost
// race or a failed requirement is table.ErrCommitFailed (nothing changed;
// reload and retry); ErrUnavailable means the outcome is unknown. A
// commit with assert-create creates the table (its namespace must exist).
func (c *Catalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	if err := checkTable(ident); err != nil {
		return nil, "", err
	}
	rec, rev, found, err := c.record(ctx, ident)
	if err != nil {
		return nil, "", err
	}
	var cur table.Metadata
	base, version := table.Metadata(nil), 0
	if found {
		if cur, err = c.metadata(ctx, rec.MetadataLocation); err != nil {
			return nil, "", err
		}
		base = cur
		if version = metadataVersion(rec.MetadataLocation); version < 0 {
			return nil, "", fmt.Errorf("metacat: %s: metadata location %s has no version", strings.Join(ident, "."), rec.MetadataLocation)
		}
		version++
	} else {
		creates := slices.ContainsFunc(reqs, func(r table.Requirement) bool { return r.GetType() == "assert-create" })
		if !creates {
			return nil, "", fmt.Errorf("%w: %s", catalog.ErrNoSuchTable, strings.Join(ident, "."))
		}
		if base, err = table.NewMetadata(ice.NewSchema(0), nil, table.UnsortedSortOrder, "", nil); err != nil {
			return nil, "", err
		}
	}
	for _, r := range reqs {
		if err := r.Validate(cur); err != nil {
			return nil, "", fmt.Errorf("%w: %s: %w", table.ErrCommitFailed, strings.Join(ident, "."), err)
		}
	}
	prevLoc := ""
	if found {
		prevLoc = rec.MetadataLocation
	}
	md, err := table.UpdateTableMetadata(base, updates, prevLoc)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %s: %w", ErrInvalid, strings.Join(ident, "."), err)
	}
	if found && md.Equals(cur) {
		return cur, rec.MetadataLocation, nil
	}
	if md.Location() == "" {
		return nil, "", fmt.Errorf("%w: %s: no table location", ErrInvalid, strings.Join(ident, "."))
	}
	loc, err := c.writeMetadata(ctx, md, version)
	if err != nil {
		return nil, "", err
	}
	if err := c.swap(ctx, ident, rev, rec, loc); err != nil {
		if errors.Is(err, table.ErrCommitFailed) {
			c.removeFile(ctx, md, loc)
		}
		return nil, "", err
	}
	c.remember(loc, md)
	if found {
		c.deleteOldMetadata(ctx, cur, md)
	}
	return md, loc, nil
}

// swap points the table key at loc: created when rev is 0 (the namespace
// key is re-put in the same transaction, see DropNamespace; a concurrent
// change of the namespace alone is retried), else compared with rev.
func (c *Catalog) swap(ctx context.Context, ident table.Identifier, rev int64, prev tableRecord, loc string) error {
	key := c.tableKey(ident)
	v, _ := json.Marshal(tableRecord{V: 1, MetadataLocation: loc, PreviousMetadataLocation: prev.MetadataLocation, UpdatedMs: c.opts.Now().UnixMilli()})
	for range 16 {
		cmps := []meta.Cmp{{Key: key, ModRevision: rev}}
		ops := []meta.Op{meta.Put(key, v)}
		if rev == 0 {
			ns := catalog.NamespaceFromIdent(ident)
			kv, found, err := c.ms.Get(ctx, c.nsKey(ns))
			if err != nil {
				return unavailable("commit", err)
			}
			if !found {
				return fmt.Errorf("%w: %s", catalog.ErrNoSuchNamespace, strings.Join(ns, "."))
			}
			cmps = append(cmps, meta.Cmp{Key: c.nsKey(ns), ModRevision: kv.ModRevision})
			ops = append(ops, meta.Put(c.nsKey(ns), kv.Value))
		}
		ok, _, err := c.ms.Txn(ctx, cmps, ops)
		if err != nil {
			return unavailable("commit", err)
		}
		if ok {
			return nil
		}
		if rev != 0 {
			break
		}
		if _, _, found, err := c.record(ctx, ident); err != nil || found {
			break
		}
	}
	return fmt.Errorf("%w: %s changed during the commit", table.ErrCommitFailed, strings.Join(ident, "."))
}

// writeMetadata writes md as <location>/metadata/<version:05d>-<uuid>.metadata.json.
func (c *Catalog) writeMetadata(ctx context.Context, md table.Metadata, version int) (string, error) {
	loc := fmt.Sprintf("%s/metadata/%05d-%s.metadata.json", strings.TrimSuffix(md.Location(), "/"), version, uuid.New())
	b, err := json.Marshal(md)
	if err != nil {
		return "", fmt.Errorf("metacat: encode metadata: %w", err)
	}
	fs, err := icebergio.LoadFS(ctx, c.ioProps(), loc)
	if err != nil {
		return "", fmt.Errorf("metacat: file io for %s: %w", loc, err)
	}
	wfs, ok := fs.(icebergio.WriteFileIO)
	if !ok {
		return "", fmt.Errorf("metacat: file io for %s cannot write", loc)
	}
	if err := wfs.WriteFile(loc, b); err != nil {
		return "", fmt.Errorf("metacat: write %s: %w", loc, err)
	}
	return loc, nil
}

func (c *Catalog) removeFile(ctx context.Context, md table.Metadata, loc string) {
	if fs, err := icebergio.LoadFS(ctx, c.ioProps(), loc); err == nil {
		_ = fs.Remove(loc)
	}
}

// deleteOldMetadata removes the metadata files the commit dropped from the
// metadata log, when write.metadata.delete-after-commit.enabled is set
// (what every Iceberg catalog does after a commit). Only files this
// catalog writes are removed — <location>/metadata/<name>.metadata.json of
// the table's current location — whatever else a metadata log (of a
// registered table) lists.
func (c *Catalog) deleteOldMetadata(ctx context.Context, old, md table.Metadata) {
	if !md.Properties().GetBool(table.MetadataDeleteAfterCommitEnabledKey, table.MetadataDeleteAfterCommitEnabledDefault) {
		return
	}
	kept := map[string]bool{}
	for e := range md.PreviousFiles() {
		kept[e.MetadataFile] = true
	}
	dir := strings.TrimSuffix(md.Location(), "/") + "/metadata/"
	for e := range old.PreviousFiles() {
		name, inside := strings.CutPrefix(e.MetadataFile, dir)
		if kept[e.MetadataFile] || !inside || strings.ContainsAny(name, "/\\%") || !strings.HasSuffix(name, ".metadata.json") {
			continue
		}
		c.removeFile(ctx, md, e.MetadataFile)
	}
}

// metadataVersion parses the version of <version>-<uuid>.metadata.json
// (or v<version>.metadata.json); -1 when it has none.
func metadataVersion(loc string) int {
	name := loc[strings.LastIndex(loc, "/")+1:]
	name = strings.TrimSuffix(name, ".metadata.json")
	name = strings.TrimSuffix(name, ".gz")
	name = strings.TrimPrefix(name, "v")
	if i := strings.IndexByte(name, '-'); i >= 0 {
		name = name[:i]
	}
	n := 0
	if name == "" {
		return -1
	}
	for _, r := range name {
		if r < '0' || r > '9' {
			return -1
		}
		n = n*10 + int(r-'0')
	}
	return n
}

// DropTable implements catalog.Catalog: it forgets the table; files stay.
func (c *Catalog) DropTable(ctx context.Context, ident table.Identifier) error {
	if err := checkTable(ident); err != nil {
		return err
	}
	rec, rev, found, err := c.record(ctx, ident)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: %s", catalog.ErrNoSuchTable, strings.Join(ident, "."))
	}
	if err := c.checkUnprotected(ctx, ident, rec); err != nil {
		return err
	}
	ok, _, err := c.ms.Txn(ctx, []meta.Cmp{{Key: c.tableKey(ident), ModRevision: rev}}, []meta.Op{meta.Delete(c.tableKey(ident))})
	if err != nil {
		return unavailable("drop table", err)
	}
	if !ok {
		return fmt.Errorf("%w: %s changed while dropping it", table.ErrCommitFailed, strings.Join(ident, "."))
	}
	return nil
}

func (c *Catalog) checkUnprotected(ctx context.Context, ident table.Identifier, rec tableRecord) error {
	if c.opts.Protected == nil {
		return nil
	}
	md, err := c.metadata(ctx, rec.MetadataLocation)
	if err != nil {
		return err
	}
	if c.opts.Protected(md.Properties()) {
		return fmt.Errorf("%w: %s is a stream's table, kept by lakegate", ErrForbidden, strings.Join(ident, "."))
	}
	return nil
}

// RenameTable implements catalog.Catalog.
func (c *Catalog) RenameTable(ctx context.Context, from, to table.Identifier) (*table.Table, error) {
	if err := checkTable(from); err != nil {
		return nil, err
	}
	if err := checkTable(to); err != nil {
		return nil, err
	}
	rec, rev, found, err := c.record(ctx, from)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%w: %s", catalog.ErrNoSuchTable, strings.Join(from, "."))
	}
	if err := c.checkUnprotected(ctx, from, rec); err != nil {
		return nil, err
	}
	ns := catalog.NamespaceFromIdent(to)
	nskv, nsFound, err := c.ms.Get(ctx, c.nsKey(ns))
	if err != nil {
		return nil, unavailable("rename table", err)
	}
	if !nsFound {
		return nil, fmt.Errorf("%w: %s", catalog.ErrNoSuchNamespace, strings.Join(ns, "."))
	}
	v, _ := json.Marshal(rec)
	ok, _, err := c.ms.Txn(ctx,
		[]meta.Cmp{{Key: c.tableKey(from), ModRevision: rev}, {Key: c.tableKey(to)}, {Key: c.nsKey(ns), ModRevision: nskv.ModRevision}},
		[]meta.Op{meta.Delete(c.tableKey(from)), meta.Put(c.tableKey(to), v), meta.Put(c.nsKey(ns), nskv.Value)})
	if err != nil {
		return nil, unavailable("rename table", err)
	}
	if !ok {
		if ex, _ := c.CheckTableExists(ctx, to); ex {
			return nil, fmt.Errorf("%w: %s", catalog.ErrTableAlreadyExists, strings.Join(to, "."))
		}
		return nil, fmt.Errorf("%w: %s changed while renaming it", table.ErrCommitFailed, strings.Join(from, "."))
	}
	return c.LoadTable(ctx, to)
}

// RegisterTable adds an existing table by its metadata file, which must
// be inside Options.Warehouse (ErrForbidden otherwise: the catalog reads
// no file outside it for a client).
func (c *Catalog) RegisterTable(ctx context.Context, ident table.Identifier, metadataLocation string) (*table.Table, error) {
	if err := checkTable(ident); err != nil {
		return nil, err
	}
	wh := strings.TrimSuffix(c.opts.Warehouse, "/") + "/"
	if c.opts.Warehouse == "" || !strings.HasPrefix(metadataLocation, wh) || strings.Contains(metadataLocation[len(wh):], "..") {
		return nil, fmt.Errorf("%w: metadata file %s is outside the warehouse %s", ErrForbidden, metadataLocation, wh)
	}
	md, err := c.metadata(ctx, metadataLocation)
	if err != nil {
		return nil, err
	}
	if err := c.swap(ctx, ident, 0, tableRecord{}, metadataLocation); err != nil {
		if errors.Is(err, table.ErrCommitFailed) {
			return nil, fmt.Errorf("%w: %s", catalog.ErrTableAlreadyExists, strings.Join(ident, "."))
		}
		return nil, err
	}
	return c.newTable(ident, md, metadataLocation), nil
}
