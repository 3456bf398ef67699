/* device.c -- the GPU fingerprint that keys the cache, and device switching. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"

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
