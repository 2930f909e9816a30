package org.nettyrdma.shuffle;

import org.apache.spark.network.shuffle.ExecutorDiskUtils;
import org.apache.spark.network.shuffle.protocol.ExecutorShuffleInfo;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;

/**
 * One executor's shuffle files in Spark's on-disk layout: its local directories ({@code blockmgr-*}, as
 * {@code spark.local.dir} gives them), {@code subDirsPerLocalDir} hashed subdirectories in each ({@code 00}..{@code 3f}
 * by default), and a file's place among them by Spark's own hash ({@link ExecutorDiskUtils#getFilePath}, what
 * {@code DiskBlockManager.getFile} does). The shuffle service learns the directories from the executor's
 * {@link ExecutorShuffleInfo} ({@link #info()}).
 */
public final class ShuffleLayout {
    /** Spark's {@code spark.diskStore.subDirectories} default. */
    public static final int SUB_DIRS_PER_LOCAL_DIR = 64;
    /** The shuffle manager executors report: sort-based shuffle, the only one Spark has. */
    public static final String SORT_SHUFFLE_MANAGER = "org.apache.spark.shuffle.sort.SortShuffleManager";

    private final String execId;
    private final String[] localDirs;
    private final int subDirsPerLocalDir;

    private ShuffleLayout(String execId, String[] localDirs, int subDirsPerLocalDir) {
        this.execId = execId;
        this.localDirs = localDirs;
        this.subDirsPerLocalDir = subDirsPerLocalDir;
    }

    /** Executor {@code execId} with {@code localDirCount} local directories under {@code root} (created). */
    public static ShuffleLayout create(File root, String execId, int localDirCount) throws IOException {
        String[] dirs = new String[localDirCount];
        for (int i = 0; i < localDirCount; i++) {
            File dir = new File(root, "executor-" + execId + "/blockmgr-" + i);
            Files.createDirectories(dir.toPath());
            dirs[i] = dir.getAbsolutePath();
        }
        return new ShuffleLayout(execId, dirs, SUB_DIRS_PER_LOCAL_DIR);
    }

    public String execId() {
        return execId;
    }

    /** What the executor registers with the shuffle service. */
    public ExecutorShuffleInfo info() {
        return new ExecutorShuffleInfo(localDirs.clone(), subDirsPerLocalDir, SORT_SHUFFLE_MANAGER);
    }

    /** The sort-shuffle data file of a map output: its blocks one after the other, in reduce order. */
    public File dataFile(int shuffleId, long mapId) {
        return file("shuffle_" + shuffleId + '_' + mapId + "_0.data");
    }

    /** The index of a map output: (reduces + 1) big-endian longs, the offset of each block and the end. */
    public File indexFile(int shuffleId, long mapId) {
        return file("shuffle_" + shuffleId + '_' + mapId + "_0.index");
    }

    private File file(String name) {
        return new File(ExecutorDiskUtils.getFilePath(localDirs, subDirsPerLocalDir, name));
    }
}
