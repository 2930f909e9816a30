/*
 * netty-rdma native layer: JNI over libibverbs and librdmacm, one file per concern. Every function is static and
 * registered from JNI_OnLoad (netty_rdma.c) on org.nettyrdma.verbs.jni.Native (with a shaded build's prefix). Handles cross JNI as jlong.
 *
 * Conventions: data-path functions (post, poll, notify) return 0/a count or -errno and never throw. Set-up functions
 * that create something return its handle (a positive pointer) or -errno; the few that return Java objects throw
 * org.nettyrdma.verbs.VerbsException through netty_rdma_throw.
 */
#ifndef NETTY_RDMA_H_
#define NETTY_RDMA_H_

#include <jni.h>
#include <stdint.h>
#include <string.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

/* Names before shading: JNI_OnLoad puts the package prefix of a shaded build in front (netty_rdma.c). */
#define NETTY_RDMA_LIBRARY_NAME "netty_rdma_"
#define NETTY_RDMA_NATIVE_CLASS "org/nettyrdma/verbs/jni/Native"
#define NETTY_RDMA_EXCEPTION_CLASS "org/nettyrdma/verbs/VerbsException"

#define NETTY_RDMA_ARRAY_LENGTH(a) ((jint) (sizeof(a) / sizeof((a)[0])))
#define NETTY_RDMA_HANDLE(type, h) ((type *) (intptr_t) (h))
#define NETTY_RDMA_TO_HANDLE(p) ((jlong) (intptr_t) (p))

/* A completion queue: CQ overrun arrives as the asynchronous event IBV_EVENT_CQ_ERR, which sets overrun. */
struct netty_rdma_cq {
    struct ibv_cq *cq;
    int overrun;
    /*
     * The device's library hands over the kernel's work completion flags unchanged (rxe copies the kernel's
     * ib_uverbs_wc): there an invalidation is bit 2, IB_UVERBS_WC_WITH_INVALIDATE, which libibverbs calls
     * IBV_WC_IP_CSUM_OK (its IBV_WC_WITH_INV is bit 3).
     */
    int kernel_wc_flags;
};

/*
 * A queue pair created with rdma_create_qp, with the limits the post path checks. A fatal asynchronous event
 * (IBV_EVENT_QP_FATAL, _REQ_ERR, _ACCESS_ERR) sets error: the QP is in ERROR even where ibv_query_qp does not say
 * so (siw reports no state).
 */
struct netty_rdma_qp {
    struct ibv_qp *qp;
    struct rdma_cm_id *id;
    uint32_t max_send_sge;
    uint32_t max_recv_sge;
    uint32_t max_inline;
    int no_imm;
    /* created with a shared receive queue: postRecv on the QP is EINVAL */
    int has_srq;
    int error;
};

/*
 * A shared receive queue. IBV_EVENT_SRQ_LIMIT_REACHED counts limit_events (the asynchronous events' thread; read with
 * acquire), IBV_EVENT_SRQ_ERR sets error (read with acquire by srqFailed).
 */
struct netty_rdma_srq {
    struct ibv_srq *srq;
    uint32_t max_wr;
    uint32_t max_sge;
    int64_t limit_events;
    int error;
};

/* Registration of each file's natives on the Native class; JNI_OK or JNI_ERR (with an exception pending). */
jint netty_rdma_errors_onload(JNIEnv *env, const char *exception_class);
void netty_rdma_errors_onunload(JNIEnv *env);
jint netty_rdma_verbs_register(JNIEnv *env, jclass clazz);
jint netty_rdma_cm_register(JNIEnv *env, jclass clazz);
jint netty_rdma_epoll_register(JNIEnv *env, jclass clazz);
jint netty_rdma_layout_register(JNIEnv *env, jclass clazz);

/* Throws org.nettyrdma.verbs.VerbsException(verb, err, detail); detail may be NULL. */
void netty_rdma_throw(JNIEnv *env, const char *verb, int err, const char *detail);

/* -errno of the last failure, never 0 (some libraries fail without setting errno). */
int netty_rdma_errno(void);

/* Unaligned loads and stores of the descriptor memory (native byte order). */
static inline uint64_t netty_rdma_load64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static inline uint32_t netty_rdma_load32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static inline void netty_rdma_store64(uint8_t *p, uint64_t v) {
    memcpy(p, &v, sizeof(v));
}

static inline void netty_rdma_store32(uint8_t *p, uint32_t v) {
    memcpy(p, &v, sizeof(v));
}

#endif /* NETTY_RDMA_H_ */
