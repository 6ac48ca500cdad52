/*
 * test_layout.c - named tensors in one flat buffer (src/ml/layout.h): offsets at 16-float
 * boundaries, the canonical text and its id (FNV-1a 64, computed here on the text as an
 * oracle), the text parsed back to the same layout, every refusal with its reason, and the
 * first difference between two layouts as a sentence naming the tensor.
 */
#include "check.h"
#include "layout.h"

#include <string.h>

static uint64_t fnv(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
    return h;
}

static rumor_err_t add(rumor_layout_t *l, const char *name, int ndim, uint64_t a, uint64_t b, char err[RUMOR_ERR_LEN])
{
    const uint64_t shape[RUMOR_LAYOUT_MAX_DIMS] = {a, b, 1, 1, 1, 1, 1, 1};
    return rumor_layout_add(l, name, ndim, shape, err);
}

static bool parse_refused(const char *text, const char *why)
{
    rumor_layout_t l;
    rumor_layout_init(&l);
    char err[RUMOR_ERR_LEN] = "";
    const rumor_err_t rc = rumor_layout_parse(&l, text, strlen(text), err);
    rumor_layout_fini(&l);
    if (rc != RUMOR_EFORMAT || !strstr(err, why)) fprintf(stderr, "parse %s: %d '%s'\n", text, rc, err);
    return rc == RUMOR_EFORMAT && strstr(err, why);
}

int main(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_layout_t l;
    rumor_layout_init(&l);
    /* rumor's mlp:64 on Fashion-MNIST, as model.c lays it out */
    CHECK(add(&l, "fc1.weight", 2, 64, 784, err) == RUMOR_OK);
    CHECK(add(&l, "fc1.bias", 1, 64, 0, err) == RUMOR_OK);
    CHECK(add(&l, "fc2.weight", 2, 10, 64, err) == RUMOR_OK);
    CHECK(add(&l, "fc2.bias", 1, 10, 0, err) == RUMOR_OK);
    CHECK(add(&l, "step", 0, 0, 0, err) == RUMOR_OK); /* a scalar */
    CHECK_MSG(l.n == 5 && l.t[0].offset == 0 && l.t[1].offset == 50176 && l.t[2].offset == 50240 &&
                  l.t[3].offset == 50880 && l.t[4].offset == 50896 && l.total == 50912 && l.t[3].count == 10 &&
                  l.t[4].count == 1,
              "offsets at 16-float boundaries: %llu %llu %llu %llu, total %llu", (unsigned long long)l.t[1].offset,
              (unsigned long long)l.t[2].offset, (unsigned long long)l.t[3].offset, (unsigned long long)l.t[4].offset,
              (unsigned long long)l.total);
    const char *want = "rumor-layout-2\nfc1.weight:64,784\nfc1.bias:64\nfc2.weight:10,64\nfc2.bias:10\nstep:\n";
    char text[512];
    const size_t len = rumor_layout_text(&l, text, sizeof text);
    CHECK_MSG(len == strlen(want) && strcmp(text, want) == 0, "the canonical text: %s", text);
    CHECK(rumor_layout_text(&l, NULL, 0) == len);
    char small[20];
    CHECK(rumor_layout_text(&l, small, sizeof small) == len && strlen(small) == sizeof small - 1);
    CHECK_MSG(rumor_layout_id(&l) == fnv(want), "the id is FNV-1a 64 of the text: %016llx",
              (unsigned long long)rumor_layout_id(&l));

    /* Parsed back: the same tensors, offsets, text and id. */
    rumor_layout_t p;
    rumor_layout_init(&p);
    CHECK(rumor_layout_parse(&p, text, len, err) == RUMOR_OK);
    char diff[256];
    CHECK(p.n == 5 && p.total == l.total && p.t[4].offset == l.t[4].offset && rumor_layout_id(&p) == rumor_layout_id(&l) &&
          !rumor_layout_diff(&l, &p, diff, sizeof diff) && diff[0] == 0);
    rumor_layout_fini(&p);

    /* What a tensor may not be. */
    char long_name[210];
    memset(long_name, 'a', 201);
    long_name[201] = 0;
    CHECK(add(&l, long_name, 1, 1, 0, err) == RUMOR_EINVAL && strstr(err, "longer than 200 bytes"));
    CHECK(add(&l, "fc 3", 1, 1, 0, err) == RUMOR_EINVAL && strstr(err, "other characters"));
    CHECK(add(&l, "", 1, 1, 0, err) == RUMOR_EINVAL && strstr(err, "an empty name"));
    CHECK(add(&l, "x", 2, 3, 0, err) == RUMOR_EINVAL && strstr(err, "'x': dimension 1 is 0"));
    CHECK(add(&l, "x", 1, UINT64_C(2147483648), 0, err) == RUMOR_EINVAL && strstr(err, "expected 1..2147483647"));
    CHECK(add(&l, "x", 9, 1, 1, err) == RUMOR_EINVAL && strstr(err, "9 dimensions"));
    CHECK(add(&l, "fc2.bias", 1, 10, 0, err) == RUMOR_EINVAL && strstr(err, "the name of tensor 3 already"));
    CHECK(add(&l, "huge", 2, 2147483647, 2147483647, err) == RUMOR_EINVAL && strstr(err, "2^40 floats"));
    CHECK_MSG(l.n == 5 && l.total == 50912, "a refused tensor changes nothing (%d tensors)", l.n);

    /* The parser takes canonical text and nothing else. */
    CHECK(parse_refused("rumor-layout-1\na:1\n", "not rumor-layout-2"));
    CHECK(parse_refused("rumor-layout-2\na:1", "line 2: no end of line"));
    CHECK(parse_refused("rumor-layout-2\na1\n", "line 2: expected NAME:DIMS"));
    CHECK(parse_refused("rumor-layout-2\na:1\nb c:2\n", "line 3: a name of other characters"));
    CHECK(parse_refused("rumor-layout-2\na:0\n", "line 2: bad dimensions"));
    CHECK(parse_refused("rumor-layout-2\na:01\n", "line 2: bad dimensions"));
    CHECK(parse_refused("rumor-layout-2\na:2,,3\n", "line 2: bad dimensions"));
    CHECK(parse_refused("rumor-layout-2\na:2,\n", "line 2: bad dimensions"));
    CHECK(parse_refused("rumor-layout-2\na:+2\n", "line 2: bad dimensions"));
    CHECK(parse_refused("rumor-layout-2\na:1,1,1,1,1,1,1,1,1\n", "line 2: bad dimensions"));
    CHECK(parse_refused("rumor-layout-2\na:2147483648\n", "line 2: bad dimensions"));
    CHECK(parse_refused("rumor-layout-2\na:1\na:2\n", "line 3: tensor 1 'a': the name of tensor 0 already"));
    CHECK(parse_refused("rumor-layout-2\n:1\n", "line 2: an empty name"));

    /* The first difference, named. */
    rumor_layout_t q;
    rumor_layout_init(&q);
    CHECK(add(&q, "fc1.weight", 2, 128, 784, err) == RUMOR_OK);
    CHECK(rumor_layout_diff(&l, &q, diff, sizeof diff) &&
          strcmp(diff, "tensor 0 'fc1.weight' is [128, 784] there and [64, 784] here") == 0);
    rumor_layout_fini(&q);
    rumor_layout_init(&q);
    CHECK(add(&q, "conv1.weight", 2, 64, 784, err) == RUMOR_OK);
    CHECK(rumor_layout_diff(&l, &q, diff, sizeof diff) && strcmp(diff, "tensor 0 is 'conv1.weight' there and 'fc1.weight' here") == 0);
    rumor_layout_fini(&q);
    rumor_layout_init(&q);
    CHECK(add(&q, "fc1.weight", 2, 64, 784, err) == RUMOR_OK);
    CHECK_MSG(rumor_layout_diff(&l, &q, diff, sizeof diff) && strcmp(diff, "it has 1 tensor, we have 5") == 0, "%s", diff);
    rumor_layout_fini(&q);
    rumor_layout_fini(&l);
    return check_done();
}
