// The fashion_mnist example's data: IDX files raw and gzip-compressed, the four-file directory,
// and a clear error for each way a file can be wrong.
#include <chorus/base/error.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fashion_mnist_files.h"
#include "idx_reader.h"
#include "invalid_argument_of.h"
#include "synthetic_data.h"

namespace fashion_mnist {
namespace {

std::vector<uint8_t> Idx(std::vector<uint32_t> dims, const std::vector<uint8_t>& data,
                         uint8_t type = 0x08) {
  std::vector<uint8_t> bytes = {0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<uint8_t>(d >> shift));
  }
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

class DataDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("chorus_idx_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::vector<uint8_t>& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    return path;
  }
  std::string WriteGz(const std::string& name, const std::vector<uint8_t>& bytes) {
    const std::string path = (dir_ / name).string();
    gzFile file = gzopen(path.c_str(), "wb");
    EXPECT_NE(file, nullptr);
    EXPECT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
    gzclose(file);
    return path;
  }

  // n images of 2x3 pixels (image i filled with 10 i) and labels i mod 10.
  void WriteSet(const std::string& images, const std::string& labels, uint32_t n, bool gz) {
    std::vector<uint8_t> pixels, classes;
    for (uint32_t i = 0; i < n; ++i) {
      pixels.insert(pixels.end(), 6, static_cast<uint8_t>(10 * i));
      classes.push_back(static_cast<uint8_t>(i % 10));
    }
    if (gz) {
      WriteGz(images + ".gz", Idx({n, 2, 3}, pixels));
      WriteGz(labels + ".gz", Idx({n}, classes));
    } else {
      Write(images, Idx({n, 2, 3}, pixels));
      Write(labels, Idx({n}, classes));
    }
  }

  std::filesystem::path dir_;
};

TEST_F(DataDir, RawAndGzipFilesReadTheSame) {
  const std::vector<uint8_t> data = {1, 2, 3, 4, 5, 6};
  const IdxArray raw = ReadIdx(Write("a", Idx({2, 3}, data)));
  const IdxArray gz = ReadIdx(WriteGz("b.gz", Idx({2, 3}, data)));
  EXPECT_EQ(raw.dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(raw.data, data);
  EXPECT_EQ(gz.dims, raw.dims);
  EXPECT_EQ(gz.data, raw.data);
}

TEST_F(DataDir, LoadsTheFourFilesMixingRawAndGzip) {
  WriteSet(kTrainImages, kTrainLabels, 12, /*gz=*/true);
  WriteSet(kTestImages, kTestLabels, 5, /*gz=*/false);
  const auto data = LoadFashionMnist(dir_.string());
  ASSERT_TRUE(data.has_value());
  EXPECT_EQ(data->train.size(), 12);
  EXPECT_EQ(data->test.size(), 5);
  EXPECT_EQ(data->train.rows, 2);
  EXPECT_EQ(data->train.cols, 3);
  EXPECT_FLOAT_EQ(data->train.pixels[6 * 3], 30.0f / 255.0f);
  EXPECT_EQ(data->train.labels[11], 1);
  EXPECT_NE(data->source.find("Fashion-MNIST from"), std::string::npos);
}

TEST_F(DataDir, AnEmptyDirectoryMeansSyntheticDataAndSomeFilesAreAnError) {
  EXPECT_FALSE(LoadFashionMnist(dir_.string()).has_value());
  WriteSet(kTrainImages, kTrainLabels, 3, false);
  const std::string message = test::InvalidArgumentOf([&] { LoadFashionMnist(dir_.string()); });
  EXPECT_NE(message.find("is incomplete: missing t10k-images-idx3-ubyte[.gz], "
                         "t10k-labels-idx1-ubyte[.gz]"),
            std::string::npos)
      << message;
}

TEST_F(DataDir, EachBrokenFileGetsAMessageNamingIt) {
  struct Case {
    std::vector<uint8_t> bytes;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{0, 0}, "truncated: 2 bytes, shorter than the 4-byte IDX magic number"},
      {{0x1f, 0x00, 0x08, 0x01, 0, 0, 0, 0}, "not an IDX file: bad magic number 0x1f000801"},
      {Idx({2}, {0, 0, 0, 0, 0, 0, 0, 0}, 0x0d), "unsupported IDX element type 0x0d"},
      {{0, 0, 8, 3, 0, 0}, "truncated: the header of 3 dimensions needs 16 bytes"},
      {Idx({2, 3}, {1, 2, 3}), "truncated: the header gives dimensions 2x3 (6 bytes of data)"},
      {Idx({2}, {1, 2, 3}), "has 1 unexpected bytes after the 2 bytes of data"},
  };
  for (const Case& c : cases) {
    const std::string path = Write("broken", c.bytes);
    const std::string message = test::InvalidArgumentOf([&] { ReadIdx(path); });
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
  }
  const std::string missing = (dir_ / "absent").string();
  EXPECT_NE(test::InvalidArgumentOf([&] { ReadIdx(missing); }).find("cannot open"),
            std::string::npos);
}

TEST_F(DataDir, ACorruptGzipFileIsAnError) {
  std::vector<uint8_t> gz = {0x1f, 0x8b, 0x08, 0x00, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x03, 0x42};
  const std::string path = Write("bad.gz", gz);
  const std::string message = test::InvalidArgumentOf([&] { ReadIdx(path); });
  EXPECT_NE(message.find("corrupt gzip data"), std::string::npos) << message;
}

TEST(ImageSetFromIdx, ShapesAndLabelsAreChecked) {
  IdxArray images{{2, 1, 1}, {0, 255}};
  IdxArray labels{{3}, {0, 1, 2}};
  EXPECT_NE(test::InvalidArgumentOf([&] {
              ImageSetFromIdx(images, labels, "the train set");
            }).find("the train set: 2 images but 3 labels"),
            std::string::npos);
  labels = {{2}, {0, 10}};
  EXPECT_NE(test::InvalidArgumentOf([&] {
              ImageSetFromIdx(images, labels, "the test set");
            }).find("the test set: label 1 is 10; classes are 0..9"),
            std::string::npos);
  EXPECT_NE(test::InvalidArgumentOf([&] {
              ImageSetFromIdx(labels, labels, "x");
            }).find("x: the images file has 1 dimensions; expected 3"),
            std::string::npos);
}

TEST(SyntheticData, HasFashionMnistShapesAndIsDeterministic) {
  const TrainAndTest a = GenerateSyntheticData(4, 100, 20);
  const TrainAndTest b = GenerateSyntheticData(4, 100, 20);
  EXPECT_EQ(a.train.size(), 100);
  EXPECT_EQ(a.test.size(), 20);
  EXPECT_EQ(a.train.pixels.size(), 100u * 28 * 28);
  EXPECT_EQ(a.train.pixels, b.train.pixels);
  EXPECT_EQ(a.test.labels, b.test.labels);
  for (int32_t label : a.train.labels) {
    EXPECT_GE(label, 0);
    EXPECT_LT(label, 10);
  }
  EXPECT_NE(a.source.find("synthetic"), std::string::npos);
}

}  // namespace
}  // namespace fashion_mnist
