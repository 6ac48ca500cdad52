/*
 * checkpoint.h - models and training state in safetensors files.
 *
 * An exported model holds the model's tensors under PyTorch's names, so
 * `model.load_state_dict(...)` takes them (tools/safetensors_torch.py reads the file), and
 * __metadata__ with: format "rumor", model (canonical spec), input "C,H,W", classes,
 * layout_id (16 hex digits), input_mean and input_std (x = (pixel/255 - mean) / std), and
 * for a gpt model tokens: "bytes" (a corpus of .txt documents) or "ids" (token files; a file
 * without the entry is of ids unless its vocabulary is 256).
 * A checkpoint adds the optimizer state per tensor ("optim.momentum.fc1.weight", or
 * exp_avg / exp_avg_sq for AdamW) and metadata optimizer, step, epoch, seed.
 * Files are written atomically (safetensors.h); loading checks every tensor's name, dtype
 * and shape against the model and fails with RUMOR_ELAYOUT on any disagreement.
 */
#ifndef RUMOR_CHECKPOINT_H
#define RUMOR_CHECKPOINT_H

#include "model.h"
#include "optim.h"
#include "base.h"
#include "safetensors.h"

#include <stdbool.h>

#define RUMOR_CHECKPOINT_EXTRA 48
#define RUMOR_CHECKPOINT_TENSORS 4

typedef struct {
    float input_mean, input_std;
    long step;          /* optimizer steps taken (checkpoints) */
    int epoch;          /* completed epochs (checkpoints) */
    uint64_t seed;      /* run seed (checkpoints) */
    bool has_optim;     /* file holds optimizer state */
    bool tokens_stated; /* a gpt model's file says whether it reads bytes or ids (else in.ids
                           is a guess from its vocabulary: files from before the entry) */
    rumor_opt_kind_t optim_kind;
    /* Further metadata whose keys start with "train." (the run's settings, owned by
     * train.c): written as given, read back when present. */
    rumor_st_meta_t extra[RUMOR_CHECKPOINT_EXTRA];
    int n_extra;
    /* Further tensors to save after the model's (a node's gossip state, "gossip.*"); save
     * only, at most RUMOR_CHECKPOINT_TENSORS. Loading ignores tensors it does not ask for. */
    const rumor_st_out_t *tensors;
    size_t n_tensors;
} rumor_checkpoint_info_t;

/* The value of an extra entry, or NULL. */
const char *rumor_checkpoint_extra(const rumor_checkpoint_info_t *info, const char *key);
/* Add an extra entry (key, printf value), or replace the value of the entry with that key;
 * beyond RUMOR_CHECKPOINT_EXTRA entries a new one is dropped. */
void rumor_checkpoint_extra_add(rumor_checkpoint_info_t *info, const char *key, const char *fmt, ...) RUMOR_PRINTF(3, 4);
/* An extra entry that is a decimal integer in [lo, hi]: true and *out, else false. */
bool rumor_checkpoint_extra_long(const rumor_checkpoint_info_t *info, const char *key, long lo, long hi, long *out);

/* Write m's parameters, and o's state when o is not NULL, with info, atomically. */
rumor_err_t rumor_checkpoint_save(const char *path, rumor_model_t *m, rumor_optim_t *o,
                                  const rumor_checkpoint_info_t *info,
                                  char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* Read only what is needed to build the model: spec, input shape, info. */
rumor_err_t rumor_checkpoint_peek(const char *path, rumor_model_spec_t *spec,
                                  rumor_model_input_t *in, rumor_checkpoint_info_t *info,
                                  char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* Load parameters into m, and optimizer state into o when o is not NULL (then the file must
 * hold state for the same optimizer). info may be NULL. Nothing is modified on failure. */
rumor_err_t rumor_checkpoint_load(const char *path, rumor_model_t *m, rumor_optim_t *o,
                                  rumor_checkpoint_info_t *info, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

#endif
