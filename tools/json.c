/*
 * json.c -- reading JSON with jansson, the writer, and the suite loader.
 * See json.h for what is accepted.
 */
#include "tools/json.h"
#include "tools/text.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ================================================================ reader */

static json_t *load(const char *text, size_t len, json_error_t *err) {
  return json_loadb(text, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, err);
}

/* Steps over a leading UTF-8 byte order mark. */
static void skip_bom(const char **text, size_t *len) {
  if (*len >= 3 && memcmp(*text, "\xef\xbb\xbf", 3) == 0) {
    *text += 3;
    *len -= 3;
  }
}

json_t *json_load_strict(const char *text, size_t len, json_error_t *err) {
  skip_bom(&text, &len);
  return load(text, len, err);
}

/* ================================================================ writer */

void json_write_string(FILE *out, const char *s) {
  if (s == NULL) {
    fputs("null", out);
    return;
  }
  fputc('"', out);
  const unsigned char *c = (const unsigned char *)s, *end = c + strlen(s);
  while (c < end) {
    bool printable;
    size_t n = text_next(c, (size_t)(end - c), &printable);
    if (*c >= 0x80) {
      /* Valid UTF-8 as it is, a control (C1, bidi) as \uXXXX, the same
       * text to a JSON reader that a terminal cannot act on; any other
       * byte (a hostile cache's) becomes U+FFFD, so that the output is
       * always valid JSON. */
      if (printable)
        fwrite(c, 1, n, out);
      else if (n > 1)
        fprintf(out, "\\u%04x", (unsigned)utf8_decode(c, n));
      else
        fputs("\\ufffd", out);
      c += n;
      continue;
    }
    switch (*c) {
    case '"': fputs("\\\"", out); break;
    case '\\': fputs("\\\\", out); break;
    case '\n': fputs("\\n", out); break;
    case '\r': fputs("\\r", out); break;
    case '\t': fputs("\\t", out); break;
    case '\b': fputs("\\b", out); break;
    case '\f': fputs("\\f", out); break;
    default:
      if (printable)
        fputc(*c, out);
      else
        fprintf(out, "\\u%04x", (unsigned)*c); /* C0 and DEL */
    }
    c++;
  }
  fputc('"', out);
}

void json_write_number(FILE *out, double value) {
  if (!isfinite(value)) {
    fputs("null", out);
    return;
  }
  char text[40];
  snprintf(text, sizeof text, "%.15g", value);
  if (strtod(text, NULL) != value) snprintf(text, sizeof text, "%.17g", value);
  fputs(text, out);
}

/* ================================================================ suites */

static char *dup_string(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d != NULL) memcpy(d, s, n);
  return d;
}

void suite_init(suite *s) { memset(s, 0, sizeof *s); }

void suite_free(suite *s) {
  if (s == NULL) return;
  for (size_t i = 0; i < s->count; i++) free(s->shapes[i].name);
  for (size_t i = 0; i < s->note_count; i++) free(s->notes[i]);
  free(s->shapes);
  free(s->notes);
  suite_init(s);
}

bool suite_add(suite *s, const char *name, const conv_problem *problem) {
  if (s->count == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 8;
    suite_shape *grown = realloc(s->shapes, cap * sizeof *grown);
    if (grown == NULL) return false;
    s->shapes = grown;
    s->cap = cap;
  }
  char *copy = dup_string(name);
  if (copy == NULL) return false;
  s->shapes[s->count].name = copy;
  s->shapes[s->count].problem = *problem;
  s->count++;
  return true;
}

static bool suite_add_note(suite *s, char *note /* owned */) {
  if (s->note_count == s->note_cap) {
    size_t cap = s->note_cap ? s->note_cap * 2 : 4;
    char **grown = realloc(s->notes, cap * sizeof *grown);
    if (grown == NULL) {
      free(note);
      return false;
    }
    s->notes = grown;
    s->note_cap = cap;
  }
  s->notes[s->note_count++] = note;
  return true;
}

/* ---------------------------------------------------------------- where */

/* jansson places only syntax errors.  A message about a row or a field is
 * placed by scanning the text again for where that value starts: jansson
 * has read the text, so it is valid JSON, and a scan needs only strings
 * (skipped whole), brackets and commas. */

static size_t skip_space(const char *t, size_t len, size_t i) {
  while (i < len && (t[i] == ' ' || t[i] == '\t' || t[i] == '\r' || t[i] == '\n')) i++;
  return i;
}

/* The offset of the '"' that closes the string opening at t[i]. */
static size_t closing_quote(const char *t, size_t len, size_t i) {
  for (i++; i < len && t[i] != '"'; i++) {
    if (t[i] == '\\') i++;
  }
  return i < len ? i : len;
}

/* From an element of an array or object (a value, or "key": value) at
 * t[i]: where the next element starts, or the container's closing bracket. */
static size_t next_element(const char *t, size_t len, size_t i) {
  int depth = 0;
  for (; i < len; i++) {
    if (t[i] == '"') {
      i = closing_quote(t, len, i);
    } else if (t[i] == '[' || t[i] == '{') {
      depth++;
    } else if (t[i] == ']' || t[i] == '}') {
      if (depth-- == 0) return i;
    } else if (t[i] == ',' && depth == 0) {
      return skip_space(t, len, i + 1);
    }
  }
  return len;
}

/* Item `index` of the array at t[at]; the array itself if it is shorter. */
static size_t find_item(const char *t, size_t len, size_t at, size_t index) {
  size_t i = skip_space(t, len, at + 1);
  for (size_t n = 0; n < index && i < len && t[i] != ']'; n++) i = next_element(t, len, i);
  return i < len && t[i] != ']' ? i : at;
}

/* The value of member `key` of the object at t[at]; the object itself if
 * it has none.  Keys are compared decoded (jansson reads each). */
static size_t find_member(const char *t, size_t len, size_t at, const char *key) {
  for (size_t i = skip_space(t, len, at + 1); i < len && t[i] == '"';
       i = next_element(t, len, i)) {
    size_t key_end = closing_quote(t, len, i) + 1;
    if (key_end > len) break;
    json_t *k = load(t + i, key_end - i, NULL);
    bool same = json_is_string(k) && strcmp(json_string_value(k), key) == 0;
    json_decref(k);
    if (same) return skip_space(t, len, skip_space(t, len, key_end) + 1); /* past ':' */
  }
  return at;
}

/* Line and column (characters, UTF-8's lead bytes) of t[at]. */
static void set_position(suite_error *err, const char *t, size_t len, size_t at) {
  err->line = err->column = 1;
  for (size_t i = 0; i < at && i < len; i++) {
    if (t[i] == '\n') {
      err->line++;
      err->column = 1;
    } else if (((unsigned char)t[i] & 0xc0) != 0x80) {
      err->column++;
    }
  }
}

/* ---------------------------------------------------------------- rows */

/* A row being read: which one, and where the rows are in the text. */
typedef struct row_ctx {
  const char *text; /* the document, which jansson accepted */
  size_t len;
  size_t rows_at; /* offset of the array of rows */
  size_t index;
  const char *name; /* NULL until known */
  suite_error *err;
} row_ctx;

/* Fails the row with a message placed at the value of field `key`, or at
 * the row itself when key is NULL. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static bool row_fail(const row_ctx *r, const char *key, const char *fmt, ...) {
  char what[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  size_t at = find_item(r->text, r->len, r->rows_at, r->index);
  if (key != NULL) at = find_member(r->text, r->len, at, key);
  set_position(r->err, r->text, r->len, at);
  if (r->name != NULL) {
    snprintf(r->err->message, sizeof r->err->message, "shape %zu (\"%.48s\"): %s", r->index,
             r->name, what);
  } else {
    snprintf(r->err->message, sizeof r->err->message, "shape %zu: %s", r->index, what);
  }
  return false;
}

static bool oom_error(suite_error *err) {
  err->line = err->column = 0;
  snprintf(err->message, sizeof err->message, "out of memory");
  return false;
}

/* "null", "boolean", "number", "string", "array", "object". */
static const char *type_name(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_NULL: return "null";
  case JSON_TRUE:
  case JSON_FALSE: return "boolean";
  case JSON_INTEGER:
  case JSON_REAL: return "number";
  case JSON_STRING: return "string";
  case JSON_ARRAY: return "array";
  case JSON_OBJECT: return "object";
  }
  return "unknown";
}

/* A JSON integer, or a number without a fraction within +-2^53 (2.0, 1e3). */
static bool json_to_int(const json_t *v, int64_t *out) {
  if (json_is_integer(v)) {
    *out = json_integer_value(v);
    return true;
  }
  if (!json_is_real(v)) return false;
  double d = json_real_value(v);
  if (!(d >= -9007199254740992.0 && d <= 9007199254740992.0)) return false;
  int64_t i = (int64_t)d;
  if ((double)i != d) return false;
  *out = i;
  return true;
}

static bool row_int(const row_ctx *r, const json_t *row, const char *key, bool required,
                    int64_t *out) {
  const json_t *v = json_object_get(row, key);
  if (v == NULL) return !required || row_fail(r, NULL, "missing \"%s\"", key);
  if (!json_to_int(v, out)) {
    return row_fail(r, key, "\"%s\" must be an integer, got %s", key,
                    json_is_number(v) ? "a fraction or a huge number" : type_name(v));
  }
  return true;
}

/* "stride", "pad", "dil": an integer for both axes or [h, w]. */
static bool row_pair(const row_ctx *r, const json_t *row, const char *key, int64_t *h,
                     int64_t *w) {
  const json_t *v = json_object_get(row, key);
  if (v == NULL) return true;
  if (json_is_array(v)) {
    if (json_array_size(v) != 2 || !json_to_int(json_array_get(v, 0), h) ||
        !json_to_int(json_array_get(v, 1), w)) {
      return row_fail(r, key, "\"%s\" must be an integer or [height, width] integers", key);
    }
    return true;
  }
  if (!json_to_int(v, h)) {
    return row_fail(r, key, "\"%s\" must be an integer or [height, width] integers, got %s", key,
                    type_name(v));
  }
  *w = *h;
  return true;
}

/* An optional string member that must be one of `names` (NULL-terminated);
 * *index is left alone when the member is absent. */
static bool row_enum(const row_ctx *r, const json_t *row, const char *key,
                     const char *const *names, int *index) {
  const json_t *v = json_object_get(row, key);
  if (v == NULL) return true;
  if (json_is_string(v)) {
    for (int i = 0; names[i] != NULL; i++) {
      if (strcmp(json_string_value(v), names[i]) == 0) {
        *index = i;
        return true;
      }
    }
  }
  return row_fail(r, key, "\"%s\" must be one of the strings %s%s%s%s%s", key, names[0],
                  names[1] ? ", " : "", names[1] ? names[1] : "", names[2] ? ", " : "",
                  names[2] ? names[2] : "");
}

/* What a dynamic row may leave out, filled as a dynamic spec's are: K = C,
 * S = R and 'same' padding, (R-1)/2 * dil.  Given values are kept for
 * validation to judge; an out-of-range R or dil is left to it too. */
static void row_dynamic_defaults(const json_t *row, conv_problem *p) {
  const int64_t most = (int64_t)1 << 24;
  if (json_object_get(row, "K") == NULL) p->k = p->c;
  if (json_object_get(row, "S") == NULL) p->s = p->r;
  if (json_object_get(row, "pad") != NULL) return;
  if (p->r >= 1 && p->r <= most && p->dil_h >= 1 && p->dil_h <= most)
    p->pad_h = (p->r - 1) / 2 * p->dil_h;
  if (p->s >= 1 && p->s <= most && p->dil_w >= 1 && p->dil_w <= most)
    p->pad_w = (p->s - 1) / 2 * p->dil_w;
}

static bool row_dims(const row_ctx *r, const json_t *row, conv_problem *p) {
  const bool dynamic = p->op == CONV_OP_DYNAMIC;
  static const struct {
    const char *key;
    size_t offset;
    bool dynamic_optional; /* a dynamic row may leave it out */
  } dims[] = {
      {"N", offsetof(conv_problem, n), false}, {"C", offsetof(conv_problem, c), false},
      {"H", offsetof(conv_problem, h), false}, {"W", offsetof(conv_problem, w), false},
      {"K", offsetof(conv_problem, k), true},  {"R", offsetof(conv_problem, r), false},
      {"S", offsetof(conv_problem, s), true},
  };
  for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
    int64_t *field = (int64_t *)((char *)p + dims[i].offset);
    bool required = !(dynamic && dims[i].dynamic_optional);
    if (!row_int(r, row, dims[i].key, required, field)) return false;
  }
  if (!row_pair(r, row, "stride", &p->stride_h, &p->stride_w) ||
      !row_pair(r, row, "pad", &p->pad_h, &p->pad_w) ||
      !row_pair(r, row, "dil", &p->dil_h, &p->dil_w) ||
      !row_int(r, row, "groups", false, &p->groups))
    return false;
  if (dynamic) row_dynamic_defaults(row, p);
  return true;
}

static bool row_modes(const row_ctx *r, const json_t *row, conv_problem *p) {
  static const char *const maths[] = {"strict", "tf32", NULL};
  static const char *const dtypes[] = {"f32", "f16", "bf16", NULL};
  static const char *const epilogues[] = {"none", "bias", "bias_relu", NULL};
  static const char *const directions[] = {"fwd", "bwd_data", "bwd_filter", NULL};
  int math = (int)p->math, dtype = (int)p->dtype, epilogue = (int)p->epilogue,
      direction = (int)p->direction;
  if (!row_enum(r, row, "math", maths, &math)) return false;
  if (!row_enum(r, row, "dtype", dtypes, &dtype)) return false;
  if (!row_enum(r, row, "epilogue", epilogues, &epilogue)) return false;
  if (!row_enum(r, row, "dir", directions, &direction)) return false;
  p->direction = direction == 2   ? CONV_BACKWARD_FILTER
                 : direction == 1 ? CONV_BACKWARD_DATA
                                  : CONV_FORWARD;
  p->math = math == 1 ? CONV_MATH_TF32 : CONV_MATH_STRICT;
  p->dtype = dtype == 2 ? CONV_DTYPE_BF16 : dtype == 1 ? CONV_DTYPE_F16 : CONV_DTYPE_F32;
  p->epilogue = epilogue == 2 ? CONV_EPILOGUE_BIAS_RELU
                : epilogue == 1 ? CONV_EPILOGUE_BIAS
                                : CONV_EPILOGUE_NONE;
  return true;
}

/* Adds the note for a row whose op is not "conv". */
static bool skip_row(suite *s, const char *name, const char *op, suite_error *err) {
  size_t size = strlen(name) + strlen(op) + 64;
  char *note = malloc(size);
  if (note == NULL) return oom_error(err);
  snprintf(note, size, "skipping %s: op '%s' is not supported yet", name, op);
  return suite_add_note(s, note) || oom_error(err);
}

static bool suite_add_row(suite *s, const json_t *row, row_ctx *r) {
  if (!json_is_object(row)) return row_fail(r, NULL, "expected an object, got %s", type_name(row));
  const json_t *name = json_object_get(row, "name");
  if (name == NULL) return row_fail(r, NULL, "missing \"name\"");
  if (!json_is_string(name) || json_string_length(name) == 0) {
    return row_fail(r, "name", "\"name\" must be a non-empty string");
  }
  r->name = json_string_value(name);
  conv_problem p;
  conv_problem_init(&p);
  const json_t *op = json_object_get(row, "op");
  if (op != NULL) {
    if (!json_is_string(op)) {
      return row_fail(r, "op", "\"op\" must be a string, got %s", type_name(op));
    }
    if (strcmp(json_string_value(op), "dynamic") == 0) {
      p.op = CONV_OP_DYNAMIC;
    } else if (strcmp(json_string_value(op), "conv") != 0) {
      return skip_row(s, r->name, json_string_value(op), r->err);
    }
  }
  if (!row_dims(r, row, &p) || !row_modes(r, row, &p)) return false;
  /* Judged here, as a spec is when parsed: a bad row never reaches a key
   * or a GPU, and its message names the row and the field. */
  char why[256];
  if (conv_problem_validate(&p, why, sizeof why) != CONV_OK) return row_fail(r, NULL, "%s", why);
  return suite_add(s, r->name, &p) || oom_error(r->err);
}

/* A malformed document: jansson's message, line and column (its column 0,
 * before a line's first character, counts as 1). */
static bool syntax_error(suite_error *err, const json_error_t *e) {
  bool placed = e->line > 0;
  err->line = placed ? e->line : 0;
  err->column = placed ? (e->column > 0 ? e->column : 1) : 0;
  snprintf(err->message, sizeof err->message, "%s", e->text);
  return false;
}

bool suite_parse(const char *text, size_t len, suite *s, suite_error *err) {
  suite_error scratch;
  if (err == NULL) err = &scratch;
  skip_bom(&text, &len);
  json_error_t syntax;
  json_t *doc = load(text, len, &syntax);
  if (doc == NULL) return syntax_error(err, &syntax);
  size_t doc_at = skip_space(text, len, 0);
  row_ctx r = {text, len, doc_at, 0, NULL, err};
  const json_t *rows = doc;
  if (json_is_object(doc)) {
    rows = json_object_get(doc, "shapes");
    r.rows_at = find_member(text, len, doc_at, "shapes");
  }
  bool ok = false;
  if (rows == NULL) {
    set_position(err, text, len, doc_at);
    snprintf(err->message, sizeof err->message, "missing \"shapes\" (an array of shapes)");
  } else if (!json_is_array(rows)) {
    set_position(err, text, len, r.rows_at);
    snprintf(err->message, sizeof err->message,
             "expected {\"shapes\": [...]} or an array of shapes, got %s", type_name(rows));
  } else {
    ok = true;
  }
  for (size_t i = 0; ok && i < json_array_size(rows); i++) {
    r.index = i;
    r.name = NULL;
    ok = suite_add_row(s, json_array_get(rows, i), &r);
  }
  json_decref(doc);
  return ok;
}

/* Opens path for reading if it is a regular file.  O_NONBLOCK: opening a
 * FIFO for reading would otherwise wait for a writer forever. */
static FILE *open_regular_file(const char *path, char *message, size_t message_size) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    snprintf(message, message_size, "%s: %s", path, strerror(errno));
    return NULL;
  }
  struct stat st;
  const char *problem = NULL;
  if (fstat(fd, &st) != 0) problem = strerror(errno);
  else if (S_ISDIR(st.st_mode)) problem = "is a directory, not a file";
  else if (!S_ISREG(st.st_mode)) problem = "not a regular file (a FIFO, socket or device)";
  FILE *f = problem == NULL ? fdopen(fd, "rb") : NULL;
  if (f == NULL) {
    snprintf(message, message_size, "%s: %s", path, problem ? problem : strerror(errno));
    close(fd);
  }
  return f;
}

bool json_read_file(const char *path, size_t max_bytes, char **text, size_t *len, char *message,
                    size_t message_size) {
  FILE *f = open_regular_file(path, message, message_size);
  if (f == NULL) return false;
  char *data = NULL;
  size_t n = 0, cap = 0;
  const char *problem = NULL;
  for (;;) {
    if (cap - n < 4096 + 1) {
      size_t ncap = cap ? cap * 2 : 65536;
      char *grown = realloc(data, ncap);
      if (grown == NULL) {
        problem = "out of memory";
        break;
      }
      data = grown;
      cap = ncap;
    }
    size_t got = fread(data + n, 1, cap - n - 1, f);
    n += got;
    if (n > max_bytes) {
      problem = "file too large";
      break;
    }
    if (got == 0) {
      if (ferror(f)) problem = strerror(errno != 0 ? errno : EIO);
      break;
    }
  }
  if (fclose(f) != 0 && problem == NULL) problem = strerror(errno);
  if (problem != NULL) {
    snprintf(message, message_size, "%s: %s", path, problem);
    free(data);
    return false;
  }
  data[n] = '\0';
  *text = data;
  *len = n;
  return true;
}

bool suite_load(const char *path, suite *s, char *message, size_t message_size) {
  char *text;
  size_t len;
  if (!json_read_file(path, (size_t)64 << 20, &text, &len, message, message_size)) return false;
  suite_error err;
  bool ok = suite_parse(text, len, s, &err);
  free(text);
  if (!ok) {
    if (err.line > 0) {
      snprintf(message, message_size, "%s:%d:%d: %s", path, err.line, err.column, err.message);
    } else {
      snprintf(message, message_size, "%s: %s", path, err.message);
    }
  }
  return ok;
}
