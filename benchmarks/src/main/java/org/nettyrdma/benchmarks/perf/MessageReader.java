package org.nettyrdma.benchmarks.perf;

import io.netty.buffer.ByteBuf;

import java.util.Arrays;

/**
 * The receiving end of a stream of fixed-size messages: finds message boundaries in whatever pieces the transport
 * delivers, counts bytes and messages, and (when verifying) checks every byte. Byte {@code j} of a message is
 * {@link #patternByte(int) patternByte(j)}, except its first {@link MessageRing#STAMP_BYTES} bytes (or all of a
 * shorter message), which hold its sequence number, little-endian: so a lost, repeated, reordered or corrupted
 * message is found, not only a wrong byte count.
 *
 * <p>Used on one event loop only; allocates nothing per message.
 */
final class MessageReader {
    private static final int SCRATCH = 16384;

    private int size;
    private boolean verify;
    /** One message's pattern, to compare with; made when a new size is verified. */
    private byte[] reference = new byte[0];
    /** Received bytes are copied here in chunks to be compared: one call per chunk, whatever the buffer's kind. */
    private byte[] scratch;
    private long sequence;
    private int offset;
    private long bytes;
    private long errors;
    private String firstError;

    /** Byte {@code j} of every message (after its sequence number). */
    static byte patternByte(int j) {
        return (byte) (j * 31 + (j >>> 8) + 7);
    }

    /** A message's pattern bytes (without its sequence number). */
    static byte[] pattern(int size) {
        byte[] pattern = new byte[size];
        for (int j = 0; j < size; j++) {
            pattern[j] = patternByte(j);
        }
        return pattern;
    }

    /** Starts a new stream of {@code size}-byte messages, its sequence numbers from 0. */
    void reset(int size, boolean verify) {
        if (verify && reference.length != size) {
            reference = pattern(size);
            scratch = new byte[Math.min(size, SCRATCH)];
        }
        this.size = size;
        this.verify = verify;
        sequence = 0;
        offset = 0;
        bytes = 0;
        errors = 0;
        firstError = null;
    }

    /**
     * Reads from {@code in} up to the end of the current message.
     *
     * @return whether a message was completed
     */
    boolean read(ByteBuf in) {
        int n = Math.min(in.readableBytes(), size - offset);
        if (verify) {
            check(in, in.readerIndex(), n);
        }
        in.skipBytes(n);
        bytes += n;
        offset += n;
        if (offset < size) {
            return false;
        }
        offset = 0;
        sequence++;
        return true;
    }

    private void check(ByteBuf in, int index, int n) {
        int from = offset;
        int end = offset + n;
        int stampEnd = Math.min(size, MessageRing.STAMP_BYTES);
        boolean ok = true;
        for (int start = from; start < end; ) {
            int chunk = Math.min(end - start, scratch.length);
            in.getBytes(index + start - from, scratch, 0, chunk);
            for (int j = start; j < Math.min(start + chunk, stampEnd); j++) {
                ok &= scratch[j - start] == (byte) (sequence >>> (j << 3));
            }
            int p = Math.max(start, stampEnd);
            if (p < start + chunk) {
                ok &= Arrays.equals(scratch, p - start, chunk, reference, p, start + chunk);
            }
            start += chunk;
        }
        if (!ok && errors++ == 0) {
            firstError = "message " + sequence + " (" + size + " B) differs in bytes " + from + ".." + end;
        }
    }

    /** Messages completed in this stream. */
    long messages() {
        return sequence;
    }

    long bytes() {
        return bytes;
    }

    /** Pieces of messages that differed from what was sent (0 unless verifying). */
    long errors() {
        return errors;
    }

    String firstError() {
        return firstError;
    }
}
