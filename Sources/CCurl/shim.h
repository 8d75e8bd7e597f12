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
/// Multiplexing on the multi handle (CURLPIPE_MULTIPLEX, a macro in multi.h).
static inline long hoist_curl_pipe_multiplex(void) { return CURLPIPE_MULTIPLEX; }
#endif
