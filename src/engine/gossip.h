/*
 * gossip.h - the gossip engine: how a peer mixes its parameters with its neighbours'.
 *
 * A pure state machine (docs/ARCHITECTURE.md): no sockets, threads, clocks or randomness.
 * Times are passed in (milliseconds, any monotonic origin); what to send comes out as an
 * outbox of (peer, share) pairs the driver turns into model messages, and model chunks come
 * in through rumor_gossip_on_chunk. The node (src/peer/peer.c) and the tests drive the same code.
 *
 * Algorithms (`--algo`):
 *   dpsgd     synchronous D-PSGD, local steps then average (decentralizepy's D-PSGD; Lian et
 *             al. 2017 with H local steps). Round r, at a peer's gossip point after its local
 *             steps: it sends its model x to its out-neighbours, waits for its in-neighbours'
 *             round-r models until an adaptive deadline, and sets x <- mix_r(x): every model
 *             a peer holds after a round is an average. A neighbour missing at the deadline
 *             is left out and the weights renormalised; the round never blocks on a dead peer.
 *             With `overlap` (--overlap) the round's models travel during the next local
 *             steps instead: the peer sends its snapshot s_r, trains on, and at its next gossip
 *             point sets x <- mix_r + (x - s_r) (Lian et al.'s update: the neighbourhood mean
 *             of the snapshots plus its own progress since). It hides the wait, but every
 *             model carries its latest local steps un-averaged, and peers compute gradients
 *             further apart: it loses accuracy (docs/decisions.md), the more the more local
 *             steps.
 *   sgp       Stochastic Gradient Push (Assran et al. 2019): push-sum, no barrier (but bounded
 *             staleness: after 4 rounds in a row with nothing received a peer waits for input,
 *             at most the round timeout, so it cannot give all its weight away). A peer sends
 *             its de-biased snapshot with weight share*w; it mixes whatever has arrived by its
 *             gossip point, x <- (sum of w_j s_j) / (sum of w_j) + (x - s_r), and keeps the
 *             sum of the weights as its new w. Works on directed, time-varying graphs with
 *             column-stochastic mixing; x is always the de-biased model z/w.
 *   diloco:H  H local steps with the inner optimizer, then one synchronous gossip round of the
 *             inner result x and an outer Nesterov step on the pseudo-gradient against the
 *             neighbourhood's mean: d = theta - mix(x), m <- mu m + d,
 *             theta <- theta - lr (d + mu m), x <- theta (Douillard et al. 2023, made
 *             decentralised: the all-reduce of the pseudo-gradient becomes a gossip average of
 *             the inner results, one model per round; the outer step pulls every theta towards
 *             the same mixed point, which keeps them in consensus); the next inner phase
 *             starts from the new theta. With `overlap` (--overlap): the round's
 *             inner results travel while the next phase runs, and its outer step lands after
 *             overlap_steps steps of it (Streaming DiLoCo's overlap, Douillard et al. 2025): the
 *             peer sends x_r and goes on training from it; at a gossip point of its own
 *             (rumor_gossip_merging: the round lands) it computes theta_{r+1} exactly as above and
 *             moves the phase onto it, x <- x + (theta_{r+1} - x_r), so only those steps were
 *             taken from a stale point. The next send is H steps after the last.
 *
 * Mixing on arrival. A model travels in chunks of chunk_params floats; every
 * accepted chunk is added, weighted, straight into the accumulator of its round, and the
 * accumulator keeps one weight total per chunk. Finishing a round divides each chunk by its
 * own total, so a neighbour whose model arrived only in part still contributes exactly the
 * chunks it delivered, and for push-sum the weight is kept per chunk (w[c]) so that mass is
 * conserved coordinate by coordinate whatever order chunks arrive in. Memory: the trainer's x,
 * two snapshots (one may still be on the wire while the next is taken), four accumulators (the
 * round being finished and the next three, which neighbours ahead of us already send into:
 * peers a round or two apart, common on a busy machine, lose nothing), and for diloco theta
 * and the outer momentum: O(model) whatever the degree.
 *
 * Weights. A message carries the sender's share times its push-sum weight (1 outside sgp):
 * row j of W_t in the push convention (topology.h). For dpsgd and diloco the graphs are
 * undirected with symmetric Metropolis-Hastings weights, so the sender's share is the
 * receiver's weight; using the number in the message keeps two peers that briefly disagree
 * on the view consistent. Shares outside (0, 1] are rejected; for sgp, weights outside
 * (0, 2 m + RUMOR_GOSSIP_SGP_WEIGHT_SLACK], m the members this peer knows of (its view and
 * itself; never above the wire's 2^20), see below.
 *
 * Surviving a neighbour without robust mixing. No single message from a neighbour makes a
 * peer crash, exit, or take a non-finite or out-of-scale value into its parameters:
 *  - a chunk with a NaN or Inf is dropped (`nonfinite`), and so is a finite one whose RMS
 *    exceeds RUMOR_GOSSIP_PLAUSIBLE_RMS (16) times the RMS of this peer's own latest
 *    snapshot over the same range, plus RUMOR_GOSSIP_PLAUSIBLE_FLOOR (0.1: a range of ours
 *    near zero, e.g. freshly zeroed biases, still takes honest chunks) (`implausible`).
 *    Honest neighbours stay far below the factor (docs/decisions.md: at most 1.01 over
 *    whole models, 5.8 over ranges of 128 floats). A dropped chunk is one that never came:
 *    the round renormalises without it, as for a missing neighbour. The test is the same
 *    for what every algorithm mixes: models (dpsgd, sgp), inner results (diloco, so that the
 *    pseudo-gradient theta - x_j a neighbour brings is at most about 17 times our scale: a
 *    delta larger than the weights themselves is implausible), codec chunks after decoding,
 *    CHOCO keyframes and the copies that deltas make (such a delta leaves that chunk of the
 *    copy invalid until a keyframe), and under secure mixing the neighbourhood mean each
 *    chunk unmasks to (senders cannot be told apart there: the chunk stays unmixed, counted
 *    in chunks_unmixed and `implausible`; the encoding's +-2048 bounds each share). Robust
 *    mixing bounds every chunk its own way (clip's radius, trim's order statistics) and
 *    does not apply the test.
 *  - sgp: the weights of a swarm sum to its member count, so a message weighing more than
 *    twice the members this peer knows of plus RUMOR_GOSSIP_SGP_WEIGHT_SLACK (views lag;
 *    joiners bring their own unit) is made up (`weight`), and the peer's own weight is capped
 *    there after each round (so weights slipped in just under the bound cannot inflate the
 *    swarm's until honest messages pass it). A neighbour claiming a weight under the bound
 *    still outweighs a small neighbourhood: push-sum has no robust mode.
 *  - sgp keeps a record per (sender, round) in the round's slot: one sender holds at most
 *    RUMOR_GOSSIP_SENDER_ROUNDS (its oldest round's is reused after that; a record only
 *    catches a chunk delivered twice), and rounds more than RUMOR_GOSSIP_SGP_AHEAD ahead of
 *    ours are dropped (`ahead`): made-up rounds cannot crowd out other senders.
 * What plain mixing does not survive is a neighbour that keeps sending models of plausible
 * scale that pull against the swarm (attack.h's scale:-10, every round): the mix follows it,
 * each round can grow a peer's model by up to its weight times the factor, and over rounds
 * training can diverge. Bounding that neighbour is what --robust does, and by default (guard,
 * below) it does.
 *
 * Robust mixing (`--robust clip[:F]`, dpsgd and diloco). Self-centred clipping after
 * ClippedGossip (He, Karimireddy, Jaggi 2022): a neighbour's model v enters the mix as
 * c + min(1, tau / |v - c|) (v - c), c the peer's own snapshot, so one neighbour moves a peer
 * by at most its weight times tau whatever it sends. Clipping happens on arrival, chunk by
 * chunk, each chunk with its own radius tau_c (so one model moves a peer by at most its weight
 * times sqrt(sum tau_c^2)). The radii adapt: each round tau_c is the weighted (1 - F) quantile
 * of the neighbours' distances of chunk c seen in the round before (F = 0.25 by default: the
 * farthest quarter of the neighbourhood's weight is clipped), and 0 before any round has
 * finished (a first round mixes nothing in). A neighbour whose chunks are not finite, or lie
 * beyond 100 tau_c, collects strikes (one per message); three strikes ban it for 50 rounds
 * (its chunks are dropped, counted as `banned`).
 *
 * `--robust guard[:K]` (the default with dpsgd and diloco: `auto`, see rumor_robust_resolve)
 * clips the same way with a looser radius: tau_c is K (RUMOR_GOSSIP_GUARD, 2) times the
 * weighted median of the neighbours' distances of chunk c in the round before, and before any
 * round has measured chunk c, RUMOR_GOSSIP_GUARD_START (3) times the norm of the peer's own
 * chunk plus the plausibility floor's share (models drawn at random at one scale lie sqrt(2)
 * norms apart: a swarm of different starts mixes its first round whole). Honest neighbours
 * lie within twice their median, so a swarm without an attacker ends where plain averaging
 * does (docs/decisions.md: the same final accuracy to four digits), while one neighbour moves
 * a peer by at most its weight times 2 medians a round, whatever it sends; a chunk beyond 10
 * radii (20 medians; honest ones came within 1.5) and beyond the start radius is a strike (the
 * other half of a healed partition lies many radii away, within a few norms). It is a bound, not
 * a filter: a neighbour pushing the same way every round still biases the swarm (one among 16
 * costs dpsgd under half a point, diloco under 0.7, docs/benchmarks.md). Under diloco a first
 * round (no radius yet) takes a neighbour's pseudo-gradient whole within
 * RUMOR_GOSSIP_GUARD_FIRST (3) times the peer's own and leaves it out beyond (counted `far`):
 * the start radius is far too loose for pseudo-gradients, and the outer momentum carries on
 * what one neighbour pushes through it. Such a chunk that comes before the peer's own inner
 * result is held until then (RUMOR_GOSSIP_HOLD_SENDERS models, RUMOR_GOSSIP_HOLD_BYTES).
 *
 * Both clip modes measure a chunk of a round this peer has not snapshotted yet (a neighbour
 * ahead) against its latest snapshot, so such a chunk gets the room that snapshot moved from
 * the one before (per chunk), and its distance counts that much more for the next radius
 * (the triangle inequality's bound; a peer behind would otherwise measure its neighbours
 * nearer than they are and clip them once they come on time). Under diloco, guard measures
 * inner results against theta, the outer parameters every phase starts from: what it clips is
 * a neighbour's pseudo-gradient (clip measures them against the peer's own inner result).
 *
 * `--robust trim:B` (dpsgd and diloco) is the coordinate-wise trimmed mean: every coordinate of
 * the mix is the mean of the peer's own value and its neighbours' after dropping the B largest
 * and B smallest (the median when B leaves nothing). It needs each neighbour's value of a
 * coordinate at once, so unlike every other mode it holds neighbour models whole: up to
 * RUMOR_GOSSIP_TRIM_SENDERS per round in flight, four rounds (16 x 4 copies of the model;
 * models too large for that are refused). Chunks from further senders are dropped (`senders`).
 *
 * Secure mixing (`secure_mix`, dpsgd and diloco; secmix.h, secmix_sum.h). A receiver learns the weighted sum
 * of its in-neighbours' models, not any one of them. For each send the engine names the
 * receiver's in-neighbours S as this peer's topology sees them, this peer's ring neighbours
 * in S (the mask edges) and a mix id, a 64-bit hash of (round, receiver, S); the driver
 * encodes every chunk masked. The receiver adds the words of masked chunks modulo 2^32 (no
 * float is seen before the round ends) and, at the round's end, unmasks chunk c only when
 * every one of its expected in-neighbours delivered c, each with the receiver's own mix id,
 * and nobody else did: the masks then cancel exactly. Otherwise chunk c is left unmixed this
 * round (x keeps its own value there; counted in chunks_unmixed): a missing sender's masks
 * cannot be removed, and there is no recovery round (documented cost: a dropout costs its
 * neighbourhood that chunk's round). A receiver with fewer than two in-neighbours would learn
 * its one neighbour's model: nobody sends to it, and it mixes nothing. Memory: a uint32
 * accumulator per slot besides the float one. Plain chunks are dropped (`mask`), so are masked
 * chunks where secure_mix is off. Not with --robust (masks hide what it would clip) or sgp.
 *
 * Compressed gossip (`choco`: CHOCO-SGD, Koloskova, Stich, Jaggi 2019; dpsgd, and diloco with
 * int4). Each peer keeps a public copy xhat of what it gossips (its model; diloco's inner
 * result) and sends only compressed differences: at its gossip point it encodes
 * q = Q(x - xhat) (top-k: the k largest entries of each chunk; int4: all of them, 4 bits
 * each with a scale per 64), moves xhat
 * by exactly what receivers decode (the rest waits in x - xhat: error feedback), and sends q.
 * Every peer holds a copy of each neighbour's xhat, moved by the deltas as they arrive, and
 * mixes x <- x + gamma sum_j w_ij (xhat_j - xhat_i) over the neighbours whose copies it holds.
 * Copies must see every delta in order, which gossip over a real network does not promise, so
 * every chunk of a copy carries a version (deltas applied since the start) and the copy's
 * lineage (drawn at random for each start of the sender) and base (a hash of its version 0):
 *  - a delta applies to a copy at the version just before it; a gap (a lost or refused chunk,
 *    a restarted sender) invalidates that chunk of the copy, which then sits out of the mix;
 *  - a peer that lacks a valid copy of a neighbour says so in its own messages (`need`), and
 *    the neighbour sends its next round as a keyframe: the whole public copy in float32;
 *  - a sender that did not send a neighbour the previous version sends it a keyframe too (a
 *    new neighbour, a failed send);
 *  - a copy of a lineage never seen starts valid at version 0 when its base is the hash of
 *    this peer's own initial model (every peer of a fresh swarm starts from the same one), and
 *    from a keyframe otherwise.
 * Deltas are applied on arrival whatever their round (a late one keeps the copy in step even
 * when its round was mixed without it). Copies are held for RUMOR_GOSSIP_CHOCO_PEERS
 * neighbours (models where that passes 4 GiB are refused); further senders are dropped
 * (`senders`). An edge whose far end says it lacks our copy sits out of the mix on both ends
 * (one end moving alone would drift the average); a `need` sent before our keyframe could
 * reach it is not answered twice. rumor_gossip_lend hands a joiner the public copy (within
 * the error feedback of the model). Not with robust mixing, secure mixing or sgp, nor topk with
 * diloco. diloco's mix is x + gamma sum_j w_ij (xhat_j - xhat_i), its inner result plus the
 * neighbours' copies' pull, and its outer step takes theta - that as the pseudo-gradient, as
 * it takes theta - mix(x) uncompressed: with int4's gamma of 1 and exact copies the two are
 * one. The copies keep the consensus term theta_i - mix(theta) that mixing pseudo-gradients
 * alone would lose (docs/decisions.md).
 * Time-varying topologies work but send keyframes whenever a neighbour comes back: use a
 * static one.
 *
 * Ranks (topology.h): the members are this peer's view plus itself, numbered by sorted key.
 *
 * Rejected input (counted, never mixed, never fatal): another layout id, a chunk geometry that
 * is not this engine's, a bad share, a non-finite value anywhere in a chunk (the chunk is
 * dropped and the rest of that message ignored), an implausible chunk (see above; only that
 * chunk), a chunk already received, a round too old
 * (dpsgd/diloco: before the round in flight) or too far ahead (beyond the next three; the
 * engine then skips to one past the lowest such round it saw, at its next gossip point, so a
 * slow, late or resumed peer falls back into step without waiting out its deadlines; sgp:
 * beyond RUMOR_GOSSIP_SGP_AHEAD), more senders in one round than RUMOR_GOSSIP_MAX_SENDERS.
 *
 * Threads: none. The caller serialises all calls (the node holds one mutex around them).
 */
#ifndef RUMOR_GOSSIP_H
#define RUMOR_GOSSIP_H

#include "codec.h"
#include "base.h"
#include "secmix_sum.h"
#include "topology.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RUMOR_GOSSIP_MAX_SENDERS 256   /* distinct senders accepted per round */
#define RUMOR_GOSSIP_MAX_MEMBERS 4096  /* view + self */
#define RUMOR_GOSSIP_CHUNK_DEFAULT (256 * 1024) /* floats: 1 MiB */
#define RUMOR_GOSSIP_HISTORY 32        /* arrival delays the adaptive deadline looks at */
/* Implausible input (see "Surviving a neighbour without robust mixing" above). */
#define RUMOR_GOSSIP_PLAUSIBLE_RMS 16.0    /* a chunk's RMS may be this many times our own ... */
#define RUMOR_GOSSIP_PLAUSIBLE_FLOOR 0.1   /* ... plus this (a range of ours near zero) */
#define RUMOR_GOSSIP_SGP_WEIGHT_SLACK 16.0 /* sgp: a weight may be 2 x members known + this */
#define RUMOR_GOSSIP_SGP_AHEAD 1024        /* sgp: rounds further ahead of ours are dropped */
#define RUMOR_GOSSIP_ROUND_MAX (UINT64_C(1) << 62) /* rounds beyond are dropped: none ever wraps */
#define RUMOR_GOSSIP_SENDER_ROUNDS 4       /* sgp: records one sender holds in a round's slot */

typedef enum { RUMOR_ALGO_DPSGD, RUMOR_ALGO_SGP, RUMOR_ALGO_DILOCO } rumor_algo_kind_t;

typedef struct {
    rumor_algo_kind_t kind;
    int local_steps;        /* minibatch steps between gossip points (diloco:H sets it) */
    double outer_lr;        /* diloco: 0.7 by default */
    double outer_momentum;  /* diloco: 0.9 by default (Nesterov) */
    bool overlap;           /* dpsgd: the mix lands a round late, during the next local steps (sgp always);
                               diloco: the round's outer step lands overlap_steps into the next phase */
    int overlap_steps;      /* overlapped diloco: inner steps the round has to travel (1 .. H - 1) */
} rumor_algo_t;

/* Robust mixing: none, self-centred clipping of the farthest `clip_fraction` of the
 * neighbourhood's weight, self-centred clipping at `guard` times the neighbourhood's median
 * distance (the default's bound, see "Robust mixing"), or a coordinate-wise trimmed mean
 * dropping the `trim` largest and `trim` smallest values of each coordinate (the peer's own
 * among them). `automatic` ("auto", the settings' default) is resolved by
 * rumor_robust_resolve: guard where nothing excludes it, none otherwise. */
typedef struct {
    bool clip;              /* clip or guard */
    double clip_fraction;   /* clip: in (0, 1), 0.25 by default; guard: 0.5 (the median) */
    double guard;           /* guard: the radius in medians (> 1); 0: clip's quantile radius */
    int trim;               /* 1..RUMOR_GOSSIP_TRIM_MAX; 0: no trimmed mean */
    bool automatic;         /* "auto", not resolved yet (clip, guard and trim off) */
} rumor_robust_t;

#define RUMOR_GOSSIP_TRIM_MAX 8
#define RUMOR_GOSSIP_TRIM_SENDERS 16 /* neighbours whose models a trimmed-mean round holds */
#define RUMOR_GOSSIP_GUARD 2.0       /* guard's radius in medians of the neighbours' distances */
#define RUMOR_GOSSIP_GUARD_START 3.0 /* guard's first radius, in norms of the peer's own chunk */
#define RUMOR_GOSSIP_GUARD_FIRST 3.0 /* diloco's: in norms of the peer's own pseudo-gradient chunk */
#define RUMOR_GOSSIP_HOLD_SENDERS 8  /* diloco, a first round: early models held, at most ... */
#define RUMOR_GOSSIP_HOLD_BYTES (1u << 30) /* ... and at most this many bytes of them (one at least) */

/* "auto", "none", "clip", "clip:F" (0 < F < 1), "guard", "guard:K" (1 < K <= 1000), "trim:B"
 * (1 <= B <= 8). EINVAL with a sentence. */
rumor_err_t rumor_robust_parse(rumor_robust_t *out, const char *spec, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* "auto" made concrete: guard for dpsgd and diloco when neither secure mixing nor a mixed
 * optimizer state (state: any) excludes robust mixing; none otherwise. With compressed gossip
 * (codec topk or int4) guard bounds the differences of public copies it mixes. Any other spec
 * is left as it is. */
void rumor_robust_resolve(rumor_robust_t *rb, const rumor_algo_t *algo, bool secure_mix, const rumor_codec_t *codec,
                          bool state);

/* Whether secure mixing, compressed gossip, overlap and mixed optimizer state go with the other
 * settings, the one place these rules live (the engine, `rumor node` and `rumor sim` all ask
 * it): secure_mix needs dpsgd or diloco, no robust mixing and the f32 codec; codecs topk and
 * int4 (CHOCO) need dpsgd (int4: or diloco), no secure mixing nor robust mixing but guard, and
 * 0 <= gamma <= 1 (0: the default); an overlapped diloco:H overlaps 1 to H - 1 steps; optimizer
 * state mixed with the model (dadamw, --tracking; state names what asks for it, NULL: none)
 * needs dpsgd without topk or int4. EINVAL with the sentence to show. */
rumor_err_t rumor_gossip_check_modes(const rumor_algo_t *algo, const rumor_robust_t *robust, bool secure_mix,
                                     const rumor_codec_t *codec, double gamma, const char *state,
                                     char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* "dpsgd", "sgp", "diloco:H" (1 <= H <= 100000). Sets local_steps to 1, or H for diloco,
 * and the outer defaults. EINVAL with a sentence in err. */
rumor_err_t rumor_algo_parse(rumor_algo_t *out, const char *spec, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* The spec back ("dpsgd", "diloco:50"). */
void rumor_algo_format(char *buf, size_t len, const rumor_algo_t *a);

typedef struct {
    rumor_algo_t algo;
    size_t params;             /* the model's n_params */
    uint64_t layout;           /* the model's layout id; incoming models must match */
    size_t chunk_params;       /* floats per chunk; 0: RUMOR_GOSSIP_CHUNK_DEFAULT */
    /* dpsgd: floats of optimizer state mixed with the model, as if part of it (dadamw's second
     * moment, a tracker: params of them each). x passed to rumor_gossip_step then holds params + extra floats,
     * the state after the model; a round sends both. 0: the model alone. */
    size_t extra;
    uint8_t self[RUMOR_KEY_LEN];
    uint64_t boot;             /* this peer's run id (secure mixing binds masks to runs; 0: unknown) */
    /* dpsgd/diloco: how long a round may wait for its models, at most (ms from the round's
     * start, i.e. when this peer sent its own). The deadline is the median plus deadline_k
     * times the median absolute deviation of the last RUMOR_GOSSIP_HISTORY arrival delays,
     * plus min_wait_ms, capped by round_timeout_ms; round_timeout_ms until there is history. */
    uint64_t round_timeout_ms; /* 0: 10000 */
    uint64_t min_wait_ms;      /* 0: 100 (scheduling jitter on a busy machine is tens of ms) */
    double deadline_k;         /* 0: 4 */
    rumor_robust_t robust;     /* dpsgd and diloco only */
    bool secure_mix;           /* dpsgd and diloco; masked chunks only, see "Secure mixing" */
    /* Compressed gossip, CHOCO-SGD (dpsgd, and diloco with int4; see "Compressed gossip"): the
     * compressor (topk or int4; id f32: off), the consensus step gamma (0: RUMOR_GOSSIP_CHOCO_GAMMA
     * for topk, RUMOR_GOSSIP_CHOCO_GAMMA_INT4 for int4) and this
     * start's lineage, a number the driver draws at random for every start of the engine. */
    rumor_codec_t choco;
    double choco_gamma;
    uint64_t lineage;
    bool choco_resumed;        /* x0 is not the swarm's initial model (a resumed peer): neighbours
                                  cannot start its copy from theirs, so its first send is whole */
} rumor_gossip_config_t;

#define RUMOR_GOSSIP_CHOCO_GAMMA 0.05
#define RUMOR_GOSSIP_CHOCO_GAMMA_INT4 1.0
#define RUMOR_GOSSIP_CHOCO_PEERS 16  /* neighbours whose public copies a peer holds */
/* Overlapped diloco: the share of the overlapped steps' progress a phase keeps when its round
 * lands, x <- theta' + KEEP (x - x_r) (docs/decisions.md). */
#define RUMOR_GOSSIP_OVERLAP_KEEP 0.5f

typedef struct rumor_gossip rumor_gossip_t;

/* An engine for a model of cfg->params floats starting at x0 (diloco's outer parameters are
 * x0; the others do not keep x). topo is borrowed and must outlive the engine. NULL with err
 * on bad settings or no memory. */
rumor_gossip_t *rumor_gossip_new(const rumor_gossip_config_t *cfg, rumor_topology_t *topo,
                                 const float *x0, char err[RUMOR_ERR_LEN]);
void rumor_gossip_destroy(rumor_gossip_t **self_p);

/* The peers this node knows, without itself (any order, duplicates and self ignored; at most
 * RUMOR_GOSSIP_MAX_MEMBERS - 1 are used). Read at the next round's start. */
void rumor_gossip_set_view(rumor_gossip_t *g, const uint8_t (*keys)[RUMOR_KEY_LEN], size_t count);
/* The same with each peer's run id (boot id, 0: unknown) as this peer knows it: secure mixing
 * makes masks only with peers whose run it knows (secmix.h). */
void rumor_gossip_set_view_boots(rumor_gossip_t *g, const uint8_t (*keys)[RUMOR_KEY_LEN],
                                 const uint64_t *boots, size_t count);
/* The same with each peer's reach class and place (reach, place: NULL for all 0; self_reach,
 * self_place: this peer's). Reach 0: anyone can dial it; members of one nonzero class can dial
 * each other but nobody else can dial them; members of two different nonzero classes reach
 * each other only through a relay. The graph's positions are dealt so that as few edges as it
 * allows join two such members. Members take the graph's ranks in the order of their places,
 * then keys (a place of 0 is read as the key's first 8 bytes, big-endian: key order), so that
 * a driver can rank members by something they cannot choose (rumor_member_place). */
void rumor_gossip_set_view_reach(rumor_gossip_t *g, const uint8_t (*keys)[RUMOR_KEY_LEN], const uint64_t *boots,
                                 const uint64_t *reach, const uint64_t *place, size_t count, uint64_t self_reach,
                                 uint64_t self_place);

typedef enum {
    RUMOR_GOSSIP_DONE,  /* x holds the parameters to train on next */
    RUMOR_GOSSIP_WAIT,  /* call again at rumor_gossip_deadline() or when a chunk arrives */
} rumor_gossip_status_t;

/* A gossip point: the trainer did its local steps and hands its parameters x (params
 * floats). Finishes the round in flight when its models are in (or its deadline passed) by
 * mixing into x, and starts the next: a snapshot of x goes to the outbox. WAIT leaves x
 * untouched; call again with the same x. Errors: ENOMEM never (all memory is allocated up
 * front); EINVAL when the topology cannot be built on the current view (err says why; the
 * round is then run alone: x is kept, nothing sent). */
rumor_gossip_status_t rumor_gossip_step(rumor_gossip_t *g, float *x, uint64_t now);
/* When a WAIT ends at the latest (absolute ms); UINT64_MAX when only a release can end it. */
uint64_t rumor_gossip_deadline(const rumor_gossip_t *g);

/* ---- the outbox: sends for the driver ---- */

typedef struct {
    uint8_t peer[RUMOR_KEY_LEN];
    uint64_t round;
    double share;           /* the message's weight is share * w[c] for chunk c */
    const float *params;    /* the snapshot; valid until rumor_gossip_release(g, snap) */
    const double *w;        /* per-chunk weights of the snapshot, same lifetime */
    size_t count;           /* floats in params */
    size_t chunk_params;
    uint64_t layout;
    int snap;               /* which snapshot: pass to release */
    bool pulled;            /* an answer to a pull (rumor_gossip_lend), not a gossip send */
    /* secure_mix: encode every chunk with rumor_secmix_encode under these edges (the share
     * is share * w[c], as for a plain chunk), and send it masked with this mix id */
    bool masked;
    uint64_t mix;
    rumor_secmix_edges_t edges;
    /* choco: this peer's public copy, as a delta (enc not NULL: chunk c is the `codec`
     * payload enc[enc_off[c] .. enc_off[c + 1])) or whole (a keyframe: params, float32), at
     * version ver of lineage lin whose version 0 hashes to base; need: this peer holds no
     * complete copy of the receiver's (it asks for a keyframe). Same lifetime as params. */
    bool choco;
    int codec;
    const uint8_t *enc;
    const size_t *enc_off;
    uint64_t ver, lin, base;
    bool need;
} rumor_gossip_send_t;

/* Take the next send, false when none. Every taken send must end in exactly one
 * rumor_gossip_release (sent, dropped, or refused by the transport). */
bool rumor_gossip_next_send(rumor_gossip_t *g, rumor_gossip_send_t *out);
/* The transport is done with a send of snapshot `snap`. When the send never left (refused
 * locally), pass sent = false: push-sum then keeps the share it would have given away. */
void rumor_gossip_release(rumor_gossip_t *g, const rumor_gossip_send_t *s, bool sent);

/* A joining peer asks for this peer's model (late join): lend the latest snapshot, the
 * model part only (diloco: theta), as a send with share 1 and no weights (w NULL). The
 * engine holds a snapshot from the start (the initial parameters, round 0), so there is
 * always one. Release it like any send; it moves no push-sum mass. */
void rumor_gossip_lend(rumor_gossip_t *g, rumor_gossip_send_t *out);

/* ---- input ---- */

typedef struct {
    uint64_t round, layout;
    double w;
    uint32_t chunk, chunks;
    uint64_t off, n;
    size_t wire_bytes;     /* what the chunk took on the wire, encoded (counted in bytes_in); 0: len */
    bool masked;           /* payload is n uint32 of the masked codec (secure_mix), not float32 */
    uint64_t mix;          /* masked: the sender's mix id */
    bool choco;            /* a piece of the sender's public copy (see rumor_gossip_send_t) */
    int codec;             /* choco: f32 (a keyframe) or the compressor's codec (a delta) */
    uint64_t ver, lin, base;
    bool need;
} rumor_gossip_chunk_t;

/* A model chunk from peer (its payload: n float32, little-endian, any alignment). Returns
 * true when accepted (mixed into an accumulator), false when dropped and counted. */
bool rumor_gossip_on_chunk(rumor_gossip_t *g, const uint8_t peer[RUMOR_KEY_LEN],
                           const rumor_gossip_chunk_t *c, const void *payload, size_t len,
                           uint64_t now);

/* ---- state and counters ---- */

typedef enum {
    RUMOR_GOSSIP_DROP_LAYOUT,    /* another model */
    RUMOR_GOSSIP_DROP_SHAPE,     /* chunk geometry or length not ours */
    RUMOR_GOSSIP_DROP_WEIGHT,    /* share not finite or out of range */
    RUMOR_GOSSIP_DROP_NONFINITE, /* NaN or Inf in the payload */
    RUMOR_GOSSIP_DROP_DUPLICATE, /* chunk already received this round */
    RUMOR_GOSSIP_DROP_STALE,     /* round already finished */
    RUMOR_GOSSIP_DROP_AHEAD,     /* round beyond the next */
    RUMOR_GOSSIP_DROP_SENDERS,   /* too many senders this round */
    RUMOR_GOSSIP_DROP_BANNED,    /* a sender banned for its strikes (robust mixing) */
    RUMOR_GOSSIP_DROP_MODE,      /* masked, compressed or plain where this engine takes another kind */
    RUMOR_GOSSIP_DROP_COPY,      /* choco: a delta that does not follow the copy held (a gap, another lineage) */
    RUMOR_GOSSIP_DROP_IMPLAUSIBLE, /* finite, but out of all proportion to our own parameters */
    RUMOR_GOSSIP_DROP_FAR,       /* guard under diloco, a first round: a pseudo-gradient beyond
                                    RUMOR_GOSSIP_GUARD_FIRST times ours, or one more early chunk
                                    than it holds (delivered, not mixed) */
    RUMOR_GOSSIP_DROP_COUNT
} rumor_gossip_drop_t;

const char *rumor_gossip_drop_name(rumor_gossip_drop_t d);

typedef struct {
    uint64_t round;           /* rounds finished */
    double w;                 /* push-sum weight (mean over chunks); 1 outside sgp */
    double consensus;         /* ||s_r - mix_r||_2 of the last round finished */
    int last_peers;           /* neighbours that contributed to the last round (any chunk) */
    int last_missing;         /* expected neighbours left out of the last round (dpsgd, diloco) */
    int last_in, last_out;    /* in- and out-neighbours of the last round started */
    uint64_t models_in;       /* complete models received */
    uint64_t chunks_in, bytes_in;
    uint64_t sends, sends_failed;
    uint64_t missing_total;   /* sum of last_missing over all rounds */
    uint64_t drops[RUMOR_GOSSIP_DROP_COUNT];
    uint64_t deadline_ms;     /* the wait the last round finished allowed (adaptive; sgp: the
                                 round timeout), counted from when its gossip point began */
    uint64_t rounds_alone;    /* rounds the topology was not defined on the view (run alone) */
    bool clipping;            /* clip or guard is on (after "auto" was resolved) */
    double clip_radius;       /* robust mixing: sqrt(sum of tau_c^2) for the round in flight */
    uint64_t chunks_clipped;  /* robust mixing: chunks pulled in to the radius */
    uint64_t strikes, bans;   /* robust mixing: strikes given, senders banned */
    uint64_t chunks_unmixed;  /* secure mixing: chunks left out of a round (a sender missing or
                                 disagreeing on the set), summed over rounds */
    uint64_t sends_unmasked;  /* secure mixing: sends skipped, the receiver having < 2 senders */
    uint64_t keyframes;       /* choco: whole public copies sent */
    uint64_t copies_mixed;    /* choco: neighbours' copies in the last round's mix */
} rumor_gossip_stats_t;

void rumor_gossip_stats(const rumor_gossip_t *g, rumor_gossip_stats_t *st);

/* Add the mass this engine holds to z (params floats) and wt
 * (chunk_count): the weighted sums and weight totals of its live accumulators. With the
 * weighted payloads of the messages in flight this is what push-sum conserves; for tests. */
void rumor_gossip_mass(const rumor_gossip_t *g, double *z, double *wt);

/* The next gossip point is the run's last: it overlaps nothing (it finishes the round in
 * flight, then begins its own and finishes that too), so an overlapped run ends on a mixed
 * model. The plain forms do this at every gossip point. */
void rumor_gossip_close(rumor_gossip_t *g);

/* Overlapped diloco: a round is in flight, so the next gossip point is the one where it lands,
 * after algo.overlap_steps inner steps (the drivers run that many, then the rest of the phase's
 * H up to the next send). false otherwise. */
/* The snapshot a gossip point waits for because sends still hold it (lent to the wire: a
 * model on a link that died under it); -1 when none is waited for. *deadline_ms (when not
 * NULL): the last round's allowed wait, the patience the caller gives those sends. */
int rumor_gossip_snap_wanted(const rumor_gossip_t *g, uint64_t *deadline_ms);
bool rumor_gossip_merging(const rumor_gossip_t *g);

/* Whether the engine is inside a gossip point: its last step returned WAIT, so x as passed then
 * must be passed again (a driver that stages x into another buffer stages it once a point). */
bool rumor_gossip_waiting(const rumor_gossip_t *g);

/* ---- checkpoints ----
 * What a resumed peer needs besides its model and optimizer: the round, the push-sum
 * weights (one per chunk) and, for diloco, theta and the outer momentum (params floats each,
 * NULL otherwise). */
uint64_t rumor_gossip_round(const rumor_gossip_t *g);
size_t rumor_gossip_chunk_count(const rumor_gossip_t *g);
const double *rumor_gossip_weights(const rumor_gossip_t *g);
float *rumor_gossip_outer(rumor_gossip_t *g);      /* diloco theta, else NULL */
float *rumor_gossip_momentum(rumor_gossip_t *g);   /* diloco momentum, else NULL */
/* Restore after a resume, before the first step: round and weights (chunk_count of them). */
rumor_err_t rumor_gossip_restore(rumor_gossip_t *g, uint64_t round, const double *w, size_t count,
                                 char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* Whether a whole model x (params floats) from elsewhere (a late join's pull) is finite and, chunk
 * by chunk, of a plausible scale against this peer's latest snapshot (the test chunks get). */
bool rumor_gossip_plausible(const rumor_gossip_t *g, const float *x);
/* Whether two whole models confirm each other: |a - b| <= rel * max(|a|, |b|). Two honest
 * members of one swarm differ by their consensus distance, a few percent. */
bool rumor_models_agree(const float *a, const float *b, size_t n, double rel);
#define RUMOR_MODELS_AGREE 0.5 /* the rel a pulled model's confirmation uses */
#define RUMOR_RESYNC_ASKS 3     /* members asked for their model, one after another, in one resync */
#define RUMOR_RESYNC_AHEAD 4    /* a member this many rounds ahead of ours: we have fallen behind */

/* Members' models, as they answer one after another, kept until two confirm each other
 * (rumor_models_agree, RUMOR_MODELS_AGREE): a peer that falls into step with the swarm, joins
 * it late or ends with it takes only a model two members vouch for, their mean (a node,
 * peer.c; a virtual peer, sim/). The caller checks each answer first (plausible, far enough
 * ahead) and keeps it alive until it is done with them. */
typedef struct {
    size_t params;
    int n;                               /* answers kept */
    int a, b;                            /* the first two that agree; -1 while none do */
    const float *x[RUMOR_RESYNC_ASKS];
    uint64_t round[RUMOR_RESYNC_ASKS];
} rumor_confirm_t;

void rumor_confirm_init(rumor_confirm_t *c, size_t params);
/* Keep answer x, a model of params floats made at round: true once it and an earlier answer
 * confirm each other. Beyond RUMOR_RESYNC_ASKS answers nothing more is kept. */
bool rumor_confirm_add(rumor_confirm_t *c, const float *x, uint64_t round);
/* Once two confirm each other: their mean into out (which may be one's own model), and the
 * lower of their rounds, which they vouch for too. */
uint64_t rumor_confirm_mean(const rumor_confirm_t *c, float *out);
/* The round a peer's learning-rate schedule is at, given the k rounds it trained: the swarm's
 * (this engine's round, which jumps forward when the peer falls behind: peers that waited out
 * a dead neighbour keep the swarm's schedule, and end with it), but at most
 * RUMOR_SCHEDULE_AHEAD rounds past k, so a neighbour's claim of a far round cannot take a
 * peer's learning rate to the end of its schedule. */
long rumor_gossip_schedule_round(const rumor_gossip_t *g, long k);
#define RUMOR_SCHEDULE_AHEAD 16
/* Start over from the swarm's model (a late join, a resumed or fallen-behind peer): x is
 * taken as this peer's parameters (and diloco's theta, with the momentum cleared), weights
 * reset to 1, and the round jumps to `round`: at once, or, with a round in flight (dpsgd
 * between gossip points), when that round finishes. The caller puts x in its parameters. */
void rumor_gossip_adopt(rumor_gossip_t *g, const float *x, uint64_t round);

#endif
