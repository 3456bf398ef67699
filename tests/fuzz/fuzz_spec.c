/*
 * fuzz_spec.c -- libFuzzer target: the one-line shape spec parser
 * (conv_problem_parse), with what must hold of whatever it accepts; and
 * the same bytes as a cache row's problem key (conv_problem_from_key,
 * which the predict policy runs on every key of a cache): accepted only
 * where the key of what it returns is those bytes.
 *
 * Input: the spec's bytes (a NUL ends it early, as in C).  The last byte
 * also picks the message buffer's size, so truncation is exercised too.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convtune.h"
#include "algorithms/algorithm.h"
#include "tests/fuzz/fuzz.h"

/* The spec conv_problem_parse must read back to the same problem. */
static void spec_of(const conv_problem *p, char *out, size_t size) {
  snprintf(out, size,
           "n=%lld c=%lld h=%lld w=%lld k=%lld r=%lld s=%lld pad_h=%lld pad_w=%lld "
           "stride_h=%lld stride_w=%lld dil_h=%lld dil_w=%lld groups=%lld math=%s epilogue=%s "
           "layout=%s dir=%s det=%d op=%s dtype=%s%s",
           (long long)p->n, (long long)p->c, (long long)p->h, (long long)p->w, (long long)p->k,
           (long long)p->r, (long long)p->s, (long long)p->pad_h, (long long)p->pad_w,
           (long long)p->stride_h, (long long)p->stride_w, (long long)p->dil_h,
           (long long)p->dil_w, (long long)p->groups,
           p->math == CONV_MATH_TF32 ? "tf32" : "strict",
           p->epilogue == CONV_EPILOGUE_BIAS_RELU ? "bias_relu"
           : p->epilogue == CONV_EPILOGUE_BIAS    ? "bias"
                                                   : "none",
           p->layout == CONV_LAYOUT_NHWC ? "nhwc" : "nchw",
           p->direction == CONV_BACKWARD_FILTER ? "bwd_filter"
           : p->direction == CONV_BACKWARD_DATA ? "bwd_data"
                                                : "fwd",
           p->deterministic ? 1 : 0, p->op == CONV_OP_DYNAMIC ? "dynamic" : "conv",
           p->dtype == CONV_DTYPE_F16    ? "f16"
           : p->dtype == CONV_DTYPE_BF16 ? "bf16"
                                         : "f32",
           p->filter_layout == CONV_FILTER_KRSC   ? " filter=krsc"
           : p->filter_layout == CONV_FILTER_KCRS ? " filter=kcrs"
                                                  : "");
}

static int same_problem(const conv_problem *a, const conv_problem *b) {
  return a->n == b->n && a->c == b->c && a->h == b->h && a->w == b->w && a->k == b->k &&
         a->r == b->r && a->s == b->s && a->pad_h == b->pad_h && a->pad_w == b->pad_w &&
         a->stride_h == b->stride_h && a->stride_w == b->stride_w && a->dil_h == b->dil_h &&
         a->dil_w == b->dil_w && a->groups == b->groups && a->math == b->math &&
         a->epilogue == b->epilogue && a->dtype == b->dtype && a->layout == b->layout &&
         a->direction == b->direction && a->deterministic == b->deterministic && a->op == b->op &&
         a->filter_layout == b->filter_layout;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *spec = malloc(size + 1);
  if (spec == NULL) return 0;
  memcpy(spec, data, size);
  spec[size] = '\0';
  size_t message_size = size > 0 ? data[size - 1] % 96 : 0;
  char *message = malloc(message_size + 1);
  if (message == NULL) {
    free(spec);
    return 0;
  }
  memset(message, 'X', message_size + 1);

  conv_problem p, untouched;
  memset(&p, 0x5a, sizeof p);
  untouched = p;
  conv_status st = conv_problem_parse(spec, &p, message, message_size);
  REQUIRE((int)st >= 0 && st < CONV_STATUS_COUNT_);
  REQUIRE(message[message_size] == 'X'); /* nothing past the given size */
  if (message_size > 0) REQUIRE(memchr(message, '\0', message_size) != NULL);
  if (st != CONV_OK) {
    REQUIRE(memcmp(&p, &untouched, sizeof p) == 0); /* OUT only on success */
  } else {
    REQUIRE(conv_problem_validate(&p, NULL, 0) == CONV_OK);
    char key[CONV_PROBLEM_KEY_MAX];
    REQUIRE(conv_problem_key(&p, key, sizeof key) == CONV_OK);
    REQUIRE(strlen(key) < CONV_PROBLEM_KEY_MAX);
    int64_t out_p = 0, out_q = 0;
    REQUIRE(conv_problem_output_dims(&p, &out_p, &out_q) == CONV_OK && out_p >= 1 && out_q >= 1);
    char again_spec[512];
    spec_of(&p, again_spec, sizeof again_spec);
    conv_problem again;
    REQUIRE(conv_problem_parse(again_spec, &again, NULL, 0) == CONV_OK);
    REQUIRE(same_problem(&p, &again));
    conv_problem from_key; /* the spec's key reads back as its problem */
    REQUIRE(conv_problem_from_key(key, &from_key) == CONV_OK && same_problem(&p, &from_key));
  }
  conv_problem keyed = untouched;
  if (conv_problem_from_key(spec, &keyed) == CONV_OK) {
    char key[CONV_PROBLEM_KEY_MAX];
    REQUIRE(conv_problem_key(&keyed, key, sizeof key) == CONV_OK && strcmp(key, spec) == 0);
  } else {
    REQUIRE(memcmp(&keyed, &untouched, sizeof keyed) == 0);
  }
  free(message);
  free(spec);
  return 0;
}
