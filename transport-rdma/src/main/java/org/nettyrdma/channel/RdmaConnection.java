package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.channel.socket.ChannelInputShutdownReadComplete;
import io.netty.util.concurrent.Future;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;
import org.nettyrdma.channel.RdmaProtocol.Handshake;
import org.nettyrdma.verbs.CmId;
import org.nettyrdma.verbs.ConnectionParameters;
import org.nettyrdma.verbs.VerbsException;
import org.nettyrdma.verbs.WcOpcode;
import org.nettyrdma.verbs.WcStatus;

import java.io.IOException;
import java.util.concurrent.TimeUnit;

/**
 * The verbs side of one {@link RdmaSocketChannel}'s connection: its QP, the {@link ReceiveQueue}, the
 * {@link DataPath} that sends, the {@link CreditWindow}, and the protocol's lifecycle (greeting, FIN, orderly close)
 * in one bitmask. Event loop only; it outlives the channel's close until its last completion (docs/protocol.md).
 */
final class RdmaConnection {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(RdmaConnection.class);
    /** Closes that dropped bytes because the peer took nothing: one WARN per interval (a peer can cause many). */
    private static final WarnLimiter CLOSE_TIMEOUTS = new WarnLimiter(10, TimeUnit.SECONDS);

    // the lifecycle, one bit each
    /**
     * Sends may be posted: at once when connecting; when accepted, after the peer's first message (or, on InfiniBand
     * and RoCE, this side's ESTABLISHED).
     */
    private static final int SEND_OPEN = 1;
    /** A completion is removing bytes from the outbound buffer: writes wait until it is done. */
    private static final int REMOVING = 1 << 1;
    /** A write came while {@link #REMOVING}: flush once it is done. */
    private static final int FLUSH_AFTER_REMOVE = 1 << 2;
    private static final int FIN_PENDING = 1 << 3;
    private static final int FIN_SENT = 1 << 4;
    private static final int FIN_RECEIVED = 1 << 5;
    /** An orderly close is under way: FIN, the last sends, then disconnect. */
    private static final int CLOSING = 1 << 6;
    private static final int FAILED = 1 << 7;
    private static final int PEER_GONE = 1 << 8;
    /** A credit message could not be posted: the connection is going down, no more credit messages. */
    private static final int CREDITS_BROKEN = 1 << 9;
    private static final int DESTROYED = 1 << 10;
    /** close() waits for the sends in flight to complete before the channel closes. */
    private static final int CLOSE_REQUESTED = 1 << 11;
    /** Flushed bytes wait for credits, a send-queue slot or the send side to open: the end of a batch flushes. */
    private static final int SEND_BLOCKED = 1 << 12;
    /** Queued for {@link #onBatchComplete()} in the current batch ({@link RdmaIoHandler#touch} once per batch). */
    private static final int TOUCHED = 1 << 13;
    /** Protocol v2: this side's ring was bound and its RING message posted. */
    private static final int RING_OFFERED = 1 << 14;
    /** iWARP: the close's fence (a probe's READ after the FIN) is posted; its completion lets the close finish. */
    private static final int FENCE_POSTED = 1 << 15;
    /** How long after the greeting an iWARP connecting side nudges the peer's receive path ({@link #nudge()}). */
    static final int NUDGE_MILLIS = 100;
    /** How many times {@link #nudge()} looks for room in the send queue: 5 s. */
    private static final int NUDGE_CHECKS = 50;

    private final RdmaSocketChannel ch;
    private final RdmaSocketChannel.RdmaSocketUnsafe unsafe;
    private final RdmaSocketChannelConfig config;
    private final RdmaIoHandler handler;
    private final ConnectionResources res;
    private final ReceiveQueue recv;
    private final CreditWindow credits;
    private final FlushedMessages flushed = new FlushedMessages();
    /** Set when the peer's handshake is known. */
    private DataPath sends;
    /** Both sides offered the WRITE ring in their handshakes (protocol v2); set with {@link #sends}. */
    private boolean writeRing;
    /** Both sides offered the READ rendezvous in their handshakes (protocol v2); set with {@link #sends}. */
    private boolean rendezvous;
    /** An RNDV came before this side learnt the negotiation; {@link #peerReady} checks it was negotiated. */
    private boolean earlyRendezvous;
    /**
     * Before the handshake was known: a CREDIT returned credits (a pooled credits' CREDIT), one carried a released count
     * (a WRITE ring's); {@link #peerReady} fails the connection if the path was not negotiated, as a later one would.
     */
    private boolean earlyReturned;
    private boolean earlyRingCredit;
    /**
     * Protocol v2: the peer's RING message, when it came before this side learnt the negotiation (a connecting side's
     * loop may see the accepted side's first messages before ESTABLISHED); taken at {@link #peerReady}.
     */
    private RingWriter earlyPeerRing;
    /** What the end of output still sends: flushed writes not posted when the channel closed. */
    private CloseLinger linger;
    private int state;
    /** An orderly close's time-out: it turns abortive after {@code CLOSE_TIMEOUT_MILLIS} without progress. */
    private Future<?> closeTimeout;
    /** When the close last made progress (bytes it waits for settled), {@code System.nanoTime()}. */
    private long closeProgressNanos;
    /** The keep-alive tick, every {@code KEEPALIVE_MILLIS} from the handshake on; null if off. */
    private Future<?> keepAlive;
    /** Whether a completion of this connection came since the last keep-alive tick. */
    private boolean heard;
    /** Whether work (a probe or a send) was posted and not completed at the last keep-alive tick. */
    private boolean postedAtLastTick;
    /** Keep-alive ticks in a row that found no completion since the one before. */
    private int silentTicks;
    /** Pooled credits, when negotiated: the window's growth and shrink in the loop's shared receive pool. */
    private PooledWindow window;
    /** The next {@link #nudge()}, while one is scheduled. */
    private Future<?> nudge;
    /** How many times {@link #nudge()} has looked for room in the send queue. */
    private int nudgeChecks;
    /** {@link #pullRendezvous()}, as a task ({@link #readAheadFreed()}). */
    private final Runnable pullTask = this::pullRendezvous;

    /**
     * Creates the QP on {@code id} and posts the receives; with {@code knownPeer} (accepted) the send side too. On
     * failure it frees what it allocated, in reverse order.
     */
    RdmaConnection(RdmaSocketChannel ch, CmId id, RdmaIoHandler handler, int registrationId, Handshake knownPeer)
            throws IOException {
        this.ch = ch;
        unsafe = (RdmaSocketChannel.RdmaSocketUnsafe) ch.unsafe();
        config = ch.config();
        this.handler = handler;
        res = new ConnectionResources(ch, id, handler, registrationId,
                knownPeer != null && knownPeer.offersPooledCredits(), this::readAheadFreed);
        recv = res.recv;
        credits = new CreditWindow(res.initialCredits, res.recvCount);
        if (knownPeer != null) {
            boolean ok = false;
            try {
                peerReady(knownPeer);
                ok = true;
            } finally {
                if (!ok) {
                    res.destroy();
                }
            }
        }
    }

    /** The connection's state in one line, for a report of a connection that hangs (event loop only). */
    String describe() {
        StringBuilder b = new StringBuilder("state");
        String[] names = {"SEND_OPEN", "REMOVING", "FLUSH_AFTER_REMOVE", "FIN_PENDING", "FIN_SENT", "FIN_RECEIVED",
            "CLOSING", "FAILED", "PEER_GONE", "CREDITS_BROKEN", "DESTROYED", "CLOSE_REQUESTED", "SEND_BLOCKED",
            "TOUCHED", "RING_OFFERED", "FENCE_POSTED"};
        for (int i = 0; i < names.length; i++) {
            if (is(1 << i)) {
                b.append(' ').append(names[i]);
            }
        }
        b.append(", keep-alive ").append(keepAlive == null ? "off" : keepAlive.isDone() ? "ended" : "on")
                .append(" (heard ").append(heard).append(", posted at last tick ").append(postedAtLastTick)
                .append(", silent ticks ").append(silentTicks).append(')');
        if (sends != null) {
            b.append(", sends ").append(sends.isIdle() ? "idle" : "in flight").append(sends.hasPlace() ? "" : ", queue full")
                    .append(", unsettled ").append(sends.unsettledBytes()).append(" B");
        }
        ChannelOutboundBuffer out = unsafe.outboundBuffer();
        return b.append(", ").append(credits).append(", pending reads ").append(recv.hasPending())
                .append(", outbound ").append(out == null ? "closed" : out.totalPendingWriteBytes() + " B").toString();
    }

    private boolean is(int bits) {
        return (state & bits) != 0;
    }

    private void set(int bits) {
        state |= bits;
    }

    private void clear(int bits) {
        state &= ~bits;
    }

    boolean isFailed() {
        return is(FAILED);
    }

    void markFailed() {
        set(FAILED);
    }

    boolean isPeerGone() {
        return is(PEER_GONE);
    }

    void markPeerGone() {
        set(PEER_GONE);
    }

    boolean isClosing() {
        return is(CLOSING);
    }

    void markClosing() {
        set(CLOSING);
    }

    boolean isDestroyed() {
        return is(DESTROYED);
    }

    /** Whether bytes are posted and not settled (zero-copy ones: the device may still read their buffers). */
    boolean hasUnsettledSends() {
        return sends != null && sends.unsettledBytes() > 0;
    }

    boolean finReceived() {
        return is(FIN_RECEIVED);
    }

    /** Whether a completion is removing bytes from the outbound buffer (a close must wait for it). */
    boolean isRemoving() {
        return is(REMOVING);
    }

    boolean isCloseRequested() {
        return is(CLOSE_REQUESTED);
    }

    /**
     * An orderly {@code close()} with sends in flight: they read the buffers of writes that Netty would release at
     * once, so the close waits for their completions, which settle those writes as usual ({@link #onBatchComplete}
     * then closes the channel); meanwhile nothing more is posted and new writes fail. Past the close time-out it turns
     * abortive. Returns whether the close waits.
     */
    boolean deferCloseWhileSending() {
        if (sends == null || sends.unsettledBytes() == 0) {
            return false;
        }
        if (!is(CLOSE_REQUESTED)) {
            set(CLOSE_REQUESTED);
            startCloseTimeout(() -> {
                if (ch.isOpen()) {
                    logger.debug("{}: sends not completed within the close time-out; closing abortively", ch);
                    set(FAILED);
                    unsafe.close(unsafe.voidPromise()); // their writes fail
                }
            });
        }
        return true;
    }

    /**
     * Starts (again) the close's time-out: {@code expired} runs once {@code CLOSE_TIMEOUT_MILLIS} pass without progress
     * (bytes the close waits for settling), as a socket's kernel gives up on an orphaned connection whose peer takes
     * nothing; a peer that reads slowly but reads gets everything.
     */
    private void startCloseTimeout(Runnable expired) {
        if (closeTimeout != null) {
            closeTimeout.cancel(false);
        }
        closeProgressNanos = System.nanoTime();
        scheduleCloseTimeout(expired, TimeUnit.MILLISECONDS.toNanos(config.getCloseTimeoutMillis()));
    }

    private void scheduleCloseTimeout(Runnable expired, long delayNanos) {
        closeTimeout = ch.eventLoop().schedule(() -> {
            long still = TimeUnit.MILLISECONDS.toNanos(config.getCloseTimeoutMillis())
                    - (System.nanoTime() - closeProgressNanos);
            if (still > 0) {
                scheduleCloseTimeout(expired, still);
            } else {
                expired.run();
            }
        }, delayNanos, TimeUnit.NANOSECONDS);
    }

    /** Whether both sides offered the WRITE ring in their handshakes (protocol v2). */
    boolean writeRingNegotiated() {
        return writeRing;
    }

    ConnectionResources resources() {
        return res;
    }

    /** Whether this connection may still close in order: nothing failed, the peer is there. */
    boolean canCloseGracefully() {
        return !is(FAILED | PEER_GONE);
    }

    ConnectionParameters parameters(CmId id) {
        return res.parameters(id);
    }

    /** The peer's handshake: the send side can be set up. */
    void peerReady(Handshake p) throws IOException {
        if (sends != null) {
            return;
        }
        writeRing = res.offersWriteRing && p.offersWriteRing();
        rendezvous = res.offersRendezvous && p.offersReadRendezvous();
        boolean pooled = p.pooledCredits(res.offersPooledCredits);
        // credits may have come with data before
        String violation = credits.peerReady(p.initialCredits(pooled), p.creditLimit(pooled));
        if (violation == null && pooled && ch.parent() == null) {
            // the connecting side spoke first with its whole window; its handshake started the peer at POOLED_INITIAL
            violation = credits.startPooled(CreditWindow.POOLED_INITIAL);
        }
        if (pooled && (ch.parent() != null || p.keepsPeerGoing())) {
            // the accepted side keeps its peer going (and said so in its answer): windows may come down to 2
            credits.keepPeerGoing(ch.parent() != null);
        }
        if (violation != null) {
            throw protocolViolation(violation);
        }
        // a SEND is at most the smaller receive buffer of both sides: the peer's handshake never decides what this
        // side allocates (staging is sqDepth sends of this size)
        if (earlyPeerRing != null && !writeRing) {
            throw protocolViolation("sent a RING message though the WRITE ring was not negotiated");
        }
        if (earlyRendezvous && !rendezvous) {
            throw protocolViolation("sent an RNDV message though the READ rendezvous was not negotiated");
        }
        if (earlyReturned && !pooled) {
            throw protocolViolation("returned credits in a CREDIT message though pooled credits were not negotiated");
        }
        if (earlyRingCredit && !writeRing) {
            throw protocolViolation("sent a CREDIT message with a released count though the WRITE ring was not "
                    + "negotiated");
        }
        sends = res.openSendQueue(credits, flushed, Math.min(p.receiveBufferSize, res.recvSize), writeRing,
                rendezvous, this::touch);
        if (!p.solicits()) {
            res.sends.peerLeavesMessagesUnsolicited();
        }
        if (p.offersProbeTarget() && res.probes != null) {
            res.sends.probeTarget(p.probeAddress, p.probeRkey, res.probes);
        }
        if (pooled) {
            window = new PooledWindow(credits, res);
            window.release();
        }
        int keepAliveMillis = config.getKeepAliveMillis();
        if (keepAliveMillis > 0 && !res.canRead) {
            logger.debug("{}: no keep-alive: the device allows no RDMA READ in flight (max_qp_rd_atom 0)", ch);
        } else if (keepAliveMillis > 0) {
            keepAlive = ch.eventLoop().scheduleWithFixedDelay(this::keepAliveTick, keepAliveMillis, keepAliveMillis,
                    TimeUnit.MILLISECONDS);
        }
        if (earlyPeerRing != null) {
            res.sends.peerRing(earlyPeerRing);
            earlyPeerRing = null;
        }
        // the connecting side sends first (its greeting, see greet()); the accepted side waits (see peerEstablished())
        if (ch.parent() == null) {
            set(SEND_OPEN);
        }
    }

    /**
     * An accepted channel's ESTABLISHED. On InfiniBand and RoCE the connecting side has finished the set-up (its QP is
     * ready, it sent the RTU), so this side may send even before the greeting has arrived. Not on iWARP: soft-iWARP
     * reports it as soon as it has sent the MPA reply, and data that reaches the initiator while it still parses that
     * reply fails its connect (CONNECT_ERROR, EINVAL); there only the greeting opens the send side.
     */
    void peerEstablished() {
        if (!res.iwarp && !is(SEND_OPEN | DESTROYED) && sends != null) {
            openSendSide();
            onBatchComplete();
        }
    }

    private void openSendSide() {
        set(SEND_OPEN);
        offerRing();
    }

    /**
     * Protocol v2: binds this side's ring to the QP and tells the peer where it is (RING), once the send side is open
     * (a bind is a work request on the connected QP); retried at the end of a batch if credits or the queue lack room.
     */
    private boolean offerRing() {
        if (!writeRing || is(RING_OFFERED | DESTROYED | FAILED | PEER_GONE) || !is(SEND_OPEN)) {
            return false;
        }
        if (!credits.canSendData() || !res.sends.hasRoom(2)) {
            return false;
        }
        set(RING_OFFERED);
        try {
            res.sends.sendRing();
        } catch (IOException e) {
            unsafe.fail(e);
        }
        return true;
    }

    /**
     * The connecting side's first message, right at ESTABLISHED: a CREDIT message (usually of 0 credits). The accepted
     * side sends nothing before a message from the peer has arrived: iWARP (MPA) requires the initiator to send first
     * (soft-iWARP fails the connection on the initiator's side otherwise), and on InfiniBand and RoCE it proves the
     * initiator's QP ready to receive (rxe drops what arrives earlier, resent ~2 s later).
     */
    void greet() {
        if (!offerRing()) { // with the WRITE ring, the RING message is the greeting (no credit spent on a CREDIT)
            postControl(RdmaProtocol.TYPE_CREDIT);
        }
        if (res.iwarp) {
            nudge = ch.eventLoop().schedule(this::nudge, NUDGE_MILLIS, TimeUnit.MILLISECONDS);
        }
    }

    /**
     * iWARP: a zero-byte RDMA WRITE {@link #NUDGE_MILLIS} after the greeting, unless data came back already. Soft-iWARP
     * installs its receive path on an accepted connection only after it has sent the MPA reply: a frame that arrives in
     * between stays unread in the peer's socket until more data arrives, and a greeting (and what was posted right behind
     * it) that nothing follows is never seen (docs/protocol.md, "The connecting side speaks first"). The WRITE is that
     * more data; the peer's device takes it without an answer. Not a READ: siw queues the answer to a READ that arrives
     * while it is sending and then answers it with a stale SGE of its last send, and drops the connection (read in its
     * source; zero-byte READs reset streams on siw0, also when posted only on an idle send queue: a writer stalled for
     * credits has one while its peer sends CREDITs). Looked at again while the send queue is full, at most
     * {@link #NUDGE_CHECKS} times.
     */
    private void nudge() {
        nudge = null;
        if (is(DESTROYED | PEER_GONE | FAILED | FIN_SENT | CLOSING | FIN_RECEIVED)
                || ch.counters().messagesReceived > 0) {
            return;
        }
        if (!sends.hasPlace()) {
            if (++nudgeChecks < NUDGE_CHECKS) {
                nudge = ch.eventLoop().schedule(this::nudge, NUDGE_MILLIS, TimeUnit.MILLISECONDS);
            }
            return;
        }
        try {
            sends.sendEmptyWrite();
        } catch (IOException e) {
            // the QP left RTS: the connection is going down, and its events say why
            logger.debug("{}: nudge not posted, the connection is going down", ch, e);
        }
    }

    private RdmaProtocolViolationException protocolViolation(String what) {
        return new RdmaProtocolViolationException("protocol violation by " + ch.remoteAddress() + ": the peer "
                + what);
    }

    /** A completion for this connection, dispatched by its work request id. */
    void onCompletion(long wrId, int status, int byteLen, int opcode, int imm, int flags) {
        int slot = (int) (wrId & (ConnectionResources.RECV_BIT - 1));
        if ((wrId & ConnectionResources.RECV_BIT) != 0) {
            if (status == WcStatus.SUCCESS && opcode == WcOpcode.RECV_RDMA_WITH_IMM) {
                onRingNotification(slot, imm, byteLen);
                return;
            }
            onRecvCompletion(slot, status, byteLen, flags, imm);
        } else {
            onSendCompletion(slot, status);
        }
    }

    /**
     * A receive this connection's QP took from the loop's shared pool completed: its buffer goes into a slot of this
     * connection's, and on as any receive. One beyond the slots is a message the peer had no credit for.
     */
    void onSharedReceive(long wrId, int status, int byteLen, int opcode, int imm, int flags) {
        int slot = res.pooled.hold(wrId);
        if (slot < 0) {
            unsafe.fail(protocolViolation("sent more messages than it had credits for"));
            return;
        }
        onCompletion(ConnectionResources.RECV_BIT | slot, status, byteLen, opcode, imm, flags);
    }

    // ---- receive side ----

    private void onRecvCompletion(int slot, int status, int byteLen, int flags, int invalidatedRkey) {
        if (status != WcStatus.SUCCESS) {
            if (status == WcStatus.WR_FLUSH_ERR) {
                if (!is(CLOSING | PEER_GONE | FAILED) && !ch.isConnecting()) {
                    // iWARP flushes the receives as soon as the peer's connection closes, before DISCONNECTED
                    // arrives: the same thing, the data that came before is delivered first. While connecting,
                    // ESTABLISHED (then DISCONNECTED) is still to come: the peer accepted, sent and closed before
                    // this loop saw the connection set up; those events settle it.
                    unsafe.onDisconnected();
                }
            } else {
                boolean length = status == WcStatus.LOC_LEN_ERR || status == WcStatus.LOC_QP_OP_ERR;
                unsafe.fail(new IOException("receive failed: " + WcStatus.name(status) + (length ? " (a message "
                        + "longer than the " + res.recvSize + "-byte receive buffers, or a broken connection)" : "")));
            }
            return;
        }
        ch.counters().completions++;
        if (!is(SEND_OPEN)) {
            openSendSide(); // an accepted channel's gate: the peer has sent, it may send too (see greet())
        }
        ByteBuf message = recv.buffer(slot);
        // before the handshake is known (data that beat ESTABLISHED), what this side offered decides: a peer sends v2's
        // messages only once it negotiated, and peerReady checks that it did
        boolean ring = sends == null ? res.offersWriteRing : writeRing;
        boolean pooled = sends == null ? res.offersPooledCredits : window != null;
        boolean rndv = sends == null ? res.offersRendezvous : rendezvous;
        String violation = RdmaProtocol.checkHeader(message, byteLen,
                (ring ? RdmaProtocol.FLAG_WRITE_RING : 0) | (pooled ? RdmaProtocol.FLAG_POOLED_CREDITS : 0)
                | (rndv ? RdmaProtocol.FLAG_READ_RENDEZVOUS : 0));
        int type = RdmaProtocol.headerType(message);
        boolean invalidated = (flags & WcOpcode.FLAG_WITH_INV) != 0;
        if (violation == null && type == RdmaProtocol.TYPE_DONE) {
            RendezvousSends exposed = sends == null ? null : res.sends.rendezvous();
            violation = exposed == null ? "sent a DONE before this side announced a rendezvous"
                    : exposed.checkDone(RdmaProtocol.rendezvousId(message), invalidated, invalidatedRkey);
            if (violation == null) {
                repostQuietly(slot); // one of the receives kept for DONEs beyond the window: no credit owed
                settle(exposed.done());
                set(SEND_BLOCKED); // a rendezvous may start again
                touch();
                return;
            }
        } else if (violation == null && invalidated) {
            violation = "sent a message of type " + type + " as SEND_WITH_INV (only a DONE invalidates)";
        } else if (violation == null && res.offersRendezvous && type != RdmaProtocol.TYPE_CREDIT
                && recv.pendingMessages() >= res.recvCount) {
            // the receives kept for DONEs are not credits: the slots alone no longer bound the peer's messages
            violation = "sent more messages than it had credits for";
        }
        if (violation == null) {
            violation = credits.onReceived(RdmaProtocol.headerCredits(message));
        }
        int returned = pooled ? RdmaProtocol.headerReturned(message) : 0; // 0 unless a CREDIT (checkHeader)
        if (sends == null) {
            earlyReturned |= returned > 0;
            earlyRingCredit |= ring && byteLen == RdmaProtocol.RING_CREDIT_LENGTH && type == RdmaProtocol.TYPE_CREDIT;
        }
        if (violation == null && returned > 0) {
            violation = credits.onReturned(returned);
            if (violation == null && window != null) {
                try {
                    window.release(); // those receives are not needed any more
                } catch (VerbsException e) {
                    unsafe.fail(e);
                    return;
                }
            }
        }
        if (violation == null && byteLen == RdmaProtocol.RING_CREDIT_LENGTH
                && RdmaProtocol.headerType(message) == RdmaProtocol.TYPE_CREDIT) {
            violation = onReleased(RdmaProtocol.creditReleased(message));
        }
        if (violation != null) {
            unsafe.fail(protocolViolation(violation));
            return;
        }
        switch (RdmaProtocol.headerType(message)) {
            case RdmaProtocol.TYPE_DATA:
                if (is(FIN_RECEIVED) && ch.isOpen() && !is(CLOSE_REQUESTED)) {
                    // nothing follows a FIN (a TCP peer that sends after its FIN is reset)
                    unsafe.fail(protocolViolation("sent a DATA message after its FIN"));
                    return;
                }
                countReceived(byteLen - RdmaProtocol.HEADER_LENGTH);
                if (!ch.isOpen() || is(CLOSE_REQUESTED)) {
                    credits.oweData(1); // closing: dropped, but the peer gets the credit back (its FIN may need it)
                    repostQuietly(slot);
                } else if (ch.inputShutdown) {
                    credits.oweControl(); // shut down here: the peer does not know, its bytes are dropped
                    repostQuietly(slot);
                } else {
                    recv.enqueue(slot, RdmaProtocol.HEADER_LENGTH, byteLen);
                }
                break;
            case RdmaProtocol.TYPE_FIN:
                if (is(FIN_RECEIVED)) {
                    unsafe.fail(protocolViolation("sent a second FIN"));
                    return;
                }
                set(FIN_RECEIVED);
                credits.oweControl();
                repostQuietly(slot);
                recv.enqueueFin();
                break;
            case RdmaProtocol.TYPE_RNDV: // (checkHeader let it through: the rendezvous was offered or negotiated)
                if (is(FIN_RECEIVED)) {
                    // nothing follows a FIN; the table must keep the rendezvous before it (the FIN waits behind it)
                    unsafe.fail(protocolViolation("sent an RNDV message after its FIN"));
                    return;
                }
                violation = res.rendezvousReceives.onRendezvous(message);
                if (violation != null) {
                    unsafe.fail(protocolViolation(violation));
                    return;
                }
                if (sends == null) {
                    earlyRendezvous = true;
                }
                repostQuietly(slot); // its buffer is copied into the table; the credit is owed once it is read
                countReceived(0);
                if (!ch.isOpen() || is(CLOSE_REQUESTED) || ch.inputShutdown) {
                    // nothing will be read: its DONE goes at once, and its credit back
                    res.rendezvousReceives.discard();
                    if (!ch.isOpen() || is(CLOSE_REQUESTED)) {
                        credits.oweData(1);
                    } else {
                        credits.oweControl();
                    }
                } else {
                    recv.enqueueRendezvous();
                }
                break;
            case RdmaProtocol.TYPE_RING: // (checkHeader let it through: the ring was negotiated)
                violation = onPeerRing(message);
                if (violation != null) {
                    unsafe.fail(protocolViolation(violation));
                    return;
                }
                credits.oweControl();
                repostQuietly(slot);
                break;
            default: // CREDIT
                credits.oweControl();
                repostQuietly(slot);
                break;
        }
        touch();
    }

    /**
     * Protocol v2: posts the DONEs this side owes (in RNDV order) and the READs the rendezvous' bounds allow, as far as
     * the send queue has places; the rest waits for the next batch end (a completion frees places and touches). Nothing
     * without the rendezvous offered, or before the send side is open.
     */
    private void pullRendezvous() {
        if (res.rendezvousReceives == null || sends == null || !is(SEND_OPEN) || is(DESTROYED | FAILED | PEER_GONE)) {
            return;
        }
        RendezvousReceives table = res.rendezvousReceives;
        try {
            while (table.owesDone() && res.sends.hasRoom()) {
                res.sends.sendDone(table.doneId(), table.doneRkey());
                table.donePosted();
            }
            table.pull(res.sends, res.receiveMemory());
        } catch (IOException e) {
            unsafe.fail(e);
        }
    }

    /**
     * Protocol v2: the loop's read-ahead budget, which stopped this connection's READs, has bytes again; the wake comes
     * from another connection's read or close, so the pull runs from a task of its own.
     */
    private void readAheadFreed() {
        ch.eventLoop().execute(pullTask);
    }

    /** Protocol v2: the peer's RING message (after the header: address u64, length u32, rkey u32). */
    private String onPeerRing(ByteBuf message) {
        if (earlyPeerRing != null || sends != null && res.sends.hasPeerRing()) {
            return "sent a second RING message";
        }
        int h = RdmaProtocol.HEADER_LENGTH;
        long address = message.getLong(h);
        int length = message.getInt(h + 8);
        int rkey = message.getInt(h + 12);
        if (length < 64 << 10 || length > 1 << 30) {
            return "announced a WRITE ring of " + Integer.toUnsignedString(length) + " bytes (expected 64 KiB .. 1 GiB)";
        }
        RingWriter ring = new RingWriter(address, length, rkey);
        if (sends == null) {
            earlyPeerRing = ring; // peerReady takes it, or fails the connection if the ring was not negotiated
        } else {
            res.sends.peerRing(ring);
            set(SEND_BLOCKED); // flushed bytes may go into the ring now
        }
        return null;
    }

    /**
     * Protocol v2: a CREDIT message says the peer freed {@code released} bytes of this side's writes to its ring in all
     * (mod 2^32); before this side knows a ring of the peer's, nothing was written, so only 0 is right.
     */
    private String onReleased(int released) {
        if (sends != null && res.sends.hasPeerRing()) {
            return res.sends.onReleased(released);
        }
        return released == 0 ? null : "released " + Integer.toUnsignedString(released)
                + " ring bytes before it said where its ring is";
    }

    /**
     * Protocol v2: a WRITE_WITH_IMM of the peer's placed bytes in this side's ring (or a PAD of its tail), which consumed
     * {@code slot}'s receive without touching its buffer. Checked against the space the peer was given (docs/protocol.md)
     * before anything acts on it; a message is queued in order with the SENDs' and its credit owed once it is read.
     */
    private void onRingNotification(int slot, int imm, int byteLen) {
        ch.counters().completions++;
        if (!is(SEND_OPEN)) {
            openSendSide();
        }
        LocalRing ring = res.ring;
        String violation = ring == null ? "wrote into a ring though the WRITE ring was not negotiated"
                : ring.space.onNotification(imm, byteLen);
        if (violation == null) {
            violation = credits.onReceived(RingReceiveSpace.immCredits(imm));
        }
        if (violation != null) {
            unsafe.fail(protocolViolation(violation));
            return;
        }
        repostQuietly(slot); // its buffer holds nothing; the credit is owed as for any message
        int at = ring.space.lastOffset();
        if (at < 0) {
            credits.oweControl(); // a PAD: nothing to read
        } else if (is(FIN_RECEIVED) && ch.isOpen() && !is(CLOSE_REQUESTED)) {
            unsafe.fail(protocolViolation("wrote into the ring after its FIN")); // nothing follows a FIN
            return;
        } else {
            countReceived(byteLen);
            ch.counters().ringBytesReceived += byteLen;
            handler.counters().ringBytesReceived += byteLen;
            if (!ch.isOpen() || is(CLOSE_REQUESTED)) {
                ring.space.freeOldest();
                credits.oweData(1);
            } else if (ch.inputShutdown) {
                ring.space.freeOldest();
                credits.oweControl();
            } else {
                recv.enqueueRing(at, at + byteLen);
            }
        }
        touch();
    }

    private void countReceived(int payload) {
        RdmaCounters c = ch.counters();
        c.messagesReceived++;
        c.bytesReceived += payload;
        handler.counters().messagesReceived++;
        handler.counters().bytesReceived += payload;
    }

    private void repostQuietly(int slot) {
        try {
            recv.repost(slot);
        } catch (VerbsException e) {
            unsafe.fail(e);
        }
    }

    boolean hasPendingReads() {
        return recv.hasPending();
    }

    boolean hasPendingData() {
        return recv.hasPendingData();
    }

    boolean finAtHead() {
        return recv.finAtHead();
    }

    /** The next buffer for the pipeline (see {@link ReceiveQueue#nextRead}); null if the connection failed. */
    ByteBuf nextRead(RecvByteBufAllocator.Handle allocHandle) {
        ByteBuf buf;
        try {
            buf = recv.nextRead(allocHandle, config.getAllocator(), !config.isAutoRead());
        } catch (VerbsException e) {
            unsafe.fail(e);
            return null;
        }
        credits.oweData(recv.takeReposted());
        maybeReturnCredits();
        pullRendezvous(); // a chunk taken makes room in the read-ahead (a read() need not follow a completion)
        return buf;
    }

    /** The FIN is next: every byte before it was delivered. */
    void onFinReached() {
        recv.takeFin();
        if (!config.isAllowHalfClosure()) {
            unsafe.close(unsafe.voidPromise());
            return;
        }
        ch.inputShutdown = true;
        ch.pipeline().fireUserEventTriggered(ChannelInputShutdownEvent.INSTANCE);
        if (ch.isOpen() && !is(CLOSE_REQUESTED)) { // a handler that closed at the event hears no more (as on epoll)
            ch.pipeline().fireUserEventTriggered(ChannelInputShutdownReadComplete.INSTANCE);
        }
        if (is(PEER_GONE) || ch.outputShutdown) {
            unsafe.close(unsafe.voidPromise());
        }
    }

    /**
     * Drops the messages not read yet ({@code shutdownInput()}, an orderly {@code close()}); their credits are owed
     * back. At a {@code close()} ({@code closing}) they are not returned here: the close has not said yet that its FIN
     * goes next, and a CREDIT message could take the last credit that FIN may need ({@link #finIsNext}); the FIN's
     * header carries them, or {@code closeGracefully} returns them while a credit beyond the FIN's is left (a close
     * deferred for sends in flight returns them at once, {@code RdmaSocketChannel}'s close).
     */
    void discardPendingReads(boolean closing) {
        try {
            recv.discardPending();
        } catch (VerbsException e) {
            unsafe.fail(e);
            return;
        }
        credits.oweData(recv.takeReposted());
        if (!closing) {
            maybeReturnCredits();
        }
        pullRendezvous(); // the DONEs the discard owes: the peer's writes complete, its buffers go
    }

    /** Asks for {@link #onBatchComplete()} at the end of the current batch, once. */
    private void touch() {
        if (!is(TOUCHED)) {
            set(TOUCHED);
            handler.touch(unsafe);
        }
    }

    /**
     * A tick of the keep-alive. A connection that heard nothing for a whole interval (no completion) posts a probe, an
     * RDMA READ (of zero bytes; on iWARP of one byte of the peer's probe target) that only the peer's device answers,
     * so that nothing reaches its pipeline (a WRITE would not do on iWARP: it completes once the local TCP stack has
     * taken it, also when the peer is gone). Two whole intervals without a completion while work was posted (the
     * second silent tick in a row, with work posted at the first still outstanding) mean the peer's device
     * acknowledges nothing: the peer is gone or unreachable, and the channel fails, within three intervals of its last
     * completion whether it was sending or idle. One silent interval is not enough: SoftRoCE under 1 % loss and
     * reordering (vm/two-host's netem step) was seen to go 5 s without completing a SEND of a working connection. The
     * bound is this transport's own, not the device's retry settings: soft-iWARP retransmits over TCP for many
     * minutes, and SoftRoCE was seen to retry a dead peer for longer than 30 s. A peer that only stopped reading still
     * acknowledges (its device does), so it is never taken for gone.
     */
    private void keepAliveTick() {
        // completions that arrived while this loop was busy elsewhere count: a stalled loop is not a silent peer
        handler.pollNow();
        boolean outstanding = postedAtLastTick;
        postedAtLastTick = false;
        if (heard) {
            heard = false;
            silentTicks = 0;
        } else if (is(DESTROYED | PEER_GONE | FAILED)) {
            return;
        } else if (!is(SEND_OPEN)) {
            if (outstanding) {
                unsafe.fail(new IOException("the connecting side did not finish setting up the connection within "
                        + config.getKeepAliveMillis() + " ms of the accept (no message came, nor, on InfiniBand and "
                        + "RoCE, RDMA CM's ESTABLISHED): it is gone, or not netty-rdma "
                        + "(RdmaChannelOption.KEEPALIVE_MILLIS)"));
                return;
            }
            postedAtLastTick = true; // one more tick to finish the set-up
            return;
        } else if (++silentTicks >= 2 && outstanding && !sends.isIdle()) {
            unsafe.fail(new IOException("keep-alive: the peer acknowledged nothing for "
                    + 2L * config.getKeepAliveMillis() + " ms though work was posted to it: it is gone or unreachable "
                    + "(RdmaChannelOption.KEEPALIVE_MILLIS)"));
            return;
        } else if (sends.isIdle() && sends.hasPlace()) {
            try {
                sends.sendProbe(true);
            } catch (IOException e) {
                logger.debug("{}: keep-alive probe not posted, the connection is going down", ch, e);
            }
        }
        postedAtLastTick = !sends.isIdle();
    }

    /** The end of a batch of completions that touched this connection: read, send and close as they allow. */
    void onBatchComplete() {
        heard = true;
        clear(TOUCHED);
        ch.counters().publish();
        if (ch.isConnecting()) {
            return; // data that beat ESTABLISHED waits for it (onEstablished comes back here)
        }
        if (recv.hasPending() && (unsafe.readPending || config.isAutoRead()) && ch.isOpen()) {
            unsafe.readLoop();
        } else if (finAtHead() && ch.isOpen() && ch.isRegistered()) {
            onFinReached(); // nothing buffered before the FIN: tell the pipeline even without a read
        }
        if (is(DESTROYED)) {
            return;
        }
        if (is(CLOSE_REQUESTED) && sends.unsettledBytes() == 0 && ch.isOpen()) {
            unsafe.close(unsafe.voidPromise()); // the close that waited for the sends in flight
            return;
        }
        if (linger != null) {
            postLingering();
        }
        if (is(FIN_PENDING)) {
            sendFin();
        }
        if (writeRing && !is(RING_OFFERED)) {
            offerRing();
        }
        pullRendezvous();
        if (is(SEND_BLOCKED) && sends != null && sends.hasRoom() && credits.canSendData() && ch.isActive()) {
            unsafe.flush0(); // only when flushed bytes wait and can move: a flush walks the messages in flight
        }
        maybeReturnCredits();
        if (is(CLOSING)) {
            maybeFinishClose();
        }
    }

    /**
     * A CREDIT message when the credit window says so (after its FIN the peer sends nothing: it needs none); with
     * pooled credits the window may grow first.
     */
    void maybeReturnCredits() {
        if (finIsNext() && !credits.canSendData()) {
            return; // the close's FIN takes the last credit (sendFin), and its header carries what is owed
        }
        if (!mayPostCredits()) {
            maybePoke();
            return;
        }
        if (window != null && !is(CLOSING | CLOSE_REQUESTED) && sends.hasRoom() && credits.canSendControl()) {
            try {
                // (only when a CREDIT could carry the growth: else each call would double the window again)
                window.beforeReturn();
            } catch (VerbsException e) {
                unsafe.fail(e);
                return;
            }
        }
        if ((credits.shouldReturnCredits() || ringSpaceToAnnounce()) && sends.hasRoom()) {
            postControl(RdmaProtocol.TYPE_CREDIT);
        } else {
            maybePoke();
        }
    }

    /**
     * The accepted side with pooled credits, blocked at its last credit with a DATA or FIN waiting, spends it on a
     * CREDIT message ({@link CreditWindow#shouldPoke}): its peer then owes two control credits and returns them. Also
     * after the peer's FIN (the peer still returns credits then).
     */
    private void maybePoke() {
        if (is(SEND_OPEN) && !is(DESTROYED | PEER_GONE | FAILED | CREDITS_BROKEN) && credits.shouldPoke(
                is(SEND_BLOCKED | FIN_PENDING)) && sends.hasRoom()) {
            postControl(RdmaProtocol.TYPE_CREDIT);
        }
    }

    /**
     * The channel closed in order and its FIN goes next: the bytes its close took along are all posted. The last credit
     * is the FIN's then: spent on a CREDIT message, it would leave the FIN waiting for a credit that a peer that does
     * not read returns only alone, which a connecting side never does, until the close time-out made the close
     * abortive. While bytes taken along still wait for credits, CREDIT messages go on: the peer may read only once its
     * own writes move. So do they while the close waits for sends in flight (CLOSE_REQUESTED): a rendezvous of this
     * side's ends only with the peer's DONE, which may wait for the peer's pipeline, which may wait for its own writes.
     */
    private boolean finIsNext() {
        return is(CLOSING) && !is(FIN_SENT) && lingerPosted();
    }

    /** Whether the bytes the end of output took along ({@link CloseLinger}), if any, are all posted. */
    private boolean lingerPosted() {
        return linger == null || linger.bytes() == sends.unsettledBytes();
    }

    /** Whether a CREDIT message may go out: the send side is open, the peer still there and still sending. */
    private boolean mayPostCredits() {
        return is(SEND_OPEN) && !is(DESTROYED | PEER_GONE | FAILED | FIN_RECEIVED | CREDITS_BROKEN);
    }

    /**
     * The loop's tick ({@link RdmaIoHandler#TICK_MILLIS}), for a pooled window: an unstarved window shrinks, and its
     * reservation with it; a sender idle since the last tick gives its surplus credits back, so that the peer's pool
     * can let their receives go. A connection whose shared receive queue failed fails.
     */
    void tick() {
        if (is(DESTROYED)) {
            return;
        }
        ReceivePool pool = res.receivePool();
        if (pool != null && pool.failed()) {
            unsafe.fail(new IOException("the shared receive queue this connection receives from failed "
                    + "(the device reported IBV_EVENT_SRQ_ERR): no message can arrive any more, the connection "
                    + "is closed (a new connection gets a new queue)"));
            return;
        }
        if (window == null) {
            return;
        }
        try {
            window.tick();
        } catch (VerbsException e) {
            unsafe.fail(e);
            return;
        }
        // (a sender waiting for staging or closing is not idle)
        if (window.idleSender() && mayPostCredits() && !is(SEND_BLOCKED | FIN_SENT | CLOSING) && sends.hasRoom()
                && credits.returnSurplus(credits.creditsToKeep())) {
            postControl(RdmaProtocol.TYPE_CREDIT);
        }
    }

    /**
     * Protocol v2: a quarter of the ring was freed since the last header; a CREDIT message tells the writer. It spends a
     * data credit, never the one kept for credit messages (which may only go to one that grants data credits).
     */
    private boolean ringSpaceToAnnounce() {
        return writeRing && res.ring.space.shouldAnnounce() && credits.canSendData();
    }

    // ---- send side ----

    void write(ChannelOutboundBuffer in) throws Exception {
        for (;;) {
            if (is(REMOVING)) {
                set(FLUSH_AFTER_REMOVE);
                return;
            }
            if (is(FAILED | PEER_GONE)) {
                failWritesThatCannotArrive(in);
                return;
            }
            if (!is(SEND_OPEN) || is(CLOSING | CLOSE_REQUESTED)) {
                set(SEND_BLOCKED);
                return;
            }
            long settled;
            try {
                sends.send(in);
            } catch (Exception e) {
                if (sends.postRefused()) {
                    // what the queue counted as sent was not: the peer must see a reset, not an end in order after a
                    // gap (writes it counted succeeded, as a socket's before a reset)
                    set(FAILED);
                }
                throw e;
            } finally {
                settled = sends.takeSettledAtPost(); // also when a FileRegion failed after them: their writes succeed
                if (settled > 0) {
                    removeFlushed(in, settled);
                }
            }
            boolean blocked = sends.waitsForRoom();
            if (blocked) {
                set(SEND_BLOCKED);
                maybePoke();
            } else {
                clear(SEND_BLOCKED);
            }
            if (settled == 0 || blocked) {
                return;
            }
            // write-future listeners may have written and flushed (Netty ignores a flush inside this one): post that
        }
    }

    /**
     * The connection failed (a reset) or the peer left after its FIN: nothing written now can arrive. Posted, a write
     * copied whole into staging would succeed at once (settled at post), and a request written from the
     * {@code exceptionCaught} that reports the reset would wait for an answer that never comes. Instead the flushed
     * writes fail, as a socket's after a reset, but the channel does not close here (a write error would): what the
     * peer sent before it left is still delivered, then the channel closes ({@code afterPeerLeft}). Sends in flight
     * when the peer left are flushed (this side disconnected then: {@code RdmaSocketChannel.disconnectFromGonePeer}),
     * and their writes fail here too once the flushes are in (they come at once: the QP is in error); until then the
     * writes wait.
     * A rendezvous without its DONE, or sends in flight on iWARP (where a send posted after the QP failed and before
     * this side heard of it never completes), cannot end alone: their buffers may go only once the QP is gone, so this
     * throws, and the channel closes as a socket's does on a write error after a reset (what was not read yet is lost
     * with it). Never left waiting on what might not come: nothing would end the wait.
     */
    private void failWritesThatCannotArrive(ChannelOutboundBuffer in) throws IOException {
        String why = is(FAILED) ? "Connection reset by peer: the connection failed before this write was delivered"
                : "Broken pipe: the peer closed the connection and left before this write was delivered";
        if (sends != null && sends.unsettledBytes() > 0) {
            if (is(PEER_GONE) && !sends.isIdle() && !res.iwarp) {
                return; // the flushes come (onSendCompletion), and this runs again
            }
            throw new IOException(why + " (bytes of earlier writes in flight: the connection closes)");
        }
        IOException cause = new IOException(why);
        set(REMOVING);
        try {
            while (in.remove(cause)) {
                // their listeners may write more: flushed, those fail here too
            }
        } finally {
            clear(REMOVING | FLUSH_AFTER_REMOVE);
        }
    }

    /**
     * Removes {@code bytes} settled bytes from the outbound buffer, which completes their writes. Their listeners may
     * write, flush or close: those wait until the bytes are gone ({@link #REMOVING}), or the bytes still in flight
     * would be counted wrong.
     */
    private void removeFlushed(ChannelOutboundBuffer out, long bytes) {
        set(REMOVING);
        try {
            flushed.remove(out, bytes);
        } finally {
            clear(REMOVING);
        }
    }

    /** A header-only message (FIN, CREDIT), posted at once. */
    private void postControl(int type) {
        try {
            sends.sendControl(type);
        } catch (IOException e) {
            if (type == RdmaProtocol.TYPE_CREDIT && ch.isOpen()) {
                // the QP left RTS: the peer is closing (iWARP tears the connection down right after its FIN, which
                // may still be in the receive queue behind data). Its FIN or DISCONNECTED says how it ended; until
                // then what arrived is delivered, and no credits are owed any more.
                logger.debug("{}: credit message not posted, the connection is going down", ch, e);
                set(CREDITS_BROKEN);
            } else {
                unsafe.fail(e);
            }
        }
    }

    /**
     * FIN after everything posted. After {@code shutdownOutput()} it waits for a credit beyond the one kept for CREDIT
     * messages, as DATA does: this side reads on and must be able to return credits. After {@code close()} it may take
     * that last credit: nothing this side posts after it needs a credit it does not hold (a CREDIT message goes only
     * with a credit in hand; DONEs and the fence's READ take none), and the credits it then cannot return for messages
     * it drops do not matter: its disconnect waits only for work already posted, and ends whatever the peer still waits
     * for. Otherwise a peer that does not read would hold the FIN of a closer that used all but one of its credits
     * until the close time-out turned the close abortive.
     */
    void sendFin() {
        if (is(FIN_SENT | DESTROYED | PEER_GONE) || sends == null) {
            return;
        }
        boolean credit = is(CLOSING) ? credits.canSendControl() : credits.canSendData();
        if (is(SEND_OPEN) && credit && sends.hasRoom() && lingerPosted()) {
            clear(FIN_PENDING);
            set(FIN_SENT);
            postControl(RdmaProtocol.TYPE_FIN);
        } else {
            set(FIN_PENDING);
            maybePoke();
        }
    }

    private void onSendCompletion(int slot, int status) {
        boolean control = sends.isControl(slot);
        boolean probe = sends.isProbe(slot);
        RendezvousReceives reads = res.rendezvousReceives;
        boolean read = reads != null && reads.isRead(slot);
        long n = sends.complete(slot);
        if (n < 0) {
            unsafe.fail(new IOException("send completion of work request " + slot + " (" + WcStatus.name(status)
                    + ") came out of posted order, after a later request's: the device reordered completions "
                    + "(a bug of the device's or of this transport's fencing); the connection cannot tell what was sent"));
            return;
        }
        boolean flushedAfterPeerLeft = status == WcStatus.WR_FLUSH_ERR && is(PEER_GONE) && !is(CLOSING);
        if (read) {
            if (!flushedAfterPeerLeft) {
                settle(n); // (the bytes of unsignalled requests before it)
            }
            int length = reads.oldestReadLength();
            IOException failed = reads.readCompleted(status);
            if (flushedAfterPeerLeft) {
                settleFlushed(n);
                return;
            }
            if (failed != null) {
                if (status != WcStatus.WR_FLUSH_ERR || !is(CLOSING | PEER_GONE | FAILED)) {
                    unsafe.fail(failed);
                }
                return;
            }
            RdmaCounters c = ch.counters();
            c.bytesReceived += length;
            c.rendezvousBytesRead += length;
            handler.counters().bytesReceived += length;
            handler.counters().rendezvousBytesRead += length;
            touch(); // the batch end reads the chunk on, pulls more, posts an owed DONE
            return;
        }
        if (probe && is(FENCE_POSTED)) {
            if (status != WcStatus.SUCCESS) {
                logger.debug("{}: the close's fence failed ({}); disconnecting", ch, WcStatus.name(status));
            }
            maybeFinishClose(); // the channel is closed: nobody to tell of a failure; the close ends either way
            return;
        }
        if (status != WcStatus.SUCCESS) {
            if (flushedAfterPeerLeft) {
                settleFlushed(n);
                return;
            }
            if (probe && status != WcStatus.WR_FLUSH_ERR) {
                // the pipeline hears why (a silent channel has no write to fail), then the channel closes
                unsafe.fail(new IOException("keep-alive probe failed: " + WcStatus.name(status)
                        + (status == WcStatus.RETRY_EXC_ERR ? " (the peer does not answer: gone or unreachable)" : "")));
            } else if (control && is(FIN_RECEIVED)) {
                // a CREDIT or FIN the peer no longer takes after its own FIN: it closed. What it sent before is
                // delivered first, as on DISCONNECTED
                unsafe.onDisconnected();
            } else if (status != WcStatus.WR_FLUSH_ERR || !is(CLOSING | PEER_GONE | FAILED)) {
                IOException cause = new IOException("send failed: " + WcStatus.name(status)
                        + (status == WcStatus.RETRY_EXC_ERR ? " (the peer does not answer: gone or unreachable)" : ""));
                ChannelOutboundBuffer out = unsafe.outboundBuffer();
                if ((control || probe) && (out == null || out.isEmpty())) {
                    // no write of the pipeline's carries it (a reader sends only CREDITs): the pipeline hears why, as
                    // a socket's read reports a reset
                    unsafe.fail(cause);
                } else {
                    unsafe.writeFailed(cause); // the flushed writes fail with it, as on a socket's write error
                }
            }
            return;
        }
        settle(n);
        touch();
    }

    /**
     * {@code n} bytes of sends flushed after the peer left (this side disconnected in turn: the QP is in error): the
     * device is done with them, whether or not they arrived. Their writes fail once nothing is in flight any more
     * ({@link #failWritesThatCannotArrive}), the channel staying open for the reads left; the batch end then reads on,
     * or lets a requested close go on.
     */
    private void settleFlushed(long n) {
        if (n > 0 && unsafe.outboundBuffer() == null && linger != null) {
            closeProgressNanos = System.nanoTime();
            linger.remove(n); // the output was shut down: bytes its end took along
        }
        sends.settle(n);
        if (sends.isIdle()) {
            unsafe.flush0();
        }
        touch();
    }

    /** {@code n} bytes of the flushed writes were sent (settled in stream order): their writes complete. */
    private void settle(long n) {
        if (n > 0) {
            if (closeTimeout != null) {
                closeProgressNanos = System.nanoTime(); // a close waits: it made progress
            }
            ChannelOutboundBuffer out = unsafe.outboundBuffer();
            if (out != null) {
                removeFlushed(out, n);
            } else if (linger != null) {
                linger.remove(n); // the channel closed: these were bytes its close took along
            }
            sends.settle(n);
            if (is(FLUSH_AFTER_REMOVE)) {
                clear(FLUSH_AFTER_REMOVE);
                unsafe.flush0();
            }
        }
    }

    // ---- closing ----

    /**
     * The channel's output ends ({@code close()}, {@code shutdownOutput()}): its flushed writes move to the connection
     * ({@link CloseLinger}: the posted bytes kept alive, the rest copied up to {@code SO_SNDBUF} bytes of whole writes)
     * and succeed; the connection sends them before its FIN. A write that could not be taken (a region whose file ended
     * early) fails with the cause; Netty fails what is left. Write-future listeners that run meanwhile wait
     * ({@link #REMOVING}), as during a completion.
     */
    void takeFlushed(ChannelOutboundBuffer out) {
        if (out == null || sends == null || linger != null || is(FIN_SENT)) {
            return;
        }
        linger = new CloseLinger();
        set(REMOVING);
        try {
            long taken = linger.take(out, flushed, sends.unsettledBytes(), config.getSendBufferSize(),
                    config.getAllocator());
            flushed.remove(out, taken);
            Throwable failure = linger.failure();
            if (failure != null) {
                out.remove(failure); // the write it stopped at, with the cause (a region's truncated file, say)
            }
        } finally {
            clear(REMOVING | FLUSH_AFTER_REMOVE); // a write now goes to Netty's closed buffer and fails there
        }
    }

    /** After {@code shutdownOutput()} or {@code close()}: the bytes taken along, then the FIN. */
    void endOutput() {
        postLingering();
        sendFin();
    }

    /**
     * Posts what the end of output took along ({@link #takeFlushed}) as far as credits allow. If a post fails, a close
     * turns abortive (also one deferred for sends in flight); after {@code shutdownOutput()} the channel is open and
     * reads on, so it hears of the broken connection as a socket's read does (the writes succeeded when taken, so no
     * write can tell it): after what a gone peer sent is read, or at once.
     */
    private void postLingering() {
        if (!is(SEND_OPEN) || lingerPosted()) {
            return;
        }
        try {
            sends.send(linger);
        } catch (Exception e) {
            logger.debug("{}: posting the writes taken along by the end of output failed", ch, e);
            if (is(CLOSING)) {
                unsafe.abort();
            } else if (is(CLOSE_REQUESTED)) {
                set(FAILED);
                unsafe.close(unsafe.voidPromise());
            } else if (is(PEER_GONE)) {
                set(FAILED); // what the peer sent is delivered first, then the reset
                unsafe.afterPeerLeft();
            } else {
                unsafe.fail(e instanceof IOException ? e : new IOException("posting the writes taken along by "
                        + "shutdownOutput() failed: " + e, e));
            }
        }
    }

    void closeGracefully() {
        set(CLOSING);
        endOutput();
        maybeReturnCredits(); // those of the reads the close dropped, unless the FIN carried them or needs the credit
        startCloseTimeout(() -> { // (the wait for the sends in flight is over: a new time-out for the rest)
            if (!is(DESTROYED)) {
                long lost = linger != null ? linger.bytes() : 0;
                if (lost > 0 && CLOSE_TIMEOUTS.tryWarn()) {
                    logger.warn("{}: the peer took nothing for {} ms (CLOSE_TIMEOUT_MILLIS) during the close; up to {} "
                            + "bytes of writes that succeeded may not have been delivered: resetting the connection", ch,
                            config.getCloseTimeoutMillis(), lost);
                } else {
                    logger.debug("{}: the close made no progress for {} ms; {} bytes not delivered; resetting", ch,
                            config.getCloseTimeoutMillis(), lost);
                }
                unsafe.abort();
            }
        });
        maybeFinishClose();
    }

    /**
     * FIN sent, every send completed and every byte settled: disconnect (the peer has all our data; a rendezvous' bytes,
     * a buffer the close took along among them, settle only at the peer's DONE, once it READ them). On iWARP a
     * completed SEND is only in this host's TCP send buffer, and the disconnect can reset the TCP connection (it does
     * when data the peer sent is still unread in the socket, a CREDIT or the greeting), which drops what the peer has
     * not yet received: so a READ (a probe's) goes after the FIN first, and only its answer, which the peer's device
     * sends once it has taken everything before it, lets the close finish.
     */
    private void maybeFinishClose() {
        if (!is(FIN_SENT) || !sends.isIdle() || is(DESTROYED)
                || sends.unsettledBytes() > 0 && !is(PEER_GONE | FAILED)) {
            return;
        }
        if (res.fencesClose && !is(FENCE_POSTED | PEER_GONE | FAILED)) {
            set(FENCE_POSTED);
            try {
                sends.sendProbe(false);
                return;
            } catch (IOException e) {
                logger.debug("{}: the close's fence was not posted; disconnecting", ch, e);
            }
        }
        unsafe.abort();
    }

    /** Frees everything, in reverse order of creation: the QP first, so that no work request references memory. */
    void destroy() {
        if (beginDestroy()) {
            finishDestroy(res.closeQp());
        }
    }

    /**
     * {@link #destroy}'s first part, on the loop: the connection stops (its timers, its windows and exposures, its
     * waits); nothing of it runs any more. False if it was destroyed before. Then {@link ConnectionResources#closeQp},
     * on any thread, then {@link #finishDestroy}.
     */
    boolean beginDestroy() {
        if (is(DESTROYED)) {
            return false;
        }
        set(DESTROYED);
        if (closeTimeout != null) {
            closeTimeout.cancel(false);
        }
        if (keepAlive != null) {
            keepAlive.cancel(false);
        }
        if (nudge != null) {
            nudge.cancel(false);
        }
        res.beginDestroy();
        return true;
    }

    /** {@link #destroy}'s last part, on the loop, once the QP's destruction returned {@code qpGone}: the memory goes. */
    void finishDestroy(boolean qpGone) {
        if (res.finishDestroy(qpGone) && linger != null) {
            linger.release(); // its bytes in flight are no longer read: the QP is gone
        }
    }

    @Override
    public String toString() {
        return "RdmaConnection{state=0x" + Integer.toHexString(state) + ", " + credits + ", "
                + (sends != null ? sends.unsettledBytes() + " bytes unsettled" : "no send side yet") + '}';
    }
}
