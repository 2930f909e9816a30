package org.nettyrdma.shuffle;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

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

    /** spark.ssl.rpc.enabled, and Spark's authentication with and without encryption (SASL, and AES). */
    @ParameterizedTest
    @EnumSource(value = Security.class, names = {"TLS", "SASL", "SASL_ENCRYPTION", "AES_ENCRYPTION"})
    void securedFetchesEveryBlockIntact(Security security) throws Exception {
        fetchAll(security, ShuffleTestSupport.smallSpec(), 1, 2, 4);
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
