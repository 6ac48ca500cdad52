/*
 * virtual.c - `rumor sim --mode virtual`: a whole swarm in one process, on a virtual clock.
 *
 * What is real and what is simulated. Every peer is a real trainer (its own model, optimizer
 * and data shard, the local steps of `rumor node` with the same epoch shuffle) and a real
 * gossip engine (src/engine/gossip.h, the code a node runs); only time and the network are
 * simulated. A discrete-event loop advances a virtual clock from event to event:
 *   phase    a peer has done its local steps: they are computed (for real) and the peer
 *            reaches its gossip point (rumor_gossip_step);
 *   retry    a gossip point that returned WAIT reaches rumor_gossip_deadline();
 *   arrive   a model message reaches its receiver: its chunks go into the receiver's engine
 *            (rumor_gossip_on_chunk) and the sender's snapshot is released;
 *   churn    a kill or restart from the configuration's events, at a time.
 * Churn at a round (the slowest live peer's) fires when that round is reached. A WAIT is
 * retried at its deadline and whenever something may end it: a chunk for that peer, or the
 * release of one of its sends (the engine waits for a free snapshot).
 *
 * Virtual time. A phase of H local steps lasts H * step_ms (times `slowdown` for the
 * straggler). With step_ms = 0 the time of a step is derived from the model's flop count
 * (rumor_model_flops, forward and backward, times the batch) at a nominal 10 GFLOP/s,
 * rather than measured (sim.h's "0: measured"): a measurement would make the run depend on
 * the machine and its load, and a virtual run must be a function of its configuration alone.
 * logreg at batch 64 gets 0.2 ms a step, mlp:256,128 6.5 ms.
 *
 * The network. A message leaves when the sender's uplink is free (a peer sends one message
 * at a time at bandwidth_mbps; 0 is infinite), and arrives latency_ms after it has left:
 * arrival = departure + bytes * 8 / bandwidth + latency. All chunks of a message arrive
 * together. A message is lost with probability `loss`, drawn in event order from a seeded
 * stream. Payloads are never copied: a message points at the sender's snapshot, which the
 * engine keeps until the message is released at its arrival (delivered or dropped). So memory
 * is bounded by the engine's two snapshots per peer, and a send completes on delivery, as
 * with an acknowledged transport; a peer cannot run more than a round ahead of its own
 * messages.
 *
 * Membership. Every peer runs the membership state machine of `rumor node` (src/engine/membership.h,
 * with the period and suspicion time proc mode gives its nodes): its messages travel the same
 * emulated network (latency and loss, not bandwidth: they are small), its timers are events.
 * Peers join through peer 0, as in proc mode, and start training once their view holds
 * everyone (or view_size members), or after JOIN_WAIT of virtual time. An engine's view is its
 * peer's membership view and itself, given to it at the next gossip point after a change (the
 * engine reads its view only when a round starts). So a killed peer is noticed as a node
 * notices it, by failed probes and suspicion, rounds waiting for it up to their deadline
 * meanwhile; a finished peer leaves (bye) and is dropped at once. Membership is not
 * certificate-checked here: every message comes from a peer of the simulation. Keys are 32
 * bytes, the peer index big-endian in the first four, so sorted keys give rank = index.
 *
 * Churn. A killed peer stops: its phase in progress is lost, its messages in flight are
 * dropped, and messages for it are dropped on arrival. When the run restarts peers, each keeps
 * a checkpoint every CKPT_EVERY rounds (in memory: parameters, optimizer, the engine's round
 * and weights, DiLoCo's outer state, DP steps), as `rumor sim` has its nodes write one; a
 * restarted peer goes on from its last one with a new engine and its metrics cut back to it,
 * losing the rounds since, as a restarted node does. "N%" picks that share of all peers (rounded, at least one) among the live
 * ones (kill) or the killed ones (restart), from a seeded stream.
 *
 * Sharing. The datasets are loaded once. Each peer keeps its shard normalised as floats (the
 * inputs rumor_train_load_batch would make, computed once: every sample belongs to one peer,
 * so this is the training set once, 4 bytes a pixel, and a step copies its batch from a
 * shard that stays in cache instead of converting pixels again). One CPU backend with one
 * thread serves all models (single thread: the same configuration gives the same bits).
 * One topology object serves all engines: topologies are pure functions of (spec, seed, n,
 * round), so sharing it equals each peer holding its own, and since peers move through
 * rounds together its cache of the last round built is mostly hit. Evaluation uses one
 * extra model (the peer's parameters are copied in; the CPU backend's memory is host
 * memory) over a test set normalised once.
 *
 * Determinism: one thread (`threads` is for proc mode; here OpenBLAS runs one thread too, as
 * the summation order depends on it), every random draw from rumor_rng streams of the seed
 * (DP-SGD's batches and noise from a seeded rumor_noise stream: replayable, so protecting
 * nothing, as summary.json says), events
 * ordered by (time, insertion sequence), no wall-clock value in any file. The real clock is
 * read only to pace the live status display.
 */
#include "virtual_impl.h"

static bool ev_less(const event_t *x, const event_t *y)
{
    if (x->t != y->t) return x->t < y->t;
    return x->peer != y->peer ? x->peer < y->peer : x->seq < y->seq;
}

rumor_err_t virt_heap_push(heap_t *h, uint64_t t, int peer, int kind, int a, uint32_t b)
{
    if (h->n == h->cap) {
        const size_t cap = h->cap ? 2 * h->cap : 1024;
        event_t *v = realloc(h->v, cap * sizeof *v);
        if (!v) return RUMOR_ENOMEM;
        h->v = v, h->cap = cap;
    }
    event_t e = {.t = t, .peer = (uint32_t)peer, .seq = h->seq++, .kind = kind, .a = a, .b = b};
    size_t i = h->n++;
    while (i > 0) {
        const size_t up = (i - 1) / 2;
        if (!ev_less(&e, &h->v[up])) break;
        h->v[i] = h->v[up];
        i = up;
    }
    h->v[i] = e;
    return RUMOR_OK;
}

static event_t heap_pop(heap_t *h)
{
    const event_t top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && ev_less(&h->v[c + 1], &h->v[c])) c++;
        if (!ev_less(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n > 0) h->v[i] = last;
    return top;
}

rumor_err_t virt_fail(sim_t *s, rumor_err_t rc, const char *fmt, ...)
{
    if (s->rc == RUMOR_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->err, sizeof s->err, fmt, ap);
        va_end(ap);
        s->rc = rc;
    }
    return rc;
}

void virt_key_of(uint8_t key[RUMOR_KEY_LEN], int i)
{
    memset(key, 0, RUMOR_KEY_LEN);
    key[0] = (uint8_t)((uint32_t)i >> 24);
    key[1] = (uint8_t)((uint32_t)i >> 16);
    key[2] = (uint8_t)((uint32_t)i >> 8);
    key[3] = (uint8_t)i;
    key[31] = 0x76; /* 'v': not all zero */
}

int virt_index_of(const sim_t *s, const uint8_t key[RUMOR_KEY_LEN])
{
    if (s->replaying) return virt_replay_index(&s->replay, key); /* the nodes' keys */
    const uint32_t i = (uint32_t)key[0] << 24 | (uint32_t)key[1] << 16 | (uint32_t)key[2] << 8 | key[3];
    return i < (uint32_t)s->n && memcmp(s->p[i].key, key, RUMOR_KEY_LEN) == 0 ? (int)i : -1;
}

// ---- files ----

void virt_metrics_path(const sim_t *s, int i, char *buf, size_t len)
{
    snprintf(buf, len, "%s/peer-%03d/metrics.jsonl", s->c->out, i);
}

/* Metrics lines are buffered per peer and appended to the files now and then: a swarm of
 * thousands of peers cannot keep a file open for each. */

static rumor_err_t metrics_flush(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    if (virt_metrics_settle(s, i) != RUMOR_OK) return s->rc;
    if (p->mlen == 0) return RUMOR_OK;
    char path[1100];
    virt_metrics_path(s, i, path, sizeof path);
    FILE *f = fopen(path, "a");
    if (!f) return virt_fail(s, RUMOR_EIO, "%s: %s", path, strerror(errno));
    const bool ok = fwrite(p->mbuf, 1, p->mlen, f) == p->mlen;
    if (fclose(f) != 0 || !ok) return virt_fail(s, RUMOR_EIO, "%s: %s", path, strerror(errno));
    p->mflushed += p->mlen;
    p->mlen = 0;
    return RUMOR_OK;
}

static rumor_err_t metrics_flush_all(sim_t *s)
{
    for (int i = 0; i < s->n; i++)
        if (metrics_flush(s, i) != RUMOR_OK) return s->rc;
    return RUMOR_OK;
}

/* Peer i's metrics line l, into its buffer (written out now and then, see metrics_flush). */
static rumor_err_t metrics_append(sim_t *s, int i, const rumor_metrics_line_t *l)
{
    vpeer_t *p = &s->p[i];
    char line[512];
    const size_t k = rumor_metrics_line(line, sizeof line, l);
    if (p->mlen + k > p->mcap) {
        size_t cap = p->mcap ? 2 * p->mcap : 1024;
        while (cap < p->mlen + k) cap *= 2;
        char *b = realloc(p->mbuf, cap);
        if (!b) return virt_fail(s, RUMOR_ENOMEM, "out of memory for metrics");
        p->mbuf = b, p->mcap = cap;
    }
    memcpy(p->mbuf + p->mlen, line, k);
    p->mlen += k;
    return p->mlen >= METRICS_FLUSH ? metrics_flush(s, i) : RUMOR_OK;
}

/* Peer i's line that waits for its evaluation, if there is one: into its buffer, once
 * evaluated. Every other line of the peer's comes after it. */
rumor_err_t virt_metrics_settle(sim_t *s, int i)
{
    if (!virt_eval_pending(s, i)) return RUMOR_OK;
    rumor_metrics_line_t l;
    if (virt_eval_wait(s, i, &l) != RUMOR_OK) return s->rc;
    return metrics_append(s, i, &l);
}

static rumor_err_t metrics_put(sim_t *s, int i, const rumor_metrics_line_t *l)
{
    if (virt_metrics_settle(s, i) != RUMOR_OK) return s->rc;
    return metrics_append(s, i, l);
}

/* Peer i's line l with its test figures: evaluated on the worker while the run goes on where it
 * can be, else now. */
static rumor_err_t metrics_put_evaluated(sim_t *s, int i, rumor_metrics_line_t *l)
{
    if (virt_metrics_settle(s, i) != RUMOR_OK) return s->rc;
    if (virt_eval_later(s, i, l)) return RUMOR_OK;
    if (virt_evaluate(s, i, &l->test_loss, &l->test_acc) != RUMOR_OK) return s->rc;
    return metrics_append(s, i, l);
}

/* A metrics line about peer i's model alone, evaluated now: the one it starts from, or one
 * it took from the swarm (flag "resync", "swarm_final"). */
rumor_err_t virt_model_line(sim_t *s, int i, const char *flag)
{
    const vpeer_t *p = &s->p[i];
    rumor_metrics_line_t l = {.t = (double)s->now_us / 1e6, .t_decimals = 6, .round = p->core.k,
                              .step = rumor_optim_steps(p->o), .evaluated = true, .text = s->src.text, .flag = flag};
    return metrics_put_evaluated(s, i, &l);
}

// ---- gossip ----

static rumor_err_t send_all(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    const rumor_sim_config_t *c = s->c;
    rumor_gossip_send_t m;
    while (rumor_gossip_next_send(p->g, &m)) {
        const int to = virt_index_of(s, m.peer);
        if (to < 0) { /* cannot happen: views hold only our keys */
            rumor_gossip_release(p->g, &m, false);
            continue;
        }
        if (s->free_msg < 0) {
            if (s->n_msgs == s->cap_msgs) {
                const int cap = s->cap_msgs ? 2 * s->cap_msgs : 1024;
                msg_t *v = realloc(s->msgs, (size_t)cap * sizeof *v);
                if (!v) {
                    rumor_gossip_release(p->g, &m, false);
                    return virt_fail(s, RUMOR_ENOMEM, "out of memory for messages in flight");
                }
                s->msgs = v, s->cap_msgs = cap;
            }
            s->msgs[s->n_msgs].next_free = -1;
            s->free_msg = s->n_msgs++;
        }
        const int id = s->free_msg;
        msg_t *msg = &s->msgs[id];
        s->free_msg = msg->next_free;
        if (i == c->byzantine && rumor_attack_poisons(&s->attack) && m.snap >= 0 && m.snap < 2) {
            /* The Byzantine peer sends its poisoned copy; the snapshot is still what is released.
             * (Under compressed gossip what travels is a delta: its copy follows the poisoned
             * model instead, virt_try_gossip, and only the round label is changed here.) */
            if (!rumor_codec_is_delta(s->codec.id))
                m.params = rumor_poison_get(&p->poison, &s->attack, m.snap, m.round, m.params, &s->attack_rng);
            m.round = rumor_attack_round(&s->attack, m.round);
        }
        const uint64_t bytes = rumor_wire_send_bytes(&m, &s->codec);
        msg->from = i, msg->to = to, msg->from_inc = p->inc, msg->g = p->g, msg->s = m, msg->lost = false;
        uint64_t arrive_us = rumor_wire_link_send(&p->link, s->now_us, bytes, c->bandwidth_mbps, s->latency_us);
        rumor_trace_send(p->trace, s->now_us, m.peer, m.round);
        if (s->replaying) { /* when the receiving node had it; one it never had is lost */
            msg->lost = !virt_replay_arrival(&s->replay, to, i, m.round, &arrive_us);
            if (msg->lost || arrive_us < s->now_us) arrive_us = s->now_us;
        }
        p->bytes_out += bytes;
        if (virt_heap_push(&s->q, arrive_us, to, EV_ARRIVE, id, 0) != RUMOR_OK)
            return virt_fail(s, RUMOR_ENOMEM, "out of memory for events");
    }
    return RUMOR_OK;
}

/* Peers that finished, which peer i heard say so (their bye; none across a partition). */
static int finished_seen(const sim_t *s, int i)
{
    if (s->replaying) return s->p[i].rdone; /* as the node heard it */
    int n = 0;
    if (s->n_finished == 0) return 0; /* every round of every peer asks: no scan until one */
    for (int j = 0; j < s->n; j++) n += j != i && s->p[j].state == P_FINISHED && !virt_cut(s, i, j);
    return n;
}

/* Peer i's round is mixed (rumor_core_mixed said what follows): its metrics line, an
 * evaluation when due, a checkpoint, the next phase or its end. */
static rumor_err_t round_done(sim_t *s, int i, const rumor_core_after_t *a)
{
    vpeer_t *p = &s->p[i];
    const long k = p->core.k;
    rumor_optim_mixed(p->o, rumor_model_params(p->m));
    s->at_round[k - 1]--;
    s->at_round[k]++;
    if (k > s->round_top) s->round_top = k;
    virt_round_min_advance(s);
    if (s->now_us > s->end_us) s->end_us = s->now_us;
    rumor_gossip_stats_t st;
    rumor_gossip_stats(p->g, &st);
    if (s->opt.tracking && st.last_missing > 0) /* the trackers' sum is off for good: say so, stop */
        return virt_fail(s, RUMOR_EINVAL, "peer %d's round %ld left out %d neighbour%s: --tracking needs every round "
                         "complete", i, k, st.last_missing, st.last_missing == 1 ? "" : "s");
    const rumor_core_facts_t f = {.t = (double)s->now_us / 1e6, .t_decimals = 6, .step = rumor_optim_steps(p->o),
                                  .peers = p->view_peers, .bytes_out = p->bytes_out,
                                  .wait_s = (double)(s->now_us - p->waits_from_us + p->wait_done_us) / 1e6,
                                  .evaluated = a->evaluate, .text = s->src.text, .private = p->dp != NULL,
                                  .epsilon = p->dp ? rumor_dp_epsilon(p->dp) : 0.0};
    rumor_metrics_line_t ml;
    rumor_core_line(&p->core, &f, &st, &ml);
    p->wait_done_us = 0;
    if ((a->evaluate ? metrics_put_evaluated(s, i, &ml) : metrics_put(s, i, &ml)) != RUMOR_OK) return s->rc;
    /* Members it knows: those in its view, and the finished ones it heard say bye. */
    const int seen = a->finished ? 0 : finished_seen(s, i);
    if (!a->finished && rumor_core_swarm_over(&p->core, p->view_peers - 1 + seen, seen) && virt_finish_with_swarm(s, i))
        return s->rc == RUMOR_OK ? virt_round_churn(s) : s->rc;
    if (a->checkpoint && virt_ckpt_save(s, i) != RUMOR_OK) return s->rc;
    if (a->finished) {
        p->state = P_FINISHED; /* and out of the others' views: it says bye */
        s->n_finished++;
        rumor_memb_leave(p->memb, s->now_us / 1000);
        if (virt_memb_drain(s, i) != RUMOR_OK) return s->rc;
    } else if (virt_schedule_phase(s, i) != RUMOR_OK) {
        return s->rc;
    }
    return virt_round_churn(s);
}

/* The swarm is over for peer i (rumor_core_swarm_over): as a node does (src/peer/peer.c), it asks
 * up to RUMOR_RESYNC_ASKS finished members it can reach for their final models, takes their
 * mean when two confirm each other, or keeps its own, and ends; under secure mixing no model
 * is lent in the clear, and it ends with its own. (A node asks members that linger; here
 * finished peers answer, the lowest indices first.) true when it ended. */
bool virt_finish_with_swarm(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    rumor_confirm_t cf;
    rumor_confirm_init(&cf, rumor_model_param_count(p->m));
    int done = 0;
    const long k = p->core.k;
    for (int j = 0; j < s->n && done < RUMOR_RESYNC_ASKS && cf.a < 0; j++) {
        if (j == i || s->p[j].state != P_FINISHED || virt_cut(s, i, j)) continue;
        done++;
        const float *xj = rumor_model_params(s->p[j].m);
        if (!s->c->secure_mix && rumor_gossip_plausible(p->g, xj)) rumor_confirm_add(&cf, xj, (uint64_t)s->c->rounds);
    }
    if (done == 0) return false; /* alone for another reason (a partition, deaths): it trains on */
    rumor_trace_end(p->trace, s->now_us, k, cf.a >= 0);
    if (cf.a >= 0) {
        (void)rumor_confirm_mean(&cf, rumor_model_params(p->m));
        s->at_round[p->core.k]--;
        p->core.k = s->c->rounds;
        s->at_round[p->core.k]++;
        virt_round_min_advance(s);
        if (virt_model_line(s, i, "swarm_final") != RUMOR_OK) return true;
    }
    p->state = P_FINISHED;
    s->n_finished++;
    rumor_memb_leave(p->memb, s->now_us / 1000);
    (void)virt_memb_drain(s, i);
    return true;
}

/* Peer i is at its gossip point: step the engine, hand its sends to the network, and on
 * WAIT make sure something will call again (the deadline; chunks and releases call too). */
rumor_err_t virt_try_gossip(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    if (p->state != P_WAITING) return RUMOR_OK;
    if (p->view_dirty) virt_view_set(s, i);
    rumor_core_gossip_point(&p->core);
    const uint64_t now_ms = s->now_us / 1000;
    size_t nv;
    float *x = rumor_model_params(p->m), *v = rumor_optim_gossiped(p->o, &nv);
    const size_t P = rumor_model_param_count(p->m);
    if (p->gx && !rumor_gossip_waiting(p->g)) {
        if (p->poison_gx) { /* the Byzantine peer under compressed gossip: its copy follows the poison */
            rumor_attack_apply(&s->attack, x, p->gx, P, &s->attack_rng);
        } else { /* the model and the optimizer's gossiped state, one vector */
            memcpy(p->gx, x, P * sizeof *x);
            memcpy(p->gx + P, v, nv * sizeof *v);
        }
    }
    const rumor_gossip_status_t gs = rumor_gossip_step(p->g, p->gx ? p->gx : x, now_ms);
    if (send_all(s, i) != RUMOR_OK) return s->rc;
    if (gs == RUMOR_GOSSIP_DONE && p->gx && !p->poison_gx) {
        memcpy(x, p->gx, P * sizeof *x);
        memcpy(v, p->gx + P, nv * sizeof *v);
    }
    if (gs == RUMOR_GOSSIP_DONE) {
        rumor_core_after_t a;
        rumor_core_mixed(&p->core, (double)s->now_us / 1e6, &a);
        rumor_trace_mixed(p->trace, s->now_us, &p->core, &a);
        if (!a.landed) return round_done(s, i, &a);
        p->wait_done_us += s->now_us - p->waits_from_us; /* overlapped diloco: the rest of the round's steps */
        return virt_schedule_phase(s, i);
    }
    const uint64_t d = rumor_gossip_deadline(p->g);
    /* A deadline already passed means the engine waits for a snapshot to come free: the
     * release of one of its sends will call again. */
    if (d != UINT64_MAX && d > now_ms && d != p->retry_ms) {
        p->retry_ms = d;
        if (virt_heap_push(&s->q, d * 1000, i, EV_RETRY, i, p->inc) != RUMOR_OK)
            return virt_fail(s, RUMOR_ENOMEM, "out of memory for events");
    }
    return RUMOR_OK;
}

/* Secure mixing: the sender masks send m for its receiver (the masks of its edges, under the
 * mask keys of the peers they name) into s->masked, as a node's mask_send does; *ok false
 * when a chunk cannot be masked (a parameter beyond the fixed-point range): the send is then
 * dropped, as a node drops it, never sent in the clear. */
static rumor_err_t mask_model(sim_t *s, int from, const rumor_gossip_send_t *m, bool *ok)
{
    rumor_secmix_edges_t e = m->edges;
    for (int k = 0; k < e.count; k++) {
        const int j = virt_index_of(s, e.peer[k]);
        if (j < 0) return virt_fail(s, RUMOR_EINVAL, "peer %d: a mask edge to an unknown peer", from);
        memcpy(e.peer[k], rumor_secret_key_public(s->p[j].mkey), RUMOR_SECMIX_KEY_LEN);
    }
    char e2[RUMOR_ERR_LEN];
    *ok = rumor_secmix_mask_model(s->p[from].sm, &e, m->params, m->count, m->chunk_params, m->share, m->w, s->masked,
                                  s->masked_off, e2) == RUMOR_OK;
    if (!*ok) rumor_log(RUMOR_LOG_WARN, "peer %d: %s: round %" PRIu64 " not sent", from, e2, m->round);
    return RUMOR_OK;
}

static rumor_err_t arrive(sim_t *s, int id)
{
    msg_t *msg = &s->msgs[id];
    const int from = msg->from, to = msg->to;
    vpeer_t *pf = &s->p[from], *pt = &s->p[to];
    const bool lost = s->c->loss > 0 && rumor_rng_uniform(&s->loss_rng) < s->c->loss;
    const bool deliver = !lost && !msg->lost && pf->inc == msg->from_inc && virt_running(pt) && !virt_cut(s, from, to);
    const rumor_gossip_send_t *m = &msg->s;
    if (deliver) {
        const uint32_t chunks = (uint32_t)rumor_chunks(m->count, m->chunk_params);
        const uint64_t now_ms = s->now_us / 1000;
        bool masked_ok = true;
        if (m->masked && mask_model(s, from, m, &masked_ok) != RUMOR_OK) return s->rc;
        /* The model as a node sends it (wire.h: encoded once a snapshot, into the sender's
         * buffers), chunk by chunk through the receiver's path. */
        size_t wire;
        const rumor_wire_model_t wm =
            rumor_wire_model_for(m, m->params, &pf->coded, (const uint8_t *)s->masked, s->masked_off, &wire, NULL);
        for (uint32_t k = 0; k < chunks && masked_ok; k++) {
            rumor_msg_model_t mm;
            rumor_wire_chunk(&wm, k, &mm);
            rumor_trace_arrive(pt->trace, s->now_us, pf->key, mm.round, mm.chunk);
            (void)rumor_wire_receive(&s->wire_in, pt->g, pf->key, &mm, now_ms);
        }
    }
    /* It left the sender either way: a loss on the wire is not a refusal. */
    rumor_gossip_release(msg->g, m, true);
    msg->next_free = s->free_msg;
    s->free_msg = id;
    if (deliver && virt_try_gossip(s, to) != RUMOR_OK) return s->rc;
    return virt_try_gossip(s, from);
}

// ---- the run ----

static void show_status(sim_t *s, double t0, bool final)
{
    if (s->c->quiet) return;
    rumor_sim_status_t st;
    rumor_sim_status_read(s->c->out, s->n, s->alive, s->c->rounds, rumor_now() - t0, &st);
    st.virtual_s = (double)(final ? s->end_us : s->now_us) / 1e6;
    rumor_sim_status_print(s->c, &st, isatty(STDERR_FILENO) == 1, final);
}

/* The run folder and one empty metrics file per peer. */
static rumor_err_t make_folders(const rumor_sim_config_t *c, char err[RUMOR_ERR_LEN])
{
    char path[1100];
    rumor_err_t rc = rumor_make_dirs(c->out, 0755, err);
    for (int i = 0; i < c->peers && rc == RUMOR_OK; i++) {
        snprintf(path, sizeof path, "%s/peer-%03d", c->out, i);
        if ((rc = rumor_make_dirs(path, 0755, err)) != RUMOR_OK) break;
        snprintf(path, sizeof path, "%s/peer-%03d/metrics.jsonl", c->out, i);
        FILE *f = fopen(path, "w");
        if (!f || fclose(f) != 0) rc = rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
    }
    return rc;
}

/* The events, in time order, until none is left, the run is over, an error, or a stop: true
 * when stopped. */
static bool run_events(sim_t *s, const atomic_bool *stop, double t0)
{
    const rumor_sim_config_t *c = s->c;
    bool interrupted = false;
    double last_show = rumor_now();
    const double show_every = PROGRESS_S * (s->n > PROGRESS_PEERS ? (double)s->n / PROGRESS_PEERS : 1.0);
    while (s->rc == RUMOR_OK && s->q.n > 0) {
        if (rumor_asked(stop)) {
            interrupted = true;
            break;
        }
        const event_t e = heap_pop(&s->q);
        s->now_us = e.t;
        s->events++;
        switch (e.kind) {
        case EV_PHASE: {
            vpeer_t *p = &s->p[e.a];
            if (p->inc != e.b || p->state != P_COMPUTING) break; /* killed since */
            if (virt_ensure_phase(s, e.a) != RUMOR_OK) break;
            s->progress_us = s->now_us;
            p->state = P_WAITING;
            p->waits_from_us = s->now_us;
            rumor_trace_phase(p->trace, s->now_us, p->core.k);
            (void)virt_try_gossip(s, e.a);
            break;
        }
        case EV_RETRY: {
            vpeer_t *p = &s->p[e.a];
            if (p->inc != e.b) break;
            if (p->retry_ms * 1000 == e.t) p->retry_ms = 0;
            (void)virt_try_gossip(s, e.a);
            break;
        }
        case EV_ARRIVE:
            (void)arrive(s, e.a);
            break;
        case EV_CHURN:
            s->churn_pending--;
            (void)virt_fire_churn(s, e.a);
            (void)virt_round_churn(s);
            break;
        case EV_MTICK:
            if (s->p[e.a].inc == e.b && s->p[e.a].mtick_us == e.t) (void)virt_memb_tick(s, e.a);
            break;
        case EV_MMSG:
            (void)virt_memb_arrive(s, e.a);
            break;
        case EV_VIEW: /* --replay: the node's view changed */
            s->p[e.a].rview = (int)e.b;
            s->p[e.a].view_dirty = true;
            (void)virt_try_gossip(s, e.a);
            break;
        case EV_DONE: /* --replay: members the node heard say they finished */
            s->p[e.a].rdone = (int)e.b;
            break;
        }
        /* Membership ticks never end: the run does when no peer has rounds to go and no churn
         * can bring one back, or when nothing has progressed for an hour of virtual time (an
         * engine waiting with no deadline; not expected: said below). */
        if (e.kind == EV_MTICK && s->now_us >= s->done_check_us) {
            /* (at most every 100 ms of virtual time: a tick per peer per quarter period would
             * make this scan quadratic in the swarm) */
            s->done_check_us = s->now_us + 100000;
            bool active = false;
            for (int i = 0; i < s->n && !active; i++)
                active = virt_running(&s->p[i]) || s->p[i].state == P_JOINING;
            if ((!active && s->churn_pending == 0) || s->now_us > s->progress_us + 3600000000ULL) break;
        }
        if (s->events % PROGRESS_EVENTS == 0 && !c->quiet && rumor_now() - last_show >= show_every) {
            if (metrics_flush_all(s) != RUMOR_OK) break;
            show_status(s, t0, false);
            last_show = rumor_now();
        }
    }
    return interrupted;
}

rumor_err_t rumor_sim_run_virtual(const rumor_sim_config_t *c, const atomic_bool *stop, char err[RUMOR_ERR_LEN])
{
    sim_t s = {.c = c, .n = c->peers};
    rumor_err_t rc = RUMOR_OK;
    const double t0 = rumor_now();
    bool interrupted = false;
    if (!c->out[0]) return rumor_fail(err, RUMOR_EINVAL, "virtual mode: no run folder given");
    if (c->peers < 1 || c->peers > RUMOR_SIM_MAX_PEERS)
        return rumor_fail(err, RUMOR_EINVAL, "--peers %d: expected 1..%d", c->peers, RUMOR_SIM_MAX_PEERS);
    if (c->rounds < 1) return rumor_fail(err, RUMOR_EINVAL, "--rounds %ld: expected at least 1", c->rounds);
    if (c->batch < 1) return rumor_fail(err, RUMOR_EINVAL, "--batch %d: expected at least 1", c->batch);
    if (!(c->loss >= 0 && c->loss <= 1)) return rumor_fail(err, RUMOR_EINVAL, "loss %g: expected 0..1", c->loss);

    if ((rc = make_folders(c, err)) != RUMOR_OK) return rc;
    if ((rc = virt_setup(&s, err)) != RUMOR_OK) goto out;
    virt_worker_start(&s);

    /* Round 0: every peer evaluated at its start; it joins, and trains once in the swarm. */
    for (int i = 0; i < s.n && s.rc == RUMOR_OK; i++) {
        if (virt_model_line(&s, i, NULL) != RUMOR_OK) break;
        if (s.restarts && virt_ckpt_save(&s, i) != RUMOR_OK) break; /* killed before its first: it starts over */
    }
    for (int i = 0; i < s.n && s.rc == RUMOR_OK; i++) (void)virt_memb_start(&s, i, 1);
    (void)virt_round_churn(&s);
    if (s.rc == RUMOR_OK && metrics_flush_all(&s) == RUMOR_OK) show_status(&s, t0, false);

    interrupted = run_events(&s, stop, t0);
    if (interrupted) s.end_us = s.now_us;
    if (s.rc == RUMOR_OK && !interrupted) {
        for (int i = 0; i < s.n; i++)
            if (virt_running(&s.p[i])) {
                /* No event left, yet a live peer has rounds to go: an engine waits with no
                 * deadline and nothing in flight. Not expected; say so rather than hang. */
                rumor_log(RUMOR_LOG_WARN, "virtual: peer %d stuck at round %ld with no event pending", i, s.p[i].core.k);
                break;
            }
    }

    /* Whatever happened, the metrics written so far go to their files and the summary. */
    {
        const rumor_err_t frc = metrics_flush_all(&s);
        if (s.rc != RUMOR_OK) {
            rc = s.rc;
            snprintf(err, RUMOR_ERR_LEN, "%s", s.err);
            goto out;
        }
        if ((rc = frc) != RUMOR_OK) goto out;
    }
    virt_worker_stop(&s); /* (after an interrupt it may still be in a phase: the models are read next) */
    show_status(&s, t0, true);
    if ((rc = rumor_sim_write_summary(c, rumor_now() - t0, (double)s.end_us / 1e6, interrupted, virt_models_spread(&s),
                                      err)) != RUMOR_OK)
        goto out;
    if (!c->quiet)
        rumor_log(RUMOR_LOG_INFO, "virtual run: %.3f s of virtual time in %.1f s real, %" PRIu64
                  " events, local phases computed %" PRIu64 " here and %" PRIu64 " on a second thread, evaluations %" PRIu64
                  " and %" PRIu64 "%s",
                  (double)s.end_us / 1e6, rumor_now() - t0, s.events, s.phases_main, s.phases_worker, s.evals_main,
                  s.evals_worker, interrupted ? " (interrupted)" : "");
    if (c->plots) rumor_sim_plot(c->out);
out:
    virt_teardown(&s);
    return rc;
}
