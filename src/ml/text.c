/* text.c - a corpus of documents or token files (text.h): loading, shards, windows. */
#include "text.h"

#include "rng.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DOCS 100000
#define MAX_DOC_BYTES ((size_t)1 << 31)

static bool ends_with(const char *s, const char *suffix)
{
    const size_t n = strlen(s), k = strlen(suffix);
    return n > k && strcmp(s + n - k, suffix) == 0;
}

static bool exists(const char *dir, const char *name)
{
    char path[4096];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &sb) == 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The .txt files of dir, sorted: *names (malloc'd strings) and *n. */
static rumor_err_t list_docs(const char *dir, char ***names, size_t *n, char err[RUMOR_ERR_LEN])
{
    *names = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return rumor_fail(err, RUMOR_EIO, "%s: %s", dir, strerror(errno));
    size_t cap = 0;
    rumor_err_t rc = RUMOR_OK;
    for (struct dirent *e; (e = readdir(d));) {
        if (!ends_with(e->d_name, ".txt")) continue;
        if (*n == MAX_DOCS) {
            rc = rumor_fail(err, RUMOR_EINVAL, "%s: more than %d documents", dir, MAX_DOCS);
            break;
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            char **grown = realloc(*names, cap * sizeof *grown);
            if (!grown) {
                rc = rumor_fail(err, RUMOR_ENOMEM, "out of memory");
                break;
            }
            *names = grown;
        }
        if (!((*names)[*n] = strdup(e->d_name))) {
            rc = rumor_fail(err, RUMOR_ENOMEM, "out of memory");
            break;
        }
        ++*n;
    }
    closedir(d);
    if (rc == RUMOR_OK && *n > 1) qsort(*names, *n, sizeof **names, by_name);
    return rc;
}

static rumor_err_t read_exact(int fd, uint8_t *dst, size_t n, const char *path, char err[RUMOR_ERR_LEN])
{
    while (n > 0) {
        const ssize_t got = read(fd, dst, n);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
        if (got == 0) return rumor_fail(err, RUMOR_EIO, "%s: shorter than it was a moment ago", path);
        dst += got, n -= (size_t)got;
    }
    return RUMOR_OK;
}

static rumor_err_t load_corpus(rumor_text_t *t, const char *dir, char err[RUMOR_ERR_LEN])
{
    char **names;
    size_t n;
    rumor_err_t rc = list_docs(dir, &names, &n, err);
    size_t *len = NULL;
    if (rc == RUMOR_OK && n == 0) rc = rumor_fail(err, RUMOR_EINVAL, "%s: no .txt documents and no train.bin", dir);
    if (rc == RUMOR_OK && !(len = calloc(n, sizeof *len))) rc = rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    char path[4096];
    size_t train = 0, val = 0;
    for (size_t i = 0; rc == RUMOR_OK && i < n; i++) {
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (stat(path, &sb) != 0) rc = rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
        else if (!S_ISREG(sb.st_mode)) rc = rumor_fail(err, RUMOR_EINVAL, "%s: not a file", path);
        else if ((size_t)sb.st_size > MAX_DOC_BYTES) rc = rumor_fail(err, RUMOR_EINVAL, "%s: over 2 GiB", path);
        else len[i] = (size_t)sb.st_size, val += len[i] / 10, train += len[i] - len[i] / 10;
    }
    if (rc == RUMOR_OK && train == 0) rc = rumor_fail(err, RUMOR_EINVAL, "%s: its documents hold no text", dir);
    if (rc == RUMOR_OK) {
        t->bytes = malloc(train + val);
        t->train_at = malloc((n + 1) * sizeof *t->train_at);
        t->val_at = malloc((n + 1) * sizeof *t->val_at);
        if (!t->bytes || !t->train_at || !t->val_at) rc = rumor_fail(err, RUMOR_ENOMEM, "out of memory for %s", dir);
    }
    size_t at_train = 0, at_val = 0;
    for (size_t i = 0; rc == RUMOR_OK && i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        const int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            rc = rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
            break;
        }
        const size_t v = len[i] / 10, tr = len[i] - v;
        t->train_at[i] = at_train, t->val_at[i] = at_val;
        rc = read_exact(fd, t->bytes + at_train, tr, path, err);
        if (rc == RUMOR_OK) rc = read_exact(fd, t->bytes + train + at_val, v, path, err);
        uint8_t extra;
        if (rc == RUMOR_OK && read(fd, &extra, 1) != 0) rc = rumor_fail(err, RUMOR_EIO, "%s: grew while read", path);
        close(fd);
        at_train += tr, at_val += v;
    }
    if (rc == RUMOR_OK) {
        t->train_at[n] = train, t->val_at[n] = val;
        t->vocab = RUMOR_TEXT_VOCAB_BYTES, t->width = 1, t->n_docs = n;
        t->train = t->bytes, t->val = t->bytes + train, t->n_train = train, t->n_val = val;
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    free(len);
    return rc;
}

/* Read dir/name (uint16 tokens below vocab) into slot k. Read, not mapped: a mapped file that
 * someone rewrites or truncates during the run would put tokens past the vocabulary under the
 * embedding (reads and writes out of bounds) or raise SIGBUS; a private copy is checked once
 * and stays what was checked. */
static rumor_err_t map_tokens(rumor_text_t *t, int k, const char *dir, const char *name, int vocab,
                              char err[RUMOR_ERR_LEN])
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
    struct stat sb;
    rumor_err_t rc = RUMOR_OK;
    if (fstat(fd, &sb) != 0) rc = rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode)) rc = rumor_fail(err, RUMOR_EINVAL, "%s: not a file", path);
    else if (sb.st_size == 0) rc = rumor_fail(err, RUMOR_EINVAL, "%s: empty", path);
    else if (sb.st_size % 2)
        rc = rumor_fail(err, RUMOR_EINVAL, "%s: %lld bytes, not a whole number of uint16 tokens", path,
                        (long long)sb.st_size);
    uint8_t *p = NULL;
    if (rc == RUMOR_OK && !(p = malloc((size_t)sb.st_size)))
        rc = rumor_fail(err, RUMOR_ENOMEM, "%s: out of memory for %lld bytes", path, (long long)sb.st_size);
    for (size_t got = 0; rc == RUMOR_OK && got < (size_t)sb.st_size;) {
        const ssize_t r = read(fd, p + got, (size_t)sb.st_size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) rc = rumor_fail(err, RUMOR_EIO, "%s: %s", path, r < 0 ? strerror(errno) : "shorter than it was");
        else got += (size_t)r;
    }
    close(fd);
    if (rc != RUMOR_OK) {
        free(p);
        return rc;
    }
    t->map[k] = p, t->map_len[k] = (size_t)sb.st_size;
    const uint8_t *b = p;
    for (size_t i = 0; i < (size_t)sb.st_size / 2; i++) {
        const int tok = b[2 * i] | b[2 * i + 1] << 8;
        if (tok >= vocab)
            return rumor_fail(err, RUMOR_EINVAL, "%s: token %d at %zu is not below --vocab %d", path, tok, i, vocab);
    }
    return RUMOR_OK;
}

static rumor_err_t load_tokens(rumor_text_t *t, const char *dir, int vocab, char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc;
    if ((rc = map_tokens(t, 0, dir, "train.bin", vocab, err)) != RUMOR_OK ||
        (rc = map_tokens(t, 1, dir, "val.bin", vocab, err)) != RUMOR_OK)
        return rc;
    t->train_at = malloc(2 * sizeof *t->train_at);
    t->val_at = malloc(2 * sizeof *t->val_at);
    if (!t->train_at || !t->val_at) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    t->vocab = vocab, t->width = 2, t->n_docs = 1;
    t->train = t->map[0], t->n_train = t->map_len[0] / 2;
    t->val = t->map[1], t->n_val = t->map_len[1] / 2;
    t->train_at[0] = 0, t->train_at[1] = t->n_train;
    t->val_at[0] = 0, t->val_at[1] = t->n_val;
    return RUMOR_OK;
}

bool rumor_text_is_tokens(const char *dir) { return exists(dir, "train.bin"); }

bool rumor_text_is_text(const char *dir)
{
    if (exists(dir, "train.bin")) return true;
    DIR *d = opendir(dir);
    if (!d) return false;
    bool found = false;
    for (struct dirent *e; !found && (e = readdir(d));) found = ends_with(e->d_name, ".txt");
    closedir(d);
    return found;
}

rumor_err_t rumor_text_load(rumor_text_t *t, const char *dir, int vocab, char err[RUMOR_ERR_LEN])
{
    memset(t, 0, sizeof *t);
    rumor_err_t rc;
    if (exists(dir, "train.bin")) {
        if (vocab == 0) vocab = RUMOR_TEXT_VOCAB_DEFAULT;
        if (vocab < 2 || vocab > RUMOR_TEXT_VOCAB_MAX)
            return rumor_fail(err, RUMOR_EINVAL, "--vocab %d: expected 2..%d", vocab, RUMOR_TEXT_VOCAB_MAX);
        char **names;
        size_t n;
        if ((rc = list_docs(dir, &names, &n, err)) != RUMOR_OK) return rc;
        for (size_t i = 0; i < n; i++) free(names[i]);
        free(names);
        if (n > 0)
            return rumor_fail(err, RUMOR_EINVAL, "%s holds both .txt documents and train.bin: give a folder of one kind",
                              dir);
        rc = load_tokens(t, dir, vocab, err);
    } else {
        if (vocab != 0 && vocab != RUMOR_TEXT_VOCAB_BYTES)
            return rumor_fail(err, RUMOR_EINVAL, "--vocab %d: a corpus of .txt documents has 256 tokens, its bytes",
                              vocab);
        rc = load_corpus(t, dir, err);
    }
    if (rc != RUMOR_OK) rumor_text_fini(t);
    return rc;
}

void rumor_text_fini(rumor_text_t *t)
{
    free(t->bytes);
    free(t->train_at);
    free(t->val_at);
    for (int k = 0; k < 2; k++)
        free(t->map[k]);
    memset(t, 0, sizeof *t);
}

/* ---- shards ---- */

/* The p-th of `parts` nearly equal runs of n: [cut(p), cut(p + 1)). */
static size_t cut(size_t n, size_t parts, size_t p)
{
    return (n / parts) * p + (n % parts) * p / parts;
}

static rumor_err_t add_seg(rumor_text_shard_t *s, size_t a, size_t b)
{
    if (b <= a) return RUMOR_OK;
    struct rumor_text_seg *grown = realloc(s->seg, (s->n_seg + 1) * sizeof *grown);
    if (!grown) return RUMOR_ENOMEM;
    s->seg = grown;
    const size_t w = b - a > (size_t)s->T ? b - a - (size_t)s->T : 0;
    s->seg[s->n_seg++] = (struct rumor_text_seg){.a = a, .b = b, .first = s->windows};
    s->windows += w;
    s->tokens += b - a;
    return RUMOR_OK;
}

typedef struct {
    size_t len, doc;
} doc_len_t;

/* Longest first, ties by the document's place: the same order everywhere. */
static int longest_first(const void *a, const void *b)
{
    const doc_len_t *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? 1 : -1;
    return x->doc < y->doc ? -1 : x->doc > y->doc;
}

/* docs: document d's peer, largest training part first to the peer with the fewest tokens. */
static rumor_err_t docs_owner(const rumor_text_t *t, int peers, int *owner, char err[RUMOR_ERR_LEN])
{
    size_t *load = calloc((size_t)peers, sizeof *load);
    doc_len_t *by = malloc(t->n_docs * sizeof *by);
    if (!load || !by) {
        free(load);
        free(by);
        return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < t->n_docs; i++) by[i] = (doc_len_t){t->train_at[i + 1] - t->train_at[i], i};
    qsort(by, t->n_docs, sizeof *by, longest_first);
    for (size_t i = 0; i < t->n_docs; i++) {
        int best = 0;
        for (int p = 1; p < peers; p++)
            if (load[p] < load[best]) best = p;
        owner[by[i].doc] = best;
        load[best] += by[i].len;
    }
    free(by);
    free(load);
    return RUMOR_OK;
}

rumor_err_t rumor_text_shard(rumor_text_shard_t *s, const rumor_text_t *t, const rumor_partition_t *part,
                             int rank, int peers, int T, char err[RUMOR_ERR_LEN])
{
    memset(s, 0, sizeof *s);
    s->T = T;
    if (T < 1) return rumor_fail(err, RUMOR_EINVAL, "a window of %d tokens", T);
    if (!part) rank = 0, peers = 1;
    if (peers < 1 || rank < 0 || rank >= peers)
        return rumor_fail(err, RUMOR_EINVAL, "--rank %d --of %d: expected 0 <= rank < of", rank, peers);
    s->rank = rank;
    rumor_err_t rc = RUMOR_OK;
    if (!part || part->kind == RUMOR_PART_IID) {
        for (size_t d = 0; d < t->n_docs && rc == RUMOR_OK; d++) {
            const size_t a = t->train_at[d], n = t->train_at[d + 1] - a;
            rc = add_seg(s, a + cut(n, (size_t)peers, (size_t)rank), a + cut(n, (size_t)peers, (size_t)rank + 1));
        }
        if (rc != RUMOR_OK) rc = rumor_fail(err, rc, "out of memory");
    } else if (part->kind == RUMOR_PART_DOCS) {
        if ((size_t)peers > t->n_docs) {
            return rumor_fail(err, RUMOR_EINVAL, "--partition docs: %d peers but %zu document%s%s", peers, t->n_docs,
                              t->n_docs == 1 ? "" : "s", t->width == 2 ? " (token files are one; try iid)" : "");
        }
        int *owner = malloc(t->n_docs * sizeof *owner);
        if (!owner) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        rc = docs_owner(t, peers, owner, err);
        for (size_t d = 0; d < t->n_docs && rc == RUMOR_OK; d++)
            if (owner[d] == rank && (rc = add_seg(s, t->train_at[d], t->train_at[d + 1])) != RUMOR_OK)
                rc = rumor_fail(err, rc, "out of memory");
        free(owner);
    } else {
        char name[64];
        rumor_partition_format(name, sizeof name, part);
        return rumor_fail(err, RUMOR_EINVAL, "--partition %s: for labelled data; text takes docs or iid", name);
    }
    if (rc == RUMOR_OK && s->windows == 0)
        rc = rumor_fail(err, RUMOR_EINVAL, "%s has no window of %d tokens: its documents are shorter",
                        peers > 1 ? "this peer's shard" : "the training split", T + 1);
    if (rc != RUMOR_OK) rumor_text_shard_fini(s);
    return rc;
}

void rumor_text_shard_fini(rumor_text_shard_t *s)
{
    free(s->seg);
    memset(s, 0, sizeof *s);
}

size_t rumor_text_window(const rumor_text_shard_t *s, size_t i)
{
    size_t lo = 0, hi = s->n_seg; /* seg[lo].first <= i < seg[hi].first */
    while (hi - lo > 1) {
        const size_t mid = lo + (hi - lo) / 2;
        if (s->seg[mid].first <= i) lo = mid;
        else hi = mid;
    }
    /* The last such segment holds window i: one without windows shares `first` with the next. */
    return s->seg[lo].a + (i - s->seg[lo].first);
}

void rumor_text_batch(const rumor_text_t *t, const rumor_text_shard_t *s, uint64_t seed, uint64_t step, int b,
                      int32_t *x, int32_t *y)
{
    rumor_rng_t rng;
    rumor_rng_init2(&rng, seed, 0x7e47 ^ (uint64_t)s->rank << 16, step);
    for (int k = 0; k < b; k++) {
        const size_t i = (size_t)rumor_rng_below(&rng, s->windows);
        rumor_text_windows(t, s, &i, 1, x + (size_t)k * s->T, y + (size_t)k * s->T);
    }
}

void rumor_text_windows(const rumor_text_t *t, const rumor_text_shard_t *s, const size_t *pos, size_t k, int32_t *x,
                        int32_t *y)
{
    const size_t T = (size_t)s->T;
    for (size_t w = 0; w < k; w++) {
        const size_t at = rumor_text_window(s, pos[w]);
        for (size_t j = 0; j < T; j++) {
            x[w * T + j] = rumor_text_token(t, false, at + j);
            y[w * T + j] = rumor_text_token(t, false, at + j + 1);
        }
    }
}

size_t rumor_text_val_windows(const rumor_text_t *t, int T, size_t *starts)
{
    size_t n = 0;
    for (size_t d = 0; d < t->n_docs; d++) {
        const size_t a = t->val_at[d], len = t->val_at[d + 1] - a;
        for (size_t at = 0; at + (size_t)T + 1 <= len; at += (size_t)T) {
            if (starts) starts[n] = a + at;
            n++;
        }
    }
    return n;
}
