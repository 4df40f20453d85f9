/*
 * test_wal_defaults.c: wal_opts_default agrees with the configuration
 * table's defaults.
 *
 * wal/ stays standalone (it knows nothing but base), so wal_opts_default
 * keeps its own numbers for the options that are configuration keys; this
 * is where both libraries are linked (tb_replicator pulls tb_config and
 * tb_wal), so a default changed on one side only fails here.
 */
#include <criterion/criterion.h>

#include "config/config.h"
#include "wal/wal.h"

static wal_opts_t wal_defaults(void)
{
    wal_opts_t o;
    wal_opts_default(&o);
    return o;
}

Test(wal_defaults, segment_bytes_is_wal_segment_bytes)
{
    cr_assert_eq(wal_defaults().segment_bytes, cfg_defaults()->wal.segment_bytes);
}

Test(wal_defaults, max_topic_bytes_is_wal_max_topic_bytes)
{
    cr_assert_eq(wal_defaults().max_topic_bytes, cfg_defaults()->wal.max_topic_bytes);
}

Test(wal_defaults, max_total_bytes_is_wal_max_total_bytes)
{
    cr_assert_eq(wal_defaults().max_total_bytes, cfg_defaults()->wal.max_total_bytes);
}

Test(wal_defaults, fsync_is_wal_fsync)
{
    cr_assert_str_eq(wal_fsync_name(wal_defaults().fsync), cfg_fsync_name(cfg_defaults()->wal.fsync));
}

Test(wal_defaults, fsync_interval_ms_is_wal_fsync_interval_ms)
{
    cr_assert_eq(wal_defaults().fsync_interval_ms, cfg_defaults()->wal.fsync_interval_ms);
}

Test(wal_defaults, min_free_is_wal_min_free_bytes)
{
    cr_assert_eq(wal_defaults().min_free_bytes, cfg_defaults()->wal.min_free_bytes.bytes);
    cr_assert_eq(wal_defaults().min_free_permille, cfg_defaults()->wal.min_free_bytes.permille);
}

Test(wal_defaults, checkpoint_flush_ms_is_replicator_checkpoint_interval_ms)
{
    cr_assert_eq(wal_defaults().checkpoint_flush_ms, cfg_defaults()->replicator.checkpoint_interval_ms);
}

Test(wal_defaults, fsync_modes_have_the_same_numbers_in_both)
{
    /* gateway/run.c casts cfg_fsync_t to wal_fsync_t */
    for (int i = 0; i < 3; i++)
        cr_expect_str_eq(wal_fsync_name((wal_fsync_t)i), cfg_fsync_name((cfg_fsync_t)i), "mode %d", i);
}
