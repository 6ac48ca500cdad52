/* torus.c - the 2-D torus: peers on an r x c grid with wrap-around, four neighbours each.
 * r is the largest divisor of n with r*r <= n, so the grid is as square as n allows and the
 * gap shrinks as 1/n rather than the ring's 1/n^2. A prime n only factors as 1 x n: that
 * torus is the ring, and it is accepted as such rather than refused, so that any swarm size
 * works. */
#include "topology.h"

static size_t torus_rows(size_t n)
{
    size_t r = 1;
    for (size_t d = 1; d * d <= n; d++)
        if (n % d == 0) r = d;
    return r;
}

static uint64_t torus_period(const rumor_topology_param_t *p, size_t n)
{
    (void)p;
    (void)n;
    return 1;
}

static rumor_err_t torus_build(const rumor_topology_param_t *p, size_t n, uint64_t round,
                               rumor_topology_edges_t *out, char err[RUMOR_ERR_LEN])
{
    (void)p;
    (void)round;
    size_t rows = torus_rows(n), cols = n / rows;
    for (size_t i = 0; i < n; i++) {
        size_t a = i / cols, b = i % cols;
        /* Right and down neighbours; left and up come from the other end of each edge. A
         * side of 1 makes a self loop and a side of 2 a repeat: both are dropped. */
        size_t right = a * cols + (b + 1) % cols, down = ((a + 1) % rows) * cols + b;
        rumor_err_t rc;
        if ((rc = rumor_topology_edges_add(out, i, right, 0, err)) != RUMOR_OK ||
            (rc = rumor_topology_edges_add(out, i, down, 0, err)) != RUMOR_OK)
            return rc;
    }
    return RUMOR_OK;
}

const struct rumor_topology_ops rumor_topology_torus_ops = {
    .name = "torus",
    .usage = "torus           2-D torus, r x c as square as n allows (prime n: the ring)",
    .period = torus_period,
    .build = torus_build,
};
