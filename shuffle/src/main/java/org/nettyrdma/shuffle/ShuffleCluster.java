package org.nettyrdma.shuffle;

import org.apache.spark.network.client.TransportClient;
import org.apache.spark.network.sasl.SecretKeyHolder;
import org.apache.spark.network.util.TransportConf;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The shuffle services of a {@link GeneratedShuffle}, one per executor, and a reducer's side of them: the executors
 * registered with their services, a {@link BlockClientFactory} to connect, and whole-shuffle fetches
 * ({@link ShuffleFetcher}). The services run in this JVM ({@link #inProcess}) or elsewhere ({@link #remote}: another
 * process, given their addresses).
 */
public final class ShuffleCluster implements AutoCloseable {
    private final TransportConf conf;
    private final String appId;
    private final GeneratedShuffle shuffle;
    private final List<BlockServer> servers;
    private final List<InetSocketAddress> addresses;
    private final BlockClientFactory clients;

    private ShuffleCluster(TransportConf conf, String appId, SecretKeyHolder secret, ShuffleTransport transport,
                           GeneratedShuffle shuffle, List<BlockServer> servers, List<InetSocketAddress> addresses,
                           int clientThreads) {
        this.conf = conf;
        this.appId = appId;
        this.shuffle = shuffle;
        this.servers = servers;
        this.addresses = addresses;
        this.clients = new BlockClientFactory(conf, appId, secret, transport, clientThreads);
    }

    /**
     * Starts a {@link BlockServer} per executor of {@code shuffle} on {@code host} (any port) with
     * {@code serverThreads} event loops each, and registers the executors.
     */
    public static ShuffleCluster inProcess(TransportConf conf, String appId, SecretKeyHolder secret,
                                           ShuffleTransport transport, GeneratedShuffle shuffle, String host,
                                           int serverThreads, int clientThreads)
            throws IOException, InterruptedException {
        List<BlockServer> servers = new ArrayList<>();
        List<InetSocketAddress> addresses = new ArrayList<>();
        try {
            for (int e = 0; e < shuffle.executors().size(); e++) {
                BlockServer server = BlockServer.start(conf, secret, transport, serverThreads,
                        new InetSocketAddress(host, 0));
                servers.add(server);
                addresses.add(server.address());
            }
        } catch (IOException | InterruptedException | RuntimeException e) {
            servers.forEach(BlockServer::close);
            throw e;
        }
        return started(new ShuffleCluster(conf, appId, secret, transport, shuffle, List.copyOf(servers),
                List.copyOf(addresses), clientThreads));
    }

    /** Shuffle services already running at {@code addresses}, one per executor of {@code shuffle}, in order. */
    public static ShuffleCluster remote(TransportConf conf, String appId, SecretKeyHolder secret,
                                        ShuffleTransport transport, GeneratedShuffle shuffle,
                                        List<InetSocketAddress> addresses, int clientThreads)
            throws IOException, InterruptedException {
        if (addresses.size() != shuffle.executors().size()) {
            throw new IllegalArgumentException(addresses.size() + " services for " + shuffle.executors().size()
                    + " executors");
        }
        return started(new ShuffleCluster(conf, appId, secret, transport, shuffle, List.of(),
                List.copyOf(addresses), clientThreads));
    }

    private static ShuffleCluster started(ShuffleCluster cluster) throws IOException, InterruptedException {
        try {
            cluster.registerExecutors();
            return cluster;
        } catch (IOException | InterruptedException | RuntimeException e) {
            cluster.close();
            throw e;
        }
    }

    private void registerExecutors() throws IOException, InterruptedException {
        for (int e = 0; e < addresses.size(); e++) {
            TransportClient client = clients.connect(addresses.get(e));
            try {
                ExecutorRegistration.register(client, appId, shuffle.executors().get(e), conf.connectionTimeoutMs());
            } finally {
                client.close();
            }
        }
    }

    /** The in-process servers, one per executor (none for {@link #remote}). */
    public List<BlockServer> servers() {
        return servers;
    }

    public GeneratedShuffle shuffle() {
        return shuffle;
    }

    /** {@code perExecutor} new connections to each executor's service. */
    public List<List<TransportClient>> connect(int perExecutor) throws IOException, InterruptedException {
        List<List<TransportClient>> connections = new ArrayList<>();
        try {
            for (InetSocketAddress address : addresses) {
                List<TransportClient> toExecutor = new ArrayList<>();
                connections.add(toExecutor);
                for (int i = 0; i < perExecutor; i++) {
                    toExecutor.add(clients.connect(address));
                }
            }
        } catch (IOException | InterruptedException | RuntimeException e) {
            closeAll(connections);
            throw e;
        }
        return connections;
    }

    /** Starts fetching every block on {@code connections} (from {@link #connect}). */
    public ShuffleFetcher.Run startFetch(List<List<TransportClient>> connections, int blocksPerRequest,
                                         int requestsInFlight) {
        return new ShuffleFetcher(conf, appId, shuffle.manifest(), blocksPerRequest, requestsInFlight)
                .start(shuffle.execIds(), connections);
    }

    /**
     * Fetches every block on {@code perExecutor} new connections to each service, {@code requestsInFlight} requests
     * of {@code blocksPerRequest} blocks under way on each, within {@code timeoutSeconds}; closes the connections.
     */
    public FetchReport fetch(int perExecutor, int blocksPerRequest, int requestsInFlight, long timeoutSeconds)
            throws IOException, InterruptedException {
        List<List<TransportClient>> connections = connect(perExecutor);
        try {
            return startFetch(connections, blocksPerRequest, requestsInFlight).await(timeoutSeconds, TimeUnit.SECONDS);
        } finally {
            closeAll(connections);
        }
    }

    public static void closeAll(List<List<TransportClient>> connections) {
        connections.forEach(list -> list.forEach(TransportClient::close));
    }

    @Override
    public void close() {
        clients.close();
        servers.forEach(BlockServer::close);
    }
}
