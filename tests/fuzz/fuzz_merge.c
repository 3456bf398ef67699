/*
 * fuzz_merge.c -- libFuzzer target: conv_cache_merge (cache/merge.c) from
 * one crafted cache into another.
 *
 * Input: lines, each a row stored with raw SQL behind the cache's back,
 * each byte of a line choosing one value (the byte modulo the number of
 * choices; an ASCII digit counts as its value, so that seeds read as
 * digits):
 *   0 the row: a trial of the destination, of the source, a pending row of
 *     the destination, of the source
 *   1 problem: one of 3 keys, the first with a NUL byte and more after
 *     it, the rest of the line as text
 *   2 device: one of 3 fingerprints, the first with a NUL byte and more,
 *     the first as a blob
 *   3 versions: one of 2, the first with a NUL byte and more, the rest of
 *     the line
 *   4 status: OK (half of the values), UNSUPPORTED, VALIDATION_FAILED, 999,
 *     the text 'OK'; for a pending row its reason: "untuned",
 *     "incomplete", "other", the integer 42
 *   5 time_ms: NULL, 0, -1, 0.25, 0.5, 1, 2, 1e300, the text 'fast', 0.125
 *   6 bit 0: winner; bits 1-2: rel_error NULL, 0, 1e-7, -1
 *   7 config: "1,2", "7", "garbage", "", a blob
 *   8 and on: the text the choices "rest of the line" take
 * A first line "#X" merges only the tunings of a device: X picks none (all
 * devices), the first, the second or one that names nothing.  What must
 * hold: the merge succeeds or is refused with a message; the destination
 * passes PRAGMA integrity_check; a refused merge leaves it as it was; and
 * it never loses a valid tuning (its winner OK, validated, timed, its key
 * texts clean): after the merge that key's winner is valid and no slower.
 * After a merge that succeeds, every valid tuning of the source it was
 * asked for is there, as fast or faster, and no key gained a second
 * winner.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cache/cache.h"
#include "tests/fuzz/fuzz.h"

#define MAX_ROWS 64
#define MAX_TUNINGS 256

static const char *const problems[] = {
    "fwd f32 nchw strict none n2 c8 h12 w12 k16 r3 s3 pad1,1 str1,1 dil1,1 g1",
    "fwd f32 nchw tf32 none n2 c8 h12 w12 k32 r3 s3 pad1,1 str1,1 dil1,1 g1",
    "bwd_data f32 nchw strict none n1 c4 h8 w8 k4 r1 s1 pad0,0 str1,1 dil1,1 g1"};
static const char *const devices[] = {
    "Test GPU A|sm90|132sm|l2=52428800|mem=2619000kHz*5120bit",
    "Test GPU B|sm80|108sm|l2=41943040|mem=1593000kHz*5120bit", "Test GPU C|sm89|128sm"};
static const char *const versions[] = {"cuda=12080 driver=12080 cudnn=90800 cublas=120800",
                                       "cuda=13000 driver=13000 cudnn=91900 cublas=130000"};

static char paths[2][512]; /* destination, source */
static char *template_bytes;  /* an empty cache, as conv_cache_open makes it */
static size_t template_size;

static void remove_cache(const char *path) {
  static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
    char p[600];
    snprintf(p, sizeof p, "%s%s", path, suffixes[i]);
    remove(p);
  }
}

static void write_file(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  REQUIRE(f != NULL);
  REQUIRE(fwrite(data, 1, size, f) == size);
  REQUIRE(fclose(f) == 0);
}

static void remove_caches(void) {
  remove_cache(paths[0]);
  remove_cache(paths[1]);
}

static void setup(void) {
  struct stat st;
  const char *dir = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
  for (int i = 0; i < 2; i++)
    snprintf(paths[i], sizeof paths[i], "%s/fuzz_merge-%ld-%s.db", dir, (long)getpid(),
             i ? "source" : "destination");
  remove_cache(paths[0]);
  conv_cache *cache = NULL;
  conv_error err = {CONV_OK, ""};
  if (conv_cache_open(paths[0], false, &cache, &err) != CONV_OK) {
    fprintf(stderr, "fuzz_merge: %s\n", err.message);
    abort();
  }
  conv_cache_close(cache);
  FILE *f = fopen(paths[0], "rb");
  REQUIRE(f != NULL);
  template_bytes = malloc(1 << 20);
  REQUIRE(template_bytes != NULL);
  template_size = fread(template_bytes, 1, 1 << 20, f);
  fclose(f);
  REQUIRE(template_size > 0);
  atexit(remove_caches);
}

/* ---------------------------------------------------------------- the rows */

/* Binds choice `c` of a key column: one of `n` texts, the first with a NUL
 * byte and more, the first as a blob (`blob`), or the rest of the line. */
static int bind_key_text(sqlite3_stmt *st, int index, const char *const *texts, int n, int c,
                         bool blob, const char *rest, size_t rest_len) {
  if (c < n) return sqlite3_bind_text(st, index, texts[c], -1, SQLITE_STATIC);
  if (c == n) {
    char with_nul[600];
    size_t len = strlen(texts[0]);
    memcpy(with_nul, texts[0], len);
    memcpy(with_nul + len, "\0junk", 5);
    return sqlite3_bind_text(st, index, with_nul, (int)len + 5, SQLITE_TRANSIENT);
  }
  if (blob) return sqlite3_bind_blob(st, index, texts[0], (int)strlen(texts[0]), SQLITE_STATIC);
  return sqlite3_bind_text(st, index, rest, (int)rest_len, SQLITE_TRANSIENT);
}

static int bind_number_or_text(sqlite3_stmt *st, int index, double value, const char *text) {
  if (text != NULL) return sqlite3_bind_text(st, index, text, -1, SQLITE_STATIC);
  if (isnan(value)) return sqlite3_bind_null(st, index);
  return sqlite3_bind_double(st, index, value);
}

static int choice(const unsigned char *line, size_t len, size_t at, int n) {
  if (at >= len) return 0;
  int value = line[at] >= '0' && line[at] <= '9' ? line[at] - '0' : line[at];
  return value % n;
}

/* Stores one line's row into db (a trial or a pending row). */
static void store_row(sqlite3 *db, const unsigned char *line, size_t len, bool pending) {
  const char *rest = len > 8 ? (const char *)line + 8 : "";
  size_t rest_len = len > 8 ? len - 8 : 0;
  sqlite3_stmt *st = NULL;
  const char *sql =
      pending ? "INSERT OR REPLACE INTO pending (problem, device, versions, reason)"
                " VALUES (?1, ?2, ?3, ?4)"
              : "INSERT INTO trials (problem, device, versions, algorithm_id, algorithm, config,"
                " config_text, status, status_name, reason, time_ms, rel_error, workspace_bytes,"
                " heuristic_pick, winner, deterministic)"
                " VALUES (?1, ?2, ?3, 1, 'cudnn', ?5, 'engine', ?4, 'x', '', ?6, ?7, 0, 0, ?8, 1)";
  REQUIRE(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK);
  int rc = bind_key_text(st, 1, problems, 3, choice(line, len, 1, 5), false, rest, rest_len);
  if (rc == SQLITE_OK)
    rc = bind_key_text(st, 2, devices, 3, choice(line, len, 2, 5), true, rest, rest_len);
  if (rc == SQLITE_OK)
    rc = bind_key_text(st, 3, versions, 2, choice(line, len, 3, 4), false, rest, rest_len);
  int status = choice(line, len, 4, 8);
  if (pending) {
    static const char *const reasons[] = {"untuned", "incomplete", "other"};
    if (rc == SQLITE_OK)
      rc = status % 4 < 3 ? sqlite3_bind_text(st, 4, reasons[status % 4], -1, SQLITE_STATIC)
                          : sqlite3_bind_int(st, 4, 42);
  } else {
    static const int statuses[] = {CONV_OK, CONV_OK, CONV_OK, CONV_OK, CONV_UNSUPPORTED,
                                   CONV_VALIDATION_FAILED, 999};
    static const double times[] = {NAN, 0, -1, 0.25, 0.5, 1, 2, 1e300, 0, 0.125};
    static const double errors[] = {NAN, 0, 1e-7, -1};
    static const char *const configs[] = {"1,2", "7", "garbage", ""};
    int time = choice(line, len, 5, 10), flags = choice(line, len, 6, 8);
    int config = choice(line, len, 7, 5);
    if (rc == SQLITE_OK)
      rc = status < 7 ? sqlite3_bind_int(st, 4, statuses[status])
                      : sqlite3_bind_text(st, 4, "OK", -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
      rc = config < 4 ? sqlite3_bind_text(st, 5, configs[config], -1, SQLITE_STATIC)
                      : sqlite3_bind_blob(st, 5, "1,2", 3, SQLITE_STATIC);
    if (rc == SQLITE_OK) rc = bind_number_or_text(st, 6, times[time], time == 8 ? "fast" : NULL);
    if (rc == SQLITE_OK) rc = bind_number_or_text(st, 7, errors[(flags >> 1) % 4], NULL);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int(st, 8, flags & 1);
  }
  REQUIRE(rc == SQLITE_OK);
  (void)sqlite3_step(st); /* a constraint may refuse the row: it is then not there */
  sqlite3_finalize(st);
}

/* Fresh destination and source caches holding the input's rows; the
 * device the merge is asked for. */
static const char *store_input(const uint8_t *data, size_t size) {
  static const char *const filters[] = {NULL, NULL, NULL, "No Such GPU|sm00"};
  const char *device = NULL;
  sqlite3 *db[2] = {NULL, NULL};
  for (int i = 0; i < 2; i++) {
    remove_cache(paths[i]);
    write_file(paths[i], template_bytes, template_size);
    REQUIRE(sqlite3_open(paths[i], &db[i]) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db[i], "BEGIN", NULL, NULL, NULL) == SQLITE_OK);
  }
  const unsigned char *text = data, *end = data + size;
  for (int rows = 0; text < end && rows < MAX_ROWS; rows++) {
    const unsigned char *newline = memchr(text, '\n', (size_t)(end - text));
    size_t len = (size_t)((newline ? newline : end) - text);
    if (rows == 0 && len >= 2 && text[0] == '#') {
      int which = choice(text, len, 1, 4);
      device = which == 1 ? devices[0] : which == 2 ? devices[1] : filters[which];
    } else if (len > 0) {
      int what = choice(text, len, 0, 4);
      store_row(db[what % 2], text, len, what >= 2);
    }
    text = newline ? newline + 1 : end;
  }
  for (int i = 0; i < 2; i++) {
    REQUIRE(sqlite3_exec(db[i], "COMMIT", NULL, NULL, NULL) == SQLITE_OK);
    REQUIRE(sqlite3_close(db[i]) == SQLITE_OK);
  }
  return device;
}

/* ---------------------------------------------------------------- what must hold */

/* A key's winner as lookups read it (the latest winner row). */
typedef struct tuning {
  char key[3][600];
  size_t key_len[3];
  int key_type[3]; /* a blob and a text of the same bytes are two keys */
  bool valid;
  double time_ms;
  int winners;
} tuning;

typedef struct census {
  tuning items[MAX_TUNINGS];
  int count;
  uint64_t digest; /* of every row of both tables */
} census;

static bool clean_text(sqlite3_stmt *st, int col) {
  if (sqlite3_column_type(st, col) != SQLITE_TEXT) return false;
  const void *text = sqlite3_column_text(st, col);
  return text != NULL && memchr(text, '\0', (size_t)sqlite3_column_bytes(st, col)) == NULL;
}

static bool number_type(sqlite3_stmt *st, int col) {
  int type = sqlite3_column_type(st, col);
  return type == SQLITE_INTEGER || type == SQLITE_FLOAT;
}

static uint64_t fnv(uint64_t h, const void *data, size_t size) {
  for (size_t i = 0; i < size; i++) h = (h ^ ((const unsigned char *)data)[i]) * 1099511628211u;
  return h;
}

static void take_census(const char *path, census *c) {
  memset(c, 0, sizeof *c);
  sqlite3 *db = NULL;
  REQUIRE(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
  sqlite3_stmt *st = NULL;
  REQUIRE(sqlite3_prepare_v2(
              db,
              "SELECT problem, device, versions, status, time_ms, rel_error,"
              " (SELECT count(*) FROM trials u WHERE u.problem = t.problem AND"
              " u.device = t.device AND u.versions = t.versions AND u.winner <> 0)"
              " FROM trials t WHERE winner <> 0 AND id = (SELECT max(id) FROM trials u WHERE"
              " u.problem = t.problem AND u.device = t.device AND u.versions = t.versions AND"
              " u.winner <> 0)",
              -1, &st, NULL) == SQLITE_OK);
  while (sqlite3_step(st) == SQLITE_ROW && c->count < MAX_TUNINGS) {
    tuning *t = &c->items[c->count++];
    bool clean = true;
    for (int col = 0; col < 3; col++) {
      t->key_type[col] = sqlite3_column_type(st, col); /* before any conversion */
      clean = clean && clean_text(st, col);
      size_t n = (size_t)sqlite3_column_bytes(st, col);
      t->key_len[col] = n < sizeof t->key[col] ? n : sizeof t->key[col];
      const void *bytes = sqlite3_column_blob(st, col);
      if (bytes != NULL) memcpy(t->key[col], bytes, t->key_len[col]);
    }
    t->time_ms = sqlite3_column_double(st, 4);
    double error = sqlite3_column_double(st, 5);
    t->valid = clean && sqlite3_column_type(st, 3) == SQLITE_INTEGER &&
               sqlite3_column_int64(st, 3) == CONV_OK && number_type(st, 4) &&
               isfinite(t->time_ms) && t->time_ms > 0 && number_type(st, 5) && isfinite(error) &&
               error >= 0;
    t->winners = sqlite3_column_int(st, 6);
  }
  sqlite3_finalize(st);
  static const char *const dumps[] = {"SELECT * FROM trials ORDER BY id",
                                      "SELECT * FROM pending ORDER BY rowid"};
  c->digest = 1469598103934665603u;
  for (int d = 0; d < 2; d++) {
    REQUIRE(sqlite3_prepare_v2(db, dumps[d], -1, &st, NULL) == SQLITE_OK);
    while (sqlite3_step(st) == SQLITE_ROW)
      for (int col = 0; col < sqlite3_column_count(st); col++) {
        int type = sqlite3_column_type(st, col);
        c->digest = fnv(c->digest, &type, sizeof type);
        const void *bytes = sqlite3_column_blob(st, col);
        if (bytes != NULL) c->digest = fnv(c->digest, bytes, (size_t)sqlite3_column_bytes(st, col));
      }
    sqlite3_finalize(st);
  }
  char check[64] = "";
  REQUIRE(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK);
  if (sqlite3_step(st) == SQLITE_ROW)
    snprintf(check, sizeof check, "%s", (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  REQUIRE(strcmp(check, "ok") == 0);
  sqlite3_close(db);
}

static const tuning *find(const census *c, const tuning *t) {
  for (int i = 0; i < c->count; i++) {
    const tuning *u = &c->items[i];
    bool same = true;
    for (int col = 0; col < 3; col++)
      same = same && u->key_type[col] == t->key_type[col] && u->key_len[col] == t->key_len[col] &&
             memcmp(u->key[col], t->key[col], t->key_len[col]) == 0;
    if (same) return u;
  }
  return NULL;
}

/* Every valid tuning of `before` is in `after`, valid and no slower. */
static void expect_kept(const census *before, const census *after) {
  for (int i = 0; i < before->count; i++) {
    const tuning *t = &before->items[i];
    if (!t->valid) continue;
    const tuning *now = find(after, t);
    REQUIRE(now != NULL && now->valid && now->time_ms <= t->time_ms);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (template_bytes == NULL) setup();
  const char *device = store_input(data, size);
  census *before = malloc(sizeof *before), *source = malloc(sizeof *source),
         *after = malloc(sizeof *after);
  REQUIRE(before != NULL && source != NULL && after != NULL);
  take_census(paths[0], before);
  take_census(paths[1], source);

  char message[1024] = "";
  size_t added = 0, replaced = 0, kept = 0;
  conv_status st = conv_cache_merge(paths[1], paths[0], device, &added, &replaced, &kept, message,
                                    sizeof message);
  REQUIRE(st == CONV_OK || st == CONV_CACHE_ERROR || st == CONV_INVALID_ARGUMENT);
  if (st != CONV_OK) REQUIRE(message[0] != '\0');
  take_census(paths[0], after);
  if (st != CONV_OK) REQUIRE(after->digest == before->digest);
  expect_kept(before, after);
  if (st == CONV_OK) {
    /* A source tuning asked for, with one winner, is there now. */
    for (int i = 0; i < source->count; i++) {
      const tuning *t = &source->items[i];
      bool asked = device == NULL || (t->key_len[1] == strlen(device) &&
                                      memcmp(t->key[1], device, t->key_len[1]) == 0);
      if (t->valid && t->winners == 1 && asked) {
        const tuning *now = find(after, t);
        REQUIRE(now != NULL && now->valid && now->time_ms <= t->time_ms);
      }
    }
    /* No key gained a second winner. */
    for (int i = 0; i < after->count; i++) {
      const tuning *was = find(before, &after->items[i]);
      if (after->items[i].winners > 1) REQUIRE(was != NULL && was->winners > 1);
    }
    REQUIRE(added + replaced + kept <= (size_t)source->count);
  }
  free(before);
  free(source);
  free(after);
  return 0;
}
