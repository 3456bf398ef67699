/*
 * test_cli_dtype.c -- the element type in the convtune tool, without a
 * GPU: dtype= in shape specs, --dtype, "dtype" in suite rows, half keys in
 * `list` and `show` (a half problem is its own key, strict and tf32
 * requests sharing it), the report's floor in half precision, and the
 * usage errors of each; --layout beside --dtype, as half problems are
 * mostly channels-last.
 */
#include <stdio.h>
#include <string.h>

#include "tests/cli_fixture.h"
#include "tests/cli_run.h"
#include "tests/test.h"
#include "tools/json.h"

#define H200_DEVICE "NVIDIA H200|sm90|132sm|l2=62914560|mem=3201000kHz*6144bit"

static int dtype_usage_errors(void) {
  isolate_default_cache();
  static const usage_case cases[] = {
      {{"tune", "--dtype", "f64", SPEC}, "bad --dtype 'f64' (expected f32, f16 or bf16)"},
      {{"show", SPEC " dtype=f64"}, "dtype=f64: expected f32, f16 or bf16"},
      {{"show", SPEC " dtype=f16 dtype=f16"}, "dtype given twice"},
      {{"tune", "--pending", "--dtype", "f16"}, "--dtype"},
      {{"list", "--dtype", "bf16"}, "option '--dtype' does not apply to 'list'"},
      {{"show", "op=dynamic n=2 c=8 h=9 w=9 r=3 dtype=f16"}, "dynamic op in f32 only"},
      {{"tune", "--layout", "chwn", SPEC}, "bad --layout 'chwn' (expected nchw or nhwc)"},
      {{"tune", "--pending", "--layout", "nhwc"}, "--layout"},
      {{"list", "--layout", "nhwc"}, "option '--layout' does not apply to 'list'"},
  };
  return check_usage_errors(cases, sizeof cases / sizeof cases[0]);
}

/* A bf16 problem is its own key: show finds its trials through dtype= in
 * a spec, --dtype or "dtype" in a suite row, whatever math mode is asked
 * for, and the fp32 problem's stay apart; list shows both keys. */
static int show_and_list_by_dtype(void) {
  isolate_default_cache();
  char db[1024], key[CONV_PROBLEM_KEY_MAX], half_key[CONV_PROBLEM_KEY_MAX];
  tmp_path(db, sizeof db, "dtype.db");
  int rc = fill_cache(db, key, sizeof key);
  if (rc != TEST_PASS) return rc;
  conv_problem p;
  CHECK_STATUS(CONV_OK, conv_problem_parse(SPEC " dtype=bf16", &p, NULL, 0));
  CHECK_STATUS(CONV_OK, conv_problem_key(&p, half_key, sizeof half_key));
  CHECK_MSG(strncmp(half_key, "fwd bf16 nchw strict none ", 26) == 0 &&
                strcmp(half_key + 9, key + 8) == 0,
            "%s against %s", half_key, key);
  const conv_trial winner = make_trial(40, "engine=40 knobs=3", CONV_OK, 0.125, 1.5e-3);
  if ((rc = store_tuned(db, half_key, DEVICE_A, &winner)) != TEST_PASS) return rc;

  char suite_file[1024];
  tmp_path(suite_file, sizeof suite_file, "dtype-suite.json");
  CHECK(write_file(suite_file, "[{\"name\": \"tiny_bf16\", \"N\": 2, \"C\": 8, \"H\": 12, "
                               "\"W\": 12, \"K\": 16, \"R\": 3, \"S\": 3, \"pad\": 1, "
                               "\"dtype\": \"bf16\", \"math\": \"tf32\"}]"));
  const char *const half[][8] = {
      {"show", SPEC " dtype=bf16", "--cache", db, NULL},
      {"show", SPEC " dtype=BF16 math=tf32", "--cache", db, NULL},
      {"show", SPEC, "--dtype", "bf16", "--cache", db, NULL},
      {"show", SPEC, "--dtype=bf16", "--math", "tf32", "--cache", db, NULL},
      {"show", "tiny_bf16", "--suite", suite_file, "--cache", db, NULL},
  };
  for (size_t i = 0; i < sizeof half / sizeof half[0]; i++)
    if (show_finds(half[i], half_key, "engine=40 knobs=3", "engine=12 knobs=3") != TEST_PASS)
      return TEST_FAIL;
  const char *const single[] = {"show", SPEC, "--dtype", "f32", "--cache", db, NULL};
  if (show_finds(single, key, "engine=12 knobs=3", "engine=40 knobs=3") != TEST_PASS)
    return TEST_FAIL;
  cli_result r;
  RUN_EXPECT(r, 1, "show", SPEC " dtype=f16", "--cache", db); /* f16 is another problem */
  CHECK(r.out.len == 0 && count_lines(r.err.data) == 1);
  cli_result_free(&r);
  RUN_EXPECT(r, 0, "list", "--cache", db);
  CHECK_MSG(contains(r.out.data, half_key) && contains(r.out.data, key), "%s", r.out.data);
  cli_result_free(&r);
  RUN_EXPECT(r, 0, "list", "--json", "--cache", db);
  CHECK_MSG(contains(r.out.data, half_key), "%s", r.out.data);
  cli_result_free(&r);
  remove(suite_file);
  remove_cache_files(db);
  return TEST_PASS;
}

/* --layout nhwc makes every shape channels-last (with the layout's own
 * KRSC filter): show finds the NHWC key by it, as by layout= in the spec,
 * and --layout nchw the NCHW one. */
static int show_by_layout(void) {
  isolate_default_cache();
  char db[1024], key[CONV_PROBLEM_KEY_MAX], nhwc_key[CONV_PROBLEM_KEY_MAX];
  tmp_path(db, sizeof db, "layout.db");
  int rc = fill_cache(db, key, sizeof key);
  if (rc != TEST_PASS) return rc;
  conv_problem p;
  CHECK_STATUS(CONV_OK, conv_problem_parse(SPEC " layout=nhwc dtype=f16", &p, NULL, 0));
  CHECK_STATUS(CONV_OK, conv_problem_key(&p, nhwc_key, sizeof nhwc_key));
  CHECK_MSG(strncmp(nhwc_key, "fwd f16 nhwc strict none ", 25) == 0, "%s", nhwc_key);
  const conv_trial winner = make_trial(40, "engine=40 knobs=3", CONV_OK, 0.125, 1.5e-3);
  if ((rc = store_tuned(db, nhwc_key, DEVICE_A, &winner)) != TEST_PASS) return rc;
  const char *const by_option[] = {"show", SPEC, "--layout", "nhwc", "--dtype", "f16",
                                   "--cache", db, NULL};
  const char *const by_spec[] = {"show", SPEC " layout=nhwc", "--dtype", "f16", "--cache", db,
                                 NULL};
  const char *const back[] = {"show", SPEC " layout=nhwc", "--layout", "nchw", "--cache", db,
                              NULL};
  if (show_finds(by_option, nhwc_key, "engine=40 knobs=3", "engine=12 knobs=3") != TEST_PASS ||
      show_finds(by_spec, nhwc_key, "engine=40 knobs=3", "engine=12 knobs=3") != TEST_PASS ||
      show_finds(back, key, "engine=12 knobs=3", "engine=40 knobs=3") != TEST_PASS)
    return TEST_FAIL;
  remove_cache_files(db);
  return TEST_PASS;
}

/* "dtype" in suite rows: the three names, f32 by default, anything else
 * refused naming the member; a dynamic row in a half type is invalid. */
static int suite_rows_with_dtype(void) {
  static const char rows[] =
      "[{\"name\": \"a\", \"N\": 1, \"C\": 4, \"H\": 8, \"W\": 8, \"K\": 4, \"R\": 3, \"S\": 3},"
      " {\"name\": \"b\", \"N\": 1, \"C\": 4, \"H\": 8, \"W\": 8, \"K\": 4, \"R\": 3, \"S\": 3,"
      "  \"dtype\": \"f16\", \"dir\": \"bwd_filter\"},"
      " {\"name\": \"c\", \"N\": 1, \"C\": 4, \"H\": 8, \"W\": 8, \"K\": 4, \"R\": 3, \"S\": 3,"
      "  \"dtype\": \"bf16\", \"math\": \"tf32\", \"epilogue\": \"bias\"},"
      " {\"name\": \"d\", \"N\": 1, \"C\": 4, \"H\": 8, \"W\": 8, \"K\": 4, \"R\": 3, \"S\": 3,"
      "  \"dtype\": \"f32\", \"math\": \"tf32\"}]";
  suite s;
  suite_init(&s);
  suite_error err;
  CHECK_MSG(suite_parse(rows, strlen(rows), &s, &err), "%s", err.message);
  CHECK(s.count == 4);
  CHECK(s.shapes[0].problem.dtype == CONV_DTYPE_F32);
  CHECK(s.shapes[1].problem.dtype == CONV_DTYPE_F16 &&
        s.shapes[1].problem.direction == CONV_BACKWARD_FILTER);
  CHECK(s.shapes[2].problem.dtype == CONV_DTYPE_BF16 &&
        s.shapes[2].problem.epilogue == CONV_EPILOGUE_BIAS);
  CHECK(s.shapes[3].problem.dtype == CONV_DTYPE_F32 &&
        s.shapes[3].problem.math == CONV_MATH_TF32);
  char key[CONV_PROBLEM_KEY_MAX];
  CHECK_STATUS(CONV_OK, conv_problem_key(&s.shapes[2].problem, key, sizeof key));
  CHECK_MSG(strncmp(key, "fwd bf16 nchw strict bias ", 26) == 0, "%s", key);
  suite_free(&s);
  static const struct {
    const char *text, *says;
  } bad[] = {
      {"[{\"name\": \"x\", \"N\": 1, \"C\": 4, \"H\": 8, \"W\": 8, \"K\": 4, \"R\": 3, \"S\": 3,"
       " \"dtype\": \"fp16\"}]",
       "\"dtype\" must be one of the strings f32, f16, bf16"},
      {"[{\"name\": \"x\", \"N\": 1, \"C\": 4, \"H\": 8, \"W\": 8, \"K\": 4, \"R\": 3, \"S\": 3,"
       " \"dtype\": 16}]",
       "\"dtype\" must be one of the strings"},
      {"[{\"name\": \"d\", \"op\": \"dynamic\", \"N\": 1, \"C\": 4, \"H\": 8, \"W\": 8,"
       " \"R\": 3, \"dtype\": \"bf16\"}]",
       "dynamic: dtype bf16: this version runs the dynamic op in f32 only"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    suite_init(&s);
    bool ok = suite_parse(bad[i].text, strlen(bad[i].text), &s, &err);
    suite_free(&s);
    CHECK_MSG(!ok, "accepted: %s", bad[i].text);
    CHECK_MSG(contains(err.message, bad[i].says), "\"%s\" lacks \"%s\"", err.message, bad[i].says);
  }
  return TEST_PASS;
}

/* The report names a half shape by its key and floors it at the GPU's
 * half-precision rate, 2 bytes an element. */
static int report_in_half(void) {
  isolate_default_cache();
  char db[1024], html[1024];
  tmp_path(db, sizeof db, "dtype-report.db");
  tmp_path(html, sizeof html, "dtype-report.html");
  remove_cache_files(db);
  conv_problem p;
  CHECK_STATUS(CONV_OK, conv_problem_parse("n=32 c=64 h=56 w=56 k=64 r=3 s=3 pad=1 layout=nhwc "
                                           "dtype=bf16", &p, NULL, 0));
  char key[CONV_PROBLEM_KEY_MAX];
  CHECK_STATUS(CONV_OK, conv_problem_key(&p, key, sizeof key));
  const conv_trial winner = make_trial(40, "engine=40 knobs=3", CONV_OK, 0.125, 1.5e-3);
  int rc = store_tuned(db, key, H200_DEVICE, &winner);
  if (rc != TEST_PASS) return rc;
  cli_result r;
  RUN_EXPECT(r, 0, "report", "--cache", db, "-o", html);
  cli_result_free(&r);
  size_t size = 0;
  FILE *f = fopen(html, "rb");
  CHECK(f != NULL);
  static char page[1 << 20];
  size = fread(page, 1, sizeof page - 1, f);
  fclose(f);
  page[size] = '\0';
  CHECK_MSG(contains(page, key), "the page lacks %s", key);
  /* 2 N K P Q C R S = 7.4 GFLOP at 740 TFLOP/s (10.0 us), the longer; 2
   * bytes an element of x, w and y: 25.8 MB at 4.2 TB/s (6.1 us). */
  CHECK_MSG(contains(page, "Roofline floor 0.0100 ms: the longer of 7.4 GFLOP at 740.0 TFLOP/s "
                           "(bf16) and 25.8 MB at 4.20 TB/s"),
            "no bf16 floor in the page");
  remove(html);
  remove_cache_files(db);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"dtype_usage_errors", dtype_usage_errors},
    {"show_and_list_by_dtype", show_and_list_by_dtype},
    {"show_by_layout", show_by_layout},
    {"suite_rows_with_dtype", suite_rows_with_dtype},
    {"report_in_half", report_in_half},
};
TEST_MAIN(tests)
