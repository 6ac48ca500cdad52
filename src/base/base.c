/* rumor.c - error strings, logging, clock. */
#include "rumor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int rumor_log_level = RUMOR_LOG_INFO;
static char log_id[32];

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
    }
    return "unknown error";
}

static _Thread_local rumor_err_t last_error;

rumor_err_t rumor_last_error(void) { return last_error; }

rumor_err_t rumor_fail(char *err, rumor_err_t code, const char *fmt, ...)
{
    last_error = code;
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, RUMOR_ERR_LEN, fmt, ap);
        va_end(ap);
    }
    return code;
}

void rumor_log_set_id(const char *id)
{
    snprintf(log_id, sizeof log_id, "%s", id ? id : "");
}

void rumor_log_write(rumor_log_level_t level, const char *fmt, ...)
{
    static const char *names[] = {"error", "warn", "info", "debug"};
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (log_id[0])
        fprintf(stderr, "rumor[%s] %s: %s\n", log_id, names[level], line);
    else
        fprintf(stderr, "rumor %s: %s\n", names[level], line);
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
