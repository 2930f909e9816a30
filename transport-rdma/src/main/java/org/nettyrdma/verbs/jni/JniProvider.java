package org.nettyrdma.verbs.jni;

import io.netty.util.collection.IntObjectHashMap;
import io.netty.util.collection.LongObjectHashMap;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;
import org.nettyrdma.verbs.CmEventChannel;
import org.nettyrdma.verbs.CmId;
import org.nettyrdma.verbs.Device;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.EventWaiter;
import org.nettyrdma.verbs.VerbsException;
import org.nettyrdma.verbs.VerbsProvider;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * The verbs provider over rdma-core (libibverbs and librdmacm) through the project's C library {@code netty_rdma}:
 * InfiniBand, RoCE, iWARP, SoftRoCE (rxe) and soft-iWARP (siw). Semantics as in docs/verbs-spi.md.
 *
 * <p>Check {@link #isAvailable()} first; {@link #unavailabilityCause()} says what is missing (the library, kernel
 * RDMA support, a device, access to {@code /dev/infiniband}, or a memlock limit high enough), and what to do.
 */
public final class JniProvider implements VerbsProvider {
    public static final String NAME = "jni";

    private static final InternalLogger logger = InternalLoggerFactory.getInstance(JniProvider.class);
    private static final Throwable UNAVAILABILITY_CAUSE;

    static {
        Throwable cause;
        try {
            JniAvailability.Verdict verdict = JniAvailability.check();
            cause = verdict == null ? null : verdict.toThrowable();
        } catch (Throwable t) {
            cause = t;
        }
        UNAVAILABILITY_CAUSE = cause;
        if (cause != null) {
            logger.debug("the JNI verbs provider is unavailable", cause);
        }
    }

    private volatile boolean closed;
    private long deviceList;
    private List<Device> devices;
    private final LongObjectHashMap<JniDevice> devicesByContext = new LongObjectHashMap<>();
    private final LongObjectHashMap<JniCmId> ids = new LongObjectHashMap<>();
    /** Live memory regions by lkey, copied on write: the post path looks inline SGEs up here without a lock. */
    private volatile IntObjectHashMap<JniMemoryRegion> regions = new IntObjectHashMap<>();

    private JniProvider() {
    }

    /** Whether the native library is loaded and this machine has usable RDMA (see {@link #unavailabilityCause()}). */
    public static boolean isAvailable() {
        return UNAVAILABILITY_CAUSE == null;
    }

    /** Why the provider cannot be used here, with what to do about it; {@code null} if it can. */
    public static Throwable unavailabilityCause() {
        return UNAVAILABILITY_CAUSE;
    }

    /** Throws {@link UnsatisfiedLinkError} with the {@link #unavailabilityCause()} if the provider is unavailable. */
    public static void ensureAvailability() {
        if (UNAVAILABILITY_CAUSE != null) {
            throw (Error) new UnsatisfiedLinkError("the JNI verbs provider is unavailable: "
                    + UNAVAILABILITY_CAUSE.getMessage()).initCause(UNAVAILABILITY_CAUSE);
        }
    }

    /**
     * A provider over the native library. It only needs the library: on a machine without RDMA, calls that need a
     * device fail with a {@link VerbsException}.
     *
     * @throws UnsatisfiedLinkError if the native library could not be loaded
     */
    public static JniProvider create() {
        Throwable failure = Native.loadFailure();
        if (failure != null) {
            throw (Error) new UnsatisfiedLinkError("the native library " + Native.LIBRARY_NAME
                    + " could not be loaded").initCause(failure);
        }
        return new JniProvider();
    }

    @Override
    public String name() {
        return NAME;
    }

    void checkOpen(String verb) throws VerbsException {
        if (closed) {
            throw new VerbsException(verb, Errno.EBADF, "the provider is closed");
        }
    }

    @Override
    public synchronized List<Device> devices() throws VerbsException {
        checkOpen("rdma_get_devices");
        if (devices == null) {
            long[] handles;
            try {
                handles = Native.getDevices();
            } catch (VerbsException e) {
                throw withCause(e);
            }
            List<Device> list = new ArrayList<>(handles.length - 1);
            try {
                for (int i = 1; i < handles.length; i++) {
                    list.add(deviceFor(handles[i]));
                }
            } catch (VerbsException | RuntimeException e) {
                Native.freeDevices(handles[0]);
                throw e;
            }
            deviceList = handles[0];
            devices = Collections.unmodifiableList(list);
        }
        return devices;
    }

    /** The device of a context (as a CM id reports it), created on first sight. */
    synchronized JniDevice deviceFor(long context) throws VerbsException {
        JniDevice device = devicesByContext.get(context);
        if (device == null) {
            device = new JniDevice(this, context);
            devicesByContext.put(context, device);
            JniAsyncEvents.watch(context);
        }
        return device;
    }

    @Override
    public CmEventChannel createEventChannel() throws VerbsException {
        checkOpen("rdma_create_event_channel");
        long handle = Native.createEventChannel();
        if (handle < 0) {
            throw withCause(new VerbsException("rdma_create_event_channel", (int) -handle));
        }
        return new JniCmEventChannel(this, handle);
    }

    @Override
    public CmId createId(CmEventChannel channel, Object context) throws VerbsException {
        if (!(channel instanceof JniCmEventChannel)) {
            throw new VerbsException("rdma_create_id", Errno.EINVAL, "event channel of another provider");
        }
        checkOpen("rdma_create_id");
        JniCmEventChannel c = (JniCmEventChannel) channel;
        c.attach("rdma_create_id");
        long handle = Native.createId(c.handle());
        if (handle < 0) {
            c.detach();
            throw new VerbsException("rdma_create_id", (int) -handle);
        }
        return register(new JniCmId(this, c, handle, context));
    }

    @Override
    public EventWaiter createWaiter() throws VerbsException {
        checkOpen("epoll_create");
        return new JniEventWaiter();
    }

    // ---- CM ids by handle, for events

    JniCmId register(JniCmId id) {
        synchronized (ids) {
            ids.put(id.handle(), id);
        }
        return id;
    }

    JniCmId idFor(long handle) {
        synchronized (ids) {
            return ids.get(handle);
        }
    }

    void forget(JniCmId id) {
        synchronized (ids) {
            ids.remove(id.handle());
        }
    }

    // ---- live memory regions by lkey

    synchronized void addRegion(JniMemoryRegion mr) {
        IntObjectHashMap<JniMemoryRegion> copy = new IntObjectHashMap<>(regions.size() + 1);
        copy.putAll(regions);
        copy.put(mr.lkey(), mr);
        regions = copy;
    }

    synchronized void removeRegion(JniMemoryRegion mr) {
        IntObjectHashMap<JniMemoryRegion> copy = new IntObjectHashMap<>(Math.max(1, regions.size()));
        copy.putAll(regions);
        if (copy.get(mr.lkey()) == mr) {
            copy.remove(mr.lkey());
        }
        regions = copy;
    }

    /** The live region whose lkey is {@code lkey}, or null. */
    JniMemoryRegion region(int lkey) {
        return regions.get(lkey);
    }

    /** Whether {@code [address, address + length)} lies in a live region whose lkey is {@code lkey}. */
    boolean isRegistered(int lkey, long address, int length) {
        if (length == 0) {
            return true;
        }
        JniMemoryRegion mr = regions.get(lkey);
        return mr != null && mr.contains(address, length & 0xffffffffL);
    }

    /** A device-less failure says why the machine has no usable RDMA. */
    private static VerbsException withCause(VerbsException e) {
        Throwable cause = UNAVAILABILITY_CAUSE;
        if (cause == null) {
            return e;
        }
        VerbsException detailed = new VerbsException(e.verb(), e.errno(), cause.getMessage());
        detailed.initCause(cause);
        return detailed;
    }

    /** Releases the device list; objects created through the provider must have been closed. Idempotent. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        for (JniDevice device : devicesByContext.values()) {
            device.close();
        }
        if (deviceList != 0) {
            Native.freeDevices(deviceList);
            deviceList = 0;
        }
    }

    @Override
    public String toString() {
        return "JniProvider" + (closed ? "(closed)" : "");
    }
}
