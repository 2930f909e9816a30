package org.nettyrdma.verbs.jni;

import io.netty.util.collection.LongObjectHashMap;
import org.nettyrdma.verbs.CompletionChannel;
import org.nettyrdma.verbs.CompletionQueue;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.VerbsException;

/** {@code ibv_comp_channel} with a non-blocking fd; knows its completion queues to map events back to them. */
final class JniCompletionChannel implements CompletionChannel {
    private final JniDevice device;
    private final long handle;
    private final int fd;
    private final LongObjectHashMap<JniCompletionQueue> queues = new LongObjectHashMap<>();
    private boolean closed;

    JniCompletionChannel(JniDevice device, long handle) {
        this.device = device;
        this.handle = handle;
        this.fd = Native.compChannelFd(handle);
    }

    JniDevice device() {
        return device;
    }

    long handle() {
        return handle;
    }

    int fd() {
        return fd;
    }

    synchronized void checkOpen(String verb) throws VerbsException {
        if (closed) {
            throw new VerbsException(verb, Errno.EBADF, "completion channel closed");
        }
    }

    synchronized void add(JniCompletionQueue cq) {
        queues.put(cq.handle(), cq);
    }

    synchronized void remove(JniCompletionQueue cq) {
        queues.remove(cq.handle());
    }

    @Override
    public CompletionQueue getEvent() {
        JniCompletionQueue cq;
        synchronized (this) {
            if (closed) {
                return null;
            }
            long h = Native.getCqEvent(handle);
            if (h <= 0) {
                return null;
            }
            cq = queues.get(h);
        }
        if (cq != null) {
            cq.onEvent();
        }
        return cq;
    }

    @Override
    public synchronized void close() throws VerbsException {
        if (closed) {
            return;
        }
        if (!queues.isEmpty()) {
            throw new VerbsException("ibv_destroy_comp_channel", Errno.EBUSY,
                    queues.size() + " completion queues report to it");
        }
        int rc = Native.destroyCompChannel(handle);
        if (rc < 0) {
            throw new VerbsException("ibv_destroy_comp_channel", -rc);
        }
        closed = true;
    }

    @Override
    public String toString() {
        return "completion channel fd " + fd + " on " + device.name() + (closed ? " (closed)" : "");
    }
}
