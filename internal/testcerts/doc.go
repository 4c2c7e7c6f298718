// Package testcerts makes a throwaway certificate authority, server and
// client certificates for tests of TLS and mTLS (PEM files in a directory).
// Keys are ECDSA P-256; certificates last a day (ClientUntil: as long as
// asked). Never for production.
package testcerts
