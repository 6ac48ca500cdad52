/*
 * layout.h - a model's parameters as named tensors in one flat float32 buffer, and what two
 * programs must agree on to mix them: the names and shapes, in order. Each tensor starts at a
 * multiple of RUMOR_LAYOUT_ALIGN floats (the padding is zero), the rule rumor's own models
 * follow, so a table of a caller's own tensors and a built-in model with the same names and
 * shapes lie alike in memory.
 *
 * The canonical text of a layout is "rumor-layout-2\n" and then one line "NAME:D0,D1,...\n"
 * per tensor, in order (a scalar: "NAME:\n"); its id is FNV-1a 64 of that text: an agreement
 * check between honest peers, not a defence (certificates admit). The text travels when two
 * peers disagree, so that each can name the first tensor that differs; the parser takes only
 * canonical text, and bounds everything it reads.
 *
 * Pure: no I/O, no BLAS.
 */
#ifndef RUMOR_LAYOUT_H
#define RUMOR_LAYOUT_H

#include "base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RUMOR_LAYOUT_ALIGN 16            /* floats */
#define RUMOR_LAYOUT_MAX_TENSORS 65536
#define RUMOR_LAYOUT_MAX_DIMS 8
#define RUMOR_LAYOUT_NAME_MAX 200        /* bytes of [A-Za-z0-9_./-] */
#define RUMOR_LAYOUT_MAX_DIM 2147483647  /* each dimension 1 .. 2^31 - 1 */
#define RUMOR_LAYOUT_MAX_FLOATS (UINT64_C(1) << 40)

typedef struct {
    char name[RUMOR_LAYOUT_NAME_MAX + 1];
    int ndim;
    uint64_t shape[RUMOR_LAYOUT_MAX_DIMS];
    uint64_t offset, count;              /* in floats */
} rumor_layout_tensor_t;

typedef struct {
    rumor_layout_tensor_t *t;
    int n, cap;
    uint64_t total;                      /* floats in the buffer, padding included */
} rumor_layout_t;

/* An empty layout; fini frees what add made (init again to reuse). */
void rumor_layout_init(rumor_layout_t *l);
void rumor_layout_fini(rumor_layout_t *l);

/* Append tensor name of ndim dimensions: RUMOR_EINVAL with err naming the tensor and what it
 * breaks (the name's characters or length, a dimension of 0 or past 2^31 - 1, more than 8
 * dimensions, a name given twice, more than 65,536 tensors, more than 2^40 floats in all);
 * RUMOR_ENOMEM. A tensor of no elements is refused: there is nothing to mix. */
rumor_err_t rumor_layout_add(rumor_layout_t *l, const char *name, int ndim, const uint64_t *shape,
                             char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* The canonical text into buf[0..cap) (NUL-terminated when it fits); returns its length, as
 * snprintf does: a cap of 0 asks for the length. */
size_t rumor_layout_text(const rumor_layout_t *l, char *buf, size_t cap);
/* FNV-1a 64 of the canonical text. */
uint64_t rumor_layout_id(const rumor_layout_t *l);

/* A layout from its canonical text (len bytes, not NUL-terminated necessarily) into l (an
 * empty one): RUMOR_EFORMAT with err saying at which line what is wrong, for anything but the
 * canonical text of a valid layout; RUMOR_ENOMEM. */
rumor_err_t rumor_layout_parse(rumor_layout_t *l, const char *text, size_t len,
                               char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* Whether ours and theirs differ; when they do, the first difference as a sentence in buf:
 * "tensor 3 'fc1.weight' is [256, 784] there and [128, 784] here", "tensor 0 is 'fc1.weight'
 * there and 'conv1.weight' here", "it has 6 tensors, we have 4". */
bool rumor_layout_diff(const rumor_layout_t *ours, const rumor_layout_t *theirs, char *buf, size_t cap);

#endif
