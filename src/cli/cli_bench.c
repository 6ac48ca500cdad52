/*
 * cli_bench.c - `rumor bench train`: rumor against PyTorch on the same model, data, batch,
 * optimizer and thread count, in one run, with the ratio and the achieved GFLOP/s next to
 * the sgemm rate of this machine measured in the same run. `rumor bench net`: models between
 * two real nodes against raw CurveZMQ (src/net/bench.c). `rumor bench mix`: the gossip
 * engine's mixing on chunk arrival against memcpy of the same bytes. `rumor bench codec`: each
 * compression codec's encode and decode_add against memcpy of the same float32 bytes.
 *
 * With --device cuda (or auto), train compares the device with the CPU backend on all cores
 * (cnn at batch 256 by default) and mix times the mixing kernels (axpy, scale) on device
 * memory against the device's own copy bandwidth, plus the round trip a node's gossip point
 * makes through pinned host memory.
 *
 * The PyTorch side is tools/bench/torch_ref.py run by Debian's /usr/bin/python3 (which has
 * python3-torch); RUMOR_TORCH_REF overrides the script path, --no-torch skips it.
 */
#include "backend.h"
#include "cli.h"
#include "codec.h"
#include "config.h"
#include "crypto.h"
#include "dp.h"
#include "gossip.h"
#include "model.h"
#include "bench.h"
#include "proto.h"
#include "rng.h"
#include "train.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define MAX_LIST 8
#define GPT_STEPS 100 /* steps a gpt model's measurement takes */
#define TEXT_OF(x) #x
#define NUMBER_TEXT(x) TEXT_OF(x)

/* Median GFLOP/s of an n x n x n sgemm through the backend at its thread count. */
static double sgemm_gflops(rumor_backend_t *be, int n)
{
    const size_t len = (size_t)n * n * sizeof(float);
    float *a = be->ops->alloc(be, len), *b = be->ops->alloc(be, len), *c = be->ops->alloc(be, len);
    double rates[7];
    int k = 0;
    if (a && b && c) {
        float *h = malloc(len);
        if (h) {
            for (size_t i = 0; i < (size_t)n * n; i++) h[i] = (float)((i * 2654435761u) % 1000) * 1e-3f;
            be->ops->upload(be, a, h, len);
            be->ops->upload(be, b, h, len);
            free(h);
        }
        be->ops->gemm(be, c, a, b, false, false, n, n, n, 1.0f, 0.0f, n, n, n); /* warm up */
        (void)be->ops->sync(be, NULL);
        for (; k < (int)RUMOR_ARRAY_LEN(rates); k++) {
            double t = rumor_now();
            be->ops->gemm(be, c, a, b, false, false, n, n, n, 1.0f, 0.0f, n, n, n);
            (void)be->ops->sync(be, NULL);
            rates[k] = 2.0 * n * (double)n * n / (rumor_now() - t) * 1e-9;
        }
    }
    if (a) be->ops->free(be, a);
    if (b) be->ops->free(be, b);
    if (c) be->ops->free(be, c);
    return k ? rumor_median(rates, (size_t)k) : NAN;
}

/* Run the PyTorch reference; returns samples/s or NaN (and says why on stderr). */
static double torch_rate(const char *script, const char *data, const char *model, int threads,
                         int intra, int batch, int epochs, long steps, float lr, float momentum)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 '%s' --json --model '%s' --threads %d --intra-threads %d --batch %d "
             "--epochs %d --steps %ld --lr %g --momentum %g --data '%s'",
             script, model, threads, intra, batch, epochs, steps, (double)lr, (double)momentum, data);
    FILE *p = popen(cmd, "r");
    if (!p) return NAN;
    char line[8192], last[8192] = "";
    while (fgets(line, sizeof line, p))
        if (line[0] == '{') snprintf(last, sizeof last, "%s", line);
    int status = pclose(p);
    if (status != 0 || !last[0]) {
        fprintf(stderr, "rumor: the PyTorch reference failed (exit %d); it needs Debian's python3-torch "
                "(tools/setup --test installs it)\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return NAN;
    }
    cJSON *j = cJSON_Parse(last);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "samples_per_s");
    double v = cJSON_IsNumber(r) ? r->valuedouble : NAN;
    cJSON_Delete(j);
    return v;
}

static int parse_int_list(int *out, const char *s, const char *what)
{
    int n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        long v = strtol(tok, &end, 10);
        if (*end || v < 1 || v > 1024 || n == MAX_LIST) {
            cli_error("%s: '%s' is not a list of thread counts (e.g. 1,2)", what, s);
            return -1;
        }
        out[n++] = (int)v;
    }
    return n;
}

/* A gpt model's measurement: the language-model recipe (AdamW at 1e-3, clipping at 1) on text
 * (the default corpus unless --data was given), GPT_STEPS steps; its rate is in tokens/s. */
static void lm_recipe(rumor_train_config_t *cfg, bool data_given)
{
    if (!data_given) cfg->data_dir = RUMOR_DEFAULT_TEXT;
    cfg->opt.kind = RUMOR_OPT_ADAMW;
    cfg->opt.lr = 1e-3f;
    cfg->clip_grad = 1.0f;
    cfg->epochs = 1;
    cfg->steps = GPT_STEPS;
}

/* `bench train --device D`: the device against the CPU backend on every core, same model,
 * data, batch and optimizer, alternating runs; medians. */
static int bench_train_device(const char *device, const char *data, bool data_given, char **specs, int n_models,
                              int batch, int epochs, int repeat, float lr, float momentum, bool json)
{
    char err[RUMOR_ERR_LEN];
    rumor_backend_t *probe = rumor_backend_new(device, 0, err);
    if (!probe) {
        cli_error("%s", err);
        return 2; /* a device the user named that is not there: theirs to fix */
    }
    const char *dev_name = probe->ops->name;
    const double peak = sgemm_gflops(probe, strcmp(dev_name, "cpu") != 0 ? 4096 : 1024);
    rumor_backend_destroy(&probe);
    const int cores = rumor_backend_default_threads();
    if (!json)
        printf("%-14s %6s %12s %12s %8s %9s %11s\n", "model", "batch", "device/s", "cpu/s", "ratio", "GFLOP/s",
               "sgemm dev");
    for (int mi = 0; mi < n_models; mi++) {
        double dev[100], cpu[100], ratios[100], flops = 0;
        for (int r = 0; r < repeat; r++)
            for (int side = 0; side < 2; side++) {
                rumor_train_config_t cfg;
                rumor_train_config_defaults(&cfg);
                cfg.data_dir = data;
                if (rumor_model_spec_parse(&cfg.spec, specs[mi], err) != RUMOR_OK) return 2;
                cfg.spec_set = true;
                cfg.device = side == 0 ? dev_name : "cpu";
                cfg.threads = cores;
                cfg.batch = batch;
                cfg.opt.lr = lr;
                cfg.opt.momentum = momentum;
                /* The device's first epoch pays for loading kernels and choosing cuBLAS
                 * algorithms: three epochs, the median counts. */
                cfg.epochs = epochs > 0 ? epochs : (side == 0 ? 3 : 1);
                cfg.eval = false;
                cfg.log_every = 0;
                if (cfg.spec.kind == RUMOR_MODEL_GPT) lm_recipe(&cfg, data_given); /* tokens/s over its steps */
                rumor_train_result_t res;
                rumor_err_t rc = rumor_train_run(&cfg, &res, err);
                if (rc != RUMOR_OK) {
                    cli_error("%s", err);
                    return cli_exit_code(rc);
                }
                if (side == 0) {
                    dev[r] = res.samples_per_s;
                    flops = res.gflops / res.samples_per_s;
                } else {
                    cpu[r] = res.samples_per_s;
                    ratios[r] = dev[r] / cpu[r];
                }
            }
        const double d = rumor_median(dev, (size_t)repeat), c = rumor_median(cpu, (size_t)repeat);
        const double ratio = rumor_median(ratios, (size_t)repeat);
        rumor_model_spec_t spec;
        if (rumor_model_spec_parse(&spec, specs[mi], err) != RUMOR_OK) return 2;
        if (json)
            printf("{\"model\":\"%s\",\"device\":\"%s\",\"batch\":%d,\"device_samples_per_s\":%.1f,"
                   "\"cpu_samples_per_s\":%.1f,\"cpu_threads\":%d,\"ratio\":%.3f,\"device_gflops\":%.1f,"
                   "\"device_sgemm_gflops\":%.1f}\n",
                   spec.canonical, dev_name, batch, d, c, cores, ratio, d * flops, peak);
        else
            printf("%-14s %6d %12.0f %12.0f %7.2fx %9.1f %11.1f\n", spec.canonical, batch, d, c, ratio, d * flops, peak);
        fflush(stdout);
    }
    return 0;
}

static int bench_train(int argc, char **argv)
{
    const char *data = RUMOR_DEFAULT_DATA, *models = NULL, *threads_s = "1,2", *device = "cpu";
    const char *script = getenv("RUMOR_TORCH_REF");
    if (!script) script = RUMOR_SOURCE_DIR "/tools/bench/torch_ref.py";
    int batch = 0, epochs = 0, repeat = 3;
    float lr = 0.05f, momentum = 0.9f;
    bool help = false, no_torch = false, json = false, data_given = false;
    const cli_opt_t opts[] = {
        {"--data", OPT_STR, &data, &data_given, "IDX dataset folder (gpt models: a folder of .txt documents, "
                                                "default " RUMOR_DEFAULT_TEXT ")"},
        {"--models", OPT_STR, &models, NULL, "models separated by ';' (default \"mlp:256,128;cnn\"; cnn with --device); "
                                             "gpt:L,H,D,T models train with AdamW at 1e-3, clipped to norm 1, and are "
                                             "measured in tokens/s over " NUMBER_TEXT(GPT_STEPS) " steps"},
        {"--threads", OPT_STR, &threads_s, NULL, "thread counts, e.g. 1,2 (default 1,2)"},
        {"--batch", OPT_INT, &batch, NULL, "minibatch (default 64; 256 with --device)"},
        {"--device", OPT_STR, &device, NULL, "cpu (against PyTorch), or cuda | auto: the device against the CPU backend on all cores"},
        {"--epochs", OPT_INT, &epochs, NULL, "epochs per measurement (default 3 for MLPs, 1 for CNNs)"},
        {"--lr", OPT_FLOAT, &lr, NULL, "learning rate (default 0.05)"},
        {"--momentum", OPT_FLOAT, &momentum, NULL, "SGD momentum (default 0.9)"},
        {"--repeat", OPT_INT, &repeat, NULL, "alternate rumor and PyTorch R times, report medians (default 3)"},
        {"--no-torch", OPT_FLAG, &no_torch, NULL, "skip the PyTorch reference"},
        {"--json", OPT_FLAG, &json, NULL, "one JSON object per measurement"},
        {"--help", OPT_FLAG, &help, NULL, "this help"},
    };
    const int n_opts = (int)RUMOR_ARRAY_LEN(opts);
    int n_pos;
    if (!cli_parse(argc, argv, 3, opts, n_opts, NULL, 0, &n_pos)) return 2;
    if (help) {
        printf("usage: rumor bench train [options]\n\n");
        cli_print_options(opts, n_opts);
        return 0;
    }
    if (repeat < 1 || repeat > 100) {
        cli_error("--repeat %d: expected 1..100", repeat);
        return 2;
    }
    const bool on_device = strcmp(device, "cpu") != 0;
    if (!models) models = on_device ? "cnn" : "mlp:256,128;cnn";
    if (batch == 0) batch = on_device ? 256 : 64;
    int threads[MAX_LIST];
    int n_threads = parse_int_list(threads, threads_s, "--threads");
    if (n_threads < 0) return 2;

    char list[512], err[RUMOR_ERR_LEN];
    snprintf(list, sizeof list, "%s", models);
    char *specs[MAX_LIST];
    int n_models = 0;
    for (char *save, *tok = strtok_r(list, ";", &save); tok && n_models < MAX_LIST;
         tok = strtok_r(NULL, ";", &save))
        specs[n_models++] = tok;
    for (int i = 0; i < n_models; i++) {
        rumor_model_spec_t spec;
        if (rumor_model_spec_parse(&spec, specs[i], err) != RUMOR_OK) {
            cli_error("%s", err);
            return 2;
        }
    }
    if (on_device)
        return bench_train_device(device, data, data_given, specs, n_models, batch, epochs, repeat, lr, momentum, json);
    if (!json)
        printf("%-14s %3s %9s %12s %12s %7s %9s %9s\n", "model", "thr", "batch", "rumor/s",
               "pytorch/s", "ratio", "GFLOP/s", "sgemm");
    for (int mi = 0; mi < n_models; mi++)
        for (int ti = 0; ti < n_threads; ti++) {
            rumor_train_config_t cfg;
            rumor_train_config_defaults(&cfg);
            cfg.data_dir = data;
            if (rumor_model_spec_parse(&cfg.spec, specs[mi], err) != RUMOR_OK) return 2;
            cfg.spec_set = true;
            cfg.threads = threads[ti];
            cfg.batch = batch;
            cfg.opt.lr = lr;
            cfg.opt.momentum = momentum;
            cfg.epochs = epochs > 0 ? epochs : (cfg.spec.kind == RUMOR_MODEL_CNN ? 1 : 3);
            cfg.eval = false;
            cfg.log_every = 0;
            if (cfg.spec.kind == RUMOR_MODEL_GPT) lm_recipe(&cfg, data_given);

            rumor_backend_t *be = rumor_backend_new("cpu", threads[ti], err);
            if (!be) {
                cli_error("%s", err);
                return 1;
            }
            const double peak = sgemm_gflops(be, 1024);
            rumor_backend_destroy(&be);

            /* Alternate the two so that both see the same machine over time; a shared
             * machine drifts by tens of percent within minutes. */
            double ours[100], theirs[100], ratios[100], flops = 0;
            int torch_intra = threads[ti], n_theirs = 0;
            for (int r = 0; r < repeat; r++) {
                rumor_train_result_t res;
                rumor_err_t rc = rumor_train_run(&cfg, &res, err);
                if (rc != RUMOR_OK) {
                    cli_error("%s", err);
                    return cli_exit_code(rc);
                }
                ours[r] = res.samples_per_s;
                flops = res.gflops / res.samples_per_s;
                if (no_torch) continue;
                /* PyTorch at its best on T cores: its OpenMP pool at T, or at 1 with only
                 * OpenBLAS at T (both at T can oversubscribe the cores); the faster counts. */
                double t = torch_rate(script, cfg.data_dir, cfg.spec.canonical, threads[ti], threads[ti], batch,
                                      cfg.epochs, cfg.steps, cfg.opt.lr, momentum);
                if (threads[ti] > 1) {
                    double one = torch_rate(script, cfg.data_dir, cfg.spec.canonical, threads[ti], 1, batch,
                                            cfg.epochs, cfg.steps, cfg.opt.lr, momentum);
                    if (one > t || isnan(t)) t = one, torch_intra = 1;
                }
                if (isnan(t)) {
                    no_torch = true;
                    continue;
                }
                theirs[n_theirs] = t;
                ratios[n_theirs++] = ours[r] / t;
            }
            rumor_train_result_t res = {0};
            res.samples_per_s = rumor_median(ours, (size_t)repeat);
            res.gflops = res.samples_per_s * flops;
            const double torch = n_theirs ? rumor_median(theirs, (size_t)n_theirs) : NAN;
            const double ratio = n_theirs ? rumor_median(ratios, (size_t)n_theirs) : NAN;
            if (json)
                printf("{\"model\":\"%s\",\"threads\":%d,\"batch\":%d,\"epochs\":%d,"
                       "\"rumor_samples_per_s\":%.1f,\"pytorch_samples_per_s\":%.1f,\"ratio\":%.3f,"
                       "\"pytorch_intra_threads\":%d,\"gflops\":%.1f,\"sgemm_gflops\":%.1f}\n",
                       cfg.spec.canonical, threads[ti], batch, cfg.epochs, res.samples_per_s,
                       isnan(torch) ? -1.0 : torch, isnan(ratio) ? -1.0 : ratio, torch_intra,
                       res.gflops, peak);
            else if (isnan(torch)) /* --no-torch, or PyTorch could not run: nothing to compare */
                printf("%-14s %3d %9d %12.0f %12s %7s %9.1f %9.1f\n", cfg.spec.canonical, threads[ti], batch,
                       res.samples_per_s, "-", "-", res.gflops, peak);
            else
                printf("%-14s %3d %9d %12.0f %12.0f %6.2fx %9.1f %9.1f\n", cfg.spec.canonical,
                       threads[ti], batch, res.samples_per_s, torch, ratio, res.gflops, peak);
            fflush(stdout);
        }
    return 0;
}

static int bench_net(int argc, char **argv)
{
    const char *sizes_s = "1,10,25";
    int repeat = 5;
    long chunk = 262144; /* 1 MiB of float32 */
    bool help = false, json = false;
    const cli_opt_t opts[] = {
        {"--sizes", OPT_STR, &sizes_s, NULL, "model sizes in millions of parameters (default 1,10,25)"},
        {"--chunk", OPT_LONG, &chunk, NULL, "parameters per chunk (default 262144 = 1 MiB)"},
        {"--repeat", OPT_INT, &repeat, NULL, "models sent per size after a warm-up; medians (default 5)"},
        {"--json", OPT_FLAG, &json, NULL, "one JSON object per size"},
        {"--help", OPT_FLAG, &help, NULL, "this help"},
    };
    const int n_opts = (int)RUMOR_ARRAY_LEN(opts);
    int n_pos;
    if (!cli_parse(argc, argv, 3, opts, n_opts, NULL, 0, &n_pos)) return 2;
    if (help) {
        printf("usage: rumor bench net [options]\n\n");
        cli_print_options(opts, n_opts);
        return 0;
    }
    if (repeat < 1 || repeat > 60 || chunk < 1024 || chunk > 2097152) {
        cli_error("--repeat 1..60, --chunk 1024..2097152 parameters");
        return 2;
    }
    char list[256], err[RUMOR_ERR_LEN];
    snprintf(list, sizeof list, "%s", sizes_s);
    if (!json)
        printf("%10s %12s %12s %7s %14s %12s\n", "params", "rumor MB/s", "raw MB/s", "ratio", "peak RSS MiB",
               "model MiB");
    for (char *save, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        double m = strtod(tok, &end);
        if (*end || !(m > 0) || m > 1000) {
            cli_error("--sizes: '%s' is not a size in millions of parameters (0..1000]", tok);
            return 2;
        }
        size_t n = (size_t)(m * 1e6);
        if (rumor_chunks(n, (size_t)chunk) > 65536) {
            cli_error("--sizes %s with --chunk %ld makes more than 65536 chunks; raise --chunk", tok, chunk);
            return 2;
        }
        rumor_net_bench_t r;
        rumor_err_t rc = rumor_net_bench(n, (size_t)chunk, repeat, &r, err);
        if (rc != RUMOR_OK) {
            cli_error("%s", err);
            return cli_exit_code(rc);
        }
        const double model_mib = (double)n * 4 / 1048576.0;
        if (json)
            printf("{\"params\":%zu,\"chunk\":%ld,\"rumor_mb_per_s\":%.1f,\"raw_curve_mb_per_s\":%.1f,"
                   "\"ratio\":%.3f,\"peak_rss_above_idle_mib\":%.1f,\"model_mib\":%.1f}\n",
                   n, chunk, r.rumor_mbps, r.raw_mbps, r.ratio, (double)r.peak_kb / 1024.0, model_mib);
        else
            printf("%10zu %12.0f %12.0f %6.2fx %14.1f %12.1f\n", n, r.rumor_mbps, r.raw_mbps, r.ratio,
                   (double)r.peak_kb / 1024.0, model_mib);
        fflush(stdout);
    }
    return 0;
}

// ---- bench mix ----

/* The baseline's copy goes through a volatile pointer: the K copies into one destination
 * overwrite each other unread, and a compiler that sees memcpy may drop all but the last. */
static void *(*volatile mix_copy)(void *, const void *, size_t) = memcpy;

/* Why the engine refused a chunk: the drop counter that moved. */
static const char *mix_drop_reason(const rumor_gossip_stats_t *before, const rumor_gossip_stats_t *after)
{
    for (int d = 0; d < RUMOR_GOSSIP_DROP_COUNT; d++)
        if (after->drops[d] != before->drops[d]) return rumor_gossip_drop_name((rumor_gossip_drop_t)d);
    return "no drop counted";
}

/* Feed every neighbour's whole model, chunk by chunk, into the round in flight. False (with
 * the error printed) when the engine refuses a chunk: the figures would not be mixing. */
static bool mix_feed(rumor_gossip_t *g, float *const *nb, int k_count, size_t n, size_t chunk,
                     uint64_t layout, uint64_t now)
{
    const uint32_t chunks = (uint32_t)rumor_chunks(n, chunk);
    rumor_gossip_chunk_t c = {.round = rumor_gossip_round(g), .layout = layout,
                              .w = 1.0 / (k_count + 1), .chunks = chunks};
    rumor_gossip_stats_t before; /* drops move only on a refusal: the one that moved says why */
    rumor_gossip_stats(g, &before);
    for (int k = 0; k < k_count; k++) {
        const uint8_t key[RUMOR_KEY_LEN] = {(uint8_t)(k + 1)};
        for (uint32_t ci = 0; ci < chunks; ci++) {
            c.chunk = ci;
            c.off = (uint64_t)ci * chunk;
            c.n = n - c.off < chunk ? n - c.off : chunk;
            if (!rumor_gossip_on_chunk(g, key, &c, nb[k] + c.off, (size_t)c.n * sizeof(float), now)) {
                rumor_gossip_stats_t after;
                rumor_gossip_stats(g, &after);
                cli_error("bench mix: the engine refused chunk %" PRIu32 " of neighbour %d in round %" PRIu64 " (%s)",
                          ci, k + 1, c.round, mix_drop_reason(&before, &after));
                return false;
            }
        }
    }
    return true;
}

/* A gossip point that must finish the round (all models are in) and start the next; the
 * sends go straight back, as if the transport had sent them. */
static bool mix_step(rumor_gossip_t *g, float *x, uint64_t now)
{
    if (rumor_gossip_step(g, x, now) != RUMOR_GOSSIP_DONE) {
        cli_error("bench mix: the engine waited at round %" PRIu64 " with every model in", rumor_gossip_round(g));
        return false;
    }
    rumor_gossip_send_t s;
    while (rumor_gossip_next_send(g, &s)) rumor_gossip_release(g, &s, true);
    return true;
}

/* `bench mix --device D`: what mixing costs where the parameters live. A round's mixing on
 * the device is K axpy passes (a neighbour each) and one scale, timed against K device-to-
 * device copies of the same bytes (the device's copy bandwidth), alternating, medians. A
 * node's gossip point also takes the parameters to pinned host memory and back: timed too. */
static int bench_mix_device(const char *device, size_t n, int k_count, int repeat, bool json)
{
    char err[RUMOR_ERR_LEN];
    rumor_backend_t *be = rumor_backend_new(device, 0, err);
    if (!be) {
        cli_error("%s", err);
        return 2; /* a device the user named that is not there: theirs to fix */
    }
    const struct rumor_backend_ops *op = be->ops;
    const size_t len = n * sizeof(float);
    int rc = 1;
    float *x = op->alloc(be, len), *dst = op->alloc(be, len), **nb = calloc((size_t)k_count, sizeof *nb);
    float *host = op->host_alloc(be, len);
    double *t = malloc((size_t)repeat * 4 * sizeof *t);
    bool ok = x && dst && nb && host && t;
    for (int k = 0; ok && k < k_count; k++) ok = (nb[k] = op->alloc(be, len)) != NULL;
    if (!ok) {
        cli_error("bench mix: out of %s memory for %d models of %zu parameters", op->name, k_count + 2, n);
        goto out;
    }
    double *t_mix = t, *t_cpy = t + repeat, *t_trip = t + 2 * repeat, *ratio = t + 3 * repeat;
    for (size_t i = 0; i < n; i++) host[i] = (float)(i % 1024) * (1.0f / 1024.0f);
    op->upload(be, x, host, len);
    for (int k = 0; k < k_count; k++) op->upload(be, nb[k], host, len);
    const float w = 1.0f / (float)(k_count + 1);
    for (int r = -1; r < repeat; r++) { /* r = -1: an untimed warm-up of both */
        double tm = 0, tc = 0;
        for (int side = 0; side < 2; side++) {
            const double t0 = rumor_now();
            if ((side == 0) == (r % 2 == 0)) {
                for (int k = 0; k < k_count; k++) op->axpy(be, x, nb[k], 1.0f, n);
                op->scale(be, x, w, n);
            } else {
                for (int k = 0; k < k_count; k++) op->copy(be, dst, nb[k], len);
            }
            if (op->sync(be, err) != RUMOR_OK) {
                cli_error("bench mix: %s", err);
                goto out;
            }
            *((side == 0) == (r % 2 == 0) ? &tm : &tc) = rumor_now() - t0;
        }
        const double t0 = rumor_now();
        op->download_async(be, host, x, len);
        op->wait_copies(be);
        op->upload(be, x, host, len);
        if (op->sync(be, err) != RUMOR_OK) {
            cli_error("bench mix: %s", err);
            goto out;
        }
        if (r >= 0) t_mix[r] = tm, t_cpy[r] = tc, t_trip[r] = rumor_now() - t0, ratio[r] = tc / tm;
    }
    /* It mixed: every x[i] is (x0 + K v) / (K + 1) after each round, x0 = v here: v. */
    op->download(be, host, x, len);
    for (size_t i = 0; i < n; i += n / 97 + 1)
        if (fabsf(host[i] - (float)(i % 1024) * (1.0f / 1024.0f)) > 1e-4f) {
            cli_error("bench mix: x[%zu] = %g after mixing equal models, expected %g", i, (double)host[i],
                      (double)((float)(i % 1024) / 1024.0f));
            goto out;
        }
    const double bytes = (double)k_count * (double)len;
    const double mix_gbs = bytes / rumor_median(t_mix, (size_t)repeat) * 1e-9;
    const double cpy_gbs = bytes / rumor_median(t_cpy, (size_t)repeat) * 1e-9;
    const double frac = rumor_median(ratio, (size_t)repeat), trip_ms = rumor_median(t_trip, (size_t)repeat) * 1e3;
    if (json)
        printf("{\"device\":\"%s\",\"params\":%zu,\"neighbours\":%d,\"repeat\":%d,\"mix_gbs\":%.2f,"
               "\"copy_gbs\":%.2f,\"fraction\":%.3f,\"host_round_trip_ms\":%.3f}\n",
               op->name, n, k_count, repeat, mix_gbs, cpy_gbs, frac, trip_ms);
    else
        printf("%-6s %10s %5s %9s %10s %9s %14s\n%-6s %10zu %5d %9.1f %10.1f %8.0f%% %14.2f\n", "device", "params",
               "nbrs", "mix GB/s", "copy GB/s", "fraction", "host trip ms", op->name, n, k_count, mix_gbs, cpy_gbs,
               100.0 * frac, trip_ms);
    rc = 0;
out:
    if (nb)
        for (int k = 0; k < k_count; k++)
            if (nb[k]) op->free(be, nb[k]);
    free(nb);
    if (x) op->free(be, x);
    if (dst) op->free(be, dst);
    if (host) op->host_free(be, host);
    free(t);
    rumor_backend_destroy(&be);
    return rc;
}

/* One timed round: K models' chunks in (*t_feed), then the round's finish (*t_fin); checked:
 * x is then the mean of its snapshot and the K models, at 8 random positions. */
static bool mix_round_checked(rumor_gossip_t *g, float *x, float *const *nb, int k_count, size_t n, size_t cp,
                              uint64_t layout, uint64_t *now, rumor_rng_t *rng, double *t_feed, double *t_fin)
{
    enum { CHECK = 8 };
    size_t at[CHECK];
    float before[CHECK];
    for (int i = 0; i < CHECK; i++) {
        at[i] = (size_t)rumor_rng_below(rng, n);
        before[i] = x[at[i]];
    }
    const double t0 = rumor_now();
    if (!mix_feed(g, nb, k_count, n, cp, layout, ++*now)) return false;
    const double t1 = rumor_now();
    if (!mix_step(g, x, ++*now)) return false;
    *t_feed = t1 - t0;
    *t_fin = rumor_now() - t1;
    rumor_gossip_stats_t st;
    rumor_gossip_stats(g, &st);
    for (int i = 0; i < CHECK; i++) {
        double mean = before[i];
        for (int k = 0; k < k_count; k++) mean += nb[k][at[i]];
        mean /= k_count + 1;
        if (st.last_peers != k_count || st.last_missing != 0 || !(fabs(x[at[i]] - mean) < 1e-4)) {
            cli_error("bench mix: round %" PRIu64 " mixed %d of %d models, x[%zu] = %g, expected %g", st.round,
                      st.last_peers, k_count, at[i], (double)x[at[i]], mean);
            return false;
        }
    }
    return true;
}

/* bench mix's sizes in range, or one error line. */
static bool mix_sizes_ok(long params, int k_count, int repeat, long chunk)
{
    if (params < 1 || params > 1000000000L)
        cli_error("--params %ld: expected 1..1000000000", params);
    else if (k_count < 1 || k_count > RUMOR_GOSSIP_MAX_SENDERS - 1)
        cli_error("--neighbours %d: expected 1..%d", k_count, RUMOR_GOSSIP_MAX_SENDERS - 1);
    else if (repeat < 1 || repeat > 100)
        cli_error("--repeat %d: expected 1..100", repeat);
    else if (chunk < 1 || chunk > 16777216L)
        cli_error("--chunk %ld: expected 1..16777216 parameters", chunk);
    else
        return true;
    return false;
}

static int bench_mix(int argc, char **argv)
{
    long params = 25000000, chunk = RUMOR_GOSSIP_CHUNK_DEFAULT;
    int k_count = 4, repeat = 5;
    bool help = false, json = false;
    const char *device = "cpu", *robust = "none";
    const cli_opt_t opts[] = {
        {"--params", OPT_LONG, &params, NULL, "model size in float32 parameters (default 25000000)"},
        {"--device", OPT_STR, &device, NULL, "cpu (the gossip engine), or cuda | auto: mixing kernels on the device"},
        {"--robust", OPT_STR, &robust, NULL, "the engine's robust mixing, as a node's --robust (default none: plain "
                                             "averaging; auto: a node's default)"},
        {"--neighbours", OPT_INT, &k_count, NULL, "neighbour models mixed per round (default 4)"},
        {"--chunk", OPT_LONG, &chunk, NULL, "parameters per chunk (default 262144 = 1 MiB)"},
        {"--repeat", OPT_INT, &repeat, NULL, "rounds timed, alternating with memcpy; medians (default 5)"},
        {"--json", OPT_FLAG, &json, NULL, "one JSON object"},
        {"--help", OPT_FLAG, &help, NULL, "this help"},
    };
    const int n_opts = (int)RUMOR_ARRAY_LEN(opts);
    int n_pos;
    if (!cli_parse(argc, argv, 3, opts, n_opts, NULL, 0, &n_pos)) return 2;
    if (help) {
        printf("usage: rumor bench mix [options]\n\n"
               "Mixing throughput of the gossip engine (D-PSGD, complete graph): every neighbour's\n"
               "model goes through rumor_gossip_on_chunk, timed against memcpy of the same bytes\n"
               "in the same run; the round's finish (mixing into x) is timed apart.\n\n");
        cli_print_options(opts, n_opts);
        return 0;
    }
    if (!mix_sizes_ok(params, k_count, repeat, chunk)) return 2;
    rumor_robust_t rb;
    char perr[RUMOR_ERR_LEN];
    if (rumor_robust_parse(&rb, robust, perr) != RUMOR_OK) {
        cli_error("%s", perr);
        return 2;
    }
    if (strcmp(device, "cpu") != 0) {
        if (strcmp(robust, "none") != 0) {
            cli_error("bench mix --device %s times the mixing kernels alone: --robust is the engine's (--device cpu)", device);
            return 2;
        }
        return bench_mix_device(device, (size_t)params, k_count, repeat, json);
    }
    const size_t n = (size_t)params, cp = (size_t)chunk;
    if (rumor_chunks(n, cp) > RUMOR_PROTO_MAX_CHUNKS) {
        cli_error("--params %ld with --chunk %ld makes more than %u chunks (the wire's limit); raise --chunk",
                  params, chunk, RUMOR_PROTO_MAX_CHUNKS);
        return 2;
    }

    const uint64_t layout = UINT64_C(0x72756d6f726d6978); /* any constant: "rumormix" */
    char err[RUMOR_ERR_LEN];
    int rc = 1;
    rumor_topology_t *topo = NULL;
    rumor_gossip_t *g = NULL;
    float *x = NULL, *dst = NULL, **nb = calloc((size_t)k_count, sizeof *nb);
    double *t_mix = NULL, *t_fin = NULL, *t_cpy = NULL, *r_mix = NULL, *r_fin = NULL;
    if (!nb) goto nomem;
    x = malloc(n * sizeof *x);
    dst = malloc(n * sizeof *dst);
    t_mix = malloc((size_t)repeat * 5 * sizeof *t_mix);
    if (!x || !dst || !t_mix) goto nomem;
    t_fin = t_mix + repeat, t_cpy = t_fin + repeat, r_mix = t_cpy + repeat, r_fin = r_mix + repeat;
    /* Random finite payloads and x; writing every buffer now takes the page faults out of
     * the timed phases (the engine's own buffers are touched by two untimed rounds below). */
    for (int k = 0; k < k_count; k++) {
        if (!(nb[k] = malloc(n * sizeof *nb[k]))) goto nomem;
        rumor_rng_t rng;
        rumor_rng_init2(&rng, 1, (uint64_t)k, 0);
        for (size_t i = 0; i < n; i++) nb[k][i] = (float)(2.0 * rumor_rng_uniform(&rng) - 1.0);
    }
    rumor_rng_t rng;
    rumor_rng_init2(&rng, 1, (uint64_t)k_count, 1);
    for (size_t i = 0; i < n; i++) x[i] = (float)(2.0 * rumor_rng_uniform(&rng) - 1.0);
    memset(dst, 0, n * sizeof *dst);

    rumor_algo_t algo;
    if (rumor_algo_parse(&algo, "dpsgd", err) != RUMOR_OK || !(topo = rumor_topology_new("complete", 1, err))) {
        cli_error("bench mix: %s", err);
        goto out;
    }
    algo.overlap = true; /* one gossip point finishes a round and begins the next: a feed and a step a round */
    rumor_gossip_config_t cfg = {.algo = algo, .params = n, .layout = layout, .chunk_params = cp};
    cfg.robust = rb;
    memset(cfg.self, 0xff, sizeof cfg.self); /* neighbours are {k+1, 0, ...}: never self */
    if (!(g = rumor_gossip_new(&cfg, topo, x, err))) {
        cli_error("bench mix: %s", err);
        goto out;
    }
    uint8_t(*view)[RUMOR_KEY_LEN] = calloc((size_t)k_count, sizeof *view);
    if (!view) goto nomem;
    for (int k = 0; k < k_count; k++) view[k][0] = (uint8_t)(k + 1);
    rumor_gossip_set_view(g, (const uint8_t(*)[RUMOR_KEY_LEN])view, (size_t)k_count);
    free(view);

    /* The engine's clock is ours to give (a pure state machine): every round completes, so
     * no deadline is ever reached and any increasing count will do. */
    uint64_t now = 1000;
    if (!mix_step(g, x, now)) goto out; /* round 0 starts */
    for (int w = 0; w < 2; w++) /* warm-up: both accumulators and both snapshots touched */
        if (!mix_feed(g, nb, k_count, n, cp, layout, ++now) || !mix_step(g, x, ++now)) goto out;

    for (int r = 0; r < repeat; r++) {
        /* Alternate which side goes first: both see the same machine over time. */
        for (int side = 0; side < 2; side++) {
            if ((side == 0) == (r % 2 == 0)) {
                if (!mix_round_checked(g, x, nb, k_count, n, cp, layout, &now, &rng, &t_mix[r], &t_fin[r])) goto out;
            } else {
                double t0 = rumor_now();
                for (int k = 0; k < k_count; k++) mix_copy(dst, nb[k], n * sizeof *dst);
                t_cpy[r] = rumor_now() - t0;
                if (memcmp(dst, nb[k_count - 1], n * sizeof *dst) != 0) {
                    cli_error("bench mix: the memcpy baseline copied wrong bytes");
                    goto out;
                }
            }
        }
        r_mix[r] = t_cpy[r] / t_mix[r];
        r_fin[r] = t_cpy[r] / (t_mix[r] + t_fin[r]);
    }
    const double bytes = (double)k_count * (double)n * sizeof(float);
    const double mix_gbs = bytes / rumor_median(t_mix, (size_t)repeat) * 1e-9;
    const double cpy_gbs = bytes / rumor_median(t_cpy, (size_t)repeat) * 1e-9;
    const double fin_ms = rumor_median(t_fin, (size_t)repeat) * 1e3;
    const double ratio = rumor_median(r_mix, (size_t)repeat), ratio_fin = rumor_median(r_fin, (size_t)repeat);
    if (json)
        printf("{\"params\":%zu,\"neighbours\":%d,\"chunk\":%zu,\"repeat\":%d,\"mix_gbs\":%.3f,"
               "\"memcpy_gbs\":%.3f,\"ratio\":%.3f,\"finish_ms\":%.3f,\"ratio_with_finish\":%.3f}\n",
               n, k_count, cp, repeat, mix_gbs, cpy_gbs, ratio, fin_ms, ratio_fin);
    else
        printf("%10s %5s %8s %9s %12s %7s %10s %13s\n%10zu %5d %8zu %9.2f %12.2f %6.2fx %10.1f %12.2fx\n",
               "params", "nbrs", "chunk", "mix GB/s", "memcpy GB/s", "ratio", "finish ms", "with finish",
               n, k_count, cp, mix_gbs, cpy_gbs, ratio, fin_ms, ratio_fin);
    rc = 0;
    goto out;
nomem:
    cli_error("bench mix: out of memory for %d models of %ld parameters", k_count + 6, params);
out:
    rumor_gossip_destroy(&g);
    rumor_topology_destroy(&topo);
    if (nb)
        for (int k = 0; k < k_count; k++) free(nb[k]);
    free(nb);
    free(x);
    free(dst);
    free(t_mix);
    return rc;
}

// ---- bench codec ----

static int bench_codec(int argc, char **argv)
{
    long params = 25000000, chunk = RUMOR_GOSSIP_CHUNK_DEFAULT;
    int repeat = 5;
    const char *codecs_s = "f32,fp16,bf16,int8,int4,topk:0.01";
    bool help = false, json = false;
    const cli_opt_t opts[] = {
        {"--params", OPT_LONG, &params, NULL, "model size in float32 parameters (default 25000000)"},
        {"--chunk", OPT_LONG, &chunk, NULL, "parameters per chunk (default 262144 = 1 MiB)"},
        {"--codecs", OPT_STR, &codecs_s, NULL, "codecs separated by ',' (default f32,fp16,bf16,int8,int4,topk:0.01)"},
        {"--repeat", OPT_INT, &repeat, NULL, "passes timed, alternating with memcpy; medians (default 5)"},
        {"--json", OPT_FLAG, &json, NULL, "one JSON object per codec"},
        {"--help", OPT_FLAG, &help, NULL, "this help"},
    };
    const int n_opts = (int)RUMOR_ARRAY_LEN(opts);
    int n_pos;
    if (!cli_parse(argc, argv, 3, opts, n_opts, NULL, 0, &n_pos)) return 2;
    if (help) {
        printf("usage: rumor bench codec [options]\n\n"
               "Compression codecs on one thread: a model is encoded chunk by chunk, and the chunks are\n"
               "added into an accumulator (rumor_codec_decode_add, validation included). Rates are\n"
               "float32 parameter bytes (4 per parameter) a second, against memcpy of the same bytes\n"
               "in the same run; wire is the encoded size against float32.\n\n");
        cli_print_options(opts, n_opts);
        return 0;
    }
    if (params < 1 || params > 1000000000L || chunk < 1 || chunk > 16777216L || repeat < 1 || repeat > 100) {
        cli_error("bench codec: --params 1..1000000000, --chunk 1..16777216, --repeat 1..100");
        return 2;
    }
    rumor_codec_t list[MAX_LIST];
    int n_codecs = 0;
    char buf[256], err[RUMOR_ERR_LEN];
    snprintf(buf, sizeof buf, "%s", codecs_s);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n_codecs == MAX_LIST) {
            cli_error("--codecs: at most %d codecs", MAX_LIST);
            return 2;
        }
        if (rumor_codec_parse(&list[n_codecs++], tok, err) != RUMOR_OK) {
            cli_error("%s", err);
            return 2;
        }
    }

    const size_t n = (size_t)params, cp = (size_t)chunk, chunks = rumor_chunks(n, cp);
    size_t enc_len = 0; /* the largest encoding of the whole model among the codecs */
    for (int ci = 0; ci < n_codecs; ci++) {
        size_t total = 0;
        for (size_t k = 0; k < chunks; k++)
            total += rumor_codec_encoded_len(&list[ci], n - k * cp < cp ? n - k * cp : cp);
        enc_len = total > enc_len ? total : enc_len;
    }
    int rc = 1;
    float *x = malloc(n * sizeof *x), *acc = malloc(n * sizeof *acc), *dst = malloc(n * sizeof *dst);
    uint8_t *enc = malloc(enc_len);
    size_t *lens = malloc(chunks * sizeof *lens);
    double *t = malloc((size_t)repeat * 5 * sizeof *t);
    if (!x || !acc || !dst || !enc || !lens || !t) {
        cli_error("bench codec: out of memory for %ld parameters", params);
        goto out;
    }
    double *t_enc = t, *t_dec = t + repeat, *t_cpy = t + 2 * repeat, *r_enc = t + 3 * repeat, *r_dec = t + 4 * repeat;
    rumor_rng_t rng;
    rumor_rng_init(&rng, 1);
    for (size_t i = 0; i < n; i++) x[i] = (float)(0.05 * rumor_rng_normal(&rng)); /* like weights */
    memset(acc, 0, n * sizeof *acc);
    memset(dst, 0, n * sizeof *dst);
    memset(enc, 0, enc_len);
    if (!json)
        printf("%-12s %10s %7s %11s %11s %12s %9s %9s\n", "codec", "params", "wire", "encode GB/s", "decode GB/s",
               "memcpy GB/s", "enc ratio", "dec ratio");
    for (int ci = 0; ci < n_codecs; ci++) {
        const rumor_codec_t *c = &list[ci];
        size_t wire = 0;
        for (int r = -1; r < repeat; r++) { /* r = -1: an untimed warm-up */
            for (int side = 0; side < 2; side++) {
                if ((side == 0) == (r % 2 == 0)) {
                    double t0 = rumor_now();
                    uint8_t *e = enc;
                    for (size_t k = 0; k < chunks; k++) {
                        const size_t off = k * cp, cn = n - off < cp ? n - off : cp;
                        if (rumor_codec_encode(c, x + off, cn, e, &lens[k], err) != RUMOR_OK) {
                            cli_error("bench codec: %s", err);
                            goto out;
                        }
                        e += lens[k];
                    }
                    double t1 = rumor_now();
                    e = enc;
                    for (size_t k = 0; k < chunks; k++) {
                        const size_t off = k * cp, cn = n - off < cp ? n - off : cp;
                        if (rumor_codec_decode_add(c->id, e, lens[k], cn, 0.5f, acc + off, err) != RUMOR_OK) {
                            cli_error("bench codec: its own chunk %zu refused: %s", k, err);
                            goto out;
                        }
                        e += lens[k];
                    }
                    double t2 = rumor_now();
                    wire = (size_t)(e - enc);
                    if (r >= 0) t_enc[r] = t1 - t0, t_dec[r] = t2 - t1;
                } else {
                    double t0 = rumor_now();
                    mix_copy(dst, x, n * sizeof *dst); /* the volatile memcpy of bench mix */
                    if (r >= 0) t_cpy[r] = rumor_now() - t0;
                }
            }
            if (r >= 0) r_enc[r] = t_cpy[r] / t_enc[r], r_dec[r] = t_cpy[r] / t_dec[r];
        }
        if (memcmp(dst, x, n * sizeof *dst) != 0) {
            cli_error("bench codec: the memcpy baseline copied wrong bytes");
            goto out;
        }
        const double bytes = (double)n * sizeof(float);
        const double enc_gbs = bytes / rumor_median(t_enc, (size_t)repeat) * 1e-9;
        const double dec_gbs = bytes / rumor_median(t_dec, (size_t)repeat) * 1e-9;
        const double cpy_gbs = bytes / rumor_median(t_cpy, (size_t)repeat) * 1e-9;
        const double re = rumor_median(r_enc, (size_t)repeat), rd = rumor_median(r_dec, (size_t)repeat);
        char name[64];
        rumor_codec_format(name, sizeof name, c);
        if (json)
            printf("{\"codec\":\"%s\",\"params\":%zu,\"chunk\":%zu,\"repeat\":%d,\"wire_ratio\":%.4f,"
                   "\"encode_gbs\":%.3f,\"decode_add_gbs\":%.3f,\"memcpy_gbs\":%.3f,\"encode_ratio\":%.3f,"
                   "\"decode_add_ratio\":%.3f}\n",
                   name, n, cp, repeat, (double)wire / bytes, enc_gbs, dec_gbs, cpy_gbs, re, rd);
        else
            printf("%-12s %10zu %6.1f%% %11.2f %11.2f %12.2f %8.2fx %8.2fx\n", name, n, 100.0 * (double)wire / bytes,
                   enc_gbs, dec_gbs, cpy_gbs, re, rd);
        fflush(stdout);
    }
    rc = 0;
out:
    free(x);
    free(acc);
    free(dst);
    free(enc);
    free(lens);
    free(t);
    return rc;
}

/* rumor bench dp: DP-SGD's noise, one normal at a time (the construction's reference: how
 * rumor drew it before the batches) against a batch at a time, and a private step of a model
 * with noise against the same step without; medians, alternating. */
static int bench_dp(int argc, char **argv)
{
    const char *model = "mlp:256,128";
    int batch = 64, repeat = 7;
    bool help = false, json = false;
    const cli_opt_t opts[] = {
        {"--model", OPT_STR, &model, NULL, "the model of the private steps (default mlp:256,128, Fashion-MNIST's shape)"},
        {"--batch", OPT_INT, &batch, NULL, "samples a private step (default 64)"},
        {"--repeat", OPT_INT, &repeat, NULL, "measurements, alternating; medians (default 7)"},
        {"--json", OPT_FLAG, &json, NULL, "one JSON object"},
        {"--help", OPT_FLAG, &help, NULL, "this help"},
    };
    const int n_opts = (int)RUMOR_ARRAY_LEN(opts);
    int n_pos;
    if (!cli_parse(argc, argv, 3, opts, n_opts, NULL, 0, &n_pos)) return 2;
    if (help) {
        printf("usage: rumor bench dp [options]\n\n"
               "DP-SGD's Gaussian noise on one thread (secret ChaCha20 stream, each normal the sum of four\n"
               "Box-Muller normals), one at a time against a batch at a time (vector math on this CPU's\n"
               "path; RUMOR_ISA=portable|avx2 caps it), as many normals as the model has parameters; and\n"
               "a private step of the model (per-sample gradients, clipping, noise drawn beside them)\n"
               "against the same step without noise: what the noise adds to a step.\n\n");
        cli_print_options(opts, n_opts);
        return 0;
    }
    if (batch < 1 || batch > 4096 || repeat < 1 || repeat > 100) {
        cli_error("bench dp: --batch 1..4096, --repeat 1..100");
        return 2;
    }
    char err[RUMOR_ERR_LEN];
    rumor_model_spec_t spec;
    if (rumor_model_spec_parse(&spec, model, err) != RUMOR_OK) {
        cli_error("%s", err);
        return 2;
    }
    int rc = 1;
    rumor_backend_t *be = rumor_backend_new("cpu", 1, err);
    rumor_model_t *m = be ? rumor_model_new(&spec, (rumor_model_input_t){1, 28, 28, 10, false}, be, batch, err) : NULL;
    rumor_noise_t *ns = m ? rumor_noise_new_secret(err) : NULL, *n1 = ns ? rumor_noise_new_secret(err) : NULL,
                  *n2 = n1 ? rumor_noise_new_secret(err) : NULL;
    rumor_dp_config_t with, without;
    rumor_dp_t *dp = NULL, *plain = NULL;
    if (n2 && rumor_dp_parse(&with, "clip=1,noise=1", err) == RUMOR_OK &&
        rumor_dp_parse(&without, "clip=1,noise=0", err) == RUMOR_OK && rumor_model_init(m, 1) == RUMOR_OK) {
        dp = rumor_dp_new(&with, m, 60000, batch, &n1, err);
        plain = dp ? rumor_dp_new(&without, m, 60000, batch, &n2, err) : NULL;
    }
    const size_t P = m ? rumor_model_param_count(m) : 0;
    float *buf = malloc((P ? P : 1) * sizeof *buf);
    double *t = malloc((size_t)repeat * 6 * sizeof *t);
    if (!plain || !buf || !t) {
        cli_error("bench dp: %s", plain ? "out of memory" : err);
        goto out;
    }
    double *t_one = t, *t_batch = t + repeat, *t_step = t + 2 * repeat, *t_plain = t + 3 * repeat,
           *speedup = t + 4 * repeat, *share = t + 5 * repeat;
    rumor_rng_t rng;
    rumor_rng_init(&rng, 1);
    float *in = rumor_model_input_buf(m);
    int32_t *lab = rumor_model_label_buf(m);
    for (size_t i = 0; i < (size_t)batch * 28 * 28; i++) in[i] = (float)rumor_rng_uniform(&rng);
    for (int i = 0; i < batch; i++) lab[i] = (int32_t)rumor_rng_below(&rng, 10);
    for (int r = 0; r < repeat; r++) {
        double t0 = rumor_now(), loss = 0.0;
        for (size_t k = 0; k < P; k++) buf[k] = (float)rumor_noise_normal(ns);
        t_one[r] = rumor_now() - t0;
        t0 = rumor_now();
        rumor_noise_gaussian(ns, buf, P, 1.0);
        t_batch[r] = rumor_now() - t0;
        t0 = rumor_now();
        if (rumor_dp_gradient(dp, m, batch, &loss, err) != RUMOR_OK) break;
        t_step[r] = rumor_now() - t0;
        t0 = rumor_now();
        if (rumor_dp_gradient(plain, m, batch, &loss, err) != RUMOR_OK) break;
        t_plain[r] = rumor_now() - t0;
        speedup[r] = t_one[r] / t_batch[r];
        share[r] = (t_step[r] - t_plain[r]) / t_step[r];
        rc = r == repeat - 1 ? 0 : 1;
    }
    if (rc) {
        cli_error("bench dp: %s", err);
        goto out;
    }
    const char *isa = rumor_isa_name(rumor_isa());
    const double one = rumor_median(t_one, (size_t)repeat) / (double)P * 1e9,
                 bat = rumor_median(t_batch, (size_t)repeat) / (double)P * 1e9,
                 step = rumor_median(t_step, (size_t)repeat) * 1e3, pl = rumor_median(t_plain, (size_t)repeat) * 1e3,
                 sp = rumor_median(speedup, (size_t)repeat), sh = rumor_median(share, (size_t)repeat);
    if (json)
        printf("{\"model\":\"%s\",\"params\":%zu,\"batch\":%d,\"isa\":\"%s\",\"one_ns\":%.2f,\"batch_ns\":%.2f,"
               "\"speedup\":%.3f,\"step_ms\":%.3f,\"step_without_ms\":%.3f,\"noise_share\":%.4f}\n",
               model, P, batch, isa, one, bat, sp, step, pl, sh);
    else
        printf("%-14s %9s %6s %8s %13s %12s %8s %8s %11s %11s\n%-14s %9zu %6d %8s %13.2f %12.2f %7.2fx %8.2f %11.2f %10.1f%%\n",
               "model", "params", "batch", "path", "one ns/param", "batch ns/param", "speedup", "step ms",
               "no-noise ms", "noise share", model, P, batch, isa, one, bat, sp, step, pl, 100.0 * sh);
out:
    free(buf);
    free(t);
    rumor_dp_destroy(&dp);
    rumor_dp_destroy(&plain);
    rumor_noise_destroy(&ns);
    rumor_noise_destroy(&n1);
    rumor_noise_destroy(&n2);
    rumor_model_destroy(&m);
    rumor_backend_destroy(&be);
    return rc ? 1 : 0;
}

int cmd_bench(int argc, char **argv)
{
    if (argc < 3) {
        cli_error("bench needs a benchmark: rumor bench train|net|mix|codec|dp [options]");
        return 2;
    }
    if (strcmp(argv[2], "--help") == 0) {
        printf("usage: rumor bench train|net|mix|codec|dp [options]\n\n"
               "  train  rumor against PyTorch on the same model, data and threads\n"
               "  net    models between two nodes against raw CurveZMQ\n"
               "  mix    the gossip engine's mixing against memcpy of the same bytes\n"
               "  codec  compression codecs' encode and decode_add against memcpy\n"
               "  dp     DP-SGD's noise, one normal at a time and a batch at a time, and its share of a step\n");
        return 0;
    }
    if (strcmp(argv[2], "train") == 0) return bench_train(argc, argv);
    if (strcmp(argv[2], "net") == 0) return bench_net(argc, argv);
    if (strcmp(argv[2], "mix") == 0) return bench_mix(argc, argv);
    if (strcmp(argv[2], "codec") == 0) return bench_codec(argc, argv);
    if (strcmp(argv[2], "dp") == 0) return bench_dp(argc, argv);
    cli_error("unknown benchmark '%s' (expected train, net, mix, codec or dp)", argv[2]);
    return 2;
}
