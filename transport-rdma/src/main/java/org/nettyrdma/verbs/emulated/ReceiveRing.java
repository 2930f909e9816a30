package org.nettyrdma.verbs.emulated;

import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.WorkRequestList;

/**
 * Posted receives in posted order, copied out of the caller's {@link WorkRequestList} (as hardware copies WQEs): a QP's
 * own receive queue, or a shared receive queue's. Slots {@code [head, tail)} are posted. Guarded by its owner's monitor
 * (the QP's link, or the shared receive queue).
 */
final class ReceiveRing {
    final int size;
    /** SGE entries per slot. */
    final int sge;
    final long[] wrId;
    final int[] numSge;
    final long[] sgeAddr;
    final int[] sgeLen;
    final int[] sgeLkey;
    long head;
    long tail;

    ReceiveRing(int size, int maxSge) {
        this.size = size;
        this.sge = Math.max(1, maxSge);
        wrId = new long[size];
        numSge = new int[size];
        sgeAddr = new long[size * sge];
        sgeLen = new int[size * sge];
        sgeLkey = new int[size * sge];
    }

    boolean isEmpty() {
        return head == tail;
    }

    int count() {
        return (int) (tail - head);
    }

    /** The slot of the oldest posted receive; only when not {@link #isEmpty()}. */
    int headSlot() {
        return (int) (head % size);
    }

    /** Copies receive work request {@code i} in: 0, -EINVAL for more than {@code maxSge} SGEs, -ENOMEM when full. */
    int enqueue(WorkRequestList wrs, int i, int maxSge) {
        int n = wrs.numSge(i);
        if (n < 0 || n > maxSge) {
            return -Errno.EINVAL;
        }
        if (tail - head == size) {
            return -Errno.ENOMEM;
        }
        int slot = (int) (tail % size);
        int base = slot * sge;
        for (int j = 0; j < n; j++) {
            sgeAddr[base + j] = wrs.sgeAddr(i, j);
            sgeLen[base + j] = wrs.sgeLength(i, j);
            sgeLkey[base + j] = wrs.sgeLkey(i, j);
        }
        wrId[slot] = wrs.wrId(i);
        numSge[slot] = n;
        tail++;
        return 0;
    }
}
