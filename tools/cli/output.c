/* output.c -- messages, number formats and text tables of the CLI. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "tools/cli/cli.h"
#include "tools/text.h"

/* msg as one printable line (text_printable): newlines and tabs become
 * spaces, control characters and bytes that are not UTF-8 "\xNN", and
 * trailing spaces go.  Everything the CLI prints that it did not write
 * itself (cache strings, suite names, paths, specs, library messages)
 * passes through here, so that none of it can drive the terminal. */
const char *one_line(const char *msg, char *buf, size_t size) {
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
void say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say_v(fmt, ap);
  va_end(ap);
}

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say_v(fmt, ap);
  va_end(ap);
  fputs("Try 'convtune --help' for usage.\n", stderr);
  return EXIT_USAGE;
}

int output_outcome(out_file_status status, const char *message, int failed_exit) {
  if (status == OUT_FILE_REFUSED) return usage_error("%s", message);
  if (status == OUT_FILE_OK) return EXIT_OK_;
  say("%s", message);
  return failed_exit;
}

int check_output(out_file *o, const char *target, const char *const *inputs, size_t count,
                 int failed_exit) {
  char message[CLI_PATH_MAX + 256];
  return output_outcome(out_file_check(o, target, inputs, count, message, sizeof message),
                        message, failed_exit);
}

/* The enum name of a status without the CONV_ prefix, e.g. "BAD_GROUPS". */
const char *status_name(conv_status status) {
  static const char *const names[] = {
#define CLI_STATUS_NAME_(name, msg) #name,
      CONV_STATUS_MAP(CLI_STATUS_NAME_)
#undef CLI_STATUS_NAME_
  };
  if ((int)status < 0 || (int)status >= (int)CONV_STATUS_COUNT_) return "UNKNOWN";
  return names[status];
}

const char *source_name(conv_plan_source source) {
  switch (source) {
  case CONV_SOURCE_MEMORY: return "memory";
  case CONV_SOURCE_CACHE: return "cache";
  case CONV_SOURCE_TUNED: return "tuned";
  case CONV_SOURCE_SYSTEM_CACHE: return "system";
  case CONV_SOURCE_HEURISTIC: return "heuristic";
  case CONV_SOURCE_CARRIED: return "carried";
  }
  return "unknown";
}

char *copy_string(const char *s) {
  if (s == NULL) s = "";
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d != NULL) memcpy(d, s, n);
  return d;
}

/* Writes a time in ms to buf, "-" when unknown (negative or not finite). */
const char *format_ms(double ms, char *buf, size_t size) {
  if (!(ms >= 0) || !isfinite(ms)) {
    snprintf(buf, size, "-");
  } else {
    snprintf(buf, size, "%.4f", ms);
  }
  return buf;
}

const char *format_bytes(size_t bytes, char *buf, size_t size) {
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


void table_init(text_table *t, int ncols, const char *const *header, unsigned right) {
  memset(t, 0, sizeof *t);
  t->ncols = ncols;
  for (int i = 0; i < ncols; i++) t->header[i] = header[i];
  t->right_aligned = right;
}

void table_fit(text_table *t, unsigned fingerprints, const int *drop, int drop_count) {
  t->fingerprints = fingerprints;
  t->drop_count = 0;
  for (int i = 0; i < drop_count && i < TABLE_MAX_COLS; i++)
    if (drop[i] >= 0 && drop[i] < t->ncols) t->drop[t->drop_count++] = drop[i];
}

size_t output_columns(FILE *out) {
  struct winsize ws;
  int fd = fileno(out);
  if (fd >= 0 && isatty(fd) && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  const char *env = getenv("COLUMNS");
  char *end = NULL;
  long columns = env != NULL ? strtol(env, &end, 10) : 0;
  return env != NULL && *env != '\0' && *end == '\0' && columns > 0 && columns < 100000
             ? (size_t)columns
             : 0;
}

void table_free(text_table *t) {
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

/* A malloc'd one_line() copy of s (NULL: ""), cut to max_chars characters
 * with "..." at the end (0: whole), or NULL when memory runs out. */
static char *copy_line(const char *s, size_t max_chars) {
  size_t size = 4 * strlen(s ? s : "") + 1; /* every byte may become "\xNN" */
  char *d = malloc(size);
  if (d == NULL) return NULL;
  one_line(s, d, size);
  if (max_chars > 3 && text_chars(d) > max_chars)
    memcpy(d + text_prefix_bytes(d, max_chars - 3), "...", 4);
  char *fitted = realloc(d, strlen(d) + 1);
  return fitted != NULL ? fitted : d;
}

/* Appends a row of ncols cells (NULL: empty), each made one printable
 * line and cut to TABLE_CELL_MAX_CHARS; cells after `span` are ignored. */
bool table_add(text_table *t, const char *const *cells, int span) {
  if (t->nrows == t->cap && !table_grow(t)) return false;
  char **row = t->cells + t->nrows * (size_t)t->ncols;
  for (int i = 0; i < t->ncols; i++) {
    /* A spanning cell widens no column: it is kept whole. */
    row[i] = copy_line(i <= span ? cells[i] : NULL, i == span ? 0 : TABLE_CELL_MAX_CHARS);
    if (row[i] == NULL) {
      for (int j = 0; j < i; j++) free(row[j]);
      return false;
    }
  }
  t->span[t->nrows++] = span;
  return true;
}

/* Each column's width in characters: its widest cell or header. */
static void table_widths(const text_table *t, size_t *width) {
  for (int c = 0; c < t->ncols; c++) width[c] = text_chars(t->header[c]);
  for (size_t r = 0; r < t->nrows; r++) {
    for (int c = 0; c < t->ncols && c < t->span[r]; c++) {
      size_t n = text_chars(t->cells[r * (size_t)t->ncols + (size_t)c]);
      if (n > width[c]) width[c] = n;
    }
  }
}

static void put_spaces(FILE *out, size_t n) {
  for (size_t i = 0; i < n; i++) fputc(' ', out);
}

/* Whether column c is printed: not left out to fit, or a row's spanning
 * cell (an error, which must show). */
static bool shown(unsigned hidden, int c, int span) { return !(hidden & (1u << c)) || c == span; }

static void table_print_row(const text_table *t, FILE *out, const size_t *width, unsigned hidden,
                            const char *const *cells, int span) {
  int last = span < t->ncols ? span : t->ncols - 1;
  /* no trailing blanks */
  while (last > 0 && (cells[last][0] == '\0' || !shown(hidden, last, span))) last--;
  bool first = true;
  for (int c = 0; c <= last; c++) {
    if (!shown(hidden, c, span)) continue;
    if (!first) fputs("  ", out);
    first = false;
    bool right = (t->right_aligned & (1u << c)) && c != span;
    size_t chars = text_chars(cells[c]), pad = chars < width[c] ? width[c] - chars : 0;
    if (right) put_spaces(out, pad);
    fputs(cells[c], out);
    if (!right && c != last) put_spaces(out, pad);
  }
  fputc('\n', out);
}

/* The characters of a line of the columns not hidden. */
static size_t line_chars(const text_table *t, const size_t *width, unsigned hidden) {
  size_t chars = 0;
  int shown_count = 0;
  for (int c = 0; c < t->ncols; c++)
    if (!(hidden & (1u << c))) chars += width[c], shown_count++;
  return chars + (shown_count > 1 ? 2 * (size_t)(shown_count - 1) : 0);
}

/* A table wider than `columns`: GPU fingerprints cut to the GPU's name
 * ("NVIDIA H100 80GB HBM3|sm90|..." to "NVIDIA H100 80GB HBM3"), then the
 * columns of t->drop left out in turn until it fits (or none is left to
 * leave out: the columns that remain run past the edge, uncut, since a
 * problem key must stay whole for `show`).  Returns the hidden columns. */
static unsigned fit(text_table *t, size_t *width, size_t columns) {
  unsigned hidden = 0;
  if (columns == 0 || line_chars(t, width, hidden) <= columns) return 0;
  for (int c = 0; c < t->ncols && t->fingerprints; c++) {
    if (!(t->fingerprints & (1u << c))) continue;
    for (size_t r = 0; r < t->nrows; r++) {
      char *cell = t->cells[r * (size_t)t->ncols + (size_t)c], *bar = strchr(cell, '|');
      if (c < t->span[r] && bar != NULL) *bar = '\0';
    }
  }
  table_widths(t, width);
  for (int i = 0; i < t->drop_count && line_chars(t, width, hidden) > columns; i++)
    hidden |= 1u << t->drop[i];
  return hidden;
}

/* "device, versions" of the hidden columns, for the note. */
static void hidden_names(const text_table *t, unsigned hidden, char *out, size_t size) {
  size_t used = 0;
  out[0] = '\0';
  for (int c = 0; c < t->ncols && used < size; c++)
    if (hidden & (1u << c))
      used += (size_t)snprintf(out + used, size - used, "%s%s", used ? ", " : "", t->header[c]);
}

void table_print(text_table *t, FILE *out) {
  size_t width[TABLE_MAX_COLS];
  table_widths(t, width);
  const size_t columns = output_columns(out);
  const unsigned hidden = fit(t, width, columns);
  table_print_row(t, out, width, hidden, t->header, t->ncols);
  bool first = true;
  for (int c = 0; c < t->ncols; c++) {
    if (hidden & (1u << c)) continue;
    if (!first) fputs("  ", out);
    first = false;
    for (size_t i = 0; i < width[c]; i++) fputc('-', out);
  }
  fputc('\n', out);
  for (size_t r = 0; r < t->nrows; r++) {
    table_print_row(t, out, width, hidden, (const char *const *)(t->cells + r * (size_t)t->ncols),
                    t->span[r]);
  }
  if (hidden != 0) {
    char names[256];
    hidden_names(t, hidden, names, sizeof names);
    say("left out to fit %zu columns: %s (--json, or output to a pipe or file, shows every column)",
        columns, names);
  }
}

int table_finish(text_table *t, bool complete) {
  if (complete) table_print(t, stdout);
  table_free(t);
  if (complete) return EXIT_OK_;
  say("out of memory");
  return EXIT_FAILED;
}
