/* Bank 0: the pass loop, the generator, and the bank switching around the banked calls. */
#include "cpu_heavy.h"

/* MBC1: a write to 2000-3FFF selects the ROM bank mapped at 4000-7FFF. */
#define SELECT_ROM_BANK(n) (*(volatile uint8_t*)0x2000 = (n))

volatile __at(0xC000) uint8_t result_ready;
volatile __at(0xC001) uint16_t result_crc;
volatile __at(0xC003) uint16_t result_passes;
volatile __at(0xC005) uint8_t result_mismatch;

static uint16_t words[CPU_HEAVY_WORDS];
static uint16_t state;

static uint16_t next_random(void) {
  state ^= state << 7;
  state ^= state >> 9;
  state ^= state << 8;
  return state;
}

static uint16_t run_pass(void) {
  uint16_t crc = 0xFFFF;
  state = 1;
  for (uint8_t round = 0; round < CPU_HEAVY_ROUNDS; ++round) {
    for (uint8_t i = 0; i < CPU_HEAVY_WORDS; ++i) words[i] = next_random();
    SELECT_ROM_BANK(1);
    sort_words(words, CPU_HEAVY_WORDS);
    SELECT_ROM_BANK(2);
    crc = crc16_words(crc, words, CPU_HEAVY_WORDS);
  }
  SELECT_ROM_BANK(1);
  return crc;
}

void main(void) {
  result_ready = 0;
  result_mismatch = 0;
  result_passes = 0;
  const uint16_t first = run_pass();
  result_crc = first;
  result_passes = 1;
  result_ready = 0xA5;
  for (;;) {
    if (run_pass() != first) result_mismatch = 1;
    ++result_passes;
  }
}
