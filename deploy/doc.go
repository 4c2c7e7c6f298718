// Package deploy holds no code: it is the container image (Dockerfile), the
// Kubernetes manifests (k8s/), the compose laptop cluster (compose.yaml) and
// example configurations, plus the tests that keep them honest without
// Docker or a cluster (deploy_test.go): the Dockerfile's own `go build` line
// must give a statically linked binary, every manifest must parse and keep
// its invariants (probes on the right paths and ports, resources, non-root,
// selectors that select, references that resolve), and every configuration
// must load with lakegate's own loader (`lakegate config check`).
package deploy
