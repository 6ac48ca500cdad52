/*
 * regular.c - a random connected D-regular graph, drawn once per (seed, n).
 *
 * Random regular graphs are expanders with high probability: a gap that does not shrink with
 * n at a fixed degree, the property that makes them good gossip graphs. The draw:
 *   - D = 2: a uniformly random Hamiltonian cycle (a ring over a shuffled order), which is
 *     exactly a uniform connected 2-regular graph; a uniform 2-regular graph would mostly be
 *     several disjoint cycles.
 *   - 3 <= D <= (n-1)/2: the pairing model with Steger and Wormald's rule (pair random free
 *     "points", D per node, refusing loops and repeated edges; close to uniform), redrawn
 *     until the graph is connected (almost always the first draw for D >= 3).
 *   - D > (n-1)/2: the complement of a random (n-1-D)-regular graph. Dense pairings stall
 *     near the end; the complement never does, and a graph with minimum degree >= n/2 is
 *     always connected.
 *   - D = n-1: the complete graph.
 * Only the integer RNG is used, so every machine draws the same graph.
 */
#include "rng.h"
#include "topology.h"

#include <stdlib.h>

#define SALT 0x726567756c617244ULL /* "regularD": this family's streams */
#define DRAWS 100

/* ---- a set of undirected edges (open addressing) ---- */

typedef struct {
    uint64_t *slot; /* key + 1, 0 = empty */
    size_t mask;
} edge_set_t;

static bool set_init(edge_set_t *s, size_t edges)
{
    size_t cap = 16;
    while (cap < 2 * edges + 16) cap <<= 1;
    s->slot = calloc(cap, sizeof *s->slot);
    s->mask = cap - 1;
    return s->slot != NULL;
}

static size_t set_pos(const edge_set_t *s, uint64_t key)
{
    size_t h = (size_t)((key * 0x9e3779b97f4a7c15ULL) >> 17) & s->mask;
    while (s->slot[h] && s->slot[h] != key) h = (h + 1) & s->mask;
    return h;
}

static uint64_t edge_key(uint32_t a, uint32_t b)
{
    return a < b ? ((uint64_t)a << 32 | b) + 1 : ((uint64_t)b << 32 | a) + 1;
}

static bool set_has(const edge_set_t *s, uint32_t a, uint32_t b)
{
    return s->slot[set_pos(s, edge_key(a, b))] != 0;
}

static void set_put(edge_set_t *s, uint32_t a, uint32_t b)
{
    uint64_t key = edge_key(a, b);
    s->slot[set_pos(s, key)] = key;
}

/* ---- drawing ---- */

static void remove_point(uint32_t *pts, size_t *u, size_t a)
{
    pts[a] = pts[--*u];
}

/* Pair n*d points into a simple d-regular graph (edges into out and set). *ok = false when
 * the draw got stuck (no allowed pair among the points left) and must start over. */
static rumor_err_t pairing(size_t n, size_t d, rumor_rng_t *rng, rumor_topology_edges_t *out,
                           edge_set_t *set, bool *ok, char err[RUMOR_ERR_LEN])
{
    *ok = false;
    size_t u = n * d;
    uint32_t *pts = malloc(u * sizeof *pts);
    if (!pts) return rumor_fail(err, RUMOR_ENOMEM, "out of memory drawing a %zu-regular graph", d);
    for (size_t k = 0; k < u; k++) pts[k] = (uint32_t)(k / d);
    rumor_err_t rc = RUMOR_OK;
    size_t fails = 0;
    while (u > 0) {
        size_t a = rumor_rng_below(rng, u), b = rumor_rng_below(rng, u - 1);
        if (b >= a) b++;
        if (pts[a] == pts[b] || set_has(set, pts[a], pts[b])) {
            if (++fails < 64 + 8 * u) continue;
            /* Many refusals in a row: either few allowed pairs are left, or none. With few
             * points left, list the allowed pairs and draw one of them; otherwise redraw. */
            fails = 0;
            if (u > 4096) goto out;
            size_t allowed = 0;
            for (size_t x = 0; x < u; x++)
                for (size_t y = x + 1; y < u; y++) allowed += pts[x] != pts[y] && !set_has(set, pts[x], pts[y]);
            if (!allowed) goto out;
            size_t pick = rumor_rng_below(rng, allowed);
            for (size_t x = 0; x < u; x++)
                for (size_t y = x + 1; y < u; y++)
                    if (pts[x] != pts[y] && !set_has(set, pts[x], pts[y]) && pick-- == 0) {
                        a = x;
                        b = y;
                        goto found;
                    }
        found:;
        }
        set_put(set, pts[a], pts[b]);
        if ((rc = rumor_topology_edges_add(out, pts[a], pts[b], 0, err)) != RUMOR_OK) goto out;
        /* Remove the higher position first so the lower one still names its point. */
        size_t hi = a > b ? a : b, lo = a > b ? b : a;
        remove_point(pts, &u, hi);
        remove_point(pts, &u, lo);
        fails = 0;
    }
    *ok = true;
out:
    free(pts);
    return rc;
}

static rumor_err_t hamiltonian_cycle(size_t n, rumor_rng_t *rng, rumor_topology_edges_t *out,
                                     char err[RUMOR_ERR_LEN])
{
    size_t *order = malloc(n * sizeof *order);
    if (!order) return rumor_fail(err, RUMOR_ENOMEM, "out of memory drawing a ring");
    for (size_t k = 0; k < n; k++) order[k] = k;
    rumor_rng_shuffle(rng, order, n);
    rumor_err_t rc = RUMOR_OK;
    for (size_t k = 0; k < n && rc == RUMOR_OK; k++)
        rc = rumor_topology_edges_add(out, order[k], order[(k + 1) % n], 0, err);
    free(order);
    return rc;
}

static rumor_err_t regular_parse(rumor_topology_param_t *p, const char *arg, char err[RUMOR_ERR_LEN])
{
    return rumor_topology_parse_long(&p->k, "regular:D", "a degree D", arg, 1, RUMOR_TOPOLOGY_MAX_PEERS - 1, err);
}

static rumor_err_t regular_check(const rumor_topology_param_t *p, size_t n, char err[RUMOR_ERR_LEN])
{
    size_t d = (size_t)p->k;
    if (d >= n) return rumor_fail(err, RUMOR_EINVAL, "regular:%zu needs more than %zu peers, not %zu", d, d, n);
    if (n * d % 2) return rumor_fail(err, RUMOR_EINVAL, "regular:%zu on %zu peers: n*D must be even", d, n);
    if (d == 1 && n > 2)
        return rumor_fail(err, RUMOR_EINVAL,
                          "regular:1 on %zu peers is a perfect matching, which is disconnected (use D >= 2)", n);
    return RUMOR_OK;
}

static uint64_t regular_period(const rumor_topology_param_t *p, size_t n)
{
    (void)p;
    (void)n;
    return 1;
}

static rumor_err_t regular_build(const rumor_topology_param_t *p, size_t n, uint64_t round,
                                 rumor_topology_edges_t *out, char err[RUMOR_ERR_LEN])
{
    (void)round;
    size_t d = (size_t)p->k;
    bool complement = d > (n - 1) / 2;
    size_t dd = complement ? n - 1 - d : d; /* the degree actually drawn */
    edge_set_t set = {0};
    rumor_err_t rc = RUMOR_OK;
    if (!set_init(&set, n * dd / 2)) return rumor_fail(err, RUMOR_ENOMEM, "out of memory drawing regular:%zu", d);
    bool done = false;
    for (uint64_t draw = 0; draw < DRAWS && !done; draw++) {
        rumor_rng_t rng;
        rumor_rng_init2(&rng, p->seed ^ SALT, n, draw);
        rumor_topology_edges_clear(out);
        for (size_t k = 0; k <= set.mask; k++) set.slot[k] = 0;
        bool ok = true;
        if (dd == 0) {
            /* complete graph: the complement of nothing */
        } else if (!complement && dd == 2) {
            rc = hamiltonian_cycle(n, &rng, out, err);
        } else {
            rc = pairing(n, dd, &rng, out, &set, &ok, err);
        }
        if (rc != RUMOR_OK) break;
        if (!ok) continue;
        if (complement) {
            rumor_topology_edges_clear(out);
            for (uint32_t i = 0; i < n && rc == RUMOR_OK; i++)
                for (uint32_t j = i + 1; j < n && rc == RUMOR_OK; j++)
                    if (!set_has(&set, i, j)) rc = rumor_topology_edges_add(out, i, j, 0, err);
            if (rc != RUMOR_OK) break;
            done = true;
        } else {
            done = rumor_topology_edges_connected(out, n);
        }
    }
    free(set.slot);
    if (rc == RUMOR_OK && !done)
        rc = rumor_fail(err, RUMOR_EINVAL, "regular:%zu on %zu peers: no connected graph in %d draws", d, n, DRAWS);
    return rc;
}

const struct rumor_topology_ops rumor_topology_regular_ops = {
    .name = "regular",
    .usage = "regular:D       random connected D-regular graph (seeded; D < n, n*D even)",
    .parse = regular_parse,
    .check = regular_check,
    .period = regular_period,
    .build = regular_build,
};
