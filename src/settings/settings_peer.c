/*
 * settings_peer.c - settings into the configurations of a node and of a training peer
 * (rumor node, and a library peer: the same swarm settings, one reading of them).
 */
#include "settings.h"

#include "attack.h"
#include "checkpoint.h"
#include "codec.h"
#include "dp.h"

#include <string.h>

_Static_assert(RUMOR_SETTINGS_MAX_BOOTSTRAPS == RUMOR_NODE_MAX_BOOTSTRAPS, "one bootstrap limit");

void rumor_settings_node(const rumor_settings_t *s, rumor_node_config_t *cfg)
{
    char err[RUMOR_ERR_LEN];
    memset(cfg, 0, sizeof *cfg);
    cfg->memb = rumor_memb_defaults();
    cfg->exit_on_refusal = 1;
    cfg->key_path = s->key;
    cfg->cert_path = s->cert;
    cfg->swarm = s->swarm;
    cfg->listen = s->listen;
    cfg->advertise = s->advertise[0] ? s->advertise : NULL;
    cfg->revoked_path = s->revoked[0] ? s->revoked : NULL;
    cfg->control = s->control[0] ? s->control : NULL;
    for (int i = 0; i < s->n_bootstraps; i++) cfg->bootstraps[cfg->n_bootstraps++] = s->bootstraps[i];
    cfg->join_timeout_ms = (uint64_t)(s->join_timeout * 1000.0);
    cfg->no_relay = !s->relay;
    cfg->relay_budget_mbps = s->relay_budget;
    rumor_attack_t attack;
    const bool attacks = rumor_attack_parse(&attack, s->attack, err) == RUMOR_OK;
    cfg->relay_tamper = attacks && attack.kind == RUMOR_ATTACK_RELAY_TAMPER;
    cfg->relay_forge = attacks && attack.kind == RUMOR_ATTACK_RELAY_FORGE;
    cfg->memb.view_size = s->view_size;
    cfg->memb.period_ms = (uint32_t)s->period_ms;
    cfg->memb.ping_timeout_ms = (uint32_t)(s->period_ms * 3 / 10 > 0 ? s->period_ms * 3 / 10 : 1);
    cfg->memb.suspect_ms = (uint32_t)s->suspect_ms;
    if (cfg->memb.exchange_ms < cfg->memb.period_ms) cfg->memb.exchange_ms = cfg->memb.period_ms;
}

/* What rumor's own trainer learns, and from what (a node's; a library peer has none). */
static rumor_err_t trainer_settings(const rumor_settings_t *s, rumor_peer_config_t *pc, char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc;
    if ((rc = rumor_settings_learning(s, &pc->spec, &pc->opt, &pc->sched, &pc->partition, &pc->partitioned, err)) != RUMOR_OK ||
        (s->dp[0] && (rc = rumor_dp_parse(&pc->dp, s->dp, err)) != RUMOR_OK))
        return rc;
    pc->dp.budget = (float)s->dp_budget;
    pc->data_dir = s->data;
    pc->rank = s->rank;
    pc->of = s->of;
    pc->limit = (size_t)s->limit;
    pc->device = s->device;
    pc->threads = s->threads;
    pc->batch = s->batch;
    pc->init_seed = rumor_settings_given(s, "init-seed") ? s->init_seed : s->seed;
    pc->eval_every = s->eval_every;
    pc->resume = s->resume;
    pc->vocab = s->vocab;
    pc->clip_grad = s->clip_grad;
    pc->slowdown = s->slowdown;
    return RUMOR_OK;
}

rumor_err_t rumor_settings_peer(const rumor_settings_t *s, rumor_cmd_t cmd, rumor_peer_config_t *pc,
                                rumor_st_meta_t *recorded, int cap, char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc;
    memset(pc, 0, sizeof *pc);
    rumor_settings_node(s, &pc->node);
    if ((cmd == RUMOR_CMD_NODE && (rc = trainer_settings(s, pc, err)) != RUMOR_OK) ||
        (rc = rumor_settings_algo(s, &pc->algo, err)) != RUMOR_OK ||
        (rc = rumor_robust_parse(&pc->robust, s->robust, err)) != RUMOR_OK ||
        (rc = rumor_attack_parse(&pc->attack, s->attack, err)) != RUMOR_OK ||
        (rc = rumor_codec_parse(&pc->codec, s->codec, err)) != RUMOR_OK)
        return rc;
    pc->seed = s->seed;
    pc->topology = s->topology;
    /* A library peer without rounds trains until its caller finishes it. */
    pc->rounds = s->rounds ? s->rounds : 100000000;
    pc->run_dir = s->run_dir;
    pc->trace = s->trace;
    pc->checkpoint_every = s->checkpoint_every;
    pc->settings = recorded;
    pc->n_settings = recorded ? rumor_settings_record(s, cmd, recorded, cap) : 0;
    pc->late_join = s->late_join;
    pc->linger_ms = (uint64_t)(s->linger * 1000.0);
    pc->linger_given = rumor_settings_given(s, "linger");
    pc->min_peers = s->min_peers ? s->min_peers : pc->partitioned ? pc->of : 1;
    pc->round_timeout_ms = (uint64_t)(s->round_timeout * 1000.0);
    pc->secure_mix = s->secure_mix;
    pc->consensus_step = s->consensus_step;
    pc->emu_latency_ms = s->latency_ms;
    pc->emu_bandwidth_mbps = s->bandwidth_mbps;
    pc->emu_loss = s->loss;
    if (pc->slowdown < 1.0) pc->slowdown = 1.0;
    return RUMOR_OK;
}
