package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.FileRegion;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;
import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.QueuePair;
import org.nettyrdma.verbs.SendFlags;
import org.nettyrdma.verbs.VerbsException;
import org.nettyrdma.verbs.WorkRequestList;
import org.nettyrdma.verbs.WrOpcode;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.WritableByteChannel;

/**
 * Protocol v1's data path (docs/protocol.md, "Sending"): flushed bytes become SENDs of at most the message size, one
 * per credit, posted in chains of at most 32. SGE 0 of each SEND is its slot of registered staging memory, holding
 * the header and the bytes of small or unregistered buffers (copied); registered buffers of at least the zero-copy
 * threshold are further SGEs (no copy). A SEND with nothing but staging bytes, short enough, goes inline. The last
 * SEND of a chain is signalled, and one in {@link #SIGNAL_EVERY}; a completion settles the payload bytes of its SEND
 * and of those before it. A {@link FileRegion}'s bytes are copied into staging by its {@code transferTo}. Allocates
 * nothing per message. Event loop only.
 */
final class SendQueue implements DataPath {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(SendQueue.class);
    /** Work requests posted with one call at most. */
    private static final int MAX_CHAIN = 32;
    /**
     * One SEND in this many asks for a completion, and always the last of a chain; a completion retires the SENDs
     * before it too (a send queue completes in order). docs/performance.md has the measurements that chose it.
     */
    static final int SIGNAL_EVERY = Integer.getInteger("org.nettyrdma.signalEvery", 1);

    private final QueuePair qp;
    private final ProtectionDomain pd;
    private final CreditWindow credits;
    private final FlushedMessages flushed;
    private final RdmaSocketChannelConfig config;
    private final RdmaCounters counters;
    private final RdmaCounters loopCounters;
    private final long wrIdBase;
    private final int depth;
    private final int maxSge;
    private final int maxInline;
    /** Bytes of a SEND at most, header included: the smaller receive buffer of both sides. */
    private final int messageSize;
    private final RegisteredRegion staging;
    private final MemoryRegion stagingMr;
    private final ByteBuffer stagingView;
    private final WorkRequestList wrs;
    /** Bytes of the flushed messages each slot's SEND settles at its completion. */
    private final long[] slotBytes;
    /** Whether each slot's SEND is a control message (CREDIT, FIN). */
    private final boolean[] slotControl;
    private final Builder builder = new Builder();
    private final StagingWriter stagingWriter = new StagingWriter();
    private int inUse;
    private int next;
    /** The oldest slot not retired: completions retire slots from here, in order. */
    private int oldest;
    /** SENDs posted since the last signalled one. */
    private int unsignalled;
    private boolean waitsForRoom;
    private long unsettledBytes;
    /**
     * Bytes of flushed messages settled when their SENDs were posted, not yet removed from the outbound buffer: SENDs
     * of copied bytes only, with nothing unsettled before them (see {@link #takeSettledAtPost()}).
     */
    private long settledAtPost;
    /** Whether the SENDs being built may settle at post: those of the outbound buffer, not of a close's linger. */
    private boolean settleAtPost;

    /**
     * A queue of {@code depth} SENDs of at most {@code messageSize} bytes on {@code qp} (work request ids
     * {@code wrIdBase | slot}), with its staging memory registered in {@code pd}.
     */
    SendQueue(QueuePair qp, ProtectionDomain pd, CreditWindow credits, FlushedMessages flushed,
              RdmaSocketChannelConfig config, RdmaCounters counters, RdmaCounters loopCounters, long wrIdBase,
              int depth, int maxSge, int maxInline, int messageSize) throws VerbsException {
        this.qp = qp;
        this.pd = pd;
        this.credits = credits;
        this.flushed = flushed;
        this.config = config;
        this.counters = counters;
        this.loopCounters = loopCounters;
        this.wrIdBase = wrIdBase;
        this.depth = depth;
        this.maxSge = maxSge;
        this.maxInline = maxInline;
        this.messageSize = messageSize;
        long stagingBytes = (long) messageSize * depth;
        if (stagingBytes > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("send staging of " + stagingBytes + " bytes (RECEIVE_BUFFER_SIZE "
                    + messageSize + " x (RECEIVE_BUFFER_COUNT + 4) " + depth + ") exceeds 2 GiB: lower one of them");
        }
        staging = new RegisteredRegion((int) stagingBytes);
        try {
            stagingMr = staging.memoryRegion(pd);
        } catch (VerbsException | RuntimeException e) {
            staging.close();
            throw e;
        }
        stagingView = staging.memory().duplicate();
        wrs = new WorkRequestList(Math.min(depth, MAX_CHAIN), maxSge);
        slotBytes = new long[depth];
        slotControl = new boolean[depth];
    }

    @Override
    public boolean send(ChannelOutboundBuffer in) throws Exception {
        if (unsettledBytes == 0) {
            flushed.remove(in, 0); // drops empty messages at the head
        }
        settleAtPost = true;
        try {
            do {
                // the bytes settled at post are still in the outbound buffer: skipped, as those in flight
                builder.start(unsettledBytes + settledAtPost);
                try {
                    in.forEachFlushedMessage(builder);
                } finally {
                    postBuilt(); // a FileRegion that failed part-way: the sends built before it go out
                }
            } while (builder.listFull);
        } finally {
            settleAtPost = false;
        }
        waitsForRoom = builder.outOfRoom;
        return countStall();
    }

    /**
     * A SEND of copied bytes only settles at post when nothing before it is unsettled: its bytes are in the
     * connection's staging, as a socket's are in the kernel's send buffer, so its writes succeed as TCP's do; the
     * staging slot stays in use until the completion. A SEND with a zero-copy SGE reads the application's buffer: it
     * settles at its completion, and every SEND after it too (bytes settle in order).
     */
    @Override
    public long takeSettledAtPost() {
        long bytes = settledAtPost;
        settledAtPost = 0;
        return bytes;
    }

    @Override
    public boolean waitsForRoom() {
        return waitsForRoom;
    }

    @Override
    public boolean send(CloseLinger linger) throws Exception {
        do {
            builder.start(unsettledBytes);
            try {
                linger.forEach(builder);
            } finally {
                postBuilt();
            }
        } while (builder.listFull);
        return countStall();
    }

    private void postBuilt() throws IOException {
        builder.finish();
        post(builder.count);
    }

    private boolean countStall() {
        if (builder.creditStall) {
            counters.creditStalls++;
            loopCounters.creditStalls++;
        }
        return builder.creditStall;
    }

    @Override
    public void sendControl(int type) throws IOException {
        int slot = next;
        int base = slot * messageSize;
        RdmaProtocol.putHeader(stagingView, base, type, credits.takeOwed());
        wrs.setSend(0, wrIdBase | slot, WrOpcode.SEND, SendFlags.INLINE)
                .addSge(0, stagingMr.address() + base, RdmaProtocol.HEADER_LENGTH, stagingMr.lkey());
        post(1);
        slotBytes[slot] = 0;
        slotControl[slot] = true;
        occupy();
    }

    private void post(int count) throws IOException {
        if (count == 0) {
            return;
        }
        for (int i = 0; i < count; i++) {
            if (++unsignalled >= SIGNAL_EVERY || i == count - 1) {
                wrs.sendFlags(i, wrs.sendFlags(i) | SendFlags.SIGNALED);
                unsignalled = 0;
            }
        }
        int rc = qp.postSend(wrs, 0, count);
        if (rc < 0) {
            throw new VerbsException("ibv_post_send", -rc, "work request " + wrs.badIndex() + " of " + count);
        }
        counters.workRequestsPosted += count;
        loopCounters.workRequestsPosted += count;
    }

    /** A SEND was posted in slot {@link #next}: it spent a credit and a place in the queue. */
    private void occupy() {
        credits.spend();
        inUse++;
        next = next + 1 == depth ? 0 : next + 1;
    }

    @Override
    public boolean hasRoom() {
        return inUse < depth;
    }

    @Override
    public boolean isControl(int slot) {
        return slotControl[slot];
    }

    @Override
    public long complete(int slot) {
        counters.completions++;
        long bytes = 0;
        for (;;) {
            int retired = oldest;
            bytes += slotBytes[retired];
            inUse--;
            oldest = retired + 1 == depth ? 0 : retired + 1;
            if (retired == slot) {
                return bytes;
            }
        }
    }

    @Override
    public void settle(long bytes) {
        unsettledBytes -= bytes;
    }

    @Override
    public long unsettledBytes() {
        return unsettledBytes;
    }

    @Override
    public boolean isIdle() {
        return inUse == 0;
    }

    @Override
    public void close() {
        staging.close();
    }

    /** Builds SENDs from the flushed messages after the bytes already posted. Reused; allocates nothing. */
    private final class Builder implements ChannelOutboundBuffer.MessageProcessor {
        long skip;
        int count;
        /** Regions this walk passed (FlushedMessages' index). */
        private int regionIndex;
        boolean listFull;
        boolean creditStall;
        /** A SEND could not begin: no credit or no send-queue slot. */
        boolean outOfRoom;
        private boolean building;
        private int slot;
        private int payload;
        /** Bytes of the flushed messages the SEND settles: its payload, but a FileRegion counts what it transferred. */
        private long settles;
        private int copied;
        private int sges;

        void start(long alreadyPosted) {
            skip = alreadyPosted;
            regionIndex = 0;
            count = 0;
            listFull = false;
            creditStall = false;
            outOfRoom = false;
            building = false;
        }

        @Override
        public boolean processMessage(Object msg) throws IOException {
            return msg instanceof ByteBuf ? processBuf((ByteBuf) msg) : processRegion((FileRegion) msg);
        }

        private boolean processBuf(ByteBuf buf) {
            int index = buf.readerIndex();
            int readable = buf.readableBytes();
            if (skip >= readable) {
                skip -= readable;
                return true;
            }
            index += (int) skip;
            readable -= (int) skip;
            skip = 0;
            while (readable > 0) {
                if (!building && !begin()) {
                    return false;
                }
                int room = messageSize - RdmaProtocol.HEADER_LENGTH - payload;
                if (room == 0) {
                    end();
                    continue;
                }
                int n = Math.min(room, readable);
                // the buffer's size decides (what was written into it), not the fragment's: the tail of a large
                // registered buffer goes out directly too
                RdmaByteBuf registered = buf.writerIndex() >= config.getZeroCopyThreshold() && sges < maxSge
                        ? RdmaByteBuf.unwrap(buf) : null;
                MemoryRegion mr = registered != null ? memoryRegion(registered) : null;
                if (mr != null) {
                    wrs.addSge(count, mr.address() + registered.regionOffset() + index, n, mr.lkey());
                    sges++;
                    counters.zeroCopyBytes += n;
                } else if (sges == 1) {
                    int at = slot * messageSize + RdmaProtocol.HEADER_LENGTH + copied;
                    stagingView.limit(at + n).position(at);
                    buf.getBytes(index, stagingView);
                    stagingView.clear();
                    copied += n;
                    counters.copies++;
                    counters.copiedBytes += n;
                    loopCounters.copies++;
                    loopCounters.copiedBytes += n;
                } else {
                    end();
                    continue;
                }
                payload += n;
                settles += n;
                index += n;
                readable -= n;
            }
            return true;
        }

        /**
         * Copies a FileRegion's bytes after those posted into staging, SEND by SEND. Its posted bytes are those it
         * {@linkplain FileRegion#transferred() transferred} and not settled: the skipped ones.
         */
        private boolean processRegion(FileRegion region) throws IOException {
            int index = regionIndex++;
            long unsettled = flushed.unsettled(region, index);
            if (skip >= unsettled) {
                skip -= unsettled;
                return true;
            }
            skip = 0;
            long count = flushed.reach(region, index); // its count() when first reached: some shrink as written
            long position;
            while ((position = region.transferred()) < count) {
                if (!building && !begin()) {
                    return false;
                }
                int room = messageSize - RdmaProtocol.HEADER_LENGTH - payload;
                if (room == 0 || sges > 1) {
                    end(); // copied bytes go in staging, before a SEND's zero-copy SGEs
                    continue;
                }
                int at = slot * messageSize + RdmaProtocol.HEADER_LENGTH + copied;
                stagingView.limit(at + room).position(at);
                int n;
                long advanced;
                try {
                    region.transferTo(stagingWriter, position);
                } finally {
                    // what reached staging is sent, also when transferTo failed part-way. The region's progress is
                    // what its transferred() says, as every Netty transport takes it: a region may write more bytes
                    // than it counts (framing, encryption) and count a chunk only once all of it is written
                    n = stagingView.position() - at;
                    advanced = Math.max(0, region.transferred() - position);
                    stagingView.clear();
                    copied += n;
                    payload += n;
                    settles += advanced;
                    if (n > 0) {
                        counters.copies++;
                        counters.copiedBytes += n;
                        loopCounters.copies++;
                        loopCounters.copiedBytes += n;
                    }
                }
                if (n == 0 && advanced == 0) {
                    throw new IOException("FileRegion " + region.getClass().getName() + " made no progress at "
                            + position + " of " + count + " with " + room + " bytes of room");
                }
            }
            return true;
        }

        /** The buffer's registration in this connection's protection domain, or null to copy instead. */
        private MemoryRegion memoryRegion(RdmaByteBuf registered) {
            try {
                return registered.region().memoryRegion(pd);
            } catch (VerbsException e) {
                logger.debug("cannot register a buffer's region here; copying it", e);
                return null;
            }
        }

        private boolean begin() {
            if (count == wrs.capacity()) {
                listFull = true;
                return false;
            }
            if (!credits.canSendData() || inUse == depth) {
                creditStall = !credits.canSendData();
                outOfRoom = true;
                return false;
            }
            slot = next;
            payload = 0;
            settles = 0;
            copied = 0;
            sges = 1;
            wrs.setSend(count, wrIdBase | slot, WrOpcode.SEND, 0)
                    .addSge(count, stagingMr.address() + (long) slot * messageSize, RdmaProtocol.HEADER_LENGTH,
                            stagingMr.lkey());
            building = true;
            return true;
        }

        private void end() {
            int base = slot * messageSize;
            RdmaProtocol.putHeader(stagingView, base, RdmaProtocol.TYPE_DATA, credits.takeOwed());
            wrs.setSge(count, 0, stagingMr.address() + base, RdmaProtocol.HEADER_LENGTH + copied, stagingMr.lkey());
            if (sges == 1 && RdmaProtocol.HEADER_LENGTH + copied <= maxInline) {
                wrs.sendFlags(count, SendFlags.INLINE);
            }
            if (settleAtPost && sges == 1 && unsettledBytes == 0) {
                slotBytes[slot] = 0;
                settledAtPost += settles;
            } else {
                slotBytes[slot] = settles;
                unsettledBytes += settles;
            }
            slotControl[slot] = false;
            occupy();
            count++;
            building = false;
            counters.messagesSent++;
            counters.bytesSent += payload;
            loopCounters.messagesSent++;
            loopCounters.bytesSent += payload;
        }

        /** Ends the SEND being built; one with no payload yet (its first bytes failed) is dropped, not posted. */
        void finish() {
            if (building) {
                if (payload > 0) {
                    end();
                } else {
                    building = false;
                }
            }
        }
    }

    /** Takes what a FileRegion transfers into the staging view's room (position to limit). Allocates nothing. */
    private final class StagingWriter implements WritableByteChannel {
        @Override
        public int write(ByteBuffer src) {
            int n = Math.min(src.remaining(), stagingView.remaining());
            int limit = src.limit();
            src.limit(src.position() + n);
            stagingView.put(src);
            src.limit(limit);
            return n;
        }

        @Override
        public boolean isOpen() {
            return true;
        }

        @Override
        public void close() {
            // staging outlives any region
        }
    }
}
