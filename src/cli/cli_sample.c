/* cli_sample.c - `rumor sample`: text from a gpt model, a token at a time. */
#include "backend.h"
#include "checkpoint.h"
#include "cli.h"
#include "model.h"
#include "rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The next token from logits z[V]: the k most likely (0: all) at temperature temp (0: the most
 * likely), drawn from rng. */
static int pick(const float *z, int V, float temp, int k, rumor_rng_t *rng, double *p, int *idx)
{
    int best = 0;
    for (int i = 1; i < V; i++)
        if (z[i] > z[best]) best = i;
    if (temp <= 0.0f || k == 1) return best;
    for (int i = 0; i < V; i++) idx[i] = i;
    int n = V;
    if (k > 0 && k < V) { /* the k largest, by partial selection */
        for (int a = 0; a < k; a++) {
            int m = a;
            for (int b = a + 1; b < V; b++)
                if (z[idx[b]] > z[idx[m]]) m = b;
            const int t = idx[a];
            idx[a] = idx[m], idx[m] = t;
        }
        n = k;
    }
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += p[i] = exp(((double)z[idx[i]] - z[best]) / temp);
    double u = rumor_rng_uniform(rng) * sum;
    for (int i = 0; i < n; i++)
        if ((u -= p[i]) < 0.0) return idx[i];
    return idx[n - 1];
}

int cmd_sample(int argc, char **argv)
{
    const char *prompt = "", *device = "cpu";
    int tokens = 200, top_k = 0, threads = 1;
    float temperature = 0.8f;
    uint64_t seed = 1;
    bool help = false;
    const cli_opt_t opts[] = {
        {"--prompt", OPT_STR, &prompt, NULL, "text to begin with (default: none)"},
        {"--tokens", OPT_INT, &tokens, NULL, "tokens to make (default 200)"},
        {"--temperature", OPT_FLOAT, &temperature, NULL, "0: always the most likely; higher: bolder (default 0.8)"},
        {"--top-k", OPT_INT, &top_k, NULL, "draw among the k most likely only (default 0: all)"},
        {"--seed", OPT_U64, &seed, NULL, "of the draws (default 1)"},
        {"--device", OPT_STR, &device, NULL, "cpu | cuda | auto (default cpu)"},
        {"--threads", OPT_INT, &threads, NULL, "compute threads (default 1)"},
        {"--help", OPT_FLAG, &help, NULL, "this help"},
    };
    const char *pos[1];
    const int done = cli_parse_model_file(argc, argv, opts, (int)RUMOR_ARRAY_LEN(opts),
                                          "usage: rumor sample MODEL.safetensors [options]\n\nText from a gpt model, "
                                          "printed as it is made: bytes for a model of bytes, token ids one a line "
                                          "for one of token files.",
                                          "sample needs a gpt model file: rumor sample MODEL.safetensors", pos);
    if (done >= 0) return done;
    if (tokens < 0 || tokens > 1000000) {
        cli_error("--tokens %d: expected 0..1000000", tokens);
        return 2;
    }
    if (!(temperature >= 0.0f && temperature <= 100.0f)) {
        cli_error("--temperature %g: expected a number in [0, 100]", (double)temperature);
        return 2;
    }
    if (top_k < 0 || threads < 1 || threads > 1024) {
        cli_error(top_k < 0 ? "--top-k %d: expected 0 or more" : "--threads %d: expected 1..1024", top_k < 0 ? top_k : threads);
        return 2;
    }
    char err[RUMOR_ERR_LEN];
    rumor_model_spec_t spec = {0};
    rumor_model_input_t in = {0};
    rumor_checkpoint_info_t info;
    rumor_backend_t *be = NULL;
    rumor_model_t *m = NULL;
    int32_t *ctx = NULL, *idx = NULL, *zeros = NULL;
    float *z = NULL;
    double *p = NULL;
    rumor_err_t rc = rumor_checkpoint_peek(pos[0], &spec, &in, &info, err);
    if (rc == RUMOR_OK && spec.kind != RUMOR_MODEL_GPT)
        rc = rumor_fail(err, RUMOR_EINVAL, "%s: a %s model classifies, it does not write (sample takes gpt models)",
                        pos[0], spec.canonical);
    const int T = spec.ctx, V = in.classes;
    const bool bytes = !in.ids;
    const size_t plen = strlen(prompt);
    if (rc == RUMOR_OK && !bytes && plen)
        rc = rumor_fail(err, RUMOR_EINVAL, "%s works on token ids of its own tokenizer: --prompt is text (a model of "
                        "bytes takes it)", pos[0]);
    if (rc == RUMOR_OK && !(be = rumor_backend_new(device, threads, err))) rc = rumor_last_error();
    if (rc == RUMOR_OK && !(m = rumor_model_new(&spec, in, be, 1, err))) rc = rumor_last_error();
    if (rc == RUMOR_OK) rc = rumor_checkpoint_load(pos[0], m, NULL, NULL, err);
    const size_t cap = plen + (size_t)tokens + 1;
    if (rc == RUMOR_OK && (!(ctx = calloc(cap, sizeof *ctx)) || !(idx = malloc((size_t)V * sizeof *idx)) ||
                           !(z = malloc((size_t)V * sizeof *z)) || !(p = malloc((size_t)V * sizeof *p)) ||
                           !(zeros = calloc((size_t)T, sizeof *zeros))))
        rc = rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    size_t n = 0;
    if (rc == RUMOR_OK) {
        for (; n < plen; n++) ctx[n] = (unsigned char)prompt[n];
        if (!bytes) {
            ctx[n++] = 0; /* token files: a start of zero */
            fprintf(stderr, "rumor: %s is a model of token ids: they follow, one a line (its tokenizer makes "
                    "them text)\n", pos[0]);
        }
        if (n == 0) ctx[n++] = '\n'; /* bytes without a prompt: a fresh line */
        fwrite(prompt, 1, plen, stdout);
        fflush(stdout);
    }
    /* The targets the loss reads go unused: zeros, once. */
    if (rc == RUMOR_OK) be->ops->upload(be, rumor_model_label_buf(m), zeros, (size_t)T * sizeof *zeros);
    rumor_rng_t rng;
    rumor_rng_init2(&rng, seed, 0x5a3e, 0);
    int32_t window[8192] = {0};
    for (int made = 0; rc == RUMOR_OK && made < tokens; made++) {
        /* The last T tokens (fewer at first: causal attention never looks past the last one,
         * whatever follows it in the window). */
        const size_t from = n > (size_t)T ? n - (size_t)T : 0, len = n - from;
        memset(window, 0, (size_t)T * sizeof *window);
        for (size_t i = 0; i < len; i++) window[i] = ctx[from + i];
        be->ops->upload(be, rumor_model_token_buf(m), window, (size_t)T * sizeof *window);
        if ((rc = rumor_model_run(m, 1, false, NULL, NULL, err)) != RUMOR_OK) break;
        /* the last position's logits only */
        be->ops->download(be, z, rumor_model_logits(m) + (len - 1) * (size_t)V, (size_t)V * sizeof *z);
        const int next = pick(z, V, temperature, top_k, &rng, p, idx);
        ctx[n++] = next;
        if (bytes) putchar(next);
        else printf("%d\n", next);
        fflush(stdout);
    }
    if (bytes && rc == RUMOR_OK) putchar('\n');
    free(ctx), free(idx), free(z), free(p), free(zeros);
    rumor_model_destroy(&m);
    rumor_backend_destroy(&be);
    if (rc != RUMOR_OK) {
        cli_error("%s", err);
        return cli_exit_code(rc);
    }
    return 0;
}
