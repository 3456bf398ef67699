/* plugin.c -- a shared library linking convtune::convtune, as an inference
 * engine's plugin does (tests/install/run.sh). */
#include <stddef.h>

#include <convtune.h>

int plugin_key(char *key, size_t size) {
  conv_problem p;
  if (conv_problem_parse("n=2 c=8 h=12 w=12 k=16 r=3 s=3 pad=1", &p, NULL, 0) != CONV_OK) return 1;
  return conv_problem_key(&p, key, size) == CONV_OK ? 0 : 1;
}
