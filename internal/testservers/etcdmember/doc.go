// Command etcdmember is the etcd server (go.etcd.io/etcd/server/v3, the
// version in go.mod) as a binary, for tests that run an etcd cluster of
// real processes (testservers.StartEtcdCluster builds and starts it). It
// takes etcd's own flags.
package main
