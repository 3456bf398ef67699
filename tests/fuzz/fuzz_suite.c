/*
 * fuzz_suite.c -- libFuzzer target: the suite loader (tools/json.c, on
 * jansson) and the writers the CLI prints with.
 *
 * Input: a suite file's bytes.  What must hold: suite_parse accepts only
 * documents json_load_strict accepts, every shape it returns is a valid
 * problem, a refused row's error points at the start of a JSON value, and
 * any string (names, notes) written back by json_write_string reads again
 * as the same text, and by text_printable is free of control bytes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convtune.h"
#include "tests/fuzz/fuzz.h"
#include "tools/json.h"
#include "tools/text.h"

/* json_write_string(text) read back by jansson: the same bytes where text
 * is valid UTF-8 (suite strings are: jansson checked them). */
static void check_json_round_trip(const char *text) {
  char *out = NULL;
  size_t out_size = 0;
  FILE *f = open_memstream(&out, &out_size);
  if (f == NULL) return;
  json_write_string(f, text);
  if (fclose(f) != 0) return;
  json_t *v = json_load_strict(out, out_size, NULL);
  REQUIRE(json_is_string(v) && strcmp(json_string_value(v), text) == 0);
  json_decref(v);
  free(out);
}

static void check_printable(const char *text) {
  size_t size = 4 * strlen(text) + 1;
  char *line = malloc(size);
  if (line == NULL) return;
  text_printable(text, line, size);
  for (const unsigned char *c = (const unsigned char *)line; *c; c++) REQUIRE(*c >= 0x20 && *c != 0x7f);
  free(line);
}

/* An error about a row or a field of a document jansson accepted is placed
 * (line, column in characters, after any byte order mark) where a value
 * starts. */
static void check_points_at_value(const char *text, size_t size, const suite_error *err) {
  if (err->line == 0) return; /* out of memory: no position */
  if (size >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
    text += 3;
    size -= 3;
  }
  size_t i = 0;
  for (int line = 1, column = 1; i < size; i++) {
    bool lead = ((unsigned char)text[i] & 0xc0) != 0x80;
    if (lead && line == err->line && column == err->column) break;
    if (text[i] == '\n') {
      line++;
      column = 1;
    } else if (lead) {
      column++;
    }
  }
  REQUIRE(i < size && text[i] != '\0' && strchr("{[\"tfn-0123456789", text[i]) != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  json_t *doc = json_load_strict(text, size, NULL);
  bool is_json = doc != NULL;
  json_decref(doc);

  suite s;
  suite_init(&s);
  suite_error err;
  bool ok = suite_parse(text, size, &s, &err);
  if (ok) {
    REQUIRE(is_json);
    for (size_t i = 0; i < s.count; i++) {
      REQUIRE(s.shapes[i].name[0] != '\0');
      REQUIRE(conv_problem_validate(&s.shapes[i].problem, NULL, 0) == CONV_OK);
      check_json_round_trip(s.shapes[i].name);
      check_printable(s.shapes[i].name);
    }
    for (size_t i = 0; i < s.note_count; i++) check_printable(s.notes[i]);
  } else {
    REQUIRE(err.message[0] != '\0');
    if (is_json) check_points_at_value(text, size, &err);
  }
  suite_free(&s);
  return 0;
}
