/*
 * test_report.c -- `convtune report` and its roofline arithmetic, without a
 * GPU: the tests write made-up trials straight into a cache file through
 * the cache API, run the tool ($CONVTUNE_CLI) on it, and read the page.
 *
 * report_in_browser opens the page in headless Chromium (Debian's package
 * `chromium`), counts the charts in the DOM it renders and checks the
 * screenshot's colours (decoded by tests/report_png.py); it reports itself
 * skipped where chromium or python3 is not installed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "algorithms/algorithm.h"
#include "cache/cache.h"
#include "convtune.h"
#include "tests/test.h"
#include "tools/cli/roofline.h"
#include "tools/text.h"

extern char **environ;

/* ================================================================ devices and problems */

#define H100 "NVIDIA H100 80GB HBM3|sm90|132sm|l2=52428800|mem=2619000kHz*5120bit"
#define H200 "NVIDIA H200|sm90|132sm|l2=62914560|mem=3201000kHz*6144bit"
#define OTHER_GPU "Test GPU <b>&|sm80|108sm|l2=41943040|mem=1593000kHz*5120bit"
#define VERSIONS "cuda=13000 driver=13000 cudnn=91900 cublaslt=130100 timing=2"
#define OLD_VERSIONS "cuda=12080 driver=12080 cudnn=90800 cublaslt=120800 timing=1"

/* ResNet-50's stage-2 3x3 (suite row rn50_conv2_3x3): its floors are in
 * the benchmark anchors. */
#define RN50 "fwd f32 nchw strict none n32 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1"
#define RN50_TF32 "fwd f32 nchw tf32 none n32 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1"
#define MBV2_BWD "bwd_data f32 nchw strict none n32 c144 h56 w56 k144 r3 s3 pad1,1 str1,1 dil1,1 g144"
#define WEIRD "fwd <script>alert(\"x\")</script> & 'q' \x1b[31m"
#define UNFINISHED "fwd f32 nchw strict none n1 c8 h8 w8 k8 r1 s1 pad0,0 str1,1 dil1,1 g1"

/* ================================================================ roofline */

static bool near(double got, double want, double tolerance) {
  return fabs(got - want) <= tolerance * fabs(want);
}

/* The fp32 and TF32 floors of suite rows in the benchmark anchors
 * (ANCHORS.md, computed by tools/bench on an H200; ms, four digits). */
static int test_floor_matches_bench(void) {
  static const struct {
    const char *spec;
    double floor_ms;
  } anchors[] = {
      {"n=32 c=64 h=56 w=56 k=64 r=3 s=3 pad=1", 0.1456},
      {"n=32 c=64 h=56 w=56 k=64 r=3 s=3 pad=1 math=tf32", 0.0186},
      {"n=32 c=144 h=56 w=56 k=144 r=3 s=3 pad=1 groups=144", 0.0276},
      {"n=1 c=512 h=128 w=256 k=1024 r=3 s=3", 5.9454},
      {"n=32 c=3 h=224 w=224 k=64 r=7 s=7 stride=2 pad=3", 0.1487},
      /* seed4_highorder: the "about 0.1 ms" forward, bound by the
       * per-pixel weights' bytes. */
      {"op=dynamic n=64 c=3 h=224 w=224 r=5", 0.0948},
  };
  const roofline_peaks *h200 = roofline_peaks_for(H200);
  CHECK(h200 != NULL);
  for (size_t i = 0; i < sizeof anchors / sizeof anchors[0]; i++) {
    conv_problem p;
    CHECK_STATUS(CONV_OK, conv_problem_parse(anchors[i].spec, &p, NULL, 0));
    double ms = roofline_floor_ms(&p, h200);
    CHECK_MSG(near(ms, anchors[i].floor_ms, 0.01), "%s: floor %.5f ms, anchors say %.4f",
              anchors[i].spec, ms, anchors[i].floor_ms);
  }
  /* The H100's matmul rates are the H200's, its bandwidth lower. */
  const roofline_peaks *h100 = roofline_peaks_for(H100);
  CHECK(h100 != NULL && h100 != h200);
  CHECK(h100->fp32_flops_per_s == h200->fp32_flops_per_s);
  CHECK(h100->copy_bytes_per_s < h200->copy_bytes_per_s);
  /* Bytes: x, w and y once, fp32, and the bias. */
  conv_problem p;
  CHECK_STATUS(CONV_OK, conv_problem_parse("n=2 c=4 h=8 w=8 k=6 r=3 s=3 epilogue=bias", &p, NULL, 0));
  CHECK(roofline_bytes(&p) == 4.0 * (2 * 4 * 8 * 8 + 6 * 4 * 9 + 2 * 6 * 6 * 6 + 6));
  CHECK(roofline_flops(&p) == 2.0 * 2 * 6 * 6 * 6 * 4 * 9);
  /* A dynamic problem: x, the per-pixel weights (B x G x k*k x P x Q) and y;
   * a k*k window's products for every output element. */
  CHECK_STATUS(CONV_OK, conv_problem_parse("op=dynamic n=2 c=4 h=8 w=8 r=3 groups=2 stride=2", &p,
                                           NULL, 0));
  CHECK(roofline_bytes(&p) == 4.0 * (2 * 4 * 8 * 8 + 2 * 2 * 9 * 4 * 4 + 2 * 4 * 4 * 4));
  CHECK(roofline_flops(&p) == 2.0 * 2 * 4 * 4 * 4 * 9);
  return TEST_PASS;
}

static int test_peaks_by_device(void) {
  static const char *const unknown[] = {
      OTHER_GPU,
      "NVIDIA H100 PCIe|sm90|114sm|l2=52428800|mem=1593000kHz*5120bit",
      "NVIDIA H200 NVL|sm90|132sm|l2=62914560|mem=3201000kHz*6144bit",
      "NVIDIA H200|sm90|100sm|l2=62914560|mem=3201000kHz*6144bit", /* another SM count */
      "NVIDIA H200", "NVIDIA H200|", "NVIDIA H200|sm90|", "", "|sm90|132sm|"};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
    CHECK_MSG(roofline_peaks_for(unknown[i]) == NULL, "'%s' has peaks", unknown[i]);
  CHECK(roofline_peaks_for(NULL) == NULL);
  CHECK(roofline_peaks_for(H100) != NULL);
  return TEST_PASS;
}

/* Keys read back into the problems they were made of, and nothing else. */
static int test_problem_from_key(void) {
  static const char *const specs[] = {
      "n=32 c=64 h=56 w=56 k=64 r=3 s=3 pad=1",
      "n=8 c=3 h=224 w=224 k=64 r=7 s=7 pad_h=3 pad_w=2 stride=2 math=tf32 epilogue=bias_relu",
      "n=4 c=144 h=28 w=28 k=144 r=3 s=3 pad=2 dil=2 groups=144 layout=nhwc dir=bwd_data det=1",
      "n=1 c=8 h=9 w=7 k=16 r=1 s=1 dir=bwd_filter epilogue=none",
      "op=dynamic n=32 c=64 h=56 w=56 r=7 groups=4 math=tf32",
      "op=dynamic n=2 c=6 h=9 w=9 r=3 dil=2 stride=2 dir=bwd_filter det=1",
      "n=16 c=64 h=56 w=56 k=64 r=3 s=3 pad=1 layout=nhwc dtype=bf16 epilogue=bias"};
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    conv_problem p, back;
    char key[CONV_PROBLEM_KEY_MAX], again[CONV_PROBLEM_KEY_MAX];
    CHECK_STATUS(CONV_OK, conv_problem_parse(specs[i], &p, NULL, 0));
    CHECK_STATUS(CONV_OK, conv_problem_key(&p, key, sizeof key));
    CHECK_MSG(conv_problem_from_key(key, &back) == CONV_OK, "'%s' not read", key);
    CHECK_STATUS(CONV_OK, conv_problem_key(&back, again, sizeof again));
    CHECK(strcmp(key, again) == 0);
    CHECK(roofline_flops(&back) == roofline_flops(&p) && roofline_bytes(&back) == roofline_bytes(&p));
  }
  static const char *const bad[] = {
      WEIRD, "", RN50 " ", RN50 " det det", RN50 "0",
      "fwd f32 nchw strict none n32 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g3", /* 64 % 3 */
      "fwd f32 nchw strict none n0 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1",
      "fwd f64 nchw strict none n32 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1",
      "fwd bf16 nchw tf32 none n32 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1",
      "up f32 nchw strict none n32 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1",
      "fwd f32 nchw strict none n+32 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    conv_problem p;
    CHECK_MSG(conv_problem_from_key(bad[i], &p) != CONV_OK, "'%s' was read", bad[i]);
  }
  return TEST_PASS;
}

/* ================================================================ processes */

#define RUN_TIMEOUT_S 180 /* a child still running by then is killed */

typedef struct run_result {
  int status; /* exit status; -1 when it did not exit (killed, or not run) */
  char *out, *err;
} run_result;

static void run_result_free(run_result *r) {
  free(r->out);
  free(r->err);
  memset(r, 0, sizeof *r);
}

static const char *tmp_dir(void) {
  const char *dir = getenv("CONVTUNE_TEST_TMP");
  return dir != NULL && dir[0] != '\0' ? dir : "/tmp";
}

/* TMP/report-<pid>-<name> */
static void tmp_path(char *path, size_t size, const char *name) {
  snprintf(path, size, "%s/report-%ld-%s", tmp_dir(), (long)getpid(), name);
}

/* The whole file as a string (NULL when it cannot be read). */
static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  size_t len = 0, cap = 65536;
  char *data = malloc(cap + 1);
  while (data != NULL) {
    len += fread(data + len, 1, cap - len, f);
    if (len < cap) break;
    char *grown = realloc(data, 2 * cap + 1);
    if (grown == NULL) free(data);
    data = grown;
    cap *= 2;
  }
  bool failed = ferror(f) != 0;
  fclose(f);
  if (data == NULL || failed) {
    free(data);
    return NULL;
  }
  data[len] = '\0';
  return data;
}

/* Waits for pid, killing it after RUN_TIMEOUT_S; its exit status or -1. */
static int wait_child(pid_t pid, const char *name) {
  for (int tenths = 0;; tenths++) {
    int status;
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (done < 0) return -1;
    if (tenths == RUN_TIMEOUT_S * 10) {
      fprintf(stderr, "%s ran longer than %d s: killing it\n", name, RUN_TIMEOUT_S);
      kill(pid, SIGKILL);
    }
    nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
  }
}

/* Runs argv (argv[0] found on PATH) with stdout and stderr in files, which
 * it then reads into r.  False (said) when it could not be run. */
static bool run(const char *const *argv, run_result *r) {
  memset(r, 0, sizeof *r);
  r->status = -1;
  char out[1024], err[1024];
  tmp_path(out, sizeof out, "stdout");
  tmp_path(err, sizeof err, "stderr");
  posix_spawn_file_actions_t files;
  if (posix_spawn_file_actions_init(&files) != 0) return false;
  posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&files, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&files, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid;
  int e = posix_spawnp(&pid, argv[0], &files, NULL, (char *const *)argv, environ);
  posix_spawn_file_actions_destroy(&files);
  if (e != 0) {
    fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(e));
    return false;
  }
  r->status = wait_child(pid, argv[0]);
  r->out = read_file(out);
  r->err = read_file(err);
  remove(out);
  remove(err);
  if (r->out == NULL || r->err == NULL) {
    fprintf(stderr, "cannot read the output of %s\n", argv[0]);
    return false;
  }
  return true;
}

/* Runs the tool with args (NULL-terminated) and checks its exit status; on
 * a mismatch prints what it wrote. */
#define RUN_CLI(result, expected, ...)                                                     \
  do {                                                                                     \
    const char *args_[] = {getenv("CONVTUNE_CLI"), __VA_ARGS__, NULL};                     \
    CHECK_MSG(args_[0] != NULL, "CONVTUNE_CLI is not set (the path of the convtune tool)"); \
    CHECK(run(args_, &(result)));                                                          \
    CHECK_MSG((result).status == (expected),                                               \
              "exit status %d, expected %d\n--- stdout:\n%s--- stderr:\n%s",               \
              (result).status, (expected), (result).out, (result).err);                    \
  } while (0)

static size_t count(const char *haystack, const char *needle) {
  size_t n = 0;
  for (const char *p = haystack; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
  return n;
}

static bool contains(const char *haystack, const char *needle) {
  return haystack != NULL && strstr(haystack, needle) != NULL;
}

static size_t count_lines(const char *s) {
  size_t n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

static bool file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static void remove_db(const char *path) {
  static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
    char p[1024];
    snprintf(p, sizeof p, "%s%s", path, suffixes[i]);
    remove(p);
  }
}

/* ================================================================ the cache */

/* Six tuned shapes (a winner each): RN50 on the H100 under two versions,
 * RN50_TF32 on the H200, MBV2_BWD on OTHER_GPU, WEIRD on the H100, and
 * RN50_TF32 on OTHER_GPU; plus UNFINISHED, timed but without a winner (an
 * interrupted tuning), which is no tuned shape. */
#define REPORT_SHAPES 6

typedef struct fixture_trial {
  uint32_t algorithm;
  const char *name, *config;
  conv_status status;
  double ms;
  bool pick, winner;
  const char *reason;
} fixture_trial;

static conv_trial make_trial(const fixture_trial *f, int index) {
  conv_trial t;
  memset(&t, 0, sizeof t);
  t.algorithm_id = f->algorithm;
  snprintf(t.algorithm, sizeof t.algorithm, "%s", f->name);
  t.config.count = 2;
  t.config.values[0] = index;
  t.config.values[1] = 1;
  snprintf(t.config_text, sizeof t.config_text, "%s", f->config);
  t.status = f->status;
  t.time_ms = f->ms;
  t.rel_error = f->status == CONV_OK ? 1e-7 : -1;
  t.heuristic_pick = f->pick;
  t.config.flags = f->pick ? CONV_CONFIG_HEURISTIC_RANKED : 0u;
  t.deterministic = 1;
  snprintf(t.reason, sizeof t.reason, "%s", f->reason ? f->reason : "");
  return t;
}

/* Stores one tuning of `key`: its trials, and its winner if one is marked. */
static bool store(conv_cache *cache, const conv_cache_key *key, const fixture_trial *trials,
                  size_t n, conv_error *err) {
  conv_status st = conv_cache_begin_tuning(cache, key, err);
  for (size_t i = 0; i < n && st == CONV_OK; i++) {
    conv_trial t = make_trial(&trials[i], (int)i);
    st = conv_cache_add_trial(cache, key, &t, err);
    if (st == CONV_OK && trials[i].winner)
      st = conv_cache_set_winner(cache, key, t.algorithm_id, &t.config, err);
  }
  return st == CONV_OK;
}

static const fixture_trial rn50_trials[] = {
    {CONV_ALGO_CUDNN, "cudnn", "engine=0 knobs=", CONV_OK, 0.2975, true, false, NULL},
    {CONV_ALGO_CUDNN, "cudnn", "engine=7 knobs=3:1", CONV_OK, 0.2498, false, false, NULL},
    {CONV_ALGO_CUDNN, "cudnn", "engine=2 knobs=", CONV_OK, 0.4188, false, false, NULL},
    {CONV_ALGO_CUDNN, "cudnn", "engine=28 knobs=", CONV_OK, 1.95, false, false, NULL},
    {CONV_ALGO_IM2COL_GEMM, "im2col_gemm", "algo=3 tile=5", CONV_OK, 0.2012, false, true, NULL},
    {CONV_ALGO_FFT, "fft", "tile=32", CONV_OK, 0.61, false, false, NULL},
    {CONV_ALGO_CUDNN, "cudnn", "engine=5 knobs=", CONV_VALIDATION_FAILED, 0.1, false, false,
     "relative error 3.1e-02 above bound 1.0e-05"},
    {CONV_ALGO_CUDNN, "cudnn", "engine=9 knobs=", CONV_WORKSPACE_LIMIT, -1, false, false,
     "needs 9.0 GiB of workspace, over the 4.0 GiB limit"},
    {CONV_ALGO_DIRECT_CHANNEL, "direct_channel", "tile=8", CONV_UNSUPPORTED, -1, false, false,
     "direct_channel: more than 16 channels per group"},
};

static const fixture_trial tf32_trials[] = {
    {CONV_ALGO_CUDNN, "cudnn", "engine=0 knobs=", CONV_OK, 0.1094, true, true, NULL},
    {CONV_ALGO_CUDNN, "cudnn", "engine=7 knobs=", CONV_OK, 0.125, false, false, NULL},
    {CONV_ALGO_IM2COL_GEMM, "im2col_gemm", "algo=1", CONV_OK, 0.13, false, false, NULL},
};

static const fixture_trial bwd_trials[] = {
    {CONV_ALGO_CUDNN, "cudnn", "engine=1 knobs=", CONV_OK, 0.31, true, false, NULL},
    {CONV_ALGO_DATA_GATHER, "data_gather", "threads=128", CONV_OK, 0.12, false, true, NULL},
};

static const fixture_trial weird_trials[] = {
    {CONV_ALGO_CUDNN, "cudnn", "engine=<1> & \"x\"", CONV_OK, 0.05, false, true, NULL},
    {CONV_ALGO_CUDNN, "cudnn", "engine=2", CONV_CUDNN_ERROR, -1, false, false,
     "cudnnBackendFinalize: <bad> & \"worse\" \x1b]0;title\x07 \xe2\x80\xae" "del\x7f \xc2\x85"},
};

static const fixture_trial unfinished_trials[] = {
    {CONV_ALGO_CUDNN, "cudnn", "engine=77 unfinished", CONV_OK, 0.01, false, false, NULL},
};

/* The cache of REPORT_SHAPES tuned shapes described above, at `path`. */
static int write_fixture(const char *path) {
  remove_db(path);
  conv_cache *cache = NULL;
  conv_error err = {CONV_OK, ""};
  CHECK_MSG(conv_cache_open(path, false, &cache, &err) == CONV_OK, "%s", err.message);
  const struct {
    conv_cache_key key;
    const fixture_trial *trials;
    size_t n;
  } tunings[] = {
#define TUNING(problem, device, versions, trials) \
  {{problem, device, versions}, trials, sizeof trials / sizeof trials[0]}
      TUNING(RN50, H100, VERSIONS, rn50_trials),
      TUNING(RN50, H100, OLD_VERSIONS, tf32_trials),
      TUNING(RN50_TF32, H200, VERSIONS, tf32_trials),
      TUNING(MBV2_BWD, OTHER_GPU, VERSIONS, bwd_trials),
      TUNING(WEIRD, H100, VERSIONS, weird_trials),
      TUNING(RN50_TF32, OTHER_GPU, VERSIONS, tf32_trials),
      TUNING(UNFINISHED, H100, VERSIONS, unfinished_trials),
#undef TUNING
  };
  bool ok = true;
  for (size_t i = 0; i < sizeof tunings / sizeof tunings[0] && ok; i++)
    ok = store(cache, &tunings[i].key, tunings[i].trials, tunings[i].n, &err);
  conv_cache_close(cache);
  CHECK_MSG(ok, "%s", err.message);
  return TEST_PASS;
}

/* Writes the fixture and its report; *html is the page (free it). */
static int make_report(char *db, char *html_path, size_t size, char **html) {
  tmp_path(db, size, "cache.db");
  tmp_path(html_path, size, "report.html");
  int rc = write_fixture(db);
  if (rc != TEST_PASS) return rc;
  run_result r;
  RUN_CLI(r, 0, "report", "--cache", db, "-o", html_path);
  CHECK_MSG(r.out[0] == '\0' && r.err[0] == '\0', "stdout: %s\nstderr: %s", r.out, r.err);
  run_result_free(&r);
  *html = read_file(html_path);
  CHECK_MSG(*html != NULL, "cannot read %s", html_path);
  return TEST_PASS;
}

/* ================================================================ the page */

static int test_report_content(void) {
  char db[1024], html_path[1024], *html = NULL;
  int rc = make_report(db, html_path, sizeof db, &html);
  if (rc != TEST_PASS) return rc;
  /* One chart and one section per tuned shape, each linked from the summary. */
  CHECK_MSG(count(html, "<svg class=\"chart\"") == REPORT_SHAPES, "%zu charts",
            count(html, "<svg class=\"chart\""));
  CHECK(count(html, "<section class=\"shape\"") == REPORT_SHAPES);
  for (int i = 1; i <= REPORT_SHAPES; i++) {
    char link[64], anchor[64];
    snprintf(link, sizeof link, "href=\"#shape-%d\"", i);
    snprintf(anchor, sizeof anchor, "id=\"shape-%d\"", i);
    CHECK_MSG(count(html, link) == 1 && count(html, anchor) == 1, "shape %d", i);
  }
  CHECK(!contains(html, "engine=77 unfinished")); /* no winner: not a tuned shape */
  /* A bar per timed config; failed ones listed with status and reason. */
  CHECK(count(html, "<g class=\"bar ") == 6 + 3 + 3 + 2 + 1 + 3);
  CHECK(contains(html, "VALIDATION_FAILED"));
  CHECK(contains(html, "relative error 3.1e-02 above bound 1.0e-05"));
  CHECK(contains(html, "WORKSPACE_LIMIT"));
  CHECK(contains(html, "needs 9.0 GiB of workspace, over the 4.0 GiB limit"));
  CHECK(contains(html, "direct_channel: more than 16 channels per group"));
  CHECK(contains(html, "3 configs without a bar"));
  /* The winner, cuDNN's default (the heuristic pick), the summary's numbers:
   * RN50 on the H100: winner 0.2012, default 0.2975, fastest cuDNN 0.2498. */
  CHECK(contains(html, "<g class=\"bar winner\"><title>im2col_gemm algo=3 tile=5: 0.2012 ms"));
  CHECK(contains(html, "<g class=\"bar default\"><title>cudnn engine=0 knobs=: 0.2975 ms"));
  CHECK(contains(html, "<td class=\"num\">0.2012</td><td class=\"num\">0.2975</td>"
                       "<td class=\"num\">0.2498</td><td class=\"num\">1.48x</td>"
                       "<td class=\"num\">1.24x</td><td class=\"num\">0.1456</td>"
                       "<td class=\"num\">72.4%</td>"));
  /* The roofline floor where the GPU is known, a reason where it is not. */
  CHECK(count(html, "<line class=\"floor\"") == 3); /* RN50 twice, RN50_TF32 on the H200 */
  CHECK(contains(html, "Roofline floor 0.1456 ms"));
  CHECK(contains(html, "No roofline floor: no peak numbers are known for the GPU Test GPU &lt;b&gt;&amp;"));
  CHECK(contains(html, "No roofline floor: the problem key is not one this version reads."));
  CHECK(contains(html, "measured on an H200 SXM for the benchmark anchors"));
  /* Self-contained: no script, nothing fetched. */
  CHECK(!contains(html, "<script") && !contains(html, "http://") && !contains(html, "https://"));
  CHECK(!contains(html, "src=") && !contains(html, "<link"));
  free(html);
  remove(html_path);
  remove_db(db);
  return TEST_PASS;
}

/* Cache strings reach the page escaped and printable. */
static int test_report_escapes_text(void) {
  char db[1024], html_path[1024], *html = NULL;
  int rc = make_report(db, html_path, sizeof db, &html);
  if (rc != TEST_PASS) return rc;
  CHECK(contains(html, "fwd &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;q&#39; \\x1b[31m"));
  CHECK(contains(html, "cudnn engine=&lt;1&gt; &amp; &quot;x&quot;"));
  CHECK(contains(html, "cudnnBackendFinalize: &lt;bad&gt; &amp; &quot;worse&quot; \\x1b]0;title\\x07"));
  /* A bidi override (U+202E) would show the text after it reversed. */
  CHECK(contains(html, "\\x1b]0;title\\x07 \\xe2\\x80\\xaedel\\x7f \\xc2\\x85"));
  long bad = text_first_unsafe(html, true);
  CHECK_MSG(bad < 0, "control character at %ld: %.40s", bad, html + (bad < 0 ? 0 : bad));
  CHECK(!contains(html, "<script") && !contains(html, "<b>"));
  free(html);
  remove(html_path);
  remove_db(db);
  return TEST_PASS;
}

/* The command line and the failures of `report`: each a clear message and
 * an exit status, and no page left behind. */
static int test_report_errors(void) {
  char db[1024], html[1024], missing[1024], empty[1024];
  tmp_path(db, sizeof db, "errors.db");
  tmp_path(html, sizeof html, "errors.html");
  tmp_path(missing, sizeof missing, "missing.db");
  tmp_path(empty, sizeof empty, "empty.db");
  remove(html);
  remove_db(missing);
  run_result r;
  RUN_CLI(r, 4, "report", "--cache", missing, "-o", html);
  CHECK_MSG(count_lines(r.err) == 1 && contains(r.err, "no cache at"), "%s", r.err);
  CHECK(!file_exists(html) && !file_exists(missing));
  run_result_free(&r);

  FILE *f = fopen(empty, "wb"); /* an empty file: a cache without rows */
  CHECK(f != NULL && fclose(f) == 0);
  RUN_CLI(r, 1, "report", "--cache", empty, "-o", html);
  CHECK_MSG(count_lines(r.err) == 1 && contains(r.err, "no tuned shapes in"), "%s", r.err);
  CHECK(!file_exists(html));
  run_result_free(&r);
  remove_db(empty);

  f = fopen(empty, "wb"); /* not a database */
  CHECK(f != NULL && fputs("not a database\n", f) >= 0 && fclose(f) == 0);
  RUN_CLI(r, 4, "report", "--cache", empty, "-o", html);
  CHECK(count_lines(r.err) == 1 && !file_exists(html));
  run_result_free(&r);
  remove_db(empty);

  int rc = write_fixture(db);
  if (rc != TEST_PASS) return rc;
  RUN_CLI(r, 1, "report", "--cache", db, "-o", "/nonexistent/dir/report.html");
  CHECK_MSG(count_lines(r.err) == 1 && contains(r.err, "cannot write /nonexistent/dir/report.html"),
            "%s", r.err);
  run_result_free(&r);
  static const struct {
    const char *args[4];
    const char *message;
  } usage[] = {{{"report"}, "report needs -o FILE"},
               {{"report", "-o"}, "needs a value"},
               {{"report", "-o", ""}, "needs a non-empty path"},
               {{"report", "-o", "x.html", "extra"}, "report takes no arguments"},
               {{"report", "-o", "x.html", "--json"}, "does not apply to 'report'"},
               {{"report", "-o", "x.html", "--math=tf32"}, "does not apply to 'report'"},
               {{"list", "-o", "x.html"}, "does not apply to 'list'"}};
  for (size_t i = 0; i < sizeof usage / sizeof usage[0]; i++) {
    const char *args[8] = {getenv("CONVTUNE_CLI"), "--cache", db};
    for (size_t j = 0; j < 4 && usage[i].args[j]; j++) args[3 + j] = usage[i].args[j];
    CHECK(args[0] != NULL && run(args, &r));
    CHECK_MSG(r.status == 2 && contains(r.err, usage[i].message) && r.out[0] == '\0',
              "case %zu: exit %d\n%s", i, r.status, r.err);
    run_result_free(&r);
  }
  CHECK(!file_exists("x.html"));
  /* "-" writes the page on stdout. */
  RUN_CLI(r, 0, "--cache", db, "report", "--output", "-");
  CHECK(strncmp(r.out, "<!DOCTYPE html>", 15) == 0);
  CHECK(count(r.out, "<svg class=\"chart\"") == REPORT_SHAPES);
  run_result_free(&r);
  remove_db(db);
  return TEST_PASS;
}

static int test_report_help(void) {
  run_result r;
  RUN_CLI(r, 0, "report", "--help");
  CHECK_MSG(contains(r.out, "usage: convtune report -o FILE") && contains(r.out, "--output") &&
                contains(r.out, "--cache") && !contains(r.out, "--policy") &&
                !contains(r.out, "--json") && !contains(r.out, "SHAPE is one argument"),
            "%s", r.out);
  run_result_free(&r);
  RUN_CLI(r, 0, "--help");
  CHECK(contains(r.out, "report -o FILE") && contains(r.out, "the HTML page"));
  run_result_free(&r);
  return TEST_PASS;
}

/* ================================================================ in a browser */

/* The first of names (NULL-terminated) that is an executable on PATH. */
static bool find_program(const char *const *names, char *path, size_t size) {
  const char *dirs = getenv("PATH");
  for (size_t i = 0; names[i] != NULL; i++) {
    for (const char *d = dirs ? dirs : ""; *d;) {
      size_t len = strcspn(d, ":");
      snprintf(path, size, "%.*s/%s", (int)len, d, names[i]);
      if (len > 0 && access(path, X_OK) == 0) return true;
      d += len + (d[len] == ':');
    }
  }
  return false;
}

/* Chromium's profile folder, and everything in it. */
static void remove_tree(const char *path) {
  const char *args[] = {"rm", "-rf", path, NULL};
  run_result r;
  if (run(args, &r)) run_result_free(&r);
}

/* `chromium --headless ... ARG URL` with a profile of its own. */
static bool run_chromium(const char *chromium, const char *profile, const char *arg,
                         const char *url, run_result *r) {
  char user_data[1100];
  snprintf(user_data, sizeof user_data, "--user-data-dir=%s", profile);
  const char *args[] = {chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        "--hide-scrollbars", "--no-first-run", "--window-size=1200,2000",
                        user_data, arg, url, NULL};
  return run(args, r);
}

/* The number after `name ` in report_png.py's output, or -1. */
static double png_fact(const char *facts, const char *name) {
  char line[64];
  snprintf(line, sizeof line, "%s ", name);
  for (const char *p = facts; p != NULL && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
    if (strncmp(p, line, strlen(line)) == 0) return atof(p + strlen(line));
  return -1;
}

/* The page, rendered by headless Chromium: one chart per shape in its
 * DOM, and a screenshot that is not blank and shows the bars' colours. */
static int test_report_in_browser(void) {
  static const char *const chromiums[] = {"chromium", "chromium-browser", NULL};
  static const char *const pythons[] = {"python3", NULL};
  char chromium[1024], python[1024];
  if (!find_program(chromiums, chromium, sizeof chromium) ||
      !find_program(pythons, python, sizeof python)) {
    fprintf(stderr, "chromium or python3 is not installed (Debian: apt-get install chromium)\n");
    return TEST_SKIP;
  }
  char db[1024], html_path[1024], *html = NULL, full[PATH_MAX], url[PATH_MAX + 8];
  int rc = make_report(db, html_path, sizeof db, &html);
  if (rc != TEST_PASS) return rc;
  free(html);
  CHECK(realpath(html_path, full) != NULL);
  snprintf(url, sizeof url, "file://%s", full);
  char profile[1024], shot[1024], shot_arg[1100];
  tmp_path(profile, sizeof profile, "chromium-profile");
  tmp_path(shot, sizeof shot, "shot.png");
  snprintf(shot_arg, sizeof shot_arg, "--screenshot=%s", shot);
  remove(shot);

  run_result r;
  CHECK(run_chromium(chromium, profile, "--dump-dom", url, &r));
  CHECK_MSG(r.status == 0, "chromium --dump-dom: exit %d\n%s", r.status, r.err);
  CHECK_MSG(count(r.out, "<svg class=\"chart\"") == REPORT_SHAPES, "%zu charts in the DOM:\n%s",
            count(r.out, "<svg class=\"chart\""), r.out);
  CHECK(count(r.out, "<section class=\"shape\"") == REPORT_SHAPES);
  run_result_free(&r);

  CHECK(run_chromium(chromium, profile, shot_arg, url, &r));
  CHECK_MSG(r.status == 0 && file_exists(shot), "chromium --screenshot: exit %d\n%s", r.status,
            r.err);
  run_result_free(&r);
  remove_tree(profile);

  /* The winner's green, cuDNN default's orange and the other cuDNN
   * configs' blue (report.c's style) are among the pixels. */
  char script[1024];
  snprintf(script, sizeof script, "%s/tests/report_png.py", CONVTUNE_SOURCE_DIR);
  const char *args[] = {python, script, shot, "2ca02c", "ff7f0e", "6f9fd8", NULL};
  CHECK(run(args, &r));
  CHECK_MSG(r.status == 0, "report_png.py: exit %d\n%s", r.status, r.err);
  fprintf(stderr, "screenshot %s:\n%s", shot, r.out);
  CHECK_MSG(png_fact(r.out, "colours") >= 64, "blank? %s", r.out);
  CHECK_MSG(png_fact(r.out, "most") > 0 && png_fact(r.out, "most") <= 0.97, "blank? %s", r.out);
  CHECK_MSG(png_fact(r.out, "2ca02c") >= 50 && png_fact(r.out, "ff7f0e") >= 50 &&
                png_fact(r.out, "6f9fd8") >= 50,
            "no bars? %s", r.out);
  run_result_free(&r);
  remove(shot);
  remove(html_path);
  remove_db(db);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"floor_matches_bench", test_floor_matches_bench},
    {"peaks_by_device", test_peaks_by_device},
    {"problem_from_key", test_problem_from_key},
    {"report_content", test_report_content},
    {"report_escapes_text", test_report_escapes_text},
    {"report_errors", test_report_errors},
    {"report_help", test_report_help},
    {"report_in_browser", test_report_in_browser},
};

TEST_MAIN(tests)
