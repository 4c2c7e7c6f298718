// Package testissuer is a minimal OpenID Connect issuer for tests of
// lakegate's openid provider with the Pulsar clients' AuthenticationOAuth2
// (client credentials flow). It serves, on loopback:
//
//	GET  /.well-known/openid-configuration   issuer, jwks_uri, token_endpoint
//	GET  /jwks                               the published public keys (RFC 7517)
//	POST /token                              client credentials grant (RFC 6749 §4.4)
//
// The token endpoint takes grant_type=client_credentials with client_id and
// client_secret in a form body (as the Go, Java and C++ clients send them),
// a JSON body, or HTTP Basic authentication, and an optional audience; it
// answers a JWT access token signed with the current key (kid in its
// header): iss, sub (the client's subject), aud (the audience asked for, or
// the default), iat, nbf, exp, client_id, and the client's extra claims.
//
// Keys can be rotated (Rotate: a new signing key, the old one still
// published) and withdrawn (Unpublish), and Mint signs arbitrary tokens, so
// tests can make every kind of bad token. Keys are RSA 2048 (RS256) by
// default, or ECDSA P-256 (ES256). Built on github.com/golang-jwt/jwt/v5,
// the library lakegate verifies with. For tests only: nothing in the
// product imports it. Command ./cmd/testissuer runs one as a process for
// the interop suites.
package testissuer
