// A damaged or foreign file among the plugins is rejected with a reason before dlopen sees it, and
// never crashes the process (dlopen maps a segment past the end of a truncated file and dies of
// SIGBUS reading it). Tested the Vulkan-Loader way: every 4 KiB prefix of a real plugin, and
// copies with flipped header bytes, loaded in this process.
#include <chorus/runtime/plugin_library.h>
#include <elf.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <link.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

namespace chorus {
namespace {

namespace fs = std::filesystem;
using ::testing::AnyOf;
using ::testing::HasSubstr;

using Header = ElfW(Ehdr);
using ProgramHeader = ElfW(Phdr);
using Offset = ElfW(Off);

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

// A fresh folder of this test's, removed with what it holds.
class ScratchFolder {
 public:
  ScratchFolder() {
    std::string pattern = ::testing::TempDir() + "chorus_damaged_XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~ScratchFolder() {
    std::error_code ignored;
    if (!path_.empty()) fs::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(DamagedFile, EveryPrefixOfARealPluginIsRejectedWithAReason) {
  const std::string plugin = ReadFile(REAL_PLUGIN_FILE);
  ASSERT_GT(plugin.size(), 8 * 4096u) << REAL_PLUGIN_FILE;
  ScratchFolder folder;
  ASSERT_FALSE(folder.path().empty());
  const std::string path = folder.path() + "/prefix.so";
  WriteFile(path, plugin);

  // The empty file, cuts inside the ELF header, every 4 KiB, and all but the last byte; the one
  // copy is cut shorter and shorter (no dlopen maps it, unless the check lets a prefix through).
  std::vector<size_t> sizes = {0, 1, 4, sizeof(Header) - 1, plugin.size() - 1};
  for (size_t size = 4096; size < plugin.size(); size += 4096) sizes.push_back(size);
  std::sort(sizes.rbegin(), sizes.rend());
  for (size_t size : sizes) {
    ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(size)), 0) << std::strerror(errno);
    std::string reason;
    EXPECT_EQ(PluginLibrary::Load(path, &reason), nullptr) << "the first " << size << " bytes";
    EXPECT_THAT(reason, HasSubstr("prefix.so ")) << size;
    EXPECT_THAT(reason, AnyOf(HasSubstr(" is truncated: "), HasSubstr(" is empty ")))
        << "the first " << size << " bytes: " << reason;
    EXPECT_THAT(reason, HasSubstr("reinstall the plugin or remove it from the plugin folders"))
        << size;
  }
}

TEST(DamagedFile, TheReasonForATruncatedSegmentSaysWhereItEnds) {
  const std::string plugin = ReadFile(REAL_PLUGIN_FILE);
  ScratchFolder folder;
  const std::string path = folder.path() + "/libchorus-shm2.so";
  WriteFile(path, plugin.substr(0, 4096));
  // Where the first loadable segment that does not fit ends, as the file's headers say.
  Header header;
  std::memcpy(&header, plugin.data(), sizeof header);
  size_t index = 0, end = 0;
  for (size_t i = 0; i < header.e_phnum && end <= 4096; ++i) {
    ProgramHeader segment;
    std::memcpy(&segment, plugin.data() + header.e_phoff + i * sizeof segment, sizeof segment);
    if (segment.p_type != PT_LOAD) continue;
    ++index;
    end = segment.p_offset + segment.p_filesz;
  }
  ASSERT_GT(end, 4096u);
  std::string reason;
  EXPECT_EQ(PluginLibrary::Load(path, &reason), nullptr);
  EXPECT_EQ(reason, "libchorus-shm2.so is truncated: its loadable segment " +
                        std::to_string(index) + " ends at byte " + std::to_string(end) +
                        " but the file has 4096 bytes; reinstall the plugin or remove it from the "
                        "plugin folders");
}

// One damaged copy: which bytes change, and what the reason must say ("" where the flip may be
// harmless and the copy may load).
struct Flip {
  std::string name;
  std::function<void(std::string*)> apply;
  std::string expected;
};

template <typename Field>
std::function<void(std::string*)> Set(size_t offset, Field value) {
  return [=](std::string* bytes) { std::memcpy(bytes->data() + offset, &value, sizeof value); };
}

template <typename Field>
std::function<void(std::string*)> Xor(size_t offset, Field mask) {
  return [=](std::string* bytes) {
    Field value;
    std::memcpy(&value, bytes->data() + offset, sizeof value);
    value ^= mask;
    std::memcpy(bytes->data() + offset, &value, sizeof value);
  };
}

std::vector<Flip> FlipsOf(const std::string& plugin) {
  Header header;
  std::memcpy(&header, plugin.data(), sizeof header);
  const uint16_t foreign_machine = header.e_machine == EM_AARCH64 ? EM_X86_64 : EM_AARCH64;
  const Offset beyond = plugin.size();  // a shift that takes any offset past the end
  std::vector<Flip> flips = {
      {"class 32", Set<uint8_t>(EI_CLASS, ELFCLASS32), "is a 32-bit ELF file"},
      {"class 0", Set<uint8_t>(EI_CLASS, ELFCLASSNONE), "is damaged: its ELF class byte is 0"},
      {"big-endian", Set<uint8_t>(EI_DATA, ELFDATA2MSB), "is big-endian"},
      {"byte order 0", Set<uint8_t>(EI_DATA, 0), "is damaged: its ELF byte-order byte is 0"},
      {"ident version 2", Set<uint8_t>(EI_VERSION, 2), "its ELF identification version is 2"},
      {"foreign machine", Set(offsetof(Header, e_machine), foreign_machine), "is built for"},
      {"machine ^ 1", Xor<uint16_t>(offsetof(Header, e_machine), 1), "is built for"},
      {"executable", Set<uint16_t>(offsetof(Header, e_type), ET_EXEC), "is an executable"},
      {"object file", Set<uint16_t>(offsetof(Header, e_type), ET_REL), "is an object file"},
      {"core dump", Set<uint16_t>(offsetof(Header, e_type), ET_CORE), "is a core dump"},
      {"phnum 0", Set<uint16_t>(offsetof(Header, e_phnum), 0), "has no program headers"},
      {"phnum 0xffff", Set<uint16_t>(offsetof(Header, e_phnum), 0xffff),
       "is truncated: its program headers end at byte"},
      {"phnum - 1",
       Set<uint16_t>(offsetof(Header, e_phnum), static_cast<uint16_t>(header.e_phnum - 1)), ""},
      {"phnum + 1",
       Set<uint16_t>(offsetof(Header, e_phnum), static_cast<uint16_t>(header.e_phnum + 1)), ""},
      {"shoff 0", Set<Offset>(offsetof(Header, e_shoff), 0), ""},
      {"shnum 0xffff", Set<uint16_t>(offsetof(Header, e_shnum), 0xffff),
       "is truncated: its section headers end at byte"},
      {"shnum 1", Set<uint16_t>(offsetof(Header, e_shnum), 1), ""},
  };
  for (Offset mask : {Offset{1}, Offset{8}, Offset{0x40}, Offset{0x1000}}) {
    flips.push_back({"phoff ^ " + std::to_string(mask), Xor(offsetof(Header, e_phoff), mask), ""});
    flips.push_back({"shoff ^ " + std::to_string(mask), Xor(offsetof(Header, e_shoff), mask), ""});
  }
  flips.push_back({"phoff past the end", Set<Offset>(offsetof(Header, e_phoff), beyond),
                   "is truncated: its program headers end at byte"});
  flips.push_back({"shoff past the end", Set<Offset>(offsetof(Header, e_shoff), beyond),
                   "is truncated: its section headers start at byte"});
  size_t loadable = 0;
  for (size_t i = 0; i < header.e_phnum; ++i) {
    const size_t at = header.e_phoff + i * sizeof(ProgramHeader);
    ProgramHeader segment;
    std::memcpy(&segment, plugin.data() + at, sizeof segment);
    if (segment.p_type != PT_LOAD) continue;
    const std::string which = "loadable segment " + std::to_string(++loadable);
    const size_t offset = at + offsetof(ProgramHeader, p_offset);
    const size_t file_size = at + offsetof(ProgramHeader, p_filesz);
    for (Offset mask : {Offset{1}, Offset{0x10}, Offset{0x100}, Offset{0x1000}}) {
      flips.push_back({which + " offset ^ " + std::to_string(mask), Xor(offset, mask), ""});
      flips.push_back({which + " file size ^ " + std::to_string(mask),
                       Xor(file_size, static_cast<decltype(segment.p_filesz)>(mask)), ""});
    }
    flips.push_back({which + " offset past the end", Set(offset, segment.p_offset + beyond),
                     "is truncated: its " + which + " ends at byte"});
    flips.push_back({which + " file size past the end", Set(file_size, segment.p_filesz + beyond),
                     "is truncated: its " + which + " ends at byte"});
    flips.push_back({which + " file size 0", Set<decltype(segment.p_filesz)>(file_size, 0), ""});
  }
  return flips;
}

TEST(DamagedFile, CopiesWithFlippedHeaderBytesAreRejectedOrLoad) {
  const std::string plugin = ReadFile(FAKE_PLUGIN_DIR "/libchorus-fake_good.so");
  ASSERT_GE(plugin.size(), sizeof(Header));
  ScratchFolder folder;
  ASSERT_FALSE(folder.path().empty());
  size_t rejected = 0, loaded = 0, number = 0;
  for (const Flip& flip : FlipsOf(plugin)) {
    // A file of its own per copy: a library that loaded may stay mapped after it is released.
    const std::string path = folder.path() + "/flipped_" + std::to_string(number++) + ".so";
    std::string bytes = plugin;
    flip.apply(&bytes);
    ASSERT_NE(bytes, plugin) << flip.name << " changes nothing";
    WriteFile(path, bytes);
    std::string reason;
    if (auto library = PluginLibrary::Load(path, &reason)) {
      EXPECT_TRUE(flip.expected.empty()) << flip.name << " loaded, but must be rejected";
      EXPECT_EQ(library->name(), "fake_good") << flip.name;
      ++loaded;
    } else {
      EXPECT_THAT(reason, HasSubstr("flipped_")) << flip.name;
      if (!flip.expected.empty()) {
        EXPECT_THAT(reason, HasSubstr(flip.expected)) << flip.name;
      }
      ++rejected;
    }
    unlink(path.c_str());
  }
  // Most flips break the file; a few (a section header moved, a spare program header) do not.
  EXPECT_GT(rejected, 40u);
  EXPECT_GT(loaded, 0u);
}

TEST(DamagedFile, AFolderOrAFifoNamedLikeAPluginIsRejected) {
  ScratchFolder folder;
  const std::string directory = folder.path() + "/libchorus-folder.so";
  ASSERT_TRUE(fs::create_directory(directory));
  std::string reason;
  EXPECT_EQ(PluginLibrary::Load(directory, &reason), nullptr);
  EXPECT_THAT(reason, HasSubstr("libchorus-folder.so is a folder, not a shared library"));
  const std::string fifo = folder.path() + "/libchorus-fifo.so";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(PluginLibrary::Load(fifo, &reason), nullptr);  // and does not block opening it
  EXPECT_THAT(reason, HasSubstr("libchorus-fifo.so is not a regular file"));
}

}  // namespace
}  // namespace chorus
