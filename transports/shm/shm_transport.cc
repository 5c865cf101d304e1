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

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "src/base/log.h"
#include "src/base/time.h"
#include "transports/shm/alive_mark.h"
#include "transports/shm/shm_cma.h"
#include "transports/shm/shm_connection.h"
#include "transports/shm/shm_slots.h"

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
  MailboxCtl mail;  // small point-to-point frames (shm_mailbox.h)
};

// This process's PID namespace (/proc/self/ns/pid's device and inode folded); 0 if unknown.
uint64_t pidNamespace() {
  struct stat st;
  if (stat("/proc/self/ns/pid", &st) != 0) return 0;
  return (static_cast<uint64_t>(st.st_dev) << 40) ^ static_cast<uint64_t>(st.st_ino);
}

long futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* ts) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, ts, nullptr, 0);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

// Puts len bytes of a shared mapping from p into this process's page tables, taking the pages
// the tmpfs has not given yet: 0, ENOSPC where it has no room for them (where touching them
// would raise SIGBUS), ENOMEM, or EINVAL where the kernel cannot (before 5.14).
int populate(char* p, size_t len) {
  if (len == 0 || madvise(p, len, MADV_POPULATE_WRITE) == 0) return 0;
  return errno == EFAULT ? ENOSPC : errno;
}

// Faults in every page of len bytes from p by reading it: for kernels without populate.
void touch(const char* p, size_t len) {
  for (size_t off = 0; off < len; off += 4096) static_cast<void>(*(const volatile char*)(p + off));
}

}  // namespace

// One mapped segment: the header, the control blocks of its nlocal inbound rings, the rings'
// data, the staging. Its pages are all taken when it is made, so that a /dev/shm without room
// for them fails there; once every local rank holds its whole segment (the host's whole layout
// fits), the rings' data pages past each ring's head are given back (releaseRings). A ring takes
// them again when its writer first uses it (ShmStream), so a host holds the rings of the pairs
// its algorithms use (O(log n) per rank), not one per pair of local ranks.
class ShmSegment {
 public:
  ~ShmSegment() {
    if (base_ != nullptr) munmap(base_, size_);
  }
  // Offsets in a segment of nlocal rings of o.ringBytes (a multiple of the page: create rounds).
  static size_t ringsOffset(uint32_t nlocal) {
    return roundUp(sizeof(SegHeader), 4096) + roundUp(nlocal * sizeof(RingCtl), 4096);
  }
  static size_t stagingOffset(uint32_t nlocal, const ShmOptions& o) {
    return ringsOffset(nlocal) + nlocal * o.ringBytes;
  }
  static size_t sizeFor(uint32_t nlocal, const ShmOptions& o) {
    return stagingOffset(nlocal, o) + roundUp(o.stagingBytes, 4096);
  }
  // create: makes the segment, one of nlocal alike, and takes its pages. The header, the
  // control blocks, the rings' heads and the staging go into this process's page tables now, the
  // rest of a ring when it is first used (populateRing).
  // *full, where given, tells a failure for want of room in /dev/shm.
  static StatusOr<std::unique_ptr<ShmSegment>> map(const std::string& name, bool create,
                                                   uint32_t nlocal, const ShmOptions& o,
                                                   bool* full = nullptr) {
    const size_t size = sizeFor(nlocal, o);
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
      if (e == ENOSPC && full != nullptr) *full = true;
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
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      return fail(errnoStatus("mmap " + name, e));
    }
    std::unique_ptr<ShmSegment> s(new ShmSegment());
    s->base_ = static_cast<char*>(p);
    s->size_ = size;
    s->nlocal_ = nlocal;
    s->o_ = o;
    const int e = s->populateAtSetUp();
    if (e != 0) return fail(errnoStatus("populating shm segment " + name, e));
    close(fd);
    return s;
  }
  // Into the page tables now, not page by page on first touch, which slows the first calls
  // that reach fresh ring pages: 0, or an errno.
  int populateAtSetUp() {
    const size_t rings = ringsOffset(nlocal_), staging = stagingOffset(nlocal_, o_);
    int e = populate(base_, rings);
    if (e == EINVAL) {
      // A kernel that cannot populate on demand: the rings keep their pages, faulted in now.
      lazyRings_ = false;
      touch(base_, size_);
      e = 0;
    }
    for (uint32_t i = 0; i < nlocal_ && e == 0 && lazyRings_; ++i)
      e = populate(ringData(i), ringHeadBytes(o_));
    if (e == 0) e = populate(base_ + staging, size_ - staging);
    return e;
  }
  // The owner, once every local rank holds its whole segment: the rings' pages past their
  // heads go back to the tmpfs until their writers first use them; a head stays, for an abort
  // frame where the rest cannot be had (ringHeadBytes). Not before: a rank whose rings were
  // given back already would leave room that the host's layout needs later, and a /dev/shm
  // that holds the segments only so would admit a host whose calls then run out of it.
  void releaseRings() {
    const size_t head = ringHeadBytes(o_);
    for (uint32_t i = 0; i < nlocal_ && lazyRings_ && head < o_.ringBytes; ++i) {
      if (madvise(ringData(i) + head, o_.ringBytes - head, MADV_REMOVE) != 0) {
        COLLIE_INFO(kLogInit, "shm: the rings keep their pages: %s", strerror(errno));
        return;
      }
    }
  }
  // Ring i's data into this process's page tables, its pages taken where the tmpfs has not
  // given them yet: 0, or an errno (ENOSPC: /dev/shm has no room for them).
  int populateRing(uint32_t i) { return lazyRings_ ? populate(ringData(i), o_.ringBytes) : 0; }
  // What of a ring is taken at setup: room for an abort frame (stream_connection.h), which a
  // writer that cannot have the rest still sends.
  static size_t ringHeadBytes(const ShmOptions& o) {
    return std::min(o.ringBytes, roundUp(sizeof(FrameHeader) + kMaxAbortPayload, 4096));
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
  RingCtl* ring(uint32_t i) {
    return reinterpret_cast<RingCtl*>(base_ + roundUp(sizeof(SegHeader), 4096)) + i;
  }
  char* ringData(uint32_t i) { return base_ + ringsOffset(nlocal_) + i * o_.ringBytes; }
  char* staging() { return base_ + stagingOffset(nlocal_, o_); }
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
  uint32_t nlocal_ = 0;
  ShmOptions o_;
  bool lazyRings_ = true;  // the rings' pages are taken on first use
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
      : out_(theirs->ring(myIdx)),
        outData_(theirs->ringData(myIdx)),
        in_(mine->ring(theirIdx)),
        inData_(mine->ringData(theirIdx)),
        cap_(o.ringBytes),
        headBytes_(ShmSegment::ringHeadBytes(o)),
        mine_(mine),
        theirs_(theirs),
        myIdx_(myIdx),
        theirIdx_(theirIdx),
        peerPid_(peerPid),
        peerAlive_(peerAlive) {
    if (peerPid > 0) pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, peerPid, 0));
  }
  ~ShmStream() override {
    shutdownWrite();
    if (pidfd_ >= 0) close(pidfd_);
  }

  ssize_t writev(const iovec* iov, int n) override {
    if (!outMapped_) {
      // The first write: the ring in the peer's segment takes its pages (see ShmSegment). Where
      // it cannot (no room in /dev/shm, or ENOMEM from a memory limit its pages count against),
      // data fails; an abort frame still goes into the ring's head, never written.
      const int e = theirs_->populateRing(myIdx_);
      if (e == 0)
        outMapped_ = true;
      else if (!abortOnly_)
        return -ENOSPC;
    }
    uint64_t tail = out_->tail.load(std::memory_order_relaxed);
    uint64_t head = out_->head.load(std::memory_order_acquire);
    size_t space = cap_ - static_cast<size_t>(tail - head);
    if (!outMapped_) space = tail < headBytes_ ? headBytes_ - static_cast<size_t>(tail) : 0;
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
    if (!inMapped_) {
      // Its writer took the pages before it wrote: into this process's page tables now.
      mine_->populateRing(theirIdx_);
      inMapped_ = true;
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
  void prepareAbort() override { abortOnly_ = true; }

 private:
  void copyIn(uint64_t pos, const char* src, size_t len) {
    size_t off = static_cast<size_t>(pos % cap_);
    size_t first = len < cap_ - off ? len : cap_ - off;
    memcpy(outData_ + off, src, first);
    if (len > first) memcpy(outData_, src + first, len - first);
  }
  // Rate-limited: a pidfd poll is a system call, and even reading the clock costs.
  bool peerGone() {
    uint64_t now = 0;
    if ((++idleLooks_ & 31) != 0 || (now = nowNs()) - lastCheckNs_ < 2000000) return false;
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
  size_t headBytes_;  // of a ring, taken at setup
  ShmSegment* mine_;
  ShmSegment* theirs_;
  uint32_t myIdx_, theirIdx_;  // this rank's ring in the peer's segment, the peer's in ours
  bool outMapped_ = false, inMapped_ = false;
  bool abortOnly_ = false;  // what is left to write is an abort frame
  int peerPid_;
  AliveMark* peerAlive_;  // watched where peerPid_ is 0
  int pidfd_ = -1;
  uint64_t lastCheckNs_ = 0;
  unsigned idleLooks_ = 0;
};

}  // namespace

ShmTransport::ShmTransport(uint64_t commId, int rank, const ShmOptions& opt, bool shrinkable)
    : commId_(commId), rank_(rank), want_(opt), opt_(opt), shrinkable_(shrinkable) {}

ShmTransport::~ShmTransport() { unlinkOwn(); }

Status ShmTransport::makeSegment(const ShmOptions& opt) {
  opt_ = opt;
  opt_.ringBytes = roundUp(opt.ringBytes, 4096);
  char name[96];
  snprintf(name, sizeof(name), "/%s%016" PRIx64 "-%d-%d", kShmPrefix, commId_, rank_,
           static_cast<int>(getpid()));
  name_ = name;
  noRoom_ = false;
  COLLIE_ASSIGN_OR_RETURN(
      own_, ShmSegment::map(name_, true, static_cast<uint32_t>(local_.size()), opt_, &noRoom_));
  linked_ = true;
  SegHeader* h = own_->header();
  h->pid = getpid();
  h->pidNs = pidNamespace();
  h->alive.init();
  h->rank = rank_;
  h->nlocal = static_cast<uint32_t>(local_.size());
  h->ringBytes = opt_.ringBytes;
  h->stagingBytes = opt_.stagingBytes;
  h->magic = kSegMagic;
  doorbell_.reset(new ShmDoorbell(own_.get()));
  return Status::ok();
}

void ShmTransport::dropSegment() {
  unlinkOwn();
  peers_.clear();
  doorbell_.reset();
  own_.reset();
}

Status ShmTransport::mapPeer(size_t i, const std::string& name) {
  peers_.resize(local_.size());
  auto seg = ShmSegment::map(name, false, static_cast<uint32_t>(local_.size()), opt_);
  if (!seg.isOk())
    return seg.status().withContext("mapping peer rank " + std::to_string(local_[i]));
  SegHeader* h = seg.value()->header();
  if (h->magic != kSegMagic || h->rank != local_[i] || h->nlocal != local_.size() ||
      h->ringBytes != opt_.ringBytes || h->stagingBytes != opt_.stagingBytes)
    return invalidUsage("shm segment of peer rank " + std::to_string(local_[i]) +
                        " does not match this rank's (COLLIE_SHM_* settings must agree)");
  peers_[i] = seg.take();
  return Status::ok();
}

bool shmPopulatesOnDemand() {
  void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  const bool can = populate(static_cast<char*>(p), 4096) == 0;
  munmap(p, 4096);
  return can;
}

void ShmTransport::releaseRingPages() { own_->releaseRings(); }

void ShmTransport::unlinkOwn() {
  if (linked_) shm_unlink(name_.c_str());
  linked_ = false;
}

bool ShmTransport::holdAlive(int64_t timeoutMs) { return own_->header()->alive.hold(timeoutMs); }

void ShmTransport::releaseAlive() { own_->header()->alive.release(); }

void ShmTransport::makeConnections(ConnectionTable* conns) {
  std::vector<char*> staging(local_.size());
  for (size_t i = 0; i < local_.size(); ++i)
    staging[i] = static_cast<int>(i) == localIndex_ ? own_->staging() : peers_[i]->staging();
  const std::shared_ptr<ShmSlots> slots = makeShmSlots(local_, staging, opt_.stagingBytes);
  for (size_t i = 0; i < local_.size(); ++i)
    if (static_cast<int>(i) != localIndex_) (*conns)[local_[i]] = connectionTo(i, slots);
}

std::unique_ptr<Connection> ShmTransport::connectionTo(size_t i, std::shared_ptr<ShmSlots> slots) {
  ShmSegment* theirs = peers_[i].get();
  const int pid = watchablePid(*own_->header(), *theirs->header());
  const auto me = static_cast<uint32_t>(localIndex_), it = static_cast<uint32_t>(i);
  std::vector<std::unique_ptr<ByteStream>> streams;
  streams.emplace_back(
      new ShmStream(own_.get(), theirs, me, it, opt_, pid, &theirs->header()->alive));
  StreamOptions so;
  so.stripeBytes = SIZE_MAX;  // one stream: never striped
  std::unique_ptr<ShmMailbox> mail(new ShmMailbox(&theirs->ring(me)->mail, &own_->ring(it)->mail,
                                                  &theirs->header()->sleepers,
                                                  [theirs] { theirs->ring(); }));
  return std::unique_ptr<Connection>(
      new ShmConnection(local_[i], commId_, std::move(streams), so, theirs->staging(),
                        own_->staging(), opt_.stagingBytes, std::move(slots),
                        makeCmaPeerMemory(local_[i], pid), std::move(mail), opt_.lend));
}

}  // namespace collie
