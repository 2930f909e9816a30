package org.nettyrdma.verbs.jni;

import io.netty.util.collection.LongObjectHashMap;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.VerbsException;

/**
 * The process's reader of the devices' asynchronous events ({@code ibv_get_async_event}): one daemon thread waits on
 * every device context's async fd, marks a completion queue that overran (its polls then answer -EOVERFLOW) and
 * acknowledges every event at once, so that destroying a CQ or QP never waits for an unacknowledged event. Device
 * contexts are process-wide in librdmacm, so this is too.
 */
final class JniAsyncEvents {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(JniAsyncEvents.class);
    private static final LongObjectHashMap<Boolean> watched = new LongObjectHashMap<>();
    private static int epfd = -1;

    private JniAsyncEvents() {
    }

    static synchronized void watch(long context) throws VerbsException {
        if (watched.containsKey(context)) {
            return;
        }
        if (epfd < 0) {
            int fd = Native.epollCreate();
            if (fd < 0) {
                throw new VerbsException("epoll_create", -fd, "asynchronous events");
            }
            epfd = fd;
            Thread thread = new Thread(() -> run(fd), "netty-rdma-async-events");
            thread.setDaemon(true);
            thread.start();
        }
        int rc = Native.asyncWatch(epfd, context);
        if (rc < 0) {
            throw new VerbsException("epoll_ctl", -rc, "asynchronous events of " + Native.deviceName(context));
        }
        watched.put(context, Boolean.TRUE);
    }

    private static void run(int fd) {
        for (;;) {
            int rc = Native.asyncDrain(fd, -1);
            if (rc < 0) {
                logger.warn("waiting for RDMA asynchronous events failed: {}; CQ overruns are no longer reported",
                        Errno.describe(rc));
                return;
            }
            if (rc > 0 && logger.isDebugEnabled()) {
                logger.debug("{} RDMA asynchronous event(s) handled", rc);
            }
        }
    }
}
