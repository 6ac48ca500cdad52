/*
 * attack.h - what a Byzantine peer sends instead of its model, for experiments on robust
 * mixing (`rumor node --attack`, `rumor sim --byzantine I --attack SPEC`).
 *
 *   scale:K       K times its own parameters (K = -10: a flipped, inflated model)
 *   noise:S       Gaussian noise of standard deviation S, nothing of its model
 *   max           every parameter FLT_MAX (the largest finite float)
 *   round:R       its honest model, said to be of round R (R = 1000000000: a counter far ahead)
 *   ahead:K       its honest model, said to be of a round K past its own, every round (a
 *                 counter that keeps just ahead, within what one member may move a peer)
 *   relay-tamper  (rumor node) its own models are honest, but as a relay it flips a bit of
 *                 every sealed message it forwards for others
 *   relay-forge   (rumor node) its own models are honest and it forwards honestly, but every
 *                 250 ms it hands each end of a session it carries handshakes in the other
 *                 end's name: the last genuine init again, an init and an accept made up
 *
 * The peer still trains; only the models it sends (or forwards) are altered. A real swarm
 * never needs this: it exists so that `--robust`, and the end-to-end sealing of relayed
 * messages, can be measured against something.
 */
#ifndef RUMOR_ATTACK_H
#define RUMOR_ATTACK_H

#include "rng.h"
#include "base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    RUMOR_ATTACK_NONE,
    RUMOR_ATTACK_SCALE,
    RUMOR_ATTACK_NOISE,
    RUMOR_ATTACK_RELAY_TAMPER,
    RUMOR_ATTACK_MAX,
    RUMOR_ATTACK_ROUND,
    RUMOR_ATTACK_RELAY_FORGE,
    RUMOR_ATTACK_AHEAD,
} rumor_attack_kind_t;

typedef struct {
    rumor_attack_kind_t kind;
    double value; /* K, S or R */
} rumor_attack_t;

/* "none", "scale:K" (finite K), "noise:S" (S > 0), "max", "round:R" or "ahead:K" (1 <= R, K <=
 * 2^53), "relay-tamper", "relay-forge". EINVAL with a sentence in err. */
rumor_err_t rumor_attack_parse(rumor_attack_t *out, const char *spec, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* Whether a alters the models the peer sends (scale, noise, max, round, ahead). */
bool rumor_attack_poisons(const rumor_attack_t *a);
/* Whether it changes the values sent (scale, noise, max), not only their round label. */
bool rumor_attack_changes_values(const rumor_attack_t *a);
/* The round a model of `round` is said to be of (round:R's R, ahead:K's round + K; else round). */
uint64_t rumor_attack_round(const rumor_attack_t *a, uint64_t round);
/* out[0..n) = the attack on x[0..n) (noise draws from rng). */
void rumor_attack_apply(const rumor_attack_t *a, const float *x, float *out, size_t n, rumor_rng_t *rng);

/* What a Byzantine peer sends in place of each of the gossip engine's two snapshots, made
 * once per round: a snapshot's buffer is rewritten only for a later round of that snapshot,
 * when every send of the earlier one is released. */
typedef struct {
    float *buf[2];
    uint64_t round[2];
    bool set[2];
    size_t n;
} rumor_poison_t;

/* Buffers for models of n floats; RUMOR_ENOMEM. */
rumor_err_t rumor_poison_init(rumor_poison_t *p, size_t n) RUMOR_MUST_CHECK;
void rumor_poison_fini(rumor_poison_t *p);
/* The poisoned copy of snapshot `snap` (0 or 1) of `round`, whose parameters are x. */
const float *rumor_poison_get(rumor_poison_t *p, const rumor_attack_t *a, int snap, uint64_t round, const float *x,
                              rumor_rng_t *rng);

#endif
