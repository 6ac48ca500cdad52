/*
 * safetensors.h - read and write safetensors files, atomically.
 *
 * Format (as published by Hugging Face): 8-byte little-endian header length N, then N bytes
 * of JSON: an object mapping tensor names to {"dtype", "shape", "data_offsets": [begin, end]}
 * (offsets relative to the byte after the header) plus an optional "__metadata__" object of
 * string -> string; then the data. rumor writes only F32 tensors, but reads any dtype's
 * header so a file of the wrong dtype gets a clear error rather than garbage.
 *
 * The reader trusts nothing: header length bounded (RUMOR_ST_MAX_HEADER) and within the
 * file, JSON well-formed, every tensor's offsets inside the data area, in order, without
 * overlap or gap, and end - begin == dtype size * product(shape) (overflow-checked).
 *
 * The writer puts the file at PATH via PATH.tmp.XXXXXX in the same folder, fsync, rename,
 * then fsyncs the folder: a crash leaves the old file or the new one, never half of one.
 *
 * Non-goals: memory mapping, dtypes other than F32 for writing.
 */
#ifndef RUMOR_SAFETENSORS_H
#define RUMOR_SAFETENSORS_H

#include "base.h"

#include <stddef.h>
#include <stdint.h>

#define RUMOR_ST_MAX_HEADER (16u << 20)
#define RUMOR_ST_MAX_DIMS 8
#define RUMOR_ST_NAME_LEN 128

typedef struct {
    char name[RUMOR_ST_NAME_LEN];
    char dtype[8];                   /* "F32", "F16", ... as in the file */
    int ndim;
    uint64_t shape[RUMOR_ST_MAX_DIMS];
    uint64_t begin, end;             /* byte offsets into the data area */
    const void *data;                /* into the loaded file; not aligned: memcpy out */
} rumor_st_tensor_t;

typedef struct {
    char key[64];
    char value[256];
} rumor_st_meta_t;

/* ---- writing ---- */

/* One tensor to write: F32, `count` elements of `data` in the given shape. */
typedef struct {
    const char *name;
    int ndim;
    uint64_t shape[RUMOR_ST_MAX_DIMS];
    const float *data;
} rumor_st_out_t;

/* Write tensors (in the given order) and metadata atomically to path. */
rumor_err_t rumor_st_write(const char *path, const rumor_st_out_t *tensors, size_t n_tensors,
                           const rumor_st_meta_t *meta, size_t n_meta,
                           char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* ---- reading ---- */

typedef struct rumor_st_file rumor_st_file_t;

/* Read and validate a whole file. Returns NULL and fills err ("<path>: <reason>") on any
 * problem. The caller destroys the result. */
rumor_st_file_t *rumor_st_open(const char *path, char err[RUMOR_ERR_LEN]);
void rumor_st_destroy(rumor_st_file_t **self_p);

size_t rumor_st_count(const rumor_st_file_t *self);
const rumor_st_tensor_t *rumor_st_at(const rumor_st_file_t *self, size_t i);
/* NULL when absent. */
const rumor_st_tensor_t *rumor_st_find(const rumor_st_file_t *self, const char *name);
/* Metadata value or NULL when absent. */
const char *rumor_st_meta(const rumor_st_file_t *self, const char *key);
/* All metadata entries, sorted by key. */
size_t rumor_st_meta_count(const rumor_st_file_t *self);
const rumor_st_meta_t *rumor_st_meta_at(const rumor_st_file_t *self, size_t i);

#endif
