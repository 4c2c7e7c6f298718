package admin

// Admin REST: subscription properties (pulsar-admin topics
// update-subscription-properties / get-subscription-properties), as
// Pulsar's PUT and GET …/subscription/{sub}/properties.
//
// They are kept with the topic's stream metadata, one property per
// topic-partition and subscription (subPropsKey), so any node reads them
// and topic stats show them (subscriptionProperties); deleting the
// subscription through the admin REST deletes them. On a partitioned topic
// an update applies to every partition's subscription, and a read answers
// partition 0's, as Pulsar's broker does.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/lakestream"
)

// subPropsPrefix starts the stream property keys of subscription
// properties: subPropsPrefix + partition + "/" + subscription.
const subPropsPrefix = "lakegate.subscriptionProperties/"

// subPropsBytesMax bounds the encoded properties of one subscription.
const subPropsBytesMax = 16 << 10

// subPropsRetries bounds the attempts of one properties update against
// concurrent changes of the stream's properties.
const subPropsRetries = 32

func subPropsKey(partition int, sub string) string {
	return subPropsPrefix + strconv.Itoa(partition) + "/" + sub
}

// subProps reads subscription sub's properties of partition (-1: a
// non-partitioned topic) from the stream properties: never nil.
func subProps(props map[string]string, partition int, sub string) map[string]string {
	out := map[string]string{}
	if v, ok := props[subPropsKey(partition, sub)]; ok {
		json.Unmarshal([]byte(v), &out)
	}
	return out
}

// withSubProps fills the subscriptionProperties of st's subscriptions
// (partition: the topic-partition's index, -1 when not partitioned).
func withSubProps(st broker.TopicStats, props map[string]string, partition int) {
	for name, ss := range st.Subscriptions {
		ss.SubscriptionProperties = subProps(props, partition, name)
		st.Subscriptions[name] = ss
	}
}

// editStreamProperties applies edit to the stream's properties and
// replaces them, retrying when they changed meanwhile.
func (a *admin) editStreamProperties(ctx context.Context, id lakestream.StreamIdentifier, edit func(map[string]string)) error {
	for range subPropsRetries {
		md, err := a.cat.LoadStream(ctx, id)
		if err != nil {
			return err
		}
		props := maps.Clone(md.Properties)
		if props == nil {
			props = map[string]string{}
		}
		edit(props)
		if maps.Equal(props, md.Properties) {
			return nil
		}
		_, ok, err := a.cat.ReplaceStreamProperties(ctx, id, props, md.MetadataVersion)
		if err != nil || ok {
			return err
		}
	}
	return fmt.Errorf("%w: topic %s/%s properties changed concurrently, retry", errAdminConflict, id.Namespace, id.Name)
}

// refPartitions are the partition indexes of ref whose subscriptions a
// change applies to.
func refPartitions(ref topicRef) []int {
	switch {
	case ref.partitioned():
		n := ref.md.Partitioning.NumPartitions
		out := make([]int, n)
		for i := range n {
			out[i] = i
		}
		return out
	case ref.partition >= 0:
		return []int{ref.partition}
	}
	return []int{-1}
}

// checkSubscription answers 404 unless the topic of r has subscription
// sub (asked of the topic's owner, every partition's for a partitioned
// topic).
func (a *admin) checkSubscription(r *http.Request, ref topicRef, sub string) error {
	tn := ref.name
	path := "/admin/v2/persistent/" + url.PathEscape(tn.Tenant) + "/" + url.PathEscape(tn.Namespace) + "/" + url.PathEscape(tn.Local) + "/subscriptions"
	res := a.internalRequest(r, http.MethodGet, path)
	if !res.ok() {
		return res.err()
	}
	var subs []string
	if err := json.Unmarshal(res.body.Bytes(), &subs); err != nil {
		return fmt.Errorf("subscriptions of %s: %w", tn, err)
	}
	if !slices.Contains(subs, sub) {
		return fmt.Errorf("%w: subscription %s not found on %s", errAdminNotFound, sub, tn)
	}
	return nil
}

// updateSubscriptionProperties serves PUT …/subscription/{sub}/properties:
// the body (a JSON object of strings; empty or {} clears them) replaces
// the subscription's properties.
func (a *admin) updateSubscriptionProperties(r *http.Request) (any, error) {
	sub, err := subscriptionName(r)
	if err != nil {
		return nil, err
	}
	ref, err := a.refOf(r)
	if err != nil {
		return nil, err
	}
	b, err := readBody(r)
	if err != nil {
		return nil, err
	}
	props := map[string]string{}
	if s := strings.TrimSpace(string(b)); s != "" && s != "null" {
		if err := json.Unmarshal(b, &props); err != nil {
			return nil, fmt.Errorf("%w: subscription properties must be a JSON object of strings: %v", errAdminBadRequest, err)
		}
	}
	enc, _ := json.Marshal(props)
	if len(enc) > subPropsBytesMax {
		return nil, fmt.Errorf("%w: subscription properties of %d bytes, over the limit of %d", errAdminPrecondition, len(enc), subPropsBytesMax)
	}
	if err := a.checkSubscription(r, ref, sub); err != nil {
		return nil, err
	}
	err = a.editStreamProperties(r.Context(), ref.md.ID, func(m map[string]string) {
		for _, p := range refPartitions(ref) {
			if len(props) == 0 {
				delete(m, subPropsKey(p, sub))
			} else {
				m[subPropsKey(p, sub)] = string(enc)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return nil, nil
}

// getSubscriptionProperties serves GET …/subscription/{sub}/properties.
func (a *admin) getSubscriptionProperties(r *http.Request) (any, error) {
	sub, err := subscriptionName(r)
	if err != nil {
		return nil, err
	}
	ref, err := a.refOf(r)
	if err != nil {
		return nil, err
	}
	if err := a.checkSubscription(r, ref, sub); err != nil {
		return nil, err
	}
	return subProps(ref.md.Properties, refPartitions(ref)[0], sub), nil
}

// forgetSubProps deletes subscription sub's properties on ref's
// partitions (after the subscription was deleted).
func (a *admin) forgetSubProps(ctx context.Context, ref topicRef, sub string) {
	err := a.editStreamProperties(ctx, ref.md.ID, func(m map[string]string) {
		for _, p := range refPartitions(ref) {
			delete(m, subPropsKey(p, sub))
		}
	})
	if err != nil {
		a.cfg.Logger.Warn("deleting a subscription's properties", "topic", ref.name.String(), "subscription", sub, "err", err)
	}
}
