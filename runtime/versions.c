/* versions.c -- the library versions and candidate families that key the cache. */
#include <stdio.h>

#include "algorithms/algorithm.h"
#include "tuner/tuner.h"

/* Room for every family (about 6 characters each) with much to spare: a
 * truncated text would drop the last families and the timing version from
 * every cache key, so their changes would no longer re-tune. */
#define CANDIDATES_TEXT_MAX 1024
static char versions_text[CANDIDATES_TEXT_MAX + 128];
static uv_once_t versions_once = UV_ONCE_INIT;

/* The registry's families with their versions, "1v1,2v1,3v1,4v3": a cache
 * tuned before a family existed, or before its kernels changed, never timed
 * what it has now, so its winners must not hide it. */
static void format_candidates(char *text, size_t size) {
  int count, used = 0;
  const conv_algorithm *const *algos = conv_registry(&count);
  text[0] = '\0';
  for (int i = 0; i < count && used < (int)size; i++)
    used += snprintf(text + used, size - (size_t)used, "%s%uv%u", i ? "," : "", algos[i]->id,
                     algos[i]->version);
}

static void read_versions(void) {
  int runtime = 0, driver = 0;
  char candidates[CANDIDATES_TEXT_MAX];
  /* Without a driver both calls fail and leave 0: the text then says so. */
  if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  format_candidates(candidates, sizeof candidates);
  snprintf(versions_text, sizeof versions_text,
           "cuda=%d driver=%d cudnn=%zu cublaslt=%zu candidates=%s timing=%d", runtime,
           driver, cudnnGetVersion(), cublasLtGetVersion(), candidates, CONV_TIMING_VERSION);
}

int conv_version(void) { return CONVTUNE_VERSION; }

const char *conv_library_versions(void) {
  uv_once(&versions_once, read_versions);
  return versions_text;
}
