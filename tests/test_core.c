/* test_core.c - the peer core (src/peer/core.h) driven as a driver drives it, over real gossip
 * engines wired by hand (gossip_swarm.h): the phases it asks for, when it evaluates,
 * checkpoints and ends, what its line says, and when the swarm is over for it. */
#include "core.h"
#include "gossip_swarm.h"

#include <inttypes.h>

#define N 3

typedef struct {
    rumor_core_after_t after[64]; /* what each round's mix said, by round */
    rumor_core_phase_t ph[256];   /* every phase asked for, in order */
    int n_ph;
    long rounds_mixed;
    bool finished;
} trace_t;

/* Engines for N peers, complete graph, from one model: algo "dpsgd" or "diloco:H" with
 * overlap_steps (0: not overlapped). */
static void engines(swarm_t *s, const char *algo, int overlap_steps)
{
    swarm_init(s, N, "complete", "dpsgd", 8, 4, 1, 100000);
    char err[RUMOR_ERR_LEN];
    for (int i = 0; i < N; i++) {
        memcpy(s->x[i], s->x[0], s->P * sizeof(float));
        rumor_gossip_destroy(&s->g[i]);
        rumor_gossip_config_t cfg = {.params = s->P, .layout = 0x1234, .chunk_params = s->chunk,
                                     .round_timeout_ms = 100000};
        CHECK_RC(rumor_algo_parse(&cfg.algo, algo, err));
        cfg.algo.overlap = overlap_steps > 0;
        cfg.algo.overlap_steps = overlap_steps;
        memcpy(cfg.self, s->key[i], RUMOR_KEY_LEN);
        s->g[i] = rumor_gossip_new(&cfg, s->topo, s->x[i], err);
        CHECK_MSG(s->g[i] != NULL, "%s", err);
        rumor_gossip_set_view(s->g[i], (const uint8_t(*)[RUMOR_KEY_LEN])s->key, N);
    }
}

/* Every peer through its rounds in lock step, as a driver does: the phase's steps (each adds
 * its step index to the model, a loss of 1 per sample, lr 0.5; peer `spender` spends its budget
 * in round `spend_at`), the gossip point, the mix; peer 0's trace. */
static void drive(swarm_t *s, const rumor_core_config_t *c, int spender, long spend_at, trace_t *t)
{
    rumor_core_t core[N];
    bool done[N] = {false};
    memset(t, 0, sizeof *t);
    for (int i = 0; i < N; i++) rumor_core_init(&core[i], c, s->g[i], 0, 0.0);
    for (int guard = 0; guard < 200; guard++) {
        bool all = true;
        for (int i = 0; i < N; i++) all &= done[i];
        if (all) break;
        /* the steps of each running peer's phase */
        for (int i = 0; i < N; i++) {
            if (done[i]) continue;
            rumor_core_phase_t ph;
            rumor_core_phase(&core[i], &ph);
            if (i == 0 && t->n_ph < 256) t->ph[t->n_ph++] = ph;
            rumor_trainer_stats_t st = {.loss_sum = (double)ph.count * 2.0, .samples = ph.count * 2,
                                        .steps = ph.count, .lr = 0.5f};
            if (i == spender && core[i].k == spend_at) st.budget_spent = true;
            if (core[i].budget_spent) st = (rumor_trainer_stats_t){0};
            rumor_core_stepped(&core[i], &st);
            for (size_t j = 0; j < s->P; j++) s->x[i][j] += (float)(ph.first + i); /* each its own progress */
            rumor_core_gossip_point(&core[i]);
        }
        /* the gossip points: every engine stepped until none progresses */
        bool mixed[N] = {false};
        for (int pass_ = 0; pass_ < 4; pass_++)
            for (int i = 0; i < N; i++) {
                if (done[i] || mixed[i]) continue;
                mixed[i] = rumor_gossip_step(s->g[i], s->x[i], 1000) == RUMOR_GOSSIP_DONE;
                drain(s, i, 1000);
            }
        for (int i = 0; i < N; i++) {
            if (done[i]) continue;
            CHECK_MSG(mixed[i], "peer %d mixed its gossip point (round %ld)", i, core[i].k);
            if (!mixed[i]) return;
            rumor_core_after_t a;
            rumor_core_mixed(&core[i], (double)(core[i].k + 1), &a); /* (time: rounds done) */
            if (i == 0 && !a.landed && core[i].k < 64) {
                t->after[core[i].k] = a;
                t->rounds_mixed = core[i].k;
                if (a.evaluate || core[i].k == 2) { /* its line */
                    const rumor_core_facts_t f = {.t = 1.5, .t_decimals = 6, .step = 7, .peers = N,
                                                  .evaluated = a.evaluate, .test_acc = 0.25};
                    rumor_gossip_stats_t gs;
                    rumor_gossip_stats(s->g[0], &gs);
                    rumor_metrics_line_t l;
                    rumor_core_line(&core[0], &f, &gs, &l);
                    CHECK(l.round == core[0].k && l.trained && l.step == 7 && l.peers == N && l.t == 1.5);
                    CHECK_MSG(l.loss == 1.0 && l.lr == 0.5f, "round %ld: the line's loss %g (1: 2 per 2 samples) "
                              "and lr %g", l.round, l.loss, (double)l.lr);
                    CHECK_MSG(l.evaluated == a.evaluate && l.test_acc == 0.25 && l.neighbours == gs.last_peers &&
                              l.bytes_in == gs.bytes_in, "round %ld: the line's evaluation and the engine's figures "
                              "(%d neighbours)", l.round, l.neighbours);
                }
            }
            if (a.checkpoint) rumor_core_checkpointed(&core[i], (double)core[i].k);
            if (a.finished) { /* it says bye: out of the others' views */
                done[i] = true;
                uint8_t keys[N][RUMOR_KEY_LEN];
                size_t n = 0;
                for (int j = 0; j < N; j++)
                    if (!done[j]) memcpy(keys[n++], s->key[j], RUMOR_KEY_LEN);
                for (int j = 0; j < N; j++)
                    if (!done[j]) rumor_gossip_set_view(s->g[j], (const uint8_t(*)[RUMOR_KEY_LEN])keys, n);
            }
            if (i == 0) t->finished = done[0];
        }
    }
    CHECK_MSG(done[0] && done[1] && done[2], "every peer finished");
}

/* Plain rounds: H steps a phase at the schedule's round, evaluations every 2 rounds and at
 * the end, checkpoints at multiples of 2 but the last, the end after 5. */
static void test_rounds(void)
{
    swarm_t s;
    engines(&s, "diloco:3", 0);
    const rumor_core_config_t c = {.rounds = 5, .local_steps = 3, .eval_every = 2, .checkpoint_every = 2};
    trace_t t;
    drive(&s, &c, -1, 0, &t);
    CHECK_MSG(t.n_ph == 5 && t.rounds_mixed == 5, "5 phases, 5 rounds (%d, %ld)", t.n_ph, t.rounds_mixed);
    for (int k = 0; k < t.n_ph; k++)
        CHECK_MSG(t.ph[k].count == 3 && t.ph[k].first == 3L * k && !t.ph[k].lands,
                  "phase %d: 3 steps from step %d (%ld from %ld)", k, 3 * k, t.ph[k].count, t.ph[k].first);
    for (int k = 1; k <= 5; k++) {
        const rumor_core_after_t *a = &t.after[k];
        CHECK_MSG(a->evaluate == (k % 2 == 0 || k == 5) && a->checkpoint == (k % 2 == 0 && k < 5) &&
                  a->finished == (k == 5) && !a->landed,
                  "round %d: evaluate %d, checkpoint %d, finished %d", k, a->evaluate, a->checkpoint, a->finished);
    }
    swarm_fini(&s);
}

/* A budget spent in round 2's steps: round 2 is the peer's last, it still gossips (closed),
 * is evaluated and ends at 3; the others go on to their 6 rounds. */
static void test_budget(void)
{
    swarm_t s;
    engines(&s, "dpsgd", 0);
    const rumor_core_config_t c = {.rounds = 6, .local_steps = 1, .eval_every = 0, .checkpoint_every = 0,
                                   .checkpoint_s = INFINITY};
    trace_t t;
    drive(&s, &c, 0, 2, &t);
    CHECK_MSG(t.rounds_mixed == 3 && t.after[3].finished && t.after[3].evaluate && !t.after[3].checkpoint,
              "the budget spent in round 2: the peer's last mix is round 3's (%ld), evaluated", t.rounds_mixed);
    CHECK(!t.after[1].evaluate && !t.after[2].evaluate && !t.after[2].finished);
    rumor_gossip_stats_t gs;
    rumor_gossip_stats(s.g[1], &gs);
    CHECK_MSG(gs.round == 6, "its neighbours train on to the end (round %" PRIu64 ")", gs.round);
    swarm_fini(&s);
}

/* Overlapped diloco (H 4, 1 step to land): round 0 sends after 4 steps; each later round is
 * 1 step, the landing, then 3 more from its schedule's position; the last round closes. */
static void test_overlap(void)
{
    swarm_t s;
    engines(&s, "diloco:4", 1);
    const rumor_core_config_t c = {.rounds = 4, .local_steps = 4, .overlap_steps = 1, .eval_every = 1,
                                   .checkpoint_every = 0, .checkpoint_s = 2.5};
    trace_t t;
    drive(&s, &c, -1, 0, &t);
    bool shape = t.n_ph == 7 && t.ph[0].count == 4 && !t.ph[0].lands;
    for (int k = 1; k < 4 && shape; k++) {
        const rumor_core_phase_t *a = &t.ph[2 * k - 1], *b = &t.ph[2 * k];
        shape = a->lands && a->count == 1 && a->first == 4L * a->sched_round && !b->lands && b->count == 3 &&
                b->first == 4L * b->sched_round + 1;
    }
    CHECK_MSG(shape, "phases: 4, then (1 landing, 3) a round (%d phases)", t.n_ph);
    CHECK(t.rounds_mixed == 4 && t.after[4].finished);
    /* The last round closed the engines: the run ends on a mix (the complete graph's: one model),
     * not with a round still in flight. */
    double spread = 0.0;
    for (int i = 1; i < N; i++)
        for (size_t j = 0; j < s.P; j++) spread = fmax(spread, fabs((double)s.x[i][j] - s.x[0][j]));
    CHECK_MSG(spread < 1e-4, "the peers end on one mixed model (%g apart)", spread);
    /* checkpoints every 2.5 of the driver's clock (here: its round, given as the time) */
    CHECK_MSG(!t.after[1].checkpoint && !t.after[2].checkpoint && t.after[3].checkpoint && !t.after[4].checkpoint,
              "by time: a checkpoint at round 3 only (%d %d %d %d)", t.after[1].checkpoint, t.after[2].checkpoint,
              t.after[3].checkpoint, t.after[4].checkpoint);
    swarm_fini(&s);
}

/* When the swarm is over for a peer that has not finished. */
static void test_swarm_over(void)
{
    rumor_core_t core;
    rumor_core_config_t c = {.rounds = 5, .local_steps = 1};
    rumor_core_init(&core, &c, NULL, 0, 0.0);
    CHECK(!rumor_core_swarm_over(&core, 0, 0));  /* nobody known: alone, it trains on */
    CHECK(rumor_core_swarm_over(&core, 1, 1));   /* its one member finished */
    CHECK(!rumor_core_swarm_over(&core, 3, 1));
    CHECK(rumor_core_swarm_over(&core, 5, 2));   /* two vouch for the end */
    c.secure_mix = true;
    rumor_core_init(&core, &c, NULL, 0, 0.0);
    CHECK(!rumor_core_swarm_over(&core, 5, 2));  /* ... but not under secure mixing: every one */
    CHECK(rumor_core_swarm_over(&core, 5, 5));
}

/* Falling into step: which answers count, when to stop asking, what is taken. */
static void test_resync(void)
{
    swarm_t s;
    engines(&s, "dpsgd", 0);
    const size_t P = s.P;
    rumor_core_t core;
    const rumor_core_config_t c = {.rounds = 20, .local_steps = 1};
    rumor_core_init(&core, &c, s.g[0], 2, 0.0);
    float a[8], b[8], far[8], nan_[8], x[8];
    for (size_t j = 0; j < P; j++)
        a[j] = s.x[0][j] * 1.02f, b[j] = s.x[0][j] * 0.98f, far[j] = s.x[0][j] * 5.0f, nan_[j] = NAN;
    rumor_core_resync_t rs;

    /* behind: a model not 4 rounds ahead does not count; two that agree are taken, their mean,
     * at the lower of their rounds, and the peer takes that round */
    rumor_core_resync_begin(&core, &rs, RUMOR_CORE_BEHIND, P);
    CHECK(rumor_core_resync_answer(&core, &rs, nan_, 30, false) == RUMOR_CORE_IMPLAUSIBLE);
    CHECK(rumor_core_resync_answer(&core, &rs, a, 3, false) == RUMOR_CORE_NOT_AHEAD);
    CHECK(rumor_core_resync_more(&rs, 2));
    CHECK(rumor_core_resync_answer(&core, &rs, a, 12, false) == RUMOR_CORE_TAKEN);
    CHECK(rumor_core_resync_more(&rs, 2) && !rumor_core_resync_more(&rs, RUMOR_RESYNC_ASKS));
    CHECK(rumor_core_resync_answer(&core, &rs, b, 10, false) == RUMOR_CORE_TAKEN);
    CHECK_MSG(!rumor_core_resync_more(&rs, 2), "two that confirm each other: no further ask");
    uint64_t r = 0;
    CHECK(rumor_core_resync_end(&core, &rs, x, &r));
    double worst = 0.0;
    for (size_t j = 0; j < P; j++) worst = fmax(worst, fabs((double)x[j] - 0.5 * ((double)a[j] + b[j])));
    CHECK_MSG(r == 10 && core.k == 10 && worst < 1e-5 && rumor_gossip_round(s.g[0]) == 10,
              "their mean (%g off) at round %" PRIu64 ", the peer's round %ld", worst, r, core.k);

    /* one alone, or two that do not agree: nothing is taken */
    rumor_core_resync_begin(&core, &rs, RUMOR_CORE_BEHIND, P);
    CHECK(rumor_core_resync_answer(&core, &rs, x, 40, false) == RUMOR_CORE_TAKEN);
    const rumor_core_answer_t fa = rumor_core_resync_answer(&core, &rs, far, 40, false); /* 5x: disagrees */
    CHECK(fa == RUMOR_CORE_TAKEN || fa == RUMOR_CORE_IMPLAUSIBLE);
    CHECK(rumor_core_resync_more(&rs, 2));
    CHECK(!rumor_core_resync_end(&core, &rs, x, &r) && core.k == 10);

    /* a join that finds the swarm starting together asks no further */
    rumor_core_resync_begin(&core, &rs, RUMOR_CORE_JOIN, P);
    CHECK(rumor_core_resync_answer(&core, &rs, x, 2, false) == RUMOR_CORE_STARTING);
    CHECK(!rumor_core_resync_more(&rs, 1) && !rumor_core_resync_end(&core, &rs, x, &r));

    /* a join far behind: the swarm's round, but at most the last but one */
    rumor_core_resync_begin(&core, &rs, RUMOR_CORE_JOIN, P);
    CHECK(rumor_core_resync_answer(&core, &rs, x, 50, false) == RUMOR_CORE_TAKEN);
    CHECK(rumor_core_resync_answer(&core, &rs, x, 60, false) == RUMOR_CORE_TAKEN);
    CHECK_MSG(rumor_core_resync_end(&core, &rs, x, &r) && r == 50 && core.k == 19,
              "round %" PRIu64 ": the peer at %ld (19: one round left)", r, core.k);

    /* at the end: only finished members count, and the peer keeps its round */
    rumor_core_resync_begin(&core, &rs, RUMOR_CORE_FINISHED, P);
    CHECK(rumor_core_resync_answer(&core, &rs, x, 60, false) == RUMOR_CORE_NOT_AHEAD);
    CHECK(rumor_core_resync_answer(&core, &rs, x, 60, true) == RUMOR_CORE_TAKEN);
    CHECK(rumor_core_resync_answer(&core, &rs, x, 60, true) == RUMOR_CORE_TAKEN);
    CHECK(rumor_core_resync_end(&core, &rs, x, &r) && core.k == 19 && rs.answers == 3);
    swarm_fini(&s);
}

int main(void)
{
    test_rounds();
    test_budget();
    test_overlap();
    test_swarm_over();
    test_resync();
    return check_done();
}
