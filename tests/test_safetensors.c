/* test_safetensors.c - round trips, exact bytes, corrupted files, atomic writes. */
#include "check.h"
#include "safetensors.h"

#include <cjson/cJSON.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static void path_in(char *out, size_t out_len, const char *name)
{
    snprintf(out, out_len, "%s/%s", dir, name);
}

static int write_raw(const char *path, const void *p, size_t n)
{
    FILE *fp = fopen(path, "wb");
    if (!fp) return -1;
    size_t w = fwrite(p, 1, n, fp);
    return (fclose(fp) == 0 && w == n) ? 0 : -1;
}

/* Reads a whole file into a malloc'd buffer; NULL on failure. */
static uint8_t *read_raw(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && fread(buf, 1, (size_t)n, fp) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(fp);
    *len = (size_t)n;
    return buf;
}

/* A file whose 8-byte length field says hlen, followed by the header text and data_len
 * bytes of zeros. */
static void write_st_len(const char *path, uint64_t hlen, const char *header, size_t data_len)
{
    size_t n = strlen(header);
    uint8_t *buf = calloc(8 + n + data_len + 1, 1);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(hlen >> (8 * i));
    memcpy(buf + 8, header, n);
    CHECK(write_raw(path, buf, 8 + n + data_len) == 0);
    free(buf);
}

static void write_st(const char *path, const char *header, size_t data_len)
{
    write_st_len(path, strlen(header), header, data_len);
}

static size_t count_tmp_files(void)
{
    size_t n = 0;
    DIR *d = opendir(dir);
    if (!d) return (size_t)-1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

/* Expects rumor_st_open to refuse path with an error "<path>: ..." containing want. */
static void expect_reject(const char *path, const char *want, const char *what)
{
    char err[RUMOR_ERR_LEN] = "";
    rumor_st_file_t *f = rumor_st_open(path, err);
    CHECK_MSG(f == NULL, "%s: accepted", what);
    rumor_st_destroy(&f);
    size_t plen = strlen(path);
    CHECK_MSG(strncmp(err, path, plen) == 0 && strncmp(err + plen, ": ", 2) == 0,
              "%s: error does not start with the path: %s", what, err);
    CHECK_MSG(strstr(err, want) != NULL, "%s: want '%s', got '%s'", what, want, err);
}

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* ---- round trip ---- */

static void test_roundtrip(void)
{
    static const uint32_t special[] = {
        0x80000000u, /* -0.0 */
        0x00000001u, 0x007fffffu, 0x807fffffu, /* denormals */
        0x7f800000u, 0xff800000u,              /* +-inf */
        0x7fc00000u, 0x7fc12345u, 0xffbadbadu, /* quiet NaNs with payloads */
        0x7f800001u, 0x7fbfffffu,              /* signalling NaNs: must not be quieted */
        0x3f800000u, 0x00000000u,
    };
    enum { N_W = 7 * 5, N_B = 5, N_C = 2 * 3 * 2 * 2, N_S = 1 };
    float w[N_W], b[N_B], c[N_C], s[N_S];
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    float *all[] = {w, b, c, s};
    size_t lens[] = {N_W, N_B, N_C, N_S};
    for (size_t k = 0; k < 4; k++) {
        for (size_t i = 0; i < lens[k]; i++) {
            uint32_t bits = (uint32_t)xorshift(&seed);
            memcpy(&all[k][i], &bits, 4);
        }
    }
    memcpy(w, special, sizeof special); /* 13 specials at the start of the first tensor */
    memcpy(b, &special[9], 4 * sizeof(uint32_t));

    const char *odd_name = "blk.0/w \"q\"\n\t\\ \xc3\xbc\xe2\x82\xac\xf0\x9f\x98\x80";
    rumor_st_out_t out[] = {
        {.name = "fc1.weight", .ndim = 2, .shape = {7, 5}, .data = w},
        {.name = "fc1.bias", .ndim = 1, .shape = {5}, .data = b},
        {.name = "scalar", .ndim = 0, .data = s},
        {.name = "empty", .ndim = 3, .shape = {3, 0, 2}, .data = NULL},
        {.name = odd_name, .ndim = 4, .shape = {2, 3, 2, 2}, .data = c},
    };
    rumor_st_meta_t meta[] = {
        {"format", "pt"},
        {"rumor.layout", "0123456789abcdef"},
        {"quote\"back\\slash", "line\nbreak \xe2\x82\xac"},
        {"empty", ""},
    };
    char path[512], err[RUMOR_ERR_LEN] = "";
    path_in(path, sizeof path, "rt.safetensors");
    CHECK_RC(rumor_st_write(path, out, RUMOR_ARRAY_LEN(out), meta, RUMOR_ARRAY_LEN(meta), err));

    rumor_st_file_t *f = rumor_st_open(path, err);
    CHECK_MSG(f != NULL, "%s", err);
    if (!f) return;
    CHECK(rumor_st_count(f) == RUMOR_ARRAY_LEN(out));
    uint64_t at = 0;
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(out) && i < rumor_st_count(f); i++) {
        const rumor_st_tensor_t *t = rumor_st_at(f, i);
        CHECK_MSG(strcmp(t->name, out[i].name) == 0, "tensor %zu is '%s'", i, t->name);
        CHECK(strcmp(t->dtype, "F32") == 0);
        CHECK(t->ndim == out[i].ndim);
        uint64_t elems = 1;
        for (int d = 0; d < t->ndim; d++) {
            CHECK(t->shape[d] == out[i].shape[d]);
            elems *= out[i].shape[d];
        }
        CHECK(t->begin == at); /* contiguous, in the given order */
        CHECK(t->end - t->begin == elems * 4);
        at = t->end;
        if (elems) CHECK_MSG(memcmp(t->data, out[i].data, elems * 4) == 0, "tensor %zu bits", i);
        CHECK(rumor_st_find(f, out[i].name) == t);
    }
    CHECK(rumor_st_find(f, "fc2.weight") == NULL);
    CHECK(rumor_st_find(f, "") == NULL);
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(meta); i++) {
        const char *v = rumor_st_meta(f, meta[i].key);
        CHECK_MSG(v && strcmp(v, meta[i].value) == 0, "meta '%s'", meta[i].key);
    }
    CHECK(rumor_st_meta(f, "absent") == NULL);
    rumor_st_destroy(&f);
    CHECK(f == NULL);
    rumor_st_destroy(&f); /* NULL is fine */

    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600); /* a model of private data: owner only */
    CHECK(count_tmp_files() == 0);

    /* Overwriting replaces the file; the old one was the only other candidate. */
    float one = 1.0f;
    rumor_st_out_t small = {.name = "x", .ndim = 1, .shape = {1}, .data = &one};
    CHECK_RC(rumor_st_write(path, &small, 1, NULL, 0, err));
    f = rumor_st_open(path, err);
    CHECK_MSG(f && rumor_st_count(f) == 1 && rumor_st_find(f, "x") && !rumor_st_meta(f, "format"),
              "%s", err);
    rumor_st_destroy(&f);
    CHECK(count_tmp_files() == 0);

    /* No tensors at all is a valid file: "{}" padded. */
    path_in(path, sizeof path, "none.safetensors");
    CHECK_RC(rumor_st_write(path, NULL, 0, NULL, 0, err));
    f = rumor_st_open(path, err);
    CHECK_MSG(f && rumor_st_count(f) == 0, "%s", err);
    rumor_st_destroy(&f);
}

/* ---- exact bytes ---- */

static void check_bytes(const char *name, const rumor_st_out_t *t, size_t n,
                        const rumor_st_meta_t *meta, size_t n_meta, const char *json,
                        const uint8_t *data, size_t data_len)
{
    char path[512], err[RUMOR_ERR_LEN] = "";
    path_in(path, sizeof path, name);
    CHECK_RC(rumor_st_write(path, t, n, meta, n_meta, err));
    size_t len = 0;
    uint8_t *buf = read_raw(path, &len);
    CHECK(buf != NULL);
    if (!buf) return;

    size_t jlen = strlen(json), hlen = (jlen + 7) / 8 * 8;
    uint64_t field = 0;
    for (int i = 7; i >= 0 && len >= 8; i--) field = (field << 8) | buf[i];
    CHECK_MSG(field == hlen, "%s: header length %llu, want %zu", name, (unsigned long long)field,
              hlen);
    CHECK((8 + field) % 8 == 0);
    CHECK_MSG(len == 8 + hlen + data_len, "%s: %zu bytes", name, len);
    if (len == 8 + hlen + data_len) {
        CHECK_MSG(memcmp(buf + 8, json, jlen) == 0, "%s: header %.*s", name, (int)hlen, buf + 8);
        for (size_t i = jlen; i < hlen; i++) CHECK(buf[8 + i] == ' ');
        CHECK(data_len == 0 || memcmp(buf + 8 + hlen, data, data_len) == 0);
        cJSON *root = cJSON_ParseWithLength((const char *)buf + 8, hlen);
        CHECK(cJSON_IsObject(root));
        cJSON_Delete(root);
    }
    free(buf);
}

static void test_known_bytes(void)
{
    float v[2] = {1.0f, -2.0f};
    static const uint8_t v_bytes[] = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0};
    rumor_st_out_t a = {.name = "a", .ndim = 1, .shape = {2}, .data = v};
    check_bytes("a.safetensors", &a, 1, NULL, 0,
                "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", v_bytes, 8);

    rumor_st_meta_t m = {"format", "pt"};
    rumor_st_out_t two[] = {
        {.name = "w", .ndim = 2, .shape = {1, 2}, .data = v},
        {.name = "s", .ndim = 0, .data = &v[1]},
    };
    static const uint8_t two_bytes[] = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0,
                                        0x00, 0x00, 0x00, 0xc0};
    check_bytes("two.safetensors", two, 2, &m, 1,
                "{\"__metadata__\":{\"format\":\"pt\"},"
                "\"w\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8]},"
                "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[8,12]}}",
                two_bytes, sizeof two_bytes);
    check_bytes("empty.safetensors", NULL, 0, NULL, 0, "{}", NULL, 0);
}

/* ---- reading files from elsewhere ---- */

static void test_accepts(void)
{
    char path[512], err[RUMOR_ERR_LEN] = "";
    path_in(path, sizeof path, "other.safetensors");
    /* Another dtype, key order not by offset, extra fields, whitespace and padding. */
    write_st(
        path,
        "  {\"b\": {\"shape\": [2], \"dtype\": \"F16\", \"data_offsets\": [8, 12], \"x\": null},\n"
        "   \"a\": {\"dtype\": \"I64\", \"shape\": [1], \"data_offsets\": [0, 8],"
        " \"note\": [1.5, -2e-3, \"\\\"\\\\\\u0041\"]}}\n   ",
        12);
    rumor_st_file_t *f = rumor_st_open(path, err);
    CHECK_MSG(f != NULL, "%s", err);
    if (f) {
        CHECK(rumor_st_count(f) == 2);
        CHECK(strcmp(rumor_st_at(f, 0)->name, "b") == 0);
        CHECK(strcmp(rumor_st_at(f, 0)->dtype, "F16") == 0);
        CHECK(rumor_st_find(f, "a") && rumor_st_find(f, "a")->begin == 0);
        CHECK(rumor_st_meta(f, "format") == NULL);
    }
    rumor_st_destroy(&f);

    write_st(path, "{}", 0);
    f = rumor_st_open(path, err);
    CHECK_MSG(f && rumor_st_count(f) == 0, "%s", err);
    rumor_st_destroy(&f);

    /* Unicode escapes decode to the same name the writer's raw UTF-8 gives. */
    write_st(path,
             "{\"\\u00fc\\ud83d\\ude00\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}",
             1);
    f = rumor_st_open(path, err);
    CHECK_MSG(f && rumor_st_find(f, "\xc3\xbc\xf0\x9f\x98\x80"), "%s", err);
    rumor_st_destroy(&f);
}

/* ---- corrupted files ---- */

#define T_(name, dtype, shape, b, e)                                                          \
    "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

static void test_rejects(void)
{
    static const struct {
        const char *what, *header;
        size_t data_len;
        const char *want;
    } cases[] = {
        {"not json", "{\"a\": ", 0, "not valid JSON"},
        {"json array", "[1, 2]", 0, "JSON array, not an object"},
        {"json scalar", "\"x\"", 0, "JSON scalar"},
        {"trailing garbage", "{} x", 0, "bytes after the JSON value"},
        {"past data", "{" T_("a", "F32", "[2]", 0, 8) "}", 4,
         "tensor 'a': data_offsets [0, 8] run past"},
        {"overlap", "{" T_("a", "F32", "[2]", 0, 8) "," T_("b", "F32", "[2]", 4, 12) "}", 12,
         "tensor 'b' [4, 12] overlaps tensor 'a' [0, 8]"},
        {"empty inside", "{" T_("a", "F32", "[2]", 0, 8) "," T_("z", "F32", "[0]", 4, 4) "}", 8,
         "tensor 'z' [4, 4] overlaps"},
        {"gap", "{" T_("a", "F32", "[2]", 0, 8) "," T_("b", "F32", "[2]", 12, 20) "}", 20,
         "gap of 4 bytes in the data area before tensor 'b'"},
        {"gap at start", "{" T_("a", "F32", "[2]", 4, 12) "}", 12, "gap of 4 bytes"},
        {"uncovered tail", "{" T_("a", "F32", "[2]", 0, 8) "}", 12,
         "4 bytes at the end of the data area"},
        {"no tensors but data", "{}", 4, "4 bytes at the end"},
        {"size mismatch", "{" T_("fc1.weight", "F32", "[10, 11]", 0, 400) "}", 400,
         "tensor 'fc1.weight': data_offsets [0, 400] disagree with F32 shape [10, 11] (440 bytes)"},
        {"dtype size mismatch", "{" T_("h", "F16", "[4]", 0, 16) "}", 16,
         "disagree with F16 shape [4] (8 bytes)"},
        {"negative dim", "{" T_("a", "F32", "[-1]", 0, 4) "}", 4,
         "shape dim 0 is not a non-negative integer"},
        {"float dim", "{" T_("a", "F32", "[2, 1.5]", 0, 12) "}", 12,
         "shape dim 1 is not a non-negative"},
        {"string dim", "{" T_("a", "F32", "[\"2\"]", 0, 8) "}", 8, "shape dim 0"},
        {"huge dim", "{" T_("a", "F32", "[1e300]", 0, 8) "}", 8, "shape dim 0"},
        {"too many dims", "{" T_("a", "F32", "[1,1,1,1,1,1,1,1,1]", 0, 4) "}", 4,
         "shape has 9 dims, over the limit of 8"},
        {"shape not array", "{" T_("a", "F32", "4", 0, 4) "}", 4, "shape missing or not an array"},
        {"shape overflow", "{" T_("a", "F32", "[4294967296, 4294967296]", 0, 0) "}", 0,
         "overflows"},
        {"unknown dtype", "{" T_("a", "F31", "[1]", 0, 4) "}", 4,
         "tensor 'a': unknown dtype 'F31'"},
        {"dtype lowercase", "{" T_("a", "f32", "[1]", 0, 4) "}", 4, "unknown dtype 'f32'"},
        {"dtype number", "{\"a\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
         "dtype missing or not a string"},
        {"missing shape", "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "shape missing"},
        {"missing offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4,
         "data_offsets must be two"},
        {"three offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8,
         "data_offsets must be two"},
        {"negative offset", "{" T_("a", "F32", "[1]", -4, 0) "}", 4,
         "data_offsets must be two non-negative"},
        {"float offset", "{" T_("a", "F32", "[1]", 0, 4.5) "}", 4, "data_offsets must be two"},
        {"begin after end", "{" T_("a", "F32", "[1]", 8, 4) "}", 8,
         "data_offsets [8, 4] begin after end"},
        {"entry not object", "{\"a\":[1]}", 0, "tensor 'a': entry is not an object"},
        {"repeated field",
         "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
         "field 'dtype' appears twice"},
        {"duplicate names", "{" T_("a", "F32", "[1]", 0, 4) "," T_("a", "F32", "[1]", 4, 8) "}", 8,
         "duplicate tensor name 'a'"},
        {"meta not object", "{\"__metadata__\":\"x\"}", 0, "__metadata__ is not an object"},
        {"meta non-string", "{\"__metadata__\":{\"k\":1}}", 0, "__metadata__ 'k' is not a string"},
        {"meta null", "{\"__metadata__\":{\"k\":null}}", 0, "is not a string"},
        {"meta duplicate key", "{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", 0,
         "duplicate __metadata__ key 'k'"},
        {"meta twice", "{\"__metadata__\":{},\"__metadata__\":{}}", 0,
         "__metadata__ appears twice"},
        {"invalid utf-8", "{" T_("a\xff", "F32", "[1]", 0, 4) "}", 4,
         "not valid UTF-8 JSON text (byte 3)"},
        {"overlong utf-8", "{" T_("\xc0\xae", "F32", "[1]", 0, 4) "}", 4, "not valid UTF-8"},
        {"surrogate utf-8", "{" T_("\xed\xa0\x80", "F32", "[1]", 0, 4) "}", 4, "not valid UTF-8"},
        {"raw control byte", "{" T_("a\x01", "F32", "[1]", 0, 4) "}", 4,
         "not valid UTF-8 JSON text"},
        {"byte-order mark", "\xef\xbb\xbf{}", 0, "byte-order mark"},
        {"bad hex escape", "{\"__metadata__\":{\"k\\u00zz\":\"v\"}}", 0, "malformed string"},
        {"NUL escape", "{\"__metadata__\":{\"k\\u0000x\":\"v\"}}", 0, "malformed string"},
        {"unknown escape", "{\"__metadata__\":{\"k\\x\":\"v\"}}", 0, "malformed string"},
        {"lone surrogate", "{\"__metadata__\":{\"k\\ud800\":\"v\"}}", 0, "not valid JSON"},
        {"dim 2.0", "{" T_("a", "F32", "[2.0]", 0, 8) "}", 8,
         "shape dim 0 is not a non-negative integer"},
        {"dim 2e0", "{" T_("a", "F32", "[2e0]", 0, 8) "}", 8, "shape dim 0 is not"},
        {"offset 8.0", "{" T_("a", "F32", "[2]", 0, 8.0) "}", 8, "data_offsets must be two"},
        {"raw tab in string", "{\"__metadata__\":{\"k\":\"a\tb\"}}", 0,
         "malformed string (byte 23)"},
        {"leading zero", "{" T_("a", "F32", "[02]", 0, 8) "}", 8, "malformed number"},
        {"bare dot", "{" T_("a", "F32", "[2.]", 0, 8) "}", 8, "malformed number"},
        {"bare minus", "{" T_("a", "F32", "[-]", 0, 8) "}", 8, "malformed number"},
    };
    char path[512];
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(cases); i++) {
        snprintf(path, sizeof path, "%s/bad%02zu.safetensors", dir, i);
        write_st(path, cases[i].header, cases[i].data_len);
        expect_reject(path, cases[i].want, cases[i].what);
    }

    /* Names, keys and values one byte over their limits. */
    char header[1024], name[RUMOR_ST_NAME_LEN + 1], key[65], value[257];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    memset(value, 'v', sizeof value - 1);
    value[sizeof value - 1] = '\0';
    path_in(path, sizeof path, "long.safetensors");
    snprintf(header, sizeof header,
             "{\"%s\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", name);
    write_st(path, header, 4);
    expect_reject(path, "is 128 bytes, over the limit of 127", "long name");
    name[sizeof name - 2] = '\0'; /* 127 bytes is fine */
    snprintf(header, sizeof header,
             "{\"%s\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", name);
    write_st(path, header, 4);
    rumor_st_file_t *f = rumor_st_open(path, NULL);
    CHECK(f && rumor_st_find(f, name));
    rumor_st_destroy(&f);
    snprintf(header, sizeof header, "{\"__metadata__\":{\"%s\":\"v\"}}", key);
    write_st(path, header, 0);
    expect_reject(path, "is 64 bytes, over the limit of 63", "long metadata key");
    snprintf(header, sizeof header, "{\"__metadata__\":{\"k\":\"%s\"}}", value);
    write_st(path, header, 0);
    expect_reject(path, "'k' value is 256 bytes, over the limit of 255", "long metadata value");
    key[sizeof key - 2] = '\0';
    value[sizeof value - 2] = '\0';
    snprintf(header, sizeof header, "{\"__metadata__\":{\"%s\":\"%s\"}}", key, value);
    write_st(path, header, 0);
    f = rumor_st_open(path, NULL);
    CHECK(f && rumor_st_meta(f, key) && strcmp(rumor_st_meta(f, key), value) == 0);
    rumor_st_destroy(&f);

    /* Raw NUL bytes: strlen-based write_st cannot make these. */
    path_in(path, sizeof path, "nul.safetensors");
    static const uint8_t nul[] = {6, 0, 0, 0, 0, 0, 0, 0, '{', '"', 0, '"', ':', '}'};
    CHECK(write_raw(path, nul, sizeof nul) == 0);
    expect_reject(path, "not valid UTF-8", "raw NUL");

    /* The length field itself. */
    path_in(path, sizeof path, "len.safetensors");
    CHECK(write_raw(path, "", 0) == 0);
    expect_reject(path, "truncated: 0 bytes, too short", "empty file");
    CHECK(write_raw(path, "\x02\0\0\0", 4) == 0);
    expect_reject(path, "truncated: 4 bytes", "4-byte file");
    write_st_len(path, 0, "", 0);
    expect_reject(path, "header length 0 is too short", "length 0");
    write_st_len(path, 1, "{", 0);
    expect_reject(path, "header length 1 is too short", "length 1");
    write_st_len(path, (uint64_t)RUMOR_ST_MAX_HEADER + 1, "{}", 0);
    expect_reject(path, "header length 16777217 is over the limit", "length over max");
    write_st_len(path, UINT64_MAX, "{}", 0);
    expect_reject(path, "is over the limit", "length 2^64-1");
    write_st_len(path, 1234, "{\"a\":1}       ", 86);
    expect_reject(path, "truncated: header says 1234 bytes but file has 100", "length past end");

    /* A valid file cut short anywhere is refused. */
    float v[6] = {1, 2, 3, 4, 5, 6};
    rumor_st_out_t out[] = {
        {.name = "w", .ndim = 2, .shape = {2, 2}, .data = v},
        {.name = "b", .ndim = 1, .shape = {2}, .data = v + 4},
    };
    char good[512], err[RUMOR_ERR_LEN];
    path_in(good, sizeof good, "good.safetensors");
    CHECK_RC(rumor_st_write(good, out, 2, NULL, 0, err));
    size_t len = 0;
    uint8_t *buf = read_raw(good, &len);
    CHECK(buf != NULL && len > 8);
    if (!buf) return;
    size_t hlen = buf[0] | (size_t)buf[1] << 8;
    size_t cuts[] = {
        0, 1, 7, 8, 9, 8 + hlen / 2, 8 + hlen - 1, 8 + hlen, 8 + hlen + 1, 8 + hlen + 16, len - 1};
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(cuts); i++) {
        size_t cut = cuts[i];
        char what[64];
        snprintf(what, sizeof what, "cut at %zu of %zu", cut, len);
        CHECK(write_raw(path, buf, cut) == 0);
        expect_reject(path,
                      cut < 8          ? "truncated"
                      : cut < 8 + hlen ? "truncated: header says"
                                       : "run past the data area",
                      what);
    }
    /* One byte too many is refused too: the data area must be covered exactly. */
    uint8_t *longer = calloc(len + 1, 1);
    memcpy(longer, buf, len);
    CHECK(write_raw(path, longer, len + 1) == 0);
    expect_reject(path, "1 bytes at the end of the data area belong to no tensor",
                  "one byte extra");
    free(longer);
    free(buf);

    path_in(path, sizeof path, "absent.safetensors");
    expect_reject(path, strerror(ENOENT), "missing file");
    expect_reject(dir, "not a regular file", "a directory");
}

/* ---- writer errors and atomicity ---- */

static int same_file(const char *path, const uint8_t *want, size_t want_len)
{
    size_t len = 0;
    uint8_t *got = read_raw(path, &len);
    int same = got && len == want_len && memcmp(got, want, len) == 0;
    free(got);
    return same;
}

static void test_write_errors(void)
{
    char path[512], err[RUMOR_ERR_LEN];
    path_in(path, sizeof path, "keep.safetensors");
    float v[4] = {1, 2, 3, 4};
    rumor_st_out_t ok = {.name = "v", .ndim = 1, .shape = {4}, .data = v};
    CHECK_RC(rumor_st_write(path, &ok, 1, NULL, 0, err));
    size_t old_len = 0;
    uint8_t *old = read_raw(path, &old_len);
    CHECK(old != NULL);
    if (!old) return;

    /* Bad arguments are refused before anything is created. */
    static char long_name[RUMOR_ST_NAME_LEN + 1];
    memset(long_name, 'n', RUMOR_ST_NAME_LEN);
    rumor_st_out_t dup[] = {ok, ok};
    rumor_st_out_t bad[] = {
        {.name = long_name, .ndim = 1, .shape = {4}, .data = v},
        {.name = "__metadata__", .ndim = 1, .shape = {4}, .data = v},
        {.name = "v", .ndim = RUMOR_ST_MAX_DIMS + 1, .shape = {1}, .data = v},
        {.name = "v", .ndim = -1, .data = v},
        {.name = "v", .ndim = 2, .shape = {UINT64_C(1) << 31, 1}, .data = v},   /* 8 GiB */
        {.name = "v", .ndim = 2, .shape = {UINT64_C(1) << 40, UINT64_C(1) << 40}, .data = v},
        {.name = "v", .ndim = 1, .shape = {4}, .data = NULL},
        {.name = "\xff", .ndim = 1, .shape = {4}, .data = v},
    };
    const char *bad_want[] = {"over the limit of 127", "reserved", "ndim 9", "ndim -1",
                              "4 GiB", "4 GiB", "no data", "UTF-8"};
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(bad); i++) {
        err[0] = '\0';
        CHECK(rumor_st_write(path, &bad[i], 1, NULL, 0, err) == RUMOR_EINVAL);
        CHECK_MSG(strstr(err, bad_want[i]) && strncmp(err, path, strlen(path)) == 0, "case %zu: %s",
                  i, err);
    }
    CHECK(rumor_st_write(path, dup, 2, NULL, 0, err) == RUMOR_EINVAL);
    CHECK_MSG(strstr(err, "duplicate tensor name 'v'"), "%s", err);
    rumor_st_meta_t meta_dup[] = {{"k", "a"}, {"k", "b"}};
    CHECK(rumor_st_write(path, &ok, 1, meta_dup, 2, err) == RUMOR_EINVAL);
    CHECK_MSG(strstr(err, "duplicate metadata key 'k'"), "%s", err);
    rumor_st_meta_t meta_unterminated;
    memset(&meta_unterminated, 'k', sizeof meta_unterminated);
    CHECK(rumor_st_write(path, &ok, 1, &meta_unterminated, 1, err) == RUMOR_EINVAL);
    CHECK(same_file(path, old, old_len));
    CHECK(count_tmp_files() == 0);

    /* A write that fails halfway (file size limit, which holds even for root) leaves the old
     * file in place and no temporary behind. */
    static float big[1 << 16];
    rumor_st_out_t large = {.name = "big", .ndim = 1, .shape = {1 << 16}, .data = big};
    struct rlimit saved, small;
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    CHECK(getrlimit(RLIMIT_FSIZE, &saved) == 0);
    small = saved;
    small.rlim_cur = 4096;
    CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0);
    err[0] = '\0';
    rumor_err_t rc = rumor_st_write(path, &large, 1, NULL, 0, err);
    CHECK(setrlimit(RLIMIT_FSIZE, &saved) == 0);
    signal(SIGXFSZ, old_handler);
    CHECK(rc == RUMOR_EIO);
    CHECK_MSG(strstr(err, strerror(EFBIG)) && strncmp(err, path, strlen(path)) == 0, "%s", err);
    CHECK(same_file(path, old, old_len));
    CHECK(count_tmp_files() == 0);
    free(old);

    /* A folder that does not exist: an error naming the path, and nothing created. */
    char missing[512];
    path_in(missing, sizeof missing, "nowhere/m.safetensors");
    err[0] = '\0';
    CHECK(rumor_st_write(missing, &ok, 1, NULL, 0, err) == RUMOR_EIO);
    char want[600];
    snprintf(want, sizeof want, "%s: %s", missing, strerror(ENOENT));
    CHECK_MSG(strcmp(err, want) == 0, "%s", err);
    path_in(missing, sizeof missing, "nowhere");
    struct stat st;
    CHECK(stat(missing, &st) != 0 && errno == ENOENT);
    CHECK(count_tmp_files() == 0);

    /* A relative path in the working folder (fsyncs ".") also works. */
    char cwd[512];
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    CHECK(chdir(dir) == 0);
    CHECK_RC(rumor_st_write("rel.safetensors", &ok, 1, NULL, 0, err));
    CHECK(chdir(cwd) == 0);
    path_in(path, sizeof path, "rel.safetensors");
    rumor_st_file_t *f = rumor_st_open(path, err);
    CHECK_MSG(f != NULL, "%s", err);
    rumor_st_destroy(&f);
}

static void remove_dir(void)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/rumor_st_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_roundtrip();
    test_known_bytes();
    test_accepts();
    test_rejects();
    test_write_errors();
    remove_dir();
    return check_done();
}
