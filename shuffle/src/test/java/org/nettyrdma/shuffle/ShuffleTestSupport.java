package org.nettyrdma.shuffle;

import org.junit.jupiter.api.Assumptions;
import org.nettyrdma.channel.RdmaIoHandlerConfig;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * Where the shuffle tests run and what they share. By default on the emulated provider on 127.0.0.1 at full size;
 * the same system properties as the transport's tests move them (shuffle/src/test/vm/shuffle.sh sets them in the VM):
 * {@code org.nettyrdma.test.provider} ({@code emulated} or {@code native}), {@code org.nettyrdma.test.address} and
 * {@code org.nettyrdma.test.scale} (0 < scale <= 1: map outputs and the largest block times the scale). The generated
 * shuffles are written once per JVM (to a temporary directory removed at exit) and shared by the test classes.
 * Across two hosts (vm/two-host): {@code org.nettyrdma.test.remote.port} says that one shuffle service already runs at
 * the address under test and that port, serving every executor ({@link ShuffleServices}), and
 * {@code org.nettyrdma.test.shuffle.dir} where to write the shuffles: a directory the service reads at the same path.
 */
final class ShuffleTestSupport {
    static final String PROVIDER_PROPERTY = "org.nettyrdma.test.provider";
    static final String ADDRESS_PROPERTY = "org.nettyrdma.test.address";
    static final String SCALE_PROPERTY = "org.nettyrdma.test.scale";
    static final String REMOTE_PORT_PROPERTY = "org.nettyrdma.test.remote.port";
    static final String DIR_PROPERTY = "org.nettyrdma.test.shuffle.dir";
    static final String APP_ID = "app-20261201000000-0001";
    static final String SECRET = "shuffle-test-secret";

    private static final Map<String, GeneratedShuffle> SHUFFLES = new HashMap<>();
    private static File root;
    private static TlsStores tls;

    private ShuffleTestSupport() {
    }

    static String provider() {
        return System.getProperty(PROVIDER_PROPERTY, RdmaIoHandlerConfig.PROVIDER_EMULATED);
    }

    static boolean isNative() {
        return RdmaIoHandlerConfig.PROVIDER_NATIVE.equals(provider());
    }

    static String address() {
        return System.getProperty(ADDRESS_PROPERTY, "127.0.0.1");
    }

    static InetSocketAddress anyPort() {
        return new InetSocketAddress(address(), 0);
    }

    /** The port of a shuffle service that already runs at {@link #address()} (another host), or -1: none. */
    static int remotePort() {
        String p = System.getProperty(REMOTE_PORT_PROPERTY, "");
        if (p.isEmpty()) {
            return -1;
        }
        int port = Integer.parseInt(p);
        if (port < 1 || port > 65535) {
            throw new IllegalArgumentException(REMOTE_PORT_PROPERTY + "=" + p + " (expected a port, 1 to 65535)");
        }
        if (System.getProperty(DIR_PROPERTY, "").isEmpty()) {
            throw new IllegalStateException(REMOTE_PORT_PROPERTY + " is set but " + DIR_PROPERTY + " is not: the"
                    + " remote service reads the shuffle's files at the paths this JVM registers, so set it to a"
                    + " directory both hosts mount at the same path");
        }
        return port;
    }

    /** Skips the test, saying why, when the service is another host's: {@code needs} is what it needs its own for. */
    static void assumeOwnServices(String needs) {
        Assumptions.assumeTrue(remotePort() < 0, () -> "needs services of its own (" + needs + "), and the shuffle"
                + " service runs on another host (" + REMOTE_PORT_PROPERTY + "=" + remotePort() + ")");
    }

    static double scale() {
        double scale = Double.parseDouble(System.getProperty(SCALE_PROPERTY, "1"));
        if (!(scale > 0 && scale <= 1)) {
            throw new IllegalArgumentException(SCALE_PROPERTY + "=" + scale + " (expected 0 < scale <= 1)");
        }
        return scale;
    }

    /** RDMA on the provider under test, event loops that block at once when idle (no busy polling). */
    static ShuffleTransport rdma() {
        return ShuffleTransport.rdma(new RdmaIoHandlerConfig().setProvider(provider()).setBusyPollNanos(0));
    }

    /**
     * The shuffle at the scale under test: 200 map outputs x 50 reduce partitions, blocks from 1 KiB to 8 MiB
     * (about 240 MB at full size; the scale shrinks the map outputs and the largest block).
     */
    static ShuffleSpec standardSpec() {
        ShuffleSpec full = ShuffleSpec.standard(12);
        return new ShuffleSpec(0, Math.max(4, (int) Math.round(full.maps() * scale())), full.reduces(),
                full.minBlock(), Math.max(256 << 10, (int) (full.maxBlock() * scale())), full.largeOneIn(),
                full.seed());
    }

    /** A smaller shuffle for the slower variants (encryption): 40 x 20 blocks up to 2 MiB, at the scale under test. */
    static ShuffleSpec smallSpec() {
        return new ShuffleSpec(1, Math.max(4, (int) Math.round(40 * scale())), 20, 1024,
                Math.max(256 << 10, (int) ((2 << 20) * scale())), 50, 34);
    }

    /** {@code spec} written once per JVM, spread over {@code executors}. */
    static synchronized GeneratedShuffle shuffle(ShuffleSpec spec, int executors) {
        String key = spec + "/" + spec.shuffleId() + "/" + executors;
        return SHUFFLES.computeIfAbsent(key, k -> {
            try {
                return GeneratedShuffle.write(new File(root(), "shuffle-" + SHUFFLES.size()), spec, executors);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        });
    }

    /** A key store and trust store for {@code spark.ssl.rpc.*}, made once per JVM with the JDK's keytool. */
    static synchronized TlsStores tls() {
        if (tls == null) {
            tls = TlsStores.create(new File(root(), "tls"));
        }
        return tls;
    }

    /** The settings of {@code security}, with the TLS stores when it is TLS. */
    static SparkNetworkConf conf(Security security) {
        SparkNetworkConf conf = SparkNetworkConf.of(security);
        if (security == Security.TLS) {
            TlsStores stores = tls();
            conf.tls(stores.keyStore(), stores.trustStore(), stores.password());
        }
        return conf;
    }

    private static File root() {
        if (root == null) {
            try {
                String dir = System.getProperty(DIR_PROPERTY, "");
                root = (dir.isEmpty() ? Files.createTempDirectory("netty-rdma-shuffle")
                        : Files.createTempDirectory(Paths.get(dir), "netty-rdma-shuffle")).toFile();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            File dir = root;
            Runtime.getRuntime().addShutdownHook(new Thread(() -> delete(dir)));
        }
        return root;
    }

    private static void delete(File dir) {
        try (Stream<java.nio.file.Path> paths = Files.walk(dir.toPath())) {
            paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException ignored) {
            // best effort, at exit
        }
    }

    /** A PKCS12 key store with a self-signed certificate for localhost, and a trust store with the certificate. */
    record TlsStores(File keyStore, File trustStore, String password) {
        static TlsStores create(File dir) {
            String password = "shuffle-test";
            File keyStore = new File(dir, "server.p12");
            File cert = new File(dir, "server.cer");
            File trustStore = new File(dir, "trust.p12");
            try {
                Files.createDirectories(dir.toPath());
                keytool("-genkeypair", "-alias", "shuffle", "-keyalg", "EC", "-groupname", "secp256r1",
                        "-dname", "CN=localhost", "-validity", "2", "-storetype", "PKCS12",
                        "-keystore", keyStore.getPath(), "-storepass", password, "-keypass", password);
                keytool("-exportcert", "-alias", "shuffle", "-keystore", keyStore.getPath(), "-storepass", password,
                        "-file", cert.getPath());
                keytool("-importcert", "-noprompt", "-alias", "shuffle", "-file", cert.getPath(), "-storetype",
                        "PKCS12", "-keystore", trustStore.getPath(), "-storepass", password);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            return new TlsStores(keyStore, trustStore, password);
        }

        private static void keytool(String... args) throws IOException {
            String[] command = new String[args.length + 1];
            command[0] = new File(System.getProperty("java.home"), "bin/keytool").getPath();
            System.arraycopy(args, 0, command, 1, args.length);
            Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
            try {
                String out = new String(p.getInputStream().readAllBytes());
                if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
                    throw new IOException("keytool " + String.join(" ", args) + ": " + out);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("interrupted", e);
            }
        }
    }
}
