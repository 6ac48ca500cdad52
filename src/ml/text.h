/*
 * text.h - text for language models: a corpus of documents, or token files.
 *
 * A corpus is a folder of `.txt` files, each file a document and each byte a token
 * (vocabulary 256: any language and any encoding, with no tokenizer file). A document's last
 * tenth, floor(len / 10) bytes, is its validation part; the rest its training part. Files are
 * taken in the byte order of their names; other files in the folder are ignored.
 *
 * Token files are nanoGPT's: a folder with train.bin and val.bin, uint16 little-endian tokens,
 * each below the vocabulary (--vocab, default 50304). They are mapped, not read into memory
 * (loading reads every token once, to check it), so peers on one machine share the pages; each
 * file is one document.
 *
 * Training samples are windows of T+1 tokens inside one document's training part (inside a
 * segment of a shard): x its first T tokens, y its last T. Validation reads each validation
 * part in windows of T+1 tokens that start T apart, so that every token after a part's first is
 * predicted exactly once; a final partial window is dropped. The validation loss is the mean
 * next-token cross-entropy (nats) over those predictions: what `rumor eval`, metrics and
 * summaries report.
 *
 * Shards (the partitions of data.h that text takes): `docs` gives each peer whole documents,
 * balanced by training tokens (largest first, each to the peer with the fewest so far; the same
 * whatever the seed); `iid` cuts every document's training part into `peers` contiguous slices
 * and gives slice r to peer r (token files: train.bin in equal contiguous slices). dirichlet and
 * shards are for labelled data. Every training token belongs to exactly one shard.
 */
#ifndef RUMOR_TEXT_H
#define RUMOR_TEXT_H

#include "data.h"
#include "base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RUMOR_TEXT_VOCAB_BYTES 256
#define RUMOR_TEXT_VOCAB_DEFAULT 50304 /* token files: GPT-2's 50257, padded as nanoGPT pads it */
#define RUMOR_TEXT_VOCAB_MAX 65536     /* uint16 tokens */

typedef struct rumor_text {
    int vocab;
    int width;                   /* bytes a token: 1 (a corpus) or 2 (token files) */
    const uint8_t *train, *val;  /* n_train and n_val tokens of `width` bytes each */
    size_t n_train, n_val;
    size_t n_docs;
    size_t *train_at, *val_at;   /* n_docs + 1 each: document d's training part is tokens
                                    [train_at[d], train_at[d + 1]) of train; likewise val */
    /* storage */
    uint8_t *bytes;              /* a corpus: both splits, read */
    void *map[2];                /* token files: train.bin and val.bin, read (a private copy) */
    size_t map_len[2];
} rumor_text_t;

/* Whether dir holds text: a .txt file, or train.bin. */
bool rumor_text_is_text(const char *dir);
/* Whether dir holds token files (train.bin), whose tokens are a tokenizer's ids, not bytes. */
bool rumor_text_is_tokens(const char *dir);

/* Load the corpus or token files in dir; vocab is for token files (0: the default) and must
 * be 256 or nothing for a corpus. On failure *t is left empty and err says which file and why
 * ("DIR: no .txt documents and no train.bin", "train.bin: 1001 bytes, not a whole number of
 * uint16 tokens", "val.bin: token 50310 at 7 is not below --vocab 50304"). */
rumor_err_t rumor_text_load(rumor_text_t *t, const char *dir, int vocab, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
void rumor_text_fini(rumor_text_t *t);

/* Token i of the training (val false) or validation split. */
static inline int rumor_text_token(const rumor_text_t *t, bool val, size_t i)
{
    const uint8_t *p = (val ? t->val : t->train) + i * (size_t)t->width;
    return t->width == 1 ? p[0] : p[0] | p[1] << 8;
}

/* A peer's part of the training split, for windows of T+1 tokens. */
typedef struct rumor_text_shard {
    size_t n_seg;
    struct rumor_text_seg {
        size_t a, b;             /* tokens [a, b) of the training split */
        size_t first;            /* windows of the segments before this one */
    } *seg;
    size_t tokens;               /* in all the segments */
    size_t windows;              /* starts of a window of T+1 tokens inside one segment */
    int T;
    int rank;                    /* whose: peers draw their windows from streams of their own */
} rumor_text_shard_t;

/* Peer rank of peers' shard under part (NULL: the whole training split), for windows of T+1
 * tokens. EINVAL with one sentence: a partition text does not take, more peers than documents
 * under docs, a shard without a single window ("peer 3's shard has no window of 65 tokens: its
 * documents are shorter"). */
rumor_err_t rumor_text_shard(rumor_text_shard_t *s, const rumor_text_t *t, const rumor_partition_t *part,
                             int rank, int peers, int T, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
void rumor_text_shard_fini(rumor_text_shard_t *s);

/* Where window i (< s->windows) of the shard starts, in the training split. */
size_t rumor_text_window(const rumor_text_shard_t *s, size_t i);

/* A batch of b windows drawn uniformly from the shard by (seed, the shard's rank, step), the
 * same for the same arguments (peers of one seed draw independently): x[b][T] the inputs, y[b][T] the next tokens. */
void rumor_text_batch(const rumor_text_t *t, const rumor_text_shard_t *s, uint64_t seed, uint64_t step, int b,
                      int32_t *x, int32_t *y);

/* Windows pos[0..k) of the shard (each < s->windows): x[k][T] the inputs, y[k][T] the next
 * tokens. DP-SGD's examples are these windows. */
void rumor_text_windows(const rumor_text_t *t, const rumor_text_shard_t *s, const size_t *pos, size_t k, int32_t *x,
                        int32_t *y);

/* The validation windows of T+1 tokens: their count, and their starts into starts (NULL:
 * count only). */
size_t rumor_text_val_windows(const rumor_text_t *t, int T, size_t *starts);

#endif
