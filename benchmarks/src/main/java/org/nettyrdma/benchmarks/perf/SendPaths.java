package org.nettyrdma.benchmarks.perf;

import io.netty.channel.EventLoopGroup;
import org.nettyrdma.channel.RdmaCounters;
import org.nettyrdma.channel.RdmaIoHandler;

/**
 * Which of the RDMA transport's paths the client's bytes took while a measured round ran: the shares of the bytes it
 * sent that were copied into registered staging, placed in the peer's WRITE ring, and read by the peer through the
 * READ rendezvous (protocol v2); the rest went as SENDs straight from registered buffers. So a row says what it
 * measured: a row with protocol v2 offered whose ring and rendezvous shares are 0 measured protocol v1.
 */
final class SendPaths {
    private final EventLoopGroup clientGroup;
    private long sent;
    private long copied;
    private long ring;
    private long rendezvous;

    private SendPaths(EventLoopGroup clientGroup) {
        this.clientGroup = clientGroup;
    }

    /** For an RDMA transport's client group, else null. */
    static SendPaths of(PerfTransport transport, EventLoopGroup clientGroup) {
        return PerfTransport.RDMA.equals(transport.name()) ? new SendPaths(clientGroup) : null;
    }

    /** Before the measured round. */
    void start() {
        RdmaCounters c = RdmaIoHandler.counters(clientGroup);
        sent = c.bytesSent();
        copied = c.copiedBytes();
        ring = c.ringBytesSent();
        rendezvous = c.rendezvousBytesSent();
    }

    /** After it: the shares since {@link #start()}, in percent, into {@code r}. */
    void report(PerfResult r) {
        RdmaCounters c = RdmaIoHandler.counters(clientGroup);
        double total = c.bytesSent() - sent;
        if (total > 0) {
            r.copiedPercent = 100 * (c.copiedBytes() - copied) / total;
            r.ringPercent = 100 * (c.ringBytesSent() - ring) / total;
            r.rendezvousPercent = 100 * (c.rendezvousBytesSent() - rendezvous) / total;
        }
    }
}
