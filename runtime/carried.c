/* carried.c -- plans from winners tuned under other library versions
 * (CONV_SOURCE_CARRIED): an update of the driver, of a library a winner
 * does not run on, or of other families keeps the tunings it cannot have
 * changed (cache.h's carry-over rules), instead of re-tuning every shape.
 * Never silently wrong: a carried-over winner runs only after it matched
 * the reference once under this build, and stays marked for re-timing. */
#include <stdio.h>

#include "runtime/context.h"

static unsigned family_libraries(uint32_t family) {
  const conv_algorithm *algo = conv_registry_find(family);
  return algo == NULL ? CONV_LIBRARY_UNKNOWN : algo->libraries;
}

/* The first carried-over winner of the layers (0 the user's cache, then
 * the system caches); a layer SQLite cannot read is passed over. */
static bool find_carried(conv_context *ctx, const conv_cache_key *key, conv_trial *winner,
                         char *then, size_t size, const char **layer_name) {
  for (size_t layer = 0; layer <= ctx->system.count; layer++) {
    conv_cache *cache = layer == 0 ? ctx->cache : ctx->system.caches[layer - 1];
    const char *name = layer == 0 ? "cache" : "system cache";
    bool found = false;
    conv_error why = {CONV_OK, ""};
    if (conv_cache_lookup_carried(cache, key, family_libraries, &ctx->log, name, winner, then, size,
                                  &found, &why) != CONV_OK) {
      conv_log(&ctx->log, CONV_LOG_WARN, "%s: the %s's earlier tunings are passed over (%s)",
               key->problem, name, why.message);
      continue;
    }
    if (found) {
      *layer_name = name;
      return true;
    }
  }
  return false;
}

conv_status plan_carried_choice(conv_context *ctx, const conv_problem *problem,
                                const conv_cache_key *key, const char *instead,
                                conv_choice *choice, bool *found, conv_error *err) {
  if (ctx == NULL || problem == NULL || key == NULL || instead == NULL || choice == NULL ||
      found == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "carry-over: NULL argument");
  *found = false;
  conv_trial winner;
  char then[CONV_CACHE_VERSIONS_MAX];
  const char *layer = "cache";
  if (!find_carried(ctx, key, &winner, then, sizeof then, &layer)) return CONV_OK;

  const conv_choice carried = {winner.algorithm_id, winner.config, winner.time_ms};
  const conv_tune_request req = context_tune_request(ctx, problem, key);
  conv_trial checked;
  conv_error why = {CONV_OK, ""};
  if (conv_validate_choice(&req, &carried, &checked, &why) != CONV_OK) {
    conv_log(&ctx->log, CONV_LOG_WARN,
             "%s: the %s's winner tuned under \"%s\" (%s %s) fails re-validation (%s); %s",
             key->problem, layer, then, winner.algorithm, winner.config_text, why.message, instead);
    return CONV_OK;
  }
  /* Stored as the winner under this build's versions, with the time it
   * was measured at (it has no other yet) and the error it has now. */
  checked.time_ms = winner.time_ms;
  checked.winner = true;
  checked.heuristic_pick = winner.heuristic_pick;
  why = (conv_error){CONV_OK, ""};
  if (conv_cache_store_carried(ctx->cache, key, &checked, &why) != CONV_OK)
    conv_log(&ctx->log, CONV_LOG_WARN,
             "%s: the carried-over winner is not stored (%s); it is used, and re-validated in "
             "the next process",
             key->problem, why.message);
  conv_log(&ctx->log, CONV_LOG_INFO,
           "%s: carried over from the %s's tuning under \"%s\": %s %s (%.4f ms then), "
           "re-validated (err %.2g); pending re-timing (convtune tune --stale)",
           key->problem, layer, then, winner.algorithm, winner.config_text, winner.time_ms,
           checked.rel_error);
  *choice = carried;
  *found = true;
  return CONV_OK;
}
