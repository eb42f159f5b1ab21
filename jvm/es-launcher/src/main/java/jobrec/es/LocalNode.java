package jobrec.es;

import org.elasticsearch.common.logging.LogConfigurator;
import org.elasticsearch.common.settings.Settings;
import org.elasticsearch.env.Environment;
import org.elasticsearch.node.InternalSettingsPreparer;
import org.elasticsearch.node.Node;
import org.elasticsearch.plugins.PluginsLoader;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

/**
 * Starts one real Elasticsearch node from the server jars that Elastic publishes to Maven Central.
 *
 * <p>The official distribution is not on Maven Central, and its CLI refuses to run as root (CI runs
 * as root). This launcher does what the distribution's bootstrap does for a single development
 * node, without the bootstrap checks: it prepares the environment from settings, loads the
 * modules found under {@code <home>/modules} (transport-netty4 for HTTP, jobrec-root for
 * {@code GET /}) and starts the {@link Node}. The server must be on the module path, as in the
 * distribution, so that module plugins can be layered on it.
 *
 * <p>Usage: {@code LocalNode <home> <workdir> <http-port> [key=value ...]}; extra arguments are
 * node settings. Prints {@code jobrec-es-started port=<port>} once the node accepts requests.
 */
public final class LocalNode {
    private LocalNode() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: LocalNode <home> <workdir> <http-port> [setting=value ...]");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        Path work = Path.of(args[1]).toAbsolutePath();
        Path config = Files.createDirectories(work.resolve("config"));
        Settings.Builder settings = Settings.builder()
            .put("path.home", home.toString())
            .put("path.data", work.resolve("data").toString())
            .put("path.logs", work.resolve("logs").toString())
            .put("cluster.name", "jobrec-local")
            .put("node.name", "jobrec-local-0")
            .put("network.host", "127.0.0.1")
            .put("http.port", args[2])
            .put("transport.port", "0")
            .put("discovery.type", "single-node")
            .put("action.destructive_requires_name", "false");
        for (int i = 3; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq <= 0) {
                System.err.println("not a setting (key=value): " + args[i]);
                System.exit(2);
            }
            settings.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        Settings nodeSettings = settings.build();
        LogConfigurator.configureWithoutConfig(nodeSettings);
        Environment env = InternalSettingsPreparer.prepareEnvironment(nodeSettings, Map.of(), config, () -> "jobrec-local-0");
        PluginsLoader plugins = PluginsLoader.createPluginsLoader(
            PluginsLoader.loadModulesBundles(env.modulesDir()),
            PluginsLoader.loadPluginsBundles(env.pluginsDir()),
            Map.of()
        );
        Node node = new Node(env, plugins);
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                node.close();
                node.awaitClose(30, java.util.concurrent.TimeUnit.SECONDS);
            } catch (Exception e) {
                System.err.println("error while stopping the node: " + e);
            } finally {
                stopped.countDown();
            }
        }, "jobrec-es-shutdown"));
        node.start();
        System.out.println("jobrec-es-started port=" + args[2]);
        System.out.flush();
        stopped.await();
    }
}
