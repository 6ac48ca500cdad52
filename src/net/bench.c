/*
 * bench.c - `rumor bench net`: a model sent between two real nodes (admission, framing,
 * chunking, CURVE, the node's poll loop) against raw libzmq CURVE moving the same bytes in
 * the same chunks between two sockets, in one run.
 */
#include "bench.h"

#include "crypto.h"
#include "node.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

static long status_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t len = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, len) == 0) v = atol(line + len + 1);
    if (f) fclose(f);
    return v;
}

/* ---- two nodes ---- */

#define MAX_ROUNDS 64

typedef struct {
    rumor_node_t *a, *b;
    const float *params;
    float *recv;
    size_t n, chunk;
    int rounds;                  /* warm-up round 0, then the measured ones */
    atomic_int sent, received;   /* rounds started by a, completed at b */
    atomic_int in_flight;
    uint32_t chunks_seen;
    double start[MAX_ROUNDS], end[MAX_ROUNDS];
    atomic_bool done;
} pair_t;

static void release_cb(void *arg)
{
    atomic_store(&((pair_t *)arg)->in_flight, 0);
}

static void tick_a(void *arg, rumor_node_t *node, uint64_t now)
{
    (void)now;
    pair_t *p = arg;
    int r = atomic_load(&p->sent);
    if (r >= p->rounds || rumor_node_peer_count(node) < 1) return;
    if (atomic_load(&p->received) < r || atomic_load(&p->in_flight)) return; /* one model at a time */
    atomic_store(&p->in_flight, 1);
    p->start[r] = rumor_now();
    const rumor_wire_model_t m = {.head = {.round = (uint64_t)r, .layout = 1, .codec = RUMOR_CODEC_F32}, .w = 1.0,
                                  .params = p->params, .count = p->n, .chunk_params = p->chunk};
    if (rumor_node_send(node, rumor_node_peer_key(node, 0), &m, release_cb, p) != RUMOR_OK) {
        atomic_store(&p->in_flight, 0);
        return;
    }
    atomic_store(&p->sent, r + 1);
}

static void chunk_b(void *arg, const uint8_t peer[32], const rumor_msg_model_t *c)
{
    (void)peer;
    pair_t *p = arg;
    const void *payload = c->payload;
    const size_t len = c->payload_len;
    if (c->off + c->n > p->n || len != c->n * sizeof(float)) return;
    memcpy(p->recv + c->off, payload, len); /* where mixing would accumulate */
    if (++p->chunks_seen == c->chunks) {
        p->chunks_seen = 0;
        p->end[c->round] = rumor_now();
        atomic_store(&p->received, (int)c->round + 1);
        if ((int)c->round + 1 >= p->rounds) atomic_store(&p->done, true);
    }
}

typedef struct {
    rumor_node_t *node;
    rumor_err_t rc;
    char err[RUMOR_ERR_LEN];
} runner_t;

static void *run_node(void *arg)
{
    runner_t *r = arg;
    r->rc = rumor_node_run(r->node, r->err);
    return NULL;
}

static rumor_err_t make_identity(const char *dir, const char *name, rumor_authority_t *auth, char *err)
{
    char path[512];
    rumor_secret_key_t *k = rumor_secret_key_generate(err);
    if (!k) return RUMOR_ENOMEM;
    uint8_t cert[RUMOR_CERT_MAX_LEN];
    size_t len;
    uint64_t now = (uint64_t)time(NULL);
    rumor_err_t rc;
    snprintf(path, sizeof path, "%s/%s.key", dir, name);
    if ((rc = rumor_secret_key_save(k, path, true, err)) != RUMOR_OK) goto out;
    if ((rc = rumor_cert_issue(cert, &len, auth, rumor_secret_key_public(k), name, now - 60, now + 3600, err)) !=
        RUMOR_OK)
        goto out;
    snprintf(path, sizeof path, "%s/%s.cert", dir, name);
    rc = rumor_cert_save(path, cert, len, true, err);
out:
    rumor_secret_key_destroy(&k);
    return rc;
}

static rumor_err_t bench_nodes(size_t n, size_t chunk, int repeat, double *mbps, long *peak_kb, char *err)
{
    char dir[] = "/tmp/rumor-bench-net-XXXXXX", path[512], swarm[512];
    if (!mkdtemp(dir)) return rumor_fail(err, RUMOR_EIO, "cannot make a temporary folder");
    rumor_err_t rc = RUMOR_OK;
    rumor_authority_t *auth = rumor_authority_generate(err);
    pair_t *p = calloc(1, sizeof *p);
    float *params = malloc(n * sizeof *params);
    runner_t ra = {0}, rb = {0};
    pthread_t ta, tb;
    bool started_a = false, started_b = false;
    if (!auth || !p || !params) {
        rc = rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) params[i] = (float)(i % 1000) * 1e-3f;
    snprintf(swarm, sizeof swarm, "%s/authority.pub", dir);
    if ((rc = rumor_public_key_save(swarm, rumor_authority_public(auth), NULL, true, err)) != RUMOR_OK ||
        (rc = make_identity(dir, "a", auth, err)) != RUMOR_OK || (rc = make_identity(dir, "b", auth, err)) != RUMOR_OK)
        goto out;

    char ka[512], ca[512], kb[512], cb[512];
    snprintf(ka, sizeof ka, "%s/a.key", dir);
    snprintf(ca, sizeof ca, "%s/a.cert", dir);
    snprintf(kb, sizeof kb, "%s/b.key", dir);
    snprintf(cb, sizeof cb, "%s/b.cert", dir);
    rumor_node_config_t cfg_b = {.listen = "tcp://127.0.0.1:0", .key_path = kb, .cert_path = cb, .swarm = swarm,
                                 .memb = rumor_memb_defaults()};
    if (!(p->b = rumor_node_new(&cfg_b, err))) {
        rc = rumor_last_error();
        goto out;
    }
    rumor_node_config_t cfg_a = {.listen = "tcp://127.0.0.1:0", .key_path = ka, .cert_path = ca, .swarm = swarm,
                                 .memb = rumor_memb_defaults(), .n_bootstraps = 1, .join_timeout_ms = 10000};
    cfg_a.bootstraps[0] = rumor_node_address(p->b);
    if (!(p->a = rumor_node_new(&cfg_a, err))) {
        rc = rumor_last_error();
        goto out;
    }
    p->params = params;
    p->n = n;
    p->chunk = chunk;
    p->rounds = repeat + 1 > MAX_ROUNDS ? MAX_ROUNDS : repeat + 1;
    /* Reset the peak so it is this run's, not an earlier size's (Linux: clear_refs 5). */
    FILE *cr = fopen("/proc/self/clear_refs", "w");
    if (cr) {
        fputs("5", cr);
        fclose(cr);
    }
    const long idle = status_kb("VmRSS");
    p->recv = malloc(n * sizeof *p->recv);
    if (!p->recv) {
        rc = rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        goto out;
    }
    rumor_node_on_tick(p->a, tick_a, p);
    rumor_node_on_chunk(p->b, chunk_b, p);
    ra.node = p->a;
    rb.node = p->b;
    started_b = pthread_create(&tb, NULL, run_node, &rb) == 0;
    started_a = started_b && pthread_create(&ta, NULL, run_node, &ra) == 0;
    const double deadline = rumor_now() + 30.0 + (double)n * sizeof(float) * p->rounds / 50e6;
    while (!atomic_load(&p->done) && rumor_now() < deadline) usleep(1000);
    rumor_node_stop(p->a);
    rumor_node_stop(p->b);
    if (started_a) pthread_join(ta, NULL);
    if (started_b) pthread_join(tb, NULL);
    if (!atomic_load(&p->done)) {
        rc = rumor_fail(err, RUMOR_ETIMEDOUT, "the model did not arrive in time (%d of %d rounds)%s%s",
                        atomic_load(&p->received), p->rounds, ra.rc ? ": " : "", ra.rc ? ra.err : "");
        goto out;
    }
    if (memcmp(p->recv, params, n * sizeof *params) != 0) {
        rc = rumor_fail(err, RUMOR_EPROTO, "the model arrived different from what was sent");
        goto out;
    }
    double rates[MAX_ROUNDS];
    int k = 0;
    for (int r = 1; r < p->rounds; r++) rates[k++] = (double)n * sizeof(float) / (p->end[r] - p->start[r]) / 1e6;
    *mbps = rumor_median(rates, (size_t)k);
    *peak_kb = status_kb("VmHWM") - idle;
out:
    if (p) {
        rumor_node_destroy(&p->a);
        rumor_node_destroy(&p->b);
        free(p->recv);
    }
    free(p);
    free(params);
    rumor_authority_destroy(&auth);
    const char *files[] = {"a.key", "a.cert", "b.key", "b.cert", "authority.pub"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    return rc;
}

/* ---- raw libzmq CURVE: the same bytes, the same chunks, two sockets ---- */

typedef struct {
    void *sock;
    const float *params;
    size_t n, chunk;
    int rounds;
    atomic_int go; /* rounds the receiver asked for: one model at a time, as the nodes do */
} raw_sender_t;

static void *raw_send(void *arg)
{
    raw_sender_t *s = arg;
    for (int r = 0; r < s->rounds; r++) {
        while (atomic_load(&s->go) <= r) usleep(20);
        for (size_t off = 0; off < s->n; off += s->chunk) {
            size_t cnt = s->n - off < s->chunk ? s->n - off : s->chunk;
            zmq_msg_t m;
            zmq_msg_init_data(&m, (void *)(s->params + off), cnt * sizeof(float), NULL, NULL);
            if (zmq_msg_send(&m, s->sock, 0) < 0) {
                zmq_msg_close(&m);
                return NULL;
            }
        }
    }
    return NULL;
}

static rumor_err_t bench_raw(size_t n, size_t chunk, int repeat, double *mbps, char *err)
{
    uint8_t spub[32], ssec[32], cpub[32], csec[32];
    char z[41];
    rumor_secret_key_t *ks = rumor_secret_key_generate(err), *kc = rumor_secret_key_generate(err);
    if (!ks || !kc) return RUMOR_ENOMEM;
    memcpy(spub, rumor_secret_key_public(ks), 32);
    memcpy(ssec, rumor_secret_key_bytes(ks), 32);
    memcpy(cpub, rumor_secret_key_public(kc), 32);
    memcpy(csec, rumor_secret_key_bytes(kc), 32);
    rumor_secret_key_destroy(&ks);
    rumor_secret_key_destroy(&kc);
    (void)z;
    void *ctx = zmq_ctx_new();
    void *pull = zmq_socket(ctx, ZMQ_PULL), *push = zmq_socket(ctx, ZMQ_PUSH);
    int one = 1;
    zmq_setsockopt(pull, ZMQ_CURVE_SERVER, &one, sizeof one);
    zmq_setsockopt(pull, ZMQ_CURVE_SECRETKEY, ssec, 32);
    zmq_setsockopt(push, ZMQ_CURVE_SERVERKEY, spub, 32);
    zmq_setsockopt(push, ZMQ_CURVE_PUBLICKEY, cpub, 32);
    zmq_setsockopt(push, ZMQ_CURVE_SECRETKEY, csec, 32);
    char ep[128];
    size_t len = sizeof ep;
    int timeout = 10000, zero = 0;
    zmq_setsockopt(pull, ZMQ_RCVTIMEO, &timeout, sizeof timeout); /* never hang the benchmark */
    zmq_setsockopt(push, ZMQ_SNDTIMEO, &timeout, sizeof timeout);
    zmq_setsockopt(push, ZMQ_LINGER, &zero, sizeof zero);
    if (zmq_bind(pull, "tcp://127.0.0.1:*") != 0 || zmq_getsockopt(pull, ZMQ_LAST_ENDPOINT, ep, &len) != 0 ||
        zmq_connect(push, ep) != 0) {
        zmq_close(push);
        zmq_close(pull);
        zmq_ctx_term(ctx);
        return rumor_fail(err, RUMOR_EIO, "raw CURVE pair: %s", zmq_strerror(errno));
    }
    float *params = malloc(n * sizeof *params), *recv = malloc(n * sizeof *recv);
    for (size_t i = 0; i < n; i++) params[i] = (float)(i % 1000) * 1e-3f;
    const int rounds = repeat + 1 > MAX_ROUNDS ? MAX_ROUNDS : repeat + 1;
    raw_sender_t s = {.sock = push, .params = params, .n = n, .chunk = chunk, .rounds = rounds};
    atomic_init(&s.go, 0);
    pthread_t t;
    pthread_create(&t, NULL, raw_send, &s);
    double rates[MAX_ROUNDS];
    int k = 0;
    bool failed = false;
    for (int r = 0; r < rounds && !failed; r++) {
        const double t0 = rumor_now();
        atomic_store(&s.go, r + 1);
        for (size_t off = 0; off < n && !failed; off += chunk) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, pull, 0) < 0) {
                zmq_msg_close(&m);
                failed = true;
                break;
            }
            size_t got = zmq_msg_size(&m);
            if (off * sizeof(float) + got <= n * sizeof(float)) memcpy((char *)recv + off * sizeof(float), zmq_msg_data(&m), got);
            zmq_msg_close(&m);
        }
        if (r > 0 && !failed) rates[k++] = (double)n * sizeof(float) / (rumor_now() - t0) / 1e6;
    }
    if (failed) atomic_store(&s.go, rounds + 1); /* let the sender run out (its sends time out) */
    pthread_join(t, NULL);
    zmq_close(push);
    zmq_close(pull);
    zmq_ctx_term(ctx);
    free(params);
    free(recv);
    if (failed || k == 0) return rumor_fail(err, RUMOR_ETIMEDOUT, "raw CURVE pair: nothing arrived for 10 s");
    *mbps = rumor_median(rates, (size_t)k);
    return RUMOR_OK;
}

rumor_err_t rumor_net_bench(size_t n_params, size_t chunk_params, int repeat, rumor_net_bench_t *out,
                            char err[RUMOR_ERR_LEN])
{
    memset(out, 0, sizeof *out);
    const int level = rumor_log_level; /* two nodes joining each other is not news here */
    rumor_log_level = RUMOR_LOG_WARN;
    rumor_err_t rc = bench_nodes(n_params, chunk_params, repeat, &out->rumor_mbps, &out->peak_kb, err);
    rumor_log_level = level;
    if (rc != RUMOR_OK) return rc;
    rc = bench_raw(n_params, chunk_params, repeat, &out->raw_mbps, err);
    out->ratio = out->raw_mbps > 0 ? out->rumor_mbps / out->raw_mbps : 0;
    return rc;
}
