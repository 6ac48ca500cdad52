/*
 * topology.h - who gossips with whom at each round, and with what weights: the communication
 * graphs of a swarm behind one ops table (docs/ARCHITECTURE.md), and spectral tooling to
 * compare them (`rumor topo`).
 *
 * Ranks. Nodes are the ranks 0..n-1. A node numbers the members of its view by their sorted
 * public keys, so peers that share a view compute the same graph without coordinating; this
 * module only ever sees ranks. Everything here is pure and deterministic: no sockets, clocks,
 * threads or global randomness. Random families draw from rng.h streams derived from the
 * seed given to rumor_topology_new and integers only (n, the round, a rank), never from
 * floating-point library functions, so the same (spec, seed, n, round) gives the same graph
 * on every machine.
 *
 * Specs (what `--topology` and `rumor topo --kind` accept):
 *   complete      every pair; the mixing matrix is J = 11^T/n
 *   ring          i <-> i-1, i+1 (mod n)
 *   torus         2-D torus of r x c = n nodes, r the largest divisor of n with r*r <= n (as
 *                 square as n allows); node i sits at (i / c, i % c). A prime n has no other
 *                 shape than 1 x n, which is the ring: it is accepted and behaves as `ring`.
 *   hypercube     i <-> i xor 2^b; n must be a power of 2
 *   expo          static exponential graph, directed: i -> i + 2^k (mod n), k = 0..floor(log2(n-1))
 *   onepeer-expo  one-peer exponential graph, time-varying: at round t, i -> i + 2^(t mod tau)
 *                 (mod n), tau = ceil(log2 n); exact averaging after tau rounds when n = 2^tau
 *   regular:D     random connected D-regular graph, seeded by (seed, n); 1 <= D < n, n*D even
 *                 (D = 1 only for n = 2: a perfect matching on more peers is disconnected)
 *   erdos:P       Erdős–Rényi G(n, P), 0 < P <= 1, seeded by (seed, n) and conditioned on being
 *                 connected: up to 16 draws; when none is connected, an error says so
 *   epidemic:S    every round every node pushes to min(S, n-1) distinct peers drawn afresh,
 *                 seeded by (seed, round, rank); S >= 1. Never repeats (period 0).
 *   base:K        Base-(K+1) graph (Takezawa, Sato, Bao, Niwa, Yamada, NeurIPS 2023): a
 *                 time-varying undirected schedule in which every node has at most K
 *                 neighbours per round and the product over one period is exactly J, for any n.
 *
 * Mixing matrices. W_t is the n x n matrix of round t in the *push* convention: row i holds
 * node i's shares, W_t[i][i] for itself and W_t[i][j] for each out-neighbour j; every row sums
 * to 1. After a round node j holds x_j(t+1) = sum_i W_t[i][j] x_i(t), i.e. x(t+1) = W_t^T x(t):
 * W_t^T is the column-stochastic matrix push-sum needs. Weights:
 *   - undirected static graphs: Metropolis–Hastings, W_ij = 1/(1 + max(deg_i, deg_j)) on each
 *     edge and W_ii = 1 - sum; symmetric and doubly stochastic, so pull (D-PSGD) and push read
 *     the same numbers;
 *   - directed and one-peer graphs (expo, onepeer-expo, epidemic): uniform shares,
 *     W_ij = 1/(out_deg_i + 1) for j in out(i) and for j = i. Every row sums to 1; columns do
 *     too when in-degrees equal out-degrees (expo, onepeer-expo), not for epidemic;
 *   - base:K: the weights of the construction (symmetric, doubly stochastic).
 * Products follow the same convention: P = W_a W_{a+1} ... W_{b-1} is the effect of rounds
 * a..b-1 (x(b) = P^T x(a)); averaging is exact when P = J.
 *
 * Objects. A rumor_topology_t keeps the last round it built (one n, one round) so that
 * repeated queries for the same round cost a lookup; it is therefore not safe to query one
 * object from two threads at once. Pointers returned by queries are borrowed and stay valid
 * until the next call on the same object.
 *
 * Non-goals: weighting by link speed, asynchronous (event-driven) schedules, membership
 * changes inside a round. A change of n simply yields the graph for the new n.
 */
#ifndef RUMOR_TOPOLOGY_H
#define RUMOR_TOPOLOGY_H

#include "base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Ranks are uint32_t; n is at most this. */
#define RUMOR_TOPOLOGY_MAX_PEERS (1u << 20)
/* A family lists at most this many edges in a round (an undirected edge once); beyond it a
 * query fails instead of exhausting memory (e.g. `complete` on 100000 peers). */
#define RUMOR_TOPOLOGY_MAX_EDGES ((size_t)1 << 26)
/* Spectral analysis works on dense n x n matrices: at most this many peers. */
#define RUMOR_TOPOLOGY_DENSE_MAX 4096
/* A spec is at most this long (with its NUL). */
#define RUMOR_TOPOLOGY_SPEC_LEN 64

typedef struct rumor_topology rumor_topology_t;

/* ---- writing a family ---- */

/* A family's parameters, parsed from the text after "name:" in its spec. */
typedef struct {
    long k;        /* regular:D, epidemic:S, base:K; 0 when the family has none */
    double p;      /* erdos:P */
    uint64_t seed; /* from rumor_topology_new */
} rumor_topology_param_t;

/* The edges of one round, as a family lists them (topology.c turns them into neighbour
 * lists and weights). Opaque; families only add to it. */
typedef struct rumor_topology_edges rumor_topology_edges_t;

/* Add the edge from -> to (both < n). An undirected family adds each edge once, in either
 * direction. Self loops and repeated edges are dropped, except in a weighted family, which
 * must not repeat an edge. w is the edge's weight in a weighted family, ignored otherwise.
 * RUMOR_EINVAL (with err) past RUMOR_TOPOLOGY_MAX_EDGES, RUMOR_ENOMEM. */
rumor_err_t rumor_topology_edges_add(rumor_topology_edges_t *es, size_t from, size_t to, double w,
                                     char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* Forget the edges added so far (a family that draws again). */
void rumor_topology_edges_clear(rumor_topology_edges_t *es);
/* Whether the edges added so far, taken as undirected, connect all n nodes. false when
 * memory runs out (a family then reports the graph as unusable). */
bool rumor_topology_edges_connected(const rumor_topology_edges_t *es, size_t n);

/* A family of graphs. All functions are pure and non-blocking; n >= 1 has passed `check`
 * before period and build are called. */
struct rumor_topology_ops {
    const char *name;  /* the spec's name: "ring", "regular", ... */
    const char *usage; /* one help line: the spec form and what it gives */
    bool directed;     /* edges are one-way pushes; else each edge goes both ways */
    bool weighted;     /* build gives every edge's weight; else the default rule above */
    /* Parse the text after "name:", or NULL when the spec has none, into p (seed is already
     * set). RUMOR_EINVAL with a sentence in err. NULL for a family without a parameter: a
     * spec that gives one is then rejected. */
    rumor_err_t (*parse)(rumor_topology_param_t *p, const char *arg, char err[RUMOR_ERR_LEN]);
    /* Whether the family is defined on n peers; NULL when it is for every n >= 1. */
    rumor_err_t (*check)(const rumor_topology_param_t *p, size_t n, char err[RUMOR_ERR_LEN]);
    /* Rounds after which the graphs repeat: 1 for a static graph, 0 when they never repeat
     * (fresh randomness every round). */
    uint64_t (*period)(const rumor_topology_param_t *p, size_t n);
    /* Add the edges of round `round` to out (empty on entry). round < period when the period
     * is not 0. Errors: RUMOR_EINVAL (graph impossible for this draw, too many edges),
     * RUMOR_ENOMEM. */
    rumor_err_t (*build)(const rumor_topology_param_t *p, size_t n, uint64_t round,
                         rumor_topology_edges_t *out, char err[RUMOR_ERR_LEN]);
};

extern const struct rumor_topology_ops rumor_topology_complete_ops;
extern const struct rumor_topology_ops rumor_topology_ring_ops;
extern const struct rumor_topology_ops rumor_topology_torus_ops;
extern const struct rumor_topology_ops rumor_topology_hypercube_ops;
extern const struct rumor_topology_ops rumor_topology_expo_ops;
extern const struct rumor_topology_ops rumor_topology_onepeer_expo_ops;
extern const struct rumor_topology_ops rumor_topology_regular_ops;
extern const struct rumor_topology_ops rumor_topology_erdos_ops;
extern const struct rumor_topology_ops rumor_topology_epidemic_ops;
extern const struct rumor_topology_ops rumor_topology_base_ops;

/* Shared parameter parser for "NAME:INT": a decimal integer in [lo, hi], nothing else. */
rumor_err_t rumor_topology_parse_long(long *out, const char *name, const char *what,
                                      const char *arg, long lo, long hi,
                                      char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* ---- registry and objects ---- */

/* The families, in the order help lists them; *count gets their number. */
const struct rumor_topology_ops *const *rumor_topology_families(size_t *count);

/* Parse a spec ("ring", "regular:4", "erdos:0.3", ...). seed drives the random families.
 * Returns a new object (free with rumor_topology_destroy), or NULL with a sentence in err
 * for an unknown name or a bad parameter, or when memory runs out. Constraints that depend
 * on n (hypercube needs a power of 2, ...) are checked by rumor_topology_check and by every
 * query. */
rumor_topology_t *rumor_topology_new(const char *spec, uint64_t seed, char err[RUMOR_ERR_LEN]);
/* Accepts NULL; clears *self_p. */
void rumor_topology_destroy(rumor_topology_t **self_p);

/* The spec as given (borrowed, valid for the object's life). */
const char *rumor_topology_spec(const rumor_topology_t *t);
const struct rumor_topology_ops *rumor_topology_family(const rumor_topology_t *t);
bool rumor_topology_is_directed(const rumor_topology_t *t);

/* Whether the topology is defined on n peers: RUMOR_OK, or RUMOR_EINVAL with a sentence
 * ("hypercube needs a power of 2 peers, not 6"). */
rumor_err_t rumor_topology_check(const rumor_topology_t *t, size_t n,
                                 char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* Rounds after which the graphs repeat on n peers: 1 when static, 0 when never (epidemic). */
rumor_err_t rumor_topology_period(const rumor_topology_t *t, size_t n, uint64_t *period,
                                  char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* ---- one node at one round ----
 * i < n. Lists are sorted by rank, without i itself; *peers and *w are borrowed (see above).
 * Errors: RUMOR_EINVAL (n not allowed, i >= n, no connected draw), RUMOR_ENOMEM. */

/* The peers node i sends to at round `round` (undirected: its neighbours). */
rumor_err_t rumor_topology_out(rumor_topology_t *t, size_t n, uint64_t round, size_t i,
                               const uint32_t **peers, size_t *count,
                               char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* The peers that send to node i (undirected: the same as out). */
rumor_err_t rumor_topology_in(rumor_topology_t *t, size_t n, uint64_t round, size_t i,
                              const uint32_t **peers, size_t *count,
                              char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* Row i of W_t: *self_w = W[i][i]; w[k] = W[i][peers[k]] for the out-neighbours, i.e. the
 * shares node i keeps and pushes. For symmetric W also the weights node i pulls with. */
rumor_err_t rumor_topology_row(rumor_topology_t *t, size_t n, uint64_t round, size_t i,
                               double *self_w, const uint32_t **peers, const double **w,
                               size_t *count, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* Column i of W_t: *self_w = W[i][i]; w[k] = W[peers[k]][i] for the in-neighbours, i.e. the
 * shares node i receives. */
rumor_err_t rumor_topology_column(rumor_topology_t *t, size_t n, uint64_t round, size_t i,
                                  double *self_w, const uint32_t **peers, const double **w,
                                  size_t *count, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* ---- whole rounds ---- */

/* Out-degree range (undirected: degree) over rounds [first, first + rounds), rounds >= 1. */
rumor_err_t rumor_topology_degrees(rumor_topology_t *t, size_t n, uint64_t first,
                                   uint64_t rounds, size_t *min, size_t *max,
                                   char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* The dense W_t into w[n*n], row-major (w[i*n + j] = W_t[i][j]). */
rumor_err_t rumor_topology_matrix(rumor_topology_t *t, size_t n, uint64_t round, double *w,
                                  char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* p <- p W_round, in place, for a dense n x n row-major p: one more round of a product.
 * Costs n^2 * degree. */
rumor_err_t rumor_topology_apply(rumor_topology_t *t, size_t n, uint64_t round, double *p,
                                 char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* P = W_first W_first+1 ... W_{first+rounds-1} into p[n*n], row-major (the identity when
 * rounds is 0). Costs rounds * n^2 * degree; n <= RUMOR_TOPOLOGY_DENSE_MAX. */
rumor_err_t rumor_topology_product(rumor_topology_t *t, size_t n, uint64_t first,
                                   uint64_t rounds, double *p,
                                   char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* ---- spectral tooling (spectral.c) ----
 * Dense, through LAPACK (rumor_lapack_eigvals_sym in the CPU backend); n up to
 * RUMOR_TOPOLOGY_DENSE_MAX. Time and memory grow as n^3 and n^2: n = 4096 takes about
 * 400 MiB and tens of seconds. */

/* ||a - J||_2 for a square n x n matrix a (row-major): the largest singular value, the
 * square root of the largest eigenvalue of (a - J)^T (a - J). For a doubly stochastic a it is
 * the worst-case factor by which applying a (or a^T) shrinks a vector's distance to its
 * average. */
rumor_err_t rumor_topology_dist_j(const double *a, size_t n, double *norm,
                                  char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* For a symmetric a: max |eigenvalue of a - J|, which for a symmetric doubly stochastic
 * mixing matrix is |lambda_2|, the second largest eigenvalue modulus. */
rumor_err_t rumor_topology_slem_sym(const double *a, size_t n, double *slem,
                                    char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* Spectral gap 1 - |lambda_2| of a static undirected topology's W on n peers.
 * RUMOR_ENOTSUP for directed or time-varying ones (see rumor_topology_analyze). */
rumor_err_t rumor_topology_spectral_gap(rumor_topology_t *t, size_t n, double *gap,
                                        char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* A summary for comparing topologies (`rumor topo`). */
typedef struct {
    size_t degree_min, degree_max; /* out-degree (undirected: degree) over one period, or
                                      round 0 when the graph never repeats */
    uint64_t period;               /* 1: static; 0: never repeats (epidemic) */
    bool symmetric;                /* static and undirected: W = W^T */
    /* ||W_0 W_1 ... W_{T-1} - J||_2 over one period T: the worst-case factor by which a
     * period shrinks the distance to the average. For a symmetric W it equals |lambda_2|.
     * NAN when the period is 0: fresh random graphs with only column-stochastic W^T have
     * no fixed per-period factor. */
    double contraction;
    /* 1 - contraction: the spectral gap 1 - |lambda_2| for a symmetric W, and its
     * generalisation to directed and time-varying graphs. NAN with contraction. */
    double spectral_gap;
    /* The first r such that W_0 ... W_{r-1} = J within 1e-9 in every entry, searched over
     * max(4 periods, 8 rounds) (for a symmetric W: 1 when W = J, else never, since
     * ||W^r - J|| = |lambda_2|^r); 0 when averaging is never exact. */
    uint64_t exact_after;
} rumor_topology_stats_t;

/* Degrees, period, contraction and exact-averaging round of t on n peers. Errors as for
 * the queries, RUMOR_EINVAL when n > RUMOR_TOPOLOGY_DENSE_MAX, or RUMOR_EIO when LAPACK
 * fails to converge. */
rumor_err_t rumor_topology_analyze(rumor_topology_t *t, size_t n, rumor_topology_stats_t *st,
                                   char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

#endif
