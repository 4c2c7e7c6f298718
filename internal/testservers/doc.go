// Package testservers starts the servers that tests run against: SeaweedFS
// as an S3 service and Azurite as an Azure Blob service (external
// processes), fake-gcs-server as a GCS service (in process), and a
// cluster of real etcd member processes (StartEtcdCluster; the etcd server
// of go.mod built from ./etcdmember into .cache/bin on first use; also
// with client TLS, client certificates and users: StartSecureEtcdCluster).
// Every server listens on loopback on ports chosen
// free at start, so test packages can run in parallel, and is stopped by the
// test's cleanup.
//
// External servers are installed by the project (tools/build-weed.sh into
// .cache/bin/, tools/install-azurite.sh into tools/azurite/node_modules, both
// called by `make tools`). A test whose server is missing fails, saying how
// to install it; set LAKEGATE_SKIP_S3=1 or LAKEGATE_SKIP_AZURE=1 to skip
// those tests instead (e.g. on a machine that cannot build them).
//
// This package is for tests only; nothing in the product imports it.
//
// Files:
//
//	seaweed.go        StartSeaweed: SeaweedFS (weed mini) as an S3 service;
//	                  WeedPath, RepoRoot
//	azurite.go        StartAzurite: Azurite as an Azure Blob service
//	gcs.go            StartGCS: fake-gcs-server, in process
//	etcd.go           StartEtcdCluster, StartSecureEtcdCluster: etcd member
//	                  processes (EtcdMemberPath builds ./etcdmember)
//	etcd_security.go  EtcdSecurity: client TLS, client certificates, users
//	ports.go          free loopback ports for the servers
//	proc_linux.go     child processes in their own group, killed with the
//	proc_unix.go      test (Linux: also when the starting thread dies)
//	seaweed_other.go  off unix, StartSeaweed, StartAzurite and the etcd
//	azurite_other.go  clusters skip the test
//	etcd_other.go
//
// etcdmember/ is the etcd server as a command, built by etcd.go.
package testservers
