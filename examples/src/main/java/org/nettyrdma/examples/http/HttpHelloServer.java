package org.nettyrdma.examples.http;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.handler.codec.http.DefaultFullHttpRequest;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpClientCodec;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.util.concurrent.Promise;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;
import org.nettyrdma.channel.RdmaIoHandlerConfig;
import org.nettyrdma.examples.Transport;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** An HTTP/1.1 "hello" server over RDMA: {@code HttpHelloServer host port [--emulated] | --self-test [N [address]]}. */
public final class HttpHelloServer {
    private static final Logger logger = LogManager.getLogger(HttpHelloServer.class);
    private static final int MAX_CONTENT = 1 << 20;

    private HttpHelloServer() {
    }

    public static void main(String[] args) throws Exception {
        List<String> argList = Arrays.asList(args);
        int selfTest = argList.indexOf("--self-test");
        if (selfTest >= 0) {
            int requests = args.length > selfTest + 1 ? Integer.parseInt(args[selfTest + 1]) : 10_000;
            System.exit(selfTest(requests, args.length > selfTest + 2 ? args[selfTest + 2] : null) ? 0 : 1);
        }
        if (args.length < 2) {
            System.err.println("usage: HttpHelloServer host port [--emulated]"
                    + " | HttpHelloServer --self-test [requests [address]]");
            System.exit(2);
        }
        Transport transport = Transport.rdma(argList.contains("--emulated"));
        EventLoopGroup group = transport.newGroup(0);
        try {
            Channel server = start(transport, group, new InetSocketAddress(args[0], Integer.parseInt(args[1])));
            logger.info("HTTP server on {} over {}", server.localAddress(), transport);
            server.closeFuture().sync();
        } finally {
            group.shutdownGracefully();
        }
    }

    public static Channel start(Transport transport, EventLoopGroup group, InetSocketAddress address)
            throws InterruptedException {
        return transport.serverBootstrap(group)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        ch.pipeline().addLast(new HttpServerCodec(), new HttpObjectAggregator(MAX_CONTENT),
                                new HelloHandler());
                    }
                })
                .bind(address).sync().channel();
    }

    /**
     * Starts the server on {@code address} over native RDMA ({@link Transport#nativeRdmaOn}), else on 127.0.0.1 over
     * the emulated provider, and sends it {@code requests} GETs over one keep-alive connection, the last with
     * "Connection: close"; checks every response.
     */
    private static boolean selfTest(int requests, String address) {
        boolean nativeRdma = address != null && Transport.nativeRdmaOn(address);
        Transport transport = Transport.rdma(nativeRdma ? RdmaIoHandlerConfig.PROVIDER_NATIVE
                : RdmaIoHandlerConfig.PROVIDER_EMULATED);
        EventLoopGroup serverGroup = transport.newGroup(1);
        EventLoopGroup clientGroup = transport.newGroup(1);
        try {
            Channel server = start(transport, serverGroup,
                    new InetSocketAddress(nativeRdma ? address : "127.0.0.1", 0));
            Promise<Long> done = clientGroup.next().newPromise();
            long startNs = System.nanoTime();
            transport.bootstrap(clientGroup)
                    .handler(new ChannelInitializer<Channel>() {
                        @Override
                        protected void initChannel(Channel ch) {
                            ch.pipeline().addLast(new HttpClientCodec(), new HttpObjectAggregator(MAX_CONTENT),
                                    new HelloClient(requests, done));
                        }
                    })
                    .connect(server.localAddress()).sync();
            if (!done.await(60, TimeUnit.SECONDS)) {
                throw new IOException("no result within 60 s");
            }
            long elapsedNs = System.nanoTime() - startNs;
            done.sync();
            logger.info("self-test passed: {} GETs over one keep-alive connection to {} over {}, all responses checked;"
                            + " {} requests/s, {} µs mean round trip", requests, server.localAddress(), transport,
                    (long) (requests * 1e9 / elapsedNs), String.format("%.1f", elapsedNs / 1e3 / requests));
            server.close().sync();
            return true;
        } catch (Exception e) {
            logger.error("self-test failed", e);
            return false;
        } finally {
            clientGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
            serverGroup.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
        }
    }

    private static String body(String uri) {
        return "hello " + uri + '\n';
    }

    /** Answers every request with 200 and a text/plain "hello" naming its URI; keeps the connection if asked. */
    private static final class HelloHandler extends SimpleChannelInboundHandler<FullHttpRequest> {
        @Override
        protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest request) {
            ByteBuf content = ByteBufUtil.writeUtf8(ctx.alloc(), body(request.uri()));
            FullHttpResponse response = new DefaultFullHttpResponse(request.protocolVersion(), HttpResponseStatus.OK,
                    content);
            response.headers()
                    .set(HttpHeaderNames.CONTENT_TYPE, HttpHeaderValues.TEXT_PLAIN + "; charset=UTF-8")
                    .setInt(HttpHeaderNames.CONTENT_LENGTH, content.readableBytes());
            boolean keepAlive = HttpUtil.isKeepAlive(request);
            HttpUtil.setKeepAlive(response, keepAlive);
            if (keepAlive) {
                ctx.writeAndFlush(response, ctx.voidPromise());
            } else {
                ctx.writeAndFlush(response).addListener(ChannelFutureListener.CLOSE);
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            logger.warn("{}: closing after {}", ctx.channel(), cause.toString());
            ctx.close();
        }
    }

    /** The self-test's client: one GET at a time, each response checked before the next request. */
    private static final class HelloClient extends SimpleChannelInboundHandler<FullHttpResponse> {
        private final int requests;
        private final Promise<Long> done;
        private int responses;

        HelloClient(int requests, Promise<Long> done) {
            this.requests = requests;
            this.done = done;
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            get(ctx);
        }

        private void get(ChannelHandlerContext ctx) {
            FullHttpRequest request = new DefaultFullHttpRequest(HttpVersion.HTTP_1_1, HttpMethod.GET,
                    "/hello/" + responses, ctx.alloc().buffer(0));
            request.headers().set(HttpHeaderNames.HOST, "localhost");
            HttpUtil.setKeepAlive(request, responses < requests - 1);
            ctx.writeAndFlush(request, ctx.voidPromise());
        }

        @Override
        protected void channelRead0(ChannelHandlerContext ctx, FullHttpResponse response) {
            String expected = body("/hello/" + responses);
            String content = response.content().toString(StandardCharsets.UTF_8);
            boolean last = responses == requests - 1;
            if (!response.status().equals(HttpResponseStatus.OK) || !content.equals(expected)
                    || HttpUtil.getContentLength(response, -1) != expected.length()
                    || HttpUtil.isKeepAlive(response) == last) {
                done.tryFailure(new IOException("response " + responses + " is wrong: " + response.status() + ", "
                        + response.headers() + ", \"" + content + '"'));
                ctx.close();
                return;
            }
            if (++responses < requests) {
                get(ctx);
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            if (responses == requests) {
                done.trySuccess((long) responses);
            } else {
                done.tryFailure(new IOException("connection closed after " + responses + " of " + requests
                        + " responses"));
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            done.tryFailure(cause);
            ctx.close();
        }
    }
}
