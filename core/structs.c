/* structs.c -- public structs of any header version (see the versions note
 * at the top of convtune.h): what the library reads from a caller's struct
 * and writes into one, whatever size the caller's header gave it. */
#include <string.h>

#include "core/core.h"

static size_t smaller(size_t a, size_t b) { return a < b ? a : b; }

static bool all_zero(const unsigned char *bytes, size_t count) {
  for (size_t i = 0; i < count; i++)
    if (bytes[i] != 0) return false;
  return true;
}

conv_status conv_struct_import(void *ours, size_t our_size, const void *theirs, size_t their_size,
                               size_t first_size, const char *name, conv_error *err) {
  if (their_size < first_size)
    return conv_error_set(err, CONV_INVALID_ARGUMENT,
                          "%s.struct_size is %zu, not a size any convtune.h gave it: fill the "
                          "struct with %s_init() first",
                          name, their_size, name);
  /* A newer header's fields, at their default 0, ask nothing of us. */
  if (their_size > our_size &&
      !all_zero((const unsigned char *)theirs + our_size, their_size - our_size))
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "%s sets fields this library (convtune %d.%d.%d, %zu bytes) does not "
                          "know (%zu bytes): the program was built against a newer convtune.h",
                          name, CONVTUNE_VERSION_MAJOR, CONVTUNE_VERSION_MINOR,
                          CONVTUNE_VERSION_PATCH, our_size, their_size);
  memcpy(ours, theirs, smaller(our_size, their_size));
  return CONV_OK;
}

void conv_struct_export(void *theirs, size_t their_size, const void *ours, size_t our_size) {
  memcpy(theirs, ours, smaller(our_size, their_size));
  if (their_size > our_size) memset((unsigned char *)theirs + our_size, 0, their_size - our_size);
}
