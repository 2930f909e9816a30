package org.nettyrdma.shuffle;

import io.netty.channel.epoll.Epoll;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The harness itself, over Netty's NIO and epoll transports on loopback TCP: the same servers, clients and checks as
 * over RDMA ({@link ShuffleFetchTest}), so that a failure there is the transport's, not the harness's (SASL encryption
 * included: its FileRegions write more bytes than their count, {@link ExpandingFileRegionTest}).
 */
class ShuffleFetchOverTcpTest {

    @Test
    void nioFetchesEveryBlockIntact() throws Exception {
        fetchAll(ShuffleTransport.nio());
    }

    @Test
    void epollFetchesEveryBlockIntactWithSaslEncryption() throws Exception {
        assumeTrue(Epoll.isAvailable(), "epoll unavailable");
        GeneratedShuffle shuffle = ShuffleTestSupport.shuffle(ShuffleTestSupport.smallSpec(), 1);
        try (ShuffleCluster cluster = ShuffleCluster.inProcess(
                ShuffleTestSupport.conf(Security.SASL_ENCRYPTION).build(), ShuffleTestSupport.APP_ID,
                new SharedSecret(ShuffleTestSupport.SECRET), ShuffleTransport.epoll(), shuffle, "127.0.0.1", 2, 2)) {
            FetchReport report = cluster.fetch(2, 20, 4, 120);
            assertTrue(report.complete(), report.summary());
        }
    }

    @Test
    void nioFetchesEveryBlockIntactWithTls() throws Exception {
        GeneratedShuffle shuffle = ShuffleTestSupport.shuffle(ShuffleTestSupport.smallSpec(), 1);
        try (ShuffleCluster cluster = ShuffleCluster.inProcess(ShuffleTestSupport.conf(Security.TLS).build(),
                ShuffleTestSupport.APP_ID, null, ShuffleTransport.nio(), shuffle, "127.0.0.1", 2, 2)) {
            FetchReport report = cluster.fetch(2, 20, 4, 120);
            assertTrue(report.complete(), report.summary());
        }
    }

    private static void fetchAll(ShuffleTransport transport) throws Exception {
        GeneratedShuffle shuffle = ShuffleTestSupport.shuffle(ShuffleTestSupport.smallSpec(), 1);
        try (ShuffleCluster cluster = ShuffleCluster.inProcess(ShuffleTestSupport.conf(Security.NONE).build(),
                ShuffleTestSupport.APP_ID, null, transport, shuffle, "127.0.0.1", 2, 2)) {
            FetchReport report = cluster.fetch(2, 20, 4, 120);
            assertTrue(report.complete(), report.summary());
        }
    }
}
