package org.nettyrdma.channel;

import io.netty.channel.IoEvent;
import io.netty.channel.IoHandle;
import io.netty.channel.IoRegistration;
import org.nettyrdma.verbs.CmEvent;
import org.nettyrdma.verbs.CompletionArray;

/** What an {@link RdmaIoHandler} drives: a channel's completions and RDMA CM events, on the channel's loop. */
interface RdmaIoHandle extends IoHandle {

    /** Whether the calling thread is the handle's event loop. */
    boolean inEventLoop();

    /** Runs a task on the handle's event loop. */
    void execute(Runnable task);

    /** Completion {@code index} of {@code completions} is for this handle (its registration id is in the wr_id). */
    void onCompletion(CompletionArray completions, int index);

    /**
     * Completion {@code index} of {@code completions} is a receive this handle's QP took from a shared receive queue
     * (its wr_id is the pool's; the handler found the handle by qp_num: {@link RdmaIoHandler.Registration#bindSharedReceives}).
     * A handle whose QP has no shared receive queue never binds one, so never gets here.
     */
    default void onSharedReceive(CompletionArray completions, int index) {
        fail(new IllegalStateException("a receive from a shared receive queue completed for a channel that has none "
                + "(qp_num " + completions.qpNum(index) + "): a bug of the transport"));
    }

    /** A CM event for this handle's id; {@code event} is reused after the call. */
    void onCmEvent(CmEvent event);

    /** The handler finished a batch in which this handle asked to be told ({@link RdmaIoHandler#touch}). */
    void onBatchComplete();

    /** The loop's housekeeping tick, every {@link RdmaIoHandler#TICK_MILLIS}. */
    default void tick() {
    }

    /** Something the handle's resources depend on failed (its completion queue): the channel reports it and closes. */
    void fail(Throwable cause);

    @Override
    default void handle(IoRegistration registration, IoEvent ioEvent) {
        RdmaIoEvent event = (RdmaIoEvent) ioEvent;
        if (event.cmEvent != null) {
            onCmEvent(event.cmEvent);
        } else {
            onCompletion(event.completions, event.index);
        }
    }

    /** The event passed through {@link #handle}; reused. */
    final class RdmaIoEvent implements IoEvent {
        CmEvent cmEvent;
        CompletionArray completions;
        int index;
    }
}
