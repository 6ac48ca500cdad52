/* test_backend_cuda.c - the CUDA backend against the CPU backend: every op on random inputs
 * of odd sizes (millions of floats for the streaming ops), a training step of each model,
 * mixing, checkpoints across backends, and a failing call reported with its call site
 * (tests/backend_compare.c). Skipped (77) only when the machine has no GPU: no CUDA driver or
 * no CUDA device (RUMOR_ENODEV), or no NVIDIA device node at all; saying which. Any other
 * failure to open the backend beside a device node fails. */
#include "backend_compare.h"
#include "check.h"

#include <glob.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

int main(void)
{
    char err[RUMOR_ERR_LEN] = "";
    /* The tolerances are for exact float32 matrix products. */
    unsetenv("RUMOR_CUDA_TF32");
    rumor_backend_t *be;
    rumor_err_t rc = rumor_backend_create(&be, "cuda", 0, err);
    /* A skip only where the machine has no GPU (no driver, no device). A GPU this test cannot
     * use (a driver older than the runtime, a device the build has no code for, a failing
     * call) is what the test exists to find: a failure, never a skip that reads as a pass. */
    if (rc == RUMOR_ENODEV) {
        fprintf(stderr, "skipped: %s\n", err);
        return CHECK_SKIP;
    }
    /* CUDA without a device may also fail in other ways (driver libraries in an image whose
     * machine has no GPU): with no NVIDIA device node at all, that too is no GPU here. */
    glob_t nodes = {0};
    const bool visible = glob("/dev/nvidia[0-9]*", 0, NULL, &nodes) == 0 && nodes.gl_pathc > 0;
    globfree(&nodes);
    if (rc != RUMOR_OK && !visible) {
        fprintf(stderr, "skipped: no NVIDIA device node (/dev/nvidia[0-9]*), and %s\n", err);
        return CHECK_SKIP;
    }
    if (rc != RUMOR_OK) {
        fprintf(stderr, "FAILED: a CUDA device is present but unusable (%s): %s\n", rumor_strerror(rc), err);
        return 1;
    }
    char dir[] = "/tmp/rumor-test-cuda-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    CHECK_MSG(backend_compare_all(be, false, true, dir) == 0, "comparisons against the CPU backend failed");
    rumor_backend_destroy(&be);
    rmdir(dir);
    return check_done();
}
