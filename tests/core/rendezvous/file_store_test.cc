// The file store's key escaping.
#include "store_test_support.h"

namespace chorus {
namespace {

TEST(FileStoreTest, KeysStayInsideTheDirectory) {
  TempDirectory parent;
  const std::string directory = parent.path() + "/store";
  const auto store = MakeFileStore(directory);
  store->Set("../outside", ToBytes("x"));
  store->Set("a/b", ToBytes("y"));
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(parent.path())) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 1u) << "only the store's directory";
  EXPECT_EQ(store->Describe(), "file store " + directory);
}

}  // namespace
}  // namespace chorus
