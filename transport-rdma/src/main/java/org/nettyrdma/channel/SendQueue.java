package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.CompositeByteBuf;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.FileRegion;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;
import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.QueuePair;
import org.nettyrdma.verbs.SendFlags;
import org.nettyrdma.verbs.VerbsException;
import org.nettyrdma.verbs.WorkRequestList;
import org.nettyrdma.verbs.WrOpcode;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Arrays;

/**
 * Protocol v1's data path (docs/protocol.md, "Sending"): flushed bytes become SENDs of at most the message size, one
 * per credit, posted in chains of at most 32. SGE 0 of each SEND is a slot of registered staging memory taken from the
 * loop's {@link StagingPool} for as long as the SEND is in flight, holding the header and the bytes of small or
 * unregistered buffers (copied); registered buffers of at least the zero-copy threshold are further SGEs (no copy). A
 * SEND with nothing but staging bytes, short enough, goes inline and gives its slot back at once (the device copied
 * it at post); control messages short enough for inline are written in the pool's inline scratch and take no slot.
 * With no slot to be had the write waits, as for a credit, until another SEND of the loop gives one back. Of the work
 * requests that need a completion, the last of a chain is signalled, and one in {@link #SIGNAL_EVERY}; a completion
 * settles the payload bytes of its SEND and of those before it. A quiet SEND, one that needs no completion (inline, its
 * bytes settled at post or none, nothing awaiting it: a small message of a ping-pong, a CREDIT), goes unsignalled
 * until {@link #quietLimit} of them in a row ({@link #QUIET_SENDS}): the next completion retires it. A
 * {@link FileRegion}'s bytes are copied into staging by its {@code transferTo}, a {@code DefaultFileRegion}'s read
 * there straight from its file ({@link FileRegionReader}). With protocol v2's WRITE ring (docs/protocol.md),
 * registered pieces of at least a SEND's size go into the peer's ring by WRITE_WITH_IMM instead, in the same walk and
 * so in stream order. Allocates nothing per message. Event loop only.
 */
final class SendQueue implements DataPath, StagingPool.Waiter, RendezvousReceives.ReadPoster {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(SendQueue.class);
    /** Work requests posted with one call at most. */
    private static final int MAX_CHAIN = 32;
    /**
     * One SEND in this many asks for a completion, and always the last of a chain; a completion retires the SENDs
     * before it too (a send queue completes in order). docs/performance.md has the measurements that chose it.
     */
    static final int SIGNAL_EVERY = Integer.getInteger("org.nettyrdma.signalEvery", 1);
    /**
     * Whether quiet SENDs go unsignalled (the default): a round trip of small messages then costs each side one
     * completion, its receive's, not two. docs/performance.md has the measurements.
     */
    static final boolean QUIET_SENDS = Boolean.parseBoolean(System.getProperty("org.nettyrdma.quietSends", "true"));

    private final QueuePair qp;
    private final ProtectionDomain pd;
    /** A post was refused ({@link DataPath#postRefused()}). */
    private boolean postRefused;
    private final CreditWindow credits;
    private final FlushedMessages flushed;
    private final RdmaSocketChannelConfig config;
    private final RdmaCounters counters;
    private final RdmaCounters loopCounters;
    private final long wrIdBase;
    private final int depth;
    private final int maxSge;
    private final int maxInline;
    /** Bytes of a SEND at most, header included: the smaller receive buffer of both sides. */
    private final int messageSize;
    /** This side's WRITE ring, whose released count v2's CREDIT messages carry; null in protocol v1. */
    private final LocalRing localRing;
    /** The peer's WRITE ring, once its RING message arrived; null until then and in protocol v1. */
    private RingWriter peerRing;
    /** Protocol v2's READ rendezvous, when negotiated: the buffers this side exposes; else null. */
    private final RendezvousSends rendezvous;
    /** Readable bytes a registered buffer alone in its region needs at least to go by rendezvous. */
    private final int rendezvousThreshold;
    /** The loop's send staging for this device and message size. */
    private final StagingPool pool;
    /** What a slot given back to a waiting queue does: touches the connection, whose batch end flushes. */
    private final Runnable onStagingFreed;
    private final WorkRequestList wrs;
    /** The staging slot each send-queue slot's work request reads, or -1 (none: control, probe, ring write). */
    private final int[] staged;
    /** Bytes of the flushed messages each slot's SEND settles at its completion. */
    private final long[] slotBytes;
    /** Whether each slot's SEND is a control message (CREDIT, FIN). */
    private final boolean[] slotControl;
    private final Builder builder = new Builder();
    private final ByteBufferSink stagingWriter = new ByteBufferSink(null);
    private int inUse;
    private int next;
    /** The oldest slot not retired: completions retire slots from here, in order. */
    private int oldest;
    /** Work requests posted since the last signalled one. */
    private int unsignalled;
    /** A quiet SEND is signalled when this many in a row were not: a quarter of the queue, so most of it stays free. */
    private final int quietLimit;
    /** Whether each slot's work request is a quiet SEND posted unsignalled; how many such are in flight. */
    private final boolean[] slotQuiet;
    private int quietInFlight;
    /** How the loop arms its completion queues: told whether this queue waits for completions of its own. */
    private final SolicitedWakeups wakeups;
    /** Work requests posted and retired so far, and the count posted up to the last one whose completion is awaited. */
    private long postedCount;
    private long retiredCount;
    private long awaitedUntil;
    /** What {@link #wakeups} was last told: completions of this queue are awaited. */
    private boolean awaiting;
    /** The peer's messages do not ask for a solicited event ({@link RdmaProtocol#FLAG_SOLICITS}): always awaiting. */
    private boolean peerUnsolicited;
    private boolean waitsForRoom;
    /** Queued in the pool for a staging slot. */
    private boolean awaitsStaging;
    /** The peer's probe target, and where probes land; {@code probeLanding} null: probes read zero bytes. */
    private long probeAddress;
    private int probeRkey;
    private ProbeRegion probeLanding;
    /** The slot of the keep-alive probe in flight, or -1. */
    private int probeSlot = -1;
    /**
     * Whether the next work request posted gets {@code FENCE} if the probe is still in flight: soft-iWARP completes a
     * SEND as soon as its TCP stack took it, before an RDMA READ posted ahead of it has its response, and completions
     * retire slots in posted order. Never on a READ: siw refuses a fenced READ and drops the connection (READs are
     * only probes today, never posted while one is in flight; should one be, the fence goes on the next request that is
     * not a READ).
     */
    private boolean fenceNext;
    private long unsettledBytes;
    /**
     * Bytes of flushed messages settled when their SENDs were posted, not yet removed from the outbound buffer: SENDs
     * of copied bytes only, with nothing unsettled before them (see {@link #takeSettledAtPost()}).
     */
    private long settledAtPost;
    /** Whether the SENDs being built may settle at post: those of the outbound buffer, not of a close's linger. */
    private boolean settleAtPost;

    /**
     * A queue of {@code depth} SENDs of at most {@code messageSize} bytes ({@code pool}'s slot size) on {@code qp}
     * (work request ids {@code wrIdBase | slot}), staged in {@code pool}; {@code onStagingFreed} runs when a slot comes
     * back to a write that waits for one.
     */
    SendQueue(QueuePair qp, StagingPool pool, CreditWindow credits, FlushedMessages flushed,
              RdmaSocketChannelConfig config, RdmaCounters counters, RdmaCounters loopCounters, long wrIdBase,
              int depth, int maxSge, int maxInline, LocalRing localRing, boolean rendezvous, Runnable onStagingFreed,
              SolicitedWakeups wakeups) {
        this.qp = qp;
        this.wakeups = wakeups;
        this.pool = pool;
        this.pd = pool.pd;
        this.onStagingFreed = onStagingFreed;
        this.credits = credits;
        this.flushed = flushed;
        this.config = config;
        this.counters = counters;
        this.loopCounters = loopCounters;
        this.wrIdBase = wrIdBase;
        this.depth = depth;
        this.maxSge = maxSge;
        this.maxInline = maxInline;
        this.messageSize = pool.slotSize;
        this.localRing = localRing;
        this.rendezvous = rendezvous ? new RendezvousSends(pd, depth, counters, loopCounters) : null;
        rendezvousThreshold = config.getRendezvousThreshold();
        wrs = new WorkRequestList(Math.min(depth, MAX_CHAIN), maxSge);
        slotBytes = new long[depth];
        slotControl = new boolean[depth];
        staged = new int[depth];
        slotQuiet = new boolean[depth];
        quietLimit = QUIET_SENDS ? Math.max(1, depth / 4) : 1;
        Arrays.fill(staged, -1);
        pool.join();
    }

    @Override
    public boolean send(ChannelOutboundBuffer in) throws Exception {
        if (unsettledBytes == 0) {
            flushed.remove(in, 0); // drops empty messages at the head
        }
        settleAtPost = true;
        try {
            do {
                // the bytes settled at post are still in the outbound buffer: skipped, as those in flight
                builder.start(unsettledBytes + settledAtPost);
                try {
                    in.forEachFlushedMessage(builder);
                } finally {
                    postBuilt(); // a FileRegion that failed part-way: the sends built before it go out
                }
            } while (builder.listFull);
        } finally {
            settleAtPost = false;
        }
        waitsForRoom = builder.outOfRoom;
        return countStall();
    }

    /**
     * A SEND of copied bytes only settles at post when nothing before it is unsettled: its bytes are in the
     * connection's staging, as a socket's are in the kernel's send buffer, so its writes succeed as TCP's do; the
     * staging slot stays in use until the completion. A SEND with a zero-copy SGE reads the application's buffer: it
     * settles at its completion, and every SEND after it too (bytes settle in order).
     */
    @Override
    public long takeSettledAtPost() {
        long bytes = settledAtPost;
        settledAtPost = 0;
        return bytes;
    }

    @Override
    public boolean waitsForRoom() {
        return waitsForRoom;
    }

    @Override
    public boolean send(CloseLinger linger) throws Exception {
        do {
            builder.start(unsettledBytes);
            try {
                linger.forEach(builder);
            } finally {
                postBuilt();
            }
        } while (builder.listFull);
        return countStall();
    }

    private void postBuilt() throws IOException {
        builder.finish();
        post(builder.count, false);
    }

    private boolean countStall() {
        if (builder.creditStall) {
            counters.creditStalls++;
            loopCounters.creditStalls++;
        }
        return builder.creditStall;
    }

    @Override
    public void sendControl(int type) throws IOException {
        int slot = next;
        int length = type == RdmaProtocol.TYPE_CREDIT && localRing != null ? RdmaProtocol.RING_CREDIT_LENGTH
                : RdmaProtocol.HEADER_LENGTH;
        ByteBuffer view = controlBuffer(0, slot, length);
        int base = controlBase;
        int returned = type == RdmaProtocol.TYPE_CREDIT ? credits.takeReturning() : 0;
        RdmaProtocol.putHeader(view, base, type, returned, credits.takeOwed());
        if (length == RdmaProtocol.RING_CREDIT_LENGTH) {
            view.putInt(base + RdmaProtocol.HEADER_LENGTH, localRing.space.takeReleased());
        }
        slotBytes[slot] = 0;
        slotControl[slot] = true;
        occupy();
        post(1, type == RdmaProtocol.TYPE_FIN); // a closing connection waits for its FIN's completion
    }

    /** Where {@link #controlBuffer} put the message: its offset in the buffer returned. */
    private int controlBase;

    /**
     * Sets up work request {@code i} (send-queue slot {@code slot}) as a SEND of a {@code length}-byte control message
     * and returns the buffer to write it into, at {@link #controlBase}: the pool's inline scratch if the device takes
     * it inline, else a staging slot (the caller checked {@link #hasRoom(int)}, which looks for one).
     */
    private ByteBuffer controlBuffer(int i, int slot, int length) throws IOException {
        return controlBuffer(i, slot, length, WrOpcode.SEND);
    }

    /** As {@link #controlBuffer(int, int, int)}, a work request of {@code opcode} (SEND or SEND_WITH_INV). */
    private ByteBuffer controlBuffer(int i, int slot, int length, int opcode) throws IOException {
        if (length <= maxInline) {
            ByteBuffer view = pool.scratchView();
            controlBase = 0;
            wrs.setSend(i, wrIdBase | slot, opcode, SendFlags.INLINE)
                    .addSge(i, pool.scratchAddress(), length, pool.scratchLkey());
            return view;
        }
        int s = takeStaging(slot);
        if (s < 0) {
            throw new IOException("no send staging for a control message (RdmaIoHandlerConfig.sendStagingBytes "
                    + "reached), though one was looked for");
        }
        controlBase = pool.offset(s);
        wrs.setSend(i, wrIdBase | slot, opcode, 0).addSge(i, pool.address(s), length, pool.lkey(s));
        return pool.view(s);
    }

    /** A staging slot for send-queue slot {@code slot}, or -1 (then this queue waits for one). */
    private int takeStaging(int slot) throws VerbsException {
        releaseStaging(slot); // left by a work request whose post failed: this place in the queue is free
        int s = pool.acquire();
        if (s < 0) {
            awaitStaging();
            return -1;
        }
        staged[slot] = s;
        counters.registeredBytes += messageSize;
        return s;
    }

    /** Gives back send-queue slot {@code slot}'s staging, if it has any: no work request reads it any more. */
    private void releaseStaging(int slot) {
        int s = staged[slot];
        if (s >= 0) {
            staged[slot] = -1;
            counters.registeredBytes -= messageSize;
            pool.release(s);
        }
    }

    int messageSize() {
        return messageSize;
    }

    /** The connection is going: no slot is to wake it any more, no completion of its queue to wake the loop. */
    void stopWaiting() {
        if (awaitsStaging) {
            awaitsStaging = false;
            pool.forget(this);
        }
        if (awaiting) {
            awaiting = false;
            wakeups.queueAwaits(false);
        }
    }

    /** A slot came back to the pool while this queue waited for one. */
    @Override
    public void stagingFreed() {
        awaitsStaging = false;
        onStagingFreed.run();
    }

    /**
     * Protocol v2: exposes this side's ring to the peer, a BIND_MW of its window on this QP chained in front of the RING
     * message that says where it is (a send queue executes in order: the window is bound before the peer learns its
     * key). The caller checked for two places in the queue and a data credit.
     */
    void sendRing() throws IOException {
        int bindSlot = next;
        localRing.bind(wrs, 0, wrIdBase | bindSlot, 0);
        slotBytes[bindSlot] = 0;
        slotControl[bindSlot] = true;
        advance(); // a bind takes a place in the send queue, not a receive of the peer's
        int slot = next;
        ByteBuffer view = controlBuffer(1, slot, RdmaProtocol.RING_MESSAGE_LENGTH);
        int base = controlBase;
        RdmaProtocol.putHeader(view, base, RdmaProtocol.TYPE_RING, credits.takeOwed());
        localRing.putRingMessage(view, base + RdmaProtocol.HEADER_LENGTH);
        slotBytes[slot] = 0;
        slotControl[slot] = true;
        occupy();
        post(2, false);
    }

    /** Protocol v2's READ rendezvous, when negotiated: the buffers this side exposes to the peer; else null. */
    RendezvousSends rendezvous() {
        return rendezvous;
    }

    /**
     * Protocol v2: the DONE of rendezvous {@code id}, a SEND_WITH_INV of the peer's window {@code rkey}; it takes a place
     * in the queue and no credit (the peer keeps receives for DONEs beyond its window). The caller checked
     * {@link #hasRoom(int)}.
     */
    void sendDone(int id, int rkey) throws IOException {
        int slot = next;
        ByteBuffer view = controlBuffer(0, slot, RdmaProtocol.DONE_MESSAGE_LENGTH, WrOpcode.SEND_WITH_INV);
        RdmaProtocol.putDone(view, controlBase, id);
        wrs.invalidateRkey(0, rkey);
        slotBytes[slot] = 0;
        slotControl[slot] = true;
        advance();
        post(1, false);
    }

    /**
     * Protocol v2: an RDMA READ of the peer's rendezvous bytes into {@code into}'s writable bytes (a buffer of a
     * registered allocator), as a control work request; -1 if the queue has no place for it now.
     */
    @Override
    public int postRead(long remoteAddress, int rkey, ByteBuf into, int length) throws IOException {
        if (inUse >= depth) {
            return -1;
        }
        RdmaByteBuf target = RdmaByteBuf.unwrap(into);
        MemoryRegion mr = target.region().memoryRegion(pd);
        int slot = postControl(WrOpcode.RDMA_READ, remoteAddress, rkey,
                mr.address() + target.regionOffset() + into.writerIndex(), length, mr.lkey());
        counters.rendezvousReads++;
        loopCounters.rendezvousReads++;
        return slot;
    }

    /**
     * Teardown, the QP in error: the windows of the rendezvous go (before the QP is destroyed: a bound window holds it),
     * then the buffers they exposed are released.
     */
    void closeExposure() {
        if (rendezvous != null) {
            rendezvous.close();
        }
    }

    /** The peer's handshake lacks {@link RdmaProtocol#FLAG_SOLICITS}: only every completion wakes the loop for it. */
    void peerLeavesMessagesUnsolicited() {
        peerUnsolicited = true;
        updateAwaiting();
    }

    /** Protocol v2: the peer's RING message arrived; from now on registered buffers go into its ring. */
    void peerRing(RingWriter ring) {
        peerRing = ring;
    }

    boolean hasPeerRing() {
        return peerRing != null;
    }

    /**
     * Protocol v2: a CREDIT message from the peer says it has freed {@code released} ring bytes in all (mod 2^32).
     * Returns what is wrong (backwards, beyond what was written), else null.
     */
    String onReleased(int released) {
        return peerRing.onReleased(released);
    }

    /**
     * Whether {@code n} work requests, a control message among them, can be posted now: places in the queue, and
     * staging for the message if the device does not take it inline (else this queue waits for a slot).
     */
    boolean hasRoom(int n) {
        return inUse + n <= depth && (RdmaProtocol.RING_MESSAGE_LENGTH <= maxInline || stagingAvailable());
    }

    private boolean stagingAvailable() {
        if (pool.canAcquire()) {
            return true;
        }
        awaitStaging();
        return false;
    }

    private void awaitStaging() {
        counters.stagingStalls++;
        loopCounters.stagingStalls++;
        if (!awaitsStaging) {
            awaitsStaging = true;
            pool.await(this);
        }
    }

    /**
     * Posts the first {@code count} work requests of {@link #wrs}, each SEND and WRITE_WITH_IMM solicited; a completion
     * is awaited for those that settle bytes, that are not SENDs (probes, ring writes, a bind), and with
     * {@code awaited} for all. Those and the SENDs that hold staging need a completion: the last of them is signalled,
     * and one in {@link #SIGNAL_EVERY}; the others, quiet SENDs, are signalled only at {@link #quietLimit} in a row.
     */
    private void post(int count, boolean awaited) throws IOException {
        if (count == 0) {
            return;
        }
        if (fenceNext) {
            if (probeSlot < 0) {
                fenceNext = false; // the probe completed: nothing to wait for
            } else if (wrs.opcode(0) != WrOpcode.RDMA_READ) { // a READ is never fenced: the request after it is
                wrs.sendFlags(0, wrs.sendFlags(0) | SendFlags.FENCE);
                fenceNext = false;
            }
        }
        long awaitedAfter = awaitedUntil;
        int lastNeeding = count - 1;
        if (quietLimit > 1) {
            while (lastNeeding >= 0 && isQuiet(lastNeeding, awaited)) {
                lastNeeding--;
            }
        }
        for (int i = 0; i < count; i++) {
            int opcode = wrs.opcode(i);
            int flags = wrs.sendFlags(i);
            int slot = (int) wrs.wrId(i);
            if (opcode == WrOpcode.SEND || opcode == WrOpcode.RDMA_WRITE_WITH_IMM
                    || opcode == WrOpcode.SEND_WITH_INV) { // a DONE: the writer waits for it with nothing in flight
                flags |= SendFlags.SOLICITED; // wakes a peer armed for solicited completions (SolicitedWakeups)
            }
            boolean quiet = quietLimit > 1 && isQuiet(i, awaited);
            if (quiet ? ++unsignalled >= quietLimit : ++unsignalled >= SIGNAL_EVERY || i == lastNeeding) {
                flags |= SendFlags.SIGNALED;
                unsignalled = 0;
            }
            wrs.sendFlags(i, flags);
            if (awaited || opcode != WrOpcode.SEND || slotBytes[slot] > 0) {
                awaitedAfter = postedCount + i + 1;
            }
        }
        int rc = qp.postSend(wrs, 0, count);
        if (rc < 0) {
            postRefused = true;
            throw new VerbsException("ibv_post_send", -rc, "work request " + wrs.badIndex() + " of " + count);
        }
        postedCount += count;
        awaitedUntil = awaitedAfter;
        counters.workRequestsPosted += count;
        loopCounters.workRequestsPosted += count;
        for (int i = 0; i < count; i++) {
            int flags = wrs.sendFlags(i);
            if ((flags & SendFlags.INLINE) != 0) {
                int slot = (int) wrs.wrId(i);
                releaseStaging(slot); // the device copied it at post
                if ((flags & SendFlags.SIGNALED) == 0 && quietLimit > 1 && isQuiet(i, awaited)) {
                    slotQuiet[slot] = true; // retired by a later completion, nothing waits for it
                    quietInFlight++;
                }
            }
        }
        updateAwaiting();
    }

    /**
     * Whether work request {@code i} of {@link #wrs} is a quiet SEND: one that needs no completion, as nothing waits
     * for it ({@code awaited} false, its bytes settled at post or none, no rendezvous before it to settle behind: an
     * RNDV settles at its own completion and its DONE) and the device copied it at post (inline: no staging to give
     * back).
     */
    private boolean isQuiet(int i, boolean awaited) {
        int slot = (int) wrs.wrId(i);
        return !awaited && wrs.opcode(i) == WrOpcode.SEND && (wrs.sendFlags(i) & SendFlags.INLINE) != 0
                && slotBytes[slot] == 0 && (rendezvous == null || !rendezvous.behind(slot));
    }

    @Override
    public boolean postRefused() {
        return postRefused;
    }

    /**
     * Tells the loop whether it must wake for every completion for this connection: one this queue awaits is in flight,
     * the queue is nearly full (a write or a control message may wait for a place: they need at most two), or the
     * peer's messages are not solicited.
     */
    private void updateAwaiting() {
        boolean a = peerUnsolicited || retiredCount < awaitedUntil || inUse > depth - 2;
        if (a != awaiting) {
            awaiting = a;
            wakeups.queueAwaits(a);
        }
    }

    /** A SEND was posted in slot {@link #next}: it spent a credit and a place in the queue. */
    private void occupy() {
        credits.spend();
        advance();
    }

    /** A work request was posted in slot {@link #next}: it took a place in the queue. */
    private void advance() {
        if (rendezvous != null) {
            rendezvous.posted(next); // its bytes settle behind the rendezvous before it
        }
        inUse++;
        next = next + 1 == depth ? 0 : next + 1;
    }

    /**
     * The peer's probe target (iWARP: its handshake offered one, and this side has {@code landing}): probes READ
     * {@link ProbeRegion#PROBE_LENGTH} byte of it into {@code landing}'s, not zero bytes.
     */
    void probeTarget(long address, int rkey, ProbeRegion landing) {
        probeAddress = address;
        probeRkey = rkey;
        probeLanding = landing;
    }

    @Override
    public void sendProbe(boolean keepAlive) throws IOException {
        probeSlot = probeLanding != null
                ? postControl(WrOpcode.RDMA_READ, probeAddress, probeRkey, probeLanding.landingAddress(),
                        ProbeRegion.PROBE_LENGTH, probeLanding.landingLkey())
                : postEmpty(WrOpcode.RDMA_READ);
        fenceNext = true;
        if (keepAlive) {
            counters.keepAliveProbes++;
            loopCounters.keepAliveProbes++;
        }
    }

    @Override
    public void sendEmptyWrite() throws IOException {
        postEmpty(WrOpcode.RDMA_WRITE);
    }

    /**
     * Posts a zero-byte {@code opcode} (RDMA READ or WRITE) naming no remote memory, in the next slot, and returns it.
     * One SGE of 0 bytes, not none: libsiw leaves a slot's old SGEs in place when a request has none, and siw's kernel
     * reads a READ's first SGE always, so a probe in a slot that had carried a SEND asked for that SEND's length under
     * key 0, and the peer's siw tore the connection down (docs/protocol.md, the keep-alive).
     */
    private int postEmpty(int opcode) throws IOException {
        pool.scratchView(); // registered on first use
        return postControl(opcode, 0, 0, pool.scratchAddress(), 0, pool.scratchLkey());
    }

    /**
     * Posts an RDMA READ or WRITE of {@code length} bytes between {@code rkey}/{@code remoteAddress} and one local SGE,
     * in the next slot, as a control work request (no staging, no credit), and returns the slot.
     */
    private int postControl(int opcode, long remoteAddress, int rkey, long address, int length, int lkey)
            throws IOException {
        int slot = next;
        wrs.setSend(0, wrIdBase | slot, opcode, 0).remote(0, remoteAddress, rkey).addSge(0, address, length, lkey);
        slotBytes[slot] = 0;
        slotControl[slot] = true;
        advance();
        post(1, true);
        return slot;
    }

    @Override
    public boolean probeInFlight() {
        return probeSlot >= 0;
    }

    @Override
    public boolean isProbe(int slot) {
        return slot == probeSlot;
    }

    /** A place in the queue, and staging for a control message if the device does not take it inline. */
    @Override
    public boolean hasRoom() {
        return hasRoom(1);
    }

    @Override
    public boolean hasPlace() {
        return inUse < depth;
    }

    @Override
    public boolean isControl(int slot) {
        return slotControl[slot];
    }

    @Override
    public long complete(int slot) {
        counters.completions++;
        int age = slot - oldest;
        if ((age < 0 ? age + depth : age) >= inUse) {
            return -1; // retired already, by a completion of a request posted after it
        }
        long bytes = 0;
        for (;;) {
            int retired = oldest;
            bytes += rendezvous == null ? slotBytes[retired] : rendezvous.completed(retired, slotBytes[retired]);
            releaseStaging(retired);
            if (retired == probeSlot) {
                probeSlot = -1;
            }
            if (slotQuiet[retired]) {
                slotQuiet[retired] = false;
                quietInFlight--;
            }
            inUse--;
            retiredCount++;
            oldest = retired + 1 == depth ? 0 : retired + 1;
            if (retired == slot) {
                updateAwaiting();
                return bytes;
            }
        }
    }

    @Override
    public void settle(long bytes) {
        unsettledBytes -= bytes;
    }

    @Override
    public long unsettledBytes() {
        return unsettledBytes;
    }

    @Override
    public boolean isIdle() {
        return inUse == quietInFlight;
    }

    /**
     * The QP is destroyed: no work request reads this queue's staging any more, and it goes back to the pool (one whose
     * QP could not be destroyed never calls this: its slots stay out, and the pool never frees them).
     */
    @Override
    public void close() {
        stopWaiting();
        for (int i = 0; i < depth; i++) {
            releaseStaging(i);
        }
        pool.leave();
    }

    /** Builds SENDs from the flushed messages after the bytes already posted. Reused; allocates nothing. */
    private final class Builder implements ChannelOutboundBuffer.MessageProcessor {
        long skip;
        int count;
        /** Regions this walk passed (FlushedMessages' index). */
        private int regionIndex;
        boolean listFull;
        boolean creditStall;
        /** A SEND could not begin: no credit or no send-queue slot. */
        boolean outOfRoom;
        private boolean building;
        private int slot;
        private int payload;
        /** Bytes of the flushed messages the SEND settles: its payload, but a FileRegion counts what it transferred. */
        private long settles;
        private int copied;
        private int sges;
        /**
         * The SGE over the staging slot that copied bytes go to now, or -1 after a zero-copy SGE; its first byte's
         * offset in the slot. SGE 0 (header, then copied bytes) is the first; copies after a zero-copy SGE open
         * another, further into the slot: staged bytes lie in the slot in the order the SGEs send them.
         */
        private int stagingSge;
        private int stagingStart;
        private final RegisteredSource source = new RegisteredSource();
        /** The staging of the SEND being built: its region's view, its offset there. */
        private ByteBuffer view;
        private int base;

        void start(long alreadyPosted) {
            skip = alreadyPosted;
            regionIndex = 0;
            count = 0;
            listFull = false;
            creditStall = false;
            outOfRoom = false;
            building = false;
        }

        @Override
        public boolean processMessage(Object msg) throws IOException {
            return msg instanceof ByteBuf ? processBuf((ByteBuf) msg) : processRegion((FileRegion) msg);
        }

        private boolean processBuf(ByteBuf buf) throws IOException {
            int index = buf.readerIndex();
            int readable = buf.readableBytes();
            if (skip >= readable) {
                skip -= readable;
                return true;
            }
            index += (int) skip;
            readable -= (int) skip;
            skip = 0;
            if (buf instanceof CompositeByteBuf) {
                return processComponents((CompositeByteBuf) buf, index, readable);
            }
            return processBytes(buf, index, readable);
        }

        /**
         * A composite's bytes component by component, so that registered ones go without copy: HTTP/2's flow
         * controller merges a stream's queued DATA into a composite while it waits for the window.
         * {@code internalComponent} is a slice that the composite makes once per component and keeps.
         */
        private boolean processComponents(CompositeByteBuf buf, int index, int readable) throws IOException {
            int end = index + readable;
            for (int c = buf.toComponentIndex(index); index < end && c < buf.numComponents(); c++) {
                int start = buf.toByteIndex(c);
                ByteBuf component = buf.internalComponent(c);
                int n = Math.min(end, start + component.capacity()) - index;
                if (n > 0 && !processBytes(component, index - start, n)) {
                    return false;
                }
                index += n;
            }
            return true;
        }

        /** {@code readable} bytes of {@code buf} from {@code index} into SENDs (or the peer's ring). */
        private boolean processBytes(ByteBuf buf, int index, int readable) throws IOException {
            // the buffer's size decides (what was written into it), not the fragment's: the tail of a large
            // registered buffer goes out directly too
            MemoryRegion mr = buf.writerIndex() >= config.getZeroCopyThreshold() && source.locate(buf)
                    ? memoryRegion(source.root()) : null;
            if (mr != null) {
                source.root().markSentInPlace();
                // protocol v2: a large buffer alone in its region is announced, and the peer READs it
                if (rendezvous != null && readable >= rendezvousThreshold && source.root().isAloneInRegion()) {
                    return rendezvousWrite(buf, mr, mr.address() + source.regionOffset(index), readable);
                }
            }
            while (readable > 0) {
                // protocol v2: registered buffers go straight into the peer's ring, as far as it has room; at least a
                // SEND's worth: shorter registered pieces gather better as SGEs of SENDs (one credit for several), as
                // the 4 KiB stream measured (docs/performance.md)
                if (peerRing != null && mr != null && readable >= messageSize) {
                    int n = ringWrite(mr.address() + source.regionOffset(index), mr.lkey(),
                            Math.min(readable, peerRing.maxMessage()));
                    if (n < 0) {
                        return false;
                    }
                    if (n > 0) {
                        index += n;
                        readable -= n;
                        continue;
                    }
                    // no room in the ring now: this part goes as SENDs, in order behind the ring's writes
                }
                if (!building && !begin()) {
                    return false;
                }
                int room = messageSize - RdmaProtocol.HEADER_LENGTH - payload;
                if (room == 0) {
                    end();
                    continue;
                }
                int n = Math.min(room, readable);
                if (mr != null && sges < maxSge) {
                    closeStaging();
                    wrs.addSge(count, mr.address() + source.regionOffset(index), n, mr.lkey());
                    sges++;
                    counters.zeroCopyBytes += n;
                } else if (stagingSge >= 0 || sges < maxSge) {
                    int at = base + RdmaProtocol.HEADER_LENGTH + copied;
                    view.limit(at + n).position(at);
                    try {
                        buf.getBytes(index, view);
                    } finally {
                        view.clear(); // the view is the loop's, shared by its connections: never left narrowed
                    }
                    if (stagingSge < 0) {
                        // copied bytes after a zero-copy SGE: a further SGE over the slot (its length set when it
                        // closes), so that frame headers between registered pieces do not end the SEND
                        stagingSge = sges++;
                        stagingStart = RdmaProtocol.HEADER_LENGTH + copied;
                        wrs.addSge(count, pool.address(staged[slot]) + stagingStart, n, pool.lkey(staged[slot]));
                    }
                    copied += n;
                    counters.copies++;
                    counters.copiedBytes += n;
                    loopCounters.copies++;
                    loopCounters.copiedBytes += n;
                } else {
                    end();
                    continue;
                }
                payload += n;
                settles += n;
                index += n;
                readable -= n;
            }
            return true;
        }

        /**
         * Copies a FileRegion's bytes after those posted into staging, SEND by SEND. Its posted bytes are those it
         * {@linkplain FileRegion#transferred() transferred} and not settled: the skipped ones.
         */
        private boolean processRegion(FileRegion region) throws IOException {
            long count = flushed.reach(region, regionIndex++); // its count() when first reached: some shrink as written
            long unsettled = count - flushed.settled(region);
            if (skip >= unsettled) {
                skip -= unsettled;
                return true;
            }
            skip = 0;
            boolean direct = FileRegionReader.canRead(region);
            long position;
            while ((position = region.transferred()) < count) {
                if (!building && !begin()) {
                    return false;
                }
                int room = messageSize - RdmaProtocol.HEADER_LENGTH - payload;
                if (room == 0 || sges > 1) {
                    end(); // copied bytes go in staging, before a SEND's zero-copy SGEs
                    continue;
                }
                int at = base + RdmaProtocol.HEADER_LENGTH + copied;
                view.limit(at + room).position(at);
                int n;
                long advanced;
                try {
                    if (direct) {
                        int read = FileRegionReader.read(region, view);
                        counters.fileReadBytes += read;
                        loopCounters.fileReadBytes += read;
                    } else {
                        region.transferTo(stagingWriter.target(view), position);
                    }
                } finally {
                    // what reached staging is sent, also when transferTo failed part-way. The region's progress is
                    // what its transferred() says, as every Netty transport takes it: a region may write more bytes
                    // than it counts (framing, encryption) and count a chunk only once all of it is written
                    n = view.position() - at;
                    advanced = Math.max(0, region.transferred() - position);
                    view.clear();
                    copied += n;
                    payload += n;
                    settles += advanced;
                    if (n > 0) {
                        counters.copies++;
                        counters.copiedBytes += n;
                        loopCounters.copies++;
                        loopCounters.copiedBytes += n;
                    }
                }
                if (n == 0 && advanced == 0) {
                    throw new IOException("FileRegion " + region.getClass().getName() + " made no progress at "
                            + position + " of " + count + " with " + room + " bytes of room");
                }
            }
            return true;
        }

        /** The buffer's registration in this connection's protection domain, or null to copy instead. */
        private MemoryRegion memoryRegion(RdmaByteBuf registered) {
            try {
                return registered.region().memoryRegion(pd);
            } catch (VerbsException e) {
                logger.debug("cannot register a buffer's region here; copying it", e);
                return null;
            }
        }

        private boolean begin() throws VerbsException {
            if (count == wrs.capacity()) {
                listFull = true;
                return false;
            }
            if (!credits.canSendData() || inUse == depth) {
                creditStall = !credits.canSendData();
                outOfRoom = true;
                return false;
            }
            int s = takeStaging(next);
            if (s < 0) {
                // every slot of the loop's staging is in flight: the write waits for one, as for a credit
                outOfRoom = true;
                return false;
            }
            slot = next;
            payload = 0;
            settles = 0;
            copied = 0;
            sges = 1;
            stagingSge = 0;
            stagingStart = 0;
            view = pool.view(s);
            base = pool.offset(s);
            wrs.setSend(count, wrIdBase | slot, WrOpcode.SEND, 0)
                    .addSge(count, pool.address(s), RdmaProtocol.HEADER_LENGTH, pool.lkey(s));
            building = true;
            return true;
        }

        private void end() {
            RdmaProtocol.putHeader(view, base, RdmaProtocol.TYPE_DATA, credits.takeOwed());
            closeStaging();
            if (sges == 1 && RdmaProtocol.HEADER_LENGTH + copied <= maxInline) {
                wrs.sendFlags(count, SendFlags.INLINE);
            }
            if (settleAtPost && sges == 1 && unsettledBytes == 0) {
                slotBytes[slot] = 0;
                settledAtPost += settles;
            } else {
                slotBytes[slot] = settles;
                unsettledBytes += settles;
            }
            slotControl[slot] = false;
            occupy();
            count++;
            building = false;
            countMessage(payload);
        }

        /** A data message of {@code bytes} bytes was built (a SEND, a ring write or an RNDV). */
        private void countMessage(long bytes) {
            counters.messagesSent++;
            counters.bytesSent += bytes;
            loopCounters.messagesSent++;
            loopCounters.bytesSent += bytes;
        }

        /**
         * Protocol v2: places {@code n} bytes at {@code address} (registered, {@code lkey}) in the peer's ring by one
         * WRITE_WITH_IMM (immediate: the length and the credits owed, as a header would), after a PAD of the ring's tail if the message does not fit before the
         * end; the SEND being built goes first, so that bytes stay in order. Each takes a credit (its notification
         * consumes a receive of the peer's). Returns {@code n}, 0 if the ring has no room for it now (the caller sends
         * it), or -1 if it must stop (no credit, no place in the queue or the chain).
         */
        private int ringWrite(long address, int lkey, int n) {
            int needed = peerRing.needsPad(n) ? 2 : 1;
            if (!peerRing.fits(n) || needed == 2 && !credits.canSpend(2) && credits.canSendData()) {
                // no room in the ring; or a PAD would take the credit its message needs, and a PAD's credit comes
                // back only with the next data credit: a reader with nothing more to read would never return it
                return 0;
            }
            if (building) {
                end();
            }
            if (count + needed > wrs.capacity()) {
                listFull = true;
                return -1;
            }
            if (!credits.canSpend(needed) || inUse + needed > depth) {
                creditStall = !credits.canSpend(needed);
                outOfRoom = true;
                return -1;
            }
            if (needed == 2) {
                int tail = peerRing.tail();
                ringRequest(peerRing.placePad(), RingReceiveSpace.IMM_PAD | tail, 0);
            }
            int imm = RingReceiveSpace.messageImm(n, credits.takeOwed(RingReceiveSpace.IMM_MAX_CREDITS));
            wrs.addSge(ringRequest(peerRing.place(n), imm, n), address, n, lkey);
            counters.zeroCopyBytes += n;
            counters.ringBytesSent += n;
            loopCounters.ringBytesSent += n;
            countMessage(n);
            return n;
        }

        /**
         * Protocol v2: exposes {@code length} bytes at {@code address} of {@code mr} (of {@code buf}, alone in its
         * region) to the peer by a window bound on this QP, and announces them in an RNDV, chained behind the bind; the
         * SEND being built goes first, so that bytes stay in order. The RNDV takes a credit (it consumes a receive of
         * the peer's); its bytes settle at the peer's DONE ({@link RendezvousSends}). The chain is posted at once
         * (the RNDV may be in the pool's inline scratch). Returns false if it must stop: no credit, no place in the
         * queue or the chain, no staging for the RNDV, or four rendezvous outstanding (the DONE's arrival flushes).
         */
        private boolean rendezvousWrite(ByteBuf buf, MemoryRegion mr, long address, int length) throws IOException {
            if (building) {
                end();
            }
            if (count + 2 > wrs.capacity()) {
                listFull = true;
                return false;
            }
            if (!credits.canSendData() || !rendezvous.canStart() || inUse + 2 > depth
                    || RdmaProtocol.RNDV_MESSAGE_LENGTH > maxInline && !stagingAvailable()) {
                creditStall = !credits.canSendData();
                outOfRoom = true;
                return false;
            }
            int bindSlot = next;
            int rndvSlot = bindSlot + 1 == depth ? 0 : bindSlot + 1;
            int id = rendezvous.start(buf, mr, address, length, wrs, count, wrIdBase | bindSlot, 0, rndvSlot);
            slotBytes[bindSlot] = 0;
            slotControl[bindSlot] = true;
            advance(); // a bind takes a place in the send queue, not a receive of the peer's
            count++;
            ByteBuffer rndv = controlBuffer(count, rndvSlot, RdmaProtocol.RNDV_MESSAGE_LENGTH);
            rendezvous.putRendezvous(rndv, controlBase, credits.takeOwed(), id);
            slotBytes[rndvSlot] = 0;
            slotControl[rndvSlot] = false;
            unsettledBytes += length;
            occupy();
            count++;
            counters.zeroCopyBytes += length;
            counters.rendezvousBytesSent += length;
            loopCounters.rendezvousBytesSent += length;
            countMessage(length);
            post(count, false);
            count = 0;
            return true;
        }

        /** A WRITE_WITH_IMM to {@code remote} in the peer's ring with {@code imm}, settling {@code bytes}; its index. */
        private int ringRequest(long remote, int imm, int bytes) {
            int s = next;
            int i = count;
            wrs.setSend(i, wrIdBase | s, WrOpcode.RDMA_WRITE_WITH_IMM, 0).remote(i, remote, peerRing.rkey())
                    .immData(i, imm);
            slotBytes[s] = bytes;
            slotControl[s] = false;
            unsettledBytes += bytes;
            occupy();
            count++;
            return i;
        }

        /** Sets the length of the SEND's staging SGE being filled, if any: the bytes copied since it began. */
        private void closeStaging() {
            if (stagingSge >= 0) {
                int s = staged[slot];
                wrs.setSge(count, stagingSge, pool.address(s) + stagingStart,
                        RdmaProtocol.HEADER_LENGTH + copied - stagingStart, pool.lkey(s));
                stagingSge = -1;
            }
        }

        /** Ends the SEND being built; one with no payload yet (its first bytes failed) is dropped, not posted. */
        void finish() {
            if (building) {
                if (payload > 0) {
                    end();
                } else {
                    building = false;
                    releaseStaging(slot);
                }
            }
        }
    }
}
