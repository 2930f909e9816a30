package org.nettyrdma.channel;

import io.netty.channel.DefaultFileRegion;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.WritableByteChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * What one SEND of a {@code DefaultFileRegion} costs the event loop before the post: a slot's room (16,380 bytes, a
 * 16 KiB SEND less its header) filled from a file in the page cache, into direct memory as the send staging is.
 * {@code transferTo}: the region's own {@code transferTo} into a channel that puts into the slot, as the data path did
 * for every region and still does for other regions (the JDK reads through its temporary buffer, then the channel
 * copies); {@code positionalRead}: {@link FileRegionReader#read}, a positional {@code FileChannel.read} straight into
 * the slot. The region walks a 64 MiB file slot by slot (a new region per pass over it).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class FileRegionCopyBenchmark {
    private static final int FILE_BYTES = 64 << 20;
    private static final int SLOT = 16384;
    private static final int ROOM = SLOT - RdmaProtocol.HEADER_LENGTH;
    private Path file;
    private FileChannel channel;
    private final ByteBuffer staging = ByteBuffer.allocateDirect(16 * SLOT);
    private final ByteBuffer view = staging.duplicate();
    private final WritableByteChannel into = new ByteBufferSink(view);
    private DefaultFileRegion region;
    private int slot;

    @Setup(Level.Trial)
    public void setUp() throws IOException {
        if (!FileRegionReader.isAvailable()) {
            throw new IllegalStateException("FileRegionReader unavailable", FileRegionReader.unavailabilityCause());
        }
        file = Files.createTempFile("netty-rdma-region-", ".bin");
        SplittableRandom random = new SplittableRandom(5);
        byte[] block = new byte[1 << 20];
        try (OutputStream out = Files.newOutputStream(file)) {
            for (int i = 0; i < FILE_BYTES / block.length; i++) {
                random.nextBytes(block);
                out.write(block);
            }
        }
        channel = FileChannel.open(file, StandardOpenOption.READ);
        region = newRegion();
    }

    @TearDown(Level.Trial)
    public void tearDown() throws IOException {
        channel.close();
        Files.deleteIfExists(file);
    }

    private DefaultFileRegion newRegion() {
        return new DefaultFileRegion(channel, 0, FILE_BYTES);
    }

    /** The next slot's room, and a fresh region when this one is done. */
    private void nextSlot() {
        if (region.transferred() + ROOM > FILE_BYTES) {
            region = newRegion(); // not released: releasing would close the shared channel
        }
        int at = slot * SLOT + RdmaProtocol.HEADER_LENGTH;
        slot = (slot + 1) & 15;
        view.limit(at + ROOM).position(at);
    }

    @Benchmark
    public long transferTo() throws IOException {
        nextSlot();
        long n = region.transferTo(into, region.transferred());
        view.clear();
        return n;
    }

    @Benchmark
    public int positionalRead() throws IOException {
        nextSlot();
        int n = FileRegionReader.read(region, view);
        view.clear();
        return n;
    }
}
