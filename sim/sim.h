/*
 * sim.h - `rumor sim`: a swarm on one machine, to study decentralized learning and to see a
 * swarm work the first time.
 *
 * Two modes share one configuration and one run folder:
 *   proc     N real `rumor node` processes on 127.0.0.1 (sim/proc.c): a swarm authority and
 *            a certificate per peer in the run folder, peer 0 the bootstrap, everything
 *            encrypted and admitted as in a deployment. Each peer's command line is kept
 *            (peer-NNN/command.txt), so any peer can be rerun by hand.
 *   virtual  one process, a discrete-event virtual clock (sim/virtual.c): the same gossip
 *            engine and topologies, an emulated network (latency, bandwidth, loss), hundreds
 *            to thousands of peers. Deterministic: the same configuration gives the same
 *            summary.json, byte for byte (wall time is kept out of it).
 *
 * The run folder (the contract tools/plot and the tests read):
 *   OUT/summary.json      {"mode", "peers", "rounds", "final_test_acc_mean",
 *                          "final_test_acc_min", "final_test_acc_max", "consensus" (the mean of
 *                          the peers' last consensus), "model_spread" (of the final models),
 *                          "bytes_total", "wall_s", "interrupted", "config": {...}}
 *                         (virtual mode: "wall_s" is virtual seconds; real time is printed)
 *                         with --dp also "epsilon_max" and "dp_noise": "seeded: ..." in
 *                         virtual mode (batches and noise from --seed, replayable, protecting
 *                         nothing), "secret: ..." in proc mode (libsodium, as every node)
 *   OUT/peer-NNN/metrics.jsonl  one JSON object per round, the keys of `rumor node`: t (s since
 *                         the peer started; virtual seconds in virtual mode), round, step, loss,
 *                         consensus, peers, neighbours, missing, bytes_out, bytes_in, w;
 *                         test_acc and test_loss when evaluated (round 0 and every eval_every)
 *   OUT/plots/            PNG plots drawn by tools/plot (gnuplot)
 *   proc mode also: OUT/swarm/ (authority, keys, certificates), OUT/peer-NNN/{command.txt,
 *                         node.log, checkpoint.safetensors, model.safetensors}
 */
#ifndef RUMOR_SIM_H
#define RUMOR_SIM_H

#include "rumor.h"

#include <stdbool.h>
#include <stdint.h>

#define RUMOR_SIM_MAX_PEERS 4096
#define RUMOR_SIM_MAX_EVENTS 64
#define RUMOR_SIM_MAX_PARTS 4

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

typedef struct {
    char mode[16];          /* proc | virtual */
    int peers;
    char topology[64];
    char algo[32];
    char model[96];
    char partition[32];
    long rounds;
    int local_steps;
    int batch;
    float lr, momentum, weight_decay;
    double outer_lr, outer_momentum; /* diloco's outer Nesterov step (0.7 and 0.9 by default) */
    char optimizer[16];
    char schedule[32];
    long warmup;
    uint64_t seed;
    int eval_every;         /* rounds between test evaluations */
    long limit;             /* training samples used (0: all) */
    char data[512];
    int threads;            /* compute threads per peer (proc mode); 0: cores / peers, at least 1 */
    /* network (virtual mode) */
    double latency_ms, bandwidth_mbps, loss;
    bool net_given;         /* proc mode emulates the network only when asked (latency/bandwidth/loss given) */
    double step_ms;         /* virtual mode: virtual compute time of one local step; 0: the model's
                               flops at a nominal 10 GFLOP/s (never measured: runs stay deterministic) */
    /* faults */
    rumor_sim_event_t events[RUMOR_SIM_MAX_EVENTS];
    int n_events;
    int straggler;          /* this peer computes `slowdown` times slower; -1: none */
    double slowdown;
    char robust[32];        /* robust mixing on every peer: none | clip | clip:F */
    int byzantine;          /* this peer sends `attack` instead of its models; -1: none */
    char attack[32];        /* scale:K | noise:S */
    char dp[96];            /* DP-SGD on every peer: clip=C,noise=S[,delta=D]; "" = off */
    char codec[32];         /* how every peer encodes the models it sends: f32 | fp16 | bf16 | int8 */
    double dp_budget;       /* epsilon at which a peer stops training; 0: none */
    bool secure_mix;        /* neighbourhood masked averaging on every peer (secmix.h) */
    double consensus_step;  /* codec topk: CHOCO's gamma; 0: the engine's default */
    rumor_sim_part_t parts[RUMOR_SIM_MAX_PARTS]; /* virtual mode */
    int n_parts;
    uint64_t faults;        /* --faults SEED: the random faults it drew (rumor_sim_faults); 0: none */
    int soak;               /* --soak N: N seeds of faults, each checked against a fault-free run */
    int soak_from;          /* --soak-from K: the first seed of the soak (default 1: resume a stopped one) */
    char out[512];          /* run folder; "" = runs/<timestamp> */
    bool plots;             /* draw plots at the end (tools/plot) */
    bool quiet;
} rumor_sim_config_t;

void rumor_sim_defaults(rumor_sim_config_t *c);
/* key = value, as in a scenario file or from a --flag (the flag's name without dashes).
 * EINVAL with a sentence in err. */
rumor_err_t rumor_sim_set(rumor_sim_config_t *c, const char *key, const char *value,
                          char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* Read a scenario file: `key = value` lines, `#` comments, `event = kill peer 3 at 40s`. */
rumor_err_t rumor_sim_load(rumor_sim_config_t *c, const char *path, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* Random faults from `seed` (nonzero), added to c: kills and restarts at rounds (at most a
 * quarter of the peers down at once, each for at most 20 rounds, every one back 20 rounds
 * before the end), maybe a straggler (slowdown 1.5..4) and message loss (up to 5%), and in
 * virtual mode a partition of up to half the peers for 1..3 rounds. The same seed and
 * settings give the same faults. */
void rumor_sim_faults(rumor_sim_config_t *c, uint64_t seed);
/* --soak: c->soak seeds of faults, each run checked against the fault-free one (sim/soak.c):
 * 0 when every invariant held, 1 when one did not, 2 on an error (err). Stops at *stop. */
int rumor_sim_soak(const rumor_sim_config_t *c, const char *rumor_exe, const atomic_bool *stop,
                   char err[RUMOR_ERR_LEN]);
/* Check the whole configuration (ranges, specs that parse). */
rumor_err_t rumor_sim_check(const rumor_sim_config_t *c, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* The configuration as one JSON object (for summary.json), into buf. */
void rumor_sim_config_json(const rumor_sim_config_t *c, char *buf, size_t cap);

/* Run the configured swarm; the run folder is c->out (created). Stops early once *stop is
 * set (the CLI's SIGINT; NULL: never) and still writes summary.json. */
rumor_err_t rumor_sim_run_proc(const rumor_sim_config_t *c, const char *rumor_exe, const atomic_bool *stop,
                               char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
rumor_err_t rumor_sim_run_virtual(const rumor_sim_config_t *c, const atomic_bool *stop,
                                  char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* ---- shared by both modes (sim/report.c) ---- */

/* The live status of a swarm, from its peers' latest metrics. */
typedef struct {
    long round_min, round_max;  /* over live peers */
    double loss_mean, loss_min, loss_max;
    double acc_mean, acc_min;   /* latest evaluated, NAN when none yet */
    double consensus;           /* mean over live peers */
    double mb_sent;
    int alive;
    double elapsed_s, eta_s;
} rumor_sim_status_t;

/* Read every peer's metrics.jsonl under out (peers NNN = 0..peers-1) into st; `alive[i]`
 * says whether peer i still runs (NULL: all). */
void rumor_sim_status_read(const char *out, int peers, const bool *alive, long rounds, double elapsed_s,
                           rumor_sim_status_t *st);
/* Draw the status: an updating block on a TTY, a plain line otherwise (call it often; it
 * rate-limits itself). final: the last one. */
void rumor_sim_status_print(const rumor_sim_config_t *c, const rumor_sim_status_t *st, bool tty, bool final);
/* Write OUT/summary.json atomically from the peers' metrics. spread: the spread of the final
 * models, sqrt(mean_i |x_i - mean|^2), when the caller knows it (virtual mode), else NAN (proc
 * mode reads it from the peers' model.safetensors): "model_spread". */
rumor_err_t rumor_sim_write_summary(const rumor_sim_config_t *c, double wall_s, bool interrupted, double spread,
                                    char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* Draw OUT/plots with tools/plot; a warning (not an error) when gnuplot is missing. */
void rumor_sim_plot(const char *out);

#endif
