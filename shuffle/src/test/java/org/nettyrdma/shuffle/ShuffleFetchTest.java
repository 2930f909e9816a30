package org.nettyrdma.shuffle;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Spark's shuffle protocol over RDMA, unmodified: {@code ExternalBlockHandler} serving generated sort-shuffle files,
 * {@code OneForOneBlockFetcher} fetching every block of them (20 per request), each block's size and CRC32C checked.
 * On the provider under test ({@link ShuffleTestSupport}); on the native provider the three services are three
 * processes.
 */
class ShuffleFetchTest {
    private static final long TIMEOUT_SECONDS = 90;

    @Test
    void sparkDefaultsFetchEveryBlockIntact() throws Exception {
        fetchAll(Security.NONE, ShuffleTestSupport.standardSpec(), 1, 2, 4);
    }

    /** spark.ssl.rpc.enabled: TLS under Spark's pipeline, which then writes ByteBufs (ChunkedWriteHandler). */
    @Test
    void tlsFetchesEveryBlockIntact() throws Exception {
        fetchAll(Security.TLS, ShuffleTestSupport.smallSpec(), 1, 2, 4);
    }

    /** spark.authenticate: SASL DIGEST-MD5 authentication, then plain FileRegions. */
    @Test
    void saslFetchesEveryBlockIntact() throws Exception {
        fetchAll(Security.SASL, ShuffleTestSupport.smallSpec(), 1, 2, 4);
    }

    /** spark.authenticate.enableSaslEncryption: every message an EncryptedMessage, a FileRegion that writes more
     * bytes than its count. */
    @Test
    void saslEncryptionFetchesEveryBlockIntact() throws Exception {
        fetchAll(Security.SASL_ENCRYPTION, ShuffleTestSupport.smallSpec(), 1, 2, 4);
    }

    /** spark.network.crypto.enabled: Spark's AES authentication and encryption (TransportCipher's FileRegions). */
    @Test
    void aesEncryptionFetchesEveryBlockIntact() throws Exception {
        fetchAll(Security.AES_ENCRYPTION, ShuffleTestSupport.smallSpec(), 1, 2, 4);
    }

    /** A shuffle whose map outputs are on three executors, each with its own service: a reducer fetches from all. */
    @Test
    void threeServicesServeEveryBlockIntact() throws Exception {
        GeneratedShuffle shuffle = ShuffleTestSupport.shuffle(ShuffleTestSupport.standardSpec(), 3);
        try (ShuffleServices services = ShuffleServices.inProcesses(Security.NONE, shuffle)) {
            FetchReport report = services.cluster().fetch(1, 20, 4, TIMEOUT_SECONDS);
            assertTrue(report.complete(), "three services: " + report.summary());
        }
    }

    /** 4 connections to each of 2 services, 16 requests of 20 blocks under way on each connection. */
    @Test
    void manyFetchesInFlightEveryBlockIntact() throws Exception {
        fetchAll(Security.NONE, ShuffleTestSupport.standardSpec(), 2, 4, 16);
    }

    private static void fetchAll(Security security, ShuffleSpec spec, int executors, int connections, int inFlight)
            throws Exception {
        GeneratedShuffle shuffle = ShuffleTestSupport.shuffle(spec, executors);
        try (ShuffleServices services = ShuffleServices.start(security, shuffle)) {
            FetchReport report = services.cluster().fetch(connections, 20, inFlight, TIMEOUT_SECONDS);
            assertTrue(report.complete(), security + ", " + spec + ", " + executors + " services: "
                    + report.summary());
        }
    }
}
