/* fuzz_files.c - libFuzzer target for the loaders of the files a user brings (run by
 * tests/run_fuzz.sh): a text corpus (.txt documents), nanoGPT's token files (train.bin and
 * val.bin), an IDX images/labels pair, and safetensors (models, checkpoints).
 *
 * Input layout:
 *   byte 0      the loader: 0 corpus, 1 token files, 2 IDX pair, 3 safetensors (as a file, then
 *               as labelled data)
 *   bytes 1-2   where the rest is cut in two (little-endian, modulo its length): two
 *               documents, train.bin and val.bin, images and labels
 *   byte 3      a window T = 1 + byte % 64 for the text checks; token files: --vocab is
 *               256 << (byte / 64), so that tokens past it and past 255 both occur
 *   the rest    the files' bytes
 * The files are written to a folder of this process's and loaded as `rumor` loads them. What
 * must hold: a loader answers RUMOR_OK or an error with one line of text (non-empty, no
 * newline); what loaded is consistent (document bounds in order and inside the split, every
 * token below the vocabulary, shards inside the split and together exactly its windows,
 * batches of in-range tokens, IDX labels below the class count, safetensors tensors inside
 * the file). Anything else traps. The seed corpus is tests/fuzz/files/.
 */
#include "data.h"
#include "safetensors.h"
#include "text.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];

static void put(const char *name, const uint8_t *p, size_t n)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0) abort();
}

static void clear(void)
{
    static const char *const names[] = {"a.txt", "b.txt", "train.bin", "val.bin", "img", "lab", "m.safetensors"};
    char path[128];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
}

/* An error is one line of text. */
static void one_line(rumor_err_t rc, const char *err)
{
    if (rc == RUMOR_OK) return;
    if (!err[0] || strchr(err, '\n')) abort();
}

static void check_text(const rumor_text_t *t, int T)
{
    if (t->n_docs < 1 || t->train_at[0] != 0 || t->val_at[0] != 0 || t->train_at[t->n_docs] != t->n_train ||
        t->val_at[t->n_docs] != t->n_val)
        abort();
    for (size_t d = 0; d < t->n_docs; d++)
        if (t->train_at[d] > t->train_at[d + 1] || t->val_at[d] > t->val_at[d + 1]) abort();
    for (size_t i = 0; i < t->n_train; i++)
        if (rumor_text_token(t, false, i) >= t->vocab) abort();
    for (size_t i = 0; i < t->n_val; i++)
        if (rumor_text_token(t, true, i) >= t->vocab) abort();
    /* the validation windows lie inside the split */
    const size_t nv = rumor_text_val_windows(t, T, NULL);
    size_t *starts = malloc((nv ? nv : 1) * sizeof *starts);
    if (!starts) abort();
    rumor_text_val_windows(t, T, starts);
    for (size_t i = 0; i < nv; i++)
        if (starts[i] + (size_t)T + 1 > t->n_val) abort();
    free(starts);
    /* shards of two peers: inside the split, and together exactly the whole split's windows */
    char err[RUMOR_ERR_LEN];
    rumor_text_shard_t all, s[2];
    if (rumor_text_shard(&all, t, NULL, 0, 1, T, err) != RUMOR_OK) {
        one_line(RUMOR_EINVAL, err);
        return;
    }
    static const rumor_partition_t parts[2] = {{.kind = RUMOR_PART_IID}, {.kind = RUMOR_PART_DOCS}};
    for (int p = 0; p < 2; p++) {
        size_t windows = 0;
        bool ok = true;
        for (int r = 0; r < 2; r++) {
            const rumor_err_t rc = rumor_text_shard(&s[r], t, &parts[p], r, 2, T, err);
            one_line(rc, err);
            ok &= rc == RUMOR_OK;
            if (rc != RUMOR_OK) continue;
            windows += s[r].windows;
            for (size_t k = 0; k < s[r].n_seg; k++)
                if (s[r].seg[k].a > s[r].seg[k].b || s[r].seg[k].b > t->n_train) abort();
            if (s[r].windows) {
                int32_t x[2 * 64], y[2 * 64];
                rumor_text_batch(t, &s[r], 1, 7, 2, x, y);
                for (int j = 0; j < 2 * T; j++)
                    if (x[j] < 0 || x[j] >= t->vocab || y[j] < 0 || y[j] >= t->vocab) abort();
            }
        }
        /* docs may give one peer nothing (then it is an error); iid cuts every document */
        if (ok && p == 0 && windows > all.windows) abort();
        if (ok && p == 1 && windows != all.windows) abort();
        for (int r = 0; r < 2; r++) rumor_text_shard_fini(&s[r]);
    }
    rumor_text_shard_fini(&all);
}

static void remove_dir(void)
{
    clear();
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/rumor-fuzz-files-XXXXXX");
        if (!mkdtemp(dir)) abort();
        atexit(remove_dir);
    }
    if (size < 4) return 0;
    const int mode = data[0] % 4;
    const size_t rest = size - 4, cut = rest ? (size_t)(data[1] | data[2] << 8) % (rest + 1) : 0;
    const int T = 1 + data[3] % 64, vocab = 256 << (data[3] / 64);
    const uint8_t *a = data + 4, *b = a + cut;
    const size_t na = cut, nb = rest - cut;
    char err[RUMOR_ERR_LEN] = "";
    clear();
    switch (mode) {
    case 0:
    case 1: {
        if (mode == 0) put("a.txt", a, na), put("b.txt", b, nb);
        else put("train.bin", a, na), put("val.bin", b, nb);
        rumor_text_t t;
        const rumor_err_t rc = rumor_text_load(&t, dir, mode == 0 ? 0 : vocab, err);
        one_line(rc, err);
        if (rc == RUMOR_OK) {
            check_text(&t, T);
            rumor_text_fini(&t);
        }
        break;
    }
    case 2: {
        put("img", a, na), put("lab", b, nb);
        char ip[128], lp[128];
        snprintf(ip, sizeof ip, "%s/img", dir);
        snprintf(lp, sizeof lp, "%s/lab", dir);
        rumor_dataset_t ds;
        const rumor_err_t rc = rumor_data_load_pair(&ds, ip, lp, err);
        one_line(rc, err);
        if (rc == RUMOR_OK) {
            if (!ds.count || !ds.rows || !ds.cols) abort();
            for (size_t i = 0; i < ds.count; i++)
                if (ds.labels[i] >= RUMOR_DATA_CLASSES) abort();
            float mean, sd;
            rumor_data_stats(&ds, &mean, &sd);
            if (!(sd > 0.0f) || mean < 0.0f || mean > 1.0f) abort();
            rumor_dataset_fini(&ds);
        }
        break;
    }
    default: {
        put("m.safetensors", a, rest);
        char path[128];
        snprintf(path, sizeof path, "%s/m.safetensors", dir);
        rumor_st_file_t *f = rumor_st_open(path, err);
        one_line(f ? RUMOR_OK : RUMOR_EFORMAT, err);
        if (f) {
            for (size_t i = 0; i < rumor_st_count(f); i++) {
                const rumor_st_tensor_t *t = rumor_st_at(f, i);
                if (!t || rumor_st_find(f, t->name) != t) abort();
            }
            rumor_st_destroy(&f);
        }
        /* ... and as labelled data (train.x, train.y, test.x, test.y) */
        rumor_dataset_t tr, te;
        const rumor_err_t rc = rumor_data_load_dir(&tr, &te, path, err);
        one_line(rc, err);
        if (rc == RUMOR_OK) {
            if (tr.classes < 2 || tr.classes != te.classes || rumor_data_feat(&tr) != rumor_data_feat(&te)) abort();
            for (size_t i = 0; i < tr.count; i++)
                if (tr.labels[i] >= tr.classes) abort();
            float mean, sd;
            rumor_data_stats(&tr, &mean, &sd);
            if (!(sd > 0.0f) || !isfinite(mean)) abort();
            rumor_dataset_fini(&tr);
            rumor_dataset_fini(&te);
        }
        break;
    }
    }
    return 0;
}
