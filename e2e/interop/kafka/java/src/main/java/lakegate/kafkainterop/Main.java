package lakegate.kafkainterop;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Kafka interop scenarios for the unmodified Apache Kafka Java client, parametrised only by a
 * bootstrap address and a topic-name prefix, so that the same runner checks Apache Kafka and
 * lakegate's Kafka listener.
 *
 * <p>Environment: KAFKA_BOOTSTRAP (host:port[,host:port…], required), KAFKA_TOPIC_PREFIX
 * (default jk-RANDOM-), SCENARIOS=a,b (names or name prefixes: "compression" selects the four
 * codecs), SCENARIO_TIMEOUT seconds per scenario (default 120). Prints `PASS name (T s)` or `FAIL
 * name: reason` per scenario and `java-kafka: N/M scenarios passed`; exits 1 if one failed, 2 on a
 * usage error.
 */
public final class Main {
  static String bootstrap;
  static String prefix;
  static final Duration API = Duration.ofSeconds(30);

  interface Body {
    void run() throws Exception;
  }

  record Scenario(String name, Body body) {}

  /** A scenario's check failed; the message is the reason printed. */
  static final class Failure extends Exception {
    Failure(String msg) {
      super(msg);
    }
  }

  static void check(boolean ok, String fmt, Object... args) throws Failure {
    if (!ok) throw new Failure(String.format(Locale.ROOT, fmt, args));
  }

  public static void main(String[] args) throws Exception {
    bootstrap = System.getenv("KAFKA_BOOTSTRAP");
    if (bootstrap == null || bootstrap.isBlank()) {
      System.err.println("java-kafka: KAFKA_BOOTSTRAP (host:port[,host:port...]) is required");
      System.exit(2);
    }
    prefix = Optional.ofNullable(System.getenv("KAFKA_TOPIC_PREFIX"))
        .filter(s -> !s.isEmpty())
        .orElse(String.format("jk-%06x-", ThreadLocalRandom.current().nextInt(1 << 24)));
    long timeout = Long.parseLong(Optional.ofNullable(System.getenv("SCENARIO_TIMEOUT")).orElse("120"));

    List<Scenario> all = new ArrayList<>();
    all.add(new Scenario("produce-consume", () -> produceConsume("none")));
    for (String codec : List.of("gzip", "snappy", "lz4", "zstd")) {
      all.add(new Scenario("compression-" + codec, () -> produceConsume(codec)));
    }
    all.add(new Scenario("group-handoff", Main::groupHandoff));
    all.add(new Scenario("admin", Main::adminScenario));
    all.add(new Scenario("txn", Main::txnScenario));

    List<Scenario> run = select(all, System.getenv("SCENARIOS"));
    ExecutorService pool = Executors.newCachedThreadPool(r -> {
      Thread t = new Thread(r, "scenario");
      t.setDaemon(true);
      return t;
    });
    int passed = 0;
    for (Scenario s : run) {
      long t0 = System.nanoTime();
      Future<?> f = pool.submit(() -> {
        s.body().run();
        return null;
      });
      String fail = null;
      try {
        f.get(timeout, TimeUnit.SECONDS);
      } catch (TimeoutException e) {
        f.cancel(true);
        fail = "timed out after " + timeout + " s";
      } catch (ExecutionException e) {
        fail = reason(e.getCause());
      }
      double secs = (System.nanoTime() - t0) / 1e9;
      if (fail == null) {
        passed++;
        System.out.printf(Locale.ROOT, "PASS %s (%.1f s)%n", s.name(), secs);
      } else {
        System.out.printf(Locale.ROOT, "FAIL %s: %s (%.1f s)%n", s.name(), fail, secs);
      }
      System.out.flush();
    }
    System.out.printf("java-kafka: %d/%d scenarios passed%n", passed, run.size());
    System.out.flush();
    System.exit(passed == run.size() ? 0 : 1);
  }

  static List<Scenario> select(List<Scenario> all, String want) {
    if (want == null || want.isBlank()) return all;
    List<Scenario> out = new ArrayList<>();
    for (String w : want.split(",")) {
      String n = w.trim();
      if (n.isEmpty()) continue;
      boolean hit = false;
      for (Scenario s : all) {
        if ((s.name().equals(n) || s.name().startsWith(n + "-")) && !out.contains(s)) {
          out.add(s);
          hit = true;
        }
      }
      if (!hit && all.stream().noneMatch(s -> s.name().equals(n) || s.name().startsWith(n + "-"))) {
        System.err.println("java-kafka: unknown scenario " + n + "; known: "
            + all.stream().map(Scenario::name).toList());
        System.exit(2);
      }
    }
    return out;
  }

  static String reason(Throwable t) {
    if (t instanceof Failure) return t.getMessage();
    if (t instanceof ExecutionException && t.getCause() != null) t = t.getCause();
    StringBuilder b = new StringBuilder(t.getClass().getSimpleName() + ": " + t.getMessage());
    for (Throwable c = t.getCause(); c != null && c != t; c = c.getCause()) {
      b.append(" <- ").append(c.getClass().getSimpleName()).append(": ").append(c.getMessage());
      if (c.getCause() == c) break;
    }
    return b.toString();
  }

  // ---- clients -------------------------------------------------------------------------

  static Properties common(String clientId) {
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    p.put("client.id", clientId);
    p.put("request.timeout.ms", "20000");
    p.put("default.api.timeout.ms", "30000");
    return p;
  }

  static Admin admin() {
    Properties p = common("jk-admin");
    p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
    return Admin.create(p);
  }

  static KafkaProducer<byte[], byte[]> producer(String clientId, Map<String, String> extra) {
    Properties p = common(clientId);
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
    p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
    p.putAll(extra);
    return new KafkaProducer<>(p);
  }

  static KafkaConsumer<byte[], byte[]> consumer(String clientId, Map<String, String> extra) {
    Properties p = common(clientId);
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.putAll(extra);
    return new KafkaConsumer<>(p);
  }

  /** A consumer-group member: the classic protocol with the cooperative-sticky assignor. */
  static Map<String, String> groupMember(String group) {
    Map<String, String> m = new HashMap<>();
    m.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    m.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
    m.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
    m.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
    m.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
    return m;
  }

  static void createTopic(Admin admin, String topic, int partitions) throws Exception {
    admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get(30, TimeUnit.SECONDS);
  }

  static List<TopicPartition> partitions(String topic, int n) {
    List<TopicPartition> out = new ArrayList<>();
    for (int i = 0; i < n; i++) out.add(new TopicPartition(topic, i));
    return out;
  }

  static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  static String show(byte[] b) {
    if (b == null) return "null";
    return b.length <= 32 ? Arrays.toString(b) : b.length + " bytes";
  }

  // ---- (i), (ii): produce and read back exactly ------------------------------------------

  /** What was sent, and where the producer was told it went. */
  record Sent(int index, byte[] key, byte[] value, List<Header> headers, long timestamp) {}

  static final int RECORDS = 1000;

  static Sent record(int i, long base, String codec) {
    byte[] key = utf8("key-" + i);
    // Compressible values of varying size; record 13 is a tombstone (null value).
    byte[] value = i == 13 ? null : utf8("value-" + i + "-" + codec + "-" + "lakegate ".repeat(i % 50));
    List<Header> headers = List.of(
        new RecordHeader("idx", utf8(Integer.toString(i))),
        // Not valid UTF-8: 0xff 0xfe never appear in UTF-8.
        new RecordHeader("bin", new byte[] {(byte) 0xff, (byte) 0xfe, 0x00, (byte) i}),
        new RecordHeader("dup", utf8("a")),
        new RecordHeader("dup", utf8("b")));
    return new Sent(i, key, value, headers, base + i);
  }

  static void produceConsume(String codec) throws Exception {
    String topic = prefix + "records-" + codec;
    try (Admin admin = admin()) {
      createTopic(admin, topic, 3);
    }
    long base = System.currentTimeMillis() - 3_600_000L;
    List<Sent> sent = new ArrayList<>();
    List<Future<RecordMetadata>> acks = new ArrayList<>();
    try (KafkaProducer<byte[], byte[]> p = producer("jk-producer-" + codec,
        Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec))) {
      for (int i = 0; i < RECORDS; i++) {
        Sent s = record(i, base, codec);
        sent.add(s);
        acks.add(p.send(new ProducerRecord<>(topic, null, s.timestamp(), s.key(), s.value(), s.headers())));
      }
      p.flush();
    }
    // partition -> offset -> index, in the order the producer was told.
    Map<Integer, TreeMap<Long, Integer>> where = new TreeMap<>();
    for (int i = 0; i < RECORDS; i++) {
      RecordMetadata md = acks.get(i).get(30, TimeUnit.SECONDS);
      Integer prev = where.computeIfAbsent(md.partition(), k -> new TreeMap<>()).put(md.offset(), i);
      check(prev == null, "records %d and %d acknowledged at the same offset %d/%d", prev, i, md.partition(), md.offset());
    }
    // Per partition the acknowledged offsets follow the send order (idempotent producer).
    for (var e : where.entrySet()) {
      int last = -1;
      for (int idx : e.getValue().values()) {
        check(idx > last, "partition %d: record %d acknowledged at a lower offset than record %d", e.getKey(), idx, last);
        last = idx;
      }
    }
    check(where.size() > 1, "all %d keyed records went to one partition of 3", RECORDS);

    Map<Integer, List<Long>> seen = new TreeMap<>();
    int got = 0;
    List<String> bad = new ArrayList<>();
    try (KafkaConsumer<byte[], byte[]> c = consumer("jk-reader-" + codec, Map.of())) {
      List<TopicPartition> tps = partitions(topic, 3);
      c.assign(tps);
      c.seekToBeginning(tps);
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      long quietUntil = Long.MAX_VALUE;
      while (System.nanoTime() < Math.min(deadline, quietUntil)) {
        ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(200));
        for (ConsumerRecord<byte[], byte[]> r : recs) {
          got++;
          seen.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.offset());
          TreeMap<Long, Integer> po = where.get(r.partition());
          Integer idx = po == null ? null : po.get(r.offset());
          if (idx == null) {
            bad.add(String.format("unexpected record at %d/%d", r.partition(), r.offset()));
            continue;
          }
          String diff = compare(sent.get(idx), r);
          if (diff != null) bad.add(String.format("record %d at %d/%d: %s", idx, r.partition(), r.offset(), diff));
        }
        // Once all are read, poll 500 ms more: nothing else may arrive.
        if (got >= RECORDS && quietUntil == Long.MAX_VALUE) quietUntil = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(500);
      }
    }
    check(bad.isEmpty(), "%d mismatches, first: %s", bad.size(), bad.isEmpty() ? "" : bad.get(0));
    check(got == RECORDS, "read %d records, want exactly %d", got, RECORDS);
    for (var e : where.entrySet()) {
      List<Long> want = new ArrayList<>(e.getValue().keySet());
      List<Long> have = seen.getOrDefault(e.getKey(), List.of());
      check(want.equals(have), "partition %d: read offsets %s, want %s in order", e.getKey(), brief(have), brief(want));
    }
  }

  static String brief(List<Long> l) {
    return l.size() <= 6 ? l.toString() : l.subList(0, 3) + "…" + l.subList(l.size() - 3, l.size()) + " (" + l.size() + ")";
  }

  static String compare(Sent s, ConsumerRecord<byte[], byte[]> r) {
    if (!Arrays.equals(s.key(), r.key())) return "key " + show(r.key()) + ", want " + show(s.key());
    if (!Arrays.equals(s.value(), r.value())) return "value " + show(r.value()) + ", want " + show(s.value());
    if (r.timestamp() != s.timestamp()) return "timestamp " + r.timestamp() + ", want " + s.timestamp();
    if (r.timestampType() != TimestampType.CREATE_TIME) return "timestamp type " + r.timestampType() + ", want CreateTime";
    Header[] hs = r.headers().toArray();
    if (hs.length != s.headers().size()) return hs.length + " headers, want " + s.headers().size();
    for (int i = 0; i < hs.length; i++) {
      Header want = s.headers().get(i);
      if (!hs[i].key().equals(want.key()) || !Arrays.equals(hs[i].value(), want.value())) {
        return "header " + i + " " + hs[i].key() + "=" + show(hs[i].value()) + ", want " + want.key() + "=" + show(want.value());
      }
    }
    return null;
  }

  // ---- (iii): a consumer group shares a topic, commits, and a new member resumes ----------

  static Map<TopicPartition, Long> produceKeyed(String topic, String tag, int n) throws Exception {
    Map<TopicPartition, Long> ends = new HashMap<>();
    List<Future<RecordMetadata>> acks = new ArrayList<>();
    try (KafkaProducer<byte[], byte[]> p = producer("jk-group-producer", Map.of())) {
      for (int i = 0; i < n; i++) {
        acks.add(p.send(new ProducerRecord<>(topic, utf8(tag + "-key-" + i), utf8(tag + "-value-" + i))));
      }
      p.flush();
    }
    for (Future<RecordMetadata> f : acks) {
      RecordMetadata md = f.get(30, TimeUnit.SECONDS);
      ends.merge(new TopicPartition(topic, md.partition()), md.offset() + 1, Math::max);
    }
    return ends;
  }

  static String pos(ConsumerRecord<?, ?> r) {
    return r.partition() + "/" + r.offset();
  }

  static void groupHandoff() throws Exception {
    String topic = prefix + "group";
    String group = prefix + "group-g";
    final int first = 400;
    final int second = 200;
    try (Admin admin = admin()) {
      createTopic(admin, topic, 4);
    }
    Map<String, String> c1owner = new HashMap<>(); // position -> consumer
    KafkaConsumer<byte[], byte[]> c1 = consumer("jk-member-1", groupMember(group));
    KafkaConsumer<byte[], byte[]> c2 = consumer("jk-member-2", groupMember(group));
    Map<TopicPartition, Long> ends1;
    try {
      c1.subscribe(List.of(topic));
      c2.subscribe(List.of(topic));
      // Both members poll (one thread, alternating) until the cooperative-sticky assignor has
      // spread the 4 partitions 2 and 2.
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (!(c1.assignment().size() == 2 && c2.assignment().size() == 2)) {
        check(System.nanoTime() < deadline, "no 2+2 assignment within 60 s: member 1 has %s, member 2 has %s",
            c1.assignment(), c2.assignment());
        check(c1.poll(Duration.ofMillis(100)).isEmpty() && c2.poll(Duration.ofMillis(100)).isEmpty(),
            "records before any were produced");
      }
      Set<TopicPartition> a1 = new HashSet<>(c1.assignment());
      Set<TopicPartition> a2 = new HashSet<>(c2.assignment());
      check(a1.stream().noneMatch(a2::contains), "both members own a partition: %s / %s", a1, a2);

      ends1 = produceKeyed(topic, "first", first);
      Map<String, Integer> perMember = new HashMap<>(Map.of("1", 0, "2", 0));
      deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (c1owner.size() < first) {
        check(System.nanoTime() < deadline, "the two members read %d of %d records within 60 s", c1owner.size(), first);
        for (int m = 1; m <= 2; m++) {
          KafkaConsumer<byte[], byte[]> c = m == 1 ? c1 : c2;
          ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(100));
          for (ConsumerRecord<byte[], byte[]> r : recs) {
            String prev = c1owner.put(pos(r), Integer.toString(m));
            check(prev == null, "record %s read twice (members %s and %d)", pos(r), prev, m);
            perMember.merge(Integer.toString(m), 1, Integer::sum);
          }
          if (!recs.isEmpty()) {
            try {
              c.commitSync(API);
            } catch (RebalanceInProgressException e) {
              // Committed on the next poll: positions only grow.
            }
          }
        }
      }
      // Commit what was read last (a commit lost to a rebalance above is retried here).
      c1.commitSync(API);
      c2.commitSync(API);
      check(perMember.get("1") > 0 && perMember.get("2") > 0, "one member read nothing: %s", perMember);
      check(c1.assignment().equals(a1) && c2.assignment().equals(a2), "assignment moved while reading: %s / %s",
          c1.assignment(), c2.assignment());
    } finally {
      c1.close(Duration.ofSeconds(10));
      c2.close(Duration.ofSeconds(10));
    }

    // The group's committed offsets are exactly the ends of what was produced.
    try (Admin admin = admin()) {
      Map<TopicPartition, OffsetAndMetadata> committed =
          admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
      for (TopicPartition tp : partitions(topic, 4)) {
        long want = ends1.getOrDefault(tp, 0L);
        OffsetAndMetadata om = committed.get(tp);
        long have = om == null ? 0 : om.offset();
        check(have == want, "committed offset of %s is %s, want %d", tp, om == null ? "none" : om.offset(), want);
      }
    }

    // A new member of the group resumes where the two left off.
    produceKeyed(topic, "second", second);
    int fresh = 0;
    List<String> dups = new ArrayList<>();
    try (KafkaConsumer<byte[], byte[]> c3 = consumer("jk-member-3", groupMember(group))) {
      c3.subscribe(List.of(topic));
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      long quietUntil = Long.MAX_VALUE;
      while (System.nanoTime() < Math.min(deadline, quietUntil)) {
        for (ConsumerRecord<byte[], byte[]> r : c3.poll(Duration.ofMillis(200))) {
          if (c1owner.containsKey(pos(r))) {
            dups.add(pos(r));
          } else if (!new String(r.value(), StandardCharsets.UTF_8).startsWith("second-")) {
            dups.add(pos(r) + " (not a second-round record)");
          } else {
            fresh++;
          }
        }
        if (fresh >= second && quietUntil == Long.MAX_VALUE) quietUntil = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(1000);
      }
      check(dups.isEmpty(), "the resumed member read %d already-committed records, first %s", dups.size(), dups.isEmpty() ? "" : dups.get(0));
      check(fresh == second, "the resumed member read %d new records, want exactly %d (missing %d)", fresh, second, second - fresh);
      c3.commitSync(API);
    }
  }

  // ---- (iv): the admin client ----------------------------------------------------------

  static void adminScenario() throws Exception {
    String topic = prefix + "admin";
    String group = prefix + "admin-g";
    final int perPartition = 10;
    long base = System.currentTimeMillis() - 600_000L;
    try (Admin admin = admin()) {
      createTopic(admin, topic, 3);

      // 30 records, record i to partition i % 3 with timestamp base + i s.
      Map<Integer, List<Long>> stamps = new TreeMap<>();
      try (KafkaProducer<byte[], byte[]> p = producer("jk-admin-producer", Map.of())) {
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        for (int i = 0; i < 3 * perPartition; i++) {
          long ts = base + i * 1000L;
          acks.add(p.send(new ProducerRecord<>(topic, i % 3, ts, utf8("k" + i), utf8("v" + i))));
          stamps.computeIfAbsent(i % 3, k -> new ArrayList<>()).add(ts);
        }
        p.flush();
        for (Future<RecordMetadata> f : acks) f.get(30, TimeUnit.SECONDS);
      }

      Set<String> names = admin.listTopics().names().get(30, TimeUnit.SECONDS);
      check(names.contains(topic), "listTopics lacks %s (%d topics)", topic, names.size());

      TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
      check(d != null && d.partitions().size() == 3, "describeTopics: %s", d);
      for (TopicPartitionInfo pi : d.partitions()) {
        check(pi.leader() != null && !pi.leader().isEmpty() && pi.leader().id() >= 0, "partition %d has no leader: %s", pi.partition(), pi);
        check(!pi.replicas().isEmpty() && !pi.isr().isEmpty(), "partition %d replicas %s isr %s", pi.partition(), pi.replicas(), pi.isr());
      }
      check(d.topicId() != null, "describeTopics gave no topic id");

      List<TopicPartition> tps = partitions(topic, 3);
      Map<TopicPartition, ListOffsetsResultInfo> earliest = listOffsets(admin, tps, OffsetSpec.earliest());
      Map<TopicPartition, ListOffsetsResultInfo> latest = listOffsets(admin, tps, OffsetSpec.latest());
      long at = base + 14_500; // records 15.. are at or after it
      Map<TopicPartition, ListOffsetsResultInfo> byTime = listOffsets(admin, tps, OffsetSpec.forTimestamp(at));
      Map<TopicPartition, ListOffsetsResultInfo> future =
          listOffsets(admin, tps, OffsetSpec.forTimestamp(System.currentTimeMillis() + 3_600_000L));
      for (TopicPartition tp : tps) {
        check(earliest.get(tp).offset() == 0, "earliest of %s is %d, want 0", tp, earliest.get(tp).offset());
        check(latest.get(tp).offset() == perPartition, "latest of %s is %d, want %d", tp, latest.get(tp).offset(), perPartition);
        List<Long> ts = stamps.get(tp.partition());
        long want = ts.stream().filter(t -> t < at).count();
        ListOffsetsResultInfo r = byTime.get(tp);
        check(r.offset() == want, "forTimestamp(%d) of %s is offset %d, want %d", at, tp, r.offset(), want);
        check(r.timestamp() == ts.get((int) want), "forTimestamp of %s gave timestamp %d, want %d", tp, r.timestamp(), ts.get((int) want));
        check(future.get(tp).offset() == -1, "forTimestamp(an hour ahead) of %s is offset %d, want -1 (none)", tp, future.get(tp).offset());
      }

      DescribeClusterResult cluster = admin.describeCluster();
      Collection<Node> nodes = cluster.nodes().get(30, TimeUnit.SECONDS);
      String clusterId = cluster.clusterId().get(30, TimeUnit.SECONDS);
      check(!nodes.isEmpty(), "describeCluster lists no node");
      check(clusterId != null && !clusterId.isEmpty(), "describeCluster gives no cluster id");
      Set<Integer> ids = new HashSet<>();
      for (Node n : nodes) ids.add(n.id());
      for (TopicPartitionInfo pi : d.partitions()) {
        check(ids.contains(pi.leader().id()), "leader %d of partition %d is not among the cluster's nodes %s", pi.leader().id(), pi.partition(), ids);
      }

      // A group with one live member that committed offsets.
      Map<TopicPartition, OffsetAndMetadata> commit = new LinkedHashMap<>();
      for (TopicPartition tp : tps) commit.put(tp, new OffsetAndMetadata(3 + tp.partition(), "m" + tp.partition()));
      try (KafkaConsumer<byte[], byte[]> c = consumer("jk-admin-member", groupMember(group))) {
        c.subscribe(List.of(topic));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (c.assignment().size() < 3) {
          check(System.nanoTime() < deadline, "the member got %s within 30 s, want 3 partitions", c.assignment());
          c.poll(Duration.ofMillis(100));
        }
        c.commitSync(commit, API);

        Collection<ConsumerGroupListing> groups = admin.listConsumerGroups().all().get(30, TimeUnit.SECONDS);
        Optional<ConsumerGroupListing> listing = groups.stream().filter(g -> g.groupId().equals(group)).findFirst();
        check(listing.isPresent(), "listConsumerGroups lacks %s (%d groups)", group, groups.size());

        ConsumerGroupDescription gd = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get(30, TimeUnit.SECONDS);
        check(gd.groupState() == GroupState.STABLE, "describeConsumerGroups: state %s, want Stable", gd.groupState());
        check(gd.members().size() == 1, "describeConsumerGroups: %d members, want 1", gd.members().size());
        MemberDescription m = gd.members().iterator().next();
        check(m.clientId().equals("jk-admin-member"), "member client id %s", m.clientId());
        check(new HashSet<>(m.assignment().topicPartitions()).equals(new HashSet<>(tps)), "member assignment %s", m.assignment().topicPartitions());
        check(gd.partitionAssignor().equals("cooperative-sticky"), "assignor %s, want cooperative-sticky", gd.partitionAssignor());
        check(gd.coordinator() != null && ids.contains(gd.coordinator().id()), "coordinator %s", gd.coordinator());

        Map<TopicPartition, OffsetAndMetadata> offs =
            admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
        for (var e : commit.entrySet()) {
          OffsetAndMetadata have = offs.get(e.getKey());
          check(have != null && have.offset() == e.getValue().offset() && e.getValue().metadata().equals(have.metadata()),
              "listConsumerGroupOffsets %s: %s, want %s", e.getKey(), have, e.getValue());
        }
      }
      ConsumerGroupDescription left = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get(30, TimeUnit.SECONDS);
      check(left.groupState() == GroupState.EMPTY && left.members().isEmpty(),
          "after the member closed: state %s, %d members; want Empty, 0", left.groupState(), left.members().size());

      admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all().get(30, TimeUnit.SECONDS);
      int count = waitFor(15, () -> admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS)
          .get(topic).partitions().size(), n -> n == 5);
      check(count == 5, "after createPartitions(5) the topic has %d partitions", count);
      Map<TopicPartition, ListOffsetsResultInfo> grown = listOffsets(admin, partitions(topic, 5), OffsetSpec.latest());
      check(grown.get(new TopicPartition(topic, 4)).offset() == 0, "new partition 4 latest offset %d", grown.get(new TopicPartition(topic, 4)).offset());

      admin.deleteTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
      boolean gone = waitFor(30, () -> !admin.listTopics().names().get(30, TimeUnit.SECONDS).contains(topic), b -> b);
      check(gone, "%s still listed 30 s after deleteTopics", topic);
    }
  }

  static Map<TopicPartition, ListOffsetsResultInfo> listOffsets(Admin admin, List<TopicPartition> tps, OffsetSpec spec) throws Exception {
    Map<TopicPartition, OffsetSpec> req = new HashMap<>();
    for (TopicPartition tp : tps) req.put(tp, spec);
    return admin.listOffsets(req).all().get(30, TimeUnit.SECONDS);
  }

  interface Probe<T> {
    T get() throws Exception;
  }

  /** Polls probe every 200 ms until done(value) or the bound; returns the last value. */
  static <T> T waitFor(int seconds, Probe<T> probe, java.util.function.Predicate<T> done) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
    T v = probe.get();
    while (!done.test(v) && System.nanoTime() < deadline) {
      Thread.sleep(200);
      v = probe.get();
    }
    return v;
  }

  // ---- (v): transactions: commit, abort, consume-transform-produce, fencing -------------

  /**
   * A transactional producer commits records to three partitions and aborts others; a
   * consume-transform-produce round commits its input offsets with its outputs
   * (sendOffsetsToTransaction); a second producer of the transactional.id fences the first, whose
   * open transaction is aborted. A read_committed consumer reads until sentinels produced after
   * everything (one per partition): the committed records, never an aborted or fenced one.
   */
  static void txnScenario() throws Exception {
    String in = prefix + "txn-in", out = prefix + "txn-out", group = prefix + "txn-g", tid = prefix + "txn";
    try (Admin admin = admin()) {
      createTopic(admin, in, 2);
      createTopic(admin, out, 3);
    }
    try (KafkaProducer<byte[], byte[]> p = producer("jk-txn-input", Map.of())) {
      for (int i = 0; i < 6; i++) p.send(new ProducerRecord<>(in, i % 2, null, utf8("in-" + i)));
      p.flush();
    }
    Set<String> want = new HashSet<>();
    Map<String, String> txnConf = Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid,
        ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "60000");
    KafkaProducer<byte[], byte[]> zombie = producer("jk-txn-1", txnConf);
    try {
      zombie.initTransactions();
      zombie.beginTransaction();
      for (int i = 0; i < 6; i++) {
        zombie.send(new ProducerRecord<>(out, i % 3, null, utf8("c-" + i)));
        want.add("c-" + i);
      }
      zombie.commitTransaction();
      zombie.beginTransaction();
      for (int i = 0; i < 3; i++) zombie.send(new ProducerRecord<>(out, i % 3, null, utf8("aborted-" + i)));
      zombie.abortTransaction();

      // Consume-transform-produce in one transaction.
      Map<String, String> cc = new HashMap<>(groupMember(group));
      cc.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, IsolationLevel.READ_COMMITTED.toString());
      try (KafkaConsumer<byte[], byte[]> c = consumer("jk-txn-consumer", cc)) {
        c.subscribe(List.of(in));
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        zombie.beginTransaction();
        int read = 0;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (read < 6 && System.nanoTime() < deadline) {
          for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
            read++;
            String v = "out-" + new String(r.value(), StandardCharsets.UTF_8);
            zombie.send(new ProducerRecord<>(out, r.partition(), null, utf8(v)));
            want.add(v);
            offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
          }
        }
        check(read == 6, "consumed %d inputs of 6", read);
        zombie.sendOffsetsToTransaction(offsets, c.groupMetadata());
        zombie.commitTransaction();
      }

      // Fencing: the zombie's open transaction is aborted by the new producer's init.
      zombie.beginTransaction();
      zombie.send(new ProducerRecord<>(out, 0, null, utf8("zombie-0"))).get(30, TimeUnit.SECONDS);
      try (KafkaProducer<byte[], byte[]> next = producer("jk-txn-2", txnConf)) {
        next.initTransactions();
        next.beginTransaction();
        next.send(new ProducerRecord<>(out, 1, null, utf8("next-0")));
        want.add("next-0");
        next.commitTransaction();
      }
      Exception fenced = null;
      try {
        zombie.send(new ProducerRecord<>(out, 2, null, utf8("zombie-1"))).get(30, TimeUnit.SECONDS);
        zombie.commitTransaction();
      } catch (Exception e) {
        fenced = e;
      }
      check(fenced != null, "the fenced producer committed");
      Throwable root = fenced instanceof ExecutionException && fenced.getCause() != null ? fenced.getCause() : fenced;
      check(root instanceof ProducerFencedException || root.getCause() instanceof ProducerFencedException
              || root instanceof org.apache.kafka.common.errors.InvalidProducerEpochException,
          "the fenced producer failed with %s, want ProducerFencedException", reason(fenced));
    } finally {
      zombie.close(Duration.ofSeconds(5));
    }

    // The input offsets were committed with the outputs.
    try (Admin admin = admin()) {
      Map<TopicPartition, OffsetAndMetadata> committed =
          admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
      for (TopicPartition tp : partitions(in, 2)) {
        OffsetAndMetadata om = committed.get(tp);
        check(om != null && om.offset() == 3, "group offset of %s: %s, want 3", tp, om);
      }
    }

    // read_committed until the sentinels: exactly what committed.
    try (KafkaProducer<byte[], byte[]> p = producer("jk-txn-sentinel", Map.of())) {
      for (int i = 0; i < 3; i++) p.send(new ProducerRecord<>(out, i, null, utf8("sentinel")));
      p.flush();
    }
    Set<String> got = new HashSet<>();
    List<String> extra = new ArrayList<>();
    try (KafkaConsumer<byte[], byte[]> c = consumer("jk-txn-reader",
        Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, IsolationLevel.READ_COMMITTED.toString()))) {
      List<TopicPartition> tps = partitions(out, 3);
      c.assign(tps);
      c.seekToBeginning(tps);
      int sentinels = 0;
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (sentinels < 3 && System.nanoTime() < deadline) {
        for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
          String v = new String(r.value(), StandardCharsets.UTF_8);
          if (v.equals("sentinel")) sentinels++;
          else if (!got.add(v) || !want.contains(v)) extra.add(v);
        }
      }
      check(sentinels == 3, "read %d sentinels of 3", sentinels);
    }
    check(extra.isEmpty(), "read_committed read records not committed or twice: %s", extra);
    check(got.equals(want), "read_committed read %s, want %s", new java.util.TreeSet<>(got), new java.util.TreeSet<>(want));
  }
}
