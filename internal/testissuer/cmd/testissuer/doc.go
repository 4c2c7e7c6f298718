// Command testissuer runs a test OpenID Connect issuer (package testissuer)
// as a process, for the interop suites' OAuth2 scenarios: it writes one
// credentials file per client into DIR (<id>.json, the key file format the
// Pulsar clients read: {"type":"client_credentials","client_id":…,
// "client_secret":…,"issuer_url":…}), prints
//
//	testissuer ready url=http://127.0.0.1:PORT
//
// and serves until SIGINT or SIGTERM. For tests only.
//
//	go run ./internal/testissuer/cmd/testissuer -dir DIR -client app:secret1 -client other:secret2:subject -audience lakegate
package main
