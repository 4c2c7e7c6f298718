package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/apache/iceberg-go/table"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/auth"
	"github.com/lakegate/lakegate/gateway"
	"github.com/lakegate/lakegate/icebergrest"
	"github.com/lakegate/lakegate/lakehouse/iceberg"
	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/node"
	"github.com/lakegate/lakegate/tables"
)

// defaultMaterialization is the cluster default policy for the configured
// formats.
func defaultMaterialization(formats []string) *lakestream.TableMaterializationPolicy {
	enabled := len(formats) > 0 && !(len(formats) == 1 && strings.EqualFold(formats[0], "none"))
	p := &lakestream.TableMaterializationPolicy{Enabled: &enabled}
	if enabled {
		for _, f := range formats {
			p.Catalogs = append(p.Catalogs, strings.ToUpper(f))
		}
	}
	return p
}

// startTables stores the cluster default materialization from the
// configuration and, when enabled, starts this node's compaction worker
// (nil when not), which compacts the tables member owns for compaction.
func startTables(ctx context.Context, c *Config, n *node.Node, cat lakestream.StreamCatalog, rt actors.Runtime, member lakestream.Membership, log *slog.Logger) (*actors.CompactionWorker, error) {
	if err := cat.SetDefaultMaterialization(ctx, defaultMaterialization(c.Tables.Formats)); err != nil {
		return nil, err
	}
	if !c.Tables.Compaction {
		return nil, nil
	}
	return actors.StartCompactionWorker(rt, actors.CompactionWorkerOptions{
		Catalog:      cat,
		Compactor:    n.Tables.Materializer(),
		Membership:   member,
		Policy:       actors.CompactionPolicy{Interval: c.Tables.Interval, MaxInflight: c.Tables.MaxInflight},
		ScanInterval: c.Tables.ScanInterval,
		Logger:       log,
	}), nil
}

// icebergKind resolves tables.iceberg.kind: auto is sql for a standalone
// node (embedded etcd), lakegate for a cluster node.
func icebergKind(c *Config) string {
	if k := c.Tables.Iceberg.Kind; k != "auto" && k != "" {
		return k
	}
	if len(c.Etcd.Endpoints) == 0 {
		return iceberg.KindSQL
	}
	return iceberg.KindLakegate
}

// icebergCatalogConfig maps the tables.iceberg keys to the table layer's
// catalog configuration (the store URL, the sqlite default and the
// lakegate catalog's metadata store are filled in by node.Start).
func icebergCatalogConfig(c *Config) iceberg.CatalogConfig {
	ic := iceberg.CatalogConfig{Kind: icebergKind(c), URI: c.Tables.Iceberg.URI}
	props := map[string]string{}
	for k, v := range map[string]string{"warehouse": c.Tables.Iceberg.Warehouse, "credential": c.Tables.Iceberg.Credential, "token": c.Tables.Iceberg.Token} {
		if v != "" {
			props[k] = v
		}
	}
	if len(props) > 0 {
		ic.Props = props
	}
	return ic
}

// icebergREST returns the node's Iceberg REST catalog handler (mounted at
// /iceberg/ by httpHandler), or nil when tables.iceberg.rest is off or the
// catalog is an external one. gw's grants decide who reads and writes
// what when authorization is on (docs/iceberg-catalog.md, "Who may do
// what").
func icebergREST(ctx context.Context, c *Config, n *node.Node, gw *gateway.Server, sec *security, log *slog.Logger) (http.Handler, error) {
	kind := icebergKind(c)
	if !c.Tables.Iceberg.REST || (kind != iceberg.KindSQL && kind != iceberg.KindLakegate) {
		return nil, nil
	}
	cat, err := n.Tables.IcebergCatalog(ctx)
	if err != nil {
		return nil, err
	}
	clientProps, storeCreds, err := icebergClientConfig(n.Config.ObjectURL, c.Tables.Iceberg.VendStoreCredentials)
	if err != nil {
		return nil, err
	}
	for _, kv := range c.Tables.Iceberg.ClientProps {
		k, v, _ := strings.Cut(kv, "=")
		if clientProps == nil {
			clientProps = map[string]string{}
		}
		clientProps[k] = v
	}
	o := icebergrest.Options{Catalog: cat.Catalog(), Warehouse: cat.Warehouse(),
		ClientConfig: clientProps, StoreCredentials: storeCreds,
		ReadOnly: iceberg.IsStreamTable, Reserved: func(id table.Identifier) bool { return tables.IsStreamIdent(id) },
		AllowWrites: c.Tables.Iceberg.AllowWrites, Logger: log}
	if len(c.Tables.Iceberg.Clients) > 0 {
		o.Auth = &icebergrest.Auth{Clients: map[string]string{}, Key: []byte(c.Tables.Iceberg.TokenKey)}
		for _, cl := range c.Tables.Iceberg.Clients {
			id, secret, _ := strings.Cut(cl, ":")
			o.Auth.Clients[id] = secret
		}
	}
	if sec.authn != nil {
		// A node with authentication never serves its tables anonymously:
		// lakegate's Pulsar tokens are bearer tokens here too.
		if o.Auth == nil {
			o.Auth = &icebergrest.Auth{}
		}
		o.Auth.Verify = func(token string) (string, error) {
			id, err := sec.authn.Authenticate(auth.MethodToken, []byte(token), nil)
			if err != nil {
				return "", err
			}
			return id.Role, nil
		}
	}
	if ta := gw.TableAccess(); ta.Enabled() {
		// The principal of a request — an OAuth client's id or a token's
		// role — is a role: the grants decide.
		o.Authorizer = icebergAuthorizer{ta}
	}
	return http.StripPrefix("/iceberg", icebergrest.Handler(o)), nil
}

// icebergClientConfig splits the FileIO configuration of the store at
// storeURL into what every REST catalog client gets (where the store is)
// and, when vend, the node's own store credentials (handed to superusers
// only when authorization is on).
func icebergClientConfig(storeURL string, vend bool) (public, secrets map[string]string, err error) {
	public, err = iceberg.ClientProps(storeURL, false)
	if errors.Is(err, iceberg.ErrUnsupportedStore) {
		return nil, nil, nil
	}
	if err != nil || !vend {
		return public, nil, err
	}
	all, err := iceberg.ClientProps(storeURL, true)
	if err != nil {
		return nil, nil, err
	}
	for k, v := range all {
		if _, ok := public[k]; !ok {
			if secrets == nil {
				secrets = map[string]string{}
			}
			secrets[k] = v
		}
	}
	return public, secrets, nil
}

// icebergAuthorizer is the gateway's grants as the REST catalog asks
// them (icebergrest.Authorizer): a refusal (gateway.ErrAuthorization) is
// icebergrest.ErrForbidden.
type icebergAuthorizer struct{ ta gateway.TableAccess }

func (a icebergAuthorizer) CanRead(ctx context.Context, principal string, ns []string, name string) error {
	return forbidden(a.ta.CanRead(ctx, principal, ns, name))
}

func (a icebergAuthorizer) CanWrite(ctx context.Context, principal string, ns []string) error {
	return forbidden(a.ta.CanWrite(ctx, principal, ns))
}

func (a icebergAuthorizer) IsSuperUser(principal string) bool { return a.ta.IsSuperUser(principal) }

func forbidden(err error) error {
	if errors.Is(err, gateway.ErrAuthorization) {
		return fmt.Errorf("%w: %w", icebergrest.ErrForbidden, err)
	}
	return err
}

// topicUnits is the membership the gateway sees: the same, but Owned lists
// topics only, not the compaction worker's units (the gateway hands every
// owned unit over as a topic when it rebalances or drains).
type topicUnits struct{ lakestream.Membership }

func (m topicUnits) Owned() []lakestream.Ownership {
	var out []lakestream.Ownership
	for _, o := range m.Membership.Owned() {
		if !actors.IsCompactionUnit(o.Unit()) {
			out = append(out, o)
		}
	}
	return out
}
