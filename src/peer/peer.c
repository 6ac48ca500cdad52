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
    rumor_st_out_t t[3];
    size_t nt;
    float *w;
    uint64_t ground;
    rumor_err_t rc = swarm_state_tensors(p, t, &nt, &w, &ground, err);
    if (rc != RUMOR_OK) return rc;
    info.tensors = t;
    info.n_tensors = nt;
    /* Its state first (a full list drops what comes last, and without these it cannot resume),
     * then the settings it was made with. */
    rumor_checkpoint_extra_add(&info, "train.round", "%ld", p->core.k);
    rumor_checkpoint_extra_add(&info, "train.gossip_round", "%" PRIu64, ground);
    if (p->dp) rumor_checkpoint_extra_add(&info, "train.dp_steps", "%" PRIu64, rumor_dp_steps(p->dp));
    for (int i = 0; i < c->n_settings; i++)
        rumor_checkpoint_extra_add(&info, c->settings[i].key, "%s", c->settings[i].value);
    rc = rumor_checkpoint_save(p->ckpt_path, p->m, p->o, &info, err);
    free(w);
    return rc;
}

static rumor_err_t load_checkpoint(peer_t *p, char err[RUMOR_ERR_LEN])
{
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
    if ((rc = swarm_state_read(p, f, p->ckpt_path, (uint64_t)gr, err)) != RUMOR_OK) goto out;
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
    p->core.k = k;
out:
    rumor_st_destroy(&f);
    return rc;
}

/* ---- privacy reserved before it is spent: run-dir/dp.steps ---- */

/* Write that up to `upto` private steps may have been taken (atomically, owner-only). */
static bool dp_write(const peer_t *p, uint64_t upto)
{
    char path[4200], buf[32], err[RUMOR_ERR_LEN];
    snprintf(path, sizeof path, "%s/dp.steps", p->cfg->run_dir);
    const int n = snprintf(buf, sizeof buf, "%" PRIu64 "\n", upto);
    if (rumor_write_atomic(path, &(rumor_piece_t){buf, (uint64_t)n}, 1, 0600, true, err) == RUMOR_OK) return true;
    rumor_log(RUMOR_LOG_ERROR, "privacy: %s", err);
    return false;
}

static bool dp_reserve(void *arg, uint64_t upto) { return dp_write(arg, upto); }

/* The private steps an earlier life of this peer may have taken (dp.steps, written before
 * them): counted as spent, whatever its last checkpoint says. */
static rumor_err_t dp_floor(peer_t *p, char err[RUMOR_ERR_LEN])
{
    char path[4200];
    snprintf(path, sizeof path, "%s/dp.steps", p->cfg->run_dir);
    FILE *f = fopen(path, "r");
    unsigned long long v = 0;
    if (!f && errno != ENOENT) return rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
    if (f && fscanf(f, "%llu", &v) != 1) v = ULLONG_MAX;
    if (f) fclose(f);
    if (v == ULLONG_MAX) return rumor_fail(err, RUMOR_EFORMAT, "%s: not a count of private steps", path);
    if (rumor_dp_set_reserve(p->dp, dp_reserve, p, (uint64_t)v))
        rumor_log(RUMOR_LOG_INFO, "privacy: an earlier run of this peer may have taken up to %llu private steps: "
                  "counted as spent (epsilon %.4g)", v, rumor_dp_epsilon(p->dp));
    p->epsilon = rumor_dp_epsilon(p->dp);
    return RUMOR_OK;
}

/* ---- the trainer ---- */

static rumor_err_t evaluate(peer_t *p, char err[RUMOR_ERR_LEN])
{
    return rumor_source_evaluate(&p->src, p->m, &p->test_loss, &p->test_acc, err);
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
        *done = swarm_gossip(p, x, 0, NULL) == 1;
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
    *done = swarm_gossip(p, gx, 0, NULL) == 1;
    if (!*done) return RUMOR_OK;
    if (p->gx) be->ops->upload(be, v, (char *)gx + bytes, nv * sizeof(float));
    if (!p->hx) { /* gx is the staging buffer */
        be->ops->upload(be, x, gx, bytes);
        return be->ops->sync(be, err);
    }
    if (p->gx) memcpy(p->hx, gx, bytes);
    return device_push(p, err);
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
    swarm_metrics_write(p, &l);
    return RUMOR_OK;
}

/* Every member finished without us (we were behind, or down): the swarm's final model if two
 * members confirm it (swarm_finish_with), on the device too, and its metrics line. */
static rumor_err_t finish_with_swarm(peer_t *p, float *x, char err[RUMOR_ERR_LEN])
{
    bool took;
    rumor_err_t rc = swarm_finish_with(p, p->hx ? p->hx : x, &took, err);
    if (rc != RUMOR_OK || !took) return rc;
    if (p->hx && (rc = device_push(p, err)) != RUMOR_OK) return rc;
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
    rumor_err_t rc;
    if (after->evaluate && (rc = evaluate(p, err)) != RUMOR_OK) return rc;
    const rumor_core_facts_t f = {.step = rumor_optim_steps(p->o), .evaluated = after->evaluate, .text = p->src.text,
                                  .test_loss = p->test_loss, .test_acc = p->test_acc, .private = p->dp != NULL,
                                  .epsilon = p->dp ? rumor_dp_epsilon(p->dp) : 0.0};
    if (p->dp) {
        pthread_mutex_lock(&p->mu);
        p->epsilon = f.epsilon;
        pthread_mutex_unlock(&p->mu);
    }
    swarm_round_line(p, &f, wait_s);
    return RUMOR_OK;
}

static rumor_err_t train_loop(peer_t *p, char err[RUMOR_ERR_LEN])
{
    const rumor_peer_config_t *c = p->cfg;
    rumor_err_t rc = RUMOR_OK;
    float *x = rumor_model_params(p->m);
    swarm_core_init(p, p->core.k);

    if (p->complete) return evaluate(p, err); /* (its figures for the end: the model is the final one) */
    /* Wait for the swarm, so that round 0 is a round with neighbours; a resumed peer only for
     * two members (or one, in a swarm of two) to ask where the swarm is. */
    bool said = false;
    const double wait_from = rumor_now();
    const int need = c->resume ? (c->min_peers - 1 < 2 ? c->min_peers - 1 : 2) : c->min_peers - 1;
    for (;;) {
        const int view = swarm_members(p);
        if (view >= need || swarm_stopped(p)) break;
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
    if (!swarm_stopped(p) && !c->secure_mix && ((fresh && c->late_join) || c->resume) && !swarm_over(p, false)) {
        bool took;
        int answered;
        if ((rc = swarm_resync(p, p->hx ? p->hx : x, fresh ? RUMOR_CORE_JOIN : RUMOR_CORE_BEHIND, &took, &answered, err)) != RUMOR_OK)
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
    swarm_started(p);
    /* A peer that comes back to a swarm that finished without it ends with it at once; after
     * that, the swarm's end is looked at once a round is mixed, as virtual mode does. */
    if (core->k < c->rounds && swarm_over(p, false) && (rc = finish_with_swarm(p, x, err)) != RUMOR_OK) return rc;
    while (core->k < c->rounds && !atomic_load(&p->stop) && !p->swarm_over) {
        rumor_core_phase_t ph;
        swarm_phase(p, &ph);
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
        swarm_gossip_point(p);
        /* (landing an overlapped round spends no privacy: it happens with the budget spent too) */
        if ((rc = gossip_point_any(p, x, &mixed, err)) != RUMOR_OK) return rc;
        if (!mixed) break;
        wait_s += rumor_now() - wait0;
        rumor_core_after_t after;
        swarm_mixed(p, &after);
        if (after.landed) continue;
        /* Whether the swarm is over, as it stands at the mix (not after the evaluation). */
        const bool over = swarm_over(p, true);
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
    /* No private step after this checkpoint: what it says is exact, so a clean stop reserves
     * nothing beyond it. */
    if (p->dp && !dp_write(p, rumor_dp_steps(p->dp)))
        return rumor_fail(err, RUMOR_EIO, "%s/dp.steps: could not be written (the log says why)", c->run_dir);
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
    char err[RUMOR_ERR_LEN];
    if (p->hx) { /* the mirror is behind by the steps since the last gossip point, if any */
        p->be->ops->download(p->be, p->hx, rumor_model_params(p->m), p->P * sizeof(float));
        if (p->be->ops->sync(p->be, err) != RUMOR_OK) {
            rumor_log(RUMOR_LOG_WARN, "%s: not lingering", err);
            return;
        }
    }
    swarm_set_final(p, x);
    if (p->cfg->linger_ms == 0) return;
    rumor_log(RUMOR_LOG_INFO, "training done; staying %.0f s to answer late peers with the final model (--linger)%s",
              (double)p->cfg->linger_ms / 1000.0, p->cfg->linger_given ? "" : ", or until every member has finished");
    (void)swarm_linger(p, 0, NULL);
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
 * (initial parameters from --init-seed). */
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
    return rumor_model_init(p->m, c->init_seed);
}

/* The swarm half (swarm.h) for this model: its node, what it mixes (the model, and the
 * optimizer's gossiped state after it: dadamw's second moment), the engine from the initial
 * parameters or the checkpoint's; then DP-SGD and the trainer. */
static rumor_err_t setup_swarm(peer_t *p, char err[RUMOR_ERR_LEN])
{
    const rumor_peer_config_t *c = p->cfg;
    rumor_err_t rc;
    const size_t P = rumor_model_param_count(p->m);
    size_t nv = 0;
    if (rumor_optim_gossiped(p->o, &nv) && !(p->gx = malloc((P + nv) * sizeof *p->gx)))
        return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    const size_t tl = rumor_model_layout_text(p->m, NULL, 0);
    char *text = malloc(tl + 1);
    if (!text) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    rumor_model_layout_text(p->m, text, tl + 1);
    if ((rc = swarm_open(p, err)) == RUMOR_OK) rc = swarm_layout(p, P, nv, rumor_model_layout_id(p->m), text, tl, err);
    free(text);
    if (rc != RUMOR_OK) return rc;
    if (c->resume && (rc = rumor_checkpoint_load(p->ckpt_path, p->m, NULL, NULL, err)) != RUMOR_OK) return rc;
    if ((rc = device_setup(p, err)) != RUMOR_OK ||
        (rc = swarm_engine(p, p->hx ? p->hx : rumor_model_params(p->m), err)) != RUMOR_OK)
        return rc;
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
    if (p->dp && (rc = dp_floor(p, err)) != RUMOR_OK) return rc;
    if ((rc = swarm_ready(p, err)) != RUMOR_OK) return rc;
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
    if ((rc = swarm_metrics_open(p, mpath, c->resume, err)) != RUMOR_OK) return rc;
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

/* The trainer's half, then the swarm's (its node is no longer running). */
static void teardown(peer_t *p)
{
    rumor_trainer_destroy(&p->tr); /* its buffers are the backend's, as the others' below */
    rumor_dp_destroy(&p->dp);
    rumor_optim_destroy(&p->o);
    free(p->gx);
    rumor_model_destroy(&p->m);
    device_fini(p);
    rumor_backend_destroy(&p->be);
    rumor_source_fini(&p->src);
    swarm_destroy(&p);
}

/* Where it writes, and whether the run folder is the one it was told: fresh, or to resume. */
static rumor_err_t run_paths(peer_t *p, char err[RUMOR_ERR_LEN])
{
    const rumor_peer_config_t *c = p->cfg;
    rumor_err_t rc = rumor_make_dirs(c->run_dir, 0755, err);
    if (rc != RUMOR_OK) return rc;
    snprintf(p->ckpt_path, sizeof p->ckpt_path, "%s/" RUMOR_PEER_CHECKPOINT, c->run_dir);
    snprintf(p->model_path, sizeof p->model_path, "%s/model.safetensors", c->run_dir);
    struct stat sb;
    if (!c->resume && stat(p->ckpt_path, &sb) == 0)
        return rumor_fail(err, RUMOR_EINVAL, "%s exists: continue that run with --resume, or use another --run-dir",
                          p->ckpt_path);
    if (c->resume && stat(p->ckpt_path, &sb) != 0)
        return rumor_fail(err, RUMOR_EINVAL, "--resume: %s: %s", p->ckpt_path, strerror(errno));
    return RUMOR_OK;
}

rumor_err_t rumor_peer_run(const rumor_peer_config_t *c, rumor_peer_result_t *res, char err[RUMOR_ERR_LEN])
{
    memset(res, 0, sizeof *res);
    res->test_acc = res->test_loss = NAN;
    if (c->rounds < 1 || c->rounds > 100000000)
        return rumor_fail(err, RUMOR_EINVAL, "--rounds %ld: expected 1..100000000", c->rounds);
    if (c->batch < 1 || c->batch > 65536) return rumor_fail(err, RUMOR_EINVAL, "--batch %d: expected 1..65536", c->batch);
    rumor_err_t rc = rumor_optim_config_check(&c->opt, err);
    if (rc != RUMOR_OK) return rc;
    peer_t *p = swarm_new(c);
    if (!p) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    if ((rc = run_paths(p, err)) != RUMOR_OK || (rc = setup_model(p, err)) != RUMOR_OK ||
        (rc = setup_swarm(p, err)) != RUMOR_OK || (rc = setup_files(p, err)) != RUMOR_OK)
        goto out;
    p->t0 = rumor_now();
    pthread_t th;
    if (pthread_create(&th, NULL, trainer_main, p) != 0) {
        rc = rumor_fail(err, RUMOR_ENOMEM, "cannot start the trainer thread");
        goto out;
    }
    swarm_node_main(p); /* (on this thread; it tells the trainer to stop when it ends) */
    pthread_join(th, NULL);
    if (p->trc != RUMOR_OK) {
        rc = p->trc;
        snprintf(err, RUMOR_ERR_LEN, "%s", p->terr);
    } else if (p->nrc != RUMOR_OK) {
        rc = p->nrc;
        snprintf(err, RUMOR_ERR_LEN, "%s", p->nerr);
    }
    res->rounds = p->core.k;
    res->test_acc = p->test_acc;
    res->test_loss = p->test_loss;
    res->interrupted = p->interrupted;
out:
    teardown(p);
    return rc;
}
