package lakegate.interop;

import static lakegate.interop.Ctx.check;
import static lakegate.interop.Ctx.must;
import static lakegate.interop.Ctx.none;
import static lakegate.interop.Ctx.text;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.apache.pulsar.client.api.CompressionType;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.DeadLetterPolicy;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.MessageRoutingMode;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.ProducerAccessMode;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;

/** The scenario matrix of issue #6 for the Java client (admin: AdminScenarios). */
final class Scenarios {
    private Scenarios() {}

    static void register(List<Main.Scenario> l) {
        l.add(new Main.Scenario("sub-exclusive", Scenarios::exclusive));
        l.add(new Main.Scenario("sub-shared", Scenarios::shared));
        l.add(new Main.Scenario("sub-failover", Scenarios::failover));
        l.add(new Main.Scenario("sub-key-shared", Scenarios::keyShared));
        for (boolean batching : new boolean[] {false, true}) {
            for (CompressionType ct : new CompressionType[] {
                    CompressionType.NONE, CompressionType.LZ4, CompressionType.ZLIB,
                    CompressionType.ZSTD, CompressionType.SNAPPY}) {
                String name = "codec-" + ct.name().toLowerCase() + (batching ? "-batched" : "-unbatched");
                l.add(new Main.Scenario(name, c -> codec(c, batching, ct)));
            }
        }
        l.add(new Main.Scenario("keys-properties-event-time", Scenarios::keysProps));
        l.add(new Main.Scenario("partitioned-default-routers", Scenarios::partitioned));
        l.add(new Main.Scenario("ack-individual", Scenarios::ackIndividual));
        l.add(new Main.Scenario("ack-cumulative", Scenarios::ackCumulative));
        l.add(new Main.Scenario("ack-batch-index", Scenarios::ackBatchIndex));
        l.add(new Main.Scenario("negative-ack-redelivery-count", Scenarios::negativeAck));
        l.add(new Main.Scenario("ack-timeout-redelivery", Scenarios::ackTimeout));
        l.add(new Main.Scenario("dead-letter-topic", Scenarios::deadLetter));
        l.add(new Main.Scenario("retry-letter-topic", Scenarios::retryLetter));
        l.add(new Main.Scenario("delayed-delivery", Scenarios::delayedDelivery));
        l.add(new Main.Scenario("compacted-topic", Scenarios::compacted));
        l.add(new Main.Scenario("reader-earliest-latest", Scenarios::readerEarliestLatest));
        l.add(new Main.Scenario("reader-start-id-inclusive-exclusive", Scenarios::readerStartId));
        l.add(new Main.Scenario("seek-by-id-and-time", Scenarios::seek));
        l.add(new Main.Scenario("last-message-id-has-message-available", Scenarios::lastMessageId));
        l.add(new Main.Scenario("schema-avro", c -> SchemaScenarios.avro(c)));
        l.add(new Main.Scenario("schema-json", c -> SchemaScenarios.json(c)));
        l.add(new Main.Scenario("schema-string", c -> SchemaScenarios.string(c)));
        l.add(new Main.Scenario("chunked-message", Scenarios::chunked));
        l.add(new Main.Scenario("regex-subscription", Scenarios::regex));
        l.add(new Main.Scenario("producer-dedup", Scenarios::dedup));
        l.add(new Main.Scenario("producer-exclusive-access", Scenarios::exclusiveProducer));
        AdminScenarios.register(l);
    }

    // --- helpers ---

    static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static Producer<byte[]> producer(Ctx c, String topic, boolean batching) throws Exception {
        return c.keep(c.client.newProducer().topic(topic).enableBatching(batching)
            .batchingMaxPublishDelay(5, TimeUnit.MILLISECONDS).create());
    }

    static Consumer<byte[]> consumer(Ctx c, String topic, String sub, SubscriptionType type) throws Exception {
        return c.keep(c.client.newConsumer().topic(topic).subscriptionName(sub).subscriptionType(type)
            .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe());
    }

    /** Sends "prefix-i" for i in [0, n) and returns their ids (waiting for each). */
    static List<MessageId> send(Producer<byte[]> p, String prefix, int n) throws Exception {
        List<MessageId> ids = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            ids.add(p.send(b(prefix + "-" + i)));
        }
        return ids;
    }

    /** Sends asynchronously (so batches form), then waits for every receipt. */
    static List<MessageId> sendAsync(Producer<byte[]> p, String prefix, int n) throws Exception {
        List<CompletableFuture<MessageId>> fs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            fs.add(p.sendAsync(b(prefix + "-" + i)));
        }
        p.flush();
        List<MessageId> ids = new ArrayList<>();
        for (CompletableFuture<MessageId> f : fs) {
            ids.add(f.get(Ctx.RECEIVE_SECONDS, TimeUnit.SECONDS));
        }
        return ids;
    }

    /** Receives n messages, expecting "prefix-from" .. in order, acking each. */
    static void expectRange(Consumer<byte[]> cons, String prefix, int from, int to) throws Exception {
        for (int i = from; i < to; i++) {
            Message<byte[]> m = must(cons, "message " + i);
            check(text(m).equals(prefix + "-" + i), "got %s, want '%s-%d'", Ctx.str(m), prefix, i);
            cons.acknowledge(m);
        }
    }

    static int index(Message<?> m) {
        String t = text(m);
        return Integer.parseInt(t.substring(t.lastIndexOf('-') + 1));
    }

    // --- subscription types ---

    static void exclusive(Ctx c) throws Exception {
        String t = c.topic("");
        Consumer<byte[]> cons = consumer(c, t, "s", SubscriptionType.Exclusive);
        try {
            c.keep(c.client.newConsumer().topic(t).subscriptionName("s")
                .subscriptionType(SubscriptionType.Exclusive).subscribe());
            check(false, "a second Exclusive consumer on the subscription was accepted");
        } catch (PulsarClientException.ConsumerBusyException expected) {
            // as Pulsar
        }
        Producer<byte[]> p = producer(c, t, true);
        sendAsync(p, "m", 50);
        expectRange(cons, "m", 0, 50);
        none(cons, 200, "after all 50");
    }

    static void shared(Ctx c) throws Exception {
        String t = c.topic("");
        List<Consumer<byte[]>> cs = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            cs.add(c.keep(c.client.newConsumer().topic(t).subscriptionName("s")
                .subscriptionType(SubscriptionType.Shared).receiverQueueSize(5).subscribe()));
        }
        Producer<byte[]> p = producer(c, t, false);
        int n = 60;
        sendAsync(p, "m", n);
        Set<Integer> seen = new HashSet<>();
        int[] per = new int[cs.size()];
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Ctx.RECEIVE_SECONDS);
        while (seen.size() < n && System.nanoTime() < deadline) {
            for (int i = 0; i < cs.size(); i++) {
                Message<byte[]> m = cs.get(i).receive(20, TimeUnit.MILLISECONDS);
                if (m != null) {
                    check(seen.add(index(m)), "message %s delivered twice", Ctx.str(m));
                    per[i]++;
                    cs.get(i).acknowledge(m);
                }
            }
        }
        check(seen.size() == n, "received %d distinct of %d", seen.size(), n);
        check(per[0] > 0 && per[1] > 0, "one Shared consumer got nothing: %d / %d", per[0], per[1]);
    }

    static void failover(Ctx c) throws Exception {
        String t = c.topic("");
        Consumer<byte[]> a = c.keep(c.client.newConsumer().topic(t).subscriptionName("s").consumerName("a")
            .subscriptionType(SubscriptionType.Failover).subscribe());
        Consumer<byte[]> bb = c.keep(c.client.newConsumer().topic(t).subscriptionName("s").consumerName("b")
            .subscriptionType(SubscriptionType.Failover).subscribe());
        Producer<byte[]> p = producer(c, t, false);
        send(p, "m", 10);
        // Exactly one of them is active and gets all ten, in order.
        Message<byte[]> first = null;
        Consumer<byte[]> active = null, standby = null;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Ctx.RECEIVE_SECONDS);
        while (first == null && System.nanoTime() < deadline) {
            if ((first = a.receive(50, TimeUnit.MILLISECONDS)) != null) {
                active = a;
                standby = bb;
            } else if ((first = bb.receive(50, TimeUnit.MILLISECONDS)) != null) {
                active = bb;
                standby = a;
            }
        }
        check(first != null, "no Failover consumer received anything");
        check(text(first).equals("m-0"), "first message %s", Ctx.str(first));
        active.acknowledge(first);
        expectRange(active, "m", 1, 10);
        none(standby, 200, "standby consumer");
        // The active one leaves: the standby takes over.
        active.close();
        send(p, "n", 5);
        expectRange(standby, "n", 0, 5);
    }

    static void keyShared(Ctx c) throws Exception {
        String t = c.topic("");
        List<Consumer<byte[]>> cs = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            cs.add(c.keep(c.client.newConsumer().topic(t).subscriptionName("s").consumerName("c" + i)
                .subscriptionType(SubscriptionType.Key_Shared).subscribe()));
        }
        Producer<byte[]> p = c.keep(c.client.newProducer().topic(t).enableBatching(false).create());
        int keys = 12, perKey = 15;
        List<CompletableFuture<MessageId>> fs = new ArrayList<>();
        for (int i = 0; i < perKey; i++) {
            for (int k = 0; k < keys; k++) {
                fs.add(p.newMessage().key("k" + k).value(b("k" + k + "-" + i)).sendAsync());
            }
        }
        for (CompletableFuture<MessageId> f : fs) {
            f.get(Ctx.RECEIVE_SECONDS, TimeUnit.SECONDS);
        }
        Map<String, Integer> owner = new HashMap<>();
        Map<String, Integer> next = new HashMap<>();
        int got = 0;
        Set<Integer> used = new HashSet<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Ctx.RECEIVE_SECONDS);
        while (got < keys * perKey && System.nanoTime() < deadline) {
            for (int i = 0; i < cs.size(); i++) {
                Message<byte[]> m = cs.get(i).receive(20, TimeUnit.MILLISECONDS);
                if (m == null) {
                    continue;
                }
                String key = m.getKey();
                check(text(m).startsWith(key + "-"), "key %s on %s", key, Ctx.str(m));
                Integer o = owner.putIfAbsent(key, i);
                check(o == null || o == i, "key %s delivered to consumers %d and %d", key, o, i);
                int want = next.getOrDefault(key, 0);
                check(index(m) == want, "key %s: got %s, want index %d (order per key)", key, Ctx.str(m), want);
                next.put(key, want + 1);
                used.add(i);
                cs.get(i).acknowledge(m);
                got++;
            }
        }
        check(got == keys * perKey, "received %d of %d", got, keys * perKey);
        check(used.size() > 1, "all %d keys went to one consumer of three", keys);
    }

    // --- batching × compression ---

    static void codec(Ctx c, boolean batching, CompressionType ct) throws Exception {
        String t = c.topic("");
        Consumer<byte[]> cons = consumer(c, t, "s", SubscriptionType.Exclusive);
        Producer<byte[]> p = c.keep(c.client.newProducer().topic(t).enableBatching(batching)
            .batchingMaxPublishDelay(20, TimeUnit.MILLISECONDS).batchingMaxMessages(25)
            .compressionType(ct).create());
        int n = 60;
        String filler = "x".repeat(300) + "compressible ".repeat(20);
        List<CompletableFuture<MessageId>> fs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            fs.add(p.newMessage().value(b(filler + "-" + i)).sendAsync());
        }
        p.flush();
        List<MessageId> ids = new ArrayList<>();
        for (CompletableFuture<MessageId> f : fs) {
            ids.add(f.get(Ctx.RECEIVE_SECONDS, TimeUnit.SECONDS));
        }
        for (int i = 0; i < n; i++) {
            Message<byte[]> m = must(cons, "message " + i);
            check(text(m).equals(filler + "-" + i), "message %d: got %d bytes ending %s", i,
                m.getData().length, text(m).substring(Math.max(0, text(m).length() - 8)));
            check(m.getMessageId().equals(ids.get(i)) || m.getMessageId().compareTo(ids.get(i)) == 0,
                "message %d: id %s, the producer was told %s", i, m.getMessageId(), ids.get(i));
            cons.acknowledge(m);
        }
        none(cons, 100, "after all");
    }

    // --- message metadata ---

    static void keysProps(Ctx c) throws Exception {
        String t = c.topic("");
        Consumer<byte[]> cons = consumer(c, t, "s", SubscriptionType.Exclusive);
        Producer<byte[]> p = producer(c, t, true);
        long et = 1_700_000_000_123L;
        List<CompletableFuture<MessageId>> fs = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            fs.add(p.newMessage().key("key-" + i).value(b("v-" + i))
                .property("a", "1").property("i", Integer.toString(i)).property("ünï", "cödé")
                .eventTime(et + i).sendAsync());
        }
        fs.add(p.newMessage().value(b("v-5")).sendAsync()); // no key, no properties, no event time
        p.flush();
        for (CompletableFuture<MessageId> f : fs) {
            f.get(Ctx.RECEIVE_SECONDS, TimeUnit.SECONDS);
        }
        for (int i = 0; i < 5; i++) {
            Message<byte[]> m = must(cons, "message " + i);
            check(text(m).equals("v-" + i), "got %s", Ctx.str(m));
            check(m.hasKey() && m.getKey().equals("key-" + i), "key %s", m.getKey());
            Map<String, String> want = Map.of("a", "1", "i", Integer.toString(i), "ünï", "cödé");
            check(m.getProperties().equals(want), "properties %s, want %s", m.getProperties(), want);
            check(m.getEventTime() == et + i, "event time %d, want %d", m.getEventTime(), et + i);
            check(m.getPublishTime() > 0, "publish time %d", m.getPublishTime());
            check(m.getProducerName() != null && !m.getProducerName().isEmpty(), "no producer name");
            cons.acknowledge(m);
        }
        Message<byte[]> m = must(cons, "message 5");
        check(!m.hasKey() && m.getProperties().isEmpty() && m.getEventTime() == 0,
            "plain message has key %s properties %s event time %d", m.getKey(), m.getProperties(), m.getEventTime());
    }

    // --- partitioned topic ---

    static void partitioned(Ctx c) throws Exception {
        String t = c.topic("");
        c.admin.topics().createPartitionedTopic(t, 4);
        Consumer<byte[]> cons = consumer(c, t, "s", SubscriptionType.Shared);
        // Default router (RoundRobinPartition): unkeyed messages over every
        // partition; keyed messages by key hash, one partition per key.
        Producer<byte[]> rr = c.keep(c.client.newProducer().topic(t).enableBatching(false).create());
        int n = 40;
        for (int i = 0; i < n; i++) {
            rr.send(b("rr-" + i));
        }
        for (int i = 0; i < 20; i++) {
            rr.newMessage().key("key-" + (i % 4)).value(b("key-" + (i % 4) + "-" + i)).send();
        }
        // SinglePartition: every unkeyed message to one partition.
        Producer<byte[]> single = c.keep(c.client.newProducer().topic(t).enableBatching(false)
            .messageRoutingMode(MessageRoutingMode.SinglePartition).create());
        for (int i = 0; i < 10; i++) {
            single.send(b("single-" + i));
        }
        Map<String, Set<String>> partsOf = new TreeMap<>();
        Set<String> payloads = new HashSet<>();
        int total = n + 20 + 10;
        for (int i = 0; i < total; i++) {
            Message<byte[]> m = must(cons, "message " + i + " of " + total);
            check(payloads.add(text(m)), "duplicate %s", Ctx.str(m));
            String group = text(m).startsWith("rr-") ? "rr" : text(m).startsWith("single-") ? "single"
                : text(m).substring(0, text(m).lastIndexOf('-'));
            check(m.getTopicName().startsWith(t + "-partition-"), "message from topic %s", m.getTopicName());
            partsOf.computeIfAbsent(group, k -> new HashSet<>()).add(m.getTopicName());
            cons.acknowledge(m);
        }
        check(partsOf.get("rr").size() == 4, "round robin used partitions %s", partsOf.get("rr"));
        check(partsOf.get("single").size() == 1, "SinglePartition used partitions %s", partsOf.get("single"));
        for (int k = 0; k < 4; k++) {
            Set<String> ps = partsOf.get("key-" + k);
            check(ps != null && ps.size() == 1, "key-%d went to partitions %s", k, ps);
        }
        check(c.admin.topics().getPartitionedTopicMetadata(t).partitions == 4, "metadata partitions");
    }

    // --- acknowledgements ---

    static void ackIndividual(Ctx c) throws Exception {
        String t = c.topic("");
        Producer<byte[]> p = producer(c, t, false);
        Consumer<byte[]> cons = consumer(c, t, "s", SubscriptionType.Shared);
        send(p, "m", 10);
        for (int i = 0; i < 10; i++) {
            Message<byte[]> m = must(cons, "message " + i);
            if (index(m) % 2 == 0) {
                cons.acknowledge(m);
            }
        }
        cons.close();
        cons = consumer(c, t, "s", SubscriptionType.Shared);
        Set<Integer> got = new HashSet<>();
        for (int i = 0; i < 5; i++) {
            Message<byte[]> m = must(cons, "redelivery " + i);
            check(index(m) % 2 == 1, "acknowledged message %s redelivered", Ctx.str(m));
            got.add(index(m));
            cons.acknowledge(m);
        }
        check(got.equals(Set.of(1, 3, 5, 7, 9)), "redelivered %s", got);
        none(cons, 300, "after the unacknowledged ones");
    }

    static void ackCumulative(Ctx c) throws Exception {
        String t = c.topic("");
        // Unbatched: without batch-index acks a cumulative ack inside a
        // batch covers only the entries before it (Pulsar semantics).
        Producer<byte[]> p = producer(c, t, false);
        Consumer<byte[]> cons = consumer(c, t, "s", SubscriptionType.Exclusive);
        sendAsync(p, "m", 20);
        Message<byte[]> last = null;
        for (int i = 0; i < 12; i++) {
            last = must(cons, "message " + i);
            check(index(last) == i, "got %s, want %d", Ctx.str(last), i);
        }
        cons.acknowledgeCumulative(last);
        cons.close();
        cons = consumer(c, t, "s", SubscriptionType.Exclusive);
        expectRange(cons, "m", 12, 20);
        none(cons, 300, "after all");
    }

    static void ackBatchIndex(Ctx c) throws Exception {
        String t = c.topic("");
        // One batch of 10 messages.
        Producer<byte[]> p = c.keep(c.client.newProducer().topic(t).enableBatching(true)
            .batchingMaxMessages(10).batchingMaxPublishDelay(10, TimeUnit.SECONDS).create());
        List<MessageId> ids = sendAsync(p, "m", 10);
        check(ids.get(0) instanceof org.apache.pulsar.client.api.MessageIdAdv a0
            && ids.get(9) instanceof org.apache.pulsar.client.api.MessageIdAdv a9
            && a0.getEntryId() == a9.getEntryId(), "the 10 messages are not one batch: %s .. %s", ids.get(0), ids.get(9));
        Consumer<byte[]> cons = c.keep(c.client.newConsumer().topic(t).subscriptionName("s")
            .subscriptionType(SubscriptionType.Shared).enableBatchIndexAcknowledgment(true)
            .acknowledgmentGroupTime(0, TimeUnit.MILLISECONDS)
            .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe());
        for (int i = 0; i < 10; i++) {
            Message<byte[]> m = must(cons, "message " + i);
            if (index(m) < 6) {
                cons.acknowledge(m); // sent at once: acknowledgmentGroupTime 0
            }
        }
        cons.close();
        cons = c.keep(c.client.newConsumer().topic(t).subscriptionName("s")
            .subscriptionType(SubscriptionType.Shared).enableBatchIndexAcknowledgment(true)
            .subscribe());
        Set<Integer> got = new HashSet<>();
        for (int i = 0; i < 4; i++) {
            Message<byte[]> m = must(cons, "redelivery " + i);
            check(index(m) >= 6, "batch index %d was acknowledged but redelivered", index(m));
            got.add(index(m));
            cons.acknowledge(m);
        }
        check(got.equals(Set.of(6, 7, 8, 9)), "redelivered %s", got);
        none(cons, 300, "after the unacknowledged ones");
    }

    static void negativeAck(Ctx c) throws Exception {
        String t = c.topic("");
        Producer<byte[]> p = producer(c, t, false);
        Consumer<byte[]> cons = c.keep(c.client.newConsumer().topic(t).subscriptionName("s")
            .subscriptionType(SubscriptionType.Shared).negativeAckRedeliveryDelay(100, TimeUnit.MILLISECONDS)
            .subscribe());
        send(p, "m", 3);
        for (int round = 0; round < 3; round++) {
            Set<Integer> got = new HashSet<>();
            for (int i = 0; i < 3; i++) {
                Message<byte[]> m = must(cons, "round " + round + " message " + i);
                check(m.getRedeliveryCount() == round, "round %d: %s has redelivery count %d", round,
                    Ctx.str(m), m.getRedeliveryCount());
                got.add(index(m));
                if (round < 2) {
                    cons.negativeAcknowledge(m);
                } else {
                    cons.acknowledge(m);
                }
            }
            check(got.equals(Set.of(0, 1, 2)), "round %d got %s", round, got);
        }
        none(cons, 400, "after acknowledging");
    }

    static void ackTimeout(Ctx c) throws Exception {
        String t = c.topic("");
        Producer<byte[]> p = producer(c, t, false);
        Consumer<byte[]> cons = c.keep(c.client.newConsumer().topic(t).subscriptionName("s")
            .subscriptionType(SubscriptionType.Shared).ackTimeout(1, TimeUnit.SECONDS)
            .ackTimeoutTickTime(100, TimeUnit.MILLISECONDS).subscribe());
        send(p, "m", 2);
        Message<byte[]> a = must(cons, "first delivery");
        Message<byte[]> bb = must(cons, "first delivery");
        cons.acknowledge(bb);
        long t0 = System.nanoTime();
        Message<byte[]> again = must(cons, "redelivery after the ack timeout");
        long waited = (System.nanoTime() - t0) / 1_000_000;
        check(text(again).equals(text(a)), "redelivered %s, want %s", Ctx.str(again), Ctx.str(a));
        check(waited >= 500, "redelivered after %d ms, before the 1 s ack timeout", waited);
        check(again.getRedeliveryCount() >= 1, "redelivery count %d", again.getRedeliveryCount());
        cons.acknowledge(again);
        none(cons, 1500, "after acknowledging");
    }

    static void deadLetter(Ctx c) throws Exception {
        String t = c.topic("");
        String dlq = c.topic("dlq");
        Consumer<byte[]> dlqCons = consumer(c, dlq, "dlq-sub", SubscriptionType.Exclusive);
        Consumer<byte[]> cons = c.keep(c.client.newConsumer().topic(t).subscriptionName("s")
            .subscriptionType(SubscriptionType.Shared).negativeAckRedeliveryDelay(50, TimeUnit.MILLISECONDS)
            .deadLetterPolicy(DeadLetterPolicy.builder().maxRedeliverCount(2).deadLetterTopic(dlq).build())
            .subscribe());
        Producer<byte[]> p = producer(c, t, false);
        MessageId orig = p.newMessage().key("k").property("p", "v").value(b("poison")).send();
        p.send(b("good"));
        int deliveries = 0;
        boolean good = false;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Ctx.RECEIVE_SECONDS);
        while (System.nanoTime() < deadline) {
            Message<byte[]> m = cons.receive(300, TimeUnit.MILLISECONDS);
            if (m == null) {
                if (deliveries >= 3 && good) {
                    break;
                }
                continue;
            }
            if (text(m).equals("good")) {
                good = true;
                cons.acknowledge(m);
            } else {
                deliveries++;
                cons.negativeAcknowledge(m);
            }
        }
        check(good, "the good message never arrived");
        check(deliveries == 3, "poison message delivered %d times, want 1 + maxRedeliverCount 2", deliveries);
        Message<byte[]> d = must(dlqCons, "dead letter");
        check(text(d).equals("poison"), "dead letter %s", Ctx.str(d));
        check("k".equals(d.getKey()), "dead letter key %s", d.getKey());
        check("v".equals(d.getProperty("p")), "dead letter properties %s", d.getProperties());
        check(t.equals(d.getProperty("REAL_TOPIC")), "REAL_TOPIC %s", d.getProperty("REAL_TOPIC"));
        check(orig.toString().equals(d.getProperty("ORIGIN_MESSAGE_ID")), "ORIGIN_MESSAGE_ID %s, want %s",
            d.getProperty("ORIGIN_MESSAGE_ID"), orig);
        dlqCons.acknowledge(d);
    }

    static void retryLetter(Ctx c) throws Exception {
        String t = c.topic("");
        String retry = c.topic("retry");
        String dlq = c.topic("dlq");
        Consumer<byte[]> cons = c.keep(c.client.newConsumer().topic(t).subscriptionName("s")
            .subscriptionType(SubscriptionType.Shared).enableRetry(true)
            .deadLetterPolicy(DeadLetterPolicy.builder().maxRedeliverCount(2)
                .retryLetterTopic(retry).deadLetterTopic(dlq).build())
            .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe());
        Consumer<byte[]> dlqCons = consumer(c, dlq, "dlq-sub", SubscriptionType.Exclusive);
        Producer<byte[]> p = producer(c, t, false);
        p.newMessage().key("k").value(b("again")).send();
        for (int attempt = 0; attempt <= 2; attempt++) {
            Message<byte[]> m = must(cons, "attempt " + attempt);
            check(text(m).equals("again"), "attempt %d got %s", attempt, Ctx.str(m));
            String times = m.getProperty("RECONSUMETIMES");
            if (attempt == 0) {
                check(times == null, "first delivery has RECONSUMETIMES %s", times);
            } else {
                check(Integer.toString(attempt).equals(times), "attempt %d: RECONSUMETIMES %s", attempt, times);
                check(m.getTopicName().equals(retry), "attempt %d came from %s, want the retry topic", attempt,
                    m.getTopicName());
            }
            if (attempt > 0) {
                notEarly(c, m, "retry " + attempt);
            }
            cons.reconsumeLater(m, 1, TimeUnit.SECONDS);
        }
        // The third reconsumeLater exceeds maxRedeliverCount: dead letter.
        Message<byte[]> d = must(dlqCons, "dead letter after retries");
        check(text(d).equals("again"), "dead letter %s", Ctx.str(d));
        none(cons, 500, "after the dead letter");
    }

    /**
     * The deliver_at_time of a received message (Unix ms) as the client
     * decoded it from the message's metadata, or -1 when it has none.
     */
    static long deliverAt(Message<?> m) {
        Message<?> inner = m;
        if (inner instanceof org.apache.pulsar.client.impl.TopicMessageImpl<?> tm) {
            inner = tm.getMessage();
        }
        if (inner instanceof org.apache.pulsar.client.impl.MessageImpl<?> mi && mi.getMessageBuilder().hasDeliverAtTime()) {
            return mi.getMessageBuilder().getDeliverAtTime();
        }
        return -1;
    }

    /** Checks m (just received) did not arrive before its delivery time; notes how late it was. */
    static void notEarly(Ctx c, Message<?> m, String what) {
        long at = deliverAt(m);
        long now = System.currentTimeMillis();
        check(at > 0, "%s: no deliver_at_time in %s", what, Ctx.str(m));
        check(now >= at, "%s delivered %d ms before its delivery time", what, at - now);
        c.notes.add(what + " +" + (now - at) + "ms");
    }

    /**
     * deliverAfter and deliverAt on Shared and Key_Shared subscriptions: the
     * undelayed messages come first, each delayed one not before its time;
     * an Exclusive subscription gets them at once (Pulsar's behaviour).
     */
    static void delayedDelivery(Ctx c) throws Exception {
        String t = c.topic("");
        Consumer<byte[]> shared = consumer(c, t, "shared", SubscriptionType.Shared);
        Consumer<byte[]> keyShared = consumer(c, t, "key-shared", SubscriptionType.Key_Shared);
        Consumer<byte[]> excl = consumer(c, t, "exclusive", SubscriptionType.Exclusive);
        Producer<byte[]> p = producer(c, t, true);
        long hour = System.currentTimeMillis() + 3_600_000;
        p.newMessage().key("far").value(b("far")).deliverAt(hour).send();
        for (int i = 0; i < 3; i++) {
            p.newMessage().key("k" + i).value(b("late-" + i)).deliverAfter(1500, TimeUnit.MILLISECONDS).sendAsync();
            p.newMessage().key("k" + i).value(b("now-" + i)).sendAsync();
        }
        p.flush();
        Message<byte[]> f = must(excl, "exclusive: the far message");
        check(text(f).equals("far") && System.currentTimeMillis() < hour, "exclusive got %s", Ctx.str(f));
        for (Consumer<byte[]> cons : List.of(shared, keyShared)) {
            Set<String> now = new HashSet<>();
            for (int i = 0; i < 6; i++) {
                Message<byte[]> m = must(cons, cons.getSubscription() + " message " + i);
                String v = text(m);
                if (v.startsWith("late-")) {
                    check(now.size() == 3, "%s: %s came before the undelayed messages (%s)", cons.getSubscription(), v, now);
                    notEarly(c, m, cons.getSubscription() + " " + v);
                } else {
                    check(v.startsWith("now-"), "%s got %s", cons.getSubscription(), v);
                    now.add(v);
                }
                cons.acknowledge(m);
            }
            none(cons, 300, cons.getSubscription() + ": the message due in an hour");
        }
    }

    /**
     * triggerCompaction, then a readCompacted reader and consumer: the
     * latest message per key up to the horizon (a batch thinned by
     * compaction, a tombstone, a keyless message), then the tail; the
     * consumer (default acknowledgement settings) acknowledges everything,
     * thinned batch included.
     */
    static void compacted(Ctx c) throws Exception {
        String t = c.topic("");
        Producer<byte[]> p = c.keep(c.client.newProducer().topic(t).enableBatching(true)
            .batchingMaxMessages(3).batchingMaxPublishDelay(1, TimeUnit.SECONDS).create());
        String[][] sent = {{"a", "a1"}, {"b", "b1"}, {"a", "a2"}, {"c", "c1"}, {"b", ""}, {null, "no-key"}};
        for (String[] kv : sent) {
            var m = p.newMessage().value(b(kv[1]));
            if (kv[0] != null) {
                m = m.key(kv[0]);
            }
            m.sendAsync();
        }
        p.flush();
        c.admin.topics().triggerCompaction(t);
        long deadline = System.currentTimeMillis() + 30_000;
        while (true) {
            var st = c.admin.topics().compactionStatus(t);
            if (st.status == org.apache.pulsar.client.admin.LongRunningProcessStatus.Status.SUCCESS) {
                break;
            }
            check(st.status != org.apache.pulsar.client.admin.LongRunningProcessStatus.Status.ERROR, "compaction failed: %s", st.lastError);
            check(System.currentTimeMillis() < deadline, "compaction status %s after 30 s", st.status);
            Thread.sleep(50); // polling the admin API
        }
        p.newMessage().key("c").value(b("c2")).send(); // after the horizon
        List<String> want = List.of("a=a2", "c=c1", "c=c2");
        Reader<byte[]> r = c.keep(c.client.newReader().topic(t).startMessageId(MessageId.earliest).readCompacted(true).create());
        List<String> got = new ArrayList<>();
        for (int i = 0; i < want.size(); i++) {
            Message<byte[]> m = must(r, "compacted reader " + i);
            got.add(m.getKey() + "=" + text(m));
        }
        check(got.equals(want), "readCompacted reader got %s, want %s", got, want);
        Consumer<byte[]> cons = c.keep(c.client.newConsumer().topic(t).subscriptionName("compacted")
            .readCompacted(true).subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe());
        got.clear();
        for (int i = 0; i < want.size(); i++) {
            Message<byte[]> m = must(cons, "compacted consumer " + i);
            got.add(m.getKey() + "=" + text(m));
            cons.acknowledge(m);
        }
        check(got.equals(want), "readCompacted consumer got %s, want %s", got, want);
        deadline = System.currentTimeMillis() + 30_000;
        long backlog;
        while ((backlog = c.admin.topics().getStats(t).getSubscriptions().get("compacted").getMsgBacklog()) != 0) {
            check(System.currentTimeMillis() < deadline, "backlog %d after acknowledging every compacted message", backlog);
            Thread.sleep(50); // polling the admin API
        }
    }

    // --- readers, seek, last message id ---

    static void readerEarliestLatest(Ctx c) throws Exception {
        String t = c.topic("");
        Producer<byte[]> p = producer(c, t, true);
        sendAsync(p, "old", 5);
        Reader<byte[]> early = c.keep(c.client.newReader().topic(t).startMessageId(MessageId.earliest).create());
        Reader<byte[]> late = c.keep(c.client.newReader().topic(t).startMessageId(MessageId.latest).create());
        for (int i = 0; i < 5; i++) {
            Message<byte[]> m = must(early, "earliest reader " + i);
            check(text(m).equals("old-" + i), "earliest reader got %s", Ctx.str(m));
        }
        check(late.readNext(300, TimeUnit.MILLISECONDS) == null, "latest reader read an old message");
        sendAsync(p, "new", 3);
        for (int i = 0; i < 3; i++) {
            Message<byte[]> m = must(late, "latest reader " + i);
            check(text(m).equals("new-" + i), "latest reader got %s", Ctx.str(m));
            Message<byte[]> e = must(early, "earliest reader new " + i);
            check(text(e).equals("new-" + i), "earliest reader got %s", Ctx.str(e));
        }
    }

    static void readerStartId(Ctx c) throws Exception {
        String t = c.topic("");
        Producer<byte[]> p = producer(c, t, false);
        List<MessageId> ids = send(p, "m", 6);
        Reader<byte[]> incl = c.keep(c.client.newReader().topic(t).startMessageId(ids.get(2))
            .startMessageIdInclusive().create());
        Reader<byte[]> excl = c.keep(c.client.newReader().topic(t).startMessageId(ids.get(2)).create());
        for (int i = 2; i < 6; i++) {
            Message<byte[]> m = must(incl, "inclusive reader " + i);
            check(text(m).equals("m-" + i), "inclusive reader from id 2 got %s, want m-%d", Ctx.str(m), i);
        }
        for (int i = 3; i < 6; i++) {
            Message<byte[]> m = must(excl, "exclusive reader " + i);
            check(text(m).equals("m-" + i), "exclusive reader from id 2 got %s, want m-%d", Ctx.str(m), i);
        }
        // The same for a batched topic: ids inside one batch.
        String tb = c.topic("batched");
        Producer<byte[]> pb = c.keep(c.client.newProducer().topic(tb).enableBatching(true)
            .batchingMaxMessages(6).batchingMaxPublishDelay(10, TimeUnit.SECONDS).create());
        List<MessageId> bids = sendAsync(pb, "b", 6);
        Reader<byte[]> bi = c.keep(c.client.newReader().topic(tb).startMessageId(bids.get(3))
            .startMessageIdInclusive().create());
        Message<byte[]> m = must(bi, "inclusive reader in a batch");
        check(text(m).equals("b-3"), "inclusive reader from batch index 3 got %s", Ctx.str(m));
        Reader<byte[]> be = c.keep(c.client.newReader().topic(tb).startMessageId(bids.get(3)).create());
        m = must(be, "exclusive reader in a batch");
        check(text(m).equals("b-4"), "exclusive reader from batch index 3 got %s", Ctx.str(m));
    }

    static void seek(Ctx c) throws Exception {
        String t = c.topic("");
        Producer<byte[]> p = producer(c, t, false);
        List<MessageId> ids = send(p, "m", 10);
        Consumer<byte[]> cons = consumer(c, t, "s", SubscriptionType.Exclusive);
        expectRange(cons, "m", 0, 10);
        cons.seek(ids.get(3));
        // The server resets the subscription to message 3's entry (as a
        // Pulsar broker does); the Java client 4.0.x drops the sought
        // message itself, so m-4 comes next (as with the Go and C++ clients).
        Message<byte[]> m = must(cons, "after seek by id");
        int from = index(m);
        check(from == 4, "after seek to m-3's id got %s, want m-4", Ctx.str(m));
        cons.acknowledge(m);
        expectRange(cons, "m", from + 1, 10);
        // Seek by time: everything published at or after ts.
        long ts = System.currentTimeMillis();
        while (System.currentTimeMillis() <= ts) {
            Thread.onSpinWait(); // the next publish time is strictly later than ts
        }
        ts = System.currentTimeMillis();
        send(p, "late", 3);
        cons.seek(ts);
        expectRange(cons, "late", 0, 3);
        none(cons, 300, "after seek by time");
        cons.seek(MessageId.earliest);
        expectRange(cons, "m", 0, 10);
    }

    static void lastMessageId(Ctx c) throws Exception {
        String t = c.topic("");
        Producer<byte[]> p = producer(c, t, false);
        Consumer<byte[]> cons = consumer(c, t, "s", SubscriptionType.Exclusive);
        MessageId empty = cons.getLastMessageId();
        check(empty instanceof org.apache.pulsar.client.api.MessageIdAdv e && e.getEntryId() == -1,
            "getLastMessageId of an empty topic: %s", empty);
        List<MessageId> ids = send(p, "m", 5);
        MessageId lastId = cons.getLastMessageId();
        check(lastId.compareTo(ids.get(4)) == 0, "getLastMessageId %s, last sent %s", lastId, ids.get(4));

        Reader<byte[]> r = c.keep(c.client.newReader().topic(t).startMessageId(MessageId.earliest).create());
        check(r.hasMessageAvailable(), "hasMessageAvailable false with 5 messages");
        for (int i = 0; i < 5; i++) {
            Message<byte[]> m = must(r, "reader " + i);
            check(text(m).equals("m-" + i), "reader got %s", Ctx.str(m));
        }
        check(!r.hasMessageAvailable(), "hasMessageAvailable true after reading everything");
        p.send(b("m-5"));
        check(r.hasMessageAvailable(), "hasMessageAvailable false after a new message");
        check(text(must(r, "reader 5")).equals("m-5"), "reader did not get m-5");

        // A batched topic: the last id names the batch's last index.
        String tb = c.topic("batched");
        Producer<byte[]> pb = c.keep(c.client.newProducer().topic(tb).enableBatching(true)
            .batchingMaxMessages(4).batchingMaxPublishDelay(10, TimeUnit.SECONDS).create());
        List<MessageId> bids = sendAsync(pb, "b", 4);
        Reader<byte[]> rb = c.keep(c.client.newReader().topic(tb).startMessageId(MessageId.earliest).create());
        MessageId bl = consumer(c, tb, "s", SubscriptionType.Exclusive).getLastMessageId();
        check(bl.compareTo(bids.get(3)) == 0, "getLastMessageId %s of a batched topic, last sent %s", bl, bids.get(3));
        for (int i = 0; i < 4; i++) {
            must(rb, "batched reader " + i);
        }
        check(!rb.hasMessageAvailable(), "hasMessageAvailable true after reading the whole batch");
    }

    // --- chunking, pattern subscriptions ---

    static void chunked(Ctx c) throws Exception {
        String t = c.topic("");
        Consumer<byte[]> cons = consumer(c, t, "s", SubscriptionType.Exclusive);
        Producer<byte[]> p = c.keep(c.client.newProducer().topic(t).enableBatching(false)
            .enableChunking(true).chunkMaxMessageSize(10_000).create());
        byte[] big = new byte[95_000];
        for (int i = 0; i < big.length; i++) {
            big[i] = (byte) (i * 31 + 7);
        }
        p.newMessage().key("big").value(big).send();
        p.send(b("small"));
        Message<byte[]> m = must(cons, "chunked message");
        check(java.util.Arrays.equals(m.getData(), big), "chunked message: %d bytes back, want %d identical",
            m.getData().length, big.length);
        check("big".equals(m.getKey()), "chunked message key %s", m.getKey());
        cons.acknowledge(m);
        Message<byte[]> s2 = must(cons, "message after the chunks");
        check(text(s2).equals("small"), "after the chunked message got %s", Ctx.str(s2));
    }

    static void regex(Ctx c) throws Exception {
        String a = c.topic("a"), bt = c.topic("b");
        send(producer(c, a, false), "a", 2);
        send(producer(c, bt, false), "b", 2);
        String pattern = "persistent://public/default/java-regex-subscription-.*-" + c.runId;
        Consumer<byte[]> cons = c.keep(c.client.newConsumer().topicsPattern(pattern).subscriptionName("s")
            .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe());
        Set<String> got = new HashSet<>();
        for (int i = 0; i < 4; i++) {
            Message<byte[]> m = must(cons, "pattern message " + i);
            got.add(text(m));
            cons.acknowledge(m);
        }
        check(got.equals(Set.of("a-0", "a-1", "b-0", "b-1")), "pattern consumer got %s", got);
    }

    // --- producers ---

    static void dedup(Ctx c) throws Exception {
        String t = c.topic("");
        AdminScenarios.enableDedup(c, t);
        Producer<byte[]> p = c.keep(c.client.newProducer().topic(t).producerName(c.local("p"))
            .sendTimeout(0, TimeUnit.SECONDS).enableBatching(false).create());
        for (long s = 0; s < 5; s++) {
            p.newMessage().sequenceId(s).value(b("m-" + s)).send();
        }
        // Resends of 3 and 4 (a client that lost the receipts), then new ones.
        for (long s = 3; s < 8; s++) {
            p.newMessage().sequenceId(s).value(b("m-" + s)).send();
        }
        p.close();
        // A new producer under the same name continues after the last sequence id.
        Producer<byte[]> p2 = c.keep(c.client.newProducer().topic(t).producerName(c.local("p"))
            .sendTimeout(0, TimeUnit.SECONDS).enableBatching(false).create());
        check(p2.getLastSequenceId() == 7, "second producer's last sequence id %d, want 7", p2.getLastSequenceId());
        p2.newMessage().sequenceId(6).value(b("m-6")).send(); // duplicate
        p2.newMessage().sequenceId(8).value(b("m-8")).send();
        Consumer<byte[]> cons = consumer(c, t, "s", SubscriptionType.Exclusive);
        expectRange(cons, "m", 0, 9);
        none(cons, 300, "duplicates");
    }

    static void exclusiveProducer(Ctx c) throws Exception {
        String t = c.topic("");
        Producer<byte[]> ex = c.keep(c.client.newProducer().topic(t).accessMode(ProducerAccessMode.Exclusive).create());
        try {
            c.keep(c.client.newProducer().topic(t).accessMode(ProducerAccessMode.Exclusive).create());
            check(false, "a second Exclusive producer was accepted");
        } catch (PulsarClientException.ProducerFencedException | PulsarClientException.ProducerBusyException expected) {
            // as Pulsar
        }
        try {
            c.keep(c.client.newProducer().topic(t).accessMode(ProducerAccessMode.Shared).create());
            check(false, "a Shared producer was accepted next to an Exclusive one");
        } catch (PulsarClientException.ProducerFencedException | PulsarClientException.ProducerBusyException expected) {
            // as Pulsar
        }
        CompletableFuture<Producer<byte[]>> waiting = c.client.newProducer().topic(t)
            .accessMode(ProducerAccessMode.WaitForExclusive).createAsync();
        ex.send(b("from-exclusive"));
        check(!waiting.isDone(), "WaitForExclusive producer created while the Exclusive one is connected");
        ex.close();
        Producer<byte[]> w = c.keep(waiting.get(Ctx.RECEIVE_SECONDS, TimeUnit.SECONDS));
        w.send(b("from-waiter"));
        Consumer<byte[]> cons = consumer(c, t, "s", SubscriptionType.Exclusive);
        check(text(must(cons, "first")).equals("from-exclusive"), "first message");
        check(text(must(cons, "second")).equals("from-waiter"), "second message");
    }
}
