package org.nettyrdma.verbs.jni;

import org.nettyrdma.verbs.CmEventChannel;
import org.nettyrdma.verbs.CompletionChannel;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.EventWaiter;
import org.nettyrdma.verbs.VerbsException;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * epoll over completion-channel and CM event-channel fds, plus an eventfd for {@link #wakeup()}. A wakeup writes the
 * eventfd only if none is pending (a CAS gate); the owner's {@link #await} drains it and opens the gate again.
 * {@link #close()} waits for a wakeup that is writing, so the fd is never written after it is closed.
 */
final class JniEventWaiter implements EventWaiter {
    private final int epfd;
    private final int wakeFd;
    private final AtomicBoolean wakeupPending = new AtomicBoolean();
    private final AtomicInteger writers = new AtomicInteger();
    private volatile boolean closed;

    JniEventWaiter() throws VerbsException {
        int fd = Native.epollCreate();
        if (fd < 0) {
            throw new VerbsException("epoll_create", -fd);
        }
        int efd = Native.eventfdCreate();
        if (efd < 0) {
            Native.closeFd(fd);
            throw new VerbsException("eventfd", -efd);
        }
        int rc = Native.epollAdd(fd, efd);
        if (rc < 0) {
            Native.closeFd(efd);
            Native.closeFd(fd);
            throw new VerbsException("epoll_ctl", -rc, "the wakeup eventfd");
        }
        epfd = fd;
        wakeFd = efd;
    }

    private void add(int fd, String what) throws VerbsException {
        checkOpen("epoll_ctl");
        int rc = Native.epollAdd(epfd, fd);
        if (rc < 0) {
            throw new VerbsException("epoll_ctl", -rc, "adding " + what);
        }
    }

    private void remove(int fd, String what) throws VerbsException {
        if (closed) {
            return;
        }
        int rc = Native.epollDel(epfd, fd);
        // a closed channel's fd has left the epoll set by itself
        if (rc < 0 && rc != -Errno.ENOENT && rc != -Errno.EBADF) {
            throw new VerbsException("epoll_ctl", -rc, "removing " + what);
        }
    }

    @Override
    public void add(CompletionChannel channel) throws VerbsException {
        if (!(channel instanceof JniCompletionChannel)) {
            throw new VerbsException("epoll_ctl", Errno.EINVAL, "completion channel of another provider");
        }
        JniCompletionChannel c = (JniCompletionChannel) channel;
        c.checkOpen("epoll_ctl");
        add(c.fd(), c.toString());
    }

    @Override
    public void add(CmEventChannel channel) throws VerbsException {
        if (!(channel instanceof JniCmEventChannel)) {
            throw new VerbsException("epoll_ctl", Errno.EINVAL, "CM event channel of another provider");
        }
        JniCmEventChannel c = (JniCmEventChannel) channel;
        c.checkOpen("epoll_ctl");
        add(c.fd(), c.toString());
        c.waiter(this);
    }

    @Override
    public void remove(CompletionChannel channel) throws VerbsException {
        if (channel instanceof JniCompletionChannel) {
            remove(((JniCompletionChannel) channel).fd(), channel.toString());
        }
    }

    @Override
    public void remove(CmEventChannel channel) throws VerbsException {
        if (channel instanceof JniCmEventChannel) {
            ((JniCmEventChannel) channel).waiter(null);
            remove(((JniCmEventChannel) channel).fd(), channel.toString());
        }
    }

    private void checkOpen(String verb) throws VerbsException {
        if (closed) {
            throw new VerbsException(verb, Errno.EBADF, "waiter closed");
        }
    }

    @Override
    public boolean await(long timeoutNanos) throws VerbsException {
        checkOpen("epoll_wait");
        int timeoutMs;
        if (timeoutNanos <= 0) {
            timeoutMs = 0;
        } else if (timeoutNanos == Long.MAX_VALUE) {
            timeoutMs = -1;
        } else {
            // round up: never return before the timeout has passed
            timeoutMs = (int) Math.min(Integer.MAX_VALUE,
                    TimeUnit.NANOSECONDS.toMillis(timeoutNanos + TimeUnit.MILLISECONDS.toNanos(1) - 1));
        }
        int rc = Native.epollWait(epfd, wakeFd, timeoutMs);
        if (rc < 0) {
            throw new VerbsException("epoll_wait", -rc);
        }
        if (rc == JniLayout.WAIT_WOKEN) {
            wakeupPending.set(false);
        }
        return rc != JniLayout.WAIT_TIMEOUT;
    }

    @Override
    public void wakeup() {
        writers.incrementAndGet();
        try {
            if (!closed && wakeupPending.compareAndSet(false, true)) {
                Native.eventfdWrite(wakeFd);
            }
        } finally {
            writers.decrementAndGet();
        }
    }

    @Override
    public void close() throws VerbsException {
        if (closed) {
            return;
        }
        closed = true;
        while (writers.get() != 0) {
            Thread.onSpinWait();
        }
        int rc1 = Native.closeFd(wakeFd);
        int rc2 = Native.closeFd(epfd);
        if (rc1 < 0 || rc2 < 0) {
            throw new VerbsException("close", -(rc1 < 0 ? rc1 : rc2), "event waiter");
        }
    }

    @Override
    public String toString() {
        return "event waiter epoll fd " + epfd + (closed ? " (closed)" : "");
    }
}
