package org.nettyrdma.verbs.emulated;

import org.nettyrdma.verbs.CompletionArray;
import org.nettyrdma.verbs.CompletionQueue;
import org.nettyrdma.verbs.Device;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.VerbsException;

/**
 * A ring of completions, filled by whichever thread executes a work request and drained by its owner. Overrun puts
 * the queue in error: completions are lost and {@link #poll} answers -EOVERFLOW from then on.
 */
final class EmulatedCompletionQueue implements CompletionQueue {
    private final EmulatedDevice device;
    private final EmulatedCompletionChannel channel;
    private final int capacity;
    private final long[] wrId;
    private final int[] status;
    private final int[] opcode;
    private final int[] byteLen;
    private final int[] imm;
    private final int[] qpNum;
    private final int[] flags;
    private int head;
    private int count;
    private boolean overrun;
    private boolean armed;
    private boolean armedSolicitedOnly;
    private int unackedEvents;
    private int attachedQps;
    private boolean closed;
    private volatile long delayNanos;

    EmulatedCompletionQueue(EmulatedDevice device, int capacity, EmulatedCompletionChannel channel) {
        this.device = device;
        this.channel = channel;
        this.capacity = capacity;
        wrId = new long[capacity];
        status = new int[capacity];
        opcode = new int[capacity];
        byteLen = new int[capacity];
        imm = new int[capacity];
        qpNum = new int[capacity];
        flags = new int[capacity];
    }

    @Override
    public Device device() {
        return device;
    }

    @Override
    public int capacity() {
        return capacity;
    }

    void delayNanos(long nanos) {
        delayNanos = nanos;
    }

    /** Adds a completion (now, or after the injected delay). */
    void add(long id, int st, int op, int len, int immData, int qp, int wcFlags, boolean solicited) {
        long delay = delayNanos;
        if (delay > 0) {
            device.fabric().schedule(() -> addNow(id, st, op, len, immData, qp, wcFlags, solicited), delay);
        } else {
            addNow(id, st, op, len, immData, qp, wcFlags, solicited);
        }
    }

    private void addNow(long id, int st, int op, int len, int immData, int qp, int wcFlags, boolean solicited) {
        boolean report;
        synchronized (this) {
            if (closed || overrun) {
                return;
            }
            if (count == capacity) {
                overrun = true;
                return;
            }
            int i = (head + count) % capacity;
            wrId[i] = id;
            status[i] = st;
            opcode[i] = op;
            byteLen[i] = len;
            imm[i] = immData;
            qpNum[i] = qp;
            flags[i] = wcFlags;
            count++;
            report = armed && (!armedSolicitedOnly || solicited || st != 0);
            if (report) {
                armed = false;
                unackedEvents++;
            }
        }
        if (report && channel != null) {
            channel.notify(this);
        }
    }

    /** Overruns now, as if a completion had arrived with the queue full (a fault a test injects). */
    synchronized void overrun() {
        overrun = true;
    }

    @Override
    public synchronized int poll(CompletionArray into, int max) {
        if (closed) {
            return -Errno.EBADF;
        }
        if (overrun) {
            return -Errno.EOVERFLOW;
        }
        int n = Math.min(count, Math.min(max, into.capacity()));
        for (int k = 0; k < n; k++) {
            int i = head;
            into.set(k, wrId[i], status[i], opcode[i], byteLen[i], imm[i], qpNum[i], flags[i]);
            head = i + 1 == capacity ? 0 : i + 1;
        }
        count -= n;
        return n;
    }

    @Override
    public synchronized int requestNotify(boolean solicitedOnly) {
        if (closed) {
            return -Errno.EBADF;
        }
        if (channel == null) {
            return -Errno.EINVAL;
        }
        armed = true;
        armedSolicitedOnly = solicitedOnly;
        return 0;
    }

    @Override
    public synchronized void ackEvents(int n) {
        unackedEvents = Math.max(0, unackedEvents - n);
    }

    synchronized void attach() throws VerbsException {
        if (closed) {
            throw new VerbsException("rdma_create_qp", Errno.EBADF, "completion queue closed");
        }
        attachedQps++;
    }

    synchronized void detach() {
        attachedQps--;
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
            throw new VerbsException("ibv_destroy_cq", Errno.EBUSY,
                    unackedEvents + " completion events not acknowledged with ackEvents");
        }
        closed = true;
    }
}
