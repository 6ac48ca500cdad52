/* complete.c - every pair of peers talks every round: W = J, averaging in one round, at a
 * cost of n - 1 messages per node. The reference point for the others. */
#include "topology.h"

static uint64_t complete_period(const rumor_topology_param_t *p, size_t n)
{
    (void)p;
    (void)n;
    return 1;
}

static rumor_err_t complete_build(const rumor_topology_param_t *p, size_t n, uint64_t round,
                                  rumor_topology_edges_t *out, char err[RUMOR_ERR_LEN])
{
    (void)p;
    (void)round;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            rumor_err_t rc = rumor_topology_edges_add(out, i, j, 0, err);
            if (rc != RUMOR_OK) return rc;
        }
    return RUMOR_OK;
}

const struct rumor_topology_ops rumor_topology_complete_ops = {
    .name = "complete",
    .usage = "complete        every pair (W = J: exact averaging in one round)",
    .period = complete_period,
    .build = complete_build,
};
