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
 *                          "final_test_acc_min", "final_test_acc_max" (a language model:
 *                          "final_val_loss_mean", "final_val_loss_max"), "consensus" (the mean of
 *                          the peers' last consensus), "model_spread" (of the final models),
 *                          "bytes_total", "wall_s" (real seconds), "virtual_s" (virtual mode:
 *                          the seconds of virtual time it simulated), "interrupted", "config": {...}}
 *                         with --dp also "epsilon_max" and "dp_noise": "seeded: ..." in
 *                         virtual mode (batches and noise from --seed, replayable, protecting
 *                         nothing), "secret: ..." in proc mode (libsodium, as every node)
 *   OUT/peer-NNN/metrics.jsonl  one JSON object per round, the keys of `rumor node`: t (s since
 *                         the peer started; virtual seconds in virtual mode), round, step, loss,
 *                         consensus, peers, neighbours, missing, bytes_out, bytes_in, w,
 *                         wait_s (the round's wait on gossip after its local steps);
 *                         test_acc and test_loss when evaluated (round 0 and every eval_every)
 *   OUT/plots/            PNG plots drawn by tools/plot (gnuplot)
 *   proc mode also: OUT/swarm/ (authority, keys, certificates), OUT/peer-NNN/{command.txt,
 *                         node.log, checkpoint.safetensors, model.safetensors}
 */
#ifndef RUMOR_SIM_H
#define RUMOR_SIM_H

#include "base.h"
#include "settings.h"

#include <stdbool.h>
#include <stdint.h>

/* The settings of a simulated swarm: the settings table's (settings.h), which `rumor sim`
 * shares with `rumor train` and `rumor node`. */
typedef rumor_settings_t rumor_sim_config_t;

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
    double val_mean, val_max;   /* a language model's latest validation loss, NAN when none yet */
    long eval_round, eval_step; /* the oldest of those figures: its round and step (-1: none) */
    double consensus;           /* mean over live peers */
    double mb_sent;
    int alive;
    int finished;               /* live peers whose last line says they finished (a library
                                   peer's rumor_peer_finish: its program's work is done) */
    double elapsed_s, eta_s;    /* real seconds */
    double virtual_s;           /* virtual mode: the virtual clock (else NAN) */
} rumor_sim_status_t;

/* Read every peer's metrics.jsonl under out (peers NNN = 0..peers-1) into st; `alive[i]`
 * says whether peer i still runs (NULL: all). */
void rumor_sim_status_read(const char *out, int peers, const bool *alive, long rounds, double elapsed_s,
                           rumor_sim_status_t *st);
/* Draw the status: an updating block on a TTY, a plain line otherwise (call it often; it
 * rate-limits itself). final: the last one. */
void rumor_sim_status_print(const rumor_sim_config_t *c, const rumor_sim_status_t *st, bool tty, bool final);
/* Write OUT/summary.json atomically from the peers' metrics: wall_s real seconds, virtual_s
 * the virtual ones (NAN: not a virtual run). spread: the spread of the final
 * models, sqrt(mean_i |x_i - mean|^2), when the caller knows it (virtual mode), else NAN (proc
 * mode reads it from the peers' model.safetensors): "model_spread". */
rumor_err_t rumor_sim_write_summary(const rumor_sim_config_t *c, double wall_s, double virtual_s, bool interrupted,
                                    double spread, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* Draw OUT/plots with tools/plot; a warning (not an error) when gnuplot is missing. */
void rumor_sim_plot(const char *out);

#endif
