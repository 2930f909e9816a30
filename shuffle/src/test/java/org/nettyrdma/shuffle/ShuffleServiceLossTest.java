package org.nettyrdma.shuffle;

import org.apache.spark.network.client.TransportClient;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A shuffle service that goes away mid-fetch (killed on the native provider, its connections closed at once
 * in-process): the reducer gets Spark's failure callback ({@code BlockFetchingListener.onBlockFetchFailure}) for every
 * block it did not get, promptly, not a hang; what did arrive is intact, and the other service's blocks all arrive.
 */
class ShuffleServiceLossTest {

    @Test
    void killedServiceFailsItsRemainingBlocksAndTheOtherServiceDeliversAll() throws Exception {
        GeneratedShuffle shuffle = ShuffleTestSupport.shuffle(ShuffleTestSupport.standardSpec(), 2);
        int blocks = shuffle.spec().blocks();
        try (ShuffleServices services = ShuffleServices.inProcesses(Security.NONE, shuffle)) {
            List<List<TransportClient>> connections = services.cluster().connect(2);
            try {
                ShuffleFetcher.Run run = services.cluster().startFetch(connections, 20, 4);
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
                while (run.progress() < blocks / 5 && System.nanoTime() < deadline) {
                    Thread.sleep(1);
                }
                assertTrue(run.progress() < blocks, "the fetch ended before the service could be killed");
                services.kill(1);
                long killed = System.nanoTime();
                FetchReport report = run.await(120, TimeUnit.SECONDS);
                long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - killed);

                assertEquals(0, report.missing(), "blocks without an outcome (a hang): " + report.summary());
                assertTrue(report.corrupt().isEmpty(), report.summary());
                assertTrue(report.failed().size() > 0, "nothing failed: " + report.summary());
                int ofSurvivor = 0;
                for (int map = 0; map < shuffle.spec().maps(); map++) {
                    if (shuffle.manifest().executorOf(map) == 0) {
                        ofSurvivor += shuffle.spec().reduces();
                    }
                }
                for (String failed : report.failed().keySet()) {
                    int map = Integer.parseInt(failed.split("_")[2]);
                    assertEquals(1, shuffle.manifest().executorOf(map), "a block of the live service failed: "
                            + failed + ": " + report.failed().get(failed));
                }
                for (Throwable cause : report.failed().values()) {
                    assertTrue(isIoFailure(cause), "not a connection failure: " + cause);
                }
                assertTrue(report.intact() >= ofSurvivor, report.summary());
                assertTrue(seconds < 60, "the failures took " + seconds + " s");
            } finally {
                ShuffleCluster.closeAll(connections);
            }
        }
    }

    /** What Spark reports for a lost connection: an IOException ("Connection from ... closed"), maybe wrapped. */
    private static boolean isIoFailure(Throwable t) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof IOException) {
                return true;
            }
        }
        return false;
    }
}
