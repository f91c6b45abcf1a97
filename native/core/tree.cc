// The layer tree: resolving a path through a layer onto the folder, and the few primitives that
// change the tree (materialise, place, remove, detach/attach for rename). Every function here
// runs with the layer's lock held by its caller (see model.h); none reads a file's content.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <new>

#include "casefold.h"
#include "model.h"
#include "path.h"

namespace shadowfs {

// --- The data model's own machinery (model.h): lock stripes, counts, names, children ---

namespace stripes {
namespace {
struct Table {
  SharedMutex content[kCount];
  std::mutex meta[kCount];
};
Table& table() {
  static Table t;
  return t;
}
size_t slot(const void* p) {
  uint64_t v = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
  v ^= v >> 33;
  v *= 0xff51afd7ed558ccdull;
  v ^= v >> 33;
  return static_cast<size_t>(v & (kCount - 1));
}
}  // namespace
SharedMutex& content(const void* p) { return table().content[slot(p)]; }
std::mutex& meta(const void* p) { return table().meta[slot(p)]; }
}  // namespace stripes

// Directories' children: a count, a capacity, then that many pointers (each a counted
// reference), sorted by name.
struct Kids {
  uint32_t n;
  uint32_t cap;
  uint32_t dirs;  // of a directory's one array: how many children are directories (not in runs)
  uint32_t unused;
  Node* v[1];
};

namespace {
constexpr size_t kNameAt = offsetof(Inode, nameBytes);
size_t kidsBytes(uint32_t cap) { return offsetof(Kids, v) + sizeof(Node*) * cap; }
char* nameAt(Inode* in) { return reinterpret_cast<char*>(in) + kNameAt; }
const char* nameAt(const Inode* in) { return reinterpret_cast<const char*>(in) + kNameAt; }
uint64_t pow2ceil(uint64_t v) {
  uint64_t p = 16;
  while (p < v && p < (1ull << 62)) p <<= 1;
  return p < v ? v : p;
}
}  // namespace

void retain(const Inode* in) { in->refs.fetch_add(1, std::memory_order_relaxed); }

void dropRef(const Inode* in) {
  if (in->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  Node* n = static_cast<Node*>(const_cast<Inode*>(in));
  n->~Node();
  ::operator delete(static_cast<void*>(n));
}

std::shared_ptr<Inode> sharedOf(Inode* in) {
  if (!in) return nullptr;
  retain(in);
  return std::shared_ptr<Inode>(in, [](Inode* p) { dropRef(p); });
}

void dropLowerDir(LowerDir* d) {
  if (d && d->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete d;
}

More::~More() {
  if (link) dropRef(link);
  dropLowerDir(lowerDir);
}

void freeKids(Inode* in);
size_t kidsFootprint(const Inode* in);

Inode::~Inode() {
  if (!has(kWhiteout) && type == FileType::Directory) {
    freeKids(this);
  } else if (has(kLowerAtName)) {
    dropLowerDir(u.ldir);
  } else if (type == FileType::Regular) {
    std::free(u.data);
  }
  delete ex();
}

const std::string& Inode::target() const {
  static const std::string none;
  return mo() ? mo()->target : none;
}

Attr Inode::snap() const {
  Attr a;
  a.ino = ino;
  a.type = type;
  a.perm = perm;
  a.uid = uid;
  a.gid = gid;
  a.rdev = mo() ? mo()->rdev : 0;
  a.size = size;
  a.blocks = (size + 511) / 512;
  a.atime = atime();
  a.mtime = mtime();
  a.ctime = ctime();
  a.winAttrs = winAttrs();
  a.hasBirth = birth(&a.birth);
  return a;
}

void Inode::setSnap(const Attr& a) {
  perm = static_cast<uint16_t>(a.perm & 07777);
  uid = a.uid;
  gid = a.gid;
  if (a.rdev || (mo() && mo()->rdev)) more().rdev = a.rdev;
  size = a.size;
  setAtime(a.atime);
  setMtime(a.mtime);
  setCtime(a.ctime);
  setWinAttrs(a.winAttrs);
  setBirth(a.hasBirth ? &a.birth : nullptr);
}

void Inode::setWinAttrs(uint32_t a) {
  a &= kWinAttrsKept;
  if (a || ex()) extra().winAttrs = a;
}

bool Inode::birth(Timespec* out) const {
  const Extra* e = ex();
  if (!e || !has(kBirth)) return false;
  *out = Timespec{e->birthSec, e->birthNs};
  return true;
}

void Inode::setBirth(const Timespec* t) {
  if (!t) {
    clear(kBirth);
    return;
  }
  Extra& e = extra();
  e.birthSec = t->sec;
  e.birthNs = static_cast<uint32_t>(t->nsec);
  set(kBirth);
}

namespace {
constexpr int64_t kNs = 1000000000;
// Seconds whose time in nanoseconds fits an int64_t (with room for the nanoseconds).
constexpr int64_t kMaxNsSec = INT64_MAX / kNs - 1;
}  // namespace

Timespec Inode::timeAt(int i) const {
  if (has(kWideTimes)) return mo()->times[i];
  const int64_t ns = times[i];
  int64_t sec = ns / kNs, nsec = ns % kNs;
  if (nsec < 0) {
    nsec += kNs;
    sec -= 1;
  }
  return Timespec{sec, nsec};
}

void Inode::setTime(int i, Timespec t) {
  if (has(kWideTimes)) {
    mo()->times[i] = t;
    return;
  }
  if (t.sec >= -kMaxNsSec && t.sec <= kMaxNsSec && t.nsec >= 0 && t.nsec < kNs) {
    times[i] = t.sec * kNs + t.nsec;
    return;
  }
  // Out of range (before 1678, after 2262, or odd nanoseconds): all three move to More.
  More& m = more();
  for (int j = 0; j < 3; ++j) m.times[j] = j == i ? t : timeAt(j);
  set(kWideTimes);
}

std::optional<Base> Inode::base() const {
  const Extra* e = ex();
  if (!e || !has(kHasBase)) return std::nullopt;
  Base b;
  b.ino = e->baseIno;
  b.size = e->baseSize;
  b.mtime = Timespec{e->baseMtimeSec, e->baseMtimeNs};
  b.ctime = Timespec{e->baseCtimeSec, e->baseCtimeNs};
  b.hashed = has(kBaseHashed);
  b.hash = e->baseHash;
  return b;
}

void Inode::setBase(const Base& b) {
  Extra& e = extra();
  e.baseIno = b.ino;
  e.baseSize = b.size;
  e.baseMtimeSec = b.mtime.sec;
  e.baseMtimeNs = static_cast<uint32_t>(b.mtime.nsec);
  e.baseCtimeSec = b.ctime.sec;
  e.baseCtimeNs = static_cast<uint32_t>(b.ctime.nsec);
  e.baseHash = b.hash;
  if (b.hashed) {
    set(kBaseHashed);
  } else {
    clear(kBaseHashed);
  }
  set(kHasBase);
}

bool Inode::lowerPath(std::string* out) const {
  const uint16_t f = flags.load(std::memory_order_acquire);
  if (f & kLowerPath) {
    *out = *mo()->lowerPath;
    return true;
  }
  if (f & kLowerAtName) {
    *out = joinPath(u.ldir->path, name());
    return true;
  }
  return false;
}

void Inode::dropLower() {
  if (has(kLowerAtName)) {
    dropLowerDir(u.ldir);
    u.data = nullptr;
  }
  if (mo()) mo()->lowerPath.reset();
  clear(kLowerAtName | kLowerPath);
}

void Inode::setLower(const std::string& path, LowerDir* hint) {
  std::string dir, base;
  splitLast(path, &dir, &base);
  if (hint && !has(kNameOut) && hint->path == dir && base == name()) {
    hint->refs.fetch_add(1, std::memory_order_relaxed);
    u.ldir = hint;
    set(kLowerAtName);
  } else {
    more().lowerPath = path;
    set(kLowerPath);
  }
}

uint64_t Inode::dataCap() const { return has(kGrown) ? pow2ceil(size) : size; }

size_t mallocChunk(size_t n) {
  // glibc on 64-bit: an 8-byte header, 16-byte granules, 32 bytes at least. Close enough for
  // the other allocators too (the figure is an estimate there).
  const size_t c = (n + 8 + 15) & ~size_t{15};
  return c < 32 ? 32 : c;
}

namespace {
size_t stringHeap(const std::string& s) { return s.capacity() > 15 ? mallocChunk(s.capacity() + 1) : 0; }
}  // namespace

uint64_t Inode::footprint(uint64_t* spilled) const {
  uint64_t bytes = mallocChunk(kNameAt + nameCap);
  const Node* self = static_cast<const Node*>(this);
  if (self->dir()) bytes += kidsFootprint(this);
  if (!has(kWhiteout) && type == FileType::Regular && self->inode() == this) {
    // A file being written or copied up right now is counted by its size; never wait.
    SharedMutex& c = cmu();
    if (c.try_lock_shared()) {
      const More* e = mo();
      if (e && e->spill) {
        *spilled += size;
      } else if (!inLower() && u.data) {
        bytes += mallocChunk(static_cast<size_t>(dataCap()));
      }
      c.unlock_shared();
    } else {
      MetaLock m(mmu(), LockRank::Meta);
      if (!inLower()) bytes += size;
    }
  }
  if (ex()) bytes += mallocChunk(sizeof(Extra));
  MetaLock m(mmu(), LockRank::Meta);  // lowerPath and xattrs change under it
  if (const More* e = mo()) {
    bytes += mallocChunk(sizeof(More)) + stringHeap(e->target) + stringHeap(e->name);
    if (e->lowerPath) bytes += stringHeap(*e->lowerPath);
    if (e->redirect) bytes += stringHeap(*e->redirect);
    for (const auto& [k, v] : e->xattrs)
      bytes += mallocChunk(32 + 2 * sizeof(std::string)) + stringHeap(k) + stringHeap(v);
    if (e->lowerDir) bytes += mallocChunk(sizeof(LowerDir)) + stringHeap(e->lowerDir->path);
  }
  return bytes;
}

NodeRef Node::make(FileType type, std::string_view name) {
  const size_t bytes = std::max(sizeof(Node), kNameAt + name.size());
  Node* n = new (::operator new(bytes)) Node();
  n->type = type;
  n->nameCap = static_cast<uint8_t>(bytes - kNameAt);
  n->nameLen = static_cast<uint8_t>(name.size());
  if (!name.empty()) std::memcpy(nameAt(n), name.data(), name.size());
  return NodeRef(n);
}

NodeRef Node::makeWhiteout(std::string_view name) {
  NodeRef n = make(FileType::Regular, name);
  n->set(kWhiteout);
  return n;
}

std::string_view Inode::name() const {
  if (has(kNameOut)) return mo()->name;
  return std::string_view(nameAt(this), nameLen);
}

void Node::rename(std::string_view to) {
  if (name() == to) return;
  MetaLock m(mmu(), LockRank::Meta);
  if (has(kLowerAtName)) {
    // The folder path was <dir>/<old name>: keep it as a path of its own.
    std::string path = joinPath(u.ldir->path, name());
    more().lowerPath = std::move(path);
    set(kLowerPath);
    clear(kLowerAtName);
    dropLowerDir(u.ldir);
    u.data = nullptr;
  }
  if (to.size() <= nameCap) {
    std::memcpy(nameAt(this), to.data(), to.size());
    nameLen = static_cast<uint8_t>(to.size());
    clear(kNameOut);
  } else {
    more().name = std::string(to);
    set(kNameOut);
  }
}

// A big directory's children: `n` in all, in `nc` runs (each a Kids of at most kRunMax, none
// empty), in name order. Stored in u.kids (cast) when the node has kBigKids.
struct BigKids {
  uint32_t n;
  uint32_t nc;
  uint32_t cap;
  uint32_t dirs;  // how many children are directories
  Kids* c[1];
};

namespace {
size_t bigBytes(uint32_t cap) { return offsetof(BigKids, c) + sizeof(Kids*) * cap; }

Kids* newRun(uint32_t cap) {
  auto* k = static_cast<Kids*>(std::malloc(kidsBytes(cap)));
  if (!k) throw std::bad_alloc();
  k->n = 0;
  k->cap = cap;
  k->dirs = 0;
  return k;
}

size_t runLowerBound(const Kids* k, std::string_view name) {
  size_t lo = 0, hi = k ? k->n : 0;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (k->v[mid]->name() < name) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Inserts `n` at `i` of run *kp, growing it by an eighth (or to `limit` at most).
void runInsert(Kids** kp, size_t i, Node* n) {
  Kids* k = *kp;
  const uint32_t cnt = k ? k->n : 0;
  if (!k || cnt == k->cap) {
    const uint32_t cap = cnt + cnt / 8 + 4;
    void* grown = std::realloc(k, kidsBytes(cap));
    if (!grown) throw std::bad_alloc();
    k = static_cast<Kids*>(grown);
    if (cnt == 0) k->n = k->dirs = 0;
    k->cap = cap;
    *kp = k;
  }
  std::memmove(k->v + i + 1, k->v + i, sizeof(Node*) * (cnt - i));
  k->v[i] = n;
  k->n = cnt + 1;
}

void runErase(Kids* k, size_t i) {
  std::memmove(k->v + i, k->v + i + 1, sizeof(Node*) * (k->n - i - 1));
  k->n--;
}

// The run of a big directory where `name` is or would go: the first whose last name is not
// below it (the last run when every name is below).
size_t runOf(const BigKids* b, std::string_view name) {
  size_t lo = 0, hi = b->nc;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    const Kids* k = b->c[mid];
    if (k->v[k->n - 1]->name() < name) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < b->nc ? lo : b->nc - 1;
}

// Inserts run `k` at position `at` of the run list.
void bigInsertRun(BigKids** bp, size_t at, Kids* k) {
  BigKids* b = *bp;
  if (b->nc == b->cap) {
    const uint32_t cap = b->cap + b->cap / 2 + 4;
    void* grown = std::realloc(b, bigBytes(cap));
    if (!grown) throw std::bad_alloc();
    b = static_cast<BigKids*>(grown);
    b->cap = cap;
    *bp = b;
  }
  std::memmove(b->c + at + 1, b->c + at, sizeof(Kids*) * (b->nc - at));
  b->c[at] = k;
  b->nc++;
}
}  // namespace

void Node::Iter::next() {
  if (c_ && ++c_ != ce_) {
    p_ = (*c_)->v;
    e_ = p_ + (*c_)->n;
  } else {
    p_ = e_ = nullptr;
  }
}

Node::Range Node::kids() const {
  if (!dir() || !u.kids) return Range{};
  if (has(kBigKids)) {
    auto* b = reinterpret_cast<BigKids*>(u.kids);
    Kids* const* c = b->c;
    return Range{Iter((*c)->v, (*c)->v + (*c)->n, c, c + b->nc), Iter()};
  }
  return Range{Iter(u.kids->v, u.kids->v + u.kids->n, nullptr, nullptr), Iter()};
}

size_t Node::count() const {
  if (!dir() || !u.kids) return 0;
  if (has(kBigKids)) return reinterpret_cast<BigKids*>(u.kids)->n;
  return u.kids->n;
}

size_t Node::subdirs() const {
  if (!dir() || !u.kids) return 0;
  if (has(kBigKids)) return reinterpret_cast<BigKids*>(u.kids)->dirs;
  return u.kids->dirs;
}

void Node::addSubdirs(int d) {
  if (!u.kids || d == 0) return;
  if (has(kBigKids)) {
    reinterpret_cast<BigKids*>(u.kids)->dirs += d;
  } else {
    u.kids->dirs += d;
  }
}

Node* Node::find(std::string_view name) const {
  if (!dir() || !u.kids) return nullptr;
  const Kids* k = u.kids;
  if (has(kBigKids)) {
    auto* b = reinterpret_cast<BigKids*>(u.kids);
    k = b->c[runOf(b, name)];
  }
  const size_t i = runLowerBound(k, name);
  return i < k->n && k->v[i]->name() == name ? k->v[i] : nullptr;
}

void Node::put(std::string_view name, NodeRef n) {
  SFS_ASSERT(dir());
  Kids** kp = &u.kids;
  BigKids* b = nullptr;
  size_t run = 0;
  if (u.kids && has(kBigKids)) {
    b = reinterpret_cast<BigKids*>(u.kids);
    run = runOf(b, name);
    kp = &b->c[run];
  }
  const size_t i = runLowerBound(*kp, name);
  const int isDir = n->dir() ? 1 : 0;
  if (*kp && i < (*kp)->n && (*kp)->v[i]->name() == name) {
    Node* old = (*kp)->v[i];
    if (old != n.get()) {
      n->rename(name);
      const int wasDir = old->dir() ? 1 : 0;
      (*kp)->v[i] = n.release();
      dropRef(old);
      addSubdirs(isDir - wasDir);
    }
    return;
  }
  n->rename(name);
  if (!b) {
    if (!u.kids || u.kids->n < kFlatMax) {
      runInsert(&u.kids, i, n.release());
      addSubdirs(isDir);
      return;
    }
    // The directory outgrew one array: cut it into runs of half the maximum.
    Kids* flat = u.kids;
    const uint32_t runs = (flat->n + kRunMax / 2 - 1) / (kRunMax / 2);
    b = static_cast<BigKids*>(std::malloc(bigBytes(runs + 4)));
    if (!b) throw std::bad_alloc();
    b->n = flat->n;
    b->nc = 0;
    b->cap = runs + 4;
    b->dirs = flat->dirs;
    for (uint32_t at = 0; at < flat->n; at += kRunMax / 2) {
      const uint32_t len = std::min<uint32_t>(kRunMax / 2, flat->n - at);
      Kids* k = newRun(len + len / 8 + 4);
      std::memcpy(k->v, flat->v + at, sizeof(Node*) * len);
      k->n = len;
      b->c[b->nc++] = k;
    }
    std::free(flat);
    u.kids = reinterpret_cast<Kids*>(b);
    set(kBigKids);
    return put(name, std::move(n));
  }
  Kids* k = b->c[run];
  if (k->n < kRunMax) {
    runInsert(&b->c[run], i, n.release());
  } else if (run + 1 == b->nc && i == k->n) {
    // Past the last name: a new run (names created in order fill runs completely).
    Kids* fresh = newRun(16);
    fresh->v[0] = n.release();
    fresh->n = 1;
    bigInsertRun(&b, run + 1, fresh);
    u.kids = reinterpret_cast<Kids*>(b);
  } else {
    // A full run splits in two halves, then takes the name in the right one.
    const uint32_t half = k->n / 2;
    Kids* upper = newRun((k->n - half) + (k->n - half) / 8 + 4);
    std::memcpy(upper->v, k->v + half, sizeof(Node*) * (k->n - half));
    upper->n = k->n - half;
    k->n = half;
    bigInsertRun(&b, run + 1, upper);
    u.kids = reinterpret_cast<Kids*>(b);
    if (i <= half) {
      runInsert(&b->c[run], i, n.release());
    } else {
      runInsert(&b->c[run + 1], i - half, n.release());
    }
  }
  b->n++;
  b->dirs += isDir;
}

NodeRef Node::take(std::string_view name) {
  if (!dir() || !u.kids) return NodeRef();
  if (!has(kBigKids)) {
    Kids* k = u.kids;
    const size_t i = runLowerBound(k, name);
    if (i >= k->n || k->v[i]->name() != name) return NodeRef();
    NodeRef out = NodeRef::adopt(k->v[i]);
    runErase(k, i);
    if (out->dir()) k->dirs--;
    if (k->n == 0) {
      std::free(k);
      u.kids = nullptr;
    }
    return out;
  }
  auto* b = reinterpret_cast<BigKids*>(u.kids);
  const size_t run = runOf(b, name);
  Kids* k = b->c[run];
  const size_t i = runLowerBound(k, name);
  if (i >= k->n || k->v[i]->name() != name) return NodeRef();
  NodeRef out = NodeRef::adopt(k->v[i]);
  runErase(k, i);
  b->n--;
  if (out->dir()) b->dirs--;
  if (k->n == 0) {
    std::free(k);
    std::memmove(b->c + run, b->c + run + 1, sizeof(Kids*) * (b->nc - run - 1));
    b->nc--;
    if (b->nc == 0) {
      std::free(b);
      u.kids = nullptr;
      clear(kBigKids);
    }
  }
  return out;
}

// Frees the children array(s) of a directory, dropping each child's count.
void freeKids(Inode* in) {
  if (!in->u.kids) return;
  auto freeRun = [](Kids* k) {
    for (uint32_t i = 0; i < k->n; ++i) dropRef(k->v[i]);
    std::free(k);
  };
  if (in->has(Inode::kBigKids)) {
    auto* b = reinterpret_cast<BigKids*>(in->u.kids);
    for (uint32_t i = 0; i < b->nc; ++i) freeRun(b->c[i]);
    std::free(b);
  } else {
    freeRun(in->u.kids);
  }
  in->u.kids = nullptr;
}

size_t kidsFootprint(const Inode* in) {
  if (!in->u.kids) return 0;
  if (!in->has(Inode::kBigKids)) return mallocChunk(kidsBytes(in->u.kids->cap));
  auto* b = reinterpret_cast<const BigKids*>(in->u.kids);
  size_t bytes = mallocChunk(bigBytes(b->cap));
  for (uint32_t i = 0; i < b->nc; ++i) bytes += mallocChunk(kidsBytes(b->c[i]->cap));
  return bytes;
}

Timespec nowTime() {
  auto t = std::chrono::system_clock::now().time_since_epoch();
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t).count();
  return Timespec{ns / 1000000000, ns % 1000000000};
}

namespace {

// Where A merges below `child` (entered by `name` from a position merging A at *low when *lv):
// nowhere for files and opaque directories, the redirect target for renamed directories, the
// natural path otherwise.
void descend(const Node* child, std::string_view name, bool* lv, std::string* low) {
  if (!child->dir() || child->opaque()) {
    *lv = false;
    low->clear();
  } else if (child->redirected()) {
    *lv = true;
    *low = *child->mo()->redirect;
  } else if (*lv) {
    *low = joinPath(*low, name);
  }
}

}  // namespace

// Exported for changes.cc.
void descendInto(const Node* child, std::string_view name, bool* lv, std::string* low) {
  descend(child, name, lv, low);
}

void Overlay::touch(Inode* in, bool mtime) {
  Timespec t = nowTime();
  MetaLock m(in->mmu(), LockRank::Meta);
  in->setCtime(t);
  if (mtime) in->setMtime(t);
}

NodeRef Overlay::newInode(FileType type, uint32_t perm, const Caller& who, std::string_view name) {
  NodeRef in = Node::make(type, name);
  in->ino = nextIno_.fetch_add(1);
  in->set(Inode::kOwnMeta | Inode::kOwnXattrs);
  in->perm = static_cast<uint16_t>(perm & 07777);
  in->uid = who.uid;
  in->gid = who.gid;
  const Timespec t = nowTime();
  in->setAtime(t);
  in->setMtime(t);
  in->setCtime(t);
  return in;
}

bool Overlay::lowerPresent(bool lv, const std::string& low, const std::string& name, Attr* a) {
  if (!lv) return false;
  Attr tmp;
  return lower_->stat(joinPath(low, name), a ? a : &tmp) == 0;
}

// Walks the layer tree along `path`; below the last layer node the path is A's alone.
int Overlay::resolve(Layer& L, const std::string& path, Res* r) const {
  Node* cur = L.root.get();
  bool lv = true;
  std::string low;
  auto comps = components(path);
  for (size_t i = 0; i < comps.size(); ++i) {
    const bool last = i + 1 == comps.size();
    auto c = comps[i];
    if (c.size() > kNameMax) return ENAMETOOLONG;
    if (!cur->dir()) return ENOTDIR;
    Node* child = cur->find(c);
    if (!child) {
      cur = nullptr;
      if (!lv) {
        r->parentResolved = last;
        return ENOENT;
      }
      for (size_t j = i + 1; j < comps.size(); ++j)
        if (comps[j].size() > kNameMax) return ENAMETOOLONG;
      // Below the last layer node the rest of the path is A's alone: append it in one go.
      low = joinPath(low, std::string_view(path).substr(static_cast<size_t>(c.data() - path.data())));
      break;
    }
    if (child->whiteout()) {
      r->parentResolved = last;
      return ENOENT;
    }
    descend(child, c, &lv, &low);
    cur = child;
  }
  r->node = cur;
  r->lv = lv;
  r->low = std::move(low);
  if (!cur) {
    int e = lower_->stat(r->low, &r->lowerAttr);
    if (e == ENOENT) r->parentResolved = true;  // caller re-checks the parent when creating
    return e;
  }
  return 0;
}

// Case-insensitive names: the one place that decides how a path the caller spelt is spelt in
// the layer and the folder. Every later step (resolve, materialise, place, remove...) then
// works byte for byte on the result, exactly as with exact names, so the rest of the core has
// no second notion of "same name". Walks like resolve():
// - at a layer node, a child of the same name in any case: a live entry first (the exact
//   spelling before another), else a deletion (whiteout), which ends the walk since nothing
//   lives below it. Scanning the children costs O(entries the layer holds in that directory)
//   when the exact spelling misses; the layer holds only what it changed, so that stays small;
// - below the layer's nodes, where the folder merges, the folder's own spelling
//   (lowerSpelling()); a case-sensitive folder that has the rest of the path exactly as asked
//   needs no more than one stat for all of it;
// - a name found nowhere ends the walk: it and what follows keep the caller's spelling.
const std::string& Overlay::canon(const Layer& L, const std::string& path, std::string* buf,
                                  std::string* respellAs) const {
  if (respellAs) respellAs->clear();
  if (!ignoreCase_ || path.empty()) return path;
  auto comps = components(path);
  buf->clear();
  auto append = [buf](std::string_view c) {
    if (!buf->empty()) buf->push_back('/');
    buf->append(c);
  };
  const Node* cur = L.root.get();
  bool lv = true;
  std::string low;
  size_t i = 0;
  for (; i < comps.size(); ++i) {
    const std::string_view c = comps[i];
    if (c.size() > kNameMax) break;  // resolve() refuses it
    if (cur) {
      if (!cur->dir()) break;  // resolve() answers ENOTDIR
      const Node* live = nullptr;
      const Node* dead = nullptr;
      std::string_view liveName, deadName;
      Node* exact = cur->find(c);
      if (exact && !exact->whiteout()) {
        live = exact;
        liveName = exact->name();
      } else {
        if (exact) {
          dead = exact;
          deadName = exact->name();
        }
        for (Node* child : cur->kids()) {
          const std::string_view name = child->name();
          if (!sameName(name, c)) continue;
          if (!child->whiteout()) {
            live = child;
            liveName = name;
            break;
          }
          if (!dead) {
            dead = child;
            deadName = name;
          }
        }
      }
      if (live) {
        append(liveName);
        descend(live, liveName, &lv, &low);
        cur = live;
        continue;
      }
      if (dead) {
        append(deadName);
        if (i + 1 == comps.size() && respellAs && deadName != c) *respellAs = std::string(c);
        ++i;
        break;
      }
      cur = nullptr;
      if (!lv) break;  // a directory of the layer's own: nothing of the folder below
      if (!lower_->caseInsensitive()) {
        Attr a;
        const size_t at = static_cast<size_t>(c.data() - path.data());
        if (lower_->stat(joinPath(low, std::string_view(path).substr(at)), &a) == 0)
          break;  // the rest is spelt as the folder spells it
      }
    }
    std::string real;
    if (!lowerSpelling(low, c, &real)) break;
    append(real);
    low = joinPath(low, real);
  }
  for (; i < comps.size(); ++i) append(comps[i]);
  return *buf;
}

// The folder's spelling of `name` in its directory `dir`: as asked when the folder has that
// exactly, else the entry that matches ignoring case (of several in a case-sensitive folder,
// the first in byte order). A case-insensitive folder tells it in one call (storedName); a
// case-sensitive one is listed, which only happens when the exact spelling is missing. False
// when the folder has no such entry.
bool Overlay::lowerSpelling(const std::string& dir, std::string_view name,
                            std::string* real) const {
  const std::string at = joinPath(dir, name);
  if (lower_->caseInsensitive()) return lower_->storedName(at, real) == 0;
  Attr a;
  if (lower_->stat(at, &a) == 0) {
    *real = std::string(name);
    return true;
  }
  std::vector<DirEntry> ls;
  if (lower_->readdir(dir, &ls) != 0) return false;
  bool found = false;
  for (auto& d : ls) {
    if (sameName(d.name, name) && (!found || d.name < *real)) {
      *real = d.name;
      found = true;
    }
  }
  return found;
}

// A rename within one directory, by the same steps as rename(): the entry keeps its inode,
// content and (for a directory of the folder, through a redirect) its merge with the folder;
// the old name becomes a whiteout where the folder has something under it.
int Overlay::respell(Layer& L, const std::string& path, const std::string& name) {
  std::string parent, old;
  splitLast(path, &parent, &old);
  if (old == name) return 0;
  Res r;
  NodeRef n = detach(L, path, r);
  if (!n) return EIO;
  return attach(L, joinPath(parent, name), std::move(n));
}

// Makes sure every directory along `path` has a layer node (copying up directories of A as
// mirrors) and returns the last one with its merge source.
int Overlay::materializeDir(Layer& L, const std::string& path, Node** out, bool* lvOut,
                            std::string* lowOut) {
  Node* cur = L.root.get();
  bool lv = true;
  std::string low;
  for (auto c : components(path)) {
    if (Node* child = cur->find(c)) {
      if (child->whiteout()) return ENOENT;
      if (child->inode()->type == FileType::Symlink) return ELOOP;
      if (!child->dir()) return ENOTDIR;
      descend(child, c, &lv, &low);
      cur = child;
      continue;
    }
    if (!lv) return ENOENT;
    std::string next = joinPath(low, c);
    Attr a;
    int e = lower_->stat(next, &a);
    if (e) return e;
    if (a.type == FileType::Symlink) return ELOOP;
    if (a.type != FileType::Directory) return ENOTDIR;
    NodeRef node = Node::make(FileType::Directory, c);
    node->ino = a.ino;
    node->setSnap(a);
    node->links = 1;
    Node* raw = node.get();
    cur->put(c, std::move(node));
    cur = raw;
    low = std::move(next);
  }
  *out = cur;
  if (lvOut) *lvOut = lv;
  if (lowOut) *lowOut = low;
  return 0;
}

// Gives the object at `path` a layer node without copying content: a directory becomes a
// mirror, a regular file an inode whose content stays in A, a symlink a copy of its target.
int Overlay::materializeNode(Layer& L, const std::string& path, Node** out, Res* r) {
  int e = resolve(L, path, r);
  if (e) return e;
  if (r->node) {
    *out = r->node;
    return 0;
  }
  std::string parent, name;
  splitLast(path, &parent, &name);
  Node* p;
  bool plv;
  std::string plow;
  e = materializeDir(L, parent, &p, &plv, &plow);
  if (e) return e;
  const Attr& a = r->lowerAttr;
  NodeRef in = Node::make(a.type, name);
  in->ino = a.ino;
  in->setSnap(a);
  in->links = 1;
  if (a.type == FileType::Symlink) {
    e = lower_->readlink(r->low, &in->more().target);
    if (e) return e;
    in->set(Inode::kOwnMeta | Inode::kOwnXattrs);
  } else if (a.type == FileType::Regular) {
    // Files of one folder directory share that directory's path (LowerDir) and add their name.
    std::string ldir, base;
    splitLast(r->low, &ldir, &base);
    More& px = p->more();
    if (!px.lowerDir || px.lowerDir->path != ldir) {
      auto* d = new LowerDir();
      d->path = ldir;
      d->refs = 1;
      dropLowerDir(px.lowerDir);
      px.lowerDir = d;
    }
    in->setLower(r->low, px.lowerDir);
  } else if (a.type != FileType::Directory) {
    in->set(Inode::kOwnMeta | Inode::kOwnXattrs);  // fifos, sockets, devices: nothing in A
  }
  Node* raw = in.get();
  p->put(name, std::move(in));
  r->node = raw;
  // A materialised directory keeps merging with the same A directory; r->lv/low stay valid.
  if (a.type != FileType::Directory) {
    r->lv = false;
    r->low.clear();
  }
  *out = raw;
  return 0;
}

void Overlay::inodeAttr(const Inode* in, Attr* out) {
  std::string lowerPath;
  bool inLower, ownMeta;
  {
    MetaLock m(in->mmu(), LockRank::Meta);
    *out = in->snap();
    inLower = in->lowerPath(&lowerPath);
    ownMeta = in->ownMeta();
  }
  if (inLower) {
    // Content (and, unless the layer took them over, attributes) still live in A.
    Attr a;
    if (lower_->stat(lowerPath, &a) == 0) {
      if (!ownMeta) {
        *out = a;
      } else {
        out->size = a.size;
        out->blocks = a.blocks;
      }
    }
  } else if (in->type == FileType::Regular || in->type == FileType::Symlink) {
    if (in->type == FileType::Symlink) out->size = in->target().size();
    out->blocks = (out->size + 511) / 512;
  }
  out->ino = in->ino;
  out->type = in->type;
  uint32_t links = in->links.load();
  out->nlink = links ? links : 1;
  out->layerObject = true;
}

void Overlay::nodeAttr(const Node* n, bool lv, const std::string& low, Attr* out) {
  const Inode* in = n->inode();
  if (in->type != FileType::Directory) return inodeAttr(in, out);
  Attr a;
  bool merged = lv && lower_->stat(low, &a) == 0 && a.type == FileType::Directory;
  uint32_t lowerLinks = a.nlink;
  {
    MetaLock m(in->mmu(), LockRank::Meta);
    *out = !in->ownMeta() && merged ? a : in->snap();
  }
  // The link count is 2 + subdirectories, which tools use to know when they have seen every
  // subdirectory. Exact when only one side has children: A's count while the layer has not
  // touched this directory's entries, the layer's own count for a directory A does not have
  // (or hides). When both contribute, counting would mean merging the listing on every
  // getattr; 1 instead is Linux's "not counted" (btrfs always, ext4 past 65,000), never wrong.
  if (merged && n->empty()) {
    out->nlink = lowerLinks;
  } else if (merged) {
    out->nlink = 1;
  } else {
#if defined(SHADOWFS_CHECKS)
    size_t counted = 0;
    for (const Node* c : n->kids()) counted += c->dir() ? 1 : 0;
    SFS_ASSERT(counted == n->subdirs());
#endif
    out->nlink = 2 + static_cast<uint32_t>(n->subdirs());
  }
  out->ino = in->ino;
  out->type = FileType::Directory;
  out->layerObject = true;
}

void Overlay::ensureOwnMeta(Inode* in, bool lv, const std::string& low) {
  std::string src;
  bool any;
  {
    MetaLock m(in->mmu(), LockRank::Meta);
    if (in->ownMeta()) return;
    any = in->lowerPath(&src);
    if (!any && lv) {
      src = low;
      any = true;
    }
  }
  Attr a;
  const bool ok = any && lower_->stat(src, &a) == 0;
  MetaLock m(in->mmu(), LockRank::Meta);
  if (in->ownMeta()) return;
  if (ok) in->setSnap(a);
  in->set(Inode::kOwnMeta);
}

// The place of `path`'s last name: its parent directory as a layer node (materialised) with
// the folder directory it merges with, and the name itself.
int Overlay::slotOf(Layer& L, const std::string& path, Slot* s) {
  std::string parent;
  splitLast(path, &parent, &s->name);
  return materializeDir(L, parent, &s->dir, &s->lv, &s->low);
}

bool Overlay::Slot::inLower(Overlay* ov) const { return ov->lowerPresent(lv, low, name); }

int Overlay::placeNew(Layer& L, const std::string& path, NodeRef inode, Node** out) {
  Slot slot;
  std::string parent, name;
  splitLast(path, &parent, &name);
  if (name.empty()) return EEXIST;
  if (name.size() > kNameMax) return ENAMETOOLONG;
  int e = slotOf(L, path, &slot);
  if (e) return e == ELOOP ? ENOTDIR : e;
  Node* p = slot.dir;
  Node* there = p->find(name);
  const bool present = slot.inLower(this);
  if (there ? !there->whiteout() : present) return EEXIST;
  // A directory created where A has something (hidden by a whiteout) must not show A's
  // children.
  if (inode->type == FileType::Directory && present) inode->set(Inode::kOpaque);
  inode->inode()->links++;
  Node* raw = inode.get();
  p->put(name, std::move(inode));
  touch(p->inode(), true);
  if (out) *out = raw;
  return 0;
}

namespace {
// A name of an inode went away: one link fewer, and (as on a real file system) the inode's
// ctime moves, which the object's other hard links show.
void dropNames(Overlay* ov, Node* n, void (Overlay::*touchFn)(Inode*, bool)) {
  if (!n || n->whiteout()) return;
  Inode* in = n->inode();
  if (in->links > 0) in->links--;
  if (in->type != FileType::Directory) (ov->*touchFn)(in, false);
  for (Node* c : n->kids()) dropNames(ov, c, touchFn);
}
}  // namespace

// Removes whatever is at `path` (already known to exist): a whiteout where A has something.
int Overlay::removeAt(Layer& L, const std::string& path) {
  Slot slot;
  if (int e = slotOf(L, path, &slot)) return e;
  Node* p = slot.dir;
  Node* there = p->find(slot.name);
  if (there) dropNames(this, there, &Overlay::touch);
  if (slot.inLower(this)) {
    p->put(slot.name, Node::makeWhiteout(slot.name));
  } else if (there) {
    p->take(slot.name);
  }
  if (p->ownMeta()) touch(p, true);
  return 0;
}

int Overlay::revert(const std::string& layer, const std::string& asked, bool* wasDir) {
  *wasDir = false;
  if (asked.empty()) return EBUSY;
  std::shared_ptr<Layer> lp = byName(layer);
  if (!lp) return ENXIO;
  Layer& L = *lp;
  WriteLock lock(L.mu, LockRank::Layer);
  std::string cbuf;
  const std::string& path = canon(L, asked, &cbuf);
  Node* dir = L.root.get();
  auto comps = components(path);
  for (size_t i = 0; i + 1 < comps.size(); ++i) {
    Node* c = dir->find(comps[i]);
    if (!c) return 0;  // the layer holds nothing there
    // Under a deleted, opaque or moved directory the folder's entry would stay hidden (or be
    // looked for elsewhere): only the whole directory can go back to the folder's.
    if (c->whiteout() || !c->dir() || c->opaque() || c->redirected()) return EXDEV;
    dir = c;
  }
  if (ignoreCase_) {
    // Every spelling the layer has for the name goes: after a case-only rename the layer holds
    // the new name and a whiteout of the old, and the folder's entry is back only once both are.
    std::vector<std::string> names;
    for (Node* c : dir->kids()) {
      if (!sameName(c->name(), comps.back())) continue;
      names.emplace_back(c->name());
      *wasDir = *wasDir || c->dir();
      dropNames(this, c, &Overlay::touch);
    }
    const bool any = !names.empty();
    for (const auto& name : names) dir->take(name);
    if (!any) return 0;
    for (auto c = L.copied.begin(); c != L.copied.end();)
      c = sameOrInsideFolded(c->first, path) ? L.copied.erase(c) : std::next(c);
    return 0;
  }
  Node* there = dir->find(comps.back());
  if (!there) return 0;
  *wasDir = there->dir();
  dropNames(this, there, &Overlay::touch);
  dir->take(comps.back());
  // Copies made from the folder's file there (or below) are no longer this layer's.
  for (auto c = L.copied.begin(); c != L.copied.end();) {
    const std::string& k = c->first;
    bool under = k == path || (k.size() > path.size() && k.compare(0, path.size(), path) == 0 &&
                               k[path.size()] == '/');
    c = under ? L.copied.erase(c) : std::next(c);
  }
  return 0;
}

// Takes the object at `path` out of the tree (leaving a whiteout where A has something) and
// returns it as a free-standing node. A directory that merged with A keeps doing so through
// an explicit redirect; one that has nothing in A becomes opaque.
NodeRef Overlay::detach(Layer& L, const std::string& path, Res& r) {
  Node* n;
  if (materializeNode(L, path, &n, &r)) return NodeRef();
  if (n->dir() && !n->opaque() && !n->redirected()) {
    Attr a;
    if (r.lv && lower_->stat(r.low, &a) == 0 && a.type == FileType::Directory) {
      n->more().redirect = r.low;
      ensureOwnMeta(n, true, r.low);
    } else {
      n->set(Inode::kOpaque);
    }
  }
  Slot slot;
  if (slotOf(L, path, &slot)) return NodeRef();
  Node* p = slot.dir;
  NodeRef out = p->take(slot.name);
  if (!out) return out;
  if (slot.inLower(this)) p->put(slot.name, Node::makeWhiteout(slot.name));
  touch(p, true);
  touch(out->inode(), false);
  return out;
}

int Overlay::attach(Layer& L, const std::string& path, NodeRef n) {
  Slot slot;
  if (int e = slotOf(L, path, &slot)) return e;
  Node* p = slot.dir;
  // Renaming over a file: its other hard links (if any) see its ctime move.
  if (Node* there = p->find(slot.name)) dropNames(this, there, &Overlay::touch);
  if (n->dir() && !n->redirected() && slot.inLower(this)) n->set(Inode::kOpaque);
  p->put(slot.name, std::move(n));
  touch(p, true);
  return 0;
}

// Every directory along `dir` must be a directory, not a symlink (ELOOP) or a file (ENOTDIR).
// With `create`, missing ones are created in the layer, owned by `create`.
int Overlay::checkParents(Layer& L, const std::string& dir, const Caller* create) {
  std::string prefix;
  for (auto c : components(dir)) {
    prefix = joinPath(prefix, c);
    Res pr;
    int e = resolve(L, prefix, &pr);
    if (e == ENOENT && create) {
      std::string pp, pn;
      splitLast(prefix, &pp, &pn);
      e = placeNew(L, prefix, newInode(FileType::Directory, 0755, *create, pn), nullptr);
      if (e) return e;
      continue;
    }
    if (e) return e;
    FileType t = pr.node ? pr.node->inode()->type : pr.lowerAttr.type;
    if (t == FileType::Symlink) return ELOOP;
    if (t != FileType::Directory) return ENOTDIR;
  }
  return 0;
}

int Overlay::xattrSource(const Res& r, std::string* src) const {
  if (!r.node) {
    *src = r.low;
    return 0;
  }
  const Inode* in = r.node->inode();
  {
    MetaLock m(in->mmu(), LockRank::Meta);
    if (in->lowerPath(src)) return 0;
  }
  if (in->type == FileType::Directory && r.lv) {
    *src = r.low;
    return 0;
  }
  return ENODATA;
}

int Overlay::planList(Layer& L, const std::string& path, ListPlan* plan) {
  Res r;
  int e = resolve(L, path, &r);
  if (e) return e;
  if (!r.node) {
    if (r.lowerAttr.type != FileType::Directory) return ENOTDIR;
    plan->lowerOnly = plan->readLower = true;
    plan->low = r.low;
    plan->ino = r.lowerAttr.ino;
    return 0;
  }
  if (!r.node->dir()) return ENOTDIR;
  plan->ino = r.node->inode()->ino;
  plan->readLower = r.lv;
  plan->low = r.low;
  for (const Node* c : r.node->kids()) {
    const std::string_view name = c->name();
    if (r.lv) plan->hidden.push_back(ignoreCase_ ? foldName(name) : std::string(name));
    if (!c->whiteout())
      plan->own.push_back(DirEntry{std::string(name), c->inode()->ino, c->inode()->type});
  }
  // Case-insensitive names: the layer's names hide the folder's in any case (folded, sorted).
  if (ignoreCase_) std::sort(plan->hidden.begin(), plan->hidden.end());
  return 0;
}

int Overlay::runList(const ListPlan& plan, std::vector<DirEntry>* out) {
  out->clear();
  if (plan.lowerOnly) return lower_->readdir(plan.low, out);
  if (plan.readLower) {
    std::vector<DirEntry> ls;
    if (lower_->readdir(plan.low, &ls) == 0) {
      out->reserve(ls.size() + plan.own.size());
      // plan.hidden is sorted (it comes from an ordered map, or was sorted once folded).
      if (!ignoreCase_) {
        for (auto& d : ls) {
          if (!std::binary_search(plan.hidden.begin(), plan.hidden.end(), d.name))
            out->push_back(std::move(d));
        }
      } else {
        for (auto& d : ls) {
          if (!std::binary_search(plan.hidden.begin(), plan.hidden.end(), foldName(d.name)))
            out->push_back(std::move(d));
        }
      }
    }
  }
  out->insert(out->end(), plan.own.begin(), plan.own.end());
  return 0;
}

}  // namespace shadowfs
