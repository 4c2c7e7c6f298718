// The client side of the pulsar-proxy interop run (run.sh): Apache Pulsar's
// Java client (4.0.8, from the proxy's own classpath) talks to Apache
// Pulsar's proxy, which authenticates it and connects to lakegate as the
// proxy role, naming the client as original principal with its token.
// Run as a single source file:
//
//   java -cp "$cp" ProxyClient.java PROXY_URL CERTS_DIR TOPIC PARTITIONED_TOPIC
//
// Prints one line per scenario and `pulsar-proxy: N/M scenarios passed`;
// exits non-zero if one failed.

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.AuthenticationFactory;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;

public class ProxyClient {
    interface Scenario {
        void run() throws Exception;
    }

    static int passed, total;

    static void scenario(String name, Scenario s) {
        total++;
        try {
            s.run();
            passed++;
            System.out.println("PASS " + name);
        } catch (Throwable t) {
            System.out.println("FAIL " + name + ": " + t);
        }
    }

    static PulsarClient client(String url, String token) throws Exception {
        return PulsarClient.builder().serviceUrl(url)
                .authentication(AuthenticationFactory.token(token))
                .operationTimeout(15, TimeUnit.SECONDS).connectionTimeout(10, TimeUnit.SECONDS)
                .build();
    }

    // roundTrip produces n messages to topic and consumes them back.
    static void roundTrip(PulsarClient c, String topic, String sub, int n) throws Exception {
        try (Consumer<String> cons = c.newConsumer(Schema.STRING).topic(topic).subscriptionName(sub)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
             Producer<String> p = c.newProducer(Schema.STRING).topic(topic).create()) {
            for (int i = 0; i < n; i++) {
                p.send("m" + i);
            }
            Set<String> got = new HashSet<>();
            while (got.size() < n) {
                Message<String> m = cons.receive(30, TimeUnit.SECONDS);
                if (m == null) {
                    throw new AssertionError("received " + got.size() + " of " + n);
                }
                got.add(m.getValue());
                cons.acknowledge(m);
            }
        }
    }

    // refused expects op to fail with an exception of kind want.
    static void refused(Class<? extends Throwable> want, Scenario op) throws Exception {
        try {
            op.run();
        } catch (Throwable t) {
            for (Throwable c = t; c != null; c = c.getCause()) {
                if (want.isInstance(c)) {
                    return;
                }
            }
            throw new AssertionError("refused with " + t + ", want " + want.getSimpleName());
        }
        throw new AssertionError("accepted, want " + want.getSimpleName());
    }

    public static void main(String[] args) throws Exception {
        String url = args[0];
        Path certs = Path.of(args[1]);
        String topic = args[2], partitioned = args[3];
        String app = Files.readString(certs.resolve("app.jwt")).trim();
        String other = Files.readString(certs.resolve("other.jwt")).trim();
        String expired = Files.readString(certs.resolve("expired.jwt")).trim();

        scenario("a client with grants produces and consumes through pulsar-proxy", () -> {
            try (PulsarClient c = client(url, app)) {
                roundTrip(c, topic, "app-sub", 20);
            }
        });
        scenario("through pulsar-proxy to the owners of three partitions", () -> {
            try (PulsarClient c = client(url, app)) {
                roundTrip(c, partitioned, "app-sub", 30);
            }
        });
        scenario("a client without grants is refused on produce (lakegate authorizes the original principal)", () -> {
            try (PulsarClient c = client(url, other)) {
                refused(PulsarClientException.AuthorizationException.class,
                        () -> c.newProducer(Schema.STRING).topic(topic).create().close());
            }
        });
        scenario("a client without grants is refused on consume", () -> {
            try (PulsarClient c = client(url, other)) {
                refused(PulsarClientException.AuthorizationException.class,
                        () -> c.newConsumer(Schema.STRING).topic(topic).subscriptionName("other-sub").subscribe().close());
            }
        });
        scenario("an expired token is refused", () -> {
            try (PulsarClient c = client(url, expired)) {
                refused(PulsarClientException.class,
                        () -> c.newProducer(Schema.STRING).topic(topic).create().close());
            }
        });
        System.out.println("pulsar-proxy: " + passed + "/" + total + " scenarios passed");
        System.exit(passed == total ? 0 : 1);
    }
}
