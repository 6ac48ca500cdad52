/*
 * peer.h - a training peer: `rumor node` with data. The node (src/net/node.h) on this thread,
 * a trainer thread, and the gossip engine (gossip.h) between them.
 *
 * Threads. The node's poll loop runs on the calling thread; the trainer runs local steps on
 * its own. They share only the engine, behind one mutex owned here: the node's chunk
 * callback mixes each arriving chunk into the engine (so a chunk is accumulated where it
 * lands, with no copy through a pipe), its tick callback hands the engine's outbox to the
 * transport, and the trainer takes the lock only at its gossip points. The trainer wakes the
 * node through rumor_node_wake when it has something to send; the node wakes the trainer
 * through a condition variable when a chunk or a finished send may end its wait.
 *
 * Files in the run folder: metrics.jsonl (one line per round: t, round, step, loss, lr,
 * consensus, w, peers, missing, bytes_out, bytes_in, wait_s, deadline_s, and test_acc/test_loss every
 * --eval-every rounds), checkpoint.safetensors (at every --checkpoint-every-th round or else
 * every minute, at the end, and on SIGINT/SIGTERM; model, optimizer and the gossip state: round, push-sum
 * weights, DiLoCo's outer parameters and momentum), model.safetensors (the exported model
 * at the end), command.txt (the command line, to rerun the peer by hand).
 *
 * Falling into step (resync): a fresh peer joining a running swarm, or a resumed one, asks up
 * to three members for their models (`pull`; each answer carries the model's BLAKE2b hash and
 * the member's round) and takes one only when two confirm each other: their mean, at the
 * lower of their rounds. A fresh peer does so only when the swarm is 4 or more rounds in
 * (fewer: it is starting together); a resumed one only when the swarm is 4 or more rounds
 * ahead of its checkpoint. One member alone never hands a peer a model.
 *
 * Finishing: a peer done with its rounds tells every member (node.h rumor_node_set_done),
 * leaves their gossip views and stays linger_ms answering pulls with its final model. A peer
 * that finds every member finished takes two confirming final models' mean, or keeps its own,
 * and ends (p->swarm_over): status 0, as finished.
 */
#ifndef RUMOR_PEER_H
#define RUMOR_PEER_H

#include "attack.h"
#include "codec.h"
#include "data.h"
#include "dp.h"
#include "gossip.h"
#include "model.h"
#include "node.h"
#include "optim.h"
#include "base.h"
#include "safetensors.h"

#include <stdatomic.h>
#include <stdbool.h>

typedef struct {
    rumor_node_config_t node;
    const char *data_dir;
    bool partitioned;            /* take shard `rank` of `of` (experiments); else all of data_dir */
    rumor_partition_t partition;
    int rank, of;
    size_t limit;                /* first N training samples only; 0: all */
    rumor_model_spec_t spec;
    int vocab;                   /* gpt on token files: their vocabulary; 0: the default */
    float clip_grad;             /* global gradient norm clipping; 0: none */
    const char *device;
    const struct rumor_backend_ops *backend_ops; /* not NULL: this backend instead (tests) */
    int threads;
    int batch;
    uint64_t seed;               /* partition and sample order: the same on every peer */
    uint64_t init_seed;          /* initial parameters; peers usually share it */
    rumor_optim_config_t opt;
    rumor_schedule_t sched;
    rumor_algo_t algo;           /* local_steps already set (diloco:H, or --local-steps) */
    const char *topology;
    long rounds;
    const char *run_dir;
    const char *trace;           /* its round events, one line each (trace.h); NULL or "": none */
    int eval_every;              /* rounds between test evaluations; 0: only at start and end */
    int checkpoint_every;        /* checkpoint at rounds that are multiples of it; 0: every minute (and at the end, on stop) */
    bool resume;                 /* continue from run_dir/RUMOR_PEER_CHECKPOINT */
    /* Metadata its checkpoints record besides its state: the settings it was made with
     * (rumor_settings_record), so that a resume can take them back. */
    const rumor_st_meta_t *settings;
    int n_settings;
    bool late_join;              /* a fresh peer first takes a neighbour's model if the swarm runs */
    uint64_t linger_ms;          /* after training, stay this long to answer late peers' pulls */
    bool linger_given;           /* ... as the user asked: else a peer leaves 2 s after every member
                                    in its view said it finished, none suspect (LINGER_GRACE_MS) */
    int min_peers;               /* start training once the view holds min_peers - 1 others */
    uint64_t round_timeout_ms;
    double slowdown;             /* >= 1: compute this many times slower (a straggler, for experiments) */
    rumor_robust_t robust;       /* robust mixing of what neighbours send */
    rumor_attack_t attack;       /* send poisoned models instead (a Byzantine peer, for experiments) */
    rumor_dp_config_t dp;      /* DP-SGD (dp.on) and its budget */
    rumor_codec_t codec;         /* how the models it sends are encoded (float32, fp16, bf16, int8) */
    bool secure_mix;             /* neighbourhood masked averaging (secmix.h); no pulls, no late join */
    double consensus_step;       /* --codec topk: CHOCO's gamma; 0: the engine's default */
    /* An emulated network for the models this peer sends (experiments on one machine): each
     * model leaves after latency plus its size over the bandwidth (one at a time, like an
     * uplink), or is lost with probability loss. 0: off. */
    double emu_latency_ms, emu_bandwidth_mbps, emu_loss;
    const char *command_line;    /* written to run_dir/command.txt */
    /* The caller's requests (its signal handlers set them; NULL: none): stop the peer (it
     * leaves gracefully), and re-read the revocation list (cleared when done). The peer looks
     * at them every node tick (100 ms at most). */
    const atomic_bool *stop;
    atomic_bool *reload;
    /* Told the node's address (rumor://KEY@HOST:PORT) once it listens: how others join
     * through it. NULL: nobody (library code prints nothing). */
    void (*listening)(const char *address);
} rumor_peer_config_t;

/* A training peer's checkpoint, in its run folder. */
#define RUMOR_PEER_CHECKPOINT "checkpoint.safetensors"

typedef struct {
    long rounds;                 /* gossip rounds done by this run (all, with a resume) */
    double test_acc, test_loss;  /* at the end */
    bool interrupted;
} rumor_peer_result_t;

/* Run a training peer until its rounds are done or cfg->stop is set. Errors as rumor_node_run
 * and rumor_train_run, with err saying what and where. */
rumor_err_t rumor_peer_run(const rumor_peer_config_t *cfg, rumor_peer_result_t *res,
                           char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

#endif
