package org.nettyrdma.channel;

/**
 * Whether an {@link RdmaIoHandler} may arm its completion queues for solicited completions only before it blocks.
 *
 * <p>Every SEND, SEND_WITH_INV (a rendezvous' DONE) and WRITE_WITH_IMM of this transport asks for a solicited event
 * (and says so in its handshake, {@link RdmaProtocol#FLAG_SOLICITS}), so every message from such a peer wakes a loop
 * armed that way; its own send completions do not (an unsuccessful one does on most devices; rxe's do not, and such a
 * failure is then seen at the loop's next wake-up, its tick at the latest). Armed for every completion, the completion
 * of the SEND a loop has just posted in answer to a task made its next wait return at once, or woke it once more: a
 * wake-up per message that TCP does not have (docs/performance.md). So the loop arms for solicited completions only
 * while nothing it runs waits for a completion of its own: no send queue has a work request in flight whose completion
 * settles bytes or ends something (zero-copy bytes, a FIN, a probe, a ring write, a bind) or is nearly full ({@link
 * SendQueue}), no staging pool has a waiter, and no connection's peer leaves its messages unsolicited (its send queue
 * counts as waiting). Queues of iWARP devices are armed for every completion whatever this says: soft-iWARP raises no
 * solicited event for a receive ({@code RdmaIoHandler.DeviceQueues.solicitedEvents}). Event-loop thread only.
 */
final class SolicitedWakeups {
    private final boolean enabled;
    /** Send queues that wait for completions of their own, or whose peer leaves its messages unsolicited. */
    private int awaitingQueues;

    SolicitedWakeups(boolean enabled) {
        this.enabled = enabled;
    }

    /** A send queue started ({@code true}) or stopped needing the loop to wake for every completion. */
    void queueAwaits(boolean awaits) {
        awaitingQueues += awaits ? 1 : -1;
    }

    /** Whether the loop's queues may be armed for solicited completions only (staging pools not counted here). */
    boolean solicitedOnly() {
        return enabled && awaitingQueues == 0;
    }

    /** Send queues that need the loop to wake for every completion now (tests). */
    int awaitingQueues() {
        return awaitingQueues;
    }
}
