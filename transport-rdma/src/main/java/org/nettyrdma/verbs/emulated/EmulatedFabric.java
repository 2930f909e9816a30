package org.nettyrdma.verbs.emulated;

import org.nettyrdma.verbs.Device;
import org.nettyrdma.verbs.DeviceAttributes;
import org.nettyrdma.verbs.DeviceAttributes.Transport;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.MemoryRegion;
import org.nettyrdma.verbs.VerbsException;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * An in-process RDMA fabric: devices with IP addresses, the RDMA CM port space and the memory keys. What happens later
 * on a real fabric (RNR retries, CM time-outs, delayed completions) runs on one timer thread that all fabrics of the
 * JVM share. Everything created by the {@link EmulatedProvider}s of one fabric can talk to everything else on it.
 *
 * <p>Locking, outermost first: the fabric (CM state), a connection's link (both QPs' queues), a completion queue, a
 * completion channel. Data-path calls never take the fabric lock.
 */
public final class EmulatedFabric {
    private static final long IOVA_BASE = 0x7e00_0000_0000L;
    private static final long PAGE = 4096;
    private static final int FIRST_EPHEMERAL_PORT = 32768;
    private static final int LAST_EPHEMERAL_PORT = 60999;

    private static volatile EmulatedFabric defaultFabric;

    private final List<EmulatedDevice> devices = new ArrayList<>();
    private final Set<InetAddress> blackholes = new HashSet<>();
    /** Per remote address: the status its next connects fail with, and how many more. */
    private final Map<InetSocketAddress, int[]> failingConnects = new HashMap<>();
    private final Map<InetAddress, Integer> listenPortsInUse = new HashMap<>();
    private final List<EmulatedCmId> boundIds = new ArrayList<>();
    private final AtomicInteger qpNums = new AtomicInteger(0x11);
    private volatile EmulatedMemoryRegion[] keys = new EmulatedMemoryRegion[16];
    /** Memory windows: key = (WINDOW_INDEX_BASE + index) << 8 | tag, apart from the regions' keys as on rxe. */
    private volatile EmulatedMemoryWindow[] windows = new EmulatedMemoryWindow[16];
    private static final int WINDOW_INDEX_BASE = 1 << 23;
    private int keyTag;
    private long nextIova = IOVA_BASE;
    private int nextEphemeralPort = FIRST_EPHEMERAL_PORT;
    private volatile long rnrTimerNanos = TimeUnit.MICROSECONDS.toNanos(640);
    private volatile int cmResponseTimeoutMillis = 10_000;

    /** The process-wide fabric: device {@code emu0} (RoCE) on the loopback addresses, 127.0.0.1 and ::1. */
    public static EmulatedFabric defaultFabric() {
        EmulatedFabric fabric = defaultFabric;
        if (fabric == null) {
            synchronized (EmulatedFabric.class) {
                fabric = defaultFabric;
                if (fabric == null) {
                    fabric = new EmulatedFabric();
                    fabric.addDevice("emu0", defaultAttributes(Transport.ROCE),
                            InetAddress.getLoopbackAddress(), loopback6());
                    defaultFabric = fabric;
                }
            }
        }
        return fabric;
    }

    private static InetAddress loopback6() {
        try {
            return InetAddress.getByAddress("localhost", new byte[] {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1});
        } catch (java.net.UnknownHostException e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * Limits like a current RoCE NIC's, with type-2 memory windows and SEND_WITH_INV as rxe has them; for iWARP, what
     * siw has: no immediate data, no memory windows ({@code max_mw} 0), SEND_WITH_INV (memory management extensions).
     * Both have shared receive queues (as rxe and siw do): 65536 of them, each up to {@code max_qp_wr} receives.
     */
    public static DeviceAttributes defaultAttributes(Transport transport) {
        boolean iwarp = transport == Transport.IWARP;
        return new DeviceAttributes(transport, 65536, 16384, 32, 256, 65536, 65536, 1L << 40, 16, iwarp ? 0 : 524287,
                iwarp ? DeviceAttributes.CAP_MEM_MGT_EXTENSIONS
                        : DeviceAttributes.CAP_MEM_WINDOW | DeviceAttributes.CAP_MEM_WINDOW_TYPE_2B
                        | DeviceAttributes.CAP_MEM_MGT_EXTENSIONS,
                65536, 16384, 32);
    }

    /**
     * Adds a device that owns {@code addresses}. A device that owns a loopback address owns the whole loopback range
     * of that family.
     */
    public synchronized Device addDevice(String name, DeviceAttributes attributes, InetAddress... addresses) {
        for (EmulatedDevice d : devices) {
            if (d.name().equals(name)) {
                throw new IllegalArgumentException("device " + name + " exists");
            }
        }
        EmulatedDevice device = new EmulatedDevice(this, name, attributes, Arrays.asList(addresses.clone()));
        devices.add(device);
        return device;
    }

    /** An address that resolves, but where nothing ever answers a connect: UNREACHABLE after the CM time-out. */
    public synchronized void addBlackhole(InetAddress address) {
        blackholes.add(address);
    }

    /**
     * The next {@code count} connects to {@code remote} fail with CONNECT_ERROR, status -EADDRINUSE, as on iWARP when
     * the TCP port RDMA CM picked for the connecting side is held by another socket (soft-iWARP, seen in CI).
     */
    public void failConnectsWithPortInUse(InetSocketAddress remote, int count) {
        failConnects(remote, -Errno.EADDRINUSE, count);
    }

    /**
     * The next {@code count} connects to {@code remote} fail with CONNECT_ERROR and {@code status} (a negative errno),
     * before the listener hears of them.
     */
    public synchronized void failConnects(InetSocketAddress remote, int status, int count) {
        failingConnects.put(remote, new int[] {status, count});
    }

    /** The status this connect to {@code remote} fails with (one of those {@link #failConnects}), or 0. */
    synchronized int takeConnectFailure(InetSocketAddress remote) {
        int[] f = failingConnects.get(remote);
        if (f == null) {
            return 0;
        }
        if (--f[1] <= 0) {
            failingConnects.remove(remote);
        }
        return f[0];
    }

    /**
     * The next {@code count} listens on {@code address} fail with -EADDRINUSE, as on iWARP when the port RDMA CM picked
     * for a bind to port 0 is held by a TCP socket (soft-iWARP, seen in CI). 0: none (again).
     */
    public synchronized void failListensWithPortInUse(InetAddress address, int count) {
        if (count > 0) {
            listenPortsInUse.put(address, count);
        } else {
            listenPortsInUse.remove(address);
        }
    }

    /** Whether this listen on {@code address} fails for a port in use (one of those {@link #failListensWithPortInUse}). */
    synchronized boolean takeListenPortInUse(InetAddress address) {
        return countDown(listenPortsInUse, address);
    }

    private static <K> boolean countDown(Map<K, Integer> counts, K key) {
        Integer left = counts.get(key);
        if (left == null) {
            return false;
        }
        if (left <= 1) {
            counts.remove(key);
        } else {
            counts.put(key, left - 1);
        }
        return true;
    }

    /**
     * Whether every connection accepted from now on holds the first work request that reaches the accepting side until
     * the connecting side posts another: soft-iWARP installs its receive path on an accepted connection only after it
     * has sent the MPA reply, and a frame that arrives in between stays unread in the socket until more data comes.
     */
    public void holdFirstArrivalOnAccept(boolean hold) {
        holdFirstArrival = hold;
    }

    boolean holdsFirstArrival() {
        return holdFirstArrival;
    }

    private volatile boolean holdFirstArrival;

    /** The wait between RNR retries (the QP's min_rnr_timer); 640 µs by default. */
    public void rnrTimerNanos(long nanos) {
        rnrTimerNanos = nanos;
    }

    long rnrTimerNanos() {
        return rnrTimerNanos;
    }

    /** How long an unanswered connect waits before UNREACHABLE (-ETIMEDOUT); 10 s by default. */
    public void cmResponseTimeoutMillis(int millis) {
        cmResponseTimeoutMillis = millis;
    }

    int cmResponseTimeoutMillis() {
        return cmResponseTimeoutMillis;
    }

    synchronized List<Device> devices() {
        return new ArrayList<>(devices);
    }

    int nextQpNum() {
        return qpNums.getAndIncrement() & 0xffffff;
    }

    synchronized EmulatedDevice deviceFor(InetAddress ip) {
        for (EmulatedDevice d : devices) {
            if (d.owns(ip)) {
                return d;
            }
        }
        return null;
    }

    synchronized boolean isBlackhole(InetAddress ip) {
        return blackholes.contains(ip);
    }

    /** The first device at all, for destinations that resolve but aren't on this fabric (blackholes). */
    synchronized EmulatedDevice anyDevice(InetAddress family) {
        for (EmulatedDevice d : devices) {
            if (d.addressOfFamily(family) != null) {
                return d;
            }
        }
        return null;
    }

    // ---- port space (called with the fabric lock held by EmulatedCmId) ----

    InetSocketAddress bindLocked(EmulatedCmId id, InetSocketAddress address) throws VerbsException {
        int port = address.getPort();
        InetAddress ip = address.getAddress();
        if (port == 0) {
            for (int tries = 0; tries <= LAST_EPHEMERAL_PORT - FIRST_EPHEMERAL_PORT; tries++) {
                int candidate = nextEphemeralPort;
                nextEphemeralPort = candidate == LAST_EPHEMERAL_PORT ? FIRST_EPHEMERAL_PORT : candidate + 1;
                if (!portTaken(ip, candidate)) {
                    port = candidate;
                    break;
                }
            }
            if (port == 0) {
                throw new VerbsException("rdma_bind_addr", Errno.EADDRINUSE, "no free port");
            }
        } else if (portTaken(ip, port)) {
            throw new VerbsException("rdma_bind_addr", Errno.EADDRINUSE, address.toString());
        }
        boundIds.add(id);
        return new InetSocketAddress(ip, port);
    }

    private boolean portTaken(InetAddress ip, int port) {
        for (EmulatedCmId other : boundIds) {
            InetSocketAddress a = other.boundAddress();
            if (a != null && a.getPort() == port
                    && (a.getAddress().isAnyLocalAddress() || ip.isAnyLocalAddress() || a.getAddress().equals(ip))) {
                return true;
            }
        }
        return false;
    }

    void unbindLocked(EmulatedCmId id) {
        boundIds.remove(id);
    }

    EmulatedCmId listenerLocked(InetSocketAddress destination) {
        for (EmulatedCmId id : boundIds) {
            InetSocketAddress a = id.boundAddress();
            if (id.isListening() && a.getPort() == destination.getPort()
                    && (a.getAddress().equals(destination.getAddress()) || (a.getAddress().isAnyLocalAddress()
                    && (a.getAddress() instanceof Inet4Address) == (destination.getAddress() instanceof Inet4Address)))) {
                return id;
            }
        }
        return null;
    }

    // ---- memory keys: key = index << 8 | tag, as hardware keys are; 0 is never a key ----

    synchronized EmulatedMemoryRegion register(EmulatedProtectionDomain pd, java.nio.ByteBuffer buffer, int access) {
        EmulatedMemoryRegion[] table = keys;
        int index = 1;
        while (index < table.length && table[index] != null) {
            index++;
        }
        EmulatedMemoryRegion[] copy = Arrays.copyOf(table, index < table.length ? table.length : table.length * 2);
        keyTag = (keyTag + 1) & 0xff;
        int key = index << 8 | keyTag;
        long length = buffer.capacity();
        EmulatedMemoryRegion mr = new EmulatedMemoryRegion(pd, buffer, nextIova, length, access, key);
        nextIova += (length + PAGE - 1) / PAGE * PAGE + PAGE;
        copy[index] = mr;
        keys = copy;
        return mr;
    }

    synchronized void deregister(EmulatedMemoryRegion mr) {
        EmulatedMemoryRegion[] copy = keys.clone();
        int index = mr.lkey() >>> 8;
        if (copy[index] == mr) {
            copy[index] = null;
        }
        keys = copy;
    }

    /** The region a key names, or null. Lock-free; allocates nothing. */
    EmulatedMemoryRegion lookup(int key) {
        EmulatedMemoryRegion[] table = keys;
        int index = key >>> 8;
        if (index == 0 || index >= table.length) {
            return null;
        }
        EmulatedMemoryRegion mr = table[index];
        return mr != null && mr.lkey() == key ? mr : null;
    }

    // ---- memory windows ----

    synchronized EmulatedMemoryWindow allocWindow(EmulatedProtectionDomain pd) {
        EmulatedMemoryWindow[] table = windows;
        int index = 1;
        while (index < table.length && table[index] != null) {
            index++;
        }
        EmulatedMemoryWindow[] copy = Arrays.copyOf(table, index < table.length ? table.length : table.length * 2);
        keyTag = (keyTag + 1) & 0xff;
        EmulatedMemoryWindow mw = new EmulatedMemoryWindow(pd, (WINDOW_INDEX_BASE + index) << 8 | keyTag);
        copy[index] = mw;
        windows = copy;
        return mw;
    }

    synchronized void removeWindow(EmulatedMemoryWindow mw) {
        EmulatedMemoryWindow[] copy = windows.clone();
        int index = (mw.rkey >>> 8) - WINDOW_INDEX_BASE;
        if (index > 0 && index < copy.length && copy[index] == mw) {
            copy[index] = null;
        }
        windows = copy;
    }

    /** The window whose key has the index of {@code rkey} (whatever its low 8 bits), or null. Lock-free. */
    EmulatedMemoryWindow windowAt(int rkey) {
        EmulatedMemoryWindow[] table = windows;
        int index = (rkey >>> 8) - WINDOW_INDEX_BASE;
        return index > 0 && index < table.length ? table[index] : null;
    }

    /** The window whose current rkey is {@code rkey}, or null. */
    EmulatedMemoryWindow window(int rkey) {
        EmulatedMemoryWindow mw = windowAt(rkey);
        return mw != null && mw.rkey == rkey ? mw : null;
    }

    // ---- for tests ----

    /**
     * For tests (leak checks, and a hostile peer that could guess every key and address): the memory regions
     * registered on this fabric and not yet deregistered, of every protection domain, in key order.
     */
    public List<MemoryRegion> liveMemoryRegions() {
        List<MemoryRegion> live = new ArrayList<>();
        for (EmulatedMemoryRegion mr : keys) {
            if (mr != null) {
                live.add(mr);
            }
        }
        return live;
    }

    /** For tests (leak checks): the queue pairs created on this fabric's devices and not yet destroyed. */
    public synchronized int liveQueuePairs() {
        int n = 0;
        for (EmulatedDevice d : devices) {
            n += d.queuePairs();
        }
        return n;
    }

    // ---- later ----

    /**
     * Runs {@code task} on the timer thread after {@code delayNanos}. One daemon thread serves every fabric of the JVM
     * (tests create many fabrics, and none is ever closed), created at the first use; a cancelled task leaves its
     * queue at once.
     */
    ScheduledFuture<?> schedule(Runnable task, long delayNanos) {
        return Timer.EXECUTOR.schedule(task, delayNanos, TimeUnit.NANOSECONDS);
    }

    /** The shared timer, created when a fabric first schedules something (class initialisation is lazy). */
    private static final class Timer {
        static final ScheduledExecutorService EXECUTOR = create();

        private static ScheduledExecutorService create() {
            ScheduledThreadPoolExecutor executor = new ScheduledThreadPoolExecutor(1, r -> {
                Thread thread = new Thread(r, "emulated-rdma-timer");
                thread.setDaemon(true);
                return thread;
            });
            executor.setRemoveOnCancelPolicy(true);
            return executor;
        }
    }
}
