/* Exceptions thrown by set-up paths: the class and constructor are looked up once, in JNI_OnLoad. */
#include <errno.h>
#include "netty_rdma.h"

static jclass verbs_exception_class;
static jmethodID verbs_exception_ctor;

jint netty_rdma_errors_onload(JNIEnv *env, const char *exception_class) {
    jclass local = (*env)->FindClass(env, exception_class);
    if (local == NULL) {
        return JNI_ERR;
    }
    verbs_exception_class = (*env)->NewGlobalRef(env, local);
    (*env)->DeleteLocalRef(env, local);
    if (verbs_exception_class == NULL) {
        return JNI_ERR;
    }
    verbs_exception_ctor = (*env)->GetMethodID(env, verbs_exception_class, "<init>",
                                               "(Ljava/lang/String;ILjava/lang/String;)V");
    return verbs_exception_ctor == NULL ? JNI_ERR : JNI_OK;
}

void netty_rdma_errors_onunload(JNIEnv *env) {
    if (verbs_exception_class != NULL) {
        (*env)->DeleteGlobalRef(env, verbs_exception_class);
        verbs_exception_class = NULL;
    }
}

void netty_rdma_throw(JNIEnv *env, const char *verb, int err, const char *detail) {
    jstring jverb = (*env)->NewStringUTF(env, verb);
    if (jverb == NULL) {
        return; /* OutOfMemoryError pending */
    }
    jstring jdetail = NULL;
    if (detail != NULL) {
        jdetail = (*env)->NewStringUTF(env, detail);
        if (jdetail == NULL) {
            (*env)->DeleteLocalRef(env, jverb);
            return;
        }
    }
    jobject e = (*env)->NewObject(env, verbs_exception_class, verbs_exception_ctor, jverb, (jint) err, jdetail);
    if (e != NULL) {
        (*env)->Throw(env, (jthrowable) e);
        (*env)->DeleteLocalRef(env, e);
    }
    (*env)->DeleteLocalRef(env, jverb);
    if (jdetail != NULL) {
        (*env)->DeleteLocalRef(env, jdetail);
    }
}

int netty_rdma_errno(void) {
    return errno > 0 ? -errno : -EIO;
}
