/*
 * backend_staged.h - a test backend: the CPU backend behind the contract of a device.
 *
 * Its memory is not host memory (host_memory = false), and it means it: backend pointers are
 * tagged with an address bit no process maps, so host code that reads or writes backend
 * memory directly crashes at once instead of working by accident, and an op given a host
 * pointer where backend memory belongs (or the reverse) aborts. Asynchronous copies are
 * deferred until wait_copies or sync, so a caller that forgets to wait reads stale bytes. An
 * upload_async into memory that work queued since the device was last known idle still reads
 * or writes (a race on a device) makes the next sync fail, saying so. softmax_xent's sums
 * land at sync, as on a device: until then the caller's loss is NaN and its count LONG_MIN,
 * so a loss read before sync shows.
 * Everything else is the CPU backend's arithmetic, so results equal the CPU's bit for bit:
 * what CI (without a GPU) can check of the paths a device takes in rumor train and node.
 */
#ifndef RUMOR_TEST_BACKEND_STAGED_H
#define RUMOR_TEST_BACKEND_STAGED_H

#include "backend.h"

extern const struct rumor_backend_ops rumor_test_staged_ops;

#endif
