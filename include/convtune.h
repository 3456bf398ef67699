/*
 * convtune.h -- the only public header of convtune.
 *
 * convtune picks the fastest correct way to run a 2-D convolution on the
 * GPU in hand.  For each problem it builds a key (problem + GPU + library
 * versions), looks it up in memory and then in an SQLite cache, and on a miss
 * times every applicable candidate (every cuDNN engine configuration,
 * im2col + cuBLAS GEMM, ...), validates each against a plain reference
 * kernel, stores every timing and the winner, and returns a plan.
 *
 *     conv_context *ctx;
 *     if (conv_context_create(&ctx, NULL) != CONV_OK) ...   // device 0, default cache
 *     conv_problem p;
 *     conv_problem_init(&p);
 *     p.n = 32; p.c = 64; p.h = 56; p.w = 56; p.k = 64; p.r = 3; p.s = 3;
 *     p.pad_h = p.pad_w = 1;
 *     conv_plan *plan;
 *     if (conv_plan_create(ctx, &p, &plan) != CONV_OK)
 *         fprintf(stderr, "%s\n", conv_context_last_error(ctx));
 *     conv_plan_execute(plan, stream, x, w, NULL, y);       // asynchronous on `stream`
 *     conv_plan_destroy(plan);
 *     conv_context_destroy(ctx);
 *
 * Conventions (SQLite's): every function returns a conv_status; out-parameters
 * are marked OUT and are written only on success; destroy functions accept
 * NULL; a failing call leaves its inputs and the cache unchanged and keeps a
 * detailed message for the calling thread (conv_context_last_error).  The
 * library never aborts the host process.
 *
 * Tensors: NCHW input x[n][c][h][w], filter w[k][c/groups][r][s], bias
 * b[k], output y[n][k][p][q] where p, q come from
 * conv_problem_output_dims(); or, with layout NHWC (PyTorch's
 * channels_last), x[n][h][w][c], w[k][r][s][c/groups] and y[n][p][q][k]
 * (for depthwise filters, c/groups == 1, the two filter layouts are the same
 * bytes).  x, w and y (and dx, dw, dy) hold elements of the problem's dtype
 * (conv_dtype: fp32, fp16 or bf16); the bias is fp32 whatever the dtype.
 * Sums are accumulated in fp32 at least (or, for a cuDNN engine that may
 * sum in reduced precision, measured to be as accurate on the validation
 * run: within 2.5 roundings of the output); in fp16 and bf16 an epilogue is
 * applied in fp32 to the accumulated sum, before the one rounding of each
 * output to the type.  All pointers passed to conv_plan_execute are
 * device pointers aligned to CONV_POINTER_ALIGNMENT bytes (cudaMalloc gives
 * 256), which lets the vectorised cuDNN and cuBLAS kernels run.  This is
 * cross-correlation (no filter flip), as in cuDNN and PyTorch.
 */
#ifndef CONVTUNE_H
#define CONVTUNE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* This header's version (CMake reads it from here: it is the project's).
 * MAJOR changes when the ABI does (the shared library's SONAME is
 * libconvtune.so.MAJOR); MINOR when functions or struct fields are added;
 * PATCH for fixes.  Before 1.0 a MINOR may also change the ABI, so the
 * SONAME is libconvtune.so.0.MINOR (0.3 did: struct_size, below).  conv_version() says which library a program runs with.
 *
 * Structs grow without breaking programs built against an older header:
 * fields are only ever added at the end, with 0 as their default, and the
 * library learns the size of the caller's struct.  conv_problem and
 * conv_context_options carry it in `struct_size`, which their init macros
 * set from the caller's sizeof; functions that fill a struct are macros that
 * pass it (conv_problem_parse, conv_plan_info_get).  A newer library reads
 * an older, shorter struct with defaults for the missing fields and writes
 * only its bytes; an older library accepts a newer, longer struct whose
 * unknown fields are all 0 and refuses one that sets them
 * (CONV_UNSUPPORTED).  So: always fill structs with their init macro; the
 * *_sized functions behind the macros are for bindings, which pass the size
 * of their own copy of the struct. */
#define CONVTUNE_VERSION_MAJOR 0
#define CONVTUNE_VERSION_MINOR 7
#define CONVTUNE_VERSION_PATCH 0
#define CONVTUNE_VERSION \
  (CONVTUNE_VERSION_MAJOR * 10000 + CONVTUNE_VERSION_MINOR * 100 + CONVTUNE_VERSION_PATCH)

/* Alignment, in bytes, that conv_plan_execute requires of every tensor. */
#define CONV_POINTER_ALIGNMENT 16

/* ---------------------------------------------------------------- status */

/* X(name, message): one list feeds the enum and conv_status_string().  The
 * values are stored in caches (a trial's status): new ones go last. */
#define CONV_STATUS_MAP(X)                                                     \
  X(OK, "success")                                                             \
  X(INVALID_ARGUMENT, "invalid argument (NULL pointer or bad option)")         \
  X(BAD_DIMENSION, "a dimension is not positive or is absurdly large")         \
  X(SIZE_OVERFLOW, "a tensor size exceeds 64-bit or 2^31-element limits")      \
  X(FILTER_TOO_LARGE, "the dilated filter is larger than the padded input")    \
  X(BAD_GROUPS, "groups must be positive and divide both C and K")             \
  X(BAD_PADDING, "padding is negative")                                        \
  X(BAD_STRIDE, "stride or dilation is not positive")                          \
  X(UNSUPPORTED, "not supported (dtype, layout, direction, epilogue or config)") \
  X(NO_DEVICE, "no usable CUDA device")                                        \
  X(CUDA_ERROR, "CUDA runtime error")                                          \
  X(CUDNN_ERROR, "cuDNN error")                                                \
  X(CUBLAS_ERROR, "cuBLAS error")                                              \
  X(OUT_OF_MEMORY, "out of memory")                                            \
  X(WORKSPACE_LIMIT, "workspace larger than the context's limit")              \
  X(CACHE_ERROR, "plan cache (SQLite) error")                                  \
  X(CACHE_MISS, "problem not in the cache and the policy forbids tuning")      \
  X(NO_CANDIDATE, "no candidate produced a valid result")                      \
  X(VALIDATION_FAILED, "result differs from the reference")                    \
  X(INTERRUPTED, "interrupted")                                                \
  X(INTERNAL, "internal error")                                                \
  X(BUSY, "still in use (a context with live plans)")                         \
  X(EVEN_FILTER, "a dynamic convolution's filter size is even (it must be odd)")

typedef enum conv_status {
#define CONV_STATUS_ENUM_(name, msg) CONV_##name,
  CONV_STATUS_MAP(CONV_STATUS_ENUM_)
#undef CONV_STATUS_ENUM_
  CONV_STATUS_COUNT_
} conv_status;

/* Static English text for a status; "unknown status" for values out of range. */
const char *conv_status_string(conv_status status);

/* ---------------------------------------------------------------- problem */

/* The element type of x, w and y (conv_problem.dtype), as keys and specs
 * spell it:
 * F32   "f32"   IEEE binary32 (the default);
 * F16   "f16"   IEEE binary16 (PyTorch's float16): 11 significant bits, at
 *               most 65504; a sum past that is inf, and a candidate whose
 *               output overflows where the reference does not never wins;
 * BF16  "bf16"  bfloat16 (PyTorch's bfloat16): fp32's range, 8
 *               significant bits.
 * In the half types (F16, BF16) products are exact in fp32, sums are
 * fp32, and each output is rounded once to the type; the bias stays fp32.
 * Convolutions (CONV_OP_CONVOLUTION) take every type in every direction
 * and both layouts; which candidates run them is docs/tuning.md's families
 * table (this version: cuDNN's engines; the other families refuse half
 * problems).  The dynamic op is fp32 only (CONV_UNSUPPORTED). */
typedef enum conv_dtype { CONV_DTYPE_F32 = 0, CONV_DTYPE_F16, CONV_DTYPE_BF16 } conv_dtype;
typedef enum conv_layout { CONV_LAYOUT_NCHW = 0, CONV_LAYOUT_NHWC } conv_layout;
/* The order of a filter's floats.  DEFAULT is the layout's own: K C R S
 * for NCHW, K R S C for NHWC.  KRSC with an NCHW layout keeps x and y NCHW
 * and takes w[k][r][s][c/groups]: PyTorch's channels-last weights, filters
 * that cuDNN's channels-last engines read without transposing them first,
 * which a caller whose filters do not change between calls can keep so
 * (see conv_problem.filter_layout).  Where c/groups == 1 or r*s == 1 the
 * orders are the same bytes and the problem is the DEFAULT one. */
typedef enum conv_filter_layout {
  CONV_FILTER_DEFAULT = 0,
  CONV_FILTER_KCRS,
  CONV_FILTER_KRSC
} conv_filter_layout;
/* Which pass of the convolution y = conv(x, w) a problem is:
 * FORWARD          y  from x and w  (conv_plan_execute);
 * BACKWARD_DATA    dx from dy and w (conv_plan_backward_data): the gradient of
 *                  a loss with respect to x, given dy, its gradient with
 *                  respect to y;
 * BACKWARD_FILTER  dw from x and dy (conv_plan_backward_filter).
 * dx, dy and dw have the shapes and layout of x, y and w.  Backward problems
 * take no epilogue (the bias gradient is dy summed over n, p and q).  This
 * version runs them with cuDNN's engines and, for NCHW layers with few
 * channels per group, its own direct kernels. */
typedef enum conv_direction {
  CONV_FORWARD = 0,
  CONV_BACKWARD_DATA,
  CONV_BACKWARD_FILTER
} conv_direction;

/* Math mode: what arithmetic a candidate may use on fp32 tensors.
 * STRICT: IEEE fp32 multiply-add only (no TF32 tensor cores).
 * TF32:   TF32 tensor cores allowed (10-bit mantissa inputs, fp32 accumulate).
 * For the half types (CONV_DTYPE_F16, BF16) it is ignored: their inputs
 * have no precision to lose to TF32, tensor cores are always allowed and
 * the sums are fp32 either way, so a half problem is made STRICT (the
 * default) wherever the library reads one (its key says "strict", and a
 * TF32 request of the same shape shares its tuning and plan). */
typedef enum conv_math { CONV_MATH_STRICT = 0, CONV_MATH_TF32 } conv_math;

/* Epilogue fused after the convolution: y = conv, y = conv + b[k],
 * y = max(conv + b[k], 0). */
typedef enum conv_epilogue {
  CONV_EPILOGUE_NONE = 0,
  CONV_EPILOGUE_BIAS,
  CONV_EPILOGUE_BIAS_RELU
} conv_epilogue;

/* What a problem computes.
 * CONVOLUTION  the convolution y = conv(x, w) described above (default).
 * DYNAMIC      the per-pixel ("high order") dynamic convolution, of which
 *              involution is the grouped form: every output pixel of every
 *              image has its own k x k filter per channel group, an input
 *              tensor like x rather than a learned filter.  With
 *              g(c) = c / (C/G) and pad = (k-1)/2 * d,
 *                y[b][c][p][q] = sum over i, j < k of
 *                    wt[b][g(c)][i*k + j][p][q] *
 *                    x[b][c][p*stride - pad + i*d][q*stride - pad + j*d]
 *              (zero outside the image).  The conv_problem fields read:
 *                n = B, c = C, h = H, w = W     x[B][C][H][W]
 *                r = s = k                      odd (CONV_EVEN_FILTER else)
 *                k = C                          the output has x's channels
 *                groups = G                     divides C; 1 for the seed's
 *                                               form, G for involution
 *                dil_h = dil_w = d
 *                stride_h = stride_w            1 or 2
 *                pad_h = pad_w = (k-1)/2 * d    'same' padding, so
 *                                               P = ceil(H / stride), Q likewise
 *              and the filter tensor ("weights", the `w` argument of the
 *              execute calls) is wt[B][G][k*k][P][Q], contiguous, tap i*k + j
 *              (row i, column j of the window) at index i*k + j.  This is
 *              involution's layout; the seed's (k*k, B, 1, H, W) weights are
 *              its permutation (k*k first) for G = 1.  y is y[B][C][P][Q].
 *              Directions: FORWARD (conv_plan_execute(plan, stream, x, wt,
 *              NULL, y)), BACKWARD_DATA (conv_plan_backward_data(plan, stream,
 *              dy, wt, dx)) and BACKWARD_FILTER (conv_plan_backward_filter(
 *              plan, stream, x, dy, dwt): the gradient of the weights, each
 *              element a sum over the C/G channels of its group).  NCHW fp32
 *              only (another layout or dtype is CONV_UNSUPPORTED), no
 *              epilogue.  Keys start "dyn " ("dyn fwd f32 nchw
 *              strict ..."), so they never meet a convolution's. */
typedef enum conv_op { CONV_OP_CONVOLUTION = 0, CONV_OP_DYNAMIC } conv_op;

/* A convolution.  Always fill with conv_problem_init() first so that fields
 * added in later versions get their defaults. */
typedef struct conv_problem {
  size_t struct_size;       /* set by conv_problem_init (see the versions    *
                             * note at the top); never set by hand            */
  int64_t n, c, h, w;       /* input: batch, channels, height, width          */
  int64_t k;                /* output channels                                */
  int64_t r, s;             /* filter height, width                           */
  int64_t pad_h, pad_w;     /* zero padding on each side (>= 0)               */
  int64_t stride_h, stride_w;
  int64_t dil_h, dil_w;     /* dilation                                       */
  int64_t groups;           /* divides c and k; c/groups channels per filter  */
  conv_dtype dtype;         /* element type of x, w and y (and dx, dw, dy):  *
                             * CONV_DTYPE_F32 (default), F16 or BF16; the     *
                             * bias is fp32 always (conv_dtype).  Part of the *
                             * key ("f32", "f16", "bf16")                      */
  conv_layout layout;       /* NCHW; or NHWC: channels innermost in x and y,   *
                             * the filter KRSC (cuDNN runs it, and for         *
                             * depthwise problems depthwise_nhwc too)         */
  conv_direction direction; /* forward; or a backward pass (below): x, w and y *
                             * keep their forward shapes, and the pass        *
                             * writes dx or dw instead of y                    */
  conv_math math;           /* fp32 only; a half problem's is STRICT (conv_math) */
  conv_epilogue epilogue;   /* applied in fp32 before the output's rounding   */
  int deterministic;        /* 1: only candidates whose results do not depend *
                             * on scheduling (no float atomics, a fixed       *
                             * reduction order) may run it, so that two runs  *
                             * on one GPU give bit-identical results; 0: any  *
                             * (default).  Part of the key (" det").          */
  /* Added after 0.2.0 (the fields above are 0.2.0's): */
  conv_op op;               /* CONV_OP_CONVOLUTION (0, default) or             *
                             * CONV_OP_DYNAMIC, which reads the fields above  *
                             * as conv_op says                                 */
  /* Added in 0.6.0: */
  conv_filter_layout filter_layout; /* DEFAULT (0): the layout's own order.      *
                             * KRSC with layout NCHW: forward convolutions    *
                             * only; the families that read such filters run  *
                             * it (docs/tuning.md, the families).  KCRS with  *
                             * NHWC: CONV_UNSUPPORTED.  Part of the key       *
                             * (" krsc") where the orders differ.             */
} conv_problem;

/* Sets every field to its default: zero sizes (the caller must set n, c, h, w,
 * k, r, s), pads 0, strides 1, dilations 1, groups 1, fp32 (CONV_DTYPE_F32), NCHW, forward,
 * strict fp32, no epilogue, not deterministic, a convolution, the layout's
 * own filter order; and struct_size.  Every
 * function taking a conv_problem checks struct_size: a problem not made by
 * conv_problem_init (or conv_problem_parse) is CONV_INVALID_ARGUMENT. */
#define conv_problem_init(problem) conv_problem_init_sized((problem), sizeof *(problem))
void conv_problem_init_sized(conv_problem *problem, size_t struct_size);

/* Checks the problem without touching any device.  Returns CONV_OK or the
 * specific status of the first problem found; `message` (may be NULL)
 * receives a sentence naming the offending field, NUL-terminated and
 * truncated to `message_size`. */
conv_status conv_problem_validate(const conv_problem *problem, char *message, size_t message_size);

/* Output height and width of a valid problem:
 * p = (h + 2*pad_h - dil_h*(r-1) - 1) / stride_h + 1, likewise q.
 * Returns the validation status on an invalid problem. */
conv_status conv_problem_output_dims(const conv_problem *problem, int64_t *p /* OUT */,
                                     int64_t *q /* OUT */);

/* Batches of patches (many small images per item, e.g. B x P x C x H x W
 * crops): a contiguous B x P x C x H x W tensor is the NCHW tensor with
 * N = B * P, and the output B x P x K x P' x Q' is the NCHW output, so the
 * convolution is one problem over B * P images, which is what the `patch`
 * candidate is built for.  Sets problem->n = batch * patches; returns
 * CONV_BAD_DIMENSION if either is not positive, CONV_SIZE_OVERFLOW if the
 * product does not fit, CONV_INVALID_ARGUMENT for a NULL problem, and
 * leaves the problem unchanged on failure. */
conv_status conv_problem_set_patches(conv_problem *problem, int64_t batch, int64_t patches);

/* Bytes that always hold a valid problem's key, with its terminating NUL. */
#define CONV_PROBLEM_KEY_MAX 256

/* Canonical, human-readable key of the problem, the one the cache stores,
 * e.g. "fwd f32 nchw strict none n32 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1"
 * (the second word is the dtype: "f32", "f16" or "bf16"; a half problem's
 * math word is always "strict", conv_math says why, e.g. "fwd bf16 nhwc
 * strict bias_relu n16 ..."; "bwd_data ..." and "bwd_filter ..." for the
 * backward passes; " krsc"
 * after the groups of an NCHW problem whose filters are K R S C, where that
 * differs from K C R S; " det" at
 * the end of a deterministic problem's; "dyn " before the direction of a
 * dynamic problem's, e.g. "dyn fwd f32 nchw strict none n64 c3 h224 w224
 * k3 r5 s5 pad2,2 str1,1 dil1,1 g1").
 * The problem is validated first: an invalid one returns its
 * conv_problem_validate status.  Returns CONV_INVALID_ARGUMENT when
 * `key_size` is too small (CONV_PROBLEM_KEY_MAX always suffices).  `key` is
 * written only on success. */
conv_status conv_problem_key(const conv_problem *problem, char *key /* OUT */, size_t key_size);

/* Parses a one-line shape spec into `problem` (which it conv_problem_init()s first;
 * a macro, for the struct's size, like conv_problem_init):
 * space- or comma-separated NAME=VALUE fields n c h w k r s pad stride dil groups
 * (pad/stride/dil set both axes; pad_h pad_w stride_h stride_w dil_h dil_w set one),
 * math=strict|tf32, epilogue=none|bias|bias_relu, layout=nchw|nhwc,
 * filter=kcrs|krsc (conv_problem.filter_layout; the layout's own when not
 * given), dir=fwd|bwd_data|bwd_filter, det=0|1 (deterministic),
 * op=conv|dynamic, dtype=f32|f16|bf16 (conv_problem.dtype; a half dtype
 * makes math strict, as conv_math says), e.g.
 * "n=32 c=64 h=56 w=56 k=64 r=3 s=3 pad=1" or
 * "n=16 c=64 h=56 w=56 k=64 r=3 s=3 pad=1 layout=nhwc dtype=bf16".  Unknown
 * fields are an error.  With op=dynamic, fields it determines may be left
 * out: k (= c), s (= r) and pad (= (r-1)/2 * dil), e.g.
 * "op=dynamic n=32 c=64 h=56 w=56 r=7 g=4". */
#define conv_problem_parse(spec, problem, message, message_size) \
  conv_problem_parse_sized((spec), (problem), sizeof *(problem), (message), (message_size))
conv_status conv_problem_parse_sized(const char *spec, conv_problem *problem /* OUT */,
                                     size_t struct_size, char *message, size_t message_size);

/* The problem whose conv_problem_key() is `key`, as a cache's rows name
 * problems (conv_cache_entry.problem, conv_cache_pending_entry.problem).
 * CONV_INVALID_ARGUMENT, *problem unchanged, for NULL or for text that is
 * not exactly a key this version writes (of a valid problem).  A macro,
 * for the struct's size, like conv_problem_parse.  Added in 0.5.0. */
#define conv_problem_from_key(key, problem) \
  conv_problem_from_key_sized((key), (problem), sizeof *(problem))
conv_status conv_problem_from_key_sized(const char *key, conv_problem *problem /* OUT */,
                                        size_t struct_size);

/* ---------------------------------------------------------------- context */

typedef enum conv_policy {
  CONV_POLICY_EXHAUSTIVE = 0, /* time every applicable candidate configuration */
  CONV_POLICY_FAST,           /* time a few best-guess candidates only         */
  CONV_POLICY_CACHE_ONLY,     /* never tune: a miss is CONV_CACHE_MISS         */
  /* Never tune, never fail for want of a tuning: a problem missing from
   * both caches gets a plan made without timing anything, the first
   * candidate in the fast policy's order (cuDNN's heuristic ranking first)
   * that builds within the workspace limit and matches the reference on
   * random inputs (source CONV_SOURCE_HEURISTIC, time_ms -1), and is
   * recorded as pending in the user's cache ("untuned"), for `convtune
   * tune --pending` to tune later, offline.  Nothing is stored as a
   * winner.  A read-only cache records nothing (a WARN message says so)
   * and the plan is still returned.  Added after 0.3.0. */
  CONV_POLICY_RECORD,
  /* Tune a miss by prediction from the caches' own tunings: find the 3
   * nearest problems of its kind (same op, direction, dtype, layout, math mode,
   * epilogue or not, determinism) tuned on this device and library
   * versions in the user's cache or the system cache (the user's tuning
   * of a problem in both), by their sizes; where their winners are of
   * one candidate family, time only that family's configs that ran
   * fastest on them (8 of cuDNN's, 24 of another family's) and cuDNN's
   * best guesses (its first 3 configs; on strict fp32 3x3 stride-1 dense
   * layers its Winograd engines too: docs/tuning.md) (and, where those
   * neighbours are far, the problem lies outside their range, or their
   * FFT winners differ in shape, every applicable family's 3 best
   * guesses too: docs/tuning.md, "Widening"), keep the fastest valid
   * one, and record the problem as pending ("incomplete") for `convtune tune --pending` (or an
   * exhaustive context) to finish; where their winners' families differ,
   * time each of those families' ranked configs, cuDNN's ranked configs
   * and best guesses, and every config of every other family (a split
   * prediction, pending too: docs/tuning.md, "Split predictions"); where
   * fewer than 3 are tuned, or nothing predicted is valid, time every
   * candidate as CONV_POLICY_EXHAUSTIVE does.  A split or full search
   * leaves out the configs that ran 1 ms or more and over 10x the winner
   * on one of the 8 nearest tuned problems of the kind (then recorded as
   * pending too: docs/tuning.md, "Prediction").  The log says which
   * (INFO).  With a tuning budget, the searches run within it.  The
   * default since 0.5.0 (exhaustive before): on an H200, resnet50's first
   * uses at batch 16 tuned in 6.3 s in strict fp32 and 14.7 s in TF32, its
   * plans within 1.4% of the exhaustive winners' time (geomean;
   * BENCHMARKS-tuning.md).  Added in 0.5.0. */
  CONV_POLICY_PREDICT
} conv_policy;

/* Levels of the messages a context passes to its log callback, most severe
 * first (0 is no level: as conv_context_options.log_level it stands for the
 * default, CONV_LOG_INFO).  The library itself never prints (nothing on stderr or stdout): what
 * it has to say goes to conv_context_options.log, or nowhere.
 * ERROR  a failure the library cannot return to a caller (none so far:
 *        failures are returned as statuses, see conv_context_last_error);
 * WARN   something went wrong and was worked around, e.g. a cached choice
 *        that no longer builds is tuned again ("KEY: the cached choice no
 *        longer builds (WHY); tuning again");
 * INFO   one line as a problem's tuning starts ("tuning KEY") and one as it
 *        ends ("tuned in 1.25 s: 212 configs, 17 failed; fastest ALGORITHM
 *        CONFIG (0.1234 ms)", or "tuning failed after 0.50 s (STATUS): ...");
 * DEBUG  two lines per candidate config: "timing ALGORITHM CONFIG" before it
 *        runs, and its outcome after (ALGORITHM, CONFIG and "0.1234 ms  err
 *        3.1e-07", or why it failed), so that a program can show which
 *        candidate is being timed.
 * The texts are for people; they may change between versions. */
typedef enum conv_log_level {
  CONV_LOG_ERROR = 1,
  CONV_LOG_WARN = 2,
  CONV_LOG_INFO = 3,
  CONV_LOG_DEBUG = 4
} conv_log_level;

/* A log callback: `message` is one line without its newline, valid during the
 * call only; `user` is conv_context_options.log_user.  It is called on the
 * thread that called conv_plan_create (the thread that tunes), synchronously,
 * while that call holds the context's plan-creation lock: calls for one
 * context never overlap, but a callback shared by contexts used from several
 * threads must be thread-safe.  It must return, and must not call
 * conv_plan_create or conv_context_destroy on the same context (it may call
 * conv_context_interrupt). */
typedef void (*conv_log_fn)(void *user, conv_log_level level, const char *message);

/* Device memory from the caller (conv_context_options.device_alloc and
 * device_free), for programs that manage GPU memory themselves: PyTorch's
 * caching allocator (the Python binding passes it), a memory pool.  Every
 * device allocation the library makes for a context goes through them: each
 * plan's workspace and, while tuning, the test tensors (x, w, y, the
 * reference output, the bias) and each candidate's workspace, which holds
 * what its family needs (cuBLASLt's workspace, cuFFT's work areas, the
 * im2col and transposed buffers).  Not through them: what cuDNN, cuBLASLt
 * and cuFFT allocate inside their own handles and plans, and CUDA graphs.
 * Without them (the default) the library calls cudaMalloc and cudaFree.
 *
 * alloc sets *ptr to `bytes` (> 0) bytes of memory on CUDA device `device`
 * (the current device during the call), aligned to
 * CONV_ALLOCATION_ALIGNMENT bytes, that work queued on `stream` may use,
 * and returns 0; or it returns nonzero, and the library's call fails with
 * CONV_OUT_OF_MEMORY (a tuning candidate whose workspace it refuses fails
 * that way; nothing aborts).  A misaligned pointer is given back to `free`
 * and fails the call with CONV_INVALID_ARGUMENT.  free releases what alloc
 * gave, with the same ptr, bytes, stream and device; it cannot fail.
 *
 * Streams, as in cudaMallocAsync and PyTorch's raw_alloc_with_stream:
 * memory freed with a stream may be handed out again at once to other work
 * on that stream, so the library frees memory with the stream its work on
 * it was queued on, or synchronises first:
 * - tuning buffers are allocated and freed with the context's tuning
 *   stream (one per context, made by the library), the only stream that
 *   uses them;
 * - a plan's workspace, which the plan's executes use on any stream, is
 *   allocated with stream NULL (CUDA's default stream; PyTorch's default
 *   stream) by conv_plan_create, which then synchronises that stream, so
 *   that work the allocator had ordered before it on that stream is done;
 *   conv_plan_destroy synchronises the device (every execute done, on
 *   whatever stream) and frees it with stream NULL.
 *
 * Threads: they are called on the threads that call conv_plan_create and
 * conv_plan_destroy (which may run at once on one context), never from
 * conv_plan_execute nor from a thread of the library's own, so a pair
 * shared by threads must be thread-safe.  They must return, and must not
 * call into the library.  `user` is conv_context_options.allocator_user.
 * Added in 0.7.0. */
#define CONV_ALLOCATION_ALIGNMENT 256
typedef int (*conv_device_alloc_fn)(void *user, size_t bytes, void *stream, int device,
                                    void **ptr /* OUT */);
typedef void (*conv_device_free_fn)(void *user, void *ptr, size_t bytes, void *stream,
                                    int device);

typedef struct conv_context_options {
  size_t struct_size;      /* set by conv_context_options_init; never by hand      */
  int device;              /* CUDA device ordinal; default 0                       */
  const char *cache_path;  /* NULL: $CONVTUNE_CACHE, else $XDG_CACHE_HOME/convtune/
                            * cache.db, else ~/.cache/convtune/cache.db; ":memory:"
                            * keeps nothing on disk                                 */
  conv_policy policy;      /* default CONV_POLICY_PREDICT (0.5.0; before,
                            * CONV_POLICY_EXHAUSTIVE)                           */
  size_t workspace_limit;  /* bytes a candidate may use as scratch; 0: 1/4 of the
                            * device memory free when the context is created.
                            * It caps the library's device memory: a plan holds
                            * one workspace of at most this, and a tuning holds
                            * its test tensors (x, w and y in the problem's
                            * dtype, an fp32 copy of the pass's output, k fp32
                            * biases and 64 bytes: about what the caller's own
                            * tensors of the problem take) and one candidate's
                            * workspace at a time, so at most those plus this.
                            * Candidates that need more fail with
                            * CONV_WORKSPACE_LIMIT and are never allocated.   */
  int verbose;             /* nonzero: log_level is at least CONV_LOG_DEBUG (each
                            * candidate); like every message, those lines go
                            * to `log` only, never to stderr                    */
  int direct_launches;     /* nonzero: plans never replay CUDA graphs (see
                            * conv_plan_execute); for comparisons and debugging   */
  int deterministic;       /* nonzero: every plan of this context is made as if
                            * its problem's `deterministic` were 1              */
  /* Added after 0.2.0 (the fields above are 0.2.0's): */
  conv_log_fn log;         /* receives the library's messages (see conv_log_level);
                            * NULL (default): they are dropped                  */
  void *log_user;          /* passed to `log` as its first argument; default NULL */
  conv_log_level log_level; /* the most detailed level passed to `log`; 0
                             * (default): CONV_LOG_INFO (tuning start and
                             * end, warnings)                                  */
  const char *system_cache_path; /* read-only caches under cache_path's, e.g.
                             * one shipped per GPU model: a problem missing
                             * from cache_path is looked up in each, in
                             * order, before it is tuned
                             * (CONV_SOURCE_SYSTEM_CACHE), and tuning
                             * writes cache_path only.  A cache file, or a
                             * directory of them; NULL (default): the search
                             * path of conv_system_cache_files
                             * ($CONVTUNE_SYSTEM_CACHE, the caches installed
                             * with the library, $XDG_DATA_DIRS/convtune/
                             * caches; none found: none); "": none.  Opened
                             * read-only (a read-only file or directory is
                             * fine), at most 16.  A named file (this
                             * option, an entry of $CONVTUNE_SYSTEM_CACHE)
                             * that is missing or not a cache fails
                             * conv_context_create (CONV_CACHE_ERROR); a
                             * file found in a directory that is not is
                             * passed over with a warning (CONV_LOG_WARN).
                             * Before 0.7.0: one file, $CONVTUNE_SYSTEM_CACHE
                             * or none                                          */
  /* Added after 0.3.0: */
  double tuning_budget_ms; /* per problem: a tuning that has run this long
                            * (its set-up and validation included) times no
                            * further config and keeps the fastest so far,
                            * once one config has validated; each family's
                            * best guesses are timed first.  Its tuning is
                            * stored as the winner and marked "incomplete"
                            * in the pending table (conv_cache_reader_pending)
                            * for `convtune tune --pending`, and a context
                            * that may tune (EXHAUSTIVE or FAST) without a
                            * budget tunes it again fully when it meets it.
                            * 0 (default): none; negative or not finite:
                            * CONV_INVALID_ARGUMENT                          */
  /* Added in 0.7.0: */
  conv_device_alloc_fn device_alloc; /* with device_free, where the context's
                            * device memory comes from (see
                            * conv_device_alloc_fn); NULL (default) both:
                            * cudaMalloc and cudaFree.  One without the other:
                            * CONV_INVALID_ARGUMENT                          */
  conv_device_free_fn device_free;
  void *allocator_user;    /* passed to both as their first argument          */
  int retime_stale;        /* nonzero: this context tunes rather than
                            * carries over, where its policy tunes
                            * (EXHAUSTIVE, FAST, PREDICT): a winner tuned
                            * under other library versions is not carried
                            * over (CONV_SOURCE_CARRIED), and one carried
                            * over earlier, waiting to be re-timed (pending
                            * "stale"), is tuned again when met.  What
                            * `convtune tune` sets (so `tune --stale` and
                            * `--pending` re-time).  0 (default): such
                            * winners are carried over and used as they are;
                            * other policies ignore it                       */
} conv_context_options;

typedef struct conv_context conv_context;

/* Fills options with the defaults above (no log callback: silence), and
 * struct_size.  A macro, for the struct's size (see the versions note at
 * the top). */
#define conv_context_options_init(options) \
  conv_context_options_init_sized((options), sizeof *(options))
void conv_context_options_init_sized(conv_context_options *options, size_t struct_size);

/* Opens device `options->device`, creates the cuDNN and cuBLASLt handles and
 * opens (creating as needed) the cache.  `options` may be NULL for defaults.
 * On failure *context is set to NULL and the status says why (CONV_NO_DEVICE
 * on a machine without a usable GPU; CONV_CACHE_ERROR when the cache cannot
 * be opened; CONV_INVALID_ARGUMENT for a negative device, a policy or
 * log_level out of its enum, a negative or infinite tuning budget, or
 * device_alloc without device_free or the other way round);
 * conv_context_last_error(NULL) then holds the
 * message.  A context may be shared between threads: plan creation is
 * serialised internally. */
conv_status conv_context_create(conv_context **context /* OUT */,
                                const conv_context_options *options);

/* The number of CUDA devices this process can use, into *count: the
 * ordinals conv_context_options.device takes are 0 to *count - 1.  It
 * creates no CUDA context.  CONV_NO_DEVICE where there is none or the
 * driver cannot be loaded (conv_context_last_error(NULL) says why);
 * CONV_INVALID_ARGUMENT for a NULL count.  Added in 0.5.0. */
conv_status conv_device_count(int *count /* OUT */);

/* Releases everything the context owns and returns CONV_OK.  Plans made
 * from it must be destroyed first: while any is alive this returns
 * CONV_BUSY and changes nothing (the context stays usable; the message
 * says how many plans are alive).  NULL is a no-op (CONV_OK). */
conv_status conv_context_destroy(conv_context *context);

/* The detailed message of the calling thread's last failed call on this
 * context ("" if it has none), as errno is kept: other threads' failures
 * on a shared context never replace it, and reading it needs no lock.
 * The text stays valid until this thread's next failed call on the
 * context.  A thread keeps the messages of the last 8 contexts it had
 * failures on.  NULL context: the message of the calling thread's last
 * failed conv_context_create() or conv_device_count(). */
const char *conv_context_last_error(const conv_context *context);

/* The fingerprint of the context's GPU as caches store it
 * (conv_cache_entry.device, conv_cache_pending_entry.device; e.g.
 * "NVIDIA H100 80GB HBM3|sm90|132sm|l2=52428800|mem=2619000kHz*5120bit"),
 * NUL-terminated, into fingerprint[size].  CONV_INVALID_ARGUMENT for a
 * NULL argument or a buffer too small (CONV_DEVICE_FINGERPRINT_MAX bytes
 * always suffice); written only on success. */
#define CONV_DEVICE_FINGERPRINT_MAX 512
conv_status conv_context_device_fingerprint(const conv_context *context,
                                            char *fingerprint /* OUT */, size_t size);

/* Asks a tuning in progress on this context (in any thread) to stop after the
 * candidate it is timing; measurements already taken stay in the cache and
 * conv_plan_create returns CONV_INTERRUPTED.  Safe to call from a signal
 * handler's deferred callback (it only sets a flag). */
void conv_context_interrupt(conv_context *context);

/* ---------------------------------------------------------------- plans */

typedef struct conv_plan conv_plan;

/* Where a plan's choice came from. */
typedef enum conv_plan_source {
  CONV_SOURCE_MEMORY = 0,  /* in-memory map of this context                */
  CONV_SOURCE_CACHE,       /* SQLite cache, tuned by an earlier process    */
  CONV_SOURCE_TUNED,       /* timed just now                               */
  CONV_SOURCE_SYSTEM_CACHE, /* the read-only system cache (system_cache_path) */
  CONV_SOURCE_HEURISTIC,   /* untimed (CONV_POLICY_RECORD): the first
                            * candidate that built and validated, cuDNN's
                            * heuristic choice first; time_ms is -1       */
  /* Carried over from a tuning under other library versions (a driver or
   * library update, another convtune release): on a miss for this build's
   * versions, the latest winner of the same problem and GPU whose family
   * and libraries are unchanged (conv_library_versions says what
   * invalidates what), from the user's cache, else the system caches in
   * order, re-validated once against the reference on random inputs (as
   * tuning validates) and not timed: time_ms is the time measured under
   * the versions it was tuned with.  It is stored in the user's cache under
   * this build's versions, marked pending "stale" for `convtune tune
   * --stale` (or --pending) to re-time, so later processes find it there
   * (CONV_SOURCE_CACHE).  A carried-over winner that fails re-validation is
   * passed over (CONV_LOG_WARN) and the problem tuned as if there were none
   * (cache-only: a miss).  Every policy takes it.  The log says so (INFO).
   * Added in 0.7.0. */
  CONV_SOURCE_CARRIED
} conv_plan_source;

/* How conv_plan_execute launches a plan's work. */
typedef enum conv_replay {
  CONV_REPLAY_PENDING = 0, /* not executed yet: the first execute decides       */
  CONV_REPLAY_GRAPH,       /* one CUDA graph launch per execute                  */
  CONV_REPLAY_DIRECT       /* the pieces launched one by one; replay_note: why   */
} conv_replay;

typedef struct conv_plan_info {
  char algorithm[32];      /* candidate family, e.g. "cudnn", "im2col_gemm"       */
  char config[128];        /* its configuration, human-readable                   */
  double time_ms;          /* median measured time of one execution (at tuning);
                            * -1 for a plan that was not timed
                            * (CONV_SOURCE_HEURISTIC); for CONV_SOURCE_CARRIED,
                            * as measured under the versions it was tuned with */
  size_t workspace_bytes;  /* device scratch owned by the plan                     */
  conv_plan_source source;
  conv_replay replay;      /* as of the last execute                              */
  char replay_note[128];   /* CONV_REPLAY_DIRECT: why the work is not a graph     */
  /* Executes so far, by how they ran (see conv_plan_execute), counted by the
   * plan since it was made (a reference from conv_plan_create shares them). */
  uint64_t graph_launches; /* one cudaGraphLaunch of a kept graph             */
  uint64_t graph_captures; /* graphs recorded (new, or updated in place)      */
  uint64_t direct_runs;    /* the pieces launched directly                    */
  conv_direction direction; /* the pass the plan runs: conv_plan_execute for
                             * CONV_FORWARD, conv_plan_backward_data or
                             * conv_plan_backward_filter for the others     */
  int deterministic;        /* 1: the chosen candidate gives bit-identical
                             * results run to run on this GPU (always so for
                             * a deterministic problem), 0: it may not       */
  /* Added in 0.7.0: */
  conv_dtype dtype;         /* the element type of the tensors the plan's
                             * execute function takes (conv_problem.dtype);
                             * the bias is fp32                              */
} conv_plan_info;

/* Returns a plan for `problem` on the context's device: from memory, from the
 * cache, or by tuning now (which may take from milliseconds to seconds; the
 * device should be otherwise idle for trustworthy timings).  Tuning allocates
 * its own inputs; it never touches caller memory.  The problem is validated
 * first (see conv_problem_validate); unsupported combinations return
 * CONV_UNSUPPORTED.  Cache-only policy: a miss returns CONV_CACHE_MISS.
 *
 * A context has at most one plan per problem: while a plan for `problem`
 * is alive (created and not yet destroyed as often), this returns another
 * reference to it after one hash lookup, and its info still says how it
 * was first made.  Otherwise a choice this context made before is rebuilt
 * without the cache (source CONV_SOURCE_MEMORY); a choice found in the
 * cache is rebuilt without timing anything (CONV_SOURCE_CACHE); on a miss,
 * a winner tuned under other library versions that the upgrade rules
 * carry over is re-validated and used (CONV_SOURCE_CARRIED, any policy)
 * before the policy's own answer to a miss. */
conv_status conv_plan_create(conv_context *context, const conv_problem *problem,
                             conv_plan **plan /* OUT */);

/* Runs the convolution asynchronously on `stream` (0 = the legacy default
 * stream): y = epilogue(conv(x, w) [+ bias]).  x, w and y hold elements of
 * the problem's dtype; `bias` is k floats (fp32) whatever the dtype,
 * required for the bias epilogues and ignored otherwise; the bias and
 * ReLU are applied in fp32 (for fp16 and bf16 to the fp32 sums, which are
 * rounded to the type once, as they are written to y).  Pointers must be
 * aligned to CONV_POINTER_ALIGNMENT (else CONV_INVALID_ARGUMENT).  Errors are reported
 * for launch failures only; device-side faults surface at the caller's next
 * synchronisation.
 *
 * Graph replay: the plan's work (one kernel, or several kernels and library
 * calls) is captured into a CUDA graph, on a private stream where nothing
 * runs, and an execute with the same pointers (x, w, bias, y) is then one
 * cudaGraphLaunch on `stream`.  Layers of one shape share a plan and call
 * it with their own weights and activations, so a plan keeps up to 32
 * graphs, one per recurring pointer set:
 * - a set's first execute runs the pieces directly (capturing costs tens to
 *   hundreds of microseconds, more than running);
 * - its second execute (while it is among the plan's last 64 new sets)
 *   captures its graph into a free slot;
 * - with all 32 kept, the least recently used graph is updated in place
 *   (cudaGraphExecUpdate), but only while replays outnumber such updates
 *   four to one; beyond that, sets without a graph run directly.
 * Executes with kept pointers allocate nothing and take no lock.  Work
 * that cannot be captured, a `stream` that is itself being captured (the
 * work is then recorded into the caller's graph as it is) and contexts
 * created with direct_launches run the pieces directly.  conv_plan_info
 * says how the last execute ran and counts each kind.  Results are the
 * same either way.
 *
 * Threads: one plan must not be executed from two threads at once (it owns
 * one workspace and its graphs).  Since a context's creations of one
 * problem share one plan, a program that executes the same problem from
 * several threads at once gives each thread its own context.  A plan with a
 * workspace (conv_plan_info.workspace_bytes > 0) uses it in every execute:
 * the caller orders executes of that plan on different streams (an event
 * recorded after one, waited for before the next), as the Python binding
 * does.  Different plans may execute concurrently, and conv_plan_create and
 * conv_plan_destroy may run meanwhile on other threads. */
conv_status conv_plan_execute(conv_plan *plan, void *stream, const void *x, const void *w,
                              const void *bias, void *y);

/* The backward passes of a plan made for a CONV_BACKWARD_DATA or
 * CONV_BACKWARD_FILTER problem, as conv_plan_execute runs a forward one (the
 * same alignment rule, graph replay, threads and streams):
 * dx = dconv/dx(dy, w), and dw = dconv/dw(x, dy).  The output is
 * overwritten, not accumulated into.  Calling the execute function of
 * another direction than the plan's returns CONV_INVALID_ARGUMENT. */
conv_status conv_plan_backward_data(conv_plan *plan, void *stream, const void *dy, const void *w,
                                    void *dx);
conv_status conv_plan_backward_filter(conv_plan *plan, void *stream, const void *x,
                                      const void *dy, void *dw);

/* Describes the plan's choice.  A macro, for the size of the caller's
 * conv_plan_info (see the versions note at the top): fields a newer library
 * has beyond it are not written; fields an older library does not know are
 * set to 0. */
#define conv_plan_info_get(plan, info) conv_plan_info_get_sized((plan), (info), sizeof *(info))
conv_status conv_plan_info_get_sized(const conv_plan *plan, conv_plan_info *info /* OUT */,
                                     size_t struct_size);

/* Drops one reference to the plan (one per conv_plan_create that returned
 * it); the last frees it, its graphs and its workspace.  NULL is a no-op.
 * Like every call here, it leaves the caller's current CUDA device as it was. */
void conv_plan_destroy(conv_plan *plan);

/* ---------------------------------------------------------------- versions */

/* CONVTUNE_VERSION of the library this process runs with (MAJOR * 10000 +
 * MINOR * 100 + PATCH), which may be newer than the header a program was
 * built with.  Needs no device. */
int conv_version(void);

/* Versions this process runs with, the candidate families this build has
 * with their versions (family id "v" version) and the tuner's timing method,
 * as "cuda=13000 driver=13000 cudnn=91900 cublaslt=130100
 * candidates=1v1,2v1,3v1,4v4,5v4,7v2,8v1 timing=2".  Stored with every cache
 * row; a lookup matches it exactly.  What invalidates what on a miss
 * (docs/caches.md, "Upgrades"): a winner tuned under another text is
 * carried over (CONV_SOURCE_CARRIED: re-validated, then re-timed offline)
 * when its own family's version is unchanged and so are the libraries it
 * runs on: cudnn for the cudnn family; cublaslt for im2col_gemm,
 * gemm_nhwc, gemm_backward, dynamic_unfold_gemm and fft; cuda (the
 * toolkit's cuFFT) for fft and fft_filter; the families of convtune's
 * own kernels depend on their version alone.  The driver, the other
 * families' versions and the timing method may differ.  Any other winner
 * (its family's version changed or gone, one of its libraries updated, a
 * text that does not parse) is stale and re-tuned; every row stays in the
 * file for reports.  Needs no device. */
const char *conv_library_versions(void);

/* ---------------------------------------------------------------- caches */

/* Reading a cache file without a GPU or a context: its winners, and every
 * trial of a shape (what `convtune list`, `show` and `report` print).  A
 * reader never changes the cache: it reads a cache shipped read-only (file
 * and directory) as it is, and one other processes are tuning into (rows
 * they commit later may or may not be seen; where the directory is
 * writable, SQLite keeps its -wal and -shm files beside the cache for
 * that, as for any reader of the file). */
typedef struct conv_cache_reader conv_cache_reader;

/* Most config values a trial has (conv_cache_entry.config_values); 16
 * before 0.5.0. */
#define CONV_CACHE_CONFIG_MAX 32

/* One trial (a candidate config timed, or failed, on a shape), as the
 * library passes it to a conv_cache_entry_fn: strings and the struct are
 * valid during the call only.  struct_size is the library's: a field past
 * it (a newer header than the library) is absent. */
typedef struct conv_cache_entry {
  size_t struct_size;
  const char *problem;   /* conv_problem_key() of the shape                 */
  const char *device;    /* the GPU's fingerprint ("NAME|smXY|Nsm|...")      */
  const char *versions;  /* conv_library_versions() when it was tuned        */
  const char *tuned_at;  /* UTC, "YYYY-MM-DD HH:MM:SS"                        */
  const char *algorithm; /* the candidate family's name ("cudnn", "fft", ...) */
  int algorithm_id;      /* its stable id                                    */
  const char *config;    /* the config in words                              */
  int config_count;      /* config_values used                               */
  int64_t config_values[CONV_CACHE_CONFIG_MAX];
  conv_status status;    /* CONV_OK: validated and timed                     */
  const char *reason;    /* why it failed; "" when it did not; for a trial  *
                          * that ran (CONV_OK) but was abandoned, being     *
                          * already slower than the best by the tuner's    *
                          * margin, "abandoned: ..." (time_ms is then the  *
                          * median of its few samples, or < 0 for a config *
                          * not run for its twin's run; never a winner)    */
  double time_ms;        /* median time; < 0 when not timed                  */
  double rel_error;      /* against the reference; < 0 when not validated    */
  size_t workspace_bytes;
  int heuristic_pick;    /* 1: what an untuned caller gets (cuDNN's choice) */
  int winner;            /* 1: the tuned choice of its shape, device and     *
                          * versions                                         */
  int deterministic;     /* 1 bit-identical run to run, 0 maybe not,        *
                          * -1 unknown                                       */
} conv_cache_entry;

/* Returns nonzero to stop the walk (the walk then returns CONV_OK). */
typedef int (*conv_cache_entry_fn)(const conv_cache_entry *entry, void *user);

/* Opens the cache file at `path` for reading.  A missing file, one that is
 * not a convtune cache or one of a newer schema is CONV_CACHE_ERROR; the
 * reason goes to `message` (may be NULL; truncated to message_size). */
conv_status conv_cache_reader_open(const char *path, conv_cache_reader **reader /* OUT */,
                                   char *message, size_t message_size);
void conv_cache_reader_close(conv_cache_reader *reader); /* NULL is a no-op */

/* Calls fn for every winner (any device, any versions), ordered by problem
 * key, device and versions. */
conv_status conv_cache_reader_winners(conv_cache_reader *reader, conv_cache_entry_fn fn,
                                      void *user, char *message, size_t message_size);

/* Calls fn for every trial of the shape whose key is `problem` (any device
 * or versions), each tuning's winner first, then by time. */
conv_status conv_cache_reader_trials(conv_cache_reader *reader, const char *problem,
                                     conv_cache_entry_fn fn, void *user, char *message,
                                     size_t message_size);

/* A problem waiting to be tuned offline (`convtune tune --pending`), as the
 * library passes it to a conv_cache_pending_entry_fn: strings and the
 * struct are valid during the call only; struct_size is the library's. */
typedef struct conv_cache_pending_entry {
  size_t struct_size;
  const char *problem;     /* conv_problem_key() of the shape                   */
  const char *device;      /* the GPU's fingerprint it was met on               */
  const char *versions;    /* conv_library_versions() when it was recorded      */
  const char *reason;      /* "untuned": a CONV_POLICY_RECORD context ran an
                            * untimed plan for it (no trials, no winner);
                            * "incomplete": its tuning was stopped by its
                            * time budget, and its winner is the best of the
                            * configs it timed; "stale" (0.7.0): its winner
                            * was carried over from other library versions
                            * (CONV_SOURCE_CARRIED), re-validated but not
                            * re-timed                                        */
  const char *recorded_at; /* UTC, "YYYY-MM-DDTHH:MM:SSZ"                         */
} conv_cache_pending_entry;

/* Returns nonzero to stop the walk (the walk then returns CONV_OK). */
typedef int (*conv_cache_pending_entry_fn)(const conv_cache_pending_entry *entry, void *user);

/* Calls fn for every pending problem of the cache (any device, any
 * versions), oldest first.  A tuning that completes removes its problem's
 * rows on its device; a cache written before schema version 3 has none. */
conv_status conv_cache_reader_pending(conv_cache_reader *reader, conv_cache_pending_entry_fn fn,
                                      void *user, char *message, size_t message_size);

/* The cache file a context uses when conv_context_options.cache_path is
 * NULL: $CONVTUNE_CACHE, else $XDG_CACHE_HOME/convtune/cache.db, else
 * ~/.cache/convtune/cache.db.  create_dirs nonzero: its directories are
 * made (as a context does).  CONV_CACHE_ERROR where there is no home
 * directory, the path does not fit `size` or a directory cannot be made;
 * the reason goes to `message` (may be NULL). */
conv_status conv_cache_default_path(char *path /* OUT */, size_t size, int create_dirs,
                                    char *message, size_t message_size);

/* Receives each system cache file of conv_system_cache_files: `path` is
 * valid during the call only; `named` is 1 for a file named outright (the
 * option, an entry of $CONVTUNE_SYSTEM_CACHE), which must open, 0 for one
 * found in a directory, which is passed over when it does not.  Nonzero
 * stops the walk. */
typedef int (*conv_system_cache_fn)(const char *path, int named, void *user);

/* The read-only system caches a context opens under its user's cache
 * (conv_context_options.system_cache_path), passed to fn in the order
 * plans look them up; needs no device and opens nothing.
 * `system_cache_path` as that option: "" none; a path: that cache file, or
 * each cache file of that directory; NULL: the search path, in order:
 *   1. $CONVTUNE_SYSTEM_CACHE: a cache file or a directory of them,
 *      several separated by ':' (set but empty: no system cache at all,
 *      the rest of the search path included);
 *   2. the caches installed with the library, found from the file the
 *      library was loaded from: <libdir>/../share/convtune/caches for an
 *      install (cmake --install; the tool linked with the static library
 *      looks from <bindir>), convtune/caches beside the Python package's
 *      convtune/libconvtune.so;
 *   3. <dir>/convtune/caches for each absolute <dir> of $XDG_DATA_DIRS
 *      (unset or empty: /usr/local/share:/usr/share).
 * A directory's cache files are its regular files named *.db (not
 * hidden), in byte order of name; caches/README.md in the source says
 * which ship and how they were made.  A directory of the search path that
 * is missing or unreadable is skipped; a named file or directory that is
 * missing is CONV_CACHE_ERROR; a file met twice (a link, or two entries
 * naming one directory) is passed once.  Each holds any GPUs' tunings: a
 * plan looks up its own GPU's rows, so consulting every file is correct,
 * one per GPU model or not.  CONV_INVALID_ARGUMENT for a NULL fn.  Added
 * in 0.7.0. */
conv_status conv_system_cache_files(const char *system_cache_path, conv_system_cache_fn fn,
                                    void *user, char *message, size_t message_size);

/* Copies the finished tunings (those with a winner) of the cache at `from`
 * into the cache at `into` (created if missing, in an existing directory),
 * each with all of its trials as they were measured (device, versions and
 * time of tuning kept); `from` is only read, so it may be read-only.
 * `device`: only tunings of this fingerprint (as conv_cache_entry.device);
 * NULL: all.  A tuning of the same problem, device and versions already in
 * `into` is replaced only when the copied winner is faster, or when
 * `into`'s winner is not a valid one (failed, not validated or not timed).
 * Counts of the tunings added, replaced and kept (each may be NULL).  All
 * or nothing: `from` is read and checked whole before `into` is opened,
 * then everything is written in one transaction of `into`, which compares
 * the winners (so merges into one file at once keep the fastest); on any
 * failure `into`'s tunings are left as they were, and bad input does not
 * make a missing `into`.  CONV_INVALID_ARGUMENT: a NULL path, `from` and
 * `into` one file (by device and inode: a link too), `device` naming no
 * finished tuning of `from`.  CONV_CACHE_ERROR: `from` missing, invalid,
 * or holding a row of a tuning to copy that is not what this library
 * writes (a key text with a NUL byte or too long, a problem key that does
 * not parse, a trial that does not decode, a winner that failed, was not
 * validated or not timed, two winners of one tuning); `into` in a missing
 * directory, or one this process may not write (the file, or its
 * directory, where SQLite keeps the -wal and -shm files).  What `convtune
 * export` runs. */
conv_status conv_cache_merge(const char *from, const char *into, const char *device,
                             size_t *added /* OUT */, size_t *replaced /* OUT */,
                             size_t *kept /* OUT */, char *message, size_t message_size);

/* conv_cache_merge of from[0 .. from_count) into one `into`, as one call:
 * every source is read and checked before `into` is opened, and all are
 * written in one transaction (the sources in order, so of two sources'
 * tunings of one key the faster stays), or nothing is.  `device` as in
 * conv_cache_merge (CONV_INVALID_ARGUMENT where no source has a finished
 * tuning of it).  added, replaced and kept, each NULL or an array of
 * from_count: source i's counts.  CONV_INVALID_ARGUMENT for a NULL or
 * empty `from`.  What `convtune merge` and `import` run.  Added in
 * 0.7.0. */
conv_status conv_cache_merge_sources(const char *const *from, size_t from_count, const char *into,
                                     const char *device, size_t *added /* OUT */,
                                     size_t *replaced /* OUT */, size_t *kept /* OUT */,
                                     char *message, size_t message_size);

/* conv_cache_merge, copying of each tuning only its winner and cuDNN's
 * heuristic pick (when it is another trial): what a plan's lookup, `convtune
 * list` and `verify` read, without the other trials of every config timed,
 * for a small cache to ship (`convtune export --winners-only`).  Its tunings still serve as
 * neighbours for CONV_POLICY_PREDICT, whose ranking of a family's configs
 * then sees only their winners; `convtune show` and `report` show only
 * these rows.  Everything else (checks, all or nothing, the faster winner
 * staying, `device`) is as conv_cache_merge's.  Added in 0.7.0. */
conv_status conv_cache_merge_winners(const char *from, const char *into, const char *device,
                                     size_t *added /* OUT */, size_t *replaced /* OUT */,
                                     size_t *kept /* OUT */, char *message, size_t message_size);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_H */
