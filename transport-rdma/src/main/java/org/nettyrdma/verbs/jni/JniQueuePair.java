package org.nettyrdma.verbs.jni;

import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;
import org.nettyrdma.verbs.CompletionQueue;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.QpInitAttributes;
import org.nettyrdma.verbs.QueuePair;
import org.nettyrdma.verbs.SendFlags;
import org.nettyrdma.verbs.VerbsException;
import org.nettyrdma.verbs.WcOpcode;
import org.nettyrdma.verbs.WcStatus;
import org.nettyrdma.verbs.WorkRequestList;
import org.nettyrdma.verbs.WrOpcode;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * An RC queue pair created with {@code rdma_create_qp}. Posting hands the descriptor memory's address to C, which
 * builds the {@code ibv_send_wr} chain on its stack and posts it with one call.
 *
 * <p>What Java adds so that every device keeps the SPI's rules (docs/verbs-spi.md):
 * <ul>
 * <li>Sends before the connection is established fail with EINVAL (devices differ: some queue them).</li>
 * <li>The state combines the device's answer with what Java saw (connection events, failed completions), since
 * some devices do not report it (siw).</li>
 * <li>Send-queue slots are counted here and freed only by completions: a signalled completion frees the slots of the
 * unsignalled sends before it, as on hardware whose driver tracks the queue by completions (mlx5). Software devices
 * (rxe, siw) free a slot when the send finishes, so without this a QP that never signals would not fill up.</li>
 * <li>An inline send's bytes are read by the provider library at post time; an inline SGE that names no live memory
 * region is posted without INLINE, so the device checks its key (a protection error) instead of reading freed
 * memory.</li>
 * <li>After close, posts return -EBADF; the handle never reaches C again.</li>
 * </ul>
 */
final class JniQueuePair implements QueuePair {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(JniQueuePair.class);
    private static final QpState[] STATES = QpState.values();

    private final JniCmId id;
    private final long handle;
    private final JniProtectionDomain pd;
    private final JniCompletionQueue sendCq;
    private final JniCompletionQueue recvCq;
    private final QpInitAttributes caps;
    private final int qpNum;
    private final boolean signalAll;
    private final JniProvider provider;
    /** BIND_MW and LOCAL_INV exist on the device; SEND_WITH_INV does. */
    private final boolean windows;
    private final boolean sendWithInvalidate;
    /** What Java knows of the state: INIT, RTS once connected, ERROR once anything failed or flushed. */
    private QpState tracked = QpState.INIT;
    private boolean closed;
    private boolean destroyed;

    // outstanding sends in posted order: [head, head + outstanding) of a ring as large as the send queue
    private final long[] sendWrIds;
    private final boolean[] sendSignaled;
    private final int[] sendOpcodes;
    private int head;
    private int outstanding;

    private WorkRequestList lastList;
    private long lastAddress;

    // BIND_MW: the (window, region) handles of a post's binds for C, and the windows, to note their new keys
    private ByteBuffer bindHandles;
    private long bindHandlesAddress;
    private JniMemoryWindow[] bindWindows;

    JniQueuePair(JniCmId id, long handle, JniProtectionDomain pd, JniCompletionQueue sendCq,
                 JniCompletionQueue recvCq, QpInitAttributes caps, int qpNum) {
        this.id = id;
        this.handle = handle;
        this.pd = pd;
        this.sendCq = sendCq;
        this.recvCq = recvCq;
        this.caps = caps;
        this.qpNum = qpNum;
        this.signalAll = caps.signalAll();
        this.provider = pd.jniDevice().provider();
        this.windows = pd.jniDevice().attributes().supportsMemoryWindows();
        this.sendWithInvalidate = pd.jniDevice().attributes().supportsSendWithInvalidate();
        sendWrIds = new long[Math.max(1, caps.maxSendWr())];
        sendSignaled = new boolean[sendWrIds.length];
        sendOpcodes = new int[sendWrIds.length];
    }

    @Override
    public int qpNum() {
        return qpNum;
    }

    /**
     * The later of the device's state ({@code ibv_query_qp}) and what Java saw happen: some devices do not report the
     * state (siw answers RESET) or lag behind (a failed completion already polled).
     */
    @Override
    public QpState state() {
        if (closed) {
            return QpState.ERROR;
        }
        int s = Native.qpState(handle);
        QpState device = s < 0 ? QpState.ERROR : STATES[s];
        return device.ordinal() >= tracked.ordinal() ? device : tracked;
    }

    @Override
    public ProtectionDomain pd() {
        return pd;
    }

    @Override
    public CompletionQueue sendCq() {
        return sendCq;
    }

    @Override
    public CompletionQueue recvCq() {
        return recvCq;
    }

    @Override
    public QpInitAttributes capabilities() {
        return caps;
    }

    /** The connection is established: sends may be posted. */
    void connected() {
        if (tracked == QpState.INIT) {
            tracked = QpState.RTS;
        }
    }

    /**
     * A work request of this QP completed in error: the QP is in ERROR. It is moved there explicitly too, so that
     * every device flushes the rest (siw leaves them pending until the connection closes).
     */
    void failed() {
        if (tracked == QpState.ERROR) {
            return;
        }
        synchronized (this) { // a teardown thread may be destroying it: never touch a destroyed QP
            if (!closed && !destroyed) {
                tracked = QpState.ERROR;
                Native.modifyQpError(handle);
            }
        }
    }

    private long address(WorkRequestList wrs) {
        if (wrs != lastList) {
            lastAddress = Native.directBufferAddress(wrs.memory());
            lastList = wrs;
        }
        return lastAddress;
    }

    private static boolean outOfRange(WorkRequestList wrs, int offset, int count) {
        return offset < 0 || count < 0 || offset > wrs.capacity() - count;
    }

    @Override
    public int postSend(WorkRequestList wrs, int offset, int count) {
        int rc = closed ? -Errno.EBADF : outOfRange(wrs, offset, count) || tracked == QpState.INIT ? -Errno.EINVAL : 0;
        if (rc != 0) {
            wrs.badIndex(offset);
            return rc;
        }
        int fits = Math.min(count, sendWrIds.length - outstanding);
        int end = offset + fits;
        int badBind = resolveBinds(wrs, offset, end);
        if (badBind >= 0) {
            end = badBind;
        }
        long address = address(wrs);
        for (int i = offset; i < end;) {
            int noInline = firstUnregisteredInline(wrs, i, end);
            int stop = noInline < 0 ? end : noInline + 1;
            long binds = bindWindows == null ? 0 : bindHandlesAddress + 16L * (i - offset);
            long result = Native.postSend(handle, address, wrs.slotSize(), i, stop - i, noInline, binds);
            if (result != 0) {
                int bad = Native.badIndex(result);
                track(wrs, i, bad, offset);
                wrs.badIndex(bad);
                return Native.errno(result);
            }
            track(wrs, i, stop, offset);
            i = stop;
        }
        if (badBind >= 0) {
            wrs.badIndex(badBind);
            return -Errno.EINVAL;
        }
        if (fits < count) {
            wrs.badIndex(end);
            return -Errno.ENOMEM;
        }
        wrs.badIndex(-1);
        return 0;
    }

    /**
     * Resolves the window and region of each BIND_MW in {@code [from, to)} for C, which needs their objects: the
     * handles go to {@link #bindHandles} at {@code 2 * (i - from)}. The first bind that names no live window (by the
     * index of its {@code mw_rkey}) or no live region (by its SGE's lkey) is refused, and so is an opcode the device
     * lacks (BIND_MW, LOCAL_INV without memory windows; SEND_WITH_INV without memory management extensions), whatever
     * its library would do with it: its index, or -1.
     */
    private int resolveBinds(WorkRequestList wrs, int from, int to) {
        ByteBuffer m = wrs.memory();
        int slotSize = wrs.slotSize();
        boolean any = false;
        for (int i = from; i < to; i++) {
            int o = i * slotSize;
            int opcode = m.getInt(o + WorkRequestList.OFFSET_OPCODE);
            if ((opcode == WrOpcode.LOCAL_INV && !windows) || (opcode == WrOpcode.SEND_WITH_INV && !sendWithInvalidate)
                    || (opcode == WrOpcode.BIND_MW && !windows)) {
                return i;
            }
            if (opcode != WrOpcode.BIND_MW) {
                continue;
            }
            if (!any) {
                any = true;
                if (bindWindows == null) {
                    bindHandles = ByteBuffer.allocateDirect(16 * sendWrIds.length).order(ByteOrder.nativeOrder());
                    bindHandlesAddress = Native.directBufferAddress(bindHandles);
                    bindWindows = new JniMemoryWindow[sendWrIds.length];
                }
                for (int k = 0; k < to - from; k++) {
                    bindWindows[k] = null;
                    bindHandles.putLong(16 * k, 0).putLong(16 * k + 8, 0);
                }
            }
            if (m.getInt(o + WorkRequestList.OFFSET_NUM_SGE) < 1 || wrs.maxSge() < 1) {
                return i;
            }
            JniMemoryWindow mw = pd.jniDevice().window(m.getInt(o + WorkRequestList.OFFSET_MW_RKEY));
            JniMemoryRegion mr = provider.region(m.getInt(o + WorkRequestList.OFFSET_SGES
                    + WorkRequestList.SGE_OFFSET_LKEY));
            if (mw == null || !mw.isOpen() || mr == null || !mr.isOpen()) {
                return i;
            }
            bindWindows[i - from] = mw;
            bindHandles.putLong(16 * (i - from), mw.handle()).putLong(16 * (i - from) + 8, mr.handle());
        }
        if (!any && bindWindows != null) {
            for (int k = 0; k < to - from; k++) {
                bindWindows[k] = null;
            }
        }
        return -1;
    }

    /** The first work request in {@code [from, to)} that is INLINE with an SGE outside every live region, or -1. */
    private int firstUnregisteredInline(WorkRequestList wrs, int from, int to) {
        ByteBuffer m = wrs.memory();
        int slotSize = wrs.slotSize();
        for (int i = from; i < to; i++) {
            int o = i * slotSize;
            if ((m.getInt(o + WorkRequestList.OFFSET_SEND_FLAGS) & SendFlags.INLINE) == 0) {
                continue;
            }
            int n = Math.min(m.getInt(o + WorkRequestList.OFFSET_NUM_SGE), wrs.maxSge());
            for (int j = 0; j < n; j++) {
                int s = o + WorkRequestList.OFFSET_SGES + j * WorkRequestList.SGE_SIZE;
                if (!provider.isRegistered(m.getInt(s + WorkRequestList.SGE_OFFSET_LKEY),
                        m.getLong(s + WorkRequestList.SGE_OFFSET_ADDR),
                        m.getInt(s + WorkRequestList.SGE_OFFSET_LENGTH))) {
                    return i;
                }
            }
        }
        return -1;
    }

    /**
     * Counts the posted sends {@code [from, to)} as occupying send-queue slots, and notes the new key of each window
     * bound among them (a post that began at {@code postOffset}).
     */
    private void track(WorkRequestList wrs, int from, int to, int postOffset) {
        ByteBuffer m = wrs.memory();
        int slotSize = wrs.slotSize();
        for (int i = from; i < to; i++) {
            int o = i * slotSize;
            if (bindWindows != null && bindWindows[i - postOffset] != null) {
                bindWindows[i - postOffset].posted(m.getInt(o + WorkRequestList.OFFSET_RKEY));
                bindWindows[i - postOffset] = null;
            }
            int slot = (head + outstanding) % sendWrIds.length;
            sendWrIds[slot] = m.getLong(o + WorkRequestList.OFFSET_WR_ID);
            int flags = m.getInt(o + WorkRequestList.OFFSET_SEND_FLAGS);
            sendSignaled[slot] = signalAll || (flags & SendFlags.SIGNALED) != 0;
            sendOpcodes[slot] = wcOpcode(m.getInt(o + WorkRequestList.OFFSET_OPCODE));
            outstanding++;
        }
    }

    private static int wcOpcode(int wrOpcode) {
        switch (wrOpcode) {
            case WrOpcode.RDMA_WRITE:
            case WrOpcode.RDMA_WRITE_WITH_IMM:
                return WcOpcode.RDMA_WRITE;
            case WrOpcode.RDMA_READ:
                return WcOpcode.RDMA_READ;
            case WrOpcode.BIND_MW:
                return WcOpcode.BIND_MW;
            case WrOpcode.LOCAL_INV:
                return WcOpcode.LOCAL_INV;
            default:
                return WcOpcode.SEND;
        }
    }

    /**
     * A completion of this QP's send queue: a success is the oldest signalled send and frees it with the unsignalled
     * ones before it; a failure (flushes included) frees up to the send with its wr_id.
     *
     * @return the completion opcode of the send that failed (devices leave it undefined), or -1
     */
    int onSendCompletion(long wrId, int status) {
        if (status == WcStatus.SUCCESS) {
            while (outstanding > 0) {
                boolean signaled = sendSignaled[head];
                pop();
                if (signaled) {
                    break;
                }
            }
            return -1;
        }
        int n = 0;
        for (int k = 0; k < outstanding; k++) {
            if (sendWrIds[(head + k) % sendWrIds.length] == wrId) {
                n = k + 1;
                break;
            }
        }
        int opcode = n == 0 ? -1 : sendOpcodes[(head + n - 1) % sendWrIds.length];
        for (int k = 0; k < Math.max(1, n) && outstanding > 0; k++) {
            pop();
        }
        return opcode;
    }

    private void pop() {
        head = head + 1 == sendWrIds.length ? 0 : head + 1;
        outstanding--;
    }

    @Override
    public int postRecv(WorkRequestList wrs, int offset, int count) {
        int rc = closed ? -Errno.EBADF : outOfRange(wrs, offset, count) ? -Errno.EINVAL : 0;
        if (rc != 0) {
            wrs.badIndex(offset);
            return rc;
        }
        long result = Native.postRecv(handle, address(wrs), wrs.slotSize(), offset, count);
        if (result != 0) {
            wrs.badIndex(Native.badIndex(result));
            return Native.errno(result);
        }
        wrs.badIndex(-1);
        return 0;
    }

    @Override
    public void moveToError() throws VerbsException {
        if (closed) {
            throw new VerbsException("ibv_modify_qp", Errno.EBADF, "queue pair closed");
        }
        int rc = Native.modifyQpError(handle);
        if (rc < 0) {
            throw new VerbsException("ibv_modify_qp", -rc, "to ERROR");
        }
        tracked = QpState.ERROR;
    }

    /** Best effort: the QP to ERROR (after a disconnect, where iWARP only drains it). */
    void flush() {
        if (!closed) {
            Native.modifyQpError(handle);
            tracked = QpState.ERROR;
        }
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        lastList = null;
        if (id.endConnect()) {
            destroy();
        } // else a soft-iWARP connect holds the QP in the kernel: its thread destroys it when rdma_connect returns
    }

    /** Once closed: destroys the QP and releases what it used. */
    void destroy() {
        synchronized (this) { // (the QP's own calls on the polling thread check it under this monitor: failed())
            if (destroyed || !closed) {
                return;
            }
            destroyed = true;
        }
        long start = System.nanoTime();
        Native.destroyQp(handle);
        long took = System.nanoTime() - start;
        if (took > JniCmId.SLOW_TEARDOWN_NANOS) {
            logger.warn("{}: destroying it took {} ms (the calling thread waited in the kernel)", this,
                    JniCmId.millis(took));
        }
        sendCq.detach(this);
        recvCq.detach(this);
        if (caps.srq() != null) {
            ((JniSharedReceiveQueue) caps.srq()).detach();
        }
        pd.release();
        id.onQpClosed(this);
    }

    @Override
    public String toString() {
        return "qp " + qpNum + " on " + pd.jniDevice().name() + (closed ? " (closed)" : "");
    }
}
