/* config.c - `rumor sim` settings: defaults, key = value (flags and scenario files), checks. */
#include "sim.h"

#include "attack.h"
#include "codec.h"
#include "data.h"
#include "dp.h"
#include "gossip.h"
#include "model.h"
#include "optim.h"
#include "rng.h"
#include "topology.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rumor_sim_defaults(rumor_sim_config_t *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->mode, sizeof c->mode, "proc");
    c->peers = 8;
    snprintf(c->topology, sizeof c->topology, "expo");
    snprintf(c->algo, sizeof c->algo, "dpsgd");
    snprintf(c->model, sizeof c->model, "mlp:256,128");
    snprintf(c->partition, sizeof c->partition, "dirichlet:0.5");
    c->rounds = 300;
    c->soak_from = 1;
    c->local_steps = 10;
    c->batch = 64;
    c->lr = 0.05f;
    c->momentum = 0.9f;
    snprintf(c->optimizer, sizeof c->optimizer, "sgd");
    snprintf(c->schedule, sizeof c->schedule, "cosine");
    c->seed = 1;
    c->eval_every = 20;
    snprintf(c->data, sizeof c->data, "/usr/share/datasets/fashion-mnist");
    c->latency_ms = 1.0;
    c->straggler = -1;
    c->byzantine = -1;
    c->outer_lr = 0.7;
    c->outer_momentum = 0.9;
    snprintf(c->codec, sizeof c->codec, "f32");
    snprintf(c->robust, sizeof c->robust, "none");
    snprintf(c->attack, sizeof c->attack, "scale:-10");
    c->slowdown = 1.0;
    c->plots = true;
}

static bool parse_long(const char *v, long lo, long hi, long *out)
{
    if (!v || !*v || isspace((unsigned char)*v)) return false;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (*end || errno || x < lo || x > hi) return false;
    *out = (long)x;
    return true;
}

static bool parse_double(const char *v, double lo, double hi, double *out)
{
    if (!v || !*v || isspace((unsigned char)*v)) return false;
    char *end;
    double x = strtod(v, &end);
    if (*end || !isfinite(x) || x < lo || x > hi) return false;
    *out = x;
    return true;
}

/* A decimal unsigned 64-bit integer, digits only. */
static bool parse_u64(const char *v, unsigned long long *out)
{
    if (!(*v >= '0' && *v <= '9')) return false;
    char *end;
    errno = 0;
    *out = strtoull(v, &end, 10);
    return !*end && !errno;
}

static bool copy(char *dst, size_t cap, const char *v)
{
    if (strlen(v) >= cap) return false;
    memcpy(dst, v, strlen(v) + 1);
    return true;
}

/* "kill peer 3 at 40s", "restart peer 3 at 60s", "kill 25% at round 50" */
static rumor_err_t parse_event(rumor_sim_config_t *c, const char *v, char err[RUMOR_ERR_LEN])
{
    const char *usage = "expected 'kill peer N at 40s', 'restart peer N at 60s' or 'kill 25% at round 50'";
    if (c->n_events == RUMOR_SIM_MAX_EVENTS)
        return rumor_fail(err, RUMOR_EINVAL, "at most %d events", RUMOR_SIM_MAX_EVENTS);
    char w[6][32];
    int n = 0;
    for (const char *p = v; *p && n < 6;) {
        while (isspace((unsigned char)*p)) p++;
        if (!*p) break;
        size_t k = strcspn(p, " \t");
        if (k >= sizeof w[0]) return rumor_fail(err, RUMOR_EINVAL, "event '%s': %s", v, usage);
        memcpy(w[n], p, k);
        w[n++][k] = 0;
        p += k;
    }
    rumor_sim_event_t e = {.peer = -1, .at_round = -1};
    if (n >= 1 && strcmp(w[0], "kill") == 0) e.kind = RUMOR_SIM_KILL;
    else if (n >= 1 && strcmp(w[0], "restart") == 0) e.kind = RUMOR_SIM_RESTART;
    else return rumor_fail(err, RUMOR_EINVAL, "event '%s': %s", v, usage);
    int k = 1;
    if (k < n && strcmp(w[k], "peer") == 0) k++;
    if (k >= n) return rumor_fail(err, RUMOR_EINVAL, "event '%s': %s", v, usage);
    long x;
    const size_t wl = strlen(w[k]);
    if (wl > 1 && w[k][wl - 1] == '%') {
        w[k][wl - 1] = 0;
        if (!parse_long(w[k], 1, 100, &x)) return rumor_fail(err, RUMOR_EINVAL, "event '%s': percent 1..100", v);
        e.percent = (int)x;
    } else if (parse_long(w[k], 0, RUMOR_SIM_MAX_PEERS - 1, &x)) {
        e.peer = (int)x;
    } else {
        return rumor_fail(err, RUMOR_EINVAL, "event '%s': %s", v, usage);
    }
    k++;
    if (k >= n || strcmp(w[k], "at") != 0) return rumor_fail(err, RUMOR_EINVAL, "event '%s': %s", v, usage);
    k++;
    if (k + 2 == n && strcmp(w[k], "round") == 0) {
        if (!parse_long(w[k + 1], 0, 100000000, &x)) return rumor_fail(err, RUMOR_EINVAL, "event '%s': bad round", v);
        e.at_round = x;
    } else if (k + 1 == n) {
        const size_t tl = strlen(w[k]);
        if (tl > 1 && w[k][tl - 1] == 's') w[k][tl - 1] = 0;
        double t;
        if (!parse_double(w[k], 0, 1e7, &t)) return rumor_fail(err, RUMOR_EINVAL, "event '%s': bad time (40s)", v);
        e.at_s = t;
    } else {
        return rumor_fail(err, RUMOR_EINVAL, "event '%s': %s", v, usage);
    }
    c->events[c->n_events++] = e;
    return RUMOR_OK;
}

rumor_err_t rumor_sim_set(rumor_sim_config_t *c, const char *key, const char *v, char err[RUMOR_ERR_LEN])
{
    long x;
    double d;
#define STR(name, field)                                                                     \
    if (strcmp(key, name) == 0) {                                                            \
        if (!copy(c->field, sizeof c->field, v)) return rumor_fail(err, RUMOR_EINVAL, "%s: too long", key); \
        return RUMOR_OK;                                                                     \
    }
#define LONG(name, field, lo, hi)                                                            \
    if (strcmp(key, name) == 0) {                                                            \
        if (!parse_long(v, lo, hi, &x))                                                      \
            return rumor_fail(err, RUMOR_EINVAL, "%s %s: expected an integer in %ld..%ld", key, v, (long)(lo), (long)(hi)); \
        c->field = x;                                                                        \
        return RUMOR_OK;                                                                     \
    }
#define DBL(name, field, lo, hi)                                                             \
    if (strcmp(key, name) == 0) {                                                            \
        if (!parse_double(v, lo, hi, &d))                                                    \
            return rumor_fail(err, RUMOR_EINVAL, "%s %s: expected a number in %g..%g", key, v, (double)(lo), (double)(hi)); \
        c->field = d;                                                                        \
        return RUMOR_OK;                                                                     \
    }
    STR("mode", mode)
    LONG("peers", peers, 1, RUMOR_SIM_MAX_PEERS)
    STR("topology", topology)
    STR("algo", algo)
    STR("model", model)
    STR("partition", partition)
    LONG("rounds", rounds, 1, 100000000)
    LONG("local-steps", local_steps, 1, 100000)
    LONG("batch", batch, 1, 65536)
    DBL("lr", lr, 0, 100)
    DBL("momentum", momentum, 0, 0.9999)
    DBL("weight-decay", weight_decay, 0, 10)
    DBL("outer-lr", outer_lr, 0.0001, 10)
    DBL("outer-momentum", outer_momentum, 0, 0.9999)
    STR("optimizer", optimizer)
    STR("schedule", schedule)
    LONG("warmup", warmup, 0, 100000000)
    LONG("eval-every", eval_every, 0, 100000000)
    LONG("limit", limit, 0, 100000000)
    STR("data", data)
    LONG("threads", threads, 0, 1024)
    if (strcmp(key, "latency") == 0 || strcmp(key, "bandwidth") == 0 || strcmp(key, "loss") == 0) c->net_given = true;
    DBL("latency", latency_ms, 0, 1e6)
    DBL("bandwidth", bandwidth_mbps, 0, 1e6)
    DBL("loss", loss, 0, 0.99)
    DBL("step-ms", step_ms, 0, 1e6)
    LONG("straggler", straggler, -1, RUMOR_SIM_MAX_PEERS - 1)
    DBL("slowdown", slowdown, 1, 1000)
    STR("robust", robust)
    LONG("byzantine", byzantine, -1, RUMOR_SIM_MAX_PEERS - 1)
    STR("attack", attack)
    STR("dp", dp)
    STR("codec", codec)
    DBL("dp-budget", dp_budget, 0, 1e6)
    DBL("consensus-step", consensus_step, 0, 1)
    STR("out", out)
    LONG("soak", soak, 0, 100000)
    LONG("soak-from", soak_from, 1, 100000)
    if (strcmp(key, "faults") == 0 || strcmp(key, "seed") == 0) {
        const bool faults = key[0] == 'f';
        unsigned long long u;
        if (!parse_u64(v, &u) || (faults && u == 0))
            return rumor_fail(err, RUMOR_EINVAL, "%s %s: expected %s", key, v, faults ? "a seed, 1 or more" : "an integer");
        if (faults) c->faults = u;
        else c->seed = u;
        return RUMOR_OK;
    }
    if (strcmp(key, "event") == 0) return parse_event(c, v, err);
    if (strcmp(key, "secure-mix") == 0) {
        if (strcmp(v, "yes") == 0 || strcmp(v, "true") == 0 || strcmp(v, "1") == 0) c->secure_mix = true;
        else if (strcmp(v, "no") == 0 || strcmp(v, "false") == 0 || strcmp(v, "0") == 0) c->secure_mix = false;
        else return rumor_fail(err, RUMOR_EINVAL, "secure-mix %s: expected yes or no", v);
        return RUMOR_OK;
    }
    if (strcmp(key, "plots") == 0) {
        if (strcmp(v, "yes") == 0 || strcmp(v, "true") == 0 || strcmp(v, "1") == 0) c->plots = true;
        else if (strcmp(v, "no") == 0 || strcmp(v, "false") == 0 || strcmp(v, "0") == 0) c->plots = false;
        else return rumor_fail(err, RUMOR_EINVAL, "plots %s: expected yes or no", v);
        return RUMOR_OK;
    }
#undef STR
#undef LONG
#undef DBL
    return rumor_fail(err, RUMOR_EINVAL, "unknown setting '%s'", key);
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    return s;
}

rumor_err_t rumor_sim_load(rumor_sim_config_t *c, const char *path, char err[RUMOR_ERR_LEN])
{
    FILE *f = fopen(path, "r");
    if (!f) return rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
    char line[1024], e2[RUMOR_ERR_LEN];
    int no = 0;
    rumor_err_t rc = RUMOR_OK;
    while (fgets(line, sizeof line, f)) {
        no++;
        if (!strchr(line, '\n') && !feof(f)) {
            rc = rumor_fail(err, RUMOR_EINVAL, "%s:%d: line too long", path, no);
            break;
        }
        char *h = strchr(line, '#');
        if (h) *h = 0;
        char *s = trim(line);
        if (!*s || *s == '[') continue; /* blank, comment, or an INI section header */
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = rumor_fail(err, RUMOR_EINVAL, "%s:%d: expected key = value", path, no);
            break;
        }
        *eq = 0;
        if ((rc = rumor_sim_set(c, trim(s), trim(eq + 1), e2)) != RUMOR_OK) {
            rumor_fail(err, rc, "%s:%d: %s", path, no, e2);
            break;
        }
    }
    fclose(f);
    return rc;
}

rumor_err_t rumor_sim_check(const rumor_sim_config_t *c, char err[RUMOR_ERR_LEN])
{
    char e2[RUMOR_ERR_LEN];
    rumor_err_t rc;
    if (strcmp(c->mode, "proc") != 0 && strcmp(c->mode, "virtual") != 0)
        return rumor_fail(err, RUMOR_EINVAL, "--mode %s: expected proc or virtual", c->mode);
    if (strcmp(c->mode, "proc") == 0 && c->peers > 256)
        return rumor_fail(err, RUMOR_EINVAL, "--peers %d: proc mode runs at most 256 processes (try --mode virtual)",
                          c->peers);
    rumor_model_spec_t spec;
    rumor_algo_t algo;
    rumor_partition_t part;
    rumor_opt_kind_t ok;
    rumor_schedule_t sched;
    if ((rc = rumor_model_spec_parse(&spec, c->model, e2)) != RUMOR_OK ||
        (rc = rumor_algo_parse(&algo, c->algo, e2)) != RUMOR_OK ||
        (rc = rumor_partition_parse(&part, c->partition, e2)) != RUMOR_OK ||
        (rc = rumor_optim_kind_parse(&ok, c->optimizer, e2)) != RUMOR_OK ||
        (rc = rumor_schedule_parse(&sched, c->schedule, e2)) != RUMOR_OK)
        return rumor_fail(err, rc, "%s", e2);
    rumor_topology_t *t = rumor_topology_new(c->topology, c->seed, e2);
    if (!t) return rumor_fail(err, RUMOR_EINVAL, "%s", e2);
    rc = rumor_topology_check(t, (size_t)c->peers, e2);
    rumor_topology_destroy(&t);
    if (rc != RUMOR_OK) return rumor_fail(err, rc, "%s", e2);
    if (c->straggler >= c->peers)
        return rumor_fail(err, RUMOR_EINVAL, "--straggler %d: only %d peers", c->straggler, c->peers);
    if (c->byzantine >= c->peers)
        return rumor_fail(err, RUMOR_EINVAL, "--byzantine %d: only %d peers", c->byzantine, c->peers);
    rumor_robust_t rb;
    rumor_attack_t at;
    if ((rc = rumor_robust_parse(&rb, c->robust, e2)) != RUMOR_OK || (rc = rumor_attack_parse(&at, c->attack, e2)) != RUMOR_OK)
        return rumor_fail(err, rc, "%s", e2);
    rumor_codec_t cd;
    if ((rc = rumor_codec_parse(&cd, c->codec, e2)) != RUMOR_OK) return rumor_fail(err, rc, "%s", e2);
    rumor_dp_config_t pv;
    if (c->dp[0] && (rc = rumor_dp_parse(&pv, c->dp, e2)) != RUMOR_OK) return rumor_fail(err, rc, "%s", e2);
    if (c->dp_budget > 0 && !c->dp[0]) return rumor_fail(err, RUMOR_EINVAL, "--dp-budget needs --dp");
    if ((rb.clip || rb.trim) && algo.kind == RUMOR_ALGO_SGP)
        return rumor_fail(err, RUMOR_EINVAL, "--robust needs dpsgd or diloco (push-sum weights are not clipped or trimmed)");
    if (cd.id == RUMOR_CODEC_TOPK && c->byzantine >= 0)
        return rumor_fail(err, RUMOR_EINVAL, "--codec topk (compressed gossip) and --byzantine exclude each other");
    if ((rc = rumor_gossip_check_modes(&algo, &rb, c->secure_mix, &cd, c->consensus_step, e2)) != RUMOR_OK)
        return rumor_fail(err, rc, "%s", e2);
    for (int i = 0; i < c->n_events; i++)
        if (c->events[i].peer >= c->peers)
            return rumor_fail(err, RUMOR_EINVAL, "event on peer %d: only %d peers", c->events[i].peer, c->peers);
    return RUMOR_OK;
}

#define FAULT_STREAM 0x6661756c7473ULL /* "faults" */

void rumor_sim_faults(rumor_sim_config_t *c, uint64_t seed)
{
    rumor_rng_t rng;
    rumor_rng_init2(&rng, seed, FAULT_STREAM, 0);
    const int n = c->peers, down_max = n / 4 > 1 ? n / 4 : 1;
    const long R = c->rounds;
    c->faults = seed;
    /* Kills: each peer down for 1..20 rounds, back at least 20 rounds before the end. */
    struct {
        int peer;
        long from, to;
    } ep[8];
    int n_ep = 0;
    const int want = 1 + (int)rumor_rng_below(&rng, 4);
    for (int tries = 0; R >= 50 && n > 1 && n_ep < want && tries < 64 && c->n_events + 2 <= RUMOR_SIM_MAX_EVENTS; tries++) {
        const int p = (int)rumor_rng_below(&rng, (uint64_t)n);
        const long from = 5 + (long)rumor_rng_below(&rng, (uint64_t)(R - 45));
        const long to = from + 1 + (long)rumor_rng_below(&rng, 20);
        bool ok = p != c->byzantine;
        for (int k = 0; k < n_ep && ok; k++) ok = ep[k].peer != p || ep[k].to + 5 < from || to + 5 < ep[k].from;
        for (long r = from; r < to && ok; r++) { /* at most a quarter down at any round */
            int down = 1;
            for (int k = 0; k < n_ep; k++) down += ep[k].from <= r && r < ep[k].to;
            ok = down <= down_max;
        }
        if (!ok) continue;
        ep[n_ep].peer = p, ep[n_ep].from = from, ep[n_ep].to = to;
        n_ep++;
        c->events[c->n_events++] = (rumor_sim_event_t){.kind = RUMOR_SIM_KILL, .peer = p, .at_round = from};
        c->events[c->n_events++] = (rumor_sim_event_t){.kind = RUMOR_SIM_RESTART, .peer = p, .at_round = to};
    }
    if (c->straggler < 0 && n > 1 && rumor_rng_below(&rng, 2)) {
        c->straggler = (int)rumor_rng_below(&rng, (uint64_t)n);
        c->slowdown = 1.5 + 2.5 * rumor_rng_uniform(&rng);
    }
    if (c->loss == 0 && rumor_rng_below(&rng, 2)) {
        c->loss = 0.05 * rumor_rng_uniform(&rng);
        c->net_given = true;
    }
    if (strcmp(c->mode, "virtual") == 0 && n > 1 && R >= 30 && c->n_parts < RUMOR_SIM_MAX_PARTS &&
        rumor_rng_below(&rng, 2)) {
        const int size = 1 + (int)rumor_rng_below(&rng, (uint64_t)(n / 2 > 1 ? n / 2 : 1));
        const int lo = (int)rumor_rng_below(&rng, (uint64_t)(n - size + 1));
        const long from = 5 + (long)rumor_rng_below(&rng, (uint64_t)(R - 25));
        c->parts[c->n_parts++] = (rumor_sim_part_t){.from = from, .to = from + 1 + (long)rumor_rng_below(&rng, 3),
                                                       .lo = lo, .hi = lo + size};
    }
}

/* A JSON string (the values here are specs and paths: escape quotes and backslashes). */
static void json_str(char *buf, size_t cap, size_t *len, const char *key, const char *v, bool comma)
{
    int k = snprintf(buf + *len, cap - *len, "%s\"%s\":\"", comma ? "," : "", key);
    if (k > 0) *len += (size_t)k < cap - *len ? (size_t)k : 0;
    for (const char *p = v; *p && *len + 3 < cap; p++) {
        if (*p == '"' || *p == '\\') buf[(*len)++] = '\\';
        buf[(*len)++] = (unsigned char)*p < 0x20 ? '?' : *p;
    }
    if (*len + 1 < cap) buf[(*len)++] = '"';
    buf[*len < cap ? *len : cap - 1] = 0;
}

void rumor_sim_config_json(const rumor_sim_config_t *c, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = 0;
    if (cap < 2) return;
    buf[len++] = '{';
    buf[len] = 0;
    json_str(buf, cap, &len, "mode", c->mode, false);
    int k = snprintf(buf + len, cap - len, ",\"peers\":%d", c->peers);
    if (k > 0) len += (size_t)k < cap - len ? (size_t)k : 0;
    json_str(buf, cap, &len, "topology", c->topology, true);
    json_str(buf, cap, &len, "algo", c->algo, true);
    json_str(buf, cap, &len, "model", c->model, true);
    json_str(buf, cap, &len, "partition", c->partition, true);
    json_str(buf, cap, &len, "optimizer", c->optimizer, true);
    json_str(buf, cap, &len, "schedule", c->schedule, true);
    json_str(buf, cap, &len, "data", c->data, true);
    k = snprintf(buf + len, cap - len,
                 ",\"rounds\":%ld,\"local_steps\":%d,\"batch\":%d,\"lr\":%.9g,\"momentum\":%.9g,"
                 "\"weight_decay\":%.9g,\"warmup\":%ld,\"seed\":%llu,\"eval_every\":%d,\"limit\":%ld,"
                 "\"latency_ms\":%.9g,\"bandwidth_mbps\":%.9g,\"loss\":%.9g,\"step_ms\":%.9g,"
                 "\"straggler\":%d,\"slowdown\":%.9g,\"byzantine\":%d,\"outer_lr\":%.9g,\"outer_momentum\":%.9g,",
                 c->rounds, c->local_steps, c->batch, (double)c->lr, (double)c->momentum, (double)c->weight_decay,
                 c->warmup, (unsigned long long)c->seed, c->eval_every, c->limit, c->latency_ms, c->bandwidth_mbps,
                 c->loss, c->step_ms, c->straggler, c->slowdown, c->byzantine, c->outer_lr, c->outer_momentum);
    if (k > 0) len += (size_t)k < cap - len ? (size_t)k : 0;
    json_str(buf, cap, &len, "attack", c->attack, false);
    json_str(buf, cap, &len, "robust", c->robust, true);
    json_str(buf, cap, &len, "dp", c->dp, true);
    json_str(buf, cap, &len, "codec", c->codec, true);
    k = snprintf(buf + len, cap - len, ",\"dp_budget\":%.9g,\"secure_mix\":%s,\"consensus_step\":%.9g", c->dp_budget,
                 c->secure_mix ? "true" : "false", c->consensus_step);
    if (k > 0) len += (size_t)k < cap - len ? (size_t)k : 0;
    k = snprintf(buf + len, cap - len, ",\"faults\":%llu,\"partitions\":[", (unsigned long long)c->faults);
    if (k > 0) len += (size_t)k < cap - len ? (size_t)k : 0;
    for (int i = 0; i < c->n_parts && len < cap; i++) {
        k = snprintf(buf + len, cap - len, "%s\"peers %d..%d from round %ld to %ld\"", i ? "," : "", c->parts[i].lo,
                     c->parts[i].hi - 1, c->parts[i].from, c->parts[i].to);
        if (k > 0) len += (size_t)k < cap - len ? (size_t)k : 0;
    }
    k = snprintf(buf + len, cap - len, "],\"events\":[");
    if (k > 0) len += (size_t)k < cap - len ? (size_t)k : 0;
    for (int i = 0; i < c->n_events && len < cap; i++) {
        const rumor_sim_event_t *e = &c->events[i];
        char who[32], when[32];
        if (e->peer >= 0) snprintf(who, sizeof who, "peer %d", e->peer);
        else snprintf(who, sizeof who, "%d%%", e->percent);
        if (e->at_round >= 0) snprintf(when, sizeof when, "round %ld", e->at_round);
        else snprintf(when, sizeof when, "%gs", e->at_s);
        k = snprintf(buf + len, cap - len, "%s\"%s %s at %s\"", i ? "," : "",
                     e->kind == RUMOR_SIM_KILL ? "kill" : "restart", who, when);
        if (k > 0) len += (size_t)k < cap - len ? (size_t)k : 0;
    }
    if (len + 3 < cap) {
        buf[len++] = ']';
        buf[len++] = '}';
        buf[len] = 0;
    }
}
