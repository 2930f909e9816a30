package org.nettyrdma.examples;

import org.nettyrdma.tools.LoopbackConnection;
import org.nettyrdma.verbs.CompletionArray;
import org.nettyrdma.verbs.CompletionQueue;
import org.nettyrdma.verbs.Device;
import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.QueuePair;
import org.nettyrdma.verbs.SendFlags;
import org.nettyrdma.verbs.VerbsException;
import org.nettyrdma.verbs.VerbsProvider;
import org.nettyrdma.verbs.WcOpcode;
import org.nettyrdma.verbs.WcStatus;
import org.nettyrdma.verbs.WorkRequestList;
import org.nettyrdma.verbs.WrOpcode;
import org.nettyrdma.verbs.emulated.EmulatedProvider;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;

/** SEND/RECV ping-pong latency and streaming throughput between two RDMA queue pairs connected in one process. */
public final class VerbsPingPong {
    private static final int[] SIZES = {64, 4096, 65536};
    private static final int[] ROUND_TRIPS = {20_000, 20_000, 10_000};
    private static final int[] STREAMED = {500_000, 200_000, 50_000};
    private static final int MAX_SIZE = 65536;
    /** Client send slots, and server receives posted: the client's credits. */
    private static final int SLOTS = 32;
    /** A message is its sequence number (8 bytes), then its send slot's random bytes, whose CRC32C is known. */
    private static final int HEADER = 8;
    private static final long TIMEOUT_NS = TimeUnit.SECONDS.toNanos(10);

    private final QueuePair clientQp;
    private final QueuePair serverQp;
    private final CompletionQueue clientSendCq;
    private final CompletionQueue clientRecvCq;
    private final CompletionQueue serverSendCq;
    private final CompletionQueue serverRecvCq;
    private final ByteBuffer clientSendMemory = ByteBuffer.allocateDirect(SLOTS * MAX_SIZE);
    private final ByteBuffer clientRecvMemory = ByteBuffer.allocateDirect(MAX_SIZE);
    private final ByteBuffer serverRecvMemory = ByteBuffer.allocateDirect(SLOTS * MAX_SIZE);
    private final ByteBuffer clientRecvView = clientRecvMemory.duplicate();
    private final ByteBuffer serverRecvView = serverRecvMemory.duplicate();
    private final MemoryRegion clientSendMr;
    private final MemoryRegion serverRecvMr;
    private final WorkRequestList clientSends = new WorkRequestList(SLOTS, 1);
    private final WorkRequestList clientRecv = new WorkRequestList(1, 1);
    private final WorkRequestList serverSend = new WorkRequestList(1, 1);
    private final WorkRequestList serverRecvs = new WorkRequestList(SLOTS, 1);
    private final CompletionArray completions = new CompletionArray(SLOTS);
    private final CRC32C crc = new CRC32C();
    private final int[] slotCrc = new int[SLOTS];
    private long nextSeq;
    private long verified;
    private int idlePolls;
    private long idleSinceNs;

    private VerbsPingPong(LoopbackConnection connection) throws VerbsException {
        clientQp = connection.client().qp();
        serverQp = connection.server().qp();
        clientSendCq = connection.client().sendCq();
        clientRecvCq = connection.client().recvCq();
        serverSendCq = connection.server().sendCq();
        serverRecvCq = connection.server().recvCq();
        clientSendMr = connection.client().register(clientSendMemory);
        MemoryRegion clientRecvMr = connection.client().register(clientRecvMemory);
        serverRecvMr = connection.server().register(serverRecvMemory);

        SplittableRandom random = new SplittableRandom(42);
        for (int i = 0; i < clientSendMemory.capacity(); i += 8) {
            clientSendMemory.putLong(i, random.nextLong());
        }
        for (int i = 0; i < SLOTS; i++) {
            clientSends.setSend(i, i, WrOpcode.SEND, SendFlags.SIGNALED).addSge(i, 0, 0, 0);
            serverRecvs.setRecv(i, i).addSge(i, serverRecvMr.address() + offset(i), MAX_SIZE, serverRecvMr.lkey());
        }
        clientRecv.setRecv(0, 0).addSge(0, clientRecvMr.address(), MAX_SIZE, clientRecvMr.lkey());
        serverSend.setSend(0, 0, WrOpcode.SEND, SendFlags.SIGNALED).addSge(0, 0, 0, 0);
        // every receive the peer may consume is posted before it may send
        VerbsException.check("ibv_post_recv", serverQp.postRecv(serverRecvs, 0, SLOTS));
        VerbsException.check("ibv_post_recv", clientQp.postRecv(clientRecv, 0, 1));
    }

    public static void main(String[] args) {
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        try (VerbsProvider provider = EmulatedProvider.create();
             LoopbackConnection connection = LoopbackConnection.open(provider, InetAddress.getLoopbackAddress(),
                     2 * SLOTS)) {
            Device device = connection.client().id().device();
            out.println("provider: emulated (no RDMA hardware needed)");
            out.println("device:   " + device.name() + " (" + device.attributes().transport() + ")");
            out.println("RC queue pairs connected through RDMA CM, " + format(connection.client().id().localAddress())
                    + " -> " + format(connection.server().id().localAddress()) + "; one thread drives both ends");
            out.println();
            new VerbsPingPong(connection).run(out);
        } catch (Throwable t) {
            System.err.println("VerbsPingPong failed: " + t);
            t.printStackTrace();
            System.exit(1);
        }
    }

    private void run(PrintStream out) throws IOException {
        for (int pass = 0; pass < 2; pass++) { // warm-up, unmeasured: every size, so the JIT sees them all
            for (int i = 0; i < SIZES.length; i++) {
                useSize(SIZES[i]);
                pingPong(SIZES[i], ROUND_TRIPS[i], null);
                stream(SIZES[i], STREAMED[i]);
            }
        }
        out.printf(Locale.ROOT, "%8s %12s %8s %8s %10s %9s%n",
                "message", "round trips", "p50 µs", "p99 µs", "streamed", "MB/s");
        for (int i = 0; i < SIZES.length; i++) {
            int size = SIZES[i];
            useSize(size);
            long[] rttNs = new long[ROUND_TRIPS[i]];
            pingPong(size, rttNs.length, rttNs);
            Arrays.sort(rttNs);
            long streamNs = stream(size, STREAMED[i]);
            double megabytesPerSecond = (double) STREAMED[i] * size * 1e3 / streamNs;
            out.printf(Locale.ROOT, "%8s %12d %8.2f %8.2f %10d %9.1f%n", sizeName(size), rttNs.length,
                    percentileMicros(rttNs, 0.50), percentileMicros(rttNs, 0.99), STREAMED[i], megabytesPerSecond);
        }
        out.println();
        out.println("round trip: client SEND, server RECV and echo SEND, client RECV");
        out.println("streamed:   client SENDs as fast as " + SLOTS + " receiver credits (posted RECVs) allow");
        out.println("verified " + verified + " messages: sequence number and CRC32C of every byte");
        out.println("(emulated: the figures measure in-process memory copies and verbs bookkeeping, not a network)");
    }

    /** Points the client's send slots at {@code size} bytes each and computes what their payloads' CRCs must be. */
    private void useSize(int size) {
        for (int i = 0; i < SLOTS; i++) {
            clientSends.setSge(i, 0, clientSendMr.address() + offset(i), size, clientSendMr.lkey());
            ByteBuffer payload = clientSendMemory.duplicate().limit(offset(i) + size).position(offset(i) + HEADER);
            crc.reset();
            crc.update(payload);
            slotCrc[i] = (int) crc.getValue();
        }
    }

    /** {@code count} round trips: the client sends, the server echoes the message back from its receive buffer. */
    private void pingPong(int size, int count, long[] rttNs) throws IOException {
        for (int i = 0; i < count; i++) {
            long seq = nextSeq++;
            int slot = (int) (seq % SLOTS);
            clientSendMemory.putLong(offset(slot), seq);

            long startNs = System.nanoTime();
            VerbsException.check("ibv_post_send", clientQp.postSend(clientSends, slot, 1));
            awaitOne(serverRecvCq, WcOpcode.RECV);
            int ring = (int) completions.wrId(0);
            serverSend.setSge(0, 0, serverRecvMr.address() + offset(ring), completions.byteLen(0),
                    serverRecvMr.lkey());
            VerbsException.check("ibv_post_send", serverQp.postSend(serverSend, 0, 1));
            awaitOne(clientRecvCq, WcOpcode.RECV);
            long endNs = System.nanoTime();
            if (rttNs != null) {
                rttNs[i] = endNs - startNs;
            }

            verify(clientRecvView, 0, completions.byteLen(0), size, seq);
            awaitOne(clientSendCq, WcOpcode.SEND);
            awaitOne(serverSendCq, WcOpcode.SEND);
            VerbsException.check("ibv_post_recv", serverQp.postRecv(serverRecvs, ring, 1));
            VerbsException.check("ibv_post_recv", clientQp.postRecv(clientRecv, 0, 1));
        }
    }

    /**
     * The client sends {@code count} messages as fast as its credits (the server's posted receives) allow; the server
     * checks each and re-posts its buffer, which returns the credit. Returns the nanoseconds until the last arrived.
     */
    private long stream(int size, int count) throws IOException {
        long firstSeq = nextSeq;
        int credits = SLOTS;
        int sent = 0;
        int sendsDone = 0;
        int received = 0;
        long startNs = System.nanoTime();
        while (received < count) {
            int work = 0;
            for (; sent < count && credits > 0 && sent - sendsDone < SLOTS; sent++, credits--, work++) {
                long seq = firstSeq + sent;
                int slot = (int) (seq % SLOTS);
                clientSendMemory.putLong(offset(slot), seq);
                VerbsException.check("ibv_post_send", clientQp.postSend(clientSends, slot, 1));
            }
            int n = poll(clientSendCq, SLOTS, WcOpcode.SEND);
            sendsDone += n;
            work += n;
            n = poll(serverRecvCq, SLOTS, WcOpcode.RECV);
            for (int i = 0; i < n; i++, received++, credits++) {
                int ring = (int) completions.wrId(i);
                verify(serverRecvView, offset(ring), completions.byteLen(i), size, firstSeq + received);
                VerbsException.check("ibv_post_recv", serverQp.postRecv(serverRecvs, ring, 1));
            }
            work += n;
            idle(work, "streamed messages");
        }
        long elapsedNs = System.nanoTime() - startNs;
        while (sendsDone < sent) {
            int n = poll(clientSendCq, SLOTS, WcOpcode.SEND);
            sendsDone += n;
            idle(n, "send completions");
        }
        nextSeq = firstSeq + count;
        return elapsedNs;
    }

    private void verify(ByteBuffer view, int offset, int length, int size, long expectedSeq) throws IOException {
        if (length != size) {
            throw new IOException("message " + expectedSeq + " arrived with " + length + " bytes, not " + size);
        }
        long seq = view.clear().getLong(offset);
        if (seq != expectedSeq) {
            throw new IOException("expected message " + expectedSeq + ", received " + seq);
        }
        view.limit(offset + size).position(offset + HEADER);
        crc.reset();
        crc.update(view);
        if ((int) crc.getValue() != slotCrc[(int) (seq % SLOTS)]) {
            throw new IOException("message " + seq + " arrived corrupted (CRC32C mismatch)");
        }
        verified++;
    }

    private void awaitOne(CompletionQueue cq, int opcode) throws IOException {
        while (poll(cq, 1, opcode) == 0) {
            idle(0, opcode == WcOpcode.SEND ? "send completion" : "receive completion");
        }
        idlePolls = 0;
    }

    /** Polls up to {@code max} completions into {@link #completions}; each must be a successful {@code opcode}. */
    private int poll(CompletionQueue cq, int max, int opcode) throws IOException {
        int n = cq.poll(completions, max);
        if (n < 0) {
            throw new VerbsException("ibv_poll_cq", -n);
        }
        for (int i = 0; i < n; i++) {
            if (completions.status(i) != WcStatus.SUCCESS) {
                throw new IOException("work request " + completions.wrId(i) + " failed: "
                        + WcStatus.name(completions.status(i)));
            }
            if (completions.opcode(i) != opcode) {
                throw new IOException("completion opcode " + completions.opcode(i) + ", expected " + opcode);
            }
        }
        return n;
    }

    /** Bounds busy-polling: fails after 10 s without progress; reads the clock only every 1024 empty polls. */
    private void idle(int work, String what) throws IOException {
        if (work > 0) {
            idlePolls = 0;
            return;
        }
        if ((++idlePolls & 1023) != 0) {
            return;
        }
        long nowNs = System.nanoTime();
        if (idlePolls == 1024) {
            idleSinceNs = nowNs;
        } else if (nowNs - idleSinceNs > TIMEOUT_NS) {
            throw new IOException("no " + what + " for " + TimeUnit.NANOSECONDS.toSeconds(TIMEOUT_NS) + " s");
        }
    }

    private static int offset(int slot) {
        return slot * MAX_SIZE;
    }

    private static double percentileMicros(long[] sortedNs, double p) {
        int index = Math.min(sortedNs.length - 1, Math.max(0, (int) Math.ceil(p * sortedNs.length) - 1));
        return sortedNs[index] / 1e3;
    }

    private static String format(InetSocketAddress address) {
        return address.getAddress().getHostAddress() + ':' + address.getPort();
    }

    private static String sizeName(int size) {
        return size >= 1024 ? size / 1024 + " KiB" : size + " B";
    }
}
