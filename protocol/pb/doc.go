// Package pb is the Go code protoc-gen-go generates from pulsar_api.proto:
// lakegate's own definition of the Pulsar binary protocol's messages,
// wire-compatible with Apache Pulsar's PulsarApi.proto at protocol
// version 21 (same messages, field numbers, types, defaults and enum
// values; its own proto package, so it never collides in the protobuf
// registry with the copy pulsar-client-go registers). Do not edit
// pulsar_api.pb.go: change the .proto and run protocol/gen.sh (make proto).
//
// Files:
//
//	pulsar_api.proto  the protocol's messages (proto2)
//	pulsar_api.pb.go  the generated code
package pb
