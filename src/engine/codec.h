/*
 * codec.h - compression codecs for model chunks: what frame 2 of a `model` message holds.
 *
 * The wire formats are fixed by proto/PROTOCOL.md ("model", table of codecs) and numbered by
 * rumor_proto_codec_t; this module turns n float32 parameters into those bytes and back.
 * All formats are little-endian (this module assumes a little-endian host, as the rest of
 * rumor does):
 *
 *   f32   n binary32                                   4n bytes, exact
 *   fp16  n IEEE binary16                               2n bytes, relative error <= 2^-11
 *   bf16  n bfloat16 (upper half of a binary32)         2n bytes, relative error <= 2^-8
 *   int8  binary32 scale s, then n int8 q (value s*q)   4 + n bytes, error <= s/2 (+ 2^-16 s)
 *   topk  k pairs (uint32 index, binary32 value)        8k bytes, the k largest |x|, exact
 *   int4  per block of 64: bfloat16 scale s, then       2 ceil(n/64) + ceil(n/2) bytes,
 *         the block's q in nibbles (value s*q)          error <= s/2 (+ 2^-15 s)
 *
 * Encoding (sender side; rounding is round-to-nearest, ties to even, everywhere):
 *   fp16  subnormal halves included. A finite input beyond the largest half (65504) is sent
 *         as +-65504, not as infinity: receivers reject non-finite values, and a clamped
 *         parameter is more use to them than a dropped chunk.
 *   bf16  the binary32 rounded to its upper 16 bits; finite inputs that would round up to
 *         infinity are clamped to the largest finite bfloat16 (+-3.3895e38) for the same reason.
 *   int8  symmetric, one scale per chunk: s = max|x| / 127 (0 when every entry is zero),
 *         q = round(x / s), within [-127, 127] (the encoder never sends -128).
 *   int4  symmetric, one scale per block of RUMOR_CODEC_INT4_BLOCK (64): s = max|x| / 7 rounded
 *         to bfloat16 (one down if 7 s would overflow), q = round(x / s) within [-7, 7], two
 *         to a byte, the even entry in the low nibble, a block of odd length padded with a 0
 *         nibble. 4.25 bits a parameter: a model in int4 is too coarse to mix (its error is
 *         a fourteenth of the block's largest weight), so int4 travels only as the compressed
 *         differences of a public copy (CHOCO below), never as a model.
 *   topk  k = max(1, ceil(fraction * n)) entries of largest magnitude, ties broken by the
 *         lower index, listed in ascending index order; the values are sent exactly. The
 *         selection is a radix select on the magnitudes' bit patterns, three or four passes
 *         over the chunk: O(n) in the worst case, no sort, no allocation. A chunk holds at
 *         most 2^32 - 1 parameters (indices are uint32).
 * A non-finite input (NaN, +-Inf) is never encoded: encoding fails with RUMOR_EINVAL, since
 * no receiver would accept it. There are no NaN payloads to round.
 *
 * Decoding (receiver side) takes the codec number of the message, not the receiver's own
 * setting: a peer decodes whatever codec its neighbours chose. A payload is validated in full
 * before anything is written (validate, then apply), so a rejected chunk leaves the caller's
 * buffer exactly as it was. Rejected with RUMOR_EPROTO and a sentence in err: a length that
 * is not the codec's for n, a value that is not finite (an f16/bf16/f32 Inf or NaN pattern, an
 * int8 scale that is not finite or whose product with some q overflows, an int4 scale that is
 * not finite or whose product with 7 overflows, an int4 q of -8 or a padding nibble that is
 * not 0), a topk index >= n or listed twice. Topk indices need not be in ascending order (the protocol asks only that they
 * be distinct); ascending ones are checked in one pass, others through a sorted copy of the
 * indices (the only allocation here, at most half the payload; RUMOR_ENOMEM if it fails).
 *
 * Error feedback (CHOCO-SGD, Koloskova et al. 2019): rumor_codec_encode_delta compresses the
 * difference between the model x and a public copy xhat that the sender and every receiver
 * hold alike, and moves xhat by exactly what a receiver will decode, so the copies never drift.
 *
 * Non-goals: chunking, message headers and the 8 MiB frame limit (proto/ and the gossip
 * engine), choosing a codec per peer, keeping xhat per neighbour (the engine's business),
 * overflow of the caller's accumulator (w times a finite value can still overflow float32).
 *
 * Invariants: pure functions, no globals, no threads, no clocks; every function is safe on
 * any payload bytes (no assert depends on network input); payloads may have any alignment.
 */
#ifndef RUMOR_CODEC_H
#define RUMOR_CODEC_H

#include "proto.h"
#include "base.h"

#include <stddef.h>
#include <stdint.h>

/* A sender's choice of codec (--codec SPEC). */
typedef struct {
    rumor_proto_codec_t id; /* the wire number */
    double fraction;        /* topk: share of a chunk's entries sent, 0 < fraction <= 1; else 0 */
} rumor_codec_t;

/* "f32" (or "fp32"), "fp16" (or "f16"), "bf16", "int8", "int4", "topk:FRACTION" with a decimal
 * fraction in (0, 1] ("topk:0.01"). RUMOR_EINVAL with a sentence in err otherwise. */
rumor_err_t rumor_codec_parse(rumor_codec_t *out, const char *spec, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;
/* Parameters per chunk a sender uses with this codec; 0: the gossip default (1 MiB of float32).
 * int8 has one scale per chunk, so it takes smaller chunks, 32768 parameters (8 peers,
 * mlp:256,128: 0.06 points below float32, against 0.49 with chunks of 262144). */
size_t rumor_codec_chunk_params(const rumor_codec_t *c);
/* The spec back ("fp16", "topk:0.01"); parses back to an equal codec. */
void rumor_codec_format(char *buf, size_t len, const rumor_codec_t *c);
/* The canonical name of a wire codec ("f32", "fp16", "bf16", "int8", "topk", "int4"); "?" otherwise. */
const char *rumor_codec_name(rumor_proto_codec_t id);

/* Pairs topk sends for n entries: max(1, ceil(fraction * n)), at most n (fraction * n is
 * taken in double, and a relative excess below 1e-12 is forgiven, so that topk:0.01 of 300
 * is 3 and not 4). 0 when n = 0; n for the dense codecs. */
size_t rumor_codec_topk_count(const rumor_codec_t *c, size_t n);
/* Bytes rumor_codec_encode writes for n >= 1 entries: 4n, 2n, 2n, 4 + n, 8k, or
 * 2 ceil(n/64) + ceil(n/2) (int4). */
size_t rumor_codec_encoded_len(const rumor_codec_t *c, size_t n);

/* Encode x[0..n) (n >= 1) into out, which has room for rumor_codec_encoded_len(c, n) bytes;
 * *out_len gets that length. RUMOR_EINVAL (err says which entry) when an entry is not
 * finite; out is then unspecified. err may be NULL. */
rumor_err_t rumor_codec_encode(const rumor_codec_t *c, const float *x, size_t n, uint8_t *out, size_t *out_len,
                               char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* Error feedback: encode d = x - xhat (entry by entry, in float32) into out as
 * rumor_codec_encode would encode d, then add to xhat what a receiver decodes from out,
 * exactly as rumor_codec_decode_add(c->id, out, *out_len, n, 1.0f, xhat) does on its copy.
 * Repeated with a fixed x, xhat approaches x: topk sends the k largest remaining differences
 * each time (from xhat = 0 it reaches x exactly after ceil(n / k) calls), int8 shrinks the
 * largest difference about 254-fold a call, int4 about 14-fold. RUMOR_EINVAL when some x - xhat is not finite;
 * xhat is then unchanged. */
rumor_err_t rumor_codec_encode_delta(const rumor_codec_t *c, const float *x, float *xhat, size_t n, uint8_t *out,
                                     size_t *out_len, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* Validate a payload of len bytes said to hold n parameters in codec, writing nothing.
 * RUMOR_OK, or RUMOR_EPROTO / RUMOR_ENOMEM with a sentence in err (see the top). */
rumor_err_t rumor_codec_check(rumor_proto_codec_t codec, const uint8_t *payload, size_t len, size_t n,
                              char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* acc[i] += w * value[i] for the n parameters of the payload (topk: only the listed
 * indices), once rumor_codec_check passed; on any error acc is untouched. Products are
 * float32: w * v for f32, fp16, bf16 and topk, (w * s) * q for int8 and int4 (w * (s * q) where w * s
 * overflows). w must be finite. */
rumor_err_t rumor_codec_decode_add(rumor_proto_codec_t codec, const uint8_t *payload, size_t len, size_t n,
                                   float w, float *acc, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* out[i] = value[i] for i < n (topk: 0 where no pair is listed); on error out is untouched. */
rumor_err_t rumor_codec_decode(rumor_proto_codec_t codec, const uint8_t *payload, size_t len, size_t n,
                               float *out, char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

/* ---- scalar conversions (known-answer tests, tools) ---- */

/* float32 -> binary16 bits as the fp16 codec rounds them (finite input; beyond 65504 clamps). */
uint16_t rumor_codec_f16_from_float(float x);
/* binary16 bits -> float32, exact (Inf and NaN patterns map to Inf and NaN). */
float rumor_codec_f16_to_float(uint16_t h);
/* float32 -> bfloat16 bits as the bf16 codec rounds them (finite input; clamps like fp16). */
uint16_t rumor_codec_bf16_from_float(float x);
/* bfloat16 bits -> float32, exact. */
float rumor_codec_bf16_to_float(uint16_t h);

#endif
