package lakegate.interop;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Reader;

/**
 * One scenario's context: the shared client and admin, unique topic names,
 * and the producers/consumers/readers it opened (closed after the scenario,
 * pass or fail).
 */
final class Ctx {
    /** How long a receive that must succeed may wait. */
    static final long RECEIVE_SECONDS = 10;

    final PulsarClient client;
    final PulsarAdmin admin;
    final String serviceUrl;
    final String runId;
    final String scenario;
    private final TxnClient txn;
    private final List<AutoCloseable> open = new ArrayList<>();
    /** Observations a passing scenario reports on its PASS line. */
    final List<String> notes = java.util.Collections.synchronizedList(new ArrayList<>());

    Ctx(PulsarClient client, PulsarAdmin admin, String serviceUrl, String runId, String scenario, TxnClient txn) {
        this.client = client;
        this.admin = admin;
        this.serviceUrl = serviceUrl;
        this.runId = runId;
        this.scenario = scenario;
        this.txn = txn;
    }

    /**
     * The run's client with transactions enabled (built on the first call:
     * building it connects to every transaction coordinator).
     */
    PulsarClient txnClient() throws Exception {
        return txn.get();
    }

    /**
     * The run's shared client with {@code enableTransaction(true)}, built
     * lazily so that runs without a transaction scenario never open the
     * coordinators. Closed by Main at the end of the run.
     */
    static final class TxnClient implements AutoCloseable {
        private final String serviceUrl;
        private PulsarClient client;

        TxnClient(String serviceUrl) {
            this.serviceUrl = serviceUrl;
        }

        synchronized PulsarClient get() throws Exception {
            if (client == null) {
                client = PulsarClient.builder()
                    .serviceUrl(serviceUrl)
                    .enableTransaction(true)
                    .operationTimeout(30, TimeUnit.SECONDS)
                    .connectionTimeout(10, TimeUnit.SECONDS)
                    .build();
            }
            return client;
        }

        @Override
        public synchronized void close() throws Exception {
            if (client != null) {
                client.close();
            }
        }
    }

    /** A topic name unique to this run and scenario. */
    String topic(String suffix) {
        return "persistent://public/default/" + local(suffix);
    }

    /** The local part of {@link #topic}. */
    String local(String suffix) {
        String s = "java-" + scenario + (suffix.isEmpty() ? "" : "-" + suffix) + "-" + runId;
        return s.replaceAll("[^A-Za-z0-9._-]", "-");
    }

    <T> Producer<T> keep(Producer<T> p) {
        synchronized (open) {
            open.add(p);
        }
        return p;
    }

    <T> Consumer<T> keep(Consumer<T> c) {
        synchronized (open) {
            open.add(c);
        }
        return c;
    }

    /** Closes c after the scenario (a client of its own). */
    PulsarClient keep(PulsarClient c) {
        synchronized (open) {
            open.add(c);
        }
        return c;
    }

    <T> Reader<T> keep(Reader<T> r) {
        synchronized (open) {
            open.add(r);
        }
        return r;
    }

    void closeAll() {
        List<AutoCloseable> l;
        synchronized (open) {
            l = new ArrayList<>(open);
            open.clear();
        }
        for (int i = l.size() - 1; i >= 0; i--) {
            try {
                l.get(i).close();
            } catch (Exception ignored) {
                // already closed, or the scenario broke it: nothing to report
            }
        }
    }

    static void check(boolean ok, String fmt, Object... args) {
        if (!ok) {
            throw new Main.Check(String.format(fmt, args));
        }
    }

    /** Receives one message or fails. */
    static <T> Message<T> must(Consumer<T> c, String what) throws Exception {
        Message<T> m = c.receive((int) RECEIVE_SECONDS, TimeUnit.SECONDS);
        check(m != null, "%s: no message within %d s", what, RECEIVE_SECONDS);
        return m;
    }

    /** Reads one message or fails. */
    static <T> Message<T> must(Reader<T> r, String what) throws Exception {
        Message<T> m = r.readNext((int) RECEIVE_SECONDS, TimeUnit.SECONDS);
        check(m != null, "%s: no message within %d s", what, RECEIVE_SECONDS);
        return m;
    }

    /** Expects no message for ms milliseconds. */
    static <T> void none(Consumer<T> c, long ms, String what) throws Exception {
        Message<T> m = c.receive((int) ms, TimeUnit.MILLISECONDS);
        check(m == null, "%s: unexpected message %s", what, m == null ? "" : str(m));
    }

    static String str(Message<?> m) {
        return "'" + new String(m.getData(), java.nio.charset.StandardCharsets.UTF_8) + "' id " + m.getMessageId();
    }

    static String text(Message<?> m) {
        return new String(m.getData(), java.nio.charset.StandardCharsets.UTF_8);
    }
}
