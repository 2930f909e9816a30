package org.nettyrdma.benchmarks.perf;

/**
 * The tool's own framing on top of the byte stream, the same on every transport. A client runs rounds on a
 * connection, one at a time. A round is:
 * <ol>
 *   <li>client → server: a {@value #REQUEST_LENGTH}-byte request: magic u32, mode u8, flags u8, reserved u16,
 *   message size u32, message count u64, reserved u32 (big-endian);</li>
 *   <li>latency: {@code count} times, a message of {@code size} bytes from the client, then one from the server;
 *   bandwidth: {@code count} messages from the client;</li>
 *   <li>server → client: a {@value #ACK_LENGTH}-byte acknowledgement: bytes received u64, messages that failed
 *   verification u64.</li>
 * </ol>
 */
final class PerfProtocol {
    static final int MAGIC = 0x50455246; // "PERF"
    static final int REQUEST_LENGTH = 24;
    static final int ACK_LENGTH = 16;
    static final byte MODE_LATENCY = 1;
    static final byte MODE_BANDWIDTH = 2;
    static final byte FLAG_VERIFY = 1;
    static final int MIN_SIZE = 1;
    /** 64 MiB: beyond the allocator's 1 MiB slots, where protocol v2's READ rendezvous applies. */
    static final int MAX_SIZE = 64 << 20;

    private PerfProtocol() {
    }
}
