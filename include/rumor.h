/*
 * rumor.h - librumor, the C library of rumor: one peer of a rumor swarm inside a program of
 * your own. The one public header: every function librumor exports is declared here, and
 * nothing else is exported.
 *
 * rumor trains models in a peer-to-peer swarm: peers gossip their parameters over CurveZMQ
 * (always encrypted; a peer is admitted only with a certificate of the swarm's authority) and
 * mix them with their neighbours' after their local steps. `rumor node` does that for rumor's
 * own models; this library is growing the same for a caller's own tensors and training loop
 * (docs/design/library.md). What it holds today: the error codes and their messages, the
 * versions, and the log sink.
 *
 * Errors. Every function that can fail returns rumor_err_t (RUMOR_OK = 0). The sentence that
 * says what went wrong and what to do is rumor_errmsg(), on the calling thread, until the next
 * failure on that thread. Codes are ABI; sentences are not (do not parse them).
 *
 * ABI. librumor.so.0: the number after .so changes on any incompatible change (a function
 * removed, its signature or meaning changed, an enum value or a macro changed, a setting
 * removed or its meaning changed) and on nothing else. New functions, new error codes
 * (appended), new settings and new keys in the status JSON come without a change. Only the
 * functions declared here are exported (a version script, node RUMOR_0). The wire protocol
 * has its own version (rumor_protocol_version) and compatibility table (proto/PROTOCOL.md).
 *
 * Build against it with `pkg-config --cflags --libs rumor` once `meson install` put it in
 * place. C99 or later, or C++11 or later.
 */
#ifndef RUMOR_H
#define RUMOR_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define RUMOR_API __attribute__((visibility("default")))
#else
#define RUMOR_API
#endif

/* The version of this header, for compile-time checks (rumor_version gives the library's). */
#define RUMOR_VERSION_MAJOR 0
#define RUMOR_VERSION_MINOR 1
#define RUMOR_VERSION_PATCH 0
#define RUMOR_ABI_VERSION 0

/* ---- errors ---- */

typedef enum {
    RUMOR_OK = 0,
    RUMOR_EINVAL = 1,     /* a bad argument or setting; the message names it and what it takes */
    RUMOR_ENOMEM = 2,     /* out of memory */
    RUMOR_EPROTO = 3,     /* a protocol violation */
    RUMOR_EAUTH = 4,      /* admission failed: certificate, key, revocation, every bootstrap refused */
    RUMOR_ECLOSED = 5,    /* closed (a peer, a connection) */
    RUMOR_ETIMEDOUT = 6,  /* a deadline passed (join-timeout: nobody let us in) */
    RUMOR_ELAYOUT = 7,    /* parameters that do not fit: the message names the first that differs */
    RUMOR_ENOTSUP = 8,    /* not supported by this build or with these settings */
    RUMOR_EIO = 9,        /* a file or socket could not be read or written; errno holds the cause */
    RUMOR_EFORMAT = 10,   /* a file is not what it should be (a checkpoint, a key, a certificate) */
    RUMOR_ENODEV = 11,    /* the machine lacks the device a backend needs */
    RUMOR_ESTATE = 12,    /* called out of order, on a finished object, or in a process that did
                             not make the object (a forked child) */
    RUMOR_EAGAIN = 13,    /* not done within the time given, or interrupted: call again to go on */
} rumor_err_t;

/* A short static description of code ("parameter layout mismatch"); never NULL, also for
 * codes this library does not know ("unknown error"). Any thread. */
RUMOR_API const char *rumor_strerror(rumor_err_t code);

/* The sentence of the last failure on this thread: what is wrong and what to do ("--bootstrap
 * x: expected rumor://KEY@HOST:PORT"). "" when nothing failed on this thread yet. Borrowed:
 * valid until the next failure on this thread. */
RUMOR_API const char *rumor_errmsg(void);

/* ---- versions ---- */

/* The library's version as "0.1.0"; each pointer that is not NULL gets its number. Static
 * string. Any thread. */
RUMOR_API const char *rumor_version(int *major, int *minor, int *patch);
/* The number in the library's soname (librumor.so.N): a program built against another N must
 * not use it (compare with RUMOR_ABI_VERSION). Any thread. */
RUMOR_API int rumor_abi_version(void);
/* The wire protocol version this library speaks; peers speak only their own (PROTOCOL.md). */
RUMOR_API int rumor_protocol_version(void);

/* ---- logging ---- */

typedef enum {
    RUMOR_LOG_ERROR = 0,
    RUMOR_LOG_WARN = 1,
    RUMOR_LOG_INFO = 2,
    RUMOR_LOG_DEBUG = 3,
} rumor_log_level_t;

/* Where log lines go: sink(arg, level, line) for every line at or below level (line without
 * its newline, borrowed for the call), from any of rumor's threads, one call at a time; a sink
 * must not call rumor. NULL: standard error, as `rumor` writes them (the default). Set it
 * before anything runs; it is the process's. */
typedef void (*rumor_log_fn)(void *arg, rumor_log_level_t level, const char *line);
RUMOR_API void rumor_set_log(rumor_log_fn sink, void *arg, rumor_log_level_t level);

#ifdef __cplusplus
}
#endif

#endif
