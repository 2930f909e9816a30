package org.nettyrdma.benchmarks;

import org.nettyrdma.tools.LoopbackConnection;
import org.nettyrdma.verbs.CompletionArray;
import org.nettyrdma.verbs.CompletionQueue;
import org.nettyrdma.verbs.DeviceAttributes;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.QueuePair;
import org.nettyrdma.verbs.SendFlags;
import org.nettyrdma.verbs.VerbsException;
import org.nettyrdma.verbs.VerbsProvider;
import org.nettyrdma.verbs.WcStatus;
import org.nettyrdma.verbs.WorkRequestList;
import org.nettyrdma.verbs.WrOpcode;
import org.nettyrdma.verbs.emulated.EmulatedFabric;
import org.nettyrdma.verbs.emulated.EmulatedProvider;
import org.nettyrdma.verbs.jni.JniProvider;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

import java.io.IOException;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;

/**
 * The verbs data path: post a RECV and a SEND on a connected QP pair and poll both completion queues until they
 * complete. Nothing on this path may allocate: {@code -prof gc} should report ~0 B/op. On the emulated provider by
 * default; {@code -p provider=native} runs it on the JNI provider over a real device, whose IP (loopback through the
 * device) is {@code -Dorg.nettyrdma.bench.address} (docs/performance.md has the command for the VM).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class PostPollBenchmark {
    private static final int CHAIN = 16;
    private static final long POLL_TIMEOUT_NS = TimeUnit.SECONDS.toNanos(10);

    /** Message size in bytes. */
    @Param({"64", "4096"})
    public int size;

    /** {@code emulated}, or {@code native} on the device that has {@code -Dorg.nettyrdma.bench.address}. */
    @Param({"emulated"})
    public String provider;

    private VerbsProvider verbs;
    private LoopbackConnection connection;
    private QueuePair clientQp;
    private QueuePair serverQp;
    private CompletionQueue clientSendCq;
    private CompletionQueue serverRecvCq;
    private WorkRequestList send;
    private WorkRequestList recv;
    private WorkRequestList sendChain;
    private WorkRequestList recvChain;
    private CompletionArray completions;

    @Setup
    public void setUp() throws IOException {
        InetAddress address;
        if ("native".equals(provider)) {
            String ip = System.getProperty("org.nettyrdma.bench.address");
            if (ip == null) {
                throw new IllegalArgumentException("provider=native needs -Dorg.nettyrdma.bench.address=<device IP>");
            }
            address = InetAddress.getByName(ip);
            verbs = JniProvider.create();
        } else {
            EmulatedFabric fabric = new EmulatedFabric();
            address = InetAddress.getLoopbackAddress();
            fabric.addDevice("emu0", EmulatedFabric.defaultAttributes(DeviceAttributes.Transport.ROCE), address);
            verbs = new EmulatedProvider(fabric);
        }
        connection = LoopbackConnection.open(verbs, address, 2 * CHAIN);
        clientQp = connection.client().qp();
        serverQp = connection.server().qp();
        clientSendCq = connection.client().sendCq();
        serverRecvCq = connection.server().recvCq();

        MemoryRegion source = connection.client().register(ByteBuffer.allocateDirect(CHAIN * size));
        MemoryRegion sink = connection.server().register(ByteBuffer.allocateDirect(CHAIN * size));
        send = new WorkRequestList(1, 1);
        send.setSend(0, 0, WrOpcode.SEND, SendFlags.SIGNALED).addSge(0, source.address(), size, source.lkey());
        recv = new WorkRequestList(1, 1);
        recv.setRecv(0, 0).addSge(0, sink.address(), size, sink.lkey());
        // one chain, re-posted as it is: only its last SEND is signalled, as a real sender would do it
        sendChain = new WorkRequestList(CHAIN, 1);
        recvChain = new WorkRequestList(CHAIN, 1);
        for (int i = 0; i < CHAIN; i++) {
            int flags = i == CHAIN - 1 ? SendFlags.SIGNALED : 0;
            sendChain.setSend(i, i, WrOpcode.SEND, flags).addSge(i, source.address() + (long) i * size, size,
                    source.lkey());
            recvChain.setRecv(i, i).addSge(i, sink.address() + (long) i * size, size, sink.lkey());
        }
        completions = new CompletionArray(CHAIN);
    }

    @TearDown
    public void tearDown() throws IOException {
        try {
            if (connection != null) {
                connection.close();
            }
        } finally {
            verbs.close();
        }
    }

    /** One RECV, one signalled SEND, both completions polled. */
    @Benchmark
    public long sendRecv() throws VerbsException {
        VerbsException.check("ibv_post_recv", serverQp.postRecv(recv, 0, 1));
        VerbsException.check("ibv_post_send", clientQp.postSend(send, 0, 1));
        return awaitCompletions(1, 1);
    }

    /** A chain of 16 RECVs and a chain of 16 SENDs (the last signalled), each posted with one call; per message. */
    @Benchmark
    @OperationsPerInvocation(CHAIN)
    public long sendRecvChain() throws VerbsException {
        VerbsException.check("ibv_post_recv", serverQp.postRecv(recvChain, 0, CHAIN));
        VerbsException.check("ibv_post_send", clientQp.postSend(sendChain, 0, CHAIN));
        return awaitCompletions(1, CHAIN);
    }

    /** Polls the client's send CQ and the server's receive CQ until both have delivered what they owe. */
    private long awaitCompletions(int sends, int recvs) {
        long bytes = 0;
        long deadlineNs = 0;
        for (int idle = 0; sends > 0 || recvs > 0; ) {
            int n = 0;
            if (sends > 0) {
                int got = poll(clientSendCq, sends);
                sends -= got;
                n += got;
            }
            if (recvs > 0) {
                int got = poll(serverRecvCq, recvs);
                for (int i = 0; i < got; i++) {
                    int length = completions.byteLen(i);
                    if (length != size) {
                        throw new IllegalStateException("received " + length + " bytes, sent " + size);
                    }
                    bytes += length;
                }
                recvs -= got;
                n += got;
            }
            if (n > 0) {
                idle = 0;
            } else if ((++idle & 0xfff) == 0) {
                long nowNs = System.nanoTime();
                if (deadlineNs == 0) {
                    deadlineNs = nowNs + POLL_TIMEOUT_NS;
                } else if (deadlineNs - nowNs < 0) {
                    throw new IllegalStateException("completions missing after 10 s: " + sends + " send, " + recvs
                            + " receive");
                }
            }
        }
        return bytes;
    }

    private int poll(CompletionQueue cq, int max) {
        int n = cq.poll(completions, max);
        if (n < 0) {
            throw new IllegalStateException("ibv_poll_cq failed: " + Errno.describe(n));
        }
        for (int i = 0; i < n; i++) {
            int status = completions.status(i);
            if (status != WcStatus.SUCCESS) {
                throw new IllegalStateException("work request " + completions.wrId(i) + " failed: "
                        + WcStatus.name(status));
            }
        }
        return n;
    }
}
