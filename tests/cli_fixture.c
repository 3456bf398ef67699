/*
 * cli_fixture.c -- see cli_fixture.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "convtune.h"
#include "algorithms/algorithm.h"
#include "test.h"
#include "tests/cli_fixture.h"
#include "tests/cli_run.h"
#include "tools/json.h"



conv_trial make_trial(int64_t engine, const char *text, conv_status status,
                             double time_ms, double rel_error) {
  conv_trial t;
  memset(&t, 0, sizeof t);
  t.algorithm_id = CONV_ALGO_CUDNN;
  snprintf(t.algorithm, sizeof t.algorithm, "cudnn");
  t.config.count = 2;
  t.config.values[0] = engine;
  t.config.values[1] = 3;
  snprintf(t.config_text, sizeof t.config_text, "%s", text);
  t.status = status;
  t.time_ms = time_ms;
  t.rel_error = rel_error;
  t.workspace_bytes = (size_t)engine * 1024 * 1024;
  t.deterministic = 1;
  return t;
}

/* SPEC's key gets 3 trials on DEVICE_A (a winner, cuDNN's heuristic pick, a
 * wrong one) and 1 on DEVICE_B (its winner). */
int open_fixture_cache(const char *path, char *key, size_t key_size, conv_cache **cache) {
  conv_problem p;
  CHECK_STATUS(CONV_OK, conv_problem_parse(SPEC, &p, NULL, 0));
  CHECK_STATUS(CONV_OK, conv_problem_key(&p, key, key_size));
  remove_cache_files(path);
  conv_error err = {CONV_OK, ""};
  CHECK_MSG(conv_cache_open(path, false, cache, &err) == CONV_OK, "%s", err.message);
  return TEST_PASS;
}

int fill_cache(const char *path, char *key, size_t key_size) {
  conv_cache *cache = NULL;
  int rc = open_fixture_cache(path, key, key_size, &cache);
  if (rc != TEST_PASS) return rc;
  conv_error err = {CONV_OK, ""};
  conv_cache_key a = {key, DEVICE_A, VERSIONS}, b = {key, DEVICE_B, VERSIONS};
  conv_trial best = make_trial(12, "engine=12 knobs=3", CONV_OK, 0.25, 1e-7);
  conv_trial pick = make_trial(1, "engine=1 knobs=3", CONV_OK, 0.5, 2e-7);
  pick.heuristic_pick = true;
  pick.config.flags = CONV_CONFIG_HEURISTIC_RANKED;
  conv_trial wrong = make_trial(7, "engine=7 knobs=3", CONV_VALIDATION_FAILED, 0.125, 2e-2);
  snprintf(wrong.reason, sizeof wrong.reason, "relative error 2.0e-02 above bound 1.0e-05");
  conv_trial other = make_trial(5, "engine=5 knobs=3", CONV_OK, 0.75, 1e-7);
  conv_status st = conv_cache_begin_tuning(cache, &a, &err);
  if (st == CONV_OK) st = conv_cache_begin_tuning(cache, &b, &err);
  const conv_trial *on_a[] = {&best, &pick, &wrong};
  for (size_t i = 0; i < 3 && st == CONV_OK; i++) st = conv_cache_add_trial(cache, &a, on_a[i], &err);
  if (st == CONV_OK) st = conv_cache_set_winner(cache, &a, best.algorithm_id, &best.config, &err);
  if (st == CONV_OK) st = conv_cache_add_trial(cache, &b, &other, &err);
  if (st == CONV_OK) st = conv_cache_set_winner(cache, &b, other.algorithm_id, &other.config, &err);
  conv_cache_close(cache);
  CHECK_MSG(st == CONV_OK, "%s: %s", conv_status_string(st), err.message);
  return TEST_PASS;
}

int fill_deep_cache(const char *path, int keys, int trials) {
  char key[CONV_PROBLEM_KEY_MAX];
  conv_cache *cache = NULL;
  CHECK(trials > 3 && trials <= 1000);
  int rc = open_fixture_cache(path, key, sizeof key, &cache);
  if (rc != TEST_PASS) return rc;
  conv_trial *made = calloc((size_t)trials, sizeof *made);
  conv_error err = {CONV_OK, ""};
  conv_status st = made ? CONV_OK : CONV_OUT_OF_MEMORY;
  for (int k = 0; k < keys && st == CONV_OK; k++) {
    conv_problem p;
    char spec[128];
    snprintf(spec, sizeof spec, "n=2 c=8 h=12 w=12 k=%d r=3 s=3 pad=1", 8 * (k + 1));
    st = conv_problem_parse(spec, &p, NULL, 0);
    if (st == CONV_OK) st = conv_problem_key(&p, key, sizeof key);
    for (int i = 0; i < trials && st == CONV_OK; i++) {
      char text[64];
      snprintf(text, sizeof text, "engine=%d knobs=3 split=%d", i, i % 7);
      made[i] = make_trial(i, text, CONV_OK, 0.5 + 0.01 * i, 1e-7);
      made[i].winner = i == 0;
      made[i].heuristic_pick = i == 3;
    }
    conv_cache_key ck = {key, DEVICE_A, VERSIONS};
    if (st == CONV_OK) st = conv_cache_replace_tuning(cache, &ck, made, NULL, (size_t)trials, &err);
  }
  free(made);
  conv_cache_close(cache);
  CHECK_MSG(st == CONV_OK, "%s: %s", conv_status_string(st), err.message);
  return TEST_PASS;
}

int store_tuned(const char *path, const char *key, const char *device, const conv_trial *winner) {
  conv_cache *cache = NULL;
  conv_error err = {CONV_OK, ""};
  CHECK_MSG(conv_cache_open(path, false, &cache, &err) == CONV_OK, "%s", err.message);
  conv_cache_key k = {key, device, VERSIONS};
  conv_status st = conv_cache_begin_tuning(cache, &k, &err);
  if (st == CONV_OK) st = conv_cache_add_trial(cache, &k, winner, &err);
  if (st == CONV_OK)
    st = conv_cache_set_winner(cache, &k, winner->algorithm_id, &winner->config, &err);
  conv_cache_close(cache);
  CHECK_MSG(st == CONV_OK, "%s", err.message);
  return TEST_PASS;
}

bool has_string(const json_t *obj, const char *key, const char *value) {
  const char *v = json_string_value(json_object_get(obj, key));
  return v != NULL && strcmp(v, value) == 0;
}

bool is_true(const json_t *obj, const char *key) {
  return json_is_true(json_object_get(obj, key));
}
