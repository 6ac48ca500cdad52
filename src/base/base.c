/* base.c - error strings and messages, logging, the clock. */
#include "base.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int rumor_log_level = RUMOR_LOG_INFO;
static char log_id[32];                  /* the process's node (rumor node has one) */
static _Thread_local char thread_log_id[32]; /* this thread's node, where several run (librumor) */

const char *rumor_strerror(rumor_err_t err)
{
    switch (err) {
    case RUMOR_OK: return "success";
    case RUMOR_EINVAL: return "invalid argument";
    case RUMOR_ENOMEM: return "out of memory";
    case RUMOR_EPROTO: return "protocol error";
    case RUMOR_EAUTH: return "authentication failed";
    case RUMOR_ECLOSED: return "closed";
    case RUMOR_ETIMEDOUT: return "timed out";
    case RUMOR_ELAYOUT: return "parameter layout mismatch";
    case RUMOR_ENOTSUP: return "not supported";
    case RUMOR_EIO: return "I/O error";
    case RUMOR_EFORMAT: return "bad file format";
    case RUMOR_ENODEV: return "no such device";
    case RUMOR_ESTATE: return "called out of order";
    case RUMOR_EAGAIN: return "not done yet: call again";
    }
    return "unknown error";
}

static _Thread_local rumor_err_t last_error;
static _Thread_local char last_message[RUMOR_ERR_LEN];

rumor_err_t rumor_last_error(void) { return last_error; }

const char *rumor_errmsg(void) { return last_message; }

rumor_err_t rumor_fail(char *err, rumor_err_t code, const char *fmt, ...)
{
    last_error = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    va_end(ap);
    if (err && err != last_message) memcpy(err, last_message, RUMOR_ERR_LEN);
    return code;
}

void rumor_log_set_id(const char *id)
{
    snprintf(log_id, sizeof log_id, "%s", id ? id : "");
    snprintf(thread_log_id, sizeof thread_log_id, "%s", id ? id : "");
}

/* rumor_set_log's sink, and the lock that serialises its calls. */
static rumor_log_fn log_sink;
static void *log_arg;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

void rumor_set_log(rumor_log_fn sink, void *arg, rumor_log_level_t level)
{
    pthread_mutex_lock(&log_mu);
    log_sink = sink;
    log_arg = arg;
    pthread_mutex_unlock(&log_mu);
    rumor_log_level = (int)level;
}

static bool journal; /* stderr is the journal's stream */
static pthread_once_t journal_once = PTHREAD_ONCE_INIT;

static void journal_check(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    journal = js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && fstat(2, &st) == 0 &&
              (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

const char *rumor_log_priority(rumor_log_level_t level)
{
    static const char *const prio[] = {"<3>", "<4>", "<6>", "<7>"};
    pthread_once(&journal_once, journal_check);
    return journal && (unsigned)level < 4 ? prio[level] : "";
}

void rumor_log_write(rumor_log_level_t level, const char *fmt, ...)
{
    static const char *names[] = {"error", "warn", "info", "debug"};
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&log_mu);
    const rumor_log_fn sink = log_sink;
    if (sink) sink(log_arg, level, line);
    pthread_mutex_unlock(&log_mu);
    if (sink) return;
    const char *id = thread_log_id[0] ? thread_log_id : log_id;
    const char *prio = rumor_log_priority(level);
    if (id[0])
        fprintf(stderr, "%srumor[%s] %s: %s\n", prio, id, names[level], line);
    else
        fprintf(stderr, "%srumor %s: %s\n", prio, names[level], line);
}

double rumor_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t rumor_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t rumor_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

uint64_t rumor_unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t rumor_fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

double rumor_median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- the CPU ---- */

static rumor_isa_t isa_of_cpu(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))
        return RUMOR_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return RUMOR_ISA_AVX2;
#endif
    return RUMOR_ISA_PORTABLE;
}

rumor_isa_t rumor_isa(void)
{
    static _Atomic int known = -1;
    int v = atomic_load(&known);
    if (v < 0) {
        rumor_isa_t isa = isa_of_cpu();
        const char *cap = getenv("RUMOR_ISA");
        if (cap && strcmp(cap, "portable") == 0) isa = RUMOR_ISA_PORTABLE;
        else if (cap && strcmp(cap, "avx2") == 0 && isa > RUMOR_ISA_AVX2) isa = RUMOR_ISA_AVX2;
        v = (int)isa;
        atomic_store(&known, v);
    }
    return (rumor_isa_t)v;
}

const char *rumor_isa_name(rumor_isa_t isa)
{
    return isa == RUMOR_ISA_AVX512 ? "avx512" : isa == RUMOR_ISA_AVX2 ? "avx2" : "portable";
}
