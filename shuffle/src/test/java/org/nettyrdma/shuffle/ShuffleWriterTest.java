package org.nettyrdma.shuffle;

import org.apache.spark.network.buffer.ManagedBuffer;
import org.apache.spark.network.shuffle.ExternalShuffleBlockResolver;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.File;
import java.nio.ByteBuffer;
import java.util.HashSet;
import java.util.Set;
import java.util.zip.CRC32C;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The generated files are Spark's on-disk layout: Spark's own resolver ({@link ExternalShuffleBlockResolver}, what
 * {@code ExternalBlockHandler} serves from), given the executors' {@code ExecutorShuffleInfo}, finds every block where
 * the writer put it, with the manifest's size and checksum; and the manifest a reader computes from the spec alone is
 * the writer's.
 */
class ShuffleWriterTest {

    @Test
    void sparksResolverReadsEveryBlockFromTheWrittenFiles(@TempDir File dir) throws Exception {
        ShuffleSpec spec = new ShuffleSpec(3, 7, 5, 1, 300_000, 4, 99);
        GeneratedShuffle shuffle = GeneratedShuffle.write(dir, spec, 2);
        ExternalShuffleBlockResolver resolver =
                new ExternalShuffleBlockResolver(SparkNetworkConf.of(Security.NONE).build(), null);
        for (ShuffleLayout executor : shuffle.executors()) {
            resolver.registerExecutor("app", executor.execId(), executor.info());
        }
        ShuffleManifest computed = ShuffleManifest.compute(spec, 2);
        for (int map = 0; map < spec.maps(); map++) {
            String execId = shuffle.execIds().get(shuffle.manifest().executorOf(map));
            for (int reduce = 0; reduce < spec.reduces(); reduce++) {
                ManagedBuffer block = resolver.getBlockData("app", execId, spec.shuffleId(), map, reduce);
                ByteBuffer bytes = block.nioByteBuffer();
                assertEquals(shuffle.manifest().size(map, reduce), bytes.remaining(), spec.blockId(map, reduce));
                CRC32C crc = new CRC32C();
                crc.update(bytes);
                assertEquals(shuffle.manifest().crc(map, reduce), (int) crc.getValue(), spec.blockId(map, reduce));
                assertEquals(shuffle.manifest().crc(map, reduce), computed.crc(map, reduce));
                assertEquals(shuffle.manifest().size(map, reduce), computed.size(map, reduce));
            }
        }
        assertEquals(spec.maxBlock(), shuffle.manifest().size(0, 0));
        assertEquals(spec.minBlock(), shuffle.manifest().size(0, 1));
        // Spark's hashing spreads the files over the executors' local directories and their subdirectories
        Set<File> dirs = new HashSet<>();
        for (ShuffleLayout executor : shuffle.executors()) {
            for (int map = 0; map < spec.maps(); map++) {
                File data = executor.dataFile(spec.shuffleId(), map);
                if (data.exists()) {
                    dirs.add(data.getParentFile());
                }
            }
        }
        assertTrue(dirs.size() > 1, "the data files are in " + dirs);
    }
}
