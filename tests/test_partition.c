/* test_partition.c - partition specs and the sample-to-peer assignment: exact cover,
 * determinism, balance for iid, the class bound for shards, skew for dirichlet. */
#include "check.h"
#include "data.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PEERS 16
#define MAX_N 10000

static const char *const SPECS[] = {"iid", "dirichlet:0.5", "dirichlet:0.1", "shards:2"};
static const int PEERS[] = {1, 3, 8, 10};

/* The whole assignment, gathered from every rank: owner[i] = peer of sample i. */
typedef struct {
    int owner[MAX_N];
    size_t count[MAX_PEERS];
    int ok; /* every call succeeded, every sample owned once, each list ascending */
} assign_t;

static void assign(assign_t *a, const rumor_partition_t *part, const uint8_t *labels, size_t n,
                   uint64_t seed, int peers)
{
    char err[RUMOR_ERR_LEN] = "";
    a->ok = 1;
    for (size_t i = 0; i < n; i++) a->owner[i] = -1;
    /* ranks in descending order: no call may depend on another having happened */
    for (int r = peers - 1; r >= 0; r--) {
        size_t *idx = NULL, count = 0;
        rumor_err_t rc = rumor_partition_indices(&idx, &count, part, labels, RUMOR_DATA_CLASSES, n, seed, r, peers, err);
        CHECK_MSG(rc == RUMOR_OK, "%s", err);
        if (rc != RUMOR_OK) {
            a->ok = 0;
            continue;
        }
        CHECK(count == 0 || idx != NULL);
        a->count[r] = count;
        for (size_t j = 0; j < count; j++) {
            if (idx[j] >= n || a->owner[idx[j]] != -1 || (j && idx[j] <= idx[j - 1])) {
                a->ok = 0;
                break;
            }
            a->owner[idx[j]] = r;
        }
        free(idx);
    }
    for (size_t i = 0; i < n; i++)
        if (a->owner[i] < 0) a->ok = 0;
}

static int same_owners(const assign_t *a, const assign_t *b, size_t n)
{
    return memcmp(a->owner, b->owner, n * sizeof a->owner[0]) == 0;
}

static rumor_partition_t parse_ok(const char *spec)
{
    rumor_partition_t p;
    char err[RUMOR_ERR_LEN] = "";
    CHECK_RC(rumor_partition_parse(&p, spec, err));
    return p;
}

/* Mean over peers that own anything of the fraction of their samples in their largest class. */
static double mean_max_class_fraction(const assign_t *a, const uint8_t *labels, size_t n, int peers)
{
    double sum = 0;
    int used = 0;
    for (int p = 0; p < peers; p++) {
        size_t per[RUMOR_DATA_CLASSES] = {0}, max = 0;
        for (size_t i = 0; i < n; i++)
            if (a->owner[i] == p) per[labels[i]]++;
        for (int c = 0; c < RUMOR_DATA_CLASSES; c++)
            if (per[c] > max) max = per[c];
        if (a->count[p]) sum += (double)max / (double)a->count[p], used++;
    }
    return used ? sum / used : 0;
}

static uint64_t fnv1a(const int *v, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint64_t)(unsigned)v[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

// ---- parsing ----

static void test_parse(void)
{
    rumor_partition_t p = parse_ok("iid");
    CHECK(p.kind == RUMOR_PART_IID);
    p = parse_ok("dirichlet:0.5");
    CHECK(p.kind == RUMOR_PART_DIRICHLET && p.alpha == 0.5);
    p = parse_ok("dirichlet:1e-3");
    CHECK(p.kind == RUMOR_PART_DIRICHLET && p.alpha == 1e-3);
    p = parse_ok("dirichlet:100");
    CHECK(p.kind == RUMOR_PART_DIRICHLET && p.alpha == 100.0);
    p = parse_ok("shards:2");
    CHECK(p.kind == RUMOR_PART_SHARDS && p.shards == 2);
    p = parse_ok("shards:1000");
    CHECK(p.kind == RUMOR_PART_SHARDS && p.shards == 1000);
    p = parse_ok("shards:007");
    CHECK(p.kind == RUMOR_PART_SHARDS && p.shards == 7);

    static const struct {
        const char *spec, *reason;
    } bad[] = {
        {"", "empty partition (expected iid, dirichlet:ALPHA, shards:K or docs)"},
        {"foo", "unknown partition 'foo' (expected iid, dirichlet:ALPHA, shards:K or docs)"},
        {"IID", "unknown partition 'IID'"},
        {"iid ", "unknown partition 'iid '"},
        {"dirichlet", "unknown partition 'dirichlet'"},
        {"dirichlet:", "bad partition 'dirichlet:': ALPHA must be a finite number > 0"},
        {"dirichlet:-1", "bad partition 'dirichlet:-1': ALPHA must be"},
        {"dirichlet:0", "bad partition 'dirichlet:0': ALPHA must be"},
        {"dirichlet:nan", "bad partition 'dirichlet:nan': ALPHA must be"},
        {"dirichlet:inf", "bad partition 'dirichlet:inf': ALPHA must be"},
        {"dirichlet:1e999", "bad partition 'dirichlet:1e999': ALPHA must be"},
        {"dirichlet:0.5x", "bad partition 'dirichlet:0.5x': ALPHA must be"},
        {"dirichlet: 0.5", "bad partition 'dirichlet: 0.5': ALPHA must be"},
        {"shards", "unknown partition 'shards'"},
        {"shards:", "bad partition 'shards:': K must be an integer in 1..1000"},
        {"shards:0", "bad partition 'shards:0': K must be an integer in 1..1000"},
        {"shards:2x", "bad partition 'shards:2x': K must be"},
        {"shards:-2", "bad partition 'shards:-2': K must be"},
        {"shards:+2", "bad partition 'shards:+2': K must be"},
        {"shards: 2", "bad partition 'shards: 2': K must be"},
        {"shards:1001", "bad partition 'shards:1001': K must be"},
        {"shards:99999999999999999999", "K must be an integer in 1..1000"},
    };
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(bad); i++) {
        char err[RUMOR_ERR_LEN] = "";
        rumor_err_t rc = rumor_partition_parse(&p, bad[i].spec, err);
        CHECK_MSG(rc == RUMOR_EINVAL, "'%s' parsed", bad[i].spec);
        CHECK_MSG(strstr(err, bad[i].reason) != NULL, "'%s': '%s' lacks '%s'", bad[i].spec, err,
                  bad[i].reason);
    }
    char err[RUMOR_ERR_LEN] = "";
    CHECK(rumor_partition_parse(&p, NULL, err) == RUMOR_EINVAL);
    CHECK(rumor_partition_parse(&p, "foo", NULL) == RUMOR_EINVAL);
}

// ---- assignments ----

static void test_cover_and_determinism(void)
{
    /* two label layouts of 1000 balanced samples: sorted blocks and interleaved */
    static uint8_t blocks[1000], mixed[1000];
    const size_t n = 1000;
    for (size_t i = 0; i < n; i++) blocks[i] = (uint8_t)(i / 100), mixed[i] = (uint8_t)(i % 10);
    const uint8_t *layouts[2] = {blocks, mixed};
    static assign_t a, b, c;

    for (size_t s = 0; s < RUMOR_ARRAY_LEN(SPECS); s++) {
        rumor_partition_t part = parse_ok(SPECS[s]);
        for (size_t q = 0; q < RUMOR_ARRAY_LEN(PEERS); q++) {
            const int peers = PEERS[q];
            for (int l = 0; l < 2; l++) {
                const uint8_t *labels = layouts[l];
                assign(&a, &part, labels, n, 42, peers);
                CHECK_MSG(a.ok, "%s peers=%d layout=%d: not an exact cover", SPECS[s], peers, l);
                assign(&b, &part, labels, n, 42, peers);
                CHECK_MSG(same_owners(&a, &b, n), "%s peers=%d: same seed, different result",
                          SPECS[s], peers);
                assign(&c, &part, labels, n, 43, peers);
                CHECK(c.ok);
                if (peers == 1)
                    CHECK(a.count[0] == n && same_owners(&a, &c, n));
                else
                    CHECK_MSG(!same_owners(&a, &c, n), "%s peers=%d: seed ignored", SPECS[s], peers);
            }
        }
    }
}

static void test_iid(void)
{
    static uint8_t labels[997], other[997];
    for (size_t i = 0; i < 997; i++) labels[i] = (uint8_t)(i % 7), other[i] = (uint8_t)(i % 3);
    static assign_t a, b;
    rumor_partition_t part = parse_ok("iid");
    for (size_t q = 0; q < RUMOR_ARRAY_LEN(PEERS); q++) {
        const int peers = PEERS[q];
        assign(&a, &part, labels, 997, 7, peers);
        CHECK(a.ok);
        size_t lo = 997, hi = 0, sum = 0;
        for (int p = 0; p < peers; p++) {
            lo = a.count[p] < lo ? a.count[p] : lo;
            hi = a.count[p] > hi ? a.count[p] : hi;
            sum += a.count[p];
        }
        CHECK(sum == 997 && hi - lo <= 1 && lo == 997 / (size_t)peers);
        /* iid ignores labels, and accepts none */
        assign(&b, &part, other, 997, 7, peers);
        CHECK(same_owners(&a, &b, 997));
        assign(&b, &part, NULL, 997, 7, peers);
        CHECK(b.ok && same_owners(&a, &b, 997));
    }
    /* the shuffle really mixes: rank 0 of 10 is not a contiguous run */
    assign(&a, &part, labels, 997, 7, 10);
    int runs = 0;
    for (size_t i = 1; i < 997; i++) runs += a.owner[i] != a.owner[i - 1];
    CHECK(runs > 500);
}

static void test_shards(void)
{
    /* Classes of equal size B, shards of at most L samples, contiguous in label order. A run
     * of L samples touches at most ceil((L - 1) / B) + 1 classes, so a peer holding K shards
     * has at most min(10, K * that) classes, and its size is K * floor(n/S) .. K * ceil(n/S)
     * with S = peers * K shards. */
    static uint8_t labels[1000];
    const size_t n = 1000, B = 100;
    for (size_t i = 0; i < n; i++) labels[i] = (uint8_t)((i * 7) % 10); /* balanced, mixed */
    static assign_t a;
    for (int k = 1; k <= 3; k++) {
        char spec[32];
        snprintf(spec, sizeof spec, "shards:%d", k);
        rumor_partition_t part = parse_ok(spec);
        for (size_t q = 0; q < RUMOR_ARRAY_LEN(PEERS); q++) {
            const int peers = PEERS[q];
            const size_t S = (size_t)peers * (size_t)k, lmin = n / S, lmax = (n + S - 1) / S;
            size_t bound = (size_t)k * ((lmax - 1 + B - 1) / B + 1);
            if (bound > RUMOR_DATA_CLASSES) bound = RUMOR_DATA_CLASSES;
            assign(&a, &part, labels, n, 5, peers);
            CHECK(a.ok);
            size_t worst = 0;
            for (int p = 0; p < peers; p++) {
                int has[RUMOR_DATA_CLASSES] = {0};
                size_t classes = 0;
                for (size_t i = 0; i < n; i++)
                    if (a.owner[i] == p && !has[labels[i]]) has[labels[i]] = 1, classes++;
                CHECK_MSG(classes <= bound, "%s peers=%d: peer %d has %zu classes, bound %zu", spec,
                          peers, p, classes, bound);
                CHECK(a.count[p] >= (size_t)k * lmin && a.count[p] <= (size_t)k * lmax);
                worst = classes > worst ? classes : worst;
            }
            /* when shards tile classes exactly (B a multiple of L), a peer has at most K */
            if (n % S == 0 && B % (n / S) == 0) CHECK(worst <= (size_t)k);
        }
    }
    /* 10 peers, shards:2 on 1000 samples: 20 shards of 50 inside single classes, so every
     * peer sees exactly 1 or 2 classes, 100 samples, and some peer sees 2 */
    rumor_partition_t part = parse_ok("shards:2");
    assign(&a, &part, labels, n, 11, 10);
    int two = 0;
    for (int p = 0; p < 10; p++) {
        int has[RUMOR_DATA_CLASSES] = {0}, classes = 0;
        for (size_t i = 0; i < n; i++)
            if (a.owner[i] == p && !has[labels[i]]) has[labels[i]] = 1, classes++;
        CHECK(a.count[p] == 100 && classes >= 1 && classes <= 2);
        two += classes == 2;
    }
    CHECK(two > 0);
}

static void test_dirichlet(void)
{
    static uint8_t labels[MAX_N];
    const size_t n = MAX_N;
    for (size_t i = 0; i < n; i++) labels[i] = (uint8_t)((i * 3) % 10);
    static assign_t a;
    const int peers = 10;

    /* skew grows as alpha shrinks; iid stays near the class prior of 1/10 */
    double frac[4];
    const char *specs[4] = {"iid", "dirichlet:100", "dirichlet:0.5", "dirichlet:0.1"};
    for (int s = 0; s < 4; s++) {
        rumor_partition_t part = parse_ok(specs[s]);
        double sum = 0;
        for (uint64_t seed = 1; seed <= 3; seed++) {
            assign(&a, &part, labels, n, seed, peers);
            CHECK(a.ok);
            sum += mean_max_class_fraction(&a, labels, n, peers);
        }
        frac[s] = sum / 3;
    }
    CHECK_MSG(frac[0] < 0.15, "iid %.3f", frac[0]);
    CHECK_MSG(frac[1] < 0.15, "dirichlet:100 %.3f", frac[1]);
    CHECK_MSG(frac[2] > frac[0] + 0.15, "dirichlet:0.5 %.3f vs iid %.3f", frac[2], frac[0]);
    CHECK_MSG(frac[3] > frac[2] + 0.1, "dirichlet:0.1 %.3f vs 0.5 %.3f", frac[3], frac[2]);

    /* a huge alpha gives every peer nearly 1/peers of every class */
    rumor_partition_t part = parse_ok("dirichlet:1e6");
    assign(&a, &part, labels, n, 9, peers);
    CHECK(a.ok);
    int near = 1;
    for (int p = 0; p < peers; p++) {
        size_t per[RUMOR_DATA_CLASSES] = {0};
        for (size_t i = 0; i < n; i++)
            if (a.owner[i] == p) per[labels[i]]++;
        for (int c = 0; c < RUMOR_DATA_CLASSES; c++) near &= per[c] >= 97 && per[c] <= 103;
    }
    CHECK(near);

    /* an alpha so small that every Gamma draw underflows: each class goes whole to one peer */
    part = parse_ok("dirichlet:1e-300");
    assign(&a, &part, labels, n, 9, peers);
    CHECK(a.ok);
    for (int c = 0; c < RUMOR_DATA_CLASSES; c++) {
        int who = -1, whole = 1;
        for (size_t i = 0; i < n; i++)
            if (labels[i] == c) {
                if (who < 0) who = a.owner[i];
                whole &= a.owner[i] == who;
            }
        CHECK_MSG(whole, "class %d split", c);
    }

    /* a class's split does not depend on the other classes' labels: relabelling class 9 as
     * class 8 leaves classes 0..7 where they were (streams are per class) */
    static uint8_t merged[MAX_N];
    static assign_t b;
    for (size_t i = 0; i < n; i++) merged[i] = labels[i] == 9 ? 8 : labels[i];
    part = parse_ok("dirichlet:0.5");
    assign(&a, &part, labels, n, 4, peers);
    assign(&b, &part, merged, n, 4, peers);
    int kept = 1;
    for (size_t i = 0; i < n; i++)
        if (labels[i] < 8) kept &= a.owner[i] == b.owner[i];
    CHECK(kept);
}

static void test_known_answers(void)
{
    /* Peers built from different versions must agree on the assignment, so it is pinned:
     * a change here changes which samples every deployed peer trains on. iid and shards use
     * integer arithmetic only; dirichlet also goes through libm (log, cos, pow, sqrt), whose
     * last-bit differences could only matter at an exact rounding boundary. */
    static uint8_t labels[1000];
    for (size_t i = 0; i < 1000; i++) labels[i] = (uint8_t)((i * i + 3 * i) % 10);
    static assign_t a;
    static const uint64_t want[4] = {0x93ea2d66a60cca47ULL, 0x45ad04e141041d50ULL,
                                     0xe41fe37d34324c5dULL, 0xdb33ffba38d530eeULL};
    for (int s = 0; s < 4; s++) {
        rumor_partition_t part = parse_ok(SPECS[s]);
        assign(&a, &part, labels, 1000, 2024, 8);
        uint64_t h = fnv1a(a.owner, 1000);
        CHECK_MSG(h == want[s], "%s: hash 0x%016llx", SPECS[s], (unsigned long long)h);
    }
}

static void test_errors(void)
{
    uint8_t labels[20] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    rumor_partition_t iid = parse_ok("iid"), dir = parse_ok("dirichlet:0.5"), sh = parse_ok("shards:2");
    size_t *idx = (size_t *)&idx, count = 99;
    char err[RUMOR_ERR_LEN] = "";

    CHECK(rumor_partition_indices(&idx, &count, &iid, labels, RUMOR_DATA_CLASSES, 20, 1, -1, 3, err) == RUMOR_EINVAL);
    CHECK(strstr(err, "rank -1 out of range 0..2") != NULL);
    CHECK(idx == NULL && count == 0);
    CHECK(rumor_partition_indices(&idx, &count, &iid, labels, RUMOR_DATA_CLASSES, 20, 1, 3, 3, err) == RUMOR_EINVAL);
    CHECK(strstr(err, "rank 3 out of range 0..2") != NULL);
    CHECK(rumor_partition_indices(&idx, &count, &iid, labels, RUMOR_DATA_CLASSES, 20, 1, 0, 0, err) == RUMOR_EINVAL);
    CHECK(strstr(err, "peers must be at least 1") != NULL);

    /* shards need peers * K <= samples: 10 * 2 = 20 fits, 11 * 2 does not */
    CHECK(rumor_partition_indices(&idx, &count, &sh, labels, RUMOR_DATA_CLASSES, 20, 1, 10, 11, err) == RUMOR_EINVAL);
    CHECK(strstr(err, "needs 22 shards but there are only 20 samples") != NULL);
    CHECK_RC(rumor_partition_indices(&idx, &count, &sh, labels, RUMOR_DATA_CLASSES, 20, 1, 9, 10, err));
    CHECK(count == 2);
    free(idx);

    /* labels out of range are refused where labels are used */
    labels[7] = 10;
    CHECK(rumor_partition_indices(&idx, &count, &dir, labels, RUMOR_DATA_CLASSES, 20, 1, 0, 2, err) == RUMOR_EINVAL);
    CHECK(strstr(err, "label 10 at index 7") != NULL);
    CHECK(rumor_partition_indices(&idx, &count, &sh, labels, RUMOR_DATA_CLASSES, 20, 1, 0, 2, err) == RUMOR_EINVAL);
    CHECK_RC(rumor_partition_indices(&idx, &count, &iid, labels, RUMOR_DATA_CLASSES, 20, 1, 0, 2, err));
    CHECK(count == 10);
    free(idx);

    /* a hand-made spec is checked too */
    rumor_partition_t odd = {.kind = RUMOR_PART_DIRICHLET, .alpha = -2};
    CHECK(rumor_partition_indices(&idx, &count, &odd, labels, RUMOR_DATA_CLASSES, 20, 1, 0, 2, err) == RUMOR_EINVAL);
    odd = (rumor_partition_t){.kind = RUMOR_PART_SHARDS, .shards = 0};
    CHECK(rumor_partition_indices(&idx, &count, &odd, labels, RUMOR_DATA_CLASSES, 20, 1, 0, 2, NULL) == RUMOR_EINVAL);

    /* docs is for text (text.h): it round-trips as a spec, and labelled data refuses it */
    rumor_partition_t docs = parse_ok("docs");
    char name[16];
    rumor_partition_format(name, sizeof name, &docs);
    CHECK(docs.kind == RUMOR_PART_DOCS && strcmp(name, "docs") == 0);
    CHECK(rumor_partition_indices(&idx, &count, &docs, labels, RUMOR_DATA_CLASSES, 20, 1, 0, 2, err) == RUMOR_EINVAL);
    CHECK(strstr(err, "--partition docs: whole documents, for text") != NULL);

    /* no samples: nothing to own */
    idx = (size_t *)&idx;
    CHECK_RC(rumor_partition_indices(&idx, &count, &iid, NULL, RUMOR_DATA_CLASSES, 0, 1, 0, 2, err));
    CHECK(idx == NULL && count == 0);
    CHECK_RC(rumor_partition_indices(&idx, &count, &dir, NULL, RUMOR_DATA_CLASSES, 0, 1, 1, 2, err));
    CHECK(idx == NULL && count == 0);
}

int main(void)
{
    test_parse();
    test_cover_and_determinism();
    test_iid();
    test_shards();
    test_dirichlet();
    test_known_answers();
    test_errors();
    return check_done();
}
