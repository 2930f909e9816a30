package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;
import org.nettyrdma.verbs.Access;
import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.MemoryWindow;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.VerbsException;
import org.nettyrdma.verbs.WorkRequestList;

import java.nio.ByteBuffer;

/**
 * The sending side of protocol v2's READ rendezvous on one connection (docs/rendezvous-design.md): the buffers it
 * exposes to the peer, each through a type-2 memory window bound over exactly its readable bytes on the connection's
 * QP, from the RNDV that announces it until the peer's DONE invalidates the window; the ids, in FIFO order; the checks
 * a DONE must pass; and the settlement of the bytes posted behind a rendezvous, which must not settle before it.
 *
 * <p>A rendezvous' bytes settle (their write completes) when both its DONE has arrived and the RNDV's own send slot has
 * completed (so that everything posted before it has), and only after every earlier rendezvous; bytes of send slots
 * posted behind an unsettled rendezvous are held as its <em>trailing</em> bytes and settle with it. Entries live in
 * a ring of {@link #MAX_RENDEZVOUS}, indexed by id. Event loop only; once its windows exist (allocated on first use,
 * one per entry, never per message) it allocates nothing.
 *
 * <p>The sender never invalidates a window itself: a window becomes free only by the peer's {@code SEND_WITH_INV}
 * (a window must be invalidated once only: rxe's kernel dereferences a null QP otherwise), and at teardown
 * {@link #close()} deallocates the windows, bound or not, before the QP is destroyed, then releases the buffers.
 */
final class RendezvousSends {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(RendezvousSends.class);

    /** Rendezvous one connection may have outstanding: exposed buffers, windows, and DONEs the peer may send. */
    static final int MAX_RENDEZVOUS = 4;
    private static final int MASK = MAX_RENDEZVOUS - 1;

    private final ProtectionDomain pd;
    private final MemoryWindow[] windows = new MemoryWindow[MAX_RENDEZVOUS];
    /** Per entry: the buffer exposed (retained by this table), its readable bytes, the window's rkey, where. */
    private final ByteBuf[] buffers = new ByteBuf[MAX_RENDEZVOUS];
    private final int[] lengths = new int[MAX_RENDEZVOUS];
    private final long[] addresses = new long[MAX_RENDEZVOUS];
    private final int[] rkeys = new int[MAX_RENDEZVOUS];
    /** Per entry: the send slot of its RNDV, and whether that slot completed; bytes of slots behind it held. */
    private final int[] rndvSlots = new int[MAX_RENDEZVOUS];
    private final boolean[] rndvCompleted = new boolean[MAX_RENDEZVOUS];
    private final long[] trailing = new long[MAX_RENDEZVOUS];
    /** Per send slot: the id of the newest rendezvous started when it was posted, if {@link #behind}. */
    private final int[] slotBehind;
    private final boolean[] behind;
    /** The id of the next rendezvous; of the next DONE expected; rendezvous started and not settled. */
    private int nextId;
    private int doneId;
    private int unsettled;
    private long exposedBytes;
    private boolean closed;
    /** The channel's and the loop's: {@link RdmaCounters#rendezvousExposedBytes()} follows {@link #exposedBytes}. */
    private final RdmaCounters counters;
    private final RdmaCounters loopCounters;

    /**
     * A table for a connection in {@code pd} whose send queue has {@code sendSlots} slots, counting the bytes it
     * exposes in the channel's {@code counters} and the loop's {@code loopCounters}.
     */
    RendezvousSends(ProtectionDomain pd, int sendSlots, RdmaCounters counters, RdmaCounters loopCounters) {
        this.pd = pd;
        this.counters = counters;
        this.loopCounters = loopCounters;
        slotBehind = new int[sendSlots];
        behind = new boolean[sendSlots];
    }

    /** Whether another rendezvous may start: fewer than {@link #MAX_RENDEZVOUS} are unsettled. */
    boolean canStart() {
        return unsettled < MAX_RENDEZVOUS && !closed;
    }

    /**
     * Starts a rendezvous of {@code buf}'s {@code length} readable bytes at {@code address} of {@code mr}: retains
     * {@code buf}, and writes into {@code wrs[i]} the BIND_MW that exposes those bytes, for RDMA READ, to the QP it is
     * posted on. The caller posts the bind, then the RNDV ({@link #putRendezvous}) in {@code rndvSlot}, and tells
     * {@link #posted} of every slot. Returns the rendezvous' id.
     *
     * @throws VerbsException if the entry's window could not be allocated (nothing started)
     */
    int start(ByteBuf buf, MemoryRegion mr, long address, int length, WorkRequestList wrs, int i, long wrId,
              int sendFlags, int rndvSlot) throws VerbsException {
        if (!canStart()) {
            throw new IllegalStateException("no rendezvous can start: " + this);
        }
        int id = nextId;
        int e = id & MASK;
        MemoryWindow mw = windows[e];
        if (mw == null) {
            mw = windows[e] = pd.allocMemoryWindow();
        }
        int rkey = mw.nextRkey();
        wrs.bindWindow(i, wrId, sendFlags, mw, rkey, mr, address, length, Access.REMOTE_READ);
        buffers[e] = buf.retain();
        lengths[e] = length;
        addresses[e] = address;
        rkeys[e] = rkey;
        rndvSlots[e] = rndvSlot;
        rndvCompleted[e] = false;
        trailing[e] = 0;
        nextId = id + 1;
        unsettled++;
        expose(length);
        return id;
    }

    /** Writes the RNDV message of rendezvous {@code id} at {@code at}, its header granting {@code credits}. */
    void putRendezvous(ByteBuffer buf, int at, int credits, int id) {
        int e = id & MASK;
        RdmaProtocol.putRendezvous(buf, at, credits, id, lengths[e], addresses[e], rkeys[e]);
    }

    /** A work request was posted in send slot {@code slot}: its bytes settle behind the newest rendezvous. */
    void posted(int slot) {
        behind[slot] = unsettled > 0;
        slotBehind[slot] = nextId - 1;
    }

    /** Whether send slot {@code slot}'s bytes settle behind a rendezvous: its completion is needed (its RNDV's too). */
    boolean behind(int slot) {
        return behind[slot];
    }

    /**
     * Send slot {@code slot}, whose work request carried {@code bytes} of the stream, completed: returns the bytes that
     * settle now (its own unless a rendezvous before it is unsettled, then also a rendezvous that this completion
     * settles: its RNDV's slot).
     */
    long completed(int slot, long bytes) {
        if (!behind[slot]) {
            return bytes;
        }
        behind[slot] = false;
        int id = slotBehind[slot];
        if (!isUnsettled(id)) {
            return bytes;
        }
        int e = id & MASK;
        trailing[e] += bytes;
        if (rndvSlots[e] == slot && !rndvCompleted[e]) {
            rndvCompleted[e] = true;
            return settle();
        }
        return 0;
    }

    /**
     * What is wrong with a DONE for rendezvous {@code id} whose receive completed with {@code invalidated} (its
     * {@code FLAG_WITH_INV}) naming {@code rkey}, as the peer did it, or {@code null}: DONEs come in RNDV order, one
     * each, each invalidating its rendezvous' window.
     */
    String checkDone(int id, boolean invalidated, int rkey) {
        if (doneId == nextId) {
            return "sent a DONE for rendezvous " + Integer.toUnsignedString(id) + " with none outstanding";
        }
        if (id != doneId) {
            return "sent a DONE for rendezvous " + Integer.toUnsignedString(id) + ", but the oldest outstanding is "
                    + Integer.toUnsignedString(doneId);
        }
        int expected = rkeys[id & MASK];
        if (!invalidated) {
            return "sent a DONE for rendezvous " + Integer.toUnsignedString(id) + " without invalidating its window "
                    + "(a SEND_WITH_INV of rkey 0x" + Integer.toHexString(expected) + ')';
        }
        if (rkey != expected) {
            return "sent a DONE for rendezvous " + Integer.toUnsignedString(id) + " invalidating rkey 0x"
                    + Integer.toHexString(rkey) + ", not its window's 0x" + Integer.toHexString(expected);
        }
        return null;
    }

    /**
     * The DONE of the oldest rendezvous without one, checked by {@link #checkDone}, arrived: its window is free again.
     * Returns the bytes that settle now.
     */
    long done() {
        int e = doneId & MASK;
        doneId++;
        expose(-lengths[e]);
        return settle();
    }

    /** Settles, oldest first, every rendezvous with its DONE and its RNDV's completion; returns their bytes. */
    private long settle() {
        long bytes = 0;
        while (unsettled > 0) {
            int id = nextId - unsettled;
            int e = id & MASK;
            if (!rndvCompleted[e] || id - doneId >= 0) { // (ids compare mod 2^32)
                break;
            }
            bytes += lengths[e] + trailing[e];
            ByteBuf buf = buffers[e];
            buffers[e] = null;
            unsettled--;
            buf.release();
        }
        return bytes;
    }

    /** Whether rendezvous {@code id} was started and has not settled (ids compare mod 2^32). */
    private boolean isUnsettled(int id) {
        return Integer.compareUnsigned(nextId - 1 - id, unsettled) < 0;
    }

    /** Bytes the peer may read now: of rendezvous whose DONE has not arrived. */
    long exposedBytes() {
        return exposedBytes;
    }

    /**
     * Teardown, with the QP in error or destroyed no later than after this: deallocates every window (a bound one is
     * invalidated by it, and a bound window would hold the QP and keep its buffer's region registered), then releases
     * the buffers of unsettled rendezvous. Idempotent.
     */
    void close() {
        if (closed) {
            return;
        }
        closed = true;
        for (int e = 0; e < MAX_RENDEZVOUS; e++) {
            MemoryWindow mw = windows[e];
            windows[e] = null;
            if (mw != null) {
                try {
                    mw.close();
                } catch (VerbsException ex) {
                    // its buffer's region then stays registered: never freed under the window
                    logger.warn("Failed to deallocate a rendezvous memory window; its buffer is not released", ex);
                    buffers[e] = null;
                }
            }
        }
        for (int e = 0; e < MAX_RENDEZVOUS; e++) {
            ByteBuf buf = buffers[e];
            buffers[e] = null;
            if (buf != null) {
                buf.release();
            }
        }
        unsettled = 0;
        expose(-exposedBytes);
    }

    private void expose(long bytes) {
        exposedBytes += bytes;
        counters.rendezvousExposedBytes += bytes;
        loopCounters.rendezvousExposedBytes += bytes;
    }

    @Override
    public String toString() {
        return "RendezvousSends(next id " + Integer.toUnsignedString(nextId) + ", unsettled " + unsettled
                + ", awaiting DONE " + (nextId - doneId) + ", exposed " + exposedBytes + " bytes)";
    }
}
