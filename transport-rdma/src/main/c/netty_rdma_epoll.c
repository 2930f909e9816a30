/* The event loop's blocking wait: epoll over completion-channel and CM event-channel fds plus an eventfd. */
#include <errno.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include "netty_rdma.h"
#include "netty_rdma_layout.h"

static jint netty_rdma_epollCreate(JNIEnv *env, jclass clazz) {
    (void) env;
    (void) clazz;
    int fd = epoll_create1(EPOLL_CLOEXEC);
    return fd >= 0 ? fd : netty_rdma_errno();
}

static jint netty_rdma_eventfdCreate(JNIEnv *env, jclass clazz) {
    (void) env;
    (void) clazz;
    int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    return fd >= 0 ? fd : netty_rdma_errno();
}

static jint netty_rdma_epollAdd(JNIEnv *env, jclass clazz, jint epfd, jint fd) {
    (void) env;
    (void) clazz;
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : netty_rdma_errno();
}

static jint netty_rdma_epollDel(JNIEnv *env, jclass clazz, jint epfd, jint fd) {
    (void) env;
    (void) clazz;
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, &ev) == 0 ? 0 : netty_rdma_errno();
}

/*
 * Waits up to timeout_ms (-1: for ever) for a registered fd: WAIT_TIMEOUT, WAIT_READY if a channel is ready,
 * WAIT_WOKEN if the eventfd was signalled (it is drained), -errno on failure. EINTR restarts the wait.
 */
static jint netty_rdma_epollWait(JNIEnv *env, jclass clazz, jint epfd, jint wake_fd, jint timeout_ms) {
    (void) env;
    (void) clazz;
    struct epoll_event ready[16];
    int n;
    do {
        n = epoll_wait(epfd, ready, NETTY_RDMA_ARRAY_LENGTH(ready), timeout_ms);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        return netty_rdma_errno();
    }
    jint result = n > 0 ? WAIT_READY : WAIT_TIMEOUT;
    for (int i = 0; i < n; i++) {
        if (ready[i].data.fd == wake_fd) {
            uint64_t value;
            if (read(wake_fd, &value, sizeof(value)) < 0 && errno != EAGAIN) {
                return netty_rdma_errno();
            }
            result = WAIT_WOKEN;
        }
    }
    return result;
}

static jint netty_rdma_eventfdWrite(JNIEnv *env, jclass clazz, jint fd) {
    (void) env;
    (void) clazz;
    uint64_t one = 1;
    return write(fd, &one, sizeof(one)) == (ssize_t) sizeof(one) || errno == EAGAIN ? 0 : netty_rdma_errno();
}

static jint netty_rdma_closeFd(JNIEnv *env, jclass clazz, jint fd) {
    (void) env;
    (void) clazz;
    return close(fd) == 0 ? 0 : netty_rdma_errno();
}

static const JNINativeMethod methods[] = {
    {"epollCreate", "()I", (void *) netty_rdma_epollCreate},
    {"eventfdCreate", "()I", (void *) netty_rdma_eventfdCreate},
    {"epollAdd", "(II)I", (void *) netty_rdma_epollAdd},
    {"epollDel", "(II)I", (void *) netty_rdma_epollDel},
    {"epollWait", "(III)I", (void *) netty_rdma_epollWait},
    {"eventfdWrite", "(I)I", (void *) netty_rdma_eventfdWrite},
    {"closeFd", "(I)I", (void *) netty_rdma_closeFd},
};

jint netty_rdma_epoll_register(JNIEnv *env, jclass clazz) {
    return (*env)->RegisterNatives(env, clazz, methods, NETTY_RDMA_ARRAY_LENGTH(methods)) == 0 ? JNI_OK : JNI_ERR;
}
