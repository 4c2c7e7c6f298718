// Package txn is the transaction coordinator (docs/transactions.md; issue
// #30): transactions' records in the metadata store, their outcome, their
// timeouts, and the pending acknowledgements subscriptions keep for them.
// It is front-door neutral: the Pulsar gateway's TC commands (and the
// Kafka listener's transactional requests) call it. A transaction's
// messages are the engine's: staged appends of the staging set the
// transaction names (lakestream.Staging), committed into every log in one
// commit record, or discarded.
//
// Coordinator i is served by the owner of the ownership unit
// "txn-coordinator:<i>". Ownership routes requests and runs the timeouts;
// it is not what keeps the records right: every write compares the
// revision it read, so two nodes that both believe they serve a coordinator
// (one paused past its session) cannot both change a transaction.
//
//	coordinator.go  Config, Coordinator: the coordinators this node serves,
//	                NEW, ADD_PARTITION, ADD_SUBSCRIPTION, END, timeouts
//	record.go       ID, State, Record and their keys
//	acks.go         pending acknowledgements in the metadata store, and the
//	                watch that tells subscriptions how transactions ended
package txn
