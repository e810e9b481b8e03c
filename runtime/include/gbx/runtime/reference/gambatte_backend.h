#pragma once
// The gambatte backend: a second differential reference, Gambatte 0.5 as Debian's
// libretro-gambatte ships it (a libretro core, dlopen()ed at run time: GBX neither links nor
// needs it to build). One env per process (a libretro core is one global emulator), run as a
// DMG through the core's `gambatte_gb_hwmode` option ("GB" = Gambatte's FORCE_DMG), also for
// SGB- and CGB-flagged cartridges.
//
// What it can and cannot show (README "Verify against Gambatte"):
// - libretro's retro_run always runs to the end of a Gambatte video frame (VBlank start,
//   the instruction boundary after it), never to a GBX frame boundary. The backend keeps
//   the emulated time of every Gambatte frame end and, at the end of GBX step k (cycle
//   k * frames_per_step * 70224), shows the last Gambatte frame that ended at or before it:
//   its screen is what GBX's front buffer holds then (with the LCD-off rule of read_screen),
//   its memory is from that earlier instant (4500 cycles earlier until the game first turns
//   the LCD off and on, any phase after): bytes written in between differ.
// - The time is read from Gambatte's own serialized state (retro_serialize after every
//   frame: its cycle counter `cc`, which saving rebases to [0x8000, 0x10000) so only its
//   value mod 0x8000 is kept across frames) with the count of audio samples the frame
//   produced (cycles / 128, within a few hundred cycles) to pick the multiple of 0x8000.
// - The same state holds WRAM, VRAM, cartridge RAM, OAM and HRAM/IE as of that frame end,
//   so read_memory serves 0000-7FFF (ROM, the MBC's bank), 8000-FDFF and FE00-FE9F and
//   FF80-FFFF. I/O registers FF00-FF7F are refused: Gambatte updates most of them lazily and
//   its state holds stale bytes there. get_cpu_state gives the registers of that frame end
//   for the record, but they are not at GBX's instant, so verify does not compare them.
// - Input: libretro asks for buttons when the game reads P1, but the backend can change
//   them only between retro_run calls: a Gambatte frame gets the action of the GBX step its
//   start lies in (its first frames_per_step frames, release_after_frames as the kernels).
// - Reset restores the state saved right after loading, with WRAM, OAM and HRAM zeroed
//   (Gambatte fills them with patterns at power-on; hardware's are random and GBX and mGBA
//   start from zeros), and the logo tiles in VRAM are the cartridge's, as the boot ROM
//   copies them (Gambatte draws its own logo); so replays are exact; cartridge RAM starts
//   as the core loaded it.
#include <memory>
#include <string>

#include "gbx/runtime/backends/backend.h"

namespace gbx {

// GBX_GAMBATTE_CORE if set, else Debian's path of the core.
std::string default_gambatte_core_path();

// core_path: the libretro core to load ("" = default_gambatte_core_path()). A missing or
// unusable core is one error line saying how to get it.
Result<std::unique_ptr<Backend>> make_gambatte_backend(const Rom& rom, const BackendConfig& cfg,
                                                       const std::string& core_path = "");

}  // namespace gbx
