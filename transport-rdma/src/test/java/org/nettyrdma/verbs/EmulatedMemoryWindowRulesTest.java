package org.nettyrdma.verbs;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.nettyrdma.verbs.DeviceAttributes.Transport;
import org.nettyrdma.verbs.Loopback.End;
import org.nettyrdma.verbs.Loopback.Wc;
import org.nettyrdma.verbs.emulated.EmulatedFabric;
import org.nettyrdma.verbs.emulated.EmulatedProvider;

import java.net.InetAddress;
import java.nio.ByteBuffer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.nettyrdma.verbs.Access.LOCAL_WRITE;
import static org.nettyrdma.verbs.Access.MW_BIND;
import static org.nettyrdma.verbs.Access.REMOTE_READ;
import static org.nettyrdma.verbs.Loopback.pattern;
import static org.nettyrdma.verbs.Loopback.read;
import static org.nettyrdma.verbs.Loopback.write;
import static org.nettyrdma.verbs.SendFlags.SIGNALED;

/**
 * The emulated provider's memory windows where the conformance suite cannot go on every device: what rxe does wrong or
 * dangerously (invalidating a free window: a null dereference in rxe's kernel driver; a SEND_WITH_INV through another
 * QP than the window's: rxe does not check), which the emulated provider refuses so that code tested here does not
 * rely on it; and its limits.
 */
@Timeout(30)
class EmulatedMemoryWindowRulesTest {
    private static final int SIZE = 4096;
    private Loopback fx;

    private Loopback loopback(int maxMw) throws Exception {
        DeviceAttributes d = EmulatedFabric.defaultAttributes(Transport.ROCE);
        EmulatedFabric fabric = new EmulatedFabric();
        fabric.addDevice("emu0", new DeviceAttributes(Transport.ROCE, d.maxQp(), d.maxQpWr(), d.maxSge(),
                d.maxInlineData(), d.maxCqe(), d.maxMr(), d.maxMrSize(), d.maxQpRdAtom(), maxMw, d.capabilityFlags()),
                InetAddress.getLoopbackAddress());
        fx = new Loopback(new EmulatedProvider(fabric), InetAddress.getLoopbackAddress());
        return fx;
    }

    @AfterEach
    void tearDown() throws Exception {
        if (fx != null) {
            fx.close();
        }
    }

    private int bind(End end, MemoryWindow mw, MemoryRegion mr) {
        int rkey = mw.nextRkey();
        fx.wrs.bindWindow(0, 1, SIGNALED, mw, rkey, mr, mr.address(), SIZE, REMOTE_READ);
        fx.assertPosted(end.postSend(1));
        assertEquals(WcStatus.SUCCESS, end.sendCompletion().status());
        return rkey;
    }

    @Test
    void invalidatingAFreeWindowFails() throws Exception {
        loopback(16).connect(fx.options());
        MemoryRegion mr = fx.server.register(SIZE, LOCAL_WRITE | MW_BIND);
        MemoryWindow mw = fx.own(fx.server.pd.allocMemoryWindow());
        int rkey = bind(fx.server, mw, mr);
        fx.wrs.invalidate(0, 2, SIGNALED, rkey);
        fx.assertPosted(fx.server.postSend(1));
        assertEquals(WcStatus.SUCCESS, fx.server.sendCompletion().status());
        fx.wrs.invalidate(0, 3, SIGNALED, rkey);
        fx.assertPosted(fx.server.postSend(1));
        Wc twice = fx.server.sendCompletion();
        assertEquals(WcStatus.name(WcStatus.LOC_QP_OP_ERR), WcStatus.name(twice.status()), twice::toString);
        assertEquals(QueuePair.QpState.ERROR, fx.server.qp().state());
    }

    @Test
    void sendWithInvalidateThroughAnotherQpOfThePdIsRefused() throws Exception {
        loopback(16).connect(fx.options());
        End[] other = fx.connectAnother(fx.server.pd);
        MemoryRegion mr = fx.server.register(SIZE, LOCAL_WRITE | MW_BIND);
        write(mr, 0, pattern(SIZE, 1));
        MemoryWindow mw = fx.own(fx.server.pd.allocMemoryWindow());
        int rkey = bind(fx.server, mw, mr);
        MemoryRegion in = fx.server.register(SIZE, LOCAL_WRITE);
        fx.recvWr(0, 5, in, 0, 64);
        fx.assertPosted(other[1].postRecv(1));
        MemoryRegion out = other[0].register(SIZE, LOCAL_WRITE);
        fx.wr(0, 6, WrOpcode.SEND_WITH_INV, SIGNALED, out, 0, 4).invalidateRkey(0, rkey);
        fx.assertPosted(other[0].postSend(1));
        assertEquals(WcStatus.REM_INV_REQ_ERR, other[1].recvCompletion().status());
        assertEquals(WcStatus.REM_INV_REQ_ERR, other[0].sendCompletion().status());
        MemoryRegion local = fx.client.register(SIZE, LOCAL_WRITE);
        fx.wr(0, 7, WrOpcode.RDMA_READ, SIGNALED, local, 0, 64).remote(0, mr.address(), rkey);
        fx.assertPosted(fx.client.postSend(1));
        assertEquals(WcStatus.SUCCESS, fx.client.sendCompletion().status(), "the window still serves its QP");
        assertArrayEquals(pattern(64, 1), read(local, 0, 64));
    }

    @Test
    void maxMwIsEnforcedAndClosingReturnsTheWindow() throws Exception {
        loopback(2);
        MemoryWindow one = fx.server.pd.allocMemoryWindow();
        MemoryWindow two = fx.server.pd.allocMemoryWindow();
        VerbsException e = assertThrows(VerbsException.class, fx.server.pd::allocMemoryWindow);
        assertEquals(Errno.ENOMEM, e.errno(), e.getMessage());
        one.close();
        fx.own(fx.server.pd.allocMemoryWindow());
        fx.own(two);
    }

    @Test
    void closingABoundWindowReleasesItsRegion() throws Exception {
        loopback(16).connect(fx.options());
        MemoryRegion mr = fx.server.pd.registerMemory(ByteBuffer.allocateDirect(SIZE), LOCAL_WRITE | MW_BIND);
        MemoryWindow mw = fx.server.pd.allocMemoryWindow();
        int rkey = bind(fx.server, mw, mr);
        mw.close();
        mr.close();
        MemoryRegion local = fx.client.register(SIZE, LOCAL_WRITE);
        fx.wr(0, 2, WrOpcode.RDMA_READ, SIGNALED, local, 0, 64).remote(0, mr.address(), rkey);
        fx.assertPosted(fx.client.postSend(1));
        assertEquals(WcStatus.REM_ACCESS_ERR, fx.client.sendCompletion().status());
    }
}
