package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lakegate/lakegate/broker"
	"go.yaml.in/yaml/v3"
)

// Config is a node's whole configuration. Every leaf field has a YAML key
// (the path of its yaml tags), an environment variable and a flag (both
// derived from that path), a default and a doc string; docs/configuration.md
// is generated from these tags (`lakegate config docs`) and a test keeps it
// in step. Precedence: default < file (--config) < environment < flags.
type Config struct {
	DataDir string `yaml:"dataDir" default:"data" doc:"Directory for the embedded etcd member and, unless objects is set, the objects."`
	Objects string `yaml:"objects" doc:"Object store URL (file://, s3://, gs://, azblob://). Default file://<dataDir> (WAL objects under wal/, tables under tables/)."`

	Etcd struct {
		Endpoints []string `yaml:"endpoints" doc:"External etcd endpoints (comma-separated in env and flags). Empty runs an embedded single member in <dataDir>/etcd (standalone only)."`
		Prefix    string   `yaml:"prefix" doc:"Prefix of every metadata key, to share an etcd cluster."`
		Port      int      `yaml:"port" default:"0" doc:"Client port of the embedded member (0 = any free port); it listens on 127.0.0.1 only."`
		// Securing an external cluster (docs/security.md, "etcd"): whoever
		// can write its keys owns the lakegate cluster.
		TLSCAFile    string `yaml:"tlsCaFile" doc:"PEM CA certificates the etcd members' certificates are checked against (https:// endpoints). Default the system roots."`
		TLSCertFile  string `yaml:"tlsCertFile" doc:"PEM client certificate presented to etcd (members started with --client-cert-auth); reloaded when the file changes. Needs etcd.tlsKeyFile."`
		TLSKeyFile   string `yaml:"tlsKeyFile" doc:"PEM private key of etcd.tlsCertFile."`
		Username     string `yaml:"username" doc:"etcd user (etcd's authentication on); needs etcd.password or etcd.passwordFile. Give it a role limited to etcd.prefix."`
		Password     string `yaml:"password" secret:"true" doc:"Password of etcd.username; prefer etcd.passwordFile or the environment variable."`
		PasswordFile string `yaml:"passwordFile" doc:"File holding the password of etcd.username (one trailing newline is ignored), e.g. a mounted Kubernetes Secret."`
	} `yaml:"etcd"`

	Pulsar struct {
		Addr              string `yaml:"addr" default:":6650" doc:"Pulsar binary protocol listen address (pulsar://); empty: no plain listener."`
		AdvertisedAddr    string `yaml:"advertisedAddr" doc:"host:port that topic lookups send clients to. Default the bound address (for a wildcard host: localhost on standalone, the host name on serve)."`
		TLSAddr           string `yaml:"tlsAddr" doc:"pulsar+ssl:// listen address (Pulsar's brokerServicePortTls, e.g. :6651); empty: none. Needs tls.certFile and tls.keyFile."`
		AdvertisedTLSAddr string `yaml:"advertisedTlsAddr" doc:"host:port of the pulsar+ssl listener that lookups name (and other members relay to). Default its bound address (for a wildcard host: localhost on standalone, the host name on serve)."`
	} `yaml:"pulsar"`

	Kafka struct {
		Addr           string `yaml:"addr" doc:"Kafka protocol listen address (docs/kafka.md), e.g. :9092 (make run sets it); empty: no Kafka listener. With auth.enabled, clients authenticate with SASL/PLAIN (the password is a token) or SASL/OAUTHBEARER."`
		TLS            bool   `yaml:"tls" default:"false" doc:"Serve the Kafka listener over TLS (SSL / SASL_SSL) with tls.certFile and tls.keyFile."`
		AdvertisedAddr string `yaml:"advertisedAddr" doc:"host:port Kafka clients are sent to (Metadata, FindCoordinator). Default the bound address (for a wildcard host: localhost on standalone, the host name on serve)."`
		Namespace      string `yaml:"namespace" default:"public/default" doc:"Pulsar namespace of the Kafka topics: Kafka topic t is persistent://<namespace>/t. Another than public/default must exist (pulsar-admin namespaces create)."`
		MaxConnections int    `yaml:"maxConnections" default:"0" doc:"Open Kafka connections on the node; one more is closed at once. 0: no limit."`
		// Consumer groups.
		GroupInitialRebalanceDelay time.Duration `yaml:"groupInitialRebalanceDelay" default:"3s" doc:"How long a new consumer group's first join waits for more members (Kafka's group.initial.rebalance.delay.ms); 0: none."`
		// Transactions.
		TransactionalIDExpiration time.Duration `yaml:"transactionalIdExpiration" default:"168h" doc:"How long a transactional.id's record is kept after its last use with no transaction open (Kafka's transactional.id.expiration.ms); then it is deleted and the id's old producer is answered INVALID_PRODUCER_ID_MAPPING (docs/kafka.md, Transactions). Positive; swept every tenth of it (100ms to 1h)."`
	} `yaml:"kafka"`

	Transactions struct {
		Enabled        bool          `yaml:"enabled" default:"true" doc:"Serve transactions (docs/transactions.md; Pulsar's transactionCoordinatorEnabled). Off, transaction requests are refused with NotAllowedError."`
		Coordinators   int           `yaml:"coordinators" default:"16" doc:"Transaction coordinators in the cluster (1–256): the partition count of persistent://pulsar/system/transaction_coordinator_assign. Every node of a cluster must say the same."`
		MaxTimeout     time.Duration `yaml:"maxTimeout" default:"6h" doc:"Longest transaction timeout; a client asking for more gets this."`
		MaxOpen        int           `yaml:"maxOpen" default:"10000" doc:"Open transactions per coordinator; a new one beyond is refused (Pulsar's maxActiveTransactionsPerCoordinator)."`
		MaxOpenPerRole int           `yaml:"maxOpenPerRole" default:"0" doc:"Open transactions one role may hold per coordinator; a new one beyond is refused. 0: no bound but maxOpen. On a cluster shared by tenants, set it below maxOpen so that one role cannot take every transaction of a coordinator (without authentication every client is one role)."`
		EndedRetention time.Duration `yaml:"endedRetention" default:"10m" doc:"How long an ended transaction's outcome is kept, so that a client retrying its commit or abort learns it."`
	} `yaml:"transactions"`

	HTTP struct {
		Addr              string `yaml:"addr" default:":8080" doc:"Admin REST, /metrics, /healthz and /readyz listen address (http://); empty: no plain listener."`
		AdvertisedAddr    string `yaml:"advertisedAddr" doc:"host:port other members reach this node's admin REST at (forwarded admin requests, topic lookups over REST). Default the bound address (for a wildcard host: localhost on standalone, the host name on serve)."`
		TLSAddr           string `yaml:"tlsAddr" doc:"HTTPS listen address of the same endpoints (e.g. :8443); empty: none. Needs tls.certFile and tls.keyFile."`
		AdvertisedTLSAddr string `yaml:"advertisedTlsAddr" doc:"host:port other members reach the HTTPS listener at (preferred to http.advertisedAddr). Default its bound address (for a wildcard host: localhost on standalone, the host name on serve)."`
		// Limits of the HTTP server (docs/security.md, "Limits").
		MaxRequestSize       int64         `yaml:"maxRequestSize" default:"1048576" doc:"Largest admin REST request body, in bytes (Pulsar's httpMaxRequestSize); a larger one is answered 413 with a reason. The Iceberg REST catalog keeps its own 16 MiB bound."`
		MaxRequestHeaderSize int           `yaml:"maxRequestHeaderSize" default:"8192" doc:"Largest request line and headers, in bytes (Pulsar's httpMaxRequestHeaderSize); larger is answered 431."`
		MaxConnections       int           `yaml:"maxConnections" default:"2048" doc:"Open HTTP connections, per listener (Pulsar's maxHttpServerConnections); more wait to be accepted until one closes. 0 turns the limit off."`
		ReadHeaderTimeout    time.Duration `yaml:"readHeaderTimeout" default:"10s" doc:"A connection that has not sent a request's headers within this is closed (slow-header attacks)."`
		ReadTimeout          time.Duration `yaml:"readTimeout" default:"60s" doc:"Bound on reading a whole request, body included."`
		IdleTimeout          time.Duration `yaml:"idleTimeout" default:"120s" doc:"A keep-alive connection idle this long between requests is closed."`
	} `yaml:"http"`

	// Limits with Apache Pulsar's names and defaults (docs/security.md,
	// "Limits"; the per-topic ones are defaults that namespace and topic
	// policies override: docs/policies.md).
	Limits struct {
		BrokerMaxConnections                        int   `yaml:"brokerMaxConnections" default:"0" doc:"Open Pulsar connections on the node; one more is answered ERROR NotAllowedError and closed. 0: no limit."`
		BrokerMaxConnectionsPerIP                   int   `yaml:"brokerMaxConnectionsPerIp" default:"0" doc:"Open Pulsar connections per client IP address; the same answer beyond. 0: no limit."`
		MaxPendingPublishRequestsPerConnection      int   `yaml:"maxPendingPublishRequestsPerConnection" default:"1000" doc:"SENDs a connection may have unanswered; at this many its reads pause until half are answered (backpressure, no error). 0 turns it off."`
		MaxMessagePublishBufferSizeInMB             int64 `yaml:"maxMessagePublishBufferSizeInMB" default:"0" doc:"SEND payload the node holds unanswered, in MiB; beyond it the reads of every connection with producers pause until half is answered. 0: 1/10 of memory.limit (without a budget half of GOMEMLIMIT when set, else 256, at least 64)."`
		MaxProducersPerTopic                        int   `yaml:"maxProducersPerTopic" default:"0" doc:"Producers per topic partition; more are refused with ProducerBusy. 0: no limit."`
		MaxConsumersPerTopic                        int   `yaml:"maxConsumersPerTopic" default:"0" doc:"Consumers per topic partition; more are refused with ConsumerBusy. 0: no limit."`
		MaxConsumersPerSubscription                 int   `yaml:"maxConsumersPerSubscription" default:"0" doc:"Consumers per subscription; more are refused with ConsumerBusy. 0: no limit."`
		MaxSubscriptionsPerTopic                    int   `yaml:"maxSubscriptionsPerTopic" default:"0" doc:"Subscriptions per topic partition; a new one beyond is refused with NotAllowedError. 0: no limit."`
		MaxUnackedMessagesPerConsumer               int64 `yaml:"maxUnackedMessagesPerConsumer" default:"50000" doc:"Unacknowledged messages a Shared or Key_Shared consumer may hold; at this many it gets no more until its acks bring it to half. 0: no limit."`
		MaxUnackedMessagesPerSubscription           int64 `yaml:"maxUnackedMessagesPerSubscription" default:"200000" doc:"Unacknowledged messages a Shared or Key_Shared subscription may hold; at this many its dispatch stops until acks bring it to half. 0: no limit."`
		MaxPublishRatePerTopicInMessages            int64 `yaml:"maxPublishRatePerTopicInMessages" default:"0" doc:"Messages per second a topic partition takes; beyond it its producers' connections pause reading. 0: no limit."`
		MaxPublishRatePerTopicInBytes               int64 `yaml:"maxPublishRatePerTopicInBytes" default:"0" doc:"Payload bytes per second a topic partition takes (as the message rate). 0: no limit."`
		DispatchThrottlingRatePerTopicInMsg         int64 `yaml:"dispatchThrottlingRatePerTopicInMsg" default:"0" doc:"Messages per second dispatched from a topic partition, all its subscriptions together. 0: no limit."`
		DispatchThrottlingRatePerTopicInByte        int64 `yaml:"dispatchThrottlingRatePerTopicInByte" default:"0" doc:"Payload bytes per second dispatched from a topic partition. 0: no limit."`
		DispatchThrottlingRatePerSubscriptionInMsg  int64 `yaml:"dispatchThrottlingRatePerSubscriptionInMsg" default:"0" doc:"Messages per second dispatched to one subscription. 0: no limit."`
		DispatchThrottlingRatePerSubscriptionInByte int64 `yaml:"dispatchThrottlingRatePerSubscriptionInByte" default:"0" doc:"Payload bytes per second dispatched to one subscription. 0: no limit."`
	} `yaml:"limits"`

	TLS struct {
		CertFile string `yaml:"certFile" doc:"PEM certificate (chain) of the TLS listeners; reloaded when the file changes."`
		KeyFile  string `yaml:"keyFile" doc:"PEM private key of certFile; reloaded when the file changes."`
		CAFile   string `yaml:"caFile" doc:"PEM CA certificates that client certificates (auth provider tls) and other members' certificates are checked against; reloaded when the file changes."`
	} `yaml:"tls"`

	Auth struct {
		Enabled           bool          `yaml:"enabled" default:"false" doc:"Require authentication of every connection and admin request (docs/security.md)."`
		Providers         []string      `yaml:"providers" default:"token" doc:"Authentication providers, any of token (JWTs signed with tokenSecretKey or tokenPublicKey: CONNECT auth method token, HTTP Authorization: Bearer), openid (access tokens of OpenID Connect issuers, as the clients' AuthenticationOAuth2 sends them; same method token, tried in the order listed) and tls (client certificate common name)."`
		TokenSecretKey    string        `yaml:"tokenSecretKey" secret:"true" doc:"HS256 key of the token provider, at least 256 bits (lakegate token create-secret-key): file:///path or data:;base64,... (as Pulsar's tokenSecretKey)."`
		TokenPublicKey    string        `yaml:"tokenPublicKey" doc:"RS*/ES*/PS* public key of the token provider (PEM or DER): file:///path or data:;base64,... (as Pulsar's tokenPublicKey)."`
		TokenClaim        string        `yaml:"tokenClaim" default:"sub" doc:"Claim of a token holding the role (Pulsar's tokenAuthClaim)."`
		TokenAudience     string        `yaml:"tokenAudience" doc:"When set, a token's tokenAudienceClaim claim must be this audience or a list holding it (Pulsar's tokenAudience)."`
		Authorization     bool          `yaml:"authorization" default:"true" doc:"Check roles against superusers, tenant admins and grants (with enabled)."`
		SuperUserRoles    []string      `yaml:"superUserRoles" doc:"Roles that may do everything (Pulsar's superUserRoles)."`
		RefreshGrace      time.Duration `yaml:"refreshGrace" default:"30s" doc:"How long a client has to answer AUTH_CHALLENGE with a fresh token once its own expired, before the connection closes."`
		BrokerClientToken string        `yaml:"brokerClientToken" secret:"true" doc:"Token this node presents to other members: on forwarded admin requests and hand-overs (give it a superuser role) and on connections it relays in proxy mode (a role in auth.proxyRoles); prefer the environment variable. Empty: forwarded requests carry the client's credentials, relays present the node's certificate (tls provider)."`
		ProxyRoles        []string      `yaml:"proxyRoles" doc:"Roles that may connect on behalf of other clients (Pulsar's proxyRoles): the members' own role for the connections they relay in proxy mode, Apache Pulsar's proxy. Their CONNECT names the client in original_principal; both roles are authorized, and no other role may name one (docs/security.md, Clusters)."`
		OriginalAuthData  bool          `yaml:"authenticateOriginalAuthData" default:"true" doc:"Verify the client token a proxy forwards (original_auth_data; must be the original principal's) and challenge it when it expires (Pulsar's authenticateOriginalAuthData); false takes the original principal on the proxy's word."`
		// Pulsar's tokenAudienceClaim and its openid provider's settings
		// (openID*, auth/openid.go), under Pulsar's names.
		TokenAudienceClaim                  string   `yaml:"tokenAudienceClaim" default:"aud" doc:"Claim of a token that must hold tokenAudience (Pulsar's tokenAudienceClaim; Pulsar checks nothing without it, lakegate checks aud when only tokenAudience is set). Another claim without tokenAudience is an error."`
		OpenIDAllowedTokenIssuers           []string `yaml:"openIDAllowedTokenIssuers" doc:"Provider openid: the OpenID Connect issuers whose access tokens are accepted, exactly as their iss claim names them (https URLs; keys discovered from <issuer>/.well-known/openid-configuration). Required with openid (Pulsar's openIDAllowedTokenIssuers)."`
		OpenIDAllowedAudiences              []string `yaml:"openIDAllowedAudiences" doc:"Provider openid: a token's aud must hold one of these. Required with openid (Pulsar's openIDAllowedAudiences)."`
		OpenIDRoleClaim                     string   `yaml:"openIDRoleClaim" default:"sub" doc:"Provider openid: claim holding the role; a list gives its first element (Pulsar's openIDRoleClaim)."`
		OpenIDAcceptedTimeLeewaySeconds     int      `yaml:"openIDAcceptedTimeLeewaySeconds" default:"0" doc:"Provider openid: clock skew allowed on exp, nbf and iat, in seconds."`
		OpenIDCacheSize                     int      `yaml:"openIDCacheSize" default:"5" doc:"Provider openid: issuers whose keys are cached (least recently used dropped first)."`
		OpenIDCacheRefreshAfterWriteSeconds int      `yaml:"openIDCacheRefreshAfterWriteSeconds" default:"64800" doc:"Provider openid: cached issuer keys this old (seconds) are fetched again when next used; if the issuer is down they serve until openIDCacheExpirationSeconds."`
		OpenIDCacheExpirationSeconds        int      `yaml:"openIDCacheExpirationSeconds" default:"86400" doc:"Provider openid: cached issuer keys this old (seconds) are never used."`
		OpenIDKeyIDCacheMissRefreshSeconds  int      `yaml:"openIDKeyIdCacheMissRefreshSeconds" default:"300" doc:"Provider openid: a token whose kid is not cached fetches the issuer's keys again only if the last fetch is at least this old (seconds, at least 1): how often tokens of a rotated key, or made-up kids, can make the node ask the issuer."`
		OpenIDHTTPConnectionTimeoutMillis   int      `yaml:"openIDHttpConnectionTimeoutMillis" default:"10000" doc:"Provider openid: timeout of connecting to an issuer, in milliseconds."`
		OpenIDHTTPReadTimeoutMillis         int      `yaml:"openIDHttpReadTimeoutMillis" default:"10000" doc:"Provider openid: timeout of an issuer's answer (discovery document, JWKS), in milliseconds."`
		OpenIDRequireIssuersUseHTTPS        bool     `yaml:"openIDRequireIssuersUseHttps" default:"true" doc:"Provider openid: refuse http:// issuers and JWKS URIs; false is for tests on loopback only."`
		OpenIDTokenIssuerTrustCertsFilePath string   `yaml:"openIDTokenIssuerTrustCertsFilePath" doc:"Provider openid: PEM CA certificates the issuers' HTTPS certificates are checked against. Default the system's."`
	} `yaml:"auth"`

	Cluster struct {
		SessionTTL          time.Duration `yaml:"sessionTtl" default:"5s" doc:"Time to live of this node's etcd session: a node that stops renewing it (killed, paused, cut off) loses its topics this long after its last renewal, and clients move to other nodes (docs/cluster.md)."`
		ProxyLookups        bool          `yaml:"proxyLookups" default:"false" doc:"Answer topic lookups with 'connect through the address you dialled' and relay such connections to the topic's owner: for clients that reach the cluster through one load-balanced address (a Kubernetes Service) and cannot reach nodes directly."`
		RebalanceInterval   time.Duration `yaml:"rebalanceInterval" default:"10s" doc:"How often a node hands over topics that placement gives to another node (a node that joined takes its share gradually); 0 turns it off."`
		RebalanceMax        int           `yaml:"rebalanceMax" default:"8" doc:"Topics handed over per rebalancing round, at most."`
		DrainTimeout        time.Duration `yaml:"drainTimeout" default:"30s" doc:"On SIGTERM, how long the node spends handing its topics over to the other nodes before it exits."`
		AllowPlaintextPeers bool          `yaml:"allowPlaintextPeers" default:"false" doc:"UNSAFE. Let a serve node with authentication reach other members without TLS (no http.tlsAddr; in proxy mode no pulsar.tlsAddr): its broker token and clients' credentials then travel in clear. Off, such a node refuses to start, and a member advertising no TLS endpoint is not reached."`
	} `yaml:"cluster"`

	// Metrics with Pulsar's switches (docs/metrics.md, "Pulsar's names").
	// The node's memory budget (docs/memory.md): one number that sizes
	// the Go runtime's soft limit and every cache and queue left at 0.
	Memory struct {
		Limit int64 `yaml:"limit" default:"805306368" doc:"Memory budget of the node in bytes, the resident set it stays under (docs/memory.md). The Go runtime's soft limit is the budget less the mapped program, max(128 MiB, 1/8) (unless GOMEMLIMIT is set), and each size left at 0 is a share: engine.cacheBytes 1/5, limits.maxMessagePublishBufferSizeInMB 1/10, engine.maxPendingBytes 1/20, tables.maxBytes 1/64 (per compaction), tables.repack.spanBytes 1/64. At least 256 MiB; 0: no budget (fixed sizes: 256, 256, 64, 64 and 16 MiB)."`
	} `yaml:"memory"`

	Metrics struct {
		ExposeTopicLevelMetricsInPrometheus    bool `yaml:"exposeTopicLevelMetricsInPrometheus" default:"true" doc:"Export the pulsar_* topic families per topic (labels cluster, namespace, topic) and the pulsar_subscription_* families; false sums the topic families per namespace (labels cluster, namespace) and exports no subscription series, as Pulsar's setting."`
		ExposeConsumerLevelMetricsInPrometheus bool `yaml:"exposeConsumerLevelMetricsInPrometheus" default:"false" doc:"Also export the pulsar_consumer_* families (labels consumer_name, consumer_id), as Pulsar's setting; needs exposeTopicLevelMetricsInPrometheus."`
		TopicsMax                              int  `yaml:"topicsMax" default:"1000" doc:"Topics (partitions) whose stats one scrape reads for the pulsar_* topic families and the table lag: the first by name; the rest are counted in lakegate_metrics_series_dropped{level=\"topic\"}."`
		SubscriptionsMax                       int  `yaml:"subscriptionsMax" default:"1000" doc:"Subscription series one scrape exports (lakegate_subscription_*, pulsar_subscription_*), and consumer series (pulsar_consumer_*); the rest are counted as dropped."`
	} `yaml:"metrics"`

	Policies struct {
		CheckInterval                 time.Duration `yaml:"checkInterval" default:"30s" doc:"How often the retention, message TTL and backlog quota policies of the topics this node serves are enforced (docs/policies.md); 0 turns the periodic enforcement off (a backlog quota still refuses producers)."`
		AllowAutoTopicCreation        bool          `yaml:"allowAutoTopicCreation" default:"true" doc:"Create a topic that does not exist when a producer, consumer or lookup names it (Pulsar's allowAutoTopicCreation); a namespace's autoTopicCreation policy overrides it. false: such clients get TopicNotFound."`
		AllowAutoTopicCreationType    string        `yaml:"allowAutoTopicCreationType" default:"non-partitioned" doc:"What an auto-created topic is: non-partitioned or partitioned (Pulsar's allowAutoTopicCreationType)."`
		DefaultNumPartitions          int           `yaml:"defaultNumPartitions" default:"1" doc:"Partitions of a topic auto-created partitioned (Pulsar's defaultNumPartitions), at least 1."`
		DefaultRetentionTimeInMinutes int64         `yaml:"defaultRetentionTimeInMinutes" default:"0" nolimit:"true" doc:"Retention of topics with no retention policy, theirs or their namespace's (Pulsar's defaultRetentionTimeInMinutes): acknowledged messages are kept this long; -1 without a time limit. With defaultRetentionSizeInMB 0/0, Pulsar's default: what every durable subscription acknowledged, and the table holds (materialized streams), is trimmed at the next policy check once older than retentionMinAge (docs/policies.md, Retention); -1/-1 keeps everything."`
		RetentionMinAge               time.Duration `yaml:"retentionMinAge" default:"10m" doc:"Retention never trims a message published less than this long ago, whatever the policy: what was just acknowledged can still be replayed (reset-cursor, examine-message), as on a Pulsar broker whose ledgers live at least managedLedgerMinLedgerRolloverTimeMinutes (10) before they roll over and can be deleted. 0: trimmed at the next policy check."`
		DefaultRetentionSizeInMB      int64         `yaml:"defaultRetentionSizeInMB" default:"0" nolimit:"true" doc:"Retention of topics with no retention policy (Pulsar's defaultRetentionSizeInMB): the newest this many MiB of acknowledged messages are kept; -1 without a size limit."`
	} `yaml:"policies"`

	Log struct {
		JSON  bool   `yaml:"json" default:"false" doc:"Log as JSON (else text)."`
		Level string `yaml:"level" default:"info" doc:"Log level: debug, info, warn, error."`
	} `yaml:"log"`

	Engine struct {
		NodeID             string        `yaml:"nodeId" doc:"Name of this node in WAL object names. Default a random id per start."`
		FlushBytes         int           `yaml:"flushBytes" default:"0" doc:"Flush a WAL object at this many pending bytes. 0 = 1 MiB for local stores, 4 MiB for s3/gs/azblob; at most 64 MiB."`
		Linger             time.Duration `yaml:"linger" default:"0s" doc:"Flush a WAL object this long after its first entry. 0 = 2ms local, 250ms for s3/gs/azblob."`
		MaxPendingBytes    int64         `yaml:"maxPendingBytes" default:"0" doc:"Payload bytes accepted but not yet acknowledged; appends wait beyond it. 0: 1/20 of memory.limit (64 MiB without a budget)."`
		MaxInflightFlushes int           `yaml:"maxInflightFlushes" default:"4" doc:"WAL objects PUT concurrently (commits stay in order)."`
		WALSegmentBytes    int64         `yaml:"walSegmentBytes" default:"67108864" doc:"On a file:// store, the size up to which a node appends its WAL flushes to one file, a WAL segment, instead of creating a file per flush (docs/index-format.md, \"WAL segments\"); 0: a file per flush."`
		CommitTimeout      time.Duration `yaml:"commitTimeout" default:"30s" doc:"Bound on PUT (retried with backoff on store errors and throttling) plus commit of one WAL object; appends fail after it (docs/storage.md)."`
		CacheBytes         int64         `yaml:"cacheBytes" default:"0" doc:"Bytes of decoded chunks kept for reads. 0: 1/5 of memory.limit (256 MiB without a budget)."`
		CursorPersist      time.Duration `yaml:"cursorPersistInterval" default:"1s" doc:"How often changed subscription cursors are written to etcd."`
		GCInterval         time.Duration `yaml:"gcInterval" default:"1m" doc:"How often unreferenced WAL objects and orphaned table files are deleted (docs/gc.md); 0 turns it off."`
	} `yaml:"engine"`

	Tables struct {
		Formats      []string      `yaml:"formats" default:"delta,iceberg" doc:"Cluster default of the table formats every stream is compacted into (delta, iceberg, or none); namespace and stream policies override it. Every node should agree."`
		Compaction   bool          `yaml:"compaction" default:"true" doc:"Run the compaction worker on this node (turning WAL chunks into table files)."`
		Age          time.Duration `yaml:"age" default:"30s" doc:"WAL chunks are compacted once this old. Table freshness is at most age + max(interval, scanInterval) + one compaction."`
		Interval     time.Duration `yaml:"interval" default:"5s" doc:"How long a log with nothing old enough waits before it is checked again."`
		ScanInterval time.Duration `yaml:"scanInterval" default:"10s" doc:"How often the catalog is listed for streams and their materialization policy."`
		MaxInflight  int           `yaml:"maxInflight" default:"2" doc:"Compactions running at once on this node."`
		JointWait    time.Duration `yaml:"jointWait" default:"30m" doc:"How long a log waits at a transaction's records for the table's other logs of that transaction to reach theirs, so that one table commit holds all of them (docs/compaction.md, Transactions across partitions); then each log materializes its part alone (lakegate_materialization_joint_fallbacks_total)."`
		Maintenance  struct {
			Interval            time.Duration `yaml:"interval" default:"10m" doc:"How often the node that compacts a table maintains it (table retention, Iceberg manifest rewrite and snapshot expiry, Delta log cleanup, orphan removal; docs/compaction.md, Maintenance); 0 turns maintenance off."`
			SnapshotRetention   time.Duration `yaml:"snapshotRetention" default:"1h" doc:"Iceberg snapshots older than this are expired (time travel reaches back this far)."`
			SnapshotsRetainLast int           `yaml:"snapshotsRetainLast" default:"10" doc:"Iceberg snapshots kept however old."`
			DeltaLogRetention   time.Duration `yaml:"deltaLogRetention" default:"24h" doc:"Delta log files before the newest checkpoint are deleted once this old."`
			OrphanAge           time.Duration `yaml:"orphanAge" default:"168h" doc:"Safety window of orphan removal: table files no table, index or unfinished claim references are deleted once this old (Delta tombstones are kept as long; like VACUUM's retention)."`
		} `yaml:"maintenance"`
		Repack struct {
			TargetBytes int64         `yaml:"targetBytes" default:"134217728" doc:"Size bin-packing merges a log's small table files into (files under 3/4 of it are small; docs/compaction.md, Bin-packing); 0 turns bin-packing off."`
			SpanBytes   int64         `yaml:"spanBytes" default:"0" doc:"Entry payload bytes per row group of a bin-packed file: one index entry each, what one cold read of an old offset decodes. 0: 1/64 of memory.limit, at least 1 MiB (16 MiB without a budget)."`
			Interval    time.Duration `yaml:"interval" default:"10m" doc:"How often the node that compacts a table bin-packs each of its logs; 0 turns bin-packing off."`
		} `yaml:"repack"`
		MaxBytes int64 `yaml:"maxBytes" default:"0" doc:"WAL payload bytes one compaction takes (one table file per partition and publish day). 0: 1/64 of memory.limit, at least 4 MiB (64 MiB without a budget)."`
		Iceberg  struct {
			Kind                 string   `yaml:"kind" default:"auto" doc:"Iceberg catalog the tables are committed to: lakegate (kept in etcd, shared by every node, served over the Iceberg REST API: docs/iceberg-catalog.md), sql (a sqlite file, one node only), rest (an external REST catalog), or auto = sql for standalone, lakegate for serve."`
			URI                  string   `yaml:"uri" doc:"sql: the sqlite file (default <dataDir>/iceberg/catalog.db); rest: the catalog's base URL."`
			Warehouse            string   `yaml:"warehouse" doc:"rest: the warehouse to ask the catalog for."`
			Credential           string   `yaml:"credential" secret:"true" doc:"rest: OAuth client credential (id:secret); prefer the environment variable."`
			Token                string   `yaml:"token" secret:"true" doc:"rest: bearer token; prefer the environment variable."`
			REST                 bool     `yaml:"rest" default:"true" doc:"Serve this node's Iceberg catalog (lakegate or sql) over the Iceberg REST API at http://<http.advertisedAddr>/iceberg (clients: uri=that URL)."`
			Clients              []string `yaml:"clients" secret:":" doc:"OAuth2 clients of the REST catalog, id:secret (comma-separated); when set, every request needs a bearer token from POST /iceberg/v1/oauth/tokens. Prefer the environment variable."`
			TokenKey             string   `yaml:"tokenKey" secret:"true" doc:"Key that signs the REST catalog's tokens; every node needs the same one. Required with clients. Prefer the environment variable."`
			ClientProps          []string `yaml:"clientProps" secret:"=" doc:"key=value FileIO properties handed to REST catalog clients with every table (e.g. read-only s3.access-key-id/s3.secret-access-key for readers); the store's endpoint and region are always handed."`
			VendStoreCredentials bool     `yaml:"vendStoreCredentials" default:"false" doc:"Hand REST catalog clients the node's own object-store credentials with every table (read and write access to the whole store: for trusted clients only; with auth.authorization, superusers only; see docs/iceberg-catalog.md, Credentials)."`
			AllowWrites          bool     `yaml:"allowWrites" default:"false" doc:"Let REST catalog clients write (namespaces, user tables, commits) on a node without auth.authorization; off, the catalog is read-only there. With authorization, the grants decide instead (tenant admins write their tenant's tables; docs/iceberg-catalog.md, Who may do what)."`
		} `yaml:"iceberg"`
	} `yaml:"tables"`
}

// boolFlag is a flag of a bool field: given alone it means true; its value
// is parsed with the field's other sources.
type boolFlag struct{ v *string }

func (b boolFlag) String() string {
	if b.v == nil {
		return ""
	}
	return *b.v
}
func (b boolFlag) Set(s string) error { *b.v = s; return nil }
func (b boolFlag) IsBoolFlag() bool   { return true }

// configField is one leaf of Config.
type configField struct {
	path  string // dotted YAML path, e.g. "etcd.endpoints"
	env   string // LAKEGATE_ETCD_ENDPOINTS
	flag  string // etcd-endpoints
	def   string
	doc   string
	value reflect.Value
	// secret is the field's secret tag: "true" for a value that is a
	// secret as a whole (a password, a token, a key: file:// references
	// excepted), ":" or "=" for a list of "name:secret" or "key=value"
	// items whose part after the first separator is; "" for none.
	// `lakegate config check` prints such values masked (maskSecret).
	secret string
	// noLimit: the field's nolimit tag "true" lets an integer be -1 (no
	// limit, as Pulsar's retention defaults); others must not be negative.
	noLimit bool
}

func configFields(c *Config) []configField {
	var out []configField
	var walk func(v reflect.Value, t reflect.Type, prefix []string)
	walk = func(v reflect.Value, t reflect.Type, prefix []string) {
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			key := strings.Split(sf.Tag.Get("yaml"), ",")[0]
			p := append(append([]string(nil), prefix...), key)
			if sf.Type.Kind() == reflect.Struct && sf.Type != reflect.TypeOf(time.Duration(0)) {
				walk(v.Field(i), sf.Type, p)
				continue
			}
			out = append(out, configField{
				path:    strings.Join(p, "."),
				env:     "LAKEGATE_" + strings.ToUpper(snake(strings.Join(p, "_"))),
				flag:    strings.ReplaceAll(snake(strings.Join(p, "-")), "_", "-"),
				def:     sf.Tag.Get("default"),
				doc:     sf.Tag.Get("doc"),
				value:   v.Field(i),
				secret:  sf.Tag.Get("secret"),
				noLimit: sf.Tag.Get("nolimit") == "true",
			})
		}
	}
	walk(reflect.ValueOf(c).Elem(), reflect.TypeOf(*c), nil)
	return out
}

// snake turns "dataDir" into "data_dir" (separators are kept); a run of
// capitals is one word: "openIDRoleClaim" is "open_id_role_claim",
// "sizeInMB" is "size_in_mb".
func snake(s string) string {
	isUpper := func(c byte) bool { return c >= 'A' && c <= 'Z' }
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isUpper(c) {
			if i > 0 && s[i-1] != '_' && s[i-1] != '-' && s[i-1] != '.' &&
				(!isUpper(s[i-1]) || (i+1 < len(s) && !isUpper(s[i+1]) && s[i+1] != '_' && s[i+1] != '-' && s[i+1] != '.')) {
				b.WriteByte('_')
			}
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}

// set parses s into the field; the error names the key.
func (f configField) set(s, source string) error {
	bad := func(err error) error {
		return fmt.Errorf("config %s (%s): %q: %v", f.path, source, s, err)
	}
	switch f.value.Interface().(type) {
	case string:
		f.value.SetString(s)
	case bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return bad(err)
		}
		f.value.SetBool(b)
	case int, int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return bad(err)
		}
		if n < 0 && (!f.noLimit || n != -1) {
			if f.noLimit {
				return bad(errors.New("must be -1 (no limit), 0 or more"))
			}
			return bad(errors.New("must not be negative"))
		}
		f.value.SetInt(n)
	case time.Duration:
		d, err := time.ParseDuration(s)
		if err != nil {
			return bad(err)
		}
		if d < 0 {
			return bad(errors.New("must not be negative"))
		}
		f.value.SetInt(int64(d))
	case []string:
		var parts []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
		f.value.Set(reflect.ValueOf(parts))
	default:
		return bad(fmt.Errorf("unsupported type %s", f.value.Type()))
	}
	return nil
}

// loadConfig builds the configuration of a node command: defaults, then the
// --config file, then LAKEGATE_* variables, then flags.
func loadConfig(name string, args []string, environ []string) (*Config, error) {
	c := &Config{}
	fields := configFields(c)
	for _, f := range fields {
		if f.def != "" {
			if err := f.set(f.def, "default"); err != nil {
				return nil, err
			}
		}
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	file := fs.String("config", "", "YAML configuration file (keys in docs/configuration.md)")
	flagVals := map[string]*string{}
	for _, f := range fields {
		v := new(string)
		flagVals[f.flag] = v
		if _, ok := f.value.Interface().(bool); ok {
			fs.Var(boolFlag{v}, f.flag, f.doc+" [env "+f.env+"]") // --flag alone means true
			continue
		}
		fs.StringVar(v, f.flag, "", f.doc+" [env "+f.env+"]")
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *file != "" {
		b, err := os.ReadFile(*file)
		if err != nil {
			return nil, fmt.Errorf("config file: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)                                            // an unknown key is an error naming it
		if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) { // io.EOF: empty file
			return nil, fmt.Errorf("config file %s: %w", *file, err)
		}
	}
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	for _, f := range fields {
		if v, ok := env[f.env]; ok {
			if err := f.set(v, "env "+f.env); err != nil {
				return nil, err
			}
		}
	}
	var ferr error
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "config" || ferr != nil {
			return
		}
		for _, f := range fields {
			if f.flag == fl.Name {
				ferr = f.set(*flagVals[fl.Name], "flag --"+fl.Name)
			}
		}
	})
	if ferr != nil {
		return nil, ferr
	}
	return c, c.validate()
}

func (c *Config) validate() error {
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("config log.level: %q is not one of debug, info, warn, error", c.Log.Level)
	}
	if _, err := budgetOf(c); err != nil {
		return err
	}
	if c.DataDir == "" && (c.Objects == "" || len(c.Etcd.Endpoints) == 0) {
		return errors.New("config dataDir: empty, and objects or etcd.endpoints is not set")
	}
	for _, f := range c.Tables.Formats {
		switch strings.ToLower(f) {
		case "delta", "iceberg":
		case "none":
			if len(c.Tables.Formats) > 1 {
				return errors.New("config tables.formats: none excludes every other format")
			}
		default:
			return fmt.Errorf("config tables.formats: %q is not one of delta, iceberg, none", f)
		}
	}
	switch c.Tables.Iceberg.Kind {
	case "auto", "lakegate", "sql", "rest":
	default:
		return fmt.Errorf("config tables.iceberg.kind: %q is not one of auto, lakegate, sql, rest", c.Tables.Iceberg.Kind)
	}
	if len(c.Tables.Iceberg.Clients) > 0 && c.Tables.Iceberg.TokenKey == "" {
		return errors.New("config tables.iceberg.tokenKey: the REST catalog's clients need a token key")
	}
	for _, cl := range c.Tables.Iceberg.Clients {
		if id, secret, ok := strings.Cut(cl, ":"); !ok || id == "" || secret == "" {
			return fmt.Errorf("config tables.iceberg.clients: %q is not id:secret", cl)
		}
	}
	for _, kv := range c.Tables.Iceberg.ClientProps {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("config tables.iceberg.clientProps: %q is not key=value", kv)
		}
	}
	if c.Tables.Iceberg.Kind == "rest" && c.Tables.Iceberg.URI == "" {
		return errors.New("config tables.iceberg.uri: the rest catalog needs its URL")
	}
	if c.Tables.MaxInflight < 1 {
		return errors.New("config tables.maxInflight: must be at least 1")
	}
	if c.Engine.WALSegmentBytes < 0 {
		return errors.New("config engine.walSegmentBytes: must not be negative")
	}
	if c.Engine.MaxInflightFlushes < 1 {
		return errors.New("config engine.maxInflightFlushes: must be at least 1")
	}
	if t := c.Policies.AllowAutoTopicCreationType; t != broker.TopicTypeNonPartitioned && t != broker.TopicTypePartitioned {
		return fmt.Errorf("config policies.allowAutoTopicCreationType: %q: want non-partitioned or partitioned", t)
	}
	if c.Policies.DefaultNumPartitions < 1 {
		return errors.New("config policies.defaultNumPartitions: must be at least 1")
	}
	if err := c.validateEtcd(); err != nil {
		return err
	}
	return c.validateSecurity()
}

// validateEtcd checks the keys that secure an external etcd cluster
// (security.go builds them).
func (c *Config) validateEtcd() error {
	e := c.Etcd
	secured := e.TLSCAFile != "" || e.TLSCertFile != "" || e.TLSKeyFile != "" || e.Username != "" || e.Password != "" || e.PasswordFile != ""
	if secured && len(e.Endpoints) == 0 {
		return errors.New("config etcd.tls*, etcd.username, etcd.password: only for an external cluster (etcd.endpoints); the embedded member listens on 127.0.0.1 only")
	}
	if (e.TLSCertFile == "") != (e.TLSKeyFile == "") {
		return errors.New("config etcd.tlsCertFile, etcd.tlsKeyFile: a client certificate needs both")
	}
	if e.TLSCAFile != "" || e.TLSCertFile != "" {
		for _, ep := range e.Endpoints {
			if strings.HasPrefix(ep, "http://") {
				return fmt.Errorf("config etcd.endpoints: %s is plain HTTP while etcd TLS is configured (etcd.tlsCaFile, etcd.tlsCertFile): use https://", ep)
			}
		}
	}
	if e.Password != "" && e.PasswordFile != "" {
		return errors.New("config etcd.password, etcd.passwordFile: give one of them")
	}
	if e.Username != "" && e.Password == "" && e.PasswordFile == "" {
		return errors.New("config etcd.username: needs etcd.password or etcd.passwordFile")
	}
	if e.Username == "" && (e.Password != "" || e.PasswordFile != "") {
		return errors.New("config etcd.password, etcd.passwordFile: need etcd.username")
	}
	return nil
}

// validateSecurity checks the TLS and auth keys (security.go).
func (c *Config) validateSecurity() error {
	tlsListener := c.Pulsar.TLSAddr != "" || c.HTTP.TLSAddr != ""
	if tlsListener && (c.TLS.CertFile == "" || c.TLS.KeyFile == "") {
		return errors.New("config tls.certFile, tls.keyFile: a TLS listener (pulsar.tlsAddr, http.tlsAddr) needs both")
	}
	if c.Pulsar.Addr == "" && c.Pulsar.TLSAddr == "" {
		return errors.New("config pulsar.addr, pulsar.tlsAddr: at least one Pulsar listener is needed")
	}
	if c.Kafka.TLS && (c.TLS.CertFile == "" || c.TLS.KeyFile == "") {
		return errors.New("config kafka.tls: needs tls.certFile and tls.keyFile")
	}
	if c.Kafka.TransactionalIDExpiration <= 0 {
		return fmt.Errorf("config kafka.transactionalIdExpiration: %v is not positive", c.Kafka.TransactionalIDExpiration)
	}
	if t, ns, ok := strings.Cut(c.Kafka.Namespace, "/"); !ok || t == "" || ns == "" || strings.Contains(ns, "/") {
		return fmt.Errorf("config kafka.namespace: %q is not tenant/namespace", c.Kafka.Namespace)
	}
	if c.HTTP.Addr == "" && c.HTTP.TLSAddr == "" {
		return errors.New("config http.addr, http.tlsAddr: at least one HTTP listener is needed")
	}
	if n := c.Transactions.Coordinators; n < 1 || n > 256 {
		return fmt.Errorf("config transactions.coordinators: %d is not in 1–256", n)
	}
	if !c.Auth.Enabled {
		return nil
	}
	if len(c.Auth.Providers) == 0 {
		return errors.New("config auth.providers: authentication needs at least one provider (token, openid, tls)")
	}
	for _, p := range c.Auth.Providers {
		switch p {
		case "token":
			if (c.Auth.TokenSecretKey == "") == (c.Auth.TokenPublicKey == "") {
				return errors.New("config auth.tokenSecretKey, auth.tokenPublicKey: the token provider needs exactly one of them")
			}
			if c.Auth.TokenAudienceClaim != "" && c.Auth.TokenAudienceClaim != "aud" && c.Auth.TokenAudience == "" {
				return fmt.Errorf("config auth.tokenAudienceClaim, auth.tokenAudience: claim %q is set but no audience to find in it", c.Auth.TokenAudienceClaim)
			}
		case "openid":
			if len(c.Auth.OpenIDAllowedTokenIssuers) == 0 || len(c.Auth.OpenIDAllowedAudiences) == 0 {
				return errors.New("config auth.openIDAllowedTokenIssuers, auth.openIDAllowedAudiences: the openid provider needs both")
			}
			for key, v := range map[string]int{
				"openIDCacheSize":                     c.Auth.OpenIDCacheSize,
				"openIDCacheRefreshAfterWriteSeconds": c.Auth.OpenIDCacheRefreshAfterWriteSeconds,
				"openIDCacheExpirationSeconds":        c.Auth.OpenIDCacheExpirationSeconds,
				"openIDKeyIdCacheMissRefreshSeconds":  c.Auth.OpenIDKeyIDCacheMissRefreshSeconds,
				"openIDHttpConnectionTimeoutMillis":   c.Auth.OpenIDHTTPConnectionTimeoutMillis,
				"openIDHttpReadTimeoutMillis":         c.Auth.OpenIDHTTPReadTimeoutMillis,
			} {
				if v < 1 {
					return fmt.Errorf("config auth.%s: must be at least 1", key)
				}
			}
		case "tls":
			if !tlsListener || c.TLS.CAFile == "" {
				return errors.New("config auth.providers: tls needs a TLS listener and tls.caFile (the CA client certificates are checked against)")
			}
		default:
			return fmt.Errorf("config auth.providers: %q is not one of token, openid, tls", p)
		}
	}
	return c.validatePeers()
}

// validatePeers checks what a cluster node with authentication sends to
// other members (docs/security.md, Clusters): never a token in clear unless
// cluster.allowPlaintextPeers, and in proxy mode credentials to relay with.
func (c *Config) validatePeers() error {
	if len(c.Etcd.Endpoints) == 0 { // standalone: no other member
		return nil
	}
	if !c.Cluster.AllowPlaintextPeers {
		if c.HTTP.TLSAddr == "" {
			return errors.New("config http.tlsAddr: a cluster node with authentication forwards admin requests and hands topics over to other members with a token, which would travel in clear without an HTTPS listener; set http.tlsAddr (and tls.*), or cluster.allowPlaintextPeers (unsafe)")
		}
		if c.Cluster.ProxyLookups && c.Pulsar.TLSAddr == "" {
			return errors.New("config pulsar.tlsAddr: in proxy mode a cluster node with authentication relays clients' connections, with their tokens, to other members, which would travel in clear without a pulsar+ssl listener; set pulsar.tlsAddr (and tls.*), or cluster.allowPlaintextPeers (unsafe)")
		}
	}
	if c.Cluster.ProxyLookups {
		if c.Auth.BrokerClientToken == "" && !slices.Contains(c.Auth.Providers, "tls") {
			return errors.New("config auth.brokerClientToken: in proxy mode a node relays connections to other members as a proxy role (auth.proxyRoles); give it a broker client token, or turn the tls provider on so that its certificate authenticates it")
		}
		if len(c.Auth.ProxyRoles) == 0 {
			return errors.New("config auth.proxyRoles: in proxy mode the members relay connections to each other as a proxy role; list the role of auth.brokerClientToken (or of the nodes' certificate)")
		}
	}
	return nil
}

// configDocs renders docs/configuration.md.
func configDocs() string {
	var b strings.Builder
	b.WriteString("# Configuration\n\n")
	b.WriteString("Generated by `lakegate config docs` from the code (`cmd/lakegate/config.go`);\n")
	b.WriteString("a test fails when this file and the code disagree.\n\n")
	b.WriteString("`lakegate standalone` needs no configuration. `lakegate serve --config FILE`\n")
	b.WriteString("reads a YAML file with the keys below. Precedence: default < file <\n")
	b.WriteString("environment variable < flag. An unknown key or an invalid value stops the\n")
	b.WriteString("node at start with a message naming the key.\n\n")
	b.WriteString("| key | env | flag | default | meaning |\n|---|---|---|---|---|\n")
	for _, f := range configFields(&Config{}) {
		def := f.def
		if def == "" {
			def = "—"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | `--%s` | `%s` | %s |\n", f.path, f.env, f.flag, def, f.doc)
	}
	b.WriteString("\nExample (`deploy/lakegate.example.yaml`):\n\n```yaml\n")
	b.WriteString(exampleConfig)
	b.WriteString("```\n")
	return b.String()
}

const exampleConfig = `dataDir: /var/lib/lakegate
objects: s3://my-bucket?region=eu-west-1&prefix=lakegate/
etcd:
  endpoints: [http://etcd-0:2379, http://etcd-1:2379, http://etcd-2:2379]
pulsar:
  addr: ":6650"
  advertisedAddr: lakegate-0.lakegate:6650
http:
  addr: ":8080"
log:
  json: true
engine:
  linger: 250ms
  flushBytes: 4194304
`
