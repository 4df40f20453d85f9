/*
 * mqtt_reason.c: reason-code names for logs and which codes each packet may
 * carry.
 *
 * One table row per MQTT 5 reason code (Table 2-6), with the packet types
 * it is listed for. The names go to logs; the per-packet bits let the
 * decoder refuse a code a sender "MUST use one of" the listed ones
 * ([MQTT-3.2.2-8], [MQTT-3.4.2-1], [MQTT-3.5.2-1], [MQTT-3.6.2-1],
 * [MQTT-3.7.2-1], [MQTT-3.9.3-2], [MQTT-3.11.3-2], [MQTT-3.14.2-1],
 * [MQTT-3.15.2-1]) and let the encoder refuse to produce one. MQTT 3.1.1 has
 * its own small sets, written out in mqtt_reason_allowed.
 */
#include "gateway/mqtt/mqtt.h"

#define C(t) (1u << (t))
#define PUBACKREC (C(MQTT_PUBACK) | C(MQTT_PUBREC))

typedef struct reason_def {
    const char *name;
    uint16_t types; /* C(packet type) bits where the code is listed */
} reason_def_t;

static const reason_def_t reasons[256] = {
    [0x00] = { "Success", C(MQTT_CONNACK) | PUBACKREC | C(MQTT_PUBREL) | C(MQTT_PUBCOMP) | C(MQTT_SUBACK) |
                              C(MQTT_UNSUBACK) | C(MQTT_DISCONNECT) | C(MQTT_AUTH) },
    [0x01] = { "Granted QoS 1", C(MQTT_SUBACK) },
    [0x02] = { "Granted QoS 2", C(MQTT_SUBACK) },
    [0x04] = { "Disconnect with Will Message", C(MQTT_DISCONNECT) },
    [0x10] = { "No matching subscribers", PUBACKREC },
    [0x11] = { "No subscription existed", C(MQTT_UNSUBACK) },
    [0x18] = { "Continue authentication", C(MQTT_AUTH) },
    [0x19] = { "Re-authenticate", C(MQTT_AUTH) },
    [0x80] = { "Unspecified error", C(MQTT_CONNACK) | PUBACKREC | C(MQTT_SUBACK) | C(MQTT_UNSUBACK) |
                                        C(MQTT_DISCONNECT) },
    [0x81] = { "Malformed Packet", C(MQTT_CONNACK) | C(MQTT_DISCONNECT) },
    [0x82] = { "Protocol Error", C(MQTT_CONNACK) | C(MQTT_DISCONNECT) },
    [0x83] = { "Implementation specific error", C(MQTT_CONNACK) | PUBACKREC | C(MQTT_SUBACK) |
                                                     C(MQTT_UNSUBACK) | C(MQTT_DISCONNECT) },
    [0x84] = { "Unsupported Protocol Version", C(MQTT_CONNACK) },
    [0x85] = { "Client Identifier not valid", C(MQTT_CONNACK) },
    [0x86] = { "Bad User Name or Password", C(MQTT_CONNACK) },
    [0x87] = { "Not authorized", C(MQTT_CONNACK) | PUBACKREC | C(MQTT_SUBACK) | C(MQTT_UNSUBACK) |
                                     C(MQTT_DISCONNECT) },
    [0x88] = { "Server unavailable", C(MQTT_CONNACK) },
    [0x89] = { "Server busy", C(MQTT_CONNACK) | C(MQTT_DISCONNECT) },
    [0x8A] = { "Banned", C(MQTT_CONNACK) },
    [0x8B] = { "Server shutting down", C(MQTT_DISCONNECT) },
    [0x8C] = { "Bad authentication method", C(MQTT_CONNACK) | C(MQTT_DISCONNECT) },
    [0x8D] = { "Keep Alive timeout", C(MQTT_DISCONNECT) },
    [0x8E] = { "Session taken over", C(MQTT_DISCONNECT) },
    [0x8F] = { "Topic Filter invalid", C(MQTT_SUBACK) | C(MQTT_UNSUBACK) | C(MQTT_DISCONNECT) },
    [0x90] = { "Topic Name invalid", C(MQTT_CONNACK) | PUBACKREC | C(MQTT_DISCONNECT) },
    [0x91] = { "Packet Identifier in use", PUBACKREC | C(MQTT_SUBACK) | C(MQTT_UNSUBACK) },
    [0x92] = { "Packet Identifier not found", C(MQTT_PUBREL) | C(MQTT_PUBCOMP) },
    [0x93] = { "Receive Maximum exceeded", C(MQTT_DISCONNECT) },
    [0x94] = { "Topic Alias invalid", C(MQTT_DISCONNECT) },
    [0x95] = { "Packet too large", C(MQTT_CONNACK) | C(MQTT_DISCONNECT) },
    [0x96] = { "Message rate too high", C(MQTT_DISCONNECT) },
    [0x97] = { "Quota exceeded", C(MQTT_CONNACK) | PUBACKREC | C(MQTT_SUBACK) | C(MQTT_DISCONNECT) },
    [0x98] = { "Administrative action", C(MQTT_DISCONNECT) },
    [0x99] = { "Payload format invalid", C(MQTT_CONNACK) | PUBACKREC | C(MQTT_DISCONNECT) },
    [0x9A] = { "Retain not supported", C(MQTT_CONNACK) | C(MQTT_DISCONNECT) },
    [0x9B] = { "QoS not supported", C(MQTT_CONNACK) | C(MQTT_DISCONNECT) },
    [0x9C] = { "Use another server", C(MQTT_CONNACK) | C(MQTT_DISCONNECT) },
    [0x9D] = { "Server moved", C(MQTT_CONNACK) | C(MQTT_DISCONNECT) },
    [0x9E] = { "Shared Subscriptions not supported", C(MQTT_SUBACK) | C(MQTT_DISCONNECT) },
    [0x9F] = { "Connection rate exceeded", C(MQTT_CONNACK) | C(MQTT_DISCONNECT) },
    [0xA0] = { "Maximum connect time", C(MQTT_DISCONNECT) },
    [0xA1] = { "Subscription Identifiers not supported", C(MQTT_SUBACK) | C(MQTT_DISCONNECT) },
    [0xA2] = { "Wildcard Subscriptions not supported", C(MQTT_SUBACK) | C(MQTT_DISCONNECT) },
};

const char *mqtt_reason_name(uint8_t rc)
{
    return reasons[rc].name ? reasons[rc].name : "Unknown reason code";
}

static const char *const connack_v311[] = {
    "Connection Accepted",
    "Connection Refused, unacceptable protocol version",
    "Connection Refused, identifier rejected",
    "Connection Refused, Server unavailable",
    "Connection Refused, bad user name or password",
    "Connection Refused, not authorized",
};

const char *mqtt_connack_v311_name(uint8_t rc)
{
    return rc < sizeof connack_v311 / sizeof connack_v311[0] ? connack_v311[rc] : "Reserved return code";
}

uint8_t mqtt_connack_v311_from_reason(uint8_t rc)
{
    switch (rc) {
    case MQTT_RC_SUCCESS: return MQTT_CONNACK_ACCEPTED;
    case MQTT_RC_UNSUPPORTED_PROTOCOL_VERSION: return MQTT_CONNACK_REFUSED_PROTOCOL_VERSION;
    case MQTT_RC_CLIENT_IDENTIFIER_NOT_VALID: return MQTT_CONNACK_REFUSED_IDENTIFIER_REJECTED;
    case MQTT_RC_BAD_USER_NAME_OR_PASSWORD: return MQTT_CONNACK_REFUSED_BAD_USER_NAME_OR_PASSWORD;
    case MQTT_RC_NOT_AUTHORIZED:
    case MQTT_RC_BANNED: return MQTT_CONNACK_REFUSED_NOT_AUTHORIZED;
    default: return MQTT_CONNACK_REFUSED_SERVER_UNAVAILABLE;
    }
}

bool mqtt_reason_allowed(mqtt_type_t type, uint8_t version, uint8_t rc)
{
    if ((unsigned)type < 1 || (unsigned)type > 15)
        return false;
    if (version != MQTT_V5) {
        switch (type) {
        case MQTT_CONNACK: return rc <= MQTT_CONNACK_REFUSED_NOT_AUTHORIZED; /* 3.2.2.3, Table 3.1 */
        case MQTT_SUBACK: return rc <= 2 || rc == 0x80;                       /* [MQTT-3.9.3-2] */
        default: return rc == 0; /* 3.1.1 acks and DISCONNECT carry no code */
        }
    }
    return (reasons[rc].types & C(type)) != 0;
}

static const char *const type_names[16] = {
    "?", "CONNECT", "CONNACK", "PUBLISH", "PUBACK", "PUBREC", "PUBREL", "PUBCOMP",
    "SUBSCRIBE", "SUBACK", "UNSUBSCRIBE", "UNSUBACK", "PINGREQ", "PINGRESP", "DISCONNECT", "AUTH",
};

const char *mqtt_type_name(unsigned type)
{
    return type < 16 ? type_names[type] : "?";
}
