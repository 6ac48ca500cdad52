/* test_text.c - text for language models: a corpus's split, token files, their refusals, shards
 * that cover the training split exactly once, windows inside their documents, batches and the
 * validation windows. */
#include "check.h"
#include "config.h"
#include "backend.h"
#include "model.h"
#include "optim.h"
#include "rng.h"
#include "text.h"
#include "trainer.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/rumor-test-text-XXXXXX";

static void put(const char *name, const void *data, size_t n)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n) abort();
    fclose(f);
}

static void rm(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
}

static void clear(void)
{
    const char *names[] = {"a.txt", "b.txt", "c.txt", "notes.md", "train.bin", "val.bin"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) rm(names[i]);
    for (int i = 0; i < 40; i++) {
        char n[32];
        snprintf(n, sizeof n, "doc%02d.txt", i);
        rm(n);
    }
}

/* Refused, with a message that says msg. */
static void refused(int vocab, const char *msg)
{
    rumor_text_t t;
    char err[RUMOR_ERR_LEN] = "";
    const rumor_err_t rc = rumor_text_load(&t, dir, vocab, err);
    CHECK_MSG(rc != RUMOR_OK && strstr(err, msg), "want '%s', got %d '%s'", msg, (int)rc, err);
    CHECK(t.n_docs == 0 && !t.train && !t.bytes);
}

/* Three documents, one with bytes that are not UTF-8, one empty, and a file that is not one. */
static void test_corpus(void)
{
    uint8_t a[45], b[100];
    for (int i = 0; i < 45; i++) a[i] = (uint8_t)(i * 53 + 7); /* 0xff, 0x00 and the rest */
    for (int i = 0; i < 100; i++) b[i] = (uint8_t)('a' + i % 26);
    put("b.txt", b, sizeof b);
    put("a.txt", a, sizeof a);
    put("c.txt", "", 0);
    put("notes.md", "not a document", 14);
    rumor_text_t t;
    char err[RUMOR_ERR_LEN];
    CHECK_RC(rumor_text_load(&t, dir, 0, err));
    CHECK(t.vocab == 256 && t.width == 1 && t.n_docs == 3);
    /* a (41 + 4), b (90 + 10), c (0 + 0), in the order of their names */
    CHECK(t.n_train == 131 && t.n_val == 14);
    CHECK(t.train_at[0] == 0 && t.train_at[1] == 41 && t.train_at[2] == 131 && t.train_at[3] == 131);
    CHECK(t.val_at[0] == 0 && t.val_at[1] == 4 && t.val_at[2] == 14 && t.val_at[3] == 14);
    bool same = true;
    for (int i = 0; i < 41; i++) same &= rumor_text_token(&t, false, (size_t)i) == a[i];
    for (int i = 0; i < 4; i++) same &= rumor_text_token(&t, true, (size_t)i) == a[41 + i];
    for (int i = 0; i < 90; i++) same &= rumor_text_token(&t, false, 41 + (size_t)i) == b[i];
    for (int i = 0; i < 10; i++) same &= rumor_text_token(&t, true, 4 + (size_t)i) == b[90 + i];
    CHECK_MSG(same, "the splits hold the documents' bytes, training part first");
    CHECK(rumor_text_is_text(dir));
    rumor_text_fini(&t);
    refused(300, "a corpus of .txt documents has 256 tokens");
    clear();
}

static void test_refusals(void)
{
    CHECK(!rumor_text_is_text(dir));
    refused(0, "no .txt documents and no train.bin");
    put("c.txt", "", 0);
    refused(0, "its documents hold no text");
    clear();
    uint16_t tok[8] = {1, 2, 3, 4, 5, 6, 7, 50310};
    put("train.bin", tok, 7 * 2);
    refused(0, "val.bin: No such file");
    put("val.bin", tok, 3);
    refused(0, "3 bytes, not a whole number of uint16 tokens");
    put("val.bin", tok, 0);
    refused(0, "val.bin: empty");
    put("val.bin", tok, sizeof tok);
    refused(0, "token 50310 at 7 is not below --vocab 50304");
    refused(6, "token 6 at 5 is not below --vocab 6");
    refused(70000, "--vocab 70000: expected 2..65536");
    put("val.bin", tok, 7 * 2);
    put("a.txt", "x", 1);
    refused(0, "both .txt documents and train.bin");
    rm("a.txt");
    rumor_text_t t;
    char err[RUMOR_ERR_LEN];
    CHECK_RC(rumor_text_load(&t, dir, 0, err));
    CHECK(t.vocab == 50304 && t.width == 2 && t.n_docs == 1 && t.n_train == 7 && t.n_val == 7);
    CHECK(rumor_text_token(&t, false, 6) == 7 && rumor_text_token(&t, true, 0) == 1);
    rumor_text_fini(&t);
    clear();
}

/* Token files: every value, little-endian, as written. */
static void test_tokens(void)
{
    enum { N = 5000 };
    static uint16_t tr[N], va[N / 5];
    for (int i = 0; i < N; i++) tr[i] = (uint16_t)(i * 7919u % 50304u);
    for (int i = 0; i < N / 5; i++) va[i] = (uint16_t)(50303 - i);
    put("train.bin", tr, sizeof tr);
    put("val.bin", va, sizeof va);
    rumor_text_t t;
    char err[RUMOR_ERR_LEN];
    CHECK_RC(rumor_text_load(&t, dir, 0, err));
    bool same = t.n_train == N && t.n_val == N / 5;
    for (int i = 0; same && i < N; i++) same = rumor_text_token(&t, false, (size_t)i) == tr[i];
    for (int i = 0; same && i < N / 5; i++) same = rumor_text_token(&t, true, (size_t)i) == va[i];
    CHECK_MSG(same, "token files read back as written");
    /* Rewritten during the run (in place, as an editor or a download would): train.bin cut to one
     * token, val.bin filled with tokens past the vocabulary. What the run reads is what it
     * checked (a mapping read those: out of bounds in the embedding, or SIGBUS past the end). */
    static uint16_t bad[N / 5];
    for (int i = 0; i < N / 5; i++) bad[i] = 0xffff;
    put("train.bin", tr, 2);
    put("val.bin", bad, sizeof bad);
    same = true;
    for (int i = 0; same && i < N; i++) same = rumor_text_token(&t, false, (size_t)i) == tr[i];
    for (int i = 0; same && i < N / 5; i++) same = rumor_text_token(&t, true, (size_t)i) == va[i];
    CHECK_MSG(same, "token files changed after loading: the run still reads what it checked");
    /* iid: equal contiguous slices; docs: one document, so one peer */
    rumor_partition_t iid = {.kind = RUMOR_PART_IID}, docs = {.kind = RUMOR_PART_DOCS};
    rumor_text_shard_t s;
    CHECK_RC(rumor_text_shard(&s, &t, &iid, 2, 3, 64, err));
    CHECK(s.n_seg == 1 && s.seg[0].a == 3333 && s.seg[0].b == 5000 && s.windows == 1667 - 64);
    rumor_text_shard_fini(&s);
    /* the slices of 7 peers follow one another and together are the whole of train.bin */
    size_t next = 0;
    for (int r = 0; r < 7; r++) {
        CHECK_RC(rumor_text_shard(&s, &t, &iid, r, 7, 64, err));
        CHECK_MSG(s.n_seg == 1 && s.seg[0].a == next && s.seg[0].b > s.seg[0].a, "peer %d of 7: [%zu, %zu) after %zu", r,
                  s.seg[0].a, s.seg[0].b, next);
        next = s.seg[0].b;
        rumor_text_shard_fini(&s);
    }
    CHECK_MSG(next == N, "7 slices end at %zu of %d tokens", next, N);
    CHECK(rumor_text_shard(&s, &t, &docs, 0, 2, 64, err) == RUMOR_EINVAL && strstr(err, "token files are one"));
    CHECK_RC(rumor_text_shard(&s, &t, &docs, 0, 1, 64, err));
    CHECK(s.windows == N - 64);
    rumor_text_shard_fini(&s);
    rumor_text_fini(&t);
    clear();
}

/* Shards of 37 documents of random lengths: for iid and docs and several peer counts, each
 * training token belongs to exactly one shard; under docs a document is never split and the
 * loads differ by at most the longest document; windows lie inside their segments. */
static void test_shards(void)
{
    rumor_rng_t rng;
    rumor_rng_init(&rng, 5);
    size_t longest = 0;
    for (int i = 0; i < 37; i++) {
        const size_t n = 200 + (size_t)rumor_rng_below(&rng, 3000); /* every document has windows */
        uint8_t *b = malloc(n + 1);
        for (size_t j = 0; j < n; j++) b[j] = (uint8_t)rumor_rng_below(&rng, 256);
        char name[32];
        snprintf(name, sizeof name, "doc%02d.txt", i);
        put(name, b, n);
        free(b);
        if (n - n / 10 > longest) longest = n - n / 10;
    }
    rumor_text_t t;
    char err[RUMOR_ERR_LEN];
    CHECK_RC(rumor_text_load(&t, dir, 0, err));
    CHECK(t.n_docs == 37);
    uint8_t *owned = malloc(t.n_train);
    const int T = 16;
    const rumor_partition_t parts[2] = {{.kind = RUMOR_PART_IID}, {.kind = RUMOR_PART_DOCS}};
    const int peers_list[] = {1, 2, 5, 37};
    for (int pk = 0; pk < 2; pk++)
        for (size_t pi = 0; pi < sizeof peers_list / sizeof *peers_list; pi++) {
            const int peers = peers_list[pi];
            memset(owned, 0, t.n_train);
            size_t lo = SIZE_MAX, hi = 0;
            bool inside = true, whole = true, ok = true;
            for (int r = 0; r < peers; r++) {
                rumor_text_shard_t s;
                const rumor_err_t rc = rumor_text_shard(&s, &t, &parts[pk], r, peers, T, err);
                if (rc != RUMOR_OK) {
                    ok = false;
                    fprintf(stderr, "shard %d of %d: %s\n", r, peers, err);
                    continue;
                }
                for (size_t k = 0; k < s.n_seg; k++) {
                    for (size_t q = s.seg[k].a; q < s.seg[k].b; q++) owned[q]++;
                    if (pk == 1) { /* a whole document */
                        bool found = false;
                        for (size_t d = 0; d < t.n_docs; d++)
                            found |= t.train_at[d] == s.seg[k].a && t.train_at[d + 1] == s.seg[k].b;
                        whole &= found;
                    }
                }
                if (s.tokens < lo) lo = s.tokens;
                if (s.tokens > hi) hi = s.tokens;
                for (size_t i = 0; i < s.windows; i += 1 + i / 50) {
                    const size_t at = rumor_text_window(&s, i);
                    bool in = false;
                    for (size_t k = 0; k < s.n_seg; k++) in |= at >= s.seg[k].a && at + T + 1 <= s.seg[k].b;
                    inside &= in && (i == 0 || at > rumor_text_window(&s, i - 1));
                }
                CHECK(rumor_text_window(&s, s.windows - 1) + T + 1 == s.seg[s.n_seg - 1].b);
                rumor_text_shard_fini(&s);
            }
            bool once = true;
            for (size_t q = 0; q < t.n_train; q++) once &= owned[q] == 1;
            CHECK_MSG(ok && once, "partition %d over %d peers: every training token in exactly one shard", pk, peers);
            CHECK_MSG(inside, "partition %d over %d peers: windows inside their segments, in order", pk, peers);
            if (pk == 1) {
                CHECK_MSG(whole, "docs over %d peers: whole documents", peers);
                CHECK_MSG(hi - lo <= longest, "docs over %d peers: loads %zu..%zu (longest document %zu)", peers,
                          lo, hi, longest);
            }
        }
    free(owned);
    rumor_text_shard_t s;
    CHECK(rumor_text_shard(&s, &t, &parts[1], 0, 38, T, err) == RUMOR_EINVAL && strstr(err, "38 peers but 37 documents"));
    rumor_partition_t dir_part = {.kind = RUMOR_PART_DIRICHLET, .alpha = 0.5};
    CHECK(rumor_text_shard(&s, &t, &dir_part, 0, 2, T, err) == RUMOR_EINVAL && strstr(err, "text takes docs or iid"));
    CHECK(rumor_text_shard(&s, &t, NULL, 0, 1, 5000, err) == RUMOR_EINVAL && strstr(err, "no window of 5001 tokens"));

    /* A batch: the same for the same (seed, step), another for the next step; y is x shifted
     * by one, and both are the corpus at a window's start. */
    CHECK_RC(rumor_text_shard(&s, &t, &parts[1], 1, 5, T, err));
    enum { B = 6 };
    int32_t x[B * 16], y[B * 16], x2[B * 16], y2[B * 16];
    rumor_text_batch(&t, &s, 9, 100, B, x, y);
    rumor_text_batch(&t, &s, 9, 100, B, x2, y2);
    CHECK(memcmp(x, x2, sizeof x) == 0 && memcmp(y, y2, sizeof y) == 0);
    rumor_text_batch(&t, &s, 9, 101, B, x2, y2);
    CHECK(memcmp(x, x2, sizeof x) != 0);
    bool shifted = true, found_all = true;
    for (int b = 0; b < B; b++) {
        for (int j = 0; j + 1 < T; j++) shifted &= y[b * T + j] == x[b * T + j + 1];
        bool found = false; /* some window of the shard reads exactly x, y */
        for (size_t i = 0; i < s.windows && !found; i++) {
            const size_t at = rumor_text_window(&s, i);
            bool eq = true;
            for (int j = 0; j < T && eq; j++)
                eq = rumor_text_token(&t, false, at + (size_t)j) == x[b * T + j] &&
                     rumor_text_token(&t, false, at + (size_t)j + 1) == y[b * T + j];
            found = eq;
        }
        found_all &= found;
    }
    CHECK(shifted && found_all);
    rumor_text_shard_fini(&s);
    rumor_text_fini(&t);
    clear();
}

/* Validation: windows of T+1 starting T apart in each part; a part of k*T + 1 tokens is read
 * whole, every token after its first predicted once; a final partial window is dropped. */
static void test_val_windows(void)
{
    const int T = 4;
    uint8_t a[90], b[120];
    memset(a, 'a', sizeof a);
    memset(b, 'b', sizeof b);
    put("a.txt", a, sizeof a); /* val 9 = 2*4 + 1: windows at 0, 4 */
    put("b.txt", b, sizeof b); /* val 12: windows at 0, 4 (at 8, 8 + 5 > 12: dropped) */
    put("c.txt", a, 30);       /* val 3: none */
    rumor_text_t t;
    char err[RUMOR_ERR_LEN];
    CHECK_RC(rumor_text_load(&t, dir, 0, err));
    size_t starts[8];
    CHECK(rumor_text_val_windows(&t, T, NULL) == 4);
    CHECK(rumor_text_val_windows(&t, T, starts) == 4);
    CHECK(starts[0] == 0 && starts[1] == 4 && starts[2] == 9 && starts[3] == 13);
    CHECK(rumor_text_val_windows(&t, 12, NULL) == 0);
    rumor_text_fini(&t);
    clear();
}

/* The default corpus, where tools/setup fetched it: 42 documents, 5,057,198 bytes, which 8
 * peers share as whole documents. */
static void test_default_corpus(void)
{
    struct stat sb;
    if (stat(RUMOR_DEFAULT_TEXT "/.rumor-corpus", &sb) != 0) {
        check_skip("no corpus at " RUMOR_DEFAULT_TEXT " (tools/setup fetches it): its shape not checked");
        return;
    }
    rumor_text_t t;
    char err[RUMOR_ERR_LEN];
    CHECK_RC(rumor_text_load(&t, RUMOR_DEFAULT_TEXT, 0, err));
    CHECK_MSG(t.n_docs == 42 && t.n_train + t.n_val == 5057198, "%zu documents, %zu bytes", t.n_docs,
              t.n_train + t.n_val);
    const rumor_partition_t docs = {.kind = RUMOR_PART_DOCS};
    size_t sum = 0;
    for (int r = 0; r < 8; r++) {
        rumor_text_shard_t s;
        CHECK_RC(rumor_text_shard(&s, &t, &docs, r, 8, 64, err));
        sum += s.tokens;
        rumor_text_shard_fini(&s);
    }
    CHECK(sum == t.n_train && rumor_text_val_windows(&t, 64, NULL) > 7000);
    rumor_text_fini(&t);
}

/* A trainer over a shard of text and a gpt model with optimizer kind: after `steps` steps at
 * lr, the model's parameters (caller frees), and the mean loss of the first and last steps. */
static float *train_text(const rumor_text_t *t, const rumor_text_shard_t *s, rumor_opt_kind_t kind, float lr,
                         float clip, int steps, double *first, double *last)
{
    char err[RUMOR_ERR_LEN];
    rumor_backend_t *be = rumor_backend_new("cpu", 1, err);
    rumor_model_spec_t spec;
    CHECK_RC(rumor_model_spec_parse(&spec, "gpt:1,2,16,8", err));
    rumor_model_t *m = rumor_model_new(&spec, (rumor_model_input_t){1, 1, 8, 256, false}, be, 4, err);
    CHECK_MSG(m != NULL, "%s", err);
    CHECK_RC(rumor_model_init(m, 1));
    rumor_optim_config_t oc = rumor_optim_defaults();
    oc.kind = kind, oc.lr = lr, oc.momentum = 0.0f;
    rumor_optim_t *o = rumor_optim_new(&oc, be, rumor_model_param_count(m), err);
    const rumor_trainer_config_t tc = {.text = t, .shard = s, .batch = 4, .seed = 3, .lr = lr,
                                       .sched = {.kind = RUMOR_SCHED_CONSTANT}, .total_steps = steps,
                                       .clip_grad = clip};
    rumor_trainer_t *tr = rumor_trainer_new(&tc, m, o, err);
    CHECK_MSG(tr != NULL, "%s", err);
    float *out = NULL;
    if (tr && o) {
        rumor_trainer_stats_t st;
        CHECK_RC(rumor_trainer_steps(tr, 1, 0, &st, err));
        CHECK(st.samples == 4 * 8); /* predictions: T a window */
        *first = st.loss_sum / (double)st.samples;
        CHECK_RC(rumor_trainer_steps(tr, steps - 2, 1, &st, err));
        CHECK_RC(rumor_trainer_steps(tr, 1, steps - 1, &st, err));
        *last = st.loss_sum / (double)st.samples;
        const size_t P = rumor_model_param_count(m);
        out = malloc(P * sizeof *out);
        memcpy(out, rumor_model_params(m), P * sizeof *out);
    }
    rumor_trainer_destroy(&tr);
    rumor_optim_destroy(&o);
    rumor_model_destroy(&m);
    rumor_backend_destroy(&be);
    return out;
}

/* The trainer on text: a gpt model learns a repetitive corpus (the loss falls from about
 * log 256), two runs are the same bit for bit, and --clip-grad bounds a step: plain SGD at lr 1
 * moves the parameters by the clipped gradient, at most the clip in norm. */
static void test_trainer(void)
{
    char text[4000];
    for (size_t i = 0; i < sizeof text; i++) text[i] = "the quick brown fox. "[i % 21];
    put("a.txt", text, sizeof text);
    put("b.txt", text + 5, sizeof text - 5);
    rumor_text_t t;
    rumor_text_shard_t s;
    char err[RUMOR_ERR_LEN];
    CHECK_RC(rumor_text_load(&t, dir, 0, err));
    CHECK_RC(rumor_text_shard(&s, &t, NULL, 0, 1, 8, err));
    double f1, l1, f2, l2;
    float *a = train_text(&t, &s, RUMOR_OPT_ADAMW, 1e-2f, 1.0f, 150, &f1, &l1);
    float *b = train_text(&t, &s, RUMOR_OPT_ADAMW, 1e-2f, 1.0f, 150, &f2, &l2);
    CHECK_MSG(f1 > 5.0 && l1 < 1.0, "a repetitive text learnt: loss %.3f at the first step, %.3f at the last", f1, l1);
    CHECK(a && b && memcmp(a, b, 4096) == 0 && l1 == l2);
    free(a);
    free(b);
    /* clipping: one SGD step at lr 1 moves the parameters by the clipped gradient */
    double f, l;
    float *p0 = train_text(&t, &s, RUMOR_OPT_SGD, 1.0f, 0.01f, 2, &f, &l);
    float *p1 = train_text(&t, &s, RUMOR_OPT_SGD, 1.0f, 0.01f, 3, &f, &l);
    if (p0 && p1) {
        double d = 0;
        rumor_backend_t *be = rumor_backend_new("cpu", 1, err);
        rumor_model_spec_t spec;
        CHECK_RC(rumor_model_spec_parse(&spec, "gpt:1,2,16,8", err));
        rumor_model_t *m = rumor_model_new(&spec, (rumor_model_input_t){1, 1, 8, 256, false}, be, 1, err);
        for (size_t i = 0; i < rumor_model_param_count(m); i++) d += ((double)p1[i] - p0[i]) * ((double)p1[i] - p0[i]);
        CHECK_MSG(sqrt(d) <= 0.01 * (1 + 1e-4) && sqrt(d) > 0.009, "a clipped step moved %g (clip 0.01)", sqrt(d));
        rumor_model_destroy(&m);
        rumor_backend_destroy(&be);
    }
    free(p0);
    free(p1);
    rumor_text_shard_fini(&s);
    rumor_text_fini(&t);
    clear();
}

int main(void)
{
    if (!mkdtemp(dir)) return 1;
    test_corpus();
    test_refusals();
    test_tokens();
    test_shards();
    test_val_windows();
    test_default_corpus();
    test_trainer();
    rmdir(dir);
    return check_done();
}
