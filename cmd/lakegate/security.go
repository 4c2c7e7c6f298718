package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/lakegate/lakegate/auth"
)

// security is a node's TLS and authentication, built from its
// configuration (docs/security.md).
type security struct {
	tls   *auth.Reloader      // nil without TLS listeners
	authn *auth.Authenticator // nil without authentication
}

func newSecurity(c *Config) (*security, error) {
	sec := &security{}
	if c.Pulsar.TLSAddr != "" || c.HTTP.TLSAddr != "" {
		r, err := auth.NewReloader(auth.TLSFiles{CertFile: c.TLS.CertFile, KeyFile: c.TLS.KeyFile, CAFile: c.TLS.CAFile})
		if err != nil {
			return nil, fmt.Errorf("config tls: %w", err)
		}
		sec.tls = r
	}
	if !c.Auth.Enabled {
		return sec, nil
	}
	ac := auth.Config{
		Providers: c.Auth.Providers,
		Token:     auth.TokenConfig{RoleClaim: c.Auth.TokenClaim, Audience: c.Auth.TokenAudience, AudienceClaim: c.Auth.TokenAudienceClaim},
		OpenID:    openIDConfig(c),
	}
	if slices.Contains(c.Auth.Providers, auth.MethodToken) {
		if c.Auth.TokenSecretKey != "" {
			k, err := auth.ReadKeyData(c.Auth.TokenSecretKey)
			if err == nil {
				err = auth.CheckSecretKey(k)
			}
			if err != nil {
				return nil, fmt.Errorf("config auth.tokenSecretKey: %w", err)
			}
			ac.Token.SecretKey = k
		} else {
			b, err := auth.ReadKeyData(c.Auth.TokenPublicKey)
			if err != nil {
				return nil, fmt.Errorf("config auth.tokenPublicKey: %w", err)
			}
			pub, err := auth.ParsePublicKey(b)
			if err != nil {
				return nil, fmt.Errorf("config auth.tokenPublicKey: %w", err)
			}
			ac.Token.PublicKey = pub
		}
	}
	a, err := auth.New(ac)
	if err != nil {
		return nil, fmt.Errorf("config auth: %w", err)
	}
	sec.authn = a
	if len(c.Etcd.Endpoints) > 0 && c.Cluster.ProxyLookups {
		if err := sec.checkRelayRole(c); err != nil {
			return nil, err
		}
	}
	return sec, nil
}

// checkRelayRole makes sure that the role this node relays connections
// with in proxy mode — its broker client token's, else its certificate's —
// is one of auth.proxyRoles (every member has the same list): otherwise
// every relayed connection would be refused by its owner.
func (sec *security) checkRelayRole(c *Config) error {
	var role, what string
	if t := c.Auth.BrokerClientToken; t != "" {
		id, err := sec.authn.Authenticate(auth.MethodToken, []byte(t), nil)
		if err != nil {
			return fmt.Errorf("config auth.brokerClientToken: this node's own token does not authenticate here: %w", err)
		}
		role, what = id.Role, "auth.brokerClientToken"
	} else {
		if sec.tls == nil {
			return fmt.Errorf("config auth.brokerClientToken: in proxy mode without a broker client token a node relays with its certificate, and it has none (tls.certFile)")
		}
		cert, err := sec.tls.Certificate()
		if err != nil {
			return fmt.Errorf("config tls.certFile: %w", err)
		}
		role, what = cert.Subject.CommonName, "the certificate tls.certFile"
	}
	if !auth.IsProxyRole(role, c.Auth.ProxyRoles) {
		return fmt.Errorf("config auth.proxyRoles: this node relays connections in proxy mode as role %q (%s), which is not among auth.proxyRoles %v: the other members would refuse them", role, what, c.Auth.ProxyRoles)
	}
	return nil
}

// openIDConfig is the openid provider's configuration (Pulsar's openID*
// settings, whose names the auth.openID* keys keep).
func openIDConfig(c *Config) auth.OpenIDConfig {
	sec := func(n int) time.Duration { return time.Duration(n) * time.Second }
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	a := &c.Auth
	return auth.OpenIDConfig{
		AllowedTokenIssuers:    a.OpenIDAllowedTokenIssuers,
		AllowedAudiences:       a.OpenIDAllowedAudiences,
		RoleClaim:              a.OpenIDRoleClaim,
		AcceptedTimeLeeway:     sec(a.OpenIDAcceptedTimeLeewaySeconds),
		CacheSize:              a.OpenIDCacheSize,
		CacheRefreshAfterWrite: sec(a.OpenIDCacheRefreshAfterWriteSeconds),
		CacheExpiration:        sec(a.OpenIDCacheExpirationSeconds),
		KeyIDCacheMissRefresh:  sec(a.OpenIDKeyIDCacheMissRefreshSeconds),
		HTTPConnectionTimeout:  ms(a.OpenIDHTTPConnectionTimeoutMillis),
		HTTPReadTimeout:        ms(a.OpenIDHTTPReadTimeoutMillis),
		AllowInsecureIssuers:   !a.OpenIDRequireIssuersUseHTTPS,
		TrustCertsFile:         a.OpenIDTokenIssuerTrustCertsFilePath,
	}
}

// etcdClient returns what the node presents to an external etcd cluster
// (docs/security.md, "etcd"): the TLS configuration (nil without
// etcd.tls* keys) and the user and password (the password read from
// etcd.passwordFile when given). Whoever can write the cluster's keys owns
// the lakegate cluster, so production clusters set both.
func etcdClient(c *Config) (cfg *tls.Config, user, password string, err error) {
	e := c.Etcd
	switch {
	case e.TLSCertFile != "":
		// The client certificate is re-read when its files change
		// (rotation without restart), like the listeners' certificates.
		r, err := auth.NewReloader(auth.TLSFiles{CertFile: e.TLSCertFile, KeyFile: e.TLSKeyFile, CAFile: e.TLSCAFile})
		if err != nil {
			return nil, "", "", fmt.Errorf("config etcd.tlsCertFile, etcd.tlsKeyFile, etcd.tlsCaFile: %w", err)
		}
		cfg = r.ClientConfig()
	case e.TLSCAFile != "":
		b, err := os.ReadFile(e.TLSCAFile)
		if err != nil {
			return nil, "", "", fmt.Errorf("config etcd.tlsCaFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, "", "", fmt.Errorf("config etcd.tlsCaFile: %s holds no PEM certificate", e.TLSCAFile)
		}
		cfg = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	}
	password = e.Password
	if e.PasswordFile != "" {
		b, err := os.ReadFile(e.PasswordFile)
		if err != nil {
			return nil, "", "", fmt.Errorf("config etcd.passwordFile: %w", err)
		}
		password = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if password == "" {
			return nil, "", "", fmt.Errorf("config etcd.passwordFile: %s is empty", e.PasswordFile)
		}
	}
	return cfg, e.Username, password, nil
}

// serverTLS is the TLS configuration of the node's TLS listeners: client
// certificates are asked for when the tls provider is on.
func (sec *security) serverTLS() *tls.Config {
	requestCerts := sec.authn != nil && slices.Contains(sec.authn.Methods(), auth.MethodTLS)
	return sec.tls.ServerConfig(requestCerts)
}

// clientTLS returns the configuration for reaching other members over TLS,
// asked for at every new connection (a rotated CA file is used from the next
// one on); nil: the defaults.
func (sec *security) clientTLS() func() *tls.Config {
	if sec.tls == nil {
		return nil
	}
	return sec.tls.ClientConfig
}

// listeners are a node's open listeners (nil when not configured) and the
// endpoints it advertises.
type listeners struct {
	pulsar, pulsarTLS, http, https net.Listener
	kafka                          net.Listener
	kafkaAdv                       string
	endpoints                      map[string]string
	pulsarAdv, pulsarTLSAdv        string
}

// openListeners listens on every configured address first: their actual
// addresses are what the node advertises when it joins.
func openListeners(c *Config, sec *security) (*listeners, error) {
	l := &listeners{endpoints: map[string]string{}}
	// wrap (the HTTP connection limit) goes under TLS: the HTTP server
	// must see TLS connections as such.
	open := func(addr string, secure bool, wrap ...func(net.Listener) net.Listener) (net.Listener, error) {
		if addr == "" {
			return nil, nil
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, err
		}
		for _, w := range wrap {
			ln = w(ln)
		}
		if secure {
			ln = tls.NewListener(ln, sec.serverTLS())
		}
		return ln, nil
	}
	var err error
	if l.pulsar, err = open(c.Pulsar.Addr, false); err != nil {
		return nil, fmt.Errorf("pulsar listener: %w", err)
	}
	if l.pulsarTLS, err = open(c.Pulsar.TLSAddr, true); err != nil {
		l.close()
		return nil, fmt.Errorf("pulsar+ssl listener: %w", err)
	}
	if l.kafka, err = open(c.Kafka.Addr, c.Kafka.TLS); err != nil {
		l.close()
		return nil, fmt.Errorf("kafka listener: %w", err)
	}
	if l.http, err = open(c.HTTP.Addr, false, httpLimits(c).Listener); err != nil {
		l.close()
		return nil, fmt.Errorf("http listener: %w", err)
	}
	if l.https, err = open(c.HTTP.TLSAddr, true, httpLimits(c).Listener); err != nil {
		l.close()
		return nil, fmt.Errorf("https listener: %w", err)
	}
	// A cluster node's wildcard listener is advertised under the host's
	// name (as Pulsar's advertisedAddress), never as localhost: other
	// members would reach themselves there.
	clustered := len(c.Etcd.Endpoints) > 0
	adv := func(configured string, ln net.Listener) (string, error) {
		a, err := advertised(configured, ln.Addr(), clustered)
		if err != nil {
			l.close()
		}
		return a, err
	}
	if l.pulsar != nil {
		if l.pulsarAdv, err = adv(c.Pulsar.AdvertisedAddr, l.pulsar); err != nil {
			return nil, fmt.Errorf("config pulsar.advertisedAddr: %w", err)
		}
		l.endpoints["pulsar"] = "pulsar://" + l.pulsarAdv
	}
	if l.pulsarTLS != nil {
		if l.pulsarTLSAdv, err = adv(c.Pulsar.AdvertisedTLSAddr, l.pulsarTLS); err != nil {
			return nil, fmt.Errorf("config pulsar.advertisedTlsAddr: %w", err)
		}
		l.endpoints["pulsar+ssl"] = "pulsar+ssl://" + l.pulsarTLSAdv
	}
	if l.kafka != nil {
		if l.kafkaAdv, err = adv(c.Kafka.AdvertisedAddr, l.kafka); err != nil {
			return nil, fmt.Errorf("config kafka.advertisedAddr: %w", err)
		}
		l.endpoints["kafka"] = l.kafkaAdv
	}
	if l.http != nil {
		a, err := adv(c.HTTP.AdvertisedAddr, l.http)
		if err != nil {
			return nil, fmt.Errorf("config http.advertisedAddr: %w", err)
		}
		l.endpoints["http"] = "http://" + a
	}
	if l.https != nil {
		a, err := adv(c.HTTP.AdvertisedTLSAddr, l.https)
		if err != nil {
			return nil, fmt.Errorf("config http.advertisedTlsAddr: %w", err)
		}
		l.endpoints["https"] = "https://" + a
	}
	return l, nil
}

func (l *listeners) close() {
	for _, ln := range []net.Listener{l.pulsar, l.pulsarTLS, l.kafka, l.http, l.https} {
		if ln != nil {
			ln.Close()
		}
	}
}

// tlsList is the pulsar+ssl listener as Serve's variadic argument.
func (l *listeners) tlsList() []net.Listener {
	if l.pulsarTLS == nil {
		return nil
	}
	return []net.Listener{l.pulsarTLS}
}
