#include "runtime/shared_object_check.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>  // ElfW: this process's ELF class
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <system_error>
#include <vector>

namespace chorus::internal {
namespace {

using Header = ElfW(Ehdr);
using ProgramHeader = ElfW(Phdr);
using SectionHeader = ElfW(Shdr);

constexpr unsigned char kClass = sizeof(void*) == 8 ? ELFCLASS64 : ELFCLASS32;
constexpr unsigned char kByteOrder =
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB;
#if defined(__x86_64__)
constexpr uint16_t kMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kMachine = EM_AARCH64;
#elif defined(__powerpc64__)
constexpr uint16_t kMachine = EM_PPC64;
#elif defined(__s390x__)
constexpr uint16_t kMachine = EM_S390;
#elif defined(__riscv)
constexpr uint16_t kMachine = EM_RISCV;
#else
constexpr uint16_t kMachine = EM_NONE;  // unknown here: dlopen's own check of e_machine decides
#endif

constexpr const char* kReinstall = "; reinstall the plugin or remove it from the plugin folders";
constexpr const char* kRebuild =
    "; rebuild the plugin for this machine or remove it from the plugin folders";

std::string ErrnoText(int error) { return std::generic_category().message(error); }

std::string MachineName(uint16_t machine) {
  switch (machine) {
    case EM_386:
      return "x86 (32-bit)";
    case EM_X86_64:
      return "x86-64";
    case EM_ARM:
      return "ARM (32-bit)";
    case EM_AARCH64:
      return "AArch64";
    case EM_PPC:
      return "PowerPC (32-bit)";
    case EM_PPC64:
      return "PowerPC 64";
    case EM_S390:
      return "s390x";
    case EM_RISCV:
      return "RISC-V";
    default:
      return "e_machine " + std::to_string(machine);
  }
}

std::string ClassName(unsigned char elf_class) {
  return elf_class == ELFCLASS32 ? "32-bit" : "64-bit";
}

std::string ByteOrderName(unsigned char encoding) {
  return encoding == ELFDATA2LSB ? "little-endian" : "big-endian";
}

std::string TypeName(uint16_t type) {
  switch (type) {
    case ET_EXEC:
      return "an executable (ET_EXEC)";
    case ET_REL:
      return "an object file (ET_REL)";
    case ET_CORE:
      return "a core dump (ET_CORE)";
    default:
      return "an ELF file of unknown type " + std::to_string(type);
  }
}

// The end of [offset, offset + length), saturated; whether it lies inside a file of `size` bytes.
struct Range {
  uint64_t end;
  bool inside;
};
Range RangeIn(uint64_t offset, uint64_t length, uint64_t size) {
  uint64_t end;
  if (__builtin_add_overflow(offset, length, &end)) end = std::numeric_limits<uint64_t>::max();
  return {end, offset <= size && length <= size - offset};
}

class ReadOnlyFile {
 public:
  // O_NONBLOCK: a FIFO that replaced the file between stat and open must not block the open.
  explicit ReadOnlyFile(const std::string& path)
      : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)) {}
  ~ReadOnlyFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

  int fd() const { return fd_; }

  // Reads exactly `size` bytes at `offset`; false on an error or a short file.
  bool Read(uint64_t offset, void* out, size_t size) const {
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pread(fd_, static_cast<char*>(out) + done, size - done,
                                static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }

 private:
  int fd_;
};

std::string CheckHeader(const Header& header, const std::string& file) {
  const unsigned char elf_class = header.e_ident[EI_CLASS];
  if (elf_class != ELFCLASS32 && elf_class != ELFCLASS64) {
    return file + " is damaged: its ELF class byte is " + std::to_string(elf_class) +
           ", neither 32-bit (1) nor 64-bit (2)" + kReinstall;
  }
  if (elf_class != kClass) {
    return file + " is a " + ClassName(elf_class) + " ELF file but this process is " +
           ClassName(kClass) + kRebuild;
  }
  const unsigned char byte_order = header.e_ident[EI_DATA];
  if (byte_order != ELFDATA2LSB && byte_order != ELFDATA2MSB) {
    return file + " is damaged: its ELF byte-order byte is " + std::to_string(byte_order) +
           ", neither little-endian (1) nor big-endian (2)" + kReinstall;
  }
  if (byte_order != kByteOrder) {
    return file + " is " + ByteOrderName(byte_order) + " but this machine is " +
           ByteOrderName(kByteOrder) + kRebuild;
  }
  if (header.e_ident[EI_VERSION] != EV_CURRENT) {
    return file + " is damaged: its ELF identification version is " +
           std::to_string(header.e_ident[EI_VERSION]) + ", not " + std::to_string(EV_CURRENT) +
           kReinstall;
  }
  if (kMachine != EM_NONE && header.e_machine != kMachine) {
    return file + " is built for " + MachineName(header.e_machine) + " but this machine is " +
           MachineName(kMachine) + kRebuild;
  }
  if (header.e_type != ET_DYN) {
    return file + " is " + TypeName(header.e_type) +
           ", not a shared library; build the plugin with chorus_add_plugin() (a shared module) "
           "or remove it from the plugin folders";
  }
  if (header.e_phnum == 0) {
    return file + " has no program headers, so nothing of it can be loaded" + kReinstall;
  }
  if (header.e_phentsize != sizeof(ProgramHeader)) {
    return file + " is damaged: its program headers are " + std::to_string(header.e_phentsize) +
           " bytes each, not " + std::to_string(sizeof(ProgramHeader)) + kReinstall;
  }
  return "";
}

std::string CheckSegments(const std::vector<ProgramHeader>& segments, uint64_t size,
                          const std::string& file) {
  const std::string file_size = " but the file has " + std::to_string(size) + " bytes";
  size_t loadable = 0;
  const ProgramHeader* dynamic = nullptr;
  for (const ProgramHeader& segment : segments) {
    if (segment.p_type == PT_DYNAMIC && dynamic == nullptr) dynamic = &segment;
    if (segment.p_type != PT_LOAD) continue;
    ++loadable;
    const std::string which = "loadable segment " + std::to_string(loadable);
    const Range range = RangeIn(segment.p_offset, segment.p_filesz, size);
    if (!range.inside) {
      return file + " is truncated: its " + which + " ends at byte " + std::to_string(range.end) +
             file_size + kReinstall;
    }
    if (segment.p_filesz > segment.p_memsz) {
      return file + " is damaged: its " + which + " has " + std::to_string(segment.p_filesz) +
             " bytes in the file but only " + std::to_string(segment.p_memsz) + " in memory" +
             kReinstall;
    }
    // The ELF rule mmap relies on: the file offset and the address agree modulo the alignment.
    if (segment.p_align > 1 && (segment.p_vaddr - segment.p_offset) % segment.p_align != 0) {
      return file + " is damaged: its " + which + " is at file offset " +
             std::to_string(segment.p_offset) + " and address " + std::to_string(segment.p_vaddr) +
             ", which differ by no multiple of its alignment " + std::to_string(segment.p_align) +
             kReinstall;
    }
  }
  if (loadable == 0) return file + " is damaged: it has no loadable segment" + kReinstall;
  if (dynamic == nullptr) {
    return file +
           " has no dynamic segment: it is not a shared library (a static object?); build "
           "the plugin with chorus_add_plugin() or remove it from the plugin folders";
  }
  const Range range = RangeIn(dynamic->p_offset, dynamic->p_filesz, size);
  if (!range.inside) {
    return file + " is truncated: its dynamic segment ends at byte " + std::to_string(range.end) +
           file_size + kReinstall;
  }
  // The dynamic linker reads the dynamic segment at its address: some loadable segment must
  // map it.
  const Range memory =
      RangeIn(dynamic->p_vaddr, dynamic->p_memsz, std::numeric_limits<uint64_t>::max());
  bool mapped = false;
  for (const ProgramHeader& segment : segments) {
    if (segment.p_type == PT_LOAD && segment.p_vaddr <= dynamic->p_vaddr &&
        memory.end - segment.p_vaddr <= segment.p_filesz) {
      mapped = true;
    }
  }
  if (!memory.inside || !mapped) {
    return file + " is damaged: its dynamic segment at address " +
           std::to_string(dynamic->p_vaddr) + " lies in no loadable segment's file bytes" +
           kReinstall;
  }
  return "";
}

std::string CheckSections(const ReadOnlyFile& handle, const Header& header,
                          const std::vector<ProgramHeader>& segments, uint64_t size,
                          const std::string& file) {
  if (header.e_shoff == 0) return "";  // no section headers: allowed, dlopen reads none
  const std::string file_size = " but the file has " + std::to_string(size) + " bytes";
  if (header.e_shentsize != sizeof(SectionHeader)) {
    return file + " is damaged: its section headers are " + std::to_string(header.e_shentsize) +
           " bytes each, not " + std::to_string(sizeof(SectionHeader)) + kReinstall;
  }
  SectionHeader first{};
  if (!RangeIn(header.e_shoff, sizeof first, size).inside ||
      !handle.Read(header.e_shoff, &first, sizeof first)) {
    return file + " is truncated: its section headers start at byte " +
           std::to_string(header.e_shoff) + file_size + kReinstall;
  }
  // A count too large for e_shnum is kept in the first section header's sh_size.
  const uint64_t count = header.e_shnum != 0 ? header.e_shnum : first.sh_size;
  uint64_t table_bytes;
  if (__builtin_mul_overflow(count, sizeof(SectionHeader), &table_bytes)) {
    table_bytes = std::numeric_limits<uint64_t>::max();
  }
  const Range table = RangeIn(header.e_shoff, table_bytes, size);
  if (!table.inside) {
    return file + " is truncated: its section headers end at byte " + std::to_string(table.end) +
           file_size + kReinstall;
  }
  std::vector<SectionHeader> sections(count);
  if (!handle.Read(header.e_shoff, sections.data(), table_bytes)) {
    return file + " could not be read to the end of its section headers" + kReinstall;
  }
  for (uint64_t i = 1; i < count; ++i) {
    const SectionHeader& section = sections[i];
    if (section.sh_type == SHT_NOBITS || section.sh_type == SHT_NULL) continue;
    const Range range = RangeIn(section.sh_offset, section.sh_size, size);
    if (!range.inside) {
      return file + " is truncated: its section " + std::to_string(i) + " ends at byte " +
             std::to_string(range.end) + file_size + kReinstall;
    }
    // A section the program uses (code, symbols, relocations) must be loaded from where it is in
    // the file to its address. A program header that lies about a segment's offset or file size
    // while staying inside the file would otherwise map other bytes, or zeros, in its place.
    if (!(section.sh_flags & SHF_ALLOC) || section.sh_size == 0) continue;
    bool loaded = false;
    for (const ProgramHeader& segment : segments) {
      if (segment.p_type == PT_LOAD && segment.p_offset <= section.sh_offset &&
          range.end - segment.p_offset <= segment.p_filesz &&
          section.sh_addr - segment.p_vaddr == section.sh_offset - segment.p_offset) {
        loaded = true;
        break;
      }
    }
    if (!loaded) {
      return file + " is damaged: no loadable segment maps its section " + std::to_string(i) +
             " (file bytes " + std::to_string(section.sh_offset) + " to " +
             std::to_string(range.end) + ") to its address " + std::to_string(section.sh_addr) +
             kReinstall;
    }
  }
  return "";
}

}  // namespace

std::string CheckSharedObject(const std::string& path) {
  const std::string file = std::filesystem::path(path).filename().string();
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR) {
      return "no such file (check the path in CHORUS_PLUGINS or CHORUS_PLUGIN_PATH)";
    }
    return file + " cannot be examined: " + ErrnoText(error) +
           "; fix its permissions or remove it from the plugin folders";
  }
  if (!S_ISREG(status.st_mode)) {
    return file + " is " + (S_ISDIR(status.st_mode) ? "a folder" : "not a regular file") +
           ", not a shared library; remove it from the plugin folders (CHORUS_PLUGIN_PATH lists "
           "folders; a plugin's file may be named in CHORUS_PLUGINS)";
  }
  const ReadOnlyFile handle(path);
  if (handle.fd() < 0) {
    return file + " cannot be opened: " + ErrnoText(errno) +
           "; make it readable (chmod a+r) or remove it from the plugin folders";
  }
  // The size of what was opened, not of what the name pointed at a moment ago.
  if (::fstat(handle.fd(), &status) != 0 || !S_ISREG(status.st_mode)) {
    return file +
           " changed while it was being examined; try again, or remove it from the "
           "plugin folders";
  }
  const uint64_t size = static_cast<uint64_t>(status.st_size);
  if (size == 0) {
    return file + " is empty (0 bytes; an interrupted copy or install?)" + kReinstall;
  }

  Header header{};
  const size_t header_bytes = size < sizeof header ? static_cast<size_t>(size) : sizeof header;
  if (!handle.Read(0, &header, header_bytes)) {
    return file + " could not be read to the end of its ELF header" + kReinstall;
  }
  // The first bytes of a file cut inside its magic number are reported as truncated below.
  if (std::memcmp(header.e_ident, ELFMAG, std::min<size_t>(header_bytes, SELFMAG)) != 0) {
    return file +
           " is not an ELF file (it does not start with 0x7f 'E' 'L' 'F'; a text file, a "
           "script or a damaged copy?); rebuild or reinstall the plugin, or remove it "
           "from the plugin folders";
  }
  if (header_bytes < sizeof header) {
    return file + " is truncated: its ELF header needs " + std::to_string(sizeof header) +
           " bytes but the file has " + std::to_string(size) + " bytes" + kReinstall;
  }
  if (std::string problem = CheckHeader(header, file); !problem.empty()) return problem;

  const uint64_t table_bytes = uint64_t{header.e_phnum} * sizeof(ProgramHeader);
  const Range table = RangeIn(header.e_phoff, table_bytes, size);
  if (!table.inside) {
    return file + " is truncated: its program headers end at byte " + std::to_string(table.end) +
           " but the file has " + std::to_string(size) + " bytes" + kReinstall;
  }
  std::vector<ProgramHeader> segments(header.e_phnum);
  if (!handle.Read(header.e_phoff, segments.data(), table_bytes)) {
    return file + " could not be read to the end of its program headers" + kReinstall;
  }
  if (std::string problem = CheckSegments(segments, size, file); !problem.empty()) return problem;
  return CheckSections(handle, header, segments, size, file);
}

}  // namespace chorus::internal
