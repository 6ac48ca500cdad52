/* test_backend_cuda.c - the CUDA backend against the CPU backend: every op on random inputs
 * of odd sizes (millions of floats for the streaming ops), a training step of each model,
 * mixing, checkpoints across backends, and a failing call reported with its call site
 * (tests/backend_compare.c). Skipped (77) when no CUDA device is usable, saying why. */
#include "backend_compare.h"
#include "check.h"

#include <stdlib.h>
#include <unistd.h>

int main(void)
{
    char err[RUMOR_ERR_LEN] = "";
    /* The tolerances are for exact float32 matrix products. */
    unsetenv("RUMOR_CUDA_TF32");
    rumor_backend_t *be = rumor_backend_new("cuda", 0, err);
    if (!be) {
        fprintf(stderr, "skipped: %s\n", err);
        return CHECK_SKIP;
    }
    char dir[] = "/tmp/rumor-test-cuda-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    CHECK_MSG(backend_compare_all(be, false, true, dir) == 0, "comparisons against the CPU backend failed");
    rumor_backend_destroy(&be);
    rmdir(dir);
    return check_done();
}
