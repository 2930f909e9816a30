package org.nettyrdma.channel;

import java.util.concurrent.atomic.AtomicLong;

/**
 * Traffic counters of a channel ({@link RdmaSocketChannel#counters()}) or of everything an event loop ran
 * ({@link RdmaIoHandler#counters()}). Written by the event loop, readable from any thread: the loop writes plain
 * fields (no memory fence per message) and publishes them at the end of each batch of completions, so another thread
 * sees them as of the loop's last batch, or later (and whatever the loop wrote before something the thread waited
 * for, such as a write's future).
 */
public final class RdmaCounters {
    long bytesSent;
    long bytesReceived;
    long messagesSent;
    long messagesReceived;
    long workRequestsPosted;
    long completions;
    long copies;
    long copiedBytes;
    long zeroCopyBytes;
    long fileReadBytes;
    long creditStalls;
    long stagingStalls;
    long keepAliveProbes;
    long receiveCopies;
    long receiveCopiedBytes;
    long ringBytesSent;
    long ringBytesReceived;
    long rendezvousBytesSent;
    long rendezvousBytesRead;
    long rendezvousReads;
    long rendezvousReadAheadStalls;
    long rendezvousExposedBytes;
    long spinsFound;
    long spinsMissed;
    long waits;
    long solicitedWaits;
    long cmPolls;
    long slowTeardowns;
    /** Receive buffers the pipeline holds, in bytes (the application releases them on any thread). */
    final AtomicLong lentBytes = new AtomicLong();
    long registeredBytes;
    int queuePairs;
    /** Written at the end of each batch; read before the fields. */
    private volatile int published;

    /** Payload bytes sent: by SEND, placed in the peer's WRITE ring, or announced by READ rendezvous. */
    public long bytesSent() {
        acquire();
        return bytesSent;
    }

    /** Payload bytes received. */
    public long bytesReceived() {
        acquire();
        return bytesReceived;
    }

    /** Data messages (SENDs) posted. */
    public long messagesSent() {
        acquire();
        return messagesSent;
    }

    public long messagesReceived() {
        acquire();
        return messagesReceived;
    }

    /** Work requests posted, send and receive, data and control. */
    public long workRequestsPosted() {
        acquire();
        return workRequestsPosted;
    }

    /** Work completions processed. */
    public long completions() {
        acquire();
        return completions;
    }

    /** Buffers copied into registered staging memory because they were not from the registered allocator. */
    public long copies() {
        acquire();
        return copies;
    }

    public long copiedBytes() {
        acquire();
        return copiedBytes;
    }

    /** Bytes sent straight from registered buffers (no copy). */
    public long zeroCopyBytes() {
        acquire();
        return zeroCopyBytes;
    }

    /**
     * Bytes of {@code DefaultFileRegion}s read straight from their file into registered staging memory (one copy, a
     * positional read); they count in {@link #copiedBytes()} too. Other regions' bytes are copied by their
     * {@code transferTo}.
     */
    public long fileReadBytes() {
        acquire();
        return fileReadBytes;
    }

    /** Times a flush stopped because the peer had granted no more credits. */
    public long creditStalls() {
        acquire();
        return creditStalls;
    }

    /**
     * Times a write stopped because every slot of its event loop's send staging was in flight, at
     * {@link RdmaIoHandlerConfig#setSendStagingBytes(long)}: it went on once a SEND of the loop completed.
     */
    public long stagingStalls() {
        acquire();
        return stagingStalls;
    }

    /** Keep-alive probes sent: RDMA READs (on iWARP of the peer's probe target) after {@code KEEPALIVE_MILLIS} quiet. */
    public long keepAliveProbes() {
        acquire();
        return keepAliveProbes;
    }

    /**
     * Received messages copied out of their receive buffer into a buffer of the channel's allocator, rather than lent
     * to the pipeline as they are: the lending bounds were reached, or the {@code RecvByteBufAllocator} asked for
     * smaller buffers.
     */
    public long receiveCopies() {
        acquire();
        return receiveCopies;
    }

    public long receiveCopiedBytes() {
        acquire();
        return receiveCopiedBytes;
    }

    /** Bytes this side placed in the peer's WRITE ring (protocol v2) rather than sending them. */
    public long ringBytesSent() {
        acquire();
        return ringBytesSent;
    }

    /** Bytes the peer placed in this side's WRITE ring (protocol v2). */
    public long ringBytesReceived() {
        acquire();
        return ringBytesReceived;
    }

    /** Bytes this side announced by READ rendezvous (protocol v2), which the peer read from its buffers. */
    public long rendezvousBytesSent() {
        acquire();
        return rendezvousBytesSent;
    }

    /** Bytes this side READ from the peer's buffers by rendezvous (protocol v2): received with no copy. */
    public long rendezvousBytesRead() {
        acquire();
        return rendezvousBytesRead;
    }

    /** RDMA READs this side posted for rendezvous (protocol v2). */
    public long rendezvousReads() {
        acquire();
        return rendezvousReads;
    }

    /**
     * Bytes of this side's buffers that peers may READ now: protocol v2's rendezvous whose DONE has not come. A gauge,
     * 0 whenever no rendezvous is outstanding. Not counted: each connection's keep-alive probe target (8 bytes of
     * zeros) and its WRITE ring, which its peer may write for as long as the connection lives (docs/protocol.md).
     */
    public long rendezvousExposedBytes() {
        acquire();
        return rendezvousExposedBytes;
    }

    /**
     * Rendezvous READs (protocol v2) that the event loop's read-ahead bound
     * ({@link RdmaIoHandlerConfig#setRendezvousReadAheadBytes}) cut to 64 KiB or held back until its connections'
     * pipelines took chunks. Event loops only (0 for a channel).
     */
    public long rendezvousReadAheadStalls() {
        acquire();
        return rendezvousReadAheadStalls;
    }

    /**
     * Busy-polls of an idle event loop that found work (a completion, a CM event or a task) before their budget ran
     * out. Event loops only (0 for a channel).
     */
    public long spinsFound() {
        acquire();
        return spinsFound;
    }

    /**
     * Connections whose queue pair and CM id took the kernel longer to destroy than the loop waits for
     * ({@code org.nettyrdma.teardownInlineWaitMillis}, 50 ms): the loop went on meanwhile, and freed their memory once the
     * destruction returned. Event loops only.
     */
    public long slowTeardowns() {
        acquire();
        return slowTeardowns;
    }

    /** Busy-polls of an idle event loop that ran their whole budget and found nothing. Event loops only. */
    public long spinsMissed() {
        acquire();
        return spinsMissed;
    }

    /**
     * Looks of an event loop at its RDMA CM event channel (each a system call on the native provider, mostly finding
     * nothing): at most one per 50 µs while it runs or spins, one after each wait and one per keep-alive check. Event
     * loops only.
     */
    public long cmPolls() {
        acquire();
        return cmPolls;
    }

    /**
     * Times an idle event loop waited for its completion channels, CM events and wake-ups (epoll_wait on the native
     * provider), after arming its completion queues. Event loops only.
     */
    public long waits() {
        acquire();
        return waits;
    }

    /**
     * Of the {@link #waits()}, those with the completion queues armed for solicited completions only: nothing on the
     * loop waited for a completion of its own sends ({@link RdmaIoHandlerConfig#setSolicitedWakeups}). Event loops
     * only.
     */
    public long solicitedWaits() {
        acquire();
        return solicitedWaits;
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
        acquire();
        return registeredBytes;
    }

    /** Queue pairs (connections) alive now: 1 or 0 for a channel, its channels' for an event loop. */
    public int queuePairs() {
        acquire();
        return queuePairs;
    }

    /** Makes what the loop wrote so far visible to threads that read the counters (end of a batch). Loop only. */
    void publish() {
        published++;
    }

    private void acquire() {
        int ignored = published;
    }

    /** Adds these counters to {@code total} (a snapshot that no event loop writes). */
    void addTo(RdmaCounters total) {
        acquire();
        total.bytesSent += bytesSent;
        total.bytesReceived += bytesReceived;
        total.messagesSent += messagesSent;
        total.messagesReceived += messagesReceived;
        total.workRequestsPosted += workRequestsPosted;
        total.completions += completions;
        total.copies += copies;
        total.copiedBytes += copiedBytes;
        total.zeroCopyBytes += zeroCopyBytes;
        total.fileReadBytes += fileReadBytes;
        total.creditStalls += creditStalls;
        total.stagingStalls += stagingStalls;
        total.keepAliveProbes += keepAliveProbes;
        total.receiveCopies += receiveCopies;
        total.receiveCopiedBytes += receiveCopiedBytes;
        total.ringBytesSent += ringBytesSent;
        total.ringBytesReceived += ringBytesReceived;
        total.rendezvousBytesSent += rendezvousBytesSent;
        total.rendezvousBytesRead += rendezvousBytesRead;
        total.rendezvousReads += rendezvousReads;
        total.rendezvousReadAheadStalls += rendezvousReadAheadStalls;
        total.rendezvousExposedBytes += rendezvousExposedBytes;
        total.spinsFound += spinsFound;
        total.spinsMissed += spinsMissed;
        total.waits += waits;
        total.solicitedWaits += solicitedWaits;
        total.cmPolls += cmPolls;
        total.slowTeardowns += slowTeardowns;
        total.lentBytes.addAndGet(lentBytes.get());
        total.registeredBytes += registeredBytes;
        total.queuePairs += queuePairs;
    }

    @Override
    public String toString() {
        acquire();
        return "RdmaCounters{bytesSent=" + bytesSent + ", bytesReceived=" + bytesReceived + ", messagesSent="
                + messagesSent + ", messagesReceived=" + messagesReceived + ", workRequestsPosted=" + workRequestsPosted
                + ", completions=" + completions + ", copies=" + copies + ", copiedBytes=" + copiedBytes
                + ", zeroCopyBytes=" + zeroCopyBytes + ", fileReadBytes=" + fileReadBytes + ", creditStalls="
                + creditStalls + ", stagingStalls=" + stagingStalls + ", keepAliveProbes=" + keepAliveProbes
                + ", receiveCopies=" + receiveCopies
                + ", receiveCopiedBytes=" + receiveCopiedBytes + ", ringBytesSent=" + ringBytesSent
                + ", ringBytesReceived=" + ringBytesReceived + ", rendezvousBytesSent=" + rendezvousBytesSent
                + ", rendezvousBytesRead=" + rendezvousBytesRead + ", rendezvousReads=" + rendezvousReads
                + ", rendezvousReadAheadStalls=" + rendezvousReadAheadStalls
                + ", rendezvousExposedBytes=" + rendezvousExposedBytes
                + ", spinsFound=" + spinsFound + ", spinsMissed="
                + spinsMissed + ", waits=" + waits + ", solicitedWaits=" + solicitedWaits + ", cmPolls=" + cmPolls
                + ", slowTeardowns=" + slowTeardowns
                + ", lentBytes=" + lentBytes + ", registeredBytes="
                + registeredBytes + ", queuePairs=" + queuePairs + '}';
    }
}
