/*
 * refuse.c: every refusal of a PUBLISH, in one table: the MQTT 5 reason
 * code it is answered with, and what MQTT 3.1.1, which has no negative
 * acknowledgement, does instead (docs/MQTT.md has the same table for
 * users). A new refusal is one row here and one enum member.
 *
 * The 3.1.1 rule: a refused QoS 1/2 message must not be acknowledged, or
 * the device would believe it stored, so the connection is closed instead
 * and the device sends it again later. The one exception is a payload its
 * schema refuses: sending it again cannot help, so it is acknowledged and
 * counted (and kept in the dead-letter log when that is on); only MQTT 5
 * can be told why. A refusal that is a DISCONNECT (a packet over the
 * advertised limit) closes every version's connection at once.
 */
#include "gateway/broker/broker_int.h"

static const broker_refusal_t table[BROKER_REFUSE__COUNT] = {
    [BROKER_REFUSE_TOPIC_INVALID] = { "no mapping matches the topic", MQTT_RC_TOPIC_NAME_INVALID, false, true },
    [BROKER_REFUSE_NOT_AUTHORIZED] = { "not authorized", MQTT_RC_NOT_AUTHORIZED, false, true },
    [BROKER_REFUSE_SCHEMA_UNAVAILABLE] = { "its schema is not resolved", MQTT_RC_UNSPECIFIED_ERROR, false, true },
    [BROKER_REFUSE_SCHEMA_INVALID] = { "the payload fails its schema", MQTT_RC_PAYLOAD_FORMAT_INVALID, false, false },
    [BROKER_REFUSE_PAYLOAD_TOO_LARGE] = { "payload over mqtt.max_payload_size", MQTT_RC_PACKET_TOO_LARGE, true, true },
    [BROKER_REFUSE_TOO_MANY_ATTRIBUTES] = { "too many attributes", MQTT_RC_IMPLEMENTATION_SPECIFIC_ERROR, false, true },
    [BROKER_REFUSE_QUOTA] = { "a disk bound refuses it", MQTT_RC_QUOTA_EXCEEDED, false, true },
    [BROKER_REFUSE_LOG_UNAVAILABLE] = { "the log cannot keep it", MQTT_RC_QUOTA_EXCEEDED, false, true },
};

const broker_refusal_t *broker__refusal(broker_refuse_t why)
{
    return (unsigned)why < BROKER_REFUSE__COUNT ? &table[why] : &table[BROKER_REFUSE_LOG_UNAVAILABLE];
}

void broker__refuse(broker_conn_t *c, broker_pending_t *p, broker_refuse_t why)
{
    const broker_refusal_t *r = broker__refusal(why);
    if (r->disconnect) {
        broker__conn_close(c, r->reason5, r->why); /* frees p with the acks that were not waiting */
        return;
    }
    if (!p)
        return; /* QoS 0: nobody is answered */
    p->refused = (uint8_t)(why + 1);
    p->reason = r->reason5;
    p->close = r->close311 && p->conn->version != MQTT_V5;
}
