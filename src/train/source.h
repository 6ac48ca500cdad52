/*
 * source.h - what a peer trains on and is judged by: labelled images (data.h) or text (text.h).
 *
 * One place that knows both kinds, so that a training run needs no branch on them: loading a
 * folder (text when the model is a gpt model), a peer's shard, the model's input shape, the
 * trainer's configuration, and evaluation (test accuracy and loss for images; for text the
 * validation loss in nats per token, and the share of next tokens predicted exactly).
 */
#ifndef RUMOR_SOURCE_H
#define RUMOR_SOURCE_H

#include "data.h"
#include "model.h"
#include "base.h"
#include "text.h"
#include "trainer.h"

#include <stdbool.h>
#include <stddef.h>

/* A peer's part of the training split. */
typedef struct {
    size_t n;                     /* its samples; text: its tokens */
    size_t examples;              /* DP-SGD's examples: its samples, or its windows of T+1 tokens */
    size_t *own;                  /* images: its samples (NULL: all n) */
    rumor_text_shard_t text;      /* text: its segments */
} rumor_source_shard_t;

typedef struct {
    bool text;
    /* images */
    rumor_dataset_t train, test;
    float mean, std;              /* of the training images (x = (p/255 - mean) / std); text: 0, 1 */
    /* text */
    rumor_text_t corpus;
    size_t *val;                  /* validation windows' starts, n_val of them */
    size_t n_val;
    int T;                        /* the model's context: windows of T+1 tokens */
    rumor_source_shard_t shard;   /* the configured peer's */
} rumor_source_t;

typedef struct {
    const char *dir;
    const rumor_model_spec_t *spec; /* a gpt model takes text, the others images */
    int vocab;                    /* token files' vocabulary; 0: the default */
    size_t limit;                 /* images: the first `limit` training samples; 0: all */
    const rumor_partition_t *partition; /* NULL: the whole training split */
    int rank, peers;
    uint64_t seed;                /* of the partition */
    bool eval;                    /* load what evaluation needs (the test set) */
} rumor_source_config_t;

/* Load dir as cfg says. Errors as data.h's and text.h's loaders (one sentence, naming the file),
 * and EINVAL for a shard without samples. On failure *src is left empty. */
rumor_err_t rumor_source_load(rumor_source_t *src, const rumor_source_config_t *cfg,
                              char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
void rumor_source_fini(rumor_source_t *src);

/* Peer rank of peers' shard of src's training split under part (NULL: all of it), as
 * rumor_source_load makes src->shard; for a simulated swarm that loads its data once. Errors
 * as rumor_source_load's. */
rumor_err_t rumor_source_shard(const rumor_source_t *src, rumor_source_shard_t *sh, const rumor_partition_t *part,
                               int rank, int peers, uint64_t seed, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
void rumor_source_shard_fini(rumor_source_shard_t *sh);
/* EINVAL, saying so, for a shard without a sample (a node cannot train on it). */
rumor_err_t rumor_source_shard_owned(const rumor_source_shard_t *sh, int rank, int peers,
                                     char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* The input of a model that learns from src ({1, H, W, 10} for images, {1, 1, T, V} for text). */
rumor_model_input_t rumor_source_input(const rumor_source_t *src, const rumor_model_spec_t *spec);
/* The part of a trainer's configuration that says what it trains on: shard sh of src (NULL:
 * src->shard). src and sh must outlive the trainer (images with tc->cache: only its creation). */
void rumor_source_trainer(const rumor_source_t *src, const rumor_source_shard_t *sh, rumor_trainer_config_t *tc);
/* Mean loss and accuracy of m over the test set, or over the validation windows (nats per
 * token, and the share of tokens predicted). m's max batch sets the batches. */
rumor_err_t rumor_source_evaluate(const rumor_source_t *src, rumor_model_t *m, double *loss, double *acc,
                                  char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

#endif
