/*
 * json.h -- a small, strict JSON reader and writer for the convtune CLI, and
 * the loader of benchmark suite files (bench/suite.json's format).
 *
 * The reader accepts RFC 8259 JSON only: objects, arrays, strings (escapes,
 * surrogate pairs, valid UTF-8), numbers, true, false, null.  No comments,
 * no trailing commas, no duplicate keys, no NaN, nothing after the value
 * (whitespace aside; a leading UTF-8 byte order mark is skipped).  Nesting is
 * limited to JSON_MAX_DEPTH.  Errors carry a 1-based line and column (bytes).
 */
#ifndef CONVTUNE_TOOLS_JSON_H
#define CONVTUNE_TOOLS_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "convtune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- reader */

#define JSON_MAX_DEPTH 64

typedef enum json_type {
  JSON_NULL = 0,
  JSON_BOOL,
  JSON_NUMBER,
  JSON_STRING,
  JSON_ARRAY,
  JSON_OBJECT
} json_type;

typedef struct json_member json_member;

typedef struct json_value {
  json_type type;
  int line, column; /* where the value starts in the text */
  union {
    bool boolean;
    double number;
    struct {
      char *chars; /* NUL-terminated; may hold NULs from \u0000, see len */
      size_t len;
    } string;
    struct {
      struct json_value *items;
      size_t count;
    } array;
    struct {
      json_member *members; /* in the text's order */
      size_t count;
    } object;
  } u;
} json_value;

struct json_member {
  char *key; /* NUL-terminated */
  size_t key_len;
  json_value value;
};

typedef struct json_error {
  int line, column; /* 1-based; 0 when the error has no position */
  char message[256];
} json_error;

/* Parses text[0..len) into *out (which the caller frees with json_free).
 * Returns false and fills err (may be NULL) on malformed input or when
 * memory runs out; *out is then untouched. */
bool json_parse(const char *text, size_t len, json_value *out /* OUT */, json_error *err);

/* Frees what json_parse allocated inside value (not value itself). */
void json_free(json_value *value);

/* The member `key` of an object, or NULL (also when value is not an object). */
const json_value *json_object_get(const json_value *value, const char *key);

/* "null", "boolean", "number", "string", "array", "object". */
const char *json_type_name(json_type type);

/* ---------------------------------------------------------------- writer */

/* Writes s as a JSON string literal (quotes, escapes): valid UTF-8 is
 * written as it is, any byte that is not valid UTF-8 as \ufffd, so the
 * output is valid JSON whatever s holds.  NULL writes null. */
void json_write_string(FILE *out, const char *s);

/* Writes a number that reads back to the same double; null when not finite. */
void json_write_number(FILE *out, double value);

/* ---------------------------------------------------------------- suites */

/* One shape of a suite file. */
typedef struct suite_shape {
  char *name;
  conv_problem problem;
} suite_shape;

/* Shapes to tune, and one note per row that was skipped, e.g.
 * "skipping seed4_highorder: op 'dynamic' is not supported yet". */
typedef struct suite {
  suite_shape *shapes;
  size_t count, cap;
  char **notes;
  size_t note_count, note_cap;
} suite;

/* Empties a suite (all fields zero); suite_free() it after use. */
void suite_init(suite *s);
void suite_free(suite *s); /* frees the contents; the suite is empty again */

/* Appends a copy of name and problem.  Returns false when memory runs out. */
bool suite_add(suite *s, const char *name, const conv_problem *problem);

/* Appends the rows of a suite document to s.  The document is either
 * {"shapes": [ROW, ...]} or [ROW, ...]; a ROW is an object with
 *   "name" (non-empty string), "N" "C" "H" "W" "K" "R" "S" (integers),
 *   optional "stride" "pad" "dil" (integer, or [h, w]; default 1, 0, 1),
 *   optional "groups" (integer, default 1), "math" ("strict" | "tf32"),
 *   "epilogue" ("none" | "bias" | "bias_relu"), and "op" (default "conv").
 * A row whose op is not "conv" adds a note and is skipped (its other fields
 * are not checked).  Other keys ("why", "bwd", ...) are ignored.  Each
 * row's problem must pass conv_problem_validate().
 * Returns false on malformed JSON, a wrong shape or type, an invalid
 * problem (err names the row, the field and its position) or when memory
 * runs out; s may then hold some of the rows. */
bool suite_parse(const char *text, size_t len, suite *s, json_error *err);

/* Reads the file at path and suite_parse()s it.  On failure writes
 * "PATH:LINE:COL: what" (or "PATH: reason" for I/O errors) to message. */
bool suite_load(const char *path, suite *s, char *message, size_t message_size);

/* Reads a whole regular file (at most max_bytes) into a NUL-terminated
 * buffer the caller free()s.  Anything else (a directory, a FIFO, which
 * would block, a device) is refused at once.  On failure returns false and
 * writes "PATH: reason" to message. */
bool json_read_file(const char *path, size_t max_bytes, char **text /* OUT */,
                    size_t *len /* OUT */, char *message, size_t message_size);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_TOOLS_JSON_H */
