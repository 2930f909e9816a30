package org.nettyrdma.shuffle;

import io.netty.channel.FileRegion;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.WritableByteChannel;

/**
 * A {@link FileRegion} that writes more bytes than its {@link #count()}, as Spark's SASL encryption does
 * ({@code SaslEncryption.EncryptedMessage}, and likewise any region that frames or encrypts its content): its count and
 * progress are in plain bytes, but each chunk of {@code chunk} plain bytes goes out framed, as a 4-byte length, the
 * bytes and an 8-byte trailer. A chunk's plain length is added to {@link #transferred()} once all of its framed bytes
 * are written; until then each call that wrote something reports one byte of progress. So the bytes a call may write
 * are not bounded by {@code count() - transferred()}: a writer that gives it no more room than that cuts its last
 * chunk short once the one-byte steps reach the count.
 */
final class ExpandingFileRegion extends TestFileRegion {
    static final int FRAMING = 4 + 8;

    private final byte[] plain;
    private final int chunk;
    private int chunkStart;
    private ByteBuffer framed;
    private long reportedOfChunk;

    ExpandingFileRegion(byte[] plain, int chunk) {
        this.plain = plain;
        this.chunk = chunk;
    }

    /** The bytes the region writes: every chunk framed. */
    static byte[] wireBytes(byte[] plain, int chunk) {
        ByteBuffer out = ByteBuffer.allocate(plain.length + ((plain.length + chunk - 1) / chunk) * FRAMING);
        for (int start = 0; start < plain.length; start += chunk) {
            out.put(frame(plain, start, Math.min(chunk, plain.length - start)));
        }
        return out.array();
    }

    private static ByteBuffer frame(byte[] plain, int start, int length) {
        ByteBuffer f = ByteBuffer.allocate(length + FRAMING);
        f.putInt(length).put(plain, start, length);
        long sum = 0;
        for (int i = start; i < start + length; i++) {
            sum = sum * 31 + plain[i];
        }
        return f.putLong(sum).flip();
    }

    @Override
    public long count() {
        return plain.length;
    }

    @Override
    public long transferTo(WritableByteChannel target, long position) throws IOException {
        if (position != transferred) {
            throw new IllegalArgumentException("position " + position + ", transferred " + transferred);
        }
        if (framed == null) {
            int length = Math.min(chunk, plain.length - chunkStart);
            framed = frame(plain, chunkStart, length);
            reportedOfChunk = 0;
        }
        int written = target.write(framed);
        if (!framed.hasRemaining()) {
            int length = Math.min(chunk, plain.length - chunkStart);
            long rest = length - reportedOfChunk;
            transferred += rest;
            chunkStart += length;
            framed = null;
            return rest;
        }
        if (written > 0 && reportedOfChunk < Math.min(chunk, plain.length - chunkStart) - 1) {
            reportedOfChunk++;
            transferred++;
            return 1;
        }
        return 0;
    }
}
