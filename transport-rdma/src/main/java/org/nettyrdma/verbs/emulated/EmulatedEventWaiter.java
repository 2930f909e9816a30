package org.nettyrdma.verbs.emulated;

import org.nettyrdma.verbs.CmEventChannel;
import org.nettyrdma.verbs.CompletionChannel;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.EventWaiter;
import org.nettyrdma.verbs.VerbsException;

import java.util.concurrent.locks.LockSupport;

/** Parks the owning thread until a channel signals or {@link #wakeup()} is called; allocates nothing. */
final class EmulatedEventWaiter implements EventWaiter {
    private volatile boolean signaled;
    private volatile Thread parked;
    private volatile boolean closed;

    void signal() {
        if (!signaled) {
            signaled = true;
            Thread t = parked;
            if (t != null) {
                LockSupport.unpark(t);
            }
        }
    }

    @Override
    public void add(CompletionChannel channel) throws VerbsException {
        if (!(channel instanceof EmulatedCompletionChannel)) {
            throw new VerbsException("epoll_ctl", Errno.EINVAL, "completion channel of another provider");
        }
        EmulatedCompletionChannel c = (EmulatedCompletionChannel) channel;
        c.waiter(this);
        if (c.hasEvents()) {
            signal();
        }
    }

    @Override
    public void add(CmEventChannel channel) throws VerbsException {
        if (!(channel instanceof EmulatedCmEventChannel)) {
            throw new VerbsException("epoll_ctl", Errno.EINVAL, "CM event channel of another provider");
        }
        EmulatedCmEventChannel c = (EmulatedCmEventChannel) channel;
        c.waiter(this);
        if (c.hasEvents()) {
            signal();
        }
    }

    @Override
    public void remove(CompletionChannel channel) {
        if (channel instanceof EmulatedCompletionChannel) {
            ((EmulatedCompletionChannel) channel).waiter(null);
        }
    }

    @Override
    public void remove(CmEventChannel channel) {
        if (channel instanceof EmulatedCmEventChannel) {
            ((EmulatedCmEventChannel) channel).waiter(null);
        }
    }

    @Override
    public boolean await(long timeoutNanos) throws VerbsException {
        if (closed) {
            throw new VerbsException("epoll_wait", Errno.EBADF, "waiter closed");
        }
        if (signaled) {
            signaled = false;
            return true;
        }
        if (timeoutNanos <= 0) {
            return false;
        }
        long deadline = System.nanoTime() + timeoutNanos;
        parked = Thread.currentThread();
        try {
            while (!signaled) {
                if (timeoutNanos == Long.MAX_VALUE) {
                    LockSupport.park(this);
                } else {
                    long left = deadline - System.nanoTime();
                    if (left <= 0) {
                        break;
                    }
                    LockSupport.parkNanos(this, left);
                }
            }
        } finally {
            parked = null;
        }
        if (signaled) {
            signaled = false;
            return true;
        }
        return false;
    }

    @Override
    public void wakeup() {
        signal();
    }

    @Override
    public void close() {
        closed = true;
    }
}
