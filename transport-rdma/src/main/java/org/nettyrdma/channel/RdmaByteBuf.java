package org.nettyrdma.channel;

import io.netty.buffer.AbstractReferenceCountedByteBuf;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.util.Recycler;
import io.netty.util.concurrent.FastThreadLocal;
import io.netty.util.internal.ObjectUtil;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.FileChannel;
import java.nio.channels.GatheringByteChannel;
import java.nio.channels.ScatteringByteChannel;

/**
 * A direct {@link ByteBuf} over {@code [offset, offset + capacity)} of a {@link RegisteredRegion}'s memory, so that
 * the transport can hand its bytes to the device as they are: buffer index {@code i} is region byte
 * {@link #regionOffset()} {@code + i}. Every access is a {@link ByteBuffer} absolute operation (no memory addresses,
 * so it needs no {@code sun.misc.Unsafe}).
 *
 * <p>Pool-owned, from {@link RdmaByteBufAllocator}: growable up to its max capacity (growing past its slot moves it to
 * a larger one); releasing it returns its slot to the allocator and the object to a recycler. A connection's receive
 * buffer is such a buffer too: when the transport hands it to the pipeline it is {@linkplain #lend lent}, and its
 * release tells the lender ({@link LendHook}) how many bytes came back.
 */
final class RdmaByteBuf extends AbstractReferenceCountedByteBuf {

    /** Told when a lent buffer is released. */
    interface LendHook {
        /**
         * The released buffer may be taken back as it is, instead of its memory going back to its pool: if this
         * returns true, it is alive again (reference count 1) and the hook's. Called on the releasing thread first.
         */
        boolean reclaim(RdmaByteBuf buf);

        /**
         * A buffer lent with {@code bytes} was released (reclaimed, or its memory back in its pool). Called on the
         * thread that released it, which need not be the lender's.
         */
        void returned(int bytes);
    }

    private static final Recycler<RdmaByteBuf> RECYCLER = new Recycler<RdmaByteBuf>() {
        @Override
        protected RdmaByteBuf newObject(Handle<RdmaByteBuf> handle) {
            return new RdmaByteBuf(handle);
        }
    };

    private static final int STREAM_CHUNK = 8192;
    private static final FastThreadLocal<byte[]> STREAM_ARRAY = new FastThreadLocal<byte[]>() {
        @Override
        protected byte[] initialValue() {
            return new byte[STREAM_CHUNK];
        }
    };

    private final Recycler.Handle<RdmaByteBuf> recyclerHandle;

    private ByteBufAllocator alloc;
    /** The allocator that owns the memory. */
    private RdmaByteBufAllocator pool;
    /** Told at release when the buffer was lent; {@code null} otherwise. */
    private LendHook lendHook;
    private int lentBytes;
    private RegisteredRegion region;
    private ByteBuffer memory;
    /** Region offset of buffer index 0. */
    private int offset;
    private int length;
    /** Bytes available from {@code offset}: the slot (or dedicated region) size. */
    private int maxLength;
    /** The slab of the slot; {@code null} for a dedicated region. */
    private RdmaByteBufAllocator.Slab slab;
    private int slot;
    private ByteBuffer tmpNioBuf;
    private RegisteredRegion tmpNioBufRegion;
    /**
     * A send queue found this buffer's memory fit to send in place (a zero-copy SGE or ring write, of it or of a
     * slice, may read it): if it grows past its slot, its old memory is kept until release, as a SEND in flight may
     * still read it. Volatile: the application may grow a buffer on its own thread after writing a slice of it.
     */
    private volatile boolean sentInPlace;
    /** Memory this buffer grew out of while {@link #sentInPlace}, freed at release. */
    private Retired retired;

    /** Memory a buffer grew out of, kept until its release. */
    private static final class Retired {
        final RegisteredRegion region;
        final RdmaByteBufAllocator.Slab slab;
        final int slot;
        final Retired next;

        Retired(RegisteredRegion region, RdmaByteBufAllocator.Slab slab, int slot, Retired next) {
            this.region = region;
            this.slab = slab;
            this.slot = slot;
            this.next = next;
        }
    }

    private RdmaByteBuf(Recycler.Handle<RdmaByteBuf> recyclerHandle) {
        super(0);
        this.recyclerHandle = recyclerHandle;
    }

    /** A pool-owned buffer with no memory yet: {@link RdmaByteBufAllocator#allocate} gives it some. */
    static RdmaByteBuf newInstance(RdmaByteBufAllocator pool, int maxCapacity) {
        RdmaByteBuf buf = RECYCLER.get();
        buf.pool = pool;
        buf.alloc = pool;
        buf.maxCapacity(maxCapacity);
        buf.resetRefCnt();
        buf.length = 0;
        buf.setIndex(0, 0);
        buf.markReaderIndex();
        buf.markWriterIndex();
        return buf;
    }

    /**
     * Lends this buffer (the transport's, reference count 1) to the pipeline with the given indexes: when it is
     * released, {@code hook} gets {@code bytes} back.
     *
     * @return this buffer
     */
    RdmaByteBuf lend(LendHook hook, int bytes, int readerIndex, int writerIndex) {
        lendHook = ObjectUtil.checkNotNull(hook, "hook");
        lentBytes = bytes;
        setIndex(readerIndex, writerIndex);
        return this;
    }

    /** Puts a pool-owned buffer that never got memory back into the recycler. */
    void discard() {
        pool = null;
        alloc = null;
        recyclerHandle.recycle(this);
    }

    /** Called by the allocator (under its size-class lock) to give this buffer memory. */
    void attach(RegisteredRegion region, RdmaByteBufAllocator.Slab slab, int slot, int offset, int maxLength,
                int length) {
        if (region != tmpNioBufRegion) {
            tmpNioBuf = null;
            tmpNioBufRegion = null;
        }
        this.region = region;
        memory = region.memory();
        this.slab = slab;
        this.slot = slot;
        this.offset = offset;
        this.maxLength = maxLength;
        this.length = length;
    }

    /**
     * The {@link RdmaByteBuf} behind {@code buf}: {@code buf} itself, or the buffer a leak-detection wrapper (or
     * another {@link io.netty.buffer.WrappedByteBuf} of Netty's, which maps indexes one to one) wraps; {@code null}
     * for anything else, derived buffers (slices, duplicates) included.
     */
    static RdmaByteBuf unwrap(ByteBuf buf) {
        for (int depth = 0; depth < 4 && buf != null; depth++) {
            if (buf instanceof RdmaByteBuf) {
                return (RdmaByteBuf) buf;
            }
            if (!RdmaByteBufWrappers.isIndexPreservingWrapper(buf)) {
                return null;
            }
            buf = buf.unwrap();
        }
        return null;
    }

    /** The region this buffer's memory is in (it changes when a pool-owned buffer grows past its slot). */
    RegisteredRegion region() {
        return region;
    }

    /**
     * Whether this buffer's memory is a region of its own that a memory window may be bound over (a buffer larger than
     * its allocator's largest slot): a window over the region then exposes this buffer and nothing else.
     */
    boolean isAloneInRegion() {
        RegisteredRegion region = this.region;
        return slab == null && region != null && region.isBindable();
    }

    /** The offset in {@link #region()} of buffer index 0. */
    int regionOffset() {
        return offset;
    }

    private int idx(int index) {
        return offset + index;
    }

    @Override
    public int capacity() {
        return length;
    }

    @Override
    public int maxFastWritableBytes() {
        return Math.min(maxLength, maxCapacity()) - writerIndex();
    }

    @Override
    public ByteBuf capacity(int newCapacity) {
        if (newCapacity == length) {
            ensureAccessible();
            return this;
        }
        checkNewCapacity(newCapacity);
        boolean fits = newCapacity <= maxLength;
        boolean tooRoomy = newCapacity <= maxLength >>> 1 && maxLength > RdmaByteBufAllocator.MIN_SLOT_SIZE;
        if (fits && !tooRoomy) {
            length = newCapacity;
            if (newCapacity < writerIndex()) {
                trimIndicesToCapacity(newCapacity);
            }
            return this;
        }
        RegisteredRegion oldRegion = region;
        RdmaByteBufAllocator.Slab oldSlab = slab;
        int oldSlot = slot;
        ByteBuffer oldMemory = memory;
        int oldOffset = offset;
        int oldLength = length;
        pool.allocate(this, newCapacity);
        memory.put(offset, oldMemory, oldOffset, Math.min(oldLength, newCapacity));
        if (newCapacity < oldLength) {
            trimIndicesToCapacity(newCapacity);
        }
        if (sentInPlace) {
            // a zero-copy SEND of the old memory may be in flight: the buffer (or a slice) stays in the channel's
            // outbound buffer until its completion, so the memory is safe to free when the buffer is released
            retired = new Retired(oldRegion, oldSlab, oldSlot, retired);
        } else {
            pool.free(oldRegion, oldSlab, oldSlot);
        }
        return this;
    }

    /** A send queue may hand this buffer's memory to the device; see {@link #sentInPlace}. Event loop only. */
    void markSentInPlace() {
        if (!sentInPlace) {
            sentInPlace = true;
        }
    }

    @Override
    protected void deallocate() {
        sentInPlace = false;
        for (Retired r = retired; r != null; r = r.next) {
            pool.free(r.region, r.slab, r.slot);
        }
        retired = null;
        LendHook lendHook = this.lendHook;
        if (lendHook != null) {
            this.lendHook = null;
            if (lendHook.reclaim(this)) {
                resetRefCnt();
                lendHook.returned(lentBytes);
                return;
            }
        }
        RdmaByteBufAllocator pool = this.pool;
        RegisteredRegion region = this.region;
        RdmaByteBufAllocator.Slab slab = this.slab;
        if (slab == null) {
            // a dedicated region is freed now: keep no view of it
            tmpNioBuf = null;
            tmpNioBufRegion = null;
        }
        this.pool = null;
        alloc = null;
        this.region = null;
        memory = null;
        this.slab = null;
        pool.free(region, slab, slot);
        if (lendHook != null) {
            lendHook.returned(lentBytes); // after the memory is back: what a lender counts as lent is still held
        }
        recyclerHandle.recycle(this);
    }

    @Override
    public ByteBufAllocator alloc() {
        return alloc;
    }

    @Override
    @SuppressWarnings("deprecation")
    public ByteOrder order() {
        return ByteOrder.BIG_ENDIAN;
    }

    @Override
    public ByteBuf unwrap() {
        return null;
    }

    @Override
    public boolean isDirect() {
        return true;
    }

    @Override
    public boolean hasArray() {
        return false;
    }

    @Override
    public byte[] array() {
        throw new UnsupportedOperationException("direct buffer");
    }

    @Override
    public int arrayOffset() {
        throw new UnsupportedOperationException("direct buffer");
    }

    @Override
    public boolean hasMemoryAddress() {
        return false;
    }

    @Override
    public long memoryAddress() {
        throw new UnsupportedOperationException("no memory address: registered buffers are accessed as ByteBuffers");
    }

    @Override
    public boolean isContiguous() {
        return true;
    }

    // primitive accessors

    @Override
    protected byte _getByte(int index) {
        return memory.get(idx(index));
    }

    @Override
    protected short _getShort(int index) {
        return memory.getShort(idx(index));
    }

    @Override
    protected short _getShortLE(int index) {
        return Short.reverseBytes(memory.getShort(idx(index)));
    }

    @Override
    protected int _getUnsignedMedium(int index) {
        int i = idx(index);
        return (memory.get(i) & 0xff) << 16 | (memory.get(i + 1) & 0xff) << 8 | memory.get(i + 2) & 0xff;
    }

    @Override
    protected int _getUnsignedMediumLE(int index) {
        int i = idx(index);
        return memory.get(i) & 0xff | (memory.get(i + 1) & 0xff) << 8 | (memory.get(i + 2) & 0xff) << 16;
    }

    @Override
    protected int _getInt(int index) {
        return memory.getInt(idx(index));
    }

    @Override
    protected int _getIntLE(int index) {
        return Integer.reverseBytes(memory.getInt(idx(index)));
    }

    @Override
    protected long _getLong(int index) {
        return memory.getLong(idx(index));
    }

    @Override
    protected long _getLongLE(int index) {
        return Long.reverseBytes(memory.getLong(idx(index)));
    }

    @Override
    protected void _setByte(int index, int value) {
        memory.put(idx(index), (byte) value);
    }

    @Override
    protected void _setShort(int index, int value) {
        memory.putShort(idx(index), (short) value);
    }

    @Override
    protected void _setShortLE(int index, int value) {
        memory.putShort(idx(index), Short.reverseBytes((short) value));
    }

    @Override
    protected void _setMedium(int index, int value) {
        int i = idx(index);
        memory.put(i, (byte) (value >>> 16));
        memory.put(i + 1, (byte) (value >>> 8));
        memory.put(i + 2, (byte) value);
    }

    @Override
    protected void _setMediumLE(int index, int value) {
        int i = idx(index);
        memory.put(i, (byte) value);
        memory.put(i + 1, (byte) (value >>> 8));
        memory.put(i + 2, (byte) (value >>> 16));
    }

    @Override
    protected void _setInt(int index, int value) {
        memory.putInt(idx(index), value);
    }

    @Override
    protected void _setIntLE(int index, int value) {
        memory.putInt(idx(index), Integer.reverseBytes(value));
    }

    @Override
    protected void _setLong(int index, long value) {
        memory.putLong(idx(index), value);
    }

    @Override
    protected void _setLongLE(int index, long value) {
        memory.putLong(idx(index), Long.reverseBytes(value));
    }

    // bulk transfers out

    @Override
    public ByteBuf getBytes(int index, ByteBuf dst, int dstIndex, int length) {
        checkDstIndex(index, length, dstIndex, dst.capacity());
        RdmaByteBuf rdmaDst;
        if (dst.hasArray()) {
            memory.get(idx(index), dst.array(), dst.arrayOffset() + dstIndex, length);
        } else if ((rdmaDst = unwrap(dst)) != null) {
            rdmaDst.checkIndex(dstIndex, length);
            rdmaDst.memory.put(rdmaDst.idx(dstIndex), memory, idx(index), length);
        } else if (dst.nioBufferCount() > 0) {
            for (ByteBuffer bb : dst.nioBuffers(dstIndex, length)) {
                int bbLength = bb.remaining();
                bb.put(bb.position(), memory, idx(index), bbLength);
                index += bbLength;
            }
        } else {
            dst.setBytes(dstIndex, this, index, length);
        }
        return this;
    }

    @Override
    public ByteBuf getBytes(int index, byte[] dst, int dstIndex, int length) {
        checkDstIndex(index, length, dstIndex, dst.length);
        memory.get(idx(index), dst, dstIndex, length);
        return this;
    }

    @Override
    public ByteBuf getBytes(int index, ByteBuffer dst) {
        int length = dst.remaining();
        checkIndex(index, length);
        int position = dst.position();
        dst.put(position, memory, idx(index), length);
        dst.position(position + length);
        return this;
    }

    @Override
    public ByteBuf getBytes(int index, OutputStream out, int length) throws IOException {
        checkIndex(index, length);
        if (length == 0) {
            return this;
        }
        byte[] tmp = STREAM_ARRAY.get();
        int i = idx(index);
        while (length > 0) {
            int chunk = Math.min(length, tmp.length);
            memory.get(i, tmp, 0, chunk);
            out.write(tmp, 0, chunk);
            i += chunk;
            length -= chunk;
        }
        return this;
    }

    @Override
    public int getBytes(int index, GatheringByteChannel out, int length) throws IOException {
        checkIndex(index, length);
        if (length == 0) {
            return 0;
        }
        return out.write(memory.slice(idx(index), length));
    }

    @Override
    public int getBytes(int index, FileChannel out, long position, int length) throws IOException {
        checkIndex(index, length);
        if (length == 0) {
            return 0;
        }
        return out.write(memory.slice(idx(index), length), position);
    }

    @Override
    public int readBytes(GatheringByteChannel out, int length) throws IOException {
        checkReadableBytes(length);
        if (length == 0) {
            return 0;
        }
        int readerIndex = readerIndex();
        int n = out.write(internalNioBuffer(readerIndex, length));
        readerIndex(readerIndex + n);
        return n;
    }

    @Override
    public int readBytes(FileChannel out, long position, int length) throws IOException {
        checkReadableBytes(length);
        if (length == 0) {
            return 0;
        }
        int readerIndex = readerIndex();
        int n = out.write(internalNioBuffer(readerIndex, length), position);
        readerIndex(readerIndex + n);
        return n;
    }

    // bulk transfers in

    @Override
    public ByteBuf setBytes(int index, ByteBuf src, int srcIndex, int length) {
        checkSrcIndex(index, length, srcIndex, src.capacity());
        RdmaByteBuf rdmaSrc;
        if (src.hasArray()) {
            memory.put(idx(index), src.array(), src.arrayOffset() + srcIndex, length);
        } else if ((rdmaSrc = unwrap(src)) != null) {
            rdmaSrc.checkIndex(srcIndex, length);
            memory.put(idx(index), rdmaSrc.memory, rdmaSrc.idx(srcIndex), length);
        } else if (src.nioBufferCount() > 0) {
            for (ByteBuffer bb : src.nioBuffers(srcIndex, length)) {
                int bbLength = bb.remaining();
                memory.put(idx(index), bb, bb.position(), bbLength);
                index += bbLength;
            }
        } else {
            src.getBytes(srcIndex, this, index, length);
        }
        return this;
    }

    @Override
    public ByteBuf setBytes(int index, byte[] src, int srcIndex, int length) {
        checkSrcIndex(index, length, srcIndex, src.length);
        memory.put(idx(index), src, srcIndex, length);
        return this;
    }

    @Override
    public ByteBuf setBytes(int index, ByteBuffer src) {
        int length = src.remaining();
        checkIndex(index, length);
        memory.put(idx(index), src, src.position(), length);
        src.position(src.limit());
        return this;
    }

    /**
     * Reads what {@code in} has, up to {@code length} bytes: as Netty's buffers do, it blocks at most for the first
     * read, and reads on only while {@code in} has more available without blocking.
     */
    @Override
    public int setBytes(int index, InputStream in, int length) throws IOException {
        checkIndex(index, length);
        byte[] tmp = STREAM_ARRAY.get();
        int i = idx(index);
        int total = 0;
        do {
            int chunk = Math.min(length - total, tmp.length);
            int n = in.read(tmp, 0, chunk);
            if (n <= 0) {
                // as in.read itself: -1 at the end of the stream, even when asked for nothing
                return total == 0 ? n : total;
            }
            memory.put(i + total, tmp, 0, n);
            total += n;
            if (n < chunk) {
                break;
            }
        } while (total < length && in.available() > 0);
        return total;
    }

    @Override
    public int setBytes(int index, ScatteringByteChannel in, int length) throws IOException {
        ByteBuffer tmpBuf = internalNioBuffer(index, length);
        try {
            return in.read(tmpBuf);
        } catch (ClosedChannelException ignored) {
            return -1;
        }
    }

    @Override
    public int setBytes(int index, FileChannel in, long position, int length) throws IOException {
        ByteBuffer tmpBuf = internalNioBuffer(index, length);
        try {
            return in.read(tmpBuf, position);
        } catch (ClosedChannelException ignored) {
            return -1;
        }
    }

    @Override
    public ByteBuf copy(int index, int length) {
        checkIndex(index, length);
        ByteBuf copy = alloc().directBuffer(length, maxCapacity());
        try {
            return copy.writeBytes(this, index, length);
        } catch (Throwable t) {
            copy.release();
            throw t;
        }
    }

    // NIO views

    @Override
    public int nioBufferCount() {
        return 1;
    }

    @Override
    public ByteBuffer nioBuffer(int index, int length) {
        checkIndex(index, length);
        return memory.slice(idx(index), length);
    }

    @Override
    public ByteBuffer[] nioBuffers(int index, int length) {
        return new ByteBuffer[] {nioBuffer(index, length)};
    }

    @Override
    public ByteBuffer internalNioBuffer(int index, int length) {
        checkIndex(index, length);
        ByteBuffer tmp = tmpNioBuf;
        if (tmp == null) {
            tmpNioBuf = tmp = memory.duplicate();
            tmpNioBufRegion = region;
        }
        int i = idx(index);
        tmp.clear().position(i).limit(i + length);
        return tmp;
    }

    @Override
    public String toString() {
        if (refCnt() == 0) {
            return "RdmaByteBuf(freed)";
        }
        return "RdmaByteBuf(ridx: " + readerIndex() + ", widx: " + writerIndex() + ", cap: " + capacity() + '/'
                + maxCapacity() + (lendHook != null ? ", lent" : "") + ", region offset: " + offset + ')';
    }
}
