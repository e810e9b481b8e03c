/* ROM bank 2: CRC-16/CCITT (polynomial 0x1021, no reflection), with its table built once in
 * WRAM by the bit-by-bit definition. */
#include "cpu_heavy.h"

static uint16_t table[256];
static uint8_t table_ready;

static uint16_t crc_of_byte(uint8_t b) {
  uint16_t c = (uint16_t)b << 8;
  for (uint8_t k = 0; k < 8; ++k) c = (c & 0x8000) ? (uint16_t)(c << 1) ^ 0x1021 : (uint16_t)(c << 1);
  return c;
}

static uint16_t crc_byte(uint16_t crc, uint8_t b) {
  return (uint16_t)(crc << 8) ^ table[(uint8_t)(crc >> 8) ^ b];
}

uint16_t crc16_words(uint16_t crc, const uint16_t* words, uint8_t count) {
  if (!table_ready) {
    for (uint16_t i = 0; i < 256; ++i) table[i] = crc_of_byte((uint8_t)i);
    table_ready = 1;
  }
  for (uint8_t i = 0; i < count; ++i) {
    crc = crc_byte(crc, (uint8_t)words[i]);
    crc = crc_byte(crc, (uint8_t)(words[i] >> 8));
  }
  return crc;
}
