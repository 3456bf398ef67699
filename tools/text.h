/*
 * text.h -- UTF-8 checks and text made safe to print.
 *
 * What the CLI prints can come from untrusted places: a shipped cache's
 * strings, a suite file's names, the command line.  Written raw, an escape
 * sequence in any of them would drive the user's terminal, and an invalid
 * byte would break a JSON reader.  The JSON writer (json.h) and the CLI's
 * text output both pass such strings through here.
 */
#ifndef CONVTUNE_TOOLS_TEXT_H
#define CONVTUNE_TOOLS_TEXT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Length (2-4) of the valid UTF-8 sequence that starts a multi-byte
 * character at s[0..avail), or 0 if invalid: overlong forms, surrogates,
 * code points above U+10FFFF and truncated sequences are invalid.  ASCII
 * (s[0] < 0x80) is not a multi-byte sequence: 0. */
size_t utf8_sequence_length(const unsigned char *s, size_t avail);

/* The code point of a valid sequence of `len` bytes (utf8_sequence_length). */
uint32_t utf8_decode(const unsigned char *s, size_t len);

/* Copies `text` into out[size] as one printable line, always
 * NUL-terminated, truncated at a character boundary: newlines and tabs
 * become spaces, and every other control character (C0, DEL, C1) and every
 * byte that is not valid UTF-8 becomes "\xNN", so that nothing in it can
 * move the cursor, recolour or retitle the terminal.  Valid UTF-8 text
 * ("é") is kept as it is.  NULL is "".  Returns out. */
const char *text_printable(const char *text, char *out, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_TOOLS_TEXT_H */
