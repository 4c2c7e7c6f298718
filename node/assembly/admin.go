package assembly

import (
	"github.com/lakegate/lakegate/admin"
	"github.com/lakegate/lakegate/gateway"
)

// AdminConfig is the admin REST's configuration for the node whose Pulsar
// front door is gw: gw serves the topics, and its settings (the catalog
// it was given, the membership, authentication and the limits) are the
// admin REST's.
func AdminConfig(gw *gateway.Server) admin.Config {
	c := gw.Settings()
	return admin.Config{
		Node:                     gw,
		Broker:                   gw.Broker(),
		Catalog:                  c.Catalog,
		Membership:               c.Membership,
		Auth:                     c.Auth,
		Authorization:            c.Authorization,
		ProxyRoles:               c.ProxyRoles,
		BrokerClientToken:        c.BrokerClientToken,
		DisableTopicAutoCreation: c.DisableTopicAutoCreation,
		MaxMessageSize:           c.MaxMessageSize,
		MaxRequestBytes:          c.AdminMaxRequestBytes,
		Logger:                   c.Logger,
	}
}
