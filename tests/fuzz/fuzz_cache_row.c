/*
 * fuzz_cache_row.c -- libFuzzer target: decoding cache rows (trials_read.c) from
 * an untrusted file, and printing them as the CLI does.
 *
 * Input: the values of one row of the trials table, a line per column in
 * the table's order (problem, device, versions, algorithm_id, algorithm,
 * config, config_text, status, status_name, reason, time_ms, rel_error,
 * workspace_bytes, heuristic_pick, winner, tuned_at, deterministic), each line a type
 * letter and the value: "i" integer, "r" real, "t" text (the rest of the
 * line, any bytes), "x" text in hex (for newlines and NULs), "b" blob in
 * hex, "n" NULL.  The row is stored behind the cache's back with raw SQL
 * and read through conv_cache_lookup_winner and the list functions.  What
 * must hold: a row is either refused with CONV_CACHE_ERROR or decoded into
 * a trial whose values are in range (a winner valid, validated and timed;
 * texts within their limits), and its strings print as valid JSON and as
 * control-free text.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "cache/cache.h"
#include "tests/fuzz/fuzz.h"
#include "tools/json.h"
#include "tools/text.h"

/* One in-memory database shared by the raw connection and the cache's. */
#define DB_URI "file:fuzz_cache_row?mode=memory&cache=shared"
#define COLUMNS 17

static sqlite3 *raw;
static conv_cache *cache;

static void setup(void) {
  REQUIRE(sqlite3_config(SQLITE_CONFIG_URI, 1) == SQLITE_OK);
  conv_error err = {CONV_OK, ""};
  /* The cache's own connection makes the schema; the raw one keeps the
   * shared in-memory database alive. */
  REQUIRE(sqlite3_open_v2(DB_URI, &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI,
                          NULL) == SQLITE_OK);
  if (conv_cache_open(DB_URI, false, &cache, &err) != CONV_OK) {
    fprintf(stderr, "fuzz_cache_row: %s\n", err.message);
    abort();
  }
}

static int hex_value(int c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                        : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Decodes hex digits (others are skipped) into a malloc'd buffer. */
static unsigned char *from_hex(const char *s, size_t len, size_t *out_len) {
  unsigned char *out = malloc(len / 2 + 1);
  size_t n = 0;
  int high = -1;
  for (size_t i = 0; out != NULL && i < len; i++) {
    int v = hex_value((unsigned char)s[i]);
    if (v < 0) continue;
    if (high < 0) {
      high = v;
    } else {
      out[n++] = (unsigned char)(high << 4 | v);
      high = -1;
    }
  }
  *out_len = n;
  return out;
}

/* Binds one "<type><value>" line as parameter `index`. */
static int bind_line(sqlite3_stmt *st, int index, const char *line, size_t len) {
  if (len == 0) return sqlite3_bind_null(st, index);
  const char *value = line + 1;
  size_t n = len - 1;
  char number[64];
  snprintf(number, sizeof number, "%.*s", (int)(n < 63 ? n : 63), value);
  switch (line[0]) {
  case 'i': return sqlite3_bind_int64(st, index, strtoll(number, NULL, 0));
  case 'r': return sqlite3_bind_double(st, index, strtod(number, NULL));
  case 't': return sqlite3_bind_text(st, index, value, (int)n, SQLITE_TRANSIENT);
  case 'x':
  case 'b': {
    size_t bytes = 0;
    unsigned char *decoded = from_hex(value, n, &bytes);
    if (decoded == NULL) return SQLITE_NOMEM;
    int rc = line[0] == 'x' ? sqlite3_bind_text(st, index, (const char *)decoded, (int)bytes, SQLITE_TRANSIENT)
                            : sqlite3_bind_blob(st, index, decoded, (int)bytes, SQLITE_TRANSIENT);
    free(decoded);
    return rc;
  }
  default: return sqlite3_bind_null(st, index);
  }
}

/* Stores the input as one row; false when SQLite refuses it (NOT NULL). */
static bool store_row(const uint8_t *data, size_t size) {
  REQUIRE(sqlite3_exec(raw, "DELETE FROM trials", NULL, NULL, NULL) == SQLITE_OK);
  sqlite3_stmt *st = NULL;
  REQUIRE(sqlite3_prepare_v2(raw,
                             "INSERT INTO trials (problem, device, versions, algorithm_id,"
                             " algorithm, config, config_text, status, status_name, reason,"
                             " time_ms, rel_error, workspace_bytes, heuristic_pick, winner,"
                             " tuned_at, deterministic) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8,"
                             " ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
                             -1, &st, NULL) == SQLITE_OK);
  const char *text = (const char *)data, *end = text + size;
  int rc = SQLITE_OK;
  for (int column = 1; column <= COLUMNS && rc == SQLITE_OK; column++) {
    const char *newline = text < end ? memchr(text, '\n', (size_t)(end - text)) : NULL;
    const char *line_end = newline ? newline : end;
    rc = text < end ? bind_line(st, column, text, (size_t)(line_end - text))
                    : sqlite3_bind_null(st, column);
    text = newline ? newline + 1 : end;
  }
  if (rc == SQLITE_OK) rc = sqlite3_step(st);
  sqlite3_finalize(st);
  return rc == SQLITE_DONE;
}

static void check_text(const char *s) {
  char *out = NULL;
  size_t out_size = 0;
  FILE *f = open_memstream(&out, &out_size);
  REQUIRE(f != NULL);
  json_write_string(f, s);
  REQUIRE(fclose(f) == 0);
  json_t *v = json_load_strict(out, out_size, NULL);
  REQUIRE(v != NULL); /* valid JSON, whatever the bytes */
  json_decref(v);
  free(out);
  size_t size = 4 * strlen(s) + 1;
  char *line = malloc(size);
  REQUIRE(line != NULL);
  text_printable(s, line, size);
  for (const unsigned char *c = (const unsigned char *)line; *c; c++) REQUIRE(*c >= 0x20 && *c != 0x7f);
  free(line);
}

static void check_trial(const conv_trial *t) {
  REQUIRE(t->algorithm_id > 0);
  REQUIRE((int)t->status >= 0 && t->status < CONV_STATUS_COUNT_);
  REQUIRE(t->config.count >= 0 && t->config.count <= CONV_CONFIG_MAX_VALUES);
  REQUIRE(memchr(t->algorithm, '\0', sizeof t->algorithm) != NULL);
  REQUIRE(memchr(t->config_text, '\0', sizeof t->config_text) != NULL);
  REQUIRE(memchr(t->reason, '\0', sizeof t->reason) != NULL);
  REQUIRE(t->deterministic >= -1 && t->deterministic <= 1);
  REQUIRE(!t->winner || conv_cache_trial_can_win(t));
  REQUIRE(t->time_ms == -1.0 || (isfinite(t->time_ms) && t->time_ms >= 0));
  REQUIRE(t->rel_error == -1.0 || (isfinite(t->rel_error) && t->rel_error >= 0));
  check_text(t->algorithm);
  check_text(t->config_text);
  check_text(t->reason);
}

static int check_row(const conv_cache_row *row, void *user) {
  (void)user;
  check_trial(row->trial);
  check_text(row->problem);
  check_text(row->device);
  check_text(row->versions);
  check_text(row->tuned_at);
  REQUIRE(strlen(row->problem) < CONV_PROBLEM_KEY_MAX);
  REQUIRE(strlen(row->device) < CONV_CACHE_DEVICE_MAX);
  REQUIRE(strlen(row->versions) < CONV_CACHE_VERSIONS_MAX);
  REQUIRE(strlen(row->tuned_at) < CONV_CACHE_TUNED_AT_MAX);
  return 0;
}

static void expect_ok_or_refused(conv_status st, const conv_error *err) {
  REQUIRE(st == CONV_OK || st == CONV_CACHE_ERROR);
  if (st != CONV_OK) REQUIRE(err->message[0] != '\0');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (cache == NULL) setup();
  if (!store_row(data, size)) return 0;
  conv_error err = {CONV_OK, ""};
  expect_ok_or_refused(conv_cache_list_winners(cache, check_row, NULL, &err), &err);

  /* The stored key, where it is text, for the keyed reads. */
  sqlite3_stmt *st = NULL;
  REQUIRE(sqlite3_prepare_v2(raw, "SELECT problem, device, versions FROM trials", -1, &st, NULL) ==
          SQLITE_OK);
  if (sqlite3_step(st) == SQLITE_ROW) {
    const char *problem = (const char *)sqlite3_column_text(st, 0);
    const char *device = (const char *)sqlite3_column_text(st, 1);
    const char *versions = (const char *)sqlite3_column_text(st, 2);
    if (problem != NULL) {
      err.message[0] = '\0';
      expect_ok_or_refused(conv_cache_list_trials(cache, problem, check_row, NULL, &err), &err);
    }
    if (problem != NULL && device != NULL && versions != NULL) {
      conv_cache_key key = {problem, device, versions};
      conv_trial winner;
      bool found = false;
      err.message[0] = '\0';
      conv_status s = conv_cache_lookup_winner(cache, &key, &winner, &found, &err);
      expect_ok_or_refused(s, &err);
      if (s == CONV_OK && found) check_trial(&winner);
    }
  }
  sqlite3_finalize(st);
  return 0;
}
