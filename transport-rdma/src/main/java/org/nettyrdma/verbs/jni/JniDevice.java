package org.nettyrdma.verbs.jni;

import io.netty.util.collection.IntObjectHashMap;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;
import org.nettyrdma.verbs.CompletionChannel;
import org.nettyrdma.verbs.CompletionQueue;
import org.nettyrdma.verbs.Device;
import org.nettyrdma.verbs.DeviceAttributes;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.VerbsException;

/** An RDMA device: one of librdmacm's device contexts ({@code ibv_context}), shared by the whole process. */
final class JniDevice implements Device {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(JniDevice.class);
    /** soft-iWARP's {@code vendor_id}: "bmt". */
    static final long SIW_VENDOR_ID = 0x626d74;
    /** SoftRoCE's {@code vendor_id} (rxe0 reports it). */
    static final long RXE_VENDOR_ID = 0xffffff;
    /**
     * libsiw (rdma-core) refuses a CQ, QP or SRQ whose queue's mmap key is {@code SIW_INVAL_UOBJ_KEY}, 0x90000, which
     * the kernel hands out as an ordinary key: the offset of page 144 of the context's mmap space, where keys are the
     * lowest free pages. A process whose queues fill the first 144 pages (one 16384-entry CQ takes 129) could create
     * no queue after that. So a siw context gets at first sight a CQ spanning pages 0..144, created before anything
     * else and never used: 145 pages of 32-byte entries (siw rounds the count up to 32768, 1 MiB of kernel memory).
     */
    static final int SIW_GUARD_CQ_ENTRIES = 145 * 4096 / 32;

    private final JniProvider provider;
    private final long context;
    private final String name;
    private final DeviceAttributes attributes;
    private final boolean softIwarp;
    /** rxe: its library passes the kernel's completion flags through, so an invalidation shows in another bit. */
    private final boolean softRoce;
    private long siwGuardCq;
    /** Live memory windows by rkey index, copied on write: a post looks a bind's window up here without a lock. */
    private volatile IntObjectHashMap<JniMemoryWindow> windows = new IntObjectHashMap<>();

    JniDevice(JniProvider provider, long context) throws VerbsException {
        this.provider = provider;
        this.context = context;
        this.name = Native.deviceName(context);
        long[] a = new long[JniLayout.ATTR_COUNT];
        Native.queryDevice(context, a);
        this.attributes = new DeviceAttributes(DeviceAttributes.Transport.values()[(int) a[JniLayout.ATTR_TRANSPORT]],
                (int) a[JniLayout.ATTR_MAX_QP], (int) a[JniLayout.ATTR_MAX_QP_WR], (int) a[JniLayout.ATTR_MAX_SGE],
                (int) a[JniLayout.ATTR_MAX_INLINE_DATA], (int) a[JniLayout.ATTR_MAX_CQE], (int) a[JniLayout.ATTR_MAX_MR],
                a[JniLayout.ATTR_MAX_MR_SIZE], (int) a[JniLayout.ATTR_MAX_QP_RD_ATOM], (int) a[JniLayout.ATTR_MAX_MW],
                a[JniLayout.ATTR_DEVICE_CAP_FLAGS], (int) a[JniLayout.ATTR_MAX_SRQ], (int) a[JniLayout.ATTR_MAX_SRQ_WR],
                (int) a[JniLayout.ATTR_MAX_SRQ_SGE]);
        softIwarp = a[JniLayout.ATTR_VENDOR_ID] == SIW_VENDOR_ID;
        softRoce = a[JniLayout.ATTR_VENDOR_ID] == RXE_VENDOR_ID
                && attributes.transport() == DeviceAttributes.Transport.ROCE;
        if (softIwarp) {
            long guard = Native.createCq(context, SIW_GUARD_CQ_ENTRIES, 0);
            if (guard > 0) {
                siwGuardCq = guard;
            } else {
                logger.warn("{}: no guard CQ over soft-iWARP's invalid mmap key ({}): once this process's queues "
                        + "take 144 pages of mmap space, creating more fails", name, Errno.describe((int) guard));
            }
        }
    }

    /** Releases what the device holds of its own (the siw guard CQ), before the provider frees the contexts. */
    void close() {
        if (siwGuardCq != 0) {
            int rc = Native.destroyCq(siwGuardCq);
            if (rc < 0) {
                logger.warn("{}: destroying the guard CQ: {}", name, Errno.describe(rc));
            }
            siwGuardCq = 0;
        }
    }

    /** Whether this is soft-iWARP (siw), whose quirks the provider works around. */
    boolean isSoftIwarp() {
        return softIwarp;
    }

    JniProvider provider() {
        return provider;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public DeviceAttributes attributes() {
        return attributes;
    }

    @Override
    public ProtectionDomain allocPd() throws VerbsException {
        provider.checkOpen("ibv_alloc_pd");
        long handle = Native.allocPd(context);
        if (handle < 0) {
            throw new VerbsException("ibv_alloc_pd", (int) -handle, name);
        }
        return new JniProtectionDomain(this, handle);
    }

    synchronized void addWindow(JniMemoryWindow mw) {
        IntObjectHashMap<JniMemoryWindow> copy = new IntObjectHashMap<>(windows.size() + 1);
        copy.putAll(windows);
        copy.put(mw.index(), mw);
        windows = copy;
    }

    synchronized void removeWindow(JniMemoryWindow mw) {
        IntObjectHashMap<JniMemoryWindow> copy = new IntObjectHashMap<>(Math.max(1, windows.size()));
        copy.putAll(windows);
        if (copy.get(mw.index()) == mw) {
            copy.remove(mw.index());
        }
        windows = copy;
    }

    /** The live window whose rkey has the index of {@code rkey} (whatever its low 8 bits), or null. */
    JniMemoryWindow window(int rkey) {
        return windows.get(rkey >>> 8);
    }

    @Override
    public CompletionChannel createCompletionChannel() throws VerbsException {
        provider.checkOpen("ibv_create_comp_channel");
        long handle = Native.createCompChannel(context);
        if (handle < 0) {
            throw new VerbsException("ibv_create_comp_channel", (int) -handle, name);
        }
        return new JniCompletionChannel(this, handle);
    }

    @Override
    public CompletionQueue createCq(int cqe, CompletionChannel channel) throws VerbsException {
        provider.checkOpen("ibv_create_cq");
        if (cqe < 1 || cqe > attributes.maxCqe()) {
            throw new VerbsException("ibv_create_cq", Errno.EINVAL,
                    "cqe " + cqe + " outside 1.." + attributes.maxCqe() + " of " + name);
        }
        JniCompletionChannel c = null;
        if (channel != null) {
            if (!(channel instanceof JniCompletionChannel) || ((JniCompletionChannel) channel).device() != this) {
                throw new VerbsException("ibv_create_cq", Errno.EINVAL, "completion channel of another device");
            }
            c = (JniCompletionChannel) channel;
            c.checkOpen("ibv_create_cq");
        }
        long handle = Native.createCq(context, cqe, c == null ? 0 : c.handle());
        if (handle < 0) {
            throw new VerbsException("ibv_create_cq", (int) -handle, "cqe " + cqe + " on " + name);
        }
        if (softRoce) {
            Native.cqKernelWcFlags(handle);
        }
        JniCompletionQueue cq = new JniCompletionQueue(this, handle, c);
        if (c != null) {
            c.add(cq);
        }
        return cq;
    }

    @Override
    public String toString() {
        return name + '(' + attributes.transport() + ')';
    }
}
