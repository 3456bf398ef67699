/*
 * fuzz_suite.c -- libFuzzer target: the strict JSON reader and the suite
 * loader (tools/json.c), and the writers the CLI prints with.
 *
 * Input: a suite file's bytes.  What must hold: suite_parse accepts only
 * documents json_parse accepts, every shape it returns is a valid problem,
 * and any string (names, notes) written back by json_write_string parses
 * again to the same text, and by text_printable is free of control bytes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convtune.h"
#include "tests/fuzz/fuzz.h"
#include "tools/json.h"
#include "tools/text.h"

/* json_write_string(text) read back by json_parse: the same bytes where
 * text is valid UTF-8 (suite strings are: the reader checked them). */
static void check_json_round_trip(const char *text) {
  char *out = NULL;
  size_t out_size = 0;
  FILE *f = open_memstream(&out, &out_size);
  if (f == NULL) return;
  json_write_string(f, text);
  if (fclose(f) != 0) return;
  json_value v;
  json_error err;
  REQUIRE(json_parse(out, out_size, &v, &err));
  REQUIRE(v.type == JSON_STRING && strcmp(v.u.string.chars, text) == 0);
  json_free(&v);
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  json_value doc;
  json_error err;
  bool is_json = json_parse(text, size, &doc, &err);
  if (is_json) json_free(&doc);

  suite s;
  suite_init(&s);
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
  }
  suite_free(&s);
  return 0;
}
