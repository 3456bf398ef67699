/*
 * cli_fixture.h -- a cache with known rows for the CLI tests (test_cli.c,
 * test_cli_formats.c, test_cli_cache.c), written through the cache API under made-up device
 * keys; nothing is tuned.
 */
#ifndef CONVTUNE_TESTS_CLI_FIXTURE_H
#define CONVTUNE_TESTS_CLI_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/cache.h"
#include "tools/json.h"

#define SPEC "n=2 c=8 h=12 w=12 k=16 r=3 s=3 pad=1"
#define OTHER_SPEC "n=2 c=8 h=12 w=12 k=32 r=3 s=3 pad=1"
#define DEVICE_A "Test GPU A|sm90|132sm|l2=52428800|mem=2619000kHz*5120bit"
#define DEVICE_B "Test GPU B|sm80|108sm|l2=41943040|mem=1593000kHz*5120bit"
#define VERSIONS "cuda=12080 driver=12080 cudnn=90800 cublas=120800"

/* A new, empty cache at path (any old one and its -wal/-shm removed),
 * and SPEC's key in key.  TEST_PASS or TEST_FAIL (nothing left open). */
int open_fixture_cache(const char *path, char *key, size_t key_size, conv_cache **cache /* OUT */);

/* SPEC's key gets 3 trials on DEVICE_A (a winner, cuDNN's heuristic pick, a
 * wrong one) and 1 on DEVICE_B (its winner), in a new cache at path; the
 * key goes to key.  TEST_PASS or TEST_FAIL. */
int fill_cache(const char *path, char *key, size_t key_size);

/* A cache at path (made afresh) as an exhaustive tuning leaves it:
 * `keys` problems (SPEC with k = 8, 16, ...) on DEVICE_A, each with
 * `trials` cuDNN trials, the fastest (engine 0) its winner and engine 3
 * cuDNN's heuristic pick.  TEST_PASS or TEST_FAIL. */
int fill_deep_cache(const char *path, int keys, int trials);

/* Stores `winner` as the one trial and the winner of a tuning of `key` on
 * `device` (versions VERSIONS) in the cache at path.  TEST_PASS or
 * TEST_FAIL. */
int store_tuned(const char *path, const char *key, const char *device, const conv_trial *winner);

/* A cuDNN trial of `engine` (config {engine, 3}, text `text`). */
conv_trial make_trial(int64_t engine, const char *text, conv_status status, double time_ms,
                      double rel_error);

/* JSON probes: obj[key] is the string `value`; obj[key] is true. */
bool has_string(const json_t *obj, const char *key, const char *value);
bool is_true(const json_t *obj, const char *key);

#endif /* CONVTUNE_TESTS_CLI_FIXTURE_H */
