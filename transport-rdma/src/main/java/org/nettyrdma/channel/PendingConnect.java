package org.nettyrdma.channel;

import io.netty.channel.ChannelPromise;
import io.netty.channel.EventLoop;
import io.netty.util.concurrent.Future;
import org.nettyrdma.verbs.CmEvent;
import org.nettyrdma.verbs.CmEventType;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.VerbsException;

import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;

/**
 * A client channel's connect under way (resolve the address, then the route, then connect until ESTABLISHED): its
 * promise, its time-out, its target, and what each RDMA CM failure means for it. Event loop only.
 */
final class PendingConnect {
    /**
     * Connects again on a fresh CM id after a port in use or a broken MPA exchange, at most this many times (iWARP; see
     * {@link #retryOnFreshId}).
     */
    static final int FRESH_ID_RETRIES = 3;

    final ChannelPromise promise;
    final InetSocketAddress remote;
    /** The local address asked for, or null. */
    final InetSocketAddress local;
    private Future<?> timeout;
    private int retries;

    PendingConnect(ChannelPromise promise, InetSocketAddress remote, InetSocketAddress local) {
        this.promise = promise;
        this.remote = remote;
        this.local = local;
    }

    /**
     * Whether {@code event} ends this connect for a reason of iWARP's that connecting again on a fresh CM id (another
     * local port) may well not meet; counts the retry. iWARP's connection is a TCP connection of the host: the local
     * port RDMA CM picked may be held by a TCP socket (-EADDRINUSE), and the MPA exchange on it may break before the
     * connection is up (-EINVAL: soft-iWARP reports so when reading the MPA reply fails, found more bytes than the
     * reply, none, or a reset; seen once in CI, with no byte of the application's sent). Not when the application
     * chose the local port: another attempt would take the same.
     */
    boolean retryOnFreshId(CmEvent event, boolean iwarp) {
        if (event.type() != CmEventType.CONNECT_ERROR || (local != null && local.getPort() != 0)
                || retries == FRESH_ID_RETRIES) {
            return false;
        }
        if (event.status() != -Errno.EADDRINUSE && !(iwarp && event.status() == -Errno.EINVAL)) {
            return false;
        }
        retries++;
        return true;
    }

    /** Runs {@code onTimeout} after {@code millis} (none if 0) unless the connect ended before. */
    void scheduleTimeout(EventLoop loop, int millis, Runnable onTimeout) {
        if (millis > 0) {
            timeout = loop.schedule(onTimeout, millis, TimeUnit.MILLISECONDS);
        }
    }

    /** The connect ended (either way): no time-out any more. */
    void end() {
        if (timeout != null) {
            timeout.cancel(false);
            timeout = null;
        }
    }

    /** A verbs failure as a {@link ConnectException}, as a socket connect reports it. */
    static Throwable asConnectException(Throwable t) {
        if (t instanceof VerbsException) {
            ConnectException e = new ConnectException(t.getMessage());
            e.initCause(t);
            return e;
        }
        return t;
    }

    /** What an RDMA CM event that ends a connect to {@code remote} says; {@code null} if {@code event} ends none. */
    static ConnectException failure(CmEvent event, InetSocketAddress remote) {
        switch (event.type()) {
            case REJECTED: {
                String reason = RdmaProtocol.rejectMessage(event.privateData(), event.privateDataLength());
                return new ConnectException(reason != null ? "connection rejected by the peer: " + reason
                        : "Connection refused");
            }
            case UNREACHABLE:
                return new ConnectException("no answer from the peer (RDMA CM status " + status(event) + ')');
            case CONNECT_ERROR:
                if (event.status() == -Errno.EADDRINUSE) {
                    // iWARP runs over the host's TCP: the port RDMA CM picked for this side is held by a TCP socket
                    // (one in TIME_WAIT from an earlier connection, or a listener)
                    return new ConnectException("RDMA CM CONNECT_ERROR connecting to " + remote + ": the local port "
                            + "chosen is in use by a TCP socket (status " + status(event) + "; on iWARP the connection"
                            + " is a TCP connection of the host; the transport tried " + (FRESH_ID_RETRIES + 1)
                            + " ports unless the local port was given); connect again, which picks another port");
                }
                return new ConnectException("RDMA CM CONNECT_ERROR connecting to " + remote + ": the connection "
                        + "exchange with the peer failed (status " + status(event) + "; on iWARP, the MPA exchange on "
                        + "the TCP connection, which the transport tried " + (FRESH_ID_RETRIES + 1) + " times unless "
                        + "the local port was given)");
            case ADDR_ERROR:
            case ROUTE_ERROR:
                return new ConnectException("RDMA CM " + event.type() + ": no RDMA route to " + remote + " (status "
                        + status(event) + ')');
            default:
                return null;
        }
    }

    private static String status(CmEvent event) {
        return event.status() + (event.status() < 0 ? ", " + Errno.describe(event.status()) : "");
    }
}
