package org.nettyrdma.channel;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;

import java.util.concurrent.TimeUnit;

/**
 * The wire protocol's codecs that {@link RdmaProtocol} holds (package-private, hence this package in the benchmarks
 * module): the handshake in the RDMA CM private data, encoded and parsed, and the reject message. They run once per
 * connection. The 4-byte header of every SEND is written and read inline in {@code RdmaSocketChannel}
 * ({@code SendBuilder.end}, {@code postControl}, {@code onRecvCompletion}) and has no method of its own to measure.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class HeaderCodecBenchmark {
    private byte[] handshake;
    private byte[] reject;

    @Setup
    public void setUp() {
        handshake = RdmaProtocol.handshake(16384, 16);
        reject = RdmaProtocol.reject(RdmaProtocol.REJECT_VERSION, "protocol version 2 not supported (this side "
                + "speaks 1)");
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
