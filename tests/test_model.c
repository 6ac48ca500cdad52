/* test_model.c - spec parsing, layout, and finite-difference gradient checks of every model. */
#include "backend.h"
#include "check.h"
#include "model.h"
#include "rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static rumor_backend_t *be;

/* Central differences on up to `per_tensor` coordinates of every tensor. The loss is summed
 * in double but the forward pass is float32: with h = 1e-3 rounding noise (~1e-7 relative on
 * a loss near 2.3 per sample) stays near 1e-4 absolute, well under the tolerance, and the
 * O(h^2) truncation error is smaller still. ReLU and max-pool are not differentiable
 * everywhere: where +-h crosses a kink the difference quotient is meaningless. Such a
 * coordinate shows itself by one-sided differences that disagree ((L+ - L0)/h against
 * (L0 - L-)/h, which otherwise agree to O(h)); those are skipped and counted, and must stay
 * a small minority. Every other coordinate must match. */
static void gradcheck(const char *spec_s, rumor_model_input_t in, int b, int per_tensor)
{
    char err[RUMOR_ERR_LEN];
    rumor_model_spec_t spec;
    CHECK_RC(rumor_model_spec_parse(&spec, spec_s, err));
    rumor_model_t *m = rumor_model_new(&spec, in, be, b, err);
    CHECK_MSG(m != NULL, "%s: %s", spec_s, err);
    if (!m) return;
    CHECK_RC(rumor_model_init(m, 3));
    rumor_rng_t rng;
    rumor_rng_init(&rng, 11);
    float *x = rumor_model_input_buf(m);
    int32_t *y = rumor_model_label_buf(m), *tok = rumor_model_token_buf(m);
    const size_t feat = (size_t)in.c * in.h * in.w;
    /* a gpt model's loss is over b sequences of in.w predictions each */
    const int count = spec.kind == RUMOR_MODEL_GPT ? b * in.w : b;
    if (tok)
        for (int i = 0; i < count; i++) tok[i] = (int32_t)rumor_rng_below(&rng, (uint64_t)in.classes);
    else
        for (size_t i = 0; i < (size_t)b * feat; i++) x[i] = (float)rumor_rng_normal(&rng);
    for (int i = 0; i < count; i++) y[i] = (int32_t)rumor_rng_below(&rng, (uint64_t)in.classes);
    /* Biases start at zero; give them values so their gradients are exercised off zero. */
    float *p = rumor_model_params(m);
    for (int t = 0; t < rumor_model_tensor_count(m); t++) {
        const rumor_tensor_info_t *ti = rumor_model_tensor(m, t);
        if (ti->ndim == 1)
            for (size_t j = 0; j < ti->count; j++) p[ti->offset + j] = (float)(0.1 * rumor_rng_normal(&rng));
    }
    double loss0 = 0;
    CHECK_RC(rumor_model_run(m, b, true, &loss0, NULL, err));
    const size_t n = rumor_model_param_count(m);
    float *g = malloc(n * sizeof *g);
    memcpy(g, rumor_model_grads(m), n * sizeof *g);

    /* Gradients accumulate: a second backward pass doubles them; zeroing clears them. */
    double loss1 = 0;
    CHECK_RC(rumor_model_run(m, b, true, &loss1, NULL, err));
    CHECK(loss1 == loss0);
    /* (not bit-exact: sgemm adds its K-blocks into what is there, in another order) */
    int doubled = 1;
    for (size_t i = 0; i < n; i++)
        doubled &= fabsf(rumor_model_grads(m)[i] - 2.0f * g[i]) <= 1e-5f * (1.0f + fabsf(g[i]));
    CHECK(doubled);
    rumor_model_zero_grads(m);
    const float h = 1e-3f;
    int checked = 0, bad = 0, kinks = 0;
    double worst = 0;
    for (int t = 0; t < rumor_model_tensor_count(m); t++) {
        const rumor_tensor_info_t *ti = rumor_model_tensor(m, t);
        size_t stride = ti->count > (size_t)per_tensor ? ti->count / (size_t)per_tensor : 1;
        for (size_t j = 0; j < ti->count; j += stride) {
            float *pj = p + ti->offset + j, saved = *pj;
            double lp = 0, lm = 0, l0 = 0;
            CHECK_RC(rumor_model_run(m, b, false, &l0, NULL, err));
            *pj = saved + h;
            CHECK_RC(rumor_model_run(m, b, false, &lp, NULL, err));
            *pj = saved - h;
            CHECK_RC(rumor_model_run(m, b, false, &lm, NULL, err));
            *pj = saved;
            double num = (lp - lm) / (2.0 * h * count), ana = g[ti->offset + j];
            double fwd = (lp - l0) / ((double)h * count), bwd = (l0 - lm) / ((double)h * count);
            if (fabs(fwd - bwd) > 0.02 * fmax(1e-2, fabs(fwd) + fabs(bwd))) {
                kinks++;
                continue;
            }
            double e = fabs(num - ana) / fmax(1e-2, fabs(num) + fabs(ana));
            worst = fmax(worst, e);
            if (e > 2e-2) {
                bad++;
                if (bad <= 5)
                    fprintf(stderr, "  %s %s[%zu]: analytic %.6g numeric %.6g\n", spec_s, ti->name, j, ana,
                            num);
            }
            checked++;
        }
    }
    CHECK_MSG(bad == 0, "%s: %d of %d gradient coordinates disagree", spec_s, bad, checked);
    CHECK_MSG(kinks * 5 <= checked, "%s: %d of %d coordinates sit on a kink", spec_s, kinks, checked);
    /* Padding between tensors never receives a gradient. */
    int pad_ok = 1;
    for (int t = 0; t + 1 < rumor_model_tensor_count(m); t++) {
        const rumor_tensor_info_t *ti = rumor_model_tensor(m, t), *next = rumor_model_tensor(m, t + 1);
        for (size_t j = ti->offset + ti->count; j < next->offset; j++) pad_ok &= g[j] == 0.0f && p[j] == 0.0f;
    }
    CHECK(pad_ok);
    fprintf(stderr, "gradcheck %s: %d coordinates, %d outside tolerance, %d on kinks, worst %.3g\n",
            spec_s, checked, bad, kinks, worst);
    free(g);
    rumor_model_destroy(&m);
    CHECK(m == NULL);
}

static void test_specs(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_model_spec_t s;
    CHECK_RC(rumor_model_spec_parse(&s, "mlp", err));
    CHECK(strcmp(s.canonical, "mlp:256,128") == 0);
    CHECK_RC(rumor_model_spec_parse(&s, "cnn", err));
    CHECK(strcmp(s.canonical, "cnn:16,32") == 0 && s.kind == RUMOR_MODEL_CNN);
    CHECK_RC(rumor_model_spec_parse(&s, "logreg", err));
    CHECK(s.n_hidden == 0);
    const char *bad[] = {"", "mlp:", "mlp:0", "mlp:12,", "mlp:1x", "mlp:-3", "cnn:4", "cnn:4,5,6",
                         "cnn:0,3", "resnet", "mlp:1,2,3,4,5,6,7,8", "mlp:99999999999"};
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(bad); i++) {
        err[0] = 0;
        CHECK_MSG(rumor_model_spec_parse(&s, bad[i], err) == RUMOR_EINVAL && err[0], "spec '%s'", bad[i]);
    }
}

static void test_layout(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_model_spec_t s;
    const rumor_model_input_t mnist = {1, 28, 28, 10, false};
    CHECK_RC(rumor_model_spec_parse(&s, "mlp:256,128", err));
    rumor_model_t *m = rumor_model_new(&s, mnist, be, 4, err);
    size_t real = 0;
    for (int t = 0; t < rumor_model_tensor_count(m); t++) {
        const rumor_tensor_info_t *ti = rumor_model_tensor(m, t);
        real += ti->count;
        CHECK(ti->offset % 16 == 0);
    }
    CHECK(real == 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
    CHECK(strcmp(rumor_model_tensor(m, 0)->name, "fc1.weight") == 0);
    CHECK(rumor_model_tensor(m, 0)->shape[0] == 256 && rumor_model_tensor(m, 0)->shape[1] == 784);
    CHECK(strcmp(rumor_model_tensor(m, 5)->name, "fc3.bias") == 0);
    /* 1.0 MFLOP per training sample: 2 FLOPs a weight forward, 2 for its gradient and 2 for
     * the input gradient of every layer but the first. */
    CHECK_NEAR(rumor_model_flops(m, true), 2.0 * (784 * 256 + 256 * 128 + 128 * 10) * 2 +
                                               2.0 * (256 * 128 + 128 * 10), 1);
    uint64_t id = rumor_model_layout_id(m);
    rumor_model_t *same = rumor_model_new(&s, mnist, be, 64, err);
    CHECK(rumor_model_layout_id(same) == id); /* the batch size is not part of the layout */
    rumor_model_destroy(&same);
    CHECK_RC(rumor_model_spec_parse(&s, "mlp:256,127", err));
    rumor_model_t *other = rumor_model_new(&s, mnist, be, 4, err);
    CHECK(rumor_model_layout_id(other) != id);
    rumor_model_destroy(&other);
    /* The id is the layout's (PROTOCOL.md "Layouts"): FNV-1a 64 of the names and shapes alone. */
    {
        const char *text = "rumor-layout-2\nfc1.weight:256,784\nfc1.bias:256\nfc2.weight:128,256\nfc2.bias:128\n"
                           "fc3.weight:10,128\nfc3.bias:10\n";
        uint64_t h = 0xcbf29ce484222325ULL;
        for (const char *c = text; *c; c++) h = (h ^ (uint8_t)*c) * 0x100000001b3ULL;
        CHECK(id == h);
    }
    /* Same seed, same parameters; another seed, others. */
    CHECK_RC(rumor_model_spec_parse(&s, "mlp:256,128", err));
    rumor_model_t *a = rumor_model_new(&s, mnist, be, 4, err), *b = rumor_model_new(&s, mnist, be, 4, err);
    CHECK_RC(rumor_model_init(m, 5));
    CHECK_RC(rumor_model_init(a, 5));
    CHECK_RC(rumor_model_init(b, 6));
    size_t n = rumor_model_param_count(m);
    CHECK(memcmp(rumor_model_params(m), rumor_model_params(a), n * 4) == 0);
    CHECK(memcmp(rumor_model_params(m), rumor_model_params(b), n * 4) != 0);
    /* He init: fc1.weight has variance near 2/784. */
    double ss = 0;
    const rumor_tensor_info_t *w1 = rumor_model_tensor(m, 0);
    for (size_t j = 0; j < w1->count; j++) ss += (double)rumor_model_params(m)[j] * rumor_model_params(m)[j];
    CHECK_NEAR(ss / (double)w1->count, 2.0 / 784, 0.05 * 2.0 / 784);
    rumor_model_destroy(&a);
    rumor_model_destroy(&b);
    rumor_model_destroy(&m);

    /* The CNN's layout matches PyTorch's state_dict of the reference network. */
    CHECK_RC(rumor_model_spec_parse(&s, "cnn", err));
    m = rumor_model_new(&s, mnist, be, 2, err);
    CHECK(rumor_model_tensor_count(m) == 6);
    const rumor_tensor_info_t *c1 = rumor_model_tensor(m, 0), *fc = rumor_model_tensor(m, 4);
    CHECK(strcmp(c1->name, "conv1.weight") == 0 && c1->ndim == 4 && c1->shape[0] == 16 &&
          c1->shape[1] == 1 && c1->shape[2] == 5 && c1->shape[3] == 5);
    CHECK(strcmp(fc->name, "fc1.weight") == 0 && fc->shape[0] == 10 && fc->shape[1] == 512);
    rumor_model_destroy(&m);
    /* A CNN on an input it cannot reduce is refused with a reason. */
    m = rumor_model_new(&s, (rumor_model_input_t){1, 10, 10, 10, false}, be, 2, err);
    CHECK(m == NULL && strstr(err, "cnn"));
}

/* nanoGPT's names and shapes, in its state_dict's order (the tied lm_head stored once), and the
 * shapes a gpt model refuses. */
static void test_gpt_layout(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_model_spec_t s;
    CHECK_RC(rumor_model_spec_parse(&s, "gpt:4,4,128,64", err));
    CHECK(s.kind == RUMOR_MODEL_GPT && s.layers == 4 && s.heads == 4 && s.dim == 128 && s.ctx == 64 &&
          strcmp(s.canonical, "gpt:4,4,128,64") == 0);
    rumor_model_t *m = rumor_model_new(&s, (rumor_model_input_t){1, 1, 64, 256, false}, be, 2, err);
    CHECK_MSG(m != NULL, "%s", err);
    if (!m) return;
    CHECK(rumor_model_tensor_count(m) == 4 + 12 * 4);
    const rumor_tensor_info_t *t0 = rumor_model_tensor(m, 0), *t4 = rumor_model_tensor(m, 4);
    const rumor_tensor_info_t *last = rumor_model_tensor(m, 51), *proj = rumor_model_tensor(m, 2 + 12 + 10);
    CHECK(strcmp(t0->name, "transformer.wte.weight") == 0 && t0->shape[0] == 256 && t0->shape[1] == 128);
    CHECK(strcmp(t4->name, "transformer.h.0.attn.c_attn.weight") == 0 && t4->shape[0] == 384 && t4->shape[1] == 128);
    CHECK(strcmp(proj->name, "transformer.h.1.mlp.c_proj.weight") == 0 && proj->shape[0] == 128 &&
          proj->shape[1] == 512);
    CHECK(strcmp(last->name, "transformer.ln_f.bias") == 0);
    /* 12 C^2 + 13 C a block, embeddings (V + T) C, ln_f 2C: nanoGPT's count with the head tied */
    size_t n = 0;
    for (int i = 0; i < rumor_model_tensor_count(m); i++) n += rumor_model_tensor(m, i)->count;
    CHECK(n == 4 * (12 * 128 * 128 + 13 * 128) + (256 + 64) * 128 + 2 * 128);
    /* GPT-2's initialisation: LayerNorm weights 1, biases 0, residual projections narrower */
    CHECK_RC(rumor_model_init(m, 5));
    const float *p = rumor_model_params(m);
    const rumor_tensor_info_t *ln = rumor_model_tensor(m, 2), *qkv = rumor_model_tensor(m, 4);
    double sq_qkv = 0, sq_proj = 0;
    for (size_t j = 0; j < qkv->count; j++) sq_qkv += (double)p[qkv->offset + j] * p[qkv->offset + j];
    for (size_t j = 0; j < proj->count; j++) sq_proj += (double)p[proj->offset + j] * p[proj->offset + j];
    CHECK(p[ln->offset] == 1.0f && p[ln->offset + 127] == 1.0f && p[rumor_model_tensor(m, 5)->offset] == 0.0f);
    CHECK_NEAR(sqrt(sq_qkv / qkv->count), 0.02, 0.001);
    CHECK_NEAR(sqrt(sq_proj / proj->count), 0.02 / sqrt(8.0), 0.0005);
    rumor_model_destroy(&m);
    const char *bad[] = {"gpt:4,3,128,64", "gpt:25,4,128,64", "gpt:4,4,128", "gpt:0,4,128,64"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK_MSG(rumor_model_spec_parse(&s, bad[i], err) == RUMOR_EINVAL, "%s accepted", bad[i]);
    CHECK_RC(rumor_model_spec_parse(&s, "gpt:1,1,8,4", err));
    m = rumor_model_new(&s, (rumor_model_input_t){1, 28, 28, 10, false}, be, 2, err);
    CHECK(m == NULL && strstr(err, "takes windows of 4 tokens"));
}

/* An evaluation by rows: slices of the input buffer give what one forward over all of it
 * gives (within float32 rounding: OpenBLAS may multiply a thin slice with another kernel, in
 * another order), the gradients untouched; a cnn and rows beyond the buffer are refused. */
static void test_eval_rows(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_model_spec_t spec;
    const rumor_model_input_t in = {1, 8, 8, 7, false};
    const int B = 150;
    CHECK_RC(rumor_model_spec_parse(&spec, "mlp:12", err));
    rumor_model_t *m = rumor_model_new(&spec, in, be, B, err);
    CHECK_MSG(m != NULL, "%s", err);
    if (!m) return;
    CHECK_RC(rumor_model_init(m, 4));
    rumor_rng_t rng;
    rumor_rng_init(&rng, 12);
    float *x = rumor_model_input_buf(m);
    int32_t *y = rumor_model_label_buf(m);
    for (size_t i = 0; i < (size_t)B * 64; i++) x[i] = (float)rumor_rng_normal(&rng);
    for (int i = 0; i < B; i++) y[i] = (int32_t)rumor_rng_below(&rng, 7);
    double whole = 0.0, sliced = 0.0;
    long right = 0, right_sliced = 0;
    CHECK_RC(rumor_model_run(m, B, false, &whole, &right, err));
    for (int first = 0; first < B; first += 64)
        CHECK_RC(rumor_model_eval_rows(m, first, B - first < 64 ? B - first : 64, &sliced, &right_sliced, err));
    CHECK_MSG(fabs(sliced - whole) <= 1e-6 * fabs(whole) && right_sliced == right, "loss %.12g against %.12g, right %ld "
              "against %ld", sliced, whole, right_sliced, right);
    CHECK(right > 0 && right < B); /* (a forward that ran: neither none nor all of random labels) */
    /* the last sample alone, as row B-1 or as the only one of a batch */
    double one = 0.0, alone = 0.0;
    CHECK_RC(rumor_model_eval_rows(m, B - 1, 1, &one, NULL, err));
    memmove(x, x + (size_t)(B - 1) * 64, 64 * sizeof *x);
    y[0] = y[B - 1];
    CHECK_RC(rumor_model_run(m, 1, false, &alone, NULL, err));
    CHECK_MSG(one == alone, "row %d alone: %.9g against %.9g", B - 1, one, alone);
    const float *g = rumor_model_grads(m);
    int nonzero = 0;
    for (size_t i = 0; i < rumor_model_param_count(m); i++) nonzero += g[i] != 0.0f;
    CHECK(nonzero == 0);
    CHECK(rumor_model_eval_rows(m, B - 10, 11, NULL, NULL, err) == RUMOR_EINVAL);
    CHECK(rumor_model_eval_rows(m, -1, 2, NULL, NULL, err) == RUMOR_EINVAL);
    CHECK(rumor_model_eval_rows(m, 0, 0, NULL, NULL, err) == RUMOR_EINVAL);
    rumor_model_destroy(&m);
    CHECK_RC(rumor_model_spec_parse(&spec, "cnn:2,3", err));
    m = rumor_model_new(&spec, (rumor_model_input_t){1, 16, 16, 4, false}, be, 4, err);
    CHECK(m != NULL && rumor_model_eval_rows(m, 0, 2, NULL, NULL, err) == RUMOR_EINVAL);
    rumor_model_destroy(&m);
}

int main(void)
{
    char err[RUMOR_ERR_LEN];
    be = rumor_backend_new("cpu", 1, err);
    if (!be) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    test_specs();
    test_layout();
    gradcheck("logreg", (rumor_model_input_t){1, 6, 5, 4, false}, 5, 1000);
    gradcheck("mlp:7,6", (rumor_model_input_t){1, 4, 5, 3, false}, 6, 1000);
    gradcheck("mlp:9,8,7", (rumor_model_input_t){1, 3, 3, 5, false}, 4, 1000);
    gradcheck("cnn:3,4", (rumor_model_input_t){1, 16, 16, 5, false}, 3, 200);
    gradcheck("cnn:2,3", (rumor_model_input_t){2, 16, 16, 4, false}, 2, 200);
    gradcheck("cnn:4,6", (rumor_model_input_t){1, 28, 28, 10, false}, 2, 60);
    /* GPT-2: two blocks, two heads of 8, 6 positions, 23 tokens; tied head and embedding */
    gradcheck("gpt:2,2,16,6", (rumor_model_input_t){1, 1, 6, 23, true}, 3, 40);
    test_gpt_layout();
    test_eval_rows();
    rumor_backend_destroy(&be);
    return check_done();
}
