package org.nettyrdma.verbs.jni;

import io.netty.util.concurrent.DefaultThreadFactory;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

import java.util.concurrent.Executor;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * Where soft-iWARP's {@code rdma_connect} runs. siw connects the connection's TCP socket inside that call and blocks
 * until the peer answers or TCP gives up (the SYN retries: about two minutes against a host that never answers), so
 * an event loop that made the call could neither run its connect time-out nor anything else. Hardware iWARP devices
 * connect asynchronously and do not need this.
 *
 * <p>A close of the id ends the call early: {@link Native#interruptThread} sends the connecting thread a real-time
 * signal whose handler does nothing, which makes the kernel's wait for the TCP connection return EINTR.
 */
final class SiwConnects {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(SiwConnects.class);

    /** Daemon threads, created on demand, gone after 30 s idle. */
    static final Executor EXECUTOR = new ThreadPoolExecutor(0, Integer.MAX_VALUE, 30, TimeUnit.SECONDS,
            new SynchronousQueue<>(), new DefaultThreadFactory("netty-rdma-siw-connect", true));

    /** Whether the interrupting signal is installed. */
    static final boolean INTERRUPTIBLE;

    /** How long a close waits for an interrupted connect to return before leaving the destruction to its thread. */
    static final long INTERRUPT_WAIT_NANOS = TimeUnit.SECONDS.toNanos(1);

    /**
     * How long a disconnect or close waits for a connect whose outcome was reported (its thread is back from the
     * kernel, or about to be) to leave: only a thread that is not scheduled takes long.
     */
    static final long RETURN_WAIT_NANOS = TimeUnit.SECONDS.toNanos(30);

    static {
        int signal = Native.installInterruptSignal();
        INTERRUPTIBLE = signal > 0;
        if (INTERRUPTIBLE) {
            logger.debug("soft-iWARP connects are interrupted with signal {}", signal);
        } else {
            logger.warn("no free real-time signal to interrupt soft-iWARP connects with: closing a connecting channel "
                    + "leaves its queue pair until TCP gives up");
        }
    }

    private SiwConnects() {
    }
}
