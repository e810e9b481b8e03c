// The divergence meter (gbx/measure/bench/divergence.h): the SIMT issue model on hand-made traces,
// and end to end on the CUDA driver double (CTest puts it on LD_LIBRARY_PATH for this suite):
// lockstep envs give 32 lanes, and a warp split between two equal loops gives what the model
// says for the kernel's own weights.
#include <doctest/doctest.h>

#include <fstream>

#include "gbx/measure/bench/divergence.h"
#include "gbx/runtime/roms/rom_builder.h"
#include "nvrtc_available.h"
#include "test_util.h"

using namespace gbx;

namespace {

const UnitWeights kCount = count_weights();

SimtCost fold1(const std::vector<std::vector<uint32_t>>& lanes, const UnitWeights& w = kCount) {
  return simt_fold(lanes, {&w})[0];
}

}  // namespace

TEST_CASE("simt model: lockstep lanes give 32, each distinct unit of an iteration issues once") {
  const std::vector<uint32_t> trace = {0x3C, 0x18, kTraceEvents, 0x3C, 0xCB, kTraceCb + 0x7C};
  CHECK(fold1(std::vector<std::vector<uint32_t>>(32, trace)).lanes() == doctest::Approx(32));

  // Half the lanes run INC B, half INC C, then all JR: 64 lane-units for 3 issues.
  std::vector<std::vector<uint32_t>> split(32);
  for (int l = 0; l < 32; ++l)
    for (int i = 0; i < 10; ++i) {
      split[l].push_back(l % 2 ? 0x04 : 0x0C);
      split[l].push_back(0x18);
    }
  SimtCost c = fold1(split);
  CHECK(c.lanes() == doctest::Approx(64.0 / 3));
  CHECK(c.iterations == 20);
  CHECK(c.dispatches == 640);

  // Weights: INC B 2, INC C 6, JR 4 -> per pair useful 16*2 + 16*6 + 32*4, issued 12.
  UnitWeights w;
  w.cost = {{0x04, 2}, {0x0C, 6}, {0x18, 4}};
  CHECK(fold1(split, w).lanes() == doctest::Approx((32.0 + 96 + 128) / 12));
  // A uniform loop top adds to every iteration of every lane, issued once.
  w.loop_top = 10;
  CHECK(fold1(split, w).lanes() == doctest::Approx((32.0 + 96 + 128 + 640) / 32));

  // One lane alone: 1 lane per issue; lanes that stop early leave the rest running alone.
  std::vector<std::vector<uint32_t>> one(32);
  one[7] = {1, 2, 3};
  CHECK(fold1(one).lanes() == doctest::Approx(1));
  std::vector<std::vector<uint32_t>> ragged(32, std::vector<uint32_t>(4, 0x00));
  ragged[0].resize(12, 0x00);  // 4 iterations of 32 lanes, then 8 of one: 136 / 12
  CHECK(fold1(ragged).lanes() == doctest::Approx(136.0 / 12));
}

TEST_CASE("simt model: events and op CB open the iteration of the unit that follows") {
  // Lane 0 services events before its INC A; lane 1 runs CB 7C (op CB then its CB unit).
  std::vector<std::vector<uint32_t>> lanes(2);
  lanes[0] = {kTraceEvents, 0x3C, 0x3C};
  lanes[1] = {0xCB, kTraceCb + 0x7C, 0x3C};
  UnitWeights w;
  w.cost = {{kTraceEvents, 5}, {0x3C, 1}, {kTraceCb + 0x7C, 3}};
  const SimtCost c = fold1(lanes, w);
  CHECK(c.iterations == 2);
  // Iteration 1: events (5) + INC A (1) + CB 7C (3) issued; useful 6 + 3. Iteration 2: 1, 2.
  CHECK(c.issued == doctest::Approx(10));
  CHECK(c.useful == doctest::Approx(11));
  CHECK(trace_unit_name(kTraceCb + 0x7C) == "cb 7C");
  CHECK(trace_unit_name(kTraceBlock + 12) == "block 12");
}

TEST_CASE("majority schedule: lanes on the same units at different phases line up") {
  // Lane 0 runs A B C A B C ...; lane 1 the same loop one unit later (B C A ...). simt pays
  // two units per iteration (lanes 1 per issue); majority lets one lane wait once, after which
  // both run together (lanes -> 2).
  std::vector<std::vector<uint32_t>> lanes(2);
  for (int i = 0; i < 30; ++i) {
    lanes[0].push_back(10 + i % 3);
    lanes[1].push_back(10 + (i + 1) % 3);
  }
  CHECK(fold1(lanes).lanes() == doctest::Approx(1));
  IssueSchedule m{64, 0};
  const SimtCost c = simt_fold(lanes, {&kCount}, m)[0];
  CHECK(c.dispatches == 60);  // every lane iteration runs exactly once
  CHECK(c.iterations == 31);  // one lost to the wait: 60 lane-units in 31 issues
  CHECK(c.lanes() == doctest::Approx(60.0 / 31));
  // The scheduler's overhead is issued every iteration and useful to no lane.
  IssueSchedule mo{64, 1};
  CHECK(simt_fold(lanes, {&kCount}, mo)[0].lanes() == doctest::Approx(60.0 / 62));
  // The bound: a lane whose unit no other lane shares runs after waiting B iterations.
  std::vector<std::vector<uint32_t>> odd(32, std::vector<uint32_t>(40, 7));
  odd[5] = std::vector<uint32_t>(3, 9);
  IssueSchedule b4{4, 0};
  const SimtCost o = simt_fold(odd, {&kCount}, b4)[0];
  CHECK(o.dispatches == 31 * 40 + 3);
  CHECK(o.iterations == 43);  // lane 5 served after every 4th iteration of the others
  CHECK(IssueSchedule::parse("majority:16").value().wait_bound == 16);
  CHECK(IssueSchedule::parse("simt").value().wait_bound == 0);
  CHECK_FALSE(IssueSchedule::parse("majority:0").ok());
  CHECK_FALSE(IssueSchedule::parse("greedy").ok());
  CHECK(IssueSchedule::parse("majority:16+family@pc").value().grouping == EnvGrouping::Pc);
  CHECK(IssueSchedule::parse("majority:16+family@pc").value().by_family);
  CHECK(IssueSchedule::parse("simt@trace").value().name() == "simt@trace");
  CHECK(IssueSchedule::parse("simt@launch").value().grouping == EnvGrouping::Launch);
  CHECK_FALSE(IssueSchedule::parse("simt@lane").ok());
  CHECK_FALSE(IssueSchedule::parse("greedy@pc").ok());
}

TEST_CASE("+family: opcodes of one instruction family are one unit") {
  auto fam = unit_families();
  REQUIRE_MESSAGE(fam.ok(), (fam.ok() ? "" : fam.error().message));
  // LD B,C (41) and LD D,E (53): one family; INC B (04) another; op CB stays itself.
  CHECK(fam->of.at(0x41) == fam->of.at(0x53));
  CHECK(fam->of.at(0x41) != fam->of.at(0x04));
  CHECK(fam->of.count(0xCB) == 0);
  CHECK(fam->of.at(kTraceCb + 0x40) == fam->of.at(kTraceCb + 0x7F));  // BIT 0,B and BIT 7,A
  // Half the lanes on LD B,C, half on LD D,E: two units under simt, one family unit.
  std::vector<const UnitWeights*> w = {&kCount};
  WarpFolder f(w, {IssueSchedule{}, IssueSchedule::parse("simt+family").value()}, &fam.value());
  for (uint32_t t = 0; t < 32; ++t) f.record(t, t % 2 ? 0x41 : 0x53);
  // op CB then its CB unit stay one iteration under families too.
  for (uint32_t t = 0; t < 32; ++t) {
    f.record(t, 0xCB);
    f.record(t, kTraceCb + (t % 2 ? 0x40 : 0x7F));
  }
  const auto c = f.flush();
  CHECK(c[0].iterations == 2);
  CHECK(c[1].iterations == 2);
  CHECK(c[0].lanes() == doctest::Approx(16));
  // Family units cost their dearest member + kOperandSelect (count weights: 1 + 4).
  CHECK(c[1].lanes() == doctest::Approx(32));
}

TEST_CASE("the warp folder groups threads as a launch does (thread t on lane t % 32)") {
  WarpFolder f({&kCount});
  // Warp 0: lanes 0 and 1 on different units; warp 1: lanes 32 and 33 together.
  f.record(0, 1);
  f.record(1, 2);
  f.record(32, 5);
  f.record(33, 5);
  const SimtCost c = f.flush()[0];
  CHECK(c.warps == 2);
  CHECK(c.lanes() == doctest::Approx(4.0 / 3));
  CHECK(f.flush()[0].warps == 0);
}

// A ROM that reads P1 once (LCD off, DI: no events) and compares its low nibble with 0F
// (Z: no button pressed), then runs `tail`.
std::vector<uint8_t> button_rom(std::initializer_list<uint8_t> tail) {
  RomSpec s;
  s.program = {0xF3,         // DI
               0xAF,         // XOR A
               0xE0, 0x40,   // LDH (40),A: LCD off
               0xE0, 0x00,   // LDH (00),A: both button groups
               0xF0, 0x00,   // LDH A,(00)
               0xE6, 0x0F,   // AND 0F
               0xFE, 0x0F};  // CP 0F
  s.program.insert(s.program.end(), tail);
  return build_rom(s);
}

// The split ROM: a pressed button sends the env to INC C; JR, the others to INC B; JR (same
// iterations, so the two groups stay in step).
std::vector<uint8_t> split_rom() {
  return button_rom({0x20, 0x03,          // JR NZ,pressed
                     0x04, 0x18, 0xFD,    // idle: INC B; JR idle
                     0x0C, 0x18, 0xFD});  // pressed: INC C; JR pressed
}

// The split ROM in `dir`, run on `warps` warps for `steps` 2-frame steps, its actions a file
// in which odd envs press every button and even envs none.
DivergenceOptions split_options(const std::filesystem::path& dir, int warps, int steps) {
  const auto rom = dir / "split.gb";
  const auto bytes = split_rom();
  std::ofstream(rom, std::ios::binary).write((const char*)bytes.data(), (long)bytes.size());
  const auto actions = dir / "actions.bin";
  std::ofstream a(actions, std::ios::binary);
  for (int i = 0; i < 32 * warps * steps; ++i) a.put(i % 2 ? (char)0xFF : (char)0x00);
  DivergenceOptions o;
  o.rom = rom.string();
  o.warps = warps;
  o.options["frames_per_step"] = int64_t{2};
  o.options["release_after_frames"] = int64_t{-1};
  o.steps = steps;
  o.actions = actions.string();
  return o;
}

TEST_CASE("divergence on the double: lockstep is 32 lanes, a split warp what the model says") {
  GBX_REQUIRE_NVRTC();
  if (!std::getenv("GBX_TEST_CUDA_DOUBLE_DIR")) GBX_SKIP("not run on the CUDA driver double");
  test::TempDir dir;
  // Odd envs press every button, even envs none.
  DivergenceOptions o = split_options(dir.path, 1, 1);
  const std::string actions = o.actions;
  o.actions = "none";
  auto lock = run_divergence(o, nullptr);
  REQUIRE_MESSAGE(lock.ok(), (lock.ok() ? "" : lock.error().message));
  REQUIRE(lock->steps.size() == 1);
  CHECK(lock->steps[0].step == 1);
  CHECK(lock->steps[0].ptx[0].lanes() == doctest::Approx(32));
  CHECK(lock->steps[0].count[0].lanes() == doctest::Approx(32));
  CHECK(lock->steps[0].count[0].lanes_seen == 32);
  // Two frames of INC; JR pairs (16 T-cycles): about 70224 * 2 / 8 loop iterations a lane.
  CHECK(lock->steps[0].count[0].iterations > 17000);

  o.actions = actions;
  auto split = run_divergence(o, nullptr);
  REQUIRE_MESSAGE(split.ok(), (split.ok() ? "" : split.error().message));
  const SimtCost& count = split->steps[0].count[0];
  const SimtCost& ptx = split->steps[0].ptx[0];
  // The step is the loop but for 8 shared set-up iterations (the groups leave the JR NZ in
  // step; the step's end, by cycles, would leave them out of step for the next one): each INC
  // iteration issues two units for 32 lanes, each JR one.
  CHECK(count.lanes() == doctest::Approx(64.0 / 3).epsilon(0.002));
  const UnitWeights& w = split->ptx_unit_weights;
  CHECK(w.at(0x04) > 0);
  CHECK(w.at(0x18) > 0);
  const double useful = 16 * w.at(0x04) + 16 * w.at(0x0C) + 32 * w.at(0x18) + 64 * w.loop_top;
  const double issued = w.at(0x04) + w.at(0x0C) + w.at(0x18) + 2 * w.loop_top;
  CHECK(ptx.lanes() == doctest::Approx(useful / issued).epsilon(0.002));
  CHECK(ptx.lanes() < 31);
}

// dispatch=uniform (sm83/uniform.h): INC B and INC C are one path, with its INC part, so the
// warp the switch splits in two runs as one; the path and its parts have PTX weights.
TEST_CASE("divergence on the double: dispatch=uniform joins the split warp's INC B and INC C") {
  GBX_REQUIRE_NVRTC();
  if (!std::getenv("GBX_TEST_CUDA_DOUBLE_DIR")) GBX_SKIP("not run on the CUDA driver double");
  test::TempDir dir;
  DivergenceOptions o = split_options(dir.path, 1, 1);
  o.options["dispatch"] = std::string("uniform");
  auto r = run_divergence(o, nullptr);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  const UnitWeights& w = r->ptx_unit_weights;
  INFO(w.source);
  CHECK(w.at(kTraceUniform) > 0);
  CHECK(w.at(kTracePart + 17) > 0);                     // INC's part of uniform_op
  CHECK(w.at(kTracePart + 2) > w.at(kTracePart + 17));  // the (HL) read: a bus access
  CHECK(w.source.find("uniform path") != std::string::npos);
  // JR keeps its case, found through the mark before the opcode switch: priced as a case (a
  // fetch, an idle M-cycle), not as the tree's way out that the uniform opcodes take.
  CHECK(w.at(0x18) > 3 * w.at(0x04));
  CHECK(r->steps[0].count[0].lanes() > 31.9);
  CHECK(r->steps[0].ptx[0].lanes() > 31.9);
}

// The phase ROM: the same loop for every env, but an env with a button pressed runs one NOP
// before it, so it stays one instruction behind the others for good.
std::vector<uint8_t> phase_rom() {
  return button_rom({0x28, 0x01,                      // JR Z,loop: no button, no NOP
                     0x00,                            // NOP
                     0x04, 0x0C, 0x14, 0x18, 0xFB});  // loop: INC B; INC C; INC D; JR loop
}

// warp_majority (kernel/step.tmpl warp_turn): the lanes one instruction behind wait until the
// others come round to their opcode, and from then on the warp runs as one. The real kernel's
// warp-level code runs in the double's warp mode (lanes as fibers meeting at each intrinsic).
TEST_CASE("divergence on the double: warp_majority lines up lanes on one loop at two phases") {
  GBX_REQUIRE_NVRTC();
  if (!std::getenv("GBX_TEST_CUDA_DOUBLE_DIR")) GBX_SKIP("not run on the CUDA driver double");
  test::TempDir dir;
  DivergenceOptions o = split_options(dir.path, 1, 1);  // its actions: odd envs press
  const auto bytes = phase_rom();
  std::ofstream(o.rom, std::ios::binary).write((const char*)bytes.data(), (long)bytes.size());
  auto simt = run_divergence(o, nullptr);
  REQUIRE_MESSAGE(simt.ok(), (simt.ok() ? "" : simt.error().message));
  // As launched, every iteration issues the two phases' units: 16 lanes a dispatch.
  CHECK(simt->steps[0].count[0].lanes() == doctest::Approx(16).epsilon(0.01));
  o.options["warp_majority"] = int64_t{16};
  auto maj = run_divergence(o, nullptr);
  REQUIRE_MESSAGE(maj.ok(), (maj.ok() ? "" : maj.error().message));
  INFO(maj->ptx_unit_weights.source);
  CHECK(maj->kernel_entry != simt->kernel_entry);
  CHECK(maj->ptx_unit_weights.source.find("warp vote") != std::string::npos);
  const SimtCost& c = maj->steps[0].count[0];
  CHECK(c.lanes() > 31.5);
  // Each lane ran its own iterations (the same as as launched) plus the few it waited.
  const SimtCost& s = simt->steps[0].count[0];
  CHECK(c.dispatches > s.dispatches);
  CHECK(c.dispatches < s.dispatches + 32 * 64);
  CHECK(c.issued < 0.55 * s.issued);
}

TEST_CASE("simt model: a uniform path's parts issue once per iteration for the lanes in them") {
  // Lane 0: uniform with parts 2 and 17 (LD A,(HL)-like read, INC), lane 1: parts 17 only.
  std::vector<std::vector<uint32_t>> lanes(2);
  lanes[0] = {kTraceUniform, kTracePart + 2, kTracePart + 17, 0x18};
  lanes[1] = {kTraceUniform, kTracePart + 17, 0x18};
  UnitWeights w;
  w.cost = {{kTraceUniform, 10}, {kTracePart + 2, 20}, {kTracePart + 17, 3}, {0x18, 4}};
  const SimtCost c = fold1(lanes, w);
  CHECK(c.iterations == 2);
  // Iteration 1 issues 10 + 20 + 3, useful 33 + 13; iteration 2 issues 4, useful 8.
  CHECK(c.issued == doctest::Approx(37));
  CHECK(c.useful == doctest::Approx(54));
  CHECK(trace_unit_name(kTraceUniform) == "uniform");
  CHECK(trace_unit_name(kTracePart + 17) == "part 17");
}

TEST_CASE("regrouping: envs dealt to warps by PC at the step's start or by their trace") {
  GBX_REQUIRE_NVRTC();
  if (!std::getenv("GBX_TEST_CUDA_DOUBLE_DIR")) GBX_SKIP("not run on the CUDA driver double");
  test::TempDir dir;
  // Odd envs press every button, even envs none, in both steps: after the first, the two
  // groups sit in two loops (INC B; JR and INC C; JR), each group in step.
  DivergenceOptions o = split_options(dir.path, 2, 2);
  o.measure = {2};
  o.schedules = {IssueSchedule::parse("simt").value(), IssueSchedule::parse("simt@pc").value(),
                 IssueSchedule::parse("simt@trace").value()};
  auto r = run_divergence(o, nullptr);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  REQUIRE(r->steps.size() == 1);
  const DivergenceStep& d = r->steps[0];
  // As launched, each warp holds both groups, which the first step's end left out of step
  // (one on its INC while the other is on its JR): every iteration issues two units of 16
  // lanes.
  CHECK(d.count[0].lanes() == doctest::Approx(16).epsilon(0.002));
  // Regrouped, by the PC each env starts the step at or by what it runs, each warp is one
  // group: every lane on every unit.
  CHECK(d.count[1].lanes() == doctest::Approx(32));
  CHECK(d.count[2].lanes() == doctest::Approx(32));
  // The same lanes ran the same dispatches, only dealt differently.
  CHECK(d.count[1].dispatches == d.count[0].dispatches);
  CHECK(d.count[1].lanes_seen == 64);
  CHECK(d.ptx[1].useful == doctest::Approx(d.ptx[0].useful));
  CHECK(d.ptx[1].issued < d.ptx[0].issued);
}

TEST_CASE("divergence refuses bad options in one line") {
  DivergenceOptions o;
  o.rom = "builtin:ALU_LOOP";
  o.warps = 0;
  auto r = run_divergence(o, nullptr);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message == "--warps must be 1..4096");
  o.warps = 1;
  o.steps = 3;
  o.measure = {4};
  r = run_divergence(o, nullptr);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("--measure: step 4") != std::string::npos);
}

TEST_CASE("gbx-run divergence without the double: one line, exit 3") {
  // No double on the library path: none found here, a real driver on a GPU machine.
  const auto r = test::run_command("env LD_LIBRARY_PATH= " + test::tool("gbx-run") +
                                   " divergence --rom builtin:ALU_LOOP");
  CHECK(r.exit_code == 3);
  CHECK(r.output.find("divergence runs the cuda kernel on the double") != std::string::npos);
  CHECK(test::count_lines(r.output) == 1);
}
