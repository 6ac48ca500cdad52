/* source.c - labelled images or text behind one interface (source.h). */
#include "source.h"

#include "train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static rumor_err_t load_text(rumor_source_t *src, const rumor_source_config_t *cfg, char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc = rumor_text_load(&src->corpus, cfg->dir, cfg->vocab, err);
    if (rc != RUMOR_OK || !cfg->eval) return rc;
    const int T = src->T;
    src->n_val = rumor_text_val_windows(&src->corpus, T, NULL);
    if (src->n_val == 0)
        return rumor_fail(err, RUMOR_EINVAL, "%s: no validation window of %d tokens (each document's last tenth is "
                          "shorter)", cfg->dir, T + 1);
    if (!(src->val = malloc(src->n_val * sizeof *src->val))) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    rumor_text_val_windows(&src->corpus, T, src->val);
    return RUMOR_OK;
}

static rumor_err_t load_images(rumor_source_t *src, const rumor_source_config_t *cfg, char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc = rumor_data_load_dir(&src->train, cfg->eval ? &src->test : NULL, cfg->dir, err);
    if (rc != RUMOR_OK) return rc;
    rumor_data_stats(&src->train, &src->mean, &src->std);
    if (cfg->limit && cfg->limit < src->train.count) src->train.count = cfg->limit;
    return RUMOR_OK;
}

rumor_err_t rumor_source_load(rumor_source_t *src, const rumor_source_config_t *cfg, char err[RUMOR_ERR_LEN])
{
    memset(src, 0, sizeof *src);
    src->text = cfg->spec->kind == RUMOR_MODEL_GPT;
    src->T = cfg->spec->ctx;
    src->mean = 0.0f, src->std = 1.0f; /* tokens are not normalised; images get their own below */
    /* Settings of the other kind of data are refused, not ignored. */
    if (src->text && cfg->limit)
        return rumor_fail(err, RUMOR_EINVAL, "--limit %zu: for labelled data (a gpt model takes all of its text)",
                          cfg->limit);
    if (!src->text && cfg->vocab)
        return rumor_fail(err, RUMOR_EINVAL, "--vocab %d: for gpt models on token files", cfg->vocab);
    rumor_err_t rc = src->text ? load_text(src, cfg, err) : load_images(src, cfg, err);
    if (rc == RUMOR_OK) rc = rumor_source_shard(src, &src->shard, cfg->partition, cfg->rank, cfg->peers, cfg->seed, err);
    if (rc == RUMOR_OK) rc = rumor_source_shard_owned(&src->shard, cfg->rank, cfg->peers, err);
    if (rc != RUMOR_OK) rumor_source_fini(src);
    return rc;
}

rumor_err_t rumor_source_shard_owned(const rumor_source_shard_t *sh, int rank, int peers, char err[RUMOR_ERR_LEN])
{
    if (sh->n == 0) return rumor_fail(err, RUMOR_EINVAL, "peer %d of %d owns no samples under this partition", rank, peers);
    return RUMOR_OK;
}

rumor_err_t rumor_source_shard(const rumor_source_t *src, rumor_source_shard_t *sh, const rumor_partition_t *part,
                               int rank, int peers, uint64_t seed, char err[RUMOR_ERR_LEN])
{
    memset(sh, 0, sizeof *sh);
    rumor_err_t rc;
    if (src->text) {
        if ((rc = rumor_text_shard(&sh->text, &src->corpus, part, rank, peers, src->T, err)) != RUMOR_OK) return rc;
        sh->n = sh->text.tokens, sh->examples = sh->text.windows;
        return RUMOR_OK;
    }
    sh->n = src->train.count;
    if (part && (rc = rumor_partition_indices(&sh->own, &sh->n, part, src->train.labels, src->train.classes,
                                              src->train.count, seed, rank, peers, err)) != RUMOR_OK)
        return rc;
    sh->examples = sh->n;
    return RUMOR_OK;
}

void rumor_source_shard_fini(rumor_source_shard_t *sh)
{
    free(sh->own);
    rumor_text_shard_fini(&sh->text);
    memset(sh, 0, sizeof *sh);
}

void rumor_source_fini(rumor_source_t *src)
{
    rumor_dataset_fini(&src->train);
    rumor_dataset_fini(&src->test);
    rumor_source_shard_fini(&src->shard);
    rumor_text_fini(&src->corpus);
    free(src->val);
    memset(src, 0, sizeof *src);
}

rumor_model_input_t rumor_source_input(const rumor_source_t *src, const rumor_model_spec_t *spec)
{
    if (src->text) return (rumor_model_input_t){1, 1, spec->ctx, src->corpus.vocab, src->corpus.width == 2};
    return (rumor_model_input_t){(int)src->train.channels, (int)src->train.rows, (int)src->train.cols,
                                 src->train.classes, false};
}

void rumor_source_trainer(const rumor_source_t *src, const rumor_source_shard_t *sh, rumor_trainer_config_t *tc)
{
    if (!sh) sh = &src->shard;
    if (src->text) {
        tc->text = &src->corpus, tc->shard = &sh->text;
        return;
    }
    tc->data = &src->train, tc->own = sh->own, tc->n = sh->n, tc->mean = src->mean, tc->std = src->std;
}

/* Validation windows in batches of the model's max batch into its token and label buffers. */
static rumor_err_t evaluate_text(const rumor_source_t *src, rumor_model_t *m, double *loss, double *acc,
                                 char err[RUMOR_ERR_LEN])
{
    rumor_backend_t *be = rumor_model_backend(m);
    const int T = src->T;
    const size_t B = (size_t)rumor_model_max_batch(m);
    int32_t *x = malloc(B * T * sizeof *x), *y = malloc(B * T * sizeof *y);
    if (!x || !y) {
        free(x), free(y);
        return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    }
    double loss_sum = 0.0;
    long right = 0;
    rumor_err_t rc = RUMOR_OK;
    for (size_t at = 0; at < src->n_val && rc == RUMOR_OK; at += B) {
        const size_t b = src->n_val - at < B ? src->n_val - at : B;
        for (size_t k = 0; k < b; k++)
            for (int j = 0; j < T; j++) {
                x[k * T + j] = rumor_text_token(&src->corpus, true, src->val[at + k] + (size_t)j);
                y[k * T + j] = rumor_text_token(&src->corpus, true, src->val[at + k] + (size_t)j + 1);
            }
        be->ops->upload(be, rumor_model_token_buf(m), x, b * T * sizeof *x);
        be->ops->upload(be, rumor_model_label_buf(m), y, b * T * sizeof *y);
        rc = rumor_model_run(m, (int)b, false, &loss_sum, &right, err);
    }
    free(x), free(y);
    const double n = (double)src->n_val * T;
    *loss = loss_sum / n, *acc = (double)right / n;
    return rc;
}

rumor_err_t rumor_source_evaluate(const rumor_source_t *src, rumor_model_t *m, double *loss, double *acc,
                                  char err[RUMOR_ERR_LEN])
{
    if (src->text) return evaluate_text(src, m, loss, acc, err);
    return rumor_train_evaluate(m, &src->test, src->mean, src->std, loss, acc, err);
}
