/* core.c - the peer core (core.h): one peer's round, for every driver. */
#include "core.h"

#include <string.h>

void rumor_core_init(rumor_core_t *core, const rumor_core_config_t *c, rumor_gossip_t *g, long k, double now)
{
    memset(core, 0, sizeof *core);
    core->c = *c;
    core->g = g;
    core->k = k;
    core->ckpt_t = now;
}

bool rumor_core_last(const rumor_core_t *core)
{
    return core->k + 1 >= core->c.rounds || core->budget_spent;
}

void rumor_core_phase(rumor_core_t *core, rumor_core_phase_t *ph)
{
    const long H = core->c.local_steps;
    if (core->steps_done == 0) core->loss_sum = 0.0, core->samples = 0;
    /* Overlapped diloco: the steps until the round in flight lands, then the rest of the round. */
    ph->lands = rumor_gossip_merging(core->g);
    ph->count = ph->lands ? core->c.overlap_steps : H - core->steps_done;
    ph->sched_round = rumor_gossip_schedule_round(core->g, core->k);
    ph->first = ph->sched_round * H + core->steps_done;
    core->phase_steps = ph->count;
    core->lands = ph->lands;
}

void rumor_core_stepped(rumor_core_t *core, const rumor_trainer_stats_t *st)
{
    if (!st) return;
    core->budget_spent |= st->budget_spent;
    core->loss_sum += st->loss_sum;
    core->samples += st->samples;
    if (st->steps) core->lr = st->lr;
}

void rumor_core_gossip_point(rumor_core_t *core)
{
    if (rumor_core_last(core)) rumor_gossip_close(core->g);
}

void rumor_core_mixed(rumor_core_t *core, double now, rumor_core_after_t *a)
{
    const rumor_core_config_t *c = &core->c;
    memset(a, 0, sizeof *a);
    if (core->lands) { /* an overlapped round landed mid-round */
        core->steps_done += core->phase_steps;
        a->landed = true;
        return;
    }
    core->k++;
    core->steps_done = 0;
    a->finished = core->k >= c->rounds || core->budget_spent;
    a->evaluate = a->finished || (c->eval_every > 0 && core->k % c->eval_every == 0);
    /* At every N-th round when asked; otherwise every checkpoint_s, so that a killed peer
     * loses at most that much work whatever its round time. */
    a->checkpoint = !a->finished && (c->checkpoint_every > 0 ? core->k % c->checkpoint_every == 0
                                                             : now - core->ckpt_t >= c->checkpoint_s);
}

void rumor_core_checkpointed(rumor_core_t *core, double now)
{
    core->ckpt_t = now;
}

void rumor_core_line(const rumor_core_t *core, const rumor_core_facts_t *f, const rumor_gossip_stats_t *st,
                     rumor_metrics_line_t *l)
{
    *l = (rumor_metrics_line_t){.t = f->t, .t_decimals = f->t_decimals, .round = core->k, .step = f->step,
                                .trained = true, .loss = core->loss_sum / (double)(core->samples ? core->samples : 1),
                                .lr = core->lr, .consensus = st->consensus, .w = st->w, .peers = f->peers,
                                .neighbours = st->last_peers, .missing = st->last_missing, .bytes_out = f->bytes_out,
                                .bytes_in = st->bytes_in, .wait_s = f->wait_s, .deadline_s = f->deadline_s,
                                .evaluated = f->evaluated, .text = f->text, .test_loss = f->test_loss,
                                .test_acc = f->test_acc, .private = f->private, .epsilon = f->epsilon,
                                .secure_mix = core->c.secure_mix, .unmixed = st->chunks_unmixed,
                                .relayed = f->relayed, .implausible = st->drops[RUMOR_GOSSIP_DROP_IMPLAUSIBLE]};
}

bool rumor_core_swarm_over(const rumor_core_t *core, int members, int finished)
{
    return members > 0 && (finished == members || (!core->c.secure_mix && finished >= 2));
}

void rumor_core_resync_begin(const rumor_core_t *core, rumor_core_resync_t *rs, rumor_core_resync_why_t why,
                             size_t params)
{
    memset(rs, 0, sizeof *rs);
    rs->why = why;
    rs->own = rumor_gossip_round(core->g);
    rumor_confirm_init(&rs->cf, params);
}

rumor_core_answer_t rumor_core_resync_answer(const rumor_core_t *core, rumor_core_resync_t *rs, const float *x,
                                             uint64_t r, bool finished)
{
    rs->answers++;
    if (!rumor_gossip_plausible(core->g, x)) return RUMOR_CORE_IMPLAUSIBLE;
    if (rs->why == RUMOR_CORE_JOIN && r < RUMOR_CORE_LATE_JOIN_ROUNDS) {
        rs->starting = true;
        return RUMOR_CORE_STARTING;
    }
    if (rs->why == RUMOR_CORE_FINISHED ? !finished : rs->why == RUMOR_CORE_BEHIND && r < rs->own + RUMOR_RESYNC_AHEAD)
        return RUMOR_CORE_NOT_AHEAD;
    rumor_confirm_add(&rs->cf, x, r);
    return RUMOR_CORE_TAKEN;
}

bool rumor_core_resync_more(const rumor_core_resync_t *rs, int asked)
{
    return asked < RUMOR_RESYNC_ASKS && rs->cf.a < 0 && !rs->starting;
}

bool rumor_core_resync_end(rumor_core_t *core, const rumor_core_resync_t *rs, float *x, uint64_t *round)
{
    if (rs->cf.a < 0) return false;
    const uint64_t r = rumor_confirm_mean(&rs->cf, x);
    rumor_gossip_adopt(core->g, x, rs->why == RUMOR_CORE_FINISHED ? rs->own : r);
    /* Into step with the swarm: its round too, so this peer ends with it (and its schedule is
     * the swarm's). Two confirming members vouch for the round as for the model. */
    if (rs->why != RUMOR_CORE_FINISHED && (long)r > core->k)
        core->k = (long)r < core->c.rounds ? (long)r : core->c.rounds - 1;
    *round = r;
    return true;
}
