/* safetensors.c - safetensors reader and atomic writer (see safetensors.h). */
#include "safetensors.h"

#include "fileio.h"

#include <cjson/cJSON.h>

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Tensor data is handed out and taken in as the host's own floats, and the format is
 * little-endian. Every host rumor targets is; a big-endian port would byte-swap here. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host"
#endif

/* The reader holds the whole file in memory, so bound it; the writer refuses what the reader
 * would refuse. */
#define ST_MAX_FILE (UINT64_C(4) << 30)
#define ST_MAX_TENSORS 4096
#define ST_MAX_META 4096
/* The data area starts 8-byte aligned (the reference implementation pads the same way). */
#define ST_ALIGN 8
/* Numbers pass through cJSON as doubles, exact up to 2^53; larger is never a valid size
 * here since files are capped at 4 GiB. */
#define ST_MAX_EXACT 9007199254740992.0
#define ST_META_KEY "__metadata__"

struct rumor_st_file {
    uint8_t *buf;                      /* the whole file */
    rumor_st_tensor_t *tensors;        /* in header order */
    size_t count;
    const rumor_st_tensor_t **by_name; /* sorted by name: duplicate check and find */
    rumor_st_meta_t *meta;             /* sorted by key */
    size_t meta_count;
};

/* ---- dtypes ---- */

/* Every whole-byte dtype of the published format. Sub-byte types (F4, F6_*) are left out:
 * a file using them is reported as having an unknown dtype. */
static const struct {
    const char *name;
    unsigned size;
} dtypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
    {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
    {"F32", 4},  {"I64", 8}, {"U64", 8}, {"F64", 8},     {"C64", 8},
};

static unsigned dtype_size(const char *name)
{
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(dtypes); i++)
        if (strcmp(dtypes[i].name, name) == 0) return dtypes[i].size;
    return 0;
}

/* ---- shared helpers ---- */

/* Checks UTF-8 (no overlongs, surrogates or code points past U+10FFFF) and, when
 * json_text is set, rejects raw control bytes other than JSON whitespace: JSON forbids
 * them inside strings, and cJSON would otherwise let a raw NUL silently cut a name short.
 * Strings the writer takes may hold control characters: it escapes them.
 * Returns the offset of the first bad byte, or len when all is well. */
static size_t utf8_check(const uint8_t *s, size_t len, int json_text)
{
    size_t i = 0;
    while (i < len) {
        uint8_t c = s[i];
        if (c < 0x80) {
            if (json_text && c < 0x20 && c != '\t' && c != '\n' && c != '\r') return i;
            i++;
            continue;
        }
        /* n continuation bytes; min is the smallest code point that needs them. */
        size_t n = (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : 0;
        if (!n) return i;
        static const uint32_t min_cp[4] = {0, 0x80, 0x800, 0x10000};
        uint32_t cp = c & (0x7fu >> (n + 1)), min = min_cp[n];
        if (len - i - 1 < n) return i;
        for (size_t k = 1; k <= n; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return i;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
        i += n + 1;
    }
    return len;
}

static void format_shape(char *out, size_t out_len, const uint64_t *shape, int ndim)
{
    size_t at = 0;
    at += (size_t)snprintf(out, out_len, "[");
    for (int d = 0; d < ndim && at < out_len; d++)
        at += (size_t)snprintf(out + at, out_len - at, "%s%" PRIu64, d ? ", " : "", shape[d]);
    if (at < out_len) snprintf(out + at, out_len - at, "]");
}

/* Element count of a shape; 0 on overflow (and *overflow set). A zero dimension makes the
 * tensor empty whatever the others are, so it wins over an overflow among them. */
static uint64_t shape_elems(const uint64_t *shape, int ndim, int *overflow)
{
    uint64_t n = 1;
    *overflow = 0;
    for (int d = 0; d < ndim; d++)
        if (shape[d] == 0) return 0;
    for (int d = 0; d < ndim; d++) {
        if (n > UINT64_MAX / shape[d]) {
            *overflow = 1;
            return 0;
        }
        n *= shape[d];
    }
    return n;
}

/* ---- reading ---- */

/* cJSON 1.7 is laxer than the format's reference reader: it decodes "\u00zz" as a NUL,
 * keeps "\u0000" (which would cut a C string short) and raw tabs or newlines in strings,
 * reads "01" and "1." as numbers, and keeps only a double, so "2.0" would pass for the
 * integer 2. A small lexer closes those gaps: one pass before parsing checks strings and
 * number grammar, one after marks the numbers written with a fraction or exponent so they
 * are never taken as integers. */

typedef struct {
    const char *s;
    size_t len, at;
} lexer_t;

enum { LEX_OK, LEX_BAD_STRING, LEX_BAD_NUMBER };

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int hex_value(char c)
{
    if (is_digit(c)) return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Skips the string whose opening quote is at lx->at; 0 on a bad or NUL escape, a raw
 * control character, or no closing quote (the parser reports the last better), with
 * lx->at on the offending byte. */
static int lex_string(lexer_t *lx)
{
    lx->at++;
    while (lx->at < lx->len) {
        size_t here = lx->at;
        char c = lx->s[lx->at++];
        if (c == '"') return 1;
        if ((unsigned char)c < 0x20) { /* raw tab or newline: JSON wants escapes */
            lx->at = here;
            return 0;
        }
        if (c != '\\') continue;
        int ok = lx->at < lx->len;
        c = ok ? lx->s[lx->at++] : '\0';
        if (c == 'u') {
            unsigned v = 0;
            ok = lx->len - lx->at >= 4;
            for (int k = 0; ok && k < 4; k++) {
                int h = hex_value(lx->s[lx->at++]);
                if (h < 0) ok = 0;
                else v = v * 16 + (unsigned)h;
            }
            ok = ok && v != 0;
        } else {
            ok = ok && c && strchr("\"\\/bfnrt", c);
        }
        if (!ok) {
            lx->at = here;
            return 0;
        }
    }
    return 0;
}

/* Skips the number starting at lx->at ('-' or a digit); 0 when it breaks JSON's grammar.
 * *integer says it has neither fraction nor exponent. */
static int lex_number(lexer_t *lx, int *integer)
{
    const char *s = lx->s;
    size_t i = lx->at, n = lx->len;
    *integer = 1;
    if (i < n && s[i] == '-') i++;
    if (i < n && s[i] == '0') {
        i++;
    } else if (i < n && is_digit(s[i])) {
        while (i < n && is_digit(s[i])) i++;
    } else {
        return 0;
    }
    if (i < n && s[i] == '.') {
        *integer = 0;
        if (++i >= n || !is_digit(s[i])) return 0;
        while (i < n && is_digit(s[i])) i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        *integer = 0;
        if (++i < n && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= n || !is_digit(s[i])) return 0;
        while (i < n && is_digit(s[i])) i++;
    }
    /* "01", "1.", "1e", "1-": cJSON would read the rest into the number too. */
    if (i < n && (is_digit(s[i]) || s[i] == '.' || s[i] == 'e' || s[i] == 'E' || s[i] == '+' ||
                  s[i] == '-'))
        return 0;
    lx->at = i;
    return 1;
}

/* Moves to just past the next number outside strings. Returns 1 with *integer set, 0 at the
 * end of the text, or 0 with *bad set to LEX_BAD_*. */
static int lex_next_number(lexer_t *lx, int *integer, int *bad)
{
    *bad = LEX_OK;
    while (lx->at < lx->len) {
        char c = lx->s[lx->at];
        if (c == '"') {
            if (!lex_string(lx)) {
                *bad = LEX_BAD_STRING;
                return 0;
            }
        } else if (c == '-' || is_digit(c)) {
            if (!lex_number(lx, integer)) *bad = LEX_BAD_NUMBER;
            return !*bad;
        } else {
            lx->at++;
        }
    }
    return 0;
}

/* Walks the parsed tree in document order alongside the lexer, so the k-th number item is
 * the k-th number token, and poisons (sets to -1) those not written as integers.
 * Recursion depth is bounded by cJSON's nesting limit. -1 if the two disagree. */
static int mark_fractions(cJSON *item, lexer_t *lx)
{
    for (; item; item = item->next) {
        if (cJSON_IsNumber(item)) {
            int integer = 0, bad;
            if (!lex_next_number(lx, &integer, &bad)) return -1;
            if (!integer) item->valuedouble = -1.0;
        }
        if (item->child && mark_fractions(item->child, lx) != 0) return -1;
    }
    return 0;
}

/* A JSON number written as a non-negative integer ("2.0" and "2e0" were poisoned by
 * mark_fractions), exactly representable. */
static int json_u64(const cJSON *item, uint64_t *out)
{
    if (!cJSON_IsNumber(item)) return -1;
    double d = item->valuedouble;
    if (!(d >= 0.0 && d <= ST_MAX_EXACT)) return -1;
    uint64_t u = (uint64_t)d;
    if ((double)u != d) return -1;
    *out = u;
    return 0;
}

static int cmp_tensor_name(const void *a, const void *b)
{
    const rumor_st_tensor_t *x = *(const rumor_st_tensor_t *const *)a;
    const rumor_st_tensor_t *y = *(const rumor_st_tensor_t *const *)b;
    return strcmp(x->name, y->name);
}

static int cmp_tensor_offset(const void *a, const void *b)
{
    const rumor_st_tensor_t *x = *(const rumor_st_tensor_t *const *)a;
    const rumor_st_tensor_t *y = *(const rumor_st_tensor_t *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int cmp_meta_key(const void *a, const void *b)
{
    return strcmp(((const rumor_st_meta_t *)a)->key, ((const rumor_st_meta_t *)b)->key);
}

/* Reads all of a regular file of at most ST_MAX_FILE bytes. */
static rumor_err_t read_file(const char *path, uint8_t **buf_out, size_t *len_out, char *err)
{
    rumor_err_t rc = RUMOR_OK;
    uint8_t *buf = NULL;
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0) {
        rc = rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = rumor_fail(err, RUMOR_EFORMAT, "%s: not a regular file", path);
        goto out;
    }
    if ((uint64_t)st.st_size > ST_MAX_FILE || (uint64_t)st.st_size > SIZE_MAX) {
        rc = rumor_fail(err, RUMOR_EFORMAT, "%s: file is %" PRIu64 " bytes, over the 4 GiB limit",
                        path, (uint64_t)st.st_size);
        goto out;
    }
    size_t len = (size_t)st.st_size;
    buf = malloc(len ? len : 1);
    if (!buf) {
        rc = rumor_fail(err, RUMOR_ENOMEM, "%s: out of memory for %zu bytes", path, len);
        goto out;
    }
    size_t got = 0;
    while (got < len) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            rc = rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
            goto out;
        }
        if (r == 0) {
            rc = rumor_fail(err, RUMOR_EIO, "%s: file shrank while being read", path);
            goto out;
        }
        got += (size_t)r;
    }
    *buf_out = buf;
    *len_out = len;
    buf = NULL;
out:
    free(buf);
    close(fd);
    return rc;
}

static rumor_err_t parse_meta(const char *path, const cJSON *obj, rumor_st_file_t *f, char *err)
{
    if (!cJSON_IsObject(obj))
        return rumor_fail(err, RUMOR_EFORMAT, "%s: " ST_META_KEY " is not an object", path);
    int n = cJSON_GetArraySize(obj);
    if (n > ST_MAX_META)
        return rumor_fail(err, RUMOR_EFORMAT,
                          "%s: " ST_META_KEY " has %d entries, over the limit of %d", path, n,
                          ST_MAX_META);
    f->meta = calloc(n ? (size_t)n : 1, sizeof *f->meta);
    if (!f->meta) return rumor_fail(err, RUMOR_ENOMEM, "%s: out of memory", path);
    for (const cJSON *e = obj->child; e; e = e->next) {
        const char *key = e->string;
        size_t key_len = strlen(key);
        if (!cJSON_IsString(e))
            return rumor_fail(err, RUMOR_EFORMAT, "%s: " ST_META_KEY " '%.64s' is not a string",
                              path, key);
        if (key_len >= sizeof f->meta->key)
            return rumor_fail(err, RUMOR_EFORMAT,
                              "%s: metadata key '%.40s...' is %zu bytes, over the limit of %zu",
                              path, key, key_len, sizeof f->meta->key - 1);
        size_t value_len = strlen(e->valuestring);
        if (value_len >= sizeof f->meta->value)
            return rumor_fail(err, RUMOR_EFORMAT,
                              "%s: " ST_META_KEY " '%s' value is %zu bytes, over the limit of %zu",
                              path, key, value_len, sizeof f->meta->value - 1);
        rumor_st_meta_t *m = &f->meta[f->meta_count++];
        memcpy(m->key, key, key_len + 1);
        memcpy(m->value, e->valuestring, value_len + 1);
    }
    qsort(f->meta, f->meta_count, sizeof *f->meta, cmp_meta_key);
    for (size_t i = 1; i < f->meta_count; i++)
        if (strcmp(f->meta[i - 1].key, f->meta[i].key) == 0)
            return rumor_fail(err, RUMOR_EFORMAT, "%s: duplicate " ST_META_KEY " key '%s'", path,
                              f->meta[i].key);
    return RUMOR_OK;
}

static rumor_err_t parse_tensor(const char *path, const cJSON *e, uint64_t data_len,
                                rumor_st_tensor_t *t, char *err)
{
    const char *name = e->string;
    size_t name_len = strlen(name);
    if (name_len >= RUMOR_ST_NAME_LEN)
        return rumor_fail(err, RUMOR_EFORMAT,
                          "%s: tensor name '%.40s...' is %zu bytes, over the limit of %d", path,
                          name, name_len, RUMOR_ST_NAME_LEN - 1);
    memcpy(t->name, name, name_len + 1);
    if (!cJSON_IsObject(e))
        return rumor_fail(err, RUMOR_EFORMAT, "%s: tensor '%s': entry is not an object", path,
                          name);

    /* Look fields up by hand so a repeated one is caught: readers that keep the last copy
     * and readers that keep the first would otherwise see different tensors. */
    const cJSON *dtype = NULL, *shape = NULL, *offsets = NULL;
    for (const cJSON *fld = e->child; fld; fld = fld->next) {
        const cJSON **slot = strcmp(fld->string, "dtype") == 0          ? &dtype
                             : strcmp(fld->string, "shape") == 0        ? &shape
                             : strcmp(fld->string, "data_offsets") == 0 ? &offsets
                                                                        : NULL;
        if (!slot) continue; /* unknown fields are ignored, as the reference does */
        if (*slot)
            return rumor_fail(err, RUMOR_EFORMAT, "%s: tensor '%s': field '%s' appears twice", path,
                              name, fld->string);
        *slot = fld;
    }

    if (!dtype || !cJSON_IsString(dtype))
        return rumor_fail(err, RUMOR_EFORMAT, "%s: tensor '%s': dtype missing or not a string",
                          path, name);
    unsigned esize = dtype_size(dtype->valuestring);
    if (!esize)
        return rumor_fail(err, RUMOR_EFORMAT, "%s: tensor '%s': unknown dtype '%.32s'", path, name,
                          dtype->valuestring);
    snprintf(t->dtype, sizeof t->dtype, "%s", dtype->valuestring);

    if (!shape || !cJSON_IsArray(shape))
        return rumor_fail(err, RUMOR_EFORMAT, "%s: tensor '%s': shape missing or not an array",
                          path, name);
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > RUMOR_ST_MAX_DIMS)
        return rumor_fail(err, RUMOR_EFORMAT,
                          "%s: tensor '%s': shape has %d dims, over the limit of %d", path, name,
                          ndim, RUMOR_ST_MAX_DIMS);
    t->ndim = 0;
    for (const cJSON *d = shape->child; d; d = d->next, t->ndim++)
        if (json_u64(d, &t->shape[t->ndim]) != 0)
            return rumor_fail(err, RUMOR_EFORMAT,
                              "%s: tensor '%s': shape dim %d is not a non-negative integer", path,
                              name, t->ndim);

    if (!offsets || !cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2 ||
        json_u64(offsets->child, &t->begin) != 0 || json_u64(offsets->child->next, &t->end) != 0)
        return rumor_fail(err, RUMOR_EFORMAT,
                          "%s: tensor '%s': data_offsets must be two non-negative integers", path,
                          name);
    if (t->begin > t->end)
        return rumor_fail(err, RUMOR_EFORMAT, "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                          "] begin after end", path, name, t->begin, t->end);

    char shape_text[200];
    format_shape(shape_text, sizeof shape_text, t->shape, t->ndim);
    int overflow;
    uint64_t elems = shape_elems(t->shape, t->ndim, &overflow);
    if (overflow || elems > UINT64_MAX / esize)
        return rumor_fail(err, RUMOR_EFORMAT, "%s: tensor '%s': %s shape %s overflows", path, name,
                          t->dtype, shape_text);
    uint64_t nbytes = elems * esize;
    if (t->end - t->begin != nbytes)
        return rumor_fail(err, RUMOR_EFORMAT, "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                          "] disagree with %s shape %s (%" PRIu64 " bytes)",
                          path, name, t->begin, t->end, t->dtype, shape_text, nbytes);
    if (t->end > data_len)
        return rumor_fail(err, RUMOR_EFORMAT, "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                          "] run past the data area (%" PRIu64 " bytes)",
                          path, name, t->begin, t->end, data_len);
    return RUMOR_OK;
}

/* Tensors sorted by offset must tile [0, data_len) exactly: no byte unaccounted for, none
 * claimed twice. */
static rumor_err_t check_coverage(const char *path, rumor_st_file_t *f, uint64_t data_len,
                                  char *err)
{
    rumor_err_t rc = RUMOR_OK;
    const rumor_st_tensor_t **order = malloc((f->count ? f->count : 1) * sizeof *order);
    if (!order) return rumor_fail(err, RUMOR_ENOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < f->count; i++) order[i] = &f->tensors[i];
    qsort(order, f->count, sizeof *order, cmp_tensor_offset);
    uint64_t at = 0;
    for (size_t i = 0; i < f->count; i++) {
        const rumor_st_tensor_t *t = order[i];
        if (t->begin < at) {
            rc = rumor_fail(err, RUMOR_EFORMAT, "%s: tensor '%s' [%" PRIu64 ", %" PRIu64
                            "] overlaps tensor '%s' [%" PRIu64 ", %" PRIu64 "]",
                            path, t->name, t->begin, t->end, order[i - 1]->name,
                            order[i - 1]->begin, order[i - 1]->end);
            goto out;
        }
        if (t->begin > at) {
            rc = rumor_fail(err, RUMOR_EFORMAT,
                            "%s: gap of %" PRIu64 " bytes in the data area before tensor '%s'",
                            path, t->begin - at, t->name);
            goto out;
        }
        at = t->end;
    }
    if (at != data_len)
        rc = rumor_fail(err, RUMOR_EFORMAT,
                        "%s: %" PRIu64 " bytes at the end of the data area belong to no tensor",
                        path, data_len - at);
out:
    free(order);
    return rc;
}

rumor_st_file_t *rumor_st_open(const char *path, char err[RUMOR_ERR_LEN])
{
    assert(path);
    rumor_st_file_t *f = calloc(1, sizeof *f);
    cJSON *root = NULL;
    size_t len = 0;
    if (!f) {
        rumor_fail(err, RUMOR_ENOMEM, "%s: out of memory", path);
        return NULL;
    }
    if (read_file(path, &f->buf, &len, err) != RUMOR_OK) goto fail;

    if (len < 8) {
        rumor_fail(err, RUMOR_EFORMAT,
                   "%s: truncated: %zu bytes, too short for the 8-byte header length", path, len);
        goto fail;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | f->buf[i];
    if (hlen < 2) {
        rumor_fail(err, RUMOR_EFORMAT,
                   "%s: header length %" PRIu64 " is too short for a JSON object", path, hlen);
        goto fail;
    }
    if (hlen > RUMOR_ST_MAX_HEADER) {
        rumor_fail(err, RUMOR_EFORMAT,
                   "%s: header length %" PRIu64 " is over the limit of %u bytes", path, hlen,
                   RUMOR_ST_MAX_HEADER);
        goto fail;
    }
    if (hlen > len - 8) {
        rumor_fail(err, RUMOR_EFORMAT,
                   "%s: truncated: header says %" PRIu64 " bytes but file has %zu after the length",
                   path, hlen, len - 8);
        goto fail;
    }
    const char *hdr = (const char *)f->buf + 8;
    uint64_t data_len = len - 8 - hlen;

    /* cJSON would skip a byte-order mark that JSON parsers (and the reference) reject. */
    if (hlen >= 3 && memcmp(hdr, "\xef\xbb\xbf", 3) == 0) {
        rumor_fail(err, RUMOR_EFORMAT, "%s: header starts with a byte-order mark", path);
        goto fail;
    }
    size_t bad = utf8_check((const uint8_t *)hdr, (size_t)hlen, 1);
    if (bad != hlen) {
        rumor_fail(err, RUMOR_EFORMAT, "%s: header is not valid UTF-8 JSON text (byte %zu)", path,
                   bad);
        goto fail;
    }
    lexer_t lx = {hdr, (size_t)hlen, 0};
    int integer, lex_bad;
    while (lex_next_number(&lx, &integer, &lex_bad)) {}
    if (lex_bad) {
        rumor_fail(err, RUMOR_EFORMAT, "%s: header has %s (byte %zu)", path,
                   lex_bad == LEX_BAD_STRING ? "a malformed string" : "a malformed number",
                   lx.at);
        goto fail;
    }
    const char *end = NULL;
    root = cJSON_ParseWithLengthOpts(hdr, (size_t)hlen, &end, 0);
    if (!root) {
        rumor_fail(err, RUMOR_EFORMAT, "%s: header is not valid JSON (near byte %td)", path,
                   end ? end - hdr : (ptrdiff_t)0);
        goto fail;
    }
    /* The reference pads with spaces; anything else after the JSON value is garbage. */
    for (const char *p = end; p < hdr + hlen; p++) {
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            rumor_fail(err, RUMOR_EFORMAT, "%s: header has bytes after the JSON value (byte %td)",
                       path, p - hdr);
            goto fail;
        }
    }
    lx.at = 0;
    if (mark_fractions(root, &lx) != 0) {
        rumor_fail(err, RUMOR_EFORMAT, "%s: header numbers could not be matched to the parse",
                   path);
        goto fail;
    }
    if (!cJSON_IsObject(root)) {
        rumor_fail(err, RUMOR_EFORMAT, "%s: header is a JSON %s, not an object", path,
                   cJSON_IsArray(root) ? "array" : "scalar");
        goto fail;
    }
    int entries = cJSON_GetArraySize(root);
    if (entries > ST_MAX_TENSORS + 1) {
        rumor_fail(err, RUMOR_EFORMAT, "%s: header has %d entries, over the limit of %d tensors",
                   path, entries, ST_MAX_TENSORS);
        goto fail;
    }
    f->tensors = calloc(entries ? (size_t)entries : 1, sizeof *f->tensors);
    if (!f->tensors) {
        rumor_fail(err, RUMOR_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    int seen_meta = 0;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (strcmp(e->string, ST_META_KEY) == 0) {
            if (seen_meta++) {
                rumor_fail(err, RUMOR_EFORMAT, "%s: " ST_META_KEY " appears twice", path);
                goto fail;
            }
            if (parse_meta(path, e, f, err) != RUMOR_OK) goto fail;
            continue;
        }
        if (f->count == ST_MAX_TENSORS) {
            rumor_fail(err, RUMOR_EFORMAT, "%s: more than %d tensors", path, ST_MAX_TENSORS);
            goto fail;
        }
        rumor_st_tensor_t *t = &f->tensors[f->count];
        if (parse_tensor(path, e, data_len, t, err) != RUMOR_OK) goto fail;
        t->data = f->buf + 8 + hlen + t->begin;
        f->count++;
    }

    /* cJSON keeps repeated keys as separate children, so duplicates must be found here. */
    f->by_name = malloc((f->count ? f->count : 1) * sizeof *f->by_name);
    if (!f->by_name) {
        rumor_fail(err, RUMOR_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    for (size_t i = 0; i < f->count; i++) f->by_name[i] = &f->tensors[i];
    qsort(f->by_name, f->count, sizeof *f->by_name, cmp_tensor_name);
    for (size_t i = 1; i < f->count; i++) {
        if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0) {
            rumor_fail(err, RUMOR_EFORMAT, "%s: duplicate tensor name '%s'", path,
                       f->by_name[i]->name);
            goto fail;
        }
    }
    if (check_coverage(path, f, data_len, err) != RUMOR_OK) goto fail;

    cJSON_Delete(root);
    return f;
fail:
    cJSON_Delete(root);
    rumor_st_destroy(&f);
    return NULL;
}

void rumor_st_destroy(rumor_st_file_t **self_p)
{
    if (!self_p || !*self_p) return;
    rumor_st_file_t *f = *self_p;
    free(f->buf);
    free(f->tensors);
    free(f->by_name);
    free(f->meta);
    free(f);
    *self_p = NULL;
}

size_t rumor_st_count(const rumor_st_file_t *self)
{
    assert(self);
    return self->count;
}

const rumor_st_tensor_t *rumor_st_at(const rumor_st_file_t *self, size_t i)
{
    assert(self && i < self->count);
    return &self->tensors[i];
}

static int cmp_name_key(const void *key, const void *elem)
{
    return strcmp((const char *)key, (*(const rumor_st_tensor_t *const *)elem)->name);
}

const rumor_st_tensor_t *rumor_st_find(const rumor_st_file_t *self, const char *name)
{
    assert(self && name);
    const rumor_st_tensor_t *const *hit =
        bsearch(name, self->by_name, self->count, sizeof *self->by_name, cmp_name_key);
    return hit ? *hit : NULL;
}

static int cmp_meta_search(const void *key, const void *elem)
{
    return strcmp((const char *)key, ((const rumor_st_meta_t *)elem)->key);
}

size_t rumor_st_meta_count(const rumor_st_file_t *self) { return self->meta_count; }

const rumor_st_meta_t *rumor_st_meta_at(const rumor_st_file_t *self, size_t i)
{
    return i < self->meta_count ? &self->meta[i] : NULL;
}

const char *rumor_st_meta(const rumor_st_file_t *self, const char *key)
{
    assert(self && key);
    if (!self->meta_count) return NULL; /* meta is NULL then, and bsearch wants an array */
    const rumor_st_meta_t *hit =
        bsearch(key, self->meta, self->meta_count, sizeof *self->meta, cmp_meta_search);
    return hit ? hit->value : NULL;
}

/* ---- writing ---- */

/* A growing string; `failed` latches an allocation failure so appends need no checks. */
typedef struct {
    char *p;
    size_t len, cap;
    int failed;
} strbuf_t;

static void sb_add(strbuf_t *sb, const char *s, size_t n)
{
    if (sb->failed) return;
    if (sb->len + n + 1 > sb->cap) {
        size_t cap = sb->cap ? sb->cap : 256;
        while (cap < sb->len + n + 1) cap *= 2;
        char *p = realloc(sb->p, cap);
        if (!p) {
            sb->failed = 1;
            return;
        }
        sb->p = p;
        sb->cap = cap;
    }
    memcpy(sb->p + sb->len, s, n);
    sb->len += n;
    sb->p[sb->len] = '\0';
}

static void sb_str(strbuf_t *sb, const char *s) { sb_add(sb, s, strlen(s)); }

static void sb_u64(strbuf_t *sb, uint64_t v)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof tmp, "%" PRIu64, v);
    sb_add(sb, tmp, (size_t)n);
}

/* A JSON string literal. Input is valid UTF-8 (checked by the caller), so only quotes,
 * backslashes and control bytes need escapes. */
static void sb_json_str(strbuf_t *sb, const char *s)
{
    sb_add(sb, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            sb_add(sb, esc, 2);
        } else if (c < 0x20) {
            char esc[8];
            snprintf(esc, sizeof esc, "\\u%04x", c);
            sb_add(sb, esc, 6);
        } else {
            sb_add(sb, (const char *)&c, 1);
        }
    }
    sb_add(sb, "\"", 1);
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Rejects what the reader would reject, before any file is touched. Fills nbytes[i]. */
static rumor_err_t check_out(const char *path, const rumor_st_out_t *tensors, size_t n_tensors,
                             const rumor_st_meta_t *meta, size_t n_meta, uint64_t *nbytes,
                             char *err)
{
    rumor_err_t rc = RUMOR_OK;
    const char **names = NULL;
    if (n_tensors > ST_MAX_TENSORS)
        return rumor_fail(err, RUMOR_EINVAL, "%s: %zu tensors, over the limit of %d", path,
                          n_tensors, ST_MAX_TENSORS);
    if (n_meta > ST_MAX_META)
        return rumor_fail(err, RUMOR_EINVAL, "%s: %zu metadata entries, over the limit of %d", path,
                          n_meta, ST_MAX_META);
    uint64_t total = 0;
    for (size_t i = 0; i < n_tensors; i++) {
        const rumor_st_out_t *t = &tensors[i];
        assert(t->name);
        size_t name_len = strlen(t->name);
        if (name_len >= RUMOR_ST_NAME_LEN)
            return rumor_fail(err, RUMOR_EINVAL,
                              "%s: tensor name '%.40s...' is %zu bytes, over the limit of %d", path,
                              t->name, name_len, RUMOR_ST_NAME_LEN - 1);
        if (utf8_check((const uint8_t *)t->name, name_len, 0) != name_len)
            return rumor_fail(err, RUMOR_EINVAL, "%s: tensor name is not valid UTF-8", path);
        if (strcmp(t->name, ST_META_KEY) == 0)
            return rumor_fail(err, RUMOR_EINVAL,
                              "%s: '" ST_META_KEY "' is reserved, not a tensor name", path);
        if (t->ndim < 0 || t->ndim > RUMOR_ST_MAX_DIMS)
            return rumor_fail(err, RUMOR_EINVAL, "%s: tensor '%s': ndim %d outside [0, %d]", path,
                              t->name, t->ndim, RUMOR_ST_MAX_DIMS);
        int overflow;
        uint64_t elems = shape_elems(t->shape, t->ndim, &overflow);
        if (overflow || elems > ST_MAX_FILE / sizeof(float))
            return rumor_fail(err, RUMOR_EINVAL, "%s: tensor '%s': over the 4 GiB file limit", path,
                              t->name);
        nbytes[i] = elems * sizeof(float);
        total += nbytes[i];
        if (total > ST_MAX_FILE)
            return rumor_fail(err, RUMOR_EINVAL, "%s: tensors total over the 4 GiB file limit",
                              path);
        if (nbytes[i] && !t->data)
            return rumor_fail(err, RUMOR_EINVAL, "%s: tensor '%s': no data", path, t->name);
    }
    for (size_t i = 0; i < n_meta; i++) {
        const rumor_st_meta_t *m = &meta[i];
        size_t key_len = strnlen(m->key, sizeof m->key),
               value_len = strnlen(m->value, sizeof m->value);
        if (key_len == sizeof m->key || value_len == sizeof m->value)
            return rumor_fail(err, RUMOR_EINVAL, "%s: metadata entry %zu is not NUL-terminated",
                              path, i);
        if (utf8_check((const uint8_t *)m->key, key_len, 0) != key_len ||
            utf8_check((const uint8_t *)m->value, value_len, 0) != value_len)
            return rumor_fail(err, RUMOR_EINVAL, "%s: metadata '%s' is not valid UTF-8", path,
                              m->key);
    }

    /* Tensor names and metadata keys are separate namespaces: each must be unique within
     * itself. One scratch array serves both checks in turn. */
    size_t n_names = n_tensors > n_meta ? n_tensors : n_meta;
    names = malloc((n_names ? n_names : 1) * sizeof *names);
    if (!names) return rumor_fail(err, RUMOR_ENOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < n_tensors; i++) names[i] = tensors[i].name;
    qsort(names, n_tensors, sizeof *names, cmp_str_ptr);
    for (size_t i = 1; i < n_tensors; i++) {
        if (strcmp(names[i - 1], names[i]) == 0) {
            rc = rumor_fail(err, RUMOR_EINVAL, "%s: duplicate tensor name '%s'", path, names[i]);
            goto out;
        }
    }
    for (size_t i = 0; i < n_meta; i++) names[i] = meta[i].key;
    qsort(names, n_meta, sizeof *names, cmp_str_ptr);
    for (size_t i = 1; i < n_meta; i++) {
        if (strcmp(names[i - 1], names[i]) == 0) {
            rc = rumor_fail(err, RUMOR_EINVAL, "%s: duplicate metadata key '%s'", path, names[i]);
            goto out;
        }
    }
out:
    free(names);
    return rc;
}

/* The header: "__metadata__" first (where the reference implementation puts it), then the
 * tensors in the caller's order with contiguous offsets, then spaces up to alignment. */
static void build_header(strbuf_t *sb, const rumor_st_out_t *tensors, size_t n_tensors,
                         const rumor_st_meta_t *meta, size_t n_meta, const uint64_t *nbytes)
{
    int first = 1;
    sb_str(sb, "{");
    if (n_meta) {
        sb_str(sb, "\"" ST_META_KEY "\":{");
        for (size_t i = 0; i < n_meta; i++) {
            if (i) sb_str(sb, ",");
            sb_json_str(sb, meta[i].key);
            sb_str(sb, ":");
            sb_json_str(sb, meta[i].value);
        }
        sb_str(sb, "}");
        first = 0;
    }
    uint64_t at = 0;
    for (size_t i = 0; i < n_tensors; i++) {
        const rumor_st_out_t *t = &tensors[i];
        if (!first) sb_str(sb, ",");
        first = 0;
        sb_json_str(sb, t->name);
        sb_str(sb, ":{\"dtype\":\"F32\",\"shape\":[");
        for (int d = 0; d < t->ndim; d++) {
            if (d) sb_str(sb, ",");
            sb_u64(sb, t->shape[d]);
        }
        sb_str(sb, "],\"data_offsets\":[");
        sb_u64(sb, at);
        sb_str(sb, ",");
        sb_u64(sb, at + nbytes[i]);
        sb_str(sb, "]}");
        at += nbytes[i];
    }
    sb_str(sb, "}");
    while ((8 + sb->len) % ST_ALIGN) sb_str(sb, " ");
}

rumor_err_t rumor_st_write(const char *path, const rumor_st_out_t *tensors, size_t n_tensors,
                           const rumor_st_meta_t *meta, size_t n_meta, char err[RUMOR_ERR_LEN])
{
    assert(path);
    assert(tensors || n_tensors == 0);
    assert(meta || n_meta == 0);
    rumor_err_t rc = RUMOR_OK;
    strbuf_t sb = {0};
    rumor_piece_t *pieces = NULL;
    uint64_t *nbytes = calloc(n_tensors ? n_tensors : 1, sizeof *nbytes);
    if (!nbytes) return rumor_fail(err, RUMOR_ENOMEM, "%s: out of memory", path);

    if ((rc = check_out(path, tensors, n_tensors, meta, n_meta, nbytes, err)) != RUMOR_OK) goto out;
    build_header(&sb, tensors, n_tensors, meta, n_meta, nbytes);
    if (sb.failed) {
        rc = rumor_fail(err, RUMOR_ENOMEM, "%s: out of memory", path);
        goto out;
    }
    uint64_t total = 8 + sb.len;
    for (size_t i = 0; i < n_tensors; i++) total += nbytes[i];
    if (sb.len > RUMOR_ST_MAX_HEADER || total > ST_MAX_FILE) {
        rc = rumor_fail(err, RUMOR_EINVAL, "%s: header or file over the reader's limits", path);
        goto out;
    }

    /* Models and checkpoints are derived from private data (a DP model's epsilon is about what
     * its weights reveal, not an invitation to publish them): owner only, whatever the umask.
     * A user shares one with chmod or cp. */
    uint8_t lenbuf[8];
    for (int i = 0; i < 8; i++) lenbuf[i] = (uint8_t)((uint64_t)sb.len >> (8 * i));
    pieces = malloc((n_tensors + 2) * sizeof *pieces);
    if (!pieces) {
        rc = rumor_fail(err, RUMOR_ENOMEM, "%s: out of memory", path);
        goto out;
    }
    pieces[0] = (rumor_piece_t){lenbuf, sizeof lenbuf};
    pieces[1] = (rumor_piece_t){sb.p, sb.len};
    for (size_t i = 0; i < n_tensors; i++) pieces[2 + i] = (rumor_piece_t){tensors[i].data, nbytes[i]};
    rc = rumor_write_atomic(path, pieces, n_tensors + 2, 0600, true, err);
out:
    free(pieces);
    free(sb.p);
    free(nbytes);
    return rc;
}
