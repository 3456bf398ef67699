/*
 * consumer.c -- a plain C program built against an installed convtune
 * (tests/install/run.sh): through find_package, against the shared and
 * the static library, through pkg-config, and through a plugin.  It uses
 * what works without a GPU and says what it found; a context on a
 * machine without a GPU must fail with CONV_NO_DEVICE, and that is fine.
 */
#include <stdio.h>
#include <string.h>

#include <convtune.h>

/* From plugin.c where the consumer is built with it (PLUGIN defined). */
#ifdef PLUGIN
int plugin_key(char *key, size_t size);
#endif

/* Prints each system cache file the library would open by default
 * (run.sh checks that the installed caches are among them). */
static int print_system_cache(const char *path, int named, void *user) {
  (void)named, (void)user;
  printf("system cache: %s\n", path);
  return 0;
}

int main(void) {
  if (conv_version() != CONVTUNE_VERSION) {
    fprintf(stderr, "header version %d, library %d\n", CONVTUNE_VERSION, conv_version());
    return 1;
  }
  conv_problem p;
  char message[256], key[CONV_PROBLEM_KEY_MAX];
  if (conv_problem_parse("n=2 c=8 h=12 w=12 k=16 r=3 s=3 pad=1", &p, message, sizeof message) != CONV_OK ||
      conv_problem_key(&p, key, sizeof key) != CONV_OK) {
    fprintf(stderr, "problem: %s\n", message);
    return 1;
  }
#ifdef PLUGIN
  char from_plugin[CONV_PROBLEM_KEY_MAX];
  if (plugin_key(from_plugin, sizeof from_plugin) != 0 || strcmp(from_plugin, key) != 0) {
    fprintf(stderr, "the plugin's key differs: '%s'\n", from_plugin);
    return 1;
  }
#endif
  if (conv_system_cache_files(NULL, print_system_cache, NULL, message, sizeof message) != CONV_OK) {
    fprintf(stderr, "system caches: %s\n", message);
    return 1;
  }
  conv_context_options options;
  conv_context_options_init(&options);
  options.cache_path = ":memory:";
  conv_context *ctx = NULL;
  conv_status st = conv_context_create(&ctx, &options);
  if (st != CONV_OK && st != CONV_NO_DEVICE) {
    fprintf(stderr, "context: %s: %s\n", conv_status_string(st), conv_context_last_error(NULL));
    return 1;
  }
  printf("convtune %d: %s; context: %s\n", conv_version(), key, conv_status_string(st));
  return conv_context_destroy(ctx) == CONV_OK ? 0 : 1;
}
