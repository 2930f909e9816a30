package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;

import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;

/**
 * The wire protocol's codecs that {@link RdmaProtocol} holds (package-private, hence this package in the benchmarks
 * module): the handshake in the RDMA CM private data, encoded and parsed, and the reject message. They run once per
 * connection; and the 4-byte header of every SEND ({@link RdmaProtocol#putHeader}, {@link RdmaProtocol#checkHeader}, {@link RdmaProtocol#headerType},
 * {@link RdmaProtocol#headerCredits}), written into and read from direct memory as the channel does with its staging
 * and receive buffers.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class HeaderCodecBenchmark {
    private byte[] handshake;
    private byte[] reject;
    private final ByteBuffer slots = ByteBuffer.allocateDirect(16 * 16384);
    /** The slots as receive buffers: views of {@link #slots}. */
    private final ByteBuf[] received = new ByteBuf[16];
    private int slot;
    private int credits;

    @Setup
    public void setUp() {
        handshake = RdmaProtocol.handshake(16384, 16);
        reject = RdmaProtocol.reject(RdmaProtocol.REJECT_VERSION, "protocol version 2 not supported (this side "
                + "speaks 1)");
        for (int i = 0; i < 16; i++) {
            RdmaProtocol.putHeader(slots, i * 16384, RdmaProtocol.TYPE_DATA, i);
            received[i] = Unpooled.wrappedBuffer(slots.duplicate().position(i * 16384).limit((i + 1) * 16384).slice());
        }
    }

    /** The header of a SEND, into the next of 16 slots of 16 KiB (as the channel's staging memory). */
    @Benchmark
    public int encodeHeader() {
        int at = slot * 16384;
        slot = (slot + 1) & 15;
        credits = (credits + 1) & 0xffff;
        RdmaProtocol.putHeader(slots, at, RdmaProtocol.TYPE_DATA, credits);
        return at;
    }

    /** A received message's header checked, then its type and credits read (as on a receive completion). */
    @Benchmark
    public int decodeHeader() {
        ByteBuf message = received[slot];
        slot = (slot + 1) & 15;
        if (RdmaProtocol.checkHeader(message, 16384, 0) != null) { // v1: no path negotiated
            throw new IllegalStateException("malformed header");
        }
        return RdmaProtocol.headerType(message) << 16 | RdmaProtocol.headerCredits(message);
    }

    /** The connecting side's private data: magic, version, flags, receive buffer size and count. */
    @Benchmark
    public byte[] encodeHandshake() {
        return RdmaProtocol.handshake(16384, 16);
    }

    /** The accepting side's check of the private data. */
    @Benchmark
    public Object parseHandshake() throws RdmaProtocol.RdmaProtocolException {
        return RdmaProtocol.Handshake.parse(handshake, handshake.length);
    }

    @Benchmark
    public byte[] encodeReject() {
        return RdmaProtocol.reject(RdmaProtocol.REJECT_VERSION, "protocol version 2 not supported (this side "
                + "speaks 1)");
    }

    @Benchmark
    public String parseRejectMessage() {
        return RdmaProtocol.rejectMessage(reject, reject.length);
    }
}
