/* faults.c - `rumor sim --faults SEED`: random faults drawn from a seed (sim.h). */
#include "sim.h"

#include "rng.h"

#include <string.h>

#define FAULT_STREAM 0x6661756c7473ULL /* "faults" */

void rumor_sim_faults(rumor_sim_config_t *c, uint64_t seed)
{
    rumor_rng_t rng;
    rumor_rng_init2(&rng, seed, FAULT_STREAM, 0);
    const int n = c->peers, down_max = n / 4 > 1 ? n / 4 : 1;
    const long R = c->rounds;
    c->faults = seed;
    /* Kills: each peer down for 1..20 rounds, back at least 20 rounds before the end. */
    struct {
        int peer;
        long from, to;
    } ep[8];
    int n_ep = 0;
    const int want = 1 + (int)rumor_rng_below(&rng, 4);
    for (int tries = 0; R >= 50 && n > 1 && n_ep < want && tries < 64 && c->n_events + 2 <= RUMOR_SIM_MAX_EVENTS; tries++) {
        const int p = (int)rumor_rng_below(&rng, (uint64_t)n);
        const long from = 5 + (long)rumor_rng_below(&rng, (uint64_t)(R - 45));
        const long to = from + 1 + (long)rumor_rng_below(&rng, 20);
        bool ok = p != c->byzantine;
        for (int k = 0; k < n_ep && ok; k++) ok = ep[k].peer != p || ep[k].to + 5 < from || to + 5 < ep[k].from;
        for (long r = from; r < to && ok; r++) { /* at most a quarter down at any round */
            int down = 1;
            for (int k = 0; k < n_ep; k++) down += ep[k].from <= r && r < ep[k].to;
            ok = down <= down_max;
        }
        if (!ok) continue;
        ep[n_ep].peer = p, ep[n_ep].from = from, ep[n_ep].to = to;
        n_ep++;
        c->events[c->n_events++] = (rumor_sim_event_t){.kind = RUMOR_SIM_KILL, .peer = p, .at_round = from};
        c->events[c->n_events++] = (rumor_sim_event_t){.kind = RUMOR_SIM_RESTART, .peer = p, .at_round = to};
    }
    if (c->straggler < 0 && n > 1 && rumor_rng_below(&rng, 2)) {
        c->straggler = (int)rumor_rng_below(&rng, (uint64_t)n);
        c->slowdown = 1.5 + 2.5 * rumor_rng_uniform(&rng);
    }
    if (c->loss == 0 && rumor_rng_below(&rng, 2)) {
        c->loss = 0.05 * rumor_rng_uniform(&rng);
        c->net_given = true;
    }
    if (strcmp(c->mode, "virtual") == 0 && n > 1 && R >= 30 && c->n_parts < RUMOR_SIM_MAX_PARTS &&
        rumor_rng_below(&rng, 2)) {
        const int size = 1 + (int)rumor_rng_below(&rng, (uint64_t)(n / 2 > 1 ? n / 2 : 1));
        const int lo = (int)rumor_rng_below(&rng, (uint64_t)(n - size + 1));
        const long from = 5 + (long)rumor_rng_below(&rng, (uint64_t)(R - 25));
        c->parts[c->n_parts++] = (rumor_sim_part_t){.from = from, .to = from + 1 + (long)rumor_rng_below(&rng, 3),
                                                       .lo = lo, .hi = lo + size};
    }
}
