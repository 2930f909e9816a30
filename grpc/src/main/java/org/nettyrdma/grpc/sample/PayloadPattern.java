package org.nettyrdma.grpc.sample;

import com.google.protobuf.ByteString;

import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.zip.CRC32C;

/**
 * The payload of message {@code sequence} of a call: its first 8 bytes are the sequence (big-endian; fewer bytes for
 * shorter payloads), the rest a pattern of the size (0, 7, 14, ... plus a step every 256 bytes), so that a receiver
 * can check order, length and content, and a sender builds a large message without writing its bytes again.
 */
public final class PayloadPattern {
    private static final Map<Integer, ByteString> BODIES = new ConcurrentHashMap<>();

    private PayloadPattern() {
    }

    public static ByteString payload(long sequence, int size) {
        ByteString head = ByteString.copyFrom(ByteBuffer.allocate(8).putLong(0, sequence).array(), 0, Math.min(8,
                size));
        return size <= 8 ? head : head.concat(body(size));
    }

    public static Chunk chunk(long sequence, int size) {
        return Chunk.newBuilder().setSequence(sequence).setPayload(payload(sequence, size)).build();
    }

    /** Whether {@code chunk} is message {@code sequence} of {@code size} bytes: sequence, length and every byte. */
    public static boolean matches(Chunk chunk, long sequence, int size) {
        return chunk.getSequence() == sequence && chunk.getPayload().equals(payload(sequence, size));
    }

    /** CRC-32C of the payloads of messages 0..count-1 of {@code size} bytes, in order: what a Summary says. */
    public static long crc32c(long count, int size) {
        CRC32C crc = new CRC32C();
        for (long s = 0; s < count; s++) {
            for (ByteBuffer b : payload(s, size).asReadOnlyByteBufferList()) {
                crc.update(b);
            }
        }
        return crc.getValue();
    }

    /** Bytes 8..size-1 of every payload of {@code size} bytes. */
    private static ByteString body(int size) {
        return BODIES.computeIfAbsent(size, n -> {
            byte[] b = new byte[n - 8];
            for (int i = 0; i < b.length; i++) {
                int index = i + 8;
                b[i] = (byte) (index * 7 + (index >>> 8));
            }
            return ByteString.copyFrom(b);
        });
    }
}
