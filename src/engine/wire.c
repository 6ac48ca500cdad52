/* wire.c - a model chunk from the wire into the gossip engine (wire.h). */
#include "wire.h"

#include <stdlib.h>

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

rumor_wire_model_t rumor_wire_model_for(const rumor_gossip_send_t *s, const float *params, rumor_wire_enc_t *enc,
                                        const uint8_t *masked, const size_t *masked_off, size_t *wire_bytes,
                                        char err[RUMOR_ERR_LEN])
{
    const size_t chunks = rumor_chunks(s->count, s->chunk_params);
    *wire_bytes = s->count * sizeof(float);
    if (s->masked) return rumor_wire_model_of(s, params, RUMOR_CODEC_MASKED, masked, masked_off);
    if (s->choco) {
        if (s->enc) *wire_bytes = s->enc_off[chunks];
        return rumor_wire_model_of(s, params, RUMOR_CODEC_F32, NULL, NULL);
    }
    if (enc && enc->codec.id != RUMOR_CODEC_F32 && !s->pulled && s->snap >= 0 && s->snap < 2 &&
        rumor_wire_encode_snapshot(enc, s, params, err) == RUMOR_OK) {
        *wire_bytes = enc->off[s->snap][chunks];
        return rumor_wire_model_of(s, params, (rumor_proto_codec_t)enc->codec.id, enc->enc[s->snap], enc->off[s->snap]);
    }
    return rumor_wire_model_of(s, params, RUMOR_CODEC_F32, NULL, NULL);
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

size_t rumor_wire_send_bytes(const rumor_gossip_send_t *s, const rumor_codec_t *codec)
{
    const size_t chunks = rumor_chunks(s->count, s->chunk_params);
    if (s->choco && s->enc) return s->enc_off[chunks];
    if (s->masked || s->choco || codec->id == RUMOR_CODEC_F32 || s->pulled || s->snap < 0 || s->snap >= 2)
        return s->count * sizeof(float);
    size_t n = 0;
    for (size_t k = 0; k < chunks; k++)
        n += rumor_codec_encoded_len(codec, k + 1 < chunks ? s->chunk_params : s->count - k * s->chunk_params);
    return n;
}

rumor_err_t rumor_wire_enc_init(rumor_wire_enc_t *e, const rumor_codec_t *codec, size_t count, size_t chunk_params)
{
    const size_t chunks = rumor_chunks(count, chunk_params);
    *e = (rumor_wire_enc_t){.codec = *codec};
    for (int k = 0; k < 2; k++) {
        e->enc[k] = malloc(chunks * rumor_codec_encoded_len(codec, chunk_params));
        e->off[k] = malloc((chunks + 1) * sizeof *e->off[k]);
        if (!e->enc[k] || !e->off[k]) {
            rumor_wire_enc_fini(e);
            return RUMOR_ENOMEM;
        }
    }
    return RUMOR_OK;
}

void rumor_wire_enc_fini(rumor_wire_enc_t *e)
{
    for (int k = 0; k < 2; k++) {
        free(e->enc[k]);
        free(e->off[k]);
        e->enc[k] = NULL, e->off[k] = NULL;
    }
}

rumor_err_t rumor_wire_encode_snapshot(rumor_wire_enc_t *e, const rumor_gossip_send_t *s, const float *x,
                                       char err[RUMOR_ERR_LEN])
{
    const int k = s->snap;
    if (e->set[k] && e->round[k] == s->round) return RUMOR_OK;
    e->set[k] = false;
    size_t at = 0, c = 0;
    e->off[k][0] = 0;
    for (size_t off = 0; off < s->count; off += s->chunk_params, c++) {
        const size_t n = s->count - off < s->chunk_params ? s->count - off : s->chunk_params;
        size_t len = 0;
        const rumor_err_t rc = rumor_codec_encode(&e->codec, x + off, n, e->enc[k] + at, &len, err);
        if (rc != RUMOR_OK) return rc;
        at += len;
        e->off[k][c + 1] = at;
    }
    e->round[k] = s->round;
    e->set[k] = true;
    return RUMOR_OK;
}
