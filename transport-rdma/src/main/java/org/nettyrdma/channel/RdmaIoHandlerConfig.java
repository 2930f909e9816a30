package org.nettyrdma.channel;

import io.netty.util.internal.ObjectUtil;
import io.netty.util.internal.SystemPropertyUtil;
import org.nettyrdma.verbs.DeviceAttributes;

/**
 * Settings of an {@link RdmaIoHandler}: which verbs provider it uses, how long it busy-polls before it blocks, and
 * the sizes of its completion queue and poll batch. Every tunable is listed in docs/configuration.md.
 */
public final class RdmaIoHandlerConfig {
    /** The provider over rdma-core (libibverbs + librdmacm): real RDMA devices. */
    public static final String PROVIDER_NATIVE = "native";
    /** The in-process emulated provider: no hardware, same semantics, one JVM only. */
    public static final String PROVIDER_EMULATED = "emulated";
    /** The native provider where {@link Rdma#isAvailable()}, the emulated one otherwise. */
    public static final String PROVIDER_AUTO = "auto";

    private String provider = SystemPropertyUtil.get("org.nettyrdma.provider", PROVIDER_NATIVE);
    private long busyPollNanos = SystemPropertyUtil.getLong("org.nettyrdma.busyPollNanos", 60_000);
    private boolean busyPollBackOff = SystemPropertyUtil.getBoolean("org.nettyrdma.busyPollBackOff", false);
    private boolean adaptiveBusyPoll = SystemPropertyUtil.getBoolean("org.nettyrdma.adaptiveBusyPoll", false);
    private long busyPollMaxNanos = SystemPropertyUtil.getLong("org.nettyrdma.busyPollMaxNanos", 200_000);
    private boolean solicitedWakeups = SystemPropertyUtil.getBoolean("org.nettyrdma.solicitedWakeups", true);
    private int completionQueueSize = SystemPropertyUtil.getInt("org.nettyrdma.completionQueueSize", 16384);
    private int completionBatchSize = SystemPropertyUtil.getInt("org.nettyrdma.completionBatchSize", 256);
    private long maxLentReceiveBytes = SystemPropertyUtil.getLong("org.nettyrdma.maxLentReceiveBytes", 64L << 20);
    private long sendStagingBytes = SystemPropertyUtil.getLong("org.nettyrdma.sendStagingBytes", 64L << 20);
    private long rendezvousReadAheadBytes = SystemPropertyUtil.getLong("org.nettyrdma.rendezvousReadAheadBytes",
            64L << 20);
    /** {@code null}: by device ({@link #usesSharedReceiveQueue}). */
    private Boolean sharedReceiveQueue = sharedReceiveQueueProperty();

    /** The verbs provider: {@link #PROVIDER_NATIVE} (default), {@link #PROVIDER_EMULATED} or {@link #PROVIDER_AUTO}. */
    public RdmaIoHandlerConfig setProvider(String provider) {
        ObjectUtil.checkNotNull(provider, "provider");
        if (!PROVIDER_NATIVE.equals(provider) && !PROVIDER_EMULATED.equals(provider)
                && !PROVIDER_AUTO.equals(provider)) {
            throw new IllegalArgumentException("provider: " + provider + " (expected native, emulated or auto)");
        }
        this.provider = provider;
        return this;
    }

    public String getProvider() {
        return provider;
    }

    /** How long the event loop polls its completion queues before it arms them and blocks (0: never spins). */
    public RdmaIoHandlerConfig setBusyPollNanos(long busyPollNanos) {
        this.busyPollNanos = ObjectUtil.checkPositiveOrZero(busyPollNanos, "busyPollNanos");
        return this;
    }

    public long getBusyPollNanos() {
        return busyPollNanos;
    }

    /**
     * Whether the fixed busy-poll gives up while it does not pay (true): after some spins in a row that found nothing the
     * loop blocks at once, but for an occasional probe that spins the whole time. It gives the CPU back to the threads
     * that produce the loop's work where every gap is longer than the spin (gRPC's unary calls on a few cores, whose
     * replies come from application threads). Off by default: where both ends are event loops that answer each other
     * (a ping-pong over a software NIC) the two loops' back-offs feed each other (a blocked loop answers late, so its
     * peer's spins miss and it blocks too) and the round trip got 2.7 times longer (docs/performance.md).
     */
    public RdmaIoHandlerConfig setBusyPollBackOff(boolean busyPollBackOff) {
        this.busyPollBackOff = busyPollBackOff;
        return this;
    }

    public boolean isBusyPollBackOff() {
        return busyPollBackOff;
    }

    /**
     * Whether the busy-poll follows the observed gaps between the loop going idle and its next completion (true), up to
     * {@link #setBusyPollMaxNanos}, instead of spinning {@link #setBusyPollNanos} every time (false): the loop spins
     * while the gaps it sees are short (a ping-pong pays no wake-up) and blocks at once while they are long (a stream
     * waiting on a software NIC leaves it the CPU).
     */
    public RdmaIoHandlerConfig setAdaptiveBusyPoll(boolean adaptiveBusyPoll) {
        this.adaptiveBusyPoll = adaptiveBusyPoll;
        return this;
    }

    public boolean isAdaptiveBusyPoll() {
        return adaptiveBusyPoll;
    }

    /**
     * Whether the loop, when nothing it runs waits for a completion of its own sends, arms its completion queues for
     * solicited completions only (true, the default): it then wakes for its peers' messages, not for the completions of
     * the SENDs it has just posted, which cost a wake-up per message. {@code false} arms for every completion, as
     * before (for comparisons; {@code -Dorg.nettyrdma.solicitedWakeups=false}).
     */
    public RdmaIoHandlerConfig setSolicitedWakeups(boolean solicitedWakeups) {
        this.solicitedWakeups = solicitedWakeups;
        return this;
    }

    public boolean isSolicitedWakeups() {
        return solicitedWakeups;
    }

    /** With {@link #setAdaptiveBusyPoll adaptive busy-polling}: the longest spin, and the longest gap worth spinning for. */
    public RdmaIoHandlerConfig setBusyPollMaxNanos(long busyPollMaxNanos) {
        this.busyPollMaxNanos = ObjectUtil.checkPositiveOrZero(busyPollMaxNanos, "busyPollMaxNanos");
        return this;
    }

    public long getBusyPollMaxNanos() {
        return busyPollMaxNanos;
    }

    /** Entries of each completion queue; bounded by the device's max_cqe. */
    public RdmaIoHandlerConfig setCompletionQueueSize(int completionQueueSize) {
        this.completionQueueSize = ObjectUtil.checkPositive(completionQueueSize, "completionQueueSize");
        return this;
    }

    public int getCompletionQueueSize() {
        return completionQueueSize;
    }

    /** How many completions one poll takes at most (the work bound of one run). */
    public RdmaIoHandlerConfig setCompletionBatchSize(int completionBatchSize) {
        this.completionBatchSize = ObjectUtil.checkPositive(completionBatchSize, "completionBatchSize");
        return this;
    }

    public int getCompletionBatchSize() {
        return completionBatchSize;
    }

    /**
     * Bytes of receive buffers the channels of one event loop lend to their pipelines at most (no copy); past it, they
     * copy received bytes into buffers of their allocators.
     */
    public RdmaIoHandlerConfig setMaxLentReceiveBytes(long maxLentReceiveBytes) {
        this.maxLentReceiveBytes = ObjectUtil.checkPositiveOrZero(maxLentReceiveBytes, "maxLentReceiveBytes");
        return this;
    }

    public long getMaxLentReceiveBytes() {
        return maxLentReceiveBytes;
    }

    /**
     * Bytes of send staging one event loop registers at most, for all its connections (SENDs in flight hold a slot of
     * their message size each; an idle connection holds none). Staging grows on demand in regions of up to 1 MiB; at
     * this cap a write waits for the loop's SENDs in flight to complete, as it waits for credits. It must hold at
     * least one region: a slot of {@code RECEIVE_BUFFER_SIZE} bytes if it is above 1 MiB, else 1 MiB (or 256 slots if
     * they are smaller), or the first write fails saying so.
     */
    public RdmaIoHandlerConfig setSendStagingBytes(long sendStagingBytes) {
        this.sendStagingBytes = ObjectUtil.checkPositive(sendStagingBytes, "sendStagingBytes");
        return this;
    }

    public long getSendStagingBytes() {
        return sendStagingBytes;
    }

    /**
     * Bytes of protocol v2's READ rendezvous chunks that the connections of one event loop hold at most: READ from
     * their peers into this side's memory and not yet handed to a pipeline (each connection holds at most 4 MiB of its
     * own). Past it, a connection holding no chunk still READs 64 KiB at a time, so that other connections' unread
     * bytes never stop it for good; one holding some waits until bytes come back. The loop holds at most this bound
     * plus 64 KiB per connection with a rendezvous; {@link RdmaCounters#rendezvousReadAheadStalls()} counts the
     * READs it cut short or held back.
     */
    public RdmaIoHandlerConfig setRendezvousReadAheadBytes(long rendezvousReadAheadBytes) {
        this.rendezvousReadAheadBytes = ObjectUtil.checkPositive(rendezvousReadAheadBytes, "rendezvousReadAheadBytes");
        return this;
    }

    public long getRendezvousReadAheadBytes() {
        return rendezvousReadAheadBytes;
    }

    /**
     * Whether connections take their receives from a shared receive queue of the loop (per device and receive buffer
     * size) where the device has them, instead of each posting its own (docs/srq-design.md): {@code true} on every
     * device, {@code false} on none, {@code null} (the default; {@code -Dorg.nettyrdma.sharedReceiveQueue=auto}) on every
     * device but iWARP ones. A connection with a pooled window reserves its receives in the queue as its traffic needs
     * them (pooled credits: 2 receives while idle instead of {@code RECEIVE_BUFFER_COUNT}); a connection for which the
     * queue has no room gets receives of its own. Not by default on iWARP: it has no RNR retry, so a hostile peer that
     * sends beyond its credits into the shared queue can make an honest connection's SEND find it empty, which ends that
     * connection (docs/deployment.md).
     */
    public RdmaIoHandlerConfig setSharedReceiveQueue(Boolean sharedReceiveQueue) {
        this.sharedReceiveQueue = sharedReceiveQueue;
        return this;
    }

    /** {@code true}, {@code false}, or {@code null} (the default): by device (every device but iWARP ones). */
    public Boolean getSharedReceiveQueue() {
        return sharedReceiveQueue;
    }

    /** Whether connections on a device of {@code transport} take their receives from a shared receive queue. */
    boolean usesSharedReceiveQueue(DeviceAttributes.Transport transport) {
        return sharedReceiveQueue != null ? sharedReceiveQueue : transport != DeviceAttributes.Transport.IWARP;
    }

    private static Boolean sharedReceiveQueueProperty() {
        String v = SystemPropertyUtil.get("org.nettyrdma.sharedReceiveQueue", "auto").trim();
        if ("auto".equalsIgnoreCase(v)) {
            return null;
        }
        if ("true".equalsIgnoreCase(v) || "false".equalsIgnoreCase(v)) {
            return Boolean.valueOf(v);
        }
        throw new IllegalArgumentException("-Dorg.nettyrdma.sharedReceiveQueue=" + v + ": expected auto (every device "
                + "but iWARP ones), true or false");
    }

    RdmaIoHandlerConfig copy() {
        return new RdmaIoHandlerConfig().setProvider(provider).setBusyPollNanos(busyPollNanos)
                .setBusyPollBackOff(busyPollBackOff).setAdaptiveBusyPoll(adaptiveBusyPoll).setBusyPollMaxNanos(busyPollMaxNanos)
                .setSolicitedWakeups(solicitedWakeups)
                .setCompletionQueueSize(completionQueueSize).setCompletionBatchSize(completionBatchSize)
                .setMaxLentReceiveBytes(maxLentReceiveBytes).setSendStagingBytes(sendStagingBytes)
                .setRendezvousReadAheadBytes(rendezvousReadAheadBytes)
                .setSharedReceiveQueue(sharedReceiveQueue);
    }
}
