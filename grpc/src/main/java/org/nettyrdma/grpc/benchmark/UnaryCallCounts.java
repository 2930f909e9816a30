package org.nettyrdma.grpc.benchmark;

import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.netty.channel.Channel;
import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelFactory;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelPromise;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandle;
import io.netty.channel.IoHandler;
import io.netty.channel.IoHandlerContext;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.IoRegistration;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.util.concurrent.DefaultThreadFactory;
import org.nettyrdma.channel.RdmaCounters;
import org.nettyrdma.channel.RdmaIoHandler;
import org.nettyrdma.channel.RdmaIoHandlerConfig;
import org.nettyrdma.grpc.sample.Chunk;
import org.nettyrdma.grpc.sample.EchoMethods;
import org.nettyrdma.grpc.sample.EchoService;
import org.nettyrdma.grpc.sample.PayloadPattern;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.lang.management.ThreadMXBean;
import java.net.InetSocketAddress;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;

/**
 * What one sequential unary call costs each side, counted rather than timed (the counts do not move with the
 * machine's load): event-loop iterations and waits, tasks handed to a loop from other threads, the writes and flushes
 * that reach the transport, the reads it delivers, and for RDMA the transport's own counters (SENDs, completions,
 * busy-polls). Same service and client code as {@link GrpcBenchmark}, emulated provider on 127.0.0.1.
 *
 * <pre>
 * java -cp grpc/target/netty-rdma-grpc-0.1.0-SNAPSHOT-benchmark.jar org.nettyrdma.grpc.benchmark.UnaryCallCounts \
 *     [--transports=rdma,epoll] [--size=16] [--calls=5000]
 * </pre>
 */
public final class UnaryCallCounts {
    private static final String[] NAMES = {"loop iterations (IoHandler.run)", "waits (run about to block)",
        "wake-ups from other threads (tasks)", "writes reaching the transport", "flushes reaching the transport",
        "reads delivered (channelRead)"};

    private UnaryCallCounts() {
    }

    /** One side's counts; the loop and the pipeline's head write them, the caller reads them between runs. */
    private static final class Counts {
        final LongAdder[] c = new LongAdder[NAMES.length];

        Counts() {
            for (int i = 0; i < c.length; i++) {
                c[i] = new LongAdder();
            }
        }

        long[] snapshot() {
            long[] s = new long[c.length];
            for (int i = 0; i < c.length; i++) {
                s[i] = c[i].sum();
            }
            return s;
        }
    }

    public static void main(String[] args) throws Exception {
        String[] transports = {"rdma", "epoll"};
        int size = 16;
        int calls = 5000;
        for (String a : args) {
            if (a.startsWith("--transports=")) {
                transports = a.substring("--transports=".length()).split(",");
            } else if (a.startsWith("--size=")) {
                size = Integer.parseInt(a.substring("--size=".length()));
            } else if (a.startsWith("--calls=")) {
                calls = Integer.parseInt(a.substring("--calls=".length()));
            } else {
                throw new IllegalArgumentException("unknown option " + a);
            }
        }
        System.out.printf(Locale.ROOT, "per sequential unary call of %d B, %d calls after %d to warm up (load average "
                + "%.1f)%n", size, calls, calls / 2,
                ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage());
        for (String t : transports) {
            run(BenchTransport.byLabel(t.trim()), size, calls);
        }
    }

    private static void run(BenchTransport transport, int size, int calls) throws Exception {
        Counts server = new Counts();
        Counts client = new Counts();
        String provider = RdmaIoHandlerConfig.PROVIDER_EMULATED;
        EventLoopGroup serverGroup = new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory("server", true),
                counting(transport.ioHandlerFactory(provider), server));
        EventLoopGroup clientGroup = new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory("client", true),
                counting(transport.ioHandlerFactory(provider), client));
        HeadCounter serverHead = new HeadCounter(server);
        HeadCounter clientHead = new HeadCounter(client);
        ChannelFactory<ServerChannel> serverChannels = () -> {
            ServerChannel ch = transport.newServerChannel();
            ch.pipeline().addFirst(new ChannelInboundHandlerAdapter() {
                @Override
                public void channelRead(ChannelHandlerContext ctx, Object child) {
                    ((Channel) child).pipeline().addFirst(serverHead); // before gRPC's handlers: next to the transport
                    ctx.fireChannelRead(child);
                }
            });
            return ch;
        };
        ChannelFactory<Channel> clientChannels = () -> {
            Channel ch = transport.newChannel();
            ch.pipeline().addFirst(clientHead);
            return ch;
        };
        Server s = null;
        ManagedChannel channel = null;
        try {
            s = transport.configure(NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0)), serverGroup)
                    .channelFactory(serverChannels).addService(EchoService.definition()).build().start();
            int port = ((InetSocketAddress) s.getListenSockets().get(0)).getPort();
            channel = transport.configure(NettyChannelBuilder.forAddress(new InetSocketAddress("127.0.0.1", port)),
                    clientGroup).channelFactory(clientChannels).usePlaintext().build();
            Chunk request = PayloadPattern.chunk(1, size);
            for (int i = 0; i < calls / 2; i++) {
                ClientCalls.blockingUnaryCall(channel, EchoMethods.UNARY, CallOptions.DEFAULT, request);
            }
            long serverCpu0 = loopCpuNanos("server-");
            long clientCpu0 = loopCpuNanos("client-");
            long[] s0 = server.snapshot();
            long[] c0 = client.snapshot();
            RdmaCounters rs0 = RdmaIoHandler.counters(serverGroup);
            RdmaCounters rc0 = RdmaIoHandler.counters(clientGroup);
            long[] ns = new long[calls];
            for (int i = 0; i < calls; i++) {
                long start = System.nanoTime();
                Chunk echo = ClientCalls.blockingUnaryCall(channel, EchoMethods.UNARY, CallOptions.DEFAULT, request);
                ns[i] = System.nanoTime() - start;
                if (echo.getPayload().size() != size) {
                    throw new IllegalStateException("echo of " + echo.getPayload().size() + " bytes, sent " + size);
                }
            }
            long serverCpu = loopCpuNanos("server-") - serverCpu0;
            long clientCpu = loopCpuNanos("client-") - clientCpu0;
            long[] s1 = server.snapshot();
            long[] c1 = client.snapshot();
            RdmaCounters rs1 = RdmaIoHandler.counters(serverGroup);
            RdmaCounters rc1 = RdmaIoHandler.counters(clientGroup);
            Arrays.sort(ns);
            System.out.printf(Locale.ROOT, "%n%s: p50 %.1f µs (timed, for reference only)%n%-40s %8s %8s%n",
                    transport.label, ns[calls / 2] / 1e3, "per call", "server", "client");
            for (int i = 0; i < NAMES.length; i++) {
                line(NAMES[i], s1[i] - s0[i], c1[i] - c0[i], calls);
            }
            System.out.printf(Locale.ROOT, "%-40s %8.1f %8.1f%n", "loop thread CPU, µs (moves with load)",
                    serverCpu / 1e3 / calls, clientCpu / 1e3 / calls);
            if (transport.isRdma()) {
                line("SENDs", rs1.messagesSent() - rs0.messagesSent(), rc1.messagesSent() - rc0.messagesSent(),
                        calls);
                line("completions", rs1.completions() - rs0.completions(), rc1.completions() - rc0.completions(),
                        calls);
                line("waits (RdmaCounters)", rs1.waits() - rs0.waits(), rc1.waits() - rc0.waits(), calls);
                line("busy-polls that found work", rs1.spinsFound() - rs0.spinsFound(),
                        rc1.spinsFound() - rc0.spinsFound(), calls);
                line("busy-polls that found nothing", rs1.spinsMissed() - rs0.spinsMissed(),
                        rc1.spinsMissed() - rc0.spinsMissed(), calls);
            }
        } finally {
            if (channel != null) {
                channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            }
            if (s != null) {
                s.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            }
            clientGroup.shutdownGracefully(0, 2, TimeUnit.SECONDS).await(15, TimeUnit.SECONDS);
            serverGroup.shutdownGracefully(0, 2, TimeUnit.SECONDS).await(15, TimeUnit.SECONDS);
        }
    }

    /** CPU time so far of the live threads whose names start with {@code prefix} (this run's event loop). */
    private static long loopCpuNanos(String prefix) {
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        long total = 0;
        for (ThreadInfo info : threads.getThreadInfo(threads.getAllThreadIds())) {
            if (info != null && info.getThreadName().startsWith(prefix)) {
                total += Math.max(0, threads.getThreadCpuTime(info.getThreadId()));
            }
        }
        return total;
    }

    private static void line(String name, long server, long client, int calls) {
        System.out.printf(Locale.ROOT, "%-40s %8.2f %8.2f%n", name, (double) server / calls, (double) client / calls);
    }

    /** Counts the loop's iterations, the ones that were about to block, and wake-ups from other threads. */
    private static IoHandlerFactory counting(IoHandlerFactory factory, Counts counts) {
        return executor -> {
            IoHandler handler = factory.newHandler(executor);
            return new IoHandler() {
                private boolean waited;
                private IoHandlerContext outer;
                private final IoHandlerContext context = new IoHandlerContext() {
                    @Override
                    public boolean canBlock() {
                        return outer.canBlock();
                    }

                    @Override
                    public long delayNanos(long currentTimeNanos) {
                        waited = true; // both handlers ask it just before they block
                        return outer.delayNanos(currentTimeNanos);
                    }

                    @Override
                    public long deadlineNanos() {
                        waited = true;
                        return outer.deadlineNanos();
                    }

                    @Override
                    public void reportActiveIoTime(long activeNanos) {
                        outer.reportActiveIoTime(activeNanos);
                    }

                    @Override
                    public boolean shouldReportActiveIoTime() {
                        return outer.shouldReportActiveIoTime();
                    }
                };

                @Override
                public void initialize() {
                    handler.initialize();
                }

                @Override
                public int run(IoHandlerContext ctx) {
                    counts.c[0].increment();
                    outer = ctx;
                    waited = false;
                    int work = handler.run(context);
                    if (waited) {
                        counts.c[1].increment();
                    }
                    return work;
                }

                @Override
                public void prepareToDestroy() {
                    handler.prepareToDestroy();
                }

                @Override
                public void destroy() {
                    handler.destroy();
                }

                @Override
                public IoRegistration register(IoHandle handle) throws Exception {
                    return handler.register(handle);
                }

                @Override
                public void wakeup() {
                    counts.c[2].increment(); // Netty calls it for a task from another thread
                    handler.wakeup();
                }

                @Override
                public boolean isCompatible(Class<? extends IoHandle> handleType) {
                    return handler.isCompatible(handleType);
                }
            };
        };
    }

    /** At the head of a pipeline (next to the transport): what gRPC's HTTP/2 handler writes, flushes and reads. */
    @ChannelHandler.Sharable
    private static final class HeadCounter extends ChannelDuplexHandler {
        private final Counts counts;

        HeadCounter(Counts counts) {
            this.counts = counts;
        }

        @Override
        public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
            counts.c[3].increment();
            ctx.write(msg, promise);
        }

        @Override
        public void flush(ChannelHandlerContext ctx) {
            counts.c[4].increment();
            ctx.flush();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            counts.c[5].increment();
            ctx.fireChannelRead(msg);
        }
    }
}
