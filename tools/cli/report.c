/*
 * report.c -- `convtune report`: the cache as one self-contained HTML page
 * (inline CSS and SVG, no script, nothing fetched), read without a GPU.
 *
 * A tuned shape is a winner row of the cache with the trials stored beside
 * it (same problem, device and versions): the rows `convtune show` lists,
 * one device and versions group at a time.  Per shape the page draws every
 * timed candidate as a bar on a log scale, fastest first, marks the winner,
 * cuDNN's default (the trial the tuner marked as the heuristic pick: the
 * first config of cuDNN's own ranking that ran, what an untuned caller
 * gets) and the roofline floor (roofline.h), and lists the failed configs
 * with their reasons.  A summary table at the top links to each chart.
 * Every string from the cache is untrusted: made printable, then escaped.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/cli/cli.h"
#include "tools/cli/roofline.h"
#include "tools/text.h"

/* ================================================================ the rows */

/* One tuned shape: its key, its winner's tuning time and its trials. */
typedef struct shape_rows {
  char *problem, *device, *versions, *tuned_at;
  cli_trial *trials;
  size_t count, cap;
} shape_rows;

typedef struct shape_list {
  shape_rows *items;
  size_t count, cap;
  /* The shapes whose trials are being read: [reading, reading_end), every
   * group of one problem, in device and versions order. */
  size_t reading, reading_end;
  bool out_of_memory;
} shape_list;

static void shape_list_free(shape_list *l) {
  for (size_t i = 0; i < l->count; i++) {
    shape_rows *s = &l->items[i];
    free(s->problem);
    free(s->device);
    free(s->versions);
    free(s->tuned_at);
    free(s->trials);
  }
  free(l->items);
  memset(l, 0, sizeof *l);
}

/* `items` (of `size` bytes each, `count` used) with room for one more: the
 * same array or a larger one, or NULL (items untouched) when memory runs out. */
static void *room_for_one(void *items, size_t *cap, size_t count, size_t size) {
  if (count < *cap) return items;
  size_t more = *cap ? *cap * 2 : 16;
  void *grown = realloc(items, more * size);
  if (grown != NULL) *cap = more;
  return grown;
}

static bool same_group(const shape_rows *s, const conv_cache_entry *row) {
  return strcmp(s->problem, row->problem) == 0 && strcmp(s->device, row->device) == 0 &&
         strcmp(s->versions, row->versions) == 0;
}

/* A winner row starts a shape (rows come ordered by problem, device and
 * versions; a second winner of one group, which only a damaged file has,
 * adds none). */
static int collect_shape(const conv_cache_entry *row, void *user) {
  shape_list *l = user;
  if (l->count > 0 && same_group(&l->items[l->count - 1], row)) return 0;
  shape_rows *items = room_for_one(l->items, &l->cap, l->count, sizeof *items);
  if (items == NULL) goto oom;
  l->items = items;
  shape_rows *s = &items[l->count];
  memset(s, 0, sizeof *s);
  s->problem = copy_string(row->problem);
  s->device = copy_string(row->device);
  s->versions = copy_string(row->versions);
  s->tuned_at = copy_string(row->tuned_at);
  l->count++; /* freed with the list from here on */
  if (s->problem && s->device && s->versions && s->tuned_at) return 0;
oom:
  l->out_of_memory = true;
  return 1;
}

/* The group of [reading, reading_end) with this device and versions, or
 * NULL: a binary search, since one problem may have thousands of groups
 * (one a device) whose trials all come in one listing. */
static shape_rows *group_of(const shape_list *l, const char *device, const char *versions) {
  size_t lo = l->reading, hi = l->reading_end;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(l->items[mid].device, device);
    if (c == 0) c = strcmp(l->items[mid].versions, versions);
    if (c == 0) return &l->items[mid];
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

/* A trial of the problem being read, kept with its group's shape. */
static int collect_trial(const conv_cache_entry *row, void *user) {
  shape_list *l = user;
  shape_rows *s = group_of(l, row->device, row->versions);
  if (s == NULL) return 0;
  cli_trial *trials = room_for_one(s->trials, &s->cap, s->count, sizeof *trials);
  if (trials == NULL) {
    l->out_of_memory = true;
    return 1;
  }
  s->trials = trials;
  cli_trial_copy(row, &trials[s->count++]);
  return 0;
}

/* Every tuned shape of the cache at `path` with its trials.  Returns
 * EXIT_OK_ or the exit code after saying why. */
static int read_shapes(const char *path, shape_list *l) {
  conv_cache_reader *reader = NULL;
  int rc = open_cache_read_only(path, &reader);
  if (rc != EXIT_OK_) return rc;
  char message[512];
  conv_status st = conv_cache_reader_winners(reader, collect_shape, l, message, sizeof message);
  /* Winners come ordered by problem, device and versions: each problem's
   * trials are listed once for all of its groups, not once a group. */
  for (l->reading = 0; l->reading < l->count && st == CONV_OK && !l->out_of_memory;
       l->reading = l->reading_end) {
    const char *problem = l->items[l->reading].problem;
    for (l->reading_end = l->reading + 1;
         l->reading_end < l->count && strcmp(l->items[l->reading_end].problem, problem) == 0;)
      l->reading_end++;
    st = conv_cache_reader_trials(reader, problem, collect_trial, l, message, sizeof message);
  }
  conv_cache_reader_close(reader);
  return cache_read_outcome(path, st, l->out_of_memory, message);
}

/* ================================================================ one shape's numbers */

typedef struct shape_facts {
  const cli_trial *winner;     /* NULL only in a damaged file              */
  const cli_trial *pick;       /* cuDNN's default; NULL when not recorded  */
  const cli_trial *best_cudnn; /* the fastest timed cuDNN config, or NULL  */
  conv_problem problem;
  bool have_problem;            /* the key read back (roofline.h)           */
  const roofline_peaks *peaks;  /* NULL: a GPU without known peaks          */
  double floor_ms;              /* < 0: unknown                             */
} shape_facts;

/* Valid and timed: it gets a bar. */
static bool timed(const cli_trial *t) {
  return t->status == CONV_OK && t->time_ms > 0 && isfinite(t->time_ms);
}

static void shape_facts_get(const shape_rows *s, shape_facts *f) {
  memset(f, 0, sizeof *f);
  f->floor_ms = -1;
  for (size_t i = 0; i < s->count; i++) {
    const cli_trial *t = &s->trials[i];
    if (t->winner && f->winner == NULL) f->winner = t;
    if (!timed(t)) continue;
    if (t->heuristic_pick && f->pick == NULL) f->pick = t;
    if (strcmp(t->algorithm, "cudnn") == 0 &&
        (f->best_cudnn == NULL || t->time_ms < f->best_cudnn->time_ms))
      f->best_cudnn = t;
  }
  f->have_problem = conv_problem_from_key(s->problem, &f->problem) == CONV_OK;
  f->peaks = roofline_peaks_for(s->device);
  if (f->have_problem && f->peaks != NULL) f->floor_ms = roofline_floor_ms(&f->problem, f->peaks);
}

/* ================================================================ text */

#define TEXT_MAX 4096 /* longer cache strings are cut (at a character) */

/* s, made one printable line (text_printable), as HTML text: usable in
 * element content and in quoted attribute values. */
static void put_escaped(FILE *out, const char *s) {
  for (; *s; s++) {
    switch (*s) {
    case '&': fputs("&amp;", out); break;
    case '<': fputs("&lt;", out); break;
    case '>': fputs("&gt;", out); break;
    case '"': fputs("&quot;", out); break;
    case '\'': fputs("&#39;", out); break;
    default: fputc(*s, out);
    }
  }
}

/* Untrusted text, cut to `max_chars` characters (0: no limit) with an
 * ellipsis, made printable and escaped. */
static void put_text_cut(FILE *out, const char *s, size_t max_chars) {
  char line[TEXT_MAX];
  text_printable(s, line, sizeof line);
  bool cut = max_chars > 0 && text_chars(line) > max_chars;
  if (cut) line[text_prefix_bytes(line, max_chars - 1)] = '\0'; /* room for the ellipsis */
  put_escaped(out, line);
  if (cut) fputs("&#8230;", out);
}

static void put_text(FILE *out, const char *s) { put_text_cut(out, s, 0); }

/* "ALGORITHM CONFIG" of a trial. */
static void put_config(FILE *out, const cli_trial *t, size_t max_chars) {
  char both[sizeof t->algorithm + sizeof t->config_text + 1];
  snprintf(both, sizeof both, "%s %s", t->algorithm, t->config_text);
  put_text_cut(out, both, max_chars);
}

/* The GPU's name: the device key up to its first '|'. */
static void put_device_name(FILE *out, const char *device) {
  char name[TEXT_MAX];
  snprintf(name, sizeof name, "%.*s", (int)strcspn(device, "|"), device);
  put_text(out, name);
}

static const char *fmt_ms(double ms, char *buf, size_t size) {
  if (!(ms >= 0) || !isfinite(ms)) snprintf(buf, size, "-");
  else if (ms >= 100) snprintf(buf, size, "%.1f", ms);
  else if (ms >= 0.001) snprintf(buf, size, "%.4f", ms);
  else snprintf(buf, size, "%.2g", ms);
  return buf;
}

/* base / time as "1.23x"; "-" without both. */
static const char *fmt_speedup(const cli_trial *base, const cli_trial *t, char *buf, size_t size) {
  if (base == NULL || t == NULL || !timed(base) || !timed(t)) snprintf(buf, size, "-");
  else snprintf(buf, size, "%.2fx", base->time_ms / t->time_ms);
  return buf;
}

/* floor / time in percent, two digits under 1% (as tools/bench does). */
static const char *fmt_percent(double floor_ms, const cli_trial *t, char *buf, size_t size) {
  if (!(floor_ms > 0) || t == NULL || !timed(t)) {
    snprintf(buf, size, "-");
    return buf;
  }
  double pct = floor_ms / t->time_ms * 100.0;
  snprintf(buf, size, pct >= 1 ? "%.1f%%" : "%.2g%%", pct);
  return buf;
}

static double time_of(const cli_trial *t) { return t != NULL && timed(t) ? t->time_ms : -1; }

/* ================================================================ the chart */

/* An SVG of CHART_W pixels: labels right-aligned before PLOT_X, bars from
 * PLOT_X over PLOT_W pixels, each bar's time (and marks) after it. */
enum {
  CHART_W = 1100,
  PLOT_X = 340,
  PLOT_W = 520,
  ROW_H = 16,
  CHART_TOP = 24,    /* the floor's label above the bars */
  CHART_BOTTOM = 24, /* the scale's labels below them */
  LABEL_CHARS = 48
};

/* A log scale from 10^lo to 10^hi ms. */
typedef struct log_scale {
  int lo, hi;
} log_scale;

/* Powers of ten around the bars and the floor, unless the floor is more
 * than two decades below the fastest bar: that one is marked at the left
 * edge instead of squeezing every bar. */
static log_scale scale_for(double fastest, double slowest, double floor_ms) {
  double lo = fastest;
  if (floor_ms > 0 && floor_ms < lo && floor_ms >= fastest / 100) lo = floor_ms;
  if (floor_ms > slowest) slowest = floor_ms;
  log_scale sc = {(int)floor(log10(fmax(lo, 1e-6))), (int)ceil(log10(fmax(slowest, 1e-6)))};
  if (sc.hi <= sc.lo) sc.hi = sc.lo + 1;
  if (sc.hi > sc.lo + 12) sc.lo = sc.hi - 12; /* a damaged time; keep the chart sane */
  return sc;
}

static double scale_x(const log_scale *sc, double ms) {
  double f = (log10(fmax(ms, 1e-300)) - sc->lo) / (sc->hi - sc->lo);
  return PLOT_X + fmin(fmax(f, 0.0), 1.0) * PLOT_W;
}

static void put_gridline(FILE *out, const log_scale *sc, double ms, double bottom, bool major) {
  double x = scale_x(sc, ms);
  fprintf(out, "<line class=\"%s\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\"/>",
          major ? "grid" : "grid minor", x, CHART_TOP, x, bottom);
  fprintf(out, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\">%g ms</text>\n", x, bottom + 14, ms);
}

/* Gridlines at the powers of ten, and at 2 and 5 times them when the
 * scale spans two decades or less. */
static void put_grid(FILE *out, const log_scale *sc, double bottom) {
  for (int d = sc->lo; d <= sc->hi; d++) {
    double decade = pow(10.0, d);
    put_gridline(out, sc, decade, bottom, true);
    if (sc->hi - sc->lo > 2 || d == sc->hi) continue;
    put_gridline(out, sc, 2 * decade, bottom, false);
    put_gridline(out, sc, 5 * decade, bottom, false);
  }
}

static void put_floor_line(FILE *out, const log_scale *sc, double floor_ms, double bottom) {
  if (!(floor_ms > 0)) return;
  bool off_scale = floor_ms < pow(10.0, sc->lo);
  double x = scale_x(sc, floor_ms);
  char ms[32];
  fprintf(out, "<line class=\"floor\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\"/>", x,
          CHART_TOP - 6, x, bottom);
  fprintf(out, "<text class=\"floor\" x=\"%.1f\" y=\"%d\">roofline floor %s ms%s</text>\n", x,
          CHART_TOP - 10, fmt_ms(floor_ms, ms, sizeof ms), off_scale ? " (further left)" : "");
}

/* The bar's class: what its colour says. */
static const char *bar_kind(const cli_trial *t, const shape_facts *f) {
  if (t == f->winner) return "winner";
  if (t == f->pick) return "default";
  return strcmp(t->algorithm, "cudnn") == 0 ? "cudnn" : "other";
}

static void put_marks(FILE *out, const cli_trial *t, const shape_facts *f) {
  if (t == f->winner) fputs(" \xe2\x98\x85 winner", out); /* a star */
  if (t == f->pick) fputs(t == f->winner ? ", cuDNN default" : " \xe2\x97\x86 cuDNN default", out);
}

static void put_bar(FILE *out, const log_scale *sc, const cli_trial *t, const shape_facts *f,
                    size_t row) {
  double y = CHART_TOP + (double)row * ROW_H, x = scale_x(sc, t->time_ms);
  double width = fmax(x - PLOT_X, 2.0);
  char ms[32];
  fmt_ms(t->time_ms, ms, sizeof ms);
  fprintf(out, "<g class=\"bar %s\"><title>", bar_kind(t, f));
  put_config(out, t, 0);
  fprintf(out, ": %s ms", ms);
  put_marks(out, t, f);
  fprintf(out, "</title><text class=\"label\" x=\"%d\" y=\"%.1f\">", PLOT_X - 8, y + 12);
  put_config(out, t, LABEL_CHARS);
  fprintf(out, "</text><rect x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"%d\"/>", PLOT_X, y + 2,
          width, ROW_H - 4);
  fprintf(out, "<text class=\"time\" x=\"%.1f\" y=\"%.1f\">%s ms", PLOT_X + width + 6, y + 12, ms);
  put_marks(out, t, f);
  fputs("</text></g>\n", out);
}

static int compare_time(const void *pa, const void *pb) {
  const cli_trial *a = *(const cli_trial *const *)pa, *b = *(const cli_trial *const *)pb;
  return (a->time_ms > b->time_ms) - (a->time_ms < b->time_ms);
}

/* The timed trials of s, fastest first, into bars[] (s->count long). */
static size_t sorted_bars(const shape_rows *s, const cli_trial **bars) {
  size_t n = 0;
  for (size_t i = 0; i < s->count; i++)
    if (timed(&s->trials[i])) bars[n++] = &s->trials[i];
  qsort(bars, n, sizeof *bars, compare_time);
  return n;
}

/* One chart: a bar per timed config on a log scale, the floor's line. */
static void put_chart(FILE *out, const cli_trial *const *bars, size_t n, const shape_facts *f) {
  double bottom = CHART_TOP + (double)(n ? n : 1) * ROW_H;
  int height = (int)bottom + CHART_BOTTOM;
  fprintf(out, "<svg class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\">\n",
          CHART_W, height, CHART_W, height);
  if (n == 0) {
    fprintf(out, "<text class=\"label\" x=\"%d\" y=\"%d\">no timed configs</text>\n", PLOT_X - 8,
            CHART_TOP + 12);
  } else {
    log_scale sc = scale_for(bars[0]->time_ms, bars[n - 1]->time_ms, f->floor_ms);
    put_grid(out, &sc, bottom);
    for (size_t i = 0; i < n; i++) put_bar(out, &sc, bars[i], f, i);
    put_floor_line(out, &sc, f->floor_ms, bottom);
  }
  fputs("</svg>\n", out);
}

/* ================================================================ a shape's section */

/* The configs without a bar: failed, unsupported or not timed. */
static void put_failures(FILE *out, const shape_rows *s) {
  size_t n = 0;
  for (size_t i = 0; i < s->count; i++) n += !timed(&s->trials[i]);
  if (n == 0) return;
  fprintf(out, "<p>%zu config%s without a bar (failed, unsupported or not timed):</p>\n"
               "<table class=\"failed\"><tr><th>config</th><th>status</th><th>reason</th></tr>\n",
          n, n == 1 ? "" : "s");
  for (size_t i = 0; i < s->count; i++) {
    const cli_trial *t = &s->trials[i];
    if (timed(t)) continue;
    fputs("<tr><td>", out);
    put_config(out, t, 0);
    fprintf(out, "</td><td>%s</td><td>", status_name(t->status));
    put_text(out, t->reason[0] ? t->reason : "-");
    fputs("</td></tr>\n", out);
  }
  fputs("</table>\n", out);
}

/* What the floor is made of, or why there is none. */
static void put_floor_text(FILE *out, const shape_rows *s, const shape_facts *f) {
  char ms[32], pct[32];
  if (!f->have_problem) {
    fputs("<p class=\"floor\">No roofline floor: the problem key is not one this version "
          "reads.</p>\n", out);
  } else if (f->peaks == NULL) {
    fputs("<p class=\"floor\">No roofline floor: no peak numbers are known for the GPU ", out);
    put_device_name(out, s->device);
    fputs(" (see the legend).</p>\n", out);
  } else {
    fprintf(out,
            "<p class=\"floor\">Roofline floor %s ms: the longer of %.3g GFLOP at %.1f TFLOP/s "
            "(%s) and %.3g MB at %.2f TB/s; the winner runs at %s of it.</p>\n",
            fmt_ms(f->floor_ms, ms, sizeof ms), roofline_flops(&f->problem) / 1e9,
            roofline_rate(&f->problem, f->peaks) / 1e12, roofline_rate_name(&f->problem),
            roofline_bytes(&f->problem) / 1e6,
            f->peaks->copy_bytes_per_s / 1e12, fmt_percent(f->floor_ms, f->winner, pct, sizeof pct));
  }
}

static void put_meta(FILE *out, const shape_rows *s, const shape_facts *f) {
  fputs("<p class=\"meta\">device ", out);
  put_text(out, s->device);
  fputs("<br>versions ", out);
  put_text(out, s->versions);
  fputs("<br>tuned at ", out);
  put_text(out, s->tuned_at);
  if (f->pick == NULL) fputs("<br>cuDNN default: not recorded for this shape", out);
  fputs("</p>\n", out);
}

static bool put_shape(FILE *out, size_t index, const shape_rows *s, const shape_facts *f) {
  const cli_trial **bars = malloc((s->count ? s->count : 1) * sizeof *bars);
  if (bars == NULL) return false;
  size_t n = sorted_bars(s, bars);
  fprintf(out, "<section class=\"shape\" id=\"shape-%zu\">\n<h2>%zu. ", index + 1, index + 1);
  put_text(out, s->problem);
  fputs("</h2>\n", out);
  put_meta(out, s, f);
  put_floor_text(out, s, f);
  put_chart(out, bars, n, f);
  put_failures(out, s);
  fputs("<p><a href=\"#summary\">back to the summary</a></p>\n</section>\n", out);
  free(bars);
  return true;
}

/* ================================================================ the page */

static const char page_style[] =
    "body{font:14px/1.45 system-ui,sans-serif;color:#1d1d1f;background:#fff;margin:24px;"
    "max-width:1140px}\n"
    "h1{font-size:22px}h2{font-size:15px;font-family:monospace;margin-top:32px;"
    "word-break:break-all}\n"
    "table{border-collapse:collapse;font-size:12px}\n"
    "th,td{border-bottom:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}\n"
    "th{background:#f3f3f5}td.num{text-align:right;font-variant-numeric:tabular-nums;"
    "white-space:nowrap}\n"
    "td.key{font-family:monospace;word-break:break-all}\n"
    ".meta{color:#555;font-size:12px;font-family:monospace;word-break:break-all}\n"
    "p.floor{font-size:13px}\n"
    "svg.chart{display:block;max-width:100%;height:auto;margin:8px 0}\n"
    "svg text{font:11px monospace;fill:#1d1d1f}\n"
    "text.label{text-anchor:end}text.tick{text-anchor:middle;fill:#666}\n"
    "line.grid{stroke:#ccc}line.minor{stroke:#eee}\n"
    "line.floor{stroke:#d62728;stroke-width:2;stroke-dasharray:5 3}text.floor{fill:#d62728}\n"
    ".winner rect,.swatch.winner{fill:#2ca02c}.default rect,.swatch.default{fill:#ff7f0e}\n"
    ".cudnn rect,.swatch.cudnn{fill:#6f9fd8}.other rect,.swatch.other{fill:#9467bd}\n"
    ".winner text.time{font-weight:bold}\n"
    "text.time,text.floor{paint-order:stroke;stroke:#fff;stroke-width:3px}\n"
    "table.failed td:first-child{font-family:monospace}\n"
    "ul.legend{list-style:none;padding-left:0}ul.legend li{margin:4px 0}\n";

static void put_head(FILE *out) {
  fprintf(out,
          "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<title>convtune tuning report</title>\n<style>\n%s</style>\n</head>\n<body>\n",
          page_style);
}

static void put_swatch(FILE *out, const char *kind, const char *text) {
  fprintf(out,
          "<li><svg width=\"14\" height=\"10\"><rect class=\"swatch %s\" width=\"14\" "
          "height=\"10\"/></svg> %s</li>\n",
          kind, text);
}

/* The peaks behind the floors of this report, each once. */
static void put_peak_sources(FILE *out, const shape_facts *facts, size_t count) {
  bool unknown = false;
  for (size_t i = 0; i < count; i++) {
    const roofline_peaks *p = facts[i].peaks;
    bool first = p != NULL;
    for (size_t j = 0; j < i && first; j++) first = facts[j].peaks != p;
    if (first) {
      fputs("<li>", out);
      put_text(out, p->name);
      fputs(": ", out);
      put_text(out, p->source);
      fputs(".</li>\n", out);
    }
    unknown = unknown || p == NULL;
  }
  if (unknown)
    fputs("<li>Shapes tuned on a GPU without known peak numbers (only the NVIDIA H100 SXM "
          "and H200 SXM are known) have no floor: their floor columns show \"-\".</li>\n",
          out);
}

static void put_legend(FILE *out, const shape_facts *facts, size_t count) {
  fputs("<h2 id=\"legend\">How to read the charts</h2>\n<ul class=\"legend\">\n", out);
  put_swatch(out, "winner", "the winner (\xe2\x98\x85): the fastest config that validated, "
                            "which plans of the shape run");
  put_swatch(out, "default",
             "cuDNN's default (\xe2\x97\x86): the config the tuner recorded as the heuristic "
             "pick, the first of cuDNN's own ranking that ran and validated, which is what a "
             "caller of cuDNN gets without tuning");
  put_swatch(out, "cudnn", "the other cuDNN engine configs");
  put_swatch(out, "other", "the other families (GEMM, FFT, convtune's own kernels)");
  fputs("<li>Bars are each timed config's median time, fastest first, on a log scale "
        "(gridlines at powers of ten); hover a bar for its full config. Configs that failed, "
        "were unsupported or were not timed get no bar: each chart's table lists them with "
        "their reason.</li>\n"
        "<li><span style=\"color:#d62728\">Red dashed line</span>: the roofline floor, the "
        "longer of the direct algorithm's FLOPs (2&#183;N&#183;K&#183;P&#183;Q&#183;C/groups"
        "&#183;R&#183;S) at the GPU's matmul rate for the math mode (fp16 and bf16: its "
        "half-precision tensor cores) and its bytes (4&#183;(|x|+|w|+|y|), 2 bytes an "
        "element for fp16 and bf16, plus the fp32 bias) at its copy bandwidth. Winograd and FFT "
        "configs do fewer multiply-adds and may beat it. Peaks used:</li>\n",
        out);
  put_peak_sources(out, facts, count);
  fputs("<li>Speedups are the cuDNN time divided by the winner's; % of floor is the floor "
        "divided by the winner's time.</li>\n</ul>\n",
        out);
}

static void put_summary_row(FILE *out, size_t index, const shape_rows *s, const shape_facts *f) {
  char w[32], d[32], b[32], sd[32], sb[32], fl[32], pct[32];
  fprintf(out, "<tr><td class=\"num\">%zu</td><td class=\"key\"><a href=\"#shape-%zu\">",
          index + 1, index + 1);
  put_text(out, s->problem);
  fputs("</a></td><td>", out);
  put_device_name(out, s->device);
  fputs("</td><td>", out);
  if (f->winner != NULL) put_config(out, f->winner, 40);
  fprintf(out,
          "</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td class=\"num\">%s</td>"
          "<td class=\"num\">%s</td><td class=\"num\">%s</td><td class=\"num\">%s</td>"
          "<td class=\"num\">%s</td></tr>\n",
          fmt_ms(time_of(f->winner), w, sizeof w), fmt_ms(time_of(f->pick), d, sizeof d),
          fmt_ms(time_of(f->best_cudnn), b, sizeof b), fmt_speedup(f->pick, f->winner, sd, sizeof sd),
          fmt_speedup(f->best_cudnn, f->winner, sb, sizeof sb), fmt_ms(f->floor_ms, fl, sizeof fl),
          fmt_percent(f->floor_ms, f->winner, pct, sizeof pct));
}

static void put_summary(FILE *out, const shape_list *l, const shape_facts *facts) {
  fputs("<h2 id=\"summary\">Summary</h2>\n<table class=\"summary\">\n<tr><th>#</th><th>shape "
        "(problem key)</th><th>GPU</th><th>winner</th><th>winner ms</th><th>cuDNN default "
        "ms</th><th>fastest cuDNN ms</th><th>speedup vs default</th><th>speedup vs fastest "
        "cuDNN</th><th>floor ms</th><th>% of floor</th></tr>\n",
        out);
  for (size_t i = 0; i < l->count; i++) put_summary_row(out, i, &l->items[i], &facts[i]);
  fputs("</table>\n", out);
}

/* The whole page; false when memory ran out. */
static bool put_page(FILE *out, const char *cache, const shape_list *l, const shape_facts *facts) {
  int v = conv_version();
  put_head(out);
  fputs("<h1>convtune tuning report</h1>\n<p>Cache <code>", out);
  put_text(out, cache);
  fprintf(out, "</code>: %zu tuned shape%s. Made by convtune %d.%d.%d.</p>\n", l->count,
          l->count == 1 ? "" : "s", v / 10000, v / 100 % 100, v % 100);
  put_summary(out, l, facts);
  put_legend(out, facts, l->count);
  for (size_t i = 0; i < l->count; i++)
    if (!put_shape(out, i, &l->items[i], &facts[i])) return false;
  fputs("</body>\n</html>\n", out);
  return true;
}

/* The page into the staged file of `o`, moved onto its target when whole:
 * a failed write leaves the target as it was. */
static int write_page_file(out_file *o, const char *cache, const shape_list *l,
                           const shape_facts *facts) {
  char message[CLI_PATH_MAX + 256];
  int rc = output_outcome(out_file_stage(o, message, sizeof message), message, EXIT_FAILED);
  if (rc != EXIT_OK_) return rc;
  int fd = open(o->staged, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  FILE *out = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (out == NULL) {
    say("cannot write %s: %s", o->target, strerror(errno));
    if (fd >= 0) close(fd);
    out_file_discard(o);
    return EXIT_FAILED;
  }
  if (!put_page(out, cache, l, facts)) {
    say("out of memory");
    rc = EXIT_FAILED;
  }
  bool failed = ferror(out) != 0;
  if ((fclose(out) != 0 || failed) && rc == EXIT_OK_) {
    say("cannot write %s: %s", o->target, strerror(errno));
    rc = EXIT_FAILED;
  }
  if (rc != EXIT_OK_) {
    out_file_discard(o);
    return rc;
  }
  return output_outcome(out_file_commit(o, message, sizeof message), message, EXIT_FAILED);
}

/* Writes the page to o's target, or to stdout when o is NULL. */
static int write_report(out_file *o, const char *cache, const shape_list *l) {
  shape_facts *facts = calloc(l->count, sizeof *facts);
  if (facts == NULL) {
    say("out of memory");
    return EXIT_FAILED;
  }
  for (size_t i = 0; i < l->count; i++) shape_facts_get(&l->items[i], &facts[i]);
  int rc = EXIT_OK_;
  if (o != NULL) {
    rc = write_page_file(o, cache, l, facts);
  } else if (!put_page(stdout, cache, l, facts)) { /* main() checks stdout's errors */
    say("out of memory");
    rc = EXIT_FAILED;
  }
  free(facts);
  return rc;
}

int cmd_report(const cli_args *a) {
  char path[CLI_PATH_MAX];
  shape_list l;
  memset(&l, 0, sizeof l);
  out_file o;
  bool to_stdout = strcmp(a->output_path, "-") == 0;
  int rc = cache_path(a, false, path, sizeof path);
  /* The output is checked first: never the cache itself (a hard link or
   * another spelling of it too), never a FIFO that would block. */
  const char *inputs[] = {path};
  if (rc == EXIT_OK_ && !to_stdout) rc = check_output(&o, a->output_path, inputs, 1, EXIT_FAILED);
  if (rc == EXIT_OK_) rc = read_shapes(path, &l);
  if (rc == EXIT_OK_ && l.count == 0) {
    say("no tuned shapes in %s: nothing to report (run 'convtune tune' first)", path);
    rc = EXIT_FAILED;
  }
  if (rc == EXIT_OK_) rc = write_report(to_stdout ? NULL : &o, path, &l);
  shape_list_free(&l);
  return rc;
}
