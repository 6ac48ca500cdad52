/*
 * replay.c - a proc-mode run's traces (src/peer/trace.h), read for virtual mode to replay: each
 * peer's key, the times of its gossip points, its views and the models that came in, on one
 * clock whose zero is the first peer's start.
 */
#include "virtual_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int hexval(int c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; }

static bool unhex(const char *h, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const int a = hexval((unsigned char)h[2 * i]), b = a < 0 ? -1 : hexval((unsigned char)h[2 * i + 1]);
        if (b < 0) return false;
        out[i] = (uint8_t)(a << 4 | b);
    }
    return h[2 * n] == 0 || h[2 * n] == ' ' || h[2 * n] == '\n';
}

/* The peer whose key begins with the 8 bytes of h (16 hex digits); -1: none. */
static int index_of16(const virt_replay_t *r, const char *h)
{
    uint8_t k[8];
    if (!unhex(h, k, 8)) return -1;
    for (int i = 0; i < r->n; i++)
        if (memcmp(r->keys[i], k, 8) == 0) return i;
    return -1;
}

static int by_from_round(const void *a, const void *b)
{
    const rarr_t *x = a, *y = b;
    if (x->from != y->from) return x->from < y->from ? -1 : 1;
    return x->round < y->round ? -1 : x->round > y->round;
}

static bool grow(void **v, int n, int *cap, size_t size)
{
    if (n < *cap) return true;
    const int c = *cap ? 2 * *cap : 64;
    void *nv = realloc(*v, (size_t)c * size);
    if (!nv) return false;
    *v = nv, *cap = c;
    return true;
}

/* Peer i's file: its key first (pass 0), then its events (pass 1, when every key is known). */
static rumor_err_t read_peer(virt_replay_t *r, int i, const char *path, int pass, char err[RUMOR_ERR_LEN])
{
    FILE *f = fopen(path, "r");
    if (!f) return rumor_fail(err, RUMOR_EIO, "--replay: %s: %s", path, strerror(errno));
    rpeer_t *p = &r->p[i];
    if (pass == 1) p->resync_k = -1;
    char line[8192], kind[16];
    int no = 0, cap_phase = 0, cap_view = 0, cap_arr = 0, cap_done = 0, cap_done2 = 0;
    rumor_err_t rc = RUMOR_OK;
    while (rc == RUMOR_OK && fgets(line, sizeof line, f)) {
        no++;
        uint64_t t = 0;
        int off = 0;
        if (no == 1) {
            if (sscanf(line, "self %n", &off) != 0 || off != 5 || !unhex(line + 5, r->keys[i], RUMOR_KEY_LEN))
                rc = rumor_fail(err, RUMOR_EFORMAT, "--replay: %s: not a trace (no self line)", path);
            else if (sscanf(line + 5 + 2 * RUMOR_KEY_LEN, " %" SCNx64, &r->places[i]) != 1)
                r->places[i] = 0; /* (a trace of virtual mode: key order) */
            if (pass == 0) break;
            continue;
        }
        if (pass == 0) break;
        if (sscanf(line, "%15s %" SCNu64 " %n", kind, &t, &off) != 2) {
            rc = rumor_fail(err, RUMOR_EFORMAT, "--replay: %s:%d: expected an event and its time", path, no);
            break;
        }
        const char *rest = line + off;
        if (strcmp(kind, "start") == 0) {
            p->start = t, p->has_start = true;
        } else if (strcmp(kind, "phase") == 0) {
            if (!grow((void **)&p->phase, p->n_phase, &cap_phase, sizeof *p->phase)) goto oom;
            p->phase[p->n_phase++] = t;
        } else if (strcmp(kind, "view") == 0) {
            int n = 0, used = 0;
            if (sscanf(rest, "%d%n", &n, &used) != 1 || n < 0 || n > r->n) {
                rc = rumor_fail(err, RUMOR_EFORMAT, "--replay: %s:%d: a view of no size", path, no);
                break;
            }
            if (!grow((void **)&p->view, p->n_view, &cap_view, sizeof *p->view)) goto oom;
            rview_t *v = &p->view[p->n_view];
            v->t = t, v->n = 0;
            if (!(v->idx = malloc((size_t)(n ? n : 1) * sizeof *v->idx))) goto oom;
            p->n_view++;
            rest += used;
            for (int k = 0; k < n; k++) {
                while (*rest == ' ') rest++;
                const int j = index_of16(r, rest);
                if (j < 0) {
                    rc = rumor_fail(err, RUMOR_EFORMAT, "--replay: %s:%d: a member of no trace of the run", path, no);
                    break;
                }
                v->idx[v->n++] = j;
                rest += 16;
            }
        } else if (strcmp(kind, "arrive") == 0) {
            char from[17];
            uint64_t round;
            uint32_t chunk;
            if (sscanf(rest, "%16s %" SCNu64 " %" SCNu32, from, &round, &chunk) != 3 || index_of16(r, from) < 0) {
                rc = rumor_fail(err, RUMOR_EFORMAT, "--replay: %s:%d: an arrival from no peer of the run", path, no);
                break;
            }
            if (!grow((void **)&p->arr, p->n_arr, &cap_arr, sizeof *p->arr)) goto oom;
            p->arr[p->n_arr++] = (rarr_t){.from = index_of16(r, from), .round = round, .t = t};
        } else if (strcmp(kind, "resync") == 0) {
            if (sscanf(rest, "%" SCNu64 " %ld", &p->resync_round, &p->resync_k) != 2 || p->resync_k < 0) {
                rc = rumor_fail(err, RUMOR_EFORMAT, "--replay: %s:%d: a resync of no round", path, no);
                break;
            }
            if (p->has_start) {
                rc = rumor_fail(err, RUMOR_EFORMAT, "--replay: %s:%d: a resumed peer (replayed: a swarm's start)", path, no);
                break;
            }
        } else if (strcmp(kind, "done") == 0) {
            int d;
            if (sscanf(rest, "%d", &d) != 1 || d < 0 || d > r->n) {
                rc = rumor_fail(err, RUMOR_EFORMAT, "--replay: %s:%d: finished members out of range", path, no);
                break;
            }
            if (!grow((void **)&p->done_t, p->n_done, &cap_done, sizeof *p->done_t) ||
                !grow((void **)&p->done_n, p->n_done, &cap_done2, sizeof *p->done_n))
                goto oom;
            p->done_t[p->n_done] = t, p->done_n[p->n_done++] = d;
        } /* send, mix, eval, ckpt, end: what the replay is compared with, not what it takes */
    }
    fclose(f);
    return rc;
oom:
    fclose(f);
    return rumor_fail(err, RUMOR_ENOMEM, "--replay: out of memory");
}

rumor_err_t virt_replay_load(virt_replay_t *r, const char *dir, int n, char err[RUMOR_ERR_LEN])
{
    memset(r, 0, sizeof *r);
    if (!(r->keys = calloc((size_t)n, sizeof *r->keys)) || !(r->places = calloc((size_t)n, sizeof *r->places)) ||
        !(r->p = calloc((size_t)n, sizeof *r->p)))
        return rumor_fail(err, RUMOR_ENOMEM, "--replay: out of memory");
    r->n = n;
    char path[1200];
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++) {
            snprintf(path, sizeof path, "%s/peer-%03d/trace", dir, i);
            const rumor_err_t rc = read_peer(r, i, path, pass, err);
            if (rc != RUMOR_OK) return rc;
        }
    /* Zero: the first start. Arrivals: one per model, at its last chunk (the engine mixes a
     * model whole in virtual mode), in (sender, round) order for the lookup. */
    uint64_t t0 = UINT64_MAX;
    for (int i = 0; i < n; i++) {
        if (!r->p[i].has_start)
            return rumor_fail(err, RUMOR_EFORMAT, "--replay: %s/peer-%03d/trace: the peer never started training", dir, i);
        if (r->p[i].start < t0) t0 = r->p[i].start;
    }
    for (int i = 0; i < n; i++) {
        rpeer_t *p = &r->p[i];
        p->start -= t0;
        for (int k = 0; k < p->n_phase; k++) p->phase[k] = p->phase[k] > t0 ? p->phase[k] - t0 : 0;
        for (int k = 0; k < p->n_view; k++) p->view[k].t = p->view[k].t > t0 ? p->view[k].t - t0 : 0;
        for (int k = 0; k < p->n_arr; k++) p->arr[k].t = p->arr[k].t > t0 ? p->arr[k].t - t0 : 0;
        for (int k = 0; k < p->n_done; k++) p->done_t[k] = p->done_t[k] > t0 ? p->done_t[k] - t0 : 0;
        qsort(p->arr, (size_t)p->n_arr, sizeof *p->arr, by_from_round);
        int m = 0;
        for (int k = 0; k < p->n_arr; k++) {
            if (m > 0 && p->arr[m - 1].from == p->arr[k].from && p->arr[m - 1].round == p->arr[k].round) {
                if (p->arr[k].t > p->arr[m - 1].t) p->arr[m - 1].t = p->arr[k].t;
                continue;
            }
            p->arr[m++] = p->arr[k];
        }
        p->n_arr = m;
    }
    return RUMOR_OK;
}

void virt_replay_free(virt_replay_t *r)
{
    if (r->p)
        for (int i = 0; i < r->n; i++) {
            for (int k = 0; k < r->p[i].n_view; k++) free(r->p[i].view[k].idx);
            free(r->p[i].view), free(r->p[i].phase), free(r->p[i].arr), free(r->p[i].done_t), free(r->p[i].done_n);
        }
    free(r->p), free(r->keys), free(r->places);
    memset(r, 0, sizeof *r);
}

int virt_replay_index(const virt_replay_t *r, const uint8_t key[RUMOR_KEY_LEN])
{
    for (int i = 0; i < r->n; i++)
        if (memcmp(r->keys[i], key, RUMOR_KEY_LEN) == 0) return i;
    return -1;
}

bool virt_replay_arrival(const virt_replay_t *r, int to, int from, uint64_t round, uint64_t *t)
{
    const rpeer_t *p = &r->p[to];
    const rarr_t want = {.from = from, .round = round};
    const rarr_t *a = bsearch(&want, p->arr, (size_t)p->n_arr, sizeof *p->arr, by_from_round);
    if (!a) return false;
    *t = a->t;
    return true;
}

uint64_t virt_replay_phase_end(virt_replay_t *r, int i, bool *known)
{
    rpeer_t *p = &r->p[i];
    *known = p->next_phase < p->n_phase;
    return *known ? p->phase[p->next_phase++] : 0;
}
