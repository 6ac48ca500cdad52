/* test_train.c - training end to end on Fashion-MNIST: accuracy, export round trip, and
 * resume equivalence (an interrupted and resumed run reaches the same parameters, bit for
 * bit, as an uninterrupted one). Skips when the dataset is not installed. */
#include "check.h"
#include "checkpoint.h"
#include "config.h"
#include "train.h"
#include "trainer.h"

#include <math.h>

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/rumor-test-train-XXXXXX";

/* A path in the test folder; each call returns its own string, freed by free_paths(). */
static char *made[64];
static int n_made;

static char *path(const char *name)
{
    if (n_made == 64) abort();
    char *p = malloc(strlen(dir) + strlen(name) + 2);
    sprintf(p, "%s/%s", dir, name);
    return made[n_made++] = p;
}

static void free_paths(void)
{
    while (n_made > 0) free(made[--n_made]);
}

static unsigned char *slurp(const char *p, size_t *len)
{
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n + 1);
    *len = fread(buf, 1, (size_t)n, f);
    buf[*len] = 0; /* callers may treat the contents as a string */
    fclose(f);
    return buf;
}

static int same_file(const char *a, const char *b)
{
    size_t la = 0, lb = 0;
    unsigned char *x = slurp(a, &la), *y = slurp(b, &lb);
    int same = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

static rumor_train_config_t base(const char *model)
{
    rumor_train_config_t c;
    char err[RUMOR_ERR_LEN];
    rumor_train_config_defaults(&c);
    c.data_dir = RUMOR_DEFAULT_DATA;
    c.threads = 1;
    c.log_every = 0;
    c.seed = 42;
    if (rumor_model_spec_parse(&c.spec, model, err) != RUMOR_OK) abort();
    c.spec_set = true;
    return c;
}

static void test_logreg_accuracy(void)
{
    char err[RUMOR_ERR_LEN] = "";
    rumor_train_config_t c = base("logreg");
    c.epochs = 1;
    c.opt.lr = 0.01f;
    c.save_path = path("logreg.safetensors");
    c.metrics_path = path("logreg.jsonl");
    c.log_every = 200;
    rumor_train_result_t r;
    CHECK_RC(rumor_train_run(&c, &r, err));
    fprintf(stderr, "logreg, 1 epoch: test_acc %.4f, %.0f samples/s\n", r.test_acc, r.samples_per_s);
    CHECK_MSG(r.test_acc > 0.80, "test accuracy %.4f", r.test_acc);
    CHECK(r.steps == 938 && r.epochs_done == 1 && !r.interrupted);

    /* The exported file evaluates to the same accuracy. */
    rumor_model_spec_t spec;
    rumor_model_input_t in;
    rumor_checkpoint_info_t info;
    CHECK_RC(rumor_checkpoint_peek(c.save_path, &spec, &in, &info, err));
    CHECK(strcmp(spec.canonical, "logreg") == 0 && in.h == 28 && in.classes == 10 && !info.has_optim);
    CHECK_NEAR(info.input_mean, 0.2860, 1e-3);
    CHECK_NEAR(info.input_std, 0.3530, 1e-3);
    rumor_backend_t *be = rumor_backend_new("cpu", 1, err);
    rumor_model_t *m = rumor_model_new(&spec, in, be, 256, err);
    CHECK_RC(rumor_checkpoint_load(c.save_path, m, NULL, NULL, err));
    rumor_dataset_t test = {0};
    CHECK_RC(rumor_data_load_dir(NULL, &test, RUMOR_DEFAULT_DATA, err));
    double loss, acc;
    CHECK_RC(rumor_train_evaluate(m, &test, info.input_mean, info.input_std, &loss, &acc, err));
    CHECK_NEAR(acc, r.test_acc, 1e-9);
    /* Loading into a model of another shape is a layout error, and leaves it untouched. */
    rumor_model_spec_t other;
    CHECK_RC(rumor_model_spec_parse(&other, "mlp:16", err));
    rumor_model_t *m2 = rumor_model_new(&other, in, be, 4, err);
    CHECK(rumor_checkpoint_load(c.save_path, m2, NULL, NULL, err) == RUMOR_ELAYOUT);
    CHECK(strstr(err, "logreg") != NULL);
    rumor_model_destroy(&m2);
    rumor_dataset_fini(&test);
    rumor_model_destroy(&m);
    rumor_backend_destroy(&be);

    /* Metrics: a line every 200 steps and one for the epoch with test_acc. */
    size_t len;
    char *text = (char *)slurp(c.metrics_path, &len);
    int lines = 0, with_acc = 0;
    for (size_t i = 0; text && i < len; i++) lines += text[i] == '\n';
    for (char *p = text; p && (p = strstr(p, "\"test_acc\"")); p++) with_acc++;
    CHECK(lines == 938 / 200 + 1 && with_acc == 1);
    free(text);
}

/* Uninterrupted against stopped-and-resumed, for an optimizer configuration. */
static void test_resume(const char *model, rumor_opt_kind_t kind, bool nesterov, const char *sched,
                        long stop_at)
{
    char err[RUMOR_ERR_LEN] = "";
    rumor_train_config_t c = base(model);
    c.epochs = 3;
    c.batch = 50;
    c.limit = 2000; /* 40 steps per epoch */
    c.eval = false;
    c.opt.kind = kind;
    c.opt.nesterov = nesterov;
    c.opt.weight_decay = 1e-4f;
    if (kind == RUMOR_OPT_ADAMW) c.opt.lr = 1e-3f;
    CHECK_RC(rumor_schedule_parse(&c.sched, sched, err));
    c.sched.warmup = 10;
    rumor_train_result_t r;

    rumor_train_config_t a = c;
    a.save_path = path("a.safetensors");
    CHECK_RC(rumor_train_run(&a, &r, err));
    CHECK(r.steps == 120);

    rumor_train_config_t b1 = c;
    b1.checkpoint_path = path("ckpt.safetensors");
    b1.max_steps = stop_at;
    b1.save_path = path("b.safetensors");
    unlink(b1.save_path);
    CHECK_RC(rumor_train_run(&b1, &r, err));
    CHECK(r.interrupted && r.steps == stop_at);
    CHECK(access(b1.save_path, F_OK) != 0); /* an interrupted run exports nothing */

    /* The resumed run is given the run's settings and the checkpoint (the command line takes
     * settings back from a checkpoint: test_cli.sh, test_settings.py). */
    rumor_train_config_t b2 = c;
    b2.resume_path = path("ckpt.safetensors");
    b2.save_path = path("b.safetensors");
    CHECK_RC(rumor_train_run(&b2, &r, err));
    CHECK(r.steps == 120 && !r.interrupted);
    CHECK_MSG(same_file(a.save_path, b2.save_path), "%s %s %s stopped at %ld: resumed run differs",
              model, rumor_optim_kind_name(kind), sched, stop_at);

    /* A batch that does not fit the checkpoint's step count is refused by the run itself. */
    rumor_train_config_t other = c;
    other.batch = 40;
    other.resume_path = path("ckpt.safetensors");
    CHECK(rumor_train_run(&other, &r, err) == RUMOR_EINVAL && strstr(err, "batch"));

    /* Resuming with another optimizer is refused. */
    rumor_train_config_t bad = c;
    bad.opt.kind = kind == RUMOR_OPT_SGD ? RUMOR_OPT_ADAMW : RUMOR_OPT_SGD;
    bad.resume_path = path("ckpt.safetensors");
    CHECK(rumor_train_run(&bad, &r, err) == RUMOR_ELAYOUT);
}

/* A peer's shard: iid over 4 peers of 2000 samples is 500 samples, 10 steps of 50. */
static void test_partitioned(void)
{
    char err[RUMOR_ERR_LEN] = "";
    rumor_train_config_t c = base("logreg");
    c.epochs = 2;
    c.batch = 50;
    c.limit = 2000;
    c.eval = false;
    c.partitioned = true;
    c.rank = 3;
    c.peers = 4;
    CHECK_RC(rumor_partition_parse(&c.partition, "iid", err));
    rumor_train_result_t r;
    CHECK_RC(rumor_train_run(&c, &r, err));
    CHECK(r.steps == 20);
    c.rank = 4;
    CHECK(rumor_train_run(&c, &r, err) == RUMOR_EINVAL);
}

/* A checkpoint holds every optimizer state, four of them with dadamw and tracking (the
 * parameters and states once had room for three), and gives them back exactly. */
static void test_tracking_checkpoint(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_model_spec_t spec;
    CHECK_RC(rumor_model_spec_parse(&spec, "mlp:8", err));
    const rumor_model_input_t in = {.c = 1, .h = 28, .w = 28, .classes = 10};
    rumor_backend_t *be = rumor_backend_new("cpu", 1, err);
    rumor_model_t *m = rumor_model_new(&spec, in, be, 4, err);
    rumor_optim_config_t oc = rumor_optim_defaults();
    oc.kind = RUMOR_OPT_DADAMW;
    oc.tracking = true;
    rumor_optim_t *o = rumor_optim_new(&oc, be, rumor_model_param_count(m), err), *back = NULL;
    CHECK(m && o && rumor_optim_state_count(o) == RUMOR_OPTIM_MAX_STATES);
    if (!m || !o) goto out;
    CHECK_RC(rumor_model_init(m, 3));
    const size_t n = rumor_model_param_count(m);
    for (int k = 0; k < RUMOR_OPTIM_MAX_STATES; k++)
        for (size_t i = 0; i < n; i++) rumor_optim_state(o, k)[i] = (float)(k + 1) + (float)i * 1e-3f;
    const rumor_checkpoint_info_t info = {.input_mean = 0.5f, .input_std = 0.25f};
    CHECK_RC(rumor_checkpoint_save(path("tracking.safetensors"), m, o, &info, err));
    back = rumor_optim_new(&oc, be, n, err);
    CHECK_RC(rumor_checkpoint_load(path("tracking.safetensors"), m, back, NULL, err));
    bool same = true; /* over the tensors (the padding between them is not saved) */
    for (int k = 0; k < RUMOR_OPTIM_MAX_STATES; k++)
        for (int t = 0; t < rumor_model_tensor_count(m); t++) {
            const rumor_tensor_info_t *ti = rumor_model_tensor(m, t);
            same &= memcmp(rumor_optim_state(o, k) + ti->offset, rumor_optim_state(back, k) + ti->offset,
                           ti->count * sizeof(float)) == 0;
        }
    CHECK(same);
out:
    rumor_optim_destroy(&back);
    rumor_optim_destroy(&o);
    rumor_model_destroy(&m);
    rumor_backend_destroy(&be);
}

/* The trainer with tracking, alone (no mix: the tracker is the own gradient): every call steps
 * along the gradient the call before took in, then takes in the next. So n + 1 calls make the
 * n steps of plain training, with the same batches, rates (a warm-up and cosine) and clipping:
 * a check of the order, the batch index, the rate index and the clip of the tracker's step. */
static void test_tracking_trainer(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_dataset_t train = {0};
    CHECK_RC(rumor_data_load_dir(&train, NULL, RUMOR_DEFAULT_DATA, err));
    rumor_model_spec_t spec;
    CHECK_RC(rumor_model_spec_parse(&spec, "mlp:16", err));
    const rumor_model_input_t in = {.c = 1, .h = 28, .w = 28, .classes = 10};
    rumor_backend_t *be = rumor_backend_new("cpu", 1, err);
    rumor_model_t *m[2] = {0};
    rumor_optim_t *o[2] = {0};
    rumor_trainer_t *tr[2] = {0};
    size_t own[600];
    for (size_t i = 0; i < 600; i++) own[i] = i * 7;
    float mean, std;
    rumor_data_stats(&train, &mean, &std);
    rumor_trainer_config_t tc = {.data = &train, .own = own, .n = 600, .mean = mean, .std = std, .batch = 20,
                                 .seed = 5, .clip_grad = 0.5f, .lr = 0.05f, .total_steps = 40};
    CHECK_RC(rumor_schedule_parse(&tc.sched, "cosine", err));
    tc.sched.warmup = 5;
    enum { STEPS = 40 };
    for (int k = 0; k < 2; k++) {
        rumor_optim_config_t oc = rumor_optim_defaults();
        oc.tracking = k == 1;
        m[k] = rumor_model_new(&spec, in, be, 20, err);
        o[k] = m[k] ? rumor_optim_new(&oc, be, rumor_model_param_count(m[k]), err) : NULL;
        CHECK(m[k] && o[k]);
        if (!m[k] || !o[k]) goto out;
        CHECK_RC(rumor_model_init(m[k], 3));
        tr[k] = rumor_trainer_new(&tc, m[k], o[k], err);
        CHECK(tr[k] != NULL);
        if (!tr[k]) goto out;
        rumor_trainer_stats_t st;
        for (long at = 0; at < STEPS + k; at += 7) { /* in pieces, as rounds call it */
            const long n = at + 7 <= STEPS + k ? 7 : STEPS + k - at;
            CHECK_RC(rumor_trainer_steps(tr[k], n, at, &st, err));
        }
    }
    CHECK(rumor_optim_steps(o[0]) == STEPS && rumor_optim_steps(o[1]) == STEPS);
    const size_t n = rumor_model_param_count(m[0]);
    double worst = 0.0, moved = 0.0;
    rumor_model_t *init = rumor_model_new(&spec, in, be, 20, err);
    if (init && rumor_model_init(init, 3) == RUMOR_OK)
        for (size_t i = 0; i < n; i++) {
            worst = fmax(worst, fabs(rumor_model_params(m[0])[i] - rumor_model_params(m[1])[i]));
            moved = fmax(moved, fabs(rumor_model_params(m[0])[i] - rumor_model_params(init)[i]));
        }
    rumor_model_destroy(&init);
    CHECK_MSG(worst < 1e-6 && moved > 1e-2, "tracking alone: %g apart from plain training (moved %g)", worst, moved);
out:
    for (int k = 0; k < 2; k++) {
        rumor_trainer_destroy(&tr[k]);
        rumor_optim_destroy(&o[k]);
        rumor_model_destroy(&m[k]);
    }
    rumor_backend_destroy(&be);
    rumor_dataset_fini(&train);
}

int main(void)
{
    struct stat st;
    if (stat(RUMOR_DEFAULT_DATA, &st) != 0) {
        fprintf(stderr, "skip: %s not installed\n", RUMOR_DEFAULT_DATA);
        return CHECK_SKIP;
    }
    if (!mkdtemp(dir)) return 1;
    test_logreg_accuracy();
    test_partitioned();
    test_tracking_checkpoint();
    test_tracking_trainer();
    test_resume("mlp:32,16", RUMOR_OPT_SGD, false, "constant", 40);  /* at an epoch boundary */
    test_resume("mlp:32,16", RUMOR_OPT_SGD, true, "cosine", 57);     /* mid-epoch */
    test_resume("cnn:4,8", RUMOR_OPT_ADAMW, false, "step:1,0.5", 73);
    const char *files[] = {"logreg.safetensors", "logreg.jsonl", "a.safetensors", "b.safetensors",
                           "ckpt.safetensors", "tracking.safetensors"};
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(files); i++) unlink(path(files[i]));
    rmdir(dir);
    free_paths();
    return check_done();
}
