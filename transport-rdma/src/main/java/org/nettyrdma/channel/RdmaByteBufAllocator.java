package org.nettyrdma.channel;

import io.netty.buffer.AbstractByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocatorMetric;
import io.netty.buffer.ByteBufAllocatorMetricProvider;
import io.netty.buffer.UnpooledHeapByteBuf;
import io.netty.buffer.UnpooledUnsafeHeapByteBuf;
import io.netty.util.internal.PlatformDependent;
import io.netty.util.internal.StringUtil;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.VerbsException;

import java.util.Arrays;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The RDMA transport's {@link io.netty.buffer.ByteBufAllocator}: direct buffers that live in <em>registered</em>
 * memory. Registered memory is memory that the RDMA device may read and write by itself: it is pinned and known to a
 * protection domain ({@code ibv_reg_mr}), so work requests can name it by address and key. The RDMA transport sends
 * buffers from this allocator straight from where they are, with no copy; any other buffer is first copied once into
 * registered staging memory.
 *
 * <p>Direct buffers ({@link #directBuffer()}, and {@link #buffer()} and {@link #ioBuffer()}, which are direct) are
 * carved from large regions of direct memory. Each region is registered lazily, once per protection domain that sends
 * from it, and stays registered while the allocator keeps it. Requests up to 1 MiB are rounded up to a power of two
 * from 64 bytes and served from a pool of such slots, carved from regions of up to 4 MiB; larger buffers get a region
 * of their own, deregistered and freed when the buffer is released. A region is never deregistered or reused while
 * any buffer in it is in use; of the regions that become wholly free, each size class keeps one and frees the others.
 * Heap buffers are ordinary unpooled heap buffers.
 *
 * <p>Thread-safe. Buffers may be allocated and released on any thread; on Netty's threads the buffer objects
 * themselves are recycled, so that allocating and releasing allocates no objects once warm.
 */
public final class RdmaByteBufAllocator extends AbstractByteBufAllocator implements ByteBufAllocatorMetricProvider {

    /** The smallest slot, in bytes. */
    static final int MIN_SLOT_SIZE = 64;
    /** The largest pooled slot, in bytes: larger buffers get a region of their own. */
    static final int DEFAULT_MAX_POOLED_SIZE = 1 << 20;
    /** The size of the regions that pooled slots are carved from, in bytes. */
    static final int DEFAULT_REGION_SIZE = 4 << 20;
    /**
     * Bytes of wholly free slabs the allocator keeps beyond one per size class; more are closed, so that a burst's
     * memory goes back. A pipeline that holds 16 MiB of 1 MiB buffers until a message is whole (an aggregator;
     * the READ rendezvous' chunks) and then releases them would otherwise have three of its four regions closed
     * and registered again for each message: a registration per 4 MiB per message on a real device.
     */
    static final long SPARE_BYTES = 16 << 20;
    /** Small slots come in regions of at most this many, so that tiny classes don't take a whole region each. */
    private static final int MAX_SLOTS_PER_REGION = 8192;
    private static final int MIN_SLOT_SHIFT = Integer.numberOfTrailingZeros(MIN_SLOT_SIZE);

    /** The allocator the transport uses unless a channel is told otherwise. */
    public static final RdmaByteBufAllocator DEFAULT = new RdmaByteBufAllocator();

    private final SizeClass[] sizeClasses;
    private final int maxPooledSize;
    private final AtomicLong registeredBytes = new AtomicLong();
    private final AtomicLong regionBytes = new AtomicLong();
    private final AtomicInteger regions = new AtomicInteger();
    private final AtomicInteger dedicatedInUse = new AtomicInteger();
    private final AtomicLong dedicatedBytesInUse = new AtomicLong();
    /** Bytes of wholly free slabs kept beyond each size class's first ({@link #SPARE_BYTES} at most). */
    private final AtomicLong spareBytes = new AtomicLong();
    private final ByteBufAllocatorMetric metric = new ByteBufAllocatorMetric() {
        @Override
        public long usedHeapMemory() {
            return -1;
        }

        @Override
        public long usedDirectMemory() {
            return regionBytes();
        }
    };

    /** An allocator whose {@link #buffer()} and {@link #ioBuffer()} are direct (registered). */
    public RdmaByteBufAllocator() {
        this(true);
    }

    /**
     * @param preferDirect whether {@link #buffer()} is direct (registered) rather than heap; {@link #ioBuffer()} and
     *                     {@link #directBuffer()} always are
     */
    public RdmaByteBufAllocator(boolean preferDirect) {
        this(preferDirect, DEFAULT_MAX_POOLED_SIZE, DEFAULT_REGION_SIZE);
    }

    /**
     * @param maxPooledSize the largest pooled slot: a power of two from {@value #MIN_SLOT_SIZE} bytes
     * @param regionSize    the size of the regions that slots are carved from, at least {@code maxPooledSize}
     */
    RdmaByteBufAllocator(boolean preferDirect, int maxPooledSize, int regionSize) {
        super(preferDirect);
        if (maxPooledSize < MIN_SLOT_SIZE || Integer.bitCount(maxPooledSize) != 1) {
            throw new IllegalArgumentException("maxPooledSize: " + maxPooledSize
                    + " (expected: a power of two, at least " + MIN_SLOT_SIZE + ')');
        }
        if (regionSize < maxPooledSize) {
            throw new IllegalArgumentException("regionSize: " + regionSize + " (expected: >= " + maxPooledSize + ')');
        }
        this.maxPooledSize = maxPooledSize;
        sizeClasses = new SizeClass[sizeClassIndex(maxPooledSize) + 1];
        for (int i = 0; i < sizeClasses.length; i++) {
            int slotSize = MIN_SLOT_SIZE << i;
            int slots = Math.max(1, Math.min(regionSize / slotSize, MAX_SLOTS_PER_REGION));
            sizeClasses[i] = new SizeClass(this, slotSize, slots);
        }
    }

    private static int sizeClassIndex(int size) {
        return size <= MIN_SLOT_SIZE ? 0 : 32 - Integer.numberOfLeadingZeros(size - 1) - MIN_SLOT_SHIFT;
    }

    @Override
    public boolean isDirectBufferPooled() {
        return true;
    }

    @Override
    protected ByteBuf newHeapBuffer(int initialCapacity, int maxCapacity) {
        return PlatformDependent.hasUnsafe()
                ? new UnpooledUnsafeHeapByteBuf(this, initialCapacity, maxCapacity)
                : new UnpooledHeapByteBuf(this, initialCapacity, maxCapacity);
    }

    @Override
    protected ByteBuf newDirectBuffer(int initialCapacity, int maxCapacity) {
        return toLeakAwareBuffer(untrackedBuffer(initialCapacity, maxCapacity));
    }

    /**
     * A direct buffer that the leak detector does not track (yet): a connection's receive buffer, which
     * {@link #trackLeaks} wraps when the transport lends it to the pipeline.
     */
    RdmaByteBuf untrackedBuffer(int initialCapacity, int maxCapacity) {
        RdmaByteBuf buf = RdmaByteBuf.newInstance(this, maxCapacity);
        try {
            allocate(buf, initialCapacity);
        } catch (Throwable t) {
            buf.discard();
            throw t;
        }
        return buf;
    }

    /** Gives {@code buf} memory for {@code capacity} bytes: a slot, or a region of its own. */
    void allocate(RdmaByteBuf buf, int capacity) {
        if (capacity <= maxPooledSize) {
            sizeClasses[sizeClassIndex(capacity)].allocate(buf, capacity);
        } else {
            // alone in its region: a memory window may expose exactly this buffer (the READ rendezvous)
            RegisteredRegion region = new RegisteredRegion(capacity, registeredBytes, true);
            regionBytes.addAndGet(capacity);
            regions.incrementAndGet();
            dedicatedInUse.incrementAndGet();
            dedicatedBytesInUse.addAndGet(capacity);
            buf.attach(region, null, 0, 0, capacity, capacity);
        }
    }

    /** Takes back memory that {@link #allocate} gave: {@code slab} is {@code null} for a region of its own. */
    void free(RegisteredRegion region, Slab slab, int slot) {
        if (slab == null) {
            dedicatedInUse.decrementAndGet();
            dedicatedBytesInUse.addAndGet(-region.capacity());
            closeRegion(region);
        } else {
            Slab empty = slab.sizeClass.free(slab, slot);
            if (empty != null) {
                closeRegion(empty.region);
            }
        }
    }

    private void closeRegion(RegisteredRegion region) {
        regions.decrementAndGet();
        regionBytes.addAndGet(-region.capacity());
        region.close();
    }

    /** The size of the slot (or dedicated region) that a buffer of {@code capacity} bytes gets. */
    int slotSize(int capacity) {
        return capacity <= maxPooledSize ? MIN_SLOT_SIZE << sizeClassIndex(capacity) : capacity;
    }

    /**
     * Wraps {@code buf} for leak detection, as this allocator's own buffers are, at the level that
     * {@code -Dio.netty.leakDetection.level} sets (for receive buffers that the transport hands to the pipeline).
     */
    static ByteBuf trackLeaks(ByteBuf buf) {
        return toLeakAwareBuffer(buf);
    }

    /**
     * Deregisters every region of this allocator from {@code pd}, so that {@code pd} can be closed. Call it only when
     * no work request on {@code pd} references this allocator's memory. Later use on {@code pd} registers again.
     */
    void deregister(ProtectionDomain pd) throws VerbsException {
        VerbsException failure = null;
        for (SizeClass sizeClass : sizeClasses) {
            for (RegisteredRegion region : sizeClass.regions()) {
                try {
                    region.deregister(pd);
                } catch (VerbsException e) {
                    if (failure == null) {
                        failure = e;
                    } else {
                        failure.addSuppressed(e);
                    }
                }
            }
        }
        if (failure != null) {
            throw failure;
        }
    }

    // metrics

    /**
     * Bytes of direct memory in this allocator's regions: pooled regions (in use or not) and the regions of large
     * buffers. Each is registered (pinned) once for every protection domain that has sent from it.
     */
    public long regionBytes() {
        return regionBytes.get();
    }

    /** How many regions this allocator holds. */
    public int regionCount() {
        return regions.get();
    }

    /** Bytes registered with RDMA devices: each region counts once for every protection domain it is registered in. */
    public long registeredBytes() {
        return registeredBytes.get();
    }

    /** Direct buffers allocated and not yet released. */
    public int buffersInUse() {
        int n = dedicatedInUse.get();
        for (SizeClass sizeClass : sizeClasses) {
            n += sizeClass.used();
        }
        return n;
    }

    /** Bytes of memory held by direct buffers in use: whole slots, and the regions of large buffers. */
    public long bytesInUse() {
        long n = dedicatedBytesInUse.get();
        for (SizeClass sizeClass : sizeClasses) {
            n += (long) sizeClass.used() * sizeClass.slotSize;
        }
        return n;
    }

    @Override
    public ByteBufAllocatorMetric metric() {
        return metric;
    }

    @Override
    public String toString() {
        return StringUtil.simpleClassName(this) + "(regions: " + regionCount() + ", regionBytes: " + regionBytes()
                + ", registeredBytes: " + registeredBytes() + ", buffersInUse: " + buffersInUse() + ')';
    }

    /**
     * The slots of one size, carved from {@link Slab}s. One lock per size class; nothing in it blocks except the
     * allocation of a new region's memory, which is rare.
     */
    private static final class SizeClass {

        final int slotSize;
        private final RdmaByteBufAllocator parent;
        private final int slotsPerSlab;
        private Slab[] slabs = new Slab[4];
        private int slabCount;
        /** Slabs with a free slot, as a stack: the top is allocated from first. */
        private Slab[] available = new Slab[4];
        private int availableCount;
        private int emptySlabs;
        private int used;

        SizeClass(RdmaByteBufAllocator parent, int slotSize, int slotsPerSlab) {
            this.parent = parent;
            this.slotSize = slotSize;
            this.slotsPerSlab = slotsPerSlab;
        }

        synchronized void allocate(RdmaByteBuf buf, int capacity) {
            if (availableCount == 0) {
                newSlab();
            }
            Slab slab = available[availableCount - 1];
            if (slab.freeCount == slotsPerSlab) {
                if (emptySlabs > 1) {
                    parent.spareBytes.addAndGet(-slabBytes());
                }
                emptySlabs--;
            }
            int slot = slab.free[--slab.freeCount];
            if (slab.freeCount == 0) {
                removeAvailable(slab);
            }
            used++;
            buf.attach(slab.region, slab, slot, slot * slotSize, slotSize, capacity);
        }

        /** Returns a slab that became empty and is to be closed, outside the lock, by the caller. */
        synchronized Slab free(Slab slab, int slot) {
            assert slab.freeCount < slotsPerSlab;
            slab.free[slab.freeCount++] = slot;
            used--;
            if (slab.freeCount == 1) {
                addAvailable(slab);
            }
            if (slab.freeCount == slotsPerSlab && ++emptySlabs > 1 && !keepSpare()) {
                emptySlabs--;
                removeAvailable(slab);
                Slab last = slabs[--slabCount];
                slabs[slab.index] = last;
                last.index = slab.index;
                slabs[slabCount] = null;
                return slab;
            }
            return null;
        }

        private int slabBytes() {
            return slotSize * slotsPerSlab;
        }

        /** Whether the allocator's spare bytes have room for one more wholly free slab of this class (taken if so). */
        private boolean keepSpare() {
            int bytes = slabBytes();
            if (parent.spareBytes.addAndGet(bytes) <= SPARE_BYTES) {
                return true;
            }
            parent.spareBytes.addAndGet(-bytes);
            return false;
        }

        synchronized int used() {
            return used;
        }

        synchronized RegisteredRegion[] regions() {
            RegisteredRegion[] regions = new RegisteredRegion[slabCount];
            for (int i = 0; i < slabCount; i++) {
                regions[i] = slabs[i].region;
            }
            return regions;
        }

        private void newSlab() {
            RegisteredRegion region = new RegisteredRegion(slotSize * slotsPerSlab, parent.registeredBytes);
            parent.regionBytes.addAndGet(region.capacity());
            parent.regions.incrementAndGet();
            Slab slab = new Slab(this, region, slotsPerSlab);
            if (slabCount == slabs.length) {
                slabs = Arrays.copyOf(slabs, slabCount << 1);
            }
            slab.index = slabCount;
            slabs[slabCount++] = slab;
            emptySlabs++;
            addAvailable(slab);
        }

        private void addAvailable(Slab slab) {
            if (availableCount == available.length) {
                available = Arrays.copyOf(available, availableCount << 1);
            }
            slab.availableIndex = availableCount;
            available[availableCount++] = slab;
        }

        private void removeAvailable(Slab slab) {
            int i = slab.availableIndex;
            Slab last = available[--availableCount];
            available[i] = last;
            last.availableIndex = i;
            available[availableCount] = null;
            slab.availableIndex = -1;
        }
    }

    /** One region cut into equal slots, with its free slots as an int stack. Guarded by its size class. */
    static final class Slab {
        final SizeClass sizeClass;
        final RegisteredRegion region;
        final int[] free;
        int freeCount;
        int index;
        int availableIndex = -1;

        Slab(SizeClass sizeClass, RegisteredRegion region, int slots) {
            this.sizeClass = sizeClass;
            this.region = region;
            free = new int[slots];
            // slot 0 on top, so that a fresh slab fills from its start
            for (int i = 0; i < slots; i++) {
                free[i] = slots - 1 - i;
            }
            freeCount = slots;
        }
    }
}
