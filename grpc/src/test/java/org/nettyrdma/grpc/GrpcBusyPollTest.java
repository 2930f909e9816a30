package org.nettyrdma.grpc;

import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.stub.ClientCalls;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.nettyrdma.channel.RdmaCounters;
import org.nettyrdma.channel.RdmaIoHandler;
import org.nettyrdma.grpc.sample.Chunk;
import org.nettyrdma.grpc.sample.EchoMethods;
import org.nettyrdma.grpc.sample.PayloadPattern;

import java.util.Locale;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link RdmaGrpc}'s event loops: the busy-poll back-off on unless its system property says otherwise, and a client
 * loop making sequential unary calls stops spinning before every wait (each reply reaches it through gRPC's threads,
 * later than a spin lasts).
 */
class GrpcBusyPollTest {
    @Test
    void ioHandlerConfigBacksOffUnlessThePropertySaysOtherwise() {
        String before = System.getProperty(RdmaGrpc.BUSY_POLL_BACK_OFF_PROPERTY);
        try {
            System.clearProperty(RdmaGrpc.BUSY_POLL_BACK_OFF_PROPERTY);
            assertTrue(RdmaGrpc.newIoHandlerConfig().isBusyPollBackOff(), "the back-off by default");
            System.setProperty(RdmaGrpc.BUSY_POLL_BACK_OFF_PROPERTY, "false");
            assertFalse(RdmaGrpc.newIoHandlerConfig().isBusyPollBackOff(), "the back-off with the property false");
        } finally {
            if (before == null) {
                System.clearProperty(RdmaGrpc.BUSY_POLL_BACK_OFF_PROPERTY);
            } else {
                System.setProperty(RdmaGrpc.BUSY_POLL_BACK_OFF_PROPERTY, before);
            }
        }
    }

    @Test
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    void sequentialUnaryCallsDoNotSpinBeforeEveryWait() throws Exception {
        EchoServerUnderTest server = EchoServerUnderTest.start();
        EventLoopGroup group = RdmaGrpc.newEventLoopGroup(1,
                RdmaGrpc.newIoHandlerConfig().setProvider(GrpcTestSupport.provider()));
        ManagedChannel channel = null;
        try {
            channel = GrpcTestSupport.channel(server, group);
            // scaled down in the VM (its calls take milliseconds), but never below a few hundred: a steady count
            calls(channel, 0, Math.max(50, GrpcTestSupport.scaled(200))); // warm-up: connection, HTTP/2, JIT
            RdmaCounters before = RdmaIoHandler.counters(group);
            int calls = Math.max(300, GrpcTestSupport.scaled(1000));
            calls(channel, 1, calls);
            RdmaCounters after = RdmaIoHandler.counters(group);
            double missed = (after.spinsMissed() - before.spinsMissed()) / (double) calls;
            double found = (after.spinsFound() - before.spinsFound()) / (double) calls;
            double waits = (after.waits() - before.waits()) / (double) calls;
            System.out.printf(Locale.ROOT, "GrpcBusyPollTest: %d calls; per call the client loop's busy-polls missed "
                    + "%.2f times, found work %.2f times; it waited %.2f times%n", calls, missed, found, waits);
            // Spinning before every wait misses about once per wait (about 2 per call); backed off, only the probes
            // (one idle period in 16) and the 8 misses after each spin that found something remain.
            assertTrue(missed < 1.0, String.format(Locale.ROOT, "per call the client loop's busy-polls missed %.2f "
                    + "times, found work %.2f times, and it waited %.2f times", missed, found, waits));
        } finally {
            GrpcTestSupport.close(channel);
            GrpcTestSupport.shutdown(group);
            server.close();
        }
    }

    private static void calls(ManagedChannel channel, long sequence, int count) {
        for (int i = 0; i < count; i++) {
            Chunk response = ClientCalls.blockingUnaryCall(channel, EchoMethods.UNARY, CallOptions.DEFAULT
                    .withDeadlineAfter(GrpcTestSupport.promptMillis() * 3, TimeUnit.MILLISECONDS),
                    PayloadPattern.chunk(sequence, 16));
            assertTrue(PayloadPattern.matches(response, sequence, 16), "the echo of a 16 B unary call");
        }
    }
}
