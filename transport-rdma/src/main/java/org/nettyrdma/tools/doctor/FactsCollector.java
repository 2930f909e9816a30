package org.nettyrdma.tools.doctor;

import org.nettyrdma.channel.RdmaIoHandlerConfig;
import org.nettyrdma.channel.RdmaSocketChannel;
import org.nettyrdma.verbs.jni.HostRoot;
import org.nettyrdma.verbs.jni.NativeDiagnosis;
import org.nettyrdma.verbs.jni.NativeFacts;
import org.nettyrdma.verbs.jni.ProcSelf;

/** Gathers the {@link Facts}: from a {@link HostRoot} and the native library (this machine, or made-up ones). */
final class FactsCollector {
    private final HostRoot root;
    private final NativeFacts lib;
    private final Netdevs netdevs;

    FactsCollector(HostRoot root, NativeFacts lib, Netdevs netdevs) {
        this.root = root;
        this.lib = lib;
        this.netdevs = netdevs;
    }

    Facts collect(DoctorOptions o) {
        RdmaIoHandlerConfig loop = new RdmaIoHandlerConfig();
        MemlockNeed need = null;
        String needError = null;
        if (o.quick()) {
            needError = "not measured (--quick)";
        } else {
            try {
                ConnectionMemory m = ConnectionMemory.measure(o.receiveBufferSize(), o.receiveBufferCount());
                long lentPerChannel = new RdmaSocketChannel().config().getMaxLentReceiveBytes();
                need = new MemlockNeed(o.connections(), o.eventLoops(), m.perConnectionBytes(), lentPerChannel,
                        loop.getMaxLentReceiveBytes(), m.regionBytes(), m.stagingBytes(), loop.getSendStagingBytes());
            } catch (Exception | LinkageError e) {
                needError = e.toString();
            }
        }
        NativeDiagnosis verdict = NativeDiagnosis.of(root, lib);
        return new Facts(loop.getProvider(), verdict, new DeviceReader(root).devices(),
                ProcSelf.memlock(root.procSelfLimits()), ProcSelf.hasCapIpcLock(root.procSelfStatus()), need,
                needError, o.address(), netdevs);
    }
}
