package org.nettyrdma.examples.echo;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.util.concurrent.Promise;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;
import org.nettyrdma.examples.Transport;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/** Sends {@code EchoServer} 8 MiB of random bytes in writes of random sizes and checks they all come back. */
public final class EchoClient {
    private static final Logger logger = LogManager.getLogger(EchoClient.class);
    private static final int WRITES = 512;
    private static final int MAX_WRITE = 32768;

    private EchoClient() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: EchoClient host port [--emulated]");
            System.exit(2);
        }
        Transport transport = Transport.rdma(Arrays.asList(args).contains("--emulated"));
        EventLoopGroup group = transport.newGroup(1);
        try {
            run(transport, group, new InetSocketAddress(args[0], Integer.parseInt(args[1])));
        } catch (Exception e) {
            logger.error("echo failed", e);
            System.exit(1);
        } finally {
            group.shutdownGracefully();
        }
    }

    /** Connects to the echo server at {@code address}, sends, checks the echo, closes. */
    public static void run(Transport transport, EventLoopGroup group, InetSocketAddress address) throws Exception {
        ByteBuf data = Unpooled.buffer();
        SplittableRandom random = new SplittableRandom(7);
        int[] writes = new int[WRITES];
        for (int i = 0; i < WRITES; i++) {
            writes[i] = 1 + random.nextInt(MAX_WRITE);
            for (int j = 0; j < writes[i]; j++) {
                data.writeByte(random.nextInt());
            }
        }
        Promise<Long> done = group.next().newPromise();
        Channel channel = transport.bootstrap(group)
                .handler(new EchoClientHandler(data, writes, done))
                .connect(address).sync().channel();
        try {
            if (!done.await(30, TimeUnit.SECONDS)) {
                throw new IOException("no complete echo within 30 s");
            }
            long elapsedNs = done.sync().getNow();
            logger.info("{} bytes in {} writes echoed by {} over {} in {} ms: every byte matches", data.readableBytes(),
                    WRITES, channel.remoteAddress(), transport, TimeUnit.NANOSECONDS.toMillis(elapsedNs));
        } finally {
            channel.close().sync();
        }
    }

    /** Writes while the channel is writable; compares what comes back with what was sent. */
    private static final class EchoClientHandler extends ChannelInboundHandlerAdapter {
        private final ByteBuf data;
        private final int[] writes;
        private final Promise<Long> done;
        private int written;
        private int sentBytes;
        private int receivedBytes;
        private long startNs;

        EchoClientHandler(ByteBuf data, int[] writes, Promise<Long> done) {
            this.data = data;
            this.writes = writes;
            this.done = done;
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            startNs = System.nanoTime();
            writeMore(ctx);
        }

        @Override
        public void channelWritabilityChanged(ChannelHandlerContext ctx) {
            writeMore(ctx);
        }

        private void writeMore(ChannelHandlerContext ctx) {
            while (written < writes.length && ctx.channel().isWritable()) {
                int n = writes[written++];
                int offset = sentBytes;
                sentBytes += n; // first: write() may fire channelWritabilityChanged, which calls back in here
                ctx.write(ctx.alloc().buffer(n).writeBytes(data, offset, n), ctx.voidPromise());
            }
            ctx.flush();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf in = (ByteBuf) msg;
            try {
                int n = in.readableBytes();
                if (receivedBytes + n > data.readableBytes()
                        || !ByteBufUtil.equals(in, in.readerIndex(), data, receivedBytes, n)) {
                    done.tryFailure(new IOException("the echo differs from what was sent at byte " + receivedBytes));
                    ctx.close();
                    return;
                }
                receivedBytes += n;
                if (receivedBytes == data.readableBytes()) {
                    done.trySuccess(System.nanoTime() - startNs);
                }
            } finally {
                in.release();
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            done.tryFailure(new IOException("connection closed after " + receivedBytes + " of "
                    + data.readableBytes() + " bytes echoed"));
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            done.tryFailure(cause);
            ctx.close();
        }
    }
}
