/*
 * peer_impl.h - a training peer's inside, shared by its two files (not an interface):
 * peer.c (checkpoints, the trainer thread, resync and finishing, setup) and peer_node.c (the
 * node's side: chunks in, sends out with codec, masks and the emulated network, pulls, the
 * tick, status).
 */
#ifndef RUMOR_PEER_IMPL_H
#define RUMOR_PEER_IMPL_H

#include "peer.h"
#include "swarm.h"

#include "trainer.h"
#include "backend.h"
#include "checkpoint.h"
#include "core.h"
#include "crypto.h"
#include "fileio.h"
#include "layout.h"
#include "rng.h"
#include "safetensors.h"
#include "secmix.h"
#include "trace.h"
#include "wire.h"
#include "topology.h"
#include "source.h"
#include "train.h"
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define EVAL_BATCH 256
#define MAX_VIEW 256
#define MASK_POOL 16 /* masked send buffers kept for reuse */
#define RESYNC_EVERY 10.0  /* seconds: asked again at most this often */
#define LINGER_GRACE_MS 2000 /* a finished peer leaves this long after every member in view has (unless --linger) */

struct peer {
    const rumor_peer_config_t *cfg;
    /* What the engine mixes: P floats of the model laid out as `layout` says (its id), then
     * `extra` of optimizer state (dadamw's second moment). */
    size_t P, extra;
    uint64_t layout;
    rumor_node_t *node;
    bool mu_init;             /* mu, pool_mu and cv exist */
    /* The node's run (swarm_node_main): its result, on whichever thread ran it */
    rumor_err_t nrc;
    char nerr[RUMOR_ERR_LEN];
    pthread_t node_th;        /* a library peer's node thread (swarm_start_node) */
    atomic_bool node_th_up;
    uint64_t linger_until, all_since; /* swarm_linger: when it ends, and since when every member finished */
    /* Layouts that differ (peer_layout.c): our layout's text and parse, the members whose run
     * was sent it (node thread), and the first difference of each member run that sent us
     * theirs (under mu): logged once each, the last in status, the library's to report. */
    char *layout_text;
    size_t layout_text_len;
    rumor_layout_t layout_ours;
    struct layout_sent { uint8_t key[32]; uint64_t boot; int tries; } layout_sent[MAX_VIEW];
    int n_layout_sent;
    struct layout_heard { uint8_t key[32]; uint64_t layout; } layout_heard[MAX_VIEW];
    int n_layout_heard, layout_reported;
    char layout_mismatch[RUMOR_ERR_LEN];
    rumor_topology_t *topo;
    rumor_gossip_t *g;
    pthread_mutex_t mu;       /* guards g, view_count, bytes_out */
    pthread_cond_t cv;        /* a chunk arrived, a send finished, or a stop */
    atomic_bool stop;         /* the trainer should stop (signal, or the node ended) */
    atomic_bool trainer_done;
    int view_count;
    uint64_t bytes_out;
    uint64_t relayed_out;     /* models sent through a relay (guarded by mu) */
    uint8_t view_keys[MAX_VIEW][32]; /* the tick's scratch: admitted members */
    uint64_t view_boots[MAX_VIEW];   /* ... and the boot ids of their runs (secure mixing) */
    uint64_t view_reach[MAX_VIEW];   /* ... and who can dial them (rumor_node_reach) */
    uint64_t view_place[MAX_VIEW];   /* ... and their places in the graph's order */
    /* Members (under mu, from the tick): admitted ones, and how many of them said they
     * finished (PROTOCOL.md "Finishing"); the gossip view is the others. */
    int n_members, n_done;
    int n_other_layout;       /* admitted members training another model (left out of everything) */
    /* Pulls (under mu): the trainer wants a member's model, the tick asks one it has not asked
     * in this resync (a finished one when pull_want_done), the chunk callback assembles and
     * verifies the answer. PULL_NOBODY: no member left to ask. */
    enum { PULL_NONE, PULL_WANTED, PULL_ASKED, PULL_DONE, PULL_NOBODY } pull_state;
    uint8_t pull_asked[RUMOR_RESYNC_ASKS][32];
    int n_asked;
    bool pull_want_done;
    uint64_t pull_done;       /* the member asked had finished, at this round (0: training) */
    uint64_t pull_asked_ms;   /* when it was asked (again) */
    int pull_resends;
    uint8_t pull_peer[32];
    float *pull_buf;
    uint64_t *pull_bits;
    size_t pull_chunks, pull_got;
    uint64_t pull_round;
    uint8_t pull_hash[RUMOR_HASH_LEN];
    bool pull_ok;
    /* Once training is over (lingering): the final model is what pulls get (under mu). */
    bool finished;
    const float *final_x;
    uint64_t final_round;
    uint8_t final_hash[RUMOR_HASH_LEN];
    /* trainer's */
    float *ans[RUMOR_RESYNC_ASKS];  /* pulled models kept while a resync looks for two that agree */
    double last_resync;
    bool swarm_over;          /* the swarm finished without us: this peer ends where it is */
    rumor_source_t src;          /* what it trains on and is judged by */
    rumor_trainer_t *tr;      /* the local steps */
    rumor_backend_t *be;
    rumor_model_t *m;
    rumor_optim_t *o;
    FILE *metrics;
    rumor_core_t core;        /* its round (src/peer/core.h): rounds done, budget (trainer thread) */
    double t0;
    char ckpt_path[1024], model_path[1024];
    rumor_err_t trc;
    char terr[RUMOR_ERR_LEN];
    /* emulated network (node thread only) */
    bool emulate;
    struct send_ctx *delayed[256];
    int n_delayed;
    struct send_ctx *retry[64];   /* sends the node could not take yet, in order (retry_sends) */
    int n_retry;
    rumor_wire_link_t uplink; /* the emulated network's (wire.h) */
    rumor_rng_t emu_rng;
    /* a Byzantine peer (--attack): what it sends instead of each snapshot, per snapshot */
    rumor_poison_t poison;
    rumor_rng_t attack_rng;
    rumor_dp_t *dp;         /* DP-SGD, when on (trainer thread; epsilon read under mu) */
    /* Parameters on a device (the backend's memory is not host memory): the engine mixes host
     * memory, so hx (host_alloc, page-locked) mirrors them at gossip points (NULL on
     * host-memory backends, where the engine mixes the model's buffer). */
    float *hx;
    float *gx;               /* dadamw: the model and its second moment, as the engine mixes them */
    /* --codec: each snapshot encoded once (node thread), and a chunk decoded on arrival */
    rumor_wire_enc_t enc;     /* --codec: each snapshot encoded once a round */
    rumor_wire_in_t wire_in;  /* chunks in: any neighbour's codec decodes here (under mu) */
    rumor_secmix_t *secmix;   /* --secure-mix (node thread) */
    /* Masked buffers of sends released, for the next ones: a fresh 1 MiB buffer costs its page
     * faults on every send (a third of the masking time measured). Under pool_mu. */
    pthread_mutex_t pool_mu;
    uint8_t *mask_pool[MASK_POOL];
    int n_mask_pool;
    uint64_t mask_fails;      /* sends that could not be masked (under mu) */
    /* Masks depend on (pair, receiver, round) only: a round masked twice with two models would
     * give its receiver their difference. Rounds below mask_reserved may have been sent by
     * this life or an earlier one (run_dir/secure-mix.round keeps the bound across restarts);
     * a round is masked only once the file covers it. Node thread. */
    uint64_t mask_reserved;
    char mask_path[1024];
    double epsilon;           /* spent so far (under mu) */
    bool interrupted;
    bool complete;            /* resumed from a checkpoint of its last round: nothing to train */
    bool all_finished;        /* every member in view said it finished, none suspect (under mu) */
    double test_acc, test_loss;
    /* --trace: its round events (trace.h; the trainer and the node thread write) */
    rumor_trace_t *trace;
    uint8_t traced_view[MAX_VIEW][32]; /* the view last written (the tick sets it every time) */
    int traced_n;                      /* -1: none yet */
};

typedef struct send_ctx {
    peer_t *p;
    rumor_gossip_send_t s;
    uint64_t due;             /* emulated network: when it may leave */
    uint8_t *masked;          /* --secure-mix: this send's masked chunks (they differ per receiver) */
    size_t *masked_off;
    bool final;               /* the final model, not a snapshot lent by the engine */
    uint64_t made;            /* when the engine lent it (ms) */
} send_ctx_t;

/* peer_node.c: the node's side */
void peer_chunk_cb(void *arg, const uint8_t peer[32], const rumor_msg_model_t *m);
rumor_err_t peer_mask_floor(peer_t *p, char err[RUMOR_ERR_LEN]);
void peer_send_ctx_free(send_ctx_t *c);
size_t peer_status_cb(void *arg, bool json, char *buf, size_t cap);
void peer_pull_cb(void *arg, rumor_node_t *node, const uint8_t peer[32], uint64_t layout);
void peer_tick_cb(void *arg, rumor_node_t *node, uint64_t now);

/* peer_layout.c: layouts that differ */
void peer_layout_member(peer_t *p, rumor_node_t *node, const rumor_node_member_t *m);
void peer_layout_cb(void *arg, const uint8_t peer[32], uint64_t layout, const char *text, size_t len);

#endif
