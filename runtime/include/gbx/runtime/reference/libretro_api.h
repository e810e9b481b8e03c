#pragma once
// The few libretro declarations the gambatte reference backend uses, vendored so that GBX
// builds without libretro headers: the core (a shared object) is dlopen()ed at run time
// (gambatte_backend.cpp), so only its types, constants and entry-point signatures are
// needed. Copied from libretro.h's public API (libretro-common, MIT licence; API version 1),
// trimmed to what GBX calls. The values are the libretro ABI every core is built against.
#include <stddef.h>
#include <stdint.h>

namespace gbx::retro {

constexpr unsigned kApiVersion = 1;  // RETRO_API_VERSION

// Joypad button ids (RETRO_DEVICE_ID_JOYPAD_*) of device RETRO_DEVICE_JOYPAD.
constexpr unsigned kDeviceJoypad = 1;
constexpr unsigned kJoypadB = 0;
constexpr unsigned kJoypadSelect = 2;
constexpr unsigned kJoypadStart = 3;
constexpr unsigned kJoypadUp = 4;
constexpr unsigned kJoypadDown = 5;
constexpr unsigned kJoypadLeft = 6;
constexpr unsigned kJoypadRight = 7;
constexpr unsigned kJoypadA = 8;

// retro_get_memory_data ids (RETRO_MEMORY_*).
constexpr unsigned kMemorySaveRam = 0;
constexpr unsigned kMemorySystemRam = 2;

// Environment commands (RETRO_ENVIRONMENT_*); a command may carry the EXPERIMENTAL bit.
constexpr unsigned kEnvExperimental = 0x10000;
constexpr unsigned kEnvGetCanDupe = 3;
constexpr unsigned kEnvGetSystemDirectory = 9;
constexpr unsigned kEnvSetPixelFormat = 10;
constexpr unsigned kEnvGetVariable = 15;
constexpr unsigned kEnvGetVariableUpdate = 17;
constexpr unsigned kEnvGetLogInterface = 27;
constexpr unsigned kEnvSetMemoryMaps = 36;  // | EXPERIMENTAL

constexpr int kPixelFormatXrgb8888 = 1;  // RETRO_PIXEL_FORMAT_XRGB8888
constexpr int kPixelFormatRgb565 = 2;    // RETRO_PIXEL_FORMAT_RGB565

struct Variable {  // struct retro_variable
  const char* key;
  const char* value;
};

struct GameInfo {  // struct retro_game_info
  const char* path;
  const void* data;
  size_t size;
  const char* meta;
};

struct MemoryDescriptor {  // struct retro_memory_descriptor
  uint64_t flags;
  void* ptr;
  size_t offset;
  size_t start;
  size_t select;
  size_t disconnect;
  size_t len;
  const char* addrspace;
};

struct MemoryMap {  // struct retro_memory_map
  const MemoryDescriptor* descriptors;
  unsigned num_descriptors;
};

using EnvironmentFn = bool (*)(unsigned cmd, void* data);
using VideoRefreshFn = void (*)(const void* data, unsigned width, unsigned height, size_t pitch);
using AudioSampleFn = void (*)(int16_t left, int16_t right);
using AudioSampleBatchFn = size_t (*)(const int16_t* data, size_t frames);
using InputPollFn = void (*)();
using InputStateFn = int16_t (*)(unsigned port, unsigned device, unsigned index, unsigned id);

// The core's entry points, resolved by name (retro_<name>).
struct CoreApi {
  unsigned (*api_version)();
  void (*set_environment)(EnvironmentFn);
  void (*set_video_refresh)(VideoRefreshFn);
  void (*set_audio_sample)(AudioSampleFn);
  void (*set_audio_sample_batch)(AudioSampleBatchFn);
  void (*set_input_poll)(InputPollFn);
  void (*set_input_state)(InputStateFn);
  void (*init)();
  void (*deinit)();
  bool (*load_game)(const GameInfo*);
  void (*unload_game)();
  void (*run)();
  size_t (*serialize_size)();
  bool (*serialize)(void* data, size_t size);
  bool (*unserialize)(const void* data, size_t size);
  void* (*get_memory_data)(unsigned id);
  size_t (*get_memory_size)(unsigned id);
};

}  // namespace gbx::retro
