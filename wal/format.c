/*
 * format.c: encoding and validating the bytes described in wal_format.h.
 *
 * Everything that turns structures into on-disk bytes and back is here, so
 * the validity rule exists once: recovery, readers, wal_check and the fuzz
 * target all call wal__rec_decode(), which takes the segment's version
 * because the rule differs in one bit (padding, version 2). Decoding never
 * trusts a length before bounding it by what is available and by
 * WAL_RECORD_MAX.
 */
#include "wal/wal_int.h"

#include <stdlib.h>

/* ---- segment header ------------------------------------------------------ */

void wal__seghdr_encode(uint8_t out[WAL_SEG_HDR_SIZE], const wal_seghdr_t *h)
{
    memcpy(out, WAL_SEG_MAGIC, 4);
    wal__st16(out + 4, WAL_FORMAT_VERSION);
    wal__st16(out + 6, WAL_SEG_HDR_SIZE);
    wal__st64(out + 8, h->base);
    wal__st64(out + 16, h->created_ms);
    wal__st32(out + 24, h->salt);
    wal__st32(out + 28, wal__crc32c(0, out, 28));
}

int wal__seghdr_decode(const uint8_t in[WAL_SEG_HDR_SIZE], wal_seghdr_t *h)
{
    memset(h, 0, sizeof *h);
    if (memcmp(in, WAL_SEG_MAGIC, 4) != 0)
        return TB_ECORRUPT;
    if (wal__ld32(in + 28) != wal__crc32c(0, in, 28))
        return TB_ECORRUPT;
    uint16_t version = wal__ld16(in + 4);
    if (version < WAL_FORMAT_MIN_VERSION || version > WAL_FORMAT_VERSION)
        return TB_EUNSUPPORTED;
    if (wal__ld16(in + 6) != WAL_SEG_HDR_SIZE)
        return TB_ECORRUPT;
    h->version = version;
    h->base = wal__ld64(in + 8);
    h->created_ms = wal__ld64(in + 16);
    h->salt = wal__ld32(in + 24);
    h->seed = wal__crc32c(0, in + 24, 4);
    return 0;
}

/* ---- records ------------------------------------------------------------- */

size_t wal__rec_size(const wal_msg_t *m)
{
    if (m->qos > 2 || m->nattrs > 255 || m->mqtt_topic_len > 0xFFFF)
        return 0;
    if (m->nattrs > 0 && !m->attrs)
        return 0;
    uint64_t n = WAL_REC_HEAD + (m->has_schema ? WAL_REC_SCHEMA : 0) + m->mqtt_topic_len;
    for (size_t i = 0; i < m->nattrs; i++) {
        if (m->attrs[i].key_len > 0xFFFF || m->attrs[i].val_len > 0xFFFF)
            return 0;
        n += WAL_REC_ATTR_HEAD + m->attrs[i].key_len + m->attrs[i].val_len;
    }
    n += m->payload_len;
    if (n > WAL_RECORD_MAX)
        return 0;
    return (size_t)n;
}

static uint8_t *put(uint8_t *p, const void *src, size_t n)
{
    if (n)
        memcpy(p, src, n);
    return p + n;
}

void wal__rec_encode(uint8_t *out, const wal_msg_t *m, size_t size)
{
    wal__st32(out, (uint32_t)size);
    wal__st32(out + 4, 0);
    wal__st64(out + 8, 0);
    wal__st64(out + 16, m->publish_time_ms);
    out[24] = (uint8_t)((m->qos & WAL_FLAG_QOS_MASK) | (m->retain ? WAL_FLAG_RETAIN : 0) |
                        (m->has_schema ? WAL_FLAG_SCHEMA : 0));
    out[25] = (uint8_t)m->nattrs;
    wal__st16(out + 26, (uint16_t)m->mqtt_topic_len);
    uint8_t *p = out + WAL_REC_HEAD;
    if (m->has_schema) {
        wal__st64(p, m->schema_id);
        wal__st32(p + 8, m->schema_version);
        p += WAL_REC_SCHEMA;
    }
    for (size_t i = 0; i < m->nattrs; i++) {
        wal__st16(p, (uint16_t)m->attrs[i].key_len);
        wal__st16(p + 2, (uint16_t)m->attrs[i].val_len);
        p = put(p + 4, m->attrs[i].key, m->attrs[i].key_len);
        p = put(p, m->attrs[i].val, m->attrs[i].val_len);
    }
    p = put(p, m->mqtt_topic, m->mqtt_topic_len);
    put(p, m->payload, m->payload_len);
}

void wal__rec_seal(uint8_t *rec, uint64_t offset, uint32_t seed)
{
    uint32_t len = wal__ld32(rec);
    wal__st64(rec + 8, offset);
    wal__st32(rec + 4, wal__crc32c(seed, rec + 8, len - 8));
}

void wal__pad_encode(uint8_t *out, uint32_t len, uint64_t next_offset, uint32_t seed)
{
    memset(out, 0, len);
    wal__st32(out, len);
    out[24] = WAL_FLAG_PAD;
    wal__rec_seal(out, next_offset, seed);
}

static int parse(const uint8_t *p, uint32_t len, unsigned version, uint64_t expect_offset, wal_rec_t *r);

int wal__rec_decode(const uint8_t *p, size_t avail, uint64_t file_left, uint32_t seed, unsigned version,
                    uint64_t expect_offset, wal_rec_t *r)
{
    if (avail < WAL_REC_HEAD)
        return file_left >= WAL_REC_HEAD ? WAL_REC_SHORT : WAL_REC_BAD;
    uint32_t len = wal__ld32(p);
    if (len < WAL_REC_HEAD || len > WAL_RECORD_MAX || len > file_left)
        return WAL_REC_BAD;
    if (len > avail)
        return WAL_REC_SHORT;
    if (wal__ld64(p + 8) != expect_offset)
        return WAL_REC_BAD;
    if (wal__ld32(p + 4) != wal__crc32c(seed, p + 8, len - 8))
        return WAL_REC_BAD;
    return parse(p, len, version, expect_offset, r);
}

int wal__rec_parse(const uint8_t *p, uint32_t len, uint64_t offset, wal_rec_t *r)
{
    if (len < WAL_REC_HEAD || len > WAL_RECORD_MAX || wal__ld32(p) != len || wal__ld64(p + 8) != offset)
        return WAL_REC_BAD;
    return parse(p, len, WAL_FORMAT_VERSION, offset, r);
}

/* The checks and the layout after the length, offset and CRC were checked. */
static int parse(const uint8_t *p, uint32_t len, unsigned version, uint64_t expect_offset, wal_rec_t *r)
{
    uint8_t flags = p[24];
    if (version >= 2 && (flags & WAL_FLAG_PAD)) {
        if (flags != WAL_FLAG_PAD || p[25] != 0 || wal__ld16(p + 26) != 0 || len > WAL_PAD_MAX)
            return WAL_REC_BAD;
        memset(r, 0, sizeof *r);
        r->len = len;
        r->offset = expect_offset;
        r->flags = flags;
        return WAL_REC_PAD;
    }
    if ((flags & (version >= 2 ? WAL_FLAG_RESERVED : WAL_FLAG_RESERVED_V1)) || (flags & WAL_FLAG_QOS_MASK) > 2)
        return WAL_REC_BAD;

    memset(r, 0, sizeof *r);
    r->len = len;
    r->offset = expect_offset;
    r->time_ms = wal__ld64(p + 16);
    r->flags = flags;
    r->nattr = p[25];
    r->topic_len = wal__ld16(p + 26);
    uint32_t pos = WAL_REC_HEAD;
    if (flags & WAL_FLAG_SCHEMA) {
        if (len - pos < WAL_REC_SCHEMA)
            return WAL_REC_BAD;
        r->schema_id = wal__ld64(p + pos);
        r->schema_version = wal__ld32(p + pos + 8);
        pos += WAL_REC_SCHEMA;
    }
    r->attrs = p + pos;
    for (unsigned i = 0; i < r->nattr; i++) {
        if (len - pos < WAL_REC_ATTR_HEAD)
            return WAL_REC_BAD;
        uint32_t kv = (uint32_t)wal__ld16(p + pos) + wal__ld16(p + pos + 2);
        pos += WAL_REC_ATTR_HEAD;
        if (len - pos < kv)
            return WAL_REC_BAD;
        pos += kv;
    }
    r->attrs_len = (uint32_t)(p + pos - r->attrs);
    if (len - pos < r->topic_len)
        return WAL_REC_BAD;
    r->topic = p + pos;
    pos += r->topic_len;
    r->payload = p + pos;
    r->payload_len = len - pos;
    return WAL_REC_OK;
}

void wal__rec_view(const wal_rec_t *rec, const uint8_t *raw, wal_record_t *out)
{
    out->offset = rec->offset;
    out->publish_time_ms = rec->time_ms;
    out->qos = rec->flags & WAL_FLAG_QOS_MASK;
    out->retain = (rec->flags & WAL_FLAG_RETAIN) != 0;
    out->has_schema = (rec->flags & WAL_FLAG_SCHEMA) != 0;
    out->schema_id = rec->schema_id;
    out->schema_version = rec->schema_version;
    out->payload = rec->payload;
    out->payload_len = rec->payload_len;
    out->mqtt_topic = (const char *)rec->topic;
    out->mqtt_topic_len = rec->topic_len;
    out->nattrs = rec->nattr;
    out->attrs_raw = rec->attrs;
    out->attrs_raw_len = rec->attrs_len;
    out->raw = raw;
    out->raw_len = rec->len;
}

bool wal_record_attr_next(const wal_record_t *r, size_t *pos, wal_attr_t *out)
{
    if (*pos + WAL_REC_ATTR_HEAD > r->attrs_raw_len)
        return false;
    const uint8_t *p = r->attrs_raw + *pos;
    out->key_len = wal__ld16(p);
    out->val_len = wal__ld16(p + 2);
    out->key = p + WAL_REC_ATTR_HEAD;
    out->val = out->key + out->key_len;
    *pos += WAL_REC_ATTR_HEAD + out->key_len + out->val_len;
    return true;
}

/* ---- meta ------------------------------------------------------------------ */

unsigned wal__meta_version(const wal_meta_t *m)
{
    if (m->nslots > 0)
        return 3u;
    return m->reserved == 0 && m->dropped_age == 0 ? 1u : 2u;
}

size_t wal__meta_encode(uint8_t out[WAL_META_MAX], const wal_meta_t *m)
{
    unsigned version = wal__meta_version(m);
    size_t n = TB_MIN(m->nslots, WAL_MAX_CURSORS);
    size_t size = version == 1 ? WAL_META_V1_SIZE : version == 2 ? WAL_META_V2_SIZE : WAL_META_V3_SIZE(n);
    memset(out, 0, size);
    memcpy(out, WAL_META_MAGIC, 4);
    wal__st16(out + 4, (uint16_t)version);
    wal__st16(out + 6, (uint16_t)size);
    wal__st64(out + 8, m->floor);
    wal__st64(out + 16, m->checkpoint);
    wal__st64(out + 24, m->dropped);
    wal__st64(out + 32, m->quarantined);
    wal__st64(out + 40, m->lost);
    if (version >= 2) {
        wal__st64(out + 48, m->reserved);
        wal__st64(out + 56, m->dropped_age);
    }
    if (version == 3) {
        wal__st16(out + 64, (uint16_t)n);
        for (size_t i = 0; i < n; i++) {
            uint8_t *p = out + WAL_META_V3_HEAD + WAL_META_SLOT_SIZE * i;
            const wal_meta_slot_t *sl = &m->slots[i];
            wal__st16(p, sl->id);
            wal__st16(p + 2, sl->flags);
            wal__st64(p + 8, sl->checkpoint);
            wal__st64(p + 16, sl->dropped);
            wal__st64(p + 24, sl->dropped_age);
        }
    }
    wal__st32(out + size - 4, wal__crc32c(0, out, size - 4));
    return size;
}

int wal__meta_decode(const uint8_t *in, size_t n, wal_meta_t *m, unsigned *version)
{
    memset(m, 0, sizeof *m);
    if (version)
        *version = 0;
    /* the framing every version shares first, so that an unknown version is
     * told apart from damage: magic, size = the file's length, crc last */
    if (n < 12 || n > WAL_META_READ_MAX || memcmp(in, WAL_META_MAGIC, 4) != 0 || wal__ld16(in + 6) != n ||
        wal__ld32(in + n - 4) != wal__crc32c(0, in, n - 4))
        return TB_ECORRUPT;
    uint16_t v = wal__ld16(in + 4);
    if (v < 1 || v > WAL_META_VERSION)
        return TB_EUNSUPPORTED;
    size_t nslots = 0;
    if (v == 3) {
        if (n < WAL_META_V3_SIZE(0))
            return TB_ECORRUPT;
        nslots = wal__ld16(in + 64);
        if (nslots > WAL_MAX_CURSORS || n != WAL_META_V3_SIZE(nslots))
            return TB_ECORRUPT;
    } else if (n != (v == 1 ? WAL_META_V1_SIZE : WAL_META_V2_SIZE)) {
        return TB_ECORRUPT;
    }
    wal_meta_t *d = tb_calloc(1, sizeof *d);
    d->floor = wal__ld64(in + 8);
    d->checkpoint = wal__ld64(in + 16);
    d->dropped = wal__ld64(in + 24);
    d->quarantined = wal__ld64(in + 32);
    d->lost = wal__ld64(in + 40);
    if (v >= 2) {
        d->reserved = wal__ld64(in + 48);
        d->dropped_age = wal__ld64(in + 56);
    }
    int rc = 0;
    if (d->floor > WAL_OFFSET_MAX || d->checkpoint > WAL_OFFSET_MAX || d->reserved > WAL_OFFSET_MAX)
        rc = TB_ECORRUPT;
    d->nslots = (uint16_t)nslots;
    for (size_t i = 0; i < nslots && rc == 0; i++) {
        const uint8_t *p = in + WAL_META_V3_HEAD + WAL_META_SLOT_SIZE * i;
        wal_meta_slot_t *sl = &d->slots[i];
        sl->id = wal__ld16(p);
        sl->flags = wal__ld16(p + 2);
        sl->checkpoint = wal__ld64(p + 8);
        sl->dropped = wal__ld64(p + 16);
        sl->dropped_age = wal__ld64(p + 24);
        if (sl->checkpoint > WAL_OFFSET_MAX)
            rc = TB_ECORRUPT;
        for (size_t j = 0; j < i && rc == 0; j++)
            if (d->slots[j].id == sl->id)
                rc = TB_ECORRUPT; /* one slot per output */
    }
    if (rc == 0) {
        *m = *d;
        if (version)
            *version = v;
    }
    free(d);
    return rc;
}
