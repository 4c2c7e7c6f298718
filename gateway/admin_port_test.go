package gateway

import (
	"net/http"

	"github.com/lakegate/lakegate/admin"
)

// adminHandler is the admin REST over srv, built as node/assembly's
// AdminConfig builds it (assembly imports this package, so its tests
// cannot import assembly).
func adminHandler(srv *Server) http.Handler {
	c := srv.Settings()
	return admin.Handler(admin.Config{
		Node: srv, Broker: srv.Broker(), Catalog: c.Catalog, Membership: c.Membership,
		Auth: c.Auth, Authorization: c.Authorization, ProxyRoles: c.ProxyRoles,
		BrokerClientToken: c.BrokerClientToken, DisableTopicAutoCreation: c.DisableTopicAutoCreation,
		MaxMessageSize: c.MaxMessageSize, MaxRequestBytes: c.AdminMaxRequestBytes, Logger: c.Logger,
	})
}

var _ admin.Node = (*Server)(nil)
