package org.nettyrdma.channel;

import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;
import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.VerbsException;

import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.Arrays;

/**
 * The send staging of an event loop's connections on one device with one message size: slots of {@code slotSize}
 * registered bytes, which a connection takes for a SEND while it is in flight and gives back at its completion, so that
 * an idle connection holds none (docs/architecture.md, "Send staging"). Slots come from regions of up to {@link
 * #MAX_REGION_BYTES} registered when the free slots run out, as long as the loop's {@link Budget} allows; regions are
 * kept while a connection uses the pool, and freed when the last one leaves ({@link #leave}). Free slots are an {@code
 * int} stack: taking or giving one back is two int operations and allocates nothing. When none is free and none can be
 * registered, the connection waits ({@link #await}) and is woken when a slot comes back, one waiter per slot, in the
 * order they came. Regions a burst needed are given back once the pool has been quiet for {@link #IDLE_TICKS} of the
 * loop's ticks ({@link #tick}): no slot out, none taken meanwhile.
 *
 * <p>A slot is given back only once no work request can read it (its SEND completed, or its QP is destroyed), and
 * regions are freed only with no slot out (the last send queue leaving, or {@link #close()}, or the last slot back
 * after it): the device never reads freed memory. Event loop only.
 */
final class StagingPool {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(StagingPool.class);
    /** A region holds this many bytes of slots at most (one slot if a slot is larger). */
    static final int MAX_REGION_BYTES = 1 << 20;
    /** ... and at most this many slots. */
    static final int MAX_REGION_SLOTS = 256;
    /** The inline scratch: control messages (a header, a RING message) are written here and posted inline. */
    static final int SCRATCH_BYTES = 4096;
    /** Ticks of the loop ({@link RdmaIoHandler#TICK_MILLIS} each) without a slot taken before the regions go. */
    static final int IDLE_TICKS = 5;

    /** What woken waiters do: flush again (a connection touches itself for the end of the batch). */
    interface Waiter {
        void stagingFreed();
    }

    /** The registered staging bytes an event loop may hold in all its pools, and what they hold. */
    static final class Budget {
        final long capBytes;
        long usedBytes;

        Budget(long capBytes) {
            this.capBytes = capBytes;
        }
    }

    final ProtectionDomain pd;
    final int slotSize;
    private final int slotsPerRegion;
    private final Budget budget;
    private final RdmaCounters loopCounters;
    private RegisteredRegion[] regions = new RegisteredRegion[4];
    private ByteBuffer[] views = new ByteBuffer[4];
    private long[] addresses = new long[4];
    private int[] lkeys = new int[4];
    private int regionCount;
    private int[] free = new int[0];
    private int freeCount;
    private int inUse;
    /** Send queues on this pool ({@link #join}, {@link #leave}). */
    private int users;
    private final ArrayDeque<Waiter> waiters = new ArrayDeque<>();
    private RegisteredRegion scratch;
    private MemoryRegion scratchMr;
    private ByteBuffer scratchView;
    private boolean closed;
    /** Whether the loop's cap stopped a growth since the last warning. */
    private boolean capWarned;
    /** Whether a slot was taken since the last {@link #tick}. */
    private boolean taken;
    /** The loop's ticks in a row without a slot taken. */
    private int quietTicks;

    /**
     * A pool of {@code slotSize}-byte slots registered in {@code pd}, within {@code budget}; the bytes it registers are
     * counted in {@code loopCounters}.
     */
    StagingPool(ProtectionDomain pd, int slotSize, Budget budget, RdmaCounters loopCounters) {
        if (slotSize <= 0) {
            throw new IllegalArgumentException("slotSize: " + slotSize);
        }
        this.pd = pd;
        this.slotSize = slotSize;
        this.budget = budget;
        this.loopCounters = loopCounters;
        slotsPerRegion = Math.max(1, Math.min(MAX_REGION_SLOTS, MAX_REGION_BYTES / slotSize));
    }

    /**
     * A free slot, registering another region if none is free and the budget allows; -1 if none can be had now (the
     * caller waits: {@link #await}). A pool without a region registers its first whatever the other pools of the loop
     * hold (their slots would never wake its waiters): the cap may be passed by that much. Throws if a region's
     * registration failed, or if the cap is below one region: the cause and the fix are in the message.
     */
    int acquire() throws VerbsException {
        if (closed || freeCount == 0 && !grow()) {
            return -1;
        }
        inUse++;
        taken = true;
        return free[--freeCount];
    }

    /**
     * The loop's tick: after {@link #IDLE_TICKS} in a row without a slot taken, and with none out, the regions are freed
     * (the scratch stays) and counted out of the loop's registered bytes; the next SEND registers again. A connection
     * that is sometimes idle pays a region's registration after each quiet spell; one that stays idle holds none.
     */
    void tick() {
        quietTicks = taken ? 0 : quietTicks + 1;
        taken = false;
        if (quietTicks >= IDLE_TICKS && inUse == 0 && regionCount > 0 && !closed) {
            freeSlotRegions();
        }
    }

    /**
     * Gives back {@code slot} (no work request reads it any more) and wakes the longest waiter, if any. After
     * {@link #close()}, the last slot back frees the regions.
     */
    void release(int slot) {
        inUse--;
        if (closed) {
            if (inUse == 0) {
                freeRegions();
            }
            return;
        }
        free[freeCount++] = slot;
        Waiter w = waiters.poll();
        if (w != null) {
            w.stagingFreed();
        }
    }

    /** Whether a slot can be had now without waiting (free, or a region may still be registered). */
    boolean canAcquire() {
        return !closed && (freeCount > 0 || regionCount == 0 && regionBytes() <= budget.capBytes
                || budget.usedBytes + regionBytes() <= budget.capBytes);
    }

    /** {@code w} is woken (once) when a slot comes back; the caller queues it only if it is not queued already. */
    void await(Waiter w) {
        waiters.add(w);
    }

    /** {@code w}, queued, no longer waits (its connection is gone). */
    void forget(Waiter w) {
        waiters.remove(w);
    }

    int waiterCount() {
        return waiters.size();
    }

    /** The SGE address of {@code slot}'s first byte. */
    long address(int slot) {
        return addresses[slot / slotsPerRegion] + offset(slot);
    }

    int lkey(int slot) {
        return lkeys[slot / slotsPerRegion];
    }

    /** A view of the region that holds {@code slot}, shared by the loop's connections: absolute puts, then clear(). */
    ByteBuffer view(int slot) {
        return views[slot / slotsPerRegion];
    }

    /** Where {@code slot} starts in {@link #view}. */
    int offset(int slot) {
        return (slot % slotsPerRegion) * slotSize;
    }

    /**
     * The inline scratch of this pool's device: a control message is written at its start and posted inline (the
     * device copies it at post), so it may be reused at once. Registered on first use.
     */
    ByteBuffer scratchView() throws VerbsException {
        if (closed) {
            throw new VerbsException("ibv_post_send", org.nettyrdma.verbs.Errno.EBADF, "send staging is closed: the "
                    + "event loop ended");
        }
        if (scratch == null) {
            RegisteredRegion r = new RegisteredRegion(SCRATCH_BYTES);
            try {
                scratchMr = r.memoryRegion(pd);
            } catch (VerbsException | RuntimeException e) {
                r.close();
                throw e;
            }
            scratch = r;
            scratchView = r.memory().duplicate();
            loopCounters.registeredBytes += SCRATCH_BYTES; // outside the budget: one small region per pool
        }
        return scratchView;
    }

    long scratchAddress() {
        return scratchMr.address();
    }

    int scratchLkey() {
        return scratchMr.lkey();
    }

    /** A send queue takes its staging from this pool from now on. */
    void join() {
        users++;
    }

    /**
     * A send queue gave back its slots and no longer uses this pool (its QP is destroyed); when it was the last, the
     * regions are freed (the loop registers staging again when a connection needs it).
     */
    void leave() {
        users--;
        if (users == 0 && inUse == 0) {
            freeRegions();
        }
    }

    /** Slots out now. */
    int inUse() {
        return inUse;
    }

    /** Slots registered (free or out). */
    int capacity() {
        return regionCount * slotsPerRegion;
    }

    int slotsPerRegion() {
        return slotsPerRegion;
    }

    /** The bytes this pool registered: its regions and its scratch. */
    long registeredBytes() {
        return (long) regionCount * regionBytes() + (scratch != null ? SCRATCH_BYTES : 0);
    }

    private long regionBytes() {
        return (long) slotsPerRegion * slotSize;
    }

    private boolean grow() throws VerbsException {
        if (closed) {
            return false;
        }
        long bytes = regionBytes();
        if (regionCount > 0 && budget.usedBytes + bytes > budget.capBytes || bytes > budget.capBytes) {
            if (bytes > budget.capBytes) {
                throw new VerbsException("ibv_reg_mr", org.nettyrdma.verbs.Errno.ENOMEM, "send staging of "
                        + bytes + " bytes (" + slotsPerRegion + " SENDs of " + slotSize + " bytes) does not fit in "
                        + "what the event loop may register for staging (RdmaIoHandlerConfig.sendStagingBytes "
                        + budget.capBytes + ", " + budget.usedBytes + " in use): raise it, or lower "
                        + "RECEIVE_BUFFER_SIZE");
            }
            if (!capWarned) {
                capWarned = true;
                logger.debug("send staging at the event loop's cap (RdmaIoHandlerConfig.sendStagingBytes {}): "
                        + "writes wait for SENDs in flight to complete", budget.capBytes);
            }
            return false;
        }
        RegisteredRegion region = new RegisteredRegion((int) bytes);
        MemoryRegion mr;
        try {
            mr = region.memoryRegion(pd);
        } catch (VerbsException | RuntimeException e) {
            region.close();
            throw e;
        }
        if (regionCount == regions.length) {
            int n = regionCount * 2;
            regions = Arrays.copyOf(regions, n);
            views = Arrays.copyOf(views, n);
            addresses = Arrays.copyOf(addresses, n);
            lkeys = Arrays.copyOf(lkeys, n);
        }
        int r = regionCount++;
        regions[r] = region;
        views[r] = region.memory().duplicate();
        addresses[r] = mr.address();
        lkeys[r] = mr.lkey();
        int first = r * slotsPerRegion;
        free = Arrays.copyOf(free, capacity());
        // lowest slot on top: a pool used lightly keeps to the start of its first region
        for (int i = slotsPerRegion - 1; i >= 0; i--) {
            free[freeCount++] = first + i;
        }
        capWarned = false;
        budget.usedBytes += bytes;
        loopCounters.registeredBytes += bytes;
        return true;
    }

    /**
     * Frees the regions, if no slot is out; with slots out (a QP that could not be destroyed still names them) the
     * regions stay allocated and registered for good, rather than be freed under the device. Returns whether they
     * were freed. Idempotent.
     */
    boolean close() {
        if (closed) {
            return inUse == 0;
        }
        closed = true;
        waiters.clear();
        if (inUse > 0) {
            logger.debug("{} send staging slots of {} bytes are still out as the event loop ends: their regions are "
                    + "freed when the last comes back, never if its QP cannot be destroyed", inUse, slotSize);
            return false;
        }
        freeRegions();
        return true;
    }

    private void freeRegions() {
        freeSlotRegions();
        if (scratch != null) {
            scratch.close();
            scratch = null;
            loopCounters.registeredBytes -= SCRATCH_BYTES;
        }
    }

    /** Frees the regions of the slots (none may be out). */
    private void freeSlotRegions() {
        for (int i = 0; i < regionCount; i++) {
            regions[i].close();
            regions[i] = null;
            views[i] = null;
        }
        long bytes = regionCount * regionBytes();
        budget.usedBytes -= bytes;
        loopCounters.registeredBytes -= bytes;
        regionCount = 0;
        freeCount = 0;
    }

    @Override
    public String toString() {
        return "StagingPool{slotSize=" + slotSize + ", inUse=" + inUse + ", capacity=" + capacity() + ", waiters="
                + waiters.size() + '}';
    }
}
