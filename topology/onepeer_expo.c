/* onepeer_expo.c - the one-peer exponential graph (Ying et al. 2021): at round t every node
 * pushes half of its value to the single peer i + 2^(t mod tau) (mod n), tau = ceil(log2 n).
 * One message per round. On n = 2^tau peers the product of one period is exactly J: after
 * rounds 0..t every value is the mean of 2^(t+1) consecutive ranks. Elsewhere a period only
 * contracts. */
#include "topology.h"

static uint64_t ceil_log2(size_t n)
{
    uint64_t tau = 0;
    while (((size_t)1 << tau) < n) tau++;
    return tau;
}

static uint64_t onepeer_expo_period(const rumor_topology_param_t *p, size_t n)
{
    (void)p;
    uint64_t tau = ceil_log2(n);
    return tau ? tau : 1; /* a lone peer: one empty round */
}

static rumor_err_t onepeer_expo_build(const rumor_topology_param_t *p, size_t n, uint64_t round,
                                      rumor_topology_edges_t *out, char err[RUMOR_ERR_LEN])
{
    (void)p;
    if (n < 2) return RUMOR_OK;
    size_t hop = (size_t)1 << round; /* round < period = tau */
    for (size_t i = 0; i < n; i++) {
        rumor_err_t rc = rumor_topology_edges_add(out, i, (i + hop) % n, 0, err);
        if (rc != RUMOR_OK) return rc;
    }
    return RUMOR_OK;
}

const struct rumor_topology_ops rumor_topology_onepeer_expo_ops = {
    .name = "onepeer-expo",
    .usage = "onepeer-expo    one-peer exponential: at round t, i -> i + 2^(t mod ceil(log2 n))",
    .directed = true,
    .period = onepeer_expo_period,
    .build = onepeer_expo_build,
};
