/* data.c - IDX and safetensors loading with full validation, statistics, batch gathering. */
#include "data.h"

#include "safetensors.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define IDX_MAGIC_IMAGES 0x00000803u /* unsigned bytes, 3 dimensions (count, rows, cols) */
#define IDX_MAGIC_LABELS 0x00000801u /* unsigned bytes, 1 dimension (count) */
#define IDX_MAX_SIDE 4096u
#define IDX_MAX_BYTES ((uint64_t)2 << 30) /* refuse data areas over 2 GiB */
#define IDX_PATH_LEN 4096
/* gzread takes an unsigned and returns an int: read big areas in chunks below INT_MAX. */
#define IDX_READ_CHUNK ((size_t)1 << 30)

typedef struct {
    gzFile gz;
    char path[IDX_PATH_LEN]; /* the file actually opened: NAME or NAME.gz */
} idx_file_t;

// ---- opening and reading ----

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Open one candidate path. Returns 0 on success, else an errno value (ENOMEM when zlib
 * could not allocate its state). Opening the descriptor ourselves, rather than through
 * gzopen, gives a reliable errno and lets us refuse a directory up front. */
static int idx_try_open(idx_file_t *f, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    struct stat st;
    int e = fstat(fd, &st) != 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : 0;
    if (e) {
        close(fd);
        return e;
    }
    f->gz = gzdopen(fd, "rb");
    if (!f->gz) {
        close(fd);
        return ENOMEM;
    }
    /* A larger buffer than zlib's 8 KiB default roughly halves the syscalls on big files. */
    (void)gzbuffer(f->gz, 128 * 1024);
    return 0;
}

/* Open PATH, or PATH.gz when PATH does not exist. gzread reads plain files transparently,
 * so both forms go through the same code. */
static rumor_err_t idx_open(idx_file_t *f, const char *path, char *err)
{
    f->gz = NULL;
    if (strlen(path) + 4 > sizeof f->path)
        return rumor_fail(err, RUMOR_EINVAL, "%.64s...: path too long", path);
    snprintf(f->path, sizeof f->path, "%s", path);
    int e = idx_try_open(f, f->path);
    if (e == 0) return RUMOR_OK;
    if (e != ENOENT) goto fail;
    if (ends_with(path, ".gz")) return rumor_fail(err, RUMOR_EIO, "%s: no such file", path);
    snprintf(f->path, sizeof f->path, "%s.gz", path);
    e = idx_try_open(f, f->path);
    if (e == 0) return RUMOR_OK;
    if (e == ENOENT) return rumor_fail(err, RUMOR_EIO, "%s: no such file (nor .gz)", path);
fail:
    if (e == ENOMEM) return rumor_fail(err, RUMOR_ENOMEM, "%s: out of memory", f->path);
    return rumor_fail(err, RUMOR_EIO, "%s: cannot open: %s", f->path, strerror(e));
}

static rumor_err_t idx_read_error(idx_file_t *f, char *err)
{
    int zerr = Z_OK;
    const char *msg = gzerror(f->gz, &zerr);
    switch (zerr) {
    case Z_ERRNO: return rumor_fail(err, RUMOR_EIO, "%s: read error: %s", f->path, strerror(errno));
    case Z_MEM_ERROR: return rumor_fail(err, RUMOR_ENOMEM, "%s: out of memory", f->path);
    case Z_DATA_ERROR: return rumor_fail(err, RUMOR_EFORMAT, "%s: corrupt gzip data: %s", f->path, msg);
    default: return rumor_fail(err, RUMOR_EIO, "%s: read error: %s", f->path, msg);
    }
}

/* Read up to len bytes; *got < len means the data ended early (a gzip stream cut short
 * also ends up here, as zlib's Z_BUF_ERROR, so the caller reports it as truncation). */
static rumor_err_t idx_read(idx_file_t *f, void *buf, size_t len, size_t *got, char *err)
{
    size_t done = 0;
    while (done < len) {
        size_t chunk = len - done < IDX_READ_CHUNK ? len - done : IDX_READ_CHUNK;
        int n = gzread(f->gz, (uint8_t *)buf + done, (unsigned)chunk);
        if (n < 0) return idx_read_error(f, err);
        if (n == 0) break;
        done += (size_t)n;
    }
    *got = done;
    return RUMOR_OK;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

// ---- one IDX file ----

/* Load a whole IDX file of unsigned bytes whose magic must be `magic` (its low byte is the
 * number of dimensions). dims[0] is the sample count, the others image sides. On success
 * *data (malloc'd, caller frees) holds the product of dims bytes and `opened` the name of
 * the file read (PATH or PATH.gz), for later messages about its contents. */
static rumor_err_t idx_load(const char *path, uint32_t magic, uint32_t dims[3], uint8_t **data,
                            size_t *data_len, char opened[IDX_PATH_LEN], char *err)
{
    const unsigned ndim = magic & 0xffu;
    const int images = magic == IDX_MAGIC_IMAGES;
    const char *what = images ? "image" : "label";
    assert(ndim >= 1 && ndim <= 3);

    idx_file_t f;
    uint8_t hdr[16];
    uint8_t *buf = NULL;
    size_t got = 0;
    const size_t hdr_len = 4 + 4 * (size_t)ndim;
    *data = NULL;
    *data_len = 0;

    rumor_err_t rc = idx_open(&f, path, err);
    if (rc != RUMOR_OK) return rc;

    if ((rc = idx_read(&f, hdr, 4, &got, err)) != RUMOR_OK) goto out;
    if (got < 4) {
        rc = rumor_fail(err, RUMOR_EFORMAT, "%s: truncated: %zu bytes, too short for an IDX header",
                        f.path, got);
        goto out;
    }
    uint32_t m = be32(hdr);
    if (m != magic) {
        uint32_t other = images ? IDX_MAGIC_LABELS : IDX_MAGIC_IMAGES;
        rc = rumor_fail(err, RUMOR_EFORMAT,
                        "%s: bad magic 0x%08" PRIx32 " (expected 0x%08" PRIx32 ", an IDX %s file%s)",
                        f.path, m, magic, what,
                        m == other ? (images ? "; this is a label file" : "; this is an image file")
                                   : "");
        goto out;
    }
    if ((rc = idx_read(&f, hdr + 4, hdr_len - 4, &got, err)) != RUMOR_OK) goto out;
    if (got < hdr_len - 4) {
        rc = rumor_fail(err, RUMOR_EFORMAT, "%s: truncated: %zu bytes, too short for an IDX %s header",
                        f.path, 4 + got, what);
        goto out;
    }

    char shape[64];
    int shape_len = 0;
    for (unsigned i = 0; i < ndim; i++) {
        dims[i] = be32(hdr + 4 + 4 * i);
        shape_len += snprintf(shape + shape_len, sizeof shape - (size_t)shape_len, "%s%" PRIu32,
                              i ? "x" : "", dims[i]);
    }
    if (dims[0] == 0) {
        rc = rumor_fail(err, RUMOR_EFORMAT, "%s: bad dimensions %s: no %ss", f.path, shape, what);
        goto out;
    }
    for (unsigned i = 1; i < ndim; i++) {
        if (dims[i] == 0 || dims[i] > IDX_MAX_SIDE) {
            rc = rumor_fail(err, RUMOR_EFORMAT, "%s: bad dimensions %s: image sides must be 1..%u",
                            f.path, shape, IDX_MAX_SIDE);
            goto out;
        }
    }
    /* Every dimension is checked before it sizes anything: with sides bounded the product
     * fits in 64 bits (2^32 * 4096 * 4096 < 2^64). */
    uint64_t total = 1;
    for (unsigned i = 0; i < ndim; i++) total *= dims[i];
    if (total > IDX_MAX_BYTES || total > SIZE_MAX - hdr_len) {
        rc = rumor_fail(err, RUMOR_EFORMAT, "%s: too large: %s is %" PRIu64 " bytes (limit %" PRIu64 ")",
                        f.path, shape, total, IDX_MAX_BYTES);
        goto out;
    }

    const size_t len = (size_t)total;
    if (!(buf = malloc(len))) {
        rc = rumor_fail(err, RUMOR_ENOMEM, "%s: out of memory for %zu bytes", f.path, len);
        goto out;
    }
    if ((rc = idx_read(&f, buf, len, &got, err)) != RUMOR_OK) goto out;
    if (got < len) {
        rc = rumor_fail(err, RUMOR_EFORMAT,
                        "%s: truncated: expected %zu bytes (%zu header + %zu data), got %zu",
                        f.path, hdr_len + len, hdr_len, len, hdr_len + got);
        goto out;
    }
    uint8_t extra;
    if ((rc = idx_read(&f, &extra, 1, &got, err)) != RUMOR_OK) goto out;
    if (got) {
        rc = rumor_fail(err, RUMOR_EFORMAT, "%s: trailing bytes after the expected %zu (%s %ss)",
                        f.path, hdr_len + len, shape, what);
        goto out;
    }
    /* All the data may decode before a cut-off gzip stream ends (its CRC and length trailer
     * missing): zlib then reports Z_BUF_ERROR at end of input rather than a short read. */
    int zerr = Z_OK;
    (void)gzerror(f.gz, &zerr);
    if (zerr == Z_BUF_ERROR) {
        rc = rumor_fail(err, RUMOR_EFORMAT, "%s: truncated: the gzip stream ends early", f.path);
        goto out;
    }
    *data = buf;
    *data_len = len;
    memcpy(opened, f.path, sizeof f.path);
    buf = NULL;
out:
    free(buf);
    gzclose(f.gz);
    return rc;
}

// ---- datasets ----

void rumor_dataset_fini(rumor_dataset_t *ds)
{
    if (!ds) return;
    free(ds->pixels);
    free(ds->values);
    free(ds->labels);
    memset(ds, 0, sizeof *ds);
}

rumor_err_t rumor_data_load_pair(rumor_dataset_t *out, const char *images_path,
                                 const char *labels_path, char err[RUMOR_ERR_LEN])
{
    assert(out && images_path && labels_path);
    memset(out, 0, sizeof *out);
    uint32_t idims[3] = {0}, ldims[3] = {0};
    uint8_t *pixels = NULL, *labels = NULL;
    size_t pixels_len = 0, labels_len = 0;
    char ipath[IDX_PATH_LEN], lpath[IDX_PATH_LEN];

    rumor_err_t rc = idx_load(images_path, IDX_MAGIC_IMAGES, idims, &pixels, &pixels_len, ipath, err);
    if (rc != RUMOR_OK) goto out;
    rc = idx_load(labels_path, IDX_MAGIC_LABELS, ldims, &labels, &labels_len, lpath, err);
    if (rc != RUMOR_OK) goto out;
    if (ldims[0] != idims[0]) {
        rc = rumor_fail(err, RUMOR_EFORMAT, "%s: %" PRIu32 " labels but %" PRIu32 " images in %s",
                        lpath, ldims[0], idims[0], ipath);
        goto out;
    }
    for (size_t i = 0; i < labels_len; i++) {
        if (labels[i] >= RUMOR_DATA_CLASSES) {
            rc = rumor_fail(err, RUMOR_EFORMAT, "%s: label %u at index %zu out of range 0..%d",
                            lpath, labels[i], i, RUMOR_DATA_CLASSES - 1);
            goto out;
        }
    }
    out->count = idims[0];
    out->channels = 1;
    out->classes = RUMOR_DATA_CLASSES;
    out->rows = idims[1];
    out->cols = idims[2];
    out->pixels = pixels;
    out->labels = labels;
    pixels = labels = NULL;
out:
    free(pixels);
    free(labels);
    return rc;
}

static rumor_err_t load_split(rumor_dataset_t *ds, const char *dir, const char *images,
                              const char *labels, char *err)
{
    char ipath[IDX_PATH_LEN], lpath[IDX_PATH_LEN];
    int a = snprintf(ipath, sizeof ipath, "%s/%s", dir, images);
    int b = snprintf(lpath, sizeof lpath, "%s/%s", dir, labels);
    if (a < 0 || b < 0 || (size_t)a >= sizeof ipath || (size_t)b >= sizeof lpath) {
        memset(ds, 0, sizeof *ds);
        return rumor_fail(err, RUMOR_EINVAL, "%.64s...: path too long", dir);
    }
    return rumor_data_load_pair(ds, ipath, lpath, err);
}

// ---- one safetensors file: train.x, train.y, test.x, test.y ----

#define ST_MAX_VALUES ((uint64_t)1 << 29) /* refuse more than 2 GiB of float inputs a split */

/* An integer dtype of safetensors: its bytes and sign. */
typedef struct {
    const char *dtype;
    unsigned size;
    bool is_signed;
} st_int_t;

static const st_int_t ST_INTS[] = {{"U8", 1, false},  {"I8", 1, true},  {"U16", 2, false}, {"I16", 2, true},
                                   {"U32", 4, false}, {"I32", 4, true}, {"U64", 8, false}, {"I64", 8, true}};

/* y's integer dtype; NULL when it is not an integer. */
static const st_int_t *st_int(const rumor_st_tensor_t *y)
{
    for (size_t k = 0; k < RUMOR_ARRAY_LEN(ST_INTS); k++)
        if (strcmp(y->dtype, ST_INTS[k].dtype) == 0) return &ST_INTS[k];
    return NULL;
}

/* Label i of y, an integer tensor of type k. */
static int64_t st_label(const rumor_st_tensor_t *y, const st_int_t *k, size_t i)
{
    const uint8_t *p = (const uint8_t *)y->data + i * k->size;
    uint64_t u = 0;
    for (unsigned b = 0; b < k->size; b++) u |= (uint64_t)p[b] << (8 * b); /* little-endian */
    if (k->is_signed && k->size < 8 && (u >> (8 * k->size - 1)) & 1) u |= ~(uint64_t)0 << (8 * k->size); /* sign */
    return k->is_signed ? (int64_t)u : u > INT64_MAX ? INT64_MAX : (int64_t)u;
}

/* One split ("train" or "test") of f into ds. */
static rumor_err_t st_split(rumor_dataset_t *ds, const rumor_st_file_t *f, const char *path, const char *split,
                            char err[RUMOR_ERR_LEN])
{
    char xn[16], yn[16];
    snprintf(xn, sizeof xn, "%s.x", split);
    snprintf(yn, sizeof yn, "%s.y", split);
    const rumor_st_tensor_t *x = rumor_st_find(f, xn), *y = rumor_st_find(f, yn);
    if (!x || !y)
        return rumor_fail(err, RUMOR_EFORMAT, "%s: no tensor %s (labelled data holds train.x, train.y, test.x, "
                          "test.y)", path, x ? yn : xn);
    const bool u8 = strcmp(x->dtype, "U8") == 0;
    if (!u8 && strcmp(x->dtype, "F32") != 0)
        return rumor_fail(err, RUMOR_EFORMAT, "%s: %s is %s; inputs are U8 or F32", path, xn, x->dtype);
    if (x->ndim < 2 || x->ndim > 4)
        return rumor_fail(err, RUMOR_EFORMAT, "%s: %s has %d dimensions; expected [N, F], [N, H, W] or [N, C, H, W]",
                          path, xn, x->ndim);
    const uint64_t n = x->shape[0];
    const uint64_t c = x->ndim == 4 ? x->shape[1] : 1, h = x->ndim == 2 ? 1 : x->shape[x->ndim - 2],
                   w = x->shape[x->ndim - 1];
    if (n == 0 || c == 0 || h == 0 || w == 0)
        return rumor_fail(err, RUMOR_EFORMAT, "%s: %s is empty", path, xn);
    if (c > IDX_MAX_SIDE || h > IDX_MAX_SIDE || w > IDX_MAX_SIDE * IDX_MAX_SIDE || c * h * w > ST_MAX_VALUES ||
        n > ST_MAX_VALUES / (c * h * w))
        return rumor_fail(err, RUMOR_EFORMAT, "%s: %s is too large", path, xn);
    if (y->ndim != 1 || y->shape[0] != n)
        return rumor_fail(err, RUMOR_EFORMAT, "%s: %s should be one label per sample of %s ([%" PRIu64 "])", path, yn,
                          xn, n);
    const size_t count = (size_t)n, feat = (size_t)(c * h * w);
    ds->count = count, ds->channels = (size_t)c, ds->rows = (size_t)h, ds->cols = (size_t)w;
    ds->labels = malloc(count);
    if (u8) ds->pixels = malloc(count * feat);
    else ds->values = malloc(count * feat * sizeof *ds->values);
    if (!ds->labels || (!ds->pixels && !ds->values)) return rumor_fail(err, RUMOR_ENOMEM, "out of memory for %s", path);
    const st_int_t *k = st_int(y);
    if (!k) return rumor_fail(err, RUMOR_EFORMAT, "%s: %s is %s; labels are integers", path, yn, y->dtype);
    for (size_t i = 0; i < count; i++) {
        const int64_t v = st_label(y, k, i);
        if (v < 0 || v >= RUMOR_DATA_MAX_CLASSES)
            return rumor_fail(err, RUMOR_EFORMAT, "%s: label %" PRId64 " at index %zu of %s; labels are 0..%d", path, v,
                              i, yn, RUMOR_DATA_MAX_CLASSES - 1);
        ds->labels[i] = (uint8_t)v;
        if (v >= ds->classes) ds->classes = (int)v + 1;
    }
    if (u8) {
        memcpy(ds->pixels, x->data, count * feat);
        return RUMOR_OK;
    }
    memcpy(ds->values, x->data, count * feat * sizeof *ds->values); /* the file's bytes are unaligned */
    for (size_t i = 0; i < count * feat; i++)
        if (!isfinite(ds->values[i]))
            return rumor_fail(err, RUMOR_EFORMAT, "%s: %s has a value that is not finite at %zu", path, xn, i);
    return RUMOR_OK;
}

static rumor_err_t load_st(rumor_dataset_t *train, rumor_dataset_t *test, const char *path, char err[RUMOR_ERR_LEN])
{
    rumor_st_file_t *f = rumor_st_open(path, err);
    if (!f) return rumor_last_error();
    rumor_dataset_t tr = {0}, te = {0};
    rumor_err_t rc = st_split(&tr, f, path, "train", err);
    if (rc == RUMOR_OK) rc = st_split(&te, f, path, "test", err);
    if (rc == RUMOR_OK && (tr.channels != te.channels || tr.rows != te.rows || tr.cols != te.cols ||
                           !tr.pixels != !te.pixels))
        rc = rumor_fail(err, RUMOR_EFORMAT, "%s: train.x is %s %zux%zux%zu a sample but test.x is %s %zux%zux%zu",
                        path, tr.pixels ? "U8" : "F32", tr.channels, tr.rows, tr.cols, te.pixels ? "U8" : "F32",
                        te.channels, te.rows, te.cols);
    /* both splits have every class either has, or what the file says there are */
    int classes = tr.classes > te.classes ? tr.classes : te.classes;
    const char *said = rumor_st_meta(f, "classes");
    if (rc == RUMOR_OK && said) {
        char *end;
        const long v = strtol(said, &end, 10);
        if (*end || v < classes || v > RUMOR_DATA_MAX_CLASSES)
            rc = rumor_fail(err, RUMOR_EFORMAT, "%s: metadata classes \"%.16s\": expected %d..%d", path, said,
                            classes, RUMOR_DATA_MAX_CLASSES);
        else
            classes = (int)v;
    }
    if (rc == RUMOR_OK && classes < 2)
        rc = rumor_fail(err, RUMOR_EFORMAT, "%s: every label is 0: a classifier needs two classes or more", path);
    tr.classes = te.classes = classes;
    rumor_st_destroy(&f);
    if (rc != RUMOR_OK) {
        rumor_dataset_fini(&tr);
        rumor_dataset_fini(&te);
        return rc;
    }
    if (train) *train = tr;
    else rumor_dataset_fini(&tr);
    if (test) *test = te;
    else rumor_dataset_fini(&te);
    return RUMOR_OK;
}

rumor_err_t rumor_data_load_dir(rumor_dataset_t *train, rumor_dataset_t *test, const char *dir,
                                char err[RUMOR_ERR_LEN])
{
    assert(dir);
    rumor_err_t rc = RUMOR_OK;
    if (train) memset(train, 0, sizeof *train);
    if (test) memset(test, 0, sizeof *test);
    if (ends_with(dir, ".safetensors")) return load_st(train, test, dir, err);
    /* a file of another name: a safetensors file too, or said to be neither */
    struct stat st;
    if (stat(dir, &st) == 0 && S_ISREG(st.st_mode)) {
        if ((rc = load_st(train, test, dir, err)) != RUMOR_OK) {
            char why[RUMOR_ERR_LEN];
            const size_t n = strlen(dir);
            snprintf(why, sizeof why, "%s", strncmp(err, dir, n) == 0 && err[n] == ':' ? err + n + 2 : err);
            rumor_fail(err, rc, "%s: a file, so not a folder of IDX files; read as a safetensors file of train.x, "
                       "train.y, test.x and test.y: %s", dir, why);
        }
        return rc;
    }
    if (train && (rc = load_split(train, dir, "train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                  err)) != RUMOR_OK)
        goto out;
    if (test && (rc = load_split(test, dir, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte",
                                 err)) != RUMOR_OK)
        goto out;
    if (train && test && (train->rows != test->rows || train->cols != test->cols)) {
        rc = rumor_fail(err, RUMOR_EFORMAT, "%s: training images are %zux%zu but test images are %zux%zu",
                        dir, train->rows, train->cols, test->rows, test->cols);
        goto out;
    }
out:
    if (rc != RUMOR_OK) {
        rumor_dataset_fini(train);
        rumor_dataset_fini(test);
    }
    return rc;
}

// ---- statistics and batches ----

void rumor_data_stats(const rumor_dataset_t *ds, float *mean, float *std)
{
    assert(ds && mean && std);
    const size_t n = ds->count * rumor_data_feat(ds);
    if (n == 0) {
        *mean = 0.0f;
        *std = 1.0f;
        return;
    }
    double m = 0.0, ss = 0.0;
    if (ds->values) { /* two passes in double: centred terms, no cancellation */
        for (size_t i = 0; i < n; i++) m += ds->values[i];
        m /= (double)n;
        for (size_t i = 0; i < n; i++) ss += (ds->values[i] - m) * (ds->values[i] - m);
    } else {
        /* A histogram of the 256 byte values gives both moments exactly in two short passes,
         * whatever the dataset size, and the variance comes from centred terms, so there is
         * no cancellation from E[x^2] - E[x]^2. */
        uint64_t hist[256] = {0};
        for (size_t i = 0; i < n; i++) hist[ds->pixels[i]]++;
        double sum = 0.0;
        for (int v = 0; v < 256; v++) sum += (double)hist[v] * (v / 255.0);
        m = sum / (double)n;
        for (int v = 0; v < 256; v++) {
            double d = v / 255.0 - m;
            ss += (double)hist[v] * d * d;
        }
    }
    const double s = sqrt(ss / (double)n);
    *mean = (float)m;
    *std = s > 0.0 && isfinite(s) ? (float)s : 1.0f;
}

void rumor_data_gather(const rumor_dataset_t *ds, const size_t *idx, size_t n, float mean,
                       float std, float *x, int32_t *y)
{
    assert(ds && (n == 0 || (idx && x && y)));
    assert(std > 0.0f);
    const size_t dim = rumor_data_feat(ds);
    if (ds->values) {
        const float inv = 1.0f / std;
        for (size_t i = 0; i < n; i++) {
            assert(idx[i] < ds->count);
            const float *v = ds->values + idx[i] * dim;
            float *o = x + i * dim;
            for (size_t j = 0; j < dim; j++) o[j] = (v[j] - mean) * inv;
            y[i] = ds->labels[idx[i]];
        }
        return;
    }
    /* One table per call: 256 divisions instead of one per pixel. */
    float lut[256];
    for (int v = 0; v < 256; v++) lut[v] = (float)((v / 255.0 - (double)mean) / (double)std);
    for (size_t i = 0; i < n; i++) {
        assert(idx[i] < ds->count);
        const uint8_t *p = ds->pixels + idx[i] * dim;
        float *o = x + i * dim;
        for (size_t j = 0; j < dim; j++) o[j] = lut[p[j]];
        y[i] = ds->labels[idx[i]];
    }
}
