package org.nettyrdma.shuffle;

import java.io.IOException;
import java.net.InetSocketAddress;

/**
 * A shuffle service in a process of its own: Spark's {@code ExternalBlockHandler} on a {@link BlockServer}.
 *
 * <pre>
 * java -cp ... org.nettyrdma.shuffle.BlockServerMain TRANSPORT HOST PORT SECURITY [SECRET] [key=value ...]
 *   TRANSPORT  rdma-native, rdma-emulated, epoll or nio
 *   SECURITY   NONE, TLS, SASL, SASL_ENCRYPTION or AES_ENCRYPTION; SECRET follows the three that authenticate
 *   key=value  more of Spark's settings (spark.ssl.rpc.keyStore=..., spark.shuffle.io.serverThreads=...)
 * </pre>
 *
 * Prints {@code LISTENING host:port} once it accepts connections; executors then register themselves with
 * {@code RegisterExecutor} RPCs. It runs until its standard input ends (so that it ends with the process that started
 * it) or it is killed.
 */
public final class BlockServerMain {
    private BlockServerMain() {
    }

    public static void main(String[] args) throws IOException, InterruptedException {
        if (args.length < 4) {
            System.err.println("usage: BlockServerMain TRANSPORT HOST PORT SECURITY [SECRET] [key=value ...]");
            System.exit(2);
        }
        ShuffleTransport transport = ShuffleTransport.byName(args[0]);
        Security security = Security.valueOf(args[3]);
        int next = 4;
        SharedSecret secret = null;
        if (security.authenticates()) {
            secret = new SharedSecret(args[next++]);
        }
        SparkNetworkConf conf = SparkNetworkConf.of(security);
        for (int i = next; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            conf.set(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        int threads = Integer.parseInt(conf.build().get("spark.shuffle.io.serverThreads", "2"));
        try (BlockServer server = BlockServer.start(conf.build(), secret, transport, Math.max(1, threads),
                new InetSocketAddress(args[1], Integer.parseInt(args[2])))) {
            System.out.println("LISTENING " + server.address().getAddress().getHostAddress() + ':'
                    + server.address().getPort());
            System.out.flush();
            while (System.in.read() >= 0) {
                // runs until standard input ends
            }
        }
    }
}
