package org.nettyrdma.shuffle;

import java.util.zip.CRC32C;

/**
 * What every block of a generated shuffle must be (its size and CRC32C) and which executor holds its map output: map
 * {@code m} of a shuffle spread over {@code n} executors lives on executor {@code m % n}. The writer records it while
 * it writes ({@link ShuffleWriter}); a reader in another process {@linkplain #compute computes} the same from the spec.
 */
public final class ShuffleManifest {
    private final ShuffleSpec spec;
    private final int executors;
    private final int[] sizes;
    private final int[] crcs;

    ShuffleManifest(ShuffleSpec spec, int executors) {
        if (executors < 1 || executors > spec.maps()) {
            throw new IllegalArgumentException(executors + " executors for " + spec.maps() + " maps");
        }
        this.spec = spec;
        this.executors = executors;
        this.sizes = new int[spec.blocks()];
        this.crcs = new int[spec.blocks()];
    }

    /** The manifest of {@code spec} spread over {@code executors}, from the blocks' content (nothing is read). */
    public static ShuffleManifest compute(ShuffleSpec spec, int executors) {
        ShuffleManifest m = new ShuffleManifest(spec, executors);
        for (int map = 0; map < spec.maps(); map++) {
            for (int reduce = 0; reduce < spec.reduces(); reduce++) {
                CRC32C crc = new CRC32C();
                crc.update(BlockContent.bytes(spec, map, reduce));
                m.record(map, reduce, BlockContent.size(spec, map, reduce), (int) crc.getValue());
            }
        }
        return m;
    }

    void record(int map, int reduce, int size, int crc) {
        sizes[index(map, reduce)] = size;
        crcs[index(map, reduce)] = crc;
    }

    public ShuffleSpec spec() {
        return spec;
    }

    public int executors() {
        return executors;
    }

    /** The executor (0-based) that holds map {@code map}'s output. */
    public int executorOf(int map) {
        return map % executors;
    }

    public int size(int map, int reduce) {
        return sizes[index(map, reduce)];
    }

    public int crc(int map, int reduce) {
        return crcs[index(map, reduce)];
    }

    /** The bytes of all blocks. */
    public long totalBytes() {
        long total = 0;
        for (int s : sizes) {
            total += s;
        }
        return total;
    }

    private int index(int map, int reduce) {
        if (map < 0 || map >= spec.maps() || reduce < 0 || reduce >= spec.reduces()) {
            throw new IndexOutOfBoundsException("block (" + map + ", " + reduce + ") of " + spec);
        }
        return map * spec.reduces() + reduce;
    }
}
