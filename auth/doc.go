// Package auth authenticates clients the way Apache Pulsar does, so that
// existing client configurations work unchanged (docs/security.md):
//
//   - token: JWTs as Pulsar's AuthenticationToken sends them (CONNECT
//     auth_method_name "token" with the JWT as auth_data; HTTP
//     "Authorization: Bearer <jwt>"), verified with a secret key (HS256) or
//     a public key (RS256/384/512, ES256/384/512, PS256/384/512); the role
//     is a claim ("sub" by default), "exp" is enforced, "alg: none" and
//     unexpected algorithms are refused; HS keys shorter than 256 bits are
//     refused at start; tokenAudience is looked for in tokenAudienceClaim.
//   - openid: access tokens of OpenID Connect issuers (AuthenticationOAuth2,
//     the client credentials flow; also auth method "token"), verified as
//     Pulsar's AuthenticationProviderOpenID does with keys discovered from
//     each allowed issuer (openid-configuration → jwks_uri, key by "kid",
//     bounded cache, rate-limited refetch on an unknown kid); "iss", "aud",
//     "exp", "nbf", "iat" checked. The providers of method "token" are tried
//     in the configured order.
//   - tls: the verified client certificate's subject common name is the
//     role (AuthenticationTls; the TLS handshake has already checked the
//     certificate against the configured CA).
//
// It also holds the TLS server and client configurations (certificates
// reloaded when their files change) and the minting of keys and tokens for
// `lakegate token` (compatible with `pulsar tokens`).
//
// It writes no cryptography of its own: JWTs are github.com/golang-jwt/jwt/v5,
// TLS and keys are the standard library's. It never logs or returns a
// secret, a token or a key in an error.
//
// Files:
//
//	authenticator.go  Authenticator: the configured providers, by method name;
//	                  Identity; the error kinds failures are counted by
//	token.go          the token provider
//	openid.go         the openid provider: discovery, the issuers' key cache
//	jwks.go           JSON Web Key Sets: RSA and EC signature keys by kid
//	keys.go           reading keys (file:// and data: URLs, PEM or DER)
//	tlsconfig.go      TLS server/client configurations, reloading certificates
//	mint.go           creating secret keys, key pairs and tokens
package auth
