/*
 * virtual.c - `rumor sim --mode virtual`: a whole swarm in one process, on a virtual clock.
 *
 * What is real and what is simulated. Every peer is a real trainer (its own model, optimizer
 * and data shard, the local steps of `rumor node` with the same epoch shuffle) and a real
 * gossip engine (src/gossip.h, the code a node runs); only time and the network are
 * simulated. A discrete-event loop advances a virtual clock from event to event:
 *   phase    a peer has done its local steps: they are computed (for real) and the peer
 *            reaches its gossip point (rumor_gossip_step);
 *   retry    a gossip point that returned WAIT reaches rumor_gossip_deadline();
 *   arrive   a model message reaches its receiver: its chunks go into the receiver's engine
 *            (rumor_gossip_on_chunk) and the sender's snapshot is released;
 *   churn    a kill or restart from the configuration's events, at a time.
 * Churn at a round (the slowest live peer's) fires when that round is reached. A WAIT is
 * retried at its deadline and whenever something may end it: a chunk for that peer, or the
 * release of one of its sends (the engine waits for a free snapshot).
 *
 * Virtual time. A phase of H local steps lasts H * step_ms (times `slowdown` for the
 * straggler). With step_ms = 0 the time of a step is derived from the model's flop count
 * (rumor_model_flops, forward and backward, times the batch) at a nominal 10 GFLOP/s,
 * rather than measured (sim.h's "0: measured"): a measurement would make the run depend on
 * the machine and its load, and a virtual run must be a function of its configuration alone.
 * logreg at batch 64 gets 0.2 ms a step, mlp:256,128 6.5 ms.
 *
 * The network. A message leaves when the sender's uplink is free (a peer sends one message
 * at a time at bandwidth_mbps; 0 is infinite), and arrives latency_ms after it has left:
 * arrival = departure + bytes * 8 / bandwidth + latency. All chunks of a message arrive
 * together. A message is lost with probability `loss`, drawn in event order from a seeded
 * stream. Payloads are never copied: a message points at the sender's snapshot, which the
 * engine keeps until the message is released at its arrival (delivered or dropped). So memory
 * is bounded by the engine's two snapshots per peer, and a send completes on delivery, as
 * with an acknowledged transport; a peer cannot run more than a round ahead of its own
 * messages.
 *
 * Membership. Every peer runs the membership state machine of `rumor node` (src/membership.h,
 * with the period and suspicion time proc mode gives its nodes): its messages travel the same
 * emulated network (latency and loss, not bandwidth: they are small), its timers are events.
 * Peers join through peer 0, as in proc mode, and start training once their view holds
 * everyone (or view_size members), or after JOIN_WAIT of virtual time. An engine's view is its
 * peer's membership view and itself, given to it at the next gossip point after a change (the
 * engine reads its view only when a round starts). So a killed peer is noticed as a node
 * notices it, by failed probes and suspicion, rounds waiting for it up to their deadline
 * meanwhile; a finished peer leaves (bye) and is dropped at once. Membership is not
 * certificate-checked here: every message comes from a peer of the simulation. Keys are 32
 * bytes, the peer index big-endian in the first four, so sorted keys give rank = index.
 *
 * Churn. A killed peer stops: its phase in progress is lost, its messages in flight are
 * dropped, and messages for it are dropped on arrival. When the run restarts peers, each keeps
 * a checkpoint every CKPT_EVERY rounds (in memory: parameters, optimizer, the engine's round
 * and weights, DiLoCo's outer state, DP steps), as `rumor sim` has its nodes write one; a
 * restarted peer goes on from its last one with a new engine and its metrics cut back to it,
 * losing the rounds since, as a restarted node does. "N%" picks that share of all peers (rounded, at least one) among the live
 * ones (kill) or the killed ones (restart), from a seeded stream.
 *
 * Sharing. The datasets are loaded once. Each peer keeps its shard normalised as floats (the
 * inputs rumor_train_load_batch would make, computed once: every sample belongs to one peer,
 * so this is the training set once, 4 bytes a pixel, and a step copies its batch from a
 * shard that stays in cache instead of converting pixels again). One CPU backend with one
 * thread serves all models (single thread: the same configuration gives the same bits).
 * One topology object serves all engines: topologies are pure functions of (spec, seed, n,
 * round), so sharing it equals each peer holding its own, and since peers move through
 * rounds together its cache of the last round built is mostly hit. Evaluation uses one
 * extra model (the peer's parameters are copied in; the CPU backend's memory is host
 * memory) over a test set normalised once.
 *
 * Determinism: one thread (`threads` is for proc mode; here OpenBLAS runs one thread too, as
 * the summation order depends on it), every random draw from rumor_rng streams of the seed
 * (DP-SGD's batches and noise from a seeded rumor_noise stream: replayable, so protecting
 * nothing, as summary.json says), events
 * ordered by (time, insertion sequence), no wall-clock value in any file. The real clock is
 * read only to pace the live status display.
 */
#include "sim.h"

#include "fileio.h"

#include "attack.h"
#include "backend.h"
#include "codec.h"
#include "data.h"
#include "dp.h"
#include "gossip.h"
#include "membership.h"
#include "model.h"
#include "optim.h"
#include "rng.h"
#include "topology.h"
#include "train.h"
#include "trainer.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOSS_STREAM 0x7673696d6c6f7373ULL  /* "vsimloss" */
#define CHURN_STREAM 0x7673696d6368726eULL /* "vsimchrn" */
#define MEMB_STREAM 0x7673696d6d656d62ULL  /* "vsimmemb": membership message loss */
#define MEMB_PERIOD_MS 500                 /* as proc mode's nodes (sim/proc.c) */
#define MEMB_SUSPECT_MS 2000
#define JOIN_WAIT_US 30000000ULL           /* a peer trains after this long even with a thin view */
#define JOIN_QUIET 4                       /* ... or when its view has not changed for this many periods */
#define NOMINAL_FLOPS 10e9                 /* virtual compute speed when step_ms is 0 */
#define EVAL_SUBSET 2000                   /* test images evaluated on ... */
#define EVAL_SUBSET_ABOVE 64               /* ... when the swarm has more peers than this */
#define EVAL_BATCH_CNN 500                 /* a CNN's workspace grows fast with the batch */
#define PROGRESS_EVENTS 256                /* events between looks at the real clock */
#define PROGRESS_S 0.5                     /* real seconds between status displays, per ... */
#define PROGRESS_PEERS 256                 /* ... this many peers: reading every peer's metrics
                                              file costs time, about 4% of a 1024-peer run at
                                              one display per 2 s */
#define METRICS_FLUSH (64 * 1024)          /* a peer's buffered metrics go to its file beyond this */

// ---- the event queue: a binary heap ordered by (time, insertion sequence) ----

typedef enum { EV_PHASE, EV_RETRY, EV_ARRIVE, EV_CHURN, EV_MTICK, EV_MMSG } ev_kind_t;

typedef struct {
    uint64_t t;   /* virtual microseconds */
    uint64_t seq; /* insertion order: equal times pop in the order they were pushed */
    int kind;
    int a;        /* phase, retry, mtick: the peer; arrive, mmsg: the message; churn: the event */
    uint32_t b;   /* phase, retry, mtick: the peer's incarnation when scheduled */
} event_t;

typedef struct {
    event_t *v;
    size_t n, cap;
    uint64_t seq;
} heap_t;

static bool ev_less(const event_t *x, const event_t *y) { return x->t < y->t || (x->t == y->t && x->seq < y->seq); }

static rumor_err_t heap_push(heap_t *h, uint64_t t, int kind, int a, uint32_t b)
{
    if (h->n == h->cap) {
        const size_t cap = h->cap ? 2 * h->cap : 1024;
        event_t *v = realloc(h->v, cap * sizeof *v);
        if (!v) return RUMOR_ENOMEM;
        h->v = v, h->cap = cap;
    }
    event_t e = {.t = t, .seq = h->seq++, .kind = kind, .a = a, .b = b};
    size_t i = h->n++;
    while (i > 0) {
        const size_t up = (i - 1) / 2;
        if (!ev_less(&e, &h->v[up])) break;
        h->v[i] = h->v[up];
        i = up;
    }
    h->v[i] = e;
    return RUMOR_OK;
}

static event_t heap_pop(heap_t *h)
{
    const event_t top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && ev_less(&h->v[c + 1], &h->v[c])) c++;
        if (!ev_less(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n > 0) h->v[i] = last;
    return top;
}

// ---- peers, messages, the whole simulation ----

typedef enum { P_COMPUTING, P_WAITING, P_FINISHED, P_DEAD, P_JOINING } pstate_t;

#define CKPT_EVERY 10 /* rounds between a peer's checkpoints when the run restarts peers (as proc's) */

/* What a peer's checkpoint file would hold (src/peer.c save_checkpoint), kept in memory: a
 * restarted peer goes on from here, as a restarted node goes on from its file. */
typedef struct {
    bool has;
    long k;
    uint64_t round;          /* the engine's */
    double *w;               /* its push-sum weights, per chunk */
    float *x;                /* parameters */
    float *opt;              /* optimizer state buffers, one after another */
    long steps;
    float *theta, *mom;      /* diloco */
    uint64_t dp_steps;
    size_t mbytes;           /* metrics written up to it */
} vckpt_t;

typedef struct {
    rumor_model_t *m;        /* max_batch = the training batch */
    rumor_optim_t *o;
    rumor_gossip_t *g;
    uint8_t key[RUMOR_KEY_LEN];
    size_t n_own;            /* samples in this peer's shard */
    rumor_trainer_t *tr;     /* its local steps, over its shard (NULL: it owns none) */
    pstate_t state, before_kill;
    uint32_t inc;            /* incarnation: bumped by kill and restart, stale events are skipped */
    long k;                  /* gossip rounds done */
    long sched_k;            /* the round its schedule is at in its phase (rumor_gossip_schedule_round) */
    uint64_t retry_ms;       /* deadline of the pending retry event (0: none) */
    uint64_t link_free_us;   /* when the uplink is free again */
    uint64_t bytes_out;
    rumor_memb_t *memb;      /* its membership state machine */
    uint8_t (*vkeys)[RUMOR_KEY_LEN]; /* its engine's view: itself and its members */
    uint64_t *vboots;                       /* ... and their boot ids (vboot) */
    bool view_dirty;         /* the membership view changed since the engine got it */
    int view_peers;          /* members in that view (with itself) */
    uint64_t mtick_us;       /* when its pending membership tick fires (0: none) */
    uint64_t view_changed_us;/* the last change of its membership view */
    rumor_dp_t *dp;        /* DP-SGD (--dp), for peers that own samples */
    bool budget_spent;       /* its privacy budget is spent: it stops at the end of the round */
    float *coded[2];         /* --codec: each snapshot as its receivers decode it */
    uint64_t coded_round[2];
    bool coded_set[2];
    uint64_t coded_bytes[2]; /* its size on the wire */
    rumor_poison_t poison;   /* the Byzantine peer: what it sends instead of each snapshot */
    rumor_secret_key_t *mkey;/* --secure-mix: its X25519 key for masks (identities here are indices) */
    rumor_secmix_t *sm;
    double loss_sum;         /* the last phase's summed loss and sample count */
    long loss_count;
    float lr;
    char *mbuf;              /* metrics lines not yet written to the file */
    size_t mlen, mcap;
    size_t mflushed;         /* bytes of metrics in the file */
    rumor_gossip_config_t gc;/* its engine's configuration: a restart makes a new engine */
    vckpt_t ckpt;
    rumor_gossip_t **old_g;  /* engines of earlier lives, kept until their sends are released */
    int n_old_g, restarts;
    uint64_t join_from_us;   /* when it began to join (at the start, or its restart) */
    int want_view;           /* members it waits for before it trains */
    bool resumed;            /* restarted from its checkpoint: it resyncs before it trains */
    /* its local phase as a job for the second core (see ensure_phase) */
    int job;                 /* JOB_NONE, JOB_QUEUED, JOB_RUNNING, JOB_DONE */
    rumor_err_t job_rc;
    char job_err[RUMOR_ERR_LEN];
} vpeer_t;

enum { JOB_NONE, JOB_QUEUED, JOB_RUNNING, JOB_DONE };

typedef struct {
    int from, to;
    uint32_t from_inc;       /* the sender's incarnation at send time: a kill drops the message */
    rumor_gossip_t *g;       /* the engine that lent it (a restart makes a new one) */
    int next_free;
    rumor_gossip_send_t s;   /* params points into the sender's snapshot until released */
} msg_t;

/* A membership message in flight, packed: the fixed fields, then the strings and updates it
 * uses (a rumor_memb_msg_t is 24 KB with all its arrays; most messages are pings and byes). */
typedef struct {
    int from, to;
    uint32_t from_inc;
    uint8_t data[];
} mmsg_t;

typedef struct {
    rumor_memb_kind_t kind;
    uint32_t seq, inc, ack;
    bool has_target;
    uint8_t target[RUMOR_KEY_LEN];
    int n_upd, n_peers;
} mhead_t;

typedef struct {
    const rumor_sim_config_t *c;
    int n;
    long H;                  /* local steps per round */
    long total_steps;        /* for the schedule: rounds * H */
    rumor_schedule_t sched;
    rumor_optim_config_t opt;
    uint64_t step_us, latency_us;
    rumor_dataset_t train, test;
    float mean, std;
    rumor_backend_t *be;
    rumor_topology_t *topo;
    vpeer_t *p;
    /* evaluation */
    rumor_model_t *em;
    size_t n_eval, eval_batch;
    float *evx;              /* n_eval normalised test images (NULL when loaded once into em) */
    uint8_t *evy;
    double test_loss, test_acc;  /* of the parameters in em, when evaluated */
    bool evaluated;
    /* events and messages */
    heap_t q;
    msg_t *msgs;
    int n_msgs, cap_msgs, free_msg;
    rumor_rng_t loss_rng;
    /* membership */
    rumor_memb_config_t mcfg;
    int want_view;           /* members a joining peer waits for */
    bool seeded;             /* the swarm starts formed (see setup) */
    rumor_memb_action_t *act;
    rumor_memb_msg_t *mscratch; /* the message being delivered, unpacked */
    mmsg_t **mm;             /* membership messages in flight, and free slots */
    int n_mm, cap_mm, *mm_free, n_mm_free;
    rumor_rng_t mloss_rng;
    rumor_robust_t robust;
    rumor_attack_t attack;
    rumor_codec_t codec;
    uint8_t *enc;            /* one encoded chunk, on its way to being decoded */
    uint8_t *masked;         /* --secure-mix: one masked chunk, on its way to its receiver */
    rumor_rng_t attack_rng;
    /* who is there */
    bool *alive;             /* not killed (for the status display and churn) */
    int n_alive;
    long *at_round;          /* live peers per rounds done, 0..rounds */
    long round_min;          /* the slowest live peer's rounds done */
    long round_top;          /* the furthest peer's rounds done (partitions) */
    int *round_ev;           /* churn events at a round, by (round, index) */
    int churn_pending;       /* churn events at a time not yet fired */
    uint64_t progress_us;    /* the last local phase or round that ended */
    uint64_t done_check_us;  /* when the loop next looks whether the run is over */
    int n_round_ev, next_round_ev;
    bool restarts;           /* some event restarts peers: they keep checkpoints */
    /* run */
    uint64_t now_us, end_us;
    uint64_t events;
    rumor_err_t rc;          /* first error inside an event handler */
    char err[RUMOR_ERR_LEN];
    /* A worker thread runs local phases queued at their start while this thread handles
     * events. A phase touches only its own peer's model, optimizer and shard, and its result
     * is needed only at its end event, so the results, and the run, are the same whichever
     * thread computes them and when: still deterministic. */
    pthread_t worker;
    bool worker_on, quit;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int *queue;              /* ring of peer indices, capacity q_cap */
    int q_head, q_count, q_cap;
    uint64_t phases_worker, phases_main; /* who computed how many (shown at the end) */
} sim_t;

static rumor_err_t fail(sim_t *s, rumor_err_t rc, const char *fmt, ...) RUMOR_PRINTF(3, 4);
static rumor_err_t fail(sim_t *s, rumor_err_t rc, const char *fmt, ...)
{
    if (s->rc == RUMOR_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->err, sizeof s->err, fmt, ap);
        va_end(ap);
        s->rc = rc;
    }
    return rc;
}

static void key_of(uint8_t key[RUMOR_KEY_LEN], int i)
{
    memset(key, 0, RUMOR_KEY_LEN);
    key[0] = (uint8_t)((uint32_t)i >> 24);
    key[1] = (uint8_t)((uint32_t)i >> 16);
    key[2] = (uint8_t)((uint32_t)i >> 8);
    key[3] = (uint8_t)i;
    key[31] = 0x76; /* 'v': not all zero */
}

static int index_of(const sim_t *s, const uint8_t key[RUMOR_KEY_LEN])
{
    const uint32_t i = (uint32_t)key[0] << 24 | (uint32_t)key[1] << 16 | (uint32_t)key[2] << 8 | key[3];
    return i < (uint32_t)s->n && memcmp(s->p[i].key, key, RUMOR_KEY_LEN) == 0 ? (int)i : -1;
}

// ---- files ----

static void metrics_path(const sim_t *s, int i, char *buf, size_t len)
{
    snprintf(buf, len, "%s/peer-%03d/metrics.jsonl", s->c->out, i);
}

/* Metrics lines are buffered per peer and appended to the files now and then: a swarm of
 * thousands of peers cannot keep a file open for each. */
static rumor_err_t metrics_flush(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    if (p->mlen == 0) return RUMOR_OK;
    char path[1100];
    metrics_path(s, i, path, sizeof path);
    FILE *f = fopen(path, "a");
    if (!f) return fail(s, RUMOR_EIO, "%s: %s", path, strerror(errno));
    const bool ok = fwrite(p->mbuf, 1, p->mlen, f) == p->mlen;
    if (fclose(f) != 0 || !ok) return fail(s, RUMOR_EIO, "%s: %s", path, strerror(errno));
    p->mflushed += p->mlen;
    p->mlen = 0;
    return RUMOR_OK;
}

static rumor_err_t metrics_flush_all(sim_t *s)
{
    for (int i = 0; i < s->n; i++)
        if (metrics_flush(s, i) != RUMOR_OK) return s->rc;
    return RUMOR_OK;
}

/* Peer i's metrics line l, into its buffer (written out now and then, see metrics_flush). */
static rumor_err_t metrics_put(sim_t *s, int i, const rumor_metrics_line_t *l)
{
    vpeer_t *p = &s->p[i];
    char line[512];
    const size_t k = rumor_metrics_line(line, sizeof line, l);
    if (p->mlen + k > p->mcap) {
        size_t cap = p->mcap ? 2 * p->mcap : 1024;
        while (cap < p->mlen + k) cap *= 2;
        char *b = realloc(p->mbuf, cap);
        if (!b) return fail(s, RUMOR_ENOMEM, "out of memory for metrics");
        p->mbuf = b, p->mcap = cap;
    }
    memcpy(p->mbuf + p->mlen, line, k);
    p->mlen += k;
    return p->mlen >= METRICS_FLUSH ? metrics_flush(s, i) : RUMOR_OK;
}

static rumor_err_t evaluate(sim_t *s, int i);

/* A metrics line about peer i's model alone, evaluated now: the one it starts from, or one
 * it took from the swarm (flag "resync", "swarm_final"). */
static rumor_err_t model_line(sim_t *s, int i, const char *flag)
{
    if (evaluate(s, i) != RUMOR_OK) return s->rc;
    const vpeer_t *p = &s->p[i];
    const rumor_metrics_line_t l = {.t = (double)s->now_us / 1e6, .t_decimals = 6, .round = p->k,
                                    .step = rumor_optim_steps(p->o), .evaluated = true, .test_loss = s->test_loss,
                                    .test_acc = s->test_acc, .flag = flag};
    return metrics_put(s, i, &l);
}

// ---- training and evaluation ----

/* The local steps of one phase, taken as a node takes them (src/trainer.c). A peer that owns
 * no samples (possible under strong label skew on many peers) takes none and only gossips. */
static rumor_err_t local_steps(sim_t *s, int i, char err[RUMOR_ERR_LEN])
{
    vpeer_t *p = &s->p[i];
    p->loss_sum = 0.0;
    p->loss_count = 0;
    if (!p->tr || p->budget_spent) return RUMOR_OK;
    rumor_trainer_stats_t ts;
    char e2[RUMOR_ERR_LEN];
    if (rumor_trainer_steps(p->tr, s->H, p->sched_k * s->H, &ts, e2) != RUMOR_OK)
        return rumor_fail(err, rumor_last_error(), "peer %d: %s", i, e2);
    p->budget_spent = ts.budget_spent;
    p->loss_sum = ts.loss_sum;
    p->loss_count = ts.samples;
    if (ts.steps) p->lr = ts.lr;
    return RUMOR_OK;
}

static void run_job(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    p->job_rc = local_steps(s, i, p->job_err);
}

static void *worker_main(void *arg)
{
    sim_t *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->quit && s->q_count == 0) pthread_cond_wait(&s->cv, &s->mu);
        if (s->quit) break;
        /* From the back: the main thread needs the oldest phases first and computes those
         * itself when it gets to them, so the two work on different peers. */
        s->q_count--;
        const int i = s->queue[(s->q_head + s->q_count) % s->q_cap];
        if (s->p[i].job != JOB_QUEUED) continue; /* taken back by the main thread */
        s->p[i].job = JOB_RUNNING;
        pthread_mutex_unlock(&s->mu);
        run_job(s, i);
        pthread_mutex_lock(&s->mu);
        s->phases_worker++;
        s->p[i].job = JOB_DONE;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Queue peer i's local phase (at its start). Without a worker it runs at its end. */
static void queue_phase(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    if (!s->worker_on) {
        p->job = JOB_NONE;
        return;
    }
    pthread_mutex_lock(&s->mu);
    if (s->q_count == s->q_cap) { /* full of entries taken back: this one runs at its end */
        p->job = JOB_NONE;
    } else {
        p->job = JOB_QUEUED;
        s->queue[(s->q_head + s->q_count) % s->q_cap] = i;
        s->q_count++;
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
}

/* Peer i's local phase is done when this returns: taken from the queue and run here if the
 * worker has not started it, else waited for. */
static rumor_err_t ensure_phase(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    bool mine = true;
    if (s->worker_on) {
        pthread_mutex_lock(&s->mu);
        if (p->job == JOB_QUEUED) {
            p->job = JOB_RUNNING; /* taken back: the worker skips it when it comes to it */
        } else if (p->job != JOB_NONE) {
            while (p->job == JOB_RUNNING) pthread_cond_wait(&s->cv, &s->mu);
            mine = false;
        }
        pthread_mutex_unlock(&s->mu);
    }
    if (mine) run_job(s, i);
    if (s->worker_on) pthread_mutex_lock(&s->mu);
    s->phases_main += mine;
    p->job = JOB_NONE;
    if (s->worker_on) pthread_mutex_unlock(&s->mu);
    if (p->job_rc != RUMOR_OK) return fail(s, p->job_rc, "%s", p->job_err);
    return RUMOR_OK;
}

/* Test loss and accuracy of peer i into s->test_loss, s->test_acc. The evaluation model
 * keeps the parameters it last evaluated: bit-identical ones (every peer at round 0) give
 * the same answer without computing it again. */
static rumor_err_t evaluate(sim_t *s, int i)
{
    const size_t P = rumor_model_param_count(s->em), feat = s->test.rows * s->test.cols;
    float *ep = rumor_model_params(s->em);
    const float *x = rumor_model_params(s->p[i].m);
    if (s->evaluated && memcmp(ep, x, P * sizeof *ep) == 0) return RUMOR_OK;
    memcpy(ep, x, P * sizeof *ep);
    s->evaluated = false;
    double loss_sum = 0.0;
    long correct = 0;
    char err[RUMOR_ERR_LEN];
    for (size_t start = 0; start < s->n_eval; start += s->eval_batch) {
        const size_t b = s->n_eval - start < s->eval_batch ? s->n_eval - start : s->eval_batch;
        if (s->evx) { /* else the whole subset sits in the model's input buffer already */
            memcpy(rumor_model_input_buf(s->em), s->evx + start * feat, b * feat * sizeof(float));
            memcpy(rumor_model_label_buf(s->em), s->evy + start, b);
        }
        if (rumor_model_run(s->em, (int)b, false, &loss_sum, &correct, err) != RUMOR_OK)
            return fail(s, RUMOR_EINVAL, "evaluating peer %d: %s", i, err);
    }
    s->test_loss = loss_sum / (double)s->n_eval;
    s->test_acc = (double)correct / (double)s->n_eval;
    s->evaluated = true;
    return RUMOR_OK;
}

// ---- the live set and churn ----

static bool running(const vpeer_t *p) { return p->state == P_COMPUTING || p->state == P_WAITING; }

/* A virtual peer's boot id (the run secure-mixing masks are bound to): from its key, so every
 * peer knows every other's, and a run replays exactly. Like the rest of virtual mode's
 * randomness it is seeded: virtual secure mixing shows the arithmetic, and protects nothing. */
static uint64_t vboot(const uint8_t key[RUMOR_KEY_LEN])
{
    return rumor_fnv1a(RUMOR_FNV_BASIS, key, RUMOR_KEY_LEN) | 1u;
}

/* The engine's view: the peer and the members of its membership view. */
static void view_set(vpeer_t *p)
{
    int m = 0;
    p->vboots[m] = vboot(p->key);
    memcpy(p->vkeys[m++], p->key, RUMOR_KEY_LEN);
    for (int k = 0; k < rumor_memb_view_count(p->memb); k++) {
        p->vboots[m] = vboot(rumor_memb_view_at(p->memb, k)->key);
        memcpy(p->vkeys[m++], rumor_memb_view_at(p->memb, k)->key, RUMOR_KEY_LEN);
    }
    rumor_gossip_set_view_boots(p->g, (const uint8_t(*)[RUMOR_KEY_LEN])p->vkeys, p->vboots, (size_t)m);
    p->view_peers = m;
    p->view_dirty = false;
}

// ---- membership ----

static void addr_of(int i, char addr[RUMOR_MEMB_ADDR_LEN]) { snprintf(addr, RUMOR_MEMB_ADDR_LEN, "sim:%d", i); }

static rumor_err_t schedule_phase(sim_t *s, int i);
static bool cut(const sim_t *s, int a, int b);
static void round_min_advance(sim_t *s);

/* Peer i, restarted from its checkpoint, falls into step with the swarm as a resumed node does
 * (src/peer.c, resync): it asks members of its view, one after another and at most
 * RUMOR_RESYNC_ASKS (one that is gone or cut off uses an ask), for their latest snapshot. When
 * two that are ahead of it confirm each other, it takes their mean, at the lower of their rounds,
 * and that round as its own; otherwise it keeps its checkpoint. */
static rumor_err_t resync(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    const size_t P = rumor_model_param_count(p->m);
    const uint64_t own = rumor_gossip_round(p->g);
    rumor_gossip_send_t got[RUMOR_RESYNC_ASKS];
    rumor_gossip_t *lent[RUMOR_RESYNC_ASKS];
    int n = 0, a = -1, b = -1;
    for (int v = 1, asks = 0; v < p->view_peers && asks < RUMOR_RESYNC_ASKS && a < 0; v++, asks++) {
        const int j = index_of(s, p->vkeys[v]);
        if (j < 0 || !running(&s->p[j]) || cut(s, i, j)) continue; /* no answer */
        lent[n] = s->p[j].g;
        rumor_gossip_lend(lent[n], &got[n]);
        if (!rumor_gossip_plausible(p->g, got[n].params) || got[n].round < own + RUMOR_RESYNC_AHEAD) {
            rumor_gossip_release(lent[n], &got[n], false);
            continue;
        }
        for (int k = 0; k < n && a < 0; k++)
            if (rumor_models_agree(got[k].params, got[n].params, P, RUMOR_MODELS_AGREE)) a = k, b = n;
        n++;
    }
    rumor_err_t rc = RUMOR_OK;
    if (a >= 0) {
        float *x = rumor_model_params(p->m);
        for (size_t q = 0; q < P; q++) x[q] = 0.5f * (got[a].params[q] + got[b].params[q]);
        const uint64_t r = got[a].round < got[b].round ? got[a].round : got[b].round;
        rumor_gossip_adopt(p->g, x, r);
        if ((long)r > p->k) {
            s->at_round[p->k]--;
            p->k = (long)r < s->c->rounds ? (long)r : s->c->rounds - 1;
            s->at_round[p->k]++;
            if (p->k > s->round_top) s->round_top = p->k;
            round_min_advance(s);
        }
        rc = model_line(s, i, "resync");
    }
    for (int k = 0; k < n; k++) rumor_gossip_release(lent[k], &got[k], false);
    return rc;
}

/* A joining peer trains once its view holds every other peer, or has not grown for
 * JOIN_QUIET periods (peers that already left, or messages lost), or after JOIN_WAIT. */
static rumor_err_t maybe_start(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    if (p->state != P_JOINING) return RUMOR_OK;
    const int have = rumor_memb_view_count(p->memb);
    const bool quiet = have > 0 && s->now_us >= p->view_changed_us + JOIN_QUIET * s->mcfg.period_ms * 1000ULL;
    if (have < p->want_view && !quiet && s->now_us < p->join_from_us + JOIN_WAIT_US) return RUMOR_OK;
    view_set(p);
    if (p->resumed) {
        p->resumed = false;
        if (resync(s, i) != RUMOR_OK) return s->rc;
    }
    return schedule_phase(s, i);
}

static size_t pack_str(uint8_t *b, const char *str)
{
    const size_t l = strnlen(str, RUMOR_MEMB_ADDR_LEN - 1) + 1;
    if (b) memcpy(b, str, l - 1), b[l - 1] = 0;
    return l;
}

static size_t pack_upd(uint8_t *b, const rumor_memb_update_t *u)
{
    if (b) {
        memcpy(b, u->key, RUMOR_KEY_LEN);
        memcpy(b + RUMOR_KEY_LEN, &u->inc, 4);
        memcpy(b + RUMOR_KEY_LEN + 4, &u->state, sizeof u->state);
    }
    const size_t at = RUMOR_KEY_LEN + 4 + sizeof u->state;
    return at + pack_str(b ? b + at : NULL, u->addr);
}

/* Pack m into b (b NULL: only its size). */
static size_t memb_pack(uint8_t *b, const rumor_memb_msg_t *m)
{
    const mhead_t h = {.kind = m->kind, .seq = m->seq, .inc = m->inc, .ack = m->ack, .has_target = m->has_target,
                       .n_upd = m->n_upd, .n_peers = m->n_peers};
    size_t at = sizeof h;
    if (b) {
        memcpy(b, &h, sizeof h);
        memcpy(b + offsetof(mhead_t, target), m->target, RUMOR_KEY_LEN);
    }
    at += pack_str(b ? b + at : NULL, m->addr);
    at += pack_str(b ? b + at : NULL, m->target_addr);
    for (int k = 0; k < m->n_upd; k++) at += pack_upd(b ? b + at : NULL, &m->upd[k]);
    for (int k = 0; k < m->n_peers; k++) at += pack_upd(b ? b + at : NULL, &m->peers[k]);
    return at;
}

static size_t unpack_upd(rumor_memb_update_t *u, const uint8_t *b)
{
    memcpy(u->key, b, RUMOR_KEY_LEN);
    memcpy(&u->inc, b + RUMOR_KEY_LEN, 4);
    memcpy(&u->state, b + RUMOR_KEY_LEN + 4, sizeof u->state);
    const size_t at = RUMOR_KEY_LEN + 4 + sizeof u->state;
    const size_t l = strlen((const char *)b + at) + 1;
    memcpy(u->addr, b + at, l);
    return at + l;
}

static void memb_unpack(rumor_memb_msg_t *m, const uint8_t *b)
{
    mhead_t h;
    memcpy(&h, b, sizeof h);
    m->kind = h.kind, m->seq = h.seq, m->inc = h.inc, m->ack = h.ack, m->has_target = h.has_target;
    memcpy(m->target, h.target, RUMOR_KEY_LEN);
    m->n_upd = h.n_upd, m->n_peers = h.n_peers;
    size_t at = sizeof h, l = strlen((const char *)b + at) + 1;
    memcpy(m->addr, b + at, l);
    at += l;
    l = strlen((const char *)b + at) + 1;
    memcpy(m->target_addr, b + at, l);
    at += l;
    for (int k = 0; k < m->n_upd; k++) at += unpack_upd(&m->upd[k], b + at);
    for (int k = 0; k < m->n_peers; k++) at += unpack_upd(&m->peers[k], b + at);
}

/* Carry out what peer i's membership asks: messages onto the network, view changes noted. */
static rumor_err_t memb_drain(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    rumor_memb_action_t *a = s->act;
    while (rumor_memb_next_action(p->memb, a)) {
        if (a->kind != RUMOR_MEMB_ACT_SEND) {
            /* A peer waiting at its gossip point looks again: a neighbour that left is not
             * waited for (gossip.c, round_ready). */
            if (p->state == P_WAITING && !p->view_dirty && heap_push(&s->q, s->now_us + 1, EV_RETRY, i, p->inc) != RUMOR_OK)
                return fail(s, RUMOR_ENOMEM, "out of memory for events");
            p->view_dirty = true;
            p->view_changed_us = s->now_us;
            continue;
        }
        const int to = index_of(s, a->key);
        if (to < 0) continue; /* cannot happen: members are peers of the simulation */
        if (s->p[to].state == P_FINISHED) continue; /* gone for good: it would drop it on arrival */
        int id;
        if (s->n_mm_free > 0) {
            id = s->mm_free[--s->n_mm_free];
        } else {
            if (s->n_mm == s->cap_mm) {
                const int cap = s->cap_mm ? 2 * s->cap_mm : 1024;
                mmsg_t **v = realloc(s->mm, (size_t)cap * sizeof *v);
                int *f = v ? realloc(s->mm_free, (size_t)cap * sizeof *f) : NULL;
                if (v) s->mm = v;
                if (!v || !f) return fail(s, RUMOR_ENOMEM, "out of memory for membership messages");
                s->mm_free = f, s->cap_mm = cap;
            }
            s->mm[s->n_mm] = NULL;
            id = s->n_mm++;
        }
        mmsg_t *mm = malloc(sizeof *mm + memb_pack(NULL, &a->msg));
        if (!mm) return fail(s, RUMOR_ENOMEM, "out of memory for membership messages");
        s->mm[id] = mm;
        mm->from = i, mm->to = to, mm->from_inc = p->inc;
        memb_pack(mm->data, &a->msg);
        if (heap_push(&s->q, s->now_us + s->latency_us + 1, EV_MMSG, id, 0) != RUMOR_OK)
            return fail(s, RUMOR_ENOMEM, "out of memory for events");
    }
    return maybe_start(s, i);
}

/* The next membership tick of peer i: when its state machine next needs one, at least every
 * quarter period (its contract). */
static rumor_err_t memb_schedule(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    uint64_t ms = rumor_memb_next_deadline(p->memb, s->now_us / 1000);
    if (ms > s->mcfg.period_ms / 4) ms = s->mcfg.period_ms / 4;
    if (ms < 1) ms = 1;
    p->mtick_us = (s->now_us / 1000 + ms) * 1000;
    if (heap_push(&s->q, p->mtick_us, EV_MTICK, i, p->inc) != RUMOR_OK)
        return fail(s, RUMOR_ENOMEM, "out of memory for events");
    return RUMOR_OK;
}

/* A fresh membership for peer i (at start, and at a restart: a node that restarts remembers
 * nobody and comes back under a higher incarnation), joining through peer 0 at the start
 * and through the first peer still running at a restart. */
static rumor_err_t memb_start(sim_t *s, int i, uint32_t inc)
{
    vpeer_t *p = &s->p[i];
    char addr[RUMOR_MEMB_ADDR_LEN], err[RUMOR_ERR_LEN];
    rumor_memb_destroy(&p->memb);
    rumor_memb_config_t mc = s->mcfg;
    rumor_rng_t r;
    rumor_rng_init2(&r, s->c->seed, MEMB_STREAM + (uint64_t)i + 1, inc);
    mc.seed = rumor_rng_next(&r);
    addr_of(i, addr);
    if (!(p->memb = rumor_memb_new(&mc, p->key, addr, inc, err))) return fail(s, rumor_last_error(), "%s", err);
    int boot = i == 0 ? (s->n > 1 ? 1 : -1) : 0;
    if (inc > 1) { /* a restart joins through a peer that runs, as `rumor sim` restarts a node */
        boot = -1;
        for (int j = 0; j < s->n && boot < 0; j++)
            if (j != i && s->p[j].state != P_DEAD && s->p[j].state != P_FINISHED) boot = j;
    }
    if (s->seeded && inc == 1) {
        for (int j = 0; j < s->n; j++) {
            addr_of(j, addr);
            rumor_memb_add(p->memb, s->p[j].key, addr, 1, s->now_us / 1000);
        }
    } else if (boot >= 0 && (i != 0 || inc > 1)) { /* peer 0 is the bootstrap: it joins only after a restart */
        addr_of(boot, addr);
        rumor_memb_join(p->memb, s->p[boot].key, addr, s->now_us / 1000);
    }
    p->view_dirty = true;
    if (memb_drain(s, i) != RUMOR_OK) return s->rc;
    return memb_schedule(s, i);
}

static rumor_err_t memb_tick(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    p->mtick_us = 0;
    if (p->state == P_DEAD || p->state == P_FINISHED) return RUMOR_OK;
    rumor_memb_tick(p->memb, s->now_us / 1000);
    if (memb_drain(s, i) != RUMOR_OK) return s->rc;
    return memb_schedule(s, i);
}

/* Whether a partition stands between peers a and b now (at the slowest live peer's round). */
static bool cut(const sim_t *s, int a, int b)
{
    for (int k = 0; k < s->c->n_parts; k++) {
        const rumor_sim_part_t *pt = &s->c->parts[k];
        if (s->round_top >= pt->from && s->round_top < pt->to && (a >= pt->lo && a < pt->hi) != (b >= pt->lo && b < pt->hi))
            return true;
    }
    return false;
}

/* A membership message reaches its receiver (unless lost, cut off, or either side is gone). */
static rumor_err_t memb_arrive(sim_t *s, int id)
{
    mmsg_t *mm = s->mm[id];
    s->mm[id] = NULL;
    s->mm_free[s->n_mm_free++] = id;
    const int from = mm->from;
    int to = mm->to;
    vpeer_t *pf = &s->p[from], *pt = &s->p[to];
    const bool lost = s->c->loss > 0 && rumor_rng_uniform(&s->mloss_rng) < s->c->loss;
    if (!lost && pf->inc == mm->from_inc && pt->state != P_DEAD && pt->state != P_FINISHED && !cut(s, from, to))
        memb_unpack(s->mscratch, mm->data);
    else
        to = -1;
    free(mm);
    if (to < 0) return RUMOR_OK;
    char addr[RUMOR_MEMB_ADDR_LEN];
    addr_of(from, addr);
    rumor_memb_recv(pt->memb, pf->key, addr, s->mscratch, s->now_us / 1000);
    return memb_drain(s, to);
}

static void round_min_advance(sim_t *s)
{
    while (s->round_min <= s->c->rounds && s->at_round[s->round_min] == 0) s->round_min++;
}

static rumor_err_t schedule_phase(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    const double slow = i == s->c->straggler && s->c->slowdown > 0 ? s->c->slowdown : 1.0;
    const uint64_t dur = (uint64_t)llround((double)s->H * (double)s->step_us * slow);
    p->state = P_COMPUTING;
    p->sched_k = rumor_gossip_schedule_round(p->g, p->k); /* here: the phase may run on the other core */
    if (heap_push(&s->q, s->now_us + (dur ? dur : 1), EV_PHASE, i, p->inc) != RUMOR_OK)
        return fail(s, RUMOR_ENOMEM, "out of memory for events");
    queue_phase(s, i);
    return RUMOR_OK;
}

static rumor_err_t try_gossip(sim_t *s, int i);
static bool finish_with_swarm(sim_t *s, int i);

/* Peer i's checkpoint, in memory: what its file would hold. */
static rumor_err_t ckpt_save(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    vckpt_t *ck = &p->ckpt;
    const size_t P = rumor_model_param_count(p->m), nc = rumor_gossip_chunk_count(p->g);
    const int ns = rumor_optim_state_count(p->o);
    const bool diloco = p->gc.algo.kind == RUMOR_ALGO_DILOCO;
    if (!ck->x) {
        ck->x = malloc(P * sizeof *ck->x);
        ck->w = malloc(nc * sizeof *ck->w);
        ck->opt = ns ? malloc((size_t)ns * P * sizeof *ck->opt) : NULL;
        ck->theta = diloco ? malloc(P * sizeof *ck->theta) : NULL;
        ck->mom = diloco ? malloc(P * sizeof *ck->mom) : NULL;
        if (!ck->x || !ck->w || (ns && !ck->opt) || (diloco && (!ck->theta || !ck->mom)))
            return fail(s, RUMOR_ENOMEM, "out of memory for peer %d's checkpoint", i);
    }
    memcpy(ck->x, rumor_model_params(p->m), P * sizeof *ck->x);
    memcpy(ck->w, rumor_gossip_weights(p->g), nc * sizeof *ck->w);
    for (int k = 0; k < ns; k++) memcpy(ck->opt + (size_t)k * P, rumor_optim_state(p->o, k), P * sizeof *ck->opt);
    if (diloco) {
        memcpy(ck->theta, rumor_gossip_outer(p->g), P * sizeof *ck->theta);
        memcpy(ck->mom, rumor_gossip_momentum(p->g), P * sizeof *ck->mom);
    }
    ck->steps = rumor_optim_steps(p->o);
    ck->dp_steps = p->dp ? rumor_dp_steps(p->dp) : 0;
    ck->k = p->k;
    ck->round = rumor_gossip_round(p->g);
    ck->mbytes = p->mflushed + p->mlen;
    ck->has = true;
    return RUMOR_OK;
}

/* Restarted: back to the checkpoint, with a new engine (its old one stays until the sends it
 * lent are released) and the metrics cut back to the checkpoint's round. */
static rumor_err_t ckpt_restore(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    const vckpt_t *ck = &p->ckpt;
    const size_t P = rumor_model_param_count(p->m);
    char err[RUMOR_ERR_LEN];
    rumor_gossip_t **og = realloc(p->old_g, (size_t)(p->n_old_g + 1) * sizeof *og);
    if (!og) return fail(s, RUMOR_ENOMEM, "out of memory");
    p->old_g = og;
    p->old_g[p->n_old_g++] = p->g;
    p->g = NULL;
    float *x = rumor_model_params(p->m);
    memcpy(x, ck->x, P * sizeof *x);
    if (p->gc.lineage) p->gc.lineage = (p->gc.lineage * 0x9e3779b97f4a7c15ull + (uint64_t)++p->restarts) | 1;
    if (!(p->g = rumor_gossip_new(&p->gc, s->topo, x, err))) return fail(s, rumor_last_error(), "%s", err);
    if (rumor_gossip_restore(p->g, ck->round, ck->w, rumor_gossip_chunk_count(p->g), err) != RUMOR_OK)
        return fail(s, RUMOR_EINVAL, "peer %d: %s", i, err);
    if (ck->theta) {
        memcpy(rumor_gossip_outer(p->g), ck->theta, P * sizeof(float));
        memcpy(rumor_gossip_momentum(p->g), ck->mom, P * sizeof(float));
    }
    for (int k = 0; k < rumor_optim_state_count(p->o); k++)
        memcpy(rumor_optim_state(p->o, k), ck->opt + (size_t)k * P, P * sizeof(float));
    rumor_optim_set_steps(p->o, ck->steps);
    if (p->dp) rumor_dp_restore(p->dp, ck->dp_steps);
    p->budget_spent = false;
    p->loss_sum = 0.0, p->loss_count = 0;
    p->coded_set[0] = p->coded_set[1] = false;
    p->view_dirty = true;
    p->k = ck->k;
    if (ck->mbytes >= p->mflushed) {
        p->mlen = ck->mbytes - p->mflushed;
    } else {
        char path[1100];
        metrics_path(s, i, path, sizeof path);
        if (truncate(path, (off_t)ck->mbytes) != 0) return fail(s, RUMOR_EIO, "%s: %s", path, strerror(errno));
        p->mflushed = ck->mbytes, p->mlen = 0;
    }
    return RUMOR_OK;
}

static void kill_peer(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    if (p->state == P_DEAD) return;
    if (p->state == P_COMPUTING) {
        /* The phase may be running on the other core already: let it finish, and count it
         * as done before the crash (the restarted peer goes on to gossip). */
        (void)ensure_phase(s, i);
        p->state = P_WAITING;
    }
    p->before_kill = p->state;
    p->state = P_DEAD;
    p->inc++;
    p->retry_ms = 0;
    s->alive[i] = false;
    s->n_alive--;
    s->at_round[p->k]--;
    round_min_advance(s);
}

static rumor_err_t restart_peer(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    if (p->state != P_DEAD) return RUMOR_OK;
    p->inc++;
    s->alive[i] = true;
    s->n_alive++;
    p->state = p->before_kill;
    if (p->state != P_FINISHED && p->ckpt.has) {
        /* Back to its checkpoint; like a resumed node it trains once two members are in its
         * view (or its view has stopped growing), not alone on an empty one. */
        if (ckpt_restore(s, i) != RUMOR_OK) return s->rc;
        p->state = P_JOINING;
        p->join_from_us = s->now_us;
        p->want_view = s->n - 1 < 2 ? s->n - 1 : 2;
        p->resumed = !s->c->secure_mix; /* secure mixing lends no model in the clear */
    }
    s->at_round[p->k]++;
    if (p->k < s->round_min) s->round_min = p->k;
    if (p->state != P_FINISHED && memb_start(s, i, rumor_memb_incarnation(p->memb) + 1) != RUMOR_OK) return s->rc;
    if (p->state == P_JOINING) return maybe_start(s, i);
    if (p->state == P_COMPUTING) return schedule_phase(s, i); /* the phase cut by the kill, again */
    if (p->state == P_WAITING) return try_gossip(s, i);
    return RUMOR_OK;
}

static rumor_err_t fire_churn(sim_t *s, int idx)
{
    const rumor_sim_event_t *e = &s->c->events[idx];
    const bool kill = e->kind == RUMOR_SIM_KILL;
    int *cand = malloc((size_t)s->n * sizeof *cand), nc = 0, take = 0;
    if (!cand) return fail(s, RUMOR_ENOMEM, "out of memory");
    for (int i = 0; i < s->n; i++)
        if ((s->p[i].state == P_DEAD) != kill && (e->peer < 0 || e->peer == i)) cand[nc++] = i;
    if (e->peer >= 0) {
        take = nc;
    } else {
        take = (int)(((long)e->percent * s->n + 50) / 100);
        if (take < 1 && e->percent > 0) take = 1;
        if (take > nc) take = nc;
        /* The first `take` of a seeded partial shuffle, then in index order. */
        rumor_rng_t rng;
        rumor_rng_init2(&rng, s->c->seed, CHURN_STREAM, (uint64_t)idx);
        for (int k = 0; k < take; k++) {
            const int j = k + (int)rumor_rng_below(&rng, (uint64_t)(nc - k));
            const int t = cand[k];
            cand[k] = cand[j], cand[j] = t;
        }
        for (int k = 1; k < take; k++) /* insertion sort: take is small */
            for (int j = k; j > 0 && cand[j - 1] > cand[j]; j--) {
                const int t = cand[j];
                cand[j] = cand[j - 1], cand[j - 1] = t;
            }
    }
    if (!s->c->quiet && take > 0)
        rumor_log(RUMOR_LOG_INFO, "virtual t=%.3fs: %s %d peer%s (%d live)", (double)s->now_us / 1e6,
                  kill ? "killed" : "restarted", take, take == 1 ? "" : "s", s->n_alive + (kill ? -take : take));
    for (int k = 0; k < take && s->rc == RUMOR_OK; k++) {
        if (kill)
            kill_peer(s, cand[k]);
        else
            (void)restart_peer(s, cand[k]);
    }
    free(cand);
    return s->rc;
}

/* Churn at a round fires once the slowest live peer has done that many rounds. */
static rumor_err_t round_churn(sim_t *s)
{
    while (s->rc == RUMOR_OK && s->next_round_ev < s->n_round_ev && s->n_alive > 0) {
        const int idx = s->round_ev[s->next_round_ev];
        if (s->c->events[idx].at_round > s->round_min) break;
        s->next_round_ev++;
        (void)fire_churn(s, idx);
    }
    return s->rc;
}

// ---- gossip ----

static rumor_err_t send_all(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    const rumor_sim_config_t *c = s->c;
    rumor_gossip_send_t m;
    while (rumor_gossip_next_send(p->g, &m)) {
        const int to = index_of(s, m.peer);
        if (to < 0) { /* cannot happen: views hold only our keys */
            rumor_gossip_release(p->g, &m, false);
            continue;
        }
        if (s->free_msg < 0) {
            if (s->n_msgs == s->cap_msgs) {
                const int cap = s->cap_msgs ? 2 * s->cap_msgs : 1024;
                msg_t *v = realloc(s->msgs, (size_t)cap * sizeof *v);
                if (!v) {
                    rumor_gossip_release(p->g, &m, false);
                    return fail(s, RUMOR_ENOMEM, "out of memory for messages in flight");
                }
                s->msgs = v, s->cap_msgs = cap;
            }
            s->msgs[s->n_msgs].next_free = -1;
            s->free_msg = s->n_msgs++;
        }
        const int id = s->free_msg;
        msg_t *msg = &s->msgs[id];
        s->free_msg = msg->next_free;
        if (i == c->byzantine && s->attack.kind != RUMOR_ATTACK_NONE && m.snap >= 0 && m.snap < 2) {
            /* The Byzantine peer sends its poisoned copy; the snapshot is still what is released. */
            m.params = rumor_poison_get(&p->poison, &s->attack, m.snap, m.round, m.params, &s->attack_rng);
        }
        uint64_t bytes = (uint64_t)m.count * sizeof(float);
        if (m.choco) {
            /* A delta of the public copy (its encoded bytes), or a keyframe. */
            if (m.enc) bytes = m.enc_off[rumor_chunks(m.count, m.chunk_params)];
        } else if (s->codec.id != RUMOR_CODEC_F32 && m.snap >= 0 && m.snap < 2) {
            /* The receivers get what the codec lets through: encoded and decoded once a
             * snapshot, with the bytes the encoding takes. */
            const int k = m.snap;
            if (!p->coded_set[k] || p->coded_round[k] != m.round) {
                p->coded_bytes[k] = 0;
                for (size_t off = 0; off < m.count; off += m.chunk_params) {
                    const size_t n = m.count - off < m.chunk_params ? m.count - off : m.chunk_params;
                    size_t len = 0;
                    char e2[RUMOR_ERR_LEN];
                    if (rumor_codec_encode(&s->codec, m.params + off, n, s->enc, &len, e2) != RUMOR_OK ||
                        rumor_codec_decode(s->codec.id, s->enc, len, n, p->coded[k] + off, e2) != RUMOR_OK) {
                        rumor_gossip_release(p->g, &m, false);
                        return fail(s, RUMOR_EINVAL, "peer %d: %s", i, e2);
                    }
                    p->coded_bytes[k] += len;
                }
                p->coded_round[k] = m.round;
                p->coded_set[k] = true;
            }
            m.params = p->coded[k];
            bytes = p->coded_bytes[k];
        }
        msg->from = i, msg->to = to, msg->from_inc = p->inc, msg->g = p->g, msg->s = m;
        const uint64_t depart = p->link_free_us > s->now_us ? p->link_free_us : s->now_us;
        const uint64_t xfer = c->bandwidth_mbps > 0 ? (uint64_t)llround((double)bytes * 8.0 / c->bandwidth_mbps) : 0;
        p->link_free_us = depart + xfer;
        p->bytes_out += bytes;
        if (heap_push(&s->q, p->link_free_us + s->latency_us, EV_ARRIVE, id, 0) != RUMOR_OK)
            return fail(s, RUMOR_ENOMEM, "out of memory for events");
    }
    return RUMOR_OK;
}

/* Peers that finished, which peer i heard say so (their bye; none across a partition). */
static int finished_seen(const sim_t *s, int i)
{
    int n = 0;
    for (int j = 0; j < s->n; j++) n += j != i && s->p[j].state == P_FINISHED && !cut(s, i, j);
    return n;
}

/* Peer i finished a round: its metrics line, an evaluation when due, the next phase. */
static rumor_err_t round_done(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    const rumor_sim_config_t *c = s->c;
    s->at_round[p->k]--;
    p->k++;
    s->at_round[p->k]++;
    if (p->k > s->round_top) s->round_top = p->k;
    round_min_advance(s);
    if (s->now_us > s->end_us) s->end_us = s->now_us;
    rumor_gossip_stats_t st;
    rumor_gossip_stats(p->g, &st);
    const bool eval = p->k == c->rounds || p->budget_spent || (c->eval_every > 0 && p->k % c->eval_every == 0);
    if (eval && evaluate(s, i) != RUMOR_OK) return s->rc;
    const bool last = p->k >= c->rounds || p->budget_spent;
    const rumor_metrics_line_t ml = {.t = (double)s->now_us / 1e6, .t_decimals = 6, .round = p->k,
                                     .step = rumor_optim_steps(p->o), .trained = true,
                                     .loss = p->loss_sum / (double)(p->loss_count ? p->loss_count : 1), .lr = p->lr,
                                     .consensus = st.consensus, .w = st.w, .peers = p->view_peers,
                                     .neighbours = st.last_peers, .missing = st.last_missing,
                                     .bytes_out = p->bytes_out, .bytes_in = st.bytes_in, .evaluated = eval,
                                     .test_loss = s->test_loss, .test_acc = s->test_acc, .private = p->dp != NULL,
                                     .epsilon = p->dp ? rumor_dp_epsilon(p->dp) : 0.0,
                                     .secure_mix = c->secure_mix, .unmixed = st.chunks_unmixed,
                                     .implausible = st.drops[RUMOR_GOSSIP_DROP_IMPLAUSIBLE]};
    if (metrics_put(s, i, &ml) != RUMOR_OK)
        return s->rc;
    if (s->restarts && !last && p->k % CKPT_EVERY == 0 && ckpt_save(s, i) != RUMOR_OK) return s->rc;
    if (!last && (p->view_peers <= 1 || (!c->secure_mix && finished_seen(s, i) >= 2)) && finish_with_swarm(s, i))
        return s->rc == RUMOR_OK ? round_churn(s) : s->rc;
    if (last) {
        p->state = P_FINISHED; /* and out of the others' views: it says bye */
        rumor_memb_leave(p->memb, s->now_us / 1000);
        if (memb_drain(s, i) != RUMOR_OK) return s->rc;
    } else if (schedule_phase(s, i) != RUMOR_OK) {
        return s->rc;
    }
    return round_churn(s);
}

/* Every other member left its view, and some finished: as a node does (src/peer.c), peer i
 * takes the mean of two finished peers' final models when they confirm each other, or keeps
 * its own, and ends. (A node asks members that linger; here finished peers answer, the lowest
 * indices first.) true when it ended. */
static bool finish_with_swarm(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    const size_t P = rumor_model_param_count(p->m);
    int a = -1, b = -1, done = 0;
    for (int j = 0; j < s->n && b < 0; j++) {
        if (j == i || s->p[j].state != P_FINISHED) continue;
        done++;
        for (int k = 0; k < j && b < 0; k++)
            if (k != i && s->p[k].state == P_FINISHED &&
                rumor_models_agree(rumor_model_params(s->p[k].m), rumor_model_params(s->p[j].m), P, RUMOR_MODELS_AGREE))
                a = k, b = j;
    }
    if (done == 0) return false; /* alone for another reason (a partition, deaths): it trains on */
    if (b >= 0) {
        float *x = rumor_model_params(p->m);
        const float *xa = rumor_model_params(s->p[a].m), *xb = rumor_model_params(s->p[b].m);
        for (size_t q = 0; q < P; q++) x[q] = 0.5f * (xa[q] + xb[q]);
        s->at_round[p->k]--;
        p->k = s->c->rounds;
        s->at_round[p->k]++;
        round_min_advance(s);
        if (model_line(s, i, "swarm_final") != RUMOR_OK) return true;
    }
    p->state = P_FINISHED;
    rumor_memb_leave(p->memb, s->now_us / 1000);
    (void)memb_drain(s, i);
    return true;
}

/* Peer i is at its gossip point: step the engine, hand its sends to the network, and on
 * WAIT make sure something will call again (the deadline; chunks and releases call too). */
static rumor_err_t try_gossip(sim_t *s, int i)
{
    vpeer_t *p = &s->p[i];
    if (p->state != P_WAITING) return RUMOR_OK;
    if (p->view_dirty) view_set(p);
    const uint64_t now_ms = s->now_us / 1000;
    const rumor_gossip_status_t gs = rumor_gossip_step(p->g, rumor_model_params(p->m), now_ms);
    if (send_all(s, i) != RUMOR_OK) return s->rc;
    if (gs == RUMOR_GOSSIP_DONE) return round_done(s, i);
    const uint64_t d = rumor_gossip_deadline(p->g);
    /* A deadline already passed means the engine waits for a snapshot to come free: the
     * release of one of its sends will call again. */
    if (d != UINT64_MAX && d > now_ms && d != p->retry_ms) {
        p->retry_ms = d;
        if (heap_push(&s->q, d * 1000, EV_RETRY, i, p->inc) != RUMOR_OK)
            return fail(s, RUMOR_ENOMEM, "out of memory for events");
    }
    return RUMOR_OK;
}

static rumor_err_t arrive(sim_t *s, int id)
{
    msg_t *msg = &s->msgs[id];
    const int from = msg->from, to = msg->to;
    vpeer_t *pf = &s->p[from], *pt = &s->p[to];
    const bool lost = s->c->loss > 0 && rumor_rng_uniform(&s->loss_rng) < s->c->loss;
    const bool deliver = !lost && pf->inc == msg->from_inc && running(pt) && !cut(s, from, to);
    const rumor_gossip_send_t *m = &msg->s;
    if (deliver) {
        const uint32_t chunks = (uint32_t)rumor_chunks(m->count, m->chunk_params);
        const uint64_t now_ms = s->now_us / 1000;
        rumor_secmix_send_t snd;
        bool masking = false;
        if (m->masked) {
            /* The masks of the sender's edges, under the mask keys of the peers they name. */
            rumor_secmix_edges_t e = m->edges;
            for (int k = 0; k < e.count; k++) {
                const int j = index_of(s, e.peer[k]);
                if (j < 0) return fail(s, RUMOR_EINVAL, "peer %d: a mask edge to an unknown peer", from);
                memcpy(e.peer[k], rumor_secret_key_public(s->p[j].mkey), RUMOR_SECMIX_KEY_LEN);
            }
            char e2[RUMOR_ERR_LEN];
            if (rumor_secmix_send_init(pf->sm, &e, &snd, e2) != RUMOR_OK) return fail(s, RUMOR_EINVAL, "peer %d: %s", from, e2);
            masking = true;
        }
        for (uint32_t k = 0; k < chunks; k++) {
            const size_t off = (size_t)k * m->chunk_params;
            const size_t n = m->count - off < m->chunk_params ? m->count - off : m->chunk_params;
            rumor_gossip_chunk_t h = {.round = m->round, .layout = m->layout, .w = m->share * (m->w ? m->w[k] : 1.0),
                                      .chunk = k, .chunks = chunks, .off = off, .n = n,
                                      .wire_bytes = rumor_codec_encoded_len(&s->codec, n)};
            const void *payload = m->params + off;
            size_t len = n * sizeof(float);
            if (m->choco) {
                h.choco = true, h.codec = m->codec, h.ver = m->ver, h.lin = m->lin, h.base = m->base, h.need = m->need;
                if (m->enc) payload = m->enc + m->enc_off[k], len = m->enc_off[k + 1] - m->enc_off[k];
                h.wire_bytes = len;
            }
            if (masking) {
                char e2[RUMOR_ERR_LEN];
                if (rumor_secmix_encode(&snd, off, m->params + off, n, h.w, s->masked, e2) != RUMOR_OK) {
                    rumor_log(RUMOR_LOG_WARN, "peer %d: %s: chunk %u not sent", from, e2, k);
                    continue;
                }
                h.masked = true;
                h.mix = m->mix;
                payload = s->masked;
            }
            (void)rumor_gossip_on_chunk(pt->g, pf->key, &h, payload, len, now_ms);
        }
        if (masking) rumor_secmix_send_fini(&snd);
    }
    /* It left the sender either way: a loss on the wire is not a refusal. */
    rumor_gossip_release(msg->g, m, true);
    msg->next_free = s->free_msg;
    s->free_msg = id;
    if (deliver && try_gossip(s, to) != RUMOR_OK) return s->rc;
    return try_gossip(s, from);
}

// ---- set-up ----

/* Evaluation: on many peers, the first EVAL_SUBSET test images keep the run fast (the mean
 * accuracy over peers is still measured on the same images for everyone). */
static rumor_err_t setup_eval(sim_t *s, const rumor_model_spec_t *spec, rumor_model_input_t in,
                              char err[RUMOR_ERR_LEN])
{
    const rumor_sim_config_t *c = s->c;
    s->n_eval = s->test.count;
    if (s->n > EVAL_SUBSET_ABOVE && s->n_eval > EVAL_SUBSET) s->n_eval = EVAL_SUBSET;
    if (s->n_eval == 0) return rumor_fail(err, RUMOR_EFORMAT, "%s: the test set is empty", c->data);
    s->eval_batch = spec->kind == RUMOR_MODEL_CNN && s->n_eval > EVAL_BATCH_CNN ? EVAL_BATCH_CNN : s->n_eval;
    if (!(s->em = rumor_model_new(spec, in, s->be, (int)s->eval_batch, err))) return rumor_last_error();
    {
        size_t *idx = malloc(s->n_eval * sizeof *idx);
        if (!idx) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        for (size_t j = 0; j < s->n_eval; j++) idx[j] = j;
        if (s->eval_batch == s->n_eval) { /* once, straight into the model's input buffer */
            rumor_train_load_batch(s->em, &s->test, idx, s->n_eval, s->mean, s->std, NULL, NULL);
        } else {
            const size_t feat = s->test.rows * s->test.cols;
            s->evx = malloc(s->n_eval * feat * sizeof *s->evx);
            s->evy = malloc(s->n_eval);
            if (s->evx && s->evy) rumor_data_gather(&s->test, idx, s->n_eval, s->mean, s->std, s->evx, s->evy);
        }
        free(idx);
        if (s->eval_batch != s->n_eval && (!s->evx || !s->evy)) return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    }
    return RUMOR_OK;
}

/* Peer i: its shard and trainer, model, optimizer, engine and what its sends need. */
static rumor_err_t setup_peer(sim_t *s, int i, const rumor_algo_t *algo, const rumor_model_spec_t *spec,
                              const rumor_partition_t *part, rumor_model_input_t in, char err[RUMOR_ERR_LEN])
{
    const rumor_sim_config_t *c = s->c;
    rumor_err_t rc;
    vpeer_t *p = &s->p[i];
    size_t *own = NULL;
    if ((rc = rumor_partition_indices(&own, &p->n_own, part, s->train.labels, s->train.count, c->seed, i, s->n,
                                      err)) != RUMOR_OK)
        return rc;
    if (!(p->m = rumor_model_new(spec, in, s->be, c->batch, err))) {
        free(own);
        return rumor_last_error();
    }
    if (!(p->o = rumor_optim_new(&s->opt, s->be, rumor_model_param_count(p->m), err))) return rumor_last_error();
    /* The same initial parameters everywhere, as `rumor node` (--init-seed = --seed). */
    if ((rc = rumor_model_init(p->m, c->seed)) != RUMOR_OK)
        return rumor_fail(err, rc, "peer %d: cannot initialise the model", i);
    rumor_gossip_config_t gc = {.algo = *algo, .params = rumor_model_param_count(p->m),
                                .layout = rumor_model_layout_id(p->m), .robust = s->robust,
                                .chunk_params = rumor_codec_chunk_params(&s->codec), .secure_mix = c->secure_mix,
                                .boot = vboot(p->key)};
    if (c->secure_mix && !(p->sm = rumor_secmix_new(p->mkey, gc.boot, gc.layout, err))) return rumor_last_error();
    if (s->codec.id == RUMOR_CODEC_TOPK) {
        /* Compressed gossip (CHOCO-SGD); a lineage per peer from the seed: deterministic. */
        gc.choco = s->codec;
        gc.choco_gamma = c->consensus_step;
        rumor_rng_t lr;
        rumor_rng_init2(&lr, c->seed, 0x11e, (uint64_t)i);
        gc.lineage = rumor_rng_next(&lr) | 1;
    } else if (s->codec.id != RUMOR_CODEC_F32) {
        for (int k = 0; k < 2; k++)
            if (!(p->coded[k] = malloc(rumor_model_param_count(p->m) * sizeof *p->coded[k])))
                return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        if (!s->enc && !(s->enc = malloc(rumor_codec_encoded_len(&s->codec, RUMOR_GOSSIP_CHUNK_DEFAULT))))
            return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    }
    if (c->dp[0] && p->n_own > 0) {
        rumor_dp_config_t pv;
        if ((rc = rumor_dp_parse(&pv, c->dp, err)) != RUMOR_OK) return rc;
        pv.budget = c->dp_budget;
        /* Seeded, so that the simulation replays exactly; its noise protects nothing and
         * the summary says so (a real node's comes from libsodium: src/peer.c). */
        rumor_noise_t *ns = rumor_noise_new_seeded(c->seed, 0xd9, (uint64_t)i, err);
        if (!ns) return RUMOR_ENOMEM;
        if (!(p->dp = rumor_dp_new(&pv, p->m, p->n_own, c->batch, &ns, err))) return rumor_last_error();
    }
    if (p->n_own) {
        /* Its shard, normalised once and held by its trainer (the data set goes below). */
        const rumor_trainer_config_t tc = {.data = &s->train, .own = own, .n = p->n_own, .mean = s->mean,
                                           .std = s->std, .cache = true, .batch = c->batch, .seed = c->seed,
                                           .sched = s->sched, .lr = s->opt.lr, .total_steps = s->total_steps,
                                           .dp = p->dp};
        p->tr = rumor_trainer_new(&tc, p->m, p->o, err);
    }
    free(own);
    if (p->n_own && !p->tr) return rumor_fail(err, rumor_last_error(), "peer %d: %.200s", i, err);
    if (i == c->byzantine && s->attack.kind != RUMOR_ATTACK_NONE &&
        rumor_poison_init(&p->poison, rumor_model_param_count(p->m)) != RUMOR_OK)
        return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    memcpy(gc.self, p->key, RUMOR_KEY_LEN);
    p->gc = gc;
    if (!(p->g = rumor_gossip_new(&gc, s->topo, rumor_model_params(p->m), err))) return rumor_last_error();
    if (!(p->vkeys = malloc(((size_t)s->mcfg.view_size + 1) * sizeof *p->vkeys)) ||
        !(p->vboots = malloc(((size_t)s->mcfg.view_size + 1) * sizeof *p->vboots)))
        return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    p->state = P_JOINING;
    return RUMOR_OK;
}

static rumor_err_t setup(sim_t *s, char err[RUMOR_ERR_LEN])
{
    const rumor_sim_config_t *c = s->c;
    rumor_err_t rc;
    rumor_algo_t algo;
    rumor_model_spec_t spec;
    rumor_partition_t part;
    if ((rc = rumor_algo_parse(&algo, c->algo, err)) != RUMOR_OK) return rc;
    if (algo.kind != RUMOR_ALGO_DILOCO && c->local_steps >= 1) algo.local_steps = c->local_steps;
    algo.outer_lr = c->outer_lr;
    algo.outer_momentum = c->outer_momentum;
    s->H = algo.local_steps;
    s->total_steps = c->rounds * s->H;
    if ((rc = rumor_model_spec_parse(&spec, c->model, err)) != RUMOR_OK) return rc;
    if ((rc = rumor_partition_parse(&part, c->partition, err)) != RUMOR_OK) return rc;
    if ((rc = rumor_robust_parse(&s->robust, c->robust, err)) != RUMOR_OK) return rc;
    if ((rc = rumor_codec_parse(&s->codec, c->codec, err)) != RUMOR_OK) return rc;
    if ((rc = rumor_attack_parse(&s->attack, c->byzantine >= 0 ? c->attack : "none", err)) != RUMOR_OK) return rc;
    rumor_rng_init2(&s->attack_rng, c->seed, 0xa77ac, 0);
    if ((rc = rumor_schedule_parse(&s->sched, c->schedule[0] ? c->schedule : "constant", err)) != RUMOR_OK) return rc;
    s->sched.warmup = c->warmup;
    s->opt = rumor_optim_defaults();
    if ((rc = rumor_optim_kind_parse(&s->opt.kind, c->optimizer[0] ? c->optimizer : "sgd", err)) != RUMOR_OK) return rc;
    s->opt.lr = c->lr;
    s->opt.momentum = c->momentum;
    s->opt.weight_decay = c->weight_decay;
    if ((rc = rumor_optim_config_check(&s->opt, err)) != RUMOR_OK) return rc;

    /* Data, once for all peers. */
    if ((rc = rumor_data_load_dir(&s->train, &s->test, c->data, err)) != RUMOR_OK) return rc;
    rumor_data_stats(&s->train, &s->mean, &s->std);
    if (c->limit > 0 && (size_t)c->limit < s->train.count) s->train.count = (size_t)c->limit;

    if (!(s->be = rumor_backend_new("cpu", 1, err))) return rumor_last_error();
    if (!s->be->ops->host_memory) return rumor_fail(err, RUMOR_ENOTSUP, "virtual mode needs host memory");
    if (!(s->topo = rumor_topology_new(c->topology, c->seed, err))) return rumor_last_error();
    if ((rc = rumor_topology_check(s->topo, (size_t)s->n, err)) != RUMOR_OK) return rc;
    const rumor_model_input_t in = {1, (int)s->train.rows, (int)s->train.cols, RUMOR_DATA_CLASSES};

    if ((rc = setup_eval(s, &spec, in, err)) != RUMOR_OK) return rc;

    /* Virtual compute time of one step. */
    double step_ms = c->step_ms;
    if (!(step_ms > 0)) step_ms = rumor_model_flops(s->em, true) * (double)c->batch / NOMINAL_FLOPS * 1e3;
    s->step_us = (uint64_t)llround(step_ms * 1e3);
    if (s->step_us == 0) s->step_us = 1;
    s->latency_us = c->latency_ms > 0 ? (uint64_t)llround(c->latency_ms * 1e3) : 0;

    /* Peers. */
    s->mcfg = rumor_memb_defaults();
    s->mcfg.period_ms = MEMB_PERIOD_MS;
    s->mcfg.suspect_ms = MEMB_SUSPECT_MS;
    /* Views hold the whole swarm, so that every engine computes the same topology (as in proc
     * mode, which gives its nodes --view-size of the swarm). Beyond the default view the
     * swarm starts formed: each view is seeded with every peer, instead of a join whose
     * messages grow with the square of the swarm. */
    s->seeded = s->n - 1 > s->mcfg.view_size;
    if (s->seeded) {
        s->mcfg.view_size = s->n - 1;
        s->mcfg.passive_size = 16;
    }
    s->want_view = s->n - 1;
    if (!(s->p = calloc((size_t)s->n, sizeof *s->p)) || !(s->alive = calloc((size_t)s->n, sizeof *s->alive)) ||
        !(s->act = malloc(sizeof *s->act)) || !(s->mscratch = calloc(1, sizeof *s->mscratch)) || !(s->at_round = calloc((size_t)c->rounds + 1, sizeof *s->at_round)))
        return rumor_fail(err, RUMOR_ENOMEM, "out of memory for %d peers", s->n);
    for (int i = 0; i < s->n; i++) key_of(s->p[i].key, i), s->p[i].want_view = s->want_view;
    if (c->secure_mix) {
        /* Mask keys from the seed: the run stays deterministic. */
        if (!(s->masked = malloc(RUMOR_GOSSIP_CHUNK_DEFAULT * sizeof(uint32_t))))
            return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
        for (int i = 0; i < s->n; i++) {
            rumor_rng_t kr;
            rumor_rng_init2(&kr, c->seed, 0x5ec3, (uint64_t)i);
            uint8_t sk[32];
            for (int b = 0; b < 32; b += 8) {
                const uint64_t v = rumor_rng_next(&kr);
                for (int j = 0; j < 8; j++) sk[b + j] = (uint8_t)(v >> (8 * j));
            }
            s->p[i].mkey = rumor_secret_key_from_bytes(sk, err);
            memset(sk, 0, sizeof sk);
            if (!s->p[i].mkey) return RUMOR_ENOMEM;
        }
    }
    for (int i = 0; i < s->n; i++) s->alive[i] = true;
    s->n_alive = s->n;
    int empty = 0;
    for (int i = 0; i < s->n; i++) {
        if ((rc = setup_peer(s, i, &algo, &spec, &part, in, err)) != RUMOR_OK) return rc;
        empty += s->p[i].n_own == 0;
    }
    rumor_dataset_fini(&s->train); /* every sample now lives, normalised, in its peer's shard */
    if (empty && !c->quiet)
        rumor_log(RUMOR_LOG_WARN, "%d of %d peers own no samples under %s: they only gossip", empty, s->n,
                  c->partition);
    if (c->dp[0] && !c->quiet)
        rumor_log(RUMOR_LOG_WARN, "--dp in virtual mode: batches and noise are drawn from --seed so the run replays; "
                  "they protect nothing (real nodes, and --mode proc, draw them from libsodium)");
    s->at_round[0] = s->n;
    s->round_min = 0;
    rumor_rng_init2(&s->loss_rng, c->seed, LOSS_STREAM, 0);
    rumor_rng_init2(&s->mloss_rng, c->seed, MEMB_STREAM, 0);
    s->free_msg = -1;

    /* Churn: at a time, as events; at a round, in order of (round, index). */
    if (!(s->round_ev = malloc((size_t)(c->n_events > 0 ? c->n_events : 1) * sizeof *s->round_ev)))
        return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
    for (int e = 0; e < c->n_events; e++) {
        const rumor_sim_event_t *ev = &c->events[e];
        s->restarts |= ev->kind == RUMOR_SIM_RESTART;
        if (ev->peer >= s->n) return rumor_fail(err, RUMOR_EINVAL, "event %d: no peer %d of %d", e + 1, ev->peer, s->n);
        if (ev->at_round >= 0) {
            int k = s->n_round_ev++;
            while (k > 0 && c->events[s->round_ev[k - 1]].at_round > ev->at_round) {
                s->round_ev[k] = s->round_ev[k - 1];
                k--;
            }
            s->round_ev[k] = e;
        } else {
            const double at = ev->at_s > 0 ? ev->at_s * 1e6 : 0.0;
            if (heap_push(&s->q, (uint64_t)llround(at), EV_CHURN, e, 0) != RUMOR_OK)
                return rumor_fail(err, RUMOR_ENOMEM, "out of memory");
            s->churn_pending++;
        }
    }
    return RUMOR_OK;
}

static void worker_stop(sim_t *s)
{
    if (!s->worker_on) return;
    pthread_mutex_lock(&s->mu);
    s->quit = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->worker, NULL);
    s->worker_on = false;
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
}

/* The spread of the final models, sqrt(mean_i |x_i - mean|^2) (summary.json "model_spread"). */
static double models_spread(const sim_t *s)
{
    const size_t P = rumor_model_param_count(s->p[0].m);
    double ss = 0.0;
    for (size_t q = 0; q < P; q++) {
        double mean = 0.0;
        for (int i = 0; i < s->n; i++) mean += rumor_model_params(s->p[i].m)[q];
        mean /= s->n;
        for (int i = 0; i < s->n; i++) {
            const double d = rumor_model_params(s->p[i].m)[q] - mean;
            ss += d * d;
        }
    }
    return sqrt(ss / s->n);
}

static void teardown(sim_t *s)
{
    worker_stop(s);
    free(s->queue);
    if (s->p) {
        /* Engines first: nothing may still point into their snapshots after this. */
        for (int i = 0; i < s->n; i++) {
            vpeer_t *p = &s->p[i];
            rumor_gossip_destroy(&p->g);
            for (int k = 0; k < p->n_old_g; k++) rumor_gossip_destroy(&p->old_g[k]);
            free(p->old_g);
            free(p->ckpt.w);
            free(p->ckpt.x);
            free(p->ckpt.opt);
            free(p->ckpt.theta);
            free(p->ckpt.mom);
            rumor_memb_destroy(&p->memb);
            free(p->vkeys);
            free(p->vboots);
            rumor_poison_fini(&p->poison);
            free(p->coded[0]);
            free(p->coded[1]);
            rumor_dp_destroy(&p->dp);
            rumor_secmix_destroy(&p->sm);
            rumor_secret_key_destroy(&p->mkey);
            rumor_optim_destroy(&p->o);
            rumor_model_destroy(&p->m);
            rumor_trainer_destroy(&p->tr);
            free(p->mbuf);
        }
    }
    free(s->p);
    rumor_model_destroy(&s->em);
    rumor_topology_destroy(&s->topo);
    rumor_backend_destroy(&s->be);
    rumor_dataset_fini(&s->train);
    rumor_dataset_fini(&s->test);
    free(s->evx);
    free(s->evy);
    free(s->q.v);
    free(s->msgs);
    free(s->alive);
    free(s->act);
    free(s->enc);
    free(s->masked);
    free(s->mscratch);
    for (int k = 0; k < s->n_mm; k++) free(s->mm[k]);
    free(s->mm);
    free(s->mm_free);
    free(s->at_round);
    free(s->round_ev);
}

// ---- the run ----

static void show_status(sim_t *s, double t0, bool final)
{
    if (s->c->quiet) return;
    rumor_sim_status_t st;
    rumor_sim_status_read(s->c->out, s->n, s->alive, s->c->rounds, rumor_now() - t0, &st);
    rumor_sim_status_print(s->c, &st, isatty(STDERR_FILENO) == 1, final);
}

rumor_err_t rumor_sim_run_virtual(const rumor_sim_config_t *c, const atomic_bool *stop, char err[RUMOR_ERR_LEN])
{
    sim_t s = {.c = c, .n = c->peers};
    rumor_err_t rc = RUMOR_OK;
    char path[1100];
    const double t0 = rumor_now();
    bool interrupted = false;
    if (!c->out[0]) return rumor_fail(err, RUMOR_EINVAL, "virtual mode: no run folder given");
    if (c->peers < 1 || c->peers > RUMOR_SIM_MAX_PEERS)
        return rumor_fail(err, RUMOR_EINVAL, "--peers %d: expected 1..%d", c->peers, RUMOR_SIM_MAX_PEERS);
    if (c->rounds < 1) return rumor_fail(err, RUMOR_EINVAL, "--rounds %ld: expected at least 1", c->rounds);
    if (c->batch < 1) return rumor_fail(err, RUMOR_EINVAL, "--batch %d: expected at least 1", c->batch);
    if (!(c->loss >= 0 && c->loss <= 1)) return rumor_fail(err, RUMOR_EINVAL, "loss %g: expected 0..1", c->loss);

    /* The run folder and one empty metrics file per peer. */
    if ((rc = rumor_make_dirs(c->out, 0755, err)) != RUMOR_OK) return rc;
    for (int i = 0; i < c->peers; i++) {
        snprintf(path, sizeof path, "%s/peer-%03d", c->out, i);
        if ((rc = rumor_make_dirs(path, 0755, err)) != RUMOR_OK) return rc;
        snprintf(path, sizeof path, "%s/peer-%03d/metrics.jsonl", c->out, i);
        FILE *f = fopen(path, "w");
        if (!f || fclose(f) != 0) return rumor_fail(err, RUMOR_EIO, "%s: %s", path, strerror(errno));
    }
    if ((rc = setup(&s, err)) != RUMOR_OK) goto out;
    /* The second core, when there is one, computes local phases (see sim_t). */
    s.q_cap = 4 * s.n + 16;
    if (sysconf(_SC_NPROCESSORS_ONLN) >= 2 && (s.queue = malloc((size_t)s.q_cap * sizeof *s.queue))) {
        pthread_mutex_init(&s.mu, NULL);
        pthread_cond_init(&s.cv, NULL);
        s.worker_on = pthread_create(&s.worker, NULL, worker_main, &s) == 0;
        if (!s.worker_on) {
            pthread_mutex_destroy(&s.mu);
            pthread_cond_destroy(&s.cv);
        }
    }

    /* Round 0: every peer evaluated at its start; it joins, and trains once in the swarm. */
    for (int i = 0; i < s.n && s.rc == RUMOR_OK; i++) {
        if (model_line(&s, i, NULL) != RUMOR_OK) break;
        if (s.restarts && ckpt_save(&s, i) != RUMOR_OK) break; /* killed before its first: it starts over */
    }
    for (int i = 0; i < s.n && s.rc == RUMOR_OK; i++) (void)memb_start(&s, i, 1);
    (void)round_churn(&s);
    if (s.rc == RUMOR_OK && metrics_flush_all(&s) == RUMOR_OK) show_status(&s, t0, false);

    double last_show = rumor_now();
    const double show_every = PROGRESS_S * (s.n > PROGRESS_PEERS ? (double)s.n / PROGRESS_PEERS : 1.0);
    while (s.rc == RUMOR_OK && s.q.n > 0) {
        if (rumor_asked(stop)) {
            interrupted = true;
            break;
        }
        const event_t e = heap_pop(&s.q);
        s.now_us = e.t;
        s.events++;
        switch (e.kind) {
        case EV_PHASE: {
            vpeer_t *p = &s.p[e.a];
            if (p->inc != e.b || p->state != P_COMPUTING) break; /* killed since */
            if (ensure_phase(&s, e.a) != RUMOR_OK) break;
            s.progress_us = s.now_us;
            p->state = P_WAITING;
            (void)try_gossip(&s, e.a);
            break;
        }
        case EV_RETRY: {
            vpeer_t *p = &s.p[e.a];
            if (p->inc != e.b) break;
            if (p->retry_ms * 1000 == e.t) p->retry_ms = 0;
            (void)try_gossip(&s, e.a);
            break;
        }
        case EV_ARRIVE:
            (void)arrive(&s, e.a);
            break;
        case EV_CHURN:
            s.churn_pending--;
            (void)fire_churn(&s, e.a);
            (void)round_churn(&s);
            break;
        case EV_MTICK:
            if (s.p[e.a].inc == e.b && s.p[e.a].mtick_us == e.t) (void)memb_tick(&s, e.a);
            break;
        case EV_MMSG:
            (void)memb_arrive(&s, e.a);
            break;
        }
        /* Membership ticks never end: the run does when no peer has rounds to go and no churn
         * can bring one back, or when nothing has progressed for an hour of virtual time (an
         * engine waiting with no deadline; not expected: said below). */
        if (e.kind == EV_MTICK && s.now_us >= s.done_check_us) {
            /* (at most every 100 ms of virtual time: a tick per peer per quarter period would
             * make this scan quadratic in the swarm) */
            s.done_check_us = s.now_us + 100000;
            bool active = false;
            for (int i = 0; i < s.n && !active; i++)
                active = running(&s.p[i]) || s.p[i].state == P_JOINING;
            if ((!active && s.churn_pending == 0) || s.now_us > s.progress_us + 3600000000ULL) break;
        }
        if (s.events % PROGRESS_EVENTS == 0 && !c->quiet && rumor_now() - last_show >= show_every) {
            if (metrics_flush_all(&s) != RUMOR_OK) break;
            show_status(&s, t0, false);
            last_show = rumor_now();
        }
    }
    if (interrupted) s.end_us = s.now_us;
    if (s.rc == RUMOR_OK && !interrupted) {
        for (int i = 0; i < s.n; i++)
            if (running(&s.p[i])) {
                /* No event left, yet a live peer has rounds to go: an engine waits with no
                 * deadline and nothing in flight. Not expected; say so rather than hang. */
                rumor_log(RUMOR_LOG_WARN, "virtual: peer %d stuck at round %ld with no event pending", i, s.p[i].k);
                break;
            }
    }

    /* Whatever happened, the metrics written so far go to their files and the summary. */
    {
        const rumor_err_t frc = metrics_flush_all(&s);
        if (s.rc != RUMOR_OK) {
            rc = s.rc;
            snprintf(err, RUMOR_ERR_LEN, "%s", s.err);
            goto out;
        }
        if ((rc = frc) != RUMOR_OK) goto out;
    }
    show_status(&s, t0, true);
    if ((rc = rumor_sim_write_summary(c, (double)s.end_us / 1e6, interrupted, models_spread(&s), err)) != RUMOR_OK)
        goto out;
    if (!c->quiet)
        rumor_log(RUMOR_LOG_INFO, "virtual run: %.3f s of virtual time in %.1f s real, %" PRIu64
                  " events, local phases computed %" PRIu64 " here and %" PRIu64 " on a second thread%s",
                  (double)s.end_us / 1e6, rumor_now() - t0, s.events, s.phases_main, s.phases_worker,
                  interrupted ? " (interrupted)" : "");
    if (c->plots) rumor_sim_plot(c->out);
out:
    teardown(&s);
    return rc;
}
