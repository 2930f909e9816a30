/* The layouts of netty_rdma_layout.h for Java: one static native per value, read once when the library loads. */
#include "netty_rdma.h"
#include "netty_rdma_layout.h"

/* X(Java name, value): the one list both the functions and the registration table are made from. */
#define NETTY_RDMA_LAYOUTS(X) \
    X(wrOffsetWrId, WR_OFFSET_WR_ID) \
    X(wrOffsetOpcode, WR_OFFSET_OPCODE) \
    X(wrOffsetSendFlags, WR_OFFSET_SEND_FLAGS) \
    X(wrOffsetNumSge, WR_OFFSET_NUM_SGE) \
    X(wrOffsetImmData, WR_OFFSET_IMM_DATA) \
    X(wrOffsetRemoteAddr, WR_OFFSET_REMOTE_ADDR) \
    X(wrOffsetRkey, WR_OFFSET_RKEY) \
    X(wrOffsetMwRkey, WR_OFFSET_MW_RKEY) \
    X(wrOffsetSges, WR_OFFSET_SGES) \
    X(sgeSize, SGE_SIZE) \
    X(sgeOffsetAddr, SGE_OFFSET_ADDR) \
    X(sgeOffsetLength, SGE_OFFSET_LENGTH) \
    X(sgeOffsetLkey, SGE_OFFSET_LKEY) \
    X(wcSlotSize, WC_SLOT_SIZE) \
    X(wcOffsetWrId, WC_OFFSET_WR_ID) \
    X(wcOffsetStatus, WC_OFFSET_STATUS) \
    X(wcOffsetOpcode, WC_OFFSET_OPCODE) \
    X(wcOffsetByteLen, WC_OFFSET_BYTE_LEN) \
    X(wcOffsetImmData, WC_OFFSET_IMM_DATA) \
    X(wcOffsetQpNum, WC_OFFSET_QP_NUM) \
    X(wcOffsetWcFlags, WC_OFFSET_WC_FLAGS) \
    X(eventOffsetType, EVENT_OFFSET_TYPE) \
    X(eventOffsetStatus, EVENT_OFFSET_STATUS) \
    X(eventOffsetId, EVENT_OFFSET_ID) \
    X(eventOffsetListenId, EVENT_OFFSET_LISTEN_ID) \
    X(eventOffsetDataLength, EVENT_OFFSET_DATA_LENGTH) \
    X(eventOffsetData, EVENT_OFFSET_DATA) \
    X(eventMaxData, EVENT_MAX_DATA) \
    X(addressBytes, ADDRESS_BYTES) \
    X(attrTransport, ATTR_TRANSPORT) \
    X(attrMaxQp, ATTR_MAX_QP) \
    X(attrMaxQpWr, ATTR_MAX_QP_WR) \
    X(attrMaxSge, ATTR_MAX_SGE) \
    X(attrMaxCqe, ATTR_MAX_CQE) \
    X(attrMaxMr, ATTR_MAX_MR) \
    X(attrMaxMrSize, ATTR_MAX_MR_SIZE) \
    X(attrMaxQpRdAtom, ATTR_MAX_QP_RD_ATOM) \
    X(attrMaxInlineData, ATTR_MAX_INLINE_DATA) \
    X(attrVendorId, ATTR_VENDOR_ID) \
    X(attrMaxMw, ATTR_MAX_MW) \
    X(attrDeviceCapFlags, ATTR_DEVICE_CAP_FLAGS) \
    X(attrMaxSrq, ATTR_MAX_SRQ) \
    X(attrMaxSrqWr, ATTR_MAX_SRQ_WR) \
    X(attrMaxSrqSge, ATTR_MAX_SRQ_SGE) \
    X(attrCount, ATTR_COUNT) \
    X(capMaxSendWr, CAP_MAX_SEND_WR) \
    X(capMaxRecvWr, CAP_MAX_RECV_WR) \
    X(capMaxSendSge, CAP_MAX_SEND_SGE) \
    X(capMaxRecvSge, CAP_MAX_RECV_SGE) \
    X(capMaxInline, CAP_MAX_INLINE) \
    X(capQpNum, CAP_QP_NUM) \
    X(capCount, CAP_COUNT) \
    X(waitTimeout, WAIT_TIMEOUT) \
    X(waitReady, WAIT_READY) \
    X(waitWoken, WAIT_WOKEN)

#define NETTY_RDMA_LAYOUT_FUNCTION(name, value) \
    static jint netty_rdma_##name(JNIEnv *env, jclass clazz) { \
        (void) env; \
        (void) clazz; \
        return (jint) (value); \
    }
#define NETTY_RDMA_LAYOUT_METHOD(name, value) {#name, "()I", (void *) netty_rdma_##name},

NETTY_RDMA_LAYOUTS(NETTY_RDMA_LAYOUT_FUNCTION)

static const JNINativeMethod methods[] = {
    NETTY_RDMA_LAYOUTS(NETTY_RDMA_LAYOUT_METHOD)
};

jint netty_rdma_layout_register(JNIEnv *env, jclass clazz) {
    return (*env)->RegisterNatives(env, clazz, methods, NETTY_RDMA_ARRAY_LENGTH(methods)) == 0 ? JNI_OK : JNI_ERR;
}
