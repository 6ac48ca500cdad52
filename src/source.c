/* source.c - labelled images or text behind one interface (source.h). */
#include "source.h"

#include "train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static rumor_err_t load_text(rumor_source_t *src, const rumor_source_config_t *cfg, char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc = rumor_text_load(&src->corpus, cfg->dir, cfg->vocab, err);
    if (rc != RUMOR_OK) return rc;
    const int T = cfg->spec->ctx;
    if ((rc = rumor_text_shard(&src->shard, &src->corpus, cfg->partition, cfg->rank, cfg->peers, T, err)) != RUMOR_OK)
        return rc;
    src->n = src->shard.tokens;
    if (!cfg->eval) return RUMOR_OK;
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
    src->n = src->train.count;
    if (!cfg->partition) return RUMOR_OK;
    if ((rc = rumor_partition_indices(&src->own, &src->n, cfg->partition, src->train.labels, src->train.count,
                                      cfg->seed, cfg->rank, cfg->peers, err)) != RUMOR_OK)
        return rc;
    if (src->n == 0)
        return rumor_fail(err, RUMOR_EINVAL, "peer %d of %d owns no samples under this partition", cfg->rank,
                          cfg->peers);
    return RUMOR_OK;
}

rumor_err_t rumor_source_load(rumor_source_t *src, const rumor_source_config_t *cfg, char err[RUMOR_ERR_LEN])
{
    memset(src, 0, sizeof *src);
    src->text = cfg->spec->kind == RUMOR_MODEL_GPT;
    const rumor_err_t rc = src->text ? load_text(src, cfg, err) : load_images(src, cfg, err);
    if (rc != RUMOR_OK) rumor_source_fini(src);
    return rc;
}

void rumor_source_fini(rumor_source_t *src)
{
    rumor_dataset_fini(&src->train);
    rumor_dataset_fini(&src->test);
    free(src->own);
    rumor_text_shard_fini(&src->shard);
    rumor_text_fini(&src->corpus);
    free(src->val);
    memset(src, 0, sizeof *src);
}

rumor_model_input_t rumor_source_input(const rumor_source_t *src, const rumor_model_spec_t *spec)
{
    if (src->text) return (rumor_model_input_t){1, 1, spec->ctx, src->corpus.vocab};
    return (rumor_model_input_t){1, (int)src->train.rows, (int)src->train.cols, RUMOR_DATA_CLASSES};
}

void rumor_source_trainer(const rumor_source_t *src, rumor_trainer_config_t *tc)
{
    if (src->text) {
        tc->text = &src->corpus, tc->shard = &src->shard;
        return;
    }
    tc->data = &src->train, tc->own = src->own, tc->n = src->n, tc->mean = src->mean, tc->std = src->std;
}

/* Validation windows in batches of the model's max batch into its token and label buffers. */
static rumor_err_t evaluate_text(const rumor_source_t *src, rumor_model_t *m, double *loss, double *acc,
                                 char err[RUMOR_ERR_LEN])
{
    rumor_backend_t *be = rumor_model_backend(m);
    const int T = src->shard.T;
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
