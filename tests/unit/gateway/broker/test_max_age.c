/*
 * test_max_age.c: each mapping's max_age becomes its upstream topic's
 * (broker_topic_t.max_age_ms, handed to the replicator), and mappings of
 * one topic that disagree are a configuration error naming the file, the
 * line and the key, as for on_full.
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

Test(max_age, each_mapping_gives_its_topic_the_age_it_names)
{
    hb_t h;
    char err[512];
    int rc = hb_open_mappings(&h, "",
                              "    - {mqtt_pattern: \"a/#\", danube_topic: /edge1/a, max_age: 7d}\n"
                              "    - {mqtt_pattern: \"b/#\", danube_topic: /edge1/b, max_age: 1500ms}\n"
                              "    - {mqtt_pattern: \"c/#\", danube_topic: /edge1/c}\n"
                              "    - {mqtt_pattern: \"d/#\", danube_topic: /edge1/a, max_age: 168h}\n",
                              err, sizeof err);
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert_eq(topic(&h, "/edge1/a")->max_age_ms, 7ull * 86400000, "7d and 168h agree");
    cr_assert_eq(topic(&h, "/edge1/b")->max_age_ms, 1500);
    cr_assert_eq(topic(&h, "/edge1/c")->max_age_ms, 0, "none by default");
    hb_close(&h);
}

Test(max_age, mappings_of_one_topic_that_disagree_are_an_error_naming_file_line_and_key)
{
    hb_t h;
    char err[512];
    int rc = hb_open_mappings(&h, "",
                              "    - {mqtt_pattern: \"a/#\", danube_topic: /edge1/t, max_age: 1h}\n"
                              "    - {mqtt_pattern: \"x/#\", danube_topic: /edge1/x}\n"
                              "    - {mqtt_pattern: \"b/#\", danube_topic: /edge1/t}\n",
                              err, sizeof err);
    cr_assert_eq(rc, TB_ECONFIG);
    cr_assert_str_eq(err, "test:7: mqtt.topic_mappings[2].max_age: 0 ms, but topic /edge1/t already has max_age "
                          "3600000 ms from mqtt.topic_mappings[0] (line 5); every mapping of one upstream topic must "
                          "say the same");
    hb_close(&h);
}

Test(max_age, tributary_check_finds_the_disagreement_without_opening_anything)
{
    static const char *const yaml =
        "edge: {edge_name: edge1, cluster_url: \"http://127.0.0.1:1\"}\n"
        "mqtt:\n"
        "  topic_mappings:\n"
        "    - {mqtt_pattern: \"a/#\", danube_topic: /edge1/t, max_age: 30m}\n"
        "    - {mqtt_pattern: \"b/#\", danube_topic: /edge1/t, max_age: 45s}\n"
        "wal: {dir: /nonexistent/never/opened}\n";
    cfg_t *cfg;
    char err[512];
    cr_assert_eq(cfg_load_string("edge.yaml", yaml, strlen(yaml), NULL, &cfg, err, sizeof err), 0, "%s", err);
    cr_assert_eq(broker_check_config(cfg, err, sizeof err), TB_ECONFIG);
    cr_assert_str_eq(err, "mqtt.topic_mappings[1].max_age (line 5): 45000 ms, but topic /edge1/t already has "
                          "max_age 1800000 ms from mqtt.topic_mappings[0] (line 4); every mapping of one upstream "
                          "topic must say the same");
    cfg_free(cfg);
}
