// Package adminclient is a client of a lakegate node's Pulsar admin REST
// v2 (served under /admin/v2/ on the node's HTTP address): topics
// (list, create, delete, stats), subscriptions (list, reset) and tables;
// and of v3's transactions (coordinators' stats, a transaction, the slow
// ones, abort).
// Each command prints what `lakegate admin` shows: aligned tables, or the
// server's JSON (Options.JSON). A non-2xx answer is an *HTTPError with the
// server's reason.
//
// cmd/lakegate parses the flags and calls it; it depends on nothing of
// lakegate's (only the REST's JSON), so it can talk to any node version
// that serves the same paths.
//
// Files:
//
//	client.go        Client, Options, HTTPError and the commands
//	doctor.go        doctor
//	transactions.go  the transactions commands
package adminclient
