/* train.c - the training loop. */
#include "train.h"

#include "backend.h"
#include "checkpoint.h"
#include "fileio.h"
#include "rng.h"

#include <errno.h>
#include <stdio.h>
#include <limits.h>
#include <stdarg.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EVAL_BATCH 256
#define SHUFFLE_STREAM 0x5eedULL

static volatile sig_atomic_t stop_requested;

void rumor_train_request_stop(void) { stop_requested = 1; }

void rumor_train_epoch_order(size_t *perm, const size_t *own, size_t n, uint64_t seed, long epoch)
{
    for (size_t i = 0; i < n; i++) perm[i] = own ? own[i] : i;
    rumor_rng_t rng;
    rumor_rng_init2(&rng, seed, SHUFFLE_STREAM, (uint64_t)epoch);
    rumor_rng_shuffle(&rng, perm, n);
}

void rumor_train_config_defaults(rumor_train_config_t *c)
{
    memset(c, 0, sizeof *c);
    c->data_dir = NULL;
    c->device = "cpu";
    c->threads = 0;
    c->epochs = 10;
    c->batch = 64;
    c->seed = 1;
    c->opt = rumor_optim_defaults();
    c->sched.kind = RUMOR_SCHED_CONSTANT;
    c->log_every = 100;
    c->print_epochs = true;
    c->eval = true;
}

/* Put samples idx[0..n) into the model's input buffers. */
void rumor_train_load_batch(rumor_model_t *m, const rumor_dataset_t *ds, const size_t *idx, size_t n,
                       float mean, float std, float *stage_x, uint8_t *stage_y)
{
    rumor_backend_t *be = rumor_model_backend(m);
    if (be->ops->host_memory) {
        rumor_data_gather(ds, idx, n, mean, std, rumor_model_input_buf(m), rumor_model_label_buf(m));
        return;
    }
    const size_t feat = ds->rows * ds->cols;
    rumor_data_gather(ds, idx, n, mean, std, stage_x, stage_y);
    be->ops->upload(be, rumor_model_input_buf(m), stage_x, n * feat * sizeof(float));
    be->ops->upload(be, rumor_model_label_buf(m), stage_y, n);
}

rumor_err_t rumor_train_evaluate(rumor_model_t *m, const rumor_dataset_t *ds, float mean,
                                 float std, double *loss, double *acc, char err[RUMOR_ERR_LEN])
{
    const size_t B = (size_t)rumor_model_max_batch(m), feat = ds->rows * ds->cols;
    size_t *idx = malloc(B * sizeof *idx);
    float *sx = malloc(B * feat * sizeof *sx);
    uint8_t *sy = malloc(B);
    double loss_sum = 0.0;
    long correct = 0;
    rumor_err_t rc = RUMOR_OK;
    if (!idx || !sx || !sy) {
        rc = rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t start = 0; start < ds->count; start += B) {
        size_t n = ds->count - start < B ? ds->count - start : B;
        for (size_t i = 0; i < n; i++) idx[i] = start + i;
        rumor_train_load_batch(m, ds, idx, n, mean, std, sx, sy);
        if ((rc = rumor_model_run(m, (int)n, false, &loss_sum, &correct, err)) != RUMOR_OK) goto out;
    }
    *loss = ds->count ? loss_sum / (double)ds->count : NAN;
    *acc = ds->count ? (double)correct / (double)ds->count : NAN;
out:
    free(idx);
    free(sx);
    free(sy);
    return rc;
}

/* ---- batch staging for backends whose memory is not host memory ----
 *
 * Double-buffered: a batch is gathered on the host into page-locked memory and uploaded on
 * the backend's copy stream into one of two device slots while the batch before it computes;
 * taking it is one device-side copy into the model's input buffers, queued like any op. The
 * slot a put fills was last read by the take two batches back, and a step syncs, so no queued
 * work can still read it (upload_async's condition). On host-memory backends a put only
 * records the batch and take gathers it straight into the model's buffers, as before: same
 * operations, same order, same bits. */
typedef struct {
    rumor_backend_t *be;
    rumor_model_t *m;
    size_t feat;            /* floats per sample */
    float *hx[2];           /* host_alloc: [max_batch][feat] */
    uint8_t *hy[2];
    float *dx[2];           /* backend memory */
    uint8_t *dy[2];
    size_t n[2];            /* samples in each slot */
    int next;               /* the slot the next put fills */
    /* host-memory backends: the batch take gathers */
    const rumor_dataset_t *ds;
    const size_t *idx;
    size_t count;
    float mean, std;
} stage_t;

static void stage_fini(stage_t *st)
{
    rumor_backend_t *be = st->be;
    if (!be) return;
    for (int k = 0; k < 2; k++) {
        if (st->hx[k]) be->ops->host_free(be, st->hx[k]);
        if (st->hy[k]) be->ops->host_free(be, st->hy[k]);
        if (st->dx[k]) be->ops->free(be, st->dx[k]);
        if (st->dy[k]) be->ops->free(be, st->dy[k]);
    }
    memset(st, 0, sizeof *st);
}

static rumor_err_t stage_init(stage_t *st, rumor_model_t *m, size_t feat, char err[RUMOR_ERR_LEN])
{
    memset(st, 0, sizeof *st);
    st->be = rumor_model_backend(m);
    st->m = m;
    st->feat = feat;
    rumor_backend_t *be = st->be;
    if (be->ops->host_memory) return RUMOR_OK;
    const size_t B = (size_t)rumor_model_max_batch(m);
    for (int k = 0; k < 2; k++) {
        st->hx[k] = be->ops->host_alloc(be, B * feat * sizeof(float));
        st->hy[k] = be->ops->host_alloc(be, B);
        st->dx[k] = be->ops->alloc(be, B * feat * sizeof(float));
        st->dy[k] = be->ops->alloc(be, B);
        if (!st->hx[k] || !st->hy[k] || !st->dx[k] || !st->dy[k]) {
            stage_fini(st);
            return rumor_fail(err, RUMOR_ENOMEM, "out of %s memory for batch staging", be->ops->name);
        }
    }
    return RUMOR_OK;
}

/* Batch idx[0..n): on a device, gather it and start its upload into the next slot. */
static void stage_put(stage_t *st, const rumor_dataset_t *ds, const size_t *idx, size_t n, float mean, float std)
{
    rumor_backend_t *be = st->be;
    if (be->ops->host_memory) {
        st->ds = ds, st->idx = idx, st->count = n, st->mean = mean, st->std = std;
        return;
    }
    const int k = st->next;
    rumor_data_gather(ds, idx, n, mean, std, st->hx[k], st->hy[k]);
    be->ops->upload_async(be, st->dx[k], st->hx[k], n * st->feat * sizeof(float));
    be->ops->upload_async(be, st->dy[k], st->hy[k], n);
    st->n[k] = n;
    st->next = k ^ 1;
}

/* The batch put last becomes the model's input (queued after the work before it). */
static void stage_take(stage_t *st)
{
    rumor_backend_t *be = st->be;
    if (be->ops->host_memory) {
        rumor_data_gather(st->ds, st->idx, st->count, st->mean, st->std, rumor_model_input_buf(st->m),
                          rumor_model_label_buf(st->m));
        return;
    }
    const int k = st->next ^ 1;
    be->ops->wait_copies(be);
    be->ops->copy(be, rumor_model_input_buf(st->m), st->dx[k], st->n[k] * st->feat * sizeof(float));
    be->ops->copy(be, rumor_model_label_buf(st->m), st->dy[k], st->n[k]);
}

static void format_eta(char *buf, size_t len, double s)
{
    if (!isfinite(s) || s < 0) s = 0;
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, len, "%ld:%02ld", t / 60, t % 60);
}

/* ---- the run's settings in checkpoint metadata ---- */

static void settings_to_meta(rumor_ckpt_info_t *info, const rumor_train_config_t *c, size_t samples)
{
    char buf[64];
    info->n_extra = 0;
    rumor_ckpt_extra_add(info, "train.batch", "%d", c->batch);
    rumor_ckpt_extra_add(info, "train.samples", "%zu", samples);
    rumor_ckpt_extra_add(info, "train.limit", "%zu", c->limit);
    if (c->partitioned) {
        rumor_partition_format(buf, sizeof buf, &c->partition);
        rumor_ckpt_extra_add(info, "train.partition", "%s", buf);
        rumor_ckpt_extra_add(info, "train.rank", "%d", c->rank);
        rumor_ckpt_extra_add(info, "train.peers", "%d", c->peers);
    } else {
        rumor_ckpt_extra_add(info, "train.partition", "none");
    }
    rumor_ckpt_extra_add(info, "train.epochs", "%d", c->epochs);
    rumor_ckpt_extra_add(info, "train.lr", "%.9g", (double)c->opt.lr);
    rumor_ckpt_extra_add(info, "train.momentum", "%.9g", (double)c->opt.momentum);
    rumor_ckpt_extra_add(info, "train.nesterov", "%d", c->opt.nesterov ? 1 : 0);
    rumor_ckpt_extra_add(info, "train.weight_decay", "%.9g", (double)c->opt.weight_decay);
    rumor_schedule_format(buf, sizeof buf, &c->sched);
    rumor_ckpt_extra_add(info, "train.schedule", "%s", buf);
    rumor_ckpt_extra_add(info, "train.warmup", "%ld", c->sched.warmup);
}

static bool meta_float(const rumor_ckpt_info_t *info, const char *key, float *out)
{
    const char *v = rumor_ckpt_extra(info, key);
    if (!v || !*v) return false;
    char *end;
    double x = strtod(v, &end);
    if (*end || !isfinite(x)) return false;
    *out = (float)x;
    return true;
}

rumor_err_t rumor_train_config_resume(rumor_train_config_t *c, const rumor_train_given_t *given,
                                      char err[RUMOR_ERR_LEN])
{
    rumor_model_spec_t spec;
    rumor_model_input_t in;
    rumor_ckpt_info_t info;
    rumor_err_t rc = rumor_checkpoint_peek(c->resume_path, &spec, &in, &info, err);
    if (rc != RUMOR_OK) return rc;
    const char *path = c->resume_path;
    if (!info.has_optim)
        return rumor_fail(err, RUMOR_EINVAL,
                          "%s: an exported model, not a checkpoint (no optimizer state); write checkpoints with --checkpoint",
                          path);
#define MISMATCH(what, fmt, mine, theirs)                                                        \
    rumor_fail(err, RUMOR_EINVAL, "%s: " what " " fmt " differs from the checkpoint's " fmt       \
               " (a resumed run keeps the settings it started with)", path, mine, theirs)
    if (!given->model) c->spec = spec, c->spec_set = true;
    else if (strcmp(c->spec.canonical, spec.canonical) != 0)
        return MISMATCH("--model", "%s", c->spec.canonical, spec.canonical);
    if (!given->seed) c->seed = info.seed;
    else if (c->seed != info.seed)
        return MISMATCH("--seed", "%llu", (unsigned long long)c->seed, (unsigned long long)info.seed);
    if (!given->optimizer) c->opt.kind = info.optim_kind;
    else if (c->opt.kind != info.optim_kind)
        return MISMATCH("--optimizer", "%s", rumor_optim_kind_name(c->opt.kind),
                        rumor_optim_kind_name(info.optim_kind));
    long v;
    if (rumor_ckpt_extra_long(&info, "train.batch", 1, 65536, &v)) {
        if (!given->batch) c->batch = (int)v;
        else if (c->batch != v) return MISMATCH("--batch", "%ld", (long)c->batch, v);
    }
    if (rumor_ckpt_extra_long(&info, "train.limit", 0, LONG_MAX, &v)) {
        if (!given->limit) c->limit = (size_t)v;
        else if ((long)c->limit != v) return MISMATCH("--limit", "%ld", (long)c->limit, v);
    }
    const char *part = rumor_ckpt_extra(&info, "train.partition");
    if (part) {
        char mine[64] = "none";
        if (c->partitioned) rumor_partition_format(mine, sizeof mine, &c->partition);
        long rank = 0, peers = 0;
        bool has = strcmp(part, "none") != 0;
        if (has && (!rumor_ckpt_extra_long(&info, "train.rank", 0, 100000, &rank) ||
                    !rumor_ckpt_extra_long(&info, "train.peers", 1, 100000, &peers)))
            return rumor_fail(err, RUMOR_EFORMAT, "%s: bad train.rank/train.peers metadata", path);
        if (!given->partition) {
            c->partitioned = has;
            if (has) {
                if ((rc = rumor_partition_parse(&c->partition, part, err)) != RUMOR_OK) return rc;
                c->rank = (int)rank, c->peers = (int)peers;
            }
        } else if (strcmp(mine, part) != 0 || (has && (c->rank != rank || c->peers != peers))) {
            return MISMATCH("--partition", "%s", mine, part);
        }
    }
#undef MISMATCH
    /* Hyperparameters may change on purpose (a lower rate to finish); say what that means. */
    if (rumor_ckpt_extra_long(&info, "train.epochs", 1, 100000, &v) && !given->epochs) c->epochs = (int)v;
    float f;
    bool changed = false;
    if (meta_float(&info, "train.lr", &f)) {
        if (!given->lr) c->opt.lr = f;
        else changed |= f != c->opt.lr;
    }
    if (meta_float(&info, "train.momentum", &f)) {
        if (!given->momentum) c->opt.momentum = f;
        else changed |= f != c->opt.momentum;
    }
    if (meta_float(&info, "train.weight_decay", &f)) {
        if (!given->weight_decay) c->opt.weight_decay = f;
        else changed |= f != c->opt.weight_decay;
    }
    if (rumor_ckpt_extra_long(&info, "train.nesterov", 0, 1, &v)) {
        if (!given->nesterov) c->opt.nesterov = v == 1;
        else changed |= c->opt.nesterov != (v == 1);
    }
    const char *sched = rumor_ckpt_extra(&info, "train.schedule");
    if (sched) {
        char mine[64];
        rumor_schedule_format(mine, sizeof mine, &c->sched);
        long warmup = c->sched.warmup;
        if (!given->schedule) {
            if ((rc = rumor_schedule_parse(&c->sched, sched, err)) != RUMOR_OK) return rc;
            c->sched.warmup = warmup;
        } else {
            changed |= strcmp(mine, sched) != 0;
        }
    }
    if (rumor_ckpt_extra_long(&info, "train.warmup", 0, LONG_MAX, &v)) {
        if (!given->warmup) c->sched.warmup = v;
        else changed |= c->sched.warmup != v;
    }
    if (changed)
        rumor_log(RUMOR_LOG_WARN, "resuming %s with other hyperparameters than it started with: the run "
                  "will not match an uninterrupted one", path);
    return RUMOR_OK;
}

typedef struct {
    const rumor_train_config_t *cfg;
    rumor_model_t *m;
    rumor_optim_t *o;
    rumor_ckpt_info_t info;
    FILE *metrics;
    double t0;
    /* The epoch's and the log window's loss sums so far: a checkpoint keeps them, so that a
     * run resumed in the middle logs the very numbers a run never stopped would. */
    double loss_sum, window_loss;
    long loss_count, window_count;
} run_t;

static rumor_err_t save_checkpoint(run_t *r, int epochs_done, char err[RUMOR_ERR_LEN])
{
    if (!r->cfg->checkpoint_path) return RUMOR_OK;
    r->info.epoch = epochs_done;
    rumor_ckpt_info_t ck = r->info; /* the sums go in checkpoints only, not in exported models */
    rumor_ckpt_extra_add(&ck, "train.loss_sum", "%.17g", r->loss_sum);
    rumor_ckpt_extra_add(&ck, "train.loss_count", "%ld", r->loss_count);
    rumor_ckpt_extra_add(&ck, "train.window_loss", "%.17g", r->window_loss);
    rumor_ckpt_extra_add(&ck, "train.window_count", "%ld", r->window_count);
    return rumor_checkpoint_save(r->cfg->checkpoint_path, r->m, r->o, &ck, err);
}

/* A checkpoint's loss sums, when it was written in the middle of an epoch (at an epoch's end
 * the next one starts from zero anyway). */
static void restore_sums(run_t *r, const rumor_ckpt_info_t *resume)
{
    const char *ls = rumor_ckpt_extra(resume, "train.loss_sum"), *wl = rumor_ckpt_extra(resume, "train.window_loss");
    long lc, wc;
    if (!ls || !wl || !rumor_ckpt_extra_long(resume, "train.loss_count", 0, LONG_MAX, &lc) ||
        !rumor_ckpt_extra_long(resume, "train.window_count", 0, LONG_MAX, &wc))
        return;
    const double a = strtod(ls, NULL), b = strtod(wl, NULL);
    if (!isfinite(a) || !isfinite(b)) return;
    r->loss_sum = a, r->loss_count = lc, r->window_loss = b, r->window_count = wc;
}

rumor_err_t rumor_train_run(const rumor_train_config_t *cfg, rumor_train_result_t *res,
                            char err[RUMOR_ERR_LEN])
{
    rumor_dataset_t train = {0}, test = {0};
    rumor_backend_t *be = NULL;
    run_t r = {.cfg = cfg};
    size_t *perm = NULL, *own = NULL;
    stage_t stage = {0};
    double *epoch_rates = NULL;
    rumor_err_t rc;
    rumor_model_spec_t spec = cfg->spec;
    rumor_ckpt_info_t resume = {0};

    memset(res, 0, sizeof *res);
    res->test_acc = res->test_loss = NAN;
    stop_requested = 0;
    if (cfg->epochs < 1 || cfg->epochs > 100000)
        return rumor_fail(err, RUMOR_EINVAL, "--epochs %d: expected 1..100000", cfg->epochs);
    if (cfg->batch < 1 || cfg->batch > 65536)
        return rumor_fail(err, RUMOR_EINVAL, "--batch %d: expected 1..65536", cfg->batch);
    if ((rc = rumor_optim_config_check(&cfg->opt, err)) != RUMOR_OK) return rc;

    /* The checkpoint names the model when the user does not. */
    if (cfg->resume_path) {
        rumor_model_spec_t file_spec;
        rumor_model_input_t file_in;
        if ((rc = rumor_checkpoint_peek(cfg->resume_path, &file_spec, &file_in, &resume, err)) != RUMOR_OK)
            return rc;
        if (!resume.has_optim)
            return rumor_fail(err, RUMOR_EINVAL, "%s: an exported model, not a checkpoint (no optimizer state); write checkpoints with --checkpoint",
                              cfg->resume_path);
        if (!cfg->spec_set) spec = file_spec;
        if (resume.seed != cfg->seed)
            return rumor_fail(err, RUMOR_EINVAL, "%s: made with seed %llu, resumed with seed %llu",
                              cfg->resume_path, (unsigned long long)resume.seed,
                              (unsigned long long)cfg->seed);
    } else if (!cfg->spec_set) {
        rc = rumor_model_spec_parse(&spec, "mlp:256,128", err);
        if (rc != RUMOR_OK) return rc;
    }

    if ((rc = rumor_data_load_dir(&train, cfg->eval ? &test : NULL, cfg->data_dir, err)) != RUMOR_OK)
        goto out;
    float mean, std;
    rumor_data_stats(&train, &mean, &std);
    if (cfg->limit && cfg->limit < train.count) train.count = cfg->limit;
    if (cfg->resume_path) mean = resume.input_mean, std = resume.input_std;
    r.info.input_mean = mean;
    r.info.input_std = std;
    r.info.seed = cfg->seed;

    be = cfg->backend_ops ? rumor_backend_open(cfg->backend_ops, cfg->threads, err)
                          : rumor_backend_new(cfg->device, cfg->threads, err);
    if (!be) {
        rc = RUMOR_EINVAL;
        goto out;
    }
    const int max_batch = cfg->batch > EVAL_BATCH ? cfg->batch : EVAL_BATCH;
    const rumor_model_input_t in = {1, (int)train.rows, (int)train.cols, RUMOR_DATA_CLASSES};
    if (!(r.m = rumor_model_new(&spec, in, be, max_batch, err))) {
        rc = RUMOR_EINVAL;
        goto out;
    }
    if (!(r.o = rumor_optim_new(&cfg->opt, be, rumor_model_param_count(r.m), err))) {
        rc = RUMOR_ENOMEM;
        goto out;
    }
    if (cfg->resume_path)
        rc = rumor_checkpoint_load(cfg->resume_path, r.m, r.o, NULL, err);
    else
        rc = rumor_model_init(r.m, cfg->seed);
    if (rc != RUMOR_OK) goto out;

    /* The samples this run trains on: all of them, or one peer's shard. */
    size_t n = train.count;
    if (cfg->partitioned) {
        rc = rumor_partition_indices(&own, &n, &cfg->partition, train.labels, train.count, cfg->seed,
                                     cfg->rank, cfg->peers, err);
        if (rc != RUMOR_OK) goto out;
        if (n == 0) {
            rc = rumor_fail(err, RUMOR_EINVAL, "peer %d of %d owns no samples under this partition",
                            cfg->rank, cfg->peers);
            goto out;
        }
    }
    const size_t feat = train.rows * train.cols;
    settings_to_meta(&r.info, cfg, n);
    const long spe = (long)((n + (size_t)cfg->batch - 1) / (size_t)cfg->batch);
    const long total = spe * cfg->epochs;
    long step = rumor_optim_steps(r.o);
    const long resumed_step = step;
    if (cfg->resume_path) {
        /* The step count means something only for the same batch and the same samples. */
        long was_batch, was_samples;
        if ((rumor_ckpt_extra_long(&resume, "train.batch", 1, 65536, &was_batch) && was_batch != cfg->batch) ||
            (rumor_ckpt_extra_long(&resume, "train.samples", 0, LONG_MAX, &was_samples) && (size_t)was_samples != n) ||
            step / spe > resume.epoch || resume.epoch > step / spe + 1) {
            rc = rumor_fail(err, RUMOR_EINVAL,
                            "%s: the checkpoint's step %ld does not fit batch %d over %zu samples: resume with the batch, --limit and --partition it was made with",
                            cfg->resume_path, step, cfg->batch, n);
            goto out;
        }
    }
    if (step > total) {
        rc = rumor_fail(err, RUMOR_EINVAL, "%s: already %ld steps in, past the %ld steps of %d epochs",
                        cfg->resume_path, step, total, cfg->epochs);
        goto out;
    }
    perm = malloc(n * sizeof *perm);
    epoch_rates = calloc((size_t)cfg->epochs, sizeof *epoch_rates);
    if (!perm || !epoch_rates) {
        rc = rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = stage_init(&stage, r.m, feat, err)) != RUMOR_OK) goto out;
    if (cfg->metrics_path && cfg->resume_path &&
        (rc = rumor_trim_lines(cfg->metrics_path, "step", (uint64_t)step, err)) != RUMOR_OK)
        goto out;
    if (cfg->metrics_path) {
        r.metrics = rumor_fopen_private(cfg->metrics_path, cfg->resume_path != NULL);
        if (!r.metrics) {
            rc = rumor_fail(err, RUMOR_EIO, "%s: %s", cfg->metrics_path, strerror(errno));
            goto out;
        }
    }

    const double flops = rumor_model_flops(r.m, true);
    const int isatty_progress = cfg->progress;
    r.t0 = rumor_now();
    int n_rates = 0;
    double last_draw = 0.0, last_plain = r.t0;

    for (int epoch = (int)(step / spe); epoch < cfg->epochs; epoch++) {
        rumor_train_epoch_order(perm, own, n, cfg->seed, epoch);
        long first = step - (long)epoch * spe;
        r.loss_sum = r.window_loss = 0.0;
        r.loss_count = r.window_count = 0;
        if (cfg->resume_path && first > 0 && step == resumed_step) restore_sums(&r, &resume);
        const long counted_before = r.loss_count; /* samples of this epoch done before a resume */
        const double te0 = rumor_now();
        double t_excluded = 0.0;
        bool staged = false; /* the batch of step s is already put */
        for (long s = first; s < spe; s++) {
            if (cfg->max_steps > 0 && step >= cfg->max_steps) {
                stop_requested = 1;
                break;
            }
            const size_t start = (size_t)s * (size_t)cfg->batch;
            const size_t bn = n - start < (size_t)cfg->batch ? n - start : (size_t)cfg->batch;
            if (!staged) stage_put(&stage, &train, perm + start, bn, mean, std);
            stage_take(&stage);
            double bl = 0.0;
            long hits = 0;
            if ((rc = rumor_model_queue(r.m, (int)bn, true, &bl, &hits, err)) != RUMOR_OK) goto out;
            float lr = rumor_schedule_lr(&cfg->sched, cfg->opt.lr, step, total, spe);
            rumor_optim_step(r.o, rumor_model_params(r.m), rumor_model_grads(r.m), lr);
            /* The next batch is gathered (and on a device uploaded) while this one computes. */
            staged = s + 1 < spe && !(cfg->max_steps > 0 && step + 1 >= cfg->max_steps);
            if (staged) {
                const size_t next = start + (size_t)cfg->batch;
                stage_put(&stage, &train, perm + next, n - next < (size_t)cfg->batch ? n - next : (size_t)cfg->batch,
                          mean, std);
            }
            if ((rc = be->ops->sync(be, err)) != RUMOR_OK) goto out;
            if (!isfinite(bl)) {
                rc = rumor_fail(err, RUMOR_EINVAL, "training diverged at step %ld (loss %g): lower --lr",
                                step, bl);
                goto out;
            }
            step++;
            r.loss_sum += bl;
            r.loss_count += (long)bn;
            r.window_loss += bl;
            r.window_count += (long)bn;

            const double now = rumor_now();
            if (cfg->log_every > 0 && r.metrics && step % cfg->log_every == 0) {
                fprintf(r.metrics, "{\"t\":%.3f,\"epoch\":%d,\"step\":%ld,\"loss\":%.6f,\"lr\":%.6g}\n",
                        now - r.t0, epoch + 1, step, r.window_loss / (double)r.window_count, (double)lr);
                fflush(r.metrics);
                r.window_loss = 0.0, r.window_count = 0;
            }
            const double done_frac = (double)(s + 1 - first) / (double)(spe - first);
            const double elapsed = now - te0 - t_excluded;
            const double rate = (double)(r.loss_count - counted_before) / (elapsed > 0 ? elapsed : 1e-9);
            const double eta = (double)(total - step) * (double)cfg->batch / rate;
            char eta_s[32];
            if (isatty_progress && now - last_draw > 0.1) {
                char bar[21];
                int filled = (int)(done_frac * 20);
                for (int i = 0; i < 20; i++) bar[i] = i < filled ? '=' : (i == filled ? '>' : ' ');
                bar[20] = 0;
                format_eta(eta_s, sizeof eta_s, eta);
                fprintf(stderr, "\r\033[Kepoch %d/%d [%s] step %ld/%ld loss %.4f %.0f samples/s ETA %s",
                        epoch + 1, cfg->epochs, bar, step, total, r.loss_sum / (double)r.loss_count, rate,
                        eta_s);
                fflush(stderr);
                last_draw = now;
            } else if (!isatty_progress && cfg->print_epochs && now - last_plain >= 10.0) {
                format_eta(eta_s, sizeof eta_s, eta);
                fprintf(stderr, "epoch %d/%d step %ld/%ld loss %.4f %.0f samples/s ETA %s\n", epoch + 1,
                        cfg->epochs, step, total, r.loss_sum / (double)r.loss_count, rate, eta_s);
                last_plain = now;
            }
            if (cfg->checkpoint_every > 0 && step % cfg->checkpoint_every == 0 && s + 1 < spe) {
                const double tc = rumor_now();
                if ((rc = save_checkpoint(&r, epoch, err)) != RUMOR_OK) goto out;
                t_excluded += rumor_now() - tc;
            }
            if (stop_requested) break;
        }
        const double epoch_s = rumor_now() - te0 - t_excluded;
        res->train_seconds += epoch_s;
        if (r.loss_count > 0) {
            epoch_rates[n_rates++] = (double)(r.loss_count - counted_before) / epoch_s;
            res->train_loss = r.loss_sum / (double)r.loss_count;
        }
        if (isatty_progress) fprintf(stderr, "\r\033[K");
        if (stop_requested && step < (long)(epoch + 1) * spe) {
            res->interrupted = true;
            if ((rc = save_checkpoint(&r, epoch, err)) != RUMOR_OK) goto out;
            break;
        }
        res->epochs_done = epoch + 1;
        if (cfg->eval) {
            rc = rumor_train_evaluate(r.m, &test, mean, std, &res->test_loss, &res->test_acc, err);
            if (rc != RUMOR_OK) goto out;
        }
        const double rate = r.loss_count > counted_before ? (double)(r.loss_count - counted_before) / epoch_s : 0.0;
        if (r.metrics) {
            fprintf(r.metrics, "{\"t\":%.3f,\"epoch\":%d,\"step\":%ld,\"loss\":%.6f", rumor_now() - r.t0,
                    epoch + 1, step, res->train_loss);
            if (cfg->eval)
                fprintf(r.metrics, ",\"test_loss\":%.6f,\"test_acc\":%.4f", res->test_loss, res->test_acc);
            fprintf(r.metrics, ",\"samples_per_s\":%.1f}\n", rate);
            fflush(r.metrics);
        }
        if (cfg->print_epochs) {
            printf("epoch %d/%d loss %.4f", epoch + 1, cfg->epochs, res->train_loss);
            if (cfg->eval) printf(" test_acc %.4f", res->test_acc);
            printf(" %.2fs %.0f samples/s\n", epoch_s, rate);
            fflush(stdout);
        }
        if ((rc = save_checkpoint(&r, epoch + 1, err)) != RUMOR_OK) goto out;
        if (stop_requested) {
            res->interrupted = epoch + 1 < cfg->epochs;
            break;
        }
    }
    res->steps = step;
    if (n_rates > 0) {
        res->samples_per_s = rumor_median(epoch_rates, (size_t)n_rates);
        res->gflops = res->samples_per_s * flops * 1e-9;
    }
    if (cfg->save_path && !res->interrupted)
        rc = rumor_checkpoint_save(cfg->save_path, r.m, NULL, &r.info, err);
out:
    if (r.metrics) fclose(r.metrics);
    free(perm);
    free(own);
    stage_fini(&stage);
    free(epoch_rates);
    rumor_optim_destroy(&r.o);
    rumor_model_destroy(&r.m);
    rumor_backend_destroy(&be);
    rumor_dataset_fini(&train);
    rumor_dataset_fini(&test);
    return rc;
}
