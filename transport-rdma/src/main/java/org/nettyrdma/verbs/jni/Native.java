package org.nettyrdma.verbs.jni;

import io.netty.util.internal.NativeLibraryLoader;
import io.netty.util.internal.PlatformDependent;
import org.nettyrdma.verbs.VerbsException;

import java.nio.ByteBuffer;

/**
 * The natives of the C library {@code netty_rdma} (transport-rdma/src/main/c), registered from its
 * {@code JNI_OnLoad}. The library is loaded from the jar's {@code META-INF/native/} by Netty's
 * {@link NativeLibraryLoader}, so it needs no JVM flag and no {@code java.library.path}.
 *
 * <p>Handles are C pointers passed as {@code long}. The data path ({@link #postSend}, {@link #postRecv},
 * {@link #pollCq}, {@link #reqNotifyCq}) returns {@code -errno} and never throws. Functions that create something
 * return its handle, or {@code -errno}; the few that return arrays or strings throw
 * {@link VerbsException}. Callers check that an object is open before passing its handle: C
 * trusts every handle it gets.
 */
final class Native {
    /** The library's name as {@link NativeLibraryLoader} resolves it: {@code META-INF/native/lib<name>.so}. */
    static final String LIBRARY_NAME = "netty_rdma_" + PlatformDependent.normalizedArch();

    private static final Throwable LOAD_FAILURE;

    static {
        Throwable failure = null;
        try {
            NativeLibraryLoader.load(LIBRARY_NAME, Native.class.getClassLoader());
            // reads C's layouts (JniLayout's constants) and compares the descriptor slots with Java's
            failure = JniLayout.mismatch();
        } catch (Throwable t) {
            failure = t;
        }
        LOAD_FAILURE = failure;
    }

    private Native() {
    }

    /**
     * Why the library could not be loaded, or {@code null} if it is loaded. A library whose layouts differ from these
     * classes' ({@link JniLayout.Mismatch}) counts as not loaded: none of its other natives is called.
     */
    static Throwable loadFailure() {
        return LOAD_FAILURE;
    }

    /** The index of the first work request not posted, from a post's packed result. */
    static int badIndex(long postResult) {
        return (int) (postResult >> 32);
    }

    /** The {@code -errno} of a post's packed result (0 on success). */
    static int errno(long postResult) {
        return (int) postResult;
    }

    // ---- probe (netty_rdma_verbs.c)

    /** {@code ibv_get_device_list}'s count, or -errno (ENOSYS: the kernel has no RDMA support). */
    static native int deviceCount();

    /** The soft RLIMIT_MEMLOCK in bytes ({@link Long#MAX_VALUE}: unlimited), or -errno. */
    static native long memlockLimit();

    static native long directBufferAddress(ByteBuffer buffer);

    // ---- devices

    /** {@code rdma_get_devices}: [list, context...]; the list keeps the contexts open until {@link #freeDevices}. */
    static native long[] getDevices() throws VerbsException;

    static native void freeDevices(long list);

    static native String deviceName(long context);

    static native void queryDevice(long context, long[] attributes) throws VerbsException;

    static native int asyncWatch(int epfd, long context);

    static native int asyncDrain(int epfd, int timeoutMs);

    // ---- protection domains, memory regions

    static native long allocPd(long context);

    static native int deallocPd(long pd);

    static native long regMr(long pd, long address, long length, int access);

    static native int mrLkey(long mr);

    static native int mrRkey(long mr);

    static native int deregMr(long mr);

    // ---- memory windows

    /** {@code ibv_alloc_mw} of a type-2 window: its handle, or -errno. */
    static native long allocMw(long pd);

    static native int mwRkey(long mw);

    static native int deallocMw(long mw);

    // ---- completion channels, completion queues

    static native long createCompChannel(long context);

    static native int compChannelFd(long channel);

    static native int destroyCompChannel(long channel);

    static native long createCq(long context, int cqe, long channel);

    static native int cqCapacity(long cq);

    /** The CQ's library passes the kernel's completion flags through unchanged (rxe): see netty_rdma.h. */
    static native void cqKernelWcFlags(long cq);

    static native int destroyCq(long cq);

    /** The CQ handle of the next completion event, 0 if there is none, or -errno. */
    static native long getCqEvent(long channel);

    static native void ackCqEvents(long cq, int n);

    static native int reqNotifyCq(long cq, boolean solicitedOnly);

    static native int pollCq(long cq, long completionsAddress, int max);

    // ---- queue pairs

    /** The state as a {@code QueuePair.QpState} ordinal, or -errno. */
    static native int qpState(long qp);

    static native int modifyQpError(long qp);

    /**
     * 0, or the packed (bad index, -errno): see {@link #badIndex(long)} and {@link #errno(long)}. {@code bindHandles}:
     * the address of (window, region) handle pairs, one per work request of the call (used for BIND_MW only), or 0.
     */
    static native long postSend(long qp, long address, int slotSize, int offset, int count, int noInlineIndex,
                                long bindHandles);

    static native long postRecv(long qp, long address, int slotSize, int offset, int count);

    // ---- shared receive queues

    /** {@code ibv_create_srq} with the limit disarmed: its handle, or -errno. */
    static native long createSrq(long pd, int maxWr, int maxSge);

    /** The receives the queue holds, as granted. */
    static native int srqCapacity(long srq);

    static native int srqMaxSge(long srq);

    /** How many {@code IBV_EVENT_SRQ_LIMIT_REACHED} events the asynchronous events' thread counted. */
    static native long srqLimitEvents(long srq);

    /** Whether the asynchronous events' thread saw {@code IBV_EVENT_SRQ_ERR} for it. */
    static native boolean srqFailed(long srq);

    /** {@code ibv_modify_srq(IBV_SRQ_LIMIT)}: 0 or -errno. */
    static native int modifySrqLimit(long srq, int limit);

    /** {@code ibv_post_srq_recv}; as {@link #postRecv}. */
    static native long postSrqRecv(long srq, long address, int slotSize, int offset, int count);

    /** {@code ibv_destroy_srq}: 0 (the handle is freed), or -errno (it stays). */
    static native int destroySrq(long srq);

    // ---- RDMA CM (netty_rdma_cm.c)

    static native long createEventChannel();

    static native int eventChannelFd(long channel);

    static native void destroyEventChannel(long channel);

    /** 1 if an event was written at {@code address} (see JniLayout.EVENT_*), 0 if there is none, -errno. */
    static native int getCmEvent(long channel, long address);

    static native long createId(long channel);

    static native int destroyId(long id);

    static native int bindAddr(long id, byte[] address, int port, int scopeId);

    static native int listen(long id, int backlog);

    static native int resolveAddr(long id, byte[] source, int sourcePort, int sourceScopeId, byte[] destination,
                                  int destinationPort, int destinationScopeId, int timeoutMs);

    static native int resolveRoute(long id, int timeoutMs);

    static native long idVerbs(long id);

    /** 4 or 6 with the address in {@code out} (JniLayout.ADDRESS_BYTES), or 0 if the id has none. */
    static native int idAddress(long id, boolean local, byte[] out);

    static native int migrateId(long id, long channel);

    /** {@code srq}: the handle of the QP's shared receive queue, or 0 for a receive queue of its own. */
    static native long createQp(long id, long pd, long sendCq, long recvCq, long srq, int maxSendWr, int maxRecvWr,
                                int maxSendSge, int maxRecvSge, int maxInlineData, boolean signalAll, int[] caps);

    static native void destroyQp(long qp);

    static native int connect(long id, byte[] privateData, int responderResources, int initiatorDepth,
                              int retryCount, int rnrRetryCount);

    static native int accept(long id, byte[] privateData, int responderResources, int initiatorDepth,
                             int retryCount, int rnrRetryCount);

    static native int reject(long id, byte[] privateData);

    static native int disconnect(long id);

    /** Installs the handler of the signal that ends a blocking rdma_connect early: its number, or -EBUSY. */
    static native int installInterruptSignal();

    /** The calling thread (pthread_t), with that signal unblocked. */
    static native long interruptibleThread();

    /** Sends that signal to a thread of {@link #interruptibleThread()} that is still alive: 0 or -errno. */
    static native int interruptThread(long thread);

    // ---- epoll, eventfd (netty_rdma_epoll.c)

    static native int epollCreate();

    static native int eventfdCreate();

    static native int epollAdd(int epfd, int fd);

    static native int epollDel(int epfd, int fd);

    /** JniLayout.WAIT_TIMEOUT, _READY, _WOKEN (the eventfd fired and was drained), or -errno. */
    static native int epollWait(int epfd, int wakeFd, int timeoutMs);

    static native int eventfdWrite(int fd);

    static native int closeFd(int fd);

    // ---- layouts (netty_rdma_layout.h, netty_rdma_layout.c): read once, by JniLayout

    static native int wrOffsetWrId();

    static native int wrOffsetOpcode();

    static native int wrOffsetSendFlags();

    static native int wrOffsetNumSge();

    static native int wrOffsetImmData();

    static native int wrOffsetRemoteAddr();

    static native int wrOffsetRkey();

    static native int wrOffsetMwRkey();

    static native int wrOffsetSges();

    static native int sgeSize();

    static native int sgeOffsetAddr();

    static native int sgeOffsetLength();

    static native int sgeOffsetLkey();

    static native int wcSlotSize();

    static native int wcOffsetWrId();

    static native int wcOffsetStatus();

    static native int wcOffsetOpcode();

    static native int wcOffsetByteLen();

    static native int wcOffsetImmData();

    static native int wcOffsetQpNum();

    static native int wcOffsetWcFlags();

    static native int eventOffsetType();

    static native int eventOffsetStatus();

    static native int eventOffsetId();

    static native int eventOffsetListenId();

    static native int eventOffsetDataLength();

    static native int eventOffsetData();

    static native int eventMaxData();

    static native int addressBytes();

    static native int attrTransport();

    static native int attrMaxQp();

    static native int attrMaxQpWr();

    static native int attrMaxSge();

    static native int attrMaxCqe();

    static native int attrMaxMr();

    static native int attrMaxMrSize();

    static native int attrMaxQpRdAtom();

    static native int attrMaxInlineData();

    static native int attrVendorId();

    static native int attrMaxMw();

    static native int attrDeviceCapFlags();

    static native int attrMaxSrq();

    static native int attrMaxSrqWr();

    static native int attrMaxSrqSge();

    static native int attrCount();

    static native int capMaxSendWr();

    static native int capMaxRecvWr();

    static native int capMaxSendSge();

    static native int capMaxRecvSge();

    static native int capMaxInline();

    static native int capQpNum();

    static native int capCount();

    static native int waitTimeout();

    static native int waitReady();

    static native int waitWoken();
}
