/* test_crc32c.c: CRC32C gives the standard values on every path. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "wal/wal_format.h"

Test(crc32c, standard_check_value)
{
    cr_assert_eq(wal__crc32c(0, "123456789", 9), 0xE3069283u);
}

Test(crc32c, rfc3720_test_vectors)
{
    uint8_t buf[32];
    memset(buf, 0, sizeof buf);
    cr_assert_eq(wal__crc32c(0, buf, 32), 0x8A9136AAu);
    memset(buf, 0xFF, sizeof buf);
    cr_assert_eq(wal__crc32c(0, buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)i;
    cr_assert_eq(wal__crc32c(0, buf, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)(31 - i);
    cr_assert_eq(wal__crc32c(0, buf, 32), 0x113FDB5Cu);
}

Test(crc32c, extending_equals_whole)
{
    const char *s = "the quick brown fox jumps over the lazy dog";
    size_t n = strlen(s);
    for (size_t cut = 0; cut <= n; cut++)
        cr_assert_eq(wal__crc32c(wal__crc32c(0, s, cut), s + cut, n - cut), wal__crc32c(0, s, n));
}

Test(crc32c, hardware_path_matches_table_on_unaligned_random_data)
{
    uint8_t buf[2100];
    srand(7);
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)rand();
    for (size_t start = 0; start < 9; start++)
        for (size_t len = 0; len + start <= sizeof buf; len += 97)
            cr_assert_eq(wal__crc32c(0x1234, buf + start, len), wal__crc32c_sw(0x1234, buf + start, len),
                         "start %zu len %zu (%s)", start, len, wal__crc32c_impl());
}
