package org.nettyrdma.channel;

import org.junit.jupiter.api.Test;
import org.nettyrdma.verbs.CmEvent;
import org.nettyrdma.verbs.CmEventType;
import org.nettyrdma.verbs.Errno;

import java.net.ConnectException;
import java.net.InetSocketAddress;

import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** What each RDMA CM event that ends a connect tells the application. */
class PendingConnectTest {
    private static final InetSocketAddress REMOTE = new InetSocketAddress("10.78.0.2", 4791);

    private static ConnectException failure(CmEventType type, int status) {
        CmEvent event = new CmEvent();
        event.set(type, null, null, status, new byte[0], 0);
        return PendingConnect.failure(event, REMOTE);
    }

    @Test
    void aConnectErrorForAPortInUseSaysSoAndToConnectAgain() {
        // seen on soft-iWARP: the TCP port RDMA CM picked was held by a socket of an earlier connection
        String m = failure(CmEventType.CONNECT_ERROR, -Errno.EADDRINUSE).getMessage();
        assertTrue(m.contains("in use by a TCP socket") && m.contains("connect again") && m.contains("10.78.0.2"), m);
    }

    @Test
    void otherConnectErrorsSayTheExchangeWithThePeerFailed() {
        // soft-iWARP: reading the MPA reply failed (seen once in CI, after the transport's retries)
        String m = failure(CmEventType.CONNECT_ERROR, -Errno.EINVAL).getMessage();
        assertTrue(m.contains("exchange with the peer failed") && m.contains("EINVAL") && m.contains("10.78.0.2"), m);
    }

    @Test
    void addressAndRouteErrorsNameTheRoute() {
        String m = failure(CmEventType.ROUTE_ERROR, -Errno.ETIMEDOUT).getMessage();
        assertTrue(m.contains("no RDMA route to") && m.contains("ETIMEDOUT"), m);
    }

    @Test
    void aRejectWithoutReasonIsARefusal() {
        assertTrue(failure(CmEventType.REJECTED, 0).getMessage().contains("Connection refused"));
    }

    @Test
    void eventsThatEndNoConnectGiveNoFailure() {
        assertNull(failure(CmEventType.ESTABLISHED, 0));
        assertNotNull(failure(CmEventType.UNREACHABLE, -Errno.ETIMEDOUT));
    }
}
