/*
 * optim.h - optimizers over the flat parameter buffer, and learning-rate schedules.
 *
 * SGD with momentum (heavy ball or Nesterov) and coupled weight decay, as torch.optim.SGD;
 * AdamW (decoupled weight decay), as torch.optim.AdamW. State buffers share the model's
 * layout (n floats each, backend memory), so a step is one pass.
 *
 * Schedules give the learning rate at a step: constant, step decay every N epochs, or
 * cosine to zero over the run; each with an optional linear warm-up over the first W steps.
 */
#ifndef RUMOR_OPTIM_H
#define RUMOR_OPTIM_H

#include "backend.h"
#include "base.h"

#include <stdbool.h>

/* qgm: SGD with quasi-global momentum (QG-DSGDm, Lin et al. 2021): each step moves by
 * lr (g + momentum m) (with nesterov, QG-DSGDm-N: lr ((1 + momentum) g + momentum^2 m)), m held
 * for the round, and at the end of a gossip round m <- momentum m + (1 - momentum) (anchor - x)
 * / (the learning rates summed since), anchor <- x: the momentum follows the mixed model's
 * motion, not the peer's own gradients (rumor_optim_mixed). */
/* dadamw: AdamW whose second moment (exp_avg_sq) a swarm's gossip averages with the model
 * (the decentralized adaptive framework of Chen et al. 2021; hivemind averages it too); the
 * step itself is AdamW's, and without gossip it is AdamW. */
typedef enum { RUMOR_OPT_SGD, RUMOR_OPT_ADAMW, RUMOR_OPT_QGM, RUMOR_OPT_DADAMW } rumor_opt_kind_t;

typedef struct {
    rumor_opt_kind_t kind;
    float lr;
    float momentum;     /* sgd */
    bool nesterov;      /* sgd */
    float weight_decay;
    float beta1, beta2, eps; /* adamw */
    bool tracking;      /* gradient tracking (any kind): the step follows the tracker */
} rumor_optim_config_t;

/* Defaults: sgd, lr 0.05, momentum 0.9, no weight decay; adamw betas 0.9/0.999, eps 1e-8. */
rumor_optim_config_t rumor_optim_defaults(void);
/* "sgd", "adamw", "qgm" or "dadamw" */
rumor_err_t rumor_optim_kind_parse(rumor_opt_kind_t *out, const char *s,
                                   char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
const char *rumor_optim_kind_name(rumor_opt_kind_t kind);
/* Reject non-finite, non-positive or absurd values with a sentence naming the flag. */
rumor_err_t rumor_optim_config_check(const rumor_optim_config_t *cfg,
                                     char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

typedef struct rumor_optim rumor_optim_t;

/* State for n floats on backend be (borrowed), zeroed. */
rumor_optim_t *rumor_optim_new(const rumor_optim_config_t *cfg, rumor_backend_t *be, size_t n,
                               char err[RUMOR_ERR_LEN]);
void rumor_optim_destroy(rumor_optim_t **self_p);

/* Weight decay only on the parameters [at[2i], at[2i] + at[2i + 1]) for i < n (ascending,
 * disjoint; copied), none elsewhere: nanoGPT's AdamW decays a transformer's matrices and
 * embeddings, not its biases and LayerNorm weights. Without a call every parameter decays, as
 * torch.optim does. ENOMEM with err. */
rumor_err_t rumor_optim_decay_only(rumor_optim_t *self, const size_t *at, int n,
                                   char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* One update of params from grads at learning rate lr (from a schedule); grads are
 * consumed: left zeroed for the next accumulation. */
void rumor_optim_step(rumor_optim_t *self, float *params, float *grads, float lr);

/* Gradient tracking (cfg.tracking) steps after the round's mix: rumor_optim_take takes a
 * gradient into the tracker (grads left zeroed) and the round mixes the trackers; then
 * rumor_optim_lead copies the tracker into dir (true; false when no gradient waits) and
 * rumor_optim_step steps along dir. rumor_optim_after_mix says whether the optimizer works so. */
bool rumor_optim_after_mix(const rumor_optim_t *self);
bool rumor_optim_lead(rumor_optim_t *self, float *dir);
void rumor_optim_take(rumor_optim_t *self, float *grads);

/* qgm: a gossip round ended and params is the mixed model: the momentum takes the motion since
 * the last round (or the first step), and params becomes the anchor. Nothing for sgd, adamw. */
void rumor_optim_mixed(rumor_optim_t *self, const float *params);
/* qgm: params was replaced (a model taken from the swarm): the next motion counts from it. */
void rumor_optim_anchor(rumor_optim_t *self, const float *params);
/* The state a swarm mixes with the model, one block of *floats (n each: dadamw's exp_avg_sq,
 * then the tracker), in backend memory; NULL and 0 when there is none. */
float *rumor_optim_gossiped(rumor_optim_t *self, size_t *floats);

/* Steps taken so far (AdamW's bias correction depends on it). */
long rumor_optim_steps(const rumor_optim_t *self);
void rumor_optim_set_steps(rumor_optim_t *self, long steps);
/* State buffers, for checkpoints: "momentum" (sgd) or "exp_avg", "exp_avg_sq" (adamw), the
 * names torch.optim uses; "momentum", "anchor" (qgm; a checkpoint is written right after a
 * round, when no learning rate is summed since the anchor). */
#define RUMOR_OPTIM_MAX_STATES 4 /* two of the kind's, and with tracking the tracker and last_grad */
int rumor_optim_state_count(const rumor_optim_t *self);
const char *rumor_optim_state_name(const rumor_optim_t *self, int i);
float *rumor_optim_state(rumor_optim_t *self, int i);
const rumor_optim_config_t *rumor_optim_config(const rumor_optim_t *self);

/* ---- learning-rate schedules ---- */
typedef enum { RUMOR_SCHED_CONSTANT, RUMOR_SCHED_STEP, RUMOR_SCHED_COSINE } rumor_sched_kind_t;

typedef struct {
    rumor_sched_kind_t kind;
    int every_epochs; /* step: decay period */
    float gamma;      /* step: factor */
    long warmup;      /* steps of linear warm-up from lr/warmup to lr */
} rumor_schedule_t;

/* "constant", "step:N,GAMMA" (every N epochs multiply by GAMMA), "cosine". */
rumor_err_t rumor_schedule_parse(rumor_schedule_t *out, const char *spec,
                                 char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* The text that parses back to s (without the warm-up, a separate flag). */
void rumor_schedule_format(char *buf, size_t len, const rumor_schedule_t *s);
/* Learning rate for step (0-based) of total steps, steps_per_epoch > 0. */
float rumor_schedule_lr(const rumor_schedule_t *s, float base_lr, long step, long total,
                        long steps_per_epoch);

#endif
