// The overlay model: the user's folder A (read through a LowerFs, never written) plus one
// in-memory layer of changes. Everything a backend needs to serve a shadow mount lives here,
// so a backend (FUSE low-level on Linux, FUSE3 high-level / WinFsp) only translates calls.
//
// Layer shape: a tree of Nodes that mirrors the paths the layer touches. A Node is a whiteout
// (hides what A has at that path) or points at an Inode. A directory Node merges with A's
// directory at the same place unless it is opaque, or merges with another A directory when it
// was renamed (`redirect`, so renaming a big directory of A is O(1)). A regular-file Inode keeps
// its content in A (`lowerPath`) until the first write or truncate copies it into memory (a
// write-open alone copies nothing, see Handle); its inode number is A's, so it stays stable
// across copy-up and rename.
//
// Threads: every public method may be called from any thread and returns 0 or a positive
// errno. The locks and their order are described in model.h: writes of different files proceed
// in parallel, and A's file contents are read (copy-up, big files included) without any lock
// that other files or other layers need.
//
// The implementation is split by concern: model.cc (the records of model.h: inodes, nodes,
// children, lock stripes), tree.cc (resolving paths, shaping the layer tree), content.cc (file
// contents, copy-up, spill), fs_ops.cc (one function per file-system operation), layers.cc
// (the set of layers), layer_ops.cc (the API's changes to one layer and its reads of one),
// changes.cc (what a layer changed, its memory).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "audit.h"
#include "casefold.h"
#include "shared_mutex.h"
#include "dir_stream.h"
#include "lower.h"
#include "path.h"
#include "spill.h"
#include "types.h"
#include "write_guard.h"

namespace shadowfs {

struct Inode;
struct Node;
struct Layer;
template <typename T>
class Ref;  // model.h
class Spiller;  // budget.h

// An open file. Owned by the backend between open/create and release.
//
// A write-open of a file the layer does not hold yet (no O_TRUNC) changes nothing in the layer:
// the handle is a handle of A's file (`lower`, `lowerIno`, `lowerRel`) that may write, and
// `pendingPath` says where it was opened. Its first change (write, truncate, fallocate) copies
// the file into the layer and binds the handle to that copy (`bound`); reads before that read
// A's file as it is, like a read-only handle. Opening a big file for writing and closing it
// unwritten (editors, `open(O_RDWR)` to probe) so copies nothing (issue #28, finding 11).
struct Handle {
  std::shared_ptr<Inode> inode;  // set when the file has (or gets) a layer inode
  LowerHandle lower = -1;        // open file in A, for content still in A
  uint64_t lowerIno = 0;         // A's inode number of a pure-lower file, to see a later copy-up
  std::string lowerRel;          // and its path in A
  std::weak_ptr<Layer> layer;    // the layer the file was opened in
  bool writable = false;
  std::string pendingPath;       // a deferred write-open: where it was opened ("" otherwise)
  // The layer's copy a deferred write-open writes since its first change (a counted reference,
  // dropped by release). Set once, then never changed: atomic because reads through the same
  // handle may run while it is set. Backends never look at it (they see `inode` null).
  std::atomic<Inode*> bound{nullptr};
  // Serialises that first change between threads writing through this one handle. Taken
  // before any lock of model.h's order, never while one is held.
  std::mutex bindMu;
  // The audit trail (audit.h): the entry of this open (0: none), the bytes written through it
  // (added up here, handed to the entry at release), and for a by-node write handle the path
  // and process its bytes are recorded for.
  uint64_t auditSeq = 0;
  std::atomic<uint64_t> auditBytes{0};
  uint32_t auditPid = 0;
  std::string auditPath;
  // The kernel serves this open from its content's file (Overlay::kernelDescriptor); release
  // lets go of that file (and for a write-open, takes its last size and times).
  bool kernelHeld = false;
};

// Inode numbers of objects created in a layer start here, far above what A's file system
// hands out, so they never collide with A's numbers (which copied-up objects keep).
constexpr uint64_t kFirstLayerIno = (1ull << 60) + 1;

// Takes the bytes of a read whose source is a descriptor (the folder's file, a spill or memory
// file) in place of a copy into the caller's buffer: Overlay::readVia calls it under the locks
// a read holds. fuse_ll splices them into its reply and sends it from here, before those locks
// go, so that the bytes it sends are the ones read() would have copied (splice_reply.h).
// Returns 0 or an errno, with *got the bytes taken (fewer than `size` only at the file's end).
class DescriptorReader {
 public:
  virtual ~DescriptorReader() = default;
  virtual int read(int fd, uint64_t off, size_t size, size_t* got) = 0;
};

struct LayerStats {
  uint64_t memoryBytes = 0;  // contents held in memory plus per-path bookkeeping
  uint64_t paths = 0;        // layer nodes (entries, whiteouts, directories)
  uint64_t spilledBytes = 0; // contents moved to spill files
};

// A whole-file read-modify-write (Overlay::updateFile). The change sees the file as the layer
// shows it at one moment and decides what it becomes; nothing else changes the file between
// that look and the write.
struct FileNow {
  bool exists = false;
  Attr attr;                              // when it exists (size: of `content` when read)
  const std::string* content = nullptr;   // the whole content, when FileUpdate::readContent
};
struct FileChange {
  bool write = false;             // false: leave the file as it is (refused, or nothing to do)
  std::string content;            // the whole new content
  std::optional<uint32_t> perm;   // permission bits to set (a new file: else FileUpdate::newPerm)
};
struct FileUpdate {
  // Runs once per look (a path found absent may be looked at again, so it must be a function
  // of what it is shown); called with the file's content lock held: it must not call back into
  // the overlay, and should be quick.
  std::function<void(const FileNow&, FileChange*)> change;
  bool mayCreate = false;     // a missing file (and missing parents) may be created
  bool readContent = false;   // the change needs the content
  uint64_t maxRead = UINT64_MAX;  // a larger file is EFBIG, unread
  uint32_t newPerm = 0644;
};
struct FileUpdateResult {
  bool written = false;
  bool created = false;
  Attr attr;  // the file after the update (before it when nothing was written)
};

// Layers and what a file-system call sees:
// - Any number of named layers, all on top of the live folder A.
// - At most one is *active*: the shared mount shows it. With none active the mount shows A
//   exactly and refuses writes (EROFS).
// - A view (a second mount) pins one layer and always shows it, active or not.
// File-system calls take the layer to act on: backends resolve it once per request (from the
// node the kernel holds, or current() for the shared mount; a view's pinned layer) and pass it
// to every call they make for that request, so a switch in the middle of a request can never
// split it across two layers. Null means "whatever layer is active at the moment of the call".
// A request that resolved its layer before a switch finishes in that layer: it is ordered
// before the switch, as if it had completed just before it.
//
// What an open file sees after a switch: the object it opened, as on a real file system after
// a rename over its path. A file opened in layer X keeps reading and writing X's copy; a file
// of A opened for reading keeps reading A (or X's copy, once X copies it up). New opens see
// the layer that is active when they happen.
//
// Names: byte for byte by default (POSIX). With NameMatch::IgnoreCase the overlay matches names
// as Windows does, ignoring case but keeping it (the fold is in casefold.h: ASCII letters):
// - every operation that takes a path first spells it the way the layer and the folder already
//   spell it (canon(), under the layer's lock), then runs exactly as in the default mode: a
//   component the layer holds takes the layer's spelling (a live entry before a deletion), one
//   below a position that merges the folder takes the folder's spelling, and a name found
//   nowhere keeps the caller's (a new entry has the case it was created with);
// - a listing shows one entry per name: the layer's entries and deletions hide the folder's
//   entries of that name in any case;
// - a rename to another case of the same entry (`foo` -> `Foo`) changes its spelling, and an
//   entry created where the layer deleted the name in another case takes the caller's case.
// The option is fixed at construction; with the default, nothing of this runs.
enum class NameMatch { Exact, IgnoreCase };

class Overlay {
 public:
  // Files whose content grows past `spillThreshold` bytes move to `spill` (if given); so do the
  // contents the process's memory budget evicts (budget.h), which needs `spill` too: an overlay
  // without one keeps every content in memory, counted in the budget but never evicted.
  explicit Overlay(std::unique_ptr<LowerFs> lower, std::unique_ptr<SpillStore> spill = nullptr,
                   uint64_t spillThreshold = UINT64_MAX, NameMatch names = NameMatch::Exact);
  ~Overlay();
  Overlay(const Overlay&) = delete;
  Overlay& operator=(const Overlay&) = delete;

  // Paths no layer may write (write_guard.h: git's control files, and the folder's hooks
  // directory): every write there, through the mount or the API, is EPERM. Null: none. Set once,
  // before the overlay is shared with a backend or a thread; never changed after.
  void setWriteGuard(std::shared_ptr<const WriteGuard> g) { guard_ = std::move(g); }
  const WriteGuard* writeGuard() const { return guard_.get(); }

  // Copy-up gives up after this many attempts when A's file keeps changing while it is read.
  static constexpr int kCopyUpTries = 5;

  // --- File-system operations (backend threads). Paths are normalised, "" is the root. ---
  // A component longer than kNameMax is ENAMETOOLONG, as from a real file system.
  int getattr(Layer* view, const std::string& path, Attr* out);
  // Whether the directory at `path` merges the folder's directory of the same path, if the
  // folder has one (so a watch on that folder directory reports every change to what it
  // shows): false for an opaque directory, one renamed from elsewhere (it reads its origin) or
  // under one, and anything that is not a directory.
  bool mergesFolderDirAt(Layer* view, const std::string& path);
  int readdir(Layer* view, const std::string& path, std::vector<DirEntry>* out);
  int readlink(Layer* view, const std::string& path, std::string* out);
  int mknod(Layer* view, const std::string& path, FileType type, uint32_t perm, uint64_t rdev,
            const Caller& who, Attr* out);
  int mkdir(Layer* view, const std::string& path, uint32_t perm, const Caller& who, Attr* out);
  int symlink(Layer* view, const std::string& target, const std::string& path, const Caller& who,
              Attr* out);
  int link(Layer* view, const std::string& from, const std::string& to, Attr* out);
  int unlink(Layer* view, const std::string& path);
  int rmdir(Layer* view, const std::string& path);
  int rename(Layer* view, const std::string& from, const std::string& to, uint32_t flags);
  // `h` may be null; when set (ftruncate, fchmod on an unlinked file) it wins over `path`.
  int setattr(Layer* view, const std::string& path, Handle* h, uint32_t mask, const Attr& values,
              Attr* out);
  int open(Layer* view, const std::string& path, const OpenIntent& intent, Handle** out,
           Attr* attr);
  int create(Layer* view, const std::string& path, uint32_t perm, const OpenIntent& intent,
             const Caller& who, Handle** out, Attr* attr);
  int read(Handle* h, char* buf, size_t size, uint64_t off, size_t* got);
  // read(), except that where the bytes come from a descriptor, `via` takes them from it
  // instead of `buf` (see DescriptorReader); `via` null is read().
  int readVia(Handle* h, DescriptorReader* via, char* buf, size_t size, uint64_t off, size_t* got);
  int write(Handle* h, const char* buf, size_t size, uint64_t off);
  int fgetattr(Handle* h, Attr* out);  // ENOENT when the handle has no layer inode
  // A read-only handle on a layer file whose content lives in a spill file: a new descriptor
  // of that file (the caller closes it), for a backend that hands it to the kernel (FUSE
  // passthrough). A content in memory is first moved into a memory file (SpillStore::
  // createInMemory, still counted as memory). From then until the handle's release the file
  // stays the content's, in place (the budget does not move it; a whole replacement through the
  // API is written into it), so what the kernel serves is what the layer holds. -1 for anything
  // else (content in the folder, write handles, a packed slot, no memory file to be had).
  int spilledContentDescriptor(Handle* h);
  // A write handle on a layer file whose content is the layer's: a new descriptor of the file
  // holding that content (a memory file it moves into from memory, or its spill file), for a
  // backend that hands it to the kernel to read and write itself (FUSE passthrough). From then
  // until the handle's release, that file stays the content's whatever is done to it (the
  // budget counts it but does not move it), and the content's size and times are read from it
  // at every call that reports or copies them (syncKernelWrites). `killPriv`: the opener is not
  // root, so set-ID bits go when the kernel has written (as its own write would do). -1 when
  // it cannot be: content in the folder, a packed slot, no memory file to be had, no spill store.
  int kernelWriteDescriptor(Handle* h, bool killPriv);
  // Takes the size and times of every content the kernel may be writing from its file. Costs
  // one atomic load when there is none; every public operation calls it first.
  void syncKernelWrites();
  // fallocate(2) on an open file. Contents live in memory or in a spill file that grows on
  // demand, so there is nothing to reserve: keepSize does nothing, otherwise the file grows to
  // off + len. Other modes (punching holes...) are refused by the backends with EOPNOTSUPP.
  int fallocate(Layer* view, Handle* h, bool keepSize, uint64_t off, uint64_t len);
  void release(Handle* h);
  // A writable handle on the object a read-only handle `ro` has open, for a program that goes on
  // writing a file after its last name was removed (fuse_ll without open round trips learns of
  // the write only then). A layer file: the same inode. A file of the folder: a nameless copy
  // of its content, taken from the open descriptor, that only the new handle holds (the folder
  // is never written). EROFS in a read-only layer, ENOENT once the layer was dropped.
  int writableCopy(Handle* ro, Handle** out);
  int getxattr(Layer* view, const std::string& path, const std::string& name, std::string* value);
  int listxattr(Layer* view, const std::string& path, std::vector<std::string>* names);
  int setxattr(Layer* view, const std::string& path, const std::string& name,
               const std::string& value, int flags);  // flags: 1 = create only, 2 = replace only
  int removexattr(Layer* view, const std::string& path, const std::string& name);
  int statfs(FsStats* out);
  // Lists a directory into `d` (see DirStream for when), with the directory's own inode number.
  // `readAhead`: the caller answers a listing with attributes, a walk's usual first step, so
  // the folder's subdirectories in it are handed to LowerFs::readAhead.
  int list(Layer* view, const std::string& path, DirStream* d, bool readAhead = false);

  bool ignoresCase() const { return ignoreCase_; }
  // Whether `view` (null: the layer active now) takes changes. False for the read-only view
  // shown while no layer is active; every changing operation then answers EROFS.
  bool writable(Layer* view);

  // Where the core reports what a caller cannot see in an errno (a copy-up that gave up, ...).
  // Called on the thread where it happened; must not call back into the overlay.
  void setLogger(std::function<void(const std::string&)> log) { log_ = std::move(log); }

  // --- The audit trail of a layer (audit.h; the API) ---
  // ENXIO for an unknown layer.
  int auditSnapshot(const std::string& layer, AuditSnapshot* out);
  int auditLoad(const std::string& layer, const AuditSnapshot& s);
  // For every layer, and those made later.
  void setAuditLimits(const AuditLimits& l);

  // --- Layers (the API). ---
  // Creates the layer if it does not exist. EINVAL for an empty name.
  int createLayer(const std::string& name);
  // ENOENT if unknown, EBUSY while it is active or pinned by a view.
  int dropLayer(const std::string& name);
  // Creates layer `to` as a copy of layer `from` (contents copied, including spilled files);
  // later changes to either do not show in the other; `to` has `from`'s mask (setMask). EEXIST
  // if `to` exists.
  int cloneLayer(const std::string& from, const std::string& to);
  bool hasLayer(const std::string& name);
  std::vector<std::string> layerNames();
  // Makes `name` the active layer ("" = none) in O(1): requests that resolve their layer
  // afterwards see it. Fills `changed` with every path that may look different now (both
  // layers' paths), for cache invalidation. ENXIO if unknown.
  int activate(const std::string& name, std::vector<std::string>* changed);
  std::string activeLayer();
  // The layer a call with `view` would see now (null: none active).
  std::shared_ptr<Layer> current(Layer* view);
  // A view's hold on a layer; the pointer stays valid until unpin(). Null if unknown.
  Layer* pin(const std::string& name);
  void unpin(Layer* layer);

  // --- Changes to one layer (the API). Intermediate symlinks are refused with ELOOP. ---
  // Writes a whole regular file, creating missing parent directories.
  int putFile(const std::string& layer, const std::string& path, const std::string& data,
              uint32_t perm, const Caller& who);
  // A regular file's read-modify-write as one step (see FileUpdate): the change runs with the
  // file's content lock held, so no write, truncate, API write or other update of that file (by
  // any thread: mounts, API) lands between its look and its write; the folder's file is read
  // under that lock only, never under the layer's. A rename or removal of the path meanwhile
  // orders the update before it, as for a program that had the file open. Not a regular file:
  // EISDIR, ELOOP (a symlink, or one on the way), EINVAL; absent and not mayCreate: ENOENT.
  int updateFile(const std::string& layer, const std::string& path, const FileUpdate& u,
                 const Caller& who, FileUpdateResult* res);
  // Removes a file or a whole directory tree from what the layer shows. EACCES for a tree that
  // holds a path the layer's mask hides (setMask).
  int remove(const std::string& layer, const std::string& path);
  // Drops the layer's own entry at `path` (a file, symlink, deletion, or a directory with all
  // it holds), so the folder shows through there again (after apply wrote the folder). 0 also
  // when the layer holds nothing there; EXDEV when an ancestor is deleted, opaque or moved in
  // the layer (only that whole directory can go back). *wasDir: a directory went.
  // With `stamp`: only while the layer's object at `path` has that stamp (stampOf), else EAGAIN
  // and nothing changes (apply hands back what it wrote, never a later write of the agent's).
  int revert(const std::string& layer, const std::string& path, bool* wasDir,
             const std::string* stamp = nullptr);
  // What changes with every write, truncation, chmod or replacement of an object: its inode
  // number, size and ctime (nanoseconds, from the system clock).
  static std::string stampOf(const Attr& a);
  // revert, also under a directory the layer deleted or emptied (whiteout, opaque): that
  // directory merges with the folder's again, with a deletion of every other entry the folder
  // has there, so the layer shows the folder's `path` and still nothing else of it (the user
  // kept their version of one file the agent deleted with its directory). EXDEV under a moved
  // directory, or where the folder has no directory at such an ancestor.
  int revertThrough(const std::string& layer, const std::string& path, bool* wasDir);
  // Reads a whole regular file as the layer shows it (active or not).
  int readFile(const std::string& layer, const std::string& path, std::string* out);
  // Reads at most `size` bytes at `off` of a regular file as the layer shows it (fewer at its
  // end, none past it); *total gets the file's size then. A file of any size can be read this
  // way in pieces, so no caller ever needs a buffer the size of the file.
  int readRange(const std::string& layer, const std::string& path, uint64_t off, size_t size,
                std::string* out, uint64_t* total);
  // Where a regular file as the layer shows it holds data: sorted, disjoint (offset, length)
  // pairs; everything else reads as zeros (holes of a sparse file). Spilled contents and the
  // folder's files answer from the file system (SEEK_DATA/SEEK_HOLE where it has them); contents
  // in memory, and files where the system cannot tell, are one extent of the whole file. At most
  // kMaxExtents pairs: the rest of a file more fragmented than that is one last extent.
  static constexpr size_t kMaxExtents = 65536;
  int dataExtents(const std::string& layer, const std::string& path, std::vector<Extent>* out,
                  uint64_t* total);
  // A file whose content starts "gitdir: " is a repository to git when its path is given as
  // one (`git push fixtures/remote.git`), whatever its name: the path after it (to the end,
  // trailing newlines aside) must stay beneath the file's own directory, with no ".." and not
  // absolute, or the user's git in the mount would write wherever it says. While the shadow
  // protects git, EPERM for content (its first kGitfileScan bytes) that says otherwise.
  static constexpr size_t kGitfileScan = 8192;
  static bool refusedGitfile(std::string_view head);
  // A place this overlay is mounted (the shadow or a view), as given: a link made in it to a
  // path there is kept as written (it is the shadow for whoever follows it), where any other
  // FUSE file system is refused (link_targets.cc). Kept for the overlay's life.
  void noteMountPoint(const std::string& path) {
    std::lock_guard<std::mutex> lock(mountPointsMu_);
    for (const std::string& p : mountPoints_)
      if (p == path) return;
    mountPoints_.push_back(path);
  }
  // Drops every change of the layer; `paths` gets what it held, for cache invalidation.
  int reset(const std::string& layer, std::vector<std::string>* paths);
  // Gives `to` every change of `from` in place of its own, in one step for whoever reads `to`
  // (a checkpoint restored into a scratch layer first, so a refusal halfway loses nothing);
  // `from` is left empty. `paths`: what `to` held before and holds now, for cache invalidation.
  // ENXIO for a missing layer, EINVAL for one layer twice.
  int moveLayer(const std::string& from, const std::string& to, std::vector<std::string>* paths);
  // Every path the layer changed, in path order; files whose content came from A carry the
  // Base they came from.
  int changes(const std::string& layer, std::vector<Change>* out);
  // The folder paths in `changing` are about to change on purpose (an apply writes, removes or
  // makes them). Every entry of every layer that reads one of them, or what lies under or above
  // one, from a place other than its own path (what an agent moved or renamed: see Change's
  // origin) takes its own copy first: a file its content, a directory the folder's entries as
  // the layer's own (files copied, directories reading their folder directory by name), after
  // which it no longer merges (opaque). `kept` gets (layer, path) of each entry that did. An
  // error (the folder unreadable, no memory) leaves what was kept so far kept: the caller must
  // not change the folder then.
  int keepMoved(const std::vector<std::string>& changing,
                std::vector<std::pair<std::string, std::string>>* kept, uint64_t* hold = nullptr);
  // With `hold`, keepMoved also goes on keeping: a rename or link made in any layer until
  // releaseMoved(*hold) that reads from those paths takes its copy at once (an agent may move
  // an origin while the apply that changes it runs).
  void releaseMoved(uint64_t hold);
  int stats(const std::string& layer, LayerStats* out);
  // Masked paths (mask.h): from now on the layer's agent sees no object of the folder or of
  // the layer at a path `globs` match, whichever way it asks (mounts, views, the reads above,
  // changes()): lookups answer ENOENT, listings leave them out, and creating one (a file, a
  // directory, a link, a rename onto it) is refused with EACCES. An empty list: none. The
  // caller invalidates the kernel's caches of the mounts that show the layer. ENXIO if unknown.
  int setMask(const std::string& layer, const std::vector<std::string>& globs);
  // For the memory budget's evictor (budget.h): calls `fn` with each content of every layer that
  // is in memory, its ctime (ns) and its bytes, under that layer's lock (shared) and the
  // content's (shared, tried: busy contents are left out). `fn` must not call into the overlay.
  void forEachContentInMemory(const std::function<void(Inode*, int64_t, uint64_t)>& fn);
  // Where the budget sends this overlay's contents (null: no spill store, never evicted).
  std::shared_ptr<Spiller> spiller() const { return spill_; }
  // The globs of setMask (empty: none).
  int mask(const std::string& layer, std::vector<std::string>* out);

 private:
  struct Res;
  // The regular file `asked` as layer `layer` shows it: its layer inode (*in), or else the
  // folder's file that shows through (*lowerPath). Same checks as readFile.
  int regularFileAt(const std::string& layer, const std::string& asked, Ref<Inode>* in,
                    std::string* lowerPath);
  Layer* byNameLocked(const std::string& name);
  std::shared_ptr<Layer> byName(const std::string& name);
  Ref<Node> freshRoot() const;
  void log(const std::string& line) const;

  // tree.cc: the caller holds the layer's lock (shared for resolve/nodeAttr/lowerPresent,
  // exclusive for everything that changes the tree).
  int resolve(Layer& L, const std::string& path, Res* r) const;
  int materializeDir(Layer& L, const std::string& path, Node** out, bool* lv, std::string* low);
  int materializeNode(Layer& L, const std::string& path, Node** out, Res* r);
  struct Slot {
    Node* dir = nullptr;  // the parent directory's layer node
    bool lv = false;      // it merges with the folder's directory `low`
    std::string low;
    std::string name;
    bool inLower(Overlay* ov) const;  // the folder has something at this name
  };
  int slotOf(Layer& L, const std::string& path, Slot* s);
  // `lowerAbsent`: the caller's resolve() of `path`, under this same lock, found that the folder
  // has nothing there (Res::lowerMissing), so A is not asked again.
  int placeNew(Layer& L, const std::string& path, Ref<Node> inode, Node** out,
               bool lowerAbsent = false);
  int removeAt(Layer& L, const std::string& path);
  int checkParents(Layer& L, const std::string& dir, const Caller* create);
  bool lowerPresent(bool lv, const std::string& low, const std::string& name, Attr* a = nullptr);
  void nodeAttr(const Node* n, bool lv, const std::string& low, Attr* out);
  void inodeAttr(const Inode* in, Attr* out);  // files, symlinks and specials: no tree needed
  void ensureOwnMeta(Inode* in, bool lv, const std::string& low);
  void touch(Inode* in, bool mtime);  // ctime (and mtime) = now
  // A new object named `name` (the last component of where it goes).
  Ref<Node> newInode(FileType type, uint32_t perm, const Caller& who, std::string_view name);
  Ref<Node> detach(Layer& L, const std::string& path, Res& r);
  int attach(Layer& L, const std::string& path, Ref<Node> n);
  int xattrSource(const Res& r, std::string* src) const;
  // Case-insensitive names (NameMatch::IgnoreCase; the caller holds L's lock). canon() returns
  // `path` spelled as the layer and the folder spell it (in *buf), or `path` itself when names
  // are exact. *respellAs (if given) gets the caller's last name when that name matched only a
  // deletion of the layer spelled otherwise: an entry created there then takes it (respell()).
  const std::string& canon(const Layer& L, const std::string& path, std::string* buf,
                           std::string* respellAs = nullptr) const;
  // Whether anything below the directory `dir` is masked (L's lock held; walks the tree).
  bool holdsMasked(Layer& L, const std::string& dir);
  // Whether L's mask hides `path` (L's lock held).
  static bool masked(const Layer& L, std::string_view path);
  // Whether the write guard refuses writing `path` (any spelling: the guard folds case itself).
  bool guarded(std::string_view path) const { return guard_ && guard_->refuses(path); }
  // Why a layer may not change `path` (or record `target`, a link's): EILSEQ for a name that
  // is not valid UTF-8, EPERM for one the write guard refuses, else 0. Everything above the
  // core (changes, diffs, apply, checkpoints, JavaScript) carries paths as Unicode strings, in
  // which such a name becomes another (its bad bytes as U+FFFD) or none: the agent's change
  // would be lost, or land on another file. Reading such a folder file is not refused.
  int writeRefused(std::string_view path) const {
    if (!validUtf8(path)) return EILSEQ;
    return guarded(path) ? EPERM : 0;
  }
  // The names that make a directory a repository to git, config or not: git (2.39's
  // is_git_directory) takes a directory holding a valid HEAD, objects and refs for a bare
  // repository and runs its hooks/ on gc, fetch, tag and the rest.
  static constexpr const char* kRepositoryNames[] = {"HEAD", "objects", "refs"};
  bool nameMatches(std::string_view a, std::string_view b) const {
    return ignoreCase_ ? sameName(a, b) : a == b;
  }
  // Whether a new entry at `path` (made, linked or renamed there) would be the last of HEAD,
  // objects and refs in its directory, of whatever type (objects may be an executable file, HEAD
  // a link: types change later), outside .git, whose own directories hold those names rightly.
  // git run in that directory, or beneath it where it finds no .git first (an agent can spoil
  // the real .git's HEAD), would run that directory's hooks and obey its config. The caller
  // holds L's lock.
  bool completesRepository(Layer& L, const std::string& path);
  // Whether something is at `path`, spelled in any case the layer matches (L's lock held).
  bool present(Layer& L, const std::string& path);
  // Whether `dir` holds HEAD, objects and refs (L's lock held).
  bool holdsRepository(Layer& L, const std::string& dir);
  // Whether writing `path` (L's lock held, canonical spelling) would write the hooks or config
  // of a directory git takes for a repository (holdsRepository): a bare repository the folder
  // holds (a test fixture), which the path rule of write_guard.h does not know by name.
  bool besideRepository(Layer& L, const std::string& path);
  // Whether `path` is the `objects` or `objects/info` directory of a directory holding HEAD,
  // objects and refs: no directory may move there or away (an `info/alternates` would come with
  // it). L's lock held.
  bool objectsOfRepository(Layer& L, const std::string& path);
  // Whether the layer's directory node `dir` holds an entry of its own (not a deletion) at
  // `hooks`, `config`, `config.worktree` or `objects/info/alternates`: what would run or be
  // obeyed were `dir` a repository (revert checks it before bringing back HEAD, objects or refs).
  bool holdsControl(const Node* dir) const;
  // Whether reverting `path` (its layer directory node `dir`, L's lock held) would bring the
  // folder's HEAD, objects or refs back as the last of the three beside hooks, config or
  // alternates the layer wrote while the directory was no repository: revert them first.
  bool revivesRepository(Layer& L, const std::string& path, const Node* dir);
  // besideRepository for a path as the caller spelled it, taking L's lock to read; free unless
  // a name on the path is `hooks`, `config`, `config.worktree` or the last is `alternates`
  // (WriteGuard::mayWriteRepository).
  bool guardedBeside(Layer& L, const std::string& asked);
  // Whether renaming a directory from or to `path` could move git's control files (write_guard.h).
  bool guardedMove(std::string_view path) const { return guard_ && guard_->refusesMove(path); }
  // Whether an object of type `t` may not arrive at `to` (from `from`, "" for a new one): a
  // symbolic link, FIFO, socket or device beneath a `.git` or beneath a directory that holds
  // HEAD, objects and refs (a bare repository: the user's git follows links there as in a
  // `.git`), or a directory moved beneath one from outside any (write_guard.h, refusesSpecial).
  // L's lock held.
  bool guardedArrival(Layer& L, FileType t, const std::string& from, const std::string& to) {
    if (t == FileType::Regular || !guard_ || !guard_->git()) return false;
    if (t == FileType::Directory && from.empty()) return false;  // a new directory: git's too
    if (!guard_->refusesSpecial(to) && !beneathRepository(L, to)) return false;
    if (t == FileType::Directory) return !guard_->refusesSpecial(from) && !beneathRepository(L, from);
    return true;
  }
  // Whether a directory above `path` (the root included) holds HEAD, objects and refs (L's lock).
  bool beneathRepository(Layer& L, const std::string& path);
  // Whether the layer's node `n` holds, at any depth, a symbolic link, FIFO, socket or device,
  // or a directory moved there (what guardedArrival refuses beneath a repository).
  static bool holdsSpecial(const Node* n);
  bool lowerSpelling(const std::string& dir, std::string_view name, std::string* real) const;
  // --- link_targets.cc: symbolic links that would lead the user's programs out of the shadow ---
  // The agent's runs see the shadow at the folder's real path, the user at the mount point, so
  // a link saying "/<folder>/x", or climbing above the shadow's root ("../../x"), means the
  // shadow to the agent and the folder itself to the user. What a new link at `path` (L's lock
  // not needed) stores for `*target`: unchanged; rewritten to mean the same to everyone (into
  // the folder: relative within the shadow; above the root: the absolute place the agent's
  // runs reach); or EPERM: ".." after a name (a later link there would change where it leads),
  // a place above the folder or "/", or one through /proc or another FUSE file system.
  int linkTargetFor(const std::string& path, std::string* target);
  std::mutex mountPointsMu_;
  std::vector<std::string> mountPoints_;  // noteMountPoint's, for linkTargetFor
  // Whether a rename or second name that puts `n` (the object at `from`, a layer node or null
  // for a folder object) at `to` would leave a link of the layer's (or the moved link itself)
  // climbing above the root: its leading ".." outnumber its directory's depth there (L's lock).
  bool climbsOut(Layer& L, const Node* n, const std::string& from, const std::string& to);
  // refusedGitfile for `in`'s content (content lock held) once `size` bytes at `off` are
  // written (or, size == 0 with `truncateTo`, once cut to that length): EPERM or 0. Reads only
  // when the first 8 bytes would be "gitdir: ".
  int gitfileGuard(const Inode* in, const char* buf, size_t size, uint64_t off,
                   const uint64_t* truncateTo = nullptr);
  // Gives the layer's entry at `path` the name `name` in the same directory (a rename).
  int respell(Layer& L, const std::string& path, const std::string& name);
  // What a listing needs from the layer, taken under its lock so A is read without it.
  struct ListPlan;
  // `masked`: leave out what the layer's mask hides (false where emptiness is checked before a
  // removal, so a directory holding only masked objects is not empty: rmdir answers ENOTEMPTY
  // instead of deleting what the agent cannot see).
  int planList(Layer& L, const std::string& path, ListPlan* plan, bool masked = true);
  int runList(const ListPlan& plan, std::vector<DirEntry>* out);

  // content.cc: the caller holds in->cmu() exclusively (shared for contentRead).
  int copyUp(Inode* in, bool keepContent);
  // copyUp's work, from the folder's file `src` (copyUp passes the inode's own).
  int copyIn(Inode* in, const std::string& src, bool keepContent, bool hadOwnMeta);
  // A new, unpublished inode holding what the folder's open file `fd` has (nothing when not
  // `keepContent`), numbered as that file: the object of a handle whose name is gone.
  int copyOfOpenFile(LowerHandle fd, const std::string& name, bool keepContent, Ref<Inode>* out);
  // Moves the content to a spill file: a file of its own, or when `packed`, a slot of the pack
  // file that small contents share (budget.h).
  int spillOut(Inode* in, bool packed = false);
  // Ends a change of `in`'s content that began when memoryOf(in) was `was` (the caller holds in's
  // content lock exclusively, or `in` is unpublished): tells the budget, and when the process is
  // over it, wakes the evictor and, if still over, spills `in` itself.
  void accounted(Inode* in, uint64_t was);
  int contentWrite(Inode* in, const char* buf, size_t size, uint64_t off);
  int contentTruncate(Inode* in, uint64_t size);
  int contentRead(const Inode* in, char* buf, size_t size, uint64_t off, size_t* got,
                  DescriptorReader* via = nullptr);
  int contentAssign(Inode* in, const std::string& data);
  // Moves a content held in memory into a new memory file (SpillStore::createInMemory); *was:
  // memoryOf(in) before, for the caller to tell the budget. in's content lock held exclusively.
  int intoMemoryFile(Inode* in, uint64_t* was);
  int cloneInto(const Inode& in, Inode* out);  // contents and metadata of `in` into a new inode
  // syncKernelWrites for one inode (no lock held).
  void syncKernelWrite(Inode* in);
  bool kernelWroteSince(Inode* in);    // its file changed since last looked at (no lock needed)
  void absorbKernelWrites(Inode* in);  // the sync, with in's content lock held exclusively
  void endKernelHold(Handle* h);       // at the release of a handle kernelDescriptor took
  int kernelDescriptor(Handle* h, bool killPriv);  // for both of the public ones
  // copyUp for a caller that holds no lock: takes in->cmu() itself.
  int takeContent(Inode* in, bool keepContent);
  // origins.cc: keepMoved's walk (L's lock held exclusively), and whether a change of one of
  // `changing` (sorted; folded where names are) reaches the folder path `low` (the same, under
  // or above it).
  int keepMovedIn(Layer& L, Node* n, const std::string& path, bool lv, const std::string& low,
                  const std::vector<std::string>& changing, std::vector<Ref<Inode>>* copy,
                  std::vector<std::string>* kept);
  bool changesReach(const std::vector<std::string>& changing, const std::string& low) const;
  // After a rename or link in L (its lock held exclusively): keepMoved for the paths held.
  int keepHeld(Layer& L);
  std::mutex holdMu_;  // a leaf: held only to copy or change holds_
  std::atomic<size_t> holdCount_{0};  // holds_.size(), read without holdMu_ on every rename and link
  std::map<uint64_t, std::vector<std::string>> holds_;  // sorted, folded where names are
  uint64_t nextHold_ = 1;

  // fs_ops_*.cc: the operations' work, on the layer the public ones resolved; the public ones
  // add the audit trail's entry (audit.h) when it succeeded.
  int openIn(Layer& L, const std::string& asked, const OpenIntent& intent, Handle** out,
             Attr* attr);
  int createIn(Layer& L, const std::string& asked, uint32_t perm, const OpenIntent& intent,
               const Caller& who, Handle** out, Attr* attr);
  int mknodIn(Layer& L, const std::string& asked, FileType type, uint32_t perm, uint64_t rdev,
              const Caller& who, Attr* out);
  int mkdirIn(Layer& L, const std::string& asked, uint32_t perm, const Caller& who, Attr* out);
  int symlinkIn(Layer& L, const std::string& target, const std::string& asked, const Caller& who,
                Attr* out);
  int linkIn(Layer& L, const std::string& from, const std::string& to, Attr* out);
  int unlinkIn(Layer& L, const std::string& asked);
  int rmdirIn(Layer& L, const std::string& asked);
  int renameIn(Layer& L, const std::string& from, const std::string& to, uint32_t flags);
  // Their work, with L's lock held exclusively by the caller.
  int linkHeld(Layer& L, const std::string& from, const std::string& to, Attr* out);
  int renameHeld(Layer& L, const std::string& from, const std::string& to, uint32_t flags);
  int setattrIn(Layer& L, const std::string& asked, Handle* h, uint32_t mask, const Attr& values,
                Attr* out);

  // fs_ops.cc
  // A handle of the folder's file `r.low` (resolved at `path`, L's lock held shared or
  // exclusively): read-only, or a deferred write-open (see Handle).
  int openLower(Layer& L, const std::string& path, const Res& r, bool write, Handle** out,
                Attr* attr);
  // The inode a change through `h` acts on: its own, or for a deferred write-open the layer's
  // copy, made now (bindPending) with A's content unless `keepContent` is false (truncation to
  // 0). Null *out and 0 when `h` is a read-only handle of A's file. No lock held on entry.
  int changeTarget(Handle* h, bool keepContent, Ref<Inode>* out);
  int bindPending(Handle* h, bool keepContent, Ref<Inode>* out);
  // Records in L.copied that `in` stands for the folder's file `lowerPath` (number `ino`), for
  // the handles of that file opened before (L's lock held exclusively).
  static void recordCopy(Layer& L, const std::string& lowerPath, uint64_t ino, Inode* in);
  int openOnNode(Layer& L, const Ref<Inode>& in, const OpenIntent& intent,
                 Handle** out, Attr* attr);
  // Records that `in` (about to take its content from A, or carried by a rename or link) stands
  // for A's file from now on, for handles opened on A's file before (read-only ones, and
  // write-opens not yet written through). The caller holds L's lock exclusively.
  static void noteCopy(Layer& L, Inode* in);
  template <typename Change>
  int editXattrs(Layer& L, const std::string& path, Change change);

  static void layerPaths(const Layer& L, std::vector<std::string>* out);

  std::unique_ptr<LowerFs> lower_;
  std::shared_ptr<Spiller> spill_;  // null: no spill store
  uint64_t spillThreshold_;
  const bool ignoreCase_;  // NameMatch::IgnoreCase
  std::shared_ptr<const WriteGuard> guard_;  // setWriteGuard; immutable once shared
  Attr rootAttr_;  // A's root at mount time, for layer roots when A's root cannot be read
  std::function<void(const std::string&)> log_;
  // The registry (rank 1, see model.h): layers_, active_, every Layer::pins. Held briefly.
  mutable SharedMutex mu_;
  std::map<std::string, std::shared_ptr<Layer>> layers_;
  std::shared_ptr<Layer> active_;  // null: no layer, A exactly
  std::shared_ptr<Layer> none_;    // the empty, read-only layer shown when none is active
  std::atomic<uint64_t> nextIno_{kFirstLayerIno};
  AuditLimits auditLimits_;  // under mu_
  // Contents whose file the kernel holds for open files (kernelDescriptor): how many, how
  // many of them write, and the size and mtime the file had when last looked at. kwMu_ is a leaf (never held while
  // another lock is taken); kwWriters_ lets every operation skip it when no file is written so.
  struct KernelHeld {
    std::shared_ptr<Inode> in;
    uint32_t handles = 0;  // every open the kernel serves from the file
    uint32_t writers = 0;  // of those, the write-opens
    uint64_t size = 0;     // the file when last looked at (while there are writers)
    Timespec mtime;
    bool killPriv = false;  // a write-opener was not root (see kernelWriteDescriptor)
  };
  std::mutex kwMu_;
  std::unordered_map<const Inode*, KernelHeld> kw_;
  std::atomic<uint32_t> kwWriters_{0};  // entries with writers
};

}  // namespace shadowfs
