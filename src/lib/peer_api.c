/*
 * peer_api.c - librumor's peer (include/rumor.h): a caller's tensors in one flat buffer, and
 * the peer core driven by the caller's own training loop. The swarm half (node, engine, pulls,
 * finishing) is the one rumor node runs (src/peer/swarm.h); this file is argument checking,
 * the tensor table, the buffer, and the order of calls.
 */
#include "base.h"
#include "fileio.h"
#include "layout.h"
#include "safetensors.h"
#include "settings.h"
#include "swarm.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef enum {
    ST_OPEN,      /* tensors may be added */
    ST_COMMITTED, /* the buffer exists; start next */
    ST_JOINING,   /* started: the node runs, waiting for members */
    ST_RUNNING,   /* rounds */
    ST_FINISHED,  /* finish called: lingering until close */
    ST_CLOSED,
} state_t;

struct rumor_peer {
    pid_t pid;                 /* the process that opened it */
    state_t st;
    rumor_settings_t s;        /* the settings (pc's strings point into it) */
    rumor_peer_config_t pc;
    peer_t *sw;                /* the swarm half */
    char address[256];
    rumor_layout_t layout;
    uint64_t layout_id;
    float *buf;                /* total floats of the model, then as many of state (MIX_STATE) */
    size_t total;
    bool mix_state;
    float *final;              /* the model kept at finish, for late peers' pulls */
    atomic_bool interrupt;
    uint64_t join_from;        /* when start began waiting for members (ms) */
    bool phased;               /* rumor_peer_phase was called for the phase ahead */
    bool in_round;             /* a gossip point is open (EAGAIN returned inside it) */
    rumor_core_phase_t ph;
    long steps;                /* local steps taken, as the rounds said (metrics) */
    rumor_err_t close_rc;
    char close_err[RUMOR_ERR_LEN];
    /* rumor_peer_load: the engine's state to start from (read at start) */
    rumor_st_file_t *loaded;
    char loaded_path[1024];
    long loaded_k;
    uint64_t loaded_gr;
};

/* The common checks of a call on a peer: it exists, belongs to this process, and is not
 * closed. */
static rumor_err_t usable(const rumor_peer_t *p)
{
    char err[RUMOR_ERR_LEN];
    if (!p) return rumor_fail(err, RUMOR_EINVAL, "peer is NULL");
    if (p->pid != getpid())
        return rumor_fail(err, RUMOR_ESTATE, "this peer belongs to process %ld; a forked child (a DataLoader worker) "
                          "cannot use it: open a peer in the child, or use it only in the parent", (long)p->pid);
    if (p->st == ST_CLOSED) return rumor_fail(err, RUMOR_ECLOSED, "this peer is closed");
    return RUMOR_OK;
}

static uint64_t deadline(int timeout_ms)
{
    return timeout_ms < 0 ? 0 : rumor_now_ms() + (uint64_t)timeout_ms + (timeout_ms == 0);
}

/* The settings text, then the pairs, checked as a whole. */
static rumor_err_t read_settings(rumor_settings_t *s, const char *text, const char *const *pairs, char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc;
    rumor_settings_defaults(s, RUMOR_CMD_PEER);
    if (text && text[0] && (rc = rumor_settings_read(s, RUMOR_CMD_PEER, text, "settings", err)) != RUMOR_OK) return rc;
    for (int i = 0; pairs && pairs[i]; i += 2) {
        if (!pairs[i + 1]) return rumor_fail(err, RUMOR_EINVAL, "setting '%s' has no value (pairs end with NULL after a value)", pairs[i]);
        if ((rc = rumor_settings_set(s, RUMOR_CMD_PEER, pairs[i], pairs[i + 1], err)) != RUMOR_OK) return rc;
    }
    return rumor_settings_check(s, RUMOR_CMD_PEER, err);
}

RUMOR_API rumor_err_t rumor_peer_open(const char *settings, const char *const *pairs, rumor_peer_t **out)
{
    char err[RUMOR_ERR_LEN];
    if (!out) return rumor_fail(err, RUMOR_EINVAL, "out is NULL");
    *out = NULL;
    rumor_peer_t *p = calloc(1, sizeof *p);
    if (!p) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    p->pid = getpid();
    rumor_layout_init(&p->layout);
    rumor_err_t rc;
    if ((rc = read_settings(&p->s, settings, pairs, err)) != RUMOR_OK ||
        (rc = rumor_settings_peer(&p->s, RUMOR_CMD_PEER, &p->pc, NULL, 0, err)) != RUMOR_OK)
        goto fail;
    if (!(p->sw = swarm_new(&p->pc))) {
        rc = rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        goto fail;
    }
    if ((rc = swarm_open(p->sw, err)) != RUMOR_OK) goto fail;
    snprintf(p->address, sizeof p->address, "%s", swarm_address(p->sw));
    *out = p;
    return RUMOR_OK;
fail:
    rumor_peer_destroy(&p);
    char why[RUMOR_ERR_LEN];
    snprintf(why, sizeof why, "%s", err);
    return rumor_fail(err, rc, "%s", why); /* (this thread's message again, whatever destroy did) */
}

RUMOR_API const char *rumor_peer_address(const rumor_peer_t *p) { return p ? p->address : ""; }

RUMOR_API rumor_err_t rumor_peer_setting(const rumor_peer_t *p, const char *name, char **value)
{
    char err[RUMOR_ERR_LEN];
    if (!p || !name || !value) return rumor_fail(err, RUMOR_EINVAL, "setting: peer, name or value is NULL");
    *value = NULL;
    const rumor_setting_t *r = rumor_settings_find(RUMOR_CMD_PEER, name);
    if (!r) {
        rumor_settings_t scratch;
        rumor_settings_defaults(&scratch, RUMOR_CMD_PEER);
        return rumor_settings_set(&scratch, RUMOR_CMD_PEER, name, "", err); /* (its reason) */
    }
    char buf[8192] = "";
    if (r->type == RUMOR_SET_LIST) { /* (bootstrap: one a line) */
        size_t len = 0;
        for (int i = 0; i < p->s.n_bootstraps && len < sizeof buf; i++)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", i ? "\n" : "", p->s.bootstraps[i]);
    } else {
        rumor_settings_format(&p->s, r, buf, sizeof buf);
    }
    if (!(*value = strdup(buf))) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    return RUMOR_OK;
}

RUMOR_API rumor_err_t rumor_peer_add_tensor(rumor_peer_t *p, const char *name, int ndim, const int64_t *shape)
{
    char err[RUMOR_ERR_LEN];
    rumor_err_t rc = usable(p);
    if (rc != RUMOR_OK) return rc;
    if (p->st != ST_OPEN)
        return rumor_fail(err, RUMOR_ESTATE, "tensor '%s': the layout is fixed once committed; add every tensor "
                          "before rumor_peer_commit", name ? name : "(null)");
    if (!name) return rumor_fail(err, RUMOR_EINVAL, "a tensor's name is NULL");
    if (ndim < 0 || ndim > RUMOR_LAYOUT_MAX_DIMS || (ndim > 0 && !shape))
        return rumor_fail(err, RUMOR_EINVAL, "tensor '%s': %d dimensions; expected 0..%d with their sizes", name, ndim,
                          RUMOR_LAYOUT_MAX_DIMS);
    uint64_t dims[RUMOR_LAYOUT_MAX_DIMS];
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 1 || shape[i] > RUMOR_LAYOUT_MAX_DIM)
            return rumor_fail(err, RUMOR_EINVAL, "tensor '%s': dimension %d is %" PRId64 "; expected 1..%d (rumor mixes "
                              "no empty tensor)", name, i, shape[i], RUMOR_LAYOUT_MAX_DIM);
        dims[i] = (uint64_t)shape[i];
    }
    for (int i = 0; i < p->layout.n; i++)
        if (strcmp(p->layout.t[i].name, name) == 0)
            return rumor_fail(err, RUMOR_EINVAL, "tensor '%s' is registered already (tensor %d): names are unique", name, i);
    return rumor_layout_add(&p->layout, name, ndim, dims, err);
}

/* what failed half-way with rc (its sentence in err): nothing half-made is kept usable, the
 * peer is closed. */
static rumor_err_t closed_by(rumor_peer_t *p, rumor_err_t rc, const char *what, char err[RUMOR_ERR_LEN])
{
    char why[RUMOR_ERR_LEN];
    snprintf(why, sizeof why, "%s", err);
    (void)rumor_peer_close(p);
    return rumor_fail(err, rc, "%s failed, and the peer is closed (open another): %s", what, why);
}

RUMOR_API rumor_err_t rumor_peer_commit(rumor_peer_t *p, unsigned flags)
{
    char err[RUMOR_ERR_LEN];
    rumor_err_t rc = usable(p);
    if (rc != RUMOR_OK) return rc;
    if (p->st != ST_OPEN) return rumor_fail(err, RUMOR_ESTATE, "this peer's layout is committed already");
    if (flags & ~(unsigned)RUMOR_MIX_STATE) return rumor_fail(err, RUMOR_EINVAL, "commit: unknown flags 0x%x", flags);
    if (p->layout.n == 0) return rumor_fail(err, RUMOR_EINVAL, "commit: no tensor registered (rumor_peer_add_tensor)");
    p->mix_state = flags & RUMOR_MIX_STATE;
    if (p->mix_state) {
        rumor_robust_t rb;
        rumor_codec_t cd;
        if ((rc = rumor_robust_parse(&rb, p->s.robust, err)) != RUMOR_OK || (rc = rumor_codec_parse(&cd, p->s.codec, err)) != RUMOR_OK)
            return rc;
        if ((rc = rumor_gossip_check_modes(&p->pc.algo, &rb, p->s.secure_mix, &cd, p->s.consensus_step,
                                           "a mixed optimizer state (RUMOR_MIX_STATE)", err)) != RUMOR_OK)
            return rc;
    }
    p->total = (size_t)p->layout.total;
    const size_t floats = p->total * (p->mix_state ? 2 : 1);
    const size_t page = 4096, bytes = (floats * sizeof(float) + page - 1) / page * page;
    if (floats > ((size_t)1 << 36) || posix_memalign((void **)&p->buf, page, bytes) != 0) {
        p->buf = NULL;
        return rumor_fail(err, RUMOR_ENOMEM, "out of memory for %zu floats", floats);
    }
    memset(p->buf, 0, bytes);
    p->layout_id = rumor_layout_id(&p->layout);
    const size_t tl = rumor_layout_text(&p->layout, NULL, 0);
    char *text = malloc(tl + 1);
    if (text) {
        rumor_layout_text(&p->layout, text, tl + 1);
        rc = swarm_layout(p->sw, p->total, p->mix_state ? p->total : 0, p->layout_id, text, tl, err);
        free(text);
    } else {
        rc = rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    }
    if (rc != RUMOR_OK) { /* (half made: the peer is closed, its buffer handed to nobody) */
        free(p->buf);
        p->buf = NULL;
        return closed_by(p, rc, "commit", err);
    }
    p->st = ST_COMMITTED;
    return RUMOR_OK;
}

static rumor_err_t committed(const rumor_peer_t *p, bool closed_ok)
{
    char err[RUMOR_ERR_LEN];
    if (!p) return rumor_fail(err, RUMOR_EINVAL, "peer is NULL");
    if (p->st == ST_CLOSED && !closed_ok) return rumor_fail(err, RUMOR_ECLOSED, "this peer is closed");
    if (!p->buf || p->st == ST_OPEN) return rumor_fail(err, RUMOR_ESTATE, "no buffer before rumor_peer_commit");
    return RUMOR_OK;
}

RUMOR_API rumor_err_t rumor_peer_view(rumor_peer_t *p, int i, float **data, float **state)
{
    char err[RUMOR_ERR_LEN];
    rumor_err_t rc = committed(p, true);
    if (rc != RUMOR_OK) return rc;
    if (i < 0 || i >= p->layout.n) return rumor_fail(err, RUMOR_EINVAL, "no tensor %d (the peer has %d)", i, p->layout.n);
    if (data) *data = p->buf + p->layout.t[i].offset;
    if (state) *state = p->mix_state ? p->buf + p->total + p->layout.t[i].offset : NULL;
    return RUMOR_OK;
}

RUMOR_API rumor_err_t rumor_peer_buffer(rumor_peer_t *p, float **params, size_t *count)
{
    rumor_err_t rc = committed(p, true);
    if (rc != RUMOR_OK) return rc;
    if (params) *params = p->buf;
    if (count) *count = p->total;
    return RUMOR_OK;
}

RUMOR_API rumor_err_t rumor_peer_layout(const rumor_peer_t *p, uint64_t *id, char **text)
{
    char err[RUMOR_ERR_LEN];
    rumor_err_t rc = committed(p, true);
    if (rc != RUMOR_OK) return rc;
    if (id) *id = p->layout_id;
    if (!text) return RUMOR_OK;
    const size_t n = rumor_layout_text(&p->layout, NULL, 0) + 1;
    if (!(*text = malloc(n))) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    rumor_layout_text(&p->layout, *text, n);
    return RUMOR_OK;
}

/* The node ended on its own (a refusal, join-timeout, an error): the reason. */
static rumor_err_t ended(rumor_peer_t *p)
{
    char err[RUMOR_ERR_LEN];
    p->close_rc = swarm_stop_node(p->sw, p->close_err);
    p->st = ST_CLOSED;
    if (p->close_rc != RUMOR_OK) return rumor_fail(err, RUMOR_ECLOSED, "the peer's node ended: %s", p->close_err);
    return rumor_fail(err, RUMOR_ECLOSED, "the peer's node stopped");
}

/* Started: wait for min-peers members (of this layout), at most join-timeout. */
static rumor_err_t join_wait(rumor_peer_t *p, uint64_t until)
{
    char err[RUMOR_ERR_LEN];
    /* (a resumed peer waits only for two members, or one in a swarm of two, to ask where the
     * swarm is) */
    const int need = p->loaded_path[0] && p->pc.min_peers - 1 > 2 ? 2 : p->pc.min_peers - 1;
    const uint64_t limit = p->pc.node.join_timeout_ms ? p->pc.node.join_timeout_ms : 30000;
    for (;;) {
        const int view = swarm_members(p->sw);
        if (swarm_stopped(p->sw)) return ended(p);
        char why[RUMOR_ERR_LEN - 80];
        if (swarm_layout_mismatch(p->sw, why, sizeof why))
            return rumor_fail(err, RUMOR_ELAYOUT, "%s (it is left out; rumor_peer_start again waits for others)", why);
        if (view >= need) return RUMOR_OK;
        const uint64_t now = rumor_now_ms();
        if (now - p->join_from > limit) {
            rumor_log(RUMOR_LOG_WARN, "training with %d peers in view after %.0f s (min-peers %d)", view,
                      (double)limit / 1000.0, p->pc.min_peers);
            return RUMOR_OK;
        }
        if ((until && now >= until) || atomic_exchange(&p->interrupt, false))
            return rumor_fail(err, RUMOR_EAGAIN, "still waiting for %d peers (%d in view): call rumor_peer_start again",
                              need, view);
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* Start's first part: the engine from the buffer (and a loaded state), the metrics, the core,
 * the node's thread. */
static rumor_err_t start_swarm(rumor_peer_t *p, char err[RUMOR_ERR_LEN])
{
    rumor_err_t rc;
    if ((rc = swarm_engine(p->sw, p->buf, err)) != RUMOR_OK) return rc;
    if (p->loaded) { /* resumed: the saved engine state, at its round */
        rc = swarm_state_read(p->sw, p->loaded, p->loaded_path, p->loaded_gr, err);
        rumor_st_destroy(&p->loaded);
        if (rc != RUMOR_OK) return rc;
    }
    if ((rc = swarm_ready(p->sw, err)) != RUMOR_OK) return rc;
    if (p->s.run_dir[0]) { /* its metrics, as a node's (rumor sim reads them) */
        char path[RUMOR_SETTINGS_PATH + 32];
        snprintf(path, sizeof path, "%s/metrics.jsonl", p->s.run_dir);
        if ((rc = rumor_make_dirs(p->s.run_dir, 0755, err)) != RUMOR_OK ||
            (rc = swarm_metrics_open(p->sw, path, true, err)) != RUMOR_OK) /* (a restart goes on in it) */
            return rc;
    }
    swarm_core_init(p->sw, p->loaded_k);
    if ((rc = swarm_start_node(p->sw, err)) != RUMOR_OK) return rc;
    p->join_from = rumor_now_ms();
    p->st = ST_JOINING;
    return RUMOR_OK;
}

RUMOR_API rumor_err_t rumor_peer_start(rumor_peer_t *p, int timeout_ms, int *joined)
{
    char err[RUMOR_ERR_LEN];
    rumor_err_t rc = usable(p);
    if (rc != RUMOR_OK) return rc;
    if (joined) *joined = 0;
    if (p->st == ST_OPEN) return rumor_fail(err, RUMOR_ESTATE, "start: commit the layout first (rumor_peer_commit)");
    if (p->st > ST_JOINING) return rumor_fail(err, RUMOR_ESTATE, "this peer is started already");
    if (p->st == ST_COMMITTED && (rc = start_swarm(p, err)) != RUMOR_OK) return closed_by(p, rc, "start", err);
    if ((rc = join_wait(p, deadline(timeout_ms))) != RUMOR_OK) return rc;
    /* A fresh peer joining a running swarm, or a resumed one left behind: the swarm's model, if
     * two members confirm it (secure mixing never lends a model in the clear). */
    const bool resumed = p->loaded_path[0] != 0;
    if ((p->pc.late_join || resumed) && !p->pc.secure_mix && !swarm_over(p->sw, false)) {
        bool took;
        int answered;
        if ((rc = swarm_resync(p->sw, p->buf, resumed ? RUMOR_CORE_BEHIND : RUMOR_CORE_JOIN, &took, &answered, err)) !=
            RUMOR_OK)
            return rc;
        if (joined) *joined = took;
    }
    if (swarm_stopped(p->sw)) return ended(p);
    swarm_started(p->sw);
    p->st = ST_RUNNING;
    return RUMOR_OK;
}

static rumor_err_t running(rumor_peer_t *p, const char *what)
{
    char err[RUMOR_ERR_LEN];
    rumor_err_t rc = usable(p);
    if (rc != RUMOR_OK) return rc;
    if (p->st < ST_RUNNING) return rumor_fail(err, RUMOR_ESTATE, "%s: start the peer first (rumor_peer_start)", what);
    if (p->st == ST_FINISHED) return rumor_fail(err, RUMOR_ESTATE, "%s: this peer has finished", what);
    return RUMOR_OK;
}

RUMOR_API rumor_err_t rumor_peer_phase(rumor_peer_t *p, int64_t *steps, int64_t *first)
{
    rumor_err_t rc = running(p, "phase");
    if (rc != RUMOR_OK) return rc;
    if (!p->phased && !p->in_round) {
        swarm_phase(p->sw, &p->ph);
        p->phased = true;
    }
    if (steps) *steps = p->ph.count;
    if (first) *first = p->ph.first;
    return RUMOR_OK;
}

/* The round is mixed: what the core says follows, into io. */
static rumor_err_t after_mix(rumor_peer_t *p, rumor_round_t *io, double wait_s)
{
    char err[RUMOR_ERR_LEN];
    rumor_core_after_t after;
    swarm_mixed(p->sw, &after);
    rumor_core_t *core = swarm_core(p->sw);
    io->landed = after.landed;
    io->round = core->k;
    io->wait_s = wait_s;
    if (after.landed) return RUMOR_OK;
    rumor_gossip_stats_t st;
    swarm_stats(p->sw, &st);
    io->neighbours = st.last_peers;
    io->missing = st.last_missing;
    io->consensus = st.consensus;
    io->checkpoint_due = after.checkpoint;
    if (after.checkpoint) rumor_core_checkpointed(core, rumor_now());
    const bool evaluated = (io->evaluated == RUMOR_EVAL_TEST || io->evaluated == RUMOR_EVAL_VAL) &&
                           isfinite(io->test_loss) && isfinite(io->test_acc);
    const rumor_core_facts_t f = {.step = p->steps, .evaluated = evaluated, .text = io->evaluated == RUMOR_EVAL_VAL,
                                  .test_loss = io->test_loss, .test_acc = io->test_acc};
    swarm_round_line(p->sw, &f, wait_s);
    io->finished = after.finished;
    if (!after.finished && swarm_over(p->sw, true)) {
        bool took;
        rumor_err_t rc = swarm_finish_with(p->sw, p->buf, &took, err);
        if (rc != RUMOR_OK) return rc;
        io->replaced = took;
        io->finished = swarm_is_over(p->sw);
        if (took && rumor_settings_given(&p->s, "rounds")) core->k = p->pc.rounds; /* (its end is the swarm's) */
        if (took) swarm_model_line(p->sw, p->steps, "swarm_final", NULL, false);
        io->round = core->k;
    }
    return RUMOR_OK;
}

RUMOR_API rumor_err_t rumor_peer_round(rumor_peer_t *p, rumor_round_t *io, int timeout_ms)
{
    char err[RUMOR_ERR_LEN];
    rumor_err_t rc = running(p, "round");
    if (rc != RUMOR_OK) return rc;
    if (!io || io->size < sizeof(rumor_round_t))
        return rumor_fail(err, RUMOR_EINVAL, "round: io is NULL or its size is below %zu (RUMOR_ROUND_INIT)",
                          sizeof(rumor_round_t));
    const uint64_t t0 = rumor_now_ms();
    if (!p->in_round) {
        if (!p->phased) swarm_phase(p->sw, &p->ph);
        const rumor_trainer_stats_t ts = {.loss_sum = io->loss_sum, .samples = (long)io->samples,
                                          .steps = io->steps ? (long)io->steps : p->ph.count};
        rumor_core_stepped(swarm_core(p->sw), &ts);
        p->steps += ts.steps;
        swarm_gossip_point(p->sw);
        p->in_round = true;
        p->phased = false;
        io->wait_s = 0.0;
        io->landed = io->finished = io->replaced = io->checkpoint_due = 0;
    }
    char why[RUMOR_ERR_LEN - 80];
    if (swarm_core(p->sw)->k == 0 && swarm_layout_mismatch(p->sw, why, sizeof why)) /* (before the first mix only) */
        return rumor_fail(err, RUMOR_ELAYOUT, "%s (it is left out; rumor_peer_round again goes on)", why);
    const int done = swarm_gossip(p->sw, p->buf, deadline(timeout_ms), &p->interrupt);
    const double waited = io->wait_s + (double)(rumor_now_ms() - t0) / 1000.0;
    if (done < 0) return ended(p);
    if (done == 0) {
        io->wait_s = waited;
        atomic_store(&p->interrupt, false);
        return rumor_fail(err, RUMOR_EAGAIN, "the round is not mixed yet: call rumor_peer_round again");
    }
    p->in_round = false;
    return after_mix(p, io, waited);
}

static void meta_add(rumor_st_meta_t *meta, int *n, const char *key, const char *fmt, ...) RUMOR_PRINTF(4, 5);
static void meta_add(rumor_st_meta_t *meta, int *n, const char *key, const char *fmt, ...)
{
    snprintf(meta[*n].key, sizeof meta[*n].key, "%s", key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(meta[*n].value, sizeof meta[*n].value, fmt, ap);
    va_end(ap);
    (*n)++;
}

RUMOR_API rumor_err_t rumor_peer_save(rumor_peer_t *p, const char *path)
{
    char err[RUMOR_ERR_LEN];
    rumor_err_t rc = usable(p);
    if (rc != RUMOR_OK) return rc;
    if (!path) return rumor_fail(err, RUMOR_EINVAL, "save: path is NULL");
    if (p->st < ST_RUNNING) return rumor_fail(err, RUMOR_ESTATE, "save: start the peer first (rumor_peer_start)");
    if (p->in_round)
        return rumor_fail(err, RUMOR_ESTATE, "save: a gossip point is open (rumor_peer_round returned EAGAIN): save "
                          "between rounds");
    rumor_st_out_t t[3];
    size_t nt;
    float *w;
    uint64_t gr;
    if ((rc = swarm_state_tensors(p->sw, t, &nt, &w, &gr, err)) != RUMOR_OK) return rc;
    rumor_st_meta_t meta[64];
    int nm = 0;
    meta_add(meta, &nm, "rumor.peer", "%s", "the engine state of a library peer (rumor_peer_save)");
    meta_add(meta, &nm, "train.round", "%ld", swarm_core(p->sw)->k);
    meta_add(meta, &nm, "train.gossip_round", "%" PRIu64, gr);
    meta_add(meta, &nm, "train.layout", "%016" PRIx64, p->layout_id);
    meta_add(meta, &nm, "train.tensors", "%d", p->layout.n);
    nm += rumor_settings_record(&p->s, RUMOR_CMD_PEER, meta + nm, (int)RUMOR_ARRAY_LEN(meta) - nm);
    rc = rumor_st_write(path, t, nt, meta, (size_t)nm, err);
    free(w);
    return rc;
}

RUMOR_API rumor_err_t rumor_peer_load(rumor_peer_t *p, const char *path)
{
    char err[RUMOR_ERR_LEN];
    rumor_err_t rc = usable(p);
    if (rc != RUMOR_OK) return rc;
    if (!path) return rumor_fail(err, RUMOR_EINVAL, "load: path is NULL");
    if (p->st != ST_COMMITTED)
        return rumor_fail(err, RUMOR_ESTATE, "load: after rumor_peer_commit and before rumor_peer_start");
    rumor_st_file_t *f = rumor_st_open(path, err);
    if (!f) return rumor_last_error();
    const char *lay = rumor_st_meta(f, "train.layout"), *nt = rumor_st_meta(f, "train.tensors"),
               *k = rumor_st_meta(f, "train.round"), *gr = rumor_st_meta(f, "train.gossip_round");
    char mine[17];
    snprintf(mine, sizeof mine, "%016" PRIx64, p->layout_id);
    if (!lay || !nt || !k || !gr || !rumor_st_meta(f, "rumor.peer"))
        rc = rumor_fail(err, RUMOR_EFORMAT, "%s: not a file of rumor_peer_save (no train.layout)", path);
    else if (strcmp(lay, mine) != 0)
        rc = rumor_fail(err, RUMOR_ELAYOUT, "%s: saved by a peer of layout %s (%s tensors); this one's is %s (%d "
                        "tensors): register the same tensors, names and shapes, in the same order", path, lay, nt, mine,
                        p->layout.n);
    else
        rc = rumor_settings_fixed_same(&p->s, RUMOR_CMD_PEER, f, path, err);
    if (rc != RUMOR_OK) {
        rumor_st_destroy(&f);
        return rc;
    }
    rumor_st_destroy(&p->loaded);
    p->loaded = f;
    p->loaded_k = strtol(k, NULL, 10);
    p->loaded_gr = strtoull(gr, NULL, 10);
    snprintf(p->loaded_path, sizeof p->loaded_path, "%s", path);
    return RUMOR_OK;
}

RUMOR_API rumor_err_t rumor_peer_status(rumor_peer_t *p, char **json)
{
    char err[RUMOR_ERR_LEN];
    if (!json) return rumor_fail(err, RUMOR_EINVAL, "status: json is NULL");
    *json = NULL;
    rumor_err_t rc = usable(p);
    if (rc != RUMOR_OK) return rc;
    const size_t cap = 256 * 1024;
    char *buf = malloc(cap);
    if (!buf) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    if ((rc = swarm_status(p->sw, true, buf, cap, 2000, err)) != RUMOR_OK) {
        free(buf);
        return rc;
    }
    *json = buf;
    return RUMOR_OK;
}

RUMOR_API rumor_err_t rumor_peer_evaluated_as(rumor_peer_t *p, int kind, double loss, double acc)
{
    char err[RUMOR_ERR_LEN];
    rumor_err_t rc = usable(p);
    if (rc != RUMOR_OK) return rc;
    if (kind != RUMOR_EVAL_TEST && kind != RUMOR_EVAL_VAL)
        return rumor_fail(err, RUMOR_EINVAL, "evaluated: kind %d is neither RUMOR_EVAL_TEST (1) nor RUMOR_EVAL_VAL (2)",
                          kind);
    if (p->st < ST_RUNNING) return rumor_fail(err, RUMOR_ESTATE, "evaluated: start the peer first (rumor_peer_start)");
    if (p->in_round) return rumor_fail(err, RUMOR_ESTATE, "evaluated: a gossip point is open: between rounds only");
    const char *what = kind == RUMOR_EVAL_VAL ? "validation" : "test";
    if (!isfinite(loss) || !isfinite(acc))
        return rumor_fail(err, RUMOR_EINVAL, "evaluated: %s loss %g and accuracy %g must be finite", what, loss, acc);
    const double la[2] = {loss, acc};
    swarm_model_line(p->sw, p->steps, NULL, la, kind == RUMOR_EVAL_VAL);
    return RUMOR_OK;
}

RUMOR_API rumor_err_t rumor_peer_evaluated(rumor_peer_t *p, double test_loss, double test_acc)
{
    return rumor_peer_evaluated_as(p, RUMOR_EVAL_TEST, test_loss, test_acc);
}

RUMOR_API rumor_err_t rumor_peer_finish(rumor_peer_t *p)
{
    char err[RUMOR_ERR_LEN];
    rumor_err_t rc = usable(p);
    if (rc != RUMOR_OK) return rc;
    if (p->st == ST_FINISHED) return RUMOR_OK;
    if (p->st < ST_RUNNING) return rumor_fail(err, RUMOR_ESTATE, "finish: start the peer first (rumor_peer_start)");
    if (!(p->final = malloc(p->total * sizeof *p->final))) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    memcpy(p->final, p->buf, p->total * sizeof *p->final);
    swarm_set_final(p->sw, p->final);
    swarm_model_line(p->sw, p->steps, "finished", NULL, false); /* (rumor sim: this program's work is done) */
    p->in_round = false;
    p->st = ST_FINISHED;
    return RUMOR_OK;
}

RUMOR_API rumor_err_t rumor_peer_wait(rumor_peer_t *p, int timeout_ms)
{
    char err[RUMOR_ERR_LEN];
    rumor_err_t rc = usable(p);
    if (rc != RUMOR_OK) return rc;
    if (p->st != ST_FINISHED) return rumor_fail(err, RUMOR_ESTATE, "wait: finish the peer first (rumor_peer_finish)");
    if (swarm_linger(p->sw, deadline(timeout_ms), &p->interrupt)) return RUMOR_OK;
    atomic_store(&p->interrupt, false);
    return rumor_fail(err, RUMOR_EAGAIN, "members are still training: call rumor_peer_wait again, or close");
}

RUMOR_API void rumor_peer_interrupt(rumor_peer_t *p)
{
    if (p) atomic_store(&p->interrupt, true);
}

RUMOR_API rumor_err_t rumor_peer_close(rumor_peer_t *p)
{
    char err[RUMOR_ERR_LEN];
    if (!p) return rumor_fail(err, RUMOR_EINVAL, "peer is NULL");
    if (p->pid != getpid()) return usable(p);
    if (p->st == ST_CLOSED) return RUMOR_OK;
    p->st = ST_CLOSED;
    if (p->sw) p->close_rc = swarm_stop_node(p->sw, p->close_err);
    return p->close_rc == RUMOR_OK ? RUMOR_OK : rumor_fail(err, p->close_rc, "%s", p->close_err);
}

RUMOR_API void rumor_peer_destroy(rumor_peer_t **pp)
{
    if (!pp || !*pp) return;
    rumor_peer_t *p = *pp;
    *pp = NULL;
    if (p->pid != getpid()) return; /* a forked child: the parent's sockets are not its own */
    (void)rumor_peer_close(p);
    swarm_destroy(&p->sw);
    rumor_st_destroy(&p->loaded);
    rumor_layout_fini(&p->layout);
    free(p->buf);
    free(p->final);
    free(p);
}

RUMOR_API void rumor_free(void *q) { free(q); }
