/* test_backend_staged.c - the paths a device takes, checked without one: the CPU backend
 * behind a device's contract (tests/backend_staged.h: its memory faults if the host touches
 * it, its async copies land only when waited for) must agree with the plain CPU backend bit
 * for bit, op by op (the comparisons test_backend_cuda runs on a GPU) and over whole runs of
 * rumor train (batches staged through pinned buffers, checkpoints and exports downloaded) and
 * of a one-peer rumor node (parameters through the pinned mirror at every gossip point), and
 * DP-SGD's private gradient on the same batches and the same seeded noise. */
#include "backend_compare.h"
#include "backend_staged.h"
#include "check.h"
#include "config.h"
#include "crypto.h"
#include "dp.h"
#include "peer.h"
#include "train.h"

#include <limits.h>
#include <math.h>
#include <time.h>

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/rumor-test-staged-XXXXXX";

/* One run of rumor train on the CPU backend and one on the staged backend: the same losses,
 * accuracy, checkpoint and exported model, bit for bit. A gpt model trains on data, a folder
 * of text (token windows staged as the images are), clipped as its runs are. */
static void train_both(const char *model, rumor_opt_kind_t opt, int batch, const char *data)
{
    char err[RUMOR_ERR_LEN] = "", save[2][512], ckpt[2][512];
    rumor_train_result_t res[2];
    for (int k = 0; k < 2; k++) {
        rumor_train_config_t c;
        rumor_train_config_defaults(&c);
        c.data_dir = data;
        c.threads = 1;
        c.log_every = 0;
        c.seed = 9;
        c.epochs = 2;
        c.batch = batch;
        c.limit = 1000; /* batches that do not divide it: a short last batch */
        if (strncmp(model, "gpt:", 4) == 0) c.steps = 25, c.clip_grad = 1.0f, c.limit = 0;
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
    CHECK_MSG(backend_same_file(save[0], save[1]), "%s: exported models differ", model);
    CHECK_MSG(backend_same_file(ckpt[0], ckpt[1]), "%s: checkpoints differ", model);
    for (int k = 0; k < 2; k++) {
        remove(save[k]);
        remove(ckpt[k]);
    }
}

/* A one-peer swarm: its rounds run alone, but every gossip point takes the parameters to the
 * host, through the engine and back, as on a GPU. With dp, DP-SGD's per-sample loop runs on
 * the backend too (tagged pointers: any host access to backend memory would crash). */
static void node_both(bool dp)
{
    char err[RUMOR_ERR_LEN] = "", swarm[128], key[128], cert[128], run[2][128], model[2][320];
    rumor_authority_t *auth = rumor_authority_generate(err);
    rumor_secret_key_t *k = rumor_secret_key_generate(err);
    uint8_t c[RUMOR_CERT_MAX_LEN];
    size_t len = 0;
    const uint64_t now = (uint64_t)time(NULL);
    snprintf(swarm, sizeof swarm, "%s/authority.pub", dir);
    snprintf(key, sizeof key, "%s/peer.key", dir);
    snprintf(cert, sizeof cert, "%s/peer.cert", dir);
    CHECK(auth && k);
    if (!auth || !k) goto out;
    CHECK_RC(rumor_public_key_save(swarm, rumor_authority_public(auth), NULL, true, err));
    CHECK_RC(rumor_secret_key_save(k, key, true, err));
    CHECK_RC(rumor_cert_issue(c, &len, auth, rumor_secret_key_public(k), "peer", now - 60, now + 3600, err));
    CHECK_RC(rumor_cert_save(cert, c, len, true, err));
    for (int i = 0; i < 2; i++) {
        rumor_peer_config_t pc;
        memset(&pc, 0, sizeof pc);
        pc.node = (rumor_node_config_t){.listen = "tcp://127.0.0.1:0", .key_path = key, .cert_path = cert,
                                        .swarm = swarm, .memb = rumor_memb_defaults()};
        pc.data_dir = RUMOR_DEFAULT_DATA;
        pc.limit = 640;
        if (rumor_model_spec_parse(&pc.spec, "mlp:32", err) != RUMOR_OK || rumor_algo_parse(&pc.algo, "dpsgd", err) != RUMOR_OK)
            abort();
        pc.algo.local_steps = 3;
        pc.device = "cpu";
        pc.backend_ops = i ? &rumor_test_staged_ops : NULL;
        pc.threads = 1;
        pc.batch = 32;
        pc.seed = pc.init_seed = 5;
        pc.opt = rumor_optim_defaults();
        pc.sched.kind = RUMOR_SCHED_CONSTANT;
        pc.topology = "ring";
        pc.rounds = 4;
        snprintf(run[i], sizeof run[i], "%s/run-%d", dir, i);
        snprintf(model[i], sizeof model[i], "%s/model.safetensors", run[i]);
        pc.run_dir = run[i];
        pc.min_peers = 1;
        if (dp && rumor_dp_parse(&pc.dp, "clip=1,noise=1.1", err) != RUMOR_OK) abort();
        rumor_peer_result_t res;
        CHECK_RC(rumor_peer_run(&pc, &res, err));
        if (err[0]) fprintf(stderr, "node %d: %s\n", i, err);
        CHECK(res.rounds == 4);
    }
    /* With --dp a node's batches and noise are secret, so two runs differ whatever the backend:
     * the staged run shows that no host code touches backend memory, and priv_both compares the
     * private gradient itself under seeded noise. */
    if (!dp) CHECK_MSG(backend_same_file(model[0], model[1]), "rumor node: the models of the cpu and staged runs differ");
    else CHECK_MSG(access(model[0], F_OK) == 0 && access(model[1], F_OK) == 0, "rumor node --dp: a model is missing");
    for (int i = 0; i < 2; i++) {
        const char *files[] = {"model.safetensors", "checkpoint.safetensors", "metrics.jsonl", "dp.steps"};
        char path[300];
        for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
            snprintf(path, sizeof path, "%s/%s", run[i], files[f]);
            remove(path);
        }
        rmdir(run[i]);
    }
    remove(swarm);
    remove(key);
    remove(cert);
out:
    rumor_secret_key_destroy(&k);
    rumor_authority_destroy(&auth);
}

/* DP-SGD's private gradient on the CPU backend and on the staged one, from the same seeded
 * noise: a batch larger than the model's max batch (two slices), then an empty one (noise
 * alone); the gradients agree bit for bit. */
static void priv_both(void)
{
    enum { MAXB = 8, N = 13, FEAT = 16 };
    char err[RUMOR_ERR_LEN] = "";
    float x[N * FEAT], *g[2] = {NULL, NULL};
    int32_t y[N];
    for (int i = 0; i < N * FEAT; i++) x[i] = (float)sin(0.37 * i) * (i % 5 == 0 ? 9.0f : 1.0f);
    for (int i = 0; i < N; i++) y[i] = (int32_t)((i * 3) % 10);
    rumor_model_spec_t spec;
    if (rumor_model_spec_parse(&spec, "mlp:32", err) != RUMOR_OK) abort();
    rumor_dp_config_t cfg;
    if (rumor_dp_parse(&cfg, "clip=0.5,noise=1.3", err) != RUMOR_OK) abort();
    size_t P = 0;
    for (int k = 0; k < 2; k++) {
        rumor_backend_t *be = k ? rumor_backend_open(&rumor_test_staged_ops, 1, err) : rumor_backend_new("cpu", 1, err);
        rumor_model_t *m = be ? rumor_model_new(&spec, (rumor_model_input_t){1, 4, 4, 10, false}, be, MAXB, err) : NULL;
        rumor_noise_t *ns = rumor_noise_new_seeded(11, 0xd9, 0, err);
        rumor_dp_t *dp = m ? rumor_dp_new(&cfg, m, 100, 10, &ns, err) : NULL;
        CHECK_MSG(dp != NULL, "%s", err);
        if (dp && rumor_model_init(m, 4) == RUMOR_OK) {
            P = rumor_model_param_count(m);
            g[k] = malloc(2 * P * sizeof *g[k]);
            double loss = 0.0;
            rumor_dp_begin(dp);
            for (int at = 0; at < N; at += MAXB) {
                const int b = N - at < MAXB ? N - at : MAXB;
                be->ops->upload(be, rumor_model_input_buf(m), x + at * FEAT, (size_t)b * FEAT * sizeof *x);
                be->ops->upload(be, rumor_model_label_buf(m), y + at, (size_t)b * sizeof *y);
                CHECK_RC(rumor_dp_accumulate(dp, m, b, &loss, err));
            }
            CHECK_RC(rumor_dp_finish(dp, m, err));
            be->ops->download(be, g[k], rumor_model_grads(m), P * sizeof *g[k]);
            rumor_dp_begin(dp);
            CHECK_RC(rumor_dp_finish(dp, m, err));
            be->ops->download(be, g[k] + P, rumor_model_grads(m), P * sizeof *g[k]);
            CHECK_RC(be->ops->sync(be, err));
            CHECK(rumor_dp_steps(dp) == 2 && loss > 0.0);
        }
        rumor_dp_destroy(&dp);
        rumor_model_destroy(&m);
        rumor_backend_destroy(&be);
    }
    CHECK_MSG(g[0] && g[1] && memcmp(g[0], g[1], 2 * P * sizeof *g[0]) == 0,
              "DP-SGD gradients of the cpu and staged backends differ");
    free(g[0]);
    free(g[1]);
}

/* The staged backend catches two misuses of the device contract that the CPU backend forgives:
 * an upload_async into memory that queued work still uses (a race with the compute stream on
 * a device: the next sync fails, naming the op), and a loss read before sync (NaN until then).
 * Uses the contract allows stay clean: another buffer, or another part of the same one, and
 * memory whose users are done (a sync, or wait_copies after a download that followed them). */
static void contract_checks(void)
{
    enum { N = 1024, B = 5, K = 7 };
    char err[RUMOR_ERR_LEN] = "";
    rumor_backend_t *be = rumor_backend_open(&rumor_test_staged_ops, 1, err);
    rumor_backend_t *cp = rumor_backend_new("cpu", 1, err);
    CHECK_MSG(be && cp, "%s", err);
    if (!be || !cp) goto out;
    float *buf = be->ops->alloc(be, 2 * N * sizeof(float)), *other = be->ops->alloc(be, N * sizeof(float));
    float *host = be->ops->host_alloc(be, N * sizeof(float)), *back = be->ops->host_alloc(be, N * sizeof(float));
    for (int i = 0; i < N; i++) host[i] = (float)i;

    /* Racing uploads: into what a queued scale writes, and into what a queued gemm reads. */
    be->ops->scale(be, buf, 2.0f, N);
    be->ops->upload_async(be, buf + 10, host, 4 * sizeof(float));
    rumor_err_t rc = be->ops->sync(be, err);
    CHECK_MSG(rc == RUMOR_EINVAL && strstr(err, "upload_async") && strstr(err, "(scale)"),
              "an upload_async racing a queued scale: sync returned %d (%s)", (int)rc, err);
    CHECK_RC(be->ops->sync(be, err)); /* reported once */
    be->ops->gemm(be, other, buf + N, buf + N, false, false, 4, 4, 4, 1.0f, 0.0f, 4, 4, 4); /* reads buf[N, N+16) */
    be->ops->upload_async(be, buf + N + 12, host, 8 * sizeof(float));
    rc = be->ops->sync(be, err);
    CHECK_MSG(rc == RUMOR_EINVAL && strstr(err, "(gemm)"), "an upload_async racing a queued gemm: %d (%s)", (int)rc, err);

    /* Allowed: after a sync; into another buffer or past what the gemm reads; after a download
     * that followed the work, once wait_copies returns. */
    be->ops->scale(be, buf, 2.0f, N);
    CHECK_RC(be->ops->sync(be, err));
    be->ops->upload_async(be, buf, host, N * sizeof(float));
    be->ops->wait_copies(be);
    be->ops->scale(be, buf, 2.0f, N);
    be->ops->gemm(be, other, buf + N, buf + N, false, false, 4, 4, 4, 1.0f, 0.0f, 4, 4, 4);
    be->ops->upload_async(be, other + 64, host, 64 * sizeof(float));
    be->ops->upload_async(be, buf + N + 16, host, 64 * sizeof(float));
    be->ops->download_async(be, back, buf, N * sizeof(float));
    be->ops->wait_copies(be);
    be->ops->upload_async(be, buf, host, N * sizeof(float));
    CHECK_RC(be->ops->sync(be, err));
    CHECK(back[3] == 6.0f); /* the download saw the scale after the upload: 3 * 2 */

    /* The loss and count: NaN and LONG_MIN until sync, then the CPU backend's sums (two calls
     * into the same sums, added in call order). */
    float logits[B * K];
    int32_t labels[B];
    for (int i = 0; i < B * K; i++) logits[i] = (float)sin(0.7 * i);
    for (int i = 0; i < B; i++) labels[i] = i % K;
    double loss[2] = {0.25, 0.25};
    long correct[2] = {3, 3};
    rumor_backend_t *bk[2] = {cp, be};
    for (int k = 0; k < 2; k++) {
        float *dl = bk[k]->ops->alloc(bk[k], sizeof logits);
        int32_t *dy = bk[k]->ops->alloc(bk[k], sizeof labels);
        bk[k]->ops->upload(bk[k], dl, logits, sizeof logits);
        bk[k]->ops->upload(bk[k], dy, labels, sizeof labels);
        bk[k]->ops->softmax_xent(bk[k], NULL, &loss[k], &correct[k], dl, dy, B, K);
        bk[k]->ops->softmax_xent(bk[k], NULL, &loss[k], &correct[k], dl + K, dy + 1, B - 1, K);
        if (k == 1)
            CHECK_MSG(isnan(loss[1]) && correct[1] == LONG_MIN, "before sync: loss %g, correct %ld", loss[1],
                      correct[1]);
        CHECK_RC(bk[k]->ops->sync(bk[k], err));
        bk[k]->ops->free(bk[k], dl);
        bk[k]->ops->free(bk[k], dy);
    }
    CHECK_MSG(loss[0] > 0.25 && loss[1] == loss[0] && correct[1] == correct[0],
              "after sync: staged loss %.17g correct %ld, cpu %.17g %ld", loss[1], correct[1], loss[0], correct[0]);
    be->ops->host_free(be, host);
    be->ops->host_free(be, back);
    be->ops->free(be, buf);
    be->ops->free(be, other);
out:
    rumor_backend_destroy(&be);
    rumor_backend_destroy(&cp);
}

/* rumor train of a gpt model on two documents of this test's own, on both backends. */
static void text_both(void)
{
    char text[600], doc[700];
    snprintf(text, sizeof text, "%s/text", dir);
    CHECK(mkdir(text, 0700) == 0);
    for (int d = 0; d < 2; d++) {
        snprintf(doc, sizeof doc, "%s/doc%d.txt", text, d);
        FILE *f = fopen(doc, "w");
        CHECK(f != NULL);
        if (!f) return;
        for (int i = 0; i < 3000; i++) fputc("abcdefgh \n"[(i * (d + 3) + i / 7) % 10], f);
        fclose(f);
    }
    train_both("gpt:2,2,16,12", RUMOR_OPT_ADAMW, 5, text);
    for (int d = 0; d < 2; d++) {
        snprintf(doc, sizeof doc, "%s/doc%d.txt", text, d);
        remove(doc);
    }
    rmdir(text);
}

int main(void)
{
    char err[RUMOR_ERR_LEN] = "";
    if (!mkdtemp(dir)) return 1;
    rumor_backend_t *be = rumor_backend_open(&rumor_test_staged_ops, 1, err);
    CHECK_MSG(be != NULL, "%s", err);
    if (be) CHECK_MSG(backend_compare_all(be, true, false, dir) == 0, "comparisons against the CPU backend failed");
    rumor_backend_destroy(&be);
    contract_checks();
    priv_both();
    text_both();

    struct stat st;
    if (stat(RUMOR_DEFAULT_DATA, &st) != 0) {
        check_skip("no dataset at %s: the training and node runs not compared", RUMOR_DEFAULT_DATA);
    } else {
        train_both("mlp:64,32", RUMOR_OPT_SGD, 64, RUMOR_DEFAULT_DATA);
        train_both("cnn:8,16", RUMOR_OPT_ADAMW, 96, RUMOR_DEFAULT_DATA);
        node_both(false);
        node_both(true);
    }
    rmdir(dir);
    return check_done();
}
