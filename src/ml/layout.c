/*
 * layout.c - named tensors in one flat buffer, their canonical text and id (see layout.h).
 */
#include "layout.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char MAGIC[] = "rumor-layout-2\n";

void rumor_layout_init(rumor_layout_t *l) { memset(l, 0, sizeof *l); }

void rumor_layout_fini(rumor_layout_t *l)
{
    free(l->t);
    memset(l, 0, sizeof *l);
}

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '/' || c == '-';
}

/* Why name cannot name a tensor, or NULL. */
static const char *bad_name(const char *name, size_t len)
{
    if (len == 0) return "an empty name";
    if (len > RUMOR_LAYOUT_NAME_MAX) return "a name longer than 200 bytes";
    for (size_t i = 0; i < len; i++)
        if (!name_char(name[i])) return "a name of other characters than letters, digits and _ . / -";
    return NULL;
}

rumor_err_t rumor_layout_add(rumor_layout_t *l, const char *name, int ndim, const uint64_t *shape,
                             char err[RUMOR_ERR_LEN])
{
    const size_t len = strlen(name);
    const char *why = bad_name(name, len);
    if (why) return rumor_fail(err, RUMOR_EINVAL, "tensor %d '%.40s': %s", l->n, name, why);
    if (ndim < 0 || ndim > RUMOR_LAYOUT_MAX_DIMS)
        return rumor_fail(err, RUMOR_EINVAL, "tensor %d '%s': %d dimensions (at most %d)", l->n, name, ndim,
                          RUMOR_LAYOUT_MAX_DIMS);
    if (l->n == RUMOR_LAYOUT_MAX_TENSORS)
        return rumor_fail(err, RUMOR_EINVAL, "tensor '%s': more than %d tensors", name, RUMOR_LAYOUT_MAX_TENSORS);
    uint64_t count = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 1 || shape[d] > RUMOR_LAYOUT_MAX_DIM)
            return rumor_fail(err, RUMOR_EINVAL, "tensor %d '%s': dimension %d is %" PRIu64 " (expected 1..%d)", l->n,
                              name, d, shape[d], RUMOR_LAYOUT_MAX_DIM);
        if (count > RUMOR_LAYOUT_MAX_FLOATS / shape[d]) count = RUMOR_LAYOUT_MAX_FLOATS + 1; /* (no overflow) */
        else count *= shape[d];
    }
    const uint64_t padded = (count + RUMOR_LAYOUT_ALIGN - 1) / RUMOR_LAYOUT_ALIGN * RUMOR_LAYOUT_ALIGN;
    if (count > RUMOR_LAYOUT_MAX_FLOATS || l->total + padded > RUMOR_LAYOUT_MAX_FLOATS)
        return rumor_fail(err, RUMOR_EINVAL, "tensor %d '%s': the layout would pass 2^40 floats", l->n, name);
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->t[i].name, name) == 0)
            return rumor_fail(err, RUMOR_EINVAL, "tensor %d '%s': the name of tensor %d already", l->n, name, i);
    if (l->n == l->cap) {
        const int cap = l->cap ? 2 * l->cap : 16;
        rumor_layout_tensor_t *t = realloc(l->t, (size_t)cap * sizeof *t);
        if (!t) return rumor_fail(err, RUMOR_ENOMEM, "out of memory for a layout of %d tensors", cap);
        l->t = t, l->cap = cap;
    }
    rumor_layout_tensor_t *t = &l->t[l->n++];
    memset(t, 0, sizeof *t);
    memcpy(t->name, name, len + 1);
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
    t->offset = l->total;
    t->count = count;
    l->total += padded;
    return RUMOR_OK;
}

/* One tensor's line into buf at *len (never past cap; *len counts what would be written). */
static void put_line(const rumor_layout_tensor_t *t, char *buf, size_t cap, size_t *len)
{
    char line[RUMOR_LAYOUT_NAME_MAX + 2 + RUMOR_LAYOUT_MAX_DIMS * 12 + 2];
    int n = snprintf(line, sizeof line, "%s:", t->name);
    for (int d = 0; d < t->ndim; d++) n += snprintf(line + n, sizeof line - (size_t)n, "%s%" PRIu64, d ? "," : "", t->shape[d]);
    n += snprintf(line + n, sizeof line - (size_t)n, "\n");
    if (*len < cap) memcpy(buf + *len, line, (size_t)n < cap - *len ? (size_t)n : cap - *len);
    *len += (size_t)n;
}

size_t rumor_layout_text(const rumor_layout_t *l, char *buf, size_t cap)
{
    size_t len = sizeof MAGIC - 1;
    if (cap) memcpy(buf, MAGIC, len < cap ? len : cap);
    for (int i = 0; i < l->n; i++) put_line(&l->t[i], buf, cap, &len);
    if (cap) buf[len < cap ? len : cap - 1] = 0;
    return len;
}

uint64_t rumor_layout_id(const rumor_layout_t *l)
{
    uint64_t h = rumor_fnv1a(RUMOR_FNV_BASIS, MAGIC, sizeof MAGIC - 1);
    for (int i = 0; i < l->n; i++) {
        char line[RUMOR_LAYOUT_NAME_MAX + 2 + RUMOR_LAYOUT_MAX_DIMS * 12 + 2];
        size_t len = 0;
        put_line(&l->t[i], line, sizeof line, &len);
        h = rumor_fnv1a(h, line, len);
    }
    return h;
}

/* Dimensions "D0,D1,..." of p[0..len) (no sign, no leading zero, 1..2^31 - 1 each). */
static bool parse_dims(const char *p, size_t len, int *ndim, uint64_t *shape)
{
    *ndim = 0;
    if (len == 0) return true;
    for (size_t i = 0;;) {
        if (*ndim == RUMOR_LAYOUT_MAX_DIMS || i == len || p[i] < '1' || p[i] > '9') return false;
        uint64_t v = 0;
        while (i < len && p[i] >= '0' && p[i] <= '9') {
            v = v * 10 + (uint64_t)(p[i++] - '0');
            if (v > RUMOR_LAYOUT_MAX_DIM) return false;
        }
        shape[(*ndim)++] = v;
        if (i == len) return true;
        if (p[i++] != ',') return false;
    }
}

rumor_err_t rumor_layout_parse(rumor_layout_t *l, const char *text, size_t len, char err[RUMOR_ERR_LEN])
{
    char e2[RUMOR_ERR_LEN];
    if (len < sizeof MAGIC - 1 || memcmp(text, MAGIC, sizeof MAGIC - 1) != 0)
        return rumor_fail(err, RUMOR_EFORMAT, "a layout's text: not rumor-layout-2");
    int no = 1;
    for (size_t i = sizeof MAGIC - 1; i < len;) {
        no++;
        const char *line = text + i;
        const char *nl = memchr(line, '\n', len - i);
        if (!nl) return rumor_fail(err, RUMOR_EFORMAT, "a layout's text, line %d: no end of line", no);
        const char *colon = memchr(line, ':', (size_t)(nl - line));
        if (!colon) return rumor_fail(err, RUMOR_EFORMAT, "a layout's text, line %d: expected NAME:DIMS", no);
        const size_t nlen = (size_t)(colon - line);
        const char *why = bad_name(line, nlen);
        if (why) return rumor_fail(err, RUMOR_EFORMAT, "a layout's text, line %d: %s", no, why);
        char name[RUMOR_LAYOUT_NAME_MAX + 1];
        memcpy(name, line, nlen);
        name[nlen] = 0;
        int ndim;
        uint64_t shape[RUMOR_LAYOUT_MAX_DIMS];
        if (!parse_dims(colon + 1, (size_t)(nl - colon - 1), &ndim, shape))
            return rumor_fail(err, RUMOR_EFORMAT, "a layout's text, line %d: bad dimensions", no);
        const rumor_err_t rc = rumor_layout_add(l, name, ndim, shape, e2);
        if (rc != RUMOR_OK) return rumor_fail(err, rc == RUMOR_ENOMEM ? rc : RUMOR_EFORMAT, "a layout's text, line %d: %s", no, e2);
        i = (size_t)(nl - text) + 1;
    }
    return RUMOR_OK;
}

static void shape_text(const rumor_layout_tensor_t *t, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < t->ndim && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%" PRIu64, d ? ", " : "", t->shape[d]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

bool rumor_layout_diff(const rumor_layout_t *ours, const rumor_layout_t *theirs, char *buf, size_t cap)
{
    const int n = ours->n < theirs->n ? ours->n : theirs->n;
    for (int i = 0; i < n; i++) {
        const rumor_layout_tensor_t *a = &ours->t[i], *b = &theirs->t[i];
        if (strcmp(a->name, b->name) != 0) {
            snprintf(buf, cap, "tensor %d is '%s' there and '%s' here", i, b->name, a->name);
            return true;
        }
        if (a->ndim != b->ndim || memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape) != 0) {
            char sa[128], sb[128];
            shape_text(a, sa, sizeof sa);
            shape_text(b, sb, sizeof sb);
            snprintf(buf, cap, "tensor %d '%s' is %s there and %s here", i, a->name, sb, sa);
            return true;
        }
    }
    if (ours->n != theirs->n) {
        snprintf(buf, cap, "it has %d tensor%s, we have %d", theirs->n, theirs->n == 1 ? "" : "s", ours->n);
        return true;
    }
    if (cap) buf[0] = 0;
    return false;
}
