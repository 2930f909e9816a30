/*
 * Library entry: registers the natives of every file on the Native class. A shaded build relocates the Java classes
 * (org.nettyrdma -> com.acme.shaded.org.nettyrdma) and, as for Netty's own native transports, renames this library
 * with the mangled prefix that Netty's NativeLibraryLoader then looks for (libcom_acme_shaded_netty_rdma_x86_64.so):
 * the class names are derived from the library's own file name.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include "netty_rdma.h"

/*
 * The package prefix ("" or "com/acme/shaded/") of the library at path: what its file name has between "lib" and the
 * last "netty_rdma_", unmangled as NativeLibraryLoader mangles it ('.' became '_', '_' became "_1"). A name without
 * "netty_rdma_" (a library renamed by hand) has no prefix. Returns the length written to out (0 or more), or -1 if the
 * prefix does not fit or is malformed.
 */
static int netty_rdma_package_prefix(const char *path, char *out, size_t size) {
    const char *name = strrchr(path, '/');
    name = name == NULL ? path : name + 1;
    if (strncmp(name, "lib", 3) == 0) {
        name += 3;
    }
    const char *end = NULL;
    for (const char *p = strstr(name, NETTY_RDMA_LIBRARY_NAME); p != NULL; p = strstr(p + 1, NETTY_RDMA_LIBRARY_NAME)) {
        end = p;
    }
    size_t n = 0;
    for (const char *p = name; end != NULL && p < end; p++) {
        char c = *p;
        if (c == '_' && p + 1 < end && p[1] == '1') {
            p++; /* "_1": an underscore of the package name */
        } else if (c == '_') {
            c = '/';
        } else if (c == '/' || c == '.') {
            return -1;
        }
        if (n + 1 >= size) {
            return -1;
        }
        out[n++] = c;
    }
    if (n > 0 && out[n - 1] != '/') {
        return -1; /* a prefix ends with a package separator */
    }
    out[n] = '\0';
    return (int) n;
}

/* Throws UnsatisfiedLinkError(message) (JNI_OnLoad fails with it: System.load throws it). */
static void throw_link_error(JNIEnv *env, const char *message) {
    (*env)->ExceptionClear(env);
    jclass error = (*env)->FindClass(env, "java/lang/UnsatisfiedLinkError");
    if (error != NULL) {
        (*env)->ThrowNew(env, error, message);
        (*env)->DeleteLocalRef(env, error);
    }
}

JNIEXPORT jint JNI_OnLoad(JavaVM *vm, void *reserved) {
    (void) reserved;
    JNIEnv *env;
    if ((*vm)->GetEnv(vm, (void **) &env, JNI_VERSION_1_8) != JNI_OK) {
        return JNI_ERR;
    }
    Dl_info info;
    char prefix[512];
    char message[1536];
    if (dladdr((void *) netty_rdma_package_prefix, &info) == 0 || info.dli_fname == NULL) {
        throw_link_error(env, "netty_rdma: dladdr cannot tell the library's file name");
        return JNI_ERR;
    }
    if (netty_rdma_package_prefix(info.dli_fname, prefix, sizeof(prefix)) < 0) {
        snprintf(message, sizeof(message), "netty_rdma: no package prefix in the library's file name %s (a shaded "
                 "build names it lib<prefix>%s<arch>.so, the prefix mangled as Netty's NativeLibraryLoader does)",
                 info.dli_fname, NETTY_RDMA_LIBRARY_NAME);
        throw_link_error(env, message);
        return JNI_ERR;
    }
    char native_class[640];
    char exception_class[640];
    snprintf(native_class, sizeof(native_class), "%s%s", prefix, NETTY_RDMA_NATIVE_CLASS);
    snprintf(exception_class, sizeof(exception_class), "%s%s", prefix, NETTY_RDMA_EXCEPTION_CLASS);
    jclass clazz = (*env)->FindClass(env, native_class);
    if (clazz == NULL || netty_rdma_errors_onload(env, exception_class) != JNI_OK) {
        snprintf(message, sizeof(message), "netty_rdma: class %s not found (the package prefix \"%s\" comes from "
                 "the library's file name %s)", clazz == NULL ? native_class : exception_class, prefix,
                 info.dli_fname);
        throw_link_error(env, message);
        if (clazz != NULL) {
            (*env)->DeleteLocalRef(env, clazz);
            netty_rdma_errors_onunload(env);
        }
        return JNI_ERR;
    }
    jint rc = netty_rdma_verbs_register(env, clazz);
    if (rc == JNI_OK) {
        rc = netty_rdma_cm_register(env, clazz);
    }
    if (rc == JNI_OK) {
        rc = netty_rdma_epoll_register(env, clazz);
    }
    if (rc == JNI_OK) {
        rc = netty_rdma_layout_register(env, clazz);
    }
    (*env)->DeleteLocalRef(env, clazz);
    if (rc != JNI_OK) {
        /* a native the class does not declare (NoSuchMethodError pending): library and classes of different builds */
        jthrowable cause = (*env)->ExceptionOccurred(env);
        (*env)->ExceptionClear(env);
        snprintf(message, sizeof(message), "netty_rdma: registering the natives of %s failed: the library and the "
                 "classes are of different builds", native_class);
        throw_link_error(env, message);
        if (cause != NULL) {
            (*env)->DeleteLocalRef(env, cause);
        }
        netty_rdma_errors_onunload(env);
        return JNI_ERR;
    }
    return JNI_VERSION_1_8;
}

JNIEXPORT void JNI_OnUnload(JavaVM *vm, void *reserved) {
    (void) reserved;
    JNIEnv *env;
    if ((*vm)->GetEnv(vm, (void **) &env, JNI_VERSION_1_8) == JNI_OK) {
        netty_rdma_errors_onunload(env);
    }
}
