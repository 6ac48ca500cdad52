/* model.c - logreg, MLP and CNN over one flat parameter buffer. */
#include "model_impl.h"
#include "layout.h"

#include "rng.h"

#include <errno.h>
#include <limits.h>
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- spec parsing ---- */

/* What a spec's i-th number is, and its bound. */
typedef struct {
    const char *name;
    long hi;
} field_t;

/* Up to max comma-separated integers, the i-th as fields[i] says, or as the last of the
 * n_fields when there are more (a model's widths: one field for all). With several fields
 * there is one number each: more is "more than max values", not too many layers. */
static int parse_widths(int *out, int max, const char *s, const char *what, const field_t *fields, int n_fields,
                        char *err)
{
    int n = 0;
    while (*s) {
        if (n == max) {
            if (n_fields > 1) rumor_fail(err, RUMOR_EINVAL, "%s: more than %d values", what, max);
            else rumor_fail(err, RUMOR_EINVAL, "%s: at most %d layers", what, max);
            return -1;
        }
        const field_t *f = &fields[n < n_fields ? n : n_fields - 1];
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || (*end && *end != ',') || v < 1 || v > f->hi) {
            rumor_fail(err, RUMOR_EINVAL, "%s: %s '%.*s' is not an integer in 1..%ld", what, f->name,
                       (int)strcspn(s, ","), s, f->hi);
            return -1;
        }
        out[n++] = (int)v;
        s = end;
        if (*s == ',') {
            s++;
            if (!*s) {
                rumor_fail(err, RUMOR_EINVAL, "%s: trailing comma", what);
                return -1;
            }
        }
    }
    return n;
}

static const field_t WIDTH = {"width", 65536};

rumor_err_t rumor_model_spec_parse(rumor_model_spec_t *out, const char *spec,
                                   char err[RUMOR_ERR_LEN])
{
    memset(out, 0, sizeof *out);
    if (strcmp(spec, "logreg") == 0) {
        out->kind = RUMOR_MODEL_MLP;
        out->n_hidden = 0;
        snprintf(out->canonical, sizeof out->canonical, "logreg");
        return RUMOR_OK;
    }
    if (strncmp(spec, "gpt:", 4) == 0) {
        static const field_t fields[] = {{"layers", RUMOR_GPT_MAX_LAYERS}, {"heads", 8192}, {"width", 8192},
                                         {"context", 8192}};
        int v[4];
        const int n = parse_widths(v, 4, spec + 4, "gpt", fields, 4, err);
        if (n >= 0 && n != 4)
            rumor_fail(err, RUMOR_EINVAL, "gpt: %d values, expected gpt:LAYERS,HEADS,WIDTH,CONTEXT (e.g. gpt:4,4,128,64)",
                       n);
        if (n != 4) return RUMOR_EINVAL;
        if (v[2] % v[1])
            return rumor_fail(err, RUMOR_EINVAL, "gpt: width %d is not a multiple of %d heads", v[2], v[1]);
        out->kind = RUMOR_MODEL_GPT;
        out->layers = v[0], out->heads = v[1], out->dim = v[2], out->ctx = v[3];
        snprintf(out->canonical, sizeof out->canonical, "gpt:%d,%d,%d,%d", v[0], v[1], v[2], v[3]);
        return RUMOR_OK;
    }
    if (strcmp(spec, "mlp") == 0) spec = "mlp:256,128";
    if (strcmp(spec, "cnn") == 0) spec = "cnn:16,32";
    if (strncmp(spec, "mlp:", 4) == 0) {
        int n = parse_widths(out->hidden, RUMOR_MODEL_MAX_LAYERS - 1, spec + 4, "mlp", &WIDTH, 1, err);
        if (n < 0) return RUMOR_EINVAL;
        if (n == 0) return rumor_fail(err, RUMOR_EINVAL, "mlp: no widths (e.g. mlp:256,128)");
        out->kind = RUMOR_MODEL_MLP;
        out->n_hidden = n;
    } else if (strncmp(spec, "cnn:", 4) == 0) {
        int n = parse_widths(out->hidden, 2, spec + 4, "cnn", &WIDTH, 1, err);
        if (n < 0) return RUMOR_EINVAL;
        if (n != 2) return rumor_fail(err, RUMOR_EINVAL, "cnn: expected two channel counts, cnn:C1,C2");
        if (out->hidden[0] > 1024 || out->hidden[1] > 1024)
            return rumor_fail(err, RUMOR_EINVAL, "cnn: channel counts must be at most 1024");
        out->kind = RUMOR_MODEL_CNN;
        out->n_hidden = 2;
    } else {
        return rumor_fail(err, RUMOR_EINVAL,
                          "unknown model '%s' (expected logreg, mlp:W1,W2,..., cnn[:C1,C2] or gpt:L,H,D,T)", spec);
    }
    size_t len = (size_t)snprintf(out->canonical, sizeof out->canonical, "%s:",
                                  out->kind == RUMOR_MODEL_CNN ? "cnn" : "mlp");
    for (int i = 0; i < out->n_hidden && len < sizeof out->canonical; i++)
        len += (size_t)snprintf(out->canonical + len, sizeof out->canonical - len, "%s%d",
                                i ? "," : "", out->hidden[i]);
    if (len >= sizeof out->canonical) return rumor_fail(err, RUMOR_EINVAL, "model spec too long");
    return RUMOR_OK;
}

/* ---- layout ---- */

int model_add_tensor(rumor_model_t *m, const char *name, int ndim, const int *shape)
{
    if (m->n_tensors == RUMOR_MODEL_MAX_TENSORS) return -1;
    rumor_tensor_info_t *t = &m->t[m->n_tensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->count = 1;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        t->count *= (size_t)shape[i];
    }
    t->offset = m->n_params;
    m->n_params += (t->count + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS;
    return 0;
}

static void add_linear(rumor_model_t *m, const char *prefix, int out, int in)
{
    char name[32];
    snprintf(name, sizeof name, "%s.weight", prefix);
    model_add_tensor(m, name, 2, (int[]){out, in});
    snprintf(name, sizeof name, "%s.bias", prefix);
    model_add_tensor(m, name, 1, (int[]){out});
}

/* The model's tensors as a layout (layout.h), into l (initialised). */
static void model_layout(const rumor_model_t *m, rumor_layout_t *l)
{
    char err[RUMOR_ERR_LEN];
    for (int i = 0; i < m->n_tensors; i++) {
        const rumor_tensor_info_t *t = &m->t[i];
        uint64_t shape[RUMOR_LAYOUT_MAX_DIMS];
        for (int d = 0; d < t->ndim; d++) shape[d] = (uint64_t)t->shape[d];
        const rumor_err_t rc = rumor_layout_add(l, t->name, t->ndim, shape, err);
        assert(rc == RUMOR_OK && l->t[i].offset == t->offset); /* (the same rule lays them out) */
        (void)rc;
    }
}

/* The layout id peers agree on (layout.h, PROTOCOL.md "Layouts"): the tensors' names and shapes
 * alone, so that a caller's own tensors of the same names and shapes agree with this model. */
static uint64_t layout_hash(const rumor_model_t *m)
{
    rumor_layout_t l;
    rumor_layout_init(&l);
    model_layout(m, &l);
    const uint64_t id = rumor_layout_id(&l);
    rumor_layout_fini(&l);
    return id;
}

size_t rumor_model_layout_text(const rumor_model_t *m, char *buf, size_t cap)
{
    rumor_layout_t l;
    rumor_layout_init(&l);
    model_layout(m, &l);
    const size_t n = rumor_layout_text(&l, buf, cap);
    rumor_layout_fini(&l);
    return n;
}

static const rumor_tensor_info_t *tensor(const rumor_model_t *m, int i) { return &m->t[i]; }
static float *param(rumor_model_t *m, int i) { return m->params + m->t[i].offset; }
static float *grad(rumor_model_t *m, int i) { return m->grads + m->t[i].offset; }

/* ---- construction ---- */

void *model_alloc(rumor_model_t *m, size_t len, int *failed)
{
    void *p = m->be->ops->alloc(m->be, len);
    if (!p) *failed = 1;
    return p;
}

rumor_model_t *rumor_model_new(const rumor_model_spec_t *spec, rumor_model_input_t in,
                               rumor_backend_t *be, int max_batch, char err[RUMOR_ERR_LEN])
{
    if (in.c < 1 || in.h < 1 || in.w < 1 || in.classes < 2 || max_batch < 1) {
        rumor_fail(err, RUMOR_EINVAL, "invalid model input %dx%dx%d, %d classes, batch %d", in.c,
                   in.h, in.w, in.classes, max_batch);
        return NULL;
    }
    rumor_model_t *m = calloc(1, sizeof *m);
    if (!m) {
        rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        return NULL;
    }
    m->spec = *spec;
    m->in = in;
    m->be = be;
    m->max_batch = max_batch;
    const size_t B = (size_t)max_batch, fsz = sizeof(float);
    const int in_feat = in.c * in.h * in.w;
    int failed = 0;
    if (spec->kind == RUMOR_MODEL_GPT) {
        const rumor_err_t rc = gpt_build(m, err);
        if (rc != RUMOR_OK) {
            rumor_model_destroy(&m);
            return NULL;
        }
        m->layout_id = layout_hash(m);
        return m;
    }

    if (spec->kind == RUMOR_MODEL_MLP) {
        m->n_layers = spec->n_hidden + 1;
        m->dims[0] = in_feat;
        for (int l = 1; l <= m->n_layers; l++) {
            m->dims[l] = l < m->n_layers ? spec->hidden[l - 1] : in.classes;
            char prefix[16];
            snprintf(prefix, sizeof prefix, "fc%d", l);
            add_linear(m, prefix, m->dims[l], m->dims[l - 1]);
        }
    } else {
        m->c1 = spec->hidden[0];
        m->c2 = spec->hidden[1];
        m->h1 = in.h - KSIZE + 1, m->w1 = in.w - KSIZE + 1;
        m->qh1 = m->h1 / 2, m->qw1 = m->w1 / 2;
        m->h2 = m->qh1 - KSIZE + 1, m->w2 = m->qw1 - KSIZE + 1;
        m->qh2 = m->h2 / 2, m->qw2 = m->w2 / 2;
        if (m->h1 < 2 || m->w1 < 2 || m->h1 % 2 || m->w1 % 2 || m->h2 < 2 || m->w2 < 2 ||
            m->h2 % 2 || m->w2 % 2) {
            rumor_fail(err, RUMOR_EINVAL,
                       "cnn needs an input whose side s gives even s-4 and (s-4)/2-4 (28 works), got %dx%d",
                       in.h, in.w);
            free(m);
            return NULL;
        }
        m->feat = m->c2 * m->qh2 * m->qw2;
        model_add_tensor(m, "conv1.weight", 4, (int[]){m->c1, in.c, KSIZE, KSIZE});
        model_add_tensor(m, "conv1.bias", 1, (int[]){m->c1});
        model_add_tensor(m, "conv2.weight", 4, (int[]){m->c2, m->c1, KSIZE, KSIZE});
        model_add_tensor(m, "conv2.bias", 1, (int[]){m->c2});
        add_linear(m, "fc1", in.classes, m->feat);
    }
    m->layout_id = layout_hash(m);

    m->params = model_alloc(m, m->n_params * fsz, &failed);
    m->grads = model_alloc(m, m->n_params * fsz, &failed);
    m->x = model_alloc(m, B * in_feat * fsz, &failed);
    m->y = model_alloc(m, B * sizeof *m->y, &failed);
    m->dlogits = model_alloc(m, B * in.classes * fsz, &failed);
    if (spec->kind == RUMOR_MODEL_MLP) {
        m->act[0] = m->x;
        for (int l = 1; l <= m->n_layers; l++) {
            m->act[l] = model_alloc(m, B * m->dims[l] * fsz, &failed);
            m->dact[l] = l == m->n_layers ? m->dlogits : model_alloc(m, B * m->dims[l] * fsz, &failed);
        }
        m->logits = m->act[m->n_layers];
    } else {
        const size_t n1 = (size_t)m->h1 * m->w1, n2 = (size_t)m->h2 * m->w2;
        const size_t q1 = (size_t)m->qh1 * m->qw1, q2 = (size_t)m->qh2 * m->qw2;
        if (in.c > 1) m->xt = model_alloc(m, B * in_feat * fsz, &failed);
        m->col1 = model_alloc(m, (size_t)in.c * KSIZE * KSIZE * B * n1 * fsz, &failed);
        m->z1 = model_alloc(m, (size_t)m->c1 * B * n1 * fsz, &failed);
        m->p1 = model_alloc(m, (size_t)m->c1 * B * q1 * fsz, &failed);
        m->dp1 = model_alloc(m, (size_t)m->c1 * B * q1 * fsz, &failed);
        m->col2 = model_alloc(m, (size_t)m->c1 * KSIZE * KSIZE * B * n2 * fsz, &failed);
        m->z2 = model_alloc(m, (size_t)m->c2 * B * n2 * fsz, &failed);
        m->p2 = model_alloc(m, (size_t)m->c2 * B * q2 * fsz, &failed);
        m->dp2 = model_alloc(m, (size_t)m->c2 * B * q2 * fsz, &failed);
        m->flat = model_alloc(m, B * m->feat * fsz, &failed);
        m->dflat = model_alloc(m, B * m->feat * fsz, &failed);
        m->logits = model_alloc(m, B * in.classes * fsz, &failed);
    }
    if (failed) {
        rumor_fail(err, RUMOR_ENOMEM, "out of %s memory for model %s at batch %d", be->ops->name,
                   spec->canonical, max_batch);
        rumor_model_destroy(&m);
        return NULL;
    }
    return m;
}

void rumor_model_destroy(rumor_model_t **self_p)
{
    if (!self_p || !*self_p) return;
    rumor_model_t *m = *self_p;
    rumor_backend_t *be = m->be;
    if (m->spec.kind == RUMOR_MODEL_GPT) {
        gpt_free(m);
        free(m);
        *self_p = NULL;
        return;
    }
    void *bufs[] = {m->params, m->grads, m->x,    m->y,    m->dlogits, m->xt,   m->col1,
                    m->z1,     m->p1,    m->dp1,  m->col2, m->z2,      m->p2,   m->dp2,
                    m->flat,   m->dflat};
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(bufs); i++)
        if (bufs[i]) be->ops->free(be, bufs[i]);
    if (m->spec.kind == RUMOR_MODEL_MLP) {
        for (int l = 1; l <= m->n_layers; l++) {
            if (m->act[l]) be->ops->free(be, m->act[l]);
            if (l < m->n_layers && m->dact[l]) be->ops->free(be, m->dact[l]);
        }
    } else if (m->logits) {
        be->ops->free(be, m->logits);
    }
    free(m);
    *self_p = NULL;
}

rumor_err_t rumor_model_init(rumor_model_t *m, uint64_t seed)
{
    float *host = calloc(m->n_params, sizeof *host);
    if (!host) return RUMOR_ENOMEM;
    rumor_rng_t rng;
    if (m->spec.kind == RUMOR_MODEL_GPT) gpt_init(m, host, seed);
    for (int i = 0; i < m->n_tensors && m->spec.kind != RUMOR_MODEL_GPT; i++) {
        const rumor_tensor_info_t *t = tensor(m, i);
        if (t->ndim == 1) continue; /* biases start at zero */
        /* A stream per tensor: adding a layer does not reshuffle the others' init. */
        rumor_rng_init2(&rng, seed, 0x1417, (uint64_t)i);
        size_t fan_out = (size_t)t->shape[0], fan_in = t->count / fan_out;
        float *w = host + t->offset;
        const bool output_layer = i == m->n_tensors - 2;
        if (output_layer) {
            double a = sqrt(6.0 / (double)(fan_in + fan_out));
            for (size_t j = 0; j < t->count; j++)
                w[j] = (float)((2.0 * rumor_rng_uniform(&rng) - 1.0) * a);
        } else {
            double sd = sqrt(2.0 / (double)fan_in);
            for (size_t j = 0; j < t->count; j++) w[j] = (float)(rumor_rng_normal(&rng) * sd);
        }
    }
    m->be->ops->upload(m->be, m->params, host, m->n_params * sizeof *host);
    free(host);
    return m->be->ops->sync(m->be, NULL);
}

/* ---- introspection ---- */

size_t rumor_model_param_count(const rumor_model_t *m) { return m->n_params; }
uint64_t rumor_model_layout_id(const rumor_model_t *m) { return m->layout_id; }
const rumor_model_spec_t *rumor_model_spec(const rumor_model_t *m) { return &m->spec; }

int rumor_model_matrices(const rumor_model_t *m, size_t *at)
{
    int n = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const rumor_tensor_info_t *t = &m->t[i];
        if (t->ndim < 2) continue;
        if (n && at[2 * n - 2] + at[2 * n - 1] == t->offset) at[2 * n - 1] += t->count;
        else at[2 * n] = t->offset, at[2 * n + 1] = t->count, n++;
    }
    return n;
}
rumor_model_input_t rumor_model_input(const rumor_model_t *m) { return m->in; }
int rumor_model_tensor_count(const rumor_model_t *m) { return m->n_tensors; }
const rumor_tensor_info_t *rumor_model_tensor(const rumor_model_t *m, int i)
{
    return i >= 0 && i < m->n_tensors ? &m->t[i] : NULL;
}
int rumor_model_max_batch(const rumor_model_t *m) { return m->max_batch; }
rumor_backend_t *rumor_model_backend(rumor_model_t *m) { return m->be; }

void rumor_model_zero_grads(rumor_model_t *m)
{
    m->be->ops->zero(m->be, m->grads, m->n_params * sizeof(float));
}

double rumor_model_flops(const rumor_model_t *m, bool train)
{
    /* A product of (r x k) by (k x c) costs 2rkc. Training adds the weight gradient of every
     * layer and the input gradient of every layer but the first. */
    double fwd = 0.0, bwd = 0.0;
    if (m->spec.kind == RUMOR_MODEL_GPT) return gpt_flops(m, train);
    if (m->spec.kind == RUMOR_MODEL_MLP) {
        for (int l = 1; l <= m->n_layers; l++) {
            double f = 2.0 * m->dims[l - 1] * m->dims[l];
            fwd += f;
            bwd += l > 1 ? 2.0 * f : f;
        }
    } else {
        double c1 = 2.0 * m->c1 * m->in.c * KSIZE * KSIZE * m->h1 * m->w1;
        double c2 = 2.0 * m->c2 * m->c1 * KSIZE * KSIZE * m->h2 * m->w2;
        double fc = 2.0 * m->feat * m->in.classes;
        fwd = c1 + c2 + fc;
        bwd = c1 + 2.0 * c2 + 2.0 * fc;
    }
    return train ? fwd + bwd : fwd;
}
float *rumor_model_params(rumor_model_t *m) { return m->params; }
float *rumor_model_grads(rumor_model_t *m) { return m->grads; }
float *rumor_model_input_buf(rumor_model_t *m) { return m->x; }
int32_t *rumor_model_token_buf(rumor_model_t *m) { return m->tok; }
int32_t *rumor_model_label_buf(rumor_model_t *m) { return m->y; }

void *rumor_model_sample_buf(rumor_model_t *m, size_t *xb, size_t *yn)
{
    if (m->spec.kind == RUMOR_MODEL_GPT) {
        *xb = (size_t)m->spec.ctx * sizeof *m->tok, *yn = (size_t)m->spec.ctx;
        return m->tok;
    }
    *xb = (size_t)m->in.c * m->in.h * m->in.w * sizeof *m->x, *yn = 1;
    return m->x;
}
const float *rumor_model_logits(const rumor_model_t *m) { return m->logits; }

/* ---- compute ---- */

static void mlp_run(rumor_model_t *m, int b, bool grads, double *loss, long *correct)
{
    rumor_backend_t *be = m->be;
    const struct rumor_backend_ops *op = be->ops;
    const int L = m->n_layers;
    for (int l = 1; l <= L; l++) {
        const int in = m->dims[l - 1], out = m->dims[l];
        op->gemm(be, m->act[l], m->act[l - 1], param(m, 2 * (l - 1)), false, true, b, out, in,
                 1.0f, 0.0f, in, in, out);
        op->bias_act(be, m->act[l], param(m, 2 * (l - 1) + 1), b, out, l < L);
    }
    op->softmax_xent(be, grads ? m->dlogits : NULL, loss, correct, m->logits, m->y, b,
                     m->in.classes);
    if (!grads) return;
    for (int l = L; l >= 1; l--) {
        const int in = m->dims[l - 1], out = m->dims[l];
        op->bias_act_bwd(be, grad(m, 2 * (l - 1) + 1), m->dact[l], m->act[l], b, out, l < L);
        op->gemm(be, grad(m, 2 * (l - 1)), m->dact[l], m->act[l - 1], true, false, out, in, b,
                 1.0f, 1.0f, out, in, in);
        if (l > 1)
            op->gemm(be, m->dact[l - 1], m->dact[l], param(m, 2 * (l - 1)), false, false, b, in,
                     out, 1.0f, 0.0f, out, in, in);
    }
}

static void cnn_run(rumor_model_t *m, int b, bool grads, double *loss, long *correct)
{
    rumor_backend_t *be = m->be;
    const struct rumor_backend_ops *op = be->ops;
    const int c0 = m->in.c, k1 = c0 * KSIZE * KSIZE, k2 = m->c1 * KSIZE * KSIZE;
    const int n1 = b * m->h1 * m->w1, n2 = b * m->h2 * m->w2, q2 = m->qh2 * m->qw2;
    const int classes = m->in.classes;
    const float *x = m->x;
    if (c0 > 1) {
        op->transpose_cb(be, m->xt, m->x, c0, b, m->in.h * m->in.w, false);
        x = m->xt;
    }
    /* tensors: 0 conv1.weight, 1 conv1.bias, 2 conv2.weight, 3 conv2.bias, 4 fc1.weight, 5 fc1.bias */
    op->im2col(be, m->col1, x, c0, b, m->in.h, m->in.w, KSIZE);
    op->gemm(be, m->z1, param(m, 0), m->col1, false, false, m->c1, n1, k1, 1.0f, 0.0f, k1, n1, n1);
    op->pool_bias_relu(be, m->p1, m->z1, param(m, 1), m->c1, b, m->h1, m->w1);
    op->im2col(be, m->col2, m->p1, m->c1, b, m->qh1, m->qw1, KSIZE);
    op->gemm(be, m->z2, param(m, 2), m->col2, false, false, m->c2, n2, k2, 1.0f, 0.0f, k2, n2, n2);
    op->pool_bias_relu(be, m->p2, m->z2, param(m, 3), m->c2, b, m->h2, m->w2);
    op->transpose_cb(be, m->flat, m->p2, m->c2, b, q2, true);
    op->gemm(be, m->logits, m->flat, param(m, 4), false, true, b, classes, m->feat, 1.0f, 0.0f,
             m->feat, m->feat, classes);
    op->bias_act(be, m->logits, param(m, 5), b, classes, false);
    op->softmax_xent(be, grads ? m->dlogits : NULL, loss, correct, m->logits, m->y, b, classes);
    if (!grads) return;

    op->bias_act_bwd(be, grad(m, 5), m->dlogits, m->logits, b, classes, false);
    op->gemm(be, grad(m, 4), m->dlogits, m->flat, true, false, classes, m->feat, b, 1.0f, 1.0f,
             classes, m->feat, m->feat);
    op->gemm(be, m->dflat, m->dlogits, param(m, 4), false, false, b, m->feat, classes, 1.0f, 0.0f,
             classes, m->feat, m->feat);
    op->transpose_cb(be, m->dp2, m->dflat, m->c2, b, q2, false);
    float *dz2 = m->z2, *dcol2 = m->col2, *dz1 = m->z1;
    op->pool_bias_relu_bwd(be, dz2, grad(m, 3), m->dp2, m->p2, m->c2, b, m->h2, m->w2);
    op->gemm(be, grad(m, 2), dz2, m->col2, false, true, m->c2, k2, n2, 1.0f, 1.0f, n2, n2, k2);
    op->gemm(be, dcol2, param(m, 2), dz2, true, false, k2, n2, m->c2, 1.0f, 0.0f, k2, n2, n2);
    op->col2im(be, m->dp1, dcol2, m->c1, b, m->qh1, m->qw1, KSIZE);
    op->pool_bias_relu_bwd(be, dz1, grad(m, 1), m->dp1, m->p1, m->c1, b, m->h1, m->w1);
    op->gemm(be, grad(m, 0), dz1, m->col1, false, true, m->c1, k1, n1, 1.0f, 1.0f, n1, n1, k1);
}

rumor_err_t rumor_model_queue(rumor_model_t *m, int b, bool grads, double *loss_sum, long *correct,
                              char err[RUMOR_ERR_LEN])
{
    if (b < 1 || b > m->max_batch)
        return rumor_fail(err, RUMOR_EINVAL, "batch %d outside 1..%d", b, m->max_batch);
    if (m->spec.kind == RUMOR_MODEL_MLP)
        mlp_run(m, b, grads, loss_sum, correct);
    else if (m->spec.kind == RUMOR_MODEL_CNN)
        cnn_run(m, b, grads, loss_sum, correct);
    else
        gpt_run(m, b, grads, loss_sum, correct);
    return RUMOR_OK;
}

rumor_err_t rumor_model_run(rumor_model_t *m, int b, bool grads, double *loss_sum, long *correct,
                            char err[RUMOR_ERR_LEN])
{
    /* Sums into locals first: the caller's change only when the batch succeeded. */
    double loss = 0.0;
    long right = 0;
    rumor_err_t rc = rumor_model_queue(m, b, grads, &loss, &right, err);
    if (rc != RUMOR_OK) return rc;
    rc = m->be->ops->sync(m->be, err);
    if (rc != RUMOR_OK) return rc;
    if (loss_sum) *loss_sum += loss;
    if (correct) *correct += right;
    return RUMOR_OK;
}


rumor_err_t rumor_model_eval_rows(rumor_model_t *m, int first, int b, double *loss_sum, long *correct,
                                  char err[RUMOR_ERR_LEN])
{
    if (m->spec.kind != RUMOR_MODEL_MLP)
        return rumor_fail(err, RUMOR_EINVAL, "an evaluation by rows needs an mlp or logreg");
    if (first < 0 || b < 1 || first > m->max_batch - b)
        return rumor_fail(err, RUMOR_EINVAL, "rows %d..%d outside 0..%d", first, first + b - 1, m->max_batch - 1);
    int32_t *y = m->y;
    m->act[0] = m->x + (size_t)first * (size_t)m->dims[0], m->y = y + first;
    const rumor_err_t rc = rumor_model_run(m, b, false, loss_sum, correct, err);
    m->act[0] = m->x, m->y = y;
    return rc;
}
