/* wire.c - a model chunk from the wire into the gossip engine (wire.h). */
#include "wire.h"

#include "codec.h"

bool rumor_wire_receive(rumor_wire_in_t *in, rumor_gossip_t *g, const uint8_t peer[RUMOR_KEY_LEN],
                        const rumor_msg_model_t *m, uint64_t now)
{
    rumor_gossip_chunk_t h = {.round = m->round, .layout = m->layout, .w = m->w, .chunk = m->chunk,
                              .chunks = m->chunks, .off = m->off, .n = m->n};
    const void *payload = m->payload;
    size_t len = m->payload_len;
    if (m->codec == RUMOR_CODEC_MASKED) {
        /* Words for the engine to sum as they are. */
        h.masked = true;
        h.mix = m->mix;
    } else if (m->has_copy) {
        /* A piece of a neighbour's public copy: the engine applies it to its copy. */
        h.choco = true, h.codec = (int)m->codec, h.ver = m->ver, h.lin = m->lin, h.base = m->base, h.need = m->need;
        h.wire_bytes = len;
    } else if (m->codec != RUMOR_CODEC_F32) {
        /* Decoded into floats first; a chunk of another geometry than ours is the engine's to
         * refuse. */
        if (!in->dec || m->n > in->cap ||
            rumor_codec_decode(m->codec, payload, len, (size_t)m->n, in->dec, NULL) != RUMOR_OK) {
            in->undecodable++;
            return false;
        }
        h.wire_bytes = len;
        payload = in->dec;
        len = (size_t)m->n * sizeof(float);
    }
    return rumor_gossip_on_chunk(g, peer, &h, payload, len, now);
}
