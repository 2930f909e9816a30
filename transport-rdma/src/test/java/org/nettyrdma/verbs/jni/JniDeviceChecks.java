package org.nettyrdma.verbs.jni;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.nettyrdma.verbs.Access;
import org.nettyrdma.verbs.CmEvent;
import org.nettyrdma.verbs.CmEventChannel;
import org.nettyrdma.verbs.CmEventType;
import org.nettyrdma.verbs.CmId;
import org.nettyrdma.verbs.CompletionArray;
import org.nettyrdma.verbs.CompletionChannel;
import org.nettyrdma.verbs.CompletionQueue;
import org.nettyrdma.verbs.ConnectionParameters;
import org.nettyrdma.verbs.Device;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.EventWaiter;
import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.QpInitAttributes;
import org.nettyrdma.verbs.QueuePair;
import org.nettyrdma.verbs.SendFlags;
import org.nettyrdma.verbs.VerbsConformanceSuite;
import org.nettyrdma.verbs.WcStatus;
import org.nettyrdma.verbs.WorkRequestList;
import org.nettyrdma.verbs.WrOpcode;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * What the JNI provider does on a real device beyond the conformance suite (whose cqOverrunIsEoverflow covers the
 * CQ overrun, an asynchronous event on hardware): long chains are posted in pieces with the right bad index, an inline
 * SGE naming no registered memory fails on the device instead of crashing the JVM, and misuse after close is an error
 * code.
 * Needs kernel RDMA: run by {@link VmConformanceMain} with the device's IP in
 * {@value JniVerbsConformance#ADDRESS_PROPERTY}.
 */
@Timeout(60)
public class JniDeviceChecks {
    private static final long TIMEOUT_NANOS = TimeUnit.SECONDS.toNanos(10);
    private static final int SIZE = 4096;

    private final Deque<AutoCloseable> resources = new ArrayDeque<>();
    private final CmEvent event = new CmEvent();
    private final CompletionArray wcs = new CompletionArray(64);
    private JniProvider provider;
    private CmEventChannel serverEvents;
    private CmEventChannel clientEvents;
    private Device device;
    private ProtectionDomain clientPd;
    private ProtectionDomain serverPd;
    private CompletionQueue clientCq;
    private CompletionQueue serverCq;
    private QueuePair client;
    private QueuePair server;

    private <T extends AutoCloseable> T own(T resource) {
        resources.push(resource);
        return resource;
    }

    @BeforeEach
    void setUp() {
        provider = JniProvider.create();
    }

    @AfterEach
    void tearDown() throws Exception {
        while (!resources.isEmpty()) {
            resources.pop().close();
        }
        provider.close();
    }

    /** A connection through the device to itself, one CQ per side for both queues. */
    private void connect(int cqe, int maxWr, boolean inline) throws Exception {
        InetAddress ip = InetAddress.getByName(System.getProperty(JniVerbsConformance.ADDRESS_PROPERTY));
        serverEvents = own(provider.createEventChannel());
        clientEvents = own(provider.createEventChannel());
        CmId listener = provider.createId(serverEvents, "listener");
        listener.bind(new InetSocketAddress(ip, 0));
        listener.listen(4);
        device = listener.device();
        assertNotNull(device);
        clientPd = own(device.allocPd());
        serverPd = own(device.allocPd());
        CompletionChannel channel = own(device.createCompletionChannel());
        clientCq = own(device.createCq(cqe, channel));
        serverCq = own(device.createCq(cqe, channel));
        CmId clientId = provider.createId(clientEvents, "client");
        // ids close before the PDs, CQs and channels they use
        resources.push(listener);
        resources.push(clientId);
        clientId.resolveAddress(null, listener.localAddress(), 2000);
        await(clientEvents, CmEventType.ADDR_RESOLVED);
        clientId.resolveRoute(2000);
        await(clientEvents, CmEventType.ROUTE_RESOLVED);
        int inlineBytes = inline ? Math.min(64, device.attributes().maxInlineData()) : 0;
        client = clientId.createQp(clientPd, attributes(clientCq, maxWr, inlineBytes));
        ConnectionParameters parameters =
                new ConnectionParameters(null, 1, 1, 3, ConnectionParameters.RNR_RETRY_INFINITE);
        clientId.connect(parameters);
        CmId incoming = await(serverEvents, CmEventType.CONNECT_REQUEST).id();
        resources.push(incoming);
        server = incoming.createQp(serverPd, attributes(serverCq, maxWr, 0));
        incoming.accept(parameters);
        // the client first: on IB and RoCE librdmacm sends the RTU (and so the server's ESTABLISHED) from its poll
        await(clientEvents, CmEventType.ESTABLISHED);
        await(serverEvents, CmEventType.ESTABLISHED);
    }

    private static QpInitAttributes attributes(CompletionQueue cq, int maxWr, int inline) {
        return new QpInitAttributes(cq, cq, maxWr, maxWr, 4, 4, inline, false);
    }

    private CmEvent await(CmEventChannel channel, CmEventType type) throws Exception {
        EventWaiter waiter = provider.createWaiter();
        try {
            waiter.add(channel);
            long deadline = System.nanoTime() + TIMEOUT_NANOS;
            while (!channel.poll(event)) {
                if (System.nanoTime() - deadline > 0) {
                    fail("no " + type + " within 10 s");
                }
                waiter.await(TimeUnit.MILLISECONDS.toNanos(20));
            }
        } finally {
            waiter.close();
        }
        assertEquals(type, event.type(), event::toString);
        return event;
    }

    private MemoryRegion register(ProtectionDomain pd, int access) throws Exception {
        return own(pd.registerMemory(ByteBuffer.allocateDirect(SIZE), access));
    }

    /** Polls until n completions came; returns the status of the last. */
    private int[] completions(CompletionQueue cq, int n) {
        int[] statuses = new int[n];
        int got = 0;
        long deadline = System.nanoTime() + TIMEOUT_NANOS;
        while (got < n) {
            int rc = cq.poll(wcs, Math.min(n - got, wcs.capacity()));
            assertTrue(rc >= 0, () -> "poll: " + Errno.describe(rc));
            for (int i = 0; i < rc; i++) {
                statuses[got + i] = wcs.status(i);
            }
            got += rc;
            if (rc == 0 && System.nanoTime() - deadline > 0) {
                fail(n + " completions expected, got " + got);
            }
        }
        return statuses;
    }

    @Test
    void longChainsArePostedInPiecesWithTheRightBadIndex() throws Exception {
        connect(256, 128, false);
        MemoryRegion in = register(serverPd, Access.LOCAL_WRITE);
        MemoryRegion out = register(clientPd, Access.LOCAL_WRITE);
        int n = 100;
        WorkRequestList wrs = new WorkRequestList(n, 8);
        for (int i = 0; i < n; i++) {
            wrs.setRecv(i, i).addSge(i, in.address() + 32L * i, 32, in.lkey());
        }
        assertEquals(0, server.postRecv(wrs, 0, n));
        for (int i = 0; i < n; i++) {
            wrs.setSend(i, 1000 + i, WrOpcode.SEND, SendFlags.SIGNALED);
            for (int s = 0; s < 4; s++) {
                wrs.addSge(i, out.address() + s, 1, out.lkey());
            }
        }
        for (int s = 4; s < 8; s++) {
            wrs.addSge(70, out.address(), 1, out.lkey()); // 8 SGEs: more than the QP's 4
        }
        int rc = client.postSend(wrs, 0, n);
        assertEquals(-Errno.EINVAL, rc, Errno.describe(rc));
        assertEquals(70, wrs.badIndex());
        int[] sent = completions(clientCq, 70);
        for (int s : sent) {
            assertEquals(WcStatus.SUCCESS, s, WcStatus.name(s));
        }
        completions(serverCq, 70);
    }

    @Test
    void inlineSendOfUnregisteredMemoryFailsOnTheDevice() throws Exception {
        connect(64, 16, true);
        assumeTrue(client.capabilities().maxInlineData() >= 8, "the device has no inline sends");
        MemoryRegion in = register(serverPd, Access.LOCAL_WRITE);
        WorkRequestList wrs = new WorkRequestList(1, 1);
        wrs.setRecv(0, 1).addSge(0, in.address(), SIZE, in.lkey());
        assertEquals(0, server.postRecv(wrs, 0, 1));
        // an address no region covers (and an lkey no region has): read inline, it would crash the JVM
        wrs.setSend(0, 2, WrOpcode.SEND, SendFlags.SIGNALED | SendFlags.INLINE).addSge(0, 16, 8, 0x5a5a5a);
        assertEquals(0, client.postSend(wrs, 0, 1));
        // hardware says LOC_PROT_ERR; rxe and siw say LOC_QP_OP_ERR for an lkey they do not know
        int status = completions(clientCq, 1)[0];
        assertTrue(VerbsConformanceSuite.LOCAL_PROTECTION_ERRORS.contains(status), WcStatus.name(status));
    }

    @Test
    void misuseAfterCloseIsAnErrorCode() throws Exception {
        connect(16, 16, false);
        MemoryRegion out = register(clientPd, Access.LOCAL_WRITE);
        WorkRequestList wrs = new WorkRequestList(1, 1);
        wrs.setSend(0, 1, WrOpcode.SEND, SendFlags.SIGNALED).addSge(0, out.address(), 8, out.lkey());
        client.close();
        client.close();
        assertEquals(-Errno.EBADF, client.postSend(wrs, 0, 1));
        assertEquals(-Errno.EBADF, client.postRecv(wrs, 0, 1));
        assertEquals(QueuePair.QpState.ERROR, client.state());
        out.close();
        out.close();
        clientCq.close();
        clientCq.close();
        assertEquals(-Errno.EBADF, clientCq.poll(wcs, 1));
        assertEquals(-Errno.EBADF, clientCq.requestNotify(false));
        clientCq.ackEvents(1);
    }

    /**
     * A loop's default 16384-entry CQ (with a completion channel) next to 200 queue pairs: on soft-iWARP, without the
     * device's guard CQ (see JniDevice), the sixth queue pair reached mmap page 144 and libsiw refused it and every
     * one after it (EIO).
     */
    @Test
    void manyQueuePairsNextToALargeCompletionQueue() throws Exception {
        InetAddress ip = InetAddress.getByName(System.getProperty(JniVerbsConformance.ADDRESS_PROPERTY));
        CmEventChannel events = own(provider.createEventChannel());
        CmId first = own(provider.createId(events, "qp0"));
        first.bind(new InetSocketAddress(ip, 0));
        Device dev = first.device();
        ProtectionDomain pd = own(dev.allocPd());
        CompletionChannel cch = own(dev.createCompletionChannel());
        CompletionQueue cq = own(dev.createCq(16384, cch));
        for (int i = 0; i < 200; i++) {
            CmId id = i == 0 ? first : own(provider.createId(events, "qp" + i));
            if (i > 0) {
                id.bind(new InetSocketAddress(ip, 0));
            }
            // the shape of a channel's queue pair
            own(id.createQp(pd, new QpInitAttributes(cq, cq, 40, 16, 4, 1, 64, false)));
        }
    }
}
