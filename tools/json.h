/*
 * json.h -- JSON for the convtune CLI: documents read with jansson, the
 * writer of its --json output, and the loader of benchmark suite files
 * (bench/suite.json's format).
 *
 * Documents are read strictly (json_load_strict): RFC 8259 JSON only, with
 * no duplicate keys and no NUL in strings (\u0000); any value may be at the
 * top; nesting is limited to JSON_PARSER_MAX_DEPTH (jansson's); a leading
 * UTF-8 byte order mark is skipped.  jansson places a malformed document's
 * error at a 1-based line and column (characters), where reading stopped.
 */
#ifndef CONVTUNE_TOOLS_JSON_H
#define CONVTUNE_TOOLS_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "convtune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- reader */

/* text[0..len) as a jansson value (json_decref() it), or NULL with err
 * (may be NULL) filled when the text is malformed or memory runs out. */
json_t *json_load_strict(const char *text, size_t len, json_error_t *err);

/* ---------------------------------------------------------------- writer */

/* Writes s as a JSON string literal (quotes, escapes): valid UTF-8 is
 * written as it is, a control character (text_is_control: C0, DEL, C1,
 * bidi controls) as a \u escape, which reads back as the same text but
 * cannot act on a terminal the output is shown on, and any byte that is
 * not valid UTF-8 as \ufffd, so the output is valid JSON whatever s holds.
 * NULL writes null. */
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
 * "skipping warp: op 'deform' is not supported yet". */
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

/* Where and why a suite document was refused. */
typedef struct suite_error {
  int line, column; /* 1-based (column in characters); 0 when there is no position */
  char message[256];
} suite_error;

/* Appends the rows of a suite document to s.  The document is either
 * {"shapes": [ROW, ...]} or [ROW, ...]; a ROW is an object with
 *   "name" (non-empty string), "N" "C" "H" "W" "K" "R" "S" (integers),
 *   optional "stride" "pad" "dil" (integer, or [h, w]; default 1, 0, 1),
 *   optional "groups" (integer, default 1), "math" ("strict" | "tf32"),
 *   "dtype" ("f32", the default, | "f16" | "bf16"; a half dtype ignores
 *   "math", as conv_math says),
 *   "epilogue" ("none" | "bias" | "bias_relu"), "dir" ("fwd" | "bwd_data"
 *   | "bwd_filter"), and "op" ("conv", the default, or "dynamic").
 * A dynamic row (conv_op in convtune.h) reads N C H W as B C H W and R as
 * the window k, and may leave out K (default C), S (default R) and "pad"
 * (default 'same': (R-1)/2 * dil).  A row whose op is neither adds a note
 * and is skipped (its other fields are not checked).  Other keys ("why", "bwd", ...) are ignored.  Each
 * row's problem must pass conv_problem_validate().
 * Returns false on malformed JSON (err says where jansson stopped), a
 * wrong shape or type, an invalid problem (err names the row and the
 * field, and is placed where the row or the field's value starts) or when
 * memory runs out; s may then hold some of the rows.  err may be NULL. */
bool suite_parse(const char *text, size_t len, suite *s, suite_error *err);

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
