/* The CPU-heavy test ROM: a sort/checksum workload over WRAM (README "The CPU-heavy ROM").
 *
 * A pass runs CPU_HEAVY_ROUNDS rounds. Each round fills CPU_HEAVY_WORDS 16-bit words in WRAM
 * from a xorshift16 generator (x ^= x << 7; x ^= x >> 9; x ^= x << 8; seeded with 1 at the
 * start of every pass), sorts them ascending (insertion sort, ROM bank 1) and feeds the sorted
 * words, low byte first, to a CRC-16/CCITT (polynomial 0x1021, table driven, ROM bank 2) that
 * runs on across the rounds from 0xFFFF. Bank 0 switches MBC1 banks around each call.
 *
 * Results at fixed WRAM addresses (the tests read them; every pass computes the same CRC):
 *   C000 0xA5 once the first pass has finished
 *   C001 C002  CRC of the pass, low byte first
 *   C003 C004  finished passes (wraps at 65536), low byte first
 *   C005 0x01 if a later pass got a different CRC from the first (never, on a correct CPU)
 * Nothing goes over serial: a loop polling SC for the end of a transfer ends a few cycles
 * apart on GBX and mGBA 0.10, and `gbx-run verify` against mGBA should compare the workload.
 */
#ifndef CPU_HEAVY_H
#define CPU_HEAVY_H

#include <stdint.h>

#define CPU_HEAVY_WORDS 64
#define CPU_HEAVY_ROUNDS 3

/* ROM bank 1 */
void sort_words(uint16_t* words, uint8_t count);
/* ROM bank 2 */
uint16_t crc16_words(uint16_t crc, const uint16_t* words, uint8_t count);

#endif
