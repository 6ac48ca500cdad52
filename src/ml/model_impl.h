/* model_impl.h - what model.c and model_gpt.c share: the model's struct and the layout
 * helpers. Not an interface: the functions here are the two files' own. */
#ifndef RUMOR_MODEL_IMPL_H
#define RUMOR_MODEL_IMPL_H

#include "model.h"

#include <stdbool.h>

#define KSIZE 5       /* convolution kernel side */
#define ALIGN_FLOATS 16

struct rumor_model {
    rumor_model_spec_t spec;
    rumor_model_input_t in;
    rumor_backend_t *be;
    int max_batch;
    size_t n_params;
    int n_tensors;
    rumor_tensor_info_t t[RUMOR_MODEL_MAX_TENSORS];
    uint64_t layout_id;
    float *params, *grads;
    float *x;     /* [max_batch][c*h*w]; NULL for gpt */
    int32_t *tok; /* gpt: [max_batch][T] tokens; else NULL */
    int32_t *y;   /* [max_batch], gpt: [max_batch][T] */
    float *logits, *dlogits;

    /* mlp: layer l maps dims[l-1] -> dims[l]; act[0] is x, act[n_layers] the logits */
    int n_layers;
    int dims[RUMOR_MODEL_MAX_LAYERS + 2];
    float *act[RUMOR_MODEL_MAX_LAYERS + 2];
    float *dact[RUMOR_MODEL_MAX_LAYERS + 2];

    /* cnn: sizes after conv1 (h1,w1), pool1 (q1), conv2 (h2,w2), pool2 (q2) */
    int c1, c2, h1, w1, qh1, qw1, h2, w2, qh2, qw2, feat;
    float *xt;                 /* x as [c][b][h][w] when c > 1 */
    float *col1, *z1, *p1;     /* z1 doubles as dz1 in backward */
    float *col2, *z2, *p2;     /* col2 doubles as dcol2, z2 as dz2 */
    float *flat, *dflat, *dp2, *dp1;

    /* gpt (model_gpt.c) */
    struct gpt *gpt;
};

/* Add a tensor of ndim dimensions to m's layout, at the next aligned offset; -1 when full. */
int model_add_tensor(rumor_model_t *m, const char *name, int ndim, const int *shape);
/* A backend buffer of len bytes, zeroed; sets *failed when it cannot be had. */
void *model_alloc(rumor_model_t *m, size_t len, int *failed);

/* gpt: layout and buffers (EINVAL for a shape it cannot take, ENOMEM, ENOTSUP for a backend
 * without a transformer's ops), their release, GPT-2's initialisation, flops, and one batch. */
rumor_err_t gpt_build(rumor_model_t *m, char err[RUMOR_ERR_LEN]);
void gpt_free(rumor_model_t *m);
void gpt_init(const rumor_model_t *m, float *host, uint64_t seed);
double gpt_flops(const rumor_model_t *m, bool train);
void gpt_run(rumor_model_t *m, int b, bool grads, double *loss, long *correct);

#endif


