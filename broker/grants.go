package broker

// Grants: what a role may do on a namespace, topic or subscription. They
// are stored as properties of the namespace or stream (key = prefix +
// role, value = the actions, comma-separated); the gateway checks them on
// CONNECT's requests and the admin REST on its routes and writes them.

// Actions a grant can give.
const (
	ActionProduce = "produce"
	ActionConsume = "consume"
	// ActionLookup is either (not grantable itself).
	ActionLookup = "lookup"
)

// Property key prefixes of grants.
const (
	PermPrefix    = "lakegate.perm."
	SubPermPrefix = "lakegate.subperm."
)

// GrantableActions are the actions a grant may list (Pulsar's AuthAction
// names; "functions", "sources", "sinks", "packages" are accepted and
// stored, and give nothing here).
var GrantableActions = []string{ActionProduce, ActionConsume, "functions", "sources", "sinks", "packages"}

// ForwardedHeader marks an admin request a member forwarded to another
// (the owner of its topic): the receiver answers it itself, never
// forwards it again.
const ForwardedHeader = "X-Lakegate-Forwarded"
