/*
 * RDMA CM: event channels (non-blocking), ids, address and route resolution, the id's RC queue pair,
 * connect/accept/reject/disconnect, migration, and events copied out and acknowledged at once.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include "netty_rdma.h"
#include "netty_rdma_layout.h"

static int rc_of(int rc) {
    return rc == 0 ? 0 : netty_rdma_errno();
}

/* CmEventType ordinal of an RDMA CM event type, or -1 for events the SPI does not report. */
static int event_type(enum rdma_cm_event_type type) {
    switch (type) {
        case RDMA_CM_EVENT_ADDR_RESOLVED: return 0;
        case RDMA_CM_EVENT_ADDR_ERROR: return 1;
        case RDMA_CM_EVENT_ROUTE_RESOLVED: return 2;
        case RDMA_CM_EVENT_ROUTE_ERROR: return 3;
        case RDMA_CM_EVENT_CONNECT_REQUEST: return 4;
        case RDMA_CM_EVENT_CONNECT_RESPONSE: return 5;
        case RDMA_CM_EVENT_CONNECT_ERROR: return 6;
        case RDMA_CM_EVENT_UNREACHABLE: return 7;
        case RDMA_CM_EVENT_REJECTED: return 8;
        case RDMA_CM_EVENT_ESTABLISHED: return 9;
        case RDMA_CM_EVENT_DISCONNECTED: return 10;
        case RDMA_CM_EVENT_DEVICE_REMOVAL: return 11;
        case RDMA_CM_EVENT_TIMEWAIT_EXIT: return 12;
        default: return -1;
    }
}

/* A sockaddr from Java's address bytes (4 or 16), port and IPv6 scope id; 0 or -EINVAL. */
static int to_sockaddr(JNIEnv *env, jbyteArray address, jint port, jint scope, struct sockaddr_storage *out) {
    memset(out, 0, sizeof(*out));
    jsize n = (*env)->GetArrayLength(env, address);
    if (n == 4) {
        struct sockaddr_in *in = (struct sockaddr_in *) out;
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t) port);
        (*env)->GetByteArrayRegion(env, address, 0, 4, (jbyte *) &in->sin_addr);
        return 0;
    }
    if (n == 16) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) out;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t) port);
        in6->sin6_scope_id = (uint32_t) scope;
        (*env)->GetByteArrayRegion(env, address, 0, 16, (jbyte *) &in6->sin6_addr);
        return 0;
    }
    return -EINVAL;
}

/* ---- event channels ----------------------------------------------------------------------------------------- */

static jlong netty_rdma_createEventChannel(JNIEnv *env, jclass clazz) {
    (void) env;
    (void) clazz;
    errno = 0;
    struct rdma_event_channel *channel = rdma_create_event_channel();
    if (channel == NULL) {
        return netty_rdma_errno();
    }
    int flags = fcntl(channel->fd, F_GETFL);
    if (flags < 0 || fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        int err = netty_rdma_errno();
        rdma_destroy_event_channel(channel);
        return err;
    }
    return NETTY_RDMA_TO_HANDLE(channel);
}

static jint netty_rdma_eventChannelFd(JNIEnv *env, jclass clazz, jlong channel) {
    (void) env;
    (void) clazz;
    return NETTY_RDMA_HANDLE(struct rdma_event_channel, channel)->fd;
}

static void netty_rdma_destroyEventChannel(JNIEnv *env, jclass clazz, jlong channel) {
    (void) env;
    (void) clazz;
    rdma_destroy_event_channel(NETTY_RDMA_HANDLE(struct rdma_event_channel, channel));
}

/*
 * rdma_get_cm_event, non-blocking: copies the next event the SPI reports into the buffer at address, acknowledges
 * it, and returns 1; 0 if there is none; -errno.
 */
static jint netty_rdma_getCmEvent(JNIEnv *env, jclass clazz, jlong channel, jlong address) {
    (void) env;
    (void) clazz;
    uint8_t *out = NETTY_RDMA_HANDLE(uint8_t, address);
    for (;;) {
        struct rdma_cm_event *event;
        if (rdma_get_cm_event(NETTY_RDMA_HANDLE(struct rdma_event_channel, channel), &event) != 0) {
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : netty_rdma_errno();
        }
        int type = event_type(event->event);
        if (type >= 0) {
            uint32_t length = event->param.conn.private_data == NULL ? 0 : event->param.conn.private_data_len;
            if (length > EVENT_MAX_DATA) {
                length = EVENT_MAX_DATA;
            }
            netty_rdma_store32(out + EVENT_OFFSET_TYPE, (uint32_t) type);
            netty_rdma_store32(out + EVENT_OFFSET_STATUS, (uint32_t) event->status);
            netty_rdma_store64(out + EVENT_OFFSET_ID, (uint64_t) (uintptr_t) event->id);
            netty_rdma_store64(out + EVENT_OFFSET_LISTEN_ID, (uint64_t) (uintptr_t) event->listen_id);
            netty_rdma_store32(out + EVENT_OFFSET_DATA_LENGTH, length);
            if (length > 0) {
                memcpy(out + EVENT_OFFSET_DATA, event->param.conn.private_data, length);
            }
        }
        rdma_ack_cm_event(event);
        if (type >= 0) {
            return 1;
        }
    }
}

/* ---- ids ---------------------------------------------------------------------------------------------------- */

static jlong netty_rdma_createId(JNIEnv *env, jclass clazz, jlong channel) {
    (void) env;
    (void) clazz;
    struct rdma_cm_id *id;
    errno = 0;
    if (rdma_create_id(NETTY_RDMA_HANDLE(struct rdma_event_channel, channel), &id, NULL, RDMA_PS_TCP) != 0) {
        return netty_rdma_errno();
    }
    return NETTY_RDMA_TO_HANDLE(id);
}

static jint netty_rdma_destroyId(JNIEnv *env, jclass clazz, jlong id) {
    (void) env;
    (void) clazz;
    errno = 0;
    return rc_of(rdma_destroy_id(NETTY_RDMA_HANDLE(struct rdma_cm_id, id)));
}

static jint netty_rdma_bindAddr(JNIEnv *env, jclass clazz, jlong id, jbyteArray address, jint port, jint scope) {
    (void) clazz;
    struct sockaddr_storage addr;
    if (to_sockaddr(env, address, port, scope, &addr) != 0) {
        return -EINVAL;
    }
    errno = 0;
    return rc_of(rdma_bind_addr(NETTY_RDMA_HANDLE(struct rdma_cm_id, id), (struct sockaddr *) &addr));
}

static jint netty_rdma_listen(JNIEnv *env, jclass clazz, jlong id, jint backlog) {
    (void) env;
    (void) clazz;
    errno = 0;
    return rc_of(rdma_listen(NETTY_RDMA_HANDLE(struct rdma_cm_id, id), backlog));
}

static jint netty_rdma_resolveAddr(JNIEnv *env, jclass clazz, jlong id, jbyteArray src, jint src_port,
                                   jint src_scope, jbyteArray dst, jint dst_port, jint dst_scope, jint timeout_ms) {
    (void) clazz;
    struct sockaddr_storage source;
    struct sockaddr_storage destination;
    if ((src != NULL && to_sockaddr(env, src, src_port, src_scope, &source) != 0)
        || to_sockaddr(env, dst, dst_port, dst_scope, &destination) != 0) {
        return -EINVAL;
    }
    errno = 0;
    return rc_of(rdma_resolve_addr(NETTY_RDMA_HANDLE(struct rdma_cm_id, id),
                                   src == NULL ? NULL : (struct sockaddr *) &source,
                                   (struct sockaddr *) &destination, timeout_ms));
}

static jint netty_rdma_resolveRoute(JNIEnv *env, jclass clazz, jlong id, jint timeout_ms) {
    (void) env;
    (void) clazz;
    errno = 0;
    return rc_of(rdma_resolve_route(NETTY_RDMA_HANDLE(struct rdma_cm_id, id), timeout_ms));
}

/* The id's device context (ibv_context), or 0 while it has none. */
static jlong netty_rdma_idVerbs(JNIEnv *env, jclass clazz, jlong id) {
    (void) env;
    (void) clazz;
    return NETTY_RDMA_TO_HANDLE(NETTY_RDMA_HANDLE(struct rdma_cm_id, id)->verbs);
}

/* The local or peer address into out (ADDRESS_BYTES); returns 4 or 6 (the IP version) or 0 if there is none. */
static jint netty_rdma_idAddress(JNIEnv *env, jclass clazz, jlong handle, jboolean local, jbyteArray out) {
    (void) clazz;
    struct rdma_cm_id *id = NETTY_RDMA_HANDLE(struct rdma_cm_id, handle);
    struct sockaddr *addr = local ? rdma_get_local_addr(id) : rdma_get_peer_addr(id);
    uint8_t bytes[ADDRESS_BYTES];
    memset(bytes, 0, sizeof(bytes));
    jint version;
    if (addr->sa_family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *) addr;
        memcpy(bytes, &in->sin_port, 2);
        memcpy(bytes + 2, &in->sin_addr, 4);
        version = 4;
    } else if (addr->sa_family == AF_INET6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) addr;
        uint32_t scope = in6->sin6_scope_id;
        memcpy(bytes, &in6->sin6_port, 2);
        memcpy(bytes + 2, &in6->sin6_addr, 16);
        memcpy(bytes + 18, &scope, 4);
        version = 6;
    } else {
        return 0;
    }
    (*env)->SetByteArrayRegion(env, out, 0, ADDRESS_BYTES, (const jbyte *) bytes);
    return version;
}

static jint netty_rdma_migrateId(JNIEnv *env, jclass clazz, jlong id, jlong channel) {
    (void) env;
    (void) clazz;
    errno = 0;
    return rc_of(rdma_migrate_id(NETTY_RDMA_HANDLE(struct rdma_cm_id, id),
                                 NETTY_RDMA_HANDLE(struct rdma_event_channel, channel)));
}

/* ---- the id's queue pair ------------------------------------------------------------------------------------ */

/*
 * rdma_create_qp of an RC QP: the QP handle, or -errno; caps receives what the device granted. With a shared receive
 * queue (srq != 0) the QP has no receive queue of its own: max_recv_wr and max_recv_sge are not used.
 */
static jlong netty_rdma_createQp(JNIEnv *env, jclass clazz, jlong id_handle, jlong pd, jlong send_cq, jlong recv_cq,
                                 jlong srq, jint max_send_wr, jint max_recv_wr, jint max_send_sge, jint max_recv_sge,
                                 jint max_inline, jboolean signal_all, jintArray caps) {
    (void) clazz;
    struct rdma_cm_id *id = NETTY_RDMA_HANDLE(struct rdma_cm_id, id_handle);
    struct netty_rdma_qp *q = calloc(1, sizeof(*q));
    if (q == NULL) {
        return -ENOMEM;
    }
    struct ibv_qp_init_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.send_cq = NETTY_RDMA_HANDLE(struct netty_rdma_cq, send_cq)->cq;
    attr.recv_cq = NETTY_RDMA_HANDLE(struct netty_rdma_cq, recv_cq)->cq;
    attr.qp_context = q; /* for the asynchronous events */
    attr.qp_type = IBV_QPT_RC;
    attr.sq_sig_all = signal_all ? 1 : 0;
    attr.cap.max_send_wr = (uint32_t) max_send_wr;
    attr.cap.max_recv_wr = srq != 0 ? 0 : (uint32_t) max_recv_wr;
    attr.cap.max_send_sge = (uint32_t) max_send_sge;
    attr.cap.max_recv_sge = srq != 0 ? 0 : (uint32_t) max_recv_sge;
    attr.srq = srq != 0 ? NETTY_RDMA_HANDLE(struct netty_rdma_srq, srq)->srq : NULL;
    attr.cap.max_inline_data = (uint32_t) max_inline;
    errno = 0;
    if (rdma_create_qp(id, NETTY_RDMA_HANDLE(struct ibv_pd, pd), &attr) != 0) {
        int err = netty_rdma_errno();
        free(q);
        return err;
    }
    q->qp = id->qp;
    q->id = id;
    q->max_send_sge = attr.cap.max_send_sge;
    q->max_recv_sge = srq != 0 ? 0 : attr.cap.max_recv_sge;
    q->has_srq = srq != 0;
    q->max_inline = attr.cap.max_inline_data;
    q->no_imm = id->verbs->device->transport_type == IBV_TRANSPORT_IWARP;
    jint granted[CAP_COUNT];
    granted[CAP_MAX_SEND_WR] = (jint) attr.cap.max_send_wr;
    granted[CAP_MAX_RECV_WR] = srq != 0 ? 0 : (jint) attr.cap.max_recv_wr;
    granted[CAP_MAX_SEND_SGE] = (jint) attr.cap.max_send_sge;
    granted[CAP_MAX_RECV_SGE] = srq != 0 ? 0 : (jint) attr.cap.max_recv_sge;
    granted[CAP_MAX_INLINE] = (jint) attr.cap.max_inline_data;
    granted[CAP_QP_NUM] = (jint) id->qp->qp_num;
    (*env)->SetIntArrayRegion(env, caps, 0, CAP_COUNT, granted);
    return NETTY_RDMA_TO_HANDLE(q);
}

static void netty_rdma_destroyQp(JNIEnv *env, jclass clazz, jlong handle) {
    (void) env;
    (void) clazz;
    struct netty_rdma_qp *q = NETTY_RDMA_HANDLE(struct netty_rdma_qp, handle);
    rdma_destroy_qp(q->id);
    free(q);
}

/* ---- connections -------------------------------------------------------------------------------------------- */

struct private_data {
    uint8_t bytes[256];
    uint8_t length;
};

static int copy_private_data(JNIEnv *env, jbyteArray data, struct private_data *out) {
    out->length = 0;
    if (data == NULL) {
        return 0;
    }
    jsize n = (*env)->GetArrayLength(env, data);
    if (n > 255) {
        return -EINVAL;
    }
    (*env)->GetByteArrayRegion(env, data, 0, n, (jbyte *) out->bytes);
    out->length = (uint8_t) n;
    return 0;
}

static void conn_param(struct rdma_conn_param *param, const struct private_data *data, jint responder_resources,
                       jint initiator_depth, jint retry_count, jint rnr_retry_count) {
    memset(param, 0, sizeof(*param));
    param->private_data = data->length > 0 ? data->bytes : NULL;
    param->private_data_len = data->length;
    param->responder_resources = (uint8_t) responder_resources;
    param->initiator_depth = (uint8_t) initiator_depth;
    param->flow_control = 1;
    param->retry_count = (uint8_t) retry_count;
    param->rnr_retry_count = (uint8_t) rnr_retry_count;
}

/* rdma_connect or rdma_accept (same parameters) with the handshake in the private data. */
static jint establish(JNIEnv *env, jlong id, jbyteArray data, jint responder_resources, jint initiator_depth,
                      jint retry_count, jint rnr_retry_count,
                      int (*verb)(struct rdma_cm_id *, struct rdma_conn_param *)) {
    struct private_data pdata;
    struct rdma_conn_param param;
    if (copy_private_data(env, data, &pdata) != 0) {
        return -EINVAL;
    }
    conn_param(&param, &pdata, responder_resources, initiator_depth, retry_count, rnr_retry_count);
    errno = 0;
    return rc_of(verb(NETTY_RDMA_HANDLE(struct rdma_cm_id, id), &param));
}

static jint netty_rdma_connect(JNIEnv *env, jclass clazz, jlong id, jbyteArray data, jint responder_resources,
                               jint initiator_depth, jint retry_count, jint rnr_retry_count) {
    (void) clazz;
    return establish(env, id, data, responder_resources, initiator_depth, retry_count, rnr_retry_count,
                     rdma_connect);
}

static jint netty_rdma_accept(JNIEnv *env, jclass clazz, jlong id, jbyteArray data, jint responder_resources,
                              jint initiator_depth, jint retry_count, jint rnr_retry_count) {
    (void) clazz;
    return establish(env, id, data, responder_resources, initiator_depth, retry_count, rnr_retry_count,
                     rdma_accept);
}

static jint netty_rdma_reject(JNIEnv *env, jclass clazz, jlong id, jbyteArray data) {
    (void) clazz;
    struct private_data pdata;
    if (copy_private_data(env, data, &pdata) != 0) {
        return -EINVAL;
    }
    errno = 0;
    return rc_of(rdma_reject(NETTY_RDMA_HANDLE(struct rdma_cm_id, id), pdata.length > 0 ? pdata.bytes : NULL,
                             pdata.length));
}

static jint netty_rdma_disconnect(JNIEnv *env, jclass clazz, jlong id) {
    (void) env;
    (void) clazz;
    errno = 0;
    return rc_of(rdma_disconnect(NETTY_RDMA_HANDLE(struct rdma_cm_id, id)));
}

/*
 * soft-iWARP connects its TCP socket inside rdma_connect, blocking until the peer answers or TCP gives up (minutes):
 * Java makes that call on a thread of its own, and ends it early, when the id is closed, with a signal whose handler
 * does nothing and lacks SA_RESTART, so that the kernel's wait for the connection returns EINTR. The signal is a
 * real-time one nobody else handles; installed once, on first need.
 */
static int interrupt_signal;
static pthread_mutex_t interrupt_lock = PTHREAD_MUTEX_INITIALIZER;

static void on_interrupt_signal(int sig) {
    (void) sig;
}

/* The signal number, or -EBUSY if every candidate has a handler already. */
static jint netty_rdma_installInterruptSignal(JNIEnv *env, jclass clazz) {
    (void) env;
    (void) clazz;
    pthread_mutex_lock(&interrupt_lock);
    for (int sig = SIGRTMAX - 1; interrupt_signal == 0 && sig >= SIGRTMIN + 2; sig--) {
        struct sigaction old;
        if (sigaction(sig, NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) {
            continue;
        }
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_interrupt_signal;
        sigemptyset(&sa.sa_mask);
        if (sigaction(sig, &sa, NULL) == 0) {
            interrupt_signal = sig;
        }
    }
    jint result = interrupt_signal != 0 ? interrupt_signal : -EBUSY;
    pthread_mutex_unlock(&interrupt_lock);
    return result;
}

/* The calling thread, with the interrupt signal unblocked, for interruptThread. */
static jlong netty_rdma_interruptibleThread(JNIEnv *env, jclass clazz) {
    (void) env;
    (void) clazz;
    if (interrupt_signal != 0) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, interrupt_signal);
        pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    }
    return (jlong) pthread_self();
}

/* Sends the interrupt signal to a live thread of interruptibleThread; 0 or -errno. */
static jint netty_rdma_interruptThread(JNIEnv *env, jclass clazz, jlong thread) {
    (void) env;
    (void) clazz;
    if (interrupt_signal == 0) {
        return -ENOSYS;
    }
    return -pthread_kill((pthread_t) thread, interrupt_signal);
}

static const JNINativeMethod methods[] = {
    {"createEventChannel", "()J", (void *) netty_rdma_createEventChannel},
    {"eventChannelFd", "(J)I", (void *) netty_rdma_eventChannelFd},
    {"destroyEventChannel", "(J)V", (void *) netty_rdma_destroyEventChannel},
    {"getCmEvent", "(JJ)I", (void *) netty_rdma_getCmEvent},
    {"createId", "(J)J", (void *) netty_rdma_createId},
    {"destroyId", "(J)I", (void *) netty_rdma_destroyId},
    {"bindAddr", "(J[BII)I", (void *) netty_rdma_bindAddr},
    {"listen", "(JI)I", (void *) netty_rdma_listen},
    {"resolveAddr", "(J[BII[BIII)I", (void *) netty_rdma_resolveAddr},
    {"resolveRoute", "(JI)I", (void *) netty_rdma_resolveRoute},
    {"idVerbs", "(J)J", (void *) netty_rdma_idVerbs},
    {"idAddress", "(JZ[B)I", (void *) netty_rdma_idAddress},
    {"migrateId", "(JJ)I", (void *) netty_rdma_migrateId},
    {"createQp", "(JJJJJIIIIIZ[I)J", (void *) netty_rdma_createQp},
    {"destroyQp", "(J)V", (void *) netty_rdma_destroyQp},
    {"connect", "(J[BIIII)I", (void *) netty_rdma_connect},
    {"accept", "(J[BIIII)I", (void *) netty_rdma_accept},
    {"reject", "(J[B)I", (void *) netty_rdma_reject},
    {"disconnect", "(J)I", (void *) netty_rdma_disconnect},
    {"installInterruptSignal", "()I", (void *) netty_rdma_installInterruptSignal},
    {"interruptibleThread", "()J", (void *) netty_rdma_interruptibleThread},
    {"interruptThread", "(J)I", (void *) netty_rdma_interruptThread},
};

jint netty_rdma_cm_register(JNIEnv *env, jclass clazz) {
    return (*env)->RegisterNatives(env, clazz, methods, NETTY_RDMA_ARRAY_LENGTH(methods)) == 0 ? JNI_OK : JNI_ERR;
}
