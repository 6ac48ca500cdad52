/*
 * virtual_impl.h - virtual mode's inside, shared by its files (not an interface): virtual.c
 * (the event loop, files, training, gossip, the run), virtual_churn.c (the live set, membership,
 * kills, restarts and checkpoints, partitions) and virtual_setup.c (setting up and tearing down).
 */
#ifndef RUMOR_VIRTUAL_IMPL_H
#define RUMOR_VIRTUAL_IMPL_H

#include "sim.h"
#include "fileio.h"
#include "attack.h"
#include "backend.h"
#include "codec.h"
#include "core.h"
#include "data.h"
#include "dp.h"
#include "gossip.h"
#include "secmix.h"
#include "wire.h"
#include "membership.h"
#include "model.h"
#include "optim.h"
#include "rng.h"
#include "source.h"
#include "topology.h"
#include "trace.h"
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
#define EVAL_SLICE 64                      /* an mlp's evaluation runs this many images at a time */
#define EVAL_WINDOWS 32                    /* text: validation windows a batch */
#define PROGRESS_EVENTS 256                /* events between looks at the real clock */
#define PROGRESS_S 0.5                     /* real seconds between status displays, per ... */
#define PROGRESS_PEERS 256                 /* ... this many peers: reading every peer's metrics
                                              file costs time, about 4% of a 1024-peer run at
                                              one display per 2 s */
#define METRICS_FLUSH (64 * 1024)          /* a peer's buffered metrics go to its file beyond this */

// ---- the event queue: a binary heap ordered by (time, peer, insertion sequence) ----

typedef enum { EV_PHASE, EV_RETRY, EV_ARRIVE, EV_CHURN, EV_MTICK, EV_MMSG, EV_VIEW, EV_DONE } ev_kind_t;

typedef struct {
    uint64_t t;   /* virtual microseconds */
    uint32_t peer; /* whose event (an arrival's receiver; churn: 0): equal times pop peer by peer ... */
    uint64_t seq;  /* ... and one peer's in the order they were pushed */
    int kind;
    int a;        /* phase, retry, mtick, view: the peer; arrive, mmsg: the message; churn: the event */
    uint32_t b;   /* phase, retry, mtick: the peer's incarnation when scheduled; view: which; done: how many */
} event_t;

typedef struct {
    event_t *v;
    size_t n, cap;
    uint64_t seq;
} heap_t;

// ---- peers, messages, the whole simulation ----

typedef enum { P_COMPUTING, P_WAITING, P_FINISHED, P_DEAD, P_JOINING } pstate_t;

#define CKPT_EVERY 10 /* rounds between a peer's checkpoints when the run restarts peers (as proc's) */

/* What a peer's checkpoint file would hold (src/peer/peer.c save_checkpoint), kept in memory: a
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
    float *gx;               /* dadamw: the model and its second moment, as the engine mixes them;
                                the Byzantine peer under compressed gossip: its poisoned model */
    bool poison_gx;          /* ... which its public copy follows (gx is never taken back) */
    uint8_t key[RUMOR_KEY_LEN];
    rumor_source_shard_t shard; /* its part of the training split (images: freed once its trainer
                                   holds it, normalised) */
    size_t n_own;            /* samples in this peer's shard; text: its tokens */
    rumor_trainer_t *tr;     /* its local steps, over its shard (NULL: it owns none) */
    pstate_t state, before_kill;
    uint32_t inc;            /* incarnation: bumped by kill and restart, stale events are skipped */
    rumor_core_t core;       /* its round (src/peer/core.h): rounds done, budget, the round's steps and loss */
    rumor_core_phase_t ph;   /* the steps of its phase (the schedule's, taken on either core) */
    uint64_t wait_done_us;   /* its waits at the earlier gossip points of its round (overlapped diloco) */
    uint64_t retry_ms;       /* deadline of the pending retry event (0: none) */
    rumor_wire_link_t link;  /* its uplink (emulated) */
    uint64_t waits_from_us;  /* when its local phase ended: its wait on gossip starts */
    uint64_t bytes_out;
    rumor_memb_t *memb;      /* its membership state machine */
    uint8_t (*vkeys)[RUMOR_KEY_LEN]; /* its engine's view: itself and its members */
    uint64_t *vboots;                       /* ... and their boot ids (vboot) */
    uint64_t *vplaces;                      /* ... and places (a replay: the nodes'; else 0) */
    bool view_dirty;         /* the membership view changed since the engine got it */
    int view_peers;          /* members in that view (with itself) */
    uint64_t mtick_us;       /* when its pending membership tick fires (0: none) */
    uint64_t view_changed_us;/* the last change of its membership view */
    rumor_dp_t *dp;        /* DP-SGD (--dp), for peers that own samples */
    rumor_wire_enc_t coded;  /* --codec: each snapshot encoded once a round, as a node's */
    rumor_poison_t poison;   /* the Byzantine peer: what it sends instead of each snapshot */
    rumor_secret_key_t *mkey;/* --secure-mix: its X25519 key for masks (identities here are indices) */
    rumor_secmix_t *sm;
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
    rumor_trace_t *trace;    /* --trace-peers, --replay: its round events (trace.h) */
    bool trace_started;
    int rview;               /* --replay: the node's view it has now (-1: none yet) */
    int rdone;               /* --replay: members it heard say they finished */
    int job;                 /* JOB_NONE, JOB_QUEUED, JOB_RUNNING, JOB_DONE */
    rumor_err_t job_rc;
    char job_err[RUMOR_ERR_LEN];
    /* its evaluation as a job (virtual_jobs.c): the metrics line that waits for it */
    int ejob;                /* JOB_... */
    float *ex;               /* the parameters evaluated, copied when the line was made */
    rumor_metrics_line_t eline;
    rumor_err_t ejob_rc;
    char ejob_err[RUMOR_ERR_LEN];
} vpeer_t;

enum { JOB_NONE, JOB_QUEUED, JOB_RUNNING, JOB_DONE };
#define EVAL_PENDING_BYTES ((size_t)64 << 20) /* parameters held for evaluations not yet made */

typedef struct {
    int *v;
    int head, count, cap;
} ring_t;

/* An evaluation model, one per thread: it keeps the parameters it last evaluated, and
 * bit-identical ones (every peer at round 0) give the same answer without computing it again. */
typedef struct {
    rumor_model_t *m;        /* max_batch = eval_batch; the test subset in its input buffer when
                                the subset is one batch */
    bool valid;
    double loss, acc;
} evm_t;

typedef struct {
    int from, to;
    uint32_t from_inc;       /* the sender's incarnation at send time: a kill drops the message */
    rumor_gossip_t *g;       /* the engine that lent it (a restart makes a new one) */
    int next_free;
    rumor_gossip_send_t s;   /* params points into the sender's snapshot until released */
    bool lost;               /* --replay: the receiving node never had it */
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

/* --replay: a proc-mode run's traces (replay.c), times from its first peer's start. */
typedef struct {
    uint64_t t;
    int n, *idx;             /* the members (indices), itself not among them */
} rview_t;
typedef struct {
    int from;
    uint64_t round, t;       /* a model of from's round came in whole at t */
} rarr_t;
typedef struct {
    uint64_t start;
    bool has_start;
    uint64_t *phase;         /* its gossip points */
    int n_phase, next_phase;
    rview_t *view;
    int n_view;
    rarr_t *arr;             /* by (from, round) */
    int n_arr;
    long resync_k;           /* it joined the swarm at this round (rounds done; -1: it did not) */
    uint64_t resync_round;   /* ... taking the model of the engine's round */
    uint64_t *done_t;        /* when the members that said they finished became done_n */
    int *done_n, n_done;
} rpeer_t;
typedef struct {
    int n;
    uint8_t (*keys)[RUMOR_KEY_LEN];
    uint64_t *places;        /* each node's place in the graph's order (its trace's self line; 0: none) */
    rpeer_t *p;
} virt_replay_t;

typedef struct {
    const rumor_sim_config_t *c;
    int n;
    bool replaying;          /* --replay */
    virt_replay_t replay;
    long H;                  /* local steps per round */
    rumor_core_config_t core_c; /* every peer's round (src/peer/core.h) */
    long total_steps;        /* for the schedule: rounds * H */
    rumor_schedule_t sched;
    rumor_optim_config_t opt;
    uint64_t step_us, latency_us;
    rumor_source_t src;      /* the data, loaded once for all peers */
    rumor_backend_t *be;
    rumor_topology_t *topo;
    vpeer_t *p;
    /* evaluation */
    evm_t ev[2];             /* the main thread's, the worker's (m NULL: evaluations stay here) */
    size_t n_eval, eval_batch;
    float *evx;              /* n_eval normalised test images (NULL when loaded once into ev[k].m) */
    int32_t *evy;
    float **ebuf;            /* free parameter copies for evaluations queued (virt_eval_later) */
    int n_ebuf, made_ebuf, cap_ebuf;
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
    rumor_wire_in_t wire_in; /* the receivers' scratch: chunks arrive through the node's path (wire.h) */
    uint8_t *masked;         /* --secure-mix: one masked model, on its way to its receiver */
    size_t *masked_off;      /* its chunks' bytes */
    rumor_rng_t attack_rng;
    /* who is there */
    bool *alive;             /* not killed (for the status display and churn) */
    int n_alive;
    int n_finished;          /* peers whose state is P_FINISHED (finished_seen looks only past 1) */
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
    /* A worker thread runs local phases queued at their start, and evaluations queued with
     * the metrics line that waits for them, while this thread handles events. A phase touches
     * only its own peer's model, optimizer and shard, and its result is needed only at its end
     * event; an evaluation reads a copy of the parameters, and its line is written before the
     * peer's next one. So the results, and the run, are the same whichever thread computes them
     * and when: still deterministic. */
    pthread_t worker;
    bool worker_on, quit;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ring_t phases, evals;    /* jobs queued, by peer index (some taken back since) */
    uint64_t phases_worker, phases_main; /* who computed how many (shown at the end) */
    uint64_t evals_worker, evals_main;
} sim_t;

/* virtual.c */
void virt_metrics_path(const sim_t *s, int i, char *buf, size_t len);
int virt_index_of(const sim_t *s, const uint8_t key[RUMOR_KEY_LEN]);
void virt_key_of(uint8_t key[RUMOR_KEY_LEN], int i);
/* Equal times pop peer by peer: a receiver's round completes as its own arrivals are handled
 * rather than all at the end of a round's burst, so its next phase is queued early. */
rumor_err_t virt_heap_push(heap_t *h, uint64_t t, int peer, int kind, int a, uint32_t b);
rumor_err_t virt_try_gossip(sim_t *s, int i);
rumor_err_t virt_fail(sim_t *s, rumor_err_t rc, const char *fmt, ...) RUMOR_PRINTF(3, 4);
rumor_err_t virt_model_line(sim_t *s, int i, const char *flag);
/* Peer i's line waiting for its evaluation, if any, written into its buffer now: before a
 * checkpoint counts the peer's metrics, and before a restart cuts them back to it. */
rumor_err_t virt_metrics_settle(sim_t *s, int i);
bool virt_finish_with_swarm(sim_t *s, int i);

/* virtual_jobs.c: the worker and its jobs. A phase is queued at its start and done when
 * virt_ensure_phase returns; an evaluation of peer i's parameters now, for line l, is queued
 * by virt_eval_later (false: it cannot be, evaluate now), and virt_eval_wait gives the line
 * back with its figures once done (either waits or computes it here). */
void virt_worker_start(sim_t *s);
void virt_worker_stop(sim_t *s);
void virt_queue_phase(sim_t *s, int i);
rumor_err_t virt_ensure_phase(sim_t *s, int i);
rumor_err_t virt_evaluate(sim_t *s, int i, double *loss, double *acc);
bool virt_eval_later(sim_t *s, int i, const rumor_metrics_line_t *l);
bool virt_eval_pending(sim_t *s, int i);
rumor_err_t virt_eval_wait(sim_t *s, int i, rumor_metrics_line_t *l);
void virt_jobs_free(sim_t *s);

/* virtual_churn.c */
bool virt_running(const vpeer_t *p);
rumor_err_t virt_memb_arrive(sim_t *s, int id);
rumor_err_t virt_fire_churn(sim_t *s, int idx);
bool virt_cut(const sim_t *s, int a, int b);
rumor_err_t virt_memb_drain(sim_t *s, int i);
rumor_err_t virt_memb_tick(sim_t *s, int i);
rumor_err_t virt_ckpt_save(sim_t *s, int i);
rumor_err_t virt_memb_start(sim_t *s, int i, uint32_t inc);
void virt_view_set(sim_t *s, int i);
rumor_err_t virt_schedule_phase(sim_t *s, int i);
rumor_err_t virt_round_churn(sim_t *s);
uint64_t virt_vboot(const uint8_t key[RUMOR_KEY_LEN]);
void virt_round_min_advance(sim_t *s);
void virt_core_start(sim_t *s, int i, long k);

/* virtual_setup.c */
double virt_models_spread(const sim_t *s);
rumor_err_t virt_setup(sim_t *s, char err[RUMOR_ERR_LEN]);
void virt_teardown(sim_t *s);

/* replay.c: a proc run's traces in dir, for n peers (RUMOR_EFORMAT with err when one is not
 * there or not a trace); free; a key's peer (-1: none); when a model of from's round came in
 * at peer `to` (false: it never did); the time of peer i's next gossip point (*known false
 * once the trace has no more). */
rumor_err_t virt_replay_load(virt_replay_t *r, const char *dir, int n, char err[RUMOR_ERR_LEN]);
void virt_replay_free(virt_replay_t *r);
int virt_replay_index(const virt_replay_t *r, const uint8_t key[RUMOR_KEY_LEN]);
bool virt_replay_arrival(const virt_replay_t *r, int to, int from, uint64_t round, uint64_t *t);
uint64_t virt_replay_phase_end(virt_replay_t *r, int i, bool *known);

#endif
