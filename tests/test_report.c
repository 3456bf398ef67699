/*
 * test_report.c -- the roofline arithmetic of `convtune report`
 * (tools/cli/roofline.c), without a GPU.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "convtune.h"
#include "tests/test.h"
#include "tools/cli/roofline.h"

/* ================================================================ devices and problems */

#define H100 "NVIDIA H100 80GB HBM3|sm90|132sm|l2=52428800|mem=2619000kHz*5120bit"
#define H200 "NVIDIA H200|sm90|132sm|l2=62914560|mem=3201000kHz*6144bit"
#define OTHER_GPU "Test GPU <b>&|sm80|108sm|l2=41943040|mem=1593000kHz*5120bit"

/* ResNet-50's stage-2 3x3 (suite row rn50_conv2_3x3): its floors are in
 * the benchmark anchors. */
#define RN50 "fwd f32 nchw strict none n32 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1"
#define WEIRD "fwd <script>alert(\"x\")</script> & 'q' \x1b[31m"

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
      "n=1 c=8 h=9 w=7 k=16 r=1 s=1 dir=bwd_filter epilogue=none"};
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    conv_problem p, back;
    char key[CONV_PROBLEM_KEY_MAX], again[CONV_PROBLEM_KEY_MAX];
    CHECK_STATUS(CONV_OK, conv_problem_parse(specs[i], &p, NULL, 0));
    CHECK_STATUS(CONV_OK, conv_problem_key(&p, key, sizeof key));
    CHECK_MSG(roofline_problem_from_key(key, &back), "'%s' not read", key);
    CHECK_STATUS(CONV_OK, conv_problem_key(&back, again, sizeof again));
    CHECK(strcmp(key, again) == 0);
    CHECK(roofline_flops(&back) == roofline_flops(&p) && roofline_bytes(&back) == roofline_bytes(&p));
  }
  static const char *const bad[] = {
      WEIRD, "", RN50 " ", RN50 " det det", RN50 "0",
      "fwd f32 nchw strict none n32 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g3", /* 64 % 3 */
      "fwd f32 nchw strict none n0 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1",
      "fwd f16 nchw strict none n32 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1",
      "up f32 nchw strict none n32 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1",
      "fwd f32 nchw strict none n+32 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    conv_problem p;
    CHECK_MSG(!roofline_problem_from_key(bad[i], &p), "'%s' was read", bad[i]);
  }
  return TEST_PASS;
}

static const test_case tests[] = {
    {"floor_matches_bench", test_floor_matches_bench},
    {"peaks_by_device", test_peaks_by_device},
    {"problem_from_key", test_problem_from_key},
};

TEST_MAIN(tests)
