/* test_backend_staged.c - the paths a device takes, checked without one: the CPU backend
 * behind a device's contract (tests/backend_staged.h: its memory faults if the host touches
 * it, its async copies land only when waited for) must agree with the plain CPU backend bit
 * for bit, op by op (the comparisons test_backend_cuda runs on a GPU) and over whole runs of
 * rumor train (batches staged through pinned buffers, checkpoints and exports downloaded). */
#include "backend_compare.h"
#include "backend_staged.h"
#include "check.h"
#include "config.h"
#include "train.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/rumor-test-staged-XXXXXX";

static bool same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool same = fa && fb;
    while (same) {
        const int ca = fgetc(fa), cb = fgetc(fb);
        same = ca == cb;
        if (ca == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

/* One run of rumor train on the CPU backend and one on the staged backend: the same losses,
 * accuracy, checkpoint and exported model, bit for bit. */
static void train_both(const char *model, rumor_opt_kind_t opt, int batch)
{
    char err[RUMOR_ERR_LEN] = "", save[2][512], ckpt[2][512];
    rumor_train_result_t res[2];
    for (int k = 0; k < 2; k++) {
        rumor_train_config_t c;
        rumor_train_config_defaults(&c);
        c.data_dir = RUMOR_DEFAULT_DATA;
        c.threads = 1;
        c.print_epochs = false;
        c.log_every = 0;
        c.seed = 9;
        c.epochs = 2;
        c.batch = batch;
        c.limit = 1000; /* batches that do not divide it: a short last batch */
        c.opt.kind = opt;
        if (opt == RUMOR_OPT_ADAMW) c.opt.lr = 1e-3f;
        if (rumor_model_spec_parse(&c.spec, model, err) != RUMOR_OK) abort();
        c.spec_set = true;
        snprintf(save[k], sizeof save[k], "%s/model-%d.safetensors", dir, k);
        snprintf(ckpt[k], sizeof ckpt[k], "%s/ckpt-%d.safetensors", dir, k);
        c.save_path = save[k];
        c.checkpoint_path = ckpt[k];
        c.backend_ops = k ? &rumor_test_staged_ops : NULL;
        CHECK_RC(rumor_train_run(&c, &res[k], err));
        if (err[0]) fprintf(stderr, "%s\n", err);
    }
    CHECK_MSG(res[0].train_loss == res[1].train_loss && res[0].test_acc == res[1].test_acc &&
                  res[0].test_loss == res[1].test_loss && res[0].steps == res[1].steps,
              "%s: cpu loss %.9g acc %.4f, staged loss %.9g acc %.4f", model, res[0].train_loss, res[0].test_acc,
              res[1].train_loss, res[1].test_acc);
    CHECK_MSG(same_file(save[0], save[1]), "%s: exported models differ", model);
    CHECK_MSG(same_file(ckpt[0], ckpt[1]), "%s: checkpoints differ", model);
    for (int k = 0; k < 2; k++) {
        remove(save[k]);
        remove(ckpt[k]);
    }
}

int main(void)
{
    char err[RUMOR_ERR_LEN] = "";
    if (!mkdtemp(dir)) return 1;
    rumor_backend_t *be = rumor_backend_open(&rumor_test_staged_ops, 1, err);
    CHECK_MSG(be != NULL, "%s", err);
    if (be) CHECK_MSG(backend_compare_all(be, true, false, dir) == 0, "comparisons against the CPU backend failed");
    rumor_backend_destroy(&be);

    struct stat st;
    if (stat(RUMOR_DEFAULT_DATA, &st) != 0) {
        fprintf(stderr, "no dataset at %s: training runs not checked\n", RUMOR_DEFAULT_DATA);
    } else {
        train_both("mlp:64,32", RUMOR_OPT_SGD, 64);
        train_both("cnn:8,16", RUMOR_OPT_ADAMW, 96);
    }
    rmdir(dir);
    return check_done();
}
