/* clock.c: monotonic and wall clocks in the units the rest of the code uses. */
#include "base/base.h"

#include <time.h>

uint64_t tb_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t tb_mono_ms(void)
{
    return tb_mono_ns() / 1000000u;
}

uint64_t tb_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}
