/*
 * secmix.h - neighbourhood secure averaging (`--secure-mix`): what a sender puts in a
 * masked model chunk, and how a receiver reads the sum of such chunks.
 *
 * The idea (Bonawitz et al. 2017, made local to one neighbourhood): the peers that send to
 * a receiver R in a round, its in-neighbours S (sorted by key), stand in a ring. Each pair
 * that is adjacent in that ring derives a mask from a secret only the two of them hold; the
 * one with the smaller key adds it to what it sends, the other subtracts it. Every mask thus
 * appears once with each sign in R's sum, and R learns the weighted sum of S's models and
 * nothing about any one of them: each message on its own is the model plus two (one when
 * |S| = 2) uniformly random words per parameter that R cannot compute.
 *
 * Arithmetic is fixed point modulo 2^32, so the masks cancel exactly: a sender with share a
 * sends q = round(a x 2^20) + masks (mod 2^32) for each parameter x; the receiver adds the
 * words of all of S mod 2^32 and reads the sum as a signed 32-bit integer times 2^-20.
 * So a * x must lie in (-2048, 2048) and the sum too (weights sum to at most 1, so the sum
 * does when every x does): rumor_secmix_encode refuses a chunk holding a parameter beyond
 * that, and the resolution is 2^-20 (9.5e-7) per parameter per round (a share is within one
 * unit and a half of a x: below 2^23 units it is rounded in float32, four lanes at a time).
 *
 * Keys: each pair's secret is an X25519 shared secret of the two peers' identity keys (the
 * CURVE keys: every member already knows every other's public key), hashed with
 * both public keys. A mask for receiver R, round r and parameters [off, off + n) is the
 * ChaCha20 keystream (IETF variant, zero nonce) under BLAKE2b(pair secret; R || r || layout ||
 * boot of the smaller key || boot of the larger), from block off / 16: any chunk is computed
 * on its own.
 *
 * Sessions: the boot ids are each peer's random 64-bit id of its current run (the node's, sent
 * in its hello and spread by membership). Binding the masks to both senders' runs means no
 * mask is ever reused: not within a run (receiver, round and chunk differ), and not across
 * runs, even with the same key files and a fresh run folder, because a sender's own boot id is
 * new at every start. A wrong boot id for the other sender (stale, or forged by a third
 * member) only makes the two masks differ: the receiver's sum is then noise, never a model,
 * and the mix id (gossip.h) that carries the boot ids the sender used tells the receiver to
 * leave those chunks unmixed. A boot id of 0 means unknown: no mask is made with it.
 *
 * Non-goals: dropouts (a receiver that lacks one sender's chunk cannot unmask the others';
 * the gossip engine then leaves that chunk unmixed for the round, gossip.h), collusion of R
 * with both ring neighbours of a sender (they can recover its model: the ring keeps the cost
 * at two masks per parameter whatever |S| is), and peers that lie about their model (that is
 * robust mixing's business, which cannot see through masks).
 *
 * The receiver's side, the fixed-point arithmetic with no keys, is secmix_sum.h, which the pure
 * gossip engine uses without linking libsodium.
 *
 * Invariants: one of the crypto module's files (only it includes sodium.h); the secret key is
 * borrowed and stays in its guarded memory (crypto.h), and derived keys are wiped after use; no
 * allocation after new; encode and decode are safe on any bytes and any alignment.
 */
#ifndef RUMOR_SECMIX_H
#define RUMOR_SECMIX_H

#include "crypto.h"
#include "base.h"
#include "secmix_sum.h"

#include <stddef.h>
#include <stdint.h>

typedef struct rumor_secmix rumor_secmix_t;

/* A context for the peer with this key (the node's CURVE key, borrowed: it must outlive the
 * context; its secret bytes are read, never copied), in its run `boot` (non-zero, random per
 * run), for models of this layout. NULL with err. */
rumor_secmix_t *rumor_secmix_new(const rumor_secret_key_t *key, uint64_t boot, uint64_t layout,
                                 char err[RUMOR_ERR_LEN]);
void rumor_secmix_destroy(rumor_secmix_t **self_p);

/* The stream keys of one send, derived once (two X25519 and four BLAKE2b): pass to encode for
 * each chunk. Wiped by rumor_secmix_send_fini. */
typedef struct {
    int count;
    int sign[2];                               /* +1: add the mask, -1: subtract it */
    uint8_t key[2][RUMOR_SECMIX_KEY_LEN];
} rumor_secmix_send_t;

/* RUMOR_EINVAL when an edge is this peer itself, its boot id is unknown (0), or X25519 with
 * its key fails (a low-order point: not a real peer's key). */
rumor_err_t rumor_secmix_send_init(rumor_secmix_t *s, const rumor_secmix_edges_t *e, rumor_secmix_send_t *out,
                                   char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
void rumor_secmix_send_fini(rumor_secmix_send_t *snd);

/* out (4n bytes, little-endian uint32) = round(share * x[i] * 2^20) plus this sender's masks
 * for parameters off .. off + n - 1 (off a multiple of 16). RUMOR_EINVAL when some
 * share * x[i] is not finite or not within (-RANGE, RANGE); out is then unspecified. */
rumor_err_t rumor_secmix_encode(const rumor_secmix_send_t *snd, size_t off, const float *x, size_t n, double share,
                                uint8_t *out, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* A whole model, x[0..count) in chunks of chunk_params, each masked as rumor_secmix_encode does
 * with share * w[c] (w NULL: share): chunk c into out[out_off[c] .. out_off[c + 1]) (4 bytes a
 * parameter). RUMOR_EINVAL with err at the first chunk that cannot be. */
rumor_err_t rumor_secmix_encode_model(const rumor_secmix_send_t *snd, const float *x, size_t count, size_t chunk_params,
                                      double share, const double *w, uint8_t *out, size_t *out_off,
                                      char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* A whole send masked for the edges e, as a node and virtual mode both do: the send's keys
 * (rumor_secmix_send_init), its chunks encoded (rumor_secmix_encode_model), the keys wiped. */
rumor_err_t rumor_secmix_mask_model(rumor_secmix_t *s, const rumor_secmix_edges_t *e, const float *x, size_t count,
                                    size_t chunk_params, double share, const double *w, uint8_t *out,
                                    size_t *out_off, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

#endif
