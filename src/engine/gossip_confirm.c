/* gossip_confirm.c - two members' models that confirm each other (gossip.h). */
#include "gossip.h"

bool rumor_models_agree(const float *a, const float *b, size_t n, double rel)
{
    double d = 0.0, na = 0.0, nb = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double u = a[i], v = b[i];
        d += (u - v) * (u - v), na += u * u, nb += v * v;
    }
    return d <= rel * rel * (na > nb ? na : nb);
}

void rumor_confirm_init(rumor_confirm_t *c, size_t params)
{
    *c = (rumor_confirm_t){.params = params, .a = -1, .b = -1};
}

bool rumor_confirm_add(rumor_confirm_t *c, const float *x, uint64_t round)
{
    if (c->a >= 0) return true;
    if (c->n == RUMOR_RESYNC_ASKS) return false;
    const int n = c->n++;
    c->x[n] = x;
    c->round[n] = round;
    for (int k = 0; k < n; k++)
        if (rumor_models_agree(c->x[k], x, c->params, RUMOR_MODELS_AGREE)) {
            c->a = k, c->b = n;
            return true;
        }
    return false;
}

uint64_t rumor_confirm_mean(const rumor_confirm_t *c, float *out)
{
    const float *xa = c->x[c->a], *xb = c->x[c->b];
    for (size_t i = 0; i < c->params; i++) out[i] = 0.5f * (xa[i] + xb[i]);
    return c->round[c->a] < c->round[c->b] ? c->round[c->a] : c->round[c->b];
}
