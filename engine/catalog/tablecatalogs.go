package catalog

import (
	"context"
	"fmt"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
)

// RegisterTableCatalog registers a table catalog (ErrAlreadyExists).
func (c *Catalog) RegisterTableCatalog(ctx context.Context, tc lakestream.TableCatalog) error {
	if err := validateTableCatalogName(tc.Name); err != nil {
		return err
	}
	switch tc.Type {
	case lakestream.TableIceberg, lakestream.TableDelta:
	default:
		return fmt.Errorf("%w: table catalog %s: type %q", lakestream.ErrInvalidArgument, tc.Name, tc.Type)
	}
	r := tableCatalogRecord{V: recordVersion, Name: tc.Name, Type: tc.Type, Connection: tc.Connection, Properties: cloneMap(tc.Properties)}
	key := c.keys.tableCatalog(tc.Name)
	ok, _, err := c.txnOnce(ctx, "register table catalog", []meta.Cmp{{Key: key}}, []meta.Op{meta.Put(key, encode(&r))})
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: table catalog %s", lakestream.ErrAlreadyExists, tc.Name)
	}
	return nil
}

// UnregisterTableCatalog removes a table catalog (ErrNoSuchTableCatalog).
// Policies that name it are not changed.
func (c *Catalog) UnregisterTableCatalog(ctx context.Context, name string) error {
	if err := validateTableCatalogName(name); err != nil {
		return err
	}
	const op = "unregister table catalog"
	key := c.keys.tableCatalog(name)
	return c.commit(ctx, op, func() (*plan, error) {
		kv, found, err := c.get(ctx, op, key)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, fmt.Errorf("%w: %s", lakestream.ErrNoSuchTableCatalog, name)
		}
		return &plan{cmps: []meta.Cmp{{Key: key, ModRevision: kv.ModRevision}}, ops: []meta.Op{meta.Delete(key)}}, nil
	})
}

// GetTableCatalog returns a registered table catalog (ErrNoSuchTableCatalog).
func (c *Catalog) GetTableCatalog(ctx context.Context, name string) (lakestream.TableCatalog, error) {
	if err := c.check(); err != nil {
		return lakestream.TableCatalog{}, err
	}
	if err := validateTableCatalogName(name); err != nil {
		return lakestream.TableCatalog{}, err
	}
	key := c.keys.tableCatalog(name)
	kv, found, err := c.get(ctx, "get table catalog", key)
	if err != nil {
		return lakestream.TableCatalog{}, err
	}
	if !found {
		return lakestream.TableCatalog{}, fmt.Errorf("%w: %s", lakestream.ErrNoSuchTableCatalog, name)
	}
	var r tableCatalogRecord
	if err := decode(key, kv.Value, &r, func() int { return r.V }); err != nil {
		return lakestream.TableCatalog{}, err
	}
	return r.toTableCatalog(), nil
}

// ListTableCatalogs returns every registered table catalog in key order.
func (c *Catalog) ListTableCatalogs(ctx context.Context) ([]lakestream.TableCatalog, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	p := c.keys.tableCatalogPrefix()
	kvs, err := c.rangePrefix(ctx, "list table catalogs", p)
	if err != nil {
		return nil, err
	}
	out := make([]lakestream.TableCatalog, 0, len(kvs))
	for _, kv := range kvs {
		var r tableCatalogRecord
		if err := decode(kv.Key, kv.Value, &r, func() int { return r.V }); err != nil {
			return nil, err
		}
		out = append(out, r.toTableCatalog())
	}
	return out, nil
}
