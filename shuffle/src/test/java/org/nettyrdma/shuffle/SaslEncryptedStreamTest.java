package org.nettyrdma.shuffle;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import org.apache.spark.network.sasl.SaslEncryptionChannels;
import org.junit.jupiter.api.Test;

import java.net.InetSocketAddress;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Spark's SASL encryption handlers ({@code SaslEncryption}: every outbound message becomes an
 * {@code EncryptedMessage}, a FileRegion that encrypts lazily in {@code transferTo}, writes more bytes than its count
 * and counts a block only once it is written) between two channels, with a stand-in mechanism that numbers its blocks
 * ({@code SaslEncryptionChannels}): the messages of a client that writes bursts of small and large messages, as Spark's
 * client writes chunk requests, must all arrive, in order, intact. Over NIO and over RDMA.
 */
class SaslEncryptedStreamTest {
    private static final int MESSAGES = 3000;

    @Test
    void encryptedMessagesArriveInOrderOverNio() throws Exception {
        stream(ShuffleTransport.nio(), "127.0.0.1");
    }

    @Test
    void encryptedMessagesArriveInOrderOverRdma() throws Exception {
        ShuffleTestSupport.assumeOwnServices("its own server and client of the encrypted stream");
        stream(ShuffleTestSupport.rdma(), ShuffleTestSupport.address());
    }

    private static void stream(ShuffleTransport transport, String host) throws Exception {
        Random random = new Random(21);
        byte[][] messages = new byte[MESSAGES][];
        long total = 0;
        for (int i = 0; i < MESSAGES; i++) {
            // mostly requests of a few dozen bytes, now and then up to 60 KiB: one encrypted block each (Spark sends
            // larger messages as FileRegions; a larger ByteBuf's EncryptedMessage shrinks its own count() as it goes)
            int size = random.nextInt(40) == 0 ? 1 + random.nextInt(60 << 10) : 1 + random.nextInt(60);
            messages[i] = new byte[size];
            random.nextBytes(messages[i]);
            total += size;
        }
        StreamChecker checker = new StreamChecker(messages);
        EventLoopGroup group = transport.newGroup(2, "sasl-stream");
        try {
            Channel server = transport.serverBootstrap(group, group)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            ch.pipeline().addLast(checker);
                            SaslEncryptionChannels.install(ch, 64 * 1024);
                        }
                    })
                    .bind(new InetSocketAddress(host, 0)).sync().channel();
            Channel client = transport.bootstrap(group)
                    .handler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            SaslEncryptionChannels.install(ch, 64 * 1024);
                        }
                    })
                    .connect(server.localAddress()).sync().channel();
            client.eventLoop().submit(() -> {
                for (int i = 0; i < MESSAGES; i++) {
                    client.write(Unpooled.wrappedBuffer(messages[i]));
                    if (i % 7 == 6) {
                        client.flush();
                    }
                }
                client.flush();
            }).sync();
            String outcome;
            try {
                outcome = checker.done.get(60, TimeUnit.SECONDS);
            } catch (TimeoutException e) {
                outcome = "timed out: " + checker.describe();
            }
            assertEquals("all " + MESSAGES + " messages (" + total + " bytes) in order", outcome, transport.name());
            client.close().sync();
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    /** Compares the decrypted stream with the messages written, byte by byte. */
    @io.netty.channel.ChannelHandler.Sharable
    private static final class StreamChecker extends ChannelInboundHandlerAdapter {
        final CompletableFuture<String> done = new CompletableFuture<>();
        private final byte[][] messages;
        private final long total;
        private volatile int message;
        private volatile int offset;
        private volatile long received;

        StreamChecker(byte[][] messages) {
            this.messages = messages;
            long t = 0;
            for (byte[] m : messages) {
                t += m.length;
            }
            this.total = t;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            try {
                while (buf.isReadable() && !done.isDone()) {
                    if (message >= messages.length) {
                        done.complete("more bytes than were written, after " + received);
                        return;
                    }
                    byte b = buf.readByte();
                    if (b != messages[message][offset]) {
                        done.complete("byte " + offset + " of message " + message + " differs (" + received
                                + " bytes in)");
                        return;
                    }
                    received++;
                    if (++offset == messages[message].length) {
                        offset = 0;
                        message++;
                    }
                }
                if (received == total) {
                    done.complete("all " + messages.length + " messages (" + total + " bytes) in order");
                }
            } finally {
                buf.release();
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            done.complete("failed after " + received + " bytes, in message " + message + ": " + cause);
        }

        String describe() {
            return received + " of " + total + " bytes, in message " + message;
        }
    }
}
