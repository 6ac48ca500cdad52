/*
 * base.h - what every module shares: the error codes (the public header's, include/rumor.h),
 * result conventions, logging, the clock.
 *
 * Conventions (the code style, docs/ARCHITECTURE.md): functions that can fail return
 * rumor_err_t (RUMOR_OK = 0) and pass results through out-pointers; where the caller needs
 * detail they fill an optional `char err[RUMOR_ERR_LEN]` (NULL allowed) with one human
 * sentence, no trailing newline.
 * Programming errors assert; input from files or the network never does.
 */
#ifndef RUMOR_BASE_H
#define RUMOR_BASE_H

#include "rumor.h" /* rumor_err_t, rumor_strerror, rumor_errmsg, rumor_log_level_t, rumor_set_log */

#include <stdarg.h>
#include <stdbool.h>
#ifndef __cplusplus /* the CUDA backend's C++ includes this header too */
#include <stdatomic.h>
#endif
#include <stddef.h>
#include <stdint.h>

#define RUMOR_ERR_LEN 256
#define RUMOR_KEY_LEN 32 /* a peer's key: Curve25519 or Ed25519 public key, Curve25519 secret, Ed25519 seed */
#define RUMOR_MUST_CHECK __attribute__((warn_unused_result))
#define RUMOR_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define RUMOR_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Fill err (if not NULL) with a formatted message and return code; for one-line error paths:
 *   return rumor_fail(err, RUMOR_EFORMAT, "%s: bad magic", path);
 * The message is also this thread's rumor_errmsg(). */
rumor_err_t rumor_fail(char *err, rumor_err_t code, const char *fmt, ...) RUMOR_PRINTF(3, 4);
/* The code of this thread's last rumor_fail, as errno is for libc: what a constructor that
 * returned NULL (with its message in err) failed with, so its caller need not guess. */
rumor_err_t rumor_last_error(void);

/* ---- the CPU ---- */

/* The widest vector instructions this process uses where a kernel has a path for them: the
 * CPU's, capped by the environment's RUMOR_ISA (portable, avx2 or avx512; read once), so one
 * binary can be measured or tested on each path of a machine. AVX2 means AVX2 and FMA; AVX-512
 * means F, DQ, BW and VL. Not x86-64: portable. */
typedef enum { RUMOR_ISA_PORTABLE, RUMOR_ISA_AVX2, RUMOR_ISA_AVX512 } rumor_isa_t;
rumor_isa_t rumor_isa(void);
const char *rumor_isa_name(rumor_isa_t isa);

/* ---- logging ---- */

extern int rumor_log_level; /* messages above this level cost one comparison */

/* Arguments are not evaluated unless the level is enabled. Lines go to stderr, or to the sink
 * rumor_set_log gave. */
#define rumor_log(level, ...)                                                                 \
    do {                                                                                      \
        if ((int)(level) <= rumor_log_level) rumor_log_write((level), __VA_ARGS__);          \
    } while (0)

void rumor_log_write(rumor_log_level_t level, const char *fmt, ...) RUMOR_PRINTF(2, 3);
/* Short id printed at the start of every line (a node's key prefix); NULL for none: the
 * process's, and this thread's (which wins where several nodes run in one process). */
void rumor_log_set_id(const char *id);
/* "<3>", "<4>", "<6>" or "<7>" for an error, warning, information or debugging line where stderr
 * is the journal's stream (a systemd service: JOURNAL_STREAM names it), which journald takes as
 * the line's priority and strips (sd-daemon(3)); "" elsewhere. */
const char *rumor_log_priority(rumor_log_level_t level);

/* Whether a caller's request flag (a stop a signal handler set) is raised; NULL: never. Only
 * the command line keeps such flags: library code is handed a pointer to them. */
#ifndef __cplusplus
static inline bool rumor_asked(const atomic_bool *flag) { return flag && atomic_load(flag); }
#endif

/* Chunks of at most `per` values that hold `count` values (per > 0). */
static inline size_t rumor_chunks(size_t count, size_t per) { return (count + per - 1) / per; }

/* Monotonic seconds, for timing and progress; never used by pure state machines. */
double rumor_now(void);
/* The same clock in whole milliseconds (the unit the state machines are driven in). */
uint64_t rumor_now_ms(void);
/* ... and in microseconds (round traces). */
uint64_t rumor_now_us(void);
/* Wall-clock time in unix milliseconds: for timestamps another machine reads (knocks). */
uint64_t rumor_unix_ms(void);

/* Median of v[0..n) (n > 0); sorts v in place. Benchmarks quote medians: machines are noisy. */
double rumor_median(double *v, size_t n);

/* FNV-1a 64 of len bytes, continuing from h (start from RUMOR_FNV_BASIS): for ids and
 * agreement checks, not against an adversary. */
#define RUMOR_FNV_BASIS 0xcbf29ce484222325ULL
uint64_t rumor_fnv1a(uint64_t h, const void *data, size_t len);

#endif
