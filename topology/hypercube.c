/* hypercube.c - n = 2^d peers, i <-> i xor 2^b for each bit b: degree log2 n, and with
 * Metropolis–Hastings weights W = (I + A)/(d+1), whose eigenvalues are 1 - 2k/(d+1), so the
 * gap is 2/(d+1). */
#include "topology.h"

static rumor_err_t hypercube_check(const rumor_topology_param_t *p, size_t n, char err[RUMOR_ERR_LEN])
{
    (void)p;
    if (n & (n - 1)) return rumor_fail(err, RUMOR_EINVAL, "hypercube needs a power of 2 peers, not %zu", n);
    return RUMOR_OK;
}

static uint64_t hypercube_period(const rumor_topology_param_t *p, size_t n)
{
    (void)p;
    (void)n;
    return 1;
}

static rumor_err_t hypercube_build(const rumor_topology_param_t *p, size_t n, uint64_t round,
                                   rumor_topology_edges_t *out, char err[RUMOR_ERR_LEN])
{
    (void)p;
    (void)round;
    for (size_t i = 0; i < n; i++)
        for (size_t bit = 1; bit < n; bit <<= 1)
            if (!(i & bit)) {
                rumor_err_t rc = rumor_topology_edges_add(out, i, i | bit, 0, err);
                if (rc != RUMOR_OK) return rc;
            }
    return RUMOR_OK;
}

const struct rumor_topology_ops rumor_topology_hypercube_ops = {
    .name = "hypercube",
    .usage = "hypercube       i <-> i xor 2^b (n a power of 2)",
    .check = hypercube_check,
    .period = hypercube_period,
    .build = hypercube_build,
};
