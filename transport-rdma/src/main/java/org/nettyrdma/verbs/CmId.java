package org.nettyrdma.verbs;

import java.net.InetSocketAddress;

/**
 * {@code rdma_cm_id}: one end of a connection or a listener. Results of {@code resolveAddress}, {@code resolveRoute},
 * {@code connect} and {@code disconnect} arrive as events on the id's channel. Ids of incoming connections are created
 * by the provider and delivered with CONNECT_REQUEST, reporting to the listener's channel.
 */
public interface CmId extends AutoCloseable {

    /** The object given at creation (for incoming ids: the listener's). */
    Object context();

    void context(Object context);

    /** The device the id is bound to: after a bind to a device's address, address resolution, or a connect request. */
    Device device();

    /** {@code rdma_bind_addr}; port 0 picks a free port. EADDRINUSE if taken, EADDRNOTAVAIL if no device has the IP. */
    void bind(InetSocketAddress address) throws VerbsException;

    /** {@code rdma_listen}. */
    void listen(int backlog) throws VerbsException;

    /** {@code rdma_resolve_addr}: ADDR_RESOLVED or ADDR_ERROR follows. {@code source} may be null. */
    void resolveAddress(InetSocketAddress source, InetSocketAddress destination, int timeoutMs) throws VerbsException;

    /** {@code rdma_resolve_route}: ROUTE_RESOLVED or ROUTE_ERROR follows. */
    void resolveRoute(int timeoutMs) throws VerbsException;

    /** {@code rdma_create_qp}: the id's RC queue pair, on the id's device; limits over the device's fail with EINVAL. */
    QueuePair createQp(ProtectionDomain pd, QpInitAttributes attributes) throws VerbsException;

    /** The QP created on this id, or null. */
    QueuePair qp();

    /** {@code rdma_connect}: ESTABLISHED, REJECTED, UNREACHABLE or CONNECT_ERROR follows. */
    void connect(ConnectionParameters parameters) throws VerbsException;

    /** {@code rdma_accept} of an incoming id: ESTABLISHED follows on both sides. */
    void accept(ConnectionParameters parameters) throws VerbsException;

    /** {@code rdma_reject} of an incoming id, with private data the connecting side receives with REJECTED. */
    void reject(byte[] privateData) throws VerbsException;

    /** {@code rdma_disconnect}: the QP goes to ERROR (flushing), both sides get DISCONNECTED once. */
    void disconnect() throws VerbsException;

    /** {@code rdma_migrate_id}: future events of this id go to {@code channel}. */
    void migrate(CmEventChannel channel) throws VerbsException;

    InetSocketAddress localAddress();

    InetSocketAddress remoteAddress();

    /** {@code rdma_destroy_id} (destroying its QP first if still there); a connected peer gets DISCONNECTED. */
    @Override
    void close() throws VerbsException;
}
