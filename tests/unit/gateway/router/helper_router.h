/*
 * helper_router.h: small helpers shared by the router's unit tests, so each
 * test reads as its claim: compile these rules, match this topic, expect
 * that rule and those captures.
 */
#ifndef TB_TEST_HELPER_ROUTER_H
#define TB_TEST_HELPER_ROUTER_H

#include "gateway/router/router.h"

#include <stdbool.h>
#include <stddef.h>

/* A rule with only a pattern (upstream "/edge1/t<index>" is set by rt_rules). */
#define RT_RULE(p) { .mqtt_pattern = (p) }

/* Fills in a distinct valid danube_topic for every rule that has none, then
 * compiles; the test fails (with the router's message) if compile fails. */
router_t *rt_compile(router_spec_t *specs, size_t n);

/* Compiles rules that must be rejected; returns the error text (static). */
const char *rt_compile_error(router_spec_t *specs, size_t n);

/* Matches a NUL-terminated topic. */
int rt_match(const router_t *r, const char *topic, router_match_t *m);

/* The upstream topic name of a match. */
const char *rt_upstream(const router_t *r, const router_match_t *m);

/* Does the slice hold exactly s? */
bool rt_slice_is(router_slice_t v, const char *s);

#endif
