/*
 * backend_compare.h - every backend op, a training step on each model, mixing and
 * checkpoints: a backend against the CPU backend (the oracle) on the same random inputs.
 *
 * Shared by test_backend_cuda (the CUDA backend, on a machine with a GPU) and
 * test_backend_staged (the CPU backend behind a device's contract, everywhere), so the
 * comparison code itself runs in CI without a GPU. Tolerances are stated per op (relative,
 * |dev - cpu| <= tol * (|cpu| + floor)); with exact = true every tolerance is zero: a backend
 * that does the CPU's arithmetic must give the CPU's bits.
 */
#ifndef RUMOR_TEST_BACKEND_COMPARE_H
#define RUMOR_TEST_BACKEND_COMPARE_H

#include "backend.h"

#include <stdbool.h>

/* Run every comparison of dev against a fresh CPU backend; each failure is printed, and the
 * count of failed checks returned (check.h's counters are per file). errors: also check that
 * a failing call is reported by sync with its call site (a backend that can fail). */
int backend_compare_all(rumor_backend_t *dev, bool exact, bool errors, const char *tmpdir);
/* Whether two files hold the same bytes (false when either cannot be read). */
bool backend_same_file(const char *a, const char *b);

#endif
