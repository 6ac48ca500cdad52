/* expo.c - the static exponential graph (Assran et al. 2019, Ying et al. 2021): directed,
 * i -> i + 2^k (mod n) for every 2^k <= n - 1, so about log2 n out-neighbours and as many
 * in-neighbours. Every node has the same out-degree, so the uniform push shares make W
 * doubly stochastic. */
#include "topology.h"

static uint64_t expo_period(const rumor_topology_param_t *p, size_t n)
{
    (void)p;
    (void)n;
    return 1;
}

static rumor_err_t expo_build(const rumor_topology_param_t *p, size_t n, uint64_t round,
                              rumor_topology_edges_t *out, char err[RUMOR_ERR_LEN])
{
    (void)p;
    (void)round;
    for (size_t i = 0; i < n; i++)
        for (size_t hop = 1; hop <= n - 1; hop <<= 1) {
            rumor_err_t rc = rumor_topology_edges_add(out, i, (i + hop) % n, 0, err);
            if (rc != RUMOR_OK) return rc;
        }
    return RUMOR_OK;
}

const struct rumor_topology_ops rumor_topology_expo_ops = {
    .name = "expo",
    .usage = "expo            static exponential, directed: i -> i + 2^k",
    .directed = true,
    .period = expo_period,
    .build = expo_build,
};
