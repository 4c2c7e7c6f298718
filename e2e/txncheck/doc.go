// Package txncheck checks a history of Pulsar transactions against the
// invariants lakegate promises (docs/transactions.md, "Invariants and how
// they are checked"), in the manner of Jepsen's Kafka workload and Elle's
// list-append: writers append unique values to partitions inside
// transactions and record what their client was told; readers record
// what they read; Check compares the two.
//
// The package is a pure core: no clients, no clocks, no goroutines. The
// e2e test TestTxnCheck drives a workload against three `lakegate serve`
// processes under faults and hands the history here; check_test.go feeds
// it hand-made histories, one failing each invariant.
//
// What a history holds:
//
//   - every transaction a writer opened: its values per partition in
//     send order (sends that failed included: their outcome is unknown),
//     the inputs it acknowledged, whether the client asked for the
//     commit, and the outcome the client saw (Committed, Aborted, or
//     Unknown: an error or a timeout);
//   - the inputs, and what a consumer of their subscription received
//     once every transaction had ended;
//   - views: what one reader read, per partition, in receive order, each
//     read with its message id. A complete view read up to a point after
//     every transaction had ended (a sentinel); an ordered view reads each
//     partition once from the earliest message (a Reader), so its order
//     is the partition's.
//
// Checks (Kind):
//
//   - AbortedRead: no value of a transaction that aborted, or whose commit
//     the client never asked for, is read, by any view;
//   - LostWrite: every value of a transaction whose commit was
//     acknowledged is read by every complete view;
//   - Duplicate: a value is read at one position only (one message id) per
//     view, and a position holds one value;
//   - UnknownRead: every value read was written, to the partition it is read
//     from;
//   - Order: in an ordered view, per partition, a writer's committed
//     transactions appear in the order they committed, and a
//     transaction's values in the order they were sent;
//   - Atomicity: a transaction with an unknown outcome is read all or
//     nothing by each complete view, across its partitions, and the same
//     by every complete view;
//   - AckTwice, AckLost, InputLost: with inputs (messages of another
//     topic that transactions acknowledge), each input is acknowledged by
//     at most one committed transaction, and a consumer of the
//     subscription receives it after the end if and only if none did.
//
// It must not touch the network, the clock or a node: it judges.
package txncheck
