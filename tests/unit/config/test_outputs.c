/* Tests for `outputs` (issue 17/18, docs/design/OUTPUTS.md 3): the implied
 * danube output, every key of each kind and its defaults, the keys refused
 * for a kind, the rules across outputs, template syntax and the
 * environment rule (${topic} in a template key is the template's), mapping
 * priority, errors naming file, line and key, the effective configuration
 * read back and the diff by output name. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "helper_config.h"
#include "base/base.h"

static const char *HEAD =
    "edge: {edge_name: e1, cluster_url: \"http://127.0.0.1:6650\"}\n"
    "mqtt:\n"
    "  topic_mappings:\n"
    "    - {mqtt_pattern: a/+/b, danube_topic: /e1/t}\n";

static cfg_t *load_text(const char *y, char *const *env) { return cfgt_load(y, env); }

/* HEAD, then extra (top-level YAML). */
static cfg_t *load_with(const char *extra, char *const *env) { return cfgt_load_cat(HEAD, extra, env); }

static void expect_error(const char *extra, const char *needle1, const char *needle2)
{
    cfgt_expect_refused(load_with(extra, NULL), extra, needle1, needle2);
}

static const char *MQTT_OUT =
    "outputs:\n"
    "  - name: danube\n"
    "    kind: danube\n"
    "  - name: central\n"
    "    kind: mqtt\n"
    "    topics: [\"/e1/#\"]\n"
    "    broker: \"mqtt.example:8883\"\n"
    "    protocol: 5\n"
    "    qos: 1\n"
    "    client_id: \"edge1-central\"\n"
    "    remote_topic: \"site1/${topic}\"\n"
    "    tls: { ca_file: ca.pem, cert_file: c.pem, key_file: c.key }\n"
    "    username: edge1\n"
    "    password_file: /etc/tributary/central.pw\n"
    "    max_inflight: 100\n"
    "    max_bytes_per_s: 0\n";

Test(outputs, absent_is_one_implied_danube_output)
{
    cfg_t *c = load_with("", NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert_eq(c->noutputs, 1);
    const cfg_output_t *o = &c->outputs[0];
    cr_assert_str_eq(o->name, "danube");
    cr_assert_eq(o->kind, CFG_OUTPUT_DANUBE);
    cr_assert(o->implied);
    cr_assert_eq(o->ntopics, 1);
    cr_assert_str_eq(o->topics[0], "#");
    cr_assert_eq(c->mqtt.mappings[0].priority, 0);
    cfg_free(c);
    /* the table defaults agree: a minimal file differs from them in no output */
    cr_assert_eq(cfg_defaults()->noutputs, 1);
    cr_assert_str_eq(cfg_defaults()->outputs[0].name, "danube");
}

Test(outputs, the_issue_shape_parses_exactly)
{
    cfg_t *c = load_with(MQTT_OUT, NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert_eq(c->noutputs, 2);
    const cfg_output_t *d = &c->outputs[0], *m = &c->outputs[1];
    cr_assert_not(d->implied);
    cr_assert_eq(d->line, 6);
    cr_assert_eq(m->line, 8);
    cr_assert_eq(m->kind, CFG_OUTPUT_MQTT);
    cr_assert_eq(m->ntopics, 1);
    cr_assert_str_eq(m->topics[0], "/e1/#");
    cr_assert_str_eq(m->broker, "mqtt.example:8883");
    cr_assert_eq(m->protocol, 5);
    cr_assert_eq(m->qos, 1);
    cr_assert_str_eq(m->client_id, "edge1-central");
    cr_assert_str_eq(m->remote_topic, "site1/${topic}", "a template key is not env-expanded: %s", m->remote_topic);
    cr_assert(m->has_tls);
    cr_assert_str_eq(m->tls.ca_file, "ca.pem");
    cr_assert_str_eq(m->tls.cert_file, "c.pem");
    cr_assert_str_eq(m->tls.key_file, "c.key");
    cr_assert_str_eq(m->username, "edge1");
    cr_assert_str_eq(m->password_file, "/etc/tributary/central.pw");
    cr_assert_eq(m->max_inflight, 100);
    cr_assert_eq(m->max_bytes_per_s, 0);
    cfg_free(c);
}

Test(outputs, defaults_of_mqtt_and_sparkplug)
{
    cfg_t *c = load_with("outputs:\n"
                         "  - {name: up, kind: mqtt, broker: \"127.0.0.1:1883\"}\n"
                         "  - name: scada\n"
                         "    kind: sparkplug\n"
                         "    broker: \"scada-broker:1883\"\n"
                         "    group_id: \"Plant1\"\n"
                         "    device: \"${1}\"\n"
                         "    primary_host_id: \"\"\n",
                         NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    const cfg_output_t *m = &c->outputs[0], *s = &c->outputs[1];
    cr_assert_str_eq(m->remote_topic, "${topic}");
    cr_assert_eq(m->protocol, 5);
    cr_assert_eq(m->qos, 1);
    cr_assert_str_eq(m->client_id, "tributary-e1-up");
    cr_assert_not(m->has_tls);
    cr_assert_str_eq(m->topics[0], "#");
    cr_assert_eq(m->max_inflight, 100);
    cr_assert_eq(m->max_messages_per_s, 0);
    cr_assert_str_eq(s->group_id, "Plant1");
    cr_assert_str_eq(s->edge_node_id, "e1", "default: edge.edge_name");
    cr_assert_str_eq(s->device, "${1}");
    cr_assert_str_eq(s->client_id, "tributary-e1-scada");
    cr_assert_eq(s->historical, CFG_SPB_HIST_FLAG, "historical: flag by default");
    cfg_free(c);
    /* without device: node metrics */
    c = load_with("outputs:\n  - {name: s, kind: sparkplug, broker: \"h:1\", group_id: G, edge_node_id: n1}\n", NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert_null(c->outputs[0].device);
    cr_assert_str_eq(c->outputs[0].edge_node_id, "n1");
    cfg_free(c);
    /* historical: separate (OUTPUTS.md 5.5); a sparkplug key only */
    c = load_with("outputs:\n  - {name: s, kind: sparkplug, broker: \"h:1\", group_id: G, historical: separate}\n",
                  NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert_eq(c->outputs[0].historical, CFG_SPB_HIST_SEPARATE);
    cfg_free(c);
    expect_error("outputs:\n  - {name: s, kind: sparkplug, broker: \"h:1\", group_id: G, historical: apart}\n",
                 "outputs[0].historical", "separate");
    expect_error("outputs:\n  - {name: up, kind: mqtt, broker: \"h:1\", historical: separate}\n",
                 "outputs[0].historical", "not a key of kind mqtt");
}

Test(outputs, env_rule_in_template_keys)
{
    char *env[] = { "SITE=plant7", "topic=WRONG", "upstream=WRONG", NULL };
    cfg_t *c = load_with("outputs:\n"
                         "  - {name: up, kind: mqtt, broker: \"h:1\", remote_topic: \"${SITE}/${topic}/${upstream}\"}\n",
                         env);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert_str_eq(c->outputs[0].remote_topic, "plant7/${topic}/${upstream}");
    cfg_free(c);
    /* ${topic} unset in the environment is no error there */
    c = load_with("outputs:\n  - {name: up, kind: mqtt, broker: \"h:1\", remote_topic: \"f/${topic}\"}\n", NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    cfg_free(c);
    /* in another key it is still the environment */
    expect_error("outputs:\n  - {name: up, kind: mqtt, broker: \"h:1\", username: \"${topic}\"}\n",
                 "outputs[0].username", "environment variable topic is not set");
    /* another ${NAME} in a template key is the environment, and an unset one is named */
    expect_error("outputs:\n  - {name: up, kind: mqtt, broker: \"h:1\", remote_topic: \"${SITE}/${topic}\"}\n",
                 "test.yaml:6:", "environment variable SITE is not set");
}

Test(outputs, keys_of_another_kind_are_refused)
{
    expect_error("outputs:\n  - {name: danube, kind: danube, broker: \"h:1\"}\n", "outputs[0].broker",
                 "not a key of kind danube");
    expect_error("outputs:\n  - {name: d, kind: danube, tls: {ca_file: a}}\n", "outputs[0].tls", "kind danube");
    expect_error("outputs:\n  - {name: up, kind: mqtt, broker: \"h:1\", group_id: G}\n", "outputs[0].group_id",
                 "not a key of kind mqtt");
    expect_error("outputs:\n  - {name: s, kind: sparkplug, broker: \"h:1\", group_id: G, qos: 2}\n",
                 "outputs[0].qos", "not a key of kind sparkplug");
    expect_error("outputs:\n  - {name: s, kind: sparkplug, broker: \"h:1\", group_id: G, remote_topic: x}\n",
                 "outputs[0].remote_topic", "kind sparkplug");
    expect_error("outputs:\n  - {name: up, kind: mqtt, broker: \"h:1\", remote_topc: x}\n",
                 "outputs[0].remote_topc", "did you mean \"remote_topic\"");
}

Test(outputs, required_and_ranges)
{
    expect_error("outputs:\n  - {kind: mqtt, broker: \"h:1\"}\n", "outputs[0].name", "required key missing");
    expect_error("outputs:\n  - {name: x}\n", "outputs[0].kind", "required key missing");
    expect_error("outputs:\n  - {name: x, kind: kafka}\n", "outputs[0].kind", "danube");
    expect_error("outputs:\n  - {name: up, kind: mqtt}\n", "outputs[0].broker", "required key missing");
    expect_error("outputs:\n  - {name: s, kind: sparkplug, broker: \"h:1\"}\n", "outputs[0].group_id",
                 "required key missing");
    expect_error("outputs:\n  - {name: up, kind: mqtt, broker: \"h:1\", protocol: 3}\n", "outputs[0].protocol",
                 NULL);
    expect_error("outputs:\n  - {name: up, kind: mqtt, broker: \"h:1\", qos: 3}\n", "outputs[0].qos", NULL);
    expect_error("outputs:\n  - {name: up, kind: mqtt, broker: \"h:1\", max_inflight: 0}\n",
                 "outputs[0].max_inflight", NULL);
    expect_error("outputs:\n  - {name: up, kind: mqtt, broker: nohost}\n", "outputs[0].broker", NULL);
    expect_error("outputs: []\n", "outputs", "at least 1");
    expect_error("outputs:\n  - {name: up, kind: mqtt, broker: \"h:1\", topics: []}\n", "outputs[0].topics", NULL);
    expect_error("outputs:\n  - {name: up, kind: mqtt, broker: \"h:1\", topics: \"/e1/#\"}\n", "outputs[0].topics",
                 "expected a list");
}

Test(outputs, names_kinds_and_client_ids)
{
    expect_error("outputs:\n  - {name: \"bad name\", kind: danube}\n", "outputs[0].name", "letters, digits");
    expect_error("outputs:\n  - {name: danube, kind: mqtt, broker: \"h:1\"}\n", "outputs[0].name",
                 "name of the danube output");
    expect_error("outputs:\n  - {name: a, kind: danube}\n  - {name: a, kind: mqtt, broker: \"h:1\"}\n",
                 "test.yaml:7:", "\"a\" is already outputs[0] (line 6)");
    expect_error("outputs:\n  - {name: a, kind: danube}\n  - {name: b, kind: danube}\n", "outputs[1].kind",
                 "a second danube output");
    expect_error("outputs:\n  - {name: a, kind: mqtt, broker: \"h:1\", client_id: same}\n"
                 "  - {name: b, kind: mqtt, broker: \"h:1\", client_id: same}\n",
                 "outputs[1].client_id", "already the client id of outputs[0]");
    /* the same client id on two brokers is fine */
    cfg_t *c = load_with("outputs:\n  - {name: a, kind: mqtt, broker: \"h:1\", client_id: same}\n"
                         "  - {name: b, kind: mqtt, broker: \"h:2\", client_id: same}\n",
                         NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    cfg_free(c);
}

Test(outputs, templates_and_filters_refused_with_line)
{
    expect_error("outputs:\n  - {name: up, kind: mqtt, broker: \"h:1\", remote_topic: \"site/+/x\"}\n",
                 "test.yaml:6:", "outputs[0].remote_topic");
    /* an unknown ${NAME} is the environment's, and named when unset */
    expect_error("outputs:\n  - {name: up, kind: mqtt, broker: \"h:1\", remote_topic: \"s/${tpoic}\"}\n",
                 "outputs[0].remote_topic", "environment variable tpoic is not set (in a template:");
    expect_error("outputs:\n  - {name: up, kind: mqtt, broker: \"h:1\", remote_topic: \"s/${0}\"}\n",
                 "outputs[0].remote_topic", "unknown placeholder");
    expect_error("outputs:\n  - {name: up, kind: mqtt, broker: \"h:1\", remote_topic: \"s/${topic\"}\n",
                 "outputs[0].remote_topic", "without a closing");
    expect_error("outputs:\n  - {name: up, kind: mqtt, broker: \"h:1\", remote_topic: \"${1}\"}\n",
                 "outputs[0].remote_topic", "can be empty");
    expect_error("outputs:\n  - {name: s, kind: sparkplug, broker: \"h:1\", group_id: G, device: \"d/${1}\"}\n",
                 "outputs[0].device", "'/'");
    expect_error("outputs:\n  - {name: s, kind: sparkplug, broker: \"h:1\", group_id: G, device: \"${topic}\"}\n",
                 "outputs[0].device", "only ${1}");
    expect_error("outputs:\n  - {name: s, kind: sparkplug, broker: \"h:1\", group_id: \"a/b\"}\n",
                 "outputs[0].group_id", "one topic level");
    expect_error("outputs:\n  - {name: up, kind: mqtt, broker: \"h:1\", topics: [\"/e1/#/x\"]}\n",
                 "outputs[0].topics[0]", "last level");
    expect_error("outputs:\n  - {name: up, kind: mqtt, broker: \"h:1\", tls: {cert_file: c.pem}}\n",
                 "outputs[0].tls.key_file", "go together");
}

Test(outputs, cluster_url_only_with_a_danube_output)
{
    cfg_t *c = load_text("edge: {edge_name: e1}\n"
                         "mqtt:\n  topic_mappings:\n    - {mqtt_pattern: a, danube_topic: /e1/t}\n"
                         "outputs:\n  - {name: up, kind: mqtt, broker: \"h:1\"}\n",
                         NULL);
    cr_assert_not_null(c, "no danube output, no cluster: %s", cfgt_err);
    cfg_free(c);
    c = load_text("edge: {edge_name: e1}\nmqtt:\n  topic_mappings:\n    - {mqtt_pattern: a, danube_topic: /e1/t}\n",
                  NULL);
    cr_assert_null(c);
    cr_assert(strstr(cfgt_err, "edge.cluster_url: required key missing"), "%s", cfgt_err);
    c = load_text("edge: {edge_name: e1}\nmqtt:\n  topic_mappings:\n    - {mqtt_pattern: a, danube_topic: /e1/t}\n"
                  "outputs:\n  - {name: d, kind: danube}\n",
                  NULL);
    cr_assert_null(c);
    cr_assert(strstr(cfgt_err, "test.yaml:6:") && strstr(cfgt_err, "the danube output sends to it"), "%s", cfgt_err);
}

Test(outputs, mapping_priority)
{
    cfg_t *c = load_text("edge: {edge_name: e1, cluster_url: \"http://h:1\"}\nmqtt:\n  topic_mappings:\n"
                         "    - {mqtt_pattern: a, danube_topic: /e1/t, priority: 5}\n",
                         NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    cr_assert_eq(c->mqtt.mappings[0].priority, 5);
    cfg_free(c);
    c = load_text("edge: {edge_name: e1, cluster_url: \"http://h:1\"}\nmqtt:\n  topic_mappings:\n"
                  "    - {mqtt_pattern: a, danube_topic: /e1/t, priority: 256}\n",
                  NULL);
    cr_assert_null(c);
    cr_assert(strstr(cfgt_err, "mqtt.topic_mappings[0].priority"), "%s", cfgt_err);
}

static void collect(void *arg, const char *key)
{
    char *buf = arg;
    strcat(buf, key);
    strcat(buf, ";");
}

Test(outputs, printed_config_reads_back_the_same)
{
    cfg_t *c = load_with(MQTT_OUT, NULL);
    cr_assert_not_null(c, "%s", cfgt_err);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cfg_print(c, f);
    fclose(f);
    cr_assert(strstr(text, "remote_topic: \"site1/${topic}\""), "%s", text);
    cr_assert(strstr(text, "kind: mqtt"), "%s", text);
    cfg_t *back = load_text(text, NULL);
    cr_assert_not_null(back, "%s\n%s", cfgt_err, text);
    char diffs[2048] = "";
    cfg_diff(c, back, collect, diffs);
    cr_assert_str_eq(diffs, "", "read back differs: %s\n%s", diffs, text);
    free(text);
    cfg_free(back);
    cfg_free(c);
    /* the implied output prints too, and reads back as an explicit one */
    c = load_with("", NULL);
    text = NULL;
    f = open_memstream(&text, &len);
    cfg_print(c, f);
    fclose(f);
    cr_assert(strstr(text, "outputs:  # implied"), "%s", text);
    back = load_text(text, NULL);
    cr_assert_not_null(back, "%s\n%s", cfgt_err, text);
    cr_assert_str_eq(back->outputs[0].name, "danube");
    free(text);
    cfg_free(back);
    cfg_free(c);
}

Test(outputs, diff_by_name)
{
    cfg_t *a = load_with(MQTT_OUT, NULL);
    cr_assert_not_null(a, "%s", cfgt_err);
    char *changed = tb_asprintf("%s", MQTT_OUT);
    char *q = strstr(changed, "qos: 1");
    q[5] = '2';
    char *y = tb_asprintf("%s%s  - {name: extra, kind: mqtt, broker: \"h:1\"}\n", HEAD, changed);
    cfg_t *b = load_text(y, NULL);
    cr_assert_not_null(b, "%s", cfgt_err);
    char diffs[2048] = "";
    cfg_diff(a, b, collect, diffs);
    cr_assert_str_eq(diffs, "outputs[central].qos;outputs[extra];");
    free(y);
    free(changed);
    cfg_free(a);
    cfg_free(b);
}
