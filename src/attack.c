/* attack.c - poisoned models for robustness experiments (see attack.h). */
#include "attack.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

rumor_err_t rumor_attack_parse(rumor_attack_t *out, const char *spec, char err[RUMOR_ERR_LEN])
{
    memset(out, 0, sizeof *out);
    if (!spec || !*spec || strcmp(spec, "none") == 0) return RUMOR_OK;
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
    return rumor_fail(err, RUMOR_EINVAL, "--attack '%s': expected scale:K or noise:S (S > 0)", spec);
}

void rumor_attack_apply(const rumor_attack_t *a, const float *x, float *out, size_t n, rumor_rng_t *rng)
{
    switch (a->kind) {
    case RUMOR_ATTACK_NONE: memcpy(out, x, n * sizeof *out); break;
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
