package org.nettyrdma.shuffle;

import org.apache.spark.network.util.TransportConf;
import org.junit.jupiter.api.Test;
import org.nettyrdma.channel.RdmaCounters;
import org.nettyrdma.channel.RdmaIoHandler;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link MessageWithHeaderSplitter} over a real RDMA pair (the provider under test): with it, every block of a fetched
 * shuffle leaves the service as a {@code DefaultFileRegion} of its own, which the transport reads positionally from
 * the file into send staging ({@code RdmaCounters.fileReadBytes()} counts exactly the shuffle's bytes); without it
 * (as over epoll and NIO), every block goes through {@code MessageWithHeader.transferTo} and nothing is read that way.
 * Both fetch every block intact (size and CRC32C), nothing leaked (the module's leak detector).
 */
class MessageWithHeaderSplitFetchTest {
    @Test
    void splitBlocksAreReadFromTheirFilesIntoStaging() throws Exception {
        GeneratedShuffle shuffle = ShuffleTestSupport.shuffle(ShuffleTestSupport.smallSpec(), 1);
        assertEquals(shuffle.manifest().totalBytes(), fileReadBytes(shuffle, true),
                "every block's bytes read from its file, once");
    }

    @Test
    void unsplitBlocksGoThroughTransferTo() throws Exception {
        GeneratedShuffle shuffle = ShuffleTestSupport.shuffle(ShuffleTestSupport.smallSpec(), 1);
        assertEquals(0, fileReadBytes(shuffle, false), "no file read: MessageWithHeader.transferTo copied them");
    }

    /** The service's file-read bytes for a whole fetch of {@code shuffle} (2 connections, 4 requests in flight). */
    private static long fileReadBytes(GeneratedShuffle shuffle, boolean split) throws Exception {
        ShuffleTestSupport.assumeOwnServices("it reads the service's counters");
        TransportConf conf = ShuffleTestSupport.conf(Security.NONE).build();
        ShuffleTransport transport = ShuffleTestSupport.rdma().splittingMessages(split);
        try (ShuffleCluster cluster = ShuffleCluster.inProcess(conf, ShuffleTestSupport.APP_ID, null, transport,
                shuffle, ShuffleTestSupport.address(), 1, 1)) {
            FetchReport report = cluster.fetch(2, 20, 4, 90);
            assertTrue(report.complete(), (split ? "split: " : "whole: ") + report.summary());
            RdmaCounters server = RdmaIoHandler.counters(cluster.servers().get(0).eventLoops());
            assertTrue(server.copiedBytes() >= shuffle.manifest().totalBytes(), server::toString);
            return server.fileReadBytes();
        }
    }
}
