/*
 * round.h - what a training peer's round decides, said once for every driver: the node
 * (src/peer.c, threads and sockets) and virtual mode (sim/virtual.c, a virtual clock) ask
 * these, so that a simulation answers questions about the node itself.
 *
 * A round k (counted from 0) is the local steps of phase k, then the gossip that mixes their
 * result; round k + 1 is done once that mix has landed. A peer's last round is its rounds'
 * last, or the one in which its privacy budget ran out (the trainer stops before a step that
 * would pass it): that round still gossips, as the last one (the engine closes it: it ends on
 * a mix, and neighbours stop waiting for this peer), so that the steps it did take are mixed,
 * evaluated and written down. A node used to stop before that gossip: its last steps never
 * reached its model's neighbours, and it stopped a round earlier than virtual mode (4 peers,
 * logreg, ring, --dp clip=1,noise=1 --dp-budget 1.5: round 94 against 95).
 *
 * Pure: no I/O, no clock. Non-goals: the rest of a round (sends, masks, landing an overlap),
 * which each driver still does with the gossip engine itself.
 */
#ifndef RUMOR_ROUND_H
#define RUMOR_ROUND_H

#include <stdbool.h>

/* Whether the round that phase k's steps begin is the peer's last: gossip closes on it. */
static inline bool rumor_round_last(long k, long rounds, bool budget_spent)
{
    return k + 1 >= rounds || budget_spent;
}

/* Whether a peer that has just done round `done` (1-based: its mix landed) is finished. */
static inline bool rumor_round_finished(long done, long rounds, bool budget_spent)
{
    return done >= rounds || budget_spent;
}

/* Whether the model is evaluated after round `done`: every eval_every rounds (0: never but at
 * the start and the end), and at the end. */
static inline bool rumor_round_evaluates(long done, long rounds, bool budget_spent, int eval_every)
{
    return rumor_round_finished(done, rounds, budget_spent) || (eval_every > 0 && done % eval_every == 0);
}

#endif
