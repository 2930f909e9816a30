package org.nettyrdma.shuffle;

import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.nio.NioIoHandler;
import org.junit.jupiter.api.Test;
import org.nettyrdma.channel.RdmaChannelOption;
import org.nettyrdma.channel.RdmaIoHandlerConfig;

import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

/**
 * The RDMA transport's bootstraps set 64 KiB receive buffers on both ends (a SEND carries at most the smaller of the
 * two ends' sizes: one end alone would change nothing; docs/shuffle.md, Benchmark); TCP's bootstraps get no RDMA
 * option.
 */
class ShuffleTransportTest {
    @Test
    void rdmaBootstrapsSetTheReceiveBufferSizeOnBothEnds() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory()); // options only: no I/O
        try {
            ShuffleTransport rdma = ShuffleTransport.rdma(new RdmaIoHandlerConfig()
                    .setProvider(RdmaIoHandlerConfig.PROVIDER_EMULATED));
            assertEquals(64 << 10, ShuffleTransport.RECEIVE_BUFFER_SIZE);
            Map<ChannelOption<?>, Object> accepted = rdma.serverBootstrap(group, group).config().childOptions();
            assertEquals(ShuffleTransport.RECEIVE_BUFFER_SIZE, accepted.get(RdmaChannelOption.RECEIVE_BUFFER_SIZE),
                    "the service's accepted channels");
            assertEquals(ShuffleTransport.RECEIVE_BUFFER_SIZE,
                    rdma.bootstrap(group).config().options().get(RdmaChannelOption.RECEIVE_BUFFER_SIZE),
                    "the reducers' channels");
            ShuffleTransport tcp = ShuffleTransport.nio();
            Map<ChannelOption<?>, Object> child = tcp.serverBootstrap(group, group).config().childOptions();
            assertFalse(child.containsKey(RdmaChannelOption.RECEIVE_BUFFER_SIZE), "nio: " + child);
            Map<ChannelOption<?>, Object> options = tcp.bootstrap(group).config().options();
            assertFalse(options.containsKey(RdmaChannelOption.RECEIVE_BUFFER_SIZE), "nio: " + options);
        } finally {
            group.shutdownGracefully(0, 0, TimeUnit.SECONDS).sync();
        }
    }
}
