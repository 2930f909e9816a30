package org.nettyrdma.shuffle;

import org.apache.spark.network.buffer.ManagedBuffer;
import org.apache.spark.network.client.TransportClient;
import org.apache.spark.network.shuffle.BlockFetchingListener;
import org.apache.spark.network.shuffle.OneForOneBlockFetcher;
import org.apache.spark.network.util.TransportConf;

import java.io.IOException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Fetches every block of a shuffle as reducers do, with Spark's own fetch protocol: requests of
 * {@code blocksPerRequest} blocks, each a {@link OneForOneBlockFetcher} (a {@code FetchShuffleBlocks} RPC, then one
 * chunk fetch per block), on the connections to the executor that holds the blocks' map outputs, each connection
 * keeping {@code requestsInFlight} requests under way. Every delivered block is checked ({@link BlockVerifier}). A
 * request due on a connection that has closed is not sent: its blocks fail at once with an {@link IOException}.
 */
public final class ShuffleFetcher {
    private final TransportConf conf;
    private final String appId;
    private final ShuffleManifest manifest;
    private final int blocksPerRequest;
    private final int requestsInFlight;

    public ShuffleFetcher(TransportConf conf, String appId, ShuffleManifest manifest, int blocksPerRequest,
                          int requestsInFlight) {
        if (blocksPerRequest < 1 || requestsInFlight < 1) {
            throw new IllegalArgumentException(blocksPerRequest + " blocks per request, " + requestsInFlight
                    + " requests in flight");
        }
        this.conf = conf;
        this.appId = appId;
        this.manifest = manifest;
        this.blocksPerRequest = blocksPerRequest;
        this.requestsInFlight = requestsInFlight;
    }

    /**
     * Starts fetching every block: executor {@code e} (see {@link ShuffleManifest#executorOf}) is
     * {@code execIds.get(e)} and is reached through the clients {@code connections.get(e)}.
     */
    public Run start(List<String> execIds, List<List<TransportClient>> connections) {
        if (execIds.size() != manifest.executors() || connections.size() != manifest.executors()) {
            throw new IllegalArgumentException(manifest.executors() + " executors, " + execIds.size() + " ids, "
                    + connections.size() + " connection lists");
        }
        Run run = new Run();
        for (int e = 0; e < manifest.executors(); e++) {
            Queue<String[]> requests = requestsOf(e);
            for (TransportClient client : connections.get(e)) {
                for (int i = 0; i < requestsInFlight; i++) {
                    run.next(client, execIds.get(e), requests);
                }
            }
        }
        return run;
    }

    /** The block ids of executor {@code executor}'s map outputs, map by map, in requests of blocksPerRequest. */
    private Queue<String[]> requestsOf(int executor) {
        ShuffleSpec spec = manifest.spec();
        List<String> ids = new ArrayList<>();
        for (int map = 0; map < spec.maps(); map++) {
            if (manifest.executorOf(map) == executor) {
                for (int reduce = 0; reduce < spec.reduces(); reduce++) {
                    ids.add(spec.blockId(map, reduce));
                }
            }
        }
        Queue<String[]> requests = new ArrayDeque<>();
        for (int from = 0; from < ids.size(); from += blocksPerRequest) {
            requests.add(ids.subList(from, Math.min(ids.size(), from + blocksPerRequest)).toArray(new String[0]));
        }
        return requests;
    }

    /** A fetch under way. */
    public final class Run {
        private final BlockVerifier verifier = new BlockVerifier(manifest);
        private final long start = System.nanoTime();
        private final AtomicInteger requests = new AtomicInteger();

        /** Starts the next request of {@code queue} on {@code client}, if there is one. */
        private void next(TransportClient client, String execId, Queue<String[]> queue) {
            String[] blockIds;
            synchronized (queue) {
                blockIds = queue.poll();
            }
            if (blockIds == null) {
                return;
            }
            requests.incrementAndGet();
            long requestStart = System.nanoTime();
            AtomicInteger left = new AtomicInteger(blockIds.length);
            Set<String> seen = ConcurrentHashMap.newKeySet();
            BlockFetchingListener listener = new BlockFetchingListener() {
                @Override
                public void onBlockFetchSuccess(String blockId, ManagedBuffer data) {
                    verifier.arrived(blockId, data, System.nanoTime() - requestStart);
                    done(blockId);
                }

                @Override
                public void onBlockFetchFailure(String blockId, Throwable exception) {
                    verifier.failed(blockId, exception);
                    done(blockId);
                }

                private void done(String blockId) {
                    // the request is over when each of its blocks had an outcome (failures may repeat)
                    if (seen.add(blockId) && left.decrementAndGet() == 0) {
                        next(client, execId, queue);
                    }
                }
            };
            if (!client.isActive()) {
                // what Spark's fetcher would report (and log at ERROR, once per request) on a closed connection
                IOException closed = new IOException("connection to " + client.getSocketAddress()
                        + " closed before the request was sent");
                for (String id : blockIds) {
                    listener.onBlockFetchFailure(id, closed);
                }
                return;
            }
            try {
                new OneForOneBlockFetcher(client, appId, execId, blockIds, listener, conf).start();
            } catch (RuntimeException e) {
                for (String id : blockIds) {
                    listener.onBlockFetchFailure(id, e);
                }
            }
        }

        /** Blocks with an outcome so far. */
        public int progress() {
            return verifier.decided();
        }

        /** Requests started so far. */
        public int requests() {
            return requests.get();
        }

        /**
         * Waits until every block had an outcome, or {@code timeout} passed (the blocks without one are then
         * {@link FetchReport#missing()}), and reports.
         */
        public FetchReport await(long timeout, TimeUnit unit) throws InterruptedException {
            boolean all = verifier.await(timeout, unit);
            // a complete run lasted until its last block; one that timed out, until now
            return verifier.report((all ? verifier.lastOutcomeNanos() : System.nanoTime()) - start);
        }
    }
}
