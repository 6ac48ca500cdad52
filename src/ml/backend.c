/* backend.c - the backend registry: the only place outside gpu/ that knows about CUDA. */
#define _GNU_SOURCE /* sched_getaffinity */
#include "backend.h"

#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
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

#if RUMOR_HAVE_CUDA
/* The CUDA backend is a module of its own (gpu/meson.build), loaded the first time a device is
 * asked for and never unloaded (the CUDA libraries keep state for the life of the process):
 * rumor starts without the CUDA libraries, and runs on a machine that has none. NULL with why
 * when it cannot be loaded. */
static void *open_module(char why[RUMOR_ERR_LEN])
{
    /* The library path first (LD_LIBRARY_PATH: a bundle of binaries and libraries), then the
     * folder this program's build or installation put the module in. A path, not the
     * program's RUNPATH: a sanitizer's dlopen interceptor makes itself the caller, whose
     * RUNPATH is not the program's. */
    void *h = dlopen(RUMOR_CUDA_MODULE, RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    char first[RUMOR_ERR_LEN];
    snprintf(first, sizeof first, "%s", dlerror());
    char exe[4096], path[4096 + 64];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    const bool built = strncmp(exe, RUMOR_BUILD_ROOT "/", strlen(RUMOR_BUILD_ROOT "/")) == 0;
    snprintf(path, sizeof path, "%s/%s", built ? RUMOR_CUDA_MODULE_BUILD_DIR : RUMOR_CUDA_MODULE_DIR, RUMOR_CUDA_MODULE);
    if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL))) return h;
    /* The first failure says more when the library path found one that would not load. */
    const bool found = !strstr(first, "cannot open shared object file");
    rumor_fail(why, RUMOR_ENOTSUP, "the CUDA backend cannot be loaded: %s", found ? first : dlerror());
    return NULL;
}

static const struct rumor_backend_ops *cuda_ops(char why[RUMOR_ERR_LEN])
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static void *module; /* kept: reachable, so never counted as a leak */
    pthread_mutex_lock(&mu);
    if (!module) module = open_module(why);
    void *m = module;
    pthread_mutex_unlock(&mu);
    if (!m) return NULL;
    const unsigned *abi = dlsym(m, "rumor_backend_cuda_abi");
    const struct rumor_backend_ops *ops = dlsym(m, "rumor_backend_cuda_ops");
    if (!abi || !ops || abi[0] != RUMOR_BACKEND_ABI || abi[1] != sizeof *ops) {
        rumor_fail(why, RUMOR_ENOTSUP, "%s was built for another rumor (its ops table differs): rebuild it",
                   RUMOR_CUDA_MODULE);
        return NULL;
    }
    return ops;
}
#endif

rumor_err_t rumor_backend_create(rumor_backend_t **be_p, const char *name, int threads,
                                 char err[RUMOR_ERR_LEN])
{
    *be_p = NULL;
    if (threads <= 0) threads = rumor_backend_default_threads();
    if (strcmp(name, "cpu") == 0) return backend_open(be_p, &rumor_backend_cpu_ops, threads, err);
    if (strcmp(name, "cuda") == 0 || strcmp(name, "auto") == 0) {
#if RUMOR_HAVE_CUDA
        char why[RUMOR_ERR_LEN] = "";
        const struct rumor_backend_ops *ops = cuda_ops(why);
        rumor_err_t rc = ops ? backend_open(be_p, ops, threads, why) : RUMOR_ENOTSUP;
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
