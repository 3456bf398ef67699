/* roofline.c -- roofline floors of convolutions on known GPUs (roofline.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/roofline.h"

/* Known GPUs, matched by name and SM count.  The H200 numbers are the
 * ceilings measured on an H200 SXM for the benchmark anchors (ANCHORS.md,
 * which tools/bench/README.md cites: a device copy, and torch.mm with TF32
 * off and on, and in fp16; GH100's tensor cores run bf16 at fp16's rate).  The H100 SXM has the same GH100 chip with the same SM count and
 * clocks, so the same matmul rates; its HBM3 is slower, and no copy was
 * measured on one: its bandwidth is NVIDIA's datasheet figure (3.35 TB/s,
 * also what its memory clock and bus width give), a peak, so its floors are
 * lower bounds too. */
static const roofline_peaks known_gpus[] = {
    {"NVIDIA H200", 132, 4.2e12, 50.8e12, 400e12, 740e12,
     "copy 4.2 TB/s, fp32 50.8 TFLOP/s, TF32 400 TFLOP/s and fp16 740 TFLOP/s (bf16 "
     "taken as fp16's), measured on an H200 SXM for the benchmark anchors"},
    {"NVIDIA H100 80GB HBM3", 132, 3.35e12, 50.8e12, 400e12, 740e12,
     "fp32 50.8 TFLOP/s, TF32 400 TFLOP/s and fp16 740 TFLOP/s (bf16 taken as fp16's) "
     "as measured on an H200 SXM (the same GH100 chip and clocks); copy 3.35 TB/s, "
     "NVIDIA's datasheet figure for the H100 SXM (not measured)"},
};

const roofline_peaks *roofline_peaks_for(const char *device_key) {
  if (device_key == NULL) return NULL;
  const char *bar = strchr(device_key, '|');
  if (bar == NULL) return NULL;
  size_t name_len = (size_t)(bar - device_key);
  int cc = 0, sms = 0, used = 0;
  /* "|smXY|Nsm|": the compute capability, then the SM count. */
  if (sscanf(bar, "|sm%d|%dsm|%n", &cc, &sms, &used) != 2 || used == 0) return NULL;
  for (size_t i = 0; i < sizeof known_gpus / sizeof known_gpus[0]; i++) {
    const roofline_peaks *g = &known_gpus[i];
    if (strlen(g->name) == name_len && strncmp(g->name, device_key, name_len) == 0 &&
        g->sm_count == sms)
      return g;
  }
  return NULL;
}

/* P * Q of a valid problem. */
static double output_pixels(const conv_problem *p) {
  int64_t out_h = 0, out_w = 0;
  if (conv_problem_output_dims(p, &out_h, &out_w) != CONV_OK) return 0;
  return (double)out_h * (double)out_w;
}

/* A dynamic problem (conv_op in convtune.h): every output element is a
 * k x k window's dot product with its pixel's filter; the weights hold
 * B x G x k*k x P x Q numbers.  The same totals hold for both gradients. */
static double dynamic_flops(const conv_problem *p) {
  return 2.0 * (double)p->n * (double)p->c * output_pixels(p) * (double)p->r * (double)p->s;
}

static double dynamic_bytes(const conv_problem *p) {
  double x = (double)p->n * (double)p->c * (double)p->h * (double)p->w;
  double weights = (double)p->n * (double)p->groups * (double)p->r * (double)p->s * output_pixels(p);
  double y = (double)p->n * (double)p->c * output_pixels(p);
  return 4.0 * (x + weights + y);
}

double roofline_flops(const conv_problem *p) {
  if (p->op == CONV_OP_DYNAMIC) return dynamic_flops(p);
  return 2.0 * (double)p->n * (double)p->k * output_pixels(p) * (double)(p->c / p->groups) *
         (double)p->r * (double)p->s;
}

/* Bytes of one element of x, w and y. */
static double element_bytes(const conv_problem *p) {
  return p->dtype == CONV_DTYPE_F16 || p->dtype == CONV_DTYPE_BF16 ? 2.0 : 4.0;
}

double roofline_bytes(const conv_problem *p) {
  if (p->op == CONV_OP_DYNAMIC) return dynamic_bytes(p);
  double x = (double)p->n * (double)p->c * (double)p->h * (double)p->w;
  double w = (double)p->k * (double)(p->c / p->groups) * (double)p->r * (double)p->s;
  double y = (double)p->n * (double)p->k * output_pixels(p);
  double bias = p->epilogue != CONV_EPILOGUE_NONE ? (double)p->k : 0.0; /* fp32 */
  return element_bytes(p) * (x + w + y) + 4.0 * bias;
}

double roofline_rate(const conv_problem *p, const roofline_peaks *peaks) {
  if (p->dtype == CONV_DTYPE_F16 || p->dtype == CONV_DTYPE_BF16) return peaks->half_flops_per_s;
  return p->math == CONV_MATH_TF32 ? peaks->tf32_flops_per_s : peaks->fp32_flops_per_s;
}

const char *roofline_rate_name(const conv_problem *p) {
  if (p->dtype == CONV_DTYPE_F16) return "fp16";
  if (p->dtype == CONV_DTYPE_BF16) return "bf16";
  return p->math == CONV_MATH_TF32 ? "TF32" : "fp32";
}

double roofline_floor_ms(const conv_problem *p, const roofline_peaks *peaks) {
  double rate = roofline_rate(p, peaks);
  double compute = roofline_flops(p) / rate, memory = roofline_bytes(p) / peaks->copy_bytes_per_s;
  return (compute > memory ? compute : memory) * 1e3;
}
