/* soak.c - `rumor sim --soak N`: random faults, many times, each run checked (sim.h).
 *
 * One fault-free run first, with the same settings: the baseline. Then seeds 1..N, each the
 * same settings plus rumor_sim_faults(seed), in OUT/fault-free and OUT/seed-K. After every
 * run the invariants: the run itself ended without error (no peer crashed or exited non-zero
 * apart from the kills it injected: proc mode fails the run otherwise); every peer finished
 * (its metrics end at --rounds); in proc mode every checkpoint opens; the final models' spread
 * is at most twice the baseline's (its spread, or its last rounds' consensus when larger); on iid shards the mean final test accuracy is
 * within 1 point of the baseline's. A failing seed replays with --faults K (exactly, in
 * virtual mode).
 */
#include "sim.h"

#include "safetensors.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    double acc, consensus, apart;
    long rounds_min;
} outcome_t;

static double num(const cJSON *j, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* The outcome of the run in `out`, from its summary.json; false when it cannot be read. */
static bool read_outcome(const char *out, outcome_t *o)
{
    char path[700];
    snprintf(path, sizeof path, "%s/summary.json", out);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char buf[32768];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    cJSON *j = cJSON_Parse(buf);
    if (!j) return false;
    o->acc = num(j, "final_test_acc_mean");
    /* The final models' own distance (else the last rounds'). The baseline's is the larger of
     * the two: D-PSGD's final mix leaves a fault-free swarm closer than one round of local steps
     * puts peers apart, and a faulty run's peer whose last round found its neighbours gone ends
     * that far from them. */
    o->consensus = num(j, "model_spread");
    o->apart = num(j, "consensus");
    if (isnan(o->consensus)) o->consensus = o->apart;
    const double r = num(j, "rounds_done_min");
    o->rounds_min = isnan(r) ? -1 : (long)r;
    cJSON_Delete(j);
    return true;
}

/* One run of c (its own out); RUMOR_OK or the run's error in err. */
static rumor_err_t run_one(const rumor_sim_config_t *c, const char *exe, const atomic_bool *stop,
                           char err[RUMOR_ERR_LEN])
{
    return strcmp(c->mode, "virtual") == 0 ? rumor_sim_run_virtual(c, stop, err)
                                            : rumor_sim_run_proc(c, exe, stop, err);
}

/* The faults a seed drew, in a few words. */
static void describe(const rumor_sim_config_t *c, const rumor_sim_config_t *base, char *buf, size_t cap)
{
    size_t len = 0;
    int kills = 0;
    for (int e = base->n_events; e < c->n_events; e++) kills += c->events[e].kind == RUMOR_SIM_KILL;
    len += (size_t)snprintf(buf + len, cap - len, "%d kill%s", kills, kills == 1 ? "" : "s");
    if (c->straggler != base->straggler && len < cap)
        len += (size_t)snprintf(buf + len, cap - len, ", peer %d %.1fx slower", c->straggler, c->slowdown);
    if (c->loss != base->loss && len < cap) len += (size_t)snprintf(buf + len, cap - len, ", %.1f%% loss", 100 * c->loss);
    for (int k = base->n_parts; k < c->n_parts && len < cap; k++)
        len += (size_t)snprintf(buf + len, cap - len, ", peers %d..%d cut off at rounds %ld..%ld", c->parts[k].lo,
                                c->parts[k].hi - 1, c->parts[k].from, c->parts[k].to - 1);
}

/* The invariants of one faulted run against the baseline: the names of those that failed
 * ("finished", "checkpoint", "consensus", "accuracy"; none: "") in bad, what was measured in why. */
static void check(const rumor_sim_config_t *c, const outcome_t *base, char *bad, size_t bcap, char *why, size_t cap)
{
    outcome_t o;
    bad[0] = 0;
    if (!read_outcome(c->out, &o)) {
        snprintf(bad, bcap, "summary");
        snprintf(why, cap, "no readable summary.json");
        return;
    }
    size_t bl = 0, wl = 0;
#define BAD(name, ...)                                                                                        \
    do {                                                                                                      \
        bl += (size_t)snprintf(bad + bl, bl < bcap ? bcap - bl : 0, "%s%s", bl ? " " : "", name);            \
        wl += (size_t)snprintf(why + wl, wl < cap ? cap - wl : 0, "%s", wl ? "; " : "");                     \
        wl += (size_t)snprintf(why + wl, wl < cap ? cap - wl : 0, __VA_ARGS__);                              \
    } while (0)
    if (o.rounds_min != c->rounds) BAD("finished", "a peer ended at round %ld of %ld", o.rounds_min, c->rounds);
    if (strcmp(c->mode, "proc") == 0)
        for (int i = 0; i < c->peers; i++) {
            char path[700], e2[RUMOR_ERR_LEN];
            snprintf(path, sizeof path, "%s/peer-%03d/checkpoint.safetensors", c->out, i);
            rumor_st_file_t *f = rumor_st_open(path, e2);
            if (!f) {
                BAD("checkpoint", "peer %d's checkpoint does not open: %s", i, e2);
                break;
            }
            rumor_st_destroy(&f);
        }
    const double scale = base->apart > base->consensus ? base->apart : base->consensus;
    if (!(o.consensus <= 2.0 * scale + 1e-9))
        BAD("consensus", "final models' spread %.4g, more than twice the fault-free %.4g", o.consensus, scale);
    if (strcmp(c->partition, "iid") == 0 && !(o.acc >= base->acc - 0.01))
        BAD("accuracy", "mean final test accuracy %.4f, more than a point below the fault-free %.4f", o.acc, base->acc);
#undef BAD
    if (!bad[0])
        snprintf(why, cap, "accuracy %.4f (fault-free %.4f), spread %.4g (%.4g)", o.acc, base->acc, o.consensus,
                 scale);
}

int rumor_sim_soak(const rumor_sim_config_t *c, const char *exe, const atomic_bool *stop, char err[RUMOR_ERR_LEN])
{
    const double t0 = rumor_now();
    rumor_sim_config_t *base = malloc(sizeof *base), *run = malloc(sizeof *run);
    if (!base || !run) {
        free(base);
        free(run);
        rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        return 2;
    }
    *base = *c;
    base->soak = 0;
    base->faults = 0;
    base->plots = false;
    base->quiet = true;
    snprintf(base->out, sizeof base->out, "%.490s/fault-free", c->out);
    outcome_t ref;
    if (run_one(base, exe, stop, err) != RUMOR_OK || !read_outcome(base->out, &ref)) {
        free(base);
        free(run);
        return 2;
    }
    fprintf(stderr, "fault-free: accuracy %.4f, spread %.4g, last rounds apart %.4g (%.1f s)\n", ref.acc, ref.consensus,
            ref.apart, rumor_now() - t0);
    int passed = 0, failed = 0, first_failed = 0;
    for (int seed = c->soak_from; seed <= c->soak && !rumor_asked(stop); seed++) {
        *run = *base;
        snprintf(run->out, sizeof run->out, "%.490s/seed-%d", c->out, seed);
        rumor_sim_faults(run, (uint64_t)seed);
        char what[400], why[600], bad[64], e2[RUMOR_ERR_LEN];
        describe(run, base, what, sizeof what);
        const double t1 = rumor_now();
        if (rumor_settings_check(run, RUMOR_CMD_SIM, e2) != RUMOR_OK || run_one(run, exe, stop, e2) != RUMOR_OK) {
            snprintf(bad, sizeof bad, "run");
            snprintf(why, sizeof why, "the run failed: %s", e2);
        } else {
            check(run, &ref, bad, sizeof bad, why, sizeof why);
        }
        const bool ok = !bad[0];
        if (rumor_asked(stop)) break;
        fprintf(stderr, "seed %d: %s%s%s (%s; %s; %.1f s)\n", seed, ok ? "ok" : "FAILED [", bad, ok ? "" : "]", what,
                why, rumor_now() - t1);
        if (ok) {
            passed++;
        } else {
            failed++;
            if (!first_failed) first_failed = seed;
        }
    }
    printf("soak: %d seeds in %.0f s: %d passed, %d failed\n", passed + failed, rumor_now() - t0, passed, failed);
    if (failed)
        printf("replay one: the same command with --faults %d instead of --soak %d (runs in %s/seed-%d)\n",
               first_failed, c->soak, c->out, first_failed);
    free(base);
    free(run);
    return failed ? 1 : 0;
}
