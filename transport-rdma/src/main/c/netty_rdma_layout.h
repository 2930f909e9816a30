/*
 * The layouts C shares with Java, defined here only: the descriptor slots (docs/descriptors.md), the CM event buffer
 * and the small output arrays of the set-up calls. Java reads every value at load time through the natives of
 * netty_rdma_layout.c (org.nettyrdma.verbs.jni.JniLayout) and checks the descriptor slots against the constants of
 * WorkRequestList and CompletionArray, which the emulated provider uses without this library: a library whose
 * layout differs is refused when it loads.
 */
#ifndef NETTY_RDMA_LAYOUT_H_
#define NETTY_RDMA_LAYOUT_H_

/* WorkRequestList slot: 40 + 16 * maxSge bytes. */
#define WR_OFFSET_WR_ID 0
#define WR_OFFSET_OPCODE 8
#define WR_OFFSET_SEND_FLAGS 12
#define WR_OFFSET_NUM_SGE 16
#define WR_OFFSET_IMM_DATA 20
#define WR_OFFSET_REMOTE_ADDR 24
#define WR_OFFSET_RKEY 32
#define WR_OFFSET_MW_RKEY 36
#define WR_OFFSET_SGES 40
#define SGE_SIZE 16
#define SGE_OFFSET_ADDR 0
#define SGE_OFFSET_LENGTH 8
#define SGE_OFFSET_LKEY 12

/* CompletionArray slot: 32 bytes. */
#define WC_SLOT_SIZE 32
#define WC_OFFSET_WR_ID 0
#define WC_OFFSET_STATUS 8
#define WC_OFFSET_OPCODE 12
#define WC_OFFSET_BYTE_LEN 16
#define WC_OFFSET_IMM_DATA 20
#define WC_OFFSET_QP_NUM 24
#define WC_OFFSET_WC_FLAGS 28

/* The event getCmEvent writes for Java. */
#define EVENT_OFFSET_TYPE 0
#define EVENT_OFFSET_STATUS 4
#define EVENT_OFFSET_ID 8
#define EVENT_OFFSET_LISTEN_ID 16
#define EVENT_OFFSET_DATA_LENGTH 24
#define EVENT_OFFSET_DATA 32
#define EVENT_MAX_DATA 512

/* Address bytes for Java: [0..1] port (network order), [2..5] or [2..17] address, [18..21] IPv6 scope id. */
#define ADDRESS_BYTES 22

/* queryDevice's output, in this order. */
enum {
    ATTR_TRANSPORT, ATTR_MAX_QP, ATTR_MAX_QP_WR, ATTR_MAX_SGE, ATTR_MAX_CQE, ATTR_MAX_MR, ATTR_MAX_MR_SIZE,
    ATTR_MAX_QP_RD_ATOM, ATTR_MAX_INLINE_DATA, ATTR_VENDOR_ID, ATTR_MAX_MW, ATTR_DEVICE_CAP_FLAGS, ATTR_MAX_SRQ,
    ATTR_MAX_SRQ_WR, ATTR_MAX_SRQ_SGE, ATTR_COUNT
};

/* createQp's output, in this order. */
enum { CAP_MAX_SEND_WR, CAP_MAX_RECV_WR, CAP_MAX_SEND_SGE, CAP_MAX_RECV_SGE, CAP_MAX_INLINE, CAP_QP_NUM, CAP_COUNT };

/* epollWait's results. */
#define WAIT_TIMEOUT 0
#define WAIT_READY 1
#define WAIT_WOKEN 2

#endif /* NETTY_RDMA_LAYOUT_H_ */
