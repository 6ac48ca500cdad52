/* train.c - the training loop. */
#include "train.h"

#include "source.h"
#include "trainer.h"

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
    c->eval = true;
}

/* Put samples idx[0..n) into the model's input buffers. */
void rumor_train_load_batch(rumor_model_t *m, const rumor_dataset_t *ds, const size_t *idx, size_t n,
                       float mean, float std, float *stage_x, int32_t *stage_y)
{
    rumor_backend_t *be = rumor_model_backend(m);
    if (be->ops->host_memory) {
        rumor_data_gather(ds, idx, n, mean, std, rumor_model_input_buf(m), rumor_model_label_buf(m));
        return;
    }
    const size_t feat = rumor_data_feat(ds);
    rumor_data_gather(ds, idx, n, mean, std, stage_x, stage_y);
    be->ops->upload(be, rumor_model_input_buf(m), stage_x, n * feat * sizeof(float));
    be->ops->upload(be, rumor_model_label_buf(m), stage_y, n * sizeof *stage_y);
}

rumor_err_t rumor_train_evaluate(rumor_model_t *m, const rumor_dataset_t *ds, float mean,
                                 float std, double *loss, double *acc, char err[RUMOR_ERR_LEN])
{
    const size_t B = (size_t)rumor_model_max_batch(m), feat = rumor_data_feat(ds);
    size_t *idx = malloc(B * sizeof *idx);
    float *sx = malloc(B * feat * sizeof *sx);
    int32_t *sy = malloc(B * sizeof *sy);
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

typedef struct {
    const rumor_train_config_t *cfg;
    rumor_model_t *m;
    rumor_optim_t *o;
    rumor_checkpoint_info_t info;
    FILE *metrics;
    double t0;
    /* The epoch's and the log window's loss sums so far: a checkpoint keeps them, so that a
     * run resumed in the middle logs the very numbers a run never stopped would. */
    double loss_sum, window_loss;
    long loss_count, window_count;
    int epochs;               /* the run's: --epochs, or enough for --steps */
    bool text;                /* a language model: its figures are per token, on validation text */
    bool max_steps;           /* --max-steps were done */
} run_t;

static rumor_err_t save_checkpoint(run_t *r, int epochs_done, char err[RUMOR_ERR_LEN])
{
    if (!r->cfg->checkpoint_path) return RUMOR_OK;
    r->info.epoch = epochs_done;
    rumor_checkpoint_info_t ck = r->info; /* the sums go in checkpoints only, not in exported models */
    rumor_checkpoint_extra_add(&ck, "train.loss_sum", "%.17g", r->loss_sum);
    rumor_checkpoint_extra_add(&ck, "train.loss_count", "%ld", r->loss_count);
    rumor_checkpoint_extra_add(&ck, "train.window_loss", "%.17g", r->window_loss);
    rumor_checkpoint_extra_add(&ck, "train.window_count", "%ld", r->window_count);
    return rumor_checkpoint_save(r->cfg->checkpoint_path, r->m, r->o, &ck, err);
}

/* A checkpoint's loss sums, when it was written in the middle of an epoch (at an epoch's end
 * the next one starts from zero anyway). */
static void restore_sums(run_t *r, const rumor_checkpoint_info_t *resume)
{
    const char *ls = rumor_checkpoint_extra(resume, "train.loss_sum"), *wl = rumor_checkpoint_extra(resume, "train.window_loss");
    long lc, wc;
    if (!ls || !wl || !rumor_checkpoint_extra_long(resume, "train.loss_count", 0, LONG_MAX, &lc) ||
        !rumor_checkpoint_extra_long(resume, "train.window_count", 0, LONG_MAX, &wc))
        return;
    const double a = strtod(ls, NULL), b = strtod(wl, NULL);
    if (!isfinite(a) || !isfinite(b)) return;
    r->loss_sum = a, r->loss_count = lc, r->window_loss = b, r->window_count = wc;
}

/* The model to train: the checkpoint's when resuming and the user names none (whose
 * optimizer state and seed must fit), else the default. */
static rumor_err_t resolve_model(const rumor_train_config_t *cfg, rumor_model_spec_t *spec,
                                 rumor_checkpoint_info_t *resume, char err[RUMOR_ERR_LEN])
{
    if (!cfg->resume_path) return cfg->spec_set ? RUMOR_OK : rumor_model_spec_parse(spec, "mlp:256,128", err);
    rumor_model_spec_t file_spec;
    rumor_model_input_t file_in;
    rumor_err_t rc = rumor_checkpoint_peek(cfg->resume_path, &file_spec, &file_in, resume, err);
    if (rc != RUMOR_OK) return rc;
    if (!resume->has_optim)
        return rumor_fail(err, RUMOR_EINVAL, "%s: an exported model, not a checkpoint (no optimizer state); write "
                          "checkpoints with --checkpoint", cfg->resume_path);
    if (!cfg->spec_set) *spec = file_spec;
    if (resume->seed != cfg->seed)
        return rumor_fail(err, RUMOR_EINVAL, "%s: made with seed %llu, resumed with seed %llu", cfg->resume_path,
                          (unsigned long long)resume->seed, (unsigned long long)cfg->seed);
    return RUMOR_OK;
}

/* Where an epoch stands (epoch_steps). */
typedef struct {
    int epoch;
    long first, spe, total;   /* its first step (a resumed one may start inside), per epoch, in all */
    long end;                 /* its steps end here: spe, or fewer in a run of --steps */
    double te0;               /* when it began */
    long counted_before;      /* samples of it done before a resume */
} epoch_t;

/* The steps of one epoch from ep->first, each logged, told, and checkpointed when due; stops
 * early at --max-steps or when asked (*halt). *step counts them, *t_excluded the time spent
 * writing checkpoints. */
static rumor_err_t epoch_steps(run_t *r, rumor_trainer_t *tr, const epoch_t *ep, long *step, double *t_excluded,
                               bool *halt, char err[RUMOR_ERR_LEN])
{
    const rumor_train_config_t *cfg = r->cfg;
    rumor_err_t rc;
    for (long s = ep->first; s < ep->end; s++) {
        if (cfg->max_steps > 0 && *step >= cfg->max_steps) {
            *halt = r->max_steps = true;
            break;
        }
        rumor_trainer_stats_t ts;
        if ((rc = rumor_trainer_steps(tr, 1, *step, &ts, err)) != RUMOR_OK) return rc;
        ++*step;
        r->loss_sum += ts.loss_sum;
        r->loss_count += ts.samples;
        r->window_loss += ts.loss_sum;
        r->window_count += ts.samples;
        const double now = rumor_now();
        if (cfg->log_every > 0 && r->metrics && *step % cfg->log_every == 0) {
            fprintf(r->metrics, "{\"t\":%.3f,\"epoch\":%d,\"step\":%ld,\"loss\":%.6f,\"lr\":%.6g}\n", now - r->t0,
                    ep->epoch + 1, *step, r->window_loss / (double)r->window_count, (double)ts.lr);
            fflush(r->metrics);
            r->window_loss = 0.0, r->window_count = 0;
        }
        if (cfg->progress) {
            const double elapsed = now - ep->te0 - *t_excluded;
            const double rate = (double)(r->loss_count - ep->counted_before) / (elapsed > 0 ? elapsed : 1e-9);
            const rumor_train_progress_t pr = {.epoch = ep->epoch + 1, .epochs = r->epochs, .step = *step,
                                               .total = ep->total,
                                               .epoch_done = (double)(s + 1 - ep->first) / (double)(ep->end - ep->first),
                                               .loss = r->loss_sum / (double)r->loss_count, .samples_per_s = rate,
                                               .text = r->text,
                                               /* remaining steps at the predictions a step made so far */
                                               .eta_s = (double)(ep->total - *step) * (double)(r->loss_count - ep->counted_before) /
                                                        (double)(s + 1 - ep->first) / rate};
            cfg->progress(cfg->progress_arg, &pr);
        }
        if (cfg->checkpoint_every > 0 && *step % cfg->checkpoint_every == 0 && s + 1 < ep->end) {
            const double tc = rumor_now();
            if ((rc = save_checkpoint(r, ep->epoch, err)) != RUMOR_OK) return rc;
            *t_excluded += rumor_now() - tc;
        }
        if ((*halt = *halt || rumor_asked(cfg->stop))) break;
    }
    return RUMOR_OK;
}

/* A resumed step count means something only for the same batch and the same samples, and
 * within the run's epochs. */
static rumor_err_t resume_fits(const rumor_train_config_t *cfg, const rumor_checkpoint_info_t *resume, long step,
                               long spe, long total, size_t n, char err[RUMOR_ERR_LEN])
{
    long was_batch, was_samples;
    if ((rumor_checkpoint_extra_long(resume, "train.batch", 1, 65536, &was_batch) && was_batch != cfg->batch) ||
        (rumor_checkpoint_extra_long(resume, "train.samples", 0, LONG_MAX, &was_samples) &&
         (size_t)was_samples != n) ||
        step / spe > resume->epoch || resume->epoch > step / spe + 1)
        return rumor_fail(err, RUMOR_EINVAL, "%s: the checkpoint's step %ld does not fit batch %d over %zu samples: "
                          "resume with the batch, --limit and --partition it was made with",
                          cfg->resume_path, step, cfg->batch, n);
    if (step > total)
        return rumor_fail(err, RUMOR_EINVAL, "%s: already %ld steps in, past the run's %ld steps", cfg->resume_path,
                          step, total);
    return RUMOR_OK;
}

/* An epoch is over: its metrics line, and what the caller is told. */
static void epoch_done(run_t *r, const epoch_t *ep, long step, double epoch_s, const rumor_train_result_t *res)
{
    const rumor_train_config_t *cfg = r->cfg;
    const double rate =
        r->loss_count > ep->counted_before ? (double)(r->loss_count - ep->counted_before) / epoch_s : 0.0;
    if (r->metrics) {
        fprintf(r->metrics, "{\"t\":%.3f,\"epoch\":%d,\"step\":%ld,\"loss\":%.6f", rumor_now() - r->t0,
                ep->epoch + 1, step, res->train_loss);
        if (cfg->eval)
            fprintf(r->metrics, r->text ? ",\"val_loss\":%.6f,\"val_acc\":%.4f" : ",\"test_loss\":%.6f,\"test_acc\":%.4f",
                    res->test_loss, res->test_acc);
        fprintf(r->metrics, r->text ? ",\"tokens_per_s\":%.1f}\n" : ",\"samples_per_s\":%.1f}\n", rate);
        fflush(r->metrics);
    }
    if (cfg->progress) {
        const rumor_train_progress_t pr = {.epoch = ep->epoch + 1, .epochs = r->epochs, .step = step,
                                           .total = ep->total, .epoch_done = 1.0, .loss = res->train_loss,
                                           .samples_per_s = rate, .epoch_end = true, .epoch_s = epoch_s,
                                           .evaluated = cfg->eval, .test_acc = res->test_acc, .text = r->text,
                                           .test_loss = res->test_loss};
        cfg->progress(cfg->progress_arg, &pr);
    }
}

/* The metrics file: a resumed run's cut back to its checkpoint's step (it would log the
 * steps after it again), and appended to. */
static rumor_err_t open_metrics(run_t *r, long step, char err[RUMOR_ERR_LEN])
{
    const rumor_train_config_t *cfg = r->cfg;
    rumor_err_t rc;
    if (cfg->resume_path && (rc = rumor_trim_lines(cfg->metrics_path, "step", (uint64_t)step, err)) != RUMOR_OK)
        return rc;
    r->metrics = rumor_fopen_private(cfg->metrics_path, cfg->resume_path != NULL);
    return r->metrics ? RUMOR_OK : rumor_fail(err, RUMOR_EIO, "%s: %s", cfg->metrics_path, strerror(errno));
}

/* The backend, the model and its optimizer, from the checkpoint resumed or initialised from
 * the seed. */
static rumor_err_t make_model(const rumor_train_config_t *cfg, const rumor_source_t *src, const rumor_model_spec_t *spec,
                              rumor_backend_t **be, run_t *r, char err[RUMOR_ERR_LEN])
{
    *be = cfg->backend_ops ? rumor_backend_open(cfg->backend_ops, cfg->threads, err)
                           : rumor_backend_new(cfg->device, cfg->threads, err);
    if (!*be) return rumor_last_error();
    /* Images are evaluated in batches of EVAL_BATCH; text in the training batch's windows. */
    const int max_batch = src->text || cfg->batch > EVAL_BATCH ? cfg->batch : EVAL_BATCH;
    if (!(r->m = rumor_model_new(spec, rumor_source_input(src, spec), *be, max_batch, err))) return rumor_last_error();
    if (!(r->o = rumor_optim_new(&cfg->opt, *be, rumor_model_param_count(r->m), err))) return rumor_last_error();
    if (!cfg->resume_path) return rumor_model_init(r->m, cfg->seed);
    rumor_clean_stale_temps(cfg->resume_path); /* what a killed write of it left, whatever writes it next */
    return rumor_checkpoint_load(cfg->resume_path, r->m, r->o, NULL, err);
}

rumor_err_t rumor_train_run(const rumor_train_config_t *cfg, rumor_train_result_t *res,
                            char err[RUMOR_ERR_LEN])
{
    rumor_source_t src = {0};
    rumor_backend_t *be = NULL;
    run_t r = {.cfg = cfg};
    rumor_trainer_t *tr = NULL;
    double *epoch_rates = NULL;
    rumor_err_t rc;
    rumor_model_spec_t spec = cfg->spec;
    rumor_checkpoint_info_t resume = {0};
    bool halt = false; /* stop at the end of this step: asked to, or --max-steps reached */

    memset(res, 0, sizeof *res);
    res->test_acc = res->test_loss = NAN;
    if (cfg->epochs < 0 || cfg->epochs > 100000)
        return rumor_fail(err, RUMOR_EINVAL, "--epochs %d: expected 0..100000", cfg->epochs);
    if (cfg->batch < 1 || cfg->batch > 65536)
        return rumor_fail(err, RUMOR_EINVAL, "--batch %d: expected 1..65536", cfg->batch);
    if (cfg->steps < 0) return rumor_fail(err, RUMOR_EINVAL, "--steps %ld: expected 0 or more", cfg->steps);
    if ((rc = rumor_optim_config_check(&cfg->opt, err)) != RUMOR_OK) return rc;

    if ((rc = resolve_model(cfg, &spec, &resume, err)) != RUMOR_OK) return rc;

    /* What it learns from: all of the training split, or one peer's shard. */
    const rumor_source_config_t sc = {.dir = cfg->data_dir, .spec = &spec, .vocab = cfg->vocab, .limit = cfg->limit,
                                      .partition = cfg->partitioned ? &cfg->partition : NULL, .rank = cfg->rank,
                                      .peers = cfg->peers, .seed = cfg->seed, .eval = cfg->eval};
    if ((rc = rumor_source_load(&src, &sc, err)) != RUMOR_OK) goto out;
    r.text = res->text = src.text;
    r.info.input_mean = cfg->resume_path ? resume.input_mean : src.mean;
    r.info.input_std = cfg->resume_path ? resume.input_std : src.std;
    r.info.seed = cfg->seed;

    if ((rc = make_model(cfg, &src, &spec, &be, &r, err)) != RUMOR_OK) goto out;

    rumor_trainer_config_t trc = {.batch = cfg->batch, .seed = cfg->seed, .sched = cfg->sched, .lr = cfg->opt.lr,
                                  .clip_grad = cfg->clip_grad};
    rumor_source_trainer(&src, NULL, &trc);
    /* An epoch is a pass over the shard's samples (text: as many tokens as it holds); the run is
     * --steps long, or --epochs of them. */
    const long per_epoch = rumor_trainer_epoch_steps(&trc);
    const long total = cfg->steps > 0 ? cfg->steps : per_epoch * cfg->epochs;
    trc.total_steps = total;
    r.epochs = (int)((total + per_epoch - 1) / per_epoch);
    if (!(tr = rumor_trainer_new(&trc, r.m, r.o, err))) {
        rc = rumor_last_error();
        goto out;
    }
    /* The settings it was made with, then what this run needs to know of its own steps. */
    for (int i = 0; i < cfg->n_settings; i++)
        rumor_checkpoint_extra_add(&r.info, cfg->settings[i].key, "%s", cfg->settings[i].value);
    rumor_checkpoint_extra_add(&r.info, "train.batch", "%d", cfg->batch);
    rumor_checkpoint_extra_add(&r.info, "train.samples", "%zu", src.shard.n);
    long step = rumor_optim_steps(r.o);
    const long resumed_step = step;
    if (cfg->resume_path && (rc = resume_fits(cfg, &resume, step, per_epoch, total, src.shard.n, err)) != RUMOR_OK) goto out;
    epoch_rates = calloc((size_t)r.epochs + 1, sizeof *epoch_rates); /* (+1: --epochs 0 trains none) */
    if (!epoch_rates) {
        rc = rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        goto out;
    }
    if (cfg->metrics_path && (rc = open_metrics(&r, step, err)) != RUMOR_OK) goto out;

    const double flops = rumor_model_flops(r.m, true);
    r.t0 = rumor_now();
    int n_rates = 0;

    for (int epoch = (int)(step / per_epoch); epoch < r.epochs; epoch++) {
        long first = step - (long)epoch * per_epoch;
        const long end = total - (long)epoch * per_epoch < per_epoch ? total - (long)epoch * per_epoch : per_epoch;
        r.loss_sum = r.window_loss = 0.0;
        r.loss_count = r.window_count = 0;
        if (cfg->resume_path && first > 0 && step == resumed_step) restore_sums(&r, &resume);
        const long counted_before = r.loss_count; /* samples of this epoch done before a resume */
        const double te0 = rumor_now();
        double t_excluded = 0.0;
        const epoch_t ep = {.epoch = epoch, .first = first, .spe = per_epoch, .end = end, .total = total, .te0 = te0,
                            .counted_before = counted_before};
        if ((rc = epoch_steps(&r, tr, &ep, &step, &t_excluded, &halt, err)) != RUMOR_OK) goto out;
        const double epoch_s = rumor_now() - te0 - t_excluded;
        res->train_seconds += epoch_s;
        if (r.loss_count > 0) {
            epoch_rates[n_rates++] = (double)(r.loss_count - counted_before) / epoch_s;
            res->train_loss = r.loss_sum / (double)r.loss_count;
        }
        if ((halt = halt || rumor_asked(cfg->stop)) && step < (long)epoch * per_epoch + end) {
            res->interrupted = true;
            if ((rc = save_checkpoint(&r, epoch, err)) != RUMOR_OK) goto out;
            break;
        }
        res->epochs_done = epoch + 1;
        if (cfg->eval && (rc = rumor_source_evaluate(&src, r.m, &res->test_loss, &res->test_acc, err)) != RUMOR_OK)
            goto out;
        epoch_done(&r, &ep, step, epoch_s, res);
        if ((rc = save_checkpoint(&r, epoch + 1, err)) != RUMOR_OK) goto out;
        if ((halt = halt || rumor_asked(cfg->stop))) {
            res->interrupted = epoch + 1 < r.epochs;
            break;
        }
    }
    res->steps = step;
    res->max_steps = res->interrupted && r.max_steps;
    if (n_rates > 0) {
        res->samples_per_s = rumor_median(epoch_rates, (size_t)n_rates);
        /* flops are per sample; a text rate is in tokens, T a sample */
        res->gflops = res->samples_per_s * flops * 1e-9 / (src.text ? spec.ctx : 1);
    }
    if (cfg->save_path && !res->interrupted)
        rc = rumor_checkpoint_save(cfg->save_path, r.m, NULL, &r.info, err);
out:
    if (r.metrics) fclose(r.metrics);
    rumor_trainer_destroy(&tr);
    free(epoch_rates);
    rumor_optim_destroy(&r.o);
    rumor_model_destroy(&r.m);
    rumor_backend_destroy(&be);
    rumor_source_fini(&src);
    return rc;
}
