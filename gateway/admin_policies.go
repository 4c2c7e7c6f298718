package gateway

// Topic and namespace policies kept as stream and namespace properties
// (docs/policies.md): the shared read-modify-write of a topic's property.

import (
	"fmt"
	"maps"
	"net/http"

	"github.com/lakegate/lakegate/lakestream"
)

// policyRetries bounds the compare-and-set loop on stream properties.
const policyRetries = 8

// changeTopicProperty sets (value != nil) or removes the stream property
// key of the request's topic — a policy of the whole topic, refused (405)
// on one partition — and answers 204. With reload the topic's loaded
// partitions are unloaded gracefully, wherever they are served, so that
// their next load reads the policy.
func (a *admin) changeTopicProperty(w http.ResponseWriter, r *http.Request, key string, value *string, reload bool) {
	ctx := r.Context()
	ref, err := a.refOf(r)
	if err != nil {
		writeAdminError(w, err)
		return
	}
	if ref.partition >= 0 {
		writeAdminError(w, fmt.Errorf("%w: this is a policy of the whole topic %s, not of one partition", errAdminMethodNotAllowed, ref.name.Base()))
		return
	}
	id := fullStreamID(ref.name)
	md := ref.md
	for range policyRetries {
		props := maps.Clone(md.Properties)
		if props == nil {
			props = map[string]string{}
		}
		if value != nil {
			props[key] = *value
		} else {
			delete(props, key)
		}
		var ok bool
		md, ok, err = a.cat.ReplaceStreamProperties(ctx, id, props, md.MetadataVersion)
		if err != nil {
			writeAdminError(w, err)
			return
		}
		if ok {
			if reload {
				if err := a.srv.reloadStreams(ctx, []lakestream.StreamIdentifier{id}); err != nil {
					writeAdminError(w, err)
					return
				}
			}
			noContent(w)
			return
		}
	}
	writeAdminError(w, fmt.Errorf("%w: topic %s properties changed concurrently, retry", errAdminConflict, ref.name))
}
