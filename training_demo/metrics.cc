// The metrics CSV, the gnuplot script behind --plot, and the progress bar.
#include "training_demo/metrics.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace collie {
namespace train {

MetricsCsv::~MetricsCsv() {
  if (f_) fclose(f_);
}

Status MetricsCsv::open(const std::string& path, bool append) {
  struct stat st;
  const bool hasRows = append && stat(path.c_str(), &st) == 0 && st.st_size > 0;
  f_ = fopen(path.c_str(), append ? "a" : "w");
  if (!f_) return Status::error("cannot write metrics file " + path + ": " + strerror(errno));
  if (!hasRows) {
    fputs("epoch,step,loss,accuracy,samples_per_s,comm_wait\n", f_);
    fflush(f_);
  }
  return Status();
}

void MetricsCsv::write(const MetricsRow& r) {
  if (!f_) return;
  char acc[32] = "nan";
  if (r.accuracy >= 0) snprintf(acc, sizeof(acc), "%.4f", r.accuracy);
  fprintf(f_, "%d,%lld,%.6f,%s,%.1f,%.4f\n", r.epoch, static_cast<long long>(r.step), r.loss, acc,
          r.samplesPerSec, r.commShare);
  fflush(f_);
}

std::string findGnuplot() {
  const char* path = getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/gnuplot";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

Status requireGnuplot() {
  if (!findGnuplot().empty()) return Status();
  return Status::error(
      "--plot needs gnuplot, which is not on PATH: apt-get install gnuplot-nox (make demo "
      "installs it)");
}

namespace {

Status writeText(const std::string& path, const std::string& text) {
  FILE* f = fopen(path.c_str(), "w");
  if (!f) return Status::error("cannot write " + path + ": " + strerror(errno));
  const bool ok = fwrite(text.data(), 1, text.size(), f) == text.size();
  if (fclose(f) != 0 || !ok) return Status::error("cannot write " + path);
  return Status();
}

// A gnuplot single-quoted string: a quote inside is written twice.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// Runs gnuplot on a script without a shell (no quoting of paths); its exit status, or -1.
int runGnuplot(const std::string& gnuplot, const std::string& script) {
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    execl(gnuplot.c_str(), gnuplot.c_str(), script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

Status plotCurves(const std::string& png, const std::vector<MetricsRow>& steps,
                  const std::vector<MetricsRow>& epochs) {
  COLLIE_TRAIN_RETURN_IF_ERROR(requireGnuplot());
  const std::string gnuplot = findGnuplot();
  std::ostringstream loss, acc;
  for (const MetricsRow& r : steps) loss << r.step << ' ' << r.loss << '\n';
  for (const MetricsRow& r : epochs) {
    if (r.accuracy >= 0) acc << r.epoch << ' ' << 100 * r.accuracy << '\n';
  }
  const std::string base = png + ".tmp";
  COLLIE_TRAIN_RETURN_IF_ERROR(writeText(base + ".loss", loss.str()));
  COLLIE_TRAIN_RETURN_IF_ERROR(writeText(base + ".acc", acc.str()));
  std::ostringstream gp;
  gp << "set terminal png size 1200,480\n"
     << "set output " << quoted(png) << "\n"
     << "set multiplot layout 1,2 title 'collie-train'\n"
     << "set grid\nset xlabel 'step'\nset ylabel 'training loss'\n"
     << "plot " << quoted(base + ".loss") << " using 1:2 with lines title 'loss'\n"
     << "set xlabel 'epoch'\nset ylabel 'test accuracy (%)'\n"
     << "plot " << quoted(base + ".acc") << " using 1:2 with linespoints title 'accuracy'\n"
     << "unset multiplot\n";
  COLLIE_TRAIN_RETURN_IF_ERROR(writeText(base + ".gp", gp.str()));
  const int rc = runGnuplot(gnuplot, base + ".gp");
  for (const char* ext : {".loss", ".acc", ".gp"}) unlink((base + ext).c_str());
  if (rc != 0) {
    return Status::error("gnuplot failed to draw " + png + " (exit status " + std::to_string(rc) +
                         ")");
  }
  return Status();
}

namespace {
double nowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

ProgressBar::ProgressBar(bool enabled, int epoch, int epochs, size_t total)
    : enabled_(enabled && isatty(STDERR_FILENO)), epoch_(epoch), epochs_(epochs), total_(total) {}

void ProgressBar::update(size_t done, double loss, double samplesPerSec) {
  if (!enabled_) return;
  const double now = nowSeconds();
  if (done < total_ && now - lastDraw_ < 0.1) return;
  lastDraw_ = now;
  constexpr int kWidth = 30;
  const int filled = total_ ? static_cast<int>(kWidth * done / total_) : kWidth;
  char bar[kWidth + 1];
  for (int i = 0; i < kWidth; ++i) bar[i] = i < filled ? '#' : '.';
  bar[kWidth] = '\0';
  fprintf(stderr, "\repoch %d/%d [%s] %zu/%zu  %.0f samples/s  loss %.4f ", epoch_, epochs_, bar,
          done, total_, samplesPerSec, loss);
  fflush(stderr);
}

void ProgressBar::finish() {
  if (!enabled_) return;
  fprintf(stderr, "\r\033[K");  // clear the bar: the epoch summary line replaces it
  fflush(stderr);
}

}  // namespace train
}  // namespace collie
