/*
 * Tests for the broker's registry of topic slots (gateway/broker/broker.h
 * BROKER_TOPIC_HEADROOM; docs/design/RELOAD.md 2.2): its capacity is never
 * below the boot's topics. A boot of more than 10,000 upstream topics once
 * got a registry of 10,000 slots and settle_topics wrote past it (ASan in
 * the sanitizer build sees the write; the capacity asserts say it in any
 * build).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "config/config.h"
#include "gateway/broker/broker.h"

Test(registry, headroom_is_never_below_the_boot_topics)
{
    static const size_t n[] = { 0, 1, 64, 100, 4968, 5000, 9936, 9937, 10000, 10001, 65536, 409600 };
    for (size_t i = 0; i < TB_ARRAY_LEN(n); i++)
        cr_assert_geq(BROKER_TOPIC_HEADROOM(n[i]), n[i], "%zu topics", n[i]);
    cr_assert_eq(BROKER_TOPIC_HEADROOM(1), 65);
    cr_assert_eq(BROKER_TOPIC_HEADROOM(100), 200);
    cr_assert_eq(BROKER_TOPIC_HEADROOM(6000), 10000, "capped at 10,000 slots while the boot has fewer");
    cr_assert_eq(BROKER_TOPIC_HEADROOM(10001), 10001, "past the cap: exactly the boot's, no headroom");
}

Test(registry, a_boot_of_more_than_ten_thousand_topics_is_checked_without_overflow, .timeout = 120)
{
    enum { N = 10001 };
    tb_buf_t y = TB_BUF_INIT;
    tb_buf_puts(&y, "edge: {edge_name: edge1, cluster_url: \"http://127.0.0.1:1\"}\nmqtt:\n  topic_mappings:\n");
    for (int i = 0; i < N; i++) {
        char line[128];
        snprintf(line, sizeof line, "    - {mqtt_pattern: \"m%d/#\", danube_topic: /edge1/t%d}\n", i, i);
        tb_buf_puts(&y, line);
    }
    static char *const env[] = { NULL };
    cfg_t *c = NULL;
    char err[1024];
    int rc = cfg_load_string("test.yaml", y.data, y.len, env, &c, err, sizeof err);
    tb_buf_free(&y);
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert_eq(c->mqtt.nmappings, N);
    rc = broker_check_config(c, err, sizeof err);
    cr_assert_eq(rc, 0, "%s", err);
    cfg_free(c);
}
