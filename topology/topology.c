/*
 * topology.c - the registry of families, spec parsing, and what every family shares: one
 * round's edge list turned into sorted neighbour lists (both directions), the default weights
 * (Metropolis–Hastings or uniform push shares), dense matrices and products.
 */
#include "topology.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- registry ---- */

/* Help lists families in this order. A new family is one file and one line here. */
static const struct rumor_topology_ops *const families[] = {
    &rumor_topology_complete_ops,
    &rumor_topology_ring_ops,
    &rumor_topology_torus_ops,
    &rumor_topology_hypercube_ops,
    &rumor_topology_expo_ops,
    &rumor_topology_onepeer_expo_ops,
    &rumor_topology_regular_ops,
    &rumor_topology_erdos_ops,
    &rumor_topology_epidemic_ops,
    &rumor_topology_base_ops,
};

const struct rumor_topology_ops *const *rumor_topology_families(size_t *count)
{
    *count = RUMOR_ARRAY_LEN(families);
    return families;
}

/* ---- edge lists ---- */

typedef struct {
    uint32_t from, to;
    double w;
} edge_t;

struct rumor_topology_edges {
    edge_t *e;
    size_t count, cap;
};

rumor_err_t rumor_topology_edges_add(rumor_topology_edges_t *es, size_t from, size_t to, double w,
                                     char err[RUMOR_ERR_LEN])
{
    assert(from < RUMOR_TOPOLOGY_MAX_PEERS && to < RUMOR_TOPOLOGY_MAX_PEERS);
    if (es->count == es->cap) {
        if (es->cap >= RUMOR_TOPOLOGY_MAX_EDGES)
            return rumor_fail(err, RUMOR_EINVAL, "more than %zu edges in one round: too many peers for this topology",
                              RUMOR_TOPOLOGY_MAX_EDGES);
        size_t cap = es->cap ? es->cap * 2 : 256;
        edge_t *e = realloc(es->e, cap * sizeof *e);
        if (!e) return rumor_fail(err, RUMOR_ENOMEM, "out of memory listing %zu edges", cap);
        es->e = e;
        es->cap = cap;
    }
    es->e[es->count++] = (edge_t){(uint32_t)from, (uint32_t)to, w};
    return RUMOR_OK;
}

void rumor_topology_edges_clear(rumor_topology_edges_t *es) { es->count = 0; }

static size_t uf_find(size_t *parent, size_t x)
{
    while (parent[x] != x) {
        parent[x] = parent[parent[x]]; /* path halving keeps the trees flat */
        x = parent[x];
    }
    return x;
}

bool rumor_topology_edges_connected(const rumor_topology_edges_t *es, size_t n)
{
    size_t *parent = malloc(n * sizeof *parent);
    if (!parent) return false;
    for (size_t i = 0; i < n; i++) parent[i] = i;
    size_t parts = n;
    for (size_t k = 0; k < es->count && parts > 1; k++) {
        size_t a = uf_find(parent, es->e[k].from), b = uf_find(parent, es->e[k].to);
        if (a != b) {
            parent[a] = b;
            parts--;
        }
    }
    free(parent);
    return parts <= 1;
}

/* ---- spec parsing ---- */

rumor_err_t rumor_topology_parse_long(long *out, const char *name, const char *what,
                                      const char *arg, long lo, long hi, char err[RUMOR_ERR_LEN])
{
    /* Digits only: no sign, spaces or hex, so a spec has one spelling per value. */
    bool ok = arg && *arg && strlen(arg) <= 9;
    for (const char *c = arg; ok && *c; c++) ok = *c >= '0' && *c <= '9';
    long v = ok ? strtol(arg, NULL, 10) : 0;
    if (!ok || v < lo || v > hi)
        return rumor_fail(err, RUMOR_EINVAL, "%s needs %s from %ld to %ld, not '%s'", name, what, lo,
                          hi, arg ? arg : "");
    *out = v;
    return RUMOR_OK;
}

/* ---- objects and the round cache ---- */

struct rumor_topology {
    const struct rumor_topology_ops *ops;
    rumor_topology_param_t param;
    char spec[RUMOR_TOPOLOGY_SPEC_LEN];
    rumor_topology_edges_t edges; /* scratch for build */

    /* The round in the cache: n peers, key = round mod period (round when the period is 0). */
    bool have;
    size_t n;
    uint64_t key;
    size_t *out_off;  /* n + 1 offsets into out_adj */
    uint32_t *out_adj;
    double *out_w;    /* weighted families: W[i][out_adj[k]]; else NULL */
    size_t *in_off;   /* undirected: the same arrays as out */
    uint32_t *in_adj;
    double *in_w;
    double *self_w;   /* W[i][i] */
    size_t max_deg;   /* over out and in lists */
    double *wbuf;     /* max_deg weights handed out by row/column for unweighted families */
    double *all_w;    /* every out entry's weight, filled on demand for matrices */
};

static void cache_free(rumor_topology_t *t)
{
    if (t->in_off != t->out_off) {
        free(t->in_off);
        free(t->in_adj);
        free(t->in_w);
    }
    free(t->out_off);
    free(t->out_adj);
    free(t->out_w);
    free(t->self_w);
    free(t->wbuf);
    free(t->all_w);
    t->out_off = t->in_off = NULL;
    t->out_adj = t->in_adj = NULL;
    t->out_w = t->in_w = t->self_w = t->wbuf = t->all_w = NULL;
    t->have = false;
}

/* "complete, ring, ..., regular:D, ...": the first word of each family's usage line, so the
 * list follows the registry. */
static void family_names(char *buf, size_t size)
{
    size_t at = 0;
    buf[0] = 0;
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(families) && at < size; i++) {
        const char *u = families[i]->usage;
        int word = (int)strcspn(u, " ");
        int w = snprintf(buf + at, size - at, "%s%.*s", i ? ", " : "", word, u);
        if (w < 0) break;
        at += (size_t)w;
    }
}

rumor_topology_t *rumor_topology_new(const char *spec, uint64_t seed, char err[RUMOR_ERR_LEN])
{
    char names[160];
    family_names(names, sizeof names);
    if (!spec || !*spec) {
        rumor_fail(err, RUMOR_EINVAL, "empty topology spec (one of %s)", names);
        return NULL;
    }
    size_t len = strlen(spec);
    if (len >= RUMOR_TOPOLOGY_SPEC_LEN) {
        rumor_fail(err, RUMOR_EINVAL, "topology spec '%.32s...' is too long", spec);
        return NULL;
    }
    const char *colon = strchr(spec, ':');
    size_t name_len = colon ? (size_t)(colon - spec) : len;
    const struct rumor_topology_ops *ops = NULL;
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(families); i++)
        if (strlen(families[i]->name) == name_len && memcmp(families[i]->name, spec, name_len) == 0)
            ops = families[i];
    if (!ops) {
        rumor_fail(err, RUMOR_EINVAL, "unknown topology '%s' (one of %s)", spec, names);
        return NULL;
    }
    rumor_topology_param_t param = {.seed = seed};
    if (!ops->parse && colon) {
        rumor_fail(err, RUMOR_EINVAL, "topology '%s': %s takes no parameter", spec, ops->name);
        return NULL;
    }
    if (ops->parse && ops->parse(&param, colon ? colon + 1 : NULL, err) != RUMOR_OK) return NULL;
    rumor_topology_t *t = calloc(1, sizeof *t);
    if (!t) {
        rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        return NULL;
    }
    t->ops = ops;
    t->param = param;
    memcpy(t->spec, spec, len + 1);
    return t;
}

void rumor_topology_destroy(rumor_topology_t **self_p)
{
    if (!self_p || !*self_p) return;
    rumor_topology_t *t = *self_p;
    cache_free(t);
    free(t->edges.e);
    free(t);
    *self_p = NULL;
}

const char *rumor_topology_spec(const rumor_topology_t *t) { return t->spec; }
const struct rumor_topology_ops *rumor_topology_family(const rumor_topology_t *t) { return t->ops; }
bool rumor_topology_is_directed(const rumor_topology_t *t) { return t->ops->directed; }

rumor_err_t rumor_topology_check(const rumor_topology_t *t, size_t n, char err[RUMOR_ERR_LEN])
{
    if (n < 1 || n > RUMOR_TOPOLOGY_MAX_PEERS)
        return rumor_fail(err, RUMOR_EINVAL, "%s: %zu peers, expected 1 to %u", t->spec, n,
                          RUMOR_TOPOLOGY_MAX_PEERS);
    return t->ops->check ? t->ops->check(&t->param, n, err) : RUMOR_OK;
}

rumor_err_t rumor_topology_period(const rumor_topology_t *t, size_t n, uint64_t *period,
                                  char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc = rumor_topology_check(t, n, err);
    if (rc != RUMOR_OK) return rc;
    *period = t->ops->period(&t->param, n);
    return RUMOR_OK;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

typedef struct {
    uint32_t to;
    double w;
} entry_t;

static int cmp_entry(const void *a, const void *b)
{
    return cmp_u32(&((const entry_t *)a)->to, &((const entry_t *)b)->to);
}

/* Turn t->edges into out lists (and in lists for a directed family) on n nodes: drop self
 * loops, list undirected edges both ways, sort each list, drop repeats. */
static rumor_err_t cache_lists(rumor_topology_t *t, size_t n, char err[RUMOR_ERR_LEN])
{
    const struct rumor_topology_ops *ops = t->ops;
    const rumor_topology_edges_t *es = &t->edges;
    rumor_err_t rc = RUMOR_ENOMEM;
    size_t *cursor = NULL;
    entry_t *tmp = NULL;
    if (!(t->out_off = calloc(n + 1, sizeof *t->out_off))) goto out;
    for (size_t k = 0; k < es->count; k++) {
        const edge_t *e = &es->e[k];
        assert(e->from < n && e->to < n); /* a family listed a rank that does not exist */
        if (e->from == e->to) continue;
        t->out_off[e->from + 1]++;
        if (!ops->directed) t->out_off[e->to + 1]++;
    }
    for (size_t i = 0; i < n; i++) t->out_off[i + 1] += t->out_off[i];
    size_t total = t->out_off[n];
    if (!(t->out_adj = malloc((total ? total : 1) * sizeof *t->out_adj))) goto out;
    if (ops->weighted && !(t->out_w = malloc((total ? total : 1) * sizeof *t->out_w))) goto out;
    if (!(cursor = malloc(n * sizeof *cursor))) goto out;
    memcpy(cursor, t->out_off, n * sizeof *cursor);
    for (size_t k = 0; k < es->count; k++) {
        const edge_t *e = &es->e[k];
        if (e->from == e->to) continue;
        size_t a = cursor[e->from]++;
        t->out_adj[a] = e->to;
        if (t->out_w) t->out_w[a] = e->w;
        if (!ops->directed) {
            size_t b = cursor[e->to]++;
            t->out_adj[b] = e->from;
            if (t->out_w) t->out_w[b] = e->w;
        }
    }
    /* Sort each list and squeeze out repeats; lists move down as repeats go. */
    size_t maxrow = 0;
    for (size_t i = 0; i < n; i++)
        if (t->out_off[i + 1] - t->out_off[i] > maxrow) maxrow = t->out_off[i + 1] - t->out_off[i];
    if (t->out_w && !(tmp = malloc((maxrow ? maxrow : 1) * sizeof *tmp))) goto out;
    size_t put = 0;
    for (size_t i = 0; i < n; i++) {
        size_t lo = t->out_off[i], hi = t->out_off[i + 1], m = hi - lo;
        t->out_off[i] = put;
        if (t->out_w) {
            for (size_t k = 0; k < m; k++) tmp[k] = (entry_t){t->out_adj[lo + k], t->out_w[lo + k]};
            qsort(tmp, m, sizeof *tmp, cmp_entry);
            for (size_t k = 0; k < m; k++) {
                /* A weighted family states each edge once: a repeat is a bug in it. */
                assert(k == 0 || tmp[k].to != tmp[k - 1].to);
                t->out_adj[put] = tmp[k].to;
                t->out_w[put++] = tmp[k].w;
            }
        } else {
            qsort(t->out_adj + lo, m, sizeof *t->out_adj, cmp_u32);
            for (size_t k = 0; k < m; k++)
                if (k == 0 || t->out_adj[lo + k] != t->out_adj[lo + k - 1])
                    t->out_adj[put++] = t->out_adj[lo + k];
        }
    }
    t->out_off[n] = put;

    if (!ops->directed) {
        t->in_off = t->out_off;
        t->in_adj = t->out_adj;
        t->in_w = t->out_w;
    } else {
        /* Transpose; walking sources in order leaves every in list sorted. */
        if (!(t->in_off = calloc(n + 1, sizeof *t->in_off))) goto out;
        for (size_t k = 0; k < put; k++) t->in_off[t->out_adj[k] + 1]++;
        for (size_t i = 0; i < n; i++) t->in_off[i + 1] += t->in_off[i];
        if (!(t->in_adj = malloc((put ? put : 1) * sizeof *t->in_adj))) goto out;
        if (t->out_w && !(t->in_w = malloc((put ? put : 1) * sizeof *t->in_w))) goto out;
        memcpy(cursor, t->in_off, n * sizeof *cursor);
        for (size_t i = 0; i < n; i++)
            for (size_t k = t->out_off[i]; k < t->out_off[i + 1]; k++) {
                size_t b = cursor[t->out_adj[k]]++;
                t->in_adj[b] = (uint32_t)i;
                if (t->in_w) t->in_w[b] = t->out_w[k];
            }
    }
    t->max_deg = 0;
    for (size_t i = 0; i < n; i++) {
        size_t d_out = t->out_off[i + 1] - t->out_off[i], d_in = t->in_off[i + 1] - t->in_off[i];
        if (d_out > t->max_deg) t->max_deg = d_out;
        if (d_in > t->max_deg) t->max_deg = d_in;
    }
    rc = RUMOR_OK;
out:
    if (rc != RUMOR_OK) rumor_fail(err, rc, "out of memory building the %s graph on %zu peers", t->spec, n);
    free(cursor);
    free(tmp);
    return rc;
}

static inline size_t out_deg(const rumor_topology_t *t, size_t i) { return t->out_off[i + 1] - t->out_off[i]; }

/* W[i][j] for an edge i -> j of an unweighted family (the default rules in topology.h). */
static inline double default_w(const rumor_topology_t *t, size_t i, size_t j)
{
    if (t->ops->directed) return 1.0 / (double)(out_deg(t, i) + 1);
    size_t di = out_deg(t, i), dj = out_deg(t, j);
    return 1.0 / (double)(1 + (di > dj ? di : dj));
}

static rumor_err_t cache_weights(rumor_topology_t *t, size_t n, char err[RUMOR_ERR_LEN])
{
    if (!(t->self_w = malloc(n * sizeof *t->self_w)) ||
        !(t->wbuf = malloc((t->max_deg ? t->max_deg : 1) * sizeof *t->wbuf)))
        return rumor_fail(err, RUMOR_ENOMEM, "out of memory building the %s graph on %zu peers", t->spec, n);
    for (size_t i = 0; i < n; i++) {
        if (t->ops->directed && !t->out_w) {
            t->self_w[i] = 1.0 / (double)(out_deg(t, i) + 1);
            continue;
        }
        /* The diagonal takes what the edges leave, so every row sums to 1. */
        double s = 0;
        for (size_t k = t->out_off[i]; k < t->out_off[i + 1]; k++)
            s += t->out_w ? t->out_w[k] : default_w(t, i, t->out_adj[k]);
        t->self_w[i] = 1.0 - s;
    }
    return RUMOR_OK;
}

/* Make round `round` on n peers the cached one. */
static rumor_err_t cache_round(rumor_topology_t *t, size_t n, uint64_t round, char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc = rumor_topology_check(t, n, err);
    if (rc != RUMOR_OK) return rc;
    uint64_t period = t->ops->period(&t->param, n);
    uint64_t key = period ? round % period : round;
    if (t->have && t->n == n && t->key == key) return RUMOR_OK;
    cache_free(t);
    rumor_topology_edges_clear(&t->edges);
    if ((rc = t->ops->build(&t->param, n, key, &t->edges, err)) != RUMOR_OK ||
        (rc = cache_lists(t, n, err)) != RUMOR_OK || (rc = cache_weights(t, n, err)) != RUMOR_OK) {
        cache_free(t);
        return rc;
    }
    t->have = true;
    t->n = n;
    t->key = key;
    return RUMOR_OK;
}

/* Every out entry's weight, for whole-matrix work. */
static rumor_err_t cache_all_weights(rumor_topology_t *t, char err[RUMOR_ERR_LEN])
{
    if (t->out_w || t->all_w) return RUMOR_OK;
    size_t total = t->out_off[t->n];
    if (!(t->all_w = malloc((total ? total : 1) * sizeof *t->all_w)))
        return rumor_fail(err, RUMOR_ENOMEM, "out of memory for the weights of %zu edges", total);
    for (size_t i = 0; i < t->n; i++)
        for (size_t k = t->out_off[i]; k < t->out_off[i + 1]; k++) t->all_w[k] = default_w(t, i, t->out_adj[k]);
    return RUMOR_OK;
}

/* ---- one node at one round ---- */

static rumor_err_t node_round(rumor_topology_t *t, size_t n, uint64_t round, size_t i, char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc = cache_round(t, n, round, err);
    if (rc != RUMOR_OK) return rc;
    if (i >= n) return rumor_fail(err, RUMOR_EINVAL, "%s: rank %zu is not below %zu peers", t->spec, i, n);
    return RUMOR_OK;
}

rumor_err_t rumor_topology_out(rumor_topology_t *t, size_t n, uint64_t round, size_t i,
                               const uint32_t **peers, size_t *count, char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc = node_round(t, n, round, i, err);
    if (rc != RUMOR_OK) return rc;
    *peers = t->out_adj + t->out_off[i];
    *count = t->out_off[i + 1] - t->out_off[i];
    return RUMOR_OK;
}

rumor_err_t rumor_topology_in(rumor_topology_t *t, size_t n, uint64_t round, size_t i,
                              const uint32_t **peers, size_t *count, char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc = node_round(t, n, round, i, err);
    if (rc != RUMOR_OK) return rc;
    *peers = t->in_adj + t->in_off[i];
    *count = t->in_off[i + 1] - t->in_off[i];
    return RUMOR_OK;
}

rumor_err_t rumor_topology_row(rumor_topology_t *t, size_t n, uint64_t round, size_t i,
                               double *self_w, const uint32_t **peers, const double **w,
                               size_t *count, char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc = rumor_topology_out(t, n, round, i, peers, count, err);
    if (rc != RUMOR_OK) return rc;
    *self_w = t->self_w[i];
    if (t->out_w) {
        *w = t->out_w + t->out_off[i];
    } else {
        for (size_t k = 0; k < *count; k++) t->wbuf[k] = default_w(t, i, (*peers)[k]);
        *w = t->wbuf;
    }
    return RUMOR_OK;
}

rumor_err_t rumor_topology_column(rumor_topology_t *t, size_t n, uint64_t round, size_t i,
                                  double *self_w, const uint32_t **peers, const double **w,
                                  size_t *count, char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc = rumor_topology_in(t, n, round, i, peers, count, err);
    if (rc != RUMOR_OK) return rc;
    *self_w = t->self_w[i];
    if (t->in_w) {
        *w = t->in_w + t->in_off[i];
    } else {
        for (size_t k = 0; k < *count; k++) t->wbuf[k] = default_w(t, (*peers)[k], i);
        *w = t->wbuf;
    }
    return RUMOR_OK;
}

/* ---- whole rounds ---- */

rumor_err_t rumor_topology_degrees(rumor_topology_t *t, size_t n, uint64_t first, uint64_t rounds,
                                   size_t *min, size_t *max, char err[RUMOR_ERR_LEN])
{
    assert(rounds >= 1);
    size_t lo = SIZE_MAX, hi = 0;
    for (uint64_t r = 0; r < rounds; r++) {
        rumor_err_t rc = cache_round(t, n, first + r, err);
        if (rc != RUMOR_OK) return rc;
        for (size_t i = 0; i < n; i++) {
            size_t d = out_deg(t, i);
            if (d < lo) lo = d;
            if (d > hi) hi = d;
        }
    }
    *min = lo;
    *max = hi;
    return RUMOR_OK;
}

rumor_err_t rumor_topology_matrix(rumor_topology_t *t, size_t n, uint64_t round, double *w,
                                  char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc = cache_round(t, n, round, err);
    if (rc != RUMOR_OK || (rc = cache_all_weights(t, err)) != RUMOR_OK) return rc;
    const double *ew = t->out_w ? t->out_w : t->all_w;
    memset(w, 0, n * n * sizeof *w);
    for (size_t i = 0; i < n; i++) {
        w[i * n + i] = t->self_w[i];
        for (size_t k = t->out_off[i]; k < t->out_off[i + 1]; k++) w[i * n + t->out_adj[k]] = ew[k];
    }
    return RUMOR_OK;
}

rumor_err_t rumor_topology_apply(rumor_topology_t *t, size_t n, uint64_t round, double *p,
                                 char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc = cache_round(t, n, round, err);
    if (rc != RUMOR_OK || (rc = cache_all_weights(t, err)) != RUMOR_OK) return rc;
    const double *ew = t->out_w ? t->out_w : t->all_w;
    double *q = malloc(n * sizeof *q);
    if (!q) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    /* Row a of P W is the sum over c of P[a][c] times row c of W, and W is sparse: n^2 *
     * degree operations, not n^3, and one row of scratch. */
    for (size_t a = 0; a < n; a++) {
        double *pa = p + a * n;
        memset(q, 0, n * sizeof *q);
        for (size_t c = 0; c < n; c++) {
            double v = pa[c];
            if (v == 0.0) continue;
            q[c] += v * t->self_w[c];
            for (size_t k = t->out_off[c]; k < t->out_off[c + 1]; k++) q[t->out_adj[k]] += v * ew[k];
        }
        memcpy(pa, q, n * sizeof *pa);
    }
    free(q);
    return RUMOR_OK;
}

rumor_err_t rumor_topology_product(rumor_topology_t *t, size_t n, uint64_t first, uint64_t rounds,
                                   double *p, char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc = rumor_topology_check(t, n, err);
    if (rc != RUMOR_OK) return rc;
    if (n > RUMOR_TOPOLOGY_DENSE_MAX)
        return rumor_fail(err, RUMOR_EINVAL, "%s: products are dense, at most %d peers (not %zu)", t->spec,
                          RUMOR_TOPOLOGY_DENSE_MAX, n);
    memset(p, 0, n * n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i * n + i] = 1.0;
    for (uint64_t r = 0; r < rounds && rc == RUMOR_OK; r++) rc = rumor_topology_apply(t, n, first + r, p, err);
    return rc;
}
