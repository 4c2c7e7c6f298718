// Package tc is the transaction coordinator (docs/transactions.md):
// transactions' records in the metadata store, their outcome, their
// timeouts, and the pending acknowledgements subscriptions keep for them.
// It implements txn.Coordinator.
//
// Coordinator i is served by the owner of the ownership unit
// "txn-coordinator:<i>" (txn.Unit). Ownership routes requests and runs the
// timeouts; it is not what keeps the records right: every write compares
// the revision it read, so two nodes that both believe they serve a
// coordinator (one paused past its session) cannot both change a
// transaction.
//
//	coordinator.go  Config, Coordinator: the coordinators this node serves,
//	                NEW, ADD_PARTITION, ADD_SUBSCRIPTION, END, timeouts
//	keys.go         the metadata keys, the record's encoding
//	acks.go         pending acknowledgements in the metadata store, the
//	                watch that tells subscriptions how transactions ended,
//	                the Kafka transactional.id records (load, compare-and-
//	                put, pages, compare-and-delete)
package tc
