package org.nettyrdma.examples.file;

import io.netty.buffer.ByteBuf;
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
import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.concurrent.TimeUnit;

/** Receives a file from FileChunkServer and checks its SHA-256: {@code FileChunkClient host port [--emulated]}. */
public final class FileChunkClient {
    private static final Logger logger = LogManager.getLogger(FileChunkClient.class);
    private static final int HEADER = 8 + 32;

    /** What arrived: its length, its SHA-256 (hex), and the time from connected to the last byte. */
    public record Result(long length, String sha256, long elapsedNs) {
    }

    private FileChunkClient() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: FileChunkClient host port [--emulated]");
            System.exit(2);
        }
        Transport transport = Transport.rdma(Arrays.asList(args).contains("--emulated"));
        EventLoopGroup group = transport.newGroup(1);
        try {
            Result result = receive(transport, group, new InetSocketAddress(args[0], Integer.parseInt(args[1])));
            logger.info("received {} bytes over {} in {} ms, SHA-256 {} as announced", result.length(), transport,
                    TimeUnit.NANOSECONDS.toMillis(result.elapsedNs()), result.sha256());
        } catch (Exception e) {
            logger.error("receiving failed", e);
            System.exit(1);
        } finally {
            group.shutdownGracefully();
        }
    }

    /** Receives the file the server at {@code address} sends; fails unless its SHA-256 is the one announced. */
    public static Result receive(Transport transport, EventLoopGroup group, InetSocketAddress address)
            throws Exception {
        return receive(transport, group, address, 120);
    }

    /** As {@link #receive(Transport, EventLoopGroup, InetSocketAddress)}, failing after {@code timeoutSeconds}. */
    public static Result receive(Transport transport, EventLoopGroup group, InetSocketAddress address,
                                 long timeoutSeconds) throws Exception {
        Promise<Result> done = group.next().newPromise();
        Channel channel = transport.bootstrap(group).handler(new Receiver(done)).connect(address).sync().channel();
        try {
            if (!done.await(timeoutSeconds, TimeUnit.SECONDS)) {
                throw new IOException("the file did not arrive within " + timeoutSeconds + " s");
            }
            return done.sync().getNow();
        } finally {
            channel.close().sync();
        }
    }

    /** Reads the header (length, SHA-256), then digests every byte until {@code length} arrived. */
    private static final class Receiver extends ChannelInboundHandlerAdapter {
        private final Promise<Result> done;
        private final ByteBuf header = Unpooled.buffer(HEADER);
        private final MessageDigest digest = FileChunkServer.newSha256();
        private long length = -1;
        private long received;
        private long startNs;

        Receiver(Promise<Result> done) {
            this.done = done;
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            startNs = System.nanoTime();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf in = (ByteBuf) msg;
            try {
                if (length < 0) {
                    header.writeBytes(in, Math.min(in.readableBytes(), header.writableBytes()));
                    if (header.isWritable()) {
                        return;
                    }
                    length = header.readLong();
                }
                received += in.readableBytes();
                if (received > length) {
                    fail(ctx, new IOException("more than the announced " + length + " bytes arrived"));
                    return;
                }
                for (ByteBuffer b : in.nioBuffers()) {
                    digest.update(b);
                }
            } finally {
                in.release();
            }
            if (received == length) {
                byte[] expected = new byte[32];
                header.readBytes(expected);
                byte[] actual = digest.digest();
                if (MessageDigest.isEqual(expected, actual)) {
                    done.trySuccess(new Result(length, HexFormat.of().formatHex(actual), System.nanoTime() - startNs));
                } else {
                    fail(ctx, new IOException("SHA-256 " + HexFormat.of().formatHex(actual) + " of the " + length
                            + " bytes received differs from the announced " + HexFormat.of().formatHex(expected)));
                }
            }
        }

        private void fail(ChannelHandlerContext ctx, Throwable cause) {
            done.tryFailure(cause);
            ctx.close();
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            done.tryFailure(new IOException("connection closed after " + received + " of "
                    + (length < 0 ? "?" : String.valueOf(length)) + " bytes"));
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            fail(ctx, cause);
        }
    }
}
