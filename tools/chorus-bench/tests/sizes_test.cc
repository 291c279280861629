// Size parsing (suffixes, errors) and the -b/-e/-f sweep.
#include "sizes.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace chorus::bench {
namespace {

TEST(ParseSize, NumbersAndSuffixes) {
  EXPECT_EQ(ParseSize("0"), 0u);
  EXPECT_EQ(ParseSize("1"), 1u);
  EXPECT_EQ(ParseSize("1001"), 1001u);
  EXPECT_EQ(ParseSize("4K"), 4096u);
  EXPECT_EQ(ParseSize("4k"), 4096u);
  EXPECT_EQ(ParseSize("64M"), 64u << 20);
  EXPECT_EQ(ParseSize("2G"), uint64_t{2} << 30);
}

void ExpectBadSize(const std::string& text, const std::string& why) {
  try {
    ParseSize(text);
    FAIL() << text << " parsed";
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("bad size '" + text + "'"), std::string::npos) << message;
    EXPECT_NE(message.find(why), std::string::npos) << message;
    EXPECT_NE(message.find("K, M or G"), std::string::npos) << message;
  }
}

TEST(ParseSize, ErrorsNameTheProblem) {
  ExpectBadSize("4X", "unknown suffix 'X'");
  ExpectBadSize("4KB", "unknown suffix 'KB'");
  ExpectBadSize("K", "no number");
  ExpectBadSize("", "no number");
  ExpectBadSize("-4", "no number");
  ExpectBadSize("99999999999999999999", "too large");
  ExpectBadSize("99999999999999G", "too large");
}

TEST(FormatSize, ExactMultiplesGetSuffixes) {
  EXPECT_EQ(FormatSize(0), "0");
  EXPECT_EQ(FormatSize(1000), "1000");
  EXPECT_EQ(FormatSize(4096), "4K");
  EXPECT_EQ(FormatSize(3 << 20), "3M");
  EXPECT_EQ(FormatSize(uint64_t{1} << 30), "1G");
}

TEST(SizeSweep, MultipliesUpToTheMaximum) {
  EXPECT_EQ(SizeSweep(4096, 65536, 4), (std::vector<uint64_t>{4096, 16384, 65536}));
  EXPECT_EQ(SizeSweep(4096, 100000, 4), (std::vector<uint64_t>{4096, 16384, 65536}));
  EXPECT_EQ(SizeSweep(8, 8, 2), (std::vector<uint64_t>{8}));
  EXPECT_EQ(SizeSweep(0, 49, 7), (std::vector<uint64_t>{0, 1, 7, 49}));
  EXPECT_EQ(SizeSweep(0, 0, 2), (std::vector<uint64_t>{0}));
  // No overflow near the top of the range.
  const auto top = SizeSweep(uint64_t{1} << 62, UINT64_MAX, 2);
  EXPECT_EQ(top, (std::vector<uint64_t>{uint64_t{1} << 62, uint64_t{1} << 63}));
}

TEST(SizeSweep, RejectsMinAboveMaxAndSmallFactors) {
  try {
    SizeSweep(8 << 20, 4096, 2);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "-b 8M is larger than -e 4K; the minimum size must not exceed the maximum");
  }
  EXPECT_THROW(SizeSweep(1, 8, 1), std::invalid_argument);
  EXPECT_THROW(SizeSweep(1, 8, 0), std::invalid_argument);
}

}  // namespace
}  // namespace chorus::bench
