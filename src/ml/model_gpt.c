/* model_gpt.c - GPT-2 as nanoGPT's model.py writes it (with biases, without dropout), over the
 * backend's transformer ops: the layout under nanoGPT's tensor names, GPT-2's initialisation,
 * and one batch forward and backward. */
#include "model_impl.h"

#include "rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A block's tensors, from index 2 + 12 l (after wte and wpe); ln_f's two follow the last. */
enum { LN1W, LN1B, QKVW, QKVB, PROJW, PROJB, LN2W, LN2B, FCW, FCB, FCPW, FCPB, PER_BLOCK };

#define MAXL RUMOR_GPT_MAX_LAYERS

struct gpt {
    int L, NH, C, T, V;
    float *x0;                                    /* [N][C] the embeddings */
    /* each block's activations, kept for the backward */
    float *ln1[MAXL], *ln1_mean[MAXL], *ln1_rstd[MAXL];
    float *qkv[MAXL], *att[MAXL], *atty[MAXL], *res1[MAXL];
    float *ln2[MAXL], *ln2_mean[MAXL], *ln2_rstd[MAXL];
    float *fch[MAXL], *fch_gelu[MAXL], *res2[MAXL];
    float *lnf, *lnf_mean, *lnf_rstd;
    /* the backward's scratch, shared by the blocks */
    float *dres, *dln, *dqkv, *datt, *datty, *dfch;
};

static float *P(rumor_model_t *m, int i) { return m->params + m->t[i].offset; }
static float *G(rumor_model_t *m, int i) { return m->grads + m->t[i].offset; }

static rumor_err_t layout(rumor_model_t *m, char err[RUMOR_ERR_LEN])
{
    const struct gpt *g = m->gpt;
    const int C = g->C;
    static const char *const names[PER_BLOCK] = {
        "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
        "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
        "mlp.c_proj.weight", "mlp.c_proj.bias"};
    const int shapes[PER_BLOCK][2] = {{C, 0},     {C, 0}, {3 * C, C}, {3 * C, 0}, {C, C},     {C, 0},
                                      {C, 0},     {C, 0}, {4 * C, C}, {4 * C, 0}, {C, 4 * C}, {C, 0}};
    int bad = model_add_tensor(m, "transformer.wte.weight", 2, (int[]){g->V, C});
    bad |= model_add_tensor(m, "transformer.wpe.weight", 2, (int[]){g->T, C});
    for (int l = 0; l < g->L; l++)
        for (int k = 0; k < PER_BLOCK; k++) {
            char name[RUMOR_TENSOR_NAME_LEN];
            snprintf(name, sizeof name, "transformer.h.%d.%s", l, names[k]);
            bad |= model_add_tensor(m, name, shapes[k][1] ? 2 : 1, shapes[k]);
        }
    bad |= model_add_tensor(m, "transformer.ln_f.weight", 1, (int[]){C});
    bad |= model_add_tensor(m, "transformer.ln_f.bias", 1, (int[]){C});
    return bad ? rumor_fail(err, RUMOR_EINVAL, "%s: more tensors than a model holds", m->spec.canonical) : RUMOR_OK;
}

rumor_err_t gpt_build(rumor_model_t *m, char err[RUMOR_ERR_LEN])
{
    const rumor_model_spec_t *sp = &m->spec;
    const struct rumor_backend_ops *o = m->be->ops;
    if (!o->embed || !o->embed_bwd || !o->layernorm || !o->layernorm_bwd || !o->attention || !o->attention_bwd ||
        !o->gelu || !o->gelu_bwd)
        return rumor_fail(err, RUMOR_ENOTSUP, "%s: the %s backend has no transformer ops yet (try --device cpu)",
                          sp->canonical, o->name);
    const rumor_model_input_t in = m->in;
    if (in.c != 1 || in.h != 1 || in.w != sp->ctx || in.classes < 2 || in.classes > 65536)
        return rumor_fail(err, RUMOR_EINVAL,
                          "%s takes windows of %d tokens of a vocabulary of 2..65536, not inputs of %dx%dx%d in %d "
                          "classes", sp->canonical, sp->ctx, in.c, in.h, in.w, in.classes);
    struct gpt *g = m->gpt = calloc(1, sizeof *g);
    if (!g) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    g->L = sp->layers, g->NH = sp->heads, g->C = sp->dim, g->T = sp->ctx, g->V = in.classes;
    rumor_err_t rc = layout(m, err);
    if (rc != RUMOR_OK) return rc;
    const size_t N = (size_t)m->max_batch * g->T, C = (size_t)g->C, V = (size_t)g->V, f = sizeof(float);
    const size_t A = (size_t)m->max_batch * g->NH * g->T * g->T; /* attention probabilities */
    int failed = 0;
    m->params = model_alloc(m, m->n_params * f, &failed);
    m->grads = model_alloc(m, m->n_params * f, &failed);
    m->tok = model_alloc(m, N * sizeof *m->tok, &failed);
    m->y = model_alloc(m, N * sizeof *m->y, &failed);
    m->logits = model_alloc(m, N * V * f, &failed);
    m->dlogits = model_alloc(m, N * V * f, &failed);
    g->x0 = model_alloc(m, N * C * f, &failed);
    for (int l = 0; l < g->L && !failed; l++) {
        g->ln1[l] = model_alloc(m, N * C * f, &failed);
        g->ln1_mean[l] = model_alloc(m, N * f, &failed);
        g->ln1_rstd[l] = model_alloc(m, N * f, &failed);
        g->qkv[l] = model_alloc(m, N * 3 * C * f, &failed);
        g->att[l] = model_alloc(m, A * f, &failed);
        g->atty[l] = model_alloc(m, N * C * f, &failed);
        g->res1[l] = model_alloc(m, N * C * f, &failed);
        g->ln2[l] = model_alloc(m, N * C * f, &failed);
        g->ln2_mean[l] = model_alloc(m, N * f, &failed);
        g->ln2_rstd[l] = model_alloc(m, N * f, &failed);
        g->fch[l] = model_alloc(m, N * 4 * C * f, &failed);
        g->fch_gelu[l] = model_alloc(m, N * 4 * C * f, &failed);
        g->res2[l] = model_alloc(m, N * C * f, &failed);
    }
    g->lnf = model_alloc(m, N * C * f, &failed);
    g->lnf_mean = model_alloc(m, N * f, &failed);
    g->lnf_rstd = model_alloc(m, N * f, &failed);
    g->dres = model_alloc(m, N * C * f, &failed);
    g->dln = model_alloc(m, N * C * f, &failed);
    g->dqkv = model_alloc(m, N * 3 * C * f, &failed);
    g->datt = model_alloc(m, A * f, &failed);
    g->datty = model_alloc(m, N * C * f, &failed);
    g->dfch = model_alloc(m, N * 4 * C * f, &failed);
    if (failed)
        return rumor_fail(err, RUMOR_ENOMEM, "out of %s memory for model %s at batch %d", o->name, sp->canonical,
                          m->max_batch);
    return RUMOR_OK;
}

void gpt_free(rumor_model_t *m)
{
    rumor_backend_t *be = m->be;
    struct gpt *g = m->gpt;
    void *common[] = {m->params, m->grads, m->tok, m->y, m->logits, m->dlogits};
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(common); i++)
        if (common[i]) be->ops->free(be, common[i]);
    if (!g) return;
    for (int l = 0; l < MAXL; l++) {
        float *per[] = {g->ln1[l], g->ln1_mean[l], g->ln1_rstd[l], g->qkv[l],      g->att[l],      g->atty[l], g->res1[l],
                        g->ln2[l], g->ln2_mean[l], g->ln2_rstd[l], g->fch[l],      g->fch_gelu[l], g->res2[l]};
        for (size_t i = 0; i < RUMOR_ARRAY_LEN(per); i++)
            if (per[i]) be->ops->free(be, per[i]);
    }
    float *rest[] = {g->x0, g->lnf, g->lnf_mean, g->lnf_rstd, g->dres, g->dln, g->dqkv, g->datt, g->datty, g->dfch};
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(rest); i++)
        if (rest[i]) be->ops->free(be, rest[i]);
    free(g);
    m->gpt = NULL;
}

/* GPT-2's: every weight matrix and both embeddings N(0, 0.02), the two residual projections of
 * a block N(0, 0.02 / sqrt(2L)), biases 0, LayerNorm weights 1. A stream per tensor. */
void gpt_init(const rumor_model_t *m, float *host, uint64_t seed)
{
    const int L = m->gpt->L;
    for (int i = 0; i < m->n_tensors; i++) {
        const rumor_tensor_info_t *t = &m->t[i];
        float *w = host + t->offset;
        const int role = i < 2 ? -1 : i >= 2 + PER_BLOCK * L ? (i - 2 - PER_BLOCK * L == 0 ? LN1W : LN1B)
                                                            : (i - 2) % PER_BLOCK;
        if (role == LN1W || role == LN2W) {
            for (size_t j = 0; j < t->count; j++) w[j] = 1.0f;
            continue;
        }
        if (t->ndim == 1) continue; /* biases: zero */
        const double sd = role == PROJW || role == FCPW ? 0.02 / sqrt(2.0 * L) : 0.02;
        rumor_rng_t rng;
        rumor_rng_init2(&rng, seed, 0x1417, (uint64_t)i);
        for (size_t j = 0; j < t->count; j++) w[j] = (float)(rumor_rng_normal(&rng) * sd);
    }
}

/* Per sequence of T tokens. Matrix products cost 2 flops a multiply-add: per token 12 C^2 a
 * block and V C for the head; attention's scores and weighted sum 2 T C each a block (all T
 * positions are computed, the causal half then masked). The backward costs twice the forward. */
double gpt_flops(const rumor_model_t *m, bool train)
{
    const struct gpt *g = m->gpt;
    const double C = g->C, per_token = 2.0 * (12.0 * g->L * C * C + (double)g->V * C) + 4.0 * g->L * g->T * C;
    return per_token * g->T * (train ? 3.0 : 1.0);
}

void gpt_run(rumor_model_t *m, int b, bool grads, double *loss, long *correct)
{
    struct gpt *g = m->gpt;
    rumor_backend_t *be = m->be;
    const struct rumor_backend_ops *o = be->ops;
    const int L = g->L, C = g->C, T = g->T, V = g->V, NH = g->NH, N = b * T, lnf = 2 + PER_BLOCK * L;
    const size_t NC = (size_t)N * C;
    o->embed(be, g->x0, m->tok, P(m, 0), P(m, 1), b, T, C);
    const float *res = g->x0;
    for (int l = 0; l < L; l++) {
        const int k = 2 + PER_BLOCK * l;
        o->layernorm(be, g->ln1[l], g->ln1_mean[l], g->ln1_rstd[l], res, P(m, k + LN1W), P(m, k + LN1B), N, C);
        o->gemm(be, g->qkv[l], g->ln1[l], P(m, k + QKVW), false, true, N, 3 * C, C, 1.0f, 0.0f, C, C, 3 * C);
        o->bias_act(be, g->qkv[l], P(m, k + QKVB), N, 3 * C, false);
        o->attention(be, g->atty[l], g->att[l], g->qkv[l], b, T, C, NH);
        o->gemm(be, g->res1[l], g->atty[l], P(m, k + PROJW), false, true, N, C, C, 1.0f, 0.0f, C, C, C);
        o->bias_act(be, g->res1[l], P(m, k + PROJB), N, C, false);
        o->axpy(be, g->res1[l], res, 1.0f, NC);
        o->layernorm(be, g->ln2[l], g->ln2_mean[l], g->ln2_rstd[l], g->res1[l], P(m, k + LN2W), P(m, k + LN2B), N, C);
        o->gemm(be, g->fch[l], g->ln2[l], P(m, k + FCW), false, true, N, 4 * C, C, 1.0f, 0.0f, C, C, 4 * C);
        o->bias_act(be, g->fch[l], P(m, k + FCB), N, 4 * C, false);
        o->gelu(be, g->fch_gelu[l], g->fch[l], 4 * NC);
        o->gemm(be, g->res2[l], g->fch_gelu[l], P(m, k + FCPW), false, true, N, C, 4 * C, 1.0f, 0.0f, 4 * C, 4 * C, C);
        o->bias_act(be, g->res2[l], P(m, k + FCPB), N, C, false);
        o->axpy(be, g->res2[l], g->res1[l], 1.0f, NC);
        res = g->res2[l];
    }
    o->layernorm(be, g->lnf, g->lnf_mean, g->lnf_rstd, res, P(m, lnf), P(m, lnf + 1), N, C);
    o->gemm(be, m->logits, g->lnf, P(m, 0), false, true, N, V, C, 1.0f, 0.0f, C, C, V); /* the head is wte */
    o->softmax_xent(be, grads ? m->dlogits : NULL, loss, correct, m->logits, m->y, N, V);
    if (!grads) return;

    o->gemm(be, G(m, 0), m->dlogits, g->lnf, true, false, V, C, N, 1.0f, 1.0f, V, C, C);
    o->gemm(be, g->dln, m->dlogits, P(m, 0), false, false, N, C, V, 1.0f, 0.0f, V, C, C);
    o->zero(be, g->dres, NC * sizeof(float));
    o->layernorm_bwd(be, g->dres, G(m, lnf), G(m, lnf + 1), g->dln, res, P(m, lnf), g->lnf_mean, g->lnf_rstd, N, C);
    for (int l = L - 1; l >= 0; l--) {
        const int k = 2 + PER_BLOCK * l;
        const float *in = l ? g->res2[l - 1] : g->x0;
        /* res2 = res1 + gelu(ln2(res1) Wfc^T + bfc) Wfcp^T + bfcp; dres is d(res2) */
        o->bias_act_bwd(be, G(m, k + FCPB), g->dres, g->res2[l], N, C, false);
        o->gemm(be, G(m, k + FCPW), g->dres, g->fch_gelu[l], true, false, C, 4 * C, N, 1.0f, 1.0f, C, 4 * C, 4 * C);
        o->gemm(be, g->dfch, g->dres, P(m, k + FCPW), false, false, N, 4 * C, C, 1.0f, 0.0f, C, 4 * C, 4 * C);
        o->gelu_bwd(be, g->dfch, g->fch[l], g->dfch, 4 * NC);
        o->bias_act_bwd(be, G(m, k + FCB), g->dfch, g->fch[l], N, 4 * C, false);
        o->gemm(be, G(m, k + FCW), g->dfch, g->ln2[l], true, false, 4 * C, C, N, 1.0f, 1.0f, 4 * C, C, C);
        o->gemm(be, g->dln, g->dfch, P(m, k + FCW), false, false, N, C, 4 * C, 1.0f, 0.0f, 4 * C, C, C);
        o->layernorm_bwd(be, g->dres, G(m, k + LN2W), G(m, k + LN2B), g->dln, g->res1[l], P(m, k + LN2W),
                         g->ln2_mean[l], g->ln2_rstd[l], N, C);
        /* res1 = in + attention(ln1(in) Wqkv^T + bqkv) Wproj^T + bproj; dres is d(res1) */
        o->bias_act_bwd(be, G(m, k + PROJB), g->dres, g->res1[l], N, C, false);
        o->gemm(be, G(m, k + PROJW), g->dres, g->atty[l], true, false, C, C, N, 1.0f, 1.0f, C, C, C);
        o->gemm(be, g->datty, g->dres, P(m, k + PROJW), false, false, N, C, C, 1.0f, 0.0f, C, C, C);
        o->attention_bwd(be, g->dqkv, g->datt, g->datty, g->qkv[l], g->att[l], b, T, C, NH);
        o->bias_act_bwd(be, G(m, k + QKVB), g->dqkv, g->qkv[l], N, 3 * C, false);
        o->gemm(be, G(m, k + QKVW), g->dqkv, g->ln1[l], true, false, 3 * C, C, N, 1.0f, 1.0f, 3 * C, C, C);
        o->gemm(be, g->dln, g->dqkv, P(m, k + QKVW), false, false, N, C, 3 * C, 1.0f, 0.0f, 3 * C, C, C);
        o->layernorm_bwd(be, g->dres, G(m, k + LN1W), G(m, k + LN1B), g->dln, in, P(m, k + LN1W), g->ln1_mean[l],
                         g->ln1_rstd[l], N, C);
    }
    o->embed_bwd(be, G(m, 0), G(m, 1), g->dres, m->tok, b, T, C);
}
