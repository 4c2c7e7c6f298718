package lakegate.bench;

import java.io.FileInputStream;
import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;

import org.apache.pulsar.testclient.CmdBase;
import org.apache.pulsar.testclient.PerformanceConsumer;
import org.apache.pulsar.testclient.PerformanceProducer;
import org.apache.pulsar.testclient.PerformanceReader;
import org.apache.pulsar.testclient.PulsarPerfTestTool;

import picocli.CommandLine;

/**
 * Runs Pulsar's own load tool (pulsar-perf, PulsarPerfTestTool) with only
 * its client-side commands: produce, consume and read. Arguments are the
 * stock tool's: {@code CONF_FILE_PATH command [options] topic...}.
 *
 * <p>The stock main instantiates every command, and the broker-side ones
 * (managed-ledger writer, load simulator, broker monitor, websocket
 * producer) need the broker's jars, which bench/java/pom.xml leaves out.
 * This main does what the stock one does (conf file as picocli defaults,
 * commands registered, one executed) for the client-side commands only;
 * their measurement code runs untouched. Package-private members of the
 * tool are reached by reflection.
 */
public final class PerfLauncher extends PulsarPerfTestTool {
    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.out.println("Usage: PerfLauncher CONF_FILE_PATH [command] [command options]");
            System.exit(2);
        }
        PerfLauncher tool = new PerfLauncher();
        Properties props = new Properties(System.getProperties());
        try (FileInputStream in = new FileInputStream(args[0])) {
            props.load(in);
        }
        Class<?> provider = Class.forName("org.apache.pulsar.testclient.PulsarPerfTestPropertiesProvider");
        Method create = provider.getDeclaredMethod("create", Properties.class);
        create.setAccessible(true);
        tool.commander.setDefaultValueProvider((CommandLine.IDefaultValueProvider) create.invoke(null, props));

        Method commanderOf = CmdBase.class.getDeclaredMethod("getCommander");
        commanderOf.setAccessible(true);
        Map<String, Class<? extends CmdBase>> commands = new LinkedHashMap<>();
        commands.put("produce", PerformanceProducer.class);
        commands.put("consume", PerformanceConsumer.class);
        commands.put("read", PerformanceReader.class);
        for (Map.Entry<String, Class<? extends CmdBase>> e : commands.entrySet()) {
            Constructor<? extends CmdBase> c = e.getValue().getDeclaredConstructor();
            c.setAccessible(true);
            tool.commander.addSubcommand(e.getKey(), (CommandLine) commanderOf.invoke(c.newInstance()));
        }
        System.exit(tool.run(Arrays.copyOfRange(args, 1, args.length)) ? 0 : 1);
    }
}
