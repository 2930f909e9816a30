package org.nettyrdma.verbs.emulated;

import org.nettyrdma.verbs.CmEventChannel;
import org.nettyrdma.verbs.CmId;
import org.nettyrdma.verbs.CompletionQueue;
import org.nettyrdma.verbs.Device;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.EventWaiter;
import org.nettyrdma.verbs.FaultInjector;
import org.nettyrdma.verbs.QueuePair;
import org.nettyrdma.verbs.SharedReceiveQueue;
import org.nettyrdma.verbs.VerbsException;
import org.nettyrdma.verbs.VerbsProvider;

import java.util.List;

/**
 * The emulated provider: pure Java, in-process, with the semantics of an RC queue pair on hardware (docs/verbs-spi.md)
 * and fault injection for tests. Used wherever no RDMA device exists.
 */
public final class EmulatedProvider implements VerbsProvider {
    public static final String NAME = "emulated";

    private final EmulatedFabric fabric;
    private final FaultInjector faults = new Faults();

    public EmulatedProvider(EmulatedFabric fabric) {
        this.fabric = fabric;
    }

    /** A provider over the process-wide {@link EmulatedFabric#defaultFabric() default fabric}. */
    public static EmulatedProvider create() {
        return new EmulatedProvider(EmulatedFabric.defaultFabric());
    }

    public EmulatedFabric fabric() {
        return fabric;
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public List<Device> devices() {
        return fabric.devices();
    }

    @Override
    public CmEventChannel createEventChannel() {
        return new EmulatedCmEventChannel();
    }

    @Override
    public CmId createId(CmEventChannel channel, Object context) throws VerbsException {
        if (!(channel instanceof EmulatedCmEventChannel)) {
            throw new VerbsException("rdma_create_id", Errno.EINVAL, "event channel of another provider");
        }
        return new EmulatedCmId(fabric, (EmulatedCmEventChannel) channel, context);
    }

    @Override
    public EventWaiter createWaiter() {
        return new EmulatedEventWaiter();
    }

    @Override
    public FaultInjector faults() {
        return faults;
    }

    private static final class Faults implements FaultInjector {
        @Override
        public void failNextSend(QueuePair qp, int wcStatus) {
            ((EmulatedQueuePair) qp).injectFailure(wcStatus);
        }

        @Override
        public void refuseNextPostSend(QueuePair qp, int errno) {
            ((EmulatedQueuePair) qp).refuseNextPostSend(errno);
        }

        @Override
        public void severLink(QueuePair qp) {
            ((EmulatedQueuePair) qp).sever();
        }

        @Override
        public void silenceLink(QueuePair qp) {
            ((EmulatedQueuePair) qp).silence();
        }

        @Override
        public void stallSends(QueuePair qp) {
            ((EmulatedQueuePair) qp).stallSends();
        }

        @Override
        public void delayDestroy(QueuePair qp, long millis) {
            ((EmulatedQueuePair) qp).delayDestroy(millis);
        }

        @Override
        public void delayCompletions(CompletionQueue cq, long delayNanos) {
            ((EmulatedCompletionQueue) cq).delayNanos(delayNanos);
        }

        @Override
        public void overrunCompletionQueue(CompletionQueue cq) {
            ((EmulatedCompletionQueue) cq).overrun();
        }

        @Override
        public void failSharedReceiveQueue(SharedReceiveQueue srq) {
            ((EmulatedSharedReceiveQueue) srq).fail();
        }

        @Override
        public void addReceiveCompletion(CompletionQueue cq, long wrId, int byteLen, int qpNum) {
            ((EmulatedCompletionQueue) cq).add(wrId, org.nettyrdma.verbs.WcStatus.SUCCESS,
                    org.nettyrdma.verbs.WcOpcode.RECV, byteLen, 0, qpNum, 0, false);
        }
    }
}
