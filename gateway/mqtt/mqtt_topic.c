/*
 * mqtt_topic.c: Topic Filter syntax, for the session layer.
 *
 * The decoder accepts any UTF-8 filter in SUBSCRIBE/UNSUBSCRIBE because in
 * MQTT 5 a bad filter is answered per filter (SUBACK 0x8F) and must not
 * close the connection; the session calls these to decide that answer
 * (3.1.1 answers 0x80 for the filter). Topic Names (no wildcards at all) are
 * checked by the decoder itself, in mqtt_int.h.
 */
#include "gateway/mqtt/mqtt_int.h"

#define SHARE_PREFIX "$share/"
#define SHARE_PREFIX_LEN 7

bool mqtt_topic_filter_is_shared(mqtt_bytes_t f)
{
    return f.n >= SHARE_PREFIX_LEN && memcmp(f.p, SHARE_PREFIX, SHARE_PREFIX_LEN) == 0;
}

/* Wildcards: '+' fills a whole level [MQTT-4.7.1-3]; '#' fills the last
 * level, alone or after a '/' [MQTT-4.7.1-2]. */
static bool levels_valid(const uint8_t *p, uint32_t n)
{
    if (n == 0) /* [MQTT-4.7.3-1] */
        return false;
    for (uint32_t i = 0; i < n; i++) {
        uint8_t c = p[i];
        if (c != '+' && c != '#')
            continue;
        bool starts_level = i == 0 || p[i - 1] == '/';
        bool ends_level = i + 1 == n || p[i + 1] == '/';
        if (!starts_level || !ends_level)
            return false;
        if (c == '#' && i + 1 != n)
            return false;
    }
    return true;
}

bool mqtt_topic_filter_valid(mqtt_bytes_t f, uint8_t version)
{
    if (!mqtt__utf8_ok(f.p, f.n))
        return false;
    if (version != MQTT_V5 || !mqtt_topic_filter_is_shared(f))
        return levels_valid(f.p, f.n);
    /* "$share/{ShareName}/{filter}": ShareName is at least one character
     * without '/', '+' or '#' [MQTT-4.8.2-1], [MQTT-4.8.2-2]. */
    const uint8_t *name = f.p + SHARE_PREFIX_LEN;
    uint32_t left = f.n - SHARE_PREFIX_LEN;
    const uint8_t *slash = memchr(name, '/', left);
    if (!slash || slash == name)
        return false;
    uint32_t name_n = (uint32_t)(slash - name);
    if (memchr(name, '+', name_n) || memchr(name, '#', name_n))
        return false;
    return levels_valid(slash + 1, left - name_n - 1);
}
