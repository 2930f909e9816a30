package org.nettyrdma.grpc;

import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.nettyrdma.grpc.sample.Chunk;
import org.nettyrdma.grpc.sample.EchoMethods;
import org.nettyrdma.grpc.sample.PayloadPattern;
import org.nettyrdma.grpc.sample.StreamRequest;
import org.nettyrdma.grpc.sample.Summary;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A server shut down while streams are open: {@code shutdownNow} ends them promptly with an error status, and the
 * client's channel fails later calls instead of hanging; {@code shutdown} lets open streams finish and refuses new
 * ones. A server of its own per test.
 */
class GrpcServerShutdownTest {
    private EchoServerUnderTest server;
    private EventLoopGroup group;
    private ManagedChannel channel;

    @BeforeEach
    void start() throws Exception {
        server = EchoServerUnderTest.start();
        group = GrpcTestSupport.newGroup(1);
        channel = GrpcTestSupport.channel(server, group);
    }

    @AfterEach
    void stop() throws Exception {
        try {
            GrpcTestSupport.close(channel);
            GrpcTestSupport.shutdown(group);
        } finally {
            server.close();
        }
    }

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void shutdownNowEndsOpenStreamsPromptly() throws Exception {
        // a bidi stream that has echoed a message and stays open, a server stream the client reads slowly, a client
        // stream with messages sent and no end
        GrpcCallsTest.Collector bidi = new GrpcCallsTest.Collector(Integer.MAX_VALUE, 1024);
        StreamObserver<Chunk> bidiRequests = ClientCalls.asyncBidiStreamingCall(
                channel.newCall(EchoMethods.BIDI, CallOptions.DEFAULT), bidi);
        bidiRequests.onNext(PayloadPattern.chunk(0, 1024));
        GrpcCallsTest.Collector endless = new GrpcCallsTest.Collector(Integer.MAX_VALUE, 4096);
        ClientCalls.asyncServerStreamingCall(channel.newCall(EchoMethods.SERVER_STREAM, CallOptions.DEFAULT),
                StreamRequest.newBuilder().setCount(Integer.MAX_VALUE).setPayloadSize(4096).build(), endless);
        CompletableFuture<Summary> summary = new CompletableFuture<>();
        StreamObserver<Chunk> upload = ClientCalls.asyncClientStreamingCall(
                channel.newCall(EchoMethods.CLIENT_STREAM, CallOptions.DEFAULT), new GrpcCallsTest.Single<>(summary));
        for (int i = 0; i < 100; i++) {
            upload.onNext(PayloadPattern.chunk(i, 4096));
        }
        GrpcTestSupport.awaitCondition("the bidi echo and the server stream under way",
                () -> bidi.received.get() >= 1 && endless.received.get() >= 100, GrpcTestSupport.promptMillis(),
                () -> "bidi " + bidi.received + ", stream " + endless.received);

        long millis = server.shutdownNow();
        System.out.println("[GrpcServerShutdownTest] shutdownNow with 3 open streams: terminated in " + millis + " ms");
        for (CompletableFuture<?> call : new CompletableFuture<?>[] {bidi.done, endless.done, summary}) {
            Status status = GrpcCallsTest.failure(call, GrpcTestSupport.promptMillis());
            assertTrue(status.getCode() == Status.Code.UNAVAILABLE || status.getCode() == Status.Code.CANCELLED
                    || status.getCode() == Status.Code.INTERNAL && String.valueOf(status.getDescription())
                    .contains("RST_STREAM"), () -> "how an open call ended at the server's shutdownNow: " + status);
        }
        StatusRuntimeException later = assertThrows(StatusRuntimeException.class, () -> ClientCalls.blockingUnaryCall(
                channel, EchoMethods.UNARY, CallOptions.DEFAULT.withDeadlineAfter(GrpcTestSupport.promptMillis(),
                        TimeUnit.MILLISECONDS), PayloadPattern.chunk(1, 16)));
        assertEquals(Status.Code.UNAVAILABLE, later.getStatus().getCode(), "a call after the server's end: "
                + later.getStatus());
    }

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void shutdownLetsOpenStreamsFinish() throws Exception {
        GrpcCallsTest.Collector bidi = new GrpcCallsTest.Collector(20, 1024);
        StreamObserver<Chunk> requests = ClientCalls.asyncBidiStreamingCall(
                channel.newCall(EchoMethods.BIDI, CallOptions.DEFAULT), bidi);
        requests.onNext(PayloadPattern.chunk(0, 1024));
        GrpcTestSupport.awaitCondition("the first echo", () -> bidi.received.get() == 1,
                GrpcTestSupport.promptMillis(), () -> "received " + bidi.received);

        server.shutdown();
        assertFalse(server.awaitTermination(200), "the server terminated with a stream open");
        // the open stream goes on to its end
        for (int i = 1; i < 20; i++) {
            requests.onNext(PayloadPattern.chunk(i, 1024));
        }
        requests.onCompleted();
        bidi.done.get(GrpcTestSupport.promptMillis(), TimeUnit.MILLISECONDS);
        assertEquals(20, bidi.received.get(), "echoes of the stream open at shutdown");
        assertTrue(server.awaitTermination(GrpcTestSupport.promptMillis()),
                "the server did not terminate after its last stream ended");
        StatusRuntimeException later = assertThrows(StatusRuntimeException.class, () -> ClientCalls.blockingUnaryCall(
                channel, EchoMethods.UNARY, CallOptions.DEFAULT.withDeadlineAfter(GrpcTestSupport.promptMillis(),
                        TimeUnit.MILLISECONDS), PayloadPattern.chunk(1, 16)));
        assertEquals(Status.Code.UNAVAILABLE, later.getStatus().getCode(), "a call after the server's end: "
                + later.getStatus());
    }
}
