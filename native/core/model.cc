// The data model's own machinery (model.h): the lock stripes, counted references, the
// Inode and Node records (names, times, Base, where content lives, footprint) and a
// directory's sorted children. Only memory layout here: no path walks, no folder access, no
// locks beyond the stripes' storage; the algorithms that shape a layer's tree are in tree.cc.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

#include "budget.h"
#include "model.h"
#include "path.h"

namespace shadowfs {

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
    ContentBudget::process().charge(memoryOf(this), 0);
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
      if (e && e->spill && e->spill->inMemory()) {
        bytes += (size + 4095) & ~uint64_t{4095};
      } else if (e && e->spill) {
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

}  // namespace shadowfs
