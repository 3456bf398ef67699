/* inspect.c -- list and show: the cache read without a GPU or a context. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/cli/cli.h"
#include "tools/json.h"

/* Opens an existing cache read-only: no GPU, no context (cli.h). */
int open_cache_read_only(const char *path, conv_cache_reader **reader) {
  struct stat st;
  if (strcmp(path, ":memory:") != 0 && stat(path, &st) != 0) {
    if (errno == ENOENT) {
      say("no cache at %s (nothing tuned yet? run 'convtune tune')",
              path);
    } else {
      say("cannot open the cache %s: %s", path, strerror(errno));
    }
    return EXIT_CACHE;
  }
  char message[512];
  if (conv_cache_reader_open(path, reader, message, sizeof message) != CONV_OK) {
    say("cannot open the cache %s: %s", path, message);
    return EXIT_CACHE;
  }
  return EXIT_OK_;
}

int cache_read_outcome(const char *path, conv_status st, bool out_of_memory, const char *message) {
  if (out_of_memory) {
    say("out of memory");
    return EXIT_FAILED;
  }
  if (st != CONV_OK) {
    say("cannot read the cache %s: %s", path, message);
    return EXIT_CACHE;
  }
  return EXIT_OK_;
}

void cli_trial_copy(const conv_cache_entry *e, cli_trial *t) {
  memset(t, 0, sizeof *t);
  t->algorithm_id = e->algorithm_id;
  snprintf(t->algorithm, sizeof t->algorithm, "%s", e->algorithm);
  snprintf(t->config_text, sizeof t->config_text, "%s", e->config);
  t->config_count = e->config_count < 0 ? 0
                    : e->config_count > CONV_CACHE_CONFIG_MAX ? CONV_CACHE_CONFIG_MAX
                                                              : e->config_count;
  memcpy(t->config_values, e->config_values, (size_t)t->config_count * sizeof t->config_values[0]);
  t->status = e->status;
  snprintf(t->reason, sizeof t->reason, "%s", e->reason);
  t->time_ms = e->time_ms, t->rel_error = e->rel_error;
  t->workspace_bytes = e->workspace_bytes;
  t->heuristic_pick = e->heuristic_pick != 0, t->winner = e->winner != 0;
  t->deterministic = e->deterministic;
}

/* ================================================================ cache rows */

/* A cache row copied out of the iteration callback. */
typedef struct record {
  char *problem, *device, *versions, *tuned_at;
  cli_trial trial;
  size_t order;
} record;

typedef struct record_list {
  record *items;
  size_t count, cap;
  bool out_of_memory;
} record_list;

static void record_list_free(record_list *l) {
  for (size_t i = 0; i < l->count; i++) {
    free(l->items[i].problem);
    free(l->items[i].device);
    free(l->items[i].versions);
    free(l->items[i].tuned_at);
  }
  free(l->items);
  memset(l, 0, sizeof *l);
}

static int collect_row(const conv_cache_entry *row, void *user) {
  record_list *l = user;
  if (l->count == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 16;
    record *grown = realloc(l->items, cap * sizeof *grown);
    if (grown == NULL) goto oom;
    l->items = grown;
    l->cap = cap;
  }
  record *r = &l->items[l->count];
  r->problem = copy_string(row->problem);
  r->device = copy_string(row->device);
  r->versions = copy_string(row->versions);
  r->tuned_at = copy_string(row->tuned_at);
  cli_trial_copy(row, &r->trial);
  r->order = l->count;
  if (!r->problem || !r->device || !r->versions || !r->tuned_at) {
    free(r->problem);
    free(r->device);
    free(r->versions);
    free(r->tuned_at);
    goto oom;
  }
  l->count++;
  return 0;
oom:
  l->out_of_memory = true;
  return 1;
}

static void write_config_values(FILE *out, const cli_trial *t) {
  fputc('[', out);
  for (int i = 0; i < t->config_count; i++)
    fprintf(out, "%s%lld", i ? ", " : "", (long long)t->config_values[i]);
  fputc(']', out);
}

/* One record as a JSON object; `full` adds the trial fields of `show`. */
static void write_record_json(FILE *out, const record *r, bool full) {
  const cli_trial *t = &r->trial;
  fputs("{\"problem\": ", out);
  json_write_string(out, r->problem);
  fputs(", \"device\": ", out);
  json_write_string(out, r->device);
  fputs(", \"versions\": ", out);
  json_write_string(out, r->versions);
  fputs(", \"tuned_at\": ", out);
  json_write_string(out, r->tuned_at);
  fprintf(out, ", \"algorithm_id\": %u, \"algorithm\": ", (unsigned)t->algorithm_id);
  json_write_string(out, t->algorithm);
  fputs(", \"config\": ", out);
  json_write_string(out, t->config_text);
  fputs(", \"config_values\": ", out);
  write_config_values(out, t);
  fputs(", \"time_ms\": ", out);
  json_write_number(out, t->time_ms >= 0 ? t->time_ms : NAN);
  fprintf(out, ", \"workspace_bytes\": %zu", t->workspace_bytes);
  if (full) {
    fputs(", \"status\": ", out);
    json_write_string(out, status_name(t->status));
    fputs(", \"reason\": ", out);
    json_write_string(out, t->reason);
    fputs(", \"rel_error\": ", out);
    json_write_number(out, t->rel_error >= 0 ? t->rel_error : NAN);
    fprintf(out, ", \"heuristic_pick\": %s, \"winner\": %s", t->heuristic_pick ? "true" : "false",
            t->winner ? "true" : "false");
    fprintf(out, ", \"deterministic\": %s",
            t->deterministic < 0 ? "null" : t->deterministic ? "true" : "false");
  }
  fputc('}', out);
}

static void write_records_json(FILE *out, const record_list *l, bool full) {
  fputc('[', out);
  for (size_t i = 0; i < l->count; i++) {
    fputs(i ? ",\n " : "\n ", out);
    write_record_json(out, &l->items[i], full);
  }
  fputs(l->count ? "\n]\n" : "]\n", out);
}

/* ================================================================ list */

static int print_winners_table(const record_list *l) {
  static const char *const header[] = {"problem", "algorithm", "config", "time ms",
                                        "device",  "versions",  "tuned at"};
  /* To fit a terminal: the GPU's name for its fingerprint, then without
   * the time of tuning, the versions, the GPU, the config. */
  static const int drop[] = {6, 5, 4, 2};
  text_table t;
  table_init(&t, 7, header, 1u << 3);
  table_fit(&t, 1u << 4, drop, 4);
  for (size_t i = 0; i < l->count; i++) {
    const record *r = &l->items[i];
    char ms[32];
    const char *cells[] = {r->problem, r->trial.algorithm, r->trial.config_text,
                           format_ms(r->trial.time_ms, ms, sizeof ms), r->device, r->versions,
                           r->tuned_at};
    if (!table_add(&t, cells, t.ncols)) return table_finish(&t, false);
  }
  return table_finish(&t, true);
}

/* Reads the winners (key NULL) or the trials of one problem key from the
 * cache at `path`, read-only, into *l.  Returns EXIT_OK_ or the exit code
 * after saying why on stderr. */
static int read_rows_from(const char *path, const char *key, record_list *l) {
  conv_cache_reader *reader = NULL;
  int rc = open_cache_read_only(path, &reader);
  if (rc != EXIT_OK_) return rc;
  char message[512];
  conv_status st =
      key ? conv_cache_reader_trials(reader, key, collect_row, l, message, sizeof message)
          : conv_cache_reader_winners(reader, collect_row, l, message, sizeof message);
  conv_cache_reader_close(reader);
  return cache_read_outcome(path, st, l->out_of_memory, message);
}

/* read_rows_from the cache --cache names (or the default one). */
static int read_rows(const cli_args *a, const char *key, record_list *l, char *path, size_t size) {
  int rc = cache_path(a, false, path, size);
  return rc == EXIT_OK_ ? read_rows_from(path, key, l) : rc;
}

/* ================================================================ system caches */

static int note_path(const char *path, int named, void *user) {
  (void)named;
  cli_paths *p = user;
  char **grown = realloc(p->items, (p->count + 1) * sizeof *grown);
  if (grown != NULL) p->items = grown;
  if (grown == NULL || (p->items[p->count] = copy_string(path)) == NULL) {
    p->out_of_memory = true;
    return 1;
  }
  p->count++;
  return 0;
}

int system_cache_paths(const char *option, cli_paths *out) {
  memset(out, 0, sizeof *out);
  char message[1024];
  conv_status st = conv_system_cache_files(option, note_path, out, message, sizeof message);
  if (out->out_of_memory) {
    say("out of memory");
    return EXIT_FAILED;
  }
  if (st != CONV_OK) {
    say("%s", message);
    return EXIT_CACHE;
  }
  return EXIT_OK_;
}

void cli_paths_free(cli_paths *p) {
  for (size_t i = 0; i < p->count; i++) free(p->items[i]);
  free(p->items);
  memset(p, 0, sizeof *p);
}

void print_system_caches(FILE *out) {
  cli_paths p;
  char message[1024], line[CLI_PATH_MAX];
  memset(&p, 0, sizeof p);
  conv_status st = conv_system_cache_files(NULL, note_path, &p, message, sizeof message);
  if (st != CONV_OK)
    fprintf(out, "system caches: %s\n", one_line(message, line, sizeof line));
  else if (p.count == 0)
    fprintf(out, "system caches: none found\n");
  else
    fprintf(out, "system caches (read-only, in lookup order):\n");
  for (size_t i = 0; i < p.count; i++) fprintf(out, "  %s\n", one_line(p.items[i], line, sizeof line));
  cli_paths_free(&p);
}

/* list --system-cache PATH: the winners of that cache file, or of each
 * cache file of that directory, in order (none: "no tuned shapes"). */
static int read_system_winners(const cli_args *a, record_list *l) {
  if (a->system_cache_path[0] == '\0') return usage_error("--system-cache needs a path here");
  cli_paths p;
  int rc = system_cache_paths(a->system_cache_path, &p);
  for (size_t i = 0; i < p.count && rc == EXIT_OK_; i++) rc = read_rows_from(p.items[i], NULL, l);
  cli_paths_free(&p);
  return rc;
}

int cmd_list(const cli_args *a) {
  char path[CLI_PATH_MAX];
  record_list l = {NULL, 0, 0, false};
  int rc = EXIT_OK_;
  if (a->system_cache_path != NULL) {
    snprintf(path, sizeof path, "%s", a->system_cache_path);
    rc = read_system_winners(a, &l);
  } else {
    rc = read_rows(a, NULL, &l, path, sizeof path);
  }
  if (rc == EXIT_OK_) {
    if (a->json)
      write_records_json(stdout, &l, false);
    else if (l.count == 0)
      say("no tuned shapes in %s yet", path);
    else
      rc = print_winners_table(&l);
  }
  record_list_free(&l);
  return rc;
}

/* ================================================================ show */

static int compare_group(const void *pa, const void *pb) {
  const record *a = pa, *b = pb;
  int c = strcmp(a->device, b->device);
  if (c == 0) c = strcmp(a->versions, b->versions);
  if (c == 0) c = a->order < b->order ? -1 : a->order > b->order;
  return c;
}

static bool add_trial_row(text_table *t, const record *r) {
  const cli_trial *tr = &r->trial;
  char marks[4] = "", ms[32], err[32], ws[32];
  if (tr->winner) strcat(marks, "*");
  if (tr->heuristic_pick) strcat(marks, "h");
  if (tr->deterministic == 0) strcat(marks, "n");
  if (tr->rel_error >= 0) snprintf(err, sizeof err, "%.1e", tr->rel_error);
  const char *cells[] = {marks,
                         tr->algorithm,
                         tr->config_text,
                         status_name(tr->status),
                         format_ms(tr->time_ms, ms, sizeof ms),
                         tr->rel_error >= 0 ? err : "-",
                         format_bytes(tr->workspace_bytes, ws, sizeof ws), tr->reason};
  return table_add(t, cells, t->ncols);
}

/* Prints one device + versions group starting at items[*i]; advances *i. */
static int print_trial_group(const record_list *l, size_t *i) {
  static const char *const header[] = {"", "algorithm", "config", "status", "time ms",
                                       "rel error", "workspace", "reason"};
  const record *first = &l->items[*i];
  bool stale = strcmp(first->versions, conv_library_versions()) != 0;
  char device[1024], versions[1024];
  printf("\ndevice:   %s\nversions: %s%s\n", one_line(first->device, device, sizeof device),
         one_line(first->versions, versions, sizeof versions),
         stale ? "  (not the versions this process runs with)" : "");
  static const int drop[] = {6, 5}; /* workspace, rel error; the reason, last, may run on */
  text_table t;
  table_init(&t, 8, header, (1u << 4) | (1u << 5) | (1u << 6));
  table_fit(&t, 0, drop, 2);
  for (; *i < l->count && strcmp(first->device, l->items[*i].device) == 0 &&
         strcmp(first->versions, l->items[*i].versions) == 0;
       (*i)++) {
    if (!add_trial_row(&t, &l->items[*i])) return table_finish(&t, false);
  }
  return table_finish(&t, true);
}

static int print_trials(const char *key, record_list *l) {
  qsort(l->items, l->count, sizeof *l->items, compare_group);
  printf("problem: %s\n", key);
  for (size_t i = 0; i < l->count;) {
    int rc = print_trial_group(l, &i);
    if (rc != EXIT_OK_) return rc;
  }
  printf("\n* winner   h cuDNN's own choice (heuristic #1), the untuned default\n"
         "n not deterministic (results may differ run to run)\n");
  return EXIT_OK_;
}

/* The shape of `show`: a suite name (with --suite) or a spec. */
static int show_problem(const cli_args *a, conv_problem *p) {
  const char *shape = a->inputs[0];
  if (a->suite_path != NULL) {
    suite s;
    suite_init(&s);
    char message[1024];
    if (!suite_load(a->suite_path, &s, message, sizeof message)) {
      suite_free(&s);
      return usage_error("%s", message);
    }
    bool found = false;
    for (size_t i = 0; i < s.count && !found; i++) {
      if (strcmp(s.shapes[i].name, shape) == 0) {
        *p = s.shapes[i].problem;
        found = true;
      }
    }
    suite_free(&s);
    if (found) {
      apply_overrides(a, p);
      return EXIT_OK_;
    }
    if (strchr(shape, '=') == NULL) {
      return usage_error("no shape named '%s' in %s", shape, a->suite_path);
    }
  }
  int rc = parse_spec(shape, p);
  if (rc == EXIT_OK_) apply_overrides(a, p);
  return rc;
}

int cmd_show(const cli_args *a) {
  conv_problem p;
  int rc = show_problem(a, &p);
  if (rc != EXIT_OK_) return rc;
  char key[CONV_PROBLEM_KEY_MAX];
  conv_status st = conv_problem_key(&p, key, sizeof key);
  if (st != CONV_OK) {
    return usage_error("cannot make the key of '%s': %s", a->inputs[0], conv_status_string(st));
  }
  char path[CLI_PATH_MAX];
  record_list l = {NULL, 0, 0, false};
  rc = read_rows(a, key, &l, path, sizeof path);
  if (rc == EXIT_OK_) {
    if (a->json) write_records_json(stdout, &l, true);
    if (l.count == 0) {
      say("no trials for '%s' in %s", key, path);
      rc = EXIT_FAILED;
    } else if (!a->json) {
      rc = print_trials(key, &l);
    }
  }
  record_list_free(&l);
  return rc;
}
