/*
 * convtune.c -- the command-line tool: tune shapes, list the cache, show the
 * trials of one shape.  `convtune --help` describes it; exit codes are the
 * cli_exit values below.
 *
 * `tune` runs the shapes in a worker thread while the main thread runs a
 * libuv loop that watches SIGINT: the first Ctrl-C asks the context to stop
 * after the candidate being timed (what was measured stays in the cache) and
 * restores the default action, so a second Ctrl-C ends the process at once.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <uv.h>

#include "cache/cache.h"
#include "convtune.h"
#include "runtime/internal.h"
#include "tools/json.h"
#include "tools/text.h"

typedef enum cli_exit {
  EXIT_OK_ = 0,
  EXIT_FAILED = 1,      /* a shape failed (tune) or nothing was found (show) */
  EXIT_USAGE = 2,       /* bad command line, shape spec or suite file        */
  EXIT_NO_GPU = 3,      /* no usable CUDA GPU                                */
  EXIT_CACHE = 4,       /* the cache is missing, unreadable or bad           */
  EXIT_INTERRUPTED = 130
} cli_exit;

#define CLI_PATH_MAX 4096
#define CLI_MAX_INPUT_BYTES ((size_t)64 << 20)

/* ================================================================ text helpers */

static void print_usage(FILE *out) {
  fputs(
      "usage: convtune COMMAND [OPTIONS]\n"
      "\n"
      "Finds the fastest correct way to run each 2-D convolution on this GPU and\n"
      "keeps every timing in a cache (SQLite).\n"
      "\n"
      "commands:\n"
      "  tune FILE|SHAPE...  tune each shape (suite files, shape specs) and print\n"
      "                      the winners: algorithm, time, cuDNN's default, speedup\n"
      "  list                list every winner in the cache (needs no GPU)\n"
      "  show SHAPE          list every trial stored for one shape (needs no GPU)\n"
      "  help                print this help\n"
      "\n"
      "options:\n"
      "  --cache PATH        cache file; default $CONVTUNE_CACHE, else\n"
      "                      $XDG_CACHE_HOME/convtune/cache.db, else\n"
      "                      ~/.cache/convtune/cache.db\n"
      "  --json              print a JSON array of rows instead of a table\n"
      "  --math strict|tf32  (tune, show) math mode of every shape\n"
      "  --epilogue none|bias|bias_relu\n"
      "                      (tune, show) epilogue of every shape\n"
      "  --policy exhaustive|fast\n"
      "                      (tune) time every candidate, or a few best guesses\n"
      "  --verbose           (tune) report each candidate on stderr\n"
      "  --suite FILE        (show) SHAPE may be the name of a shape in FILE\n"
      "\n"
      "SHAPE is one argument of NAME=VALUE fields separated by spaces or commas:\n"
      "  n c h w k r s, pad stride dil (both axes) or pad_h pad_w stride_h stride_w\n"
      "  dil_h dil_w, groups, math=strict|tf32, epilogue=none|bias|bias_relu, e.g.\n"
      "  convtune tune \"n=32 c=64 h=56 w=56 k=64 r=3 s=3 pad=1\"\n"
      "A suite FILE is {\"shapes\": [ROW, ...]} or [ROW, ...], each ROW an object\n"
      "with name, N, C, H, W, K, R, S and optional stride, pad, dil, groups; rows\n"
      "whose \"op\" is not \"conv\" are skipped, other keys are ignored.\n"
      "\n"
      "exit status:\n"
      "  0    success\n"
      "  1    a shape failed (tune), or nothing found (show)\n"
      "  2    usage error: command, option, shape spec or suite file\n"
      "  3    no usable CUDA GPU\n"
      "  4    cache error: missing, unreadable or invalid cache file\n"
      "  130  interrupted (Ctrl-C); trials measured so far stay in the cache\n",
      out);
}

/* msg as one printable line (text_printable): newlines and tabs become
 * spaces, control characters and bytes that are not UTF-8 "\xNN", and
 * trailing spaces go.  Everything the CLI prints that it did not write
 * itself (cache strings, suite names, paths, specs, library messages)
 * passes through here, so that none of it can drive the terminal. */
static const char *one_line(const char *msg, char *buf, size_t size) {
  text_printable(msg, buf, size);
  size_t n = strlen(buf);
  while (n > 0 && buf[n - 1] == ' ') n--;
  buf[n] = '\0';
  return buf;
}

/* "convtune: MESSAGE" on stderr, MESSAGE made one printable line. */
#if defined(__GNUC__)
__attribute__((format(printf, 1, 0)))
#endif
static void say_v(const char *fmt, va_list ap) {
  char message[2048], line[4096];
  vsnprintf(message, sizeof message, fmt, ap);
  fprintf(stderr, "convtune: %s\n", one_line(message, line, sizeof line));
}

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static void say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say_v(fmt, ap);
  va_end(ap);
}

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say_v(fmt, ap);
  va_end(ap);
  fputs("Try 'convtune --help' for usage.\n", stderr);
  return EXIT_USAGE;
}

/* The enum name of a status without the CONV_ prefix, e.g. "BAD_GROUPS". */
static const char *status_name(conv_status status) {
  static const char *const names[] = {
#define CLI_STATUS_NAME_(name, msg) #name,
      CONV_STATUS_MAP(CLI_STATUS_NAME_)
#undef CLI_STATUS_NAME_
  };
  if ((int)status < 0 || (int)status >= (int)CONV_STATUS_COUNT_) return "UNKNOWN";
  return names[status];
}

static const char *source_name(conv_plan_source source) {
  switch (source) {
  case CONV_SOURCE_MEMORY: return "memory";
  case CONV_SOURCE_CACHE: return "cache";
  case CONV_SOURCE_TUNED: return "tuned";
  }
  return "unknown";
}

static char *copy_string(const char *s) {
  if (s == NULL) s = "";
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d != NULL) memcpy(d, s, n);
  return d;
}

/* Writes a time in ms to buf, "-" when unknown (negative or not finite). */
static const char *format_ms(double ms, char *buf, size_t size) {
  if (!(ms >= 0) || !isfinite(ms)) {
    snprintf(buf, size, "-");
  } else {
    snprintf(buf, size, "%.4f", ms);
  }
  return buf;
}

static const char *format_bytes(size_t bytes, char *buf, size_t size) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) {
    snprintf(buf, size, "%zu B", bytes);
    return buf;
  }
  double v = (double)bytes / 1024.0;
  int u = 0;
  while (v >= 1024.0 && u < 3) {
    v /= 1024.0;
    u++;
  }
  snprintf(buf, size, "%.1f %s", v, units[u]);
  return buf;
}

/* ================================================================ tables */

/* Rows of text cells printed in aligned columns.  A row may end in a
 * spanning cell: its text runs to the end of the line and does not widen
 * the column (used for a failed shape's error). */
#define TABLE_MAX_COLS 10

typedef struct text_table {
  int ncols;
  const char *header[TABLE_MAX_COLS];
  unsigned right_aligned; /* bit i: column i */
  char **cells;           /* nrows * ncols, owned */
  int *span;              /* per row: ncols, or the spanning column */
  size_t nrows, cap;
} text_table;

static void table_init(text_table *t, int ncols, const char *const *header, unsigned right) {
  memset(t, 0, sizeof *t);
  t->ncols = ncols;
  for (int i = 0; i < ncols; i++) t->header[i] = header[i];
  t->right_aligned = right;
}

static void table_free(text_table *t) {
  for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++) free(t->cells[i]);
  free(t->cells);
  free(t->span);
  t->cells = NULL;
  t->span = NULL;
  t->nrows = t->cap = 0;
}

static bool table_grow(text_table *t) {
  size_t cap = t->cap ? t->cap * 2 : 16;
  char **cells = realloc(t->cells, cap * (size_t)t->ncols * sizeof *cells);
  if (cells == NULL) return false;
  t->cells = cells;
  int *span = realloc(t->span, cap * sizeof *span);
  if (span == NULL) return false;
  t->span = span;
  t->cap = cap;
  return true;
}

/* A malloc'd one_line() copy of s (NULL: ""), or NULL when memory runs out. */
static char *copy_line(const char *s) {
  size_t size = 4 * strlen(s ? s : "") + 1; /* every byte may become "\xNN" */
  char *d = malloc(size);
  return d != NULL ? (char *)one_line(s, d, size) : NULL;
}

/* Appends a row of ncols cells (NULL: empty), each made one printable
 * line; cells after `span` are ignored. */
static bool table_add(text_table *t, const char *const *cells, int span) {
  if (t->nrows == t->cap && !table_grow(t)) return false;
  char **row = t->cells + t->nrows * (size_t)t->ncols;
  for (int i = 0; i < t->ncols; i++) {
    row[i] = copy_line(i <= span ? cells[i] : NULL);
    if (row[i] == NULL) {
      for (int j = 0; j < i; j++) free(row[j]);
      return false;
    }
  }
  t->span[t->nrows++] = span;
  return true;
}

static void table_widths(const text_table *t, size_t *width) {
  for (int c = 0; c < t->ncols; c++) width[c] = strlen(t->header[c]);
  for (size_t r = 0; r < t->nrows; r++) {
    for (int c = 0; c < t->ncols && c < t->span[r]; c++) {
      size_t n = strlen(t->cells[r * (size_t)t->ncols + (size_t)c]);
      if (n > width[c]) width[c] = n;
    }
  }
}

static void table_print_row(const text_table *t, FILE *out, const size_t *width,
                            const char *const *cells, int span) {
  int last = span < t->ncols ? span : t->ncols - 1;
  while (last > 0 && cells[last][0] == '\0') last--; /* no trailing blanks */
  for (int c = 0; c <= last; c++) {
    if (c > 0) fputs("  ", out);
    bool right = (t->right_aligned & (1u << c)) && c != span;
    if (c == last && !right) {
      fputs(cells[c], out);
    } else {
      fprintf(out, right ? "%*s" : "%-*s", (int)width[c], cells[c]);
    }
  }
  fputc('\n', out);
}

static void table_print(const text_table *t, FILE *out) {
  size_t width[TABLE_MAX_COLS];
  table_widths(t, width);
  table_print_row(t, out, width, t->header, t->ncols);
  for (int c = 0; c < t->ncols; c++) {
    if (c > 0) fputs("  ", out);
    for (size_t i = 0; i < width[c]; i++) fputc('-', out);
  }
  fputc('\n', out);
  for (size_t r = 0; r < t->nrows; r++) {
    table_print_row(t, out, width, (const char *const *)(t->cells + r * (size_t)t->ncols),
                    t->span[r]);
  }
}

/* ================================================================ arguments */

enum { CMD_TUNE = 1u, CMD_LIST = 2u, CMD_SHOW = 4u, CMD_ALL = 7u };

typedef struct cli_args {
  unsigned command; /* CMD_*, 0 for help */
  const char *command_name;
  bool help, json, verbose;
  const char *cache_path; /* NULL: the default */
  const char *suite_path; /* show --suite */
  bool have_math, have_epilogue;
  conv_math math;
  conv_epilogue epilogue;
  conv_policy policy;
  const char **inputs; /* positional arguments, pointing into argv */
  size_t input_count;
} cli_args;

typedef struct option_spec {
  const char *name;
  bool takes_value;
  unsigned commands;
} option_spec;

static const option_spec *find_option(const char *name, size_t len) {
  static const option_spec options[] = {
      {"--cache", true, CMD_ALL},         {"--json", false, CMD_ALL},
      {"--math", true, CMD_TUNE | CMD_SHOW}, {"--epilogue", true, CMD_TUNE | CMD_SHOW},
      {"--policy", true, CMD_TUNE},       {"--verbose", false, CMD_TUNE},
      {"--suite", true, CMD_SHOW},        {"--help", false, CMD_ALL},
      {"-h", false, CMD_ALL},
  };
  for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
    if (strlen(options[i].name) == len && strncmp(options[i].name, name, len) == 0) {
      return &options[i];
    }
  }
  return NULL;
}

/* Index of value in the NULL-terminated names, in any case (as shape
 * specs take them), or -1. */
static int lookup_name(const char *value, const char *const *names) {
  for (int i = 0; names[i] != NULL; i++) {
    if (strcasecmp(value, names[i]) == 0) return i;
  }
  return -1;
}

static int apply_option(cli_args *a, const option_spec *o, const char *value) {
  static const char *const maths[] = {"strict", "tf32", NULL};
  static const char *const epilogues[] = {"none", "bias", "bias_relu", NULL};
  static const char *const policies[] = {"exhaustive", "fast", NULL};
  int i;
  if (strcmp(o->name, "--cache") == 0) {
    if (value[0] == '\0') return usage_error("--cache needs a non-empty path");
    a->cache_path = value;
  } else if (strcmp(o->name, "--suite") == 0) {
    a->suite_path = value;
  } else if (strcmp(o->name, "--json") == 0) {
    a->json = true;
  } else if (strcmp(o->name, "--verbose") == 0) {
    a->verbose = true;
  } else if (strcmp(o->name, "--help") == 0 || strcmp(o->name, "-h") == 0) {
    a->help = true;
  } else if (strcmp(o->name, "--math") == 0) {
    if ((i = lookup_name(value, maths)) < 0) {
      return usage_error("bad --math '%s' (expected strict or tf32)", value);
    }
    a->have_math = true;
    a->math = i == 1 ? CONV_MATH_TF32 : CONV_MATH_STRICT;
  } else if (strcmp(o->name, "--epilogue") == 0) {
    if ((i = lookup_name(value, epilogues)) < 0) {
      return usage_error("bad --epilogue '%s' (expected none, bias or bias_relu)", value);
    }
    a->have_epilogue = true;
    a->epilogue = i == 2 ? CONV_EPILOGUE_BIAS_RELU : i == 1 ? CONV_EPILOGUE_BIAS
                                                            : CONV_EPILOGUE_NONE;
  } else if (strcmp(o->name, "--policy") == 0) {
    if ((i = lookup_name(value, policies)) < 0) {
      return usage_error("bad --policy '%s' (expected exhaustive or fast)", value);
    }
    a->policy = i == 1 ? CONV_POLICY_FAST : CONV_POLICY_EXHAUSTIVE;
  }
  return EXIT_OK_;
}

/* One option at argv[*i] ("--name", "--name=value" or "--name value"). */
static int parse_option(cli_args *a, int argc, char **argv, int *i) {
  const char *arg = argv[*i];
  const char *eq = strchr(arg, '=');
  size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
  const option_spec *o = find_option(arg, name_len);
  if (o == NULL) return usage_error("unknown option '%.*s'", (int)name_len, arg);
  if (!(o->commands & a->command)) {
    return usage_error("option '%s' does not apply to '%s'", o->name, a->command_name);
  }
  const char *value = NULL;
  if (o->takes_value) {
    if (eq != NULL) {
      value = eq + 1;
    } else if (*i + 1 < argc) {
      value = argv[++*i];
    } else {
      return usage_error("option '%s' needs a value", o->name);
    }
  } else if (eq != NULL) {
    return usage_error("option '%s' takes no value", o->name);
  }
  return apply_option(a, o, value);
}

static int parse_command(cli_args *a, const char *name) {
  static const struct {
    const char *name;
    unsigned command;
  } commands[] = {{"tune", CMD_TUNE}, {"list", CMD_LIST}, {"show", CMD_SHOW}};
  if (strcmp(name, "help") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
    a->help = true;
    return EXIT_OK_;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    if (strcmp(name, commands[i].name) == 0) {
      a->command = commands[i].command;
      a->command_name = commands[i].name;
      return EXIT_OK_;
    }
  }
  if (name[0] == '-') return usage_error("expected a command before '%s'", name);
  return usage_error("unknown command '%s'", name);
}

static int check_input_count(const cli_args *a) {
  if (a->command == CMD_TUNE && a->input_count == 0) {
    return usage_error("tune needs at least one suite file or shape spec");
  }
  if (a->command == CMD_LIST && a->input_count > 0) {
    return usage_error("list takes no arguments (got '%s')", a->inputs[0]);
  }
  if (a->command == CMD_SHOW && a->input_count != 1) {
    return usage_error("show needs exactly one shape (got %zu arguments)", a->input_count);
  }
  return EXIT_OK_;
}

static int parse_args(int argc, char **argv, cli_args *a) {
  memset(a, 0, sizeof *a);
  a->policy = CONV_POLICY_EXHAUSTIVE;
  if (argc < 2) return usage_error("missing command (tune, list, show or help)");
  int rc = parse_command(a, argv[1]);
  if (rc != EXIT_OK_ || a->help) return rc;
  a->inputs = calloc((size_t)argc, sizeof *a->inputs);
  if (a->inputs == NULL) {
    say("out of memory");
    return EXIT_FAILED;
  }
  bool options_done = false;
  for (int i = 2; i < argc; i++) {
    const char *arg = argv[i];
    if (!options_done && strcmp(arg, "--") == 0) {
      options_done = true;
    } else if (!options_done && arg[0] == '-' && arg[1] != '\0') {
      if ((rc = parse_option(a, argc, argv, &i)) != EXIT_OK_) return rc;
    } else {
      a->inputs[a->input_count++] = arg;
    }
  }
  return a->help ? EXIT_OK_ : check_input_count(a);
}

static void cli_args_free(cli_args *a) {
  free(a->inputs);
  a->inputs = NULL;
}

/* ================================================================ inputs */

static void apply_overrides(const cli_args *a, conv_problem *p) {
  if (a->have_math) p->math = a->math;
  if (a->have_epilogue) p->epilogue = a->epilogue;
}

static int parse_spec(const char *spec, conv_problem *p) {
  char message[512];
  message[0] = '\0';
  conv_status st = conv_problem_parse(spec, p, message, sizeof message);
  if (st != CONV_OK) {
    return usage_error("bad shape spec '%s': %s", spec,
                       message[0] ? message : conv_status_string(st));
  }
  return EXIT_OK_;
}

/* A tune argument: an existing file is a suite, else it must be a spec. */
static int load_input(const char *arg, suite *shapes) {
  struct stat st;
  if (stat(arg, &st) == 0) {
    char message[1024];
    if (!suite_load(arg, shapes, message, sizeof message)) return usage_error("%s", message);
    return EXIT_OK_;
  }
  int saved = errno;
  if (strchr(arg, '=') == NULL) {
    return usage_error("cannot read '%s': %s (expected a suite file or a shape spec)", arg,
                       strerror(saved));
  }
  conv_problem p;
  int rc = parse_spec(arg, &p);
  if (rc != EXIT_OK_) return rc;
  if (!suite_add(shapes, arg, &p)) {
    say("out of memory");
    return EXIT_FAILED;
  }
  return EXIT_OK_;
}

static int load_inputs(const cli_args *a, suite *shapes) {
  for (size_t i = 0; i < a->input_count; i++) {
    int rc = load_input(a->inputs[i], shapes);
    if (rc != EXIT_OK_) return rc;
  }
  for (size_t i = 0; i < shapes->count; i++) apply_overrides(a, &shapes->shapes[i].problem);
  return EXIT_OK_;
}

/* --cache, else the default path (creating its directories for tune). */
static int cache_path(const cli_args *a, bool create_dirs, char *path, size_t size) {
  if (a->cache_path != NULL) {
    if (strlen(a->cache_path) >= size) {
      say("cache path too long: %s", a->cache_path);
      return EXIT_CACHE;
    }
    memcpy(path, a->cache_path, strlen(a->cache_path) + 1);
    return EXIT_OK_;
  }
  conv_error err = {CONV_OK, ""};
  if (conv_default_cache_path(path, size, create_dirs, &err) != CONV_OK) {
    say("no default cache path: %s", err.message);
    return EXIT_CACHE;
  }
  return EXIT_OK_;
}

/* Opens an existing cache read-only (list, show): no GPU, no context. */
static int open_cache_read_only(const char *path, conv_cache **cache) {
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
  conv_error err = {CONV_OK, ""};
  if (conv_cache_open(path, true, cache, &err) != CONV_OK) {
    say("cannot open the cache %s: %s", path, err.message);
    return EXIT_CACHE;
  }
  return EXIT_OK_;
}

/* ================================================================ cache rows */

/* A cache row copied out of the iteration callback. */
typedef struct record {
  char *problem, *device, *versions, *tuned_at;
  conv_trial trial;
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

static int collect_row(const conv_cache_row *row, void *user) {
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
  r->trial = *row->trial;
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

static void write_config_values(FILE *out, const conv_config *config) {
  fputc('[', out);
  int n = config->count < 0 ? 0
          : config->count > CONV_CONFIG_MAX_VALUES ? CONV_CONFIG_MAX_VALUES
                                                   : config->count;
  for (int i = 0; i < n; i++) fprintf(out, "%s%lld", i ? ", " : "", (long long)config->values[i]);
  fputc(']', out);
}

/* One record as a JSON object; `full` adds the trial fields of `show`. */
static void write_record_json(FILE *out, const record *r, bool full) {
  const conv_trial *t = &r->trial;
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
  write_config_values(out, &t->config);
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
  text_table t;
  table_init(&t, 7, header, 1u << 3);
  for (size_t i = 0; i < l->count; i++) {
    const record *r = &l->items[i];
    char ms[32];
    const char *cells[] = {r->problem, r->trial.algorithm, r->trial.config_text,
                           format_ms(r->trial.time_ms, ms, sizeof ms), r->device, r->versions,
                           r->tuned_at};
    if (!table_add(&t, cells, t.ncols)) {
      table_free(&t);
      say("out of memory");
      return EXIT_FAILED;
    }
  }
  table_print(&t, stdout);
  table_free(&t);
  return EXIT_OK_;
}

/* Reads the winners (key NULL) or the trials of one problem key from the
 * cache, read-only, into *l.  Returns EXIT_OK_ or the exit code after saying
 * why on stderr. */
static int read_rows(const cli_args *a, const char *key, record_list *l, char *path, size_t size) {
  conv_cache *cache = NULL;
  int rc = cache_path(a, false, path, size);
  if (rc == EXIT_OK_) rc = open_cache_read_only(path, &cache);
  if (rc != EXIT_OK_) return rc;
  conv_error err = {CONV_OK, ""};
  conv_status st = key ? conv_cache_list_trials(cache, key, collect_row, l, &err)
                       : conv_cache_list_winners(cache, collect_row, l, &err);
  conv_cache_close(cache);
  if (l->out_of_memory) {
    say("out of memory");
    return EXIT_FAILED;
  }
  if (st != CONV_OK) {
    say("cannot read the cache %s: %s", path, err.message);
    return EXIT_CACHE;
  }
  return EXIT_OK_;
}

static int cmd_list(const cli_args *a) {
  char path[CLI_PATH_MAX];
  record_list l = {NULL, 0, 0, false};
  int rc = read_rows(a, NULL, &l, path, sizeof path);
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
  const conv_trial *tr = &r->trial;
  char marks[4] = "", ms[32], err[32], ws[32];
  if (tr->winner) strcat(marks, "*");
  if (tr->heuristic_pick) strcat(marks, "h");
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
  text_table t;
  table_init(&t, 8, header, (1u << 4) | (1u << 5) | (1u << 6));
  for (; *i < l->count && strcmp(first->device, l->items[*i].device) == 0 &&
         strcmp(first->versions, l->items[*i].versions) == 0;
       (*i)++) {
    if (!add_trial_row(&t, &l->items[*i])) {
      table_free(&t);
      say("out of memory");
      return EXIT_FAILED;
    }
  }
  table_print(&t, stdout);
  table_free(&t);
  return EXIT_OK_;
}

static int print_trials(const char *key, record_list *l) {
  qsort(l->items, l->count, sizeof *l->items, compare_group);
  printf("problem: %s\n", key);
  for (size_t i = 0; i < l->count;) {
    int rc = print_trial_group(l, &i);
    if (rc != EXIT_OK_) return rc;
  }
  printf("\n* winner   h cuDNN's own choice (heuristic #1), the untuned default\n");
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

static int cmd_show(const cli_args *a) {
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

/* ================================================================ tune */

typedef struct tune_row {
  const suite_shape *shape;
  char key[CONV_PROBLEM_KEY_MAX];
  conv_status status;
  char error[512]; /* conv_context_last_error, one line */
  conv_plan_info info;
  double default_ms; /* the heuristic pick's time; < 0 unknown */
} tune_row;

/* Shared by the worker thread and the loop thread. */
typedef struct tune_job {
  conv_context *ctx;
  const suite *shapes;
  tune_row *rows;   /* shapes->count; the first `done` are filled */
  size_t done;      /* written by the worker, read after the join */
  bool interrupted; /* likewise */
  atomic_bool stop; /* set by the SIGINT callback */
  uv_signal_t sigint;
  uv_async_t finished;
} tune_job;

typedef struct default_query {
  const char *device, *versions;
  double ms;
} default_query;

static int find_default_row(const conv_cache_row *row, void *user) {
  default_query *q = user;
  if (!row->trial->heuristic_pick || strcmp(row->device, q->device) != 0 ||
      strcmp(row->versions, q->versions) != 0) {
    return 0;
  }
  if (row->trial->status == CONV_OK && row->trial->time_ms >= 0) q->ms = row->trial->time_ms;
  return 1;
}

/* The time of cuDNN's own pick for this key on this device and build. */
static double default_time_ms(conv_context *ctx, const char *key, const char *name) {
  conv_cache *cache = conv_context_cache(ctx);
  const conv_device *device = conv_context_device(ctx);
  if (cache == NULL || device == NULL) return -1;
  default_query q = {device->key, conv_library_versions(), -1};
  conv_error err = {CONV_OK, ""};
  if (conv_cache_list_trials(cache, key, find_default_row, &q, &err) != CONV_OK) {
    say("warning: %s: cannot read its trials: %s", name, err.message);
    return -1;
  }
  return q.ms;
}

static void tune_one(conv_context *ctx, const suite_shape *shape, tune_row *row) {
  memset(row, 0, sizeof *row);
  row->shape = shape;
  row->default_ms = -1;
  if (conv_problem_key(&shape->problem, row->key, sizeof row->key) != CONV_OK) row->key[0] = '\0';
  conv_plan *plan = NULL;
  row->status = conv_plan_create(ctx, &shape->problem, &plan);
  if (row->status == CONV_OK) {
    row->status = conv_plan_info_get(plan, &row->info);
    conv_plan_destroy(plan);
  }
  if (row->status != CONV_OK) {
    one_line(conv_context_last_error(ctx), row->error, sizeof row->error);
    return;
  }
  if (row->key[0] != '\0') row->default_ms = default_time_ms(ctx, row->key, shape->name);
}

static void tune_worker(void *arg) {
  tune_job *job = arg;
  size_t count = job->shapes->count;
  for (size_t i = 0; i < count; i++) {
    if (atomic_load(&job->stop)) {
      job->interrupted = true;
      break;
    }
    const suite_shape *shape = &job->shapes->shapes[i];
    char name[1024];
    fprintf(stderr, "[%zu/%zu] %s ...\n", i + 1, count, one_line(shape->name, name, sizeof name));
    tune_one(job->ctx, shape, &job->rows[i]);
    job->done = i + 1;
    if (job->rows[i].status == CONV_INTERRUPTED) {
      job->interrupted = true;
      break;
    }
  }
  int e = uv_async_send(&job->finished);
  if (e != 0) say("internal error: uv_async_send: %s", uv_strerror(e));
}

static void on_sigint(uv_signal_t *handle, int signum) {
  (void)signum;
  tune_job *job = handle->data;
  atomic_store(&job->stop, true);
  conv_context_interrupt(job->ctx);
  fprintf(stderr,
          "convtune: interrupted; stopping after the current candidate (measured trials are "
          "kept)\n");
  /* Back to the default action: a second Ctrl-C ends the process at once. */
  int e = uv_signal_stop(handle);
  if (e != 0) say("uv_signal_stop: %s", uv_strerror(e));
}

static void on_finished(uv_async_t *handle) {
  tune_job *job = handle->data;
  uv_close((uv_handle_t *)&job->sigint, NULL);
  uv_close((uv_handle_t *)&job->finished, NULL);
}

static int uv_failed(const char *what, int e) {
  say("%s: %s", what, uv_strerror(e));
  return EXIT_FAILED;
}

/* Runs the shapes on a worker thread while this thread watches SIGINT. */
static int run_tuning(tune_job *job) {
  uv_loop_t loop;
  int e = uv_loop_init(&loop);
  if (e != 0) return uv_failed("uv_loop_init", e);
  int rc = EXIT_OK_;
  bool started = false;
  uv_thread_t worker;
  job->finished.data = job->sigint.data = job;
  if ((e = uv_async_init(&loop, &job->finished, on_finished)) != 0) {
    rc = uv_failed("uv_async_init", e);
  } else if ((e = uv_signal_init(&loop, &job->sigint)) != 0) {
    rc = uv_failed("uv_signal_init", e);
    uv_close((uv_handle_t *)&job->finished, NULL);
  } else if ((e = uv_signal_start(&job->sigint, on_sigint, SIGINT)) != 0) {
    rc = uv_failed("uv_signal_start", e);
    on_finished(&job->finished);
  } else if ((e = uv_thread_create(&worker, tune_worker, job)) != 0) {
    rc = uv_failed("uv_thread_create", e);
    on_finished(&job->finished);
  } else {
    started = true;
  }
  /* Until the worker's uv_async_send (or, on failure, until the closes). */
  if ((e = uv_run(&loop, UV_RUN_DEFAULT)) != 0 && rc == EXIT_OK_) rc = uv_failed("uv_run", e);
  if (started && (e = uv_thread_join(&worker)) != 0 && rc == EXIT_OK_) {
    rc = uv_failed("uv_thread_join", e);
  }
  if ((e = uv_loop_close(&loop)) != 0) rc = uv_failed("uv_loop_close", e);
  return rc;
}

static void tune_row_cells(const tune_row *r, char *winner, size_t winner_size, char *ms,
                           char *def, char *speedup, size_t num_size) {
  const conv_plan_info *info = &r->info;
  snprintf(winner, winner_size, "%s%s%s", info->algorithm, info->config[0] ? " " : "",
           info->config);
  format_ms(info->time_ms, ms, num_size);
  format_ms(r->default_ms, def, num_size);
  snprintf(speedup, num_size, "%s", "-");
  if (r->default_ms > 0 && info->time_ms > 0) {
    snprintf(speedup, num_size, "%.2fx", r->default_ms / info->time_ms);
  }
}

static int print_tune_table(const tune_row *rows, size_t count) {
  static const char *const header[] = {"shape",            "winner",  "time ms",
                                       "cuDNN default ms", "speedup", "source"};
  text_table t;
  table_init(&t, 6, header, (1u << 2) | (1u << 3) | (1u << 4));
  bool ok = true;
  for (size_t i = 0; i < count && ok; i++) {
    const tune_row *r = &rows[i];
    char winner[sizeof r->info.algorithm + sizeof r->info.config + 2];
    char ms[32], def[32], speedup[32], failure[sizeof r->error + 64];
    if (r->status == CONV_OK) {
      tune_row_cells(r, winner, sizeof winner, ms, def, speedup, sizeof ms);
      const char *cells[] = {r->shape->name, winner, ms, def, speedup,
                             source_name(r->info.source)};
      ok = table_add(&t, cells, t.ncols);
    } else {
      snprintf(failure, sizeof failure, "%s %s: %s",
               r->status == CONV_INTERRUPTED ? "STOPPED" : "FAILED", status_name(r->status),
               r->error[0] ? r->error : conv_status_string(r->status));
      const char *cells[] = {r->shape->name, failure};
      ok = table_add(&t, cells, 1);
    }
  }
  if (ok) table_print(&t, stdout);
  table_free(&t);
  if (!ok) say("out of memory");
  return ok ? EXIT_OK_ : EXIT_FAILED;
}

static void write_tune_row_json(FILE *out, const tune_row *r) {
  fputs("{\"shape\": ", out);
  json_write_string(out, r->shape->name);
  fputs(", \"problem\": ", out);
  json_write_string(out, r->key);
  fputs(", \"status\": ", out);
  json_write_string(out, status_name(r->status));
  if (r->status != CONV_OK) {
    fputs(", \"error\": ", out);
    json_write_string(out, r->error[0] ? r->error : conv_status_string(r->status));
    fputc('}', out);
    return;
  }
  const conv_plan_info *info = &r->info;
  fputs(", \"algorithm\": ", out);
  json_write_string(out, info->algorithm);
  fputs(", \"config\": ", out);
  json_write_string(out, info->config);
  fputs(", \"time_ms\": ", out);
  json_write_number(out, info->time_ms >= 0 ? info->time_ms : NAN);
  fputs(", \"default_ms\": ", out);
  json_write_number(out, r->default_ms >= 0 ? r->default_ms : NAN);
  fputs(", \"speedup\": ", out);
  json_write_number(out,
                    r->default_ms > 0 && info->time_ms > 0 ? r->default_ms / info->time_ms : NAN);
  fputs(", \"source\": ", out);
  json_write_string(out, source_name(info->source));
  fprintf(out, ", \"workspace_bytes\": %zu}", info->workspace_bytes);
}

static void write_tune_json(FILE *out, const tune_row *rows, size_t count) {
  fputc('[', out);
  for (size_t i = 0; i < count; i++) {
    fputs(i ? ",\n " : "\n ", out);
    write_tune_row_json(out, &rows[i]);
  }
  fputs(count ? "\n]\n" : "]\n", out);
}

/* Prints the rows and turns the outcome into the exit code. */
static int report_tuning(const cli_args *a, const tune_job *job) {
  size_t failed = 0;
  for (size_t i = 0; i < job->done; i++) {
    if (job->rows[i].status != CONV_OK && job->rows[i].status != CONV_INTERRUPTED) failed++;
  }
  int rc = EXIT_OK_;
  if (a->json) {
    write_tune_json(stdout, job->rows, job->done);
  } else if (job->done > 0) {
    rc = print_tune_table(job->rows, job->done);
  }
  if (job->interrupted) {
    say("interrupted after %zu of %zu shapes", job->done,
            job->shapes->count);
    return EXIT_INTERRUPTED;
  }
  if (failed > 0) {
    say("%zu of %zu shapes failed", failed, job->shapes->count);
    return EXIT_FAILED;
  }
  return rc;
}

/* The suite's notes (skipped rows), one printable line each. */
static void print_notes(const suite *shapes) {
  for (size_t i = 0; i < shapes->note_count; i++) {
    char line[1024];
    fprintf(stderr, "%s\n", one_line(shapes->notes[i], line, sizeof line));
  }
}

static int open_context(const cli_args *a, const char *path, conv_context **ctx) {
  conv_context_options options;
  conv_context_options_init(&options);
  options.cache_path = path;
  options.policy = a->policy;
  options.verbose = a->verbose ? 1 : 0;
  conv_status st = conv_context_create(ctx, &options);
  if (st == CONV_OK) return EXIT_OK_;
  const char *msg = conv_context_last_error(NULL);
  if (msg[0] == '\0') msg = conv_status_string(st);
  if (st == CONV_NO_DEVICE) {
    say("no usable CUDA GPU: %s", msg);
    return EXIT_NO_GPU;
  }
  if (st == CONV_CACHE_ERROR) {
    say("cannot open the cache %s: %s", path, msg);
    return EXIT_CACHE;
  }
  say("cannot start (%s): %s", status_name(st), msg);
  return EXIT_FAILED;
}

static int tune_shapes(const cli_args *a, const suite *shapes, const char *path) {
  conv_context *ctx = NULL;
  int rc = open_context(a, path, &ctx);
  if (rc != EXIT_OK_) return rc;
  print_notes(shapes);
  tune_job job;
  memset(&job, 0, sizeof job);
  job.ctx = ctx;
  job.shapes = shapes;
  atomic_init(&job.stop, false);
  job.rows = calloc(shapes->count, sizeof *job.rows);
  if (job.rows == NULL) {
    say("out of memory");
    rc = EXIT_FAILED;
  } else {
    rc = run_tuning(&job);
    if (rc == EXIT_OK_) rc = report_tuning(a, &job);
  }
  free(job.rows);
  conv_context_destroy(ctx);
  return rc;
}

static int cmd_tune(const cli_args *a) {
  suite shapes;
  suite_init(&shapes);
  int rc = load_inputs(a, &shapes);
  if (rc == EXIT_OK_ && shapes.count == 0) {
    print_notes(&shapes);
    say("no convolution shapes to tune");
    if (a->json) fputs("[]\n", stdout);
  } else if (rc == EXIT_OK_) {
    char path[CLI_PATH_MAX];
    rc = cache_path(a, true, path, sizeof path);
    if (rc == EXIT_OK_) rc = tune_shapes(a, &shapes, path);
  }
  suite_free(&shapes);
  return rc;
}

/* ================================================================ main */

int main(int argc, char **argv) {
  cli_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc == EXIT_OK_) {
    if (a.help) {
      print_usage(stdout);
    } else if (a.command == CMD_TUNE) {
      rc = cmd_tune(&a);
    } else if (a.command == CMD_LIST) {
      rc = cmd_list(&a);
    } else {
      rc = cmd_show(&a);
    }
  }
  cli_args_free(&a);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    say("cannot write the output: %s", strerror(errno));
    if (rc == EXIT_OK_) rc = EXIT_FAILED;
  }
  return rc;
}
