/*
 * peer_layout.c - members that train another model (PROTOCOL.md "layout"): each member run
 * whose hello announces another layout is sent ours once; a text that comes back is parsed,
 * checked against its id, and its first difference from ours named once, in the log, in
 * status, and to a library peer's caller.
 */
#include "peer_impl.h"

#define LAYOUT_TRIES 50 /* sends tried a member run (a full or missing path: again next tick) */

void peer_layout_member(peer_t *p, rumor_node_t *node, const rumor_node_member_t *m)
{
    if (!p->layout_text) return;
    int i = 0;
    while (i < p->n_layout_sent && !(memcmp(p->layout_sent[i].key, m->key, 32) == 0 && p->layout_sent[i].boot == m->boot))
        i++;
    if (i == p->n_layout_sent) {
        if (i == MAX_VIEW) { /* (the oldest record goes: at worst a text is sent again) */
            memmove(p->layout_sent, p->layout_sent + 1, (MAX_VIEW - 1) * sizeof p->layout_sent[0]);
            i = MAX_VIEW - 1;
        } else {
            p->n_layout_sent++;
        }
        memcpy(p->layout_sent[i].key, m->key, 32);
        p->layout_sent[i].boot = m->boot;
        p->layout_sent[i].tries = 0;
    }
    struct layout_sent *s = &p->layout_sent[i];
    if (s->tries < 0 || s->tries >= LAYOUT_TRIES) return; /* sent (-1), or given up */
    s->tries++;
    if (rumor_node_send_layout(node, m->key, p->layout, p->layout_text, p->layout_text_len) == RUMOR_OK) s->tries = -1;
}

void peer_layout_cb(void *arg, const uint8_t peer[32], uint64_t layout, const char *text, size_t len)
{
    peer_t *p = arg;
    if (!p->layout_text || layout == p->layout) return;
    char id[RUMOR_SHORT_ID_LEN + 1], why[RUMOR_ERR_LEN], diff[RUMOR_ERR_LEN - 64];
    rumor_key_short_id(id, peer);
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->n_layout_heard; i++)
        if (memcmp(p->layout_heard[i].key, peer, 32) == 0 && p->layout_heard[i].layout == layout) {
            pthread_mutex_unlock(&p->mu);
            return; /* (said once a member and layout) */
        }
    pthread_mutex_unlock(&p->mu);
    rumor_layout_t theirs;
    rumor_layout_init(&theirs);
    if (rumor_layout_parse(&theirs, text, len, why) != RUMOR_OK || rumor_layout_id(&theirs) != layout) {
        rumor_log(RUMOR_LOG_WARN, "member %s sent a layout that is not its own id's: dropped", id);
        rumor_layout_fini(&theirs);
        return;
    }
    if (!rumor_layout_diff(&p->layout_ours, &theirs, diff, sizeof diff)) snprintf(diff, sizeof diff, "the same tensors");
    rumor_layout_fini(&theirs);
    pthread_mutex_lock(&p->mu);
    if (p->n_layout_heard == MAX_VIEW) {
        memmove(p->layout_heard, p->layout_heard + 1, (MAX_VIEW - 1) * sizeof p->layout_heard[0]);
        p->n_layout_heard--;
    }
    memcpy(p->layout_heard[p->n_layout_heard].key, peer, 32);
    p->layout_heard[p->n_layout_heard++].layout = layout;
    snprintf(p->layout_mismatch, sizeof p->layout_mismatch, "member %s trains another model: %s", id, diff);
    p->layout_reported = 0;
    pthread_mutex_unlock(&p->mu);
    rumor_log(RUMOR_LOG_ERROR, "member %s trains another model, and is left out: %s", id, diff);
}

bool swarm_layout_mismatch(peer_t *p, char *buf, size_t cap)
{
    pthread_mutex_lock(&p->mu);
    const bool news = p->layout_mismatch[0] && !p->layout_reported;
    if (news) snprintf(buf, cap, "%s", p->layout_mismatch);
    p->layout_reported = 1;
    pthread_mutex_unlock(&p->mu);
    return news;
}
