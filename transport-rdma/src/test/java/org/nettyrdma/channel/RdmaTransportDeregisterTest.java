package org.nettyrdma.channel;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.nettyrdma.channel.RdmaTestSupport.ExceptionRecorder;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code deregister()} and registering again, as Netty's socket channels allow: while deregistered, what arrives waits
 * (a socket's data waits in the kernel until a selector polls it again); registered again on its loop, the channel
 * reads it and the connection goes on. An RDMA channel cannot move to another loop (its queue pair and CM id live on
 * its loop's completion queue and event channel): that registration is refused and the channel stays as it was. An
 * outside user's trial found the pipeline reading while deregistered and every registration after a deregister
 * failing, the same loop's included, with the channel then closed from the other loop's thread (a review's).
 */
class RdmaTransportDeregisterTest {
    private EventLoopGroup serverGroup;
    private EventLoopGroup clientGroup;

    @BeforeEach
    void setUp() {
        serverGroup = RdmaTestSupport.newGroup(1, "dereg-server");
        clientGroup = RdmaTestSupport.newGroup(1, "dereg-client");
    }

    @AfterEach
    void tearDown() throws InterruptedException {
        RdmaTestSupport.shutdown(clientGroup, serverGroup);
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void whatArrivesWhileDeregisteredWaitsAndIsReadOnceRegisteredAgainOnItsLoop() throws Exception {
        AtomicReference<Channel> child = new AtomicReference<>();
        Channel server = echoServer(child);
        List<String> reads = new CopyOnWriteArrayList<>();
        ExceptionRecorder errors = new ExceptionRecorder();
        try {
            RdmaSocketChannel client = (RdmaSocketChannel) RdmaTestSupport.clientBootstrap(clientGroup)
                    .handler(reader(reads, errors)).connect(server.localAddress()).sync().channel();
            client.writeAndFlush(ascii("one")).sync();
            RdmaTestSupport.awaitCondition("the first echo", () -> String.join("", reads).equals("one"), 10_000,
                    reads::toString);

            client.deregister().sync();
            assertFalse(client.isRegistered());
            long before = client.counters().bytesReceived();
            child.get().writeAndFlush(ascii("two")).sync();
            RdmaTestSupport.awaitCondition("the bytes arrive at the deregistered client",
                    () -> client.counters().bytesReceived() >= before + 3, 10_000, () -> "" + client.counters());
            // asked on the loop, after the batch that received them: they wait for the registration
            assertEquals(List.of("one"), RdmaTestSupport.onLoop(client, () -> List.copyOf(reads)),
                    "reads while deregistered");

            client.eventLoop().register(client).sync();
            assertTrue(client.isRegistered() && client.isActive());
            RdmaTestSupport.awaitCondition("the waiting bytes read", () -> String.join("", reads).equals("onetwo"),
                    10_000, reads::toString);
            client.writeAndFlush(ascii("three")).sync();
            RdmaTestSupport.awaitCondition("an echo after the registration",
                    () -> String.join("", reads).equals("onetwothree"), 10_000, reads::toString);
            assertTrue(errors.exceptions.isEmpty(), () -> "client exceptions: " + errors.exceptions);
            client.close().sync();
        } finally {
            server.close().sync();
        }
    }

    /**
     * With auto-read off, a {@code read()} asked for while deregistered is done once the channel is registered again
     * (Netty begins a read at a registration only with auto-read on).
     */
    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void aReadAskedForWhileDeregisteredIsDoneOnceRegisteredAgain() throws Exception {
        AtomicReference<Channel> child = new AtomicReference<>();
        Channel server = echoServer(child);
        List<String> reads = new CopyOnWriteArrayList<>();
        try {
            RdmaSocketChannel client = (RdmaSocketChannel) RdmaTestSupport.clientBootstrap(clientGroup)
                    .option(ChannelOption.AUTO_READ, false)
                    .handler(reader(reads, new ExceptionRecorder()))
                    .connect(server.localAddress()).sync().channel();
            client.deregister().sync();
            RdmaTestSupport.awaitCondition("the child", () -> child.get() != null, 10_000, () -> "");
            child.get().writeAndFlush(ascii("two")).sync();
            RdmaTestSupport.awaitCondition("the bytes arrive at the deregistered client",
                    () -> client.counters().bytesReceived() >= 3, 10_000, () -> "" + client.counters());
            client.read();
            assertEquals(List.of(), RdmaTestSupport.onLoop(client, () -> List.copyOf(reads)), "reads while deregistered");
            client.eventLoop().register(client).sync();
            RdmaTestSupport.awaitCondition("the read asked for", () -> reads.equals(List.of("two")), 10_000,
                    reads::toString);
            client.close().sync();
        } finally {
            server.close().sync();
        }
    }

    /**
     * Registering on another loop is refused before Netty moves the channel (an incompatible loop): the channel stays
     * as it was, deregistered on its loop with its connection, and can be registered there again and echo on.
     */
    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void registeringOnAnotherLoopIsRefusedAndLeavesTheChannelAsItWas() throws Exception {
        Channel server = echoServer(new AtomicReference<>());
        EventLoopGroup other = RdmaTestSupport.newGroup(1, "dereg-other");
        List<String> reads = new CopyOnWriteArrayList<>();
        ExceptionRecorder errors = new ExceptionRecorder();
        try {
            Channel client = RdmaTestSupport.clientBootstrap(clientGroup).handler(reader(reads, errors))
                    .connect(server.localAddress()).sync().channel();
            EventLoop own = client.eventLoop();
            client.deregister().sync();
            ChannelFuture moved = other.next().register(client);
            assertTrue(moved.await(10, TimeUnit.SECONDS), "the registration completes");
            assertInstanceOf(IllegalStateException.class, moved.cause(), () -> "" + moved.cause());
            assertTrue(moved.cause().getMessage().contains("incompatible event loop"), moved.cause()::getMessage);
            assertTrue(client.isOpen() && client.isActive() && !client.isRegistered(), "the channel as it was");
            assertSame(own, client.eventLoop(), "its loop");
            own.register(client).sync();
            client.writeAndFlush(ascii("back")).sync();
            RdmaTestSupport.awaitCondition("an echo on its loop again", () -> reads.equals(List.of("back")), 10_000,
                    reads::toString);
            assertTrue(errors.exceptions.isEmpty(), () -> "client exceptions: " + errors.exceptions);
            client.close().sync();
        } finally {
            RdmaTestSupport.shutdown(other);
            server.close().sync();
        }
    }

    private static ChannelInitializer<Channel> reader(List<String> reads, ExceptionRecorder errors) {
        return new ChannelInitializer<Channel>() {
            @Override
            protected void initChannel(Channel ch) {
                ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                    @Override
                    public void channelRead(ChannelHandlerContext ctx, Object msg) {
                        reads.add(((ByteBuf) msg).toString(StandardCharsets.US_ASCII));
                        ((ByteBuf) msg).release();
                    }
                }, errors);
            }
        };
    }

    private Channel echoServer(AtomicReference<Channel> child) throws InterruptedException {
        return RdmaTestSupport.serverBootstrap(serverGroup, serverGroup)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        child.set(ch);
                        ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                            @Override
                            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                ctx.writeAndFlush(msg);
                            }
                        });
                    }
                }).bind(RdmaTestSupport.anyPort()).sync().channel();
    }

    private static ByteBuf ascii(String s) {
        return Unpooled.copiedBuffer(s, StandardCharsets.US_ASCII);
    }
}
