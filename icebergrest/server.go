package icebergrest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/lakegate/lakegate/lakehouse/iceberg/metacat"
)

// Stager is what a catalog offers for stage-create (StageTable) and
// register (ReadMetadata, RegisterTable); metacat.Catalog has them. A
// catalog without them answers those requests 501.
type Stager interface {
	StageTable(ctx context.Context, ident table.Identifier, sc *ice.Schema, opts ...catalog.CreateTableOpt) (table.Metadata, error)
	// ReadMetadata reads the table metadata file at loc with the
	// catalog's own storage configuration.
	ReadMetadata(ctx context.Context, loc string) (table.Metadata, error)
	RegisterTable(ctx context.Context, ident table.Identifier, metadataLocation string) (*table.Table, error)
}

// Options configure Handler.
type Options struct {
	// Catalog is the catalog served. Required.
	Catalog catalog.Catalog
	// Warehouse is the location (URI, no trailing slash) under which
	// clients' tables live: every location a client chooses must be
	// inside <Warehouse>/<tenant>/ (policy.go), and a table created
	// without one goes to <Warehouse>/<namespace levels>/<name>. Empty:
	// clients cannot create tables nor choose locations.
	Warehouse string
	// ClientConfig is the FileIO configuration handed to every client with
	// a loaded table ("config" of LoadTableResult) and as the table's
	// storage credentials (GET …/credentials): the store's endpoint and
	// region, and whatever credentials the operator chose to give readers
	// (docs/iceberg-catalog.md, "Credentials"). Nil: none.
	ClientConfig map[string]string
	// StoreCredentials are handed with ClientConfig only to superusers
	// (Authorizer.IsSuperUser), or to every client when there is no
	// Authorizer: the node's own store keys (tables.iceberg.vendStoreCredentials).
	StoreCredentials map[string]string
	// ReadOnly reports whether a table, by its properties, refuses commits
	// from clients (lakegate's stream tables, which only lakegate writes):
	// such commits, drops and renames get 403 ForbiddenException. Nil:
	// none does.
	ReadOnly func(props ice.Properties) bool
	// Reserved reports whether an identifier belongs to the streams'
	// tables, existing or not (lakegate creates them when a topic has
	// data): clients cannot create, register, rename onto or commit to
	// it (403). Nil: none is.
	Reserved func(ident table.Identifier) bool
	// Auth, when set, authenticates every request but the token endpoint;
	// nil serves without authentication.
	Auth *Auth
	// Authorizer, when set, decides what each principal may read and
	// write (access.go). Nil: everyone reads, and writes only with
	// AllowWrites.
	Authorizer Authorizer
	// AllowWrites opens writes (namespaces, tables, commits) to every
	// client when there is no Authorizer. Default false: read-only.
	AllowWrites bool
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Handler returns the REST API. Mount it at the catalog's base URI (a
// client configured with uri=http://host:8080/iceberg requests
// /iceberg/v1/config): it expects paths beginning with /v1/.
func Handler(o Options) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &server{o: o, warehouse: strings.TrimSuffix(o.Warehouse, "/")}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/config", s.config)
	mux.HandleFunc("POST /v1/oauth/tokens", s.tokens)
	mux.HandleFunc("GET /v1/namespaces", s.listNamespaces)
	mux.HandleFunc("POST /v1/namespaces", s.createNamespace)
	mux.HandleFunc("GET /v1/namespaces/{ns}", s.loadNamespace)
	mux.HandleFunc("HEAD /v1/namespaces/{ns}", s.namespaceExists)
	mux.HandleFunc("DELETE /v1/namespaces/{ns}", s.dropNamespace)
	mux.HandleFunc("POST /v1/namespaces/{ns}/properties", s.updateNamespace)
	mux.HandleFunc("GET /v1/namespaces/{ns}/tables", s.listTables)
	mux.HandleFunc("POST /v1/namespaces/{ns}/tables", s.createTable)
	mux.HandleFunc("POST /v1/namespaces/{ns}/register", s.registerTable)
	mux.HandleFunc("GET /v1/namespaces/{ns}/tables/{table}", s.loadTable)
	mux.HandleFunc("HEAD /v1/namespaces/{ns}/tables/{table}", s.tableExists)
	mux.HandleFunc("POST /v1/namespaces/{ns}/tables/{table}", s.commitTable)
	mux.HandleFunc("DELETE /v1/namespaces/{ns}/tables/{table}", s.dropTable)
	mux.HandleFunc("GET /v1/namespaces/{ns}/tables/{table}/credentials", s.credentials)
	mux.HandleFunc("POST /v1/namespaces/{ns}/tables/{table}/metrics", s.metrics)
	mux.HandleFunc("POST /v1/tables/rename", s.renameTable)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NotFoundException", "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	var h http.Handler = mux
	if o.Auth != nil {
		h = o.Auth.middleware(mux)
	}
	return h
}

// Endpoints advertised by GET /v1/config.
var endpoints = []string{
	"GET /v1/{prefix}/namespaces",
	"POST /v1/{prefix}/namespaces",
	"GET /v1/{prefix}/namespaces/{namespace}",
	"HEAD /v1/{prefix}/namespaces/{namespace}",
	"DELETE /v1/{prefix}/namespaces/{namespace}",
	"POST /v1/{prefix}/namespaces/{namespace}/properties",
	"GET /v1/{prefix}/namespaces/{namespace}/tables",
	"POST /v1/{prefix}/namespaces/{namespace}/tables",
	"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials",
	"POST /v1/{prefix}/namespaces/{namespace}/register",
	"POST /v1/{prefix}/tables/rename",
	"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
}

type server struct {
	o         Options
	warehouse string // Options.Warehouse without a trailing slash
}

// ---- wire types (field names as in the OpenAPI spec) ----

type errorModel struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    int    `json:"code"`
	} `json:"error"`
}

type tableIdent struct {
	Namespace []string `json:"namespace"`
	Name      string   `json:"name"`
}

type loadTableResult struct {
	MetadataLocation string            `json:"metadata-location,omitempty"`
	Metadata         table.Metadata    `json:"metadata"`
	Config           map[string]string `json:"config,omitempty"`
}

type commitTableRequest struct {
	Identifier   *tableIdent        `json:"identifier,omitempty"`
	Requirements table.Requirements `json:"requirements"`
	Updates      table.Updates      `json:"updates"`
}

type createTableRequest struct {
	Name          string             `json:"name"`
	Location      string             `json:"location,omitempty"`
	Schema        *ice.Schema        `json:"schema"`
	PartitionSpec *ice.PartitionSpec `json:"partition-spec,omitempty"`
	WriteOrder    *table.SortOrder   `json:"write-order,omitempty"`
	StageCreate   bool               `json:"stage-create,omitempty"`
	Properties    map[string]string  `json:"properties,omitempty"`
}

// ---- helpers ----

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, typ, msg string) {
	var e errorModel
	e.Error.Message, e.Error.Type, e.Error.Code = msg, typ, code
	writeJSON(w, code, e)
}

// fail maps a catalog error to the REST error model.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code, typ := http.StatusInternalServerError, "ServiceFailureException"
	switch {
	case errors.Is(err, catalog.ErrNoSuchTable):
		code, typ = http.StatusNotFound, "NoSuchTableException"
	case errors.Is(err, catalog.ErrNoSuchNamespace):
		code, typ = http.StatusNotFound, "NoSuchNamespaceException"
	case errors.Is(err, catalog.ErrTableAlreadyExists), errors.Is(err, catalog.ErrNamespaceAlreadyExists):
		code, typ = http.StatusConflict, "AlreadyExistsException"
	case errors.Is(err, catalog.ErrNamespaceNotEmpty):
		code, typ = http.StatusConflict, "NamespaceNotEmptyException"
	case errors.Is(err, table.ErrCommitFailed):
		code, typ = http.StatusConflict, "CommitFailedException"
	case errors.Is(err, ErrForbidden) || errors.Is(err, metacat.ErrForbidden):
		code, typ = http.StatusForbidden, "ForbiddenException"
	case errors.Is(err, errBadRequest) || errors.Is(err, metacat.ErrInvalid) || errors.Is(err, catalog.ErrInvalidIdentifier):
		code, typ = http.StatusBadRequest, "BadRequestException"
	case errors.Is(err, metacat.ErrUnavailable) || errors.Is(err, errUnavailable):
		code, typ = http.StatusServiceUnavailable, "ServiceUnavailableException"
	}
	if code >= 500 {
		s.o.Logger.Warn("iceberg rest: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeError(w, code, typ, err.Error())
}

// errBadRequest: a malformed request (400 BadRequestException).
var errBadRequest = errors.New("icebergrest: bad request")

func decode(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return fmt.Errorf("%w: %v", errBadRequest, err)
	}
	if len(b) > maxBodyBytes {
		return fmt.Errorf("%w: body over %d bytes", errBadRequest, maxBodyBytes)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %v", errBadRequest, err)
	}
	return nil
}

// maxBodyBytes bounds a request body (a commit with many snapshots'
// updates is a few MiB at most).
const maxBodyBytes = 16 << 20

// namespace parses the {ns} path segment: levels joined by 0x1F.
func namespace(r *http.Request) (table.Identifier, error) {
	ns := r.PathValue("ns")
	if ns == "" {
		return nil, fmt.Errorf("%w: empty namespace", errBadRequest)
	}
	return strings.Split(ns, "\x1f"), nil
}

func ident(r *http.Request) (table.Identifier, error) {
	ns, err := namespace(r)
	if err != nil {
		return nil, err
	}
	name := r.PathValue("table")
	if name == "" {
		return nil, fmt.Errorf("%w: empty table name", errBadRequest)
	}
	return append(ns, name), nil
}

// ---- config and tokens ----

func (s *server) config(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"defaults":  map[string]string{},
		"overrides": map[string]string{},
		"endpoints": endpoints,
	})
}

func (s *server) tokens(w http.ResponseWriter, r *http.Request) {
	if s.o.Auth == nil {
		writeError(w, http.StatusBadRequest, "BadRequestException", "this catalog needs no token")
		return
	}
	s.o.Auth.tokens(w, r)
}

// ---- namespaces ----

func (s *server) listNamespaces(w http.ResponseWriter, r *http.Request) {
	var parent table.Identifier
	if p := r.URL.Query().Get("parent"); p != "" {
		parent = strings.Split(p, "\x1f")
		if err := s.canSee(r, parent); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	nss, err := s.o.Catalog.ListNamespaces(r.Context(), parent)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := []table.Identifier{}
	for _, ns := range nss {
		err := s.canSee(r, ns)
		if errors.Is(err, ErrForbidden) {
			continue
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out = append(out, ns)
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespaces": out})
}

// namespaceProps applies the storage policy to namespace properties a
// client sends: storage properties dropped, a location inside the
// tenant's directory.
func (s *server) namespaceProps(r *http.Request, ns table.Identifier, props map[string]string) (map[string]string, error) {
	props, dropped := withoutStorageProps(props)
	if len(dropped) > 0 {
		s.o.Logger.Info("iceberg rest: storage properties of a namespace ignored", "namespace", strings.Join(ns, "."), "keys", dropped, "principal", principal(r))
	}
	if loc, ok := props["location"]; ok {
		if err := s.checkLocation(ns, "namespace location", loc, true); err != nil {
			return nil, err
		}
	}
	return props, nil
}

func (s *server) createNamespace(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Namespace  []string          `json:"namespace"`
		Properties map[string]string `json:"properties"`
	}
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if len(req.Namespace) == 0 {
		s.fail(w, r, fmt.Errorf("%w: empty namespace", errBadRequest))
		return
	}
	if err := s.canWrite(r, req.Namespace); err != nil {
		s.fail(w, r, err)
		return
	}
	props, err := s.namespaceProps(r, req.Namespace, req.Properties)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.o.Catalog.CreateNamespace(r.Context(), req.Namespace, props); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespace": req.Namespace, "properties": props})
}

func (s *server) loadNamespace(w http.ResponseWriter, r *http.Request) {
	ns, err := namespace(r)
	if err == nil {
		err = s.canSee(r, ns)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	props, err := s.o.Catalog.LoadNamespaceProperties(r.Context(), ns)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if props == nil {
		props = ice.Properties{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespace": ns, "properties": props})
}

func (s *server) namespaceExists(w http.ResponseWriter, r *http.Request) {
	ns, err := namespace(r)
	if err == nil {
		err = s.canSee(r, ns)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ok, err := s.o.Catalog.CheckNamespaceExists(r.Context(), ns)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) dropNamespace(w http.ResponseWriter, r *http.Request) {
	ns, err := namespace(r)
	if err == nil {
		err = s.canWrite(r, ns)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.o.Catalog.DropNamespace(r.Context(), ns); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) updateNamespace(w http.ResponseWriter, r *http.Request) {
	ns, err := namespace(r)
	if err == nil {
		err = s.canWrite(r, ns)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req struct {
		Removals []string          `json:"removals"`
		Updates  map[string]string `json:"updates"`
	}
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	updates, err := s.namespaceProps(r, ns, req.Updates)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sum, err := s.o.Catalog.UpdateNamespaceProperties(r.Context(), ns, req.Removals, updates)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"updated": nonNil(sum.Updated), "removed": nonNil(sum.Removed), "missing": nonNil(sum.Missing)})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ---- tables ----

func (s *server) listTables(w http.ResponseWriter, r *http.Request) {
	ns, err := namespace(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// A principal that may read the namespace sees every table in it;
	// another sees the tables it may read (a topic grant), and is refused
	// when there is none.
	all := s.canRead(r, ns, "")
	if all != nil && !errors.Is(all, ErrForbidden) {
		s.fail(w, r, all)
		return
	}
	out := []tableIdent{}
	for id, err := range s.o.Catalog.ListTables(r.Context(), ns) {
		if err != nil {
			if all != nil {
				err = all // no existence of namespaces to whom may not see them
			}
			s.fail(w, r, err)
			return
		}
		tns, name := catalog.NamespaceFromIdent(id), catalog.TableNameFromIdent(id)
		if all != nil {
			err := s.canRead(r, tns, name)
			if errors.Is(err, ErrForbidden) {
				continue
			}
			if err != nil {
				s.fail(w, r, err)
				return
			}
		}
		out = append(out, tableIdent{Namespace: tns, Name: name})
	}
	if all != nil && len(out) == 0 {
		s.fail(w, r, all) // nothing it may read here
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"identifiers": out})
}

func (s *server) result(r *http.Request, t *table.Table) loadTableResult {
	return loadTableResult{MetadataLocation: t.MetadataLocation(), Metadata: t.Metadata(), Config: s.clientConfig(r)}
}

func (s *server) createTable(w http.ResponseWriter, r *http.Request) {
	ns, err := namespace(r)
	if err == nil {
		err = s.canWrite(r, ns)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req createTableRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Name == "" || req.Schema == nil {
		s.fail(w, r, fmt.Errorf("%w: a table needs a name and a schema", errBadRequest))
		return
	}
	id := append(slices.Clone(ns), req.Name)
	if err := s.reserved(id, "create"); err != nil {
		s.fail(w, r, err)
		return
	}
	props, dropped := withoutStorageProps(req.Properties)
	if len(dropped) > 0 {
		s.o.Logger.Info("iceberg rest: storage properties of a table ignored", "table", strings.Join(id, "."), "keys", dropped, "principal", principal(r))
	}
	loc := req.Location
	if loc == "" {
		loc, err = s.defaultLocation(id)
	} else {
		err = s.checkLocation(ns, "table location", loc, false)
	}
	if err == nil {
		err = s.checkLocationProps(ns, props)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	opts := []catalog.CreateTableOpt{catalog.WithProperties(props), catalog.WithLocation(loc)}
	if req.PartitionSpec != nil {
		opts = append(opts, catalog.WithPartitionSpec(req.PartitionSpec))
	}
	if req.WriteOrder != nil {
		opts = append(opts, catalog.WithSortOrder(*req.WriteOrder))
	}
	if req.StageCreate {
		st, ok := s.o.Catalog.(Stager)
		if !ok {
			writeError(w, http.StatusNotImplemented, "UnsupportedOperationException", "stage-create is not supported")
			return
		}
		if exists, err := s.o.Catalog.CheckTableExists(r.Context(), id); err != nil || exists {
			if err == nil {
				err = fmt.Errorf("%w: %s", catalog.ErrTableAlreadyExists, strings.Join(id, "."))
			}
			s.fail(w, r, err)
			return
		}
		md, err := st.StageTable(r.Context(), id, req.Schema, opts...)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, loadTableResult{Metadata: md, Config: s.clientConfig(r)})
		return
	}
	t, err := s.o.Catalog.CreateTable(r.Context(), id, req.Schema, opts...)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.result(r, t))
}

func (s *server) registerTable(w http.ResponseWriter, r *http.Request) {
	ns, err := namespace(r)
	if err == nil {
		err = s.canWrite(r, ns)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req struct {
		Name             string `json:"name"`
		MetadataLocation string `json:"metadata-location"`
	}
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Name == "" || !isMetadataFile(req.MetadataLocation) {
		s.fail(w, r, fmt.Errorf("%w: register needs a name and the location of a .metadata.json file", errBadRequest))
		return
	}
	id := append(slices.Clone(ns), req.Name)
	if err := s.reserved(id, "register"); err != nil {
		s.fail(w, r, err)
		return
	}
	// The file is read only once it is known to be inside the tenant's
	// directory, and its table only registered if it stays there.
	if err := s.checkLocation(ns, "metadata file", req.MetadataLocation, false); err != nil {
		s.fail(w, r, err)
		return
	}
	st, ok := s.o.Catalog.(Stager)
	if !ok {
		writeError(w, http.StatusNotImplemented, "UnsupportedOperationException", "register is not supported")
		return
	}
	md, err := st.ReadMetadata(r.Context(), req.MetadataLocation)
	if err != nil {
		s.fail(w, r, fmt.Errorf("%w: %w", errBadRequest, err))
		return
	}
	if err := s.checkMetadata(ns, md); err != nil {
		s.fail(w, r, err)
		return
	}
	t, err := st.RegisterTable(r.Context(), id, req.MetadataLocation)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.result(r, t))
}

func (s *server) loadTable(w http.ResponseWriter, r *http.Request) {
	id, err := ident(r)
	if err == nil {
		err = s.canRead(r, catalog.NamespaceFromIdent(id), catalog.TableNameFromIdent(id))
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	t, err := s.o.Catalog.LoadTable(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.result(r, t))
}

func (s *server) tableExists(w http.ResponseWriter, r *http.Request) {
	id, err := ident(r)
	if err == nil {
		err = s.canRead(r, catalog.NamespaceFromIdent(id), catalog.TableNameFromIdent(id))
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ok, err := s.o.Catalog.CheckTableExists(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// streamTable refuses t when it is a stream's table (Options.ReadOnly).
func (s *server) streamTable(t *table.Table, what string) error {
	if s.o.ReadOnly != nil && s.o.ReadOnly(t.Properties()) {
		return fmt.Errorf("%w: %s is a stream's table: lakegate writes it, clients read it (a client cannot %s it)", ErrForbidden, strings.Join(t.Identifier(), "."), what)
	}
	return nil
}

func (s *server) commitTable(w http.ResponseWriter, r *http.Request) {
	id, err := ident(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ns := catalog.NamespaceFromIdent(id)
	if err = s.canWrite(r, ns); err == nil {
		err = s.reserved(id, "commit to")
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req commitTableRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	// A table's current location and location properties must be inside
	// the warehouse too: one that is not (made before this policy) is
	// read-only.
	t, err := s.o.Catalog.LoadTable(r.Context(), id)
	switch {
	case err == nil:
		if err = s.streamTable(t, "commit to"); err == nil {
			err = s.checkMetadata(ns, t.Metadata())
		}
	case errors.Is(err, catalog.ErrNoSuchTable):
		err = nil // a create (assert-create), or the catalog answers 404
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	updates, dropped, err := s.sanitizeUpdates(ns, req.Updates)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(dropped) > 0 {
		s.o.Logger.Info("iceberg rest: storage properties of a table ignored", "table", strings.Join(id, "."), "keys", dropped, "principal", principal(r))
	}
	md, loc, err := s.o.Catalog.CommitTable(r.Context(), id, req.Requirements, updates)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, loadTableResult{MetadataLocation: loc, Metadata: md})
}

func (s *server) dropTable(w http.ResponseWriter, r *http.Request) {
	id, err := ident(r)
	if err == nil {
		err = s.canWrite(r, catalog.NamespaceFromIdent(id))
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// A client's table squatting a stream's identifier (made before the
	// identifiers were reserved) may be dropped; a stream's table not.
	t, err := s.o.Catalog.LoadTable(r.Context(), id)
	if err == nil {
		err = s.streamTable(t, "drop")
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.o.Catalog.DropTable(r.Context(), id); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) renameTable(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Source      tableIdent `json:"source"`
		Destination tableIdent `json:"destination"`
	}
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	from := append(slices.Clone(req.Source.Namespace), req.Source.Name)
	to := append(slices.Clone(req.Destination.Namespace), req.Destination.Name)
	if len(req.Source.Namespace) == 0 || len(req.Destination.Namespace) == 0 || req.Source.Name == "" || req.Destination.Name == "" {
		s.fail(w, r, fmt.Errorf("%w: rename needs a source and a destination, each with a namespace and a name", errBadRequest))
		return
	}
	err := s.canWrite(r, req.Source.Namespace)
	if err == nil {
		err = s.canWrite(r, req.Destination.Namespace)
	}
	if err == nil {
		err = s.reserved(to, "rename a table onto")
	}
	if err == nil && req.Source.Namespace[0] != req.Destination.Namespace[0] {
		err = fmt.Errorf("%w: a table stays in its first namespace level %q (its files are in that level's directory of the warehouse)", ErrForbidden, req.Source.Namespace[0])
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	t, err := s.o.Catalog.LoadTable(r.Context(), from)
	if err == nil {
		err = s.streamTable(t, "rename")
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if _, err := s.o.Catalog.RenameTable(r.Context(), from, to); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) credentials(w http.ResponseWriter, r *http.Request) {
	id, err := ident(r)
	if err == nil {
		err = s.canRead(r, catalog.NamespaceFromIdent(id), catalog.TableNameFromIdent(id))
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	t, err := s.o.Catalog.LoadTable(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	creds := []map[string]any{}
	if cfg := s.clientConfig(r); len(cfg) > 0 {
		creds = append(creds, map[string]any{"prefix": t.Location(), "config": cfg})
	}
	writeJSON(w, http.StatusOK, map[string]any{"storage-credentials": creds})
}

// metrics accepts a client's scan or commit report and drops it.
func (s *server) metrics(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxBodyBytes))
	w.WriteHeader(http.StatusNoContent)
}
