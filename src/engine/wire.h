/*
 * wire.h - between the gossip engine and the network, with no I/O: what a model chunk is on
 * the wire (the protocol's own header, rumor_msg_model_t, with its payload) and what the engine
 * takes.
 *
 * Outbound, a round's send becomes one model (rumor_wire_model_of: the protocol's header and the
 * parameters or their encoding) that the node sends in chunks (rumor_wire_chunk) and virtual
 * mode delivers chunk by chunk the same way. Inbound, a chunk as a node receives it is validated against its codec, decoded to float32
 * where the engine mixes floats (f32, fp16, bf16, int8), passed as it is where the engine reads
 * the encoding itself (masked words, a compressed delta or keyframe of a public copy), and
 * handed to rumor_gossip_on_chunk. A node (src/peer/peer_node.c) and virtual mode (sim/virtual.c)
 * both deliver through here, so a simulated swarm runs the receiver's path of a real one.
 * Answers to a pull (has_hash) are not gossip: the caller keeps them.
 */
#ifndef RUMOR_WIRE_H
#define RUMOR_WIRE_H

#include "codec.h"
#include "gossip.h"
#include "proto.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Outbound. A model to send: the header every chunk carries, and the parameters. head holds the
 * protocol's fields (proto.h rumor_msg_model_t) that are the model's: round, layout, codec, and
 * where they apply mix (masked), has_copy, ver, lin, base, need (a public copy) and has_hash,
 * hash (an answer to a pull); rumor_wire_chunk fills chunk, chunks, off, n, w and the payload
 * of each chunk. Chunk c carries the push-sum weight w * chunk_w[c] (chunk_w NULL: w) and parameters
 * [c * chunk_params, ...): float32 from params (codec f32), or its encoding, enc[enc_off[c] ..
 * enc_off[c + 1]), each of the length the codec implies (RUMOR_EINVAL otherwise: the header
 * never disagrees with the frame after it). */
typedef struct {
    rumor_msg_model_t head;
    double w;
    const double *chunk_w;
    const float *params;
    const uint8_t *enc;
    const size_t *enc_off;
    size_t count, chunk_params;
} rumor_wire_model_t;

/* A gossip send (its snapshot, params, and where the codec has encoded it, enc and enc_off:
 * NULL for float32) as the model that goes on the wire: round, layout, weights, and the
 * header fields of masked sends (codec masked, mix id: enc then holds the masked words) and of
 * public copies (compressed gossip: the copy's version, and its delta's codec when enc holds
 * one). codec is the encoding of enc (ignored for masked and public-copy sends). */
rumor_wire_model_t rumor_wire_model_of(const rumor_gossip_send_t *s, const float *params, rumor_proto_codec_t codec,
                                       const uint8_t *enc, const size_t *enc_off);
/* A sender's codec encodings of its two snapshots, each made once per round and kept while the
 * snapshot's sends are out: chunk c of snapshot k is enc[k][off[k][c] .. off[k][c + 1]). */
typedef struct {
    rumor_codec_t codec;
    uint8_t *enc[2];
    size_t *off[2];
    uint64_t round[2];
    bool set[2];
} rumor_wire_enc_t;

/* Buffers for models of count parameters in chunks of chunk_params. RUMOR_ENOMEM. */
rumor_err_t rumor_wire_enc_init(rumor_wire_enc_t *e, const rumor_codec_t *codec, size_t count,
                                size_t chunk_params) RUMOR_MUST_CHECK;
void rumor_wire_enc_fini(rumor_wire_enc_t *e);
/* Send s's snapshot, its parameters x (poisoned or not), encoded: at once when this round of
 * it already is. RUMOR_EINVAL with err when it cannot be (a codec's range). */
rumor_err_t rumor_wire_encode_snapshot(rumor_wire_enc_t *e, const rumor_gossip_send_t *s, const float *x,
                                       char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* What send s of params (the snapshot's, or a poisoned copy of them) goes as on the wire: the
 * one decision of a node and of virtual mode alike. Masked words (s->masked: masked and
 * masked_off hold them), a piece of a public copy (s->choco, as the engine encoded it), the
 * sender's codec (a snapshot of this round, not an answer to a pull, encoded once a round into
 * enc when enc's codec is not float32; enc NULL: none), or float32 (and a snapshot the codec
 * cannot encode: err says why, and it goes as float32). *wire_bytes: its frame 2 bytes in all. */
rumor_wire_model_t rumor_wire_model_for(const rumor_gossip_send_t *s, const float *params, rumor_wire_enc_t *enc,
                                        const uint8_t *masked, const size_t *masked_off, size_t *wire_bytes,
                                        char err[RUMOR_ERR_LEN]);

/* The bytes send s's parameters take on the wire (every chunk's frame 2) when its sender's
 * codec is codec: a public copy's delta as the engine encoded it, a snapshot in the codec, and
 * float32 for the rest (keyframes, masked words, a pull's answer). What an emulated link
 * charges, in virtual mode and a node's alike. */
size_t rumor_wire_send_bytes(const rumor_gossip_send_t *s, const rumor_codec_t *codec);

/* An emulated uplink (--latency, --bandwidth), the same for a node and for virtual mode: one
 * model at a time, each taking its bytes at the link's rate, then the latency. */
typedef struct {
    uint64_t free_us;      /* when the link has sent what it was given */
} rumor_wire_link_t;

/* A model of `bytes` handed to link l at now_us, mbps megabits a second (0: no limit) and
 * latency_us: when it arrives (it leaves once the link is free). */
static inline uint64_t rumor_wire_link_send(rumor_wire_link_t *l, uint64_t now_us, uint64_t bytes, double mbps,
                                            uint64_t latency_us)
{
    const uint64_t depart = l->free_us > now_us ? l->free_us : now_us;
    const uint64_t xfer = mbps > 0 ? (uint64_t)((double)bytes * 8.0 / mbps + 0.5) : 0;
    l->free_us = depart + xfer;
    return l->free_us + latency_us;
}

/* Chunk c of m as the protocol carries it: the header, with its payload (payload,
 * payload_len) pointing into m's parameters or encoding. */
void rumor_wire_chunk(const rumor_wire_model_t *m, uint32_t c, rumor_msg_model_t *out);

/* Inbound. A receiver's scratch: a chunk decoded to floats (cap floats; a chunk of more parameters than
 * that is refused), and the chunks whose encoding did not decode. */
typedef struct {
    float *dec;
    size_t cap;
    uint64_t undecodable;
} rumor_wire_in_t;

/* Model chunk m (not a pull's answer) from peer into the engine g at time now: true when the
 * engine took it. A chunk the engine refuses is counted there (its drops); one whose payload
 * does not decode here, in in->undecodable. */
bool rumor_wire_receive(rumor_wire_in_t *in, rumor_gossip_t *g, const uint8_t peer[RUMOR_KEY_LEN],
                        const rumor_msg_model_t *m, uint64_t now);

#endif
