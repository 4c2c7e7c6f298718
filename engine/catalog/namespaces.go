package catalog

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/lakegate/lakegate/lakestream"
	"github.com/lakegate/lakegate/meta"
)

// loadNamespace reads a namespace record and its ModRevision
// (lakestream.ErrNoSuchNamespace when absent).
func (c *Catalog) loadNamespace(ctx context.Context, op, ns string) (*namespaceRecord, int64, error) {
	key := c.keys.namespace(ns)
	kv, found, err := c.get(ctx, op, key)
	if err != nil {
		return nil, 0, err
	}
	if !found {
		return nil, 0, fmt.Errorf("%w: %s", lakestream.ErrNoSuchNamespace, ns)
	}
	var r namespaceRecord
	if err := decode(key, kv.Value, &r, func() int { return r.V }); err != nil {
		return nil, 0, err
	}
	return &r, kv.ModRevision, nil
}

// CreateNamespace creates a namespace ("ns" or "tenant/ns").
// ErrAlreadyExists if it exists.
func (c *Catalog) CreateNamespace(ctx context.Context, name string, props map[string]string) (lakestream.Namespace, error) {
	if err := validateNamespace(name); err != nil {
		return lakestream.Namespace{}, err
	}
	r := namespaceRecord{V: recordVersion, Name: name, Properties: cloneMap(props), CreatedAtMs: c.nowMs(), Version: 1}
	key := c.keys.namespace(name)
	ok, _, err := c.txnOnce(ctx, "create namespace",
		[]meta.Cmp{{Key: key}}, []meta.Op{meta.Put(key, encode(&r))})
	if err != nil {
		return lakestream.Namespace{}, err
	}
	if !ok {
		return lakestream.Namespace{}, fmt.Errorf("%w: namespace %s", lakestream.ErrAlreadyExists, name)
	}
	return r.toNamespace(), nil
}

// txnOnce is one transaction without retry, for creates whose only compare
// is "absent".
func (c *Catalog) txnOnce(ctx context.Context, op string, cmps []meta.Cmp, ops []meta.Op) (bool, int64, error) {
	if err := c.check(); err != nil {
		return false, 0, err
	}
	ok, rev, err := c.store.Txn(ctx, cmps, ops)
	if err != nil {
		return false, 0, storeErr(op, err)
	}
	return ok, rev, nil
}

// ListNamespaces returns every namespace name, sorted.
func (c *Catalog) ListNamespaces(ctx context.Context) ([]string, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	p := c.keys.namespacePrefix()
	kvs, err := c.rangePrefix(ctx, "list namespaces", p)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(kvs))
	for _, kv := range kvs {
		n, err := unescapeSegment(strings.TrimPrefix(kv.Key, p))
		if err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

// LoadNamespace returns a namespace (ErrNoSuchNamespace).
func (c *Catalog) LoadNamespace(ctx context.Context, name string) (lakestream.Namespace, error) {
	if err := c.check(); err != nil {
		return lakestream.Namespace{}, err
	}
	if err := validateNamespace(name); err != nil {
		return lakestream.Namespace{}, err
	}
	r, _, err := c.loadNamespace(ctx, "load namespace", name)
	if err != nil {
		return lakestream.Namespace{}, err
	}
	return r.toNamespace(), nil
}

// NamespaceExists reports whether the namespace exists.
func (c *Catalog) NamespaceExists(ctx context.Context, name string) (bool, error) {
	if err := c.check(); err != nil {
		return false, err
	}
	if err := validateNamespace(name); err != nil {
		return false, err
	}
	_, found, err := c.get(ctx, "namespace exists", c.keys.namespace(name))
	return found, err
}

// DropNamespace deletes an empty namespace: ErrNamespaceNotEmpty while
// streams remain, ErrNoSuchNamespace if absent. Tombstones of its dropped
// streams stay (the names remain unusable if the namespace is recreated).
func (c *Catalog) DropNamespace(ctx context.Context, name string) error {
	if err := validateNamespace(name); err != nil {
		return err
	}
	const op = "drop namespace"
	return c.commit(ctx, op, func() (*plan, error) {
		_, rev, err := c.loadNamespace(ctx, op, name)
		if err != nil {
			return nil, err
		}
		p := c.keys.streamPrefix(name)
		kvs, err := c.store.Range(ctx, p, prefixEnd(p), 1)
		if err != nil {
			return nil, storeErr(op, err)
		}
		if len(kvs) > 0 {
			return nil, fmt.Errorf("%w: %s", lakestream.ErrNamespaceNotEmpty, name)
		}
		// A CreateStream between the Range and this Txn touches the
		// namespace key, so the compare fails and we look again.
		key := c.keys.namespace(name)
		return &plan{
			cmps: []meta.Cmp{{Key: key, ModRevision: rev}},
			ops:  []meta.Op{meta.Delete(key)},
		}, nil
	})
}

// updateNamespace applies change to the namespace record in one CAS.
func (c *Catalog) updateNamespace(ctx context.Context, op, name string, change func(*namespaceRecord) error) error {
	if err := validateNamespace(name); err != nil {
		return err
	}
	return c.commit(ctx, op, func() (*plan, error) {
		r, rev, err := c.loadNamespace(ctx, op, name)
		if err != nil {
			return nil, err
		}
		if err := change(r); err != nil {
			return nil, err
		}
		r.Version++
		key := c.keys.namespace(name)
		return &plan{
			cmps: []meta.Cmp{{Key: key, ModRevision: rev}},
			ops:  []meta.Op{meta.Put(key, encode(r))},
		}, nil
	})
}

// SetNamespaceProperties sets (adds or overwrites) properties.
func (c *Catalog) SetNamespaceProperties(ctx context.Context, name string, set map[string]string) error {
	return c.updateNamespace(ctx, "set namespace properties", name, func(r *namespaceRecord) error {
		if r.Properties == nil {
			r.Properties = map[string]string{}
		}
		maps.Copy(r.Properties, set)
		return nil
	})
}

// RemoveNamespaceProperties removes properties (absent keys are ignored).
func (c *Catalog) RemoveNamespaceProperties(ctx context.Context, name string, keys []string) error {
	return c.updateNamespace(ctx, "remove namespace properties", name, func(r *namespaceRecord) error {
		for _, k := range keys {
			delete(r.Properties, k)
		}
		return nil
	})
}

// SetNamespaceMaterialization sets the namespace's policy (nil clears it).
func (c *Catalog) SetNamespaceMaterialization(ctx context.Context, name string, p *lakestream.TableMaterializationPolicy) error {
	if err := validatePolicy(p); err != nil {
		return err
	}
	return c.updateNamespace(ctx, "set namespace materialization", name, func(r *namespaceRecord) error {
		r.Materialization = toPolicyRecord(p)
		return nil
	})
}

// SetDefaultMaterialization sets the cluster default policy (nil clears it).
func (c *Catalog) SetDefaultMaterialization(ctx context.Context, p *lakestream.TableMaterializationPolicy) error {
	if err := c.check(); err != nil {
		return err
	}
	if err := validatePolicy(p); err != nil {
		return err
	}
	key := c.keys.defaultMaterialization()
	op := meta.Delete(key)
	if p != nil {
		op = meta.Put(key, encode(&defaultPolicyRecord{V: recordVersion, Policy: toPolicyRecord(p)}))
	}
	// A blind write: the last setter wins, as for any single-value setting.
	_, _, err := c.txnOnce(ctx, "set default materialization", nil, []meta.Op{op})
	return err
}

// DefaultMaterialization returns the cluster default policy (nil if unset).
func (c *Catalog) DefaultMaterialization(ctx context.Context) (*lakestream.TableMaterializationPolicy, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	key := c.keys.defaultMaterialization()
	kv, found, err := c.get(ctx, "default materialization", key)
	if err != nil || !found {
		return nil, err
	}
	var r defaultPolicyRecord
	if err := decode(key, kv.Value, &r, func() int { return r.V }); err != nil {
		return nil, err
	}
	return fromPolicyRecord(r.Policy), nil
}
