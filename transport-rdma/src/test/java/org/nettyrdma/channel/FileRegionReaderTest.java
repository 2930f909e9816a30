package org.nettyrdma.channel;

import io.netty.channel.DefaultFileRegion;
import io.netty.util.IllegalReferenceCountException;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * {@link FileRegionReader} without a connection: a {@link DefaultFileRegion}'s bytes read positionally into a direct
 * buffer piece by piece, its {@code transferred()} advanced as its {@code transferTo} would, a region of a File opened
 * at its first read, a file truncated under a region, and which regions qualify. The data path's use of it is in
 * {@code RdmaTransportFileRegionTest}.
 */
class FileRegionReaderTest {
    private static final int FILE_BYTES = 100_000;
    private byte[] content;
    private Path file;

    @TempDir
    Path dir;

    @BeforeEach
    void setUp() throws IOException {
        assumeTrue(!"false".equals(System.getProperty("org.nettyrdma.fileRegion.directRead")),
                "switched off by -Dorg.nettyrdma.fileRegion.directRead=false");
        content = new byte[FILE_BYTES];
        new Random(3).nextBytes(content);
        file = dir.resolve("content.bin");
        Files.write(file, content);
    }

    private DefaultFileRegion region(long position, long count) throws IOException {
        return new DefaultFileRegion(new RandomAccessFile(file.toFile(), "r").getChannel(), position, count);
    }

    @Test
    void isAvailableOnTheClassPath() {
        // the tests run on the class path, as most applications do: Netty's private fields are reachable
        assertTrue(FileRegionReader.isAvailable(), () -> "unavailable: " + FileRegionReader.unavailabilityCause());
    }

    @Test
    void readsARegionAtAPositionPieceByPieceAndAdvancesTransferred() throws IOException {
        DefaultFileRegion region = region(12_345, 50_000);
        ByteBuffer slot = ByteBuffer.allocateDirect(16_380 + 100);
        byte[] got = new byte[50_000];
        int at = 0;
        while (at < got.length) {
            slot.clear().position(100); // a slot's room starts after its header
            int n = FileRegionReader.read(region, slot);
            assertEquals(Math.min(16_380, got.length - at), n, "a read fills the room, up to the region's end");
            assertEquals(100 + n, slot.position(), "the buffer's position moves by the bytes read");
            assertEquals(slot.capacity(), slot.limit(), "the buffer's limit is kept");
            slot.flip().position(100);
            slot.get(got, at, n);
            at += n;
            assertEquals(at, region.transferred(), "transferred() advances by the bytes read");
            assertEquals(50_000, region.count(), "count() stays");
        }
        assertArrayEquals(Arrays.copyOfRange(content, 12_345, 12_345 + 50_000), got, "the region's bytes");
        slot.clear();
        assertEquals(0, FileRegionReader.read(region, slot), "a region done reads nothing");
        assertEquals(0, slot.position(), "nor touches the buffer");
        assertEquals(0, FileRegionReader.read(region(0, 10), slot.limit(0)), "a buffer with no room reads nothing");
        region.release();
    }

    @Test
    void aRegionOfAFileIsOpenedAtItsFirstReadAndClosedWithItsRelease() throws IOException {
        DefaultFileRegion region = new DefaultFileRegion(file.toFile(), 7, 300);
        assertFalse(region.isOpen(), "not opened before its first transfer");
        ByteBuffer slot = ByteBuffer.allocateDirect(1000);
        assertEquals(300, FileRegionReader.read(region, slot));
        assertTrue(region.isOpen(), "opened by the read");
        slot.flip();
        byte[] got = new byte[300];
        slot.get(got);
        assertArrayEquals(Arrays.copyOfRange(content, 7, 307), got);
        assertTrue(region.release());
        assertFalse(region.isOpen(), "closed with its last release");
    }

    @Test
    void aFileTruncatedUnderARegionFailsTheReadWithTheSizes() throws IOException {
        DefaultFileRegion region = region(1000, 90_000);
        ByteBuffer slot = ByteBuffer.allocateDirect(16_000);
        assertEquals(16_000, FileRegionReader.read(region, slot));
        try (FileChannel writer = FileChannel.open(file, StandardOpenOption.WRITE)) {
            writer.truncate(20_000);
        }
        slot.clear();
        // what the file still has is read (a short read), then the end of the file fails the read
        assertEquals(20_000 - 17_000, FileRegionReader.read(region, slot), "the rest of the truncated file");
        assertEquals(3000, slot.position());
        slot.clear();
        IOException e = assertThrows(IOException.class, () -> FileRegionReader.read(region, slot));
        assertTrue(e.getMessage().contains("truncated") && e.getMessage().contains("20000 bytes")
                && e.getMessage().contains("ended at byte 20000") && e.getMessage().contains("end at byte 91000"),
                e.getMessage());
        assertEquals(19_000, region.transferred(), "transferred() is what was read");
        assertEquals(0, slot.position(), "nothing was read");
        region.release();
    }

    @Test
    void onlyADefaultFileRegionItselfQualifies() throws IOException {
        DefaultFileRegion plain = region(0, 10);
        DefaultFileRegion subclass = new DefaultFileRegion(file.toFile(), 0, 10) {
        };
        assertTrue(FileRegionReader.canRead(plain));
        assertFalse(FileRegionReader.canRead(subclass), "a subclass may override transferTo: it keeps using it");
        plain.release();
        subclass.release();
    }

    @Test
    void aReleasedRegionIsNotRead() throws IOException {
        DefaultFileRegion region = region(0, 10);
        region.release();
        assertThrows(IllegalReferenceCountException.class,
                () -> FileRegionReader.read(region, ByteBuffer.allocateDirect(10)));
    }
}
