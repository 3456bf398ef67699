/*
 * phases.c -- see phases.h.
 */
#include <stdlib.h>
#include <string.h>

#include "tools/cli/phases.h"
#include "tools/json.h"

#define MARK "phases (s): "

/* One "name seconds" pair at *at; moves *at past it and its ", ". */
static bool read_pair(const char **at, char *name, size_t name_size, double *seconds) {
  const char *p = *at, *space = strchr(p, ' ');
  if (space == NULL || space == p || (size_t)(space - p) >= name_size) return false;
  for (const char *c = p; c < space; c++)
    if (!((*c >= 'a' && *c <= 'z') || *c == '_')) return false;
  memcpy(name, p, (size_t)(space - p));
  name[space - p] = '\0';
  char *end = NULL;
  *seconds = strtod(space + 1, &end);
  if (end == space + 1 || !(*seconds >= 0)) return false;
  *at = strncmp(end, ", ", 2) == 0 ? end + 2 : end;
  return true;
}

bool tune_phases_parse(const char *message, tune_phases *out) {
  const char *at = message != NULL ? strstr(message, MARK) : NULL;
  if (at == NULL || out == NULL) return false;
  at += strlen(MARK);
  tune_phases read = {0};
  while (*at != '\0' && read.count < TUNE_PHASES_MAX) {
    if (!read_pair(&at, read.name[read.count], sizeof read.name[0], &read.seconds[read.count]))
      return false;
    read.count++;
  }
  if (read.count == 0) return false;
  *out = read;
  return true;
}

void tune_phases_write_json(FILE *out, const tune_phases *phases) {
  double total = 0;
  fputc('{', out);
  for (int i = 0; i < phases->count; i++) {
    json_write_string(out, phases->name[i]);
    fputs(": ", out);
    json_write_number(out, phases->seconds[i]);
    fputs(", ", out);
    total += phases->seconds[i];
  }
  fputs("\"total\": ", out);
  json_write_number(out, total);
  fputc('}', out);
}
