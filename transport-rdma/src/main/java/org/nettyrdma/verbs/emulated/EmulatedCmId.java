package org.nettyrdma.verbs.emulated;

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

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.Arrays;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * An RDMA CM id on the emulated fabric. State changes happen under the fabric's monitor; events go to the id's
 * channel as RDMA CM would send them, including the IB/RoCE habit of zero-padding private data to the CM message's
 * fixed size and the reject reasons of each transport.
 */
final class EmulatedCmId implements CmId {
    /** IB CM reject reason: nobody listens on that service id (port). */
    static final int IB_REJ_INVALID_SERVICE_ID = 8;
    /** IB CM reject reason: the application rejected. */
    static final int IB_REJ_CONSUMER_DEFINED = 28;

    private enum State { IDLE, BOUND, LISTENING, ADDR_RESOLVED, ROUTE_RESOLVED, CONNECTING, CONNECT_REQUEST,
        CONNECTED, DISCONNECTED, CLOSED }

    private final EmulatedFabric fabric;
    private volatile EmulatedCmEventChannel channel;
    private volatile Object context;
    private State state = State.IDLE;
    private EmulatedDevice device;
    private InetSocketAddress bound;
    private InetSocketAddress local;
    private InetSocketAddress remote;
    private EmulatedQueuePair qp;
    private EmulatedCmId peer;
    private ConnectionParameters connectParameters;
    private boolean disconnectReported;
    private ScheduledFuture<?> connectTimeout;

    EmulatedCmId(EmulatedFabric fabric, EmulatedCmEventChannel channel, Object context) throws VerbsException {
        this.fabric = fabric;
        this.channel = channel;
        this.context = context;
        channel.attach();
    }

    private EmulatedCmId(EmulatedCmId listener, EmulatedCmId active, EmulatedDevice device,
                         InetSocketAddress local) throws VerbsException {
        this(listener.fabric, listener.channel, listener.context);
        this.device = device;
        this.local = local;
        this.remote = active.local;
        this.peer = active;
        this.state = State.CONNECT_REQUEST;
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
    public Device device() {
        synchronized (fabric) {
            return device;
        }
    }

    InetSocketAddress boundAddress() {
        return bound;
    }

    boolean isListening() {
        return state == State.LISTENING;
    }

    private boolean isIwarp() {
        return device != null && device.attributes().transport() == DeviceAttributes.Transport.IWARP;
    }

    private void post(CmEventType type, EmulatedCmId listenId, int status, byte[] data) {
        channel.post(type, this, listenId, status, data, null);
    }

    /** Private data as the fabric delivers it: IB/RoCE pad to the CM message's size, iWARP sends it as it is. */
    private byte[] onWire(byte[] data, int messageSize) {
        return isIwarp() ? data : Arrays.copyOf(data, messageSize);
    }

    private VerbsException invalid(String verb) {
        return new VerbsException(verb, Errno.EINVAL, "id is " + state.name().toLowerCase());
    }

    @Override
    public void bind(InetSocketAddress address) throws VerbsException {
        synchronized (fabric) {
            if (state != State.IDLE) {
                throw invalid("rdma_bind_addr");
            }
            InetAddress ip = address.getAddress();
            EmulatedDevice d = null;
            if (ip == null || (!ip.isAnyLocalAddress() && (d = fabric.deviceFor(ip)) == null)) {
                throw new VerbsException("rdma_bind_addr", Errno.EADDRNOTAVAIL,
                        address + " is not an address of an RDMA device");
            }
            bound = fabric.bindLocked(this, address);
            local = bound;
            device = d;
            state = State.BOUND;
        }
    }

    @Override
    public void listen(int backlog) throws VerbsException {
        synchronized (fabric) {
            if (state == State.IDLE) {
                bound = fabric.bindLocked(this, new InetSocketAddress(0));
                local = bound;
                state = State.BOUND;
            }
            if (state != State.BOUND) {
                throw invalid("rdma_listen");
            }
            if ((fabric.listenerLocked(bound) != null && fabric.listenerLocked(bound) != this)
                    || fabric.takeListenPortInUse(bound.getAddress())) {
                throw new VerbsException("rdma_listen", Errno.EADDRINUSE, bound.toString());
            }
            state = State.LISTENING;
        }
    }

    @Override
    public void resolveAddress(InetSocketAddress source, InetSocketAddress destination, int timeoutMs)
            throws VerbsException {
        synchronized (fabric) {
            if (state != State.IDLE && state != State.BOUND) {
                throw invalid("rdma_resolve_addr");
            }
            InetAddress ip = destination.getAddress();
            if (ip == null) {
                throw new VerbsException("rdma_resolve_addr", Errno.EINVAL, "unresolved " + destination);
            }
            EmulatedDevice d = fabric.deviceFor(ip);
            boolean blackhole = d == null && fabric.isBlackhole(ip);
            if (blackhole) {
                d = fabric.anyDevice(ip);
            }
            if (d == null) {
                post(CmEventType.ADDR_ERROR, null, -Errno.EHOSTUNREACH, null);
                return;
            }
            if (source != null && state == State.IDLE) {
                bind(source);
            }
            if (state == State.IDLE) {
                InetAddress localIp = blackhole ? d.addressOfFamily(ip) : ip;
                bound = fabric.bindLocked(this, new InetSocketAddress(localIp, 0));
                local = bound;
            }
            device = d;
            remote = destination;
            state = State.ADDR_RESOLVED;
            post(CmEventType.ADDR_RESOLVED, null, 0, null);
        }
    }

    @Override
    public void resolveRoute(int timeoutMs) throws VerbsException {
        synchronized (fabric) {
            if (state != State.ADDR_RESOLVED) {
                throw invalid("rdma_resolve_route");
            }
            state = State.ROUTE_RESOLVED;
            post(CmEventType.ROUTE_RESOLVED, null, 0, null);
        }
    }

    @Override
    public QueuePair createQp(ProtectionDomain pd, QpInitAttributes attributes) throws VerbsException {
        synchronized (fabric) {
            if (device == null || qp != null || state == State.CLOSED) {
                throw new VerbsException("rdma_create_qp", Errno.EINVAL,
                        device == null ? "id has no device yet (resolve or bind first)" : "id already has a QP");
            }
            if (!(pd instanceof EmulatedProtectionDomain) || ((EmulatedProtectionDomain) pd).device() != device
                    || !(attributes.sendCq() instanceof EmulatedCompletionQueue)
                    || !(attributes.recvCq() instanceof EmulatedCompletionQueue)
                    || attributes.sendCq().device() != device || attributes.recvCq().device() != device) {
                throw new VerbsException("rdma_create_qp", Errno.EINVAL,
                        "protection domain and completion queues must be of the id's device " + device.name());
            }
            if (attributes.srq() != null && !(attributes.srq() instanceof EmulatedSharedReceiveQueue)) {
                throw new VerbsException("rdma_create_qp", Errno.EINVAL, "shared receive queue of another provider");
            }
            attributes.checkWithin(device.attributes(), pd);
            EmulatedProtectionDomain epd = (EmulatedProtectionDomain) pd;
            EmulatedCompletionQueue scq = (EmulatedCompletionQueue) attributes.sendCq();
            EmulatedCompletionQueue rcq = (EmulatedCompletionQueue) attributes.recvCq();
            EmulatedSharedReceiveQueue srq = (EmulatedSharedReceiveQueue) attributes.srq();
            device.reserveQp();
            try {
                epd.use();
                try {
                    scq.attach();
                    try {
                        rcq.attach();
                        if (srq != null) {
                            try {
                                srq.attach();
                            } catch (VerbsException e) {
                                rcq.detach();
                                throw e;
                            }
                        }
                    } catch (VerbsException e) {
                        scq.detach();
                        throw e;
                    }
                } catch (VerbsException e) {
                    epd.release();
                    throw e;
                }
            } catch (VerbsException e) {
                device.releaseQp();
                throw e;
            }
            qp = new EmulatedQueuePair(device, epd, attributes);
            return qp;
        }
    }

    @Override
    public QueuePair qp() {
        synchronized (fabric) {
            return qp;
        }
    }

    @Override
    public void connect(ConnectionParameters parameters) throws VerbsException {
        synchronized (fabric) {
            if (state != State.ROUTE_RESOLVED) {
                throw invalid("rdma_connect");
            }
            if (qp == null) {
                throw new VerbsException("rdma_connect", Errno.EINVAL, "create the QP before connecting");
            }
            if (parameters.privateDataLength() > ConnectionParameters.MAX_CONNECT_PRIVATE_DATA) {
                throw new VerbsException("rdma_connect", Errno.EINVAL, parameters.privateDataLength()
                        + " bytes of private data, at most " + ConnectionParameters.MAX_CONNECT_PRIVATE_DATA);
            }
            connectParameters = parameters;
            state = State.CONNECTING;
            connectTimeout = fabric.schedule(this::onConnectTimeout,
                    TimeUnit.MILLISECONDS.toNanos(fabric.cmResponseTimeoutMillis()));
            if (fabric.isBlackhole(remote.getAddress())) {
                return;
            }
            int failure = fabric.takeConnectFailure(remote);
            if (failure != 0) {
                state = State.DISCONNECTED;
                cancelConnectTimeout();
                post(CmEventType.CONNECT_ERROR, null, failure, null);
                return;
            }
            EmulatedCmId listener = fabric.listenerLocked(remote);
            if (listener == null) {
                state = State.DISCONNECTED;
                cancelConnectTimeout();
                post(CmEventType.REJECTED, null, isIwarp() ? -Errno.ECONNREFUSED : IB_REJ_INVALID_SERVICE_ID, null);
                return;
            }
            EmulatedCmId incoming = new EmulatedCmId(listener, this, fabric.deviceFor(remote.getAddress()), remote);
            peer = incoming;
            incoming.post(CmEventType.CONNECT_REQUEST, listener, 0,
                    onWire(parameters.privateData(), ConnectionParameters.MAX_CONNECT_PRIVATE_DATA));
        }
    }

    private void onConnectTimeout() {
        synchronized (fabric) {
            if (state == State.CONNECTING) {
                state = State.DISCONNECTED;
                if (peer != null) {
                    peer.peer = null;
                    peer = null;
                }
                post(CmEventType.UNREACHABLE, null, -Errno.ETIMEDOUT, null);
            }
        }
    }

    private void cancelConnectTimeout() {
        if (connectTimeout != null) {
            connectTimeout.cancel(false);
            connectTimeout = null;
        }
    }

    @Override
    public void accept(ConnectionParameters parameters) throws VerbsException {
        synchronized (fabric) {
            if (state != State.CONNECT_REQUEST) {
                throw invalid("rdma_accept");
            }
            if (qp == null) {
                throw new VerbsException("rdma_accept", Errno.EINVAL, "create the QP before accepting");
            }
            if (parameters.privateDataLength() > ConnectionParameters.MAX_ACCEPT_PRIVATE_DATA) {
                throw new VerbsException("rdma_accept", Errno.EINVAL, parameters.privateDataLength()
                        + " bytes of private data, at most " + ConnectionParameters.MAX_ACCEPT_PRIVATE_DATA);
            }
            EmulatedCmId active = peer;
            if (active == null || active.state != State.CONNECTING || active.qp == null) {
                state = State.DISCONNECTED;
                throw new VerbsException("rdma_accept", Errno.ECONNABORTED, "the connecting side went away");
            }
            EmulatedQueuePair.connect(active.qp, active.connectParameters.rnrRetryCount(), qp,
                    parameters.rnrRetryCount());
            if (fabric.holdsFirstArrival()) {
                qp.holdFirstArrival();
            }
            active.cancelConnectTimeout();
            active.state = State.CONNECTED;
            state = State.CONNECTED;
            // as on InfiniBand and RoCE, the accepting side's ESTABLISHED follows the connecting side's: the RTU leaves
            // when librdmacm hands the connecting side its event (soft-iWARP reports it at once on the accepting side;
            // the transport does not rely on it there)
            active.channel.post(CmEventType.ESTABLISHED, active, null, 0,
                    onWire(parameters.privateData(), ConnectionParameters.MAX_ACCEPT_PRIVATE_DATA),
                    this::peerEstablished);
        }
    }

    /** The connecting side took its ESTABLISHED: this accepted id gets its own, if it is still connected. */
    private void peerEstablished() {
        synchronized (fabric) {
            if (state == State.CONNECTED) {
                post(CmEventType.ESTABLISHED, null, 0, null);
            }
        }
    }

    @Override
    public void reject(byte[] privateData) throws VerbsException {
        byte[] data = privateData == null ? new byte[0] : privateData.clone();
        synchronized (fabric) {
            if (state != State.CONNECT_REQUEST) {
                throw invalid("rdma_reject");
            }
            if (data.length > ConnectionParameters.MAX_REJECT_PRIVATE_DATA) {
                throw new VerbsException("rdma_reject", Errno.EINVAL, data.length
                        + " bytes of private data, at most " + ConnectionParameters.MAX_REJECT_PRIVATE_DATA);
            }
            state = State.DISCONNECTED;
            EmulatedCmId active = peer;
            peer = null;
            if (active != null && active.state == State.CONNECTING) {
                active.state = State.DISCONNECTED;
                active.peer = null;
                active.cancelConnectTimeout();
                active.post(CmEventType.REJECTED, null, isIwarp() ? -Errno.ECONNREFUSED : IB_REJ_CONSUMER_DEFINED,
                        onWire(data, ConnectionParameters.MAX_REJECT_PRIVATE_DATA));
            }
        }
    }

    @Override
    public void disconnect() throws VerbsException {
        synchronized (fabric) {
            if (state != State.CONNECTED && state != State.DISCONNECTED) {
                throw invalid("rdma_disconnect");
            }
            disconnectLocked();
        }
    }

    private void disconnectLocked() {
        if (qp != null) {
            qp.moveToError();
        }
        state = State.DISCONNECTED;
        if (qp != null && qp.isLinkCut()) {
            // the disconnect request reaches nobody: the peer hears nothing, and this side learns of the end only when
            // the CM gives up waiting for an answer (as IB CM's DREQ time-out)
            fabric.schedule(() -> {
                synchronized (fabric) {
                    reportDisconnect();
                }
            }, TimeUnit.MILLISECONDS.toNanos(fabric.cmResponseTimeoutMillis()));
            return;
        }
        reportDisconnect();
        if (peer != null) {
            peer.reportDisconnect();
        }
    }

    private void reportDisconnect() {
        if (!disconnectReported && state != State.CLOSED) {
            disconnectReported = true;
            if (state == State.CONNECTED) {
                state = State.DISCONNECTED;
            }
            post(CmEventType.DISCONNECTED, null, 0, null);
        }
    }

    @Override
    public void migrate(CmEventChannel newChannel) throws VerbsException {
        if (!(newChannel instanceof EmulatedCmEventChannel)) {
            throw new VerbsException("rdma_migrate_id", Errno.EINVAL, "event channel of another provider");
        }
        EmulatedCmEventChannel target = (EmulatedCmEventChannel) newChannel;
        synchronized (fabric) {
            if (state == State.CLOSED) {
                throw invalid("rdma_migrate_id");
            }
            target.attach();
            channel.detach();
            channel = target;
        }
    }

    @Override
    public InetSocketAddress localAddress() {
        synchronized (fabric) {
            return local;
        }
    }

    @Override
    public InetSocketAddress remoteAddress() {
        synchronized (fabric) {
            return remote;
        }
    }

    @Override
    public void close() throws VerbsException {
        synchronized (fabric) {
            if (state == State.CLOSED) {
                return;
            }
            if (state == State.CONNECTED) {
                disconnectLocked();
            } else if (state == State.CONNECTING) {
                cancelConnectTimeout();
            }
            if (peer != null && peer.peer == this) {
                peer.peer = null;
            }
            peer = null;
            if (qp != null) {
                qp.close();
                qp = null;
            }
            fabric.unbindLocked(this);
            state = State.CLOSED;
            channel.detach();
        }
    }

    @Override
    public String toString() {
        return "cm id " + local + " -> " + remote + " (" + state + ')';
    }
}
