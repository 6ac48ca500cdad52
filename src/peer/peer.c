/* peer.c - a training peer: node, trainer thread and gossip engine (see peer.h). */
#include "peer_impl.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* ---- checkpoints ---- */

static rumor_err_t save_checkpoint(peer_t *p, char err[RUMOR_ERR_LEN])
{
    const rumor_peer_config_t *c = p->cfg;
    rumor_checkpoint_info_t info = {.input_mean = p->src.mean, .input_std = p->src.std, .seed = c->seed};
    pthread_mutex_lock(&p->mu);
    const size_t nc = rumor_gossip_chunk_count(p->g);
    float *w = malloc(nc * sizeof *w);
    if (!w) {
        pthread_mutex_unlock(&p->mu);
        return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    }
    const double *gw = rumor_gossip_weights(p->g);
    for (size_t i = 0; i < nc; i++) w[i] = (float)gw[i];
    const uint64_t ground = rumor_gossip_round(p->g);
    pthread_mutex_unlock(&p->mu);
    /* theta and momentum change only in the trainer's own gossip points: no lock needed. */
    rumor_st_out_t t[3] = {{.name = "gossip.w", .ndim = 1, .shape = {nc}, .data = w}};
    size_t nt = 1;
    if (c->algo.kind == RUMOR_ALGO_DILOCO) {
        const uint64_t P = rumor_model_param_count(p->m);
        t[nt++] = (rumor_st_out_t){.name = "gossip.theta", .ndim = 1, .shape = {P}, .data = rumor_gossip_outer(p->g)};
        t[nt++] = (rumor_st_out_t){.name = "gossip.momentum", .ndim = 1, .shape = {P}, .data = rumor_gossip_momentum(p->g)};
    }
    info.tensors = t;
    info.n_tensors = nt;
    /* Its state first (a full list drops what comes last, and without these it cannot resume),
     * then the settings it was made with. */
    rumor_checkpoint_extra_add(&info, "train.round", "%ld", p->core.k);
    rumor_checkpoint_extra_add(&info, "train.gossip_round", "%" PRIu64, ground);
    if (p->dp) rumor_checkpoint_extra_add(&info, "train.dp_steps", "%" PRIu64, rumor_dp_steps(p->dp));
    for (int i = 0; i < c->n_settings; i++)
        rumor_checkpoint_extra_add(&info, c->settings[i].key, "%s", c->settings[i].value);
    rumor_err_t rc = rumor_checkpoint_save(p->ckpt_path, p->m, p->o, &info, err);
    free(w);
    return rc;
}

static rumor_err_t load_checkpoint(peer_t *p, char err[RUMOR_ERR_LEN])
{
    const rumor_peer_config_t *c = p->cfg;
    rumor_checkpoint_info_t info;
    rumor_err_t rc = rumor_checkpoint_load(p->ckpt_path, p->m, p->o, &info, err);
    if (rc != RUMOR_OK) return rc;
    /* Its settings are the caller's to compare (rumor_settings_resume); a model, optimizer or
     * algorithm's state that does not fit is refused as it is read. */
    long k, gr;
    if (!rumor_checkpoint_extra_long(&info, "train.round", 0, LONG_MAX, &k) ||
        !rumor_checkpoint_extra_long(&info, "train.gossip_round", 0, LONG_MAX, &gr))
        return rumor_fail(err, RUMOR_EFORMAT, "%s: not a checkpoint of rumor node (no train.round)", p->ckpt_path);
    rumor_st_file_t *f = rumor_st_open(p->ckpt_path, err);
    if (!f) return RUMOR_EFORMAT;
    const size_t nc = rumor_gossip_chunk_count(p->g), P = rumor_model_param_count(p->m);
    const rumor_st_tensor_t *tw = rumor_st_find(f, "gossip.w");
    double *w = malloc(nc * sizeof *w);
    if (!tw || strcmp(tw->dtype, "F32") != 0 || tw->ndim != 1 || tw->shape[0] != nc || !w) {
        rc = rumor_fail(err, RUMOR_ELAYOUT, "%s: gossip.w missing or not %zu floats", p->ckpt_path, nc);
        goto out;
    }
    for (size_t i = 0; i < nc; i++) {
        float v;
        memcpy(&v, (const uint8_t *)tw->data + 4 * i, 4);
        w[i] = v;
    }
    if ((rc = rumor_gossip_restore(p->g, (uint64_t)gr, w, nc, err)) != RUMOR_OK) goto out;
    if (p->dp) {
        /* The privacy already spent is spent: a resumed peer counts on from it. */
        long steps;
        if (!rumor_checkpoint_extra_long(&info, "train.dp_steps", 0, LONG_MAX, &steps)) {
            rc = rumor_fail(err, RUMOR_EINVAL, "%s: written without --dp; its privacy spent is unknown", p->ckpt_path);
            goto out;
        }
        rumor_dp_restore(p->dp, (uint64_t)steps);
        p->epsilon = rumor_dp_epsilon(p->dp);
    }
    if (c->algo.kind == RUMOR_ALGO_DILOCO) {
        const char *names[2] = {"gossip.theta", "gossip.momentum"};
        float *dst[2] = {rumor_gossip_outer(p->g), rumor_gossip_momentum(p->g)};
        for (int i = 0; i < 2; i++) {
            const rumor_st_tensor_t *t = rumor_st_find(f, names[i]);
            if (!t || strcmp(t->dtype, "F32") != 0 || t->ndim != 1 || t->shape[0] != P) {
                rc = rumor_fail(err, RUMOR_ELAYOUT, "%s: %s missing or not %zu floats", p->ckpt_path, names[i], P);
                goto out;
            }
            memcpy(dst[i], t->data, P * sizeof(float));
        }
    }
    p->core.k = k;
out:
    free(w);
    rumor_st_destroy(&f);
    return rc;
}

/* ---- the trainer ---- */

static rumor_err_t evaluate(peer_t *p, char err[RUMOR_ERR_LEN])
{
    return rumor_source_evaluate(&p->src, p->m, &p->test_loss, &p->test_acc, err);
}

/* Wait on p->cv (p->mu held) for a wake-up or at most ms milliseconds. */
static void wait_cv(peer_t *p, uint64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&p->cv, &p->mu, &ts);
}

/* One gossip point: returns false when stopped while waiting. */
static bool gossip_point(peer_t *p, float *x)
{
    bool done = false, woke = false;
    pthread_mutex_lock(&p->mu);
    while (!atomic_load(&p->stop)) {
        const uint64_t now = rumor_now_ms();
        if (rumor_gossip_step(p->g, x, now) == RUMOR_GOSSIP_DONE) {
            done = true;
            break;
        }
        if (!woke && rumor_gossip_snap_wanted(p->g, NULL) >= 0) {
            rumor_node_wake(p->node); /* what holds the buffer may be given up (peer_node.c) */
            woke = true;
        }
        uint64_t until = rumor_gossip_deadline(p->g);
        if (until > now + 100) until = now + 100; /* look at the stop flag now and then */
        wait_cv(p, until > now ? until - now : 1);
    }
    pthread_mutex_unlock(&p->mu);
    rumor_node_wake(p->node); /* the new snapshot's sends */
    return done;
}

/* ---- parameters on a device ---- */

static rumor_err_t device_setup(peer_t *p, char err[RUMOR_ERR_LEN])
{
    rumor_backend_t *be = p->be;
    if (be->ops->host_memory) return RUMOR_OK;
    const size_t P = rumor_model_param_count(p->m);
    p->hx = be->ops->host_alloc(be, P * sizeof(float));
    if (!p->hx) return rumor_fail(err, RUMOR_ENOMEM, "out of pinned host memory for the parameters");
    be->ops->download(be, p->hx, rumor_model_params(p->m), P * sizeof(float));
    return be->ops->sync(be, err);
}

static void device_fini(peer_t *p)
{
    if (!p->be) return;
    if (p->hx) p->be->ops->host_free(p->be, p->hx);
}

/* Put the host mirror's parameters back on the device. */
static rumor_err_t device_push(peer_t *p, char err[RUMOR_ERR_LEN])
{
    rumor_backend_t *be = p->be;
    be->ops->upload(be, rumor_model_params(p->m), p->hx, rumor_model_param_count(p->m) * sizeof(float));
    return be->ops->sync(be, err);
}

/* A gossip point on any backend. With parameters on a device, they go to the mirror on the
 * copy stream once the last step has run, the engine mixes the mirror, and the result goes
 * back. *done as gossip_point returns. */
static rumor_err_t gossip_point_any(peer_t *p, float *x, bool *done, char err[RUMOR_ERR_LEN])
{
    if (!p->hx && !p->gx) {
        *done = gossip_point(p, x);
        return RUMOR_OK;
    }
    /* What the engine mixes, in host memory: the model (the device's mirror), and the
     * optimizer's gossiped state after it. */
    rumor_backend_t *be = p->be;
    const size_t bytes = rumor_model_param_count(p->m) * sizeof(float);
    size_t nv;
    float *gx = p->gx ? p->gx : p->hx, *v = rumor_optim_gossiped(p->o, &nv);
    be->ops->download_async(be, gx, x, bytes);
    if (p->gx) be->ops->download_async(be, (char *)gx + bytes, v, nv * sizeof(float));
    be->ops->wait_copies(be);
    rumor_err_t rc = be->ops->sync(be, err);
    if (rc != RUMOR_OK) return rc;
    *done = gossip_point(p, gx);
    if (!*done) return RUMOR_OK;
    if (p->gx) be->ops->upload(be, v, (char *)gx + bytes, nv * sizeof(float));
    if (!p->hx) { /* gx is the staging buffer */
        be->ops->upload(be, x, gx, bytes);
        return be->ops->sync(be, err);
    }
    if (p->gx) memcpy(p->hx, gx, bytes);
    return device_push(p, err);
}

/* Ask one more member for its model (see pull_ask); true when a whole answer whose hash
 * matches is in pull_buf, with its round and whether that member had finished. *nobody: no
 * member is left to ask. */
static bool ask_one(peer_t *p, bool want_done, uint64_t *round, uint64_t *done, bool *nobody)
{
    pthread_mutex_lock(&p->mu);
    p->pull_want_done = want_done;
    p->pull_state = PULL_WANTED;
    pthread_mutex_unlock(&p->mu);
    rumor_node_wake(p->node);
    const uint64_t until = rumor_now_ms() + (p->cfg->round_timeout_ms > 5000 ? p->cfg->round_timeout_ms : 5000);
    pthread_mutex_lock(&p->mu);
    while (p->pull_state != PULL_DONE && p->pull_state != PULL_NOBODY && !atomic_load(&p->stop) && rumor_now_ms() < until)
        wait_cv(p, 50);
    const bool ok = p->pull_state == PULL_DONE && p->pull_got == p->pull_chunks && p->pull_ok;
    if (p->pull_state == PULL_DONE && !p->pull_ok)
        rumor_log(RUMOR_LOG_WARN, "a member's model did not match its hash: not taken");
    *nobody = p->pull_state == PULL_NOBODY;
    *round = p->pull_round;
    *done = p->pull_done;
    p->pull_state = PULL_NONE; /* late chunks are ignored from now on */
    pthread_mutex_unlock(&p->mu);
    return ok;
}

/* Fall into step with the swarm: ask up to RUMOR_RESYNC_ASKS members for their models, and
 * take one only when two of them confirm each other (the peer core decides, core.h: their
 * mean, at the lower of their rounds): one member alone can never hand this peer a model.
 * Models are checked whole (hash), finite and of a plausible scale against ours. Otherwise
 * this peer keeps its own. *took: it did. */
static rumor_err_t resync(peer_t *p, float *x, rumor_core_resync_why_t why, bool *took, int *answered,
                          char err[RUMOR_ERR_LEN])
{
    const size_t P = rumor_model_param_count(p->m);
    *took = false;
    *answered = 0;
    pthread_mutex_lock(&p->mu);
    if (!p->pull_buf) {
        p->pull_chunks = rumor_chunks(P, RUMOR_GOSSIP_CHUNK_DEFAULT);
        p->pull_buf = malloc(P * sizeof *p->pull_buf);
        p->pull_bits = calloc((p->pull_chunks + 63) / 64, sizeof *p->pull_bits);
    }
    p->n_asked = 0;
    rumor_core_resync_t rs;
    rumor_core_resync_begin(&p->core, &rs, why, P);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < RUMOR_RESYNC_ASKS; i++)
        if (!p->ans[i]) p->ans[i] = malloc(P * sizeof *p->ans[i]);
    if (!p->pull_buf || !p->pull_bits || !p->ans[RUMOR_RESYNC_ASKS - 1])
        return rumor_fail(err, RUMOR_ENOMEM, "out of memory for pulled models");
    if (why == RUMOR_CORE_FINISHED) p->last_resync = rumor_now(); /* (a join's ask does not delay the end's) */
    int kept = 0;
    for (int ask = 0; rumor_core_resync_more(&rs, ask) && !atomic_load(&p->stop); ask++) {
        uint64_t r, done;
        bool nobody;
        if (!ask_one(p, why == RUMOR_CORE_FINISHED, &r, &done, &nobody)) {
            if (nobody) break;
            continue;
        }
        memcpy(p->ans[kept], p->pull_buf, P * sizeof *x);
        pthread_mutex_lock(&p->mu);
        const rumor_core_answer_t a = rumor_core_resync_answer(&p->core, &rs, p->ans[kept], r, done != 0);
        pthread_mutex_unlock(&p->mu);
        if (a == RUMOR_CORE_IMPLAUSIBLE)
            rumor_log(RUMOR_LOG_WARN, "a member's model is not finite or out of all scale with ours: not taken");
        kept += a == RUMOR_CORE_TAKEN;
    }
    *answered = rs.answers;
    uint64_t r = 0;
    pthread_mutex_lock(&p->mu);
    *took = rumor_core_resync_end(&p->core, &rs, x, &r);
    if (*took && why != RUMOR_CORE_FINISHED) rumor_trace_resync(p->trace, rumor_now_us(), r, p->core.k);
    pthread_mutex_unlock(&p->mu);
    if (!*took) {
        if (why == RUMOR_CORE_JOIN && rs.answers > 0 && kept > 0)
            rumor_log(RUMOR_LOG_INFO, "no two members' models confirmed each other: starting from our own");
        else if (why == RUMOR_CORE_JOIN && rs.answers == 0)
            rumor_log(RUMOR_LOG_INFO, "no member sent its model in time: starting from our own");
        else if (why == RUMOR_CORE_BEHIND && kept > 0)
            rumor_log(RUMOR_LOG_INFO, "a member is ahead of us but no second one confirmed its model: keeping our own");
    } else if (why == RUMOR_CORE_FINISHED) {
        rumor_log(RUMOR_LOG_INFO, "the swarm finished (round %" PRIu64 "): took the mean of two members' final models, "
                  "which confirm each other (hashes verified)", r);
    } else {
        rumor_log(RUMOR_LOG_INFO, "%s the swarm at round %" PRIu64 ": took the mean of two members' models, which "
                  "confirm each other (hashes verified)", why == RUMOR_CORE_JOIN ? "joined" : "fell back into step with", r);
    }
    return RUMOR_OK;
}

static void metrics_write(peer_t *p, const rumor_metrics_line_t *l)
{
    char line[512];
    fwrite(line, 1, rumor_metrics_line(line, sizeof line, l), p->metrics);
    fflush(p->metrics);
}

/* A metrics line about the model alone, evaluated now: the one it starts from, or one it took
 * from the swarm (flag "resync", "swarm_final"). */
static rumor_err_t model_line(peer_t *p, const char *flag, char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc = evaluate(p, err);
    if (rc != RUMOR_OK) return rc;
    const rumor_metrics_line_t l = {.t = rumor_now() - p->t0, .t_decimals = 3, .round = p->core.k,
                                    .step = rumor_optim_steps(p->o), .evaluated = true, .text = p->src.text,
                                    .test_loss = p->test_loss,
                                    .test_acc = p->test_acc, .flag = flag};
    metrics_write(p, &l);
    return RUMOR_OK;
}

/* Whether the swarm is over for this peer: every member finished (and there is one), or, out
 * of secure mixing, two did. Two members vouch for the end as they vouch for a pulled model;
 * a peer behind them would otherwise train on, with fewer neighbours each round and a
 * learning rate of its own, into a model of its own. */
static bool swarm_done(peer_t *p)
{
    pthread_mutex_lock(&p->mu);
    const bool over = rumor_core_swarm_over(&p->core, p->n_members, p->n_done);
    pthread_mutex_unlock(&p->mu);
    return over;
}

/* The swarm finished without us (we were behind, or down): take its final model when two
 * members confirm it, else keep ours; either way this peer ends here, as finished
 * (p->swarm_over). Only when no finished member answers at all (they have left) does it go
 * on training alone. */
static rumor_err_t finish_with_swarm(peer_t *p, float *x, char err[RUMOR_ERR_LEN])
{
    bool took = false;
    rumor_err_t rc;
    if (p->cfg->secure_mix) {
        rumor_log(RUMOR_LOG_INFO, "every member finished; under secure mixing no model is lent in the clear: this "
                  "peer ends with its own (round %ld)", p->core.k);
    } else {
        int answered;
        if ((rc = resync(p, p->hx ? p->hx : x, RUMOR_CORE_FINISHED, &took, &answered, err)) != RUMOR_OK) return rc;
        if (!took && answered == 0) {
            rumor_log(RUMOR_LOG_INFO, "every member finished and none answered: training on alone");
            return RUMOR_OK;
        }
        if (!took)
            rumor_log(RUMOR_LOG_INFO, "every member finished, and no two of their final models confirmed each other: "
                      "this peer ends with its own (round %ld)", p->core.k);
        if (took && p->hx && (rc = device_push(p, err)) != RUMOR_OK) return rc;
    }
    p->swarm_over = true;
    rumor_trace_end(p->trace, rumor_now_us(), p->core.k, took);
    if (!took) return RUMOR_OK;
    p->core.k = p->cfg->rounds;
    return model_line(p, "swarm_final", err);
}

/* The privacy budget ran out in this round's steps: this round is the peer's last. */
static void budget_note(peer_t *p)
{
    if (rumor_dp_steps(p->dp) == 0)
        rumor_log(RUMOR_LOG_WARN, "--dp-budget %g is below what one private step spends at noise %g: raise the budget "
                  "or the noise (rumor privacy computes either)", p->cfg->dp.budget, p->cfg->dp.noise);
    else
        rumor_log(RUMOR_LOG_INFO, "privacy budget spent: epsilon %.4g after %" PRIu64 " private steps (budget %g); "
                  "this peer stops training after this round", rumor_dp_epsilon(p->dp), rumor_dp_steps(p->dp),
                  p->cfg->dp.budget);
}

/* The round just mixed: an evaluation when due, and its metrics line. */
static rumor_err_t round_line(peer_t *p, const rumor_core_after_t *after, double wait_s, char err[RUMOR_ERR_LEN])
{
    rumor_gossip_stats_t st;
    pthread_mutex_lock(&p->mu);
    rumor_gossip_stats(p->g, &st);
    const uint64_t out = p->bytes_out, relayed = p->relayed_out;
    const int view = p->view_count;
    pthread_mutex_unlock(&p->mu);
    rumor_err_t rc;
    if (after->evaluate && (rc = evaluate(p, err)) != RUMOR_OK) return rc;
    const rumor_core_facts_t f = {.t = rumor_now() - p->t0, .t_decimals = 3, .step = rumor_optim_steps(p->o),
                                  .peers = view + 1, .bytes_out = out, .relayed = relayed, .wait_s = wait_s,
                                  .deadline_s = (double)st.deadline_ms / 1000.0, .evaluated = after->evaluate,
                                  .text = p->src.text, .test_loss = p->test_loss, .test_acc = p->test_acc,
                                  .private = p->dp != NULL, .epsilon = p->dp ? rumor_dp_epsilon(p->dp) : 0.0};
    if (p->dp) {
        pthread_mutex_lock(&p->mu);
        p->epsilon = f.epsilon;
        pthread_mutex_unlock(&p->mu);
    }
    rumor_metrics_line_t ml;
    rumor_core_line(&p->core, &f, &st, &ml);
    metrics_write(p, &ml);
    return RUMOR_OK;
}

static rumor_err_t train_loop(peer_t *p, char err[RUMOR_ERR_LEN])
{
    const rumor_peer_config_t *c = p->cfg;
    rumor_err_t rc = RUMOR_OK;
    float *x = rumor_model_params(p->m);
    const rumor_core_config_t cc = {.rounds = c->rounds, .local_steps = c->algo.local_steps,
                                    .overlap_steps = c->algo.overlap_steps, .eval_every = c->eval_every,
                                    .checkpoint_every = c->checkpoint_every, .checkpoint_s = 60.0,
                                    .secure_mix = c->secure_mix};
    rumor_core_init(&p->core, &cc, p->g, p->core.k, rumor_now());

    if (p->complete) return evaluate(p, err); /* (its figures for the end: the model is the final one) */
    /* Wait for the swarm, so that round 0 is a round with neighbours; a resumed peer only for
     * two members (or one, in a swarm of two) to ask where the swarm is. */
    bool said = false;
    const double wait_from = rumor_now();
    const int need = c->resume ? (c->min_peers - 1 < 2 ? c->min_peers - 1 : 2) : c->min_peers - 1;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        const int view = p->n_members;
        pthread_mutex_unlock(&p->mu);
        if (view >= need || atomic_load(&p->stop)) break;
        if (!said && rumor_now() - wait_from > 2.0) {
            rumor_log(RUMOR_LOG_INFO, "waiting for %d peers before training (%d in view)", c->min_peers - 1, view);
            said = true;
        }
        /* Not forever: peers that finished or never came must not hold the others. */
        const double limit = c->node.join_timeout_ms ? (double)c->node.join_timeout_ms / 1000.0 : 30.0;
        if (rumor_now() - wait_from > limit) {
            rumor_log(RUMOR_LOG_WARN, "training with %d peers in view after %.0f s (--min-peers %d)", view, limit,
                      c->min_peers);
            break;
        }
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    /* A fresh peer joining a running swarm, or a resumed one: the swarm's model, if two members
     * confirm it (secure mixing never lends a model in the clear: such a peer keeps its own
     * and catches up through gossip). */
    const bool fresh = p->core.k == 0 && !c->resume;
    const long k0 = p->core.k;
    if (!atomic_load(&p->stop) && !c->secure_mix && ((fresh && c->late_join) || c->resume) && !swarm_done(p)) {
        bool took;
        int answered;
        if ((rc = resync(p, p->hx ? p->hx : x, fresh ? RUMOR_CORE_JOIN : RUMOR_CORE_BEHIND, &took, &answered, err)) != RUMOR_OK)
            return rc;
        if (took && p->hx && (rc = device_push(p, err)) != RUMOR_OK) return rc;
        if (took) rumor_optim_anchor(p->o, x);
    }
    /* The model it starts from: the initial one, or the swarm's it fell into step with. */
    if ((p->core.k == 0 || p->core.k != k0) && !atomic_load(&p->stop) &&
        (rc = model_line(p, p->core.k != k0 ? "resync" : NULL, err)) != RUMOR_OK)
        return rc;
    rumor_core_t *core = &p->core;
    double wait_s = 0.0; /* the round's, at its gossip points */
    rumor_trace_start(p->trace, rumor_now_us());
    /* A peer that comes back to a swarm that finished without it ends with it at once; after
     * that, the swarm's end is looked at once a round is mixed, as virtual mode does. */
    if (core->k < c->rounds && swarm_done(p) && (rc = finish_with_swarm(p, x, err)) != RUMOR_OK) return rc;
    while (core->k < c->rounds && !atomic_load(&p->stop) && !p->swarm_over) {
        rumor_core_phase_t ph;
        pthread_mutex_lock(&p->mu);
        rumor_core_phase(core, &ph);
        pthread_mutex_unlock(&p->mu);
        if (core->steps_done == 0) wait_s = 0.0;
        const double work0 = rumor_now();
        if (!core->budget_spent) {
            rumor_trainer_stats_t ts;
            if ((rc = rumor_trainer_steps(p->tr, ph.count, ph.first, &ts, err)) != RUMOR_OK) return rc;
            rumor_core_stepped(core, &ts);
            if (core->budget_spent) budget_note(p);
        }
        if (c->slowdown > 1.0) { /* a straggler: make the local phase last slowdown times as long */
            const double extra = (rumor_now() - work0) * (c->slowdown - 1.0);
            struct timespec d = {(time_t)extra, (long)((extra - (double)(time_t)extra) * 1e9)};
            nanosleep(&d, NULL);
        }
        bool mixed = false;
        const double wait0 = rumor_now();
        pthread_mutex_lock(&p->mu);
        rumor_core_gossip_point(core); /* (the last round closes the engine: it ends on a mix) */
        rumor_trace_phase(p->trace, rumor_now_us(), core->k);
        pthread_mutex_unlock(&p->mu);
        /* (landing an overlapped round spends no privacy: it happens with the budget spent too) */
        if ((rc = gossip_point_any(p, x, &mixed, err)) != RUMOR_OK) return rc;
        if (!mixed) break;
        wait_s += rumor_now() - wait0;
        rumor_core_after_t after;
        rumor_core_mixed(core, rumor_now(), &after);
        rumor_trace_mixed(p->trace, rumor_now_us(), core, &after);
        if (after.landed) continue;
        /* Whether the swarm is over, as it stands at the mix (not after the evaluation). */
        const bool over = swarm_done(p) && rumor_now() - p->last_resync >= RESYNC_EVERY;
        rumor_optim_mixed(p->o, x);
        if ((rc = round_line(p, &after, wait_s, err)) != RUMOR_OK) return rc;
        if (after.finished) break;
        if (over) {
            if ((rc = finish_with_swarm(p, x, err)) != RUMOR_OK) return rc;
            if (p->swarm_over) break;
        }
        if (after.checkpoint) {
            if ((rc = save_checkpoint(p, err)) != RUMOR_OK) return rc;
            rumor_core_checkpointed(core, rumor_now());
        }
    }
    p->interrupted = core->k < c->rounds && !core->budget_spent && !p->swarm_over;
    if ((rc = save_checkpoint(p, err)) != RUMOR_OK) return rc;
    if (!p->interrupted) {
        rumor_checkpoint_info_t info = {.input_mean = p->src.mean, .input_std = p->src.std, .seed = c->seed};
        if ((rc = rumor_checkpoint_save(p->model_path, p->m, NULL, &info, err)) != RUMOR_OK) return rc;
    }
    return RUMOR_OK;
}

/* Training is over: say so to every member, and stay --linger seconds (or until stopped) to
 * answer late peers' pulls with the final model. */
static void linger(peer_t *p)
{
    const float *x = p->hx ? p->hx : rumor_model_params(p->m);
    const size_t P = rumor_model_param_count(p->m);
    char err[RUMOR_ERR_LEN];
    if (p->hx) { /* the mirror is behind by the steps since the last gossip point, if any */
        p->be->ops->download(p->be, p->hx, rumor_model_params(p->m), P * sizeof(float));
        if (p->be->ops->sync(p->be, err) != RUMOR_OK) {
            rumor_log(RUMOR_LOG_WARN, "%s: not lingering", err);
            return;
        }
    }
    uint8_t h[RUMOR_HASH_LEN];
    rumor_hash(h, x, P * sizeof *x);
    pthread_mutex_lock(&p->mu);
    p->final_x = x;
    p->final_round = rumor_gossip_round(p->g);
    memcpy(p->final_hash, h, sizeof h);
    p->finished = true;
    const uint64_t round = p->final_round;
    pthread_mutex_unlock(&p->mu);
    rumor_node_set_done(p->node, round ? round : 1);
    if (p->cfg->linger_ms == 0) return;
    rumor_log(RUMOR_LOG_INFO, "training done; staying %.0f s to answer late peers with the final model (--linger)%s",
              (double)p->cfg->linger_ms / 1000.0, p->cfg->linger_given ? "" : ", or until every member has finished");
    const uint64_t until = rumor_now_ms() + p->cfg->linger_ms;
    uint64_t all_since = 0; /* when every member in view had said it finished, none suspect */
    pthread_mutex_lock(&p->mu);
    while (!atomic_load(&p->stop) && rumor_now_ms() < until) {
        wait_cv(p, 100);
        /* Nobody is left to ask for the final model, unless the user said to wait (a peer
         * still to come that the view does not hold yet). */
        const uint64_t now = rumor_now_ms();
        all_since = p->all_finished ? (all_since ? all_since : now) : 0;
        if (!p->cfg->linger_given && all_since && now - all_since >= LINGER_GRACE_MS) {
            rumor_log(RUMOR_LOG_INFO, "every member has finished: leaving");
            break;
        }
    }
    pthread_mutex_unlock(&p->mu);
}

static void *trainer_main(void *arg)
{
    peer_t *p = arg;
    p->trc = train_loop(p, p->terr);
    if (p->trc == RUMOR_OK && !p->interrupted && !p->swarm_over && !atomic_load(&p->stop)) linger(p);
    atomic_store(&p->trainer_done, true);
    rumor_node_stop(p->node);
    return NULL;
}

/* ---- setup ---- */

/* The data (this peer's shard, or all of its folder), the backend, model and optimizer
 * (initial parameters from --init-seed), and the topology. */
static rumor_err_t setup_model(peer_t *p, char err[RUMOR_ERR_LEN])
{
    const rumor_peer_config_t *c = p->cfg;
    rumor_err_t rc;
    const rumor_source_config_t sc = {.dir = c->data_dir, .spec = &c->spec, .vocab = c->vocab, .limit = c->limit,
                                      .partition = c->partitioned ? &c->partition : NULL, .rank = c->rank,
                                      .peers = c->of, .seed = c->seed, .eval = true};
    if ((rc = rumor_source_load(&p->src, &sc, err)) != RUMOR_OK) return rc;
    p->be = c->backend_ops ? rumor_backend_open(c->backend_ops, c->threads, err)
                           : rumor_backend_new(c->device, c->threads, err);
    if (!p->be) return rumor_last_error();
    /* Images are evaluated in batches of EVAL_BATCH; text in the training batch's windows. */
    const int max_batch = p->src.text || c->batch > EVAL_BATCH ? c->batch : EVAL_BATCH;
    if (!(p->m = rumor_model_new(&c->spec, rumor_source_input(&p->src, &c->spec), p->be, max_batch, err)) ||
        !(p->o = rumor_optim_new(&c->opt, p->be, rumor_model_param_count(p->m), err)))
        return rumor_last_error();
    if ((rc = rumor_model_init(p->m, c->init_seed)) != RUMOR_OK) return rc;
    if (!(p->topo = rumor_topology_new(c->topology, c->seed, err))) return rumor_last_error();
    return RUMOR_OK;
}

/* The send side's buffers: codec encodings of each snapshot, a decoded chunk, the attack's
 * poisoned copies; and the engine's configuration for them into gc. */
static rumor_err_t setup_sending(peer_t *p, rumor_gossip_config_t *gc, char err[RUMOR_ERR_LEN])
{
    const rumor_peer_config_t *c = p->cfg;
    const size_t P = rumor_model_param_count(p->m);
    *gc = (rumor_gossip_config_t){.algo = c->algo, .params = P, .layout = rumor_model_layout_id(p->m),
                                  .round_timeout_ms = c->round_timeout_ms, .robust = c->robust,
                                  .chunk_params = rumor_codec_chunk_params(&c->codec), .secure_mix = c->secure_mix};
    size_t nv;
    if (rumor_optim_gossiped(p->o, &nv)) { /* dadamw's second moment, a tracker: with the model */
        gc->extra = nv;
        if (!(p->gx = malloc((P + nv) * sizeof *p->gx))) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    }
    if (rumor_codec_is_delta(c->codec.id)) {
        /* Top-k travels as compressed differences of a public copy (CHOCO-SGD), whose lineage
         * is new at every start. */
        gc->choco = c->codec;
        gc->choco_gamma = c->consensus_step;
        gc->lineage = rumor_random_u64();
        gc->choco_resumed = c->resume;
    } else if (c->codec.id != RUMOR_CODEC_F32) {
        const size_t cp = gc->chunk_params ? gc->chunk_params : RUMOR_GOSSIP_CHUNK_DEFAULT;
        if (rumor_wire_enc_init(&p->enc, &c->codec, P, cp) != RUMOR_OK)
            return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    }
    /* Any neighbour's codec decodes here: a chunk of at most our chunk size. */
    p->wire_in.cap = RUMOR_GOSSIP_CHUNK_DEFAULT;
    if (!(p->wire_in.dec = malloc(p->wire_in.cap * sizeof *p->wire_in.dec)))
        return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    if (rumor_attack_poisons(&c->attack)) {
        rumor_err_t rc = rumor_poison_init(&p->poison, P);
        if (rc != RUMOR_OK) return rumor_fail(err, rc, "out of memory");
        rumor_rng_init2(&p->attack_rng, c->seed, 0xa77ac, (uint64_t)c->rank);
    }
    return RUMOR_OK;
}

/* The node (whose identity is the engine's "self"), secure mixing's keys, the engine (from
 * the initial parameters, or the checkpoint's), DP-SGD and the trainer. */
static rumor_err_t setup_node(peer_t *p, rumor_gossip_config_t *gc, char err[RUMOR_ERR_LEN])
{
    const rumor_peer_config_t *c = p->cfg;
    rumor_err_t rc;
    rumor_node_config_t nc = c->node;
    nc.layout = rumor_model_layout_id(p->m); /* (its hellos say what it trains: members of another model stay apart) */
    if (!(p->node = rumor_node_new(&nc, err))) return rumor_last_error();
    rumor_addr_t self;
    if ((rc = rumor_addr_parse(&self, rumor_node_address(p->node), err)) != RUMOR_OK) return rc;
    memcpy(gc->self, self.key, 32);
    p->traced_n = -1;
    if (c->trace && c->trace[0] && !(p->trace = rumor_trace_open(c->trace, self.key, c->resume, err))) return rumor_last_error();
    gc->boot = rumor_node_boot(p->node);
    if (c->secure_mix &&
        !(p->secmix = rumor_secmix_new(rumor_node_secret_key(p->node), rumor_node_boot(p->node), gc->layout, err)))
        return rumor_last_error();
    if (c->listening) c->listening(rumor_node_address(p->node));
    if (c->resume && (rc = rumor_checkpoint_load(p->ckpt_path, p->m, NULL, NULL, err)) != RUMOR_OK) return rc;
    if ((rc = device_setup(p, err)) != RUMOR_OK) return rc;
    if (!(p->g = rumor_gossip_new(gc, p->topo, p->hx ? p->hx : rumor_model_params(p->m), err)))
        return rumor_last_error();
    if (c->dp.on) {
        /* A real node's batches and noise are secret: from libsodium, never from --seed, so
         * neither a neighbour who knows the settings nor this node's own restart redraws them. */
        rumor_noise_t *ns = rumor_noise_new_secret(err);
        if (!ns || !(p->dp = rumor_dp_new(&c->dp, p->m, p->src.shard.examples, c->batch, &ns, err))) return rumor_last_error();
    }
    rumor_trainer_config_t tc = {.batch = c->batch, .seed = c->seed, .sched = c->sched, .lr = c->opt.lr,
                                 .total_steps = c->rounds * c->algo.local_steps, .dp = p->dp,
                                 .clip_grad = c->clip_grad};
    rumor_source_trainer(&p->src, NULL, &tc);
    return (p->tr = rumor_trainer_new(&tc, p->m, p->o, err)) ? RUMOR_OK : rumor_last_error();
}

/* A resumed run's state, secure mixing's round floor, the metrics file (a resumed one cut back
 * to the checkpoint's round) and command.txt. */
static rumor_err_t setup_files(peer_t *p, char err[RUMOR_ERR_LEN])
{
    const rumor_peer_config_t *c = p->cfg;
    rumor_err_t rc;
    if (c->resume && (rc = load_checkpoint(p, err)) != RUMOR_OK) return rc;
    if (c->secure_mix) {
        snprintf(p->mask_path, sizeof p->mask_path, "%s/secure-mix.round", c->run_dir);
        if ((rc = peer_mask_floor(p, err)) != RUMOR_OK) return rc;
    }
    /* Killed while it lingered, and started again (a supervisor restarts what stopped): its
     * run is complete, and it is a finished peer again, not a failure that restarts forever. */
    if (c->resume && p->core.k >= c->rounds) {
        p->complete = true;
        rumor_log(RUMOR_LOG_INFO, "%s: this run is complete (%ld rounds of %ld): staying as a finished peer (give a "
                  "larger --rounds to train on)", p->ckpt_path, p->core.k, c->rounds);
    }
    char mpath[1100];
    snprintf(mpath, sizeof mpath, "%s/metrics.jsonl", c->run_dir);
    if (c->resume && (rc = rumor_trim_lines(mpath, "round", (uint64_t)p->core.k, err)) != RUMOR_OK) return rc;
    if (!(p->metrics = rumor_fopen_private(mpath, c->resume)))
        return rumor_fail(err, RUMOR_EIO, "%s: %s", mpath, strerror(errno));
    if (c->command_line) {
        char cpath[1100];
        snprintf(cpath, sizeof cpath, "%s/command.txt", c->run_dir);
        FILE *f = fopen(cpath, "w");
        if (f) {
            fprintf(f, "%s\n", c->command_line);
            fclose(f);
        }
    }
    return RUMOR_OK;
}

/* Everything setup made, in the order that frees nothing still in use. */
static void teardown(peer_t *p, bool mu_init)
{
    /* Sends the emulated network still held never left. */
    for (int i = 0; i < p->n_delayed; i++) {
        rumor_gossip_release(p->g, &p->delayed[i]->s, true);
        free(p->delayed[i]);
    }
    for (int i = 0; i < p->n_retry; i++) {
        rumor_gossip_release(p->g, &p->retry[i]->s, false);
        peer_send_ctx_free(p->retry[i]);
    }
    /* The node first: closing its sockets releases every snapshot the engine lent. */
    rumor_secmix_destroy(&p->secmix); /* it borrows the node's key */
    rumor_node_destroy(&p->node);
    rumor_gossip_destroy(&p->g);
    if (mu_init) {
        pthread_mutex_destroy(&p->mu);
        pthread_mutex_destroy(&p->pool_mu);
        pthread_cond_destroy(&p->cv);
    }
    for (int i = 0; i < p->n_mask_pool; i++) free(p->mask_pool[i]);
    if (p->metrics) fclose(p->metrics);
    char terr[RUMOR_ERR_LEN];
    if (rumor_trace_close(p->trace, terr) != RUMOR_OK) rumor_log(RUMOR_LOG_WARN, "the trace: %s", terr);
    rumor_topology_destroy(&p->topo);
    rumor_trainer_destroy(&p->tr); /* its buffers are the backend's, as the others' below */
    rumor_dp_destroy(&p->dp);
    rumor_optim_destroy(&p->o);
    free(p->gx);
    rumor_model_destroy(&p->m);
    device_fini(p);
    rumor_backend_destroy(&p->be);
    free(p->pull_buf);
    free(p->pull_bits);
    for (int i = 0; i < RUMOR_RESYNC_ASKS; i++) free(p->ans[i]);
    rumor_poison_fini(&p->poison);
    rumor_wire_enc_fini(&p->enc);
    free(p->wire_in.dec);
    rumor_source_fini(&p->src);
}

rumor_err_t rumor_peer_run(const rumor_peer_config_t *c, rumor_peer_result_t *res, char err[RUMOR_ERR_LEN])
{
    peer_t p = {.cfg = c};
    rumor_err_t rc = RUMOR_OK;
    bool mu_init = false;
    memset(res, 0, sizeof *res);
    res->test_acc = res->test_loss = NAN;
    p.test_acc = p.test_loss = NAN;
    if (c->rounds < 1 || c->rounds > 100000000)
        return rumor_fail(err, RUMOR_EINVAL, "--rounds %ld: expected 1..100000000", c->rounds);
    if (c->batch < 1 || c->batch > 65536) return rumor_fail(err, RUMOR_EINVAL, "--batch %d: expected 1..65536", c->batch);
    if ((rc = rumor_optim_config_check(&c->opt, err)) != RUMOR_OK) return rc;
    if ((rc = rumor_make_dirs(c->run_dir, 0755, err)) != RUMOR_OK) return rc;
    snprintf(p.ckpt_path, sizeof p.ckpt_path, "%s/" RUMOR_PEER_CHECKPOINT, c->run_dir);
    snprintf(p.model_path, sizeof p.model_path, "%s/model.safetensors", c->run_dir);
    struct stat sb;
    if (!c->resume && stat(p.ckpt_path, &sb) == 0)
        return rumor_fail(err, RUMOR_EINVAL, "%s exists: continue that run with --resume, or use another --run-dir",
                          p.ckpt_path);
    if (c->resume && stat(p.ckpt_path, &sb) != 0)
        return rumor_fail(err, RUMOR_EINVAL, "--resume: %s: %s", p.ckpt_path, strerror(errno));
    rumor_gossip_config_t gc;
    if ((rc = setup_model(&p, err)) != RUMOR_OK || (rc = setup_sending(&p, &gc, err)) != RUMOR_OK ||
        (rc = setup_node(&p, &gc, err)) != RUMOR_OK || (rc = setup_files(&p, err)) != RUMOR_OK)
        goto out;
    pthread_mutex_init(&p.mu, NULL);
    pthread_mutex_init(&p.pool_mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    mu_init = true;
    rumor_node_on_chunk(p.node, peer_chunk_cb, &p);
    rumor_node_on_tick(p.node, peer_tick_cb, &p);
    rumor_node_on_status(p.node, peer_status_cb, &p);
    rumor_node_on_pull(p.node, peer_pull_cb, &p);
    p.emulate = c->emu_latency_ms > 0 || c->emu_bandwidth_mbps > 0 || c->emu_loss > 0;
    if (p.emulate) {
        rumor_rng_init2(&p.emu_rng, c->seed, 0xe3a1, (uint64_t)c->rank);
        rumor_node_set_tick_ms(p.node, 1);
    }
    p.t0 = rumor_now();
    pthread_t th;
    if (pthread_create(&th, NULL, trainer_main, &p) != 0) {
        rc = rumor_fail(err, RUMOR_ENOMEM, "cannot start the trainer thread");
        goto out;
    }
    char nerr[RUMOR_ERR_LEN];
    rumor_err_t nrc = rumor_node_run(p.node, nerr);
    atomic_store(&p.stop, true);
    pthread_mutex_lock(&p.mu);
    pthread_cond_broadcast(&p.cv);
    pthread_mutex_unlock(&p.mu);
    pthread_join(th, NULL);
    if (p.trc != RUMOR_OK) {
        rc = p.trc;
        snprintf(err, RUMOR_ERR_LEN, "%s", p.terr);
    } else if (nrc != RUMOR_OK) {
        rc = nrc;
        snprintf(err, RUMOR_ERR_LEN, "%s", nerr);
    }
    res->rounds = p.core.k;
    res->test_acc = p.test_acc;
    res->test_loss = p.test_loss;
    res->interrupted = p.interrupted;
out:
    teardown(&p, mu_init);
    return rc;
}
