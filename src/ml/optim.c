/* optim.c - SGD, AdamW, schedules. */
#include "optim.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rumor_optim {
    rumor_optim_config_t cfg;
    rumor_backend_t *be;
    size_t n;
    long steps;
    float *s[2]; /* sgd: momentum; adamw: exp_avg, exp_avg_sq; qgm: momentum, anchor */
    /* What the gossip mixes with the model, one block: dadamw's exp_avg_sq (s[1] points here),
     * then with tracking the tracker. */
    float *gossiped;
    size_t n_gossiped;
    float *tracker;   /* tracking: the estimate of the swarm's mean gradient (in gossiped) */
    float *last_grad; /* tracking: the gradient the tracker last took in */
    bool taken;       /* tracking: a gradient was taken in; its step waits for the round's mix */
    float *tmp;  /* qgm: the sgd op's buffer for each step's own gradient */
    double lr_sum; /* qgm: learning rates summed since the anchor */
    bool anchored;
    size_t *decay;      /* the ranges weight decay applies to, {offset, count} each (NULL: all) */
    int n_decay;
};

rumor_optim_config_t rumor_optim_defaults(void)
{
    return (rumor_optim_config_t){.kind = RUMOR_OPT_SGD, .lr = 0.05f, .momentum = 0.9f,
                                  .nesterov = false, .weight_decay = 0.0f, .beta1 = 0.9f,
                                  .beta2 = 0.999f, .eps = 1e-8f};
}

static const char *const KIND_NAMES[] = {[RUMOR_OPT_SGD] = "sgd", [RUMOR_OPT_ADAMW] = "adamw",
                                         [RUMOR_OPT_QGM] = "qgm", [RUMOR_OPT_DADAMW] = "dadamw"};

rumor_err_t rumor_optim_kind_parse(rumor_opt_kind_t *out, const char *s, char err[RUMOR_ERR_LEN])
{
    for (size_t k = 0; k < RUMOR_ARRAY_LEN(KIND_NAMES); k++)
        if (strcmp(s, KIND_NAMES[k]) == 0) {
            *out = (rumor_opt_kind_t)k;
            return RUMOR_OK;
        }
    return rumor_fail(err, RUMOR_EINVAL, "unknown optimizer '%s' (expected sgd, adamw, qgm or dadamw)", s);
}

const char *rumor_optim_kind_name(rumor_opt_kind_t kind)
{
    return (unsigned)kind < RUMOR_ARRAY_LEN(KIND_NAMES) ? KIND_NAMES[kind] : "sgd";
}

rumor_err_t rumor_optim_config_check(const rumor_optim_config_t *c, char err[RUMOR_ERR_LEN])
{
    if (!isfinite(c->lr) || c->lr <= 0.0f || c->lr > 10.0f)
        return rumor_fail(err, RUMOR_EINVAL, "--lr %g: expected a learning rate in (0, 10]", c->lr);
    if (!isfinite(c->momentum) || c->momentum < 0.0f || c->momentum >= 1.0f)
        return rumor_fail(err, RUMOR_EINVAL, "--momentum %g: expected a value in [0, 1)", c->momentum);
    if (c->nesterov && c->momentum == 0.0f)
        return rumor_fail(err, RUMOR_EINVAL, "--nesterov needs a momentum above 0");
    if (!isfinite(c->weight_decay) || c->weight_decay < 0.0f || c->weight_decay > 1.0f)
        return rumor_fail(err, RUMOR_EINVAL, "--weight-decay %g: expected a value in [0, 1]",
                          c->weight_decay);
    if (!(c->beta1 >= 0.0f && c->beta1 < 1.0f && c->beta2 >= 0.0f && c->beta2 < 1.0f))
        return rumor_fail(err, RUMOR_EINVAL, "adamw betas must lie in [0, 1)");
    if (!(c->eps > 0.0f && c->eps < 1.0f))
        return rumor_fail(err, RUMOR_EINVAL, "adamw eps must lie in (0, 1)");
    return RUMOR_OK;
}

/* The kind's own state buffers (s[]): sgd's momentum, or two; tracking's come after them. */
static int kind_states(rumor_opt_kind_t kind) { return kind == RUMOR_OPT_SGD ? 1 : 2; }

rumor_optim_t *rumor_optim_new(const rumor_optim_config_t *cfg, rumor_backend_t *be, size_t n,
                               char err[RUMOR_ERR_LEN])
{
    rumor_optim_t *o = calloc(1, sizeof *o);
    if (!o) goto nomem;
    o->cfg = *cfg;
    o->be = be;
    o->n = n;
    const size_t blocks = (cfg->kind == RUMOR_OPT_DADAMW) + (cfg->tracking ? 1u : 0u);
    if (blocks) {
        if (!(o->gossiped = be->ops->alloc(be, blocks * n * sizeof(float)))) goto nomem;
        o->n_gossiped = blocks * n;
    }
    if (cfg->kind == RUMOR_OPT_DADAMW) o->s[1] = o->gossiped;
    for (int i = 0; i < kind_states(cfg->kind); i++)
        if (!o->s[i] && !(o->s[i] = be->ops->alloc(be, n * sizeof(float)))) goto nomem;
    if (cfg->tracking) {
        o->tracker = o->gossiped + (blocks - 1) * n;
        if (!(o->last_grad = be->ops->alloc(be, n * sizeof(float)))) goto nomem;
    }
    if (cfg->kind == RUMOR_OPT_QGM && !(o->tmp = be->ops->alloc(be, n * sizeof(float)))) goto nomem;
    return o;
nomem:
    rumor_optim_destroy(&o);
    rumor_fail(err, RUMOR_ENOMEM, "out of memory for optimizer state");
    return NULL;
}

void rumor_optim_destroy(rumor_optim_t **self_p)
{
    if (!self_p || !*self_p) return;
    rumor_optim_t *o = *self_p;
    for (int i = 0; i < 2; i++)
        if (o->s[i] && o->s[i] != o->gossiped) o->be->ops->free(o->be, o->s[i]);
    if (o->gossiped) o->be->ops->free(o->be, o->gossiped);
    if (o->last_grad) o->be->ops->free(o->be, o->last_grad);
    if (o->tmp) o->be->ops->free(o->be, o->tmp);
    free(o->decay);
    free(o);
    *self_p = NULL;
}

rumor_err_t rumor_optim_decay_only(rumor_optim_t *o, const size_t *at, int n, char err[RUMOR_ERR_LEN])
{
    size_t *d = malloc(2 * (size_t)(n > 0 ? n : 1) * sizeof *d);
    if (!d) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    memcpy(d, at, 2 * (size_t)n * sizeof *d);
    free(o->decay);
    o->decay = d, o->n_decay = n;
    return RUMOR_OK;
}

/* The optimizer's pass over [a, b) with weight decay wd. */
static void step_range(rumor_optim_t *o, float *params, float *grads, float lr, size_t a, size_t b, float wd,
                       float bc1, float bc2)
{
    const rumor_optim_config_t *c = &o->cfg;
    if (b <= a) return;
    if (c->kind == RUMOR_OPT_SGD)
        o->be->ops->sgd(o->be, params + a, o->s[0] + a, grads + a, b - a, lr, c->momentum, wd, c->nesterov);
    else if (c->kind == RUMOR_OPT_QGM) /* the own gradient's part (Nesterov: (1 + mu) of it); the momentum's below */
        o->be->ops->sgd(o->be, params + a, o->tmp + a, grads + a, b - a, c->nesterov ? lr * (1.0f + c->momentum) : lr,
                        0.0f, wd, false);
    else
        o->be->ops->adamw(o->be, params + a, o->s[0] + a, o->s[1] + a, grads + a, b - a, lr, c->beta1, c->beta2,
                          c->eps, wd, bc1, bc2);
}

static void qgm_momentum(rumor_optim_t *o, float *params, float lr)
{
    const float mu = o->cfg.momentum;
    o->be->ops->axpy(o->be, params, o->s[0], -lr * (o->cfg.nesterov ? mu * mu : mu), o->n);
    o->lr_sum += lr;
}

/* Gradient tracking (Pu and Nedić 2021), adapted after the mix: the tracker takes in the change
 * of this peer's gradient since the last one, the round mixes the trackers, and the step then
 * follows the mixed tracker. The swarm's trackers sum to its gradients' sum as long as every mix
 * keeps their sum; on a complete graph the step is the centralized one on the mean gradient. */
bool rumor_optim_after_mix(const rumor_optim_t *o) { return o->cfg.tracking; }

bool rumor_optim_lead(rumor_optim_t *o, float *dir)
{
    if (!o->taken) return false;
    o->be->ops->copy(o->be, dir, o->tracker, o->n * sizeof(float));
    o->taken = false;
    return true;
}

void rumor_optim_take(rumor_optim_t *o, float *grads)
{
    const struct rumor_backend_ops *ops = o->be->ops;
    ops->axpy(o->be, o->tracker, o->last_grad, -1.0f, o->n);
    ops->axpy(o->be, o->tracker, grads, 1.0f, o->n);
    ops->copy(o->be, o->last_grad, grads, o->n * sizeof(float));
    ops->zero(o->be, grads, o->n * sizeof(float));
    o->taken = true;
}

void rumor_optim_step(rumor_optim_t *o, float *params, float *grads, float lr)
{
    const rumor_optim_config_t *c = &o->cfg;
    if (c->kind == RUMOR_OPT_QGM && !o->anchored) rumor_optim_anchor(o, params);
    o->steps++;
    /* In double, as torch.optim does: 1 - beta2^t is tiny early on. */
    const float bc1 = (float)(1.0 - pow(c->beta1, (double)o->steps));
    const float bc2 = (float)(1.0 - pow(c->beta2, (double)o->steps));
    if (!o->decay || c->weight_decay == 0.0f) {
        step_range(o, params, grads, lr, 0, o->n, c->weight_decay, bc1, bc2);
        if (c->kind == RUMOR_OPT_QGM) qgm_momentum(o, params, lr);
        return;
    }
    size_t at = 0; /* every element once: the gaps without decay, the ranges with it */
    for (int i = 0; i < o->n_decay; i++) {
        const size_t a = o->decay[2 * i], b = a + o->decay[2 * i + 1];
        step_range(o, params, grads, lr, at, a, 0.0f, bc1, bc2);
        step_range(o, params, grads, lr, a, b, c->weight_decay, bc1, bc2);
        at = b;
    }
    step_range(o, params, grads, lr, at, o->n, 0.0f, bc1, bc2);
    if (c->kind == RUMOR_OPT_QGM) qgm_momentum(o, params, lr);
}

void rumor_optim_mixed(rumor_optim_t *o, const float *params)
{
    if (o->cfg.kind != RUMOR_OPT_QGM) return;
    if (!o->anchored || !(o->lr_sum > 0.0)) { /* no step since: nothing moved by training */
        rumor_optim_anchor(o, params);
        return;
    }
    const float mu = o->cfg.momentum, k = (float)((1.0 - mu) / o->lr_sum);
    float *m = o->s[0], *anchor = o->s[1];
    o->be->ops->scale(o->be, m, mu, o->n);
    o->be->ops->axpy(o->be, m, anchor, k, o->n);
    o->be->ops->axpy(o->be, m, params, -k, o->n);
    rumor_optim_anchor(o, params);
}

float *rumor_optim_gossiped(rumor_optim_t *o, size_t *floats)
{
    if (floats) *floats = o->n_gossiped;
    return o->gossiped;
}

void rumor_optim_anchor(rumor_optim_t *o, const float *params)
{
    if (o->cfg.kind != RUMOR_OPT_QGM) return;
    o->be->ops->copy(o->be, o->s[1], params, o->n * sizeof(float));
    o->lr_sum = 0.0;
    o->anchored = true;
}

long rumor_optim_steps(const rumor_optim_t *o) { return o->steps; }
void rumor_optim_set_steps(rumor_optim_t *o, long steps) { o->steps = steps; }
const rumor_optim_config_t *rumor_optim_config(const rumor_optim_t *o) { return &o->cfg; }

int rumor_optim_state_count(const rumor_optim_t *o)
{
    return kind_states(o->cfg.kind) + (o->cfg.tracking ? 2 : 0);
}

const char *rumor_optim_state_name(const rumor_optim_t *o, int i)
{
    const int base = kind_states(o->cfg.kind);
    if (i < 0 || i >= rumor_optim_state_count(o)) return NULL;
    if (i >= base) return i == base ? "tracker" : "last_grad";
    if (o->cfg.kind == RUMOR_OPT_SGD) return i == 0 ? "momentum" : NULL;
    if (o->cfg.kind == RUMOR_OPT_QGM) return i == 0 ? "momentum" : i == 1 ? "anchor" : NULL;
    return i == 0 ? "exp_avg" : i == 1 ? "exp_avg_sq" : NULL;
}

float *rumor_optim_state(rumor_optim_t *o, int i)
{
    const int base = kind_states(o->cfg.kind);
    if (i < 0 || i >= rumor_optim_state_count(o)) return NULL;
    return i < base ? o->s[i] : i == base ? o->tracker : o->last_grad;
}

/* ---- schedules ---- */

rumor_err_t rumor_schedule_parse(rumor_schedule_t *out, const char *spec, char err[RUMOR_ERR_LEN])
{
    memset(out, 0, sizeof *out);
    if (strcmp(spec, "constant") == 0) {
        out->kind = RUMOR_SCHED_CONSTANT;
        return RUMOR_OK;
    }
    if (strcmp(spec, "cosine") == 0) {
        out->kind = RUMOR_SCHED_COSINE;
        return RUMOR_OK;
    }
    if (strncmp(spec, "step:", 5) == 0) {
        char *end;
        errno = 0;
        long every = strtol(spec + 5, &end, 10);
        if (end != spec + 5 && *end == ',' && !errno && every >= 1 && every <= 100000) {
            const char *g = end + 1;
            double gamma = strtod(g, &end);
            if (end != g && !*end && isfinite(gamma) && gamma > 0.0 && gamma <= 1.0) {
                out->kind = RUMOR_SCHED_STEP;
                out->every_epochs = (int)every;
                out->gamma = (float)gamma;
                return RUMOR_OK;
            }
        }
        return rumor_fail(err, RUMOR_EINVAL,
                          "schedule '%s': expected step:EPOCHS,GAMMA with EPOCHS >= 1 and GAMMA in (0, 1]",
                          spec);
    }
    return rumor_fail(err, RUMOR_EINVAL,
                      "unknown schedule '%s' (expected constant, step:EPOCHS,GAMMA or cosine)", spec);
}

void rumor_schedule_format(char *buf, size_t len, const rumor_schedule_t *s)
{
    switch (s->kind) {
    case RUMOR_SCHED_CONSTANT: snprintf(buf, len, "constant"); break;
    case RUMOR_SCHED_COSINE: snprintf(buf, len, "cosine"); break;
    case RUMOR_SCHED_STEP: snprintf(buf, len, "step:%d,%.9g", s->every_epochs, (double)s->gamma); break;
    }
}

float rumor_schedule_lr(const rumor_schedule_t *s, float base_lr, long step, long total,
                        long steps_per_epoch)
{
    double lr = base_lr;
    if (s->kind == RUMOR_SCHED_STEP) {
        long epoch = step / (steps_per_epoch > 0 ? steps_per_epoch : 1);
        lr *= pow(s->gamma, (double)(epoch / s->every_epochs));
    } else if (s->kind == RUMOR_SCHED_COSINE && total > s->warmup) {
        double t = (double)(step - s->warmup) / (double)(total - s->warmup);
        if (t < 0.0) t = 0.0;
        if (t > 1.0) t = 1.0;
        lr *= 0.5 * (1.0 + cos(M_PI * t));
    }
    if (s->warmup > 0 && step < s->warmup) lr *= (double)(step + 1) / (double)s->warmup;
    return (float)lr;
}
