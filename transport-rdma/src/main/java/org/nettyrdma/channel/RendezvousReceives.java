package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import org.nettyrdma.verbs.WcStatus;

import java.io.IOException;

/**
 * The receiving side of protocol v2's READ rendezvous on one connection (docs/rendezvous-design.md): the RNDVs that
 * arrived, in order, until the pipeline has taken their bytes; the chunks their bytes are READ into, buffers of the
 * receiving allocator handed to the pipeline as they are (no copy); and the DONEs this side owes the peer.
 *
 * <p>Bounded whatever the peer announces: chunks of at most {@code chunkSize} bytes, READ in RNDV order, no more than
 * {@code readAhead} bytes of chunks allocated and not yet delivered, and within the loop's {@link ReadAheadBudget}, no
 * more than {@code maxReads} READs in flight; a rendezvous is pulled only as the pipeline takes what came before. A
 * DONE is owed once the last READ of a rendezvous completed (its bytes are all in this side's memory), in RNDV order:
 * READs complete in posted order. Event loop only; a chunk is released only once no READ can write it (its READ
 * completed, or {@link #close()} after the QP is gone).
 */
final class RendezvousReceives implements ReadAheadBudget.Waiter {

    /** Posts an RDMA READ of {@code length} bytes at the peer's {@code remoteAddress} into {@code into}'s writable bytes. */
    interface ReadPoster {
        /** Returns the send slot of the READ, or -1 if it cannot be posted now (no place in the send queue). */
        int postRead(long remoteAddress, int rkey, ByteBuf into, int length) throws IOException;
    }

    private final int chunkSize;
    private final int readAhead;
    private final int maxReads;
    private final ReadAheadBudget budget;
    /** Runs when the loop's budget woke this table: the connection pulls again (not from within the caller's call). */
    private final Runnable onBudgetFreed;
    /** Queued in {@link #budget}'s waiters. */
    private boolean awaitingBudget;

    // the rendezvous that arrived and are not all delivered, in order: a ring
    private final int[] ids;
    private final int[] lengths;
    private final long[] addresses;
    private final int[] rkeys;
    /** Per entry: bytes with a READ posted; bytes handed to the pipeline. */
    private final int[] pulled;
    private final int[] delivered;
    private int head;
    private int count;
    /** The entry being pulled: an offset from {@link #head}. */
    private int pulling;
    /** The first entry whose READs have not all completed (none owes its DONE yet): an offset from {@link #head}. */
    private int doneCursor;
    /** The id the next RNDV must carry: the count of RNDVs received, mod 2^32. */
    private int expectedId;

    // chunks, in READ order: in flight first, then ready (the oldest ready ones are the head entry's)
    private final ByteBuf[] chunks;
    private final int[] chunkSlots;
    private final int[] chunkLengths;
    private int chunkHead;
    private int chunkCount;
    private int chunksReady;
    private long heldBytes;

    // DONEs owed, in RNDV order
    private final int[] doneIds;
    private final int[] doneRkeys;
    private int doneHead;
    private int doneCount;
    /** The DONEs posted, mod 2^32: the id of the next DONE owed, since they go in RNDV order. */
    private int donesPosted;
    /** Per entry: bytes whose READs have completed. */
    private final int[] read;
    /** The pipeline reads nothing more: entries are not pulled further, and forgotten once their DONE is owed. */
    private boolean discarding;
    private boolean closed;

    /**
     * A table for at most {@code maxEntries} rendezvous (the credits the peer may hold: each RNDV spends one until the
     * pipeline has read it), whose chunks are also bound by the loop's {@code budget}; {@code onBudgetFreed} runs when
     * the budget stopped a pull and bytes came back.
     */
    RendezvousReceives(int maxEntries, int chunkSize, int readAhead, int maxReads, ReadAheadBudget budget,
                       Runnable onBudgetFreed) {
        if (chunkSize <= 0 || readAhead < chunkSize || maxReads <= 0) {
            throw new IllegalArgumentException("chunk " + chunkSize + ", read-ahead " + readAhead + ", reads "
                    + maxReads);
        }
        this.chunkSize = chunkSize;
        this.readAhead = readAhead;
        this.maxReads = maxReads;
        this.budget = budget;
        this.onBudgetFreed = onBudgetFreed;
        ids = new int[maxEntries];
        lengths = new int[maxEntries];
        addresses = new long[maxEntries];
        rkeys = new int[maxEntries];
        pulled = new int[maxEntries];
        delivered = new int[maxEntries];
        read = new int[maxEntries];
        int maxChunks = maxReads + readAhead / Math.max(1, chunkSize) + 1;
        chunks = new ByteBuf[maxChunks];
        chunkSlots = new int[maxChunks];
        chunkLengths = new int[maxChunks];
        // onRendezvous refuses an RNDV while MAX_RENDEZVOUS await their DONE: no more can be owed at once
        doneIds = new int[RendezvousSends.MAX_RENDEZVOUS];
        doneRkeys = new int[RendezvousSends.MAX_RENDEZVOUS];
    }

    /**
     * An RNDV arrived ({@code message}, its format checked by {@link RdmaProtocol#checkHeader}): returns what is
     * wrong with it as the peer did it, or {@code null} once it is queued behind those before it.
     */
    String onRendezvous(ByteBuf message) {
        int id = RdmaProtocol.rendezvousId(message);
        if (id != expectedId) {
            return "sent an RNDV for rendezvous " + Integer.toUnsignedString(id) + ", but the next is "
                    + Integer.toUnsignedString(expectedId);
        }
        if (count == ids.length) {
            return "sent more RNDVs than it had credits for";
        }
        if (id - donesPosted >= RendezvousSends.MAX_RENDEZVOUS) {
            // an honest peer hears of a DONE only after it was posted: it never has fewer outstanding than counted here
            return "sent an RNDV while " + RendezvousSends.MAX_RENDEZVOUS + " of its rendezvous awaited their DONE "
                    + "(at most " + RendezvousSends.MAX_RENDEZVOUS + " may be outstanding)";
        }
        int e = index(count);
        ids[e] = id;
        lengths[e] = RdmaProtocol.rendezvousLength(message);
        addresses[e] = RdmaProtocol.rendezvousAddress(message);
        rkeys[e] = RdmaProtocol.rendezvousRkey(message);
        pulled[e] = 0;
        delivered[e] = 0;
        read[e] = 0;
        count++;
        expectedId = id + 1;
        if (discarding) {
            lengths[e] = 0; // nothing will be read: its DONE is owed at once, without a READ
            oweDones();
        }
        return null;
    }

    private int index(int offsetFromHead) {
        int i = head + offsetFromHead;
        return i >= ids.length ? i - ids.length : i;
    }

    /**
     * Posts the READs the bounds allow, in RNDV order, each into a fresh buffer of {@code alloc}; returns how many.
     * A READ that cannot be posted releases its buffer and throws.
     */
    int pull(ReadPoster poster, ByteBufAllocator alloc) throws IOException {
        int posted = 0;
        while (!discarding && !closed && pulling < count && chunkCount - chunksReady < maxReads
                && chunkCount < chunks.length) {
            int e = index(pulling);
            int left = lengths[e] - pulled[e];
            int n = Math.min(chunkSize, left);
            if (heldBytes + n > readAhead) {
                break;
            }
            n = budget.take(n, heldBytes);
            if (n == 0) {
                if (!awaitingBudget) {
                    awaitingBudget = true;
                    budget.await(this);
                }
                break;
            }
            ByteBuf chunk;
            int slot;
            try {
                chunk = alloc.directBuffer(n);
            } catch (RuntimeException ex) {
                budget.untake(n);
                throw ex;
            }
            try {
                slot = poster.postRead(addresses[e] + pulled[e], rkeys[e], chunk, n);
            } catch (IOException | RuntimeException ex) {
                chunk.release();
                budget.untake(n);
                throw ex;
            }
            if (slot < 0) {
                chunk.release(); // no place now: the next batch end pulls again
                budget.untake(n);
                break;
            }
            int c = chunkIndex(chunkCount);
            chunks[c] = chunk;
            chunkSlots[c] = slot;
            chunkLengths[c] = n;
            chunkCount++;
            heldBytes += n;
            pulled[e] += n;
            if (pulled[e] == lengths[e]) {
                pulling++;
            }
            posted++;
        }
        return posted;
    }

    /** The loop's budget woke this table: bytes came back. */
    @Override
    public void readAheadFreed() {
        awaitingBudget = false;
        onBudgetFreed.run();
    }

    private int chunkIndex(int offsetFromHead) {
        int i = chunkHead + offsetFromHead;
        return i >= chunks.length ? i - chunks.length : i;
    }

    /** Whether send slot {@code slot} is the oldest READ in flight (READs complete in posted order). */
    boolean isRead(int slot) {
        return chunksReady < chunkCount && chunkSlots[chunkIndex(chunksReady)] == slot;
    }

    /** Bytes of the oldest READ in flight. */
    int oldestReadLength() {
        return chunkLengths[chunkIndex(chunksReady)];
    }

    /**
     * The oldest READ in flight completed with {@code status}: its chunk is ready, and if it was the last of its
     * rendezvous, that rendezvous' DONE is owed. Returns an exception to fail the channel with if the READ failed.
     */
    IOException readCompleted(int status) {
        int c = chunkIndex(chunksReady);
        int n = chunkLengths[c];
        int e = index(doneCursor); // READs complete in posted order: this chunk is the first unfinished entry's
        if (status != WcStatus.SUCCESS) {
            return new IOException("rendezvous READ of " + n + " bytes at offset " + read[e] + " of "
                    + Integer.toUnsignedString(lengths[e]) + " failed: " + WcStatus.name(status)
                    + (status == WcStatus.REM_ACCESS_ERR ? " (the peer revoked its buffer, or announced memory it does "
                    + "not expose)" : status == WcStatus.WR_FLUSH_ERR ? " (the connection failed)" : ""));
        }
        ByteBuf chunk = chunks[c];
        chunk.writerIndex(chunk.writerIndex() + n);
        chunksReady++;
        read[e] += n;
        if (discarding) {
            releaseReady();
        }
        oweDones();
        return null;
    }

    /** Owes, in RNDV order, the DONE of every entry whose READs have all completed. */
    private void oweDones() {
        while (doneCursor < count) {
            int e = index(doneCursor);
            if (read[e] != lengths[e]) {
                break;
            }
            if (doneCount == doneIds.length) { // cannot be: onRendezvous bounds the rendezvous without their DONE
                throw new IllegalStateException("rendezvous table owes more DONEs than it has places for: "
                        + doneCount);
            }
            int d = doneHead + doneCount;
            d = d >= doneIds.length ? d - doneIds.length : d;
            doneIds[d] = ids[e];
            doneRkeys[d] = rkeys[e];
            doneCount++;
            doneCursor++;
        }
        if (discarding) { // none of them will be delivered: forget those that owe their DONE
            head = index(doneCursor);
            count -= doneCursor;
            pulling = Math.max(0, pulling - doneCursor);
            doneCursor = 0;
        }
    }

    /** Whether the queue's head rendezvous has a chunk ready for the pipeline. */
    boolean headReady() {
        return count > 0 && chunksReady > 0;
    }

    /**
     * Takes the head rendezvous' next ready chunk for the pipeline ({@link #headReady()} first): the buffer is the
     * caller's. {@link #headDelivered()} then says whether that was its last.
     */
    ByteBuf takeChunk() {
        int c = chunkHead;
        ByteBuf chunk = chunks[c];
        chunks[c] = null;
        chunkHead = chunkIndex(1);
        chunkCount--;
        chunksReady--;
        heldBytes -= chunkLengths[c];
        delivered[head] += chunkLengths[c];
        budget.give(chunkLengths[c]);
        return chunk;
    }

    /**
     * Whether every byte of the head rendezvous has been taken: it leaves the queue (its credit is owed now, as a
     * read DATA's is).
     */
    boolean headDelivered() {
        if (count == 0 || delivered[head] != lengths[head]) {
            return false;
        }
        head = index(1);
        count--;
        pulling--;
        doneCursor--;
        return true;
    }

    /** Whether a DONE is owed. */
    boolean owesDone() {
        return doneCount > 0;
    }

    /** The id of the oldest DONE owed. */
    int doneId() {
        return doneIds[doneHead];
    }

    /** The rkey the oldest DONE owed invalidates. */
    int doneRkey() {
        return doneRkeys[doneHead];
    }

    /** The oldest DONE owed was posted. */
    void donePosted() {
        doneHead = doneHead + 1 == doneIds.length ? 0 : doneHead + 1;
        doneCount--;
        donesPosted++;
    }

    /**
     * The pipeline will read nothing more (input shut down, or the channel closes; the receive queue owes the credits
     * of the rendezvous it drops): ready chunks are released, nothing more is pulled, and every rendezvous not read to
     * its end owes its DONE once its READs in flight have completed (at once if none are): in RNDV order, as always.
     * An RNDV that arrives later owes its DONE at once, without a READ.
     */
    void discard() {
        if (discarding) {
            return;
        }
        discarding = true;
        if (awaitingBudget) { // it pulls nothing more: a wake is for the tables that still read
            awaitingBudget = false;
            budget.forget(this);
        }
        releaseReady();
        for (int k = doneCursor; k < count; k++) {
            int e = index(k);
            lengths[e] = pulled[e]; // what is posted is all that will be read
        }
        oweDones();
    }

    private void releaseReady() {
        while (chunksReady > 0) {
            ByteBuf chunk = chunks[chunkHead];
            chunks[chunkHead] = null;
            heldBytes -= chunkLengths[chunkHead];
            budget.give(chunkLengths[chunkHead]);
            chunkHead = chunkIndex(1);
            chunkCount--;
            chunksReady--;
            chunk.release();
        }
    }

    /** Bytes of chunks allocated and not delivered. */
    long heldBytes() {
        return heldBytes;
    }

    /**
     * Releases every chunk the table holds, delivered ones being the pipeline's. Only once no READ can write them: the
     * QP destroyed, or no READ in flight.
     */
    void close() {
        closed = true;
        if (awaitingBudget) {
            awaitingBudget = false;
            budget.forget(this);
        }
        long held = heldBytes;
        while (chunkCount > 0) {
            ByteBuf chunk = chunks[chunkHead];
            chunks[chunkHead] = null;
            chunkHead = chunkIndex(1);
            chunkCount--;
            chunk.release();
        }
        chunksReady = 0;
        heldBytes = 0;
        count = 0;
        doneCount = 0;
        if (held > 0) {
            budget.give(held); // last: it may wake another connection's table
        }
    }

    @Override
    public String toString() {
        return "RendezvousReceives(" + count + " queued, " + chunkCount + " chunks (" + chunksReady + " ready, "
                + heldBytes + " bytes), " + doneCount + " DONEs owed)";
    }
}
