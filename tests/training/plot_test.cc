// --plot: the PNG gnuplot draws from a run's curves (skipped where gnuplot is not installed),
// and the clear error when it is missing.
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/training/train_test_util.h"
#include "training_demo/metrics.h"

namespace collie {
namespace train {
namespace {

std::vector<MetricsRow> stepRows() {
  std::vector<MetricsRow> rows;
  for (int s = 1; s <= 20; ++s) rows.push_back({1 + s / 10, s * 10, 2.0 / s, -1, 1000, 0.1});
  return rows;
}

TEST(Plot, DrawsAPng) {
  if (findGnuplot().empty())
    GTEST_SKIP() << "gnuplot is not installed (apt-get install gnuplot-nox)";
  testing::TempDir d;
  const std::string png = d.file("it's the curves.png");  // quotes and spaces survive
  const Status st =
      plotCurves(png, stepRows(), {{1, 100, 0.5, 0.80, 0, 0}, {2, 200, 0.3, 0.85, 0, 0}});
  ASSERT_TRUE(st.ok()) << st.message();
  const std::string bytes = testing::readFile(png);
  ASSERT_GT(bytes.size(), 8u);
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
}

TEST(Plot, MissingGnuplotIsAClearError) {
  const char* old = getenv("PATH");
  const std::string saved = old ? old : "";
  setenv("PATH", "/nonexistent", 1);
  const Status st = plotCurves("/tmp/never.png", stepRows(), {});
  setenv("PATH", saved.c_str(), 1);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("gnuplot-nox"), std::string::npos) << st.message();
}

TEST(MetricsCsvFile, HeaderOnceAndRowsAppended) {
  testing::TempDir d;
  const std::string path = d.file("m.csv");
  {
    MetricsCsv csv;
    ASSERT_TRUE(csv.open(path, false).ok());
    csv.write({1, 10, 0.5, -1, 1234.5, 0.125});
  }
  {
    MetricsCsv csv;
    ASSERT_TRUE(csv.open(path, true).ok());  // a resumed run appends, no second header
    csv.write({1, 20, 0.25, 0.875, 1000, 0.0625});
  }
  EXPECT_EQ(testing::readFile(path),
            "epoch,step,loss,accuracy,samples_per_s,comm_wait\n"
            "1,10,0.500000,nan,1234.5,0.1250\n"
            "1,20,0.250000,0.8750,1000.0,0.0625\n");
}

}  // namespace
}  // namespace train
}  // namespace collie
