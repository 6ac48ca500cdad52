/*
 * model.h - the models: parameters in one flat buffer (llm.c), a named layout, forward and
 * backward written once against the backend ops table.
 *
 * Specs: "logreg" (one linear layer), "mlp:W1,W2,..." (ReLU between layers; "mlp" alone is
 * mlp:256,128), "cnn" / "cnn:C1,C2" (conv C_in->C1 5x5, ReLU, max-pool 2, conv C1->C2 5x5,
 * ReLU, max-pool 2, fc -> classes; default 16,32), "gpt:L,H,D,T" (GPT-2 as nanoGPT writes it:
 * L pre-LayerNorm blocks of causal self-attention with H heads and a 4D-wide GELU MLP, width
 * D, T positions, the output head tied to the token embedding; model_gpt.c). A gpt model's
 * input is {1, 1, T, V}: T positions of tokens of a vocabulary of V.
 *
 * Layout: tensors in PyTorch state_dict order and names (fc1.weight [out, in], fc1.bias,
 * conv1.weight [out, in, kh, kw], ...), each at an offset aligned to 16 floats in one
 * buffer of n_params floats. Gradients and optimizer state use the same layout, so an
 * optimizer step, mixing, checkpointing and sending are single passes. The layout id is a
 * 64-bit FNV-1a hash of a canonical description (spec, input shape, classes, every tensor's
 * name, shape and offset): two peers can mix only if their ids agree.
 *
 * Invariants: params/grads are backend memory of n_params floats each; padding between
 * tensors stays zero (written by init, never by a gradient), so whole-buffer passes are
 * exact. A model holds workspace for batches up to max_batch.
 *
 * Non-goals: arbitrary graphs, dropout, batch norm.
 */
#ifndef RUMOR_MODEL_H
#define RUMOR_MODEL_H

#include "backend.h"
#include "base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RUMOR_MODEL_MAX_LAYERS 8
#define RUMOR_GPT_MAX_LAYERS 24
/* gpt: two embeddings, twelve tensors a block, the final LayerNorm's two */
#define RUMOR_MODEL_MAX_TENSORS (4 + 12 * RUMOR_GPT_MAX_LAYERS)
#define RUMOR_MODEL_SPEC_LEN 96
#define RUMOR_TENSOR_NAME_LEN 64

typedef enum { RUMOR_MODEL_MLP, RUMOR_MODEL_CNN, RUMOR_MODEL_GPT } rumor_model_kind_t;

typedef struct {
    rumor_model_kind_t kind;
    int n_hidden;                        /* mlp: hidden layers (0 for logreg) */
    int hidden[RUMOR_MODEL_MAX_LAYERS];  /* mlp: widths; cnn: hidden[0..1] = C1, C2 */
    int layers, heads, dim, ctx;         /* gpt: L, H, D, T */
    char canonical[RUMOR_MODEL_SPEC_LEN]; /* "logreg", "mlp:256,128", "cnn:16,32", "gpt:4,4,128,64" */
} rumor_model_spec_t;

/* Parse a spec; err says what is wrong ("unknown model 'x' (expected logreg, mlp:W1,W2,...
 * or cnn[:C1,C2])", "mlp width 0 out of range 1..65536", ...). */
rumor_err_t rumor_model_spec_parse(rumor_model_spec_t *out, const char *spec,
                                   char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

typedef struct {
    char name[RUMOR_TENSOR_NAME_LEN];
    int ndim;
    int shape[4];
    size_t offset; /* in floats */
    size_t count;  /* elements */
} rumor_tensor_info_t;

/* The input a model expects: channels, height, width, classes. A gpt model's classes are its
 * vocabulary, and ids says whose tokens: a tokenizer's ids (token files), not bytes (a corpus
 * of .txt documents), which a vocabulary of 256 alone does not tell. */
typedef struct {
    int c, h, w, classes;
    bool ids;
} rumor_model_input_t;

typedef struct rumor_model rumor_model_t;

/* A model on backend `be` (borrowed; must outlive the model) with workspace for batches up
 * to max_batch. Parameters are zero until rumor_model_init or a load. NULL + err on failure
 * (e.g. a CNN whose input is too small for two 5x5 convolutions and pools). */
rumor_model_t *rumor_model_new(const rumor_model_spec_t *spec, rumor_model_input_t in,
                               rumor_backend_t *be, int max_batch, char err[RUMOR_ERR_LEN]);
void rumor_model_destroy(rumor_model_t **self_p);

/* Seeded init: He-normal for layers followed by ReLU, Xavier-uniform for the output layer,
 * zero biases. Same seed, same parameters on every backend. */
rumor_err_t rumor_model_init(rumor_model_t *self, uint64_t seed) RUMOR_MUST_CHECK;

/* ---- introspection ---- */
size_t rumor_model_param_count(const rumor_model_t *self); /* n_params incl. padding */
uint64_t rumor_model_layout_id(const rumor_model_t *self);
/* Its canonical layout text (layout.h) into buf[0..cap), as snprintf: the length (cap 0 asks). */
size_t rumor_model_layout_text(const rumor_model_t *self, char *buf, size_t cap);
const rumor_model_spec_t *rumor_model_spec(const rumor_model_t *self);
rumor_model_input_t rumor_model_input(const rumor_model_t *self);
int rumor_model_tensor_count(const rumor_model_t *self);
const rumor_tensor_info_t *rumor_model_tensor(const rumor_model_t *self, int i);
int rumor_model_max_batch(const rumor_model_t *self);
/* The parameter ranges of its tensors of two or more dimensions (matrices, embeddings,
 * kernels), adjacent ones merged, as offset, count pairs into at (room for two a tensor); their
 * number. */
int rumor_model_matrices(const rumor_model_t *self, size_t *at);
rumor_backend_t *rumor_model_backend(rumor_model_t *self);
/* grads = 0 (they start at zero; optimizer steps leave them zero). */
void rumor_model_zero_grads(rumor_model_t *self);
/* Floating-point operations per sample of a forward pass, or forward and backward. */
double rumor_model_flops(const rumor_model_t *self, bool train);
/* Backend buffers (n_params floats each). */
float *rumor_model_params(rumor_model_t *self);
float *rumor_model_grads(rumor_model_t *self);
/* Backend buffers for one batch: inputs [max_batch][c*h*w], labels [max_batch]. A caller
 * fills them (directly when the backend's memory is host memory, else by upload). A gpt model
 * takes tokens instead of inputs, [max_batch][T], and its labels are each position's next
 * token, [max_batch][T]; its input buffer is NULL, and a classifier's token buffer. */
float *rumor_model_input_buf(rumor_model_t *self);
int32_t *rumor_model_token_buf(rumor_model_t *self);
int32_t *rumor_model_label_buf(rumor_model_t *self);
/* One sample's place in those buffers: the buffer its input goes to (the input or the token
 * buffer), its input's bytes (*xb) and its labels (*yn: 1, or a gpt model's T). */
void *rumor_model_sample_buf(rumor_model_t *self, size_t *xb, size_t *yn);
/* Logits of the last forward pass, [b][classes] in backend memory. */
const float *rumor_model_logits(const rumor_model_t *self);

/* ---- compute ---- */

/* Forward on the first b samples of the input buffer (a gpt model: b sequences, each of T
 * predictions, the loss summed and averaged over all b*T of them); with grads, backward too:
 * the gradient of the mean cross-entropy over the batch is *added* to grads (as in PyTorch, so several
 * batches can accumulate; an optimizer step consumes and zeroes them). Adds the summed
 * loss and the count of correct predictions to *loss_sum and *correct (either may be NULL).
 * Synchronises with the backend and returns its first error. */
rumor_err_t rumor_model_run(rumor_model_t *self, int b, bool grads, double *loss_sum,
                            long *correct, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* rumor_model_run's forward alone on samples first..first+b of the input buffer, for a caller
 * that holds more there than it runs at once: an evaluation of many samples runs faster a
 * slice at a time (OpenBLAS multiplies a thin slice without packing it; 30% of a 2,000-image
 * evaluation of logreg with its AVX-512 kernels). An mlp (logreg too) only: RUMOR_EINVAL
 * otherwise, or when the rows are not inside max_batch. */
rumor_err_t rumor_model_eval_rows(rumor_model_t *self, int first, int b, double *loss_sum, long *correct,
                                  char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* The first half of rumor_model_run, for a caller with host work to overlap (gathering the
 * next batch while a device computes this one): checks b and queues the batch's work without
 * waiting. *loss_sum and *correct (not NULL) are added to by the time the backend's next
 * sync returns RUMOR_OK, and must stay valid until then; that sync reports any failure. */
rumor_err_t rumor_model_queue(rumor_model_t *self, int b, bool grads, double *loss_sum,
                              long *correct, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

#endif
