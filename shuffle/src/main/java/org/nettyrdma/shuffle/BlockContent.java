package org.nettyrdma.shuffle;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.SplittableRandom;
import java.util.zip.CRC32C;

/**
 * The deterministic size and bytes of each block of a {@link ShuffleSpec}: a function of the spec's seed and the
 * block's coordinates only, so that a reader in another process can tell what every block must hold without reading
 * the writer's files.
 */
public final class BlockContent {
    private BlockContent() {
    }

    /** The size in bytes of block ({@code map}, {@code reduce}). */
    public static int size(ShuffleSpec spec, int map, int reduce) {
        if (map == 0 && reduce == 0) {
            return spec.maxBlock();
        }
        if (map == 0 && reduce == 1) {
            return spec.minBlock();
        }
        SplittableRandom random = new SplittableRandom(mix(spec.seed(), spec.shuffleId(), map, reduce) ^ 0x5157L);
        int split = Math.min(ShuffleSpec.SMALL_LIMIT, spec.maxBlock());
        boolean large = random.nextInt(spec.largeOneIn()) == 0 && split < spec.maxBlock();
        int low = large ? split : spec.minBlock();
        int high = large ? spec.maxBlock() : split;
        double logSize = Math.log(low) + random.nextDouble() * (Math.log(high) - Math.log(low));
        return (int) Math.max(low, Math.min(high, Math.round(Math.exp(logSize))));
    }

    /** Fills {@code out} (position to limit) with the block's bytes from its start. */
    public static void fill(ShuffleSpec spec, int map, int reduce, ByteBuffer out) {
        SplittableRandom random = new SplittableRandom(mix(spec.seed(), spec.shuffleId(), map, reduce));
        ByteBuffer longs = out.slice().order(ByteOrder.LITTLE_ENDIAN);
        while (longs.remaining() >= Long.BYTES) {
            longs.putLong(random.nextLong());
        }
        long last = random.nextLong();
        while (longs.hasRemaining()) {
            longs.put((byte) last);
            last >>>= 8;
        }
        out.position(out.limit());
    }

    /** The block's bytes. */
    public static ByteBuffer bytes(ShuffleSpec spec, int map, int reduce) {
        ByteBuffer b = ByteBuffer.allocate(size(spec, map, reduce));
        fill(spec, map, reduce, b);
        return b.flip();
    }

    /** CRC32C of the block's bytes (computed from them: what a reader compares the block it got with). */
    public static int crc(ShuffleSpec spec, int map, int reduce) {
        CRC32C crc = new CRC32C();
        crc.update(bytes(spec, map, reduce));
        return (int) crc.getValue();
    }

    private static long mix(long seed, int shuffle, int map, int reduce) {
        long h = seed * 0x9E3779B97F4A7C15L + shuffle;
        h = (h ^ (h >>> 31)) * 0xBF58476D1CE4E5B9L + map;
        h = (h ^ (h >>> 29)) * 0x94D049BB133111EBL + reduce;
        return h ^ (h >>> 32);
    }
}
