/*
 * test_life.c: the life of a slot across reloads (broker.h broker_topic_life_t;
 * docs/design/RELOAD.md 4.1, 4.9): a topic a plan leaves is RETIRING, a plan
 * that routes to a REMOVING one is refused (its log is being removed), and
 * one that routes to a RETIRED one re-creates its log (from its RETIRED
 * entry: tests/integration/test_retire.py checks the offsets continue) in the
 * same slot.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "helper_broker.h"

static cfg_t *mappings(hb_t *h, const char *maps)
{
    char yaml[2048], err[512];
    snprintf(yaml, sizeof yaml,
             "edge: {edge_name: edge1, cluster_url: \"http://127.0.0.1:1\"}\n"
             "mqtt:\n  ingestion: {batch_timeout_ms: 5}\n  topic_mappings:\n%s"
             "wal: {dir: \"%s/wal\", fsync: never}\n", maps, h->dir);
    cfg_t *c = NULL;
    cr_assert_eq(cfg_load_string("next", yaml, strlen(yaml), NULL, &c, err, sizeof err), 0, "%s", err);
    return c;
}

static int apply(hb_t *h, cfg_t *c, broker_plan_t **out, char *err, size_t n)
{
    broker_plan_t *p = NULL;
    int rc = broker_plan_new(h->b, c, &p, err, n);
    if (rc == 0)
        rc = broker_plan_open(h->b, p, err, n);
    if (rc == 0)
        broker_plan_commit(h->b, p);
    if (out && rc == 0)
        *out = p;
    else
        broker_plan_free(p);
    return rc;
}

#define A "    - {mqtt_pattern: \"a/#\", danube_topic: /edge1/a}\n"
#define B "    - {mqtt_pattern: \"b/#\", danube_topic: /edge1/b}\n"

Test(life, leaving_retiring_removing_refused_retired_recreated)
{
    hb_t h;
    char err[512];
    cr_assert_eq(hb_open_mappings(&h, "", A B, err, sizeof err), 0, "%s", err);
    broker_topic_t *b = broker__topic(h.b, "/edge1/b");
    cr_assert_eq(b->life, BROKER_LIFE_LIVE);
    cfg_t *only_a = mappings(&h, A), *both = mappings(&h, A B);

    cr_assert_eq(apply(&h, only_a, NULL, err, sizeof err), 0, "%s", err);
    cr_assert_eq(b->life, BROKER_LIFE_RETIRING, "no rule routes to it");
    cr_assert_not(b->routed);

    broker_topic_set_life(h.b, b->id, BROKER_LIFE_REMOVING);
    cr_assert_eq(apply(&h, both, NULL, err, sizeof err), TB_EBUSY);
    cr_assert(strstr(err, "topic /edge1/b is being retired"), "%s", err);
    cr_assert_eq(b->life, BROKER_LIFE_REMOVING, "refused whole: nothing changed");
    cr_assert_not(b->routed);

    /* retired as gateway/retire.c does it: its log removed (drained: it never had a message) */
    wal_topic_t *old = b->wal;
    wal_retired_t e;
    cr_assert_eq(wal_topic_retire(old, WAL_RETIRE_REMOVE, &e), 0);
    cr_assert_eq(e.next, 1);
    broker_topic_set_life(h.b, b->id, BROKER_LIFE_RETIRED);
    broker_plan_t *p = NULL;
    cr_assert_eq(apply(&h, both, &p, err, sizeof err), 0, "%s", err);
    cr_assert_eq(p->nrevived, 1);
    cr_assert_eq(p->revived[0], b->id);
    cr_assert_eq(p->revived_life[0], BROKER_LIFE_RETIRED, "the gateway gives it lanes again");
    broker_plan_free(p);
    cr_assert_eq(broker__topic(h.b, "/edge1/b"), b, "the same slot, the same id");
    cr_assert_eq(b->life, BROKER_LIFE_LIVE);
    cr_assert(b->routed);
    cr_assert_neq(b->wal, old, "a new log");
    cr_assert_eq(wal_topic_find(h.wal, "/edge1/b"), b->wal);

    broker_topic_set_life(h.b, b->id, BROKER_LIFE_KEPT);
    cr_assert_eq(b->life, BROKER_LIFE_LIVE, "a routed slot is live whatever the gateway says");
    cfg_free(only_a);
    cfg_free(both);
    hb_close(&h);
}
