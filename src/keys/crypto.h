/*
 * crypto.h - identities and admission: Z85 text, peer keys (Ed25519 identities and their
 * Curve25519 keys), the swarm authority (Ed25519), certificates, revocation lists, peer
 * addresses.
 *
 * This is the only module that includes sodium.h (the code style, docs/ARCHITECTURE.md);
 * everything else reaches keys through the opaque types below. A peer *is* its Curve25519
 * public key, the same key CURVE uses on the wire (derived from its Ed25519 identity, with
 * which it signs what it says of itself); a swarm is an Ed25519 authority whose
 * signature on a certificate admits a peer (docs/ARCHITECTURE.md).
 *
 * Invariants:
 *  - Secret keys, and the Z85 text they are read from or written as, only ever sit in
 *    sodium_malloc memory; they are wiped with sodium_memzero before release and appear in
 *    no error message (errors name the file and the line, never its content).
 *  - Secret key files are created 0600 atomically (temp file in the same folder opened
 *    O_CREAT|O_EXCL 0600, write, fsync, rename or link, fsync of the folder) and are refused
 *    when group or others have any access, or when they are not a regular file.
 *  - Nothing here reads a clock: certificate checks take `now` (unix seconds) from the
 *    caller, so tests and the simulator are deterministic.
 *  - Input from files or the network never asserts; it yields an error code and a sentence.
 *
 * Non-goals: the CURVE handshake itself (the network driver hands the raw keys to ZeroMQ),
 * key rotation, certificate chains (one authority signs every certificate of a swarm).
 */
#ifndef RUMOR_CRYPTO_H
#define RUMOR_CRYPTO_H

#include "base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RUMOR_KEY_Z85_LEN 40  /* Z85 characters of a 32-byte key */
#define RUMOR_SHORT_ID_LEN 8  /* characters of a node's id in logs */

/* ---- Z85 (ZeroMQ RFC 32/Z85) ---- */

/* Characters needed for len bytes (len a multiple of 4), not counting the NUL. */
size_t rumor_z85_encoded_len(size_t len);

/* Encode len bytes (a multiple of 4) into out, NUL-terminated; out_size must be at least
 * rumor_z85_encoded_len(len) + 1. RUMOR_EINVAL otherwise. */
rumor_err_t rumor_z85_encode(char *out, size_t out_size, const uint8_t *data, size_t len) RUMOR_MUST_CHECK;

/* Strict decoding of text_len characters: the length must be a multiple of 5, every
 * character in the alphabet, every 5-character group at most 2^32 - 1. Writes
 * text_len / 5 * 4 bytes to out (out_size must hold them) and sets *out_len. On error out
 * is wiped and err names the position, never the characters (the text may be a secret). */
rumor_err_t rumor_z85_decode(uint8_t *out, size_t out_size, size_t *out_len, const char *text,
                             size_t text_len, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* ---- public keys ---- */

/* out gets the 40 Z85 characters of key and a NUL. */
void rumor_key_to_z85(char out[RUMOR_KEY_Z85_LEN + 1], const uint8_t key[RUMOR_KEY_LEN]);
/* Parse exactly 40 Z85 characters (a NUL-terminated string). */
rumor_err_t rumor_key_from_z85(uint8_t key[RUMOR_KEY_LEN], const char *text,
                               char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* A node's id in logs: the first 8 characters of its Z85 public key, NUL-terminated. */
void rumor_key_short_id(char out[RUMOR_SHORT_ID_LEN + 1], const uint8_t key[RUMOR_KEY_LEN]);

/* Key files are text: optional comment lines starting with '#' (and blank lines), then one
 * line of 40 Z85 characters. Spaces, tabs and a CR around the line are ignored. */

/* arg is either a literal 40-character Z85 key or the path of a public key file (PATH.pub).
 * A path ending in ".key" is refused: that is a secret key, not what anyone should pass on. */
rumor_err_t rumor_public_key_load(uint8_t key[RUMOR_KEY_LEN], const char *arg,
                                  char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* Write a public key file (mode 0644) atomically. comment (one line, no '#', may be NULL)
 * goes first. Without replace an existing file is an error and is left alone. */
rumor_err_t rumor_public_key_save(const char *path, const uint8_t key[RUMOR_KEY_LEN],
                                  const char *comment, bool replace,
                                  char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* ---- peer secret keys: an Ed25519 identity and the Curve25519 key CurveZMQ uses ---- */

/*
 * A peer's secret is a 32-byte Ed25519 seed. Its Curve25519 key pair, the one CURVE uses and
 * certificates bind, is derived from the Ed25519 pair (crypto_sign_ed25519_sk_to_curve25519,
 * crypto_sign_ed25519_pk_to_curve25519), so a member can sign what it says of itself and
 * anyone can check the signature against the Curve25519 key its certificate binds:
 * rumor_member_signed maps the signer key to Curve25519 and compares. Sound because that map
 * takes an Edwards point A to the Montgomery u of A and -A only (u = (1 + y) / (1 - y) is one
 * to one in y, and y fixes a point up to the sign of x): a valid signature under A or -A needs
 * the discrete log a or -a, and a (the clamped scalar of the seed's hash) is exactly the
 * Curve25519 secret of the certified key, so only that key's owner can make one.
 * File form: '#' comment lines, then Z85 of "RMK2" and the seed (45 characters). A rumor 0.1
 * file (40 characters, a raw Curve25519 secret) cannot sign and is refused with what to do.
 */
#define RUMOR_SIG_LEN 64

typedef struct rumor_secret_key rumor_secret_key_t;

/* A fresh identity (a random seed). NULL on failure, with err filled. */
rumor_secret_key_t *rumor_secret_key_generate(char err[RUMOR_ERR_LEN]);
/* From a 32-byte seed (copied; the caller wipes its copy): deterministic, for tests and the
 * simulator's virtual peers. */
rumor_secret_key_t *rumor_secret_key_from_seed(const uint8_t seed[RUMOR_KEY_LEN], char err[RUMOR_ERR_LEN]);
/* Load a secret key file: refused unless it is a regular file (symbolic links included)
 * that neither group nor others can access ("PATH: permissions 0644 are too open: run
 * chmod 600 PATH"). The secret never passes through stdio buffers or ordinary memory. */
rumor_err_t rumor_secret_key_load(rumor_secret_key_t **out, const char *path,
                                  char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* Write the secret key file at path (mode 0600, atomic; a comment line carries the public
 * key). Without replace an existing file is an error and is left alone. */
rumor_err_t rumor_secret_key_save(const rumor_secret_key_t *key, const char *path, bool replace,
                                  char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* The raw 32 Curve25519 secret bytes, for ZMQ_CURVE_SECRETKEY; read-only memory, valid until
 * destroy. Never copy them anywhere that outlives the call that needs them. */
const uint8_t *rumor_secret_key_bytes(const rumor_secret_key_t *key);
/* The matching Curve25519 public key (32 bytes), for ZMQ_CURVE_PUBLICKEY, ids and
 * certificates: the peer's key everywhere. */
const uint8_t *rumor_secret_key_public(const rumor_secret_key_t *key);
/* The Ed25519 public key its signatures verify under (32 bytes). */
const uint8_t *rumor_secret_key_signer(const rumor_secret_key_t *key);
/* Ed25519 detached signature of msg. */
void rumor_secret_key_sign(const rumor_secret_key_t *key, uint8_t sig[RUMOR_SIG_LEN], const uint8_t *msg, size_t len);
/* Did the member of Curve25519 key `key` sign msg: signer maps to key, and sig verifies
 * under signer. */
bool rumor_member_signed(const uint8_t key[RUMOR_KEY_LEN], const uint8_t signer[RUMOR_KEY_LEN],
                         const uint8_t sig[RUMOR_SIG_LEN], const uint8_t *msg, size_t len);
/* Wipes and frees; accepts NULL and clears the caller's pointer. */
void rumor_secret_key_destroy(rumor_secret_key_t **key_p);

/* ---- swarm authority (Ed25519) ---- */

/* DIR/authority.key holds the 32-byte Ed25519 seed as Z85 (mode 0600); DIR/authority.pub
 * the 32-byte Ed25519 public key. Members need only authority.pub (`--swarm`). */
typedef struct rumor_authority rumor_authority_t;

rumor_authority_t *rumor_authority_generate(char err[RUMOR_ERR_LEN]);
/* Deterministic, from a seed (crypto_sign_seed_keypair): tests and known-answer vectors. */
rumor_authority_t *rumor_authority_from_seed(const uint8_t seed[RUMOR_KEY_LEN], char err[RUMOR_ERR_LEN]);
/* Load DIR/authority.key (same checks as a secret key file); if DIR/authority.pub exists it
 * must match, so a swapped file is caught before anything is signed with the wrong key. */
rumor_err_t rumor_authority_load(rumor_authority_t **out, const char *dir,
                                 char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* Create DIR (mode 0700, parents as mkdir -p) if missing and write authority.key and
 * authority.pub; refuses when either exists (the other is then not written). */
rumor_err_t rumor_authority_save(const rumor_authority_t *auth, const char *dir,
                                 char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
const uint8_t *rumor_authority_public(const rumor_authority_t *auth);
/* Ed25519 detached signature of msg (crypto_sign_detached). */
void rumor_authority_sign(const rumor_authority_t *auth, uint8_t sig[64], const uint8_t *msg, size_t len);
void rumor_authority_destroy(rumor_authority_t **auth_p);

/* ---- certificates ---- */

/*
 * Binary form (also in proto/PROTOCOL.md), integers big-endian:
 *   0  4   magic "RMC1"
 *   4  32  authority Ed25519 public key
 *   36 32  peer Curve25519 public key
 *   68 8   issued-at, unix seconds
 *   76 8   expires-at, unix seconds
 *   84 1   name length n, 0..64
 *   85 n   name: UTF-8 without control characters
 *   85+n 64 Ed25519 signature by the authority over bytes [0, 85+n)
 * Form 2 (magic "RMC2", a certificate that states its member's site) has after the name:
 *   85+n 1  site length m, 1..64 - n
 *   86+n m  site: UTF-8 without control characters (as the name)
 *   86+n+m 64 the signature, over bytes [0, 86+n+m)
 * A site is the authority's word that its members share a network (a LAN behind one NAT):
 * the gossip graph keeps them side by side (rumor_cert_site_class). Form 1 is written when
 * there is no site, so that certificates without one stay readable everywhere.
 * File form: '#' comment lines written for people (name, site, peer, dates, authority), then
 * the binary padded with zero bytes to a multiple of 4 (at most 3), as one Z85 line.
 */
#define RUMOR_CERT_NAME_MAX 64 /* a name's bytes, and a name's and a site's together */
#define RUMOR_CERT_SIG_LEN 64
#define RUMOR_CERT_MIN_LEN (85 + RUMOR_CERT_SIG_LEN)                            /* 149 */
#define RUMOR_CERT_MAX_LEN (86 + RUMOR_CERT_NAME_MAX + RUMOR_CERT_SIG_LEN)      /* 214 */
#define RUMOR_CERT_SKEW 300 /* seconds a certificate may seem to be issued in the future */

typedef struct {
    uint8_t authority[RUMOR_KEY_LEN];
    uint8_t peer_key[RUMOR_KEY_LEN];
    uint64_t issued_at, expires_at;
    char name[RUMOR_CERT_NAME_MAX + 1]; /* NUL-terminated, validated UTF-8 */
    char site[RUMOR_CERT_NAME_MAX + 1]; /* form 2's site; "" without one */
} rumor_cert_t;

/* Why a certificate was refused; names from rumor_cert_reject_name() are what logs and
 * counters use ("bad-signature"). */
typedef enum {
    RUMOR_CERT_OK = 0,
    RUMOR_CERT_MALFORMED,     /* length, name length, name encoding, dates out of order */
    RUMOR_CERT_BAD_MAGIC,     /* neither "RMC1" nor "RMC2" */
    RUMOR_CERT_OTHER_SWARM,   /* signed by another authority */
    RUMOR_CERT_BAD_SIGNATURE, /* altered, or not signed by the authority it names */
    RUMOR_CERT_EXPIRED,       /* now >= expires-at: valid while issued-at <= now < expires-at */
    RUMOR_CERT_NOT_YET_VALID, /* issued-at > now + RUMOR_CERT_SKEW */
    RUMOR_CERT_KEY_MISMATCH,  /* the peer key is not the key of the connection */
    RUMOR_CERT_REVOKED,       /* the peer key is on the revocation list */
} rumor_cert_reject_t;

const char *rumor_cert_reject_name(rumor_cert_reject_t why);

/* Check a name as certificates carry it: at most 64 bytes of UTF-8 (no overlong forms,
 * surrogates or code points above U+10FFFF) and no control characters (C0, DEL, C1). */
rumor_err_t rumor_cert_name_check(const char *name, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* Sign a certificate for peer_key; name may be NULL (empty). expires_at must be after
 * issued_at. out receives *out_len (<= RUMOR_CERT_MAX_LEN) bytes. */
rumor_err_t rumor_cert_issue(uint8_t out[RUMOR_CERT_MAX_LEN], size_t *out_len,
                             const rumor_authority_t *auth, const uint8_t peer_key[RUMOR_KEY_LEN],
                             const char *name, uint64_t issued_at, uint64_t expires_at,
                             char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* Check a site as certificates carry it: the rules of a name, and name (NULL: none) and site
 * together at most RUMOR_CERT_NAME_MAX bytes. */
rumor_err_t rumor_cert_site_check(const char *name, const char *site, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* The same as rumor_cert_issue, stating the member's site (form 2) when site is neither NULL
 * nor empty (rumor_cert_site_check). */
rumor_err_t rumor_cert_issue_at(uint8_t out[RUMOR_CERT_MAX_LEN], size_t *out_len,
                                const rumor_authority_t *auth, const uint8_t peer_key[RUMOR_KEY_LEN],
                                const char *name, const char *site, uint64_t issued_at, uint64_t expires_at,
                                char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* Which of two certificates (of one member) is the later: > 0 a, < 0 b, 0 the same bytes. The
 * later issued, then the greater bytes; one that does not parse comes before any that does. */
int rumor_cert_order(const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len);
/* The reach class of a site a certificate states (0 when cert_len is 0, or the certificate
 * states none or does not parse): the first 8 bytes, big-endian, of BLAKE2b-256 of
 * "rumor-site-1\0\0\0\0" || the site's bytes, top bit cleared and lowest bit set (own
 * classes, rumor_member_place's with the top bit set, never collide with it). */
uint64_t rumor_cert_site_class(const uint8_t *cert, size_t cert_len);

/* Verify cert[0..len) against the swarm's authority at time now. expected_peer_key (the
 * CURVE key of the connection it arrived on) may be NULL to skip that check. RUMOR_OK with
 * *out filled (out may be NULL), or RUMOR_EAUTH with *why (may be NULL) set and *out zeroed.
 * Checks in order: malformed, bad-magic, other-swarm, bad-signature, not-yet-valid, expired,
 * key-mismatch; structure is checked before the signature, the signature before anything
 * that trusts the content. */
rumor_err_t rumor_cert_verify(const uint8_t *cert, size_t len, const uint8_t authority_pub[RUMOR_KEY_LEN],
                              const uint8_t expected_peer_key[RUMOR_KEY_LEN], uint64_t now,
                              rumor_cert_t *out, rumor_cert_reject_t *why) RUMOR_MUST_CHECK;

typedef struct rumor_revoked rumor_revoked_t;

/* rumor_cert_verify, then the revocation list (NULL: none): what a node runs on a HELLO. */
rumor_err_t rumor_cert_check(const uint8_t *cert, size_t len, const uint8_t authority_pub[RUMOR_KEY_LEN],
                             const uint8_t expected_peer_key[RUMOR_KEY_LEN], uint64_t now,
                             const rumor_revoked_t *revoked, rumor_cert_t *out,
                             rumor_cert_reject_t *why) RUMOR_MUST_CHECK;

/* Write a certificate file (mode 0644, atomic) with its comments. The certificate must be
 * well formed (it is not verified). Without replace an existing file is an error. */
rumor_err_t rumor_cert_save(const char *path, const uint8_t *cert, size_t len, bool replace,
                            char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* Read a certificate file into out (*len bytes): one Z85 line, magic "RMC1" or "RMC2", length
 * from the name's (and site's) length, padding exactly what the length needs and zero. The signature is not
 * checked here: that is rumor_cert_verify's job. */
rumor_err_t rumor_cert_load(uint8_t out[RUMOR_CERT_MAX_LEN], size_t *len, const char *path,
                            char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* A member's place in the order of the gossip graph's ranks (never 0): the first 8 bytes,
 * big-endian, of BLAKE2b-256("rumor-place-1\0\0\0" || the authority's signature that ends
 * its certificate), or of ("rumor-place-1\0\0\0" || key) when cert_len is 0 (an open swarm).
 * A member cannot choose its place: the signature is the authority's (Ed25519 signatures are
 * deterministic, but nobody without the authority's key can compute one), so a key ground
 * to land beside a victim lands anywhere once certified; a new place costs a new
 * certificate. */
uint64_t rumor_member_place(const uint8_t *cert, size_t cert_len, const uint8_t key[RUMOR_KEY_LEN]);

/* ---- revocation list ---- */

/* Text, one Z85 public key per line (optionally followed by spaces and a '#' comment);
 * '#' comment lines and blank lines allowed; at most RUMOR_REVOKED_MAX keys and lines of at
 * most RUMOR_REVOKED_LINE_MAX characters. Errors say "FILE:LINE: ...". Kept sorted for
 * bsearch; duplicates are merged. Immutable once loaded: the node reloads on SIGHUP by
 * loading a new list and swapping pointers. */
#define RUMOR_REVOKED_MAX 100000
#define RUMOR_REVOKED_LINE_MAX 256

rumor_err_t rumor_revoked_load(rumor_revoked_t **out, const char *path,
                               char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* The same from memory; name is what errors call the text. */
rumor_err_t rumor_revoked_parse(rumor_revoked_t **out, const char *text, size_t len, const char *name,
                                char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* Reload on SIGHUP. A file that reads cleanly gives its list (RUMOR_OK). Otherwise *out is
 * still a list, never more permissive than before: for a file with lines that are not keys
 * (RUMOR_EFORMAT, *bad_lines of them, err names the first), the union of `last` and every key
 * the file could say; for a file that cannot be read (RUMOR_EIO, err says why), `last` and
 * whatever could be read before the error.
 * Only RUMOR_ENOMEM leaves *out NULL. */
rumor_err_t rumor_revoked_reload(rumor_revoked_t **out, const char *path, const rumor_revoked_t *last,
                                 size_t *bad_lines, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* False for a NULL list. */
bool rumor_revoked_has(const rumor_revoked_t *list, const uint8_t key[RUMOR_KEY_LEN]);
size_t rumor_revoked_count(const rumor_revoked_t *list);
void rumor_revoked_destroy(rumor_revoked_t **list_p);

/* ---- peer addresses ---- */

/* rumor://<Z85 key>@HOST:PORT, HOST an IPv4 literal, a DNS name or an IPv6 literal in
 * brackets; PORT 1..65535 in decimal without leading zeros. */
#define RUMOR_HOST_MAX 253                                       /* a DNS name's limit */
#define RUMOR_ENDPOINT_LEN (sizeof "tcp://[]:65535" + RUMOR_HOST_MAX)
#define RUMOR_ADDR_LEN (sizeof "rumor://@[]:65535" + RUMOR_KEY_Z85_LEN + RUMOR_HOST_MAX)

typedef struct {
    uint8_t key[RUMOR_KEY_LEN];
    char host[RUMOR_HOST_MAX + 1];        /* without brackets */
    uint16_t port;
    bool ipv6;                            /* the socket needs ZMQ_IPV6 to reach it */
    char endpoint[RUMOR_ENDPOINT_LEN];    /* "tcp://HOST:PORT", brackets around IPv6 */
} rumor_addr_t;

/* Errors read "bootstrap address 'TEXT': ...". */
rumor_err_t rumor_addr_parse(rumor_addr_t *out, const char *text, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* The reverse: key and a "tcp://HOST:PORT" endpoint (the same host rules; a wildcard host
 * such as "*" cannot be dialled and is refused) into out. */
rumor_err_t rumor_addr_format(char out[RUMOR_ADDR_LEN], const uint8_t key[RUMOR_KEY_LEN],
                              const char *endpoint, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* ---- hashing ---- */

#define RUMOR_HASH_LEN 32
/* BLAKE2b-256 (unkeyed) of data[0..len): a pulled model's fingerprint. */
void rumor_hash(uint8_t out[RUMOR_HASH_LEN], const void *data, size_t len);
/* Constant-time comparison of two hashes. */
bool rumor_hash_equal(const uint8_t a[RUMOR_HASH_LEN], const uint8_t b[RUMOR_HASH_LEN]);


/* ---- admission datagrams (PROTOCOL.md, "Admission") ----
 *
 * Before a node opens a CURVE connection to a peer it knocks: one UDP datagram to the peer's
 * port, sealed (crypto_box: X25519, XSalsa20-Poly1305) from the knocker's key to the peer's,
 * carrying the knocker's certificate. The peer answers, sealed the other way, with a status
 * and its own certificate. Only keys whose certificate passed this way (or in a hello) get
 * through the peer's ZAP handler, so a stranger's bytes never reach libzmq's buffers. */

#define RUMOR_ADMIT_MAX 512          /* the largest datagram either side sends or reads */
#define RUMOR_ADMIT_NONCE_LEN 24
#define RUMOR_ADMIT_HEAD 61          /* magic 4, kind 1, sender key 32, nonce 24 */
#define RUMOR_ADMIT_KNOCK_LEN 325    /* every knock, padded: more than any answer (324 at most) */

typedef enum {
    RUMOR_ADMIT_KNOCK = 1,     /* sealed: the knocker's boot id and certificate */
    RUMOR_ADMIT_ANSWER = 2,    /* sealed: the knock's nonce, a status, boot id, a certificate */
    RUMOR_ADMIT_WRONG_KEY = 3, /* not sealed: "this node's key is <sender key>" (a diagnosis) */
} rumor_admit_kind_t;

/* Answer status: admitted (RUMOR_CERT_OK), or the rumor_cert_reject_t that refused the knocker. */
#define RUMOR_ADMIT_OK 0

typedef struct {
    rumor_admit_kind_t kind;
    uint8_t from[RUMOR_KEY_LEN];                /* the sender's key (sealed kinds: proven) */
    uint8_t nonce[RUMOR_ADMIT_NONCE_LEN];       /* knock: its own; answer, wrong key: the knock's */
    uint8_t status;                             /* answer only */
    uint64_t boot;                              /* knock, answer: the sender's process id for
                                                   this run (a restart changes it) */
    uint64_t sent_ms;                           /* knock: when it was sealed, unix milliseconds
                                                   (freshness: a replayed knock is older) */
    uint8_t cert[RUMOR_CERT_MAX_LEN];           /* knock, answer (when admitted) */
    size_t cert_len;
} rumor_admit_msg_t;

/* Seal a knock from self to peer, sealed at sent_ms (unix milliseconds); nonce receives its
 * nonce (to match the answer). Returns the datagram's length (<= RUMOR_ADMIT_MAX). */
size_t rumor_admit_knock(uint8_t out[RUMOR_ADMIT_MAX], const rumor_secret_key_t *self,
                         const uint8_t peer[RUMOR_KEY_LEN], uint64_t boot, uint64_t sent_ms, const uint8_t *cert,
                         size_t cert_len, uint8_t nonce[RUMOR_ADMIT_NONCE_LEN]);
/* Whether buf could be a knock at all (its length, magic and kind), without any cryptography:
 * what a node checks before a datagram may spend its admission budget. */
bool rumor_admit_is_knock(const uint8_t *buf, size_t len);
/* Seal the answer to a knock (cert may be NULL when refusing). */
size_t rumor_admit_answer(uint8_t out[RUMOR_ADMIT_MAX], const rumor_secret_key_t *self,
                          const uint8_t peer[RUMOR_KEY_LEN], const uint8_t knock_nonce[RUMOR_ADMIT_NONCE_LEN],
                          uint8_t status, uint64_t boot, const uint8_t *cert, size_t cert_len);
/* The unsealed reply to a knock that was not sealed for self's key. */
size_t rumor_admit_wrong_key(uint8_t out[RUMOR_ADMIT_MAX], const uint8_t self_pub[RUMOR_KEY_LEN],
                             const uint8_t knock_nonce[RUMOR_ADMIT_NONCE_LEN]);
/* Read a datagram addressed to self: RUMOR_EINVAL when malformed (length, magic, kind, a
 * certificate longer than a certificate can be), RUMOR_EAUTH when a sealed kind does not
 * open with self's key (forged, altered, or sealed for another key). Never allocates. */
rumor_err_t rumor_admit_open(rumor_admit_msg_t *out, const rumor_secret_key_t *self, const uint8_t *buf,
                             size_t len) RUMOR_MUST_CHECK;
/* A random 64-bit value (a boot id). */
uint64_t rumor_random_u64(void);
/* n random bytes (libsodium's randombytes). */
void rumor_random_bytes(void *out, size_t n);
/* SipHash-2-4 of in[0..len) under a 16-byte key (libsodium's crypto_shorthash): a hash whose
 * collisions nobody without the key can aim at, for the buckets of per-source limits. */
uint64_t rumor_shorthash(const uint8_t key[16], const void *in, size_t len);

/* ---- end to end through a relay (PROTOCOL.md, "Relays") ----
 *
 * Two members that cannot reach each other talk through a third that reaches both. What
 * they send is sealed between them, so the relay can neither read, alter nor replay it. Each
 * session agrees fresh keys: both sides draw an ephemeral X25519 key pair, and the session's
 * keys hash three Diffie-Hellman values, ephemeral-ephemeral, initiator-static with
 * responder-ephemeral and initiator-ephemeral with responder-static (Noise's KK pattern), with
 * both static and both ephemeral public keys. Only the two holders of the static secrets
 * compute them, nothing repeats across sessions or runs, and a replayed handshake leads to
 * keys nobody holds. Messages are XChaCha20-Poly1305 under a per-direction key with the
 * message counter as nonce. */

#define RUMOR_E2E_TAG 16

typedef struct {
    uint8_t secret[RUMOR_KEY_LEN]; /* wiped by rumor_e2e_session_wipe */
    uint8_t pub[RUMOR_KEY_LEN];
} rumor_e2e_eph_t;

typedef struct {
    uint8_t tx[32], rx[32];        /* per direction */
} rumor_e2e_keys_t;

/* A fresh ephemeral key pair (libsodium's randombytes). */
void rumor_e2e_eph_new(rumor_e2e_eph_t *e);
/* The session's keys for self, from its ephemeral and the peer's static and ephemeral public
 * keys; initiator: self sent the init. RUMOR_EAUTH when a Diffie-Hellman value is degenerate
 * (a low-order peer key). */
rumor_err_t rumor_e2e_keys(rumor_e2e_keys_t *out, const rumor_secret_key_t *self, const rumor_e2e_eph_t *mine,
                           const uint8_t peer[RUMOR_KEY_LEN], const uint8_t peer_eph[RUMOR_KEY_LEN],
                           bool initiator) RUMOR_MUST_CHECK;
/* Seal m[0..len) from `from` to `to` as message ctr under key: out gets len + RUMOR_E2E_TAG
 * bytes. The endpoints and the counter are authenticated with it. */
void rumor_e2e_seal(uint8_t *out, const uint8_t key[32], const uint8_t from[RUMOR_KEY_LEN],
                    const uint8_t to[RUMOR_KEY_LEN], uint64_t ctr, const uint8_t *m, size_t len);
/* Open c[0..len) (len > RUMOR_E2E_TAG) into out (len - RUMOR_E2E_TAG bytes): RUMOR_EAUTH when
 * it was not sealed under key from `from` to `to` as message ctr, or was altered. */
rumor_err_t rumor_e2e_open(uint8_t *out, const uint8_t key[32], const uint8_t from[RUMOR_KEY_LEN],
                           const uint8_t to[RUMOR_KEY_LEN], uint64_t ctr, const uint8_t *c,
                           size_t len) RUMOR_MUST_CHECK;
/* Erase secrets. */
void rumor_e2e_wipe(void *p, size_t len);

/* ---- noise for differential privacy ----
 *
 * DP-SGD's Gaussian noise and its batch sampling come from a noise source. A secret source is
 * keyed from libsodium's randombytes and nothing (no seed, setting or file) reproduces it: what
 * a real node draws. A seeded source is keyed from integers, so a simulation replays exactly;
 * its noise protects nothing (anyone who knows the seed draws it too).
 *
 * The stream is ChaCha20 (crypto_stream_chacha20_ietf) with fast key erasure: each refill
 * makes 32 + 16384 bytes under the current key, the first 32 become the next key and the rest
 * is output, so the state held at any time cannot regenerate what was drawn before. The state
 * is wiped on destroy and never written anywhere.
 *
 * Normals are sound in floating point as far as this goes: uniforms are (k + 1) 2^-53 for the
 * top 53 bits k of a full random word, exact in a double and never 0 (so the log is finite;
 * 1, a radius of 0, is as likely as any other value); a normal is the sum of
 * four Box-Muller normals (both of each pair's outputs) divided by 2, the defence of Holohan
 * and Braghin 2021 that Opacus's secure mode takes against the floating-point attacks on
 * Gaussian samplers (Mironov 2012 for Laplace; Jin et al. 2022, "Are we there yet? Timing and
 * floating-point attacks on differential privacy systems"): one Box-Muller evaluation reaches
 * only a sparse, structured set of doubles, whose gaps betray the value the noise was added
 * to; a sum of four independent ones fills those gaps. Each normal costs the same work (no
 * rejection loop, so no timing channel through the number of tries). Residual limits: this is
 * not an exact sampler (a discrete Gaussian, Canonne, Kamath and Steinke 2020, would be, at
 * the cost of integer-grid gradients); libm's log, sqrt, sin and cos are not constant-time; and
 * DP-SGD rounds the noise and the noisy sum to float32, a rounding of the noisy value that
 * depends only on that value.
 */
typedef struct rumor_noise rumor_noise_t;

/* A secret source (randombytes). NULL with err when libsodium cannot start or no memory. */
rumor_noise_t *rumor_noise_new_secret(char err[RUMOR_ERR_LEN]);
/* A seeded source: the same (seed, a, b), the same stream; different ones, independent streams.
 * For simulations and tests only. */
rumor_noise_t *rumor_noise_new_seeded(uint64_t seed, uint64_t a, uint64_t b, char err[RUMOR_ERR_LEN]);
/* Whether it was made by rumor_noise_new_seeded (its noise protects nothing). */
bool rumor_noise_is_seeded(const rumor_noise_t *ns);
/* 64 random bits. */
uint64_t rumor_noise_u64(rumor_noise_t *ns);
/* Uniform in (0, 1]: (k + 1) 2^-53, k 53 random bits. */
double rumor_noise_uniform(rumor_noise_t *ns);
/* A standard normal, as described above. */
double rumor_noise_normal(rumor_noise_t *ns);
/* out[0..count) = sd times independent standard normals, rounded to float: the normals
 * rumor_noise_normal would draw one at a time from the same words, drawn 256 at a time, with
 * glibc's vector log, sin and cos (libmvec, within 4 ulp) where the CPU has AVX2 or AVX-512
 * (rumor_isa), so a seeded stream replays on the same path; about 3.5 to 4 times as fast
 * (`rumor bench dp`), most of what is left being ChaCha20's 32 bytes a normal. */
void rumor_noise_gaussian(rumor_noise_t *ns, float *out, size_t count, double sd);
/* Wipes and frees; accepts NULL and clears the caller's pointer. */
void rumor_noise_destroy(rumor_noise_t **ns_p);

#endif
