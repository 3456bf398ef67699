/*
 * args.c -- the command line: argv parsed into cli_args (the command word,
 * its options and their values, the arguments each command takes), and
 * what the parsed options mean where the commands use them: a shape spec,
 * the overrides of every shape, the cache's path.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tools/cli/cli.h"

typedef struct option_spec {
  const char *name;
  bool takes_value;
  unsigned commands;
} option_spec;

static const option_spec *find_option(const char *name, size_t len) {
  static const option_spec options[] = {
      {"--cache", true, CMD_ALL},         {"--json", false, CMD_TUNE | CMD_LIST | CMD_SHOW},
      {"--math", true, CMD_TUNE | CMD_SHOW}, {"--epilogue", true, CMD_TUNE | CMD_SHOW},
      {"--dtype", true, CMD_TUNE | CMD_SHOW}, {"--layout", true, CMD_TUNE | CMD_SHOW},
      {"--direction", true, CMD_TUNE | CMD_SHOW}, {"--deterministic", false, CMD_TUNE | CMD_SHOW},
      {"--policy", true, CMD_TUNE},       {"--verbose", false, CMD_TUNE},
      {"--progress", true, CMD_TUNE},     {"--system-cache", true, CMD_TUNE | CMD_LIST | CMD_VERIFY},
      {"--dry-run", false, CMD_VERIFY},
      {"--tolerance", true, CMD_VERIFY},
      {"--suite", true, CMD_SHOW},        {"-o", true, CMD_REPORT | CMD_MERGE | CMD_EXPORT},
      {"--output", true, CMD_REPORT | CMD_MERGE | CMD_EXPORT},
      {"--device", true, CMD_MERGE | CMD_EXPORT}, {"--help", false, CMD_ALL},
      {"--pending", false, CMD_TUNE | CMD_LIST}, {"--budget", true, CMD_TUNE},
      {"--stale", false, CMD_TUNE | CMD_LIST},
      {"--version", false, CMD_ALL},      {"--winners-only", false, CMD_EXPORT},
      {"--devices", true, CMD_TUNE},      {"--worker-device", true, CMD_TUNE},
      {"--shard", true, CMD_TUNE},
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

/* --devices: "all" (*count 0) or distinct GPU ordinals "0,1".  EXIT_OK_,
 * or a usage error (said). */
static int parse_device_list(const char *text, int *ordinals, size_t *count) {
  *count = 0;
  if (strcmp(text, "all") == 0) return EXIT_OK_;
  const char *p = text;
  for (;;) {
    char *end = NULL;
    errno = 0;
    long v = *p >= '0' && *p <= '9' ? strtol(p, &end, 10) : -1;
    if (v < 0 || errno != 0 || v > 4095 || (*end != ',' && *end != '\0'))
      return usage_error("bad --devices '%s' (expected all, or GPU ordinals such as 0,1)", text);
    for (size_t i = 0; i < *count; i++)
      if (ordinals[i] == (int)v)
        return usage_error("--devices names GPU %ld twice", v);
    if (*count == CLI_DEVICES_MAX)
      return usage_error("--devices names more than %d GPUs", CLI_DEVICES_MAX);
    ordinals[(*count)++] = (int)v;
    if (*end == '\0') return EXIT_OK_;
    p = end + 1;
  }
}

/* The most shards --shard takes: far past any cluster's GPUs of one model;
 * beyond it is a typo. */
#define CLI_SHARDS_MAX 100000u

/* A whole number of decimal digits in [text, end) (no sign, no spaces), at
 * most CLI_SHARDS_MAX; false otherwise. */
static bool parse_shard_number(const char *text, const char *end, unsigned *value) {
  if (text == end) return false;
  unsigned long v = 0;
  for (const char *p = text; p < end; p++) {
    if (*p < '0' || *p > '9') return false;
    v = v * 10 + (unsigned long)(*p - '0');
    if (v > CLI_SHARDS_MAX) return false;
  }
  *value = (unsigned)v;
  return true;
}

/* --shard K/N: shard K of N, K counted from 0 as a Slurm array's
 * $SLURM_ARRAY_TASK_ID (--array=0-N-1) and a Kubernetes indexed Job's
 * $JOB_COMPLETION_INDEX are.  EXIT_OK_, or a usage error (said). */
static int parse_shard(const char *text, cli_args *a) {
  const char *slash = strchr(text, '/');
  unsigned k = 0, n = 0;
  if (slash == NULL || !parse_shard_number(text, slash, &k) ||
      !parse_shard_number(slash + 1, slash + strlen(slash), &n))
    return usage_error("bad --shard '%s' (expected K/N: shard K of N, K from 0 to N-1, N at most "
                       "%u)", text, CLI_SHARDS_MAX);
  if (n == 0) return usage_error("bad --shard '%s': N, the number of shards, must be at least 1",
                                 text);
  if (k >= n)
    return usage_error("bad --shard '%s': shards count from 0, so K must be 0 to %u (Slurm: "
                       "--array=0-%u and $SLURM_ARRAY_TASK_ID/%u)", text, n - 1, n - 1, n);
  a->sharded = true;
  a->shard_index = k;
  a->shard_count = n;
  return EXIT_OK_;
}

static int apply_option(cli_args *a, const option_spec *o, const char *value) {
  static const char *const maths[] = {"strict", "tf32", NULL};
  static const char *const dtypes[] = {"f32", "f16", "bf16", NULL};
  static const char *const layouts[] = {"nchw", "nhwc", NULL};
  static const char *const epilogues[] = {"none", "bias", "bias_relu", NULL};
  static const char *const policies[] = {"exhaustive", "fast", "predict", NULL};
  static const char *const directions[] = {"fwd", "bwd_data", "bwd_filter", NULL};
  static const char *const progress_modes[] = {"auto", "always", "never", NULL};
  int i;
  if (strcmp(o->name, "--cache") == 0) {
    if (value[0] == '\0') return usage_error("--cache needs a non-empty path");
    a->cache_path = value;
  } else if (strcmp(o->name, "--suite") == 0) {
    a->suite_path = value;
  } else if (strcmp(o->name, "--device") == 0) {
    if (value[0] == '\0') return usage_error("--device needs a device fingerprint");
    a->device = value;
  } else if (strcmp(o->name, "--devices") == 0) {
    int rc = parse_device_list(value, a->device_ordinals, &a->device_count);
    if (rc != EXIT_OK_) return rc;
    a->devices = true;
  } else if (strcmp(o->name, "--shard") == 0) {
    return parse_shard(value, a);
  } else if (strcmp(o->name, "--worker-device") == 0) {
    /* Not in --help: devices.c starts its workers with it. */
    char *end = NULL;
    errno = 0;
    long ordinal = strtol(value, &end, 10);
    if (value[0] < '0' || value[0] > '9' || *end != '\0' || errno != 0 || ordinal > 4095)
      return usage_error("bad --worker-device '%s' (expected a GPU ordinal)", value);
    a->worker_device = (int)ordinal;
  } else if (strcmp(o->name, "--system-cache") == 0) {
    a->system_cache_path = value; /* "": none, as in conv_context_options */
  } else if (strcmp(o->name, "-o") == 0 || strcmp(o->name, "--output") == 0) {
    if (value[0] == '\0') return usage_error("%s needs a non-empty path", o->name);
    a->output_path = value;
  } else if (strcmp(o->name, "--json") == 0) {
    a->json = true;
  } else if (strcmp(o->name, "--dry-run") == 0) {
    a->dry_run = true;
  } else if (strcmp(o->name, "--winners-only") == 0) {
    a->winners_only = true;
  } else if (strcmp(o->name, "--verbose") == 0) {
    a->verbose = true;
  } else if (strcmp(o->name, "--deterministic") == 0) {
    a->deterministic = true;
  } else if (strcmp(o->name, "--pending") == 0) {
    a->pending = true;
  } else if (strcmp(o->name, "--stale") == 0) {
    /* The pending problems whose winners were carried over, alone. */
    a->pending = true;
    a->stale_only = true;
  } else if (strcmp(o->name, "--budget") == 0) {
    char *end = NULL;
    errno = 0;
    double seconds = strtod(value, &end);
    /* A week is far past any tuning; beyond it is a typo. */
    if (value[0] == '\0' || *end != '\0' || errno != 0 || !(seconds > 0) ||
        seconds > 7 * 24 * 3600.0)
      return usage_error("bad --budget '%s' (expected seconds per shape, a positive number)",
                         value);
    a->budget_ms = seconds * 1000.0;
  } else if (strcmp(o->name, "--tolerance") == 0) {
    char *end = NULL;
    errno = 0;
    double fraction = strtod(value, &end);
    if (value[0] == '\0' || *end != '\0' || errno != 0 || !(fraction >= 0) || fraction > 100)
      return usage_error("bad --tolerance '%s' (expected a fraction such as 0.10)", value);
    a->tolerance = fraction;
  } else if (strcmp(o->name, "--help") == 0 || strcmp(o->name, "-h") == 0) {
    a->help = true;
  } else if (strcmp(o->name, "--version") == 0) {
    a->version = true;
  } else if (strcmp(o->name, "--math") == 0) {
    if ((i = lookup_name(value, maths)) < 0) {
      return usage_error("bad --math '%s' (expected strict or tf32)", value);
    }
    a->have_math = true;
    a->math = i == 1 ? CONV_MATH_TF32 : CONV_MATH_STRICT;
  } else if (strcmp(o->name, "--dtype") == 0) {
    if ((i = lookup_name(value, dtypes)) < 0) {
      return usage_error("bad --dtype '%s' (expected f32, f16 or bf16)", value);
    }
    a->have_dtype = true;
    a->dtype = i == 2 ? CONV_DTYPE_BF16 : i == 1 ? CONV_DTYPE_F16 : CONV_DTYPE_F32;
  } else if (strcmp(o->name, "--layout") == 0) {
    if ((i = lookup_name(value, layouts)) < 0) {
      return usage_error("bad --layout '%s' (expected nchw or nhwc)", value);
    }
    a->have_layout = true;
    a->layout = i == 1 ? CONV_LAYOUT_NHWC : CONV_LAYOUT_NCHW;
  } else if (strcmp(o->name, "--epilogue") == 0) {
    if ((i = lookup_name(value, epilogues)) < 0) {
      return usage_error("bad --epilogue '%s' (expected none, bias or bias_relu)", value);
    }
    a->have_epilogue = true;
    a->epilogue = i == 2 ? CONV_EPILOGUE_BIAS_RELU : i == 1 ? CONV_EPILOGUE_BIAS
                                                            : CONV_EPILOGUE_NONE;
  } else if (strcmp(o->name, "--direction") == 0) {
    if ((i = lookup_name(value, directions)) < 0) {
      return usage_error("bad --direction '%s' (expected fwd, bwd_data or bwd_filter)", value);
    }
    a->have_direction = true;
    a->direction = i == 2 ? CONV_BACKWARD_FILTER : i == 1 ? CONV_BACKWARD_DATA : CONV_FORWARD;
  } else if (strcmp(o->name, "--policy") == 0) {
    if ((i = lookup_name(value, policies)) < 0) {
      return usage_error("bad --policy '%s' (expected exhaustive, fast or predict)", value);
    }
    a->policy = i == 2 ? CONV_POLICY_PREDICT : i == 1 ? CONV_POLICY_FAST : CONV_POLICY_EXHAUSTIVE;
  } else if (strcmp(o->name, "--progress") == 0) {
    if ((i = lookup_name(value, progress_modes)) < 0) {
      return usage_error("bad --progress '%s' (expected auto, always or never)", value);
    }
    a->progress = i == 2 ? PROGRESS_NEVER : i == 1 ? PROGRESS_ALWAYS : PROGRESS_AUTO;
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
  } commands[] = {{"tune", CMD_TUNE},     {"list", CMD_LIST},     {"show", CMD_SHOW},
                  {"report", CMD_REPORT}, {"merge", CMD_MERGE},   {"export", CMD_EXPORT},
                  {"import", CMD_IMPORT}, {"verify", CMD_VERIFY}};
  if (strcmp(name, "help") == 0) {
    a->help = true;
    return EXIT_OK_;
  }
  if (strcmp(name, "version") == 0) {
    a->version = true;
    return EXIT_OK_;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    if (strcmp(name, commands[i].name) == 0) {
      a->command = commands[i].command;
      a->command_name = commands[i].name;
      return EXIT_OK_;
    }
  }
  return usage_error("unknown command '%s'", name);
}

/* Where the command is: the first argument that is neither an option nor
 * an option's value; -1 when there is none. */
static int command_index(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--") == 0) return -1;
    if (arg[0] != '-' || arg[1] == '\0') return i;
    const char *eq = strchr(arg, '=');
    const option_spec *o = find_option(arg, eq ? (size_t)(eq - arg) : strlen(arg));
    if (o != NULL && o->takes_value && eq == NULL) i++; /* its value */
  }
  return -1;
}

/* Without a command: --help, -h and --version alone, else a usage error. */
static int parse_no_command(cli_args *a, int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) a->help = true;
    else if (strcmp(argv[i], "--version") == 0) a->version = true;
  }
  if (a->help || a->version) return EXIT_OK_;
  return usage_error(
      "missing command (tune, list, show, report, merge, export, import, verify, help or "
      "version)");
}

static int check_input_count(const cli_args *a) {
  if (a->worker_device >= 0 &&
      (a->input_count > 0 || a->pending || a->devices || a->json || a->sharded))
    return usage_error("tune --worker-device reads its problems on stdin: it takes no shapes, "
                       "--pending, --devices, --shard or --json");
  if (a->worker_device >= 0) return EXIT_OK_;
  if (a->command == CMD_TUNE && a->pending && a->input_count > 0) {
    return usage_error("tune %s takes no shapes (got '%s'): it tunes the cache's own",
                       a->stale_only ? "--stale" : "--pending", a->inputs[0]);
  }
  if (a->command == CMD_TUNE && a->pending &&
      (a->have_math || a->have_dtype || a->have_layout || a->have_epilogue ||
       a->have_direction || a->deterministic)) {
    return usage_error("tune %s tunes each problem as it was recorded: --math, --dtype, "
                       "--layout, --epilogue, --direction and --deterministic do not apply",
                       a->stale_only ? "--stale" : "--pending");
  }
  if (a->command == CMD_TUNE && a->pending && a->policy == CONV_POLICY_PREDICT) {
    return usage_error("tune %s finishes tunings, and --policy predict would leave them "
                       "unfinished: use --policy exhaustive (the default) or fast",
                       a->stale_only ? "--stale" : "--pending");
  }
  if (a->command == CMD_TUNE && !a->pending && a->input_count == 0) {
    return usage_error("tune needs at least one suite file or shape spec (or --pending)");
  }
  if (a->command == CMD_LIST && a->system_cache_path != NULL && (a->pending || a->cache_path)) {
    return usage_error("list --system-cache reads that cache's winners: --pending and --cache do "
                       "not go with it");
  }
  if (a->command == CMD_LIST && a->input_count > 0) {
    return usage_error("list takes no arguments (got '%s')", a->inputs[0]);
  }
  if (a->command == CMD_SHOW && a->input_count != 1) {
    return usage_error("show needs exactly one shape (got %zu arguments)", a->input_count);
  }
  if (a->command == CMD_REPORT && a->input_count > 0) {
    return usage_error("report takes no arguments (got '%s'; the file to write is -o FILE)",
                       a->inputs[0]);
  }
  if (a->command == CMD_REPORT && a->output_path == NULL) {
    return usage_error("report needs -o FILE (the HTML file to write; - for stdout)");
  }
  if ((a->command == CMD_MERGE || a->command == CMD_IMPORT) && a->input_count == 0) {
    return usage_error("%s needs at least one cache file to copy from", a->command_name);
  }
  if (a->command == CMD_VERIFY && a->input_count > 0) {
    return usage_error("verify takes no arguments (got '%s'; the cache is --cache or "
                       "--system-cache)", a->inputs[0]);
  }
  if (a->command == CMD_EXPORT && a->input_count > 0) {
    return usage_error("export takes no arguments (got '%s'; the file to write is -o FILE)",
                       a->inputs[0]);
  }
  if ((a->command == CMD_MERGE || a->command == CMD_EXPORT) &&
      (a->output_path == NULL || strcmp(a->output_path, "-") == 0)) {
    return usage_error("%s needs -o FILE (the cache to write)", a->command_name);
  }
  return EXIT_OK_;
}

int cli_args_parse(int argc, char **argv, cli_args *a) {
  memset(a, 0, sizeof *a);
  a->policy = CONV_POLICY_EXHAUSTIVE;
  a->tolerance = 0.10;
  a->worker_device = -1;
  const int at = command_index(argc, argv);
  if (at < 0) return parse_no_command(a, argc, argv);
  int rc = parse_command(a, argv[at]);
  if (rc != EXIT_OK_ || a->help || a->version) return rc;
  a->inputs = calloc((size_t)argc, sizeof *a->inputs);
  if (a->inputs == NULL) {
    say("out of memory");
    return EXIT_FAILED;
  }
  bool options_done = false;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (i == at) continue;
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

void cli_args_free(cli_args *a) {
  free(a->inputs);
  a->inputs = NULL;
}

/* ================================================================ what the options mean */

void apply_overrides(const cli_args *a, conv_problem *p) {
  if (a->have_math) p->math = a->math;
  if (a->have_dtype) p->dtype = a->dtype;
  /* The filter takes the layout's own order (KCRS for NCHW, KRSC for NHWC). */
  if (a->have_layout) {
    p->layout = a->layout;
    p->filter_layout = CONV_FILTER_DEFAULT;
  }
  if (a->have_epilogue) p->epilogue = a->epilogue;
  if (a->have_direction) p->direction = a->direction;
  if (a->deterministic) p->deterministic = 1;
}

int parse_spec(const char *spec, conv_problem *p) {
  char message[512];
  message[0] = '\0';
  conv_status st = conv_problem_parse(spec, p, message, sizeof message);
  /* A problem key, as `list` and `tune` print them, names a shape too. */
  if (st != CONV_OK && conv_problem_from_key(spec, p) == CONV_OK) return EXIT_OK_;
  if (st != CONV_OK) {
    return usage_error("bad shape spec '%s': %s", spec,
                       message[0] ? message : conv_status_string(st));
  }
  return EXIT_OK_;
}

/* --cache, else the default path (creating its directories for tune). */
int cache_path(const cli_args *a, bool create_dirs, char *path, size_t size) {
  if (a->cache_path != NULL) {
    if (strlen(a->cache_path) >= size) {
      say("cache path too long: %s", a->cache_path);
      return EXIT_CACHE;
    }
    memcpy(path, a->cache_path, strlen(a->cache_path) + 1);
    return EXIT_OK_;
  }
  char message[512];
  if (conv_cache_default_path(path, size, create_dirs, message, sizeof message) != CONV_OK) {
    say("no default cache path: %s", message);
    return EXIT_CACHE;
  }
  return EXIT_OK_;
}
