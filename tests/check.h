/*
 * check.h - the test harness: a handful of macros, no framework.
 *
 * CHECK(cond) and CHECK_NEAR(a, b, tol) record a failure with file:line and go on, so one
 * run shows every broken expectation; CHECK_RC(expr) expects RUMOR_OK. A test file's main()
 * ends with `return check_done();`, which prints a one-line summary and returns 1 when
 * anything failed. A part that cannot run here (no GPU, no dataset) calls check_skip() with
 * the reason and the file goes on with the rest; check_done() then returns CHECK_SKIP (77),
 * which meson reports as skipped, not passed, unless something failed. A file that can run
 * nothing at all may return CHECK_SKIP at once, saying why. Otherwise it returns 0.
 */
#ifndef RUMOR_CHECK_H
#define RUMOR_CHECK_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#define CHECK_SKIP 77

static int check_failures_, check_count_, check_skips_;

#define CHECK(cond)                                                                           \
    do {                                                                                      \
        check_count_++;                                                                       \
        if (!(cond)) {                                                                        \
            check_failures_++;                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);         \
        }                                                                                     \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                  \
    do {                                                                                      \
        check_count_++;                                                                       \
        if (!(cond)) {                                                                        \
            check_failures_++;                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);         \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fputc('\n', stderr);                                                              \
        }                                                                                     \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                 \
    do {                                                                                      \
        double a_ = (double)(a), b_ = (double)(b);                                            \
        check_count_++;                                                                       \
        if (!(fabs(a_ - b_) <= (double)(tol))) {                                              \
            check_failures_++;                                                                \
            fprintf(stderr, "%s:%d: CHECK_NEAR failed: %s = %.9g, %s = %.9g, tol %g\n",      \
                    __FILE__, __LINE__, #a, a_, #b, b_, (double)(tol));                       \
        }                                                                                     \
    } while (0)

#define CHECK_RC(expr)                                                                        \
    do {                                                                                      \
        int rc_ = (int)(expr);                                                                \
        check_count_++;                                                                       \
        if (rc_ != 0) {                                                                       \
            check_failures_++;                                                                \
            fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, __LINE__, #expr, rc_);      \
        }                                                                                     \
    } while (0)

/* A part of the file that cannot run here: prints "skip: " and the reason (printf-style), and
 * makes check_done() report the file as skipped. */
static inline void check_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void check_skip(const char *fmt, ...)
{
    va_list ap;
    check_skips_++;
    fputs("skip: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static inline int check_done(void)
{
    fprintf(stderr, "%d checks, %d failed, %d parts skipped\n", check_count_, check_failures_, check_skips_);
    return check_failures_ ? 1 : check_skips_ ? CHECK_SKIP : 0;
}

#endif
