/*
 * host_cost.c -- what convtune costs the host, measured in one fresh
 * process from a warm cache (run by bench.py, or by hand):
 *
 *   convtune_host_cost [--cache PATH] [--device N] SPEC...
 *
 * SPEC is conv_problem_parse's text ("n=1 c=64 h=56 w=56 k=64 r=3 s=3
 * pad=1 math=tf32"); the cache is the library's default without --cache.  Prints one JSON object per line: first the
 * process's own start-up, then one per spec, in order:
 *
 *   cuda_init_ms      the CUDA context (cudaFree(0)), before anything of ours
 *   context_ms        conv_context_create (cuDNN, cuBLASLt, the cache file)
 *   plan_cache_ms     the first conv_plan_create of the spec: from the cache
 *                     (cache-only policy, so never a tuning)
 *   first_execute_ms  its first execute + synchronize (run directly: the
 *                     pointers are new)
 *   capture_ms        the second execute + synchronize (the graph capture)
 *   plan_live_us      median conv_plan_create of the live plan (a reference)
 *   execute_us        median host time of one conv_plan_execute, same pointers
 *   alternate_us      the same with the output alternating between 2 buffers
 *   direct_us         execute_us of the same plan from a context created with
 *                     direct_launches (the pieces launched, no graph)
 *   launch_us         median cudaGraphLaunch of the same work captured once
 *                     by this program (the CUDA floor under execute_us)
 *
 * Medians are over ROUNDS batches of CALLS back-to-back calls, the stream
 * synchronised between batches.  Inputs are a non-zero byte pattern: only
 * the host's time is of interest here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "convtune.h"
#include "tools/json.h"

enum { CALLS = 100, ROUNDS = 21, LIVE_CREATES = 1000 };

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *values, int count) {
  qsort(values, (size_t)count, sizeof values[0], compare_doubles);
  return values[count / 2];
}

static void print_error(const char *spec, const char *what, const char *message) {
  printf("{\"spec\": ");
  json_write_string(stdout, spec);
  printf(", \"error\": ");
  char text[768];
  snprintf(text, sizeof text, "%s: %s", what, message);
  json_write_string(stdout, text);
  printf("}\n");
}

#define CUDA_OR_FAIL(call)                                                       \
  do {                                                                           \
    cudaError_t e_ = (call);                                                     \
    if (e_ != cudaSuccess) {                                                     \
      print_error(spec, #call, cudaGetErrorString(e_));                          \
      goto done;                                                                 \
    }                                                                            \
  } while (0)

typedef struct buffers {
  void *x, *w, *bias, *y[2];
} buffers;

static cudaError_t buffers_make(buffers *b, const conv_problem *p) {
  int64_t out_h, out_w;
  conv_problem_output_dims(p, &out_h, &out_w);
  const size_t bytes[] = {(size_t)(p->n * p->c * p->h * p->w) * 4,
                          (size_t)(p->k * (p->c / p->groups) * p->r * p->s) * 4, (size_t)p->k * 4,
                          (size_t)(p->n * p->k * out_h * out_w) * 4,
                          (size_t)(p->n * p->k * out_h * out_w) * 4};
  void **slots[] = {&b->x, &b->w, &b->bias, &b->y[0], &b->y[1]};
  memset(b, 0, sizeof *b);
  for (int i = 0; i < 5; i++) {
    cudaError_t e = cudaMalloc(slots[i], bytes[i]);
    if (e == cudaSuccess) e = cudaMemset(*slots[i], 0x3c, bytes[i]); /* ~0.0115f each */
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

static void buffers_free(buffers *b) {
  void *all[] = {b->x, b->w, b->bias, b->y[0], b->y[1]};
  for (int i = 0; i < 5; i++) cudaFree(all[i]);
}

/* Median host microseconds per conv_plan_execute, the output alternating
 * over `outputs` buffers; -1 when an execute fails. */
static double execute_cost(conv_plan *plan, cudaStream_t stream, const buffers *b, int outputs) {
  double per_call[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    double t0 = now_us();
    for (int i = 0; i < CALLS; i++)
      if (conv_plan_execute(plan, stream, b->x, b->w, b->bias, b->y[i % outputs]) != CONV_OK) return -1;
    per_call[r] = (now_us() - t0) / CALLS;
    if (cudaStreamSynchronize(stream) != cudaSuccess) return -1;
  }
  return median(per_call, ROUNDS);
}

/* The same for cudaGraphLaunch of one execute captured by us. */
static double launch_cost(conv_plan *plan, cudaStream_t stream, const buffers *b) {
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  double result = -1;
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return -1;
  conv_status st = conv_plan_execute(plan, stream, b->x, b->w, b->bias, b->y[0]);
  if (cudaStreamEndCapture(stream, &graph) != cudaSuccess || st != CONV_OK ||
      cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess)
    goto out;
  double per_call[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    double t0 = now_us();
    for (int i = 0; i < CALLS; i++)
      if (cudaGraphLaunch(exec, stream) != cudaSuccess) goto out;
    per_call[r] = (now_us() - t0) / CALLS;
    if (cudaStreamSynchronize(stream) != cudaSuccess) goto out;
  }
  result = median(per_call, ROUNDS);
out:
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  (void)cudaGetLastError();
  return result;
}

/* Median microseconds of conv_plan_create while the plan is alive. */
static double live_create_cost(conv_context *ctx, const conv_problem *p) {
  static double each[LIVE_CREATES];
  for (int i = 0; i < LIVE_CREATES; i++) {
    conv_plan *again = NULL;
    double t0 = now_us();
    conv_status st = conv_plan_create(ctx, p, &again);
    each[i] = now_us() - t0;
    if (st != CONV_OK) return -1;
    conv_plan_destroy(again);
  }
  return median(each, LIVE_CREATES);
}

/* execute_us of the plan for `p` in the direct-launch context. */
static double direct_cost(conv_context *direct, const conv_problem *p, cudaStream_t stream,
                          const buffers *b) {
  conv_plan *plan = NULL;
  if (conv_plan_create(direct, p, &plan) != CONV_OK) return -1;
  double us = execute_cost(plan, stream, b, 1);
  conv_plan_destroy(plan);
  return us;
}

static void measure(conv_context *ctx, conv_context *direct, cudaStream_t stream, const char *spec) {
  conv_problem p;
  char message[256];
  conv_plan *plan = NULL;
  buffers b = {0};
  if (conv_problem_parse(spec, &p, message, sizeof message) != CONV_OK) {
    print_error(spec, "parsing the spec", message);
    return;
  }
  CUDA_OR_FAIL(buffers_make(&b, &p));
  double t0 = now_us();
  if (conv_plan_create(ctx, &p, &plan) != CONV_OK) {
    print_error(spec, "conv_plan_create", conv_context_last_error(ctx));
    goto done;
  }
  double t1 = now_us();
  if (conv_plan_execute(plan, stream, b.x, b.w, b.bias, b.y[0]) != CONV_OK) {
    print_error(spec, "conv_plan_execute", conv_context_last_error(ctx));
    goto done;
  }
  CUDA_OR_FAIL(cudaStreamSynchronize(stream));
  double t2 = now_us();
  if (conv_plan_execute(plan, stream, b.x, b.w, b.bias, b.y[0]) != CONV_OK) {
    print_error(spec, "conv_plan_execute", conv_context_last_error(ctx));
    goto done;
  }
  CUDA_OR_FAIL(cudaStreamSynchronize(stream));
  double t3 = now_us();
  double live_us = live_create_cost(ctx, &p);
  double execute_us = execute_cost(plan, stream, &b, 1);
  double alternate_us = execute_cost(plan, stream, &b, 2);
  double launch_us = launch_cost(plan, stream, &b);
  double direct_us = direct_cost(direct, &p, stream, &b);
  conv_plan_info info;
  conv_plan_info_get(plan, &info);
  const char *replays[] = {"pending", "graph", "direct"};
  printf("{\"spec\": ");
  json_write_string(stdout, spec);
  printf(", \"algorithm\": ");
  json_write_string(stdout, info.algorithm);
  printf(", \"config\": ");
  json_write_string(stdout, info.config);
  printf(", \"replay\": \"%s\", \"plan_cache_ms\": %.4f, \"first_execute_ms\": %.4f, "
         "\"capture_ms\": %.4f, \"plan_live_us\": %.3f, \"execute_us\": %.3f, \"alternate_us\": %.3f, "
         "\"direct_us\": %.3f, \"launch_us\": %.3f}\n",
         info.replay <= CONV_REPLAY_DIRECT ? replays[info.replay] : "unknown", (t1 - t0) / 1e3,
         (t2 - t1) / 1e3, (t3 - t2) / 1e3, live_us, execute_us, alternate_us, direct_us, launch_us);
done:
  conv_plan_destroy(plan);
  buffers_free(&b);
}

int main(int argc, char **argv) {
  const char *cache = NULL;
  int device = 0, first_spec = 1;
  for (; first_spec + 1 < argc && strncmp(argv[first_spec], "--", 2) == 0; first_spec += 2) {
    if (strcmp(argv[first_spec], "--cache") == 0) cache = argv[first_spec + 1];
    else if (strcmp(argv[first_spec], "--device") == 0) device = atoi(argv[first_spec + 1]);
    else break;
  }
  if (first_spec >= argc || strncmp(argv[first_spec], "--", 2) == 0) {
    fprintf(stderr, "usage: %s [--cache PATH] [--device N] SPEC...\n", argv[0]);
    return 2;
  }
  double t0 = now_us();
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaFree(0);
  if (e != cudaSuccess) {
    printf("{\"error\": \"CUDA: %s\"}\n", cudaGetErrorString(e));
    return 1;
  }
  double t1 = now_us();
  conv_context_options o;
  conv_context_options_init(&o);
  o.device = device;
  o.cache_path = cache;
  o.policy = CONV_POLICY_CACHE_ONLY;
  conv_context *ctx = NULL, *direct = NULL;
  if (conv_context_create(&ctx, &o) != CONV_OK) {
    printf("{\"error\": ");
    json_write_string(stdout, conv_context_last_error(NULL));
    printf("}\n");
    return 1;
  }
  o.direct_launches = 1;
  if (conv_context_create(&direct, &o) != CONV_OK) {
    printf("{\"error\": ");
    json_write_string(stdout, conv_context_last_error(NULL));
    printf("}\n");
    conv_context_destroy(ctx);
    return 1;
  }
  double t2 = now_us();
  printf("{\"cuda_init_ms\": %.3f, \"context_ms\": %.3f}\n", (t1 - t0) / 1e3, (t2 - t1) / 1e3);
  cudaStream_t stream;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    printf("{\"error\": \"cudaStreamCreate failed\"}\n");
    conv_context_destroy(direct);
    conv_context_destroy(ctx);
    return 1;
  }
  for (int i = first_spec; i < argc; i++) {
    measure(ctx, direct, stream, argv[i]);
    fflush(stdout);
  }
  cudaStreamDestroy(stream);
  conv_context_destroy(direct);
  conv_context_destroy(ctx);
  return 0;
}
