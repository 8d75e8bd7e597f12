// Typed wrappers for libcurl's varargs entry points, which Swift cannot call directly.
#ifndef HOIST_CCURL_SHIM_H
#define HOIST_CCURL_SHIM_H
#include <curl/curl.h>

static inline CURLcode hoist_curl_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode hoist_curl_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode hoist_curl_easy_setopt_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode hoist_curl_easy_setopt_pointer(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode hoist_curl_easy_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode hoist_curl_easy_setopt_write(CURL *h, size_t (*f)(char *, size_t, size_t, void *)) { return curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, f); }
static inline CURLcode hoist_curl_easy_setopt_read(CURL *h, size_t (*f)(char *, size_t, size_t, void *)) { return curl_easy_setopt(h, CURLOPT_READFUNCTION, f); }
static inline CURLcode hoist_curl_easy_setopt_header(CURL *h, size_t (*f)(char *, size_t, size_t, void *)) { return curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, f); }
static inline CURLcode hoist_curl_easy_setopt_seek(CURL *h, int (*f)(void *, curl_off_t, int)) { return curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, f); }
static inline CURLcode hoist_curl_easy_setopt_xferinfo(CURL *h, int (*f)(void *, curl_off_t, curl_off_t, curl_off_t, curl_off_t)) { return curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, f); }
static inline CURLcode hoist_curl_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode hoist_curl_easy_getinfo_off(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode hoist_curl_easy_getinfo_pointer(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }
static inline CURLMcode hoist_curl_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
static inline CURLSHcode hoist_curl_share_setopt_long(CURLSH *s, CURLSHoption o, long v) { return curl_share_setopt(s, o, v); }

/// The read callback's "pause this transfer" answer, a macro in curl.h.
static inline size_t hoist_curl_readfunc_pause(void) { return CURL_READFUNC_PAUSE; }
static inline size_t hoist_curl_readfunc_abort(void) { return CURL_READFUNC_ABORT; }
static inline size_t hoist_curl_writefunc_pause(void) { return CURL_WRITEFUNC_PAUSE; }
/// The seek callback's answers, macros in curl.h.
static inline int hoist_curl_seekfunc_ok(void) { return CURL_SEEKFUNC_OK; }
static inline int hoist_curl_seekfunc_cantseek(void) { return CURL_SEEKFUNC_CANTSEEK; }

/// The result code of a finished transfer's message (a union member in CURLMsg).
static inline CURLcode hoist_curl_msg_result(const CURLMsg *m) { return m->data.result; }
static inline int hoist_curl_msg_is_done(const CURLMsg *m) { return m->msg == CURLMSG_DONE; }
static inline int hoist_curl_pause_cont(void) { return CURLPAUSE_CONT; }
static inline long hoist_curl_http_version_2tls(void) { return CURL_HTTP_VERSION_2TLS; }
static inline long hoist_curl_http_version_1_1(void) { return CURL_HTTP_VERSION_1_1; }
/// Multiplexing on the multi handle (CURLPIPE_MULTIPLEX, a macro in multi.h).
static inline long hoist_curl_pipe_multiplex(void) { return CURLPIPE_MULTIPLEX; }

// An event loop for a multi handle driven by curl_multi_socket_action: curl tells which sockets
// to watch (epoll) and when its next timeout is due, and acts only on the sockets that are
// ready. (curl_multi_perform instead polls every transfer's socket on every turn.) An eventfd
// in the same epoll set wakes a waiting loop from another thread.
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

typedef struct hoist_curl_loop {
    CURLM *multi;
    int epoll;
    int wake;
    /// When curl's timeout is due (CLOCK_MONOTONIC milliseconds), or -1 for none.
    int64_t deadline;
    /// By descriptor: 1 for a socket curl stopped watching (CURL_POLL_REMOVE) that was left in the
    /// epoll set. A kept connection's next request then costs one EPOLL_CTL_MOD, not a DEL and an
    /// ADD; one that turns ready while unwatched is removed then.
    unsigned char *unwatched;
    int unwatched_size;
} hoist_curl_loop;

/// Marks `socket` unwatched (left in the epoll set); 0 when the table cannot grow.
static inline int hoist_curl_loop_leave(hoist_curl_loop *loop, curl_socket_t socket) {
    if (socket < 0) return 0;
    if (socket >= loop->unwatched_size) {
        int size = loop->unwatched_size ? loop->unwatched_size : 64;
        while (size <= socket) size *= 2;
        unsigned char *grown = (unsigned char *)realloc(loop->unwatched, (size_t)size);
        if (grown == NULL) return 0;
        memset(grown + loop->unwatched_size, 0, (size_t)(size - loop->unwatched_size));
        loop->unwatched = grown;
        loop->unwatched_size = size;
    }
    loop->unwatched[socket] = 1;
    return 1;
}

/// Whether `socket` was left in the epoll set unwatched; it is watched (or gone) after this.
static inline int hoist_curl_loop_take(hoist_curl_loop *loop, curl_socket_t socket) {
    if (socket < 0 || socket >= loop->unwatched_size || !loop->unwatched[socket]) return 0;
    loop->unwatched[socket] = 0;
    return 1;
}

static inline int64_t hoist_curl_loop_now(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/// curl's socket callback: watch `socket` for what curl wants (a socket curl has not assigned
/// a pointer to is new to the epoll set: added, then marked), or stop watching it.
static int hoist_curl_loop_socket(CURL *easy, curl_socket_t socket, int what, void *user, void *socketp) {
    (void)easy;
    hoist_curl_loop *loop = (hoist_curl_loop *)user;
    if (what == CURL_POLL_REMOVE) {
        // Left in the set: a socket curl closes leaves it by itself, and a kept one is most
        // likely watched again for the next request.
        if (!hoist_curl_loop_leave(loop, socket)) epoll_ctl(loop->epoll, EPOLL_CTL_DEL, socket, NULL);
        return 0;
    }
    struct epoll_event event = {0};
    event.data.fd = socket;
    event.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0);
    // Watched already, or left in the set unwatched: a MOD. (It fails for a socket left unwatched
    // and closed since: the number is a new socket's, added below.)
    int left = hoist_curl_loop_take(loop, socket);
    if ((socketp != NULL || left) && epoll_ctl(loop->epoll, EPOLL_CTL_MOD, socket, &event) == 0) {
        if (socketp == NULL) curl_multi_assign(loop->multi, socket, loop);
        return 0;
    }
    if (epoll_ctl(loop->epoll, EPOLL_CTL_ADD, socket, &event) != 0 && errno == EEXIST) {
        epoll_ctl(loop->epoll, EPOLL_CTL_MOD, socket, &event);
    }
    curl_multi_assign(loop->multi, socket, loop);
    return 0;
}

static int hoist_curl_loop_timer(CURLM *multi, long timeout, void *user) {
    (void)multi;
    hoist_curl_loop *loop = (hoist_curl_loop *)user;
    loop->deadline = timeout < 0 ? -1 : hoist_curl_loop_now() + timeout;
    return 0;
}

/// A loop for `multi` (its socket and timer callbacks set to the loop's); NULL when epoll or
/// eventfd cannot be had.
static inline hoist_curl_loop *hoist_curl_loop_create(CURLM *multi) {
    hoist_curl_loop *loop = (hoist_curl_loop *)calloc(1, sizeof *loop);
    if (loop == NULL) return NULL;
    loop->multi = multi;
    loop->deadline = -1;
    loop->epoll = epoll_create1(EPOLL_CLOEXEC);
    loop->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event event = {0};
    event.events = EPOLLIN;
    event.data.fd = loop->wake;
    if (loop->epoll < 0 || loop->wake < 0 || epoll_ctl(loop->epoll, EPOLL_CTL_ADD, loop->wake, &event) != 0) {
        if (loop->epoll >= 0) close(loop->epoll);
        if (loop->wake >= 0) close(loop->wake);
        free(loop);
        return NULL;
    }
    curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, hoist_curl_loop_socket);
    curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, loop);
    curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, hoist_curl_loop_timer);
    curl_multi_setopt(multi, CURLMOPT_TIMERDATA, loop);
    return loop;
}

/// Names the calling thread for the kernel (top -H, perf): PR_SET_NAME, at most 15 bytes.
static inline void hoist_curl_name_thread(const char *name) { prctl(PR_SET_NAME, name, 0, 0, 0); }

/// Wakes the loop's thread from `hoist_curl_loop_step` (thread-safe).
static inline void hoist_curl_loop_wakeup(hoist_curl_loop *loop) {
    uint64_t one = 1;
    ssize_t wrote = write(loop->wake, &one, sizeof one);
    (void)wrote;   // EAGAIN: a wakeup is pending already
}

/// Waits at most `wait` milliseconds (less when curl's timeout is due sooner) for a ready socket
/// or a wakeup, then lets curl act on each ready socket and on its timeout if due.
static inline void hoist_curl_loop_step(hoist_curl_loop *loop, int wait) {
    if (loop->deadline >= 0) {
        int64_t due = loop->deadline - hoist_curl_loop_now();
        if (due < wait) wait = due < 0 ? 0 : (int)due;
    }
    struct epoll_event events[64];
    int count = epoll_wait(loop->epoll, events, 64, wait);
    int running = 0;
    for (int index = 0; index < count; index++) {
        int fd = events[index].data.fd;
        if (fd == loop->wake) {
            uint64_t value;
            ssize_t got = read(loop->wake, &value, sizeof value);
            (void)got;
            continue;
        }
        if (hoist_curl_loop_take(loop, fd)) {
            // Ready while curl does not watch it (a kept connection the server closed): out of the set.
            epoll_ctl(loop->epoll, EPOLL_CTL_DEL, fd, NULL);
            continue;
        }
        uint32_t ready = events[index].events;
        int mask = ((ready & EPOLLIN) ? CURL_CSELECT_IN : 0) | ((ready & EPOLLOUT) ? CURL_CSELECT_OUT : 0)
            | ((ready & (EPOLLERR | EPOLLHUP)) ? CURL_CSELECT_ERR : 0);
        curl_multi_socket_action(loop->multi, fd, mask, &running);
    }
    if (loop->deadline >= 0 && loop->deadline <= hoist_curl_loop_now()) {
        loop->deadline = -1;
        curl_multi_socket_action(loop->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    }
}
#endif
