package org.nettyrdma.shuffle;

/**
 * A generated shuffle: {@code maps} map outputs of {@code reduces} blocks each, block sizes from {@code minBlock} to
 * {@code maxBlock} bytes, content from {@code seed} ({@link BlockContent}). Most blocks are small (log-uniform up to
 * {@link #SMALL_LIMIT}), one in {@code largeOneIn} large (log-uniform from there up to {@code maxBlock}), as skewed
 * shuffles are; block (map 0, reduce 0) is always {@code maxBlock} bytes and block (0, 1) {@code minBlock}, so that
 * both ends of the range are fetched every time.
 */
public record ShuffleSpec(int shuffleId, int maps, int reduces, int minBlock, int maxBlock, int largeOneIn,
                          long seed) {
    /** Where small blocks end and large ones begin (or {@code maxBlock}, if smaller). */
    public static final int SMALL_LIMIT = 64 * 1024;

    public ShuffleSpec {
        if (maps < 1 || reduces < 2 || minBlock < 1 || maxBlock < minBlock || largeOneIn < 1 || shuffleId < 0) {
            throw new IllegalArgumentException("shuffle " + shuffleId + ": " + maps + " maps x " + reduces
                    + " reduces, blocks " + minBlock + ".." + maxBlock + ", 1 in " + largeOneIn + " large");
        }
    }

    /** The shape: 200 map outputs of 50 blocks from 1 KiB to 8 MiB, one block in 100 large. */
    public static ShuffleSpec standard(long seed) {
        return new ShuffleSpec(0, 200, 50, 1024, 8 << 20, 100, seed);
    }

    public int blocks() {
        return maps * reduces;
    }

    /** Spark's name of a block of sort-based shuffle output: {@code shuffle_<shuffleId>_<mapId>_<reduceId>}. */
    public String blockId(int map, int reduce) {
        return "shuffle_" + shuffleId + '_' + map + '_' + reduce;
    }

    @Override
    public String toString() {
        return maps + " maps x " + reduces + " reduces, blocks " + minBlock + ".." + maxBlock + " B (1 in "
                + largeOneIn + " above " + Math.min(SMALL_LIMIT, maxBlock) + " B), seed " + seed;
    }
}
