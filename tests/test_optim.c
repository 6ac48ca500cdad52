/* test_optim.c - optimizer state and bookkeeping, and learning-rate schedules. */
#include "backend.h"
#include "check.h"
#include "model.h"
#include "optim.h"

#include <math.h>
#include <string.h>

static void test_schedules(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_schedule_t s;
    CHECK_RC(rumor_schedule_parse(&s, "constant", err));
    CHECK(rumor_schedule_lr(&s, 0.1f, 500, 1000, 100) == 0.1f);
    /* step:2,0.5 halves every 2 epochs of 100 steps. */
    CHECK_RC(rumor_schedule_parse(&s, "step:2,0.5", err));
    CHECK_NEAR(rumor_schedule_lr(&s, 0.1f, 199, 1000, 100), 0.1, 1e-7);
    CHECK_NEAR(rumor_schedule_lr(&s, 0.1f, 200, 1000, 100), 0.05, 1e-7);
    CHECK_NEAR(rumor_schedule_lr(&s, 0.1f, 450, 1000, 100), 0.025, 1e-7);
    /* cosine: base at 0, half at the middle, ~0 at the end. */
    CHECK_RC(rumor_schedule_parse(&s, "cosine", err));
    CHECK_NEAR(rumor_schedule_lr(&s, 0.2f, 0, 1000, 100), 0.2, 1e-7);
    CHECK_NEAR(rumor_schedule_lr(&s, 0.2f, 500, 1000, 100), 0.1, 1e-6);
    CHECK_NEAR(rumor_schedule_lr(&s, 0.2f, 1000, 1000, 100), 0.0, 1e-7);
    /* warm-up: linear from lr/W to lr over W steps, then the schedule from there. */
    s.warmup = 10;
    CHECK_NEAR(rumor_schedule_lr(&s, 0.2f, 0, 1010, 100), 0.02, 1e-7);
    CHECK_NEAR(rumor_schedule_lr(&s, 0.2f, 9, 1010, 100), 0.2, 1e-6);
    CHECK_NEAR(rumor_schedule_lr(&s, 0.2f, 510, 1010, 100), 0.1, 1e-6);
    const char *bad[] = {"", "linear", "step:", "step:0,0.5", "step:2", "step:2,0", "step:2,1.5",
                         "step:2,x", "step:2,0.5x", "cosine:3"};
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(bad); i++)
        CHECK_MSG(rumor_schedule_parse(&s, bad[i], err) == RUMOR_EINVAL, "schedule '%s'", bad[i]);
}

static void test_config_checks(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_optim_config_t c = rumor_optim_defaults();
    CHECK_RC(rumor_optim_config_check(&c, err));
    c.lr = -1;
    CHECK(rumor_optim_config_check(&c, err) == RUMOR_EINVAL && strstr(err, "--lr"));
    c = rumor_optim_defaults();
    c.momentum = 1.0f;
    CHECK(rumor_optim_config_check(&c, err) == RUMOR_EINVAL && strstr(err, "--momentum"));
    c = rumor_optim_defaults();
    c.weight_decay = NAN;
    CHECK(rumor_optim_config_check(&c, err) == RUMOR_EINVAL);
    rumor_opt_kind_t k;
    CHECK(rumor_optim_kind_parse(&k, "adam", err) == RUMOR_EINVAL);
    CHECK_RC(rumor_optim_kind_parse(&k, "adamw", err));
    CHECK(k == RUMOR_OPT_ADAMW);
}

/* AdamW over several steps against a double-precision reference of the same recurrences,
 * which checks the bias correction the optimizer derives from its step count. */
static void test_adamw_steps(rumor_backend_t *be)
{
    char err[RUMOR_ERR_LEN];
    rumor_optim_config_t c = rumor_optim_defaults();
    c.kind = RUMOR_OPT_ADAMW;
    c.weight_decay = 0.01f;
    rumor_optim_t *o = rumor_optim_new(&c, be, 3, err);
    CHECK(o && rumor_optim_state_count(o) == 2);
    CHECK(strcmp(rumor_optim_state_name(o, 1), "exp_avg_sq") == 0);
    float p[3] = {1, -2, 0.5f}, g[3];
    double pr[3] = {1, -2, 0.5}, m[3] = {0}, v[3] = {0};
    for (int t = 1; t <= 5; t++) {
        for (int i = 0; i < 3; i++) g[i] = (float)(0.1 * (i + 1) * (t % 2 ? 1 : -0.5));
        for (int i = 0; i < 3; i++) {
            m[i] = 0.9 * m[i] + 0.1 * g[i];
            v[i] = 0.999 * v[i] + 0.001 * (double)g[i] * g[i];
            double mh = m[i] / (1 - pow(0.9, t)), vh = v[i] / (1 - pow(0.999, t));
            pr[i] = pr[i] * (1 - 0.01 * 0.01) - 0.01 * mh / (sqrt(vh) + 1e-8);
        }
        rumor_optim_step(o, p, g, 0.01f);
    }
    CHECK(rumor_optim_steps(o) == 5);
    for (int i = 0; i < 3; i++) CHECK_NEAR(p[i], pr[i], 1e-5);
    CHECK(g[0] == 0.0f && g[1] == 0.0f && g[2] == 0.0f);
    rumor_optim_destroy(&o);
    CHECK(o == NULL);
}

/* Weight decay on chosen ranges only: with zero gradients an AdamW step moves nothing but the
 * decay, p (1 - lr wd) inside the ranges and p outside; SGD's coupled decay likewise. And a gpt
 * model's matrices are exactly its tensors of two or more dimensions. */
static void test_decay_only(rumor_backend_t *be)
{
    char err[RUMOR_ERR_LEN];
    for (int kind = 0; kind < 2; kind++) {
        rumor_optim_config_t c = rumor_optim_defaults();
        c.kind = kind ? RUMOR_OPT_ADAMW : RUMOR_OPT_SGD;
        c.momentum = 0.0f;
        c.weight_decay = 0.1f;
        rumor_optim_t *o = rumor_optim_new(&c, be, 10, err);
        const size_t at[] = {1, 2, 6, 3}; /* [1, 3) and [6, 9) */
        CHECK_RC(rumor_optim_decay_only(o, at, 2, err));
        float p[10], g[10] = {0};
        for (int i = 0; i < 10; i++) p[i] = (float)(i + 1);
        rumor_optim_step(o, p, g, 0.5f);
        for (int i = 0; i < 10; i++) {
            const bool in = (i >= 1 && i < 3) || (i >= 6 && i < 9);
            CHECK_NEAR(p[i], (i + 1) * (in ? 1.0 - 0.5 * 0.1 : 1.0), 1e-6);
        }
        rumor_optim_destroy(&o);
    }
    rumor_model_spec_t spec;
    CHECK_RC(rumor_model_spec_parse(&spec, "gpt:2,2,16,8", err));
    rumor_model_t *m = rumor_model_new(&spec, (rumor_model_input_t){1, 1, 8, 256, false}, be, 1, err);
    CHECK(m != NULL);
    if (!m) return;
    size_t at[2 * RUMOR_MODEL_MAX_TENSORS], want = 0, got = 0;
    const int n = rumor_model_matrices(m, at);
    for (int i = 0; i < rumor_model_tensor_count(m); i++) {
        const rumor_tensor_info_t *t = rumor_model_tensor(m, i);
        bool covered = false;
        for (int k = 0; k < n; k++) covered |= t->offset >= at[2 * k] && t->offset + t->count <= at[2 * k] + at[2 * k + 1];
        CHECK_MSG(covered == (t->ndim >= 2), "%s (%d dimensions) %s", t->name, t->ndim, covered ? "decays" : "does not");
        want += t->ndim >= 2 ? t->count : 0;
    }
    for (int k = 0; k < n; k++) got += at[2 * k + 1];
    CHECK(n >= 1 && got == want);
    rumor_model_destroy(&m);
}

/* qgm (QG-DSGDm): a step moves by lr (g + wd x + momentum m) with m held (Nesterov: lr ((1 +
 * momentum)(g + wd x) + momentum^2 m)); a mixed round sets m <- momentum m + (1 - momentum)
 * (anchor - x) / (lr summed since), x the mixed model. Known answers, worked by hand; and with
 * no round at all (rumor train) it is plain SGD. */
static void test_qgm(rumor_backend_t *be)
{
    char err[RUMOR_ERR_LEN];
    rumor_opt_kind_t k;
    CHECK_RC(rumor_optim_kind_parse(&k, "qgm", err));
    CHECK(k == RUMOR_OPT_QGM && strcmp(rumor_optim_kind_name(k), "qgm") == 0);
    rumor_optim_config_t c = rumor_optim_defaults();
    c.kind = RUMOR_OPT_QGM;
    c.momentum = 0.5f;
    c.weight_decay = 0.1f;
    /* Nesterov (QG-DSGDm-N): a step moves by lr ((1 + momentum)(g + wd x) + momentum^2 m). */
    c.nesterov = true;
    CHECK_RC(rumor_optim_config_check(&c, err));
    rumor_optim_t *q = rumor_optim_new(&c, be, 2, err);
    CHECK(q != NULL);
    if (!q) return;
    float y[2] = {1.0f, -2.0f}, h[2] = {0.5f, 1.0f};
    rumor_optim_step(q, y, h, 0.1f); /* m = 0 */
    CHECK_NEAR(y[0], 1.0 - 0.1 * 1.5 * (0.5 + 0.1), 1e-6);
    CHECK_NEAR(y[1], -2.0 - 0.1 * 1.5 * (1.0 - 0.2), 1e-6);
    y[0] = 0.5f, y[1] = -1.5f; /* mixed: m = 0.5 (anchor - y) / 0.1 = (2.5, -2.5) */
    rumor_optim_mixed(q, y);
    h[0] = h[1] = 0.0f;
    rumor_optim_step(q, y, h, 0.2f);
    CHECK_NEAR(y[0], 0.5 - 0.2 * (1.5 * 0.1 * 0.5 + 0.25 * 2.5), 1e-6);
    CHECK_NEAR(y[1], -1.5 - 0.2 * (1.5 * 0.1 * -1.5 + 0.25 * -2.5), 1e-6);
    rumor_optim_destroy(&q);
    c.nesterov = false;
    rumor_optim_t *o = rumor_optim_new(&c, be, 2, err);
    CHECK(o != NULL);
    if (!o) return;
    CHECK(rumor_optim_state_count(o) == 2 && strcmp(rumor_optim_state_name(o, 1), "anchor") == 0);
    float x[2] = {1.0f, -2.0f}, g[2] = {0.5f, 1.0f};
    /* two steps at lr 0.1 and 0.3, m = 0: x -= lr (g + 0.1 x) */
    rumor_optim_step(o, x, g, 0.1f);
    CHECK(g[0] == 0.0f && g[1] == 0.0f);
    CHECK_NEAR(x[0], 1.0 - 0.1 * (0.5 + 0.1), 1e-6);
    CHECK_NEAR(x[1], -2.0 - 0.1 * (1.0 - 0.2), 1e-6);
    g[0] = 0.5f, g[1] = 1.0f;
    const double a0 = x[0], a1 = x[1];
    rumor_optim_step(o, x, g, 0.3f);
    CHECK_NEAR(x[0], a0 - 0.3 * (0.5 + 0.1 * a0), 1e-6);
    CHECK_NEAR(x[1], a1 - 0.3 * (1.0 + 0.1 * a1), 1e-6);
    /* the round mixes: x becomes (0.5, -1.5); m = 0.5 (anchor - x) / 0.4, anchor (1, -2) */
    x[0] = 0.5f, x[1] = -1.5f;
    rumor_optim_mixed(o, x);
    const float *m = rumor_optim_state(o, 0), *anchor = rumor_optim_state(o, 1);
    CHECK_NEAR(m[0], 0.5 * (1.0 - 0.5) / 0.4, 1e-6);
    CHECK_NEAR(m[1], 0.5 * (-2.0 + 1.5) / 0.4, 1e-6);
    CHECK(anchor[0] == 0.5f && anchor[1] == -1.5f);
    /* the next step carries the momentum: x -= lr (g + wd x + 0.5 m) */
    g[0] = 0.0f, g[1] = 0.0f;
    rumor_optim_step(o, x, g, 0.2f);
    CHECK_NEAR(x[0], 0.5 - 0.2 * (0.1 * 0.5 + 0.5 * 0.625), 1e-6);
    CHECK_NEAR(x[1], -1.5 - 0.2 * (0.1 * -1.5 + 0.5 * -0.625), 1e-6);
    /* a second round: m = 0.5 m + 0.5 (anchor - x) / 0.2 */
    const double m0 = m[0], xb = x[0];
    rumor_optim_mixed(o, x);
    CHECK_NEAR(m[0], 0.5 * m0 + 0.5 * (0.5 - xb) / 0.2, 1e-5);
    /* a model taken from the swarm: the anchor moves, the momentum stays */
    const float taken[2] = {7.0f, 8.0f};
    const double m_before = m[0];
    rumor_optim_anchor(o, taken);
    rumor_optim_mixed(o, taken); /* no step since: nothing moved by training */
    CHECK(anchor[0] == 7.0f && m[0] == (float)m_before);
    rumor_optim_destroy(&o);
    /* sgd and adamw ignore rounds */
    c = rumor_optim_defaults();
    o = rumor_optim_new(&c, be, 2, err);
    rumor_optim_mixed(o, x);
    rumor_optim_anchor(o, x);
    CHECK(rumor_optim_state(o, 0)[0] == 0.0f);
    rumor_optim_destroy(&o);
}

/* A ring's or a complete graph's mix of one float per peer. */
static float mix_of(const float *v, int peers, int i, bool complete)
{
    if (complete) {
        float sum = 0.0f;
        for (int k = 0; k < peers; k++) sum += v[k];
        return sum / (float)peers;
    }
    return (v[(i + peers - 1) % peers] + v[i] + v[(i + 1) % peers]) / 3.0f;
}

/* Gradient tracking. Known answers: a gradient goes into the tracker and waits; the step
 * follows the tracker as the mix left it; after a mix has replaced the tracker with T, a new
 * gradient g2 makes it T - g1 + g2. dadamw's gossiped block is its second moment, then the
 * tracker. And the properties tracking exists for: peers of a ring, each with its own quadratic
 * f_i(x) = (x - b_i)^2 / 2, plain D-PSGD at a constant rate settles with the peers apart and off
 * the swarm's optimum mean(b), while with tracking every peer reaches mean(b); and on a complete
 * graph, AdamW along the tracker is centralized AdamW on the mean gradient, step for step. */
static void test_tracking(rumor_backend_t *be)
{
    char err[RUMOR_ERR_LEN];
    rumor_optim_config_t c = rumor_optim_defaults();
    c.momentum = 0.0f;
    c.tracking = true;
    rumor_optim_t *o = rumor_optim_new(&c, be, 2, err);
    CHECK(o != NULL);
    if (!o) return;
    size_t nv;
    float *t = rumor_optim_gossiped(o, &nv);
    CHECK(t != NULL && nv == 2 && rumor_optim_state_count(o) == 3 && rumor_optim_after_mix(o));
    CHECK(strcmp(rumor_optim_state_name(o, 1), "tracker") == 0 && strcmp(rumor_optim_state_name(o, 2), "last_grad") == 0);
    CHECK(rumor_optim_state(o, 1) == t && rumor_optim_state_name(o, 3) == NULL);
    float x[2] = {1.0f, -2.0f}, g[2] = {0.5f, 1.0f}, d[2] = {0};
    CHECK(!rumor_optim_lead(o, d)); /* nothing taken in yet */
    rumor_optim_take(o, g);
    CHECK(g[0] == 0.0f && g[1] == 0.0f && t[0] == 0.5f && t[1] == 1.0f && x[0] == 1.0f);
    CHECK(rumor_optim_lead(o, d) && d[0] == 0.5f && d[1] == 1.0f);
    rumor_optim_step(o, x, d, 0.1f);
    CHECK_NEAR(x[0], 1.0 - 0.1 * 0.5, 1e-6);
    CHECK_NEAR(x[1], -2.0 - 0.1 * 1.0, 1e-6);
    CHECK(!rumor_optim_lead(o, d) && rumor_optim_steps(o) == 1); /* one step a gradient */
    t[0] = 2.0f, t[1] = -1.0f; /* a mix */
    g[0] = 1.5f, g[1] = 0.0f;
    rumor_optim_take(o, g);
    CHECK_NEAR(t[0], 2.0 - 0.5 + 1.5, 1e-6);
    CHECK_NEAR(t[1], -1.0 - 1.0 + 0.0, 1e-6);
    CHECK(rumor_optim_lead(o, d));
    rumor_optim_step(o, x, d, 0.1f);
    CHECK_NEAR(x[0], 0.95 - 0.1 * 3.0, 1e-6);
    CHECK_NEAR(x[1], -2.1 - 0.1 * -2.0, 1e-6);
    rumor_optim_destroy(&o);
    c.kind = RUMOR_OPT_DADAMW;
    o = rumor_optim_new(&c, be, 3, err);
    CHECK(o != NULL);
    if (!o) return;
    t = rumor_optim_gossiped(o, &nv);
    CHECK(nv == 6 && rumor_optim_state(o, 1) == t && rumor_optim_state(o, 2) == t + 3);
    CHECK(strcmp(rumor_optim_state_name(o, 1), "exp_avg_sq") == 0 && rumor_optim_state_count(o) == 4);
    rumor_optim_destroy(&o);
    c = rumor_optim_defaults();
    o = rumor_optim_new(&c, be, 3, err);
    CHECK(o != NULL && rumor_optim_gossiped(o, &nv) == NULL && nv == 0 && !rumor_optim_after_mix(o));
    rumor_optim_destroy(&o);

    enum { PEERS = 5 };
    const double b[PEERS] = {3.0, -1.0, 0.5, 7.0, -4.0}, want = (3.0 - 1.0 + 0.5 + 7.0 - 4.0) / PEERS;
    for (int run = 0; run < 3; run++) { /* plain and tracking on the ring; AdamW on the complete graph */
        const bool tracking = run > 0, complete = run == 2;
        rumor_optim_t *q[PEERS] = {0}, *central = NULL;
        float xs[PEERS], ys = 0.0f;
        c = rumor_optim_defaults();
        c.momentum = 0.0f;
        if (complete) c.kind = RUMOR_OPT_ADAMW;
        central = rumor_optim_new(&c, be, 1, err);
        c.tracking = tracking;
        for (int i = 0; i < PEERS; i++) {
            q[i] = rumor_optim_new(&c, be, 1, err);
            CHECK(q[i] != NULL);
            if (!q[i] || !central) return;
            xs[i] = 0.0f;
        }
        const float lr = complete ? 0.05f : 0.3f;
        double apart = 0.0; /* complete: the farthest a peer got from the centralized run */
        for (int r = 0; r < 400; r++) {
            for (int i = 0; i < PEERS; i++) { /* a step, then the mix */
                float gi = (float)(xs[i] - b[i]), di;
                if (!tracking) {
                    rumor_optim_step(q[i], &xs[i], &gi, lr);
                    continue;
                }
                if (rumor_optim_lead(q[i], &di)) rumor_optim_step(q[i], &xs[i], &di, lr);
                if (complete) apart = fmax(apart, fabs(xs[i] - ys));
                gi = (float)(xs[i] - b[i]);
                rumor_optim_take(q[i], &gi);
            }
            if (complete) { /* the mean gradient at ys, for the next round's step */
                float gc = (float)(ys - want);
                rumor_optim_step(central, &ys, &gc, lr);
            }
            float nx[PEERS], nt[PEERS], ts[PEERS];
            for (int i = 0; i < PEERS; i++) ts[i] = tracking ? *rumor_optim_gossiped(q[i], NULL) : 0.0f;
            for (int i = 0; i < PEERS; i++) nx[i] = mix_of(xs, PEERS, i, complete), nt[i] = mix_of(ts, PEERS, i, complete);
            for (int i = 0; i < PEERS; i++) {
                xs[i] = nx[i];
                if (tracking) *rumor_optim_gossiped(q[i], NULL) = nt[i];
            }
        }
        double worst = 0.0;
        for (int i = 0; i < PEERS; i++) {
            worst = fmax(worst, fabs(xs[i] - want));
            rumor_optim_destroy(&q[i]);
        }
        rumor_optim_destroy(&central);
        if (complete) CHECK(apart < 1e-5 && worst < 1e-2);
        else if (tracking) CHECK(worst < 1e-5);
        else CHECK(worst > 0.05);
    }
}

int main(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_backend_t *be = rumor_backend_new("cpu", 1, err);
    test_schedules();
    test_config_checks();
    test_adamw_steps(be);
    test_decay_only(be);
    test_qgm(be);
    test_tracking(be);
    rumor_backend_destroy(&be);
    return check_done();
}
