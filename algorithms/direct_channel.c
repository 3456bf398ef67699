/*
 * direct_channel.c -- the `direct_channel` candidate: our own direct
 * convolution for few channels per group (depthwise, 1->1, 16->1, 3->16,
 * small grouped convs), where cuDNN's GEMM-shaped engines leave most of the
 * GPU idle.  The kernels are in direct_channel.cu.  A stride-1
 * backward-data pass is the transposed convolution, a forward one with the
 * filter read mirrored (conv_direct_backward_data_view), so the same
 * kernels and configs run it.
 *
 * Config values: {layout, px, py, kb, tx, ty} (conv_direct_tiling).
 *
 * fp16 and bf16 (version unchanged, as cudnn's and fft's: fp32 problems get
 * the configs they got): the simple and window layouts (the window's
 * one-channel blockings), read as fp32, summed in fp32, each output rounded
 * once; the unit and generic layouts are fp32 only.  A half NHWC
 * problem of one input and one output channel runs as its NCHW twin (the
 * same bytes: the MSD nets' 1->1 layers in a channels-last model); other
 * half NHWC forward problems of one group and at most 32 output channels
 * run the NHWC layout (direct_nhwc.h: 16->1 MSD layers, 3->16 and 3->32
 * stems).
 *
 * Tests: tests/families/test_direct_channel.c.
 */
#include <stdio.h>
#include <stdlib.h>

#include "algorithms/direct_channel.h"
#include "algorithms/direct_nhwc.h"
#include "algorithms/common/views.h"
#include "algorithms/common/view_family.h"
#include "algorithms/algorithm.h"

/* Past these a group is a dense convolution, which GEMM engines do well and
 * this kernel would only slow the tuning down.  128 outputs take in the
 * stems of 3-channel images (ConvNeXt's 4x4 stride-4 stem has 96), where
 * cuDNN's engines leave the GPU as idle as on 64. */
#define DIRECT_CHANNEL_MAX_CHANNELS_IN 32
#define DIRECT_CHANNEL_MAX_CHANNELS_OUT 128

/* An NCHW forward convolution of any element type. */
static bool nchw_forward(const conv_problem *pb) {
  return conv_problem_supported_any_dtype(pb) && pb->layout == CONV_LAYOUT_NCHW &&
         pb->direction == CONV_FORWARD;
}

/* An NHWC problem in fp16 or bf16: the only NHWC ones this version takes
 * (fp32 ones too, in a version that bumps the family's: that adds configs
 * to tunings made without them). */
static bool half_nhwc(const conv_problem *pb) {
  return conv_problem_supported_any_dtype(pb) && pb->dtype != CONV_DTYPE_F32 &&
         pb->layout == CONV_LAYOUT_NHWC;
}

/* A half NHWC problem of one input and one output channel has its NCHW
 * twin's bytes: x [n][h][w][1] is [n][1][h][w], y likewise, and the K R S C
 * filter [1][r][s][1] is [1][1][r][s]. */
static bool one_channel_nhwc_half(const conv_problem *pb) {
  return half_nhwc(pb) && pb->c == 1 && pb->k == 1;
}

/* A half NHWC forward problem for the NHWC layout: one group, few
 * channels (the one-channel ones run as their NCHW twins instead). */
static bool nhwc_layout_half(const conv_problem *pb) {
  return half_nhwc(pb) && !one_channel_nhwc_half(pb) && pb->direction == CONV_FORWARD &&
         pb->groups == 1 && pb->c <= DIRECT_CHANNEL_MAX_CHANNELS_IN &&
         pb->k <= CONV_DIRECT_NHWC_MAX_K;
}

/* The forward convolution the kernels run for `pb`: the problem itself (or
 * its NCHW twin), or a stride-1 backward-data pass's transposed view.
 * False for any other problem, or where the channels per group are past
 * the kernels' limits. */
static bool direct_channel_forward_view(const conv_problem *pb, conv_problem *view) {
  if (nhwc_layout_half(pb)) {
    *view = *pb;
    return true;
  }
  conv_problem twin = *pb;
  if (one_channel_nhwc_half(pb)) {
    twin.layout = CONV_LAYOUT_NCHW;
    twin.filter_layout = CONV_FILTER_DEFAULT;
  }
  if (nchw_forward(&twin))
    *view = twin;
  else if (!conv_direct_backward_data_view(&twin, view))
    return false;
  return nchw_forward(view) && view->c / view->groups <= DIRECT_CHANNEL_MAX_CHANNELS_IN &&
         view->k / view->groups <= DIRECT_CHANNEL_MAX_CHANNELS_OUT;
}

static conv_status direct_channel_list(const conv_problem *view, conv_config *out, int max,
                                       int *count, conv_error *err);

/* Half problems run the simple and window layouts (NCHW) and the NHWC
 * layout only: theirs where one of those configs plans (NCHW: square
 * filters, 1 to 7 up to a million outputs, 3, 5 and 7 with one output
 * channel a thread; NHWC: 1, 2, 4, 8, 16 or 32 output channels). */
static bool direct_channel_takes(const conv_problem *pb, conv_problem *view) {
  if (!direct_channel_forward_view(pb, view)) return false;
  if (view->dtype == CONV_DTYPE_F32) return true;
  conv_config first;
  int n = 0;
  return direct_channel_list(view, &first, 1, &n, NULL) == CONV_OK && n > 0;
}

static bool direct_channel_applicable(const conv_problem *problem, const conv_env *env) {
  conv_problem view;
  return problem != NULL && env != NULL && direct_channel_takes(problem, &view);
}

conv_direct_tiling conv_direct_tiling_of(const conv_config *config) {
  const conv_direct_tiling t = {(int)config->values[0], (int)config->values[1],
                                (int)config->values[2], (int)config->values[3],
                                (int)config->values[4], (int)config->values[5]};
  return t;
}

static conv_config direct_channel_config_from_tiling(const conv_direct_tiling *t) {
  conv_config c = {6, {t->layout, t->px, t->py, t->kb, t->tx, t->ty}, 0};
  return c;
}

/* ---------------------------------------------------------------- configs */

/* Per-thread blockings, most promising first: the window layout (compiled
 * filter sizes, no input tile to stage), then the tiled ones.  Within a
 * layout the most output channels per thread that divide the group's come
 * first (each input value is then read once for all of them).  configs()
 * tries every blocking's first tile shape before any second one, so that
 * the fast policy's few configs span blockings.  Unfit blockings (a layout
 * that does not take the filter, stride or dilation; kb not dividing
 * K/groups) drop out in conv_direct_plan. */
static const conv_direct_tiling direct_channel_blockings[] = {
    {CONV_DIRECT_WINDOW, 2, 2, 16, 0, 0},  {CONV_DIRECT_WINDOW, 1, 2, 16, 0, 0},
    {CONV_DIRECT_WINDOW, 2, 1, 16, 0, 0},  {CONV_DIRECT_WINDOW, 2, 2, 8, 0, 0},
    {CONV_DIRECT_WINDOW, 1, 2, 8, 0, 0},   {CONV_DIRECT_WINDOW, 2, 2, 4, 0, 0},
    {CONV_DIRECT_WINDOW, 1, 4, 4, 0, 0},   {CONV_DIRECT_WINDOW, 2, 8, 1, 0, 0},
    {CONV_DIRECT_WINDOW, 2, 4, 1, 0, 0},   {CONV_DIRECT_WINDOW, 1, 4, 1, 0, 0},
    {CONV_DIRECT_WINDOW, 4, 4, 1, 0, 0},   {CONV_DIRECT_WINDOW, 1, 8, 1, 0, 0},
    {CONV_DIRECT_WINDOW, 1, 2, 1, 0, 0},   {CONV_DIRECT_WINDOW, 1, 1, 1, 0, 0},
    {CONV_DIRECT_UNIT, 4, 1, 16, 0, 0},    {CONV_DIRECT_UNIT, 4, 1, 8, 0, 0},
    {CONV_DIRECT_UNIT, 4, 2, 4, 0, 0},     {CONV_DIRECT_UNIT, 4, 4, 1, 0, 0},
    {CONV_DIRECT_UNIT, 4, 2, 1, 0, 0},     {CONV_DIRECT_UNIT, 4, 8, 1, 0, 0},
    {CONV_DIRECT_UNIT, 4, 1, 1, 0, 0},     {CONV_DIRECT_UNIT, 4, 2, 8, 0, 0},
    {CONV_DIRECT_UNIT, 4, 4, 4, 0, 0},     {CONV_DIRECT_UNIT, 4, 1, 4, 0, 0},
    {CONV_DIRECT_GENERIC, 2, 1, 16, 0, 0}, {CONV_DIRECT_GENERIC, 2, 1, 8, 0, 0},
    {CONV_DIRECT_GENERIC, 2, 2, 4, 0, 0},  {CONV_DIRECT_GENERIC, 4, 2, 1, 0, 0},
    {CONV_DIRECT_GENERIC, 4, 4, 1, 0, 0},  {CONV_DIRECT_GENERIC, 2, 2, 1, 0, 0},
    {CONV_DIRECT_GENERIC, 2, 1, 1, 0, 0},  {CONV_DIRECT_GENERIC, 1, 1, 1, 0, 0},
    {CONV_DIRECT_GENERIC, 1, 1, 4, 0, 0},  {CONV_DIRECT_GENERIC, 1, 1, 8, 0, 0},
    {CONV_DIRECT_GENERIC, 1, 1, 16, 0, 0},
};
#define DIRECT_CHANNEL_BLOCKINGS \
  ((int)(sizeof direct_channel_blockings / sizeof direct_channel_blockings[0]))

/* Threads along a row, for `cover` threads' worth of output columns: all
 * of them when they fit in a warp; else up to 32 spread evenly over the
 * blocks of a row (56 -> 28), and 32; and 16. */
static int direct_channel_tx_options(int64_t cover, int out[3]) {
  int count = 0;
  if (cover <= 32) {
    out[count++] = (int)cover;
  } else {
    const int64_t blocks = (cover + 31) / 32;
    out[count++] = (int)((cover + blocks - 1) / blocks);
    if (out[0] != 32) out[count++] = 32;
  }
  if (cover > 16 && out[0] != 16) out[count++] = 16;
  return count;
}

static bool direct_channel_seen(const conv_config *out, int count, const conv_config *c) {
  for (int i = 0; i < count; i++)
    if (conv_config_equal(&out[i], c)) return true;
  return false;
}

/* Appends `c` unless it is there already; false when `out` is full. */
static bool direct_channel_add(conv_config *out, int max, int *n, const conv_config *c) {
  if (direct_channel_seen(out, *n, c)) return true;
  if (*n == max) return false;
  out[(*n)++] = *c;
  return true;
}

/* The simple layout's configs (filters 1x1 to 7x7, small passes): a row's
 * width of threads, up to 32, and rows of them to 128, then 256, threads.
 * False when `out` is full. */
static bool direct_channel_add_simple(const conv_problem *problem, conv_config *out, int max,
                                      int *n) {
  const int thread_counts[] = {128, 256};
  for (int i = 0; i < 2; i++) {
    int64_t q_columns, p_rows;
    conv_direct_tiling simple = {CONV_DIRECT_SIMPLE, 1, 1, 1, 0, 0};
    conv_direct_threads_needed(problem, &simple, &q_columns, &p_rows);
    simple.tx = q_columns < 32 ? (int)q_columns : 32;
    const int64_t ty = thread_counts[i] / simple.tx;
    simple.ty = (int)(ty < p_rows ? ty : p_rows);
    conv_direct_launch launch;
    if (!conv_direct_plan(problem, &simple, &launch, NULL, 0)) return true;
    const conv_config c = direct_channel_config_from_tiling(&simple);
    if (!direct_channel_add(out, max, n, &c)) return false;
  }
  return true;
}

/* The NHWC layout's configs: blocks of 32 x 8, 32 x 4, 16 x 16 and 64 x 4
 * threads (a block's rows share their windows' rows through L1), fewer
 * where the output is narrower or shorter. */
static void direct_channel_add_nhwc(const conv_problem *problem, int64_t p, int64_t q,
                                    conv_config *out, int max, int *n) {
  const int shapes[][2] = {{32, 8}, {32, 4}, {16, 16}, {64, 4}};
  for (int i = 0; i < 4; i++) {
    conv_direct_tiling t = {CONV_DIRECT_NHWC, 1, 1, (int)problem->k, shapes[i][0], shapes[i][1]};
    if (t.tx > q) t.tx = (int)q;
    if (t.ty > p) t.ty = (int)p;
    conv_direct_launch launch;
    if (!conv_direct_plan(problem, &t, &launch, NULL, 0)) continue;
    const conv_config c = direct_channel_config_from_tiling(&t);
    if (!direct_channel_add(out, max, n, &c)) return;
  }
}

/* The configs of the forward convolution `problem` (a view), most
 * promising first; those that do not plan (for a half type: every NCHW
 * layout but simple and window) are left out. */
static conv_status direct_channel_list(const conv_problem *problem, conv_config *out, int max,
                                       int *count, conv_error *err) {
  *count = 0;
  int64_t p, q;
  if (conv_problem_output_dims(problem, &p, &q) != CONV_OK)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "direct_channel: invalid problem");
  int n = 0;
  if (problem->layout == CONV_LAYOUT_NHWC) {
    direct_channel_add_nhwc(problem, p, q, out, max, &n);
    *count = n;
    return CONV_OK;
  }
  /* The simple layout first where it wins (the fast policy's three
   * guesses then try it), last where it may. */
  const bool simple_first = problem->n * problem->k * p * q <= CONV_DIRECT_SIMPLE_FIRST_OUTPUTS;
  const int thread_counts[] = {256, 128};
  if (simple_first && !direct_channel_add_simple(problem, out, max, &n)) goto done;
  /* Tile shapes ranked (row width option, then thread count), and every
   * blocking at one rank before the next rank. */
  for (int rank = 0; rank < 6; rank++) {
    for (int b = 0; b < DIRECT_CHANNEL_BLOCKINGS; b++) {
      conv_direct_tiling tiling = direct_channel_blockings[b];
      int64_t columns_needed, rows_needed;
      conv_direct_threads_needed(problem, &tiling, &columns_needed, &rows_needed);
      if (columns_needed < 1 || rows_needed < 1)
        return conv_error_set(err, CONV_INVALID_ARGUMENT, "direct_channel: invalid problem");
      int tx_opts[3];
      const int ntx = direct_channel_tx_options(columns_needed, tx_opts);
      if (rank / 2 >= ntx) continue;
      tiling.tx = tx_opts[rank / 2];
      /* No more rows of threads than the output has rows for. */
      int64_t ty = thread_counts[rank % 2] / tiling.tx;
      if (ty > rows_needed) ty = rows_needed;
      tiling.ty = ty < 1 ? 1 : (int)ty;
      conv_direct_launch launch;
      if (!conv_direct_plan(problem, &tiling, &launch, NULL, 0)) continue;
      const conv_config c = direct_channel_config_from_tiling(&tiling);
      if (!direct_channel_add(out, max, &n, &c)) goto done;
    }
  }
  if (!simple_first) direct_channel_add_simple(problem, out, max, &n);
done:
  *count = n;
  return CONV_OK;
}

static conv_status direct_channel_configs(const conv_problem *problem, conv_env *env,
                                          conv_config *out, int max, int *count, conv_error *err) {
  if (problem == NULL || out == NULL || count == NULL || max < 0)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "direct_channel: bad configs() arguments");
  *count = 0;
  conv_problem view;
  /* Not direct_channel_takes, which lists the first config of a half
   * problem to decide: an empty list says the same here. */
  if (env == NULL || !direct_channel_forward_view(problem, &view)) return CONV_OK;
  return direct_channel_list(&view, out, max, count, err);
}

/* ---------------------------------------------------------------- prepare/run */

static void direct_channel_release(void *state) { free(state); }

static conv_status direct_channel_prepare(const conv_problem *problem, conv_env *env,
                              const conv_config *config, conv_prepared *out, conv_error *err) {
  conv_problem view;
  conv_status st = conv_view_prepare_check(
      "direct_channel", direct_channel_forward_view, problem, env, config, out, &view, err,
      "only NCHW forward (and, in fp16 and bf16, NHWC forward of one group and at most 32 "
      "output channels), or stride-1 backward-data within the filter's padding, with at most %d "
      "input and %d output channels per group (of the transposed convolution for backward-data)",
      DIRECT_CHANNEL_MAX_CHANNELS_IN, DIRECT_CHANNEL_MAX_CHANNELS_OUT);
  if (st != CONV_OK) return st;
  /* Then conv_direct_plan checks every value against the problem. */
  st = conv_config_check(config, "direct_channel", 6, 0, 1024, err);
  if (st != CONV_OK) return st;
  const conv_direct_tiling tiling = conv_direct_tiling_of(config);
  conv_direct_launch *launch = malloc(sizeof *launch);
  if (launch == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "direct_channel: malloc");
  char why[160];
  if (!conv_direct_plan(&view, &tiling, launch, why, sizeof why)) {
    free(launch);
    return conv_error_set(err, CONV_UNSUPPORTED, "direct_channel: %s", why);
  }
  launch->transposed_filter = problem->direction == CONV_BACKWARD_DATA;
  launch->pdl = conv_device_pdl(&env->device);
  return conv_prepared_own_kernel(launch, conv_direct_configure(launch), "direct_channel", out,
                                  err);
}

static conv_status direct_channel_run(const conv_exec *ex, cudaStream_t stream, conv_error *err) {
  const conv_direct_launch *launch = ex->state;
  /* Backward-data: the transposed convolution reads dy (exec's y) and
   * writes dx (exec's x). */
  const cudaError_t e =
      launch->transposed_filter
          ? conv_direct_forward(launch, ex->y, ex->w, NULL, (float *)ex->x, stream)
          : conv_direct_forward(launch, ex->x, ex->w, ex->bias, ex->y, stream);
  return conv_check_cuda(err, e, "direct_channel: kernel launch");
}

static void direct_channel_describe(const conv_config *config, char *text, size_t size) {
  if (text == NULL || size == 0) return;
  if (config == NULL || config->count != 6) {
    snprintf(text, size, "invalid config");
    return;
  }
  const conv_direct_tiling t = conv_direct_tiling_of(config);
  if (t.layout == CONV_DIRECT_SIMPLE || t.layout == CONV_DIRECT_NHWC) {
    snprintf(text, size, "%s threads=%dx%d", t.layout == CONV_DIRECT_SIMPLE ? "simple" : "nhwc",
             t.tx, t.ty);
    return;
  }
  const char *layout = t.layout == CONV_DIRECT_UNIT     ? "unit"
                       : t.layout == CONV_DIRECT_WINDOW ? "window"
                                                        : "generic";
  snprintf(text, size, "%s px=%d py=%d kb=%d threads=%dx%d", layout, t.px, t.py, t.kb, t.tx,
           t.ty);
}

const conv_algorithm conv_algorithm_direct_channel = {
    .id = CONV_ALGO_DIRECT_CHANNEL,
    /* 2: the window layout; 3: its float4 window loads; 4: up to 128
     * output channels per group; 5: stride-1 backward-data; 6: the simple
     * layout. */
    .version = 6,
    .name = "direct_channel",
    CONV_ALGORITHM_CALLBACKS(direct_channel),
};
