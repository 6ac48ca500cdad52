/*
 * settings_check.c - the rules between settings (rumor_settings_check): what no single value
 * shows, for train, node and sim alike, each refused in one sentence that names the settings.
 * The table and each value's own check are settings.c's.
 */
#include "settings.h"

#include "attack.h"
#include "codec.h"
#include "data.h"
#include "dp.h"
#include "gossip.h"
#include "topology.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

/* What the gossip settings of a node or a simulated swarm exclude. */
static rumor_err_t check_gossip(const rumor_settings_t *s, rumor_cmd_t cmd, char err[RUMOR_ERR_LEN])
{
    rumor_algo_t algo;
    rumor_robust_t rb;
    rumor_codec_t cd;
    rumor_attack_t at;
    rumor_err_t rc;
    if ((rc = rumor_settings_algo(s, &algo, err)) != RUMOR_OK || (rc = rumor_robust_parse(&rb, s->robust, err)) != RUMOR_OK ||
        (rc = rumor_codec_parse(&cd, s->codec, err)) != RUMOR_OK || (rc = rumor_attack_parse(&at, s->attack, err)) != RUMOR_OK)
        return rc;
    if ((rb.clip || rb.trim) && algo.kind == RUMOR_ALGO_SGP)
        return rumor_fail(err, RUMOR_EINVAL, "--robust needs dpsgd or diloco (push-sum weights are not clipped or trimmed)");
    /* (virtual mode's Byzantine peer moves its public copy towards its poisoned model,
     * virtual.c; a node's attack replaces the models it sends, which compressed gossip does
     * not send) */
    const bool attacks = cmd == RUMOR_CMD_SIM ? s->byzantine >= 0 && strcmp(s->mode, "virtual") != 0
                                              : rumor_attack_poisons(&at);
    if (rumor_codec_is_delta(cd.id) && attacks)
        return rumor_fail(err, RUMOR_EINVAL, "--codec %s (compressed gossip) and --%s exclude each other%s",
                          rumor_codec_name(cd.id), cmd == RUMOR_CMD_SIM ? "byzantine" : "attack",
                          cmd == RUMOR_CMD_SIM ? " in proc mode (virtual mode has it)" : "");
    if ((rc = rumor_gossip_check_modes(&algo, &rb, s->secure_mix, &cd, s->consensus_step,
                                       s->tracking                             ? "--tracking"
                                       : strcmp(s->optimizer, "dadamw") == 0 ? "--optimizer dadamw"
                                                                             : NULL,
                                       err)) != RUMOR_OK)
        return rc;
    if (s->dp_budget > 0 && !s->dp[0]) return rumor_fail(err, RUMOR_EINVAL, "--dp-budget needs --dp");
    if (cmd != RUMOR_CMD_SIM && rumor_settings_given(s, "local-steps") && algo.kind == RUMOR_ALGO_DILOCO)
        return rumor_fail(err, RUMOR_EINVAL, "--local-steps %d: not with diloco:H (H is its local steps)", s->local_steps);
    return RUMOR_OK;
}

/* --robust asks for clipping or trimming ("auto" steps aside where they do not apply). */
static bool explicit_robust(const rumor_settings_t *s)
{
    rumor_robust_t rb;
    return rumor_robust_parse(&rb, s->robust, NULL) == RUMOR_OK && (rb.clip || rb.trim);
}

static rumor_err_t check_sim(const rumor_settings_t *c, char err[RUMOR_ERR_LEN])
{
    if (strcmp(c->mode, "proc") == 0 && c->peers > 256)
        return rumor_fail(err, RUMOR_EINVAL, "--peers %d: proc mode runs at most 256 processes (try --mode virtual)",
                          c->peers);
    rumor_topology_t *t = rumor_topology_new(c->topology, c->seed, err);
    if (!t) return RUMOR_EINVAL;
    const rumor_err_t rc = rumor_topology_check(t, (size_t)c->peers, err);
    rumor_topology_destroy(&t);
    if (rc != RUMOR_OK) return rc;
    if (c->straggler >= c->peers)
        return rumor_fail(err, RUMOR_EINVAL, "--straggler %d: only %d peers", c->straggler, c->peers);
    if (c->byzantine >= c->peers)
        return rumor_fail(err, RUMOR_EINVAL, "--byzantine %d: only %d peers", c->byzantine, c->peers);
    for (int i = 0; i < c->n_events; i++)
        if (c->events[i].peer >= c->peers)
            return rumor_fail(err, RUMOR_EINVAL, "event on peer %d: only %d peers", c->events[i].peer, c->peers);
    if (c->soak && c->faults)
        return rumor_fail(err, RUMOR_EINVAL, "--soak runs seeds 1..N, --faults one seed: give one of them");
    /* Gradient tracking rests on every mix keeping the sum of the trackers: one lost message
     * leaves it off for good, and the swarm then follows a wrong gradient (docs/decisions.md). */
    const char *loses = c->loss > 0 ? "--loss" : c->faults || c->soak ? "faults" : c->n_events ? "events"
                      : c->n_parts ? "a partition" : c->straggler >= 0 ? "--straggler" : c->byzantine >= 0 ? "--byzantine"
                      : explicit_robust(c) ? "--robust" /* clipping and trimming change the sum too */
                      : c->dp_budget > 0 ? "--dp-budget" /* peers spend it in different rounds, then stop */
                      : NULL;
    if (c->tracking && strcmp(c->mode, "virtual") != 0)
        return rumor_fail(err, RUMOR_EINVAL, "--tracking needs --mode virtual: it needs every round complete, which "
                                             "real links do not promise");
    if (c->tracking && loses)
        return rumor_fail(err, RUMOR_EINVAL, "--tracking and %s exclude each other: tracking needs every round to "
                                             "mix every tracker whole", loses);
    if (c->replay[0] && strcmp(c->mode, "virtual") != 0)
        return rumor_fail(err, RUMOR_EINVAL, "--replay needs --mode virtual: it replays real nodes' traces");
    if (c->replay[0]) {
        char trace[RUMOR_SETTINGS_PATH + 32];
        snprintf(trace, sizeof trace, "%s/peer-000/trace", c->replay);
        if (access(trace, R_OK) != 0)
            return rumor_fail(err, RUMOR_EINVAL, "--replay %s: no peer traces there (%s: %s); make them with rumor sim "
                              "--trace-peers", c->replay, trace, strerror(errno));
    }
    if (c->replay[0] && (c->soak || c->faults || c->n_events || c->n_parts || c->loss > 0))
        return rumor_fail(err, RUMOR_EINVAL, "--replay takes the run as the nodes saw it: give no faults, events, "
                                             "partitions or --loss");
    if (c->exec[0] && strcmp(c->mode, "proc") != 0)
        return rumor_fail(err, RUMOR_EINVAL, "--exec needs --mode proc: it runs a program of yours as each peer");
    if (c->exec[0] && (c->straggler >= 0 || c->byzantine >= 0 || c->soak || c->faults))
        return rumor_fail(err, RUMOR_EINVAL, "--exec runs a program of yours as each peer: --straggler, --byzantine, "
                                             "--soak and --faults are rumor node's");
    if (c->soak_from > 1 && c->soak_from > c->soak)
        return rumor_fail(err, RUMOR_EINVAL, "--soak-from %d: the soak's seeds end at --soak %d", c->soak_from, c->soak);
    return RUMOR_OK;
}

static rumor_err_t check_node(const rumor_settings_t *s, char err[RUMOR_ERR_LEN])
{
    const char *missing = !s->key[0] ? "--key" : !s->cert[0] ? "--cert" : !s->swarm[0] ? "--swarm"
                        : !s->listen[0] ? "--listen" : NULL;
    if (missing) return rumor_fail(err, RUMOR_EINVAL, "node needs %s (see rumor node --help)", missing);
    if (s->suspect_ms < s->period_ms)
        return rumor_fail(err, RUMOR_EINVAL, "--suspect %d: expected at least --period (%d ms)", s->suspect_ms, s->period_ms);
    if (rumor_settings_node_trains(s) && !s->run_dir[0])
        return rumor_fail(err, RUMOR_EINVAL, "a training node needs --run-dir DIR (metrics, checkpoints and the model go there)");
    return RUMOR_OK;
}

/* A library peer: a node's swarm settings; where it keeps its files is the caller's choice,
 * but secure mixing must keep its round floor across restarts. */
static rumor_err_t check_peer(const rumor_settings_t *s, char err[RUMOR_ERR_LEN])
{
    const char *missing = !s->key[0] ? "key" : !s->cert[0] ? "cert" : !s->swarm[0] ? "swarm"
                        : !s->listen[0] ? "listen" : NULL;
    if (missing)
        return rumor_fail(err, RUMOR_EINVAL, "a peer needs the setting '%s' (its secret key, its certificate, the "
                          "swarm's authority.pub, where it listens: rumor keygen and rumor swarm admit make them)", missing);
    if (s->suspect_ms < s->period_ms)
        return rumor_fail(err, RUMOR_EINVAL, "suspect %d: expected at least period (%d ms)", s->suspect_ms, s->period_ms);
    if (s->secure_mix && !s->run_dir[0])
        return rumor_fail(err, RUMOR_EINVAL, "secure-mix needs run-dir: the rounds it masked are kept there, so that a "
                          "restarted peer never masks a round twice");
    return check_gossip(s, RUMOR_CMD_PEER, err);
}

static rumor_err_t check_train(const rumor_settings_t *s, char err[RUMOR_ERR_LEN])
{
    if (s->checkpoint_steps > 0 && !s->checkpoint[0])
        return rumor_fail(err, RUMOR_EINVAL, "--checkpoint-steps needs --checkpoint FILE");
    if (s->resume && !s->resume_from[0] && !s->checkpoint[0])
        return rumor_fail(err, RUMOR_EINVAL, "--resume needs --checkpoint FILE (or --resume FILE)");
    return RUMOR_OK;
}

rumor_err_t rumor_settings_check(const rumor_settings_t *s, rumor_cmd_t cmd, char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc;
    if (s->resume_auto && cmd != RUMOR_CMD_NODE)
        return rumor_fail(err, RUMOR_EINVAL, "resume = auto is rumor node's (a service's): %s", cmd == RUMOR_CMD_TRAIN
                          ? "train resumes with --resume and --checkpoint FILE" : "sim resumes with --resume DIR");
    if (cmd != RUMOR_CMD_SIM) { /* a shard: all three or none */
        const bool p = rumor_settings_given(s, "partition"), r = rumor_settings_given(s, "rank"),
                   o = rumor_settings_given(s, "of");
        if ((p || r || o) && !(p && r && o)) return rumor_fail(err, RUMOR_EINVAL, "--partition, --rank and --of go together");
        if (p && s->rank >= s->of)
            return rumor_fail(err, RUMOR_EINVAL, "--rank %d --of %d: expected 0 <= rank < of", s->rank, s->of);
    }
    if (s->nesterov && s->momentum == 0.0f) return rumor_fail(err, RUMOR_EINVAL, "--nesterov needs a momentum above 0");
    if (cmd != RUMOR_CMD_TRAIN && rumor_settings_given(s, "steps") && rumor_settings_given(s, "rounds"))
        return rumor_fail(err, RUMOR_EINVAL, "--steps %ld and --rounds %ld both say how long the run is: give one",
                          s->steps, s->rounds);
    switch (cmd) {
    case RUMOR_CMD_TRAIN: return check_train(s, err);
    case RUMOR_CMD_NODE:
        if ((rc = check_node(s, err)) != RUMOR_OK) return rc;
        return rumor_settings_node_trains(s) ? check_gossip(s, cmd, err) : RUMOR_OK;
    case RUMOR_CMD_SIM:
        if ((rc = check_gossip(s, cmd, err)) != RUMOR_OK) return rc;
        return check_sim(s, err);
    case RUMOR_CMD_PEER: return check_peer(s, err);
    default: return RUMOR_OK;
    }
}
