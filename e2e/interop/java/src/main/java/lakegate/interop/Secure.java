package lakegate.interop;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.admin.PulsarAdminException;
import org.apache.pulsar.client.api.Authentication;
import org.apache.pulsar.client.api.AuthenticationFactory;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;

/**
 * Secured-node scenarios for the Java client and admin client: TLS only,
 * token and mTLS authentication, grants (set up by
 * e2e/interop/secure/run.sh: public/default gives app produce+consume and
 * app-tls consume).
 *
 * <pre>
 *   java -cp ... lakegate.interop.Secure pulsar+ssl://host:port https://host:port CERTS_DIR
 * </pre>
 *
 * Prints PASS/FAIL per scenario and {@code java-secure: N/M scenarios
 * passed}; exits 1 on any failure.
 */
public final class Secure {
    interface Body {
        void run() throws Exception;
    }

    static String url, https, certs, run;

    public static void main(String[] args) throws Exception {
        url = args[0];
        https = args[1];
        certs = args[2];
        run = Long.toString(System.currentTimeMillis() % 1_000_000_000L, 36);
        List<Object[]> all = new ArrayList<>();
        all.add(new Object[] {"token-produce-consume", (Body) Secure::tokenProduceConsume});
        all.add(new Object[] {"token-other-role-refused", (Body) Secure::otherRoleRefused});
        all.add(new Object[] {"token-expired-refused", (Body) Secure::expiredRefused});
        all.add(new Object[] {"mtls-consume-not-produce", (Body) Secure::mtls});
        all.add(new Object[] {"admin-token", (Body) Secure::adminToken});
        int passed = 0;
        for (Object[] s : all) {
            long start = System.nanoTime();
            try {
                ((Body) s[1]).run();
                passed++;
                System.out.println("PASS " + s[0] + " (" + (System.nanoTime() - start) / 1_000_000 + " ms)");
            } catch (Throwable t) {
                System.out.println("FAIL " + s[0] + ": " + Main.describe(t));
            }
            System.out.flush();
        }
        System.out.println("java-secure: " + passed + "/" + all.size() + " scenarios passed");
        System.out.flush();
        Runtime.getRuntime().halt(passed == all.size() ? 0 : 1);
    }

    static String token(String name) throws Exception {
        return Files.readString(Path.of(certs, name + ".jwt")).trim();
    }

    static PulsarClient client(Authentication auth, int opTimeoutSeconds) throws Exception {
        return PulsarClient.builder().serviceUrl(url)
            .tlsTrustCertsFilePath(Path.of(certs, "ca.pem").toString())
            .authentication(auth)
            .operationTimeout(opTimeoutSeconds, TimeUnit.SECONDS)
            .connectionTimeout(5, TimeUnit.SECONDS)
            .build();
    }

    static String topic(String name) {
        return "persistent://public/default/jsec-" + run + "-" + name;
    }

    static void expectRefused(Body b, String... words) throws Exception {
        try {
            b.run();
        } catch (Exception e) {
            String text = Main.describe(e);
            for (String w : words) {
                if (text.contains(w)) {
                    return;
                }
            }
            throw new AssertionError("refused, but not with " + String.join("/", words) + ": " + text);
        }
        throw new AssertionError("accepted; want a refusal (" + String.join("/", words) + ")");
    }

    static void tokenProduceConsume() throws Exception {
        try (PulsarClient c = client(AuthenticationFactory.token(token("app")), 10)) {
            String t = topic("tok");
            try (Consumer<byte[]> cons = c.newConsumer().topic(t).subscriptionName("s")
                    .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
                 Producer<byte[]> p = c.newProducer().topic(t).create()) {
                for (int i = 0; i < 10; i++) {
                    p.send(("m" + i).getBytes());
                }
                for (int i = 0; i < 10; i++) {
                    Message<byte[]> m = cons.receive(10, TimeUnit.SECONDS);
                    if (m == null) {
                        throw new AssertionError("message " + i + " not received");
                    }
                    cons.acknowledge(m);
                }
            }
        }
    }

    static void otherRoleRefused() throws Exception {
        try (PulsarClient c = client(AuthenticationFactory.token(token("other")), 3)) {
            expectRefused(() -> c.newProducer().topic(topic("other")).create().close(), "Authorization", "authoriz");
        }
    }

    static void expiredRefused() throws Exception {
        try (PulsarClient c = client(AuthenticationFactory.token(token("expired")), 3)) {
            expectRefused(() -> c.newProducer().topic(topic("expired")).create().close(), "Authentication", "authentic", "Timeout");
        }
    }

    static void mtls() throws Exception {
        Authentication tls = AuthenticationFactory.TLS(Path.of(certs, "app-tls.pem").toString(), Path.of(certs, "app-tls-key.pem").toString());
        try (PulsarClient c = client(tls, 3)) {
            c.newConsumer().topic(topic("mtls")).subscriptionName("s").subscribe().close();
            expectRefused(() -> c.newProducer().topic(topic("mtls")).create().close(), "Authorization", "authoriz");
        }
    }

    static PulsarAdmin admin(String tok) throws Exception {
        return PulsarAdmin.builder().serviceHttpUrl(https)
            .tlsTrustCertsFilePath(Path.of(certs, "ca.pem").toString())
            .authentication(AuthenticationFactory.token(tok))
            .build();
    }

    static void adminToken() throws Exception {
        try (PulsarAdmin a = admin(token("admin"))) {
            List<String> tenants = a.tenants().getTenants();
            if (!tenants.contains("public")) {
                throw new AssertionError("tenants " + tenants);
            }
        }
        try (PulsarAdmin a = admin(token("app"))) {
            try {
                a.tenants().getTenants();
                throw new AssertionError("a non-superuser listed tenants");
            } catch (PulsarAdminException.NotAuthorizedException e) {
                // 403, as Pulsar answers
            }
            a.topics().getStats(topic("tok")); // app may read the stats of a topic it produces to
        }
        try (PulsarAdmin a = admin(token("expired"))) {
            try {
                a.tenants().getTenants();
                throw new AssertionError("an expired token was accepted");
            } catch (PulsarAdminException e) {
                if (e.getStatusCode() != 401) {
                    throw new AssertionError("expired token: HTTP " + e.getStatusCode() + ", want 401");
                }
            }
        }
    }
}
