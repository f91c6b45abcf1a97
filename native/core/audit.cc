// The audit trail's log and the requester of the current request (audit.h).
#include "audit.h"

#include <algorithm>
#include <cstring>

#include "model.h"

namespace shadowfs {

namespace {

struct OpName {
  AuditOp op;
  const char* name;
};
constexpr OpName kOpNames[] = {
    {AuditOp::Open, "open"},       {AuditOp::Exec, "exec"},     {AuditOp::Create, "create"},
    {AuditOp::Write, "write"},     {AuditOp::Truncate, "truncate"}, {AuditOp::Mkdir, "mkdir"},
    {AuditOp::Mknod, "mknod"},     {AuditOp::Symlink, "symlink"}, {AuditOp::Link, "link"},
    {AuditOp::Unlink, "unlink"},   {AuditOp::Rmdir, "rmdir"},   {AuditOp::Rename, "rename"},
};

// How many of the newest entries a by-node write looks through for its path's Write entry
// (programs writing a few files at once interleave their writes).
constexpr size_t kCoalesceWindow = 16;

thread_local bool tServing = false;
thread_local uint32_t tPid = 0;

// Command names by pid: filled at the first request of a pid that is recorded, cleared whole
// when it grows past kCommCacheMax (pids are reused; a stale name is the price of not reading
// /proc on every request, docs/audit-trail.md).
constexpr size_t kCommCacheMax = 4096;
std::mutex gCommMu;  // a leaf
std::unordered_map<uint32_t, std::string> gComm;
std::function<std::string(uint32_t)> gLookup;

}  // namespace

const char* auditOpName(AuditOp op) {
  for (const auto& o : kOpNames)
    if (o.op == op) return o.name;
  return "open";
}

bool auditOpFromName(std::string_view name, AuditOp* out) {
  for (const auto& o : kOpNames) {
    if (name == o.name) {
      *out = o.op;
      return true;
    }
  }
  return false;
}

void auditRequest(uint32_t pid) {
  tServing = true;
  tPid = pid;
}
void auditRequestEnd() {
  tServing = false;
  tPid = 0;
}
bool auditServing() { return tServing; }
uint32_t auditPid() { return tPid; }

void setAuditCommLookup(std::function<std::string(uint32_t)> lookup) {
  std::lock_guard<std::mutex> lock(gCommMu);
  gLookup = std::move(lookup);
  gComm.clear();
}

std::string auditComm(uint32_t pid) {
  if (pid == 0) return std::string();
  std::function<std::string(uint32_t)> lookup;
  {
    std::lock_guard<std::mutex> lock(gCommMu);
    auto it = gComm.find(pid);
    if (it != gComm.end()) return it->second;
    if (!gLookup) return std::string();
    lookup = gLookup;
  }
  // Read outside the lock: another thread's first sight of another pid need not wait for it.
  std::string name = lookup(pid);
  std::lock_guard<std::mutex> lock(gCommMu);
  if (gComm.size() >= kCommCacheMax) gComm.clear();
  gComm.emplace(pid, name);
  return name;
}

size_t AuditLog::cost(const AuditEntry& e) {
  return sizeof(AuditEntry) + e.path.size() + e.to.size() + e.comm.size();
}

void AuditLog::trim() {
  while (!ring_.empty() && (ring_.size() > limits_.maxEntries || bytes_ > limits_.maxBytes)) {
    bytes_ -= cost(ring_.front());
    ring_.pop_front();
    dropped_++;
  }
}

uint64_t AuditLog::append(AuditOp op, std::string_view path, std::string_view to, bool write,
                          uint32_t pid, std::string comm) {
  AuditEntry e;
  e.timeMs = static_cast<int64_t>(nsOf(nowTime()) / 1000000ull);
  e.op = op;
  e.write = write;
  e.pid = pid;
  e.path.assign(path);
  e.to.assign(to);
  e.comm = std::move(comm);
  std::lock_guard<std::mutex> lock(mu_);
  e.seq = nextSeq_++;
  bytes_ += cost(e);
  ring_.push_back(std::move(e));
  const uint64_t seq = ring_.back().seq;
  trim();
  return seq;
}

void AuditLog::addBytes(uint64_t seq, uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ring_.empty() || seq < ring_.front().seq) return;
  // Entries are in seq order (appends and loads keep it): a binary search finds it.
  auto it = std::lower_bound(ring_.begin(), ring_.end(), seq,
                             [](const AuditEntry& e, uint64_t s) { return e.seq < s; });
  if (it != ring_.end() && it->seq == seq) it->bytes += n;
}

void AuditLog::wrote(std::string_view path, uint32_t pid, std::string comm, uint64_t n) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    size_t looked = 0;
    for (auto it = ring_.rbegin(); it != ring_.rend() && looked < kCoalesceWindow; ++it, ++looked) {
      // The file's own Create (made without a handle kept, then written by node) takes them too.
      if ((it->op == AuditOp::Write || it->op == AuditOp::Create) && it->pid == pid &&
          it->path == path) {
        it->bytes += n;
        it->write = true;
        return;
      }
      // A rename or removal of that path ends its run of writes: a later write is another file.
      if (it->path == path || it->to == path) break;
    }
  }
  const uint64_t seq = append(AuditOp::Write, path, std::string_view(), true, pid, std::move(comm));
  addBytes(seq, n);
}

AuditSnapshot AuditLog::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  AuditSnapshot s;
  s.entries.assign(ring_.begin(), ring_.end());
  s.dropped = dropped_;
  s.nextSeq = nextSeq_;
  s.limits = limits_;
  return s;
}

void AuditLog::load(const AuditSnapshot& s) {
  std::lock_guard<std::mutex> lock(mu_);
  // Numbers this log handed out are not handed out again (a restore brings back an older record).
  const uint64_t handedOut = nextSeq_;
  ring_.clear();
  bytes_ = 0;
  dropped_ = s.dropped;
  uint64_t last = 0;
  for (const AuditEntry& e : s.entries) {
    if (e.seq <= last) continue;  // out of order (a damaged record): left out
    last = e.seq;
    bytes_ += cost(e);
    ring_.push_back(e);
  }
  nextSeq_ = std::max({s.nextSeq, last + 1, handedOut});
  trim();
}

void AuditLog::setLimits(const AuditLimits& l) {
  std::lock_guard<std::mutex> lock(mu_);
  limits_.maxEntries = std::max<size_t>(1, l.maxEntries);
  limits_.maxBytes = std::max<size_t>(sizeof(AuditEntry) + 64, l.maxBytes);
  trim();
}

void auditNote(Layer& L, AuditOp op, std::string_view path, std::string_view to) {
  if (!tServing || !L.audit) return;
  L.audit->append(op, path, to, false, tPid, auditComm(tPid));
}

void auditOpen(Layer& L, Handle* h, const std::string& path, const OpenIntent& intent,
               bool created) {
  if (!tServing || !L.audit) return;
  if (intent.transient) {
    // One READ or WRITE's own handle (fuse_ll without opens): no open to record; its bytes go
    // to the path's Write entry when it is released.
    if (intent.write) {
      h->auditPath = path;
      h->auditPid = tPid;
    }
    return;
  }
  const AuditOp op = created ? AuditOp::Create : intent.exec ? AuditOp::Exec : AuditOp::Open;
  h->auditSeq = L.audit->append(op, path, std::string_view(), intent.write || intent.truncate,
                                tPid, auditComm(tPid));
}

void auditRelease(Handle* h) {
  const uint64_t n = h->auditBytes.load(std::memory_order_relaxed);
  if (n == 0 || (h->auditSeq == 0 && h->auditPath.empty())) return;
  std::shared_ptr<Layer> L = h->layer.lock();
  if (!L || !L->audit) return;
  if (h->auditSeq) L->audit->addBytes(h->auditSeq, n);
  else L->audit->wrote(h->auditPath, h->auditPid, auditComm(h->auditPid), n);
}

}  // namespace shadowfs
