/*
 * mqtt_list.c: the repeated regions of a packet, walked without allocating:
 * SUBSCRIBE/UNSUBSCRIBE filter lists (iterators) and the builders that make
 * a region for the encoder (filters, User Properties, Subscription
 * Identifiers).
 *
 * The decoder validated a region before handing it out, so the iterators
 * only need to be safe, not to report errors: on anything that does not
 * parse they stop. The builders write the exact wire form the decoder
 * produces, so a built list and a decoded one are the same kind of thing.
 */
#include "gateway/mqtt/mqtt_int.h"

bool mqtt_next_sub(mqtt_iter_t *it, mqtt_bytes_t *filter, uint8_t *options)
{
    if (!it->p)
        return false;
    mqtt__rd_t r = { it->p, it->end };
    if (!mqtt__get_bin(&r, filter) || !mqtt__get_u8(&r, options))
        return false;
    it->p = r.p;
    return true;
}

bool mqtt_next_unsub(mqtt_iter_t *it, mqtt_bytes_t *filter)
{
    if (!it->p)
        return false;
    mqtt__rd_t r = { it->p, it->end };
    if (!mqtt__get_bin(&r, filter))
        return false;
    it->p = r.p;
    return true;
}

/* Appends the item that w wrote in counting mode, if it fits. */
static int append(mqtt_list_t *list, uint8_t *buf, size_t cap, size_t *off,
                  void (*put)(mqtt__wr_t *, const void *), const void *arg)
{
    mqtt__wr_t count = { NULL, 0, 0 };
    put(&count, arg);
    if (count.err)
        return count.err;
    if (*off > cap || cap - *off < count.n)
        return TB_EFULL;
    mqtt__wr_t w = { buf + *off, 0, 0 };
    put(&w, arg);
    *off += w.n;
    list->raw = (mqtt_bytes_t){ buf, (uint32_t)*off };
    list->count++;
    return 0;
}

typedef struct item {
    mqtt_bytes_t a, b;
    uint32_t num;
    uint8_t byte;
} item_t;

static void put_user(mqtt__wr_t *w, const void *arg)
{
    const item_t *i = arg;
    mqtt__put_u8(w, MQTT_PROP_USER);
    mqtt__put_bin(w, i->a);
    mqtt__put_bin(w, i->b);
}

static void put_sub_id(mqtt__wr_t *w, const void *arg)
{
    const item_t *i = arg;
    if (i->num == 0)
        w->err = -EINVAL;
    mqtt__put_u8(w, MQTT_PROP_SUBSCRIPTION_ID);
    mqtt__put_varint(w, i->num);
}

static void put_sub(mqtt__wr_t *w, const void *arg)
{
    const item_t *i = arg;
    mqtt__put_bin(w, i->a);
    mqtt__put_u8(w, i->byte);
}

static void put_unsub(mqtt__wr_t *w, const void *arg)
{
    const item_t *i = arg;
    mqtt__put_bin(w, i->a);
}

int mqtt_put_user_prop(mqtt_list_t *list, uint8_t *buf, size_t cap, size_t *off,
                       mqtt_bytes_t key, mqtt_bytes_t val)
{
    item_t i = { .a = key, .b = val };
    return append(list, buf, cap, off, put_user, &i);
}

int mqtt_put_sub_id(mqtt_list_t *list, uint8_t *buf, size_t cap, size_t *off, uint32_t id)
{
    item_t i = { .num = id };
    return append(list, buf, cap, off, put_sub_id, &i);
}

int mqtt_put_sub(mqtt_list_t *list, uint8_t *buf, size_t cap, size_t *off,
                 mqtt_bytes_t filter, uint8_t options)
{
    item_t i = { .a = filter, .byte = options };
    return append(list, buf, cap, off, put_sub, &i);
}

int mqtt_put_unsub(mqtt_list_t *list, uint8_t *buf, size_t cap, size_t *off, mqtt_bytes_t filter)
{
    item_t i = { .a = filter };
    return append(list, buf, cap, off, put_unsub, &i);
}
