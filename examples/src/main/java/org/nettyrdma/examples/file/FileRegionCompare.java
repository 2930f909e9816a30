package org.nettyrdma.examples.file;

import io.netty.channel.Channel;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.epoll.Epoll;
import org.nettyrdma.channel.RdmaCounters;
import org.nettyrdma.channel.RdmaIoHandler;
import org.nettyrdma.channel.RdmaIoHandlerConfig;
import org.nettyrdma.examples.Transport;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A file served as one unchanged {@link io.netty.channel.DefaultFileRegion} over the RDMA transport (native provider)
 * on each given address, over Netty epoll (TCP: {@code sendfile}), and over plain blocking TCP
 * ({@code FileChannel.transferTo}, i.e. {@code sendfile}, to a {@code SocketChannel}) as the reference; the client
 * digests every byte with SHA-256 and compares it with the file's (given: {@code sha256sum}'s, computed apart). Per
 * transport: MB/s (10^6 B) from connected to the last byte, CPU seconds per GB (10^9 B) of the server's and the
 * client's threads (each side runs on one thread: its event loop, or its blocking thread), and of the whole machine
 * ({@code /proc/stat}: every CPU's user, system, irq and softirq time, kernel threads included, which is where the
 * software RDMA devices and TCP's receive path do part of their work); for RDMA the transport's copy counters; then
 * RDMA/epoll per address. Server and client run in this one JVM, one transfer at a time.
 *
 * <pre>
 * FileRegionCompare --file F --sha256 HEX --rdma IP=LABEL[,IP=LABEL...] [--tcp-host IP] [--transports LIST]
 *                   [--provider P] [--warmup-mib N] [--digest-mib N] [--timeout S]
 * </pre>
 * {@code --transports}: of {@code epoll,rdma,tcp}, run in the order given (default all three); epoll and plain TCP run
 * once, on {@code --tcp-host} (default the first RDMA address). {@code --provider}: the RDMA provider (default
 * {@code native}; {@code emulated} on 127.0.0.1 for a test on a machine without RDMA). {@code --warmup-mib}: a file
 * of N MiB (random, hashed here) sent over each transport first, unmeasured (default 16). {@code --digest-mib}: then
 * SHA-256 alone over the file's first N MiB in memory (after a first pass to warm up), what the clients' digest
 * costs of their CPU time (default 32; 0: not). {@code --timeout}: how long a Netty client waits for the file (default
 * 1800 s); plain TCP's blocking read has no limit of its own (vm/run's stops it). Exit code 0 only if every transfer
 * arrived intact.
 */
public final class FileRegionCompare {
    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    /** One measured transfer. */
    record Figures(String name, long bytes, long elapsedNs, long serverCpuNs, long clientCpuNs, long machineCpuNs) {
        double megabytesPerSecond() {
            return bytes * 1e3 / elapsedNs;
        }

        double perGigabyte(long cpuNs) {
            return cpuNs / 1e9 / (bytes / 1e9);
        }

        String line() {
            return String.format(Locale.ROOT, "file: %-14s %d B in %.2f s = %.2f MB/s; CPU s/GB: server %.2f, "
                            + "client %.2f, machine %.2f; SHA-256 matches", name, bytes, elapsedNs / 1e9,
                    megabytesPerSecond(), perGigabyte(serverCpuNs), perGigabyte(clientCpuNs),
                    perGigabyte(machineCpuNs));
        }
    }

    private FileRegionCompare() {
    }

    public static void main(String[] args) throws Exception {
        run(args);
    }

    /** What {@link #main} does; returns the measured transfers, throws if one failed or arrived altered. */
    static List<Figures> run(String[] args) throws Exception {
        Path file = null;
        String provider = RdmaIoHandlerConfig.PROVIDER_NATIVE;
        String sha256 = null;
        String tcpHost = null;
        List<String[]> rdma = new ArrayList<>();
        List<String> transports = List.of("epoll", "rdma", "tcp");
        int warmupMib = 16;
        int digestMib = 32;
        long timeoutSeconds = 1800;
        for (int i = 0; i < args.length; i++) {
            String value = i + 1 < args.length ? args[i + 1] : null;
            switch (args[i]) {
                case "--file" -> file = Paths.get(value);
                case "--sha256" -> sha256 = value;
                case "--tcp-host" -> tcpHost = value;
                case "--provider" -> provider = value;
                case "--transports" -> transports = List.of(value.split(","));
                case "--warmup-mib" -> warmupMib = Integer.parseInt(value);
                case "--digest-mib" -> digestMib = Integer.parseInt(value);
                case "--timeout" -> timeoutSeconds = Long.parseLong(value);
                case "--rdma" -> {
                    for (String target : value.split(",")) {
                        String[] ipLabel = target.split("=", 2);
                        rdma.add(ipLabel.length == 2 ? ipLabel : new String[] {ipLabel[0], ipLabel[0]});
                    }
                }
                default -> usage("unknown argument " + args[i]);
            }
            i++;
        }
        if (file == null || sha256 == null || (rdma.isEmpty() && tcpHost == null)) {
            usage("--file, --sha256 and --rdma (or --tcp-host) are required");
        }
        if (tcpHost == null) {
            tcpHost = rdma.get(0)[0];
        }
        byte[] expected = HexFormat.of().parseHex(sha256);
        long length = Files.size(file);
        Path warmup = warmupMib > 0 ? Files.createTempFile("netty-rdma-warmup-", ".bin") : null;
        try {
            byte[] warmupSha = null;
            if (warmup != null) {
                FileChunkServer.writeRandom(warmup, (long) warmupMib << 20);
                warmupSha = FileChunkServer.sha256(warmup);
            }
            List<Figures> results = new ArrayList<>();
            Figures epoll = null;
            for (String transport : transports) {
                switch (transport) {
                    case "epoll" -> {
                        if (!Epoll.isAvailable()) {
                            throw new IllegalStateException("Netty epoll is unavailable here: "
                                    + Epoll.unavailabilityCause());
                        }
                        if (warmup != null) {
                            overNetty(Transport.epoll(), "warm-up", tcpHost, warmup, warmupSha, timeoutSeconds, false);
                        }
                        epoll = overNetty(Transport.epoll(), "epoll", tcpHost, file, expected, timeoutSeconds, false);
                        results.add(epoll);
                    }
                    case "rdma" -> {
                        for (String[] target : rdma) {
                            Transport rdmaTransport = Transport.rdma(provider);
                            if (warmup != null) {
                                overNetty(rdmaTransport, "warm-up", target[0], warmup, warmupSha, timeoutSeconds, false);
                            }
                            results.add(overNetty(rdmaTransport, "rdma " + target[1], target[0], file, expected,
                                    timeoutSeconds, true));
                        }
                    }
                    case "tcp" -> {
                        if (warmup != null) {
                            overPlainTcp("warm-up", tcpHost, warmup, warmupSha, timeoutSeconds);
                        }
                        results.add(overPlainTcp("tcp", tcpHost, file, expected, timeoutSeconds));
                    }
                    default -> usage("unknown transport " + transport + " (epoll, rdma, tcp)");
                }
            }
            System.out.println("== file: " + length + " B (" + (length >> 20) + " MiB), one transfer each, in order");
            for (Figures f : results) {
                System.out.println(f.line());
            }
            if (digestMib > 0) {
                System.out.println(digestAlone(file, Math.min(length, (long) digestMib << 20)));
            }
            if (epoll != null) {
                for (Figures f : results) {
                    if (f.name().startsWith("rdma ")) {
                        System.out.println(String.format(Locale.ROOT, "file: ratio %s/epoll: MB/s %.2f x; CPU per "
                                        + "GB: server %.2f x, client %.2f x, machine %.2f x", f.name(),
                                f.megabytesPerSecond() / epoll.megabytesPerSecond(),
                                (double) f.serverCpuNs() / epoll.serverCpuNs(),
                                (double) f.clientCpuNs() / epoll.clientCpuNs(),
                                (double) f.machineCpuNs() / epoll.machineCpuNs()));
                    }
                }
            }
            return results;
        } finally {
            if (warmup != null) {
                Files.deleteIfExists(warmup);
            }
        }
    }

    /**
     * What SHA-256 alone costs the client: the file's first {@code bytes} read into one direct buffer, then digested
     * as the clients digest what they receive (the receiving is then the rest of their CPU time).
     */
    private static String digestAlone(Path file, long bytes) throws IOException {
        ByteBuffer buffer = ByteBuffer.allocateDirect((int) bytes);
        try (FileChannel in = FileChannel.open(file, StandardOpenOption.READ)) {
            while (buffer.hasRemaining() && in.read(buffer, buffer.position()) >= 0) {
                continue;
            }
        }
        buffer.flip();
        digest(buffer); // once to warm up
        long cpu = THREADS.getCurrentThreadCpuTime();
        long start = System.nanoTime();
        digest(buffer);
        long elapsed = System.nanoTime() - start;
        cpu = THREADS.getCurrentThreadCpuTime() - cpu;
        return String.format(Locale.ROOT, "file: SHA-256 alone  %d B from memory in %.2f s = %.2f MB/s; CPU s/GB: "
                        + "%.2f (of the clients' CPU above, this much is the digest)", bytes, elapsed / 1e9,
                bytes * 1e3 / elapsed, cpu / (double) bytes);
    }

    private static byte[] digest(ByteBuffer bytes) {
        MessageDigest md = FileChunkServer.newSha256();
        for (int at = 0, chunk = 64 << 10; at < bytes.limit(); at += chunk) {
            md.update(bytes.slice(at, Math.min(chunk, bytes.limit() - at)));
        }
        return md.digest();
    }

    private static void usage(String problem) {
        System.err.println("FileRegionCompare: " + problem);
        System.err.println("usage: FileRegionCompare --file F --sha256 HEX --rdma IP=LABEL[,IP=LABEL...]"
                + " [--tcp-host IP] [--transports epoll,rdma,tcp] [--provider P] [--warmup-mib N] [--digest-mib N]"
                + " [--timeout S]");
        System.exit(2);
    }

    /** The file as one DefaultFileRegion through FileChunkServer to FileChunkClient, each on its own 1-thread group. */
    private static Figures overNetty(Transport transport, String name, String host, Path file, byte[] sha256,
                                     long timeoutSeconds, boolean report) throws Exception {
        EventLoopGroup serverGroup = transport.newGroup(1);
        EventLoopGroup clientGroup = transport.newGroup(1);
        try {
            long length = Files.size(file);
            Thread serverThread = loopThread(serverGroup);
            Thread clientThread = loopThread(clientGroup);
            boolean rdma = name.startsWith("rdma");
            RdmaCounters serverBefore = rdma ? RdmaIoHandler.counters(serverGroup) : null;
            RdmaCounters clientBefore = rdma ? RdmaIoHandler.counters(clientGroup) : null;
            Channel server = FileChunkServer.start(transport, serverGroup, new InetSocketAddress(host, 0), file, length,
                    sha256, true);
            long serverCpu = cpu(serverThread);
            long clientCpu = cpu(clientThread);
            long machineCpu = machineCpuNs();
            FileChunkClient.Result result = FileChunkClient.receive(transport, clientGroup,
                    (InetSocketAddress) server.localAddress(), timeoutSeconds);
            long machine = machineCpuNs() - machineCpu;
            server.close().sync();
            // the server's loop settles the region's last completions after the client has its bytes: count them too
            serverGroup.submit(() -> { }).sync();
            Figures figures = new Figures(name, result.length(),
                    result.elapsedNs(), cpu(serverThread) - serverCpu, cpu(clientThread) - clientCpu, machine);
            check(name, result.length(), length, result.sha256(), sha256);
            if (report) {
                RdmaCounters s = RdmaIoHandler.counters(serverGroup);
                RdmaCounters c = RdmaIoHandler.counters(clientGroup);
                System.out.println(String.format(Locale.ROOT, "file: %s copies: server sent %d B, %d B of them "
                                + "read from the file into send staging, %d B copied into staging in all, %d B sent "
                                + "zero copy from registered buffers, %d SENDs; client received %d B, %d B copied out "
                                + "of receive buffers (%d messages), the rest lent; the server's loop blocked %d "
                                + "times and spun idle %d times, the client's %d and %d", name,
                        s.bytesSent() - serverBefore.bytesSent(), s.fileReadBytes() - serverBefore.fileReadBytes(),
                        s.copiedBytes() - serverBefore.copiedBytes(),
                        s.zeroCopyBytes() - serverBefore.zeroCopyBytes(),
                        s.messagesSent() - serverBefore.messagesSent(),
                        c.bytesReceived() - clientBefore.bytesReceived(),
                        c.receiveCopiedBytes() - clientBefore.receiveCopiedBytes(),
                        c.receiveCopies() - clientBefore.receiveCopies(), s.waits() - serverBefore.waits(),
                        s.spinsMissed() - serverBefore.spinsMissed(), c.waits() - clientBefore.waits(),
                        c.spinsMissed() - clientBefore.spinsMissed()));
            }
            return figures;
        } finally {
            clientGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
            serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
        }
    }

    /**
     * The reference without Netty: a blocking server thread writes the header and {@code FileChannel.transferTo}s the
     * file to the socket (sendfile), a blocking client thread reads into one direct buffer and digests it.
     */
    private static Figures overPlainTcp(String name, String host, Path file, byte[] sha256, long timeoutSeconds)
            throws Exception {
        long length = Files.size(file);
        try (ServerSocketChannel listener = ServerSocketChannel.open()) {
            listener.bind(new InetSocketAddress(host, 0));
            AtomicReference<Long> serverCpu = new AtomicReference<>();
            AtomicReference<Throwable> serverFailure = new AtomicReference<>();
            Thread server = new Thread(() -> {
                long start = THREADS.getCurrentThreadCpuTime();
                try (SocketChannel peer = listener.accept();
                     FileChannel in = FileChannel.open(file, StandardOpenOption.READ)) {
                    ByteBuffer header = ByteBuffer.allocate(8 + sha256.length).putLong(length).put(sha256).flip();
                    while (header.hasRemaining()) {
                        peer.write(header);
                    }
                    for (long sent = 0; sent < length; ) {
                        sent += in.transferTo(sent, length - sent, peer);
                    }
                } catch (Throwable t) {
                    serverFailure.set(t);
                }
                serverCpu.set(THREADS.getCurrentThreadCpuTime() - start);
            }, "tcp-server");
            server.start();
            long machineCpu = machineCpuNs();
            long clientCpu = THREADS.getCurrentThreadCpuTime();
            long start = System.nanoTime();
            long received = 0;
            byte[] digest;
            try (SocketChannel socket = SocketChannel.open(listener.getLocalAddress())) {
                start = System.nanoTime();
                ByteBuffer buffer = ByteBuffer.allocateDirect(256 << 10);
                MessageDigest md = FileChunkServer.newSha256();
                long announced = -1;
                while (announced < 0 || received < announced) {
                    if (socket.read(buffer) < 0) {
                        throw new IOException(name + ": connection closed after " + received + " bytes");
                    }
                    buffer.flip();
                    if (announced < 0) {
                        if (buffer.remaining() < 8 + sha256.length) {
                            buffer.compact();
                            continue;
                        }
                        announced = buffer.getLong();
                        buffer.position(buffer.position() + sha256.length);
                    }
                    received += buffer.remaining();
                    md.update(buffer);
                    buffer.clear();
                }
                digest = md.digest();
            }
            long elapsed = System.nanoTime() - start;
            long client = THREADS.getCurrentThreadCpuTime() - clientCpu;
            server.join(TimeUnit.SECONDS.toMillis(timeoutSeconds));
            if (server.isAlive()) {
                throw new IOException(name + ": the server thread still sends after " + timeoutSeconds + " s");
            }
            long machine = machineCpuNs() - machineCpu;
            if (serverFailure.get() != null) {
                throw new IOException(name + ": the server failed", serverFailure.get());
            }
            check(name, received, length, HexFormat.of().formatHex(digest), sha256);
            return new Figures(name + " (plain)", received, elapsed, serverCpu.get(), client, machine);
        }
    }

    private static void check(String name, long received, long length, String actual, byte[] expected) {
        String wanted = HexFormat.of().formatHex(expected);
        if (received != length || !actual.equals(wanted)) {
            throw new IllegalStateException(name + ": received " + received + " bytes with SHA-256 " + actual
                    + "; the file has " + length + " bytes, SHA-256 " + wanted);
        }
    }

    private static Thread loopThread(EventLoopGroup group) throws InterruptedException, ExecutionException {
        return group.next().submit(Thread::currentThread).get();
    }

    private static long cpu(Thread thread) {
        return THREADS.getThreadCpuTime(thread.getId());
    }

    /** CPU time of the whole machine so far (every CPU's user, nice, system, irq, softirq), from /proc/stat. */
    private static long machineCpuNs() throws IOException {
        String[] f = Files.readAllLines(Paths.get("/proc/stat")).get(0).trim().split("\\s+");
        long ticks = 0;
        for (int i : new int[] {1, 2, 3, 6, 7}) {
            ticks += Long.parseLong(f[i]);
        }
        return ticks * 10_000_000L; // USER_HZ is 100 on Linux
    }
}
