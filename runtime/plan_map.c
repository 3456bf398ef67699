/* plan_map.c -- the in-memory map in front of the cache: problem key -> choice. */
#include <stdlib.h>
#include <string.h>

#include "runtime/plan_map.h"

static size_t hash_key(const char *key) {
  size_t h = 1469598103934665603u; /* FNV-1a */
  for (; *key; key++) h = (h ^ (unsigned char)*key) * 1099511628211u;
  return h;
}

const conv_choice *plan_map_find(const plan_map *map, const char *key) {
  if (map->bucket_count == 0) return NULL;
  for (plan_map_entry *e = map->buckets[hash_key(key) % map->bucket_count]; e; e = e->next)
    if (strcmp(e->key, key) == 0) return &e->choice;
  return NULL;
}

static conv_status plan_map_grow(plan_map *map) {
  size_t count = map->bucket_count ? map->bucket_count * 2 : 64;
  plan_map_entry **buckets = calloc(count, sizeof *buckets);
  if (buckets == NULL) return CONV_OUT_OF_MEMORY;
  for (size_t i = 0; i < map->bucket_count; i++) {
    for (plan_map_entry *e = map->buckets[i], *next; e; e = next) {
      next = e->next;
      size_t b = hash_key(e->key) % count;
      e->next = buckets[b];
      buckets[b] = e;
    }
  }
  free(map->buckets);
  map->buckets = buckets;
  map->bucket_count = count;
  return CONV_OK;
}

conv_status plan_map_put(plan_map *map, const char *key, const conv_choice *choice) {
  conv_choice *existing = (conv_choice *)plan_map_find(map, key);
  if (existing) {
    *existing = *choice;
    return CONV_OK;
  }
  if (map->size + 1 > map->bucket_count * 2 && plan_map_grow(map) != CONV_OK)
    return CONV_OUT_OF_MEMORY;
  plan_map_entry *e = calloc(1, sizeof *e);
  if (e == NULL) return CONV_OUT_OF_MEMORY;
  snprintf(e->key, sizeof e->key, "%s", key);
  e->choice = *choice;
  size_t b = hash_key(key) % map->bucket_count;
  e->next = map->buckets[b];
  map->buckets[b] = e;
  map->size++;
  return CONV_OK;
}

void plan_map_free(plan_map *map) {
  for (size_t i = 0; i < map->bucket_count; i++) {
    for (plan_map_entry *e = map->buckets[i], *next; e; e = next) {
      next = e->next;
      free(e);
    }
  }
  free(map->buckets);
  memset(map, 0, sizeof *map);
}
