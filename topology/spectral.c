/*
 * spectral.c - how fast a topology averages: second largest eigenvalue modulus of a
 * symmetric W, the norm ||P - J||_2 of a product over one period, and the round after which
 * averaging is exact. Dense linear algebra through rumor_lapack_eigvals_sym (the CPU backend
 * is the only module that talks to LAPACK).
 */
#include "backend.h"
#include "topology.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Entries within this of 1/n count as exact averaging: products of exact constructions
 * carry rounding of order 1e-15 per round, far below it. */
#define EXACT_TOL 1e-9

static rumor_err_t check_dense(size_t n, char err[RUMOR_ERR_LEN])
{
    if (n < 1 || n > RUMOR_TOPOLOGY_DENSE_MAX)
        return rumor_fail(err, RUMOR_EINVAL, "spectral analysis is dense: 1 to %d peers, not %zu",
                          RUMOR_TOPOLOGY_DENSE_MAX, n);
    return RUMOR_OK;
}

static rumor_err_t eigvals(double *w, double *a, size_t n, char err[RUMOR_ERR_LEN])
{
    int info = rumor_lapack_eigvals_sym(w, a, (int)n);
    if (info == -1) return rumor_fail(err, RUMOR_ENOMEM, "out of memory for LAPACK's workspace");
    if (info != 0)
        return rumor_fail(err, RUMOR_EIO, "LAPACK dsyev failed on a %zu x %zu matrix (info %d)", n, n, info);
    return RUMOR_OK;
}

rumor_err_t rumor_topology_slem_sym(const double *a, size_t n, double *slem, char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc = check_dense(n, err);
    if (rc != RUMOR_OK) return rc;
    double *m = malloc(n * n * sizeof *m), *w = malloc(n * sizeof *w);
    if (!m || !w) {
        rc = rumor_fail(err, RUMOR_ENOMEM, "out of memory for a %zu x %zu matrix", n, n);
        goto out;
    }
    /* The eigenvalues of W - J are those of W with the eigenvalue 1 of the all-ones vector
     * replaced by 0, so the largest modulus is |lambda_2| (and 1 for a disconnected graph),
     * with no need to find and drop the top eigenvalue by hand. */
    const double jv = 1.0 / (double)n;
    for (size_t k = 0; k < n * n; k++) m[k] = a[k] - jv;
    if ((rc = eigvals(w, m, n, err)) != RUMOR_OK) goto out;
    *slem = fmax(fabs(w[0]), fabs(w[n - 1]));
out:
    free(m);
    free(w);
    return rc;
}

/* g[x][y] += dot(mt[x][ib..ib+len), mt[y][ib..ib+len)) for two rows x and four rows y:
 * six streams feed eight sums, where a lone dot product loads two numbers per multiply. */
static void dots_2x4(double *g, const double *mt, size_t n, size_t x, size_t y, size_t ib, size_t len)
{
    const double *a0 = mt + x * n + ib, *a1 = a0 + n;
    const double *b0 = mt + y * n + ib, *b1 = b0 + n, *b2 = b1 + n, *b3 = b2 + n;
    double s00 = 0, s01 = 0, s02 = 0, s03 = 0, s10 = 0, s11 = 0, s12 = 0, s13 = 0;
#pragma omp simd reduction(+ : s00, s01, s02, s03, s10, s11, s12, s13)
    for (size_t i = 0; i < len; i++) {
        double u = a0[i], v = a1[i];
        s00 += u * b0[i];
        s01 += u * b1[i];
        s02 += u * b2[i];
        s03 += u * b3[i];
        s10 += v * b0[i];
        s11 += v * b1[i];
        s12 += v * b2[i];
        s13 += v * b3[i];
    }
    double *g0 = g + x * n + y, *g1 = g0 + n;
    g0[0] += s00;
    g0[1] += s01;
    g0[2] += s02;
    g0[3] += s03;
    g1[0] += s10;
    g1[1] += s11;
    g1[2] += s12;
    g1[3] += s13;
}

static void dot_1x1(double *g, const double *mt, size_t n, size_t x, size_t y, size_t ib, size_t len)
{
    const double *a = mt + x * n + ib, *b = mt + y * n + ib;
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (size_t i = 0; i < len; i++) s += a[i] * b[i];
    g[x * n + y] += s;
}

/* g = m^T m for an n x n matrix given as its transpose mt (row x of mt is column x of m), so
 * that every entry is a dot product of two contiguous rows. Tiles of rows and chunks of the
 * summed index keep the operands in cache; tiles below the diagonal are mirrored, not
 * computed. (The CPU backend's BLAS would do this faster, but LAPACK's eigenvalues are the
 * only dense routine exported to analysis code; this is O(n^3) either way.) */
static void gram(double *g, const double *mt, size_t n)
{
    enum { TILE = 64, CHUNK = 512 };
    memset(g, 0, n * n * sizeof *g);
    for (size_t xb = 0; xb < n; xb += TILE) {
        size_t xe = xb + TILE < n ? xb + TILE : n;
        for (size_t yb = xb; yb < n; yb += TILE) {
            size_t ye = yb + TILE < n ? yb + TILE : n;
            for (size_t ib = 0; ib < n; ib += CHUNK) {
                size_t len = ib + CHUNK < n ? CHUNK : n - ib;
                size_t x = xb;
                for (; x + 2 <= xe; x += 2) {
                    size_t y = yb;
                    for (; y + 4 <= ye; y += 4) dots_2x4(g, mt, n, x, y, ib, len);
                    for (; y < ye; y++) {
                        dot_1x1(g, mt, n, x, y, ib, len);
                        dot_1x1(g, mt, n, x + 1, y, ib, len);
                    }
                }
                for (; x < xe; x++)
                    for (size_t y = yb; y < ye; y++) dot_1x1(g, mt, n, x, y, ib, len);
            }
        }
    }
    /* Diagonal tiles were computed whole; copying the upper triangle down makes g exactly
     * symmetric, as dsyev assumes. */
    for (size_t x = 0; x < n; x++)
        for (size_t y = x + 1; y < n; y++) g[y * n + x] = g[x * n + y];
}

rumor_err_t rumor_topology_dist_j(const double *a, size_t n, double *norm, char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc = check_dense(n, err);
    if (rc != RUMOR_OK) return rc;
    double *mt = malloc(n * n * sizeof *mt), *g = malloc(n * n * sizeof *g), *w = malloc(n * sizeof *w);
    if (!mt || !g || !w) {
        rc = rumor_fail(err, RUMOR_ENOMEM, "out of memory for %zu x %zu matrices", n, n);
        goto out;
    }
    const double jv = 1.0 / (double)n;
    for (size_t i = 0; i < n; i++)
        for (size_t x = 0; x < n; x++) mt[x * n + i] = a[i * n + x] - jv;
    gram(g, mt, n);
    if ((rc = eigvals(w, g, n, err)) != RUMOR_OK) goto out;
    /* The Gram matrix is positive semi-definite; rounding may leave its eigenvalues a hair
     * below zero when a - J is (numerically) zero. */
    *norm = sqrt(fmax(w[n - 1], 0.0));
out:
    free(mt);
    free(g);
    free(w);
    return rc;
}

static bool is_static_symmetric(const rumor_topology_t *t, uint64_t period)
{
    return !rumor_topology_is_directed(t) && period == 1;
}

rumor_err_t rumor_topology_spectral_gap(rumor_topology_t *t, size_t n, double *gap, char err[RUMOR_ERR_LEN])
{
    uint64_t period;
    rumor_err_t rc = rumor_topology_period(t, n, &period, err);
    if (rc != RUMOR_OK || (rc = check_dense(n, err)) != RUMOR_OK) return rc;
    if (!is_static_symmetric(t, period))
        return rumor_fail(err, RUMOR_ENOTSUP,
                          "%s is %s: it has no symmetric W, see its contraction over a period instead",
                          rumor_topology_spec(t), rumor_topology_is_directed(t) ? "directed" : "time-varying");
    double *w = malloc(n * n * sizeof *w), slem = 0;
    if (!w) return rumor_fail(err, RUMOR_ENOMEM, "out of memory for a %zu x %zu matrix", n, n);
    if ((rc = rumor_topology_matrix(t, n, 0, w, err)) == RUMOR_OK &&
        (rc = rumor_topology_slem_sym(w, n, &slem, err)) == RUMOR_OK)
        *gap = 1.0 - slem;
    free(w);
    return rc;
}

static bool is_j(const double *p, size_t n)
{
    const double jv = 1.0 / (double)n;
    for (size_t k = 0; k < n * n; k++)
        if (fabs(p[k] - jv) > EXACT_TOL) return false;
    return true;
}

rumor_err_t rumor_topology_analyze(rumor_topology_t *t, size_t n, rumor_topology_stats_t *st,
                                   char err[RUMOR_ERR_LEN])
{
    memset(st, 0, sizeof *st);
    st->contraction = st->spectral_gap = NAN;
    uint64_t period;
    rumor_err_t rc = rumor_topology_period(t, n, &period, err);
    if (rc != RUMOR_OK || (rc = check_dense(n, err)) != RUMOR_OK) return rc;
    st->period = period;
    st->symmetric = is_static_symmetric(t, period);
    if ((rc = rumor_topology_degrees(t, n, 0, period ? period : 1, &st->degree_min, &st->degree_max, err)) != RUMOR_OK)
        return rc;
    if (period == 0) return RUMOR_OK; /* fresh random graphs: no per-period factor */

    if (st->symmetric) {
        double gap;
        if ((rc = rumor_topology_spectral_gap(t, n, &gap, err)) != RUMOR_OK) return rc;
        st->spectral_gap = gap;
        st->contraction = 1.0 - gap;
        /* ||W^r - J|| = |lambda_2|^r: exact for some r only when W = J already. */
        st->exact_after = st->contraction <= EXACT_TOL ? 1 : 0;
        return RUMOR_OK;
    }

    /* Multiply round after round: the norm at the end of the first period, and the first
     * round at which the product is J. The search stops at max(4 periods, 8 rounds), which
     * covers every exact construction here (exact within one period). */
    double *p = malloc(n * n * sizeof *p);
    if (!p) return rumor_fail(err, RUMOR_ENOMEM, "out of memory for a %zu x %zu product", n, n);
    memset(p, 0, n * n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i * n + i] = 1.0;
    uint64_t limit = 4 * period > 8 ? 4 * period : 8;
    for (uint64_t r = 1; r <= limit; r++) {
        if ((rc = rumor_topology_apply(t, n, r - 1, p, err)) != RUMOR_OK) break;
        if (r == period) {
            if ((rc = rumor_topology_dist_j(p, n, &st->contraction, err)) != RUMOR_OK) break;
            st->spectral_gap = 1.0 - st->contraction;
        }
        if (!st->exact_after && is_j(p, n)) st->exact_after = r;
        if (st->exact_after && r >= period) break;
    }
    free(p);
    return rc;
}
