/* cert.c - certificates of admission to a swarm, and the revocation list (crypto.h). */
#include "crypto.h"
#include "crypto_impl.h"

#include "fileio.h"
#include <sodium.h>
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- certificates ---- */

#define CERT_OFF_AUTH 4
#define CERT_OFF_PEER 36
#define CERT_OFF_ISSUED 68
#define CERT_OFF_EXPIRES 76
#define CERT_OFF_NAME_LEN 84
#define CERT_OFF_NAME 85



const char *rumor_cert_reject_name(rumor_cert_reject_t why)
{
    switch (why) {
    case RUMOR_CERT_OK: return "ok";
    case RUMOR_CERT_MALFORMED: return "malformed";
    case RUMOR_CERT_BAD_MAGIC: return "bad-magic";
    case RUMOR_CERT_OTHER_SWARM: return "other-swarm";
    case RUMOR_CERT_BAD_SIGNATURE: return "bad-signature";
    case RUMOR_CERT_EXPIRED: return "expired";
    case RUMOR_CERT_NOT_YET_VALID: return "not-yet-valid";
    case RUMOR_CERT_KEY_MISMATCH: return "key-mismatch";
    case RUMOR_CERT_REVOKED: return "revoked";
    }
    return "unknown";
}

/* NULL when s[0..n) is UTF-8 without control characters, else what is wrong. Rejects what
 * RFC 3629 rejects (overlong forms, surrogates, beyond U+10FFFF) so one name has one
 * encoding, and controls so a name printed in a log or a comment line cannot forge a line. */
static const char *name_problem(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t c = s[i];
        size_t k;
        uint32_t min;
        if (c < 0x80) {
            if (c < 0x20 || c == 0x7f) return "contains a control character";
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf) k = 1, min = 0x80, c &= 0x1f;
        else if (c >= 0xe0 && c <= 0xef) k = 2, min = 0x800, c &= 0x0f;
        else if (c >= 0xf0 && c <= 0xf4) k = 3, min = 0x10000, c &= 0x07;
        else return "is not valid UTF-8";
        if (n - i - 1 < k) return "is not valid UTF-8";
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return "is not valid UTF-8";
            c = c << 6 | (s[i + j] & 0x3f);
        }
        if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return "is not valid UTF-8";
        if (c >= 0x80 && c <= 0x9f) return "contains a control character";
        i += k + 1;
    }
    return NULL;
}

rumor_err_t rumor_cert_name_check(const char *name, char err[RUMOR_ERR_LEN])
{
    size_t n = strlen(name);
    if (n > RUMOR_CERT_NAME_MAX)
        return rumor_fail(err, RUMOR_EINVAL, "certificate name is %zu bytes, at most %d", n, RUMOR_CERT_NAME_MAX);
    const char *why = name_problem((const uint8_t *)name, n);
    if (why) return rumor_fail(err, RUMOR_EINVAL, "certificate name %s", why);
    return RUMOR_OK;
}

rumor_err_t rumor_cert_site_check(const char *name, const char *site, char err[RUMOR_ERR_LEN])
{
    const size_t n = name ? strlen(name) : 0, m = strlen(site);
    const char *why = name_problem((const uint8_t *)site, m);
    if (why) return rumor_fail(err, RUMOR_EINVAL, "certificate site %s", why);
    if (n + m > RUMOR_CERT_NAME_MAX)
        return rumor_fail(err, RUMOR_EINVAL, "certificate name and site are %zu bytes together, at most %d", n + m,
                          RUMOR_CERT_NAME_MAX);
    return RUMOR_OK;
}

rumor_err_t rumor_cert_issue(uint8_t out[RUMOR_CERT_MAX_LEN], size_t *out_len, const rumor_authority_t *auth,
                             const uint8_t peer_key[RUMOR_KEY_LEN], const char *name, uint64_t issued_at,
                             uint64_t expires_at, char err[RUMOR_ERR_LEN])
{
    return rumor_cert_issue_at(out, out_len, auth, peer_key, name, NULL, issued_at, expires_at, err);
}

rumor_err_t rumor_cert_issue_at(uint8_t out[RUMOR_CERT_MAX_LEN], size_t *out_len, const rumor_authority_t *auth,
                                const uint8_t peer_key[RUMOR_KEY_LEN], const char *name, const char *site,
                                uint64_t issued_at, uint64_t expires_at, char err[RUMOR_ERR_LEN])
{
    if (!name) name = "";
    if (!site) site = "";
    rumor_err_t rc = rumor_cert_name_check(name, err);
    if (rc != RUMOR_OK || (*site && (rc = rumor_cert_site_check(name, site, err)) != RUMOR_OK)) return rc;
    const size_t n = strlen(name), m = strlen(site);
    if (expires_at <= issued_at)
        return rumor_fail(err, RUMOR_EINVAL, "certificate would expire (%llu) before it is issued (%llu)",
                          (unsigned long long)expires_at, (unsigned long long)issued_at);
    memcpy(out, m ? "RMC2" : "RMC1", 4);
    memcpy(out + CERT_OFF_AUTH, rumor_authority_public(auth), RUMOR_KEY_LEN);
    memcpy(out + CERT_OFF_PEER, peer_key, RUMOR_KEY_LEN);
    put_u64(out + CERT_OFF_ISSUED, issued_at);
    put_u64(out + CERT_OFF_EXPIRES, expires_at);
    out[CERT_OFF_NAME_LEN] = (uint8_t)n;
    memcpy(out + CERT_OFF_NAME, name, n);
    size_t body = CERT_OFF_NAME + n;
    if (m) {
        out[body++] = (uint8_t)m;
        memcpy(out + body, site, m);
        body += m;
    }
    rumor_authority_sign(auth, out + body, out, body);
    *out_len = body + RUMOR_CERT_SIG_LEN;
    return RUMOR_OK;
}

/* The length a certificate's own bytes give it (form 1 or 2, from its name and site lengths,
 * which need the first `got` bytes), or 0 when they cannot be one (magic, lengths). */
static size_t cert_length(const uint8_t *cert, size_t got)
{
    if (got <= CERT_OFF_NAME_LEN) return 0;
    const bool site = memcmp(cert, "RMC2", 4) == 0;
    if (!site && memcmp(cert, "RMC1", 4) != 0) return 0;
    const size_t n = cert[CERT_OFF_NAME_LEN];
    if (n > RUMOR_CERT_NAME_MAX) return 0;
    if (!site) return CERT_OFF_NAME + n + RUMOR_CERT_SIG_LEN;
    if (got <= CERT_OFF_NAME + n) return 0;
    const size_t m = cert[CERT_OFF_NAME + n];
    if (m == 0 || n + m > RUMOR_CERT_NAME_MAX) return 0;
    return CERT_OFF_NAME + n + 1 + m + RUMOR_CERT_SIG_LEN;
}

/* Structure only: lengths, magic, name, site. Fills out; no signature or time checks. */
static rumor_cert_reject_t cert_parse(const uint8_t *cert, size_t len, rumor_cert_t *out)
{
    if (len < RUMOR_CERT_MIN_LEN || len > RUMOR_CERT_MAX_LEN) return RUMOR_CERT_MALFORMED;
    if (memcmp(cert, "RMC1", 4) != 0 && memcmp(cert, "RMC2", 4) != 0) return RUMOR_CERT_BAD_MAGIC;
    if (cert_length(cert, len) != len) return RUMOR_CERT_MALFORMED;
    const size_t n = cert[CERT_OFF_NAME_LEN];
    if (name_problem(cert + CERT_OFF_NAME, n)) return RUMOR_CERT_MALFORMED;
    memcpy(out->authority, cert + CERT_OFF_AUTH, RUMOR_KEY_LEN);
    memcpy(out->peer_key, cert + CERT_OFF_PEER, RUMOR_KEY_LEN);
    out->issued_at = get_u64(cert + CERT_OFF_ISSUED);
    out->expires_at = get_u64(cert + CERT_OFF_EXPIRES);
    memcpy(out->name, cert + CERT_OFF_NAME, n);
    out->name[n] = 0;
    out->site[0] = 0;
    if (cert[3] == '2') {
        const size_t m = cert[CERT_OFF_NAME + n];
        if (name_problem(cert + CERT_OFF_NAME + n + 1, m)) return RUMOR_CERT_MALFORMED;
        memcpy(out->site, cert + CERT_OFF_NAME + n + 1, m);
        out->site[m] = 0;
    }
    if (out->expires_at <= out->issued_at) return RUMOR_CERT_MALFORMED;
    return RUMOR_CERT_OK;
}

int rumor_cert_order(const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len)
{
    rumor_cert_t ca, cb;
    const bool oa = a && cert_parse(a, a_len, &ca) == RUMOR_CERT_OK, ob = b && cert_parse(b, b_len, &cb) == RUMOR_CERT_OK;
    if (oa != ob) return oa ? 1 : -1;
    if (oa && ca.issued_at != cb.issued_at) return ca.issued_at > cb.issued_at ? 1 : -1;
    const size_t n = a_len < b_len ? a_len : b_len;
    const int c = n ? memcmp(a, b, n) : 0;
    return c ? c : (a_len > b_len) - (a_len < b_len);
}

uint64_t rumor_cert_site_class(const uint8_t *cert, size_t cert_len)
{
    rumor_cert_t c;
    if (!cert || cert_len == 0 || cert_parse(cert, cert_len, &c) != RUMOR_CERT_OK || !c.site[0]) return 0;
    uint8_t in[16 + RUMOR_CERT_NAME_MAX], h[RUMOR_HASH_LEN];
    const size_t m = strlen(c.site);
    memcpy(in, "rumor-site-1\0\0\0\0", 16);
    memcpy(in + 16, c.site, m);
    rumor_hash(h, in, 16 + m);
    uint64_t cls = 0;
    for (int i = 0; i < 8; i++) cls = cls << 8 | h[i];
    return (cls & ~(UINT64_C(1) << 63)) | 1;
}

static rumor_cert_reject_t cert_verify(const uint8_t *cert, size_t len, const uint8_t *authority_pub,
                                       const uint8_t *expected_peer_key, uint64_t now, rumor_cert_t *c)
{
    rumor_cert_reject_t why = cert_parse(cert, len, c);
    if (why != RUMOR_CERT_OK) return why;
    if (memcmp(c->authority, authority_pub, RUMOR_KEY_LEN) != 0) return RUMOR_CERT_OTHER_SWARM;
    size_t signed_len = len - RUMOR_CERT_SIG_LEN;
    if (crypto_sodium_ready(NULL) != RUMOR_OK ||
        crypto_sign_verify_detached(cert + signed_len, cert, signed_len, authority_pub) != 0)
        return RUMOR_CERT_BAD_SIGNATURE;
    /* Valid for issued-at <= now < expires-at (proto/PROTOCOL.md). Clocks of honest peers
     * disagree by seconds to minutes; a certificate issued just now by an authority whose
     * clock runs ahead must still work. No slack at the other end: an expiry is a promise
     * the authority made. Written without overflow for any u64. */
    if (c->issued_at > now && c->issued_at - now > RUMOR_CERT_SKEW) return RUMOR_CERT_NOT_YET_VALID;
    if (now >= c->expires_at) return RUMOR_CERT_EXPIRED;
    if (expected_peer_key && memcmp(c->peer_key, expected_peer_key, RUMOR_KEY_LEN) != 0)
        return RUMOR_CERT_KEY_MISMATCH;
    return RUMOR_CERT_OK;
}

rumor_err_t rumor_cert_check(const uint8_t *cert, size_t len, const uint8_t authority_pub[RUMOR_KEY_LEN],
                             const uint8_t expected_peer_key[RUMOR_KEY_LEN], uint64_t now,
                             const rumor_revoked_t *revoked, rumor_cert_t *out, rumor_cert_reject_t *why)
{
    rumor_cert_t c;
    memset(&c, 0, sizeof c);
    rumor_cert_reject_t r = cert_verify(cert, len, authority_pub, expected_peer_key, now, &c);
    if (r == RUMOR_CERT_OK && rumor_revoked_has(revoked, c.peer_key)) r = RUMOR_CERT_REVOKED;
    if (r != RUMOR_CERT_OK) memset(&c, 0, sizeof c);
    if (why) *why = r;
    if (out) *out = c;
    return r == RUMOR_CERT_OK ? RUMOR_OK : RUMOR_EAUTH;
}

rumor_err_t rumor_cert_verify(const uint8_t *cert, size_t len, const uint8_t authority_pub[RUMOR_KEY_LEN],
                              const uint8_t expected_peer_key[RUMOR_KEY_LEN], uint64_t now, rumor_cert_t *out,
                              rumor_cert_reject_t *why)
{
    return rumor_cert_check(cert, len, authority_pub, expected_peer_key, now, NULL, out, why);
}

/* "2027-03-01T12:00:00Z", or the number when the C library cannot represent the date. */
static void iso_date(char out[32], uint64_t t)
{
    struct tm tm;
    time_t tt = (time_t)t;
    if ((uint64_t)tt != t || !gmtime_r(&tt, &tm) || !strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(out, 32, "%llu", (unsigned long long)t);
}

rumor_err_t rumor_cert_save(const char *path, const uint8_t *cert, size_t len, bool replace,
                            char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc = crypto_sodium_ready(err);
    if (rc != RUMOR_OK) return rc;
    rumor_cert_t c;
    rumor_cert_reject_t why = cert_parse(cert, len, &c);
    if (why != RUMOR_CERT_OK)
        return rumor_fail(err, RUMOR_EINVAL, "%s: not writing a %s certificate", path, rumor_cert_reject_name(why));
    uint8_t padded[CERT_PADDED_MAX] = {0};
    memcpy(padded, cert, len);
    size_t plen = (len + 3) / 4 * 4;
    char z85[CERT_PADDED_MAX / 4 * 5 + 1], peer[RUMOR_KEY_Z85_LEN + 1], auth[RUMOR_KEY_Z85_LEN + 1];
    char issued[32], expires[32], text[1024];
    rc = rumor_z85_encode(z85, sizeof z85, padded, plen);
    assert(rc == RUMOR_OK);
    (void)rc;
    rumor_key_to_z85(peer, c.peer_key);
    rumor_key_to_z85(auth, c.authority);
    iso_date(issued, c.issued_at);
    iso_date(expires, c.expires_at);
    /* The name is validated (no control characters), so it cannot break out of its line. */
    char site[RUMOR_CERT_NAME_MAX + 16] = "";
    if (c.site[0]) snprintf(site, sizeof site, "# site: %s\n", c.site);
    int n = snprintf(text, sizeof text,
                     "# rumor certificate: admits the peer below to the swarm of this authority\n"
                     "# name: %s\n%s# peer: %s\n# issued: %s\n# expires: %s\n# authority: %s\n%s\n",
                     c.name[0] ? c.name : "(none)", site, peer, issued, expires, auth, z85);
    assert(n > 0 && (size_t)n < sizeof text);
    return rumor_write_atomic(path, &(rumor_piece_t){text, (uint64_t)n}, 1, 0644, replace, err);
}

rumor_err_t rumor_cert_load(uint8_t out[RUMOR_CERT_MAX_LEN], size_t *len, const char *path,
                            char err[RUMOR_ERR_LEN])
{
    char *buf = malloc(CERT_FILE_MAX);
    if (!buf) return rumor_fail(err, RUMOR_ENOMEM, "%s: out of memory", path);
    const char *line;
    size_t n, line_len, no, got;
    uint8_t padded[CERT_PADDED_MAX];
    char zerr[RUMOR_ERR_LEN];
    rumor_err_t rc = crypto_read_small_file(path, false, (uint8_t *)buf, CERT_FILE_MAX, &n, err);
    if (rc != RUMOR_OK) goto out;
    if ((rc = crypto_data_line(buf, n, path, &line, &line_len, &no, err)) != RUMOR_OK) goto out;
    if (rumor_z85_decode(padded, sizeof padded, &got, line, line_len, zerr) != RUMOR_OK) {
        rc = rumor_fail(err, RUMOR_EFORMAT, "%s: line %zu: not a certificate: %s", path, no, zerr);
        goto out;
    }
    if (got < CERT_OFF_NAME || (memcmp(padded, "RMC1", 4) != 0 && memcmp(padded, "RMC2", 4) != 0)) {
        rc = rumor_fail(err, RUMOR_EFORMAT, "%s: not a rumor certificate", path);
        goto out;
    }
    size_t cert_len = cert_length(padded, got);
    if (cert_len == 0 || cert_len > RUMOR_CERT_MAX_LEN || got != (cert_len + 3) / 4 * 4) {
        rc = rumor_fail(err, RUMOR_EFORMAT, "%s: certificate length does not match its name and site lengths", path);
        goto out;
    }
    for (size_t i = cert_len; i < got; i++)
        if (padded[i] != 0) {
            rc = rumor_fail(err, RUMOR_EFORMAT, "%s: certificate padding bytes are not zero", path);
            goto out;
        }
    memcpy(out, padded, cert_len);
    *len = cert_len;
out:
    free(buf);
    return rc;
}

uint64_t rumor_member_place(const uint8_t *cert, size_t cert_len, const uint8_t key[RUMOR_KEY_LEN])
{
    uint8_t in[16 + RUMOR_CERT_SIG_LEN], h[RUMOR_HASH_LEN];
    memcpy(in, "rumor-place-1\0\0\0", 16);
    size_t n = 16;
    if (cert_len >= RUMOR_CERT_MIN_LEN) { /* (the signature ends a certificate) */
        memcpy(in + n, cert + cert_len - RUMOR_CERT_SIG_LEN, RUMOR_CERT_SIG_LEN);
        n += RUMOR_CERT_SIG_LEN;
    } else {
        memcpy(in + n, key, RUMOR_KEY_LEN);
        n += RUMOR_KEY_LEN;
    }
    rumor_hash(h, in, n);
    uint64_t place = 0;
    for (int i = 0; i < 8; i++) place = place << 8 | h[i];
    return place ? place : 1;
}

/* ---- revocation list ---- */

struct rumor_revoked {
    uint8_t (*keys)[RUMOR_KEY_LEN]; /* sorted, unique */
    size_t count;
};

typedef struct {
    const char *name;
    size_t line_no;
    uint8_t (*keys)[RUMOR_KEY_LEN];
    size_t count, cap;
} revoked_parser_t;

/* Room for one more key (the list doubles, up to RUMOR_REVOKED_MAX). */
static rumor_err_t revoked_grow(revoked_parser_t *p, char *err)
{
    size_t cap = p->cap ? p->cap * 2 : 64;
    if (cap > RUMOR_REVOKED_MAX) cap = RUMOR_REVOKED_MAX;
    void *keys = realloc(p->keys, cap * sizeof *p->keys);
    if (!keys) return rumor_fail(err, RUMOR_ENOMEM, "%s: out of memory", p->name);
    p->keys = keys;
    p->cap = cap;
    return RUMOR_OK;
}

static rumor_err_t revoked_line(revoked_parser_t *p, const char *s, size_t n, char *err)
{
    p->line_no++;
    if (n > RUMOR_REVOKED_LINE_MAX)
        return rumor_fail(err, RUMOR_EFORMAT, "%s:%zu: line longer than %d characters", p->name, p->line_no,
                          RUMOR_REVOKED_LINE_MAX);
    size_t a = 0, b = n;
    while (a < b && crypto_is_blank(s[a])) a++;
    while (b > a && crypto_is_blank(s[b - 1])) b--;
    if (a == b || s[a] == '#') return RUMOR_OK;
    /* A key, then nothing or blanks and a '#' comment (who, why, when). '#' is a Z85
     * character, so only a blank ends the key; a line starting with '#' cannot be a key,
     * because the first character of a group is at most '%' (2^32 / 85^4 < 83). */
    size_t k = a;
    while (k < b && !crypto_is_blank(s[k])) k++;
    size_t rest = k;
    while (rest < b && crypto_is_blank(s[rest])) rest++;
    if (k - a != RUMOR_KEY_Z85_LEN || (rest < b && s[rest] != '#'))
        return rumor_fail(err, RUMOR_EFORMAT, "%s:%zu: expected a public key of %d Z85 characters", p->name,
                          p->line_no, RUMOR_KEY_Z85_LEN);
    if (p->count == RUMOR_REVOKED_MAX)
        return rumor_fail(err, RUMOR_EFORMAT, "%s:%zu: more than %d revoked keys", p->name, p->line_no,
                          RUMOR_REVOKED_MAX);
    if (p->count == p->cap && revoked_grow(p, err) != RUMOR_OK) return RUMOR_ENOMEM;
    char zerr[RUMOR_ERR_LEN];
    size_t got;
    if (rumor_z85_decode(p->keys[p->count], RUMOR_KEY_LEN, &got, s + a, k - a, zerr) != RUMOR_OK)
        return rumor_fail(err, RUMOR_EFORMAT, "%s:%zu: %s", p->name, p->line_no, zerr);
    p->count++;
    return RUMOR_OK;
}

static int key_cmp(const void *a, const void *b)
{
    return memcmp(a, b, RUMOR_KEY_LEN);
}

static rumor_err_t revoked_finish(revoked_parser_t *p, rumor_revoked_t **out, char *err)
{
    rumor_revoked_t *list = calloc(1, sizeof *list);
    if (!list) {
        free(p->keys);
        return rumor_fail(err, RUMOR_ENOMEM, "%s: out of memory", p->name);
    }
    if (p->count) qsort(p->keys, p->count, sizeof *p->keys, key_cmp);
    size_t u = 0;
    for (size_t i = 0; i < p->count; i++)
        if (u == 0 || memcmp(p->keys[u - 1], p->keys[i], RUMOR_KEY_LEN) != 0)
            memmove(p->keys[u++], p->keys[i], RUMOR_KEY_LEN);
    list->keys = p->keys;
    list->count = u;
    *out = list;
    return RUMOR_OK;
}

rumor_err_t rumor_revoked_parse(rumor_revoked_t **out, const char *text, size_t len, const char *name,
                                char err[RUMOR_ERR_LEN])
{
    *out = NULL;
    revoked_parser_t p = {.name = name};
    for (size_t i = 0; i < len;) {
        size_t end = i;
        while (end < len && text[end] != '\n') end++;
        rumor_err_t rc = revoked_line(&p, text + i, end - i, err);
        if (rc != RUMOR_OK) {
            free(p.keys);
            return rc;
        }
        i = end + 1;
    }
    return revoked_finish(&p, out, err);
}

/* Read path into p. With bad (salvaging), a line that is not a key is counted there, the first
 * such error left in err, and reading goes on; without, it ends the read. */
static rumor_err_t revoked_read(revoked_parser_t *p, const char *path, size_t *bad, char err[RUMOR_ERR_LEN])
{
    FILE *f = fopen(path, "rb");
    if (!f) return rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
    /* Streamed a line at a time through a bounded buffer: comments may make the file long,
     * but no line may make memory grow. */
    char line[RUMOR_REVOKED_LINE_MAX];
    size_t n = 0;
    bool too_long = false;
    rumor_err_t rc = RUMOR_OK;
    for (;;) {
        int c = getc(f);
        if (c == EOF || c == '\n') {
            if (c == EOF && n == 0 && !too_long) break; /* the file ended with a newline */
            /* An overlong line only needs to be reported as longer than the limit. */
            char lerr[RUMOR_ERR_LEN];
            rc = revoked_line(p, line, too_long ? RUMOR_REVOKED_LINE_MAX + 1 : n, lerr);
            if (rc == RUMOR_EFORMAT && bad) {
                if ((*bad)++ == 0) rumor_fail(err, rc, "%s", lerr);
                rc = RUMOR_OK;
            } else if (rc != RUMOR_OK) {
                rumor_fail(err, rc, "%s", lerr);
            }
            if (rc != RUMOR_OK || c == EOF) break;
            n = 0;
            too_long = false;
        } else if (n < sizeof line) {
            line[n++] = (char)c;
        } else {
            too_long = true;
        }
    }
    if (rc == RUMOR_OK && ferror(f)) rc = rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
    fclose(f);
    return rc;
}

rumor_err_t rumor_revoked_load(rumor_revoked_t **out, const char *path, char err[RUMOR_ERR_LEN])
{
    *out = NULL;
    revoked_parser_t p = {.name = path};
    rumor_err_t rc = revoked_read(&p, path, NULL, err);
    if (rc != RUMOR_OK) {
        free(p.keys);
        return rc;
    }
    return revoked_finish(&p, out, err);
}

rumor_err_t rumor_revoked_reload(rumor_revoked_t **out, const char *path, const rumor_revoked_t *last,
                                 size_t *bad_lines, char err[RUMOR_ERR_LEN])
{
    *out = NULL;
    *bad_lines = 0;
    revoked_parser_t p = {.name = path};
    rumor_err_t rc = revoked_read(&p, path, bad_lines, err);
    char ferr[RUMOR_ERR_LEN];
    if (rc == RUMOR_OK && *bad_lines == 0) return revoked_finish(&p, out, err);
    if (rc == RUMOR_ENOMEM) {
        free(p.keys);
        return rc;
    }
    /* Unreadable, or lines that are not keys: nothing the last list refused is let in (its
     * keys go first, so none is ever dropped for room), and every key the new file could say
     * (up to where it could be read) is refused too, as far as the limit allows. */
    revoked_parser_t m = {.name = path};
    size_t left_out = 0;
    for (size_t i = 0; i < (last ? last->count : 0) + p.count; i++) {
        const bool old = last && i < last->count;
        if (!old && m.count == RUMOR_REVOKED_MAX) {
            left_out++;
            continue;
        }
        if (m.count == m.cap && revoked_grow(&m, err) != RUMOR_OK) {
            free(p.keys);
            free(m.keys);
            return RUMOR_ENOMEM;
        }
        memcpy(m.keys[m.count++], old ? last->keys[i] : p.keys[i - (last ? last->count : 0)], RUMOR_KEY_LEN);
    }
    free(p.keys);
    rumor_err_t frc = revoked_finish(&m, out, ferr);
    if (frc != RUMOR_OK) return rumor_fail(err, frc, "%s", ferr);
    if (left_out) {
        char first[RUMOR_ERR_LEN];
        snprintf(first, sizeof first, "%s", err);
        return rumor_fail(err, rc != RUMOR_OK ? rc : RUMOR_EFORMAT, "%.200s; and with the previous list over the "
                          "limit of %d keys: %zu of the file's not taken (the previous list is kept whole)", first,
                          RUMOR_REVOKED_MAX, left_out);
    }
    return rc != RUMOR_OK ? rc : RUMOR_EFORMAT;
}

bool rumor_revoked_has(const rumor_revoked_t *list, const uint8_t key[RUMOR_KEY_LEN])
{
    if (!list || !list->count) return false;
    return bsearch(key, list->keys, list->count, sizeof *list->keys, key_cmp) != NULL;
}

size_t rumor_revoked_count(const rumor_revoked_t *list)
{
    return list ? list->count : 0;
}

void rumor_revoked_destroy(rumor_revoked_t **list_p)
{
    if (!list_p || !*list_p) return;
    free((*list_p)->keys);
    free(*list_p);
    *list_p = NULL;
}
