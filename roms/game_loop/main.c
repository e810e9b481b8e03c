/* Bank 0: start-up, the interrupt handlers and the frame loop (game_loop.h). */
#include <string.h>

#include "game_loop.h"

#define REG(a) (*(volatile uint8_t*)(a))
#define P1 REG(0xFF00)
#define IF REG(0xFF0F)
#define IE REG(0xFFFF)
#define TMA REG(0xFF06)
#define TAC REG(0xFF07)
#define LCDC REG(0xFF40)
#define SCX REG(0xFF43)
#define LY REG(0xFF44)
#define BGP REG(0xFF47)
#define OBP0 REG(0xFF48)
#define MBC5_RAM_ENABLE REG(0x0000)
#define MBC5_ROM_BANK REG(0x2000)
#define MBC5_RAM_BANK REG(0x4000)

volatile __at(0xC000) uint8_t result_ready;
volatile __at(0xC001) uint16_t result_frames;
volatile __at(0xC003) uint16_t result_timers;
volatile __at(0xC005) uint8_t result_x;
volatile __at(0xC006) uint8_t result_y;
volatile __at(0xC007) uint32_t result_sum;
volatile __at(0xC00B) uint8_t result_pad;
__at(0xC800) uint8_t shadow_oam[160];

static volatile uint8_t vblank_seen;
static uint8_t enemies[GAME_ENEMIES];

/* LD A,0xC8; LDH (0x46),A; LD A,40; loop: DEC A; JR NZ,loop; RET: runs from HRAM while the
 * DMA owns the other buses. */
static const uint8_t dma_routine[] = {0x3E, 0xC8, 0xE0, 0x46, 0x3E, 0x28, 0x3D, 0x20, 0xFD, 0xC9};

static uint8_t read_pad(void) {
  P1 = 0x20; /* directions */
  uint8_t d = P1;
  d = P1;
  P1 = 0x10; /* buttons */
  uint8_t b = P1;
  b = P1;
  b = P1;
  P1 = 0x30;
  return (uint8_t)~((d & 0x0F) | (uint8_t)(b << 4));
}

void vblank_isr(void) {
  result_pad = read_pad();
  ((void (*)(void))0xFF80)();
  vblank_seen = 1;
}

void timer_isr(void) { ++result_timers; }

static uint8_t walk(uint8_t e) { return e + 1; }
static uint8_t bounce(uint8_t e) { return (e & 0x80) ? e - 3 : e + 5; }
static uint8_t chase(uint8_t e) { return e < result_x ? e + 2 : e - 2; }
static uint8_t wait(uint8_t e) { return e; }
typedef uint8_t (*enemy_fn)(uint8_t);
static const enemy_fn enemy_ai[4] = {walk, bounce, chase, wait};

static uint8_t terrain(uint8_t x) {
  switch ((x >> 4) & 15) {
    case 0: return 3;
    case 1: return 1;
    case 2: return 4;
    case 3: return 1;
    case 4: return 5;
    case 5: return 9;
    case 6: return 2;
    case 7: return 6;
    case 8: return 5;
    case 9: return 3;
    case 10: return 5;
    case 11: return 8;
    default: return 7;
  }
}

static void start_up(void) {
  memcpy((void*)0xFF80, dma_routine, sizeof dma_routine);
  memset(shadow_oam, 0, sizeof shadow_oam);
  while (LY != 144) {
  }
  LCDC = 0;
  for (uint16_t i = 0; i < 32; ++i) REG(0x8000 + i) = (uint8_t)(i < 16 ? 0x00 : 0xFF);
  for (uint16_t i = 0; i < 1024; ++i) REG(0x9800 + i) = (uint8_t)(i & 1);
  BGP = 0xE4;
  OBP0 = 0xD2;
  shadow_oam[0] = 0x48; /* Y */
  shadow_oam[1] = 0x50; /* X */
  shadow_oam[2] = 1;
  LCDC = 0x93; /* LCD, BG, objects, tiles at 8000 */
  TMA = 0xC0;
  TAC = 0x05;
  MBC5_RAM_ENABLE = 0x0A;
  for (uint8_t i = 0; i < GAME_ENEMIES; ++i) enemies[i] = (uint8_t)(i * 37);
  IF = 0;
  IE = 0x05;
  __asm__("ei");
}

void main(void) {
  result_ready = 0;
  result_frames = 0;
  result_timers = 0;
  result_sum = 0;
  start_up();
  result_x = shadow_oam[1];
  result_y = shadow_oam[0];
  result_ready = 0xA5;
  for (;;) {
    while (!vblank_seen) __asm__("halt\n nop");
    vblank_seen = 0;
    const uint8_t pad = result_pad;
    if (pad & 0x01) ++result_x;
    if (pad & 0x02) --result_x;
    if (pad & 0x04) --result_y;
    if (pad & 0x08) ++result_y;
    shadow_oam[1] = result_x;
    shadow_oam[0] = result_y;
    for (uint8_t i = 0; i < GAME_ENEMIES; ++i) {
      enemies[i] = enemy_ai[(i + terrain(enemies[i])) & 3](enemies[i]);
      shadow_oam[4 + i * 4] = 0x30 + (enemies[i] & 0x3F);
      shadow_oam[5 + i * 4] = enemies[i];
      shadow_oam[6 + i * 4] = 1;
    }
    SCX = (uint8_t)result_frames;
    MBC5_ROM_BANK = 5;
    result_sum = fold_frame(result_sum, enemies, GAME_ENEMIES, result_frames);
    MBC5_ROM_BANK = 1;
    if ((result_frames & 15) == 0) {
      MBC5_RAM_BANK = (uint8_t)((result_frames >> 4) & 3);
      REG(0xA000 + ((result_frames >> 4) & 0xFF)) = (uint8_t)result_sum;
    }
    ++result_frames;
  }
}
