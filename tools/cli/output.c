/* output.c -- messages, number formats and text tables of the CLI. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void table_print_row(const text_table *t, FILE *out, const size_t *width,
                            const char *const *cells, int span) {
  int last = span < t->ncols ? span : t->ncols - 1;
  while (last > 0 && cells[last][0] == '\0') last--; /* no trailing blanks */
  for (int c = 0; c <= last; c++) {
    if (c > 0) fputs("  ", out);
    bool right = (t->right_aligned & (1u << c)) && c != span;
    size_t chars = text_chars(cells[c]), pad = chars < width[c] ? width[c] - chars : 0;
    if (right) put_spaces(out, pad);
    fputs(cells[c], out);
    if (!right && c != last) put_spaces(out, pad);
  }
  fputc('\n', out);
}

void table_print(const text_table *t, FILE *out) {
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

int table_finish(text_table *t, bool complete) {
  if (complete) table_print(t, stdout);
  table_free(t);
  if (complete) return EXIT_OK_;
  say("out of memory");
  return EXIT_FAILED;
}
