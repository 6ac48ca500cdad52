/* test_gossip.c - the gossip engine without sockets: exact averages, push-sum conservation,
 * deadlines, rejections, the DiLoCo outer step, robust and
 * compressed gossip (secure mixing, and contraction against |lambda_2|: test_gossip_core.c). Links only the pure library. */
#include "gossip_swarm.h"
#include "wire.h"

static void test_algo_parse(void)
{
    rumor_algo_t a;
    char err[RUMOR_ERR_LEN], buf[32];
    CHECK_RC(rumor_algo_parse(&a, "dpsgd", err));
    CHECK(a.kind == RUMOR_ALGO_DPSGD && a.local_steps == 1);
    CHECK_RC(rumor_algo_parse(&a, "sgp", err));
    CHECK(a.kind == RUMOR_ALGO_SGP);
    CHECK_RC(rumor_algo_parse(&a, "diloco:50", err));
    CHECK(a.kind == RUMOR_ALGO_DILOCO && a.local_steps == 50 && a.outer_lr == 0.7 && a.outer_momentum == 0.9);
    rumor_algo_format(buf, sizeof buf, &a);
    CHECK(strcmp(buf, "diloco:50") == 0);
    const char *bad[] = {"", "dpsgdx", "diloco", "diloco:", "diloco:0", "diloco:-3", "diloco:5x", "diloco:100001", "SGP"};
    for (size_t i = 0; i < RUMOR_ARRAY_LEN(bad); i++) {
        err[0] = 0;
        CHECK_MSG(rumor_algo_parse(&a, bad[i], err) == RUMOR_EINVAL && err[0], "%s", bad[i]);
    }
}

/* ---- push-sum under random delays ---- */

typedef struct {
    int from, to;
    uint64_t at;
    rumor_gossip_chunk_t h;
    float *payload;
} flight_t;

static void test_push_sum(const char *topo, int n)
{
    const size_t P = 300, chunk = 64;
    swarm_t s;
    swarm_init(&s, n, topo, "sgp", P, chunk, 9, 1000);
    const size_t chunks = rumor_chunks(P, chunk);
    double *z0 = calloc(P, sizeof *z0), *z = calloc(P, sizeof *z), *wt = calloc(chunks, sizeof *wt);
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < P; j++) z0[j] += s.x[i][j];
    const size_t cap = 200000;
    flight_t *fl = calloc(cap, sizeof *fl);
    size_t nf = 0;
    rumor_rng_t rng;
    rumor_rng_init(&rng, 5);
    double worst_z = 0, worst_w = 0;
    uint64_t failed = 0;
    struct {
        int from;
        uint64_t at;
        rumor_gossip_send_t m;
    } late[64];
    int nlate = 0;
    for (uint64_t t = 0; t < 400; t++) {
        for (int k = 0; k < nlate;) {
            if (late[k].at <= t) {
                rumor_gossip_release(s.g[late[k].from], &late[k].m, false);
                late[k] = late[--nlate];
            } else {
                k++;
            }
        }
        /* Some peers reach a gossip point; their chunks leave with random delays, some sends
         * are refused by the "transport" and their mass handed back. */
        for (int i = 0; i < n; i++) {
            if (t >= 300 || rumor_rng_uniform(&rng) < 0.4) continue; /* after t = 300: drain */
            /* WAIT: both snapshots still lent to refused sends not yet handed back */
            if (rumor_gossip_step(s.g[i], s.x[i], t) != RUMOR_GOSSIP_DONE) continue;
            rumor_gossip_send_t m;
            while (rumor_gossip_next_send(s.g[i], &m)) {
                if (rumor_rng_uniform(&rng) < 0.05) {
                    /* refused by the transport, now or a few steps later (the node hands
                     * sends over from its own thread: the peer may be rounds further by then) */
                    if (nlate < 64 && rumor_rng_uniform(&rng) < 0.5) {
                        late[nlate].from = i, late[nlate].at = t + 1 + rumor_rng_below(&rng, 5);
                        late[nlate++].m = m;
                    } else {
                        rumor_gossip_release(s.g[i], &m, false);
                    }
                    failed++;
                    continue;
                }
                const uint32_t nc = (uint32_t)rumor_chunks(m.count, m.chunk_params);
                for (uint32_t c = 0; c < nc && nf < cap; c++) {
                    flight_t *f = &fl[nf++];
                    const size_t off = (size_t)c * m.chunk_params;
                    const size_t cn = m.count - off < m.chunk_params ? m.count - off : m.chunk_params;
                    f->from = i, f->to = find(&s, m.peer);
                    f->at = t + 1 + rumor_rng_below(&rng, 12);
                    f->h = (rumor_gossip_chunk_t){.round = m.round, .layout = m.layout, .w = m.share * m.w[c],
                                                  .chunk = c, .chunks = nc, .off = off, .n = cn};
                    f->payload = malloc(cn * sizeof(float));
                    memcpy(f->payload, m.params + off, cn * sizeof(float));
                }
                rumor_gossip_release(s.g[i], &m, true);
            }
        }
        for (size_t k = 0; k < nf;) {
            if (fl[k].at <= t) {
                CHECK(rumor_gossip_on_chunk(s.g[fl[k].to], s.key[fl[k].from], &fl[k].h, fl[k].payload,
                                            fl[k].h.n * sizeof(float), t));
                free(fl[k].payload);
                fl[k] = fl[--nf];
            } else {
                k++;
            }
        }
        /* Invariant: accumulators plus chunks in flight hold sum_i x_i(0) and n. */
        memset(z, 0, P * sizeof *z);
        memset(wt, 0, chunks * sizeof *wt);
        for (int i = 0; i < n; i++) rumor_gossip_mass(s.g[i], z, wt);
        for (int k = 0; k < nlate; k++) /* refused, not yet handed back */
            for (size_t j = 0; j < P; j++) {
                const double a = late[k].m.share * late[k].m.w[j / chunk];
                z[j] += a * late[k].m.params[j];
                if (j % chunk == 0) wt[j / chunk] += a;
            }
        for (size_t k = 0; k < nf; k++) {
            for (size_t j = 0; j < fl[k].h.n; j++) z[fl[k].h.off + j] += fl[k].h.w * fl[k].payload[j];
            wt[fl[k].h.chunk] += fl[k].h.w;
        }
        if (t == 0) continue; /* before every peer has started, part of the mass is still in x */
        double zs = 0;
        for (size_t j = 0; j < P; j++) zs += fabs(z0[j]);
        if (t >= 20) {
            for (size_t j = 0; j < P; j++) worst_z = fmax(worst_z, fabs(z[j] - z0[j]) / (zs / P));
            for (size_t c = 0; c < chunks; c++) worst_w = fmax(worst_w, fabs(wt[c] - n) / n);
        }
    }
    CHECK(nf == 0);
    CHECK(failed > 0);
    CHECK_MSG(worst_z < 1e-6, "%s: sum of w x drifted by %g (relative)", topo, worst_z);
    CHECK_MSG(worst_w < 1e-6, "%s: sum of w drifted by %g (relative)", topo, worst_w);
    /* And the de-biased models reach the average although W^T is only column-stochastic. */
    for (int r = 0; r < 150; r++) pass(&s, 1000 + (uint64_t)r);
    double worst = 0;
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < P; j++) worst = fmax(worst, fabs(s.x[i][j] - z0[j] / n));
    CHECK_MSG(worst < 1e-4, "%s: de-biased model %g from the average", topo, worst);
    free(fl);
    free(z0);
    free(z);
    free(wt);
    swarm_fini(&s);
}

/* ---- a dead peer ---- */

static void test_dead_peer(void)
{
    const int n = 8;
    swarm_t s;
    swarm_init(&s, n, "ring", "dpsgd", 100, 32, 3, 2000);
    uint64_t now = 1000;
    int rounds_done = 0;
    uint64_t worst_wait = 0;
    for (int r = 0; r < 40; r++) {
        if (r == 10) s.dead[3] = true; /* dies mid-round: its round-10 models never arrive */
        /* Every live peer reaches its gossip point; those that wait are woken at their
         * deadline (virtual time jumps there). */
        const uint64_t t0 = now;
        for (int spin = 0; spin < 100; spin++) {
            bool all = true;
            for (int i = 0; i < n; i++) {
                if (s.dead[i] || rumor_gossip_round(s.g[i]) > (uint64_t)r) continue;
                if (rumor_gossip_step(s.g[i], s.x[i], now) != RUMOR_GOSSIP_DONE) all = false;
                drain(&s, i, now);
            }
            if (all) break;
            uint64_t next = UINT64_MAX;
            for (int i = 0; i < n; i++)
                if (!s.dead[i] && rumor_gossip_round(s.g[i]) <= (uint64_t)r && rumor_gossip_deadline(s.g[i]) < next)
                    next = rumor_gossip_deadline(s.g[i]);
            CHECK(next != UINT64_MAX);
            if (next == UINT64_MAX) break;
            now = next > now ? next : now + 1;
        }
        if (now - t0 > worst_wait && r > 12) worst_wait = now - t0;
        rounds_done++;
        now += 5;
    }
    CHECK(rounds_done == 40);
    rumor_gossip_stats_t st2, st4, st0;
    rumor_gossip_stats(s.g[2], &st2);
    rumor_gossip_stats(s.g[4], &st4);
    rumor_gossip_stats(s.g[0], &st0);
    CHECK_MSG(st2.round == 40 && st4.round == 40, "%llu %llu", (unsigned long long)st2.round, (unsigned long long)st4.round);
    CHECK(st2.missing_total >= 29 && st4.missing_total >= 29); /* rounds 10..39, left out each time */
    CHECK(st0.missing_total == 0);
    /* The first rounds wait out the full timeout; after that the adaptive deadline is
     * min_wait (100 ms) plus twice the peer's own work per round (5 ms here): nothing else,
     * since arrivals come at once. */
    CHECK_MSG(worst_wait <= 110 + 5, "a round waited %llu ms for a dead peer", (unsigned long long)worst_wait);
    CHECK_MSG(st2.deadline_ms == 110, "%llu", (unsigned long long)st2.deadline_ms);
    /* The survivors still agree (a path of 7 peers). */
    double spread = 0;
    for (size_t j = 0; j < s.P; j++) {
        double lo = 1e30, hi = -1e30;
        for (int i = 0; i < n; i++)
            if (!s.dead[i]) lo = fmin(lo, s.x[i][j]), hi = fmax(hi, s.x[i][j]);
        spread = fmax(spread, hi - lo);
    }
    CHECK_MSG(spread < 0.05, "survivors spread %g", spread);
    swarm_fini(&s);
}

/* ---- the graph moves during a round ---- */

/* A member that joins while a round is in flight moves the ring: the neighbour it comes in
 * beside now sends to it, not to us, and the round does not wait for that one (before, it
 * waited out the round timeout: peers that began the round later, on the new view, never
 * send to us). What the others send under the new ring finishes the round at once. */
static void test_graph_moves(void)
{
    const int n = 5;
    swarm_t s;
    swarm_init(&s, n, "ring", "dpsgd", 16, 16, 5, 10000);
    /* Peer 0 begins round 0 before peer 4 is in its view: ring 0-1-2-3, it waits for 1 and 3. */
    rumor_gossip_set_view(s.g[0], (const uint8_t(*)[RUMOR_KEY_LEN])s.key, 4);
    const uint64_t now = 1000;
    CHECK(rumor_gossip_step(s.g[0], s.x[0], now) == RUMOR_GOSSIP_WAIT);
    drain(&s, 0, now);
    /* Peer 4 is in every view now (ring 0-1-2-3-4): the others begin on it, and 3 sends to 2
     * and 4, not to 0; 4 sends to 0. */
    rumor_gossip_set_view(s.g[0], (const uint8_t(*)[RUMOR_KEY_LEN])s.key, (size_t)n);
    for (int spin = 0; spin < 4; spin++)
        for (int i = 1; i < n; i++)
            if (rumor_gossip_round(s.g[i]) == 0) {
                (void)rumor_gossip_step(s.g[i], s.x[i], now);
                drain(&s, i, now);
            }
    /* 4 waits for 0, which sent to 1 and 3: nothing tells it yet that nothing comes. */
    CHECK(rumor_gossip_round(s.g[1]) == 1 && rumor_gossip_round(s.g[2]) == 1 && rumor_gossip_round(s.g[3]) == 1);
    CHECK(rumor_gossip_round(s.g[4]) == 0);
    CHECK_MSG(rumor_gossip_step(s.g[0], s.x[0], now) == RUMOR_GOSSIP_DONE,
              "a round waits for a neighbour the graph moved away");
    rumor_gossip_stats_t st;
    rumor_gossip_stats(s.g[0], &st);
    CHECK_MSG(st.round == 1 && st.last_missing == 0 && st.last_peers == 2, "round %llu, missing %d, peers %d",
              (unsigned long long)st.round, st.last_missing, st.last_peers);
    CHECK(st.models_in == 2); /* 1's and 4's (3's model of round 0 went to its new neighbours) */
    /* 0's next round, on the new ring, goes to 1 and 4: 4 sees that 0 moved on, and is done. */
    CHECK(rumor_gossip_step(s.g[0], s.x[0], now) == RUMOR_GOSSIP_WAIT);
    drain(&s, 0, now);
    CHECK(rumor_gossip_step(s.g[4], s.x[4], now) == RUMOR_GOSSIP_DONE);
    swarm_fini(&s);
}

/* Members are gathered from the view once and kept while it does not change (a large swarm
 * sorted thousands every round): a view that loses a member between rounds still moves the
 * graph at the next round. Ring 0-1-2-3-4 for two rounds; 4 leaves and every view drops it:
 * ring 0-1-2-3, where 0 and 3 are neighbours and nobody waits for 4. */
static void test_members_follow_view(void)
{
    swarm_t s;
    swarm_init(&s, 5, "ring", "dpsgd", 16, 16, 3, 10000);
    const uint64_t now = 1000;
    CHECK(pass(&s, now));
    CHECK(pass(&s, now));
    s.dead[4] = true;
    for (int i = 0; i < 4; i++) rumor_gossip_set_view(s.g[i], (const uint8_t(*)[RUMOR_KEY_LEN])s.key, 4);
    CHECK_MSG(pass(&s, now), "a round waits for a member that left the view");
    for (int i = 0; i < 4; i++) {
        rumor_gossip_stats_t st;
        rumor_gossip_stats(s.g[i], &st);
        CHECK_MSG(st.round == 3 && st.last_missing == 0 && st.last_peers == 2, "peer %d: round %llu, missing %d, peers %d",
                  i, (unsigned long long)st.round, st.last_missing, st.last_peers);
    }
    swarm_fini(&s);
}

/* ---- known answers and rejections on three peers ---- */

static void test_known_answers(void)
{
    /* complete graph on 3: W = 1/3 everywhere. */
    swarm_t s;
    swarm_init(&s, 3, "complete", "dpsgd+overlap", 10, 4, 1, 500); /* 3 chunks: 4, 4, 2 */
    for (int i = 0; i < 3; i++)
        for (size_t j = 0; j < 10; j++) s.x[i][j] = (float)(i * 10 + j);
    for (int i = 0; i < 3; i++) {
        CHECK(rumor_gossip_step(s.g[i], s.x[i], 0) == RUMOR_GOSSIP_DONE);
    }
    /* Peer 0: from peer 1 all of it, from peer 2 only chunk 0; peer 0's own progress +1. */
    rumor_gossip_send_t m;
    int got1 = 0;
    while (rumor_gossip_next_send(s.g[1], &m)) {
        if (find(&s, m.peer) == 0) deliver(&s, 1, &m, 5), got1++;
        else rumor_gossip_release(s.g[1], &m, true);
    }
    CHECK(got1 == 1);
    while (rumor_gossip_next_send(s.g[2], &m)) {
        if (find(&s, m.peer) == 0) {
            rumor_gossip_chunk_t h = {.round = m.round, .layout = m.layout, .w = m.share, .chunk = 0, .chunks = 3,
                                      .off = 0, .n = 4};
            CHECK(m.share > 0.3333 && m.share < 0.3334);
            CHECK(rumor_gossip_on_chunk(s.g[0], s.key[2], &h, m.params, 16, 6));
            /* rejections, each counted, none mixed */
            rumor_gossip_chunk_t b = h;
            b.layout = 99;
            CHECK(!rumor_gossip_on_chunk(s.g[0], s.key[2], &b, m.params, 16, 6));
            b = h, b.chunks = 4;
            CHECK(!rumor_gossip_on_chunk(s.g[0], s.key[2], &b, m.params, 16, 6));
            b = h, b.chunk = 1, b.off = 3;
            CHECK(!rumor_gossip_on_chunk(s.g[0], s.key[2], &b, m.params, 16, 6));
            b = h, b.chunk = 2, b.off = 8, b.n = 4;
            CHECK(!rumor_gossip_on_chunk(s.g[0], s.key[2], &b, m.params, 16, 6));
            b = h, b.chunk = 1, b.off = 4;
            CHECK(!rumor_gossip_on_chunk(s.g[0], s.key[2], &b, m.params + 4, 12, 6)); /* short */
            b = h, b.w = 0;
            CHECK(!rumor_gossip_on_chunk(s.g[0], s.key[2], &b, m.params, 16, 6));
            b = h, b.w = 1.5;
            CHECK(!rumor_gossip_on_chunk(s.g[0], s.key[2], &b, m.params, 16, 6));
            b = h, b.w = NAN;
            CHECK(!rumor_gossip_on_chunk(s.g[0], s.key[2], &b, m.params, 16, 6));
            CHECK(!rumor_gossip_on_chunk(s.g[0], s.key[2], &h, m.params, 16, 6)); /* duplicate */
            /* A NaN in chunk 1 spoils the rest of that message (chunk 2 too). */
            float bad[4] = {1, 2, NAN, 4};
            b = h, b.chunk = 1, b.off = 4;
            CHECK(!rumor_gossip_on_chunk(s.g[0], s.key[2], &b, bad, 16, 6));
            b = h, b.chunk = 2, b.off = 8, b.n = 2;
            CHECK(!rumor_gossip_on_chunk(s.g[0], s.key[2], &b, m.params + 8, 8, 6));
            float inf[4] = {1, INFINITY, 3, 4};
            uint8_t other[RUMOR_KEY_LEN];
            key_of(other, 77);
            b = h;
            CHECK(!rumor_gossip_on_chunk(s.g[0], other, &b, inf, 16, 6));
        }
        rumor_gossip_release(s.g[2], &m, true);
    }
    rumor_gossip_stats_t st;
    rumor_gossip_stats(s.g[0], &st);
    CHECK(st.drops[RUMOR_GOSSIP_DROP_LAYOUT] == 1 && st.drops[RUMOR_GOSSIP_DROP_SHAPE] == 4);
    CHECK(st.drops[RUMOR_GOSSIP_DROP_WEIGHT] == 3 && st.drops[RUMOR_GOSSIP_DROP_DUPLICATE] == 1);
    CHECK(st.drops[RUMOR_GOSSIP_DROP_AHEAD] == 0 && st.drops[RUMOR_GOSSIP_DROP_NONFINITE] == 3);
    CHECK(st.models_in == 1 && st.chunks_in == 4);
    /* Not ready before the deadline (peer 2 incomplete); at it, ready. */
    float keep[10];
    for (size_t j = 0; j < 10; j++) s.x[0][j] += 1.0f, keep[j] = s.x[0][j];
    CHECK(rumor_gossip_step(s.g[0], s.x[0], 10) == RUMOR_GOSSIP_WAIT);
    CHECK(memcmp(keep, s.x[0], sizeof keep) == 0);
    CHECK(rumor_gossip_deadline(s.g[0]) == 500); /* started at 0, round timeout 500 */
    /* Neighbours far ahead. One member's word never moves a peer: peer 1's round 30 (beyond
     * the window) is dropped, and this peer keeps waiting (for peer 2's round 0).
     * A second member beyond the window vouches: peer 2's round 5, the lowest, is parked in the
     * free slot, the next ahead round has no slot left (dropped, counted), and this peer stops
     * waiting: it will jump to round 5. */
    rumor_gossip_chunk_t ah = {.round = 30, .layout = 0x1234, .w = 0.3, .chunk = 0, .chunks = 3, .off = 0, .n = 4};
    CHECK(!rumor_gossip_on_chunk(s.g[0], s.key[1], &ah, s.x[1], 16, 11));
    CHECK(rumor_gossip_step(s.g[0], s.x[0], 11) == RUMOR_GOSSIP_WAIT);
    ah.round = 5;
    CHECK(rumor_gossip_on_chunk(s.g[0], s.key[2], &ah, s.x[2], 16, 11));
    ah.round = 7;
    CHECK(!rumor_gossip_on_chunk(s.g[0], s.key[2], &ah, s.x[2], 16, 11));
    CHECK(rumor_gossip_step(s.g[0], s.x[0], 12) == RUMOR_GOSSIP_DONE);
    /* Chunk 0: (x0 + x1 + x2)/3 + 1; chunks 1, 2: (x0 + x1)/2 + 1 (renormalised). */
    for (size_t j = 0; j < 10; j++) {
        const double want = j < 4 ? (j + (10 + j) + (20 + j)) / 3.0 + 1 : (j + (10 + j)) / 2.0 + 1;
        CHECK_NEAR(s.x[0][j], want, 1e-5);
    }
    rumor_gossip_stats(s.g[0], &st);
    CHECK(st.last_missing == 1 && st.last_peers == 2 && st.round == 1);
    /* Peer 0 finished round 0 and started round 5, where the neighbour's model already is. */
    CHECK(rumor_gossip_round(s.g[0]) == 5);
    rumor_gossip_stats(s.g[0], &st);
    CHECK(st.chunks_in == 5 && st.drops[RUMOR_GOSSIP_DROP_AHEAD] == 2);
    /* Stale: round 0 is over. */
    rumor_gossip_chunk_t h = {.round = 0, .layout = 0x1234, .w = 0.3, .chunk = 0, .chunks = 3, .off = 0, .n = 4};
    CHECK(!rumor_gossip_on_chunk(s.g[0], s.key[1], &h, s.x[1], 16, 600));
    rumor_gossip_stats(s.g[0], &st);
    CHECK(st.drops[RUMOR_GOSSIP_DROP_STALE] == 1 && st.drops[RUMOR_GOSSIP_DROP_AHEAD] == 2);
    /* One member claiming round 10^9, again and again: dropped, and round 5, past its deadline,
     * is finished and followed by round 6, not 10^9. */
    ah.round = 1000000000;
    for (int k = 0; k < 3; k++) CHECK(!rumor_gossip_on_chunk(s.g[0], s.key[2], &ah, s.x[2], 16, 601));
    rumor_gossip_send_t sent;
    while (rumor_gossip_next_send(s.g[0], &sent)) rumor_gossip_release(s.g[0], &sent, true); /* (the wire's done) */
    CHECK(rumor_gossip_step(s.g[0], s.x[0], 602) == RUMOR_GOSSIP_DONE && rumor_gossip_round(s.g[0]) == 6);
    /* ... nor is it waited for: its model of a round beyond the window says it moved on, so
     * round 6 is mixed as soon as peer 1's model is in, long before its deadline. */
    while (rumor_gossip_next_send(s.g[0], &sent)) rumor_gossip_release(s.g[0], &sent, true);
    CHECK(rumor_gossip_step(s.g[0], s.x[0], 603) == RUMOR_GOSSIP_WAIT);
    CHECK(!rumor_gossip_on_chunk(s.g[0], s.key[2], &ah, s.x[2], 16, 604));
    CHECK(rumor_gossip_step(s.g[0], s.x[0], 605) == RUMOR_GOSSIP_WAIT); /* (peer 1's is not in yet) */
    for (uint32_t c = 0; c < 3; c++) {
        rumor_gossip_chunk_t r6 = {.round = 6, .layout = 0x1234, .w = 0.3, .chunk = c, .chunks = 3, .off = 4 * c,
                                   .n = c < 2 ? 4 : 2};
        CHECK(rumor_gossip_on_chunk(s.g[0], s.key[1], &r6, s.x[1] + 4 * c, r6.n * 4, 606));
    }
    CHECK(rumor_gossip_step(s.g[0], s.x[0], 607) == RUMOR_GOSSIP_DONE && rumor_gossip_round(s.g[0]) == 7);
    swarm_fini(&s);
}

/* D-PSGD's plain form (the default): a round is finished at the gossip point that began it,
 * once this round's models are in: x <- mix(x), the exact mean on a complete graph; a peer
 * whose neighbour is missing waits, x untouched, until the deadline and then mixes what came. */
static void test_known_answers_plain(void)
{
    swarm_t s;
    swarm_init(&s, 3, "complete", "dpsgd", 10, 4, 1, 500); /* 3 chunks: 4, 4, 2 */
    for (int i = 0; i < 3; i++)
        for (size_t j = 0; j < 10; j++) s.x[i][j] = (float)(i * 10 + j);
    /* Peers 0 and 1 wait for the later ones; peer 2, whose neighbours have sent, finishes. */
    CHECK(rumor_gossip_step(s.g[0], s.x[0], 0) == RUMOR_GOSSIP_WAIT);
    drain(&s, 0, 1);
    CHECK(rumor_gossip_step(s.g[1], s.x[1], 2) == RUMOR_GOSSIP_WAIT);
    drain(&s, 1, 3);
    CHECK(rumor_gossip_step(s.g[2], s.x[2], 4) == RUMOR_GOSSIP_DONE);
    for (size_t j = 0; j < 10; j++) CHECK_NEAR(s.x[2][j], 10.0 + (double)j, 1e-5);
    drain(&s, 2, 5);
    for (int i = 0; i < 2; i++) {
        CHECK(rumor_gossip_step(s.g[i], s.x[i], 6) == RUMOR_GOSSIP_DONE);
        for (size_t j = 0; j < 10; j++) CHECK_NEAR(s.x[i][j], 10.0 + (double)j, 1e-5);
    }
    rumor_gossip_stats_t st;
    rumor_gossip_stats(s.g[0], &st);
    CHECK(st.round == 1 && st.last_peers == 2 && st.last_missing == 0 && rumor_gossip_round(s.g[0]) == 1);
    /* Round 1: peer 2 is silent. Peer 0 waits with x as it was, and at the deadline mixes
     * itself and peer 1 only, the weights renormalised. */
    for (int i = 0; i < 3; i++)
        for (size_t j = 0; j < 10; j++) s.x[i][j] = (float)(i * 10 + j);
    CHECK(rumor_gossip_step(s.g[1], s.x[1], 100) == RUMOR_GOSSIP_WAIT);
    drain(&s, 1, 100);
    float keep[10];
    memcpy(keep, s.x[0], sizeof keep);
    CHECK(rumor_gossip_step(s.g[0], s.x[0], 100) == RUMOR_GOSSIP_WAIT);
    CHECK(memcmp(keep, s.x[0], sizeof keep) == 0);
    const uint64_t deadline = rumor_gossip_deadline(s.g[0]);
    CHECK(deadline > 100 && deadline <= 600);
    CHECK(rumor_gossip_step(s.g[0], s.x[0], deadline - 1) == RUMOR_GOSSIP_WAIT);
    CHECK(rumor_gossip_step(s.g[0], s.x[0], deadline) == RUMOR_GOSSIP_DONE);
    for (size_t j = 0; j < 10; j++) CHECK_NEAR(s.x[0][j], (j + (10.0 + j)) / 2.0, 1e-5);
    rumor_gossip_stats(s.g[0], &st);
    CHECK(st.round == 2 && st.last_peers == 1 && st.last_missing == 1);
    swarm_fini(&s);
}

/* Optimizer state mixed with the model (dadamw's second moment): x holds params + extra floats,
 * a round sends and mixes both, the model's chunks and the state's alike; only dpsgd, without
 * compressed gossip; an engine without the state takes none of those chunks. */
static void test_extra_state(void)
{
    char err[RUMOR_ERR_LEN];
    enum { P = 6, N = 3 };
    rumor_topology_t *topo = rumor_topology_new("complete", 1, err);
    uint8_t keys[N][RUMOR_KEY_LEN];
    rumor_gossip_t *g[N];
    float x[N][2 * P];
    for (int i = 0; i < N; i++) key_of(keys[i], i);
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < 2 * P; j++) x[i][j] = (float)(i * 10 + j) * (j < P ? 1.0f : 0.001f);
        rumor_gossip_config_t cfg = {.params = P, .extra = P, .layout = 9, .chunk_params = 4, .round_timeout_ms = 500};
        CHECK_RC(rumor_algo_parse(&cfg.algo, "dpsgd", err));
        memcpy(cfg.self, keys[i], RUMOR_KEY_LEN);
        CHECK((g[i] = rumor_gossip_new(&cfg, topo, x[i], err)) != NULL);
        rumor_gossip_set_view(g[i], (const uint8_t(*)[RUMOR_KEY_LEN])keys, N);
    }
    CHECK(rumor_gossip_chunk_count(g[0]) == 3); /* 12 floats in chunks of 4 */
    for (int pass = 0; pass < 2; pass++) /* the last peer finishes at once, the others once it sent */
        for (int i = 0; i < (pass ? N - 1 : N); i++) {
            const rumor_gossip_status_t st = rumor_gossip_step(g[i], x[i], 10);
            CHECK(pass == 1 || i == N - 1 ? st == RUMOR_GOSSIP_DONE : st == RUMOR_GOSSIP_WAIT);
            rumor_gossip_send_t m;
            while (rumor_gossip_next_send(g[i], &m)) {
                int to = -1;
                for (int k = 0; k < N; k++) to = memcmp(keys[k], m.peer, RUMOR_KEY_LEN) == 0 ? k : to;
                CHECK(m.count == 2 * P);
                for (uint32_t c = 0; c < 3; c++) {
                    const rumor_gossip_chunk_t h = {.round = m.round, .layout = 9, .w = m.share * m.w[c], .chunk = c,
                                                    .chunks = 3, .off = 4 * c, .n = 4};
                    CHECK(rumor_gossip_on_chunk(g[to], keys[i], &h, m.params + 4 * c, 16, 10));
                }
                rumor_gossip_release(g[i], &m, true);
            }
        }
    for (int i = 0; i < N; i++)
        for (int j = 0; j < 2 * P; j++) CHECK_NEAR(x[i][j], (float)(10 + j) * (j < P ? 1.0f : 0.001f), 1e-5);
    CHECK(rumor_gossip_plausible(g[0], x[0])); /* reads the model's floats only */
    /* A peer without the state: its geometry differs, every chunk is dropped. */
    rumor_gossip_config_t plain = {.params = P, .layout = 9, .chunk_params = 4, .round_timeout_ms = 500};
    CHECK_RC(rumor_algo_parse(&plain.algo, "dpsgd", err));
    memcpy(plain.self, keys[0], RUMOR_KEY_LEN);
    rumor_gossip_t *q = rumor_gossip_new(&plain, topo, x[0], err);
    CHECK(q != NULL);
    rumor_gossip_set_view(q, (const uint8_t(*)[RUMOR_KEY_LEN])keys, N);
    const rumor_gossip_chunk_t h = {.round = 0, .layout = 9, .w = 0.3, .chunk = 0, .chunks = 3, .off = 0, .n = 4};
    CHECK(!rumor_gossip_on_chunk(q, keys[1], &h, x[1], 16, 10));
    rumor_gossip_destroy(&q);
    /* Only dpsgd, without compressed gossip. */
    rumor_gossip_config_t bad = {.params = P, .extra = P, .layout = 9, .chunk_params = 4};
    memcpy(bad.self, keys[0], RUMOR_KEY_LEN);
    CHECK_RC(rumor_algo_parse(&bad.algo, "sgp", err));
    CHECK(rumor_gossip_new(&bad, topo, x[0], err) == NULL && strstr(err, "dpsgd"));
    CHECK_RC(rumor_algo_parse(&bad.algo, "diloco:4", err));
    CHECK(rumor_gossip_new(&bad, topo, x[0], err) == NULL && strstr(err, "dpsgd"));
    for (int i = 0; i < N; i++) rumor_gossip_destroy(&g[i]);
    rumor_topology_destroy(&topo);
}

/* The overlapped form's last gossip point (rumor_gossip_close) overlaps nothing: it finishes
 * the round in flight and then its own, so every peer of a complete graph ends on the mean of
 * the models they held, their last local steps in it. */
static void test_overlap_close(void)
{
    swarm_t s;
    swarm_init(&s, 3, "complete", "dpsgd+overlap", 10, 4, 1, 500);
    for (int r = 0; r < 4; r++) {
        const bool last = r == 3;
        double mean[10] = {0};
        for (int i = 0; i < 3; i++)
            for (size_t j = 0; j < 10; j++) {
                s.x[i][j] += (float)(0.1 * (i + 1) * (double)(j + 1)); /* local progress */
                mean[j] += s.x[i][j] / 3.0;
            }
        if (last)
            for (int i = 0; i < 3; i++) rumor_gossip_close(s.g[i]);
        CHECK(pass(&s, 10 * (uint64_t)r));
        bool apart = false;
        for (int i = 0; i < 3; i++)
            for (size_t j = 0; j < 10; j++) {
                if (last) CHECK_NEAR(s.x[i][j], mean[j], 1e-5);
                apart |= fabs(s.x[i][j] - s.x[0][j]) > 1e-3;
            }
        CHECK(last ? !apart : apart); /* before the last point, each model carries its own steps */
    }
    rumor_gossip_stats_t st;
    rumor_gossip_stats(s.g[0], &st);
    CHECK(st.round == 4 && rumor_gossip_round(s.g[0]) == 4);
    swarm_fini(&s);
}

/* Round numbers never wrap: a claim beyond RUMOR_GOSSIP_ROUND_MAX is dropped and moves
 * nothing; one of RUMOR_GOSSIP_ROUND_MAX is a jump like any other, and rounds go on from it. */
static void test_round_cap(void)
{
    swarm_t s;
    swarm_init(&s, 2, "complete", "dpsgd+overlap", 8, 8, 1, 500);
    uint64_t now = 0;
    const uint64_t claims[] = {UINT64_MAX, RUMOR_GOSSIP_ROUND_MAX + 1, RUMOR_GOSSIP_ROUND_MAX};
    const uint64_t want[] = {1, 3, RUMOR_GOSSIP_ROUND_MAX}; /* two rounds an iteration */
    for (int k = 0; k < 3; k++) {
        CHECK(rumor_gossip_step(s.g[0], s.x[0], now) == RUMOR_GOSSIP_DONE);
        rumor_gossip_send_t m;
        while (rumor_gossip_next_send(s.g[0], &m)) rumor_gossip_release(s.g[0], &m, true);
        rumor_gossip_chunk_t h = {.round = claims[k], .layout = 0x1234, .w = 0.5, .chunk = 0, .chunks = 1, .off = 0,
                                  .n = 8};
        (void)rumor_gossip_on_chunk(s.g[0], s.key[1], &h, s.x[1], 32, now + 1);
        now += 600;
        CHECK(rumor_gossip_step(s.g[0], s.x[0], now) == RUMOR_GOSSIP_DONE);
        CHECK_MSG(rumor_gossip_round(s.g[0]) == want[k], "claim %d: round %llu", k,
                  (unsigned long long)rumor_gossip_round(s.g[0]));
        /* The learning-rate schedule follows the engine's round (with the one in flight),
         * never more than RUMOR_SCHEDULE_AHEAD (16) past the rounds trained (here 2k + 2). */
        const long sk = rumor_gossip_schedule_round(s.g[0], 2 * k + 2), want_sk[] = {2, 4, 6 + 16};
        CHECK_MSG(sk == want_sk[k], "claim %d: schedule at %ld", k, sk);
        while (rumor_gossip_next_send(s.g[0], &m)) rumor_gossip_release(s.g[0], &m, true);
        now += 600;
    }
    swarm_fini(&s);
}

/* The halves of a healed partition, 500 rounds apart: a peer of the half behind hears one
 * member of the other half a round, a different one each time. The first claim alone moves it
 * nowhere (one member's word never does), nor does the same member's again; the
 * claim is kept, and a second member's, rounds later, vouches for it: the peer skips to the
 * lower of the two. */
static void test_ahead_across_rounds(void)
{
    swarm_t s;
    swarm_init(&s, 4, "complete", "dpsgd+overlap", 8, 8, 1, 500);
    uint64_t now = 0;
    const int from[] = {1, 1, 2};
    const uint64_t claims[] = {500, 502, 505}, want[] = {1, 3, 500}; /* (two rounds an iteration) */
    for (int k = 0; k < 3; k++) {
        CHECK(rumor_gossip_step(s.g[0], s.x[0], now) == RUMOR_GOSSIP_DONE);
        rumor_gossip_send_t m;
        while (rumor_gossip_next_send(s.g[0], &m)) rumor_gossip_release(s.g[0], &m, true);
        rumor_gossip_chunk_t h = {.round = claims[k], .layout = 0x1234, .w = 0.25, .chunk = 0, .chunks = 1, .off = 0,
                                  .n = 8};
        (void)rumor_gossip_on_chunk(s.g[0], s.key[from[k]], &h, s.x[from[k]], 32, now + 1);
        now += 600;
        CHECK(rumor_gossip_step(s.g[0], s.x[0], now) == RUMOR_GOSSIP_DONE);
        CHECK_MSG(rumor_gossip_round(s.g[0]) == want[k], "claim %d: round %llu, want %llu", k,
                  (unsigned long long)rumor_gossip_round(s.g[0]), (unsigned long long)want[k]);
        while (rumor_gossip_next_send(s.g[0], &m)) rumor_gossip_release(s.g[0], &m, true);
        now += 600;
    }
    swarm_fini(&s);
}

/* The deadline learns from models that come rounds late, and doubles while rounds hear no
 * one: a peer whose deadline cut its slower neighbours' models would otherwise run on ahead of
 * them alone (their models then come rounds late, and a late model of any of the last
 * LATE_ROUNDS rounds is one it learns from), and no one's word may move their rounds to it.
 * Peer 0 of two, a round every 100 ms of its own work, peer 1's model 10 ms into each round:
 * its deadline is twice its own work, 180 ms, and the minimum wait, 100 ms. Rounds that hear no
 * one: 360, then 720 ms (and the 100); a model of round 7 that comes in round 9, 400 ms after
 * round 7 began, teaches it to wait 1.5 times that (600 ms and the 100) once peer 1 is heard
 * again, where the doubling stops. */
static void test_deadline_learns(void)
{
    swarm_t s;
    swarm_init(&s, 2, "complete", "dpsgd", 8, 8, 1, 10000);
    uint64_t t = 0, began[16];
    rumor_gossip_send_t m;
    const rumor_gossip_chunk_t h0 = {.layout = 0x1234, .w = 0.5, .chunk = 0, .chunks = 1, .off = 0, .n = 8};
    for (int r = 0; r < 14; r++) {
        CHECK(rumor_gossip_step(s.g[0], s.x[0], t) == RUMOR_GOSSIP_WAIT);
        began[r] = t;
        while (rumor_gossip_next_send(s.g[0], &m)) rumor_gossip_release(s.g[0], &m, true);
        const uint64_t wait = rumor_gossip_deadline(s.g[0]) - t;
        if (r == 6) CHECK_MSG(wait == 280, "in step: %llu", (unsigned long long)wait);
        if (r == 7) CHECK_MSG(wait == 460, "one round heard no one: %llu", (unsigned long long)wait);
        if (r == 8) CHECK_MSG(wait == 820, "two: %llu", (unsigned long long)wait);
        if (r == 12 || r == 13) CHECK_MSG(wait == 700, "round %d, heard again after a model two rounds late, 400 ms: "
                                          "%llu", r, (unsigned long long)wait);
        rumor_gossip_chunk_t h = h0;
        h.round = (uint64_t)r;
        if (r == 9) { /* round 7's model, late */
            h.round = 7;
            CHECK(!rumor_gossip_on_chunk(s.g[0], s.key[1], &h, s.x[1], 32, began[7] + 400));
        }
        const bool heard = r < 6 || r > 10;
        if (heard) CHECK(rumor_gossip_on_chunk(s.g[0], s.key[1], &h, s.x[1], 32, t + 10));
        t = heard ? t + 10 : rumor_gossip_deadline(s.g[0]);
        CHECK(rumor_gossip_step(s.g[0], s.x[0], t) == RUMOR_GOSSIP_DONE);
        t += 90;
    }
    swarm_fini(&s);
}

/* Adopting the swarm's model between gossip points (a round in flight): the round in flight
 * finishes first, then the engine goes on from the adopted round, from the adopted model. */
static void test_adopt_in_flight(void)
{
    swarm_t s;
    swarm_init(&s, 2, "complete", "dpsgd+overlap", 8, 8, 1, 100);
    CHECK(rumor_gossip_step(s.g[0], s.x[0], 0) == RUMOR_GOSSIP_DONE); /* round 0 in flight */
    rumor_gossip_send_t m;
    while (rumor_gossip_next_send(s.g[0], &m)) rumor_gossip_release(s.g[0], &m, true);
    float model[8];
    for (int j = 0; j < 8; j++) model[j] = 7.0f + (float)j;
    rumor_gossip_adopt(s.g[0], model, 50);
    CHECK(rumor_gossip_round(s.g[0]) == 0);
    memcpy(s.x[0], model, sizeof model); /* the caller's parameters */
    CHECK(rumor_gossip_step(s.g[0], s.x[0], 200) == RUMOR_GOSSIP_DONE); /* 0 ends alone, 50 begins */
    CHECK(rumor_gossip_round(s.g[0]) == 50);
    for (int j = 0; j < 8; j++) CHECK_NEAR(s.x[0][j], model[j], 1e-6); /* alone: nothing moved it */
    swarm_fini(&s);
}

/* More senders in one round than the cap are dropped, not stored. */
static void test_sender_cap(void)
{
    swarm_t s;
    swarm_init(&s, 2, "complete", "sgp", 8, 8, 1, 500);
    float v[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    rumor_gossip_chunk_t h = {.round = 0, .layout = 0x1234, .w = 0.5, .chunk = 0, .chunks = 1, .off = 0, .n = 8};
    int ok = 0;
    for (int k = 0; k < RUMOR_GOSSIP_MAX_SENDERS + 10; k++) {
        uint8_t key[RUMOR_KEY_LEN] = {0};
        key[1] = (uint8_t)k, key[2] = (uint8_t)(k >> 8), key[3] = 1;
        ok += rumor_gossip_on_chunk(s.g[0], key, &h, v, sizeof v, 0);
    }
    rumor_gossip_stats_t st;
    rumor_gossip_stats(s.g[0], &st);
    CHECK(ok == RUMOR_GOSSIP_MAX_SENDERS && st.drops[RUMOR_GOSSIP_DROP_SENDERS] == 10);
    swarm_fini(&s);
}

/* A peer one round ahead drops its neighbour's model of the round before (stale) and waits
 * for the fresh one, which comes once the neighbour catches up: the two fall back into step. */
static void test_one_round_ahead(void)
{
    rumor_gossip_stats_t st;
    swarm_t s;
    swarm_init(&s, 2, "complete", "dpsgd+overlap", 8, 8, 1, 100);
    for (int j = 0; j < 8; j++) s.x[0][j] = 1.0f, s.x[1][j] = 4.0f;
    CHECK(rumor_gossip_step(s.g[0], s.x[0], 0) == RUMOR_GOSSIP_DONE);   /* round 0 starts */
    CHECK(rumor_gossip_step(s.g[0], s.x[0], 100) == RUMOR_GOSSIP_DONE); /* 0 ends alone, 1 starts */
    rumor_gossip_send_t m;
    while (rumor_gossip_next_send(s.g[0], &m)) {
        if (m.round == 1) { /* peer 1, still in round 0, keeps it for its next round */
            rumor_gossip_chunk_t h = {.round = 1, .layout = 0x1234, .w = m.share, .chunk = 0, .chunks = 1, .off = 0, .n = 8};
            CHECK(rumor_gossip_on_chunk(s.g[1], s.key[0], &h, m.params, 32, 100));
        }
        rumor_gossip_release(s.g[0], &m, true);
    }
    CHECK(rumor_gossip_step(s.g[1], s.x[1], 100) == RUMOR_GOSSIP_DONE); /* peer 1 sends round 0 */
    CHECK(rumor_gossip_next_send(s.g[1], &m) && m.round == 0);
    rumor_gossip_chunk_t h = {.round = 0, .layout = 0x1234, .w = m.share, .chunk = 0, .chunks = 1, .off = 0, .n = 8};
    CHECK(!rumor_gossip_on_chunk(s.g[0], s.key[1], &h, m.params, 32, 101)); /* stale */
    rumor_gossip_release(s.g[1], &m, true);
    CHECK(rumor_gossip_step(s.g[0], s.x[0], 102) == RUMOR_GOSSIP_WAIT);     /* waits for the fresh one */
    /* Peer 0's round-0 model never came (lost), and its round 1 has: a sender's messages come
     * in order, so peer 1 ends round 0 without it at once, not at its deadline (200). */
    CHECK(rumor_gossip_deadline(s.g[1]) > 130);
    CHECK(rumor_gossip_step(s.g[1], s.x[1], 130) == RUMOR_GOSSIP_DONE);     /* alone; starts 1 */
    rumor_gossip_stats(s.g[1], &st);
    CHECK(st.last_missing == 1 && st.last_peers == 0);
    CHECK(rumor_gossip_next_send(s.g[1], &m) && m.round == 1);
    h.round = 1;
    CHECK(rumor_gossip_on_chunk(s.g[0], s.key[1], &h, m.params, 32, 201));
    rumor_gossip_release(s.g[1], &m, true);
    CHECK(rumor_gossip_step(s.g[0], s.x[0], 202) == RUMOR_GOSSIP_DONE);     /* in step again */
    rumor_gossip_stats(s.g[0], &st);
    CHECK(st.drops[RUMOR_GOSSIP_DROP_STALE] == 1 && st.last_missing == 0 && st.last_peers == 1);
    CHECK(rumor_gossip_step(s.g[1], s.x[1], 203) == RUMOR_GOSSIP_DONE);     /* peer 1 has peer 0's round 1 */
    rumor_gossip_stats(s.g[1], &st);
    CHECK(st.last_missing == 0 && st.last_peers == 1);
    swarm_fini(&s);
}

/* A non-finite value anywhere in a chunk (vector body or tail) is found. */
static void test_nonfinite_positions(void)
{
    swarm_t s;
    swarm_init(&s, 2, "complete", "sgp", 100, 100, 1, 500);
    float v[100];
    int caught = 0;
    for (int pos = 0; pos < 100; pos++) {
        for (int j = 0; j < 100; j++) v[j] = (float)j * 1e30f; /* large but finite */
        v[pos] = pos % 3 == 0 ? NAN : pos % 3 == 1 ? INFINITY : -INFINITY;
        uint8_t key[RUMOR_KEY_LEN] = {0};
        key[1] = (uint8_t)pos, key[2] = 9;
        rumor_gossip_chunk_t h = {.round = 0, .layout = 0x1234, .w = 0.5, .chunk = 0, .chunks = 1, .off = 0, .n = 100};
        caught += !rumor_gossip_on_chunk(s.g[0], key, &h, v, sizeof v, 0);
    }
    CHECK(caught == 100);
    for (int j = 0; j < 100; j++) v[j] = -(float)j * 3e36f; /* up to -3e38: finite, but implausible */
    uint8_t key[RUMOR_KEY_LEN] = {7};
    rumor_gossip_chunk_t h = {.round = 0, .layout = 0x1234, .w = 0.5, .chunk = 0, .chunks = 1, .off = 0, .n = 100};
    CHECK(!rumor_gossip_on_chunk(s.g[0], key, &h, v, sizeof v, 0));
    rumor_gossip_stats_t st;
    rumor_gossip_stats(s.g[0], &st);
    CHECK(st.drops[RUMOR_GOSSIP_DROP_NONFINITE] == 100 && st.drops[RUMOR_GOSSIP_DROP_IMPLAUSIBLE] == 1);
    swarm_fini(&s);
}


/* ---- surviving a hostile neighbour without robust mixing ---- */


/* Peer 2 of 3 (complete graph) is hostile: every round it sends each honest peer, in place of
 * its model, chunks of FLT_MAX, of +-1e30, one spike of 1e19 in an honest model, or 40 times
 * an honest model (finite all, NaN-free). The honest peers drop every one of them
 * (`implausible`), treat peer 2 as missing, and mix with each other: after 24 rounds their
 * parameters are finite, their loss is, and they sit at their own average. */
static void test_hostile_huge(const char *algo)
{
    const size_t P = 40, chunk = 16; /* chunks of 16, 16, 8 */
    swarm_t s;
    swarm_init(&s, 3, "complete", algo, P, chunk, 11, 200);
    s.dead[2] = true; /* its engine stays out; what it sends is made here */
    double honest0 = 0.0; /* the honest average of coordinate 0 */
    for (int i = 0; i < 2; i++) honest0 += s.x[i][0] / 2.0;
    float *bad = malloc(P * sizeof *bad);
    uint64_t now = 1000, sent_bad = 0;
    for (int r = 0; r < 24; r++) {
        for (int i = 0; i < 2; i++) {
            /* The hostile chunks of the round this peer has in flight (or is about to start). */
            for (uint32_t c = 0; c < 3; c++) {
                const size_t off = c * chunk, n = c < 2 ? chunk : P - 2 * chunk;
                for (size_t j = 0; j < n; j++) {
                    switch (r % 4) {
                    case 0: bad[j] = FLT_MAX; break;
                    case 1: bad[j] = j % 2 ? 1e30f : -1e30f; break;
                    case 2: bad[j] = s.x[1 - i][off + j] + (j == 3 ? 1e19f : 0.0f); break;
                    default: bad[j] = 40.0f * s.x[1 - i][off + j]; break;
                    }
                }
                rumor_gossip_chunk_t h = {.round = rumor_gossip_round(s.g[i]), .layout = 0x1234, .w = 1.0 / 3.0,
                                          .chunk = c, .chunks = 3, .off = off, .n = n};
                CHECK_MSG(!rumor_gossip_on_chunk(s.g[i], s.key[2], &h, bad, n * sizeof(float), now),
                          "%s: round %d, chunk %u of kind %d mixed", algo, r, c, r % 4);
                sent_bad++;
            }
        }
        /* Both honest peers reach their gossip point; a wait ends at its deadline. */
        for (int spin = 0; spin < 10; spin++) {
            bool all = true;
            for (int i = 0; i < 2; i++) {
                if (rumor_gossip_round(s.g[i]) > (uint64_t)r) continue;
                if (rumor_gossip_step(s.g[i], s.x[i], now) != RUMOR_GOSSIP_DONE) all = false;
                drain(&s, i, now);
            }
            if (all) break;
            now += 200;
        }
        now += 10;
        for (int i = 0; i < 2; i++) {
            CHECK_MSG(loss_finite(s.x[i], P), "%s: peer %d's loss is not finite after round %d", algo, i, r);
            if (!loss_finite(s.x[i], P)) goto out;
        }
    }
    rumor_gossip_stats_t st;
    uint64_t dropped = 0;
    for (int i = 0; i < 2; i++) {
        rumor_gossip_stats(s.g[i], &st);
        /* (clipping also marks the rest of such a message bad, and strikes the sender: after three
         * it is banned, its chunks dropped as such) */
        dropped += st.drops[RUMOR_GOSSIP_DROP_IMPLAUSIBLE] + st.drops[RUMOR_GOSSIP_DROP_BANNED] +
                   st.drops[RUMOR_GOSSIP_DROP_NONFINITE];
        CHECK_MSG(st.round >= 20, "%s: peer %d finished %llu rounds", algo, i, (unsigned long long)st.round);
        /* The honest peers keep their average (sgp: de-biased, up to the mass a round's
         * missing sender takes with it, none here) and agree on it. */
        CHECK_MSG(fabs(s.x[i][0] - honest0) < 1e-3, "%s: peer %d at %g, the honest average %g", algo, i,
                  (double)s.x[i][0], honest0);
    }
    CHECK_MSG(dropped == sent_bad, "%s: %llu of %llu hostile chunks counted implausible (or banned)", algo,
              (unsigned long long)dropped, (unsigned long long)sent_bad);
out:
    free(bad);
    swarm_fini(&s);
}


/* The bound, by hand: 3 peers, dpsgd, chunks of 4, 4, 2. Peer 0's chunk 2 is all zeros (a
 * range freshly zeroed, like biases). From peer 2, chunk 0 at 15.9 times peer 0's own RMS
 * there is mixed, chunk 1 at 16.1 times is not, and in chunk 2 the floor lets 0.09 in where
 * 0.11 is not: peer 0 ends with chunk 0 and 2 the mean of three, chunk 1 the mean of two (as
 * if peer 2's never came). */
static void test_plausible_bound(void)
{
    swarm_t s;
    swarm_init(&s, 3, "complete", "dpsgd+overlap", 10, 4, 1, 500);
    for (int i = 0; i < 3; i++)
        for (size_t j = 0; j < 10; j++) s.x[i][j] = j < 8 ? (float)(1 + i + j % 2) : 0.0f;
    for (int i = 0; i < 3; i++) CHECK(rumor_gossip_step(s.g[i], s.x[i], 0) == RUMOR_GOSSIP_DONE);
    rumor_gossip_send_t m;
    while (rumor_gossip_next_send(s.g[1], &m)) {
        if (find(&s, m.peer) == 0) deliver(&s, 1, &m, 5);
        else rumor_gossip_release(s.g[1], &m, true);
    }
    while (rumor_gossip_next_send(s.g[2], &m)) rumor_gossip_release(s.g[2], &m, true);
    /* Peer 0's own RMS: sqrt((1 + 4) / 2) in chunks 0 and 1, 0 in chunk 2. */
    const double own = sqrt(2.5), F = RUMOR_GOSSIP_PLAUSIBLE_RMS, fl = RUMOR_GOSSIP_PLAUSIBLE_FLOOR;
    float c0[4], c1[4], c2a[2] = {(float)(0.9 * fl), (float)(-0.9 * fl)}, c2b[2] = {(float)(1.1 * fl), (float)(1.1 * fl)};
    for (int j = 0; j < 4; j++) {
        c0[j] = (float)((F - 0.1) * own) * (j % 2 ? -1.0f : 1.0f);
        c1[j] = (float)((F + 0.1) * own + fl);
    }
    rumor_gossip_chunk_t h = {.round = 0, .layout = 0x1234, .w = 1.0 / 3.0, .chunk = 0, .chunks = 3, .off = 0, .n = 4};
    CHECK(rumor_gossip_on_chunk(s.g[0], s.key[2], &h, c0, sizeof c0, 6));
    h.chunk = 1, h.off = 4;
    CHECK(!rumor_gossip_on_chunk(s.g[0], s.key[2], &h, c1, sizeof c1, 6));
    h.chunk = 2, h.off = 8, h.n = 2;
    CHECK(!rumor_gossip_on_chunk(s.g[0], s.key[2], &h, c2b, sizeof c2b, 6));
    CHECK(rumor_gossip_on_chunk(s.g[0], s.key[2], &h, c2a, sizeof c2a, 6));
    rumor_gossip_stats_t st;
    rumor_gossip_stats(s.g[0], &st);
    CHECK(st.drops[RUMOR_GOSSIP_DROP_IMPLAUSIBLE] == 2 && st.chunks_in == 5);
    CHECK(rumor_gossip_step(s.g[0], s.x[0], 500) == RUMOR_GOSSIP_DONE); /* deadline: peer 2 incomplete */
    for (size_t j = 0; j < 10; j++) {
        const double own_j = j < 8 ? 1 + j % 2 : 0.0, nb_j = j < 8 ? 2 + j % 2 : 0.0;
        double want;
        if (j < 4) want = (own_j + nb_j + c0[j]) / 3.0;
        else if (j < 8) want = (own_j + nb_j) / 2.0;
        else want = (own_j + nb_j + c2a[j - 8]) / 3.0;
        CHECK_NEAR(s.x[0][j], want, 1e-5);
    }
    rumor_gossip_stats(s.g[0], &st);
    CHECK(st.last_missing == 1 && st.last_peers == 2);
    swarm_fini(&s);
}

/* A whole model from a neighbour (a late join's pull) passes the same test, chunk by chunk:
 * a model 4 times ours does, 20 times does not, nor one FLT_MAX or NaN anywhere. */
static void test_plausible_model(void)
{
    swarm_t s;
    swarm_init(&s, 2, "complete", "dpsgd", 40, 16, 3, 500); /* chunks of 16, 16, 8 */
    float v[40];
    for (int j = 0; j < 40; j++) v[j] = 4.0f * s.x[0][j];
    CHECK(rumor_gossip_plausible(s.g[0], s.x[0]) && rumor_gossip_plausible(s.g[0], v));
    for (int j = 32; j < 40; j++) v[j] = 20.0f * s.x[0][j]; /* the last chunk only */
    CHECK(!rumor_gossip_plausible(s.g[0], v));
    for (int j = 0; j < 40; j++) v[j] = s.x[0][j];
    v[20] = FLT_MAX;
    CHECK(!rumor_gossip_plausible(s.g[0], v));
    v[20] = NAN;
    CHECK(!rumor_gossip_plausible(s.g[0], v));
    swarm_fini(&s);
}

/* Answers confirm each other when |a - b| <= 0.5 max(|a|, |b|): the first two that do are
 * kept, in order of arrival; a far answer between them changes nothing; their mean is exact
 * (halves of sums of small binary fractions) at the lower of their rounds; beyond
 * RUMOR_RESYNC_ASKS answers none is kept. */
static void test_confirm(void)
{
    float u[4] = {1, 2, 3, 4}, far[4] = {-8, 0, 9, 1}, w[4] = {1.5f, 2.5f, 2.5f, 3.5f}, out[4], u2[4], u3[4];
    for (int i = 0; i < 4; i++) u2[i] = 2 * u[i], u3[i] = 3 * u[i];
    CHECK(rumor_models_agree(u, u2, 4, RUMOR_MODELS_AGREE));  /* |u - 2u| = 0.5 |2u|: the edge, taken */
    CHECK(!rumor_models_agree(u, u3, 4, RUMOR_MODELS_AGREE)); /* |u - 3u| = 0.67 |3u| */

    rumor_confirm_t c;
    rumor_confirm_init(&c, 4);
    CHECK(!rumor_confirm_add(&c, u, 12) && c.n == 1 && c.a < 0);
    CHECK(!rumor_confirm_add(&c, far, 30) && c.n == 2 && c.a < 0);
    CHECK(rumor_confirm_add(&c, w, 9) && c.a == 0 && c.b == 2);
    CHECK(rumor_confirm_mean(&c, out) == 9);
    for (int i = 0; i < 4; i++) CHECK(out[i] == 0.5f * (u[i] + w[i]));
    CHECK(out[0] == 1.25f && out[3] == 3.75f);

    rumor_confirm_init(&c, 4);
    float f2[4] = {40, -3, 0, 0};
    CHECK(!rumor_confirm_add(&c, u, 1) && !rumor_confirm_add(&c, far, 1) && !rumor_confirm_add(&c, f2, 1));
    CHECK(!rumor_confirm_add(&c, w, 1) && c.n == RUMOR_RESYNC_ASKS && c.a < 0); /* full: u and w never meet */
}

/* Push-sum: the weights of a swarm sum to its member count, so a chunk carrying 2^20 (the
 * wire's limit) from a neighbour of a swarm of 3 is made up: dropped (`weight`), where it
 * would have made that neighbour's model the whole of the mix. Up to 2 x 3 + 16 is taken,
 * and the peer's own weight never passes that either. */
static void test_sgp_weight_bound(void)
{
    swarm_t s;
    swarm_init(&s, 3, "complete", "sgp", 8, 8, 1, 500);
    float v[8];
    for (int j = 0; j < 8; j++) v[j] = 2.0f * s.x[0][j];
    rumor_gossip_chunk_t h = {.round = 0, .layout = 0x1234, .w = 1048576.0, .chunk = 0, .chunks = 1, .off = 0, .n = 8};
    CHECK(!rumor_gossip_on_chunk(s.g[0], s.key[2], &h, v, sizeof v, 0));
    h.w = 2.0 * 3 + RUMOR_GOSSIP_SGP_WEIGHT_SLACK + 0.5;
    CHECK(!rumor_gossip_on_chunk(s.g[0], s.key[2], &h, v, sizeof v, 0));
    rumor_gossip_stats_t st;
    rumor_gossip_stats(s.g[0], &st);
    CHECK(st.drops[RUMOR_GOSSIP_DROP_WEIGHT] == 2 && st.chunks_in == 0);
    float keep[8];
    memcpy(keep, s.x[0], sizeof keep);
    CHECK(rumor_gossip_step(s.g[0], s.x[0], 1) == RUMOR_GOSSIP_DONE);
    CHECK(memcmp(keep, s.x[0], sizeof keep) == 0); /* nothing came: its own model, weight 1 */
    h.w = 2.0 * 3 + RUMOR_GOSSIP_SGP_WEIGHT_SLACK - 0.5;
    CHECK(rumor_gossip_on_chunk(s.g[0], s.key[2], &h, v, sizeof v, 2));
    /* A weight just under the bound every round: taken, but the peer's own weight is capped at
     * the bound too, so it cannot grow round after round until honest messages pass it. */
    double most = 0.0;
    for (int r = 0; r < 30; r++) {
        CHECK(rumor_gossip_step(s.g[0], s.x[0], 3 + (uint64_t)r) == RUMOR_GOSSIP_DONE);
        rumor_gossip_send_t m;
        while (rumor_gossip_next_send(s.g[0], &m)) rumor_gossip_release(s.g[0], &m, true);
        most = fmax(most, rumor_gossip_weights(s.g[0])[0]);
        h.round = (uint64_t)r + 1;
        CHECK(rumor_gossip_on_chunk(s.g[0], s.key[2], &h, v, sizeof v, 3 + (uint64_t)r));
    }
    CHECK_MSG(most <= 2.0 * 3 + RUMOR_GOSSIP_SGP_WEIGHT_SLACK, "own weight reached %g", most);
    swarm_fini(&s);
}

/* Push-sum keeps a record per (sender, round). One sender making up 256 rounds holds at most
 * RUMOR_GOSSIP_SENDER_ROUNDS records of the slot: an honest sender's chunk is still taken,
 * and so are 250 more senders; rounds beyond the window ahead are dropped. */
static void test_sgp_sender_records(void)
{
    swarm_t s;
    swarm_init(&s, 2, "complete", "sgp", 8, 8, 1, 500);
    float v[8];
    for (int j = 0; j < 8; j++) v[j] = s.x[1][j];
    rumor_gossip_chunk_t h = {.round = 0, .layout = 0x1234, .w = 0.01, .chunk = 0, .chunks = 1, .off = 0, .n = 8};
    uint8_t hostile[RUMOR_KEY_LEN];
    key_of(hostile, 9);
    for (int r = 0; r < RUMOR_GOSSIP_MAX_SENDERS; r++) {
        h.round = (uint64_t)r;
        (void)rumor_gossip_on_chunk(s.g[0], hostile, &h, v, sizeof v, 0);
    }
    h.round = RUMOR_GOSSIP_SGP_AHEAD + 1;
    CHECK(!rumor_gossip_on_chunk(s.g[0], hostile, &h, v, sizeof v, 0));
    h.round = 3, h.w = 0.5;
    CHECK(rumor_gossip_on_chunk(s.g[0], s.key[1], &h, v, sizeof v, 0)); /* the honest one */
    int ok = 0;
    for (int k = 0; k < 250; k++) {
        uint8_t key[RUMOR_KEY_LEN] = {0};
        key[1] = (uint8_t)k, key[2] = 7;
        ok += rumor_gossip_on_chunk(s.g[0], key, &h, v, sizeof v, 0);
    }
    CHECK(ok == 250);
    rumor_gossip_stats_t st;
    rumor_gossip_stats(s.g[0], &st);
    CHECK(st.drops[RUMOR_GOSSIP_DROP_SENDERS] == 0 && st.drops[RUMOR_GOSSIP_DROP_AHEAD] == 1);
    swarm_fini(&s);
}


/* DiLoCo's outer Nesterov step on two peers, by hand: each mixes the inner results and steps
 * its own theta towards the mix. */
static void test_diloco(void)
{
    swarm_t s;
    swarm_init(&s, 2, "complete", "diloco:5", 6, 4, 1, 500); /* 2 chunks: 4, 2 */
    double theta[2][6], x[2][6], mom[2][6] = {{0}};
    for (int i = 0; i < 2; i++) {
        float *t = rumor_gossip_outer(s.g[i]);
        for (int j = 0; j < 6; j++) theta[i][j] = t[j];
    }
    const double lr = 0.7, mu = 0.9;
    double spread0 = 0;
    for (int j = 0; j < 6; j++) spread0 = fmax(spread0, fabs(theta[0][j] - theta[1][j]));
    for (int r = 0; r < 3; r++) {
        /* "inner steps": move each peer's x somewhere */
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 6; j++) s.x[i][j] = (float)(theta[i][j] - 0.1 * (i + 1) * (j + 1) * (r + 1)), x[i][j] = s.x[i][j];
        /* both start their round, then both finish */
        CHECK(rumor_gossip_step(s.g[0], s.x[0], 0) == RUMOR_GOSSIP_WAIT);
        drain(&s, 0, 0);
        CHECK(rumor_gossip_step(s.g[1], s.x[1], 0) == RUMOR_GOSSIP_DONE);
        drain(&s, 1, 0);
        CHECK(rumor_gossip_step(s.g[0], s.x[0], 1) == RUMOR_GOSSIP_DONE);
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 6; j++) {
                const double d = theta[i][j] - (x[0][j] + x[1][j]) / 2;
                mom[i][j] = mu * mom[i][j] + d;
                theta[i][j] -= lr * (d + mu * mom[i][j]);
                CHECK_NEAR(s.x[i][j], theta[i][j], 1e-5);
                CHECK_NEAR(rumor_gossip_outer(s.g[i])[j], theta[i][j], 1e-5);
                CHECK_NEAR(rumor_gossip_momentum(s.g[i])[j], mom[i][j], 1e-5);
            }
    }
    /* The outer parameters draw together: the same mix pulls both. */
    double spread = 0;
    for (int j = 0; j < 6; j++) spread = fmax(spread, fabs(theta[0][j] - theta[1][j]));
    CHECK_MSG(spread < 0.5 * spread0, "%g -> %g", spread0, spread);
    swarm_fini(&s);
}

/* diloco with --codec int4: compressed gossip of the inner results (CHOCO's public copies,
 * int4 deltas, consensus step 1). Two peers, complete graph, inner "steps" that pull peer i
 * halfway to c_i. Round 1's deltas are integers of block maximum 7 (scale 1: exact), so its
 * outer step is the float32 one exactly; then both peers reach theta = mean(c), where the
 * pseudo-gradients vanish, as the float32 run does, the copies following the inner results
 * down to rounding. Bytes: 2 of scale a block of 64, half a byte a parameter. */
static void test_diloco_int4(void)
{
    enum { P = 6 };
    char err[RUMOR_ERR_LEN];
    swarm_t s;
    swarm_init(&s, 2, "complete", "diloco:5", P, 4, 1, 500); /* 2 chunks: 4, 2 */
    s.lose_from = -1;
    float theta0[P];
    for (int j = 0; j < P; j++) theta0[j] = (float)(0.25 * j - 0.5);
    for (int i = 0; i < 2; i++) {
        rumor_gossip_destroy(&s.g[i]);
        rumor_gossip_config_t cfg = {.params = P, .layout = 0x1234, .chunk_params = 4, .round_timeout_ms = 500,
                                     .choco = {.id = RUMOR_CODEC_INT4}, .lineage = (uint64_t)i + 1};
        CHECK_RC(rumor_algo_parse(&cfg.algo, "diloco:5", err));
        memcpy(cfg.self, s.key[i], RUMOR_KEY_LEN);
        CHECK((s.g[i] = rumor_gossip_new(&cfg, s.topo, theta0, err)) != NULL);
        rumor_gossip_set_view(s.g[i], (const uint8_t(*)[RUMOR_KEY_LEN])s.key, 2);
    }
    const double c[2][P] = {{3, -1, 2, 0.5, -2, 1}, {1, 1, -4, 0.5, 0, 3}};
    const double lr = 0.7, mu = 0.9;
    /* Round 1: x_i = theta0 - delta_i, integer deltas whose largest per chunk is 7. */
    const float delta[2][P] = {{7, -3, 1, 0, 2, -7}, {-7, 5, 0, 6, 7, 1}};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < P; j++) s.x[i][j] = theta0[j] - delta[i][j];
    CHECK(pass(&s, 0));
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < P; j++) {
            const double d = (double)theta0[j] -
                             ((double)(theta0[j] - delta[0][j]) + (double)(theta0[j] - delta[1][j])) / 2;
            const double want = theta0[j] - lr * (d + mu * d);
            CHECK_NEAR(rumor_gossip_outer(s.g[i])[j], want, 1e-6);
            CHECK_NEAR(s.x[i][j], want, 1e-6);
        }
    CHECK(s.choco_bytes == 2 * (4 + 3) && s.choco_dense == 2 * 4 * P);
    /* Then to the fixed point. */
    for (int r = 1; r < 150; r++) {
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < P; j++) s.x[i][j] -= (float)(0.5 * (s.x[i][j] - c[i][j]));
        CHECK(pass(&s, 1000 * (uint64_t)r));
    }
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < P; j++) CHECK_NEAR(rumor_gossip_outer(s.g[i])[j], (c[0][j] + c[1][j]) / 2, 1e-4);
    rumor_gossip_stats_t st;
    rumor_gossip_stats(s.g[0], &st);
    CHECK(st.keyframes == 0 && st.copies_mixed == 1);
    swarm_fini(&s);
}

/* Overlapped diloco, by hand (2 peers, complete graph, diloco:5, 2 overlapped steps): a send
 * point sends x_r and leaves x alone; the next point is where the round lands (merging), and
 * there theta takes the plain outer step on the mix of the x_r while the phase moves onto it
 * with part of its progress since, x <- theta' + KEEP (x - x_r); the closing round is plain
 * and ends on theta. */
static void test_diloco_overlap(void)
{
    enum { P = 6 };
    char err[RUMOR_ERR_LEN];
    swarm_t s;
    swarm_init(&s, 2, "complete", "diloco:5", P, 4, 1, 500);
    float theta0[P];
    for (int j = 0; j < P; j++) theta0[j] = (float)(0.3 * j - 1.0);
    for (int i = 0; i < 2; i++) {
        rumor_gossip_destroy(&s.g[i]);
        rumor_gossip_config_t cfg = {.params = P, .layout = 0x1234, .chunk_params = 4, .round_timeout_ms = 500};
        CHECK_RC(rumor_algo_parse(&cfg.algo, "diloco:5", err));
        cfg.algo.overlap = true;
        cfg.algo.overlap_steps = 5; /* all of H: refused */
        memcpy(cfg.self, s.key[i], RUMOR_KEY_LEN);
        CHECK(rumor_gossip_new(&cfg, s.topo, theta0, err) == NULL && strstr(err, "1 to 4") != NULL);
        cfg.algo.overlap_steps = 2;
        CHECK((s.g[i] = rumor_gossip_new(&cfg, s.topo, theta0, err)) != NULL);
        rumor_gossip_set_view(s.g[i], (const uint8_t(*)[RUMOR_KEY_LEN])s.key, 2);
    }
    const double lr = 0.7, mu = 0.9;
    double th[2][P], m[2][P] = {{0}}, sent[2][P];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < P; j++) th[i][j] = theta0[j];
    for (int r = 0; r < 4; r++) {
        /* the rest of the phase (all of it in round 0), then the send point */
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < P; j++) s.x[i][j] -= (float)(0.05 * (i + 1) * (j - 2) * (r + 1));
        if (r == 3)
            for (int i = 0; i < 2; i++) rumor_gossip_close(s.g[i]);
        CHECK(!rumor_gossip_merging(s.g[0]));
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < P; j++) sent[i][j] = s.x[i][j];
        CHECK(pass(&s, 1000 * (uint64_t)r));
        if (r == 3) break;
        for (int i = 0; i < 2; i++) {
            CHECK(rumor_gossip_merging(s.g[i]));
            for (int j = 0; j < P; j++) CHECK(s.x[i][j] == (float)sent[i][j]); /* the phase goes on from x_r */
        }
        /* two steps of the next phase, then the round lands */
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < P; j++) s.x[i][j] += (float)(0.01 * (j + 1) * (i + 2));
        float before[2][P];
        memcpy(before[0], s.x[0], sizeof before[0]);
        memcpy(before[1], s.x[1], sizeof before[1]);
        CHECK(pass(&s, 1000 * (uint64_t)r + 500));
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < P; j++) {
                const double d = th[i][j] - (sent[0][j] + sent[1][j]) / 2;
                m[i][j] = mu * m[i][j] + d;
                th[i][j] -= lr * (d + mu * m[i][j]);
                CHECK_NEAR(rumor_gossip_outer(s.g[i])[j], th[i][j], 1e-5);
                CHECK_NEAR(s.x[i][j], th[i][j] + RUMOR_GOSSIP_OVERLAP_KEEP * (before[i][j] - sent[i][j]), 1e-5);
            }
        CHECK(!rumor_gossip_merging(s.g[0]));
    }
    /* The closing round: sent, waited for and mixed at once; x is theta. */
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < P; j++) {
            const double d = th[i][j] - (sent[0][j] + sent[1][j]) / 2;
            m[i][j] = mu * m[i][j] + d;
            th[i][j] -= lr * (d + mu * m[i][j]);
            CHECK_NEAR(s.x[i][j], th[i][j], 1e-5);
        }
    swarm_fini(&s);
}

/* Overlapped diloco over int4's compressed gossip ends where the float32 one does, within
 * int4's rounding: same inner steps, closing round included (whose mix must take the closing
 * inner results, not the ones the previous round sent: that put them 0.72 apart, 0.03 now). */
static void dol_script(swarm_t *s, rumor_proto_codec_t codec, float out[2][6])
{
    enum { P = 6 };
    char err[RUMOR_ERR_LEN];
    swarm_init(s, 2, "complete", "diloco:5", P, 4, 1, 500);
    s->lose_from = -1;
    float theta0[P];
    for (int j = 0; j < P; j++) theta0[j] = (float)(0.3 * j - 1.0);
    for (int i = 0; i < 2; i++) {
        rumor_gossip_destroy(&s->g[i]);
        rumor_gossip_config_t cfg = {.params = P, .layout = 0x1234, .chunk_params = 4, .round_timeout_ms = 500,
                                     .choco = {.id = codec}, .lineage = (uint64_t)i + 1};
        CHECK_RC(rumor_algo_parse(&cfg.algo, "diloco:5", err));
        cfg.algo.overlap = true, cfg.algo.overlap_steps = 2;
        memcpy(cfg.self, s->key[i], RUMOR_KEY_LEN);
        CHECK((s->g[i] = rumor_gossip_new(&cfg, s->topo, theta0, err)) != NULL);
        rumor_gossip_set_view(s->g[i], (const uint8_t(*)[RUMOR_KEY_LEN])s->key, 2);
        memcpy(s->x[i], theta0, sizeof theta0);
    }
    for (int r = 0; r < 6; r++) {
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < P; j++) s->x[i][j] -= (float)(0.05 * (i + 1) * (j - 2) + 0.01 * r);
        if (r == 5)
            for (int i = 0; i < 2; i++) rumor_gossip_close(s->g[i]);
        CHECK(pass(s, 1000 * (uint64_t)r));
        if (r == 5) break;
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < P; j++) s->x[i][j] += (float)(0.02 * (j + 1) * (i + 2));
        CHECK(pass(s, 1000 * (uint64_t)r + 500));
    }
    for (int i = 0; i < 2; i++) memcpy(out[i], s->x[i], sizeof out[i]);
    swarm_fini(s);
}

static void test_diloco_overlap_int4(void)
{
    swarm_t s;
    float a[2][6], b[2][6];
    dol_script(&s, RUMOR_CODEC_F32, a);
    dol_script(&s, RUMOR_CODEC_INT4, b);
    double diff = 0, mag = 0;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 6; j++) diff = fmax(diff, fabs((double)a[i][j] - b[i][j])), mag = fmax(mag, fabs((double)a[i][j]));
    CHECK_MSG(diff < 0.06 && mag > 0.5, "overlapped diloco, int4 against float32: %g apart (of %g)", diff, mag);
}

static void test_restore(void)
{
    swarm_t s;
    swarm_init(&s, 2, "complete", "sgp", 10, 4, 1, 500);
    char err[RUMOR_ERR_LEN];
    double w[3] = {0.5, 0.7, 1.9};
    CHECK(rumor_gossip_restore(s.g[0], 9, w, 2, err) == RUMOR_ELAYOUT);
    double bad[3] = {0.5, -1, 1};
    CHECK(rumor_gossip_restore(s.g[0], 9, bad, 3, err) == RUMOR_EINVAL);
    CHECK_RC(rumor_gossip_restore(s.g[0], 9, w, 3, err));
    CHECK(rumor_gossip_round(s.g[0]) == 9);
    CHECK(rumor_gossip_weights(s.g[0])[2] == 1.9);
    CHECK(rumor_gossip_step(s.g[0], s.x[0], 0) == RUMOR_GOSSIP_DONE);
    rumor_gossip_send_t m;
    CHECK(rumor_gossip_next_send(s.g[0], &m));
    CHECK(m.round == 9 && m.w[1] == 0.7 && m.share == 0.5);
    rumor_gossip_release(s.g[0], &m, true);
    CHECK(rumor_gossip_restore(s.g[0], 3, w, 3, err) == RUMOR_EINVAL); /* too late */
    swarm_fini(&s);
}

/* Robust mixing, by hand: complete graph on 5 (every weight 1/5), 4 parameters in 2 chunks.
 * Peer 0 sits at 0; its neighbours send the same models every round: (1,0 | 0,0),
 * (0,2 | 0,0), (0,0 | 3,0) and the outlier (0,0 | 0,1000). */
/* Round 0 begins with snapshot x; its sends are done. */
static void robust_begin(rumor_gossip_t *g, float *x)
{
    CHECK(rumor_gossip_step(g, x, 0) == RUMOR_GOSSIP_DONE);
    rumor_gossip_send_t m;
    while (rumor_gossip_next_send(g, &m)) rumor_gossip_release(g, &m, true);
}

/* The robust tests' neighbour: chunk c (of two, two floats each) of model v, for round r. */
static bool robust_feed(rumor_gossip_t *g, const uint8_t key[RUMOR_KEY_LEN], uint64_t r, uint32_t c, const float *v,
                        uint64_t now)
{
    const rumor_gossip_chunk_t h = {.round = r, .layout = 7, .w = 0.2, .chunk = c, .chunks = 2, .off = 2 * c, .n = 2};
    return rumor_gossip_on_chunk(g, key, &h, v + 2 * c, 8, now);
}

static void test_robust_clip(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_robust_t rb;
    CHECK_RC(rumor_robust_parse(&rb, "clip", err));
    CHECK(rb.clip && rb.clip_fraction == 0.25);
    CHECK_RC(rumor_robust_parse(&rb, "clip:0.1", err));
    CHECK(rb.clip_fraction == 0.1);
    CHECK(rumor_robust_parse(&rb, "clip:1", err) == RUMOR_EINVAL);
    CHECK(rumor_robust_parse(&rb, "trim", err) == RUMOR_EINVAL);
    CHECK_RC(rumor_robust_parse(&rb, "clip", err));
    rumor_topology_t *topo = rumor_topology_new("complete", 1, err);
    uint8_t keys[5][RUMOR_KEY_LEN];
    for (int i = 0; i < 5; i++) key_of(keys[i], i);
    /* (at 50, not 0: a chunk more than 16 times this peer's own scale is implausible and
     * dropped before clipping; the offsets below are within it, peer 4's 1000 barely) */
    float x[4] = {50, 50, 50, 50};
    rumor_gossip_config_t cfg = {.params = 4, .layout = 7, .chunk_params = 2, .round_timeout_ms = 1000};
    CHECK_RC(rumor_algo_parse(&cfg.algo, "sgp", err));
    cfg.robust = rb;
    memcpy(cfg.self, keys[0], RUMOR_KEY_LEN);
    (void)rumor_fail(NULL, RUMOR_EIO, "an earlier failure"); /* so that the code below is the constructor's */
    CHECK(rumor_gossip_new(&cfg, topo, x, err) == NULL); /* push-sum weights are not clipped */
    /* ... a setting, not memory: the code says so (a CLI exits 2 on it, not 1). */
    CHECK_MSG(rumor_last_error() == RUMOR_EINVAL, "%s", rumor_strerror(rumor_last_error()));
    CHECK_RC(rumor_algo_parse(&cfg.algo, "dpsgd", err));
    cfg.algo.overlap = true; /* stepped by hand in the overlapped schedule */
    CHECK_RC(rumor_robust_parse(&cfg.robust, "clip", err));
    rumor_gossip_t *g = rumor_gossip_new(&cfg, topo, x, err);
    CHECK(g != NULL);
    if (!g) return;
    rumor_gossip_set_view(g, (const uint8_t(*)[RUMOR_KEY_LEN])keys, 5);
    /* Each round the neighbours send the peer's own snapshot plus these offsets. */
    const float d[4][4] = {{1, 0, 0, 0}, {0, 2, 0, 0}, {0, 0, 3, 0}, {0, 0, 0, 1000}};
    rumor_gossip_stats_t st;
    const double step_want[5][4] = {
        {0, 0, 0, 0},         /* round 0: no radius yet, nothing mixed in */
        {0.2, 0.2, 0.6, 0.6}, /* radii 1 and 3: (0,2) -> (0,1), (0,1000) -> (0,3); a strike */
        {0.2, 0.2, 0.6, 0.6}, /* the same, a second strike */
        {0.2, 0.2, 0.6, 0.6}, /* the third: peer 4 is banned from round 4 */
        {0.25, 0.25, 0.75, 0.0}, /* without it, the others' weights renormalised */
    };
    robust_begin(g, x); /* round 0 starts, snapshot x */
    rumor_gossip_send_t m;
    for (uint64_t r = 0; r < 5; r++) {
        float before[4], v[4];
        memcpy(before, x, sizeof x);
        for (int j = 1; j < 5; j++) {
            for (int k = 0; k < 4; k++) v[k] = before[k] + d[j - 1][k];
            for (uint32_t c = 0; c < 2; c++)
                CHECK(robust_feed(g, keys[j], r, c, v, 100 * r + 1) == !(r == 4 && j == 4));
        }
        CHECK(rumor_gossip_step(g, x, 100 * r + 2) == RUMOR_GOSSIP_DONE); /* round r mixed, r + 1 starts */
        while (rumor_gossip_next_send(g, &m)) rumor_gossip_release(g, &m, true);
        for (int k = 0; k < 4; k++) CHECK_NEAR(x[k] - before[k], step_want[r][k], 2e-5);
        rumor_gossip_stats(g, &st);
        if (r == 0) CHECK_NEAR(st.clip_radius, sqrt(1.0 + 9.0), 1e-6);
    }
    rumor_gossip_stats(g, &st);
    /* 4 + 2 + 2 + 2 + 1, and the neighbour at the radius itself may count once more, when
     * float rounding puts it a hair beyond (as it does in round 4, from x = 0.6). */
    CHECK_MSG(st.chunks_clipped >= 11 && st.chunks_clipped <= 12 && st.strikes == 3 && st.bans == 1,
              "clipped %llu strikes %llu",
              (unsigned long long)st.chunks_clipped, (unsigned long long)st.strikes);
    CHECK(st.drops[RUMOR_GOSSIP_DROP_BANNED] == 2);
    rumor_gossip_destroy(&g);
    rumor_topology_destroy(&topo);
}

/* The default's bound (guard), by hand: complete graph on 5 (weights 1/5), 4 parameters in 2
 * chunks, peer 0 at 50 everywhere. The honest neighbours send offsets of 1, 2 and 3 in chunk 0
 * and nothing in chunk 1; peer 4 sends -300 in chunk 0 and 5 in chunk 1, every round. Round 0
 * clips at the start radius, 3 norms of our own chunk (honest models drawn apart are taken
 * whole); from round 1 each
 * chunk's radius is twice the neighbours' weighted median distance (4 in chunk 0, 0 in chunk
 * 1). In round 3 peer 4 sends its round 4 early, measured against our round-3 snapshot: it
 * gets the room our snapshot moved (0.4 in chunk 0). Also "auto" made concrete. */
static void test_robust_guard(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_robust_t rb;
    CHECK_RC(rumor_robust_parse(&rb, "guard", err));
    CHECK(rb.clip && rb.clip_fraction == 0.5 && rb.guard == RUMOR_GOSSIP_GUARD && rb.guard == 2.0 && !rb.automatic);
    CHECK_RC(rumor_robust_parse(&rb, "guard:4.5", err));
    CHECK(rb.clip && rb.guard == 4.5);
    CHECK(rumor_robust_parse(&rb, "guard:1", err) == RUMOR_EINVAL);
    CHECK(rumor_robust_parse(&rb, "guard:", err) == RUMOR_EINVAL);
    CHECK(rumor_robust_parse(&rb, "guardx", err) == RUMOR_EINVAL);
    rumor_algo_t dpsgd, sgp;
    rumor_codec_t f32, int4;
    CHECK_RC(rumor_algo_parse(&dpsgd, "dpsgd", err));
    CHECK_RC(rumor_algo_parse(&sgp, "sgp", err));
    CHECK_RC(rumor_codec_parse(&f32, "f32", err));
    CHECK_RC(rumor_codec_parse(&int4, "int4", err));
    const struct {
        const rumor_algo_t *algo;
        bool secure;
        const rumor_codec_t *codec;
        bool state, guard;
    } cases[] = {{&dpsgd, false, &f32, false, true}, {&sgp, false, &f32, false, false},
                 {&dpsgd, true, &f32, false, false}, {&dpsgd, false, &int4, false, true},
                 {&dpsgd, false, &f32, true, false}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        CHECK_RC(rumor_robust_parse(&rb, "auto", err));
        CHECK(rb.automatic && !rb.clip && !rb.trim);
        rumor_robust_resolve(&rb, cases[i].algo, cases[i].secure, cases[i].codec, cases[i].state);
        CHECK_MSG(!rb.automatic && rb.clip == cases[i].guard && rb.guard == (cases[i].guard ? 2.0 : 0.0) && !rb.trim,
                  "auto, case %zu", i);
    }
    CHECK_RC(rumor_robust_parse(&rb, "clip:0.1", err));
    rumor_robust_resolve(&rb, &sgp, true, &int4, true); /* only auto is resolved */
    CHECK(rb.clip && rb.clip_fraction == 0.1 && rb.guard == 0.0);

    rumor_topology_t *topo = rumor_topology_new("complete", 1, err);
    uint8_t keys[5][RUMOR_KEY_LEN];
    for (int i = 0; i < 5; i++) key_of(keys[i], i);
    float x[4] = {50, 50, 50, 50};
    rumor_gossip_config_t cfg = {.params = 4, .layout = 7, .chunk_params = 2, .round_timeout_ms = 1000};
    cfg.algo = sgp; /* auto with push-sum: plain mixing, no error */
    CHECK_RC(rumor_robust_parse(&cfg.robust, "auto", err));
    memcpy(cfg.self, keys[0], RUMOR_KEY_LEN);
    rumor_gossip_t *g = rumor_gossip_new(&cfg, topo, x, err);
    CHECK(g != NULL);
    rumor_gossip_stats_t st;
    if (g) rumor_gossip_stats(g, &st);
    CHECK(g && !st.clipping);
    rumor_gossip_destroy(&g);
    cfg.algo = dpsgd;
    cfg.algo.overlap = true; /* stepped by hand in the overlapped schedule */
    g = rumor_gossip_new(&cfg, topo, x, err);
    CHECK(g != NULL);
    if (!g) return;
    rumor_gossip_stats(g, &st);
    CHECK(st.clipping);
    rumor_gossip_set_view(g, (const uint8_t(*)[RUMOR_KEY_LEN])keys, 5);
    /* peer 4 sends -300 in round 0, -35 after it */
    float d[4][4] = {{1, 0, 0, 0}, {0, 2, 0, 0}, {3, 0, 0, 0}, {-300, 0, 0, 5}};
    const double start = (3.0 * 50.0 + 0.1) * sqrt(2.0); /* (3 RMS + floor) sqrt(n) */
    const double step_want[5][4] = {
        {0.2 * (4.0 - start), 0.4, 0, 1}, /* -300 clipped to the start radius, 5 taken */
        {0, 0.4, 0, 0},                   /* -35 to 4, 5 to 0 */
        {0, 0.4, 0, 0},
        {0, 0.4, 0, 0},
        /* peer 4's early -35 pulled to 4 + 0.4 against the round-3 snapshot, which is
         * (0, -0.4) from the round-4 one: (1 + 3 - 4.4, 2 - 0.4) / 5 */
        {0.2 * (4.0 - 4.4), 0.2 * 1.6, 0, 0},
    };
    robust_begin(g, x);
    rumor_gossip_send_t m;
    for (uint64_t r = 0; r < 5; r++) {
        float before[4], v[4];
        memcpy(before, x, sizeof x);
        for (int j = 1; j < 5; j++) {
            if (r == 4 && j == 4) continue; /* sent early, in round 3 */
            for (int k = 0; k < 4; k++) v[k] = before[k] + d[j - 1][k];
            for (uint64_t q = r; q <= (r == 3 && j == 4 ? r + 1 : r); q++)
                for (uint32_t c = 0; c < 2; c++) CHECK(robust_feed(g, keys[j], q, c, v, 100 * r + 1));
        }
        CHECK(rumor_gossip_step(g, x, 100 * r + 2) == RUMOR_GOSSIP_DONE);
        while (rumor_gossip_next_send(g, &m)) rumor_gossip_release(g, &m, true);
        for (int k = 0; k < 4; k++) CHECK_MSG(fabs(x[k] - before[k] - step_want[r][k]) < 2e-4,
                                              "round %d, x[%d] moved %g, want %g", (int)r, k, x[k] - before[k],
                                              step_want[r][k]);
        rumor_gossip_stats(g, &st);
        if (r == 0) CHECK_NEAR(st.clip_radius, 4.0, 1e-6);
        d[3][0] = -35;
    }
    /* chunk 0 of peer 4 in every round, its chunk 1 from round 1; nobody struck (35 is 8.75
     * radii, 300 in the first round 1.4 of the start radius) */
    CHECK_MSG(st.chunks_clipped == 9 && st.strikes == 0, "clipped %llu strikes %llu",
              (unsigned long long)st.chunks_clipped, (unsigned long long)st.strikes);
    /* Round 5: -300 is 75 radii, beyond guard's 10: a strike (clip's is 100 radii) */
    for (int j = 1; j < 5; j++) {
        float v[4];
        for (int k = 0; k < 4; k++) v[k] = x[k] + (j == 4 && k == 0 ? -300.0f : d[j - 1][k]);
        for (uint32_t c = 0; c < 2; c++) CHECK(robust_feed(g, keys[j], 5, c, v, 501));
    }
    CHECK(rumor_gossip_step(g, x, 502) == RUMOR_GOSSIP_DONE);
    rumor_gossip_stats(g, &st);
    CHECK_MSG(st.strikes == 1, "strikes %llu", (unsigned long long)st.strikes);
    /* Rounds 6-9: peer 3 comes back from elsewhere (a healed partition), 100 away in
     * parameter 0: 25 radii or more, within the start radius. Clipped every round, so its pull
     * is the radius (2 sqrt 2 from round 7: twice the median of 1, sqrt 2, 2 and 100), never
     * struck, so never banned (as a scaled model beyond the start radius is, after 3 rounds). */
    const float back[5][4] = {{0}, {1, 0, 1, 0}, {0, 2, 0, 2}, {100, 0, 1.5f, 0}, {1, 1, 1, 1}};
    for (uint64_t r = 6; r < 10; r++) {
        for (int j = 1; j < 5; j++) {
            float v[4];
            for (int k = 0; k < 4; k++) v[k] = x[k] + back[j][k];
            for (uint32_t c = 0; c < 2; c++) CHECK(robust_feed(g, keys[j], r, c, v, 100 * r + 1));
        }
        const float before = x[0];
        CHECK(rumor_gossip_step(g, x, 100 * r + 2) == RUMOR_GOSSIP_DONE);
        while (rumor_gossip_next_send(g, &m)) rumor_gossip_release(g, &m, true);
        if (r > 6) CHECK_MSG(fabs(x[0] - before - 0.2 * (2.0 + 2.0 * sqrt(2.0))) < 2e-4, "round %d: moved %g", (int)r,
                             x[0] - before);
    }
    rumor_gossip_stats(g, &st);
    CHECK_MSG(st.strikes == 1 && st.bans == 0, "strikes %llu bans %llu", (unsigned long long)st.strikes,
              (unsigned long long)st.bans);
    rumor_gossip_destroy(&g);
    rumor_topology_destroy(&topo);
}

/* One diloco round of peer 0 (complete graph on 5, 4 parameters in 2 chunks, theta at 50): its
 * inner result theta + (1, 1, -1, 1), honest neighbours' pseudo-gradients within 3 times its
 * own, and peer 4's (when attacker) -300 and 30 away; all of them before its own inner result
 * is in (early) or after. The model it ends the round with into out. */
static void diloco_first_round(const char *robust, bool attacker, bool early, float out[4], rumor_gossip_stats_t *st)
{
    char err[RUMOR_ERR_LEN];
    rumor_topology_t *topo = rumor_topology_new("complete", 1, err);
    uint8_t keys[5][RUMOR_KEY_LEN];
    for (int i = 0; i < 5; i++) key_of(keys[i], i);
    float x[4] = {50, 50, 50, 50};
    rumor_gossip_config_t cfg = {.params = 4, .layout = 7, .chunk_params = 2, .round_timeout_ms = 1000};
    CHECK_RC(rumor_algo_parse(&cfg.algo, "diloco:1", err));
    CHECK_RC(rumor_robust_parse(&cfg.robust, robust, err));
    memcpy(cfg.self, keys[0], RUMOR_KEY_LEN);
    rumor_gossip_t *g = rumor_gossip_new(&cfg, topo, x, err);
    CHECK(g != NULL);
    if (!g) return;
    rumor_gossip_set_view(g, (const uint8_t(*)[RUMOR_KEY_LEN])keys, 5);
    const float d[4][4] = {{2, 0, 0, 1}, {0, -1, 1, 0}, {1, 1, 0, 0}, {-300, 0, 0, 30}};
    const float own[4] = {1, 1, -1, 1};
    for (int k = 0; k < 4; k++) x[k] += own[k];
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 0 && !early) CHECK(rumor_gossip_step(g, x, 1) == RUMOR_GOSSIP_WAIT);
        for (int j = 1; j < 5 && pass == (early ? 0 : 1); j++) {
            if (j == 4 && !attacker) continue;
            float v[4];
            for (int k = 0; k < 4; k++) v[k] = 50.0f + d[j - 1][k];
            for (uint32_t c = 0; c < 2; c++) CHECK(robust_feed(g, keys[j], 0, c, v, 2));
        }
    }
    /* (without peer 4 the round ends at its deadline) */
    if (!attacker && early) CHECK(rumor_gossip_step(g, x, 3) == RUMOR_GOSSIP_WAIT);
    CHECK(rumor_gossip_step(g, x, attacker ? 3 : 5000) == RUMOR_GOSSIP_DONE);
    memcpy(out, x, sizeof x);
    rumor_gossip_stats(g, st);
    rumor_gossip_destroy(&g);
    rumor_topology_destroy(&topo);
}

/* guard under diloco, a first round: no radius measured yet, and the start radius (3 model
 * norms) would let peer 4's -300 in at 212 (moving the outer parameters by a fifth of it, which
 * the outer momentum carries on). A neighbour's pseudo-gradient beyond 3 times the peer's own
 * is left out instead: delivered, counted `far`, struck where it lies beyond the start radius
 * too, and the round ends exactly where plain averaging ends without peer 4, whether its
 * chunks came before the peer's own inner result (held until then) or after. */
static void test_robust_guard_diloco_first(void)
{
    float plain[4], guarded[4], late[4], clean[4];
    rumor_gossip_stats_t st;
    diloco_first_round("none", false, true, plain, &st);
    CHECK(st.drops[RUMOR_GOSSIP_DROP_FAR] == 0);
    diloco_first_round("guard", true, true, guarded, &st);
    CHECK_MSG(st.drops[RUMOR_GOSSIP_DROP_FAR] == 2 && st.strikes == 1 && st.chunks_clipped == 0,
              "early: far %llu strikes %llu clipped %llu", (unsigned long long)st.drops[RUMOR_GOSSIP_DROP_FAR],
              (unsigned long long)st.strikes, (unsigned long long)st.chunks_clipped);
    diloco_first_round("guard", true, false, late, &st);
    CHECK_MSG(st.drops[RUMOR_GOSSIP_DROP_FAR] == 2 && st.strikes == 1, "late: far %llu strikes %llu",
              (unsigned long long)st.drops[RUMOR_GOSSIP_DROP_FAR], (unsigned long long)st.strikes);
    diloco_first_round("guard", false, true, clean, &st); /* honest ones are taken whole */
    CHECK(st.drops[RUMOR_GOSSIP_DROP_FAR] == 0 && st.chunks_clipped == 0);
    for (int k = 0; k < 4; k++) {
        CHECK_MSG(fabsf(guarded[k] - plain[k]) < 1e-4f, "x[%d]: %g held, %g plain without peer 4", k, guarded[k],
                  plain[k]);
        CHECK_MSG(fabsf(late[k] - plain[k]) < 1e-4f, "x[%d]: %g late, %g plain without peer 4", k, late[k], plain[k]);
        CHECK_NEAR(clean[k], plain[k], 1e-4);
    }
}

/* Compressed gossip (int4) under guard: four peers on a complete graph from one start, peer 3
 * putting its model some 20 away every round (within the plausible scale), ten rounds. Plain
 * CHOCO takes peers 0-2 most of the way to it; guard clips the difference of peer 3's public
 * copy to twice the median difference (chunks clipped at each of them, none at peer 3, whose
 * differences are alike), so they move a fifth as far at most. */
static void choco_guard_round(const char *robust, float moved[3], uint64_t clipped[4])
{
    enum { P = 4 };
    char err[RUMOR_ERR_LEN];
    swarm_t s;
    swarm_init(&s, 4, "complete", "dpsgd", P, 4, 1, 500);
    s.lose_from = -1;
    const float zero[P] = {0}, x0[4][P] = {{0, 1, 2, 1}, {1, 0, 2, 2}, {2, 1, 0, 1}, {10, 11, 12, 11}};
    for (int i = 0; i < 4; i++) { /* one start, as a swarm's (the copies' common base) */
        rumor_gossip_destroy(&s.g[i]);
        rumor_gossip_config_t cfg = {.params = P, .layout = 0x1234, .chunk_params = 4, .round_timeout_ms = 500,
                                     .choco = {.id = RUMOR_CODEC_INT4}, .lineage = (uint64_t)i + 1};
        CHECK_RC(rumor_algo_parse(&cfg.algo, "dpsgd", err));
        CHECK_RC(rumor_robust_parse(&cfg.robust, robust, err));
        memcpy(cfg.self, s.key[i], RUMOR_KEY_LEN);
        CHECK((s.g[i] = rumor_gossip_new(&cfg, s.topo, zero, err)) != NULL);
        rumor_gossip_set_view(s.g[i], (const uint8_t(*)[RUMOR_KEY_LEN])s.key, 4);
        memcpy(s.x[i], x0[i], sizeof x0[i]);
    }
    float before[3][P];
    for (uint64_t r = 0; r < 10; r++) {
        memcpy(s.x[3], x0[3], sizeof x0[3]); /* peer 3 sends its far model every round */
        if (r == 0)
            for (int i = 0; i < 3; i++) memcpy(before[i], s.x[i], sizeof before[i]);
        CHECK(pass(&s, r));
    }
    for (int i = 0; i < 4; i++) {
        double d2 = 0.0;
        for (int j = 0; j < P && i < 3; j++) d2 += (double)(s.x[i][j] - before[i][j]) * (s.x[i][j] - before[i][j]);
        if (i < 3) moved[i] = (float)sqrt(d2); /* in ten rounds */
        rumor_gossip_stats_t st;
        rumor_gossip_stats(s.g[i], &st);
        clipped[i] = st.chunks_clipped;
    }
    swarm_fini(&s);
}

static void test_choco_guard(void)
{
    float plain[3], guarded[3];
    uint64_t cp[4], cg[4];
    choco_guard_round("none", plain, cp);
    choco_guard_round("guard", guarded, cg);
    for (int i = 0; i < 3; i++) {
        CHECK_MSG(plain[i] > 10.0, "peer %d: plain moved %g", i, plain[i]);
        CHECK_MSG(guarded[i] < 0.2 * plain[i], "peer %d: guarded moved %g (plain %g)", i, guarded[i], plain[i]);
        CHECK_MSG(cg[i] >= 1 && cp[i] == 0, "peer %d: %llu chunks clipped", i, (unsigned long long)cg[i]);
    }
    CHECK_MSG(cg[3] == 0, "peer 3: %llu chunks clipped", (unsigned long long)cg[3]);
}

/* The trimmed mean by hand: complete graph on 5, 4 parameters in 2 chunks; peer 0 at 0. */
static void test_robust_trim(void)
{
    char err[RUMOR_ERR_LEN];
    rumor_robust_t rb;
    CHECK_RC(rumor_robust_parse(&rb, "trim:1", err));
    CHECK(rb.trim == 1 && !rb.clip);
    CHECK(rumor_robust_parse(&rb, "trim:0", err) == RUMOR_EINVAL);
    CHECK(rumor_robust_parse(&rb, "trim:9", err) == RUMOR_EINVAL);
    rumor_topology_t *topo = rumor_topology_new("complete", 1, err);
    uint8_t keys[5][RUMOR_KEY_LEN];
    for (int i = 0; i < 5; i++) key_of(keys[i], i);
    float x[4] = {0, 0, 0, 0};
    rumor_gossip_config_t cfg = {.params = 4, .layout = 7, .chunk_params = 2, .round_timeout_ms = 1000};
    CHECK_RC(rumor_algo_parse(&cfg.algo, "dpsgd", err));
    cfg.algo.overlap = true; /* stepped by hand in the overlapped schedule */
    CHECK_RC(rumor_robust_parse(&cfg.robust, "trim:1", err));
    memcpy(cfg.self, keys[0], RUMOR_KEY_LEN);
    rumor_gossip_t *g = rumor_gossip_new(&cfg, topo, x, err);
    CHECK(g != NULL);
    if (!g) return;
    rumor_gossip_set_view(g, (const uint8_t(*)[RUMOR_KEY_LEN])keys, 5);
    CHECK(rumor_gossip_step(g, x, 0) == RUMOR_GOSSIP_DONE);
    rumor_gossip_send_t m;
    while (rumor_gossip_next_send(g, &m)) rumor_gossip_release(g, &m, true);
    /* Per coordinate, the neighbours' values; with the peer's own 0, trim:1 drops the lowest
     * and the highest of five and averages the middle three. Neighbour 4 sends only chunk 0
     * (coordinates 0 and 1): chunk 1 has four values, and keeps the middle two. */
    const float v[4][4] = {{1, -5, 10, 7}, {2, -6, 20, 8}, {3, -7, 30, 9}, {1000, 99, 0, 0}};
    for (int j = 1; j < 5; j++)
        for (uint32_t c = 0; c < (j == 4 ? 1u : 2u); c++) {
            const rumor_gossip_chunk_t h = {.round = 0, .layout = 7, .w = 0.2, .chunk = c, .chunks = 2, .off = 2 * c, .n = 2};
            CHECK(rumor_gossip_on_chunk(g, keys[j], &h, v[j - 1] + 2 * c, 8, 1));
        }
    memset(x, 0, sizeof x);
    CHECK(rumor_gossip_step(g, x, 1001) == RUMOR_GOSSIP_DONE); /* past the deadline: 4 of chunk 1 */
    /* x0: {0,1,2,3,1000} -> 2; x1: {-7,-6,-5,0,99} -> -11/3; x2: {0,10,20,30} -> 15; x3: {0,7,8,9} -> 7.5 */
    CHECK_NEAR(x[0], 2.0, 1e-6);
    CHECK_NEAR(x[1], -11.0 / 3.0, 1e-6);
    CHECK_NEAR(x[2], 15.0, 1e-6);
    CHECK_NEAR(x[3], 7.5, 1e-6);
    rumor_gossip_destroy(&g);
    /* Push-sum is refused, and so is a model too large to hold 64 copies of. */
    CHECK_RC(rumor_algo_parse(&cfg.algo, "sgp", err));
    CHECK(rumor_gossip_new(&cfg, topo, x, err) == NULL);
    rumor_topology_destroy(&topo);
}

/* ---- compressed gossip (CHOCO) ---- */

static void choco_peer(swarm_t *s, int i, double fraction, double gamma, uint64_t lineage)
{
    char err[RUMOR_ERR_LEN];
    rumor_gossip_destroy(&s->g[i]);
    rumor_gossip_config_t cfg = {.params = s->P, .layout = 0x1234, .chunk_params = s->chunk, .round_timeout_ms = 1000,
                                 .choco = {.id = RUMOR_CODEC_TOPK, .fraction = fraction}, .choco_gamma = gamma,
                                 .lineage = lineage};
    CHECK_RC(rumor_algo_parse(&cfg.algo, "dpsgd", err));
    memcpy(cfg.self, s->key[i], RUMOR_KEY_LEN);
    CHECK((s->g[i] = rumor_gossip_new(&cfg, s->topo, s->x[i], err)) != NULL);
    rumor_gossip_set_view(s->g[i], (const uint8_t(*)[RUMOR_KEY_LEN])s->key, (size_t)s->n);
}

static double max_abs_diff(const double *a, const double *b, size_t n)
{
    double d = 0.0;
    for (size_t j = 0; j < n; j++) d = fmax(d, fabs(a[j] - b[j]));
    return d;
}

/* CHOCO-gossip with learning rate 0: the peers reach the average of their models, which is
 * kept exactly while every copy is in step (W symmetric), sending a tenth of the entries; a
 * lost delta costs one keyframe; a restarted peer (a new lineage, copies lost on both sides)
 * is caught up by keyframes and the swarm agrees again. Passes are a second apart: every
 * round ends at the next pass with what arrived. */
static void test_choco(void)
{
    const int n = 8;
    const size_t P = 300, chunk = 128; /* chunks of 128, 128, 44 */
    const double fr = 0.1, gm = 0.2;
    swarm_t s;
    swarm_init(&s, n, "ring", "dpsgd", P, chunk, 5, 1000);
    s.lose_from = -1;
    /* A fresh swarm: every peer starts from one model (the copies everybody holds at version
     * 0), then each moves away on its own; the first deltas carry the differences. */
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < P; j++) s.x[i][j] = (float)(0.5 * sin((double)(j * 13 + 1)));
    for (int i = 0; i < n; i++) {
        choco_peer(&s, i, fr, gm, (uint64_t)i + 1);
        for (size_t j = 0; j < P; j++) s.x[i][j] += (float)(i + 1) * 0.1f * (float)cos((double)(j + 7 * i));
    }
    double *mean = malloc(P * sizeof *mean), *m2 = malloc(P * sizeof *m2);
    mean_of(&s, mean);
    const double d0 = dist_to_mean(&s, mean);
    for (int r = 0; r < 200; r++) (void)pass(&s, 1000 + 1000 * (uint64_t)r);
    mean_of(&s, m2);
    CHECK_MSG(max_abs_diff(mean, m2, P) < 1e-5, "choco: the average moved by %g", max_abs_diff(mean, m2, P));
    const double d1 = dist_to_mean(&s, m2);
    CHECK_MSG(d1 < 1e-3 * d0, "choco: %g of %g left from the mean after 200 rounds", d1, d0);
    rumor_gossip_stats_t st;
    for (int i = 0; i < n; i++) {
        rumor_gossip_stats(s.g[i], &st);
        CHECK(st.keyframes == 0 && st.copies_mixed == 2 && st.drops[RUMOR_GOSSIP_DROP_COPY] == 0);
    }
    /* A tenth of the entries as (index, value) pairs: a fifth of the float32 bytes. */
    const double ratio = (double)s.choco_bytes / (double)s.choco_dense;
    CHECK_MSG(ratio > 0.19 && ratio < 0.21, "choco: %.3f of the float32 bytes", ratio);

    /* Peers move apart again; one delta chunk from peer 2 to peer 3 is lost. */
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < P; j++) s.x[i][j] += (float)(0.05 * (i - 3.5) * cos((double)j));
    mean_of(&s, mean);
    const double d2 = dist_to_mean(&s, mean);
    s.lose_from = 2, s.lose_to = 3, s.lose_chunk = 1;
    for (int r = 0; r < 200; r++) (void)pass(&s, 300000 + 1000 * (uint64_t)r);
    mean_of(&s, m2);
    const double d3 = dist_to_mean(&s, m2);
    CHECK_MSG(d3 < 1e-3 * d2 && max_abs_diff(mean, m2, P) < 5e-3, "choco after a loss: %g of %g left, average moved %g",
              d3, d2, max_abs_diff(mean, m2, P));
    rumor_gossip_stats(s.g[3], &st);
    /* The gap shows when the next delta is applied, at its round's end; the one after may be
     * on its way before the request for a keyframe reaches the sender. */
    CHECK_MSG(st.drops[RUMOR_GOSSIP_DROP_COPY] >= 1 && st.drops[RUMOR_GOSSIP_DROP_COPY] <= 2, "copy drops %llu",
              (unsigned long long)st.drops[RUMOR_GOSSIP_DROP_COPY]);
    rumor_gossip_stats(s.g[2], &st);
    CHECK_MSG(st.keyframes == 1, "choco: %llu keyframes after one lost delta", (unsigned long long)st.keyframes);

    /* Peer 5 restarts from its model, moved away, with a new lineage: it asks its neighbours
     * for their copies and they ask for its; the swarm agrees again. */
    for (size_t j = 0; j < P; j++) s.x[5][j] += 0.3f;
    choco_peer(&s, 5, fr, gm, 99);
    char err[RUMOR_ERR_LEN];
    CHECK_RC(rumor_gossip_restore(s.g[5], rumor_gossip_round(s.g[4]), (const double[]){1, 1, 1}, 3, err));
    mean_of(&s, mean);
    const double d4 = dist_to_mean(&s, mean);
    for (int r = 0; r < 300; r++) (void)pass(&s, 600000 + 1000 * (uint64_t)r);
    mean_of(&s, m2);
    const double d5 = dist_to_mean(&s, m2);
    CHECK_MSG(d5 < 1e-3 * d4 && max_abs_diff(mean, m2, P) < 0.02, "choco after a restart: %g of %g left, average moved %g",
              d5, d4, max_abs_diff(mean, m2, P));
    rumor_gossip_stats(s.g[5], &st);
    CHECK_MSG(st.keyframes == 2, "the restarted peer sent %llu keyframes", (unsigned long long)st.keyframes);
    rumor_gossip_stats(s.g[4], &st);
    CHECK_MSG(st.keyframes == 1, "its neighbour sent %llu keyframes", (unsigned long long)st.keyframes);
    free(mean), free(m2);
    swarm_fini(&s);
}

/* A neighbour that runs 60 rounds ahead while this peer is busy: its deltas of rounds within
 * the window wait for them, those beyond are applied at once after the held ones, in order,
 * and the copy stays whole (no gap, nothing asked for again). */
static void test_choco_ahead(void)
{
    enum { P = 64 };
    char err[RUMOR_ERR_LEN];
    rumor_topology_t *topo = rumor_topology_new("complete", 7, err);
    uint8_t key[2][RUMOR_KEY_LEN] = {{1}, {2}};
    float x0[P], xi[P], xj[P];
    for (int k = 0; k < P; k++) x0[k] = (float)sin(k);
    memcpy(xi, x0, sizeof xi);
    memcpy(xj, x0, sizeof xj);
    rumor_gossip_t *g[2];
    for (int i = 0; i < 2; i++) {
        rumor_gossip_config_t cfg = {.params = P, .layout = 1, .chunk_params = P, .round_timeout_ms = 500,
                                     .choco = {.id = RUMOR_CODEC_TOPK, .fraction = 0.25}, .choco_gamma = 0.2,
                                     .lineage = 10 + (uint64_t)i};
        CHECK_RC(rumor_algo_parse(&cfg.algo, "dpsgd", err));
        cfg.algo.overlap = true; /* stepped by hand in the overlapped schedule */
        memcpy(cfg.self, key[i], RUMOR_KEY_LEN);
        CHECK((g[i] = rumor_gossip_new(&cfg, topo, x0, err)) != NULL);
        rumor_gossip_set_view(g[i], (const uint8_t(*)[RUMOR_KEY_LEN])key, 2);
    }
    for (int r = 0; r < 60; r++) {
        for (int k = 0; k < P; k++) xj[k] += 0.01f * (float)cos(k * r + 1);
        CHECK(rumor_gossip_step(g[1], xj, 1000 * (uint64_t)r) == RUMOR_GOSSIP_DONE);
        rumor_gossip_send_t m;
        while (rumor_gossip_next_send(g[1], &m)) {
            rumor_gossip_chunk_t h = {.round = m.round, .layout = 1, .w = m.share, .chunk = 0, .chunks = 1, .off = 0,
                                      .n = P, .choco = true, .codec = m.codec, .ver = m.ver, .lin = m.lin,
                                      .base = m.base, .need = m.need};
            const void *pl = m.enc ? (const void *)m.enc : (const void *)m.params;
            const size_t len = m.enc ? m.enc_off[1] - m.enc_off[0] : P * sizeof(float);
            (void)rumor_gossip_on_chunk(g[0], key[1], &h, pl, len, 1000 * (uint64_t)r);
            rumor_gossip_release(g[1], &m, true);
        }
    }
    for (int r = 0; r < 6; r++) {
        (void)rumor_gossip_step(g[0], xi, 1000 * (uint64_t)(60 + r));
        rumor_gossip_send_t m;
        while (rumor_gossip_next_send(g[0], &m)) {
            CHECK(!m.need); /* it holds the copy whole: nothing to ask for */
            rumor_gossip_release(g[0], &m, true);
        }
    }
    rumor_gossip_stats_t st;
    rumor_gossip_stats(g[0], &st);
    CHECK_MSG(st.drops[RUMOR_GOSSIP_DROP_COPY] == 0 && st.copies_mixed == 1, "a neighbour 60 rounds ahead: %llu gaps",
              (unsigned long long)st.drops[RUMOR_GOSSIP_DROP_COPY]);
    for (int i = 0; i < 2; i++) rumor_gossip_destroy(&g[i]);
    rumor_topology_destroy(&topo);
}

/* CHOCO: a keyframe of 1e30s from a neighbour is dropped; a delta that would take a copy to
 * 1e30 in one coordinate is dropped too and leaves that chunk of the copy invalid (out of the
 * mix until a keyframe), both counted `implausible`. */
static void test_choco_implausible(void)
{
    enum { P = 64 };
    char err[RUMOR_ERR_LEN];
    rumor_topology_t *topo = rumor_topology_new("complete", 7, err);
    uint8_t key[3][RUMOR_KEY_LEN] = {{1}, {2}, {3}};
    float x0[P], big[P];
    for (int k = 0; k < P; k++) x0[k] = (float)sin(k), big[k] = 1e30f;
    rumor_gossip_t *g[2];
    for (int i = 0; i < 2; i++) {
        rumor_gossip_config_t cfg = {.params = P, .layout = 1, .chunk_params = P, .round_timeout_ms = 500,
                                     .choco = {.id = RUMOR_CODEC_TOPK, .fraction = 0.25}, .choco_gamma = 0.2,
                                     .lineage = 10 + (uint64_t)i};
        CHECK_RC(rumor_algo_parse(&cfg.algo, "dpsgd", err));
        cfg.algo.overlap = true; /* stepped by hand in the overlapped schedule */
        memcpy(cfg.self, key[i], RUMOR_KEY_LEN);
        CHECK((g[i] = rumor_gossip_new(&cfg, topo, x0, err)) != NULL);
        rumor_gossip_set_view(g[i], (const uint8_t(*)[RUMOR_KEY_LEN])key, 3);
    }
    /* Peer 1's first send tells the base every fresh copy starts from (our x0's hash). */
    CHECK(rumor_gossip_step(g[1], x0, 0) == RUMOR_GOSSIP_DONE);
    rumor_gossip_send_t m;
    uint64_t base = 0;
    while (rumor_gossip_next_send(g[1], &m)) {
        base = m.base;
        rumor_gossip_release(g[1], &m, true);
    }
    CHECK(base != 0);
    rumor_gossip_chunk_t h = {.round = 0, .layout = 1, .w = 1.0 / 3.0, .chunk = 0, .chunks = 1, .off = 0, .n = P,
                              .choco = true, .codec = RUMOR_CODEC_F32, .ver = 1, .lin = 77, .base = 5};
    CHECK(!rumor_gossip_on_chunk(g[0], key[2], &h, big, sizeof big, 0)); /* a keyframe */
    uint8_t delta[8];
    const uint32_t idx = 5;
    const float val = 1e30f;
    memcpy(delta, &idx, 4), memcpy(delta + 4, &val, 4); /* one (index, value) pair, little-endian */
    h.codec = RUMOR_CODEC_TOPK, h.lin = 88, h.base = base;
    CHECK(!rumor_gossip_on_chunk(g[0], key[1], &h, delta, sizeof delta, 0)); /* copy at version 0, + 1e30 */
    rumor_gossip_stats_t st;
    rumor_gossip_stats(g[0], &st);
    CHECK(st.drops[RUMOR_GOSSIP_DROP_IMPLAUSIBLE] == 2);
    /* The round mixes no copy: one holds nothing, the other's chunk waits for a keyframe. */
    float x[P];
    memcpy(x, x0, sizeof x);
    CHECK(rumor_gossip_step(g[0], x, 1) == RUMOR_GOSSIP_DONE);
    while (rumor_gossip_next_send(g[0], &m)) rumor_gossip_release(g[0], &m, true);
    CHECK(rumor_gossip_step(g[0], x, 600) == RUMOR_GOSSIP_DONE);
    rumor_gossip_stats(g[0], &st);
    CHECK(st.copies_mixed == 0 && loss_finite(x, P));
    for (int i = 0; i < 2; i++) rumor_gossip_destroy(&g[i]);
    rumor_topology_destroy(&topo);
}

/* ---- the receiver's path (wire.h) ---- */

/* Every send of peer i, its chunks encoded with codec: through rumor_wire_receive as a node
 * and virtual mode receive them (wire), or decoded at the sender and handed to the engine as
 * floats, the way virtual mode delivered them before it took the node's path. */
static void drain_coded(swarm_t *s, int i, const rumor_codec_t *codec, bool wire, rumor_wire_in_t *in, uint64_t now)
{
    rumor_gossip_send_t m;
    uint8_t enc[4 * 64]; /* the largest encoding of a chunk of 64 */
    float dec[64];
    while (rumor_gossip_next_send(s->g[i], &m)) {
        const int to = find(s, m.peer);
        const uint32_t chunks = (uint32_t)rumor_chunks(m.count, m.chunk_params);
        for (uint32_t c = 0; c < chunks; c++) {
            const size_t off = (size_t)c * m.chunk_params, n = m.count - off < m.chunk_params ? m.count - off : m.chunk_params;
            size_t len = 0;
            char err[RUMOR_ERR_LEN];
            CHECK(n <= 64);
            CHECK_RC(rumor_codec_encode(codec, m.params + off, n, enc, &len, err));
            if (wire) {
                const rumor_msg_model_t mm = {.round = m.round, .layout = m.layout, .w = m.share * m.w[c],
                                              .codec = codec->id, .chunk = c, .chunks = chunks, .off = off, .n = n,
                                              .payload = enc, .payload_len = len};
                CHECK(rumor_wire_receive(in, s->g[to], s->key[i], &mm, now));
            } else {
                CHECK_RC(rumor_codec_decode(codec->id, enc, len, n, dec, err));
                const rumor_gossip_chunk_t h = {.round = m.round, .layout = m.layout, .w = m.share * m.w[c], .chunk = c,
                                                .chunks = chunks, .off = off, .n = n, .wire_bytes = len};
                CHECK(rumor_gossip_on_chunk(s->g[to], s->key[i], &h, dec, n * sizeof(float), now));
            }
        }
        rumor_gossip_release(s->g[i], &m, true);
    }
}

/* The node's path and the one virtual mode used to take give the same engine state, bit for
 * bit, for the same chunks: int8 and fp16 chunks, decoded by the receiver (wire) or at the
 * sender, leave four peers with the same models and the same bytes counted after five
 * rounds. A payload that does not decode is refused and counted. */
static void test_wire_receive(void)
{
    static const char *const specs[] = {"int8", "fp16"};
    for (size_t k = 0; k < RUMOR_ARRAY_LEN(specs); k++) {
        rumor_codec_t codec;
        char err[RUMOR_ERR_LEN];
        CHECK_RC(rumor_codec_parse(&codec, specs[k], err));
        swarm_t a, b;
        swarm_init(&a, 4, "complete", "dpsgd", 150, 64, 11, 1000);
        swarm_init(&b, 4, "complete", "dpsgd", 150, 64, 11, 1000);
        float buf[64];
        rumor_wire_in_t in = {.dec = buf, .cap = 64};
        for (int r = 0; r < 5; r++)
            for (int i = 0; i < 4; i++) {
                CHECK(rumor_gossip_step(a.g[i], a.x[i], 100 + (uint64_t)r) == rumor_gossip_step(b.g[i], b.x[i], 100 + (uint64_t)r));
                drain_coded(&a, i, &codec, true, &in, 100 + (uint64_t)r);
                drain_coded(&b, i, &codec, false, NULL, 100 + (uint64_t)r);
            }
        for (int i = 0; i < 4; i++) {
            CHECK_MSG(memcmp(a.x[i], b.x[i], 150 * sizeof(float)) == 0, "%s: peer %d differs", specs[k], i);
            rumor_gossip_stats_t sa, sb;
            rumor_gossip_stats(a.g[i], &sa);
            rumor_gossip_stats(b.g[i], &sb);
            CHECK(sa.bytes_in == sb.bytes_in && sa.chunks_in == sb.chunks_in && sa.chunks_in > 0);
        }
        CHECK(in.undecodable == 0);
        /* One byte short of its codec's length: not decoded, not handed on. */
        uint8_t junk[4 * 64] = {0};
        const rumor_msg_model_t bad = {.round = rumor_gossip_round(a.g[1]), .layout = 0x1234, .w = 0.25,
                                       .codec = codec.id, .chunk = 0, .chunks = 3, .off = 0, .n = 64,
                                       .payload = junk, .payload_len = rumor_codec_encoded_len(&codec, 64) - 1};
        CHECK(!rumor_wire_receive(&in, a.g[1], a.key[0], &bad, 200) && in.undecodable == 1);
        swarm_fini(&a);
        swarm_fini(&b);
    }
}

int main(void)
{
    test_wire_receive();
    test_choco();
    test_choco_ahead();
    test_choco_implausible();
    test_robust_clip();
    test_robust_guard();
    test_robust_guard_diloco_first();
    test_choco_guard();
    test_robust_trim();
    test_algo_parse();
    test_push_sum("epidemic:2", 12);
    test_push_sum("onepeer-expo", 8);
    test_dead_peer();
    test_graph_moves();
    test_members_follow_view();
    test_known_answers();
    test_known_answers_plain();
    test_overlap_close();
    test_extra_state();
    test_sender_cap();
    test_nonfinite_positions();
    test_one_round_ahead();
    test_deadline_learns();
    test_round_cap();
    test_ahead_across_rounds();
    test_adopt_in_flight();
    test_hostile_huge("dpsgd");
    test_hostile_huge("dpsgd+clip"); /* (the default with dpsgd: clipping drops them too) */
    test_hostile_huge("sgp");
    test_hostile_huge("diloco:1");
    test_plausible_bound();
    test_plausible_model();
    test_confirm();
    test_sgp_weight_bound();
    test_sgp_sender_records();
    test_diloco();
    test_diloco_int4();
    test_diloco_overlap();
    test_diloco_overlap_int4();
    test_restore();
    return check_done();
}
