// The IDX reader on tiny files the test writes: gzip'd and plain, and every way a file can be
// missing, corrupt or inconsistent, each with a message that says which file and what.
#include "training_demo/idx_reader.h"

#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/training/train_test_util.h"

namespace collie {
namespace train {
namespace {

using testing::TempDir;
using testing::writeIdx;

const std::vector<uint8_t> kPixels{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};  // 3 images of 2x2

void expectError(const Status& st, const std::vector<std::string>& parts) {
  ASSERT_FALSE(st.ok());
  for (const std::string& p : parts)
    EXPECT_NE(st.message().find(p), std::string::npos) << "'" << p << "' not in: " << st.message();
}

void writeBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

TEST(IdxReader, ReadsGzipAndPlainFiles) {
  TempDir d;
  for (bool gz : {true, false}) {
    const std::string path = d.file(gz ? "a.gz" : "a");
    writeIdx(path, {3, 2, 2}, kPixels, gz);
    IdxArray arr;
    const Status st = readIdx(path, 3, &arr);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(arr.dims, (std::vector<uint32_t>{3, 2, 2}));
    EXPECT_EQ(arr.data, kPixels);
  }
}

TEST(IdxReader, RejectsBadHeaders) {
  TempDir d;
  IdxArray arr;
  writeBytes(d.file("magic"), {1, 0, 8, 1, 0, 0, 0, 0});
  expectError(readIdx(d.file("magic"), 1, &arr), {d.file("magic"), "bad magic"});
  writeBytes(d.file("type"), {0, 0, 0x0D, 1, 0, 0, 0, 0});
  expectError(readIdx(d.file("type"), 1, &arr), {"0x08"});
  writeIdx(d.file("dims"), {3, 2, 2}, kPixels, true);
  expectError(readIdx(d.file("dims"), 1, &arr), {"3 dimensions, expected 1"});
  writeBytes(d.file("short"), {0, 0});
  expectError(readIdx(d.file("short"), 1, &arr), {"shorter than"});
  writeBytes(d.file("header"), {0, 0, 8, 3, 0, 0, 0, 3});
  expectError(readIdx(d.file("header"), 3, &arr), {"truncated header"});
}

TEST(IdxReader, RejectsTruncatedAndTrailingPayload) {
  TempDir d;
  IdxArray arr;
  std::vector<uint8_t> fewer(kPixels.begin(), kPixels.end() - 1), more = kPixels;
  more.push_back(0);
  // The header is written for 3 images, the payload is one byte short or long.
  writeIdx(d.file("t.gz"), {3, 2, 2}, fewer, true);
  expectError(readIdx(d.file("t.gz"), 3, &arr), {"t.gz", "corrupt", "truncated"});
  writeIdx(d.file("x.gz"), {3, 2, 2}, more, true);
  expectError(readIdx(d.file("x.gz"), 3, &arr), {"trailing data"});
}

TEST(IdxReader, RejectsCorruptGzip) {
  TempDir d;
  std::vector<uint8_t> big(4000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7 % 251);
  writeIdx(d.file("ok.gz"), {1000, 2, 2}, big, true);
  std::vector<uint8_t> bytes;
  {
    std::ifstream in(d.file("ok.gz"), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_GT(bytes.size(), 40u);
  IdxArray arr;
  std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + bytes.size() / 2);
  writeBytes(d.file("cut.gz"), cut);
  expectError(readIdx(d.file("cut.gz"), 3, &arr), {"cut.gz", "corrupt"});
  std::vector<uint8_t> flipped = bytes;
  flipped[bytes.size() - 6] ^= 0xFF;  // inside the CRC-32 trailer
  writeBytes(d.file("crc.gz"), flipped);
  expectError(readIdx(d.file("crc.gz"), 3, &arr), {"crc.gz", "corrupt"});
}

TEST(IdxReader, MissingFileSaysHowToGetIt) {
  TempDir d;
  Dataset ds;
  expectError(loadSplit(d.path(), "train", 10, &ds),
              {"train-images-idx3-ubyte.gz", "dataset-fashion-mnist", "--data"});
  IdxArray arr;
  expectError(readIdx(d.file("nothing"), 1, &arr), {"cannot open", "nothing"});
}

TEST(IdxReader, LoadsASplitAndChecksItsParts) {
  TempDir d;
  writeIdx(d.file("train-images-idx3-ubyte.gz"), {3, 2, 2}, kPixels, true);
  writeIdx(d.file("train-labels-idx1-ubyte"), {3}, {0, 9, 4}, false);  // plain works too
  Dataset ds;
  Status st = loadSplit(d.path(), "train", 10, &ds);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(ds.count, 3u);
  EXPECT_EQ(ds.pixelsPerImage(), 4);
  EXPECT_EQ(ds.labels, (std::vector<uint8_t>{0, 9, 4}));
  writeIdx(d.file("train-labels-idx1-ubyte"), {2}, {0, 9}, false);
  expectError(loadSplit(d.path(), "train", 10, &ds), {"3 images but", "2 labels"});
  writeIdx(d.file("train-labels-idx1-ubyte"), {3}, {0, 10, 4}, false);
  expectError(loadSplit(d.path(), "train", 10, &ds), {"label 10"});
}

}  // namespace
}  // namespace train
}  // namespace collie
