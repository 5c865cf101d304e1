// Option parsing: "--name value" or "--name=value", every number range-checked.
#include "training_demo/options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <sstream>

namespace collie {
namespace train {
namespace {

Status parseInt(const std::string& name, const std::string& v, int64_t lo, int64_t hi,
                int64_t* out) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || x < lo || x > hi) {
    return Status::error("--" + name + " wants an integer from " + std::to_string(lo) + " to " +
                         std::to_string(hi) + ", got '" + v + "'");
  }
  *out = x;
  return Status();
}

Status parseDouble(const std::string& name, const std::string& v, double lo, double hi,
                   double* out) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(x) || x < lo || x > hi) {
    std::ostringstream msg;
    msg << "--" << name << " wants a number from " << lo << " to " << hi << ", got '" << v << "'";
    return Status::error(msg.str());
  }
  *out = x;
  return Status();
}

Status parseWidths(const std::string& v, std::vector<int>* out) {
  out->clear();
  if (v.empty() || v == "none") return Status();  // no hidden layer: a linear classifier
  std::istringstream in(v);
  for (std::string part; std::getline(in, part, ',');) {
    int64_t w;
    COLLIE_TRAIN_RETURN_IF_ERROR(parseInt("hidden", part, 1, 1 << 16, &w));
    out->push_back(static_cast<int>(w));
  }
  return Status();
}

Status parseOverlap(const std::string& v, Overlap* out) {
  if (v == "auto") {
    *out = Overlap::kAuto;
  } else if (v == "on") {
    *out = Overlap::kOn;
  } else if (v == "off") {
    *out = Overlap::kOff;
  } else {
    return Status::error("--overlap wants on, off or auto, got '" + v + "'");
  }
  return Status();
}

Status parseSchedule(const std::string& v, LrSchedule* out) {
  if (v == "constant") {
    *out = LrSchedule::kConstant;
  } else if (v == "cosine") {
    *out = LrSchedule::kCosine;
  } else {
    return Status::error("--lr-schedule wants constant or cosine, got '" + v + "'");
  }
  return Status();
}

using Setter = std::function<Status(const std::string&)>;

template <typename T>
Setter intOpt(const char* name, T* field, int64_t lo, int64_t hi) {
  return [=](const std::string& v) {
    int64_t x;
    COLLIE_TRAIN_RETURN_IF_ERROR(parseInt(name, v, lo, hi, &x));
    *field = static_cast<T>(x);
    return Status();
  };
}

Setter doubleOpt(const char* name, double* field, double lo, double hi) {
  return [=](const std::string& v) { return parseDouble(name, v, lo, hi, field); };
}

Setter stringOpt(std::string* field) {
  return [=](const std::string& v) {
    *field = v;
    return Status();
  };
}

}  // namespace

Status parseOptions(int argc, char** argv, Options* o) {
  const std::map<std::string, Setter> valued = {
      {"epochs", intOpt("epochs", &o->epochs, 0, 1000000)},
      {"batch", intOpt("batch", &o->batch, 1, 1 << 24)},
      {"lr", doubleOpt("lr", &o->lr, 0, 1e6)},
      {"momentum", doubleOpt("momentum", &o->momentum, 0, 0.999999)},
      {"weight-decay", doubleOpt("weight-decay", &o->weightDecay, 0, 1e6)},
      {"hidden", [o](const std::string& v) { return parseWidths(v, &o->hidden); }},
      {"seed", intOpt("seed", &o->seed, 0, INT64_MAX)},
      {"data", stringOpt(&o->dataDir)},
      {"train-limit", intOpt("train-limit", &o->trainLimit, 0, INT64_MAX)},
      {"bucket-mb", doubleOpt("bucket-mb", &o->bucketMb, 1e-5, 1 << 20)},
      {"checkpoint", stringOpt(&o->checkpointDir)},
      {"metrics", stringOpt(&o->metricsFile)},
      {"plot", stringOpt(&o->plotFile)},
      {"steps", intOpt("steps", &o->maxSteps, 0, INT64_MAX)},
      {"log-every", intOpt("log-every", &o->logEvery, 1, INT32_MAX)},
      {"overlap", [o](const std::string& v) { return parseOverlap(v, &o->overlap); }},
      {"lr-schedule", [o](const std::string& v) { return parseSchedule(v, &o->schedule); }},
  };
  const std::map<std::string, bool*> flags = {
      {"drop-last", &o->dropLast}, {"resume", &o->resume}, {"help", &o->help}};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    if (arg == "-h") arg = "--help";
    if (arg.rfind("--", 0) != 0) return Status::error("unexpected argument '" + arg + "'");
    std::string name = arg.substr(2);
    const size_t eq = name.find('=');
    const bool inlineValue = eq != std::string::npos;
    if (inlineValue) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    if (name == "no-overlap") {
      o->overlap = Overlap::kOff;
    } else if (name == "no-progress") {
      o->progress = false;
    } else if (auto f = flags.find(name); f != flags.end()) {
      *f->second = true;
    } else if (auto s = valued.find(name); s != valued.end()) {
      if (!inlineValue) {
        if (i + 1 >= argc) return Status::error("--" + name + " needs a value");
        value = argv[++i];
      }
      COLLIE_TRAIN_RETURN_IF_ERROR(s->second(value));
    } else {
      return Status::error("unknown option --" + name + " (see --help)");
    }
  }
  if (o->resume && o->checkpointDir.empty()) {
    return Status::error("--resume needs --checkpoint DIR (the folder to resume from)");
  }
  return Status();
}

std::string usage() {
  return R"(usage: collie-run -n N collie-train [options]   (or collie-train alone: one rank)
Data-parallel training of an MLP on Fashion-MNIST (or MNIST) over Collie.
  --epochs N         epochs to run (default 10)
  --batch B          global batch, split across the ranks (default 128)
  --lr X             learning rate (default 0.1)
  --lr-schedule S    cosine (default: decays to 0 over --epochs) or constant
  --momentum X       SGD momentum (default 0)
  --weight-decay X   L2 weight decay (default 0)
  --hidden W1,W2     hidden layer widths, or none (default 256,128)
  --seed S           seed of initialisation and shuffling (default 1)
  --data DIR         folder of the IDX files (default /usr/share/datasets/fashion-mnist)
  --train-limit N    train on the first N samples only (default: all)
  --drop-last        cut each epoch to whole global batches (default: pad to the world size)
  --bucket-mb X      gradient bucket size in MiB (default 0.25)
  --overlap MODE     on: reduce each bucket during backward; off: after it; auto (default):
                     on when each local rank has a spare core for Collie's progress thread
  --no-overlap       the same as --overlap off
  --checkpoint DIR   save a checkpoint every epoch (and at the end) in DIR
  --resume           continue from DIR/checkpoint.bin (same settings required)
  --metrics FILE     write a CSV row every --log-every steps and one per epoch
  --plot FILE.png    draw loss and accuracy curves with gnuplot at the end
  --steps K          stop after K steps in all
  --log-every N      steps per metrics row (default 50)
  --no-progress      no progress bar
)";
}

}  // namespace train
}  // namespace collie
