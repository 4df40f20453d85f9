/*
 * mqtt.h: the pure MQTT 3.1 / 3.1.1 / 5.0 codec (the gateway/mqtt/ folder's
 * one public header; tb_mqtt links base and libc only, checked at build time).
 *
 * This is the only code that reads bytes a device sent, so it is shaped to be
 * fuzzed and to be cheap:
 *
 *  - no I/O, no allocation, no global mutable state. Decoded strings and
 *    binary fields are views (mqtt_bytes_t) into the caller's buffer: a
 *    decoded packet is valid only while that buffer is unchanged.
 *  - repeated things (User Properties, PUBLISH Subscription Identifiers,
 *    SUBSCRIBE/UNSUBSCRIBE filters) are kept as a raw, already validated
 *    region plus a count, walked with an iterator (mqtt_iter_t); SUBACK and
 *    UNSUBACK reason codes are a plain byte view.
 *  - decoding is incremental: the connection layer calls mqtt_decode() on
 *    whatever is in its bounded read buffer and gets "need more", one packet
 *    and the bytes it used, or an error carrying the MQTT 5 reason code to
 *    send back and a short static reason string for the log.
 *  - the maximum packet size is enforced from the fixed header alone, so a
 *    huge announced length is refused before its body is buffered.
 *  - encoding computes the exact size first (mqtt_encoded_size), then writes
 *    into a caller buffer (mqtt_encode). Server-side replies have one-call
 *    helpers (mqtt_encode_connack, _ack, _suback, _disconnect, _pingresp).
 *
 * The codec checks everything a packet says about itself (framing, flags,
 * field bounds, UTF-8, property placement and ranges, reason codes). Rules
 * that need session state or direction stay with the session layer: a second
 * CONNECT, topic alias above the negotiated maximum, a Subscription
 * Identifier in a PUBLISH from a client, topic-filter syntax (answered per
 * filter with SUBACK 0x8F; see mqtt_topic_filter_valid), client identifier
 * policy, payload-format validation of the payload itself.
 *
 * Prefix: mqtt_ (public to gateway/), mqtt__ (shared between mqtt_*.c files).
 */
#ifndef TB_GATEWAY_MQTT_CODEC_H
#define TB_GATEWAY_MQTT_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- versions and limits ------------------------------------------------- */

#define MQTT_V31  3 /* protocol level of MQTT 3.1 ("MQIsdp"); sessions run as 3.1.1 */
#define MQTT_V311 4
#define MQTT_V5   5

#define MQTT_MAX_REMAINING 268435455u              /* largest 4-byte varint */
#define MQTT_MAX_PACKET    (1u + 4u + MQTT_MAX_REMAINING)

typedef enum mqtt_type {
    MQTT_CONNECT = 1,
    MQTT_CONNACK = 2,
    MQTT_PUBLISH = 3,
    MQTT_PUBACK = 4,
    MQTT_PUBREC = 5,
    MQTT_PUBREL = 6,
    MQTT_PUBCOMP = 7,
    MQTT_SUBSCRIBE = 8,
    MQTT_SUBACK = 9,
    MQTT_UNSUBSCRIBE = 10,
    MQTT_UNSUBACK = 11,
    MQTT_PINGREQ = 12,
    MQTT_PINGRESP = 13,
    MQTT_DISCONNECT = 14,
    MQTT_AUTH = 15, /* MQTT 5 only */
} mqtt_type_t;

/* ---- reason codes (MQTT 5 Table 2-6) --------------------------------------- */

enum {
    MQTT_RC_SUCCESS = 0x00, /* also Normal disconnection, Granted QoS 0 */
    MQTT_RC_GRANTED_QOS1 = 0x01,
    MQTT_RC_GRANTED_QOS2 = 0x02,
    MQTT_RC_DISCONNECT_WITH_WILL = 0x04,
    MQTT_RC_NO_MATCHING_SUBSCRIBERS = 0x10,
    MQTT_RC_NO_SUBSCRIPTION_EXISTED = 0x11,
    MQTT_RC_CONTINUE_AUTHENTICATION = 0x18,
    MQTT_RC_REAUTHENTICATE = 0x19,
    MQTT_RC_UNSPECIFIED_ERROR = 0x80,
    MQTT_RC_MALFORMED_PACKET = 0x81,
    MQTT_RC_PROTOCOL_ERROR = 0x82,
    MQTT_RC_IMPLEMENTATION_SPECIFIC_ERROR = 0x83,
    MQTT_RC_UNSUPPORTED_PROTOCOL_VERSION = 0x84,
    MQTT_RC_CLIENT_IDENTIFIER_NOT_VALID = 0x85,
    MQTT_RC_BAD_USER_NAME_OR_PASSWORD = 0x86,
    MQTT_RC_NOT_AUTHORIZED = 0x87,
    MQTT_RC_SERVER_UNAVAILABLE = 0x88,
    MQTT_RC_SERVER_BUSY = 0x89,
    MQTT_RC_BANNED = 0x8A,
    MQTT_RC_SERVER_SHUTTING_DOWN = 0x8B,
    MQTT_RC_BAD_AUTHENTICATION_METHOD = 0x8C,
    MQTT_RC_KEEP_ALIVE_TIMEOUT = 0x8D,
    MQTT_RC_SESSION_TAKEN_OVER = 0x8E,
    MQTT_RC_TOPIC_FILTER_INVALID = 0x8F,
    MQTT_RC_TOPIC_NAME_INVALID = 0x90,
    MQTT_RC_PACKET_IDENTIFIER_IN_USE = 0x91,
    MQTT_RC_PACKET_IDENTIFIER_NOT_FOUND = 0x92,
    MQTT_RC_RECEIVE_MAXIMUM_EXCEEDED = 0x93,
    MQTT_RC_TOPIC_ALIAS_INVALID = 0x94,
    MQTT_RC_PACKET_TOO_LARGE = 0x95,
    MQTT_RC_MESSAGE_RATE_TOO_HIGH = 0x96,
    MQTT_RC_QUOTA_EXCEEDED = 0x97,
    MQTT_RC_ADMINISTRATIVE_ACTION = 0x98,
    MQTT_RC_PAYLOAD_FORMAT_INVALID = 0x99,
    MQTT_RC_RETAIN_NOT_SUPPORTED = 0x9A,
    MQTT_RC_QOS_NOT_SUPPORTED = 0x9B,
    MQTT_RC_USE_ANOTHER_SERVER = 0x9C,
    MQTT_RC_SERVER_MOVED = 0x9D,
    MQTT_RC_SHARED_SUBSCRIPTIONS_NOT_SUPPORTED = 0x9E,
    MQTT_RC_CONNECTION_RATE_EXCEEDED = 0x9F,
    MQTT_RC_MAXIMUM_CONNECT_TIME = 0xA0,
    MQTT_RC_SUBSCRIPTION_IDENTIFIERS_NOT_SUPPORTED = 0xA1,
    MQTT_RC_WILDCARD_SUBSCRIPTIONS_NOT_SUPPORTED = 0xA2,
};

/* MQTT 3.1.1 CONNACK return codes (Table 3.1). */
enum {
    MQTT_CONNACK_ACCEPTED = 0,
    MQTT_CONNACK_REFUSED_PROTOCOL_VERSION = 1,
    MQTT_CONNACK_REFUSED_IDENTIFIER_REJECTED = 2,
    MQTT_CONNACK_REFUSED_SERVER_UNAVAILABLE = 3,
    MQTT_CONNACK_REFUSED_BAD_USER_NAME_OR_PASSWORD = 4,
    MQTT_CONNACK_REFUSED_NOT_AUTHORIZED = 5,
};

/* Name of an MQTT 5 reason code for logs ("Malformed Packet"); never NULL. */
const char *mqtt_reason_name(uint8_t rc);
/* Name of a 3.1.1 CONNACK return code ("Identifier rejected"); never NULL. */
const char *mqtt_connack_v311_name(uint8_t rc);
/* The 3.1.1 CONNACK return code closest to an MQTT 5 CONNACK reason code
 * (0x84 -> 1, 0x85 -> 2, 0x86 -> 4, 0x87/0x8A -> 5, other failures -> 3). */
uint8_t mqtt_connack_v311_from_reason(uint8_t rc);
/* Whether rc may appear in a packet of this type and version (CONNACK:
 * return code for 3.1.1, reason code for 5; SUBACK: per-filter codes). */
bool mqtt_reason_allowed(mqtt_type_t type, uint8_t version, uint8_t rc);
/* "PUBLISH", "CONNACK", ... ("?" for anything else). */
const char *mqtt_type_name(unsigned type);

/* ---- views and repeated regions ---------------------------------------------- */

/* A view into the input (decode) or the caller's data (encode). */
typedef struct mqtt_bytes {
    const uint8_t *p;
    uint32_t n;
} mqtt_bytes_t;

#define MQTT_BYTES(s) ((mqtt_bytes_t){ (const uint8_t *)(s), (uint32_t)(sizeof(s) - 1) })
#define MQTT_BYTES_STR(s) ((mqtt_bytes_t){ (const uint8_t *)(s), (uint32_t)strlen(s) })

/*
 * A repeated element kept in wire form: `raw` is a region of encoded items
 * and `count` how many the iterator yields. For properties (user, sub_ids)
 * the region is a sequence of property TLVs from which the iterator picks
 * only its own identifier (so a decoded region may interleave others).
 * For filter lists it is the SUBSCRIBE/UNSUBSCRIBE payload itself.
 * To encode, build a region with mqtt_put_user_prop / mqtt_put_sub_id /
 * mqtt_put_sub / mqtt_put_unsub.
 */
typedef struct mqtt_list {
    mqtt_bytes_t raw;
    uint32_t count;
} mqtt_list_t;

typedef struct mqtt_iter {
    const uint8_t *p, *end;
} mqtt_iter_t;

void mqtt_iter_init(mqtt_iter_t *it, const mqtt_list_t *list);
/* Each returns false at the end (or on a region that does not parse). */
bool mqtt_next_user_prop(mqtt_iter_t *it, mqtt_bytes_t *key /* OUT */, mqtt_bytes_t *val /* OUT */);
bool mqtt_next_sub_id(mqtt_iter_t *it, uint32_t *id /* OUT */);
bool mqtt_next_sub(mqtt_iter_t *it, mqtt_bytes_t *filter /* OUT */, uint8_t *options /* OUT */);
bool mqtt_next_unsub(mqtt_iter_t *it, mqtt_bytes_t *filter /* OUT */);

/* Region builders: append one item at buf[*off], advance *off, bump
 * list->count and point list->raw at buf[0..*off). Return 0, or TB_EFULL
 * (nothing written) or -EINVAL (a string over 65535 bytes, an id out of range). */
int mqtt_put_user_prop(mqtt_list_t *list, uint8_t *buf, size_t cap, size_t *off,
                       mqtt_bytes_t key, mqtt_bytes_t val);
int mqtt_put_sub_id(mqtt_list_t *list, uint8_t *buf, size_t cap, size_t *off, uint32_t id);
int mqtt_put_sub(mqtt_list_t *list, uint8_t *buf, size_t cap, size_t *off,
                 mqtt_bytes_t filter, uint8_t options);
int mqtt_put_unsub(mqtt_list_t *list, uint8_t *buf, size_t cap, size_t *off, mqtt_bytes_t filter);

/* Subscription options byte (3.1.1: only the QoS bits exist). */
#define MQTT_SUBOPT_QOS(o)             ((uint8_t)((o) & 0x03))
#define MQTT_SUBOPT_NO_LOCAL           0x04
#define MQTT_SUBOPT_RETAIN_AS_PUBLISHED 0x08
#define MQTT_SUBOPT_RETAIN_HANDLING(o) ((uint8_t)(((o) >> 4) & 0x03))

/* ---- properties (MQTT 5) -------------------------------------------------------- */

/* Property identifiers (MQTT 5 Table 2-4). Presence bit = 1 << identifier. */
enum {
    MQTT_PROP_PAYLOAD_FORMAT = 0x01,
    MQTT_PROP_MESSAGE_EXPIRY = 0x02,
    MQTT_PROP_CONTENT_TYPE = 0x03,
    MQTT_PROP_RESPONSE_TOPIC = 0x08,
    MQTT_PROP_CORRELATION_DATA = 0x09,
    MQTT_PROP_SUBSCRIPTION_ID = 0x0B,
    MQTT_PROP_SESSION_EXPIRY = 0x11,
    MQTT_PROP_ASSIGNED_CLIENT_ID = 0x12,
    MQTT_PROP_SERVER_KEEP_ALIVE = 0x13,
    MQTT_PROP_AUTH_METHOD = 0x15,
    MQTT_PROP_AUTH_DATA = 0x16,
    MQTT_PROP_REQUEST_PROBLEM_INFO = 0x17,
    MQTT_PROP_WILL_DELAY = 0x18,
    MQTT_PROP_REQUEST_RESPONSE_INFO = 0x19,
    MQTT_PROP_RESPONSE_INFO = 0x1A,
    MQTT_PROP_SERVER_REFERENCE = 0x1C,
    MQTT_PROP_REASON_STRING = 0x1F,
    MQTT_PROP_RECEIVE_MAXIMUM = 0x21,
    MQTT_PROP_TOPIC_ALIAS_MAXIMUM = 0x22,
    MQTT_PROP_TOPIC_ALIAS = 0x23,
    MQTT_PROP_MAXIMUM_QOS = 0x24,
    MQTT_PROP_RETAIN_AVAILABLE = 0x25,
    MQTT_PROP_USER = 0x26,
    MQTT_PROP_MAXIMUM_PACKET_SIZE = 0x27,
    MQTT_PROP_WILDCARD_SUB_AVAILABLE = 0x28,
    MQTT_PROP_SUB_ID_AVAILABLE = 0x29,
    MQTT_PROP_SHARED_SUB_AVAILABLE = 0x2A,
};

#define MQTT_PROP_BIT(id) (UINT64_C(1) << (id))
#define MQTT_HAS(props, id) (((props)->present & MQTT_PROP_BIT(id)) != 0)
/* Sets a single-valued property's presence bit: props.receive_maximum = 10; MQTT_SET(&props, MQTT_PROP_RECEIVE_MAXIMUM); */
#define MQTT_SET(props, id) ((props)->present |= MQTT_PROP_BIT(id))

/*
 * Every property of every packet in one struct: single-valued ones are a
 * field plus a presence bit; User Property (all packets) and Subscription
 * Identifier (PUBLISH, where it repeats) are lists. In SUBSCRIBE the one
 * Subscription Identifier is the single field subscription_id. The encoder
 * writes only what is present, and refuses (-EINVAL) a property the packet
 * type does not allow.
 */
typedef struct mqtt_props {
    uint64_t present;               /* MQTT_PROP_BIT(id) per single-valued property */
    uint32_t message_expiry;        /* 0x02 PUBLISH, will */
    uint32_t subscription_id;       /* 0x0B SUBSCRIBE */
    uint32_t session_expiry;        /* 0x11 CONNECT, CONNACK, DISCONNECT */
    uint32_t will_delay;            /* 0x18 will */
    uint32_t maximum_packet_size;   /* 0x27 CONNECT, CONNACK */
    uint16_t server_keep_alive;     /* 0x13 CONNACK */
    uint16_t receive_maximum;       /* 0x21 CONNECT, CONNACK */
    uint16_t topic_alias_maximum;   /* 0x22 CONNECT, CONNACK */
    uint16_t topic_alias;           /* 0x23 PUBLISH */
    uint8_t payload_format;         /* 0x01 PUBLISH, will */
    uint8_t request_problem_info;   /* 0x17 CONNECT */
    uint8_t request_response_info;  /* 0x19 CONNECT */
    uint8_t maximum_qos;            /* 0x24 CONNACK */
    uint8_t retain_available;       /* 0x25 CONNACK */
    uint8_t wildcard_sub_available; /* 0x28 CONNACK */
    uint8_t sub_id_available;       /* 0x29 CONNACK */
    uint8_t shared_sub_available;   /* 0x2A CONNACK */
    mqtt_bytes_t content_type;      /* 0x03 PUBLISH, will */
    mqtt_bytes_t response_topic;    /* 0x08 PUBLISH, will */
    mqtt_bytes_t correlation_data;  /* 0x09 PUBLISH, will */
    mqtt_bytes_t assigned_client_id;/* 0x12 CONNACK */
    mqtt_bytes_t auth_method;       /* 0x15 CONNECT, CONNACK, AUTH */
    mqtt_bytes_t auth_data;         /* 0x16 CONNECT, CONNACK, AUTH */
    mqtt_bytes_t response_info;     /* 0x1A CONNACK */
    mqtt_bytes_t server_reference;  /* 0x1C CONNACK, DISCONNECT */
    mqtt_bytes_t reason_string;     /* 0x1F acks, SUBACK, UNSUBACK, CONNACK, DISCONNECT, AUTH */
    mqtt_list_t user;               /* 0x26 every packet with properties, repeated */
    mqtt_list_t sub_ids;            /* 0x0B PUBLISH, repeated */
} mqtt_props_t;

/* ---- packets ------------------------------------------------------------------------ */

typedef struct mqtt_connect {
    uint8_t protocol_level;  /* 3 ("MQIsdp"), 4 or 5 ("MQTT"): decides the wire form */
    bool clean_start;        /* Clean Session in 3.1.1 */
    bool has_will, has_username, has_password;
    uint8_t will_qos;
    bool will_retain;
    uint16_t keep_alive;     /* seconds */
    mqtt_bytes_t client_id;
    mqtt_props_t will_props; /* MQTT 5 will properties */
    mqtt_bytes_t will_topic;
    mqtt_bytes_t will_payload;
    mqtt_bytes_t username;
    mqtt_bytes_t password;
} mqtt_connect_t;

typedef struct mqtt_connack {
    bool session_present;
    uint8_t reason;          /* 5: reason code; 3.1.1: return code */
} mqtt_connack_t;

typedef struct mqtt_publish {
    uint8_t qos;
    bool retain, dup;
    uint16_t packet_id;      /* 0 for QoS 0 */
    mqtt_bytes_t topic;      /* may be empty in 5 when a Topic Alias is present */
    mqtt_bytes_t payload;
} mqtt_publish_t;

/* PUBACK, PUBREC, PUBREL, PUBCOMP. */
typedef struct mqtt_ack {
    uint16_t packet_id;
    uint8_t reason;          /* always 0 in 3.1.1 */
} mqtt_ack_t;

/* SUBSCRIBE (items: filter + options) and UNSUBSCRIBE (items: filter). */
typedef struct mqtt_subscribe {
    uint16_t packet_id;
    mqtt_list_t filters;
} mqtt_subscribe_t;

/* SUBACK and UNSUBACK: one reason code per filter (3.1.1 UNSUBACK has none). */
typedef struct mqtt_suback {
    uint16_t packet_id;
    mqtt_bytes_t reasons;
} mqtt_suback_t;

/* DISCONNECT and AUTH. */
typedef struct mqtt_reason_only {
    uint8_t reason;
} mqtt_reason_only_t;

typedef struct mqtt_packet {
    mqtt_type_t type;
    uint8_t version;         /* 4 or 5: the form this packet has on the wire */
    mqtt_props_t props;      /* MQTT 5 properties of the packet (the will's are in connect) */
    union {
        mqtt_connect_t connect;
        mqtt_connack_t connack;
        mqtt_publish_t publish;
        mqtt_ack_t ack;          /* PUBACK, PUBREC, PUBREL, PUBCOMP */
        mqtt_subscribe_t sub;    /* SUBSCRIBE, UNSUBSCRIBE */
        mqtt_suback_t suback;    /* SUBACK, UNSUBACK */
        mqtt_reason_only_t disconnect; /* DISCONNECT, AUTH */
    } u;
} mqtt_packet_t;

/* Zeroes *pkt and sets its type and version (3 is taken as 4). For CONNECT
 * it also sets protocol_level to version. */
void mqtt_packet_init(mqtt_packet_t *pkt, mqtt_type_t type, uint8_t version);

/* ---- decoding -------------------------------------------------------------------------- */

/* What a decode that did not produce a packet has to say. */
typedef struct mqtt_diag {
    uint32_t need;           /* returned 0: total bytes of the packet once its
                              * fixed header is complete, else 0 */
    uint8_t reason;          /* returned < 0: MQTT 5 reason code to send */
    const char *why;         /* returned < 0: static text for the log */
} mqtt_diag_t;

/*
 * Decodes at most one packet from buf[0..len).
 *   version:  0 before CONNECT (only CONNECT is accepted, and it sets the
 *             version: use pkt->version from then on), else 3, 4 or 5.
 *   max_packet_size: the largest whole packet accepted (fixed header
 *             included, as MQTT 5's Maximum Packet Size); 0 = protocol limit.
 * Returns:
 *   > 0  bytes of buf used by the packet now in *pkt (views into buf);
 *   0    need more bytes (diag->need says how many in all, once known);
 *   < 0  the connection must be closed: TB_EMALFORMED (reason 0x81),
 *        TB_EFULL (0x95, too large), TB_EUNSUPPORTED (0x84) or TB_EPROTO
 *        (0x82 and the other reason codes); diag->reason and diag->why say
 *        what to send and log. *pkt is unspecified after 0 or < 0.
 */
int mqtt_decode(const uint8_t *buf, size_t len, uint8_t version, uint32_t max_packet_size,
                mqtt_packet_t *pkt /* OUT */, mqtt_diag_t *diag /* OUT */);

/* ---- encoding ---------------------------------------------------------------------------- */

/*
 * mqtt_encoded_size: exact bytes mqtt_encode will write, or -EINVAL when the
 * packet cannot be put on the wire in its version (a string over 65535
 * bytes, a property or reason code the packet type does not allow, AUTH or a
 * non-success ack in 3.1.1, QoS 3, packet id 0 where one is required, an
 * empty filter list, a packet over MQTT_MAX_PACKET).
 * mqtt_encode: writes the packet into buf; returns the bytes written,
 * TB_EFULL if cap is too small (buf untouched), or -EINVAL as above.
 * Encoding a decoded packet and decoding the result gives an equal packet
 * (mqtt_packet_equal); properties come out in identifier order, followed by
 * the lists, and acks in their shortest form.
 */
int mqtt_encoded_size(const mqtt_packet_t *pkt);
int mqtt_encode(const mqtt_packet_t *pkt, uint8_t *buf, size_t cap);

/* One-call encoders for what a server sends. props may be NULL; they are
 * ignored for 3.1.1. Return bytes written, TB_EFULL or -EINVAL. */
int mqtt_encode_connack(uint8_t *buf, size_t cap, uint8_t version, bool session_present,
                        uint8_t reason, const mqtt_props_t *props);
/* type: MQTT_PUBACK, MQTT_PUBREC, MQTT_PUBREL or MQTT_PUBCOMP. 3.1.1 accepts
 * only reason 0 (it has no way to say "refused"). */
int mqtt_encode_ack(uint8_t *buf, size_t cap, uint8_t version, mqtt_type_t type,
                    uint16_t packet_id, uint8_t reason, const mqtt_props_t *props);
/* type: MQTT_SUBACK or MQTT_UNSUBACK (3.1.1 UNSUBACK carries no codes: pass n = 0). */
int mqtt_encode_suback(uint8_t *buf, size_t cap, uint8_t version, mqtt_type_t type,
                       uint16_t packet_id, const uint8_t *reasons, uint32_t n,
                       const mqtt_props_t *props);
int mqtt_encode_disconnect(uint8_t *buf, size_t cap, uint8_t version, uint8_t reason,
                           const mqtt_props_t *props);
int mqtt_encode_pingresp(uint8_t *buf, size_t cap);

/* ---- helpers ------------------------------------------------------------------------------ */

/* Semantic equality: same fields, same views' contents, same list items in
 * order (regardless of where they sit in memory or how they were framed). */
bool mqtt_packet_equal(const mqtt_packet_t *a, const mqtt_packet_t *b);
bool mqtt_props_equal(const mqtt_props_t *a, const mqtt_props_t *b);

/* Topic Filter syntax ([MQTT-4.7.1-2], [MQTT-4.7.1-3], [MQTT-4.7.3-1],
 * shared subscriptions in 5 "$share/{name}/{filter}"): the codec leaves it
 * to the session so that MQTT 5 can answer one bad filter with SUBACK 0x8F. */
bool mqtt_topic_filter_valid(mqtt_bytes_t filter, uint8_t version);
/* True for "$share/..." (MQTT 5 shared subscription). */
bool mqtt_topic_filter_is_shared(mqtt_bytes_t filter);

#endif
