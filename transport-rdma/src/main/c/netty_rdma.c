/* Library entry: registers the natives of every file on org.nettyrdma.verbs.jni.Native. */
#include "netty_rdma.h"

JNIEXPORT jint JNI_OnLoad(JavaVM *vm, void *reserved) {
    (void) reserved;
    JNIEnv *env;
    if ((*vm)->GetEnv(vm, (void **) &env, JNI_VERSION_1_8) != JNI_OK) {
        return JNI_ERR;
    }
    if (netty_rdma_errors_onload(env) != JNI_OK) {
        return JNI_ERR;
    }
    jclass clazz = (*env)->FindClass(env, NETTY_RDMA_NATIVE_CLASS);
    if (clazz == NULL) {
        return JNI_ERR;
    }
    jint rc = netty_rdma_verbs_register(env, clazz);
    if (rc == JNI_OK) {
        rc = netty_rdma_cm_register(env, clazz);
    }
    if (rc == JNI_OK) {
        rc = netty_rdma_epoll_register(env, clazz);
    }
    (*env)->DeleteLocalRef(env, clazz);
    return rc == JNI_OK ? JNI_VERSION_1_8 : JNI_ERR;
}

JNIEXPORT void JNI_OnUnload(JavaVM *vm, void *reserved) {
    (void) reserved;
    JNIEnv *env;
    if ((*vm)->GetEnv(vm, (void **) &env, JNI_VERSION_1_8) == JNI_OK) {
        netty_rdma_errors_onunload(env);
    }
}
