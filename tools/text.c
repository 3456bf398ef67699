/* text.c -- UTF-8 checks and printable text (see text.h). */
#include "tools/text.h"

#include <stdio.h>
#include <string.h>

size_t utf8_sequence_length(const unsigned char *s, size_t avail) {
  unsigned char c = s[0];
  size_t n;
  unsigned char lo = 0x80, hi = 0xbf; /* range of the second byte */
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (avail < n) return 0;
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < n; i++) {
    if (s[i] < 0x80 || s[i] > 0xbf) return 0;
  }
  return n;
}

uint32_t utf8_decode(const unsigned char *s, size_t len) {
  static const unsigned char lead_mask[5] = {0, 0x7f, 0x1f, 0x0f, 0x07};
  uint32_t cp = s[0] & lead_mask[len];
  for (size_t i = 1; i < len; i++) cp = (cp << 6) | (s[i] & 0x3f);
  return cp;
}

/* Appends piece[0..n) if it fits with the NUL; false when it does not. */
static int append(char *out, size_t size, size_t *len, const char *piece, size_t n) {
  if (*len + n + 1 > size) return 0;
  memcpy(out + *len, piece, n);
  *len += n;
  return 1;
}

const char *text_printable(const char *text, char *out, size_t size) {
  if (size == 0) return out;
  size_t len = 0;
  const unsigned char *s = (const unsigned char *)(text ? text : "");
  size_t avail = strlen((const char *)s);
  for (size_t i = 0; i < avail;) {
    size_t n = s[i] < 0x80 ? 1 : utf8_sequence_length(s + i, avail - i);
    char escaped[8];
    const char *piece = (const char *)s + i;
    size_t piece_len = n;
    if (s[i] == '\n' || s[i] == '\r' || s[i] == '\t') {
      piece = " ";
    } else if (n == 0 || s[i] < 0x20 || s[i] == 0x7f ||
               (n == 2 && utf8_decode(s + i, 2) <= 0x9f)) { /* C1: U+0080-U+009F */
      snprintf(escaped, sizeof escaped, "\\x%02x", (unsigned)s[i]);
      piece = escaped;
      piece_len = 4;
      n = 1; /* a C1 character's second byte gets its own escape */
    }
    if (!append(out, size, &len, piece, piece_len)) break;
    i += n;
  }
  out[len] = '\0';
  return out;
}
