/*
 * trace.h - a peer's round events, one line each, as its driver saw them: what the peer core
 * decided (the gossip points, mixes, evaluations, checkpoints, its end) and what came in and
 * went out (its view, its sends, the model chunks that arrived). A node writes them with
 * --trace FILE; virtual mode with --trace-peers, into every peer's folder; and virtual mode
 * replays a swarm of nodes' traces (rumor sim --replay DIR): each peer's gossip points, views
 * and arrivals at the times the nodes saw them, so that both drivers' decisions can be set
 * side by side, round by round (tests/test_sim.py).
 *
 * The lines (times in microseconds on the driver's clock: a node's monotonic clock, the
 * virtual clock; keys: the first 8 bytes of a member's public key, in hex, its own in full on
 * the first line):
 *
 *     self KEY64 [PLACE]           PLACE: its place in the graph's order, 16 hex digits (a node:
 *                                  rumor_member_place; none in virtual mode, which ranks by key)
 *     start T                      the first phase begins (after the wait for the swarm)
 *     phase T K                    a gossip point of round K (an overlapped round has two)
 *     view T N KEY16...            the engine's view changed: N members (itself not counted)
 *     send T TO16 ROUND            the engine handed a model of its ROUND to the network
 *     arrive T FROM16 ROUND C      chunk C of a model of ROUND came in (answers to pulls not)
 *     mix T K landed|mixed         round K's gossip is done: landed (overlap) or mixed
 *     eval T K / ckpt T K / end T K  what the core said to do after round K's mix
 *     end T K took|own             the swarm was over after K rounds: it took the swarm's model or kept its own
 *     done T N                     N members said they finished (a node: when N changes)
 *     resync T ROUND K             it took the swarm's model of ROUND (a join, a resumed peer): K rounds done
 *
 * Lines are buffered and appended to the file now and then (a simulation of thousands of
 * peers cannot keep a file open for each); rumor_trace_close writes the rest.
 */
#ifndef RUMOR_TRACE_H
#define RUMOR_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "base.h"

typedef struct rumor_trace rumor_trace_t;

/* A trace of the peer with public key self and place (0: none said), written to path
 * (created, 0600; emptied, or appended to when append: a resumed node's next life).
 * NULL with err when the file cannot be made. */
rumor_trace_t *rumor_trace_open(const char *path, const uint8_t self[RUMOR_KEY_LEN], uint64_t place, bool append,
                                char err[RUMOR_ERR_LEN]);
/* Writes what is buffered and frees. RUMOR_EIO with err when the file could not take it. */
rumor_err_t rumor_trace_close(rumor_trace_t *t, char err[RUMOR_ERR_LEN]);

/* Each records one line (us: microseconds; k: the core's rounds done; round: the engine's). A NULL trace records
 * nothing, so a driver calls these unconditionally; any thread may (each line is written whole). */
void rumor_trace_start(rumor_trace_t *t, uint64_t us);
void rumor_trace_phase(rumor_trace_t *t, uint64_t us, long k);
void rumor_trace_view(rumor_trace_t *t, uint64_t us, const uint8_t (*keys)[RUMOR_KEY_LEN], int n);
void rumor_trace_send(rumor_trace_t *t, uint64_t us, const uint8_t to[RUMOR_KEY_LEN], uint64_t round);
void rumor_trace_arrive(rumor_trace_t *t, uint64_t us, const uint8_t from[RUMOR_KEY_LEN], uint64_t round,
                        uint32_t chunk);
/* Round core->k - 1 (or the round in flight, when it landed) was mixed, and after says what
 * follows: the mix line, then eval, ckpt and end lines as after asks. */
void rumor_trace_mixed(rumor_trace_t *t, uint64_t us, const rumor_core_t *core, const rumor_core_after_t *after);
/* The peer ended outside a round's mix, with k rounds done: the swarm was over, and it took
 * the swarm's final model (took) or kept its own. */
void rumor_trace_end(rumor_trace_t *t, uint64_t us, long k, bool took);
/* It fell into step with the swarm (rumor_core_resync_end): the model of the engine's round,
 * k rounds done. */
void rumor_trace_resync(rumor_trace_t *t, uint64_t us, uint64_t round, long k);
/* Members that said they finished (a node's, when their number changes; virtual mode replays them). */
void rumor_trace_done(rumor_trace_t *t, uint64_t us, int finished);

#endif
