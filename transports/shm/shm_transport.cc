// Shared-memory transport: segments, SPSC byte rings as ByteStreams, the futex doorbell.
#include "transports/shm/shm_transport.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "src/base/log.h"
#include "src/base/time.h"
#include "transports/shm/alive_mark.h"

namespace collie {

namespace {

constexpr uint32_t kSegMagic = 0x434c5348;  // "CLSH"
constexpr size_t kLine = 64;

size_t roundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

std::string mib(double bytes) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.2f MiB", bytes / (1 << 20));
  return buf;
}

struct alignas(kLine) SegHeader {
  uint32_t magic;
  int32_t pid;
  int32_t rank;
  uint32_t nlocal;
  uint64_t ringBytes;
  uint64_t stagingBytes;
  uint64_t pidNs;  // the owner's PID namespace (pidNamespace()): where its pid means it
  // Held by the owner's progress thread (ShmTransport::holdAlive): robust and process-shared,
  // so the kernel marks it when the owner dies, whatever PID namespace its peers are in.
  alignas(kLine) AliveMark alive;
  alignas(kLine) std::atomic<uint32_t> doorbell;
  alignas(kLine) std::atomic<uint32_t> sleepers;
};

// Control block of one ring; producer and consumer indices on lines of their own.
struct RingCtl {
  alignas(kLine) std::atomic<uint64_t> head;  // consumer position, written by the reader
  alignas(kLine) std::atomic<uint64_t> tail;  // producer position, written by the writer
  alignas(kLine) std::atomic<uint32_t> closed;
};

// This process's PID namespace (device and inode of /proc/self/ns/pid folded together); 0 when
// it cannot be told.
uint64_t pidNamespace() {
  struct stat st;
  if (stat("/proc/self/ns/pid", &st) != 0) return 0;
  return (static_cast<uint64_t>(st.st_dev) << 40) ^ static_cast<uint64_t>(st.st_ino);
}

long futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* ts) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, ts, nullptr, 0);
}

}  // namespace

// One mapped segment: header, nlocal inbound rings, staging.
class ShmSegment {
 public:
  ~ShmSegment() {
    if (base_ != nullptr) munmap(base_, size_);
  }
  static size_t sizeFor(uint32_t nlocal, const ShmOptions& o) {
    return roundUp(sizeof(SegHeader), 4096) +
           nlocal * roundUp(sizeof(RingCtl) + o.ringBytes, 4096) + roundUp(o.stagingBytes, 4096);
  }
  // create: makes the segment, one of nlocal alike, and takes its pages.
  static StatusOr<std::unique_ptr<ShmSegment>> map(const std::string& name, bool create,
                                                   size_t size, uint32_t nlocal = 0) {
    int fd = shm_open(name.c_str(), create ? (O_CREAT | O_EXCL | O_RDWR) : O_RDWR, 0600);
    if (fd < 0 && !create && errno == ENOENT)
      return systemError("shm_open " + name +
                         ": no such segment in this rank's /dev/shm (its owner is on this host "
                         "but sees another /dev/shm: containers of one host must share theirs, "
                         "as docker run --ipc=host does)");
    if (fd < 0) return errnoStatus("shm_open " + name, errno);
    // Past here a segment this call made is removed again on failure: nobody else knows it yet.
    auto fail = [&](Status s) {
      close(fd);
      if (create) shm_unlink(name.c_str());
      return s;
    };
    if (create) {
      // The pages are taken now: a tmpfs without room for them would otherwise let ftruncate
      // and mmap succeed and kill the first process that touches a page it lacks (SIGBUS).
      int e = ftruncate(fd, static_cast<off_t>(size)) != 0 ? errno : 0;
      if (e == 0) e = posix_fallocate(fd, 0, static_cast<off_t>(size));
      if (e == ENOSPC) return fail(noRoom(size, nlocal));
      if (e != 0) return fail(errnoStatus("allocating shm segment " + name, e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
      const int e = errno;
      return fail(errnoStatus("fstat " + name, e));
    }
    if (static_cast<size_t>(st.st_size) != size) {
      return fail(invalidUsage("shm segment " + name + " has " + std::to_string(st.st_size) +
                               " bytes where this rank's settings make " + std::to_string(size) +
                               " (COLLIE_SHM_* settings must agree)"));
    }
    // Populated now, not page by page on first touch: each process faults in every page it
    // maps, and a small message touching fresh ring pages cost 4-6x its time until the ring
    // had wrapped once (2 ranks, 8 KiB calls: 10 us for the first ~125, then 1.6 us).
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      return fail(errnoStatus("mmap " + name, e));
    }
    close(fd);
    std::unique_ptr<ShmSegment> s(new ShmSegment());
    s->base_ = static_cast<char*>(p);
    s->size_ = size;
    return s;
  }
  // /dev/shm cannot hold a segment of size bytes, one of nlocal alike: what it has and what to
  // do about it.
  static Status noRoom(size_t size, uint32_t nlocal) {
    struct statvfs fs;
    std::string has;
    if (statvfs("/dev/shm", &fs) == 0)
      has = "; /dev/shm holds " +
            mib(static_cast<double>(fs.f_blocks) * static_cast<double>(fs.f_frsize)) + ", " +
            mib(static_cast<double>(fs.f_bavail) * static_cast<double>(fs.f_frsize)) + " free";
    return systemError(std::string(kShmNoRoom) +
                       " for this rank's shared-memory segment: each of the " +
                       std::to_string(nlocal) + " ranks on this host needs " +
                       mib(static_cast<double>(size)) + has +
                       " (enlarge /dev/shm, as docker run --shm-size does; or lower "
                       "COLLIE_SHM_RING_BYTES and COLLIE_SHM_STAGING_BYTES; or set "
                       "COLLIE_TRANSPORT=tcp)");
  }
  SegHeader* header() { return reinterpret_cast<SegHeader*>(base_); }
  RingCtl* ring(uint32_t i, const ShmOptions& o) {
    return reinterpret_cast<RingCtl*>(base_ + roundUp(sizeof(SegHeader), 4096) +
                                      i * roundUp(sizeof(RingCtl) + o.ringBytes, 4096));
  }
  char* ringData(uint32_t i, const ShmOptions& o) {
    return reinterpret_cast<char*>(ring(i, o)) + sizeof(RingCtl);
  }
  char* staging(uint32_t nlocal, const ShmOptions& o) {
    return base_ + roundUp(sizeof(SegHeader), 4096) +
           nlocal * roundUp(sizeof(RingCtl) + o.ringBytes, 4096);
  }
  // After publishing data: wake the owner if it announced it may sleep (see Doorbell).
  void ring() {
    SegHeader* h = header();
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (h->sleepers.load(std::memory_order_relaxed) == 0) return;
    h->doorbell.fetch_add(1, std::memory_order_seq_cst);
    futex(&h->doorbell, FUTEX_WAKE, INT32_MAX, nullptr);
  }

 private:
  ShmSegment() = default;
  char* base_ = nullptr;
  size_t size_ = 0;
};

uint32_t ShmDoorbell::prepare() {
  SegHeader* h = seg_->header();
  h->sleepers.fetch_add(1, std::memory_order_seq_cst);
  return h->doorbell.load(std::memory_order_seq_cst);
}

void ShmDoorbell::sleep(uint32_t seen, int64_t timeoutUs) {
  if (timeoutUs <= 0) return;
  timespec ts{static_cast<time_t>(timeoutUs / 1000000),
              static_cast<long>(timeoutUs % 1000000) * 1000L};
  futex(&seg_->header()->doorbell, FUTEX_WAIT, seen, &ts);
}

void ShmDoorbell::finish() { seg_->header()->sleepers.fetch_sub(1, std::memory_order_seq_cst); }

namespace {

// The pid a peer's segment names, where it names the peer in this process's PID namespace;
// 0 where the peer runs in another (a container of its own, without --pid=host): there the
// number may be this process's or a stranger's, and its segment's AliveMark tells instead.
int watchablePid(const SegHeader& mine, const SegHeader& peer) {
  if (mine.pidNs == 0 || peer.pidNs == 0 || peer.pidNs == mine.pidNs) return peer.pid;
  COLLIE_INFO(kLogInit,
              "shm: peer rank %d runs in another PID namespace: watched through its segment, "
              "not its pid",
              peer.rank);
  return 0;
}

// A ring pair to one local peer as a ByteStream: writes go to the ring in the peer's segment,
// reads come from the ring in ours. A dead peer is noticed through a pidfd, which is also what
// the Poller waits on, or, in another PID namespace, through its segment's AliveMark.
class ShmStream : public ByteStream {
 public:
  ShmStream(ShmSegment* mine, ShmSegment* theirs, uint32_t myIdx, uint32_t theirIdx,
            const ShmOptions& o, int peerPid, AliveMark* peerAlive)
      : out_(theirs->ring(myIdx, o)),
        outData_(theirs->ringData(myIdx, o)),
        in_(mine->ring(theirIdx, o)),
        inData_(mine->ringData(theirIdx, o)),
        cap_(o.ringBytes),
        theirs_(theirs),
        peerPid_(peerPid),
        peerAlive_(peerAlive) {
    if (peerPid > 0) pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, peerPid, 0));
  }
  ~ShmStream() override {
    shutdownWrite();
    if (pidfd_ >= 0) close(pidfd_);
  }

  ssize_t writev(const iovec* iov, int n) override {
    uint64_t tail = out_->tail.load(std::memory_order_relaxed);
    uint64_t head = out_->head.load(std::memory_order_acquire);
    size_t space = cap_ - static_cast<size_t>(tail - head);
    if (space == 0) return peerGone() ? -ECONNRESET : 0;
    size_t done = 0;
    for (int i = 0; i < n && space > 0; ++i) {
      size_t len = iov[i].iov_len < space ? iov[i].iov_len : space;
      copyIn(tail + done, static_cast<const char*>(iov[i].iov_base), len);
      done += len;
      space -= len;
    }
    out_->tail.store(tail + done, std::memory_order_release);
    theirs_->ring();
    return static_cast<ssize_t>(done);
  }

  ssize_t read(void* buf, size_t n) override {
    uint64_t head = in_->head.load(std::memory_order_relaxed);
    uint64_t tail = in_->tail.load(std::memory_order_acquire);
    size_t avail = static_cast<size_t>(tail - head);
    if (avail == 0) {
      if (in_->closed.load(std::memory_order_acquire)) {
        // Closed: but data written before the close may have landed after our first look.
        if (in_->tail.load(std::memory_order_acquire) == head) return -ESHUTDOWN;
        return 0;
      }
      return peerGone() ? -ECONNRESET : 0;
    }
    size_t len = n < avail ? n : avail;
    size_t off = static_cast<size_t>(head % cap_);
    size_t first = len < cap_ - off ? len : cap_ - off;
    memcpy(buf, inData_ + off, first);
    if (len > first) memcpy(static_cast<char*>(buf) + first, inData_, len - first);
    in_->head.store(head + len, std::memory_order_release);
    theirs_->ring();  // the writer may be waiting for space
    return static_cast<ssize_t>(len);
  }

  int pollFd() const override { return pidfd_; }
  void shutdownWrite() override { out_->closed.store(1, std::memory_order_release); }

 private:
  void copyIn(uint64_t pos, const char* src, size_t len) {
    size_t off = static_cast<size_t>(pos % cap_);
    size_t first = len < cap_ - off ? len : cap_ - off;
    memcpy(outData_ + off, src, first);
    if (len > first) memcpy(outData_, src + first, len - first);
  }
  // Rate-limited: a pidfd poll costs a system call.
  bool peerGone() {
    uint64_t now = nowNs();
    if (now - lastCheckNs_ < 2000000) return false;
    lastCheckNs_ = now;
    if (peerPid_ <= 0) return peerAlive_->holderDied();
    if (pidfd_ >= 0) {
      pollfd p{pidfd_, POLLIN, 0};
      return poll(&p, 1, 0) == 1;
    }
    return kill(peerPid_, 0) != 0 && errno == ESRCH;
  }

  RingCtl* out_;
  char* outData_;
  RingCtl* in_;
  char* inData_;
  size_t cap_;
  ShmSegment* theirs_;
  int peerPid_;
  AliveMark* peerAlive_;  // watched where peerPid_ is 0
  int pidfd_ = -1;
  uint64_t lastCheckNs_ = 0;
};

}  // namespace

ShmTransport::~ShmTransport() { unlinkOwn(); }

StatusOr<std::unique_ptr<ShmTransport>> ShmTransport::create(uint64_t commId, int rank,
                                                             std::vector<int> localRanks,
                                                             const ShmOptions& opt) {
  std::unique_ptr<ShmTransport> t(new ShmTransport());
  t->commId_ = commId;
  t->rank_ = rank;
  t->local_ = std::move(localRanks);
  t->opt_ = opt;
  t->opt_.ringBytes = roundUp(opt.ringBytes, 4096);
  for (size_t i = 0; i < t->local_.size(); ++i)
    if (t->local_[i] == rank) t->localIndex_ = static_cast<int>(i);
  char name[96];
  snprintf(name, sizeof(name), "/%s%016" PRIx64 "-%d-%d", kShmPrefix, commId, rank,
           static_cast<int>(getpid()));
  t->name_ = name;
  size_t size = ShmSegment::sizeFor(static_cast<uint32_t>(t->local_.size()), t->opt_);
  COLLIE_ASSIGN_OR_RETURN(
      t->own_, ShmSegment::map(t->name_, true, size, static_cast<uint32_t>(t->local_.size())));
  t->linked_ = true;
  SegHeader* h = t->own_->header();
  h->pid = getpid();
  h->pidNs = pidNamespace();
  h->alive.init();
  h->rank = rank;
  h->nlocal = static_cast<uint32_t>(t->local_.size());
  h->ringBytes = t->opt_.ringBytes;
  h->stagingBytes = t->opt_.stagingBytes;
  h->magic = kSegMagic;
  t->doorbell_.reset(new ShmDoorbell(t->own_.get()));
  return t;
}

Status ShmTransport::mapPeers(const std::vector<std::string>& names) {
  size_t size = ShmSegment::sizeFor(static_cast<uint32_t>(local_.size()), opt_);
  peers_.resize(local_.size());
  for (size_t i = 0; i < local_.size(); ++i) {
    if (static_cast<int>(i) == localIndex_) continue;
    auto seg = ShmSegment::map(names[i], false, size);
    if (!seg.isOk())
      return seg.status().withContext("mapping peer rank " + std::to_string(local_[i]));
    SegHeader* h = seg.value()->header();
    if (h->magic != kSegMagic || h->rank != local_[i] || h->nlocal != local_.size() ||
        h->ringBytes != opt_.ringBytes || h->stagingBytes != opt_.stagingBytes)
      return invalidUsage("shm segment of peer rank " + std::to_string(local_[i]) +
                          " does not match this rank's (COLLIE_SHM_* settings must agree)");
    peers_[i] = seg.take();
  }
  return Status::ok();
}

void ShmTransport::unlinkOwn() {
  if (linked_) shm_unlink(name_.c_str());
  linked_ = false;
}

bool ShmTransport::holdAlive(int64_t timeoutMs) { return own_->header()->alive.hold(timeoutMs); }

void ShmTransport::releaseAlive() { own_->header()->alive.release(); }

void ShmTransport::makeConnections(std::vector<std::unique_ptr<Connection>>* conns) {
  uint32_t nlocal = static_cast<uint32_t>(local_.size());
  for (size_t i = 0; i < local_.size(); ++i) {
    if (static_cast<int>(i) == localIndex_) continue;
    std::vector<std::unique_ptr<ByteStream>> streams;
    streams.emplace_back(new ShmStream(
        own_.get(), peers_[i].get(), static_cast<uint32_t>(localIndex_), static_cast<uint32_t>(i),
        opt_, watchablePid(*own_->header(), *peers_[i]->header()), &peers_[i]->header()->alive));
    StreamOptions so;
    so.stripeBytes = SIZE_MAX;  // one stream: never striped
    auto* c = new StreamConnection(local_[i], commId_, std::move(streams), so,
                                   peers_[i]->staging(nlocal, opt_), own_->staging(nlocal, opt_),
                                   opt_.stagingBytes);
    (*conns)[local_[i]].reset(c);
  }
}

}  // namespace collie
