/*
 * test_durability.c: each mapping's durability becomes its upstream
 * topic's, and its log is opened in that mode (memory_first: MEMORY,
 * wal.h MEMORY TIER); mappings of one topic that disagree are a
 * configuration error naming the file, the line and the key, as for
 * on_full and max_age.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "helper_broker.h"

static broker_topic_t *topic(hb_t *h, const char *name)
{
    broker_topic_t *t = broker__topic(h->b, name);
    cr_assert_not_null(t, "no topic %s", name);
    return t;
}

Test(durability, each_mapping_opens_its_topic_in_the_durability_it_names)
{
    hb_t h;
    char err[512];
    int rc = hb_open_mappings(&h, "",
                              "    - {mqtt_pattern: \"a/#\", danube_topic: /edge1/a, durability: memory_first}\n"
                              "    - {mqtt_pattern: \"b/#\", danube_topic: /edge1/b}\n"
                              "    - {mqtt_pattern: \"c/#\", danube_topic: /edge1/a, durability: memory_first}\n",
                              err, sizeof err);
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert_eq(topic(&h, "/edge1/a")->durability, CFG_DURABILITY_MEMORY_FIRST);
    cr_assert_eq(wal_topic_mode(topic(&h, "/edge1/a")->wal), WAL_MODE_MEMORY);
    cr_assert_eq(topic(&h, "/edge1/b")->durability, CFG_DURABILITY_LOG, "log by default");
    cr_assert_eq(wal_topic_mode(topic(&h, "/edge1/b")->wal), WAL_MODE_LOG);
    hb_close(&h);
}

Test(durability, mappings_of_one_topic_that_disagree_are_an_error_naming_file_line_and_key)
{
    hb_t h;
    char err[512];
    int rc = hb_open_mappings(&h, "",
                              "    - {mqtt_pattern: \"a/#\", danube_topic: /edge1/t, durability: memory_first}\n"
                              "    - {mqtt_pattern: \"x/#\", danube_topic: /edge1/x}\n"
                              "    - {mqtt_pattern: \"b/#\", danube_topic: /edge1/t, durability: log}\n",
                              err, sizeof err);
    cr_assert_eq(rc, TB_ECONFIG);
    cr_assert_str_eq(err, "test:7: mqtt.topic_mappings[2].durability: log, but topic /edge1/t already has "
                          "durability memory_first from mqtt.topic_mappings[0] (line 5); every mapping of one "
                          "upstream topic must say the same");
    hb_close(&h);
}
