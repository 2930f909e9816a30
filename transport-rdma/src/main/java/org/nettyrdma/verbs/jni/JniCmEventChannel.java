package org.nettyrdma.verbs.jni;

import org.nettyrdma.verbs.CmEvent;
import org.nettyrdma.verbs.CmEventChannel;
import org.nettyrdma.verbs.CmEventType;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.VerbsException;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayDeque;

/**
 * {@code rdma_event_channel} with a non-blocking fd. C copies each event into a direct buffer and acknowledges it at
 * once; Java maps the ids back to their objects (an incoming connection's id is created here).
 *
 * <p>A soft-iWARP connect whose TCP connect fails (siw makes it inside {@code rdma_connect}, which runs on a thread of
 * {@link SiwConnects}) is reported as the event the SPI promises; such events are queued here and come first.
 */
final class JniCmEventChannel implements CmEventChannel {
    private static final CmEventType[] TYPES = CmEventType.values();

    private static final class Synthetic {
        final CmEventType type;
        final JniCmId id;
        final int status;

        Synthetic(CmEventType type, JniCmId id, int status) {
            this.type = type;
            this.id = id;
            this.status = status;
        }
    }

    private final JniProvider provider;
    private final long handle;
    private final int fd;
    private final ByteBuffer event = ByteBuffer.allocateDirect(JniLayout.EVENT_SIZE).order(ByteOrder.nativeOrder());
    private final long eventAddress = Native.directBufferAddress(event);
    private final byte[] data = new byte[JniLayout.EVENT_MAX_DATA];
    private final ArrayDeque<Synthetic> synthetic = new ArrayDeque<>();
    private volatile JniEventWaiter waiter;
    private int ids;
    private boolean closed;

    JniCmEventChannel(JniProvider provider, long handle) {
        this.provider = provider;
        this.handle = handle;
        this.fd = Native.eventChannelFd(handle);
    }

    long handle() {
        return handle;
    }

    int fd() {
        return fd;
    }

    synchronized void attach(String verb) throws VerbsException {
        if (closed) {
            throw new VerbsException(verb, Errno.EBADF, "event channel closed");
        }
        ids++;
    }

    synchronized void detach() {
        ids--;
    }

    synchronized void checkOpen(String verb) throws VerbsException {
        if (closed) {
            throw new VerbsException(verb, Errno.EBADF, "event channel closed");
        }
    }

    /** The waiter this channel was added to, to wake for queued events; null when removed. */
    void waiter(JniEventWaiter w) {
        waiter = w;
        if (w != null && hasSynthetic()) {
            w.wakeup();
        }
    }

    private synchronized boolean hasSynthetic() {
        return !synthetic.isEmpty();
    }

    /** Queues an event that did not come from RDMA CM. */
    void post(CmEventType type, JniCmId id, int status) {
        synchronized (this) {
            synthetic.add(new Synthetic(type, id, status));
        }
        JniEventWaiter w = waiter;
        if (w != null) {
            w.wakeup();
        }
    }

    @Override
    public boolean poll(CmEvent into) throws VerbsException {
        for (;;) {
            int rc;
            synchronized (this) {
                if (closed) {
                    throw new VerbsException("rdma_get_cm_event", Errno.EBADF, "event channel closed");
                }
                Synthetic e = synthetic.poll();
                if (e != null) {
                    into.set(e.type, e.id, null, e.status, null, 0);
                    return true;
                }
                rc = Native.getCmEvent(handle, eventAddress);
            }
            if (rc == 0) {
                return false;
            }
            if (rc < 0) {
                throw new VerbsException("rdma_get_cm_event", -rc);
            }
            CmEventType type = TYPES[event.getInt(JniLayout.EVENT_OFFSET_TYPE)];
            int status = event.getInt(JniLayout.EVENT_OFFSET_STATUS);
            long idHandle = event.getLong(JniLayout.EVENT_OFFSET_ID);
            int length = event.getInt(JniLayout.EVENT_OFFSET_DATA_LENGTH);
            event.get(JniLayout.EVENT_OFFSET_DATA, data, 0, length);
            JniCmId listenId = null;
            JniCmId id;
            if (type == CmEventType.CONNECT_REQUEST) {
                listenId = provider.idFor(event.getLong(JniLayout.EVENT_OFFSET_LISTEN_ID));
                attach("rdma_get_cm_event");
                id = provider.register(new JniCmId(provider, this, idHandle,
                        listenId == null ? null : listenId.context()));
            } else {
                id = provider.idFor(idHandle);
            }
            if (id == null) {
                continue; // an event of an id that was destroyed meanwhile
            }
            id.onEvent(type);
            into.set(type, id, listenId, status, data, length);
            return true;
        }
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
        Native.destroyEventChannel(handle);
    }

    @Override
    public String toString() {
        return "CM event channel fd " + fd + (closed ? " (closed)" : "");
    }
}
