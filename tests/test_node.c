/* test_node.c - two real nodes in one process, over CURVE on loopback: a model between them
 * arrives bit for bit, in chunks whose last one is short, and the receiver's memory stays
 * within the model plus a bounded margin; and each node stops on its own. */
#include "check.h"
#include "crypto.h"
#include "bench.h"
#include "node.h"
#include "node_impl.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    rumor_node_t *node;
    rumor_err_t rc;
    char err[RUMOR_ERR_LEN];
    atomic_bool ended;
} runner_t;

static void *run_node(void *arg)
{
    runner_t *r = arg;
    r->rc = rumor_node_run(r->node, r->err);
    atomic_store(&r->ended, true);
    return NULL;
}

static void identity(const char *dir, const char *name, rumor_authority_t *auth)
{
    char path[600], err[RUMOR_ERR_LEN];
    rumor_secret_key_t *k = rumor_secret_key_generate(err);
    CHECK(k != NULL);
    if (!k) return;
    uint8_t cert[RUMOR_CERT_MAX_LEN];
    size_t len = 0;
    const uint64_t now = (uint64_t)time(NULL);
    snprintf(path, sizeof path, "%s/%s.key", dir, name);
    CHECK_RC(rumor_secret_key_save(k, path, true, err));
    CHECK_RC(rumor_cert_issue(cert, &len, auth, rumor_secret_key_public(k), name, now - 60, now + 3600, err));
    snprintf(path, sizeof path, "%s/%s.cert", dir, name);
    CHECK_RC(rumor_cert_save(path, cert, len, true, err));
    rumor_secret_key_destroy(&k);
}

/* Whether r's loop ended within ms milliseconds. */
static bool ends_within(runner_t *r, int ms)
{
    for (int t = 0; t < ms && !atomic_load(&r->ended); t += 10) usleep(10000);
    return atomic_load(&r->ended);
}

/* Two nodes of one swarm in one process: stopping one leaves the other running. */
static void test_independent_stop(void)
{
    char dir[] = "/tmp/rumor-test-node-XXXXXX", swarm[600], k[2][600], c[2][600], err[RUMOR_ERR_LEN];
    CHECK(mkdtemp(dir) != NULL);
    rumor_authority_t *auth = rumor_authority_generate(err);
    CHECK(auth != NULL);
    if (!auth) return;
    snprintf(swarm, sizeof swarm, "%s/authority.pub", dir);
    CHECK_RC(rumor_public_key_save(swarm, rumor_authority_public(auth), NULL, true, err));
    const char *names[2] = {"a", "b"};
    for (int i = 0; i < 2; i++) {
        identity(dir, names[i], auth);
        snprintf(k[i], sizeof k[i], "%s/%s.key", dir, names[i]);
        snprintf(c[i], sizeof c[i], "%s/%s.cert", dir, names[i]);
    }
    runner_t r[2] = {0};
    rumor_node_config_t cb = {.listen = "tcp://127.0.0.1:0", .key_path = k[1], .cert_path = c[1], .swarm = swarm,
                              .memb = rumor_memb_defaults()};
    r[1].node = rumor_node_new(&cb, err);
    CHECK_MSG(r[1].node != NULL, "%s", err);
    if (r[1].node) {
        rumor_node_config_t ca = {.listen = "tcp://127.0.0.1:0", .key_path = k[0], .cert_path = c[0],
                                  .swarm = swarm, .memb = rumor_memb_defaults(), .n_bootstraps = 1,
                                  .join_timeout_ms = 10000};
        ca.bootstraps[0] = rumor_node_address(r[1].node);
        r[0].node = rumor_node_new(&ca, err);
        CHECK_MSG(r[0].node != NULL, "%s", err);
    }
    pthread_t th[2];
    bool started[2] = {false, false};
    for (int i = 0; i < 2 && r[0].node && r[1].node; i++)
        started[i] = pthread_create(&th[i], NULL, run_node, &r[i]) == 0;
    if (started[0] && started[1]) {
        usleep(300 * 1000);
        rumor_node_stop(r[0].node);
        CHECK_MSG(ends_within(&r[0], 5000), "node a did not stop within 5 s");
        CHECK_MSG(!ends_within(&r[1], 500), "node b stopped with node a");
        rumor_node_stop(r[1].node);
        CHECK_MSG(ends_within(&r[1], 5000), "node b did not stop within 5 s");
        CHECK_MSG(r[0].rc == RUMOR_OK && r[1].rc == RUMOR_OK, "%s / %s", r[0].err, r[1].err);
    }
    for (int i = 0; i < 2; i++) {
        if (started[i]) {
            if (!atomic_load(&r[i].ended)) rumor_node_stop(r[i].node);
            pthread_join(th[i], NULL);
        }
        rumor_node_destroy(&r[i].node);
    }
    rumor_authority_destroy(&auth);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

/* The index of connections by key: every key heard is found, a key never heard is not, and
 * once the table is full a new key takes over the longest silent entry, which is then found
 * no more while every other still is (the index's deletions keep the probe runs whole). */
static void test_conn_index(void)
{
    rumor_node_t *n = calloc(1, sizeof *n);
    CHECK(n != NULL);
    if (!n) return;
    node_conn_index_init(n);
    enum { EXTRA = 300 };
    uint8_t key[RUMOR_KEY_LEN];
#define KEY_OF(i) (memset(key, 0, sizeof key), key[0] = (uint8_t)(i), key[1] = (uint8_t)((i) >> 8), key[31] = 7, key)
    for (int i = 0; i < MAX_CONNS; i++) {
        conn_t *c = node_find_conn(n, KEY_OF(i), true, 1000 + (uint64_t)(i * 7919 % MAX_CONNS));
        CHECK(c != NULL && c == &n->conns[i]);
    }
    bool found = true;
    for (int i = 0; i < MAX_CONNS; i++) found &= node_find_conn(n, KEY_OF(i), false, 0) == &n->conns[i];
    CHECK(found && node_find_conn(n, KEY_OF(MAX_CONNS + 5), false, 0) == NULL);
    /* the keys heard from longest ago: those with the EXTRA smallest last_seen */
    for (int i = 0; i < EXTRA; i++) CHECK(node_find_conn(n, KEY_OF(MAX_CONNS + i), true, 5000 + (uint64_t)i) != NULL);
    int gone = 0, kept = 0;
    for (int i = 0; i < MAX_CONNS; i++) {
        const bool old = (uint64_t)(i * 7919 % MAX_CONNS) < EXTRA;
        const conn_t *c = node_find_conn(n, KEY_OF(i), false, 0);
        gone += old && c == NULL;
        kept += !old && c != NULL && memcmp(c->key, key, RUMOR_KEY_LEN) == 0;
    }
    CHECK(gone == EXTRA && kept == MAX_CONNS - EXTRA);
    found = true;
    for (int i = 0; i < EXTRA; i++) {
        const conn_t *c = node_find_conn(n, KEY_OF(MAX_CONNS + i), false, 0);
        found &= c != NULL && memcmp(c->key, key, RUMOR_KEY_LEN) == 0;
    }
    CHECK(found && n->n_conns == MAX_CONNS);
#undef KEY_OF
    free(n);
}

/* Membership entries' checks are cached per member: an entry gossiped again costs no
 * verification, and a forged certificate for a member, sent by another, neither passes nor
 * takes the place of the good one (honest entries about that member would cost a check each
 * again, on their senders' budgets). */
static void test_vet_cache(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_node_t *n = calloc(1, sizeof *n);
    rumor_authority_t *auth = rumor_authority_generate(err);
    rumor_secret_key_t *member = rumor_secret_key_generate(err);
    CHECK(n && auth && member);
    if (!n || !auth || !member) goto out;
    n->certs = calloc(CERT_CACHE, sizeof *n->certs);
    n->key = rumor_secret_key_generate(err);
    CHECK(n->certs && n->key);
    if (!n->certs || !n->key) goto out;
    memcpy(n->authority, rumor_authority_public(auth), RUMOR_KEY_LEN);
    static rumor_memb_msg_t msg;
    rumor_memb_update_t good;
    memset(&good, 0, sizeof good);
    memcpy(good.key, rumor_secret_key_public(member), RUMOR_KEY_LEN);
    snprintf(good.addr, sizeof good.addr, "tcp://127.0.0.1:7009");
    good.inc = 1700000000u;
    good.boot = 0xb007;
    const uint64_t t = (uint64_t)time(NULL);
    size_t len = 0;
    CHECK_RC(rumor_cert_issue(good.cert, &len, auth, good.key, "m", t - 60, t + 3600, err));
    good.cert_len = (uint16_t)len;
    uint8_t rec[RUMOR_MEMB_RECORD_MAX];
    const size_t rlen = rumor_memb_record(rec, good.key, good.inc, good.boot, false, good.addr);
    memcpy(good.proof, rumor_secret_key_signer(member), RUMOR_KEY_LEN);
    rumor_secret_key_sign(member, good.proof + RUMOR_KEY_LEN, rec, rlen);
    rumor_memb_update_t forged = good;
    forged.cert[len - 1] ^= 1;

    conn_t honest, mallory;
    memset(&honest, 0, sizeof honest);
    memset(&mallory, 0, sizeof mallory);
    const uint64_t now = 5000;
#define SEND(from, u)                                                                                                \
    (memset(&msg, 0, sizeof msg), msg.kind = RUMOR_MEMB_PEERS, msg.n_peers = 1, msg.peers[0] = (u),              \
     node_vet_entries(n, &(from), &msg, now), msg.n_peers)
    CHECK(SEND(honest, good) == 1 && msg.peers[0].proven);
    const double after_first = honest.entry_checks.tokens;
    CHECK(SEND(honest, good) == 1 && honest.entry_checks.tokens == after_first); /* (cached: free) */
    CHECK(SEND(mallory, forged) == 0 && n->drops[DROP_ENTRY_CERT] == 1);
    CHECK_MSG(SEND(honest, good) == 1 && honest.entry_checks.tokens == after_first,
              "after a forged certificate, the member's good one is still cached (tokens %.1f, were %.1f)",
              honest.entry_checks.tokens, after_first);
    forged = good; /* a record the member never signed, under its good certificate */
    forged.boot = 0xbad;
    CHECK(SEND(mallory, forged) == 0 && n->drops[DROP_PROOF] == 1);
#undef SEND
out:
    if (n) {
        free(n->certs);
        rumor_secret_key_destroy(&n->key);
        free(n);
    }
    rumor_secret_key_destroy(&member);
    rumor_authority_destroy(&auth);
}

int main(void)
{
    char err[RUMOR_ERR_LEN] = "";
    test_conn_index();
    test_vet_cache();
    rumor_net_bench_t r;
    /* 1 000 003 parameters in chunks of 65 536: 16 chunks, the last one of 16 963. */
    CHECK_RC(rumor_net_bench(1000003, 65536, 2, &r, err));
    if (err[0]) fprintf(stderr, "%s\n", err);
    fprintf(stderr, "1M parameters: %.0f MB/s through nodes, %.0f MB/s raw, peak +%ld kB\n", r.rumor_mbps,
            r.raw_mbps, r.peak_kb);
    CHECK(r.rumor_mbps > 0 && r.raw_mbps > 0);
#ifdef __SANITIZE_ADDRESS__
    /* AddressSanitizer's quarantine and shadow memory say nothing about the node's own use. */
    check_skip("the memory bound: not under AddressSanitizer");
#else
    CHECK_MSG(r.peak_kb < (long)(1000003 * 4 / 1024) + 16 * 1024, "peak %ld kB", r.peak_kb);
#endif
    test_independent_stop();
    return check_done();
}
