/* test_proto.c - wire protocol: round trips at the limits, exact bytes, every rejection
 * reason from hand-made msgpack, truncation at every length, and seeded random mutation. */
#include "check.h"
#include "proto.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// ---- building msgpack by hand ----

/* The rejection tests write their own bytes rather than use msgpack-c, so they can produce
 * what no well-behaved encoder would. */
typedef struct {
    uint8_t b[80000];
    size_t n;
} bb_t;

static void bb_byte(bb_t *bb, uint8_t v)
{
    bb->b[bb->n++] = v;
}

static void bb_raw(bb_t *bb, const void *p, size_t len)
{
    memcpy(bb->b + bb->n, p, len);
    bb->n += len;
}

static void bb_be(bb_t *bb, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--) bb_byte(bb, (uint8_t)(v >> (8 * i)));
}

static void bb_map(bb_t *bb, unsigned n)
{
    if (n < 16) {
        bb_byte(bb, (uint8_t)(0x80 | n));
    } else {
        bb_byte(bb, 0xde);
        bb_be(bb, n, 2);
    }
}

static void bb_array(bb_t *bb, unsigned n)
{
    if (n < 16) {
        bb_byte(bb, (uint8_t)(0x90 | n));
    } else {
        bb_byte(bb, 0xdc);
        bb_be(bb, n, 2);
    }
}

static void bb_strn(bb_t *bb, const char *s, size_t len)
{
    if (len < 32) {
        bb_byte(bb, (uint8_t)(0xa0 | len));
    } else if (len < 256) {
        bb_byte(bb, 0xd9);
        bb_byte(bb, (uint8_t)len);
    } else {
        bb_byte(bb, 0xda);
        bb_be(bb, len, 2);
    }
    bb_raw(bb, s, len);
}

static void bb_str(bb_t *bb, const char *s)
{
    bb_strn(bb, s, strlen(s));
}

static void bb_uint(bb_t *bb, uint64_t v)
{
    if (v < 128) {
        bb_byte(bb, (uint8_t)v);
    } else if (v <= UINT8_MAX) {
        bb_byte(bb, 0xcc);
        bb_be(bb, v, 1);
    } else if (v <= UINT16_MAX) {
        bb_byte(bb, 0xcd);
        bb_be(bb, v, 2);
    } else if (v <= UINT32_MAX) {
        bb_byte(bb, 0xce);
        bb_be(bb, v, 4);
    } else {
        bb_byte(bb, 0xcf);
        bb_be(bb, v, 8);
    }
}

static void bb_bin(bb_t *bb, const void *p, size_t len)
{
    if (len < 256) {
        bb_byte(bb, 0xc4);
        bb_byte(bb, (uint8_t)len);
    } else {
        bb_byte(bb, 0xc5);
        bb_be(bb, len, 2);
    }
    bb_raw(bb, p, len);
}

static void bb_f64(bb_t *bb, double d)
{
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    bb_byte(bb, 0xcb);
    bb_be(bb, bits, 8);
}

/* Key and value helpers. */
static void kv_uint(bb_t *bb, const char *k, uint64_t v)
{
    bb_str(bb, k);
    bb_uint(bb, v);
}

static void kv_str(bb_t *bb, const char *k, const char *v)
{
    bb_str(bb, k);
    bb_str(bb, v);
}

static const uint8_t key32[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                  17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};

/* A peer entry's four required fields, in a map of 4 + extra (the caller writes the extra). */
static void bb_peer_more(bb_t *bb, const char *addr, uint64_t inc, uint64_t state, unsigned extra)
{
    bb_map(bb, 4 + extra);
    bb_str(bb, "k");
    bb_bin(bb, key32, 32);
    kv_str(bb, "a", addr);
    kv_uint(bb, "inc", inc);
    kv_uint(bb, "s", state);
}

static void bb_peer(bb_t *bb, const char *addr, uint64_t inc, uint64_t state) { bb_peer_more(bb, addr, inc, state, 0); }

/* Header of a message with `extra` fields after v, t and seq. */
static void bb_head(bb_t *bb, unsigned extra, const char *type, uint64_t seq)
{
    bb_map(bb, 3 + extra);
    kv_uint(bb, "v", RUMOR_PROTO_VERSION);
    kv_str(bb, "t", type);
    kv_uint(bb, "seq", seq);
}

/* A hello's start, cleared first: the header (5 + extra fields), then cert, addr, layout 0,
 * caps and inc; the caller writes the extra fields. */
static void hello_head(bb_t *bb, unsigned extra, const uint8_t *cert, size_t cert_len, const char *addr, uint64_t caps,
                       uint64_t inc)
{
    bb->n = 0;
    bb_head(bb, 6 + extra, "hello", 1);
    bb_str(bb, "cert");
    bb_bin(bb, cert, cert_len);
    kv_str(bb, "addr", addr);
    kv_uint(bb, "layout", 0);
    kv_uint(bb, "caps", caps);
    kv_uint(bb, "inc", inc);
    uint8_t proof[RUMOR_PROTO_PROOF_LEN];
    memset(proof, 0x5c, sizeof proof);
    bb_str(bb, "proof");
    bb_bin(bb, proof, sizeof proof);
}

/* A model header with one field replaced: `skip` names a field to leave out, and when
 * `w_override` is set the weight is written as those raw bytes. */
typedef struct {
    uint64_t round, codec, layout, chunk, chunks, off, n;
    double w;
} model_fields_t;

static model_fields_t model_defaults(void)
{
    model_fields_t f = {.round = 3, .codec = 0, .layout = 0xabcdef, .chunk = 0, .chunks = 1,
                        .off = 0, .n = 10, .w = 0.5};
    return f;
}

static void bb_model(bb_t *bb, const model_fields_t *f, const char *skip)
{
    const char *names[] = {"round", "w", "codec", "layout", "chunk", "chunks", "off", "n"};
    uint64_t vals[] = {f->round, 0, f->codec, f->layout, f->chunk, f->chunks, f->off, f->n};
    unsigned count = 0;
    for (size_t i = 0; i < 8; i++) count += !(skip && strcmp(skip, names[i]) == 0);
    bb_head(bb, count, "model", 1);
    for (size_t i = 0; i < 8; i++) {
        if (skip && strcmp(skip, names[i]) == 0) continue;
        bb_str(bb, names[i]);
        if (i == 1)
            bb_f64(bb, f->w);
        else
            bb_uint(bb, vals[i]);
    }
}

/* bb_model with a copy's `ver`, `lin`, `base` (and `need` when need > 0) appended. */
static void bb_model_copy(bb_t *bb, const model_fields_t *f, uint64_t need)
{
    bb_model(bb, f, NULL);
    bb->b[0] += need ? 4 : 3;
    bb_str(bb, "ver");
    bb_uint(bb, 3);
    bb_str(bb, "lin");
    bb_uint(bb, 77);
    bb_str(bb, "base");
    bb_uint(bb, 1);
    if (need) {
        bb_str(bb, "need");
        bb_uint(bb, need);
    }
}

/* bb_model with a `mix` field appended. */
static void bb_model_mix(bb_t *bb, const model_fields_t *f, uint64_t mix)
{
    bb_model(bb, f, NULL);
    bb->b[0]++;
    bb_str(bb, "mix");
    bb_uint(bb, mix);
}

/* bb_model with a `hash` field appended (after the required fields, as a sender writes it):
 * a bin of hash_len bytes, or a str of that length when as_str. */
static void bb_model_hash(bb_t *bb, const model_fields_t *f, size_t hash_len, bool as_str)
{
    static const char bytes[64] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    bb_model(bb, f, NULL);
    bb->b[0]++; /* one more field in the fixmap */
    bb_str(bb, "hash");
    if (as_str)
        bb_strn(bb, bytes, hash_len);
    else
        bb_bin(bb, bytes, hash_len);
}

// ---- decoding helpers ----

/* Decode from exact-size heap copies, so AddressSanitizer sees any read past either frame. */
static rumor_err_t decode_copy(rumor_msg_t *out, const uint8_t *f1, size_t len1, const uint8_t *pl,
                               size_t pl_len, rumor_proto_reject_t *why, uint8_t **pl_copy)
{
    uint8_t *c1 = malloc(len1 ? len1 : 1);
    uint8_t *c2 = pl ? malloc(pl_len ? pl_len : 1) : NULL;
    memcpy(c1, f1, len1);
    if (pl) memcpy(c2, pl, pl_len);
    rumor_err_t rc = rumor_proto_decode(out, c1, len1, c2, pl_len, why);
    free(c1);
    if (pl_copy)
        *pl_copy = c2;
    else
        free(c2);
    return rc;
}

static rumor_proto_reject_t reject_of(const bb_t *bb, const uint8_t *pl, size_t pl_len)
{
    rumor_msg_t m;
    rumor_proto_reject_t why = RUMOR_PROTO_REJECT_COUNT;
    rumor_err_t rc = decode_copy(&m, bb->b, bb->n, pl, pl_len, &why, NULL);
    if (rc == RUMOR_OK) return RUMOR_PROTO_REJECT_NONE;
    CHECK(rc == RUMOR_EPROTO);
    CHECK(why != RUMOR_PROTO_REJECT_NONE);
    return why;
}

#define CHECK_REJECT(bb, pl, pl_len, reason)                                                  \
    do {                                                                                      \
        rumor_proto_reject_t got_ = reject_of((bb), (pl), (pl_len));                          \
        CHECK_MSG(got_ == (reason), "got %s, want %s", rumor_proto_reject_name(got_),        \
                  rumor_proto_reject_name(reason));                                           \
    } while (0)

// ---- comparing messages ----

static bool peer_eq(const rumor_proto_peer_t *a, const rumor_proto_peer_t *b)
{
    return memcmp(a->key, b->key, sizeof a->key) == 0 && strcmp(a->addr, b->addr) == 0 &&
           a->inc == b->inc && a->state == b->state && a->cert_len == b->cert_len &&
           memcmp(a->cert, b->cert, a->cert_len) == 0 && a->boot == b->boot && a->has_proof == b->has_proof &&
           (!a->has_proof || memcmp(a->proof, b->proof, sizeof a->proof) == 0) && a->undialable == b->undialable;
}

static bool peers_eq(const rumor_proto_peer_t *a, size_t na, const rumor_proto_peer_t *b, size_t nb)
{
    if (na != nb) return false;
    for (size_t i = 0; i < na; i++)
        if (!peer_eq(&a[i], &b[i])) return false;
    return true;
}

static bool msg_eq(const rumor_msg_t *a, const rumor_msg_t *b)
{
    if (a->type != b->type || a->seq != b->seq) return false;
    switch (a->type) {
    case RUMOR_MSG_HELLO: {
        const rumor_msg_hello_t *x = &a->u.hello, *y = &b->u.hello;
        return x->cert_len == y->cert_len && memcmp(x->cert, y->cert, x->cert_len) == 0 &&
               strcmp(x->addr, y->addr) == 0 && x->layout == y->layout && x->caps == y->caps &&
               x->inc == y->inc && x->boot == y->boot && x->done == y->done && x->site == y->site &&
               memcmp(x->proof, y->proof, sizeof x->proof) == 0;
    }
    case RUMOR_MSG_PEERS:
        return peers_eq(a->u.peers.peers, a->u.peers.count, b->u.peers.peers, b->u.peers.count);
    case RUMOR_MSG_PING:
        return a->u.ping.inc == b->u.ping.inc &&
               peers_eq(a->u.ping.upd, a->u.ping.upd_count, b->u.ping.upd, b->u.ping.upd_count);
    case RUMOR_MSG_PING_REQ:
        return memcmp(a->u.ping_req.target, b->u.ping_req.target, 32) == 0 &&
               strcmp(a->u.ping_req.target_addr, b->u.ping_req.target_addr) == 0 &&
               peers_eq(a->u.ping_req.upd, a->u.ping_req.upd_count, b->u.ping_req.upd,
                        b->u.ping_req.upd_count);
    case RUMOR_MSG_ACK:
        return a->u.ack.ack == b->u.ack.ack && a->u.ack.has_target == b->u.ack.has_target &&
               strcmp(a->u.ack.seen, b->u.ack.seen) == 0 &&
               (!a->u.ack.has_target || memcmp(a->u.ack.target, b->u.ack.target, 32) == 0) &&
               peers_eq(a->u.ack.upd, a->u.ack.upd_count, b->u.ack.upd, b->u.ack.upd_count);
    case RUMOR_MSG_MODEL: {
        const rumor_msg_model_t *x = &a->u.model, *y = &b->u.model;
        return x->round == y->round && x->w == y->w && x->codec == y->codec &&
               x->layout == y->layout && x->chunk == y->chunk && x->chunks == y->chunks &&
               x->off == y->off && x->n == y->n && x->payload_len == y->payload_len &&
               x->has_hash == y->has_hash &&
               (!x->has_hash || memcmp(x->hash, y->hash, RUMOR_PROTO_HASH_LEN) == 0);
    }
    case RUMOR_MSG_BYE:
        return strcmp(a->u.bye.why, b->u.bye.why) == 0;
    case RUMOR_MSG_PULL:
        return a->u.pull.layout == b->u.pull.layout;
    case RUMOR_MSG_LAYOUT:
        return a->u.layout.layout == b->u.layout.layout && a->u.layout.text_len == b->u.layout.text_len &&
               (!a->u.layout.text_len || memcmp(a->u.layout.text, b->u.layout.text, a->u.layout.text_len) == 0);
    case RUMOR_MSG_RELAY: {
        const rumor_msg_relay_t *x = &a->u.relay, *y = &b->u.relay;
        return x->to == y->to && memcmp(x->peer, y->peer, 32) == 0 && x->kind == y->kind &&
               (x->kind == RUMOR_RELAY_DATA ? x->ctr == y->ctr && x->payload_len == y->payload_len
                                            : memcmp(x->eph, y->eph, 32) == 0 &&
                                                  memcmp(x->proof, y->proof, sizeof x->proof) == 0 && x->sent == y->sent);
    }
    }
    return false;
}

// ---- sample messages ----

static void make_peer(rumor_proto_peer_t *p, unsigned i, bool long_addr)
{
    memset(p, 0, sizeof *p);
    for (int j = 0; j < 32; j++) p->key[j] = (uint8_t)(i * 31 + (unsigned)j);
    if (long_addr) {
        /* The longest form a valid address takes: a full IPv6 literal with an embedded
         * IPv4 and a five-digit port (an IP literal never reaches the 255-byte cap). */
        snprintf(p->addr, sizeof p->addr,
                 "tcp://[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.%u]:65535", i % 256);
    } else {
        snprintf(p->addr, sizeof p->addr, "tcp://10.0.%u.%u:%u", i / 256, i % 256, 7470 + i);
    }
    p->inc = i == 0 ? UINT32_MAX : i;
    p->state = (rumor_proto_state_t)(i % 4);
    /* Version 2's optional keys: a certificate on two entries in three (some of the largest
     * size), a boot id on every other one (some at the top of the range). */
    if (i % 3 != 2) {
        p->cert_len = i % 3 == 0 ? RUMOR_PROTO_CERT_MAX : 1 + i;
        for (size_t j = 0; j < p->cert_len; j++) p->cert[j] = (uint8_t)(i + 3 * j);
    }
    if (i % 2 == 0) p->boot = i % 4 == 0 ? UINT64_MAX - i : 1 + i;
    /* Version 4's: a signed record's proof on two entries in three. */
    p->has_proof = i % 3 != 1;
    for (int j = 0; p->has_proof && j < RUMOR_PROTO_PROOF_LEN; j++) p->proof[j] = (uint8_t)(i ^ (unsigned)(5 * j));
    /* Version 5's: undialable on every fifth. */
    p->undialable = i % 5 == 3;
}

static uint8_t payload_buf[RUMOR_PROTO_MAX_PAYLOAD];

/* A stand-in for a model's BLAKE2b-256: proto carries the 32 bytes without looking at them. */
static void sample_hash(uint8_t hash[RUMOR_PROTO_HASH_LEN])
{
    for (int i = 0; i < RUMOR_PROTO_HASH_LEN; i++) hash[i] = (uint8_t)(0xf0 - 7 * i);
}

/* Encode then decode (with payload), expect equality; returns the encoded length. */
static size_t roundtrip(const rumor_msg_t *m, const uint8_t *pl, size_t pl_len)
{
    static uint8_t buf[RUMOR_PROTO_MAX_HEADER];
    size_t len = 0;
    rumor_msg_t back;
    rumor_proto_reject_t why = RUMOR_PROTO_REJECT_COUNT;
    rumor_err_t rc = rumor_proto_encode(m, buf, sizeof buf, &len);
    CHECK_MSG(rc == RUMOR_OK, "encode %s: %s", rumor_proto_type_name(m->type), rumor_strerror(rc));
    if (rc != RUMOR_OK) return 0;
    rc = rumor_proto_decode(&back, buf, len, pl, pl_len, &why);
    CHECK_MSG(rc == RUMOR_OK, "decode %s: %s", rumor_proto_type_name(m->type),
              rumor_proto_reject_name(why));
    CHECK(why == RUMOR_PROTO_REJECT_NONE);
    CHECK_MSG(msg_eq(m, &back), "round trip of %s", rumor_proto_type_name(m->type));
    if (m->type == RUMOR_MSG_MODEL) CHECK(back.u.model.payload == pl); /* zero copy */
    /* Encoding is canonical: the decoded struct encodes to the same bytes. */
    uint8_t again[RUMOR_PROTO_MAX_HEADER];
    size_t len2 = 0;
    CHECK_RC(rumor_proto_encode(&back, again, sizeof again, &len2));
    CHECK(len2 == len && memcmp(again, buf, len) == 0);
    return len;
}

static void sample_hello(rumor_msg_t *m, size_t cert_len)
{
    memset(m, 0, sizeof *m);
    m->type = RUMOR_MSG_HELLO;
    m->seq = 1;
    for (size_t i = 0; i < cert_len && i < RUMOR_PROTO_CERT_MAX; i++)
        m->u.hello.cert[i] = (uint8_t)(i * 7 + 1);
    m->u.hello.cert_len = cert_len;
    strcpy(m->u.hello.addr, "tcp://127.0.0.1:7470");
    m->u.hello.layout = UINT64_MAX;
    m->u.hello.caps = 0x5;
    m->u.hello.inc = 1700000000u;
    m->u.hello.boot = 0xfedcba9876543210ull;
    for (int j = 0; j < RUMOR_PROTO_PROOF_LEN; j++) m->u.hello.proof[j] = (uint8_t)(0xa0 + j);
}

static void sample_model(rumor_msg_t *m, rumor_proto_codec_t codec, uint64_t n, size_t len)
{
    memset(m, 0, sizeof *m);
    m->type = RUMOR_MSG_MODEL;
    m->seq = 99;
    m->u.model.round = UINT64_MAX;
    m->u.model.w = 0.25;
    m->u.model.codec = codec;
    m->u.model.layout = 0x0123456789abcdefull;
    m->u.model.chunk = 2;
    m->u.model.chunks = 3;
    m->u.model.off = 1000;
    m->u.model.n = n;
    if (rumor_codec_is_delta(codec)) { /* a delta of a public copy: always with its version */
        m->u.model.has_copy = true;
        m->u.model.ver = 41;
        m->u.model.lin = UINT64_MAX;
        m->u.model.base = 0x5555;
        m->u.model.need = true;
    }
    m->u.model.payload = payload_buf;
    m->u.model.payload_len = len;
}

// ---- tests ----

static void test_names(void)
{
    for (int r = 0; r < RUMOR_PROTO_REJECT_COUNT; r++) {
        const char *n = rumor_proto_reject_name((rumor_proto_reject_t)r);
        CHECK(n && n[0] && strcmp(n, "unknown") != 0);
        for (int s = 0; s < r; s++)
            CHECK(strcmp(n, rumor_proto_reject_name((rumor_proto_reject_t)s)) != 0);
    }
    CHECK(strcmp(rumor_proto_reject_name(RUMOR_PROTO_REJECT_COUNT), "unknown") == 0);
    CHECK(strcmp(rumor_proto_reject_name(RUMOR_PROTO_REJECT_VERSION), "bad-version") == 0);
    CHECK(strcmp(rumor_proto_reject_name(RUMOR_PROTO_REJECT_TRAILING), "trailing-bytes") == 0);
    CHECK(strcmp(rumor_proto_type_name(RUMOR_MSG_PING_REQ), "ping-req") == 0);
    CHECK(strcmp(rumor_proto_type_name(RUMOR_MSG_PULL), "pull") == 0);
    CHECK(strcmp(rumor_proto_type_name(RUMOR_MSG_RELAY), "relay") == 0);
    CHECK(strcmp(rumor_proto_type_name(RUMOR_MSG_LAYOUT), "layout") == 0);
    CHECK(RUMOR_MSG_PULL == RUMOR_MSG_BYE + 1 && RUMOR_MSG_RELAY == RUMOR_MSG_PULL + 1 &&
          RUMOR_MSG_LAYOUT == RUMOR_MSG_RELAY + 1 && RUMOR_MSG_LAST == RUMOR_MSG_LAYOUT);
    for (int t = RUMOR_MSG_HELLO; t <= RUMOR_MSG_LAST; t++)
        CHECK(strcmp(rumor_proto_type_name((rumor_msg_type_t)t), "?") != 0);
    CHECK(strcmp(rumor_proto_type_name((rumor_msg_type_t)(RUMOR_MSG_LAST + 1)), "?") == 0);
    CHECK(strcmp(rumor_proto_type_name((rumor_msg_type_t)0), "?") == 0);
    CHECK(strcmp(rumor_proto_type_name((rumor_msg_type_t)99), "?") == 0);
}

static void test_known_answer(void)
{
    /* {"v": 3, "t": "bye", "seq": 7} */
    static const uint8_t bye7[] = {0x83, 0xa1, 'v', RUMOR_PROTO_VERSION, 0xa1, 't', 0xa3, 'b', 'y', 'e',
                                   0xa3, 's', 'e', 'q', 0x07};
    rumor_msg_t m = {.type = RUMOR_MSG_BYE, .seq = 7};
    uint8_t buf[64];
    size_t len = 0;
    CHECK_RC(rumor_proto_encode(&m, buf, sizeof buf, &len));
    CHECK(len == sizeof bye7 && memcmp(buf, bye7, sizeof bye7) == 0);

    rumor_msg_t back;
    rumor_proto_reject_t why;
    CHECK_RC(rumor_proto_decode(&back, bye7, sizeof bye7, NULL, 0, &why));
    CHECK(back.type == RUMOR_MSG_BYE && back.seq == 7);

    /* {"v": 3, "t": "ack", "seq": 300, "ack": 65536}: uint16 and uint32 forms. */
    static const uint8_t ack[] = {0x84, 0xa1, 'v', RUMOR_PROTO_VERSION, 0xa1, 't', 0xa3, 'a', 'c', 'k', 0xa3,
                                  's', 'e', 'q', 0xcd, 0x01, 0x2c, 0xa3, 'a', 'c', 'k', 0xce,
                                  0x00, 0x01, 0x00, 0x00};
    rumor_msg_t a = {.type = RUMOR_MSG_ACK, .seq = 300};
    a.u.ack.ack = 65536;
    CHECK_RC(rumor_proto_encode(&a, buf, sizeof buf, &len));
    CHECK(len == sizeof ack && memcmp(buf, ack, sizeof ack) == 0);

    /* The same fields in another order, with signed-format non-negative numbers, and an
     * unknown key: still the same message. */
    bb_t *bb = calloc(1, sizeof *bb);
    bb_map(bb, 5);
    bb_str(bb, "ack");
    bb_byte(bb, 0xd2);
    bb_be(bb, 65536, 4);
    kv_str(bb, "t", "ack");
    bb_str(bb, "seq");
    bb_byte(bb, 0xd1);
    bb_be(bb, 300, 2);
    kv_uint(bb, "future", 1);
    kv_uint(bb, "v", RUMOR_PROTO_VERSION);
    CHECK_RC(rumor_proto_decode(&back, bb->b, bb->n, NULL, 0, &why));
    CHECK(msg_eq(&back, &a));

    /* {"v": 3, "t": "pull", "seq": 7, "layout": 0xabcdef} */
    static const uint8_t pull[] = {0x84, 0xa1, 'v', RUMOR_PROTO_VERSION, 0xa1, 't', 0xa4, 'p', 'u', 'l', 'l',
                                   0xa3, 's', 'e', 'q', 0x07, 0xa6, 'l', 'a', 'y', 'o', 'u', 't',
                                   0xce, 0x00, 0xab, 0xcd, 0xef};
    rumor_msg_t p = {.type = RUMOR_MSG_PULL, .seq = 7};
    p.u.pull.layout = 0xabcdef;
    CHECK_RC(rumor_proto_encode(&p, buf, sizeof buf, &len));
    CHECK(len == sizeof pull && memcmp(buf, pull, sizeof pull) == 0);
    CHECK_RC(rumor_proto_decode(&back, pull, sizeof pull, NULL, 0, &why));
    CHECK(back.type == RUMOR_MSG_PULL && back.seq == 7 && back.u.pull.layout == 0xabcdef);

    /* A model's hash comes last, after n: the same bytes as without it, one more entry in
     * the map, then "hash": bin 8 of 32 bytes. */
    rumor_msg_t *mh = calloc(1, sizeof *mh);
    uint8_t plain[128], hashed[128];
    size_t plain_len = 0, hashed_len = 0;
    mh->type = RUMOR_MSG_MODEL;
    mh->seq = 7;
    mh->u.model.w = 1.0;
    mh->u.model.chunks = 1;
    mh->u.model.n = 1;
    mh->u.model.payload_len = 4;
    CHECK_RC(rumor_proto_encode(mh, plain, sizeof plain, &plain_len));
    mh->u.model.has_hash = true;
    sample_hash(mh->u.model.hash);
    CHECK_RC(rumor_proto_encode(mh, hashed, sizeof hashed, &hashed_len));
    static const uint8_t hash_key[] = {0xa4, 'h', 'a', 's', 'h', 0xc4, 0x20};
    CHECK(plain[0] == 0x8b && hashed[0] == 0x8c);
    CHECK(hashed_len == plain_len + sizeof hash_key + RUMOR_PROTO_HASH_LEN);
    CHECK(memcmp(hashed + 1, plain + 1, plain_len - 1) == 0);
    CHECK(memcmp(hashed + plain_len, hash_key, sizeof hash_key) == 0);
    CHECK(memcmp(hashed + plain_len + sizeof hash_key, mh->u.model.hash, RUMOR_PROTO_HASH_LEN) ==
          0);
    free(mh);
    free(bb);
}

static void test_roundtrip(void)
{
    rumor_msg_t *m = calloc(1, sizeof *m);

    /* hello: smallest and largest certificate. */
    sample_hello(m, 1);
    roundtrip(m, NULL, 0);
    sample_hello(m, RUMOR_PROTO_CERT_MAX);
    strcpy(m->u.hello.addr, "tcp://[::1]:1");
    roundtrip(m, NULL, 0);
    m->u.hello.done = 211; /* a finished sender (optional) */
    roundtrip(m, NULL, 0);
    m->u.hello.done = UINT64_MAX;
    roundtrip(m, NULL, 0);
    m->u.hello.site = 0x5a17e; /* behind NAT (optional) */
    roundtrip(m, NULL, 0);
    { /* canonical order: done, then site, as PROTOCOL.md lists them */
        uint8_t hb[RUMOR_PROTO_MAX_HEADER];
        size_t hl = 0;
        CHECK_RC(rumor_proto_encode(m, hb, sizeof hb, &hl));
        size_t d = hl, st = hl;
        for (size_t i = 0; i + 5 <= hl; i++) {
            if (memcmp(hb + i, "\xa4" "done", 5) == 0) d = i;
            if (memcmp(hb + i, "\xa4" "site", 5) == 0) st = i;
        }
        CHECK(d < st && st < hl);
    }

    /* peers: empty, and the maximum with the longest addresses. */
    memset(m, 0, sizeof *m);
    m->type = RUMOR_MSG_PEERS;
    m->seq = UINT32_MAX;
    roundtrip(m, NULL, 0);
    m->u.peers.count = RUMOR_PROTO_MAX_PEERS;
    for (unsigned i = 0; i < RUMOR_PROTO_MAX_PEERS; i++) make_peer(&m->u.peers.peers[i], i, true);
    size_t big = roundtrip(m, NULL, 0);
    CHECK(big > 4000 && big < RUMOR_PROTO_MAX_HEADER);
    for (unsigned i = 0; i < RUMOR_PROTO_MAX_PEERS; i++) make_peer(&m->u.peers.peers[i], i, false);
    roundtrip(m, NULL, 0);

    /* ping without and with the most updates. */
    memset(m, 0, sizeof *m);
    m->type = RUMOR_MSG_PING;
    m->seq = 0;
    m->u.ping.inc = UINT32_MAX;
    roundtrip(m, NULL, 0);
    m->u.ping.upd_count = RUMOR_PROTO_MAX_UPD;
    for (unsigned i = 0; i < RUMOR_PROTO_MAX_UPD; i++) make_peer(&m->u.ping.upd[i], i, i % 2);
    roundtrip(m, NULL, 0);

    memset(m, 0, sizeof *m);
    m->type = RUMOR_MSG_PING_REQ;
    m->seq = 5;
    memcpy(m->u.ping_req.target, key32, 32);
    strcpy(m->u.ping_req.target_addr, "tcp://[2001:db8::7]:7470");
    roundtrip(m, NULL, 0);
    m->u.ping_req.upd_count = 1;
    make_peer(&m->u.ping_req.upd[0], 3, false);
    roundtrip(m, NULL, 0);

    memset(m, 0, sizeof *m);
    m->type = RUMOR_MSG_ACK;
    m->seq = 6;
    m->u.ack.ack = 5;
    roundtrip(m, NULL, 0);
    m->u.ack.has_target = true;
    memcpy(m->u.ack.target, key32, 32);
    m->u.ack.upd_count = RUMOR_PROTO_MAX_UPD;
    for (unsigned i = 0; i < RUMOR_PROTO_MAX_UPD; i++) make_peer(&m->u.ack.upd[i], i + 100, false);
    roundtrip(m, NULL, 0);
    strcpy(m->u.ack.seen, "203.0.113.7"); /* where the probe came from (optional) */
    roundtrip(m, NULL, 0);
    strcpy(m->u.ack.seen, "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255"); /* the longest */
    roundtrip(m, NULL, 0);
    size_t seen_len = 0;
    uint8_t seen_buf[512];
    strcpy(m->u.ack.seen, "10.0.0.1 "); /* not an address's alphabet: not encoded */
    m->u.ack.upd_count = 0;
    CHECK(rumor_proto_encode(m, seen_buf, sizeof seen_buf, &seen_len) == RUMOR_EINVAL);

    /* model: every codec, smallest and largest payload. */
    size_t len = 0;
    for (int c = RUMOR_CODEC_F32; c <= RUMOR_CODEC_LAST; c++) {
        CHECK_RC(rumor_proto_payload_len((rumor_proto_codec_t)c, 1, 1, &len));
        sample_model(m, (rumor_proto_codec_t)c, 1, len);
        if (c == RUMOR_CODEC_MASKED) m->u.model.mix = 0xfedcba9876543210u;
        roundtrip(m, payload_buf, len);
    }
    /* A keyframe: float32 with its copy's version, with and without need. */
    sample_model(m, RUMOR_CODEC_F32, 2, 8);
    m->u.model.has_copy = true;
    m->u.model.ver = 1, m->u.model.lin = 2, m->u.model.base = 3;
    roundtrip(m, payload_buf, 8);
    m->u.model.need = true;
    roundtrip(m, payload_buf, 8);
    m->u.model.has_hash = true; /* a copy to adopt is not a public copy */
    CHECK(rumor_proto_encode(m, payload_buf + 64, 4096, &len) == RUMOR_EINVAL);
    /* A masked chunk is gossip, never a copy to adopt: no hash with it. */
    sample_model(m, RUMOR_CODEC_MASKED, 2, 8);
    m->u.model.has_hash = true;
    {
        uint8_t hb[RUMOR_PROTO_MAX_HEADER];
        CHECK(rumor_proto_encode(m, hb, sizeof hb, &len) == RUMOR_EINVAL);
    }
    sample_model(m, RUMOR_CODEC_F32, RUMOR_PROTO_MAX_PAYLOAD / 4, RUMOR_PROTO_MAX_PAYLOAD);
    roundtrip(m, payload_buf, RUMOR_PROTO_MAX_PAYLOAD);
    sample_model(m, RUMOR_CODEC_TOPK, 1u << 30, RUMOR_PROTO_MAX_PAYLOAD);
    roundtrip(m, payload_buf, RUMOR_PROTO_MAX_PAYLOAD);
    sample_model(m, RUMOR_CODEC_INT8, 7, 11);
    m->u.model.w = RUMOR_PROTO_MAX_WEIGHT;
    m->u.model.chunks = RUMOR_PROTO_MAX_CHUNKS;
    m->u.model.chunk = RUMOR_PROTO_MAX_CHUNKS - 1;
    m->u.model.off = RUMOR_PROTO_MAX_PARAMS - 7;
    roundtrip(m, payload_buf, 11);
    m->u.model.w = 5e-324; /* smallest positive double */
    m->u.model.off = 0;
    m->u.model.chunks = 1;
    m->u.model.chunk = 0;
    m->u.model.round = 0;
    roundtrip(m, payload_buf, 11);
    /* model with a hash (an answer to pull), and the same chunk without one. */
    sample_model(m, RUMOR_CODEC_F32, 16, 64);
    m->u.model.has_hash = true;
    sample_hash(m->u.model.hash);
    roundtrip(m, payload_buf, 64);
    memset(m->u.model.hash, 0, sizeof m->u.model.hash); /* all zeros is 32 bytes like any */
    roundtrip(m, payload_buf, 64);
    m->u.model.has_hash = false;
    roundtrip(m, payload_buf, 64);

    /* pull: the extremes of a layout id. */
    memset(m, 0, sizeof *m);
    m->type = RUMOR_MSG_PULL;
    m->seq = 8;
    roundtrip(m, NULL, 0);
    m->u.pull.layout = UINT64_MAX;
    roundtrip(m, NULL, 0);

    memset(m, 0, sizeof *m);
    m->type = RUMOR_MSG_BYE;
    roundtrip(m, NULL, 0);
    strcpy(m->u.bye.why, "certificate expired");
    roundtrip(m, NULL, 0);
    for (int i = 0; i < RUMOR_PROTO_WHY_MAX; i++) m->u.bye.why[i] = (char)(0x20 + i % 95);
    m->u.bye.why[RUMOR_PROTO_WHY_MAX] = '\0';
    roundtrip(m, NULL, 0);
    free(m);
}

/* layout: the sender's layout text in frame 2, bytes checked; the id is the receiver's to
 * check against the text it parses. */
static void test_layout_message(void)
{
    static const char text[] = "rumor-layout-2\nfc1.weight:64,784\nfc1.bias:64\n";
    static uint8_t buf[RUMOR_PROTO_MAX_HEADER];
    rumor_msg_t m = {.type = RUMOR_MSG_LAYOUT, .seq = 5}, back;
    m.u.layout.layout = 0x0123456789abcdefull;
    m.u.layout.text = (const uint8_t *)text;
    m.u.layout.text_len = sizeof text - 1;
    roundtrip(&m, (const uint8_t *)text, sizeof text - 1);
    size_t len = 0;
    rumor_proto_reject_t why;
    CHECK_RC(rumor_proto_encode(&m, buf, sizeof buf, &len));
    CHECK(rumor_proto_decode(&back, buf, len, (const uint8_t *)text, sizeof text - 1, &why) == RUMOR_OK &&
          back.u.layout.text == (const uint8_t *)text); /* (zero copy) */
    /* No text, a byte that is not printable ASCII or a newline, a text over the cap. */
    CHECK(rumor_proto_decode(&back, buf, len, NULL, 0, &why) == RUMOR_EPROTO && why == RUMOR_PROTO_REJECT_PAYLOAD);
    static uint8_t bad[64];
    memcpy(bad, text, sizeof text - 1);
    bad[20] = 0xc3;
    CHECK(rumor_proto_decode(&back, buf, len, bad, sizeof text - 1, &why) == RUMOR_EPROTO &&
          why == RUMOR_PROTO_REJECT_PAYLOAD);
    bad[20] = '\t';
    CHECK(rumor_proto_decode(&back, buf, len, bad, sizeof text - 1, &why) == RUMOR_EPROTO &&
          why == RUMOR_PROTO_REJECT_PAYLOAD);
    uint8_t *big = malloc(RUMOR_PROTO_MAX_LAYOUT_TEXT + 1);
    memset(big, 'a', RUMOR_PROTO_MAX_LAYOUT_TEXT + 1);
    CHECK(rumor_proto_decode(&back, buf, len, big, RUMOR_PROTO_MAX_LAYOUT_TEXT, &why) == RUMOR_OK);
    CHECK(rumor_proto_decode(&back, buf, len, big, RUMOR_PROTO_MAX_LAYOUT_TEXT + 1, &why) == RUMOR_EPROTO &&
          why == RUMOR_PROTO_REJECT_PAYLOAD);
    free(big);
    /* Layout 0 (none) is refused both ways. */
    m.u.layout.layout = 0;
    CHECK(rumor_proto_encode(&m, buf, sizeof buf, &len) == RUMOR_EINVAL);
    /* {"v": 3, "t": "layout", "seq": 5, "layout": 0} */
    static const uint8_t zero[] = {0x84, 0xa1, 'v', RUMOR_PROTO_VERSION, 0xa1, 't', 0xa6, 'l', 'a', 'y', 'o', 'u',
                                   't', 0xa3, 's', 'e', 'q', 0x05, 0xa6, 'l', 'a', 'y', 'o', 'u', 't', 0x00};
    CHECK(rumor_proto_decode(&back, zero, sizeof zero, (const uint8_t *)text, sizeof text - 1, &why) == RUMOR_EPROTO &&
          why == RUMOR_PROTO_REJECT_VALUE);
}

static void test_payload_len(void)
{
    size_t len = 0;
    CHECK(rumor_proto_payload_len(RUMOR_CODEC_F32, 10, 0, &len) == RUMOR_OK && len == 40);
    CHECK(rumor_proto_payload_len(RUMOR_CODEC_F16, 10, 0, &len) == RUMOR_OK && len == 20);
    CHECK(rumor_proto_payload_len(RUMOR_CODEC_BF16, 10, 0, &len) == RUMOR_OK && len == 20);
    CHECK(rumor_proto_payload_len(RUMOR_CODEC_INT8, 10, 0, &len) == RUMOR_OK && len == 14);
    CHECK(rumor_proto_payload_len(RUMOR_CODEC_TOPK, 10, 3, &len) == RUMOR_OK && len == 24);
    CHECK(rumor_proto_payload_len(RUMOR_CODEC_INT4, 10, 0, &len) == RUMOR_OK && len == 7);
    CHECK(rumor_proto_payload_len(RUMOR_CODEC_INT4, 129, 0, &len) == RUMOR_OK && len == 6 + 65);
    CHECK(rumor_proto_payload_len(RUMOR_CODEC_TOPK, 10, 11, &len) == RUMOR_EINVAL);
    CHECK(rumor_proto_payload_len(RUMOR_CODEC_TOPK, 10, 0, &len) == RUMOR_EINVAL);
    CHECK(rumor_proto_payload_len(RUMOR_CODEC_F32, 0, 0, &len) == RUMOR_EINVAL);
    CHECK(rumor_proto_payload_len(RUMOR_CODEC_F32, RUMOR_PROTO_MAX_PAYLOAD / 4 + 1, 0, &len) ==
          RUMOR_EINVAL);
    CHECK(rumor_proto_payload_len(RUMOR_CODEC_F32, UINT64_MAX, 0, &len) == RUMOR_EINVAL);
    CHECK(rumor_proto_payload_len((rumor_proto_codec_t)(RUMOR_CODEC_LAST + 1), 1, 1, &len) == RUMOR_EINVAL);
}

static void test_addresses(void)
{
    const char *good[] = {
        "tcp://127.0.0.1:7470", "tcp://0.0.0.0:1", "tcp://255.255.255.255:65535",
        "tcp://[::1]:7470", "tcp://[::]:80", "tcp://[2001:db8::1:2]:443",
        "tcp://[::ffff:10.0.0.1]:9", "tcp://[FE80::1]:1000",
    };
    const char *bad[] = {
        "", "tcp://", "tcp://:7470", "tcp://127.0.0.1", "tcp://127.0.0.1:", "tcp://127.0.0.1:0",
        "tcp://127.0.0.1:65536", "tcp://127.0.0.1:07470", "tcp://127.0.0.1:74a0",
        "tcp://127.0.0.1:123456", "tcp://256.0.0.1:1", "tcp://1.2.3:1", "tcp://1.2.3.4.5:1",
        "tcp://01.2.3.4:1", "tcp://1..3.4:1", "tcp://localhost:7470", "tcp://*:7470",
        "udp://1.2.3.4:1", "TCP://1.2.3.4:1", "tcp://::1:7470", "tcp://[::1:7470",
        "tcp://[::1]]:7470", "tcp://[fe80::1%eth0]:1", "tcp://[]:1", "tcp://[:::]:1",
        "tcp://[1.2.3.4]:1", "tcp://1.2.3.4 :1", "tcp:// 1.2.3.4:1", "tcp://1.2.3.4:+1",
        "tcp://1.2.3.4:-1", "rumor://abc@1.2.3.4:1",
    };
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(good); i++)
        CHECK_MSG(rumor_proto_addr_is_valid(good[i], strlen(good[i])), "%s", good[i]);
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(bad); i++)
        CHECK_MSG(!rumor_proto_addr_is_valid(bad[i], strlen(bad[i])), "%s", bad[i]);
    /* An embedded NUL ends nothing: the length is what counts. */
    CHECK(!rumor_proto_addr_is_valid("tcp://1.2.3.4:1\0", 16));
    CHECK(!rumor_proto_addr_is_valid("tcp://1.2\0.3.4:1", 16));
    CHECK(!rumor_proto_addr_is_valid(NULL, 0));
}

static void test_encode_refuses(void)
{
    rumor_msg_t *m = calloc(1, sizeof *m);
    uint8_t buf[RUMOR_PROTO_MAX_HEADER];
    size_t len = 0;

    m->type = (rumor_msg_type_t)0;
    CHECK(rumor_proto_encode(m, buf, sizeof buf, &len) == RUMOR_EINVAL);
    m->type = (rumor_msg_type_t)(RUMOR_MSG_LAST + 1);
    CHECK(rumor_proto_encode(m, buf, sizeof buf, &len) == RUMOR_EINVAL);

    sample_hello(m, 0);
    CHECK(rumor_proto_encode(m, buf, sizeof buf, &len) == RUMOR_EINVAL);
    sample_hello(m, RUMOR_PROTO_CERT_MAX + 1);
    CHECK(rumor_proto_encode(m, buf, sizeof buf, &len) == RUMOR_EINVAL);
    sample_hello(m, 10);
    strcpy(m->u.hello.addr, "tcp://localhost:1");
    CHECK(rumor_proto_encode(m, buf, sizeof buf, &len) == RUMOR_EINVAL);
    memset(m->u.hello.addr, 'x', sizeof m->u.hello.addr); /* not terminated */
    CHECK(rumor_proto_encode(m, buf, sizeof buf, &len) == RUMOR_EINVAL);
    sample_hello(m, 10);
    m->u.hello.boot = 0; /* required, nonzero */
    CHECK(rumor_proto_encode(m, buf, sizeof buf, &len) == RUMOR_EINVAL);

    memset(m, 0, sizeof *m);
    m->type = RUMOR_MSG_PEERS;
    m->u.peers.count = RUMOR_PROTO_MAX_PEERS + 1;
    for (unsigned i = 0; i < RUMOR_PROTO_MAX_PEERS; i++) make_peer(&m->u.peers.peers[i], i, false);
    CHECK(rumor_proto_encode(m, buf, sizeof buf, &len) == RUMOR_EINVAL);
    m->u.peers.count = 2;
    m->u.peers.peers[1].state = (rumor_proto_state_t)4;
    CHECK(rumor_proto_encode(m, buf, sizeof buf, &len) == RUMOR_EINVAL);
    make_peer(&m->u.peers.peers[1], 1, false);
    CHECK_RC(rumor_proto_encode(m, buf, sizeof buf, &len));
    m->u.peers.peers[1].cert_len = RUMOR_PROTO_CERT_MAX + 1;
    CHECK(rumor_proto_encode(m, buf, sizeof buf, &len) == RUMOR_EINVAL);

    memset(m, 0, sizeof *m);
    m->type = RUMOR_MSG_PING;
    m->u.ping.upd_count = RUMOR_PROTO_MAX_UPD + 1;
    for (unsigned i = 0; i <= RUMOR_PROTO_MAX_UPD; i++) make_peer(&m->u.ping.upd[i % 16], i, false);
    CHECK(rumor_proto_encode(m, buf, sizeof buf, &len) == RUMOR_EINVAL);

    const double bad_w[] = {NAN, INFINITY, -INFINITY, -1.0, 0.0, -0.0,
                            RUMOR_PROTO_MAX_WEIGHT * (1 + 1e-15)};
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(bad_w); i++) {
        sample_model(m, RUMOR_CODEC_F32, 4, 16);
        m->u.model.w = bad_w[i];
        CHECK(rumor_proto_encode(m, buf, sizeof buf, &len) == RUMOR_EINVAL);
    }
    sample_model(m, RUMOR_CODEC_F32, 4, 15);
    CHECK(rumor_proto_encode(m, buf, sizeof buf, &len) == RUMOR_EINVAL);
    sample_model(m, RUMOR_CODEC_F32, 4, 16);
    m->u.model.chunk = m->u.model.chunks;
    CHECK(rumor_proto_encode(m, buf, sizeof buf, &len) == RUMOR_EINVAL);
    sample_model(m, RUMOR_CODEC_F32, 4, 16);
    m->u.model.off = RUMOR_PROTO_MAX_PARAMS - 3;
    CHECK(rumor_proto_encode(m, buf, sizeof buf, &len) == RUMOR_EINVAL);
    sample_model(m, (rumor_proto_codec_t)(RUMOR_CODEC_LAST + 1), 4, 16);
    CHECK(rumor_proto_encode(m, buf, sizeof buf, &len) == RUMOR_EINVAL);

    memset(m, 0, sizeof *m);
    m->type = RUMOR_MSG_BYE;
    strcpy(m->u.bye.why, "line\nbreak");
    CHECK(rumor_proto_encode(m, buf, sizeof buf, &len) == RUMOR_EINVAL);
    memset(m->u.bye.why, 'x', sizeof m->u.bye.why); /* not terminated */
    CHECK(rumor_proto_encode(m, buf, sizeof buf, &len) == RUMOR_EINVAL);

    /* Too small a buffer, at every size short of the encoding. */
    sample_hello(m, 100);
    size_t full = 0;
    CHECK_RC(rumor_proto_encode(m, buf, sizeof buf, &full));
    int refused = 0;
    for (size_t cap = 0; cap < full; cap++) {
        uint8_t *small = malloc(cap ? cap : 1);
        refused += rumor_proto_encode(m, cap ? small : NULL, cap, &len) == RUMOR_EINVAL;
        free(small);
    }
    CHECK(refused == (int)full);
    uint8_t *exact = malloc(full);
    CHECK_RC(rumor_proto_encode(m, exact, full, &len));
    CHECK(len == full);
    free(exact);
    free(m);
}

static void test_reject_structure(void)
{
    bb_t *bb = calloc(1, sizeof *bb);
    rumor_msg_t m;
    rumor_proto_reject_t why;

    /* Empty frame, reserved byte, root not a map. */
    bb->n = 0;
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_MALFORMED);
    bb_byte(bb, 0xc1);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_MALFORMED);
    bb->n = 0;
    bb_array(bb, 0);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_WRONG_TYPE);
    bb->n = 0;
    bb_uint(bb, 1);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_WRONG_TYPE);

    /* A map declaring 2^32-1 entries in a 10-byte frame: refused on the count alone. */
    static const uint8_t huge_map[10] = {0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'v', RUMOR_PROTO_VERSION, 0xa1, 't'};
    CHECK(rumor_proto_decode(&m, huge_map, sizeof huge_map, NULL, 0, &why) == RUMOR_EPROTO);
    CHECK(why == RUMOR_PROTO_REJECT_TOO_LARGE);
    /* Within the cap but more entries than bytes left: a lie, refused before it is read. */
    static const uint8_t lying_map[] = {0xde, 0x00, 0x20, 0xa1, 'v', RUMOR_PROTO_VERSION};
    CHECK(rumor_proto_decode(&m, lying_map, sizeof lying_map, NULL, 0, &why) == RUMOR_EPROTO);
    CHECK(why == RUMOR_PROTO_REJECT_MALFORMED);

    /* An array declaring a huge length. */
    bb->n = 0;
    bb_head(bb, 1, "peers", 1);
    bb_str(bb, "peers");
    bb_raw(bb, "\xdd\xff\xff\xff\xf0", 5);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_TOO_LARGE);
    bb->n = 0;
    bb_head(bb, 1, "peers", 1);
    bb_str(bb, "peers");
    bb_array(bb, 60);
    bb_peer(bb, "tcp://1.2.3.4:5", 1, 0);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_MALFORMED);

    /* A str declaring 4 GiB, a bin past the end. */
    bb->n = 0;
    bb_head(bb, 1, "bye", 1);
    bb_str(bb, "x");
    bb_raw(bb, "\xdb\xff\xff\xff\xff", 5);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_TOO_LARGE);
    bb->n = 0;
    bb_head(bb, 1, "bye", 1);
    bb_str(bb, "x");
    bb_raw(bb, "\xc4\x10\x00", 3);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_MALFORMED);

    /* Nesting: depth 3 is allowed in unknown fields, 4 and 100 are not. */
    bb->n = 0;
    bb_head(bb, 1, "bye", 1);
    bb_str(bb, "x");
    bb_array(bb, 1);
    bb_map(bb, 1);
    kv_str(bb, "y", "z");
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_NONE);
    bb->n = 0;
    bb_head(bb, 1, "bye", 1);
    bb_str(bb, "x");
    bb_array(bb, 1);
    bb_array(bb, 1);
    bb_array(bb, 0);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_TOO_DEEP);
    bb->n = 0;
    bb_head(bb, 1, "bye", 1);
    bb_str(bb, "x");
    for (int i = 0; i < 99; i++) bb_array(bb, 1);
    bb_array(bb, 0);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_TOO_DEEP);
    bb->n = 0;
    for (int i = 0; i < 100; i++) {
        bb_map(bb, 1);
        bb_str(bb, "x");
    }
    bb_uint(bb, 0);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_TOO_DEEP);

    /* Trailing bytes after a valid message, and a second message appended. */
    bb->n = 0;
    bb_head(bb, 0, "bye", 7);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_NONE);
    size_t one = bb->n;
    bb_byte(bb, 0x00);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_TRAILING);
    bb->n = one;
    bb_head(bb, 0, "bye", 8);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_TRAILING);

    /* Frame 1 over 64 KiB, even when it is otherwise valid msgpack. */
    bb->n = 0;
    bb_map(bb, 4);
    kv_uint(bb, "v", RUMOR_PROTO_VERSION);
    kv_str(bb, "t", "bye");
    kv_uint(bb, "seq", 1);
    bb_str(bb, "pad");
    bb_byte(bb, 0xdb);
    bb_be(bb, RUMOR_PROTO_MAX_HEADER, 4);
    memset(bb->b + bb->n, 'x', RUMOR_PROTO_MAX_HEADER);
    bb->n += RUMOR_PROTO_MAX_HEADER;
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_TOO_LARGE);

    /* Keys: not a str, too long, twice (known and unknown, top level and in an entry). */
    bb->n = 0;
    bb_map(bb, 4);
    kv_uint(bb, "v", RUMOR_PROTO_VERSION);
    kv_str(bb, "t", "bye");
    kv_uint(bb, "seq", 1);
    bb_uint(bb, 5);
    bb_uint(bb, 5);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_WRONG_TYPE);
    bb->n = 0;
    bb_head(bb, 1, "bye", 1);
    char longkey[RUMOR_PROTO_MAX_KEY + 1];
    memset(longkey, 'k', sizeof longkey);
    bb_strn(bb, longkey, sizeof longkey);
    bb_uint(bb, 0);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_TOO_LARGE);
    bb->n = 0;
    bb_head(bb, 1, "bye", 1);
    kv_uint(bb, "seq", 2);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_DUPLICATE);
    bb->n = 0;
    bb_head(bb, 2, "bye", 1);
    kv_uint(bb, "x", 1);
    kv_uint(bb, "x", 1);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_DUPLICATE);
    bb->n = 0;
    bb_head(bb, 1, "peers", 1);
    bb_str(bb, "peers");
    bb_array(bb, 1);
    bb_peer_more(bb, "tcp://1.2.3.4:5", 1, 0, 1);
    kv_uint(bb, "inc", 2);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_DUPLICATE);

    /* A map over the entry cap, even of unknown keys. */
    bb->n = 0;
    bb_head(bb, RUMOR_PROTO_MAX_MAP - 2, "bye", 1);
    for (int i = 0; i < RUMOR_PROTO_MAX_MAP - 2; i++) {
        char k[8];
        snprintf(k, sizeof k, "x%d", i);
        kv_uint(bb, k, (uint64_t)i);
    }
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_TOO_LARGE);
    bb->n = 0;
    bb_head(bb, RUMOR_PROTO_MAX_MAP - 3, "bye", 1);
    for (int i = 0; i < RUMOR_PROTO_MAX_MAP - 3; i++) {
        char k[8];
        snprintf(k, sizeof k, "x%d", i);
        kv_uint(bb, k, (uint64_t)i);
    }
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_NONE);

    /* Unknown keys of every msgpack kind are skipped. */
    bb->n = 0;
    bb_head(bb, 9, "bye", 1);
    bb_str(bb, "nil");
    bb_byte(bb, 0xc0);
    bb_str(bb, "true");
    bb_byte(bb, 0xc3);
    bb_str(bb, "neg");
    bb_byte(bb, 0xd3);
    bb_be(bb, 0x8000000000000000ull, 8);
    bb_str(bb, "f32");
    bb_raw(bb, "\xca\x3f\x80\x00\x00", 5);
    bb_str(bb, "ext");
    bb_raw(bb, "\xc7\x02\x05xy", 5);
    bb_str(bb, "fixext");
    bb_raw(bb, "\xd8\x01" "0123456789abcdef", 18);
    bb_str(bb, "bin");
    bb_bin(bb, "abc", 3);
    bb_str(bb, "arr");
    bb_array(bb, 2);
    bb_byte(bb, 0xff);
    bb_map(bb, 0);
    kv_uint(bb, "addr", 3); /* belongs to hello: ignored on a bye, whatever its type */
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_NONE);
    free(bb);
}

static void test_reject_fields(void)
{
    bb_t *bb = calloc(1, sizeof *bb);
    uint8_t cert[RUMOR_PROTO_CERT_MAX + 1] = {0};

    /* Version: the next one, the previous one, negative, wrong type, missing. */
    bb->n = 0;
    bb_map(bb, 3);
    kv_uint(bb, "v", RUMOR_PROTO_VERSION + 1);
    kv_str(bb, "t", "bye");
    kv_uint(bb, "seq", 1);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_VERSION);
    bb->n = 0;
    bb_map(bb, 3);
    kv_uint(bb, "v", RUMOR_PROTO_VERSION - 1);
    kv_str(bb, "t", "bye");
    kv_uint(bb, "seq", 1);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_VERSION);
    bb->n = 0;
    bb_map(bb, 3);
    kv_uint(bb, "v", 0);
    kv_str(bb, "t", "bye");
    kv_uint(bb, "seq", 1);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_VERSION);
    bb->n = 0;
    bb_map(bb, 3);
    bb_str(bb, "v");
    bb_byte(bb, 0xff);
    kv_str(bb, "t", "bye");
    kv_uint(bb, "seq", 1);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_VERSION);
    bb->n = 0;
    bb_map(bb, 3);
    kv_str(bb, "v", "1");
    kv_str(bb, "t", "bye");
    kv_uint(bb, "seq", 1);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_WRONG_TYPE);
    bb->n = 0;
    bb_map(bb, 2);
    kv_str(bb, "t", "bye");
    kv_uint(bb, "seq", 1);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_MISSING);

    /* Type: unknown, wrong type, missing; seq: missing, str, over uint32. */
    bb->n = 0;
    bb_head(bb, 0, "pong", 1);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_TYPE);
    bb->n = 0;
    bb_head(bb, 0, "", 1);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_TYPE);
    bb->n = 0;
    bb_head(bb, 0, "byebye", 1);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_TYPE);
    bb->n = 0;
    bb_map(bb, 3);
    kv_uint(bb, "v", RUMOR_PROTO_VERSION);
    kv_uint(bb, "t", 7);
    kv_uint(bb, "seq", 1);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_WRONG_TYPE);
    bb->n = 0;
    bb_map(bb, 2);
    kv_uint(bb, "v", RUMOR_PROTO_VERSION);
    kv_uint(bb, "seq", 1);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_MISSING);
    bb->n = 0;
    bb_map(bb, 2);
    kv_uint(bb, "v", RUMOR_PROTO_VERSION);
    kv_str(bb, "t", "bye");
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_MISSING);
    bb->n = 0;
    bb_map(bb, 3);
    kv_uint(bb, "v", RUMOR_PROTO_VERSION);
    kv_str(bb, "t", "bye");
    kv_str(bb, "seq", "7");
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_WRONG_TYPE);
    bb->n = 0;
    bb_head(bb, 0, "bye", (uint64_t)UINT32_MAX + 1);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_VALUE);

    /* hello: each field missing in turn; cert empty and too long; bad address; inc > 2^32;
     * proof (version 4) of another length than 96 bytes, or not bytes. */
    const char *hello_fields[] = {"cert", "addr", "layout", "caps", "inc", "boot", "proof"};
    uint8_t proof[RUMOR_PROTO_PROOF_LEN + 1];
    memset(proof, 0x5c, sizeof proof);
    for (size_t skip = 0; skip <= 7; skip++) {
        bb->n = 0;
        bb_head(bb, skip < 7 ? 6 : 7, "hello", 1);
        for (size_t i = 0; i < 7; i++) {
            if (i == skip) continue;
            bb_str(bb, hello_fields[i]);
            if (i == 0)
                bb_bin(bb, cert, 10);
            else if (i == 1)
                bb_str(bb, "tcp://1.2.3.4:5");
            else if (i == 6)
                bb_bin(bb, proof, RUMOR_PROTO_PROOF_LEN);
            else
                bb_uint(bb, 1);
        }
        CHECK_REJECT(bb, NULL, 0, skip < 7 ? RUMOR_PROTO_REJECT_MISSING : RUMOR_PROTO_REJECT_NONE);
    }
    for (int variant = 0; variant < 3; variant++) {
        bb->n = 0;
        bb_head(bb, 7, "hello", 1);
        bb_str(bb, "cert");
        bb_bin(bb, cert, 10);
        kv_str(bb, "addr", "tcp://1.2.3.4:5");
        kv_uint(bb, "layout", 0);
        kv_uint(bb, "caps", 0);
        kv_uint(bb, "inc", 1);
        kv_uint(bb, "boot", 1);
        bb_str(bb, "proof");
        if (variant == 0) bb_bin(bb, proof, RUMOR_PROTO_PROOF_LEN - 1);
        if (variant == 1) bb_bin(bb, proof, RUMOR_PROTO_PROOF_LEN + 1);
        if (variant == 2) bb_str(bb, "signed, honestly");
        CHECK_REJECT(bb, NULL, 0,
                     variant == 0 ? RUMOR_PROTO_REJECT_VALUE
                     : variant == 1 ? RUMOR_PROTO_REJECT_TOO_LARGE : RUMOR_PROTO_REJECT_WRONG_TYPE);
    }
    struct {
        size_t cert_len;
        const char *addr;
        uint64_t inc;
        rumor_proto_reject_t want;
    } hellos[] = {
        {0, "tcp://1.2.3.4:5", 1, RUMOR_PROTO_REJECT_VALUE},
        {RUMOR_PROTO_CERT_MAX + 1, "tcp://1.2.3.4:5", 1, RUMOR_PROTO_REJECT_TOO_LARGE},
        {RUMOR_PROTO_CERT_MAX, "tcp://1.2.3.4:5", 1, RUMOR_PROTO_REJECT_NONE},
        {5, "tcp://host:5", 1, RUMOR_PROTO_REJECT_VALUE},
        {5, "", 1, RUMOR_PROTO_REJECT_VALUE},
        {5, "tcp://1.2.3.4:5", (uint64_t)UINT32_MAX + 1, RUMOR_PROTO_REJECT_VALUE},
    };
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(hellos); i++) {
        hello_head(bb, 1, cert, hellos[i].cert_len, hellos[i].addr, 0, hellos[i].inc);
        kv_uint(bb, "boot", 1);
        CHECK_REJECT(bb, NULL, 0, hellos[i].want);
    }
    /* boot (required) and done (optional): a nonzero uint, not 0, a str or a bin. */
    for (int field = 0; field < 2; field++)
        for (int variant = 0; variant < 4; variant++) {
            const char *key = field ? "done" : "boot";
            hello_head(bb, 1 + (unsigned)field, cert, 5, "tcp://1.2.3.4:5", 0, 1);
            if (field) kv_uint(bb, "boot", 1);
            if (variant == 0) kv_uint(bb, key, 0);
            if (variant == 1) kv_str(bb, key, "1");
            if (variant == 2) kv_uint(bb, key, UINT64_MAX);
            if (variant == 3) {
                bb_str(bb, key);
                bb_bin(bb, cert, 8);
            }
            CHECK_REJECT(bb, NULL, 0,
                         variant == 0   ? RUMOR_PROTO_REJECT_VALUE
                         : variant == 2 ? RUMOR_PROTO_REJECT_NONE
                                        : RUMOR_PROTO_REJECT_WRONG_TYPE);
        }
    /* site (hello, optional): a nonzero uint below 2^63. */
    for (int variant = 0; variant < 4; variant++) {
        hello_head(bb, 2, cert, 5, "tcp://1.2.3.4:5", 4, 1);
        kv_uint(bb, "boot", 1);
        if (variant == 0) kv_uint(bb, "site", 0);
        if (variant == 1) kv_str(bb, "site", "x");
        if (variant == 2) kv_uint(bb, "site", 12345);
        if (variant == 3) kv_uint(bb, "site", UINT64_C(1) << 63);
        CHECK_REJECT(bb, NULL, 0,
                     variant == 0 || variant == 3 ? RUMOR_PROTO_REJECT_VALUE
                     : variant == 1               ? RUMOR_PROTO_REJECT_WRONG_TYPE
                                                  : RUMOR_PROTO_REJECT_NONE);
    }
    /* seen (ack, optional): 1..45 characters of digits, hex letters, '.' and ':'. */
    {
        static const struct {
            const char *seen;
            rumor_proto_reject_t want;
        } seens[] = {
            {"192.0.2.1", RUMOR_PROTO_REJECT_NONE},
            {"2001:db8::1", RUMOR_PROTO_REJECT_NONE},
            {"", RUMOR_PROTO_REJECT_VALUE},
            {"10.0.0.1\n", RUMOR_PROTO_REJECT_VALUE},
            {"host.example", RUMOR_PROTO_REJECT_VALUE},
            {"1111111111111111111111111111111111111111111111", RUMOR_PROTO_REJECT_TOO_LARGE},
        };
        for (size_t i = 0; i < sizeof seens / sizeof seens[0]; i++) {
            bb->n = 0;
            bb_head(bb, 2, "ack", 1);
            kv_uint(bb, "ack", 1);
            kv_str(bb, "seen", seens[i].seen);
            CHECK_REJECT(bb, NULL, 0, seens[i].want);
        }
    }
    /* An address of 256 bytes: over the field cap though under the generic str cap. */
    char addr256[257];
    memset(addr256, '1', 256);
    memcpy(addr256, "tcp://", 6);
    addr256[256] = '\0';
    hello_head(bb, 1, cert, 1, addr256, 0, 0);
    kv_uint(bb, "boot", 1);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_TOO_LARGE);
    /* cert as str instead of bin */
    bb->n = 0;
    bb_head(bb, 6, "hello", 1);
    kv_str(bb, "cert", "abc");
    kv_str(bb, "addr", "tcp://1.2.3.4:5");
    kv_uint(bb, "layout", 0);
    kv_uint(bb, "caps", 0);
    kv_uint(bb, "inc", 0);
    kv_uint(bb, "boot", 1);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_WRONG_TYPE);

    /* peers: 64 fine, 65 too many; bad entries. */
    for (unsigned count = 63; count <= 65; count++) {
        bb->n = 0;
        bb_head(bb, 1, "peers", 1);
        bb_str(bb, "peers");
        bb_array(bb, count);
        for (unsigned i = 0; i < count; i++) bb_peer(bb, "tcp://[::1]:7470", i, i % 4);
        CHECK_REJECT(bb, NULL, 0,
                     count <= 64 ? RUMOR_PROTO_REJECT_NONE : RUMOR_PROTO_REJECT_TOO_LARGE);
    }
    bb->n = 0;
    bb_head(bb, 0, "peers", 1);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_MISSING);
    bb->n = 0;
    bb_head(bb, 1, "peers", 1);
    bb_str(bb, "peers");
    bb_map(bb, 0);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_WRONG_TYPE);
    bb->n = 0;
    bb_head(bb, 1, "peers", 1);
    bb_str(bb, "peers");
    bb_array(bb, 1);
    bb_uint(bb, 1);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_WRONG_TYPE);
    bb->n = 0;
    bb_head(bb, 1, "peers", 1);
    bb_str(bb, "peers");
    bb_array(bb, 1);
    bb_peer(bb, "tcp://1.2.3.4:5", 1, 4); /* state out of range */
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_VALUE);
    /* "u" (version 5): 1, else bad-value (0 is said by its absence), a string the wrong type. */
    for (int u = 0; u < 4; u++) {
        bb->n = 0;
        bb_head(bb, 1, "peers", 1);
        bb_str(bb, "peers");
        bb_array(bb, 1);
        bb_peer_more(bb, "tcp://1.2.3.4:5", 1, 0, 1);
        if (u < 3) kv_uint(bb, "u", (uint64_t)u);
        else kv_str(bb, "u", "1");
        CHECK_REJECT(bb, NULL, 0, u == 1 ? RUMOR_PROTO_REJECT_NONE : u == 3 ? RUMOR_PROTO_REJECT_WRONG_TYPE
                                                                        : RUMOR_PROTO_REJECT_VALUE);
    }
    bb->n = 0;
    bb_head(bb, 1, "peers", 1);
    bb_str(bb, "peers");
    bb_array(bb, 1);
    bb_map(bb, 3); /* no "s" */
    bb_str(bb, "k");
    bb_bin(bb, key32, 32);
    kv_str(bb, "a", "tcp://1.2.3.4:5");
    kv_uint(bb, "inc", 1);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_MISSING);
    bb->n = 0;
    bb_head(bb, 1, "peers", 1);
    bb_str(bb, "peers");
    bb_array(bb, 1);
    bb_map(bb, 4);
    bb_str(bb, "k");
    bb_bin(bb, key32, 31); /* a key is exactly 32 bytes */
    kv_str(bb, "a", "tcp://1.2.3.4:5");
    kv_uint(bb, "inc", 1);
    kv_uint(bb, "s", 0);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_VALUE);
    /* An entry's optional cert and boot (version 2): a cert is a bin of 1..CERT_MAX bytes, a
     * boot id a nonzero uint; in a ping's updates as in peers. */
    static uint8_t big_cert[RUMOR_PROTO_CERT_MAX + 1];
    struct {
        int kind; /* 0 cert bin of len, 1 cert as str, 2 boot uint of len, 3 boot as bin */
        uint64_t len;
        rumor_proto_reject_t want;
    } entries[] = {
        {0, 1, RUMOR_PROTO_REJECT_NONE},
        {0, RUMOR_PROTO_CERT_MAX, RUMOR_PROTO_REJECT_NONE},
        {0, RUMOR_PROTO_CERT_MAX + 1, RUMOR_PROTO_REJECT_TOO_LARGE},
        {0, 0, RUMOR_PROTO_REJECT_VALUE},
        {1, 5, RUMOR_PROTO_REJECT_WRONG_TYPE},
        {2, 1, RUMOR_PROTO_REJECT_NONE},
        {2, UINT64_MAX, RUMOR_PROTO_REJECT_NONE},
        {2, 0, RUMOR_PROTO_REJECT_VALUE},
        {3, 8, RUMOR_PROTO_REJECT_WRONG_TYPE},
    };
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(entries); i++) {
        for (int in_ping = 0; in_ping < 2; in_ping++) {
            bb->n = 0;
            if (in_ping) {
                bb_head(bb, 2, "ping", 1);
                kv_uint(bb, "inc", 1);
                bb_str(bb, "upd");
            } else {
                bb_head(bb, 1, "peers", 1);
                bb_str(bb, "peers");
            }
            bb_array(bb, 1);
            bb_map(bb, 5);
            bb_str(bb, "k");
            bb_bin(bb, key32, 32);
            kv_str(bb, "a", "tcp://1.2.3.4:5");
            kv_uint(bb, "inc", 1);
            kv_uint(bb, "s", 0);
            switch (entries[i].kind) {
            case 0:
                bb_str(bb, "cert");
                bb_bin(bb, big_cert, (size_t)entries[i].len);
                break;
            case 1: kv_str(bb, "cert", "abcde"); break;
            case 2: kv_uint(bb, "boot", entries[i].len); break;
            default:
                bb_str(bb, "boot");
                bb_bin(bb, big_cert, (size_t)entries[i].len);
            }
            CHECK_REJECT(bb, NULL, 0, entries[i].want);
        }
    }

    /* ping: 16 updates fine, 17 too many; missing inc; upd of the wrong type. */
    for (unsigned count = 16; count <= 17; count++) {
        bb->n = 0;
        bb_head(bb, 2, "ping", 1);
        kv_uint(bb, "inc", 1);
        bb_str(bb, "upd");
        bb_array(bb, count);
        for (unsigned i = 0; i < count; i++) bb_peer(bb, "tcp://1.2.3.4:5", i, 0);
        CHECK_REJECT(bb, NULL, 0,
                     count <= 16 ? RUMOR_PROTO_REJECT_NONE : RUMOR_PROTO_REJECT_TOO_LARGE);
    }
    bb->n = 0;
    bb_head(bb, 0, "ping", 1);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_MISSING);
    bb->n = 0;
    bb_head(bb, 2, "ping", 1);
    kv_uint(bb, "inc", 1);
    kv_str(bb, "upd", "none");
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_WRONG_TYPE);

    /* ping-req needs target and ta; ack needs ack, and a target must be a key. */
    bb->n = 0;
    bb_head(bb, 1, "ping-req", 1);
    bb_str(bb, "target");
    bb_bin(bb, key32, 32);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_MISSING);
    bb->n = 0;
    bb_head(bb, 1, "ping-req", 1);
    kv_str(bb, "ta", "tcp://1.2.3.4:5");
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_MISSING);
    bb->n = 0;
    bb_head(bb, 0, "ack", 1);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_MISSING);
    bb->n = 0;
    bb_head(bb, 2, "ack", 1);
    kv_uint(bb, "ack", 1);
    kv_str(bb, "target", "abc");
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_WRONG_TYPE);

    /* bye's reason: printable ASCII, at most 127 bytes, a str. */
    struct {
        const char *why;
        size_t len;
        rumor_proto_reject_t want;
    } byes[] = {
        {"", 0, RUMOR_PROTO_REJECT_NONE},
        {"hello", 5, RUMOR_PROTO_REJECT_NONE},
        {"two\nlines", 9, RUMOR_PROTO_REJECT_VALUE},
        {"\x1b[31mred", 8, RUMOR_PROTO_REJECT_VALUE},
        {"nul\0inside", 10, RUMOR_PROTO_REJECT_VALUE},
        {"caf\xc3\xa9", 5, RUMOR_PROTO_REJECT_VALUE},
        {"del\x7f", 4, RUMOR_PROTO_REJECT_VALUE},
    };
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(byes); i++) {
        bb->n = 0;
        bb_head(bb, 1, "bye", 1);
        bb_str(bb, "why");
        bb_strn(bb, byes[i].why, byes[i].len);
        CHECK_REJECT(bb, NULL, 0, byes[i].want);
    }
    char why128[128];
    memset(why128, 'w', sizeof why128);
    bb->n = 0;
    bb_head(bb, 1, "bye", 1);
    bb_str(bb, "why");
    bb_strn(bb, why128, sizeof why128);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_TOO_LARGE);
    bb->n = 0;
    bb_head(bb, 1, "bye", 1);
    kv_uint(bb, "why", 3);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_WRONG_TYPE);

    /* A frame 2 on anything but model. */
    uint8_t one_byte = 0;
    bb->n = 0;
    bb_head(bb, 0, "bye", 1);
    CHECK_REJECT(bb, &one_byte, 1, RUMOR_PROTO_REJECT_PAYLOAD);
    CHECK_REJECT(bb, &one_byte, 0, RUMOR_PROTO_REJECT_PAYLOAD); /* present though empty */

    /* pull: layout required, a uint64, no frame 2; a model's hash on it is an unknown key. */
    bb->n = 0;
    bb_head(bb, 1, "pull", 1);
    kv_uint(bb, "layout", UINT64_MAX);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_NONE);
    CHECK_REJECT(bb, &one_byte, 1, RUMOR_PROTO_REJECT_PAYLOAD);
    CHECK_REJECT(bb, &one_byte, 0, RUMOR_PROTO_REJECT_PAYLOAD);
    bb->n = 0;
    bb_head(bb, 0, "pull", 1);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_MISSING);
    bb->n = 0;
    bb_head(bb, 1, "pull", 1);
    kv_str(bb, "layout", "abc");
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_WRONG_TYPE);
    bb->n = 0;
    bb_head(bb, 1, "pull", 1);
    bb_str(bb, "layout");
    bb_f64(bb, 1.0);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_WRONG_TYPE);
    bb->n = 0;
    bb_head(bb, 1, "pull", 1);
    bb_str(bb, "layout");
    bb_byte(bb, 0xff); /* -1 */
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_VALUE);
    bb->n = 0;
    bb_head(bb, 2, "pull", 1);
    kv_uint(bb, "layout", 5);
    kv_uint(bb, "layout", 5);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_DUPLICATE);
    bb->n = 0;
    bb_head(bb, 2, "pull", 1);
    kv_uint(bb, "layout", 5);
    kv_str(bb, "hash", "not a hash"); /* belongs to model: ignored here */
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_NONE);
    /* A frame 2 is checked before the fields: a pull without layout but with a frame 2. */
    bb->n = 0;
    bb_head(bb, 0, "pull", 1);
    CHECK_REJECT(bb, &one_byte, 1, RUMOR_PROTO_REJECT_PAYLOAD);
    free(bb);
}

static void test_reject_model(void)
{
    bb_t *bb = calloc(1, sizeof *bb);
    model_fields_t f = model_defaults();

    bb->n = 0;
    bb_model(bb, &f, NULL);
    CHECK_REJECT(bb, payload_buf, 40, RUMOR_PROTO_REJECT_NONE);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_PAYLOAD);

    /* Each field missing. */
    const char *names[] = {"round", "w", "codec", "layout", "chunk", "chunks", "off", "n"};
    for (size_t i = 0; i < 8; i++) {
        bb->n = 0;
        bb_model(bb, &f, names[i]);
        CHECK_REJECT(bb, payload_buf, 40, RUMOR_PROTO_REJECT_MISSING);
    }

    /* Payload length off by one either way, for each codec (5, masked, below). */
    for (uint64_t c = 0; c <= RUMOR_CODEC_LAST; c++) {
        if (c == RUMOR_CODEC_MASKED) continue;
        f = model_defaults();
        f.codec = c;
        size_t len = 0;
        CHECK_RC(rumor_proto_payload_len((rumor_proto_codec_t)c, f.n, f.n, &len));
        bb->n = 0;
        if (rumor_codec_is_delta((rumor_proto_codec_t)c))
            bb_model_copy(bb, &f, 0);
        else
            bb_model(bb, &f, NULL);
        CHECK_REJECT(bb, payload_buf, len, RUMOR_PROTO_REJECT_NONE);
        CHECK_REJECT(bb, payload_buf, len - 1, RUMOR_PROTO_REJECT_PAYLOAD);
        CHECK_REJECT(bb, payload_buf, len + 1, RUMOR_PROTO_REJECT_PAYLOAD);
        CHECK_REJECT(bb, payload_buf, 0, RUMOR_PROTO_REJECT_PAYLOAD);
    }
    /* masked: 4n bytes and a `mix`; `mix` on any other codec, or with a hash, is bad-value;
     * no codec beyond masked. */
    f = model_defaults();
    f.codec = RUMOR_CODEC_MASKED;
    bb->n = 0;
    bb_model(bb, &f, NULL);
    CHECK_REJECT(bb, payload_buf, 4 * f.n, RUMOR_PROTO_REJECT_MISSING);
    bb->n = 0;
    bb_model_mix(bb, &f, UINT64_MAX);
    CHECK_REJECT(bb, payload_buf, 4 * f.n, RUMOR_PROTO_REJECT_NONE);
    CHECK_REJECT(bb, payload_buf, 4 * f.n - 4, RUMOR_PROTO_REJECT_PAYLOAD);
    bb->b[0]++;
    bb_str(bb, "hash");
    bb_bin(bb, "0123456789abcdef0123456789abcdef", 32);
    CHECK_REJECT(bb, payload_buf, 4 * f.n, RUMOR_PROTO_REJECT_VALUE);
    f.codec = RUMOR_CODEC_F32;
    bb->n = 0;
    bb_model_mix(bb, &f, 7);
    CHECK_REJECT(bb, payload_buf, 4 * f.n, RUMOR_PROTO_REJECT_VALUE);
    f.codec = RUMOR_CODEC_LAST + 1;
    bb->n = 0;
    bb_model_mix(bb, &f, 7);
    CHECK_REJECT(bb, payload_buf, 4 * f.n, RUMOR_PROTO_REJECT_VALUE);
    /* Copies: topk needs ver, lin and base; f32 may carry them (a keyframe); no other codec
     * may; need is 0 or 1. */
    f = model_defaults();
    f.codec = RUMOR_CODEC_TOPK;
    bb->n = 0;
    bb_model(bb, &f, NULL);
    CHECK_REJECT(bb, payload_buf, 8, RUMOR_PROTO_REJECT_MISSING);
    f.codec = RUMOR_CODEC_INT4; /* int4 travels only as deltas too */
    bb->n = 0;
    bb_model(bb, &f, NULL);
    CHECK_REJECT(bb, payload_buf, (size_t)rumor_codec_int4_len(f.n), RUMOR_PROTO_REJECT_MISSING);
    f.codec = RUMOR_CODEC_F32;
    bb->n = 0;
    bb_model_copy(bb, &f, 1);
    CHECK_REJECT(bb, payload_buf, 4 * f.n, RUMOR_PROTO_REJECT_NONE);
    bb->n = 0;
    bb_model_copy(bb, &f, 2);
    CHECK_REJECT(bb, payload_buf, 4 * f.n, RUMOR_PROTO_REJECT_VALUE);
    f.codec = RUMOR_CODEC_INT8;
    bb->n = 0;
    bb_model_copy(bb, &f, 0);
    CHECK_REJECT(bb, payload_buf, 4 + f.n, RUMOR_PROTO_REJECT_VALUE);
    /* topk: fewer pairs are fine, more pairs than parameters are not. */
    f = model_defaults();
    f.codec = RUMOR_CODEC_TOPK;
    bb->n = 0;
    bb_model_copy(bb, &f, 1);
    CHECK_REJECT(bb, payload_buf, 8, RUMOR_PROTO_REJECT_NONE);
    CHECK_REJECT(bb, payload_buf, 8 * f.n + 8, RUMOR_PROTO_REJECT_PAYLOAD);
    /* Oversize frame 2, and a header whose count implies more than the limit. */
    f = model_defaults();
    f.n = RUMOR_PROTO_MAX_PAYLOAD / 4 + 1;
    bb->n = 0;
    bb_model(bb, &f, NULL);
    CHECK_REJECT(bb, payload_buf, RUMOR_PROTO_MAX_PAYLOAD, RUMOR_PROTO_REJECT_PAYLOAD);
    {
        rumor_msg_t m;
        rumor_proto_reject_t why;
        CHECK(rumor_proto_decode(&m, bb->b, bb->n, payload_buf, RUMOR_PROTO_MAX_PAYLOAD + 1,
                                 &why) == RUMOR_EPROTO);
        CHECK(why == RUMOR_PROTO_REJECT_TOO_LARGE);
    }

    /* Weight: NaN, infinities, zero, negative, over 2^20; an integer weight is the wrong type;
     * a float32 weight is accepted. */
    const double bad_w[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, -0.5, 1048576.0000001, 1e300};
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(bad_w); i++) {
        f = model_defaults();
        f.w = bad_w[i];
        bb->n = 0;
        bb_model(bb, &f, NULL);
        CHECK_REJECT(bb, payload_buf, 40, RUMOR_PROTO_REJECT_VALUE);
    }
    f = model_defaults();
    bb->n = 0;
    bb_model(bb, &f, "w");
    bb->b[0]++; /* one more field in the fixmap */
    bb_str(bb, "w");
    bb_uint(bb, 1);
    CHECK_REJECT(bb, payload_buf, 40, RUMOR_PROTO_REJECT_WRONG_TYPE);
    bb->n -= 1;
    bb_raw(bb, "\xca\x3f\x00\x00\x00", 5); /* float32 0.5 */
    CHECK_REJECT(bb, payload_buf, 40, RUMOR_PROTO_REJECT_NONE);
    {
        rumor_msg_t m;
        rumor_proto_reject_t why;
        CHECK_RC(rumor_proto_decode(&m, bb->b, bb->n, payload_buf, 40, &why));
        CHECK(m.u.model.w == 0.5);
    }

    /* Chunks: index at or past the count, zero count, count over 65536. */
    struct {
        uint64_t chunk, chunks;
        rumor_proto_reject_t want;
    } chunks[] = {
        {0, 1, RUMOR_PROTO_REJECT_NONE},     {1, 1, RUMOR_PROTO_REJECT_VALUE},
        {5, 3, RUMOR_PROTO_REJECT_VALUE},    {0, 0, RUMOR_PROTO_REJECT_VALUE},
        {65535, 65536, RUMOR_PROTO_REJECT_NONE}, {0, 65537, RUMOR_PROTO_REJECT_VALUE},
        {(uint64_t)UINT32_MAX + 1, 2, RUMOR_PROTO_REJECT_VALUE},
    };
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(chunks); i++) {
        f = model_defaults();
        f.chunk = chunks[i].chunk;
        f.chunks = chunks[i].chunks;
        bb->n = 0;
        bb_model(bb, &f, NULL);
        CHECK_REJECT(bb, payload_buf, 40, chunks[i].want);
    }

    /* Ranges: n = 0, off + n past 2^40, a codec past masked. */
    struct {
        uint64_t off, n, codec;
        rumor_proto_reject_t want;
    } ranges[] = {
        {0, 0, 0, RUMOR_PROTO_REJECT_VALUE},
        {RUMOR_PROTO_MAX_PARAMS - 10, 10, 0, RUMOR_PROTO_REJECT_NONE},
        {RUMOR_PROTO_MAX_PARAMS - 9, 10, 0, RUMOR_PROTO_REJECT_VALUE},
        {RUMOR_PROTO_MAX_PARAMS + 1, 10, 0, RUMOR_PROTO_REJECT_VALUE},
        {UINT64_MAX, 10, 0, RUMOR_PROTO_REJECT_VALUE},
        {0, 10, RUMOR_CODEC_LAST + 1, RUMOR_PROTO_REJECT_VALUE},
    };
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(ranges); i++) {
        f = model_defaults();
        f.off = ranges[i].off;
        f.n = ranges[i].n;
        f.codec = ranges[i].codec;
        bb->n = 0;
        bb_model(bb, &f, NULL);
        CHECK_REJECT(bb, payload_buf, 40, ranges[i].want);
    }

    /* hash: a bin of exactly 32 bytes. */
    struct {
        size_t len;
        bool as_str;
        rumor_proto_reject_t want;
    } hashes[] = {
        {32, false, RUMOR_PROTO_REJECT_NONE},   {31, false, RUMOR_PROTO_REJECT_VALUE},
        {33, false, RUMOR_PROTO_REJECT_VALUE},  {0, false, RUMOR_PROTO_REJECT_VALUE},
        {64, false, RUMOR_PROTO_REJECT_VALUE},  {32, true, RUMOR_PROTO_REJECT_WRONG_TYPE},
    };
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(hashes); i++) {
        f = model_defaults();
        bb->n = 0;
        bb_model_hash(bb, &f, hashes[i].len, hashes[i].as_str);
        CHECK_REJECT(bb, payload_buf, 40, hashes[i].want);
    }
    {
        rumor_msg_t m;
        rumor_proto_reject_t why;
        f = model_defaults();
        bb->n = 0;
        bb_model_hash(bb, &f, 32, false);
        CHECK_RC(rumor_proto_decode(&m, bb->b, bb->n, payload_buf, 40, &why));
        CHECK(m.u.model.has_hash && memcmp(m.u.model.hash, "0123456789abcdef0123456789abcdef",
                                           RUMOR_PROTO_HASH_LEN) == 0);
        bb->n = 0;
        bb_model(bb, &f, NULL);
        CHECK_RC(rumor_proto_decode(&m, bb->b, bb->n, payload_buf, 40, &why));
        CHECK(!m.u.model.has_hash);
    }
    /* A uint or nil where the hash belongs is the wrong type. */
    f = model_defaults();
    bb->n = 0;
    bb_model(bb, &f, NULL);
    bb->b[0]++;
    kv_uint(bb, "hash", 0);
    CHECK_REJECT(bb, payload_buf, 40, RUMOR_PROTO_REJECT_WRONG_TYPE);
    bb->n -= 1;
    bb_byte(bb, 0xc0);
    CHECK_REJECT(bb, payload_buf, 40, RUMOR_PROTO_REJECT_WRONG_TYPE);
    /* The same key twice, valid both times, and a hash before the other fields (any order). */
    f = model_defaults();
    bb->n = 0;
    bb_model_hash(bb, &f, 32, false);
    bb->b[0]++;
    bb_str(bb, "hash");
    bb_bin(bb, key32, 32);
    CHECK_REJECT(bb, payload_buf, 40, RUMOR_PROTO_REJECT_DUPLICATE);
    bb->n = 0;
    bb_map(bb, 12);
    bb_str(bb, "hash");
    bb_bin(bb, key32, 32);
    kv_uint(bb, "v", RUMOR_PROTO_VERSION);
    kv_str(bb, "t", "model");
    kv_uint(bb, "seq", 1);
    kv_uint(bb, "round", f.round);
    bb_str(bb, "w");
    bb_f64(bb, f.w);
    kv_uint(bb, "codec", f.codec);
    kv_uint(bb, "layout", f.layout);
    kv_uint(bb, "chunk", f.chunk);
    kv_uint(bb, "chunks", f.chunks);
    kv_uint(bb, "off", f.off);
    kv_uint(bb, "n", f.n);
    CHECK_REJECT(bb, payload_buf, 40, RUMOR_PROTO_REJECT_NONE);
    /* Order of checks: the hash (the last field) before the length of frame 2, after n. */
    f = model_defaults();
    bb->n = 0;
    bb_model_hash(bb, &f, 31, false);
    CHECK_REJECT(bb, payload_buf, 39, RUMOR_PROTO_REJECT_VALUE);
    f.n = 0;
    bb->n = 0;
    bb_model_hash(bb, &f, 31, false);
    CHECK_REJECT(bb, payload_buf, 40, RUMOR_PROTO_REJECT_VALUE);
    f = model_defaults();
    bb->n = 0;
    bb_model_hash(bb, &f, 32, false);
    CHECK_REJECT(bb, payload_buf, 39, RUMOR_PROTO_REJECT_PAYLOAD);
    CHECK_REJECT(bb, NULL, 0, RUMOR_PROTO_REJECT_PAYLOAD);
    free(bb);
}

/* The messages the truncation and mutation tests start from, one or more per type. */
enum { N_SEEDS = 18 };
typedef struct {
    uint8_t frame[RUMOR_PROTO_MAX_HEADER];
    size_t len;
    size_t payload_len;
} seed_t;

static size_t make_seeds(seed_t *seeds)
{
    rumor_msg_t *m = calloc(1, sizeof *m);
    size_t n = 0;
    for (int variant = 0; variant < N_SEEDS; variant++) {
        memset(m, 0, sizeof *m);
        size_t pl = 0;
        switch (variant) {
        case 0: sample_hello(m, 40); break;
        case 1:
            m->type = RUMOR_MSG_PEERS;
            m->u.peers.count = 3;
            for (unsigned i = 0; i < 3; i++) make_peer(&m->u.peers.peers[i], i, i == 1);
            break;
        case 2:
            m->type = RUMOR_MSG_PING;
            m->u.ping.inc = 4;
            m->u.ping.upd_count = 2;
            make_peer(&m->u.ping.upd[0], 1, false);
            make_peer(&m->u.ping.upd[1], 2, true);
            break;
        case 3:
            m->type = RUMOR_MSG_PING_REQ;
            memcpy(m->u.ping_req.target, key32, 32);
            strcpy(m->u.ping_req.target_addr, "tcp://192.168.1.20:7471");
            m->u.ping_req.upd_count = 1;
            make_peer(&m->u.ping_req.upd[0], 9, false);
            break;
        case 4:
            m->type = RUMOR_MSG_ACK;
            m->u.ack.ack = 77;
            m->u.ack.has_target = true;
            memcpy(m->u.ack.target, key32, 32);
            break;
        case 5: sample_model(m, RUMOR_CODEC_F32, 16, pl = 64); break;
        case 6: sample_model(m, RUMOR_CODEC_INT8, 16, pl = 20); break;
        case 7: sample_model(m, RUMOR_CODEC_TOPK, 16, pl = 24); break;
        case 8: sample_model(m, RUMOR_CODEC_BF16, 16, pl = 32); break;
        case 9: m->type = RUMOR_MSG_BYE; break;
        case 10: sample_hello(m, RUMOR_PROTO_CERT_MAX); break;
        case 11:
            m->type = RUMOR_MSG_PEERS;
            m->u.peers.count = RUMOR_PROTO_MAX_PEERS;
            for (unsigned i = 0; i < RUMOR_PROTO_MAX_PEERS; i++)
                make_peer(&m->u.peers.peers[i], i, i % 3 == 0);
            break;
        case 12: m->type = RUMOR_MSG_PING; break;
        case 13: m->type = RUMOR_MSG_ACK; break;
        case 14: sample_model(m, RUMOR_CODEC_F16, 16, pl = 32); break;
        case 15:
            m->type = RUMOR_MSG_BYE;
            strcpy(m->u.bye.why, "certificate expired");
            break;
        case 16:
            m->type = RUMOR_MSG_PULL;
            m->u.pull.layout = 0x0123456789abcdefull;
            break;
        case 17: /* a chunk of an answer to pull */
            sample_model(m, RUMOR_CODEC_F32, 16, pl = 64);
            m->u.model.has_hash = true;
            sample_hash(m->u.model.hash);
            break;
        }
        m->seq = (uint32_t)(variant * 1000 + 1);
        CHECK_RC(rumor_proto_encode(m, seeds[n].frame, sizeof seeds[n].frame, &seeds[n].len));
        seeds[n].payload_len = pl;
        n++;
    }
    free(m);
    return n;
}

/* relay: the handshake and sealed messages between two members through a third. */
static void test_relay(void)
{
    uint8_t k[32], e[32], sealed[64];
    for (int i = 0; i < 32; i++) k[i] = (uint8_t)(0xa0 + i), e[i] = (uint8_t)(0x10 + i);
    for (int i = 0; i < 64; i++) sealed[i] = (uint8_t)(i * 5);

    /* Known answer: {"v": RUMOR_PROTO_VERSION, "t": "relay", "seq": 1, "to": K, "kind": 1, "eph": E, "proof": P,
     * "sent": 0x0102030405060708} */
    uint8_t proof[RUMOR_PROTO_PROOF_LEN];
    for (int i = 0; i < RUMOR_PROTO_PROOF_LEN; i++) proof[i] = (uint8_t)(0x77 ^ i);
    uint8_t want[320];
    size_t w = 0;
    const uint8_t head[] = {0x88, 0xa1, 'v', RUMOR_PROTO_VERSION, 0xa1, 't', 0xa5, 'r', 'e', 'l', 'a', 'y',
                            0xa3, 's', 'e', 'q', 0x01, 0xa2, 't', 'o', 0xc4, 0x20};
    memcpy(want, head, sizeof head), w = sizeof head;
    memcpy(want + w, k, 32), w += 32;
    const uint8_t mid[] = {0xa4, 'k', 'i', 'n', 'd', 0x01, 0xa3, 'e', 'p', 'h', 0xc4, 0x20};
    memcpy(want + w, mid, sizeof mid), w += sizeof mid;
    memcpy(want + w, e, 32), w += 32;
    const uint8_t pk[] = {0xa5, 'p', 'r', 'o', 'o', 'f', 0xc4, 0x60};
    memcpy(want + w, pk, sizeof pk), w += sizeof pk;
    memcpy(want + w, proof, sizeof proof), w += sizeof proof;
    const uint8_t tail[] = {0xa4, 's', 'e', 'n', 't', 0xcf, 1, 2, 3, 4, 5, 6, 7, 8};
    memcpy(want + w, tail, sizeof tail), w += sizeof tail;
    rumor_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = RUMOR_MSG_RELAY;
    m.seq = 1;
    m.u.relay.to = true;
    memcpy(m.u.relay.peer, k, 32);
    m.u.relay.kind = RUMOR_RELAY_INIT;
    memcpy(m.u.relay.eph, e, 32);
    memcpy(m.u.relay.proof, proof, sizeof proof);
    m.u.relay.sent = 0x0102030405060708ull;
    uint8_t buf[RUMOR_PROTO_MAX_HEADER];
    size_t len = 0;
    CHECK_RC(rumor_proto_encode(&m, buf, sizeof buf, &len));
    CHECK(len == w && memcmp(buf, want, w) == 0);

    /* Round trips: init and accept both ways, data with its sealed frame 2 (zero copy). */
    roundtrip(&m, NULL, 0);
    m.u.relay.to = false;
    m.u.relay.kind = RUMOR_RELAY_ACCEPT;
    m.u.relay.sent = 0; /* (an init's only) */
    roundtrip(&m, NULL, 0);
    m.u.relay.kind = RUMOR_RELAY_INIT;
    CHECK(rumor_proto_encode(&m, buf, sizeof buf, &len) == RUMOR_EINVAL); /* an init says when it was signed */
    m.u.relay.kind = RUMOR_RELAY_DATA;
    m.u.relay.ctr = UINT64_MAX;
    m.u.relay.payload_len = sizeof sealed;
    roundtrip(&m, sealed, sizeof sealed);
    rumor_msg_t back;
    CHECK_RC(rumor_proto_encode(&m, buf, sizeof buf, &len));
    CHECK_RC(rumor_proto_decode(&back, buf, len, sealed, sizeof sealed, NULL));
    CHECK(back.u.relay.payload == sealed && back.u.relay.payload_len == sizeof sealed);

    /* The encoder refuses what the decoder would. */
    m.u.relay.ctr = 0;
    CHECK(rumor_proto_encode(&m, buf, sizeof buf, &len) == RUMOR_EINVAL);
    m.u.relay.ctr = 1;
    m.u.relay.payload_len = RUMOR_RELAY_TAG;
    CHECK(rumor_proto_encode(&m, buf, sizeof buf, &len) == RUMOR_EINVAL);
    m.u.relay.kind = (rumor_relay_kind_t)4;
    CHECK(rumor_proto_encode(&m, buf, sizeof buf, &len) == RUMOR_EINVAL);

    /* Rejections, each by its reason. */
    bb_t *bb = calloc(1, sizeof *bb);
    struct {
        const char *what;
        int to, from, kind, eph, ctr, proof, sent; /* -1: absent */
        bool payload;
        size_t pl_len;
        rumor_proto_reject_t why;
    } cases[] = {
        {"init", 1, -1, 1, 32, -1, 96, 5, false, 0, RUMOR_PROTO_REJECT_NONE},
        {"accept", 1, -1, 2, 32, -1, 96, -1, false, 0, RUMOR_PROTO_REJECT_NONE},
        {"data", -1, 1, 3, -1, 9, -1, -1, true, 17, RUMOR_PROTO_REJECT_NONE},
        {"neither to nor from", -1, -1, 1, 32, -1, 96, 5, false, 0, RUMOR_PROTO_REJECT_MISSING},
        {"both to and from", 1, 1, 1, 32, -1, 96, 5, false, 0, RUMOR_PROTO_REJECT_VALUE},
        {"kind 0", 1, -1, 0, 32, -1, 96, 5, false, 0, RUMOR_PROTO_REJECT_VALUE},
        {"kind 4", 1, -1, 4, 32, -1, 96, 5, false, 0, RUMOR_PROTO_REJECT_VALUE},
        {"no kind", 1, -1, -1, 32, -1, 96, 5, false, 0, RUMOR_PROTO_REJECT_MISSING},
        {"init without eph", 1, -1, 1, -1, -1, 96, 5, false, 0, RUMOR_PROTO_REJECT_MISSING},
        {"eph of 31 bytes", 1, -1, 2, 31, -1, 96, -1, false, 0, RUMOR_PROTO_REJECT_VALUE},
        {"init without proof", 1, -1, 1, 32, -1, -1, 5, false, 0, RUMOR_PROTO_REJECT_MISSING},
        {"accept with a proof of 95 bytes", 1, -1, 2, 32, -1, 95, -1, false, 0, RUMOR_PROTO_REJECT_VALUE},
        {"init without sent", 1, -1, 1, 32, -1, 96, -1, false, 0, RUMOR_PROTO_REJECT_MISSING},
        {"init sent at 0", 1, -1, 1, 32, -1, 96, 0, false, 0, RUMOR_PROTO_REJECT_VALUE},
        {"accept with sent", 1, -1, 2, 32, -1, 96, 5, false, 0, RUMOR_PROTO_REJECT_VALUE},
        {"init with ctr", 1, -1, 1, 32, 1, 96, 5, false, 0, RUMOR_PROTO_REJECT_VALUE},
        {"init with frame 2", 1, -1, 1, 32, -1, 96, 5, true, 17, RUMOR_PROTO_REJECT_PAYLOAD},
        {"data without ctr", 1, -1, 3, -1, -1, -1, -1, true, 17, RUMOR_PROTO_REJECT_MISSING},
        {"data with ctr 0", 1, -1, 3, -1, 0, -1, -1, true, 17, RUMOR_PROTO_REJECT_VALUE},
        {"data with eph", 1, -1, 3, 32, 1, -1, -1, true, 17, RUMOR_PROTO_REJECT_VALUE},
        {"data without frame 2", 1, -1, 3, -1, 1, -1, -1, false, 0, RUMOR_PROTO_REJECT_PAYLOAD},
        {"data of only a tag", 1, -1, 3, -1, 1, -1, -1, true, 16, RUMOR_PROTO_REJECT_PAYLOAD},
        {"to of 33 bytes", 33, -1, 1, 32, -1, 96, 5, false, 0, RUMOR_PROTO_REJECT_VALUE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(bb, 0, sizeof *bb);
        const unsigned extra = (cases[i].to >= 0) + (cases[i].from >= 0) + (cases[i].kind >= 0) +
                               (cases[i].eph >= 0) + (cases[i].ctr >= 0) + (cases[i].proof >= 0) +
                               (cases[i].sent >= 0);
        bb_head(bb, extra, "relay", 3);
        uint8_t kk[33] = {0};
        if (cases[i].to >= 0) {
            bb_str(bb, "to");
            bb_bin(bb, kk, cases[i].to == 1 ? 32 : (size_t)cases[i].to);
        }
        if (cases[i].from >= 0) {
            bb_str(bb, "from");
            bb_bin(bb, kk, 32);
        }
        if (cases[i].kind >= 0) kv_uint(bb, "kind", (uint64_t)cases[i].kind);
        if (cases[i].eph >= 0) {
            bb_str(bb, "eph");
            bb_bin(bb, kk, (size_t)cases[i].eph);
        }
        if (cases[i].ctr >= 0) kv_uint(bb, "ctr", (uint64_t)cases[i].ctr);
        if (cases[i].proof >= 0) {
            uint8_t pp[96] = {0};
            bb_str(bb, "proof");
            bb_bin(bb, pp, (size_t)cases[i].proof);
        }
        if (cases[i].sent >= 0) kv_uint(bb, "sent", (uint64_t)cases[i].sent);
        const rumor_proto_reject_t got = reject_of(bb, cases[i].payload ? sealed : NULL, cases[i].pl_len);
        CHECK_MSG(got == cases[i].why, "relay %s: got %s, want %s", cases[i].what, rumor_proto_reject_name(got),
                  rumor_proto_reject_name(cases[i].why));
    }
    free(bb);
}

static void test_truncation(void)
{
    seed_t *seeds = calloc(N_SEEDS, sizeof *seeds);
    size_t n = make_seeds(seeds);
    rumor_msg_t m;
    for (size_t s = 0; s < n; s++) {
        const uint8_t *pl = seeds[s].payload_len ? payload_buf : NULL;
        rumor_proto_reject_t why;
        CHECK(decode_copy(&m, seeds[s].frame, seeds[s].len, pl, seeds[s].payload_len, &why,
                          NULL) == RUMOR_OK);
        int rejected = 0;
        for (size_t cut = 0; cut < seeds[s].len; cut++) {
            rumor_err_t rc =
                decode_copy(&m, seeds[s].frame, cut, pl, seeds[s].payload_len, &why, NULL);
            rejected += rc == RUMOR_EPROTO && why != RUMOR_PROTO_REJECT_NONE && m.type == 0;
        }
        CHECK_MSG(rejected == (int)seeds[s].len, "seed %zu: %d of %zu prefixes rejected", s,
                  rejected, seeds[s].len);
    }
    free(seeds);
}

/* xorshift64*: the mutation loop is the same on every run. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

static void test_mutation(void)
{
    enum { ITERATIONS = 20000 };
    static const uint8_t interesting[] = {0x00, 0x01, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf,
                                          0xc0, 0xc1, 0xc4, 0xca, 0xcb, 0xcc, 0xcf, 0xd3, 0xd9,
                                          0xdb, 0xdc, 0xdd, 0xde, 0xdf, 0xe0, 0xff};
    seed_t *seeds = calloc(N_SEEDS, sizeof *seeds);
    size_t n_seeds = make_seeds(seeds);
    uint8_t *work = malloc(RUMOR_PROTO_MAX_HEADER + 64);
    rumor_msg_t *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    uint8_t *re = malloc(RUMOR_PROTO_MAX_HEADER);
    int accepted = 0, rejected = 0, bad = 0;
    int by_reason[RUMOR_PROTO_REJECT_COUNT] = {0};

    for (int it = 0; it < ITERATIONS; it++) {
        const seed_t *s = &seeds[next_rand() % n_seeds];
        size_t len = s->len;
        memcpy(work, s->frame, len);
        size_t pl_len = s->payload_len;
        int muts = 1 + (int)(next_rand() % 4);
        for (int k = 0; k < muts; k++) {
            uint64_t r = next_rand();
            size_t pos = len ? (size_t)(r >> 8) % len : 0;
            switch (r % 8) {
            case 0: if (len) work[pos] ^= (uint8_t)(1u << ((r >> 40) % 8)); break;
            case 1: if (len) work[pos] = (uint8_t)(r >> 32); break;
            case 2: if (len) work[pos] = interesting[(r >> 32) % sizeof interesting]; break;
            case 3: /* insert a byte */
                if (len < RUMOR_PROTO_MAX_HEADER) {
                    memmove(work + pos + 1, work + pos, len - pos);
                    work[pos] = (uint8_t)(r >> 32);
                    len++;
                }
                break;
            case 4: /* delete a byte */
                if (len) {
                    memmove(work + pos, work + pos + 1, len - pos - 1);
                    len--;
                }
                break;
            case 5: len = pos; break; /* truncate */
            case 6: if (len) work[pos] = (uint8_t)(work[pos] + 1 - 2 * ((r >> 32) & 1)); break;
            case 7: pl_len = (size_t)((r >> 32) % 80); break; /* another payload length */
            }
        }
        const uint8_t *pl = (s->payload_len || (next_rand() % 16 == 0)) ? payload_buf : NULL;
        uint8_t *pl_copy = NULL;
        rumor_proto_reject_t why = RUMOR_PROTO_REJECT_COUNT;
        rumor_err_t rc = decode_copy(a, work, len, pl, pl ? pl_len : 0, &why, &pl_copy);
        if (rc == RUMOR_OK) {
            accepted++;
            size_t re_len = 0;
            rumor_proto_reject_t why2;
            bool ok = why == RUMOR_PROTO_REJECT_NONE &&
                      rumor_proto_encode(a, re, RUMOR_PROTO_MAX_HEADER, &re_len) == RUMOR_OK &&
                      rumor_proto_decode(b, re, re_len, pl_copy, pl ? pl_len : 0, &why2) ==
                          RUMOR_OK &&
                      msg_eq(a, b);
            bad += !ok;
        } else {
            rejected++;
            bad += rc != RUMOR_EPROTO || why == RUMOR_PROTO_REJECT_NONE ||
                   why >= RUMOR_PROTO_REJECT_COUNT;
            if (why < RUMOR_PROTO_REJECT_COUNT) by_reason[why]++;
        }
        free(pl_copy);
    }
    CHECK(bad == 0);
    CHECK(accepted + rejected == ITERATIONS);
    /* The mutations reach both sides and several reasons, or the loop tests little. */
    CHECK(accepted > 100 && rejected > 1000);
    int reasons = 0;
    for (int r = 1; r < RUMOR_PROTO_REJECT_COUNT; r++) reasons += by_reason[r] > 0;
    CHECK_MSG(reasons >= 8, "only %d reject reasons reached", reasons);
    fprintf(stderr, "mutation: %d accepted, %d rejected, %d reasons\n", accepted, rejected,
            reasons);
    free(work);
    free(re);
    free(a);
    free(b);
    free(seeds);
}

/* `test_proto --write-corpus DIR` writes the seeds in the fuzzer's input layout (flags byte,
 * 16-bit big-endian frame 1 length, frame 1, frame 2): the corpus in tests/fuzz/proto/. */
static int write_corpus(const char *dir)
{
    seed_t *seeds = calloc(N_SEEDS, sizeof *seeds);
    size_t n = make_seeds(seeds);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        rumor_msg_t m;
        rumor_proto_reject_t why;
        const uint8_t *pl = seeds[i].payload_len ? payload_buf : NULL;
        if (rumor_proto_decode(&m, seeds[i].frame, seeds[i].len, pl, seeds[i].payload_len, &why) !=
            RUMOR_OK)
            return 1;
        char path[512];
        snprintf(path, sizeof path, "%s/%02zu-%s", dir, i, rumor_proto_type_name(m.type));
        FILE *fp = fopen(path, "wb");
        if (!fp) return 1;
        uint8_t head[3] = {pl ? 1 : 0, (uint8_t)(seeds[i].len >> 8), (uint8_t)seeds[i].len};
        /* A recognisable payload pattern rather than zeros. */
        for (size_t j = 0; j < seeds[i].payload_len; j++) payload_buf[j] = (uint8_t)(j * 37 + 11);
        fwrite(head, 1, sizeof head, fp);
        fwrite(seeds[i].frame, 1, seeds[i].len, fp);
        fwrite(payload_buf, 1, seeds[i].payload_len, fp);
        rc |= fclose(fp) != 0;
    }
    free(seeds);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0) return write_corpus(argv[2]);

    test_names();
    test_known_answer();
    test_roundtrip();
    test_payload_len();
    test_layout_message();
    test_addresses();
    test_encode_refuses();
    test_reject_structure();
    test_reject_fields();
    test_reject_model();
    test_relay();
    test_truncation();
    test_mutation();
    return check_done();
}
