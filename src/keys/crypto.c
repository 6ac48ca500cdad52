/* crypto.c - keys, Z85, certificates, revocation lists, addresses (see crypto.h). */
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

/* Key and certificate files are small; anything bigger is not one of ours. */
#define KEY_FILE_MAX 4096

rumor_err_t crypto_sodium_ready(char *err)
{
    /* Idempotent and thread-safe; cheap after the first call. */
    if (sodium_init() < 0) return rumor_fail(err, RUMOR_ENOTSUP, "libsodium failed to initialise");
    return RUMOR_OK;
}

/* ---- Z85 ---- */

static const char z85_alphabet[86] =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

size_t rumor_z85_encoded_len(size_t len)
{
    return len / 4 * 5;
}

rumor_err_t rumor_z85_encode(char *out, size_t out_size, const uint8_t *data, size_t len)
{
    if (len % 4 != 0 || len / 4 > (SIZE_MAX - 1) / 5 || out_size < len / 4 * 5 + 1) return RUMOR_EINVAL;
    char *o = out;
    for (size_t i = 0; i < len; i += 4) {
        uint32_t v = (uint32_t)data[i] << 24 | (uint32_t)data[i + 1] << 16 | (uint32_t)data[i + 2] << 8 |
                     (uint32_t)data[i + 3];
        for (int j = 4; j >= 0; j--) {
            o[j] = z85_alphabet[v % 85];
            v /= 85;
        }
        o += 5;
    }
    *o = 0;
    return RUMOR_OK;
}

/* The value of one Z85 character, or -1. It scans the whole alphabet with masks instead of
 * indexing a table or branching on the character, so decoding a secret key takes the same
 * time whatever the key (the branch is on validity only). */
static int z85_value(unsigned char c)
{
    unsigned val = 0, found = 0;
    for (unsigned i = 0; i < 85; i++) {
        unsigned diff = (unsigned)c ^ (unsigned char)z85_alphabet[i]; /* 0..255, 0 when equal */
        unsigned eq = (diff - 1u) >> 31;                            /* 1 when equal */
        val |= i & (0u - eq);
        found |= eq;
    }
    return found ? (int)val : -1;
}

rumor_err_t rumor_z85_decode(uint8_t *out, size_t out_size, size_t *out_len, const char *text,
                             size_t text_len, char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc = RUMOR_OK;
    if (text_len % 5 != 0) {
        rc = rumor_fail(err, RUMOR_EFORMAT, "Z85 text of %zu characters: not a multiple of 5", text_len);
        goto fail;
    }
    if (text_len / 5 * 4 > out_size) {
        rc = rumor_fail(err, RUMOR_EFORMAT, "Z85 text of %zu characters: more than %zu bytes", text_len, out_size);
        goto fail;
    }
    for (size_t i = 0; i < text_len; i += 5) {
        uint64_t v = 0;
        for (size_t j = 0; j < 5; j++) {
            int d = z85_value((unsigned char)text[i + j]);
            if (d < 0) {
                rc = rumor_fail(err, RUMOR_EFORMAT, "Z85 character %zu is not in the alphabet", i + j + 1);
                goto fail;
            }
            v = v * 85 + (unsigned)d;
        }
        /* 85^5 > 2^32: five characters can spell a value no 4 bytes encode. */
        if (v > 0xffffffffu) {
            rc = rumor_fail(err, RUMOR_EFORMAT, "Z85 group at character %zu exceeds 32 bits", i + 1);
            goto fail;
        }
        uint8_t *o = out + i / 5 * 4;
        o[0] = (uint8_t)(v >> 24);
        o[1] = (uint8_t)(v >> 16);
        o[2] = (uint8_t)(v >> 8);
        o[3] = (uint8_t)v;
    }
    *out_len = text_len / 5 * 4;
    return RUMOR_OK;
fail:
    if (out_size) sodium_memzero(out, out_size);
    *out_len = 0;
    return rc;
}

/* ---- public keys ---- */

void rumor_key_to_z85(char out[RUMOR_KEY_Z85_LEN + 1], const uint8_t key[RUMOR_KEY_LEN])
{
    rumor_err_t rc = rumor_z85_encode(out, RUMOR_KEY_Z85_LEN + 1, key, RUMOR_KEY_LEN);
    assert(rc == RUMOR_OK);
    (void)rc;
}

rumor_err_t rumor_key_from_z85(uint8_t key[RUMOR_KEY_LEN], const char *text, char err[RUMOR_ERR_LEN])
{
    size_t n = strlen(text), got;
    if (n != RUMOR_KEY_Z85_LEN)
        return rumor_fail(err, RUMOR_EFORMAT, "a key is %d Z85 characters, not %zu", RUMOR_KEY_Z85_LEN, n);
    return rumor_z85_decode(key, RUMOR_KEY_LEN, &got, text, n, err);
}

void rumor_key_short_id(char out[RUMOR_SHORT_ID_LEN + 1], const uint8_t key[RUMOR_KEY_LEN])
{
    char z[RUMOR_KEY_Z85_LEN + 1];
    rumor_key_to_z85(z, key);
    memcpy(out, z, RUMOR_SHORT_ID_LEN);
    out[RUMOR_SHORT_ID_LEN] = 0;
}

/* ---- small files ---- */

/* Reads a whole small file into buf (cap bytes). A secret file is opened without following
 * a symbolic link (whoever controls the link's target would choose our key) and must grant
 * group and others nothing: ssh's rule, stricter than "not readable" because a writable key
 * file lets someone else substitute the identity. O_NONBLOCK keeps a FIFO from hanging the
 * open; fstat then refuses it like any other non-regular file. */
rumor_err_t crypto_read_small_file(const char *path, bool secret, uint8_t *buf, size_t cap, size_t *len,
                                   char *err)
{
    int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (secret ? O_NOFOLLOW : 0);
    int fd = open(path, flags);
    if (fd < 0) {
        if (secret && errno == ELOOP)
            return rumor_fail(err, RUMOR_EIO, "%s: is a symbolic link; a secret key must be a regular file", path);
        return rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
    }
    rumor_err_t rc = RUMOR_OK;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        rc = rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = rumor_fail(err, RUMOR_EIO, "%s: not a regular file", path);
        goto out;
    }
    if (secret && (st.st_mode & 077)) {
        rc = rumor_fail(err, RUMOR_EIO, "%s: permissions %04o are too open: run chmod 600 %s", path,
                        (unsigned)(st.st_mode & 07777), path);
        goto out;
    }
    if (st.st_size < 0 || (uint64_t)st.st_size > cap) {
        rc = rumor_fail(err, RUMOR_EFORMAT, "%s: %lld bytes is too large for this kind of file", path,
                        (long long)st.st_size);
        goto out;
    }
    size_t n = 0;
    for (;;) {
        if (n == cap) { /* grew since fstat */
            rc = rumor_fail(err, RUMOR_EFORMAT, "%s: too large for this kind of file", path);
            goto out;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            rc = rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
            goto out;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    *len = n;
out:
    close(fd);
    return rc;
}

bool crypto_is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* Finds the single data line of a key or certificate file: '#' lines and blank lines are
 * skipped, blanks around the line ignored. No Z85 text starts with '#' (a group's first
 * character is at most '%'), so a comment is never mistaken for data, nor data for one.
 * Errors give line numbers only: the file may hold a secret. */
rumor_err_t crypto_data_line(const char *buf, size_t len, const char *path, const char **line,
                             size_t *line_len, size_t *line_no, char *err)
{
    *line = NULL;
    size_t no = 0;
    for (size_t i = 0; i < len;) {
        size_t end = i;
        while (end < len && buf[end] != '\n') end++;
        no++;
        size_t a = i, b = end;
        while (a < b && crypto_is_blank(buf[a])) a++;
        while (b > a && crypto_is_blank(buf[b - 1])) b--;
        if (a < b && buf[a] != '#') {
            if (*line) return rumor_fail(err, RUMOR_EFORMAT, "%s: line %zu: a second key line", path, no);
            *line = buf + a;
            *line_len = b - a;
            *line_no = no;
        }
        i = end + 1;
    }
    if (!*line) return rumor_fail(err, RUMOR_EFORMAT, "%s: no key in the file (only comments)", path);
    return RUMOR_OK;
}

/* Decodes the 40-character key line of a key file into key (32 bytes). */
static rumor_err_t parse_key_file(uint8_t key[RUMOR_KEY_LEN], const char *buf, size_t len, const char *path,
                                  char *err)
{
    const char *line;
    size_t line_len, no, got;
    rumor_err_t rc = crypto_data_line(buf, len, path, &line, &line_len, &no, err);
    if (rc != RUMOR_OK) return rc;
    if (line_len != RUMOR_KEY_Z85_LEN)
        return rumor_fail(err, RUMOR_EFORMAT, "%s: line %zu: expected a key of %d Z85 characters, found %zu",
                          path, no, RUMOR_KEY_Z85_LEN, line_len);
    char zerr[RUMOR_ERR_LEN];
    if (rumor_z85_decode(key, RUMOR_KEY_LEN, &got, line, line_len, zerr) != RUMOR_OK)
        return rumor_fail(err, RUMOR_EFORMAT, "%s: line %zu: %s", path, no, zerr);
    return RUMOR_OK;
}

rumor_err_t rumor_public_key_load(uint8_t key[RUMOR_KEY_LEN], const char *arg, char err[RUMOR_ERR_LEN])
{
    char zerr[RUMOR_ERR_LEN];
    size_t n = strlen(arg);
    if (n >= 4 && strcmp(arg + n - 4, ".key") == 0)
        return rumor_fail(err, RUMOR_EINVAL, "%s is a secret key file: give the public key (.pub) instead", arg);
    /* An existing file wins: a path can be 40 characters of the Z85 alphabet too
     * ("/tmp/x/.../alice.pub"), and reading it is what its owner meant. */
    struct stat st;
    bool exists = stat(arg, &st) == 0;
    if (!exists && n == RUMOR_KEY_Z85_LEN && rumor_key_from_z85(key, arg, zerr) == RUMOR_OK) return RUMOR_OK;
    if (!exists && errno == ENOENT) {
        if (n == RUMOR_KEY_Z85_LEN)
            return rumor_fail(err, RUMOR_EINVAL, "'%s': no such file, and not a Z85 key (%s)", arg, zerr);
        return rumor_fail(err, RUMOR_EINVAL, "'%.100s': no such file, and not a public key (%d Z85 characters)",
                          arg, RUMOR_KEY_Z85_LEN);
    }
    char buf[KEY_FILE_MAX];
    size_t len;
    rumor_err_t rc = crypto_read_small_file(arg, false, (uint8_t *)buf, sizeof buf, &len, err);
    if (rc == RUMOR_OK) rc = parse_key_file(key, buf, len, arg, err);
    return rc;
}

rumor_err_t rumor_public_key_save(const char *path, const uint8_t key[RUMOR_KEY_LEN], const char *comment,
                                  bool replace, char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc = crypto_sodium_ready(err);
    if (rc != RUMOR_OK) return rc;
    if (comment && strchr(comment, '\n')) return rumor_fail(err, RUMOR_EINVAL, "%s: comment spans lines", path);
    char z[RUMOR_KEY_Z85_LEN + 1], text[512];
    rumor_key_to_z85(z, key);
    int n = comment ? snprintf(text, sizeof text, "# %s\n%s\n", comment, z) : snprintf(text, sizeof text, "%s\n", z);
    if (n < 0 || (size_t)n >= sizeof text) return rumor_fail(err, RUMOR_EINVAL, "%s: comment too long", path);
    return rumor_write_atomic(path, &(rumor_piece_t){text, (uint64_t)n}, 1, 0644, replace, err);
}

/* ---- secrets in sodium memory ---- */

/* Allocates n bytes of guarded memory (guard pages, canary, mlock where allowed). */
static uint8_t *secret_alloc(size_t n, char *err)
{
    uint8_t *p = sodium_malloc(n);
    if (!p) rumor_fail(err, RUMOR_ENOMEM, "out of secure memory (%zu bytes)", n);
    return p;
}

static void secret_free(uint8_t *p, size_t n)
{
    if (!p) return;
    sodium_mprotect_readwrite(p);
    sodium_memzero(p, n);
    sodium_free(p);
}

/* A peer's secret key file holds Z85 of "RMK2" and its 32-byte Ed25519 seed (45 characters);
 * an authority's, Z85 of its seed (40). rumor 0.1's peer files held 40 characters too, a raw
 * Curve25519 secret, which cannot sign. */
#define KEY_MAGIC "RMK2"
#define PEER_FILE_BYTES (4 + RUMOR_KEY_LEN)

/* Reads a secret key file and decodes its data line, Z85 of n bytes, into out (sodium
 * memory). The text is read straight into sodium memory with read(2), never through stdio,
 * and wiped. legacy: the sentence for a 40-character line where n is not 32 (NULL: none). */
static rumor_err_t load_secret(uint8_t *out, size_t n, const char *path, const char *legacy, char *err)
{
    uint8_t *buf = secret_alloc(KEY_FILE_MAX, err);
    if (!buf) return RUMOR_ENOMEM;
    const char *line;
    size_t len = 0, line_len, no, got;
    char zerr[RUMOR_ERR_LEN];
    const size_t want = rumor_z85_encoded_len(n);
    rumor_err_t rc = crypto_read_small_file(path, true, buf, KEY_FILE_MAX, &len, err);
    if (rc == RUMOR_OK) rc = crypto_data_line((const char *)buf, len, path, &line, &line_len, &no, err);
    if (rc != RUMOR_OK) {
    } else if (legacy && line_len == RUMOR_KEY_Z85_LEN) {
        rc = rumor_fail(err, RUMOR_EFORMAT, "%s: %s", path, legacy);
    } else if (line_len != want) {
        rc = rumor_fail(err, RUMOR_EFORMAT, "%s: line %zu: expected a key of %zu Z85 characters, found %zu", path, no,
                        want, line_len);
    } else if (rumor_z85_decode(out, n, &got, line, line_len, zerr) != RUMOR_OK) {
        rc = rumor_fail(err, RUMOR_EFORMAT, "%s: line %zu: %s", path, no, zerr);
    }
    secret_free(buf, KEY_FILE_MAX);
    return rc;
}

/* Writes "comment lines + Z85 of n secret bytes" to path with mode 0600. The text is built
 * in sodium memory too: it is the secret in another alphabet. */
static rumor_err_t save_secret(const char *path, const uint8_t *secret, size_t n, const char *comments, bool replace,
                               char *err)
{
    const size_t clen = strlen(comments), zlen = rumor_z85_encoded_len(n), cap = clen + zlen + 2;
    uint8_t *text = secret_alloc(cap, err);
    if (!text) return RUMOR_ENOMEM;
    memcpy(text, comments, clen);
    rumor_err_t rc = rumor_z85_encode((char *)text + clen, cap - clen, secret, n);
    assert(rc == RUMOR_OK);
    text[clen + zlen] = '\n';
    rc = rumor_write_atomic(path, &(rumor_piece_t){text, clen + zlen + 1}, 1, 0600, replace, err);
    secret_free(text, cap);
    return rc;
}

/* A peer's identity is an Ed25519 key pair; its Curve25519 key (CURVE's, the one
 * certificates bind) is derived from it (crypto_sign_ed25519_sk_to_curve25519). */
struct rumor_secret_key {
    uint8_t *sign;   /* crypto_sign_SECRETKEYBYTES of sodium memory: seed || Ed25519 public */
    uint8_t *secret; /* RUMOR_KEY_LEN bytes of sodium memory: the derived Curve25519 secret */
    uint8_t pub[RUMOR_KEY_LEN];
    uint8_t signer[RUMOR_KEY_LEN]; /* the Ed25519 public key */
};

rumor_secret_key_t *rumor_secret_key_from_seed(const uint8_t seed[RUMOR_KEY_LEN], char err[RUMOR_ERR_LEN])
{
    if (crypto_sodium_ready(err) != RUMOR_OK) return NULL;
    rumor_secret_key_t *k = calloc(1, sizeof *k);
    if (!k) {
        rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        return NULL;
    }
    if (!(k->sign = secret_alloc(crypto_sign_SECRETKEYBYTES, err)) || !(k->secret = secret_alloc(RUMOR_KEY_LEN, err))) {
        rumor_secret_key_destroy(&k);
        return NULL;
    }
    uint8_t check[RUMOR_KEY_LEN];
    if (crypto_sign_seed_keypair(k->signer, k->sign, seed) != 0 ||
        crypto_sign_ed25519_sk_to_curve25519(k->secret, k->sign) != 0 ||
        crypto_sign_ed25519_pk_to_curve25519(k->pub, k->signer) != 0 || crypto_scalarmult_base(check, k->secret) != 0 ||
        sodium_memcmp(check, k->pub, RUMOR_KEY_LEN) != 0) {
        rumor_fail(err, RUMOR_EINVAL, "not a usable key seed");
        rumor_secret_key_destroy(&k);
        return NULL;
    }
    sodium_mprotect_readonly(k->sign);
    sodium_mprotect_readonly(k->secret);
    return k;
}

rumor_secret_key_t *rumor_secret_key_generate(char err[RUMOR_ERR_LEN])
{
    if (crypto_sodium_ready(err) != RUMOR_OK) return NULL;
    uint8_t *seed = secret_alloc(RUMOR_KEY_LEN, err);
    if (!seed) return NULL;
    randombytes_buf(seed, RUMOR_KEY_LEN);
    rumor_secret_key_t *k = rumor_secret_key_from_seed(seed, err);
    secret_free(seed, RUMOR_KEY_LEN);
    return k;
}

rumor_err_t rumor_secret_key_load(rumor_secret_key_t **out, const char *path, char err[RUMOR_ERR_LEN])
{
    *out = NULL;
    rumor_err_t rc = crypto_sodium_ready(err);
    if (rc != RUMOR_OK) return rc;
    uint8_t *raw = secret_alloc(PEER_FILE_BYTES, err);
    if (!raw) return RUMOR_ENOMEM;
    rc = load_secret(raw, PEER_FILE_BYTES, path,
                     "a key of rumor 0.1 (Curve25519 alone), which cannot sign what this member says of itself: make "
                     "a new one (rumor keygen) and have its .pub admitted (rumor swarm admit)", err);
    if (rc == RUMOR_OK && memcmp(raw, KEY_MAGIC, 4) != 0)
        rc = rumor_fail(err, RUMOR_EFORMAT, "%s: not a rumor peer secret key (no RMK2 magic)", path);
    if (rc == RUMOR_OK && !(*out = rumor_secret_key_from_seed(raw + 4, err))) rc = RUMOR_EFORMAT;
    secret_free(raw, PEER_FILE_BYTES);
    return rc;
}

rumor_err_t rumor_secret_key_save(const rumor_secret_key_t *key, const char *path, bool replace,
                                  char err[RUMOR_ERR_LEN])
{
    char z[RUMOR_KEY_Z85_LEN + 1], comments[256];
    rumor_key_to_z85(z, key->pub);
    snprintf(comments, sizeof comments,
             "# rumor peer secret key (an Ed25519 seed; its Curve25519 key is derived): keep it private, it is this "
             "peer's identity\n# public key: %s\n",
             z);
    uint8_t *raw = secret_alloc(PEER_FILE_BYTES, err);
    if (!raw) return RUMOR_ENOMEM;
    memcpy(raw, KEY_MAGIC, 4);
    memcpy(raw + 4, key->sign, RUMOR_KEY_LEN); /* (libsodium's Ed25519 secret key: the seed, then the public key) */
    const rumor_err_t rc = save_secret(path, raw, PEER_FILE_BYTES, comments, replace, err);
    secret_free(raw, PEER_FILE_BYTES);
    return rc;
}

const uint8_t *rumor_secret_key_bytes(const rumor_secret_key_t *key)
{
    return key->secret;
}

const uint8_t *rumor_secret_key_public(const rumor_secret_key_t *key)
{
    return key->pub;
}

const uint8_t *rumor_secret_key_signer(const rumor_secret_key_t *key)
{
    return key->signer;
}

void rumor_secret_key_sign(const rumor_secret_key_t *key, uint8_t sig[RUMOR_SIG_LEN], const uint8_t *msg, size_t len)
{
    crypto_sign_detached(sig, NULL, msg, len, key->sign);
}

bool rumor_member_signed(const uint8_t key[RUMOR_KEY_LEN], const uint8_t signer[RUMOR_KEY_LEN],
                         const uint8_t sig[RUMOR_SIG_LEN], const uint8_t *msg, size_t len)
{
    uint8_t curve[RUMOR_KEY_LEN];
    return crypto_sign_ed25519_pk_to_curve25519(curve, signer) == 0 && sodium_memcmp(curve, key, RUMOR_KEY_LEN) == 0 &&
           crypto_sign_verify_detached(sig, msg, len, signer) == 0;
}

void rumor_secret_key_destroy(rumor_secret_key_t **key_p)
{
    if (!key_p || !*key_p) return;
    secret_free((*key_p)->sign, crypto_sign_SECRETKEYBYTES);
    secret_free((*key_p)->secret, RUMOR_KEY_LEN);
    free(*key_p);
    *key_p = NULL;
}

/* ---- swarm authority ---- */

struct rumor_authority {
    uint8_t *sk; /* crypto_sign_SECRETKEYBYTES of sodium memory: seed || public key */
    uint8_t pub[RUMOR_KEY_LEN];
};

static rumor_authority_t *authority_alloc(char *err)
{
    if (crypto_sodium_ready(err) != RUMOR_OK) return NULL;
    rumor_authority_t *a = calloc(1, sizeof *a);
    if (!a) {
        rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        return NULL;
    }
    if (!(a->sk = secret_alloc(crypto_sign_SECRETKEYBYTES, err))) {
        free(a);
        return NULL;
    }
    return a;
}

rumor_authority_t *rumor_authority_generate(char err[RUMOR_ERR_LEN])
{
    rumor_authority_t *a = authority_alloc(err);
    if (!a) return NULL;
    crypto_sign_keypair(a->pub, a->sk);
    sodium_mprotect_readonly(a->sk);
    return a;
}

rumor_authority_t *rumor_authority_from_seed(const uint8_t seed[RUMOR_KEY_LEN], char err[RUMOR_ERR_LEN])
{
    rumor_authority_t *a = authority_alloc(err);
    if (!a) return NULL;
    crypto_sign_seed_keypair(a->pub, a->sk, seed);
    sodium_mprotect_readonly(a->sk);
    return a;
}

static void authority_paths(const char *dir, char key[4096], char pub[4096])
{
    snprintf(key, 4096, "%s/authority.key", dir);
    snprintf(pub, 4096, "%s/authority.pub", dir);
}

rumor_err_t rumor_authority_load(rumor_authority_t **out, const char *dir, char err[RUMOR_ERR_LEN])
{
    *out = NULL;
    if (strlen(dir) > 4000) return rumor_fail(err, RUMOR_EINVAL, "%.64s...: path too long", dir);
    char key_path[4096], pub_path[4096];
    authority_paths(dir, key_path, pub_path);
    uint8_t *seed = NULL;
    rumor_authority_t *a = authority_alloc(err);
    if (!a) return RUMOR_ENOMEM;
    rumor_err_t rc;
    if (!(seed = secret_alloc(RUMOR_KEY_LEN, err))) {
        rc = RUMOR_ENOMEM;
        goto out;
    }
    if ((rc = load_secret(seed, RUMOR_KEY_LEN, key_path, NULL, err)) != RUMOR_OK) goto out;
    crypto_sign_seed_keypair(a->pub, a->sk, seed);
    sodium_mprotect_readonly(a->sk);
    if (access(pub_path, F_OK) == 0) {
        uint8_t pub[RUMOR_KEY_LEN];
        if ((rc = rumor_public_key_load(pub, pub_path, err)) != RUMOR_OK) goto out;
        if (memcmp(pub, a->pub, RUMOR_KEY_LEN) != 0) {
            rc = rumor_fail(err, RUMOR_EFORMAT, "%s does not belong to %s: the authority folder is inconsistent",
                            pub_path, key_path);
            goto out;
        }
    }
    *out = a;
    a = NULL;
out:
    secret_free(seed, RUMOR_KEY_LEN);
    rumor_authority_destroy(&a);
    return rc;
}

rumor_err_t rumor_authority_save(const rumor_authority_t *auth, const char *dir, char err[RUMOR_ERR_LEN])
{
    if (strlen(dir) > 4000) return rumor_fail(err, RUMOR_EINVAL, "%.64s...: path too long", dir);
    char key_path[4096], pub_path[4096];
    authority_paths(dir, key_path, pub_path);
    /* Check both first: half an authority folder would be worse than none. */
    if (access(key_path, F_OK) == 0) return rumor_fail(err, RUMOR_EIO, "%s already exists", key_path);
    if (access(pub_path, F_OK) == 0) return rumor_fail(err, RUMOR_EIO, "%s already exists", pub_path);
    rumor_err_t rc = rumor_make_dirs(dir, 0700, err);
    if (rc != RUMOR_OK) return rc;
    char z[RUMOR_KEY_Z85_LEN + 1], comments[256];
    rumor_key_to_z85(z, auth->pub);
    snprintf(comments, sizeof comments,
             "# rumor swarm authority secret key (Ed25519 seed): whoever holds it admits peers\n"
             "# authority public key: %s\n",
             z);
    /* libsodium's Ed25519 secret key is seed || public key: the seed is its first half. */
    if ((rc = save_secret(key_path, auth->sk, RUMOR_KEY_LEN, comments, false, err)) != RUMOR_OK) return rc;
    rc = rumor_public_key_save(pub_path, auth->pub, "rumor swarm authority public key (Ed25519): give it to members",
                               false, err);
    if (rc != RUMOR_OK) unlink(key_path);
    return rc;
}

const uint8_t *rumor_authority_public(const rumor_authority_t *auth)
{
    return auth->pub;
}

void rumor_authority_sign(const rumor_authority_t *auth, uint8_t sig[64], const uint8_t *msg, size_t len)
{
    crypto_sign_detached(sig, NULL, msg, len, auth->sk);
}

void rumor_authority_destroy(rumor_authority_t **auth_p)
{
    if (!auth_p || !*auth_p) return;
    secret_free((*auth_p)->sk, crypto_sign_SECRETKEYBYTES);
    free(*auth_p);
    *auth_p = NULL;
}

/* ---- addresses ---- */

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_alnum(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* A DNS name: labels of letters, digits and inner hyphens, 1..63 characters, 253 in all. */
static bool is_dns_name(const char *s, size_t n)
{
    if (n == 0 || n > RUMOR_HOST_MAX) return false;
    size_t label = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '.') {
            if (label == 0 || s[i - 1] == '-') return false;
            label = 0;
        } else if (is_alnum(c) || c == '-') {
            if (c == '-' && label == 0) return false;
            if (++label > 63) return false;
        } else {
            return false;
        }
    }
    return label > 0 && s[n - 1] != '-';
}

/* Parses "HOST:PORT" (s[0..n)) into a. NULL, or what is wrong. */
static const char *parse_host_port(const char *s, size_t n, rumor_addr_t *a)
{
    const char *host, *port;
    size_t host_len;
    a->ipv6 = false;
    if (n && s[0] == '[') {
        const char *close = memchr(s, ']', n);
        if (!close) return "an IPv6 address needs its closing ']'";
        host = s + 1;
        host_len = (size_t)(close - host);
        if (close + 1 == s + n || close[1] != ':') return "expected :PORT after the IPv6 address";
        port = close + 2;
        char tmp[64];
        struct in6_addr in6;
        if (host_len >= sizeof tmp) return "not a valid IPv6 address";
        memcpy(tmp, host, host_len);
        tmp[host_len] = 0;
        if (inet_pton(AF_INET6, tmp, &in6) != 1) return "not a valid IPv6 address";
        a->ipv6 = true;
    } else {
        const char *colon = NULL;
        for (size_t i = 0; i < n; i++)
            if (s[i] == ':') {
                if (colon) return "an IPv6 address goes in brackets, as in [::1]:7470";
                colon = s + i;
            }
        if (!colon) return "missing :PORT";
        host = s;
        host_len = (size_t)(colon - s);
        port = colon + 1;
        if (host_len == 0) return "missing host";
        bool numeric = true;
        for (size_t i = 0; i < host_len; i++) numeric = numeric && (is_digit(host[i]) || host[i] == '.');
        if (numeric) {
            char tmp[16];
            struct in_addr in4;
            if (host_len >= sizeof tmp) return "not a valid IPv4 address";
            memcpy(tmp, host, host_len);
            tmp[host_len] = 0;
            if (inet_pton(AF_INET, tmp, &in4) != 1) return "not a valid IPv4 address";
        } else if (!is_dns_name(host, host_len)) {
            return "the host is not an IPv4 address, [IPv6] address or host name";
        }
    }
    size_t port_len = (size_t)(s + n - port);
    if (port_len == 0) return "missing port";
    unsigned long v = 0;
    for (size_t i = 0; i < port_len; i++) {
        if (!is_digit(port[i]) || port_len > 5) return "the port is not a number 1..65535";
        v = v * 10 + (unsigned long)(port[i] - '0');
    }
    if (v < 1 || v > 65535 || port[0] == '0') return "the port is not a number 1..65535";
    memcpy(a->host, host, host_len);
    a->host[host_len] = 0;
    a->port = (uint16_t)v;
    snprintf(a->endpoint, sizeof a->endpoint, a->ipv6 ? "tcp://[%s]:%u" : "tcp://%s:%u", a->host, (unsigned)v);
    return NULL;
}

rumor_err_t rumor_addr_parse(rumor_addr_t *out, const char *text, char err[RUMOR_ERR_LEN])
{
    static const char scheme[] = "rumor://";
    rumor_addr_t a;
    memset(&a, 0, sizeof a);
    memset(out, 0, sizeof *out);
    size_t n = strlen(text);
    /* The last '@': Z85 keys may contain '@', hosts never do. */
    const char *at = strrchr(text, '@');
    if (n > RUMOR_ADDR_LEN || strncmp(text, scheme, sizeof scheme - 1) != 0 || !at)
        return rumor_fail(err, RUMOR_EINVAL, "bootstrap address '%.100s': expected rumor://KEY@HOST:PORT", text);
    const char *key = text + sizeof scheme - 1;
    size_t key_len = (size_t)(at - key), got;
    char zerr[RUMOR_ERR_LEN];
    if (key_len != RUMOR_KEY_Z85_LEN)
        return rumor_fail(err, RUMOR_EINVAL,
                          "bootstrap address '%.100s': the key is %zu characters, not %d Z85 characters", text,
                          key_len, RUMOR_KEY_Z85_LEN);
    if (rumor_z85_decode(a.key, sizeof a.key, &got, key, key_len, zerr) != RUMOR_OK)
        return rumor_fail(err, RUMOR_EINVAL, "bootstrap address '%.100s': bad key: %s", text, zerr);
    const char *why = parse_host_port(at + 1, (size_t)(text + n - at - 1), &a);
    if (why) return rumor_fail(err, RUMOR_EINVAL, "bootstrap address '%.100s': %s", text, why);
    *out = a;
    return RUMOR_OK;
}

rumor_err_t rumor_addr_format(char out[RUMOR_ADDR_LEN], const uint8_t key[RUMOR_KEY_LEN], const char *endpoint,
                              char err[RUMOR_ERR_LEN])
{
    static const char scheme[] = "tcp://";
    rumor_addr_t a;
    memset(&a, 0, sizeof a);
    out[0] = 0;
    size_t n = strlen(endpoint);
    if (n > RUMOR_ENDPOINT_LEN || strncmp(endpoint, scheme, sizeof scheme - 1) != 0)
        return rumor_fail(err, RUMOR_EINVAL, "endpoint '%.100s': expected tcp://HOST:PORT", endpoint);
    const char *why = parse_host_port(endpoint + sizeof scheme - 1, n - (sizeof scheme - 1), &a);
    if (why) return rumor_fail(err, RUMOR_EINVAL, "endpoint '%.100s': %s", endpoint, why);
    char z[RUMOR_KEY_Z85_LEN + 1];
    rumor_key_to_z85(z, key);
    snprintf(out, RUMOR_ADDR_LEN, a.ipv6 ? "rumor://%s@[%s]:%u" : "rumor://%s@%s:%u", z, a.host, (unsigned)a.port);
    return RUMOR_OK;
}

/* ---- hashing ---- */

void rumor_hash(uint8_t out[RUMOR_HASH_LEN], const void *data, size_t len)
{
    crypto_generichash(out, RUMOR_HASH_LEN, data, len, NULL, 0);
}

bool rumor_hash_equal(const uint8_t a[RUMOR_HASH_LEN], const uint8_t b[RUMOR_HASH_LEN])
{
    return sodium_memcmp(a, b, RUMOR_HASH_LEN) == 0;
}

/* ---- admission datagrams ---- */

static const uint8_t admit_magic[4] = {'R', 'M', 'A', '2'}; /* protocol version 2 */
#define ADMIT_MAC crypto_box_MACBYTES

static size_t admit_head(uint8_t *out, rumor_admit_kind_t kind, const uint8_t *from, const uint8_t *nonce)
{
    memcpy(out, admit_magic, 4);
    out[4] = (uint8_t)kind;
    memcpy(out + 5, from, RUMOR_KEY_LEN);
    memcpy(out + 5 + RUMOR_KEY_LEN, nonce, RUMOR_ADMIT_NONCE_LEN);
    return RUMOR_ADMIT_HEAD;
}

/* out = head | box(plain) with a fresh nonce; plain is at most RUMOR_ADMIT_MAX - head - MAC. */
static size_t admit_seal(uint8_t out[RUMOR_ADMIT_MAX], rumor_admit_kind_t kind, const rumor_secret_key_t *self,
                         const uint8_t *peer, const uint8_t *plain, size_t plain_len, uint8_t *nonce_out)
{
    uint8_t nonce[RUMOR_ADMIT_NONCE_LEN];
    randombytes_buf(nonce, sizeof nonce);
    size_t at = admit_head(out, kind, rumor_secret_key_public(self), nonce);
    if (crypto_box_easy(out + at, plain, plain_len, nonce, peer, rumor_secret_key_bytes(self)) != 0) return 0;
    if (nonce_out) memcpy(nonce_out, nonce, sizeof nonce);
    return at + ADMIT_MAC + plain_len;
}

/* Plaintexts start with the kind (so a datagram's kind byte cannot be changed in flight:
 * both directions share one X25519 key). A knock's is padded to a fixed size, larger than
 * any answer: the port never sends more than it was sent. */
#define KNOCK_PLAIN (RUMOR_ADMIT_KNOCK_LEN - RUMOR_ADMIT_HEAD - ADMIT_MAC)
#define KNOCK_FIXED 19                           /* kind, boot id, time, certificate length */
#define ANSWER_FIXED (1 + RUMOR_ADMIT_NONCE_LEN + 1 + 8) /* kind, knock nonce, status, boot id */

size_t rumor_admit_knock(uint8_t out[RUMOR_ADMIT_MAX], const rumor_secret_key_t *self, const uint8_t peer[RUMOR_KEY_LEN],
                         uint64_t boot, uint64_t sent_ms, const uint8_t *cert, size_t cert_len,
                         uint8_t nonce[RUMOR_ADMIT_NONCE_LEN])
{
    _Static_assert(KNOCK_FIXED + RUMOR_CERT_MAX_LEN <= KNOCK_PLAIN, "a knock holds any certificate");
    uint8_t plain[KNOCK_PLAIN] = {0};
    if (cert_len > RUMOR_CERT_MAX_LEN) cert_len = 0;
    plain[0] = RUMOR_ADMIT_KNOCK;
    put_u64(plain + 1, boot);
    put_u64(plain + 9, sent_ms);
    plain[17] = (uint8_t)(cert_len >> 8);
    plain[18] = (uint8_t)cert_len;
    memcpy(plain + KNOCK_FIXED, cert, cert_len);
    return admit_seal(out, RUMOR_ADMIT_KNOCK, self, peer, plain, sizeof plain, nonce);
}

size_t rumor_admit_answer(uint8_t out[RUMOR_ADMIT_MAX], const rumor_secret_key_t *self, const uint8_t peer[RUMOR_KEY_LEN],
                          const uint8_t knock_nonce[RUMOR_ADMIT_NONCE_LEN], uint8_t status, uint64_t boot,
                          const uint8_t *cert, size_t cert_len)
{
    uint8_t plain[ANSWER_FIXED + RUMOR_CERT_MAX_LEN];
    if (!cert || cert_len > RUMOR_CERT_MAX_LEN) cert_len = 0;
    plain[0] = RUMOR_ADMIT_ANSWER;
    memcpy(plain + 1, knock_nonce, RUMOR_ADMIT_NONCE_LEN);
    plain[1 + RUMOR_ADMIT_NONCE_LEN] = status;
    put_u64(plain + 2 + RUMOR_ADMIT_NONCE_LEN, boot);
    if (cert_len) memcpy(plain + ANSWER_FIXED, cert, cert_len);
    return admit_seal(out, RUMOR_ADMIT_ANSWER, self, peer, plain, ANSWER_FIXED + cert_len, NULL);
}

size_t rumor_admit_wrong_key(uint8_t out[RUMOR_ADMIT_MAX], const uint8_t self_pub[RUMOR_KEY_LEN],
                             const uint8_t knock_nonce[RUMOR_ADMIT_NONCE_LEN])
{
    return admit_head(out, RUMOR_ADMIT_WRONG_KEY, self_pub, knock_nonce);
}

bool rumor_admit_is_knock(const uint8_t *buf, size_t len)
{
    return len == RUMOR_ADMIT_KNOCK_LEN && memcmp(buf, admit_magic, 4) == 0 && buf[4] == RUMOR_ADMIT_KNOCK;
}

rumor_err_t rumor_admit_open(rumor_admit_msg_t *out, const rumor_secret_key_t *self, const uint8_t *buf, size_t len)
{
    memset(out, 0, sizeof *out);
    if (len < RUMOR_ADMIT_HEAD || len > RUMOR_ADMIT_MAX || memcmp(buf, admit_magic, 4) != 0) return RUMOR_EINVAL;
    const uint8_t kind = buf[4];
    memcpy(out->from, buf + 5, RUMOR_KEY_LEN);
    memcpy(out->nonce, buf + 5 + RUMOR_KEY_LEN, RUMOR_ADMIT_NONCE_LEN);
    if (kind == RUMOR_ADMIT_WRONG_KEY) {
        if (len != RUMOR_ADMIT_HEAD) return RUMOR_EINVAL;
        out->kind = RUMOR_ADMIT_WRONG_KEY;
        return RUMOR_OK;
    }
    if (kind == RUMOR_ADMIT_KNOCK) {
        if (len != RUMOR_ADMIT_KNOCK_LEN) return RUMOR_EINVAL;
    } else if (kind == RUMOR_ADMIT_ANSWER) {
        if (len < RUMOR_ADMIT_HEAD + ADMIT_MAC + ANSWER_FIXED ||
            len - RUMOR_ADMIT_HEAD - ADMIT_MAC - ANSWER_FIXED > RUMOR_CERT_MAX_LEN)
            return RUMOR_EINVAL;
    } else {
        return RUMOR_EINVAL;
    }
    uint8_t plain[RUMOR_ADMIT_MAX];
    const size_t plain_len = len - RUMOR_ADMIT_HEAD - ADMIT_MAC;
    if (crypto_box_open_easy(plain, buf + RUMOR_ADMIT_HEAD, len - RUMOR_ADMIT_HEAD, out->nonce, out->from,
                             rumor_secret_key_bytes(self)) != 0)
        return RUMOR_EAUTH;
    if (plain[0] != kind) return RUMOR_EINVAL; /* sealed as the other kind */
    out->kind = (rumor_admit_kind_t)kind;
    if (kind == RUMOR_ADMIT_KNOCK) {
        out->boot = get_u64(plain + 1);
        out->sent_ms = get_u64(plain + 9);
        const size_t cl = (size_t)plain[17] << 8 | plain[18];
        if (cl > RUMOR_CERT_MAX_LEN) return RUMOR_EINVAL;
        for (size_t i = KNOCK_FIXED + cl; i < plain_len; i++)
            if (plain[i]) return RUMOR_EINVAL; /* the padding is zeros */
        out->cert_len = cl;
        memcpy(out->cert, plain + KNOCK_FIXED, cl);
    } else {
        memcpy(out->nonce, plain + 1, RUMOR_ADMIT_NONCE_LEN); /* the knock it answers */
        out->status = plain[1 + RUMOR_ADMIT_NONCE_LEN];
        out->boot = get_u64(plain + 2 + RUMOR_ADMIT_NONCE_LEN);
        out->cert_len = plain_len - ANSWER_FIXED;
        memcpy(out->cert, plain + ANSWER_FIXED, out->cert_len);
    }
    return RUMOR_OK;
}

uint64_t rumor_random_u64(void)
{
    uint64_t v;
    (void)crypto_sodium_ready(NULL);
    randombytes_buf(&v, sizeof v);
    return v;
}

void rumor_random_bytes(void *out, size_t n)
{
    (void)crypto_sodium_ready(NULL);
    randombytes_buf(out, n);
}

uint64_t rumor_shorthash(const uint8_t key[16], const void *in, size_t len)
{
    _Static_assert(crypto_shorthash_KEYBYTES == 16 && crypto_shorthash_BYTES == 8, "SipHash-2-4");
    uint8_t h[crypto_shorthash_BYTES];
    (void)crypto_sodium_ready(NULL);
    crypto_shorthash(h, in, len, key);
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)h[i] << (8 * i);
    return v;
}

/* ---- end to end through a relay ---- */

void rumor_e2e_eph_new(rumor_e2e_eph_t *e)
{
    randombytes_buf(e->secret, sizeof e->secret);
    crypto_scalarmult_base(e->pub, e->secret);
}

rumor_err_t rumor_e2e_keys(rumor_e2e_keys_t *out, const rumor_secret_key_t *self, const rumor_e2e_eph_t *mine,
                           const uint8_t peer[RUMOR_KEY_LEN], const uint8_t peer_eph[RUMOR_KEY_LEN], bool initiator)
{
    /* ee, then initiator-static x responder-ephemeral, then initiator-ephemeral x responder-static. */
    uint8_t dh[3][crypto_scalarmult_BYTES];
    int bad = crypto_scalarmult(dh[0], mine->secret, peer_eph);
    if (initiator) {
        bad |= crypto_scalarmult(dh[1], self->secret, peer_eph);
        bad |= crypto_scalarmult(dh[2], mine->secret, peer);
    } else {
        bad |= crypto_scalarmult(dh[1], mine->secret, peer);
        bad |= crypto_scalarmult(dh[2], self->secret, peer_eph);
    }
    rumor_err_t rc = RUMOR_EAUTH;
    if (bad == 0) {
        const uint8_t *si = initiator ? self->pub : peer, *sr = initiator ? peer : self->pub;
        const uint8_t *ei = initiator ? mine->pub : peer_eph, *er = initiator ? peer_eph : mine->pub;
        uint8_t k[64];
        crypto_generichash_state st;
        static const char label[] = "rumor relay e2e v1";
        crypto_generichash_init(&st, NULL, 0, sizeof k);
        crypto_generichash_update(&st, (const uint8_t *)label, sizeof label - 1);
        crypto_generichash_update(&st, (const uint8_t *)dh, sizeof dh);
        crypto_generichash_update(&st, si, RUMOR_KEY_LEN);
        crypto_generichash_update(&st, sr, RUMOR_KEY_LEN);
        crypto_generichash_update(&st, ei, RUMOR_KEY_LEN);
        crypto_generichash_update(&st, er, RUMOR_KEY_LEN);
        crypto_generichash_final(&st, k, sizeof k);
        /* The first half seals what the initiator sends. */
        memcpy(out->tx, initiator ? k : k + 32, 32);
        memcpy(out->rx, initiator ? k + 32 : k, 32);
        sodium_memzero(k, sizeof k);
        sodium_memzero(&st, sizeof st);
        rc = RUMOR_OK;
    }
    sodium_memzero(dh, sizeof dh);
    return rc;
}

/* What a sealed message is bound to besides its key: both endpoints and its counter. */
static void e2e_ad(uint8_t ad[2 * RUMOR_KEY_LEN + 8], uint8_t nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES],
                   const uint8_t from[RUMOR_KEY_LEN], const uint8_t to[RUMOR_KEY_LEN], uint64_t ctr)
{
    memcpy(ad, from, RUMOR_KEY_LEN);
    memcpy(ad + RUMOR_KEY_LEN, to, RUMOR_KEY_LEN);
    memset(nonce, 0, crypto_aead_xchacha20poly1305_ietf_NPUBBYTES);
    for (int i = 0; i < 8; i++) ad[2 * RUMOR_KEY_LEN + i] = nonce[i] = (uint8_t)(ctr >> (8 * i));
}

_Static_assert(RUMOR_E2E_TAG == crypto_aead_xchacha20poly1305_ietf_ABYTES, "the tag's length");

void rumor_e2e_seal(uint8_t *out, const uint8_t key[32], const uint8_t from[RUMOR_KEY_LEN],
                    const uint8_t to[RUMOR_KEY_LEN], uint64_t ctr, const uint8_t *m, size_t len)
{
    uint8_t ad[2 * RUMOR_KEY_LEN + 8], nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
    e2e_ad(ad, nonce, from, to, ctr);
    crypto_aead_xchacha20poly1305_ietf_encrypt(out, NULL, m, len, ad, sizeof ad, NULL, nonce, key);
}

rumor_err_t rumor_e2e_open(uint8_t *out, const uint8_t key[32], const uint8_t from[RUMOR_KEY_LEN],
                           const uint8_t to[RUMOR_KEY_LEN], uint64_t ctr, const uint8_t *c, size_t len)
{
    if (len <= RUMOR_E2E_TAG) return RUMOR_EAUTH;
    uint8_t ad[2 * RUMOR_KEY_LEN + 8], nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
    e2e_ad(ad, nonce, from, to, ctr);
    return crypto_aead_xchacha20poly1305_ietf_decrypt(out, NULL, NULL, c, len, ad, sizeof ad, nonce, key) == 0
               ? RUMOR_OK
               : RUMOR_EAUTH;
}

void rumor_e2e_wipe(void *p, size_t len) { sodium_memzero(p, len); }

