/* ROM bank 5: the per-frame checksum (32-bit arithmetic through sdcc's library). */
#include "game_loop.h"

uint32_t fold_frame(uint32_t sum, const uint8_t* enemies, uint8_t count, uint16_t frame) {
  for (uint8_t i = 0; i < count; ++i) sum = sum * 31u + enemies[i];
  return sum ^ ((uint32_t)frame << 11);
}
