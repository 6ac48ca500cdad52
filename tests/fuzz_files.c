/* fuzz_files.c - libFuzzer target for the loaders of the files a user brings (run by
 * tests/run_fuzz.sh): a text corpus (.txt documents), nanoGPT's token files (train.bin and
 * val.bin), an IDX images/labels pair, safetensors (models, checkpoints), and rumor's
 * checkpoints and models (checkpoint.c: their metadata, then their tensors).
 *
 * Input layout:
 *   byte 0      the loader: 0 corpus, 1 token files, 2 IDX pair, 3 safetensors (as a file, then
 *               as labelled data), 4 a checkpoint (byte % 5)
 *   bytes 1-2   where the rest is cut in two (little-endian, modulo its length): two
 *               documents, train.bin and val.bin, images and labels; a checkpoint: byte 1 is
 *               how it is loaded (CK_* below), byte 2 unused
 *   byte 3      a window T = 1 + byte % 64 for the text checks; token files: --vocab is
 *               256 << (byte / 64), so that tokens past it and past 255 both occur
 *   the rest    the files' bytes
 * The files are written to a folder of this process's and loaded as `rumor` loads them. What
 * must hold: a loader answers RUMOR_OK or an error with one line of text (non-empty, no
 * newline); what loaded is consistent (document bounds in order and inside the split, every
 * token below the vocabulary, shards inside the split and together exactly its windows,
 * batches of in-range tokens, IDX labels below the class count, safetensors tensors inside
 * the file). A checkpoint is peeked at, then loaded into the model its metadata describes
 * (when small) or, when the peek refused it, into a small fixed one: a refusal starts with the
 * file's name, peek and load refuse the same metadata with the same words, a refused load
 * leaves the model and optimizer as they were, a model of other classes or an optimizer of
 * another kind is refused, and a load that succeeds gives back the file's tensors exactly and
 * the metadata the peek read. Anything else traps. The seed corpus is tests/fuzz/files/ (the
 * ckpt-* seeds are written by `test_checkpoint --write-corpus DIR`).
 */
#include "checkpoint.h"
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

/* A checkpoint's load (byte 1): without an optimizer; with an optimizer of the kind after the
 * file's; with gradient tracking (two more states); into a model of one class more. */
enum { CK_NO_OPTIM = 1, CK_OTHER_OPTIM = 2, CK_TRACKING = 4, CK_MORE_CLASSES = 8 };

/* Floats a model of this spec and input would take (parameters, gradients and a batch of
 * one's workspace), over-estimated: the fuzzer builds small models only, as an input of at most
 * -max_len bytes cannot hold a large one's tensors anyway. */
static double model_floats(const rumor_model_spec_t *s, rumor_model_input_t in)
{
    const double feat = (double)in.c * in.h * in.w, V = in.classes;
    double n;
    if (s->kind == RUMOR_MODEL_MLP) {
        double prev = feat;
        n = feat;
        for (int i = 0; i < s->n_hidden; i++) {
            n += (prev + 3) * s->hidden[i];
            prev = s->hidden[i];
        }
        n += (prev + 3) * V;
    } else if (s->kind == RUMOR_MODEL_CNN) {
        const double c1 = s->hidden[0], c2 = s->hidden[1];
        n = 25 * c1 * (in.c + c2) + (double)in.h * in.w * (26 * in.c + 40 * c1 + 8 * c2 + V * c2);
    } else {
        const double L = s->layers, H = s->heads, D = s->dim, T = s->ctx;
        n = (V + T) * D + L * (12 * D * D + 13 * D) + L * T * (16 * D + 2 * H * T) + 4 * T * V + 16 * T * D;
    }
    return 2 * n;
}

/* A refusal names the file first: "<path>: ...", on one line. */
static void names_file(rumor_err_t rc, const char *err, const char *path)
{
    one_line(rc, err);
    if (rc != RUMOR_OK && (strncmp(err, path, strlen(path)) != 0 || err[strlen(path)] != ':')) abort();
}

static bool same_info(const rumor_checkpoint_info_t *a, const rumor_checkpoint_info_t *b)
{
    bool same = a->step == b->step && a->epoch == b->epoch && a->seed == b->seed && a->has_optim == b->has_optim &&
                a->tokens_stated == b->tokens_stated && a->optim_kind == b->optim_kind &&
                memcmp(&a->input_mean, &b->input_mean, sizeof(float)) == 0 &&
                memcmp(&a->input_std, &b->input_std, sizeof(float)) == 0 && a->n_extra == b->n_extra;
    for (int i = 0; same && i < a->n_extra; i++)
        same = strcmp(a->extra[i].key, b->extra[i].key) == 0 && strcmp(a->extra[i].value, b->extra[i].value) == 0;
    return same;
}

/* buf (n floats, in m's layout) holds the file's tensor "<prefix><name>" for each of m's
 * tensors, bit for bit, and +0 in the padding between them. */
static void holds_file(const rumor_st_file_t *f, rumor_model_t *m, const float *buf, size_t n, const char *prefix)
{
    unsigned char *covered = calloc(n ? n : 1, 1);
    if (!covered) abort();
    for (int i = 0; i < rumor_model_tensor_count(m); i++) {
        const rumor_tensor_info_t *t = rumor_model_tensor(m, i);
        char name[RUMOR_ST_NAME_LEN];
        snprintf(name, sizeof name, "%s%s", prefix, t->name);
        const rumor_st_tensor_t *st = rumor_st_find(f, name);
        if (!st || st->end - st->begin != t->count * sizeof(float) || t->offset + t->count > n ||
            memcmp(buf + t->offset, st->data, t->count * sizeof(float)) != 0)
            abort();
        memset(covered + t->offset, 1, t->count);
    }
    const float zero = 0.0f;
    for (size_t i = 0; i < n; i++)
        if (!covered[i] && memcmp(&buf[i], &zero, sizeof zero) != 0) abort();
    free(covered);
}

static void check_checkpoint(const char *path, unsigned flags)
{
    static rumor_backend_t *be; /* one for the process: kept, so never a leak */
    char err[RUMOR_ERR_LEN] = "", lerr[RUMOR_ERR_LEN] = "";
    if (!be && !(be = rumor_backend_new("cpu", 1, err))) abort();
    rumor_model_spec_t spec;
    rumor_model_input_t in;
    rumor_checkpoint_info_t peeked, info;
    const rumor_err_t prc = rumor_checkpoint_peek(path, &spec, &in, &peeked, err);
    names_file(prc, err, path);
    if (prc != RUMOR_OK) {
        /* The load reads the same metadata first: it must refuse it the same way, whatever
         * the model. */
        if (rumor_model_spec_parse(&spec, "logreg", lerr) != RUMOR_OK) abort();
        in = (rumor_model_input_t){.c = 1, .h = 2, .w = 2, .classes = 3};
        memset(&peeked, 0, sizeof peeked);
    } else if (flags & CK_MORE_CLASSES) {
        in.classes++;
    }
    if (model_floats(&spec, in) > (double)(1 << 21)) return;
    rumor_model_t *m = rumor_model_new(&spec, in, be, 1, lerr);
    if (!m) {
        one_line(RUMOR_EINVAL, lerr);
        return;
    }
    rumor_optim_config_t oc = rumor_optim_defaults();
    oc.kind = peeked.has_optim ? peeked.optim_kind : RUMOR_OPT_SGD;
    if (flags & CK_OTHER_OPTIM) oc.kind = (rumor_opt_kind_t)((oc.kind + 1) % 4);
    oc.tracking = flags & CK_TRACKING;
    rumor_optim_t *o = flags & CK_NO_OPTIM ? NULL : rumor_optim_new(&oc, be, rumor_model_param_count(m), lerr);
    if (!(flags & CK_NO_OPTIM) && !o) abort();
    /* Every float set to a value no load writes, and kept, to see that a refusal changes none. */
    const size_t n = rumor_model_param_count(m);
    const int ns = o ? rumor_optim_state_count(o) : 0;
    float *before = malloc((size_t)(1 + ns) * n * sizeof(float) + 1);
    if (!before) abort();
    for (int s = 0; s < 1 + ns; s++) {
        float *buf = s == 0 ? rumor_model_params(m) : rumor_optim_state(o, s - 1);
        for (size_t i = 0; i < n; i++) buf[i] = 1000.0f * (float)(s + 1) + (float)i;
        memcpy(before + (size_t)s * n, buf, n * sizeof(float));
    }
    if (o) rumor_optim_set_steps(o, 7);
    const rumor_err_t rc = rumor_checkpoint_load(path, m, o, &info, lerr);
    names_file(rc, lerr, path);
    if (prc != RUMOR_OK && (rc != prc || strcmp(err, lerr) != 0)) abort();
    /* what must be refused */
    const bool other_model = prc == RUMOR_OK && (flags & CK_MORE_CLASSES);
    const bool other_optim = o && (!peeked.has_optim || oc.kind != peeked.optim_kind);
    if (rc == RUMOR_OK && (other_model || other_optim)) abort();
    if (rc != RUMOR_OK) {
        for (int s = 0; s < 1 + ns; s++)
            if (memcmp(s == 0 ? rumor_model_params(m) : rumor_optim_state(o, s - 1), before + (size_t)s * n,
                       n * sizeof(float)) != 0)
                abort();
        if (o && rumor_optim_steps(o) != 7) abort();
    } else {
        if (!same_info(&info, &peeked) || (o && rumor_optim_steps(o) != info.step)) abort();
        rumor_st_file_t *f = rumor_st_open(path, err);
        if (!f) abort();
        holds_file(f, m, rumor_model_params(m), n, "");
        for (int s = 0; s < ns; s++) {
            char prefix[64];
            snprintf(prefix, sizeof prefix, "optim.%s.", rumor_optim_state_name(o, s));
            holds_file(f, m, rumor_optim_state(o, s), n, prefix);
        }
        rumor_st_destroy(&f);
    }
    free(before);
    rumor_optim_destroy(&o);
    rumor_model_destroy(&m);
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
    const int mode = data[0] % 5;
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
    case 4: {
        put("m.safetensors", a, rest);
        char path[128];
        snprintf(path, sizeof path, "%s/m.safetensors", dir);
        check_checkpoint(path, data[1]);
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
