package org.nettyrdma.channel;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.CompositeByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandler;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.concurrent.DefaultThreadFactory;
import io.netty.util.concurrent.EventExecutor;
import io.netty.util.concurrent.Future;
import io.netty.util.concurrent.SingleThreadEventExecutor;

import java.lang.reflect.Method;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.List;
import java.util.Queue;
import java.util.Random;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import java.util.function.LongSupplier;
import java.util.function.Supplier;
import java.util.zip.CRC32C;

/**
 * Shared fixture of the RdmaTransport*Test classes: event loop groups on the provider under test, bootstraps, a
 * deterministic byte stream (so that every received byte can be checked against where it belongs), a back-pressured
 * stream writer and a checking stream reader, and bounded waits that fail with a description of the state.
 *
 * <p>By default the tests run on the emulated provider, servers on 127.0.0.1 (which the emulated fabric's device owns),
 * at full size. System properties run them elsewhere, e.g. on a real device in the VM (transport-rdma/src/test/vm/
 * transport.sh): {@value #PROVIDER_PROPERTY} ({@code emulated} or {@code native}), {@value #ADDRESS_PROPERTY} (the
 * IP servers bind to and clients connect to: the device's), {@value #SCALE_PROPERTY} (a factor for the large tests:
 * byte counts times the scale, connection counts times its square root) and {@value #BLACKHOLE_PROPERTY} (addresses
 * that resolve and never answer, for the connect time-out on the native provider). They are read when used, so that a
 * runner can change the address between devices.
 */
final class RdmaTestSupport {
    static final String PROVIDER_PROPERTY = "org.nettyrdma.test.provider";
    static final String ADDRESS_PROPERTY = "org.nettyrdma.test.address";
    static final String SCALE_PROPERTY = "org.nettyrdma.test.scale";
    static final String BLACKHOLE_PROPERTY = "org.nettyrdma.test.blackhole";

    private RdmaTestSupport() {
    }

    /** The provider under test: emulated unless {@value #PROVIDER_PROPERTY} says. */
    static String provider() {
        String p = System.getProperty(PROVIDER_PROPERTY, RdmaIoHandlerConfig.PROVIDER_EMULATED);
        if (!RdmaIoHandlerConfig.PROVIDER_EMULATED.equals(p) && !RdmaIoHandlerConfig.PROVIDER_NATIVE.equals(p)) {
            throw new IllegalArgumentException(PROVIDER_PROPERTY + "=" + p + " (expected emulated or native)");
        }
        return p;
    }

    static boolean isNative() {
        return RdmaIoHandlerConfig.PROVIDER_NATIVE.equals(provider());
    }

    /**
     * An address of an emulated iWARP device (siw's limits: no immediate data, no memory windows) on the default
     * emulated fabric, added on first use: for what differs on iWARP (connection set-up, close) on the host.
     */
    static synchronized InetAddress emulatedIwarpAddress() throws java.net.UnknownHostException {
        InetAddress address = InetAddress.getByName("10.99.0.2");
        if (!emulatedIwarpAdded) {
            org.nettyrdma.verbs.emulated.EmulatedFabric.defaultFabric().addDevice("emuiw0",
                    org.nettyrdma.verbs.emulated.EmulatedFabric.defaultAttributes(
                            org.nettyrdma.verbs.DeviceAttributes.Transport.IWARP), address);
            emulatedIwarpAdded = true;
        }
        return address;
    }

    private static boolean emulatedIwarpAdded;

    /** The IP servers bind to and clients connect to: 127.0.0.1 unless {@value #ADDRESS_PROPERTY} says. */
    static String address() {
        return System.getProperty(ADDRESS_PROPERTY, "127.0.0.1");
    }

    /** Where servers bind: {@link #address()}, any port. */
    static InetSocketAddress anyPort() {
        return new InetSocketAddress(address(), 0);
    }

    /** The size factor of the large tests: 1 unless {@value #SCALE_PROPERTY} says. */
    static double scale() {
        double scale = Double.parseDouble(System.getProperty(SCALE_PROPERTY, "1"));
        if (!(scale > 0 && scale <= 1)) {
            throw new IllegalArgumentException(SCALE_PROPERTY + "=" + scale + " (expected 0 < scale <= 1)");
        }
        return scale;
    }

    /** {@code bytes} times the {@linkplain #scale() scale}, rounded down to a multiple of {@code unit} (at least 1). */
    static long scaledBytes(long bytes, long unit) {
        return Math.max(unit, (long) (bytes * scale()) / unit * unit);
    }

    /**
     * {@code count} connections times the square root of the {@linkplain #scale() scale} (connection set-up costs
     * more than bytes do: a scale of 1/16 turns 1 GiB into 64 MiB and 200 connections into 50), at least one.
     */
    static int scaledConnections(int count) {
        return Math.max(1, (int) Math.round(count * Math.sqrt(scale())));
    }

    /**
     * The first address of {@value #BLACKHOLE_PROPERTY} (comma-separated) on the /24 (IPv4) or /64 (IPv6) of
     * {@code address}, or null: an address that resolves and never answers, for the connect time-out.
     */
    static String blackholeNear(String address) {
        byte[] own;
        try {
            own = InetAddress.getByName(address).getAddress();
        } catch (UnknownHostException e) {
            throw new IllegalArgumentException(ADDRESS_PROPERTY + "=" + address, e);
        }
        for (String candidate : System.getProperty(BLACKHOLE_PROPERTY, "").split(",")) {
            if (candidate.isBlank()) {
                continue;
            }
            byte[] b;
            try {
                b = InetAddress.getByName(candidate.trim()).getAddress();
            } catch (UnknownHostException e) {
                throw new IllegalArgumentException(BLACKHOLE_PROPERTY + ": " + candidate, e);
            }
            int prefix = own.length == 4 ? 3 : 8;
            if (b.length == own.length && Arrays.equals(b, 0, prefix, own, 0, prefix)) {
                return candidate.trim();
            }
        }
        return null;
    }

    /** The settings of the tests' event loops: the provider under test, no busy polling. */
    static RdmaIoHandlerConfig config() {
        return new RdmaIoHandlerConfig().setProvider(provider()).setBusyPollNanos(0);
    }

    /**
     * As {@link #config()}, each connection posting receives of its own whatever {@code -Dorg.nettyrdma.sharedReceiveQueue}
     * says: for tests that count a connection's receive window (16 credits from the start) or its registered bytes
     * (16 receive buffers), which pooled credits change by design (docs/testing.md).
     */
    static RdmaIoHandlerConfig ownReceivesConfig() {
        return config().setSharedReceiveQueue(false);
    }

    /** The connection's credit window, to read on its loop (nothing else exposes it). */
    static CreditWindow credits(RdmaSocketChannel ch) throws ReflectiveOperationException {
        return (CreditWindow) connectionField(ch, "credits");
    }

    /** Field {@code name} of the channel's {@link RdmaConnection}, to read on its loop. */
    static Object connectionField(RdmaSocketChannel ch, String name) throws ReflectiveOperationException {
        java.lang.reflect.Field conn = RdmaSocketChannel.class.getDeclaredField("conn");
        conn.setAccessible(true);
        java.lang.reflect.Field field = RdmaConnection.class.getDeclaredField(name);
        field.setAccessible(true);
        return field.get(conn.get(ch));
    }

    /** A group of RDMA event loops on the provider under test. */
    static MultiThreadIoEventLoopGroup newGroup(int threads, String name) {
        return newGroup(threads, name, null);
    }

    /** As {@link #newGroup(int, String)}, and adds each loop's {@link RdmaIoHandler} to {@code handlers}. */
    static MultiThreadIoEventLoopGroup newGroup(int threads, String name, List<RdmaIoHandler> handlers) {
        return newGroup(threads, name, handlers, config());
    }

    /** As {@link #newGroup(int, String, List)}, with {@code config} (from {@link #config()}). */
    static MultiThreadIoEventLoopGroup newGroup(int threads, String name, List<RdmaIoHandler> handlers,
                                                RdmaIoHandlerConfig config) {
        IoHandlerFactory factory = RdmaIoHandler.newFactory(config);
        IoHandlerFactory capturing = executor -> {
            IoHandler h = factory.newHandler(executor);
            if (handlers != null) {
                handlers.add((RdmaIoHandler) h);
            }
            return h;
        };
        return new MultiThreadIoEventLoopGroup(threads, new DefaultThreadFactory(name, true), capturing);
    }

    static void shutdown(EventLoopGroup... groups) throws InterruptedException {
        for (EventLoopGroup g : groups) {
            if (g != null) {
                g.shutdownGracefully(0, 5, TimeUnit.SECONDS);
            }
        }
        for (EventLoopGroup g : groups) {
            if (g != null && !g.terminationFuture().await(15, TimeUnit.SECONDS)) {
                throw new AssertionError("event loop group did not terminate within 15 s");
            }
        }
    }

    static ServerBootstrap serverBootstrap(EventLoopGroup parent, EventLoopGroup child) {
        return new ServerBootstrap().group(parent, child).channel(RdmaServerSocketChannel.class);
    }

    static Bootstrap clientBootstrap(EventLoopGroup group) {
        return new Bootstrap().group(group).channel(RdmaSocketChannel.class);
    }

    /**
     * {@link #serverBootstrap} whose connections have exactly the queues and credits of the options they are given: no
     * READ rendezvous, whatever {@code -Dorg.nettyrdma.rendezvous} says (it adds receives and send-queue entries and
     * turns pooled credits off), for the tests that count them.
     */
    static ServerBootstrap plainServerBootstrap(EventLoopGroup parent, EventLoopGroup child) {
        return serverBootstrap(parent, child).childOption(RdmaChannelOption.RENDEZVOUS, false);
    }

    /** {@link #clientBootstrap} with no READ rendezvous offered: see {@link #plainServerBootstrap}. */
    static Bootstrap plainClientBootstrap(EventLoopGroup group) {
        return clientBootstrap(group).option(RdmaChannelOption.RENDEZVOUS, false);
    }

    /**
     * Registrations on the loops of {@code group}, as Netty's {@code SingleThreadIoEventLoop} counts them in its
     * registration wrapper (a channel's registration ends when the transport cancels it). Netty 4.2 has no public
     * accessor for IO event loops ({@code registeredChannels()} returns -1 there), so this reads the protected
     * {@code SingleThreadEventExecutor.getNumOfRegisteredChannels()}.
     */
    static int registeredChannels(EventLoopGroup group) {
        int n = 0;
        for (EventExecutor e : group) {
            try {
                n += (Integer) NUM_REGISTERED.invoke(e);
            } catch (ReflectiveOperationException ex) {
                throw new AssertionError("cannot read the registration count of " + e, ex);
            }
        }
        return n;
    }

    private static final Method NUM_REGISTERED;

    static {
        try {
            NUM_REGISTERED = SingleThreadEventExecutor.class.getDeclaredMethod("getNumOfRegisteredChannels");
            NUM_REGISTERED.setAccessible(true);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** Waits for {@code future}; a hang fails the test with {@code what} and the state described by {@code state}. */
    static <T> T await(Future<T> future, long timeoutMillis, String what, Supplier<String> state)
            throws InterruptedException {
        if (!future.await(timeoutMillis, TimeUnit.MILLISECONDS)) {
            throw new AssertionError(what + ": not done within " + timeoutMillis + " ms; " + state.get());
        }
        if (!future.isSuccess()) {
            throw new AssertionError(what + " failed; " + state.get(), future.cause());
        }
        return future.getNow();
    }

    static <T> T await(CompletableFuture<T> future, long timeoutMillis, String what, Supplier<String> state)
            throws InterruptedException {
        try {
            return future.get(timeoutMillis, TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            throw new AssertionError(what + ": not done within " + timeoutMillis + " ms; " + state.get());
        } catch (ExecutionException e) {
            throw new AssertionError(what + " failed; " + state.get(), e.getCause());
        }
    }

    /**
     * How long a transfer may go without moving a byte before {@link #awaitMoving} calls it stalled: 10 s here, 30 s on
     * the native provider (the VM's Java is 15-27 times slower).
     */
    static long stallMillis() {
        return isNative() ? 30_000 : 10_000;
    }

    /**
     * Waits for {@code future} while {@code progress} (e.g. bytes received on both ends) keeps moving. Fails, with
     * {@code what} and the state, when progress has not changed for {@link #stallMillis()} ("stalled": a dead
     * connection fails in seconds, whatever the size) or when {@code limitMillis} have passed (at least twice the
     * stall time, so that a stall is told as one).
     */
    static <T> T awaitMoving(CompletableFuture<T> future, LongSupplier progress, long limitMillis, String what,
                             Supplier<String> state) throws InterruptedException {
        long stallNanos = TimeUnit.MILLISECONDS.toNanos(stallMillis());
        long limit = Math.max(limitMillis, 2 * stallMillis());
        long start = System.nanoTime();
        long lastChange = start;
        long last = progress.getAsLong();
        while (true) {
            try {
                return future.get(20, TimeUnit.MILLISECONDS);
            } catch (TimeoutException e) {
                long now = System.nanoTime();
                long p = progress.getAsLong();
                if (p != last) {
                    last = p;
                    lastChange = now;
                } else if (now - lastChange > stallNanos) {
                    throw new AssertionError(what + ": the connection stalled: nothing moved for " + stallMillis()
                            + " ms (progress " + p + ", " + (now - start) / 1_000_000 + " ms in); " + state.get());
                }
                if (now - start > TimeUnit.MILLISECONDS.toNanos(limit)) {
                    throw new AssertionError(what + ": not done within " + limit + " ms (progress " + p
                            + ", last moved " + (now - lastChange) / 1_000_000 + " ms before); " + state.get());
                }
            } catch (ExecutionException e) {
                throw new AssertionError(what + " failed; " + state.get(), e.getCause());
            }
        }
    }

    /**
     * Polls {@code condition} until it holds. The deadline only turns a hang into a failure that says what did not
     * happen; it is far above what the condition needs.
     */
    static void awaitCondition(String what, BooleanSupplier condition, long timeoutMillis, Supplier<String> state)
            throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError(what + ": not reached within " + timeoutMillis + " ms; " + state.get());
            }
            Thread.sleep(1);
        }
    }

    /** As {@link #awaitCondition}, with the condition read on {@code channel}'s event loop (its state is the loop's). */
    static void awaitOnLoop(String what, Channel channel, Callable<Boolean> condition, long timeoutMillis,
                            Supplier<String> state) throws InterruptedException {
        awaitCondition(what, () -> {
            try {
                return onLoop(channel, condition);
            } catch (Exception e) {
                throw new IllegalStateException(what + ": the condition could not be read on the loop", e);
            }
        }, timeoutMillis, state);
    }

    /** Runs {@code task} on {@code channel}'s event loop and returns its result. */
    static <T> T onLoop(Channel channel, Callable<T> task) throws Exception {
        return onLoop(channel.eventLoop(), task);
    }

    /** Runs {@code task} on {@code loop} and returns its result. */
    static <T> T onLoop(EventExecutor loop, Callable<T> task) throws Exception {
        return loop.submit(task).get(10, TimeUnit.SECONDS);
    }

    /** Bytes in the channel's outbound buffer (written, not yet acknowledged by a send completion); -1 when gone. */
    static long pendingWriteBytes(Channel channel) {
        ChannelOutboundBuffer out = channel.unsafe().outboundBuffer();
        return out == null ? -1 : out.totalPendingWriteBytes();
    }

    /** CRC32C over the readable bytes of {@code buf}, without changing its indices. */
    static void crc(CRC32C crc, ByteBuf buf) {
        if (!buf.isReadable()) {
            return;
        }
        for (ByteBuffer b : buf.nioBuffers(buf.readerIndex(), buf.readableBytes())) {
            crc.update(b);
        }
    }

    /**
     * Whether a connect failed because the local port RDMA CM picked is held by a TCP socket (iWARP, whose connections
     * are TCP connections of the host: a port of an earlier connection in TIME_WAIT); connecting again is the remedy.
     */
    static boolean isLocalPortInUse(Throwable connectFailure) {
        for (Throwable t = connectFailure; t != null; t = t.getCause()) {
            if (String.valueOf(t.getMessage()).contains("in use by a TCP socket")) {
                return true;
            }
        }
        return false;
    }

    static String describe(Throwable t) {
        return t == null ? "null" : t.getClass().getName() + ": " + t.getMessage();
    }

    /**
     * A deterministic byte stream: byte {@code i} of the stream is {@code table[i % period]} with a random table whose
     * length is odd and prime-ish, so that shifted, dropped, duplicated or reordered chunks never compare equal by
     * accident. Reads and writes work chunk-wise on NIO views (one call per buffer, cheap under paranoid leak
     * detection).
     */
    static final class Pattern {
        final int period;
        final int maxChunk;
        private final byte[] table;

        Pattern(long seed, int period, int maxChunk) {
            this.period = period;
            this.maxChunk = maxChunk;
            table = new byte[period + maxChunk];
            byte[] first = new byte[period];
            new Random(seed).nextBytes(first);
            for (int i = 0; i < table.length; i++) {
                table[i] = first[i % period];
            }
        }

        static Pattern standard() {
            return new Pattern(0x5EED_0001L, (1 << 20) + 7, 1 << 20);
        }

        private int at(long streamOffset) {
            return (int) (streamOffset % period);
        }

        /** Appends stream bytes {@code [streamOffset, streamOffset + len)} to {@code dst}. */
        void writeTo(ByteBuf dst, long streamOffset, int len) {
            while (len > 0) {
                int n = Math.min(len, maxChunk);
                dst.writeBytes(table, at(streamOffset), n);
                streamOffset += n;
                len -= n;
            }
        }

        byte[] bytes(long streamOffset, int len) {
            byte[] b = new byte[len];
            for (int done = 0; done < len; ) {
                int n = Math.min(len - done, maxChunk);
                System.arraycopy(table, at(streamOffset + done), b, done, n);
                done += n;
            }
            return b;
        }

        /**
         * Whether the readable bytes of {@code buf} are the stream's bytes at {@code streamOffset}: -1 if they are,
         * else the index (relative to the readable bytes) of the first byte that differs.
         */
        long mismatch(ByteBuf buf, long streamOffset) {
            if (!buf.isReadable()) {
                return -1;
            }
            long done = 0;
            for (ByteBuffer b : buf.nioBuffers(buf.readerIndex(), buf.readableBytes())) {
                int len = b.remaining();
                int base = b.position();
                for (int p = 0; p < len; ) {
                    int n = Math.min(len - p, maxChunk);
                    ByteBuffer got = b.slice(base + p, n);
                    ByteBuffer want = ByteBuffer.wrap(table, at(streamOffset + done), n);
                    int m = got.mismatch(want);
                    if (m >= 0) {
                        return done + m;
                    }
                    p += n;
                    done += n;
                }
            }
            return -1;
        }
    }

    /** The kinds of buffer a {@link StreamWriter} writes. */
    enum Kind {
        /** An unpooled heap buffer whose readable bytes start after a few bytes of garbage. */
        HEAP,
        /** An unpooled (unregistered) direct buffer. */
        DIRECT,
        /** A composite of heap, direct and registered components. */
        COMPOSITE,
        /** A buffer of {@link RdmaByteBufAllocator#DEFAULT} (registered memory). */
        REGISTERED,
        /** A retained slice in the middle of a registered buffer. */
        REGISTERED_SLICE,
        /** A composite of registered slices of 4 KiB each (the last one shorter if the size is not a multiple). */
        REGISTERED_SLICES_COMPOSITE
    }

    /** Picks the sizes and kinds of the writes of a stream. */
    interface WritePlan {
        int nextSize(Random random);

        Kind nextKind(Random random);
    }

    /** Sizes from 1 B to {@code max}, spread over four decades, and every kind of buffer. */
    static WritePlan mixedPlan(int max) {
        return new WritePlan() {
            @Override
            public int nextSize(Random r) {
                switch (r.nextInt(4)) {
                    case 0:
                        return 1 + r.nextInt(Math.min(64, max));
                    case 1:
                        return 1 + r.nextInt(Math.min(4096, max));
                    case 2:
                        return 1 + r.nextInt(Math.min(65536, max));
                    default:
                        return 1 + r.nextInt(max);
                }
            }

            @Override
            public Kind nextKind(Random r) {
                return Kind.values()[r.nextInt(Kind.values().length)];
            }
        };
    }

    static WritePlan fixedPlan(int size, Kind kind) {
        return new WritePlan() {
            @Override
            public int nextSize(Random random) {
                return size;
            }

            @Override
            public Kind nextKind(Random random) {
                return kind;
            }
        };
    }

    /** A buffer of {@code kind} holding stream bytes {@code [offset, offset + size)}. */
    static ByteBuf newBuffer(Kind kind, Pattern pattern, long offset, int size, Random r) {
        switch (kind) {
            case HEAP: {
                int pad = r.nextInt(16);
                ByteBuf b = Unpooled.buffer(pad + size);
                b.writeZero(pad);
                b.skipBytes(pad);
                pattern.writeTo(b, offset, size);
                return b;
            }
            case DIRECT: {
                ByteBuf b = Unpooled.directBuffer(size);
                pattern.writeTo(b, offset, size);
                return b;
            }
            case COMPOSITE: {
                CompositeByteBuf c = Unpooled.compositeBuffer();
                int parts = size < 3 ? 1 : 1 + r.nextInt(3);
                int done = 0;
                for (int i = 0; i < parts; i++) {
                    int n = i == parts - 1 ? size - done : 1 + r.nextInt(size - done - (parts - 1 - i));
                    Kind k = new Kind[] {Kind.HEAP, Kind.DIRECT, Kind.REGISTERED}[r.nextInt(3)];
                    c.addComponent(true, newBuffer(k, pattern, offset + done, n, r));
                    done += n;
                }
                return c;
            }
            case REGISTERED: {
                ByteBuf b = RdmaByteBufAllocator.DEFAULT.directBuffer(size);
                pattern.writeTo(b, offset, size);
                return b;
            }
            case REGISTERED_SLICE: {
                int pad = 1 + r.nextInt(64);
                ByteBuf whole = RdmaByteBufAllocator.DEFAULT.directBuffer(pad + size + pad);
                whole.writeZero(pad);
                pattern.writeTo(whole, offset, size);
                whole.writeZero(pad);
                ByteBuf slice = whole.retainedSlice(pad, size);
                whole.release();
                return slice;
            }
            case REGISTERED_SLICES_COMPOSITE: {
                CompositeByteBuf c = Unpooled.compositeBuffer(Integer.MAX_VALUE);
                for (int done = 0; done < size; done += 4096) {
                    int n = Math.min(4096, size - done);
                    c.addComponent(true, newBuffer(Kind.REGISTERED_SLICE, pattern, offset + done, n, r));
                }
                return c;
            }
            default:
                throw new AssertionError(kind);
        }
    }

    /**
     * Writes {@code total} bytes of a {@link Pattern} stream with back-pressure: only while the channel is writable,
     * resuming in {@code channelWritabilityChanged}. Keeps a CRC32C of what it handed to the channel. {@link #done}
     * completes when every write's future has succeeded (or fails with the first write's failure).
     */
    static class StreamWriter extends ChannelInboundHandlerAdapter {
        final long total;
        final Pattern pattern;
        final WritePlan plan;
        final Random random;
        final CRC32C crc = new CRC32C();
        final CompletableFuture<Void> done = new CompletableFuture<>();
        final Queue<Throwable> exceptions = new ConcurrentLinkedQueue<>();
        final AtomicLong succeededWrites = new AtomicLong();
        volatile long written;
        volatile long writes;
        volatile long writabilityChanges;
        private final ChannelFutureListener writeListener = this::onWriteDone;

        StreamWriter(long total, Pattern pattern, WritePlan plan, long seed) {
            this.total = total;
            this.pattern = pattern;
            this.plan = plan;
            this.random = new Random(seed);
        }

        private void onWriteDone(ChannelFuture f) {
            if (f.isSuccess()) {
                succeededWrites.incrementAndGet();
                if (written == total && succeededWrites.get() == writes) {
                    done.complete(null);
                }
            } else {
                done.completeExceptionally(new AssertionError("a write failed after " + succeededWrites.get()
                        + " writes succeeded", f.cause()));
            }
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) throws Exception {
            writeMore(ctx);
            super.channelActive(ctx);
        }

        @Override
        public void channelWritabilityChanged(ChannelHandlerContext ctx) throws Exception {
            writabilityChanges++;
            if (ctx.channel().isWritable()) {
                writeMore(ctx);
            }
            super.channelWritabilityChanged(ctx);
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            exceptions.add(cause);
            done.completeExceptionally(cause);
        }

        void writeMore(ChannelHandlerContext ctx) {
            boolean wrote = false;
            while (written < total && ctx.channel().isWritable()) {
                int size = (int) Math.min(plan.nextSize(random), total - written);
                ByteBuf buf = newBuffer(plan.nextKind(random), pattern, written, size, random);
                crc(crc, buf);
                written += size;
                writes++;
                ctx.write(buf).addListener(writeListener);
                wrote = true;
            }
            if (wrote) {
                ctx.flush();
            }
        }

        String state() {
            return "writer{written=" + written + "/" + total + ", writes=" + writes + ", succeeded="
                    + succeededWrites.get() + ", writabilityChanges=" + writabilityChanges + ", exceptions="
                    + exceptions + '}';
        }
    }

    /**
     * Reads a {@link Pattern} stream: checks every byte against its place in the stream, keeps a CRC32C and the count,
     * and releases what it reads. {@link #done} completes when {@code expected} bytes have arrived; more bytes, a
     * wrong byte or an exception fail it.
     */
    static class StreamReader extends ChannelInboundHandlerAdapter {
        volatile long expected;
        final Pattern pattern;
        /** Where in the pattern this stream starts. */
        long base;
        final CRC32C crc = new CRC32C();
        final CompletableFuture<Long> done = new CompletableFuture<>();
        final Queue<Throwable> exceptions = new ConcurrentLinkedQueue<>();
        final List<String> events = new CopyOnWriteArrayList<>();
        /** Completes at channelInactive (which Netty fires after the close future completes). */
        final CompletableFuture<Void> inactive = new CompletableFuture<>();
        volatile long received;
        volatile long reads;

        StreamReader(long expected, Pattern pattern) {
            this.expected = expected;
            this.pattern = pattern;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            try {
                int n = buf.readableBytes();
                reads++;
                if (received + n > expected) {
                    done.completeExceptionally(new AssertionError("received " + (received + n) + " bytes, more than "
                            + expected));
                }
                long m = pattern.mismatch(buf, base + received);
                if (m >= 0) {
                    done.completeExceptionally(new AssertionError("wrong byte at stream offset " + (received + m)
                            + " (read #" + reads + " of " + n + " bytes at offset " + received + ")"));
                }
                crc(crc, buf);
                received += n;
                if (received == expected) {
                    done.complete(received);
                }
            } finally {
                ReferenceCountUtil.release(buf);
            }
        }

        /** Sets how many bytes are expected, once known; call it on the channel's event loop. */
        void expect(long expected) {
            this.expected = expected;
            if (received > expected) {
                done.completeExceptionally(new AssertionError("received " + received + " bytes, more than " + expected));
            } else if (received == expected) {
                done.complete(received);
            }
        }

        @Override
        public void userEventTriggered(ChannelHandlerContext ctx, Object evt) throws Exception {
            events.add("event:" + evt.getClass().getSimpleName() + "@" + received);
            super.userEventTriggered(ctx, evt);
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) throws Exception {
            events.add("inactive@" + received);
            inactive.complete(null);
            super.channelInactive(ctx);
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            exceptions.add(cause);
            events.add("exception:" + describe(cause));
            done.completeExceptionally(cause);
        }

        String state() {
            return "reader{received=" + received + "/" + expected + ", reads=" + reads + ", events=" + events + '}';
        }
    }

    /** Records exceptions that reach the end of a pipeline (so none goes unnoticed, and none is logged as unhandled). */
    @ChannelHandler.Sharable
    static final class ExceptionRecorder extends ChannelInboundHandlerAdapter {
        final Queue<Throwable> exceptions = new ConcurrentLinkedQueue<>();

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            exceptions.add(cause);
        }
    }

    /** Completes when every future in {@code futures} is done, whatever the outcome. */
    static void awaitAll(List<? extends ChannelFuture> futures, long timeoutMillis, String what)
            throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
        for (int i = 0; i < futures.size(); i++) {
            long left = deadline - System.nanoTime();
            if (!futures.get(i).await(Math.max(0, left), TimeUnit.NANOSECONDS)) {
                throw new AssertionError(what + ": future #" + i + " of " + futures.size() + " not done within "
                        + timeoutMillis + " ms");
            }
        }
    }
}
