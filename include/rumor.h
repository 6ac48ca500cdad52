/*
 * rumor.h - librumor, the C library of rumor: one peer of a rumor swarm inside a program of
 * your own. The one public header: every function librumor exports is declared here, and
 * nothing else is exported.
 *
 * rumor trains models in a peer-to-peer swarm: peers gossip their parameters over CurveZMQ
 * (always encrypted; a peer is admitted only with a certificate of the swarm's authority) and
 * mix them with their neighbours' after their local steps. `rumor node` does that for rumor's
 * own models; this library does it for yours: you register your tensors, train on them in
 * place, and call one function at each gossip point.
 *
 * Lifecycle
 *
 *     rumor_peer_open(settings, pairs)       settings by name; keys read, sockets bound
 *     rumor_peer_add_tensor(name, shape)     once per tensor, in a fixed order
 *     rumor_peer_commit(flags)               the layout is fixed; one flat float32 buffer
 *     rumor_peer_view(i) / rumor_peer_buffer copy your initial values in; train on these
 *     rumor_peer_start(timeout)              joins the swarm (a late joiner takes its model)
 *     loop:
 *         rumor_peer_phase(&steps, &first)   how many local steps to take now
 *         ... your optimizer takes them on the views ...
 *         rumor_peer_round(&io, timeout)     the gossip point: the views are mixed in place
 *     rumor_peer_finish(timeout)             no more steps; the swarm is told
 *     [rumor_peer_wait(timeout)]             stay until the others finished (they may pull)
 *     rumor_peer_close(peer)                 leave
 *     rumor_peer_destroy(&peer)              free (the views die here, not at close)
 *
 * Timeouts. Calls that can wait (start, round, wait) take timeout_ms: -1 waits until done; 0
 * or more returns RUMOR_EAGAIN after about that long with the call's state kept: call it again
 * (with the same arguments) to go on. rumor_peer_interrupt makes a waiting call return
 * RUMOR_EAGAIN within 0.1 s. A Python wrapper calls with 100 ms so that Ctrl-C works.
 *
 * Threads. Each started peer has one thread of its own (its node: sockets, membership, mixing
 * what arrives). A peer's functions are called from one thread at a time (which thread may
 * change), except rumor_peer_address, rumor_peer_status and rumor_peer_interrupt, which any
 * thread may call at any time but during rumor_peer_close and rumor_peer_destroy. Different peers are independent. Process-wide: the log sink. None calls back into
 * your code except the log sink. The library installs no signal handler.
 *
 * Processes. A peer belongs to the process that opened it. In a forked child (a DataLoader
 * worker), every call on it returns RUMOR_ESTATE and rumor_peer_destroy frees nothing there.
 *
 * Settings are given by name, as `rumor node` takes them (without "--"): the one table of
 * settings in rumor decides what a library peer accepts, each value is checked when given, and
 * a setting a library peer does not take is refused with the reason. The text form is the one
 * of rumor's scenario files and of `rumor node --config FILE`:
 *
 *     # comments; blank lines and [sections] are ignored
 *     swarm = authority.pub
 *     key = peer.key
 *     cert = peer.cert
 *     listen = tcp://0.0.0.0:7000
 *     bootstrap = rumor://KEY@10.0.0.1:7000     (repeated keys of a list setting append)
 *     algo = diloco:50
 *
 * Errors. Every function that can fail returns rumor_err_t (RUMOR_OK = 0). The sentence that
 * says what went wrong and what to do is rumor_errmsg(), on the calling thread, until the next
 * failure on that thread. Codes are ABI; sentences are not (do not parse them).
 *
 * ABI. librumor.so.0: the number after .so changes on any incompatible change (a function
 * removed, its signature or meaning changed, an enum value or a macro changed, a field of
 * rumor_round_t moved, a setting removed or its meaning changed) and on nothing else. New
 * functions, new error codes and flags (appended), new fields at the end of rumor_round_t, new
 * settings and new keys in the status JSON come without a change. Only the
 * functions declared here are exported (a version script, node RUMOR_0). The wire protocol
 * has its own version (rumor_protocol_version) and compatibility table (proto/PROTOCOL.md).
 *
 * Build against it with `pkg-config --cflags --libs rumor` once `meson install` put it in
 * place. C99 or later, or C++11 or later.
 */
#ifndef RUMOR_H
#define RUMOR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define RUMOR_API __attribute__((visibility("default")))
#else
#define RUMOR_API
#endif

/* The version of this header, for compile-time checks (rumor_version gives the library's). */
#define RUMOR_VERSION_MAJOR 0
#define RUMOR_VERSION_MINOR 1
#define RUMOR_VERSION_PATCH 0
#define RUMOR_ABI_VERSION 0

/* ---- errors ---- */

typedef enum {
    RUMOR_OK = 0,
    RUMOR_EINVAL = 1,     /* a bad argument or setting; the message names it and what it takes */
    RUMOR_ENOMEM = 2,     /* out of memory */
    RUMOR_EPROTO = 3,     /* a protocol violation */
    RUMOR_EAUTH = 4,      /* admission failed: certificate, key, revocation, every bootstrap refused */
    RUMOR_ECLOSED = 5,    /* closed (a peer, a connection) */
    RUMOR_ETIMEDOUT = 6,  /* a deadline passed (join-timeout: nobody let us in) */
    RUMOR_ELAYOUT = 7,    /* parameters that do not fit: the message names the first that differs */
    RUMOR_ENOTSUP = 8,    /* not supported by this build or with these settings */
    RUMOR_EIO = 9,        /* a file or socket could not be read or written; errno holds the cause */
    RUMOR_EFORMAT = 10,   /* a file is not what it should be (a checkpoint, a key, a certificate) */
    RUMOR_ENODEV = 11,    /* the machine lacks the device a backend needs */
    RUMOR_ESTATE = 12,    /* called out of order, on a finished object, or in a process that did
                             not make the object (a forked child) */
    RUMOR_EAGAIN = 13,    /* not done within the time given, or interrupted: call again to go on */
} rumor_err_t;

/* A short static description of code ("parameter layout mismatch"); never NULL, also for
 * codes this library does not know ("unknown error"). Any thread. */
RUMOR_API const char *rumor_strerror(rumor_err_t code);

/* The sentence of the last failure on this thread: what is wrong and what to do ("--bootstrap
 * x: expected rumor://KEY@HOST:PORT"). "" when nothing failed on this thread yet. Borrowed:
 * valid until the next failure on this thread. */
RUMOR_API const char *rumor_errmsg(void);

/* ---- versions ---- */

/* The library's version as "0.1.0"; each pointer that is not NULL gets its number. Static
 * string. Any thread. */
RUMOR_API const char *rumor_version(int *major, int *minor, int *patch);
/* The number in the library's soname (librumor.so.N): a program built against another N must
 * not use it (compare with RUMOR_ABI_VERSION). Any thread. */
RUMOR_API int rumor_abi_version(void);
/* The wire protocol version this library speaks; peers speak only their own (PROTOCOL.md). */
RUMOR_API int rumor_protocol_version(void);

/* ---- logging ---- */

typedef enum {
    RUMOR_LOG_ERROR = 0,
    RUMOR_LOG_WARN = 1,
    RUMOR_LOG_INFO = 2,
    RUMOR_LOG_DEBUG = 3,
} rumor_log_level_t;

/* Where log lines go: sink(arg, level, line) for every line at or below level (line without
 * its newline, borrowed for the call), from any of rumor's threads, one call at a time; a sink
 * must not call rumor. NULL: standard error, as `rumor` writes them (the default). Set it
 * before anything runs; it is the process's. */
typedef void (*rumor_log_fn)(void *arg, rumor_log_level_t level, const char *line);
RUMOR_API void rumor_set_log(rumor_log_fn sink, void *arg, rumor_log_level_t level);

/* ---- a peer ---- */

typedef struct rumor_peer rumor_peer_t;

/* Open a peer from settings: first `settings` (the text form above; NULL or "" for none), then
 * `pairs` (NULL, or name, value, name, value, ..., NULL: each overrides the text; a list
 * setting appends), then the settings as a whole are checked; the key and certificate are
 * read and the listen address bound. Nothing is sent and no thread runs until
 * rumor_peer_start. *out is NULL on failure. Errors: EINVAL (a setting: its name, its value
 * and what is expected; a setting a library peer does not take, with why: "lr: a library peer
 * trains nothing itself; ..."), EIO/EFORMAT (a key, certificate or authority file), EAUTH (a
 * certificate not valid for the swarm or the key), ENOMEM. The peer belongs to this process. */
RUMOR_API rumor_err_t rumor_peer_open(const char *settings, const char *const *pairs, rumor_peer_t **out);

/* Where others reach this peer: "rumor://KEY@HOST:PORT" (a bootstrap for the next peers).
 * Borrowed, valid until rumor_peer_destroy. Any thread. */
RUMOR_API const char *rumor_peer_address(const rumor_peer_t *peer);

/* The value of setting `name` for this peer as text, canonically spelt ("diloco:50", "yes",
 * "0.7"): the given value, or the default. A list setting gives its values one per line.
 * *value is yours (rumor_free). EINVAL: no setting of that name for a library peer (with why). */
RUMOR_API rumor_err_t rumor_peer_setting(const rumor_peer_t *peer, const char *name, char **value);

/* Register the next tensor: its name (1..200 bytes of A-Z a-z 0-9 _ . / -, unique in the
 * peer) and shape (ndim 0..8, each dimension 1..2^31-1; ndim 0 is a scalar). float32 only:
 * rumor mixes float32 (keep a float32 master copy of lower-precision parameters). The order of
 * calls is the layout's order, which every peer of the swarm must share: use your framework's
 * state order (PyTorch: state_dict order). Errors: EINVAL (name or shape, said which), ESTATE
 * (after rumor_peer_commit: the layout is fixed once committed), ENOMEM. */
RUMOR_API rumor_err_t rumor_peer_add_tensor(rumor_peer_t *peer, const char *name, int ndim, const int64_t *shape);

/* Flags of rumor_peer_commit. */
enum {
    /* One block of optimizer state, laid out as the model, is mixed with it (dadamw: AdamW
     * whose second moment the swarm averages). dpsgd only, without robust mixing, secure
     * mixing or the topk and int4 codecs. */
    RUMOR_MIX_STATE = 1
};

/* Fix the layout: every tensor at an offset aligned to 16 floats in one flat buffer (padding
 * zero, and kept zero: never write it), then, with RUMOR_MIX_STATE, the state block of as many
 * floats. The buffer is zeroed and page-aligned (a CUDA caller may pin it). The layout's id,
 * from the tensors' names and shapes alone, is what this peer announces: only peers with the
 * same id mix. Errors: EINVAL (no tensor; a flag the settings exclude, said why), ESTATE
 * (committed already), ENOMEM (then, as for any failure once the buffer exists, the peer is
 * closed). */
RUMOR_API rumor_err_t rumor_peer_commit(rumor_peer_t *peer, unsigned flags);

/* Tensor i's view (i in registration order): *data its values (shape as registered,
 * row-major, contiguous), *state its optimizer-state twin (NULL without RUMOR_MIX_STATE).
 * Either pointer may be NULL. Borrowed until rumor_peer_destroy. Between rounds the values are
 * yours to read and write; during rumor_peer_round the peer writes them. EINVAL: no tensor i;
 * ESTATE: not committed. */
RUMOR_API rumor_err_t rumor_peer_view(rumor_peer_t *peer, int i, float **data, float **state);

/* The whole flat buffer: *params and *count floats of the model including the padding (one
 * copy to and from a device per round moves the model), then, with RUMOR_MIX_STATE, *count
 * more of state at *params + *count. Borrowed until rumor_peer_destroy. ESTATE: not committed. */
RUMOR_API rumor_err_t rumor_peer_buffer(rumor_peer_t *peer, float **params, size_t *count);

/* The layout this peer announces: *id (FNV-1a 64 of its text), and when text is not NULL its
 * canonical text (yours: rumor_free): "rumor-layout-2" then one "name:d0,d1,..." line per
 * tensor. ESTATE: not committed. ENOMEM. */
RUMOR_API rumor_err_t rumor_peer_layout(const rumor_peer_t *peer, uint64_t *id, char **text);

/* Resume: read the engine's state that rumor_peer_save wrote (its round, push-sum weights,
 * diloco's outer parameters and momentum), to take effect at rumor_peer_start. Call after
 * rumor_peer_commit and after putting your model's checkpointed values in the views, before
 * start. The started peer falls back into step with the swarm if the swarm has moved on (two
 * members must confirm the model it takes). Errors: EIO, EFORMAT (not such a file), ELAYOUT
 * (saved by a peer of other tensors), EINVAL (a setting that fixes the run's course differs:
 * "algo is diloco:50 there and diloco:20 here"), ESTATE (not committed, or started). */
RUMOR_API rumor_err_t rumor_peer_load(rumor_peer_t *peer, const char *path);

/* Join the swarm: the engine starts from the buffer's values (every fresh peer should start
 * from the same ones: same initialisation seed), the peer's thread starts, and the call waits
 * for min-peers members of this layout (at most join-timeout, then it trains with those in
 * view). A fresh peer of a swarm already 4 rounds in then asks members for their model and
 * takes the mean of two that confirm each other, into the buffer (*joined = 1, else 0; joined
 * may be NULL): reset stale optimizer state then. Errors: EAGAIN (timeout or interrupt while
 * waiting for members: call again), ELAYOUT (a member trains other tensors: the message names
 * the first that differs, as the member's own log does; it is left out, and calling again goes
 * on waiting for others), ESTATE (not committed, or started), ECLOSED (closed, or its node
 * ended: the message says why). Another failure (the engine, the run folder) closes the peer:
 * open another. */
RUMOR_API rumor_err_t rumor_peer_start(rumor_peer_t *peer, int timeout_ms, int *joined);

/* The local steps to take before the next rumor_peer_round: *steps (local-steps, or H of
 * diloco:H; an overlapped diloco round has two phases, overlap-steps then the rest) and
 * *first, the position of the first of them in the swarm's learning-rate schedule (rounds
 * times H: a late joiner's schedule continues the swarm's). Either pointer may be NULL.
 * Taking another number of steps is allowed. ESTATE: not started, or finished. */
RUMOR_API rumor_err_t rumor_peer_phase(rumor_peer_t *peer, int64_t *steps, int64_t *first);

/* In and out of rumor_peer_round. Set size to sizeof(rumor_round_t) (RUMOR_ROUND_INIT): later
 * versions append fields and read or write only the ones within size. */
typedef struct rumor_round {
    size_t size;
    /* in: the local steps since the last gossip point, for the peer's metrics (0: unknown) */
    int64_t steps;
    double loss_sum;        /* summed over the samples */
    int64_t samples;
    /* out */
    int64_t round;          /* rounds this peer has finished (the swarm's round after a resync) */
    int landed;             /* an overlapped round landed mid-round: take the next phase; the
                               round goes on (the views changed) */
    int finished;           /* its last round is mixed (rounds given), or the swarm finished
                               without it: call rumor_peer_finish */
    int replaced;           /* the views now hold a model taken from the swarm (two members'
                               confirmed final model): reset stale optimizer state */
    int checkpoint_due;     /* checkpoint-every rounds, or a minute, passed: a good time to save */
    int neighbours;         /* neighbours whose models were mixed in this round */
    int missing;            /* neighbours expected and left out (dead, slow) */
    double consensus;       /* distance between this peer's model and the round's mix */
    double wait_s;          /* the round's wait at the gossip point */
    /* in: the model evaluated after this round's local steps, if it was (both finite): written
     * to the peer's metrics (run-dir), which rumor sim's summary of a launched swarm reads.
     * evaluated: RUMOR_EVAL_TEST (1) a classifier's test loss and accuracy, RUMOR_EVAL_VAL (2)
     * a language model's validation loss (nats per token) and next-token accuracy */
    int evaluated;
    double test_loss, test_acc;
} rumor_round_t;
#define RUMOR_ROUND_INIT {sizeof(rumor_round_t), 0, 0.0, 0, 0, 0, 0, 0, 0, 0, 0, 0.0, 0.0, 0, 0.0, 0.0}

/* The gossip point, after the phase's local steps: the peer's model (the views, and the state
 * block) goes to this round's out-neighbours, and the call waits until the in-neighbours'
 * models are mixed into the views in place or the round's adaptive deadline passes (a dead or
 * slow neighbour is left out; round-timeout bounds the wait). What the algorithm does happens
 * here: dpsgd's average, sgp's push-sum (the views always hold the de-biased model), diloco's
 * outer Nesterov step (the views then hold the new outer parameters), CHOCO's compressed copies
 * (codec topk or int4). Do not touch the buffer during the call (another thread of yours
 * neither). io's inputs are read at the first call of a gossip point; on EAGAIN call again
 * with the same io. Errors: EAGAIN (timeout or interrupt: call again), ELAYOUT (only before
 * this peer's first round is mixed: a member trains other tensors, named as for start; call
 * again to go on; later such members are only logged and counted in status), ESTATE (not
 * started, finished), ECLOSED (closed, or its node ended; the message says why), EINVAL (io NULL
 * or its size too small). */
RUMOR_API rumor_err_t rumor_peer_round(rumor_peer_t *peer, rumor_round_t *io, int timeout_ms);

/* Write the engine's state (round, push-sum weights, diloco's outer parameters and momentum,
 * the layout's id and the settings that fix the run's course) to path, atomically and readable
 * by its owner only: store it beside your model's checkpoint (rumor_peer_load reads it). Not
 * the model: that is in your views and your checkpoint. Between rounds only. Errors: EIO,
 * ESTATE (not started, or inside a gossip point), ENOMEM. */
RUMOR_API rumor_err_t rumor_peer_save(rumor_peer_t *peer, const char *path);

/* The peer's status as JSON: the object `rumor status --json` prints for a node (its id,
 * address, view, members, counters of what it dropped and why) with "train" (layout, algo,
 * topology, round, consensus, models and bytes in and out, drops by reason) once started.
 * *json is yours (rumor_free). Errors: ENOMEM, ETIMEDOUT (the peer's thread did not answer
 * within 2 s), ECLOSED, ESTATE (another process). */
RUMOR_API rumor_err_t rumor_peer_status(rumor_peer_t *peer, char **json);

/* The model, as the views hold it now (between rounds: after the last one's mix), was
 * evaluated: a metrics line of the current round with its test loss and accuracy (in run-dir,
 * which rumor sim's status and summary read; nothing without run-dir). EINVAL (not finite),
 * ESTATE (not started, or inside a gossip point). */
RUMOR_API rumor_err_t rumor_peer_evaluated(rumor_peer_t *peer, double test_loss, double test_acc);

/* What an evaluation measured (rumor_peer_evaluated_as, rumor_round_t's evaluated): TEST a
 * classifier on its test set (test_loss, test_acc), VAL a language model on validation text
 * (val_loss in nats per token, val_acc its next-token accuracy). */
#define RUMOR_EVAL_TEST 1
#define RUMOR_EVAL_VAL 2

/* rumor_peer_evaluated for either kind: RUMOR_EVAL_VAL writes a language model's val_loss and
 * val_acc, which rumor sim shows as such (final_val_loss_mean). EINVAL (another kind, not
 * finite), ESTATE as rumor_peer_evaluated. */
RUMOR_API rumor_err_t rumor_peer_evaluated_as(rumor_peer_t *peer, int kind, double loss, double acc);

/* No more local steps: the peer keeps a copy of the views (the model of its last mixed round,
 * or the steps since, as you left them) and tells every member it finished (they stop waiting
 * for it); its thread answers late peers that ask for the final model until rumor_peer_close.
 * An overlapped round still in flight is dropped. The views are yours again afterwards.
 * Errors: ESTATE (not started), ECLOSED. A second call does nothing. */
RUMOR_API rumor_err_t rumor_peer_finish(rumor_peer_t *peer);

/* After rumor_peer_finish: wait until leaving costs nobody anything: every member in view has
 * finished (then 2 s more), or `linger` seconds passed (when given). Errors: EAGAIN (not yet;
 * call again, or close anyway), ESTATE (not finished). */
RUMOR_API rumor_err_t rumor_peer_wait(rumor_peer_t *peer, int timeout_ms);

/* Make the call that waits on this peer (start, round, wait) return RUMOR_EAGAIN within 0.1 s,
 * its state kept; one that comes while none waits makes the next such call return it at once
 * (a signal that lands just before a call is not lost). Any thread, and async-signal-safe.
 * Not interrupted: a late joiner's or a resumed peer's asks for the swarm's model in start, and
 * the asks for the swarm's final model in a round when every member finished, each at most
 * 3 times max(round-timeout, 5 s). */
RUMOR_API void rumor_peer_interrupt(rumor_peer_t *peer);

/* Leave the swarm now: a goodbye to every member, the peer's thread stopped and joined, sockets
 * closed. Every later call but rumor_peer_address, rumor_peer_view, rumor_peer_buffer,
 * rumor_peer_layout and rumor_peer_destroy returns ECLOSED. The views stay valid until
 * rumor_peer_destroy. Returns the error that ended the node, if one did (else OK); a second
 * call returns OK. */
RUMOR_API rumor_err_t rumor_peer_close(rumor_peer_t *peer);

/* Close if needed, free everything (the buffer and the views with it), and set *peer to NULL.
 * NULL and *peer NULL are fine. In a process other than the one that opened the peer it frees
 * nothing (a forked child must not touch the parent's sockets) and only clears *peer. */
RUMOR_API void rumor_peer_destroy(rumor_peer_t **peer);

/* Free what this library handed out through a `char **` (NULL is fine). */
RUMOR_API void rumor_free(void *p);

#ifdef __cplusplus
}
#endif

#endif
