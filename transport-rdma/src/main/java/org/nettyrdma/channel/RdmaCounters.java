package org.nettyrdma.channel;

import java.util.concurrent.atomic.AtomicLong;

/**
 * Traffic counters of a channel ({@link RdmaSocketChannel#counters()}) or of everything an event loop ran
 * ({@link RdmaIoHandler#counters()}). Written by the event loop, readable from any thread.
 */
public final class RdmaCounters {
    volatile long bytesSent;
    volatile long bytesReceived;
    volatile long messagesSent;
    volatile long messagesReceived;
    volatile long workRequestsPosted;
    volatile long completions;
    volatile long copies;
    volatile long copiedBytes;
    volatile long zeroCopyBytes;
    volatile long creditStalls;
    volatile long receiveCopies;
    volatile long receiveCopiedBytes;
    /** Receive buffers the pipeline holds, in bytes (the application releases them on any thread). */
    final AtomicLong lentBytes = new AtomicLong();
    volatile long registeredBytes;
    volatile int queuePairs;

    /** Payload bytes handed to SENDs. */
    public long bytesSent() {
        return bytesSent;
    }

    /** Payload bytes received. */
    public long bytesReceived() {
        return bytesReceived;
    }

    /** Data messages (SENDs) posted. */
    public long messagesSent() {
        return messagesSent;
    }

    public long messagesReceived() {
        return messagesReceived;
    }

    /** Work requests posted, send and receive, data and control. */
    public long workRequestsPosted() {
        return workRequestsPosted;
    }

    /** Work completions processed. */
    public long completions() {
        return completions;
    }

    /** Buffers copied into registered staging memory because they were not from the registered allocator. */
    public long copies() {
        return copies;
    }

    public long copiedBytes() {
        return copiedBytes;
    }

    /** Bytes sent straight from registered buffers (no copy). */
    public long zeroCopyBytes() {
        return zeroCopyBytes;
    }

    /** Times a flush stopped because the peer had granted no more credits. */
    public long creditStalls() {
        return creditStalls;
    }

    /**
     * Received messages copied out of their receive buffer into a buffer of the channel's allocator, rather than lent
     * to the pipeline as they are: the lending bounds were reached, or the {@code RecvByteBufAllocator} asked for
     * smaller buffers.
     */
    public long receiveCopies() {
        return receiveCopies;
    }

    public long receiveCopiedBytes() {
        return receiveCopiedBytes;
    }

    /**
     * Bytes of receive buffers lent to the pipeline and not yet released: bounded by
     * {@link RdmaChannelOption#MAX_LENT_RECEIVE_BYTES} per channel and
     * {@link RdmaIoHandlerConfig#setMaxLentReceiveBytes(long)} per event loop.
     */
    public long lentBytes() {
        return lentBytes.get();
    }

    /**
     * Registered memory the connection(s) hold now: send staging and the receive buffers posted or waiting to be read
     * (lent buffers count in {@link #lentBytes()}).
     */
    public long registeredBytes() {
        return registeredBytes;
    }

    /** Queue pairs (connections) alive now: 1 or 0 for a channel, its channels' for an event loop. */
    public int queuePairs() {
        return queuePairs;
    }

    /** Adds these counters to {@code total} (a snapshot that no event loop writes). */
    void addTo(RdmaCounters total) {
        total.bytesSent += bytesSent;
        total.bytesReceived += bytesReceived;
        total.messagesSent += messagesSent;
        total.messagesReceived += messagesReceived;
        total.workRequestsPosted += workRequestsPosted;
        total.completions += completions;
        total.copies += copies;
        total.copiedBytes += copiedBytes;
        total.zeroCopyBytes += zeroCopyBytes;
        total.creditStalls += creditStalls;
        total.receiveCopies += receiveCopies;
        total.receiveCopiedBytes += receiveCopiedBytes;
        total.lentBytes.addAndGet(lentBytes.get());
        total.registeredBytes += registeredBytes;
        total.queuePairs += queuePairs;
    }

    @Override
    public String toString() {
        return "RdmaCounters{bytesSent=" + bytesSent + ", bytesReceived=" + bytesReceived + ", messagesSent="
                + messagesSent + ", messagesReceived=" + messagesReceived + ", workRequestsPosted=" + workRequestsPosted
                + ", completions=" + completions + ", copies=" + copies + ", copiedBytes=" + copiedBytes
                + ", zeroCopyBytes=" + zeroCopyBytes + ", creditStalls=" + creditStalls + ", receiveCopies=" + receiveCopies
                + ", receiveCopiedBytes=" + receiveCopiedBytes + ", lentBytes=" + lentBytes + ", registeredBytes="
                + registeredBytes + ", queuePairs=" + queuePairs + '}';
    }
}
