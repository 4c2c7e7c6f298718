package admin

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/lakegate/lakegate/auth"
	"github.com/lakegate/lakegate/broker"
	"github.com/lakegate/lakegate/doctor"
	"github.com/lakegate/lakegate/lakestream"
)

// Node is what the admin REST needs of the node's Pulsar front door (the
// gateway implements it): the topics this node serves live there with
// their sessions' producers and consumers, and so do their unloading, the
// non-persistent topics, the peers and the authorization checks.
type Node interface {
	// ServiceURL is the node's pulsar:// URL.
	ServiceURL() string
	// Closing reports whether the node is shutting down.
	Closing() bool
	// ServedTopic returns the topic-partition served here, loading it
	// when this node may serve it (broker.ErrServiceNotReady when
	// another member owns it). Nothing is created.
	ServedTopic(ctx context.Context, name string) (broker.ServedTopic, error)
	// LoadedTopics are the topics loaded here now.
	LoadedTopics() []broker.ServedTopic
	// LookupUnit resolves a topic name to its unit (a partition, or the
	// topic).
	LookupUnit(ctx context.Context, name string) (string, error)
	// ReloadStreams re-reads the policies of the streams' topics served
	// here; RefreshLimitsOf re-applies the limits of a stream's (or a
	// namespace's) topics served here.
	ReloadStreams(ctx context.Context, ids []lakestream.StreamIdentifier) error
	RefreshLimitsOf(ctx context.Context, id lakestream.StreamIdentifier)
	// UnloadLocal unloads unit if it is served here, UnloadUnit wherever
	// it is served (hand-over to member dest when given).
	UnloadLocal(ctx context.Context, unit, dest string) error
	UnloadUnit(ctx context.Context, unit, dest string) error
	// NPTopicsOf lists the non-persistent topics of a namespace served
	// here; NPTopicStats is one's stats, if it is served here.
	NPTopicsOf(namespace string) []string
	NPTopicStats(name string) (any, bool)
	// PeerBase is the base URL of requests to member; PeerClient the
	// client they go through.
	PeerBase(member lakestream.Member) (string, error)
	PeerClient() *http.Client
	// CountRefusal and CountAuthFailure add to the node's counters of
	// refusals by limit and of failed authentications/authorizations.
	CountRefusal(label string)
	CountAuthFailure(reason string)
	// The authorization checks (grants), shared with the binary protocol.
	AuthzOn() bool
	CheckSuperUser(role string) error
	CheckSuperOrTenantAdmin(ctx context.Context, role, tenant string) error
	CheckNamespaceLookup(ctx context.Context, role, namespace string) error
	CheckSubscription(ctx context.Context, role string, tn broker.TopicName, sub string) error
	CheckTopic(ctx context.Context, role string, tn broker.TopicName, action string) error
}

// Config is what the admin REST is built from.
type Config struct {
	Node    Node
	Broker  *broker.Broker
	Catalog lakestream.StreamCatalog
	// Membership is the node's membership (members, owners).
	Membership lakestream.Membership
	// Auth authenticates requests (nil: authentication off);
	// Authorization checks them against grants.
	Auth          *auth.Authenticator
	Authorization bool
	// ProxyRoles may name the client a request is made for
	// (X-Original-Principal).
	ProxyRoles []string
	// BrokerClientToken authenticates this node's requests to members.
	BrokerClientToken string
	// DisableTopicAutoCreation and MaxMessageSize are the node's settings
	// as the runtime configuration shows them.
	DisableTopicAutoCreation bool
	MaxMessageSize           int
	// MaxRequestBytes bounds a request body (Pulsar's httpMaxRequestSize).
	MaxRequestBytes int64
	Logger          *slog.Logger
	// Doctor diagnoses the node (GET /admin/v2/lakegate/doctor; package
	// doctor); nil: the path answers 501.
	Doctor func(context.Context) doctor.Report
}
