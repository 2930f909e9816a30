package org.nettyrdma.verbs;

/** Faults that tests inject into a provider that supports it (the emulated one). */
public interface FaultInjector {

    /** The next send work request that executes on {@code qp} fails with {@code wcStatus}, and the QP goes to ERROR. */
    void failNextSend(QueuePair qp, int wcStatus);

    /**
     * The next post of send work requests on {@code qp} is refused with {@code -errno}, nothing of it posted, as
     * {@code ibv_post_send} refuses one (a QP the device moved out of RTS, a full queue); later posts go as before.
     */
    void refuseNextPostSend(QueuePair qp, int errno);

    /**
     * Cuts the link under a connected QP without any CM event: both sides' QPs stay as they are, and every send
     * thereafter fails with RETRY_EXC_ERR (a peer that died, a pulled cable).
     */
    void severLink(QueuePair qp);

    /**
     * Silences the link under a connected QP without any CM event: every send thereafter gets no answer at all, it
     * stays posted, neither completed nor failed (a peer gone while the device retries for minutes, as soft-iWARP
     * retransmits over TCP). A QP moved to ERROR still flushes it.
     */
    void silenceLink(QueuePair qp);

    /**
     * The sends posted on {@code qp} stay posted, neither executed nor completed, while the link and the CM work on
     * (sends the peer's device has not acknowledged yet, as in a long RNR retry): a disconnect still reaches the peer,
     * and a QP moved to ERROR flushes them.
     */
    void stallSends(QueuePair qp);

    /**
     * Destroying {@code qp} keeps the calling thread {@code millis} first (the QP works on meanwhile), as SoftRoCE's
     * kernel took 1.9 s to destroy a QP whose peer host had been killed.
     */
    void delayDestroy(QueuePair qp, long millis);

    /** Completions for {@code cq} become visible {@code delayNanos} after the work finished (0 restores). */
    void delayCompletions(CompletionQueue cq, long delayNanos);

    /**
     * {@code cq} overruns, as a device's does when a completion arrives with the queue full: the completions in it and
     * every later one are lost, and {@link CompletionQueue#poll} answers -EOVERFLOW from then on.
     */
    void overrunCompletionQueue(CompletionQueue cq);

    /**
     * The device reports {@code srq} in error ({@code IBV_EVENT_SRQ_ERR}): {@link SharedReceiveQueue#failed} answers
     * true. Nothing else changes, the worst case for its user: no QP of it fails, no post is refused.
     */
    void failSharedReceiveQueue(SharedReceiveQueue srq);

    /**
     * A successful receive completion of {@code byteLen} bytes for {@code wrId} on {@code qpNum} appears in {@code cq},
     * as one a device left there for a QP that is destroyed since (its number free for the next QP).
     */
    void addReceiveCompletion(CompletionQueue cq, long wrId, int byteLen, int qpNum);
}
