/* optim_dump.c - rumor's optimizers and learning-rate schedules over given parameters and
 * gradients, the trajectory written out for test_optim_torch.py to recompute with
 * torch.optim and torch.optim.lr_scheduler.
 *
 * usage: optim_dump MODEL C,H,W,CLASSES
 *            prints the model's flat layout: "params N", then one line a tensor,
 *            "tensor NAME OFFSET COUNT NDIM D0 [D1 ...]"
 *        optim_dump MODEL C,H,W,CLASSES IN.safetensors OUT.safetensors [options]
 *            IN holds "params" (N) and "grads" (S x N); OUT gets "params" (S x N, the
 *            parameters after each of the S steps) and "lr" (S, the rate each step used)
 * options: --optimizer sgd|adamw|qgm|dadamw, --lr X, --momentum X, --nesterov,
 *          --weight-decay X, --beta1 X, --beta2 X, --eps X (the rumor_optim_config_t fields),
 *          --decay all|matrices, --schedule SPEC, --warmup W, --epoch-steps E.
 *
 * The model is built only for its layout: the optimizer runs on the flat buffer of the
 * model's size, padding included, as the trainer runs it. "--decay matrices" restricts weight
 * decay to the model's tensors of two or more dimensions the way rumor_trainer_new does for a
 * language model (rumor_model_matrices, rumor_optim_decay_only); "all" leaves every parameter
 * decayed, as the trainer does for the image models. Each step's rate is
 * rumor_schedule_lr(step, S, E), step counted from 0 and the run's S steps its total, as
 * rumor_trainer_steps asks it.
 */
#include "backend.h"
#include "model.h"
#include "optim.h"
#include "safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what)
{
    fprintf(stderr, "optim_dump: %s\n", what);
    return 1;
}

/* A float32 tensor of the input file by name, with the element count the caller expects
 * (its data is not aligned in the file: copied out). NULL with a message otherwise. */
static float *take(const rumor_st_file_t *f, const char *name, size_t count)
{
    const rumor_st_tensor_t *t = rumor_st_find(f, name);
    if (!t || strcmp(t->dtype, "F32") != 0 || t->end - t->begin != count * sizeof(float)) {
        fprintf(stderr, "optim_dump: input needs %s, F32 of %zu elements\n", name, count);
        return NULL;
    }
    float *h = malloc(count * sizeof *h);
    if (h) memcpy(h, t->data, count * sizeof *h);
    return h;
}

static void print_layout(const rumor_model_t *m)
{
    printf("params %zu\n", rumor_model_param_count(m));
    for (int i = 0; i < rumor_model_tensor_count(m); i++) {
        const rumor_tensor_info_t *t = rumor_model_tensor(m, i);
        printf("tensor %s %zu %zu %d", t->name, t->offset, t->count, t->ndim);
        for (int d = 0; d < t->ndim; d++) printf(" %d", t->shape[d]);
        printf("\n");
    }
}

/* Run S steps of the optimizer cfg on the model's layout and write the trajectory. */
static int run(rumor_backend_t *be, rumor_model_t *m, const char *in, const char *outp,
               const rumor_optim_config_t *cfg, bool matrices, const rumor_schedule_t *sched,
               long epoch_steps)
{
    char err[RUMOR_ERR_LEN];
    const size_t n = rumor_model_param_count(m);
    rumor_st_file_t *f = rumor_st_open(in, err);
    if (!f) return fail(err);
    const rumor_st_tensor_t *gt = rumor_st_find(f, "grads");
    const long S = gt && gt->ndim == 2 && gt->shape[1] == n ? (long)gt->shape[0] : 0;
    float *p0 = take(f, "params", n), *gall = S > 0 ? take(f, "grads", (size_t)S * n) : NULL;
    rumor_st_destroy(&f);
    const size_t rows = (size_t)(S > 0 ? S : 1);
    float *traj = malloc(rows * n * sizeof *traj), *lrs = malloc(rows * sizeof *lrs);
    float *p = be->ops->alloc(be, n * sizeof *p), *g = be->ops->alloc(be, n * sizeof *g);
    rumor_optim_t *o = NULL;
    int rc = 1;
    if (!p0 || !gall || !traj || !lrs || !p || !g) {
        fail(S > 0 ? "out of memory" : "input needs grads, F32 of S x params");
        goto done;
    }
    if (!(o = rumor_optim_new(cfg, be, n, err))) {
        fail(err);
        goto done;
    }
    if (matrices) {
        size_t at[2 * RUMOR_MODEL_MAX_TENSORS];
        if (rumor_optim_decay_only(o, at, rumor_model_matrices(m, at), err) != RUMOR_OK) {
            fail(err);
            goto done;
        }
    }
    be->ops->upload(be, p, p0, n * sizeof *p);
    for (long s = 0; s < S; s++) {
        lrs[s] = rumor_schedule_lr(sched, cfg->lr, s, S, epoch_steps);
        be->ops->upload(be, g, gall + (size_t)s * n, n * sizeof *g);
        rumor_optim_step(o, p, g, lrs[s]);
        be->ops->download(be, traj + (size_t)s * n, p, n * sizeof *traj);
    }
    const rumor_st_out_t out[] = {
        {.name = "params", .ndim = 2, .shape = {(uint64_t)S, n}, .data = traj},
        {.name = "lr", .ndim = 1, .shape = {(uint64_t)S}, .data = lrs},
    };
    if (rumor_st_write(outp, out, 2, NULL, 0, err) != RUMOR_OK) fail(err);
    else rc = 0;
done:
    rumor_optim_destroy(&o);
    if (p) be->ops->free(be, p);
    if (g) be->ops->free(be, g);
    free(p0), free(gall), free(traj), free(lrs);
    return rc;
}

int main(int argc, char **argv)
{
    char err[RUMOR_ERR_LEN];
    if (argc != 3 && argc < 5) return fail("usage: optim_dump MODEL C,H,W,CLASSES [IN OUT [options]]");
    rumor_optim_config_t cfg = rumor_optim_defaults();
    cfg.momentum = 0.0f; /* only what the command line states */
    rumor_schedule_t sched;
    if (rumor_schedule_parse(&sched, "constant", err) != RUMOR_OK) return fail(err);
    bool matrices = false;
    long epoch_steps = 1;
    for (int i = 5; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--nesterov") == 0) {
            cfg.nesterov = true;
            continue;
        }
        if (!v) return fail("an option without its value");
        i++;
        if (strcmp(a, "--optimizer") == 0) {
            if (rumor_optim_kind_parse(&cfg.kind, v, err) != RUMOR_OK) return fail(err);
        } else if (strcmp(a, "--lr") == 0) cfg.lr = strtof(v, NULL);
        else if (strcmp(a, "--momentum") == 0) cfg.momentum = strtof(v, NULL);
        else if (strcmp(a, "--weight-decay") == 0) cfg.weight_decay = strtof(v, NULL);
        else if (strcmp(a, "--beta1") == 0) cfg.beta1 = strtof(v, NULL);
        else if (strcmp(a, "--beta2") == 0) cfg.beta2 = strtof(v, NULL);
        else if (strcmp(a, "--eps") == 0) cfg.eps = strtof(v, NULL);
        else if (strcmp(a, "--decay") == 0 && (strcmp(v, "all") == 0 || strcmp(v, "matrices") == 0))
            matrices = strcmp(v, "matrices") == 0;
        else if (strcmp(a, "--schedule") == 0) {
            const long w = sched.warmup; /* parse clears it */
            if (rumor_schedule_parse(&sched, v, err) != RUMOR_OK) return fail(err);
            sched.warmup = w;
        } else if (strcmp(a, "--warmup") == 0) sched.warmup = strtol(v, NULL, 10);
        else if (strcmp(a, "--epoch-steps") == 0 && (epoch_steps = strtol(v, NULL, 10)) > 0) continue;
        else {
            fprintf(stderr, "optim_dump: bad option %s %s\n", a, v);
            return 1;
        }
    }
    if (rumor_optim_config_check(&cfg, err) != RUMOR_OK) return fail(err);

    rumor_model_spec_t spec;
    rumor_model_input_t in = {0};
    if (rumor_model_spec_parse(&spec, argv[1], err) != RUMOR_OK) return fail(err);
    if (sscanf(argv[2], "%d,%d,%d,%d", &in.c, &in.h, &in.w, &in.classes) != 4)
        return fail("input: expected C,H,W,CLASSES");
    in.ids = spec.kind == RUMOR_MODEL_GPT;
    rumor_backend_t *be = rumor_backend_new("cpu", 1, err);
    if (!be) return fail(err);
    rumor_model_t *m = rumor_model_new(&spec, in, be, 1, err);
    int rc = 1;
    if (!m) fail(err);
    else if (argc == 3) print_layout(m), rc = 0;
    else rc = run(be, m, argv[3], argv[4], &cfg, matrices, &sched, epoch_steps);
    rumor_model_destroy(&m);
    rumor_backend_destroy(&be);
    return rc;
}
