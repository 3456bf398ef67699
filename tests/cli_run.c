/*
 * cli_run.c -- running the convtune tool as a child process for the CLI
 * tests (cli_run.h).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "test.h"
#include "tests/cli_run.h"

#define CLI_TIMEOUT_MS 120000 /* a child still running by then is killed */
#define MAX_ARGS 32


void cli_result_free(cli_result *r) {
  free(r->out.data);
  free(r->err.data);
  memset(r, 0, sizeof *r);
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
  capture *c = handle->data;
  (void)suggested;
  if (c->cap - c->len < 4096 + 1) {
    size_t cap = c->cap ? c->cap * 2 : 16384;
    char *grown = realloc(c->data, cap);
    if (grown == NULL) {
      *buf = uv_buf_init(NULL, 0); /* read_cb gets UV_ENOBUFS */
      return;
    }
    c->data = grown;
    c->cap = cap;
  }
  *buf = uv_buf_init(c->data + c->len, (unsigned)(c->cap - c->len - 1));
}

static void on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *buf) {
  capture *c = stream->data;
  (void)buf;
  if (n > 0) {
    c->len += (size_t)n;
    c->data[c->len] = '\0';
    cli_result *r = c->owner;
    if (c == &r->err && r->interrupt_when != NULL && !r->interrupted && !r->exited &&
        strstr(c->data, r->interrupt_when) != NULL) {
      r->interrupted = true;
      if (uv_process_kill(&r->process, SIGINT) != 0) fprintf(stderr, "cannot send SIGINT\n");
    }
  } else if (n < 0) {
    if (n != UV_EOF) c->failed = true;
    uv_close((uv_handle_t *)stream, NULL);
  }
}

static void on_exit_(uv_process_t *process, int64_t status, int signal) {
  cli_result *r = process->data;
  r->exit_status = status;
  r->term_signal = signal;
  r->exited = true;
  uv_close((uv_handle_t *)process, NULL);
  uv_timer_stop(&r->timer);
  uv_close((uv_handle_t *)&r->timer, NULL);
}

static void on_timeout(uv_timer_t *timer) {
  cli_result *r = timer->data;
  fprintf(stderr, "the CLI ran longer than %d ms: killing it\n", CLI_TIMEOUT_MS);
  (void)uv_process_kill(&r->process, SIGKILL);
}

/* Makes sure a capture holds a NUL-terminated string, even when empty. */
static bool capture_finish(capture *c) {
  if (c->data == NULL) {
    c->data = calloc(1, 1);
    if (c->data == NULL) return false;
  }
  return !c->failed;
}

/* $CONVTUNE_CLI, the path of the convtune binary (NULL, said, when unset). */
const char *cli_path(void) {
  const char *cli = getenv("CONVTUNE_CLI");
  if (cli != NULL && cli[0] != '\0') return cli;
  fprintf(stderr, "CONVTUNE_CLI is not set (the path of the convtune binary)\n");
  return NULL;
}

/* Runs the program `cli` with args (NULL-terminated, without argv[0]) as
 * user `uid` (< 0: this process's); fills r.  Returns false (with a
 * message) when the child could not be run. */
static bool run_program_marked(const char *cli, const char *const *args, int uid,
                               const char *marker, cli_result *r) {
  memset(r, 0, sizeof *r);
  /* Tables as a pipe gets them, whatever the shell exported: a test that
   * fits one to a width says so (COLUMNS=N through env). */
  unsetenv("COLUMNS");
  r->interrupt_when = marker;
  r->out.owner = r->err.owner = r;
  if (cli == NULL) return false;
  char *argv[MAX_ARGS + 2];
  size_t n = 0;
  argv[n++] = (char *)cli;
  for (; args[n - 1] != NULL && n <= MAX_ARGS; n++) argv[n] = (char *)args[n - 1];
  argv[n] = NULL;

  uv_loop_t loop;
  if (uv_loop_init(&loop) != 0) return false;
  /* On a loop of its own these cannot fail: they only fill the handles. */
  if (uv_pipe_init(&loop, &r->out.pipe, 0) != 0 || uv_pipe_init(&loop, &r->err.pipe, 0) != 0 ||
      uv_timer_init(&loop, &r->timer) != 0) {
    fprintf(stderr, "uv_pipe_init / uv_timer_init failed\n");
    return false;
  }
  r->out.pipe.data = &r->out;
  r->err.pipe.data = &r->err;
  r->timer.data = r;
  r->process.data = r;

  uv_stdio_container_t stdio[3];
  stdio[0].flags = UV_IGNORE;
  stdio[1].flags = (uv_stdio_flags)(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
  stdio[1].data.stream = (uv_stream_t *)&r->out.pipe;
  stdio[2].flags = (uv_stdio_flags)(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
  stdio[2].data.stream = (uv_stream_t *)&r->err.pipe;
  uv_process_options_t options;
  memset(&options, 0, sizeof options);
  options.file = cli;
  options.args = argv;
  options.exit_cb = on_exit_;
  options.stdio_count = 3;
  options.stdio = stdio;
  if (uid >= 0) {
    options.flags = UV_PROCESS_SETUID | UV_PROCESS_SETGID;
    options.uid = (uv_uid_t)uid;
    options.gid = (uv_gid_t)uid;
  }

  int e = uv_spawn(&loop, &r->process, &options);
  if (e != 0) {
    fprintf(stderr, "cannot run %s: %s\n", cli, uv_strerror(e));
    uv_close((uv_handle_t *)&r->process, NULL);
    uv_close((uv_handle_t *)&r->out.pipe, NULL);
    uv_close((uv_handle_t *)&r->err.pipe, NULL);
    uv_close((uv_handle_t *)&r->timer, NULL);
  } else {
    if (uv_timer_start(&r->timer, on_timeout, CLI_TIMEOUT_MS, 0) != 0 ||
        uv_read_start((uv_stream_t *)&r->out.pipe, on_alloc, on_read) != 0 ||
        uv_read_start((uv_stream_t *)&r->err.pipe, on_alloc, on_read) != 0) {
      fprintf(stderr, "uv_timer_start / uv_read_start failed\n");
      e = -1;
    }
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  bool ok = uv_loop_close(&loop) == 0 && e == 0 && r->exited;
  ok = capture_finish(&r->out) && ok;
  ok = capture_finish(&r->err) && ok;
  if (ok && r->term_signal != 0) {
    fprintf(stderr, "the CLI died of signal %d\nstderr:\n%s\n", r->term_signal, r->err.data);
  }
  return ok && r->term_signal == 0;
}

bool run_program(const char *cli, const char *const *args, int uid, cli_result *r) {
  return run_program_marked(cli, args, uid, NULL, r);
}

bool run_cli(const char *const *args, cli_result *r) {
  return run_program(cli_path(), args, -1, r);
}

bool run_cli_interrupted(const char *const *args, const char *marker, cli_result *r) {
  return run_program_marked(cli_path(), args, -1, marker, r);
}

bool contains(const char *haystack, const char *needle) {
  return haystack != NULL && strstr(haystack, needle) != NULL;
}

size_t count_lines(const char *s) {
  size_t n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}


const char *tmp_dir(void) {
  const char *dir = getenv("CONVTUNE_TEST_TMP");
  return dir != NULL && dir[0] != '\0' ? dir : "/tmp";
}

/* TMP/cli-<pid>-<name> */
void tmp_path(char *path, size_t size, const char *name) {
  snprintf(path, size, "%s/cli-%ld-%s", tmp_dir(), (long)getpid(), name);
}

void remove_cache_files(const char *path) {
  static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
    char p[1024];
    snprintf(p, sizeof p, "%s%s", path, suffixes[i]);
    remove(p);
  }
}

bool write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  if (f == NULL) return false;
  bool ok = fputs(text, f) >= 0;
  return fclose(f) == 0 && ok;
}

bool file_exists(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f != NULL) fclose(f);
  return f != NULL;
}

/* The default cache path of every child points into the temp folder, so
 * that no test touches the user's own cache. */
void isolate_default_cache(void) {
  char path[1024];
  tmp_path(path, sizeof path, "default.db");
  setenv("CONVTUNE_CACHE", path, 1);
}

int show_finds(const char *const args[], const char *key, const char *want,
               const char *unwanted) {
  cli_result r;
  CHECK(run_cli(args, &r));
  CHECK_MSG(r.exit_status == 0, "%s %s: exit %lld\n%s", args[0], args[1], (long long)r.exit_status,
            r.err.data);
  CHECK_MSG(contains(r.out.data, key) && contains(r.out.data, want) && !contains(r.out.data, unwanted),
            "%s %s:\n%s", args[0], args[1], r.out.data);
  cli_result_free(&r);
  return TEST_PASS;
}

int check_usage_errors(const usage_case *cases, size_t count) {
  for (size_t i = 0; i < count; i++) {
    cli_result r;
    CHECK(run_cli(cases[i].args, &r));
    CHECK_MSG(r.exit_status == 2, "case %zu (%s): exit %lld\n%s", i, cases[i].args[0],
              (long long)r.exit_status, r.err.data);
    CHECK_MSG(contains(r.err.data, cases[i].message), "case %zu: stderr lacks \"%s\":\n%s", i,
              cases[i].message, r.err.data);
    CHECK_MSG(contains(r.err.data, "--help"), "case %zu: no usage hint", i);
    CHECK_MSG(r.out.len == 0, "case %zu: stdout: %s", i, r.out.data);
    cli_result_free(&r);
  }
  return TEST_PASS;
}

conv_status probe_context(void) {
  conv_context_options options;
  conv_context_options_init(&options);
  options.cache_path = ":memory:";
  conv_context *ctx = NULL;
  const conv_status st = conv_context_create(&ctx, &options);
  if (st == CONV_OK) conv_context_destroy(ctx);
  return st;
}
