package org.nettyrdma.shuffle;

import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.handler.ssl.SslHandler;
import org.apache.spark.network.TransportContext;
import org.apache.spark.network.client.TransportClient;
import org.apache.spark.network.client.TransportClientBootstrap;
import org.apache.spark.network.crypto.AuthClientBootstrap;
import org.apache.spark.network.sasl.SecretKeyHolder;
import org.apache.spark.network.server.NoOpRpcHandler;
import org.apache.spark.network.server.TransportChannelHandler;
import org.apache.spark.network.util.TransportConf;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Connects {@link TransportClient}s of Spark's network layer over any {@link ShuffleTransport}: what Spark's
 * {@code TransportClientFactory.createClient} does (connect, {@link TransportContext#initializePipeline}, wait for TLS,
 * run the authentication bootstrap an executor runs: {@link AuthClientBootstrap}), with our channel classes. Spark's
 * factory cannot: it takes its channel class from {@code IOMode}, which knows NIO and EPOLL only. Connections are not
 * pooled: each {@link #connect} makes one.
 */
public final class BlockClientFactory implements AutoCloseable {
    private final TransportConf conf;
    private final TransportContext context;
    private final TransportClientBootstrap auth;
    private final ShuffleTransport transport;
    private final EventLoopGroup group;

    /**
     * A factory whose connections run on {@code threads} event loops of {@code transport}; {@code appId} and
     * {@code secret} authenticate them when {@code conf} has {@code spark.authenticate} (else the secret is null).
     */
    public BlockClientFactory(TransportConf conf, String appId, SecretKeyHolder secret, ShuffleTransport transport,
                              int threads) {
        if ((secret != null) != Boolean.parseBoolean(conf.get("spark.authenticate", "false"))) {
            throw new IllegalArgumentException("a secret is needed exactly when spark.authenticate is set");
        }
        this.conf = conf;
        this.context = new TransportContext(conf, new NoOpRpcHandler(), false, true);
        this.auth = secret == null ? null : new AuthClientBootstrap(conf, appId, secret);
        this.transport = transport;
        this.group = transport.newGroup(threads, "shuffle-client");
    }

    public TransportConf conf() {
        return conf;
    }

    /** A new connection to {@code address}, ready for requests (TLS handshaken, authenticated). */
    public TransportClient connect(InetSocketAddress address) throws IOException, InterruptedException {
        AtomicReference<TransportChannelHandler> handler = new AtomicReference<>();
        ChannelFuture connect = transport.bootstrap(group)
                .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, conf.connectionCreationTimeoutMs())
                .handler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        handler.set(context.initializePipeline(ch, true));
                        transport.completePipeline(ch);
                    }
                })
                .connect(address);
        if (!connect.await(conf.connectionCreationTimeoutMs() + 1000L, TimeUnit.MILLISECONDS)) {
            connect.channel().close();
            throw new IOException("connecting to " + address + " timed out");
        }
        if (!connect.isSuccess()) {
            throw new IOException("failed to connect to " + address, connect.cause());
        }
        Channel channel = connect.channel();
        TransportClient client = handler.get().getClient();
        try {
            awaitTls(channel, address);
            if (auth != null) {
                auth.doBootstrap(client, channel);
            }
        } catch (IOException | RuntimeException e) {
            client.close();
            throw e;
        }
        return client;
    }

    private void awaitTls(Channel channel, InetSocketAddress address) throws IOException, InterruptedException {
        SslHandler ssl = channel.pipeline().get(SslHandler.class);
        if (ssl == null) {
            return;
        }
        if (!ssl.handshakeFuture().await(conf.connectionTimeoutMs(), TimeUnit.MILLISECONDS)) {
            throw new IOException("TLS handshake with " + address + " timed out");
        }
        if (!ssl.handshakeFuture().isSuccess()) {
            throw new IOException("TLS handshake with " + address + " failed", ssl.handshakeFuture().cause());
        }
    }

    /** Stops the event loops (closing what is still connected) and releases Spark's context. */
    @Override
    public void close() {
        group.shutdownGracefully(0, 5, TimeUnit.SECONDS).awaitUninterruptibly(15, TimeUnit.SECONDS);
        context.close();
    }
}
