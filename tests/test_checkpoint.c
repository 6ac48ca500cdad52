/* test_checkpoint.c - checkpoints refused for what is wrong in them, and a good one given back
 * bit for bit.
 *
 * A valid checkpoint is written with rumor's own API (rumor_checkpoint_save), then rewritten
 * (rumor_st_write) with one defect at a time: a metadata entry wrong or missing, a tensor
 * missing or of another shape, another optimizer's state. Each must be refused, by
 * rumor_checkpoint_load and, where the metadata is at fault, by rumor_checkpoint_peek too, with
 * the right code and one line that starts with the file's name and names the field or the
 * tensor; and a refused load leaves the model and the optimizer as they were (checkpoint.h).
 * The values at the edges of what is accepted load, so the refusals are of the defect, not of
 * any change to the file.
 *
 * `test_checkpoint --write-corpus DIR` writes small valid checkpoints in the input layout of
 * the fuzzer's checkpoint mode (tests/fuzz_files.c): the seeds tests/fuzz/files/ckpt-*.
 */
#include "check.h"
#include "checkpoint.h"
#include "fileio.h"

#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/rumor-test-checkpoint-XXXXXX";

/* A path in the test folder; each call returns its own string, freed by free_paths(). */
static char *made[128];
static int n_made;

static char *path(const char *name)
{
    if (n_made == 128) abort();
    char *p = malloc(strlen(dir) + strlen(name) + 2);
    if (!p) abort();
    sprintf(p, "%s/%s", dir, name);
    return made[n_made++] = p;
}

static unsigned char *slurp(const char *p, size_t *len)
{
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)(n > 0 ? n : 1));
    *len = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    return buf;
}

static bool same_file(const char *a, const char *b)
{
    size_t la = 0, lb = 0;
    unsigned char *x = slurp(a, &la), *y = slurp(b, &lb);
    const bool same = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

/* ---- a model and its optimizer ---- */

typedef struct {
    rumor_backend_t *be;
    rumor_model_t *m;
    rumor_optim_t *o;
} net_t;

static bool net_new(net_t *n, const char *spec_text, rumor_model_input_t in, rumor_opt_kind_t kind, bool tracking)
{
    char err[RUMOR_ERR_LEN];
    rumor_model_spec_t spec;
    memset(n, 0, sizeof *n);
    if (rumor_model_spec_parse(&spec, spec_text, err) != RUMOR_OK) return false;
    n->be = rumor_backend_new("cpu", 1, err);
    n->m = n->be ? rumor_model_new(&spec, in, n->be, 1, err) : NULL;
    rumor_optim_config_t oc = rumor_optim_defaults();
    oc.kind = kind;
    oc.tracking = tracking;
    n->o = n->m ? rumor_optim_new(&oc, n->be, rumor_model_param_count(n->m), err) : NULL;
    if (!n->o) fprintf(stderr, "%s: %s\n", spec_text, err);
    return n->o != NULL;
}

static void net_free(net_t *n)
{
    rumor_optim_destroy(&n->o);
    rumor_model_destroy(&n->m);
    rumor_backend_destroy(&n->be);
}

/* Every float of the parameters and of each state set, from seed, to a value no load writes:
 * then "unchanged" and "loaded" are told apart. */
static void scribble(net_t *n, float seed)
{
    const size_t np = rumor_model_param_count(n->m);
    for (size_t i = 0; i < np; i++) rumor_model_params(n->m)[i] = seed + (float)i;
    for (int s = 0; s < rumor_optim_state_count(n->o); s++)
        for (size_t i = 0; i < np; i++) rumor_optim_state(n->o, s)[i] = seed * (float)(s + 2) - (float)i;
    rumor_optim_set_steps(n->o, 7);
}

/* The parameters and every state, bit for bit (the padding between tensors included). */
static bool same_net(net_t *a, net_t *b)
{
    const size_t np = rumor_model_param_count(a->m);
    if (np != rumor_model_param_count(b->m) || rumor_optim_state_count(a->o) != rumor_optim_state_count(b->o) ||
        rumor_optim_steps(a->o) != rumor_optim_steps(b->o))
        return false;
    bool same = memcmp(rumor_model_params(a->m), rumor_model_params(b->m), np * sizeof(float)) == 0;
    for (int s = 0; s < rumor_optim_state_count(a->o); s++)
        same &= memcmp(rumor_optim_state(a->o, s), rumor_optim_state(b->o, s), np * sizeof(float)) == 0;
    return same;
}

/* A trained-looking model: seeded parameters, a few of the values whose bits a text format
 * would lose (-0, a subnormal, the largest float), and state that differs from them. */
static void fill(net_t *n, uint64_t seed)
{
    CHECK_RC(rumor_model_init(n->m, seed));
    float *p = rumor_model_params(n->m);
    const rumor_tensor_info_t *t0 = rumor_model_tensor(n->m, 0);
    p[t0->offset] = -0.0f;
    p[t0->offset + 1] = 1e-45f;
    p[t0->offset + 2] = -FLT_MAX;
    for (int s = 0; s < rumor_optim_state_count(n->o); s++)
        for (int i = 0; i < rumor_model_tensor_count(n->m); i++) {
            const rumor_tensor_info_t *t = rumor_model_tensor(n->m, i);
            for (size_t k = 0; k < t->count; k++)
                rumor_optim_state(n->o, s)[t->offset + k] = (float)(s + 1) / 3.0f + (float)(t->offset + k) * 1e-3f;
        }
}

/* ---- one defect at a time ---- */

typedef struct {
    const char *key;     /* a metadata entry set to value, or removed when value is NULL */
    const char *value;
    const char *drop;    /* a tensor left out */
    const char *reshape; /* a tensor written with its dimensions reversed */
} edit_t;

/* from, rewritten with the edit, to `to` (through rumor_st_write: a well-formed safetensors
 * file, so only what the edit changes can be at fault). */
static bool rewrite(const char *from, const char *to, edit_t e)
{
    char err[RUMOR_ERR_LEN];
    rumor_st_file_t *f = rumor_st_open(from, err);
    if (!f) return false;
    const size_t nt = rumor_st_count(f), nm = rumor_st_meta_count(f);
    rumor_st_out_t *outs = calloc(nt, sizeof *outs);
    float **data = calloc(nt, sizeof *data);
    rumor_st_meta_t *meta = calloc(nm + 1, sizeof *meta);
    size_t n_out = 0, n_meta = 0;
    bool ok = outs && data && meta;
    for (size_t i = 0; ok && i < nt; i++) {
        const rumor_st_tensor_t *t = rumor_st_at(f, i);
        if (e.drop && strcmp(t->name, e.drop) == 0) continue;
        const size_t bytes = (size_t)(t->end - t->begin);
        data[n_out] = malloc(bytes ? bytes : 1);
        if (!data[n_out]) {
            ok = false;
            break;
        }
        memcpy(data[n_out], t->data, bytes); /* the file's data is not aligned */
        rumor_st_out_t *o = &outs[n_out];
        o->name = t->name;
        o->ndim = t->ndim;
        const bool flip = e.reshape && strcmp(t->name, e.reshape) == 0;
        for (int d = 0; d < t->ndim; d++) o->shape[d] = t->shape[flip ? t->ndim - 1 - d : d];
        o->data = data[n_out++];
    }
    for (size_t i = 0; ok && i < nm; i++) {
        const rumor_st_meta_t *m = rumor_st_meta_at(f, i);
        if (!(e.key && strcmp(m->key, e.key) == 0)) meta[n_meta++] = *m;
    }
    if (ok && e.key && e.value) {
        snprintf(meta[n_meta].key, sizeof meta[n_meta].key, "%s", e.key);
        snprintf(meta[n_meta].value, sizeof meta[n_meta].value, "%s", e.value);
        n_meta++;
    }
    if (ok && rumor_st_write(to, outs, n_out, meta, n_meta, err) != RUMOR_OK) {
        fprintf(stderr, "rewrite %s: %s\n", to, err);
        ok = false;
    }
    for (size_t i = 0; data && i < n_out; i++) free(data[i]);
    free(data);
    free(outs);
    free(meta);
    rumor_st_destroy(&f);
    return ok;
}

/* The model of the good checkpoint, and the optimizer it was saved with. */
static const char *const SPEC = "mlp:8";
static const rumor_model_input_t IN = {.c = 1, .h = 4, .w = 4, .classes = 3};

typedef struct {
    const char *what;
    edit_t edit;
    bool with_optim;  /* loaded into a model and an optimizer, or into the model alone */
    rumor_err_t want; /* RUMOR_OK: accepted */
    const char *says; /* ... and the refusal names this */
} defect_t;

static int refusals;

static void try_defect(const char *good, const defect_t *d, int i)
{
    char name[32], err[RUMOR_ERR_LEN] = "";
    snprintf(name, sizeof name, "defect-%02d.safetensors", i);
    const char *p = path(name);
    CHECK_MSG(rewrite(good, p, d->edit), "%s: the file is rewritten", d->what);
    net_t n, before;
    if (!net_new(&n, SPEC, IN, RUMOR_OPT_SGD, false) || !net_new(&before, SPEC, IN, RUMOR_OPT_SGD, false)) {
        CHECK(!"model");
        return;
    }
    scribble(&n, 1000.0f);
    scribble(&before, 1000.0f);
    rumor_checkpoint_info_t info;
    const rumor_err_t rc = rumor_checkpoint_load(p, n.m, d->with_optim ? n.o : NULL, &info, err);
    CHECK_MSG(rc == d->want, "%s: load answers %d (%s), expected %d", d->what, rc, err, d->want);
    if (d->want != RUMOR_OK) {
        refusals++;
        fprintf(stderr, "refused (%s): %s\n", d->what, err);
        /* one line, the file's name first, then what is wrong with it */
        const size_t pl = strlen(p);
        CHECK_MSG(strncmp(err, p, pl) == 0 && err[pl] == ':' && !strchr(err, '\n'), "%s: '%s' names the file",
                  d->what, err);
        CHECK_MSG(strstr(err, d->says) != NULL, "%s: '%s' says '%s'", d->what, err, d->says);
        CHECK_MSG(same_net(&n, &before), "%s: a refused load leaves model and optimizer as they were", d->what);
        /* A defect of the metadata is found before any model is built: by peek, the same way. */
        if (d->want == RUMOR_EFORMAT) {
            char perr[RUMOR_ERR_LEN] = "";
            rumor_model_spec_t spec;
            rumor_model_input_t in;
            const rumor_err_t prc = rumor_checkpoint_peek(p, &spec, &in, &info, perr);
            CHECK_MSG(prc == d->want && strcmp(perr, err) == 0, "%s: peek answers %d (%s)", d->what, prc, perr);
        }
    } else if (rc == RUMOR_OK && d->with_optim && d->edit.key && d->edit.value) {
        /* accepted at the edge: the value is the one written */
        const char *v = d->edit.value;
        if (strcmp(d->edit.key, "step") == 0)
            CHECK_MSG(info.step == strtol(v, NULL, 10) && rumor_optim_steps(n.o) == info.step, "%s: step %ld", d->what,
                      info.step);
        if (strcmp(d->edit.key, "epoch") == 0) CHECK_MSG(info.epoch == atoi(v), "%s: epoch %d", d->what, info.epoch);
        if (strcmp(d->edit.key, "seed") == 0)
            CHECK_MSG(info.seed == strtoull(v, NULL, 10), "%s: seed %llu", d->what, (unsigned long long)info.seed);
    }
    net_free(&n);
    net_free(&before);
}

static void test_defects(void)
{
    char err[RUMOR_ERR_LEN] = "";
    net_t n;
    if (!net_new(&n, SPEC, IN, RUMOR_OPT_SGD, false)) {
        CHECK(!"model");
        return;
    }
    fill(&n, 3);
    rumor_optim_set_steps(n.o, 123);
    rumor_checkpoint_info_t info = {.input_mean = 0.2860402f, .input_std = 0.3530239f, .epoch = 4, .seed = 99};
    const char *good = path("good.safetensors");
    CHECK_RC(rumor_checkpoint_save(good, n.m, n.o, &info, err));
    net_free(&n);

    static const defect_t defects[] = {
        {"format missing", {.key = "format"}, true, RUMOR_EFORMAT, "not a rumor model"},
        {"format pytorch", {.key = "format", .value = "pytorch"}, true, RUMOR_EFORMAT, "not a rumor model"},
        {"model missing", {.key = "model"}, true, RUMOR_EFORMAT, "bad model metadata: missing"},
        {"model mlp:0", {.key = "model", .value = "mlp:0"}, true, RUMOR_EFORMAT, "bad model metadata"},
        {"model another", {.key = "model", .value = "mlp:9"}, true, RUMOR_ELAYOUT, "holds model mlp:9"},
        {"input of two", {.key = "input", .value = "1,4"}, true, RUMOR_EFORMAT, "bad input/classes metadata"},
        {"classes 1", {.key = "classes", .value = "1"}, true, RUMOR_EFORMAT, "bad input/classes metadata"},
        {"classes another", {.key = "classes", .value = "4"}, true, RUMOR_ELAYOUT, "of 4 classes, expected"},
        {"input_mean missing", {.key = "input_mean"}, true, RUMOR_EFORMAT, "bad input_mean/input_std metadata"},
        {"input_mean nan", {.key = "input_mean", .value = "nan"}, true, RUMOR_EFORMAT, "input_mean"},
        {"input_mean inf", {.key = "input_mean", .value = "-inf"}, true, RUMOR_EFORMAT, "input_mean"},
        {"input_mean 0.5x", {.key = "input_mean", .value = "0.5x"}, true, RUMOR_EFORMAT, "input_mean"},
        {"input_mean empty", {.key = "input_mean", .value = ""}, true, RUMOR_EFORMAT, "input_mean"},
        {"input_std 0", {.key = "input_std", .value = "0"}, true, RUMOR_EFORMAT, "input_std"},
        {"input_std -1", {.key = "input_std", .value = "-1"}, true, RUMOR_EFORMAT, "input_std"},
        /* finite as doubles, not as the floats they become (an infinity, a subnormal divisor) */
        {"input_mean 1e39", {.key = "input_mean", .value = "1e39"}, true, RUMOR_EFORMAT, "input_mean"},
        {"input_std 1e39", {.key = "input_std", .value = "1e39"}, true, RUMOR_EFORMAT, "input_std"},
        {"input_std 1e-45", {.key = "input_std", .value = "1e-45"}, true, RUMOR_EFORMAT, "input_std"},
        {"optimizer lion", {.key = "optimizer", .value = "lion"}, true, RUMOR_EFORMAT, "bad optimizer/step/epoch"},
        {"optimizer empty", {.key = "optimizer", .value = ""}, true, RUMOR_EFORMAT, "bad optimizer/step/epoch"},
        {"step missing", {.key = "step"}, true, RUMOR_EFORMAT, "bad optimizer/step/epoch"},
        {"step -1", {.key = "step", .value = "-1"}, true, RUMOR_EFORMAT, "bad optimizer/step/epoch"},
        {"step 1.5", {.key = "step", .value = "1.5"}, true, RUMOR_EFORMAT, "bad optimizer/step/epoch"},
        {"step empty", {.key = "step", .value = ""}, true, RUMOR_EFORMAT, "bad optimizer/step/epoch"},
        {"step past 2^62-1", {.key = "step", .value = "4611686018427387904"}, true, RUMOR_EFORMAT, "bad optimizer/step/epoch"},
        {"step past int64", {.key = "step", .value = "99999999999999999999"}, true, RUMOR_EFORMAT, "bad optimizer/step/epoch"},
        {"step 2^62-1", {.key = "step", .value = "4611686018427387903"}, true, RUMOR_OK, NULL},
        {"epoch missing", {.key = "epoch"}, true, RUMOR_EFORMAT, "bad optimizer/step/epoch"},
        {"epoch -1", {.key = "epoch", .value = "-1"}, true, RUMOR_EFORMAT, "bad optimizer/step/epoch"},
        {"epoch 1000001", {.key = "epoch", .value = "1000001"}, true, RUMOR_EFORMAT, "bad optimizer/step/epoch"},
        {"epoch x", {.key = "epoch", .value = "x"}, true, RUMOR_EFORMAT, "bad optimizer/step/epoch"},
        {"epoch 1000000", {.key = "epoch", .value = "1000000"}, true, RUMOR_OK, NULL},
        {"seed missing", {.key = "seed"}, true, RUMOR_EFORMAT, "bad seed metadata"},
        {"seed -1", {.key = "seed", .value = "-1"}, true, RUMOR_EFORMAT, "bad seed metadata"},
        {"seed +1", {.key = "seed", .value = "+1"}, true, RUMOR_EFORMAT, "bad seed metadata"},
        {"seed 1x", {.key = "seed", .value = "1x"}, true, RUMOR_EFORMAT, "bad seed metadata"},
        {"seed empty", {.key = "seed", .value = ""}, true, RUMOR_EFORMAT, "bad seed metadata"},
        {"seed 2^64", {.key = "seed", .value = "18446744073709551616"}, true, RUMOR_EFORMAT, "bad seed metadata"},
        {"seed 2^64-1", {.key = "seed", .value = "18446744073709551615"}, true, RUMOR_OK, NULL},
        /* an export (no optimizer entry) loads as a model, not as a run to resume */
        {"no optimizer state", {.key = "optimizer"}, true, RUMOR_ELAYOUT, "holds no sgd optimizer state"},
        {"no optimizer state, model only", {.key = "optimizer"}, false, RUMOR_OK, NULL},
        {"another optimizer", {.key = "optimizer", .value = "adamw"}, true, RUMOR_ELAYOUT, "holds no sgd optimizer state"},
        {"tensor missing", {.drop = "fc1.weight"}, true, RUMOR_ELAYOUT, "tensor 'fc1.weight' missing"},
        {"tensor missing, model only", {.drop = "fc2.bias"}, false, RUMOR_ELAYOUT, "tensor 'fc2.bias' missing"},
        {"state missing", {.drop = "optim.momentum.fc2.bias"}, true, RUMOR_ELAYOUT,
         "tensor 'optim.momentum.fc2.bias' missing"},
        {"state missing, model only", {.drop = "optim.momentum.fc2.bias"}, false, RUMOR_OK, NULL},
        {"tensor reshaped", {.reshape = "fc1.weight"}, true, RUMOR_ELAYOUT, "tensor 'fc1.weight'"},
    };
    int refused = 0;
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(defects); i++) {
        try_defect(good, &defects[i], (int)i);
        refused += defects[i].want != RUMOR_OK;
    }
    CHECK_MSG(refusals == refused && refused == 42, "%d refusals checked", refusals);
}

/* A good checkpoint given back bit for bit: the parameters (-0, a subnormal, -FLT_MAX among
 * them) and every state, the step count, epoch, seed (the largest), input statistics and the
 * run's settings; and saved again from what was loaded, the same bytes. */
static void test_round_trip(const char *spec, rumor_model_input_t in, rumor_opt_kind_t kind, bool tracking)
{
    char err[RUMOR_ERR_LEN] = "";
    net_t a, b;
    if (!net_new(&a, spec, in, kind, tracking) || !net_new(&b, spec, in, kind, tracking)) {
        CHECK(!"model");
        return;
    }
    fill(&a, 11);
    rumor_optim_set_steps(a.o, 4567);
    rumor_checkpoint_info_t info = {.input_mean = 0.1307f, .input_std = 0.3081f, .epoch = 9, .seed = UINT64_MAX};
    rumor_checkpoint_extra_add(&info, "train.batch", "%d", 64);
    rumor_checkpoint_extra_add(&info, "train.lr", "%s", "0.05");
    char name[64];
    snprintf(name, sizeof name, "rt-%s-%s.safetensors", spec, rumor_optim_kind_name(kind));
    const char *p = path(name);
    CHECK_RC(rumor_checkpoint_save(p, a.m, a.o, &info, err));
    scribble(&b, -5.0f);
    rumor_checkpoint_info_t got;
    CHECK_RC(rumor_checkpoint_load(p, b.m, b.o, &got, err));
    CHECK_MSG(same_net(&a, &b), "%s %s: parameters, %d states and step count bit for bit", spec,
              rumor_optim_kind_name(kind), rumor_optim_state_count(a.o));
    CHECK(got.has_optim && got.optim_kind == kind && got.step == 4567 && got.epoch == 9 && got.seed == UINT64_MAX);
    CHECK(memcmp(&got.input_mean, &info.input_mean, sizeof(float)) == 0 &&
          memcmp(&got.input_std, &info.input_std, sizeof(float)) == 0);
    CHECK(got.n_extra == 2 && rumor_checkpoint_extra(&got, "train.batch") &&
          strcmp(rumor_checkpoint_extra(&got, "train.batch"), "64") == 0 && rumor_checkpoint_extra(&got, "train.lr") &&
          strcmp(rumor_checkpoint_extra(&got, "train.lr"), "0.05") == 0);
    snprintf(name, sizeof name, "rt-%s-%s-again.safetensors", spec, rumor_optim_kind_name(kind));
    const char *again = path(name);
    CHECK_RC(rumor_checkpoint_save(again, b.m, b.o, &got, err));
    CHECK_MSG(same_file(p, again), "%s %s: saved again from what was loaded, the same bytes", spec,
              rumor_optim_kind_name(kind));
    net_free(&a);
    net_free(&b);
}

/* ---- the fuzzer's seeds ---- */

/* Small checkpoints of every kind of model and optimizer, each behind the 4 bytes of the
 * fuzzer's input layout: mode 4 (a checkpoint), its flags (4: tracking), two bytes unused. */
static int write_corpus(const char *out)
{
    static const struct {
        const char *name, *spec;
        rumor_model_input_t in;
        int kind; /* -1: an export, no optimizer */
        bool tracking;
    } seeds[] = {
        {"ckpt-logreg-export", "logreg", {1, 2, 2, 3, false}, -1, false},
        {"ckpt-mlp-sgd-tracking", "mlp:3", {1, 2, 3, 2, false}, RUMOR_OPT_SGD, true},
        {"ckpt-cnn-qgm", "cnn:1,2", {2, 16, 16, 2, false}, RUMOR_OPT_QGM, false},
        {"ckpt-gpt-adamw", "gpt:1,1,4,4", {1, 1, 4, 8, true}, RUMOR_OPT_ADAMW, false},
    };
    int rc = 0;
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(seeds); i++) {
        net_t n;
        char err[RUMOR_ERR_LEN] = "";
        if (!net_new(&n, seeds[i].spec, seeds[i].in, seeds[i].kind < 0 ? RUMOR_OPT_SGD : (rumor_opt_kind_t)seeds[i].kind,
                     seeds[i].tracking))
            return 1;
        fill(&n, 5);
        rumor_optim_set_steps(n.o, 21);
        rumor_checkpoint_info_t info = {.input_mean = 0.25f, .input_std = 0.5f, .epoch = 1, .seed = 8};
        if (seeds[i].kind >= 0) rumor_checkpoint_extra_add(&info, "train.seed", "8");
        const char *tmp = path("seed.safetensors");
        rc |= rumor_checkpoint_save(tmp, n.m, seeds[i].kind < 0 ? NULL : n.o, &info, err) != RUMOR_OK;
        net_free(&n);
        size_t len = 0;
        unsigned char *file = slurp(tmp, &len);
        char dst[512];
        snprintf(dst, sizeof dst, "%s/%s", out, seeds[i].name);
        FILE *f = fopen(dst, "wb");
        const unsigned char head[4] = {4, seeds[i].tracking ? 4 : 0, 0, 0};
        rc |= !file || !f || fwrite(head, 1, 4, f) != 4 || fwrite(file, 1, len, f) != len;
        rc |= f && fclose(f) != 0;
        free(file);
        unlink(tmp);
        if (rc) fprintf(stderr, "%s: %s\n", dst, err);
    }
    return rc;
}

/* A small file's text (slurp's bytes, NUL-terminated in a buffer of its own), or NULL. */
static char *text_of(const char *path)
{
    static char buf[8192];
    size_t n = 0;
    unsigned char *b = slurp(path, &n);
    if (!b) return NULL;
    if (n >= sizeof buf) n = sizeof buf - 1;
    memcpy(buf, b, n);
    buf[n] = 0;
    free(b);
    return buf;
}

/* A resumed run's metrics: the lines after its checkpoint leave metrics.jsonl (it logs those
 * rounds again) for metrics.undone.jsonl, after a line that says so, batch after batch; a line
 * cut short by the kill goes, lines without the key stay; both files only their owner's. */
static void test_trim_lines(void)
{
    char path[600], undone[600], err[RUMOR_ERR_LEN];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    CHECK(rumor_undone_path(undone, sizeof undone, path) && strcmp(undone + strlen(dir), "/metrics.undone.jsonl") == 0);
    char other[64];
    CHECK(rumor_undone_path(other, sizeof other, "run/log.txt") && strcmp(other, "run/log.txt.undone") == 0);
    CHECK(!rumor_undone_path(other, 8, "run/metrics.jsonl"));
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    for (int r = 0; r <= 9; r++) fprintf(f, "{\"round\":%d,\"epsilon\":%.1f}\n", r, 0.1 * r);
    fprintf(f, "{\"finished\":true}\n{\"round\":10,\"eps"); /* (killed mid-line) */
    fclose(f);
    CHECK_RC(rumor_trim_lines(path, "round", 6, err));
    char *s = text_of(path);
    CHECK(s && strstr(s, "{\"round\":6,") && !strstr(s, "{\"round\":7,") && strstr(s, "{\"finished\":true}\n") &&
          !strstr(s, "\"eps\n") && s[strlen(s) - 1] == '\n');
    s = text_of(undone);
    CHECK_MSG(s && strcmp(s, "{\"undone_after\":6,\"lines\":3}\n{\"round\":7,\"epsilon\":0.7}\n"
                             "{\"round\":8,\"epsilon\":0.8}\n{\"round\":9,\"epsilon\":0.9}\n") == 0,
              "undone: %s", s ? s : "(none)");
    /* A second crash, after rounds 7 and 8 again: appended. */
    f = fopen(path, "a");
    CHECK(f != NULL);
    if (!f) return;
    fprintf(f, "{\"round\":7,\"epsilon\":0.75}\n{\"round\":8,\"epsilon\":0.85}\n");
    fclose(f);
    CHECK_RC(rumor_trim_lines(path, "round", 6, err));
    s = text_of(undone);
    CHECK(s && strstr(s, "{\"round\":9,\"epsilon\":0.9}\n{\"undone_after\":6,\"lines\":2}\n{\"round\":7,\"epsilon\":0.75}\n"
                         "{\"round\":8,\"epsilon\":0.85}\n") != NULL);
    struct stat st;
    CHECK(stat(undone, &st) == 0 && (st.st_mode & 0777) == 0600 && stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
    /* Nothing after the checkpoint: neither file changes. */
    CHECK(stat(undone, &st) == 0);
    const off_t size = st.st_size;
    CHECK_RC(rumor_trim_lines(path, "round", 6, err));
    CHECK(stat(undone, &st) == 0 && st.st_size == size);
    unlink(undone);
    unlink(path);
}

int main(int argc, char **argv)
{
    if (!mkdtemp(dir)) return 1;
    int rc;
    if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0) {
        rc = write_corpus(argv[2]);
    } else {
        test_defects();
        test_trim_lines();
        test_round_trip(SPEC, IN, RUMOR_OPT_SGD, false);
        test_round_trip("logreg", IN, RUMOR_OPT_ADAMW, false);
        test_round_trip("cnn:2,3", (rumor_model_input_t){1, 16, 16, 4, false}, RUMOR_OPT_DADAMW, true);
        test_round_trip("gpt:1,2,8,4", (rumor_model_input_t){1, 1, 4, 11, true}, RUMOR_OPT_QGM, false);
        rc = check_done();
    }
    for (int i = 0; i < n_made; i++) unlink(made[i]);
    rmdir(dir);
    while (n_made > 0) free(made[--n_made]);
    return rc;
}
