package org.nettyrdma.shuffle;

import io.netty.buffer.ByteBuf;
import org.apache.spark.network.buffer.ManagedBuffer;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.zip.CRC32C;

/**
 * Checks every block a fetch delivers against the {@link ShuffleManifest} (size and CRC32C of the bytes as Spark hands
 * them over) and records each block's first outcome: Spark may report a block failed more than once (every chunk
 * after a failed one fails the rest of its request again), and a block counts once. Thread-safe: callbacks come on
 * the clients' event loops.
 */
final class BlockVerifier {
    private final ShuffleManifest manifest;
    /** Per block: 0 no outcome yet, 1 intact, 2 corrupt, 3 failed. */
    private final AtomicLongArray outcome;
    private final AtomicLongArray latency;
    private final AtomicInteger decided = new AtomicInteger();
    private final AtomicInteger intact = new AtomicInteger();
    private final AtomicLong intactBytes = new AtomicLong();
    private final Map<String, String> corrupt = new ConcurrentHashMap<>();
    private final Map<String, Throwable> failed = new ConcurrentHashMap<>();
    private final CountDownLatch undecided;
    private volatile long lastOutcomeNanos;

    BlockVerifier(ShuffleManifest manifest) {
        this.manifest = manifest;
        this.outcome = new AtomicLongArray(manifest.spec().blocks());
        this.latency = new AtomicLongArray(manifest.spec().blocks());
        this.undecided = new CountDownLatch(manifest.spec().blocks());
    }

    /** Block {@code blockId} arrived, {@code latencyNanos} after its request started. */
    void arrived(String blockId, ManagedBuffer data, long latencyNanos) {
        int[] mr = parse(blockId);
        String problem = check(mr[0], mr[1], data);
        if (problem == null) {
            if (claim(mr, 1)) {
                intact.incrementAndGet();
                intactBytes.addAndGet(data.size());
                latency.set(index(mr), latencyNanos);
                countOutcome();
            }
        } else if (claim(mr, 2)) {
            corrupt.put(blockId, problem);
            countOutcome();
        }
    }

    /** Spark reported block {@code blockId} failed. */
    void failed(String blockId, Throwable cause) {
        int[] mr = parse(blockId);
        if (claim(mr, 3)) {
            failed.put(blockId, cause);
            countOutcome();
        }
    }

    /** Blocks with an outcome. */
    int decided() {
        return decided.get();
    }

    /** Waits until every block has an outcome, or {@code timeout} passed; whether they all have. */
    boolean await(long timeout, TimeUnit unit) throws InterruptedException {
        return undecided.await(timeout, unit);
    }

    /** {@link System#nanoTime()} of the last outcome so far. */
    long lastOutcomeNanos() {
        return lastOutcomeNanos;
    }

    FetchReport report(long elapsedNanos) {
        int blocks = manifest.spec().blocks();
        long[] latencies = new long[intact.get()];
        int n = 0;
        for (int i = 0; i < blocks && n < latencies.length; i++) {
            if (outcome.get(i) == 1) {
                latencies[n++] = latency.get(i);
            }
        }
        return new FetchReport(blocks, intact.get(), intactBytes.get(), Map.copyOf(corrupt), Map.copyOf(failed),
                blocks - decided.get(), elapsedNanos, n == latencies.length ? latencies
                : Arrays.copyOf(latencies, n));
    }

    private String check(int map, int reduce, ManagedBuffer data) {
        long size = data.size();
        if (size != manifest.size(map, reduce)) {
            return size + " bytes, expected " + manifest.size(map, reduce);
        }
        CRC32C crc = new CRC32C();
        try {
            ByteBuf buf = (ByteBuf) data.convertToNetty();
            try {
                for (ByteBuffer b : buf.nioBuffers()) {
                    crc.update(b);
                }
            } finally {
                buf.release();
            }
        } catch (IOException | ClassCastException e) {
            return "unreadable: " + e;
        }
        int expected = manifest.crc(map, reduce);
        return (int) crc.getValue() == expected ? null
                : String.format("CRC32C %08x, expected %08x", (int) crc.getValue(), expected);
    }

    /** Whether this is the block's first outcome (the caller records it, then calls {@link #countOutcome()}). */
    private boolean claim(int[] mr, int what) {
        return outcome.compareAndSet(index(mr), 0, what);
    }

    /** Counts an outcome once it is recorded: a report made after the count includes it. */
    private void countOutcome() {
        lastOutcomeNanos = System.nanoTime();
        decided.incrementAndGet();
        undecided.countDown();
    }

    private int index(int[] mr) {
        return mr[0] * manifest.spec().reduces() + mr[1];
    }

    /** (map, reduce) of {@code shuffle_<shuffleId>_<map>_<reduce>}. */
    private int[] parse(String blockId) {
        String[] parts = blockId.split("_");
        if (parts.length != 4 || !"shuffle".equals(parts[0])
                || Integer.parseInt(parts[1]) != manifest.spec().shuffleId()) {
            throw new IllegalArgumentException("not a block of shuffle " + manifest.spec().shuffleId() + ": "
                    + blockId);
        }
        return new int[] {Integer.parseInt(parts[2]), Integer.parseInt(parts[3])};
    }
}
