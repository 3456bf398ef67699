/* struct_layout.c -- prints the size of every public struct and the offset
 * of each of its fields, as this compiler lays them out, and the values of
 * the enums the binding names (policies, plan sources), for
 * tests/python/check_structs.py to compare with the binding's mirror. */
#include <stddef.h>
#include <stdio.h>

#include "convtune.h"

#define FIELD(type, field) printf(#type " " #field " %zu\n", offsetof(type, field))
#define SIZE(type) printf(#type " sizeof %zu\n", sizeof(type))
#define ENUM(type, name, value) printf(#type " " name " %d\n", (int)(value))

int main(void) {
  SIZE(conv_problem);
  FIELD(conv_problem, struct_size); FIELD(conv_problem, n); FIELD(conv_problem, c);
  FIELD(conv_problem, h); FIELD(conv_problem, w); FIELD(conv_problem, k); FIELD(conv_problem, r);
  FIELD(conv_problem, s); FIELD(conv_problem, pad_h); FIELD(conv_problem, pad_w);
  FIELD(conv_problem, stride_h); FIELD(conv_problem, stride_w); FIELD(conv_problem, dil_h);
  FIELD(conv_problem, dil_w); FIELD(conv_problem, groups); FIELD(conv_problem, dtype);
  FIELD(conv_problem, layout); FIELD(conv_problem, direction); FIELD(conv_problem, math);
  FIELD(conv_problem, epilogue); FIELD(conv_problem, deterministic); FIELD(conv_problem, op);
  FIELD(conv_problem, filter_layout);
  SIZE(conv_context_options);
  FIELD(conv_context_options, struct_size); FIELD(conv_context_options, device);
  FIELD(conv_context_options, cache_path); FIELD(conv_context_options, policy);
  FIELD(conv_context_options, workspace_limit); FIELD(conv_context_options, verbose);
  FIELD(conv_context_options, direct_launches); FIELD(conv_context_options, deterministic);
  FIELD(conv_context_options, log); FIELD(conv_context_options, log_user);
  FIELD(conv_context_options, log_level); FIELD(conv_context_options, system_cache_path);
  FIELD(conv_context_options, tuning_budget_ms); FIELD(conv_context_options, device_alloc);
  FIELD(conv_context_options, device_free); FIELD(conv_context_options, allocator_user);
  FIELD(conv_context_options, retime_stale);
  SIZE(conv_plan_info);
  FIELD(conv_plan_info, algorithm); FIELD(conv_plan_info, config); FIELD(conv_plan_info, time_ms);
  FIELD(conv_plan_info, workspace_bytes); FIELD(conv_plan_info, source);
  FIELD(conv_plan_info, replay); FIELD(conv_plan_info, replay_note);
  FIELD(conv_plan_info, graph_launches); FIELD(conv_plan_info, graph_captures);
  FIELD(conv_plan_info, direct_runs); FIELD(conv_plan_info, direction);
  FIELD(conv_plan_info, deterministic); FIELD(conv_plan_info, dtype);
  SIZE(conv_cache_entry);
  FIELD(conv_cache_entry, struct_size); FIELD(conv_cache_entry, problem);
  FIELD(conv_cache_entry, device); FIELD(conv_cache_entry, versions);
  FIELD(conv_cache_entry, tuned_at); FIELD(conv_cache_entry, algorithm);
  FIELD(conv_cache_entry, algorithm_id); FIELD(conv_cache_entry, config);
  FIELD(conv_cache_entry, config_count); FIELD(conv_cache_entry, config_values);
  FIELD(conv_cache_entry, status); FIELD(conv_cache_entry, reason);
  FIELD(conv_cache_entry, time_ms); FIELD(conv_cache_entry, rel_error);
  FIELD(conv_cache_entry, workspace_bytes); FIELD(conv_cache_entry, heuristic_pick);
  FIELD(conv_cache_entry, winner); FIELD(conv_cache_entry, deterministic);
  SIZE(conv_cache_pending_entry);
  FIELD(conv_cache_pending_entry, struct_size); FIELD(conv_cache_pending_entry, problem);
  FIELD(conv_cache_pending_entry, device); FIELD(conv_cache_pending_entry, versions);
  FIELD(conv_cache_pending_entry, reason); FIELD(conv_cache_pending_entry, recorded_at);
  ENUM(conv_policy, "exhaustive", CONV_POLICY_EXHAUSTIVE);
  ENUM(conv_policy, "fast", CONV_POLICY_FAST);
  ENUM(conv_policy, "cache_only", CONV_POLICY_CACHE_ONLY);
  ENUM(conv_policy, "record", CONV_POLICY_RECORD);
  ENUM(conv_policy, "predict", CONV_POLICY_PREDICT);
  ENUM(conv_plan_source, "memory", CONV_SOURCE_MEMORY);
  ENUM(conv_plan_source, "cache", CONV_SOURCE_CACHE);
  ENUM(conv_plan_source, "tuned", CONV_SOURCE_TUNED);
  ENUM(conv_plan_source, "system", CONV_SOURCE_SYSTEM_CACHE);
  ENUM(conv_plan_source, "heuristic", CONV_SOURCE_HEURISTIC);
  ENUM(conv_plan_source, "carried", CONV_SOURCE_CARRIED);
  return 0;
}
