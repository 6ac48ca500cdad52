/* test_data.c - IDX loading and validation on crafted files (plain and gzip), closed-form
 * statistics, exact normalisation, and, where it is installed, the real Fashion-MNIST. */
#include "check.h"
#include "data.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"

static char tmp[64];
static char created[64][PATH_MAX];
static int n_created;

// ---- crafting files ----

typedef struct {
    uint8_t b[8192];
    size_t len;
} blob_t;

static void put32(blob_t *o, uint32_t v)
{
    o->b[o->len++] = (uint8_t)(v >> 24);
    o->b[o->len++] = (uint8_t)(v >> 16);
    o->b[o->len++] = (uint8_t)(v >> 8);
    o->b[o->len++] = (uint8_t)v;
}

/* An IDX image file: magic, then count, rows, cols (as many as `ndim` says), then data. */
static blob_t idx_images(uint32_t magic, uint32_t count, uint32_t rows, uint32_t cols,
                         const uint8_t *data, size_t data_len)
{
    blob_t o = {.len = 0};
    put32(&o, magic);
    put32(&o, count);
    put32(&o, rows);
    put32(&o, cols);
    if (data_len) memcpy(o.b + o.len, data, data_len);
    o.len += data_len;
    return o;
}

static blob_t idx_labels(uint32_t magic, uint32_t count, const uint8_t *data, size_t data_len)
{
    blob_t o = {.len = 0};
    put32(&o, magic);
    put32(&o, count);
    if (data_len) memcpy(o.b + o.len, data, data_len);
    o.len += data_len;
    return o;
}

static const char *path_of(const char *name)
{
    static char buf[4][PATH_MAX];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, PATH_MAX, "%s/%s", tmp, name);
    return p;
}

/* Write blob to tmp/name, gzip-compressed when gz is set (the name is used as given). */
static void write_file(const char *name, const blob_t *o, int gz)
{
    const char *p = path_of(name);
    if (gz) {
        gzFile g = gzopen(p, "wb");
        CHECK(g != NULL);
        if (!g) return;
        CHECK(gzwrite(g, o->b, (unsigned)o->len) == (int)o->len);
        CHECK(gzclose(g) == Z_OK);
    } else {
        FILE *f = fopen(p, "wb");
        CHECK(f != NULL);
        if (!f) return;
        CHECK(fwrite(o->b, 1, o->len, f) == o->len);
        CHECK(fclose(f) == 0);
    }
    snprintf(created[n_created++], PATH_MAX, "%s", p);
}

static long file_size(const char *name)
{
    struct stat st;
    return stat(path_of(name), &st) == 0 ? (long)st.st_size : -1;
}

/* A valid set: 3 images of 2x3 with distinct pixels, labels 0, 9, 4. */
static const uint8_t PIX[18] = {0, 1, 2, 3, 4, 5, 10, 20, 30, 40, 50, 255, 128, 127, 64, 63, 200, 100};
static const uint8_t LAB[3] = {0, 9, 4};

static blob_t good_images(void) { return idx_images(0x803, 3, 2, 3, PIX, sizeof PIX); }
static blob_t good_labels(void) { return idx_labels(0x801, 3, LAB, sizeof LAB); }

static int is_empty(const rumor_dataset_t *ds)
{
    return ds->count == 0 && ds->rows == 0 && ds->cols == 0 && !ds->pixels && !ds->labels;
}

static void check_good(const rumor_dataset_t *ds)
{
    CHECK(ds->count == 3);
    CHECK(ds->rows == 2);
    CHECK(ds->cols == 3);
    CHECK(ds->pixels && memcmp(ds->pixels, PIX, sizeof PIX) == 0);
    CHECK(ds->labels && memcmp(ds->labels, LAB, sizeof LAB) == 0);
}

/* Loading must fail with `code`, name `file` and give `reason`, leaving the output empty. */
static void expect_fail_at(int line, const char *images, const char *labels, rumor_err_t code,
                           const char *file, const char *reason)
{
    rumor_dataset_t ds;
    char err[RUMOR_ERR_LEN] = "";
    memset(&ds, 0xab, sizeof ds);
    rumor_err_t rc = rumor_data_load_pair(&ds, path_of(images), path_of(labels), err);
    CHECK_MSG(rc == code, "line %d: rc %d, expected %d (%s)", line, (int)rc, (int)code, err);
    CHECK_MSG(strstr(err, path_of(file)) != NULL, "line %d: '%s' lacks the file name %s", line, err,
              file);
    CHECK_MSG(strstr(err, reason) != NULL, "line %d: '%s' lacks '%s'", line, err, reason);
    CHECK_MSG(is_empty(&ds), "line %d: output not empty after failure", line);
    if (rc == RUMOR_OK) rumor_dataset_fini(&ds);
}
#define expect_fail(...) expect_fail_at(__LINE__, __VA_ARGS__)

// ---- tests ----

static void test_valid(void)
{
    blob_t im = good_images(), lb = good_labels();
    write_file("ok-images", &im, 0);
    write_file("ok-labels", &lb, 0);
    write_file("gz-images.gz", &im, 1);
    write_file("gz-labels.gz", &lb, 1);

    rumor_dataset_t ds;
    char err[RUMOR_ERR_LEN] = "";
    CHECK_RC(rumor_data_load_pair(&ds, path_of("ok-images"), path_of("ok-labels"), err));
    check_good(&ds);
    rumor_dataset_fini(&ds);
    CHECK(is_empty(&ds));
    rumor_dataset_fini(&ds); /* idempotent */

    /* gzip, named explicitly, and found as NAME.gz when NAME is missing */
    CHECK_RC(rumor_data_load_pair(&ds, path_of("gz-images.gz"), path_of("gz-labels.gz"), err));
    check_good(&ds);
    rumor_dataset_fini(&ds);
    CHECK_RC(rumor_data_load_pair(&ds, path_of("gz-images"), path_of("ok-labels"), err));
    check_good(&ds);
    rumor_dataset_fini(&ds);
    CHECK(file_size("gz-images.gz") > 0 && file_size("gz-images") < 0);

    /* a plain file named .gz is still read (gzread is transparent) */
    write_file("plain-named.gz", &im, 0);
    CHECK_RC(rumor_data_load_pair(&ds, path_of("plain-named.gz"), path_of("gz-labels"), err));
    check_good(&ds);
    rumor_dataset_fini(&ds);

    rumor_dataset_fini(NULL);
}

static void test_bad_headers(void)
{
    /* wrong magic: a label file where images belong, a float type, images as labels */
    blob_t o = idx_labels(0x801, 3, LAB, sizeof LAB);
    write_file("labels-as-images", &o, 0);
    expect_fail("labels-as-images", "ok-labels", RUMOR_EFORMAT, "labels-as-images",
                "bad magic 0x00000801 (expected 0x00000803, an IDX image file; this is a label file)");
    o = idx_images(0x0d03, 3, 2, 3, PIX, sizeof PIX);
    write_file("float-images", &o, 1);
    expect_fail("float-images", "ok-labels", RUMOR_EFORMAT, "float-images", "bad magic 0x00000d03");
    o = idx_images(0x1803, 3, 2, 3, PIX, sizeof PIX);
    write_file("junk-magic", &o, 0);
    expect_fail("junk-magic", "ok-labels", RUMOR_EFORMAT, "junk-magic", "bad magic 0x00001803");
    expect_fail("ok-images", "ok-images", RUMOR_EFORMAT, "ok-images",
                "bad magic 0x00000803 (expected 0x00000801, an IDX label file; this is an image file)");

    /* wrong number of dimensions: the IDX magic's low byte */
    o = idx_images(0x802, 3, 6, 1, PIX, sizeof PIX);
    o.len -= 4; /* a real 2-d file has one dimension word fewer */
    memmove(o.b + 12, o.b + 16, sizeof PIX);
    write_file("two-dims", &o, 0);
    expect_fail("two-dims", "ok-labels", RUMOR_EFORMAT, "two-dims", "bad magic 0x00000802");
    o = idx_images(0x804, 3, 2, 3, PIX, sizeof PIX);
    write_file("four-dims", &o, 0);
    expect_fail("four-dims", "ok-labels", RUMOR_EFORMAT, "four-dims", "bad magic 0x00000804");
    o = idx_images(0x803, 3, 2, 3, PIX, sizeof PIX);
    o.b[3] = 0x02; /* labels: 2 dims */
    write_file("label-2d", &o, 0);
    expect_fail("ok-images", "label-2d", RUMOR_EFORMAT, "label-2d", "bad magic 0x00000802");

    /* zero and oversized dimensions */
    o = idx_images(0x803, 0, 2, 3, NULL, 0);
    write_file("zero-count", &o, 0);
    expect_fail("zero-count", "ok-labels", RUMOR_EFORMAT, "zero-count", "bad dimensions 0x2x3: no images");
    o = idx_images(0x803, 3, 0, 3, NULL, 0);
    write_file("zero-rows", &o, 1);
    expect_fail("zero-rows", "ok-labels", RUMOR_EFORMAT, "zero-rows", "bad dimensions 3x0x3");
    o = idx_images(0x803, 3, 2, 0, NULL, 0);
    write_file("zero-cols", &o, 0);
    expect_fail("zero-cols", "ok-labels", RUMOR_EFORMAT, "zero-cols", "bad dimensions 3x2x0");
    o = idx_images(0x803, 1, 4097, 1, PIX, 18);
    write_file("tall", &o, 0);
    expect_fail("tall", "ok-labels", RUMOR_EFORMAT, "tall", "image sides must be 1..4096");
    o = idx_labels(0x801, 0, NULL, 0);
    write_file("zero-labels", &o, 0);
    expect_fail("ok-images", "zero-labels", RUMOR_EFORMAT, "zero-labels", "bad dimensions 0: no labels");

    /* 200 * 4096 * 4096 bytes = 3.1 GiB: refused from the header, before any allocation */
    o = idx_images(0x803, 200, 4096, 4096, PIX, sizeof PIX);
    write_file("huge", &o, 0);
    expect_fail("huge", "ok-labels", RUMOR_EFORMAT, "huge", "too large: 200x4096x4096 is 3355443200 bytes");
}

static void test_lengths(void)
{
    blob_t o = idx_images(0x803, 3, 2, 3, PIX, sizeof PIX - 1);
    write_file("short-images", &o, 0);
    expect_fail("short-images", "ok-labels", RUMOR_EFORMAT, "short-images",
                "truncated: expected 34 bytes (16 header + 18 data), got 33");
    write_file("short-images-gz.gz", &o, 1);
    expect_fail("short-images-gz", "ok-labels", RUMOR_EFORMAT, "short-images-gz.gz",
                "truncated: expected 34");
    o = idx_labels(0x801, 3, LAB, 1);
    write_file("short-labels", &o, 0);
    expect_fail("ok-images", "short-labels", RUMOR_EFORMAT, "short-labels",
                "truncated: expected 11 bytes (8 header + 3 data), got 9");

    /* cut inside the header */
    o = good_images();
    o.len = 10;
    write_file("short-header", &o, 0);
    expect_fail("short-header", "ok-labels", RUMOR_EFORMAT, "short-header", "truncated: 10 bytes");
    o.len = 3;
    write_file("short-magic", &o, 0);
    expect_fail("short-magic", "ok-labels", RUMOR_EFORMAT, "short-magic", "truncated: 3 bytes");
    o.len = 0;
    write_file("empty", &o, 0);
    expect_fail("empty", "ok-labels", RUMOR_EFORMAT, "empty", "truncated: 0 bytes");

    /* trailing bytes */
    o = good_images();
    o.b[o.len++] = 0;
    write_file("long-images", &o, 0);
    expect_fail("long-images", "ok-labels", RUMOR_EFORMAT, "long-images", "trailing bytes");
    write_file("long-images-gz.gz", &o, 1);
    expect_fail("long-images-gz", "ok-labels", RUMOR_EFORMAT, "long-images-gz.gz", "trailing bytes");
    o = good_labels();
    o.b[o.len++] = 1;
    write_file("long-labels", &o, 0);
    expect_fail("ok-images", "long-labels", RUMOR_EFORMAT, "long-labels", "trailing bytes");

    /* a gzip file cut anywhere, even in its 8-byte CRC/length trailer after all the data
     * has decoded, is truncated, never accepted */
    o = good_images();
    write_file("cut.gz", &o, 1);
    long full = file_size("cut.gz");
    CHECK(full > 20);
    for (long keep = full - 1; keep >= 2; keep -= (keep > full - 12 ? 1 : 5)) {
        CHECK(truncate(path_of("cut.gz"), keep) == 0);
        rumor_dataset_t ds;
        char err[RUMOR_ERR_LEN] = "";
        rumor_err_t rc = rumor_data_load_pair(&ds, path_of("cut.gz"), path_of("ok-labels"), err);
        CHECK_MSG(rc == RUMOR_EFORMAT && strstr(err, "truncated") && strstr(err, "cut.gz"),
                  "kept %ld of %ld: rc %d '%s'", keep, full, (int)rc, err);
        CHECK(is_empty(&ds));
        if (rc == RUMOR_OK) rumor_dataset_fini(&ds);
    }

    /* corrupt gzip data: a flipped byte in the CRC is caught by zlib */
    write_file("crc.gz", &o, 1);
    {
        FILE *f = fopen(path_of("crc.gz"), "r+b");
        CHECK(f != NULL);
        if (f) {
            CHECK(fseek(f, -8, SEEK_END) == 0);
            int c = fgetc(f);
            CHECK(fseek(f, -8, SEEK_END) == 0);
            fputc(c ^ 0xff, f);
            fclose(f);
        }
        expect_fail("crc.gz", "ok-labels", RUMOR_EFORMAT, "crc.gz", "corrupt gzip data");
    }
}

static void test_labels_and_files(void)
{
    /* count disagreement, both ways */
    blob_t o = idx_labels(0x801, 2, LAB, 2);
    write_file("two-labels", &o, 0);
    expect_fail("ok-images", "two-labels", RUMOR_EFORMAT, "two-labels", "2 labels but 3 images");
    o = idx_images(0x803, 2, 3, 3, PIX, sizeof PIX);
    write_file("two-images", &o, 0);
    expect_fail("two-images", "ok-labels", RUMOR_EFORMAT, "ok-labels", "3 labels but 2 images");

    /* label range: 9 is fine (above), 10 and 255 are not */
    const uint8_t bad[3] = {0, 1, 10};
    o = idx_labels(0x801, 3, bad, 3);
    write_file("label-10", &o, 0);
    expect_fail("ok-images", "label-10", RUMOR_EFORMAT, "label-10",
                "label 10 at index 2 out of range 0..9");
    const uint8_t bad2[3] = {255, 1, 2};
    o = idx_labels(0x801, 3, bad2, 3);
    write_file("label-255.gz", &o, 1);
    expect_fail("ok-images", "label-255", RUMOR_EFORMAT, "label-255.gz",
                "label 255 at index 0 out of range 0..9");

    /* missing files, and a directory where a file belongs */
    expect_fail("nothing-here", "ok-labels", RUMOR_EIO, "nothing-here", "no such file (nor .gz)");
    expect_fail("ok-images", "nothing-here", RUMOR_EIO, "nothing-here", "no such file (nor .gz)");
    expect_fail("nothing-here.gz", "ok-labels", RUMOR_EIO, "nothing-here.gz", "no such file");
    CHECK(mkdir(path_of("a-dir"), 0700) == 0);
    expect_fail("a-dir", "ok-labels", RUMOR_EIO, "a-dir", "Is a directory");
    CHECK(rmdir(path_of("a-dir")) == 0);

    /* err may be NULL */
    rumor_dataset_t ds;
    CHECK(rumor_data_load_pair(&ds, path_of("nothing-here"), path_of("ok-labels"), NULL) == RUMOR_EIO);
    CHECK(is_empty(&ds));
}

static void test_dir(void)
{
    /* tmp/set: a mix of plain and gzip; tmp/odd: test images of another size */
    char set[PATH_MAX], odd[PATH_MAX];
    snprintf(set, sizeof set, "%s", path_of("set"));
    snprintf(odd, sizeof odd, "%s", path_of("odd"));
    CHECK(mkdir(set, 0700) == 0);
    CHECK(mkdir(odd, 0700) == 0);
    blob_t im = good_images(), lb = good_labels();
    const uint8_t tpix[6] = {9, 8, 7, 6, 5, 4};
    const uint8_t tlab[1] = {7};
    blob_t tim = idx_images(0x803, 1, 2, 3, tpix, 6), tlb = idx_labels(0x801, 1, tlab, 1);
    blob_t oim = idx_images(0x803, 1, 3, 2, tpix, 6);
    write_file("set/train-images-idx3-ubyte.gz", &im, 1);
    write_file("set/train-labels-idx1-ubyte", &lb, 0);
    write_file("set/t10k-images-idx3-ubyte", &tim, 0);
    write_file("set/t10k-labels-idx1-ubyte.gz", &tlb, 1);
    write_file("odd/train-images-idx3-ubyte", &im, 0);
    write_file("odd/train-labels-idx1-ubyte", &lb, 0);
    write_file("odd/t10k-images-idx3-ubyte", &oim, 0);
    write_file("odd/t10k-labels-idx1-ubyte", &tlb, 0);

    rumor_dataset_t train, test;
    char err[RUMOR_ERR_LEN] = "";
    CHECK_RC(rumor_data_load_dir(&train, &test, set, err));
    check_good(&train);
    CHECK(test.count == 1 && test.rows == 2 && test.cols == 3);
    CHECK(test.pixels && memcmp(test.pixels, tpix, 6) == 0 && test.labels && test.labels[0] == 7);
    rumor_dataset_fini(&train);
    rumor_dataset_fini(&test);

    CHECK_RC(rumor_data_load_dir(NULL, &test, set, err));
    CHECK(test.count == 1);
    rumor_dataset_fini(&test);
    CHECK_RC(rumor_data_load_dir(&train, NULL, set, err));
    check_good(&train);
    rumor_dataset_fini(&train);

    /* each split alone is fine; together their sizes disagree */
    CHECK_RC(rumor_data_load_dir(NULL, &test, odd, err));
    CHECK(test.rows == 3 && test.cols == 2);
    rumor_dataset_fini(&test);
    CHECK(rumor_data_load_dir(&train, &test, odd, err) == RUMOR_EFORMAT);
    CHECK_MSG(strstr(err, odd) && strstr(err, "training images are 2x3 but test images are 3x2"), "%s",
              err);
    CHECK(is_empty(&train) && is_empty(&test));

    /* a folder without the files names the first one it looked for */
    CHECK(rumor_data_load_dir(&train, &test, tmp, err) == RUMOR_EIO);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "%s/train-images-idx3-ubyte: no such file (nor .gz)", tmp);
    CHECK_MSG(strcmp(err, want) == 0, "'%s'", err);
    CHECK(is_empty(&train) && is_empty(&test));
    /* a file where the folder belongs: read as safetensors whatever its name, saying so */
    CHECK(rumor_data_load_dir(&train, &test, path_of("ok-images"), err) == RUMOR_EFORMAT);
    CHECK_MSG(strstr(err, "ok-images: a file, so not a folder of IDX files; read as a safetensors file of train.x, "
                          "train.y, test.x and test.y: header length") != NULL,
              "%s", err);
    CHECK(is_empty(&train) && is_empty(&test));
    /* a failure in the second split releases the first (ASan would report the leak) */
    CHECK(mkdir(path_of("half"), 0700) == 0);
    write_file("half/train-images-idx3-ubyte", &im, 0);
    write_file("half/train-labels-idx1-ubyte", &lb, 0);
    CHECK(rumor_data_load_dir(&train, &test, path_of("half"), err) == RUMOR_EIO);
    CHECK_MSG(strstr(err, "t10k-images-idx3-ubyte: no such file (nor .gz)") != NULL, "%s", err);
    CHECK(is_empty(&train) && is_empty(&test));

    CHECK(rmdir(set) != 0); /* not empty yet: removed by cleanup after its files */
}

static void test_stats_and_gather(void)
{
    /* values 0, .2, .4, .6, .8, 1: mean 1/2, population variance 7/60 */
    uint8_t px[12] = {0, 51, 102, 153, 204, 255, 255, 204, 153, 102, 51, 0};
    uint8_t lb[2] = {3, 8};
    rumor_dataset_t ds = {.count = 2, .channels = 1, .rows = 2, .cols = 3, .classes = 10, .pixels = px, .labels = lb};
    float mean = -1, std = -1;
    rumor_data_stats(&ds, &mean, &std);
    CHECK_NEAR(mean, 0.5, 1e-7);
    CHECK_NEAR(std, sqrt(7.0 / 60.0), 1e-7);

    /* two pixels, 0 and 255: mean 1/2, std 1/2 */
    uint8_t two[2] = {0, 255};
    rumor_dataset_t ds2 = {.count = 2, .channels = 1, .rows = 1, .cols = 1, .classes = 10, .pixels = two, .labels = lb};
    rumor_data_stats(&ds2, &mean, &std);
    CHECK(mean == 0.5f && std == 0.5f);

    /* constant pixels: std 0 is reported as 1 so normalising never divides by zero */
    uint8_t flat[4] = {17, 17, 17, 17};
    rumor_dataset_t ds3 = {.count = 4, .channels = 1, .rows = 1, .cols = 1, .classes = 10, .pixels = flat, .labels = flat};
    rumor_data_stats(&ds3, &mean, &std);
    CHECK_NEAR(mean, 17.0 / 255.0, 1e-8);
    CHECK(std == 1.0f);

    /* gather: x = (p/255 - mean)/std, in the order of idx, with repeats */
    const size_t idx[3] = {1, 0, 1};
    float x[18];
    int32_t y[3] = {99, 99, 99};
    const float m = 0.25f, s = 0.5f;
    rumor_data_gather(&ds, idx, 3, m, s, x, y);
    CHECK(y[0] == 8 && y[1] == 3 && y[2] == 8);
    int exact = 1;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 6; j++) {
            double want = ((double)px[idx[i] * 6 + (size_t)j] / 255.0 - m) / s;
            if (fabs(x[i * 6 + j] - want) > 1e-6) exact = 0;
        }
    CHECK(exact);
    CHECK(x[0] == x[12]);
    CHECK(x[6] == -0.5f);  /* pixel 0: (0 - .25) / .5 */
    CHECK(x[17] == -0.5f); /* pixel 0 */
    CHECK(x[5] == -0.5f);  /* pixel 0 of sample 1 */
    CHECK(x[11] == 1.5f);  /* pixel 255 of sample 0: (1 - .25) / .5 */
    CHECK_NEAR(x[3], 0.3, 1e-6); /* pixel 102 = 0.4 of sample 1: (.4 - .25) / .5 */
    rumor_data_gather(&ds, NULL, 0, m, s, NULL, NULL); /* an empty batch touches nothing */
}

static void test_fashion_mnist(void)
{
    struct stat st;
    if (stat(FASHION_DIR, &st) != 0) {
        check_skip("no dataset at %s: the real Fashion-MNIST not checked", FASHION_DIR);
        return;
    }
    rumor_dataset_t train, test;
    char err[RUMOR_ERR_LEN] = "";
    rumor_err_t rc = rumor_data_load_dir(&train, &test, FASHION_DIR, err);
    CHECK_MSG(rc == RUMOR_OK, "%s", err);
    if (rc != RUMOR_OK) return;
    CHECK(train.count == 60000 && test.count == 10000);
    CHECK(train.rows == 28 && train.cols == 28 && test.rows == 28 && test.cols == 28);
    size_t per[2][RUMOR_DATA_CLASSES] = {{0}};
    for (size_t i = 0; i < train.count; i++) per[0][train.labels[i]]++;
    for (size_t i = 0; i < test.count; i++) per[1][test.labels[i]]++;
    for (int c = 0; c < RUMOR_DATA_CLASSES; c++) {
        CHECK_MSG(per[0][c] == 6000, "class %d: %zu training samples", c, per[0][c]);
        CHECK_MSG(per[1][c] == 1000, "class %d: %zu test samples", c, per[1][c]);
    }
    float mean, std;
    rumor_data_stats(&train, &mean, &std);
    CHECK_NEAR(mean, 0.2860, 0.001);
    CHECK_NEAR(std, 0.3530, 0.001);

    /* a gathered batch has the normalised statistics: over the whole set, mean 0 and std 1 */
    size_t idx[256];
    float x[256 * 784];
    int32_t y[256];
    double sum = 0, sq = 0;
    for (size_t i = 0; i < 256; i++) idx[i] = i * 234;
    rumor_data_gather(&train, idx, 256, mean, std, x, y);
    for (size_t i = 0; i < 256 * 784; i++) sum += x[i], sq += (double)x[i] * x[i];
    CHECK_NEAR(sum / (256 * 784), 0.0, 0.05);
    CHECK_NEAR(sqrt(sq / (256 * 784)), 1.0, 0.05);
    int labels_ok = 1;
    for (size_t i = 0; i < 256; i++) labels_ok &= y[i] == train.labels[idx[i]];
    CHECK(labels_ok);
    rumor_dataset_fini(&train);
    rumor_dataset_fini(&test);
}

int main(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/rumor-test-data-XXXXXX");
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    test_valid();
    test_bad_headers();
    test_lengths();
    test_labels_and_files();
    test_dir();
    test_stats_and_gather();
    test_fashion_mnist();

    for (int i = n_created - 1; i >= 0; i--) unlink(created[i]);
    rmdir(path_of("set"));
    rmdir(path_of("odd"));
    rmdir(path_of("half"));
    CHECK(rmdir(tmp) == 0);
    return check_done();
}
