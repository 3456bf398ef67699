/*
 * json.c -- a small, strict JSON reader and writer, and the suite loader.
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

typedef struct json_parser {
  const char *text;
  size_t len, pos;
  int line;          /* line of pos, 1-based                           */
  size_t line_start; /* offset of that line's first byte                */
  int depth;
  json_error *err;
} json_parser;

/* A growable byte buffer for decoded strings. */
typedef struct json_buf {
  char *data;
  size_t len, cap;
} json_buf;

static void position_of(const json_parser *p, size_t at, int *line, int *column) {
  int l = 1;
  size_t start = 0;
  for (size_t i = 0; i < at && i < p->len; i++) {
    if (p->text[i] == '\n') {
      l++;
      start = i + 1;
    }
  }
  *line = l;
  *column = (int)(at - start + 1);
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static bool fail(json_parser *p, size_t at, const char *fmt, ...) {
  if (p->err == NULL) return false;
  position_of(p, at, &p->err->line, &p->err->column);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->err->message, sizeof p->err->message, fmt, ap);
  va_end(ap);
  return false;
}

static bool out_of_memory(json_parser *p) {
  return fail(p, p->pos, "out of memory");
}

/* "'x'" for a printable byte, "byte 0xNN" otherwise. */
static const char *describe_byte(unsigned char c, char *buf, size_t size) {
  if (c >= 0x20 && c < 0x7f) {
    snprintf(buf, size, "'%c'", c);
  } else {
    snprintf(buf, size, "byte 0x%02x", (unsigned)c);
  }
  return buf;
}

static void skip_ws(json_parser *p) {
  while (p->pos < p->len) {
    char c = p->text[p->pos];
    if (c == '\n') {
      p->pos++;
      p->line++;
      p->line_start = p->pos;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      p->pos++;
    } else {
      break;
    }
  }
}

static bool buf_push(json_buf *b, const char *bytes, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 32;
    while (cap < b->len + n + 1) cap *= 2;
    char *data = realloc(b->data, cap);
    if (data == NULL) return false;
    b->data = data;
    b->cap = cap;
  }
  memcpy(b->data + b->len, bytes, n);
  b->len += n;
  b->data[b->len] = '\0';
  return true;
}

static size_t utf8_encode(uint32_t cp, char out[4]) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xe0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  out[0] = (char)(0xf0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
  out[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* Reads the 4 hex digits at p->pos. */
static bool parse_hex4(json_parser *p, uint32_t *out) {
  if (p->len - p->pos < 4) return fail(p, p->pos, "incomplete \\u escape");
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p->text[p->pos + (size_t)i];
    uint32_t d;
    if (c >= '0' && c <= '9') {
      d = (uint32_t)(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      d = (uint32_t)(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      d = (uint32_t)(c - 'A' + 10);
    } else {
      return fail(p, p->pos + (size_t)i, "bad hex digit in \\u escape");
    }
    v = v * 16 + d;
  }
  p->pos += 4;
  *out = v;
  return true;
}

/* After "\u": one code point, joining a surrogate pair. */
static bool parse_unicode_escape(json_parser *p, size_t escape_at, uint32_t *cp) {
  uint32_t hi = 0;
  if (!parse_hex4(p, &hi)) return false;
  if (hi >= 0xdc00 && hi <= 0xdfff) {
    return fail(p, escape_at, "lone low surrogate \\u%04x", (unsigned)hi);
  }
  if (hi < 0xd800 || hi > 0xdbff) {
    *cp = hi;
    return true;
  }
  if (p->len - p->pos < 2 || p->text[p->pos] != '\\' || p->text[p->pos + 1] != 'u') {
    return fail(p, escape_at, "high surrogate \\u%04x not followed by a low surrogate",
                (unsigned)hi);
  }
  p->pos += 2;
  uint32_t lo = 0;
  if (!parse_hex4(p, &lo)) return false;
  if (lo < 0xdc00 || lo > 0xdfff) {
    return fail(p, escape_at, "high surrogate \\u%04x not followed by a low surrogate",
                (unsigned)hi);
  }
  *cp = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
  return true;
}

/* One escape after the backslash at escape_at; appends its bytes. */
static bool parse_escape(json_parser *p, size_t escape_at, json_buf *b) {
  if (p->pos >= p->len) return fail(p, escape_at, "unterminated string");
  char c = p->text[p->pos++];
  char one;
  switch (c) {
  case '"': one = '"'; break;
  case '\\': one = '\\'; break;
  case '/': one = '/'; break;
  case 'b': one = '\b'; break;
  case 'f': one = '\f'; break;
  case 'n': one = '\n'; break;
  case 'r': one = '\r'; break;
  case 't': one = '\t'; break;
  case 'u': {
    uint32_t cp = 0;
    if (!parse_unicode_escape(p, escape_at, &cp)) return false;
    char bytes[4];
    size_t n = utf8_encode(cp, bytes);
    return buf_push(b, bytes, n) || out_of_memory(p);
  }
  default: {
    char what[16];
    return fail(p, escape_at, "invalid escape \\%s in string",
                describe_byte((unsigned char)c, what, sizeof what));
  }
  }
  return buf_push(b, &one, 1) || out_of_memory(p);
}

/* A string at p->pos (which is '"'); on success *chars is owned by the caller. */
static bool parse_string(json_parser *p, char **chars, size_t *len) {
  size_t start = p->pos++;
  json_buf b = {NULL, 0, 0};
  if (!buf_push(&b, "", 0)) return out_of_memory(p);
  for (;;) {
    if (p->pos >= p->len) {
      free(b.data);
      return fail(p, start, "unterminated string");
    }
    unsigned char c = (unsigned char)p->text[p->pos];
    if (c == '"') {
      p->pos++;
      break;
    }
    bool ok;
    if (c == '\\') {
      size_t at = p->pos++;
      ok = parse_escape(p, at, &b);
    } else if (c < 0x20) {
      ok = fail(p, p->pos, "raw control character 0x%02x in string (escape it)", (unsigned)c);
    } else if (c < 0x80) {
      ok = buf_push(&b, (const char *)&c, 1) || out_of_memory(p);
      p->pos++;
    } else {
      size_t n = utf8_sequence_length((const unsigned char *)p->text + p->pos, p->len - p->pos);
      if (n == 0) {
        ok = fail(p, p->pos, "invalid UTF-8 in string");
      } else {
        ok = buf_push(&b, p->text + p->pos, n) || out_of_memory(p);
        p->pos += n;
      }
    }
    if (!ok) {
      free(b.data);
      return false;
    }
  }
  *chars = b.data;
  *len = b.len;
  return true;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static size_t skip_digits(const json_parser *p, size_t i) {
  while (i < p->len && is_digit(p->text[i])) i++;
  return i;
}

static bool parse_number(json_parser *p, json_value *out) {
  size_t start = p->pos, i = p->pos;
  if (p->text[i] == '-') i++;
  if (i >= p->len || !is_digit(p->text[i])) return fail(p, i, "expected a digit");
  if (p->text[i] == '0') {
    i++;
    if (i < p->len && is_digit(p->text[i])) return fail(p, start, "leading zeros are not allowed");
  } else {
    i = skip_digits(p, i);
  }
  if (i < p->len && p->text[i] == '.') {
    i++;
    if (i >= p->len || !is_digit(p->text[i])) return fail(p, i, "expected a digit after '.'");
    i = skip_digits(p, i);
  }
  if (i < p->len && (p->text[i] == 'e' || p->text[i] == 'E')) {
    i++;
    if (i < p->len && (p->text[i] == '+' || p->text[i] == '-')) i++;
    if (i >= p->len || !is_digit(p->text[i])) return fail(p, i, "expected a digit in the exponent");
    i = skip_digits(p, i);
  }
  size_t n = i - start;
  char local[128];
  char *copy = n < sizeof local ? local : malloc(n + 1);
  if (copy == NULL) return out_of_memory(p);
  memcpy(copy, p->text + start, n);
  copy[n] = '\0';
  double v = strtod(copy, NULL);
  if (copy != local) free(copy);
  if (isinf(v)) return fail(p, start, "number out of range");
  out->type = JSON_NUMBER;
  out->u.number = v;
  p->pos = i;
  return true;
}

static bool parse_literal(json_parser *p, const char *word, json_value *out) {
  size_t n = strlen(word);
  if (p->len - p->pos < n || memcmp(p->text + p->pos, word, n) != 0) {
    return fail(p, p->pos, "invalid literal (expected %s)", word);
  }
  p->pos += n;
  if (word[0] == 'n') {
    out->type = JSON_NULL;
  } else {
    out->type = JSON_BOOL;
    out->u.boolean = word[0] == 't';
  }
  return true;
}

static bool parse_value(json_parser *p, json_value *out);

static bool enter(json_parser *p) {
  if (p->depth >= JSON_MAX_DEPTH) {
    return fail(p, p->pos, "nesting deeper than %d levels", JSON_MAX_DEPTH);
  }
  p->depth++;
  p->pos++; /* the '[' or '{' */
  return true;
}

/* After a member or item: ',' (not before the closing bracket) or `close`. */
static bool parse_separator(json_parser *p, char close, bool *done) {
  skip_ws(p);
  if (p->pos >= p->len) return fail(p, p->pos, "unexpected end of input, expected ',' or '%c'", close);
  char c = p->text[p->pos];
  if (c == close) {
    p->pos++;
    *done = true;
    return true;
  }
  if (c != ',') {
    char what[16];
    return fail(p, p->pos, "expected ',' or '%c', got %s", close,
                describe_byte((unsigned char)c, what, sizeof what));
  }
  size_t comma = p->pos++;
  skip_ws(p);
  if (p->pos < p->len && p->text[p->pos] == close) return fail(p, comma, "trailing comma");
  *done = false;
  return true;
}

static bool parse_array(json_parser *p, json_value *out) {
  if (!enter(p)) return false;
  json_value *items = NULL;
  size_t count = 0, cap = 0;
  skip_ws(p);
  bool done = p->pos < p->len && p->text[p->pos] == ']';
  if (done) p->pos++;
  while (!done) {
    if (count == cap) {
      size_t ncap = cap ? cap * 2 : 4;
      json_value *grown = realloc(items, ncap * sizeof *grown);
      if (grown == NULL) goto oom;
      items = grown;
      cap = ncap;
    }
    if (!parse_value(p, &items[count])) goto fail;
    count++;
    if (!parse_separator(p, ']', &done)) goto fail;
  }
  p->depth--;
  out->type = JSON_ARRAY;
  out->u.array.items = items;
  out->u.array.count = count;
  return true;
oom:
  out_of_memory(p);
fail:
  for (size_t i = 0; i < count; i++) json_free(&items[i]);
  free(items);
  return false;
}

static bool has_key(const json_member *members, size_t count, const char *key, size_t key_len) {
  for (size_t i = 0; i < count; i++) {
    if (members[i].key_len == key_len && memcmp(members[i].key, key, key_len) == 0) return true;
  }
  return false;
}

/* One "key": value member into *m. */
static bool parse_member(json_parser *p, const json_member *done_members, size_t done_count,
                         json_member *m) {
  skip_ws(p);
  if (p->pos >= p->len || p->text[p->pos] != '"') {
    if (p->pos >= p->len) return fail(p, p->pos, "unexpected end of input, expected a key");
    char what[16];
    return fail(p, p->pos, "expected a string key, got %s",
                describe_byte((unsigned char)p->text[p->pos], what, sizeof what));
  }
  size_t key_at = p->pos;
  if (!parse_string(p, &m->key, &m->key_len)) return false;
  if (has_key(done_members, done_count, m->key, m->key_len)) {
    fail(p, key_at, "duplicate key \"%s\"", m->key);
    free(m->key);
    return false;
  }
  skip_ws(p);
  if (p->pos >= p->len || p->text[p->pos] != ':') {
    fail(p, p->pos, "expected ':' after key \"%s\"", m->key);
    free(m->key);
    return false;
  }
  p->pos++;
  if (!parse_value(p, &m->value)) {
    free(m->key);
    return false;
  }
  return true;
}

static bool parse_object(json_parser *p, json_value *out) {
  if (!enter(p)) return false;
  json_member *members = NULL;
  size_t count = 0, cap = 0;
  skip_ws(p);
  bool done = p->pos < p->len && p->text[p->pos] == '}';
  if (done) p->pos++;
  while (!done) {
    if (count == cap) {
      size_t ncap = cap ? cap * 2 : 4;
      json_member *grown = realloc(members, ncap * sizeof *grown);
      if (grown == NULL) goto oom;
      members = grown;
      cap = ncap;
    }
    if (!parse_member(p, members, count, &members[count])) goto fail;
    count++;
    if (!parse_separator(p, '}', &done)) goto fail;
  }
  p->depth--;
  out->type = JSON_OBJECT;
  out->u.object.members = members;
  out->u.object.count = count;
  return true;
oom:
  out_of_memory(p);
fail:
  for (size_t i = 0; i < count; i++) {
    free(members[i].key);
    json_free(&members[i].value);
  }
  free(members);
  return false;
}

static bool parse_value(json_parser *p, json_value *out) {
  skip_ws(p);
  memset(out, 0, sizeof *out);
  out->type = JSON_NULL;
  out->line = p->line;
  out->column = (int)(p->pos - p->line_start + 1);
  if (p->pos >= p->len) return fail(p, p->pos, "unexpected end of input, expected a value");
  char c = p->text[p->pos];
  switch (c) {
  case '{': return parse_object(p, out);
  case '[': return parse_array(p, out);
  case '"':
    if (!parse_string(p, &out->u.string.chars, &out->u.string.len)) return false;
    out->type = JSON_STRING;
    return true;
  case 't': return parse_literal(p, "true", out);
  case 'f': return parse_literal(p, "false", out);
  case 'n': return parse_literal(p, "null", out);
  default: break;
  }
  if (c == '-' || is_digit(c)) return parse_number(p, out);
  char what[16];
  return fail(p, p->pos, "unexpected %s, expected a value",
              describe_byte((unsigned char)c, what, sizeof what));
}

bool json_parse(const char *text, size_t len, json_value *out, json_error *err) {
  json_error scratch;
  json_parser p = {text, len, 0, 1, 0, 0, err ? err : &scratch};
  if (text == NULL || out == NULL) {
    p.err->line = p.err->column = 0;
    snprintf(p.err->message, sizeof p.err->message, "no input");
    return false;
  }
  if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
    p.pos = 3;
    p.line_start = 3;
  }
  json_value v;
  if (!parse_value(&p, &v)) return false;
  skip_ws(&p);
  if (p.pos < p.len) {
    json_free(&v);
    return fail(&p, p.pos, "unexpected data after the JSON value");
  }
  *out = v;
  return true;
}

void json_free(json_value *value) {
  if (value == NULL) return;
  switch (value->type) {
  case JSON_STRING:
    free(value->u.string.chars);
    break;
  case JSON_ARRAY:
    for (size_t i = 0; i < value->u.array.count; i++) json_free(&value->u.array.items[i]);
    free(value->u.array.items);
    break;
  case JSON_OBJECT:
    for (size_t i = 0; i < value->u.object.count; i++) {
      free(value->u.object.members[i].key);
      json_free(&value->u.object.members[i].value);
    }
    free(value->u.object.members);
    break;
  default:
    break;
  }
  value->type = JSON_NULL;
}

const json_value *json_object_get(const json_value *value, const char *key) {
  if (value == NULL || value->type != JSON_OBJECT || key == NULL) return NULL;
  size_t n = strlen(key);
  for (size_t i = 0; i < value->u.object.count; i++) {
    const json_member *m = &value->u.object.members[i];
    if (m->key_len == n && memcmp(m->key, key, n) == 0) return &m->value;
  }
  return NULL;
}

const char *json_type_name(json_type type) {
  switch (type) {
  case JSON_NULL: return "null";
  case JSON_BOOL: return "boolean";
  case JSON_NUMBER: return "number";
  case JSON_STRING: return "string";
  case JSON_ARRAY: return "array";
  case JSON_OBJECT: return "object";
  }
  return "unknown";
}

/* ================================================================ writer */

void json_write_string(FILE *out, const char *s) {
  if (s == NULL) {
    fputs("null", out);
    return;
  }
  fputc('"', out);
  const unsigned char *end = (const unsigned char *)s + strlen(s);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c >= 0x80) {
      /* Valid UTF-8 as it is; any other byte (a hostile cache's) becomes
       * U+FFFD, so that the output is always valid JSON. */
      size_t n = utf8_sequence_length(c, (size_t)(end - c));
      if (n == 0) {
        fputs("\\ufffd", out);
      } else {
        fwrite(c, 1, n, out);
        c += n - 1;
      }
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
      if (*c < 0x20) {
        fprintf(out, "\\u%04x", (unsigned)*c);
      } else {
        fputc(*c, out);
      }
    }
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

/* Where a row error points, and which row it is about. */
typedef struct row_ctx {
  size_t index;
  const char *name; /* NULL until known */
  json_error *err;
} row_ctx;

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static bool row_fail(const row_ctx *r, const json_value *at, const char *fmt, ...) {
  if (r->err == NULL) return false;
  char what[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  r->err->line = at->line;
  r->err->column = at->column;
  if (r->name != NULL) {
    snprintf(r->err->message, sizeof r->err->message, "shape %zu (\"%.48s\"): %s", r->index,
             r->name, what);
  } else {
    snprintf(r->err->message, sizeof r->err->message, "shape %zu: %s", r->index, what);
  }
  return false;
}

static bool oom_error(json_error *err) {
  if (err != NULL) {
    err->line = err->column = 0;
    snprintf(err->message, sizeof err->message, "out of memory");
  }
  return false;
}

/* A JSON number that is an exact integer within +-2^53. */
static bool json_to_int(const json_value *v, int64_t *out) {
  if (v->type != JSON_NUMBER) return false;
  double d = v->u.number;
  if (!(d >= -9007199254740992.0 && d <= 9007199254740992.0)) return false;
  int64_t i = (int64_t)d;
  if ((double)i != d) return false;
  *out = i;
  return true;
}

static bool row_int(const row_ctx *r, const json_value *row, const char *key, bool required,
                    int64_t *out) {
  const json_value *v = json_object_get(row, key);
  if (v == NULL) return !required || row_fail(r, row, "missing \"%s\"", key);
  if (!json_to_int(v, out)) {
    return row_fail(r, v, "\"%s\" must be an integer, got %s", key,
                    v->type == JSON_NUMBER ? "a fraction or a huge number"
                                           : json_type_name(v->type));
  }
  return true;
}

/* "stride", "pad", "dil": an integer for both axes or [h, w]. */
static bool row_pair(const row_ctx *r, const json_value *row, const char *key, int64_t *h,
                     int64_t *w) {
  const json_value *v = json_object_get(row, key);
  if (v == NULL) return true;
  if (v->type == JSON_ARRAY) {
    if (v->u.array.count != 2 || !json_to_int(&v->u.array.items[0], h) ||
        !json_to_int(&v->u.array.items[1], w)) {
      return row_fail(r, v, "\"%s\" must be an integer or [height, width] integers", key);
    }
    return true;
  }
  if (!json_to_int(v, h)) {
    return row_fail(r, v, "\"%s\" must be an integer or [height, width] integers, got %s", key,
                    json_type_name(v->type));
  }
  *w = *h;
  return true;
}

/* An optional string member that must be one of `names` (NULL-terminated);
 * *index is left alone when the member is absent. */
static bool row_enum(const row_ctx *r, const json_value *row, const char *key,
                     const char *const *names, int *index) {
  const json_value *v = json_object_get(row, key);
  if (v == NULL) return true;
  if (v->type == JSON_STRING) {
    for (int i = 0; names[i] != NULL; i++) {
      if (strcmp(v->u.string.chars, names[i]) == 0 && strlen(names[i]) == v->u.string.len) {
        *index = i;
        return true;
      }
    }
  }
  return row_fail(r, v, "\"%s\" must be one of the strings %s%s%s%s%s", key, names[0],
                  names[1] ? ", " : "", names[1] ? names[1] : "", names[2] ? ", " : "",
                  names[2] ? names[2] : "");
}

static bool row_dims(const row_ctx *r, const json_value *row, conv_problem *p) {
  static const struct {
    const char *key;
    size_t offset;
  } dims[] = {
      {"N", offsetof(conv_problem, n)}, {"C", offsetof(conv_problem, c)},
      {"H", offsetof(conv_problem, h)}, {"W", offsetof(conv_problem, w)},
      {"K", offsetof(conv_problem, k)}, {"R", offsetof(conv_problem, r)},
      {"S", offsetof(conv_problem, s)},
  };
  for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
    int64_t *field = (int64_t *)((char *)p + dims[i].offset);
    if (!row_int(r, row, dims[i].key, true, field)) return false;
  }
  return row_pair(r, row, "stride", &p->stride_h, &p->stride_w) &&
         row_pair(r, row, "pad", &p->pad_h, &p->pad_w) &&
         row_pair(r, row, "dil", &p->dil_h, &p->dil_w) &&
         row_int(r, row, "groups", false, &p->groups);
}

static bool row_modes(const row_ctx *r, const json_value *row, conv_problem *p) {
  static const char *const maths[] = {"strict", "tf32", NULL};
  static const char *const epilogues[] = {"none", "bias", "bias_relu", NULL};
  static const char *const directions[] = {"fwd", "bwd_data", "bwd_filter", NULL};
  int math = (int)p->math, epilogue = (int)p->epilogue, direction = (int)p->direction;
  if (!row_enum(r, row, "math", maths, &math)) return false;
  if (!row_enum(r, row, "epilogue", epilogues, &epilogue)) return false;
  if (!row_enum(r, row, "dir", directions, &direction)) return false;
  p->direction = direction == 2   ? CONV_BACKWARD_FILTER
                 : direction == 1 ? CONV_BACKWARD_DATA
                                  : CONV_FORWARD;
  p->math = math == 1 ? CONV_MATH_TF32 : CONV_MATH_STRICT;
  p->epilogue = epilogue == 2 ? CONV_EPILOGUE_BIAS_RELU
                : epilogue == 1 ? CONV_EPILOGUE_BIAS
                                : CONV_EPILOGUE_NONE;
  return true;
}

/* Adds the note for a row whose op is not "conv". */
static bool skip_row(suite *s, const char *name, const char *op, json_error *err) {
  size_t size = strlen(name) + strlen(op) + 64;
  char *note = malloc(size);
  if (note == NULL) return oom_error(err);
  snprintf(note, size, "skipping %s: op '%s' is not supported yet", name, op);
  return suite_add_note(s, note) || oom_error(err);
}

static bool suite_add_row(suite *s, const json_value *row, size_t index, json_error *err) {
  row_ctx r = {index, NULL, err};
  if (row->type != JSON_OBJECT) {
    return row_fail(&r, row, "expected an object, got %s", json_type_name(row->type));
  }
  const json_value *name = json_object_get(row, "name");
  if (name == NULL) return row_fail(&r, row, "missing \"name\"");
  if (name->type != JSON_STRING || name->u.string.len == 0 ||
      strlen(name->u.string.chars) != name->u.string.len) {
    return row_fail(&r, name, "\"name\" must be a non-empty string");
  }
  r.name = name->u.string.chars;
  const json_value *op = json_object_get(row, "op");
  if (op != NULL) {
    if (op->type != JSON_STRING) {
      return row_fail(&r, op, "\"op\" must be a string, got %s", json_type_name(op->type));
    }
    if (strcmp(op->u.string.chars, "conv") != 0) {
      return skip_row(s, r.name, op->u.string.chars, err);
    }
  }
  conv_problem p;
  conv_problem_init(&p);
  if (!row_dims(&r, row, &p) || !row_modes(&r, row, &p)) return false;
  /* Judged here, as a spec is when parsed: a bad row never reaches a key
   * or a GPU, and its message names the row and the field. */
  char why[256];
  if (conv_problem_validate(&p, why, sizeof why) != CONV_OK) return row_fail(&r, row, "%s", why);
  return suite_add(s, r.name, &p) || oom_error(err);
}

bool suite_parse(const char *text, size_t len, suite *s, json_error *err) {
  json_value doc;
  if (!json_parse(text, len, &doc, err)) return false;
  const json_value *rows = &doc;
  bool ok = true;
  if (doc.type == JSON_OBJECT) {
    rows = json_object_get(&doc, "shapes");
    if (rows == NULL) {
      if (err != NULL) {
        err->line = doc.line;
        err->column = doc.column;
        snprintf(err->message, sizeof err->message, "missing \"shapes\" (an array of shapes)");
      }
      ok = false;
    }
  }
  if (ok && rows->type != JSON_ARRAY) {
    if (err != NULL) {
      err->line = rows->line;
      err->column = rows->column;
      snprintf(err->message, sizeof err->message,
               "expected {\"shapes\": [...]} or an array of shapes, got %s",
               json_type_name(rows->type));
    }
    ok = false;
  }
  for (size_t i = 0; ok && i < rows->u.array.count; i++) {
    ok = suite_add_row(s, &rows->u.array.items[i], i, err);
  }
  json_free(&doc);
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
  json_error err;
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
