/* ROM bank 1: insertion sort, with the comparison in a function of its own (calls within the
 * bank). */
#include "cpu_heavy.h"

static uint8_t greater(uint16_t a, uint16_t b) { return a > b; }

void sort_words(uint16_t* words, uint8_t count) {
  for (uint8_t i = 1; i < count; ++i) {
    const uint16_t v = words[i];
    uint8_t j = i;
    while (j > 0 && greater(words[j - 1], v)) {
      words[j] = words[j - 1];
      --j;
    }
    words[j] = v;
  }
}
