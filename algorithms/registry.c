/* registry.c -- every candidate family, with stable, append-only ids. */
#include <string.h>

#include "algorithms/algorithm.h"

/* In id order: algorithm.h's CONV_FAMILIES. */
static const conv_algorithm *const registry[] = {
#define CONV_FAMILY_ENTRY_(upper, lower, id) &conv_algorithm_##lower,
    CONV_FAMILIES(CONV_FAMILY_ENTRY_)
#undef CONV_FAMILY_ENTRY_
};

const conv_algorithm *const *conv_registry(int *count) {
  *count = (int)(sizeof registry / sizeof registry[0]);
  return registry;
}

const conv_algorithm *conv_registry_find(uint32_t id) {
  for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
    if (registry[i]->id == id) return registry[i];
  return NULL;
}

const conv_algorithm *conv_registry_find_name(const char *name) {
  for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
    if (strcmp(registry[i]->name, name) == 0) return registry[i];
  return NULL;
}
