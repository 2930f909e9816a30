package org.nettyrdma.verbs;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.nettyrdma.verbs.DeviceAttributes.Transport;
import org.nettyrdma.verbs.Loopback.End;
import org.nettyrdma.verbs.emulated.EmulatedFabric;
import org.nettyrdma.verbs.emulated.EmulatedProvider;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.nettyrdma.verbs.Access.LOCAL_WRITE;
import static org.nettyrdma.verbs.SendFlags.SIGNALED;

/**
 * The emulated provider's shared receive queue under threads, which the conformance suite (one thread, one message at
 * a time) does not exercise: senders on three connections stall (RNR) on a queue kept nearly empty while this thread
 * polls and posts, so consumption under each sender's link and posts that resume stalled senders run at once.
 */
@Timeout(60)
class EmulatedSharedReceiveQueueTest {
    private static final int CONNECTIONS = 3;
    private static final int MESSAGES = 300;
    private static final int SRQ_SIZE = 16;
    private static final int RECEIVE_SIZE = 64;
    private static final long DEADLINE_NANOS = TimeUnit.SECONDS.toNanos(30);
    private Loopback fx;

    @AfterEach
    void tearDown() throws Exception {
        if (fx != null) {
            fx.close();
        }
    }

    @Test
    void concurrentSendersAndPostsDeliverEveryMessageOnceInPostedOrder() throws Exception {
        EmulatedFabric fabric = new EmulatedFabric();
        fabric.addDevice("emu0", EmulatedFabric.defaultAttributes(Transport.ROCE), InetAddress.getLoopbackAddress());
        fx = new Loopback(new EmulatedProvider(fabric), InetAddress.getLoopbackAddress());
        SharedReceiveQueue srq = fx.own(fx.server.pd.createSharedReceiveQueue(SRQ_SIZE, 1));
        fx.connect(fx.options().serverSrq(srq).rnrRetryCount(ConnectionParameters.RNR_RETRY_INFINITE));
        End[] clients = new End[CONNECTIONS];
        End[] servers = new End[CONNECTIONS];
        clients[0] = fx.client;
        servers[0] = fx.server;
        for (int c = 1; c < CONNECTIONS; c++) {
            End[] pair = fx.connectAnother(fx.server.pd);
            clients[c] = pair[0];
            servers[c] = pair[1];
        }
        Map<Integer, Integer> connectionOfQp = new HashMap<>();
        for (int c = 0; c < CONNECTIONS; c++) {
            connectionOfQp.put(servers[c].qp().qpNum(), c);
        }
        MemoryRegion in = fx.server.register(SRQ_SIZE * RECEIVE_SIZE, LOCAL_WRITE);

        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> senders = new ArrayList<>();
        for (int c = 0; c < CONNECTIONS; c++) {
            End client = clients[c];
            MemoryRegion out = client.register(8 * MESSAGES, LOCAL_WRITE);
            int connection = c;
            Thread t = new Thread(() -> {
                try {
                    send(client, out, connection);
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }, "sender-" + c);
            senders.add(t);
        }

        // fewer receives than senders, and each one posted back only after it arrived: some sender always finds the
        // queue empty and stalls (RNR), and posts resume it
        WorkRequestList recvs = new WorkRequestList(SRQ_SIZE, 1);
        long nextWrId = 0;
        nextWrId = post(srq, recvs, in, nextWrId, CONNECTIONS - 1);
        senders.forEach(Thread::start);
        int[] nextSeq = new int[CONNECTIONS];
        long[] lastWrIdOfCq = new long[CONNECTIONS];
        java.util.Arrays.fill(lastWrIdOfCq, -1);
        boolean[] consumed = new boolean[CONNECTIONS * MESSAGES];
        CompletionArray wcs = new CompletionArray(16);
        int received = 0;
        long deadline = System.nanoTime() + DEADLINE_NANOS;
        while (received < CONNECTIONS * MESSAGES) {
            if (failure.get() != null) {
                throw new AssertionError("a sender failed", failure.get());
            }
            if (System.nanoTime() - deadline > 0) {
                fail("received " + received + " of " + CONNECTIONS * MESSAGES + " within 30 s; next sequence numbers "
                        + java.util.Arrays.toString(nextSeq));
            }
            int got = 0;
            for (int c = 0; c < CONNECTIONS; c++) {
                int n = servers[c].recvCq.poll(wcs, wcs.capacity());
                assertTrue(n >= 0, () -> "poll: " + Errno.describe(n));
                for (int i = 0; i < n; i++) {
                    assertEquals(WcStatus.name(WcStatus.SUCCESS), WcStatus.name(wcs.status(i)));
                    long wrId = wcs.wrId(i);
                    assertTrue(wrId > lastWrIdOfCq[c] && wrId < nextWrId,
                            "receive " + wrId + " after " + lastWrIdOfCq[c] + " on one CQ, " + nextWrId + " posted");
                    lastWrIdOfCq[c] = wrId;
                    assertTrue(!consumed[(int) wrId], "receive " + wrId + " consumed twice");
                    consumed[(int) wrId] = true;
                    Integer connection = connectionOfQp.get(wcs.qpNum(i));
                    assertNotNull(connection, "qp_num of no server QP: " + wcs.qpNum(i));
                    assertEquals(c, connection.intValue(), "a completion on another QP's CQ");
                    long body = in.buffer().getLong((int) (wrId % SRQ_SIZE) * RECEIVE_SIZE);
                    assertEquals(((long) c << 32) | nextSeq[c], body, "connection " + c + ", receive " + wrId);
                    nextSeq[c]++;
                }
                got += n;
            }
            received += got;
            if (got > 0) {
                // post back as many as arrived (at most SRQ_SIZE outstanding, so slot wrId % SRQ_SIZE is free)
                nextWrId = post(srq, recvs, in, nextWrId, Math.min(got, CONNECTIONS * MESSAGES - (int) nextWrId));
            } else {
                LockSupport.parkNanos(TimeUnit.MICROSECONDS.toNanos(50));
            }
        }
        for (Thread t : senders) {
            t.join(TimeUnit.SECONDS.toMillis(10));
            assertTrue(!t.isAlive(), t.getName() + " did not finish");
        }
        if (failure.get() != null) {
            throw new AssertionError("a sender failed", failure.get());
        }
        for (int i = 0; i < consumed.length; i++) {
            assertTrue(consumed[i], "receive " + i + " never consumed");
        }
    }

    private static long post(SharedReceiveQueue srq, WorkRequestList recvs, MemoryRegion in, long wrId, int n) {
        for (int i = 0; i < n; i++) {
            long id = wrId + i;
            recvs.setRecv(i, id).addSge(i, in.address() + (id % SRQ_SIZE) * RECEIVE_SIZE, RECEIVE_SIZE, in.lkey());
        }
        int rc = srq.postRecv(recvs, 0, n);
        assertEquals(0, rc, () -> "ibv_post_srq_recv: " + Errno.describe(rc));
        return wrId + n;
    }

    /** Sends MESSAGES messages of 8 bytes, (connection << 32 | sequence), waiting for each one's completion. */
    private static void send(End client, MemoryRegion out, int connection) {
        WorkRequestList wr = new WorkRequestList(1, 1);
        CompletionArray wc = new CompletionArray(1);
        long deadline = System.nanoTime() + DEADLINE_NANOS;
        for (int seq = 0; seq < MESSAGES; seq++) {
            out.buffer().putLong(seq * 8, ((long) connection << 32) | seq);
            wr.setSend(0, seq, WrOpcode.SEND, SIGNALED).addSge(0, out.address() + seq * 8L, 8, out.lkey());
            int rc = client.qp().postSend(wr, 0, 1);
            assertEquals(0, rc, () -> "ibv_post_send: " + Errno.describe(rc));
            int n;
            while ((n = client.sendCq.poll(wc, 1)) == 0) {
                if (System.nanoTime() - deadline > 0) {
                    fail("send " + seq + " of connection " + connection + " did not complete");
                }
                Thread.onSpinWait();
            }
            assertEquals(1, n);
            assertEquals(seq, wc.wrId(0));
            assertEquals(WcStatus.name(WcStatus.SUCCESS), WcStatus.name(wc.status(0)));
        }
    }
}
