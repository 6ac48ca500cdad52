/*
 * trace.c - a peer's round events, buffered and appended to its file (see trace.h).
 */
#include "trace.h"

#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FLUSH_AT 65536 /* bytes buffered before they are appended */

struct rumor_trace {
    char *path;
    char *buf;
    size_t len, cap;
    uint8_t self[RUMOR_KEY_LEN];
    pthread_mutex_t mu;      /* a node's trainer and node threads both write */
    bool failed;             /* an append failed: the rest is dropped, close says so */
    int err_no;
};

static void flush(rumor_trace_t *t)
{
    if (t->failed || t->len == 0) return;
    const int fd = open(t->path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0 || rumor_write_all(fd, t->buf, t->len) != 0) {
        t->failed = true;
        t->err_no = errno;
    }
    if (fd >= 0) close(fd);
    t->len = 0;
}

static void line(rumor_trace_t *t, const char *fmt, ...) RUMOR_PRINTF(2, 3);
static void line(rumor_trace_t *t, const char *fmt, ...)
{
    if (t->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        const int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            break;
        }
        if (t->len == 0) { /* a line longer than the buffer: grow it */
            char *b = realloc(t->buf, (size_t)n + 1);
            if (!b) {
                t->failed = true;
                t->err_no = ENOMEM;
                return;
            }
            t->buf = b, t->cap = (size_t)n + 1;
            continue;
        }
        flush(t);
        if (t->failed) return;
    }
    if (t->len >= FLUSH_AT) flush(t);
}

/* The first n bytes of key in hex (out holds 2n + 1). */
static void hex(char *out, const uint8_t *key, int n)
{
    for (int i = 0; i < n; i++) snprintf(out + 2 * i, 3, "%02x", key[i]);
}

rumor_trace_t *rumor_trace_open(const char *path, const uint8_t self[RUMOR_KEY_LEN], uint64_t place, bool append,
                                char err[RUMOR_ERR_LEN])
{
    rumor_trace_t *t = calloc(1, sizeof *t);
    if (t) t->path = strdup(path), t->cap = 2 * FLUSH_AT, t->buf = malloc(t->cap);
    if (!t || !t->path || !t->buf) {
        if (t) free(t->path), free(t->buf);
        free(t);
        rumor_fail(err, RUMOR_ENOMEM, "out of memory for a trace");
        return NULL;
    }
    const int fd = open(path, O_WRONLY | O_CREAT | (append ? 0 : O_TRUNC) | O_CLOEXEC, 0600);
    if (fd < 0) {
        rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
        free(t->path), free(t->buf), free(t);
        return NULL;
    }
    close(fd);
    memcpy(t->self, self, RUMOR_KEY_LEN);
    pthread_mutex_init(&t->mu, NULL);
    char h[2 * RUMOR_KEY_LEN + 1];
    hex(h, self, RUMOR_KEY_LEN);
    if (place) line(t, "self %s %016" PRIx64 "\n", h, place);
    else line(t, "self %s\n", h);
    return t;
}

rumor_err_t rumor_trace_close(rumor_trace_t *t, char err[RUMOR_ERR_LEN])
{
    if (!t) return RUMOR_OK;
    flush(t);
    const rumor_err_t rc =
        t->failed ? rumor_fail(err, RUMOR_EIO, "%s: %s", t->path, strerror(t->err_no)) : RUMOR_OK;
    pthread_mutex_destroy(&t->mu);
    free(t->path), free(t->buf), free(t);
    return rc;
}

/* Each event is written whole under the trace's lock. */
#define LOCKED(t, ...)                                                                        \
    do {                                                                                      \
        if (!(t)) return;                                                                     \
        pthread_mutex_lock(&(t)->mu);                                                         \
        __VA_ARGS__;                                                                          \
        pthread_mutex_unlock(&(t)->mu);                                                       \
    } while (0)

void rumor_trace_start(rumor_trace_t *t, uint64_t us) { LOCKED(t, line(t, "start %" PRIu64 "\n", us)); }

void rumor_trace_phase(rumor_trace_t *t, uint64_t us, long k) { LOCKED(t, line(t, "phase %" PRIu64 " %ld\n", us, k)); }

void rumor_trace_view(rumor_trace_t *t, uint64_t us, const uint8_t (*keys)[RUMOR_KEY_LEN], int n)
{
    int others = 0;
    for (int i = 0; t && i < n; i++) others += memcmp(keys[i], t->self, RUMOR_KEY_LEN) != 0;
    LOCKED(t, {
        line(t, "view %" PRIu64 " %d", us, others);
        for (int i = 0; i < n; i++) {
            if (memcmp(keys[i], t->self, RUMOR_KEY_LEN) == 0) continue;
            char h[17];
            hex(h, keys[i], 8);
            line(t, " %s", h);
        }
        line(t, "\n");
    });
}

void rumor_trace_send(rumor_trace_t *t, uint64_t us, const uint8_t to[RUMOR_KEY_LEN], uint64_t round)
{
    char h[17];
    hex(h, to, 8);
    LOCKED(t, line(t, "send %" PRIu64 " %s %" PRIu64 "\n", us, h, round));
}

void rumor_trace_arrive(rumor_trace_t *t, uint64_t us, const uint8_t from[RUMOR_KEY_LEN], uint64_t round,
                        uint32_t chunk)
{
    char h[17];
    hex(h, from, 8);
    LOCKED(t, line(t, "arrive %" PRIu64 " %s %" PRIu64 " %" PRIu32 "\n", us, h, round, chunk));
}

void rumor_trace_mixed(rumor_trace_t *t, uint64_t us, const rumor_core_t *core, const rumor_core_after_t *after)
{
    const long k = after->landed ? core->k : core->k - 1;
    LOCKED(t, {
        line(t, "mix %" PRIu64 " %ld %s\n", us, k, after->landed ? "landed" : "mixed");
        if (after->evaluate) line(t, "eval %" PRIu64 " %ld\n", us, k);
        if (after->checkpoint) line(t, "ckpt %" PRIu64 " %ld\n", us, k);
        if (after->finished) line(t, "end %" PRIu64 " %ld\n", us, k);
    });
}

void rumor_trace_end(rumor_trace_t *t, uint64_t us, long k, bool took)
{
    LOCKED(t, line(t, "end %" PRIu64 " %ld %s\n", us, k, took ? "took" : "own"));
}

void rumor_trace_resync(rumor_trace_t *t, uint64_t us, uint64_t round, long k)
{
    LOCKED(t, line(t, "resync %" PRIu64 " %" PRIu64 " %ld\n", us, round, k));
}

void rumor_trace_done(rumor_trace_t *t, uint64_t us, int finished)
{
    LOCKED(t, line(t, "done %" PRIu64 " %d\n", us, finished));
}
