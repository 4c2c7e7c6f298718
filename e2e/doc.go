// Package e2e holds end-to-end tests that run lakegate with real components
// (real Pulsar clients over TCP, real etcd, real object-store emulators) and
// the interop suites in other languages.
package e2e
