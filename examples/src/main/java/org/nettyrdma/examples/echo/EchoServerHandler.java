package org.nettyrdma.examples.echo;

import io.netty.channel.ChannelHandler.Sharable;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;

/** Writes back every buffer it reads, flushing once per read batch. */
@Sharable
public final class EchoServerHandler extends ChannelInboundHandlerAdapter {
    public static final EchoServerHandler INSTANCE = new EchoServerHandler();
    private static final Logger logger = LogManager.getLogger(EchoServerHandler.class);

    private EchoServerHandler() {
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
        logger.warn("{}: closing after {}", ctx.channel(), cause.toString());
        ctx.close();
    }
}
