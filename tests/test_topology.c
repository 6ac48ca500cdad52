/* test_topology.c - topology families against closed forms: Metropolis–Hastings weights and
 * spectral gaps of the ring, complete graph and hypercube, the torus spectrum, exact
 * averaging of one-peer exponential and Base-(k+1) graphs, stochasticity of every W,
 * properties and determinism of the random families, and spec errors. */
#include "backend.h"
#include "check.h"
#include "topology.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static char err[RUMOR_ERR_LEN];

static rumor_topology_t *topo(const char *spec, uint64_t seed)
{
    rumor_topology_t *t = rumor_topology_new(spec, seed, err);
    CHECK_MSG(t != NULL, "%s: %s", spec, err);
    return t;
}

static double max_dev_from_j(const double *p, size_t n)
{
    double m = 0;
    for (size_t k = 0; k < n * n; k++) m = fmax(m, fabs(p[k] - 1.0 / (double)n));
    return m;
}

/* Rows (and, when asked, columns) of W_t sum to 1, entries are non-negative, and a
 * symmetric family gives W = W^T. Returns the matrix for further checks (caller frees). */
static double *check_matrix(rumor_topology_t *t, size_t n, uint64_t round, bool columns, bool symmetric)
{
    double *w = malloc(n * n * sizeof *w);
    CHECK_RC(rumor_topology_matrix(t, n, round, w, err));
    double worst_row = 0, worst_col = 0, worst_sym = 0, min_entry = 0;
    for (size_t i = 0; i < n; i++) {
        double r = 0, c = 0;
        for (size_t j = 0; j < n; j++) {
            r += w[i * n + j];
            c += w[j * n + i];
            min_entry = fmin(min_entry, w[i * n + j]);
            worst_sym = fmax(worst_sym, fabs(w[i * n + j] - w[j * n + i]));
        }
        worst_row = fmax(worst_row, fabs(r - 1));
        worst_col = fmax(worst_col, fabs(c - 1));
    }
    CHECK_MSG(worst_row < 1e-12, "%s n=%zu round %llu: a row sums to 1 %+g", rumor_topology_spec(t), n,
              (unsigned long long)round, worst_row);
    CHECK_MSG(min_entry >= -1e-15, "%s n=%zu: negative weight %g", rumor_topology_spec(t), n, min_entry);
    if (columns)
        CHECK_MSG(worst_col < 1e-12, "%s n=%zu round %llu: a column sums to 1 %+g", rumor_topology_spec(t), n,
                  (unsigned long long)round, worst_col);
    if (symmetric)
        CHECK_MSG(worst_sym == 0, "%s n=%zu round %llu: W is not symmetric (%g)", rumor_topology_spec(t), n,
                  (unsigned long long)round, worst_sym);
    return w;
}

/* Connected, seen through the out lists taken as undirected edges (round 0). */
static bool connected(rumor_topology_t *t, size_t n)
{
    size_t *stack = malloc(n * sizeof *stack), top = 0, seen_count = 1;
    bool *seen = calloc(n, sizeof *seen);
    seen[0] = true;
    stack[top++] = 0;
    while (top) {
        size_t i = stack[--top];
        const uint32_t *peers;
        size_t count;
        for (int dir = 0; dir < 2; dir++) {
            rumor_err_t rc = dir ? rumor_topology_in(t, n, 0, i, &peers, &count, err)
                                 : rumor_topology_out(t, n, 0, i, &peers, &count, err);
            if (rc != RUMOR_OK) break;
            for (size_t k = 0; k < count; k++)
                if (!seen[peers[k]]) {
                    seen[peers[k]] = true;
                    seen_count++;
                    stack[top++] = peers[k];
                }
        }
    }
    free(stack);
    free(seen);
    return seen_count == n;
}

/* ---- spec parsing ---- */

static void test_spec_errors(void)
{
    const char *bad[] = {"", "ring:3", "regular:0", "erdos:1.5", "epidemic:0", "nonsense", "regular",
                         "regular:", "regular:-1", "regular:+3", "regular:3x", "erdos:0", "erdos:abc",
                         "erdos: 0.5", "erdos:inf", "base:0", "complete:", "torus:2"};
    for (size_t k = 0; k < RUMOR_ARRAY_LEN(bad); k++) {
        err[0] = 0;
        rumor_topology_t *t = rumor_topology_new(bad[k], 1, err);
        CHECK_MSG(t == NULL && err[0], "spec '%s' accepted", bad[k]);
        rumor_topology_destroy(&t);
    }
    CHECK(rumor_topology_new(NULL, 1, err) == NULL);

    /* Constraints that depend on n: the spec parses, checks and queries fail. */
    struct {
        const char *spec;
        size_t n;
    } bad_n[] = {{"hypercube", 6}, {"regular:5", 5}, {"regular:3", 5}, {"regular:1", 4}, {"ring", 0}};
    for (size_t k = 0; k < RUMOR_ARRAY_LEN(bad_n); k++) {
        rumor_topology_t *t = topo(bad_n[k].spec, 1);
        if (!t) continue;
        err[0] = 0;
        CHECK_MSG(rumor_topology_check(t, bad_n[k].n, err) == RUMOR_EINVAL && err[0], "%s on %zu peers accepted",
                  bad_n[k].spec, bad_n[k].n);
        const uint32_t *peers;
        size_t count;
        CHECK(rumor_topology_out(t, bad_n[k].n, 0, 0, &peers, &count, err) == RUMOR_EINVAL);
        rumor_topology_destroy(&t);
        CHECK(t == NULL);
    }
    rumor_topology_t *t = topo("hypercube", 1);
    CHECK(rumor_topology_check(t, 6, err) == RUMOR_EINVAL && strstr(err, "power of 2") != NULL);
    CHECK_RC(rumor_topology_check(t, 8, err));
    const uint32_t *peers;
    size_t count;
    CHECK(rumor_topology_out(t, 8, 0, 8, &peers, &count, err) == RUMOR_EINVAL); /* rank out of range */
    rumor_topology_destroy(&t);
    rumor_topology_destroy(&t); /* NULL is fine */

    const char *good[] = {"complete", "ring", "torus", "hypercube", "expo", "onepeer-expo", "regular:3",
                          "erdos:0.5", "erdos:1", "erdos:.25", "epidemic:2", "base:1", "base:4"};
    for (size_t k = 0; k < RUMOR_ARRAY_LEN(good); k++) {
        t = topo(good[k], 7);
        if (t) CHECK(strcmp(rumor_topology_spec(t), good[k]) == 0);
        rumor_topology_destroy(&t);
    }
}

/* ---- closed forms ---- */

static void test_ring(void)
{
    rumor_topology_t *t = topo("ring", 1);
    for (size_t n = 3; n <= 64; n++) {
        for (size_t i = 0; i < n; i += n / 3) {
            double self;
            const uint32_t *peers;
            const double *w;
            size_t count;
            CHECK_RC(rumor_topology_row(t, n, 0, i, &self, &peers, &w, &count, err));
            CHECK(count == 2);
            CHECK_NEAR(self, 1.0 / 3, 1e-15);
            for (size_t k = 0; k < count; k++) CHECK_NEAR(w[k], 1.0 / 3, 1e-15);
            CHECK(peers[0] == (i + n - 1) % n || peers[0] == (i + 1) % n);
        }
        if (n < 4) continue;
        double gap;
        CHECK_RC(rumor_topology_spectral_gap(t, n, &gap, err));
        double want = 1 - (1.0 / 3 + 2.0 / 3 * cos(2 * M_PI / (double)n));
        CHECK_MSG(fabs(gap - want) < 1e-10, "ring n=%zu gap %.15g, want %.15g", n, gap, want);
    }
    /* Two peers: one edge, W = J. */
    double gap;
    CHECK_RC(rumor_topology_spectral_gap(t, 2, &gap, err));
    CHECK_NEAR(gap, 1, 1e-12);
    rumor_topology_destroy(&t);
}

static void test_complete(void)
{
    rumor_topology_t *t = topo("complete", 1);
    for (size_t n = 1; n <= 24; n++) {
        double *w = check_matrix(t, n, 0, true, true);
        CHECK(max_dev_from_j(w, n) < 1e-15);
        free(w);
        double gap;
        CHECK_RC(rumor_topology_spectral_gap(t, n, &gap, err));
        CHECK_NEAR(gap, 1, 1e-12);
    }
    rumor_topology_stats_t st;
    CHECK_RC(rumor_topology_analyze(t, 10, &st, err));
    CHECK(st.degree_min == 9 && st.degree_max == 9 && st.period == 1 && st.exact_after == 1 && st.symmetric);
    rumor_topology_destroy(&t);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void test_hypercube(void)
{
    rumor_topology_t *t = topo("hypercube", 1);
    for (size_t d = 1; d <= 7; d++) {
        size_t n = (size_t)1 << d;
        double gap;
        CHECK_RC(rumor_topology_spectral_gap(t, n, &gap, err));
        CHECK_MSG(fabs(gap - 2.0 / (double)(d + 1)) < 1e-10, "hypercube d=%zu gap %.15g", d, gap);
        /* The whole spectrum: 1 - 2k/(d+1) with multiplicity C(d, k). */
        double *w = check_matrix(t, n, 0, true, true), *ev = malloc(n * sizeof *ev), *want = malloc(n * sizeof *want);
        CHECK(rumor_lapack_eigvals_sym(ev, w, (int)n) == 0);
        size_t at = 0;
        for (size_t k = 0; k <= d; k++) {
            size_t mult = 1;
            for (size_t x = 0; x < k; x++) mult = mult * (d - x) / (x + 1);
            for (size_t m = 0; m < mult; m++) want[at++] = 1 - 2.0 * (double)k / (double)(d + 1);
        }
        CHECK(at == n);
        qsort(want, n, sizeof *want, cmp_double);
        double worst = 0;
        for (size_t k = 0; k < n; k++) worst = fmax(worst, fabs(ev[k] - want[k]));
        CHECK_MSG(worst < 1e-10, "hypercube d=%zu spectrum off by %g", d, worst);
        free(w);
        free(ev);
        free(want);
    }
    rumor_topology_destroy(&t);
}

static void test_torus(void)
{
    rumor_topology_t *t = topo("torus", 1), *ring = topo("ring", 1);
    /* r x c torus, all degrees 4: W = (I + A)/5, eigenvalues (1 + 2cos(2 pi a/r) + 2cos(2 pi b/c))/5. */
    struct {
        size_t n, r, c;
    } shapes[] = {{16, 4, 4}, {64, 8, 8}, {30, 5, 6}, {35, 5, 7}};
    for (size_t s = 0; s < RUMOR_ARRAY_LEN(shapes); s++) {
        size_t n = shapes[s].n, r = shapes[s].r, c = shapes[s].c;
        double slem = 0;
        for (size_t a = 0; a < r; a++)
            for (size_t b = 0; b < c; b++)
                if (a || b) {
                    double ev = (1 + 2 * cos(2 * M_PI * (double)a / (double)r) +
                                 2 * cos(2 * M_PI * (double)b / (double)c)) / 5;
                    slem = fmax(slem, fabs(ev));
                }
        double gap;
        size_t lo, hi;
        CHECK_RC(rumor_topology_spectral_gap(t, n, &gap, err));
        CHECK_MSG(fabs(gap - (1 - slem)) < 1e-10, "torus %zux%zu gap %.15g, want %.15g", r, c, gap, 1 - slem);
        CHECK_RC(rumor_topology_degrees(t, n, 0, 1, &lo, &hi, err));
        CHECK(lo == 4 && hi == 4);
    }
    /* A prime n is the 1 x n torus: the ring. */
    double g1, g2;
    CHECK_RC(rumor_topology_spectral_gap(t, 13, &g1, err));
    CHECK_RC(rumor_topology_spectral_gap(ring, 13, &g2, err));
    CHECK_NEAR(g1, g2, 1e-12);
    /* 2 x 3: the two vertical neighbours are one peer, so degree 3. */
    size_t lo, hi;
    CHECK_RC(rumor_topology_degrees(t, 6, 0, 1, &lo, &hi, err));
    CHECK(lo == 3 && hi == 3);
    rumor_topology_destroy(&t);
    rumor_topology_destroy(&ring);
}

static void test_expo(void)
{
    rumor_topology_t *t = topo("expo", 1);
    CHECK(rumor_topology_is_directed(t));
    for (size_t n = 2; n <= 40; n++) {
        size_t want = 0;
        for (size_t hop = 1; hop <= n - 1; hop <<= 1) want++;
        for (size_t i = 0; i < n; i++) {
            const uint32_t *peers;
            size_t count;
            CHECK_RC(rumor_topology_out(t, n, 0, i, &peers, &count, err));
            CHECK(count == want);
            CHECK_RC(rumor_topology_in(t, n, 0, i, &peers, &count, err));
            CHECK(count == want);
            for (size_t k = 0; k < count; k++) {
                size_t back = (i + n - peers[k]) % n; /* i - peer must be a power of 2 */
                CHECK(back && !(back & (back - 1)));
            }
            double self;
            const double *w;
            CHECK_RC(rumor_topology_row(t, n, 0, i, &self, &peers, &w, &count, err));
            CHECK_NEAR(self, 1.0 / (double)(want + 1), 1e-15);
            CHECK_NEAR(w[0], 1.0 / (double)(want + 1), 1e-15);
        }
        free(check_matrix(t, n, 0, true, false));
    }
    /* n = 5: out-neighbours +1, +2, +4 = -1; W = (I + P + P^2 + P^4)/4 is circulant with
     * nontrivial eigenvalues (1 + w + w^2 + w^4)/4 = -w^3/4, all of modulus 1/4. */
    rumor_topology_stats_t st;
    CHECK_RC(rumor_topology_analyze(t, 5, &st, err));
    CHECK(!st.symmetric && st.period == 1 && st.exact_after == 0);
    CHECK_NEAR(st.contraction, 0.25, 1e-12);
    CHECK_NEAR(st.spectral_gap, 0.75, 1e-12);
    rumor_topology_destroy(&t);
}

static void test_onepeer_expo(void)
{
    rumor_topology_t *t = topo("onepeer-expo", 1);
    for (size_t k = 1; k <= 7; k++) {
        size_t n = (size_t)1 << k;
        uint64_t period;
        CHECK_RC(rumor_topology_period(t, n, &period, err));
        CHECK(period == k);
        double *p = malloc(n * n * sizeof *p);
        for (size_t r = 1; r <= k; r++) {
            CHECK_RC(rumor_topology_product(t, n, 0, r, p, err));
            double dev = max_dev_from_j(p, n);
            if (r == k) CHECK_MSG(dev < 1e-12, "onepeer-expo n=%zu not exact after %zu rounds (%g)", n, r, dev);
            else CHECK_MSG(dev > 1e-3, "onepeer-expo n=%zu exact already after %zu rounds", n, r);
        }
        free(p);
        for (uint64_t r = 0; r < k; r++) {
            const uint32_t *peers;
            size_t count;
            CHECK_RC(rumor_topology_out(t, n, r, 3 % n, &peers, &count, err));
            CHECK(count == 1 && peers[0] == (3 % n + ((size_t)1 << r)) % n);
            free(check_matrix(t, n, r, true, n == 2));
        }
        rumor_topology_stats_t st;
        CHECK_RC(rumor_topology_analyze(t, n, &st, err));
        CHECK(st.exact_after == k && st.period == k && st.degree_min == 1 && st.degree_max == 1);
        CHECK_NEAR(st.contraction, 0, 1e-7);
    }
    /* Not a power of 2: a period contracts but never averages exactly. */
    rumor_topology_stats_t st;
    CHECK_RC(rumor_topology_analyze(t, 12, &st, err));
    CHECK(st.period == 4 && st.exact_after == 0 && st.contraction > 0.01 && st.contraction < 1);
    rumor_topology_destroy(&t);
}

/* ---- random families ---- */

static bool same_graph(rumor_topology_t *a, rumor_topology_t *b, size_t n, uint64_t round)
{
    for (size_t i = 0; i < n; i++) {
        const uint32_t *pa, *pb;
        size_t ca, cb;
        if (rumor_topology_out(a, n, round, i, &pa, &ca, err) != RUMOR_OK) return false;
        uint32_t *copy = malloc((ca ? ca : 1) * sizeof *copy);
        memcpy(copy, pa, ca * sizeof *copy);
        bool same = rumor_topology_out(b, n, round, i, &pb, &cb, err) == RUMOR_OK && ca == cb &&
                    memcmp(copy, pb, ca * sizeof *copy) == 0;
        free(copy);
        if (!same) return false;
    }
    return true;
}

static void test_regular(void)
{
    struct {
        size_t n, d;
    } cases[] = {{4, 3}, {6, 2}, {10, 2}, {10, 3}, {10, 7}, {10, 8}, {11, 4}, {12, 6}, {50, 3}, {64, 5},
                 {100, 4}, {200, 2}, {31, 20}, {500, 3}};
    for (size_t c = 0; c < RUMOR_ARRAY_LEN(cases); c++) {
        size_t n = cases[c].n, d = cases[c].d;
        char spec[32];
        snprintf(spec, sizeof spec, "regular:%zu", d);
        rumor_topology_t *a = topo(spec, 42), *b = topo(spec, 42), *other = topo(spec, 43);
        size_t lo, hi;
        CHECK_RC(rumor_topology_degrees(a, n, 0, 1, &lo, &hi, err));
        CHECK_MSG(lo == d && hi == d, "%s on %zu: degrees %zu..%zu", spec, n, lo, hi);
        CHECK_MSG(connected(a, n), "%s on %zu peers is not connected", spec, n);
        CHECK(same_graph(a, b, n, 0));
        CHECK(same_graph(a, b, n, 99)); /* static: every round is the same graph */
        if (n >= 10 && d < n - 1) CHECK_MSG(!same_graph(a, other, n, 0), "%s on %zu: seeds 42 and 43 agree", spec, n);
        if (n <= 100) free(check_matrix(a, n, 0, true, true));
        rumor_topology_destroy(&a);
        rumor_topology_destroy(&b);
        rumor_topology_destroy(&other);
    }
    /* Metropolis–Hastings on a D-regular graph: every weight is 1/(D+1). */
    rumor_topology_t *t = topo("regular:4", 5);
    double self;
    const uint32_t *peers;
    const double *w;
    size_t count;
    CHECK_RC(rumor_topology_row(t, 30, 0, 7, &self, &peers, &w, &count, err));
    CHECK(count == 4);
    CHECK_NEAR(self, 0.2, 1e-15);
    for (size_t k = 0; k < count; k++) CHECK_NEAR(w[k], 0.2, 1e-15);
    double gap;
    CHECK_RC(rumor_topology_spectral_gap(t, 30, &gap, err));
    CHECK(gap > 0.05 && gap < 1); /* an expander, not a ring (whose gap would be ~0.015) */
    rumor_topology_destroy(&t);
}

static void test_erdos(void)
{
    rumor_topology_t *a = topo("erdos:0.3", 9), *b = topo("erdos:0.3", 9), *other = topo("erdos:0.3", 10);
    CHECK(same_graph(a, b, 40, 0));
    CHECK(!same_graph(a, other, 40, 0));
    CHECK(connected(a, 40));
    size_t lo, hi, edges = 0;
    CHECK_RC(rumor_topology_degrees(a, 40, 0, 1, &lo, &hi, err));
    for (size_t i = 0; i < 40; i++) {
        const uint32_t *peers;
        size_t count;
        CHECK_RC(rumor_topology_out(a, 40, 0, i, &peers, &count, err));
        edges += count;
    }
    /* 780 pairs at p = 0.3: 234 edges expected, sd ~13. */
    CHECK_MSG(edges / 2 > 170 && edges / 2 < 300, "erdos:0.3 on 40 peers has %zu edges", edges / 2);
    free(check_matrix(a, 40, 0, true, true));
    rumor_topology_destroy(&a);
    rumor_topology_destroy(&b);
    rumor_topology_destroy(&other);

    rumor_topology_t *all = topo("erdos:1", 3);
    CHECK_RC(rumor_topology_degrees(all, 17, 0, 1, &lo, &hi, err));
    CHECK(lo == 16 && hi == 16);
    rumor_topology_destroy(&all);

    /* Far below ln(n)/n no draw is connected: an error, not a silent disconnected graph. */
    rumor_topology_t *sparse = topo("erdos:0.005", 1);
    const uint32_t *peers;
    size_t count;
    err[0] = 0;
    CHECK(rumor_topology_out(sparse, 100, 0, 0, &peers, &count, err) == RUMOR_EINVAL);
    CHECK(strstr(err, "connected") != NULL);
    rumor_topology_destroy(&sparse);
}

static void test_epidemic(void)
{
    rumor_topology_t *t = topo("epidemic:3", 11), *same = topo("epidemic:3", 11);
    uint64_t period;
    CHECK_RC(rumor_topology_period(t, 20, &period, err));
    CHECK(period == 0);
    size_t n = 20;
    for (uint64_t r = 0; r < 6; r++) {
        size_t in_total = 0;
        for (size_t i = 0; i < n; i++) {
            const uint32_t *peers;
            size_t count;
            CHECK_RC(rumor_topology_out(t, n, r, i, &peers, &count, err));
            CHECK(count == 3);
            for (size_t k = 0; k < count; k++) {
                CHECK(peers[k] != i && peers[k] < n);
                if (k) CHECK(peers[k] > peers[k - 1]); /* sorted, distinct */
            }
            CHECK_RC(rumor_topology_in(t, n, r, i, &peers, &count, err));
            in_total += count;
        }
        CHECK(in_total == 3 * n);
        /* Push shares: rows sum to 1 (column sums vary with in-degrees). */
        free(check_matrix(t, n, r, false, false));
        CHECK(same_graph(t, same, n, r));
    }
    /* A fresh draw every round. */
    bool differ = false;
    for (size_t i = 0; i < n && !differ; i++) {
        const uint32_t *p0;
        size_t c0, c1;
        CHECK_RC(rumor_topology_out(t, n, 0, i, &p0, &c0, err));
        uint32_t first[3];
        memcpy(first, p0, sizeof first);
        const uint32_t *p1;
        CHECK_RC(rumor_topology_out(same, n, 1, i, &p1, &c1, err));
        differ = memcmp(first, p1, sizeof first) != 0;
    }
    CHECK_MSG(differ, "epidemic: rounds 0 and 1 chose the same peers everywhere");
    /* S >= n: every other peer. */
    const uint32_t *peers;
    size_t count;
    CHECK_RC(rumor_topology_out(t, 3, 0, 1, &peers, &count, err));
    CHECK(count == 2);
    rumor_topology_stats_t st;
    CHECK_RC(rumor_topology_analyze(t, 20, &st, err));
    CHECK(st.period == 0 && isnan(st.spectral_gap) && st.exact_after == 0 && st.degree_min == 3 && st.degree_max == 3);
    rumor_topology_destroy(&t);
    rumor_topology_destroy(&same);
}

/* ---- Base-(k+1) ---- */

static void test_base(void)
{
    for (long k = 1; k <= 5; k++) {
        char spec[16];
        snprintf(spec, sizeof spec, "base:%ld", k);
        rumor_topology_t *t = topo(spec, 1);
        size_t sizes[80], count_sizes = 0;
        for (size_t n = 1; n <= 64; n++) sizes[count_sizes++] = n;
        const size_t extra[] = {97, 100, 127, 143, 210};
        for (size_t x = 0; x < RUMOR_ARRAY_LEN(extra); x++) sizes[count_sizes++] = extra[x];
        for (size_t s = 0; s < count_sizes; s++) {
            size_t n = sizes[s];
            uint64_t period;
            CHECK_RC(rumor_topology_period(t, n, &period, err));
            size_t lo, hi;
            CHECK_RC(rumor_topology_degrees(t, n, 0, period, &lo, &hi, err));
            CHECK_MSG(hi <= (size_t)k, "%s on %zu peers: %zu neighbours in a round", spec, n, hi);
            if (n <= 64)
                for (uint64_t r = 0; r < period; r++) free(check_matrix(t, n, r, true, true));
            double *p = malloc(n * n * sizeof *p);
            CHECK_RC(rumor_topology_product(t, n, 0, period, p, err));
            double dev = max_dev_from_j(p, n);
            CHECK_MSG(dev < 1e-12, "%s on %zu peers: period of %llu rounds is off J by %g", spec, n,
                      (unsigned long long)period, dev);
            /* The next period starts over and stays at J. */
            CHECK_RC(rumor_topology_product(t, n, period, 2 * period, p, err));
            CHECK(max_dev_from_j(p, n) < 1e-12);
            free(p);
        }
        rumor_topology_destroy(&t);
    }
    /* Known lengths (the same as the authors' code): n = (k+1)^p is the hyper-hypercube, p
     * rounds; Base-2 on 5 nodes: 2 rounds on the first 4, one to fold in the 5th, 2 more to
     * spread it; on 6 nodes: Base-2 on two triples (3 rounds), then the pairs (1). */
    struct {
        const char *spec;
        size_t n;
        uint64_t period;
    } known[] = {{"base:1", 16, 4}, {"base:2", 27, 3}, {"base:3", 64, 3}, {"base:4", 5, 1},
                 {"base:1", 5, 5}, {"base:1", 6, 4}, {"base:2", 6, 2}, {"base:1", 1, 1}};
    for (size_t x = 0; x < RUMOR_ARRAY_LEN(known); x++) {
        rumor_topology_t *t = topo(known[x].spec, 1);
        uint64_t period;
        CHECK_RC(rumor_topology_period(t, known[x].n, &period, err));
        CHECK_MSG(period == known[x].period, "%s on %zu peers: period %llu, want %llu", known[x].spec, known[x].n,
                  (unsigned long long)period, (unsigned long long)known[x].period);
        rumor_topology_destroy(&t);
    }
    rumor_topology_t *t = topo("base:1", 1);
    rumor_topology_stats_t st;
    CHECK_RC(rumor_topology_analyze(t, 12, &st, err));
    CHECK(st.exact_after >= 1 && st.exact_after <= st.period && st.degree_max == 1);
    CHECK_NEAR(st.contraction, 0, 1e-7);
    CHECK_NEAR(st.spectral_gap, 1, 1e-7);
    rumor_topology_destroy(&t);
}

/* ---- the rest ---- */

static void test_every_family(void)
{
    /* Every W row sums to 1; columns too, and W = W^T for undirected families. */
    size_t count;
    const struct rumor_topology_ops *const *fam = rumor_topology_families(&count);
    CHECK(count == 10);
    const char *specs[] = {"complete", "ring", "torus", "hypercube", "expo", "onepeer-expo",
                           "regular:3", "erdos:0.5", "epidemic:2", "base:2"};
    const size_t ns[] = {1, 2, 8, 12, 16, 30};
    for (size_t s = 0; s < RUMOR_ARRAY_LEN(specs); s++) {
        rumor_topology_t *t = topo(specs[s], 3);
        if (!t) continue;
        CHECK(rumor_topology_family(t) == fam[s]); /* the registry's order */
        bool undirected = !rumor_topology_is_directed(t);
        for (size_t k = 0; k < RUMOR_ARRAY_LEN(ns); k++) {
            size_t n = ns[k];
            if (rumor_topology_check(t, n, err) != RUMOR_OK) continue;
            for (uint64_t r = 0; r < 5; r++)
                free(check_matrix(t, n, r, strcmp(specs[s], "epidemic:2") != 0, undirected));
            /* The row and column queries agree with the dense matrix. */
            double *w = malloc(n * n * sizeof *w);
            CHECK_RC(rumor_topology_matrix(t, n, 2, w, err));
            for (size_t i = 0; i < n; i++) {
                double self;
                const uint32_t *peers;
                const double *pw;
                size_t c;
                CHECK_RC(rumor_topology_row(t, n, 2, i, &self, &peers, &pw, &c, err));
                CHECK(self == w[i * n + i]);
                for (size_t e = 0; e < c; e++) CHECK(pw[e] == w[i * n + peers[e]] && peers[e] != i);
                CHECK_RC(rumor_topology_column(t, n, 2, i, &self, &peers, &pw, &c, err));
                for (size_t e = 0; e < c; e++) CHECK(pw[e] == w[peers[e] * n + i] && peers[e] != i);
            }
            free(w);
        }
        rumor_topology_destroy(&t);
    }
}

static void test_spectral_tools(void)
{
    enum { N = 5 };
    double a[N * N] = {0}, v;
    for (size_t i = 0; i < N; i++) a[i * N + (i + 1) % N] = 1; /* a cyclic shift */
    CHECK_RC(rumor_topology_dist_j(a, N, &v, err));
    CHECK_NEAR(v, 1, 1e-12);
    for (size_t k = 0; k < N * N; k++) a[k] = 1.0 / N;
    CHECK_RC(rumor_topology_dist_j(a, N, &v, err));
    CHECK_NEAR(v, 0, 1e-7);
    CHECK_RC(rumor_topology_slem_sym(a, N, &v, err));
    CHECK_NEAR(v, 0, 1e-12);
    /* A non-normal example: J + e_0 e_1^T * 3 (rank one off J) has ||.-J|| = 3. */
    a[0 * N + 1] += 3;
    CHECK_RC(rumor_topology_dist_j(a, N, &v, err));
    CHECK_NEAR(v, 3, 1e-12);

    /* Analysis refuses dense work beyond its limit. */
    rumor_topology_t *t = topo("ring", 1);
    rumor_topology_stats_t st;
    CHECK(rumor_topology_analyze(t, RUMOR_TOPOLOGY_DENSE_MAX + 1, &st, err) == RUMOR_EINVAL);
    CHECK_RC(rumor_topology_analyze(t, 10, &st, err));
    CHECK(st.symmetric && st.period == 1 && st.exact_after == 0 && st.degree_min == 2 && st.degree_max == 2);
    CHECK_NEAR(st.spectral_gap, 1 - (1.0 / 3 + 2.0 / 3 * cos(2 * M_PI / 10)), 1e-10);
    CHECK_NEAR(st.contraction + st.spectral_gap, 1, 1e-15);
    /* Neighbour lists work far beyond the dense limit. */
    const uint32_t *peers;
    size_t count;
    CHECK_RC(rumor_topology_out(t, 100000, 0, 0, &peers, &count, err));
    CHECK(count == 2 && peers[0] == 1 && peers[1] == 99999);
    rumor_topology_destroy(&t);
}

int main(void)
{
    test_spec_errors();
    test_ring();
    test_complete();
    test_hypercube();
    test_torus();
    test_expo();
    test_onepeer_expo();
    test_regular();
    test_erdos();
    test_epidemic();
    test_base();
    test_every_family();
    test_spectral_tools();
    return check_done();
}
