/* ring.c - each peer talks to its two neighbours i-1 and i+1: degree 2, but a spectral gap
 * that shrinks as 1/n^2. */
#include "topology.h"

static uint64_t ring_period(const rumor_topology_param_t *p, size_t n)
{
    (void)p;
    (void)n;
    return 1;
}

static rumor_err_t ring_build(const rumor_topology_param_t *p, size_t n, uint64_t round,
                              rumor_topology_edges_t *out, char err[RUMOR_ERR_LEN])
{
    (void)p;
    (void)round;
    /* On 2 peers both edges are the same one; repeats are dropped. */
    for (size_t i = 0; i < n && n > 1; i++) {
        rumor_err_t rc = rumor_topology_edges_add(out, i, (i + 1) % n, 0, err);
        if (rc != RUMOR_OK) return rc;
    }
    return RUMOR_OK;
}

const struct rumor_topology_ops rumor_topology_ring_ops = {
    .name = "ring",
    .usage = "ring            i <-> i-1, i+1",
    .period = ring_period,
    .build = ring_build,
};
