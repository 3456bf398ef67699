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

#include <stdbool.h>
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

/* Whether a character must not reach a terminal or a reader raw: the C0
 * controls, DEL, the C1 controls (U+0080-U+009F: U+009B is a terminal's
 * CSI) and the bidirectional formatting controls (U+061C, U+200E-U+200F,
 * U+202A-U+202E, U+2066-U+2069), which reorder the text around them so
 * that what is shown is not what is there. */
bool text_is_control(uint32_t code_point);

/* The character at s[0..avail) (avail >= 1): returns its length in bytes
 * (1 for a byte that is not valid UTF-8), and *printable says whether it
 * is valid UTF-8 and not a control (text_is_control). */
size_t text_next(const unsigned char *s, size_t avail, bool *printable /* OUT */);

/* The offset of the first character of `text` that is not printable
 * (text_next), a newline excepted when allow_newlines; -1 when none is. */
long text_first_unsafe(const char *text, bool allow_newlines);

/* Characters of UTF-8 text (bytes that do not continue a sequence): the
 * columns it takes, one per character. */
size_t text_chars(const char *s);

/* Bytes of the first `chars` characters of s (all of s when it is shorter). */
size_t text_prefix_bytes(const char *s, size_t chars);

/* Copies `text` into out[size] as one printable line, always
 * NUL-terminated, truncated at a character boundary: newlines and tabs
 * become spaces, and every byte of a control character (text_is_control:
 * C0, DEL, C1, bidi controls) and every byte that is not valid UTF-8
 * becomes "\xNN", so that nothing in it can move the cursor, recolour or
 * retitle the terminal, or reorder what is shown.  Other valid UTF-8 text
 * ("é") is kept as it is.  NULL is "".  Returns out. */
const char *text_printable(const char *text, char *out, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_TOOLS_TEXT_H */
