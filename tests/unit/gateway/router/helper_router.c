/* helper_router.c: see helper_router.h. */
#include "unit/gateway/router/helper_router.h"

#include "base/base.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#define RT_MAX_RULES 4096

router_t *rt_compile(router_spec_t *specs, size_t n)
{
    static char names[RT_MAX_RULES][24];
    cr_assert(n <= RT_MAX_RULES);
    for (size_t i = 0; i < n; i++) {
        if (!specs[i].danube_topic) {
            snprintf(names[i], sizeof names[i], "/edge1/t%zu", i);
            specs[i].danube_topic = names[i];
        }
    }
    char err[512];
    router_t *r = NULL;
    int rc = router_compile(specs, n, &r, err, sizeof err);
    cr_assert_eq(rc, 0, "compile failed: %s", err);
    cr_assert_not_null(r);
    return r;
}

const char *rt_compile_error(router_spec_t *specs, size_t n)
{
    static char names[RT_MAX_RULES][24];
    static char err[512];
    cr_assert(n <= RT_MAX_RULES);
    for (size_t i = 0; i < n; i++) {
        if (!specs[i].danube_topic) {
            snprintf(names[i], sizeof names[i], "/edge1/t%zu", i);
            specs[i].danube_topic = names[i];
        }
    }
    router_t *r = (router_t *)1;
    int rc = router_compile(specs, n, &r, err, sizeof err);
    cr_assert_eq(rc, TB_ECONFIG, "compile should have failed");
    cr_assert_null(r, "a failed compile must leave *out NULL");
    return err;
}

int rt_match(const router_t *r, const char *topic, router_match_t *m)
{
    return router_match(r, topic, strlen(topic), m);
}

const char *rt_upstream(const router_t *r, const router_match_t *m)
{
    size_t n;
    const char *const *topics = router_upstream_topics(r, &n);
    cr_assert_geq(m->rule, 0);
    cr_assert_lt(m->topic_id, n);
    return topics[m->topic_id];
}

bool rt_slice_is(router_slice_t v, const char *s)
{
    return v.len == strlen(s) && (v.len == 0 || memcmp(v.p, s, v.len) == 0);
}
