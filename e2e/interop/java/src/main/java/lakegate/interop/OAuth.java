package lakegate.interop;

import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.admin.PulsarAdminException;
import org.apache.pulsar.client.api.Authentication;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.impl.auth.oauth2.AuthenticationFactoryOAuth2;
import org.apache.pulsar.common.policies.data.AuthAction;

/**
 * OAuth2 scenarios for the Java client and admin client:
 * AuthenticationFactoryOAuth2.clientCredentials against a test OpenID
 * Connect issuer, and a node with the openid provider (set up by
 * e2e/interop/oauth/run.sh: the issuer's client orders-app has subject
 * orders, which public/default grants produce+consume; stranger has no
 * grants; ops has subject admin, the superuser).
 *
 * <pre>
 *   java -cp ... lakegate.interop.OAuth pulsar+ssl://host:port https://host:port CERTS_DIR ISSUER_URL KEYS_DIR
 * </pre>
 *
 * Prints PASS/FAIL per scenario and {@code java-oauth: N/M scenarios
 * passed}; exits 1 on any failure.
 */
public final class OAuth {
    interface Body {
        void run() throws Exception;
    }

    static String url, https, certs, issuer, keys, run;

    public static void main(String[] args) throws Exception {
        url = args[0];
        https = args[1];
        certs = args[2];
        issuer = args[3];
        keys = args[4];
        run = Long.toString(System.currentTimeMillis() % 1_000_000_000L, 36);
        List<Object[]> all = new ArrayList<>();
        all.add(new Object[] {"oauth2-produce-consume", (Body) OAuth::produceConsume});
        all.add(new Object[] {"oauth2-role-without-grant-refused", (Body) OAuth::strangerRefused});
        all.add(new Object[] {"oauth2-other-audience-refused", (Body) OAuth::otherAudienceRefused});
        all.add(new Object[] {"oauth2-wrong-secret-refused", (Body) OAuth::wrongSecretRefused});
        all.add(new Object[] {"oauth2-admin", (Body) OAuth::admin});
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
        System.out.println("java-oauth: " + passed + "/" + all.size() + " scenarios passed");
        System.out.flush();
        Runtime.getRuntime().halt(passed == all.size() ? 0 : 1);
    }

    static Authentication oauth2(Path keyFile, String audience) throws Exception {
        return AuthenticationFactoryOAuth2.clientCredentials(new URL(issuer), keyFile.toUri().toURL(), audience);
    }

    static Authentication oauth2(String clientId, String audience) throws Exception {
        return oauth2(Path.of(keys, clientId + ".json"), audience);
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
        return "persistent://public/default/joauth-" + run + "-" + name;
    }

    static void produceConsume() throws Exception {
        try (PulsarClient c = client(oauth2("orders-app", "lakegate"), 10)) {
            String t = topic("orders");
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

    static void strangerRefused() throws Exception {
        try (PulsarClient c = client(oauth2("stranger", "lakegate"), 3)) {
            Secure.expectRefused(() -> c.newProducer().topic(topic("stranger")).create().close(), "Authorization", "authoriz");
        }
    }

    static void otherAudienceRefused() throws Exception {
        try (PulsarClient c = client(oauth2("orders-app", "another-service"), 3)) {
            Secure.expectRefused(() -> c.newProducer().topic(topic("aud")).create().close(),
                "Authentication", "authentic", "Timeout");
        }
    }

    static void wrongSecretRefused() throws Exception {
        String creds = Files.readString(Path.of(keys, "orders-app.json"));
        Path bad = Path.of(keys, "java-bad.json");
        Files.writeString(bad, creds.replaceAll("\"client_secret\":\"[^\"]*\"", "\"client_secret\":\"guess\""));
        try (PulsarClient c = client(oauth2(bad, "lakegate"), 3)) {
            Secure.expectRefused(() -> c.newProducer().topic(topic("bad")).create().close(),
                "Authentication", "authentic", "Timeout", "invalid_client");
        }
    }

    static PulsarAdmin admin(Authentication auth) throws Exception {
        return PulsarAdmin.builder().serviceHttpUrl(https)
            .tlsTrustCertsFilePath(Path.of(certs, "ca.pem").toString())
            .authentication(auth)
            .build();
    }

    static void admin() throws Exception {
        try (PulsarAdmin a = admin(oauth2("ops", "lakegate"))) {
            Map<String, Set<AuthAction>> perms = a.namespaces().getPermissions("public/default");
            if (!perms.containsKey("orders")) {
                throw new AssertionError("permissions " + perms);
            }
        }
        try (PulsarAdmin a = admin(oauth2("orders-app", "lakegate"))) {
            try {
                a.tenants().getTenants();
                throw new AssertionError("a non-superuser listed tenants");
            } catch (PulsarAdminException.NotAuthorizedException e) {
                // 403: authenticated as orders, not authorized
            }
        }
        try (PulsarAdmin a = admin(oauth2("orders-app", "another-service"))) {
            try {
                a.tenants().getTenants();
                throw new AssertionError("a token for another audience was accepted");
            } catch (PulsarAdminException e) {
                if (e.getStatusCode() != 401) {
                    throw new AssertionError("token for another audience: HTTP " + e.getStatusCode() + ", want 401");
                }
            }
        }
    }
}
