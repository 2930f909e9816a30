package org.nettyrdma.tools.doctor;

/**
 * An estimate of the registered (pinned) memory a process of this configuration holds, which the memlock limit has to
 * cover (unless CAP_IPC_LOCK lifts it): every connection's receive buffers, as measured ({@link ConnectionMemory}); the
 * send staging of the SENDs in flight, every connection's most or each event loop's cap ({@code
 * RdmaIoHandlerConfig.sendStagingBytes}), whichever is lower; received buffers its pipeline holds, for which fresh ones
 * are registered, up to MAX_LENT_RECEIVE_BYTES per channel and {@code maxLentReceiveBytes} per event loop; and a partly
 * used pool region per event loop (each loop registers the regions it uses in its own protection domain). What the
 * application allocates from {@code RdmaByteBufAllocator} itself comes on top.
 */
record MemlockNeed(int connections, int eventLoops, long perConnectionBytes, long lentPerChannel, long lentPerLoop,
                   long regionBytes, long stagingPerConnection, long stagingPerLoop) {

    long connectionBytes() {
        return connections * perConnectionBytes;
    }

    /** Lent receive buffers at most: the channels' bound, or the loops' if it is lower. */
    long lentBytes() {
        return Math.min(connections * lentPerChannel, eventLoops * lentPerLoop);
    }

    /** Send staging at most: the connections' SENDs in flight, or the loops' caps if they are lower. */
    long stagingBytes() {
        return Math.min(connections * stagingPerConnection, eventLoops * stagingPerLoop);
    }

    long poolRoundingBytes() {
        return eventLoops * regionBytes;
    }

    long totalBytes() {
        return connectionBytes() + stagingBytes() + lentBytes() + poolRoundingBytes();
    }
}
