/*
 * Verbs: devices, protection domains, memory regions, completion channels and queues, posting work request chains
 * from the off-heap descriptors (docs/descriptors.md), polling into the off-heap completion array, and the
 * asynchronous events (CQ overrun).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include "netty_rdma.h"
#include "netty_rdma_layout.h"

/* A posted chain is built on the stack, at most this many work requests and SGEs per ibv_post_send. */
#define POST_CHUNK_WRS 64
#define POST_CHUNK_SGES 512
#define POLL_CHUNK 32

/* SPI transport families (DeviceAttributes.Transport ordinals). */
#define TRANSPORT_INFINIBAND 0
#define TRANSPORT_ROCE 1
#define TRANSPORT_IWARP 2

/* Packs a post's result: 0, or the index of the first work request not posted and -errno. */
static jlong post_result(jint index, int err) {
    return ((jlong) index << 32) | (jlong) (uint32_t) err;
}

static int positive_errno(int rc) {
    /* providers return the errno positive (as documented) or negative (siw): normalise */
    return rc < 0 ? -rc : rc;
}

/* ---- probe ------------------------------------------------------------------------------------------------ */

static jint netty_rdma_deviceCount(JNIEnv *env, jclass clazz) {
    (void) env;
    (void) clazz;
    int n = 0;
    errno = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (list == NULL) {
        return netty_rdma_errno();
    }
    ibv_free_device_list(list);
    return n;
}

static jlong netty_rdma_memlockLimit(JNIEnv *env, jclass clazz) {
    (void) env;
    (void) clazz;
    struct rlimit limit;
    if (getrlimit(RLIMIT_MEMLOCK, &limit) != 0) {
        return netty_rdma_errno();
    }
    if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur > (rlim_t) INT64_MAX) {
        return INT64_MAX;
    }
    return (jlong) limit.rlim_cur;
}

static jlong netty_rdma_directBufferAddress(JNIEnv *env, jclass clazz, jobject buffer) {
    (void) clazz;
    return NETTY_RDMA_TO_HANDLE((*env)->GetDirectBufferAddress(env, buffer));
}

/* ---- devices ---------------------------------------------------------------------------------------------- */

/* [list handle, context...]: the list (rdma_get_devices) keeps the contexts alive until freeDevices. */
static jlongArray netty_rdma_getDevices(JNIEnv *env, jclass clazz) {
    (void) clazz;
    int n = 0;
    errno = 0;
    struct ibv_context **list = rdma_get_devices(&n);
    if (list == NULL) {
        netty_rdma_throw(env, "rdma_get_devices", -netty_rdma_errno(), NULL);
        return NULL;
    }
    jlongArray result = (*env)->NewLongArray(env, n + 1);
    if (result == NULL) {
        rdma_free_devices(list);
        return NULL;
    }
    jlong handles[n + 1];
    handles[0] = NETTY_RDMA_TO_HANDLE(list);
    for (int i = 0; i < n; i++) {
        handles[i + 1] = NETTY_RDMA_TO_HANDLE(list[i]);
    }
    (*env)->SetLongArrayRegion(env, result, 0, n + 1, handles);
    return result;
}

static void netty_rdma_freeDevices(JNIEnv *env, jclass clazz, jlong list) {
    (void) env;
    (void) clazz;
    rdma_free_devices(NETTY_RDMA_HANDLE(struct ibv_context *, list));
}

static jstring netty_rdma_deviceName(JNIEnv *env, jclass clazz, jlong context) {
    (void) clazz;
    struct ibv_context *ctx = NETTY_RDMA_HANDLE(struct ibv_context, context);
    return (*env)->NewStringUTF(env, ibv_get_device_name(ctx->device));
}

static int try_inline(struct ibv_pd *pd, struct ibv_cq *cq, uint32_t size) {
    struct ibv_qp_init_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.send_cq = cq;
    attr.recv_cq = cq;
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = 1;
    attr.cap.max_recv_wr = 1;
    attr.cap.max_send_sge = 1;
    attr.cap.max_recv_sge = 1;
    attr.cap.max_inline_data = size;
    struct ibv_qp *qp = ibv_create_qp(pd, &attr);
    if (qp == NULL) {
        return 0;
    }
    ibv_destroy_qp(qp);
    return 1;
}

/* ibv_query_device does not report the inline limit: the largest a QP can be created with (at most 4096). */
static int probe_max_inline(struct ibv_context *ctx) {
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    struct ibv_cq *cq = pd == NULL ? NULL : ibv_create_cq(ctx, 1, NULL, NULL, 0);
    uint32_t lo = 0;
    if (cq != NULL) {
        uint32_t hi = 4096;
        if (try_inline(pd, cq, hi)) {
            lo = hi;
        } else {
            while (hi - lo > 1) {
                uint32_t mid = lo + (hi - lo) / 2;
                if (try_inline(pd, cq, mid)) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
        }
        ibv_destroy_cq(cq);
    }
    if (pd != NULL) {
        ibv_dealloc_pd(pd);
    }
    return (int) lo;
}

static jint clamp_int(int64_t v) {
    return v > INT32_MAX ? INT32_MAX : (jint) v;
}

static void netty_rdma_queryDevice(JNIEnv *env, jclass clazz, jlong context, jlongArray out) {
    (void) clazz;
    struct ibv_context *ctx = NETTY_RDMA_HANDLE(struct ibv_context, context);
    struct ibv_device_attr attr;
    int rc = ibv_query_device(ctx, &attr);
    if (rc != 0) {
        netty_rdma_throw(env, "ibv_query_device", positive_errno(rc), ibv_get_device_name(ctx->device));
        return;
    }
    int transport = TRANSPORT_INFINIBAND;
    if (ctx->device->transport_type == IBV_TRANSPORT_IWARP) {
        transport = TRANSPORT_IWARP;
    } else {
        struct ibv_port_attr port;
        rc = ibv_query_port(ctx, 1, &port);
        if (rc != 0) {
            netty_rdma_throw(env, "ibv_query_port", positive_errno(rc), ibv_get_device_name(ctx->device));
            return;
        }
        if (port.link_layer == IBV_LINK_LAYER_ETHERNET) {
            transport = TRANSPORT_ROCE;
        }
    }
    jlong values[ATTR_COUNT];
    values[ATTR_TRANSPORT] = transport;
    values[ATTR_MAX_QP] = attr.max_qp;
    values[ATTR_MAX_QP_WR] = attr.max_qp_wr;
    values[ATTR_MAX_SGE] = attr.max_sge;
    values[ATTR_MAX_CQE] = attr.max_cqe;
    values[ATTR_MAX_MR] = attr.max_mr;
    values[ATTR_MAX_MR_SIZE] = attr.max_mr_size > (uint64_t) INT64_MAX ? INT64_MAX : (jlong) attr.max_mr_size;
    values[ATTR_MAX_QP_RD_ATOM] = clamp_int(attr.max_qp_rd_atom < attr.max_qp_init_rd_atom
                                            ? attr.max_qp_rd_atom : attr.max_qp_init_rd_atom);
    values[ATTR_MAX_INLINE_DATA] = probe_max_inline(ctx);
    values[ATTR_VENDOR_ID] = attr.vendor_id;
    values[ATTR_MAX_MW] = attr.max_mw;
    values[ATTR_DEVICE_CAP_FLAGS] = (jlong) attr.device_cap_flags;
    values[ATTR_MAX_SRQ] = attr.max_srq;
    values[ATTR_MAX_SRQ_WR] = attr.max_srq_wr;
    values[ATTR_MAX_SRQ_SGE] = attr.max_srq_sge;
    (*env)->SetLongArrayRegion(env, out, 0, ATTR_COUNT, values);
}

/* ---- asynchronous events ------------------------------------------------------------------------------------ */

/* Adds a device's async fd (made non-blocking) to epfd, for asyncDrain. */
static jint netty_rdma_asyncWatch(JNIEnv *env, jclass clazz, jint epfd, jlong context) {
    (void) env;
    (void) clazz;
    struct ibv_context *ctx = NETTY_RDMA_HANDLE(struct ibv_context, context);
    int flags = fcntl(ctx->async_fd, F_GETFL);
    if (flags < 0 || fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        return netty_rdma_errno();
    }
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    ev.data.ptr = ctx;
    return epoll_ctl(epfd, EPOLL_CTL_ADD, ctx->async_fd, &ev) == 0 ? 0 : netty_rdma_errno();
}

/*
 * Waits up to timeoutMs for asynchronous events of the watched devices, handles and acknowledges them: a CQ error
 * (overrun) marks the queue so that its polls answer -EOVERFLOW, a fatal QP event marks the QP as in ERROR. Every
 * event is acknowledged at once, so destroying a CQ or QP (which waits for that) never waits long, and the marked
 * structs are freed only after. Returns how many events were handled, or -errno.
 */
static jint netty_rdma_asyncDrain(JNIEnv *env, jclass clazz, jint epfd, jint timeout_ms) {
    (void) env;
    (void) clazz;
    struct epoll_event ready[8];
    int n = epoll_wait(epfd, ready, NETTY_RDMA_ARRAY_LENGTH(ready), timeout_ms);
    if (n < 0) {
        return errno == EINTR ? 0 : netty_rdma_errno();
    }
    int handled = 0;
    for (int i = 0; i < n; i++) {
        struct ibv_context *ctx = ready[i].data.ptr;
        struct ibv_async_event event;
        while (ibv_get_async_event(ctx, &event) == 0) {
            switch (event.event_type) {
                case IBV_EVENT_CQ_ERR:
                    if (event.element.cq->cq_context != NULL) {
                        struct netty_rdma_cq *cq = event.element.cq->cq_context;
                        __atomic_store_n(&cq->overrun, 1, __ATOMIC_RELEASE);
                    }
                    break;
                case IBV_EVENT_QP_FATAL:
                case IBV_EVENT_QP_REQ_ERR:
                case IBV_EVENT_QP_ACCESS_ERR:
                    if (event.element.qp->qp_context != NULL) {
                        struct netty_rdma_qp *q = event.element.qp->qp_context;
                        __atomic_store_n(&q->error, 1, __ATOMIC_RELEASE);
                    }
                    break;
                case IBV_EVENT_SRQ_LIMIT_REACHED:
                    if (event.element.srq->srq_context != NULL) {
                        struct netty_rdma_srq *s = event.element.srq->srq_context;
                        __atomic_add_fetch(&s->limit_events, 1, __ATOMIC_RELEASE);
                    }
                    break;
                case IBV_EVENT_SRQ_ERR:
                    if (event.element.srq->srq_context != NULL) {
                        struct netty_rdma_srq *s = event.element.srq->srq_context;
                        __atomic_store_n(&s->error, 1, __ATOMIC_RELEASE);
                    }
                    break;
                default:
                    break;
            }
            ibv_ack_async_event(&event);
            handled++;
        }
    }
    return handled;
}

/* ---- protection domains and memory regions ------------------------------------------------------------------ */

static jlong netty_rdma_allocPd(JNIEnv *env, jclass clazz, jlong context) {
    (void) env;
    (void) clazz;
    errno = 0;
    struct ibv_pd *pd = ibv_alloc_pd(NETTY_RDMA_HANDLE(struct ibv_context, context));
    return pd == NULL ? netty_rdma_errno() : NETTY_RDMA_TO_HANDLE(pd);
}

static jint netty_rdma_deallocPd(JNIEnv *env, jclass clazz, jlong pd) {
    (void) env;
    (void) clazz;
    return -positive_errno(ibv_dealloc_pd(NETTY_RDMA_HANDLE(struct ibv_pd, pd)));
}

static jlong netty_rdma_regMr(JNIEnv *env, jclass clazz, jlong pd, jlong address, jlong length, jint access) {
    (void) env;
    (void) clazz;
    errno = 0;
    struct ibv_mr *mr = ibv_reg_mr(NETTY_RDMA_HANDLE(struct ibv_pd, pd), NETTY_RDMA_HANDLE(void, address),
                                   (size_t) length, access);
    return mr == NULL ? netty_rdma_errno() : NETTY_RDMA_TO_HANDLE(mr);
}

static jint netty_rdma_mrLkey(JNIEnv *env, jclass clazz, jlong mr) {
    (void) env;
    (void) clazz;
    return (jint) NETTY_RDMA_HANDLE(struct ibv_mr, mr)->lkey;
}

static jint netty_rdma_mrRkey(JNIEnv *env, jclass clazz, jlong mr) {
    (void) env;
    (void) clazz;
    return (jint) NETTY_RDMA_HANDLE(struct ibv_mr, mr)->rkey;
}

static jint netty_rdma_deregMr(JNIEnv *env, jclass clazz, jlong mr) {
    (void) env;
    (void) clazz;
    return -positive_errno(ibv_dereg_mr(NETTY_RDMA_HANDLE(struct ibv_mr, mr)));
}

/* ---- memory windows ------------------------------------------------------------------------------------------ */

/* A type-2 window (bound by IBV_WR_BIND_MW through one QP): its handle, or -errno. */
static jlong netty_rdma_allocMw(JNIEnv *env, jclass clazz, jlong pd) {
    (void) env;
    (void) clazz;
    errno = 0;
    struct ibv_mw *mw = ibv_alloc_mw(NETTY_RDMA_HANDLE(struct ibv_pd, pd), IBV_MW_TYPE_2);
    return mw == NULL ? netty_rdma_errno() : NETTY_RDMA_TO_HANDLE(mw);
}

static jint netty_rdma_mwRkey(JNIEnv *env, jclass clazz, jlong mw) {
    (void) env;
    (void) clazz;
    return (jint) NETTY_RDMA_HANDLE(struct ibv_mw, mw)->rkey;
}

static jint netty_rdma_deallocMw(JNIEnv *env, jclass clazz, jlong mw) {
    (void) env;
    (void) clazz;
    return -positive_errno(ibv_dealloc_mw(NETTY_RDMA_HANDLE(struct ibv_mw, mw)));
}

/* ---- completion channels and queues ------------------------------------------------------------------------- */

static jlong netty_rdma_createCompChannel(JNIEnv *env, jclass clazz, jlong context) {
    (void) env;
    (void) clazz;
    errno = 0;
    struct ibv_comp_channel *channel = ibv_create_comp_channel(NETTY_RDMA_HANDLE(struct ibv_context, context));
    if (channel == NULL) {
        return netty_rdma_errno();
    }
    int flags = fcntl(channel->fd, F_GETFL);
    if (flags < 0 || fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        int err = netty_rdma_errno();
        ibv_destroy_comp_channel(channel);
        return err;
    }
    return NETTY_RDMA_TO_HANDLE(channel);
}

static jint netty_rdma_compChannelFd(JNIEnv *env, jclass clazz, jlong channel) {
    (void) env;
    (void) clazz;
    return NETTY_RDMA_HANDLE(struct ibv_comp_channel, channel)->fd;
}

static jint netty_rdma_destroyCompChannel(JNIEnv *env, jclass clazz, jlong channel) {
    (void) env;
    (void) clazz;
    return -positive_errno(ibv_destroy_comp_channel(NETTY_RDMA_HANDLE(struct ibv_comp_channel, channel)));
}

static jlong netty_rdma_createCq(JNIEnv *env, jclass clazz, jlong context, jint cqe, jlong channel) {
    (void) env;
    (void) clazz;
    struct netty_rdma_cq *cq = calloc(1, sizeof(*cq));
    if (cq == NULL) {
        return -ENOMEM;
    }
    errno = 0;
    cq->cq = ibv_create_cq(NETTY_RDMA_HANDLE(struct ibv_context, context), cqe, cq,
                           NETTY_RDMA_HANDLE(struct ibv_comp_channel, channel), 0);
    if (cq->cq == NULL) {
        int err = netty_rdma_errno();
        free(cq);
        return err;
    }
    return NETTY_RDMA_TO_HANDLE(cq);
}

static void netty_rdma_cqKernelWcFlags(JNIEnv *env, jclass clazz, jlong cq) {
    (void) env;
    (void) clazz;
    NETTY_RDMA_HANDLE(struct netty_rdma_cq, cq)->kernel_wc_flags = 1;
}

static jint netty_rdma_cqCapacity(JNIEnv *env, jclass clazz, jlong cq) {
    (void) env;
    (void) clazz;
    return NETTY_RDMA_HANDLE(struct netty_rdma_cq, cq)->cq->cqe;
}

static jint netty_rdma_destroyCq(JNIEnv *env, jclass clazz, jlong handle) {
    (void) env;
    (void) clazz;
    struct netty_rdma_cq *cq = NETTY_RDMA_HANDLE(struct netty_rdma_cq, handle);
    int rc = ibv_destroy_cq(cq->cq);
    if (rc != 0) {
        return -positive_errno(rc);
    }
    free(cq);
    return 0;
}

/* ibv_get_cq_event, non-blocking: the CQ handle, 0 if there is no event, or -errno. */
static jlong netty_rdma_getCqEvent(JNIEnv *env, jclass clazz, jlong channel) {
    (void) env;
    (void) clazz;
    struct ibv_cq *cq;
    void *context;
    if (ibv_get_cq_event(NETTY_RDMA_HANDLE(struct ibv_comp_channel, channel), &cq, &context) != 0) {
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : netty_rdma_errno();
    }
    return NETTY_RDMA_TO_HANDLE(context);
}

static void netty_rdma_ackCqEvents(JNIEnv *env, jclass clazz, jlong cq, jint n) {
    (void) env;
    (void) clazz;
    ibv_ack_cq_events(NETTY_RDMA_HANDLE(struct netty_rdma_cq, cq)->cq, (unsigned int) n);
}

static jint netty_rdma_reqNotifyCq(JNIEnv *env, jclass clazz, jlong cq, jboolean solicited_only) {
    (void) env;
    (void) clazz;
    return -positive_errno(ibv_req_notify_cq(NETTY_RDMA_HANDLE(struct netty_rdma_cq, cq)->cq, solicited_only));
}

/* ibv_poll_cq of at most max completions into the CompletionArray at wc_address: how many, or -errno. */
static jint netty_rdma_pollCq(JNIEnv *env, jclass clazz, jlong handle, jlong wc_address, jint max) {
    (void) env;
    (void) clazz;
    struct netty_rdma_cq *cq = NETTY_RDMA_HANDLE(struct netty_rdma_cq, handle);
    uint8_t *out = NETTY_RDMA_HANDLE(uint8_t, wc_address);
    if (__atomic_load_n(&cq->overrun, __ATOMIC_ACQUIRE)) {
        return -EOVERFLOW;
    }
    struct ibv_wc wc[POLL_CHUNK];
    jint total = 0;
    while (total < max) {
        int want = max - total < POLL_CHUNK ? max - total : POLL_CHUNK;
        int n = ibv_poll_cq(cq->cq, want, wc);
        if (n < 0) {
            return total > 0 ? total : -EIO;
        }
        for (int i = 0; i < n; i++) {
            uint8_t *slot = out + (size_t) (total + i) * WC_SLOT_SIZE;
            int imm = (wc[i].wc_flags & IBV_WC_WITH_IMM) != 0;
            int inv = (wc[i].wc_flags & IBV_WC_WITH_INV) != 0
                      || (cq->kernel_wc_flags && (wc[i].wc_flags & IBV_WC_IP_CSUM_OK) != 0
                          && (wc[i].opcode & IBV_WC_RECV) != 0);
            netty_rdma_store64(slot + WC_OFFSET_WR_ID, wc[i].wr_id);
            netty_rdma_store32(slot + WC_OFFSET_STATUS, wc[i].status);
            netty_rdma_store32(slot + WC_OFFSET_OPCODE, wc[i].opcode);
            netty_rdma_store32(slot + WC_OFFSET_BYTE_LEN, wc[i].byte_len);
            /* the union holds the immediate (big-endian on the wire) or the invalidated rkey (host order) */
            netty_rdma_store32(slot + WC_OFFSET_IMM_DATA,
                               imm ? ntohl(wc[i].imm_data) : inv ? wc[i].invalidated_rkey : 0);
            netty_rdma_store32(slot + WC_OFFSET_QP_NUM, wc[i].qp_num);
            netty_rdma_store32(slot + WC_OFFSET_WC_FLAGS, (imm ? IBV_WC_WITH_IMM : 0) | (inv ? IBV_WC_WITH_INV : 0));
        }
        total += n;
        if (n < want) {
            break;
        }
    }
    return total;
}

/* ---- queue pairs -------------------------------------------------------------------------------------------- */

/* The QP's state as a QueuePair.QpState ordinal (RESET, INIT, RTR, RTS, ERROR), or -errno. */
static jint netty_rdma_qpState(JNIEnv *env, jclass clazz, jlong handle) {
    (void) env;
    (void) clazz;
    struct netty_rdma_qp *q = NETTY_RDMA_HANDLE(struct netty_rdma_qp, handle);
    if (__atomic_load_n(&q->error, __ATOMIC_ACQUIRE)) {
        return 4;
    }
    struct ibv_qp_attr attr;
    struct ibv_qp_init_attr init;
    memset(&attr, 0, sizeof(attr));
    int rc = ibv_query_qp(q->qp, &attr, IBV_QP_STATE, &init);
    if (rc != 0) {
        return -positive_errno(rc);
    }
    switch (attr.qp_state) {
        case IBV_QPS_RESET: return 0;
        case IBV_QPS_INIT: return 1;
        case IBV_QPS_RTR: return 2;
        case IBV_QPS_RTS: return 3;
        default: return 4; /* SQD (an iWARP QP closing), SQE, ERR */
    }
}

static jint netty_rdma_modifyQpError(JNIEnv *env, jclass clazz, jlong handle) {
    (void) env;
    (void) clazz;
    struct ibv_qp_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_ERR;
    return -positive_errno(ibv_modify_qp(NETTY_RDMA_HANDLE(struct netty_rdma_qp, handle)->qp, &attr, IBV_QP_STATE));
}

static int has_immediate(uint32_t opcode) {
    return opcode == IBV_WR_SEND_WITH_IMM || opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
}

/* The opcodes the SPI has (WrOpcode): no atomics. */
static int known_opcode(uint32_t opcode) {
    return opcode <= IBV_WR_RDMA_READ || opcode == IBV_WR_LOCAL_INV || opcode == IBV_WR_BIND_MW
           || opcode == IBV_WR_SEND_WITH_INV;
}

/* Copies a descriptor slot's num_sge SGEs into ibv_sge form; their total length. */
static inline uint64_t load_sges(const uint8_t *slot, uint32_t num_sge, struct ibv_sge *out) {
    uint64_t bytes = 0;
    for (uint32_t j = 0; j < num_sge; j++) {
        const uint8_t *sge = slot + WR_OFFSET_SGES + j * SGE_SIZE;
        out[j].addr = netty_rdma_load64(sge + SGE_OFFSET_ADDR);
        out[j].length = netty_rdma_load32(sge + SGE_OFFSET_LENGTH);
        out[j].lkey = netty_rdma_load32(sge + SGE_OFFSET_LKEY);
        bytes += out[j].length;
    }
    return bytes;
}

/*
 * ibv_post_send of slots offset .. offset + count - 1 of the WorkRequestList at address, in chains of at most
 * POST_CHUNK_WRS work requests. Each request is checked first as the SPI requires of every provider (SGE count,
 * opcode, immediate data on iWARP, inline size), so that a malformed one fails with EINVAL at its own index and
 * never reaches the provider library. The INLINE flag of slot no_inline (-1: none) is ignored: Java found an inline
 * SGE that names no live memory region, and without INLINE the device checks its key (LOC_PROT_ERR) instead of
 * reading the memory. A BIND_MW's window and region are C objects the descriptor cannot name: Java resolved them and
 * passes their handles at bind_handles (see binds below; 0 if the call has no bind). Returns 0, or
 * post_result(first index not posted, -errno).
 */
static jlong netty_rdma_postSend(JNIEnv *env, jclass clazz, jlong handle, jlong address, jint slot_size, jint offset,
                                 jint count, jint no_inline, jlong bind_handles) {
    (void) env;
    (void) clazz;
    struct netty_rdma_qp *q = NETTY_RDMA_HANDLE(struct netty_rdma_qp, handle);
    const uint8_t *base = NETTY_RDMA_HANDLE(const uint8_t, address);
    /* BIND_MW k of the call (slot offset + k): its window and region, resolved by Java, at [2k] and [2k + 1] */
    const uint64_t *binds = NETTY_RDMA_HANDLE(const uint64_t, bind_handles);
    uint32_t slot_sges = (uint32_t) (slot_size - WR_OFFSET_SGES) / SGE_SIZE;
    struct ibv_send_wr wrs[POST_CHUNK_WRS];
    struct ibv_sge sges[POST_CHUNK_SGES];
    jint end = offset + count;
    jint i = offset;
    while (i < end) {
        jint first = i;
        int n = 0;
        int used = 0;
        int err = 0;
        for (; i < end && n < POST_CHUNK_WRS; i++) {
            const uint8_t *slot = base + (size_t) i * (size_t) slot_size;
            uint32_t opcode = netty_rdma_load32(slot + WR_OFFSET_OPCODE);
            uint32_t flags = netty_rdma_load32(slot + WR_OFFSET_SEND_FLAGS);
            uint32_t num_sge = netty_rdma_load32(slot + WR_OFFSET_NUM_SGE);
            int bind = opcode == IBV_WR_BIND_MW;
            int local = bind || opcode == IBV_WR_LOCAL_INV;
            if (num_sge > slot_sges || num_sge > q->max_send_sge || num_sge > POST_CHUNK_SGES
                || !known_opcode(opcode) || (q->no_imm && has_immediate(opcode))
                || (bind && (num_sge != 1 || binds == NULL || binds[2 * (i - offset)] == 0
                             || binds[2 * (i - offset) + 1] == 0))) {
                err = -EINVAL;
                break;
            }
            if (local) {
                num_sge = 0; /* a bind's SGE describes the window's range; nothing is gathered */
            }
            if (used + (int) num_sge > POST_CHUNK_SGES) {
                break; /* the next chain */
            }
            if (i == no_inline) {
                flags &= ~IBV_SEND_INLINE;
            }
            struct ibv_send_wr *wr = &wrs[n];
            memset(wr, 0, sizeof(*wr));
            uint64_t bytes = load_sges(slot, num_sge, &sges[used]);
            if ((flags & IBV_SEND_INLINE) && (opcode == IBV_WR_RDMA_READ || local || bytes > q->max_inline)) {
                err = -EINVAL;
                break;
            }
            wr->wr_id = netty_rdma_load64(slot + WR_OFFSET_WR_ID);
            wr->opcode = (enum ibv_wr_opcode) opcode;
            wr->send_flags = flags & (IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_INLINE);
            wr->num_sge = (int) num_sge;
            wr->sg_list = num_sge > 0 ? &sges[used] : NULL;
            if (has_immediate(opcode)) {
                wr->imm_data = htonl(netty_rdma_load32(slot + WR_OFFSET_IMM_DATA));
            }
            wr->wr.rdma.remote_addr = netty_rdma_load64(slot + WR_OFFSET_REMOTE_ADDR);
            wr->wr.rdma.rkey = netty_rdma_load32(slot + WR_OFFSET_RKEY);
            if (opcode == IBV_WR_LOCAL_INV || opcode == IBV_WR_SEND_WITH_INV) {
                wr->invalidate_rkey = netty_rdma_load32(slot + WR_OFFSET_IMM_DATA);
                /* libsiw takes a SEND_WITH_INV's STag from wr.rdma.rkey, not from invalidate_rkey */
                wr->wr.rdma.rkey = wr->invalidate_rkey;
            } else if (bind) {
                const uint8_t *sge = slot + WR_OFFSET_SGES;
                struct ibv_mw *mw = NETTY_RDMA_HANDLE(struct ibv_mw, binds[2 * (i - offset)]);
                /* the key the window has now (rxe checks it): libibverbs never learns of a type-2 bind's new key */
                mw->rkey = netty_rdma_load32(slot + WR_OFFSET_MW_RKEY);
                wr->bind_mw.mw = mw;
                wr->bind_mw.rkey = netty_rdma_load32(slot + WR_OFFSET_RKEY);
                wr->bind_mw.bind_info.mr = NETTY_RDMA_HANDLE(struct ibv_mr, binds[2 * (i - offset) + 1]);
                wr->bind_mw.bind_info.addr = netty_rdma_load64(sge + SGE_OFFSET_ADDR);
                wr->bind_mw.bind_info.length = netty_rdma_load32(sge + SGE_OFFSET_LENGTH);
                wr->bind_mw.bind_info.mw_access_flags = netty_rdma_load32(slot + WR_OFFSET_IMM_DATA);
                wr->wr.rdma.remote_addr = 0;
                wr->wr.rdma.rkey = 0;
            }
            if (n > 0) {
                wrs[n - 1].next = wr;
            }
            used += (int) num_sge;
            n++;
        }
        if (n > 0) {
            struct ibv_send_wr *bad = NULL;
            int rc = ibv_post_send(q->qp, wrs, &bad);
            if (rc != 0) {
                jint bad_index = bad != NULL && bad >= wrs && bad < wrs + n ? first + (jint) (bad - wrs) : first;
                return post_result(bad_index, -positive_errno(rc));
            }
        }
        if (err != 0) {
            return post_result(i, err);
        }
    }
    return 0;
}

/*
 * Posts receive slots offset .. offset + count - 1 of the WorkRequestList at address, in chains of at most
 * POST_CHUNK_WRS, to a QP (qp != NULL) or a shared receive queue: ibv_post_recv or ibv_post_srq_recv. A slot with more
 * than max_sge SGEs fails with EINVAL at its index. Returns 0, or post_result(first index not posted, -errno).
 */
static jlong post_receives(struct ibv_qp *qp, struct ibv_srq *srq, uint32_t max_sge, const uint8_t *base,
                           jint slot_size, jint offset, jint count) {
    uint32_t slot_sges = (uint32_t) (slot_size - WR_OFFSET_SGES) / SGE_SIZE;
    struct ibv_recv_wr wrs[POST_CHUNK_WRS];
    struct ibv_sge sges[POST_CHUNK_SGES];
    jint end = offset + count;
    jint i = offset;
    while (i < end) {
        jint first = i;
        int n = 0;
        int used = 0;
        int err = 0;
        for (; i < end && n < POST_CHUNK_WRS; i++) {
            const uint8_t *slot = base + (size_t) i * (size_t) slot_size;
            uint32_t num_sge = netty_rdma_load32(slot + WR_OFFSET_NUM_SGE);
            if (num_sge > slot_sges || num_sge > max_sge || num_sge > POST_CHUNK_SGES) {
                err = -EINVAL;
                break;
            }
            if (used + (int) num_sge > POST_CHUNK_SGES) {
                break;
            }
            struct ibv_recv_wr *wr = &wrs[n];
            memset(wr, 0, sizeof(*wr));
            load_sges(slot, num_sge, &sges[used]);
            wr->wr_id = netty_rdma_load64(slot + WR_OFFSET_WR_ID);
            wr->num_sge = (int) num_sge;
            wr->sg_list = num_sge > 0 ? &sges[used] : NULL;
            if (n > 0) {
                wrs[n - 1].next = wr;
            }
            used += (int) num_sge;
            n++;
        }
        if (n > 0) {
            struct ibv_recv_wr *bad = NULL;
            int rc = qp != NULL ? ibv_post_recv(qp, wrs, &bad) : ibv_post_srq_recv(srq, wrs, &bad);
            if (rc != 0) {
                jint bad_index = bad != NULL && bad >= wrs && bad < wrs + n ? first + (jint) (bad - wrs) : first;
                return post_result(bad_index, -positive_errno(rc));
            }
        }
        if (err != 0) {
            return post_result(i, err);
        }
    }
    return 0;
}

/* ibv_post_recv of slots offset .. offset + count - 1; as postSend. EINVAL on a QP with a shared receive queue. */
static jlong netty_rdma_postRecv(JNIEnv *env, jclass clazz, jlong handle, jlong address, jint slot_size, jint offset,
                                 jint count) {
    (void) env;
    (void) clazz;
    struct netty_rdma_qp *q = NETTY_RDMA_HANDLE(struct netty_rdma_qp, handle);
    if (q->has_srq) {
        return count > 0 ? post_result(offset, -EINVAL) : 0;
    }
    return post_receives(q->qp, NULL, q->max_recv_sge, NETTY_RDMA_HANDLE(const uint8_t, address), slot_size, offset,
                         count);
}

/* ---- shared receive queues ---------------------------------------------------------------------------------- */

/* ibv_create_srq with its limit disarmed: the handle, or -errno. */
static jlong netty_rdma_createSrq(JNIEnv *env, jclass clazz, jlong pd, jint max_wr, jint max_sge) {
    (void) env;
    (void) clazz;
    struct netty_rdma_srq *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return -ENOMEM;
    }
    struct ibv_srq_init_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.srq_context = s; /* for the asynchronous events */
    attr.attr.max_wr = (uint32_t) max_wr;
    attr.attr.max_sge = (uint32_t) max_sge;
    attr.attr.srq_limit = 0;
    errno = 0;
    s->srq = ibv_create_srq(NETTY_RDMA_HANDLE(struct ibv_pd, pd), &attr);
    if (s->srq == NULL) {
        int err = netty_rdma_errno();
        free(s);
        return err;
    }
    /* what the device granted (it may round up) */
    s->max_wr = attr.attr.max_wr;
    s->max_sge = attr.attr.max_sge;
    return NETTY_RDMA_TO_HANDLE(s);
}

static jint netty_rdma_srqCapacity(JNIEnv *env, jclass clazz, jlong handle) {
    (void) env;
    (void) clazz;
    return (jint) NETTY_RDMA_HANDLE(struct netty_rdma_srq, handle)->max_wr;
}

static jint netty_rdma_srqMaxSge(JNIEnv *env, jclass clazz, jlong handle) {
    (void) env;
    (void) clazz;
    return (jint) NETTY_RDMA_HANDLE(struct netty_rdma_srq, handle)->max_sge;
}

static jlong netty_rdma_srqLimitEvents(JNIEnv *env, jclass clazz, jlong handle) {
    (void) env;
    (void) clazz;
    return (jlong) __atomic_load_n(&NETTY_RDMA_HANDLE(struct netty_rdma_srq, handle)->limit_events, __ATOMIC_ACQUIRE);
}

static jboolean netty_rdma_srqFailed(JNIEnv *env, jclass clazz, jlong handle) {
    (void) env;
    (void) clazz;
    return __atomic_load_n(&NETTY_RDMA_HANDLE(struct netty_rdma_srq, handle)->error, __ATOMIC_ACQUIRE) ? JNI_TRUE
                                                                                                       : JNI_FALSE;
}

/* ibv_modify_srq(IBV_SRQ_LIMIT): arms the limit event (0 disarms); 0 or -errno. */
static jint netty_rdma_modifySrqLimit(JNIEnv *env, jclass clazz, jlong handle, jint limit) {
    (void) env;
    (void) clazz;
    struct ibv_srq_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.srq_limit = (uint32_t) limit;
    return -positive_errno(ibv_modify_srq(NETTY_RDMA_HANDLE(struct netty_rdma_srq, handle)->srq, &attr,
                                          IBV_SRQ_LIMIT));
}

/* ibv_post_srq_recv; as postRecv. */
static jlong netty_rdma_postSrqRecv(JNIEnv *env, jclass clazz, jlong handle, jlong address, jint slot_size,
                                    jint offset, jint count) {
    (void) env;
    (void) clazz;
    struct netty_rdma_srq *s = NETTY_RDMA_HANDLE(struct netty_rdma_srq, handle);
    return post_receives(NULL, s->srq, s->max_sge, NETTY_RDMA_HANDLE(const uint8_t, address), slot_size, offset,
                         count);
}

/* ibv_destroy_srq, then the struct: 0, or -errno (the queue stays). */
static jint netty_rdma_destroySrq(JNIEnv *env, jclass clazz, jlong handle) {
    (void) env;
    (void) clazz;
    struct netty_rdma_srq *s = NETTY_RDMA_HANDLE(struct netty_rdma_srq, handle);
    int rc = ibv_destroy_srq(s->srq);
    if (rc != 0) {
        return -positive_errno(rc);
    }
    free(s);
    return 0;
}

static const JNINativeMethod methods[] = {
    {"deviceCount", "()I", (void *) netty_rdma_deviceCount},
    {"memlockLimit", "()J", (void *) netty_rdma_memlockLimit},
    {"directBufferAddress", "(Ljava/nio/ByteBuffer;)J", (void *) netty_rdma_directBufferAddress},
    {"getDevices", "()[J", (void *) netty_rdma_getDevices},
    {"freeDevices", "(J)V", (void *) netty_rdma_freeDevices},
    {"deviceName", "(J)Ljava/lang/String;", (void *) netty_rdma_deviceName},
    {"queryDevice", "(J[J)V", (void *) netty_rdma_queryDevice},
    {"asyncWatch", "(IJ)I", (void *) netty_rdma_asyncWatch},
    {"asyncDrain", "(II)I", (void *) netty_rdma_asyncDrain},
    {"allocPd", "(J)J", (void *) netty_rdma_allocPd},
    {"deallocPd", "(J)I", (void *) netty_rdma_deallocPd},
    {"regMr", "(JJJI)J", (void *) netty_rdma_regMr},
    {"mrLkey", "(J)I", (void *) netty_rdma_mrLkey},
    {"mrRkey", "(J)I", (void *) netty_rdma_mrRkey},
    {"deregMr", "(J)I", (void *) netty_rdma_deregMr},
    {"allocMw", "(J)J", (void *) netty_rdma_allocMw},
    {"mwRkey", "(J)I", (void *) netty_rdma_mwRkey},
    {"deallocMw", "(J)I", (void *) netty_rdma_deallocMw},
    {"createCompChannel", "(J)J", (void *) netty_rdma_createCompChannel},
    {"compChannelFd", "(J)I", (void *) netty_rdma_compChannelFd},
    {"destroyCompChannel", "(J)I", (void *) netty_rdma_destroyCompChannel},
    {"createCq", "(JIJ)J", (void *) netty_rdma_createCq},
    {"cqCapacity", "(J)I", (void *) netty_rdma_cqCapacity},
    {"cqKernelWcFlags", "(J)V", (void *) netty_rdma_cqKernelWcFlags},
    {"destroyCq", "(J)I", (void *) netty_rdma_destroyCq},
    {"getCqEvent", "(J)J", (void *) netty_rdma_getCqEvent},
    {"ackCqEvents", "(JI)V", (void *) netty_rdma_ackCqEvents},
    {"reqNotifyCq", "(JZ)I", (void *) netty_rdma_reqNotifyCq},
    {"pollCq", "(JJI)I", (void *) netty_rdma_pollCq},
    {"qpState", "(J)I", (void *) netty_rdma_qpState},
    {"modifyQpError", "(J)I", (void *) netty_rdma_modifyQpError},
    {"postSend", "(JJIIIIJ)J", (void *) netty_rdma_postSend},
    {"postRecv", "(JJIII)J", (void *) netty_rdma_postRecv},
    {"createSrq", "(JII)J", (void *) netty_rdma_createSrq},
    {"srqCapacity", "(J)I", (void *) netty_rdma_srqCapacity},
    {"srqMaxSge", "(J)I", (void *) netty_rdma_srqMaxSge},
    {"srqLimitEvents", "(J)J", (void *) netty_rdma_srqLimitEvents},
    {"srqFailed", "(J)Z", (void *) netty_rdma_srqFailed},
    {"modifySrqLimit", "(JI)I", (void *) netty_rdma_modifySrqLimit},
    {"postSrqRecv", "(JJIII)J", (void *) netty_rdma_postSrqRecv},
    {"destroySrq", "(J)I", (void *) netty_rdma_destroySrq},
};

jint netty_rdma_verbs_register(JNIEnv *env, jclass clazz) {
    return (*env)->RegisterNatives(env, clazz, methods, NETTY_RDMA_ARRAY_LENGTH(methods)) == 0 ? JNI_OK : JNI_ERR;
}
