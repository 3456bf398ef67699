/*
 * view_family.h -- what the host side of a family whose kernels run a view
 * of the problem (direct_channel, fft, patch: the problem itself, or a
 * backward-data pass's transposed view, views.h) starts prepare() with.
 */
#ifndef CONVTUNE_VIEW_FAMILY_H
#define CONVTUNE_VIEW_FAMILY_H

#include <stdbool.h>

#include "algorithms/algorithm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A family's view of a problem: the forward convolution its kernels run
 * for it; false where the family runs none. */
typedef bool (*conv_view_of)(const conv_problem *problem, conv_problem *view);

/* prepare()'s first checks: its arguments, then *view, refused as
 * "<family>: " and the printf-style `refusal` where the family has none. */
conv_status conv_view_prepare_check(const char *family, conv_view_of view_of,
                                    const conv_problem *problem, const conv_env *env,
                                    const conv_config *config, const conv_prepared *out,
                                    conv_problem *view /* OUT */, conv_error *err,
                                    const char *refusal, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 9, 10)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_VIEW_FAMILY_H */
