package org.nettyrdma.grpc;

import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.stub.ClientCalls;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.nettyrdma.grpc.sample.Chunk;
import org.nettyrdma.grpc.sample.EchoMethods;
import org.nettyrdma.grpc.sample.PayloadPattern;

import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * 50 channels made, used (a unary call and a server stream) and shut down one after another on the same event loop
 * group: afterwards the client and the server hold what they held after the first few: no more queue pairs (none on
 * the client, the listener's none on the server), registered memory, threads or file descriptors.
 */
class GrpcChannelRecreationTest {
    private static final int WARM_UP = 5;
    private static final int CHANNELS = 50;
    /**
     * Threads gRPC's shared executor (a cached pool, whose idle threads end after 60 s) may have started meanwhile:
     * a call's callbacks run there, so the pool's size follows how calls overlapped, not the number of channels. A
     * thread per channel would add 50.
     */
    private static final int THREAD_SLACK = 4;

    @Test
    @Timeout(value = 600, unit = TimeUnit.SECONDS)
    void fiftyChannelsLeaveNothingBehind() throws Exception {
        GrpcTestSupport.assumeOwnServer("it counts the server's queue pairs, memory, threads and file descriptors");
        try (EchoServerUnderTest server = EchoServerUnderTest.start()) {
            EventLoopGroup group = GrpcTestSupport.newGroup(1);
            try {
                for (int i = 0; i < WARM_UP; i++) {
                    useOnce(server, group, i);
                }
                ResourceCounts client = settled(() -> ResourceCounts.of(group), ResourceCounts.NONE);
                ResourceCounts serverSide = settled(server::counts, ResourceCounts.NONE);
                for (int i = 0; i < CHANNELS; i++) {
                    useOnce(server, group, WARM_UP + i);
                }
                ResourceCounts clientAfter = settled(() -> ResourceCounts.of(group), client);
                ResourceCounts serverAfter = settled(server::counts, serverSide);
                System.out.println("[GrpcChannelRecreationTest] client " + client + " -> " + clientAfter + "; server "
                        + serverSide + " -> " + serverAfter);
                assertEquals(0, clientAfter.queuePairs, "the client's queue pairs after its channels shut down");
                assertTrue(clientAfter.registeredBytes <= client.registeredBytes, () -> "the client's registered "
                        + "memory grew: " + client + " -> " + clientAfter);
                assertTrue(clientAfter.fds <= client.fds, () -> "the client's fds grew: " + client + " -> "
                        + clientAfter);
                assertTrue(clientAfter.threads <= client.threads + THREAD_SLACK, () -> "the client's threads grew: "
                        + client + " -> " + clientAfter);
                assertTrue(serverAfter.queuePairs <= serverSide.queuePairs, () -> "the server's queue pairs grew: "
                        + serverSide + " -> " + serverAfter);
                assertTrue(serverAfter.registeredBytes <= serverSide.registeredBytes, () -> "the server's "
                        + "registered memory grew: " + serverSide + " -> " + serverAfter);
                assertTrue(serverAfter.fds <= serverSide.fds, () -> "the server's fds grew: " + serverSide + " -> "
                        + serverAfter);
                assertTrue(serverAfter.threads <= serverSide.threads + THREAD_SLACK, () -> "the server's threads "
                        + "grew: " + serverSide + " -> " + serverAfter);
            } finally {
                GrpcTestSupport.shutdown(group);
            }
        }
    }

    /** A channel: one unary call and a short server stream, then shutdownNow and its termination. */
    private static void useOnce(EchoServerUnderTest server, EventLoopGroup group, int n) throws Exception {
        ManagedChannel channel = GrpcTestSupport.channel(server, group);
        try {
            Chunk echo = ClientCalls.blockingUnaryCall(channel, EchoMethods.UNARY, CallOptions.DEFAULT
                    .withDeadlineAfter(GrpcTestSupport.promptMillis(), TimeUnit.MILLISECONDS),
                    PayloadPattern.chunk(n, 4096));
            assertTrue(PayloadPattern.matches(echo, n, 4096), "the echo on channel " + n);
        } finally {
            GrpcTestSupport.close(channel);
        }
    }

    /**
     * Counts once they are no higher than {@code baseline} (threads: within the slack), or those of the time-out: a
     * channel's termination does not wait for its RDMA connection's teardown, and the server learns of a connection's
     * end after the client (on iWARP when the TCP connection has ended), so the last connection's queue pair and
     * memory may still be there just after the client's channel has terminated. A leak stays: it fails the test.
     */
    private static ResourceCounts settled(Counter counter, ResourceCounts baseline) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(GrpcTestSupport.promptMillis());
        ResourceCounts counts = counter.counts();
        while (!counts.noMoreThan(baseline, THREAD_SLACK) && System.nanoTime() - deadline < 0) {
            Thread.sleep(50);
            counts = counter.counts();
        }
        return counts;
    }

    /** Where counts come from: this process, or the server's. */
    private interface Counter {
        ResourceCounts counts() throws Exception;
    }
}
