package org.nettyrdma.shuffle;

import java.io.BufferedOutputStream;
import java.io.DataOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.zip.CRC32C;

/**
 * Writes a {@link ShuffleSpec}'s map outputs as Spark's sort-based shuffle writes them: per map output one data file,
 * the reduce partitions' blocks one after the other, and one index file of (reduces + 1) big-endian longs, the offset
 * where each block starts and the end of the last one; each at the place {@link ShuffleLayout} gives it, on the
 * executor that ran the map ({@link ShuffleManifest#executorOf}).
 */
public final class ShuffleWriter {
    private ShuffleWriter() {
    }

    /** Writes every map output of {@code spec}, map {@code m} on {@code executors.get(m % executors.size())}. */
    public static ShuffleManifest write(ShuffleSpec spec, List<ShuffleLayout> executors) throws IOException {
        ShuffleManifest manifest = new ShuffleManifest(spec, executors.size());
        ByteBuffer block = ByteBuffer.allocateDirect(spec.maxBlock());
        for (int map = 0; map < spec.maps(); map++) {
            writeMap(spec, map, executors.get(manifest.executorOf(map)), manifest, block);
        }
        return manifest;
    }

    private static void writeMap(ShuffleSpec spec, int map, ShuffleLayout layout, ShuffleManifest manifest,
                                 ByteBuffer block) throws IOException {
        File data = layout.dataFile(spec.shuffleId(), map);
        Files.createDirectories(data.getParentFile().toPath());
        long[] offsets = new long[spec.reduces() + 1];
        try (FileChannel out = FileChannel.open(data.toPath(), StandardOpenOption.CREATE,
                StandardOpenOption.TRUNCATE_EXISTING, StandardOpenOption.WRITE)) {
            for (int reduce = 0; reduce < spec.reduces(); reduce++) {
                int size = BlockContent.size(spec, map, reduce);
                block.clear().limit(size);
                BlockContent.fill(spec, map, reduce, block);
                block.flip();
                CRC32C crc = new CRC32C();
                crc.update(block.duplicate());
                manifest.record(map, reduce, size, (int) crc.getValue());
                while (block.hasRemaining()) {
                    out.write(block);
                }
                offsets[reduce + 1] = offsets[reduce] + size;
            }
        }
        File index = layout.indexFile(spec.shuffleId(), map);
        Files.createDirectories(index.getParentFile().toPath());
        try (OutputStream file = Files.newOutputStream(index.toPath());
             DataOutputStream out = new DataOutputStream(new BufferedOutputStream(file))) {
            for (long offset : offsets) {
                out.writeLong(offset);
            }
        }
    }
}
