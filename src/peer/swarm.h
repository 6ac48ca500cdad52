/*
 * swarm.h - a training peer's swarm half: its node, the gossip engine between the node and the
 * trainer, pulls, finishing. Said once for the two drivers that bring a trainer: rumor_peer_run
 * (peer.c, rumor's own trainer on its models) and librumor (src/lib, the caller's trainer on
 * the tensors it registered). Virtual mode drives the core (core.h) and the engine itself.
 *
 * The order of calls:
 *
 *     swarm_new(cfg)                       cfg is the caller's and outlives the peer
 *     swarm_open(p)                        the node: keys read, sockets bound, callbacks set
 *     swarm_layout(p, P, extra, id, text)  what it mixes: send buffers, secure mixing's keys, hello
 *     swarm_engine(p, x)                   the engine, from the parameters x (host memory)
 *     swarm_node_main(p) on a thread       the node's poll loop (rumor_peer_run: its own thread;
 *       or swarm_start_node(p)             the library: a thread of the peer's)
 *     swarm_core_init(p), then rounds:     swarm_phase, steps, swarm_gossip_point, swarm_gossip
 *                                          until mixed, swarm_mixed
 *     swarm_set_final(p, x), swarm_linger  done: "finished" to every member, pulls answered
 *     swarm_stop_node(p), swarm_destroy(&p)
 *
 * Threads: the node thread runs callbacks (peer_node.c) under the peer's lock; every other
 * function here is the trainer's (one thread at a time), and takes the lock where it needs to.
 */
#ifndef RUMOR_SWARM_H
#define RUMOR_SWARM_H

#include "core.h"
#include "peer.h"

#include <stdatomic.h>

typedef struct peer peer_t;

/* A peer with settings cfg (kept by reference) and nothing made yet; NULL: out of memory. */
peer_t *swarm_new(const rumor_peer_config_t *cfg);
/* Its node (cfg->node, with the layout set later by swarm_layout), the trace, the lock, the
 * node's callbacks; cfg->listening is told the address. */
rumor_err_t swarm_open(peer_t *p, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* The node's address: rumor://KEY@HOST:PORT (the node's memory). */
const char *swarm_address(const peer_t *p);
/* What the peer mixes: P floats of the model whose layout is `text` (canonical, len bytes; its
 * id `layout`), then `extra` floats of optimizer state; the send side's buffers, secure
 * mixing's keys, the id in its hellos, the text for members of another layout. Before the
 * node runs. */
rumor_err_t swarm_layout(peer_t *p, size_t P, size_t extra, uint64_t layout, const char *text, size_t len,
                         char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* A member of another layout named the first tensor that differs (peer_layout.c) since the
 * last call: true, with the sentence in buf. */
bool swarm_layout_mismatch(peer_t *p, char *buf, size_t cap);
/* The engine, with the topology of cfg, from the parameters x (P + extra floats, host memory,
 * the trainer's between gossip points). */
rumor_err_t swarm_engine(peer_t *p, float *x, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* The engine's round is final (after any swarm_state_read): secure mixing's round floor,
 * from cfg->run_dir, may move it past rounds an earlier life masked. */
rumor_err_t swarm_ready(peer_t *p, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* The engine's state from a checkpoint f (read from path): its gossip round gr, gossip.w, and
 * diloco's theta and momentum. */
rumor_err_t swarm_state_read(peer_t *p, const rumor_st_file_t *f, const char *path, uint64_t gr,
                             char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* ... and into a checkpoint's tensors (t: room for 3, *nt set; w: the caller frees it) with
 * the gossip round. */
rumor_err_t swarm_state_tensors(peer_t *p, rumor_st_out_t *t, size_t *nt, float **w, uint64_t *ground,
                                char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* The node's poll loop until it stops (its result in p->nrc, p->nerr); then the trainer is
 * told to stop. */
void swarm_node_main(peer_t *p);
/* ... on a thread of its own. */
rumor_err_t swarm_start_node(peer_t *p, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* Stop the node and join its thread (a goodbye to every member first); its result. */
rumor_err_t swarm_stop_node(peer_t *p, char err[RUMOR_ERR_LEN]);
/* The trainer should stop: a signal, the node ended, or a close. */
bool swarm_stopped(const peer_t *p);

/* The core at round k (0, or a checkpoint's), with cfg's rounds, steps and checkpoints. */
void swarm_core_init(peer_t *p, long k);
rumor_core_t *swarm_core(peer_t *p);
/* The core's next phase (under the lock: the core reads the engine). */
void swarm_phase(peer_t *p, rumor_core_phase_t *ph);
/* The phase's steps are done: the core is told, the trace written. */
void swarm_gossip_point(peer_t *p);
/* Run the engine's gossip point on x until its round is mixed: 1. 0: deadline_ms (the clock
 * of rumor_now_ms; 0: none) passed, or *interrupt was set, with the round still open: call
 * again with the same x. -1: the peer is stopping. */
int swarm_gossip(peer_t *p, float *x, uint64_t deadline_ms, const atomic_bool *interrupt);
/* metrics.jsonl at path (appended to when append; readable by its owner only): one line a
 * round from here; its clock starts now. */
rumor_err_t swarm_metrics_open(peer_t *p, const char *path, bool append, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
void swarm_metrics_write(peer_t *p, const rumor_metrics_line_t *l);
/* A metrics line about the model alone: its round and step, flag ("resync", "swarm_final") or
 * NULL, and its evaluation when loss_acc is not NULL (test loss and accuracy; text: a language
 * model's val_loss and val_acc). */
void swarm_model_line(peer_t *p, long step, const char *flag, const double *loss_acc, bool text);
/* The round just mixed, as a metrics line (core.h rumor_core_line): what the trainer knows
 * (step, loss and evaluation, privacy) from it, the rest (time, view, bytes, wait) here. */
void swarm_round_line(peer_t *p, const rumor_core_facts_t *trainer, double wait_s);
/* Training begins (after the wait for members and a join's resync): traced. */
void swarm_started(peer_t *p);
/* The engine's figures (under the lock). */
void swarm_stats(peer_t *p, rumor_gossip_stats_t *st);
/* The round is mixed: the core says what follows; traced. */
void swarm_mixed(peer_t *p, rumor_core_after_t *after);
/* Admitted members of this layout (the gossip view and the finished), under the lock. */
int swarm_members(peer_t *p);
/* Whether every member finished (core.h rumor_core_swarm_over), and no resync asked them in
 * the last RESYNC_EVERY seconds. */
bool swarm_over(peer_t *p, bool recently_asked_counts);

/* Fall into step with the swarm (core.h): a late join, a resumed peer behind, or the swarm's
 * end. x: the parameters the engine mixes (P floats); *took: two members' model is in x now;
 * *answered: whole answers. Blocks up to three asks of max(round timeout, 5 s). */
rumor_err_t swarm_resync(peer_t *p, float *x, rumor_core_resync_why_t why, bool *took, int *answered,
                         char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* Every member finished without this peer: take two confirming final models into x (*took),
 * or keep x; either way the peer is over (swarm_is_over), unless no member answered at all
 * (then it trains on alone). */
rumor_err_t swarm_finish_with(peer_t *p, float *x, bool *took, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
bool swarm_is_over(const peer_t *p);

/* Training is over with the model x (P floats, kept by reference until the peer is
 * destroyed): pulls get it, and every member is told this peer finished. */
void swarm_set_final(peer_t *p, const float *x);
/* Stay to answer pulls: until cfg->linger_ms passed, or (unless the linger was given) every
 * member in view finished 2 s ago, or a stop. 1: over; 0: deadline_ms (0: none) passed or
 * *interrupt set first: call again. */
int swarm_linger(peer_t *p, uint64_t deadline_ms, const atomic_bool *interrupt);

/* The status `rumor status` prints (json: its --json object, with the training part), from
 * the node's thread when it runs (within timeout_ms). */
rumor_err_t swarm_status(peer_t *p, bool json, char *out, size_t cap, int timeout_ms, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* Everything the peer made, the peer too; *pp NULL after. */
void swarm_destroy(peer_t **pp);

#endif
