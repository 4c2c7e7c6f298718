// Package admin is the admin REST's front door: Pulsar's admin REST v2 (the
// subset pulsar-admin and the Go pulsaradmin package call), v3's
// transactions, and lakegate's extensions (tables), under /admin/ and
// /lookup/ of the node's HTTP surface (nodehttp mounts Handler).
//
// Topic behaviour is the broker layer's (package broker); the topics this
// node serves, with their live producers and subscription actors, are the
// gateway's, which the admin REST reaches through its port Node (port.go)
// so that stats, subscription changes and cursor resets see them. The
// admin REST never imports the gateway; node/assembly hands it the gateway
// as its Node (assembly.AdminConfig).
//
// Handlers return (value, error) (answer.go): none writes an error
// itself, and one function maps every error to its HTTP status.
//
// Files:
//
//	routes.go        THE route table (method, path, who may call, handler)
//	                 and Handler, which builds the mux from it
//	answer.go        handler/writer, the adapter that writes answers, THE
//	                 error→status mapping and error body
//	port.go          Node (what the admin REST asks of the gateway) and Config
//	admin.go         clusters, tenants, namespaces, request helpers
//	auth.go          authentication, authorization rules, grants
//	cluster.go       lookup, brokers, forwarding to owners, fan-out
//	topics.go        topic create/grow/list/delete, lastMessageId,
//	                 terminate, unload, raw entry
//	subscriptions.go subscriptions list/create/delete/reset cursor, peek
//	backlog.go       the backlog runbook: skip, clear-backlog, expire-messages
//	stats.go         stats and partitioned-stats
//	policies.go      retention, message TTL, backlog quotas
//	limits.go        producer/consumer/unacked limits, rates
//	dedup.go         deduplication
//	compaction.go    topic compaction
//	schemas.go       schemas and compatibility strategies
//	tables.go        lakegate's table extensions
//	nonpersistent.go non-persistent topics
//	transactions.go  Pulsar's /admin/v3/transactions/ over txn.Coordinator
//
// Deleted topics. lakestream tombstones a dropped stream's name: a topic name
// that was deleted cannot be created again (409 with a reason).
//
// Non-persistent topics (nonpersistent.go): listed (the ones served by
// every member), stats and unload through their owner; other calls answer
// 501.
package admin
