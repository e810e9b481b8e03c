// Crafted save states on the cuda backend (a device, or the CUDA driver double in
// test_cuda_backend_on_double): refused in one line or run inside their env, as on the cpu
// backend (tests/test_state_fuzz.cpp says what is checked; helpers in tests/state_fuzz.h). The
// double runs the kernel's CUDA source on the host, one thread at a time, and checks every
// launch's memory ordering: one game and PPU_BENCH, every 12th structured case and the odd
// active FIFOs, no random ones, keep it short there.
#include "state_fuzz.h"

#include "test_cuda_backend/common.h"

TEST_CASE("crafted states on the cuda backend: refused in one line or run inside their env") {
  if (!cuda_backend_test::have_device()) return;
  state_fuzz::report_crashes();
  state_fuzz::report("cuda fifo", state_fuzz::run_cases("cuda", PpuModel::Fifo, false, 1, 12));
}
