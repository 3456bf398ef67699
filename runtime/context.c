/* context.c -- contexts: device, library handles, cache, in-memory map. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/context.h"

/* The message of the last failed conv_context_create in this thread. */
static _Thread_local conv_error create_error;

/* Last errors are kept per thread, as errno is: a thread reads the message
 * of its own last failed call on a context, whatever other threads sharing
 * the context do meanwhile, and neither side takes a lock.  Slots are
 * named by context id (not address: a new context may reuse a freed one's
 * address) and the least recently written is reused. */
#define ERROR_SLOTS 8
typedef struct error_slot {
  uint64_t context_id; /* 0: free */
  uint64_t written;    /* the thread's clock at the last write */
  conv_error error;
} error_slot;
static _Thread_local error_slot error_slots[ERROR_SLOTS];
static _Thread_local uint64_t error_clock;
static atomic_uint_fast64_t next_context_id = 1;

static void options_defaults(conv_context_options *options) {
  memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
  /* Prediction, not the full search: a model's first use tunes in seconds
   * with plans within a few percent of exhaustive tuning's, and what it
   * predicted is marked incomplete for `convtune tune --pending`. */
  options->policy = CONV_POLICY_PREDICT;
}

void conv_context_options_init_sized(conv_context_options *options, size_t struct_size) {
  if (options == NULL) return;
  conv_context_options defaults;
  options_defaults(&defaults);
  conv_struct_export(options, struct_size, &defaults, sizeof defaults);
  /* Kept as given, so that conv_context_create can say what is wrong. */
  if (struct_size >= sizeof options->struct_size) options->struct_size = struct_size;
}

static error_slot *find_error_slot(uint64_t context_id) {
  for (int i = 0; i < ERROR_SLOTS; i++)
    if (error_slots[i].context_id == context_id) return &error_slots[i];
  return NULL;
}

const char *conv_context_last_error(const conv_context *context) {
  if (context == NULL) return create_error.message;
  const error_slot *slot = find_error_slot(context->id);
  return slot ? slot->error.message : "";
}

void context_set_error(const conv_context *context, const conv_error *err) {
  error_slot *slot = find_error_slot(context->id);
  if (slot == NULL) {
    slot = &error_slots[0];
    for (int i = 1; i < ERROR_SLOTS; i++)
      if (error_slots[i].written < slot->written) slot = &error_slots[i];
  }
  slot->context_id = context->id;
  slot->written = ++error_clock;
  slot->error = *err;
}

void conv_context_interrupt(conv_context *context) {
  if (context) atomic_store(&context->interrupt, 1);
}

/* What tuning, the untimed pick and re-validation of `problem` under `key`
 * are given in this context (plan.c, carried.c). */
conv_tune_request context_tune_request(conv_context *ctx, const conv_problem *problem,
                                       const conv_cache_key *key) {
  return (conv_tune_request){.problem = problem,
                             .env = &ctx->env,
                             .cache = ctx->cache,
                             .system_caches = ctx->system.caches,
                             .system_count = ctx->system.count,
                             .key = key,
                             .policy = ctx->policy,
                             .budget_ms = ctx->tuning_budget_ms,
                             .workspace_limit = ctx->workspace_limit,
                             .stream = ctx->tuning_stream,
                             .log = &ctx->log,
                             .interrupt = &ctx->interrupt};
}

struct conv_cache *conv_context_cache(conv_context *context) { return context->cache; }

_Static_assert(sizeof ((conv_device *)0)->key <= CONV_DEVICE_FINGERPRINT_MAX,
               "CONV_DEVICE_FINGERPRINT_MAX holds every fingerprint");

conv_status conv_context_device_fingerprint(const conv_context *context, char *fingerprint,
                                            size_t size) {
  if (context == NULL) return CONV_INVALID_ARGUMENT;
  conv_error err = {CONV_OK, ""};
  size_t len = strlen(context->env.device.key);
  if (fingerprint == NULL || len >= size) {
    conv_error_set(&err, CONV_INVALID_ARGUMENT,
                   "conv_context_device_fingerprint: %s (the fingerprint needs %zu bytes)",
                   fingerprint == NULL ? "NULL buffer" : "buffer too small", len + 1);
    context_set_error(context, &err);
    return err.status;
  }
  memcpy(fingerprint, context->env.device.key, len + 1);
  return CONV_OK;
}

/* ---------------------------------------------------------------- create */

static void context_free(conv_context *ctx);

/* Why cudaGetDeviceCount failed, in words a user can act on: CUDA reports a
 * machine with no NVIDIA driver at all as an "insufficient" driver. */
static conv_status no_device(cudaError_t rc, conv_error *err) {
  int driver = 0, runtime = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = 0;
  if (driver == 0)
    return conv_error_set(err, CONV_NO_DEVICE,
                          "no NVIDIA driver is installed (libcuda.so.1 not found)");
  if (rc == cudaErrorInsufficientDriver)
    return conv_error_set(err, CONV_NO_DEVICE,
                          "the NVIDIA driver supports CUDA %d.%d; this build needs %d.%d: update "
                          "the driver",
                          driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
  return conv_error_set(err, CONV_NO_DEVICE, "no CUDA device: %s", cudaGetErrorString(rc));
}

static conv_status count_devices(int *count, conv_error *err) {
  *count = 0;
  cudaError_t rc = cudaGetDeviceCount(count);
  if (rc != cudaSuccess) {
    *count = 0;
    return no_device(rc, err);
  }
  return *count > 0 ? CONV_OK : conv_error_set(err, CONV_NO_DEVICE, "no CUDA device");
}

conv_status conv_device_count(int *count) {
  conv_error *err = &create_error;
  memset(err, 0, sizeof *err);
  if (count == NULL) return conv_error_set(err, CONV_INVALID_ARGUMENT, "count is NULL");
  int found = 0;
  conv_status st = count_devices(&found, err);
  if (st == CONV_OK) *count = found;
  return st;
}

static conv_status open_device(conv_context *ctx, int ordinal, conv_error *err) {
  int count = 0;
  conv_status st = count_devices(&count, err);
  if (st != CONV_OK) return st;
  if (ordinal >= count)
    return conv_error_set(err, CONV_NO_DEVICE, "device %d requested but %d present", ordinal, count);
  return conv_device_query(ordinal, &ctx->env.device, err);
}

static conv_status open_libraries(conv_context *ctx, conv_error *err) {
  conv_status st = conv_check_cudnn(err, cudnnCreate(&ctx->env.cudnn), "cudnnCreate");
  if (st == CONV_OK)
    st = conv_check_cublas(err, cublasLtCreate(&ctx->env.cublaslt), "cublasLtCreate");
  return st;
}

/* The stream tuning runs on: one per context, so that memory a caller's
 * stream-ordered allocator keeps for it after one tuning serves the next
 * (conv_device_alloc_fn). */
static conv_status open_tuning_stream(conv_context *ctx, conv_error *err) {
  return conv_check_cuda(err, cudaStreamCreateWithFlags(&ctx->tuning_stream, cudaStreamNonBlocking),
                         "cudaStreamCreate(tuning)");
}

static conv_status choose_workspace_limit(conv_context *ctx, size_t requested, conv_error *err) {
  if (requested != 0) {
    ctx->workspace_limit = requested;
    return CONV_OK;
  }
  size_t free_bytes = 0, total = 0;
  conv_status st = conv_check_cuda(err, cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
  ctx->workspace_limit = free_bytes / 4;
  return st;
}

static conv_status open_cache(conv_context *ctx, const char *path, conv_error *err) {
  conv_status st = CONV_OK;
  if (path != NULL) {
    if (snprintf(ctx->cache_path, sizeof ctx->cache_path, "%s", path) >= (int)sizeof ctx->cache_path)
      return conv_error_set(err, CONV_INVALID_ARGUMENT, "cache path too long");
    if (strcmp(path, ":memory:") != 0) st = conv_cache_make_parent_dirs(path, err);
  } else {
    st = conv_default_cache_path(ctx->cache_path, sizeof ctx->cache_path, true, err);
  }
  if (st == CONV_OK) st = conv_cache_open(ctx->cache_path, false, &ctx->cache, err);
  return st;
}

static conv_status check_options(const conv_context_options *o, conv_error *err) {
  if (o->device < 0)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "device %d: must not be negative", o->device);
  if (o->policy != CONV_POLICY_EXHAUSTIVE && o->policy != CONV_POLICY_FAST &&
      o->policy != CONV_POLICY_CACHE_ONLY && o->policy != CONV_POLICY_RECORD &&
      o->policy != CONV_POLICY_PREDICT)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "policy %d is not a conv_policy", (int)o->policy);
  if (!(o->tuning_budget_ms >= 0) || isinf(o->tuning_budget_ms))
    return conv_error_set(err, CONV_INVALID_ARGUMENT,
                          "tuning_budget_ms %g: must be 0 (none) or a positive number of ms",
                          o->tuning_budget_ms);
  if ((o->device_alloc == NULL) != (o->device_free == NULL))
    return conv_error_set(err, CONV_INVALID_ARGUMENT,
                          "device_alloc is %s but device_free is %s: give both (the caller's "
                          "allocator) or neither (cudaMalloc)",
                          o->device_alloc ? "set" : "NULL", o->device_free ? "set" : "NULL");
  if ((int)o->log_level < 0 || o->log_level > CONV_LOG_DEBUG)
    return conv_error_set(err, CONV_INVALID_ARGUMENT,
                          "log_level %d is neither 0 (the default) nor a conv_log_level",
                          (int)o->log_level);
  return CONV_OK;
}

/* The context's mutexes, in one list so that creation and destruction
 * cannot miss one. */
static uv_mutex_t *context_locks(conv_context *ctx, size_t i) {
  uv_mutex_t *locks[] = {&ctx->lock, &ctx->env.cudnn_lock, &ctx->live.lock};
  return i < sizeof locks / sizeof locks[0] ? locks[i] : NULL;
}

/* 0, or nonzero with none of them initialised. */
static int init_locks(conv_context *ctx) {
  for (size_t i = 0; context_locks(ctx, i) != NULL; i++) {
    if (uv_mutex_init(context_locks(ctx, i)) != 0) {
      while (i-- > 0) uv_mutex_destroy(context_locks(ctx, i));
      return -1;
    }
  }
  return 0;
}

conv_status conv_context_create(conv_context **context, const conv_context_options *options) {
  conv_error *err = &create_error;
  memset(err, 0, sizeof *err);
  if (context == NULL) return conv_error_set(err, CONV_INVALID_ARGUMENT, "context is NULL");
  *context = NULL;
  conv_context_options ours;
  options_defaults(&ours);
  const conv_context_options *o = &ours;
  conv_status st = CONV_OK;
  if (options != NULL)
    st = conv_struct_import(&ours, sizeof ours, options, options->struct_size,
                            CONV_OPTIONS_FIRST_SIZE, "conv_context_options", err);
  if (st == CONV_OK) st = check_options(o, err);
  if (st != CONV_OK) return st;

  conv_context *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "allocating the context");
  ctx->policy = o->policy;
  ctx->tuning_budget_ms = o->tuning_budget_ms;
  ctx->log = conv_logger_from_options(o);
  ctx->direct_launches = o->direct_launches != 0;
  ctx->deterministic = o->deterministic != 0;
  ctx->retime_stale = o->retime_stale != 0;
  ctx->env.allocator = (conv_allocator){o->device_alloc, o->device_free, o->allocator_user, o->device};
  ctx->id = atomic_fetch_add(&next_context_id, 1);
  atomic_init(&ctx->interrupt, 0);
  if (init_locks(ctx) != 0) {
    free(ctx);
    return conv_error_set(err, CONV_INTERNAL, "uv_mutex_init failed");
  }
  int previous = -1;
  CONV_TRY(st, open_device(ctx, o->device, err), fail);
  /* The handles bind to the current device. */
  CONV_TRY(st, conv_device_enter(o->device, &previous, err), fail);
  st = open_libraries(ctx, err);
  if (st == CONV_OK) st = open_tuning_stream(ctx, err);
  if (st == CONV_OK) st = choose_workspace_limit(ctx, o->workspace_limit, err);
  conv_device_leave(previous);
  CONV_TRY(st, st, fail);
  CONV_TRY(st, open_cache(ctx, o->cache_path, err), fail);
  /* The read-only layers under it (conv_context_options.system_cache_path:
   * NULL the search path, "" none; cache/system.h). */
  CONV_TRY(st, conv_system_caches_open(o->system_cache_path, NULL, &ctx->log, &ctx->system, err),
           fail);
  *context = ctx;
  return CONV_OK;

fail:
  context_free(ctx);
  return st;
}

conv_status conv_context_destroy(conv_context *ctx) {
  if (ctx == NULL) return CONV_OK;
  /* Plans point at the context (its handles, its locks): freeing it under
   * them would be a use after free, so it refuses, as uv_loop_close does. */
  size_t live = live_count(&ctx->live);
  if (live > 0) {
    conv_error err;
    conv_error_set(&err, CONV_BUSY,
                   "conv_context_destroy: %zu plan%s made from this context %s alive; "
                   "conv_plan_destroy %s first (the context was not destroyed)",
                   live, live == 1 ? "" : "s", live == 1 ? "is" : "are", live == 1 ? "it" : "them");
    context_set_error(ctx, &err);
    return CONV_BUSY;
  }
  context_free(ctx);
  return CONV_OK;
}

static void context_free(conv_context *ctx) {
  conv_cache_close(ctx->cache);
  conv_system_caches_close(&ctx->system);
  int previous = -1;
  bool entered = (ctx->env.cudnn || ctx->env.cublaslt || ctx->tuning_stream) &&
                 conv_device_enter(ctx->env.device.ordinal, &previous, NULL) == CONV_OK;
  /* Each tuning ends synchronised; nothing else runs on it. */
  if (ctx->tuning_stream) {
    (void)cudaStreamSynchronize(ctx->tuning_stream);
    (void)cudaStreamDestroy(ctx->tuning_stream);
  }
  if (ctx->env.cublaslt) cublasLtDestroy(ctx->env.cublaslt);
  if (ctx->env.cudnn) cudnnDestroy(ctx->env.cudnn);
  if (entered) conv_device_leave(previous);
  plan_map_free(&ctx->map);
  for (size_t i = 0; context_locks(ctx, i) != NULL; i++) uv_mutex_destroy(context_locks(ctx, i));
  free(ctx);
}
