/* cli_train.c - `rumor train` and `rumor eval`. */
#include "backend.h"
#include "checkpoint.h"
#include "cli.h"
#include "config.h"
#include "data.h"
#include "model.h"
#include "source.h"
#include "train.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* What `rumor train` shows: on a terminal a live bar on stderr, redrawn at most ten times a
 * second; otherwise a line every 10 s; and a line per epoch on stdout. */
typedef struct {
    bool tty;
    double last_draw, last_plain;
} progress_t;

static void format_eta(char *buf, size_t len, double s)
{
    if (!isfinite(s) || s < 0) s = 0;
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, len, "%ld:%02ld", t / 60, t % 60);
}

static void show_progress(void *arg, const rumor_train_progress_t *p)
{
    progress_t *g = arg;
    if (p->epoch_end) {
        if (g->tty) fprintf(stderr, "\r\033[K");
        printf("epoch %d/%d loss %.4f", p->epoch, p->epochs, p->loss);
        if (p->evaluated && p->text) printf(" val_loss %.4f", p->test_loss);
        else if (p->evaluated) printf(" test_acc %.4f", p->test_acc);
        printf(" %.2fs %.0f %s/s\n", p->epoch_s, p->samples_per_s, p->text ? "tokens" : "samples");
        fflush(stdout);
        return;
    }
    const double now = rumor_now();
    char eta[32];
    if (g->tty && now - g->last_draw > 0.1) {
        char bar[21];
        const int filled = (int)(p->epoch_done * 20);
        for (int i = 0; i < 20; i++) bar[i] = i < filled ? '=' : (i == filled ? '>' : ' ');
        bar[20] = 0;
        format_eta(eta, sizeof eta, p->eta_s);
        fprintf(stderr, "\r\033[Kepoch %d/%d [%s] step %ld/%ld loss %.4f %.0f %s/s ETA %s", p->epoch, p->epochs,
                bar, p->step, p->total, p->loss, p->samples_per_s, p->text ? "tokens" : "samples", eta);
        fflush(stderr);
        g->last_draw = now;
    } else if (!g->tty && now - g->last_plain >= 10.0) {
        format_eta(eta, sizeof eta, p->eta_s);
        fprintf(stderr, "epoch %d/%d step %ld/%ld loss %.4f %.0f %s/s ETA %s\n", p->epoch, p->epochs, p->step,
                p->total, p->loss, p->samples_per_s, p->text ? "tokens" : "samples", eta);
        g->last_plain = now;
    }
}

/* s (checked) as the trainer's configuration. */
static rumor_err_t train_config(const rumor_settings_t *s, rumor_train_config_t *cfg, char err[RUMOR_ERR_LEN])
{
    rumor_train_config_defaults(cfg);
    rumor_err_t rc = rumor_settings_learning(s, &cfg->spec, &cfg->opt, &cfg->sched, &cfg->partition, &cfg->partitioned, err);
    if (rc != RUMOR_OK) return rc;
    cfg->spec_set = true;
    cfg->data_dir = s->data;
    cfg->device = s->device;
    cfg->threads = s->threads;
    cfg->epochs = s->epochs;
    cfg->steps = s->steps;
    cfg->clip_grad = s->clip_grad;
    cfg->vocab = s->vocab;
    cfg->batch = s->batch;
    cfg->seed = s->seed;
    cfg->limit = (size_t)s->limit;
    cfg->rank = s->rank;
    cfg->peers = s->of;
    cfg->metrics_path = s->metrics[0] ? s->metrics : NULL;
    cfg->save_path = s->save[0] ? s->save : NULL;
    cfg->checkpoint_path = s->checkpoint[0] ? s->checkpoint : NULL;
    cfg->checkpoint_every = s->checkpoint_steps;
    cfg->resume_path = !s->resume ? NULL : s->resume_from[0] ? s->resume_from : s->checkpoint;
    /* A run resumed from a file lives there: it goes on writing its checkpoints to it. */
    if (!cfg->checkpoint_path && cfg->resume_path && cfg->resume_path[0]) cfg->checkpoint_path = cfg->resume_path;
    static rumor_st_meta_t recorded[RUMOR_CHECKPOINT_EXTRA];
    cfg->settings = recorded;
    cfg->n_settings = rumor_settings_record(s, RUMOR_CMD_TRAIN, recorded, RUMOR_CHECKPOINT_EXTRA);
    cfg->max_steps = s->max_steps;
    cfg->log_every = s->log_every;
    cfg->eval = s->eval;
    return RUMOR_OK;
}

int cmd_train(int argc, char **argv)
{
    static rumor_settings_t s; /* the configuration's strings point into it */
    rumor_settings_defaults(&s, RUMOR_CMD_TRAIN);
    char err[RUMOR_ERR_LEN];
    bool help;
    int n_pos;
    if (!rumor_settings_parse_args(&s, RUMOR_CMD_TRAIN, argc, argv, 2, NULL, 0, &n_pos, &help, err)) {
        cli_error("%s", err);
        return 2;
    }
    if (help) {
        printf("usage: rumor train [options]\n\n");
        rumor_settings_help(stdout, RUMOR_CMD_TRAIN);
        return 0;
    }
    /* A resumed run takes the settings it was made with from its checkpoint; a model's family
     * has defaults of its own (before and after: the checkpoint may name the model). */
    const char *from = s.resume_from[0] ? s.resume_from : s.checkpoint;
    rumor_err_t rc = RUMOR_OK;
    rumor_settings_family(&s, RUMOR_CMD_TRAIN);
    if (s.resume && *from && (rc = rumor_settings_resume(&s, RUMOR_CMD_TRAIN, from, err)) != RUMOR_OK) {
        cli_error("%s", err);
        return cli_exit_code(rc);
    }
    rumor_settings_family(&s, RUMOR_CMD_TRAIN);
    if (rumor_settings_check(&s, RUMOR_CMD_TRAIN, err) != RUMOR_OK) {
        cli_error("%s", err);
        return 2;
    }
    if (s.check) return cli_print_settings(&s, RUMOR_CMD_TRAIN);
    rumor_train_config_t cfg;
    if ((rc = train_config(&s, &cfg, err)) != RUMOR_OK) {
        cli_error("%s", err);
        return cli_exit_code(rc);
    }
    /* Find unwritable outputs now, not after hours of training; never start a new run over
     * an old checkpoint (that is what --resume is for). */
    if (cfg.checkpoint_path && !cfg.resume_path && access(cfg.checkpoint_path, F_OK) == 0) {
        cli_error("%s exists: continue that run with --resume %s, or remove it", cfg.checkpoint_path,
                  cfg.checkpoint_path);
        return 2;
    }
    const char *outputs[] = {cfg.save_path, cfg.checkpoint_path, cfg.metrics_path};
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(outputs); i++)
        if (outputs[i] && !cli_prepare_output(outputs[i], err)) {
            cli_error("%s", err);
            return 2;
        }
    progress_t pg = {.tty = isatty(STDERR_FILENO), .last_plain = rumor_now()};
    if (!s.quiet) cfg.progress = show_progress, cfg.progress_arg = &pg;

    cli_handle_stop_signals();
    cfg.stop = &cli_stop;
    rumor_train_result_t res;
    rc = rumor_train_run(&cfg, &res, err);
    if (rc != RUMOR_OK) {
        cli_error("%s", err);
        return cli_exit_code(rc);
    }
    if (res.interrupted) {
        /* --max-steps is a stop the user planned: a success for their scripts; a signal is not. */
        const char *why = res.max_steps ? " (--max-steps)" : "";
        if (cfg.checkpoint_path)
            fprintf(stderr, "rumor: stopped at step %ld%s; continue with --resume %s\n", res.steps, why,
                    cfg.checkpoint_path);
        else
            fprintf(stderr, "rumor: stopped at step %ld%s (no --checkpoint, nothing saved)\n", res.steps, why);
        return res.max_steps ? 0 : 130;
    }
    if (!s.quiet && res.steps == 0 && cfg.epochs == 0) {
        printf("done: no training (--epochs 0)\n");
        if (cfg.save_path) printf("saved the initial model (--seed %llu) to %s\n", (unsigned long long)cfg.seed,
                                  cfg.save_path);
    } else if (!s.quiet) {
        printf("done: %d epochs, %ld steps, %.1fs training, %.0f %s/s (%.1f GFLOP/s)", res.epochs_done, res.steps,
               res.train_seconds, res.samples_per_s, res.text ? "tokens" : "samples", res.gflops);
        if (cfg.eval && res.text) printf(", val_loss %.4f", res.test_loss);
        else if (cfg.eval) printf(", test_acc %.4f", res.test_acc);
        printf("\n");
        if (cfg.save_path) printf("saved %s\n", cfg.save_path);
    }
    return 0;
}

int cmd_eval(int argc, char **argv)
{
    const char *data_dir = NULL, *device = "cpu";
    int threads = 0;
    bool help = false, json = false;
    const cli_opt_t opts[] = {
        {"--data", OPT_STR, &data_dir, NULL,
         "the data (default " RUMOR_DEFAULT_DATA "; for gpt models " RUMOR_DEFAULT_TEXT ")"},
        {"--device", OPT_STR, &device, NULL, "cpu | cuda | auto (default cpu)"},
        {"--threads", OPT_INT, &threads, NULL, "compute threads (default: all cores)"},
        {"--json", OPT_FLAG, &json, NULL, "print one JSON object"},
        {"--help", OPT_FLAG, &help, NULL, "this help"},
    };
    const char *pos[1];
    const int done = cli_parse_model_file(argc, argv, opts, (int)RUMOR_ARRAY_LEN(opts),
                                          "usage: rumor eval MODEL.safetensors [options]\n\nA classifier's test "
                                          "accuracy and loss, or a gpt model's validation loss (nats per token over "
                                          "each document's last tenth).",
                                          "eval needs a model file: rumor eval MODEL.safetensors", pos);
    if (done >= 0) return done;
    if (threads < 0 || threads > 1024) {
        cli_error("--threads %d: expected 1..1024 (or 0 for all cores)", threads);
        return 2;
    }
    char err[RUMOR_ERR_LEN];
    rumor_model_spec_t spec;
    rumor_model_input_t in;
    rumor_checkpoint_info_t info;
    rumor_source_t src = {0};
    rumor_backend_t *be = NULL;
    rumor_model_t *m = NULL;
    double loss = 0, acc = 0;
    bool text = false;
    rumor_err_t rc = rumor_checkpoint_peek(pos[0], &spec, &in, &info, err);
    if (rc != RUMOR_OK) goto out;
    text = spec.kind == RUMOR_MODEL_GPT;
    /* A model of token ids is judged on its own token files: the folder it trained on. */
    const bool recorded = !data_dir && in.ids;
    if (recorded && !(data_dir = rumor_checkpoint_extra(&info, "train.data"))) {
        rc = rumor_fail(err, RUMOR_EINVAL, "%s: a model of token ids, and the file does not say which token files it "
                        "trained on: give them with --data DIR", pos[0]);
        goto out;
    }
    if (!data_dir) data_dir = text ? RUMOR_DEFAULT_TEXT : RUMOR_DEFAULT_DATA;
    const bool tokens = text && rumor_text_is_tokens(data_dir);
    /* a file from before models said whose tokens they read, of 256: the data says */
    if (text && !info.tokens_stated && in.classes == 256) in.ids = tokens;
    if (tokens != in.ids) {
        if (recorded)
            rc = rumor_fail(err, RUMOR_EINVAL, "%s: a model of token ids trained on %s (as its run named them), which "
                            "holds no token files here: give its token files with --data DIR", pos[0], data_dir);
        else
            rc = rumor_fail(err, RUMOR_ELAYOUT, "%s: a model of %s, and %s holds %s", pos[0],
                            in.ids ? "token ids" : "bytes", data_dir, in.ids ? "no token files (train.bin)" : "token files");
        goto out;
    }
    /* token files: the model's vocabulary; a corpus has its 256 */
    const rumor_source_config_t sc = {.dir = data_dir, .spec = &spec, .vocab = in.ids ? in.classes : 0, .eval = true};
    if ((rc = rumor_source_load(&src, &sc, err)) != RUMOR_OK) goto out;
    const rumor_model_input_t want = rumor_source_input(&src, &spec);
    if (want.c != in.c || want.h != in.h || want.w != in.w || want.classes != in.classes) {
        rc = rumor_fail(err, RUMOR_ELAYOUT, "%s: model takes %dx%dx%d inputs of %d classes, %s has %dx%dx%d of %d",
                        pos[0], in.c, in.h, in.w, in.classes, data_dir, want.c, want.h, want.w, want.classes);
        goto out;
    }
    if (!(be = rumor_backend_new(device, threads, err))) {
        rc = rumor_last_error();
        goto out;
    }
    if (!(m = rumor_model_new(&spec, in, be, text ? 32 : 256, err))) {
        rc = rumor_last_error();
        goto out;
    }
    if ((rc = rumor_checkpoint_load(pos[0], m, NULL, NULL, err)) != RUMOR_OK) goto out;
    src.mean = info.input_mean, src.std = info.input_std; /* the model's own normalisation */
    rc = rumor_source_evaluate(&src, m, &loss, &acc, err);
out:;
    const size_t count = text ? src.n_val * (size_t)spec.ctx : src.test.count;
    rumor_model_destroy(&m);
    rumor_backend_destroy(&be);
    rumor_source_fini(&src);
    if (rc != RUMOR_OK) {
        cli_error("%s", err);
        return cli_exit_code(rc);
    }
    if (json && text)
        printf("{\"model\":\"%s\",\"tokens\":%zu,\"val_loss\":%.6f,\"val_acc\":%.4f}\n", spec.canonical, count, loss, acc);
    else if (json)
        printf("{\"model\":\"%s\",\"samples\":%zu,\"test_loss\":%.6f,\"test_acc\":%.4f}\n", spec.canonical, count, loss,
               acc);
    else if (text)
        printf("%s: %s, val_loss %.4f nats per token (%.4f bits per %s), next-token accuracy %.4f over %zu tokens\n",
               pos[0], spec.canonical, loss, loss / log(2.0), in.ids ? "token" : "byte", acc, count);
    else
        printf("%s: %s, test_acc %.4f, test_loss %.4f on %zu samples\n", pos[0], spec.canonical, acc, loss, count);
    return 0;
}
