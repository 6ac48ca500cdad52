/*
 * base.c - the Base-(k+1) graph (Y. Takezawa, R. Sato, H. Bao, K. Niwa, M. Yamada, "Beyond
 * Exponential Graph: Communication-Efficient Topologies for Decentralized Learning via
 * Finite-time Convergence", NeurIPS 2023): a finite sequence of undirected mixing matrices,
 * every node with at most k neighbours in each, whose product is exactly J for any n. It is
 * repeated periodically. `base:K` is the Base-(K+1) graph, k = K. With b = k + 1:
 *
 * k-peer hyper-hypercube (the paper's first construction), for m whose prime factors are all
 * at most b: write m = f_1 f_2 ... f_L with every f_l <= b (greedily) and give each node the
 * mixed-radix digits of its index. Round l averages each group of f_l nodes that differ only
 * in digit l (a clique, weights 1/f_l). After the L rounds every node holds the exact mean.
 *
 * Simple Base-(k+1) graph (second construction), for any m: m = sum_l a_l b^(p_l) in base b,
 * p_0 > p_1 > ... , 1 <= a_l <= k. Consecutive blocks V_l of a_l b^(p_l) nodes, each cut into
 * a_l groups of b^(p_l).
 *   1. Every V_l runs its own hyper-hypercube (V_0 takes the most rounds, M; a smaller V_l
 *      repeats its rounds, which changes nothing once its values are equal).
 *   2. Round M + q, for q = 0 .. L-2: every node i of the later blocks V_l, l > q, links to one
 *      not-yet-used node j of each of the a_q groups of V_q, with weight |V_q| / (S_q a_q),
 *      S_q = |V_q| + |V_(q+1)| + ... . Node i then holds
 *      (1 - |V_q|/S_q) x_i + (|V_q|/S_q) mean(V_q): the later blocks fold V_q into their
 *      running average, so after round M + L-2 the last block holds the global mean. The
 *      nodes j of V_q moved towards i; the nodes of V_q that no i used form cliques of up to
 *      b among themselves (all equal, so this changes no value; the paper keeps these inner
 *      edges for mixing in practice).
 *   3. From round M + q + 1, the groups of V_q run their hyper-hypercube again (p_q rounds):
 *      every group was touched once by every later node with the same weights, so its mean is
 *      exactly the global mean, and now every node holds it. The last block has nobody after
 *      it and repeats its own averaging, which again changes nothing.
 *   Length: M + p_0 + 1 rounds (all phases of later blocks end by then, p_l <= p_0 - l).
 *
 * Base-(k+1) graph (third construction): n = n_s * n_r with n_s the largest divisor of n
 * whose prime factors are at most b. If both are above 1, n_s blocks of n_r consecutive
 * nodes first run the simple Base graph on n_r nodes, then the n_r strided classes
 * {j, j + n_r, j + 2 n_r, ...} run the hyper-hypercube on n_s nodes; this is used unless the
 * simple Base graph on all n nodes is strictly shorter, as in the paper's code.
 *
 * Degrees stay at most k in every round (cliques of at most b nodes; a node i of step 2 has
 * a_q <= k links and every j one), and weights are symmetric, so each W is doubly
 * stochastic. tests/test_topology.c checks exactness, degrees and symmetry for every n and k
 * in a range, rather than trusting this reading of the paper; every round's matrix was also
 * compared, entry for entry, with the authors' reference code (k = 1..5, n = 2..40, 97, 100).
 */
#include "topology.h"

#define MAX_FACTORS 64 /* m <= 2^20 has at most 20 prime factors */
#define MAX_DIGITS 64

/* Nodes base + idx * step for idx < m. */
typedef struct {
    size_t base, step, m;
} nodeset_t;

static size_t node_of(nodeset_t s, size_t idx) { return s.base + idx * s.step; }

/* The round being emitted: edges of round `want` go to out; other rounds are only counted. */
typedef struct {
    uint64_t want;
    rumor_topology_edges_t *out;
    char *err;
    rumor_err_t rc;
} emit_t;

static void emit_edge(emit_t *em, size_t a, size_t b, double w)
{
    if (em->rc == RUMOR_OK) em->rc = rumor_topology_edges_add(em->out, a, b, w, em->err);
}

static void emit_clique(emit_t *em, nodeset_t s, size_t first, size_t stride, size_t f)
{
    for (size_t x = 0; x < f; x++)
        for (size_t y = x + 1; y < f; y++)
            emit_edge(em, node_of(s, first + x * stride), node_of(s, first + y * stride), 1.0 / (double)f);
}

/* Factorisation of m into factors <= b, found greedily largest first and used smallest
 * first (the order of the paper's code; any order averages exactly). The number of factors,
 * or SIZE_MAX when m has a prime factor above b. */
static size_t hyper_factors(size_t m, size_t b, size_t f[MAX_FACTORS])
{
    size_t count = 0, rest = m;
    for (size_t x = b < rest ? b : rest; x >= 2 && rest > 1; x--)
        while (rest % x == 0) {
            f[count++] = x;
            rest /= x;
        }
    if (rest != 1) return SIZE_MAX;
    for (size_t x = 0; x < count / 2; x++) {
        size_t tmp = f[x];
        f[x] = f[count - 1 - x];
        f[count - 1 - x] = tmp;
    }
    return count;
}

/* Round l of the k-peer hyper-hypercube on s (s.m has only factors <= b). */
static void hyper_round(emit_t *em, nodeset_t s, size_t b, size_t l)
{
    size_t f[MAX_FACTORS], count = hyper_factors(s.m, b, f), stride = 1;
    if (count == SIZE_MAX || l >= count) return;
    for (size_t x = 0; x < l; x++) stride *= f[x];
    for (size_t idx = 0; idx < s.m; idx++)
        if ((idx / stride) % f[l] == 0) emit_clique(em, s, idx, stride, f[l]);
}

static size_t hyper_len(size_t m, size_t b)
{
    size_t f[MAX_FACTORS];
    return hyper_factors(m, b, f);
}

/* The base-b digits of m: blocks l = 0..L-1 with a[l] * pw[l] nodes, pw[l] = b^p[l]. */
typedef struct {
    size_t count;
    size_t a[MAX_DIGITS], p[MAX_DIGITS], pw[MAX_DIGITS], start[MAX_DIGITS], size[MAX_DIGITS];
    size_t suffix[MAX_DIGITS + 1]; /* suffix[l] = size[l] + size[l+1] + ... */
} digits_t;

static void base_digits(digits_t *d, size_t m, size_t b)
{
    size_t pw = 1, p = 0;
    while (pw <= m / b) {
        pw *= b;
        p++;
    }
    d->count = 0;
    size_t start = 0;
    for (;; pw /= b, p--) {
        size_t a = (m / pw) % b;
        if (a) {
            size_t l = d->count++;
            d->a[l] = a;
            d->p[l] = p;
            d->pw[l] = pw;
            d->start[l] = start;
            d->size[l] = a * pw;
            start += a * pw;
        }
        if (p == 0) break;
    }
    d->suffix[d->count] = 0;
    for (size_t l = d->count; l-- > 0;) d->suffix[l] = d->suffix[l + 1] + d->size[l];
}

/* Rounds of the simple Base-(k+1) graph on m nodes (0 for a lone node). */
static size_t simple_len(size_t m, size_t b)
{
    if (m <= 1) return 0;
    size_t h = hyper_len(m, b);
    if (h != SIZE_MAX) return h;
    digits_t d;
    base_digits(&d, m, b);
    return hyper_len(d.size[0], b) + d.p[0] + 1;
}

/* Round r of the simple Base-(k+1) graph on s. */
static void simple_round(emit_t *em, nodeset_t s, size_t b, size_t r)
{
    if (s.m <= 1) return;
    if (hyper_len(s.m, b) != SIZE_MAX) {
        hyper_round(em, s, b, r);
        return;
    }
    digits_t d;
    base_digits(&d, s.m, b);
    size_t L = d.count, M = hyper_len(d.size[0], b);
    if (r < M) { /* step 1: every block averages itself */
        for (size_t l = 0; l < L; l++) {
            size_t len = hyper_len(d.size[l], b);
            if (len) hyper_round(em, (nodeset_t){node_of(s, d.start[l]), s.step, d.size[l]}, b, r % len);
        }
        return;
    }
    size_t q = r - M;
    if (q + 1 < L) { /* step 2: the later blocks take in block q */
        double w = (double)d.size[q] / ((double)d.suffix[q] * (double)d.a[q]);
        size_t used = 0; /* i-side nodes so far; each took the used-th node from the end of every group */
        for (size_t l = L; l-- > q + 1;)
            for (size_t idx = 0; idx < d.size[l]; idx++, used++)
                for (size_t g = 0; g < d.a[q]; g++)
                    emit_edge(em, node_of(s, d.start[l] + idx),
                              node_of(s, d.start[q] + g * d.pw[q] + d.pw[q] - 1 - used), w);
        /* Inner edges: the untouched nodes of block q (the first pw - used of each group, in
         * order) in cliques of up to b. */
        size_t left = d.pw[q] - used, total = left * d.a[q];
        for (size_t c = 0; c + 1 < total; c += b) {
            size_t f = total - c < b ? total - c : b;
            for (size_t x = 0; x < f; x++)
                for (size_t y = x + 1; y < f; y++) {
                    size_t ix = c + x, iy = c + y;
                    emit_edge(em, node_of(s, d.start[q] + (ix / left) * d.pw[q] + ix % left),
                              node_of(s, d.start[q] + (iy / left) * d.pw[q] + iy % left), 1.0 / (double)f);
                }
        }
    }
    /* step 3: blocks already taken in average within their groups again */
    for (size_t l = 0; l < L; l++) {
        size_t from = l + 1 < L ? l + 1 : L - 1;
        if (q < from) continue;
        size_t k = q - from;
        if (d.size[l] < b) { /* a block of single nodes: one clique */
            size_t len = hyper_len(d.size[l], b);
            if (len) hyper_round(em, (nodeset_t){node_of(s, d.start[l]), s.step, d.size[l]}, b, k % len);
        } else {
            for (size_t g = 0; g < d.a[l]; g++)
                hyper_round(em, (nodeset_t){node_of(s, d.start[l] + g * d.pw[l]), s.step, d.pw[l]}, b,
                            k % d.p[l]);
        }
    }
}

/* Walk the Base-(k+1) schedule on n nodes, emitting round em->want; returns its length. */
static size_t base_schedule(emit_t *em, size_t n, size_t b)
{
    if (n <= 1) return 0;
    size_t rest = n;
    for (size_t x = 2; x <= b && x <= rest; x++)
        while (rest % x == 0) rest /= x;
    size_t n_r = rest, n_s = n / rest;
    size_t len_simple = simple_len(n, b);
    if (n_r == 1 || n_s == 1 || len_simple < simple_len(n_r, b) + hyper_len(n_s, b)) {
        if (em->want < len_simple) simple_round(em, (nodeset_t){0, 1, n}, b, (size_t)em->want);
        return len_simple;
    }
    size_t t1 = simple_len(n_r, b), t2 = hyper_len(n_s, b);
    if (em->want < t1) {
        for (size_t i = 0; i < n_s; i++) simple_round(em, (nodeset_t){i * n_r, 1, n_r}, b, (size_t)em->want);
    } else if (em->want < t1 + t2) {
        for (size_t j = 0; j < n_r; j++) hyper_round(em, (nodeset_t){j, n_r, n_s}, b, (size_t)em->want - t1);
    }
    return t1 + t2;
}

static rumor_err_t base_parse(rumor_topology_param_t *p, const char *arg, char err[RUMOR_ERR_LEN])
{
    return rumor_topology_parse_long(&p->k, "base:K", "a degree K", arg, 1, RUMOR_TOPOLOGY_MAX_PEERS - 1, err);
}

static uint64_t base_period(const rumor_topology_param_t *p, size_t n)
{
    emit_t em = {.want = UINT64_MAX};
    size_t len = base_schedule(&em, n, (size_t)p->k + 1);
    return len ? len : 1; /* a lone peer: one empty round */
}

static rumor_err_t base_build(const rumor_topology_param_t *p, size_t n, uint64_t round,
                              rumor_topology_edges_t *out, char err[RUMOR_ERR_LEN])
{
    emit_t em = {.want = round, .out = out, .err = err, .rc = RUMOR_OK};
    base_schedule(&em, n, (size_t)p->k + 1);
    return em.rc;
}

const struct rumor_topology_ops rumor_topology_base_ops = {
    .name = "base",
    .usage = "base:K          Base-(K+1) graph: <= K peers per round, exact averaging each period",
    .weighted = true,
    .parse = base_parse,
    .period = base_period,
    .build = base_build,
};
