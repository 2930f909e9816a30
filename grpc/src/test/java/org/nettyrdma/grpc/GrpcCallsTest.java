package org.nettyrdma.grpc;

import io.grpc.CallOptions;
import io.grpc.ClientCall;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.nettyrdma.grpc.sample.Chunk;
import org.nettyrdma.grpc.sample.EchoMethods;
import org.nettyrdma.grpc.sample.PayloadPattern;
import org.nettyrdma.grpc.sample.StreamRequest;
import org.nettyrdma.grpc.sample.Summary;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The four kinds of call of the sample service over RDMA, configured by {@link RdmaGrpc}: unary, server, client and
 * bidi streaming, 8 MiB messages, 64 calls at once, deadlines and cancellation. Every message is checked (sequence and
 * every byte, or a CRC-32C the server computed). One server and one channel for the class; the server runs in this JVM
 * on the emulated provider, in a JVM of its own on the native one.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class GrpcCallsTest {
    private EchoServerUnderTest server;
    private EventLoopGroup group;
    private ManagedChannel channel;

    @BeforeAll
    void start() throws Exception {
        server = EchoServerUnderTest.start();
        group = GrpcTestSupport.newGroup(1);
        channel = GrpcTestSupport.channel(server, group);
    }

    @AfterAll
    void stop() throws Exception {
        try {
            GrpcTestSupport.close(channel);
            GrpcTestSupport.shutdown(group);
        } finally {
            if (server != null) {
                server.close();
            }
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void unaryEchoesEverySize() {
        for (int size : new int[] {0, 1, 16, 4096, 16 << 10, (16 << 10) + 1, 100_000, 1 << 20}) {
            Chunk request = PayloadPattern.chunk(size, size);
            Chunk response = unary(request);
            assertTrue(PayloadPattern.matches(response, size, size), "the echo of a " + size + " B unary call");
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void unaryEightMebibytes() {
        int size = 8 << 20;
        for (int i = 0; i < bigMessages(); i++) {
            Chunk response = unary(PayloadPattern.chunk(i, size));
            assertTrue(PayloadPattern.matches(response, i, size), "the echo of 8 MiB, call " + i);
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void serverStreamArrivesInOrder() {
        int count = GrpcTestSupport.scaled(2000);
        for (int size : new int[] {16, 4096, 64 << 10}) {
            assertEquals(count, readStream(count, size), "messages of " + size + " B streamed");
        }
        assertEquals(bigMessages(), readStream(bigMessages(), 8 << 20), "messages of 8 MiB streamed");
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void clientStreamIsCountedAndChecksummed() throws Exception {
        int count = GrpcTestSupport.scaled(2000);
        for (int size : new int[] {16, 4096, 64 << 10}) {
            CompletableFuture<Summary> summary = new CompletableFuture<>();
            StreamObserver<Chunk> requests = ClientCalls.asyncClientStreamingCall(
                    channel.newCall(EchoMethods.CLIENT_STREAM, CallOptions.DEFAULT), new Single<>(summary));
            for (int i = 0; i < count; i++) {
                requests.onNext(PayloadPattern.chunk(i, size));
            }
            requests.onCompleted();
            Summary s = summary.get(GrpcTestSupport.promptMillis() * 3, TimeUnit.MILLISECONDS);
            assertEquals(count, s.getMessages(), "messages the server counted, of " + size + " B");
            assertEquals((long) count * size, s.getBytes(), "bytes the server counted");
            assertEquals(PayloadPattern.crc32c(count, size), s.getCrc32C(), "CRC-32C of what the server received");
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void bidiEchoesEveryMessageInOrder() throws Exception {
        int count = GrpcTestSupport.scaled(2000);
        int size = 4096;
        Collector echoes = new Collector(count, size);
        StreamObserver<Chunk> requests = ClientCalls.asyncBidiStreamingCall(
                channel.newCall(EchoMethods.BIDI, CallOptions.DEFAULT), echoes);
        for (int i = 0; i < count; i++) {
            requests.onNext(PayloadPattern.chunk(i, size));
        }
        requests.onCompleted();
        echoes.done.get(GrpcTestSupport.promptMillis() * 3, TimeUnit.MILLISECONDS);
        assertEquals(count, echoes.received.get(), "echoes");
    }

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void sixtyFourCallsAtOnce() throws Exception {
        int calls = 64;
        int streamed = GrpcTestSupport.scaled(200);
        List<CompletableFuture<?>> all = new ArrayList<>();
        List<Collector> streams = new ArrayList<>();
        for (int i = 0; i < calls; i++) {
            int size = 1024 + 977 * i;
            if (i % 2 == 0) {
                CompletableFuture<Chunk> echo = new CompletableFuture<>();
                Chunk request = PayloadPattern.chunk(i, size);
                ClientCalls.asyncUnaryCall(channel.newCall(EchoMethods.UNARY, CallOptions.DEFAULT), request,
                        new Single<>(echo));
                int n = i;
                all.add(echo.thenAccept(r -> {
                    if (!PayloadPattern.matches(r, n, size)) {
                        throw new AssertionError("unary call " + n + ": the echo is not the request");
                    }
                }));
            } else {
                Collector c = new Collector(streamed, size);
                ClientCalls.asyncServerStreamingCall(channel.newCall(EchoMethods.SERVER_STREAM, CallOptions.DEFAULT),
                        StreamRequest.newBuilder().setCount(streamed).setPayloadSize(size).build(), c);
                streams.add(c);
                all.add(c.done);
            }
        }
        CompletableFuture.allOf(all.toArray(new CompletableFuture<?>[0]))
                .get(GrpcTestSupport.promptMillis() * 6, TimeUnit.MILLISECONDS);
        for (Collector c : streams) {
            assertEquals(streamed, c.received.get(), "messages of a stream among 64 calls");
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void deadlineEndsACallThatGetsNoAnswer() throws Exception {
        // a bidi call to which the client sends nothing: the server answers nothing, the deadline ends it
        long deadlineMillis = GrpcTestSupport.isNative() ? 2_000 : 300;
        CompletableFuture<Chunk> first = new CompletableFuture<>();
        long start = System.nanoTime();
        ClientCalls.asyncBidiStreamingCall(channel.newCall(EchoMethods.BIDI,
                CallOptions.DEFAULT.withDeadlineAfter(deadlineMillis, TimeUnit.MILLISECONDS)), new Single<>(first));
        Status status = failure(first, GrpcTestSupport.promptMillis() + deadlineMillis);
        long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertEquals(Status.Code.DEADLINE_EXCEEDED, status.getCode(), status.toString());
        assertTrue(millis >= deadlineMillis - 50, "the call ended after " + millis + " ms, before its deadline");
        // a unary call whose deadline has passed before it starts fails alone; the channel goes on
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> ClientCalls.blockingUnaryCall(
                channel, EchoMethods.UNARY, CallOptions.DEFAULT.withDeadlineAfter(-1, TimeUnit.MILLISECONDS),
                PayloadPattern.chunk(0, 16)));
        assertEquals(Status.Code.DEADLINE_EXCEEDED, e.getStatus().getCode());
        assertTrue(PayloadPattern.matches(unary(PayloadPattern.chunk(5, 100)), 5, 100), "a call after the deadlines");
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void cancelledStreamEndsAndTheChannelGoesOn() throws Exception {
        // a server stream far longer than the test waits for, cancelled by the client after some messages
        int size = 16 << 10;
        ClientCall<StreamRequest, Chunk> call = channel.newCall(EchoMethods.SERVER_STREAM, CallOptions.DEFAULT);
        Iterator<Chunk> it = ClientCalls.blockingServerStreamingCall(call,
                StreamRequest.newBuilder().setCount(Integer.MAX_VALUE).setPayloadSize(size).build());
        for (int i = 0; i < 50; i++) {
            assertTrue(PayloadPattern.matches(it.next(), i, size), "stream message " + i);
        }
        call.cancel("the test cancels", null);
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> {
            while (it.hasNext()) {
                it.next();
            }
        });
        assertEquals(Status.Code.CANCELLED, e.getStatus().getCode(), e.toString());
        // the connection is not stuck with the rest of the stream: calls go on at once
        for (int i = 0; i < 10; i++) {
            assertTrue(PayloadPattern.matches(unary(PayloadPattern.chunk(i, 4096)), i, 4096), "call " + i
                    + " after the cancellation");
        }
        assertEquals(100, readStream(100, 4096), "a stream after the cancellation");
    }

    // --- fixture

    /** 8 MiB messages per test: 2, or 1 on the native provider (the VM moves a few MB/s). */
    private static int bigMessages() {
        return GrpcTestSupport.isNative() ? 1 : 2;
    }

    private Chunk unary(Chunk request) {
        return ClientCalls.blockingUnaryCall(channel, EchoMethods.UNARY,
                CallOptions.DEFAULT.withDeadlineAfter(GrpcTestSupport.promptMillis() * 3, TimeUnit.MILLISECONDS),
                request);
    }

    /** Reads a server stream of {@code count} messages of {@code size}, checking each; returns how many came. */
    private int readStream(int count, int size) {
        Iterator<Chunk> it = ClientCalls.blockingServerStreamingCall(channel, EchoMethods.SERVER_STREAM,
                CallOptions.DEFAULT.withDeadlineAfter(GrpcTestSupport.promptMillis() * 6, TimeUnit.MILLISECONDS),
                StreamRequest.newBuilder().setCount(count).setPayloadSize(size).build());
        int n = 0;
        while (it.hasNext()) {
            Chunk c = it.next();
            assertTrue(PayloadPattern.matches(c, n, size), "stream message " + n + " of " + size + " B");
            n++;
        }
        return n;
    }

    static Status failure(CompletableFuture<?> call, long timeoutMillis) throws Exception {
        try {
            Object result = call.get(timeoutMillis, TimeUnit.MILLISECONDS);
            throw new AssertionError("the call succeeded: " + result);
        } catch (ExecutionException e) {
            return Status.fromThrowable(e.getCause());
        }
    }

    /** Completes with a call's first message, or fails with its error. */
    static final class Single<T> implements StreamObserver<T> {
        private final CompletableFuture<T> result;

        Single(CompletableFuture<T> result) {
            this.result = result;
        }

        @Override
        public void onNext(T value) {
            result.complete(value);
        }

        @Override
        public void onError(Throwable t) {
            result.completeExceptionally(t);
        }

        @Override
        public void onCompleted() {
            result.completeExceptionally(new AssertionError("the call completed without a message"));
        }
    }

    /** Receives messages 0..count-1 of {@code size}, checking each; completes at the call's end. */
    static final class Collector implements StreamObserver<Chunk> {
        final CompletableFuture<Void> done = new CompletableFuture<>();
        final AtomicInteger received = new AtomicInteger();
        private final int count;
        private final int size;

        Collector(int count, int size) {
            this.count = count;
            this.size = size;
        }

        @Override
        public void onNext(Chunk value) {
            int i = received.getAndIncrement();
            if (!PayloadPattern.matches(value, i, size)) {
                done.completeExceptionally(new AssertionError("message " + i + " of " + size + " B is wrong"));
            }
        }

        @Override
        public void onError(Throwable t) {
            done.completeExceptionally(t);
        }

        @Override
        public void onCompleted() {
            if (received.get() == count) {
                done.complete(null);
            } else {
                done.completeExceptionally(new AssertionError("the call ended after " + received + " of " + count));
            }
        }
    }
}
