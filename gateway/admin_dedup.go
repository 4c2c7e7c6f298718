package gateway

// Topic deduplication policy through the admin REST API, the way Pulsar's
// `pulsar-admin topics set-deduplication` and the client admin libraries
// call it:
//
//	GET    /admin/v2/persistent/{tenant}/{ns}/{topic}/deduplicationEnabled  → true | false | null (no policy;
//	                                                                       false with ?applied=true)
//	POST   /admin/v2/persistent/{tenant}/{ns}/{topic}/deduplicationEnabled  body true | false
//	DELETE /admin/v2/persistent/{tenant}/{ns}/{topic}/deduplicationEnabled  (back to the default: off)
//
// The policy is the stream property dedupProperty (dedup.go), so it holds
// for every partition of a partitioned topic. A topic reads it when it is
// loaded; so that a change takes effect at once, POST and DELETE unload
// the topic's partitions that are loaded on this node and idle (no
// producer, no consumer). While a producer or consumer is connected the
// change is refused with 412 and a reason saying so: lakegate cannot yet
// switch deduplication under a live producer.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/lakegate/lakegate/actors"
	"github.com/lakegate/lakegate/lakestream"
)

// dedupPolicyRetries bounds the compare-and-set loop on stream properties.
const dedupPolicyRetries = 8

func (a *admin) getDeduplication(w http.ResponseWriter, r *http.Request) {
	ref, err := a.refOf(r)
	if err != nil {
		writeAdminError(w, err)
		return
	}
	switch v := ref.md.Properties[dedupProperty]; {
	case v == "true" || v == "false":
		writeJSON(w, http.StatusOK, v == "true")
	case queryBool(r, "applied"): // the effective value: the namespace's, else off
		on, err := a.srv.dedupEnabled(r.Context(), ref.md)
		if err != nil {
			writeAdminError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, on)
	default:
		writeJSON(w, http.StatusOK, nil) // no topic-level policy, as in Pulsar
	}
}

func (a *admin) setDeduplication(w http.ResponseWriter, r *http.Request) {
	b, err := readBody(r)
	if err != nil {
		writeAdminError(w, err)
		return
	}
	var on bool
	if b == nil {
		err = fmt.Errorf("%w: the body must be true or false", errAdminBadRequest)
	} else if jerr := json.Unmarshal(b, &on); jerr != nil {
		err = fmt.Errorf("%w: the body must be true or false: %v", errAdminBadRequest, jerr)
	}
	if err != nil {
		writeAdminError(w, err)
		return
	}
	value := "false"
	if on {
		value = "true"
	}
	a.changeDeduplication(w, r, &value)
}

func (a *admin) removeDeduplication(w http.ResponseWriter, r *http.Request) {
	a.changeDeduplication(w, r, nil)
}

// changeDeduplication sets (value != nil) or removes the policy, then
// unloads the idle loaded partitions so the next use reads it.
func (a *admin) changeDeduplication(w http.ResponseWriter, r *http.Request, value *string) {
	ctx := r.Context()
	ref, err := a.refOf(r)
	if err != nil {
		writeAdminError(w, err)
		return
	}
	if ref.partition >= 0 {
		writeAdminError(w, fmt.Errorf("%w: deduplication is a policy of the whole topic %s, not of one partition", errAdminMethodNotAllowed, ref.name.Base()))
		return
	}
	id := fullStreamID(ref.name)
	if err := a.srv.unloadIdle(id); err != nil {
		writeAdminError(w, err)
		return
	}
	md := ref.md
	for range dedupPolicyRetries {
		props := maps.Clone(md.Properties)
		if props == nil {
			props = map[string]string{}
		}
		if value != nil {
			props[dedupProperty] = *value
		} else {
			delete(props, dedupProperty)
		}
		var ok bool
		md, ok, err = a.cat.ReplaceStreamProperties(ctx, id, props, md.MetadataVersion)
		if err != nil {
			writeAdminError(w, err)
			return
		}
		if ok {
			// A client may have loaded the topic between unloadIdle and
			// the change: unload again so it reads the new policy.
			if err := a.srv.unloadIdle(id); err != nil {
				writeAdminError(w, err)
				return
			}
			noContent(w)
			return
		}
	}
	writeAdminError(w, fmt.Errorf("%w: topic %s properties changed concurrently, retry", errAdminConflict, ref.name))
}

// unloadIdle drops from this node's topic table every loaded topic of
// stream id (each partition, or the topic itself), so the next use loads
// it afresh; it fails with errAdminPrecondition, unloading nothing, while
// any of them has a producer or a consumer connected. (A client that
// resolved the topic just before the unload keeps the old one until it
// reconnects, as with dropStream.)
func (s *Server) unloadIdle(id lakestream.StreamIdentifier) error {
	s.mu.Lock()
	var loaded []*topic
	for _, t := range s.mu.topics {
		if t.name.StreamID() == id || (t.name.Partition < 0 && fullStreamID(t.name) == id) {
			loaded = append(loaded, t)
		}
	}
	s.mu.Unlock()
	for _, t := range loaded {
		t.mu.Lock()
		producers := len(t.mu.producers)
		subs := slices.Collect(maps.Values(t.mu.subs))
		t.mu.Unlock()
		if producers > 0 {
			return fmt.Errorf("%w: topic %s has %d connected producers: close them, then change deduplication", errAdminPrecondition, t.name, producers)
		}
		for _, sub := range subs {
			if info, err := sub.Info(); err == nil && info.Consumers > 0 {
				return fmt.Errorf("%w: topic %s has connected consumers: close them, then change deduplication", errAdminPrecondition, t.name)
			}
		}
	}
	var subs []*actors.SubscriptionActor
	var cursors []lakestream.LogCursor
	s.mu.Lock()
	for _, t := range loaded {
		if s.mu.topics[t.name.String()] != t {
			continue
		}
		delete(s.mu.topics, t.name.String())
		t.mu.Lock()
		subs = slices.AppendSeq(subs, maps.Values(t.mu.subs))
		clear(t.mu.subs)
		t.mu.Unlock()
		if t.dedup != nil {
			cursors = append(cursors, t.dedup.cursor)
		}
	}
	s.mu.Unlock()
	for _, sub := range subs {
		sub.Close() // persists its cursor; the next load reopens it
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminRequestTimeout)
	defer cancel()
	for _, c := range cursors {
		c.Close(ctx)
	}
	return nil
}

// Namespace deduplication policy (`pulsar-admin namespaces
// set-deduplication`), the default for the namespace's topics that have no
// topic-level policy:
//
//	GET    /admin/v2/namespaces/{tenant}/{ns}/deduplication  → true | false | null
//	POST   /admin/v2/namespaces/{tenant}/{ns}/deduplication  body true | false
//	DELETE /admin/v2/namespaces/{tenant}/{ns}/deduplication
//
// Stored as the namespace property dedupProperty; dedupEnabled reads it
// when a topic loads. A change unloads the namespace's idle loaded topics
// and is refused with 412 while any of them has a producer or consumer.

func (a *admin) namespaceOf(r *http.Request) (string, error) {
	tenant, ns := r.PathValue("tenant"), r.PathValue("ns")
	if err := errors.Join(validName("tenant", tenant), validName("namespace", ns)); err != nil {
		return "", err
	}
	if err := a.checkNamespace(r.Context(), tenant, ns); err != nil {
		return "", err
	}
	return tenant + "/" + ns, nil
}

func (a *admin) getNamespaceDeduplication(w http.ResponseWriter, r *http.Request) {
	name, err := a.namespaceOf(r)
	var nsmd lakestream.Namespace
	if err == nil {
		nsmd, err = a.cat.LoadNamespace(r.Context(), name)
	}
	if err != nil {
		writeAdminError(w, err)
		return
	}
	switch v := nsmd.Properties[dedupProperty]; v {
	case "true", "false":
		writeJSON(w, http.StatusOK, v == "true")
	default:
		writeJSON(w, http.StatusOK, nil)
	}
}

func (a *admin) setNamespaceDeduplication(w http.ResponseWriter, r *http.Request) {
	b, err := readBody(r)
	var on bool
	if err == nil && b == nil {
		err = fmt.Errorf("%w: the body must be true or false", errAdminBadRequest)
	} else if err == nil {
		if jerr := json.Unmarshal(b, &on); jerr != nil {
			err = fmt.Errorf("%w: the body must be true or false: %v", errAdminBadRequest, jerr)
		}
	}
	if err != nil {
		writeAdminError(w, err)
		return
	}
	a.changeNamespaceDeduplication(w, r, map[bool]string{true: "true", false: "false"}[on])
}

func (a *admin) removeNamespaceDeduplication(w http.ResponseWriter, r *http.Request) {
	a.changeNamespaceDeduplication(w, r, "")
}

// changeNamespaceDeduplication sets value ("" removes the policy).
func (a *admin) changeNamespaceDeduplication(w http.ResponseWriter, r *http.Request, value string) {
	ctx := r.Context()
	name, err := a.namespaceOf(r)
	if err != nil {
		writeAdminError(w, err)
		return
	}
	if err := a.srv.unloadIdleNamespace(name); err != nil {
		writeAdminError(w, err)
		return
	}
	if value == "" {
		err = a.cat.RemoveNamespaceProperties(ctx, name, []string{dedupProperty})
	} else {
		err = a.cat.SetNamespaceProperties(ctx, name, map[string]string{dedupProperty: value})
	}
	if err == nil {
		err = a.srv.unloadIdleNamespace(name) // topics loaded meanwhile read the old value
	}
	if err != nil {
		writeAdminError(w, err)
		return
	}
	noContent(w)
}

// unloadIdleNamespace is unloadIdle for every stream of a namespace with a
// topic loaded on this node.
func (s *Server) unloadIdleNamespace(namespace string) error {
	s.mu.Lock()
	ids := map[lakestream.StreamIdentifier]bool{}
	for _, t := range s.mu.topics {
		if t.stream.Namespace == namespace {
			ids[t.stream] = true
		}
	}
	s.mu.Unlock()
	for id := range ids {
		if err := s.unloadIdle(id); err != nil {
			return err
		}
	}
	return nil
}

// dedupEnabled reports whether a topic of stream md deduplicates: the
// topic-level policy (stream property) if set, else the namespace's.
func (s *Server) dedupEnabled(ctx context.Context, md lakestream.StreamMetadata) (bool, error) {
	if v, ok := md.Properties[dedupProperty]; ok {
		return v == "true", nil
	}
	ns, err := s.cfg.Catalog.LoadNamespace(ctx, md.ID.Namespace)
	if errors.Is(err, lakestream.ErrNoSuchNamespace) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return ns.Properties[dedupProperty] == "true", nil
}
