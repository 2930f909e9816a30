package org.nettyrdma.grpc.benchmark;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.stub.ClientCalls;
import org.nettyrdma.grpc.sample.Chunk;
import org.nettyrdma.grpc.sample.EchoMethods;
import org.nettyrdma.grpc.sample.PayloadPattern;
import org.nettyrdma.grpc.sample.StreamRequest;

import java.util.Arrays;
import java.util.Iterator;

/** What the benchmark measures on a channel: sequential unary round trips, server streams, large unary calls. */
final class Measurements {
    private Measurements() {
    }

    /** Latencies (ns, sorted) of sequential unary calls of {@code size} bytes, after {@code warmupMillis}. */
    static long[] unaryLatencies(Channel channel, int size, long warmupMillis, int calls) {
        Chunk request = PayloadPattern.chunk(1, size);
        long warmEnd = System.nanoTime() + warmupMillis * 1_000_000;
        while (System.nanoTime() - warmEnd < 0) {
            unary(channel, request, size);
        }
        long[] ns = new long[calls];
        for (int i = 0; i < calls; i++) {
            long start = System.nanoTime();
            unary(channel, request, size);
            ns[i] = System.nanoTime() - start;
        }
        Arrays.sort(ns);
        return ns;
    }

    static double percentileMicros(long[] sorted, double p) {
        int i = (int) Math.ceil(p / 100 * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, i))] / 1e3;
    }

    /** MB/s (10^6 bytes/s of payload the client received) of a server stream of {@code count} x {@code size}. */
    static double serverStream(Channel channel, int size, int count) {
        long start = System.nanoTime();
        Iterator<Chunk> it = ClientCalls.blockingServerStreamingCall(channel, EchoMethods.SERVER_STREAM,
                CallOptions.DEFAULT, StreamRequest.newBuilder().setCount(count).setPayloadSize(size).build());
        long n = 0;
        while (it.hasNext()) {
            Chunk c = it.next();
            if (!PayloadPattern.matches(c, n, size)) {
                throw new IllegalStateException("stream message #" + n + " is not the expected one");
            }
            n++;
        }
        long elapsed = System.nanoTime() - start;
        if (n != count) {
            throw new IllegalStateException("stream ended after " + n + " of " + count + " messages");
        }
        return (double) count * size / (elapsed / 1e9) / 1e6;
    }

    /** MB/s (10^6 bytes/s, request and echo added) of {@code calls} sequential unary calls of {@code size} bytes. */
    static double largeUnary(Channel channel, int size, int calls) {
        Chunk request = PayloadPattern.chunk(3, size);
        long start = System.nanoTime();
        for (int i = 0; i < calls; i++) {
            unary(channel, request, size);
        }
        long elapsed = System.nanoTime() - start;
        return 2.0 * calls * size / (elapsed / 1e9) / 1e6;
    }

    private static void unary(Channel channel, Chunk request, int size) {
        Chunk response = ClientCalls.blockingUnaryCall(channel, EchoMethods.UNARY, CallOptions.DEFAULT, request);
        if (response.getSequence() != request.getSequence() || response.getPayload().size() != size
                || !response.getPayload().equals(request.getPayload())) {
            throw new IllegalStateException("the echo is not the request");
        }
    }
}
