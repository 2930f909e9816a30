package org.nettyrdma.channel;

import io.netty.channel.ChannelOutboundBuffer;

import java.io.IOException;

/**
 * How a connection's bytes reach the peer once the handshake is done. {@link SendQueue}: SENDs into the peer's
 * receives, as its credits allow, and with protocol v2's WRITE ring negotiated, large registered pieces written into
 * the peer's ring in the same walk (so that both kinds stay in one stream order); the READ rendezvous is to be another
 * implementation. What arrives is the {@link ReceiveQueue}'s. Event loop only.
 *
 * <p>Bytes are <em>posted</em> (in a work request), then <em>settled</em> when that request completes: the
 * connection then removes them from the channel's outbound buffer, which completes the writes.
 */
interface DataPath {

    /**
     * Posts what it can of the flushed messages of {@code in}, after the bytes already posted and not settled.
     * Returns whether it stopped for lack of credits.
     */
    boolean send(ChannelOutboundBuffer in) throws Exception;

    /**
     * Bytes of the flushed messages that the last {@link #send(ChannelOutboundBuffer)}s settled as they were posted
     * (copied into memory the data path owns, nothing unsettled before them), for the caller to remove from the
     * outbound buffer now; reset to 0. Their completions settle nothing.
     */
    long takeSettledAtPost();

    /** Posts what it can of the bytes the end of output took along, after those already posted. */
    boolean send(CloseLinger linger) throws Exception;

    /** Posts a header-only message (CREDIT or FIN) now; the caller checked {@link #hasRoom()} and the credits. */
    void sendControl(int type) throws IOException;

    /** Whether the last {@link #send(ChannelOutboundBuffer)} stopped before the end for want of credits or room. */
    boolean waitsForRoom();

    /**
     * Whether a post was refused: what the path counted as sent (credits spent, bytes settled at post, places taken)
     * was not, so the stream cannot go on in order; the connection resets.
     */
    boolean postRefused();

    /**
     * Posts a probe now: an RDMA READ of one byte of the peer's probe target on iWARP ({@link ProbeRegion}), else of
     * zero bytes naming no memory, which completes only when the peer's device has
     * answered it (on iWARP too), so after it has taken everything posted before; it takes a place in the send queue,
     * not a credit. A keep-alive probe ({@code keepAlive}, counted) or the close's fence on iWARP. The caller checked
     * {@link #hasRoom()}.
     */
    void sendProbe(boolean keepAlive) throws IOException;

    /**
     * Posts a zero-byte RDMA WRITE naming no memory: data on the wire that the peer's device takes without an answer
     * (no receive, no credit, nothing for its pipeline), completing in order with the SENDs around it. iWARP's nudge
     * after the greeting. The caller checked {@link #hasRoom()}.
     */
    void sendEmptyWrite() throws IOException;

    /** Whether a keep-alive probe is posted and not completed. */
    boolean probeInFlight();

    /** Whether send {@code slot} carries a keep-alive probe. */
    boolean isProbe(int slot);

    /**
     * Whether a work request, a control message among them, can be posted now: the send queue has room, and there is
     * staging for the message if the device does not take it inline.
     */
    boolean hasRoom();

    /** Whether the send queue has a place for a request that needs no staging (a probe, an empty WRITE). */
    boolean hasPlace();

    /** Whether send {@code slot} carries a control message (no payload). */
    boolean isControl(int slot);

    /**
     * Send {@code slot} completed (successfully or not), and with it the unsignalled sends posted before it: the
     * payload bytes they carried (0 for control messages); -1 if {@code slot} is not in flight (a completion out of
     * posted order retired it already: a device broke the order that a fence should have kept).
     */
    long complete(int slot);

    /** {@code bytes} that {@link #complete} reported were removed from the outbound buffer (or the close's linger). */
    void settle(long bytes);

    /** Bytes posted and not settled. */
    long unsettledBytes();

    /** Whether no work request is in flight. */
    boolean isIdle();

    /** Gives back what it holds (its staging slots); only when no work request can reference it (the QP is gone). */
    void close();
}
