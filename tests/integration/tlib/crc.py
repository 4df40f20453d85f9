"""crc.py: CRC32C (Castagnoli, reflected, as wal/ and its formats use it), bit
by bit: the tests and the golden-file scripts that write a WAL file from
wal/wal_format.h's text alone check it with this, not with wal/'s code."""


def crc32c(b, crc=0):
    crc ^= 0xffffffff
    for x in b:
        crc ^= x
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xffffffff
