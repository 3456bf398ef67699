/* device.c -- the GPU fingerprint and library versions that key the cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/internal.h"
#include "tuner/tuner.h"

static conv_status device_attribute(int ordinal, enum cudaDeviceAttr attr, int *value,
                                    const char *what, conv_error *err) {
  return conv_check_cuda(err, cudaDeviceGetAttribute(value, attr, ordinal), what);
}

conv_status conv_device_query(int ordinal, conv_device *dev, conv_error *err) {
  struct cudaDeviceProp prop;
  conv_status st = conv_check_cuda(err, cudaGetDeviceProperties(&prop, ordinal),
                                   "cudaGetDeviceProperties");
  if (st != CONV_OK) return st;
  conv_device d;
  memset(&d, 0, sizeof d);
  d.ordinal = ordinal;
  snprintf(d.name, sizeof d.name, "%s", prop.name);
  d.cc_major = prop.major;
  d.cc_minor = prop.minor;
  d.sm_count = prop.multiProcessorCount;
  d.l2_bytes = prop.l2CacheSize;
  d.mem_bus_bits = prop.memoryBusWidth;
  d.total_mem = prop.totalGlobalMem;
  /* CUDA 13 dropped memoryClockRate from cudaDeviceProp; the attribute stays. */
  st = device_attribute(ordinal, cudaDevAttrMemoryClockRate, &d.mem_clock_khz,
                        "cudaDeviceGetAttribute(MemoryClockRate)", err);
  if (st != CONV_OK) return st;
  snprintf(d.key, sizeof d.key, "%s|sm%d%d|%dsm|l2=%d|mem=%dkHz*%dbit", d.name, d.cc_major,
           d.cc_minor, d.sm_count, d.l2_bytes, d.mem_clock_khz, d.mem_bus_bits);
  *dev = d;
  return CONV_OK;
}

bool conv_device_pdl(const conv_device *dev) {
  const char *setting = getenv("CONVTUNE_PDL");
  if (setting != NULL && strcmp(setting, "0") == 0) return false;
  return dev != NULL && dev->cc_major >= 9;
}

bool conv_device_wgmma(const conv_device *dev) {
  return dev != NULL && dev->cc_major == 9 && dev->cc_minor == 0;
}

conv_status conv_device_enter(int ordinal, int *previous, conv_error *err) {
  conv_status st = conv_check_cuda(err, cudaGetDevice(previous), "cudaGetDevice");
  if (st == CONV_OK && *previous != ordinal)
    st = conv_check_cuda(err, cudaSetDevice(ordinal), "cudaSetDevice");
  return st;
}

void conv_device_leave(int previous) {
  int current;
  if (cudaGetDevice(&current) == cudaSuccess && current != previous) cudaSetDevice(previous);
}

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
