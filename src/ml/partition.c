/* partition.c - deterministic assignment of samples to peers (see data.h).
 *
 * Every call computes the whole assignment, owner[i] = the peer of sample i, from the seed,
 * the labels and the number of peers alone, and then keeps rank's samples. That makes
 * "every sample has exactly one owner" true by construction and the result independent of
 * which peer asks, or in which order. The cost, O(n_samples + classes * peers) per call, is
 * paid once per peer at start-up.
 */
#include "data.h"
#include "rng.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define SHARDS_MAX 1000

/* Stream tags for rumor_rng_init2: distinct from the small integers (epochs, ranks) other
 * modules mix in, so a partition never reuses the stream of a shuffle elsewhere. */
#define STREAM_IID 0x7061727469696400ULL       /* "partiid" */
#define STREAM_DIR_ORDER 0x7061727464697201ULL /* "partdir" + 1: a class's sample order */
#define STREAM_DIR_PROP 0x7061727464697202ULL  /* "partdir" + 2: a class's proportions */
#define STREAM_SHARDS 0x7061727473686400ULL    /* "partshd" */

#define PART_EXPECTED "(expected iid, dirichlet:ALPHA, shards:K or docs)"

// ---- parsing ----

void rumor_partition_format(char *buf, size_t len, const rumor_partition_t *part)
{
    switch (part->kind) {
    case RUMOR_PART_IID: snprintf(buf, len, "iid"); break;
    case RUMOR_PART_DIRICHLET: snprintf(buf, len, "dirichlet:%.17g", part->alpha); break;
    case RUMOR_PART_SHARDS: snprintf(buf, len, "shards:%d", part->shards); break;
    case RUMOR_PART_DOCS: snprintf(buf, len, "docs"); break;
    }
}

rumor_err_t rumor_partition_parse(rumor_partition_t *out, const char *spec,
                                  char err[RUMOR_ERR_LEN])
{
    assert(out);
    memset(out, 0, sizeof *out);
    if (!spec || !*spec) return rumor_fail(err, RUMOR_EINVAL, "empty partition " PART_EXPECTED);

    if (strcmp(spec, "iid") == 0) {
        out->kind = RUMOR_PART_IID;
        return RUMOR_OK;
    }
    if (strcmp(spec, "docs") == 0) {
        out->kind = RUMOR_PART_DOCS;
        return RUMOR_OK;
    }
    if (strncmp(spec, "dirichlet:", 10) == 0) {
        const char *s = spec + 10;
        char *end = (char *)s;
        double a = 0.0;
        /* strtod would skip leading blanks and stop at the first bad character: insist on
         * a number right after the colon and nothing after it. */
        errno = 0;
        if (*s && !isspace((unsigned char)*s)) a = strtod(s, &end);
        if (end == s || *end || errno == ERANGE || !isfinite(a) || !(a > 0.0))
            return rumor_fail(err, RUMOR_EINVAL,
                              "bad partition '%s': ALPHA must be a finite number > 0, e.g. dirichlet:0.5",
                              spec);
        out->kind = RUMOR_PART_DIRICHLET;
        out->alpha = a;
        return RUMOR_OK;
    }
    if (strncmp(spec, "shards:", 7) == 0) {
        const char *s = spec + 7;
        long k = 0;
        size_t i = 0;
        /* Digits only (no sign, blanks or suffix); stop accumulating once past the limit. */
        for (; s[i] >= '0' && s[i] <= '9'; i++)
            if (k <= SHARDS_MAX) k = k * 10 + (s[i] - '0');
        if (i == 0 || s[i] || k < 1 || k > SHARDS_MAX)
            return rumor_fail(err, RUMOR_EINVAL, "bad partition '%s': K must be an integer in 1..%d",
                              spec, SHARDS_MAX);
        out->kind = RUMOR_PART_SHARDS;
        out->shards = (int)k;
        return RUMOR_OK;
    }
    return rumor_fail(err, RUMOR_EINVAL, "unknown partition '%s' " PART_EXPECTED, spec);
}

// ---- assignments: owner[i] for every sample ----

/* Cut n positions into `parts` nearly equal runs: run p starts at floor(p * n / parts), so
 * sizes differ by at most one. Written as q*p + r*p/parts (n = q*parts + r) so the product
 * stays below parts^2, which fits in 64 bits since parts <= n < 2^32. */
static size_t cut(size_t n, size_t parts, size_t p)
{
    return (n / parts) * p + (n % parts) * p / parts;
}

static void assign_iid(uint32_t *owner, size_t n, uint32_t peers, size_t *perm, uint64_t seed)
{
    rumor_rng_t rng;
    rumor_rng_init2(&rng, seed, STREAM_IID, 0);
    for (size_t i = 0; i < n; i++) perm[i] = i;
    rumor_rng_shuffle(&rng, perm, n);
    for (uint32_t p = 0; p < peers; p++) {
        const size_t lo = cut(n, peers, p), hi = cut(n, peers, p + 1);
        for (size_t j = lo; j < hi; j++) owner[perm[j]] = p;
    }
}

/* Samples grouped by class, ascending index within a class: by_class[start[c]..start[c+1]). */
static void group_by_class(const uint8_t *labels, int classes, size_t n, size_t *by_class,
                           size_t start[RUMOR_DATA_MAX_CLASSES + 1])
{
    size_t fill[RUMOR_DATA_MAX_CLASSES] = {0};
    memset(start, 0, (RUMOR_DATA_MAX_CLASSES + 1) * sizeof *start);
    for (size_t i = 0; i < n; i++) start[labels[i] + 1]++;
    for (int c = 0; c < classes; c++) start[c + 1] += start[c];
    for (size_t i = 0; i < n; i++) by_class[start[labels[i]] + fill[labels[i]]++] = i;
}

static void assign_dirichlet(uint32_t *owner, const uint8_t *labels, int classes, size_t n, uint32_t peers,
                             double alpha, size_t *by_class, double *prop, uint64_t seed)
{
    size_t start[RUMOR_DATA_MAX_CLASSES + 1];
    group_by_class(labels, classes, n, by_class, start);
    for (int c = 0; c < classes; c++) {
        size_t *list = by_class + start[c];
        const size_t nc = start[c + 1] - start[c];
        rumor_rng_t rng;
        rumor_rng_init2(&rng, seed, STREAM_DIR_ORDER, (uint64_t)c);
        rumor_rng_shuffle(&rng, list, nc);

        /* Dir(alpha) as normalised Gamma(alpha) draws. They are scaled by their maximum
         * first so that a huge alpha cannot overflow the sum. A tiny alpha can underflow
         * every draw to zero; the limit of Dir(alpha) as alpha -> 0 is a uniformly chosen
         * vertex, i.e. the whole class to one peer, which is what we use then. */
        rumor_rng_init2(&rng, seed, STREAM_DIR_PROP, (uint64_t)c);
        double max = 0.0;
        for (uint32_t p = 0; p < peers; p++) {
            prop[p] = rumor_rng_gamma(&rng, alpha);
            if (prop[p] > max) max = prop[p];
        }
        if (!(max > 0.0) || !isfinite(max)) {
            uint32_t only = (uint32_t)rumor_rng_below(&rng, peers);
            for (size_t j = 0; j < nc; j++) owner[list[j]] = only;
            continue;
        }
        double total = 0.0;
        for (uint32_t p = 0; p < peers; p++) total += (prop[p] /= max);

        /* Cut points round the cumulative share, so the counts always add up to nc exactly
         * and each peer's count is within one of nc * its proportion. */
        double cum = 0.0;
        size_t lo = 0;
        for (uint32_t p = 0; p < peers; p++) {
            cum += prop[p];
            size_t hi = p + 1 == peers ? nc : (size_t)floor((double)nc * (cum / total) + 0.5);
            if (hi > nc) hi = nc;
            if (hi < lo) hi = lo;
            for (size_t j = lo; j < hi; j++) owner[list[j]] = p;
            lo = hi;
        }
    }
}

static void assign_shards(uint32_t *owner, const uint8_t *labels, int classes, size_t n, uint32_t peers,
                          uint32_t k, size_t *by_class, size_t *shard_of, uint64_t seed)
{
    size_t start[RUMOR_DATA_MAX_CLASSES + 1];
    group_by_class(labels, classes, n, by_class, start);
    /* by_class is the label-sorted order; shard s is its run [cut(s), cut(s+1)). Shards are
     * dealt by a seeded permutation: peer p gets shards perm[p*k .. p*k+k). */
    const size_t n_shards = (size_t)peers * k;
    rumor_rng_t rng;
    rumor_rng_init2(&rng, seed, STREAM_SHARDS, 0);
    for (size_t s = 0; s < n_shards; s++) shard_of[s] = s;
    rumor_rng_shuffle(&rng, shard_of, n_shards);
    for (size_t slot = 0; slot < n_shards; slot++) {
        const size_t s = shard_of[slot];
        const uint32_t p = (uint32_t)(slot / k);
        const size_t lo = cut(n, n_shards, s), hi = cut(n, n_shards, s + 1);
        for (size_t j = lo; j < hi; j++) owner[by_class[j]] = p;
    }
}

rumor_err_t rumor_partition_indices(size_t **idx, size_t *count, const rumor_partition_t *part,
                                    const uint8_t *labels, int classes, size_t n_samples, uint64_t seed,
                                    int rank, int peers, char err[RUMOR_ERR_LEN])
{
    assert(idx && count && part);
    *idx = NULL;
    *count = 0;
    if (peers < 1) return rumor_fail(err, RUMOR_EINVAL, "peers must be at least 1 (got %d)", peers);
    if (rank < 0 || rank >= peers)
        return rumor_fail(err, RUMOR_EINVAL, "rank %d out of range 0..%d", rank, peers - 1);
    /* owner[] holds peer numbers as 32 bits to halve its size; sample indices stay size_t. */
    if (n_samples > UINT32_MAX)
        return rumor_fail(err, RUMOR_EINVAL, "too many samples (%zu)", n_samples);

    const uint32_t np = (uint32_t)peers;
    size_t n_shards = 0;
    switch (part->kind) {
    case RUMOR_PART_IID: break;
    case RUMOR_PART_DIRICHLET:
        if (!(part->alpha > 0.0) || !isfinite(part->alpha))
            return rumor_fail(err, RUMOR_EINVAL, "dirichlet alpha must be finite and > 0 (got %g)",
                              part->alpha);
        break;
    case RUMOR_PART_SHARDS:
        if (part->shards < 1 || part->shards > SHARDS_MAX)
            return rumor_fail(err, RUMOR_EINVAL, "shards per peer must be in 1..%d (got %d)",
                              SHARDS_MAX, part->shards);
        if ((uint64_t)np * (uint64_t)part->shards > n_samples)
            return rumor_fail(err, RUMOR_EINVAL,
                              "shards:%d with %d peers needs %llu shards but there are only %zu samples",
                              part->shards, peers,
                              (unsigned long long)np * (unsigned long long)part->shards, n_samples);
        n_shards = (size_t)np * (size_t)part->shards;
        break;
    case RUMOR_PART_DOCS:
        return rumor_fail(err, RUMOR_EINVAL, "--partition docs: whole documents, for text; labelled data takes iid, "
                          "dirichlet:ALPHA or shards:K");
    default: return rumor_fail(err, RUMOR_EINVAL, "unknown partition kind %d", (int)part->kind);
    }
    if (n_samples == 0) return RUMOR_OK;
    if (part->kind != RUMOR_PART_IID) {
        assert(labels);
        if (classes < 1 || classes > RUMOR_DATA_MAX_CLASSES)
            return rumor_fail(err, RUMOR_EINVAL, "%d classes: expected 1..%d", classes, RUMOR_DATA_MAX_CLASSES);
        for (size_t i = 0; i < n_samples; i++)
            if (labels[i] >= classes)
                return rumor_fail(err, RUMOR_EINVAL, "label %u at index %zu out of range 0..%d",
                                  labels[i], i, classes - 1);
    }

    rumor_err_t rc = RUMOR_OK;
    uint32_t *owner = malloc(n_samples * sizeof *owner);
    size_t *scratch = malloc(n_samples * sizeof *scratch); /* a permutation or class order */
    double *prop = NULL;                                    /* dirichlet: one class's shares */
    size_t *deal = NULL;                                    /* shards: shard order */
    size_t *mine = NULL;
    if (part->kind == RUMOR_PART_DIRICHLET) prop = malloc(np * sizeof *prop);
    if (part->kind == RUMOR_PART_SHARDS) deal = malloc(n_shards * sizeof *deal);
    if (!owner || !scratch || (part->kind == RUMOR_PART_DIRICHLET && !prop) ||
        (part->kind == RUMOR_PART_SHARDS && !deal)) {
        rc = rumor_fail(err, RUMOR_ENOMEM, "out of memory partitioning %zu samples", n_samples);
        goto out;
    }

    switch (part->kind) {
    case RUMOR_PART_IID: assign_iid(owner, n_samples, np, scratch, seed); break;
    case RUMOR_PART_DIRICHLET:
        assign_dirichlet(owner, labels, classes, n_samples, np, part->alpha, scratch, prop, seed);
        break;
    case RUMOR_PART_SHARDS:
        assign_shards(owner, labels, classes, n_samples, np, (uint32_t)part->shards, scratch, deal, seed);
        break;
    case RUMOR_PART_DOCS: break; /* refused above */
    }

    size_t n_mine = 0;
    for (size_t i = 0; i < n_samples; i++) n_mine += owner[i] == (uint32_t)rank;
    if (n_mine) {
        if (!(mine = malloc(n_mine * sizeof *mine))) {
            rc = rumor_fail(err, RUMOR_ENOMEM, "out of memory for %zu indices", n_mine);
            goto out;
        }
        size_t j = 0;
        for (size_t i = 0; i < n_samples; i++)
            if (owner[i] == (uint32_t)rank) mine[j++] = i;
    }
    *idx = mine;
    *count = n_mine;
out:
    free(owner);
    free(scratch);
    free(prop);
    free(deal);
    return rc;
}
