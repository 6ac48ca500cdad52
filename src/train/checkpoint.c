/* checkpoint.c - model export and training checkpoints over safetensors. */
#include "checkpoint.h"

#include "config.h"
#include "safetensors.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <inttypes.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The parameters and each optimizer state (at most RUMOR_OPTIM_MAX_STATES). */
#define MAX_BUFS (1 + RUMOR_OPTIM_MAX_STATES)
#define MAX_OUT (RUMOR_MODEL_MAX_TENSORS * MAX_BUFS + RUMOR_CHECKPOINT_TENSORS)

/* Download backend buffer to host (a no-op view on host-memory backends). */
static float *host_view(rumor_backend_t *be, float *buf, size_t n, float **owned)
{
    *owned = NULL;
    if (be->ops->host_memory) return buf;
    *owned = malloc(n * sizeof(float));
    if (*owned) be->ops->download(be, *owned, buf, n * sizeof(float));
    return *owned;
}

rumor_err_t rumor_checkpoint_save(const char *path, rumor_model_t *m, rumor_optim_t *o,
                                  const rumor_checkpoint_info_t *info, char err[RUMOR_ERR_LEN])
{
    rumor_backend_t *be;
    rumor_err_t rc = RUMOR_OK;
    const size_t n = rumor_model_param_count(m);
    const int nt = rumor_model_tensor_count(m);
    const int ns = o ? rumor_optim_state_count(o) : 0;
    float *owned[MAX_BUFS] = {0};
    float *bufs[MAX_BUFS];
    /* A transformer has hundreds of tensors, each saved with its optimizer's state: on the heap. */
    char (*names)[RUMOR_ST_NAME_LEN] = malloc(MAX_OUT * sizeof *names);
    rumor_st_out_t *outs = malloc(MAX_OUT * sizeof *outs);
    rumor_st_meta_t meta[16 + RUMOR_CHECKPOINT_EXTRA];
    size_t n_out = 0, n_meta = 0;

    be = rumor_model_backend(m);
    if (!names || !outs) {
        rc = rumor_fail(err, RUMOR_ENOMEM, "%s: out of memory", path);
        goto out;
    }
    if ((rc = be->ops->sync(be, err)) != RUMOR_OK) goto out;
    bufs[0] = host_view(be, rumor_model_params(m), n, &owned[0]);
    for (int s = 0; s < ns; s++) bufs[1 + s] = host_view(be, rumor_optim_state(o, s), n, &owned[1 + s]);
    for (int s = 0; s < 1 + ns; s++)
        if (!bufs[s]) {
            rc = rumor_fail(err, RUMOR_ENOMEM, "%s: out of memory", path);
            goto out;
        }
    /* A download that failed leaves garbage, never a file of it. */
    if ((rc = be->ops->sync(be, err)) != RUMOR_OK) goto out;

    for (int s = 0; s < 1 + ns; s++)
        for (int i = 0; i < nt; i++) {
            const rumor_tensor_info_t *t = rumor_model_tensor(m, i);
            rumor_st_out_t *e = &outs[n_out];
            if (s == 0)
                snprintf(names[n_out], sizeof names[n_out], "%s", t->name);
            else
                snprintf(names[n_out], sizeof names[n_out], "optim.%s.%s",
                         rumor_optim_state_name(o, s - 1), t->name);
            e->name = names[n_out];
            e->ndim = t->ndim;
            for (int d = 0; d < t->ndim; d++) e->shape[d] = (uint64_t)t->shape[d];
            e->data = bufs[s] + t->offset;
            n_out++;
        }

    const rumor_model_input_t in = rumor_model_input(m);
#define META(k, ...)                                                                           \
    do {                                                                                       \
        snprintf(meta[n_meta].key, sizeof meta[n_meta].key, "%s", k);                          \
        snprintf(meta[n_meta].value, sizeof meta[n_meta].value, __VA_ARGS__);                  \
        n_meta++;                                                                              \
    } while (0)
    META("format", "rumor");
    META("rumor_version", "%s", RUMOR_VERSION);
    META("model", "%s", rumor_model_spec(m)->canonical);
    META("input", "%d,%d,%d", in.c, in.h, in.w);
    META("classes", "%d", in.classes);
    if (rumor_model_spec(m)->kind == RUMOR_MODEL_GPT) META("tokens", "%s", in.ids ? "ids" : "bytes");
    META("layout_id", "%016" PRIx64, rumor_model_layout_id(m));
    META("input_mean", "%.9g", (double)info->input_mean);
    META("input_std", "%.9g", (double)info->input_std);
    if (o) {
        META("optimizer", "%s", rumor_optim_kind_name(rumor_optim_config(o)->kind));
        META("step", "%ld", rumor_optim_steps(o));
        META("epoch", "%d", info->epoch);
        META("seed", "%" PRIu64, info->seed);
    }
#undef META
    for (int i = 0; i < info->n_extra && i < RUMOR_CHECKPOINT_EXTRA; i++) meta[n_meta++] = info->extra[i];
    for (size_t i = 0; i < info->n_tensors && n_out < MAX_OUT; i++) outs[n_out++] = info->tensors[i];
    rc = rumor_st_write(path, outs, n_out, meta, n_meta, err);
out:
    for (int s = 0; s < MAX_BUFS; s++) free(owned[s]);
    free(names);
    free(outs);
    return rc;
}

static rumor_err_t parse_long(const char *s, long lo, long hi, long *out)
{
    if (!s) return RUMOR_EFORMAT;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi) return RUMOR_EFORMAT;
    *out = (long)v;
    return RUMOR_OK;
}

static rumor_err_t parse_float(const char *s, float *out)
{
    if (!s) return RUMOR_EFORMAT;
    char *end;
    double v = strtod(s, &end);
    /* finite as the float it becomes: 1e39 is one double, and an infinity in float */
    if (end == s || *end || !isfinite(v) || !isfinite((float)v)) return RUMOR_EFORMAT;
    *out = (float)v;
    return RUMOR_OK;
}

const char *rumor_checkpoint_extra(const rumor_checkpoint_info_t *info, const char *key)
{
    for (int i = 0; i < info->n_extra; i++)
        if (strcmp(info->extra[i].key, key) == 0) return info->extra[i].value;
    return NULL;
}

void rumor_checkpoint_extra_add(rumor_checkpoint_info_t *info, const char *key, const char *fmt, ...)
{
    rumor_st_meta_t *e = NULL;
    for (int i = 0; i < info->n_extra && !e; i++)
        if (strcmp(info->extra[i].key, key) == 0) e = &info->extra[i]; /* set again: replaced */
    if (!e) {
        if (info->n_extra == RUMOR_CHECKPOINT_EXTRA) return;
        e = &info->extra[info->n_extra++];
    }
    snprintf(e->key, sizeof e->key, "%s", key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->value, sizeof e->value, fmt, ap);
    va_end(ap);
}

bool rumor_checkpoint_extra_long(const rumor_checkpoint_info_t *info, const char *key, long lo, long hi, long *out)
{
    const char *v = rumor_checkpoint_extra(info, key);
    if (!v || !((*v >= '0' && *v <= '9') || *v == '-')) return false;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (*end || errno || x < lo || x > hi) return false;
    *out = (long)x;
    return true;
}

/* "C,H,W" with each a plain decimal in 1..max, nothing else. */
static bool parse_shape3(const char *s, int *c, int *h, int *w)
{
    int *out[3] = {c, h, w};
    for (int i = 0; i < 3; i++) {
        if (!s || *s < '0' || *s > '9') return false;
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || v < 1 || v > 4096 || (i < 2 ? *end != ',' : *end != 0)) return false;
        *out[i] = (int)v;
        s = end + 1;
    }
    return true;
}

static rumor_err_t read_meta(const rumor_st_file_t *f, const char *path, rumor_model_spec_t *spec,
                             rumor_model_input_t *in, rumor_checkpoint_info_t *info,
                             char err[RUMOR_ERR_LEN])
{
    memset(info, 0, sizeof *info);
    const char *fmt = rumor_st_meta(f, "format");
    if (!fmt || strcmp(fmt, "rumor") != 0)
        return rumor_fail(err, RUMOR_EFORMAT, "%s: not a rumor model (no __metadata__ format=rumor)", path);
    const char *ms = rumor_st_meta(f, "model");
    char sub[RUMOR_ERR_LEN];
    if (!ms || rumor_model_spec_parse(spec, ms, sub) != RUMOR_OK)
        return rumor_fail(err, RUMOR_EFORMAT, "%s: bad model metadata: %s", path, ms ? sub : "missing");
    const char *is = rumor_st_meta(f, "input");
    long classes;
    if (!parse_shape3(is, &in->c, &in->h, &in->w) || in->c > 64 ||
        parse_long(rumor_st_meta(f, "classes"), 2, 65536, &classes) != RUMOR_OK)
        return rumor_fail(err, RUMOR_EFORMAT, "%s: bad input/classes metadata", path);
    in->classes = (int)classes;
    /* a gpt model's tokens: bytes or a tokenizer's ids (files without the entry: ids unless
     * the vocabulary is the bytes') */
    const char *tokens = rumor_st_meta(f, "tokens");
    if (tokens && strcmp(tokens, "ids") != 0 && strcmp(tokens, "bytes") != 0)
        return rumor_fail(err, RUMOR_EFORMAT, "%s: bad tokens metadata '%s' (ids or bytes)", path, tokens);
    in->ids = spec->kind == RUMOR_MODEL_GPT && (tokens ? strcmp(tokens, "ids") == 0 : classes != 256);
    info->tokens_stated = tokens != NULL;
    if (spec->kind == RUMOR_MODEL_GPT && !in->ids && classes != 256)
        return rumor_fail(err, RUMOR_EFORMAT, "%s: a model of bytes with %ld classes", path, classes);
    if (parse_float(rumor_st_meta(f, "input_mean"), &info->input_mean) != RUMOR_OK ||
        parse_float(rumor_st_meta(f, "input_std"), &info->input_std) != RUMOR_OK ||
        !(info->input_std >= FLT_MIN)) /* (a subnormal divides the inputs into infinities) */
        return rumor_fail(err, RUMOR_EFORMAT, "%s: bad input_mean/input_std metadata", path);
    const char *opt = rumor_st_meta(f, "optimizer");
    if (opt) {
        long step, epoch;
        if (rumor_optim_kind_parse(&info->optim_kind, opt, NULL) != RUMOR_OK ||
            parse_long(rumor_st_meta(f, "step"), 0, INT64_MAX / 2, &step) != RUMOR_OK ||
            parse_long(rumor_st_meta(f, "epoch"), 0, 1000000, &epoch) != RUMOR_OK)
            return rumor_fail(err, RUMOR_EFORMAT, "%s: bad optimizer/step/epoch metadata", path);
        const char *ss = rumor_st_meta(f, "seed");
        char *end;
        errno = 0;
        unsigned long long seed = ss && *ss >= '0' && *ss <= '9' ? strtoull(ss, &end, 10) : 0;
        if (!ss || *ss < '0' || *ss > '9' || *end || errno)
            return rumor_fail(err, RUMOR_EFORMAT, "%s: bad seed metadata", path);
        info->has_optim = true;
        info->step = step;
        info->epoch = (int)epoch;
        info->seed = seed;
    }
    for (size_t i = 0; i < rumor_st_meta_count(f) && info->n_extra < RUMOR_CHECKPOINT_EXTRA; i++) {
        const rumor_st_meta_t *e = rumor_st_meta_at(f, i);
        if (strncmp(e->key, "train.", 6) == 0) info->extra[info->n_extra++] = *e;
    }
    return RUMOR_OK;
}

rumor_err_t rumor_checkpoint_peek(const char *path, rumor_model_spec_t *spec,
                                  rumor_model_input_t *in, rumor_checkpoint_info_t *info,
                                  char err[RUMOR_ERR_LEN])
{
    rumor_st_file_t *f = rumor_st_open(path, err);
    if (!f) return RUMOR_EFORMAT;
    rumor_err_t rc = read_meta(f, path, spec, in, info, err);
    rumor_st_destroy(&f);
    return rc;
}

/* Check one tensor of the file against the model's description. */
static const rumor_st_tensor_t *match(const rumor_st_file_t *f, const char *path, const char *name,
                                      const rumor_tensor_info_t *t, char err[RUMOR_ERR_LEN])
{
    const rumor_st_tensor_t *st = rumor_st_find(f, name);
    if (!st) {
        rumor_fail(err, RUMOR_ELAYOUT, "%s: tensor '%s' missing", path, name);
        return NULL;
    }
    bool same = strcmp(st->dtype, "F32") == 0 && st->ndim == t->ndim;
    for (int d = 0; same && d < t->ndim; d++) same = st->shape[d] == (uint64_t)t->shape[d];
    if (!same) {
        rumor_fail(err, RUMOR_ELAYOUT, "%s: tensor '%s' is %s of %d dims, the model expects F32 of %d",
                   path, name, st->dtype, st->ndim, t->ndim);
        return NULL;
    }
    return st;
}

rumor_err_t rumor_checkpoint_load(const char *path, rumor_model_t *m, rumor_optim_t *o,
                                  rumor_checkpoint_info_t *info_out, char err[RUMOR_ERR_LEN])
{
    rumor_backend_t *be = rumor_model_backend(m);
    rumor_model_spec_t spec;
    rumor_model_input_t in;
    rumor_checkpoint_info_t info;
    rumor_err_t rc = RUMOR_OK;
    const size_t n = rumor_model_param_count(m);
    const int nt = rumor_model_tensor_count(m);
    const int ns = o ? rumor_optim_state_count(o) : 0;
    float *host[MAX_BUFS] = {0};

    rumor_st_file_t *f = rumor_st_open(path, err);
    if (!f) return RUMOR_EFORMAT;
    if ((rc = read_meta(f, path, &spec, &in, &info, err)) != RUMOR_OK) goto out;
    const rumor_model_input_t want = rumor_model_input(m);
    if (strcmp(spec.canonical, rumor_model_spec(m)->canonical) != 0 || in.c != want.c ||
        in.h != want.h || in.w != want.w || in.classes != want.classes || (info.tokens_stated && in.ids != want.ids)) {
        const bool gpt = spec.kind == RUMOR_MODEL_GPT;
        rc = rumor_fail(err, RUMOR_ELAYOUT, "%s: holds model %s on %dx%dx%d of %d %s, expected %s on %dx%dx%d of %d %s",
                        path, spec.canonical, in.c, in.h, in.w, in.classes, !gpt ? "classes" : in.ids ? "token ids" : "byte values",
                        rumor_model_spec(m)->canonical, want.c, want.h, want.w, want.classes,
                        !gpt ? "classes" : want.ids ? "token ids" : "byte values");
        goto out;
    }
    if (o && (!info.has_optim || info.optim_kind != rumor_optim_config(o)->kind)) {
        rc = rumor_fail(err, RUMOR_ELAYOUT, "%s: holds no %s optimizer state to resume from", path,
                        rumor_optim_kind_name(rumor_optim_config(o)->kind));
        goto out;
    }
    /* Stage everything on the host first so a bad tensor late in the file leaves the model
     * untouched. Padding between tensors stays zero. */
    for (int s = 0; s < 1 + ns; s++) {
        host[s] = calloc(n, sizeof(float));
        if (!host[s]) {
            rc = rumor_fail(err, RUMOR_ENOMEM, "%s: out of memory", path);
            goto out;
        }
        for (int i = 0; i < nt; i++) {
            const rumor_tensor_info_t *t = rumor_model_tensor(m, i);
            char name[RUMOR_ST_NAME_LEN];
            if (s == 0)
                snprintf(name, sizeof name, "%s", t->name);
            else
                snprintf(name, sizeof name, "optim.%s.%s", rumor_optim_state_name(o, s - 1), t->name);
            const rumor_st_tensor_t *st = match(f, path, name, t, err);
            if (!st) {
                rc = RUMOR_ELAYOUT;
                goto out;
            }
            memcpy(host[s] + t->offset, st->data, t->count * sizeof(float));
        }
    }
    be->ops->upload(be, rumor_model_params(m), host[0], n * sizeof(float));
    for (int s = 0; s < ns; s++)
        be->ops->upload(be, rumor_optim_state(o, s), host[1 + s], n * sizeof(float));
    if (o) rumor_optim_set_steps(o, info.step);
    if ((rc = be->ops->sync(be, err)) != RUMOR_OK) goto out;
    if (info_out) *info_out = info;
out:
    for (int s = 0; s < MAX_BUFS; s++) free(host[s]);
    rumor_st_destroy(&f);
    return rc;
}
