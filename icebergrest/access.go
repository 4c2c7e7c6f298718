package icebergrest

// Who may do what (docs/iceberg-catalog.md, "Who may do what"). The
// principal of a request is what authentication found (Auth: an OAuth
// client's id, or the role of a lakegate token); Options.Authorizer, when
// set, decides per namespace and table with the node's grants. Without an
// Authorizer every principal reads everything, and writes only when
// Options.AllowWrites is set: a catalog without authorization is
// read-only by default.

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/apache/iceberg-go/table"
)

// Authorizer decides what a principal may do; lakegate's is the gateway's
// grants (gateway.TableAccess). Its methods are called for every request
// and must be safe for concurrent use. A refusal is an error wrapping
// ErrForbidden (answered 403 with its message); any other error means the
// decision could not be made (answered 503).
type Authorizer interface {
	// CanRead allows principal to see namespace ns (name "") or to load
	// its table name.
	CanRead(ctx context.Context, principal string, ns []string, name string) error
	// CanWrite allows principal to change namespace ns and its tables
	// (create, register, commit, drop, rename, namespace properties).
	CanWrite(ctx context.Context, principal string, ns []string) error
	// IsSuperUser reports whether principal may do everything; only
	// superusers receive Options.StoreCredentials.
	IsSuperUser(principal string) bool
}

// ErrForbidden is a refusal: by the Authorizer, by the storage policy
// (policy.go), on a stream's table, or of a write to a read-only catalog.
// Answered 403 ForbiddenException.
var ErrForbidden = errors.New("icebergrest: forbidden")

// errUnavailable: an authorization decision could not be made (503).
var errUnavailable = errors.New("icebergrest: unavailable")

// principalKey carries the authenticated principal in a request's
// context.
type principalKey struct{}

// principal is the principal of r ("" when the catalog authenticates
// nobody).
func principal(r *http.Request) string {
	p, _ := r.Context().Value(principalKey{}).(string)
	return p
}

func authzErr(err error) error {
	if err == nil || errors.Is(err, ErrForbidden) {
		return err
	}
	return fmt.Errorf("%w: authorization: %w", errUnavailable, err)
}

// canRead allows r's principal to see ns (name "") or its table name.
func (s *server) canRead(r *http.Request, ns table.Identifier, name string) error {
	if s.o.Authorizer == nil {
		return nil
	}
	return authzErr(s.o.Authorizer.CanRead(r.Context(), principal(r), ns, name))
}

// canSee allows r's principal to see namespace ns: it may read ns, or,
// for a one-level namespace (a tenant), one of its child namespaces.
func (s *server) canSee(r *http.Request, ns table.Identifier) error {
	err := s.canRead(r, ns, "")
	if err == nil || !errors.Is(err, ErrForbidden) || len(ns) != 1 {
		return err
	}
	children, lerr := s.o.Catalog.ListNamespaces(r.Context(), ns)
	if lerr != nil {
		return err
	}
	for _, c := range children {
		cerr := s.canRead(r, c, "")
		if cerr == nil {
			return nil
		}
		if !errors.Is(cerr, ErrForbidden) {
			return cerr
		}
	}
	return err
}

// canWrite allows r's principal to change ns and its tables.
func (s *server) canWrite(r *http.Request, ns table.Identifier) error {
	if s.o.Authorizer != nil {
		return authzErr(s.o.Authorizer.CanWrite(r.Context(), principal(r), ns))
	}
	if !s.o.AllowWrites {
		return fmt.Errorf("%w: this catalog is read-only: the node checks no grants, and writes through it are off (tables.iceberg.allowWrites)", ErrForbidden)
	}
	return nil
}

// clientConfig is the FileIO configuration handed to r's principal with a
// table: Options.ClientConfig, plus Options.StoreCredentials for a
// superuser (or for everyone without an Authorizer).
func (s *server) clientConfig(r *http.Request) map[string]string {
	if len(s.o.ClientConfig) == 0 && len(s.o.StoreCredentials) == 0 {
		return nil
	}
	out := make(map[string]string, len(s.o.ClientConfig)+len(s.o.StoreCredentials))
	for k, v := range s.o.ClientConfig {
		out[k] = v
	}
	if len(s.o.StoreCredentials) > 0 && (s.o.Authorizer == nil || s.o.Authorizer.IsSuperUser(principal(r))) {
		for k, v := range s.o.StoreCredentials {
			out[k] = v
		}
	}
	return out
}
