/* backend.c - the backend registry: the only place outside gpu/ that knows about CUDA. */
#define _GNU_SOURCE /* sched_getaffinity */
#include "backend.h"

#include "config.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int rumor_backend_default_threads(void)
{
    /* The cores this process may run on (taskset, cpusets), not all the machine's. */
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

const char *rumor_backend_compiled(void)
{
#if RUMOR_HAVE_CUDA
    return "cpu cuda";
#else
    return "cpu";
#endif
}

/* rumor_backend_open, keeping the implementation's code. */
static rumor_err_t backend_open(rumor_backend_t **be_p, const struct rumor_backend_ops *ops, int threads,
                                char err[RUMOR_ERR_LEN])
{
    *be_p = NULL;
    if (threads <= 0) threads = rumor_backend_default_threads();
    rumor_backend_t *be = calloc(1, sizeof *be);
    if (!be) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    be->ops = ops;
    be->threads = threads;
    rumor_err_t rc = ops->open(be, threads, err);
    if (rc != RUMOR_OK) {
        free(be);
        return rc;
    }
    *be_p = be;
    return RUMOR_OK;
}

rumor_backend_t *rumor_backend_open(const struct rumor_backend_ops *ops, int threads,
                                    char err[RUMOR_ERR_LEN])
{
    rumor_backend_t *be;
    (void)backend_open(&be, ops, threads, err);
    return be;
}

rumor_err_t rumor_backend_create(rumor_backend_t **be_p, const char *name, int threads,
                                 char err[RUMOR_ERR_LEN])
{
    *be_p = NULL;
    if (threads <= 0) threads = rumor_backend_default_threads();
    if (strcmp(name, "cpu") == 0) return backend_open(be_p, &rumor_backend_cpu_ops, threads, err);
    if (strcmp(name, "cuda") == 0 || strcmp(name, "auto") == 0) {
#if RUMOR_HAVE_CUDA
        char why[RUMOR_ERR_LEN] = "";
        rumor_err_t rc = backend_open(be_p, &rumor_backend_cuda_ops, threads, why);
        if (rc == RUMOR_OK && strcmp(name, "auto") == 0) rumor_log(RUMOR_LOG_INFO, "device auto: using cuda");
        if (rc == RUMOR_OK) return RUMOR_OK;
        /* The code is the backend's: RUMOR_ENODEV only where the machine has no GPU. */
        if (strcmp(name, "cuda") == 0) return rumor_fail(err, rc, "device cuda: %s", why);
        rumor_log(RUMOR_LOG_INFO, "device auto: CUDA unusable (%s), using cpu", why);
#else
        if (strcmp(name, "cuda") == 0)
            return rumor_fail(err, RUMOR_ENOTSUP, "device cuda: this rumor was built without CUDA");
        rumor_log(RUMOR_LOG_INFO, "device auto: built without CUDA, using cpu");
#endif
        return backend_open(be_p, &rumor_backend_cpu_ops, threads, err);
    }
    return rumor_fail(err, RUMOR_EINVAL, "unknown device '%s' (expected cpu, cuda or auto)", name);
}

rumor_backend_t *rumor_backend_new(const char *name, int threads, char err[RUMOR_ERR_LEN])
{
    rumor_backend_t *be;
    return rumor_backend_create(&be, name, threads, err) == RUMOR_OK ? be : NULL;
}

void rumor_backend_destroy(rumor_backend_t **be_p)
{
    if (!be_p || !*be_p) return;
    rumor_backend_t *be = *be_p;
    be->ops->close(be);
    free(be);
    *be_p = NULL;
}
