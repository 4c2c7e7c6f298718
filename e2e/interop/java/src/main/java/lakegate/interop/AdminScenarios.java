package lakegate.interop;

import static lakegate.interop.Ctx.check;
import static lakegate.interop.Ctx.must;
import static lakegate.interop.Ctx.none;
import static lakegate.interop.Scenarios.b;
import static lakegate.interop.Scenarios.consumer;
import static lakegate.interop.Scenarios.expectRange;
import static lakegate.interop.Scenarios.producer;
import static lakegate.interop.Scenarios.send;

import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.apache.pulsar.client.admin.PulsarAdminException;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.common.policies.data.PartitionedTopicStats;
import org.apache.pulsar.common.policies.data.SubscriptionStats;
import org.apache.pulsar.common.policies.data.TenantInfo;
import org.apache.pulsar.common.policies.data.TopicStats;

/** pulsar-client-admin against lakegate's admin REST. */
final class AdminScenarios {
    private AdminScenarios() {}

    static void register(List<Main.Scenario> l) {
        l.add(new Main.Scenario("admin-tenants-namespaces", AdminScenarios::tenantsNamespaces));
        l.add(new Main.Scenario("admin-partitioned-topics", AdminScenarios::partitionedTopics));
        l.add(new Main.Scenario("admin-topic-stats", AdminScenarios::stats));
        l.add(new Main.Scenario("admin-subscriptions", AdminScenarios::subscriptions));
        l.add(new Main.Scenario("admin-reset-cursor", AdminScenarios::resetCursor));
        l.add(new Main.Scenario("admin-last-message-id-terminate", AdminScenarios::terminate));
        l.add(new Main.Scenario("consumer-reached-end-of-topic", AdminScenarios::reachedEnd));
    }

    /** Turns producer deduplication on for topic t (created here) through the topic policies API. */
    static void enableDedup(Ctx c, String t) throws Exception {
        c.admin.topics().createNonPartitionedTopic(t);
        c.admin.topicPolicies().setDeduplicationStatus(t, true);
        Boolean on = c.admin.topicPolicies().getDeduplicationStatus(t);
        check(Boolean.TRUE.equals(on), "deduplication status after enabling: %s", on);
    }

    static void tenantsNamespaces(Ctx c) throws Exception {
        String tenant = c.local("t");
        String ns = tenant + "/ns1";
        c.admin.tenants().createTenant(tenant, TenantInfo.builder().allowedClusters(Set.of("standalone")).build());
        check(c.admin.tenants().getTenants().contains(tenant), "tenant list %s", c.admin.tenants().getTenants());
        check(c.admin.tenants().getTenantInfo(tenant).getAllowedClusters().contains("standalone"), "tenant info");
        try {
            c.admin.tenants().createTenant(tenant, TenantInfo.builder().allowedClusters(Set.of("standalone")).build());
            check(false, "creating the tenant twice succeeded");
        } catch (PulsarAdminException.ConflictException expected) {
            // 409 as Pulsar
        }
        c.admin.namespaces().createNamespace(ns);
        check(c.admin.namespaces().getNamespaces(tenant).contains(ns), "namespaces %s",
            c.admin.namespaces().getNamespaces(tenant));
        String t = "persistent://" + ns + "/topic";
        Producer<byte[]> p = producer(c, t, false);
        Consumer<byte[]> cons = consumer(c, t, "s", SubscriptionType.Exclusive);
        send(p, "m", 3);
        expectRange(cons, "m", 0, 3);
        check(c.admin.topics().getList(ns).contains(t), "topics of %s: %s", ns, c.admin.topics().getList(ns));
        p.close();
        cons.close();
        c.admin.topics().delete(t);
        c.admin.namespaces().deleteNamespace(ns);
        check(!c.admin.namespaces().getNamespaces(tenant).contains(ns), "namespace still listed");
        c.admin.tenants().deleteTenant(tenant);
        check(!c.admin.tenants().getTenants().contains(tenant), "tenant still listed");
        try {
            c.admin.tenants().getTenantInfo(tenant);
            check(false, "deleted tenant still has info");
        } catch (PulsarAdminException.NotFoundException expected) {
            // 404 as Pulsar
        }
    }

    static void partitionedTopics(Ctx c) throws Exception {
        String t = c.topic("");
        c.admin.topics().createPartitionedTopic(t, 3);
        check(c.admin.topics().getPartitionedTopicList("public/default").contains(t), "partitioned list %s",
            c.admin.topics().getPartitionedTopicList("public/default"));
        check(c.admin.topics().getPartitionedTopicMetadata(t).partitions == 3, "metadata");
        try {
            c.admin.topics().createPartitionedTopic(t, 3);
            check(false, "creating the partitioned topic twice succeeded");
        } catch (PulsarAdminException.ConflictException expected) {
            // 409 as Pulsar
        }
        c.admin.topics().updatePartitionedTopic(t, 5);
        check(c.admin.topics().getPartitionedTopicMetadata(t).partitions == 5, "partitions after update: %d",
            c.admin.topics().getPartitionedTopicMetadata(t).partitions);
        Producer<byte[]> p = c.keep(c.client.newProducer().topic(t).enableBatching(false).create());
        send(p, "m", 10);
        p.close();
        PartitionedTopicStats ps = c.admin.topics().getPartitionedStats(t, true);
        check(ps.getMetadata().partitions == 5, "partitioned stats metadata %d", ps.getMetadata().partitions);
        check(ps.getMsgInCounter() == 10, "partitioned stats msgInCounter %d, want 10", ps.getMsgInCounter());
        c.admin.topics().deletePartitionedTopic(t);
        check(!c.admin.topics().getPartitionedTopicList("public/default").contains(t), "still listed after delete");
        try {
            c.admin.topics().getPartitionedTopicMetadata(t);
            // Pulsar answers {partitions: 0} for an unknown topic.
        } catch (PulsarAdminException.NotFoundException fine) {
            // also acceptable
        }
    }

    static void stats(Ctx c) throws Exception {
        String t = c.topic("");
        Producer<byte[]> p = producer(c, t, false);
        Consumer<byte[]> cons = consumer(c, t, "s", SubscriptionType.Shared);
        send(p, "m", 10);
        for (int i = 0; i < 4; i++) {
            cons.acknowledge(must(cons, "message " + i));
        }
        // The stats reflect acknowledgements once the client has sent them.
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Ctx.RECEIVE_SECONDS);
        TopicStats st;
        SubscriptionStats ss;
        do {
            st = c.admin.topics().getStats(t);
            ss = st.getSubscriptions().get("s");
        } while ((ss == null || ss.getMsgBacklog() != 6) && System.nanoTime() < deadline);
        check(st.getMsgInCounter() == 10, "msgInCounter %d, want 10", st.getMsgInCounter());
        check(st.getBytesInCounter() > 0, "bytesInCounter %d", st.getBytesInCounter());
        check(st.getPublishers().size() == 1, "publishers %d", st.getPublishers().size());
        check(ss != null, "subscription s missing from %s", st.getSubscriptions().keySet());
        check(ss.getMsgBacklog() == 6, "backlog %d, want 6", ss.getMsgBacklog());
        check(ss.getConsumers().size() == 1, "consumers %d", ss.getConsumers().size());
        check("Shared".equalsIgnoreCase(ss.getType()), "subscription type %s", ss.getType());
        check(st.getSubscriptions().keySet().equals(Set.of("s")), "subscriptions %s", st.getSubscriptions().keySet());
    }

    static void subscriptions(Ctx c) throws Exception {
        String t = c.topic("");
        Producer<byte[]> p = producer(c, t, false);
        send(p, "m", 3);
        c.admin.topics().createSubscription(t, "from-earliest", MessageId.earliest);
        c.admin.topics().createSubscription(t, "from-latest", MessageId.latest);
        List<String> subs = c.admin.topics().getSubscriptions(t);
        check(subs.containsAll(List.of("from-earliest", "from-latest")) && subs.size() == 2, "subscriptions %s", subs);
        try {
            c.admin.topics().createSubscription(t, "from-earliest", MessageId.earliest);
            check(false, "creating a subscription twice succeeded");
        } catch (PulsarAdminException.ConflictException expected) {
            // 409 as Pulsar
        }
        send(p, "n", 2);
        Consumer<byte[]> e = consumer(c, t, "from-earliest", SubscriptionType.Exclusive);
        expectRange(e, "m", 0, 3);
        expectRange(e, "n", 0, 2);
        Consumer<byte[]> l = consumer(c, t, "from-latest", SubscriptionType.Exclusive);
        expectRange(l, "n", 0, 2);
        none(l, 200, "latest subscription");
        l.close();
        c.admin.topics().deleteSubscription(t, "from-latest");
        check(c.admin.topics().getSubscriptions(t).equals(List.of("from-earliest")), "after delete: %s",
            c.admin.topics().getSubscriptions(t));
        try {
            c.admin.topics().deleteSubscription(t, "from-earliest");
            check(false, "deleting a subscription with a connected consumer succeeded");
        } catch (PulsarAdminException.PreconditionFailedException expected) {
            // 412 as Pulsar
        }
    }

    static void resetCursor(Ctx c) throws Exception {
        String t = c.topic("");
        Producer<byte[]> p = producer(c, t, false);
        List<MessageId> ids = send(p, "m", 10);
        Consumer<byte[]> cons = consumer(c, t, "s", SubscriptionType.Exclusive);
        expectRange(cons, "m", 0, 10);
        cons.close();
        c.admin.topics().resetCursor(t, "s", ids.get(4));
        cons = consumer(c, t, "s", SubscriptionType.Exclusive);
        expectRange(cons, "m", 4, 10);
        none(cons, 200, "after reset by id");
        cons.close();
        long ts = System.currentTimeMillis();
        while (System.currentTimeMillis() <= ts) {
            Thread.onSpinWait(); // later messages get a strictly later publish time
        }
        ts = System.currentTimeMillis();
        send(p, "late", 3);
        c.admin.topics().resetCursor(t, "s", ts);
        cons = consumer(c, t, "s", SubscriptionType.Exclusive);
        expectRange(cons, "late", 0, 3);
        none(cons, 200, "after reset by time");
        // Resetting with the consumer connected: it is disconnected and resumes from there.
        c.admin.topics().resetCursor(t, "s", ids.get(8));
        expectRange(cons, "m", 8, 10);
    }

    static void terminate(Ctx c) throws Exception {
        String t = c.topic("");
        Producer<byte[]> p = producer(c, t, false);
        List<MessageId> ids = send(p, "m", 5);
        MessageId last = c.admin.topics().getLastMessageId(t);
        check(last.compareTo(ids.get(4)) == 0, "admin lastMessageId %s, last sent %s", last, ids.get(4));
        MessageId term = c.admin.topics().terminateTopic(t);
        check(term.compareTo(ids.get(4)) == 0, "terminate returned %s, last sent %s", term, ids.get(4));
        try {
            p.send(b("after"));
            check(false, "send after terminate succeeded");
        } catch (PulsarClientException.TopicTerminatedException expected) {
            // as Pulsar
        }
        try {
            c.keep(c.client.newProducer().topic(t).create());
            check(false, "a producer was created on a terminated topic");
        } catch (PulsarClientException.TopicTerminatedException expected) {
            // as Pulsar
        }
        Consumer<byte[]> cons = consumer(c, t, "s", SubscriptionType.Exclusive);
        expectRange(cons, "m", 0, 5);
    }

    /** A consumer of a terminated topic learns that it reached the end. */
    static void reachedEnd(Ctx c) throws Exception {
        String t = c.topic("");
        Producer<byte[]> p = producer(c, t, false);
        send(p, "m", 3);
        Consumer<byte[]> cons = consumer(c, t, "s", SubscriptionType.Exclusive);
        expectRange(cons, "m", 0, 3);
        c.admin.topics().terminateTopic(t);
        // The consumer has read everything: it is told at once.
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (!cons.hasReachedEndOfTopic() && System.nanoTime() < deadline) {
            Message<byte[]> m = cons.receive(50, TimeUnit.MILLISECONDS);
            check(m == null, "message after the end: %s", m == null ? "" : Ctx.str(m));
        }
        check(cons.hasReachedEndOfTopic(), "consumer never saw the end of the topic");
        // A reader opened afterwards reaches the end after the three messages.
        Reader<byte[]> r = c.keep(c.client.newReader().topic(t).startMessageId(MessageId.earliest).create());
        for (int i = 0; i < 3; i++) {
            check(Ctx.text(must(r, "reader " + i)).equals("m-" + i), "reader message %d", i);
        }
        deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (!r.hasReachedEndOfTopic() && System.nanoTime() < deadline) {
            Message<byte[]> m = r.readNext(50, TimeUnit.MILLISECONDS);
            check(m == null, "reader message after the end: %s", m == null ? "" : Ctx.str(m));
        }
        check(r.hasReachedEndOfTopic(), "reader never saw the end of the topic");
    }
}
