package org.nettyrdma.channel;

import io.netty.channel.Channel;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.nettyrdma.channel.RdmaIoHandlerTest.Client;
import org.nettyrdma.channel.RdmaIoHandlerTest.Echo;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** A loop's completion queues on a device: more of them when connections outgrow one (on every provider). */
class RdmaTransportCompletionQueueTest {

    /**
     * Connections beyond what one completion queue holds get another queue on the same loop rather than failing
     * (each reserves its send and receive depths: 36 entries by default, so a queue of 100 takes two).
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aLoopOutgrowingItsCompletionQueueCreatesAnother() throws Exception {
        List<RdmaIoHandler> clientHandlers = new CopyOnWriteArrayList<>();
        EventLoopGroup serverGroup = RdmaTestSupport.newGroup(1, "cq-grow-server", null,
                RdmaTestSupport.config().setCompletionQueueSize(100));
        EventLoopGroup clientGroup = RdmaTestSupport.newGroup(1, "cq-grow-client", clientHandlers,
                RdmaTestSupport.config().setCompletionQueueSize(100));
        try {
            Channel server = RdmaTestSupport.plainServerBootstrap(serverGroup, serverGroup)
                    .childHandler(new Echo()).bind(RdmaTestSupport.anyPort()).sync().channel();
            InetSocketAddress address = (InetSocketAddress) server.localAddress();
            List<Client> clients = new ArrayList<>();
            for (int i = 0; i < 9; i++) {
                clients.add(Client.connect(clientGroup, address));
            }
            for (int round = 0; round < 3; round++) {
                for (int i = 0; i < clients.size(); i++) {
                    clients.get(i).echo("client " + i + " round " + round);
                }
            }
            RdmaIoHandler handler = clientHandlers.get(0);
            long queues = RdmaTestSupport.onLoop(clients.get(0).channel, () -> handler.deviceQueueCount());
            assertEquals(5, queues, "completion queues of the client loop for 9 connections of 36 entries, 100 each");
            for (Client c : clients) {
                assertTrue(c.failure.getNow(null) == null, () -> RdmaTestSupport.describe(c.failure.getNow(null)));
                c.channel.close().sync();
            }
            server.close().sync();
        } finally {
            RdmaTestSupport.shutdown(clientGroup, serverGroup);
        }
    }

}
