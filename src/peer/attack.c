/* attack.c - poisoned models for robustness experiments (see attack.h). */
#include "attack.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

rumor_err_t rumor_attack_parse(rumor_attack_t *out, const char *spec, char err[RUMOR_ERR_LEN])
{
    memset(out, 0, sizeof *out);
    if (!spec || !*spec || strcmp(spec, "none") == 0) return RUMOR_OK;
    if (strcmp(spec, "relay-tamper") == 0 || strcmp(spec, "relay-forge") == 0 || strcmp(spec, "max") == 0) {
        out->kind = spec[0] == 'm' ? RUMOR_ATTACK_MAX : spec[6] == 't' ? RUMOR_ATTACK_RELAY_TAMPER : RUMOR_ATTACK_RELAY_FORGE;
        return RUMOR_OK;
    }
    if (strncmp(spec, "round:", 6) == 0 || strncmp(spec, "ahead:", 6) == 0) {
        char *end;
        errno = 0;
        const unsigned long long r = strtoull(spec + 6, &end, 10);
        if (end != spec + 6 && !*end && !errno && spec[6] != '-' && r >= 1 && r <= (1ULL << 53)) {
            out->kind = spec[0] == 'r' ? RUMOR_ATTACK_ROUND : RUMOR_ATTACK_AHEAD;
            out->value = (double)r;
            return RUMOR_OK;
        }
    }
    const bool scale = strncmp(spec, "scale:", 6) == 0, noise = strncmp(spec, "noise:", 6) == 0;
    if (scale || noise) {
        char *end;
        errno = 0;
        const double v = strtod(spec + 6, &end);
        if (end != spec + 6 && !*end && !errno && isfinite(v) && (scale || v > 0.0) && fabs(v) <= 1e6) {
            out->kind = scale ? RUMOR_ATTACK_SCALE : RUMOR_ATTACK_NOISE;
            out->value = v;
            return RUMOR_OK;
        }
    }
    return rumor_fail(err, RUMOR_EINVAL,
                      "--attack '%s': expected scale:K, noise:S (S > 0), max, round:R or ahead:K (1 <= R, K <= 2^53), "
                      "relay-tamper or relay-forge",
                      spec);
}

bool rumor_attack_poisons(const rumor_attack_t *a)
{
    return a->kind == RUMOR_ATTACK_SCALE || a->kind == RUMOR_ATTACK_NOISE || a->kind == RUMOR_ATTACK_MAX ||
           a->kind == RUMOR_ATTACK_ROUND || a->kind == RUMOR_ATTACK_AHEAD;
}

bool rumor_attack_changes_values(const rumor_attack_t *a)
{
    return a->kind == RUMOR_ATTACK_SCALE || a->kind == RUMOR_ATTACK_NOISE || a->kind == RUMOR_ATTACK_MAX;
}

uint64_t rumor_attack_round(const rumor_attack_t *a, uint64_t round)
{
    return a->kind == RUMOR_ATTACK_ROUND ? (uint64_t)a->value : a->kind == RUMOR_ATTACK_AHEAD ? round + (uint64_t)a->value : round;
}

void rumor_attack_apply(const rumor_attack_t *a, const float *x, float *out, size_t n, rumor_rng_t *rng)
{
    switch (a->kind) {
    case RUMOR_ATTACK_NONE:
    case RUMOR_ATTACK_ROUND:
    case RUMOR_ATTACK_AHEAD:
    case RUMOR_ATTACK_RELAY_TAMPER:
    case RUMOR_ATTACK_RELAY_FORGE: memcpy(out, x, n * sizeof *out); break;
    case RUMOR_ATTACK_MAX:
        for (size_t i = 0; i < n; i++) out[i] = FLT_MAX;
        break;
    case RUMOR_ATTACK_SCALE: {
        const float k = (float)a->value;
        for (size_t i = 0; i < n; i++) out[i] = k * x[i];
        break;
    }
    case RUMOR_ATTACK_NOISE:
        for (size_t i = 0; i < n; i++) out[i] = (float)(a->value * rumor_rng_normal(rng));
        break;
    }
}

rumor_err_t rumor_poison_init(rumor_poison_t *p, size_t n)
{
    memset(p, 0, sizeof *p);
    p->n = n;
    for (int k = 0; k < 2; k++)
        if (!(p->buf[k] = malloc(n * sizeof *p->buf[k]))) {
            rumor_poison_fini(p);
            return RUMOR_ENOMEM;
        }
    return RUMOR_OK;
}

void rumor_poison_fini(rumor_poison_t *p)
{
    free(p->buf[0]);
    free(p->buf[1]);
    memset(p, 0, sizeof *p);
}

const float *rumor_poison_get(rumor_poison_t *p, const rumor_attack_t *a, int snap, uint64_t round, const float *x,
                              rumor_rng_t *rng)
{
    if (!p->set[snap] || p->round[snap] != round) {
        rumor_attack_apply(a, x, p->buf[snap], p->n, rng);
        p->round[snap] = round;
        p->set[snap] = true;
    }
    return p->buf[snap];
}
