/*
 * epidemic.c - epidemic (randomized) gossip: every round every node pushes to S distinct
 * peers drawn uniformly afresh, from the stream (seed, round, rank). Nothing repeats (period
 * 0), yet nothing is secret either: a node that shares the view can recompute any other
 * node's choice, which is how a receiver knows who sends to it in a round.
 *
 * In-degrees vary from round to round, so W^T is only column-stochastic: this family is for
 * push-sum, which corrects the bias with its weights. On n <= S peers a node pushes to all
 * n - 1 others rather than failing: the family makes sense for any swarm size, and a view
 * that shrinks below S should not stop gossip.
 */
#include "rng.h"
#include "topology.h"

#include <stdlib.h>

#define SALT 0x657069646d696353ULL /* "epidmicS" */

static rumor_err_t epidemic_parse(rumor_topology_param_t *p, const char *arg, char err[RUMOR_ERR_LEN])
{
    return rumor_topology_parse_long(&p->k, "epidemic:S", "a fan-out S", arg, 1, RUMOR_TOPOLOGY_MAX_PEERS - 1, err);
}

static uint64_t epidemic_period(const rumor_topology_param_t *p, size_t n)
{
    (void)p;
    (void)n;
    return 0;
}

static rumor_err_t epidemic_build(const rumor_topology_param_t *p, size_t n, uint64_t round,
                                  rumor_topology_edges_t *out, char err[RUMOR_ERR_LEN])
{
    size_t s = (size_t)p->k < n - 1 ? (size_t)p->k : n - 1;
    if (s == 0) return RUMOR_OK;
    /* mark[x] == i + 1: x was chosen by node i (no clearing between nodes). */
    uint32_t *mark = calloc(n, sizeof *mark);
    if (!mark) return rumor_fail(err, RUMOR_ENOMEM, "out of memory drawing epidemic:%zu", s);
    rumor_err_t rc = RUMOR_OK;
    for (size_t i = 0; i < n && rc == RUMOR_OK; i++) {
        rumor_rng_t rng;
        rumor_rng_init2(&rng, p->seed ^ SALT, round, i);
        /* Floyd's sampling of s distinct values from the n - 1 ranks other than i (x >= i is
         * shifted up by one to skip i): s draws, whatever s is. */
        size_t others = n - 1;
        for (size_t j = others - s; j < others && rc == RUMOR_OK; j++) {
            size_t x = rumor_rng_below(&rng, j + 1);
            if (mark[x] == i + 1) x = j;
            mark[x] = (uint32_t)(i + 1);
            rc = rumor_topology_edges_add(out, i, x < i ? x : x + 1, 0, err);
        }
    }
    free(mark);
    return rc;
}

const struct rumor_topology_ops rumor_topology_epidemic_ops = {
    .name = "epidemic",
    .usage = "epidemic:S      every round each node pushes to S random peers (seeded by round)",
    .directed = true,
    .parse = epidemic_parse,
    .period = epidemic_period,
    .build = epidemic_build,
};
