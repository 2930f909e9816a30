package org.nettyrdma.channel;

import io.netty.channel.ChannelPromise;
import io.netty.channel.EventLoop;
import io.netty.channel.IoEventLoop;
import io.netty.channel.IoHandle;
import io.netty.channel.IoHandler;
import io.netty.channel.IoHandlerContext;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.IoOps;
import io.netty.channel.IoRegistration;
import io.netty.util.collection.IntObjectHashMap;
import io.netty.util.concurrent.EventExecutor;
import io.netty.util.concurrent.EventExecutorGroup;
import io.netty.util.concurrent.Future;
import io.netty.util.concurrent.SingleThreadEventExecutor;
import io.netty.util.concurrent.ThreadAwareExecutor;
import io.netty.util.internal.ObjectUtil;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;
import org.nettyrdma.verbs.CmEvent;
import org.nettyrdma.verbs.CmEventChannel;
import org.nettyrdma.verbs.CmEventType;
import org.nettyrdma.verbs.CmId;
import org.nettyrdma.verbs.CompletionArray;
import org.nettyrdma.verbs.CompletionChannel;
import org.nettyrdma.verbs.CompletionQueue;
import org.nettyrdma.verbs.Device;
import org.nettyrdma.verbs.DeviceAttributes;
import org.nettyrdma.verbs.EventWaiter;
import org.nettyrdma.verbs.ProtectionDomain;
import org.nettyrdma.verbs.VerbsException;
import org.nettyrdma.verbs.VerbsProvider;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Consumer;
import java.util.function.Supplier;
import java.util.Set;
import java.util.concurrent.atomic.AtomicIntegerFieldUpdater;

/**
 * The {@link IoHandler} of the RDMA transport: {@code new MultiThreadIoEventLoopGroup(RdmaIoHandler.newFactory())}.
 *
 * <p>Each handler owns, per RDMA device its channels use, a completion channel and a completion queue shared by all its
 * queue pairs, and one RDMA CM event channel. {@link #run} polls them in bounded batches and dispatches by the
 * registration id carried in each work request id; with nothing to do it busy-polls for the configured budget, then
 * arms the completion queues and blocks until a completion, a CM event, a scheduled task or {@link #wakeup()}.
 * A failing channel fails alone: the loop never dies from one channel's error.
 */
public final class RdmaIoHandler implements IoHandler {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(RdmaIoHandler.class);
    private static final AtomicIntegerFieldUpdater<RdmaIoHandler> BLOCKING =
            AtomicIntegerFieldUpdater.newUpdater(RdmaIoHandler.class, "blocking");
    private static final AtomicIntegerFieldUpdater<RdmaIoHandler> SHUTDOWN_SEEN =
            AtomicIntegerFieldUpdater.newUpdater(RdmaIoHandler.class, "shutdownSeen");
    private static final int MAX_CM_EVENTS_PER_RUN = 64;
    /**
     * How often a loop that keeps finding work, or spins, looks at its RDMA CM event channel: on the native provider a
     * look is a system call ({@code rdma_get_cm_event}, which mostly finds nothing), and a spin made one per turn. A
     * woken loop always looks; one about to block need not, as a pending CM event ends its wait at once.
     */
    static final long CM_POLL_INTERVAL_NANOS = 50_000;
    /** Receives a shared receive queue holds at most (or the device's {@code max_srq_wr}). */
    static final int SHARED_RECEIVE_QUEUE_SIZE = 4096;
    private static final long LOOP_ERROR_BACKOFF_MILLIS = 1000;
    /** The loop's housekeeping tick ({@link #tick}), from its first registration on. */
    static final int TICK_MILLIS = 1000;
    /** Each live handler by its event loop, for {@link #counters(EventExecutorGroup)}. */
    private static final ConcurrentMap<ThreadAwareExecutor, RdmaIoHandler> LOOPS = new ConcurrentHashMap<>();

    private final RdmaIoHandlerConfig config;
    private final ThreadAwareExecutor executor;
    /** {@link #executor} where it is an {@link EventExecutor} (it tells whether it shuts down), else null. */
    private final EventExecutor loop;
    /** {@link #closeForShutdown()}, as the task and shutdown hook that run it (one instance: a hook is added once). */
    private final Runnable closeForShutdown = this::closeForShutdown;
    /** 1 once {@link #wakeup()} has seen the loop shutting down and queued {@link #closeForShutdown}. */
    private volatile int shutdownSeen;
    /** The loop shuts down and its channels were closed: it takes no new ones ({@link #register}). Loop only. */
    private boolean closedForShutdown;
    private final RdmaResources resources;
    private final EventWaiter waiter;
    private final CmEventChannel cmChannel;
    private final CmEvent cmEvent = new CmEvent();
    private final CompletionArray completions;
    private final BusyPoll busyPoll;
    private final SolicitedWakeups wakeups;
    private final RdmaIoHandle.RdmaIoEvent ioEvent = new RdmaIoHandle.RdmaIoEvent();
    private final IntObjectHashMap<Registration> registrations = new IntObjectHashMap<>();
    /**
     * The registrations whose QP takes its receives from a shared receive queue, by qp_num: such a receive's wr_id is
     * the pool's (its upper 32 bits 0), so the completion's qp_num says whose it is (docs/srq-design.md, section 1).
     */
    private final IntObjectHashMap<Registration> byQpNum = new IntObjectHashMap<>();
    /** Connections whose teardown went on without the loop ({@link #tearDown}) and has not finished here. Loop only. */
    private int pendingTeardowns;
    /** Their last parts, queued by the teardown threads once the QP and CM id are destroyed, run on the loop. */
    private final BlockingQueue<Runnable> finishedTeardowns = new LinkedBlockingQueue<>();
    private final Runnable runFinishedTeardowns = this::runFinishedTeardowns;
    /**
     * The qp_nums of destroyed QPs whose shared receives may still sit in a completion queue, not yet polled: a new QP
     * that gets such a number (devices reuse them) is bound only after the queues are drained, so that none of those
     * reaches its channel ({@link Registration#bindSharedReceives}). Cleared by each drain.
     */
    private final IntObjectHashMap<Boolean> retiredQpNums = new IntObjectHashMap<>();
    /** Where {@link #drainCompletionQueues} polls into (not {@link #completions}: a caller may be dispatching those). */
    private CompletionArray drained;
    private final List<DeviceQueues> devices = new ArrayList<>();
    private RdmaIoHandle[] touched = new RdmaIoHandle[64];
    private int touchedCount;
    private int nextId = 1;
    /** When a {@link #poll} that may skip the CM event channel looks at it next ({@link #CM_POLL_INTERVAL_NANOS}). */
    private long nextCmPollNanos;
    /** When the last {@link #poll} had polled the completion queues (the spin's clock too: one nanoTime a turn). */
    private long polledAtNanos;
    /**
     * 1 while the loop is in (or about to enter) {@link EventWaiter#await}: only then does {@link #wakeup()} signal the
     * waiter. A running or spinning loop sees new tasks itself ({@code canBlock()}), and a signal sent to it would
     * only make its next wait return at once (an eventfd write for nothing, then a wasted wake-up and spin).
     */
    private volatile int blocking;
    private final RdmaCounters counters = new RdmaCounters();
    /** Queues whose completion queue failed: closed once the last QP on them is gone. */
    private final List<DeviceQueues> deadQueues = new ArrayList<>();
    /** Send staging, one pool per protection domain and message size, within the loop's cap. */
    private final List<StagingPool> stagingPools = new ArrayList<>();
    /** The loop's shared receive pools by index (the index is in their receives' wr_ids); null where none. */
    private final ReceivePool[] receivePools = new ReceivePool[ReceivePool.MAX_POOLS];
    /** One more than the highest index in use in {@link #receivePools}. */
    private int receivePoolEnd;
    /** The pools' {@link ReceivePool#unreservedBytes} as {@link #counters} count them now. */
    private long poolBytesCounted;
    private static final WarnLimiter REFILL_FAILURES = new WarnLimiter(10, TimeUnit.SECONDS);
    private final StagingPool.Budget stagingBudget;
    private final ReadAheadBudget readAheadBudget;
    /** The periodic {@link #tick}, from the first registration on; null before, or where the loop cannot schedule. */
    private Future<?> tick;
    /** The handles a tick runs for, gathered first (a tick may close a channel, which deregisters it); reused. */
    private RdmaIoHandle[] ticking = new RdmaIoHandle[16];

    private RdmaIoHandler(ThreadAwareExecutor executor, RdmaIoHandlerConfig config) throws VerbsException {
        this.executor = executor;
        this.loop = executor instanceof EventExecutor ? (EventExecutor) executor : null;
        this.config = config;
        this.nextCmPollNanos = System.nanoTime(); // (nanoTime may be negative: 0 would not be due)
        this.resources = RdmaResources.of(config.getProvider());
        VerbsProvider provider = resources.provider();
        this.completions = new CompletionArray(config.getCompletionBatchSize());
        this.busyPoll = BusyPoll.of(config);
        this.wakeups = new SolicitedWakeups(config.isSolicitedWakeups());
        this.stagingBudget = new StagingPool.Budget(config.getSendStagingBytes());
        this.readAheadBudget = new ReadAheadBudget(config.getRendezvousReadAheadBytes(), counters);
        this.waiter = provider.createWaiter();
        this.cmChannel = provider.createEventChannel();
        waiter.add(cmChannel);
        LOOPS.put(executor, this); // last: a constructor that failed leaves no entry
    }

    /** A factory for handlers with the default {@link RdmaIoHandlerConfig}. */
    public static IoHandlerFactory newFactory() {
        return newFactory(new RdmaIoHandlerConfig());
    }

    /**
     * A factory for handlers with {@code config}. With the native provider it fails at once (not when the group
     * starts its loops) where {@link Rdma#isAvailable()} is false, with {@link Rdma#unavailabilityCause()}.
     */
    public static IoHandlerFactory newFactory(RdmaIoHandlerConfig config) {
        ObjectUtil.checkNotNull(config, "config");
        RdmaIoHandlerConfig copy = config.copy();
        if (RdmaIoHandlerConfig.PROVIDER_NATIVE.equals(copy.getProvider())) {
            Rdma.ensureAvailability();
        }
        return executor -> {
            try {
                return new RdmaIoHandler(executor, copy);
            } catch (VerbsException e) {
                throw new IllegalStateException("cannot create an RDMA event loop: " + e.getMessage(), e);
            }
        };
    }

    /** The provider this handler's channels run on ("emulated", "jni"). */
    public String providerName() {
        return resources.provider().name();
    }

    /** Counters of every channel this handler has run, for users and tests. */
    public RdmaCounters counters() {
        return counters;
    }

    /**
     * The counters of every RDMA event loop of {@code group} (a group made with {@link #newFactory}, or one of its
     * loops), added up into a snapshot: traffic so far, and the lent, registered memory and queue pairs of now.
     * Readable from any thread; an event loop without an {@code RdmaIoHandler} adds nothing.
     */
    public static RdmaCounters counters(EventExecutorGroup group) {
        RdmaCounters total = new RdmaCounters();
        for (EventExecutor loop : group) {
            RdmaIoHandler handler = loop instanceof ThreadAwareExecutor ? LOOPS.get(loop) : null;
            if (handler != null) {
                handler.counters.addTo(total);
            }
        }
        return total;
    }

    RdmaResources resources() {
        return resources;
    }

    CmEventChannel cmChannel() {
        return cmChannel;
    }

    /**
     * Makes sure that the channels still registered when the loop starts shutting down are closed while it still runs
     * tasks ({@link #closeForShutdown()}). Netty 4.2's loop calls {@link #prepareToDestroy()} only after a {@link #run}
     * that found it shutting down; a shutdown that comes while it runs its tasks (where a busy loop spends much of its
     * time) and needs no quiet period ends the loop without another, and {@link #destroy()} comes when the loop rejects
     * tasks: a channel closed then never gets its {@code channelInactive} and deregistration (Netty logs the rejected
     * task at WARN, once per channel). So the close also runs as a shutdown hook of the loop (run while it confirms
     * the shutdown, when it has no task left) and as a task queued by {@link #wakeup()} (which the loop calls as its
     * shutdown starts), whichever comes first.
     */
    @Override
    public void initialize() {
        if (executor instanceof SingleThreadEventExecutor) {
            ((SingleThreadEventExecutor) executor).addShutdownHook(closeForShutdown); // a set: once however often
        }
    }

    @Override
    public int run(IoHandlerContext context) {
        int work = poll(false);
        if (work > 0 || !context.canBlock()) {
            return work;
        }
        long idleSinceNs = System.nanoTime();
        long spinNs = busyPoll.spinNs();
        if (spinNs > 0) {
            long deadlineNs = idleSinceNs + spinNs;
            long nowNs;
            do {
                Thread.onSpinWait();
                work = poll(false);
                nowNs = polledAtNanos;
                if (work > 0) {
                    counters.spinsFound++;
                    busyPoll.onWorkWhileSpinning(nowNs - idleSinceNs);
                    return work;
                }
            } while (context.canBlock() && nowNs - deadlineNs < 0);
            if (context.canBlock()) {
                counters.spinsMissed++;
                busyPoll.onNothingWhileSpinning();
            } else {
                counters.spinsFound++;
                busyPoll.onTaskWhileSpinning();
                return 0; // a task came: no gap to learn from
            }
        }
        boolean solicitedOnly = solicitedOnly();
        boolean armedSolicited = false;
        for (int i = 0; i < devices.size(); i++) {
            DeviceQueues q = devices.get(i);
            boolean s = solicitedOnly && q.solicitedEvents;
            q.cq.requestNotify(s);
            armedSolicited |= s;
        }
        // what completed before the queues were armed raises no event; a pending CM event ends the wait (a readable fd
        // for epoll, the emulated waiter's signal until a wait consumes it, and a look that left events behind makes
        // the next one due at once), so the CM channel waits for its interval here
        work = poll(false);
        if (work > 0) {
            busyPoll.onWorkAfterSpin(System.nanoTime() - idleSinceNs);
            return work;
        }
        BLOCKING.set(this, 1);
        try {
            if (context.canBlock()) { // a task that came before the flag was set signalled nothing: look again
                counters.waits++;
                if (armedSolicited) {
                    counters.solicitedWaits++;
                }
                waiter.await(context.delayNanos(System.nanoTime()));
            }
        } catch (VerbsException e) {
            onLoopError("waiting for RDMA events failed", e);
        } finally {
            BLOCKING.set(this, 0);
        }
        for (int i = 0; i < devices.size(); i++) {
            // one event per wait: a queue armed once raises one, and a read more (a system call) mostly finds none.
            // One an arming raised when no wait followed (the poll after it found work) is read after a later wait:
            // on epoll it ends that wait at once; it is acknowledged at the latest when the queues close
            DeviceQueues q = devices.get(i);
            if (q.channel.getEvent() != null) {
                q.cq.ackEvents(1);
            }
        }
        work = poll(true);
        if (work > 0) {
            busyPoll.onWorkAfterSpin(System.nanoTime() - idleSinceNs);
        }
        return work;
    }

    /**
     * Whether to arm for solicited completions only (on devices that raise solicited events): nothing on this loop waits
     * for a send completion. Loop only; package-private for tests.
     */
    boolean solicitedOnly() {
        if (!wakeups.solicitedOnly()) {
            return false;
        }
        for (int i = 0; i < stagingPools.size(); i++) {
            if (stagingPools.get(i).waiterCount() > 0) {
                return false;
            }
        }
        return true;
    }

    /** The READ rendezvous' chunks that this loop's connections hold, and their bound. Loop only. */
    ReadAheadBudget readAheadBudget() {
        return readAheadBudget;
    }

    /** How this loop arms its completion queues; what its send queues and connections tell it. */
    SolicitedWakeups wakeups() {
        return wakeups;
    }

    /**
     * Handles the completions and CM events waiting now, from a task of this loop (never from a completion's
     * handling): a keep-alive judges a connection's silence only after what its device reported was seen.
     */
    void pollNow() {
        poll(true);
    }

    /** Polls the completion queues, and the CM event channel if {@code cmNow} or its interval has passed. */
    private int poll(boolean cmNow) {
        int work = 0;
        for (int i = 0; i < devices.size(); i++) {
            work += pollCq(devices.get(i));
        }
        long now = System.nanoTime();
        polledAtNanos = now;
        if (cmNow || now - nextCmPollNanos >= 0) {
            counters.cmPolls++;
            int events = pollCm();
            // a look that stopped at its limit left events behind: the next poll looks again
            nextCmPollNanos = events < MAX_CM_EVENTS_PER_RUN ? now + CM_POLL_INTERVAL_NANOS : now;
            work += events;
        }
        return work;
    }

    private int pollCq(DeviceQueues q) {
        int n = q.cq.poll(completions, completions.capacity());
        if (n < 0) {
            failQueues(q, n);
            return 1;
        }
        dispatch(completions, n);
        counters.completions += n;
        finishBatch();
        if (n < completions.capacity() && retiredQpNums.isEmpty()
                && !(q.receivePools.isEmpty() && q.failedPools.isEmpty())) {
            closeReceivePools(q, true);
        }
        return n;
    }

    /**
     * Hands each of the first {@code n} completions to its handle: by the registration id in its wr_id's upper 32 bits,
     * or, where those are 0 (a receive from a shared receive queue), by its qp_num. A completion nobody owns any more
     * (its channel deregistered) is dropped; a shared receive's buffer goes back to its pool.
     */
    void dispatch(CompletionArray completions, int n) {
        for (int i = 0; i < n; i++) {
            int id = (int) (completions.wrId(i) >>> 32);
            Registration r = id != 0 ? registrations.get(id) : byQpNum.get(completions.qpNum(i));
            if (r == null && id == 0) {
                recycleSharedReceive(completions.wrId(i));
            } else if (r != null) {
                try {
                    if (id != 0) {
                        r.handle.onCompletion(completions, i);
                    } else {
                        r.handle.onSharedReceive(completions, i);
                    }
                } catch (Throwable t) {
                    logger.warn("channel failed handling a completion", t);
                }
            }
        }
    }

    /**
     * Polls every completion queue of the loop until it is empty, dispatching what it held, and forgets the retired
     * qp_nums: whatever a destroyed QP left in a queue has been seen (a completion queue is in order, and a destroyed
     * QP adds nothing). Runs outside the loop's own dispatch (a bind, a tick).
     */
    private void drainCompletionQueues() {
        if (drained == null) {
            drained = new CompletionArray(completions.capacity());
        }
        // (numbers retired by what the drain dispatches stay: their leftovers may be in a queue already drained)
        retiredQpNums.clear();
        for (int i = 0; i < devices.size(); i++) {
            DeviceQueues q = devices.get(i);
            int n;
            do {
                n = q.cq.poll(drained, drained.capacity());
                if (n < 0) {
                    failQueues(q, n);
                    i--; // it left the list
                    break;
                }
                dispatch(drained, n);
                counters.completions += n;
            } while (n == drained.capacity());
        }
        finishBatch();
    }

    /**
     * Gives the buffer of shared receive {@code wrId} back to its pool: its QP is gone (its connection closed with the
     * completion still in the queue), or its channel has no connection any more.
     */
    void recycleSharedReceive(long wrId) {
        ReceivePool pool = receivePools[ReceivePool.poolIndex(wrId)];
        if (pool != null && pool.isPostedReceive(wrId)) {
            pool.recycle(pool.take(wrId));
        }
    }

    /** The loop's shared receive pool with this index (the wr_id of each of its receives names it), or null. */
    ReceivePool receivePool(int index) {
        return receivePools[index];
    }

    private int pollCm() {
        int n = 0;
        try {
            while (n < MAX_CM_EVENTS_PER_RUN && cmChannel.poll(cmEvent)) {
                n++;
                if (cmEvent.type() == CmEventType.DISCONNECTED) {
                    // the data that came before the disconnect completes first
                    for (int i = 0; i < devices.size(); i++) {
                        pollCq(devices.get(i));
                    }
                }
                dispatch(cmEvent);
            }
        } catch (VerbsException e) {
            onLoopError("polling the RDMA CM event channel failed", e);
        }
        finishBatch();
        return n;
    }

    private void dispatch(CmEvent event) {
        CmId owner = event.type() == CmEventType.CONNECT_REQUEST ? event.listenId() : event.id();
        Object context = owner != null ? owner.context() : null; // no listener: it was closed as the request came
        if (!(context instanceof RdmaIoHandle)) {
            if (event.type() == CmEventType.CONNECT_REQUEST) {
                closeQuietly(event.id()); // its listener is gone
            }
            return;
        }
        RdmaIoHandle handle = (RdmaIoHandle) context;
        try {
            if (handle.inEventLoop()) {
                handle.onCmEvent(event);
            } else {
                // an incoming id still reports here until its channel migrates it to its own loop
                CmEvent copy = new CmEvent();
                copy.set(event.type(), event.id(), event.listenId(), event.status(), event.privateData(),
                        event.privateDataLength());
                handle.execute(() -> handle.onCmEvent(copy));
            }
        } catch (Throwable t) {
            logger.warn("channel failed handling " + event, t);
        }
    }

    /**
     * The loop shuts down: closes every channel still registered (their pipelines see {@code channelInactive} and
     * {@code channelUnregistered} from tasks the loop still runs, their connections end abortively and free their
     * resources), and takes no new channel from here. Loop only; again and again while the loop shuts down.
     */
    private void closeForShutdown() {
        closedForShutdown = true;
        for (Registration r : registrations.values().toArray(new Registration[0])) {
            closeQuietly(r.handle);
        }
    }

    private static void closeQuietly(AutoCloseable c) {
        try {
            c.close();
        } catch (Exception e) {
            logger.debug("close failed", e);
        }
    }

    /** What a channel sets up once its loop has registered it; an exception fails the registration. */
    interface Registered {
        void run(IoRegistration ioRegistration, Registration registration) throws Exception;
    }

    /**
     * Registers a channel's handle on its event loop, then runs {@code then} and completes {@code promise}. Once only:
     * an RDMA channel's queue pair and CM id live on the loop's completion queue and event channel.
     */
    static void register(EventLoop loop, RdmaIoHandle handle, ChannelPromise promise, Registered then) {
        ((IoEventLoop) loop).register(handle).addListener(f -> {
            if (!f.isSuccess()) {
                promise.setFailure(f.cause());
                return;
            }
            IoRegistration ioRegistration = (IoRegistration) f.getNow();
            try {
                then.run(ioRegistration, ioRegistration.attachment());
            } catch (Throwable t) {
                promise.setFailure(t);
                return;
            }
            promise.setSuccess();
        });
    }

    /** Asks for {@link RdmaIoHandle#onBatchComplete()} once the current batch of completions is done. */
    void touch(RdmaIoHandle handle) {
        if (touchedCount == touched.length) {
            touched = java.util.Arrays.copyOf(touched, touchedCount * 2);
        }
        touched[touchedCount++] = handle;
    }

    private void finishBatch() {
        // a handle may touch itself again while finishing; process until nothing is left
        for (int i = 0; i < touchedCount; i++) {
            RdmaIoHandle h = touched[i];
            touched[i] = null;
            try {
                h.onBatchComplete();
            } catch (Throwable t) {
                logger.warn("channel failed finishing a batch", t);
            }
        }
        touchedCount = 0;
        if (receivePoolEnd > 0) {
            refillReceivePools();
        }
        countReceivePools();
        counters.publish();
    }

    /**
     * The loop's registered bytes follow what its shared receive pools hold beyond the connections' reservations
     * (which the connections count): their margins and spares. Before each publish.
     */
    private void countReceivePools() {
        if (receivePoolEnd == 0 && poolBytesCounted == 0) {
            return;
        }
        long bytes = 0;
        for (int i = 0; i < receivePoolEnd; i++) {
            ReceivePool p = receivePools[i];
            if (p != null) {
                bytes += p.unreservedBytes();
            }
        }
        counters.registeredBytes += bytes - poolBytesCounted;
        poolBytesCounted = bytes;
    }

    /**
     * Posts the receives the batch's messages consumed from the shared receive pools, where a pool lacks its lag or more
     * (docs/srq-design.md, section 1: every consumed receive completes on this loop, so the loop knows what each pool
     * lacks).
     */
    private void refillReceivePools() {
        for (int i = 0; i < receivePoolEnd; i++) {
            ReceivePool pool = receivePools[i];
            if (pool != null && pool.lagging()) {
                refill(pool);
            }
        }
    }

    /** Refills {@code pool}; a failure is logged (rate-limited): its connections' peers may then find it empty. */
    void refill(ReceivePool pool) {
        String failure;
        try {
            int rc = pool.refill();
            if (rc >= 0) {
                return;
            }
            failure = "ibv_post_srq_recv failed: " + org.nettyrdma.verbs.Errno.describe(rc);
        } catch (VerbsException | RuntimeException e) {
            failure = e.toString();
        }
        String message = "a shared receive queue could not be refilled (" + failure + "; " + pool.posted() + " of "
                + pool.target() + " receives posted): its connections may fail";
        if (REFILL_FAILURES.tryWarn()) {
            logger.warn(message);
        } else {
            logger.debug(message);
        }
    }

    /**
     * The shared receive pool of {@code q} for receive buffers of {@code bufferSize} bytes from {@code alloc}; created on
     * first use. Null where the device has no shared receive queues, the loop has {@link ReceivePool#MAX_POOLS}
     * already, or the queue could not be created (the connection then posts receives of its own).
     */
    ReceivePool receivePool(DeviceQueues q, int bufferSize, RdmaByteBufAllocator alloc) {
        for (int i = 0; i < q.receivePools.size(); i++) {
            ReceivePool p = q.receivePools.get(i);
            if (p.bufferSize() == bufferSize && p.allocator() == alloc) {
                return p;
            }
        }
        DeviceAttributes limits = q.device.attributes();
        int index = 0;
        while (index < ReceivePool.MAX_POOLS && receivePools[index] != null) {
            index++;
        }
        if (!limits.supportsSharedReceiveQueues() || index == ReceivePool.MAX_POOLS) {
            return null;
        }
        int slots = Math.min(limits.maxSrqWr(), SHARED_RECEIVE_QUEUE_SIZE);
        ReceivePool p;
        try {
            p = new ReceivePool(q.pd.createSharedReceiveQueue(slots, 1), slots, alloc, bufferSize, index);
        } catch (VerbsException e) {
            logger.debug("no shared receive queue on {}; connections post receives of their own", q.device.name(), e);
            return null;
        }
        q.receivePools.add(p);
        receivePools[index] = p;
        receivePoolEnd = Math.max(receivePoolEnd, index + 1);
        return p;
    }

    /**
     * Takes the pools whose shared receive queue the device reported in error ({@code IBV_EVENT_SRQ_ERR}) out of use:
     * nothing is posted to them any more and no new connection takes them (it gets a new queue); the connections that
     * receive from them fail at this tick ({@link RdmaConnection#tick}: their messages could no longer arrive, and
     * their QPs may never say so). They are closed like idle pools, once none of those connections reserves receives.
     */
    private void retireFailedReceivePools() {
        for (int d = 0; d < devices.size(); d++) {
            DeviceQueues q = devices.get(d);
            for (int i = q.receivePools.size() - 1; i >= 0; i--) {
                ReceivePool p = q.receivePools.get(i);
                if (p.queueFailed()) {
                    p.retire();
                    q.receivePools.remove(i);
                    q.failedPools.add(p);
                    logger.warn("a shared receive queue of " + q.device.name() + " failed (IBV_EVENT_SRQ_ERR): the "
                            + "connections receiving from it are closed; new connections get a new queue");
                }
            }
        }
    }

    /**
     * Closes {@code q}'s shared receive pools, or with {@code idleOnly} those no connection reserves receives in: so that
     * memory follows the connections (a queue's posted receives cannot be taken back one by one). Idle ones only
     * once a poll found {@code q} drained and no QP destroyed since the last full drain ({@link #retiredQpNums} empty):
     * every completion of their QPs has been handed back by then, and none can name the pool's index after another
     * pool takes it. (A QP destroyed while the poll's own batch is dispatched, a connection failing on a completion,
     * may have added completions after that poll: rxe and siw leave a destroyed QP's completions in its queue. The
     * tick's drain sees them, into the pool that posted them.) A queue with a QP attached stays open.
     */
    private void closeReceivePools(DeviceQueues q, boolean idleOnly) {
        closeReceivePools(q.receivePools, idleOnly);
        closeReceivePools(q.failedPools, idleOnly);
        while (receivePoolEnd > 0 && receivePools[receivePoolEnd - 1] == null) {
            receivePoolEnd--;
        }
    }

    private void closeReceivePools(List<ReceivePool> pools, boolean idleOnly) {
        for (int i = pools.size() - 1; i >= 0; i--) {
            ReceivePool p = pools.get(i);
            if (!idleOnly || p.reserved() == 0) {
                pools.remove(i);
                receivePools[p.index()] = null;
                closeQuietly(p);
            }
        }
    }

    /**
     * A poll of {@code q}'s completion queue failed with {@code -errno} (-EOVERFLOW: it overran, and the completions it
     * lost can never be reported): the queue is dead. It leaves {@link #devices} at once, so that the next connection
     * on its device gets a new one; the channels whose QPs use it fail (an exception in their pipelines, then they
     * close); it is closed when the last of those QPs is gone ({@link DeviceQueues#release}). Logged once.
     */
    private void failQueues(DeviceQueues q, int errno) {
        devices.remove(q);
        q.dead = true;
        deadQueues.add(q);
        removeFromWaiter(q); // a dead queue's pending events must not wake the loop until it is closed
        IOException cause = new IOException("the completion queue of " + q.device.name() + " failed (ibv_poll_cq: "
                + org.nettyrdma.verbs.Errno.describe(errno) + ")" + (errno == -org.nettyrdma.verbs.Errno.EOVERFLOW
                ? ": it overran and lost completions" : "") + "; the connections on it are closed");
        logger.warn(q.users.size() + " channel(s) fail: " + cause.getMessage());
        RdmaIoHandle[] users = q.users.toArray(new RdmaIoHandle[0]);
        for (RdmaIoHandle h : users) {
            try {
                h.fail(cause);
            } catch (Throwable t) {
                logger.warn("channel failed closing after its completion queue failed", t);
            }
        }
        closeDeadQueues();
    }

    /** Closes the dead queues no QP uses any more. */
    private void closeDeadQueues() {
        for (int i = deadQueues.size() - 1; i >= 0; i--) {
            DeviceQueues q = deadQueues.get(i);
            if (q.reserved == 0) {
                deadQueues.remove(i);
                closeQueues(q);
            }
        }
    }

    /** Closes a device's shared receive pools, completion queue and channel (acknowledging the events still due). */
    private void closeQueues(DeviceQueues q) {
        closeReceivePools(q, false);
        int events = 0;
        while (q.channel.getEvent() != null) {
            events++;
        }
        if (events > 0) {
            q.cq.ackEvents(events);
        }
        closeQuietly(q.cq);
        if (!q.dead) {
            removeFromWaiter(q);
        }
        closeQuietly(q.channel);
    }

    private void removeFromWaiter(DeviceQueues q) {
        try {
            waiter.remove(q.channel);
        } catch (VerbsException e) {
            logger.debug("removing a completion channel from the waiter failed", e);
        }
    }

    /**
     * A failure of the loop itself (not of one channel): logged, then the loop backs off for a second, as Netty's
     * epoll and io_uring loops do, so that an error that persists neither spins a core nor floods the log.
     */
    private static void onLoopError(String what, Throwable cause) {
        logger.warn(what + "; the event loop backs off for " + LOOP_ERROR_BACKOFF_MILLIS + " ms", cause);
        try {
            Thread.sleep(LOOP_ERROR_BACKOFF_MILLIS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * A completion queue of this handler on {@code device} with {@code entries} free, reserved for {@code user}'s QP
     * (which is failed if the queue fails), and the device's protection domain. When every queue of the device is
     * full, another queue (with its own completion channel) is created: a loop takes connections until the device's
     * limits, not until one queue's size.
     */
    DeviceQueues deviceQueues(Device device, RdmaIoHandle user, int entries) throws VerbsException {
        for (int i = 0; i < devices.size(); i++) {
            DeviceQueues q = devices.get(i);
            if (q.device == device && q.reserved + entries <= q.capacity) {
                q.reserved += entries;
                return q.usedBy(user);
            }
        }
        int size = Math.min(config.getCompletionQueueSize(), device.attributes().maxCqe());
        if (entries > size) {
            throw new VerbsException("ibv_create_qp", org.nettyrdma.verbs.Errno.ENOMEM, "a connection needs " + entries
                    + " completion queue entries and a queue has " + size + " (RdmaIoHandlerConfig.completionQueueSize"
                    + ", the device's max_cqe " + device.attributes().maxCqe() + "): lower RECEIVE_BUFFER_COUNT");
        }
        ProtectionDomain pd = resources.pd(device);
        CompletionChannel channel = device.createCompletionChannel();
        CompletionQueue cq;
        try {
            cq = device.createCq(size, channel);
            waiter.add(channel);
        } catch (VerbsException e) {
            closeQuietly(channel);
            throw e;
        }
        DeviceQueues q = new DeviceQueues(this, device, pd, channel, cq, size);
        devices.add(q);
        q.reserved = entries;
        return q.usedBy(user);
    }

    /** This loop's send staging in {@code pd} for SENDs of {@code messageSize} bytes; created on first use. */
    StagingPool stagingPool(ProtectionDomain pd, int messageSize) {
        for (int i = 0; i < stagingPools.size(); i++) {
            StagingPool p = stagingPools.get(i);
            if (p.pd == pd && p.slotSize == messageSize) {
                return p;
            }
        }
        StagingPool p = new StagingPool(pd, messageSize, stagingBudget, counters);
        stagingPools.add(p);
        return p;
    }

    /**
     * Housekeeping every {@link #TICK_MILLIS}, one task for all the loop's channels: each handle's {@link
     * RdmaIoHandle#tick} (pooled credit windows shrink, idle senders give surplus credits back; a connection whose
     * shared receive queue failed fails), then send staging a burst needed goes once the loop is quiet ({@link
     * StagingPool#tick}).
     */
    private void tick() {
        retireFailedReceivePools();
        int n = 0;
        for (Registration r : registrations.values()) {
            if (n == ticking.length) {
                ticking = Arrays.copyOf(ticking, 2 * n);
            }
            ticking[n++] = r.handle;
        }
        for (int i = 0; i < n; i++) {
            RdmaIoHandle h = ticking[i];
            ticking[i] = null;
            try {
                h.tick();
            } catch (Throwable t) {
                logger.warn("channel failed its tick", t); // (the loop's tick goes on: an exception would end it)
            }
        }
        try {
            for (int i = 0; i < stagingPools.size(); i++) {
                stagingPools.get(i).tick();
            }
            if (!retiredQpNums.isEmpty()) {
                drainCompletionQueues();
            }
        } catch (Throwable t) {
            logger.warn("the loop's housekeeping failed", t);
        }
        countReceivePools();
        counters.publish();
    }

    /** The completion queues this handler has (one per device, more where connections outgrew one). */
    int deviceQueueCount() {
        return devices.size();
    }

    /** Completion queue {@code i} of {@link #deviceQueueCount()} (tests). */
    CompletionQueue completionQueue(int i) {
        return devices.get(i).cq;
    }

    @Override
    public IoRegistration register(IoHandle handle) {
        if (!(handle instanceof RdmaIoHandle)) {
            throw new IllegalArgumentException("not an RDMA channel: " + handle);
        }
        if (closedForShutdown) {
            // it would be closed only by destroy(), when its pipeline can no longer be told
            throw new RejectedExecutionException("the RDMA event loop is shutting down and has closed its channels: "
                    + "register the channel on a loop that is not shutting down");
        }
        while (nextId == 0 || registrations.containsKey(nextId)) {
            nextId++;
        }
        Registration r = new Registration(nextId++, (RdmaIoHandle) handle);
        registrations.put(r.id, r);
        if (tick == null && loop != null) {
            tick = loop.scheduleWithFixedDelay(this::tick, TICK_MILLIS, TICK_MILLIS, TimeUnit.MILLISECONDS);
        }
        return r;
    }

    @Override
    public void wakeup() {
        if (shutdownSeen == 0 && loop != null && loop.isShuttingDown() && SHUTDOWN_SEEN.compareAndSet(this, 0, 1)) {
            try {
                loop.execute(closeForShutdown); // see initialize()
            } catch (RejectedExecutionException e) {
                logger.debug("the loop rejected closing its channels for its shutdown; its hook or destroy() does", e);
            }
        }
        if (!executor.isExecutorThread(Thread.currentThread()) && BLOCKING.getAndSet(this, 0) == 1) {
            waiter.wakeup();
        }
    }

    @Override
    public boolean isCompatible(Class<? extends IoHandle> handleType) {
        return RdmaIoHandle.class.isAssignableFrom(handleType);
    }

    @Override
    public void prepareToDestroy() {
        closeForShutdown();
    }

    /**
     * Also closes the handles still registered, the last resort: a loop that is not Netty's {@link
     * SingleThreadEventExecutor} may end without calling {@link #prepareToDestroy()} (see {@link #initialize()}), and a
     * connection left then would keep its receive buffers and memory for good (seen in EchoStreamTest: 256 KiB of a
     * client's receive buffers outlived the group). Its resources go here; its pipeline cannot be told any more (the
     * loop rejects the tasks that would, and Netty logs each at WARN).
     */
    @Override
    public void destroy() {
        closeForShutdown();
        LOOPS.remove(executor, this);
        if (!awaitTeardowns()) {
            closeQuietly(cmChannel);
            closeQuietly(waiter);
            return;
        }
        for (DeviceQueues q : devices) {
            closeQueues(q); // after the connections' QPs (closeForShutdown); acknowledges the events no wait read
        }
        devices.clear();
        for (DeviceQueues q : deadQueues) {
            closeQueues(q);
        }
        deadQueues.clear();
        if (tick != null) {
            tick.cancel(false);
        }
        for (StagingPool p : stagingPools) {
            p.close(); // after the connections: a slot still out (a QP not destroyed) keeps its region
        }
        countReceivePools();
        counters.publish();
        closeQuietly(cmChannel);
        closeQuietly(waiter);
    }

    /**
     * Destroys a connection's QP and CM id on a {@link Teardowns} thread ({@code blocking}, which answers whether the QP
     * is gone), then runs {@code finish} with that answer on this loop: before this returns if the teardown took at most
     * {@link Teardowns#INLINE_WAIT_NANOS}, else once it has, while the loop serves its other channels meanwhile. Loop
     * only.
     */
    void tearDown(Supplier<Boolean> blocking, Consumer<Boolean> finish) {
        CompletableFuture<Boolean> teardown = CompletableFuture.supplyAsync(blocking, Teardowns.EXECUTOR);
        try {
            finish.accept(teardown.get(Teardowns.INLINE_WAIT_NANOS, TimeUnit.NANOSECONDS));
            return;
        } catch (TimeoutException e) {
            // goes on without the loop
        } catch (ExecutionException e) {
            logger.warn("tearing a connection down failed; its registered memory is not freed", e.getCause());
            finish.accept(false); // a QP that may still exist keeps its memory
            return;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        pendingTeardowns++;
        counters.slowTeardowns++;
        teardown.whenComplete((qpGone, cause) -> {
            if (cause != null) {
                logger.warn("tearing a connection down failed; its registered memory is not freed", cause);
            }
            finishedTeardowns.add(() -> {
                pendingTeardowns--;
                finish.accept(cause == null && qpGone);
            });
            try {
                executor.execute(runFinishedTeardowns);
            } catch (RejectedExecutionException rejected) {
                // the loop has stopped taking tasks: destroy() runs it
            }
        });
    }

    /** Runs the last parts of the teardowns that have returned ({@link #tearDown}). Loop only. */
    private void runFinishedTeardowns() {
        Runnable finish;
        while ((finish = finishedTeardowns.poll()) != null) {
            finish.run();
        }
        counters.publish();
    }

    /**
     * Waits, as the loop ends, for the teardowns still under way to return and runs their last parts: until none is
     * left (true) or {@link Teardowns#SHUTDOWN_WAIT_NANOS} passed (false: a QP still being destroyed may use the
     * loop's queues and memory, which must then stay).
     */
    private boolean awaitTeardowns() {
        runFinishedTeardowns();
        long deadline = System.nanoTime() + Teardowns.SHUTDOWN_WAIT_NANOS;
        while (pendingTeardowns > 0) {
            long left = deadline - System.nanoTime();
            Runnable finish = null;
            try {
                finish = left > 0 ? finishedTeardowns.poll(left, TimeUnit.NANOSECONDS) : null;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            if (finish == null) {
                logger.warn("{} connection(s) of the loop ending still had their queue pair destroyed after {} s: the "
                        + "loop's completion queues, receive pools and staging stay allocated (a QP may still use "
                        + "them)", pendingTeardowns, TimeUnit.NANOSECONDS.toSeconds(Teardowns.SHUTDOWN_WAIT_NANOS));
                return false;
            }
            finish.run();
        }
        counters.publish();
        return true;
    }

    /** A handle's registration; its id is the upper 32 bits of every wr_id the handle posts. */
    final class Registration implements IoRegistration {
        final int id;
        final RdmaIoHandle handle;
        private boolean valid = true;
        /** The qp_num whose shared receives come to this handle, or -1. */
        private long sharedQpNum = -1;

        Registration(int id, RdmaIoHandle handle) {
            this.id = id;
            this.handle = handle;
        }

        RdmaIoHandler handler() {
            return RdmaIoHandler.this;
        }

        /**
         * Receives that {@code qpNum} takes from a shared receive queue complete to this handle
         * ({@link RdmaIoHandle#onSharedReceive}), from now until {@link #unbindSharedReceives} or {@link #cancel}: bound
         * right after the QP is created, before it can receive. One QP per registration. If a destroyed QP of this
         * loop had the number and may have left receives in a completion queue, the queues are drained first: those
         * are dropped, never handed to this one.
         */
        void bindSharedReceives(int qpNum) {
            if (!valid || sharedQpNum != -1) {
                throw new IllegalStateException(valid ? "registration " + id + " has QP " + sharedQpNum + " bound already"
                        : "registration " + id + " was cancelled");
            }
            Registration other = byQpNum.get(qpNum);
            if (other != null) {
                throw new IllegalStateException("QP " + qpNum + " is bound to registration " + other.id + " already");
            }
            if (retiredQpNums.containsKey(qpNum)) {
                drainCompletionQueues();
                if (!valid) { // what the drain dispatched closed this channel (its completion queue failed)
                    throw new IllegalStateException("registration " + id + " was cancelled while the loop drained its "
                            + "completion queues before binding QP " + qpNum);
                }
            }
            byQpNum.put(qpNum, this);
            sharedQpNum = qpNum;
        }

        /**
         * Ends {@link #bindSharedReceives}: after the QP is destroyed (a later QP may get its number; until the queues
         * are drained it counts as retired).
         */
        void unbindSharedReceives() {
            if (sharedQpNum != -1) {
                byQpNum.remove((int) sharedQpNum);
                retiredQpNums.put((int) sharedQpNum, Boolean.TRUE);
                sharedQpNum = -1;
            }
        }

        /** Itself: the event loop wraps registrations, and channels need this one (its id and handler). */
        @SuppressWarnings("unchecked")
        @Override
        public <T> T attachment() {
            return (T) this;
        }

        @Override
        public long submit(IoOps ops) {
            throw new UnsupportedOperationException("RDMA channels post work requests themselves");
        }

        @Override
        public boolean isValid() {
            return valid;
        }

        /** Stops dispatching to the handle; its QP must be gone (no completion can name it any more). */
        @Override
        public boolean cancel() {
            if (!valid) {
                return false;
            }
            valid = false;
            registrations.remove(id);
            unbindSharedReceives();
            for (int i = 0; i < devices.size(); i++) {
                devices.get(i).users.remove(handle);
            }
            for (int i = 0; i < deadQueues.size(); i++) {
                deadQueues.get(i).users.remove(handle);
            }
            return true;
        }
    }

    RdmaIoHandlerConfig config() {
        return config;
    }

    /**
     * A completion queue of this handler on a device (one, or more where connections outgrew one), its completion
     * channel, and the device's shared protection domain.
     */
    static final class DeviceQueues {
        final RdmaIoHandler handler;
        final Device device;
        final ProtectionDomain pd;
        final CompletionChannel channel;
        final CompletionQueue cq;
        final int capacity;
        /**
         * Whether a receive of a solicited message raises a solicited event here, so that the queue may be armed for
         * those only ({@link SolicitedWakeups}): not on iWARP, where soft-iWARP raises none for any receive (its
         * loops armed that way slept through every message until their tick, measured in the VM).
         */
        final boolean solicitedEvents;
        int reserved;
        /** The channels that asked for these queues (their QPs may use the CQ): the ones to fail if it fails. */
        final Set<RdmaIoHandle> users = Collections.newSetFromMap(new IdentityHashMap<>());
        /** The completion queue failed: no new QP is created on it, and it is closed once the last is gone. */
        boolean dead;
        /** Shared receive pools whose receives complete on this queue (one per receive buffer size and allocator). */
        final List<ReceivePool> receivePools = new ArrayList<>(1);
        /** Pools whose queue failed ({@link #retireFailedReceivePools}): closed once no connection reserves receives. */
        final List<ReceivePool> failedPools = new ArrayList<>(0);

        DeviceQueues(RdmaIoHandler handler, Device device, ProtectionDomain pd, CompletionChannel channel,
                     CompletionQueue cq, int capacity) {
            this.handler = handler;
            this.device = device;
            this.pd = pd;
            this.channel = channel;
            this.cq = cq;
            this.capacity = capacity;
            this.solicitedEvents = device.attributes().transport() != DeviceAttributes.Transport.IWARP;
        }

        DeviceQueues usedBy(RdmaIoHandle handle) {
            if (handle != null) {
                users.add(handle);
            }
            return this;
        }

        void release(int entries) {
            reserved -= entries;
            if (dead && reserved == 0) {
                handler.closeDeadQueues();
            }
        }
    }
}
