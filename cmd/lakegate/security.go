package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"slices"

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
	ac := auth.Config{Providers: c.Auth.Providers, Token: auth.TokenConfig{RoleClaim: c.Auth.TokenClaim, Audience: c.Auth.TokenAudience}}
	if slices.Contains(c.Auth.Providers, auth.MethodToken) {
		if c.Auth.TokenSecretKey != "" {
			k, err := auth.ReadKeyData(c.Auth.TokenSecretKey)
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
	return sec, nil
}

// serverTLS is the TLS configuration of the node's TLS listeners: client
// certificates are asked for when the tls provider is on.
func (sec *security) serverTLS() *tls.Config {
	requestCerts := sec.authn != nil && slices.Contains(sec.authn.Methods(), auth.MethodTLS)
	return sec.tls.ServerConfig(requestCerts)
}

// clientTLS is the configuration for reaching other members over TLS (nil:
// the defaults).
func (sec *security) clientTLS() *tls.Config {
	if sec.tls == nil {
		return nil
	}
	return sec.tls.ClientConfig()
}

// listeners are a node's open listeners (nil when not configured) and the
// endpoints it advertises.
type listeners struct {
	pulsar, pulsarTLS, http, https net.Listener
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
	if l.http, err = open(c.HTTP.Addr, false, httpLimits(c).Listener); err != nil {
		l.close()
		return nil, fmt.Errorf("http listener: %w", err)
	}
	if l.https, err = open(c.HTTP.TLSAddr, true, httpLimits(c).Listener); err != nil {
		l.close()
		return nil, fmt.Errorf("https listener: %w", err)
	}
	if l.pulsar != nil {
		l.pulsarAdv = advertised(c.Pulsar.AdvertisedAddr, l.pulsar.Addr())
		l.endpoints["pulsar"] = "pulsar://" + l.pulsarAdv
	}
	if l.pulsarTLS != nil {
		l.pulsarTLSAdv = advertised(c.Pulsar.AdvertisedTLSAddr, l.pulsarTLS.Addr())
		l.endpoints["pulsar+ssl"] = "pulsar+ssl://" + l.pulsarTLSAdv
	}
	if l.http != nil {
		l.endpoints["http"] = "http://" + advertised(c.HTTP.AdvertisedAddr, l.http.Addr())
	}
	if l.https != nil {
		l.endpoints["https"] = "https://" + advertised(c.HTTP.AdvertisedTLSAddr, l.https.Addr())
	}
	return l, nil
}

func (l *listeners) close() {
	for _, ln := range []net.Listener{l.pulsar, l.pulsarTLS, l.http, l.https} {
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
