package org.nettyrdma.channel;

import io.netty.channel.Channel;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoop;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.nettyrdma.verbs.CmEvent;
import org.nettyrdma.verbs.CompletionArray;
import org.nettyrdma.verbs.FaultInjector;
import org.nettyrdma.verbs.WcOpcode;
import org.nettyrdma.verbs.WcStatus;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

/**
 * How the loop hands completions to their channels (docs/srq-design.md, section 1, "Finding the connection"): by the
 * registration id in the wr_id's upper 32 bits, or, for a receive from a shared receive queue (upper 32 bits 0), by
 * the completion's qp_num. The completions are written into a {@link CompletionArray} as a device would.
 */
class RdmaIoHandlerDispatchTest {

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void sharedReceivesGoToTheHandleBoundToTheirQpOthersByRegistrationId() throws Exception {
        List<RdmaIoHandler> handlers = new CopyOnWriteArrayList<>();
        MultiThreadIoEventLoopGroup group = RdmaTestSupport.newGroup(1, "dispatch", handlers);
        try {
            EventLoop loop = group.next();
            loop.submit(() -> { }).sync();
            RdmaIoHandler handler = handlers.get(0);
            loop.submit(() -> {
                Handle a = new Handle();
                Handle b = new Handle();
                RdmaIoHandler.Registration ra = (RdmaIoHandler.Registration) handler.register(a);
                RdmaIoHandler.Registration rb = (RdmaIoHandler.Registration) handler.register(b);
                ra.bindSharedReceives(77);
                rb.bindSharedReceives(78);
                assertThrows(IllegalStateException.class, () -> ra.bindSharedReceives(79), "one QP per registration");
                Handle c = new Handle();
                RdmaIoHandler.Registration rc = (RdmaIoHandler.Registration) handler.register(c);
                assertThrows(IllegalStateException.class, () -> rc.bindSharedReceives(77), "QP 77 is a's");

                CompletionArray wc = new CompletionArray(8);
                long poolRecv = ConnectionResources.RECV_BIT | 5; // a pool's wr_id: upper 32 bits 0
                wc.set(0, poolRecv, WcStatus.SUCCESS, WcOpcode.RECV, 100, 0, 78, 0);
                wc.set(1, poolRecv + 1, WcStatus.SUCCESS, WcOpcode.RECV, 200, 0, 77, 0);
                wc.set(2, (long) rb.id << 32 | 3, WcStatus.SUCCESS, WcOpcode.SEND, 0, 0, 78, 0); // b's own send
                wc.set(3, poolRecv + 2, WcStatus.SUCCESS, WcOpcode.RECV, 300, 0, 99, 0); // a QP nobody bound
                wc.set(4, (long) rc.id << 32 | ConnectionResources.RECV_BIT, WcStatus.SUCCESS, WcOpcode.RECV, 40, 0, 77,
                        0); // c's own receive on a per-QP queue: by id, whatever the qp_num
                handler.dispatch(wc, 5);
                assertEquals(List.of(1), a.shared);
                assertEquals(List.of(0), b.shared);
                assertEquals(List.of(), a.own);
                assertEquals(List.of(2), b.own);
                assertEquals(List.of(4), c.own);
                assertEquals(List.of(), c.shared);

                // a's QP is destroyed: its number is free, its late completions reach nobody, and a new QP may take it
                ra.unbindSharedReceives();
                handler.dispatch(wc, 2);
                assertEquals(List.of(1), a.shared, "a unbound: its QP's late receive is dropped");
                rc.bindSharedReceives(77);
                handler.dispatch(wc, 2);
                assertEquals(List.of(1), c.shared);
                // cancelling a registration unbinds its QP too
                rb.cancel();
                handler.dispatch(wc, 1);
                assertEquals(List.of(0, 0, 0), b.shared, "three dispatches before b's cancel, none after");
                rb.cancel();
                ra.cancel();
                rc.cancel();
                return null;
            }).sync();
        } finally {
            RdmaTestSupport.shutdown(group);
        }
    }

    /**
     * A device reuses the number of a destroyed QP for a new one, and the destroyed QP's last shared receive may still
     * sit in the loop's completion queue: it must never reach the new QP's channel (another connection's bytes). The
     * bind drains the queues first. Emulated: a real connection gives the loop its completion queue, the fault
     * injector puts the stale completion in it.
     */
    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void aReusedQpNumberGetsNoneOfTheDestroyedQpsLeftoverReceives() throws Exception {
        assumeFalse(RdmaTestSupport.isNative(), "the stale completion is put in the queue by the emulated fault injector");
        List<RdmaIoHandler> handlers = new CopyOnWriteArrayList<>();
        MultiThreadIoEventLoopGroup group = RdmaTestSupport.newGroup(1, "dispatch-reuse", handlers);
        try {
            Channel server = RdmaTestSupport.serverBootstrap(group, group).childHandler(new ChannelInboundHandlerAdapter())
                    .bind(RdmaTestSupport.anyPort()).sync().channel();
            Channel client = RdmaTestSupport.clientBootstrap(group).handler(new ChannelInboundHandlerAdapter())
                    .connect(server.localAddress()).sync().channel();
            EventLoop loop = group.next();
            RdmaIoHandler handler = handlers.get(0);
            int qpNum = 0x4242;
            long poolRecv = ConnectionResources.RECV_BIT | 5L << 24 | 1; // a pool's receive (no pool 5: dropped)
            Handle b = new Handle();
            RdmaIoHandler.Registration[] rb = new RdmaIoHandler.Registration[1];
            loop.submit(() -> {
                FaultInjector faults = handler.resources().provider().faults();
                RdmaIoHandler.Registration ra = (RdmaIoHandler.Registration) handler.register(new Handle());
                ra.bindSharedReceives(qpNum);
                // a's QP took a message, and is destroyed before the loop polled its completion
                faults.addReceiveCompletion(handler.completionQueue(0), poolRecv, 111, qpNum);
                ra.cancel();
                // b's new QP has the same number
                rb[0] = (RdmaIoHandler.Registration) handler.register(b);
                rb[0].bindSharedReceives(qpNum);
                faults.addReceiveCompletion(handler.completionQueue(0), poolRecv, 222, qpNum); // b's own
                return null;
            }).sync();
            RdmaTestSupport.awaitCondition("b's receive", () -> onLoop(loop, () -> b.sharedBytes.size()) > 0, 5_000,
                    () -> "" + b.sharedBytes);
            assertEquals(List.of(222), onLoop(loop, () -> new ArrayList<>(b.sharedBytes)),
                    "only b's own receive reached b, not the one its QP number's previous owner left");
            loop.submit(() -> rb[0].cancel()).sync();
            client.close().sync();
            server.close().sync();
        } finally {
            RdmaTestSupport.shutdown(group);
        }
    }

    private static <T> T onLoop(EventLoop loop, java.util.concurrent.Callable<T> task) {
        try {
            return loop.submit(task).get(5, TimeUnit.SECONDS);
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    /** A handle that has no shared receive queue fails if one of its receives comes as a shared one. */
    @Test
    void aSharedReceiveForAHandleWithoutAQueueFailsIt() {
        PlainHandle plain = new PlainHandle();
        CompletionArray wc = new CompletionArray(1);
        wc.set(0, ConnectionResources.RECV_BIT, WcStatus.SUCCESS, WcOpcode.RECV, 10, 0, 12, 0);
        plain.onSharedReceive(wc, 0);
        assertEquals(1, plain.failures.size());
        assertTrue(plain.failures.get(0).getMessage().contains("qp_num 12"), plain.failures.get(0).getMessage());
    }

    /** Records which completions reached it. */
    private static final class Handle extends PlainHandle {
        final List<Integer> shared = new ArrayList<>();
        final List<Integer> sharedBytes = new ArrayList<>();

        @Override
        public void onSharedReceive(CompletionArray completions, int index) {
            shared.add(index);
            sharedBytes.add(completions.byteLen(index));
        }

        @Override
        public void fail(Throwable cause) {
            throw new AssertionError(cause);
        }
    }

    /** A handle without a shared receive queue: {@link RdmaIoHandle#onSharedReceive}'s default. */
    private static class PlainHandle implements RdmaIoHandle {
        final List<Integer> own = new ArrayList<>();
        final List<Throwable> failures = new ArrayList<>();

        @Override
        public boolean inEventLoop() {
            return true;
        }

        @Override
        public void execute(Runnable task) {
            task.run();
        }

        @Override
        public void onCompletion(CompletionArray completions, int index) {
            own.add(index);
        }

        @Override
        public void onCmEvent(CmEvent event) {
        }

        @Override
        public void onBatchComplete() {
        }

        @Override
        public void fail(Throwable cause) {
            failures.add(cause);
        }

        @Override
        public void close() {
        }
    }
}
