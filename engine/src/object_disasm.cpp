// module.s from module.o: objdump's listing (function labels, offsets, relocations, branch
// targets named by function and offset), made with LLVM's MC layer in process.
#include "gbx/engine/object_disasm.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/Demangle/Demangle.h>
#include <llvm/MC/MCAsmInfo.h>
#include <llvm/MC/MCContext.h>
#include <llvm/MC/MCDisassembler/MCDisassembler.h>
#include <llvm/MC/MCInst.h>
#include <llvm/MC/MCInstPrinter.h>
#include <llvm/MC/MCInstrAnalysis.h>
#include <llvm/MC/MCInstrInfo.h>
#include <llvm/MC/MCRegisterInfo.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/MCTargetOptions.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/Format.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cinttypes>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace gbx {
namespace {

std::string message(llvm::Error e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << e;
  return os.str();
}

struct Label {
  uint64_t offset;  // in its section
  uint64_t size;
  std::string name;
};

// "name" or "name+0x1c" for an offset inside a section's labelled functions.
std::string describe(const std::vector<Label>& labels, uint64_t offset) {
  auto it = std::upper_bound(labels.begin(), labels.end(), offset,
                             [](uint64_t o, const Label& l) { return o < l.offset; });
  if (it == labels.begin()) return "";
  --it;
  if (offset == it->offset) return it->name;
  if (it->size && offset >= it->offset + it->size) return "";
  return it->name + llvm::formatv("+{0:x}", offset - it->offset).str();
}

}  // namespace

Result<std::string> disassemble_object(const std::string& object) {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetDisassembler();
  });
  auto file = llvm::object::ObjectFile::createObjectFile(llvm::MemoryBufferRef(object, "module.o"));
  if (!file) return make_error(ErrorKind::Compile, "module.o: " + message(file.takeError()));
  const llvm::object::ObjectFile& obj = **file;
  const llvm::Triple triple = obj.makeTriple();
  std::string err;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple.getTriple(), err);
  if (!target)
    return make_error(ErrorKind::Compile, "no disassembler for " + triple.str() + ": " + err);

  std::unique_ptr<llvm::MCRegisterInfo> mri(target->createMCRegInfo(triple.getTriple()));
  llvm::MCTargetOptions mc_options;
  std::unique_ptr<llvm::MCAsmInfo> mai(
      mri ? target->createMCAsmInfo(*mri, triple.getTriple(), mc_options) : nullptr);
  // The host CPU's name, as the kernel was compiled for it (-march=native).
  std::unique_ptr<llvm::MCSubtargetInfo> sti(
      target->createMCSubtargetInfo(triple.getTriple(), llvm::sys::getHostCPUName(), ""));
  std::unique_ptr<llvm::MCInstrInfo> mii(target->createMCInstrInfo());
  if (!mri || !mai || !sti || !mii)
    return make_error(ErrorKind::Compile, "LLVM's MC layer has no description of " + triple.str());
  llvm::MCContext context(triple, mai.get(), mri.get(), sti.get());
  std::unique_ptr<llvm::MCDisassembler> disasm(target->createMCDisassembler(*sti, context));
  std::unique_ptr<llvm::MCInstPrinter> printer(
      target->createMCInstPrinter(triple, mai->getAssemblerDialect(), *mai, *mii, *mri));
  std::unique_ptr<llvm::MCInstrAnalysis> analysis(target->createMCInstrAnalysis(mii.get()));
  if (!disasm || !printer)
    return make_error(ErrorKind::Compile, "LLVM has no disassembler for " + triple.str());
  printer->setPrintImmHex(true);

  // Function (and other) labels by section.
  std::map<uint64_t, std::vector<Label>> labels;  // section index -> sorted labels
  for (const llvm::object::SymbolRef& sym : obj.symbols()) {
    auto name = sym.getName();
    auto section = sym.getSection();
    auto addr = sym.getAddress();
    auto type = sym.getType();
    if (!name || !section || !addr || !type) {
      if (!name) llvm::consumeError(name.takeError());
      if (!section) llvm::consumeError(section.takeError());
      if (!addr) llvm::consumeError(addr.takeError());
      if (!type) llvm::consumeError(type.takeError());
      continue;
    }
    if (*section == obj.section_end() || name->empty() ||
        *type == llvm::object::SymbolRef::ST_File || *type == llvm::object::SymbolRef::ST_Debug)
      continue;
    const uint64_t size = obj.isELF() ? llvm::object::ELFSymbolRef(sym).getSize() : 0;
    labels[(*section)->getIndex()].push_back(
        {*addr - (*section)->getAddress(), size, llvm::demangle(name->str())});
  }
  for (auto& [index, list] : labels)
    std::sort(list.begin(), list.end(),
              [](const Label& a, const Label& b) { return a.offset < b.offset; });

  // ELF keeps a section's relocations in a section of their own (.rela.text).
  std::map<uint64_t, std::vector<llvm::object::RelocationRef>> relocations_of;
  for (const llvm::object::SectionRef& section : obj.sections()) {
    auto target = section.getRelocatedSection();
    if (!target) {
      llvm::consumeError(target.takeError());
      continue;
    }
    if (*target == obj.section_end()) continue;
    for (const llvm::object::RelocationRef& r : section.relocations())
      relocations_of[(*target)->getIndex()].push_back(r);
  }

  std::string out;
  llvm::raw_string_ostream os(out);
  os << "# module.s: module.o disassembled by LLVM's MC layer (engine/src/object_disasm.cpp).\n"
     << "# Offsets are from the start of each section; '# R_...' is the relocation an\n"
     << "# instruction carries (its target is filled in when the JIT links the object).\n";
  for (const llvm::object::SectionRef& section : obj.sections()) {
    if (!section.isText() || section.getSize() == 0) continue;
    auto section_name = section.getName();
    auto contents = section.getContents();
    if (!section_name || !contents) {
      if (!section_name) llvm::consumeError(section_name.takeError());
      if (!contents) return make_error(ErrorKind::Compile, message(contents.takeError()));
      continue;
    }
    const std::vector<Label>& here = labels[section.getIndex()];
    // Relocations by offset: "R_X86_64_PLT32 bus_read_slow-0x4".
    std::multimap<uint64_t, std::string> relocs;
    for (const llvm::object::RelocationRef& r : relocations_of[section.getIndex()]) {
      llvm::SmallString<32> type;
      r.getTypeName(type);
      std::string text = type.str().str();
      const auto sym = r.getSymbol();
      if (sym != obj.symbol_end()) {
        auto name = sym->getName();
        if (name && !name->empty()) {
          text += " " + llvm::demangle(name->str());
        } else {
          if (!name) llvm::consumeError(name.takeError());
          auto sec = sym->getSection();  // a section symbol: name it by its section
          if (sec && *sec != obj.section_end()) {
            auto sec_name = (*sec)->getName();
            if (sec_name)
              text += " " + sec_name->str();
            else
              llvm::consumeError(sec_name.takeError());
          } else if (!sec) {
            llvm::consumeError(sec.takeError());
          }
        }
      }
      if (obj.isELF()) {
        auto addend = llvm::object::ELFRelocationRef(r).getAddend();
        if (addend && *addend)
          text += llvm::formatv("{0}{1:x}", *addend < 0 ? "-" : "+",
                                *addend < 0 ? 0 - (uint64_t)*addend : (uint64_t)*addend)
                      .str();
        else if (!addend)
          llvm::consumeError(addend.takeError());
      }
      relocs.emplace(r.getOffset(), text);
    }

    os << "\nDisassembly of section " << *section_name << ":\n";
    const llvm::ArrayRef<uint8_t> bytes(reinterpret_cast<const uint8_t*>(contents->data()),
                                        contents->size());
    size_t next_label = 0;
    for (uint64_t off = 0; off < bytes.size();) {
      while (next_label < here.size() && here[next_label].offset <= off) {
        const Label& l = here[next_label++];
        if (l.offset == off) os << "\n" << l.name << ":\n";
      }
      llvm::MCInst inst;
      uint64_t size = 0;
      const auto status = disasm->getInstruction(inst, size, bytes.slice(off), off, llvm::nulls());
      os << llvm::format("%8" PRIx64 ":\t", off);
      if (status != llvm::MCDisassembler::Success || size == 0) {
        os << llvm::format(".byte\t0x%02x", bytes[off]) << "\n";
        ++off;
        continue;
      }
      std::string text;
      llvm::raw_string_ostream inst_os(text);
      printer->printInst(&inst, off, "", *sti, inst_os);
      inst_os.flush();
      os << (text.size() && text[0] == '\t' ? text.substr(1) : text);
      // A relocation field starts at or after the instruction's first byte.
      std::string relocated;
      for (auto it = relocs.lower_bound(off); it != relocs.end() && it->first < off + size; ++it)
        relocated += "\t# " + it->second;
      uint64_t dest = 0;
      if (!relocated.empty()) {
        os << relocated;  // the target is the relocation's, not the immediate's
      } else if (analysis && analysis->evaluateBranch(inst, off, size, dest)) {
        // The immediate is relative (to the next instruction on x86): the comment has the
        // target's offset and what is there.
        const std::string where = describe(here, dest);
        os << llvm::format("\t# %" PRIx64, dest);
        if (!where.empty()) os << " <" << where << ">";
      }
      os << "\n";
      off += size;
    }
  }
  os.flush();
  return out;
}

}  // namespace gbx
