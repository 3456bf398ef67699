/* plan_map.h -- the in-memory map in front of the cache: problem key -> choice. */
#ifndef CONVTUNE_PLAN_MAP_H
#define CONVTUNE_PLAN_MAP_H

#include <stddef.h>

#include "tuner/tuner.h"

typedef struct plan_map_entry {
  struct plan_map_entry *next;
  char key[CONV_PROBLEM_KEY_MAX];
  conv_choice choice;
} plan_map_entry;

typedef struct plan_map {
  plan_map_entry **buckets;
  size_t bucket_count, size;
} plan_map;

/* The caller holds the context's lock for each. */
const conv_choice *plan_map_find(const plan_map *map, const char *key);
conv_status plan_map_put(plan_map *map, const char *key, const conv_choice *choice);
void plan_map_free(plan_map *map);

#endif /* CONVTUNE_PLAN_MAP_H */
