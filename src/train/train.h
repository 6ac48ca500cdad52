/*
 * train.h - centralized training on one dataset: the baseline every decentralized run is
 * held against, and the inner loop a node reuses.
 *
 * Determinism: the order of samples in epoch e is a shuffle seeded by (seed, e), and the
 * parameters by seed, so a run is a function of its configuration (and the BLAS thread
 * count, which changes summation order). A checkpoint records the step; resuming recomputes
 * the epoch's order and continues at that step, reaching the same parameters bit for bit as
 * an uninterrupted run with the same threads.
 *
 * Stopping: cfg->stop set (the CLI's signal handler) makes the loop finish its step, write
 * the checkpoint (when configured) and return with result.interrupted set.
 */
#ifndef RUMOR_TRAIN_H
#define RUMOR_TRAIN_H

#include "data.h"
#include "model.h"
#include "optim.h"
#include "base.h"
#include "safetensors.h"

#include <stdbool.h>
#include <stdio.h>

/* Where a run is (rumor_train_config_t.progress). */
typedef struct rumor_train_progress {
    int epoch, epochs;        /* 1-based */
    long step, total;         /* steps done, and in the whole run */
    double epoch_done;        /* fraction of this epoch's steps */
    double loss;              /* mean over this epoch so far */
    double samples_per_s, eta_s;
    bool epoch_end;           /* the epoch is over: its time, and its test accuracy if evaluated */
    double epoch_s;
    bool evaluated;
    double test_acc;
    bool text;                /* a language model: rates in tokens, evaluation on validation text */
    double test_loss;
} rumor_train_progress_t;

typedef struct {
    const char *data_dir;
    rumor_model_spec_t spec;
    bool spec_set;            /* false: mlp:256,128, or the resumed checkpoint's model */
    const char *device;       /* cpu | cuda | auto */
    const struct rumor_backend_ops *backend_ops; /* not NULL: this backend instead (tests) */
    int threads;              /* <= 0: all cores */
    int epochs;
    long steps;               /* the run's length in steps, which the schedule spans; 0: --epochs */
    int batch;
    uint64_t seed;
    rumor_optim_config_t opt;
    rumor_schedule_t sched;
    size_t limit;             /* use the first `limit` training samples; 0: all */
    int vocab;                /* token files' vocabulary (text.h); 0: the default */
    float clip_grad;          /* global gradient norm clipping; 0: none */
    bool partitioned;         /* train on one peer's shard of the (limited) training set */
    rumor_partition_t partition;
    int rank, peers;
    const char *metrics_path; /* JSON lines; appended to when resuming */
    const char *save_path;    /* exported model at the end */
    const char *checkpoint_path; /* checkpoint after every epoch and on stop */
    long checkpoint_every;    /* also every N steps; 0: off */
    const char *resume_path;  /* continue the run this checkpoint holds, with these settings */
    /* Metadata every checkpoint records besides the run's state: the settings it was made
     * with ("train.lr" = "0.05"; rumor_settings_record), so that a resume can take them back. */
    const rumor_st_meta_t *settings;
    int n_settings;
    long max_steps;           /* stop, as if interrupted, once this many steps are done; 0: off */
    int log_every;            /* steps between metric lines; 0: per epoch only */
    /* Told after every step and at the end of every epoch (NULL: nobody); library code
     * prints nothing, the CLI draws what it is told. */
    void (*progress)(void *arg, const struct rumor_train_progress *p);
    void *progress_arg;
    bool eval;                /* test accuracy after every epoch */
    const atomic_bool *stop;  /* the caller's stop request; NULL: none */
} rumor_train_config_t;

typedef struct {
    int epochs_done;
    long steps;
    double train_loss;     /* mean over the last epoch trained */
    double test_loss, test_acc; /* after the last epoch (NaN if not evaluated) */
    double train_seconds;  /* time in the training loop only (no eval, no checkpoints) */
    double samples_per_s;  /* median over epochs trained in this run */
    double gflops;         /* achieved, from the model's flop count */
    bool interrupted;      /* it stopped before its end (a signal, or --max-steps) */
    bool max_steps;        /* ... because --max-steps were done: a stop the user planned */
    bool text;             /* a language model: samples_per_s counts tokens, test_* is validation */
} rumor_train_result_t;

void rumor_train_config_defaults(rumor_train_config_t *cfg);

/* Run the configured training. Errors: bad data or files (EFORMAT/EIO, err names the file),
 * bad configuration (EINVAL), layout mismatch on resume (ELAYOUT), divergence (EINVAL,
 * "training diverged ..."). */
rumor_err_t rumor_train_run(const rumor_train_config_t *cfg, rumor_train_result_t *res,
                            char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* The order of epoch `epoch` (a shuffle seeded by (seed, epoch)): own[0..n) shuffled into
 * perm, or the positions 0..n-1 when own is NULL. `rumor train`, `rumor node` and the virtual
 * simulator all take samples in this order, so a peer's run is the same in each. */
void rumor_train_epoch_order(size_t *perm, const size_t *own, size_t n, uint64_t seed, long epoch);

/* Put samples idx[0..n) of ds into m's input buffers, normalised; stage_x/stage_y (max_batch
 * samples) are needed only when the backend's memory is not host memory. */
void rumor_train_load_batch(rumor_model_t *m, const rumor_dataset_t *ds, const size_t *idx, size_t n,
                            float mean, float std, float *stage_x, int32_t *stage_y);

/* Test loss and accuracy of m on ds (normalised with mean/std), in batches of the model's
 * max batch. */
rumor_err_t rumor_train_evaluate(rumor_model_t *m, const rumor_dataset_t *ds, float mean,
                                 float std, double *loss, double *acc,
                                 char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

#endif
