package org.nettyrdma.shuffle;

import io.netty.buffer.ByteBuf;
import io.netty.channel.FileRegion;

import java.io.IOException;
import java.nio.channels.WritableByteChannel;

/**
 * A {@link FileRegion} over a {@link ByteBuf} whose {@link #count()} is what the buffer has left to read, as Spark's
 * {@code SaslEncryption.EncryptedMessage} of a ByteBuf counts (every message without a body: RPC requests, chunk
 * requests): once {@code transferTo} has taken the bytes, {@code count()} is 0 and {@link #transferred()} the whole
 * size. Netty's transports end a region when {@code transferred() >= count()}; a transport that takes {@code count()}
 * for the region's size after it was written gets 0 for it.
 */
final class ShrinkingFileRegion extends TestFileRegion {
    private final ByteBuf buf;

    ShrinkingFileRegion(ByteBuf buf) {
        this.buf = buf;
    }

    @Override
    public long count() {
        return buf.readableBytes();
    }

    @Override
    public long transferTo(WritableByteChannel target, long position) throws IOException {
        int written = target.write(buf.nioBuffer());
        buf.skipBytes(written);
        transferred += written;
        return written;
    }

    @Override
    protected void deallocate() {
        buf.release();
    }
}
