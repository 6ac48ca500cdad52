/* settings.c - the settings table (settings.h): its rows, setting a value, parsing a command
 * line and a scenario file, the settings as a whole, help and JSON. */
#include "settings.h"

#include "attack.h"
#include "checkpoint.h"
#include "codec.h"
#include "config.h"
#include "data.h"
#include "dp.h"
#include "fileio.h"
#include "gossip.h"
#include "model.h"
#include "optim.h"
#include "text.h"
#include "topology.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the values strings take: each one's own parser ---- */

/* Each check accepts or refuses v; where canon is not NULL it also writes v as its parser
 * spells it (a model's canonical spec, "step:3,0.1"), so that two spellings of one value
 * compare equal (a resumed run's settings against its checkpoint's). */
static rumor_err_t check_model(const char *v, char *canon, size_t cap, char err[RUMOR_ERR_LEN])
{
    rumor_model_spec_t x;
    rumor_err_t rc = rumor_model_spec_parse(&x, v, err);
    if (rc == RUMOR_OK && canon) snprintf(canon, cap, "%s", x.canonical);
    return rc;
}
static rumor_err_t check_partition(const char *v, char *canon, size_t cap, char err[RUMOR_ERR_LEN])
{
    rumor_partition_t x;
    rumor_err_t rc = rumor_partition_parse(&x, v, err);
    if (rc == RUMOR_OK && canon) rumor_partition_format(canon, cap, &x);
    return rc;
}
static rumor_err_t check_optimizer(const char *v, char *canon, size_t cap, char err[RUMOR_ERR_LEN])
{
    rumor_opt_kind_t x;
    rumor_err_t rc = rumor_optim_kind_parse(&x, v, err);
    if (rc == RUMOR_OK && canon) snprintf(canon, cap, "%s", rumor_optim_kind_name(x));
    return rc;
}
static rumor_err_t check_schedule(const char *v, char *canon, size_t cap, char err[RUMOR_ERR_LEN])
{
    rumor_schedule_t x;
    rumor_err_t rc = rumor_schedule_parse(&x, v, err);
    if (rc == RUMOR_OK && canon) rumor_schedule_format(canon, cap, &x);
    return rc;
}
static rumor_err_t check_algo(const char *v, char *canon, size_t cap, char err[RUMOR_ERR_LEN])
{
    rumor_algo_t x;
    rumor_err_t rc = rumor_algo_parse(&x, v, err);
    if (rc == RUMOR_OK && canon) rumor_algo_format(canon, cap, &x);
    return rc;
}
static rumor_err_t check_codec(const char *v, char *canon, size_t cap, char err[RUMOR_ERR_LEN])
{
    rumor_codec_t x;
    rumor_err_t rc = rumor_codec_parse(&x, v, err);
    if (rc == RUMOR_OK && canon) rumor_codec_format(canon, cap, &x);
    return rc;
}
/* The rest are spelt one way: canonical as given. */
static rumor_err_t check_topology(const char *v, char *canon, size_t cap, char err[RUMOR_ERR_LEN])
{
    rumor_topology_t *t = rumor_topology_new(v, 1, err);
    if (!t) return RUMOR_EINVAL;
    rumor_topology_destroy(&t);
    if (canon) snprintf(canon, cap, "%s", v);
    return RUMOR_OK;
}
static rumor_err_t check_robust(const char *v, char *canon, size_t cap, char err[RUMOR_ERR_LEN])
{
    rumor_robust_t x;
    rumor_err_t rc = rumor_robust_parse(&x, v, err);
    if (rc == RUMOR_OK && canon) snprintf(canon, cap, "%s", v);
    return rc;
}
static rumor_err_t check_attack(const char *v, char *canon, size_t cap, char err[RUMOR_ERR_LEN])
{
    rumor_attack_t x;
    rumor_err_t rc = rumor_attack_parse(&x, v, err);
    if (rc == RUMOR_OK && canon) snprintf(canon, cap, "%s", v);
    return rc;
}
static rumor_err_t check_dp(const char *v, char *canon, size_t cap, char err[RUMOR_ERR_LEN])
{
    rumor_dp_config_t x;
    rumor_err_t rc = rumor_dp_parse(&x, v, err);
    if (rc == RUMOR_OK && canon) snprintf(canon, cap, "%s", v);
    return rc;
}
static rumor_err_t check_device(const char *v, char *canon, size_t cap, char err[RUMOR_ERR_LEN])
{
    if (strcmp(v, "cpu") != 0 && strcmp(v, "cuda") != 0 && strcmp(v, "auto") != 0)
        return rumor_fail(err, RUMOR_EINVAL, "unknown device '%s' (expected cpu, cuda or auto)", v);
    if (canon) snprintf(canon, cap, "%s", v);
    return RUMOR_OK;
}
static rumor_err_t check_mode(const char *v, char *canon, size_t cap, char err[RUMOR_ERR_LEN])
{
    if (strcmp(v, "proc") != 0 && strcmp(v, "virtual") != 0)
        return rumor_fail(err, RUMOR_EINVAL, "--mode %s: expected proc or virtual", v);
    if (canon) snprintf(canon, cap, "%s", v);
    return RUMOR_OK;
}

static bool parse_long(const char *v, long lo, long hi, long *out)
{
    if (!v || !*v || isspace((unsigned char)*v)) return false;
    char *end;
    errno = 0;
    const long long x = strtoll(v, &end, 10);
    if (*end || errno || x < lo || x > hi) return false;
    *out = (long)x;
    return true;
}

static bool parse_double(const char *v, double lo, double hi, double *out)
{
    if (!v || !*v || isspace((unsigned char)*v)) return false;
    char *end;
    const double x = strtod(v, &end);
    if (*end || !isfinite(x) || x < lo || x > hi) return false;
    *out = x;
    return true;
}

/* "kill peer 3 at 40s", "restart peer 3 at 60s", "kill 25% at round 50" */
static rumor_err_t set_event(rumor_settings_t *c, const char *v, char err[RUMOR_ERR_LEN])
{
    const char *usage = "expected 'kill peer N at 40s', 'restart peer N at 60s' or 'kill 25% at round 50'";
    if (c->n_events == RUMOR_SIM_MAX_EVENTS)
        return rumor_fail(err, RUMOR_EINVAL, "at most %d events", RUMOR_SIM_MAX_EVENTS);
    char w[6][32];
    int n = 0;
    for (const char *p = v; *p && n < 6;) {
        while (isspace((unsigned char)*p)) p++;
        if (!*p) break;
        const size_t k = strcspn(p, " \t");
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

static rumor_err_t set_bootstrap(rumor_settings_t *s, const char *v, char err[RUMOR_ERR_LEN])
{
    if (s->n_bootstraps == RUMOR_SETTINGS_MAX_BOOTSTRAPS)
        return rumor_fail(err, RUMOR_EINVAL, "at most %d --bootstrap addresses", RUMOR_SETTINGS_MAX_BOOTSTRAPS);
    if (strncmp(v, "rumor://", 8) != 0 || strlen(v) >= sizeof s->bootstraps[0])
        return rumor_fail(err, RUMOR_EINVAL, "--bootstrap %.200s: expected rumor://KEY@HOST:PORT", v);
    snprintf(s->bootstraps[s->n_bootstraps++], sizeof s->bootstraps[0], "%s", v);
    return RUMOR_OK;
}

/* train's --resume FILE, the spelling from before --resume was a switch. */
static rumor_err_t set_resume_from(rumor_settings_t *s, const char *v, char err[RUMOR_ERR_LEN])
{
    if (strlen(v) >= sizeof s->resume_from) return rumor_fail(err, RUMOR_EINVAL, "--resume: path too long");
    snprintf(s->resume_from, sizeof s->resume_from, "%s", v);
    s->resume = true;
    return RUMOR_OK;
}

/* ---- the table ---- */

#define T RUMOR_IN_TRAIN
#define N RUMOR_IN_NODE
#define S RUMOR_IN_SIM
#define P RUMOR_IN_PEER
#define AT(field) offsetof(rumor_settings_t, field), sizeof(((rumor_settings_t *)0)->field)
#define D3(a, b, c) {a, b, c, b} /* (a library peer takes a node's defaults) */
#define D(a) {a, a, a, a}
#define BIG 1e9

/* Where a command's default differs from another's, the reason is beside it. */
static const rumor_setting_t table[] = {
    /* what is learnt, and how */
    {"data", NULL, RUMOR_SET_STR, T | N | S, RUMOR_SET_RECORD, AT(data), 0, 0, NULL, NULL, D(RUMOR_DEFAULT_DATA), "data", "DIR",
     "IDX dataset folder, or a .safetensors file of train.x, train.y, test.x, test.y; for gpt models .txt "
     "documents or train.bin/val.bin (gpt: " RUMOR_DEFAULT_TEXT ")"},
    {"model", NULL, RUMOR_SET_STR, T | N | S, RUMOR_SET_RECORD | RUMOR_SET_FIXED, AT(model), 0, 0, check_model, NULL, D("mlp:256,128"), "model", "SPEC",
     "logreg | mlp:W1,W2,... | cnn[:C1,C2] | gpt:LAYERS,HEADS,WIDTH,CONTEXT"},
    {"vocab", NULL, RUMOR_SET_INT, T | N | S, RUMOR_SET_RECORD | RUMOR_SET_FIXED, AT(vocab), 0, 65536, NULL, NULL, D(NULL), "vocab", "N",
     "gpt on train.bin/val.bin: the tokens' vocabulary (0: 50304)"},
    /* train and node take the whole training set unless given a shard; a simulated swarm is
     * a set of shards. */
    {"partition", NULL, RUMOR_SET_STR, T | N | S, RUMOR_SET_RECORD | RUMOR_SET_FIXED, AT(partition), 0, 0, check_partition, NULL,
     D3(NULL, NULL, "dirichlet:0.5"), "partition", "SPEC",
     "iid | dirichlet:ALPHA | shards:K | docs (text: whole documents; sim's default for gpt, but for token "
     "files, iid): how the training "
     "set is split among peers (train, node: this peer's shard is --rank of --of)"},
    {"rank", NULL, RUMOR_SET_INT, T | N, RUMOR_SET_RECORD | RUMOR_SET_FIXED, AT(rank), 0, 99999, NULL, NULL, D(NULL), NULL, "I",
     "with --partition: this peer's shard (0-based)"},
    {"of", NULL, RUMOR_SET_INT, T | N, RUMOR_SET_RECORD | RUMOR_SET_FIXED, AT(of), 1, 100000, NULL, NULL, D(NULL), NULL, "N",
     "with --partition: the number of shards"},
    {"limit", NULL, RUMOR_SET_LONG, T | N | S, RUMOR_SET_RECORD | RUMOR_SET_FIXED, AT(limit), 0, BIG, NULL, NULL, D(NULL), "limit", "N",
     "use the first N training samples only (0: all)"},
    {"batch", NULL, RUMOR_SET_INT, T | N | S, RUMOR_SET_RECORD | RUMOR_SET_FIXED, AT(batch), 1, 65536, NULL, NULL, D("64"), "batch", "N",
     "minibatch size (gpt: 12 windows)"},
    {"lr", NULL, RUMOR_SET_FLOAT, T | N | S, RUMOR_SET_OPEN_LO | RUMOR_SET_RECORD, AT(lr), 0, 10, NULL, NULL, D("0.05"), "lr", "X",
     "learning rate (gpt: 1e-3)"},
    {"momentum", NULL, RUMOR_SET_FLOAT, T | N | S, RUMOR_SET_OPEN_HI | RUMOR_SET_RECORD, AT(momentum), 0, 1, NULL, NULL, D("0.9"),
     "momentum", "X", "SGD momentum"},
    {"nesterov", NULL, RUMOR_SET_BOOL, T | N | S, RUMOR_SET_RECORD, AT(nesterov), 0, 0, NULL, NULL, D(NULL), NULL, NULL,
     "Nesterov momentum"},
    {"weight-decay", NULL, RUMOR_SET_FLOAT, T | N | S, RUMOR_SET_RECORD, AT(weight_decay), 0, 1, NULL, NULL, D("0"), "weight_decay",
     "X", "weight decay"},
    {"optimizer", NULL, RUMOR_SET_STR, T | N | S, RUMOR_SET_RECORD | RUMOR_SET_FIXED, AT(optimizer), 0, 0, check_optimizer, NULL, D("sgd"),
     "optimizer", "NAME", "sgd | adamw | qgm (SGD with quasi-global momentum, for label skew) | dadamw (AdamW "
     "whose second moment the gossip averages) (gpt: adamw)"},
    {"tracking", NULL, RUMOR_SET_BOOL, S, RUMOR_SET_RECORD, AT(tracking), 0, 0, NULL, NULL, D(NULL), "tracking", NULL,
     "gradient tracking: each step follows an estimate of the swarm's mean gradient, gossiped with the "
     "model (dpsgd; for label skew; virtual mode without lost rounds)"},
    /* sim's cosine: a simulated run is a whole run, whose end the schedule knows; a node is
     * often stopped and resumed by hand. */
    {"schedule", NULL, RUMOR_SET_STR, T | N | S, RUMOR_SET_RECORD, AT(schedule), 0, 0, check_schedule, NULL,
     D3("constant", "constant", "cosine"), "schedule", "SPEC",
     "constant | step:EPOCHS,GAMMA | cosine (over the run; gpt: cosine)"},
    {"warmup", NULL, RUMOR_SET_LONG, T | N | S, RUMOR_SET_RECORD, AT(warmup), 0, BIG, NULL, NULL, D("0"), "warmup", "N",
     "linear warm-up steps (gpt: 100)"},
    {"seed", NULL, RUMOR_SET_U64, T | N | S | P, RUMOR_SET_RECORD | RUMOR_SET_FIXED, AT(seed), 0, 0, NULL, NULL, D("1"), "seed", "N",
     "the partition, the sample order and the initial parameters (node: unless --init-seed); the same on every peer"},
    {"init-seed", NULL, RUMOR_SET_U64, N, 0, AT(init_seed), 0, 0, NULL, NULL, D(NULL), NULL, "N",
     "the initial parameters (default: --seed)"},
    {"threads", NULL, RUMOR_SET_INT, T | N | S, RUMOR_SET_BY_PROC, AT(threads), 0, 1024, NULL, NULL, D("0"), NULL, "N",
     "compute threads (0: all cores; sim: the cores shared among the peers)"},
    {"device", NULL, RUMOR_SET_STR, T | N, 0, AT(device), 0, 0, check_device, NULL, D("cpu"), NULL, "NAME",
     "cpu | cuda | auto"},
    /* the swarm */
    {"algo", NULL, RUMOR_SET_STR, N | S | P, RUMOR_SET_RECORD | RUMOR_SET_FIXED, AT(algo), 0, 0, check_algo, NULL, D("dpsgd"), "algo", "SPEC",
     "dpsgd | sgp | diloco:H"},
    {"topology", NULL, RUMOR_SET_STR, N | S | P, RUMOR_SET_RECORD | RUMOR_SET_FIXED, AT(topology), 0, 0, check_topology, NULL, D("expo"), "topology",
     "NAME", "ring | torus | expo | onepeer-expo | ... (rumor topo)"},
    /* sim's longer run of 10 local steps a round is the demo the README shows (a few
     * minutes on a laptop); a node's single step a round is D-PSGD as published. */
    {"rounds", NULL, RUMOR_SET_LONG, N | S | P, RUMOR_SET_RECORD, AT(rounds), 1, 100000000, NULL, NULL, {NULL, "100", "300", NULL}, "rounds",
     "N", "gossip rounds to train"},
    {"local-steps", NULL, RUMOR_SET_INT, N | S | P, RUMOR_SET_RECORD, AT(local_steps), 1, 100000, NULL, NULL, D3(NULL, "1", "10"),
     "local_steps", "N", "minibatch steps between gossip rounds (not with diloco:H, whose H it is)"},
    {"eval-every", NULL, RUMOR_SET_INT, N | S, 0, AT(eval_every), 0, 100000000, NULL, NULL, D(NULL),
     "eval_every", "N", "rounds between test evaluations (0: at the start and the end only; default: a tenth of "
     "the run's rounds, about ten evaluations)"},
    {"outer-lr", NULL, RUMOR_SET_DOUBLE, N | S | P, RUMOR_SET_OPEN_LO | RUMOR_SET_RECORD, AT(outer_lr), 0, 10, NULL, NULL, D("0.7"),
     "outer_lr", "X", "diloco's outer learning rate"},
    {"outer-momentum", NULL, RUMOR_SET_DOUBLE, N | S | P, RUMOR_SET_OPEN_HI | RUMOR_SET_RECORD, AT(outer_momentum), 0, 1, NULL, NULL,
     D("0.9"), "outer_momentum", "X", "diloco's outer Nesterov momentum"},
    {"overlap", NULL, RUMOR_SET_BOOL, N | S | P, RUMOR_SET_RECORD, AT(overlap), 0, 0, NULL, NULL, D(NULL), "overlap", NULL,
     "run the next local steps while the round's models travel; the mix lands a round late (dpsgd: "
     "x <- mix + own progress since; diloco: its outer step lands --overlap-steps into the next phase; the run's "
     "last round is not overlapped; sgp always overlaps)"},
    {"overlap-steps", NULL, RUMOR_SET_INT, N | S | P, RUMOR_SET_RECORD, AT(overlap_steps), 0, 100000, NULL, NULL, D(NULL),
     "overlap_steps", "N", "with --overlap and diloco:H: the inner steps a round's models have to travel before its "
     "outer step lands (0: H / 4)"},
    {"robust", NULL, RUMOR_SET_STR, N | S | P, RUMOR_SET_RECORD, AT(robust), 0, 0, check_robust, NULL, D("auto"), "robust", "SPEC",
     "auto | none | guard[:K] | clip[:F] | trim:B: bound each neighbour to K (2) times the neighbours' median "
     "distance (auto: guard with dpsgd and diloco unless secure mixing or mixed optimizer state excludes it; "
     "with --codec topk or int4 only guard applies), clip the farthest fraction F, or trim B high and low per "
     "coordinate"},
    /* sim's: what its --byzantine peer sends; a node attacks only when told to. */
    {"attack", NULL, RUMOR_SET_STR, N | S, RUMOR_SET_BY_PROC, AT(attack), 0, 0, check_attack, NULL,
     D3(NULL, "none", "scale:-10"), "attack", "SPEC",
     "scale:K | noise:S | max | round:R | ahead:K: send poisoned models (a Byzantine peer, for experiments; sim: --byzantine's); "
     "relay-tamper: alter what it relays, relay-forge: forge handshakes of the sessions it relays (node)"},
    {"dp", NULL, RUMOR_SET_STR, N | S, RUMOR_SET_RECORD | RUMOR_SET_FIXED, AT(dp), 0, 0, check_dp, NULL, D(NULL), "dp", "clip=C,noise=S[,delta=D]",
     "DP-SGD (per-sample clipping, Gaussian noise); logs epsilon (sim's virtual mode: noise from --seed, "
     "replayable, protecting nothing)"},
    {"dp-budget", NULL, RUMOR_SET_DOUBLE, N | S, RUMOR_SET_RECORD, AT(dp_budget), 0, 1e6, NULL, NULL, D(NULL), "dp_budget", "EPS",
     "with --dp: stop training before epsilon would pass this"},
    {"codec", NULL, RUMOR_SET_STR, N | S | P, RUMOR_SET_RECORD, AT(codec), 0, 0, check_codec, NULL, D("f32"), "codec", "SPEC",
     "f32 | fp16 | bf16 | int8 | int4 | topk:F: how the models sent are encoded (int4, topk: compressed "
     "differences of a public copy, CHOCO-SGD)"},
    {"consensus-step", NULL, RUMOR_SET_DOUBLE, N | S | P, RUMOR_SET_RECORD, AT(consensus_step), 0, 1, NULL, NULL, D(NULL),
     "consensus_step", "G", "with --codec topk or int4: CHOCO's consensus step (0: 0.05 for topk, 1 for int4)"},
    {"secure-mix", NULL, RUMOR_SET_BOOL, N | S | P, RUMOR_SET_RECORD, AT(secure_mix), 0, 0, NULL, NULL, D(NULL), "secure_mix", NULL,
     "mask the models sent: a neighbour learns its neighbourhood's average, not a model (dpsgd, diloco)"},
    {"slowdown", NULL, RUMOR_SET_DOUBLE, N | S, RUMOR_SET_BY_PROC, AT(slowdown), 1, 1000, NULL, NULL, D("1"),
     "slowdown", "K", "compute K times slower than this machine can (a straggler; sim: --straggler's)"},
    /* sim's virtual mode always has a network: 1 ms is loopback's order; a node and proc mode
     * emulate one only when asked. */
    {"latency", "emulate-latency", RUMOR_SET_DOUBLE, N | S | P, RUMOR_SET_NET, AT(latency_ms), 0, 60000, NULL, NULL,
     D3(NULL, NULL, "1"), "latency_ms", "MS", "hold each model sent this many ms (an emulated network)"},
    {"bandwidth", "emulate-bandwidth", RUMOR_SET_DOUBLE, N | S | P, RUMOR_SET_NET, AT(bandwidth_mbps), 0, 1e6, NULL, NULL,
     D(NULL), "bandwidth_mbps", "MBPS", "send models at most this many Mbit/s, one at a time (emulated; 0: no limit)"},
    {"loss", "emulate-loss", RUMOR_SET_DOUBLE, N | S | P, RUMOR_SET_NET | RUMOR_SET_OPEN_HI, AT(loss), 0, 1, NULL, NULL,
     D(NULL), "loss", "P", "lose this fraction of the models sent (emulated)"},
    /* rumor train */
    {"epochs", NULL, RUMOR_SET_INT, T, RUMOR_SET_RECORD, AT(epochs), 0, 100000, NULL, NULL, D("10"), NULL, "N",
     "epochs (0: none; with --save, the initial model of --seed, as a node starts from it)"},
    {"steps", NULL, RUMOR_SET_LONG, T | N | S, RUMOR_SET_RECORD | RUMOR_SET_BY_PROC, AT(steps), 0, 1e12, NULL, NULL,
     D(NULL), "steps", "N",
     "the run's length in steps, which the schedule spans (train: 0 runs --epochs; node, sim: --rounds of the "
     "local steps that make it, when --rounds is not given; gpt: 2000)"},
    {"clip-grad", NULL, RUMOR_SET_FLOAT, T | N | S, RUMOR_SET_RECORD, AT(clip_grad), 0, 1e6, NULL, NULL, D(NULL), "clip_grad", "NORM",
     "scale the gradient down to this global norm when longer (0: never; gpt: 1)"},
    {"metrics", NULL, RUMOR_SET_STR, T, 0, AT(metrics), 0, 0, NULL, NULL, D(NULL), NULL, "FILE",
     "JSON-lines metrics file (appended to when resuming)"},
    {"log-every", NULL, RUMOR_SET_INT, T, 0, AT(log_every), 0, 100000000, NULL, NULL, D("100"), NULL, "N",
     "steps between metric lines"},
    {"save", NULL, RUMOR_SET_STR, T, 0, AT(save), 0, 0, NULL, NULL, D(NULL), NULL, "FILE",
     "export the trained model (safetensors)"},
    {"checkpoint", NULL, RUMOR_SET_STR, T, 0, AT(checkpoint), 0, 0, NULL, NULL, D(NULL), NULL, "FILE",
     "checkpoint after every epoch and on Ctrl-C"},
    {"checkpoint-steps", "checkpoint-every", RUMOR_SET_LONG, T, 0, AT(checkpoint_steps), 0, 1e15, NULL, NULL, D(NULL),
     NULL, "N", "also checkpoint every N steps (0: off)"},
    {"max-steps", NULL, RUMOR_SET_LONG, T, 0, AT(max_steps), 0, 1e15, NULL, NULL, D(NULL), NULL, "N",
     "stop after N steps in all, with a checkpoint, and exit 0 (0: no limit)"},
    {"resume", NULL, RUMOR_SET_BOOL, T | N | S, RUMOR_SET_OPT_VALUE | RUMOR_SET_BY_PROC, AT(resume), 0, 0, NULL,
     set_resume_from, D(NULL), NULL, NULL,
     "continue from the checkpoint (train: --checkpoint's, or --resume FILE, which then goes on being the "
     "checkpoint; node: the run folder's, and with --resume=auto only where there is one, else it starts afresh; sim: --resume DIR, a proc run's folder, with the settings it was "
     "started with, less its events)"},
    {"eval", NULL, RUMOR_SET_BOOL, T, 0, AT(eval), 0, 0, NULL, NULL, D("yes"), NULL, NULL,
     "skip the test accuracy after each epoch"},
    {"quiet", NULL, RUMOR_SET_BOOL, T | S, 0, AT(quiet), 0, 0, NULL, NULL, D(NULL), NULL, NULL,
     "no progress lines"},
    /* rumor node */
    {"key", NULL, RUMOR_SET_STR, N | P, 0, AT(key), 0, 0, NULL, NULL, D(NULL), NULL, "PATH",
     "this node's secret key (rumor keygen)"},
    {"cert", NULL, RUMOR_SET_STR, N | P, 0, AT(cert), 0, 0, NULL, NULL, D(NULL), NULL, "PATH",
     "this node's certificate (rumor swarm admit)"},
    {"swarm", NULL, RUMOR_SET_STR, N | P, 0, AT(swarm), 0, 0, NULL, NULL, D(NULL), NULL, "PATH",
     "the swarm authority's public key (authority.pub)"},
    {"listen", NULL, RUMOR_SET_STR, N | P, 0, AT(listen), 0, 0, NULL, NULL, D(NULL), NULL, "tcp://HOST:PORT",
     "where to listen (port 0: any free port)"},
    {"advertise", NULL, RUMOR_SET_STR, N | P, 0, AT(advertise), 0, 0, NULL, NULL, D(NULL), NULL, "tcp://IP:PORT",
     "the address peers dial, when not the listen address"},
    {"bootstrap", NULL, RUMOR_SET_LIST, N | P, 0, AT(bootstraps), 0, 0, NULL, set_bootstrap, D(NULL), NULL,
     "rumor://KEY@HOST:PORT", "a member to join through (repeatable)"},
    {"revoked", NULL, RUMOR_SET_STR, N | P, 0, AT(revoked), 0, 0, NULL, NULL, D(NULL), NULL, "PATH",
     "revocation list (public keys), re-read on SIGHUP"},
    {"control", NULL, RUMOR_SET_STR, N | P, 0, AT(control), 0, 0, NULL, NULL, D(NULL), NULL, "ipc://PATH",
     "the socket rumor status asks"},
    {"join-timeout", NULL, RUMOR_SET_DOUBLE, N | P, 0, AT(join_timeout), 0, 86400, NULL, NULL, D("30"), NULL, "S",
     "seconds to get into the swarm before giving up (0: wait)"},
    {"relay", NULL, RUMOR_SET_BOOL, N | P, 0, AT(relay), 0, 0, NULL, NULL, D("yes"), NULL, NULL,
     "forward sealed messages between members that cannot reach each other (behind different NATs)"},
    {"relay-budget", NULL, RUMOR_SET_DOUBLE, N | P, 0, AT(relay_budget), 0.01, 100000, NULL, NULL, D("10"), NULL, "MB/S",
     "forward at most this many MB/s for others"},
    {"view-size", NULL, RUMOR_SET_INT, N | P, 0, AT(view_size), 1, 200, NULL, NULL, D("64"), NULL, "N",
     "peers in the active view"},
    {"period", NULL, RUMOR_SET_INT, N | P, 0, AT(period_ms), 10, 600000, NULL, NULL, D("1000"), NULL, "MS",
     "failure detection period"},
    {"suspect", NULL, RUMOR_SET_INT, N | P, 0, AT(suspect_ms), 10, 3600000, NULL, NULL, D("5000"), NULL, "MS",
     "suspicion time before a peer is dead (at least --period)"},
    {"verbose", NULL, RUMOR_SET_BOOL, N | P, 0, AT(verbose), 0, 0, NULL, NULL, D(NULL), NULL, NULL,
     "log every membership change and refusal"},
    {"run-dir", NULL, RUMOR_SET_STR, N | P, 0, AT(run_dir), 0, 0, NULL, NULL, D(NULL), NULL, "DIR",
     "a training node's metrics, checkpoints and model"},
    {"config", NULL, RUMOR_SET_STR, T | N | S, RUMOR_SET_BY_PROC, AT(config), 0, 0, NULL, NULL, D(NULL), NULL, "FILE",
     "settings from FILE, one `key = value` a line (the scenario files' form), as if given here: flags "
     "after it override them"},
    {"trace", NULL, RUMOR_SET_STR, N | P, 0, AT(trace), 0, 0, NULL, NULL, D(NULL), NULL, "FILE",
     "write every round event (gossip points, views, sends, arrivals, mixes, evaluations, checkpoints, the end) "
     "to FILE, one line each (rumor sim --replay)"},
    {"linger", NULL, RUMOR_SET_DOUBLE, N | P, 0, AT(linger), 0, 86400, NULL, NULL, D("30"), NULL, "S",
     "seconds to stay reachable after training, answering late peers with the final model (0: leave at once)"},
    {"late-join", NULL, RUMOR_SET_BOOL, N | P, 0, AT(late_join), 0, 0, NULL, NULL, D("yes"), NULL, NULL,
     "start from this peer's own initial model even if the swarm is running (default: from the swarm's)"},
    {"checkpoint-every", NULL, RUMOR_SET_INT, N | P, 0, AT(checkpoint_every), 0, 100000000, NULL, NULL, D(NULL), NULL,
     "N", "checkpoint at every N-th round (0: every minute; and at the end and on stop)"},
    {"min-peers", NULL, RUMOR_SET_INT, N | P, 0, AT(min_peers), 0, 100000, NULL, NULL, D(NULL), NULL, "N",
     "start training once this many peers (with this one) are in view, or after --join-timeout (0: --of, "
     "else 1)"},
    {"round-timeout", NULL, RUMOR_SET_DOUBLE, N | P, 0, AT(round_timeout), 0.01, 3600, NULL, NULL, D("10"), NULL, "S",
     "longest wait for a round's models"},
    /* rumor sim */
    {"mode", NULL, RUMOR_SET_STR, S, 0, AT(mode), 0, 0, check_mode, NULL, D("proc"), "mode", "proc|virtual",
     "real rumor node processes on 127.0.0.1, or one process on a virtual clock"},
    {"peers", NULL, RUMOR_SET_INT, S, 0, AT(peers), 1, RUMOR_SIM_MAX_PEERS, NULL, NULL, D("8"), "peers", "N",
     "peers in the swarm (proc mode: at most 256)"},
    {"step-ms", NULL, RUMOR_SET_DOUBLE, S, 0, AT(step_ms), 0, 1e6, NULL, NULL, D(NULL), "step_ms", "MS",
     "virtual mode: the virtual time of one local step (0: the model's flops at 10 GFLOP/s)"},
    {"straggler", NULL, RUMOR_SET_INT, S, 0, AT(straggler), -1, RUMOR_SIM_MAX_PEERS - 1, NULL, NULL, D("-1"),
     "straggler", "I", "peer I computes --slowdown times slower (-1: none)"},
    {"byzantine", NULL, RUMOR_SET_INT, S, 0, AT(byzantine), -1, RUMOR_SIM_MAX_PEERS - 1, NULL, NULL, D("-1"),
     "byzantine", "I", "peer I sends --attack's models (-1: none)"},
    {"event", NULL, RUMOR_SET_LIST, S, 0, AT(events), 0, 0, NULL, set_event, D(NULL), NULL, "'kill peer 3 at 40s'",
     "or 'restart peer 3 at 60s', 'kill 25% at round 50' (repeatable)"},
    {"faults", NULL, RUMOR_SET_U64, S, 0, AT(faults), 1, 0, NULL, NULL, D(NULL), "faults", "SEED",
     "random faults drawn from SEED: kills and restarts (at most a quarter of the peers down, each for at most "
     "20 rounds), maybe a straggler and message loss, and in virtual mode a partition; replays exactly in "
     "virtual mode"},
    {"soak", NULL, RUMOR_SET_INT, S, 0, AT(soak), 0, 100000, NULL, NULL, D(NULL), NULL, "N",
     "a fault-free run, then --faults 1..N, each checked: no peer failed, every peer finished, consensus at "
     "most twice the fault-free run's, on iid shards accuracy within 1 point; exit 1 if one did not hold"},
    {"soak-from", NULL, RUMOR_SET_INT, S, 0, AT(soak_from), 1, 100000, NULL, NULL, D("1"), NULL, "K",
     "start the soak at seed K (resume a stopped one)"},
    {"trace-peers", NULL, RUMOR_SET_BOOL, S, 0, AT(trace_peers), 0, 0, NULL, NULL, D(NULL), NULL, NULL,
     "every peer writes its round events to OUT/peer-NNN/trace (rumor node --trace)"},
    {"replay", NULL, RUMOR_SET_STR, S, 0, AT(replay), 0, 0, NULL, NULL, D(NULL), NULL, "DIR",
     "virtual mode: each peer's gossip points, views and arrivals at the times a proc-mode run's nodes saw them "
     "(its folder, run with --trace-peers), so that both can be set side by side"},
    {"exec", NULL, RUMOR_SET_STR, S, 0, AT(exec), 0, 0, NULL, NULL, D(NULL), "exec", "CMD",
     "proc mode: run CMD (through /bin/sh) as each peer instead of rumor node: a training program of one's own "
     "with the Python package or librumor, its settings in RUMOR_SETTINGS (rumor.Peer.from_env()), RUMOR_RANK "
     "and RUMOR_PEERS; its run folder OUT/peer-NNN is its working directory"},
    {"out", NULL, RUMOR_SET_STR, S, 0, AT(out), 0, 0, NULL, NULL, D(NULL), NULL, "DIR",
     "the run folder (default runs/<time>)"},
    {"plots", NULL, RUMOR_SET_BOOL, S, 0, AT(plots), 0, 0, NULL, NULL, D("yes"), NULL, NULL,
     "draw no plots at the end (tools/plot draws them by default)"},
    {"check", NULL, RUMOR_SET_BOOL, T | N | S, RUMOR_SET_BY_PROC, AT(check), 0, 0, NULL, NULL, D(NULL), NULL, NULL,
     "check the settings and print them as JSON; run nothing"},
};

/* Defaults of a language model (--model gpt:...), where they differ from the table's: nanoGPT's
 * recipe for its character-level Shakespeare on a CPU (AdamW at 1e-3, 100 warm-up steps, a
 * cosine schedule over 2000 steps of 12 windows, gradients clipped to norm 1), on the default
 * corpus. Each row's help names its gpt default. */
static const struct {
    const char *name, *value;
    unsigned where; /* the commands it is a default of */
} lm_defaults[] = {{"data", RUMOR_DEFAULT_TEXT, T | N | S}, {"optimizer", "adamw", T | N | S},
                   {"lr", "1e-3", T | N | S},          {"warmup", "100", T | N | S},
                   {"schedule", "cosine", T | N | S},  {"batch", "12", T | N | S},
                   {"steps", "2000", T | N | S},       {"clip-grad", "1", T | N | S},
                   /* a simulated swarm of a corpus's voices: each peer whole documents */
                   {"partition", "docs", S}};

#undef T
#undef N
#undef S
#undef P

_Static_assert(RUMOR_ARRAY_LEN(table) <= sizeof(((rumor_settings_t *)0)->given), "one given flag per row");



const rumor_setting_t *rumor_settings_table(int *n)
{
    *n = (int)RUMOR_ARRAY_LEN(table);
    return table;
}

const char *rumor_cmd_name(rumor_cmd_t cmd)
{
    return cmd == RUMOR_CMD_TRAIN ? "train" : cmd == RUMOR_CMD_NODE ? "node" : cmd == RUMOR_CMD_SIM ? "sim" : "peer";
}

const rumor_setting_t *rumor_settings_find(rumor_cmd_t cmd, const char *name)
{
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(table); i++)
        if ((table[i].where & (1u << cmd)) && strcmp(table[i].name, name) == 0) return &table[i];
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(table); i++)
        if ((table[i].where & (1u << cmd)) && table[i].old && strcmp(table[i].old, name) == 0) return &table[i];
    return NULL;
}

bool rumor_settings_given(const rumor_settings_t *s, const char *name)
{
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(table); i++)
        if (strcmp(table[i].name, name) == 0) return s->given[i];
    return false;
}

/* The range of a number row, as "1..100" or "(0, 10]", into buf. */
static void range_text(const rumor_setting_t *r, char *buf, size_t cap)
{
    const bool integer = r->type == RUMOR_SET_INT || r->type == RUMOR_SET_LONG || r->type == RUMOR_SET_U64;
    if (integer) {
        if (r->type == RUMOR_SET_U64) snprintf(buf, cap, "%.0f or more", r->lo);
        else snprintf(buf, cap, "%.0f..%.0f", r->lo, r->hi);
    } else {
        snprintf(buf, cap, "%c%g, %g%c", r->flags & RUMOR_SET_OPEN_LO ? '(' : '[', r->lo, r->hi,
                 r->flags & RUMOR_SET_OPEN_HI ? ')' : ']');
    }
}

static rumor_err_t parse_bool(const char *name, const char *v, bool *out, char err[RUMOR_ERR_LEN])
{
    if (strcmp(v, "yes") == 0 || strcmp(v, "true") == 0 || strcmp(v, "1") == 0) *out = true;
    else if (strcmp(v, "no") == 0 || strcmp(v, "false") == 0 || strcmp(v, "0") == 0) *out = false;
    else return rumor_fail(err, RUMOR_EINVAL, "--%s %s: expected yes or no", name, v);
    return RUMOR_OK;
}

/* Row r takes value v (checked), into s. */
static rumor_err_t set_row(rumor_settings_t *s, const rumor_setting_t *r, const char *v, char err[RUMOR_ERR_LEN])
{
    char *p = (char *)s + r->offset;
    char range[64]; /* written only for an error message */
    switch (r->type) {
    case RUMOR_SET_LIST: return r->set(s, v, err);
    case RUMOR_SET_BOOL:
        if (p == (char *)&s->resume) { /* node: resume = auto (a service restarts it either way) */
            s->resume_auto = strcmp(v, "auto") == 0;
            if (s->resume_auto) return *(bool *)p = false, RUMOR_OK;
            const rumor_err_t rc = parse_bool(r->name, v, (bool *)p, err);
            return rc == RUMOR_OK ? rc : rumor_fail(err, rc, "--resume %s: expected yes, no or auto", v);
        }
        return parse_bool(r->name, v, (bool *)p, err);
    case RUMOR_SET_STR: {
        if (!*v) { /* off, where a setting has no default anywhere (--dp=); else a mistake */
            if (r->def[0] || r->def[1] || r->def[2]) return rumor_fail(err, RUMOR_EINVAL, "--%s: empty value", r->name);
            *p = 0;
            return RUMOR_OK;
        }
        if (strlen(v) >= r->size) return rumor_fail(err, RUMOR_EINVAL, "--%s: longer than %zu bytes", r->name, r->size - 1);
        rumor_err_t rc;
        if (r->check && (rc = r->check(v, NULL, 0, err)) != RUMOR_OK) return rc;
        memcpy(p, v, strlen(v) + 1);
        return RUMOR_OK;
    }
    case RUMOR_SET_INT:
    case RUMOR_SET_LONG: {
        char *end;
        errno = 0;
        const long long x = *v && !isspace((unsigned char)*v) ? strtoll(v, &end, 10) : 0;
        if (!*v || isspace((unsigned char)*v) || *end || (errno && errno != ERANGE))
            return rumor_fail(err, RUMOR_EINVAL, "--%s: '%s' is not an integer", r->name, v);
        if (errno == ERANGE || (double)x < r->lo || (double)x > r->hi) { /* (ERANGE: an integer, and a huge one) */
            range_text(r, range, sizeof range);
            return rumor_fail(err, RUMOR_EINVAL, "--%s %s: expected an integer in %s", r->name, v, range);
        }
        if (r->type == RUMOR_SET_INT) *(int *)p = (int)x;
        else *(long *)p = (long)x;
        return RUMOR_OK;
    }
    case RUMOR_SET_U64: {
        char *end;
        errno = 0;
        const unsigned long long x = *v >= '0' && *v <= '9' ? strtoull(v, &end, 10) : 0;
        if (!(*v >= '0' && *v <= '9') || *end || (errno && errno != ERANGE))
            return rumor_fail(err, RUMOR_EINVAL, "--%s: '%s' is not a non-negative integer", r->name, v);
        if (errno == ERANGE) return rumor_fail(err, RUMOR_EINVAL, "--%s %s: expected an integer below 2^64", r->name, v);
        if ((double)x < r->lo) {
            range_text(r, range, sizeof range);
            return rumor_fail(err, RUMOR_EINVAL, "--%s %s: expected an integer, %s", r->name, v, range);
        }
        *(uint64_t *)p = (uint64_t)x;
        return RUMOR_OK;
    }
    case RUMOR_SET_FLOAT:
    case RUMOR_SET_DOUBLE: {
        char *end;
        double x = *v && !isspace((unsigned char)*v) ? strtod(v, &end) : NAN;
        if (!*v || isspace((unsigned char)*v) || *end || !isfinite(x))
            return rumor_fail(err, RUMOR_EINVAL, "--%s: '%s' is not a finite number", r->name, v);
        /* A float setting is checked as the float it will be: 0.99999999999 is 1 in float, and
         * 1e-50 is 0, which the range may refuse (checked as typed, --check and the run
         * disagreed). */
        if (r->type == RUMOR_SET_FLOAT) x = (double)(float)x;
        if (x < r->lo || x > r->hi || (x == r->lo && (r->flags & RUMOR_SET_OPEN_LO)) ||
            (x == r->hi && (r->flags & RUMOR_SET_OPEN_HI))) {
            range_text(r, range, sizeof range);
            return rumor_fail(err, RUMOR_EINVAL, "--%s %s: expected a number in %s", r->name, v, range);
        }
        if (r->type == RUMOR_SET_FLOAT) *(float *)p = (float)x;
        else *(double *)p = x;
        return RUMOR_OK;
    }
    }
    return rumor_fail(err, RUMOR_EINVAL, "--%s: no such type", r->name);
}

/* A setting of another command, given to a library peer: why it does not take it. */
static rumor_err_t peer_refusal(const char *name, char err[RUMOR_ERR_LEN])
{
    const rumor_setting_t *r = NULL;
    for (rumor_cmd_t c = RUMOR_CMD_TRAIN; c < RUMOR_CMD_PEER && !r; c++) r = rumor_settings_find(c, name);
    if (!r) return rumor_fail(err, RUMOR_EINVAL, "unknown setting '%s' (rumor settings lists them)", name);
    name = r->name;
    if (strcmp(name, "dp") == 0 || strcmp(name, "dp-budget") == 0)
        return rumor_fail(err, RUMOR_EINVAL, "%s: DP-SGD's per-sample clipping and its accountant are rumor's own "
                          "trainer's; clip, noise and account in your training code (Opacus, for one)", name);
    if (strcmp(name, "resume") == 0)
        return rumor_fail(err, RUMOR_EINVAL, "resume: a library peer resumes with rumor_peer_load (Python: "
                          "Peer.load) of the file rumor_peer_save wrote beside your checkpoint");
    if (strcmp(name, "attack") == 0 || strcmp(name, "slowdown") == 0)
        return rumor_fail(err, RUMOR_EINVAL, "%s: an experiment of rumor node's and rumor sim's, not a library peer's", name);
    if (strcmp(name, "config") == 0)
        return rumor_fail(err, RUMOR_EINVAL, "config: give a library peer the file's text itself (the settings text)");
    if (r->where & (RUMOR_IN_TRAIN | RUMOR_IN_NODE))
        return rumor_fail(err, RUMOR_EINVAL, "%s: a library peer trains nothing itself; set it in your own training "
                          "code (rumor mixes the tensors you register)", name);
    return rumor_fail(err, RUMOR_EINVAL, "%s: a setting of rumor sim's, not a library peer's", name);
}

rumor_err_t rumor_settings_set(rumor_settings_t *s, rumor_cmd_t cmd, const char *name, const char *value,
                               char err[RUMOR_ERR_LEN])
{
    const rumor_setting_t *r = rumor_settings_find(cmd, name);
    if (!r && cmd == RUMOR_CMD_PEER) return peer_refusal(name, err);
    if (!r) return rumor_fail(err, RUMOR_EINVAL, "unknown setting '%s'", name);
    /* --config FILE: its lines, as if given here (flags after it override them). */
    rumor_err_t rc = strcmp(r->name, "config") == 0 ? rumor_settings_load(s, cmd, value, err) : RUMOR_OK;
    if (rc == RUMOR_OK) rc = set_row(s, r, value, err);
    if (rc != RUMOR_OK) return rc;
    s->given[r - table] = 1;
    if (r->flags & RUMOR_SET_NET) s->net_given = true;
    return RUMOR_OK;
}

void rumor_settings_defaults(rumor_settings_t *s, rumor_cmd_t cmd)
{
    memset(s, 0, sizeof *s);
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(table); i++) {
        const rumor_setting_t *r = &table[i];
        char err[RUMOR_ERR_LEN];
        if (!(r->where & (1u << cmd)) || !r->def[cmd]) continue;
        if (set_row(s, r, r->def[cmd], err) != RUMOR_OK) { /* a default the table itself refuses: a bug */
            fprintf(stderr, "rumor: the default of --%s: %s\n", r->name, err);
            abort();
        }
    }
}

bool rumor_settings_parse_args(rumor_settings_t *s, rumor_cmd_t cmd, int argc, char **argv, int first,
                               const char **pos, int max_pos, int *n_pos, bool *help, char err[RUMOR_ERR_LEN])
{
    *n_pos = 0;
    *help = false;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            *help = true;
            continue;
        }
        if (strncmp(a, "--", 2) != 0 || !a[2]) {
            if (*n_pos == max_pos) {
                rumor_fail(err, RUMOR_EINVAL, "unexpected argument '%s' (see rumor %s --help)", a, rumor_cmd_name(cmd));
                return false;
            }
            pos[(*n_pos)++] = a;
            continue;
        }
        char name[64];
        const char *eq = strchr(a + 2, '=');
        const size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), a + 2);
        const rumor_setting_t *r = len < sizeof name ? rumor_settings_find(cmd, name) : NULL;
        bool negated = false;
        if (!r && strncmp(name, "no-", 3) == 0) {
            r = rumor_settings_find(cmd, name + 3);
            negated = r && r->type == RUMOR_SET_BOOL;
            if (!negated) r = NULL;
        }
        if (!r) {
            rumor_fail(err, RUMOR_EINVAL, "unknown option '--%.*s' (see rumor %s --help)", (int)len, a + 2,
                       rumor_cmd_name(cmd));
            return false;
        }
        const char *v;
        if (r->type == RUMOR_SET_BOOL && negated) {
            if (eq) {
                rumor_fail(err, RUMOR_EINVAL, "--%s takes no value", name);
                return false;
            }
            v = "no";
        } else if (r->type == RUMOR_SET_BOOL && (r->flags & RUMOR_SET_OPT_VALUE) && cmd != RUMOR_CMD_NODE &&
                   (eq || (i + 1 < argc && argv[i + 1][0] != '-'))) {
            /* train's --resume FILE, sim's --resume DIR */
            rumor_err_t rc = r->set(s, eq ? eq + 1 : argv[++i], err);
            if (rc != RUMOR_OK) return false;
            s->given[r - table] = 1;
            continue;
        } else if (r->type == RUMOR_SET_BOOL) {
            v = eq ? eq + 1 : "yes";
        } else {
            v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
            if (!v) {
                rumor_fail(err, RUMOR_EINVAL, "--%s needs a value", name);
                return false;
            }
        }
        if (rumor_settings_set(s, cmd, r->name, v, err) != RUMOR_OK) return false;
    }
    return true;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    return s;
}

/* One line of the settings text (NUL-terminated, without its newline), numbered no. */
static rumor_err_t read_line(rumor_settings_t *s, rumor_cmd_t cmd, char *line, const char *origin, int no,
                             char err[RUMOR_ERR_LEN])
{
    char e2[RUMOR_ERR_LEN];
    /* A comment starts at a `#` that begins the line or follows a blank: a `#` inside a value
     * (Z85 keys in rumor:// addresses have them) is the value's. */
    for (char *h = line; *h; h++)
        if (*h == '#' && (h == line || h[-1] == ' ' || h[-1] == '\t')) {
            *h = 0;
            break;
        }
    char *t = trim(line);
    if (!*t || *t == '[') return RUMOR_OK; /* blank, comment, or an INI section header */
    char *eq = strchr(t, '=');
    if (!eq) return rumor_fail(err, RUMOR_EINVAL, "%s:%d: expected key = value", origin, no);
    *eq = 0;
    const char *key = trim(t);
    if (strcmp(key, "config") == 0)
        return rumor_fail(err, RUMOR_EINVAL, "%s:%d: settings files do not include other files", origin, no);
    const rumor_err_t rc = rumor_settings_set(s, cmd, key, trim(eq + 1), e2);
    return rc == RUMOR_OK ? rc : rumor_fail(err, rc, "%s:%d: %s", origin, no, e2);
}

rumor_err_t rumor_settings_read(rumor_settings_t *s, rumor_cmd_t cmd, const char *text, const char *origin,
                                char err[RUMOR_ERR_LEN])
{
    char line[1024];
    int no = 0;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        const size_t len = nl ? (size_t)(nl - p) : strlen(p);
        no++;
        if (len >= sizeof line) return rumor_fail(err, RUMOR_EINVAL, "%s:%d: line too long", origin, no);
        memcpy(line, p, len);
        line[len] = 0;
        const rumor_err_t rc = read_line(s, cmd, line, origin, no, err);
        if (rc != RUMOR_OK) return rc;
        p += len + (nl != NULL);
    }
    return RUMOR_OK;
}

rumor_err_t rumor_settings_load(rumor_settings_t *s, rumor_cmd_t cmd, const char *path, char err[RUMOR_ERR_LEN])
{
    FILE *f = fopen(path, "r");
    if (!f) return rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
    char line[1024];
    int no = 0;
    rumor_err_t rc = RUMOR_OK;
    while (rc == RUMOR_OK && fgets(line, sizeof line, f)) {
        no++;
        char *nl = strchr(line, '\n');
        if (!nl && !feof(f)) rc = rumor_fail(err, RUMOR_EINVAL, "%s:%d: line too long", path, no);
        else rc = read_line(s, cmd, (nl ? (*nl = 0, line) : line), path, no, err);
    }
    fclose(f);
    return rc;
}

rumor_err_t rumor_settings_write(const rumor_settings_t *s, const char *path, const char *const *skip,
                                 char err[RUMOR_ERR_LEN])
{
    static char text[65536];
    size_t len = (size_t)snprintf(text, sizeof text, "# the settings given, as `rumor sim --resume` reads them back\n");
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(table) && len < sizeof text; i++) {
        const rumor_setting_t *r = &table[i];
        bool skipped = !s->given[i] || r->type == RUMOR_SET_LIST || strcmp(r->name, "config") == 0; /* (its lines are here) */
        for (int k = 0; skip && skip[k] && !skipped; k++) skipped = strcmp(skip[k], r->name) == 0;
        if (skipped) continue;
        char v[RUMOR_SETTINGS_PATH];
        rumor_settings_format(s, r, v, sizeof v);
        if (r->type == RUMOR_SET_DOUBLE) /* every bit */
            snprintf(v, sizeof v, "%.17g", *(const double *)((const char *)s + r->offset));
        len += (size_t)snprintf(text + len, sizeof text - len, "%s = %s\n", r->name, v);
    }
    if (len >= sizeof text) return rumor_fail(err, RUMOR_EINVAL, "%s: the settings are too long", path);
    return rumor_write_atomic(path, &(rumor_piece_t){text, len}, 1, 0644, true, err);
}

/* A swarm's run given in steps: the rounds whose local steps make them (at least that many). */
static void rounds_of_steps(rumor_settings_t *s, rumor_cmd_t cmd)
{
    rumor_algo_t algo;
    char err[RUMOR_ERR_LEN];
    if (cmd == RUMOR_CMD_TRAIN || s->steps <= 0 || rumor_settings_given(s, "rounds") ||
        rumor_settings_algo(s, &algo, err) != RUMOR_OK)
        return;
    const long H = algo.local_steps;
    s->rounds = (s->steps + H - 1) / H;
}

void rumor_settings_family(rumor_settings_t *s, rumor_cmd_t cmd)
{
    rumor_model_spec_t spec;
    char err[RUMOR_ERR_LEN];
    if (rumor_model_spec_parse(&spec, s->model, err) == RUMOR_OK && spec.kind == RUMOR_MODEL_GPT)
        for (size_t i = 0; i < RUMOR_ARRAY_LEN(lm_defaults); i++) {
            const rumor_setting_t *r = rumor_settings_find(cmd, lm_defaults[i].name);
            const char *v = lm_defaults[i].value;
            /* token files are one document: a swarm's peers take equal slices of it */
            if (strcmp(lm_defaults[i].name, "partition") == 0 && rumor_text_is_tokens(s->data)) v = "iid";
            if (r && (lm_defaults[i].where & (1u << cmd)) && !s->given[r - table] && set_row(s, r, v, err) != RUMOR_OK)
                abort(); /* a default the table refuses: a bug */
        }
    rounds_of_steps(s, cmd);
    /* About ten evaluations a run, whatever a round is (a diloco round of a language model is
     * 50 steps: a fixed count of rounds left a run with its first and last figures only). */
    if (cmd != RUMOR_CMD_TRAIN && !rumor_settings_given(s, "eval-every"))
        s->eval_every = s->rounds >= 10 ? (int)((s->rounds + 9) / 10) : 1;
}

rumor_err_t rumor_settings_algo(const rumor_settings_t *s, rumor_algo_t *out, char err[RUMOR_ERR_LEN])
{
    const rumor_err_t rc = rumor_algo_parse(out, s->algo, err);
    if (rc != RUMOR_OK) return rc;
    if (out->kind != RUMOR_ALGO_DILOCO && s->local_steps >= 1) out->local_steps = s->local_steps;
    out->outer_lr = s->outer_lr;
    out->outer_momentum = s->outer_momentum;
    out->overlap = s->overlap;
    out->overlap_steps = s->overlap_steps ? s->overlap_steps : (out->local_steps / 4 > 1 ? out->local_steps / 4 : 1);
    return RUMOR_OK;
}

rumor_err_t rumor_settings_optim(const rumor_settings_t *s, rumor_optim_config_t *opt, char err[RUMOR_ERR_LEN])
{
    *opt = rumor_optim_defaults();
    const rumor_err_t rc = rumor_optim_kind_parse(&opt->kind, s->optimizer[0] ? s->optimizer : "sgd", err);
    if (rc != RUMOR_OK) return rc;
    opt->lr = s->lr;
    opt->momentum = s->momentum;
    opt->nesterov = s->nesterov;
    opt->weight_decay = s->weight_decay;
    opt->tracking = s->tracking;
    return rumor_optim_config_check(opt, err);
}

rumor_err_t rumor_settings_learning(const rumor_settings_t *s, rumor_model_spec_t *spec, rumor_optim_config_t *opt,
                                    rumor_schedule_t *sched, rumor_partition_t *part, bool *partitioned, char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc;
    if ((rc = rumor_model_spec_parse(spec, s->model, err)) != RUMOR_OK || (rc = rumor_settings_optim(s, opt, err)) != RUMOR_OK ||
        (rc = rumor_schedule_parse(sched, s->schedule, err)) != RUMOR_OK)
        return rc;
    sched->warmup = s->warmup;
    *partitioned = s->partition[0] && rumor_settings_given(s, "rank");
    if (*partitioned && (rc = rumor_partition_parse(part, s->partition, err)) != RUMOR_OK) return rc;
    return RUMOR_OK;
}

bool rumor_settings_node_trains(const rumor_settings_t *s)
{
    static const char *const rows[] = {"data", "model", "algo", "rounds", "run-dir", "partition", "resume"};
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(rows); i++)
        if (rumor_settings_given(s, rows[i])) return true;
    return false;
}

void rumor_settings_format(const rumor_settings_t *s, const rumor_setting_t *r, char *buf, size_t cap)
{
    const char *p = (const char *)s + r->offset;
    switch (r->type) {
    case RUMOR_SET_INT: snprintf(buf, cap, "%d", *(const int *)p); break;
    case RUMOR_SET_LONG: snprintf(buf, cap, "%ld", *(const long *)p); break;
    case RUMOR_SET_U64: snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)p); break;
    case RUMOR_SET_FLOAT: snprintf(buf, cap, "%.9g", (double)*(const float *)p); break;
    case RUMOR_SET_DOUBLE: snprintf(buf, cap, "%.9g", *(const double *)p); break;
    case RUMOR_SET_STR: snprintf(buf, cap, "%s", p); break;
    case RUMOR_SET_BOOL:
        snprintf(buf, cap, "%s", p == (const char *)&s->resume && s->resume_auto ? "auto" : *(const bool *)p ? "yes" : "no");
        break;
    case RUMOR_SET_LIST: snprintf(buf, cap, "%s", ""); break;
    }
}

/* ---- the settings a checkpoint records ---- */

int rumor_settings_record(const rumor_settings_t *s, rumor_cmd_t cmd, rumor_st_meta_t *out, int cap)
{
    int n = 0;
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(table) && n < cap; i++) {
        const rumor_setting_t *r = &table[i];
        if (!(r->where & (1u << cmd)) || !(r->flags & RUMOR_SET_RECORD)) continue;
        snprintf(out[n].key, sizeof out[n].key, "train.%s", r->name);
        if (r->type == RUMOR_SET_DOUBLE) /* every bit: a resumed run takes it back */
            snprintf(out[n].value, sizeof out[n].value, "%.17g", *(const double *)((const char *)s + r->offset));
        else
            rumor_settings_format(s, r, out[n].value, sizeof out[n].value);
        n++;
    }
    return n;
}

/* Row r's value in a checkpoint, as text; NULL: not recorded. Checkpoints from before the
 * table recorded its rows used two other keys and "none" for no partition, and every
 * checkpoint keeps the model, seed and optimizer in its own metadata too. Runs from before
 * --limit (a gpt model's) and --vocab (a classifier's) were refused recorded what they
 * ignored: that is no setting to take back. */
static const char *recorded(const rumor_checkpoint_info_t *info, const rumor_model_spec_t *spec,
                            const rumor_setting_t *r, char *buf, size_t cap)
{
    static const struct {
        const char *name, *key;
    } older[] = {{"weight-decay", "train.weight_decay"}, {"of", "train.peers"}};
    if (strcmp(r->name, spec->kind == RUMOR_MODEL_GPT ? "limit" : "vocab") == 0) return NULL;
    snprintf(buf, cap, "train.%s", r->name);
    const char *v = rumor_checkpoint_extra(info, buf);
    for (size_t i = 0; !v && i < RUMOR_ARRAY_LEN(older); i++)
        if (strcmp(r->name, older[i].name) == 0) v = rumor_checkpoint_extra(info, older[i].key);
    if (v) return strcmp(r->name, "partition") == 0 && strcmp(v, "none") == 0 ? "" : v;
    if (strcmp(r->name, "model") == 0) return spec->canonical;
    if (strcmp(r->name, "optimizer") == 0) return rumor_optim_kind_name(info->optim_kind);
    if (strcmp(r->name, "seed") == 0) {
        snprintf(buf, cap, "%llu", (unsigned long long)info->seed);
        return buf;
    }
    return NULL;
}

/* v as row r spells it ("0.050" -> "0.05", "1" -> "yes", a model's canonical spec), into buf;
 * false when r refuses v. */
static bool canonical(const rumor_setting_t *r, const char *v, char *buf, size_t cap)
{
    char err[RUMOR_ERR_LEN];
    if (r->type == RUMOR_SET_STR) {
        if (!*v || !r->check) return snprintf(buf, cap, "%s", v), true;
        return r->check(v, buf, cap, err) == RUMOR_OK;
    }
    rumor_settings_t *x = calloc(1, sizeof *x);
    const bool ok = x && set_row(x, r, v, err) == RUMOR_OK;
    if (ok) rumor_settings_format(x, r, buf, cap);
    free(x);
    return ok;
}

rumor_err_t rumor_settings_resume(rumor_settings_t *s, rumor_cmd_t cmd, const char *path, char err[RUMOR_ERR_LEN])
{
    rumor_model_spec_t spec;
    rumor_model_input_t in;
    rumor_checkpoint_info_t info;
    rumor_err_t rc = rumor_checkpoint_peek(path, &spec, &in, &info, err);
    if (rc != RUMOR_OK) return rc;
    if (!info.has_optim)
        return rumor_fail(err, RUMOR_EINVAL, "%s: an exported model, not a checkpoint (no optimizer state)%s", path,
                          cmd == RUMOR_CMD_TRAIN ? "; write checkpoints with --checkpoint" : "");
    char changed[768] = "";
    size_t len = 0;
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(table); i++) {
        const rumor_setting_t *r = &table[i];
        if (!(r->where & (1u << cmd)) || !(r->flags & RUMOR_SET_RECORD)) continue;
        char key[96], mine[256], a[256], b[256];
        const char *v = recorded(&info, &spec, r, key, sizeof key);
        if (!v) continue;
        rumor_settings_format(s, r, mine, sizeof mine);
        const bool ok = canonical(r, v, b, sizeof b); /* a value no flag takes: an unpartitioned run's --of 0 */
        if (strcmp(mine, v) == 0 || (ok && canonical(r, mine, a, sizeof a) && strcmp(a, b) == 0)) continue;
        if (!ok && !s->given[i]) continue; /* nothing to take back */
        if (!s->given[i]) { /* not given: the checkpoint's */
            if ((rc = set_row(s, r, v, err)) != RUMOR_OK) return rc;
            /* A swarm's steps only set its rounds, which the checkpoint holds too: taken back,
             * they neither derive the rounds again nor clash with them. */
            s->given[i] = cmd == RUMOR_CMD_TRAIN || strcmp(r->name, "steps") != 0;
            continue;
        }
        if (r->flags & RUMOR_SET_FIXED)
            return rumor_fail(err, RUMOR_EINVAL, "%s: --%s %s differs from the checkpoint's %s (a resumed run keeps "
                              "the settings it started with)", path, r->name, *mine ? mine : "(none)", *v ? v : "(none)");
        if (len < sizeof changed)
            len += (size_t)snprintf(changed + len, sizeof changed - len, "%s --%s %s (was %s)", len ? "," : "",
                                    r->name, mine, v);
    }
    if (len) rumor_log(RUMOR_LOG_WARN, "resuming %s with settings other than it started with:%s", path, changed);
    /* A shard's rank and count go with its partition, also where they equal the defaults (peer
     * 0's --rank 0): as given, by the checkpoint. */
    const rumor_setting_t *rank = rumor_settings_find(cmd, "rank"), *of = rumor_settings_find(cmd, "of");
    if (s->partition[0] && rank && of) s->given[rank - table] = s->given[of - table] = 1;
    return RUMOR_OK;
}

rumor_err_t rumor_settings_fixed_same(const rumor_settings_t *s, rumor_cmd_t cmd, const rumor_st_file_t *f,
                                      const char *path, char err[RUMOR_ERR_LEN])
{
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(table); i++) {
        const rumor_setting_t *r = &table[i];
        if (!(r->where & (1u << cmd)) || !(r->flags & RUMOR_SET_FIXED) || !(r->flags & RUMOR_SET_RECORD)) continue;
        char key[96], mine[256], a[256], b[256];
        snprintf(key, sizeof key, "train.%s", r->name);
        const char *v = rumor_st_meta(f, key);
        if (!v) continue;
        rumor_settings_format(s, r, mine, sizeof mine);
        if (strcmp(mine, v) == 0 || (canonical(r, v, b, sizeof b) && canonical(r, mine, a, sizeof a) && strcmp(a, b) == 0))
            continue;
        return rumor_fail(err, RUMOR_EINVAL, "%s: %s is %s there and %s here (a resumed peer keeps the settings it "
                          "started with)", path, r->name, *v ? v : "(none)", *mine ? mine : "(none)");
    }
    return RUMOR_OK;
}

void rumor_settings_help(FILE *f, rumor_cmd_t cmd)
{
    rumor_settings_t d;
    rumor_settings_defaults(&d, cmd);
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(table); i++) {
        const rumor_setting_t *r = &table[i];
        if (!(r->where & (1u << cmd))) continue;
        char head[96], def[96] = "";
        const bool on = r->type == RUMOR_SET_BOOL && r->def[cmd] && *(const bool *)((const char *)&d + r->offset);
        if (r->type == RUMOR_SET_BOOL)
            snprintf(head, sizeof head, "--%s%s%s", on ? "no-" : "", r->name,
                     r->flags & RUMOR_SET_OPT_VALUE && cmd == RUMOR_CMD_TRAIN ? " [FILE]"
                     : r->flags & RUMOR_SET_OPT_VALUE && cmd == RUMOR_CMD_SIM ? " DIR" : "");
        else snprintf(head, sizeof head, "--%s %s", r->name, r->meta ? r->meta : "VALUE");
        if (r->type != RUMOR_SET_BOOL && r->def[cmd]) snprintf(def, sizeof def, " (default %s)", r->def[cmd]);
        fprintf(f, "  %-30s %s%s\n", head, r->help, def);
    }
    fprintf(f, "  %-30s %s\n", "--help", "this help");
}

/* A JSON string (the values here are specs and paths: escape quotes and backslashes). */
static void json_str(char *buf, size_t cap, size_t *len, const char *v)
{
    if (*len + 1 < cap) buf[(*len)++] = '"';
    for (const char *p = v; *p && *len + 3 < cap; p++) {
        if (*p == '"' || *p == '\\') buf[(*len)++] = '\\';
        buf[(*len)++] = (unsigned char)*p < 0x20 ? '?' : *p;
    }
    if (*len + 1 < cap) buf[(*len)++] = '"';
    buf[*len < cap ? *len : cap - 1] = 0;
}

static void json_add(char *buf, size_t cap, size_t *len, const char *fmt, ...) RUMOR_PRINTF(4, 5);
static void json_add(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    if (*len >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    const int k = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (k > 0) *len += (size_t)k < cap - *len ? (size_t)k : cap - 1 - *len;
}

void rumor_settings_json(const rumor_settings_t *c, rumor_cmd_t cmd, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = 0;
    if (cap < 2) return;
    json_add(buf, cap, &len, "{");
    bool first = true;
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(table); i++) {
        const rumor_setting_t *r = &table[i];
        if (!(r->where & (1u << cmd)) || r->type == RUMOR_SET_LIST || strcmp(r->name, "check") == 0) continue;
        if (cmd == RUMOR_CMD_SIM && !r->json) continue;
        json_add(buf, cap, &len, "%s\"%s\":", first ? "" : ",", cmd == RUMOR_CMD_SIM ? r->json : r->name);
        first = false;
        char v[RUMOR_SETTINGS_PATH];
        rumor_settings_format(c, r, v, sizeof v);
        if (r->type == RUMOR_SET_STR || strcmp(v, "auto") == 0) json_str(buf, cap, &len, v); /* (resume = auto) */
        else if (r->type == RUMOR_SET_BOOL) json_add(buf, cap, &len, "%s", strcmp(v, "yes") == 0 ? "true" : "false");
        else json_add(buf, cap, &len, "%s", v);
    }
    if (cmd != RUMOR_CMD_SIM) {
        json_add(buf, cap, &len, "}");
        return;
    }
    json_add(buf, cap, &len, ",\"partitions\":[");
    for (int i = 0; i < c->n_parts; i++)
        json_add(buf, cap, &len, "%s\"peers %d..%d from round %ld to %ld\"", i ? "," : "", c->parts[i].lo,
                 c->parts[i].hi - 1, c->parts[i].from, c->parts[i].to);
    json_add(buf, cap, &len, "],\"events\":[");
    for (int i = 0; i < c->n_events; i++) {
        const rumor_sim_event_t *e = &c->events[i];
        char who[32], when[32];
        if (e->peer >= 0) snprintf(who, sizeof who, "peer %d", e->peer);
        else snprintf(who, sizeof who, "%d%%", e->percent);
        if (e->at_round >= 0) snprintf(when, sizeof when, "round %ld", e->at_round);
        else snprintf(when, sizeof when, "%gs", e->at_s);
        json_add(buf, cap, &len, "%s\"%s %s at %s\"", i ? "," : "", e->kind == RUMOR_SIM_KILL ? "kill" : "restart", who,
                 when);
    }
    json_add(buf, cap, &len, "]}");
}

void rumor_settings_table_json(FILE *f)
{
    static const char *const types[] = {"int", "long", "u64", "float", "double", "string", "switch", "list"};
    fputs("[", f);
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(table); i++) {
        const rumor_setting_t *r = &table[i];
        char buf[1024];
        size_t len = 0;
        buf[0] = 0;
        json_add(buf, sizeof buf, &len, "%s{\"name\":\"%s\",\"old\":", i ? ",\n" : "", r->name);
        if (r->old) json_str(buf, sizeof buf, &len, r->old);
        else json_add(buf, sizeof buf, &len, "null");
        json_add(buf, sizeof buf, &len, ",\"type\":\"%s\",\"where\":[", types[r->type]);
        bool first = true;
        for (int c = 0; c < RUMOR_N_CMDS; c++)
            if (r->where & (1u << c)) {
                json_add(buf, sizeof buf, &len, "%s\"%s\"", first ? "" : ",", rumor_cmd_name((rumor_cmd_t)c));
                first = false;
            }
        json_add(buf, sizeof buf, &len, "]");
        const bool number = r->type <= RUMOR_SET_DOUBLE;
        if (number)
            json_add(buf, sizeof buf, &len, ",\"lo\":%.17g,\"hi\":%.17g,\"open_lo\":%s,\"open_hi\":%s", r->lo,
                     r->type == RUMOR_SET_U64 ? 1.8e19 : r->hi, r->flags & RUMOR_SET_OPEN_LO ? "true" : "false",
                     r->flags & RUMOR_SET_OPEN_HI ? "true" : "false");
        if (r->flags & RUMOR_SET_OPT_VALUE) json_add(buf, sizeof buf, &len, ",\"train_value\":\"FILE\"");
        if (r->meta) json_add(buf, sizeof buf, &len, ",\"meta\":\"%s\"", r->meta);
        json_add(buf, sizeof buf, &len, ",\"checked\":%s,\"defaults\":{",
                 number || r->check || r->type == RUMOR_SET_BOOL || r->set ? "true" : "false");
        first = true;
        for (int c = 0; c < RUMOR_N_CMDS; c++)
            if ((r->where & (1u << c)) && r->def[c]) {
                json_add(buf, sizeof buf, &len, "%s\"%s\":", first ? "" : ",", rumor_cmd_name((rumor_cmd_t)c));
                json_str(buf, sizeof buf, &len, r->def[c]);
                first = false;
            }
        json_add(buf, sizeof buf, &len, "},\"recorded\":%s,\"fixed\":%s,\"help\":",
                 r->flags & RUMOR_SET_RECORD ? "true" : "false", r->flags & RUMOR_SET_FIXED ? "true" : "false");
        json_str(buf, sizeof buf, &len, r->help);
        json_add(buf, sizeof buf, &len, "}");
        fputs(buf, f);
    }
    fputs("]\n", f);
}
