/* trainer.c - local steps (see trainer.h). */
#include "trainer.h"

#include "text.h"

#include "train.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Batches for backends whose memory is not host memory are double-buffered: a batch is
 * gathered on the host into page-locked memory and uploaded on the backend's copy stream into
 * one of two device slots while the step before it computes; taking it is one device-side
 * copy into the model's input buffers, queued like any op. The slot a put fills was last read
 * by the take two batches back, and every step syncs, so no queued work can still read it
 * (upload_async's condition). On host-memory backends a batch is gathered straight into the
 * model's buffers when taken: same operations, same order, same bits. */
struct rumor_trainer {
    rumor_trainer_config_t cfg;
    rumor_model_t *m;
    rumor_optim_t *o;
    rumor_backend_t *be;
    size_t feat;             /* floats per sample (images) */
    size_t xb, yn;           /* a sample's input bytes and labels: images feat floats and 1, text
                                T tokens and T */
    long spe;                /* steps per epoch */
    size_t *order[2];        /* two epochs' orders (positions), the current and the next */
    long order_epoch[2];
    size_t *idx;             /* a batch's sample indices (positions through own) */
    size_t *scratch;         /* DP-SGD's draw: room for n positions */
    float *fx;               /* cache: the shard, normalised, by position */
    int32_t *fy;
    void *hx[2];             /* device staging: host_alloc [max_batch] inputs */
    int32_t *hy[2];
    void *dx[2];             /* backend memory */
    int32_t *dy[2];
    size_t sn[2];            /* samples in each slot */
    int next;                /* the slot the next put fills */
    long staged;             /* the step whose batch the last put holds (-1: none) */
};

rumor_trainer_t *rumor_trainer_new(const rumor_trainer_config_t *cfg, rumor_model_t *m, rumor_optim_t *o,
                                   char err[RUMOR_ERR_LEN])
{
    rumor_trainer_t *t = calloc(1, sizeof *t);
    if (!t) {
        rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        return NULL;
    }
    t->cfg = *cfg;
    t->m = m;
    t->o = o;
    t->be = rumor_model_backend(m);
    t->order_epoch[0] = t->order_epoch[1] = -1;
    t->staged = -1;
    const size_t B = (size_t)rumor_model_max_batch(m);
    t->spe = rumor_trainer_epoch_steps(cfg);
    (void)rumor_model_sample_buf(m, &t->xb, &t->yn);
    if (cfg->text) { /* a language model decays its matrices only, as nanoGPT's AdamW */
        size_t at[2 * RUMOR_MODEL_MAX_TENSORS];
        if (rumor_optim_decay_only(o, at, rumor_model_matrices(m, at), err) != RUMOR_OK) {
            free(t);
            return NULL;
        }
    } else {
        t->feat = rumor_data_feat(cfg->data);
    }
    const size_t n = cfg->text ? cfg->shard->windows : cfg->n;
    bool ok = n > 0 && cfg->batch > 0;
    for (int k = 0; k < 2 && ok && !cfg->text; k++) ok = (t->order[k] = malloc(n * sizeof *t->order[k])) != NULL;
    ok = ok && (t->idx = malloc(B * sizeof *t->idx)) && (!cfg->dp || (t->scratch = malloc(n * sizeof *t->scratch)));
    if (ok && cfg->cache && !cfg->text) {
        size_t *all = malloc(n * sizeof *all);
        ok = all && (t->fx = malloc(n * t->feat * sizeof *t->fx)) && (t->fy = malloc(n * sizeof *t->fy));
        for (size_t j = 0; ok && j < n; j++) all[j] = cfg->own ? cfg->own[j] : j;
        if (ok) rumor_data_gather(cfg->data, all, n, cfg->mean, cfg->std, t->fx, t->fy);
        free(all);
    }
    rumor_backend_t *be = t->be;
    for (int k = 0; k < 2 && ok && !be->ops->host_memory; k++) {
        ok = (t->hx[k] = be->ops->host_alloc(be, B * t->xb)) &&
             (t->hy[k] = be->ops->host_alloc(be, B * t->yn * sizeof *t->hy[k])) &&
             (t->dx[k] = be->ops->alloc(be, B * t->xb)) && (t->dy[k] = be->ops->alloc(be, B * t->yn * sizeof *t->dy[k]));
    }
    if (!ok) {
        rumor_trainer_destroy(&t);
        rumor_fail(err, n > 0 && cfg->batch > 0 ? RUMOR_ENOMEM : RUMOR_EINVAL,
                   n > 0 && cfg->batch > 0 ? "out of memory for the training data of %zu samples"
                                           : "nothing to train on (%zu samples)", n);
        return NULL;
    }
    return t;
}

void rumor_trainer_destroy(rumor_trainer_t **self_p)
{
    rumor_trainer_t *t = *self_p;
    if (!t) return;
    rumor_backend_t *be = t->be;
    for (int k = 0; k < 2; k++) {
        free(t->order[k]);
        if (t->hx[k]) be->ops->host_free(be, t->hx[k]);
        if (t->hy[k]) be->ops->host_free(be, t->hy[k]);
        if (t->dx[k]) be->ops->free(be, t->dx[k]);
        if (t->dy[k]) be->ops->free(be, t->dy[k]);
    }
    free(t->idx);
    free(t->scratch);
    free(t->fx);
    free(t->fy);
    free(t);
    *self_p = NULL;
}

long rumor_trainer_steps_per_epoch(const rumor_trainer_t *self) { return self->spe; }

long rumor_trainer_epoch_steps(const rumor_trainer_config_t *cfg)
{
    if (cfg->batch < 1) return 1;
    if (!cfg->text) return cfg->n ? (long)rumor_chunks(cfg->n, (size_t)cfg->batch) : 1;
    const size_t per_step = (size_t)cfg->batch * (size_t)cfg->shard->T;
    return cfg->shard->tokens > per_step ? (long)(cfg->shard->tokens / per_step) : 1;
}

/* Epoch e's order of positions. */
static const size_t *order(rumor_trainer_t *t, long epoch)
{
    for (int k = 0; k < 2; k++)
        if (t->order_epoch[k] == epoch) return t->order[k];
    const int k = t->order_epoch[0] < t->order_epoch[1] ? 0 : 1; /* the older one */
    rumor_train_epoch_order(t->order[k], NULL, t->cfg.n, t->cfg.seed, epoch);
    t->order_epoch[k] = epoch;
    return t->order[k];
}

/* Samples at positions pos[0..k) into x and y (normalised). */
static void gather(const rumor_trainer_t *t, const size_t *pos, size_t k, float *x, int32_t *y)
{
    if (t->fx) {
        for (size_t j = 0; j < k; j++) {
            memcpy(x + j * t->feat, t->fx + pos[j] * t->feat, t->feat * sizeof *x);
            y[j] = t->fy[pos[j]];
        }
        return;
    }
    size_t *idx = t->idx;
    for (size_t j = 0; j < k; j++) idx[j] = t->cfg.own ? t->cfg.own[pos[j]] : pos[j];
    rumor_data_gather(t->cfg.data, idx, k, t->cfg.mean, t->cfg.std, x, y);
}

/* The positions of step `step`'s batch, and its size. */
static const size_t *batch_of(rumor_trainer_t *t, long step, size_t *bn)
{
    const size_t start = (size_t)(step % t->spe) * (size_t)t->cfg.batch;
    *bn = t->cfg.n - start < (size_t)t->cfg.batch ? t->cfg.n - start : (size_t)t->cfg.batch;
    return order(t, step / t->spe) + start;
}

/* The model's buffer of inputs: tokens for text, else normalised pixels. */
static void *model_x(rumor_trainer_t *t)
{
    size_t xb, yn;
    return rumor_model_sample_buf(t->m, &xb, &yn);
}

/* Step's batch into x and y: its size in samples. */
static size_t fill(rumor_trainer_t *t, long step, void *x, int32_t *y)
{
    if (t->cfg.text) {
        rumor_text_batch(t->cfg.text, t->cfg.shard, t->cfg.seed, (uint64_t)step, t->cfg.batch, x, y);
        return (size_t)t->cfg.batch;
    }
    size_t bn;
    const size_t *pos = batch_of(t, step, &bn);
    gather(t, pos, bn, x, y);
    return bn;
}

/* On a device: gather step's batch and start its upload into the next slot. */
static void put(rumor_trainer_t *t, long step)
{
    t->staged = step;
    rumor_backend_t *be = t->be;
    if (be->ops->host_memory) return;
    const int k = t->next;
    const size_t bn = fill(t, step, t->hx[k], t->hy[k]);
    be->ops->upload_async(be, t->dx[k], t->hx[k], bn * t->xb);
    be->ops->upload_async(be, t->dy[k], t->hy[k], bn * t->yn * sizeof *t->hy[k]);
    t->sn[k] = bn;
    t->next = k ^ 1;
}

/* Step's batch becomes the model's input (queued after the work before it); its size. */
static size_t take(rumor_trainer_t *t, long step)
{
    rumor_backend_t *be = t->be;
    if (t->staged != step) put(t, step);
    t->staged = -1;
    if (be->ops->host_memory) return fill(t, step, model_x(t), rumor_model_label_buf(t->m));
    const int k = t->next ^ 1;
    be->ops->wait_copies(be);
    be->ops->copy(be, model_x(t), t->dx[k], t->sn[k] * t->xb);
    be->ops->copy(be, rumor_model_label_buf(t->m), t->dy[k], t->sn[k] * t->yn * sizeof *t->dy[k]);
    return t->sn[k];
}

/* Samples at positions pos (text: windows of the shard) into x and y. */
static void gather_any(const rumor_trainer_t *t, const size_t *pos, size_t k, void *x, int32_t *y)
{
    if (t->cfg.text) rumor_text_windows(t->cfg.text, t->cfg.shard, pos, k, x, y);
    else gather(t, pos, k, x, y);
}

/* A slice of a DP-SGD batch: positions into the model's input buffer. */
static void dp_load(void *arg, size_t *pos, size_t k)
{
    rumor_trainer_t *t = arg;
    rumor_backend_t *be = t->be;
    if (be->ops->host_memory) {
        gather_any(t, pos, k, model_x(t), rumor_model_label_buf(t->m));
        return;
    }
    gather_any(t, pos, k, t->hx[0], t->hy[0]);
    be->ops->upload(be, model_x(t), t->hx[0], k * t->xb);
    be->ops->upload(be, rumor_model_label_buf(t->m), t->hy[0], k * t->yn * sizeof *t->hy[0]);
}

/* Scale the gradient down to norm clip_grad when it is longer (global norm clipping, as
 * torch.nn.utils.clip_grad_norm_ does: by clip / (norm + 1e-6)). Not under DP-SGD, which clips
 * each example. */
static void clip(rumor_trainer_t *t)
{
    if (!(t->cfg.clip_grad > 0) || t->cfg.dp) return;
    rumor_backend_t *be = t->be;
    float *g = rumor_model_grads(t->m);
    const size_t P = rumor_model_param_count(t->m);
    double n2 = 0.0;
    be->ops->sumsq(be, &n2, g, P); /* a wait on a device: the norm decides the step */
    const double norm = sqrt(n2), c = t->cfg.clip_grad;
    if (norm > c) be->ops->scale(be, g, (float)(c / (norm + 1e-6)), P);
}

rumor_err_t rumor_trainer_steps(rumor_trainer_t *t, long n, long at, rumor_trainer_stats_t *st,
                                char err[RUMOR_ERR_LEN])
{
    memset(st, 0, sizeof *st);
    rumor_err_t rc;
    float *x = rumor_model_params(t->m);
    for (long i = 0; i < n; i++) {
        float *g = rumor_model_grads(t->m);
        const bool after_mix = rumor_optim_after_mix(t->o);
        if (rumor_optim_lead(t->o, g)) { /* the last gradient's step, along the tracker the round mixed */
            clip(t);
            rumor_optim_step(t->o, x, g, rumor_schedule_lr(&t->cfg.sched, t->cfg.lr, at + i > 0 ? at + i - 1 : 0,
                                                           t->cfg.total_steps, t->spe));
        }
        const long step = rumor_optim_steps(t->o);
        double bl = 0.0;
        size_t bn;
        if (t->cfg.dp && rumor_dp_over_budget(t->cfg.dp)) {
            st->budget_spent = true;
            break;
        }
        st->lr = rumor_schedule_lr(&t->cfg.sched, t->cfg.lr, at + i, t->cfg.total_steps, t->spe);
        long hits = 0; /* rumor_model_queue adds to both by the sync */
        if (t->cfg.dp) {
            if ((rc = rumor_dp_step(t->cfg.dp, t->m, t->scratch, dp_load, t, &bn, &bl, err)) != RUMOR_OK) return rc;
        } else {
            bn = take(t, step);
            if ((rc = rumor_model_queue(t->m, (int)bn, true, &bl, &hits, err)) != RUMOR_OK) return rc;
        }
        if (after_mix) {
            rumor_optim_take(t->o, g); /* its step waits for the round's mix */
        } else {
            clip(t);
            rumor_optim_step(t->o, x, g, st->lr);
        }
        if (!t->cfg.dp) {
            put(t, step + 1); /* the next batch, gathered (and uploaded) while this one computes */
            if ((rc = t->be->ops->sync(t->be, err)) != RUMOR_OK) return rc;
        }
        if (!isfinite(bl))
            return rumor_fail(err, RUMOR_EINVAL, "training diverged at step %ld (loss %g): lower --lr", step, bl);
        st->loss_sum += bl;
        st->samples += (long)(bn * t->yn); /* predictions: a text window makes T */
        st->steps++;
    }
    return RUMOR_OK;
}
