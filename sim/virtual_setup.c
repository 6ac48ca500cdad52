/* virtual_setup.c - setting virtual mode up and tearing it down (virtual_impl.h). */
#include "virtual_impl.h"
#include "settings.h"

// ---- set-up ----

/* Evaluation: on many peers, the first EVAL_SUBSET test images keep the run fast (the mean
 * accuracy over peers is still measured on the same images for everyone). Text: every
 * validation window (text.h's definition of the validation loss), EVAL_WINDOWS at a time. */
static rumor_err_t setup_eval(sim_t *s, const rumor_model_spec_t *spec, rumor_model_input_t in,
                              char err[RUMOR_ERR_LEN])
{
    const rumor_sim_config_t *c = s->c;
    if (s->src.text) {
        if (!(s->ev[0].m = rumor_model_new(spec, in, s->be, EVAL_WINDOWS, err))) return rumor_last_error();
        return RUMOR_OK;
    }
    const rumor_dataset_t *test = &s->src.test;
    s->n_eval = test->count;
    if (s->n > EVAL_SUBSET_ABOVE && s->n_eval > EVAL_SUBSET) s->n_eval = EVAL_SUBSET;
    if (s->n_eval == 0) return rumor_fail(err, RUMOR_EFORMAT, "%s: the test set is empty", c->data);
    s->eval_batch = spec->kind == RUMOR_MODEL_CNN && s->n_eval > EVAL_BATCH_CNN ? EVAL_BATCH_CNN : s->n_eval;
    if (!(s->ev[0].m = rumor_model_new(spec, in, s->be, (int)s->eval_batch, err))) return rumor_last_error();
    {
        size_t *idx = malloc(s->n_eval * sizeof *idx);
        if (!idx) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        for (size_t j = 0; j < s->n_eval; j++) idx[j] = j;
        if (s->eval_batch == s->n_eval) { /* once, straight into the model's input buffer */
            rumor_train_load_batch(s->ev[0].m, test, idx, s->n_eval, s->src.mean, s->src.std, NULL, NULL);
        } else {
            const size_t feat = rumor_data_feat(test);
            s->evx = malloc(s->n_eval * feat * sizeof *s->evx);
            s->evy = malloc(s->n_eval * sizeof *s->evy);
            if (s->evx && s->evy) rumor_data_gather(test, idx, s->n_eval, s->src.mean, s->src.std, s->evx, s->evy);
        }
        free(idx);
        if (s->eval_batch != s->n_eval && (!s->evx || !s->evy)) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    }
    return RUMOR_OK;
}

/* Peer i: its shard and trainer, model, optimizer, engine and what its sends need. */
static rumor_err_t setup_peer(sim_t *s, int i, const rumor_algo_t *algo, const rumor_model_spec_t *spec,
                              const rumor_partition_t *part, rumor_model_input_t in, char err[RUMOR_ERR_LEN])
{
    const rumor_sim_config_t *c = s->c;
    rumor_err_t rc;
    vpeer_t *p = &s->p[i];
    if ((rc = rumor_source_shard(&s->src, &p->shard, part, i, s->n, c->seed, err)) != RUMOR_OK)
        return rc;
    p->n_own = p->shard.n;
    if (!(p->m = rumor_model_new(spec, in, s->be, c->batch, err))) return rumor_last_error();
    if (!(p->o = rumor_optim_new(&s->opt, s->be, rumor_model_param_count(p->m), err))) return rumor_last_error();
    /* The same initial parameters everywhere, as `rumor node` (--init-seed = --seed). */
    if ((rc = rumor_model_init(p->m, c->seed)) != RUMOR_OK)
        return rumor_fail(err, rc, "peer %d: cannot initialise the model", i);
    rumor_gossip_config_t gc = {.algo = *algo, .params = rumor_model_param_count(p->m),
                                .layout = rumor_model_layout_id(p->m), .robust = s->robust,
                                .chunk_params = rumor_codec_chunk_params(&s->codec), .secure_mix = c->secure_mix,
                                .boot = virt_vboot(p->key)};
    /* Tracking needs every round complete: a round waits for all its neighbours, up to the
     * round timeout (virtual time: nothing waits for it here), not for the adaptive deadline,
     * which leaves out a peer that started later than the others. */
    if (s->opt.tracking) gc.min_wait_ms = gc.round_timeout_ms ? gc.round_timeout_ms : 10000;
    size_t nv;
    if (rumor_optim_gossiped(p->o, &nv)) { /* dadamw's second moment, a tracker: with the model */
        gc.extra = nv;
        if (!(p->gx = malloc((gc.params + nv) * sizeof *p->gx))) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    }
    if (c->secure_mix && !(p->sm = rumor_secmix_new(p->mkey, gc.boot, gc.layout, err))) return rumor_last_error();
    if (rumor_codec_is_delta(s->codec.id)) {
        /* Compressed gossip (CHOCO-SGD); a lineage per peer from the seed: deterministic. */
        gc.choco = s->codec;
        gc.choco_gamma = c->consensus_step;
        rumor_rng_t lr;
        rumor_rng_init2(&lr, c->seed, 0x11e, (uint64_t)i);
        gc.lineage = rumor_rng_next(&lr) | 1;
    } else if (s->codec.id != RUMOR_CODEC_F32) {
        const size_t cp = gc.chunk_params ? gc.chunk_params : RUMOR_GOSSIP_CHUNK_DEFAULT; /* the engine's */
        if (rumor_wire_enc_init(&p->coded, &s->codec, rumor_model_param_count(p->m), cp) != RUMOR_OK)
            return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    }
    if (c->dp[0] && p->n_own > 0) {
        rumor_dp_config_t pv;
        if ((rc = rumor_dp_parse(&pv, c->dp, err)) != RUMOR_OK) return rc;
        pv.budget = c->dp_budget;
        /* Seeded, so that the simulation replays exactly; its noise protects nothing and
         * the summary says so (a real node's comes from libsodium: src/peer/peer.c). */
        rumor_noise_t *ns = rumor_noise_new_seeded(c->seed, 0xd9, (uint64_t)i, err);
        if (!ns) return RUMOR_ENOMEM;
        if (!(p->dp = rumor_dp_new(&pv, p->m, p->shard.examples, c->batch, &ns, err))) return rumor_last_error();
    }
    if (p->n_own) {
        /* Images: its shard, normalised once and held by its trainer (the data set goes below). */
        rumor_trainer_config_t tc = {.cache = true, .batch = c->batch, .seed = c->seed, .clip_grad = c->clip_grad,
                                     .sched = s->sched, .lr = s->opt.lr, .total_steps = s->total_steps, .dp = p->dp};
        rumor_source_trainer(&s->src, &p->shard, &tc);
        p->tr = rumor_trainer_new(&tc, p->m, p->o, err);
    }
    if (!s->src.text) rumor_source_shard_fini(&p->shard);
    if (p->n_own && !p->tr) return rumor_fail(err, rumor_last_error(), "peer %d: %.200s", i, err);
    if (i == c->byzantine && rumor_attack_poisons(&s->attack) &&
        rumor_poison_init(&p->poison, rumor_model_param_count(p->m)) != RUMOR_OK)
        return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    /* Under compressed gossip what travels is a public copy's delta: the Byzantine peer moves
     * its public copy towards its poisoned model (neighbours then see that model's copy). */
    if (i == c->byzantine && rumor_attack_changes_values(&s->attack) && gc.choco.id != RUMOR_CODEC_F32 && !p->gx) {
        if (!(p->gx = malloc(gc.params * sizeof *p->gx))) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        p->poison_gx = true;
    }
    memcpy(gc.self, p->key, RUMOR_KEY_LEN);
    p->gc = gc;
    if (!(p->g = rumor_gossip_new(&gc, s->topo, rumor_model_params(p->m), err))) return rumor_last_error();
    if (!(p->vkeys = malloc(((size_t)s->mcfg.view_size + 1) * sizeof *p->vkeys)) ||
        !(p->vboots = malloc(((size_t)s->mcfg.view_size + 1) * sizeof *p->vboots)) ||
        !(p->vplaces = malloc(((size_t)s->mcfg.view_size + 1) * sizeof *p->vplaces)))
        return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    p->state = P_JOINING;
    return RUMOR_OK;
}

/* Peer i's key (the node's, when replaying), its trace, and the replayed node's views and
 * finished members as events at the times the node saw them. */
static rumor_err_t identity(sim_t *s, int i, char err[RUMOR_ERR_LEN])
{
    const rumor_sim_config_t *c = s->c;
    vpeer_t *p = &s->p[i];
    if (s->replaying) memcpy(p->key, s->replay.keys[i], RUMOR_KEY_LEN);
    char path[1200];
    snprintf(path, sizeof path, "%s/peer-%03d/trace", c->out, i);
    if ((c->trace_peers || s->replaying) && !(p->trace = rumor_trace_open(path, p->key, 0, false, err)))
        return rumor_last_error();
    p->rview = -1;
    if (!s->replaying) return RUMOR_OK;
    const rpeer_t *r = &s->replay.p[i];
    /* Finished members first: a node counts them and takes its view in one pass (peer_node.c,
     * "done" then "view" at one time), and events of one time run in the order pushed; a view
     * change first would mix a round before the end it comes with is known. */
    for (int k = 0; k < r->n_done; k++)
        if (virt_heap_push(&s->q, r->done_t[k], i, EV_DONE, i, (uint32_t)r->done_n[k]) != RUMOR_OK)
            return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    for (int k = 0; k < r->n_view; k++) { /* views from before the start: now */
        if (r->view[k].t == 0) p->rview = k;
        else if (virt_heap_push(&s->q, r->view[k].t, i, EV_VIEW, i, (uint32_t)k) != RUMOR_OK)
            return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    }
    return RUMOR_OK;
}

rumor_err_t virt_setup(sim_t *s, char err[RUMOR_ERR_LEN])
{
    const rumor_sim_config_t *c = s->c;
    rumor_err_t rc;
    rumor_algo_t algo;
    rumor_model_spec_t spec;
    rumor_partition_t part;
    if ((rc = rumor_settings_algo(c, &algo, err)) != RUMOR_OK) return rc;
    s->H = algo.local_steps;
    s->total_steps = c->rounds * s->H;
    if ((rc = rumor_model_spec_parse(&spec, c->model, err)) != RUMOR_OK) return rc;
    if ((rc = rumor_partition_parse(&part, c->partition, err)) != RUMOR_OK) return rc;
    if ((rc = rumor_robust_parse(&s->robust, c->robust, err)) != RUMOR_OK) return rc;
    if ((rc = rumor_codec_parse(&s->codec, c->codec, err)) != RUMOR_OK) return rc;
    if ((rc = rumor_attack_parse(&s->attack, c->byzantine >= 0 ? c->attack : "none", err)) != RUMOR_OK) return rc;
    if (s->attack.kind == RUMOR_ATTACK_RELAY_TAMPER || s->attack.kind == RUMOR_ATTACK_RELAY_FORGE)
        return rumor_fail(err, RUMOR_EINVAL, "--attack %s: virtual peers relay nothing; use --mode proc", c->attack);
    rumor_rng_init2(&s->attack_rng, c->seed, 0xa77ac, 0);
    if ((rc = rumor_schedule_parse(&s->sched, c->schedule[0] ? c->schedule : "constant", err)) != RUMOR_OK) return rc;
    s->sched.warmup = c->warmup;
    if ((rc = rumor_settings_optim(c, &s->opt, err)) != RUMOR_OK) return rc; /* (the one train and node use) */

    /* Data, once for all peers. */
    const rumor_source_config_t sc = {.dir = c->data, .spec = &spec, .vocab = c->vocab,
                                      .limit = c->limit > 0 ? (size_t)c->limit : 0, .eval = true};
    if ((rc = rumor_source_load(&s->src, &sc, err)) != RUMOR_OK) return rc;

    if (!(s->be = rumor_backend_new("cpu", 1, err))) return rumor_last_error();
    if (!s->be->ops->host_memory) return rumor_fail(err, RUMOR_ENOTSUP, "virtual mode needs host memory");
    if (!(s->topo = rumor_topology_new(c->topology, c->seed, err))) return rumor_last_error();
    if ((rc = rumor_topology_check(s->topo, (size_t)s->n, err)) != RUMOR_OK) return rc;
    const rumor_model_input_t in = rumor_source_input(&s->src, &spec);

    if ((rc = setup_eval(s, &spec, in, err)) != RUMOR_OK) return rc;

    /* Virtual compute time of one step. */
    double step_ms = c->step_ms;
    if (!(step_ms > 0)) step_ms = rumor_model_flops(s->ev[0].m, true) * (double)c->batch / NOMINAL_FLOPS * 1e3;
    s->step_us = (uint64_t)llround(step_ms * 1e3);
    if (s->step_us == 0) s->step_us = 1;
    s->latency_us = c->latency_ms > 0 ? (uint64_t)llround(c->latency_ms * 1e3) : 0;

    /* Peers. */
    s->mcfg = rumor_memb_defaults();
    s->mcfg.period_ms = MEMB_PERIOD_MS;
    s->mcfg.suspect_ms = MEMB_SUSPECT_MS;
    /* Views hold the whole swarm, so that every engine computes the same topology (as in proc
     * mode, which gives its nodes --view-size of the swarm). Beyond the default view the
     * swarm starts formed: each view is seeded with every peer, instead of a join whose
     * messages grow with the square of the swarm. */
    s->seeded = s->n - 1 > s->mcfg.view_size;
    /* --replay: the nodes' keys (topologies place peers by key), and their views from the
     * start; each peer begins at once, and its gossip points come when the nodes' did. */
    if (c->replay[0]) {
        if (virt_replay_load(&s->replay, c->replay, s->n, err) != RUMOR_OK) return rumor_last_error();
        s->replaying = s->seeded = true;
    }
    if (s->seeded) {
        s->mcfg.view_size = s->n - 1;
        s->mcfg.passive_size = 16;
    }
    s->want_view = s->n - 1;
    if (!(s->p = calloc((size_t)s->n, sizeof *s->p)) || !(s->alive = calloc((size_t)s->n, sizeof *s->alive)) ||
        !(s->act = malloc(sizeof *s->act)) || !(s->mscratch = calloc(1, sizeof *s->mscratch)) || !(s->at_round = calloc((size_t)c->rounds + 1, sizeof *s->at_round)))
        return rumor_fail(err, RUMOR_ENOMEM, "out of memory for %d peers", s->n);
    for (int i = 0; i < s->n; i++) {
        virt_key_of(s->p[i].key, i), s->p[i].want_view = s->want_view;
        if (identity(s, i, err) != RUMOR_OK) return rumor_last_error();
    }
    s->wire_in.cap = RUMOR_GOSSIP_CHUNK_DEFAULT; /* any codec decodes here, as at a node (src/peer/peer.c) */
    if (!(s->wire_in.dec = malloc(s->wire_in.cap * sizeof *s->wire_in.dec)))
        return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    if (c->secure_mix) {
        /* Mask keys from the seed: the run stays deterministic. */
        for (int i = 0; i < s->n; i++) {
            rumor_rng_t kr;
            rumor_rng_init2(&kr, c->seed, 0x5ec3, (uint64_t)i);
            uint8_t sk[32];
            for (int b = 0; b < 32; b += 8) {
                const uint64_t v = rumor_rng_next(&kr);
                for (int j = 0; j < 8; j++) sk[b + j] = (uint8_t)(v >> (8 * j));
            }
            s->p[i].mkey = rumor_secret_key_from_seed(sk, err);
            memset(sk, 0, sizeof sk);
            if (!s->p[i].mkey) return RUMOR_ENOMEM;
        }
    }
    for (int i = 0; i < s->n; i++) s->alive[i] = true;
    s->n_alive = s->n;
    int empty = 0;
    for (int i = 0; i < s->n; i++) {
        if ((rc = setup_peer(s, i, &algo, &spec, &part, in, err)) != RUMOR_OK) return rc;
        empty += s->p[i].n_own == 0;
    }
    if (c->secure_mix) { /* one masked model at a time, on its way to its receiver */
        const size_t P = rumor_model_param_count(s->p[0].m), chunks = rumor_chunks(P, RUMOR_GOSSIP_CHUNK_DEFAULT);
        s->masked = malloc(P * sizeof(uint32_t));
        s->masked_off = malloc((chunks + 1) * sizeof *s->masked_off);
        if (!s->masked || !s->masked_off) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    }
    rumor_dataset_fini(&s->src.train); /* every image now lives, normalised, in its peer's shard */
    if (empty && !c->quiet)
        rumor_log(RUMOR_LOG_WARN, "%d of %d peers own no samples under %s: they only gossip", empty, s->n,
                  c->partition);
    if (c->dp[0] && !c->quiet)
        rumor_log(RUMOR_LOG_WARN, "--dp in virtual mode: batches and noise are drawn from --seed so the run replays; "
                  "they protect nothing (real nodes, and --mode proc, draw them from libsodium)");
    s->at_round[0] = s->n;
    s->round_min = 0;
    rumor_rng_init2(&s->loss_rng, c->seed, LOSS_STREAM, 0);
    rumor_rng_init2(&s->mloss_rng, c->seed, MEMB_STREAM, 0);
    s->free_msg = -1;

    /* Churn: at a time, as events; at a round, in order of (round, index). */
    if (!(s->round_ev = malloc((size_t)(c->n_events > 0 ? c->n_events : 1) * sizeof *s->round_ev)))
        return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    for (int e = 0; e < c->n_events; e++) {
        const rumor_sim_event_t *ev = &c->events[e];
        s->restarts |= ev->kind == RUMOR_SIM_RESTART;
        if (ev->peer >= s->n) return rumor_fail(err, RUMOR_EINVAL, "event %d: no peer %d of %d", e + 1, ev->peer, s->n);
        if (ev->at_round >= 0) {
            int k = s->n_round_ev++;
            while (k > 0 && c->events[s->round_ev[k - 1]].at_round > ev->at_round) {
                s->round_ev[k] = s->round_ev[k - 1];
                k--;
            }
            s->round_ev[k] = e;
        } else {
            const double at = ev->at_s > 0 ? ev->at_s * 1e6 : 0.0;
            if (virt_heap_push(&s->q, (uint64_t)llround(at), 0, EV_CHURN, e, 0) != RUMOR_OK)
                return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
            s->churn_pending++;
        }
    }
    /* Each peer's round, as a node's (src/peer/core.h); checkpoints, in memory, only when a peer
     * may restart from one. */
    s->core_c = (rumor_core_config_t){.rounds = c->rounds, .local_steps = s->H, .overlap_steps = algo.overlap_steps,
                                      .eval_every = c->eval_every,
                                      .checkpoint_every = s->restarts || s->replaying ? CKPT_EVERY : 0,
                                      .checkpoint_s = INFINITY, .secure_mix = c->secure_mix};
    for (int i = 0; i < s->n; i++) virt_core_start(s, i, 0);
    return RUMOR_OK;
}

/* The spread of the final models, sqrt(mean_i |x_i - mean|^2) (summary.json "model_spread"). */
double virt_models_spread(const sim_t *s)
{
    const size_t P = rumor_model_param_count(s->p[0].m);
    double ss = 0.0;
    for (size_t q = 0; q < P; q++) {
        double mean = 0.0;
        for (int i = 0; i < s->n; i++) mean += rumor_model_params(s->p[i].m)[q];
        mean /= s->n;
        for (int i = 0; i < s->n; i++) {
            const double d = rumor_model_params(s->p[i].m)[q] - mean;
            ss += d * d;
        }
    }
    return sqrt(ss / s->n);
}

void virt_teardown(sim_t *s)
{
    virt_worker_stop(s);
    if (s->p) {
        /* Engines first: nothing may still point into their snapshots after this. */
        for (int i = 0; i < s->n; i++) {
            vpeer_t *p = &s->p[i];
            rumor_gossip_destroy(&p->g);
            for (int k = 0; k < p->n_old_g; k++) rumor_gossip_destroy(&p->old_g[k]);
            free(p->old_g);
            free(p->ckpt.w);
            free(p->ckpt.x);
            free(p->ckpt.opt);
            free(p->ckpt.theta);
            free(p->ckpt.mom);
            rumor_memb_destroy(&p->memb);
            free(p->vkeys);
            free(p->vboots);
            free(p->vplaces);
            rumor_poison_fini(&p->poison);
            rumor_wire_enc_fini(&p->coded);
            rumor_dp_destroy(&p->dp);
            rumor_secmix_destroy(&p->sm);
            rumor_secret_key_destroy(&p->mkey);
            rumor_optim_destroy(&p->o);
            free(p->gx);
            rumor_model_destroy(&p->m);
            rumor_trainer_destroy(&p->tr);
            rumor_source_shard_fini(&p->shard);
            free(p->mbuf);
            char err[RUMOR_ERR_LEN];
            if (rumor_trace_close(p->trace, err) != RUMOR_OK) rumor_log(RUMOR_LOG_WARN, "peer %d's trace: %s", i, err);
        }
    }
    virt_jobs_free(s);
    free(s->p);
    rumor_topology_destroy(&s->topo);
    rumor_backend_destroy(&s->be);
    rumor_source_fini(&s->src);
    free(s->evx);
    free(s->evy);
    free(s->q.v);
    free(s->msgs);
    free(s->alive);
    free(s->act);
    free(s->wire_in.dec);
    free(s->masked);
    free(s->masked_off);
    free(s->mscratch);
    for (int k = 0; k < s->n_mm; k++) free(s->mm[k]);
    free(s->mm);
    free(s->mm_free);
    free(s->at_round);
    free(s->round_ev);
    virt_replay_free(&s->replay);
}
