package org.nettyrdma.shuffle;

import io.netty.channel.Channel;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.group.ChannelGroup;
import io.netty.channel.group.DefaultChannelGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.util.concurrent.GlobalEventExecutor;
import org.apache.spark.network.TransportContext;
import org.apache.spark.network.crypto.AuthServerBootstrap;
import org.apache.spark.network.sasl.SecretKeyHolder;
import org.apache.spark.network.server.RpcHandler;
import org.apache.spark.network.server.TransportServerBootstrap;
import org.apache.spark.network.shuffle.ExternalBlockHandler;
import org.apache.spark.network.util.TransportConf;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;

/**
 * Spark's external shuffle service handler ({@link ExternalBlockHandler}, unmodified) on a server channel of any
 * {@link ShuffleTransport}: what Spark's {@code TransportServer} does, with the channel classes of our choosing. Each
 * accepted channel runs the authentication bootstrap a Spark deployment would ({@link AuthServerBootstrap}, which is
 * SASL unless {@code spark.network.crypto.enabled}) and then {@link TransportContext#initializePipeline}: Spark's
 * encoder, frame decoder, decoder, idle handler and channel handler (and TLS when {@code spark.ssl.rpc.enabled}).
 *
 * <p>Executors register themselves with {@code RegisterExecutor} RPCs ({@link ExecutorRegistration}); the handler then
 * serves their sort-shuffle files ({@link ShuffleLayout}).
 */
public final class BlockServer implements AutoCloseable {
    private final TransportContext context;
    private final ExternalBlockHandler handler;
    private final EventLoopGroup group;
    private final Channel serverChannel;
    private final ChannelGroup children = new DefaultChannelGroup("shuffle-connections", GlobalEventExecutor.INSTANCE);

    private BlockServer(TransportConf conf, SecretKeyHolder secret, ShuffleTransport transport, int threads,
                        InetSocketAddress bind) throws IOException, InterruptedException {
        handler = new ExternalBlockHandler(conf, null);
        // closeIdleConnections as Spark's external shuffle service has it: a connection idle for
        // spark.shuffle.io.connectionTimeout with requests outstanding is closed
        context = new TransportContext(conf, handler, true);
        TransportServerBootstrap auth = secret == null ? null : new AuthServerBootstrap(conf, secret);
        group = transport.newGroup(threads, "shuffle-server");
        boolean bound = false;
        try {
            serverChannel = transport.serverBootstrap(group, group)
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            children.add(ch);
                            RpcHandler rpcHandler = auth == null ? handler : auth.doBootstrap(ch, handler);
                            context.initializePipeline(ch, rpcHandler, false);
                            transport.completePipeline(ch);
                        }
                    })
                    .bind(bind).sync().channel();
            bound = true;
        } finally {
            if (!bound) {
                shutDownQuietly();
            }
        }
    }

    /**
     * A server on {@code bind} with {@code threads} event loops of {@code transport}; {@code secret} is required when
     * {@code conf} has {@code spark.authenticate} ({@link Security#authenticates()}), else null.
     */
    public static BlockServer start(TransportConf conf, SecretKeyHolder secret, ShuffleTransport transport,
                                    int threads, InetSocketAddress bind) throws IOException, InterruptedException {
        if ((secret != null) != Boolean.parseBoolean(conf.get("spark.authenticate", "false"))) {
            throw new IllegalArgumentException("a secret is needed exactly when spark.authenticate is set");
        }
        return new BlockServer(conf, secret, transport, threads, bind);
    }

    public InetSocketAddress address() {
        return (InetSocketAddress) serverChannel.localAddress();
    }

    /** The server's event loops (over RDMA, {@code RdmaIoHandler.counters(eventLoops())} adds up its traffic). */
    public EventLoopGroup eventLoops() {
        return group;
    }

    public ExternalBlockHandler handler() {
        return handler;
    }

    /** The connections open now. */
    public int connections() {
        return children.size();
    }

    /**
     * Closes the listener and every connection at once, with fetches under way: what clients see of a shuffle
     * service that goes away. The server is still to be {@link #close()}d.
     */
    public void dropConnections() {
        serverChannel.close().syncUninterruptibly();
        children.close().awaitUninterruptibly(10, TimeUnit.SECONDS);
    }

    /** Closes the listener and the connections, stops the event loops and releases Spark's handler and context. */
    @Override
    public void close() {
        dropConnections();
        shutDownQuietly();
    }

    private void shutDownQuietly() {
        group.shutdownGracefully(0, 5, TimeUnit.SECONDS).awaitUninterruptibly(15, TimeUnit.SECONDS);
        handler.close();
        context.close();
    }
}
