/*
 * erdos.c - the Erdős–Rényi graph G(n, P): every pair is an edge with probability P, drawn
 * once per (seed, n). Gossip over a disconnected graph never averages, so the draw is
 * conditioned on connectivity: up to 16 draws, and an error that says so when none is
 * connected (P well below the threshold ln(n)/n). One coin per pair, O(n^2): fine for the
 * thousands of peers a swarm or a simulation has.
 *
 * The coin compares a raw 64-bit draw with P * 2^64 (exact in floating point), so the graph
 * does not depend on any machine's libm.
 */
#include "rng.h"
#include "topology.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SALT 0x6572646f73524e47ULL /* "erdosRNG" */
#define DRAWS 16

static rumor_err_t erdos_parse(rumor_topology_param_t *p, const char *arg, char err[RUMOR_ERR_LEN])
{
    /* strtod alone would take leading spaces, signs, hex and "inf": a spec is plain decimal. */
    bool ok = arg && *arg && strlen(arg) < 32;
    for (const char *c = arg; ok && *c; c++)
        ok = (*c >= '0' && *c <= '9') || *c == '.' || *c == 'e' || *c == 'E' || *c == '-';
    char *end = NULL;
    double v = ok ? strtod(arg, &end) : 0;
    if (!ok || *end || !(v > 0.0 && v <= 1.0))
        return rumor_fail(err, RUMOR_EINVAL, "erdos:P needs a probability 0 < P <= 1, not '%s'", arg ? arg : "");
    p->p = v;
    return RUMOR_OK;
}

static uint64_t erdos_period(const rumor_topology_param_t *p, size_t n)
{
    (void)p;
    (void)n;
    return 1;
}

static rumor_err_t erdos_build(const rumor_topology_param_t *p, size_t n, uint64_t round,
                               rumor_topology_edges_t *out, char err[RUMOR_ERR_LEN])
{
    (void)round;
    bool all = p->p >= 1.0;
    uint64_t threshold = all ? UINT64_MAX : (uint64_t)ldexp(p->p, 64); /* P < 1: below 2^64 */
    for (uint64_t draw = 0; draw < DRAWS; draw++) {
        rumor_rng_t rng;
        rumor_rng_init2(&rng, p->seed ^ SALT, n, draw);
        rumor_topology_edges_clear(out);
        for (size_t i = 0; i < n; i++)
            for (size_t j = i + 1; j < n; j++)
                if (all || rumor_rng_next(&rng) < threshold) {
                    rumor_err_t rc = rumor_topology_edges_add(out, i, j, 0, err);
                    if (rc != RUMOR_OK) return rc;
                }
        if (rumor_topology_edges_connected(out, n)) return RUMOR_OK;
    }
    return rumor_fail(err, RUMOR_EINVAL,
                      "erdos:%g on %zu peers: no connected graph in %d draws "
                      "(connectivity needs P above about ln(n)/n = %.3g)",
                      p->p, n, DRAWS, log((double)n) / (double)n);
}

const struct rumor_topology_ops rumor_topology_erdos_ops = {
    .name = "erdos",
    .usage = "erdos:P         Erdos-Renyi G(n, P), seeded, redrawn until connected (0 < P <= 1)",
    .parse = erdos_parse,
    .period = erdos_period,
    .build = erdos_build,
};
