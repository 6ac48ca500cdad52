/*
 * core.h - the peer core: what one training peer's round decides, said once for every
 * driver. The node (src/peer/peer.c: a trainer thread, sockets), virtual mode (sim/virtual.c: a
 * virtual clock, emulated links) and a caller's own trainer drive it; each takes the steps it
 * is told to, runs the gossip engine at the gossip point it is told of, and evaluates,
 * checkpoints and ends when told to. A simulation therefore answers questions about the node.
 *
 * A round k (counted from 0) is the local steps of phase k, then the gossip that mixes their
 * result; round k + 1 is done once that mix has landed. An overlapped diloco round has two
 * phases: the steps that the round in flight has to land (algo.overlap_steps), then the rest.
 * A peer's last round is its rounds' last, or the one in which its privacy budget ran out (the
 * trainer stops before a step that would pass it): that round still gossips, as the last one
 * (the engine closes it: it ends on a mix, and neighbours stop waiting for this peer), so that
 * the steps it did take are mixed, evaluated and written down.
 *
 * The loop every driver runs, with its own clock and waits:
 *
 *     rumor_core_phase(&core, &ph);            the steps to take, and whether the round lands
 *     steps ph.count from ph.first;  rumor_core_stepped(&core, &stats);
 *     rumor_core_gossip_point(&core);          (closes the engine in the last round)
 *     run the engine until its round is mixed (rumor_gossip_step returns DONE), then
 *     rumor_core_mixed(&core, now, &after);    landed: next phase; else evaluate, write
 *                                              rumor_core_line, checkpoint, end as after says
 *
 * Falling into step with the swarm (a late join, a resumed peer, a swarm that finished
 * without it) is decided here too: the driver asks members for their models one after
 * another and hands each answer to rumor_core_resync_answer, which says whether it counts;
 * rumor_core_resync_end takes the mean of two that confirm each other, or nothing.
 *
 * Pure: no I/O, threads or clock; the engine it is given is the driver's, used under the
 * driver's lock. Non-goals: the engine's sends and arrivals (the driver hands them to its
 * network), how members are asked and answer (a node pulls over the network, virtual mode
 * lends a snapshot).
 */
#ifndef RUMOR_CORE_H
#define RUMOR_CORE_H

#include <stdbool.h>
#include <stdint.h>

#include "gossip.h"
#include "trainer.h"

typedef struct {
    long rounds;             /* rounds to train (>= 1) */
    long local_steps;        /* a round's steps (H >= 1) */
    long overlap_steps;      /* overlapped diloco: the steps a round has to land (1 .. H - 1) */
    int eval_every;          /* evaluate every that many rounds (0: only at the start and the end) */
    int checkpoint_every;    /* checkpoint at every round that is a multiple of it; 0: every
                                checkpoint_s of the driver's clock (INFINITY: never) */
    double checkpoint_s;
    bool secure_mix;         /* no model is lent in the clear: two finished members do not end it */
} rumor_core_config_t;

typedef struct {
    rumor_core_config_t c;
    rumor_gossip_t *g;       /* the peer's engine: the driver's, and its lock's */
    long k;                  /* rounds done; the one in progress is k */
    bool budget_spent;       /* DP-SGD: no further step; this round is the last */
    long steps_done;         /* steps of round k taken in its phases before the current one */
    long phase_steps;        /* the current phase's */
    bool lands;              /* ... and whether the round in flight lands at its end */
    double loss_sum;         /* round k's summed loss and samples, over its phases */
    long samples;
    float lr;                /* of its last step */
    double ckpt_t;           /* the last checkpoint's time on the driver's clock */
} rumor_core_t;

/* A peer at round k (0, or a checkpoint's), with engine g, at time now of the driver's clock. */
void rumor_core_init(rumor_core_t *core, const rumor_core_config_t *c, rumor_gossip_t *g, long k, double now);

/* The local steps of the next phase: count steps, the first at position `first` of the
 * learning-rate schedule (the swarm's round, rumor_gossip_schedule_round, times H, plus the
 * steps of the round already taken); lands: the round in flight is mixed at the phase's end,
 * and the round goes on with the rest of its steps. (A peer with its budget spent takes no
 * step: count is still the phase's, for a driver that emulates its duration.) */
typedef struct {
    long first, count;
    long sched_round;
    bool lands;
} rumor_core_phase_t;
void rumor_core_phase(rumor_core_t *core, rumor_core_phase_t *ph);

/* The phase's steps were taken, with stats st (NULL: none taken, as a peer with nothing to
 * train on). */
void rumor_core_stepped(rumor_core_t *core, const rumor_trainer_stats_t *st);

/* The phase's steps are done: the gossip point. Closes the engine when this round is the
 * peer's last (it ends on a mix, and the others stop waiting for it). */
void rumor_core_gossip_point(rumor_core_t *core);

/* Whether the round that phase k's steps begin is the peer's last. */
bool rumor_core_last(const rumor_core_t *core);

/* What the driver does once the engine mixed the gossip point's round. */
typedef struct {
    bool landed;             /* an overlapped round landed mid-round: take the next phase */
    bool evaluate;           /* evaluate the model, then write the round's line */
    bool checkpoint;         /* write a checkpoint (never in the last round: the end writes one) */
    bool finished;           /* the peer is done: its last round is mixed */
} rumor_core_after_t;
void rumor_core_mixed(rumor_core_t *core, double now, rumor_core_after_t *after);

/* The driver wrote a checkpoint at time now: the next is due from here. */
void rumor_core_checkpointed(rumor_core_t *core, double now);

/* What the driver knows of a round for its metrics line. */
typedef struct {
    double t;                /* its clock, since the start */
    int t_decimals;          /* 3 (a node's wall clock), 6 (virtual time) */
    long step;               /* the optimizer's steps so far */
    int peers;               /* its view, this peer included */
    uint64_t bytes_out, relayed;
    double wait_s, deadline_s;
    bool evaluated, text;
    double test_loss, test_acc;
    bool private;
    double epsilon;
} rumor_core_facts_t;

/* The metrics line of the round just mixed (rumor_core_mixed), from the engine's stats. */
void rumor_core_line(const rumor_core_t *core, const rumor_core_facts_t *f, const rumor_gossip_stats_t *st,
                     rumor_metrics_line_t *l);

/* Whether the swarm is over for this peer, which has not finished: of the members it knows
 * (in its view, or finished and gone), `finished` said they finished; every one, or out of
 * secure mixing two. Two members vouch for the end as they vouch for a pulled model; a peer
 * behind them would otherwise train on, with fewer neighbours each round and a learning rate
 * of its own, into a model of its own. */
bool rumor_core_swarm_over(const rumor_core_t *core, int members, int finished);

/* ---- falling into step with the swarm ---- */

#define RUMOR_CORE_LATE_JOIN_ROUNDS 4 /* a member this many rounds in: the swarm is running */

typedef enum {
    RUMOR_CORE_JOIN,         /* a fresh peer: the swarm's model if it is running */
    RUMOR_CORE_BEHIND,       /* a resumed peer: the swarm's model if it has moved on */
    RUMOR_CORE_FINISHED,     /* every member finished: the swarm's final model, and the end */
} rumor_core_resync_why_t;

typedef struct {
    rumor_core_resync_why_t why;
    uint64_t own;            /* the engine's round when it began */
    rumor_confirm_t cf;      /* the answers that count, until two confirm each other */
    int answers;             /* whole answers handed in */
    bool starting;           /* a join found the swarm starting together: nothing to take */
} rumor_core_resync_t;

/* What one answer is to the resync. */
typedef enum {
    RUMOR_CORE_TAKEN,        /* it counts: keep it unchanged until rumor_core_resync_end */
    RUMOR_CORE_IMPLAUSIBLE,  /* not finite, or out of all scale with this peer's model */
    RUMOR_CORE_NOT_AHEAD,    /* of no use: not far enough ahead, or (at the end) not finished */
    RUMOR_CORE_STARTING,     /* a join, and the swarm is starting together: ask no further */
} rumor_core_answer_t;

void rumor_core_resync_begin(const rumor_core_t *core, rumor_core_resync_t *rs, rumor_core_resync_why_t why,
                             size_t params);
/* A member's whole model x (its hash verified) made at round r; finished: that member said it
 * finished. */
rumor_core_answer_t rumor_core_resync_answer(const rumor_core_t *core, rumor_core_resync_t *rs, const float *x,
                                             uint64_t r, bool finished);
/* Whether to ask one more member (asked: members asked so far, answered or not). */
bool rumor_core_resync_more(const rumor_core_resync_t *rs, int asked);
/* Done asking. When two answers confirm each other: their mean into x (the peer's parameters
 * as the engine mixes them), adopted by the engine, and the round they vouch for taken as the
 * peer's own (at most its last but one, so that it still trains a round; at the end, the
 * peer keeps its round and is finished); true, with that round. Else nothing changes: false. */
bool rumor_core_resync_end(rumor_core_t *core, const rumor_core_resync_t *rs, float *x, uint64_t *round);

#endif
