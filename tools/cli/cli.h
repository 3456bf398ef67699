/*
 * cli.h -- what the parts of the convtune command-line tool share: exit
 * codes, the parsed command line, printing (every line the tool writes from
 * text it did not make itself goes through one_line) and text tables.
 *
 *   main.c     main(): the command run, or the help printed
 *   args.c     the command line; shape specs, overrides, the cache's path
 *   output.c   messages, number formats, tables
 *   inspect.c  list and show: reading the cache without a GPU
 *   pending.c  list --pending, and tune --pending's shapes
 *   verify.c   verify: a cache's winners timed against a fresh tuning
 *   tune.c     tune: shapes, the worker thread, Ctrl-C, progress, the report
 *   devices.c  tune --devices: a worker process per GPU (worker.c; tune.h)
 *   shard.c    tune --shard K/N: this process's share of the shapes
 *   progress.c the progress line tune redraws on a terminal (progress.h)
 *   report.c   report: the cache as an HTML page (roofline.c: floors)
 *   share.c    merge, export and import: tunings copied between caches
 */
#ifndef CONVTUNE_TOOLS_CLI_H
#define CONVTUNE_TOOLS_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "convtune.h"
#include "tools/out_file.h"

typedef enum cli_exit {
  EXIT_OK_ = 0,
  EXIT_FAILED = 1,      /* a shape failed (tune), nothing was found (show,
                         * report) or the report could not be written      */
  EXIT_USAGE = 2,       /* bad command line, shape spec or suite file        */
  EXIT_NO_GPU = 3,      /* no usable CUDA GPU                                */
  EXIT_CACHE = 4,       /* the cache is missing, unreadable or bad           */
  EXIT_FLAGGED = 5,     /* verify: a shipped winner is slower here than a
                         * re-tune by more than the tolerance               */
  EXIT_INTERRUPTED = 130
} cli_exit;

#define CLI_PATH_MAX 4096

/* ---------------------------------------------------------------- command line */

enum {
  CMD_TUNE = 1u, CMD_LIST = 2u, CMD_SHOW = 4u, CMD_REPORT = 8u,
  CMD_MERGE = 16u, CMD_EXPORT = 32u, CMD_IMPORT = 64u, CMD_VERIFY = 128u, CMD_ALL = 255u
};

/* --progress: tune's progress line on a terminal (auto), always or never. */
typedef enum cli_progress { PROGRESS_AUTO = 0, PROGRESS_ALWAYS, PROGRESS_NEVER } cli_progress;

/* The most GPUs tune --devices takes (cli_args.device_ordinals). */
#define CLI_DEVICES_MAX 64

typedef struct cli_args {
  unsigned command; /* CMD_*, 0 for help */
  const char *command_name;
  bool help, version, json, verbose;
  const char *cache_path; /* NULL: the default */
  const char *system_cache_path; /* tune --system-cache (NULL: the library's default);
                                  * list and verify --system-cache: the cache
                                  * file, or directory of them, to read */
  bool dry_run;       /* verify --dry-run: check the winners without a GPU */
  const char *suite_path; /* show --suite */
  const char *output_path; /* report, merge and export -o */
  const char *device;      /* merge and export --device: one fingerprint */
  bool winners_only;       /* export --winners-only: each tuning's winner and
                            * heuristic pick only (conv_cache_merge_winners) */
  bool have_math, have_epilogue, have_direction, have_dtype, have_layout;
  bool deterministic; /* --deterministic */
  bool pending;       /* tune and list --pending (or --stale) */
  bool stale_only;    /* tune and list --stale: the pending problems whose
                       * winners were carried over from other versions */
  double budget_ms;   /* tune --budget, per problem; 0: none */
  double tolerance;   /* verify --tolerance: a fraction, default 0.10 */
  bool devices;       /* tune --devices: a worker process per GPU */
  /* --devices' GPUs: device_count ordinals; 0 for "all" (every GPU there is). */
  int device_ordinals[CLI_DEVICES_MAX];
  size_t device_count;
  int worker_device;  /* tune --worker-device N (a --devices worker); -1: none */
  /* tune --shard K/N: only shard K (0-based) of N of the shapes (shard.c). */
  bool sharded;
  unsigned shard_index, shard_count;
  conv_math math;
  conv_dtype dtype;
  conv_layout layout;
  conv_epilogue epilogue;
  conv_direction direction;
  conv_policy policy;
  cli_progress progress;
  const char **inputs; /* positional arguments, pointing into argv */
  size_t input_count;
} cli_args;

/* Parses argv into *a: the command word and its options, before or after
 * it, and checks the arguments the command takes.  EXIT_OK_ (a->help or
 * a->version may then be all that was asked), or the exit code after
 * saying why.  cli_args_free(a) after it either way. */
int cli_args_parse(int argc, char **argv, cli_args *a /* OUT */);
void cli_args_free(cli_args *a);

/* Applies --math, --dtype, --layout, --epilogue, --direction and --deterministic to
 * a problem. */
void apply_overrides(const cli_args *a, conv_problem *p);

/* Parses a shape spec; a usage error (said) when it is bad. */
int parse_spec(const char *spec, conv_problem *p);

/* --cache, else the default path (creating its directories when asked). */
int cache_path(const cli_args *a, bool create_dirs, char *path, size_t size);

int cmd_tune(const cli_args *a);
int cmd_list(const cli_args *a);
int cmd_show(const cli_args *a);
int cmd_report(const cli_args *a);
int cmd_merge(const cli_args *a);
int cmd_export(const cli_args *a);
int cmd_import(const cli_args *a);
int cmd_list_pending(const cli_args *a);
int cmd_verify(const cli_args *a);

/* tune --pending: appends the pending problems of the cache at `path` for
 * the GPU of fingerprint `device` to `shapes` (each named by its key,
 * once), skipping with a warning a key that cannot be rebuilt.  EXIT_OK_
 * or the exit code after saying why. */
struct suite;
int load_pending_shapes(const char *path, const char *device, bool stale_only,
                        struct suite *shapes);

/* Opens an existing cache read-only (list, show, report): no GPU, no
 * context.  EXIT_OK_, or EXIT_CACHE after saying why. */
int open_cache_read_only(const char *path, conv_cache_reader **reader /* OUT */);

/* Cache file paths (malloc'd). */
typedef struct cli_paths {
  char **items;
  size_t count;
  bool out_of_memory;
} cli_paths;

/* The system cache files `option` names (a cache file, or a directory's
 * *.db files; NULL: the library's search path), through
 * conv_system_cache_files.  EXIT_OK_ or the exit code after saying why
 * (EXIT_CACHE for a named path that is missing).  cli_paths_free after
 * either. */
int system_cache_paths(const char *option, cli_paths *out /* OUT */);
void cli_paths_free(cli_paths *paths);

/* The system caches a context would open by default, one per line, or
 * that there are none (version). */
void print_system_caches(FILE *out);

/* How a walk over a reader of `path` ended: EXIT_OK_, or the exit code
 * after saying why (out of memory in a callback, else the walk's status
 * and message). */
int cache_read_outcome(const char *path, conv_status st, bool out_of_memory, const char *message);

/* A trial copied out of a conv_cache_reader callback, whose entry lives
 * only during the call (the strings as the cache keeps them). */
typedef struct cli_trial {
  int algorithm_id;
  char algorithm[32];
  char config_text[128];
  int config_count;
  int64_t config_values[CONV_CACHE_CONFIG_MAX];
  conv_status status;
  char reason[256];
  double time_ms, rel_error;
  size_t workspace_bytes;
  bool heuristic_pick, winner;
  int deterministic;
} cli_trial;

void cli_trial_copy(const conv_cache_entry *entry, cli_trial *trial /* OUT */);

/* ---------------------------------------------------------------- output */

/* msg as one printable line in buf (see output.c). */
const char *one_line(const char *msg, char *buf, size_t size);

/* "convtune: MESSAGE" on stderr, MESSAGE made one printable line. */
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
void say(const char *fmt, ...);

/* say(), then the hint to --help; returns EXIT_USAGE. */
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
int usage_error(const char *fmt, ...);

/* An output file's step (tools/out_file.h) as an exit code: EXIT_OK_; a
 * refused path as a usage error; a failure as `failed_exit`, said. */
int output_outcome(out_file_status status, const char *message, int failed_exit);

/* out_file_check of an -o path against the inputs, as output_outcome. */
int check_output(out_file *o, const char *target, const char *const *inputs, size_t count,
                 int failed_exit);

/* The enum name of a status without the CONV_ prefix, e.g. "BAD_GROUPS". */
const char *status_name(conv_status status);
const char *source_name(conv_plan_source source);
char *copy_string(const char *s); /* malloc'd; NULL is "" */
/* A time in ms, "-" when unknown (negative or not finite). */
const char *format_ms(double ms, char *buf, size_t size);
const char *format_bytes(size_t bytes, char *buf, size_t size);

/* Rows of text cells printed in aligned columns, each column as wide as
 * its widest cell (in characters).  A row may end in a spanning cell: its
 * text runs to the end of the line and does not widen the column (used
 * for a failed shape's error). */
#define TABLE_MAX_COLS 10

/* Cells are cut to this many characters, "..." ending a cut one, so that
 * one long text (a hostile cache's) cannot widen every row: the output
 * grows with the rows, not with the rows times the longest cell.  Wider
 * than the problem keys of any real shape (about 110 characters at most
 * in practice) and the device fingerprints; --json prints every text
 * whole. */
#define TABLE_CELL_MAX_CHARS 160

typedef struct text_table {
  int ncols;
  const char *header[TABLE_MAX_COLS];
  unsigned right_aligned; /* bit i: column i */
  unsigned fingerprints;  /* bit i: column i holds GPU fingerprints (table_fit) */
  int drop[TABLE_MAX_COLS]; /* columns left out to fit, first to last */
  int drop_count;
  char **cells;           /* nrows * ncols, owned */
  int *span;              /* per row: ncols, or the spanning column */
  size_t nrows, cap;
} text_table;

void table_init(text_table *t, int ncols, const char *const *header, unsigned right);
void table_free(text_table *t);
/* Appends a row of ncols cells (NULL: empty), each made one printable
 * line and cut to TABLE_CELL_MAX_CHARS (a spanning cell is kept whole);
 * cells after `span` are ignored.  False when memory runs out. */
bool table_add(text_table *t, const char *const *cells, int span);
/* How the table fits the terminal when it is wider (see table_print):
 * `fingerprints`, bit i: column i holds GPU fingerprints, cut to the GPU's
 * name first; drop[0 .. drop_count): the columns then left out in turn,
 * least important first.  Without it a table is printed whole. */
void table_fit(text_table *t, unsigned fingerprints, const int *drop, int drop_count);
/* The width tables are fitted to on `out`: the terminal's (TIOCGWINSZ)
 * when it is one, else $COLUMNS (a positive number), else 0: none, every
 * column printed whole, so that a script reading a pipe or file gets the
 * table as it always was. */
size_t output_columns(FILE *out);
/* Prints the table, fitted to output_columns(out) as table_fit says
 * (fingerprint cells cut in place), and on stderr which columns were
 * left out. */
void table_print(text_table *t, FILE *out);
/* Prints the table on stdout when `complete` (every table_add succeeded),
 * frees it, and returns EXIT_OK_, or EXIT_FAILED after saying that memory
 * ran out. */
int table_finish(text_table *t, bool complete);

#endif /* CONVTUNE_TOOLS_CLI_H */
