/*
 * bench.h - network benchmark: two real nodes against raw libzmq CURVE, same bytes, one run.
 */
#ifndef RUMOR_NET_BENCH_H
#define RUMOR_NET_BENCH_H

#include "base.h"

#include <stddef.h>

typedef struct {
    double rumor_mbps; /* model bytes per second through two nodes, median over rounds */
    double raw_mbps;   /* the same chunks between two raw CURVE sockets */
    double ratio;      /* rumor / raw */
    long peak_kb;      /* peak resident memory above the idle process, kB */
} rumor_net_bench_t;

/* Send a model of n_params float32 in chunks of chunk_params, `repeat` times after one
 * warm-up, each model only after the previous one arrived. */
rumor_err_t rumor_net_bench(size_t n_params, size_t chunk_params, int repeat, rumor_net_bench_t *out,
                            char err[RUMOR_ERR_LEN]) RUMOR_MUST_CHECK;

#endif
