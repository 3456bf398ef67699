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

bool text_is_control(uint32_t c) {
  return c < 0x20 || (c >= 0x7f && c <= 0x9f) || c == 0x061c || c == 0x200e || c == 0x200f ||
         (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069);
}

size_t text_next(const unsigned char *s, size_t avail, bool *printable) {
  size_t n = s[0] < 0x80 ? 1 : utf8_sequence_length(s, avail);
  *printable = n > 0 && !text_is_control(n == 1 ? s[0] : utf8_decode(s, n));
  return n > 0 ? n : 1;
}

long text_first_unsafe(const char *text, bool allow_newlines) {
  const unsigned char *s = (const unsigned char *)text;
  size_t len = strlen(text);
  for (size_t i = 0; i < len;) {
    bool printable;
    size_t n = text_next(s + i, len - i, &printable);
    if (!printable && !(allow_newlines && s[i] == '\n')) return (long)i;
    i += n;
  }
  return -1;
}

size_t text_chars(const char *s) {
  size_t n = 0;
  for (; *s; s++) n += ((unsigned char)*s & 0xc0) != 0x80;
  return n;
}

size_t text_prefix_bytes(const char *s, size_t chars) {
  size_t i = 0;
  for (; s[i] != '\0'; i++)
    if (((unsigned char)s[i] & 0xc0) != 0x80 && chars-- == 0) break;
  return i;
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
    bool printable;
    size_t n = text_next(s + i, avail - i, &printable);
    if (s[i] == '\n' || s[i] == '\r' || s[i] == '\t') {
      if (!append(out, size, &len, " ", 1)) break;
    } else if (printable) {
      if (!append(out, size, &len, (const char *)s + i, n)) break;
    } else {
      /* Every byte of the character as "\xNN", all or none of them. */
      char escaped[4 * 4 + 1];
      for (size_t b = 0; b < n; b++) snprintf(escaped + 4 * b, 5, "\\x%02x", (unsigned)s[i + b]);
      if (!append(out, size, &len, escaped, 4 * n)) break;
    }
    i += n;
  }
  out[len] = '\0';
  return out;
}
