// The training loop: set-up (data, model, optional resume), steps (gather, forward, loss,
// backward with bucketed AllReduce, SGD), and the end of each epoch (evaluation on rank 0,
// checkpoint, a barrier, logs).
#include "training_demo/trainer.h"

#include <sched.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "training_demo/checkpoint.h"
#include "training_demo/gradient_buckets.h"
#include "training_demo/idx_reader.h"
#include "training_demo/metrics.h"
#include "training_demo/mlp.h"
#include "training_demo/rng.h"
#include "training_demo/sampler.h"
#include "training_demo/sgd.h"

namespace collie {
namespace train {
namespace {

using Clock = std::chrono::steady_clock;

// The batch's loss and accuracy ride in front of the gradients, so the AllReduce that averages
// the gradients also gives every rank the global batch's figures at no extra collective. 16
// floats keep the gradients 64-byte aligned.
constexpr size_t kStatSlots = 16;
constexpr int kClasses = 10;

// --overlap auto: overlap pays only when Collie's progress thread gets a core of its own next
// to each rank's compute thread. Local ranks come from the launcher (collie-run, torchrun,
// mpirun); without that, every rank is assumed to be on this host.
bool resolveOverlap(Overlap mode, int world, std::string* why) {
  if (mode != Overlap::kAuto) {
    *why = mode == Overlap::kOn ? "--overlap on" : "--overlap off";
    return mode == Overlap::kOn;
  }
  int local = world;
  for (const char* v : {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"}) {
    if (const char* s = getenv(v)) local = std::max(1, atoi(s));
  }
  cpu_set_t set;
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cores = CPU_COUNT(&set);
  const bool on = world > 1 && cores >= 2 * local;
  *why = "auto: " + std::to_string(local) + " local rank" + (local == 1 ? "" : "s") + " on " +
         std::to_string(cores) + " core" + (cores == 1 ? "" : "s") +
         (on ? "" : ", no spare core for the progress thread");
  return on;
}

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Sums over an interval of steps (a log interval, an epoch, the run).
struct Meter {
  int64_t steps = 0, samples = 0;
  double stepSeconds = 0, commSeconds = 0;
  double lossSum = 0, correct = 0;  // sums over samples
  void add(const Meter& m) {
    steps += m.steps;
    samples += m.samples;
    stepSeconds += m.stepSeconds;
    commSeconds += m.commSeconds;
    lossSum += m.lossSum;
    correct += m.correct;
  }
  double loss() const { return samples ? lossSum / samples : 0; }
  double accuracy() const { return samples ? correct / samples : 0; }
  double rate() const { return stepSeconds > 0 ? samples / stepSeconds : 0; }
  double commShare() const { return stepSeconds > 0 ? commSeconds / stepSeconds : 0; }
};

class Trainer {
 public:
  Trainer(const Options& o, Communicator* comm)
      : o_(o), comm_(comm), rank_(comm ? comm->rank() : 0), world_(comm ? comm->size() : 1) {}

  Status setUp();
  Status run(RunSummary* summary);

 private:
  Status loadData();
  std::string configString() const;
  Status restore();
  Status checkSameSettings(size_t capElems);
  void printHeader() const;
  void gather(const Dataset& d, const std::vector<uint32_t>& idx, std::vector<float>* x,
              std::vector<uint8_t>* y) const;
  Status step(size_t s, Meter* m);
  Status runEpoch(bool* stopped);
  Status endEpoch(const Meter& epoch);
  double evaluate();
  Status save();
  void log(const char* fmt, ...) const __attribute__((format(printf, 2, 3)));

  const Options& o_;
  Communicator* comm_;
  const int rank_, world_;
  Dataset train_, test_;
  float scale_ = 1, shift_ = 0;  // pixel normalisation: x = byte * scale_ + shift_
  uint32_t dataCrc_ = 0;
  std::unique_ptr<Mlp<float>> model_;
  std::vector<float> params_, grads_;  // grads_: kStatSlots, then the flat layout
  std::unique_ptr<Sgd> sgd_;
  std::unique_ptr<DistributedSampler> sampler_;
  std::unique_ptr<GradientBuckets> buckets_;
  size_t blockElems_ = 0;
  bool overlap_ = false;
  std::string overlapWhy_;
  Rng rng_;
  TrainState pos_;  // only epoch, stepInEpoch and globalStep are kept current
  Workspace<float> ws_;
  std::vector<float> x_;
  std::vector<uint8_t> y_;
  std::vector<uint32_t> idx_;
  MetricsCsv csv_;
  std::vector<MetricsRow> stepRows_, epochRows_;
  Meter total_, interval_;
  double lastAccuracy_ = -1;
};

void Trainer::log(const char* fmt, ...) const {
  if (rank_ != 0) return;
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  fflush(stdout);
}

Status Trainer::loadData() {
  COLLIE_TRAIN_RETURN_IF_ERROR(loadSplit(o_.dataDir, "train", kClasses, &train_));
  COLLIE_TRAIN_RETURN_IF_ERROR(loadSplit(o_.dataDir, "t10k", kClasses, &test_));
  if (test_.rows != train_.rows || test_.cols != train_.cols) {
    return Status::error("the test images in " + o_.dataDir + " are not the training images' " +
                         std::to_string(train_.rows) + "x" + std::to_string(train_.cols));
  }
  if (o_.trainLimit > 0 && o_.trainLimit < train_.count) {
    train_.count = static_cast<uint32_t>(o_.trainLimit);
    train_.pixels.resize(static_cast<size_t>(train_.count) * train_.pixelsPerImage());
    train_.labels.resize(train_.count);
  }
  // Standardise with the training set's mean and deviation: the same numbers on every rank.
  double sum = 0, sq = 0;
  for (uint8_t p : train_.pixels) {
    sum += p;
    sq += static_cast<double>(p) * p;
  }
  const double n = static_cast<double>(train_.pixels.size());
  const double mean = sum / n, stddev = std::sqrt(std::max(sq / n - mean * mean, 1e-12));
  scale_ = static_cast<float>(1.0 / stddev);
  shift_ = static_cast<float>(-mean / stddev);
  dataCrc_ = static_cast<uint32_t>(crc32(0L, train_.pixels.data(), train_.pixels.size()));
  dataCrc_ = static_cast<uint32_t>(crc32(dataCrc_, train_.labels.data(), train_.labels.size()));
  return Status();
}

std::string Trainer::configString() const {
  std::ostringstream c;
  c.precision(17);
  c << "model=";
  for (size_t i = 0; i < model_->sizes().size(); ++i) {
    c << (i ? "-" : "") << model_->sizes()[i];
  }
  c << "\nbatch=" << o_.batch << "\nlr=" << o_.lr << "\nmomentum=" << o_.momentum
    << "\nweight_decay=" << o_.weightDecay << "\nseed=" << o_.seed << "\ndrop_last=" << o_.dropLast
    << "\ntrain_samples=" << train_.count << "\ntrain_data_crc32=" << dataCrc_ << "\n";
  // The cosine schedule spans all epochs, so with it the epoch count changes the arithmetic.
  if (o_.schedule == LrSchedule::kCosine) c << "lr_schedule=cosine\nepochs=" << o_.epochs << "\n";
  return c.str();
}

Status Trainer::setUp() {
  // Before the work, not after it: every rank checks, so none is left waiting for rank 0.
  if (!o_.plotFile.empty()) COLLIE_TRAIN_RETURN_IF_ERROR(requireGnuplot());
  COLLIE_TRAIN_RETURN_IF_ERROR(loadData());
  std::vector<int> sizes{train_.pixelsPerImage()};
  sizes.insert(sizes.end(), o_.hidden.begin(), o_.hidden.end());
  sizes.push_back(kClasses);
  model_ = std::make_unique<Mlp<float>>(sizes);
  params_.resize(model_->numParams());
  grads_.assign(kStatSlots + model_->numParams(), 0.0f);
  rng_.reseed(o_.seed);
  model_->init(params_.data(), rng_);  // the same seed gives the same model on every rank
  sgd_ = std::make_unique<Sgd>(SgdConfig{o_.lr, o_.momentum, o_.weightDecay}, params_.size());
  sampler_ = std::make_unique<DistributedSampler>(train_.count, o_.batch, rank_, world_, o_.seed,
                                                  o_.dropLast);
  const size_t capElems = static_cast<size_t>(o_.bucketMb * (1 << 20) / sizeof(float));
  overlap_ = resolveOverlap(o_.overlap, world_, &overlapWhy_);
  buckets_ =
      std::make_unique<GradientBuckets>(comm_, grads_.data(), grads_.size(), capElems, overlap_);
  // Small enough that a bucket launches soon after backward passes its end.
  blockElems_ = overlap_ ? std::max<size_t>(capElems / 4, 4096) : grads_.size();
  COLLIE_TRAIN_RETURN_IF_ERROR(checkSameSettings(capElems));
  if (o_.resume) COLLIE_TRAIN_RETURN_IF_ERROR(restore());
  if (rank_ == 0 && !o_.metricsFile.empty()) {
    COLLIE_TRAIN_RETURN_IF_ERROR(csv_.open(o_.metricsFile, o_.resume));
  }
  printHeader();
  return Status();
}

// Ranks started with different settings or data would train different models without any
// collective noticing (the gradient sizes still agree): compare a checksum of them once.
Status Trainer::checkSameSettings(size_t capElems) {
  if (!comm_ || world_ == 1) return Status();
  std::ostringstream all;
  all << configString() << "epochs=" << o_.epochs << "\nsteps=" << o_.maxSteps
      << "\nbucket_elems=" << capElems << "\n";
  const std::string text = all.str();
  const uint32_t crc = static_cast<uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(text.data()), static_cast<uInt>(text.size())));
  // max(crc) == ~max(~crc) exactly when every rank has the same crc.
  uint32_t v[2] = {crc, ~crc};
  Result r = comm_->allreduce(v, v, 2, collieUint32, collieMax);
  if (!r) return Status::error("comparing settings with the other ranks failed: " + r.toString());
  if (v[0] != ~v[1]) {
    return Status::error("the ranks were started with different settings or data (this rank: " +
                         text.substr(0, text.find('\n')) + ", batch " + std::to_string(o_.batch) +
                         ", data " + o_.dataDir +
                         "); start every rank with the same options and data files");
  }
  return Status();
}

Status Trainer::restore() {
  const std::string path = checkpointPath(o_.checkpointDir);
  TrainState s;
  COLLIE_TRAIN_RETURN_IF_ERROR(loadCheckpoint(path, &s));
  COLLIE_TRAIN_RETURN_IF_ERROR(compareConfig(s.config, configString(), path));
  if (s.params.size() != params_.size() || s.velocity.size() != sgd_->velocity().size()) {
    return Status::error("checkpoint " + path + " holds " + std::to_string(s.params.size()) +
                         " parameters and " + std::to_string(s.velocity.size()) +
                         " momentum values; this model needs " + std::to_string(params_.size()) +
                         " and " + std::to_string(sgd_->velocity().size()));
  }
  if (s.stepInEpoch >= sampler_->stepsPerEpoch()) {
    return Status::error("checkpoint " + path + " is at step " + std::to_string(s.stepInEpoch) +
                         " of an epoch of " + std::to_string(sampler_->stepsPerEpoch()));
  }
  params_ = std::move(s.params);
  sgd_->velocity() = std::move(s.velocity);
  rng_.setState(s.rng);
  pos_.epoch = s.epoch;
  pos_.stepInEpoch = s.stepInEpoch;
  pos_.globalStep = s.globalStep;
  log("resumed from %s: epoch %u, step %llu of it (%llu steps done)\n", path.c_str(),
      pos_.epoch + 1, static_cast<unsigned long long>(pos_.stepInEpoch),
      static_cast<unsigned long long>(pos_.globalStep));
  return Status();
}

void Trainer::printHeader() const {
  std::string model;
  for (int w : model_->sizes()) model += (model.empty() ? "" : "-") + std::to_string(w);
  log("collie-train: %d rank%s, model %s (%zu parameters), global batch %d (%.4g per rank), %zu "
      "steps per epoch, lr %g (%s), momentum %g, weight decay %g\n",
      world_, world_ == 1 ? "" : "s", model.c_str(), params_.size(), o_.batch,
      static_cast<double>(o_.batch) / world_, sampler_->stepsPerEpoch(), o_.lr,
      o_.schedule == LrSchedule::kCosine ? "cosine decay" : "constant", o_.momentum,
      o_.weightDecay);
  log("collie-train: %zu gradient bucket%s of up to %.3g MiB, overlap %s (%s); %u training and "
      "%u test samples from %s\n",
      buckets_->buckets().size(), buckets_->buckets().size() == 1 ? "" : "s", o_.bucketMb,
      overlap_ ? "on" : "off", overlapWhy_.c_str(), train_.count, test_.count, o_.dataDir.c_str());
}

void Trainer::gather(const Dataset& d, const std::vector<uint32_t>& idx, std::vector<float>* x,
                     std::vector<uint8_t>* y) const {
  const size_t in = d.pixelsPerImage();
  x->resize(idx.size() * in);
  y->resize(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) {
    const uint8_t* src = d.pixels.data() + idx[i] * in;
    float* dst = x->data() + i * in;
    for (size_t p = 0; p < in; ++p) dst[p] = src[p] * scale_ + shift_;
    (*y)[i] = d.labels[idx[i]];
  }
}

Status Trainer::step(size_t s, Meter* m) {
  const Clock::time_point t0 = Clock::now();
  if (o_.schedule == LrSchedule::kCosine) {
    const double total = static_cast<double>(o_.epochs) * sampler_->stepsPerEpoch();
    sgd_->setLearningRate(0.5 * o_.lr * (1 + std::cos(M_PI * pos_.globalStep / total)));
  }
  const size_t globalBatch = sampler_->globalBatchSize(s);
  sampler_->localBatch(s, &idx_);
  gather(train_, idx_, &x_, &y_);
  buckets_->begin();
  model_->forward(params_.data(), x_.data(), static_cast<int>(idx_.size()), ws_);
  int correct = 0;
  const float scale = 1.0f / static_cast<float>(globalBatch);
  const double loss = model_->lossAndGradient(ws_, y_.data(), scale, &correct);
  std::fill(grads_.begin(), grads_.begin() + kStatSlots, 0.0f);
  grads_[0] = static_cast<float>(loss / globalBatch);
  grads_[1] = static_cast<float>(static_cast<double>(correct) / globalBatch);
  buckets_->ready(kStatSlots);
  model_->backward(params_.data(), ws_, grads_.data() + kStatSlots, blockElems_,
                   [this](size_t done) { buckets_->ready(kStatSlots + done); });
  double comm = 0;
  COLLIE_TRAIN_RETURN_IF_ERROR(buckets_->finish(&comm));
  sgd_->step(params_.data(), grads_.data() + kStatSlots, params_.size());
  m->steps += 1;
  m->samples += static_cast<int64_t>(globalBatch);
  m->lossSum += static_cast<double>(grads_[0]) * globalBatch;
  m->correct += static_cast<double>(grads_[1]) * globalBatch;
  m->commSeconds += comm;
  m->stepSeconds += secondsSince(t0);
  return Status();
}

Status Trainer::runEpoch(bool* stopped) {
  const int epoch = static_cast<int>(pos_.epoch);
  sampler_->setEpoch(epoch);
  const size_t steps = sampler_->stepsPerEpoch();
  ProgressBar bar(o_.progress && rank_ == 0, epoch + 1, o_.epochs, sampler_->epochLength());
  Meter meter;
  *stopped = false;
  while (pos_.stepInEpoch < steps) {
    if (o_.maxSteps >= 0 && static_cast<int64_t>(pos_.globalStep) >= o_.maxSteps) {
      *stopped = true;
      break;
    }
    Meter one;
    Status st = step(pos_.stepInEpoch, &one);
    if (!st.ok()) {
      bar.finish();
      return st;
    }
    ++pos_.stepInEpoch;
    ++pos_.globalStep;
    meter.add(one);
    interval_.add(one);
    if (interval_.steps >= o_.logEvery) {
      stepRows_.push_back({epoch + 1, static_cast<int64_t>(pos_.globalStep), interval_.loss(), -1,
                           interval_.rate(), interval_.commShare()});
      csv_.write(stepRows_.back());
      interval_ = Meter();
    }
    bar.update(std::min<size_t>(pos_.stepInEpoch * o_.batch, sampler_->epochLength()), meter.loss(),
               meter.rate());
  }
  bar.finish();
  total_.add(meter);
  if (*stopped) return Status();
  return endEpoch(meter);
}

double Trainer::evaluate() {
  constexpr uint32_t kChunk = 1000;
  Workspace<float> ws;
  std::vector<uint32_t> idx;
  std::vector<float> x;
  std::vector<uint8_t> y;
  int64_t correct = 0;
  for (uint32_t b = 0; b < test_.count; b += kChunk) {
    idx.clear();
    for (uint32_t i = b; i < std::min(test_.count, b + kChunk); ++i) idx.push_back(i);
    gather(test_, idx, &x, &y);
    model_->forward(params_.data(), x.data(), static_cast<int>(idx.size()), ws);
    const float* logits = model_->logits(ws);
    for (size_t i = 0; i < idx.size(); ++i) {
      correct += argmax(logits + i * kClasses, kClasses) == y[i];
    }
  }
  return static_cast<double>(correct) / test_.count;
}

Status Trainer::endEpoch(const Meter& epoch) {
  ++pos_.epoch;
  pos_.stepInEpoch = 0;
  const Clock::time_point t0 = Clock::now();
  float acc = rank_ == 0 ? static_cast<float>(evaluate()) : 0.0f;
  if (rank_ == 0 && !o_.checkpointDir.empty()) COLLIE_TRAIN_RETURN_IF_ERROR(save());
  // A barrier that also hands rank 0's accuracy to everyone: the others wait here while rank
  // 0 evaluates, instead of inside the next step, where it would count as communication.
  if (comm_) {
    Result r = comm_->allreduce(View<float>(&acc, 1));
    if (!r) return Status::error("end-of-epoch barrier failed: " + r.toString());
  }
  lastAccuracy_ = acc;
  const int e = static_cast<int>(pos_.epoch);
  epochRows_.push_back({e, static_cast<int64_t>(pos_.globalStep), epoch.loss(), acc, epoch.rate(),
                        epoch.commShare()});
  csv_.write(epochRows_.back());
  log("epoch %d/%d  loss %.4f  train accuracy %.2f%%  test accuracy %.2f%%  %.0f samples/s  "
      "comm wait %.1f%%  (%.2f s, evaluation %.2f s)\n",
      e, o_.epochs, epoch.loss(), 100 * epoch.accuracy(), 100 * acc, epoch.rate(),
      100 * epoch.commShare(), epoch.stepSeconds, secondsSince(t0));
  return Status();
}

Status Trainer::save() {
  TrainState s;
  s.config = configString();
  s.epoch = pos_.epoch;
  s.stepInEpoch = pos_.stepInEpoch;
  s.globalStep = pos_.globalStep;
  s.rng = rng_.state();
  s.params = params_;
  s.velocity = sgd_->velocity();
  return saveCheckpoint(o_.checkpointDir, s);
}

Status Trainer::run(RunSummary* summary) {
  bool stopped = false;
  while (!stopped && static_cast<int>(pos_.epoch) < o_.epochs) {
    COLLIE_TRAIN_RETURN_IF_ERROR(runEpoch(&stopped));
  }
  // A run cut short by --steps saves where it stopped, so --resume continues from there.
  if (stopped && rank_ == 0 && !o_.checkpointDir.empty()) COLLIE_TRAIN_RETURN_IF_ERROR(save());
  summary->epochsDone = static_cast<int>(pos_.epoch);
  summary->steps = total_.steps;
  summary->testAccuracy = lastAccuracy_;
  summary->trainSeconds = total_.stepSeconds;
  summary->samplesPerSec = total_.rate();
  summary->commShare = total_.commShare();
  summary->overlap = overlap_;
  if (rank_ == 0 && !o_.plotFile.empty()) {
    COLLIE_TRAIN_RETURN_IF_ERROR(plotCurves(o_.plotFile, stepRows_, epochRows_));
    log("collie-train: curves drawn in %s\n", o_.plotFile.c_str());
  }
  return Status();
}

}  // namespace

Status runTraining(const Options& options, Communicator* comm, RunSummary* summary) {
  Trainer trainer(options, comm);
  COLLIE_TRAIN_RETURN_IF_ERROR(trainer.setUp());
  return trainer.run(summary);
}

}  // namespace train
}  // namespace collie
