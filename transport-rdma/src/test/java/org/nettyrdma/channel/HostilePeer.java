package org.nettyrdma.channel;

import io.netty.util.internal.CleanableDirectBuffer;
import io.netty.util.internal.PlatformDependent;
import org.nettyrdma.verbs.Access;
import org.nettyrdma.verbs.CmEvent;
import org.nettyrdma.verbs.CmEventChannel;
import org.nettyrdma.verbs.CmEventType;
import org.nettyrdma.verbs.CmId;
import org.nettyrdma.verbs.CompletionArray;
import org.nettyrdma.verbs.CompletionQueue;
import org.nettyrdma.verbs.ConnectionParameters;
import org.nettyrdma.verbs.DeviceAttributes;
import org.nettyrdma.verbs.EventWaiter;
import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.QpInitAttributes;
import org.nettyrdma.verbs.QueuePair;
import org.nettyrdma.verbs.SendFlags;
import org.nettyrdma.verbs.VerbsProvider;
import org.nettyrdma.verbs.WcStatus;
import org.nettyrdma.verbs.WorkRequestList;
import org.nettyrdma.verbs.WrOpcode;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A client written against the verbs SPI: its own protection domain, CQ and QP, 16 receives of 16 KiB posted
 * before it connects with whatever private data it likes, then any message, credit or remote access it likes; or,
 * with {@link #listen}, a server that accepts with whatever handshake it likes and behaves as freely.
 */
final class HostilePeer implements AutoCloseable {
    private static final int RECEIVES = 16;
    private static final int RECEIVE_SIZE = 16384;
    private static final long SEND_WR_ID = 1L << 32;
    /** The zero-byte WRITE that nudges an iWARP server's receive path, as the transport's connecting side does. */
    private static final long NUDGE_WR_ID = 2L << 32;

    final VerbsProvider provider = RdmaResources.of(RdmaTestSupport.provider()).provider();
    final CmEventChannel channel;
    final EventWaiter waiter;
    CmId id;
    final CmEvent event = new CmEvent();
    final CompletionArray wcs = new CompletionArray(64);
    final WorkRequestList wrs = new WorkRequestList(1, 1);
    final List<String> history = new ArrayList<>();
    /** Completions polled and not yet taken: {wrId, status, byteLen}. */
    final Queue<long[]> completions = new ArrayDeque<>();
    ProtectionDomain pd;
    CompletionQueue cq;
    QueuePair qp;
    /** Freed at close, not by the garbage collector: the server's footprint is measured in the same JVM. */
    final CleanableDirectBuffer recvMemory = PlatformDependent.allocateDirect(RECEIVES * RECEIVE_SIZE, true);
    final CleanableDirectBuffer sendMemory = PlatformDependent.allocateDirect(65536, true);
    MemoryRegion recvMr;
    private boolean nudged;
    /** Whether its SENDs and WRITE_WITH_IMMs ask for a solicited event, as the transport's own do. */
    boolean solicit;
    /** Whether {@link #startConnect} adds a probe target to the handshake: 8 bytes of {@link #sendMr}. */
    boolean offerProbeTarget;
    MemoryRegion sendMr;
    int rejectReason;
    String rejectText;
    boolean disconnected;
    /** The listening id of a hostile server ({@link #listen}); {@link #id} is then the accepted connection's. */
    private CmId listener;

    HostilePeer() throws Exception {
        channel = provider.createEventChannel();
        waiter = provider.createWaiter();
        waiter.add(channel);
        id = provider.createId(channel, null);
    }

    /**
     * Resolves, creates the QP, posts the receives and connects: the event that ends the attempt. On iWARP the local
     * TCP port RDMA CM picks can be in use (CONNECT_ERROR, EADDRINUSE): then it starts over on a fresh id, as the
     * transport does (up to 3 times).
     */
    CmEventType connect(InetSocketAddress to, byte[] privateData) throws Exception {
        startConnect(to, privateData);
        CmEventType type = nextEvent(10_000);
        for (int retry = 0; retry < 3 && type == CmEventType.CONNECT_ERROR
                && event.status() == -org.nettyrdma.verbs.Errno.EADDRINUSE; retry++) {
            closeConnection();
            id = provider.createId(channel, null);
            startConnect(to, privateData);
            type = nextEvent(10_000);
        }
        if (type == CmEventType.REJECTED) {
            rejectText = RdmaProtocol.rejectMessage(event.privateData(), event.privateDataLength());
            rejectReason = rejectText == null ? 0 : ByteBuffer.wrap(event.privateData()).getShort(6) & 0xffff;
        }
        return type;
    }

    /** The server's handshake, from the ESTABLISHED event {@link #connect} returned. */
    RdmaProtocol.Handshake serverHandshake() throws RdmaProtocol.RdmaProtocolException {
        return RdmaProtocol.Handshake.parse(event.privateData(), event.privateDataLength());
    }

    /** Resolves, creates the QP with its receives posted and connects; takes no event after the connect. */
    void startConnect(InetSocketAddress to, byte[] privateData) throws Exception {
        id.resolveAddress(null, to, 2000);
        assertEquals(CmEventType.ADDR_RESOLVED, nextEvent(10_000), this::toString);
        id.resolveRoute(2000);
        assertEquals(CmEventType.ROUTE_RESOLVED, nextEvent(10_000), this::toString);
        createQp();
        byte[] handshake = offerProbeTarget
                ? RdmaProtocol.withProbeTarget(privateData, sendMr.address() + 65536 - 8, sendMr.rkey()) : privateData;
        id.connect(new ConnectionParameters(handshake, 1, 1, 7, 7));
    }

    /** A hostile server instead: listens on {@code address} (port 0: any free one) and returns where. */
    InetSocketAddress listen(InetSocketAddress address) throws Exception {
        listener = id;
        listener.bind(address);
        listener.listen(4);
        return listener.localAddress();
    }

    /** Takes the next connect request to {@link #listen}'s address: {@link #accept} answers it. */
    void awaitConnectRequest() throws Exception {
        assertEquals(CmEventType.CONNECT_REQUEST, nextEvent(10_000), this::toString);
        id = event.id();
    }

    /**
     * Accepts the connect request taken with {@code handshake}, its QP's receives posted: returns at once, before the
     * connecting side has taken its ESTABLISHED.
     */
    void accept(byte[] handshake) throws Exception {
        createQp();
        id.accept(new ConnectionParameters(handshake, 1, 1, 7, 7));
    }

    private void createQp() throws Exception {
        pd = id.device().allocPd();
        cq = id.device().createCq(256, null);
        qp = id.createQp(pd, new QpInitAttributes(cq, cq, 64, RECEIVES, 1, 1, 0, false));
        recvMr = pd.registerMemory(recvMemory.buffer(), Access.LOCAL_WRITE);
        int all = Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ;
        sendMr = pd.registerMemory(sendMemory.buffer(), all);
        for (int slot = 0; slot < RECEIVES; slot++) {
            postRecv(slot);
        }
    }

    /** A SEND of a protocol header ({@code type}, {@code credits}) and {@code payload} bytes of 0xEE. */
    void sendMessage(int type, int credits, int payload) throws Exception {
        ByteBuffer b = sendMr.buffer();
        RdmaProtocol.putHeader(b, 0, type, credits);
        for (int i = 0; i < payload; i++) {
            b.put(RdmaProtocol.HEADER_LENGTH + i, (byte) 0xEE);
        }
        post(WrOpcode.SEND, RdmaProtocol.HEADER_LENGTH + payload, 0, 0);
    }

    /** A CREDIT message whose second byte says it returns {@code returned} credits unspent (pooled credits). */
    void sendReturn(int returned) throws Exception {
        RdmaProtocol.putHeader(sendMr.buffer(), 0, RdmaProtocol.TYPE_CREDIT, returned, 0);
        post(WrOpcode.SEND, RdmaProtocol.HEADER_LENGTH, 0, 0);
    }

    /** The credits granted by the messages that have arrived (their receives posted again), without waiting. */
    int takeGrantedCredits() {
        int credits = 0;
        long[] wc;
        while ((wc = poll(true)) != null) {
            assertEquals(WcStatus.SUCCESS, (int) wc[1], () -> "a receive: " + this);
            int slot = (int) wc[0];
            credits += recvMr.buffer().getShort(slot * RECEIVE_SIZE + 2) & 0xffff;
            postRecv(slot);
        }
        return credits;
    }

    /** Protocol v2: a CREDIT message granting {@code credits} with its released count {@code released}. */
    void sendRingCredit(int credits, int released) throws Exception {
        RdmaProtocol.putHeader(sendMr.buffer(), 0, RdmaProtocol.TYPE_CREDIT, credits);
        sendMr.buffer().putInt(RdmaProtocol.HEADER_LENGTH, released);
        post(WrOpcode.SEND, RdmaProtocol.RING_CREDIT_LENGTH, 0, 0);
    }

    /**
     * Protocol v2: waits for the server's RING message (posting the receives of what comes before it again) and returns
     * {address, length, rkey}.
     */
    long[] awaitRing() throws Exception {
        io.netty.buffer.ByteBuf m = awaitMessage(RdmaProtocol.TYPE_RING);
        int h = RdmaProtocol.HEADER_LENGTH;
        return new long[] {m.getLong(h), m.getInt(h + 8), m.getInt(h + 12)};
    }

    /**
     * Waits for the server's next message of {@code type}, posting the receives of it and of what comes before it
     * again: a copy of it.
     */
    io.netty.buffer.ByteBuf awaitMessage(int type) throws Exception {
        while (true) {
            long[] wc = take(true, 10_000);
            assertEquals(WcStatus.SUCCESS, (int) wc[1], () -> "a receive before a message of type " + type + ": " + this);
            int slot = (int) wc[0];
            ByteBuffer r = recvMr.buffer().duplicate();
            int at = slot * RECEIVE_SIZE;
            byte[] copy = new byte[(int) wc[2]];
            r.position(at);
            r.get(copy);
            postRecv(slot);
            if ((copy[0] & 0xff) == type) {
                return io.netty.buffer.Unpooled.wrappedBuffer(copy);
            }
        }
    }

    /** A SEND_WITH_INV of {@code rkey} carrying a protocol header ({@code type}, no credits) and {@code payload} bytes. */
    void sendMessageWithInvalidate(int type, int payload, int rkey) {
        ByteBuffer b = sendMr.buffer();
        RdmaProtocol.putHeader(b, 0, type, 0);
        for (int i = 0; i < payload; i++) {
            b.put(RdmaProtocol.HEADER_LENGTH + i, (byte) 0xEE);
        }
        wrs.setSend(0, SEND_WR_ID, WrOpcode.SEND_WITH_INV, SendFlags.SIGNALED).invalidateRkey(0, rkey)
                .addSge(0, sendMr.address(), RdmaProtocol.HEADER_LENGTH + payload, sendMr.lkey());
        int rc = qp.postSend(wrs, 0, 1);
        history.add("post SEND_WITH_INV of rkey 0x" + Integer.toHexString(rkey) + ": " + rc);
        assertEquals(0, rc, () -> "ibv_post_send: " + this);
    }

    /**
     * An RDMA WRITE_WITH_IMM of {@code length} bytes of 0xEE to {@code address} under {@code rkey}, with immediate data
     * {@code imm}: the status of its completion.
     */
    int writeWithImm(int rkey, long address, int length, int imm) throws Exception {
        ByteBuffer b = sendMr.buffer();
        for (int i = 0; i < length; i++) {
            b.put(i, (byte) 0xEE);
        }
        drainSends();
        wrs.setSend(0, SEND_WR_ID, WrOpcode.RDMA_WRITE_WITH_IMM, SendFlags.SIGNALED).remote(0, address, rkey)
                .immData(0, imm);
        if (length > 0) {
            wrs.addSge(0, sendMr.address(), length, sendMr.lkey());
        }
        int rc = qp.postSend(wrs, 0, 1);
        history.add("post WRITE_WITH_IMM of " + length + " bytes, imm " + imm + ": " + rc);
        assertEquals(0, rc, () -> "ibv_post_send: " + this);
        return (int) take(false, 10_000)[1];
    }

    /** A SEND of the first {@code length} bytes of {@code bytes}. */
    void sendBytes(byte[] bytes, int length) throws Exception {
        sendMr.buffer().put(bytes, 0, length);
        post(WrOpcode.SEND, length, 0, 0);
    }

    /** Sends {@code payload} as DATA and collects the echo, granting a credit for each DATA that comes back. */
    byte[] echo(byte[] payload) throws Exception {
        sendMr.buffer().put(RdmaProtocol.HEADER_LENGTH, payload);
        RdmaProtocol.putHeader(sendMr.buffer(), 0, RdmaProtocol.TYPE_DATA, 0);
        post(WrOpcode.SEND, RdmaProtocol.HEADER_LENGTH + payload.length, 0, 0);
        assertEquals(WcStatus.SUCCESS, (int) take(false, 10_000)[1], "the echo's DATA SEND");
        ByteBuffer got = ByteBuffer.allocate(payload.length);
        while (got.hasRemaining()) {
            long[] wc = take(true, 10_000);
            assertEquals(WcStatus.SUCCESS, (int) wc[1], () -> "a receive of the echo: " + this);
            int slot = (int) wc[0];
            ByteBuffer r = recvMr.buffer().position(slot * RECEIVE_SIZE).limit(slot * RECEIVE_SIZE + (int) wc[2]);
            int type = r.get(r.position()) & 0xff;
            r.position(r.position() + RdmaProtocol.HEADER_LENGTH);
            assertTrue(r.remaining() <= got.remaining(), () -> "more echoed than sent: " + this);
            got.put(r);
            postRecv(slot);
            if (type == RdmaProtocol.TYPE_DATA) {
                sendMessage(RdmaProtocol.TYPE_CREDIT, 1, 0);
                assertEquals(WcStatus.SUCCESS, (int) take(false, 10_000)[1], "a CREDIT SEND");
            }
        }
        return got.array();
    }

    /**
     * An RDMA WRITE (of 0xEE bytes) or READ of {@code length} bytes at {@code rkey}/{@code address}: its status. A READ
     * lands at the start of {@link #sendMr}, 0x55 before it.
     */
    int remoteAccess(int opcode, int rkey, long address, int length) throws Exception {
        ByteBuffer b = sendMr.buffer();
        for (int i = 0; i < length; i++) {
            b.put(i, (byte) (opcode == WrOpcode.RDMA_WRITE ? 0xEE : 0x55));
        }
        drainSends();
        post(opcode, length, rkey, address);
        return (int) take(false, 10_000)[1];
    }

    private void drainSends() throws Exception {
        long[] wc;
        while ((wc = poll(false)) != null) {
            history.add("send " + WcStatus.name((int) wc[1]));
        }
    }

    private void post(int opcode, int length, int rkey, long address) {
        boolean solicited = solicit && (opcode == WrOpcode.SEND || opcode == WrOpcode.RDMA_WRITE_WITH_IMM);
        wrs.setSend(0, SEND_WR_ID, opcode, SendFlags.SIGNALED | (solicited ? SendFlags.SOLICITED : 0));
        if (length > 0) {
            wrs.addSge(0, sendMr.address(), length, sendMr.lkey());
        }
        if (opcode != WrOpcode.SEND) {
            wrs.remote(0, address, rkey);
        }
        int rc = qp.postSend(wrs, 0, 1);
        history.add("post " + opcode + " of " + length + " bytes: " + rc);
        assertEquals(0, rc, () -> "ibv_post_send: " + this);
    }

    private void postRecv(int slot) {
        wrs.setRecv(0, slot).addSge(0, recvMr.address() + (long) slot * RECEIVE_SIZE, RECEIVE_SIZE, recvMr.lkey());
        assertEquals(0, qp.postRecv(wrs, 0, 1), () -> "ibv_post_recv: " + this);
    }

    /**
     * DISCONNECTED, or "receive flushed" (iWARP, or a QP the server moved to error): null if still up. On iWARP it nudges
     * after {@link RdmaConnection#NUDGE_MILLIS}, as the transport's connecting side does: what the peer sent may sit
     * unread in the server's socket until more data arrives (seen on siw0: three absurd headers never read in 10 s).
     */
    String awaitTornDown(long millis) throws Exception {
        long start = System.nanoTime();
        long deadline = start + TimeUnit.MILLISECONDS.toNanos(millis);
        while (System.nanoTime() - deadline < 0) {
            int rc = System.nanoTime() - start > TimeUnit.MILLISECONDS.toNanos(RdmaConnection.NUDGE_MILLIS) ? nudge() : 0;
            if (rc != 0) {
                return "nudge refused (" + rc + "): the QP left RTS";
            }
            if (channel.poll(event)) {
                history.add("event " + event.type());
                if (event.type() == CmEventType.DISCONNECTED) {
                    disconnected = true;
                    return "DISCONNECTED";
                }
            }
            long[] wc;
            while ((wc = poll(true)) != null) {
                if (wc[1] != WcStatus.SUCCESS) {
                    return "receive " + WcStatus.name((int) wc[1]);
                }
                postRecv((int) wc[0]); // a message of the server (a CREDIT): not an end
            }
            drainSends();
            Thread.sleep(1);
        }
        return null;
    }

    /** The next completion of a receive ({@code recv}) or a send, within {@code millis}. */
    private long[] take(boolean recv, long millis) throws Exception {
        long start = System.nanoTime();
        long deadline = start + TimeUnit.MILLISECONDS.toNanos(millis);
        long[] wc;
        while ((wc = poll(recv)) == null) {
            assertTrue(System.nanoTime() - deadline < 0, () -> "no " + (recv ? "receive" : "send")
                    + " completion within " + millis + " ms: " + this);
            if (recv && System.nanoTime() - start > TimeUnit.MILLISECONDS.toNanos(RdmaConnection.NUDGE_MILLIS)) {
                int rc = nudge();
                assertEquals(0, rc, () -> "ibv_post_send: " + this);
            }
            Thread.sleep(1);
        }
        return wc;
    }

    /**
     * On iWARP, once: a zero-byte WRITE, which the transport's connecting side posts after its greeting (see
     * {@code RdmaConnection.nudge}): soft-iWARP can leave a first message unread in the server's socket until more data
     * arrives. Its completion is recorded in the history, not taken. Returns what the post returned (0 if it posted
     * nothing: not iWARP, or nudged before).
     */
    private int nudge() {
        if (nudged || id.device().attributes().transport() != DeviceAttributes.Transport.IWARP) {
            return 0;
        }
        nudged = true;
        wrs.setSend(0, NUDGE_WR_ID, WrOpcode.RDMA_WRITE, SendFlags.SIGNALED).remote(0, 0, 0)
                .addSge(0, sendMr.address(), 0, sendMr.lkey());
        int rc = qp.postSend(wrs, 0, 1);
        history.add("post nudge WRITE: " + rc);
        return rc;
    }

    private long[] poll(boolean recv) {
        int n = cq.poll(wcs, wcs.capacity());
        assertTrue(n >= 0, () -> "ibv_poll_cq: " + n);
        for (int i = 0; i < n; i++) {
            if (wcs.wrId(i) == NUDGE_WR_ID) {
                history.add("nudge " + WcStatus.name(wcs.status(i)));
            } else {
                completions.add(new long[] {wcs.wrId(i), wcs.status(i), wcs.byteLen(i)});
            }
        }
        for (long[] wc : completions) {
            if ((wc[0] != SEND_WR_ID) == recv) {
                completions.remove(wc);
                history.add((recv ? "recv " : "send ") + WcStatus.name((int) wc[1]) + " " + wc[2] + " bytes");
                return wc;
            }
        }
        return null;
    }

    private CmEventType nextEvent(long millis) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
        while (!channel.poll(event)) {
            long left = deadline - System.nanoTime();
            assertTrue(left > 0, () -> "no RDMA CM event within " + millis + " ms: " + this);
            waiter.await(left);
        }
        history.add("event " + event.type() + " status " + event.status());
        return event.type();
    }

    @Override
    public void close() throws Exception {
        closeConnection();
        if (listener != null && listener != id) {
            listener.close();
        }
        waiter.close();
        channel.close();
        recvMemory.clean();
        sendMemory.clean();
    }

    /** The id (which disconnects and destroys the QP), then the memory regions, the CQ and the PD. */
    private void closeConnection() throws Exception {
        id.close();
        for (AutoCloseable c : new AutoCloseable[] {recvMr, sendMr, cq, pd}) {
            if (c != null) {
                c.close();
            }
        }
        recvMr = null;
        sendMr = null;
        cq = null;
        pd = null;
        qp = null;
    }

    @Override
    public String toString() {
        return "hostile peer{" + String.join(", ", history) + (rejectText == null ? "" : ", reject reason "
                + rejectReason + " \"" + rejectText + '"') + '}';
    }
}
