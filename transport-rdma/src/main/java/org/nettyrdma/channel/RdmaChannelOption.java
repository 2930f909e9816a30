package org.nettyrdma.channel;

import io.netty.channel.ChannelOption;

/** Options of RDMA channels beyond Netty's own; each is documented in docs/configuration.md. */
public final class RdmaChannelOption<T> extends ChannelOption<T> {
    /** Bytes per receive buffer, header included: the largest message a peer sends us (default 16384). */
    public static final ChannelOption<Integer> RECEIVE_BUFFER_SIZE = valueOf(RdmaChannelOption.class,
            "RECEIVE_BUFFER_SIZE");
    /** Receive buffers posted per connection: the credits the peer starts with (default 16). */
    public static final ChannelOption<Integer> RECEIVE_BUFFER_COUNT = valueOf(RdmaChannelOption.class,
            "RECEIVE_BUFFER_COUNT");
    /** Registered buffers shorter than this are copied into the send staging memory anyway (default 1024). */
    public static final ChannelOption<Integer> ZERO_COPY_THRESHOLD = valueOf(RdmaChannelOption.class,
            "ZERO_COPY_THRESHOLD");
    /** How long an orderly close may wait for the peer to take the last data before it disconnects (default 10 s). */
    public static final ChannelOption<Integer> CLOSE_TIMEOUT_MILLIS = valueOf(RdmaChannelOption.class,
            "CLOSE_TIMEOUT_MILLIS");

    /**
     * Bytes of receive buffers a channel lends to its pipeline (no copy) at most; past it, received bytes are copied
     * into buffers of the channel's allocator (default 4 MiB).
     */
    public static final ChannelOption<Integer> MAX_LENT_RECEIVE_BYTES = valueOf(RdmaChannelOption.class,
            "MAX_LENT_RECEIVE_BYTES");

    /**
     * Whether this side offers protocol v2's RDMA WRITE ring in its handshake (used when the peer offers it too, and the
     * device has memory windows and immediate data; else protocol v1's SENDs). Default off, or the system property
     * {@code org.nettyrdma.writeRing}; docs/protocol.md and docs/performance.md say why.
     */
    public static final ChannelOption<Boolean> WRITE_RING = valueOf(RdmaChannelOption.class, "WRITE_RING");
    /** Bytes of the receive ring a connection exposes to its peer when the WRITE ring is used (default 1 MiB). */
    public static final ChannelOption<Integer> RING_SIZE = valueOf(RdmaChannelOption.class, "RING_SIZE");

    /**
     * Whether this side offers protocol v2's READ rendezvous in its handshake (used when the peer offers it too, and the
     * device has type-2 memory windows and SEND_WITH_INV; never on iWARP): a registered buffer of at least
     * {@link #RENDEZVOUS_THRESHOLD} bytes, alone in its region, is announced to the peer, which READs it straight into
     * buffers of its own allocator. Default off, or the system property {@code org.nettyrdma.rendezvous};
     * docs/protocol.md, "The READ rendezvous".
     */
    public static final ChannelOption<Boolean> RENDEZVOUS = valueOf(RdmaChannelOption.class, "RENDEZVOUS");
    /**
     * Readable bytes a buffer needs at least to go by READ rendezvous (default 1 MiB, or the system property
     * {@code org.nettyrdma.rendezvousThreshold}); only buffers alone in their region qualify, with the default
     * allocator those larger than 1 MiB.
     */
    public static final ChannelOption<Integer> RENDEZVOUS_THRESHOLD = valueOf(RdmaChannelOption.class,
            "RENDEZVOUS_THRESHOLD");

    /**
     * Milliseconds of silence after which a connection probes its peer: an RDMA READ (of zero bytes naming no memory;
     * on iWARP of one byte of zeros the peer exposes to it for this), which only the peer's
     * device answers (no receive is used, nothing reaches the pipeline). Work posted to the peer before one such
     * interval and unanswered at its end fails the channel, also when it had nothing to send: a peer gone without a
     * word (a host down, a cable pulled) is noticed within three intervals. 0: no probes (a side with nothing posted
     * then never notices such a peer, as TCP without keep-alive). Default 5000, or the system property
     * {@code org.nettyrdma.keepAliveMillis}.
     */
    public static final ChannelOption<Integer> KEEPALIVE_MILLIS = valueOf(RdmaChannelOption.class,
            "KEEPALIVE_MILLIS");

    @SuppressWarnings({"unused", "deprecation"})
    private RdmaChannelOption() {
        super(null);
    }
}
