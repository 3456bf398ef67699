/* live_plans.c -- a context's live plans, by problem (live_plans.h). */
#include <stdint.h>
#include <string.h>

#include "runtime/live_plans.h"

/* Every field of a problem, in one list for its hash and its equality
 * (the struct's padding bytes are the caller's garbage: no memcmp). */
enum { PROBLEM_FIELDS = 22 };
static void problem_fields(const conv_problem *p, int64_t out[PROBLEM_FIELDS]) {
  const int64_t fields[PROBLEM_FIELDS] = {
      p->n,     p->c,        p->h,        p->w,     p->k,     p->r,      p->s,
      p->pad_h, p->pad_w,    p->stride_h, p->stride_w, p->dil_h, p->dil_w, p->groups,
      p->dtype, p->layout,   p->direction, p->math, p->epilogue, p->deterministic, p->op,
      p->filter_layout};
  memcpy(out, fields, sizeof fields);
}

static bool same_problem(const conv_problem *a, const conv_problem *b) {
  int64_t fa[PROBLEM_FIELDS], fb[PROBLEM_FIELDS];
  problem_fields(a, fa);
  problem_fields(b, fb);
  return memcmp(fa, fb, sizeof fa) == 0;
}

static size_t problem_bucket(const conv_problem *p) {
  int64_t fields[PROBLEM_FIELDS];
  problem_fields(p, fields);
  uint64_t h = 1469598103934665603u; /* FNV-1a over the fields */
  for (int i = 0; i < PROBLEM_FIELDS; i++) h = (h ^ (uint64_t)fields[i]) * 1099511628211u;
  return (size_t)(h % LIVE_PLANS_BUCKETS);
}

live_entry *live_acquire(live_plans *table, const conv_problem *problem) {
  uv_mutex_lock(&table->lock);
  live_entry *entry = table->buckets[problem_bucket(problem)];
  while (entry != NULL && !same_problem(entry->problem, problem)) entry = entry->next;
  if (entry != NULL) entry->refs++;
  uv_mutex_unlock(&table->lock);
  return entry;
}

void live_insert(live_plans *table, live_entry *entry, const conv_problem *problem) {
  const size_t b = problem_bucket(problem);
  uv_mutex_lock(&table->lock);
  entry->problem = problem;
  entry->refs = 1;
  entry->next = table->buckets[b];
  table->buckets[b] = entry;
  uv_mutex_unlock(&table->lock);
}

bool live_release(live_plans *table, live_entry *entry) {
  uv_mutex_lock(&table->lock);
  const bool last = --entry->refs == 0;
  if (last) {
    live_entry **link = &table->buckets[problem_bucket(entry->problem)];
    while (*link != entry) link = &(*link)->next;
    *link = entry->next;
  }
  uv_mutex_unlock(&table->lock);
  return last;
}

size_t live_count(live_plans *table) {
  size_t count = 0;
  uv_mutex_lock(&table->lock);
  for (size_t b = 0; b < LIVE_PLANS_BUCKETS; b++)
    for (const live_entry *entry = table->buckets[b]; entry != NULL; entry = entry->next) count++;
  uv_mutex_unlock(&table->lock);
  return count;
}
