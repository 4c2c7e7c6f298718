// Package txn names transactions (docs/transactions.md; issue #30): a
// transaction's ID, its state and record, the coordinator's errors, and
// Coordinator, the interface through which the front doors (the Pulsar
// gateway's TC commands, later the Kafka listener's transactional
// requests) and the broker use the transaction coordinator. It imports
// nothing of the storage side; txn/tc implements Coordinator on the
// metadata store, and the node's assembly hands it over.
//
// A transaction's messages are the engine's: staged appends of the
// staging set the transaction names (ID.Set, lakestream.Staging),
// committed into every log in one commit record, or discarded.
//
//	record.go  ID, State, Sub, Record, Unit, the errors, Coordinator
package txn
