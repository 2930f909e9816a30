package org.nettyrdma.channel;

import io.netty.util.internal.CleanableDirectBuffer;
import io.netty.util.internal.ObjectUtil;
import io.netty.util.internal.PlatformDependent;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;
import org.nettyrdma.verbs.Access;
import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.VerbsException;

import java.nio.ByteBuffer;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One block of direct memory that is registered ({@code ibv_reg_mr}) lazily, once for each protection domain that asks
 * for it, so that work requests can name its bytes. The SGE address of region byte {@code i} for a protection domain
 * is {@code memoryRegion(pd).address() + i}.
 *
 * <p>{@link #memoryRegion(ProtectionDomain)} is safe from any thread and takes no lock once the protection domain is
 * registered. {@link #close()} deregisters everything and frees the memory: its owner calls it only when no buffer
 * and no posted work request references the region any more.
 */
final class RegisteredRegion {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(RegisteredRegion.class);

    /**
     * Local access only: the device may read a region for a SEND and write it for a receive, and no peer can read or
     * write it with RDMA READ or WRITE (protocol v1 exposes no memory; docs/protocol.md, "What a peer can touch").
     */
    static final int ACCESS = Access.LOCAL_WRITE;
    /**
     * {@link #ACCESS} plus {@code MW_BIND}, for a region that a memory window may expose to one connection's peer (the
     * READ rendezvous, docs/rendezvous-design.md): it grants no remote access by itself (the rkey stays 0); only a
     * window bound over the region does, and only to the QP it is bound to.
     */
    static final int BINDABLE_ACCESS = Access.LOCAL_WRITE | Access.MW_BIND;

    private static final MemoryRegion[] NO_MRS = new MemoryRegion[0];
    /** Bytes registered in each protection domain (one per device), by every region of the process. */
    private static final ConcurrentMap<ProtectionDomain, AtomicLong> BY_PD = new ConcurrentHashMap<>();

    private final CleanableDirectBuffer cleanable;
    private final ByteBuffer memory;
    private final int capacity;
    private final AtomicLong registeredBytes;
    /** Registered with {@link #BINDABLE_ACCESS} in protection domains whose device has memory windows. */
    private final boolean bindable;
    /** One per protection domain, copy-on-write: readers scan it without the lock. */
    private volatile MemoryRegion[] mrs = NO_MRS;
    private boolean closed; // guarded by this

    /** A region of {@code capacity} bytes of new, zeroed direct memory that {@link #close()} frees. */
    RegisteredRegion(int capacity) {
        this(capacity, null);
    }

    /**
     * A region of {@code capacity} bytes of new, zeroed direct memory that {@link #close()} frees.
     *
     * @param registeredBytes counts the bytes registered (once per protection domain), or {@code null}
     */
    RegisteredRegion(int capacity, AtomicLong registeredBytes) {
        this(capacity, registeredBytes, false);
    }

    /**
     * A region of {@code capacity} bytes of new, zeroed direct memory that {@link #close()} frees.
     *
     * @param registeredBytes counts the bytes registered (once per protection domain), or {@code null}
     * @param bindable        whether a memory window may be bound over it: registered with {@link #BINDABLE_ACCESS} in a
     *                        protection domain whose device has windows, else with {@link #ACCESS}
     */
    RegisteredRegion(int capacity, AtomicLong registeredBytes, boolean bindable) {
        ObjectUtil.checkPositive(capacity, "capacity");
        cleanable = PlatformDependent.allocateDirect(capacity, true);
        // the views are big-endian: a new direct buffer is, and so is a duplicate of any buffer
        memory = cleanable.buffer().duplicate();
        this.capacity = capacity;
        this.registeredBytes = registeredBytes;
        this.bindable = bindable;
    }

    /**
     * A region over memory its caller owns (a mapped file, say), from 0 to the buffer's capacity; {@link #close()}
     * deregisters it and leaves the memory alone.
     */
    RegisteredRegion(ByteBuffer memory, AtomicLong registeredBytes) {
        if (!memory.isDirect()) {
            throw new IllegalArgumentException("memory must be a direct buffer: " + memory);
        }
        ObjectUtil.checkPositive(memory.capacity(), "memory.capacity()");
        cleanable = null;
        this.memory = memory.duplicate().clear();
        capacity = memory.capacity();
        this.registeredBytes = registeredBytes;
        bindable = false;
    }

    /**
     * The region's memory, big-endian, position 0 and limit {@link #capacity()}. It is shared: use its absolute
     * operations only, and never change its position, limit or byte order (take a {@code duplicate()} for that).
     */
    ByteBuffer memory() {
        return memory;
    }

    int capacity() {
        return capacity;
    }

    /**
     * The memory region of this region in {@code pd}, registered on the first call for {@code pd} with
     * {@link #access(ProtectionDomain)}. A failed registration is not remembered: the next call tries again.
     *
     * @throws VerbsException        if {@code ibv_reg_mr} fails (memlock limit, {@code max_mr}, ...)
     * @throws IllegalStateException if the region is closed
     */
    MemoryRegion memoryRegion(ProtectionDomain pd) throws VerbsException {
        MemoryRegion[] mrs = this.mrs;
        for (MemoryRegion mr : mrs) {
            if (mr.pd() == pd) {
                return mr;
            }
        }
        return register(ObjectUtil.checkNotNull(pd, "pd"));
    }

    private synchronized MemoryRegion register(ProtectionDomain pd) throws VerbsException {
        if (closed) {
            throw new IllegalStateException("registered region closed: " + this);
        }
        MemoryRegion[] mrs = this.mrs;
        for (MemoryRegion mr : mrs) {
            if (mr.pd() == pd) {
                return mr;
            }
        }
        MemoryRegion mr = pd.registerMemory(memory, access(pd));
        MemoryRegion[] newMrs = new MemoryRegion[mrs.length + 1];
        System.arraycopy(mrs, 0, newMrs, 0, mrs.length);
        newMrs[mrs.length] = mr;
        this.mrs = newMrs;
        if (registeredBytes != null) {
            registeredBytes.addAndGet(capacity);
        }
        BY_PD.computeIfAbsent(pd, p -> new AtomicLong()).addAndGet(capacity);
        return mr;
    }

    /** The access this region is registered with in {@code pd}: never any remote access of its own. */
    int access(ProtectionDomain pd) {
        return bindable && pd.device().attributes().supportsMemoryWindows() ? BINDABLE_ACCESS : ACCESS;
    }

    /** Whether a memory window may be bound over this region where the device has windows. */
    boolean isBindable() {
        return bindable;
    }

    /** How many protection domains this region is registered in. */
    int registrations() {
        return mrs.length;
    }

    /**
     * Deregisters this region from {@code pd} only (before {@code pd} itself is closed); the next
     * {@link #memoryRegion(ProtectionDomain)} for it registers it again. Returns whether it was registered there.
     */
    boolean deregister(ProtectionDomain pd) throws VerbsException {
        MemoryRegion victim = null;
        synchronized (this) {
            MemoryRegion[] mrs = this.mrs;
            for (int i = 0; i < mrs.length; i++) {
                if (mrs[i].pd() == pd) {
                    victim = mrs[i];
                    MemoryRegion[] newMrs = new MemoryRegion[mrs.length - 1];
                    System.arraycopy(mrs, 0, newMrs, 0, i);
                    System.arraycopy(mrs, i + 1, newMrs, i, newMrs.length - i);
                    this.mrs = newMrs;
                    break;
                }
            }
        }
        if (victim == null) {
            return false;
        }
        if (registeredBytes != null) {
            registeredBytes.addAndGet(-capacity);
        }
        BY_PD.get(pd).addAndGet(-capacity);
        victim.close();
        return true;
    }

    synchronized boolean isClosed() {
        return closed;
    }

    /**
     * Deregisters every memory region and frees the memory (if the region allocated it); idempotent. Called only when
     * nothing references the region: a buffer or work request that still did would then touch freed memory.
     */
    void close() {
        MemoryRegion[] mrs;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            mrs = this.mrs;
            this.mrs = NO_MRS;
        }
        for (MemoryRegion mr : mrs) {
            if (registeredBytes != null) {
                registeredBytes.addAndGet(-capacity);
            }
            BY_PD.get(mr.pd()).addAndGet(-capacity);
            try {
                mr.close();
            } catch (VerbsException e) {
                logger.warn("Failed to deregister {} bytes of registered memory", capacity, e);
            }
        }
        if (cleanable != null) {
            cleanable.clean();
        }
    }

    /** Bytes registered now, by the name of the device whose protection domain holds them. */
    static Map<String, Long> registeredBytesByDevice() {
        Map<String, Long> bytes = new TreeMap<>();
        BY_PD.forEach((pd, n) -> bytes.merge(pd.device().name(), n.get(), Long::sum));
        return bytes;
    }

    @Override
    public String toString() {
        return "RegisteredRegion(" + capacity + " bytes, " + mrs.length + " registrations)";
    }
}
