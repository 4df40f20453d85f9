/*
 * test_mqtt_codec_reason.c: reason-code names for logs, 3.1.1 CONNACK
 * return codes, and the per-packet tables.
 */
#include "helper_mqtt_codec.h"

#include <criterion/criterion.h>

Test(mqtt_reason, names_follow_the_spec_table)
{
    cr_assert_str_eq(mqtt_reason_name(0x81), "Malformed Packet");
    cr_assert_str_eq(mqtt_reason_name(0x95), "Packet too large");
    cr_assert_str_eq(mqtt_reason_name(0xA2), "Wildcard Subscriptions not supported");
}

Test(mqtt_reason, unknown_code_has_a_name_too)
{
    cr_assert_str_eq(mqtt_reason_name(0x05), "Unknown reason code");
}

Test(mqtt_reason, v311_connack_names)
{
    cr_assert_str_eq(mqtt_connack_v311_name(2), "Connection Refused, identifier rejected");
    cr_assert_str_eq(mqtt_connack_v311_name(9), "Reserved return code");
}

Test(mqtt_reason, v5_connack_reasons_map_to_311_return_codes)
{
    cr_assert_eq(mqtt_connack_v311_from_reason(MQTT_RC_UNSUPPORTED_PROTOCOL_VERSION), 1);
    cr_assert_eq(mqtt_connack_v311_from_reason(MQTT_RC_CLIENT_IDENTIFIER_NOT_VALID), 2);
    cr_assert_eq(mqtt_connack_v311_from_reason(MQTT_RC_SERVER_BUSY), 3);
    cr_assert_eq(mqtt_connack_v311_from_reason(MQTT_RC_BAD_USER_NAME_OR_PASSWORD), 4);
    cr_assert_eq(mqtt_connack_v311_from_reason(MQTT_RC_BANNED), 5);
}

Test(mqtt_reason, allowed_codes_depend_on_packet_and_version)
{
    cr_assert(mqtt_reason_allowed(MQTT_PUBACK, MQTT_V5, MQTT_RC_NO_MATCHING_SUBSCRIBERS));
    cr_assert_not(mqtt_reason_allowed(MQTT_PUBCOMP, MQTT_V5, MQTT_RC_NO_MATCHING_SUBSCRIBERS));
    cr_assert(mqtt_reason_allowed(MQTT_SUBACK, MQTT_V311, 0x80));
    cr_assert_not(mqtt_reason_allowed(MQTT_SUBACK, MQTT_V311, 0x87));
    cr_assert_not(mqtt_reason_allowed(MQTT_PUBACK, MQTT_V311, 0x80));
}

Test(mqtt_reason, type_names)
{
    cr_assert_str_eq(mqtt_type_name(MQTT_PUBLISH), "PUBLISH");
    cr_assert_str_eq(mqtt_type_name(MQTT_AUTH), "AUTH");
    cr_assert_str_eq(mqtt_type_name(99), "?");
}
