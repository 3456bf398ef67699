/*
 * test_cli_formats.c -- what the convtune tool reads and writes: its JSON
 * output (and tools/json.c's reader and writer called directly), its
 * tables and printable text (tools/text.c called directly), suite
 * files (the loader called directly, and invalid rows through the tool),
 * the progress line's text, and a tuning's phases read from its log line.  test_cli.c has the commands themselves.
 *
 * All of these run without a GPU.  The one test about the no-GPU message
 * skips itself where a context can be created (a real GPU is there); the
 * list/show tests write their rows straight into a cache file through the
 * cache API, under made-up device keys, and never tune.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <uv.h>

#include "cache/cache.h"
#include "convtune.h"
#include "algorithms/algorithm.h"
#include "test.h"
#include "tests/cli_fixture.h"
#include "tests/cli_run.h"
#include "tools/cli/cli.h"
#include "tools/cli/phases.h"
#include "tools/cli/progress.h"
#include "tools/json.h"
#include "tools/text.h"
#include "tuner/tuner.h"

/* ================================================================ JSON */

static int check_list_json(const char *text, const char *key) {
  json_error_t err;
  json_t *doc = json_load_strict(text, strlen(text), &err);
  CHECK_MSG(doc != NULL, "%d:%d: %s\n%s", err.line, err.column, err.text, text);
  bool ok = json_is_array(doc) && json_array_size(doc) == 2;
  for (size_t i = 0; ok && i < 2; i++) {
    const json_t *row = json_array_get(doc, i);
    ok = has_string(row, "problem", key) && has_string(row, "algorithm", "cudnn") &&
         has_string(row, "versions", VERSIONS) && json_is_number(json_object_get(row, "time_ms"));
  }
  ok = ok && has_string(json_array_get(doc, 0), "device", DEVICE_A) &&
       has_string(json_array_get(doc, 0), "config", "engine=12 knobs=3") &&
       json_number_value(json_object_get(json_array_get(doc, 0), "time_ms")) == 0.25;
  json_decref(doc);
  CHECK_MSG(ok, "unexpected list JSON:\n%s", text);
  return TEST_PASS;
}

static int check_show_json(const char *text, const char *key) {
  json_error_t err;
  json_t *doc = json_load_strict(text, strlen(text), &err);
  CHECK_MSG(doc != NULL, "%d:%d: %s\n%s", err.line, err.column, err.text, text);
  size_t winners = 0, picks = 0, failed = 0;
  bool ok = json_is_array(doc) && json_array_size(doc) == 4;
  for (size_t i = 0; ok && i < json_array_size(doc); i++) {
    const json_t *row = json_array_get(doc, i);
    ok = has_string(row, "problem", key) && json_object_get(row, "rel_error") != NULL;
    winners += is_true(row, "winner");
    picks += is_true(row, "heuristic_pick");
    if (has_string(row, "status", "VALIDATION_FAILED")) {
      failed++;
      ok = ok && has_string(row, "reason", "relative error 2.0e-02 above bound 1.0e-05");
    }
  }
  json_decref(doc);
  CHECK_MSG(ok && winners == 2 && picks == 1 && failed == 1, "unexpected show JSON:\n%s", text);
  return TEST_PASS;
}

/* The strict reading (json_load_strict): what it must refuse, where it
 * says the error is. */
static int check_parser(void) {
  static const char *const bad[] = {
      "", "[1,]", "{\"a\": 1,}", "[01]", "{'a': 1}", "[1] x", "\"\\x\"", "[\"a\tb\"]",
      "{\"a\": 1, \"a\": 2}", "nul", "[1e999]", "\"\\ud800\"", "\"\xff\"", "[-]", "[1.]",
      "{\"a\" 1}", "[1 2]", "NaN", "// c\n1", "\"\xc0\xaf\"", "\"\\udc00\"", "\"a\\u0000b\"",
      "\xef\xbb\xbf\xef\xbb\xbf[]",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    json_error_t err;
    json_t *v = json_load_strict(bad[i], strlen(bad[i]), &err);
    CHECK_MSG(v == NULL, "accepted bad[%zu]: %s", i, bad[i]);
    CHECK(err.text[0] != '\0');
  }
  json_error_t err;
  const char *where = "[1,\n  2,\n  x]";
  CHECK(json_load_strict(where, strlen(where), &err) == NULL);
  CHECK_MSG(err.line == 3 && err.column == 3, "error at %d:%d: %s", err.line, err.column,
            err.text);

  /* Nesting past jansson's limit is an error, not a deep recursion. */
  static char deep[2 * (JSON_PARSER_MAX_DEPTH + 1)];
  for (int depth = JSON_PARSER_MAX_DEPTH; depth <= JSON_PARSER_MAX_DEPTH + 1; depth++) {
    memset(deep, '[', (size_t)depth);
    memset(deep + depth, ']', (size_t)depth);
    json_t *v = json_load_strict(deep, 2 * (size_t)depth, &err);
    CHECK_MSG((v != NULL) == (depth == JSON_PARSER_MAX_DEPTH), "depth %d: %s", depth, err.text);
    json_decref(v);
  }

  const char *good = "\xef\xbb\xbf {\"s\": \"\\u00e9\\ud83d\\ude00\\n\\\"\", \"n\": -0.5e+2, "
                     "\"a\": [true, false, null, {}], \"z\": 0} ";
  json_t *v = json_load_strict(good, strlen(good), &err);
  CHECK_MSG(v != NULL, "%s", err.text);
  const char *s = json_string_value(json_object_get(v, "s"));
  CHECK(s != NULL && strcmp(s, "\xc3\xa9\xf0\x9f\x98\x80\n\"") == 0);
  CHECK(json_number_value(json_object_get(v, "n")) == -50.0);
  CHECK(json_array_size(json_object_get(v, "a")) == 4);
  CHECK(json_object_get(v, "missing") == NULL);
  json_decref(v);
  return TEST_PASS;
}

/* json_write_string / json_write_number read back through jansson; the
 * control characters a terminal acts on (C0, DEL, C1) or that reorder the
 * text shown (bidi controls) are \u escapes, never raw bytes. */
static int check_writer(void) {
  FILE *f = tmpfile();
  CHECK(f != NULL);
  const char *nasty = "q\"b\\s/\n\t\x01 \xc3\xa9 \x7f \xc2\x85 \xc2\x9b \xe2\x80\xae \xd8\x9c "
                      "\xe2\x81\xa6 \xe2\x80\x8f";
  fputc('[', f);
  json_write_string(f, nasty);
  fputc(',', f);
  json_write_number(f, 0.1);
  fputc(',', f);
  json_write_number(f, 1.0 / 3.0);
  fputc(']', f);
  long size = ftell(f);
  CHECK(size > 0);
  rewind(f);
  char text[256];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  CHECK(n == (size_t)size);
  text[n] = '\0';
  CHECK_MSG(text_first_unsafe(text, false) < 0, "raw control at %ld: %s",
            text_first_unsafe(text, false), text);
  CHECK_MSG(contains(text, "\\u007f \\u0085 \\u009b \\u202e \\u061c \\u2066 \\u200f"), "%s",
            text);
  json_error_t err;
  json_t *v = json_load_strict(text, n, &err);
  CHECK_MSG(v != NULL, "%s: %s", text, err.text);
  const char *s = json_string_value(json_array_get(v, 0));
  CHECK(s != NULL && strcmp(s, nasty) == 0);
  CHECK(json_number_value(json_array_get(v, 1)) == 0.1);
  CHECK(json_number_value(json_array_get(v, 2)) == 1.0 / 3.0);
  json_decref(v);
  return TEST_PASS;
}

/* text_printable: every byte of a control character (C0, DEL, C1, bidi)
 * as \xNN, valid text kept, one line. */
static int check_printable(void) {
  static const struct {
    const char *in, *out;
  } cases[] = {
      {"a\x1b[2Jb", "a\\x1b[2Jb"},
      {"del\x7f c1\xc2\x85\xc2\x9b", "del\\x7f c1\\xc2\\x85\\xc2\\x9b"},
      {"abc\xe2\x80\xae" "fed", "abc\\xe2\\x80\\xaefed"},
      {"\xd8\x9c \xe2\x80\x8e \xe2\x81\xa9 \xe2\x80\xaa", "\\xd8\\x9c \\xe2\\x80\\x8e \\xe2\\x81\\xa9 \\xe2\\x80\\xaa"},
      {"\xc3\xa9 \xe2\x80\x94 \xe2\x80\xaf \xd8\xa8", "\xc3\xa9 \xe2\x80\x94 \xe2\x80\xaf \xd8\xa8"},
      {"two\nlines\tand\xff", "two lines and\\xff"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char out[256];
    text_printable(cases[i].in, out, sizeof out);
    CHECK_MSG(strcmp(out, cases[i].out) == 0, "case %zu: \"%s\", expected \"%s\"", i, out,
              cases[i].out);
  }
  /* A character's escape goes whole or not at all. */
  char out[7];
  text_printable("a\xe2\x80\xae", out, sizeof out);
  CHECK_MSG(strcmp(out, "a") == 0, "%s", out);
  return TEST_PASS;
}

static int test_json_output(void) {
  isolate_default_cache();
  int rc = check_parser();
  if (rc == TEST_PASS) rc = check_writer();
  if (rc == TEST_PASS) rc = check_printable();
  if (rc != TEST_PASS) return rc;

  char db[1024], key[CONV_PROBLEM_KEY_MAX];
  tmp_path(db, sizeof db, "json.db");
  rc = fill_cache(db, key, sizeof key);
  if (rc != TEST_PASS) return rc;
  cli_result r;
  RUN_EXPECT(r, 0, "list", "--json", "--cache", db);
  rc = check_list_json(r.out.data, key);
  cli_result_free(&r);
  if (rc != TEST_PASS) return rc;

  RUN_EXPECT(r, 0, "show", SPEC, "--json", "--cache", db);
  rc = check_show_json(r.out.data, key);
  cli_result_free(&r);
  if (rc != TEST_PASS) return rc;

  /* Nothing found: still a valid (empty) array on stdout. */
  RUN_EXPECT(r, 1, "show", OTHER_SPEC, "--json", "--cache", db);
  json_t *v = json_load_strict(r.out.data, r.out.len, NULL);
  CHECK_MSG(v != NULL, "%s", r.out.data);
  CHECK(json_is_array(v) && json_array_size(v) == 0);
  json_decref(v);
  cli_result_free(&r);
  remove_cache_files(db);
  return TEST_PASS;
}

/* ================================================================ tables */

#define CUT_ROWS 300

/* CUT_ROWS winners on DEVICE_A, and one on a GPU whose name is 480
 * characters long (within a fingerprint's 512 bytes): a hostile or broken
 * cache's device text. */
static int fill_wide_cache(const char *path, char *long_device, size_t size) {
  char key[CONV_PROBLEM_KEY_MAX];
  conv_cache *cache = NULL;
  int rc = open_fixture_cache(path, key, sizeof key, &cache);
  if (rc != TEST_PASS) return rc;
  int n = snprintf(long_device, size, "Long GPU ");
  for (int i = 0; i < 480; i++) long_device[n++] = 'X';
  snprintf(long_device + n, size - (size_t)n, "|sm90|132sm");
  conv_error err = {CONV_OK, ""};
  conv_status st = CONV_OK;
  for (int i = 0; i <= CUT_ROWS && st == CONV_OK; i++) {
    char spec[128];
    conv_problem p;
    snprintf(spec, sizeof spec, "n=2 c=8 h=12 w=12 k=%d r=3 s=3 pad=1", i + 1);
    CHECK_STATUS(CONV_OK, conv_problem_parse(spec, &p, NULL, 0));
    CHECK_STATUS(CONV_OK, conv_problem_key(&p, key, sizeof key));
    conv_cache_key k = {key, i == CUT_ROWS ? long_device : DEVICE_A, VERSIONS};
    conv_trial t = make_trial(3, "engine=3 knobs=3", CONV_OK, 0.25, 1e-7);
    st = conv_cache_add_trial(cache, &k, &t, &err);
    if (st == CONV_OK) st = conv_cache_set_winner(cache, &k, t.algorithm_id, &t.config, &err);
  }
  conv_cache_close(cache);
  CHECK_MSG(st == CONV_OK, "%s", err.message);
  return TEST_PASS;
}

/* The longest line of `text`, in bytes (the tables' cells here are
 * ASCII: characters). */
static size_t longest_line(const char *text) {
  size_t longest = 0;
  for (const char *line = text; *line;) {
    size_t n = strcspn(line, "\n");
    if (n > longest) longest = n;
    line += n + (line[n] == '\n');
  }
  return longest;
}

/* `list` with $COLUMNS set (through env, stdout a pipe): at 200 columns
 * every column stays, each GPU's fingerprint cut to its name; at 100, the
 * time of tuning, versions, GPU and config are left out (said on stderr)
 * and the problem key stays whole; without it, the table as before (full
 * fingerprints, lines past 200 characters); --json the same bytes either
 * way. */
static int test_table_fits_columns(void) {
  isolate_default_cache();
  char db[1024], key[CONV_PROBLEM_KEY_MAX];
  tmp_path(db, sizeof db, "fit.db");
  CHECK(fill_cache(db, key, sizeof key) == TEST_PASS);
  const char *cli = cli_path();
  CHECK(cli != NULL);
  cli_result r;
  const char *const wide[] = {"COLUMNS=200", cli, "list", "--cache", db, NULL};
  CHECK(run_program("/usr/bin/env", wide, -1, &r) && r.exit_status == 0);
  CHECK_MSG(longest_line(r.out.data) <= 200 && contains(r.out.data, "Test GPU A  ") &&
                !contains(r.out.data, "Test GPU A|") && contains(r.out.data, "tuned at") &&
                r.err.len == 0,
            "%s%s", r.out.data, r.err.data);
  cli_result_free(&r);
  const char *const narrow[] = {"COLUMNS=100", cli, "list", "--cache", db, NULL};
  CHECK(run_program("/usr/bin/env", narrow, -1, &r) && r.exit_status == 0);
  CHECK_MSG(longest_line(r.out.data) <= 100 && contains(r.out.data, key) &&
                !contains(r.out.data, "Test GPU") && !contains(r.out.data, "engine=12") &&
                contains(r.out.data, "cudnn") &&
                contains(r.err.data, "left out to fit 100 columns: config, device, versions, "
                                     "tuned at"),
            "%s%s", r.out.data, r.err.data);
  cli_result_free(&r);
  RUN_EXPECT(r, 0, "list", "--cache", db);
  CHECK_MSG(longest_line(r.out.data) > 200 && contains(r.out.data, DEVICE_A) && r.err.len == 0,
            "%s", r.out.data);
  cli_result_free(&r);

  cli_result a, b;
  const char *const json[] = {"COLUMNS=40", cli, "list", "--json", "--cache", db, NULL};
  CHECK(run_program("/usr/bin/env", json, -1, &a) && a.exit_status == 0);
  RUN_EXPECT(b, 0, "list", "--json", "--cache", db);
  CHECK_MSG(strcmp(a.out.data, b.out.data) == 0 && contains(a.out.data, DEVICE_A), "%s", a.out.data);
  cli_result_free(&a);
  cli_result_free(&b);
  remove_cache_files(db);
  return TEST_PASS;
}

/* One long cell is cut to TABLE_CELL_MAX_CHARS characters ("..." ending
 * it) instead of widening its column in every row: list's output grows
 * with the rows, not with the rows times the longest cell. */
static int test_table_cells_cut(void) {
  isolate_default_cache();
  char db[1024], device[600], cut[TABLE_CELL_MAX_CHARS + 1];
  tmp_path(db, sizeof db, "wide.db");
  int rc = fill_wide_cache(db, device, sizeof device);
  if (rc != TEST_PASS) return rc;
  cli_result r;
  RUN_EXPECT(r, 0, "list", "--cache", db);
  CHECK(count_lines(r.out.data) == CUT_ROWS + 3); /* the header, its rule, the rows */
  snprintf(cut, sizeof cut, "%.*s...", TABLE_CELL_MAX_CHARS - 3, device);
  CHECK_MSG(contains(r.out.data, cut), "no \"%s\" in:\n%.2000s", cut, r.out.data);
  size_t longest = 0;
  for (const char *line = r.out.data; *line;) {
    size_t len = strcspn(line, "\n");
    if (len > longest) longest = len;
    line += len + (line[len] == '\n');
  }
  /* Each line: the key (about 75 characters), the other short columns
   * and at most TABLE_CELL_MAX_CHARS of the device. */
  CHECK_MSG(longest < 200 + TABLE_CELL_MAX_CHARS + 100, "a line of %zu bytes", longest);
  CHECK_MSG(r.out.len < (CUT_ROWS + 3) * (200 + TABLE_CELL_MAX_CHARS + 100), "%zu bytes",
            r.out.len);
  cli_result_free(&r);
  /* --json keeps the text whole. */
  RUN_EXPECT(r, 0, "list", "--json", "--cache", db);
  CHECK(contains(r.out.data, device));
  cli_result_free(&r);
  remove_cache_files(db);
  return TEST_PASS;
}

/* ================================================================ suites */

static const char SUITE_TEXT[] =
    "{\n"
    " \"shapes\": [\n"
    "  {\"name\": \"rn50_conv2_3x3\", \"N\": 32, \"C\": 64, \"H\": 56, \"W\": 56, \"K\": 64,\n"
    "   \"R\": 3, \"S\": 3, \"stride\": 1, \"pad\": 1, \"dil\": 1, \"groups\": 1,\n"
    "   \"why\": \"resnet\", \"bwd\": true, \"patch_unfold\": false},\n"
    "  {\"name\": \"involution_7x7\", \"op\": \"dynamic\", \"N\": 32, \"C\": 64, \"H\": 56,\n"
    "   \"W\": 56, \"R\": 7, \"S\": 7, \"groups\": 4},\n"
    "  {\"name\": \"mbv2_dw_s2\", \"op\": \"conv\", \"N\": 8, \"C\": 96, \"H\": 112,\n"
    "   \"W\": 112, \"K\": 96, \"R\": 3, \"S\": 3, \"stride\": 2, \"pad\": [1, 0],\n"
    "   \"dil\": 1, \"groups\": 96, \"math\": \"tf32\"},\n"
    "  {\"name\": \"warp\", \"op\": \"deform\", \"N\": 1}\n"
    " ]\n"
    "}\n";

static int check_suite_rows(const suite *s) {
  CHECK(s->count == 3);
  const suite_shape *a = &s->shapes[0], *d = &s->shapes[1], *b = &s->shapes[2];
  CHECK(strcmp(a->name, "rn50_conv2_3x3") == 0);
  CHECK(a->problem.n == 32 && a->problem.c == 64 && a->problem.h == 56 && a->problem.w == 56);
  CHECK(a->problem.k == 64 && a->problem.r == 3 && a->problem.s == 3);
  CHECK(a->problem.pad_h == 1 && a->problem.pad_w == 1 && a->problem.stride_h == 1);
  CHECK(a->problem.dil_h == 1 && a->problem.groups == 1);
  CHECK(a->problem.math == CONV_MATH_STRICT && a->problem.epilogue == CONV_EPILOGUE_NONE);
  /* A dynamic row: K, S and the 'same' padding filled in. */
  CHECK(strcmp(d->name, "involution_7x7") == 0 && d->problem.op == CONV_OP_DYNAMIC);
  CHECK(d->problem.n == 32 && d->problem.c == 64 && d->problem.k == 64 && d->problem.h == 56);
  CHECK(d->problem.r == 7 && d->problem.s == 7 && d->problem.groups == 4);
  CHECK(d->problem.pad_h == 3 && d->problem.pad_w == 3 && d->problem.stride_h == 1);
  CHECK(a->problem.op == CONV_OP_CONVOLUTION && b->problem.op == CONV_OP_CONVOLUTION);
  CHECK(strcmp(b->name, "mbv2_dw_s2") == 0);
  CHECK(b->problem.stride_h == 2 && b->problem.stride_w == 2);
  CHECK(b->problem.pad_h == 1 && b->problem.pad_w == 0);
  CHECK(b->problem.groups == 96 && b->problem.math == CONV_MATH_TF32);
  CHECK(s->note_count == 1);
  CHECK_MSG(strcmp(s->notes[0], "skipping warp: op 'deform' is not supported yet") == 0,
            "note: %s", s->notes[0]);
  return TEST_PASS;
}

/* A document suite_parse must refuse, what its message must say and where
 * it places it. */
static int check_suite_error(const char *text, const char *what, int line, int column) {
  suite s;
  suite_init(&s);
  suite_error err;
  bool ok = suite_parse(text, strlen(text), &s, &err);
  suite_free(&s);
  CHECK_MSG(!ok, "accepted: %s", text);
  CHECK_MSG(contains(err.message, what), "message \"%s\" lacks \"%s\"", err.message, what);
  CHECK_MSG(err.line == line && err.column == column, "at %d:%d, expected %d:%d (%s)", err.line,
            err.column, line, column, err.message);
  return TEST_PASS;
}

static int check_suite_errors(void) {
  static const struct {
    const char *text, *what;
    int line, column;
  } cases[] = {
      {"{\"shapes\": [{\"name\": \"x\", \"N\": 1, \"C\": 1, \"H\": 1,\n \"W\": 1, \"R\": 1, "
       "\"S\": 1}]}",
       "missing \"K\"", 1, 13},
      {"[{\"name\": \"x\", \"N\": 1.5, \"C\": 1, \"H\": 1, \"W\": 1, \"K\": 1, \"R\": 1, "
       "\"S\": 1}]",
       "\"N\" must be an integer", 1, 21},
      {"[{\"name\": \"x\", \"N\": 1, \"C\": 1, \"H\": 1, \"W\": 1, \"K\": 1, \"R\": 1, "
       "\"S\": 1,\n \"pad\": \"1\"}]",
       "\"pad\"", 2, 9},
      {"[{\"N\": 1}]", "missing \"name\"", 1, 2},
      {"{\"shapes\": 3}", "got number", 1, 12},
      {"{\"rows\": []}", "missing \"shapes\"", 1, 1},
      {"[{\"name\": \"x\", \"op\": 7}]", "\"op\" must be a string", 1, 22},
      /* A trailing comma: jansson's words, where it stopped reading. */
      {"{\"shapes\": [\n  {\"name\": \"x\",}\n]}", "string or '}' expected near '}'", 2, 16},
      /* Placed past strings holding brackets, quotes and commas, a nested
       * member and an escaped key; the column counts characters. */
      {"{\"why\": \"a \\\"}], [\\\" b\", \"shapes\": [\n"
       " {\"name\": \"ok\", \"N\": 1, \"C\": 1, \"H\": 1, \"W\": 1, \"K\": 1, \"R\": 1, \"S\": 1},\n"
       " {\"name\": \"\xc3\xa9\\\"]\", \"note\": {\"x\": [1, {\"y\": \"}\"}]}, \"N\": 1, \"C\": 1,"
       " \"H\": 1, \"W\": 1, \"K\": 1, \"R\": 1, \"\\u0053\": 1.5}]}",
       "shape 1 (\"\xc3\xa9\"]\"): \"S\" must be an integer", 3, 109},
      /* Rows are validated as problems, naming the field. */
      {"[{\"name\": \"x\", \"N\": 1, \"C\": 1, \"H\": 1, \"W\": 1, \"K\": 1, \"R\": 1, \"S\": 1},\n"
       " {\"name\": \"neg\", \"N\": -1, \"C\": 1, \"H\": 1, \"W\": 1, \"K\": 1, \"R\": 1, \"S\": 1}]",
       "shape 1 (\"neg\"): n = -1: must be at least 1", 2, 2},
      {"[{\"name\": \"huge\", \"N\": 1, \"C\": 1, \"H\": 9007199254740992, \"W\": 1, \"K\": 1,"
       " \"R\": 1, \"S\": 1}]",
       "h = 9007199254740992: larger than", 1, 2},
      {"[{\"name\": \"g\", \"N\": 1, \"C\": 4, \"H\": 4, \"W\": 4, \"K\": 6, \"R\": 1, \"S\": 1,"
       " \"groups\": 4}]",
       "groups = 4 must be positive and divide", 1, 2},
      /* Dynamic rows are judged as dynamic problems. */
      {"[{\"name\": \"d\", \"op\": \"dynamic\", \"N\": 1, \"C\": 4, \"H\": 8, \"W\": 8,"
       " \"R\": 4}]",
       "k = 4 is even", 1, 2},
      {"[{\"name\": \"d\", \"op\": \"dynamic\", \"N\": 1, \"C\": 4, \"H\": 8, \"W\": 8,"
       " \"R\": 3, \"K\": 8}]",
       "must equal c = 4", 1, 2},
      {"[{\"name\": \"d\", \"op\": \"dynamic\", \"N\": 1, \"C\": 4, \"H\": 8, \"W\": 8,"
       " \"R\": 3, \"pad\": 0}]",
       "pad 0,0 must be", 1, 2},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int rc = check_suite_error(cases[i].text, cases[i].what, cases[i].line, cases[i].column);
    if (rc != TEST_PASS) return rc;
  }
  return TEST_PASS;
}

static int test_suite_file_parsing(void) {
  isolate_default_cache();
  char path[1024];
  tmp_path(path, sizeof path, "suite.json");
  CHECK(write_file(path, SUITE_TEXT));
  suite s;
  suite_init(&s);
  char message[1024];
  CHECK_MSG(suite_load(path, &s, message, sizeof message), "%s", message);
  int rc = check_suite_rows(&s);
  suite_free(&s);
  if (rc != TEST_PASS) return rc;

  /* A top-level array of rows. */
  const char *array = "[{\"name\": \"one\", \"N\": 1, \"C\": 2, \"H\": 3, \"W\": 4, \"K\": 5, "
                      "\"R\": 1, \"S\": 1}]";
  suite_error err;
  CHECK_MSG(suite_parse(array, strlen(array), &s, &err), "%s", err.message);
  CHECK(s.count == 1 && strcmp(s.shapes[0].name, "one") == 0 && s.shapes[0].problem.k == 5);
  CHECK(s.shapes[0].problem.stride_w == 1 && s.shapes[0].problem.pad_w == 0);
  suite_free(&s);
  rc = check_suite_errors();
  if (rc != TEST_PASS) return rc;

  /* The CLI: a malformed file is a usage error that says where. */
  char bad[1024];
  tmp_path(bad, sizeof bad, "bad-suite.json");
  CHECK(write_file(bad, "{\"shapes\": [\n  {\"name\": \"x\" \"N\": 1}\n]}\n"));
  cli_result r;
  RUN_EXPECT(r, 2, "tune", bad, "--cache", "/nonexistent/cache.db");
  char where[1100];
  snprintf(where, sizeof where, "%s:2:", bad);
  CHECK_MSG(contains(r.err.data, where), "stderr lacks \"%s\":\n%s", where, r.err.data);
  cli_result_free(&r);
  remove(bad);

  /* Only skipped rows: the note, nothing to tune, no GPU touched. */
  char dyn[1024];
  tmp_path(dyn, sizeof dyn, "dynamic-suite.json");
  CHECK(write_file(dyn, "[{\"name\": \"warp\", \"op\": \"deform\", \"N\": 1}]"));
  RUN_EXPECT(r, 0, "tune", dyn, "--cache", "/nonexistent/cache.db");
  CHECK(contains(r.err.data, "skipping warp: op 'deform' is not supported yet"));
  CHECK(r.out.len == 0);
  cli_result_free(&r);
  remove(dyn);
  remove(path);
  return TEST_PASS;
}

/* A suite row that is not a valid problem is a usage error (exit 2) for
 * tune and show alike, before any cache or GPU is touched, and the message
 * names the row and the field. */
static int test_invalid_suite_rows(void) {
  isolate_default_cache();
  char path[1024];
  tmp_path(path, sizeof path, "invalid-rows.json");
  CHECK(write_file(path, "{\"shapes\": [\n"
                         " {\"name\": \"ok\", \"N\": 1, \"C\": 4, \"H\": 8, \"W\": 8, \"K\": 4,"
                         " \"R\": 3, \"S\": 3},\n"
                         " {\"name\": \"bad\", \"N\": -1, \"C\": 4, \"H\": 8, \"W\": 8, \"K\": 4,"
                         " \"R\": 3, \"S\": 3}\n]}\n"));
  const char *const commands[][8] = {
      {"show", "bad", "--suite", path, "--cache", "/nonexistent/cache.db", NULL},
      {"show", "ok", "--suite", path, "--cache", "/nonexistent/cache.db", NULL},
      {"tune", path, "--cache", "/nonexistent/cache.db", NULL},
  };
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    cli_result r;
    CHECK(run_cli(commands[i], &r));
    CHECK_MSG(r.exit_status == 2, "%s: exit %lld\n%s", commands[i][0], (long long)r.exit_status,
              r.err.data);
    CHECK_MSG(contains(r.err.data, ":3:2: shape 1 (\"bad\"): n = -1: must be at least 1"),
              "stderr:\n%s", r.err.data);
    CHECK(r.out.len == 0);
    cli_result_free(&r);
  }
  remove(path);
  return TEST_PASS;
}

/* ================================================================ progress line */

/* Columns of a line (one per UTF-8 character), or -1 when it is not valid
 * printable UTF-8 on one line. */
static int line_columns(const char *s) {
  int cols = 0;
  for (size_t i = 0; s[i] != '\0'; cols++) {
    const unsigned char *u = (const unsigned char *)s + i;
    if (*u < 0x80) {
      if (*u < 0x20 || *u == 0x7f) return -1;
      i++;
      continue;
    }
    size_t n = utf8_sequence_length(u, strlen(s + i));
    if (n == 0) return -1;
    i += n;
  }
  return cols;
}

/* Renders p at `width` into buf and checks the invariants of every line:
 * the returned length, at most width - 1 columns, printable UTF-8. */
#define RENDER(buf, p, width)                                                             \
  do {                                                                                    \
    size_t n_ = progress_line((buf), sizeof(buf), (p), (width));                          \
    CHECK_MSG(n_ == strlen(buf), "length %zu for \"%s\"", n_, (buf));                     \
    int cols_ = line_columns(buf);                                                        \
    CHECK_MSG(cols_ >= 0 && cols_ <= ((width) > 1 ? (width) - 1 : 0),                     \
              "width %d: %d columns: \"%s\"", (width), cols_, (buf));                      \
  } while (0)

static int test_progress_durations(void) {
  static const struct {
    double seconds;
    const char *text;
  } cases[] = {{0, "0s"},          {0.4, "0s"},         {42, "42s"},       {59.4, "59s"},
               {59.6, "1:00"},     {187, "3:07"},       {3599, "59:59"},   {3600, "1:00:00"},
               {3723, "1:02:03"},  {90061, "25:01:01"}, {-1, "?"},         {NAN, "?"},
               {INFINITY, "?"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char buf[32];
    CHECK_MSG(strcmp(format_duration(cases[i].seconds, buf, sizeof buf), cases[i].text) == 0,
              "%g s: \"%s\", expected \"%s\"", cases[i].seconds, buf, cases[i].text);
  }
  /* The mean time of a finished shape times those left, less what the
   * current one took so far. */
  progress p = {2, 10, "a", NULL, 25, 20};
  CHECK(fabs(progress_eta(&p) - 75) < 1e-9);
  p.done = 0;
  p.finished_s = 0;
  CHECK(progress_eta(&p) == -1);
  p = (progress){9, 10, "a", NULL, 100, 45}; /* the last shape overran the mean */
  CHECK(progress_eta(&p) == 0);
  p.done = 10;
  CHECK(progress_eta(&p) == 0);
  return TEST_PASS;
}

static int test_progress_line(void) {
  char buf[512];
  progress p = {3, 40, "resnet50_layer3_conv2", "cudnn engine=12 knobs=3", 42, 30};
  /* ETA: 10 s a shape, 37 to go, 12 s into the current one: 358 s. */
  RENDER(buf, &p, 200);
  CHECK_MSG(strcmp(buf, "[#...................]   3/40  42s  ETA 5:58  resnet50_layer3_conv2  "
                        "cudnn engine=12 knobs=3") == 0,
            "%s", buf);
  RENDER(buf, &p, 80);
  CHECK_MSG(strcmp(buf, "[#...................]   3/40  42s  ETA 5:58  resnet50_layer3_...  "
                        "cudnn eng...") == 0,
            "%s", buf);
  RENDER(buf, &p, 40);
  CHECK_MSG(strcmp(buf, " 3/40  42s  ETA 5:58  resnet5...") == 0, "%s", buf);
  RENDER(buf, &p, 60);
  CHECK_MSG(strncmp(buf, "[..........]   3/40  42s  ETA 5:58  ", 36) == 0, "%s", buf);

  /* Nothing done yet: an empty bar and no ETA. */
  progress first = {0, 12, "conv1", "timing", 3.2, 0};
  RENDER(buf, &first, 80);
  CHECK_MSG(strcmp(buf, "[....................]   0/12  3s  ETA ?  conv1  timing") == 0, "%s", buf);
  /* All done: a full bar, the total time, "done". */
  progress all = {12, 12, NULL, NULL, 3723, 3723};
  RENDER(buf, &all, 80);
  CHECK_MSG(strcmp(buf, "[####################]  12/12  1:02:03  done") == 0, "%s", buf);
  RENDER(buf, &all, 200);
  CHECK(strstr(buf, "done") != NULL && strstr(buf, "ETA") == NULL);

  /* Long names are cut at a character boundary, "..." at the end (at 1000
   * columns to the 511 bytes of buf). */
  char long_name[700] = "";
  for (int i = 0; i < 300; i++) strcat(long_name, i % 2 ? "\xc3\xa9" : "x"); /* x and e-acute */
  progress wide = {1, 2, long_name, long_name, 1, 1};
  static const int widths[] = {40, 80, 200, 1000};
  for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
    RENDER(buf, &wide, widths[i]);
    size_t len = strlen(buf);
    CHECK_MSG(len > 3 && strcmp(buf + len - 3, "...") == 0, "width %d: %s", widths[i], buf);
  }
  /* A hostile name cannot drive the terminal. */
  progress hostile = {0, 1, "evil\x1b[2J\x1b]0;title\x07", "cfg\r\n", 0, 0};
  RENDER(buf, &hostile, 200);
  CHECK_MSG(strchr(buf, '\x1b') == NULL && strstr(buf, "evil\\x1b") != NULL, "%s", buf);
  /* Tiny widths and buffers: parts left out whole, nothing overflows. */
  RENDER(buf, &p, 1);
  CHECK(buf[0] == '\0');
  RENDER(buf, &p, 12);
  CHECK_MSG(strcmp(buf, " 3/40  42s") == 0, "%s", buf);
  char small[12];
  memset(small, 'z', sizeof small);
  size_t n = progress_line(small, sizeof small, &p, 200);
  CHECK_MSG(n < sizeof small && n == strlen(small), "%zu", n);
  return TEST_PASS;
}

/* A tuning's phases, as the library writes them at the end of its INFO
 * line (conv_tune_phases_format), read back by the tool for --json, and
 * written as an object whose "total" is their sum. */
static int test_tuning_phases_line(void) {
  conv_tune_phases ph;
  memset(&ph, 0, sizeof ph);
  for (int i = 0; i < CONV_PHASE_COUNT; i++) conv_tune_phases_add(&ph, (conv_tune_phase)i, 100.0 * (i + 1));
  char phases[256], line[512];
  CHECK(conv_tune_phases_format(&ph, 3000, phases, sizeof phases) > 0);
  snprintf(line, sizeof line,
           "tuned in 3.00 s: 83 configs, 2 failed, 60 abandoned; fastest fft tile=560x560 "
           "product=kernel (0.2832 ms); %s", phases);
  tune_phases read = {0};
  CHECK_MSG(tune_phases_parse(line, &read), "%s", line);
  CHECK(read.count == CONV_PHASE_COUNT + 1);
  double sum = 0;
  for (int i = 0; i < read.count; i++) {
    CHECK_MSG(strcmp(read.name[i], conv_tune_phase_name(i)) == 0, "%s", read.name[i]);
    sum += read.seconds[i];
  }
  CHECK(fabs(read.seconds[CONV_PHASE_PREPARE] - 0.4) < 1e-9);
  CHECK(fabs(read.seconds[CONV_PHASE_COUNT] - 0.2) < 1e-9); /* other: 3 s less 2.8 */
  CHECK(fabs(sum - 3.0) < 1e-9);
  /* Lines without phases, or with broken ones, leave the last read alone. */
  tune_phases kept = read;
  CHECK(!tune_phases_parse("tuning fwd f32 nchw strict none n1", &read));
  CHECK(!tune_phases_parse("x; phases (s): setup", &read));
  CHECK(!tune_phases_parse("x; phases (s): setup -1", &read));
  CHECK(!tune_phases_parse("x; phases (s): Setup 1", &read));
  CHECK(!tune_phases_parse("x; phases (s): ", &read));
  CHECK(!tune_phases_parse(NULL, &read));
  CHECK(memcmp(&kept, &read, sizeof read) == 0);
  /* The JSON object. */
  char *text = NULL;
  size_t size = 0;
  FILE *out = open_memstream(&text, &size);
  CHECK(out != NULL);
  tune_phases_write_json(out, &read);
  fclose(out);
  json_error_t jerr;
  json_t *obj = json_loads(text, 0, &jerr);
  CHECK_MSG(obj != NULL && json_is_object(obj), "%s", text);
  CHECK(fabs(json_number_value(json_object_get(obj, "total")) - 3.0) < 1e-9);
  CHECK(fabs(json_number_value(json_object_get(obj, "time")) - 0.6) < 1e-9);
  CHECK(json_object_size(obj) == (size_t)read.count + 1);
  json_decref(obj);
  free(text);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"json_output", test_json_output},
    {"table_cells_cut", test_table_cells_cut},
    {"table_fits_columns", test_table_fits_columns},
    {"suite_file_parsing", test_suite_file_parsing},
    {"invalid_suite_rows", test_invalid_suite_rows},
    {"progress_durations", test_progress_durations},
    {"progress_line", test_progress_line},
    {"tuning_phases_line", test_tuning_phases_line},
};

TEST_MAIN(tests)
