/*
 * test_on_full.c: each mapping's on_full becomes its upstream topic's log
 * policy (drop_oldest, drop_newest), the session journal keeps its own
 * (refuse), and mappings of one topic that disagree are a configuration
 * error naming the file, the line and the key, like the schema_subject
 * rule beside it in broker/server.c.
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

Test(on_full, each_mapping_gives_its_topic_the_policy_it_names)
{
    hb_t h;
    char err[512];
    int rc = hb_open_mappings(&h, "",
                              "    - {mqtt_pattern: \"a/#\", danube_topic: /edge1/a, on_full: drop_newest}\n"
                              "    - {mqtt_pattern: \"b/#\", danube_topic: /edge1/b, on_full: drop_oldest}\n"
                              "    - {mqtt_pattern: \"c/#\", danube_topic: /edge1/c}\n",
                              err, sizeof err);
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert_eq(wal_topic_overflow(topic(&h, "/edge1/a")->wal), WAL_OVERFLOW_DROP_NEWEST);
    cr_assert_eq(topic(&h, "/edge1/a")->on_full, CFG_ON_FULL_DROP_NEWEST);
    cr_assert_eq(wal_topic_overflow(topic(&h, "/edge1/b")->wal), WAL_OVERFLOW_DROP_OLDEST);
    cr_assert_eq(wal_topic_overflow(topic(&h, "/edge1/c")->wal), WAL_OVERFLOW_DROP_OLDEST, "the default");
    cr_assert_eq(wal_topic_overflow(h.b->journal->wal), WAL_OVERFLOW_REFUSE, "the journal keeps its own");
    hb_close(&h);
}

Test(on_full, mappings_of_one_topic_that_agree_share_it)
{
    hb_t h;
    char err[512];
    int rc = hb_open_mappings(&h, "",
                              "    - {mqtt_pattern: \"a/#\", danube_topic: /edge1/t, on_full: drop_newest}\n"
                              "    - {mqtt_pattern: \"b/#\", danube_topic: /edge1/t, on_full: drop_newest}\n",
                              err, sizeof err);
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert_eq(wal_topic_overflow(topic(&h, "/edge1/t")->wal), WAL_OVERFLOW_DROP_NEWEST);
    hb_close(&h);
}

Test(on_full, mappings_of_one_topic_that_disagree_are_an_error_naming_file_line_and_key)
{
    hb_t h;
    char err[512];
    int rc = hb_open_mappings(&h, "",
                              "    - {mqtt_pattern: \"a/#\", danube_topic: /edge1/t, on_full: drop_newest}\n"
                              "    - {mqtt_pattern: \"x/#\", danube_topic: /edge1/x}\n"
                              "    - {mqtt_pattern: \"b/#\", danube_topic: /edge1/t}\n",
                              err, sizeof err);
    cr_assert_eq(rc, TB_ECONFIG);
    cr_assert_str_eq(err, "test:7: mqtt.topic_mappings[2].on_full: drop_oldest, but topic /edge1/t already has "
                          "on_full drop_newest from mqtt.topic_mappings[0] (line 5); every mapping of one upstream "
                          "topic must say the same");
    hb_close(&h);
}

Test(on_full, a_template_mapping_agrees_with_every_topic_it_makes)
{
    static const char *const tmpl =
        "    - mqtt_pattern: \"s/+/e\"\n"
        "      danube_topic: \"/edge1/${1}-e\"\n"
        "      capture_values: {\"$1\": [north, south]}\n"
        "      on_full: drop_newest\n";
    hb_t h;
    char err[512];
    char *bad = tb_asprintf("%s    - {mqtt_pattern: \"n/#\", danube_topic: /edge1/north-e}\n", tmpl);
    cr_assert_eq(hb_open_mappings(&h, "", bad, err, sizeof err), TB_ECONFIG);
    cr_assert(strstr(err, "test:9: mqtt.topic_mappings[1].on_full: drop_oldest, but topic /edge1/north-e already has "
                          "on_full drop_newest from mqtt.topic_mappings[0] (line 5)"),
              "%s", err);
    hb_close(&h);
    free(bad);

    char *good = tb_asprintf("%s    - {mqtt_pattern: \"n/#\", danube_topic: /edge1/north-e, on_full: drop_newest}\n",
                             tmpl);
    cr_assert_eq(hb_open_mappings(&h, "", good, err, sizeof err), 0, "%s", err);
    cr_assert_eq(wal_topic_overflow(topic(&h, "/edge1/north-e")->wal), WAL_OVERFLOW_DROP_NEWEST);
    cr_assert_eq(wal_topic_overflow(topic(&h, "/edge1/south-e")->wal), WAL_OVERFLOW_DROP_NEWEST);
    hb_close(&h);
    free(good);
}

Test(on_full, tributary_check_finds_the_disagreement_without_opening_anything)
{
    static const char *const yaml =
        "edge: {edge_name: edge1, cluster_url: \"http://127.0.0.1:1\"}\n"
        "mqtt:\n"
        "  topic_mappings:\n"
        "    - {mqtt_pattern: \"a/#\", danube_topic: /edge1/t, on_full: drop_newest}\n"
        "    - {mqtt_pattern: \"b/#\", danube_topic: /edge1/t, on_full: drop_oldest}\n"
        "wal: {dir: /nonexistent/never/opened}\n";
    cfg_t *cfg;
    char err[512];
    cr_assert_eq(cfg_load_string("edge.yaml", yaml, strlen(yaml), NULL, &cfg, err, sizeof err), 0, "%s", err);
    cr_assert_eq(broker_check_config(cfg, err, sizeof err), TB_ECONFIG);
    cr_assert_str_eq(err, "mqtt.topic_mappings[1].on_full (line 5): drop_oldest, but topic /edge1/t already has "
                          "on_full drop_newest from mqtt.topic_mappings[0] (line 4); every mapping of one upstream "
                          "topic must say the same");
    cfg_free(cfg);
    char *fixed = tb_strdup(yaml);
    char *at = strstr(fixed, "drop_oldest");
    memcpy(at, "drop_newest", 11);
    cr_assert_eq(cfg_load_string("edge.yaml", fixed, strlen(fixed), NULL, &cfg, err, sizeof err), 0, "%s", err);
    cr_assert_eq(broker_check_config(cfg, err, sizeof err), 0, "%s", err);
    cfg_free(cfg);
    free(fixed);
}
