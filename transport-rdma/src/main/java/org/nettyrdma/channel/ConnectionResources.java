package org.nettyrdma.channel;

import io.netty.buffer.ByteBufAllocator;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;
import org.nettyrdma.verbs.CmId;
import org.nettyrdma.verbs.ConnectionParameters;
import org.nettyrdma.verbs.DeviceAttributes;
import org.nettyrdma.verbs.QpInitAttributes;
import org.nettyrdma.verbs.QueuePair;
import org.nettyrdma.verbs.VerbsException;

/**
 * The native resources of one connection, with one owner: its entries reserved in the loop's completion queue, its QP,
 * its receive queue and, once the peer's handshake is known, its send queue; created in that order and destroyed in
 * reverse, the memory only once no work request can reference it. Accounted in the channel's and the loop's
 * {@link RdmaCounters} (queue pairs, registered bytes). The protocol that runs over them is {@link RdmaConnection}'s.
 * Event loop only.
 */
final class ConnectionResources {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(ConnectionResources.class);
    /** Set in the work request id of a receive; the low bits are the slot, the high 32 the registration id. */
    static final long RECV_BIT = 1L << 31;
    private static final int MAX_SEND_SGE = 4;
    private static final int MAX_INLINE = 256;
    private static final int RNR_RETRY = 3;
    /**
     * The READ rendezvous' receiving side: bytes per READ, chunk bytes held per connection (the loop's bound is
     * {@link RdmaIoHandlerConfig#setRendezvousReadAheadBytes}), READs in flight.
     */
    private static final int RENDEZVOUS_CHUNK = 1 << 20;
    private static final int RENDEZVOUS_READ_AHEAD = 4 << 20;
    private static final int RENDEZVOUS_READS = 4;

    final QueuePair qp;
    final ReceiveQueue recv;
    /** The receives taken from the loop's shared pool, or null: the connection posts its own. */
    final PooledReceives pooled;
    /** The loop's shared receive pool this connection reserved its receives in, or null. */
    private final ReceivePool pool;
    /** Set by {@link #openSendQueue}. */
    SendQueue sends;
    /** The READ rendezvous' receiving table when this side offers the rendezvous (attached to {@link #recv}); else null. */
    final RendezvousReceives rendezvousReceives;
    /** This side's WRITE ring when protocol v2's ring was negotiated; set by {@link #openSendQueue}. */
    LocalRing ring;
    final int recvSize;
    final int recvCount;
    /**
     * Whether this side offers the WRITE ring (protocol v2): the channel asks for it and the device can confine the
     * ring to this connection (type-2 memory windows) and tell the receiver what arrived (immediate data). Devices
     * without them (iWARP, siw) speak v1: docs/protocol.md, "Exposure for protocol v2".
     */
    final boolean offersWriteRing;
    /**
     * Whether this side offers protocol v2's READ rendezvous: the channel asks for it and the device has type-2 windows
     * (a window exposes one buffer to this connection only), SEND_WITH_INV (the reader's DONE revokes it) and READs.
     * The QP then has room for the rendezvous' work requests and for the DONEs beyond the credit window.
     */
    final boolean offersRendezvous;
    /** Receives posted: the credit window's, and with the rendezvous offered {@link #doneReceives} more. */
    private final int receivesPosted;
    /**
     * With the rendezvous offered, {@link RendezvousSends#MAX_RENDEZVOUS} receives for the peer's DONEs (which spend no
     * credit), else 0: posted beside the window's receives, or reserved in the shared pool beside {@link
     * #reservedReceives} for as long as the connection lives.
     */
    private final int doneReceives;
    /**
     * Whether this side offers pooled credits (handshake flag bit 2, docs/srq-design.md section 2): when its receives
     * come from a loop's shared pool, where its window grows and shrinks ({@link PooledWindow}), and it does not offer
     * the WRITE ring. With the READ rendezvous too: the receives for DONEs are reserved beside the window's.
     */
    final boolean offersPooledCredits;
    /**
     * The credits the peer starts with in this side's {@link CreditWindow}: {@link CreditWindow#POOLED_INITIAL} on an
     * accepted connection whose peer offered pooled credits and whose receives come from the pool, else the receive
     * count (a connecting side restates it at the handshake when pooled credits were negotiated: {@link
     * CreditWindow#startPooled}).
     */
    final int initialCredits;
    /**
     * The receives this connection has reserved in {@link #pool} for its window: they follow it ({@link
     * #reserveReceives}); the {@link #doneReceives} are reserved beside them.
     */
    private int reservedReceives;
    /** The most receives a growth of this connection's window reserved in its pool, 0 if it never grew (tests). */
    private int peakReservedReceives;
    private final int receiveSlotBytes;
    /** Whether this side may post RDMA READs (the device allows a READ in flight per QP): the keep-alive probes. */
    final boolean canRead;
    /**
     * On iWARP, what this side's probes land in and what it exposes to its peer's probes (offered in the handshake);
     * else null: IB and RoCE answer a zero-length READ naming no memory, which exposes nothing (docs/protocol.md).
     */
    final ProbeRegion probes;
    /** Whether the device is iWARP: connection set-up and close differ there (docs/protocol.md). */
    final boolean iwarp;
    /**
     * Whether an orderly close waits for a READ (a probe's) after its FIN before it disconnects: on iWARP, where a SEND
     * completes once the data is in the host's TCP send buffer, not once the peer has it (docs/protocol.md).
     */
    final boolean fencesClose;
    private final RdmaSocketChannel ch;
    private final RdmaSocketChannelConfig config;
    private final RdmaIoHandler handler;
    private final RdmaIoHandler.DeviceQueues queues;
    private final long wrIdBase;
    private final int sqDepth;
    private final int maxSge;
    private final int maxInline;
    private final int reservedCqEntries;
    /** Registered memory this connection added to the counters. */
    private long registeredBytes;

    /**
     * Creates the QP on {@code id} and posts the receives; {@code peerOffersPooledCredits}: an accepted connection's
     * peer offered pooled credits in its handshake (a connecting side does not know yet); {@code onReadAheadFreed} runs
     * when the loop's read-ahead budget stopped the rendezvous' READs and has bytes again. On failure it frees what it
     * allocated, in reverse order.
     */
    ConnectionResources(RdmaSocketChannel ch, CmId id, RdmaIoHandler handler, int registrationId,
            boolean peerOffersPooledCredits, Runnable onReadAheadFreed) throws VerbsException {
        this.ch = ch;
        this.handler = handler;
        config = ch.config();
        wrIdBase = (long) registrationId << 32;
        DeviceAttributes limits = id.device().attributes();
        recvSize = config.getRdmaReceiveBufferSize();
        recvCount = config.getRdmaReceiveBufferCount();
        canRead = limits.maxQpRdAtom() > 0;
        offersWriteRing = config.isWriteRing() && limits.supportsMemoryWindows() && limits.supportsImmediateData();
        offersRendezvous = config.isRendezvous() && limits.supportsMemoryWindows()
                && limits.supportsSendWithInvalidate() && canRead;
        // the rendezvous' extra work requests: a bind per rendezvous, the DONEs this side owes, the READs it pulls with
        int rendezvousWrs = offersRendezvous ? 3 * RendezvousSends.MAX_RENDEZVOUS : 0;
        // the DONEs the peer may send beyond its credits: one per rendezvous of this side's outstanding
        doneReceives = offersRendezvous ? RendezvousSends.MAX_RENDEZVOUS : 0;
        receivesPosted = recvCount + doneReceives;
        // the send queue follows this side's configuration, never the peer's handshake (RdmaProtocol.Handshake)
        sqDepth = Math.min(limits.maxQpWr(), recvCount + 4 + rendezvousWrs);
        maxSge = Math.min(limits.maxSge(), MAX_SEND_SGE);
        maxInline = Math.min(limits.maxInlineData(), MAX_INLINE);
        reservedCqEntries = sqDepth + receivesPosted;
        iwarp = limits.transport() == DeviceAttributes.Transport.IWARP;
        fencesClose = canRead && iwarp;
        // the QP's queue depths are reserved in the completion queue, so that it can never overrun
        queues = handler.deviceQueues(id.device(), (RdmaIoHandle) ch.unsafe(), reservedCqEntries);
        QueuePair createdQp = null;
        // receives from the loop's shared pool where asked and it has room for this connection's, else its own
        ReceivePool sharedPool = handler.config().usesSharedReceiveQueue(limits.transport())
                ? handler.receivePool(queues, recvSize, receiveMemory()) : null;
        // pooled credits, not with the WRITE ring: a ring message waiting unread holds no pool buffer, and the window's
        // reservation would not count it (it keeps its whole window in the pool then)
        boolean pooledCredits = sharedPool != null && !offersWriteRing;
        // an accepted pooled peer starts at POOLED_INITIAL; a connecting side reserves its whole window until it knows
        int initial = pooledCredits && peerOffersPooledCredits ? CreditWindow.POOLED_INITIAL : recvCount;
        // the DONEs' receives stay reserved beside the window's, which alone follows it (reserveReceives)
        if (sharedPool != null && !sharedPool.tryReserve(initial + doneReceives)) {
            sharedPool = null;
            initial = recvCount;
        }
        QueuePairReceives own = null;
        PooledReceives shared = null;
        ProbeRegion probeRegion = null;
        boolean ok = false;
        try {
            createdQp = id.createQp(queues.pd, new QpInitAttributes(queues.cq, queues.cq, sqDepth,
                    sharedPool != null ? 0 : receivesPosted, maxSge, sharedPool != null ? 0 : 1, maxInline, false,
                    sharedPool != null ? sharedPool.queue() : null));
            if (sharedPool != null) {
                shared = new PooledReceives(sharedPool, receivesPosted);
                ch.registration.bindSharedReceives(createdQp.qpNum());
                handler.refill(sharedPool); // this connection's receives are posted before its peer can send
            } else {
                own = new QueuePairReceives(createdQp, queues.pd, receiveMemory(), recvSize, receivesPosted,
                        wrIdBase | RECV_BIT, ch.counters(), handler.counters());
                own.postAll();
            }
            if (fencesClose) {
                probeRegion = new ProbeRegion(queues.pd);
            }
            ok = true;
        } finally {
            if (!ok) {
                // in reverse order; the receive buffers only once no receive can reference them
                boolean qpGone = createdQp != null && closeQp(createdQp);
                if (qpGone && own != null) {
                    own.close();
                }
                if (sharedPool != null && (qpGone || createdQp == null)) {
                    ch.registration.unbindSharedReceives();
                    sharedPool.release(initial + doneReceives);
                }
                queues.release(reservedCqEntries);
            }
        }
        qp = createdQp;
        probes = probeRegion;
        pool = sharedPool;
        pooled = shared;
        offersPooledCredits = pooledCredits && sharedPool != null;
        initialCredits = pooledCredits ? initial : recvCount;
        reservedReceives = sharedPool != null ? initial : 0;
        receiveSlotBytes = receiveMemory().slotSize(recvSize);
        recv = new ReceiveQueue(shared != null ? shared : own, receivesPosted, new ReceiveQueue.LendLimits(ch.counters(),
                config.getMaxLentReceiveBytes(), handler.counters(), handler.config().getMaxLentReceiveBytes()),
                ch.eventLoop());
        // (its table exists from the start: the peer's first RNDV may come before this side has read its handshake)
        rendezvousReceives = offersRendezvous ? new RendezvousReceives(recvCount, RENDEZVOUS_CHUNK,
                RENDEZVOUS_READ_AHEAD, Math.min(RENDEZVOUS_READS, limits.maxQpRdAtom()), handler.readAheadBudget(),
                onReadAheadFreed) : null;
        if (rendezvousReceives != null) {
            recv.attachRendezvous(rendezvousReceives);
        }
        // on the shared pool: the receives it reserved there (the pool's margin and spares are not counted yet)
        count(1, (long) (sharedPool != null ? initial + doneReceives : receivesPosted) * receiveSlotBytes);
    }

    /** The receives this connection has reserved in its loop's shared pool (0 without one). */
    int reservedReceives() {
        return reservedReceives;
    }

    /** For tests: the most receives a growth of this connection's window reserved in its pool; 0 if it never grew. */
    int peakReservedReceives() {
        return peakReservedReceives;
    }

    /**
     * Makes this connection's reservation in its loop's shared pool {@code n} receives: more are reserved only if the
     * pool has room (returns false otherwise, nothing changed) and are posted before this returns, so the credits they
     * stand for may go to the peer at once; fewer are given back (the caller keeps what its peer may still consume).
     *
     * @throws VerbsException if the pool could not post the new receives
     */
    boolean reserveReceives(int n) throws VerbsException {
        int delta = n - reservedReceives;
        if (delta > 0) {
            if (!pool.tryReserve(delta)) {
                return false;
            }
            reservedReceives = n;
            peakReservedReceives = Math.max(peakReservedReceives, n);
            count(0, (long) delta * receiveSlotBytes);
            int rc = pool.refill();
            if (rc < 0) {
                throw new VerbsException("ibv_post_srq_recv", -rc);
            }
        } else if (delta < 0) {
            pool.release(-delta);
            reservedReceives = n;
            count(0, (long) delta * receiveSlotBytes);
        }
        return true;
    }

    /** The loop's shared receive pool this connection's receives come from, or null (its own). */
    ReceivePool receivePool() {
        return pool;
    }

    /** For tests: the loop's send staging this connection's SENDs take slots from (null before the handshake). */
    StagingPool stagingPool() {
        return sends != null ? handler.stagingPool(queues.pd, sends.messageSize()) : null;
    }

    /** Where receive buffers come from: the channel's allocator if it is a registered one. */
    RdmaByteBufAllocator receiveMemory() {
        ByteBufAllocator alloc = config.getAllocator();
        return alloc instanceof RdmaByteBufAllocator ? (RdmaByteBufAllocator) alloc : RdmaByteBufAllocator.DEFAULT;
    }

    /** What this side asks of RDMA CM for the connection, its handshake included. */
    ConnectionParameters parameters(CmId id) {
        int rd = Math.min(16, id.device().attributes().maxQpRdAtom());
        int flags = RdmaProtocol.FLAG_SOLICITS | (offersWriteRing ? RdmaProtocol.FLAG_WRITE_RING : 0)
                | (offersRendezvous ? RdmaProtocol.FLAG_READ_RENDEZVOUS : 0);
        if (offersPooledCredits && ch.parent() != null) {
            flags |= RdmaProtocol.FLAG_KEEPS_PEER_GOING; // the accepted side (CreditWindow.keepPeerGoing)
        }
        // pooled: a pooled peer starts at POOLED_INITIAL and may be granted up to the receive count; a v1 peer reads
        // the receive count, which this side then grants it whole
        byte[] handshake = offersPooledCredits
                ? RdmaProtocol.handshake(recvSize, recvCount, flags, CreditWindow.POOLED_INITIAL, recvCount)
                : RdmaProtocol.handshake(recvSize, recvCount, flags);
        if (probes != null) {
            handshake = RdmaProtocol.withProbeTarget(handshake, probes.exposedAddress(), probes.exposedRkey());
        }
        return new ConnectionParameters(handshake, rd, rd, 7, RNR_RETRY);
    }

    /**
     * The send queue, for SENDs of at most {@code messageSize} bytes (the peer's handshake is known); with
     * {@code writeRing} (negotiated) this side's WRITE ring too, its window not yet bound.
     */
    SendQueue openSendQueue(CreditWindow credits, FlushedMessages flushed, int messageSize, boolean writeRing,
                            boolean rendezvous, Runnable onStagingFreed) throws VerbsException {
        LocalRing r = writeRing ? new LocalRing(queues.pd, config.getRingSize(), recvCount) : null;
        // staging comes from the loop's pool SEND by SEND: an idle connection registers none of it
        sends = new SendQueue(qp, handler.stagingPool(queues.pd, messageSize), credits, flushed, config, ch.counters(),
                handler.counters(), wrIdBase, sqDepth, maxSge, maxInline, r, rendezvous, onStagingFreed,
                handler.wakeups());
        ring = r;
        if (r != null) {
            recv.attachRing(r);
            count(0, r.size());
        }
        return sends;
    }

    private void count(int queuePairs, long bytes) {
        registeredBytes += bytes;
        RdmaCounters c = ch.counters();
        c.queuePairs += queuePairs;
        c.registeredBytes += bytes;
        RdmaCounters l = handler.counters();
        l.queuePairs += queuePairs;
        l.registeredBytes += bytes;
        c.publish();
        l.publish();
    }

    private void closeProbes() {
        try {
            probes.close();
        } catch (VerbsException e) {
            logger.warn("{}: deregistering the probe regions failed", ch, e);
        }
    }

    /**
     * Destroys the QP, {@link #destroy}'s middle part: the one that may keep the calling thread long in the kernel
     * (SoftRoCE took 1.9 s for a QP whose peer had been killed), so it may run on a thread other than the loop's
     * ({@link Teardowns}; the SPI's close is thread-safe). Returns whether the QP is gone.
     */
    boolean closeQp() {
        return closeQp(qp);
    }

    private boolean closeQp(QueuePair qp) {
        try {
            qp.close();
            return true;
        } catch (VerbsException e) {
            // its work requests may still reference the buffers: better leak them than free them under the device
            logger.warn("{}: destroying the QP failed; its registered memory is not freed", ch, e);
            return false;
        }
    }

    /**
     * Destroys the QP, gives back the completion queue entries, then frees the memory (not if the QP could not be
     * destroyed: a work request may still reference it). Returns whether the memory was freed.
     */
    boolean destroy() {
        beginDestroy();
        return finishDestroy(closeQp());
    }

    /** {@link #destroy}'s first part, on the loop: the QP's windows and exposures end, no send waits any more. */
    void beginDestroy() {
        boolean exposes = sends != null && sends.rendezvous() != null;
        if (ring != null || exposes) {
            // a bound window holds its QP (rxe took ~50 s to destroy one): the QP stops first, then the windows go
            try {
                qp.moveToError();
            } catch (VerbsException e) {
                logger.debug("{}: moving the QP to the error state failed", ch, e);
            }
            if (ring != null) {
                ring.closeWindow();
            }
            if (exposes) {
                sends.closeExposure(); // the rendezvous' windows, then the buffers they exposed
            }
        }
        if (sends != null) {
            sends.stopWaiting();
        }
    }

    /**
     * {@link #destroy}'s last part, on the loop, once {@link #closeQp} has returned {@code qpGone}: the completion
     * queue entries go back, and, if the QP is gone, the memory. Returns {@code qpGone}.
     */
    boolean finishDestroy(boolean qpGone) {
        if (pool != null && qpGone) {
            // its receives still in the queue's completions are orphans now: they go back to the pool
            ch.registration.unbindSharedReceives();
            pool.release(reservedReceives + doneReceives);
            reservedReceives = 0;
        }
        queues.release(reservedCqEntries);
        try {
            if (qpGone) {
                recv.close(); // no receive references these buffers; lent ones are the application's
                if (sends != null) {
                    // its staging slots go back to the loop's pool, whose regions go with its last connection
                    sends.close();
                }
                if (ring != null) {
                    ring.close(); // no work request names it any more
                }
                if (probes != null) {
                    closeProbes(); // nor one of this side's READs, nor one of the peer's
                }
            }
        } finally {
            // last, and published with it: who sees the connection gone sees its staging given back too
            count(-1, -registeredBytes);
        }
        return qpGone;
    }
}
