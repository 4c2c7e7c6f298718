package lakegate.interop;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Pattern;

import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.api.PulsarClient;

/**
 * The Java interop scenario runner: the unmodified Apache Pulsar Java client
 * and admin client against a running lakegate.
 *
 * <pre>
 *   java -cp ... lakegate.interop.Main pulsar://127.0.0.1:PORT http://127.0.0.1:PORT [name-regex]
 * </pre>
 *
 * Prints one line per scenario, {@code PASS name}, {@code FAIL name: reason},
 * {@code SKIP name: reason} or {@code KNOWN-UNSUPPORTED name: reason}, then
 * {@code java: N/M scenarios passed} and {@code java: N passed, F failed,
 * S skipped} (S counts skips and known-unsupported ones; neither is ever a
 * pass). Exits 1 if any scenario failed or was skipped, 2 on bad arguments;
 * a known-unsupported scenario that fails as expected does not fail the run.
 * Each scenario uses its own topics (suffixed with a per-run id) and has a
 * deadline; scenarios run one after another on one shared client (and the
 * transaction scenarios on one shared client with transactions enabled,
 * built when the first of them asks for it).
 */
public final class Main {
    /** A scenario's deadline unless it names its own; past it the scenario fails. */
    static final long SCENARIO_TIMEOUT_SECONDS = 60;

    public static void main(String[] args) throws Exception {
        if (args.length < 2 || args.length > 3) {
            System.err.println("usage: Main pulsar://host:port http://host:port [scenario-name-regex]");
            System.exit(2);
        }
        String serviceUrl = args[0];
        String adminUrl = args[1];
        Pattern only = args.length == 3 ? Pattern.compile(args[2]) : null;

        List<Scenario> all = new ArrayList<>();
        Scenarios.register(all);
        TxnScenarios.register(all);
        int passed = 0, failed = 0, skipped = 0, known = 0;
        List<String> knownNames = new ArrayList<>();
        ExecutorService exec = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "scenario");
            t.setDaemon(true);
            return t;
        });
        String runId = Long.toString(System.currentTimeMillis() % 1_000_000_000L, 36);
        try (Ctx.TxnClient txnClient = new Ctx.TxnClient(serviceUrl);
             PulsarClient client = PulsarClient.builder()
                .serviceUrl(serviceUrl)
                .operationTimeout(30, TimeUnit.SECONDS)
                .connectionTimeout(10, TimeUnit.SECONDS)
                .build();
             PulsarAdmin admin = PulsarAdmin.builder()
                .serviceHttpUrl(adminUrl)
                .connectionTimeout(10, TimeUnit.SECONDS)
                .readTimeout(30, TimeUnit.SECONDS)
                .build()) {
            for (Scenario s : all) {
                if (only != null && !only.matcher(s.name()).find()) {
                    continue;
                }
                Ctx ctx = new Ctx(client, admin, serviceUrl, runId, s.name(), txnClient);
                long start = System.nanoTime();
                String outcome;
                Future<?> f = exec.submit(() -> {
                    s.body().run(ctx);
                    return null;
                });
                try {
                    f.get(s.timeoutSeconds(), TimeUnit.SECONDS);
                    if (s.knownUnsupported() != null) {
                        outcome = "FAIL " + s.name() + ": passed but is marked known-unsupported ("
                            + s.knownUnsupported() + "): remove the mark";
                        failed++;
                    } else {
                        outcome = "PASS " + s.name() + (ctx.notes.isEmpty() ? "" : " [" + String.join("; ", ctx.notes) + "]");
                        passed++;
                    }
                } catch (TimeoutException e) {
                    f.cancel(true);
                    outcome = "FAIL " + s.name() + ": no result within " + s.timeoutSeconds() + " s";
                    failed++;
                } catch (java.util.concurrent.ExecutionException e) {
                    Throwable c = e.getCause();
                    if (c instanceof Skip) {
                        outcome = "SKIP " + s.name() + ": " + c.getMessage();
                        skipped++;
                    } else if (s.knownUnsupported() != null) {
                        outcome = "KNOWN-UNSUPPORTED " + s.name() + ": " + s.knownUnsupported()
                            + " (fails as expected: " + describe(c) + ")";
                        known++;
                        knownNames.add(s.name());
                    } else {
                        outcome = "FAIL " + s.name() + ": " + describe(c);
                        failed++;
                    }
                } finally {
                    ctx.closeAll();
                }
                long ms = (System.nanoTime() - start) / 1_000_000;
                System.out.println(outcome + " (" + ms + " ms)");
                System.out.flush();
            }
        } finally {
            exec.shutdownNow();
        }
        int total = passed + failed + skipped + known;
        System.out.println("java: " + passed + "/" + total + " scenarios passed"
            + (known > 0 ? "; known unsupported (not passed): " + String.join(", ", knownNames) : ""));
        System.out.println("java: " + passed + " passed, " + failed + " failed, " + (skipped + known) + " skipped");
        if (total == 0) {
            // A filter that matches nothing (a renamed scenario) proves nothing.
            System.out.println("java: no scenario ran" + (only != null ? " (none matches " + only + ")" : ""));
        }
        System.out.flush();
        // Client threads (netty, timers) are not all daemons: exit explicitly.
        Runtime.getRuntime().halt(failed + skipped == 0 && total > 0 ? 0 : 1);
    }

    static String describe(Throwable t) {
        StringBuilder b = new StringBuilder();
        String sep = "";
        for (int depth = 0; t != null && depth < 4; depth++, t = t.getCause()) {
            b.append(sep).append(t instanceof Check ? "" : t.getClass().getSimpleName() + ": ")
                .append(String.valueOf(t.getMessage()).replace('\n', ' '));
            sep = " <- ";
            if (t instanceof Check) {
                break;
            }
        }
        return b.toString();
    }

    /**
     * A named scenario. knownUnsupported, when not null, says why lakegate
     * cannot pass it yet: it still runs, its failure is reported as
     * KNOWN-UNSUPPORTED (not passed, not failing the run), and a pass
     * fails the run so the mark gets removed. timeoutSeconds is its
     * deadline (SCENARIO_TIMEOUT_SECONDS unless it needs longer).
     */
    record Scenario(String name, Body body, String knownUnsupported, long timeoutSeconds) {
        Scenario(String name, Body body) {
            this(name, body, null, SCENARIO_TIMEOUT_SECONDS);
        }

        Scenario(String name, Body body, String knownUnsupported) {
            this(name, body, knownUnsupported, SCENARIO_TIMEOUT_SECONDS);
        }
    }

    /** A scenario's code; it throws to fail (or {@link Skip} to skip). */
    interface Body {
        void run(Ctx c) throws Exception;
    }

    /** A failed expectation. */
    static final class Check extends RuntimeException {
        Check(String msg) {
            super(msg);
        }
    }

    /** A scenario that could not run; never counted as passed. */
    static final class Skip extends RuntimeException {
        Skip(String msg) {
            super(msg);
        }
    }
}
