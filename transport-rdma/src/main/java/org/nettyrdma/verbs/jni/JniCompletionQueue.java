package org.nettyrdma.verbs.jni;

import io.netty.util.collection.IntObjectHashMap;
import org.nettyrdma.verbs.CompletionArray;
import org.nettyrdma.verbs.CompletionQueue;
import org.nettyrdma.verbs.Device;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.VerbsException;
import org.nettyrdma.verbs.WcOpcode;
import org.nettyrdma.verbs.WcStatus;

import java.nio.ByteBuffer;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * {@code ibv_cq}. Polls straight into the {@link CompletionArray}'s memory. Completions are also shown to their queue
 * pair: failures put it in ERROR, send completions free its send-queue slots (see {@link JniQueuePair}). A CQ overrun
 * (the asynchronous event IBV_EVENT_CQ_ERR) makes every later poll answer -EOVERFLOW.
 */
final class JniCompletionQueue implements CompletionQueue {
    private final JniDevice device;
    private final long handle;
    private final JniCompletionChannel channel;
    private final int capacity;
    /**
     * QPs whose send or receive queue completes here, by QP number. Read and written by the polling thread only (a QP
     * is created on it): a QP destroyed on another thread (a teardown's) is taken out through {@link #detached}.
     */
    private final IntObjectHashMap<JniQueuePair> qps = new IntObjectHashMap<>();
    /** QPs destroyed since the last poll, for the polling thread to take out of {@link #qps}. */
    private final Queue<JniQueuePair> detached = new ConcurrentLinkedQueue<>();
    private int attachedQps;
    private int unackedEvents;
    private boolean closed;
    private CompletionArray lastArray;
    private long lastAddress;

    JniCompletionQueue(JniDevice device, long handle, JniCompletionChannel channel) {
        this.device = device;
        this.handle = handle;
        this.channel = channel;
        this.capacity = Native.cqCapacity(handle);
    }

    long handle() {
        return handle;
    }

    @Override
    public Device device() {
        return device;
    }

    JniDevice jniDevice() {
        return device;
    }

    @Override
    public int capacity() {
        return capacity;
    }

    @Override
    public int poll(CompletionArray into, int max) {
        if (closed) {
            return -Errno.EBADF;
        }
        int n = Math.min(max, into.capacity());
        if (n <= 0) {
            return 0;
        }
        if (into != lastArray) {
            lastAddress = Native.directBufferAddress(into.memory());
            lastArray = into;
        }
        if (!detached.isEmpty()) {
            forgetDetached();
        }
        int rc = Native.pollCq(handle, lastAddress, n);
        if (rc > 0 && !qps.isEmpty()) {
            onCompletions(into.memory(), rc);
        }
        return rc;
    }

    /**
     * Tells the QPs what completed: failures put them in ERROR, send completions free send-queue slots. A failed
     * completion gets the opcode of its work request and byte_len 0, as the SPI has them (verbs leaves both
     * undefined; on a CQ shared by both queues a failed completion keeps the device's opcode).
     */
    private void onCompletions(ByteBuffer wcs, int n) {
        for (int i = 0; i < n; i++) {
            int o = i * CompletionArray.SLOT_SIZE;
            JniQueuePair qp = qps.get(wcs.getInt(o + CompletionArray.OFFSET_QP_NUM));
            if (qp == null) {
                continue;
            }
            int status = wcs.getInt(o + CompletionArray.OFFSET_STATUS);
            boolean shared = qp.sendCq() == qp.recvCq();
            boolean send = qp.sendCq() == this
                    && (!shared || wcs.getInt(o + CompletionArray.OFFSET_OPCODE) < WcOpcode.RECV);
            int opcode = send ? qp.onSendCompletion(wcs.getLong(o + CompletionArray.OFFSET_WR_ID), status) : -1;
            if (status != WcStatus.SUCCESS) {
                qp.failed();
                if (!send && !shared) {
                    opcode = WcOpcode.RECV;
                }
                if (opcode >= 0) {
                    wcs.putInt(o + CompletionArray.OFFSET_OPCODE, opcode);
                }
                wcs.putInt(o + CompletionArray.OFFSET_BYTE_LEN, 0);
            }
        }
    }

    @Override
    public int requestNotify(boolean solicitedOnly) {
        if (closed) {
            return -Errno.EBADF;
        }
        if (channel == null) {
            return -Errno.EINVAL;
        }
        return Native.reqNotifyCq(handle, solicitedOnly);
    }

    synchronized void onEvent() {
        unackedEvents++;
    }

    @Override
    public synchronized void ackEvents(int count) {
        // acknowledging more than was received would make ibv_destroy_cq wait for ever
        int n = Math.min(count, unackedEvents);
        if (n > 0 && !closed) {
            Native.ackCqEvents(handle, n);
            unackedEvents -= n;
        }
    }

    /** A QP uses this CQ (once per queue: twice if both its queues complete here). */
    synchronized void attach(JniQueuePair qp, String verb) throws VerbsException {
        if (closed) {
            throw new VerbsException(verb, Errno.EBADF, "completion queue closed");
        }
        attachedQps++;
        qps.put(qp.qpNum(), qp);
    }

    /**
     * The QP is destroyed (on any thread): the next poll forgets it (a completion it left in this queue is then no
     * longer shown to it; a QP created later may have its number).
     */
    synchronized void detach(JniQueuePair qp) {
        attachedQps--;
        detached.add(qp);
    }

    /** Takes the QPs destroyed since the last poll out of {@link #qps} (polling thread). */
    private void forgetDetached() {
        JniQueuePair qp;
        while ((qp = detached.poll()) != null) {
            if (qps.get(qp.qpNum()) == qp) {
                qps.remove(qp.qpNum());
            }
        }
    }

    @Override
    public synchronized void close() throws VerbsException {
        if (closed) {
            return;
        }
        if (attachedQps > 0) {
            throw new VerbsException("ibv_destroy_cq", Errno.EBUSY, attachedQps + " queue pairs use it");
        }
        if (unackedEvents > 0) {
            // rdma-core would wait for ever in ibv_destroy_cq
            throw new VerbsException("ibv_destroy_cq", Errno.EBUSY,
                    unackedEvents + " completion events not acknowledged with ackEvents");
        }
        int rc = Native.destroyCq(handle);
        if (rc < 0) {
            throw new VerbsException("ibv_destroy_cq", -rc);
        }
        closed = true;
        lastArray = null;
        if (channel != null) {
            channel.remove(this);
        }
    }

    @Override
    public String toString() {
        return "cq " + capacity + " on " + device.name() + (closed ? " (closed)" : "");
    }
}
