package org.nettyrdma.verbs.emulated;

import org.nettyrdma.verbs.CompletionChannel;
import org.nettyrdma.verbs.CompletionQueue;
import org.nettyrdma.verbs.Device;
import org.nettyrdma.verbs.DeviceAttributes;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.VerbsException;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.util.List;

final class EmulatedDevice implements Device {
    private final EmulatedFabric fabric;
    private final String name;
    private final DeviceAttributes attributes;
    private final List<InetAddress> addresses;
    private int qps;
    private int mrs;
    private int mws;
    private int srqs;

    EmulatedDevice(EmulatedFabric fabric, String name, DeviceAttributes attributes, List<InetAddress> addresses) {
        this.fabric = fabric;
        this.name = name;
        this.attributes = attributes;
        this.addresses = addresses;
    }

    EmulatedFabric fabric() {
        return fabric;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public DeviceAttributes attributes() {
        return attributes;
    }

    boolean owns(InetAddress ip) {
        for (InetAddress a : addresses) {
            if (a.equals(ip) || (a.isLoopbackAddress() && ip.isLoopbackAddress() && sameFamily(a, ip))) {
                return true;
            }
        }
        return false;
    }

    InetAddress addressOfFamily(InetAddress family) {
        for (InetAddress a : addresses) {
            if (sameFamily(a, family)) {
                return a;
            }
        }
        return null;
    }

    private static boolean sameFamily(InetAddress a, InetAddress b) {
        return (a instanceof Inet4Address) == (b instanceof Inet4Address);
    }

    @Override
    public ProtectionDomain allocPd() {
        return new EmulatedProtectionDomain(this);
    }

    @Override
    public CompletionChannel createCompletionChannel() {
        return new EmulatedCompletionChannel();
    }

    @Override
    public CompletionQueue createCq(int cqe, CompletionChannel channel) throws VerbsException {
        if (cqe < 1 || cqe > attributes.maxCqe()) {
            throw new VerbsException("ibv_create_cq", Errno.EINVAL,
                    "cqe " + cqe + " outside 1.." + attributes.maxCqe() + " of " + name);
        }
        if (channel != null && !(channel instanceof EmulatedCompletionChannel)) {
            throw new VerbsException("ibv_create_cq", Errno.EINVAL, "completion channel of another provider");
        }
        return new EmulatedCompletionQueue(this, cqe, (EmulatedCompletionChannel) channel);
    }

    synchronized void reserveQp() throws VerbsException {
        if (qps >= attributes.maxQp()) {
            throw new VerbsException("rdma_create_qp", Errno.ENOMEM, "max_qp " + attributes.maxQp() + " of " + name);
        }
        qps++;
    }

    synchronized void releaseQp() {
        qps--;
    }

    synchronized int queuePairs() {
        return qps;
    }

    synchronized void reserveMr() throws VerbsException {
        if (mrs >= attributes.maxMr()) {
            throw new VerbsException("ibv_reg_mr", Errno.ENOMEM, "max_mr " + attributes.maxMr() + " of " + name);
        }
        mrs++;
    }

    synchronized void releaseMr() {
        mrs--;
    }

    synchronized void reserveSrq() throws VerbsException {
        if (srqs >= attributes.maxSrq()) {
            throw new VerbsException("ibv_create_srq", Errno.ENOMEM, "max_srq " + attributes.maxSrq() + " of " + name);
        }
        srqs++;
    }

    synchronized void releaseSrq() {
        srqs--;
    }

    synchronized void reserveMw() throws VerbsException {
        if (mws >= attributes.maxMw()) {
            throw new VerbsException("ibv_alloc_mw", Errno.ENOMEM, "max_mw " + attributes.maxMw() + " of " + name);
        }
        mws++;
    }

    synchronized void releaseMw() {
        mws--;
    }

    @Override
    public String toString() {
        return name + '(' + attributes.transport() + ", emulated)";
    }
}
