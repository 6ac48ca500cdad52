/* test_membership.c - the membership state machine driven directly, over a simulated
 * network in virtual time: join, failure detection, loss, partitions, leave, bounded views,
 * determinism. No sockets; every run is a function of its seeds. */
#include "check.h"
#include "membership.h"
#include "rng.h"

#include <stdlib.h>
#include <string.h>

#define MAX_NODES 128
#define STEP_MS 10

typedef struct {
    uint64_t at, order;
    int from, to;
    rumor_memb_msg_t msg;
} packet_t;

typedef struct {
    int n;
    rumor_memb_t *node[MAX_NODES];
    bool dead[MAX_NODES];
    int group[MAX_NODES]; /* packets cross only within a group while partitioned */
    bool partitioned;
    double loss;
    rumor_rng_t rng;
    packet_t **heap;
    int n_heap, heap_cap;
    uint64_t now, order, trace;
    int downs_left[MAX_NODES]; /* DOWN actions with state left, per observing node */
} net_t;

static void key_of(int i, uint8_t key[RUMOR_KEY_LEN])
{
    memset(key, 0, RUMOR_KEY_LEN);
    key[0] = (uint8_t)(i & 0xff);
    key[1] = (uint8_t)(i >> 8);
    key[31] = 0x5a; /* not all zero */
}

static void cert_of(int i, uint8_t *cert, uint16_t *len);

/* The tests' stand-in for a member's signature of its record (membership treats proofs as
 * opaque; the driver checks them): a keyed hash of the record bytes, keyed by the member. */
static void fake_proof(const uint8_t *record, size_t len, uint8_t proof[RUMOR_MEMB_PROOF_LEN])
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++) h = (h ^ record[i]) * 0x100000001b3ULL;
    for (int i = 0; i < RUMOR_MEMB_PROOF_LEN; i++) proof[i] = (uint8_t)(h >> (8 * (i % 8))) ^ (uint8_t)i;
}

static void fake_sign(void *arg, const uint8_t *record, size_t len, uint8_t proof[RUMOR_MEMB_PROOF_LEN])
{
    (void)arg;
    fake_proof(record, len, proof);
}

/* What the driver does before membership sees an entry: proven when its proof is the
 * member's signature of (key, inc, boot, undialable, addr). */
static void vet(rumor_memb_update_t *u)
{
    uint8_t rec[RUMOR_MEMB_RECORD_MAX], want[RUMOR_MEMB_PROOF_LEN];
    fake_proof(rec, rumor_memb_record(rec, u->key, u->inc, u->boot, u->undialable, u->addr), want);
    u->proven = memcmp(want, u->proof, RUMOR_MEMB_PROOF_LEN) == 0;
}

/* u as its member signed it (a genuine record, as the driver passes it). */
static void sign_as_member(rumor_memb_update_t *u)
{
    uint8_t rec[RUMOR_MEMB_RECORD_MAX];
    fake_proof(rec, rumor_memb_record(rec, u->key, u->inc, u->boot, u->undialable, u->addr), u->proof);
    u->proven = true;
}

static void vet_msg(rumor_memb_msg_t *msg, const uint8_t *from)
{
    for (int i = 0; i < msg->n_upd; i++) vet(&msg->upd[i]);
    for (int i = 0; i < msg->n_peers; i++) vet(&msg->peers[i]);
    if (msg->kind == RUMOR_MEMB_HELLO) {
        uint8_t rec[RUMOR_MEMB_RECORD_MAX], want[RUMOR_MEMB_PROOF_LEN];
        fake_proof(rec, rumor_memb_record(rec, from, msg->inc, msg->boot, msg->undialable, msg->addr), want);
        msg->proven = memcmp(want, msg->proof, RUMOR_MEMB_PROOF_LEN) == 0;
    }
}

static int index_of(const uint8_t key[RUMOR_KEY_LEN]) { return key[0] | key[1] << 8; }

static void addr_of(int i, char *addr) { snprintf(addr, RUMOR_MEMB_ADDR_LEN, "tcp://127.0.0.1:%d", 7000 + i); }

static bool before(const packet_t *a, const packet_t *b)
{
    return a->at < b->at || (a->at == b->at && a->order < b->order);
}

static void heap_push(net_t *net, packet_t *p)
{
    if (net->n_heap == net->heap_cap) {
        net->heap_cap = net->heap_cap ? 2 * net->heap_cap : 256;
        net->heap = realloc(net->heap, (size_t)net->heap_cap * sizeof *net->heap);
    }
    int i = net->n_heap++;
    net->heap[i] = p;
    while (i > 0 && before(net->heap[i], net->heap[(i - 1) / 2])) {
        packet_t *t = net->heap[i];
        net->heap[i] = net->heap[(i - 1) / 2];
        net->heap[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static packet_t *heap_pop(net_t *net)
{
    packet_t *top = net->heap[0];
    net->heap[0] = net->heap[--net->n_heap];
    for (int i = 0;;) {
        int l = 2 * i + 1, r = l + 1, s = i;
        if (l < net->n_heap && before(net->heap[l], net->heap[s])) s = l;
        if (r < net->n_heap && before(net->heap[r], net->heap[s])) s = r;
        if (s == i) break;
        packet_t *t = net->heap[i];
        net->heap[i] = net->heap[s];
        net->heap[s] = t;
        i = s;
    }
    return top;
}

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ULL; }

static void drain(net_t *net, int i)
{
    rumor_memb_action_t a;
    while (rumor_memb_next_action(net->node[i], &a)) {
        int to = index_of(a.key);
        net->trace = mix(mix(mix(net->trace, (uint64_t)a.kind), (uint64_t)to), a.msg.kind);
        if (a.kind == RUMOR_MEMB_ACT_DOWN && a.state == RUMOR_MEMB_LEFT) net->downs_left[i]++;
        if (a.kind != RUMOR_MEMB_ACT_SEND) continue;
        /* The address must be the one the member listens on. */
        char want[RUMOR_MEMB_ADDR_LEN];
        addr_of(to, want);
        CHECK_MSG(strcmp(a.addr, want) == 0, "send %d to node %d at '%s'", a.msg.kind, to, a.addr);
        if (rumor_rng_uniform(&net->rng) < net->loss) continue;
        packet_t *p = malloc(sizeof *p);
        p->at = net->now + 2 + rumor_rng_below(&net->rng, 8);
        p->order = net->order++;
        p->from = i;
        p->to = to;
        p->msg = a.msg;
        heap_push(net, p);
    }
}

static void net_init(net_t *net, int n, uint64_t seed, const rumor_memb_config_t *cfg)
{
    memset(net, 0, sizeof *net);
    net->n = n;
    net->trace = 0xcbf29ce484222325ULL;
    rumor_rng_init(&net->rng, seed);
    char err[RUMOR_ERR_LEN];
    for (int i = 0; i < n; i++) {
        uint8_t key[RUMOR_KEY_LEN];
        char addr[RUMOR_MEMB_ADDR_LEN];
        key_of(i, key);
        addr_of(i, addr);
        rumor_memb_config_t c = *cfg;
        c.seed = seed * 1000 + (uint64_t)i;
        if (c.strict) c.sign = fake_sign;
        net->node[i] = rumor_memb_new(&c, key, addr, 100, err);
        CHECK(net->node[i] != NULL);
        uint8_t cert[RUMOR_MEMB_CERT_MAX];
        uint16_t cert_len;
        cert_of(i, cert, &cert_len);
        rumor_memb_set_identity(net->node[i], cert, cert_len, 1000 + (uint64_t)i);
    }
}

static void net_join_all(net_t *net, int bootstrap)
{
    uint8_t key[RUMOR_KEY_LEN];
    char addr[RUMOR_MEMB_ADDR_LEN];
    key_of(bootstrap, key);
    addr_of(bootstrap, addr);
    for (int i = 0; i < net->n; i++)
        if (i != bootstrap) {
            rumor_memb_join(net->node[i], key, addr, net->now);
            drain(net, i);
        }
}

static void net_run(net_t *net, uint64_t until)
{
    while (net->now < until) {
        net->now += STEP_MS;
        while (net->n_heap > 0 && net->heap[0]->at <= net->now) {
            packet_t *p = heap_pop(net);
            bool cut = net->partitioned && net->group[p->from] != net->group[p->to];
            if (!net->dead[p->to] && !cut) {
                uint8_t from[RUMOR_KEY_LEN];
                char from_addr[RUMOR_MEMB_ADDR_LEN];
                key_of(p->from, from);
                addr_of(p->from, from_addr);
                vet_msg(&p->msg, from);
                rumor_memb_recv(net->node[p->to], from, from_addr, &p->msg, net->now);
                drain(net, p->to);
            }
            free(p);
        }
        for (int i = 0; i < net->n; i++)
            if (!net->dead[i]) {
                rumor_memb_tick(net->node[i], net->now);
                drain(net, i);
            }
    }
}

static void net_free(net_t *net)
{
    while (net->n_heap > 0) free(heap_pop(net));
    free(net->heap);
    for (int i = 0; i < net->n; i++) rumor_memb_destroy(&net->node[i]);
}

/* Does node i see exactly the members in `want` (a bitmask over node indices), all alive? */
static bool sees(const net_t *net, int i, uint64_t want)
{
    const rumor_memb_t *m = net->node[i];
    uint64_t got = 0;
    for (int k = 0; k < rumor_memb_view_count(m); k++) {
        const rumor_memb_member_t *e = rumor_memb_view_at(m, k);
        if (e->state != RUMOR_MEMB_ALIVE) return false;
        got |= 1ULL << index_of(e->key);
    }
    return got == want;
}

static uint64_t all_but(int n, uint64_t except)
{
    return ((n == 64 ? ~0ULL : (1ULL << n) - 1)) & ~except;
}

/* The first virtual time at which every live node sees every other live node. */
static uint64_t run_until_full(net_t *net, uint64_t limit)
{
    uint64_t dead = 0;
    for (int i = 0; i < net->n; i++)
        if (net->dead[i]) dead |= 1ULL << i;
    while (net->now < limit) {
        bool full = true;
        for (int i = 0; i < net->n && full; i++)
            if (!net->dead[i]) full = sees(net, i, all_but(net->n, dead | 1ULL << i));
        if (full) return net->now;
        net_run(net, net->now + 100);
    }
    return UINT64_MAX;
}

/* Strict mode too: there a death said second hand is only a suspicion, which each member
 * confirms by its own silent probe, within the same bound. */
static void test_join_and_failure(bool strict)
{
    rumor_memb_config_t cfg = rumor_memb_defaults();
    cfg.strict = strict;
    net_t net;
    net_init(&net, 6, 1, &cfg);
    net_join_all(&net, 0);
    uint64_t t = run_until_full(&net, 10000);
    fprintf(stderr, "6 nodes: full view after %llu ms\n", (unsigned long long)t);
    CHECK_MSG(t <= 5000, "full view took %llu ms", (unsigned long long)t);

    /* Kill the bootstrap: the others declare it dead within a period, the indirect probes,
     * the suspicion time and some dissemination, and stay connected among themselves. */
    net_run(&net, 10000);
    net.dead[0] = true;
    uint64_t killed = net.now, declared = UINT64_MAX;
    while (net.now < killed + 20000) {
        net_run(&net, net.now + 100);
        bool gone = true;
        for (int i = 1; i < 6; i++) gone &= sees(&net, i, all_but(6, 1ULL << 0 | 1ULL << i));
        if (gone) {
            declared = net.now - killed;
            break;
        }
    }
    fprintf(stderr, "bootstrap killed%s: declared dead by all after %llu ms\n", strict ? " (strict)" : "",
            (unsigned long long)declared);
    const uint64_t bound = cfg.period_ms * 2 + cfg.suspect_ms + 3000;
    CHECK_MSG(declared <= bound, "declared dead after %llu ms, bound %llu", (unsigned long long)declared,
              (unsigned long long)bound);
    uint64_t deaths = 0;
    for (int i = 1; i < 6; i++) deaths += rumor_memb_stats(net.node[i]).deaths;
    CHECK(deaths >= 1);
    /* Nobody else was declared dead on the way. */
    net_run(&net, net.now + 10000);
    for (int i = 1; i < 6; i++) CHECK(sees(&net, i, all_but(6, 1ULL << 0 | 1ULL << i)));
    net_free(&net);
}

/* Strict mode (a real node's): certificates on every entry and a dial budget still let a
 * swarm that joins through one bootstrap see itself whole, in bounded time. */
static void test_strict_swarm(void)
{
    rumor_memb_config_t cfg = rumor_memb_defaults();
    cfg.strict = true;
    net_t net;
    net_init(&net, 16, 3, &cfg);
    net_join_all(&net, 0);
    uint64_t t = run_until_full(&net, 60000);
    fprintf(stderr, "16 nodes, strict: full view after %llu ms\n", (unsigned long long)t);
    CHECK_MSG(t <= 30000, "full view took %llu ms", (unsigned long long)t);
    uint64_t forgotten = 0;
    for (int i = 0; i < net.n; i++) forgotten += rumor_memb_stats(net.node[i]).forgotten;
    CHECK(forgotten == 0);
    /* Boot ids travelled with the members. */
    bool boots = true;
    for (int i = 0; i < net.n; i++)
        for (int k = 0; k < rumor_memb_view_count(net.node[i]); k++) {
            const rumor_memb_member_t *e = rumor_memb_view_at(net.node[i], k);
            boots &= e->boot == 1000 + (uint64_t)index_of(e->key);
        }
    CHECK(boots);
    net_free(&net);
}

static void test_loss(void)
{
    /* 10% of messages lost for a minute: suspicions happen and are refuted; nobody dies. */
    rumor_memb_config_t cfg = rumor_memb_defaults();
    net_t net;
    net_init(&net, 8, 2, &cfg);
    net_join_all(&net, 0);
    CHECK(run_until_full(&net, 15000) != UINT64_MAX);
    net.loss = 0.10;
    net_run(&net, net.now + 60000);
    net.loss = 0;
    uint64_t deaths = 0, suspicions = 0, refutations = 0;
    for (int i = 0; i < 8; i++) {
        rumor_memb_stats_t s = rumor_memb_stats(net.node[i]);
        deaths += s.deaths, suspicions += s.suspicions, refutations += s.refutations;
    }
    fprintf(stderr, "10%% loss, 60 s: %llu suspicions, %llu refutations, %llu deaths\n",
            (unsigned long long)suspicions, (unsigned long long)refutations, (unsigned long long)deaths);
    CHECK(deaths == 0);
    net_run(&net, net.now + 5000);
    for (int i = 0; i < 8; i++) CHECK(sees(&net, i, all_but(8, 1ULL << i)));
    net_free(&net);
}

static void test_partition_heals(void)
{
    rumor_memb_config_t cfg = rumor_memb_defaults();
    net_t net;
    net_init(&net, 6, 3, &cfg);
    net_join_all(&net, 0);
    CHECK(run_until_full(&net, 10000) != UINT64_MAX);
    for (int i = 0; i < 6; i++) net.group[i] = i < 3;
    net.partitioned = true;
    net_run(&net, net.now + 30000);
    /* Each side holds only itself. */
    for (int i = 0; i < 6; i++) {
        uint64_t side = i < 3 ? 0x07 : 0x38;
        CHECK_MSG(sees(&net, i, side & ~(1ULL << i)), "node %d during the partition", i);
    }
    net.partitioned = false;
    uint64_t healed = net.now;
    uint64_t t = run_until_full(&net, net.now + 90000);
    fprintf(stderr, "partition healed: full views again after %llu ms\n", (unsigned long long)(t - healed));
    CHECK(t != UINT64_MAX);
    net_free(&net);
}

static void test_leave(void)
{
    rumor_memb_config_t cfg = rumor_memb_defaults();
    net_t net;
    net_init(&net, 5, 4, &cfg);
    net_join_all(&net, 0);
    CHECK(run_until_full(&net, 10000) != UINT64_MAX);
    rumor_memb_leave(net.node[3], net.now);
    drain(&net, 3);
    net_run(&net, net.now + 100);
    net.dead[3] = true; /* the process is gone */
    for (int i = 0; i < 5; i++)
        if (i != 3) {
            CHECK_MSG(sees(&net, i, all_but(5, 1ULL << 3 | 1ULL << i)), "node %d after bye", i);
            CHECK(net.downs_left[i] == 1);
        }
    /* Old gossip about it does not bring it back. */
    net_run(&net, net.now + 15000);
    for (int i = 0; i < 5; i++)
        if (i != 3) CHECK(sees(&net, i, all_but(5, 1ULL << 3 | 1ULL << i)));
    net_free(&net);
}

static bool connected(const net_t *net)
{
    bool seen[MAX_NODES] = {false};
    int stack[MAX_NODES], top = 0, reached = 1;
    seen[0] = true;
    stack[top++] = 0;
    while (top > 0) {
        int i = stack[--top];
        for (int j = 0; j < net->n; j++) {
            bool edge = false;
            for (int a = 0; a < 2 && !edge; a++) {
                const rumor_memb_t *m = net->node[a ? j : i];
                int other = a ? i : j;
                for (int k = 0; k < rumor_memb_view_count(m); k++)
                    if (index_of(rumor_memb_view_at(m, k)->key) == other) edge = true;
            }
            if (edge && !seen[j]) {
                seen[j] = true;
                reached++;
                stack[top++] = j;
            }
        }
    }
    return reached == net->n;
}

static void test_bounded_view(void)
{
    rumor_memb_config_t cfg = rumor_memb_defaults();
    cfg.view_size = 8;
    cfg.passive_size = 32;
    net_t net;
    net_init(&net, 100, 5, &cfg);
    net_join_all(&net, 0);
    net_run(&net, 60000);
    int max_view = 0, max_passive = 0, min_view = 1000;
    uint64_t deaths = 0;
    for (int i = 0; i < 100; i++) {
        int v = rumor_memb_view_count(net.node[i]), p = rumor_memb_passive_count(net.node[i]);
        max_view = v > max_view ? v : max_view;
        min_view = v < min_view ? v : min_view;
        max_passive = p > max_passive ? p : max_passive;
        deaths += rumor_memb_stats(net.node[i]).deaths;
    }
    fprintf(stderr, "100 nodes, view 8: views %d..%d, reservoir up to %d, %llu deaths\n", min_view, max_view,
            max_passive, (unsigned long long)deaths);
    CHECK(max_view <= 8 && max_passive <= 32);
    CHECK(min_view >= 4);
    CHECK(deaths == 0);
    CHECK(connected(&net));
    net_free(&net);
}

static uint64_t trace_of(uint64_t seed)
{
    rumor_memb_config_t cfg = rumor_memb_defaults();
    net_t net;
    net_init(&net, 6, seed, &cfg);
    net.loss = 0.05;
    net_join_all(&net, 0);
    net_run(&net, 20000);
    uint64_t t = net.trace;
    net_free(&net);
    return t;
}

static void test_determinism(void)
{
    CHECK(trace_of(7) == trace_of(7));
    CHECK(trace_of(7) != trace_of(8));
}

static void test_bad_input_and_refutation(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_memb_config_t cfg = rumor_memb_defaults();
    uint8_t me[RUMOR_KEY_LEN], other[RUMOR_KEY_LEN];
    key_of(1, me);
    key_of(2, other);
    rumor_memb_t *m = rumor_memb_new(&cfg, me, "tcp://127.0.0.1:7001", 10, err);
    static rumor_memb_msg_t msg;
    memset(&msg, 0, sizeof msg);
    msg.kind = RUMOR_MEMB_PING;
    msg.n_upd = 100; /* more than a message can carry */
    rumor_memb_recv(m, other, "tcp://127.0.0.1:7002", &msg, 0);
    msg.n_upd = 1;
    memcpy(msg.upd[0].key, other, RUMOR_KEY_LEN);
    msg.upd[0].state = (rumor_memb_state_t)7;
    rumor_memb_recv(m, other, "tcp://127.0.0.1:7002", &msg, 0);
    memset(&msg, 0, sizeof msg);
    msg.kind = RUMOR_MEMB_HELLO; /* without an address */
    rumor_memb_recv(m, other, "tcp://127.0.0.1:7002", &msg, 0);
    rumor_memb_recv(m, me, "tcp://127.0.0.1:7001", &msg, 0); /* from ourselves */
    rumor_memb_recv(m, other, "", &msg, 0); /* the driver must know where it listens */
    CHECK_MSG(rumor_memb_stats(m).dropped_input == 5, "dropped %llu",
              (unsigned long long)rumor_memb_stats(m).dropped_input);
    CHECK(rumor_memb_view_count(m) == 0);

    /* Someone suspects us at our incarnation: we refute with the next one. */
    memset(&msg, 0, sizeof msg);
    msg.kind = RUMOR_MEMB_HELLO;
    snprintf(msg.addr, sizeof msg.addr, "tcp://127.0.0.1:7002");
    msg.inc = 5;
    rumor_memb_recv(m, other, "tcp://127.0.0.1:7002", &msg, 0);
    CHECK(rumor_memb_view_count(m) == 1);
    memset(&msg, 0, sizeof msg);
    msg.kind = RUMOR_MEMB_PING;
    msg.seq = 9;
    msg.n_upd = 1;
    memcpy(msg.upd[0].key, me, RUMOR_KEY_LEN);
    msg.upd[0].inc = 10;
    msg.upd[0].state = RUMOR_MEMB_SUSPECT;
    rumor_memb_recv(m, other, "tcp://127.0.0.1:7002", &msg, 0);
    CHECK(rumor_memb_incarnation(m) == 11);
    /* The answer acks seq 9 and carries the refutation. */
    rumor_memb_action_t a;
    bool acked = false, refuted = false;
    while (rumor_memb_next_action(m, &a)) {
        if (a.kind != RUMOR_MEMB_ACT_SEND || a.msg.kind != RUMOR_MEMB_ACK) continue;
        acked |= a.msg.ack == 9;
        for (int i = 0; i < a.msg.n_upd; i++)
            refuted |= memcmp(a.msg.upd[i].key, me, RUMOR_KEY_LEN) == 0 && a.msg.upd[i].inc == 11 &&
                       a.msg.upd[i].state == RUMOR_MEMB_ALIVE;
    }
    CHECK(acked && refuted);
    /* Precedence: alive at a lower incarnation does not undo a suspicion (claims from a
     * third member: what `other` says of itself is its own word, see test_own_word). */
    uint8_t third[RUMOR_KEY_LEN];
    key_of(3, third);
    memset(&msg, 0, sizeof msg);
    msg.kind = RUMOR_MEMB_PEERS;
    msg.n_peers = 1;
    memcpy(msg.peers[0].key, other, RUMOR_KEY_LEN);
    snprintf(msg.peers[0].addr, sizeof msg.peers[0].addr, "tcp://127.0.0.1:7002");
    msg.peers[0].inc = 6;
    msg.peers[0].state = RUMOR_MEMB_SUSPECT;
    rumor_memb_recv(m, third, "tcp://127.0.0.1:7003", &msg, 0);
    CHECK(rumor_memb_view_at(m, 0)->state == RUMOR_MEMB_SUSPECT);
    msg.peers[0].inc = 5;
    msg.peers[0].state = RUMOR_MEMB_ALIVE;
    rumor_memb_recv(m, third, "tcp://127.0.0.1:7003", &msg, 0);
    CHECK(rumor_memb_view_at(m, 0)->state == RUMOR_MEMB_SUSPECT);
    msg.peers[0].inc = 7;
    rumor_memb_recv(m, third, "tcp://127.0.0.1:7003", &msg, 0);
    CHECK(rumor_memb_view_at(m, 0)->state == RUMOR_MEMB_ALIVE && rumor_memb_view_at(m, 0)->inc == 7);
    /* 'left' about ourselves is refuted too (a quick restart must not be locked out). */
    uint32_t inc0 = rumor_memb_incarnation(m);
    memset(&msg, 0, sizeof msg);
    msg.kind = RUMOR_MEMB_PEERS;
    msg.n_peers = 1;
    memcpy(msg.peers[0].key, me, RUMOR_KEY_LEN);
    snprintf(msg.peers[0].addr, sizeof msg.peers[0].addr, "tcp://127.0.0.1:7001");
    msg.peers[0].inc = inc0;
    msg.peers[0].state = RUMOR_MEMB_LEFT;
    rumor_memb_recv(m, other, "tcp://127.0.0.1:7002", &msg, 0);
    CHECK(rumor_memb_incarnation(m) == inc0 + 1);
    /* A claim far ahead of our incarnation is refused: it could only push ours to the wrap. */
    msg.peers[0].inc = UINT32_MAX;
    msg.peers[0].state = RUMOR_MEMB_DEAD;
    uint64_t dropped = rumor_memb_stats(m).dropped_input, refused = rumor_memb_stats(m).refused_claims;
    rumor_memb_recv(m, other, "tcp://127.0.0.1:7002", &msg, 0);
    CHECK(rumor_memb_incarnation(m) == inc0 + 1);
    CHECK(rumor_memb_stats(m).refused_claims == refused + 1);
    /* ... and so is one just past the bounded step; one within it is refuted. */
    msg.peers[0].inc = inc0 + 1 + RUMOR_MEMB_INC_STEP + 1;
    rumor_memb_recv(m, other, "tcp://127.0.0.1:7002", &msg, 0);
    CHECK(rumor_memb_incarnation(m) == inc0 + 1);
    CHECK(rumor_memb_stats(m).refused_claims == refused + 2);
    msg.peers[0].inc = inc0 + 1 + RUMOR_MEMB_INC_STEP;
    rumor_memb_recv(m, other, "tcp://127.0.0.1:7002", &msg, 0);
    CHECK(rumor_memb_incarnation(m) == inc0 + 2 + RUMOR_MEMB_INC_STEP);
    /* A ping-req for a member we do not know makes us dial nothing. */
    while (rumor_memb_next_action(m, &a)) {
    }
    memset(&msg, 0, sizeof msg);
    msg.kind = RUMOR_MEMB_PING_REQ;
    msg.seq = 77;
    msg.has_target = true;
    key_of(99, msg.target);
    snprintf(msg.target_addr, sizeof msg.target_addr, "tcp://203.0.113.9:22");
    rumor_memb_recv(m, other, "tcp://127.0.0.1:7002", &msg, 0);
    bool dialled = false;
    while (rumor_memb_next_action(m, &a)) dialled |= a.kind == RUMOR_MEMB_ACT_SEND && strstr(a.addr, "203.0.113.9");
    CHECK(!dialled);
    CHECK(rumor_memb_stats(m).dropped_input == dropped + 1);
    /* A bad configuration is refused. */
    rumor_memb_config_t bad = cfg;
    bad.ping_timeout_ms = bad.period_ms;
    CHECK(rumor_memb_new(&bad, me, "tcp://127.0.0.1:7001", 1, err) == NULL);
    rumor_memb_destroy(&m);
    CHECK(m == NULL);
}

/* A key only heard of (gossip, PEERS) is not a member: it waits in the reservoir and gets a
 * hello, at most one a period; it enters the view when it speaks itself. */
static void test_view_only_heard_from(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_memb_config_t cfg = rumor_memb_defaults();
    uint8_t me[RUMOR_KEY_LEN], b[RUMOR_KEY_LEN], c[RUMOR_KEY_LEN];
    key_of(1, me);
    key_of(2, b);
    key_of(3, c);
    rumor_memb_t *m = rumor_memb_new(&cfg, me, "tcp://127.0.0.1:7001", 10, err);
    static rumor_memb_msg_t msg;
    memset(&msg, 0, sizeof msg);
    msg.kind = RUMOR_MEMB_HELLO;
    msg.inc = 1;
    snprintf(msg.addr, sizeof msg.addr, "tcp://127.0.0.1:7002");
    rumor_memb_recv(m, b, "tcp://127.0.0.1:7002", &msg, 0);
    CHECK(rumor_memb_view_count(m) == 1);
    rumor_memb_action_t a;
    while (rumor_memb_next_action(m, &a)) {
    }
    /* b tells of c. */
    memset(&msg, 0, sizeof msg);
    msg.kind = RUMOR_MEMB_PEERS;
    msg.n_peers = 1;
    memcpy(msg.peers[0].key, c, RUMOR_KEY_LEN);
    snprintf(msg.peers[0].addr, sizeof msg.peers[0].addr, "tcp://127.0.0.1:7003");
    msg.peers[0].inc = 4;
    int hellos = 0;
    for (int k = 0; k < 3; k++) {
        rumor_memb_recv(m, b, "tcp://127.0.0.1:7002", &msg, 10 + (uint64_t)k);
        while (rumor_memb_next_action(m, &a))
            hellos += a.kind == RUMOR_MEMB_ACT_SEND && a.msg.kind == RUMOR_MEMB_HELLO && memcmp(a.key, c, 32) == 0 &&
                      strcmp(a.addr, "tcp://127.0.0.1:7003") == 0;
    }
    CHECK(rumor_memb_view_count(m) == 1 && rumor_memb_passive_count(m) == 1);
    CHECK_MSG(hellos == 1, "%d hellos to the key heard of", hellos);
    /* A period later, still silent: one more hello. */
    rumor_memb_tick(m, 10 + cfg.period_ms);
    hellos = 0;
    while (rumor_memb_next_action(m, &a))
        hellos += a.kind == RUMOR_MEMB_ACT_SEND && a.msg.kind == RUMOR_MEMB_HELLO && memcmp(a.key, c, 32) == 0;
    CHECK(hellos == 1 && rumor_memb_view_count(m) == 1);
    /* c answers itself: now it is a member, at the incarnation it was heard of. */
    memset(&msg, 0, sizeof msg);
    msg.kind = RUMOR_MEMB_PEERS;
    rumor_memb_recv(m, c, "tcp://127.0.0.1:7003", &msg, 20 + cfg.period_ms);
    CHECK(rumor_memb_view_count(m) == 2 && rumor_memb_passive_count(m) == 0);
    bool up = false;
    while (rumor_memb_next_action(m, &a)) up |= a.kind == RUMOR_MEMB_ACT_UP && memcmp(a.key, c, 32) == 0;
    CHECK(up);
    for (int i = 0; i < rumor_memb_view_count(m); i++)
        if (memcmp(rumor_memb_view_at(m, i)->key, c, 32) == 0) CHECK(rumor_memb_view_at(m, i)->inc == 4);
    rumor_memb_destroy(&m);
}

/* ---- forged claims, certificates, dials ---- */

static rumor_memb_msg_t tmsg;

static void cert_of(int i, uint8_t *cert, uint16_t *len)
{
    *len = 149;
    memset(cert, 0xc0 ^ i, *len);
}

static void entry_of(rumor_memb_update_t *u, int who, const char *addr, uint32_t inc, rumor_memb_state_t st,
                     bool with_cert)
{
    memset(u, 0, sizeof *u);
    key_of(who, u->key);
    if (addr)
        snprintf(u->addr, sizeof u->addr, "%s", addr);
    else
        addr_of(who, u->addr);
    u->inc = inc;
    u->state = st;
    if (with_cert) cert_of(who, u->cert, &u->cert_len);
    sign_as_member(u); /* (a test that forges clears it, or signs again after a change) */
}

/* `from` says hello (its own word), with its certificate, saying whether it can be dialled. */
static void hello_from_as(rumor_memb_t *m, int from, uint32_t inc, uint64_t boot, bool undialable, uint64_t now)
{
    uint8_t k[RUMOR_KEY_LEN];
    key_of(from, k);
    memset(&tmsg, 0, sizeof tmsg);
    tmsg.kind = RUMOR_MEMB_HELLO;
    tmsg.inc = inc;
    tmsg.boot = boot;
    tmsg.undialable = undialable;
    addr_of(from, tmsg.addr);
    cert_of(from, tmsg.cert, &tmsg.cert_len);
    uint8_t rec[RUMOR_MEMB_RECORD_MAX];
    fake_proof(rec, rumor_memb_record(rec, k, inc, boot, undialable, tmsg.addr), tmsg.proof);
    tmsg.proven = true;
    rumor_memb_recv(m, k, tmsg.addr, &tmsg, now);
}

static void hello_from(rumor_memb_t *m, int from, uint32_t inc, uint64_t boot, uint64_t now)
{
    hello_from_as(m, from, inc, boot, false, now);
}

/* `from` sends PEERS with one entry (a claim about u->key, unless that is from itself). */
static void peers_from(rumor_memb_t *m, int from, const rumor_memb_update_t *u, uint64_t now)
{
    uint8_t k[RUMOR_KEY_LEN];
    char addr[RUMOR_MEMB_ADDR_LEN];
    key_of(from, k);
    addr_of(from, addr);
    memset(&tmsg, 0, sizeof tmsg);
    tmsg.kind = RUMOR_MEMB_PEERS;
    tmsg.n_peers = 1;
    tmsg.peers[0] = *u;
    rumor_memb_recv(m, k, addr, &tmsg, now);
}

static const rumor_memb_member_t *member(const rumor_memb_t *m, int who)
{
    uint8_t k[RUMOR_KEY_LEN];
    key_of(who, k);
    for (int i = 0; i < rumor_memb_view_count(m); i++)
        if (memcmp(rumor_memb_view_at(m, i)->key, k, RUMOR_KEY_LEN) == 0) return rumor_memb_view_at(m, i);
    return NULL;
}

/* Drain the outbox; count hellos to `who` (-1: to anyone but `except`) and what PEERS to
 * `who` say about it (its state there, or -1). */
typedef struct {
    int hellos, downs, peers_state;
    bool certless_passed; /* an entry without a certificate was sent */
} seen_t;

static seen_t drain_seen(rumor_memb_t *m, int who)
{
    seen_t s = {0, 0, -1, false};
    uint8_t k[RUMOR_KEY_LEN];
    key_of(who, k);
    rumor_memb_action_t a;
    while (rumor_memb_next_action(m, &a)) {
        const bool to_who = memcmp(a.key, k, RUMOR_KEY_LEN) == 0;
        if (a.kind == RUMOR_MEMB_ACT_DOWN && to_who) s.downs++;
        if (a.kind != RUMOR_MEMB_ACT_SEND) continue;
        if (a.msg.kind == RUMOR_MEMB_HELLO && to_who) s.hellos++;
        const rumor_memb_update_t *l = a.msg.kind == RUMOR_MEMB_PEERS ? a.msg.peers : a.msg.upd;
        const int n = a.msg.kind == RUMOR_MEMB_PEERS ? a.msg.n_peers : a.msg.n_upd;
        for (int i = 0; i < n; i++) {
            s.certless_passed |= l[i].cert_len == 0;
            if (a.msg.kind == RUMOR_MEMB_PEERS && to_who && memcmp(l[i].key, k, RUMOR_KEY_LEN) == 0)
                s.peers_state = (int)l[i].state;
        }
    }
    return s;
}

/* Every member answers every ping we send it (its own word), as live members do; pings to B
 * are counted. */
static void b_answers(rumor_memb_t *m, int B, uint64_t now, int *pings)
{
    rumor_memb_action_t a;
    rumor_memb_msg_t ack;
    while (rumor_memb_next_action(m, &a)) {
        if (a.kind != RUMOR_MEMB_ACT_SEND || a.msg.kind != RUMOR_MEMB_PING) continue;
        char addr[RUMOR_MEMB_ADDR_LEN];
        addr_of(index_of(a.key), addr);
        *pings += index_of(a.key) == B;
        memset(&ack, 0, sizeof ack);
        ack.kind = RUMOR_MEMB_ACK;
        ack.ack = a.msg.seq;
        rumor_memb_recv(m, a.key, addr, &ack, now);
    }
}

/* Findings of the second review (strict mode: what the driver verified is `proven`): claims
 * without the member's signed record are refused, however far ahead; a genuine record with
 * a claim of death makes the member suspect here and pinged, never evicted while it answers;
 * a member whose claims keep being disproved is not listened to; the boot id and the address
 * are the member's signed record's only. */
static void test_forged_claims(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_memb_config_t cfg = rumor_memb_defaults();
    cfg.strict = true;
    cfg.sign = fake_sign;
    uint8_t me[RUMOR_KEY_LEN], cert[RUMOR_MEMB_CERT_MAX];
    uint16_t cert_len;
    key_of(1, me);
    cert_of(1, cert, &cert_len);
    const uint32_t t0 = 1700000000u;
    rumor_memb_t *m = rumor_memb_new(&cfg, me, "tcp://127.0.0.1:7001", t0, err);
    rumor_memb_set_identity(m, cert, cert_len, 11);
    const int B = 2, C = 3, D = 4, E = 5;
    const uint32_t b_inc = t0 + 100;
    uint64_t now = 1000;
    hello_from(m, B, b_inc, 0xb0b, now);
    hello_from(m, C, t0 + 200, 0xc0c, now);
    hello_from(m, E, t0 + 300, 0xe0e, now);
    (void)drain_seen(m, B);
    CHECK(member(m, B) && member(m, C) && member(m, B)->boot == 0xb0b);

    /* Finding 1: claims B never signed (at inc + 500, as reproduced, or anywhere), dead or
     * with another boot id or address: refused, every one; B stays as it was. */
    rumor_memb_update_t u;
    const uint64_t refused0 = rumor_memb_stats(m).refused_claims;
    for (int k = 0; k < 10; k++) {
        entry_of(&u, B, k % 2 ? "tcp://203.0.113.66:22" : NULL, b_inc + 500 * (uint32_t)(k + 1), RUMOR_MEMB_DEAD, true);
        u.boot = 0xbad;
        u.proven = false; /* (the driver found no signature of B's for it) */
        peers_from(m, C, &u, ++now);
    }
    CHECK(member(m, B) && member(m, B)->state == RUMOR_MEMB_ALIVE && member(m, B)->inc == b_inc &&
          member(m, B)->boot == 0xb0b && strcmp(member(m, B)->addr, "tcp://127.0.0.1:7002") == 0);
    CHECK_MSG(rumor_memb_stats(m).refused_claims == refused0 + 10, "%llu refused",
              (unsigned long long)(rumor_memb_stats(m).refused_claims - refused0));
    rumor_memb_action_t a;
    bool dialled = false;
    while (rumor_memb_next_action(m, &a)) dialled |= strstr(a.addr, "203.0.113.66") != NULL;
    CHECK(!dialled);

    /* 30 s of C replaying B's genuine record with "dead" every 100 ms while B answers our
     * pings: B is never evicted (no DOWN), is pinged at most once a period, and C's claims
     * are ignored once RUMOR_MEMB_LIES_MAX of them were disproved. */
    int pings = 0, downs = 0;
    const uint64_t t_flood = now;
    for (uint64_t t = t_flood; t < t_flood + 30000; t += 100) {
        entry_of(&u, B, NULL, b_inc, RUMOR_MEMB_DEAD, true);
        u.boot = 0xb0b;
        sign_as_member(&u);
        peers_from(m, C, &u, t);
        rumor_memb_tick(m, t);
        b_answers(m, B, t, &pings);
        downs += member(m, B) == NULL;
        (void)drain_seen(m, C);
    }
    now = t_flood + 30000;
    const rumor_memb_stats_t st = rumor_memb_stats(m);
    CHECK_MSG(downs == 0 && member(m, B) && member(m, B)->state == RUMOR_MEMB_ALIVE, "B evicted %d times", downs);
    CHECK_MSG(pings >= 1 && pings <= 31 + 30, "%d pings to check B", pings);
    CHECK_MSG(st.disproved >= RUMOR_MEMB_LIES_MAX && st.muted >= 1, "%llu disproved, %llu muted",
              (unsigned long long)st.disproved, (unsigned long long)st.muted);
    CHECK(member(m, C) != NULL); /* (a liar is not evicted for it: it is not listened to) */

    /* A claim, B's answer to our check, the same claim again at once, then silence but for
     * B's answers to our pings, in a view of 43 (our own probes reach B once in 43 periods):
     * the repeat starts no suspicion that no ping of ours would end (it made B suspect with no
     * check outstanding, and dead suspect_ms later). */
    for (int k = 0; k < 40; k++) hello_from(m, 100 + k, t0 + 100, 0x100 + (uint64_t)k, now);
    b_answers(m, B, now, &pings);
    now += cfg.period_ms + 1;
    pings = 0;
    for (uint64_t t = now; t < now + 3 * (uint64_t)cfg.suspect_ms; t += 100) {
        if (t == now || t == now + 200) {
            entry_of(&u, B, NULL, b_inc, RUMOR_MEMB_DEAD, true);
            u.boot = 0xb0b;
            sign_as_member(&u);
            peers_from(m, E, &u, t);
        }
        rumor_memb_tick(m, t);
        b_answers(m, B, t, &pings);
        CHECK_MSG(member(m, B) != NULL, "B evicted at %llu ms after a claim repeated at once",
                  (unsigned long long)(t - now));
        if (!member(m, B)) break;
    }
    now += 3 * (uint64_t)cfg.suspect_ms;

    /* Finding 2: the boot id comes with B's signed record only: a newer one (B restarted,
     * secure mixing's masks follow) is taken, whoever passes it on. */
    entry_of(&u, B, NULL, b_inc + 1, RUMOR_MEMB_ALIVE, true);
    u.boot = 0xb1b;
    sign_as_member(&u);
    peers_from(m, E, &u, ++now);
    CHECK(member(m, B) && member(m, B)->inc == b_inc + 1 && member(m, B)->boot == 0xb1b);
    entry_of(&u, B, NULL, b_inc + 2, RUMOR_MEMB_ALIVE, true);
    u.boot = 0xbad; /* signed, then altered */
    vet(&u);
    peers_from(m, E, &u, ++now);
    CHECK(member(m, B) && member(m, B)->boot == 0xb1b && member(m, B)->inc == b_inc + 1);

    /* A second-hand death from a member that is listened to (E), about B silent for more than
     * a period, makes B suspect, not gone; silence from B for suspect_ms after our check then
     * makes it dead here (our own conclusion). */
    now += cfg.period_ms + 1;
    entry_of(&u, B, NULL, b_inc + 1, RUMOR_MEMB_DEAD, true);
    u.boot = 0xb1b;
    sign_as_member(&u);
    peers_from(m, E, &u, ++now);
    CHECK(member(m, B) && member(m, B)->state == RUMOR_MEMB_SUSPECT);
    for (uint64_t t = now; t <= now + cfg.suspect_ms + cfg.period_ms; t += 100) {
        rumor_memb_tick(m, t);
        while (rumor_memb_next_action(m, &a)) {
        }
    }
    now += cfg.suspect_ms + cfg.period_ms + 1;
    CHECK(member(m, B) == NULL);
    /* ... and its own hello brings it back, the PEERS answering it telling it of the tomb. */
    hello_from(m, B, b_inc + 1, 0xb1b, ++now);
    CHECK(member(m, B) && member(m, B)->state == RUMOR_MEMB_ALIVE && member(m, B)->inc == b_inc + 1);
    CHECK(drain_seen(m, B).peers_state == RUMOR_MEMB_DEAD);

    /* Finding 3: a member we hold nothing about is heard of at the address it signed; the
     * same key at an address it did not sign is refused (never dialled). */
    entry_of(&u, D, "tcp://203.0.113.9:5", t0 + 5, RUMOR_MEMB_ALIVE, true);
    sign_as_member(&u);
    snprintf(u.addr, sizeof u.addr, "tcp://203.0.113.66:22"); /* (after the signature) */
    const uint64_t r1 = rumor_memb_stats(m).refused_claims;
    vet(&u);
    peers_from(m, E, &u, ++now);
    CHECK(rumor_memb_stats(m).refused_claims == r1 + 1 && rumor_memb_passive_count(m) == 0);
    entry_of(&u, D, "tcp://127.0.0.1:7004", t0 + 5, RUMOR_MEMB_ALIVE, true);
    u.boot = 0xd0d;
    sign_as_member(&u);
    peers_from(m, E, &u, ++now);
    CHECK(rumor_memb_passive_count(m) == 1);
    dialled = false;
    while (rumor_memb_next_action(m, &a)) dialled |= strstr(a.addr, "203.0.113") != NULL;
    CHECK(!dialled);

    /* Claims about ourselves: refuted at most once a period, each with a new signed record. */
    const uint32_t inc0 = rumor_memb_incarnation(m);
    for (int k = 0; k < 20; k++) {
        entry_of(&u, 1, NULL, rumor_memb_incarnation(m), RUMOR_MEMB_DEAD, true);
        u.proven = false; /* (about us: the receiver needs no proof) */
        peers_from(m, E, &u, now + 50 * (uint64_t)k);
    }
    const uint32_t bumped = rumor_memb_incarnation(m) - inc0;
    CHECK_MSG(bumped >= 1 && bumped <= 2, "our incarnation rose %u times in one second of claims", bumped);
    /* Entries about us come unchecked: one above our incarnation is not ours and moves it not
     * (it pushed ours up to the step a period, towards the top of the range). */
    const uint32_t inc1 = rumor_memb_incarnation(m);
    for (int k = 0; k < 5; k++) {
        entry_of(&u, 1, NULL, inc1 + 1000, k % 2 ? RUMOR_MEMB_ALIVE : RUMOR_MEMB_DEAD, true);
        peers_from(m, E, &u, now + 2000 + 1000 * (uint64_t)k);
    }
    CHECK_MSG(rumor_memb_incarnation(m) == inc1, "claims above our incarnation moved it from %u to %u", inc1,
              rumor_memb_incarnation(m));
    rumor_memb_destroy(&m);
}

/* A strict membership (a real node's) for member `self` at its address (addr_of), starting at
 * incarnation inc, with its certificate (cert_of) and boot id; cfg's other fields as given. */
static rumor_memb_t *strict_memb(rumor_memb_config_t cfg, int self, uint32_t inc, uint64_t boot)
{
    char err[RUMOR_ERR_LEN], addr[RUMOR_MEMB_ADDR_LEN];
    uint8_t me[RUMOR_KEY_LEN], cert[RUMOR_MEMB_CERT_MAX];
    uint16_t cert_len;
    cfg.strict = true;
    cfg.sign = fake_sign;
    key_of(self, me);
    cert_of(self, cert, &cert_len);
    addr_of(self, addr);
    rumor_memb_t *m = rumor_memb_new(&cfg, me, addr, inc, err);
    CHECK_MSG(m != NULL, "%s", err);
    if (m) rumor_memb_set_identity(m, cert, cert_len, boot);
    return m;
}

/* A member that tells two peers two records at one incarnation (dialable to one, not to the
 * other: the input of their graphs' placement) cannot keep their views apart: each takes the
 * greater record from the other's gossip, so both end with the same one. And a node that finds
 * it cannot be dialled says so under a new incarnation, signed. */
static void test_equivocation(void)
{
    rumor_memb_t *p[2];
    for (int i = 0; i < 2; i++)
        if (!(p[i] = strict_memb(rumor_memb_defaults(), 1 + i, 1700000000u, 0x10 + (uint64_t)i))) return;
    const int M = 7;
    const uint32_t inc = 1700000100u;
    uint64_t now = 1000;
    hello_from_as(p[0], M, inc, 0x777, false, now);
    hello_from_as(p[1], M, inc, 0x777, true, now);
    hello_from(p[0], 2, 1700000000u, 0x11, now); /* (each knows the other) */
    hello_from(p[1], 1, 1700000000u, 0x10, now);
    CHECK(member(p[0], M) && !member(p[0], M)->undialable && member(p[1], M) && member(p[1], M)->undialable);
    rumor_memb_update_t u[2];
    for (int i = 0; i < 2; i++) {
        entry_of(&u[i], M, NULL, inc, RUMOR_MEMB_ALIVE, true);
        u[i].boot = 0x777;
        u[i].undialable = i == 1;
        sign_as_member(&u[i]); /* (the record M signed for peer i) */
    }
    now += 2000;
    peers_from(p[0], 2, &u[1], now); /* peer 1's record reaches peer 0, and the other way */
    peers_from(p[1], 1, &u[0], now);
    CHECK_MSG(member(p[0], M)->undialable && member(p[1], M)->undialable && member(p[0], M)->inc == inc &&
                  member(p[1], M)->inc == inc,
              "the two peers hold one record of the member: undialable %d and %d", member(p[0], M)->undialable,
              member(p[1], M)->undialable);
    /* Its own hello again with the lesser record changes nothing either. */
    hello_from_as(p[1], M, inc, 0x777, false, now + 1);
    CHECK(member(p[1], M)->undialable);
    /* A restart within the same second: its own hello brings the new run's boot id at the same
     * incarnation, lesser bytes and all (the graph reads the same of it); a claim of another
     * boot id at that incarnation, from anyone else, is still ordered. */
    hello_from_as(p[1], M, inc, 0x100, true, now + 2);
    CHECK(member(p[1], M)->boot == 0x100 && member(p[1], M)->inc == inc);
    entry_of(&u[0], M, NULL, inc, RUMOR_MEMB_ALIVE, true);
    u[0].boot = 0x0ff;
    u[0].undialable = true;
    sign_as_member(&u[0]);
    peers_from(p[1], 1, &u[0], now + 3);
    CHECK(member(p[1], M)->boot == 0x100);

    /* Our own record: a change of reachability is a new incarnation, signed, and spread. */
    const uint32_t before = rumor_memb_incarnation(p[0]);
    uint8_t proof0[RUMOR_MEMB_PROOF_LEN];
    rumor_memb_set_undialable(p[0], false); /* (no change: nothing) */
    CHECK(rumor_memb_incarnation(p[0]) == before);
    memcpy(proof0, rumor_memb_proof(p[0]), RUMOR_MEMB_PROOF_LEN);
    rumor_memb_set_undialable(p[0], true);
    CHECK(rumor_memb_undialable(p[0]) && rumor_memb_incarnation(p[0]) == before + 1);
    uint8_t me[RUMOR_KEY_LEN], rec[RUMOR_MEMB_RECORD_MAX], want[RUMOR_MEMB_PROOF_LEN];
    key_of(1, me);
    char addr[RUMOR_MEMB_ADDR_LEN];
    addr_of(1, addr);
    fake_proof(rec, rumor_memb_record(rec, me, before + 1, 0x10, true, addr), want);
    CHECK(memcmp(rumor_memb_proof(p[0]), want, RUMOR_MEMB_PROOF_LEN) == 0 &&
          memcmp(proof0, want, RUMOR_MEMB_PROOF_LEN) != 0);
    for (int i = 0; i < 2; i++) rumor_memb_destroy(&p[i]);
}

/* The tests' certificate order: the later issued is the one whose last byte is greater. */
static int last_byte_order(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    return (int)a[al - 1] - (int)b[bl - 1];
}

/* Of two certificates of a member, every peer keeps the later (cfg.cert_order), however the
 * member shows them: a renewed one heard second hand replaces the one its own hello gave, and
 * its own hello with the older one afterwards changes nothing. */
static void test_cert_kept(void)
{
    rumor_memb_config_t cfg = rumor_memb_defaults();
    cfg.cert_order = last_byte_order;
    rumor_memb_t *m = strict_memb(cfg, 1, 1700000000u, 11);
    if (!m) return;
    const int M = 5, C = 6;
    uint64_t now = 1000;
    hello_from(m, C, 1700000100u, 0xc0c, now);
    hello_from(m, M, 1700000100u, 0x505, now); /* (its certificate: cert_of, last byte 0xc5) */
    int v = -1;
    for (int i = 0; i < rumor_memb_view_count(m); i++)
        if (index_of(rumor_memb_view_at(m, i)->key) == M) v = i;
    size_t len = 0;
    CHECK(v >= 0 && rumor_memb_view_cert(m, v, &len)[len - 1] == (0xc0 ^ M));
    rumor_memb_update_t u;
    entry_of(&u, M, NULL, 1700000100u, RUMOR_MEMB_ALIVE, true);
    u.boot = 0x505;
    u.cert[u.cert_len - 1] = 0xff; /* renewed: later */
    sign_as_member(&u);
    peers_from(m, C, &u, ++now);
    CHECK(rumor_memb_view_cert(m, v, &len)[len - 1] == 0xff);
    hello_from(m, M, 1700000100u, 0x505, ++now); /* its older one again, to us */
    CHECK(rumor_memb_view_cert(m, v, &len)[len - 1] == 0xff);
    rumor_memb_destroy(&m);
}

/* A claimant outside our view (the reservoir of a swarm larger than the view) is counted as
 * any other: its third disproved claim mutes it; and leaving and coming back (a bye, a hello)
 * resets nothing. */
static void test_liar_outside_view(void)
{
    rumor_memb_config_t cfg = rumor_memb_defaults();
    cfg.view_size = 2;
    const uint32_t t0 = 1700000000u;
    rumor_memb_t *m = strict_memb(cfg, 1, t0, 11);
    if (!m) return;
    const int B = 2, C = 3, F = 9;
    uint64_t now = 1000;
    hello_from(m, B, t0 + 100, 0xb0b, now);
    hello_from(m, C, t0 + 100, 0xc0c, now);
    hello_from(m, F, t0 + 100, 0xf0f, now); /* (the view is full: F waits in the reservoir) */
    CHECK(member(m, B) && member(m, C) && !member(m, F) && rumor_memb_passive_count(m) == 1);
    int pings = 0;
    b_answers(m, B, now, &pings);
    rumor_memb_update_t u;
    for (int k = 0; k < RUMOR_MEMB_LIES_MAX; k++) {
        now += 2 * (uint64_t)cfg.period_ms; /* (B last heard more than a period ago) */
        entry_of(&u, B, NULL, t0 + 100, RUMOR_MEMB_DEAD, true);
        u.boot = 0xb0b;
        sign_as_member(&u);
        peers_from(m, F, &u, now);
        CHECK_MSG(member(m, B) && member(m, B)->state == RUMOR_MEMB_SUSPECT, "claim %d: B suspect", k);
        b_answers(m, B, now + 10, &pings); /* B's own word clears it */
        CHECK(member(m, B) && member(m, B)->state == RUMOR_MEMB_ALIVE);
        if (k == 0) { /* F leaves and comes back between its lies */
            uint8_t fk[RUMOR_KEY_LEN];
            key_of(F, fk);
            char fa[RUMOR_MEMB_ADDR_LEN];
            addr_of(F, fa);
            memset(&tmsg, 0, sizeof tmsg);
            tmsg.kind = RUMOR_MEMB_BYE;
            rumor_memb_recv(m, fk, fa, &tmsg, now + 20);
            hello_from(m, F, t0 + 100, 0xf0f, now + 30);
        }
    }
    rumor_memb_stats_t st = rumor_memb_stats(m);
    CHECK_MSG(st.disproved == RUMOR_MEMB_LIES_MAX && st.muted == 1, "%llu disproved, %llu muted",
              (unsigned long long)st.disproved, (unsigned long long)st.muted);
    const uint64_t refused = st.refused_claims;
    now += 2 * (uint64_t)cfg.period_ms;
    peers_from(m, F, &u, now);
    CHECK(member(m, B) && member(m, B)->state == RUMOR_MEMB_ALIVE &&
          rumor_memb_stats(m).refused_claims == refused + 1);
    rumor_memb_destroy(&m);
}

/* Finding: one forged peers entry made nodes dial an address of the forger's choosing,
 * again and again, and pass it on. */
static void test_certs_and_dial_budget(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_memb_config_t cfg = rumor_memb_defaults();
    cfg.strict = true;
    uint8_t me[RUMOR_KEY_LEN], cert[RUMOR_MEMB_CERT_MAX];
    uint16_t cert_len;
    key_of(1, me);
    cert_of(1, cert, &cert_len);
    rumor_memb_t *m = rumor_memb_new(&cfg, me, "tcp://127.0.0.1:7001", 100, err);
    rumor_memb_set_identity(m, cert, cert_len, 11);
    const int B = 2, C = 3;
    uint64_t now = 1000;
    hello_from(m, B, 100, 0xb0b, now);
    hello_from(m, C, 100, 0xc0c, now);
    uint8_t other[RUMOR_KEY_LEN];
    key_of(9, other);
    rumor_memb_add(m, other, "tcp://127.0.0.1:7009", 100, now); /* known, but no certificate */
    (void)drain_seen(m, B);

    /* An entry without a certificate is dropped: not kept, not dialled. */
    rumor_memb_update_t u;
    entry_of(&u, 50, "tcp://198.51.100.7:9", 100, RUMOR_MEMB_ALIVE, false);
    const uint64_t d0 = rumor_memb_stats(m).dropped_input;
    peers_from(m, C, &u, ++now);
    CHECK(rumor_memb_stats(m).dropped_input == d0 + 1);
    CHECK(rumor_memb_passive_count(m) == 0);
    CHECK(drain_seen(m, 50).hellos == 0);
    /* Nothing we pass on lacks a certificate: PEERS samples (the exchange of many periods)
     * and piggybacked updates (pings, acks). */
    bool certless = false;
    int sent = 0;
    for (int k = 0; k < 40; k++) {
        now += cfg.period_ms / 2;
        rumor_memb_tick(m, now);
        uint8_t bk[RUMOR_KEY_LEN];
        key_of(B, bk);
        memset(&tmsg, 0, sizeof tmsg);
        tmsg.kind = RUMOR_MEMB_PING;
        tmsg.seq = (uint32_t)k;
        tmsg.inc = 100;
        rumor_memb_recv(m, bk, "tcp://127.0.0.1:7002", &tmsg, now);
        rumor_memb_action_t a;
        while (rumor_memb_next_action(m, &a)) {
            if (a.kind != RUMOR_MEMB_ACT_SEND) continue;
            const rumor_memb_update_t *l = a.msg.kind == RUMOR_MEMB_PEERS ? a.msg.peers : a.msg.upd;
            const int n = a.msg.kind == RUMOR_MEMB_PEERS ? a.msg.n_peers : a.msg.n_upd;
            for (int i = 0; i < n; i++) {
                certless |= l[i].cert_len == 0 || memcmp(l[i].key, other, RUMOR_KEY_LEN) == 0;
                sent++;
            }
        }
    }
    CHECK(!certless);
    CHECK_MSG(sent > 10, "%d entries passed on", sent);

    /* Twelve members heard of at once (certified, at addresses nobody answers at): members
     * never dialled before are dialled a few at once, then one a period. */
    const int first = 20, count = 12;
    for (int k = 0; k < count; k++) {
        char addr[RUMOR_MEMB_ADDR_LEN];
        snprintf(addr, sizeof addr, "tcp://198.51.100.%d:%d", 1 + k, 22 + k);
        entry_of(&u, first + k, addr, 100, RUMOR_MEMB_ALIVE, true);
        peers_from(m, C, &u, now);
    }
    CHECK(rumor_memb_passive_count(m) == count);
    int hellos[32] = {0}, forgotten_downs = 0, max_new_per_period = 0, after_forget = 0;
    bool forgotten[32] = {false};
    uint64_t last_hello[32] = {0}, min_gap[32];
    for (int k = 0; k < 32; k++) min_gap[k] = UINT64_MAX;
    const uint64_t start = now;
    int new_this_period = 0, n_new = 0;
    bool over_budget = false;
    uint64_t period_start = now;
    for (uint64_t t = now; t < start + 100 * (uint64_t)cfg.period_ms; t += cfg.period_ms / 4) {
        if (t >= period_start + cfg.period_ms) {
            period_start = t;
            new_this_period = 0;
        }
        rumor_memb_tick(m, t);
        rumor_memb_action_t a;
        while (rumor_memb_next_action(m, &a)) {
            const int who = index_of(a.key) - first;
            if (who < 0 || who >= count) continue;
            if (a.kind == RUMOR_MEMB_ACT_DOWN) {
                forgotten_downs++;
                forgotten[who] = true;
            }
            if (forgotten[who] && a.kind == RUMOR_MEMB_ACT_SEND) after_forget++;
            if (a.kind != RUMOR_MEMB_ACT_SEND || a.msg.kind != RUMOR_MEMB_HELLO) continue;
            if (hellos[who] == 0) {
                new_this_period++;
                n_new++;
                over_budget |= n_new > RUMOR_MEMB_DIAL_BURST + (int)((t - start) / cfg.period_ms);
            }
            if (new_this_period > max_new_per_period) max_new_per_period = new_this_period;
            if (hellos[who] > 0 && t - last_hello[who] < min_gap[who]) min_gap[who] = t - last_hello[who];
            hellos[who]++;
            last_hello[who] = t;
        }
        /* The same claims again (a forgotten member is not dialled for them); B and C keep
         * answering, so they stay; the twelve never do. */
        for (int k = 0; k < count; k++) {
            if (!forgotten[k]) continue;
            char addr[RUMOR_MEMB_ADDR_LEN];
            snprintf(addr, sizeof addr, "tcp://198.51.100.%d:%d", 1 + k, 22 + k);
            entry_of(&u, first + k, addr, 100, RUMOR_MEMB_ALIVE, true);
            peers_from(m, C, &u, t);
        }
        hello_from(m, B, 100, 0xb0b, t);
        hello_from(m, C, 100, 0xc0c, t);
        while (rumor_memb_next_action(m, &a)) {
        }
    }
    /* A burst, then one a period. */
    CHECK_MSG(max_new_per_period == RUMOR_MEMB_DIAL_BURST, "%d members never dialled were dialled in one period",
              max_new_per_period);
    CHECK(!over_budget && n_new == count);
    bool bounded = true, backed_off = true;
    for (int k = 0; k < count; k++) {
        bounded &= hellos[k] >= 1 && hellos[k] <= RUMOR_MEMB_MAX_INVITES;
        backed_off &= hellos[k] < 2 || min_gap[k] >= cfg.period_ms;
    }
    CHECK(bounded && backed_off);
    CHECK_MSG(forgotten_downs == count && rumor_memb_stats(m).forgotten == (uint64_t)count,
              "%d forgotten", forgotten_downs);
    CHECK(rumor_memb_passive_count(m) == 0);
    CHECK_MSG(after_forget == 0, "%d hellos to forgotten members", after_forget);
    rumor_memb_destroy(&m);
}

/* A view of a thousand members (a simulator's peer holds the whole swarm): each keeps its
 * address at its own length, exactly (the longest, 255 bytes, too; a longer one is refused),
 * and nothing of credentials (none came); a member's own hello moves its address, once a
 * period; members that leave take theirs with them. */
static void test_view_addresses(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_memb_config_t cfg = rumor_memb_defaults();
    cfg.view_size = 1000;
    uint8_t me[RUMOR_KEY_LEN], k[RUMOR_KEY_LEN];
    key_of(1, me);
    rumor_memb_t *m = rumor_memb_new(&cfg, me, "tcp://127.0.0.1:7001", 10, err);
    static char addr[1000][RUMOR_MEMB_ADDR_LEN];
    char longest[RUMOR_MEMB_ADDR_LEN + 1];
    memset(longest, 'a', sizeof longest - 1);
    longest[sizeof longest - 1] = '\0';
    memcpy(longest, "tcp://", 6);
    for (int i = 0; i < 1000; i++) {
        key_of(2 + i, k);
        if (i == 7) {
            rumor_memb_add(m, k, longest, 5, 0); /* 256 bytes: refused */
            snprintf(addr[i], sizeof addr[i], "%s", longest); /* (255) */
        } else {
            snprintf(addr[i], sizeof addr[i], "tcp://10.%d.%d.%d:%d", i % 7, i / 7, i % 250, 7000 + i * 13);
        }
        CHECK(rumor_memb_view_count(m) == i);
        rumor_memb_add(m, k, addr[i], 5, 0);
    }
    CHECK(rumor_memb_view_count(m) == 1000);
    int same = 0, certs = 0;
    for (int v = 0; v < rumor_memb_view_count(m); v++) {
        const rumor_memb_member_t *e = rumor_memb_view_at(m, v);
        const int i = index_of(e->key) - 2;
        same += i >= 0 && i < 1000 && strcmp(e->addr, addr[i]) == 0;
        size_t len;
        (void)rumor_memb_view_cert(m, v, &len);
        certs += len != 0;
    }
    CHECK_MSG(same == 1000 && certs == 0, "%d addresses as given, %d certificates", same, certs);
    CHECK(strlen(addr[7]) == RUMOR_MEMB_ADDR_LEN - 1);

    /* Member 12's own hello, a period on, from a new address. */
    static rumor_memb_msg_t msg;
    memset(&msg, 0, sizeof msg);
    msg.kind = RUMOR_MEMB_HELLO;
    msg.inc = 6;
    msg.boot = 77;
    snprintf(msg.addr, sizeof msg.addr, "tcp://192.0.2.12:%d", 40000);
    key_of(2 + 12, k);
    rumor_memb_recv(m, k, msg.addr, &msg, cfg.period_ms + 1);
    const rumor_memb_member_t *moved = NULL;
    for (int v = 0; v < rumor_memb_view_count(m); v++)
        if (index_of(rumor_memb_view_at(m, v)->key) == 14) moved = rumor_memb_view_at(m, v);
    CHECK(moved && strcmp(moved->addr, "tcp://192.0.2.12:40000") == 0 && moved->inc == 6);

    /* Ten leave (bye): out of the view, the rest as they were. */
    for (int i = 100; i < 110; i++) {
        memset(&msg, 0, sizeof msg);
        msg.kind = RUMOR_MEMB_BYE;
        key_of(2 + i, k);
        rumor_memb_recv(m, k, addr[i], &msg, cfg.period_ms + 2);
    }
    same = 0;
    for (int v = 0; v < rumor_memb_view_count(m); v++) {
        const rumor_memb_member_t *e = rumor_memb_view_at(m, v);
        const int i = index_of(e->key) - 2;
        same += strcmp(e->addr, i == 12 ? "tcp://192.0.2.12:40000" : addr[i]) == 0 && (i < 100 || i >= 110);
    }
    CHECK_MSG(rumor_memb_view_count(m) == 990 && same == 990, "%d members, %d as they were",
              rumor_memb_view_count(m), same);
    rumor_memb_action_t a;
    while (rumor_memb_next_action(m, &a)) {
    }
    /* Leaving says bye to all 990 at once: the outbox grows to its 256 actions and drops the
     * oldest sends beyond, in order; drained, it takes the next action as ever. */
    uint8_t want[RUMOR_KEY_LEN];
    memcpy(want, rumor_memb_view_at(m, rumor_memb_view_count(m) - 256)->key, RUMOR_KEY_LEN);
    rumor_memb_leave(m, cfg.period_ms + 3);
    int byes = 0, first_ok = 0;
    while (rumor_memb_next_action(m, &a))
        if (a.kind == RUMOR_MEMB_ACT_SEND && a.msg.kind == RUMOR_MEMB_BYE)
            first_ok += byes++ == 0 && memcmp(a.key, want, RUMOR_KEY_LEN) == 0;
    CHECK_MSG(byes == 256 && first_ok == 1 && rumor_memb_stats(m).dropped_actions == 990 - 256,
              "%d byes, the first the 256th from the end: %d, %llu dropped", byes, first_ok,
              (unsigned long long)rumor_memb_stats(m).dropped_actions);
    rumor_memb_destroy(&m);
}

int main(void)
{
    test_bad_input_and_refutation();
    test_view_only_heard_from();
    test_forged_claims();
    test_equivocation();
    test_liar_outside_view();
    test_cert_kept();
    test_certs_and_dial_budget();
    test_join_and_failure(false);
    test_join_and_failure(true);
    test_strict_swarm();
    test_loss();
    test_partition_heals();
    test_leave();
    test_bounded_view();
    test_determinism();
    test_view_addresses();
    return check_done();
}
