// Command lakegate is the one lakegate binary.
//
//	lakegate standalone [--data-dir DIR] [--pulsar-addr :6650] [--http-addr :8080]
//	lakegate serve --config FILE      (cluster node; external etcd)
//	lakegate config docs              (prints docs/configuration.md)
//	lakegate config check --config F  (validates a configuration, prints the result)
//	lakegate bench engine [flags]     (storage-engine benchmark driver)
//	lakegate bench tables [flags]     (a simulated month of a topic's tables)
//	lakegate table scan <topic>       (prints a topic's table rows)
//	lakegate admin <command> [flags]  (admin REST client: topics, subscriptions, tables, transactions)
//	lakegate token <command>          (keys and tokens, as "pulsar tokens")
//	lakegate version
//
// It parses flags and configuration and wires the packages together; the
// behaviour lives in them (docs/DESIGN.md).
//
// Files:
//
//	main.go          the command dispatch and usage
//	config.go        Config: every key with its YAML path, environment
//	                 variable, flag, default and doc (docs/configuration.md
//	                 is generated from it: config docs)
//	config_check.go  config check: the effective configuration, secrets
//	                 masked
//	node.go          standalone and serve: building and running a node
//	security.go      TLS and authentication from the configuration, the
//	                 listeners, the etcd client's credentials
//	http.go          the HTTP handler: nodehttp (metrics, health, the admin
//	                 REST) and the Iceberg REST catalog under /iceberg/
//	tables.go        the table layer: the default materialization, the
//	                 compaction worker, the Iceberg catalog and its REST
//	                 front
//	stdlog.go        dependencies' standard-library log output into slog
//	profile.go       LAKEGATE_CPUPROFILE: a CPU profile of the process
//	bench.go         bench engine and bench tables: flags into package bench
//	table.go         table scan: a topic's table rows (table, csv, json,
//	                 parquet)
//	admin.go         admin: flags into package adminclient
//	token.go         token: keys and tokens (package auth)
package main
