/* test_gossip_core.c - the gossip engine's tests that need the core library: D-PSGD's
 * contraction against |lambda_2| from the spectral tooling (LAPACK), and secure mixing with
 * real keys (the keyed sender side, libsodium): masked sums give plain D-PSGD's models to
 * fixed-point precision, refusals, a hostile sender's implausible neighbourhood mean left
 * unmixed. The rest of the engine's tests (test_gossip.c) link only the pure library. */
#define GOSSIP_SWARM_SECURE
#include "gossip_swarm.h"

/* lr = 0 (pure gossip): every peer reaches the exact initial mean; the per-round contraction
 * of the distance to it is |lambda_2| of the mixing matrix. */
static void test_pure_gossip(const char *algo, const char *topo, int n, size_t P, size_t chunk, int first, int last)
{
    swarm_t s;
    swarm_init(&s, n, topo, algo, P, chunk, 42, 1000);
    double *mean = malloc(P * sizeof *mean), *m2 = malloc(P * sizeof *m2);
    mean_of(&s, mean);
    double d_first = dist_to_mean(&s, mean), d_last = 0; /* first = 0: the start */
    rumor_gossip_stats_t gs;
    for (int r = 0; r < 1000; r++) {
        CHECK(pass(&s, 1000 + (uint64_t)r));
        rumor_gossip_stats(s.g[0], &gs); /* rounds finished: the overlapped form is one behind */
        if (gs.round == (uint64_t)first) d_first = dist_to_mean(&s, mean);
        if (gs.round == (uint64_t)last) d_last = dist_to_mean(&s, mean);
        if (gs.round == 400) break;
    }
    /* Metropolis-Hastings weights are doubly stochastic: the mean moves only by float32
     * rounding, which near consensus rounds every peer the same way: at most 3e-8 of the
     * value per round (parameters here are about 3 +- 1); in the reference form (acc holds
     * a_j (v_j - s_i)) it does not even do that. */
    mean_of(&s, m2);
    double worst = 0;
    for (size_t j = 0; j < P; j++) worst = fmax(worst, fabs(m2[j] - mean[j]) / fabs(mean[j]));
    CHECK_MSG(worst < 1e-6, "%s: mean drifted by %g (relative)", topo, worst);
    worst = 0;
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < P; j++) worst = fmax(worst, fabs(s.x[i][j] - mean[j]) / fabs(mean[j]));
    CHECK_MSG(worst < 1e-5, "%s: a peer is %g (relative) from the mean after 400 rounds", topo, worst);

    char err[RUMOR_ERR_LEN];
    rumor_topology_stats_t st;
    CHECK_RC(rumor_topology_analyze(s.topo, (size_t)n, &st, err));
    const double measured = pow(d_last / d_first, 1.0 / (last - first));
    if (st.contraction < 1e-9) /* complete: exact after one round */
        CHECK_MSG(d_last < 1e-5 * d_first, "%s: %g left after a round", topo, d_last / d_first);
    else
    CHECK_MSG(fabs(measured - st.contraction) <= 0.1 * st.contraction, "%s: contraction %.4f, |lambda2| %.4f",
              topo, measured, st.contraction);
    rumor_gossip_stats(s.g[0], &gs);
    CHECK(gs.round == 400 && gs.last_missing == 0 && gs.missing_total == 0);
    CHECK(gs.drops[RUMOR_GOSSIP_DROP_STALE] == 0 && gs.drops[RUMOR_GOSSIP_DROP_AHEAD] == 0);
    free(mean);
    free(m2);
    swarm_fini(&s);
}

/* ---- members that cannot be dialled ---- */

/* Rounds of a swarm whose members (in key order) have the reach classes cls (placed: given to
 * the engines; else the key order for all): the sends between two members of different
 * nonzero classes (which would go through a relay), and whether every round finished at its
 * gossip point (peers that placed members differently would wait for models that never come). */
typedef struct {
    int round, who;   /* from this round on, member who ... */
    uint64_t cls;     /* ... has this class (round 0: no change) */
    bool *edge;       /* when not NULL: n x n, the sends of round 0 */
    const uint64_t *place; /* when not NULL: each member's place (else key order) */
} reach_script_t;

static int relayed_sends_as(const char *topo, int n, const uint64_t *cls0, bool placed, int rounds, double *spread,
                            const reach_script_t *sc)
{
    swarm_t s;
    const size_t P = 40;
    uint64_t cls[MAXN];
    memcpy(cls, cls0, (size_t)n * sizeof *cls);
    swarm_init(&s, n, topo, "dpsgd", P, P, 5, 1000);
    int both = 0;
    bool done = true;
    for (int r = 0; r < rounds; r++) {
        if (r == 0 || (sc && sc->round == r)) {
            if (r && sc) cls[sc->who] = sc->cls;
            const uint64_t *place = sc ? sc->place : NULL;
            for (int i = 0; i < n; i++)
                rumor_gossip_set_view_reach(s.g[i], (const uint8_t(*)[RUMOR_KEY_LEN])s.key, NULL, placed ? cls : NULL,
                                            place, (size_t)n, placed ? cls[i] : 0, place ? place[i] : 0);
        }
        bool waited[MAXN] = {false};
        for (int i = 0; i < n; i++) {
            waited[i] = rumor_gossip_step(s.g[i], s.x[i], 100 + (uint64_t)r) != RUMOR_GOSSIP_DONE;
            rumor_gossip_send_t m;
            while (rumor_gossip_next_send(s.g[i], &m)) {
                const int to = find(&s, m.peer);
                both += to >= 0 && cls[i] && cls[to] && cls[i] != cls[to];
                if (r == 0 && sc && sc->edge && to >= 0) sc->edge[i * n + to] = true;
                deliver(&s, i, &m, 100 + (uint64_t)r);
            }
        }
        for (int i = 0; i < n; i++)
            if (waited[i]) {
                done &= rumor_gossip_step(s.g[i], s.x[i], 100 + (uint64_t)r) == RUMOR_GOSSIP_DONE;
                drain(&s, i, 100 + (uint64_t)r);
            }
    }
    CHECK_MSG(done, "%s, %d members: a round waited (the peers placed the members differently)", topo, n);
    double *mean = malloc(P * sizeof *mean);
    mean_of(&s, mean);
    *spread = dist_to_mean(&s, mean);
    free(mean);
    swarm_fini(&s);
    return both;
}

static int relayed_sends(const char *topo, int n, const uint64_t *cls, bool placed, int rounds, double *spread)
{
    return relayed_sends_as(topo, n, cls, placed, rounds, spread, NULL);
}

/* Sends between members that cannot be dialled, when the u smallest keys cannot (each its own
 * class, as members behind different NATs are). */
static int far_edges(const char *topo, int n, int u, bool placed, int rounds, double *spread)
{
    uint64_t cls[MAXN];
    for (int i = 0; i < n; i++) cls[i] = i < u ? UINT64_C(0x8000000000000000) | (uint64_t)(i + 1) : 0;
    return relayed_sends(topo, n, cls, placed, rounds, spread);
}

/* Members that cannot be dialled reach each other only through a relay: the graph's positions
 * are dealt so that as few edges as it allows join two of them, the same way at every peer,
 * and gossip converges as before (a relabelling keeps the weights doubly stochastic). */
static void test_far_members(void)
{
    double spread_far, spread_keys;
    /* A ring of 8 with 4 that cannot be dialled: alternated, no edge joins two of them (in key
     * order, ranks 0..3 in a row: 3 edges each way, every round). */
    int far = far_edges("ring", 8, 4, true, 60, &spread_far), keys = far_edges("ring", 8, 4, false, 60, &spread_keys);
    CHECK_MSG(far == 0 && keys == 60 * 3 * 2, "ring: %d sends between members that cannot be dialled (key order %d)",
              far, keys);
    CHECK_MSG(spread_far < 1e-3 && spread_keys < 1e-3, "ring: gossip converges either way (%g, %g)", spread_far,
              spread_keys);
    /* The exponential graph of 8 (offsets 1, 2, 4 both ways): fewer such edges than key order. */
    far = far_edges("expo", 8, 3, true, 20, &spread_far);
    keys = far_edges("expo", 8, 3, false, 20, &spread_keys);
    CHECK_MSG(far < keys, "expo: %d sends between members that cannot be dialled, key order %d", far, keys);
    fprintf(stderr, "expo, 3 of 8 that cannot be dialled, 20 rounds: %d sends between two of them (key order %d)\n",
            far, keys);
    /* Too many to keep apart (6 of 8 on a ring): still consistent everywhere. */
    far = far_edges("ring", 8, 6, true, 20, &spread_far);
    CHECK_MSG(far > 0 && spread_far < 1.0, "ring, 6 of 8: %d such sends", far);
}

/* Members behind one NAT dial each other (one class, their site): the graph puts them side by
 * side. A ring of 8, in key order: sites A (3 members) and B (2), one member nobody can dial
 * (C), two anyone can dial. The best a ring allows is one edge between two classes (C needs
 * both neighbours public for none, and then A and B meet); key order gives five. */
static void test_sites(void)
{
    const uint64_t A = 0x1111, B = 0x2222, C = UINT64_C(0x8000000000000007);
    const uint64_t cls[8] = {A, B, C, A, B, A, 0, 0};
    double spread_placed, spread_keys;
    const int placed = relayed_sends("ring", 8, cls, true, 60, &spread_placed);
    const int keys = relayed_sends("ring", 8, cls, false, 60, &spread_keys);
    CHECK_MSG(placed == 60 * 1 * 2 && keys == 60 * 5 * 2, "sites on a ring: %d relayed sends (key order %d)", placed,
              keys);
    CHECK_MSG(spread_placed < 1e-3, "sites on a ring: gossip converges (%g)", spread_placed);
    /* The NAT lab's swarm on a ring: one public member, two behind one NAT, one behind another:
     * one relayed edge of four (the two of the first NAT side by side). */
    const uint64_t lab[4] = {A, C, 0, A};
    const int lp = relayed_sends("ring", 4, lab, true, 10, &spread_placed);
    CHECK_MSG(lp == 10 * 1 * 2, "NAT lab on a ring: %d relayed sends in 10 rounds", lp);

    /* The positions PROTOCOL.md's rule deals, exactly: classes by size (A, then B, then C),
     * each member to the free position with the fewest edges to other classes, then the most
     * to its own, then the lowest degree and rank: A at 0, 1, 2, B at 4, 5, C at 6, class 0 at
     * 3 and 7, each class's members in key order. The ring's sends are between neighbours. */
    bool edge[64] = {false};
    reach_script_t sc = {.edge = edge};
    (void)relayed_sends_as("ring", 8, cls, true, 1, &spread_placed, &sc);
    const int order[8] = {0, 3, 5, 6, 1, 4, 2, 7};
    bool exact = true;
    for (int p = 0; p < 8; p++) {
        const int a = order[p], b = order[(p + 1) % 8];
        exact &= edge[a * 8 + b] && edge[b * 8 + a];
    }
    int sends = 0;
    for (int k = 0; k < 64; k++) sends += edge[k];
    CHECK_MSG(exact && sends == 16, "the ring's order by the rule: 0 3 5 6 1 4 2 7 (%d sends)", sends);

    /* A member changes its class mid-run (to a value a member could choose so that a hash of the
     * classes would not change): the positions are dealt again, every round still finishes at
     * its gossip point and the ring keeps one relayed edge. */
    reach_script_t change = {.round = 3, .who = 2, .cls = UINT64_C(0xdd31794d9e41c66a)};
    const int ch = relayed_sends_as("ring", 8, cls, true, 10, &spread_placed, &change);
    CHECK_MSG(ch == 10 * 1 * 2, "a class changed at round 3: %d relayed sends in 10 rounds", ch);
}

/* Members take the graph's ranks in the order of their places (rumor_member_place: a draw no
 * member chooses), not of their keys: on a ring of 8 whose places put the members in the order
 * 5 2 7 0 3 6 1 4, round 0's sends are exactly between neighbours in that order; with one
 * member that cannot be dialled, it still has two dialable neighbours, and every round finishes
 * at its gossip point (all peers rank alike). */
static void test_places(void)
{
    const int order[8] = {5, 2, 7, 0, 3, 6, 1, 4};
    uint64_t place[8], cls[8] = {0};
    for (int r = 0; r < 8; r++) place[order[r]] = UINT64_C(0x1f00000000000000) * (uint64_t)(r + 1) + 0x55;
    bool edge[64] = {false};
    reach_script_t sc = {.edge = edge, .place = place};
    double spread;
    (void)relayed_sends_as("ring", 8, cls, false, 1, &spread, &sc);
    bool exact = true;
    int sends = 0;
    for (int p = 0; p < 8; p++) {
        const int a = order[p], b = order[(p + 1) % 8];
        exact &= edge[a * 8 + b] && edge[b * 8 + a];
    }
    for (int k = 0; k < 64; k++) sends += edge[k];
    CHECK_MSG(exact && sends == 16, "a ring in place order 5 2 7 0 3 6 1 4 (%d sends)", sends);
    cls[7] = place[7] | UINT64_C(1) << 63, cls[0] = place[0] | UINT64_C(1) << 63; /* (neighbours by place) */
    reach_script_t far = {.place = place};
    const int relayed = relayed_sends_as("ring", 8, cls, true, 10, &spread, &far);
    CHECK_MSG(relayed == 0, "two undialable neighbours by place are moved apart: %d relayed sends", relayed);
}

/* ---- secure mixing ---- */

static int sk_cmp(const void *a, const void *b)
{
    return memcmp(rumor_secret_key_public(*(rumor_secret_key_t *const *)a),
                  rumor_secret_key_public(*(rumor_secret_key_t *const *)b), RUMOR_KEY_LEN);
}

/* The same swarm as swarm_init (same starting models for a seed), keyed with real key pairs
 * and secure mixing on. The keys come from fixed secret bytes: the masks are a function of
 * the keys, runs and rounds, so the swarm then runs the same way every time (fresh keys would
 * give every run other masks, and other key ranks); the keys are not what is under test. */
static void secure_init_as(swarm_t *s, int n, const char *topo, size_t P, size_t chunk, uint64_t seed, bool overlap)
{
    swarm_init(s, n, topo, overlap ? "dpsgd+overlap" : "dpsgd", P, chunk, seed, 1000);
    char err[RUMOR_ERR_LEN];
    for (int i = 0; i < n; i++) {
        uint8_t secret[RUMOR_KEY_LEN];
        for (int j = 0; j < RUMOR_KEY_LEN; j++) secret[j] = (uint8_t)(0x3c ^ (31 * i + 5 * j + 1));
        s->sk[i] = rumor_secret_key_from_seed(secret, err);
        CHECK_MSG(s->sk[i] != NULL, "%s", err);
    }
    qsort(s->sk, (size_t)n, sizeof s->sk[0], sk_cmp); /* rank i keeps key i's place */
    for (int i = 0; i < n; i++) {
        memcpy(s->key[i], rumor_secret_key_public(s->sk[i]), RUMOR_KEY_LEN);
        s->boot[i] = 0x5000 + (uint64_t)i;
        CHECK((s->sm[i] = rumor_secmix_new(s->sk[i], s->boot[i], 0x1234, err)) != NULL);
        rumor_gossip_destroy(&s->g[i]);
        rumor_gossip_config_t cfg = {.params = P, .layout = 0x1234, .chunk_params = chunk, .round_timeout_ms = 1000,
                                     .secure_mix = true, .boot = s->boot[i]};
        CHECK_RC(rumor_algo_parse(&cfg.algo, "dpsgd", err));
        cfg.algo.overlap = overlap;
        memcpy(cfg.self, s->key[i], RUMOR_KEY_LEN);
        s->g[i] = rumor_gossip_new(&cfg, s->topo, s->x[i], err);
        CHECK(s->g[i] != NULL);
    }
    for (int i = 0; i < n; i++)
        rumor_gossip_set_view_boots(s->g[i], (const uint8_t(*)[RUMOR_KEY_LEN])s->key, s->boot, (size_t)n);
    s->lose_from = -1;
}

/* Most tests below step the overlapped schedule by hand. */
static void secure_init(swarm_t *s, int n, const char *topo, size_t P, size_t chunk, uint64_t seed)
{
    secure_init_as(s, n, topo, P, chunk, seed, true);
}

/* D-PSGD's plain form (the default): masked sums give the same models as unmasked mixing to
 * fixed-point precision, every round finished at its own gossip point. */
static void test_secure_mix_plain(const char *topo, int n)
{
    const size_t P = 100, chunk = 32;
    swarm_t sec, pl;
    secure_init_as(&sec, n, topo, P, chunk, 9, false);
    swarm_init(&pl, n, topo, "dpsgd", P, chunk, 9, 1000);
    double worst = 0.0, moved = 0.0;
    for (int r = 0; r < 30; r++) {
        for (int i = 0; i < n; i++)
            for (size_t j = 0; j < P; j++) {
                const float d = (float)(0.01 * sin((double)(r * 31 + i * 7) + (double)j));
                sec.x[i][j] += d, pl.x[i][j] += d;
            }
        const float x00 = sec.x[0][0];
        CHECK(pass(&sec, 100 + (uint64_t)r));
        CHECK(pass(&pl, 100 + (uint64_t)r));
        moved = fmax(moved, fabs((double)sec.x[0][0] - x00));
        for (int i = 0; i < n; i++)
            for (size_t j = 0; j < P; j++) worst = fmax(worst, fabs((double)sec.x[i][j] - pl.x[i][j]));
    }
    CHECK_MSG(moved > 0.1 && worst > 0.0 && worst < 2e-5, "%s: secure mixing is %g from plain", topo, worst);
    rumor_gossip_stats_t st;
    rumor_gossip_stats(sec.g[0], &st);
    CHECK(st.chunks_unmixed == 0 && st.sends_unmasked == 0 && st.round == 30);
    swarm_fini(&sec);
    swarm_fini(&pl);
}

/* Secure mixing gives plain D-PSGD's models to fixed-point precision, round after round; a
 * lost chunk leaves that chunk unmixed at its receiver, and so does a sender that disagrees
 * on the set; plain and masked chunks do not mix; a receiver with one sender gets nothing. */
static void test_secure_mix(const char *topo, int n)
{
    const size_t P = 100, chunk = 32; /* chunks of 32, 32, 32, 4 */
    swarm_t sec, pl;
    secure_init(&sec, n, topo, P, chunk, 9);
    swarm_init(&pl, n, topo, "dpsgd+overlap", P, chunk, 9, 1000);
    pl.lose_from = -1;
    double worst = 0.0;
    for (int r = 0; r < 30; r++) {
        for (int i = 0; i < n; i++)
            for (size_t j = 0; j < P; j++) { /* identical local progress */
                const float d = (float)(0.01 * sin((double)(r * 31 + i * 7) + (double)j));
                sec.x[i][j] += d, pl.x[i][j] += d;
            }
        CHECK(pass(&sec, 100 + (uint64_t)r));
        CHECK(pass(&pl, 100 + (uint64_t)r));
        for (int i = 0; i < n; i++)
            for (size_t j = 0; j < P; j++) worst = fmax(worst, fabs((double)sec.x[i][j] - pl.x[i][j]));
    }
    CHECK_MSG(worst > 0.0 && worst < 2e-5, "%s: secure mixing is %g from plain", topo, worst);
    rumor_gossip_stats_t st;
    rumor_gossip_stats(sec.g[0], &st);
    CHECK(st.chunks_unmixed == 0 && st.sends_unmasked == 0 && st.round == 29);
    CHECK(st.bytes_in > 0 && st.drops[RUMOR_GOSSIP_DROP_MODE] == 0);

    /* One round with peer 1's chunk 1 to peer 0 lost: peer 0 keeps its own values there. */
    float before[100];
    sec.lose_from = 1, sec.lose_to = 0, sec.lose_chunk = 1;
    memcpy(before, sec.x[0], sizeof before);
    CHECK(pass(&sec, 200)); /* finishes the round whose sends pass() delivered last time ... */
    CHECK(pass(&pl, 200));
    memcpy(before, sec.x[0], sizeof before);
    for (int i = 0; i < n; i++) /* ... and this one finishes the round that lost the chunk */
        CHECK(rumor_gossip_step(sec.g[i], sec.x[i], 1300) == RUMOR_GOSSIP_DONE);
    for (size_t j = 32; j < 64; j++) CHECK(sec.x[0][j] == before[j]);
    bool moved = false;
    for (size_t j = 0; j < 32; j++) moved |= sec.x[0][j] != before[j];
    CHECK(moved);
    rumor_gossip_stats(sec.g[0], &st);
    CHECK(st.chunks_unmixed == 1 && st.last_missing == 1);
    for (int i = 0; i < n; i++) drain(&sec, i, 1300);

    /* A sender with another mix id: every chunk it sent stays unmixed at its receiver. */
    sec.wrong_mix = true;
    for (int i = 0; i < n; i++) {
        CHECK(rumor_gossip_step(sec.g[i], sec.x[i], 1400) == RUMOR_GOSSIP_DONE);
        drain(&sec, i, 1400);
    }
    for (int i = 0; i < n; i++) CHECK(rumor_gossip_step(sec.g[i], sec.x[i], 1500) == RUMOR_GOSSIP_DONE);
    uint64_t unmixed = 0;
    for (int i = 0; i < n; i++) {
        rumor_gossip_stats(sec.g[i], &st);
        unmixed += st.chunks_unmixed;
    }
    CHECK_MSG(unmixed == 1 + 4, "%s: %llu chunks unmixed", topo, (unsigned long long)unmixed);

    /* Peer 2 restarted (a new run) and peer 0 still knows its old one: where 0 and 2 share a
     * receiver, their masks do not cancel, and their mix ids say so. The receiver leaves those
     * chunks unmixed: no peer ever mixes noise, every parameter stays near the models (about
     * 3 +- 1 here; noise would be up to +-2048). Peers that never met the stale view mix on. */
    uint64_t stale[MAXN];
    memcpy(stale, sec.boot, sizeof stale);
    stale[2] ^= 0xdead;
    rumor_gossip_set_view_boots(sec.g[0], (const uint8_t(*)[RUMOR_KEY_LEN])sec.key, stale, (size_t)n);
    uint64_t unmixed_before = 0;
    for (int i = 0; i < n; i++) {
        rumor_gossip_stats(sec.g[i], &st);
        unmixed_before += st.chunks_unmixed;
    }
    sec.refusals_ok = true;
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < n; i++) {
            CHECK(rumor_gossip_step(sec.g[i], sec.x[i], 3000 + 2000 * (uint64_t)r) == RUMOR_GOSSIP_DONE);
            drain(&sec, i, 3000 + 2000 * (uint64_t)r);
        }
    for (int i = 0; i < n; i++) CHECK(rumor_gossip_step(sec.g[i], sec.x[i], 7000) == RUMOR_GOSSIP_DONE);
    double far = 0.0;
    unmixed = 0;
    for (int i = 0; i < n; i++) {
        for (size_t j = 0; j < P; j++) far = fmax(far, fabs((double)sec.x[i][j]));
        rumor_gossip_stats(sec.g[i], &st);
        unmixed += st.chunks_unmixed;
    }
    CHECK_MSG(far < 10.0, "%s: a stale run mixed noise in (a parameter at %g)", topo, far);
    CHECK_MSG(unmixed > unmixed_before, "%s: chunks with disagreeing runs were mixed", topo);

    /* Plain into secure, masked into plain: dropped and counted. */
    rumor_gossip_chunk_t h = {.round = rumor_gossip_round(sec.g[0]), .layout = 0x1234, .w = 0.3, .chunk = 0,
                              .chunks = 4, .off = 0, .n = 32};
    rumor_gossip_stats(sec.g[0], &st);
    const uint64_t mode_drops = st.drops[RUMOR_GOSSIP_DROP_MODE];
    CHECK(!rumor_gossip_on_chunk(sec.g[0], sec.key[1], &h, sec.x[1], 128, 1500));
    rumor_gossip_stats(sec.g[0], &st);
    CHECK(st.drops[RUMOR_GOSSIP_DROP_MODE] == mode_drops + 1);
    h.masked = true;
    h.round = rumor_gossip_round(pl.g[0]);
    CHECK(!rumor_gossip_on_chunk(pl.g[0], pl.key[1], &h, pl.x[1], 128, 1500));
    rumor_gossip_stats(pl.g[0], &st);
    CHECK(st.drops[RUMOR_GOSSIP_DROP_MODE] == 1);
    swarm_fini(&sec);
    swarm_fini(&pl);
}

/* Two peers: each would learn the other's model, so nothing is sent and nothing mixed; and
 * the settings secure mixing refuses. */
static void test_secure_mix_refusals(void)
{
    swarm_t s;
    secure_init(&s, 2, "complete", 40, 16, 3);
    float before[40];
    memcpy(before, s.x[0], sizeof before);
    for (int r = 0; r < 3; r++) CHECK(pass(&s, 10 + (uint64_t)r));
    CHECK(memcmp(before, s.x[0], sizeof before) == 0);
    rumor_gossip_stats_t st;
    rumor_gossip_stats(s.g[0], &st);
    CHECK(st.sends_unmasked == 3 && st.sends == 0 && st.chunks_unmixed == 0);
    char err[RUMOR_ERR_LEN];
    rumor_gossip_config_t cfg = {.params = 40, .layout = 1, .chunk_params = 16, .secure_mix = true};
    CHECK_RC(rumor_algo_parse(&cfg.algo, "sgp", err));
    CHECK(rumor_gossip_new(&cfg, s.topo, s.x[0], err) == NULL && strstr(err, "dpsgd"));
    CHECK_RC(rumor_algo_parse(&cfg.algo, "dpsgd", err));
    CHECK_RC(rumor_robust_parse(&cfg.robust, "clip", err));
    CHECK(rumor_gossip_new(&cfg, s.topo, s.x[0], err) == NULL && strstr(err, "robust"));
    CHECK_RC(rumor_robust_parse(&cfg.robust, "none", err));
    cfg.chunk_params = 10;
    CHECK(rumor_gossip_new(&cfg, s.topo, s.x[0], err) == NULL && strstr(err, "16"));
    swarm_fini(&s);
}

/* Secure mixing: one sender's model, 100 times its own, in every masked send. A receiver
 * cannot tell it apart, but the neighbourhood's mean it unmasks is implausible (about 34 times
 * its own scale) in every chunk: each of the hostile peer's receivers leaves all four chunks
 * unmixed and keeps its own model; the hostile peer, whose senders are honest, mixes. */
static void test_secure_mix_hostile(void)
{
    swarm_t s;
    secure_init(&s, 4, "complete", 100, 32, 9); /* chunks of 32, 32, 32, 4 */
    s.hostile = 3, s.hostile_scale = 100.0f;
    CHECK(pass(&s, 100)); /* round 0: every send delivered, peer 3's scaled */
    float before[4][100];
    for (int i = 0; i < 4; i++) memcpy(before[i], s.x[i], sizeof before[i]);
    CHECK(pass(&s, 101)); /* round 0 finishes */
    rumor_gossip_stats_t st;
    for (int i = 0; i < 3; i++) {
        CHECK(memcmp(before[i], s.x[i], sizeof before[i]) == 0);
        rumor_gossip_stats(s.g[i], &st);
        CHECK_MSG(st.chunks_unmixed == 4 && st.drops[RUMOR_GOSSIP_DROP_IMPLAUSIBLE] == 4, "peer %d: %llu unmixed", i,
                  (unsigned long long)st.chunks_unmixed);
        CHECK(loss_finite(s.x[i], 100));
    }
    CHECK(memcmp(before[3], s.x[3], sizeof before[3]) != 0);
    rumor_gossip_stats(s.g[3], &st);
    CHECK(st.chunks_unmixed == 0 && st.drops[RUMOR_GOSSIP_DROP_IMPLAUSIBLE] == 0);
    swarm_fini(&s);
}

int main(void)
{
    test_pure_gossip("dpsgd", "ring", 16, 257, 64, 30, 120);
    test_pure_gossip("dpsgd+overlap", "ring", 16, 257, 64, 30, 120);
    test_pure_gossip("dpsgd", "torus", 16, 257, 64, 5, 20);
    test_pure_gossip("dpsgd", "hypercube", 16, 100, 100, 3, 12);
    test_pure_gossip("dpsgd", "complete", 5, 70, 16, 0, 1);
    test_pure_gossip("dpsgd+overlap", "complete", 5, 70, 16, 0, 1);
    test_far_members();
    test_sites();
    test_places();
    test_secure_mix_plain("complete", 4);
    test_secure_mix_plain("ring", 5);
    test_secure_mix("complete", 4);
    test_secure_mix("ring", 5);
    test_secure_mix_refusals();
    test_secure_mix_hostile();
    return check_done();
}
