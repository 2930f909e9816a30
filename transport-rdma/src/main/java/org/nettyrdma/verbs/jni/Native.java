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

    /** {@link #getCmEvent}'s output buffer. */
    static final int EVENT_OFFSET_TYPE = 0;
    static final int EVENT_OFFSET_STATUS = 4;
    static final int EVENT_OFFSET_ID = 8;
    static final int EVENT_OFFSET_LISTEN_ID = 16;
    static final int EVENT_OFFSET_DATA_LENGTH = 24;
    static final int EVENT_OFFSET_DATA = 32;
    static final int EVENT_MAX_DATA = 512;
    static final int EVENT_SIZE = EVENT_OFFSET_DATA + EVENT_MAX_DATA;

    /** {@link #idAddress}'s output: port (2 bytes, network order), address (4 or 16), IPv6 scope id (native int). */
    static final int ADDRESS_BYTES = 22;

    /** {@link #queryDevice}'s output, in this order. */
    static final int ATTR_TRANSPORT = 0;
    static final int ATTR_MAX_QP = 1;
    static final int ATTR_MAX_QP_WR = 2;
    static final int ATTR_MAX_SGE = 3;
    static final int ATTR_MAX_CQE = 4;
    static final int ATTR_MAX_MR = 5;
    static final int ATTR_MAX_MR_SIZE = 6;
    static final int ATTR_MAX_QP_RD_ATOM = 7;
    static final int ATTR_MAX_INLINE_DATA = 8;
    static final int ATTR_VENDOR_ID = 9;
    static final int ATTR_COUNT = 10;

    /** {@link #createQp}'s output, in this order. */
    static final int CAP_MAX_SEND_WR = 0;
    static final int CAP_MAX_RECV_WR = 1;
    static final int CAP_MAX_SEND_SGE = 2;
    static final int CAP_MAX_RECV_SGE = 3;
    static final int CAP_MAX_INLINE = 4;
    static final int CAP_QP_NUM = 5;
    static final int CAP_COUNT = 6;

    /** {@link #epollWait}'s results. */
    static final int WAIT_TIMEOUT = 0;
    static final int WAIT_READY = 1;
    static final int WAIT_WOKEN = 2;

    private static final Throwable LOAD_FAILURE;

    static {
        Throwable failure = null;
        try {
            NativeLibraryLoader.load(LIBRARY_NAME, Native.class.getClassLoader());
        } catch (Throwable t) {
            failure = t;
        }
        LOAD_FAILURE = failure;
    }

    private Native() {
    }

    /** Why the library could not be loaded, or {@code null} if it is loaded. */
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

    // ---- completion channels, completion queues

    static native long createCompChannel(long context);

    static native int compChannelFd(long channel);

    static native int destroyCompChannel(long channel);

    static native long createCq(long context, int cqe, long channel);

    static native int cqCapacity(long cq);

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

    /** 0, or the packed (bad index, -errno): see {@link #badIndex(long)} and {@link #errno(long)}. */
    static native long postSend(long qp, long address, int slotSize, int offset, int count, int noInlineIndex);

    static native long postRecv(long qp, long address, int slotSize, int offset, int count);

    // ---- RDMA CM (netty_rdma_cm.c)

    static native long createEventChannel();

    static native int eventChannelFd(long channel);

    static native void destroyEventChannel(long channel);

    /** 1 if an event was written at {@code address} (see EVENT_OFFSET_*), 0 if there is none, -errno. */
    static native int getCmEvent(long channel, long address);

    static native long createId(long channel);

    static native int destroyId(long id);

    static native int bindAddr(long id, byte[] address, int port, int scopeId);

    static native int listen(long id, int backlog);

    static native int resolveAddr(long id, byte[] source, int sourcePort, int sourceScopeId, byte[] destination,
                                  int destinationPort, int destinationScopeId, int timeoutMs);

    static native int resolveRoute(long id, int timeoutMs);

    static native long idVerbs(long id);

    /** 4 or 6 with the address in {@code out} (ADDRESS_BYTES), or 0 if the id has none. */
    static native int idAddress(long id, boolean local, byte[] out);

    static native int migrateId(long id, long channel);

    static native long createQp(long id, long pd, long sendCq, long recvCq, int maxSendWr, int maxRecvWr,
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

    /** WAIT_TIMEOUT, WAIT_READY, WAIT_WOKEN (the eventfd fired and was drained), or -errno. */
    static native int epollWait(int epfd, int wakeFd, int timeoutMs);

    static native int eventfdWrite(int fd);

    static native int closeFd(int fd);
}
