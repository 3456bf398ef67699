/*
 * carry.c -- the carry-over rules (cache.h): which winners tuned under
 * other library versions stay usable, after re-validation, under this
 * build's, and storing such a winner under this build's versions.
 *
 * A versions text is what conv_library_versions() writes: fields
 * `name=value` separated by single spaces, e.g.
 *
 *   cuda=13000 driver=13000 cudnn=91900 cublaslt=130100
 *   candidates=1v5,2v4,3v2 timing=2
 *
 * A winner is carried from `then` to `now` when both texts parse, its
 * family is listed once in each with one version, and the libraries it
 * runs on report one version in both: cudnn for cuDNN's family, cublaslt
 * for the cuBLASLt families, cufft (or, while the texts do not name it,
 * cuda, the toolkit cuFFT comes with) for the FFT families.  What a
 * winner does not run on may differ: the driver, the other families'
 * versions, cuda for a family of our own kernels, the timing method (the
 * winner is re-timed anyway).  A field this file does not know must be
 * equal in both, present or absent: a later convtune may key something
 * that matters by it.  Everything else (malformed, duplicated, oversized)
 * is not carried: the winner is tuned again, as before carry-over.
 */
#include "cache/cache.h"
#include "cache/db.h"

#include <stdlib.h>
#include <string.h>

/* More fields than any text this library writes (7) may hold. */
#define VERSIONS_FIELDS_MAX 16
/* Digits of a numeric field: a 64-bit number at most. */
#define VERSIONS_NUMBER_MAX 19

typedef struct versions_field {
  const char *name, *value;
  size_t name_len, value_len;
} versions_field;

typedef struct parsed_versions {
  int count;
  versions_field field[VERSIONS_FIELDS_MAX];
} parsed_versions;

/* The fields whose values are numbers, and what the rules read. */
static const char *const numeric_fields[] = {"cuda", "driver", "cudnn", "cublaslt", "cufft",
                                             "timing"};
static const char *const known_fields[] = {"cuda",  "driver", "cudnn",     "cublaslt",
                                           "cufft", "timing", "candidates"};

static bool field_is(const versions_field *f, const char *name) {
  return f->name_len == strlen(name) && memcmp(f->name, name, f->name_len) == 0;
}

static bool is_one_of(const versions_field *f, const char *const *names, size_t count) {
  for (size_t i = 0; i < count; i++)
    if (field_is(f, names[i])) return true;
  return false;
}

static bool all_digits(const char *s, size_t len, size_t max) {
  if (len == 0 || len > max) return false;
  for (size_t i = 0; i < len; i++)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

/* "<id>v<version>" items separated by commas, each number 1 to 10 digits. */
static bool is_candidate_list(const char *s, size_t len) {
  size_t i = 0;
  while (i < len) {
    size_t id = i;
    while (i < len && s[i] >= '0' && s[i] <= '9') i++;
    if (i - id == 0 || i - id > 10 || i >= len || s[i] != 'v') return false;
    size_t version = ++i;
    while (i < len && s[i] >= '0' && s[i] <= '9') i++;
    if (i - version == 0 || i - version > 10) return false;
    if (i < len && (s[i] != ',' || i + 1 == len)) return false;
    if (i < len) i++;
  }
  return len > 0;
}

static int compare_ids(const void *a, const void *b) {
  unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
  return (x > y) - (x < y);
}

/* Whether a (well-formed) candidate list names each family once: a family
 * listed twice, with one version or two, says nothing sure of it or of the
 * writer. */
static bool ids_distinct(const char *s, size_t len) {
  /* Each item takes 4 bytes at least ("1v1,"). */
  unsigned long long ids[CONV_CACHE_VERSIONS_MAX / 4 + 1];
  size_t n = 0;
  for (size_t i = 0; i < len;) {
    unsigned long long id = 0;
    while (s[i] != 'v') id = id * 10 + (unsigned long long)(s[i++] - '0');
    ids[n++] = id;
    while (i < len && s[i] != ',') i++;
    if (i < len) i++;
  }
  qsort(ids, n, sizeof ids[0], compare_ids);
  for (size_t i = 1; i < n; i++)
    if (ids[i] == ids[i - 1]) return false;
  return true;
}

/* A value of an unknown field: printable ASCII without spaces or '='. */
static bool is_plain_value(const char *s, size_t len) {
  if (len == 0) return false;
  for (size_t i = 0; i < len; i++)
    if (s[i] <= ' ' || s[i] > '~' || s[i] == '=') return false;
  return true;
}

/* Splits `text` into its fields; false for anything this library would
 * not write (the text comes from an untrusted file). */
static bool parse_versions(const char *text, parsed_versions *out) {
  out->count = 0;
  if (text == NULL) return false;
  size_t len = cache_bounded_len(text, CONV_CACHE_VERSIONS_MAX);
  if (len == 0 || len == CONV_CACHE_VERSIONS_MAX) return false;
  for (size_t i = 0; i < len;) {
    size_t end = i;
    while (end < len && text[end] != ' ') end++;
    const char *eq = memchr(text + i, '=', end - i);
    if (eq == NULL || out->count == VERSIONS_FIELDS_MAX) return false;
    versions_field f = {text + i, eq + 1, (size_t)(eq - (text + i)), (size_t)(text + end - eq - 1)};
    if (f.name_len == 0 || f.name_len > 32) return false;
    for (size_t k = 0; k < f.name_len; k++)
      if (f.name[k] < 'a' || f.name[k] > 'z') return false;
    for (int k = 0; k < out->count; k++)
      if (out->field[k].name_len == f.name_len &&
          memcmp(out->field[k].name, f.name, f.name_len) == 0)
        return false; /* a name twice: which one counts? */
    bool ok = field_is(&f, "candidates")
                  ? is_candidate_list(f.value, f.value_len) && ids_distinct(f.value, f.value_len)
              : is_one_of(&f, numeric_fields, sizeof numeric_fields / sizeof numeric_fields[0])
                  ? all_digits(f.value, f.value_len, VERSIONS_NUMBER_MAX)
                  : is_plain_value(f.value, f.value_len);
    if (!ok) return false;
    out->field[out->count++] = f;
    /* One space between fields, none at the end. */
    if (end < len && (end + 1 == len || text[end + 1] == ' ')) return false;
    i = end < len ? end + 1 : end;
  }
  return out->count > 0;
}

static const versions_field *find_field(const parsed_versions *v, const char *name) {
  for (int i = 0; i < v->count; i++)
    if (field_is(&v->field[i], name)) return &v->field[i];
  return NULL;
}

/* Whether `name` is present in both with one value. */
static bool same_value(const parsed_versions *a, const parsed_versions *b, const char *name) {
  const versions_field *x = find_field(a, name), *y = find_field(b, name);
  return x != NULL && y != NULL && x->value_len == y->value_len &&
         memcmp(x->value, y->value, x->value_len) == 0;
}

/* Whether a field this file does not know is in both with one value, or in neither. */
static bool unknown_fields_agree(const parsed_versions *a, const parsed_versions *b) {
  const size_t known = sizeof known_fields / sizeof known_fields[0];
  for (int pass = 0; pass < 2; pass++) {
    const parsed_versions *one = pass ? b : a, *other = pass ? a : b;
    for (int i = 0; i < one->count; i++) {
      const versions_field *f = &one->field[i];
      if (is_one_of(f, known_fields, known)) continue;
      const versions_field *g = NULL;
      for (int k = 0; k < other->count && g == NULL; k++)
        if (other->field[k].name_len == f->name_len &&
            memcmp(other->field[k].name, f->name, f->name_len) == 0)
          g = &other->field[k];
      if (g == NULL || g->value_len != f->value_len ||
          memcmp(g->value, f->value, f->value_len) != 0)
        return false;
    }
  }
  return true;
}

/* The version of `family` in a (well-formed, each id once) candidate list
 * into *version; false when it is absent. */
static bool family_version(const versions_field *candidates, uint32_t family,
                           unsigned long long *version) {
  const char *s = candidates->value;
  size_t len = candidates->value_len, i = 0;
  int seen = 0;
  while (i < len) {
    unsigned long long id = 0, v = 0;
    while (s[i] != 'v') id = id * 10 + (unsigned long long)(s[i++] - '0');
    i++;
    while (i < len && s[i] != ',') v = v * 10 + (unsigned long long)(s[i++] - '0');
    if (i < len) i++;
    if (id == family) {
      *version = v;
      seen++;
    }
  }
  return seen == 1;
}

bool conv_versions_carry(const char *then, const char *now, uint32_t family, unsigned libraries) {
  parsed_versions a, b;
  if (family == 0 || (libraries & CONV_LIBRARY_UNKNOWN) != 0 || !parse_versions(then, &a) ||
      !parse_versions(now, &b))
    return false;
  const versions_field *ca = find_field(&a, "candidates"), *cb = find_field(&b, "candidates");
  unsigned long long va = 0, vb = 0;
  if (ca == NULL || cb == NULL || !family_version(ca, family, &va) ||
      !family_version(cb, family, &vb) || va != vb)
    return false;
  if ((libraries & CONV_LIBRARY_CUDNN) && !same_value(&a, &b, "cudnn")) return false;
  if ((libraries & CONV_LIBRARY_CUBLASLT) && !same_value(&a, &b, "cublaslt")) return false;
  if (libraries & CONV_LIBRARY_CUFFT) {
    /* cuFFT is the toolkit's: its own version where both texts name it,
     * else the toolkit's runtime version stands for it. */
    bool named = find_field(&a, "cufft") != NULL && find_field(&b, "cufft") != NULL;
    if (!same_value(&a, &b, named ? "cufft" : "cuda")) return false;
  }
  return unknown_fields_agree(&a, &b);
}

/* ---------------------------------------------------------------- storing */

conv_status conv_cache_store_carried(conv_cache *cache, const conv_cache_key *key,
                                     const conv_trial *winner, conv_error *err) {
  conv_status s = cache_check_key(cache, key, err);
  if (s != CONV_OK) return s;
  if (winner == NULL || !winner->winner || conv_cache_check_winner(winner) != NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT,
                          "cache: a carried-over winner must be a valid, validated and timed "
                          "trial marked winner");
  if ((s = cache_write_begin(cache, err)) != CONV_OK) return s;
  /* One transaction: a winner under this build's versions is never seen
   * without its mark, so it is always re-timed. */
  cache_tuning_writer w = {{NULL}, {NULL}, {NULL}, {NULL}};
  s = cache_write_tuning(cache, &w, key, winner, NULL, 1, err);
  if (s == CONV_OK)
    s = cache_insert_pending(cache, &w.insert_pending, key, CONV_PENDING_STALE, err);
  cache_tuning_writer_free(&w);
  return cache_tx_end(cache, s, err);
}
