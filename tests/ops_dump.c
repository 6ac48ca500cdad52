/* ops_dump.c - the CPU backend's transformer ops on seeded random inputs, written to one
 * safetensors file (inputs, outputs and gradients under dout = a random R) for
 * test_ops_torch.py to recompute with PyTorch's autograd; with --gpt instead, a whole gpt
 * model's parameters (under nanoGPT's names), one batch of tokens and targets, its loss and
 * every parameter's gradient ("grad." + name). Tokens are written as floats (small integers,
 * exact).
 *
 * usage: ops_dump OUT.safetensors [--backend staged] [--gpt]
 */
#include "backend.h"
#include "backend_staged.h"
#include "model.h"
#include "rng.h"
#include "safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, T = 9, C = 24, NH = 3, V = 50, N = B * T };

static rumor_backend_t *be;
static rumor_rng_t rng;
static rumor_st_out_t out[32];
static size_t n_out;
static float *host[32];

/* A backend buffer of n floats: random (scale != 0) or zero. */
static float *buf(size_t n, double scale)
{
    float *h = calloc(n, sizeof *h), *d = be->ops->alloc(be, n * sizeof *d);
    if (!h || !d) abort();
    for (size_t i = 0; i < n && scale != 0; i++) h[i] = (float)(rumor_rng_normal(&rng) * scale);
    be->ops->upload(be, d, h, n * sizeof *h);
    free(h);
    return d;
}

/* Record backend buffer d (n floats, shape dims) under name. */
static void keep(const char *name, const float *d, int ndim, uint64_t d0, uint64_t d1, uint64_t d2)
{
    const uint64_t n = d0 * (ndim > 1 ? d1 : 1) * (ndim > 2 ? d2 : 1);
    float *h = malloc(n * sizeof *h);
    if (!h) abort();
    be->ops->download(be, h, d, n * sizeof *h);
    host[n_out] = h;
    out[n_out++] = (rumor_st_out_t){.name = name, .ndim = ndim, .shape = {d0, d1, d2}, .data = h};
}

/* gpt:2,2,32,16 over 70 tokens, 3 sequences: the parameters as initialised, with every 1-D
 * tensor moved off its start (biases 0, LayerNorm weights 1) so that its gradient counts. */
static int dump_gpt(const char *path)
{
    enum { GB = 3, GT = 16, GV = 70 };
    char err[RUMOR_ERR_LEN];
    rumor_model_spec_t spec;
    rumor_model_t *m = NULL;
    rumor_err_t rc = rumor_model_spec_parse(&spec, "gpt:2,2,32,16", err);
    if (rc == RUMOR_OK && !(m = rumor_model_new(&spec, (rumor_model_input_t){1, 1, GT, GV, true}, be, GB, err)))
        rc = rumor_last_error();
    if (rc == RUMOR_OK) rc = rumor_model_init(m, 21);
    if (rc != RUMOR_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    const size_t n = rumor_model_param_count(m);
    float *p = malloc(n * sizeof *p), *g = malloc(n * sizeof *g);
    int32_t tok[GB * GT], tgt[GB * GT];
    float tokf[GB * GT], tgtf[GB * GT];
    be->ops->download(be, p, rumor_model_params(m), n * sizeof *p);
    for (int i = 0; i < rumor_model_tensor_count(m); i++) {
        const rumor_tensor_info_t *t = rumor_model_tensor(m, i);
        if (t->ndim == 1)
            for (size_t j = 0; j < t->count; j++) p[t->offset + j] += (float)(0.1 * rumor_rng_normal(&rng));
    }
    be->ops->upload(be, rumor_model_params(m), p, n * sizeof *p);
    for (int i = 0; i < GB * GT; i++) {
        tok[i] = (int32_t)rumor_rng_below(&rng, GV), tgt[i] = (int32_t)rumor_rng_below(&rng, GV);
        tokf[i] = (float)tok[i], tgtf[i] = (float)tgt[i];
    }
    be->ops->upload(be, rumor_model_token_buf(m), tok, sizeof tok);
    be->ops->upload(be, rumor_model_label_buf(m), tgt, sizeof tgt);
    double loss = 0;
    rc = rumor_model_run(m, GB, true, &loss, NULL, err);
    be->ops->download(be, g, rumor_model_grads(m), n * sizeof *g);
    const int nt = rumor_model_tensor_count(m);
    rumor_st_out_t *o = calloc(2 * (size_t)nt + 3, sizeof *o);
    char (*names)[RUMOR_TENSOR_NAME_LEN + 8] = calloc((size_t)nt, sizeof *names);
    size_t k = 0;
    for (int i = 0; i < nt; i++) {
        const rumor_tensor_info_t *t = rumor_model_tensor(m, i);
        snprintf(names[i], sizeof names[i], "grad.%s", t->name);
        o[k++] = (rumor_st_out_t){.name = t->name, .ndim = t->ndim, .shape = {(uint64_t)t->shape[0], (uint64_t)t->shape[1]},
                                  .data = p + t->offset};
        o[k++] = (rumor_st_out_t){.name = names[i], .ndim = t->ndim, .shape = {(uint64_t)t->shape[0], (uint64_t)t->shape[1]},
                                  .data = g + t->offset};
    }
    const float mean_loss = (float)(loss / (GB * GT));
    o[k++] = (rumor_st_out_t){.name = "tok", .ndim = 2, .shape = {GB, GT}, .data = tokf};
    o[k++] = (rumor_st_out_t){.name = "targets", .ndim = 2, .shape = {GB, GT}, .data = tgtf};
    o[k++] = (rumor_st_out_t){.name = "loss", .ndim = 1, .shape = {1}, .data = &mean_loss};
    const rumor_st_meta_t meta[] = {{"model", "gpt:2,2,32,16"}};
    if (rc == RUMOR_OK) rc = rumor_st_write(path, o, k, meta, 1, err);
    if (rc != RUMOR_OK) fprintf(stderr, "%s\n", err);
    free(o), free(names), free(p), free(g);
    rumor_model_destroy(&m);
    return rc == RUMOR_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: ops_dump OUT.safetensors [--backend staged] [--gpt]\n");
        return 2;
    }
    char err[RUMOR_ERR_LEN];
    bool staged = false, gpt = false;
    for (int i = 2; i < argc; i++) {
        staged |= strcmp(argv[i], "--backend") == 0 && i + 1 < argc && strcmp(argv[i + 1], "staged") == 0;
        gpt |= strcmp(argv[i], "--gpt") == 0;
    }
    be = staged ? rumor_backend_open(&rumor_test_staged_ops, 1, err) : rumor_backend_new("cpu", 1, err);
    if (!be) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    rumor_rng_init(&rng, 11);
    if (gpt) {
        const int rc = dump_gpt(argv[1]);
        rumor_backend_destroy(&be);
        return rc;
    }
    /* embeddings */
    int32_t tok_h[N];
    float tokf[N];
    for (int n = 0; n < N; n++) tok_h[n] = (int32_t)rumor_rng_below(&rng, V), tokf[n] = (float)tok_h[n];
    tok_h[3] = tok_h[11] = tok_h[0], tokf[3] = tokf[11] = tokf[0]; /* repeats: their gradients add */
    int32_t *tok = be->ops->alloc(be, sizeof tok_h);
    be->ops->upload(be, tok, tok_h, sizeof tok_h);
    float *tokd = buf(N, 0);
    be->ops->upload(be, tokd, tokf, sizeof tokf);
    float *wte = buf((size_t)V * C, 0.5), *wpe = buf((size_t)T * C, 0.5), *emb = buf((size_t)N * C, 0);
    float *r_emb = buf((size_t)N * C, 1), *dwte = buf((size_t)V * C, 0), *dwpe = buf((size_t)T * C, 0);
    be->ops->embed(be, emb, tok, wte, wpe, B, T, C);
    be->ops->embed_bwd(be, dwte, dwpe, r_emb, tok, B, T, C);
    keep("tok", tokd, 2, B, T, 0);
    keep("wte", wte, 2, V, C, 0);
    keep("wpe", wpe, 2, T, C, 0);
    keep("embed", emb, 3, B, T, C);
    keep("embed.dout", r_emb, 3, B, T, C);
    keep("embed.dwte", dwte, 2, V, C, 0);
    keep("embed.dwpe", dwpe, 2, T, C, 0);
    /* LayerNorm: rows of the embedding, scaled away from unit variance */
    float *lw = buf(C, 1), *lb = buf(C, 1), *ln = buf((size_t)N * C, 0), *mean = buf(N, 0), *rstd = buf(N, 0);
    float *r_ln = buf((size_t)N * C, 1), *ldx = buf((size_t)N * C, 0), *ldw = buf(C, 0), *ldb = buf(C, 0);
    be->ops->layernorm(be, ln, mean, rstd, emb, lw, lb, N, C);
    be->ops->layernorm_bwd(be, ldx, ldw, ldb, r_ln, emb, lw, mean, rstd, N, C);
    keep("ln.w", lw, 1, C, 0, 0);
    keep("ln.b", lb, 1, C, 0, 0);
    keep("ln", ln, 3, B, T, C);
    keep("ln.dout", r_ln, 3, B, T, C);
    keep("ln.dx", ldx, 3, B, T, C);
    keep("ln.dw", ldw, 1, C, 0, 0);
    keep("ln.db", ldb, 1, C, 0, 0);
    /* attention */
    float *qkv = buf((size_t)N * 3 * C, 1), *att = buf((size_t)B * NH * T * T, 0), *ao = buf((size_t)N * C, 0);
    float *r_a = buf((size_t)N * C, 1), *dqkv = buf((size_t)N * 3 * C, 0), *datt = buf((size_t)B * NH * T * T, 0);
    be->ops->attention(be, ao, att, qkv, B, T, C, NH);
    be->ops->attention_bwd(be, dqkv, datt, r_a, qkv, att, B, T, C, NH);
    keep("qkv", qkv, 3, B, T, 3 * C);
    keep("attn", ao, 3, B, T, C);
    keep("attn.dout", r_a, 3, B, T, C);
    keep("attn.dqkv", dqkv, 3, B, T, 3 * C);
    /* GELU, on inputs up to about 6 in size */
    float *gx = buf((size_t)N * C, 2), *gy = buf((size_t)N * C, 0), *r_g = buf((size_t)N * C, 1);
    float *gdx = buf((size_t)N * C, 0);
    be->ops->gelu(be, gy, gx, (size_t)N * C);
    be->ops->gelu_bwd(be, gdx, gx, r_g, (size_t)N * C);
    keep("gelu.x", gx, 2, N, C, 0);
    keep("gelu", gy, 2, N, C, 0);
    keep("gelu.dout", r_g, 2, N, C, 0);
    keep("gelu.dx", gdx, 2, N, C, 0);
    rumor_err_t rc = be->ops->sync(be, err);
    const rumor_st_meta_t meta[] = {{"NH", "3"}};
    if (rc == RUMOR_OK) rc = rumor_st_write(argv[1], out, n_out, meta, 1, err);
    if (rc != RUMOR_OK) fprintf(stderr, "%s\n", err);
    for (size_t i = 0; i < n_out; i++) free(host[i]);
    /* the backend's buffers go with the process: this is a tool, not a long-lived program */
    rumor_backend_destroy(&be);
    return rc == RUMOR_OK ? 0 : 1;
}
