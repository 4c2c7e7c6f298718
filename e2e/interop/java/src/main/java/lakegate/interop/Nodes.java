package lakegate.interop;

import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.FileReader;
import java.io.OutputStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

/**
 * Kills and restarts lakegate nodes for a scenario, through run.sh.
 *
 * <p>run.sh (with ../nodes.sh) owns the lakegate processes; it makes two
 * FIFOs and names them in the system properties {@code lakegate.ctl.req}
 * and {@code lakegate.ctl.rep}, keeps both open, and serves one request at
 * a time while the runner lives. A request is one line:
 * <ul>
 *   <li>{@code kill9 I}: SIGKILL node I and wait until it is gone;</li>
 *   <li>{@code restart I}: start node I again on its data directory and on
 *       the same Pulsar and HTTP addresses (the clients' service URL and
 *       the admin URL stay valid), and wait for its ready line and
 *       {@code /readyz} (at most 60 s each).</li>
 * </ul>
 * The answer is one line, {@code ok …} or {@code error …}. Node I is the
 * I-th host of the service URL (run.sh lists the nodes in their order;
 * one node: the standalone). Requests are serialized here; each waits for
 * its answer at most the given time.
 */
final class Nodes {
    private static final ExecutorService READER = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "nodes-ctl");
        t.setDaemon(true);
        return t;
    });

    private Nodes() {}

    /** Whether the runner was started with node control (run.sh always does). */
    static boolean available() {
        return System.getProperty("lakegate.ctl.req") != null && System.getProperty("lakegate.ctl.rep") != null;
    }

    /** Sends one request and returns its answer ("ok …"); fails on "error …" or after timeoutSeconds. */
    static synchronized String call(String request, long timeoutSeconds) throws Exception {
        if (!available()) {
            throw new Main.Skip("no node control: run.sh passes -Dlakegate.ctl.req/-Dlakegate.ctl.rep");
        }
        try (OutputStream o = new FileOutputStream(System.getProperty("lakegate.ctl.req"))) {
            o.write((request + "\n").getBytes(StandardCharsets.UTF_8));
        }
        CompletableFuture<String> answer = CompletableFuture.supplyAsync(() -> {
            try (BufferedReader r = new BufferedReader(new FileReader(System.getProperty("lakegate.ctl.rep"),
                    StandardCharsets.UTF_8))) {
                return r.readLine();
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }, READER);
        String a = answer.get(timeoutSeconds, TimeUnit.SECONDS);
        Ctx.check(a != null && a.startsWith("ok"), "node control: %s answered %s", request, a);
        return a;
    }

    /** The hosts of a service URL, in order ("pulsar://h1:p1,h2:p2" → [h1:p1, h2:p2]). */
    static List<String> hosts(String serviceUrl) {
        String rest = serviceUrl.substring(serviceUrl.indexOf("://") + 3);
        List<String> l = new ArrayList<>();
        for (String h : rest.split(",")) {
            l.add(h.replaceAll("/.*$", ""));
        }
        return l;
    }

    /** The index of the node a broker URL (a lookup's answer) names, in the service URL. */
    static int indexOf(String serviceUrl, String brokerUrl) {
        URI u = URI.create(brokerUrl);
        String hp = u.getHost() + ":" + u.getPort();
        int i = hosts(serviceUrl).indexOf(hp);
        Ctx.check(i >= 0, "broker %s is not in the service URL %s", brokerUrl, serviceUrl);
        return i;
    }
}
