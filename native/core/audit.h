// The audit trail (issue #32): per layer, a bounded record of what programs did through a mount
// showing that layer — opened, executed, created, wrote, truncated, deleted, renamed, linked —
// taken from the requests the file system serves, in the core's file-system operations, so that
// every backend (fuse_ll, fuse_hl, winfsp) records the same way. The API's own changes to a
// layer (file tools, checkpoints restored, apply) are not requests and are not recorded.
//
// What a mount never hears of is not in it: reads the kernel serves from its page cache, reads of
// a passthrough-opened file, names and attributes it caches, and, on fuse_ll without open round
// trips (its default), opens and execs themselves (the kernel opens files without asking; only
// the changes come). docs/audit-trail.md says what that means for a reader of the record.
//
// Cost: nothing on READ. A WRITE through an open handle adds to the handle's counter (one
// relaxed atomic add); the bytes reach the open's entry when the handle is released. A WRITE
// without a handle of its own (fuse_ll's by-node I/O) adds to the newest write entry of that
// path and process under the log's mutex. Every other recorded request appends one small entry
// under that mutex (a leaf lock: nothing else is taken while it is held, and it is never held
// while the overlay's locks are taken).
//
// Who: the process id the backend got with the request (FUSE's in-header; WinFsp's
// FspFileSystemOperationProcessId), and its command name, read once per process id from the OS
// (best effort: a process gone by then, or a reused id, gives an empty or stale name).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace shadowfs {

enum class AuditOp : uint8_t {
  Open,      // a file opened (`write`: for writing); `bytes` written through that open
  Exec,      // a file opened to be executed (the kernel said so: FMODE_EXEC)
  Create,    // a file created (and opened); `bytes` written through that open
  Write,     // bytes written without an open the mount saw (fuse_ll's default): coalesced
  Truncate,  // a file's size set by name (truncate(2), O_TRUNC is part of Open)
  Mkdir,
  Mknod,     // a special file (a regular file made this way is a Create)
  Symlink,   // `to` holds the link's target
  Link,      // a hard link: `path` the new name, `to` the existing one
  Unlink,
  Rmdir,
  Rename,    // `path` the old name, `to` the new one
};
const char* auditOpName(AuditOp op);
bool auditOpFromName(std::string_view name, AuditOp* out);

struct AuditEntry {
  uint64_t seq = 0;     // numbers every entry of a layer, oldest first, never reused
  int64_t timeMs = 0;   // wall clock, milliseconds since the epoch
  AuditOp op = AuditOp::Open;
  bool write = false;   // Open/Create: opened for writing
  uint32_t pid = 0;     // 0: not known
  uint64_t bytes = 0;   // Open/Create/Write: bytes written
  std::string path, to, comm;
};

struct AuditLimits {
  size_t maxEntries = 10000;
  size_t maxBytes = 2u << 20;  // entries' fixed part plus their strings
};

// What a query or a checkpoint takes: the entries still kept, and how many were dropped to
// keep within the limits (oldest first) since the layer's record began.
struct AuditSnapshot {
  std::vector<AuditEntry> entries;
  uint64_t dropped = 0;
  uint64_t nextSeq = 1;
  AuditLimits limits;
};

class AuditLog {
 public:
  AuditLog() = default;
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  // Appends an entry for the current request; returns its seq.
  uint64_t append(AuditOp op, std::string_view path, std::string_view to, bool write,
                  uint32_t pid, std::string comm);
  // Bytes written through the open recorded as `seq` (gone from the ring: nothing).
  void addBytes(uint64_t seq, uint64_t n);
  // Bytes written with no open of our own: onto the newest Write entry of that path and pid
  // among the last few, else a new one.
  void wrote(std::string_view path, uint32_t pid, std::string comm, uint64_t n);
  AuditSnapshot snapshot() const;
  // Replaces everything with `s` (a checkpoint restored, a layer copied); its entries beyond
  // the limits are dropped (and counted) as appends would. Seqs go on after both the record's
  // and this log's own: none is handed out twice in one layer's life.
  void load(const AuditSnapshot& s);
  void setLimits(const AuditLimits& l);

 private:
  static size_t cost(const AuditEntry& e);
  void trim();  // mu_ held
  mutable std::mutex mu_;  // a leaf (see the top of this file)
  std::deque<AuditEntry> ring_;
  size_t bytes_ = 0;
  uint64_t dropped_ = 0;
  uint64_t nextSeq_ = 1;
  AuditLimits limits_;
};

// --- The requester, set by the backends on the thread that serves a request ---
// Backends call auditRequest() at the start of every request they serve; the core records only
// on threads that did (the addon's worker threads, which run the API, never do).
void auditRequest(uint32_t pid);
void auditRequestEnd();  // this thread serves no request from now on (the C++ unit tests)
bool auditServing();
uint32_t auditPid();
// The command name of `pid` (cached per pid; empty when unknown). The lookup is the OS's: set
// once by the platform (Linux: /proc/<pid>/comm); unset, names stay empty.
std::string auditComm(uint32_t pid);
void setAuditCommLookup(std::function<std::string(uint32_t)> lookup);

// The core's hooks (fs_ops_*.cc; model.h's Layer and overlay.h's Handle): each records only
// on a thread serving a request, into L's log.
struct Layer;
struct Handle;
struct OpenIntent;
void auditNote(Layer& L, AuditOp op, std::string_view path, std::string_view to = {});
// After a successful open or create: the entry, whose seq the handle keeps for its bytes.
void auditOpen(Layer& L, Handle* h, const std::string& path, const OpenIntent& intent,
               bool created);
// From Overlay::release: the bytes written through the handle reach its entry.
void auditRelease(Handle* h);

}  // namespace shadowfs
