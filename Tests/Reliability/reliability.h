/* SPDX-License-Identifier: Apache-2.0 */
/* Copyright QueueKit developers */

/*
 * reliability.h — small helpers shared by the reliability programs (torture.c, misuse.c, soak.c):
 * a seeded PRNG, validated numeric arguments, a monotonic clock in nanoseconds, failure reports.
 * Header-only, static functions: each program is one translation unit.
 */
#ifndef QK_RELIABILITY_H
#define QK_RELIABILITY_H

/* POSIX and BSD extras (usleep, pthread types) under -std=c11: include this header first. */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE
#endif

#include <queuekit.h>

#include <bsd/stdlib.h> /* strtonum */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A seeded, reproducible PRNG: splitmix64. libbsd's arc4random_uniform is the well-kept
 * generator for unpredictable numbers, but it cannot be seeded, and the torture test must
 * regenerate the very same call tree from the seed printed on failure. splitmix64 is tiny,
 * passes BigCrush, and every 64-bit seed (0 included) starts a good stream. */
typedef struct {
    uint64_t state;
} rl_rng;

static inline uint64_t rl_next(rl_rng *rng) {
    uint64_t z = (rng->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A uniform number in [0, bound), bound > 0 (Lemire's multiply-shift; the tiny bias of the
 * plain version does not matter for test generation, but rejection keeps it exact anyway). */
static inline uint32_t rl_below(rl_rng *rng, uint32_t bound) {
    uint64_t m = (uint64_t)(uint32_t)rl_next(rng) * bound;
    uint32_t low = (uint32_t)m;
    if (low < bound) {
        uint32_t threshold = (uint32_t)-bound % bound;
        while (low < threshold) {
            m = (uint64_t)(uint32_t)rl_next(rng) * bound;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

/* Derives an independent seed from a seed and an index (one splitmix step over their mix). */
static inline uint64_t rl_derive(uint64_t seed, uint64_t index) {
    rl_rng rng = {seed ^ (index * 0xD1B54A32D192ED03ull)};
    return rl_next(&rng);
}

/* A validated numeric command-line argument in [min, max]; exits with a message otherwise. */
static inline long long rl_number(const char *text, long long min, long long max,
                                  const char *what) {
    const char *error = NULL;
    long long value = strtonum(text, min, max, &error);
    if (error != NULL) {
        fprintf(stderr, "%s: '%s' is %s (expected %lld..%lld)\n", what, text, error, min, max);
        exit(2);
    }
    return value;
}

/* A 64-bit seed (strtonum stops at LLONG_MAX, seeds use the full range): decimal or 0x hex. */
static inline uint64_t rl_seed(const char *text) {
    char *end = NULL;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 0);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-') {
        fprintf(stderr, "seed: '%s' is not an unsigned 64-bit number\n", text);
        exit(2);
    }
    return value;
}

#endif /* QK_RELIABILITY_H */
