package org.nettyrdma.verbs.emulated;

import org.nettyrdma.verbs.CmEvent;
import org.nettyrdma.verbs.CmEventChannel;
import org.nettyrdma.verbs.CmEventType;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.VerbsException;

import java.util.concurrent.ConcurrentLinkedQueue;

final class EmulatedCmEventChannel implements CmEventChannel {
    private static final class Pending {
        final CmEventType type;
        final EmulatedCmId id;
        final EmulatedCmId listenId;
        final int status;
        final byte[] data;
        /** Runs when the application takes the event (what librdmacm does inside rdma_get_cm_event); may be null. */
        final Runnable onTaken;

        Pending(CmEventType type, EmulatedCmId id, EmulatedCmId listenId, int status, byte[] data, Runnable onTaken) {
            this.type = type;
            this.id = id;
            this.listenId = listenId;
            this.status = status;
            this.data = data;
            this.onTaken = onTaken;
        }
    }

    private final ConcurrentLinkedQueue<Pending> events = new ConcurrentLinkedQueue<>();
    private volatile EmulatedEventWaiter waiter;
    private int ids;
    private boolean closed;

    void waiter(EmulatedEventWaiter waiter) {
        this.waiter = waiter;
    }

    boolean hasEvents() {
        return !events.isEmpty();
    }

    void post(CmEventType type, EmulatedCmId id, EmulatedCmId listenId, int status, byte[] data, Runnable onTaken) {
        events.add(new Pending(type, id, listenId, status, data, onTaken));
        EmulatedEventWaiter w = waiter;
        if (w != null) {
            w.signal();
        }
    }

    synchronized void attach() throws VerbsException {
        if (closed) {
            throw new VerbsException("rdma_create_id", Errno.EBADF, "event channel closed");
        }
        ids++;
    }

    synchronized void detach() {
        ids--;
    }

    @Override
    public boolean poll(CmEvent into) throws VerbsException {
        if (closed) {
            throw new VerbsException("rdma_get_cm_event", Errno.EBADF, "event channel closed");
        }
        Pending e = events.poll();
        if (e == null) {
            return false;
        }
        into.set(e.type, e.id, e.listenId, e.status, e.data, e.data == null ? 0 : e.data.length);
        if (e.onTaken != null) {
            e.onTaken.run();
        }
        return true;
    }

    @Override
    public synchronized void close() throws VerbsException {
        if (closed) {
            return;
        }
        if (ids > 0) {
            throw new VerbsException("rdma_destroy_event_channel", Errno.EBUSY, ids + " ids report to it");
        }
        closed = true;
        EmulatedEventWaiter w = waiter;
        if (w != null) {
            w.remove(this);
        }
    }
}
