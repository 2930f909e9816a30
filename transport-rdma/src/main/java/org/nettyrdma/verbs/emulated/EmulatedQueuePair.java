package org.nettyrdma.verbs.emulated;

import org.nettyrdma.verbs.Access;
import org.nettyrdma.verbs.CompletionQueue;
import org.nettyrdma.verbs.ConnectionParameters;
import org.nettyrdma.verbs.DeviceAttributes;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.QpInitAttributes;
import org.nettyrdma.verbs.QueuePair;
import org.nettyrdma.verbs.SendFlags;
import org.nettyrdma.verbs.WcOpcode;
import org.nettyrdma.verbs.WcStatus;
import org.nettyrdma.verbs.WorkRequestList;
import org.nettyrdma.verbs.WrOpcode;

import java.nio.ByteBuffer;
import java.util.concurrent.ScheduledFuture;

/**
 * An RC queue pair. Posting copies the work requests into the QP's own queues (as hardware copies WQEs) and then
 * executes what can run, in order, on the posting thread: the bytes move from the sender's registered memory into the
 * peer's, and completions go to both sides' completion queues. A SEND that finds no receive waits (RNR) until the
 * peer posts one or the retries run out; on iWARP, which has no RNR, it terminates the connection instead (DDP "no
 * buffer"): both QPs go to error. Both QPs of a connection share one lock, their {@link Link}. The data path
 * allocates nothing.
 */
final class EmulatedQueuePair implements QueuePair {
    /** The wire between two QPs; its monitor guards both QPs' queues. */
    static final class Link {
        // volatile: also read without the link's monitor (isLinkCut, under the fabric's)
        volatile boolean severed;
        /** Sends get no answer: they stay posted (see {@code FaultInjector.silenceLink}). */
        volatile boolean silent;
        /**
         * The QP whose first arrival stays unexecuted until its peer posts another work request behind it
         * ({@code EmulatedFabric.holdFirstArrivalOnAccept}), or null.
         */
        EmulatedQueuePair holding;
    }

    private static final int RNR_WAIT = -1;

    private final EmulatedFabric fabric;
    private final EmulatedDevice device;
    private final EmulatedProtectionDomain pd;
    private final EmulatedCompletionQueue sendCq;
    private final EmulatedCompletionQueue recvCq;
    private final QpInitAttributes caps;
    private final int qpNum;
    private final boolean immediates;
    /** BIND_MW and LOCAL_INV (type-2 memory windows, as rxe has them). */
    private final boolean windows;
    private final boolean sendWithInvalidate;
    /** iWARP: a message that finds no receive here terminates the connection instead of being retried (RNR). */
    private final boolean terminatesWithoutReceive;
    /**
     * Whether a receive of a SEND or WRITE_WITH_IMM that asked for a solicited event completes as solicited: not on
     * iWARP, as soft-iWARP never reports one (a CQ armed for solicited completions only is not woken by any receive).
     */
    private final boolean solicitedReceives;
    private final boolean signalAll;
    private final Runnable rnrTimerTask = this::onRnrTimer;

    private volatile Link link = new Link();
    private volatile QpState state = QpState.INIT;
    private volatile boolean destroyed;
    /** How long the next destruction keeps the calling thread ({@link #delayDestroy}). */
    private volatile long destroyDelayMillis;
    private EmulatedQueuePair peer;
    private int rnrRetry = ConnectionParameters.RNR_RETRY_INFINITE;
    private int injectedStatus;
    /** Errno the next postSend is refused with (0: none; FaultInjector.refuseNextPostSend). */
    private int refusedPostErrno;

    // send queue: slots [sqHead, sqExec) executed but not yet freed (unsignalled), [sqExec, sqTail) waiting
    private final int sqSize;
    private final int sqSge;
    private final int inlineMax;
    private final long[] sqWrId;
    private final int[] sqOpcode;
    private final int[] sqFlags;
    private final int[] sqImm;
    private final long[] sqRemoteAddr;
    private final int[] sqRkey;
    private final int[] sqMwRkey;
    private final int[] sqNumSge;
    private final long[] sqSgeAddr;
    private final int[] sqSgeLen;
    private final int[] sqSgeLkey;
    private final int[] sqInlineLen;
    private final ByteBuffer sqInline;
    private long sqHead;
    private long sqExec;
    private long sqTail;

    /** The QP's own receive queue (empty with a shared receive queue). */
    private final ReceiveRing rq;
    /** Where this QP's receives come from instead, or null. */
    private final EmulatedSharedReceiveQueue srq;
    /** In {@link #srq}'s waiter queue of the peer's shared receive queue; guarded by that queue's monitor. */
    boolean srqWaiting;

    private boolean executing;
    /** This QP's sends stay posted, unexecuted (see {@code FaultInjector.stallSends}); guarded by the link. */
    private boolean sendsStalled;
    private boolean rnrWaiting;
    private long rnrDeadline;
    private ScheduledFuture<?> rnrTimer;

    // destination cursor of the copy in progress, and a one-entry list for a contiguous remote range
    private int cursorSge;
    private int cursorOffset;
    private final long[] oneAddr = new long[1];
    private final int[] oneLen = new int[1];
    private final int[] oneKey = new int[1];

    EmulatedQueuePair(EmulatedDevice device, EmulatedProtectionDomain pd, QpInitAttributes caps) {
        this.fabric = device.fabric();
        this.device = device;
        this.pd = pd;
        this.caps = caps;
        this.sendCq = (EmulatedCompletionQueue) caps.sendCq();
        this.recvCq = (EmulatedCompletionQueue) caps.recvCq();
        this.qpNum = fabric.nextQpNum();
        this.immediates = device.attributes().supportsImmediateData();
        this.windows = device.attributes().supportsMemoryWindows();
        this.sendWithInvalidate = device.attributes().supportsSendWithInvalidate();
        this.terminatesWithoutReceive = device.attributes().transport() == DeviceAttributes.Transport.IWARP;
        this.solicitedReceives = !terminatesWithoutReceive;
        this.signalAll = caps.signalAll();
        sqSize = caps.maxSendWr();
        sqSge = Math.max(1, caps.maxSendSge());
        inlineMax = caps.maxInlineData();
        sqWrId = new long[sqSize];
        sqOpcode = new int[sqSize];
        sqFlags = new int[sqSize];
        sqImm = new int[sqSize];
        sqRemoteAddr = new long[sqSize];
        sqRkey = new int[sqSize];
        sqMwRkey = new int[sqSize];
        sqNumSge = new int[sqSize];
        sqSgeAddr = new long[sqSize * sqSge];
        sqSgeLen = new int[sqSize * sqSge];
        sqSgeLkey = new int[sqSize * sqSge];
        sqInlineLen = new int[sqSize];
        sqInline = ByteBuffer.allocate(sqSize * inlineMax);
        srq = (EmulatedSharedReceiveQueue) caps.srq();
        rq = srq != null ? new ReceiveRing(0, 0) : new ReceiveRing(caps.maxRecvWr(), caps.maxRecvSge());
    }

    @Override
    public int qpNum() {
        return qpNum;
    }

    @Override
    public QpState state() {
        return state;
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

    // ---- posting ----

    @Override
    public int postSend(WorkRequestList wrs, int offset, int count) {
        for (;;) {
            Link l = link;
            synchronized (l) {
                if (l != link) {
                    continue;
                }
                int rc = checkPost(wrs, offset, count);
                if (rc == 0 && (state == QpState.INIT || state == QpState.RTR || state == QpState.RESET)) {
                    rc = -Errno.EINVAL;
                }
                if (rc == 0 && refusedPostErrno != 0) {
                    rc = -refusedPostErrno;
                    refusedPostErrno = 0;
                }
                if (rc != 0) {
                    wrs.badIndex(offset);
                    return rc;
                }
                int end = offset + count;
                for (int i = offset; i < end; i++) {
                    rc = enqueueSend(wrs, i);
                    if (rc != 0) {
                        wrs.badIndex(i);
                        progressSend();
                        return rc;
                    }
                }
                wrs.badIndex(-1);
                progressSend();
                return 0;
            }
        }
    }

    @Override
    public int postRecv(WorkRequestList wrs, int offset, int count) {
        for (;;) {
            Link l = link;
            synchronized (l) {
                if (l != link) {
                    continue;
                }
                int rc = checkPost(wrs, offset, count);
                if (rc == 0 && srq != null) {
                    rc = -Errno.EINVAL; // its receives come from the shared receive queue
                }
                if (rc != 0) {
                    wrs.badIndex(offset);
                    return rc;
                }
                int end = offset + count;
                for (int i = offset; i < end; i++) {
                    rc = rq.enqueue(wrs, i, caps.maxRecvSge());
                    if (rc != 0) {
                        wrs.badIndex(i);
                        break;
                    }
                }
                if (rc == 0) {
                    wrs.badIndex(-1);
                }
                if (state == QpState.ERROR) {
                    flushRecv();
                } else {
                    kickPeer();
                }
                return rc;
            }
        }
    }

    private int checkPost(WorkRequestList wrs, int offset, int count) {
        if (destroyed) {
            return -Errno.EBADF;
        }
        if (offset < 0 || count < 0 || offset + count > wrs.capacity()) {
            return -Errno.EINVAL;
        }
        return 0;
    }

    private int enqueueSend(WorkRequestList wrs, int i) {
        int opcode = wrs.opcode(i);
        int flags = wrs.sendFlags(i);
        int n = wrs.numSge(i);
        if (!supported(opcode) || n < 0 || n > caps.maxSendSge()) {
            return -Errno.EINVAL;
        }
        boolean local = opcode == WrOpcode.BIND_MW || opcode == WrOpcode.LOCAL_INV;
        boolean inline = (flags & SendFlags.INLINE) != 0;
        if (inline && (opcode == WrOpcode.RDMA_READ || local)) {
            return -Errno.EINVAL;
        }
        EmulatedMemoryWindow bound = null;
        if (opcode == WrOpcode.BIND_MW) {
            // the bind must name a live window and region (a provider over rdma-core needs their objects to post it)
            bound = fabric.windowAt(wrs.mwRkey(i));
            if (n != 1 || bound == null || fabric.lookup(wrs.sgeLkey(i, 0)) == null) {
                return -Errno.EINVAL;
            }
        } else if (opcode == WrOpcode.LOCAL_INV) {
            n = 0;
        }
        if (sqTail - sqHead == sqSize) {
            return -Errno.ENOMEM;
        }
        int slot = (int) (sqTail % sqSize);
        int base = slot * sqSge;
        long total = 0;
        for (int j = 0; j < n; j++) {
            sqSgeAddr[base + j] = wrs.sgeAddr(i, j);
            sqSgeLen[base + j] = wrs.sgeLength(i, j);
            sqSgeLkey[base + j] = wrs.sgeLkey(i, j);
            total += wrs.sgeLength(i, j) & 0xffffffffL;
        }
        if (inline) {
            if (total > inlineMax) {
                return -Errno.EINVAL;
            }
            sqInlineLen[slot] = copyInline(slot, base, n, (int) total);
        }
        sqWrId[slot] = wrs.wrId(i);
        sqOpcode[slot] = opcode;
        sqFlags[slot] = flags;
        sqImm[slot] = wrs.immData(i);
        sqRemoteAddr[slot] = wrs.remoteAddr(i);
        sqRkey[slot] = wrs.rkey(i);
        sqMwRkey[slot] = wrs.mwRkey(i);
        sqNumSge[slot] = n;
        sqTail++;
        if (bound != null) {
            bound.posted(wrs.rkey(i));
        }
        return 0;
    }

    private boolean supported(int opcode) {
        switch (opcode) {
            case WrOpcode.RDMA_WRITE:
            case WrOpcode.SEND:
            case WrOpcode.RDMA_READ:
                return true;
            case WrOpcode.SEND_WITH_IMM:
            case WrOpcode.RDMA_WRITE_WITH_IMM:
                return immediates;
            case WrOpcode.BIND_MW:
            case WrOpcode.LOCAL_INV:
                return windows;
            case WrOpcode.SEND_WITH_INV:
                return sendWithInvalidate;
            default:
                return false;
        }
    }

    /** Copies an inline send's bytes now, so the caller may reuse them; -1 if an SGE names no registered memory. */
    private int copyInline(int slot, int base, int n, int total) {
        int pos = slot * inlineMax;
        for (int j = 0; j < n; j++) {
            int len = sqSgeLen[base + j];
            EmulatedMemoryRegion mr = fabric.lookup(sqSgeLkey[base + j]);
            int offset = mr == null ? -1 : mr.offsetOf(sqSgeAddr[base + j], len);
            if (offset < 0) {
                return -1;
            }
            sqInline.put(pos, mr.memory(), offset, len);
            pos += len;
        }
        return total;
    }

    // ---- execution (with the link's monitor held) ----

    private void progressSend() {
        if (executing) {
            return; // re-entered through the peer (it failed or went away while we executed): the loop goes on
        }
        executing = true;
        try {
            executeSendQueue();
        } finally {
            executing = false;
        }
    }

    private void executeSendQueue() {
        while (sqExec < sqTail) {
            if (state == QpState.ERROR) {
                flushSend();
                return;
            }
            if (link.silent || sendsStalled) {
                return;
            }
            if (link.holding == peer && peer != null) {
                if (sqTail - sqExec < 2) {
                    return; // the peer's receive path is not there yet: this waits for more to arrive behind it
                }
                link.holding = null;
            }
            int slot = (int) (sqExec % sqSize);
            int status;
            if (injectedStatus != 0) {
                status = injectedStatus;
                injectedStatus = 0;
            } else {
                status = execute(slot);
            }
            if (status == RNR_WAIT) {
                if (!rnrRetriesExhausted()) {
                    return;
                }
                status = WcStatus.RNR_RETRY_EXC_ERR;
            }
            clearRnr();
            sqExec++;
            if (status == WcStatus.SUCCESS) {
                if (signalAll || (sqFlags[slot] & SendFlags.SIGNALED) != 0) {
                    sqHead = sqExec;
                    sendCq.add(sqWrId[slot], status, wcOpcode(sqOpcode[slot]), byteLen(slot), 0, qpNum, 0, false);
                }
            } else {
                sqHead = sqExec;
                sendCq.add(sqWrId[slot], status, wcOpcode(sqOpcode[slot]), 0, 0, qpNum, 0, false);
                enterError();
            }
        }
    }

    private int execute(int slot) {
        int opcode = sqOpcode[slot];
        if (opcode == WrOpcode.BIND_MW) {
            return bindWindow(slot);
        }
        if (opcode == WrOpcode.LOCAL_INV) {
            EmulatedMemoryWindow mw = fabric.window(sqImm[slot]);
            if (mw == null || !mw.valid || mw.emulatedPd() != pd) {
                return WcStatus.LOC_QP_OP_ERR;
            }
            mw.invalidate();
            return WcStatus.SUCCESS;
        }
        EmulatedQueuePair p = peer;
        if (link.severed || p == null || p.destroyed || p.state != QpState.RTS) {
            return WcStatus.RETRY_EXC_ERR;
        }
        boolean inline = (sqFlags[slot] & SendFlags.INLINE) != 0;
        int base = slot * sqSge;
        long total;
        if (inline) {
            total = sqInlineLen[slot];
        } else {
            total = checkSges(sqSgeAddr, sqSgeLen, sqSgeLkey, base, sqNumSge[slot], pd,
                    opcode == WrOpcode.RDMA_READ ? Access.LOCAL_WRITE : 0);
        }
        if (total < 0) {
            return WcStatus.LOC_PROT_ERR;
        }
        if (total > Integer.MAX_VALUE) {
            return WcStatus.LOC_LEN_ERR;
        }
        switch (opcode) {
            case WrOpcode.SEND:
            case WrOpcode.SEND_WITH_IMM:
            case WrOpcode.SEND_WITH_INV: {
                EmulatedSharedReceiveQueue shared = p.srq;
                if (shared == null) {
                    return deliverSend(slot, opcode, inline, total, p, p.rq, p.pd);
                }
                synchronized (shared) { // link, then queue
                    long taken = shared.ring.head;
                    int status = deliverSend(slot, opcode, inline, total, p, shared.ring, shared.emulatedPd());
                    if (shared.ring.head != taken) {
                        shared.consumed();
                    }
                    return status;
                }
            }
            case WrOpcode.RDMA_WRITE:
            case WrOpcode.RDMA_WRITE_WITH_IMM: {
                // a zero-byte write names no memory: its key and address are not checked (IBA C9-88), and it only
                // asks the peer's device for an acknowledgement (the transport's keep-alive probe)
                EmulatedMemoryRegion target = total == 0 ? null : remoteRegion(p, sqRemoteAddr[slot], sqRkey[slot],
                        total, Access.REMOTE_WRITE);
                if (target == null && total != 0) {
                    p.enterError();
                    return WcStatus.REM_ACCESS_ERR;
                }
                if (opcode == WrOpcode.RDMA_WRITE) {
                    writeTo(target, slot, inline, (int) total);
                    return WcStatus.SUCCESS;
                }
                EmulatedSharedReceiveQueue shared = p.srq;
                if (shared == null) {
                    return deliverWriteWithImm(target, slot, inline, (int) total, p, p.rq);
                }
                synchronized (shared) { // link, then queue
                    int status = deliverWriteWithImm(target, slot, inline, (int) total, p, shared.ring);
                    if (status == WcStatus.SUCCESS) {
                        shared.consumed();
                    }
                    return status;
                }
            }
            case WrOpcode.RDMA_READ: {
                if (total == 0) {
                    return WcStatus.SUCCESS; // names no memory: no key is checked, the peer's device only answers
                }
                EmulatedMemoryRegion remote = remoteRegion(p, sqRemoteAddr[slot], sqRkey[slot], total,
                        Access.REMOTE_READ);
                if (remote == null) {
                    p.enterError();
                    return WcStatus.REM_ACCESS_ERR;
                }
                cursorSge = 0;
                cursorOffset = 0;
                scatter(remote.memory(), remote.offsetOf(sqRemoteAddr[slot], total), (int) total,
                        sqSgeAddr, sqSgeLen, sqSgeLkey, base);
                return WcStatus.SUCCESS;
            }
            default:
                return WcStatus.LOC_QP_OP_ERR;
        }
    }

    /**
     * A SEND at responder {@code p} takes the oldest receive of {@code r} (its own queue, or its shared receive queue's
     * with that queue's monitor held), whose SGEs are checked in {@code receivePd}.
     */
    private int deliverSend(int slot, int opcode, boolean inline, long total, EmulatedQueuePair p, ReceiveRing r,
                            EmulatedProtectionDomain receivePd) {
        if (r.isEmpty()) {
            return noReceive(p);
        }
        int rslot = r.headSlot();
        int rbase = rslot * r.sge;
        long room = checkSges(r.sgeAddr, r.sgeLen, r.sgeLkey, rbase, r.numSge[rslot], receivePd,
                Access.LOCAL_WRITE);
        if (room < 0) {
            p.failRecv(r, rslot, WcStatus.LOC_PROT_ERR);
            return WcStatus.REM_OP_ERR;
        }
        if (room < total) {
            p.failRecv(r, rslot, WcStatus.LOC_LEN_ERR);
            return WcStatus.REM_INV_REQ_ERR;
        }
        EmulatedMemoryWindow invalidated = null;
        if (opcode == WrOpcode.SEND_WITH_INV) {
            // only a window bound through the responder's QP can be invalidated by its peer
            invalidated = fabric.window(sqImm[slot]);
            if (invalidated == null || !invalidated.valid || invalidated.qp != p) {
                p.failRecv(r, rslot, WcStatus.REM_INV_REQ_ERR);
                return WcStatus.REM_INV_REQ_ERR;
            }
        }
        copyOut(slot, inline, (int) total, r.sgeAddr, r.sgeLen, r.sgeLkey, rbase);
        boolean imm = opcode == WrOpcode.SEND_WITH_IMM;
        int flags = imm ? WcOpcode.FLAG_WITH_IMM : 0;
        if (invalidated != null) {
            invalidated.invalidate();
            flags = WcOpcode.FLAG_WITH_INV;
        }
        r.head++;
        p.recvCq.add(r.wrId[rslot], WcStatus.SUCCESS, WcOpcode.RECV, (int) total,
                imm || invalidated != null ? sqImm[slot] : 0, p.qpNum, flags,
                p.solicitedReceives && (sqFlags[slot] & SendFlags.SOLICITED) != 0);
        return WcStatus.SUCCESS;
    }

    /** An RDMA WRITE WITH IMMEDIATE at {@code p}: the bytes land in {@code target}, its notification takes a receive. */
    private int deliverWriteWithImm(EmulatedMemoryRegion target, int slot, boolean inline, int total,
                                    EmulatedQueuePair p, ReceiveRing r) {
        if (r.isEmpty()) {
            return noReceive(p);
        }
        writeTo(target, slot, inline, total);
        int rslot = r.headSlot();
        r.head++;
        p.recvCq.add(r.wrId[rslot], WcStatus.SUCCESS, WcOpcode.RECV_RDMA_WITH_IMM, total, sqImm[slot], p.qpNum,
                WcOpcode.FLAG_WITH_IMM, p.solicitedReceives && (sqFlags[slot] & SendFlags.SOLICITED) != 0);
        return WcStatus.SUCCESS;
    }

    /** The bytes of RDMA WRITE {@code slot} into the responder's validated region (none for a zero-byte write). */
    private void writeTo(EmulatedMemoryRegion target, int slot, boolean inline, int total) {
        if (target != null) {
            oneAddr[0] = sqRemoteAddr[slot];
            oneLen[0] = total;
            oneKey[0] = target.lkey();
            copyOut(slot, inline, total, oneAddr, oneLen, oneKey, 0);
        }
    }

    /** Total bytes of a valid SGE list in {@code pd} with {@code access}; -1 if an entry isn't. */
    private long checkSges(long[] addr, int[] len, int[] key, int base, int n, EmulatedProtectionDomain domain,
                           int access) {
        long total = 0;
        for (int j = base; j < base + n; j++) {
            long length = len[j] & 0xffffffffL;
            EmulatedMemoryRegion mr = fabric.lookup(key[j]);
            if (mr == null || mr.emulatedPd() != domain || (mr.access() & access) != access
                    || mr.offsetOf(addr[j], length) < 0) {
                return -1;
            }
            total += length;
        }
        return total;
    }

    /**
     * The region that responder {@code p} lets {@code [addr, addr + length)} be accessed in with {@code access} under
     * {@code rkey}: a region of its PD that grants it, or a valid memory window bound through {@code p} itself.
     */
    private EmulatedMemoryRegion remoteRegion(EmulatedQueuePair p, long addr, int rkey, long length, int access) {
        if (rkey == 0) {
            return null;
        }
        EmulatedMemoryWindow mw = fabric.window(rkey);
        if (mw != null) {
            return mw.admit(p, addr, length, access);
        }
        EmulatedMemoryRegion mr = fabric.lookup(rkey);
        return mr != null && mr.emulatedPd() == p.pd && (mr.access() & access) != 0 && mr.offsetOf(addr, length) >= 0
                ? mr : null;
    }

    /** Moves send slot {@code slot}'s bytes into a validated destination SGE list. */
    private void copyOut(int slot, boolean inline, int total, long[] addr, int[] len, int[] key, int base) {
        cursorSge = 0;
        cursorOffset = 0;
        if (inline) {
            scatter(sqInline, slot * inlineMax, total, addr, len, key, base);
            return;
        }
        int sbase = slot * sqSge;
        for (int j = sbase; j < sbase + sqNumSge[slot]; j++) {
            EmulatedMemoryRegion mr = fabric.lookup(sqSgeLkey[j]);
            scatter(mr.memory(), mr.offsetOf(sqSgeAddr[j], sqSgeLen[j]), sqSgeLen[j], addr, len, key, base);
        }
    }

    private void scatter(ByteBuffer src, int srcIndex, int length, long[] addr, int[] len, int[] key, int base) {
        while (length > 0) {
            int j = base + cursorSge;
            int room = len[j] - cursorOffset;
            if (room <= 0) {
                cursorSge++;
                cursorOffset = 0;
                continue;
            }
            int n = Math.min(room, length);
            EmulatedMemoryRegion mr = fabric.lookup(key[j]);
            mr.memory().put(mr.offsetOf(addr[j], len[j]) + cursorOffset, src, srcIndex, n);
            cursorOffset += n;
            srcIndex += n;
            length -= n;
        }
    }

    /**
     * A BIND_MW as rxe checks it: the window of this QP's PD and free, the region of the same PD with MW_BIND, a
     * non-empty range inside it, REMOTE_WRITE only over LOCAL_WRITE memory. It then admits its new rkey on this QP.
     */
    private int bindWindow(int slot) {
        EmulatedMemoryWindow mw = fabric.windowAt(sqMwRkey[slot]);
        int base = slot * sqSge;
        EmulatedMemoryRegion mr = fabric.lookup(sqSgeLkey[base]);
        long addr = sqSgeAddr[base];
        long length = sqSgeLen[base] & 0xffffffffL;
        int access = sqImm[slot];
        if (mw == null || mw.rkey != sqMwRkey[slot] || mw.valid || mw.emulatedPd() != pd || mr == null
                || mr.emulatedPd() != pd || (mr.access() & Access.MW_BIND) == 0 || length == 0
                || mr.offsetOf(addr, length) < 0 || (access & ~(Access.REMOTE_READ | Access.REMOTE_WRITE)) != 0
                || ((access & Access.REMOTE_WRITE) != 0 && (mr.access() & Access.LOCAL_WRITE) == 0)) {
            return WcStatus.MW_BIND_ERR;
        }
        mw.bind(this, mr, addr, length, access, sqRkey[slot]);
        return WcStatus.SUCCESS;
    }

    private int byteLen(int slot) {
        if (sqOpcode[slot] == WrOpcode.BIND_MW || sqOpcode[slot] == WrOpcode.LOCAL_INV) {
            return 0;
        }
        if ((sqFlags[slot] & SendFlags.INLINE) != 0) {
            return sqInlineLen[slot];
        }
        long total = 0;
        int base = slot * sqSge;
        for (int j = base; j < base + sqNumSge[slot]; j++) {
            total += sqSgeLen[j] & 0xffffffffL;
        }
        return (int) total;
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
     * A message that consumes a receive found none at responder {@code p}. IB and RoCE retry (RNR) per the requester's
     * rnrRetryCount. iWARP has no RNR: the responder's DDP layer finds no buffer for an untagged message and
     * terminates the connection (TERMINATE), so the responder goes to error (flushing its work) and the requester's
     * work request fails with REM_OP_ERR, which puts the requester in error too; rnrRetryCount plays no part.
     */
    private int noReceive(EmulatedQueuePair p) {
        if (p.terminatesWithoutReceive) {
            p.enterError();
            return WcStatus.REM_OP_ERR;
        }
        if (p.srq != null) {
            p.srq.addWaiter(this); // its monitor is held: the post that ends the wait resumes this QP
        }
        return RNR_WAIT;
    }

    /**
     * The responder side of a failed SEND: the receive of {@code r} (this QP's own queue or its shared receive
     * queue's) completes with {@code status} and this QP goes to error.
     */
    private void failRecv(ReceiveRing r, int slot, int status) {
        r.head++;
        recvCq.add(r.wrId[slot], status, WcOpcode.RECV, 0, 0, qpNum, 0, false);
        enterError();
    }

    private boolean rnrRetriesExhausted() {
        if (rnrRetry == 0) {
            return true;
        }
        if (rnrRetry >= ConnectionParameters.RNR_RETRY_INFINITE) {
            rnrWaiting = true;
            return false;
        }
        long now = System.nanoTime();
        if (!rnrWaiting) {
            rnrWaiting = true;
            rnrDeadline = now + rnrRetry * fabric.rnrTimerNanos();
        } else if (now - rnrDeadline >= 0) {
            return true;
        }
        if (rnrTimer == null) {
            rnrTimer = fabric.schedule(rnrTimerTask, rnrDeadline - now);
        }
        return false;
    }

    /** The shared receive queue this QP's send waited on (RNR) got receives: try again. No other monitor held. */
    void onSharedReceivePosted() {
        Link l = link;
        synchronized (l) {
            if (rnrWaiting && !destroyed) {
                progressSend();
            }
        }
    }

    private void onRnrTimer() {
        Link l = link;
        synchronized (l) {
            rnrTimer = null;
            if (rnrWaiting && !destroyed) {
                progressSend();
            }
        }
    }

    private void clearRnr() {
        rnrWaiting = false;
        if (rnrTimer != null) {
            rnrTimer.cancel(false);
            rnrTimer = null;
        }
    }

    /** A peer stalled on us (RNR) tries again: we posted a receive, or went away. */
    private void kickPeer() {
        EmulatedQueuePair p = peer;
        if (p != null && p.rnrWaiting) {
            p.progressSend();
        }
    }

    private void enterError() {
        if (state == QpState.ERROR) {
            return;
        }
        state = QpState.ERROR;
        clearRnr();
        flushRecv();
        flushSend();
        kickPeer();
    }

    /** Flushes this QP's own receives; a shared receive queue's stay for the other QPs. */
    private void flushRecv() {
        while (!rq.isEmpty()) {
            int slot = rq.headSlot();
            rq.head++;
            recvCq.add(rq.wrId[slot], WcStatus.WR_FLUSH_ERR, WcOpcode.RECV, 0, 0, qpNum, 0, false);
        }
    }

    private void flushSend() {
        while (sqExec < sqTail) {
            int slot = (int) (sqExec % sqSize);
            sqExec++;
            sendCq.add(sqWrId[slot], WcStatus.WR_FLUSH_ERR, wcOpcode(sqOpcode[slot]), 0, 0, qpNum, 0, false);
        }
        sqHead = sqExec;
    }

    // ---- state changes ----

    /** Connects two QPs (RDMA CM accept); each side's RNR retry count is the one its own side asked for. */
    static void connect(EmulatedQueuePair active, int activeRnrRetry, EmulatedQueuePair passive, int passiveRnrRetry) {
        Link l = active.link;
        synchronized (l) {
            passive.link = l;
            active.peer = passive;
            passive.peer = active;
            active.rnrRetry = activeRnrRetry;
            passive.rnrRetry = passiveRnrRetry;
            if (active.state != QpState.ERROR) {
                active.state = QpState.RTS;
            }
            if (passive.state != QpState.ERROR) {
                passive.state = QpState.RTS;
            }
        }
    }

    @Override
    public void moveToError() {
        Link l = link;
        synchronized (l) {
            if (!destroyed) {
                enterError();
            }
        }
    }

    void refuseNextPostSend(int errno) {
        Link l = link;
        synchronized (l) {
            refusedPostErrno = errno;
        }
    }

    void injectFailure(int wcStatus) {
        Link l = link;
        synchronized (l) {
            injectedStatus = wcStatus;
        }
    }

    void sever() {
        Link l = link;
        synchronized (l) {
            l.severed = true;
            if (rnrWaiting) {
                progressSend();
            }
            kickPeer();
        }
    }

    /** Whether the link under this QP was severed or silenced (FaultInjector): nothing reaches the peer. */
    boolean isLinkCut() {
        Link l = link;
        return l.severed || l.silent;
    }

    /** See {@code EmulatedFabric.holdFirstArrivalOnAccept}: called on the accepting side's QP, once connected. */
    void holdFirstArrival() {
        Link l = link;
        synchronized (l) {
            l.holding = this;
        }
    }

    void stallSends() {
        Link l = link;
        synchronized (l) {
            sendsStalled = true;
        }
    }

    void silence() {
        Link l = link;
        synchronized (l) {
            l.silent = true;
        }
    }

    boolean isDestroyed() {
        return destroyed;
    }

    @Override
    public void close() {
        long delay = destroyDelayMillis;
        destroyDelayMillis = 0;
        if (delay > 0) {
            try {
                Thread.sleep(delay); // (the QP still works meanwhile, as a kernel's does until its destruction)
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        Link l = link;
        synchronized (l) {
            if (destroyed) {
                return;
            }
            destroyed = true;
            state = QpState.ERROR;
            clearRnr();
            kickPeer();
        }
        sendCq.detach();
        recvCq.detach();
        if (srq != null) {
            srq.detach();
        }
        pd.release();
        device.releaseQp();
    }

    /** {@link org.nettyrdma.verbs.FaultInjector#delayDestroy}. */
    void delayDestroy(long millis) {
        destroyDelayMillis = millis;
    }

    @Override
    public String toString() {
        return "qp " + qpNum + " on " + device.name() + " (" + state + ')';
    }
}
