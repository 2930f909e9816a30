package org.nettyrdma.benchmarks;

import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;

/** Writes back what it reads, flushed at the end of each read; closes on an error. Shared by every channel. */
@ChannelHandler.Sharable
final class EchoHandler extends ChannelInboundHandlerAdapter {
    static final EchoHandler INSTANCE = new EchoHandler();

    private EchoHandler() {
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        ctx.write(msg, ctx.voidPromise());
    }

    @Override
    public void channelReadComplete(ChannelHandlerContext ctx) {
        ctx.flush();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        ctx.close();
    }
}
