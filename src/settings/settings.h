/*
 * settings.h - every setting of `rumor train`, `rumor node` and `rumor sim`, in one table.
 *
 * One row per setting (settings.c): its name (the flag without "--" and the scenario key),
 * an older spelling still accepted, its type, its range or the parser that accepts its values,
 * each command's default, which commands take it, the key it has in summary.json, and its
 * help. The table drives the commands' flags and --help, `rumor settings`, the scenario keys,
 * the command line proc mode gives each node, --check and the configuration summary.json
 * records. A value is checked once, when it is set (rumor_settings_set, the same for a flag, a
 * scenario key and a default), and the settings as a whole once (rumor_settings_check).
 *
 * The values live in one struct, rumor_settings_t, which `rumor sim` uses as its
 * configuration (sim.h); `rumor train` and `rumor node` turn it into the library's
 * configurations (train.h, peer.h), which take no text.
 */
#ifndef RUMOR_SETTINGS_H
#define RUMOR_SETTINGS_H

#include "data.h"
#include "gossip.h"
#include "model.h"
#include "optim.h"
#include "base.h"
#include "peer.h"
#include "safetensors.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* PEER: a library peer (librumor, the Python package): the swarm's settings of a node, without
 * what rumor's own trainer does (the caller's program trains). */
typedef enum { RUMOR_CMD_TRAIN, RUMOR_CMD_NODE, RUMOR_CMD_SIM, RUMOR_CMD_PEER, RUMOR_N_CMDS } rumor_cmd_t;

#define RUMOR_IN_TRAIN (1u << RUMOR_CMD_TRAIN)
#define RUMOR_IN_NODE (1u << RUMOR_CMD_NODE)
#define RUMOR_IN_SIM (1u << RUMOR_CMD_SIM) /* a flag of rumor sim and a key of its scenario files */
#define RUMOR_IN_PEER (1u << RUMOR_CMD_PEER)

#define RUMOR_SIM_MAX_PEERS 4096
#define RUMOR_SIM_MAX_EVENTS 64
#define RUMOR_SIM_MAX_PARTS 4
#define RUMOR_SETTINGS_MAX_BOOTSTRAPS 16
#define RUMOR_SETTINGS_PATH 512

typedef enum { RUMOR_SIM_KILL, RUMOR_SIM_RESTART } rumor_sim_event_kind_t;

/* "kill peer 3 at 40s", "restart peer 3 at 60s", "kill 25% at round 50" */
typedef struct {
    rumor_sim_event_kind_t kind;
    int peer;           /* -1: a fraction of the peers (percent) */
    int percent;
    double at_s;        /* at this time (s since the start), or */
    long at_round;      /* at this round (the slowest live peer's), when >= 0 */
} rumor_sim_event_t;

/* A partition (virtual mode): peers [lo, hi) and the others hear nothing of each other while
 * the furthest peer's round is in [from, to) (the slowest may be a straggler that trains few
 * rounds and keeps up by jumping: by it a partition of one round could last the run). */
typedef struct {
    long from, to;
    int lo, hi;
} rumor_sim_part_t;

typedef struct rumor_settings {
    /* what is learnt, and how (train, node, sim) */
    char data[RUMOR_SETTINGS_PATH];
    char model[96];
    char partition[32];     /* "": the whole training set (train, node) */
    int rank, of;           /* with partition: which shard of how many (train, node) */
    long limit;             /* training samples used (0: all) */
    int batch;
    float lr, momentum, weight_decay;
    bool nesterov;
    char optimizer[16];
    bool tracking;          /* gradient tracking (node, sim) */
    char schedule[32];
    long warmup;
    uint64_t seed;
    uint64_t init_seed;     /* node: the initial parameters' seed (given or --seed) */
    int threads;            /* compute threads (sim: per peer, proc mode; 0: cores / peers) */
    char device[16];
    /* the swarm (node, sim) */
    char algo[32];
    char topology[64];
    long rounds;
    int local_steps;
    int eval_every;         /* rounds between test evaluations */
    double outer_lr, outer_momentum; /* diloco's outer Nesterov step */
    bool overlap;           /* the next local steps run while the round's models travel */
    int overlap_steps;      /* overlapped diloco: inner steps a round travels (0: H / 4) */
    char robust[32];        /* none | clip[:F] | trim:B */
    char attack[32];        /* scale:K | noise:S (a Byzantine peer: node, sim's --byzantine) */
    char dp[96];            /* DP-SGD: clip=C,noise=S[,delta=D]; "": off */
    double dp_budget;       /* epsilon at which a peer stops training; 0: none */
    char codec[32];
    double consensus_step;  /* codec topk: CHOCO's gamma; 0: the engine's default */
    bool secure_mix;
    double slowdown;        /* node: this peer; sim: the straggler */
    double latency_ms, bandwidth_mbps, loss; /* the emulated network (node: emulate-*) */
    /* rumor train */
    int epochs;
    long steps;             /* the run's length; 0: --epochs */
    float clip_grad;
    int vocab;              /* token files' vocabulary; 0: the default */
    char metrics[RUMOR_SETTINGS_PATH], save[RUMOR_SETTINGS_PATH], checkpoint[RUMOR_SETTINGS_PATH];
    char resume_from[RUMOR_SETTINGS_PATH]; /* --resume FILE (or --checkpoint's, with --resume) */
    long checkpoint_steps, max_steps;
    int log_every;
    bool eval;
    /* rumor node */
    char key[RUMOR_SETTINGS_PATH], cert[RUMOR_SETTINGS_PATH], swarm[RUMOR_SETTINGS_PATH];
    char listen[256], advertise[256], control[256], revoked[RUMOR_SETTINGS_PATH];
    char bootstraps[RUMOR_SETTINGS_MAX_BOOTSTRAPS][256];
    int n_bootstraps;
    double join_timeout;    /* s */
    bool relay;             /* forward for members that cannot reach each other */
    double relay_budget;    /* MB/s forwarded at most */
    int view_size, period_ms, suspect_ms;
    bool verbose;
    char run_dir[RUMOR_SETTINGS_PATH];
    char trace[RUMOR_SETTINGS_PATH]; /* node: its round events' file ("": none) */
    char config[RUMOR_SETTINGS_PATH]; /* the last --config file read */
    bool trace_peers;        /* sim: every peer writes OUT/peer-NNN/trace */
    char replay[RUMOR_SETTINGS_PATH]; /* sim, virtual: a proc run's folder whose traces it replays */
    char exec[RUMOR_SETTINGS_PATH * 2]; /* sim, proc: each peer's command instead of rumor node */
    bool resume;            /* node: continue from the run folder's checkpoint; train: from --checkpoint */
    bool resume_auto;       /* node: resume = auto, resume where the run folder has a checkpoint */
    double linger;          /* s */
    bool late_join;
    int checkpoint_every;   /* rounds */
    int min_peers;
    double round_timeout;   /* s */
    /* rumor sim */
    char mode[16];          /* proc | virtual */
    int peers;
    double step_ms;         /* virtual mode: virtual compute time of one local step; 0: the model's
                               flops at a nominal 10 GFLOP/s (never measured: runs stay deterministic) */
    bool net_given;         /* proc mode emulates the network only when asked (latency/bandwidth/loss given) */
    rumor_sim_event_t events[RUMOR_SIM_MAX_EVENTS];
    int n_events;
    int straggler;          /* this peer computes `slowdown` times slower; -1: none */
    int byzantine;          /* this peer sends `attack` instead of its models; -1: none */
    rumor_sim_part_t parts[RUMOR_SIM_MAX_PARTS]; /* virtual mode */
    int n_parts;
    uint64_t faults;        /* --faults SEED: the random faults it drew (rumor_sim_faults); 0: none */
    int soak;               /* --soak N: N seeds of faults, each checked against a fault-free run */
    int soak_from;          /* --soak-from K: the first seed of the soak */
    char out[RUMOR_SETTINGS_PATH]; /* run folder; "" = runs/<timestamp> */
    bool plots;             /* draw plots at the end (tools/plot) */
    bool quiet;
    bool check;             /* --check: print the checked settings; run nothing */
    uint8_t given[128];     /* given[i]: row i of the table was set by the user */
} rumor_settings_t;

typedef enum {
    RUMOR_SET_INT, RUMOR_SET_LONG, RUMOR_SET_U64, RUMOR_SET_FLOAT, RUMOR_SET_DOUBLE,
    RUMOR_SET_STR,   /* text, accepted by the row's check */
    RUMOR_SET_BOOL,  /* a switch: --name, --no-name; yes|no in files */
    RUMOR_SET_LIST,  /* repeatable, kept by the row's own setter (--event, --bootstrap) */
} rumor_setting_type_t;

/* Row flags. */
#define RUMOR_SET_OPEN_LO 1u   /* the range excludes lo */
#define RUMOR_SET_OPEN_HI 2u   /* the range excludes hi */
#define RUMOR_SET_BY_PROC 4u   /* proc mode sets it for each node itself (not passed on as given) */
#define RUMOR_SET_NET 8u       /* the emulated network: proc mode passes it only when one was asked for */
#define RUMOR_SET_OPT_VALUE 16u /* a switch that may take a value (train's old --resume FILE) */
#define RUMOR_SET_RECORD 32u   /* checkpoints record it: a resumed run takes it from there unless given */
#define RUMOR_SET_FIXED 64u    /* with RECORD: a resumed run may not change it (it fixes the run's course) */

typedef struct {
    const char *name;        /* "local-steps": the flag --local-steps, the scenario key */
    const char *old;         /* an older spelling still accepted, or NULL */
    rumor_setting_type_t type;
    unsigned where;          /* RUMOR_IN_* */
    unsigned flags;          /* RUMOR_SET_* */
    size_t offset, size;     /* the value in rumor_settings_t */
    double lo, hi;           /* numbers: the range */
    /* STR: accepts v (NULL: any text) and, where canon is not NULL, writes its canonical spelling */
    rumor_err_t (*check)(const char *v, char *canon, size_t cap, char err[RUMOR_ERR_LEN]);
    rumor_err_t (*set)(rumor_settings_t *s, const char *v, char err[RUMOR_ERR_LEN]); /* LIST, or a STR kept otherwise */
    const char *def[RUMOR_N_CMDS]; /* each command's default, as a value; NULL: 0, "" or off */
    const char *json;        /* its key in summary.json's "config"; NULL: not recorded */
    const char *meta;        /* "N", "SPEC", ... for --help */
    const char *help;        /* a switch on by default: what its --no- form does */
} rumor_setting_t;

/* The table: *n rows. */
const rumor_setting_t *rumor_settings_table(int *n);
/* The row named name (or spelt so before) that cmd takes; NULL: none. */
const rumor_setting_t *rumor_settings_find(rumor_cmd_t cmd, const char *name);
const char *rumor_cmd_name(rumor_cmd_t cmd);

/* Every row's default for cmd. */
void rumor_settings_defaults(rumor_settings_t *s, rumor_cmd_t cmd);
/* name = value for cmd (a flag without "--", a scenario key): checked against the row's range
 * or parser. BOOL takes yes|no|true|false|1|0. EINVAL with one sentence in err ("--lr 20:
 * expected a number in (0, 10]", "unknown setting ..."). */
rumor_err_t rumor_settings_set(rumor_settings_t *s, rumor_cmd_t cmd, const char *name, const char *value,
                               char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* Was the setting called name given by the user (a flag, a scenario key)? */
bool rumor_settings_given(const rumor_settings_t *s, const char *name);
/* argv[first..argc): --name VALUE, --name=VALUE, --switch, --no-switch. Positional arguments
 * go to pos (max_pos at most). false with one sentence in err; *help when --help was given. */
bool rumor_settings_parse_args(rumor_settings_t *s, rumor_cmd_t cmd, int argc, char **argv, int first,
                               const char **pos, int max_pos, int *n_pos, bool *help, char err[RUMOR_ERR_LEN]);
/* The one text form of settings, for any command: a scenario file (rumor sim), a --config
 * file (train, node, sim), and what a launcher hands a library peer. One `key = value` a line,
 * keys the flags' names; `#` at the start of a line or after a blank starts a comment (a `#`
 * within a value, as in a rumor:// address, is the value's), `[sections]` and blank lines are
 * ignored; a
 * repeatable setting (bootstrap, event) is given once a line. Each value is set as the flag
 * would be, in order; the first that is refused stops the reading, with err "ORIGIN:LINE:
 * why". A `config` line is refused (files do not include files). */
rumor_err_t rumor_settings_read(rumor_settings_t *s, rumor_cmd_t cmd, const char *text, const char *origin,
                                char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* The same, from the file at path (errors "PATH:LINE: why"; RUMOR_EIO when it cannot be read). */
rumor_err_t rumor_settings_load(rumor_settings_t *s, rumor_cmd_t cmd, const char *path,
                                char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* The settings the user gave (flags, scenario keys) to path, atomically, in the scenario form
 * that rumor_settings_load reads back: one `key = value` line each, rows that repeat (--event,
 * --bootstrap) and the rows named in skip (a NULL-terminated list, or NULL) left out. */
rumor_err_t rumor_settings_write(const rumor_settings_t *s, const char *path, const char *const *skip,
                                 char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* The settings as a whole, for cmd: what no single value shows (a shard's rank within its
 * count, --dp-budget without --dp, codecs and modes that exclude each other, peers a topology
 * cannot join). EINVAL with one sentence in err. */
rumor_err_t rumor_settings_check(const rumor_settings_t *s, rumor_cmd_t cmd, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* The defaults of the model's family, for every setting of cmd not given: a gpt model's are
 * nanoGPT's recipe on the default corpus; then a node's or swarm's --steps as the rounds that
 * take them, unless --rounds is given. Call it after the command line (and again after a
 * resume took the model from a checkpoint). */
void rumor_settings_family(rumor_settings_t *s, rumor_cmd_t cmd);
/* The gossip algorithm of node or sim settings: --algo, its local steps (--local-steps unless
 * diloco:H), the outer step, --overlap. EINVAL with a sentence in err. */
rumor_err_t rumor_settings_algo(const rumor_settings_t *s, rumor_algo_t *out, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* The optimizer s names: its kind, rate, momentum, Nesterov and weight decay (train, node, a
 * library peer and both sim modes alike). */
rumor_err_t rumor_settings_optim(const rumor_settings_t *s, rumor_optim_config_t *opt,
                                 char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* The model, optimizer, schedule and shard of s (checked: rumor_settings_check). */
rumor_err_t rumor_settings_learning(const rumor_settings_t *s, rumor_model_spec_t *spec, rumor_optim_config_t *opt,
                                    rumor_schedule_t *sched, rumor_partition_t *part, bool *partitioned,
                                    char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* Whether a node trains: any of --data, --model, --algo, --rounds, --run-dir, --partition,
 * --resume given (else it only keeps the swarm's membership). */
bool rumor_settings_node_trains(const rumor_settings_t *s);
/* A node's configuration from s (checked): keys, addresses, bootstraps, membership timing,
 * relaying (settings_peer.c). Its strings point into s. */
void rumor_settings_node(const rumor_settings_t *s, rumor_node_config_t *cfg);
/* A training peer's configuration from s (checked): the node's, the swarm's (algo, topology,
 * rounds, codec, robust mixing, finishing, ...) and, for RUMOR_CMD_NODE, rumor's own trainer's
 * (model, data, optimizer, DP-SGD). A library peer (RUMOR_CMD_PEER) without rounds runs until
 * its caller finishes it. recorded (cap entries, or NULL) receives what its checkpoints record
 * (rumor_settings_record); pc points into s and recorded. */
rumor_err_t rumor_settings_peer(const rumor_settings_t *s, rumor_cmd_t cmd, rumor_peer_config_t *pc,
                                rumor_st_meta_t *recorded, int cap, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* Row r's value as text ("0.05", "mlp:256,128", "yes"), into buf. */
void rumor_settings_format(const rumor_settings_t *s, const rumor_setting_t *r, char *buf, size_t cap);
/* What a checkpoint of cmd records of s: "train.NAME" = value for every row flagged
 * RUMOR_SET_RECORD, into out (cap at most); the count. */
int rumor_settings_record(const rumor_settings_t *s, rumor_cmd_t cmd, rumor_st_meta_t *out, int cap);
/* Before resuming from the checkpoint at path: every recorded setting the user did not give
 * is taken from it (so `--resume` alone continues a run as it was started); a given one that
 * is RUMOR_SET_FIXED must equal the checkpoint's (EINVAL, naming both); others may differ,
 * with one warning that names them. Two spellings of a value are equal ("0.050" and
 * "0.05"). Checkpoints from before the table are read too. */
rumor_err_t rumor_settings_resume(rumor_settings_t *s, rumor_cmd_t cmd, const char *path,
                                  char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* Whether the settings of s that fix a run's course (RUMOR_SET_FIXED: algo, topology, seed,
 * a model) equal what the file f at path recorded of them ("train.NAME" metadata, written by
 * rumor_settings_record): EINVAL naming the first that differs, both values. */
rumor_err_t rumor_settings_fixed_same(const rumor_settings_t *s, rumor_cmd_t cmd, const rumor_st_file_t *f,
                                      const char *path, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* cmd's options, one per line, with their defaults: what --help prints. */
void rumor_settings_help(FILE *f, rumor_cmd_t cmd);
/* cmd's settings as one JSON object, into buf: what --check prints. For sim, what summary.json
 * records: the rows with a json key, then "partitions" and "events". */
void rumor_settings_json(const rumor_settings_t *s, rumor_cmd_t cmd, char *buf, size_t cap);
/* The table itself, as JSON (`rumor settings --json`): name, old, type, where, range, defaults,
 * help; for tests and tools that walk it. */
void rumor_settings_table_json(FILE *f);

#endif
