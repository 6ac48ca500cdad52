/*
 * wire.h - between the gossip engine and the network, with no I/O: what a model chunk is on
 * the wire (the protocol's own header, rumor_msg_model_t, with its payload) and what the engine
 * takes.
 *
 * Inbound, a chunk as a node receives it is validated against its codec, decoded to float32
 * where the engine mixes floats (f32, fp16, bf16, int8), passed as it is where the engine reads
 * the encoding itself (masked words, a compressed delta or keyframe of a public copy), and
 * handed to rumor_gossip_on_chunk. A node (src/peer_node.c) and virtual mode (sim/virtual.c)
 * both deliver through here, so a simulated swarm runs the receiver's path of a real one.
 * Answers to a pull (has_hash) are not gossip: the caller keeps them.
 */
#ifndef RUMOR_WIRE_H
#define RUMOR_WIRE_H

#include "gossip.h"
#include "proto.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A receiver's scratch: a chunk decoded to floats (cap floats; a chunk of more parameters than
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
