// collie-train's options: defaults, both value spellings, and errors naming the option.
#include "training_demo/options.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "training_demo/gradient_buckets.h"

namespace collie {
namespace train {
namespace {

Status parse(std::vector<std::string> args, Options* o) {
  args.insert(args.begin(), "collie-train");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  return parseOptions(static_cast<int>(argv.size()), argv.data(), o);
}

TEST(Options, Defaults) {
  Options o;
  ASSERT_TRUE(parse({}, &o).ok());
  EXPECT_EQ(o.epochs, 10);
  EXPECT_EQ(o.batch, 128);
  EXPECT_EQ(o.lr, 0.1);
  EXPECT_EQ(o.hidden, (std::vector<int>{256, 128}));
  EXPECT_EQ(o.dataDir, "/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(o.overlap, Overlap::kAuto);
}

TEST(Options, ParsesEveryKind) {
  Options o;
  const Status st = parse({"--epochs", "3", "--batch=10", "--lr", "0.05", "--momentum=0.9",
                           "--hidden", "32,16,8", "--no-overlap", "--resume", "--checkpoint",
                           "/tmp/x", "--steps", "0", "--drop-last", "--bucket-mb", "0.5"},
                          &o);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(o.epochs, 3);
  EXPECT_EQ(o.batch, 10);
  EXPECT_EQ(o.momentum, 0.9);
  EXPECT_EQ(o.hidden, (std::vector<int>{32, 16, 8}));
  EXPECT_EQ(o.overlap, Overlap::kOff);
  EXPECT_TRUE(o.resume && o.dropLast);
  EXPECT_EQ(o.maxSteps, 0);
  EXPECT_EQ(o.bucketMb, 0.5);
  ASSERT_TRUE(parse({"--overlap", "on", "--hidden", "none"}, &o).ok());
  EXPECT_EQ(o.overlap, Overlap::kOn);
  EXPECT_TRUE(o.hidden.empty());
}

TEST(Options, ErrorsNameTheOption) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--batch", "0"}, "--batch"},
      {{"--lr", "fast"}, "--lr"},
      {{"--epochs"}, "--epochs needs a value"},
      {{"--bogus"}, "unknown option --bogus"},
      {{"stray"}, "unexpected argument"},
      {{"--hidden", "64,x"}, "--hidden"},
      {{"--overlap", "maybe"}, "--overlap"},
      {{"--resume"}, "--resume needs --checkpoint"},
  };
  for (const auto& [args, part] : cases) {
    Options o;
    const Status st = parse(args, &o);
    ASSERT_FALSE(st.ok()) << args[0];
    EXPECT_NE(st.message().find(part), std::string::npos) << st.message();
  }
}

TEST(Buckets, CoverTheArrayInAlignedPieces) {
  const std::vector<BucketRange> b = makeBuckets(1000, 300);
  ASSERT_EQ(b.size(), 4u);  // 288 + 288 + 288 + 136
  size_t next = 0;
  for (const BucketRange& r : b) {
    EXPECT_EQ(r.begin, next);
    EXPECT_EQ(r.begin % 16, 0u);
    EXPECT_LE(r.end - r.begin, 300u);
    next = r.end;
  }
  EXPECT_EQ(next, 1000u);
  EXPECT_EQ(makeBuckets(10, 1 << 20).size(), 1u);
  EXPECT_EQ(makeBuckets(5, 1).size(), 5u);  // a cap below the alignment is kept
}

TEST(Buckets, WithoutACommunicatorNothingIsSent) {
  std::vector<float> g(100, 1.0f);
  GradientBuckets buckets(nullptr, g.data(), g.size(), 32, true);
  buckets.begin();
  buckets.ready(50);
  double comm = 0;
  EXPECT_TRUE(buckets.finish(&comm).ok());
  EXPECT_EQ(comm, 0.0);
  EXPECT_EQ(g[99], 1.0f);
}

}  // namespace
}  // namespace train
}  // namespace collie
