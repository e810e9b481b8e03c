/* The game-shaped test ROM (README "Test ROMs"): what a game does every frame, compiled by
 * sdcc, for the differential tests of the specialized kernels.
 *
 * MBC5 + RAM + battery, 128 KiB. Start-up: the OAM DMA routine is copied to HRAM (FF80), the
 * LCD is switched off in VBlank, tiles and the BG map are written, the player object is put
 * in the shadow OAM (C800), the LCD goes back on, and the VBlank and timer interrupts (TAC =
 * 05, TMA = C0: every 1024 T) are enabled. Every frame the main loop sleeps in HALT until the
 * VBlank handler (C, through 0x0040) has read the joypad and run the DMA routine, then moves
 * the player one pixel per held direction, runs the enemies through a table of function
 * pointers and a switch (a jump table), and calls a routine in ROM bank 5 (MBC5 bank switch)
 * that folds the frame into a 32-bit checksum with long multiplication (sdcc's library).
 * Every 16th frame it writes the checksum's low byte to cartridge RAM (bank frame / 16 % 4).
 *
 * Results in WRAM (little-endian):
 *   C000 0xA5 once start-up is done
 *   C001 C002  frames the main loop has run
 *   C003 C004  timer interrupts
 *   C005 C006  player X, Y (object coordinates; start 0x50, 0x48)
 *   C007-C00A  checksum
 *   C00B       joypad byte of the last VBlank (bit 0 Right .. 3 Down, 4 A .. 7 Start)
 */
#ifndef GAME_LOOP_H
#define GAME_LOOP_H

#include <stdint.h>

#define GAME_ENEMIES 6

/* ROM bank 5 */
uint32_t fold_frame(uint32_t sum, const uint8_t* enemies, uint8_t count, uint16_t frame);

#endif
