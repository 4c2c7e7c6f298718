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
// It imports iceberg-go and metacat (for its sentinel errors) only:
// nothing of the engine or the table layer.
package icebergrest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/lakegate/lakegate/lakehouse/iceberg/metacat"
)

// Stager is what a catalog offers for stage-create (StageTable) and
// register (RegisterTable); metacat.Catalog has both. A catalog without
// them answers those requests 501.
type Stager interface {
	StageTable(ctx context.Context, ident table.Identifier, sc *ice.Schema, opts ...catalog.CreateTableOpt) (table.Metadata, error)
	RegisterTable(ctx context.Context, ident table.Identifier, metadataLocation string) (*table.Table, error)
}

// Options configure Handler.
type Options struct {
	// Catalog is the catalog served. Required.
	Catalog catalog.Catalog
	// ClientConfig is the FileIO configuration handed to every client with
	// a loaded table ("config" of LoadTableResult) and as the table's
	// storage credentials (GET …/credentials): the store's endpoint and
	// region, and whatever credentials the operator chose to give readers
	// (docs/iceberg-catalog.md, "Credentials"). Nil: none.
	ClientConfig map[string]string
	// ReadOnly reports whether a table, by its properties, refuses commits
	// from clients (lakegate's stream tables, which only lakegate writes):
	// such commits get 403 ForbiddenException. Nil: none does.
	ReadOnly func(props ice.Properties) bool
	// Auth, when set, authenticates every request but the token endpoint;
	// nil serves without authentication.
	Auth *Auth
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
	s := &server{o: o}
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

type server struct{ o Options }

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
	case errors.Is(err, errForbidden) || errors.Is(err, metacat.ErrForbidden):
		code, typ = http.StatusForbidden, "ForbiddenException"
	case errors.Is(err, errBadRequest) || errors.Is(err, metacat.ErrInvalid) || errors.Is(err, catalog.ErrInvalidIdentifier):
		code, typ = http.StatusBadRequest, "BadRequestException"
	case errors.Is(err, metacat.ErrUnavailable):
		code, typ = http.StatusServiceUnavailable, "ServiceUnavailableException"
	}
	if code >= 500 {
		s.o.Logger.Warn("iceberg rest: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeError(w, code, typ, err.Error())
}

var (
	errBadRequest = errors.New("icebergrest: bad request")
	errForbidden  = errors.New("icebergrest: forbidden")
)

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
	}
	nss, err := s.o.Catalog.ListNamespaces(r.Context(), parent)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if nss == nil {
		nss = []table.Identifier{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespaces": nss})
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
	if err := s.o.Catalog.CreateNamespace(r.Context(), req.Namespace, req.Properties); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Properties == nil {
		req.Properties = map[string]string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespace": req.Namespace, "properties": req.Properties})
}

func (s *server) loadNamespace(w http.ResponseWriter, r *http.Request) {
	ns, err := namespace(r)
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
	sum, err := s.o.Catalog.UpdateNamespaceProperties(r.Context(), ns, req.Removals, req.Updates)
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
	out := []tableIdent{}
	for id, err := range s.o.Catalog.ListTables(r.Context(), ns) {
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out = append(out, tableIdent{Namespace: catalog.NamespaceFromIdent(id), Name: catalog.TableNameFromIdent(id)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"identifiers": out})
}

func (s *server) result(t *table.Table) loadTableResult {
	return loadTableResult{MetadataLocation: t.MetadataLocation(), Metadata: t.Metadata(), Config: maps.Clone(s.o.ClientConfig)}
}

func (s *server) createTable(w http.ResponseWriter, r *http.Request) {
	ns, err := namespace(r)
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
	opts := []catalog.CreateTableOpt{catalog.WithProperties(req.Properties)}
	if req.Location != "" {
		opts = append(opts, catalog.WithLocation(req.Location))
	}
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
		writeJSON(w, http.StatusOK, loadTableResult{Metadata: md, Config: maps.Clone(s.o.ClientConfig)})
		return
	}
	t, err := s.o.Catalog.CreateTable(r.Context(), id, req.Schema, opts...)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.result(t))
}

func (s *server) registerTable(w http.ResponseWriter, r *http.Request) {
	ns, err := namespace(r)
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
	st, ok := s.o.Catalog.(Stager)
	if !ok {
		writeError(w, http.StatusNotImplemented, "UnsupportedOperationException", "register is not supported")
		return
	}
	t, err := st.RegisterTable(r.Context(), append(slices.Clone(ns), req.Name), req.MetadataLocation)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.result(t))
}

func (s *server) loadTable(w http.ResponseWriter, r *http.Request) {
	id, err := ident(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	t, err := s.o.Catalog.LoadTable(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.result(t))
}

func (s *server) tableExists(w http.ResponseWriter, r *http.Request) {
	id, err := ident(r)
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

func (s *server) commitTable(w http.ResponseWriter, r *http.Request) {
	id, err := ident(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req commitTableRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if s.o.ReadOnly != nil {
		if t, err := s.o.Catalog.LoadTable(r.Context(), id); err == nil && s.o.ReadOnly(t.Properties()) {
			s.fail(w, r, fmt.Errorf("%w: %s is a stream's table: lakegate writes it, clients read it", errForbidden, strings.Join(id, ".")))
			return
		}
	}
	md, loc, err := s.o.Catalog.CommitTable(r.Context(), id, req.Requirements, req.Updates)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, loadTableResult{MetadataLocation: loc, Metadata: md})
}

func (s *server) dropTable(w http.ResponseWriter, r *http.Request) {
	id, err := ident(r)
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
	if _, err := s.o.Catalog.RenameTable(r.Context(), from, to); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) credentials(w http.ResponseWriter, r *http.Request) {
	id, err := ident(r)
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
	if len(s.o.ClientConfig) > 0 {
		creds = append(creds, map[string]any{"prefix": t.Location(), "config": s.o.ClientConfig})
	}
	writeJSON(w, http.StatusOK, map[string]any{"storage-credentials": creds})
}

// metrics accepts a client's scan or commit report and drops it.
func (s *server) metrics(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxBodyBytes))
	w.WriteHeader(http.StatusNoContent)
}
