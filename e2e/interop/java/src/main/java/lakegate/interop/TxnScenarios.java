package lakegate.interop;

import static lakegate.interop.Ctx.check;
import static lakegate.interop.Ctx.must;
import static lakegate.interop.Ctx.str;
import static lakegate.interop.Ctx.text;
import static lakegate.interop.Scenarios.b;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.MessageIdAdv;
import org.apache.pulsar.client.api.MessageRoutingMode;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TransactionCoordinatorClientException;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.client.impl.PulsarClientImpl;
import org.apache.pulsar.client.impl.transaction.TransactionCoordinatorClientImpl;
import org.apache.pulsar.common.naming.TopicName;

/**
 * Transactions with the Java client ({@code enableTransaction(true)}):
 * produce to the three partitions of a topic and acknowledge the input in
 * one transaction, then commit or abort; a transaction's timeout; ack
 * conflicts between transactions; a consume-transform-produce loop through
 * a SIGKILL of a node (run.sh kills and restarts it: {@link Nodes}).
 *
 * <p>Nothing here waits by sleeping: "nothing was delivered" is shown with
 * sentinels (plain messages sent to every partition afterwards: once a
 * consumer has every sentinel, everything before them on those partitions
 * has been delivered, so what came before or with them is all there is),
 * and every wait for something to happen polls against a deadline.
 */
final class TxnScenarios {
    private TxnScenarios() {}

    /** Partitions of every output topic. */
    static final int PARTITIONS = 3;
    /** How long one client call (a send, an ack, a commit) may take. */
    static final long CALL_SECONDS = 20;

    static void register(List<Main.Scenario> l) {
        for (SubscriptionType st : new SubscriptionType[] {
                SubscriptionType.Exclusive, SubscriptionType.Failover, SubscriptionType.Shared}) {
            for (boolean cumulative : new boolean[] {false, true}) {
                if (cumulative && st == SubscriptionType.Shared) {
                    continue; // the client refuses cumulative acks on Shared
                }
                for (boolean commit : new boolean[] {true, false}) {
                    String name = "txn-" + (commit ? "commit" : "abort") + "-" + st.name().toLowerCase()
                        + "-" + (cumulative ? "cumulative" : "individual");
                    l.add(new Main.Scenario(name, c -> produceAndAck(c, st, cumulative, commit)));
                }
            }
        }
        l.add(new Main.Scenario("txn-batched-producer", TxnScenarios::batchedProducer));
        l.add(new Main.Scenario("txn-timeout-aborts", TxnScenarios::timeoutAborts));
        l.add(new Main.Scenario("txn-timeout-end-answer", TxnScenarios::timeoutEndAnswer));
        l.add(new Main.Scenario("txn-ack-conflict", TxnScenarios::ackConflict));
        // Last: it kills a node (and restarts it on the same addresses).
        l.add(new Main.Scenario("txn-kill9-consume-transform-produce", TxnScenarios::kill9, null, 240));
    }

    // --- helpers ---

    /** The cause a future failed with (ExecutionException/CompletionException unwrapped). */
    static Throwable cause(Throwable t) {
        while ((t instanceof ExecutionException || t instanceof CompletionException) && t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }

    /** The exception future fails with within CALL_SECONDS; fails if it succeeds. */
    static Throwable failure(CompletableFuture<?> f, String what) throws Exception {
        try {
            f.get(CALL_SECONDS, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            return cause(e);
        }
        throw new Main.Check(what + ": succeeded");
    }

    /**
     * A producer for transactional sends: no send timeout (the client
     * refuses transactional sends otherwise), no batching (each message
     * its own entry), round robin over the partitions per message.
     */
    static Producer<byte[]> txnProducer(Ctx c, PulsarClient cl, String topic) throws Exception {
        return c.keep(cl.newProducer().topic(topic).sendTimeout(0, TimeUnit.SECONDS).enableBatching(false)
            .messageRoutingMode(MessageRoutingMode.RoundRobinPartition).create());
    }

    static Consumer<byte[]> subscribe(Ctx c, PulsarClient cl, String topic, String sub, SubscriptionType st)
            throws Exception {
        return c.keep(cl.newConsumer().topic(topic).subscriptionName(sub).subscriptionType(st)
            .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe());
    }

    static Transaction begin(PulsarClient cl, long timeout, TimeUnit unit) throws Exception {
        return cl.newTransaction().withTransactionTimeout(timeout, unit).build().get(CALL_SECONDS, TimeUnit.SECONDS);
    }

    /** Sends "tag-p" to partition p of topic (partitions > 0) or "tag-0" to the topic. */
    static void sentinels(Ctx c, PulsarClient cl, String topic, int partitions, String tag) throws Exception {
        if (partitions == 0) {
            try (Producer<byte[]> p = cl.newProducer().topic(topic).enableBatching(false).create()) {
                p.send(b(tag + "-0"));
            }
            return;
        }
        for (int i = 0; i < partitions; i++) {
            try (Producer<byte[]> p = cl.newProducer().topic(topic + "-partition-" + i).enableBatching(false)
                    .create()) {
                p.send(b(tag + "-" + i));
            }
        }
    }

    /**
     * Receives (and acknowledges) until every sentinel "tag-i" (i below
     * max(partitions, 1)) arrived, within deadlineSeconds; returns the other
     * messages, payload → message ids (several ids: delivered as several
     * messages; one id twice: redelivered, not counted twice).
     */
    static Map<String, Set<MessageId>> untilSentinels(Consumer<byte[]> cons, String tag, int partitions,
            long deadlineSeconds) throws Exception {
        Map<String, Set<MessageId>> other = new TreeMap<>();
        Set<String> want = new HashSet<>();
        for (int i = 0; i < Math.max(partitions, 1); i++) {
            want.add(tag + "-" + i);
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(deadlineSeconds);
        while (!want.isEmpty()) {
            long left = deadline - System.nanoTime();
            check(left > 0, "sentinels %s not received within %d s (received besides: %s)", want, deadlineSeconds,
                other.keySet());
            Message<byte[]> m = cons.receive((int) Math.min(TimeUnit.NANOSECONDS.toMillis(left) + 1, 1000),
                TimeUnit.MILLISECONDS);
            if (m == null) {
                continue;
            }
            cons.acknowledge(m);
            if (!want.remove(text(m))) {
                other.computeIfAbsent(text(m), k -> new HashSet<>()).add(m.getMessageId());
            }
        }
        return other;
    }

    static int partitionOf(MessageId id) {
        return id instanceof MessageIdAdv a ? a.getPartitionIndex() : -1;
    }

    // --- produce to three partitions and acknowledge the input, commit or abort ---

    /**
     * Nine inputs on a plain topic, received on subscription type st; one
     * transaction sends "out-<input>" for each (round robin over the three
     * partitions of the output topic) and acknowledges the inputs
     * (individually, or one cumulative ack of the last), then commits or
     * aborts.
     * <ul>
     *   <li>commit: the output's consumer gets every result exactly once
     *       (before the sentinels sent after the commit), and a consumer that
     *       subscribes again gets no input back: a plain input sent after
     *       the commit is the first message;</li>
     *   <li>abort: no result is ever delivered (nothing before the sentinels
     *       sent after the abort, nor before a second round sent after the
     *       inputs came back); after individual acks every input is
     *       delivered again to the consumer that acknowledged it (Pulsar's
     *       broker does not do that after an aborted cumulative ack), and a
     *       new consumer of the subscription gets every input again.</li>
     * </ul>
     */
    static void produceAndAck(Ctx c, SubscriptionType st, boolean cumulative, boolean commit) throws Exception {
        int n = 9;
        String in = c.topic("in"), out = c.topic("out");
        c.admin.topics().createPartitionedTopic(out, PARTITIONS);
        PulsarClient cl = c.txnClient();
        Producer<byte[]> inProd = Scenarios.producer(c, in, false);
        Scenarios.send(inProd, "in", n);
        Consumer<byte[]> work = subscribe(c, cl, in, "work", st);
        Consumer<byte[]> results = Scenarios.consumer(c, out, "results", SubscriptionType.Exclusive);
        Producer<byte[]> outProd = txnProducer(c, cl, out);
        List<Message<byte[]>> inputs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Message<byte[]> m = must(work, "input " + i);
            check(text(m).equals("in-" + i), "input %d: got %s", i, str(m));
            inputs.add(m);
        }

        Transaction txn = begin(cl, 1, TimeUnit.MINUTES);
        List<CompletableFuture<MessageId>> sends = new ArrayList<>();
        List<CompletableFuture<Void>> acks = new ArrayList<>();
        for (Message<byte[]> m : inputs) {
            sends.add(outProd.newMessage(txn).value(b("out-" + text(m))).sendAsync());
            if (!cumulative) {
                acks.add(work.acknowledgeAsync(m.getMessageId(), txn));
            }
        }
        if (cumulative) {
            acks.add(work.acknowledgeCumulativeAsync(inputs.get(n - 1).getMessageId(), txn));
        }
        Set<Integer> parts = new TreeSet<>();
        for (CompletableFuture<MessageId> f : sends) {
            parts.add(partitionOf(f.get(CALL_SECONDS, TimeUnit.SECONDS)));
        }
        check(parts.size() == PARTITIONS, "the transaction's messages went to partitions %s", parts);
        for (CompletableFuture<Void> f : acks) {
            f.get(CALL_SECONDS, TimeUnit.SECONDS);
        }

        if (commit) {
            txn.commit().get(CALL_SECONDS, TimeUnit.SECONDS);
            sentinels(c, c.client, out, PARTITIONS, "after-commit");
            Map<String, Set<MessageId>> got = untilSentinels(results, "after-commit", PARTITIONS, Ctx.RECEIVE_SECONDS);
            for (int i = 0; i < n; i++) {
                Set<MessageId> ids = got.get("out-in-" + i);
                check(ids != null && ids.size() == 1, "result out-in-%d delivered %s times", i,
                    ids == null ? 0 : ids.size());
            }
            check(got.size() == n, "results: %s", got.keySet());
            // The inputs stay acknowledged: a new consumer of the subscription
            // gets the plain input sent after the commit first.
            work.close();
            inProd.send(b("in-after-commit"));
            Consumer<byte[]> again = subscribe(c, cl, in, "work", st);
            Message<byte[]> m = must(again, "the input sent after the commit");
            check(text(m).equals("in-after-commit"), "an input acknowledged in the committed transaction "
                + "came back after subscribing again: %s (redelivery count %d)", str(m), m.getRedeliveryCount());
            return;
        }

        txn.abort().get(CALL_SECONDS, TimeUnit.SECONDS);
        sentinels(c, c.client, out, PARTITIONS, "after-abort");
        Map<String, Set<MessageId>> got = untilSentinels(results, "after-abort", PARTITIONS, Ctx.RECEIVE_SECONDS);
        check(got.isEmpty(), "the aborted transaction's messages were delivered: %s", got.keySet());
        if (!cumulative) {
            // Every input comes back to the consumer that acknowledged it.
            Set<String> back = new TreeSet<>();
            int maxCount = 0;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Ctx.RECEIVE_SECONDS);
            while (back.size() < n && System.nanoTime() < deadline) {
                Message<byte[]> m = work.receive(200, TimeUnit.MILLISECONDS);
                if (m != null) {
                    back.add(text(m));
                    maxCount = Math.max(maxCount, m.getRedeliveryCount());
                }
            }
            check(back.size() == n, "after the abort, %d of %d inputs delivered again within %d s: %s", back.size(),
                n, Ctx.RECEIVE_SECONDS, back);
            c.notes.add("inputs redelivered to the consumer, redelivery count up to " + maxCount);
        }
        // A cumulative ack aborted: Pulsar 4.0.8's broker does not send the
        // inputs to the consumer again by itself (Exclusive and Failover);
        // they are not acknowledged, so a new consumer of the subscription
        // gets every one of them. So does one after an individual ack aborted.
        work.close();
        Consumer<byte[]> again = subscribe(c, cl, in, "work", st);
        for (int i = 0; i < n; i++) {
            Message<byte[]> m = must(again, "input " + i + " after subscribing again");
            check(text(m).equals("in-" + i), "input %d after subscribing again: got %s", i, str(m));
        }
        sentinels(c, c.client, out, PARTITIONS, "later");
        got = untilSentinels(results, "later", PARTITIONS, Ctx.RECEIVE_SECONDS);
        check(got.isEmpty(), "the aborted transaction's messages were delivered later: %s", got.keySet());
    }

    // --- a batching producer ---

    /**
     * A batching producer sends ten messages in a transaction, all
     * asynchronously, so that they travel in batches (at least one receipt
     * names a batch index above 0); the transaction aborts: nothing is
     * delivered before a sentinel sent after. The same on a second topic
     * with a commit: all ten, once each.
     *
     * <p>The producer sends nothing outside the transaction: the Java
     * client 4.0.8 puts a message sent without a transaction into an open
     * batch of a transaction's messages (and a transaction's message into
     * an open plain batch), and the batch goes out in the transaction
     * (its BatchMessageContainerImpl.hasSameTxn answers true for a message
     * without a transaction id; fixed upstream by apache/pulsar#26547).
     */
    static void batchedProducer(Ctx c) throws Exception {
        PulsarClient cl = c.txnClient();
        for (boolean commit : new boolean[] {false, true}) {
            String what = commit ? "commit" : "abort";
            String t = c.topic(what);
            Consumer<byte[]> cons = Scenarios.consumer(c, t, "s", SubscriptionType.Exclusive);
            Producer<byte[]> p = c.keep(cl.newProducer().topic(t).sendTimeout(0, TimeUnit.SECONDS)
                .enableBatching(true).batchingMaxPublishDelay(50, TimeUnit.MILLISECONDS).create());
            Transaction txn = begin(cl, 1, TimeUnit.MINUTES);
            List<CompletableFuture<MessageId>> fs = new ArrayList<>();
            for (int i = 0; i < 10; i++) {
                fs.add(p.newMessage(txn).value(b("txn-" + i)).sendAsync());
            }
            p.flush();
            int maxBatchIndex = -1;
            for (CompletableFuture<MessageId> f : fs) {
                MessageId id = f.get(CALL_SECONDS, TimeUnit.SECONDS);
                if (id instanceof MessageIdAdv a) {
                    maxBatchIndex = Math.max(maxBatchIndex, a.getBatchIndex());
                }
            }
            check(maxBatchIndex > 0, "%s: the ten messages were not batched (receipts' batch index up to %d)", what,
                maxBatchIndex);
            (commit ? txn.commit() : txn.abort()).get(CALL_SECONDS, TimeUnit.SECONDS);
            sentinels(c, c.client, t, 0, "sentinel");
            Map<String, Set<MessageId>> got = untilSentinels(cons, "sentinel", 0, Ctx.RECEIVE_SECONDS);
            Set<String> want = new TreeSet<>();
            for (int i = 0; commit && i < 10; i++) {
                want.add("txn-" + i);
            }
            check(got.keySet().equals(want), "%s: received %s, want %s", what, got.keySet(), want);
            for (Map.Entry<String, Set<MessageId>> e : got.entrySet()) {
                check(e.getValue().size() == 1, "%s delivered %d times", e.getKey(), e.getValue().size());
            }
        }
    }

    // --- timeout ---

    /**
     * A transaction with a 3 s timeout sends three messages and acknowledges
     * an input (Shared subscription), and is never ended. The coordinator
     * aborts it at its timeout: the input comes back (no earlier than 3 s
     * after the transaction was opened), the messages are never delivered
     * (nothing before the sentinel sent after that), and the client's
     * commit fails InvalidTxnStatusException (the client's own timer has
     * marked the transaction TIME_OUT: it does not ask the coordinator).
     */
    static void timeoutAborts(Ctx c) throws Exception {
        String in = c.topic("in"), out = c.topic("out");
        PulsarClient cl = c.txnClient();
        Producer<byte[]> inProd = Scenarios.producer(c, in, false);
        inProd.send(b("in-0"));
        Consumer<byte[]> work = subscribe(c, cl, in, "work", SubscriptionType.Shared);
        Consumer<byte[]> results = Scenarios.consumer(c, out, "results", SubscriptionType.Exclusive);
        Producer<byte[]> outProd = txnProducer(c, cl, out);
        Message<byte[]> m = must(work, "input");
        long opened = System.nanoTime();
        Transaction txn = begin(cl, 3, TimeUnit.SECONDS);
        for (int i = 0; i < 3; i++) {
            outProd.newMessage(txn).value(b("timed-out-" + i)).send();
        }
        work.acknowledgeAsync(m.getMessageId(), txn).get(CALL_SECONDS, TimeUnit.SECONDS);
        Message<byte[]> back = work.receive(30, TimeUnit.SECONDS);
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - opened);
        check(back != null, "the input acknowledged in the transaction did not come back within 30 s of its 3 s timeout");
        check(text(back).equals("in-0"), "got %s", str(back));
        check(ms >= 3000, "the input came back %d ms after the transaction opened, before its 3 s timeout", ms);
        c.notes.add("input back " + ms + " ms after open");
        Throwable e = failure(txn.commit(), "commit after the timeout");
        check(e instanceof TransactionCoordinatorClientException.InvalidTxnStatusException,
            "commit after the timeout failed %s, want InvalidTxnStatusException", Main.describe(e));
        c.notes.add("client commit: " + e.getClass().getSimpleName());
        sentinels(c, c.client, out, 0, "after-timeout");
        Map<String, Set<MessageId>> got = untilSentinels(results, "after-timeout", 0, Ctx.RECEIVE_SECONDS);
        check(got.isEmpty(), "the timed-out transaction's messages were delivered: %s", got.keySet());
    }

    /**
     * The coordinator's own answer to ending a transaction it aborted at
     * its timeout (the client's transaction object refuses by itself, so
     * this asks through the client's coordinator client, as a client
     * resuming the transaction by its id would). A 3 s transaction sends a
     * message; ADD_PARTITION_TO_TXN (harmless while it is open) is polled
     * until the coordinator refuses it, and while the refusal is
     * InvalidTxnStatus (Pulsar's answer while the abort is under way) for
     * up to 5 s more; then END_TXN commit must fail TransactionNotFound, as
     * Pulsar's coordinator answers once it has aborted a transaction (its
     * MLTransactionMetadataStore forgets a transaction when it reaches
     * ABORTED or COMMITTED: getTxnMeta → TransactionNotFoundException).
     */
    static void timeoutEndAnswer(Ctx c) throws Exception {
        String out = c.topic("out");
        PulsarClient cl = c.txnClient();
        TransactionCoordinatorClientImpl tc = ((PulsarClientImpl) cl).getTcClient();
        Producer<byte[]> outProd = txnProducer(c, cl, out);
        Transaction txn = begin(cl, 3, TimeUnit.SECONDS);
        TxnID id = txn.getTxnID();
        outProd.newMessage(txn).value(b("timed-out")).send();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(33);
        long invalidUntil = 0;
        Throwable refused = null;
        List<String> probes = new ArrayList<>();
        while (true) {
            check(System.nanoTime() < deadline, "the coordinator still accepts ADD_PARTITION_TO_TXN 30 s after "
                + "the 3 s timeout of %s", id);
            try {
                tc.addPublishPartitionToTxnAsync(id, List.of(out + "-probe")).get(CALL_SECONDS, TimeUnit.SECONDS);
                Thread.sleep(100); // poll interval: still open
                continue;
            } catch (ExecutionException e) {
                refused = cause(e);
            }
            String k = refused.getClass().getSimpleName();
            if (probes.isEmpty() || !probes.get(probes.size() - 1).equals(k)) {
                probes.add(k);
            }
            if (!(refused instanceof TransactionCoordinatorClientException.InvalidTxnStatusException)) {
                break;
            }
            if (invalidUntil == 0) {
                invalidUntil = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            } else if (System.nanoTime() > invalidUntil) {
                break;
            }
            Thread.sleep(100); // poll interval: the abort may be under way
        }
        Throwable e = failure(tc.commitAsync(id), "END_TXN commit of the timed-out transaction " + id);
        c.notes.add("ADD_PARTITION_TO_TXN answers " + String.join(" then ", probes) + "; END_TXN commit answers "
            + e.getClass().getSimpleName());
        check(e instanceof TransactionCoordinatorClientException.TransactionNotFoundException,
            "END_TXN commit of %s (aborted at its timeout) failed %s; Pulsar answers TransactionNotFound "
                + "(ADD_PARTITION_TO_TXN answered %s)", id, Main.describe(e), probes);
    }

    // --- ack conflicts ---

    /**
     * One message acknowledged in two transactions: the second ack fails
     * TransactionConflictException — individual acks on Shared and
     * Exclusive, cumulative acks on Failover. The first transaction
     * commits, the second aborts: the message stays acknowledged (a new
     * consumer of the subscription gets the next input, then the plain
     * message sent after).
     */
    static void ackConflict(Ctx c) throws Exception {
        PulsarClient cl = c.txnClient();
        Object[][] cases = {
            {SubscriptionType.Shared, false}, {SubscriptionType.Exclusive, false}, {SubscriptionType.Failover, true}};
        for (Object[] k : cases) {
            SubscriptionType st = (SubscriptionType) k[0];
            boolean cumulative = (Boolean) k[1];
            String what = st + (cumulative ? " cumulative" : " individual");
            String in = c.topic(st.name().toLowerCase());
            Producer<byte[]> inProd = Scenarios.producer(c, in, false);
            Scenarios.send(inProd, "in", 2);
            Consumer<byte[]> work = subscribe(c, cl, in, "work", st);
            Message<byte[]> m0 = must(work, what + ": input 0");
            Message<byte[]> m1 = must(work, what + ": input 1");
            check(text(m0).equals("in-0") && text(m1).equals("in-1"), "%s: inputs %s, %s", what, str(m0), str(m1));
            Transaction t1 = begin(cl, 1, TimeUnit.MINUTES);
            Transaction t2 = begin(cl, 1, TimeUnit.MINUTES);
            if (cumulative) {
                work.acknowledgeCumulativeAsync(m0.getMessageId(), t1).get(CALL_SECONDS, TimeUnit.SECONDS);
            } else {
                work.acknowledgeAsync(m0.getMessageId(), t1).get(CALL_SECONDS, TimeUnit.SECONDS);
            }
            Throwable e = failure(cumulative ? work.acknowledgeCumulativeAsync(m0.getMessageId(), t2)
                : work.acknowledgeAsync(m0.getMessageId(), t2), what + ": the second transaction's ack");
            check(e instanceof PulsarClientException.TransactionConflictException,
                "%s: the second transaction's ack failed %s, want TransactionConflictException", what,
                Main.describe(e));
            t1.commit().get(CALL_SECONDS, TimeUnit.SECONDS);
            t2.abort().get(CALL_SECONDS, TimeUnit.SECONDS);
            work.close();
            inProd.send(b("in-after"));
            Consumer<byte[]> again = subscribe(c, cl, in, "work", st);
            Message<byte[]> m = must(again, what + ": first input after subscribing again");
            check(text(m).equals("in-1"), "%s: first input after subscribing again %s, want in-1 (in-0 was "
                + "acknowledged in the committed transaction)", what, str(m));
            m = must(again, what + ": second input after subscribing again");
            check(text(m).equals("in-after"), "%s: then %s, want in-after", what, str(m));
            again.close();
        }
    }

    // --- consume-transform-produce through a SIGKILL ---

    /**
     * A consume-transform-produce loop: 60 inputs over the three partitions
     * of a topic, read on a Shared subscription; per batch of up to four, a
     * transaction (10 s timeout) sends "out-<input>" to a three-partition
     * output and acknowledges the input. After a third of the results,
     * mid-batch, the node that owns output partition 0 is killed with
     * SIGKILL (run.sh: {@link Nodes}) and restarted on its addresses: on
     * one node at once, on several once a lookup names another owner of
     * that partition (its session expired: the survivors took over its
     * topics and coordinators). A batch that saw a failure (an operation failed, or the
     * producer or consumer lost its connection: its messages in flight may
     * have been sent twice) is aborted and its inputs negatively
     * acknowledged; a transaction whose end failed is settled through the
     * coordinator client whenever the loop finds no input, and at the end
     * (abort; if the coordinator says it is committing or committed,
     * commit, which finishes it), so that none commits later. At the end the
     * output holds every input's result exactly once, and the input
     * subscription holds nothing more.
     */
    static void kill9(Ctx c) throws Exception {
        if (!Nodes.available()) {
            throw new Main.Skip("no node control (run.sh provides it)");
        }
        int n = 60, batchMax = 4;
        long start = System.nanoTime();
        long deadline = start + TimeUnit.SECONDS.toNanos(180);
        String in = c.topic("in"), out = c.topic("out");
        c.admin.topics().createPartitionedTopic(in, PARTITIONS);
        c.admin.topics().createPartitionedTopic(out, PARTITIONS);
        int victim = Nodes.indexOf(c.serviceUrl, c.admin.lookups().lookupTopic(out + "-partition-0"));
        PulsarClient cl = c.keep(PulsarClient.builder().serviceUrl(c.serviceUrl).enableTransaction(true)
            .operationTimeout(10, TimeUnit.SECONDS).connectionTimeout(2, TimeUnit.SECONDS)
            .startingBackoffInterval(100, TimeUnit.MILLISECONDS).maxBackoffInterval(1, TimeUnit.SECONDS)
            .build());
        TransactionCoordinatorClientImpl tc = ((PulsarClientImpl) cl).getTcClient();
        try (Producer<byte[]> inProd = cl.newProducer().topic(in).enableBatching(false).create()) {
            for (int i = 0; i < n; i++) {
                inProd.send(b(String.format("in-%02d", i)));
            }
        }
        Consumer<byte[]> work = c.keep(cl.newConsumer().topic(in).subscriptionName("work")
            .subscriptionType(SubscriptionType.Shared).subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
            .negativeAckRedeliveryDelay(200, TimeUnit.MILLISECONDS).subscribe());
        Consumer<byte[]> results = subscribe(c, cl, out, "results", SubscriptionType.Exclusive);
        Producer<byte[]> outProd = txnProducer(c, cl, out);

        // payload → the ids it was delivered under (a redelivery of one id is not a duplicate)
        Map<String, Set<MessageId>> got = new TreeMap<>();
        List<TxnID> unsettled = new ArrayList<>();
        int txns = 0, committed = 0, aborted = 0;
        boolean killed = false;
        long killedAt = 0;
        CompletableFuture<String> restart = null;
        List<String> log = new ArrayList<>();
        Map<String, Integer> abortedFor = new TreeMap<>(); // why batches failed
        int settled = 0;
        while (got.size() < n) {
            check(System.nanoTime() < deadline, "after %d transactions (%d committed, %d aborted, %d settled, %s not "
                + "settled), %d of %d results within 180 s; batches failed for %s; last events: %s", txns, committed,
                aborted, settled, unsettled, got.size(), n, abortedFor,
                String.join("; ", log.subList(Math.max(0, log.size() - 8), log.size())));
            drain(results, got);
            Message<byte[]> first = work.receive(1, TimeUnit.SECONDS);
            if (first == null) {
                // Nothing now: the rest is held by transactions not ended
                // yet; those whose end failed are ended here.
                for (java.util.Iterator<TxnID> it = unsettled.iterator(); it.hasNext(); ) {
                    if (settleOnce(tc, it.next(), log)) {
                        it.remove();
                        settled++;
                    }
                }
                continue;
            }
            Transaction txn;
            try {
                txn = begin(cl, 10, TimeUnit.SECONDS);
            } catch (Exception e) {
                log.add("new transaction: " + Main.describe(cause(e)));
                work.negativeAcknowledge(first);
                continue;
            }
            txns++;
            long outDisc = outProd.getLastDisconnectedTimestamp(), workDisc = work.getLastDisconnectedTimestamp();
            boolean failed = false;
            String why = null;
            List<Message<byte[]>> batch = new ArrayList<>();
            List<CompletableFuture<?>> ops = new ArrayList<>();
            for (Message<byte[]> m = first; m != null && batch.size() < batchMax;
                    m = batch.size() < batchMax ? work.receive(100, TimeUnit.MILLISECONDS) : null) {
                batch.add(m);
                ops.add(outProd.newMessage(txn).value(b("out-" + text(m))).sendAsync());
                ops.add(work.acknowledgeAsync(m.getMessageId(), txn));
                if (!killed && got.size() >= n / 3 && batch.size() == 2) {
                    killedAt = System.nanoTime();
                    Nodes.call("kill9 " + victim, 30);
                    killed = true;
                    failed = true;
                    why = "the kill";
                    log.add("killed node " + victim + " in transaction " + txn.getTxnID());
                    final long dl = deadline;
                    restart = CompletableFuture.supplyAsync(() -> {
                        try {
                            String moved = "";
                            if (Nodes.hosts(c.serviceUrl).size() > 1) {
                                moved = awaitNewOwner(cl, out + "-partition-0",
                                    Nodes.hosts(c.serviceUrl).get(victim), dl) + ", then ";
                            }
                            return moved + Nodes.call("restart " + victim, 150);
                        } catch (Exception e) {
                            throw new CompletionException(e);
                        }
                    });
                }
            }
            long opsDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(CALL_SECONDS);
            for (CompletableFuture<?> f : ops) {
                try {
                    f.get(Math.max(0, opsDeadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                } catch (Exception e) {
                    if (!failed) {
                        log.add("transaction " + txn.getTxnID() + ": " + Main.describe(cause(e)));
                        why = cause(e).getClass().getSimpleName();
                    }
                    failed = true;
                }
            }
            if (!failed && (outProd.getLastDisconnectedTimestamp() != outDisc
                    || work.getLastDisconnectedTimestamp() != workDisc)) {
                failed = true;
                why = "a reconnection";
            }
            try {
                if (failed) {
                    abortedFor.merge(why, 1, Integer::sum);
                    txn.abort().get(CALL_SECONDS, TimeUnit.SECONDS);
                    aborted++;
                } else {
                    txn.commit().get(CALL_SECONDS, TimeUnit.SECONDS);
                    committed++;
                }
            } catch (Exception e) {
                log.add((failed ? "abort " : "commit ") + txn.getTxnID() + ": " + Main.describe(cause(e)));
                unsettled.add(txn.getTxnID());
                failed = true;
            }
            if (failed) {
                for (Message<byte[]> m : batch) {
                    work.negativeAcknowledge(m);
                }
            }
        }
        check(killed, "the loop ended before the kill");
        String restarted = restart.get(150, TimeUnit.SECONDS);
        // Settle the transactions whose end failed: none may commit later.
        for (TxnID id : unsettled) {
            settle(tc, id, deadline, log);
            settled++;
        }
        sentinels(c, cl, out, PARTITIONS, "sentinel");
        Map<String, Set<MessageId>> rest = untilSentinels(results, "sentinel", PARTITIONS, 30);
        rest.forEach((k, v) -> got.computeIfAbsent(k, x -> new HashSet<>()).addAll(v));
        List<String> dup = new ArrayList<>(), missing = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            String k = String.format("out-in-%02d", i);
            Set<MessageId> ids = got.get(k);
            if (ids == null) {
                missing.add(k);
            } else if (ids.size() > 1) {
                dup.add(k + "×" + ids.size());
            }
        }
        check(missing.isEmpty() && dup.isEmpty() && got.size() == n,
            "results: missing %s, duplicated %s, %d distinct (want %d); %s", missing, dup, got.size(), n,
            String.join("; ", log));
        // The input subscription holds nothing more: every input was
        // acknowledged by a committed transaction. (The loop's consumer may
        // still hold copies delivered twice while they were unacknowledged:
        // by an abort and by the negative ack after it.)
        work.close();
        Consumer<byte[]> again = subscribe(c, cl, in, "work", SubscriptionType.Shared);
        sentinels(c, cl, in, PARTITIONS, "in-sentinel");
        Map<String, Set<MessageId>> left = untilSentinels(again, "in-sentinel", PARTITIONS, 30);
        check(left.isEmpty(), "inputs still unacknowledged after their results were committed: %s", left.keySet());
        c.notes.add(String.format("node %d killed after %d results, %s; %d transactions: %d committed, %d aborted, "
            + "%d settled later; batches failed for %s; %.1f s from the kill to the last result", victim, n / 3,
            restarted, txns, committed, aborted, settled, abortedFor, (System.nanoTime() - killedAt) / 1e9));
    }

    /**
     * Polls the owner of topic (a lookup through the service URL, which
     * may try the dead node first) until it is another node than dead
     * (host:port), within deadline; says which and when.
     */
    static String awaitNewOwner(PulsarClient cl, String topic, String dead, long deadline) throws Exception {
        long from = System.nanoTime();
        TopicName name = TopicName.get(topic);
        while (true) {
            check(System.nanoTime() < deadline, "%s still looked up at the killed node %s", topic, dead);
            try {
                InetSocketAddress a = ((PulsarClientImpl) cl).getLookup().getBroker(name)
                    .get(5, TimeUnit.SECONDS).getLogicalAddress();
                String owner = a.getHostString() + ":" + a.getPort();
                if (!owner.equals(dead)) {
                    return String.format("output partition 0 looked up at %s %.1f s after the kill", owner,
                        (System.nanoTime() - from) / 1e9);
                }
            } catch (ExecutionException | java.util.concurrent.TimeoutException e) {
                // the dead node was asked: ask again
            }
            Thread.sleep(200); // poll interval: the owner's session expires (2 s)
        }
    }

    /** Receives what is there now on results (no wait), acknowledging it, into got. */
    static void drain(Consumer<byte[]> results, Map<String, Set<MessageId>> got) throws Exception {
        for (Message<byte[]> m = results.receive(0, TimeUnit.MILLISECONDS); m != null;
                m = results.receive(0, TimeUnit.MILLISECONDS)) {
            results.acknowledgeAsync(m);
            got.computeIfAbsent(text(m), k -> new HashSet<>()).add(m.getMessageId());
        }
    }

    /**
     * Ends a transaction whose commit or abort failed, for good, until
     * deadline (settleOnce, again every 200 ms).
     */
    static void settle(TransactionCoordinatorClientImpl tc, TxnID id, long deadline, List<String> log)
            throws Exception {
        while (!settleOnce(tc, id, log)) {
            check(System.nanoTime() < deadline, "transaction %s not settled (%s)", id, String.join("; ", log));
            Thread.sleep(200); // poll interval: the coordinator may be moving
        }
    }

    /**
     * One attempt at ending a transaction whose commit or abort failed:
     * abort it through the coordinator client; InvalidTxnStatus means it
     * is committing or committed, then commit it (which finishes a commit
     * under way; committed already: nothing); TransactionNotFound means it
     * has ended (Pulsar forgets ended transactions). False: the
     * coordinator did not answer (it may be moving).
     */
    static boolean settleOnce(TransactionCoordinatorClientImpl tc, TxnID id, List<String> log) throws Exception {
        for (boolean commit : new boolean[] {false, true}) {
            try {
                (commit ? tc.commitAsync(id) : tc.abortAsync(id)).get(CALL_SECONDS, TimeUnit.SECONDS);
                log.add("settled " + id + (commit ? ": committed" : ": aborted"));
                return true;
            } catch (ExecutionException e) {
                Throwable t = cause(e);
                if (t instanceof TransactionCoordinatorClientException.TransactionNotFoundException) {
                    log.add("settled " + id + ": ended (not found)");
                    return true;
                }
                if (!(t instanceof TransactionCoordinatorClientException.InvalidTxnStatusException)) {
                    return false;
                }
                if (commit) {
                    log.add("settled " + id + ": " + t.getMessage());
                    return true;
                }
            } catch (java.util.concurrent.TimeoutException e) {
                return false;
            }
        }
        return false; // not reached: the commit attempt returns
    }
}
