/* progress.c -- the progress line of `convtune tune` (see progress.h). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "tools/cli/progress.h"
#include "tools/text.h"

double progress_eta(const progress *p) {
  if (p->done >= p->total) return 0;
  if (p->done == 0) return -1;
  double mean = p->finished_s / (double)p->done;
  double eta = mean * (double)(p->total - p->done) - (p->elapsed_s - p->finished_s);
  return eta > 0 ? eta : 0;
}

const char *format_duration(double seconds, char *buf, size_t size) {
  if (!isfinite(seconds) || seconds < 0) {
    snprintf(buf, size, "?");
    return buf;
  }
  double rounded = floor(seconds + 0.5);
  unsigned long long t = rounded < 3.6e9 ? (unsigned long long)rounded : 3600000000ull;
  if (t < 60)
    snprintf(buf, size, "%llus", t);
  else if (t < 3600)
    snprintf(buf, size, "%llu:%02llu", t / 60, t % 60);
  else
    snprintf(buf, size, "%llu:%02llu:%02llu", t / 3600, t / 60 % 60, t % 60);
  return buf;
}

/* The line being written: bytes against size, columns against max_cols. */
typedef struct line {
  char *buf;
  size_t size, len;
  int cols, max_cols;
} line;

/* Columns of UTF-8 text: one per character. */
static int columns(const char *s) { return (int)text_chars(s); }

/* Appends `text` whole, two spaces after what is there; false (nothing
 * appended) when it does not fit. */
static bool put(line *l, const char *text) {
  const char *sep = l->len > 0 ? "  " : "";
  int cols = (int)strlen(sep) + columns(text);
  size_t bytes = strlen(sep) + strlen(text);
  if (l->cols + cols > l->max_cols || l->len + bytes >= l->size) return false;
  snprintf(l->buf + l->len, l->size - l->len, "%s%s", sep, text);
  l->len += bytes;
  l->cols += cols;
  return true;
}

/* Columns a part could have after its separator. */
static int room(const line *l) { return l->max_cols - l->cols - (l->len > 0 ? 2 : 0); }

/* Appends `text` (under 1024 bytes) cut to `cols` columns and to the bytes
 * left in the buffer ("..." at the end of a cut one); nothing when fewer
 * than `min` columns are allowed. */
static bool put_cut(line *l, const char *text, int cols, int min) {
  size_t sep = l->len > 0 ? 2 : 0;
  if (cols < min || cols < 4 || l->size - l->len <= sep + 4) return false;
  size_t avail = l->size - l->len - sep; /* bytes, the NUL's included */
  if (columns(text) <= cols && strlen(text) < avail) return put(l, text);
  /* At least 4 characters go, so the kept bytes and "..." fit in 1024. */
  size_t keep = text_prefix_bytes(text, (size_t)(cols - 3));
  while (keep > 0 && keep + 4 > avail) { /* back to a character boundary */
    keep--;
    while (keep > 0 && ((unsigned char)text[keep] & 0xC0) == 0x80) keep--;
  }
  if (keep == 0) return false;
  char cut[1024];
  memcpy(cut, text, keep);
  memcpy(cut + keep, "...", 4);
  return put(l, cut);
}

/* The shape and the candidate in what is left: both whole where they fit,
 * else the shape gets at least 3/5 of the room and the candidate the rest. */
static void put_names(line *l, const char *shape, const char *candidate) {
  int left = room(l);
  int shape_cols = columns(shape), candidate_cols = columns(candidate);
  if (candidate_cols == 0 || shape_cols + 2 + candidate_cols <= left) {
    put_cut(l, shape, left, 4);
    if (candidate_cols > 0) put_cut(l, candidate, room(l), 8);
    return;
  }
  int shape_room = left - 2 - candidate_cols;
  if (shape_room < left * 3 / 5) shape_room = left * 3 / 5;
  if (shape_room > shape_cols) shape_room = shape_cols;
  if (put_cut(l, shape, shape_room, 4)) put_cut(l, candidate, room(l), 8);
}

size_t progress_line(char *buf, size_t size, const progress *p, int width) {
  if (size == 0) return 0;
  buf[0] = '\0';
  line l = {buf, size, 0, 0, width > 1 ? width - 1 : 0};
  char part[64], time[32];

  int cells = width >= 80 ? 20 : width >= 60 ? 10 : 0;
  if (cells > 0) {
    size_t filled = p->total > 0 ? (p->done < p->total ? p->done : p->total) * (size_t)cells / p->total : 0;
    part[0] = '[';
    for (int i = 0; i < cells; i++) part[1 + i] = (size_t)i < filled ? '#' : '.';
    part[1 + cells] = ']';
    part[2 + cells] = '\0';
    put(&l, part);
  }
  int digits = snprintf(NULL, 0, "%zu", p->total);
  snprintf(part, sizeof part, "%*zu/%zu", digits, p->done, p->total);
  if (!put(&l, part)) return l.len;
  if (!put(&l, format_duration(p->elapsed_s, time, sizeof time))) return l.len;
  bool all_done = p->total > 0 && p->done >= p->total;
  if (!all_done) {
    double eta = progress_eta(p);
    snprintf(part, sizeof part, "ETA %s", eta < 0 ? "?" : format_duration(eta, time, sizeof time));
    if (!put(&l, part)) return l.len;
  }

  char shape[1024], candidate[1024];
  text_printable(p->shape, shape, sizeof shape);
  text_printable(p->candidate, candidate, sizeof candidate);
  if (shape[0] != '\0')
    put_names(&l, shape, candidate);
  else if (all_done)
    put(&l, "done");
  return l.len;
}
