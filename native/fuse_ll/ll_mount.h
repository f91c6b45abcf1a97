// fuse_ll's mount object, shared by its files: node_table.cc (the kernel's node ids and
// the names and layers behind them), kernel_cache.cc (telling the kernel what to forget: layer
// switches, API writes, edits in the folder seen by the watcher), fuse_ll.cc (one handler per
// request, the session) and dev_loop.cc (the request loop and decoder).
//
// Threads: every op* handler runs on a request loop thread (dev_loop.cc; several at once); the
// public MountBackend methods run on whichever thread the addon calls them from; the folder watcher
// calls back on its own thread. Lock order: the table mutex (tmu_) is never held while calling
// into the overlay or into the kernel (notify calls), so neither can wait on the other.
#pragma once

#include <sys/stat.h>

#include <array>
#include <condition_variable>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "../core/dir_stream.h"
#include "../core/overlay.h"
#include "../core/watcher.h"
#include "../fuse_common/fuse_loop.h"
#include "kernel_abi.h"
#include "uring_loop.h"
#include "wire.h"

struct fuse_session;

namespace shadowfs {
namespace ll {

// One object the kernel holds a reference to. A file with several hard links has several
// names but one node, so the kernel keeps one inode (and one page cache) for it.
struct FName {
  uint64_t parent;
  std::string name;
};

struct FNode {
  // Empty once every name was unlinked. A node whose name now stands for another object (after
  // a layer switch or an edit in A) keeps its names, so requests still on their way for it can
  // find it, but byName no longer leads to it.
  std::vector<FName> names;
  std::weak_ptr<Layer> seenIn;  // the layer it was last looked up in (shared mount only)
  FolderWatcher::Token watch = 0;  // the watch on A's directory at this path, if any
  uint64_t nlookup = 0;
  FileType type = FileType::Regular;
  uint64_t ino = 0;     // the overlay's inode number
  bool opened = false;  // content seen by an earlier open (for keep_cache)
  Timespec mtime;
  uint64_t size = 0;
  std::vector<Handle*> handles;  // open files, for fstat after the last name is gone
  // Without open round trips (MountOptions::openRoundTrips false) the kernel holds no handle
  // of ours, so I/O comes by node. `pinned`: a handle taken just before the node's last name
  // went away (unlink, rename over it), so that descriptors still open on it go on reading
  // it; released when the kernel forgets the node. Also in `handles`.
  Handle* pinned = nullptr;
  Handle* retired = nullptr;  // the read-only pinned handle a write replaced (nodeHandle)
  // Without open round trips: the handle a read of more than one request goes on through
  // (streamReader), opened from `readerPath` in `readerLayer` for the folder's file there. One
  // descriptor kept across requests keeps the folder's file system's read-ahead going, which a
  // descriptor per request starts afresh each time. Released when the kernel forgets the node.
  Handle* reader = nullptr;
  std::weak_ptr<Layer> readerLayer;
  std::string readerPath;
  // The directory's listing between the READDIR requests of one pass (no-opendir has no
  // handle to keep it in): taken at offset 0, dropped when a reply reaches its end.
  std::shared_ptr<DirStream> listing;
  // Passthrough (under LLMount::ptMu_): the backing id the kernel reads this node's open files
  // through, and how many open files use it. The kernel wants one backing file per inode, and
  // no open without passthrough while it has one.
  uint32_t backingId = 0;
  uint32_t ptOpens = 0;
  uint64_t backingIno = 0;    // the backing file's inode number: A's file, or a spill file
  uint64_t backingDev = 0;    // and its device (two files systems may number alike)
  bool backingLayer = false;  // the backing file is a layer content's spill or memory file
  uint32_t ptWriters = 0;     // of the open files, those open for writing: the kernel writes
};

// What OPEN, CREATE and the I/O requests say of an open file: the handle we gave (fh, 0 for a
// file the kernel opened without asking), the open(2) flags, and what the reply tells the
// kernel about its caches.
struct FileInfo {
  uint64_t fh = 0;
  int flags = 0;
  bool keep_cache = false;     // keep the cached pages (FOPEN_KEEP_CACHE)
  bool cache_readdir = false;  // keep the listing (FOPEN_CACHE_DIR)
  bool noflush = false;        // no FLUSH at close (FOPEN_NOFLUSH)
  bool direct_io = false;      // this open's reads and writes bypass the page cache (FOPEN_DIRECT_IO)
  // The request clears set-user-ID and set-group-ID bits (kWriteKillSuidgid on a WRITE,
  // kOpenKillSuidgid on an O_TRUNC OPEN or CREATE): see LLMount::killSuidgid.
  bool killSuidgid = false;
  uint32_t openFlags() const {
    return (keep_cache ? abi::kOpenKeepCache : 0) | (cache_readdir ? abi::kOpenCacheDir : 0) |
           (noflush ? abi::kOpenNoflush : 0) | (direct_io ? abi::kOpenDirectIo : 0);
  }
};

struct DirHandle {
  DirStream stream;
};

class LLMount final : public LoopedMount {
 public:
  LLMount(std::shared_ptr<Overlay> ov, Layer* view, std::string lowerPath, std::string mountPoint,
          MountOptions opts)
      : ov_(std::move(ov)),
        view_(view),
        lowerPath_(std::move(lowerPath)),
        mountPoint_(std::move(mountPoint)),
        opts_(opts) {
    auto root = std::make_unique<FNode>();
    root->type = FileType::Directory;
    root->nlookup = 1;
    nodes_.emplace(abi::kRootId, std::move(root));
  }
  ~LLMount() override {
    stopWatcher();
    joinLoop();
    closeSession();
    releaseNodeHandles();
    if (view_) ov_->unpin(view_);
  }
  LLMount(const LLMount&) = delete;
  LLMount& operator=(const LLMount&) = delete;

  int start(int* err, std::string* message);

  void invalidateForSwitch(const std::vector<std::string>& paths) override;
  bool usesEpoch() const override { return epochWorks_.load(); }
  bool mounted() const override { return mounted_.load(); }
  void invalidatePaths(const std::vector<std::string>& paths) override;
  void invalidateNames(const std::vector<std::string>& paths, bool filePages);
  void invalidateAll() override;
  int unmount(bool lazy) override;
  void endedOnItsOwn() override;

  // --- request handlers (loop threads) ---
  static LLMount* self(Req* req) {
    LLMount* m = req->m;
    m->requests_.fetch_add(1, std::memory_order_relaxed);
    return m;
  }
  uint64_t requests() const override { return requests_.load(std::memory_order_relaxed); }
  // The requests whose numbers tell how many round trips a workload costs.
  enum class Op {
    Lookup, Getattr, Setattr, Open, Create, Mknod, Release, Flush, Read, Write, Opendir,
    Readdir, Readdirplus, Releasedir, Getxattr, Forget, Count
  };
  void count(Op op) { opCounts_[static_cast<size_t>(op)].fetch_add(1, std::memory_order_relaxed); }
  std::vector<std::pair<std::string, uint64_t>> requestCounts() const override;
  // The kernel opens files (noOpen_) and directories (noOpendir_) without asking: set at INIT
  // when it offers that and the mount did not ask for open round trips.
  // ioUring: the kernel serves requests through our io_uring entries (uring_loop.h), known once
  // INIT was answered. passthrough: not implemented yet (docs/fuse-transport-plan.md section 2),
  // reported so that a reader sees it is off.
  std::vector<std::pair<std::string, bool>> transport() const override {
    return {{"noOpen", noOpen()},       {"noOpendir", noOpendir()},
            {"readdirplus", readdirplus_.load()}, {"epoch", epochWorks_.load()},
            {"passthrough", passthrough_.load()},     {"ioUring", uringActive_.load()}};
  }
  bool noOpen() const { return noOpen_.load(std::memory_order_relaxed); }
  bool noOpendir() const { return noOpendir_.load(std::memory_order_relaxed); }
  const ChangeJournal* folderChanges() const override { return watcher_ ? &journal_ : nullptr; }
  // INIT: what this mount asks of the kernel, given what it offers (flags | flags2 << 32).
  uint64_t negotiate(uint64_t offered);
  // The largest WRITE the mount accepts (max_write in the INIT reply), and so the size of a
  // request buffer (max_pages in the INIT reply is this many pages).
  static constexpr uint32_t kMaxWrite = 1u << 20;
  // The largest READ (the max_read mount option): a page less than a WRITE, so that a reply
  // spliced from a file (splice_reply.h), one pipe buffer per page plus one for the header,
  // fits a 1 MiB pipe, the most pipe-max-size lets a process without CAP_SYS_RESOURCE have.
  static constexpr uint32_t kMaxRead = kMaxWrite - 4096;
  static void opLookup(Req* req, uint64_t parent, const char* name);
  static void opForget(Req* req, uint64_t ino, uint64_t n);
  static void opForgetMulti(Req* req, size_t count, const abi::ForgetOne* forgets);
  static void opGetattr(Req* req, uint64_t ino, FileInfo* fi);
  static void opSetattr(Req* req, uint64_t ino, const abi::SetattrIn& in, FileInfo* fi);
  static void opReadlink(Req* req, uint64_t ino);
  static void opMknod(Req* req, uint64_t parent, const char* name, mode_t mode,
                      dev_t rdev);
  static void opMkdir(Req* req, uint64_t parent, const char* name, mode_t mode);
  static void opUnlink(Req* req, uint64_t parent, const char* name);
  static void opRmdir(Req* req, uint64_t parent, const char* name);
  static void opSymlink(Req* req, const char* target, uint64_t parent, const char* name);
  static void opRename(Req* req, uint64_t parent, const char* name, uint64_t newparent,
                       const char* newname, unsigned int flags);
  static void opLink(Req* req, uint64_t ino, uint64_t newparent, const char* newname);
  static void opOpen(Req* req, uint64_t ino, FileInfo* fi);
  static void opRead(Req* req, uint64_t ino, size_t size, off_t off,
                     FileInfo* fi);
  static void opWrite(Req* req, uint64_t ino, const char* buf, size_t size, off_t off,
                      FileInfo* fi);
  static void opFlush(Req* req, uint64_t ino, FileInfo* fi);
  static void opRelease(Req* req, uint64_t ino, FileInfo* fi);
  static void opFsync(Req* req, uint64_t ino, int datasync, FileInfo* fi);
  static void opOpendir(Req* req, uint64_t ino, FileInfo* fi);
  static void opFallocate(Req* req, uint64_t ino, int mode, off_t offset, off_t length,
                          FileInfo* fi);
  static void opReaddirplus(Req* req, uint64_t ino, size_t size, off_t off,
                            FileInfo* fi);
  static void opReaddir(Req* req, uint64_t ino, size_t size, off_t off,
                        FileInfo* fi);
  static void opReleasedir(Req* req, uint64_t ino, FileInfo* fi);
  static void opStatfs(Req* req, uint64_t ino);
  static void opSetxattr(Req* req, uint64_t ino, const char* name, const char* value,
                         size_t size, int flags);
  static void opGetxattr(Req* req, uint64_t ino, const char* name, size_t size);
  static void opListxattr(Req* req, uint64_t ino, size_t size);
  static void opRemovexattr(Req* req, uint64_t ino, const char* name);
  static void opCreate(Req* req, uint64_t parent, const char* name, mode_t mode,
                       FileInfo* fi);

 private:
  friend struct WireTestAccess;  // test/native/fuse_ll/wire_test.cc feeds dispatch() directly
  static std::string key(uint64_t parent, const std::string& name) {
    std::string k(reinterpret_cast<const char*>(&parent), sizeof parent);
    k += name;
    return k;
  }
  int pathOf(uint64_t id, std::string* out);
  int pathOfLocked(uint64_t id, std::string* out, int depth);
  // One layer per request: the path of node `id` and the layer to serve it from (layerFor),
  // resolved once; ESTALE when no layer holds the object the kernel knows any more.
  // `active`, when given, is the active layer as this request saw it (so that a request that
  // resolves two nodes sees one switch state for both).
  // `forWrite`: see layerFor.
  int nodeAt(uint64_t id, std::string* path, std::shared_ptr<Layer>* layer,
             const std::shared_ptr<Layer>& active = nullptr, bool forWrite = false);
  // The same for a name in directory `parent`: the directory's layer, and the child's path.
  int childAt(uint64_t parent, const char* name, std::string* path, std::shared_ptr<Layer>* layer,
              const std::shared_ptr<Layer>& active = nullptr);
  void replyXattr(Req* req, const std::string& value, size_t size);
  // HANDLE_KILLPRIV_V2: what the kernel no longer does itself when a caller without
  // CAP_FSETID writes or truncates, or anyone chowns a file. As Linux's own file systems do:
  // the set-user-ID bit goes; the set-group-ID bit goes when group execute is set, or when the
  // caller is neither root nor in the file's group (without group execute the bit marks
  // mandatory locking, kept for those who may set it). Through the open handle `h` when there
  // is one, else the path in `layer`. 0 or an errno.
  int killSuidgid(const Req* req, Layer* layer, const std::string& path, Handle* h);
  static uint32_t killedPerm(const Attr& a, const Req* req);
  // A handle for one READ/WRITE/fallocate that came without one (no-open): opened from the
  // node's path in its layer, or the node's pinned handle once its names are gone. *own says
  // whether the caller releases it.
  // `stream`: a read past the first request of a file (a READ at an offset past 0), which goes
  // on through the node's reader (FNode::reader) while that still shows what the path does.
  int nodeHandle(uint64_t id, bool write, Handle** h, bool* own, bool stream = false);
  // Node `id`'s reader, if it has one and `path` in `layer` still shows the folder's file it
  // reads; else null. keepReader() makes `h` (just opened there, the caller's) the node's reader
  // when it has none and the number kept allows: then the mount owns it.
  Handle* streamReader(uint64_t id, const std::shared_ptr<Layer>& layer, const std::string& path);
  bool keepReader(uint64_t id, const std::shared_ptr<Layer>& layer, const std::string& path,
                  Handle* h);
  // Teardown (the loop has ended): the handles nodes still hold.
  void releaseNodeHandles();
  // The handle one READ/WRITE/SETATTR/fallocate works through: the kernel's (`fh`), else one
  // fromNode() takes (nodeHandle), released with this object when it is ours.
  struct IoHandle {
    LLMount* m;
    Handle* h;
    bool own = false;
    IoHandle(LLMount* mount, uint64_t fh) : m(mount), h(reinterpret_cast<Handle*>(fh)) {}
    IoHandle(const IoHandle&) = delete;
    IoHandle& operator=(const IoHandle&) = delete;
    ~IoHandle() { finish(); }
    // Releases a handle of ours now: before the reply, so that what its release records (a
    // write's bytes in the audit trail) comes before anything the caller does once answered.
    void finish() {
      if (own) m->ov_->release(h);
      own = false;
    }
    int fromNode(uint64_t ino, bool write, bool stream = false) {
      int e = m->nodeHandle(ino, write, &h, &own, stream);
      if (e) h = nullptr, own = false;
      return e;
    }
  };
  // Before a name that may be the last one of a regular file goes away: pin a handle on its node
  // (see FNode::pinned). No-open only; a no-op when the kernel does not know the name.
  void pinBeforeRemove(uint64_t parent, const char* name);
  // The listing to answer a READDIR(PLUS) at `off` from when the kernel holds no handle.
  int nodeListing(uint64_t id, uint64_t off, std::shared_ptr<DirStream>* out, bool readAhead);
  void doneListing(uint64_t id, const std::shared_ptr<DirStream>& d);
  // The node for a name the kernel is told of. `layerLinks`: the object is the layer's own and
  // has several names (Attr::layerObject, nlink > 1), so its other names share its node.
  uint64_t remember(uint64_t parent, const std::string& name, FileType type, uint64_t ino,
                    bool layerLinks, const std::shared_ptr<Layer>& seenIn);
  uint64_t rememberLocked(uint64_t parent, const std::string& name, FileType type, uint64_t ino,
                          bool layerLinks, const std::shared_ptr<Layer>& seenIn);
  // After a LINK made in the layer: node `id` (the link's source) is now a layer object with
  // several names, which the new name joins.
  void linkedInLayer(uint64_t id, uint64_t ino);
  // The layer to serve node `id` from: the active one while it still holds the object the kernel
  // knows (inode `ino`), else the layer the node was looked up in, if that one still holds it.
  // Requests that looked a node up before a switch and reach us after it are served from the
  // object they saw, never from a mix. Null if neither holds it (the caller answers ESTALE).
  // `forWrite` (a WRITE or SETATTR that came by node, no-open): the layer the node was looked
  // up in, while it still shows that object, wins over the active one. A file opened for
  // writing before a switch then writes where it was opened, unless the new layer has looked
  // the name up since (the node is then its too: docs/limits.md).
  std::shared_ptr<Layer> layerFor(uint64_t id, const std::string& path,
                                  std::shared_ptr<Layer> active = nullptr, bool forWrite = false);
  // Whether `layer` holds its own object at `path` (created there, or a copy of the folder's
  // file) rather than showing the folder's file.
  bool layerOwns(Layer* layer, const std::string& path);
  void dropNameLocked(uint64_t id, uint64_t parent, const std::string& name);
  void trackHandle(uint64_t id, Handle* h, bool add);
  // A copy of one of the node's open handles (with its own descriptor of A's file, if any:
  // close it with the copy). False if the node has none open.
  bool anyHandle(uint64_t id, Handle* out);
  bool unlinked(uint64_t id);
  void forget(uint64_t id, uint64_t n);
  void unlinkName(uint64_t parent, const std::string& name);
  void moveName(uint64_t parent, const std::string& name, uint64_t newparent,
                const std::string& newname, bool exchange);
  void replyEntry(Req* req, uint64_t parent, const std::string& name, const Attr& a,
                  const std::shared_ptr<Layer>& seenIn);
  // An entry for node `id` named in directory `parent`, with the timeouts below.
  void fillEntry(abi::EntryOut* e, uint64_t parent, uint64_t id, const Attr& a);
  // How long the kernel may keep a name or attributes. What the folder watcher covers (names in
  // a directory whose directory in A is watched, and that directory's own attributes) is kept
  // until we say otherwise: every change there is pushed (edits in A by the watcher, API writes
  // and layer switches by kernel_cache.cc), so a timeout would only make the kernel ask again
  // for what it already has. Everything else (a directory only a layer has, one the OS had no
  // watch left for, a mount without a watcher) keeps the mount's own timeouts (cacheTimeout),
  // which bound how late an edit in A there shows. A timeout of 0 stays 0.
  static constexpr double kCoveredTimeout = 24 * 3600.0;
  static double coveredOr(double timeout, bool covered) {
    return covered && timeout > 0 ? kCoveredTimeout : timeout;
  }
  bool watchedDir(uint64_t dir);  // whether the watcher covers names in directory node `dir`
  bool coveredNode(uint64_t id);  // whether it covers node `id`'s attributes
  // 0 for a node the kernel writes through passthrough: its own cached attributes would miss
  // what a write through a memory mapping changed, so every stat asks (and the core syncs).
  double attrTimeoutOf(uint64_t id) {
    return kernelWritten(id) ? 0 : coveredOr(opts_.attrTimeout, coveredNode(id));
  }
  bool kernelWritten(uint64_t id);

  std::shared_ptr<Overlay> ov_;
  Layer* view_;  // pinned layer of a view, or null: the active layer
  std::string lowerPath_;
  std::string mountPoint_;
  MountOptions opts_;
  struct fuse_session* se_ = nullptr;  // libfuse's: mounts and unmounts, never reads
  int fd_ = -1;                         // /dev/fuse of this mount (owned by se_)
  void closeSession();
  // The request loop (dev_loop.cc): threads reading /dev/fuse, one request each at a time,
  // more started while all are busy (up to kMaxWorkers), so that a long request (a copy-up)
  // never holds up the others.
  static constexpr int kMaxWorkers = 16;
  void serve();
  void worker();
  // One request laid out as /dev/fuse delivers it (header, then arguments); its reply goes to
  // `sink`, or to /dev/fuse when null.
  void dispatch(const char* buf, size_t size, ReplySink* sink);
  void startWorkerIfAllBusy();
  // FUSE over io_uring (uring_loop.h). prepareUring: at INIT, whether to ask for it (the mount
  // allows it, root's switch is on, the kernel offers it and the rings could be set up);
  // startUring: once INIT is answered, registers the entries and records whether the kernel took
  // them (uringActive_), else goes back to /dev/fuse only.
  bool prepareUring(uint64_t offered);
  void startUring();
  std::unique_ptr<uring::Transport> uring_;
  std::atomic<bool> uringActive_{false};
  std::mutex workersMu_;
  std::vector<std::thread> workers_;  // beside the loop thread, which serves too
  bool stopping_ = false;             // under workersMu_: the loop ended, start no more
  std::atomic<int> idle_{0};          // workers waiting in read()
  std::atomic<bool> mounted_{false};
  std::atomic<bool> epochWorks_{false};  // the kernel took FUSE_NOTIFY_INC_EPOCH (7.44+)
  std::atomic<bool> noOpen_{false};
  std::atomic<bool> noOpendir_{false};
  std::atomic<bool> readdirplus_{false};
  // Passthrough: asked for, agreed at INIT, and not refused since (the first BACKING_OPEN that
  // fails for lack of privilege or support turns it off for the mount).
  std::atomic<bool> passthrough_{false};
  std::mutex ptMu_;  // taken before tmu_
  std::unordered_map<Handle*, uint64_t> ptHandles_;  // open files read through a backing file
  // For an OPEN: whether `h` (just opened on node `ino`) is read through a backing file, and
  // which (*backingId, 0 if not). ESTALE when it cannot be and the node already has one: the
  // node's names are detached, so the kernel's retry of the open (with revalidation) looks the
  // name up again and gets a new node for the new object.
  // `killPriv`: the opener is not root (Overlay::kernelWriteDescriptor).
  int passthroughOpen(uint64_t ino, Handle* h, uint32_t* backingId, bool killPriv);
  // For a write-open: ESTALE when the node is read through the folder's file (its names then
  // go to a new node at the next lookup), else 0; *layerBacked when it is read or written
  // through a layer content's file, which the open may share. ptMu_ held.
  int staleIfBacked(uint64_t ino, bool* layerBacked);
  void unnameLocked(FNode* n, uint64_t ino);  // drops the node's names from the tables; tmu_ held
  void passthroughRelease(Handle* h);
  // INIT answered: start() waits for it, so that transport() tells the truth once mount returns.
  std::mutex initMu_;
  std::condition_variable initCv_;
  bool initDone_ = false;
  std::atomic<uint64_t> requests_{0};
  std::array<std::atomic<uint64_t>, static_cast<size_t>(Op::Count)> opCounts_{};
  std::atomic<uint64_t> splicedReads_{0};  // READ replies spliced from a file (splice_reply.h)

  // Live view of A: a watch on A's directory behind every directory node the kernel holds
  // (native/platform's FolderWatcher). A reported change invalidates what the kernel cached for
  // that name, so an edit in A shows in the shadow within milliseconds instead of after the
  // cache timeout.
  void startWatcher();
  void stopWatcher();
  std::unique_ptr<FolderWatcher> watcher_;
  ChangeJournal journal_;  // what the watcher reported, for the diagnostics service

  // Readers kept by nodes (FNode::reader), each a descriptor of a folder file; at most kMaxReaders.
  static constexpr int kMaxReaders = 256;
  std::atomic<int> readers_{0};
  std::mutex tmu_;  // guards nodes_, byName_, byIno_, nextId_. Taken before the watcher's own lock
                    // (watch/unwatch under it). Never held across overlay or
                    // notify calls.
  std::unordered_map<uint64_t, std::unique_ptr<FNode>> nodes_;
  std::unordered_map<std::string, uint64_t> byName_;  // (parent id, name) -> node id
  std::unordered_map<uint64_t, uint64_t> byIno_;       // overlay inode number -> node id
  uint64_t nextId_ = abi::kRootId + 1;  // never reused, so generation can stay 0
};

}  // namespace ll
}  // namespace shadowfs
