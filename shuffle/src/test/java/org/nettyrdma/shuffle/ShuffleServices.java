package org.nettyrdma.shuffle;

import org.apache.spark.network.util.TransportConf;
import org.junit.jupiter.api.Assumptions;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * The shuffle services of a test over RDMA, one per executor of its shuffle, and the reducer's {@link ShuffleCluster}
 * with them. On the emulated provider (in-process only) the services run in the test's JVM; on the native provider
 * {@link #inProcesses} runs each in a process of its own ({@link ServerProcess}), as services run beside executors
 * (a JVM's start costs some 10 s in the VM, so the tests that need no other process use {@link #start}). With
 * {@link ShuffleTestSupport#remotePort()} set, {@link #start} uses the one service that runs on another host for every
 * executor (it runs without security: the secured cases are skipped), and {@link #inProcesses} skips its test.
 */
final class ShuffleServices implements AutoCloseable {
    private final ShuffleCluster cluster;
    private final List<ServerProcess> processes;

    private ShuffleServices(ShuffleCluster cluster, List<ServerProcess> processes) {
        this.cluster = cluster;
        this.processes = processes;
    }

    /** Services in this JVM. */
    static ShuffleServices start(Security security, GeneratedShuffle shuffle) throws Exception {
        return start(security, shuffle, false);
    }

    /** Services in processes of their own on the native provider; in this JVM on the emulated one. */
    static ShuffleServices inProcesses(Security security, GeneratedShuffle shuffle) throws Exception {
        return start(security, shuffle, true);
    }

    private static ShuffleServices start(Security security, GeneratedShuffle shuffle, boolean separate)
            throws Exception {
        if (ShuffleTestSupport.remotePort() > 0) {
            return remote(security, shuffle, separate);
        }
        SparkNetworkConf settings = ShuffleTestSupport.conf(security);
        TransportConf conf = settings.build();
        SharedSecret secret = security.authenticates() ? new SharedSecret(ShuffleTestSupport.SECRET) : null;
        if (!separate || !ShuffleTestSupport.isNative()) {
            return new ShuffleServices(ShuffleCluster.inProcess(conf, ShuffleTestSupport.APP_ID, secret,
                    ShuffleTestSupport.rdma(), shuffle, ShuffleTestSupport.address(), 2, 2), List.of());
        }
        List<ServerProcess> processes = new ArrayList<>();
        try {
            List<String> args = new ArrayList<>();
            args.add(security.name());
            if (secret != null) {
                args.add(ShuffleTestSupport.SECRET);
            }
            for (Map.Entry<String, String> e : settings.settings().entrySet()) {
                args.add(e.getKey() + '=' + e.getValue());
            }
            List<ServerProcess.Launched> launched = new ArrayList<>();
            try {
                for (int i = 0; i < shuffle.executors().size(); i++) {
                    launched.add(ServerProcess.launch("rdma-native", ShuffleTestSupport.address(), args));
                }
                for (ServerProcess.Launched l : launched) {
                    processes.add(l.listening());
                }
            } finally {
                for (int i = processes.size(); i < launched.size(); i++) {
                    launched.get(i).kill();
                }
            }
            List<InetSocketAddress> addresses = new ArrayList<>();
            for (ServerProcess p : processes) {
                addresses.add(p.address());
            }
            return new ShuffleServices(ShuffleCluster.remote(conf, ShuffleTestSupport.APP_ID, secret,
                    ShuffleTestSupport.rdma(), shuffle, addresses, 2), processes);
        } catch (Exception e) {
            for (ServerProcess p : processes) {
                p.close();
            }
            throw e;
        }
    }

    /**
     * The service of another host (vm/two-host's host 1: {@code BlockServerMain} without security) at the address
     * under test, for every executor of {@code shuffle}: the executors register there with the paths of their files,
     * which that host reads at the same paths ({@code org.nettyrdma.test.shuffle.dir}).
     */
    private static ShuffleServices remote(Security security, GeneratedShuffle shuffle, boolean separate)
            throws Exception {
        if (separate) {
            ShuffleTestSupport.assumeOwnServices("a process per executor, which it may kill");
        }
        InetSocketAddress at = new InetSocketAddress(ShuffleTestSupport.address(), ShuffleTestSupport.remotePort());
        Assumptions.assumeTrue(security == Security.NONE, () -> security + ": the shuffle service at " + at
                + " on another host runs without security (Security.NONE)");
        TransportConf conf = ShuffleTestSupport.conf(security).build();
        return new ShuffleServices(ShuffleCluster.remote(conf, ShuffleTestSupport.APP_ID, null,
                ShuffleTestSupport.rdma(), shuffle, Collections.nCopies(shuffle.executors().size(), at), 2), List.of());
    }

    ShuffleCluster cluster() {
        return cluster;
    }

    /**
     * The service of executor {@code executor} goes away with fetches under way: its process killed (SIGKILL) on the
     * native provider; in-process, its listener and connections closed at once.
     */
    void kill(int executor) throws InterruptedException {
        if (processes.isEmpty()) {
            cluster.servers().get(executor).dropConnections();
        } else {
            processes.get(executor).kill();
        }
    }

    @Override
    public void close() throws Exception {
        cluster.close();
        for (ServerProcess p : processes) {
            p.close();
        }
    }
}
