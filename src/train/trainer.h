/*
 * trainer.h - local steps: the one place rumor trains a model on its own samples.
 *
 * `rumor train`, a training node and every virtual peer take their minibatch steps here: the
 * shard and its epoch order, the batch gathered (on a device, staged while the step before
 * it computes), the plain or DP-SGD step, the learning-rate schedule and the divergence
 * check. What a caller adds is when to stop, and what to do between steps (gossip, metrics).
 *
 * Epoch e's order is a shuffle of the shard's positions seeded by (seed, e) (see
 * rumor_train_epoch_order); step s of the optimizer takes the batch at position s mod the
 * steps per epoch of that order. So a run depends on its configuration only, and a peer's
 * steps are the same in `rumor node` and in virtual mode.
 */
#ifndef RUMOR_TRAINER_H
#define RUMOR_TRAINER_H

#include "data.h"
#include "dp.h"
#include "model.h"
#include "optim.h"
#include "base.h"

#include <stdbool.h>

typedef struct {
    /* Labelled data: */
    const rumor_dataset_t *data;
    const size_t *own;       /* the samples of data this trainer owns, n of them; NULL: all */
    size_t n;
    float mean, std;         /* inputs are normalised (x - mean) / std */
    bool cache;              /* hold the shard normalised in memory, gathered once (virtual
                                mode, where each step is cheap and many peers share a core);
                                data and own are then read by rumor_trainer_new only */
    /* or text (text.h): each step's batch is `batch` windows of the shard drawn by (seed, step);
     * data, own, n, mean, std and cache are then unused, and dp's examples are the shard's windows */
    const struct rumor_text *text;
    const struct rumor_text_shard *shard;
    int batch;
    uint64_t seed;           /* of the epochs' order, or the windows' draw */
    float clip_grad;         /* the gradient scaled down to this global norm when longer; 0: never */
    rumor_schedule_t sched;
    float lr;                /* the schedule's base rate */
    long total_steps;        /* the schedule's length */
    rumor_dp_t *dp;          /* DP-SGD's step instead of the plain one; NULL: plain (not owned) */
} rumor_trainer_config_t;

typedef struct rumor_trainer rumor_trainer_t;

/* A trainer of model m with optimizer o over cfg's shard (cfg->n > 0); on text, o's weight
 * decay applies to m's matrices only (rumor_optim_decay_only). NULL with err (and
 * rumor_last_error) when out of memory. */
rumor_trainer_t *rumor_trainer_new(const rumor_trainer_config_t *cfg, rumor_model_t *m, rumor_optim_t *o,
                                   char err[RUMOR_ERR_LEN]);
void rumor_trainer_destroy(rumor_trainer_t **self_p);

typedef struct {
    double loss_sum;         /* summed over the samples of the steps taken */
    long samples;            /* predictions: samples, or a text window's T tokens each */
    long steps;              /* taken: fewer than asked when the privacy budget ran out */
    float lr;                /* of the last step */
    bool budget_spent;       /* DP-SGD: the budget allows no further step */
} rumor_trainer_stats_t;

/* Take up to n steps, the first at position `at` of the schedule (the next at at + 1, ...).
 * With gradient tracking each call computes a gradient and takes it into the tracker, and
 * first steps along the tracker the round mixed from the call before (rumor_optim_lead); st->lr
 * is then the rate of the last gradient's position. Stops early, with st->budget_spent, when a
 * DP-SGD budget allows no further step. Errors:
 * divergence (EINVAL, "training diverged at step S (loss L): lower --lr"), a backend's. */
rumor_err_t rumor_trainer_steps(rumor_trainer_t *self, long n, long at, rumor_trainer_stats_t *st,
                                char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* The steps of one epoch over the shard (text: as many tokens as the shard holds, at least one
 * step), of a trainer or of a configuration before there is one. */
long rumor_trainer_steps_per_epoch(const rumor_trainer_t *self);
long rumor_trainer_epoch_steps(const rumor_trainer_config_t *cfg);

/* ---- a peer's metrics: one line a round, as a node and virtual mode both write it ---- */

typedef struct {
    double t;                /* seconds since the start */
    int t_decimals;          /* 3 (a node's wall clock), 6 (virtual time, in microseconds) */
    long round, step;
    bool trained;            /* a round's line: loss .. bytes_in below; else a line about the
                                model alone (round 0, one taken from the swarm) */
    double loss;             /* mean over the round's samples */
    float lr;
    double consensus, w;
    int peers, neighbours, missing;
    uint64_t bytes_out, bytes_in;
    double wait_s;           /* the round's wait on gossip: from the end of its local steps to its
                                mix (virtual seconds in virtual mode) */
    double deadline_s;       /* ... the longest it allowed (0: not said) */
    bool evaluated;
    bool text;               /* a language model: its evaluation is val_loss, val_acc */
    double test_loss, test_acc;
    bool private;            /* DP-SGD: epsilon */
    double epsilon;
    bool secure_mix;         /* its chunks that could not be unmasked, so far */
    uint64_t unmixed;
    uint64_t implausible;    /* chunks out of scale with ours, so far (written when not 0) */
    uint64_t relayed;        /* models sent through a relay, so far (written when not 0) */
    const char *flag;        /* "resync", "swarm_final": written as true; NULL: none */
} rumor_metrics_line_t;

/* The JSON line for l, with its newline, into buf (cap bytes, 512 is enough); its length. */
size_t rumor_metrics_line(char *buf, size_t cap, const rumor_metrics_line_t *l);

#endif
