/*
 * test_allocator.c -- the caller's device allocator
 * (conv_context_options.device_alloc and device_free).
 *
 * Without a GPU: the options' checks (one callback without the other is
 * refused, naming them, and calls neither; an older, shorter struct is
 * read without them), and conv_device_alloc / conv_device_free (the one
 * place the library calls them) against a fake allocator that hands out
 * host addresses it counts and never touches.
 *
 * On a GPU: a counting allocator wrapping cudaMalloc sees every tuning
 * buffer and plan workspace, each freed once with the bytes, stream and
 * device it was allocated with (tuning buffers with the context's one
 * tuning stream, plan workspaces with stream NULL), none left after the
 * plans and the context go; plans made from its memory match the CPU
 * reference; and an allocator that refuses gives CONV_OUT_OF_MEMORY,
 * whether it refuses the tuning's tensors, the candidates' workspaces
 * (the tuning then picks a candidate without one) or a plan's workspace.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <uv.h>

#include "cache/cache.h"
#include "core/device.h"
#include "runtime/context.h"
#include "tests/context_checks.h"
#include "tests/gpu_support.h"

/* ---------------------------------------------------------------- fake (CPU) */

/* Hands out addresses in a host arena (never dereferenced), or refuses. */
typedef struct fake_allocator {
  _Alignas(CONV_ALLOCATION_ALIGNMENT) unsigned char arena[4096];
  int allocs, frees;
  int rc;          /* what alloc returns; nonzero: a refusal */
  size_t offset;   /* of the next pointer into the arena (misaligned on purpose, or not) */
  bool give_null;  /* alloc returns 0 with *ptr NULL */
  /* The last call's arguments. */
  size_t bytes;
  void *stream, *ptr;
  int device;
} fake_allocator;

static int fake_alloc(void *user, size_t bytes, void *stream, int device, void **ptr) {
  fake_allocator *f = user;
  f->allocs++;
  f->bytes = bytes, f->stream = stream, f->device = device;
  if (f->rc != 0) return f->rc;
  *ptr = f->give_null ? NULL : f->arena + f->offset;
  return 0;
}

static void fake_free(void *user, void *ptr, size_t bytes, void *stream, int device) {
  fake_allocator *f = user;
  f->frees++;
  f->ptr = ptr, f->bytes = bytes, f->stream = stream, f->device = device;
}

static int allocator_options(void) {
  static fake_allocator fake;
  memset(&fake, 0, sizeof fake);
  conv_context_options o;
  memset(&o, 0xab, sizeof o);
  conv_context_options_init(&o);
  CHECK(o.device_alloc == NULL && o.device_free == NULL && o.allocator_user == NULL);
  o.cache_path = ":memory:";
  o.allocator_user = &fake;
  o.device_alloc = fake_alloc; /* without device_free */
  if (check_refused(&o, CONV_INVALID_ARGUMENT, "device_free is NULL") != TEST_PASS)
    return TEST_FAIL;
  o.device_alloc = NULL;
  o.device_free = fake_free; /* without device_alloc */
  if (check_refused(&o, CONV_INVALID_ARGUMENT, "device_alloc is NULL") != TEST_PASS)
    return TEST_FAIL;
  CHECK_MSG(fake.allocs == 0 && fake.frees == 0, "%d allocs, %d frees", fake.allocs, fake.frees);

  o.device_alloc = fake_alloc;
  if (check_accepted(&o) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(fake.allocs == 0 && fake.frees == 0, "%d allocs, %d frees", fake.allocs, fake.frees);

  /* A program built before the fields: its shorter struct, whatever lies
   * past it, is read with the default (cudaMalloc). */
  conv_context_options older;
  memset(&older, 0xab, sizeof older);
  conv_context_options_init_sized(&older, offsetof(conv_context_options, device_alloc));
  older.cache_path = ":memory:";
  CHECK(older.device_alloc != NULL); /* the 0xab bytes the library must not read */
  return check_accepted(&older);
}

static int allocator_calls(void) {
  static fake_allocator fake;
  memset(&fake, 0, sizeof fake);
  const conv_allocator a = {fake_alloc, fake_free, &fake, 3};
  void *const stream = (void *)(uintptr_t)0x5000;
  conv_error err = {CONV_OK, ""};
  void *ptr = (void *)1;

  /* Granted: the pointer, and the arguments as given. */
  fake.offset = 2 * CONV_ALLOCATION_ALIGNMENT;
  CHECK_STATUS(CONV_OK, conv_device_alloc(&a, 1000, stream, &ptr, "x", &err));
  CHECK(ptr == fake.arena + fake.offset && fake.allocs == 1 && fake.frees == 0);
  CHECK(fake.bytes == 1000 && fake.stream == stream && fake.device == 3);
  CHECK(conv_allocator_is_user(&a));
  conv_device_free(&a, ptr, 1000, stream);
  CHECK(fake.frees == 1 && fake.ptr == ptr && fake.bytes == 1000 && fake.stream == stream &&
        fake.device == 3);
  conv_device_free(&a, NULL, 1000, stream); /* nothing to free: no call */
  CHECK(fake.frees == 1);

  /* Refused, or NULL: out of memory, naming the buffer; *ptr untouched. */
  ptr = (void *)1;
  fake.rc = 2;
  CHECK_STATUS(CONV_OUT_OF_MEMORY, conv_device_alloc(&a, 4096, stream, &ptr, "workspace", &err));
  CHECK(ptr == (void *)1 && fake.allocs == 2 && fake.frees == 1);
  CHECK_MSG(strstr(err.message, "workspace") && strstr(err.message, "device_alloc") &&
                strstr(err.message, "4096"),
            "%s", err.message);
  fake.rc = 0;
  fake.give_null = true;
  CHECK_STATUS(CONV_OUT_OF_MEMORY, conv_device_alloc(&a, 64, stream, &ptr, "y", &err));
  CHECK(ptr == (void *)1 && fake.allocs == 3 && fake.frees == 1);
  CHECK_MSG(strstr(err.message, "NULL") != NULL, "%s", err.message);
  fake.give_null = false;

  /* Misaligned: given back to free at once, with the same arguments. */
  fake.offset = 16;
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_device_alloc(&a, 512, stream, &ptr, "w", &err));
  CHECK(ptr == (void *)1 && fake.allocs == 4 && fake.frees == 2);
  CHECK(fake.ptr == fake.arena + 16 && fake.bytes == 512 && fake.stream == stream);
  CHECK_MSG(strstr(err.message, "aligned") != NULL, "%s", err.message);

  /* Zero bytes is the library's own mistake, never asked of the allocator. */
  CHECK_STATUS(CONV_INTERNAL, conv_device_alloc(&a, 0, stream, &ptr, "bias", &err));
  CHECK(fake.allocs == 4);

  const conv_allocator none = {0};
  CHECK(!conv_allocator_is_user(&none) && !conv_allocator_is_user(NULL));
  return TEST_PASS;
}

/* ---------------------------------------------------------------- counting (GPU) */

#define MAX_LIVE 512

typedef struct allocation {
  void *ptr;
  size_t bytes;
  void *stream;
  int device;
} allocation;

/* cudaMalloc and cudaFree, counted, each allocation remembered until it
 * is freed; it refuses what the test asks it to. */
typedef struct counting_allocator {
  uv_mutex_t lock;
  allocation live[MAX_LIVE];
  int live_count;
  int allocs, frees, refused;
  int bad_frees;          /* a pointer not live, or freed with other bytes, stream or device */
  void *tuning_stream;    /* the first non-NULL stream allocated with */
  int other_streams;      /* allocations with a non-NULL stream other than that one */
  /* Refusals */
  bool refuse_all;
  bool refuse_default_stream; /* stream NULL: plan workspaces */
  int grant_on_stream;    /* > 0: refuse allocations with a stream once this many were granted */
  int granted_on_stream;
} counting_allocator;

static bool refuses(counting_allocator *c, void *stream) {
  if (c->refuse_all) return true;
  if (stream == NULL) return c->refuse_default_stream;
  return c->grant_on_stream > 0 && c->granted_on_stream >= c->grant_on_stream;
}

static int counting_alloc(void *user, size_t bytes, void *stream, int device, void **ptr) {
  counting_allocator *c = user;
  int rc = 1;
  uv_mutex_lock(&c->lock);
  int current = -1;
  if (refuses(c, stream) || c->live_count == MAX_LIVE || cudaGetDevice(&current) != cudaSuccess ||
      current != device) {
    c->refused++;
  } else if (cudaMalloc(ptr, bytes) == cudaSuccess) {
    c->live[c->live_count++] = (allocation){*ptr, bytes, stream, device};
    c->allocs++;
    if (stream != NULL) {
      c->granted_on_stream++;
      if (c->tuning_stream == NULL) c->tuning_stream = stream;
      if (stream != c->tuning_stream) c->other_streams++;
    }
    rc = 0;
  } else {
    (void)cudaGetLastError();
    c->refused++;
  }
  uv_mutex_unlock(&c->lock);
  return rc;
}

static void counting_free(void *user, void *ptr, size_t bytes, void *stream, int device) {
  counting_allocator *c = user;
  uv_mutex_lock(&c->lock);
  int i = 0;
  while (i < c->live_count && c->live[i].ptr != ptr) i++;
  if (i == c->live_count || c->live[i].bytes != bytes || c->live[i].stream != stream ||
      c->live[i].device != device) {
    c->bad_frees++;
  } else {
    c->live[i] = c->live[--c->live_count];
    c->frees++;
    cudaFree(ptr); /* waits for the device: a test allocator may */
  }
  uv_mutex_unlock(&c->lock);
}

static int counting_open(counting_allocator *c) {
  memset(c, 0, sizeof *c);
  CHECK(uv_mutex_init(&c->lock) == 0);
  return TEST_PASS;
}

/* Nothing live, every free matched its allocation, one tuning stream. */
static int counting_close(counting_allocator *c) {
  CHECK_MSG(c->live_count == 0, "%d allocations never freed", c->live_count);
  CHECK_MSG(c->bad_frees == 0, "%d frees did not match an allocation", c->bad_frees);
  CHECK_MSG(c->allocs == c->frees, "%d allocs, %d frees", c->allocs, c->frees);
  CHECK_MSG(c->other_streams == 0, "%d allocations on a second non-NULL stream", c->other_streams);
  uv_mutex_destroy(&c->lock);
  return TEST_PASS;
}

/* The live allocation of `bytes` with stream NULL (a plan workspace). */
static bool has_workspace(const counting_allocator *c, size_t bytes) {
  for (int i = 0; i < c->live_count; i++)
    if (c->live[i].stream == NULL && c->live[i].bytes == bytes) return true;
  return false;
}

static conv_context *counting_context(counting_allocator *c, const char *cache,
                                      conv_policy policy) {
  conv_context_options o;
  conv_context_options_init(&o);
  o.cache_path = cache;
  o.policy = policy;
  o.device_alloc = counting_alloc;
  o.device_free = counting_free;
  o.allocator_user = c;
  conv_context *ctx = NULL;
  if (conv_context_create(&ctx, &o) != CONV_OK)
    fprintf(stderr, "conv_context_create: %s\n", conv_context_last_error(NULL));
  return ctx;
}

static conv_problem problem_of(const char *spec) {
  conv_problem p;
  if (conv_problem_parse(spec, &p, NULL, 0) != CONV_OK) conv_problem_init(&p);
  return p;
}

/* Runs the plan's pass on fresh inputs and compares it with the CPU
 * reference. */
static int plan_matches_reference(conv_plan *plan, const conv_problem *p, const char *what) {
  host_case hc;
  dev_case d;
  if (host_case_make(&hc, p) != TEST_PASS || dev_case_make(&d, &hc) != TEST_PASS) return TEST_FAIL;
  if (poison(&d, &hc, 0) != TEST_PASS) return TEST_FAIL;
  CHECK_STATUS(CONV_OK, execute_case(plan, &d, p->direction));
  if (check_output(&d, &hc, 0, conv_error_bound_for(p, CONV_ARITH_TRANSFORM), what) != TEST_PASS)
    return TEST_FAIL;
  dev_case_free(&d);
  host_case_free(&hc);
  return TEST_PASS;
}

static const char *const tuned_specs[] = {
    "n=2 c=16 h=23 w=19 k=24 r=3 s=3 pad=1 epilogue=bias_relu",
    "n=4 c=32 h=14 w=14 k=32 r=3 s=3 pad=1 layout=nhwc",
    "n=4 c=16 h=14 w=14 k=32 r=3 s=3 pad=1 dir=bwd_filter",
};
#define TUNED 3
/* What a tuning allocates before any candidate: x, w, the bias, y, the
 * reference and the comparison's scratch. */
#define TUNING_TENSORS 6

/* Tunings and plans take all their memory from the allocator, and give
 * it all back: tensors and workspaces with the tuning stream, plan
 * workspaces with stream NULL, live exactly while their plans are. */
static int counting_allocator_sees_everything(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  counting_allocator c;
  if (counting_open(&c) != TEST_PASS) return TEST_FAIL;
  conv_context *ctx = counting_context(&c, ":memory:", CONV_POLICY_FAST);
  CHECK(ctx != NULL);
  CHECK_MSG(c.allocs == 0, "the context allocated %d buffers at creation", c.allocs);
  conv_plan *plans[TUNED] = {0};
  size_t workspaces = 0;
  for (int i = 0; i < TUNED; i++) {
    const conv_problem p = problem_of(tuned_specs[i]);
    const int before = c.allocs;
    conv_status st = conv_plan_create(ctx, &p, &plans[i]);
    CHECK_MSG(st == CONV_OK, "%s: %s", tuned_specs[i], conv_context_last_error(ctx));
    conv_plan_info info;
    CHECK_STATUS(CONV_OK, conv_plan_info_get(plans[i], &info));
    printf("%s: %s %s, workspace %zu bytes; %d allocations\n", tuned_specs[i], info.algorithm,
           info.config, info.workspace_bytes, c.allocs - before);
    CHECK_MSG(info.source == CONV_SOURCE_TUNED, "source %d", (int)info.source);
    CHECK_MSG(c.allocs - before >= TUNING_TENSORS, "%s: %d allocations", tuned_specs[i],
              c.allocs - before);
    /* The tuning's buffers are back; the plan's workspace is live. */
    workspaces += info.workspace_bytes > 0;
    CHECK_MSG(c.live_count == (int)workspaces, "%d live allocations, %zu plan workspaces",
              c.live_count, workspaces);
    CHECK(info.workspace_bytes == 0 || has_workspace(&c, info.workspace_bytes));
    if (plan_matches_reference(plans[i], &p, tuned_specs[i]) != TEST_PASS) return TEST_FAIL;
  }
  CHECK(c.tuning_stream != NULL);
  /* Candidates' workspaces came through it too (im2col_gemm's columns,
   * at least, for the 3x3 forward problems). */
  CHECK_MSG(c.allocs > TUNED * TUNING_TENSORS + (int)workspaces,
            "%d allocations: no candidate workspace among them", c.allocs);
  for (int i = 0; i < TUNED; i++) conv_plan_destroy(plans[i]);
  CHECK_MSG(c.live_count == 0, "%d live after the plans went", c.live_count);
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  return counting_close(&c);
}

/* A refusal of the tuning's tensors is out of memory, and the context
 * stays usable: granted afterwards, the same problem tunes. */
static int refused_tuning_is_out_of_memory(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  counting_allocator c;
  if (counting_open(&c) != TEST_PASS) return TEST_FAIL;
  conv_context *ctx = counting_context(&c, ":memory:", CONV_POLICY_FAST);
  CHECK(ctx != NULL);
  const conv_problem p = problem_of(tuned_specs[0]);
  conv_plan *plan = NULL;
  c.refuse_all = true;
  CHECK_STATUS(CONV_OUT_OF_MEMORY, conv_plan_create(ctx, &p, &plan));
  CHECK(plan == NULL && c.refused == 1 && c.allocs == 0);
  CHECK_MSG(strstr(conv_context_last_error(ctx), "device_alloc") != NULL, "%s",
            conv_context_last_error(ctx));
  c.refuse_all = false;
  CHECK_MSG(conv_plan_create(ctx, &p, &plan) == CONV_OK, "%s", conv_context_last_error(ctx));
  if (plan_matches_reference(plan, &p, "after a refusal") != TEST_PASS) return TEST_FAIL;
  conv_plan_destroy(plan);
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  return counting_close(&c);
}

/* Every candidate workspace refused: those candidates fail (out of
 * memory, stored as their trials), and the tuning picks one that needs
 * none. */
static int refused_workspaces_fail_their_candidates(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  counting_allocator c;
  if (counting_open(&c) != TEST_PASS) return TEST_FAIL;
  conv_context *ctx = counting_context(&c, ":memory:", CONV_POLICY_FAST);
  CHECK(ctx != NULL);
  const conv_problem p = problem_of(tuned_specs[0]);
  c.grant_on_stream = TUNING_TENSORS;
  conv_plan *plan = NULL;
  CHECK_MSG(conv_plan_create(ctx, &p, &plan) == CONV_OK, "%s", conv_context_last_error(ctx));
  conv_plan_info info;
  CHECK_STATUS(CONV_OK, conv_plan_info_get(plan, &info));
  printf("%s %s; %d workspaces refused\n", info.algorithm, info.config, c.refused);
  CHECK_MSG(c.refused > 0, "no candidate asked for a workspace");
  CHECK_MSG(info.workspace_bytes == 0, "the plan has a workspace of %zu bytes",
            info.workspace_bytes);
  CHECK(c.allocs == TUNING_TENSORS && c.live_count == 0);
  if (plan_matches_reference(plan, &p, "without workspaces") != TEST_PASS) return TEST_FAIL;
  conv_plan_destroy(plan);
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  return counting_close(&c);
}

/* Stores `algo`'s first config for `p` that needs a workspace as the
 * winner of p in the context's cache; *workspace: its bytes. */
static int store_winner_with_workspace(conv_context *ctx, const conv_problem *p,
                                       uint32_t algo_id, size_t *workspace) {
  const conv_algorithm *algo = conv_registry_find(algo_id);
  CHECK(algo != NULL && conv_algorithm_applicable(algo, p, &ctx->env));
  conv_config configs[64];
  int count = 0;
  conv_error err = {CONV_OK, ""};
  CHECK_MSG(algo->configs(p, &ctx->env, configs, 64, &count, &err) == CONV_OK, "%s", err.message);
  conv_trial t;
  memset(&t, 0, sizeof t);
  for (int i = 0; i < count && t.workspace_bytes == 0; i++) {
    conv_prepared prep = {0};
    if (algo->prepare(p, &ctx->env, &configs[i], &prep, &err) != CONV_OK) continue;
    if (prep.workspace_bytes > 0) {
      t.config = configs[i];
      t.workspace_bytes = prep.workspace_bytes;
    }
    algo->release(prep.state);
  }
  CHECK_MSG(t.workspace_bytes > 0, "no %s config of this problem needs a workspace", algo->name);
  t.algorithm_id = algo->id;
  snprintf(t.algorithm, sizeof t.algorithm, "%s", algo->name);
  algo->describe(&t.config, t.config_text, sizeof t.config_text);
  t.status = CONV_OK;
  t.time_ms = 0.5;
  t.rel_error = 1e-7;
  t.deterministic = -1;
  char text[CONV_PROBLEM_KEY_MAX];
  CHECK_STATUS(CONV_OK, conv_problem_key(p, text, sizeof text));
  const conv_cache_key key = {text, ctx->env.device.key, conv_library_versions()};
  conv_cache *cache = conv_context_cache(ctx);
  CHECK_STATUS(CONV_OK, conv_cache_begin_tuning(cache, &key, &err));
  CHECK_STATUS(CONV_OK, conv_cache_add_trial(cache, &key, &t, &err));
  CHECK_STATUS(CONV_OK, conv_cache_set_winner(cache, &key, t.algorithm_id, &t.config, &err));
  *workspace = t.workspace_bytes;
  return TEST_PASS;
}

/* A plan's workspace refused: CONV_OUT_OF_MEMORY and no plan; granted, it
 * is allocated with stream NULL, lives as long as the plan, and the plan
 * runs correctly in it.  The winner is written into the cache (a config
 * of im2col_gemm, whose columns need a workspace) so that the plan
 * surely has one; cache-only, so the refusal is not answered by tuning. */
static int refused_plan_workspace_is_out_of_memory(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  counting_allocator c;
  if (counting_open(&c) != TEST_PASS) return TEST_FAIL;
  conv_context *ctx = counting_context(&c, ":memory:", CONV_POLICY_CACHE_ONLY);
  CHECK(ctx != NULL);
  const conv_problem p = problem_of("n=2 c=16 h=23 w=19 k=24 r=3 s=3 pad=1");
  size_t workspace = 0;
  if (store_winner_with_workspace(ctx, &p, CONV_ALGO_IM2COL_GEMM, &workspace) != TEST_PASS)
    return TEST_FAIL;
  conv_plan *plan = NULL;
  c.refuse_default_stream = true;
  CHECK_STATUS(CONV_OUT_OF_MEMORY, conv_plan_create(ctx, &p, &plan));
  CHECK(plan == NULL && c.refused == 1 && c.live_count == 0);
  CHECK_MSG(strstr(conv_context_last_error(ctx), "plan workspace") != NULL, "%s",
            conv_context_last_error(ctx));
  c.refuse_default_stream = false;
  CHECK_MSG(conv_plan_create(ctx, &p, &plan) == CONV_OK, "%s", conv_context_last_error(ctx));
  conv_plan_info info;
  CHECK_STATUS(CONV_OK, conv_plan_info_get(plan, &info));
  CHECK(info.source == CONV_SOURCE_CACHE && info.workspace_bytes == workspace);
  CHECK(c.live_count == 1 && has_workspace(&c, workspace));
  if (plan_matches_reference(plan, &p, "im2col_gemm in the allocator's memory") != TEST_PASS)
    return TEST_FAIL;
  conv_plan_destroy(plan);
  CHECK(c.live_count == 0);
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  return counting_close(&c);
}

static const labelled_test_case tests[] = {
    {"allocator_options", allocator_options, "cpu"},
    {"allocator_calls", allocator_calls, "cpu"},
    {"counting_allocator_sees_everything", counting_allocator_sees_everything, "gpu"},
    {"refused_tuning_is_out_of_memory", refused_tuning_is_out_of_memory, "gpu"},
    {"refused_workspaces_fail_their_candidates", refused_workspaces_fail_their_candidates, "gpu"},
    {"refused_plan_workspace_is_out_of_memory", refused_plan_workspace_is_out_of_memory, "gpu"},
};

TEST_MAIN(tests)
