/*
 * rep_register.c: RegisterEdge and the heartbeat, the edge's standing with
 * the cluster.
 *
 * RegisterEdge declares every upstream topic with its schema subject (the
 * request is packed once). The answer says, per topic, whether it exists
 * upstream and what its schema is; each topic's result goes to the loop as
 * an event (the loop compiles schemas and owns validators) and accepted
 * topics start replicating. A failed attempt (unreachable, refused,
 * success=false) is retried with backoff, 1 s doubling to 60 s with equal
 * jitter, forever: an absent cluster is an outage, not a failed boot
 * (DESIGN.md promise 6). The failure is logged once, when the retrying
 * starts, and success once. When the cluster channel turns READY while a
 * retry is waiting, the retry happens at once: recovery after an outage is
 * bounded by the channel's 1 s reconnect backoff, not by the 60 s cap.
 *
 * The heartbeat runs every heartbeat_interval_ms (+-10% jitter) once
 * registered. Its answers:
 *   changed=false      nothing to do;
 *   SCHEMA_UPDATED     event with the new schema (the loop swaps the validator);
 *   SCHEMA_REMOVED     event: the topic is not ready until a schema comes back,
 *                      which a later heartbeat reports as SCHEMA_UPDATED;
 *   TOPIC_REMOVED      event, the topic's stream stops, and the edge
 *                      registers again at the next heartbeat tick, which
 *                      re-creates the topic: the edge's configuration says
 *                      which topics exist under /{edge_name}/ (to retire a
 *                      topic, remove its mapping);
 *   NOT_FOUND          the cluster forgot the edge (restarted, reset):
 *                      register again now.
 * A topic the registration refused (a per-topic error) also makes the next
 * heartbeat tick a registration, so a transient refusal heals itself.
 */
#include "replicator/rep_int.h"
#include "proto/EdgeReplicator.pb-c.h"

#include <stdlib.h>
#include <string.h>

#define REGISTER_METHOD "/danube.edge.EdgeReplicatorService/RegisterEdge"
#define HEARTBEAT_METHOD "/danube.edge.EdgeReplicatorService/EdgeHeartbeat"

static void reg_send(rep_t *r);

static void set_reg_state(rep_t *r, rep_reg_state_t s)
{
    r->reg_state = s;
    r->st.registration = s;
    rep__publish(r);
}

/* ---- events --------------------------------------------------------------------- */

static void copy_schema(rep_event_t *ev, const Danube__Edge__ResolvedSchema *s)
{
    ev->has_schema = true;
    ev->schema.subject = tb_strdup(s->subject ? s->subject : "");
    ev->schema.schema_id = s->schema_id;
    ev->schema.schema_version = s->schema_version;
    ev->schema.schema_type = tb_strdup(s->schema_type ? s->schema_type : "");
    ev->schema.definition_len = s->schema_definition.len;
    ev->schema.definition = tb_malloc(s->schema_definition.len + 1);
    if (s->schema_definition.len)
        memcpy(ev->schema.definition, s->schema_definition.data, s->schema_definition.len);
    ev->schema.definition[s->schema_definition.len] = 0;
    ev->schema.fingerprint = tb_strdup(s->fingerprint ? s->fingerprint : "");
}

static rep_event_t *event(rep_t *r, rep_event_kind_t kind, size_t topic, const char *detail)
{
    rep_event_t *ev = tb_calloc(1, sizeof *ev);
    ev->kind = kind;
    ev->topic = topic;
    ev->config_version = r->config_version;
    ev->detail = detail && *detail ? tb_strdup(detail) : NULL;
    return ev;
}

/* Topic index by name: results usually come in request order, so start there. */
static rep__topic_t *find_topic(rep_t *r, const char *name, size_t hint)
{
    for (size_t k = 0; k < r->ntopics; k++) {
        rep__topic_t *t = r->topics[(hint + k) % r->ntopics];
        if (strcmp(t->lane.name, name) == 0)
            return t;
    }
    return NULL;
}

/* ---- RegisterEdge ----------------------------------------------------------------- */

static void reg_timer_cb(rep_t *r, rep__timer_t *tm)
{
    (void)tm;
    if (!r->stopping)
        reg_send(r);
}

static void hb_arm(rep_t *r)
{
    rep__timer_arm(&r->timers, &r->hb_timer,
                   tb_mono_ms() + rep__jitter(r->o.heartbeat_interval_ms, 10, &r->rng));
}

static void reg_failed(rep_t *r, const char *why, bool refused)
{
    r->reg_dirty = false; /* the next attempt sends the list as it is now */
    r->st.registration_failures++;
    if (refused) /* credentials: not an outage, the next try after the maximum (RELOAD.md 5.6) */
        r->reg_backoff.attempt = 64;
    uint32_t delay = rep__backoff_next(&r->reg_backoff, &r->rng);
    if (refused)
        tb_debug("replicator: registration refused", TB_S("why", why), TB_U("next_try_ms", delay));
    else if (r->reg_backoff.attempt == 1)
        tb_warn("registration with the cluster failed: the gateway keeps accepting and logging messages; "
                "retrying with backoff (logged once until it succeeds)",
                TB_S("cluster", r->o.cluster_url), TB_S("why", why), TB_U("next_try_ms", delay));
    else
        tb_debug("replicator: registration failed", TB_S("why", why), TB_U("attempt", r->reg_backoff.attempt),
                 TB_U("next_try_ms", delay));
    set_reg_state(r, REP_REG_RETRYING);
    rep__timer_arm(&r->timers, &r->reg_timer, tb_mono_ms() + delay);
}

static void apply_registration(rep_t *r, const Danube__Edge__RegisterEdgeResponse *resp)
{
    size_t ok = 0, failed = 0;
    bool *seen = tb_calloc(r->ntopics ? r->ntopics : 1, sizeof *seen);
    for (size_t i = 0; i < resp->n_topics; i++) {
        const Danube__Edge__TopicRegistrationResult *res = resp->topics[i];
        rep__topic_t *t = find_topic(r, res->topic_name ? res->topic_name : "", i);
        if (!t)
            continue;
        seen[t->idx] = true;
        if (res->error && *res->error) {
            failed++;
            tb_warn("the cluster refused a topic; registering again at the next heartbeat", REP__LOG_TOPIC(t),
                    TB_S("error", res->error));
            rep__post(r, event(r, REP_EV_TOPIC_FAILED, t->lane.topic, res->error));
            if (t->registered)
                rep__topic_unregistered(r, t);
            r->reregister = true;
            continue;
        }
        ok++;
        rep_event_t *ev = event(r, REP_EV_TOPIC_REGISTERED, t->lane.topic, NULL);
        ev->schema_resolved = res->schema_resolved;
        if (res->schema)
            copy_schema(ev, res->schema);
        /* per topic at info the first time; re-registrations say it in one line */
        tb_log(r->st.registrations > 1 ? TB_LOG_DEBUG : TB_LOG_INFO, "topic registered", REP__LOG_TOPIC(t),
               TB_B("created", res->topic_created),
               TB_S("schema_subject", t->subject ? t->subject : ""), TB_B("schema_resolved", res->schema_resolved),
               TB_U("schema_id", res->schema ? res->schema->schema_id : 0),
               TB_U("schema_version", res->schema ? res->schema->schema_version : 0));
        rep__post(r, ev);
        rep__topic_registered(r, t);
    }
    for (size_t i = 0; i < r->ntopics; i++) {
        if (!seen[i]) {
            failed++;
            tb_warn("the cluster's registration answer left a topic out; registering again at the next heartbeat",
                    REP__LOG_TOPIC(r->topics[i]));
            r->reregister = true;
        }
    }
    free(seen);
    tb_info("registered with the cluster", TB_S("edge", r->o.edge_name), TB_U("config_version", r->config_version),
            TB_U("topics", ok), TB_U("refused", failed));
}

static void reg_done(rep_t *r, rep__unary_t *u)
{
    r->reg_call = NULL;
    if (r->stopping) {
        rep__unary_free(r, u);
        return;
    }
    char why[300];
    if (u->status != GRPC_STATUS_OK) {
        char *d = rep__status_details(u->details);
        snprintf(why, sizeof why, "%s%s%s", rep__status_name(u->status), *d ? ": " : "", d);
        rep__class_t cls = rep__classify(u->status, 0);
        bool refused = cls == REP__CLASS_CREDENTIALS || cls == REP__CLASS_UNIMPLEMENTED;
        if (refused)
            rep__refused_note(r, cls, u->status, d, "registration");
        free(d);
        rep__unary_free(r, u);
        reg_failed(r, why, refused);
        return;
    }
    size_t len;
    uint8_t *buf = rep__unary_response(u, &len);
    rep__unary_free(r, u);
    Danube__Edge__RegisterEdgeResponse *resp = danube__edge__register_edge_response__unpack(NULL, len, buf);
    free(buf);
    if (!resp || !resp->success) {
        snprintf(why, sizeof why, "%s", !resp ? "the answer does not parse" : resp->message ? resp->message : "success=false");
        if (resp)
            danube__edge__register_edge_response__free_unpacked(resp, NULL);
        reg_failed(r, why, false);
        return;
    }
    rep__refused_note(r, REP__CLASS_TRANSIENT, GRPC_STATUS_OK, NULL, "registration"); /* accepted: clears */
    r->config_version = resp->config_version;
    r->st.config_version = resp->config_version;
    r->st.registrations++;
    r->reregister = false;
    rep__backoff_reset(&r->reg_backoff);
    apply_registration(r, resp);
    danube__edge__register_edge_response__free_unpacked(resp, NULL);
    set_reg_state(r, REP_REG_REGISTERED);
    hb_arm(r);
    if (r->reg_dirty) {
        r->reg_dirty = false;
        tb_info("registering again: the declared topics changed", TB_U("topics", r->ntopics));
        reg_send(r);
    }
}

static void reg_send(rep_t *r)
{
    if (r->reg_call || r->stopping)
        return;
    rep__timer_cancel(&r->timers, &r->reg_timer);
    set_reg_state(r, REP_REG_REGISTERING);
    r->reg_call = rep__unary_start(r, r->cluster->ch, REGISTER_METHOD, r->reg_req, r->reg_req_len, reg_done, NULL);
}

/* ---- heartbeat ---------------------------------------------------------------------- */

static void apply_change(rep_t *r, const Danube__Edge__EdgeChange *ch, size_t hint)
{
    rep__topic_t *t = find_topic(r, ch->topic_name ? ch->topic_name : "", hint);
    if (!t)
        return;
    switch (ch->change_type) {
    case DANUBE__EDGE__EDGE_CHANGE_TYPE__SCHEMA_UPDATED: {
        if (!ch->schema) {
            tb_warn("heartbeat: SCHEMA_UPDATED without a schema (ignored)", REP__LOG_TOPIC(t));
            return;
        }
        rep_event_t *ev = event(r, REP_EV_SCHEMA_UPDATED, t->lane.topic, ch->detail);
        ev->schema_resolved = true;
        copy_schema(ev, ch->schema);
        tb_info("heartbeat: schema updated", REP__LOG_TOPIC(t), TB_S("subject", ev->schema.subject),
                TB_U("schema_id", ev->schema.schema_id), TB_U("schema_version", ev->schema.schema_version));
        rep__post(r, ev);
        break;
    }
    case DANUBE__EDGE__EDGE_CHANGE_TYPE__SCHEMA_REMOVED:
        tb_warn("heartbeat: schema removed on the cluster", REP__LOG_TOPIC(t), TB_S("detail", ch->detail ? ch->detail : ""));
        rep__post(r, event(r, REP_EV_SCHEMA_REMOVED, t->lane.topic, ch->detail));
        break;
    case DANUBE__EDGE__EDGE_CHANGE_TYPE__TOPIC_REMOVED:
        tb_warn("heartbeat: topic removed on the cluster; registering again at the next heartbeat re-creates it",
                REP__LOG_TOPIC(t), TB_S("detail", ch->detail ? ch->detail : ""));
        rep__post(r, event(r, REP_EV_TOPIC_REMOVED, t->lane.topic, ch->detail));
        rep__topic_unregistered(r, t);
        r->reregister = true;
        break;
    default:
        tb_warn("heartbeat: unknown change type (ignored)", REP__LOG_TOPIC(t), TB_I("type", ch->change_type));
        break;
    }
}

static void hb_done(rep_t *r, rep__unary_t *u)
{
    r->hb_call = NULL;
    if (r->stopping) {
        rep__unary_free(r, u);
        return;
    }
    if (u->status == GRPC_STATUS_NOT_FOUND) {
        rep__unary_free(r, u);
        tb_info("the cluster does not know this edge (heartbeat NOT_FOUND): registering again");
        reg_send(r);
        return;
    }
    if (u->status != GRPC_STATUS_OK) {
        char *d = rep__status_details(u->details);
        r->st.heartbeat_failures++;
        rep__class_t cls = rep__classify(u->status, 0);
        if (cls == REP__CLASS_CREDENTIALS || cls == REP__CLASS_UNIMPLEMENTED)
            rep__refused_note(r, cls, u->status, d, "heartbeat");
        else if (!r->hb_failing)
            tb_warn("heartbeat failed (logged once until one succeeds)", TB_S("status", rep__status_name(u->status)),
                    TB_S("details", d));
        r->hb_failing = true;
        free(d);
        rep__unary_free(r, u);
        rep__publish(r);
        return;
    }
    size_t len;
    uint8_t *buf = rep__unary_response(u, &len);
    rep__unary_free(r, u);
    Danube__Edge__EdgeHeartbeatResponse *resp = danube__edge__edge_heartbeat_response__unpack(NULL, len, buf);
    free(buf);
    if (!resp) {
        r->st.heartbeat_failures++;
        tb_warn("heartbeat: the answer does not parse");
        rep__publish(r);
        return;
    }
    if (r->hb_failing)
        tb_info("heartbeat answered again");
    r->hb_failing = false;
    r->st.heartbeats++;
    r->st.last_heartbeat_ms = tb_wall_ms();
    if (resp->changed) {
        r->config_version = resp->config_version;
        r->st.config_version = resp->config_version;
        for (size_t i = 0; i < resp->n_changes; i++)
            apply_change(r, resp->changes[i], i);
    }
    danube__edge__edge_heartbeat_response__free_unpacked(resp, NULL);
    rep__publish(r);
}

static void hb_timer_cb(rep_t *r, rep__timer_t *tm)
{
    (void)tm;
    if (r->stopping || r->reg_state != REP_REG_REGISTERED)
        return;
    if (r->reregister) {
        tb_info("registering again (a topic was removed or refused)");
        reg_send(r);
        return;
    }
    hb_arm(r);
    if (r->hb_call)
        return; /* the previous one is still within its deadline */
    Danube__Edge__EdgeHeartbeatRequest req = DANUBE__EDGE__EDGE_HEARTBEAT_REQUEST__INIT;
    req.edge_name = (char *)r->o.edge_name; /* pack only reads it */
    req.config_version = r->config_version;
    size_t len = danube__edge__edge_heartbeat_request__get_packed_size(&req);
    uint8_t *buf = tb_malloc(len ? len : 1);
    danube__edge__edge_heartbeat_request__pack(&req, buf);
    r->hb_call = rep__unary_start(r, r->cluster->ch, HEARTBEAT_METHOD, buf, len, hb_done, NULL);
    free(buf);
}

/* ---- lifecycle ------------------------------------------------------------------------ */

/* The RegisterEdge request from every topic the thread knows (packed again when the set changes). */
static void reg_pack(rep_t *r)
{
    free(r->reg_req);
    Danube__Edge__RegisterEdgeRequest req = DANUBE__EDGE__REGISTER_EDGE_REQUEST__INIT;
    Danube__Edge__EdgeTopicDeclaration *decls = tb_calloc(r->ntopics ? r->ntopics : 1, sizeof *decls);
    Danube__Edge__EdgeTopicDeclaration **ptrs = tb_calloc(r->ntopics ? r->ntopics : 1, sizeof *ptrs);
    for (size_t i = 0; i < r->ntopics; i++) {
        danube__edge__edge_topic_declaration__init(&decls[i]);
        decls[i].topic_name = r->topics[i]->lane.name;
        if (r->topics[i]->subject) {
            decls[i].schema_subject_opt_case = DANUBE__EDGE__EDGE_TOPIC_DECLARATION__SCHEMA_SUBJECT_OPT_SCHEMA_SUBJECT;
            decls[i].schema_subject = r->topics[i]->subject;
        }
        ptrs[i] = &decls[i];
    }
    req.edge_name = (char *)r->o.edge_name; /* pack only reads it */
    req.n_topics = r->ntopics;
    req.topics = ptrs;
    r->reg_req_len = danube__edge__register_edge_request__get_packed_size(&req);
    r->reg_req = tb_malloc(r->reg_req_len ? r->reg_req_len : 1);
    danube__edge__register_edge_request__pack(&req, r->reg_req);
    free(ptrs);
    free(decls);
}

void rep__reg_start(rep_t *r)
{
    r->reg_backoff = (rep__backoff_t){ r->o.register_retry_initial_ms, r->o.register_retry_max_ms, 0, false };
    r->reg_timer.cb = reg_timer_cb;
    r->hb_timer.cb = hb_timer_cb;
    reg_pack(r);
    tb_info("registering with the cluster", TB_S("edge", r->o.edge_name), TB_S("cluster", r->o.cluster_url),
            TB_U("topics", r->ntopics));
    reg_send(r);
}

/* A re-registration replaces the edge's topic list on the cluster and leaves
 * streams that are open alone (rep__topic_registered: a no-op unless the
 * topic is UNREGISTERED); each topic's result comes as its event, a refusal
 * for one topic does not hold the others. */
void rep__reg_redeclare(rep_t *r)
{
    reg_pack(r);
    if (r->reg_call) {
        r->reg_dirty = true; /* its answer is for the old list: send again after it */
        return;
    }
    if (r->reg_state == REP_REG_REGISTERED) {
        tb_info("registering again: the declared topics changed", TB_U("topics", r->ntopics));
        reg_send(r);
    }
    /* NONE / RETRYING: the next attempt sends the new list */
}

void rep__reg_chan_ready(rep_t *r)
{
    if (r->reg_state == REP_REG_RETRYING && rep__timer_armed(&r->reg_timer) && !r->stopping) {
        tb_debug("replicator: the cluster channel is ready: registering now");
        reg_send(r);
    }
}

void rep__reg_stop(rep_t *r)
{
    rep__timer_cancel(&r->timers, &r->reg_timer);
    rep__timer_cancel(&r->timers, &r->hb_timer);
}

void rep__reg_free(rep_t *r)
{
    free(r->reg_req);
    r->reg_req = NULL;
}
