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

rumor_wire_model_t rumor_wire_model_of(const rumor_gossip_send_t *s, const float *params, rumor_proto_codec_t codec,
                                       const uint8_t *enc, const size_t *enc_off)
{
    rumor_wire_model_t m = {.head = {.round = s->round, .layout = s->layout, .codec = RUMOR_CODEC_F32}, .w = s->share,
                            .chunk_w = s->w, .params = params, .count = s->count, .chunk_params = s->chunk_params};
    if (s->masked) {
        m.head.codec = RUMOR_CODEC_MASKED, m.head.mix = s->mix;
        m.enc = enc, m.enc_off = enc_off;
    } else if (s->choco) {
        /* A delta of the public copy, or the copy whole (a keyframe). */
        m.head.has_copy = true, m.head.ver = s->ver, m.head.lin = s->lin, m.head.base = s->base, m.head.need = s->need;
        m.params = s->params;
        if (s->enc) m.head.codec = (rumor_proto_codec_t)s->codec, m.enc = s->enc, m.enc_off = s->enc_off;
    } else if (enc) {
        m.head.codec = codec, m.enc = enc, m.enc_off = enc_off;
    }
    return m;
}

void rumor_wire_chunk(const rumor_wire_model_t *m, uint32_t c, rumor_msg_model_t *out)
{
    const uint64_t off = (uint64_t)c * m->chunk_params;
    const uint64_t cnt = m->count - off < m->chunk_params ? m->count - off : m->chunk_params;
    *out = m->head;
    out->w = m->chunk_w ? m->w * m->chunk_w[c] : m->w;
    out->chunk = c, out->chunks = (uint32_t)rumor_chunks(m->count, m->chunk_params), out->off = off, out->n = cnt;
    if (m->head.codec == RUMOR_CODEC_F32) {
        out->payload = (const uint8_t *)(m->params + off), out->payload_len = (size_t)cnt * sizeof(float);
    } else {
        out->payload = m->enc + m->enc_off[c], out->payload_len = m->enc_off[c + 1] - m->enc_off[c];
    }
}
