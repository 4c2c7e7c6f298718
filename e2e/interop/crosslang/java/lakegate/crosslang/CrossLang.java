package lakegate.crosslang;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.TypedMessageBuilder;

/**
 * The Java side of the cross-language check (issue 6, item 2), with the Java
 * Pulsar client: the same contract as the Go tool (e2e/interop/crosslang/doc.go).
 *
 * <pre>
 *   CrossLang produce -url U -topic T [-batching] [-timeout 30s] &lt; spec.json
 *   CrossLang consume -url U -topic T -sub S -n N [-timeout 30s]
 * </pre>
 *
 * Exit status 0 on success, 1 on any error (printed to stderr).
 */
public final class CrossLang {
  /** Bound on the spec read from stdin, in bytes. */
  private static final int MAX_SPEC_BYTES = 16 << 20;

  private CrossLang() {}

  public static void main(String[] args) {
    try {
      run(args);
      System.exit(0);
    } catch (Exception e) {
      System.err.println("crosslang (java): " + e);
      System.exit(1);
    }
  }

  private static void run(String[] args) throws Exception {
    if (args.length == 0) {
      throw new IllegalArgumentException("usage: CrossLang produce|consume [flags]");
    }
    String url = null, topic = null, sub = "crosslang";
    int n = 0;
    boolean batching = false;
    long timeoutMs = 30_000;
    for (int i = 1; i < args.length; i++) {
      String f = args[i];
      if (f.equals("-batching")) {
        batching = true;
        continue;
      }
      if (i + 1 >= args.length) {
        throw new IllegalArgumentException("flag " + f + " needs a value");
      }
      String v = args[++i];
      switch (f) {
        case "-url" -> url = v;
        case "-topic" -> topic = v;
        case "-sub" -> sub = v;
        case "-n" -> n = Integer.parseInt(v);
        case "-timeout" -> timeoutMs = parseSeconds(v) * 1000;
        default -> throw new IllegalArgumentException("unknown flag " + f);
      }
    }
    if (url == null || topic == null) {
      throw new IllegalArgumentException("-url and -topic are required");
    }
    long deadline = System.currentTimeMillis() + timeoutMs;
    try (PulsarClient client = PulsarClient.builder().serviceUrl(url)
        .operationTimeout((int) timeoutMs, TimeUnit.MILLISECONDS)
        .connectionTimeout((int) timeoutMs, TimeUnit.MILLISECONDS).build()) {
      switch (args[0]) {
        case "produce" -> produce(client, topic, batching, System.in, deadline);
        case "consume" -> {
          if (n <= 0) {
            throw new IllegalArgumentException("consume needs -n > 0");
          }
          consume(client, topic, sub, n, deadline);
        }
        default -> throw new IllegalArgumentException("unknown command " + args[0] + " (want produce or consume)");
      }
    }
  }

  /** Parses "30s" or "30" (seconds). */
  private static long parseSeconds(String v) {
    return Long.parseLong(v.endsWith("s") ? v.substring(0, v.length() - 1) : v);
  }

  private static void produce(PulsarClient client, String topic, boolean batching, InputStream in, long deadline)
      throws Exception {
    byte[] raw = in.readNBytes(MAX_SPEC_BYTES + 1);
    if (raw.length > MAX_SPEC_BYTES) {
      throw new IllegalArgumentException("spec larger than " + MAX_SPEC_BYTES + " bytes");
    }
    JsonNode spec = new ObjectMapper().readTree(new String(raw, StandardCharsets.UTF_8));
    if (spec == null || !spec.isArray()) {
      throw new IllegalArgumentException("spec: want a JSON array");
    }
    try (Producer<byte[]> p = client.newProducer().topic(topic).enableBatching(batching)
        .batchingMaxPublishDelay(50, TimeUnit.MILLISECONDS).create()) {
      List<CompletableFuture<MessageId>> sent = new ArrayList<>();
      for (JsonNode m : spec) {
        TypedMessageBuilder<byte[]> b = p.newMessage()
            .value(Base64.getDecoder().decode(m.path("payload_b64").asText()));
        String key = m.path("key").asText("");
        if (!key.isEmpty()) {
          b.key(key);
        }
        Iterator<Map.Entry<String, JsonNode>> props = m.path("properties").fields();
        while (props.hasNext()) {
          Map.Entry<String, JsonNode> e = props.next();
          b.property(e.getKey(), e.getValue().asText());
        }
        long et = m.path("event_time_ms").asLong(0);
        if (et != 0) {
          b.eventTime(et);
        }
        sent.add(b.sendAsync());
      }
      p.flush();
      for (CompletableFuture<MessageId> f : sent) {
        f.get(Math.max(1, deadline - System.currentTimeMillis()), TimeUnit.MILLISECONDS);
      }
    }
  }

  private static void consume(PulsarClient client, String topic, String sub, int n, long deadline)
      throws Exception {
    ObjectMapper om = new ObjectMapper();
    ArrayNode out = om.createArrayNode();
    try (Consumer<byte[]> c = client.newConsumer().topic(topic).subscriptionName(sub)
        .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe()) {
      while (out.size() < n) {
        long left = deadline - System.currentTimeMillis();
        Message<byte[]> m = left > 0 ? c.receive((int) left, TimeUnit.MILLISECONDS) : null;
        if (m == null) {
          throw new IllegalStateException("received " + out.size() + " of " + n + " messages before the timeout");
        }
        ObjectNode o = out.addObject();
        o.put("payload_b64", Base64.getEncoder().encodeToString(m.getValue()));
        o.put("key", m.hasKey() ? m.getKey() : "");
        ObjectNode props = o.putObject("properties");
        new TreeMap<>(m.getProperties()).forEach(props::put);
        o.put("event_time_ms", m.getEventTime());
        c.acknowledge(m);
      }
    }
    System.out.println(om.writeValueAsString(out));
  }
}
