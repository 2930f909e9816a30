package org.nettyrdma.verbs.jni;

import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;
import org.nettyrdma.verbs.CmEventChannel;
import org.nettyrdma.verbs.CmEventType;
import org.nettyrdma.verbs.CmId;
import org.nettyrdma.verbs.ConnectionParameters;
import org.nettyrdma.verbs.Device;
import org.nettyrdma.verbs.DeviceAttributes;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.QpInitAttributes;
import org.nettyrdma.verbs.QueuePair;
import org.nettyrdma.verbs.VerbsException;

import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;

/** {@code rdma_cm_id} of port space TCP. Results of the asynchronous verbs arrive on its event channel. */
final class JniCmId implements CmId {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(JniCmId.class);

    private final JniProvider provider;
    private final long handle;
    private JniCmEventChannel channel;
    private volatile Object context;
    private JniDevice device;
    private JniQueuePair qp;
    private boolean connected;
    /**
     * Set by {@link #close()}, under the monitor; read without it by {@link #onEvent}, so that the loop never waits
     * for a teardown thread that holds the monitor through the kernel's teardown.
     */
    private volatile boolean closed;
    /** A soft-iWARP rdma_connect runs on {@link #connectThread} (0 until it starts, or if it cannot be signalled). */
    private boolean connecting;
    /** While {@link #connecting}: the connect's outcome was reported by an event before its thread left. */
    private boolean answered;
    private long connectThread;
    /** A teardown (disconnect, QP and id destroyed) that takes longer is logged with where the time went. */
    static final long SLOW_TEARDOWN_NANOS = TimeUnit.MILLISECONDS.toNanos(500);

    /** close() could not end the connect: its thread destroys the id when rdma_connect returns. */
    private boolean closeDeferred;

    JniCmId(JniProvider provider, JniCmEventChannel channel, long handle, Object context) {
        this.provider = provider;
        this.channel = channel;
        this.handle = handle;
        this.context = context;
    }

    long handle() {
        return handle;
    }

    @Override
    public Object context() {
        return context;
    }

    @Override
    public void context(Object context) {
        this.context = context;
    }

    @Override
    public synchronized Device device() {
        if (device == null && !closed) {
            long verbs = Native.idVerbs(handle);
            if (verbs != 0) {
                try {
                    device = provider.deviceFor(verbs);
                } catch (VerbsException e) {
                    return null;
                }
            }
        }
        return device;
    }

    private void checkOpen(String verb) throws VerbsException {
        if (closed) {
            throw new VerbsException(verb, Errno.EBADF, "CM id closed");
        }
    }

    private static VerbsException failure(String verb, int rc, Object detail) {
        return new VerbsException(verb, -rc, detail == null ? null : detail.toString());
    }

    @Override
    public synchronized void bind(InetSocketAddress address) throws VerbsException {
        checkOpen("rdma_bind_addr");
        InetAddress ip = address.getAddress();
        if (ip == null) {
            throw new VerbsException("rdma_bind_addr", Errno.EADDRNOTAVAIL, "unresolved " + address);
        }
        int rc = Native.bindAddr(handle, ip.getAddress(), address.getPort(), scopeId(ip));
        if (rc == -Errno.ENODEV) {
            // the kernel says ENODEV when an interface has the address but no RDMA device is on it
            throw new VerbsException("rdma_bind_addr", Errno.EADDRNOTAVAIL, address + " is not an address of an "
                    + "RDMA device (ENODEV)");
        }
        if (rc < 0) {
            throw failure("rdma_bind_addr", rc, address);
        }
    }

    @Override
    public synchronized void listen(int backlog) throws VerbsException {
        checkOpen("rdma_listen");
        int rc = Native.listen(handle, backlog);
        if (rc < 0) {
            throw failure("rdma_listen", rc, localAddress());
        }
    }

    @Override
    public synchronized void resolveAddress(InetSocketAddress source, InetSocketAddress destination, int timeoutMs)
            throws VerbsException {
        checkOpen("rdma_resolve_addr");
        InetAddress dst = destination.getAddress();
        InetAddress src = source == null ? null : source.getAddress();
        if (dst == null || (source != null && src == null)) {
            throw new VerbsException("rdma_resolve_addr", Errno.EINVAL, "unresolved " + (dst == null ? destination
                    : source));
        }
        int rc = Native.resolveAddr(handle, src == null ? null : src.getAddress(), source == null ? 0
                : source.getPort(), src == null ? 0 : scopeId(src), dst.getAddress(), destination.getPort(),
                scopeId(dst), timeoutMs);
        if (rc < 0) {
            throw failure("rdma_resolve_addr", rc, destination);
        }
    }

    @Override
    public synchronized void resolveRoute(int timeoutMs) throws VerbsException {
        checkOpen("rdma_resolve_route");
        int rc = Native.resolveRoute(handle, timeoutMs);
        if (rc < 0) {
            throw failure("rdma_resolve_route", rc, remoteAddress());
        }
    }

    @Override
    public synchronized QueuePair createQp(ProtectionDomain pd, QpInitAttributes attributes) throws VerbsException {
        checkOpen("rdma_create_qp");
        JniDevice d = (JniDevice) device();
        if (d == null || qp != null) {
            throw new VerbsException("rdma_create_qp", Errno.EINVAL,
                    d == null ? "id has no device yet (resolve or bind first)" : "id already has a QP");
        }
        if (!(pd instanceof JniProtectionDomain) || ((JniProtectionDomain) pd).jniDevice() != d
                || !(attributes.sendCq() instanceof JniCompletionQueue)
                || !(attributes.recvCq() instanceof JniCompletionQueue)
                || ((JniCompletionQueue) attributes.sendCq()).jniDevice() != d
                || ((JniCompletionQueue) attributes.recvCq()).jniDevice() != d) {
            throw new VerbsException("rdma_create_qp", Errno.EINVAL,
                    "protection domain and completion queues must be of the id's device " + d.name());
        }
        if (attributes.srq() != null && !(attributes.srq() instanceof JniSharedReceiveQueue)) {
            throw new VerbsException("rdma_create_qp", Errno.EINVAL, "shared receive queue of another provider");
        }
        attributes.checkWithin(d.attributes(), pd);
        JniSharedReceiveQueue srq = (JniSharedReceiveQueue) attributes.srq();
        JniProtectionDomain jpd = (JniProtectionDomain) pd;
        JniCompletionQueue scq = (JniCompletionQueue) attributes.sendCq();
        JniCompletionQueue rcq = (JniCompletionQueue) attributes.recvCq();
        jpd.use("rdma_create_qp");
        if (srq != null) {
            try {
                srq.attach();
            } catch (VerbsException e) {
                jpd.release();
                throw e;
            }
        }
        int[] caps = new int[JniLayout.CAP_COUNT];
        long h = Native.createQp(handle, jpd.handle(), scq.handle(), rcq.handle(), srq == null ? 0 : srq.handle(),
                attributes.maxSendWr(), attributes.maxRecvWr(), attributes.maxSendSge(), attributes.maxRecvSge(),
                attributes.maxInlineData(), attributes.signalAll(), caps);
        if (h < 0) {
            if (srq != null) {
                srq.detach();
            }
            jpd.release();
            throw new VerbsException("rdma_create_qp", (int) -h, attributes + " on " + d.name());
        }
        QpInitAttributes granted = new QpInitAttributes(scq, rcq, caps[JniLayout.CAP_MAX_SEND_WR],
                caps[JniLayout.CAP_MAX_RECV_WR], caps[JniLayout.CAP_MAX_SEND_SGE], caps[JniLayout.CAP_MAX_RECV_SGE],
                caps[JniLayout.CAP_MAX_INLINE], attributes.signalAll(), srq);
        JniQueuePair created = new JniQueuePair(this, h, jpd, scq, rcq, granted, caps[JniLayout.CAP_QP_NUM]);
        try {
            scq.attach(created, "rdma_create_qp");
            try {
                rcq.attach(created, "rdma_create_qp");
            } catch (VerbsException e) {
                scq.detach(created);
                throw e;
            }
        } catch (VerbsException e) {
            Native.destroyQp(h);
            if (srq != null) {
                srq.detach();
            }
            jpd.release();
            throw e;
        }
        qp = created;
        return created;
    }

    @Override
    public synchronized QueuePair qp() {
        return qp;
    }

    synchronized void onQpClosed(JniQueuePair closedQp) {
        if (qp == closedQp) {
            qp = null;
        }
    }

    @Override
    public synchronized void connect(ConnectionParameters parameters) throws VerbsException {
        checkOpen("rdma_connect");
        if (qp == null) {
            throw new VerbsException("rdma_connect", Errno.EINVAL, "create the QP before connecting");
        }
        if (parameters.privateDataLength() > ConnectionParameters.MAX_CONNECT_PRIVATE_DATA) {
            throw new VerbsException("rdma_connect", Errno.EINVAL, parameters.privateDataLength()
                    + " bytes of private data, at most " + ConnectionParameters.MAX_CONNECT_PRIVATE_DATA);
        }
        byte[] data = parameters.privateData();
        int responderResources = u8(parameters.responderResources());
        int initiatorDepth = u8(parameters.initiatorDepth());
        int retries = retries(parameters.retryCount());
        int rnrRetries = retries(parameters.rnrRetryCount());
        JniDevice d = (JniDevice) device();
        if (d != null && d.isSoftIwarp()) {
            // siw connects its TCP socket inside rdma_connect, blocking: not on the caller's thread (an event loop)
            connecting = true;
            SiwConnects.EXECUTOR.execute(() -> connectOffThread(data, responderResources, initiatorDepth, retries,
                    rnrRetries));
            return;
        }
        int rc = Native.connect(handle, data, responderResources, initiatorDepth, retries, rnrRetries);
        if (rc < 0) {
            throw failure("rdma_connect", rc, remoteAddress());
        }
    }

    /** rdma_connect on a soft-iWARP id, on a thread of {@link SiwConnects}; {@link #close()} may end it early. */
    private void connectOffThread(byte[] data, int responderResources, int initiatorDepth, int retries,
                                  int rnrRetries) {
        synchronized (this) {
            if (closed) { // before this thread started: a close that waited too long left the destruction to it
                connectDone();
                destroyWhatCloseLeft();
                return;
            }
            connectThread = SiwConnects.INTERRUPTIBLE ? Native.interruptibleThread() : 0;
        }
        int rc = Native.connect(handle, data, responderResources, initiatorDepth, retries, rnrRetries);
        JniCmEventChannel events;
        synchronized (this) {
            connectDone();
            if (destroyWhatCloseLeft() || closed || rc == 0) {
                return;
            }
            events = channel;
        }
        // its TCP connect's refusal or time-out is the event that the SPI promises
        CmEventType type = rc == -Errno.ECONNREFUSED ? CmEventType.REJECTED
                : rc == -Errno.ETIMEDOUT || rc == -Errno.EHOSTUNREACH || rc == -Errno.ENETUNREACH
                ? CmEventType.UNREACHABLE : CmEventType.CONNECT_ERROR;
        events.post(type, this, rc);
    }

    /**
     * On a {@link SiwConnects} thread, once it no longer connects: destroys the QP if it was closed meanwhile, and the
     * id if its close was deferred to this thread. True if the id is destroyed.
     */
    private boolean destroyWhatCloseLeft() {
        if (qp != null) {
            qp.destroy(); // does nothing unless the QP was closed
        }
        if (!closeDeferred) {
            return false;
        }
        try {
            destroy();
        } catch (VerbsException e) {
            logger.warn("{}: destroying after the connect returned", this, e);
        }
        return true;
    }

    /**
     * Ends a soft-iWARP connect in progress (see {@link #awaitConnectReturn(boolean)}) before its QP or the id is
     * destroyed, which the kernel would make wait for the TCP handshake. False if it is still in progress.
     */
    synchronized boolean endConnect() {
        return !connecting || awaitConnectReturn(!answered);
    }

    private void connectDone() {
        connecting = false;
        answered = false;
        connectThread = 0;
        notifyAll();
    }

    /**
     * Waits for the rdma_connect on a {@link SiwConnects} thread to return. With {@code interrupt} (a connect still
     * under way) signals it until it does, to end it early, at most {@link SiwConnects#INTERRUPT_WAIT_NANOS}; without
     * (its outcome was reported: the thread is back from the kernel, or about to be) waits for it, at most
     * {@link SiwConnects#RETURN_WAIT_NANOS}. False if it is still inside (no signal could be installed, or the kernel
     * did not let go, or the thread did not run).
     */
    private boolean awaitConnectReturn(boolean interrupt) {
        long deadline = System.nanoTime()
                + (interrupt ? SiwConnects.INTERRUPT_WAIT_NANOS : SiwConnects.RETURN_WAIT_NANOS);
        boolean interrupted = false;
        try {
            while (connecting) {
                long left = deadline - System.nanoTime();
                if (left <= 0 || interrupt && !SiwConnects.INTERRUPTIBLE) {
                    return false;
                }
                if (interrupt && connectThread != 0) {
                    Native.interruptThread(connectThread);
                }
                try {
                    wait(Math.max(1, Math.min(10, TimeUnit.NANOSECONDS.toMillis(left))));
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
            return true;
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    @Override
    public synchronized void accept(ConnectionParameters parameters) throws VerbsException {
        checkOpen("rdma_accept");
        if (qp == null) {
            throw new VerbsException("rdma_accept", Errno.EINVAL, "create the QP before accepting");
        }
        if (parameters.privateDataLength() > ConnectionParameters.MAX_ACCEPT_PRIVATE_DATA) {
            throw new VerbsException("rdma_accept", Errno.EINVAL, parameters.privateDataLength()
                    + " bytes of private data, at most " + ConnectionParameters.MAX_ACCEPT_PRIVATE_DATA);
        }
        int rc = Native.accept(handle, parameters.privateData(), u8(parameters.responderResources()),
                u8(parameters.initiatorDepth()), retries(parameters.retryCount()),
                retries(parameters.rnrRetryCount()));
        if (rc < 0) {
            throw failure("rdma_accept", rc, remoteAddress());
        }
        connected = true;
        qp.connected();
    }

    @Override
    public synchronized void reject(byte[] privateData) throws VerbsException {
        checkOpen("rdma_reject");
        byte[] data = privateData == null ? new byte[0] : privateData;
        if (data.length > ConnectionParameters.MAX_REJECT_PRIVATE_DATA) {
            throw new VerbsException("rdma_reject", Errno.EINVAL, data.length
                    + " bytes of private data, at most " + ConnectionParameters.MAX_REJECT_PRIVATE_DATA);
        }
        int rc = Native.reject(handle, data);
        if (rc < 0) {
            throw failure("rdma_reject", rc, remoteAddress());
        }
    }

    @Override
    public synchronized void disconnect() throws VerbsException {
        checkOpen("rdma_disconnect");
        if (connecting && answered) {
            // ESTABLISHED came before the thread in rdma_connect ran again (it has returned, or is about to): wait
            if (!awaitConnectReturn(false)) {
                throw new VerbsException("rdma_disconnect", Errno.EBUSY, "soft-iWARP's connect thread did not leave "
                        + "rdma_connect within " + TimeUnit.NANOSECONDS.toSeconds(SiwConnects.RETURN_WAIT_NANOS)
                        + " s of the connect's event");
            }
            checkOpen("rdma_disconnect"); // closed by another thread meanwhile (the wait let go of this monitor)
        }
        if (connecting) {
            // the kernel would wait for the connect's TCP handshake; there is no connection yet: close ends the connect
            throw new VerbsException("rdma_disconnect", Errno.EINVAL,
                    "not connected yet (soft-iWARP connect under way)");
        }
        int rc = Native.disconnect(handle);
        if (rc < 0) {
            throw failure("rdma_disconnect", rc, remoteAddress());
        }
        connected = false;
        if (qp != null) {
            qp.flush(); // iWARP's rdma_disconnect only drains the QP (SQD); the SPI flushes it, as IB's does
        }
    }

    /**
     * State the SPI needs from the events: a connection that is established may send. On iWARP a connection that
     * closed (the peer disconnected, or terminated it for want of a receive) leaves the QP in ERROR, which siw's
     * {@code ibv_query_qp} does not say: the QP learns it here, and is flushed.
     */
    void onEvent(CmEventType type) {
        if (closed) {
            // closing or closed: nothing here matters any more, and a teardown thread holds the monitor through the
            // kernel calls of close() (rdma_disconnect, rdma_destroy_id): the loop polling the events must not wait
            return;
        }
        synchronized (this) {
            onEventLocked(type);
        }
    }

    private void onEventLocked(CmEventType type) {
        if (connecting && (type == CmEventType.ESTABLISHED || type == CmEventType.REJECTED
                || type == CmEventType.UNREACHABLE || type == CmEventType.CONNECT_ERROR)) {
            answered = true; // the kernel's part of the connect is over
        }
        if (type == CmEventType.ESTABLISHED) {
            connected = true;
            if (qp != null) {
                qp.connected();
            }
        } else if (type == CmEventType.DISCONNECTED) {
            connected = false;
            if (qp != null && device != null && device.attributes().transport() == DeviceAttributes.Transport.IWARP) {
                qp.failed();
            }
        }
    }

    @Override
    public synchronized void migrate(CmEventChannel newChannel) throws VerbsException {
        if (!(newChannel instanceof JniCmEventChannel)) {
            throw new VerbsException("rdma_migrate_id", Errno.EINVAL, "event channel of another provider");
        }
        checkOpen("rdma_migrate_id");
        JniCmEventChannel target = (JniCmEventChannel) newChannel;
        target.attach("rdma_migrate_id");
        int rc = Native.migrateId(handle, target.handle());
        if (rc < 0) {
            target.detach();
            throw failure("rdma_migrate_id", rc, null);
        }
        channel.detach();
        channel = target;
    }

    @Override
    public synchronized InetSocketAddress localAddress() {
        return address(true);
    }

    @Override
    public synchronized InetSocketAddress remoteAddress() {
        return address(false);
    }

    private InetSocketAddress address(boolean local) {
        if (closed) {
            return null;
        }
        byte[] raw = new byte[JniLayout.ADDRESS_BYTES];
        int version = Native.idAddress(handle, local, raw);
        if (version == 0) {
            return null;
        }
        int port = (raw[0] & 0xff) << 8 | (raw[1] & 0xff);
        try {
            if (version == 4) {
                return new InetSocketAddress(InetAddress.getByAddress(Arrays.copyOfRange(raw, 2, 6)), port);
            }
            int scope = ByteBuffer.wrap(raw, 18, 4).order(ByteOrder.nativeOrder()).getInt();
            byte[] ip = Arrays.copyOfRange(raw, 2, 18);
            InetAddress address = scope != 0 ? Inet6Address.getByAddress(null, ip, scope)
                    : InetAddress.getByAddress(ip);
            return new InetSocketAddress(address, port);
        } catch (UnknownHostException e) {
            return null; // not for 4 or 16 bytes
        }
    }

    private static int scopeId(InetAddress ip) {
        return ip instanceof Inet6Address ? ((Inet6Address) ip).getScopeId() : 0;
    }

    private static int u8(int value) {
        return Math.max(0, Math.min(255, value));
    }

    private static int retries(int value) {
        return Math.max(0, Math.min(7, value));
    }

    /**
     * Destroys the QP (disconnecting first if connected) and the id. Idempotent. A soft-iWARP connect in progress is
     * ended first; should it not end, its thread destroys them once rdma_connect returns (the QP then still counts
     * as a user of its PD and CQs until then).
     */
    @Override
    public synchronized void close() throws VerbsException {
        if (closed) {
            return;
        }
        closed = true;
        provider.forget(this); // its later events are dropped: they no longer reach onEvent's monitor
        long waited = answered ? SiwConnects.RETURN_WAIT_NANOS : SiwConnects.INTERRUPT_WAIT_NANOS;
        if (!endConnect()) {
            closeDeferred = true;
            logger.warn("{}: soft-iWARP's rdma_connect did not return within {} ms of close: the id and its QP are "
                    + "destroyed when it does", this, TimeUnit.NANOSECONDS.toMillis(waited));
            return;
        }
        destroy();
    }

    private void destroy() throws VerbsException {
        closeDeferred = false;
        long start = System.nanoTime();
        if (connected) {
            Native.disconnect(handle); // the peer gets DISCONNECTED
            connected = false;
        }
        long disconnected = System.nanoTime();
        JniQueuePair q = qp;
        if (q != null) {
            q.close();
            q.destroy();
        }
        long qpDestroyed = System.nanoTime();
        int rc = Native.destroyId(handle);
        long end = System.nanoTime();
        if (end - start > SLOW_TEARDOWN_NANOS) {
            // the calling thread (a teardown thread, or a loop for one never connected) waited that long in the kernel
            logger.warn("{}: tearing the connection down took {} ms: rdma_disconnect {} ms, the QP {} ms, "
                    + "rdma_destroy_id {} ms", this, millis(end - start), millis(disconnected - start),
                    millis(qpDestroyed - disconnected), millis(end - qpDestroyed));
        }
        channel.detach();
        if (rc < 0) {
            throw failure("rdma_destroy_id", rc, null);
        }
    }

    static long millis(long nanos) {
        return TimeUnit.NANOSECONDS.toMillis(nanos);
    }

    @Override
    public String toString() {
        return "cm id " + (closed ? "(closed)" : localAddress() + " -> " + remoteAddress());
    }
}
