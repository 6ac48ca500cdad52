/* swarm.c - a training peer's swarm half, for both drivers with a trainer (see swarm.h). */
#include "peer_impl.h"

peer_t *swarm_new(const rumor_peer_config_t *cfg)
{
    peer_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->cfg = cfg;
    p->test_acc = p->test_loss = NAN;
    p->traced_n = -1;
    rumor_layout_init(&p->layout_ours);
    return p;
}

const char *swarm_address(const peer_t *p) { return rumor_node_address(p->node); }

bool swarm_stopped(const peer_t *p) { return atomic_load(&p->stop); }

rumor_core_t *swarm_core(peer_t *p) { return &p->core; }

bool swarm_is_over(const peer_t *p) { return p->swarm_over; }

/* ---- setup ---- */

rumor_err_t swarm_open(peer_t *p, char err[RUMOR_ERR_LEN])
{
    const rumor_peer_config_t *c = p->cfg;
    if (!(p->node = rumor_node_new(&c->node, err))) return rumor_last_error();
    rumor_addr_t self;
    rumor_err_t rc = rumor_addr_parse(&self, rumor_node_address(p->node), err);
    if (rc != RUMOR_OK) return rc;
    if (c->trace && c->trace[0] &&
        !(p->trace = rumor_trace_open(c->trace, self.key, rumor_node_place(p->node), c->resume, err)))
        return rumor_last_error();
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->pool_mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->mu_init = true;
    rumor_node_on_chunk(p->node, peer_chunk_cb, p);
    rumor_node_on_tick(p->node, peer_tick_cb, p);
    rumor_node_on_status(p->node, peer_status_cb, p);
    rumor_node_on_pull(p->node, peer_pull_cb, p);
    rumor_node_on_layout(p->node, peer_layout_cb, p);
    p->emulate = c->emu_latency_ms > 0 || c->emu_bandwidth_mbps > 0 || c->emu_loss > 0;
    if (p->emulate) {
        rumor_rng_init2(&p->emu_rng, c->seed, 0xe3a1, (uint64_t)c->rank);
        rumor_node_set_tick_ms(p->node, 1);
    }
    if (c->listening) c->listening(rumor_node_address(p->node));
    return RUMOR_OK;
}

/* The send side's buffers: codec encodings of each snapshot, a decoded chunk, the attack's
 * poisoned copies. */
static rumor_err_t setup_sending(peer_t *p, char err[RUMOR_ERR_LEN])
{
    const rumor_peer_config_t *c = p->cfg;
    if (c->codec.id != RUMOR_CODEC_F32 && !rumor_codec_is_delta(c->codec.id)) {
        const size_t cp = rumor_codec_chunk_params(&c->codec);
        if (rumor_wire_enc_init(&p->enc, &c->codec, p->P, cp ? cp : RUMOR_GOSSIP_CHUNK_DEFAULT) != RUMOR_OK)
            return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    }
    /* Any neighbour's codec decodes here: a chunk of at most our chunk size. */
    p->wire_in.cap = RUMOR_GOSSIP_CHUNK_DEFAULT;
    if (!(p->wire_in.dec = malloc(p->wire_in.cap * sizeof *p->wire_in.dec)))
        return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    if (rumor_attack_poisons(&c->attack)) {
        rumor_err_t rc = rumor_poison_init(&p->poison, p->P);
        if (rc != RUMOR_OK) return rumor_fail(err, rc, "out of memory");
        rumor_rng_init2(&p->attack_rng, c->seed, 0xa77ac, (uint64_t)c->rank);
    }
    return RUMOR_OK;
}

rumor_err_t swarm_layout(peer_t *p, size_t P, size_t extra, uint64_t layout, const char *text, size_t len,
                         char err[RUMOR_ERR_LEN])
{
    p->P = P;
    p->extra = extra;
    p->layout = layout;
    rumor_err_t rc = rumor_layout_parse(&p->layout_ours, text, len, err);
    if (rc != RUMOR_OK) return rc;
    if (len <= RUMOR_PROTO_MAX_LAYOUT_TEXT) { /* (a larger one is never sent: members only keep apart) */
        if (!(p->layout_text = malloc(len))) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        memcpy(p->layout_text, text, len);
        p->layout_text_len = len;
    }
    rumor_node_set_layout(p->node, layout); /* (its hellos say what it trains: members of another model stay apart) */
    if (p->cfg->secure_mix &&
        !(p->secmix = rumor_secmix_new(rumor_node_secret_key(p->node), rumor_node_boot(p->node), layout, err)))
        return rumor_last_error();
    return setup_sending(p, err);
}

rumor_err_t swarm_engine(peer_t *p, float *x, char err[RUMOR_ERR_LEN])
{
    const rumor_peer_config_t *c = p->cfg;
    rumor_gossip_config_t gc = {.algo = c->algo, .params = p->P, .extra = p->extra, .layout = p->layout,
                                .round_timeout_ms = c->round_timeout_ms, .robust = c->robust,
                                .chunk_params = rumor_codec_chunk_params(&c->codec), .secure_mix = c->secure_mix,
                                .boot = rumor_node_boot(p->node)};
    rumor_addr_t self;
    rumor_err_t rc = rumor_addr_parse(&self, rumor_node_address(p->node), err);
    if (rc != RUMOR_OK) return rc;
    memcpy(gc.self, self.key, 32);
    if (rumor_codec_is_delta(c->codec.id)) {
        /* Top-k travels as compressed differences of a public copy (CHOCO-SGD), whose lineage
         * is new at every start. */
        gc.choco = c->codec;
        gc.choco_gamma = c->consensus_step;
        gc.lineage = rumor_random_u64();
        gc.choco_resumed = c->resume;
    }
    if (!(p->topo = rumor_topology_new(c->topology, c->seed, err))) return rumor_last_error();
    return (p->g = rumor_gossip_new(&gc, p->topo, x, err)) ? RUMOR_OK : rumor_last_error();
}

rumor_err_t swarm_ready(peer_t *p, char err[RUMOR_ERR_LEN])
{
    if (!p->cfg->secure_mix) return RUMOR_OK;
    snprintf(p->mask_path, sizeof p->mask_path, "%s/secure-mix.round", p->cfg->run_dir);
    return peer_mask_floor(p, err);
}

/* ---- the engine's state in a checkpoint ---- */

rumor_err_t swarm_state_tensors(peer_t *p, rumor_st_out_t *t, size_t *nt, float **w, uint64_t *ground,
                                char err[RUMOR_ERR_LEN])
{
    pthread_mutex_lock(&p->mu);
    const size_t nc = rumor_gossip_chunk_count(p->g);
    if (!(*w = malloc(nc * sizeof **w))) {
        pthread_mutex_unlock(&p->mu);
        return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    }
    const double *gw = rumor_gossip_weights(p->g);
    for (size_t i = 0; i < nc; i++) (*w)[i] = (float)gw[i];
    *ground = rumor_gossip_round(p->g);
    pthread_mutex_unlock(&p->mu);
    /* theta and momentum change only in the trainer's own gossip points: no lock needed. */
    t[0] = (rumor_st_out_t){.name = "gossip.w", .ndim = 1, .shape = {nc}, .data = *w};
    *nt = 1;
    if (p->cfg->algo.kind == RUMOR_ALGO_DILOCO) {
        t[(*nt)++] = (rumor_st_out_t){.name = "gossip.theta", .ndim = 1, .shape = {p->P}, .data = rumor_gossip_outer(p->g)};
        t[(*nt)++] = (rumor_st_out_t){.name = "gossip.momentum", .ndim = 1, .shape = {p->P},
                                      .data = rumor_gossip_momentum(p->g)};
    }
    return RUMOR_OK;
}

rumor_err_t swarm_state_read(peer_t *p, const rumor_st_file_t *f, const char *path, uint64_t gr,
                             char err[RUMOR_ERR_LEN])
{
    const size_t nc = rumor_gossip_chunk_count(p->g), P = p->P;
    const rumor_st_tensor_t *tw = rumor_st_find(f, "gossip.w");
    double *w = malloc(nc * sizeof *w);
    rumor_err_t rc = RUMOR_OK;
    if (!tw || strcmp(tw->dtype, "F32") != 0 || tw->ndim != 1 || tw->shape[0] != nc || !w) {
        rc = rumor_fail(err, RUMOR_ELAYOUT, "%s: gossip.w missing or not %zu floats", path, nc);
        goto out;
    }
    for (size_t i = 0; i < nc; i++) {
        float v;
        memcpy(&v, (const uint8_t *)tw->data + 4 * i, 4);
        w[i] = v;
    }
    pthread_mutex_lock(&p->mu); /* (a status may read the engine meanwhile) */
    rc = rumor_gossip_restore(p->g, gr, w, nc, err);
    pthread_mutex_unlock(&p->mu);
    if (rc != RUMOR_OK) goto out;
    if (p->cfg->algo.kind == RUMOR_ALGO_DILOCO) {
        const char *names[2] = {"gossip.theta", "gossip.momentum"};
        float *dst[2] = {rumor_gossip_outer(p->g), rumor_gossip_momentum(p->g)};
        for (int i = 0; i < 2; i++) {
            const rumor_st_tensor_t *t = rumor_st_find(f, names[i]);
            if (!t || strcmp(t->dtype, "F32") != 0 || t->ndim != 1 || t->shape[0] != P) {
                rc = rumor_fail(err, RUMOR_ELAYOUT, "%s: %s missing or not %zu floats", path, names[i], P);
                goto out;
            }
            memcpy(dst[i], t->data, P * sizeof(float));
        }
    }
out:
    free(w);
    return rc;
}

/* ---- the node's thread ---- */

void swarm_node_main(peer_t *p)
{
    p->nrc = rumor_node_run(p->node, p->nerr);
    atomic_store(&p->stop, true);
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

static void *node_thread(void *arg)
{
    swarm_node_main(arg);
    return NULL;
}

rumor_err_t swarm_start_node(peer_t *p, char err[RUMOR_ERR_LEN])
{
    /* (up before the thread runs: a status asked meanwhile waits for its loop, never computes
     * beside it) */
    atomic_store(&p->node_th_up, true);
    if (pthread_create(&p->node_th, NULL, node_thread, p) != 0) {
        atomic_store(&p->node_th_up, false);
        return rumor_fail(err, RUMOR_ENOMEM, "cannot start the peer's node thread");
    }
    return RUMOR_OK;
}

rumor_err_t swarm_stop_node(peer_t *p, char err[RUMOR_ERR_LEN])
{
    if (!atomic_exchange(&p->node_th_up, false)) return RUMOR_OK;
    rumor_node_stop(p->node);
    pthread_join(p->node_th, NULL);
    if (p->nrc != RUMOR_OK) snprintf(err, RUMOR_ERR_LEN, "%s", p->nerr);
    return p->nrc;
}

/* ---- rounds ---- */

void swarm_core_init(peer_t *p, long k)
{
    const rumor_peer_config_t *c = p->cfg;
    const rumor_core_config_t cc = {.rounds = c->rounds, .local_steps = c->algo.local_steps,
                                    .overlap_steps = c->algo.overlap_steps, .eval_every = c->eval_every,
                                    .checkpoint_every = c->checkpoint_every, .checkpoint_s = 60.0,
                                    .secure_mix = c->secure_mix};
    rumor_core_init(&p->core, &cc, p->g, k, rumor_now());
}

void swarm_phase(peer_t *p, rumor_core_phase_t *ph)
{
    pthread_mutex_lock(&p->mu);
    rumor_core_phase(&p->core, ph);
    pthread_mutex_unlock(&p->mu);
}

void swarm_gossip_point(peer_t *p)
{
    pthread_mutex_lock(&p->mu);
    rumor_core_gossip_point(&p->core); /* (the last round closes the engine: it ends on a mix) */
    rumor_trace_phase(p->trace, rumor_now_us(), p->core.k);
    pthread_mutex_unlock(&p->mu);
}

rumor_err_t swarm_metrics_open(peer_t *p, const char *path, bool append, char err[RUMOR_ERR_LEN])
{
    p->t0 = rumor_now();
    if (!(p->metrics = rumor_fopen_private(path, append))) return rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
    return RUMOR_OK;
}

void swarm_metrics_write(peer_t *p, const rumor_metrics_line_t *l)
{
    if (!p->metrics) return;
    char line[512];
    fwrite(line, 1, rumor_metrics_line(line, sizeof line, l), p->metrics);
    fflush(p->metrics);
}

void swarm_model_line(peer_t *p, long step, const char *flag, const double *loss_acc, bool text)
{
    const rumor_metrics_line_t l = {.t = rumor_now() - p->t0, .t_decimals = 3, .round = p->core.k, .step = step,
                                    .flag = flag, .evaluated = loss_acc != NULL, .text = text,
                                    .test_loss = loss_acc ? loss_acc[0] : 0.0, .test_acc = loss_acc ? loss_acc[1] : 0.0};
    swarm_metrics_write(p, &l);
}

void swarm_round_line(peer_t *p, const rumor_core_facts_t *trainer, double wait_s)
{
    rumor_gossip_stats_t st;
    pthread_mutex_lock(&p->mu);
    rumor_gossip_stats(p->g, &st);
    rumor_core_facts_t f = *trainer;
    f.bytes_out = p->bytes_out;
    f.relayed = p->relayed_out;
    f.peers = p->view_count + 1;
    pthread_mutex_unlock(&p->mu);
    f.t = rumor_now() - p->t0;
    f.t_decimals = 3;
    f.wait_s = wait_s;
    f.deadline_s = (double)st.deadline_ms / 1000.0;
    rumor_metrics_line_t ml;
    rumor_core_line(&p->core, &f, &st, &ml);
    swarm_metrics_write(p, &ml);
}

void swarm_started(peer_t *p) { rumor_trace_start(p->trace, rumor_now_us()); }

void swarm_stats(peer_t *p, rumor_gossip_stats_t *st)
{
    pthread_mutex_lock(&p->mu);
    rumor_gossip_stats(p->g, st);
    pthread_mutex_unlock(&p->mu);
}

void swarm_mixed(peer_t *p, rumor_core_after_t *after)
{
    rumor_core_mixed(&p->core, rumor_now(), after);
    rumor_trace_mixed(p->trace, rumor_now_us(), &p->core, after);
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

static bool interrupted(const atomic_bool *interrupt)
{
    return interrupt && atomic_load(interrupt);
}

int swarm_gossip(peer_t *p, float *x, uint64_t deadline_ms, const atomic_bool *interrupt)
{
    int done = -1;
    bool woke = false;
    pthread_mutex_lock(&p->mu);
    while (!atomic_load(&p->stop)) {
        const uint64_t now = rumor_now_ms();
        if (rumor_gossip_step(p->g, x, now) == RUMOR_GOSSIP_DONE) {
            done = 1;
            break;
        }
        if ((deadline_ms && now >= deadline_ms) || interrupted(interrupt)) {
            done = 0;
            break;
        }
        if (!woke && rumor_gossip_snap_wanted(p->g, NULL) >= 0) {
            rumor_node_wake(p->node); /* what holds the buffer may be given up (peer_node.c) */
            woke = true;
        }
        uint64_t until = rumor_gossip_deadline(p->g);
        if (until > now + 100) until = now + 100; /* look at the stop flag now and then */
        if (deadline_ms && until > deadline_ms) until = deadline_ms;
        wait_cv(p, until > now ? until - now : 1);
    }
    pthread_mutex_unlock(&p->mu);
    rumor_node_wake(p->node); /* the new snapshot's sends */
    return done;
}

int swarm_members(peer_t *p)
{
    pthread_mutex_lock(&p->mu);
    const int n = p->n_members;
    pthread_mutex_unlock(&p->mu);
    return n;
}

bool swarm_over(peer_t *p, bool recently_asked_counts)
{
    pthread_mutex_lock(&p->mu);
    const bool over = rumor_core_swarm_over(&p->core, p->n_members, p->n_done);
    pthread_mutex_unlock(&p->mu);
    return over && (!recently_asked_counts || rumor_now() - p->last_resync >= RESYNC_EVERY);
}

/* ---- falling into step ---- */

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

static void resync_said(rumor_core_resync_why_t why, bool took, int answers, int kept, uint64_t r)
{
    if (!took) {
        if (why == RUMOR_CORE_JOIN && answers > 0 && kept > 0)
            rumor_log(RUMOR_LOG_INFO, "no two members' models confirmed each other: starting from our own");
        else if (why == RUMOR_CORE_JOIN && answers == 0)
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
}

/* Fall into step with the swarm: ask up to RUMOR_RESYNC_ASKS members for their models, and
 * take one only when two of them confirm each other (the peer core decides, core.h: their
 * mean, at the lower of their rounds): one member alone can never hand this peer a model.
 * Models are checked whole (hash), finite and of a plausible scale against ours. Otherwise
 * this peer keeps its own. */
rumor_err_t swarm_resync(peer_t *p, float *x, rumor_core_resync_why_t why, bool *took, int *answered,
                         char err[RUMOR_ERR_LEN])
{
    const size_t P = p->P;
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
    resync_said(why, *took, rs.answers, kept, r);
    return RUMOR_OK;
}

rumor_err_t swarm_finish_with(peer_t *p, float *x, bool *took, char err[RUMOR_ERR_LEN])
{
    *took = false;
    if (p->cfg->secure_mix) {
        rumor_log(RUMOR_LOG_INFO, "every member finished; under secure mixing no model is lent in the clear: this "
                  "peer ends with its own (round %ld)", p->core.k);
    } else {
        int answered;
        rumor_err_t rc = swarm_resync(p, x, RUMOR_CORE_FINISHED, took, &answered, err);
        if (rc != RUMOR_OK) return rc;
        if (!*took && answered == 0) {
            rumor_log(RUMOR_LOG_INFO, "every member finished and none answered: training on alone");
            return RUMOR_OK;
        }
        if (!*took)
            rumor_log(RUMOR_LOG_INFO, "every member finished, and no two of their final models confirmed each other: "
                      "this peer ends with its own (round %ld)", p->core.k);
    }
    p->swarm_over = true;
    rumor_trace_end(p->trace, rumor_now_us(), p->core.k, *took);
    return RUMOR_OK;
}

/* ---- finishing ---- */

void swarm_set_final(peer_t *p, const float *x)
{
    uint8_t h[RUMOR_HASH_LEN];
    rumor_hash(h, x, p->P * sizeof *x);
    pthread_mutex_lock(&p->mu);
    p->final_x = x;
    p->final_round = rumor_gossip_round(p->g);
    memcpy(p->final_hash, h, sizeof h);
    p->finished = true;
    const uint64_t round = p->final_round;
    pthread_mutex_unlock(&p->mu);
    rumor_node_set_done(p->node, round ? round : 1);
    p->linger_until = rumor_now_ms() + p->cfg->linger_ms;
    p->all_since = 0;
}

int swarm_linger(peer_t *p, uint64_t deadline_ms, const atomic_bool *interrupt)
{
    int over = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        const uint64_t now = rumor_now_ms();
        if (atomic_load(&p->stop) || now >= p->linger_until) {
            over = 1;
            break;
        }
        /* Nobody is left to ask for the final model, unless the user said to wait (a peer
         * still to come that the view does not hold yet). */
        p->all_since = p->all_finished ? (p->all_since ? p->all_since : now) : 0;
        if (!p->cfg->linger_given && p->all_since && now - p->all_since >= LINGER_GRACE_MS) {
            rumor_log(RUMOR_LOG_INFO, "every member has finished: leaving");
            over = 1;
            break;
        }
        if ((deadline_ms && now >= deadline_ms) || interrupted(interrupt)) break;
        wait_cv(p, deadline_ms && deadline_ms - now < 100 ? deadline_ms - now : 100);
    }
    pthread_mutex_unlock(&p->mu);
    return over;
}

rumor_err_t swarm_status(peer_t *p, bool json, char *out, size_t cap, int timeout_ms, char err[RUMOR_ERR_LEN])
{
    return rumor_node_status(p->node, atomic_load(&p->node_th_up) && !atomic_load(&p->stop), json, out, cap, timeout_ms,
                             err);
}

/* ---- the end ---- */

void swarm_destroy(peer_t **pp)
{
    peer_t *p = *pp;
    if (!p) return;
    char err[RUMOR_ERR_LEN];
    (void)swarm_stop_node(p, err);
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
    if (p->mu_init) {
        pthread_mutex_destroy(&p->mu);
        pthread_mutex_destroy(&p->pool_mu);
        pthread_cond_destroy(&p->cv);
    }
    for (int i = 0; i < p->n_mask_pool; i++) free(p->mask_pool[i]);
    if (p->metrics) fclose(p->metrics);
    if (rumor_trace_close(p->trace, err) != RUMOR_OK) rumor_log(RUMOR_LOG_WARN, "the trace: %s", err);
    rumor_topology_destroy(&p->topo);
    free(p->pull_buf);
    free(p->pull_bits);
    for (int i = 0; i < RUMOR_RESYNC_ASKS; i++) free(p->ans[i]);
    rumor_poison_fini(&p->poison);
    rumor_wire_enc_fini(&p->enc);
    free(p->wire_in.dec);
    free(p->layout_text);
    rumor_layout_fini(&p->layout_ours);
    free(p);
    *pp = NULL;
}
