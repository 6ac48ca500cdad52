/*
 * proto.h - the wire protocol: encode and strictly decode rumor messages (version 2).
 *
 * A message is a multipart ZeroMQ message: frame 1 is a msgpack map with string keys
 * ("v" version, "t" type name, "seq" sender's message counter, then the type's fields);
 * frame 2, raw bytes, exists only for `model` (the parameters of one chunk), `relay` (a sealed
 * message) and `layout` (the sender's layout text).
 * proto/PROTOCOL.md is the normative description; this header is its C face.
 *
 * Sans-I/O: nothing here touches a socket, a clock or the heap. The encoder writes frame 1
 * into the caller's buffer; the decoder reads the caller's frames into a caller-owned
 * rumor_msg_t made of fixed-size arrays.
 *
 * Decoding trusts nothing. Frame 1 is at most RUMOR_PROTO_MAX_HEADER bytes and is walked by a
 * bounds-checked reader that never allocates: every declared str/bin/array/map length is
 * checked against its cap and against the bytes that remain before it is believed, nesting
 * is at most RUMOR_PROTO_MAX_DEPTH, and the work done is linear in the frame length. (msgpack-c's
 * own unpacker is deliberately not used for input: it allocates n * sizeof(msgpack_object)
 * as soon as it reads an array or map header declaring n entries, before those entries
 * exist, so a 5-byte header could ask for gigabytes.) Any violation returns RUMOR_EPROTO
 * with a rumor_proto_reject_t reason the node counts; nothing a peer sends can crash the
 * decoder, make it allocate or make it recurse beyond the depth cap.
 *
 * The encoder applies the same rules (RUMOR_EINVAL on a struct the decoder would reject),
 * so a node never sends what a peer would drop. Encoding then decoding gives back an equal
 * struct; decoding then encoding gives canonical bytes (fixed key order, smallest integer
 * encodings, float64 weight, empty optional lists omitted).
 *
 * Non-goals: framing on the socket (the ZeroMQ driver's job), certificate checks (the crypto
 * module's; `cert` is opaque here), membership or mixing semantics.
 */
#ifndef RUMOR_PROTO_H
#define RUMOR_PROTO_H

#include "base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The only protocol version; config.h carries the same number (proto.c asserts they agree). */
#define RUMOR_PROTO_VERSION 5

/* ---- limits (PROTOCOL.md "Limits") ---- */
#define RUMOR_PROTO_MAX_HEADER (64u * 1024u)          /* frame 1 bytes */
#define RUMOR_PROTO_MAX_PAYLOAD (2u * 1024u * 1024u)  /* frame 2 bytes: a chunk of 2^18 floats,
                                                         or its top-k of every entry */
#define RUMOR_PROTO_MAX_DEPTH 3    /* container nesting: message map > list > entry map */
#define RUMOR_PROTO_MAX_MAP 32     /* entries in any map, unknown keys included */
#define RUMOR_PROTO_MAX_ARRAY 64   /* elements in any array */
#define RUMOR_PROTO_MAX_STR 512    /* bytes of any str, bin or ext */
#define RUMOR_PROTO_MAX_KEY 64     /* bytes of a map key */
#define RUMOR_PROTO_KEY_LEN 32     /* a peer's Curve25519 public key */
#define RUMOR_PROTO_HASH_LEN 32    /* a model's BLAKE2b-256 (`hash` on model chunks) */
#define RUMOR_PROTO_ADDR_MAX 255   /* bytes of an address, without the NUL */
#define RUMOR_PROTO_CERT_MAX 512   /* bytes of an admission certificate */
#define RUMOR_PROTO_PROOF_LEN 96   /* a member's signed record: its Ed25519 key, the signature */
#define RUMOR_PROTO_WHY_MAX 127    /* bytes of a bye's reason, without the NUL */
#define RUMOR_PROTO_MAX_PEERS 64   /* entries in a `peers` message */
#define RUMOR_PROTO_MAX_UPD 16     /* piggybacked updates on ping, ping-req, ack */
#define RUMOR_PROTO_MAX_CHUNKS 65536u
#define RUMOR_PROTO_MAX_PARAMS (UINT64_C(1) << 40)    /* off + n of a model chunk */
#define RUMOR_PROTO_MAX_WEIGHT 1048576.0              /* push-sum weight, 2^20 */

typedef enum {
    RUMOR_MSG_HELLO = 1,
    RUMOR_MSG_PEERS,
    RUMOR_MSG_PING,
    RUMOR_MSG_PING_REQ,
    RUMOR_MSG_ACK,
    RUMOR_MSG_MODEL,
    RUMOR_MSG_BYE,
    RUMOR_MSG_PULL,
    RUMOR_MSG_RELAY,
    RUMOR_MSG_LAYOUT,
    RUMOR_MSG_LAST = RUMOR_MSG_LAYOUT, /* the highest type: loops run HELLO..LAST inclusive */
} rumor_msg_type_t;

typedef enum {
    RUMOR_PROTO_ALIVE = 0,
    RUMOR_PROTO_SUSPECT = 1,
    RUMOR_PROTO_DEAD = 2,
    RUMOR_PROTO_LEFT = 3,
} rumor_proto_state_t;

/* How frame 2 of a model message encodes its n parameters (all little-endian). */
typedef enum {
    RUMOR_CODEC_F32 = 0,  /* n float32: 4n bytes */
    RUMOR_CODEC_F16 = 1,  /* n IEEE half: 2n bytes */
    RUMOR_CODEC_BF16 = 2, /* n bfloat16: 2n bytes */
    RUMOR_CODEC_INT8 = 3, /* float32 scale, then n int8 (value = scale * q): 4 + n bytes */
    RUMOR_CODEC_TOPK = 4, /* k (uint32 index relative to off, float32 value) pairs: 8k bytes,
                             1 <= k <= n */
    RUMOR_CODEC_MASKED = 5, /* n uint32: fixed-point share plus pairwise masks (--secure-mix),
                               4n bytes; needs `mix` */
    RUMOR_CODEC_INT4 = 6,   /* blocks of 64: bfloat16 scale, then nibbles (value = scale * q, q in
                               -7..7): 2 ceil(n / 64) + ceil(n / 2) bytes */
} rumor_proto_codec_t;
#define RUMOR_CODEC_LAST RUMOR_CODEC_INT4
#define RUMOR_CODEC_INT4_BLOCK 64
/* Bytes of an int4 payload of n parameters. */
static inline uint64_t rumor_codec_int4_len(uint64_t n)
{
    return 2 * (n / RUMOR_CODEC_INT4_BLOCK + (n % RUMOR_CODEC_INT4_BLOCK != 0)) + n / 2 + n % 2; /* no overflow */
}
/* Codecs that travel only as differences of a public copy (compressed gossip: `ver` required). */
static inline bool rumor_codec_is_delta(rumor_proto_codec_t c) { return c == RUMOR_CODEC_TOPK || c == RUMOR_CODEC_INT4; }

/* Why a frame was rejected; the node keeps one counter per reason. */
typedef enum {
    RUMOR_PROTO_REJECT_NONE = 0,   /* "none": accepted */
    RUMOR_PROTO_REJECT_MALFORMED,  /* "malformed": not msgpack, truncated, reserved byte 0xc1 */
    RUMOR_PROTO_REJECT_TOO_LARGE,  /* "too-large": a frame, str, bin, array or map over cap */
    RUMOR_PROTO_REJECT_TOO_DEEP,   /* "too-deep": containers nested beyond MAX_DEPTH */
    RUMOR_PROTO_REJECT_TRAILING,   /* "trailing-bytes": bytes after the message map */
    RUMOR_PROTO_REJECT_DUPLICATE,  /* "duplicate-key": a key twice in one map */
    RUMOR_PROTO_REJECT_WRONG_TYPE, /* "wrong-type": e.g. str where uint is expected */
    RUMOR_PROTO_REJECT_MISSING,    /* "missing-field": a required field is absent */
    RUMOR_PROTO_REJECT_VERSION,    /* "bad-version": v is not RUMOR_PROTO_VERSION */
    RUMOR_PROTO_REJECT_TYPE,       /* "bad-type": unknown t */
    RUMOR_PROTO_REJECT_VALUE,      /* "bad-value": a field of the right type, out of range */
    RUMOR_PROTO_REJECT_PAYLOAD,    /* "bad-payload": frame 2 missing, extra or wrong length */
    RUMOR_PROTO_REJECT_COUNT
} rumor_proto_reject_t;

/* One member as a peer sees it (peer exchange and SWIM updates). */
typedef struct {
    uint8_t key[RUMOR_PROTO_KEY_LEN];
    char addr[RUMOR_PROTO_ADDR_MAX + 1]; /* NUL-terminated "tcp://HOST:PORT" */
    uint32_t inc;                        /* the member's incarnation */
    rumor_proto_state_t state;
    /* Optional (version 2): the member's admission certificate, opaque here (wire key
     * "cert", 1..RUMOR_PROTO_CERT_MAX bytes; cert_len 0 = not sent), and its boot id (wire
     * key "boot", nonzero; 0 = not sent). */
    size_t cert_len;
    uint8_t cert[RUMOR_PROTO_CERT_MAX];
    uint64_t boot;
    /* Optional (version 4): the member's signature of its record (inc, boot, undialable,
     * addr), opaque here (wire key "proof", exactly RUMOR_PROTO_PROOF_LEN bytes). */
    bool has_proof;
    uint8_t proof[RUMOR_PROTO_PROOF_LEN];
    /* Optional (version 5): its record says only members it dials reach it (wire key "u",
     * 1; absent = 0). */
    bool undialable;
} rumor_proto_peer_t;

typedef struct {
    uint8_t cert[RUMOR_PROTO_CERT_MAX]; /* admission certificate, opaque here */
    size_t cert_len;                    /* 1..RUMOR_PROTO_CERT_MAX */
    char addr[RUMOR_PROTO_ADDR_MAX + 1];/* the sender's listen address */
    uint64_t layout;                    /* model layout id, 0 if none */
    uint64_t caps;                      /* capability bits; none defined in version 1 */
    uint32_t inc;                       /* the sender's incarnation */
    uint64_t boot;                      /* the sender's boot id, random per run, nonzero
                                           (required from version 2) */
    uint64_t done;                      /* "done": the sender finished training at this round
                                           and only answers pulls now; 0 = not sent */
    uint64_t site;                      /* "site": the sender is behind NAT, and this names the
                                           address peers see it from (PROTOCOL.md
                                           "Reachability"); top bit clear; 0 = not sent */
    uint8_t proof[RUMOR_PROTO_PROOF_LEN]; /* "proof": the sender's signature of its record
                                           (inc, boot, undialable, addr), required from
                                           version 4 */
} rumor_msg_hello_t;

typedef struct {
    size_t count; /* 0..RUMOR_PROTO_MAX_PEERS */
    rumor_proto_peer_t peers[RUMOR_PROTO_MAX_PEERS];
} rumor_msg_peers_t;

typedef struct {
    uint32_t inc;
    size_t upd_count; /* 0..RUMOR_PROTO_MAX_UPD; 0 is sent as no "upd" key */
    rumor_proto_peer_t upd[RUMOR_PROTO_MAX_UPD];
} rumor_msg_ping_t;

typedef struct {
    uint8_t target[RUMOR_PROTO_KEY_LEN];
    char target_addr[RUMOR_PROTO_ADDR_MAX + 1]; /* wire key "ta" */
    size_t upd_count;
    rumor_proto_peer_t upd[RUMOR_PROTO_MAX_UPD];
} rumor_msg_ping_req_t;

#define RUMOR_PROTO_SEEN_MAX 45 /* an IPv6 literal's longest text form */
typedef struct {
    uint32_t ack;        /* the seq being acknowledged */
    /* Optional "seen": the IP address the probe came from, as the sender of this ack saw it
     * (digits, hex letters, '.' and ':' only; "" = not sent). */
    char seen[RUMOR_PROTO_SEEN_MAX + 1];
    bool has_target;     /* set when relaying the answer to an indirect ping */
    uint8_t target[RUMOR_PROTO_KEY_LEN];
    size_t upd_count;
    rumor_proto_peer_t upd[RUMOR_PROTO_MAX_UPD];
} rumor_msg_ack_t;

typedef struct {
    uint64_t round;
    double w;            /* push-sum weight: finite, 0 < w <= 2^20 */
    rumor_proto_codec_t codec;
    uint64_t layout;
    uint32_t chunk;      /* 0..chunks-1 */
    uint32_t chunks;     /* 1..RUMOR_PROTO_MAX_CHUNKS */
    uint64_t off;        /* first parameter of this chunk */
    uint64_t n;          /* parameters in this chunk: n >= 1, off + n <= 2^40 */
    /* Optional, only on answers to `pull`: BLAKE2b-256 (libsodium crypto_generichash,
     * unkeyed) of the whole parameter vector, the little-endian float32 parameters of all
     * the chunks in order. Opaque here: proto carries it, the node computes and checks it.
     * Such a chunk is a copy to adopt, never mixed into gossip. has_hash false = no "hash"
     * key sent. */
    bool has_hash;
    uint8_t hash[RUMOR_PROTO_HASH_LEN];
    /* Required with codec masked, absent otherwise (`bad-value`): the id of the set of peers
     * whose masks cancel in the receiver's sum (PROTOCOL.md, "Secure mixing"). */
    uint64_t mix;
    /* Compressed gossip (PROTOCOL.md, "Compressed gossip"): a piece of the sender's public
     * copy, version `ver` of lineage `lin` whose version 0 hashes to `base`; required with
     * codec topk, optional with f32 (a keyframe), absent otherwise. need: the sender holds
     * no complete copy of the receiver's (only with has_copy). */
    bool has_copy;
    uint64_t ver, lin, base;
    bool need;
    /* Frame 2. After decode, payload points into the caller's frame 2 buffer (zero copy):
     * it is valid exactly as long as that buffer (the zmq_msg_t) is, and the caller must not
     * release the frame while the message is in use. Not aligned: memcpy values out. For
     * encode, payload is not read; payload_len must be the length the codec implies (it is
     * checked, so the header never disagrees with the frame sent after it). */
    const uint8_t *payload;
    size_t payload_len;
} rumor_msg_model_t;

typedef struct {
    /* Optional reason, NUL-terminated, "" for none (then no "why" key is sent): printable
     * ASCII only (0x20..0x7e), so a peer's words can be logged without escaping. */
    char why[RUMOR_PROTO_WHY_MAX + 1];
} rumor_msg_bye_t;

/* A joiner asks one admitted neighbour for its current model; the answer, if any, is that
 * model as `model` chunks carrying `hash` (PROTOCOL.md "pull"). No frame 2. */
typedef struct {
    uint64_t layout; /* the model layout id the asker wants */
} rumor_msg_pull_t;

/* `layout`: the sender's layout text (frame 2), sent once to a member whose hello announced
 * another layout, so that both can name the first tensor that differs. The decoder checks the
 * text's bytes (printable ASCII and newlines, at most RUMOR_PROTO_MAX_LAYOUT_TEXT); that it is
 * canonical and that its id is `layout` is the receiver's to check (it parses it). */
#define RUMOR_PROTO_MAX_LAYOUT_TEXT (1024u * 1024u)
typedef struct {
    uint64_t layout;                        /* the sender's layout id (non-zero) */
    const uint8_t *text;                    /* frame 2, borrowed as a model's payload */
    size_t text_len;
} rumor_msg_layout_t;

/* Capability bits of `hello` (PROTOCOL.md, "Compatibility"). */
#define RUMOR_CAP_RELAY UINT64_C(1)       /* understands `relay` messages (end to end through a relay) */
#define RUMOR_CAP_RELAY_SERVE UINT64_C(2) /* ... and forwards them for others (--relay yes) */
#define RUMOR_CAP_UNDIALABLE UINT64_C(4)  /* nobody has dialled it: it is reached only over its own
                                             connections (gossip graphs place it beside members
                                             that can be dialled) */

/* What a hello's record says of reachability (PROTOCOL.md "Member records"): undialable when
 * caps bit 4 is set or a site is named. */
static inline bool rumor_proto_hello_undialable(const rumor_msg_hello_t *h)
{
    return (h->caps & RUMOR_CAP_UNDIALABLE) || h->site != 0;
}

/* A message between two members that cannot reach each other, through a third that reaches
 * both (PROTOCOL.md "Relays"): the end-to-end handshake (init, accept) and the sealed
 * messages (data). The relay reads only this header and forwards frame 2 untouched. */
typedef enum { RUMOR_RELAY_INIT = 1, RUMOR_RELAY_ACCEPT = 2, RUMOR_RELAY_DATA = 3 } rumor_relay_kind_t;
#define RUMOR_RELAY_TAG 16                  /* bytes the seal adds */
typedef struct {
    bool to;                                /* true: wire key "to" (forward to peer); false:
                                               "from" (a relay delivers this from peer) */
    uint8_t peer[RUMOR_PROTO_KEY_LEN];
    rumor_relay_kind_t kind;
    uint8_t eph[RUMOR_PROTO_KEY_LEN];       /* init and accept: the sender's ephemeral X25519 key */
    uint8_t proof[RUMOR_PROTO_PROOF_LEN];   /* init and accept (version 4): the sender's Ed25519 key
                                               and its signature of the handshake (PROTOCOL.md
                                               "Relays"), so that only the two ends make a session */
    uint64_t sent;                          /* init (version 4): unix ms it was signed at, nonzero */
    uint64_t ctr;                           /* data: the message counter of its session, >= 1 */
    const uint8_t *payload;                 /* data: the sealed message (frame 2, borrowed as for
                                               model), more than RUMOR_RELAY_TAG bytes */
    size_t payload_len;
} rumor_msg_relay_t;

typedef struct {
    rumor_msg_type_t type;
    uint32_t seq; /* the sender's message counter */
    union {
        rumor_msg_hello_t hello;
        rumor_msg_peers_t peers;
        rumor_msg_ping_t ping;
        rumor_msg_ping_req_t ping_req;
        rumor_msg_ack_t ack;
        rumor_msg_model_t model;
        rumor_msg_bye_t bye;
        rumor_msg_pull_t pull;
        rumor_msg_relay_t relay;
        rumor_msg_layout_t layout;
    } u;
} rumor_msg_t;

/* Encode frame 1 of msg into buf[0..cap): RUMOR_OK and *len, or RUMOR_EINVAL when msg breaks
 * the schema (the same rules the decoder applies) or the encoding would not fit in cap. A cap
 * of RUMOR_PROTO_MAX_HEADER always suffices for a valid message. */
rumor_err_t rumor_proto_encode(const rumor_msg_t *msg, uint8_t *buf, size_t cap,
                               size_t *len) RUMOR_MUST_CHECK;

/* Decode a message from frame 1 (len1 bytes) and frame 2 (payload, payload_len; payload NULL
 * when the message had no second frame; a non-NULL payload counts as a frame 2 even when
 * empty). RUMOR_OK fills *out; RUMOR_EPROTO sets *why (optional) to the reason and leaves
 * *out zeroed. For model messages out->u.model.payload borrows the caller's frame 2, see
 * rumor_msg_model_t. Never allocates. */
rumor_err_t rumor_proto_decode(rumor_msg_t *out, const uint8_t *frame1, size_t len1,
                               const uint8_t *payload, size_t payload_len,
                               rumor_proto_reject_t *why) RUMOR_MUST_CHECK;

/* Frame 2 length for n parameters in codec (for topk: topk_count pairs, 1 <= topk_count <= n;
 * ignored for other codecs). RUMOR_EINVAL for an unknown codec, n = 0, n > 2^40, a bad
 * topk_count, or a length over RUMOR_PROTO_MAX_PAYLOAD. */
rumor_err_t rumor_proto_payload_len(rumor_proto_codec_t codec, uint64_t n, uint64_t topk_count,
                                    size_t *len) RUMOR_MUST_CHECK;

/* True when s[0..len) is "tcp://A.B.C.D:PORT" or "tcp://[IPV6]:PORT", PORT 1..65535 in decimal
 * without leading zeros, at most RUMOR_PROTO_ADDR_MAX bytes. Host names are not accepted: an
 * address learnt from a peer must never make the node resolve a name. */
bool rumor_proto_addr_is_valid(const char *s, size_t len);

/* Static strings, never NULL: the wire name of a type ("ping-req"), the counter name of a
 * reject reason ("bad-version"); "?" / "unknown" for values out of the enum. */
const char *rumor_proto_type_name(rumor_msg_type_t type);
const char *rumor_proto_reject_name(rumor_proto_reject_t why);

#endif
