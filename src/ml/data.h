/*
 * data.h - labelled datasets and peer partitions: MNIST-format IDX folders (Fashion-MNIST by
 * default), or one safetensors file of one's own.
 *
 * An IDX folder holds the four standard files, each gzip-compressed or plain (the loader tries
 * NAME then NAME.gz): train-images-idx3-ubyte, train-labels-idx1-ubyte,
 * t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte. Every header field is checked before use:
 * magic (0x00000803 images, 0x00000801 labels), dimensions (non-zero, at most 4096 per side,
 * total bytes bounded), exact file length (truncated or trailing bytes are errors),
 * label/image count agreement, labels < RUMOR_DATA_CLASSES. Errors read
 * "<file>: <reason>" in err; the CLI prints them as `rumor: error: ...` and exits 2.
 *
 * Pixels stay as bytes (a quarter of the memory of floats, which matters when many peers
 * share one machine); rumor_data_gather() normalises while it copies a batch, so the
 * conversion costs no extra pass. Normalisation: x = (p/255 - mean) / std, with mean and std
 * of the training images (rumor_data_stats), recorded in exported models.
 *
 * A safetensors file (`--data FILE.safetensors`) holds four tensors: train.x, train.y, test.x,
 * test.y. x is uint8 (U8, scaled by 1/255 as IDX pixels are) or float32 (F32, finite), shaped
 * [N, F] (features), [N, H, W] or [N, C, H, W] (images); y is one integer label per sample
 * (any integer dtype), each in 0..255. Both splits have the same sample shape and dtype. The
 * classes are the largest label + 1 (metadata "classes" may say more). From numpy:
 *     from safetensors.numpy import save_file
 *     save_file({"train.x": xtr, "train.y": ytr, "test.x": xte, "test.y": yte}, "my.safetensors")
 * Models take their input shape and classes from the data and record them in exports.
 *
 * Non-goals: augmentation, other formats, more than 256 classes.
 */
#ifndef RUMOR_DATA_H
#define RUMOR_DATA_H

#include "base.h"

#include <stddef.h>
#include <stdint.h>

#define RUMOR_DATA_CLASSES 10      /* IDX data's (MNIST's and Fashion-MNIST's) */
#define RUMOR_DATA_MAX_CLASSES 256 /* labels are bytes */

typedef struct {
    size_t count;    /* samples */
    size_t channels; /* a sample is channels x rows x cols values (IDX: 1 x rows x cols; */
    size_t rows;     /* features of a safetensors [N, F]: 1 x 1 x F) */
    size_t cols;
    int classes;     /* labels are below it */
    uint8_t *pixels; /* count * feat bytes, sample-major, scaled by 1/255; owned; or NULL ... */
    float *values;   /* ... count * feat floats, as given; owned */
    uint8_t *labels; /* count; owned; each < classes */
} rumor_dataset_t;

/* Values a sample: channels * rows * cols. */
static inline size_t rumor_data_feat(const rumor_dataset_t *ds) { return ds->channels * ds->rows * ds->cols; }

/* Load one images/labels pair. On success *out owns its buffers (rumor_dataset_fini).
 * On failure *out is left empty and err says which file and why. */
rumor_err_t rumor_data_load_pair(rumor_dataset_t *out, const char *images_path,
                                 const char *labels_path, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* Load the training and test sets of path: an IDX folder, or a file whose name ends in
 * .safetensors. Either output may be NULL to skip that split. Both splits must have the same
 * sample shape; both get the same classes. */
rumor_err_t rumor_data_load_dir(rumor_dataset_t *train, rumor_dataset_t *test, const char *dir,
                                char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

void rumor_dataset_fini(rumor_dataset_t *ds);

/* Mean and standard deviation of all values (pixels scaled to [0, 1]; population std; 1 if
 * zero). */
void rumor_data_stats(const rumor_dataset_t *ds, float *mean, float *std);

/* Copy samples idx[0..n) into x (n * feat floats, normalised) and y (n labels). */
void rumor_data_gather(const rumor_dataset_t *ds, const size_t *idx, size_t n, float mean,
                       float std, float *x, int32_t *y);

/* ---- partitions: which samples of a shared dataset belong to peer `rank` of `peers` ----
 *
 * Deterministic from (seed, rank, peers, labels): every peer computes the same global
 * assignment and keeps its own slice, so no coordination is needed, and every sample
 * belongs to exactly one peer.
 *   iid            a seeded shuffle cut into `peers` nearly equal parts
 *   dirichlet:A    label skew: for each class, proportions over peers ~ Dir(A) (A > 0;
 *                  small A, strong skew)
 *   shards:K       sort by label, cut into peers*K shards, deal K random shards to each
 *                  peer (about K classes per peer)
 *   docs           whole documents of a text corpus (text.h); refused here
 */
typedef enum { RUMOR_PART_IID, RUMOR_PART_DIRICHLET, RUMOR_PART_SHARDS, RUMOR_PART_DOCS } rumor_part_kind_t;

typedef struct {
    rumor_part_kind_t kind;
    double alpha; /* dirichlet */
    int shards;   /* shards per peer */
} rumor_partition_t;

rumor_err_t rumor_partition_parse(rumor_partition_t *out, const char *spec,
                                  char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* The canonical text of a partition ("iid", "dirichlet:0.5", "shards:2"); parses back to
 * the same partition. */
void rumor_partition_format(char *buf, size_t len, const rumor_partition_t *part);

/* The indices (ascending) of the samples owned by `rank`; labels are below `classes` (at most
 * RUMOR_DATA_MAX_CLASSES). *idx is malloc'd; caller frees. A peer may own zero samples under
 * extreme skew (then *count is 0 and *idx may be NULL). */
rumor_err_t rumor_partition_indices(size_t **idx, size_t *count, const rumor_partition_t *part,
                                    const uint8_t *labels, int classes, size_t n_samples, uint64_t seed,
                                    int rank, int peers, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

#endif
