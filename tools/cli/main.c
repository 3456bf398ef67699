/*
 * main.c -- the convtune command-line tool: tune shapes, list the cache, show
 * the trials of one shape, write a report of the cache, copy tunings between
 * caches (merge, export, import), check a cache against fresh tunings
 * (verify).  main() runs the command that the command line (args.c) names,
 * or prints the help: `convtune --help`.  Exit codes are the cli_exit values
 * of cli.h.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tools/cli/cli.h"

enum { CMD_HELP_ALL = 0 };

/* Each command's synopsis and what it does. */
static const struct {
  unsigned command;
  const char *name, *synopsis, *text;
} command_help[] = {
    {CMD_TUNE, "tune", "tune FILE|SHAPE...|--pending",
     "tune each shape (suite files, shape specs), or\n"
     "every problem pending in the cache for this GPU,\n"
     "and print the winners: algorithm, time, cuDNN's\n"
     "default, speedup"},
    {CMD_LIST, "list", "list [--pending | --system-cache PATH]",
     "list every winner in the cache, or every problem\n"
     "waiting to be tuned (needs no GPU)"},
    {CMD_SHOW, "show", "show SHAPE", "list every trial stored for one shape (needs no GPU)"},
    {CMD_REPORT, "report", "report -o FILE",
     "write the cache as one HTML page: a summary table\n"
     "and a bar chart of every config's time per tuned\n"
     "shape, with the winner, cuDNN's default and the\n"
     "roofline floor (needs no GPU)"},
    {CMD_MERGE, "merge", "merge FILE... -o OUT",
     "copy the tunings of each cache FILE into OUT\n"
     "(created if missing); where both have one,\n"
     "the faster winner stays (needs no GPU)"},
    {CMD_EXPORT, "export", "export -o FILE [--device FINGERPRINT] [--winners-only]",
     "copy the cache's tunings (of one GPU with\n"
     "--device) into FILE, a cache to ship,\n"
     "e.g. as --system-cache (needs no GPU)"},
    {CMD_IMPORT, "import", "import FILE...",
     "copy the tunings of each cache FILE into the\n"
     "cache, the faster winner staying (needs no GPU)"},
    {CMD_VERIFY, "verify", "verify [--system-cache PATH] [--dry-run]",
     "time each winner of this GPU in the cache (or\n"
     "in FILE, a shipped one) against a fresh\n"
     "tuning, and flag those slower by more than\n"
     "the tolerance (exit 5)"},
};

#define COMMAND_COUNT (sizeof command_help / sizeof command_help[0])

/* Each option: its spelling, the commands it applies to, what it does. */
static const struct {
  const char *spelling;
  unsigned commands;
  const char *text;
} option_help[] = {
    {"--tolerance FRACTION", CMD_VERIFY,
     "how much slower than a re-tune a shipped\n"
     "winner may be before it is flagged;\n"
     "default 0.10 (10%)"},
    {"--cache PATH", CMD_ALL,
     "cache file; default $CONVTUNE_CACHE, else\n"
     "$XDG_CACHE_HOME/convtune/cache.db, else\n"
     "~/.cache/convtune/cache.db"},
    {"--json", CMD_TUNE | CMD_LIST | CMD_SHOW,
     "print a JSON array of rows\n"
     "instead of a table"},
    {"-o, --output FILE", CMD_REPORT | CMD_MERGE | CMD_EXPORT,
     "the file to write: the HTML page\n"
     "(report; - for stdout) or the cache"},
    {"--device FINGERPRINT", CMD_MERGE | CMD_EXPORT,
     "only the tunings of this GPU (its\n"
     "fingerprint as 'convtune list' shows it,\n"
     "or the start of one, naming one GPU)"},
    {"--winners-only", CMD_EXPORT,
     "a compact cache to ship: each tuning's\n"
     "winner and cuDNN's default only, not\n"
     "every trial"},
    {"--math strict|tf32", CMD_TUNE | CMD_SHOW,
     "math mode of every fp32 shape (half\n"
     "types ignore it)"},
    {"--dtype f32|f16|bf16", CMD_TUNE | CMD_SHOW,
     "element type of every shape's x, w and y\n"
     "(the bias stays fp32)"},
    {"--layout nchw|nhwc", CMD_TUNE | CMD_SHOW,
     "layout of every shape's x and y (nhwc:\n"
     "channels-last, KRSC filter)"},
    {"--epilogue none|bias|bias_relu", CMD_TUNE | CMD_SHOW, "epilogue of every shape"},
    {"--direction fwd|bwd_data|bwd_filter", CMD_TUNE | CMD_SHOW,
     "pass of every shape: forward, or the\n"
     "gradient for the input or for the filter"},
    {"--deterministic", CMD_TUNE | CMD_SHOW,
     "every shape deterministic: only\n"
     "candidates with bit-identical results run to run"},
    {"--policy exhaustive|fast|predict", CMD_TUNE,
     "time every candidate, a few best guesses, or\n"
     "the candidates its 3 nearest tuned shapes\n"
     "suggest (all where they disagree), marked\n"
     "incomplete for a later tune --pending"},
    {"--devices all|N,N...", CMD_TUNE,
     "tune on these GPUs at once (of one model):\n"
     "a worker process per GPU takes the next\n"
     "shape as it finishes one, all writing\n"
     "the one cache"},
    {"--shard K/N", CMD_TUNE,
     "tune only shard K (0 to N-1) of the shapes\n"
     "(or of --pending's), dealt out in problem-key\n"
     "order, so that N jobs given the same shapes\n"
     "(a Slurm array: $SLURM_ARRAY_TASK_ID/N) each\n"
     "tune their own; `convtune merge` joins them"},
    {"--budget SECONDS", CMD_TUNE,
     "per shape: stop timing after this long and\n"
     "keep the fastest so far (each family's best\n"
     "guesses first), marked incomplete in the\n"
     "cache for a later tune --pending to finish"},
    {"--pending", CMD_TUNE | CMD_LIST,
     "the problems waiting in the cache: those a\n"
     "record-mode program ran untimed (untuned),\n"
     "tunings cut short by their budget\n"
     "(incomplete) and winners carried over from\n"
     "other versions (stale); tune removes each\n"
     "it tunes"},
    {"--stale", CMD_TUNE | CMD_LIST,
     "the pending problems whose winners were\n"
     "carried over from other library versions\n"
     "(a driver or library update; re-validated,\n"
     "not re-timed): tune re-times each"},
    {"--system-cache PATH", CMD_TUNE | CMD_LIST | CMD_VERIFY,
     "a read-only cache, or a directory of them\n"
     "(*.db; one shipped per GPU model), looked\n"
     "up after --cache's before a shape is\n"
     "tuned; never written (source 'system');\n"
     "default: $CONVTUNE_SYSTEM_CACHE, the caches\n"
     "installed with convtune, $XDG_DATA_DIRS/\n"
     "convtune/caches ('convtune version' lists\n"
     "them), \"\" for none; list and verify:\n"
     "the cache(s) to read"},
    {"--dry-run", CMD_VERIFY,
     "check each winner without a GPU: its key\n"
     "rebuilds the shape, it is valid and timed;\n"
     "say which are of this build's versions"},
    {"--verbose", CMD_TUNE,
     "print each candidate's outcome, and the start\n"
     "and end of each tuning, on stderr"},
    {"--progress auto|always|never", CMD_TUNE,
     "a progress line on stderr, redrawn in place\n"
     "(shapes done, elapsed time, ETA, the shape\n"
     "and the candidate being timed): when stderr\n"
     "is a terminal (auto, the default), always,\n"
     "or never (a line per shape)"},
    {"--suite FILE", CMD_SHOW, "SHAPE may be the name of a shape in FILE"},
};

/* Prints `text` indented to column 22, after `head` (on its own line when
 * it does not fit before the column). */
static void print_entry(FILE *out, const char *head, const char *text) {
  int width = fprintf(out, "  %s", head);
  if (width > 20) {
    fputc('\n', out);
    width = 0;
  }
  for (const char *line = text; *line;) {
    const char *nl = strchr(line, '\n');
    int len = nl ? (int)(nl - line) : (int)strlen(line);
    fprintf(out, "%*s%.*s\n", 22 - width, "", len, line);
    width = 0;
    line += len + (nl != NULL);
  }
}

static const char shape_help[] =
    "SHAPE is one argument of NAME=VALUE fields separated by spaces or commas:\n"
    "  n c h w k r s, pad stride dil (both axes) or pad_h pad_w stride_h stride_w\n"
    "  dil_h dil_w, groups, math=strict|tf32, epilogue=none|bias|bias_relu,\n"
    "  layout=nchw|nhwc (nhwc: channels-last, KRSC filter),\n"
    "  dtype=f32|f16|bf16 (of x, w and y; sums and bias stay fp32, and f16 and\n"
    "  bf16 ignore math),\n"
    "  dir=fwd|bwd_data|bwd_filter (backward passes take no epilogue),\n"
    "  det=0|1 (deterministic), op=conv|dynamic (dynamic: per-pixel k x k\n"
    "  filters, r the window, groups G; k, s and pad follow), e.g.\n"
    "  convtune tune \"n=32 c=64 h=56 w=56 k=64 r=3 s=3 pad=1\"\n"
    "  convtune tune \"op=dynamic n=32 c=64 h=56 w=56 r=7 groups=4\"\n";

static const char suite_help[] =
    "A suite FILE is {\"shapes\": [ROW, ...]} or [ROW, ...], each ROW an object\n"
    "with name, N, C, H, W, K, R, S and optional stride, pad, dil, groups, dir,\n"
    "math, dtype (f32, f16, bf16), epilogue; \"op\": \"dynamic\" rows (per-pixel\n"
    "filters) may leave out K, S and pad; rows of other ops are skipped, other\n"
    "keys are ignored.\n";

static const char exit_help[] =
    "exit status:\n"
    "  0    success\n"
    "  1    a shape failed (tune), nothing found (show, report), or the\n"
    "       report could not be written\n"
    "  2    usage error: command, option, shape spec or suite file, or an\n"
    "       -o path refused (not a regular file, or an input)\n"
    "  3    no usable CUDA GPU\n"
    "  4    cache error: missing, unreadable or invalid cache file\n"
    "  5    verify: a shipped winner is slower here than a re-tune\n"
    "  130  interrupted (Ctrl-C); trials measured so far stay in the cache\n";

/* "(tune, show) ": the commands an option applies to; "" for all. */
static const char *option_scope(unsigned commands, char *text, size_t size) {
  size_t used = 0;
  text[0] = '\0';
  for (size_t i = 0; i < COMMAND_COUNT && commands != CMD_ALL && used < size; i++) {
    if (commands & command_help[i].command)
      used += (size_t)snprintf(text + used, size - used, "%s%s", used ? ", " : "(",
                               command_help[i].name);
  }
  if (used > 0 && used < size) snprintf(text + used, size - used, ") ");
  return text;
}

/* The help of one command (its options only), or of the tool
 * (CMD_HELP_ALL). */
static void print_usage(FILE *out, unsigned command) {
  size_t c = 0;
  while (c < COMMAND_COUNT && command_help[c].command != command) c++;
  bool one = command != CMD_HELP_ALL && c < COMMAND_COUNT;
  if (one) {
    fprintf(out, "usage: convtune %s [OPTIONS]\n\n", command_help[c].synopsis);
    print_entry(out, command_help[c].name, command_help[c].text);
  } else {
    fputs("usage: convtune [OPTIONS] COMMAND [OPTIONS]\n"
          "\n"
          "Finds the fastest correct way to run each 2-D convolution on this GPU and\n"
          "keeps every timing in a cache (SQLite).  Options go before or after the\n"
          "command; `convtune COMMAND --help` describes one command.\n"
          "\ncommands:\n",
          out);
    for (size_t i = 0; i < COMMAND_COUNT; i++)
      print_entry(out, command_help[i].synopsis, command_help[i].text);
    print_entry(out, "help", "print this help");
    print_entry(out, "version", "print the library's version and the versions it\n"
                                "runs with (also --version)");
  }
  fputs("\noptions:\n", out);
  for (size_t i = 0; i < sizeof option_help / sizeof option_help[0]; i++) {
    if (one && !(option_help[i].commands & command)) continue;
    char text[512], scope[64];
    snprintf(text, sizeof text, "%s%s",
             one ? "" : option_scope(option_help[i].commands, scope, sizeof scope),
             option_help[i].text);
    print_entry(out, option_help[i].spelling, text);
  }
  bool shapes = !one || command == CMD_TUNE || command == CMD_SHOW;
  if (shapes) fprintf(out, "\n%s", shape_help);
  if (shapes) fputs(suite_help, out);
  fprintf(out, "\n%s", exit_help);
}

/* ================================================================ main */

int main(int argc, char **argv) {
  cli_args a;
  int rc = cli_args_parse(argc, argv, &a);
  if (rc == EXIT_OK_) {
    if (a.help) {
      print_usage(stdout, a.command);
    } else if (a.version) {
      /* The library's version, which a shared build may take from
       * another install than the header this tool was built with. */
      int v = conv_version();
      printf("convtune %d.%d.%d\n%s\n", v / 10000, v / 100 % 100, v % 100,
             conv_library_versions());
      print_system_caches(stdout);
    } else if (a.command == CMD_TUNE) {
      rc = cmd_tune(&a);
    } else if (a.command == CMD_LIST) {
      rc = a.pending ? cmd_list_pending(&a) : cmd_list(&a);
    } else if (a.command == CMD_SHOW) {
      rc = cmd_show(&a);
    } else if (a.command == CMD_REPORT) {
      rc = cmd_report(&a);
    } else if (a.command == CMD_MERGE) {
      rc = cmd_merge(&a);
    } else if (a.command == CMD_EXPORT) {
      rc = cmd_export(&a);
    } else if (a.command == CMD_VERIFY) {
      rc = cmd_verify(&a);
    } else {
      rc = cmd_import(&a);
    }
  }
  cli_args_free(&a);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    say("cannot write the output: %s", strerror(errno));
    if (rc == EXIT_OK_) rc = EXIT_FAILED;
  }
  return rc;
}
