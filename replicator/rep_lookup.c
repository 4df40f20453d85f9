/*
 * rep_lookup.c: Discovery.TopicLookup, which broker owns a topic.
 *
 * Asked on the cluster URL before a topic's first stream and again after a
 * stream ended UNAVAILABLE (the broker may have moved). Answers:
 *   Connect   stream to connect_url (broker_url if that is empty, the
 *             cluster URL if both are): its channel is shared by every
 *             topic that broker owns;
 *   Redirect  ask again at the URL given, at most MAX_HOPS times in a row;
 *   Failed    try again later, with the topic's backoff.
 * The answer is kept in the topic (t->chan) until a stream on it ends
 * UNAVAILABLE. Like every unary call it has a deadline (rpc_timeout_ms).
 */
#include "replicator/rep_int.h"
#include "proto/DanubeApi.pb-c.h"

#include <stdlib.h>
#include <string.h>

#define LOOKUP_METHOD "/danube.Discovery/TopicLookup"
#define MAX_HOPS 3

static void lookup_done(rep_t *r, rep__unary_t *u)
{
    rep__topic_t *t = u->arg;
    char why[300];
    if (u->status != GRPC_STATUS_OK) {
        char *d = rep__status_details(u->details);
        snprintf(why, sizeof why, "TopicLookup: %s%s%s", rep__status_name(u->status), *d ? ": " : "", d);
        free(d);
        rep__unary_free(r, u);
        rep__topic_on_lookup(r, t, NULL, why);
        return;
    }
    size_t len;
    uint8_t *buf = rep__unary_response(u, &len);
    rep__unary_free(r, u);
    Danube__TopicLookupResponse *resp = danube__topic_lookup_response__unpack(NULL, len, buf);
    free(buf);
    if (!resp) {
        rep__topic_on_lookup(r, t, NULL, "TopicLookup: the answer does not parse");
        return;
    }
    const char *url = resp->connect_url && *resp->connect_url ? resp->connect_url
                      : resp->broker_url && *resp->broker_url ? resp->broker_url
                                                              : r->o.cluster_url;
    switch (resp->response_type) {
    case DANUBE__TOPIC_LOOKUP_RESPONSE__LOOKUP_TYPE__Connect: {
        rep__chan_t *c = rep__chan_get(r, url);
        tb_debug("replicator: lookup", REP__LOG_TOPIC(t), TB_S("connect", url));
        snprintf(why, sizeof why, "TopicLookup: unusable connect_url %s", url);
        rep__topic_on_lookup(r, t, c, why);
        break;
    }
    case DANUBE__TOPIC_LOOKUP_RESPONSE__LOOKUP_TYPE__Redirect:
        if (r->stopping || !t->registered) {
            rep__topic_on_lookup(r, t, NULL, "stopping");
        } else if (++t->hops > MAX_HOPS) {
            snprintf(why, sizeof why, "TopicLookup: more than %d redirects in a row (last to %s)", MAX_HOPS, url);
            rep__topic_on_lookup(r, t, NULL, why);
        } else {
            tb_debug("replicator: lookup redirected", REP__LOG_TOPIC(t), TB_S("to", url));
            rep__lookup_start(r, t, url);
        }
        break;
    default:
        rep__topic_on_lookup(r, t, NULL, "TopicLookup answered Failed");
        break;
    }
    danube__topic_lookup_response__free_unpacked(resp, NULL);
}

void rep__lookup_start(rep_t *r, rep__topic_t *t, const char *url)
{
    rep__chan_t *c = url ? rep__chan_get(r, url) : r->cluster;
    if (!c || !c->ch) {
        rep__topic_on_lookup(r, t, NULL, "TopicLookup: redirected to an unusable URL");
        return;
    }
    Danube__TopicLookupRequest req = DANUBE__TOPIC_LOOKUP_REQUEST__INIT;
    req.request_id = ++r->lookup_seq;
    req.topic = t->lane.name;
    size_t len = danube__topic_lookup_request__get_packed_size(&req);
    uint8_t *buf = tb_malloc(len ? len : 1);
    danube__topic_lookup_request__pack(&req, buf);
    t->lookup = rep__unary_start(r, c->ch, LOOKUP_METHOD, buf, len, lookup_done, t);
    free(buf);
}
