// Package doctor says, in plain words, what is wrong with a lakegate node
// and its cluster (`lakegate admin doctor`, docs/cluster.md "Diagnosis").
//
// What it owns: the report (Report, Check: a name, a status — ok, warn
// or fail — what was found and what to do about it) and Diagnose, a
// pure function from the facts a node gathered (Facts: its etcd cluster's
// status, an object-store probe, the lakegate members and owners, the
// table lag, whether the node is draining) to the checks, with the
// thresholds that turn a fact into a warning or a failure (Thresholds).
//
// What it must not touch: gathering the facts (node/assembly/doctor.go
// reads etcd, the store and the membership, each bounded in time) and
// serving the report (admin: GET /admin/v2/lakegate/doctor; adminclient
// prints it and asks every member for a cluster-wide run).
package doctor
