/* row_checks.c -- what is wrong with a value read back from a cache file
 * (db.h, "values read back"): the file may be shipped, old or hostile. */
#include "cache/db.h"

#include <math.h>
#include <string.h>

const char *conv_cache_check_text(const char *text, size_t bytes, size_t max) {
  if (text == NULL) return "is not text";
  /* C strings would end early, and match another key than the row's. */
  if (memchr(text, '\0', bytes) != NULL) return "holds a NUL byte";
  if (bytes > max) return "is too long";
  return NULL;
}

const char *conv_cache_check_column_text(sqlite3_stmt *st, int col, size_t max) {
  if (sqlite3_column_type(st, col) != SQLITE_TEXT) return "is not text";
  const char *text = (const char *)sqlite3_column_text(st, col);
  return conv_cache_check_text(text, (size_t)sqlite3_column_bytes(st, col), max);
}

const char *conv_cache_check_problem_key(const char *key) {
  conv_problem problem;
  if (conv_problem_from_key_sized(key, &problem, sizeof problem) != CONV_OK)
    return "is not a problem key this version writes";
  return NULL;
}

const char *conv_cache_check_winner(const conv_trial *winner) {
  if (winner->status != CONV_OK) return "failed (its status is not OK)";
  if (!(winner->rel_error >= 0) || !isfinite(winner->rel_error)) return "was not validated";
  if (!(winner->time_ms > 0) || !isfinite(winner->time_ms)) return "was not timed";
  return NULL;
}
