/* test_crypto.c - Z85, key files, the swarm authority, certificates, revocation lists and
 * addresses: known-answer vectors, round trips, and every refusal. */
#include "check.h"
#include "crypto.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static void path_in(char *out, size_t out_len, const char *name)
{
    snprintf(out, out_len, "%s/%s", dir, name);
}

static int write_raw(const char *path, const void *p, size_t n, mode_t mode)
{
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0) return -1;
    ssize_t w = write(fd, p, n);
    int rc = (w == (ssize_t)n && fchmod(fd, mode) == 0) ? 0 : -1;
    close(fd);
    return rc;
}

static char *read_text(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    char *buf = calloc(1, 65536);
    if (buf) {
        size_t n = fread(buf, 1, 65535, fp);
        buf[n] = 0;
    }
    fclose(fp);
    return buf;
}

static mode_t mode_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (st.st_mode & 07777) : (mode_t)-1;
}

static void hex_decode(uint8_t *out, const char *hex)
{
    for (size_t i = 0; hex[2 * i]; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
}

/* True when no 5 consecutive characters of secret_z85 appear in text: not even a fragment
 * of the secret leaks. */
static bool leaks_nothing(const char *text, const char *secret_z85)
{
    size_t n = strlen(secret_z85);
    for (size_t i = 0; i + 5 <= n; i++) {
        char frag[6];
        memcpy(frag, secret_z85 + i, 5);
        frag[5] = 0;
        if (strstr(text, frag)) return false;
    }
    return true;
}

/* Files of the test folder whose name says they are an atomic write's temp file. */
static int count_tmp_files(void)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

/* rm -rf of the test folder; it holds files, links, a FIFO and folders. */
static void remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        for (struct dirent *e; d && (e = readdir(d));) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            char sub[1024];
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            remove_tree(sub);
        }
        if (d) closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* ---- Z85 ---- */

static void test_z85(void)
{
    /* ZeroMQ RFC 32's test vector. */
    const uint8_t hello[8] = {0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B};
    char text[64];
    CHECK_RC(rumor_z85_encode(text, sizeof text, hello, 8));
    CHECK(strcmp(text, "HelloWorld") == 0);
    uint8_t back[64];
    size_t n = 0;
    CHECK_RC(rumor_z85_decode(back, sizeof back, &n, "HelloWorld", 10, NULL));
    CHECK(n == 8 && memcmp(back, hello, 8) == 0);
    CHECK(rumor_z85_encoded_len(32) == 40);

    /* Extremes: all zero and all ones bytes. */
    const uint8_t ones[4] = {0xff, 0xff, 0xff, 0xff}, zeros[4] = {0};
    CHECK_RC(rumor_z85_encode(text, sizeof text, ones, 4));
    CHECK(strcmp(text, "%nSc0") == 0);
    CHECK_RC(rumor_z85_encode(text, sizeof text, zeros, 4));
    CHECK(strcmp(text, "00000") == 0);

    /* Round trips of random lengths, multiples of 4 (0 included). */
    srand(7);
    for (int t = 0; t < 200; t++) {
        size_t len = (size_t)(rand() % 65) * 4;
        uint8_t data[256], dec[256];
        char enc[321];
        for (size_t i = 0; i < len; i++) data[i] = (uint8_t)rand();
        CHECK_RC(rumor_z85_encode(enc, sizeof enc, data, len));
        CHECK(strlen(enc) == len / 4 * 5);
        size_t got = 1;
        CHECK_RC(rumor_z85_decode(dec, sizeof dec, &got, enc, strlen(enc), NULL));
        CHECK(got == len && memcmp(dec, data, len) == 0);
    }

    /* Encoding refuses lengths that are not multiples of 4 and short buffers. */
    CHECK(rumor_z85_encode(text, sizeof text, hello, 7) == RUMOR_EINVAL);
    CHECK(rumor_z85_encode(text, 10, hello, 8) == RUMOR_EINVAL); /* no room for the NUL */

    /* Strict decoding. */
    char err[RUMOR_ERR_LEN];
    struct {
        const char *text;
        const char *why;
    } bad[] = {
        {"Hello", NULL},          /* fine: control case */
        {"HelloWorl", "multiple of 5"},
        {"Hell", "multiple of 5"},
        {"Hel~o", "not in the alphabet"},
        {"Hel o", "not in the alphabet"},
        {"Hel\"o", "not in the alphabet"},
        {"Hello\x80orld", "not in the alphabet"},
        {"#####", "exceeds 32 bits"},  /* 85^5 - 1 */
        {"%nSc1", "exceeds 32 bits"},  /* 2^32 */
        {"00000%nSd0", "exceeds 32 bits"},
    };
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(bad); i++) {
        memset(back, 0x55, sizeof back);
        rumor_err_t rc = rumor_z85_decode(back, sizeof back, &n, bad[i].text, strlen(bad[i].text), err);
        if (!bad[i].why) {
            CHECK_RC(rc);
            continue;
        }
        CHECK_MSG(rc == RUMOR_EFORMAT, "'%s' accepted", bad[i].text);
        CHECK_MSG(strstr(err, bad[i].why) != NULL, "'%s': %s", bad[i].text, err);
        CHECK(n == 0 && back[0] == 0 && back[3] == 0); /* partial output wiped */
    }
    /* An embedded NUL is a character like any other: refused. */
    CHECK(rumor_z85_decode(back, sizeof back, &n, "Hel\0o", 5, err) == RUMOR_EFORMAT);
    /* Output too small. */
    CHECK(rumor_z85_decode(back, 4, &n, "HelloWorld", 10, err) == RUMOR_EFORMAT);
}

/* ---- keys ---- */

static void test_key_files(void)
{
    char err[RUMOR_ERR_LEN], key_path[512], pub_path[512], z[RUMOR_KEY_Z85_LEN + 1];
    path_in(key_path, sizeof key_path, "peer.key");
    path_in(pub_path, sizeof pub_path, "peer.pub");

    rumor_secret_key_t *k = rumor_secret_key_generate(err);
    CHECK(k != NULL);
    if (!k) return;
    mode_t old_umask = umask(0); /* the modes are exact whatever the umask */
    CHECK_RC(rumor_secret_key_save(k, key_path, false, err));
    CHECK_RC(rumor_public_key_save(pub_path, rumor_secret_key_public(k), "a comment", false, err));
    umask(old_umask);
    CHECK(mode_of(key_path) == 0600);
    CHECK(mode_of(pub_path) == 0644);

    /* Round trip: the same secret, the same public key. */
    rumor_secret_key_t *k2 = NULL;
    CHECK_RC(rumor_secret_key_load(&k2, key_path, err));
    CHECK(k2 && memcmp(rumor_secret_key_bytes(k2), rumor_secret_key_bytes(k), RUMOR_KEY_LEN) == 0);
    CHECK(k2 && memcmp(rumor_secret_key_public(k2), rumor_secret_key_public(k), RUMOR_KEY_LEN) == 0);
    rumor_secret_key_destroy(&k2);
    CHECK(k2 == NULL);
    rumor_secret_key_destroy(&k2); /* NULL is fine */


    /* Public keys from a file or a literal. */
    uint8_t pub[RUMOR_KEY_LEN];
    CHECK_RC(rumor_public_key_load(pub, pub_path, err));
    CHECK(memcmp(pub, rumor_secret_key_public(k), RUMOR_KEY_LEN) == 0);
    rumor_key_to_z85(z, rumor_secret_key_public(k));
    memset(pub, 0, sizeof pub);
    CHECK_RC(rumor_public_key_load(pub, z, err));
    CHECK(memcmp(pub, rumor_secret_key_public(k), RUMOR_KEY_LEN) == 0);
    CHECK(rumor_public_key_load(pub, key_path, err) == RUMOR_EINVAL); /* a .key is not a public key */
    CHECK(strstr(err, "secret key") != NULL);
    CHECK(rumor_public_key_load(pub, "not-a-key", err) != RUMOR_OK);
    CHECK(strstr(err, "no such file") != NULL);

    /* Short id: the first 8 characters of the Z85 key. */
    char id[RUMOR_SHORT_ID_LEN + 1];
    rumor_key_short_id(id, rumor_secret_key_public(k));
    CHECK(strlen(id) == 8 && strncmp(id, z, 8) == 0);

    /* Never overwritten without replace; replaced with it. */
    char *before = read_text(key_path);
    rumor_secret_key_t *other = rumor_secret_key_generate(err);
    CHECK(rumor_secret_key_save(other, key_path, false, err) == RUMOR_EIO);
    CHECK(strstr(err, "already exists") != NULL);
    char *after = read_text(key_path);
    CHECK(before && after && strcmp(before, after) == 0);
    free(after);
    CHECK_RC(rumor_secret_key_save(other, key_path, true, err));
    CHECK(mode_of(key_path) == 0600);
    CHECK_RC(rumor_secret_key_load(&k2, key_path, err));
    CHECK(k2 && memcmp(rumor_secret_key_public(k2), rumor_secret_key_public(other), RUMOR_KEY_LEN) == 0);
    rumor_secret_key_destroy(&k2);
    rumor_secret_key_destroy(&other);
    CHECK_RC(rumor_secret_key_save(k, key_path, true, err));
    free(before);

    CHECK(count_tmp_files() == 0); /* no temp files left behind */

    /* Too open: refused with the chmod hint, for any group or other bit. */
    chmod(key_path, 0644);
    CHECK(rumor_secret_key_load(&k2, key_path, err) != RUMOR_OK && k2 == NULL);
    char want[1200];
    snprintf(want, sizeof want, "%s: permissions 0644 are too open: run chmod 600 %s", key_path, key_path);
    CHECK_MSG(strcmp(err, want) == 0, "%s", err);
    chmod(key_path, 0640);
    CHECK(rumor_secret_key_load(&k2, key_path, err) != RUMOR_OK);
    CHECK(strstr(err, "0640 are too open") != NULL);
    chmod(key_path, 0620); /* group-writable: someone else could swap the identity */
    CHECK(rumor_secret_key_load(&k2, key_path, err) != RUMOR_OK);
    chmod(key_path, 0400);
    CHECK_RC(rumor_secret_key_load(&k2, key_path, err));
    rumor_secret_key_destroy(&k2);
    chmod(key_path, 0600);

    /* A symbolic link (even to a good key), a folder, a FIFO: not regular files. */
    char link_path[512], fifo_path[512];
    path_in(link_path, sizeof link_path, "link.key");
    CHECK(symlink(key_path, link_path) == 0);
    CHECK(rumor_secret_key_load(&k2, link_path, err) != RUMOR_OK && k2 == NULL);
    CHECK_MSG(strstr(err, "symbolic link") != NULL, "%s", err);
    CHECK(rumor_secret_key_load(&k2, dir, err) != RUMOR_OK);
    CHECK_MSG(strstr(err, "not a regular file") != NULL, "%s", err);
    path_in(fifo_path, sizeof fifo_path, "fifo.key");
    CHECK(mkfifo(fifo_path, 0600) == 0);
    CHECK(rumor_secret_key_load(&k2, fifo_path, err) != RUMOR_OK); /* and does not hang */
    CHECK_MSG(strstr(err, "not a regular file") != NULL, "%s", err);
    char missing[512];
    path_in(missing, sizeof missing, "missing.key");
    CHECK(rumor_secret_key_load(&k2, missing, err) == RUMOR_EIO);

    rumor_secret_key_destroy(&k);
}

/* Broken secret key files: every error names the file and never shows the key. */
static void test_secret_never_in_errors(void)
{
    char err[RUMOR_ERR_LEN], path[512], text[512];
    path_in(path, sizeof path, "broken.key");
    rumor_secret_key_t *k = rumor_secret_key_generate(err);
    CHECK(k != NULL);
    if (!k) return;
    /* z: the file's data line (Z85 of RMK2 and the seed, 45 characters). */
    char z[64] = "";
    CHECK_RC(rumor_secret_key_save(k, path, true, err));
    char *saved = read_text(path), *at = saved ? strrchr(saved, '\n') : NULL;
    if (at) *at = 0;
    at = saved ? strrchr(saved, '\n') : NULL;
    if (at && strlen(at + 1) == 45) snprintf(z, sizeof z, "%s", at + 1);
    free(saved);
    CHECK_MSG(strlen(z) == 45, "the key line: %s", z);
    const char *formats[] = {
        "# two keys\n%s\n%s\n",   /* a second key line */
        "%sx\n",                  /* 46 characters */
        "%.44s~\n",               /* a character outside the alphabet */
        "%.44s\n",                /* 44 characters */
        "%.40s#####\n",           /* a group that overflows */
        "%s %s\n",                /* two keys on one line */
        "%.5s%.40s\n",            /* 45 characters without the RMK2 magic */
    };
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(formats); i++) {
        snprintf(text, sizeof text, formats[i], i + 1 == RUMOR_ARRAY_LEN(formats) ? "00000" : z, z);
        CHECK(write_raw(path, text, strlen(text), 0600) == 0);
        rumor_secret_key_t *k2 = NULL;
        err[0] = 0;
        CHECK_MSG(rumor_secret_key_load(&k2, path, err) == RUMOR_EFORMAT, "case %zu", i);
        CHECK(k2 == NULL);
        CHECK_MSG(strstr(err, path) != NULL, "case %zu: %s", i, err);
        CHECK_MSG(leaks_nothing(err, z), "case %zu leaks: %s", i, err);
    }
    /* Too open: the error, with the key still in the file, shows none of it. */
    snprintf(text, sizeof text, "%s\n", z);
    CHECK(write_raw(path, text, strlen(text), 0644) == 0);
    rumor_secret_key_t *k2 = NULL;
    CHECK(rumor_secret_key_load(&k2, path, err) != RUMOR_OK);
    CHECK(leaks_nothing(err, z));
    /* A comment-only file. */
    CHECK(write_raw(path, "# nothing\n\n", 11, 0600) == 0);
    CHECK(rumor_secret_key_load(&k2, path, err) == RUMOR_EFORMAT);
    CHECK(strstr(err, "no key") != NULL);
    /* CRLF line ends and surrounding blanks are fine. */
    snprintf(text, sizeof text, "# windows\r\n  %s \r\n", z);
    CHECK(write_raw(path, text, strlen(text), 0600) == 0);
    CHECK_RC(rumor_secret_key_load(&k2, path, err));
    CHECK(k2 && memcmp(rumor_secret_key_bytes(k2), rumor_secret_key_bytes(k), RUMOR_KEY_LEN) == 0);
    rumor_secret_key_destroy(&k2);
    /* A rumor 0.1 key (40 characters, a raw Curve25519 secret): refused with what to do. */
    char old[RUMOR_KEY_Z85_LEN + 1];
    rumor_key_to_z85(old, rumor_secret_key_bytes(k));
    snprintf(text, sizeof text, "# rumor peer secret key (Curve25519)\n%s\n", old);
    CHECK(write_raw(path, text, strlen(text), 0600) == 0);
    CHECK(rumor_secret_key_load(&k2, path, err) == RUMOR_EFORMAT && k2 == NULL);
    CHECK_MSG(strstr(err, "a key of rumor 0.1") && strstr(err, "rumor keygen") && strstr(err, "rumor swarm admit") &&
              leaks_nothing(err, old), "%s", err);
    rumor_secret_key_destroy(&k);
}

/* ---- Ed25519 known answer: RFC 8032 section 7.1, TEST 1 ---- */

static void rfc8032_test1(uint8_t seed[32], uint8_t pub[32], uint8_t sig[64])
{
    hex_decode(seed, "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60");
    hex_decode(pub, "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
    hex_decode(sig, "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e"
                    "39701cf9b46bd25bf5f0595bbe24655141438e7a100b");
}

static void test_ed25519_rfc8032(void)
{
    uint8_t seed[32], pub[32], sig[64], got[64];
    rfc8032_test1(seed, pub, sig);
    char err[RUMOR_ERR_LEN];
    rumor_authority_t *a = rumor_authority_from_seed(seed, err);
    CHECK(a != NULL);
    if (!a) return;
    CHECK(memcmp(rumor_authority_public(a), pub, 32) == 0);
    rumor_authority_sign(a, got, (const uint8_t *)"", 0);
    CHECK(memcmp(got, sig, 64) == 0);
    rumor_authority_destroy(&a);
    CHECK(a == NULL);
}

/* A peer key from RFC 8032's TEST 1 seed: the Ed25519 pair is the RFC's, the Curve25519 key
 * its map; member signatures verify only for the key that signed, on the message signed. */
static void test_member_signatures(void)
{
    uint8_t seed[32], pub[32], sig[64], got[64];
    rfc8032_test1(seed, pub, sig);
    char err[RUMOR_ERR_LEN];
    rumor_secret_key_t *k = rumor_secret_key_from_seed(seed, err), *other = rumor_secret_key_generate(err);
    CHECK(k != NULL && other != NULL);
    if (!k || !other) return;
    CHECK(memcmp(rumor_secret_key_signer(k), pub, 32) == 0);
    rumor_secret_key_sign(k, got, (const uint8_t *)"", 0);
    CHECK(memcmp(got, sig, 64) == 0);
    /* The Curve25519 pair is one pair: its public key is its secret's, and a box opens. */
    uint8_t base[RUMOR_KEY_LEN];
    CHECK(crypto_scalarmult_base(base, rumor_secret_key_bytes(k)) == 0 &&
          memcmp(base, rumor_secret_key_public(k), RUMOR_KEY_LEN) == 0);
    rumor_secret_key_t *again = rumor_secret_key_from_seed(seed, err);
    CHECK(again && memcmp(rumor_secret_key_public(again), rumor_secret_key_public(k), RUMOR_KEY_LEN) == 0);
    rumor_secret_key_destroy(&again);

    const uint8_t msg[] = "carol alive at incarnation 7";
    rumor_secret_key_sign(k, got, msg, sizeof msg);
    const uint8_t *key = rumor_secret_key_public(k), *signer = rumor_secret_key_signer(k);
    CHECK(rumor_member_signed(key, signer, got, msg, sizeof msg));
    uint8_t bad[sizeof msg];
    memcpy(bad, msg, sizeof msg);
    bad[sizeof msg - 2] ^= 1; /* incarnation 6 */
    CHECK(!rumor_member_signed(key, signer, got, bad, sizeof bad));
    got[10] ^= 0x40;
    CHECK(!rumor_member_signed(key, signer, got, msg, sizeof msg));
    got[10] ^= 0x40;
    /* Another member's key with this signer, this key with another's signer (and signature). */
    CHECK(!rumor_member_signed(rumor_secret_key_public(other), signer, got, msg, sizeof msg));
    uint8_t theirs[64];
    rumor_secret_key_sign(other, theirs, msg, sizeof msg);
    CHECK(!rumor_member_signed(key, rumor_secret_key_signer(other), theirs, msg, sizeof msg));
    CHECK(rumor_member_signed(rumor_secret_key_public(other), rumor_secret_key_signer(other), theirs, msg, sizeof msg));
    /* A signer that is no point (all ones) or of small order (zero) maps to no key. */
    uint8_t junk[32];
    memset(junk, 0xff, sizeof junk);
    CHECK(!rumor_member_signed(key, junk, got, msg, sizeof msg));
    memset(junk, 0, sizeof junk);
    CHECK(!rumor_member_signed(key, junk, got, msg, sizeof msg));

    /* The file: 45 characters of RMK2 and the seed; loads back to the same identity. */
    char path[512];
    path_in(path, sizeof path, "rfc.key");
    CHECK_RC(rumor_secret_key_save(k, path, false, err));
    rumor_secret_key_t *back = NULL;
    CHECK_RC(rumor_secret_key_load(&back, path, err));
    CHECK(back && memcmp(rumor_secret_key_signer(back), pub, 32) == 0 &&
          memcmp(rumor_secret_key_public(back), key, RUMOR_KEY_LEN) == 0);
    rumor_secret_key_destroy(&back);
    rumor_secret_key_destroy(&k);
    rumor_secret_key_destroy(&other);
}

/* ---- authority folder ---- */

static void test_authority_dir(void)
{
    char err[RUMOR_ERR_LEN], sw[512], key_path[600], pub_path[600];
    path_in(sw, sizeof sw, "swarm/auth");
    snprintf(key_path, sizeof key_path, "%s/authority.key", sw);
    snprintf(pub_path, sizeof pub_path, "%s/authority.pub", sw);
    rumor_authority_t *a = rumor_authority_generate(err);
    CHECK(a != NULL);
    if (!a) return;
    CHECK_RC(rumor_authority_save(a, sw, err));
    CHECK(mode_of(sw) == 0700);
    CHECK(mode_of(key_path) == 0600);
    CHECK(mode_of(pub_path) == 0644);
    CHECK(rumor_authority_save(a, sw, err) != RUMOR_OK); /* refuses to replace */
    CHECK(strstr(err, "already exists") != NULL);

    rumor_authority_t *b = NULL;
    CHECK_RC(rumor_authority_load(&b, sw, err));
    CHECK(b && memcmp(rumor_authority_public(a), rumor_authority_public(b), 32) == 0);
    /* The same key signs the same bytes the same way (Ed25519 is deterministic). */
    uint8_t s1[64], s2[64];
    rumor_authority_sign(a, s1, (const uint8_t *)"msg", 3);
    if (b) rumor_authority_sign(b, s2, (const uint8_t *)"msg", 3);
    CHECK(b && memcmp(s1, s2, 64) == 0);
    rumor_authority_destroy(&b);
    uint8_t pub[32];
    CHECK_RC(rumor_public_key_load(pub, pub_path, err));
    CHECK(memcmp(pub, rumor_authority_public(a), 32) == 0);

    /* A swapped authority.pub is caught. */
    rumor_authority_t *c = rumor_authority_generate(err);
    CHECK_RC(rumor_public_key_save(pub_path, rumor_authority_public(c), NULL, true, err));
    CHECK(rumor_authority_load(&b, sw, err) != RUMOR_OK && b == NULL);
    CHECK(strstr(err, "does not belong") != NULL);
    rumor_authority_destroy(&c);
    /* Too open. */
    CHECK_RC(rumor_public_key_save(pub_path, rumor_authority_public(a), NULL, true, err));
    chmod(key_path, 0644);
    CHECK(rumor_authority_load(&b, sw, err) != RUMOR_OK);
    CHECK(strstr(err, "too open") != NULL);
    chmod(key_path, 0600);
    rumor_authority_destroy(&a);
}

/* ---- certificates ---- */

/* A certificate laid out by hand and signed by a, for contents rumor_cert_issue refuses. */
static size_t craft(uint8_t *out, const rumor_authority_t *a, const uint8_t *peer, const uint8_t *name,
                    size_t name_len, uint64_t issued, uint64_t expires)
{
    memcpy(out, "RMC1", 4);
    memcpy(out + 4, rumor_authority_public(a), 32);
    memcpy(out + 36, peer, 32);
    for (int i = 0; i < 8; i++) {
        out[68 + i] = (uint8_t)(issued >> (56 - 8 * i));
        out[76 + i] = (uint8_t)(expires >> (56 - 8 * i));
    }
    out[84] = (uint8_t)name_len;
    memcpy(out + 85, name, name_len);
    rumor_authority_sign(a, out + 85 + name_len, out, 85 + name_len);
    return 85 + name_len + 64;
}

static rumor_cert_reject_t verdict(const uint8_t *cert, size_t len, const uint8_t *auth, const uint8_t *peer,
                                   uint64_t now)
{
    rumor_cert_t c;
    rumor_cert_reject_t why = RUMOR_CERT_OK;
    rumor_err_t rc = rumor_cert_verify(cert, len, auth, peer, now, &c, &why);
    CHECK((rc == RUMOR_OK) == (why == RUMOR_CERT_OK));
    if (rc != RUMOR_OK) CHECK(c.issued_at == 0 && c.name[0] == 0); /* nothing half-trusted */
    return why;
}

/* A certificate through its file form: saved at path and loaded back, the same bytes. */
static void file_round_trip(const char *path, const uint8_t *cert, size_t len)
{
    char err[RUMOR_ERR_LEN];
    uint8_t back[RUMOR_CERT_MAX_LEN];
    size_t back_len = 0;
    CHECK_RC(rumor_cert_save(path, cert, len, true, err));
    CHECK_RC(rumor_cert_load(back, &back_len, path, err));
    CHECK(back_len == len && memcmp(back, cert, len) == 0);
}

static void test_certificates(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_authority_t *a = rumor_authority_generate(err), *other = rumor_authority_generate(err);
    rumor_secret_key_t *peer = rumor_secret_key_generate(err), *stranger = rumor_secret_key_generate(err);
    CHECK(a && other && peer && stranger);
    if (!a || !other || !peer || !stranger) return;
    const uint8_t *apub = rumor_authority_public(a), *pk = rumor_secret_key_public(peer);
    const uint64_t t0 = 1767225600; /* 2026-01-01 */
    const uint64_t t1 = t0 + 365 * 86400;

    uint8_t cert[RUMOR_CERT_MAX_LEN], bad[RUMOR_CERT_MAX_LEN + 8];
    size_t len = 0;
    CHECK_RC(rumor_cert_issue(cert, &len, a, pk, "gpu-box-1", t0, t1, err));
    CHECK(len == 85 + 9 + 64);

    /* Round trip. */
    rumor_cert_t c;
    rumor_cert_reject_t why = RUMOR_CERT_MALFORMED;
    CHECK_RC(rumor_cert_verify(cert, len, apub, pk, t0 + 10, &c, &why));
    CHECK(why == RUMOR_CERT_OK);
    CHECK(memcmp(c.peer_key, pk, 32) == 0 && memcmp(c.authority, apub, 32) == 0);
    CHECK(c.issued_at == t0 && c.expires_at == t1);
    CHECK(strcmp(c.name, "gpu-box-1") == 0);
    CHECK(verdict(cert, len, apub, NULL, t0) == RUMOR_CERT_OK); /* no connection key to compare */

    /* Big-endian on the wire. */
    CHECK(cert[68] == (uint8_t)(t0 >> 56) && cert[75] == (uint8_t)t0);

    /* Each refusal. */
    memcpy(bad, cert, len);
    bad[len - 1] ^= 0x01;
    CHECK(verdict(bad, len, apub, pk, t0) == RUMOR_CERT_BAD_SIGNATURE);
    memcpy(bad, cert, len);
    bad[36] ^= 0x80; /* the peer key changed after signing */
    CHECK(verdict(bad, len, apub, bad + 36, t0) == RUMOR_CERT_BAD_SIGNATURE);
    memcpy(bad, cert, len);
    bad[75] ^= 0x01; /* issued-at, one second later: still in order, but not what was signed */
    CHECK(verdict(bad, len, apub, pk, t0) == RUMOR_CERT_BAD_SIGNATURE);
    CHECK(verdict(cert, len, rumor_authority_public(other), pk, t0) == RUMOR_CERT_OTHER_SWARM);
    /* Signed by another authority while naming ours. */
    size_t blen = craft(bad, other, pk, (const uint8_t *)"x", 1, t0, t1);
    memcpy(bad + 4, apub, 32);
    CHECK(verdict(bad, blen, apub, pk, t0) == RUMOR_CERT_BAD_SIGNATURE);
    memcpy(bad, cert, len);
    memcpy(bad, "RMC3", 4);
    CHECK(verdict(bad, len, apub, pk, t0) == RUMOR_CERT_BAD_MAGIC);
    memcpy(bad, "RMC2", 4); /* form 2 reads a site length where form 1's signature begins */
    CHECK(verdict(bad, len, apub, pk, t0) == RUMOR_CERT_MALFORMED || verdict(bad, len, apub, pk, t0) ==
          RUMOR_CERT_BAD_SIGNATURE);
    CHECK(verdict(cert, len, apub, pk, t1 - 1) == RUMOR_CERT_OK); /* the last valid second */
    CHECK(verdict(cert, len, apub, pk, t1) == RUMOR_CERT_EXPIRED);    /* expires-at is excluded */
    CHECK(verdict(cert, len, apub, pk, t1 + 1) == RUMOR_CERT_EXPIRED);
    CHECK(verdict(cert, len, apub, pk, t0 - RUMOR_CERT_SKEW) == RUMOR_CERT_OK); /* clock skew */
    CHECK(verdict(cert, len, apub, pk, t0 - RUMOR_CERT_SKEW - 1) == RUMOR_CERT_NOT_YET_VALID);
    CHECK(verdict(cert, len, apub, pk, 0) == RUMOR_CERT_NOT_YET_VALID);
    CHECK(verdict(cert, len, apub, rumor_secret_key_public(stranger), t0) == RUMOR_CERT_KEY_MISMATCH);

    /* Truncated at every length, and one byte too many. */
    int truncated_ok = 0;
    for (size_t n = 0; n < len; n++) truncated_ok += verdict(cert, n, apub, pk, t0) == RUMOR_CERT_MALFORMED;
    CHECK(truncated_ok == (int)len);
    memcpy(bad, cert, len);
    bad[len] = 0;
    CHECK(verdict(bad, len + 1, apub, pk, t0) == RUMOR_CERT_MALFORMED);
    CHECK(verdict(bad, RUMOR_CERT_MAX_LEN + 1, apub, pk, t0) == RUMOR_CERT_MALFORMED);

    /* Names rumor_cert_issue refuses, signed anyway: still malformed. */
    const char *bad_names[] = {
        "\xc3\x28",         /* bad continuation */
        "\xc0\xaf",         /* overlong '/' */
        "\xed\xa0\x80",     /* surrogate */
        "\xf4\x90\x80\x80", /* above U+10FFFF */
        "abc\xe2\x82",      /* cut short */
        "a\nb",             /* control: would forge a line */
        "a\x7f",            /* DEL */
        "\xc2\x85",         /* C1 control (NEL) */
    };
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(bad_names); i++) {
        const char *nm = bad_names[i];
        blen = craft(bad, a, pk, (const uint8_t *)nm, strlen(nm), t0, t1);
        CHECK_MSG(verdict(bad, blen, apub, pk, t0) == RUMOR_CERT_MALFORMED, "name %zu", i);
        CHECK_MSG(rumor_cert_issue(bad, &blen, a, pk, nm, t0, t1, err) == RUMOR_EINVAL, "name %zu", i);
    }
    /* A name length over 64, dates out of order: malformed even when signed. */
    uint8_t long_name[70];
    memset(long_name, 'n', sizeof long_name);
    blen = craft(bad, a, pk, long_name, 65, t0, t1);
    CHECK(verdict(bad, 85 + 64 + 64, apub, pk, t0) == RUMOR_CERT_MALFORMED);
    blen = craft(bad, a, pk, (const uint8_t *)"", 0, t1, t0);
    CHECK(verdict(bad, blen, apub, pk, t0) == RUMOR_CERT_MALFORMED);

    /* Names at the limits: 64 bytes, multi-byte UTF-8, empty, NULL. */
    char name64[65];
    memset(name64, 'z', 64);
    name64[64] = 0;
    CHECK_RC(rumor_cert_issue(bad, &blen, a, pk, name64, t0, t1, err));
    CHECK(blen == RUMOR_CERT_MAX_LEN - 1 && verdict(bad, blen, apub, pk, t0) == RUMOR_CERT_OK);
    name64[63] = 0;
    char name65[80];
    snprintf(name65, sizeof name65, "%sxx", name64);
    CHECK(rumor_cert_issue(bad, &blen, a, pk, name65, t0, t1, err) == RUMOR_EINVAL);
    CHECK_RC(rumor_cert_issue(bad, &blen, a, pk, "n\xc3\xb6" "de \xe2\x82\xac \xf0\x9f\x90\x9d", t0, t1, err));
    CHECK(verdict(bad, blen, apub, pk, t0) == RUMOR_CERT_OK);
    CHECK_RC(rumor_cert_issue(bad, &blen, a, pk, NULL, t0, t1, err));
    CHECK(blen == RUMOR_CERT_MIN_LEN && verdict(bad, blen, apub, pk, t0) == RUMOR_CERT_OK);
    CHECK(rumor_cert_issue(bad, &blen, a, pk, "x", t1, t0, err) == RUMOR_EINVAL);

    /* Revocation. */
    char z[RUMOR_KEY_Z85_LEN + 1], text[600];
    rumor_key_to_z85(z, pk);
    snprintf(text, sizeof text, "# revoked\n%s # lost laptop\n", z);
    rumor_revoked_t *rl = NULL;
    CHECK_RC(rumor_revoked_parse(&rl, text, strlen(text), "revoked.txt", err));
    CHECK(rumor_cert_check(cert, len, apub, pk, t0, rl, &c, &why) == RUMOR_EAUTH);
    CHECK(why == RUMOR_CERT_REVOKED);
    CHECK(rumor_cert_check(cert, len, apub, pk, t0, NULL, &c, &why) == RUMOR_OK);
    rumor_revoked_destroy(&rl);

    /* Every reason has its name. */
    CHECK(strcmp(rumor_cert_reject_name(RUMOR_CERT_OK), "ok") == 0);
    CHECK(strcmp(rumor_cert_reject_name(RUMOR_CERT_MALFORMED), "malformed") == 0);
    CHECK(strcmp(rumor_cert_reject_name(RUMOR_CERT_BAD_MAGIC), "bad-magic") == 0);
    CHECK(strcmp(rumor_cert_reject_name(RUMOR_CERT_OTHER_SWARM), "other-swarm") == 0);
    CHECK(strcmp(rumor_cert_reject_name(RUMOR_CERT_BAD_SIGNATURE), "bad-signature") == 0);
    CHECK(strcmp(rumor_cert_reject_name(RUMOR_CERT_EXPIRED), "expired") == 0);
    CHECK(strcmp(rumor_cert_reject_name(RUMOR_CERT_NOT_YET_VALID), "not-yet-valid") == 0);
    CHECK(strcmp(rumor_cert_reject_name(RUMOR_CERT_KEY_MISMATCH), "key-mismatch") == 0);
    CHECK(strcmp(rumor_cert_reject_name(RUMOR_CERT_REVOKED), "revoked") == 0);

    /* ---- the file form ---- */
    char path[512], bad_path[512];
    path_in(path, sizeof path, "certs-peer.cert");
    path_in(bad_path, sizeof bad_path, "bad.cert");
    mode_t old_umask = umask(077);
    CHECK_RC(rumor_cert_save(path, cert, len, false, err));
    umask(old_umask);
    CHECK(mode_of(path) == 0644);
    CHECK(rumor_cert_save(path, cert, len, false, err) != RUMOR_OK); /* no overwrite */
    CHECK_RC(rumor_cert_save(path, cert, len, true, err));
    uint8_t back[RUMOR_CERT_MAX_LEN];
    size_t back_len = 0;
    CHECK_RC(rumor_cert_load(back, &back_len, path, err));
    CHECK(back_len == len && memcmp(back, cert, len) == 0);
    char *file = read_text(path);
    CHECK(file && strstr(file, "# name: gpu-box-1\n") != NULL);
    CHECK(file && strstr(file, z) != NULL);
    CHECK(file && strstr(file, "# expires: 2027-01-01T00:00:00Z\n") != NULL);
    free(file);

    /* Every length of name, so every amount of padding (0..3), survives the file form. */
    for (size_t n = 0; n <= 4; n++) {
        char nm[8] = "abcd";
        nm[n] = 0;
        CHECK_RC(rumor_cert_issue(bad, &blen, a, pk, nm, t0, t1, err));
        file_round_trip(path, bad, blen);
    }

    /* Padding bytes that are not zero, or more padding than needed. */
    uint8_t padded[RUMOR_CERT_MAX_LEN + 8];
    char line[400];
    CHECK_RC(rumor_cert_issue(bad, &blen, a, pk, NULL, t0, t1, err)); /* 149 bytes: 3 of padding */
    memset(padded, 0, sizeof padded);
    memcpy(padded, bad, blen);
    padded[blen + 2] = 1;
    CHECK_RC(rumor_z85_encode(line, sizeof line, padded, 152));
    snprintf(text, sizeof text, "# forged\n%s\n", line);
    CHECK(write_raw(bad_path, text, strlen(text), 0644) == 0);
    CHECK(rumor_cert_load(back, &back_len, bad_path, err) == RUMOR_EFORMAT);
    CHECK_MSG(strstr(err, "padding") != NULL, "%s", err);
    padded[blen + 2] = 0;
    CHECK_RC(rumor_z85_encode(line, sizeof line, padded, 156)); /* 4 zero bytes too many */
    snprintf(text, sizeof text, "%s\n", line);
    CHECK(write_raw(bad_path, text, strlen(text), 0644) == 0);
    CHECK(rumor_cert_load(back, &back_len, bad_path, err) == RUMOR_EFORMAT);
    CHECK_RC(rumor_z85_encode(line, sizeof line, padded, 152)); /* just right */
    snprintf(text, sizeof text, "%s\n", line);
    CHECK(write_raw(bad_path, text, strlen(text), 0644) == 0);
    CHECK_RC(rumor_cert_load(back, &back_len, bad_path, err));
    CHECK(back_len == blen);
    /* Not a certificate at all. */
    CHECK(write_raw(bad_path, "HelloWorld\n", 11, 0644) == 0);
    CHECK(rumor_cert_load(back, &back_len, bad_path, err) == RUMOR_EFORMAT);
    CHECK(write_raw(bad_path, "# only\n", 7, 0644) == 0);
    CHECK(rumor_cert_load(back, &back_len, bad_path, err) == RUMOR_EFORMAT);
    CHECK(rumor_cert_save(bad_path, cert, len - 1, true, err) == RUMOR_EINVAL);

    CHECK(count_tmp_files() == 0);
    rumor_authority_destroy(&a);
    rumor_authority_destroy(&other);
    rumor_secret_key_destroy(&peer);
    rumor_secret_key_destroy(&stranger);
}

/* Form 2: a certificate that states its member's site (the authority's word that members
 * share a LAN). Round trip, file form, refusals, the class nodes derive from it, and form 1
 * for a certificate without one. */
static void test_cert_sites(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_authority_t *a = rumor_authority_generate(err);
    rumor_secret_key_t *peer = rumor_secret_key_generate(err);
    CHECK(a && peer);
    if (!a || !peer) return;
    const uint8_t *apub = rumor_authority_public(a), *pk = rumor_secret_key_public(peer);
    const uint64_t t0 = 1767225600, t1 = t0 + 86400;
    uint8_t cert[RUMOR_CERT_MAX_LEN], plain[RUMOR_CERT_MAX_LEN], bad[RUMOR_CERT_MAX_LEN];
    size_t len = 0, plen = 0;
    CHECK_RC(rumor_cert_issue_at(cert, &len, a, pk, "cam-3", "office-berlin", t0, t1, err));
    CHECK(len == 86 + 5 + 13 + 64 && memcmp(cert, "RMC2", 4) == 0 && cert[90] == 13);
    rumor_cert_t c;
    rumor_cert_reject_t why;
    CHECK_RC(rumor_cert_verify(cert, len, apub, pk, t0, &c, &why));
    CHECK(strcmp(c.name, "cam-3") == 0 && strcmp(c.site, "office-berlin") == 0);
    CHECK_RC(rumor_cert_issue_at(plain, &plen, a, pk, "cam-3", NULL, t0, t1, err));
    CHECK(plen == 85 + 5 + 64 && memcmp(plain, "RMC1", 4) == 0);
    CHECK_RC(rumor_cert_issue_at(plain, &plen, a, pk, "cam-3", "", t0, t1, err));
    CHECK(memcmp(plain, "RMC1", 4) == 0 && verdict(plain, plen, apub, pk, t0) == RUMOR_CERT_OK);
    CHECK_RC(rumor_cert_verify(plain, plen, apub, pk, t0, &c, &why));
    CHECK(c.site[0] == 0);

    /* The class: BLAKE2b-256 of the label and the site, top bit cleared, lowest set; equal for
     * two certificates of one site, 0 without one. */
    uint8_t in[16 + 13], h[RUMOR_HASH_LEN];
    memcpy(in, "rumor-site-1\0\0\0\0", 16);
    memcpy(in + 16, "office-berlin", 13);
    rumor_hash(h, in, sizeof in);
    uint64_t want = 0;
    for (int i = 0; i < 8; i++) want = want << 8 | h[i];
    want = (want & ~(UINT64_C(1) << 63)) | 1;
    CHECK(rumor_cert_site_class(cert, len) == want && rumor_cert_site_class(plain, plen) == 0 &&
          rumor_cert_site_class(NULL, 0) == 0);
    size_t other_len;
    uint8_t other[RUMOR_CERT_MAX_LEN];
    CHECK_RC(rumor_cert_issue_at(other, &other_len, a, pk, "cam-4", "office-berlin", t0, t1, err));
    CHECK(rumor_cert_site_class(other, other_len) == want);
    CHECK_RC(rumor_cert_issue_at(other, &other_len, a, pk, "cam-4", "office-paris", t0, t1, err));
    CHECK(rumor_cert_site_class(other, other_len) != want);

    /* A site changed after signing, or its length: refused. */
    memcpy(bad, cert, len);
    bad[92] ^= 0x20;
    CHECK(verdict(bad, len, apub, pk, t0) == RUMOR_CERT_BAD_SIGNATURE);
    memcpy(bad, cert, len);
    bad[90] = 12;
    CHECK(verdict(bad, len, apub, pk, t0) == RUMOR_CERT_MALFORMED);
    bad[90] = 0; /* (a form 2 certificate states a site) */
    CHECK(verdict(bad, len, apub, pk, t0) == RUMOR_CERT_MALFORMED);

    /* Name and site share 64 bytes; a site follows a name's rules. */
    char n40[41], s24[25], s25[26];
    memset(n40, 'n', 40), n40[40] = 0;
    memset(s24, 's', 24), s24[24] = 0;
    memset(s25, 's', 25), s25[25] = 0;
    CHECK_RC(rumor_cert_issue_at(bad, &plen, a, pk, n40, s24, t0, t1, err));
    CHECK(plen == RUMOR_CERT_MAX_LEN && verdict(bad, plen, apub, pk, t0) == RUMOR_CERT_OK);
    CHECK(rumor_cert_issue_at(bad, &plen, a, pk, n40, s25, t0, t1, err) == RUMOR_EINVAL);
    CHECK_MSG(strstr(err, "65 bytes together, at most 64") != NULL, "%s", err);
    CHECK(rumor_cert_issue_at(bad, &plen, a, pk, "x", "lan\n2", t0, t1, err) == RUMOR_EINVAL);
    CHECK_MSG(strstr(err, "site contains a control character") != NULL, "%s", err);

    /* The file form says the site, and gives back the same bytes. */
    char path[512];
    path_in(path, sizeof path, "site.cert");
    CHECK_RC(rumor_cert_save(path, cert, len, true, err));
    uint8_t back[RUMOR_CERT_MAX_LEN];
    size_t back_len = 0;
    CHECK_RC(rumor_cert_load(back, &back_len, path, err));
    CHECK(back_len == len && memcmp(back, cert, len) == 0);
    char *file = read_text(path);
    CHECK(file && strstr(file, "# name: cam-3\n# site: office-berlin\n") != NULL);
    free(file);
    for (size_t m = 1; m <= 4; m++) { /* every amount of padding */
        char st[8] = "wxyz";
        st[m] = 0;
        CHECK_RC(rumor_cert_issue_at(bad, &plen, a, pk, NULL, st, t0, t1, err));
        file_round_trip(path, bad, plen);
    }
    /* Of two certificates of one member, the later issued is kept, then the greater bytes; one
     * that does not parse comes first. */
    uint8_t later[RUMOR_CERT_MAX_LEN];
    size_t later_len;
    CHECK_RC(rumor_cert_issue_at(later, &later_len, a, pk, "cam-3", NULL, t0 + 5, t1, err));
    CHECK(rumor_cert_order(later, later_len, cert, len) > 0 && rumor_cert_order(cert, len, later, later_len) < 0);
    CHECK(rumor_cert_order(cert, len, cert, len) == 0);
    memcpy(bad, cert, len);
    bad[0] = 'X';
    CHECK(rumor_cert_order(bad, len, cert, len) < 0 && rumor_cert_order(cert, len, bad, len) > 0);
    /* A knock carries the largest certificate. */
    uint8_t dgram[RUMOR_ADMIT_MAX], nonce[RUMOR_ADMIT_NONCE_LEN];
    CHECK_RC(rumor_cert_issue_at(bad, &plen, a, pk, n40, s24, t0, t1, err));
    CHECK(rumor_admit_knock(dgram, peer, pk, 7, t0 * 1000, bad, plen, nonce) == RUMOR_ADMIT_KNOCK_LEN);
    rumor_authority_destroy(&a);
    rumor_secret_key_destroy(&peer);
}

/* ---- revocation lists ---- */

static void test_revoked(void)
{
    char err[RUMOR_ERR_LEN], k1[41], k2[41], k3[41], text[2048];
    uint8_t b1[32], b2[32], b3[32];
    for (int i = 0; i < 32; i++) b1[i] = (uint8_t)i, b2[i] = (uint8_t)(200 - i), b3[i] = 7;
    rumor_key_to_z85(k1, b1);
    rumor_key_to_z85(k2, b2);
    rumor_key_to_z85(k3, b3);
    snprintf(text, sizeof text, "# revoked peers\n\n%s\n  %s\t# stolen\r\n%s\n# end", k2, k1, k2);
    rumor_revoked_t *rl = NULL;
    CHECK_RC(rumor_revoked_parse(&rl, text, strlen(text), "r.txt", err));
    CHECK(rumor_revoked_count(rl) == 2); /* the duplicate merged */
    CHECK(rumor_revoked_has(rl, b1) && rumor_revoked_has(rl, b2) && !rumor_revoked_has(rl, b3));
    rumor_revoked_destroy(&rl);
    CHECK(rl == NULL);
    CHECK(!rumor_revoked_has(NULL, b1) && rumor_revoked_count(NULL) == 0);
    CHECK_RC(rumor_revoked_parse(&rl, "", 0, "empty", err));
    CHECK(rumor_revoked_count(rl) == 0 && !rumor_revoked_has(rl, b1));
    rumor_revoked_destroy(&rl);

    /* '#' is a Z85 character: inside a key it is not a comment. */
    const char *hashes = "0000#0000#0000#0000#0000#0000#0000#0000#";
    snprintf(text, sizeof text, "%s\n%s # the comment is after a blank\n", hashes, hashes);
    CHECK_RC(rumor_revoked_parse(&rl, text, strlen(text), "r.txt", err));
    uint8_t hb[32];
    CHECK_RC(rumor_key_from_z85(hb, hashes, err));
    CHECK(rumor_revoked_count(rl) == 1 && rumor_revoked_has(rl, hb));
    rumor_revoked_destroy(&rl);

    /* Errors name the file and the line. */
    struct {
        const char *fmt;
        const char *want;
    } bad[] = {
        {"# ok\n%.39s\n", "r.txt:2: expected a public key"},
        {"%s\n\n%sx\n", "r.txt:3: expected a public key"},
        {"%s junk\n", "r.txt:1: expected a public key"},
        {"%s#x\n", "r.txt:1: expected a public key"},
        {"%.39s~\n", "r.txt:1: Z85 character 40"},
        {"#\n#\n#\n#\n%.35s#####", "r.txt:5: Z85 group"},
    };
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(bad); i++) {
        snprintf(text, sizeof text, bad[i].fmt, k1, k1);
        CHECK(rumor_revoked_parse(&rl, text, strlen(text), "r.txt", err) == RUMOR_EFORMAT && rl == NULL);
        CHECK_MSG(strncmp(err, bad[i].want, strlen(bad[i].want)) == 0, "case %zu: %s", i, err);
    }
    /* Line length: 256 characters is fine (a comment), 257 is not. */
    memset(text, 0, sizeof text);
    snprintf(text, sizeof text, "%s\n#", k1);
    memset(text + 42, 'c', 255);
    CHECK_RC(rumor_revoked_parse(&rl, text, strlen(text), "r.txt", err));
    rumor_revoked_destroy(&rl);
    text[42 + 255] = 'c';
    CHECK(rumor_revoked_parse(&rl, text, strlen(text), "r.txt", err) == RUMOR_EFORMAT);
    CHECK_MSG(strstr(err, "r.txt:2: line longer than 256") != NULL, "%s", err);

    /* From a file: the same rules, streamed. */
    char path[512];
    path_in(path, sizeof path, "revoked.txt");
    CHECK(write_raw(path, text, strlen(text), 0644) == 0);
    CHECK(rumor_revoked_load(&rl, path, err) == RUMOR_EFORMAT);
    CHECK_MSG(strstr(err, ":2: line longer than 256") != NULL && strstr(err, path) == err, "%s", err);
    snprintf(text, sizeof text, "%s\n%s", k3, k1); /* no final newline */
    CHECK(write_raw(path, text, strlen(text), 0644) == 0);
    CHECK_RC(rumor_revoked_load(&rl, path, err));
    CHECK(rumor_revoked_count(rl) == 2 && rumor_revoked_has(rl, b3) && rumor_revoked_has(rl, b1));
    rumor_revoked_destroy(&rl);
    char missing[512];
    path_in(missing, sizeof missing, "missing.txt");
    CHECK(rumor_revoked_load(&rl, missing, err) == RUMOR_EIO && strstr(err, missing) == err);

    /* Reload (SIGHUP): a clean file replaces the list; a broken one never lets in a key the
     * last list refused, and refuses every key it could read too; an unreadable one keeps the
     * last list. */
    rumor_revoked_t *last = NULL, *next = NULL;
    size_t badl = 0;
    snprintf(text, sizeof text, "%s\n", k1);
    CHECK(write_raw(path, text, strlen(text), 0644) == 0);
    CHECK_RC(rumor_revoked_reload(&last, path, NULL, &badl, err));
    CHECK(badl == 0 && rumor_revoked_count(last) == 1 && rumor_revoked_has(last, b1));
    snprintf(text, sizeof text, "%s\nnot a key\n%s junk\n%s\n", k2, k1, k3); /* k1's line is broken */
    CHECK(write_raw(path, text, strlen(text), 0644) == 0);
    CHECK(rumor_revoked_reload(&next, path, last, &badl, err) == RUMOR_EFORMAT && next != NULL);
    CHECK_MSG(badl == 2 && strstr(err, ":2: expected a public key") != NULL, "%zu: %s", badl, err);
    CHECK(rumor_revoked_count(next) == 3 && rumor_revoked_has(next, b1) && rumor_revoked_has(next, b2) &&
          rumor_revoked_has(next, b3));
    rumor_revoked_destroy(&last);
    last = next;
    CHECK(rumor_revoked_reload(&next, missing, last, &badl, err) == RUMOR_EIO && strstr(err, missing) == err);
    CHECK(next != NULL && rumor_revoked_count(next) == 3 && rumor_revoked_has(next, b1));
    rumor_revoked_destroy(&last);
    last = next;
    snprintf(text, sizeof text, "%s\n", k2); /* fixed: only k2 is revoked now */
    CHECK(write_raw(path, text, strlen(text), 0644) == 0);
    CHECK_RC(rumor_revoked_reload(&next, path, last, &badl, err));
    CHECK(rumor_revoked_count(next) == 1 && rumor_revoked_has(next, b2) && !rumor_revoked_has(next, b1));
    rumor_revoked_destroy(&last);
    rumor_revoked_destroy(&next);

    /* At most 100000 keys. */
    size_t n = RUMOR_REVOKED_MAX + 1, cap = n * 41 + 1;
    char *big = malloc(cap);
    if (big) {
        for (size_t i = 0; i < n; i++) {
            uint8_t k[32] = {0};
            for (int j = 0; j < 4; j++) k[j] = (uint8_t)(i >> (8 * j));
            rumor_key_to_z85(big + i * 41, k);
            big[i * 41 + 40] = '\n';
        }
        CHECK(rumor_revoked_parse(&rl, big, (n - 1) * 41, "big", err) == RUMOR_OK);
        CHECK(rumor_revoked_count(rl) == RUMOR_REVOKED_MAX);
        uint8_t k[32] = {0};
        k[0] = 0x39, k[1] = 0x30; /* 12345 */
        CHECK(rumor_revoked_has(rl, k));
        rumor_revoked_destroy(&rl);
        CHECK(rumor_revoked_parse(&rl, big, n * 41, "big", err) == RUMOR_EFORMAT);
        CHECK_MSG(strstr(err, "big:100001: more than 100000") != NULL, "%s", err);
        /* A reload that cannot take a broken file whole keeps every key of the last list, however
         * many the file adds, and says how many of the file's it could not take (the merge was
         * cut at the limit silently before, dropping keys the last list refused). */
        CHECK(write_raw(path, big, (n - 1) * 41, 0644) == 0);
        CHECK_RC(rumor_revoked_reload(&last, path, NULL, &badl, err));
        for (size_t i = 0; i < n; i++) big[i * 41 + 3] = 'Z'; /* (other keys, same number) */
        memcpy(big + (n - 1) * 41, "not a key\n", 10);
        CHECK(write_raw(path, big, (n - 1) * 41 + 10, 0644) == 0);
        CHECK(rumor_revoked_reload(&next, path, last, &badl, err) == RUMOR_EFORMAT && next != NULL);
        CHECK_MSG(strstr(err, "over the limit of 100000 keys") && strstr(err, "not taken"), "%s", err);
        bool kept = next && rumor_revoked_count(next) == RUMOR_REVOKED_MAX;
        for (size_t i = 0; kept && i < n - 1; i++) {
            uint8_t k0[32] = {0};
            for (int j = 0; j < 4; j++) k0[j] = (uint8_t)(i >> (8 * j));
            kept = rumor_revoked_has(next, k0);
        }
        CHECK(kept);
        rumor_revoked_destroy(&last);
        rumor_revoked_destroy(&next);
        free(big);
    }
}

/* ---- addresses ---- */

static void test_addresses(void)
{
    char err[RUMOR_ERR_LEN], z[41], text[600];
    uint8_t key[32];
    for (int i = 0; i < 32; i++) key[i] = (uint8_t)(i * 37 + 11);
    rumor_key_to_z85(z, key);
    /* A valid key full of the characters that matter to the parser: '@' and ':'. */
    const char *tricky = "0000@0000:0000@0000:0000@0000:0000@0000:";

    struct {
        const char *host_port;
        const char *endpoint; /* NULL: refused */
        bool ipv6;
    } cases[] = {
        {"127.0.0.1:7470", "tcp://127.0.0.1:7470", false},
        {"[::1]:7470", "tcp://[::1]:7470", true},
        {"[2001:db8::17]:1", "tcp://[2001:db8::17]:1", true},
        {"[::ffff:192.0.2.1]:65535", "tcp://[::ffff:192.0.2.1]:65535", true},
        {"localhost:65535", "tcp://localhost:65535", false},
        {"node-1.example.org:443", "tcp://node-1.example.org:443", false},
        {"a:1", "tcp://a:1", false},
        {"1a.b2:9", "tcp://1a.b2:9", false},
        {"127.0.0.1", NULL, false},
        {"127.0.0.1:", NULL, false},
        {"127.0.0.1:0", NULL, false},
        {"127.0.0.1:65536", NULL, false},
        {"127.0.0.1:99999999", NULL, false},
        {"127.0.0.1:-1", NULL, false},
        {"127.0.0.1:+1", NULL, false},
        {"127.0.0.1:07470", NULL, false},
        {"127.0.0.1:74 70", NULL, false},
        {"127.0.0.1:7470/x", NULL, false},
        {"256.1.1.1:1", NULL, false},
        {"1.2.3:1", NULL, false},
        {"1.2.3.4.5:1", NULL, false},
        {"::1:7470", NULL, false},
        {"[::1]7470", NULL, false},
        {"[::1]:", NULL, false},
        {"[::1:7470", NULL, false},
        {"[::g]:1", NULL, false},
        {"[127.0.0.1]:1", NULL, false},
        {"[]:1", NULL, false},
        {":7470", NULL, false},
        {"*:7470", NULL, false},
        {"-bad.example:1", NULL, false},
        {"bad-.example:1", NULL, false},
        {"a..b:1", NULL, false},
        {"trailing.:1", NULL, false},
        {"under_score:1", NULL, false},
        {"sp ace:1", NULL, false},
        {"x:1 ", NULL, false},
        {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.com:1", NULL, false}, /* 64 */
    };
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(cases); i++) {
        snprintf(text, sizeof text, "rumor://%s@%s", z, cases[i].host_port);
        rumor_addr_t a;
        rumor_err_t rc = rumor_addr_parse(&a, text, err);
        if (cases[i].endpoint) {
            CHECK_MSG(rc == RUMOR_OK, "%s: %s", text, err);
            if (rc != RUMOR_OK) continue;
            CHECK_MSG(strcmp(a.endpoint, cases[i].endpoint) == 0, "%s -> %s", text, a.endpoint);
            CHECK(memcmp(a.key, key, 32) == 0);
            CHECK(a.ipv6 == cases[i].ipv6);
            /* And back. */
            char out[RUMOR_ADDR_LEN];
            CHECK_RC(rumor_addr_format(out, key, a.endpoint, err));
            CHECK_MSG(strcmp(out, text) == 0, "%s -> %s", text, out);
        } else {
            CHECK_MSG(rc == RUMOR_EINVAL, "accepted %s", text);
            char want[200];
            snprintf(want, sizeof want, "bootstrap address '%.100s': ", text);
            CHECK_MSG(strncmp(err, want, strlen(want)) == 0, "%s", err);
        }
    }
    char label63[80];
    memset(label63, 'a', 63);
    snprintf(label63 + 63, sizeof label63 - 63, ".com:1");
    snprintf(text, sizeof text, "rumor://%s@%s", z, label63);
    rumor_addr_t a;
    CHECK_RC(rumor_addr_parse(&a, text, err));
    CHECK(strlen(a.host) == 67 && strncmp(a.host, label63, 67) == 0 && a.port == 1);

    /* The key part. */
    snprintf(text, sizeof text, "rumor://%s@[::1]:7470", tricky);
    CHECK_RC(rumor_addr_parse(&a, text, err));
    CHECK(strcmp(a.endpoint, "tcp://[::1]:7470") == 0 && strcmp(a.host, "::1") == 0 && a.port == 7470);
    char back[41];
    rumor_key_to_z85(back, a.key);
    CHECK(strcmp(back, tricky) == 0);
    const char *bad[] = {
        "", "x", "rumor://", "rumor://@h:1", "tcp://127.0.0.1:7470", "RUMOR://%s@h:1", "rumor:/%s@h:1",
        "rumor://%.39s@h:1", "rumor://%sx@h:1", "rumor://%.39s~@h:1", "rumor://%.35s#####@h:1", " rumor://%s@h:1",
    };
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(bad); i++) {
        snprintf(text, sizeof text, bad[i], z);
        CHECK_MSG(rumor_addr_parse(&a, text, err) == RUMOR_EINVAL, "accepted %s", text);
        CHECK_MSG(strncmp(err, "bootstrap address '", 19) == 0, "%s", err);
    }
    CHECK(rumor_addr_parse(&a, "x", err) == RUMOR_EINVAL);
    CHECK(strcmp(err, "bootstrap address 'x': expected rumor://KEY@HOST:PORT") == 0);

    /* Formatting refuses what cannot be dialled. */
    char out[RUMOR_ADDR_LEN];
    CHECK(rumor_addr_format(out, key, "tcp://*:7470", err) == RUMOR_EINVAL);
    CHECK(rumor_addr_format(out, key, "ipc:///tmp/x", err) == RUMOR_EINVAL);
    CHECK(rumor_addr_format(out, key, "tcp://::1:7470", err) == RUMOR_EINVAL);
    CHECK_RC(rumor_addr_format(out, key, "tcp://10.0.0.2:7470", err));
    snprintf(text, sizeof text, "rumor://%s@10.0.0.2:7470", z);
    CHECK(strcmp(out, text) == 0);
}

/* BLAKE2b-256 known answers (RFC 7693's function, 32-byte output). */
static void test_hash(void)
{
    static const uint8_t empty[32] = {0x0e, 0x57, 0x51, 0xc0, 0x26, 0xe5, 0x43, 0xb2, 0xe8, 0xab, 0x2e,
                                      0xb0, 0x60, 0x99, 0xda, 0xa1, 0xd1, 0xe5, 0xdf, 0x47, 0x77, 0x8f,
                                      0x77, 0x87, 0xfa, 0xab, 0x45, 0xcd, 0xf1, 0x2f, 0xe3, 0xa8};
    static const uint8_t abc[32] = {0xbd, 0xdd, 0x81, 0x3c, 0x63, 0x42, 0x39, 0x72, 0x31, 0x71, 0xef,
                                    0x3f, 0xee, 0x98, 0x57, 0x9b, 0x94, 0x96, 0x4e, 0x3b, 0xb1, 0xcb,
                                    0x3e, 0x42, 0x72, 0x62, 0xc8, 0xc0, 0x68, 0xd5, 0x23, 0x19};
    uint8_t h[RUMOR_HASH_LEN];
    rumor_hash(h, "", 0);
    CHECK(memcmp(h, empty, 32) == 0 && rumor_hash_equal(h, empty));
    rumor_hash(h, "abc", 3);
    CHECK(memcmp(h, abc, 32) == 0 && rumor_hash_equal(h, abc) && !rumor_hash_equal(h, empty));
}

/* Admission datagrams: the layout PROTOCOL.md gives (opened here with libsodium directly),
 * round trips of each kind, and every alteration or truncation refused. */
static void test_admission(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_authority_t *auth = rumor_authority_generate(err);
    rumor_secret_key_t *a = rumor_secret_key_generate(err), *b = rumor_secret_key_generate(err),
                       *c = rumor_secret_key_generate(err);
    CHECK(auth && a && b && c);
    if (!auth || !a || !b || !c) return;
    const uint8_t *apub = rumor_secret_key_public(a), *bpub = rumor_secret_key_public(b);
    uint8_t cert_a[RUMOR_CERT_MAX_LEN], cert_b[RUMOR_CERT_MAX_LEN];
    size_t la = 0, lb = 0;
    CHECK_RC(rumor_cert_issue(cert_a, &la, auth, apub, "alice", 1767225600, 1798761600, err));
    CHECK_RC(rumor_cert_issue(cert_b, &lb, auth, bpub, "bob", 1767225600, 1798761600, err));

    uint8_t knock[RUMOR_ADMIT_MAX], nonce[RUMOR_ADMIT_NONCE_LEN], nonce2[RUMOR_ADMIT_NONCE_LEN];
    const uint64_t boot = 0x0102030405060708u;
    const uint64_t sent = 0x1112131415161718u;
    const size_t kl = rumor_admit_knock(knock, a, bpub, boot, sent, cert_a, la, nonce);
    CHECK(kl == RUMOR_ADMIT_KNOCK_LEN); /* padded: every knock has one size */
    CHECK(memcmp(knock, "RMA2", 4) == 0 && knock[4] == RUMOR_ADMIT_KNOCK);
    CHECK(rumor_admit_is_knock(knock, kl) && !rumor_admit_is_knock(knock, kl - 1));
    CHECK(memcmp(knock + 5, apub, 32) == 0 && memcmp(knock + 37, nonce, 24) == 0);
    /* The box as the specification says: crypto_box_easy from A's key to B's under the nonce. */
    uint8_t plain[RUMOR_ADMIT_MAX];
    CHECK(crypto_box_open_easy(plain, knock + 61, kl - 61, knock + 37, apub, rumor_secret_key_bytes(b)) == 0);
    CHECK(plain[0] == RUMOR_ADMIT_KNOCK && plain[1] == 0x01 && plain[8] == 0x08);
    CHECK(plain[9] == 0x11 && plain[16] == 0x18); /* the time it was sealed, big-endian */
    CHECK(plain[17] == (uint8_t)(la >> 8) && plain[18] == (uint8_t)la && memcmp(plain + 19, cert_a, la) == 0);
    int pad_zero = 1;
    for (size_t i = 19 + la; i < kl - 61 - 16; i++) pad_zero &= plain[i] == 0;
    CHECK(pad_zero);

    rumor_admit_msg_t m;
    CHECK_RC(rumor_admit_open(&m, b, knock, kl));
    CHECK(m.kind == RUMOR_ADMIT_KNOCK && memcmp(m.from, apub, 32) == 0 && m.boot == boot && m.sent_ms == sent);
    CHECK(m.cert_len == la && memcmp(m.cert, cert_a, la) == 0 && memcmp(m.nonce, nonce, 24) == 0);
    CHECK(rumor_admit_open(&m, c, knock, kl) == RUMOR_EAUTH); /* sealed for B, not C */
    CHECK(rumor_admit_open(&m, a, knock, kl) == RUMOR_EAUTH);
    /* Every altered byte and every truncation is refused. */
    int refused = 0;
    for (size_t i = 0; i < kl; i++) {
        uint8_t x[RUMOR_ADMIT_MAX];
        memcpy(x, knock, kl);
        x[i] ^= 0x20;
        rumor_err_t rc = rumor_admit_open(&m, b, x, kl);
        refused += rc != RUMOR_OK;
        if (i < 5) CHECK(rc == RUMOR_EINVAL);
    }
    CHECK(refused == (int)kl);
    refused = 0;
    for (size_t l = 0; l < kl; l++) refused += rumor_admit_open(&m, b, knock, l) != RUMOR_OK;
    CHECK(refused == (int)kl);
    uint8_t big[RUMOR_ADMIT_MAX + 1];
    memcpy(big, knock, kl);
    memset(big + kl, 0, sizeof big - kl);
    CHECK(rumor_admit_open(&m, b, big, sizeof big) == RUMOR_EINVAL);
    CHECK(rumor_admit_knock(big, a, bpub, boot, sent, cert_a, la, nonce2) == kl && memcmp(nonce, nonce2, 24) != 0);

    /* The answer: B to A, naming the knock's nonce. */
    uint8_t ans[RUMOR_ADMIT_MAX];
    size_t al = rumor_admit_answer(ans, b, apub, nonce, RUMOR_ADMIT_OK, 7, cert_b, lb);
    CHECK(al == RUMOR_ADMIT_HEAD + 16 + 1 + 24 + 1 + 8 + lb && ans[4] == RUMOR_ADMIT_ANSWER);
    CHECK(al < kl); /* an answer is smaller than the knock it answers: no amplification */
    CHECK_RC(rumor_admit_open(&m, a, ans, al));
    CHECK(m.kind == RUMOR_ADMIT_ANSWER && memcmp(m.from, bpub, 32) == 0 && memcmp(m.nonce, nonce, 24) == 0);
    CHECK(m.status == RUMOR_ADMIT_OK && m.boot == 7 && m.cert_len == lb && memcmp(m.cert, cert_b, lb) == 0);
    al = rumor_admit_answer(ans, b, apub, nonce, RUMOR_CERT_OTHER_SWARM, 7, NULL, 0);
    CHECK_RC(rumor_admit_open(&m, a, ans, al));
    CHECK(m.status == RUMOR_CERT_OTHER_SWARM && m.cert_len == 0);
    CHECK(rumor_admit_open(&m, c, ans, al) == RUMOR_EAUTH);
    /* The kind is sealed: an answer relabelled as a knock (or the reverse) does not open as one. */
    uint8_t relabel[RUMOR_ADMIT_MAX];
    memcpy(relabel, knock, kl);
    relabel[4] = RUMOR_ADMIT_ANSWER;
    CHECK(rumor_admit_open(&m, b, relabel, kl) != RUMOR_OK);

    /* Wrong key: the head alone, unsealed, naming the real key and the knock's nonce. */
    const size_t wl = rumor_admit_wrong_key(ans, bpub, nonce);
    CHECK(wl == RUMOR_ADMIT_HEAD);
    CHECK_RC(rumor_admit_open(&m, c, ans, wl));
    CHECK(m.kind == RUMOR_ADMIT_WRONG_KEY && memcmp(m.from, bpub, 32) == 0 && memcmp(m.nonce, nonce, 24) == 0);
    CHECK(rumor_admit_open(&m, c, ans, wl + 1) == RUMOR_EINVAL);
    ans[4] = 9;
    CHECK(rumor_admit_open(&m, c, ans, wl) == RUMOR_EINVAL);

    rumor_secret_key_destroy(&a);
    rumor_secret_key_destroy(&b);
    rumor_secret_key_destroy(&c);
    rumor_authority_destroy(&auth);
}

/* End to end through a relay: both sides agree on keys only they hold, fresh every session;
 * a relay that knows everything but the static secrets computes other keys; a sealed message
 * opens only unaltered, under its key, between its endpoints, at its counter. */
static void test_e2e(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_secret_key_t *a = rumor_secret_key_generate(err), *b = rumor_secret_key_generate(err),
                       *c = rumor_secret_key_generate(err);
    CHECK(a && b && c);
    if (!a || !b || !c) return;
    const uint8_t *ap = rumor_secret_key_public(a), *bp = rumor_secret_key_public(b);
    rumor_e2e_eph_t ea, eb, ec;
    rumor_e2e_eph_new(&ea);
    rumor_e2e_eph_new(&eb);
    rumor_e2e_eph_new(&ec);
    CHECK(memcmp(ea.pub, eb.pub, 32) != 0);
    rumor_e2e_keys_t ka, kb, kc, ka2;
    CHECK_RC(rumor_e2e_keys(&ka, a, &ea, bp, eb.pub, true));
    CHECK_RC(rumor_e2e_keys(&kb, b, &eb, ap, ea.pub, false));
    CHECK(memcmp(ka.tx, kb.rx, 32) == 0 && memcmp(ka.rx, kb.tx, 32) == 0);
    CHECK(memcmp(ka.tx, ka.rx, 32) != 0);
    /* The relay answers the init with its own ephemeral, or replays the init to b: it holds
     * neither static secret, so the keys it can compute are not the ones the ends use. */
    rumor_e2e_keys_t fake_a, relay_guess;
    CHECK_RC(rumor_e2e_keys(&fake_a, a, &ea, bp, ec.pub, true)); /* a, fooled by the relay's eph */
    CHECK_RC(rumor_e2e_keys(&relay_guess, c, &ec, ap, ea.pub, false));
    CHECK(memcmp(fake_a.tx, relay_guess.rx, 32) != 0 && memcmp(fake_a.rx, relay_guess.tx, 32) != 0);
    /* A new session (new ephemerals) has new keys. */
    rumor_e2e_eph_t ea2 = ea;
    rumor_e2e_eph_new(&ea2);
    CHECK_RC(rumor_e2e_keys(&ka2, a, &ea2, bp, eb.pub, true));
    CHECK(memcmp(ka2.tx, ka.tx, 32) != 0 && memcmp(ka2.rx, ka.rx, 32) != 0);
    /* A degenerate peer ephemeral (all zero: low order) is refused. */
    uint8_t zero[32] = {0};
    CHECK(rumor_e2e_keys(&kc, a, &ea, bp, zero, true) == RUMOR_EAUTH);

    uint8_t msg[100], sealed[100 + RUMOR_E2E_TAG], back[100];
    for (int i = 0; i < 100; i++) msg[i] = (uint8_t)(i * 3 + 1);
    rumor_e2e_seal(sealed, ka.tx, ap, bp, 7, msg, sizeof msg);
    CHECK(memcmp(sealed, msg, sizeof msg) != 0);
    CHECK_RC(rumor_e2e_open(back, kb.rx, ap, bp, 7, sealed, sizeof sealed));
    CHECK(memcmp(back, msg, sizeof msg) == 0);
    CHECK(rumor_e2e_open(back, kb.rx, ap, bp, 8, sealed, sizeof sealed) == RUMOR_EAUTH);  /* another counter */
    CHECK(rumor_e2e_open(back, kb.rx, bp, ap, 7, sealed, sizeof sealed) == RUMOR_EAUTH);  /* other way round */
    CHECK(rumor_e2e_open(back, kb.tx, ap, bp, 7, sealed, sizeof sealed) == RUMOR_EAUTH);  /* another key */
    CHECK(rumor_e2e_open(back, kb.rx, ap, rumor_secret_key_public(c), 7, sealed, sizeof sealed) == RUMOR_EAUTH);
    for (size_t i = 0; i < sizeof sealed; i += 13) {
        sealed[i] ^= 0x01; /* one bit altered anywhere */
        CHECK(rumor_e2e_open(back, kb.rx, ap, bp, 7, sealed, sizeof sealed) == RUMOR_EAUTH);
        sealed[i] ^= 0x01;
    }
    CHECK(rumor_e2e_open(back, kb.rx, ap, bp, 7, sealed, sizeof sealed - 1) == RUMOR_EAUTH); /* cut */
    CHECK(rumor_e2e_open(back, kb.rx, ap, bp, 7, sealed, RUMOR_E2E_TAG) == RUMOR_EAUTH);
    CHECK_RC(rumor_e2e_open(back, kb.rx, ap, bp, 7, sealed, sizeof sealed));
    rumor_secret_key_destroy(&a);
    rumor_secret_key_destroy(&b);
    rumor_secret_key_destroy(&c);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/rumor-test-crypto-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_z85();
    test_hash();
    test_admission();
    test_e2e();
    test_key_files();
    test_secret_never_in_errors();
    test_ed25519_rfc8032();
    test_member_signatures();
    test_authority_dir();
    test_certificates();
    test_cert_sites();
    test_revoked();
    test_addresses();
    remove_tree(dir);
    return check_done();
}
