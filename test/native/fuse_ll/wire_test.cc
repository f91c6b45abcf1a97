// fuse_ll's own side of the FUSE protocol (native/fuse_ll/kernel_abi.h, wire.cc, dev_loop.cc):
// the message layouts against the system's <linux/fuse.h> wherever that header has them, the
// bytes of replies and directory records, and the request decoder fed malformed requests
// through a pipe standing in for /dev/fuse (each reply is read back from the pipe).
#include <fcntl.h>
#include <linux/fuse.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../../../native/fuse_ll/kernel_abi.h"
#include "../../../native/fuse_ll/ll_mount.h"
#include "../../../native/fuse_ll/splice_reply.h"
#include "../../../native/fuse_ll/uring_loop.h"
#include "../../../native/fuse_ll/wire.h"
#include "../core/fake_lower.h"
#include "../unit/unit.h"

using namespace shadowfs;
namespace abi = shadowfs::ll::abi;

namespace shadowfs {
namespace ll {
// Reaches LLMount's decoder without a mount: requests are fed to dispatch() and replies go to
// `fd` (a pipe) instead of /dev/fuse.
struct WireTestAccess {
  static void feed(LLMount* m, int fd, const std::vector<char>& req) {
    m->fd_ = fd;
    m->dispatch(req.data(), req.size(), nullptr);
    m->fd_ = -1;
  }
  // The decoder as a ring entry calls it (replies go to the entry's sink).
  static uring::Dispatch dispatcher(LLMount* m) {
    return [m](const char* buf, size_t size, ReplySink* sink) { m->dispatch(buf, size, sink); };
  }
};
}  // namespace ll
}  // namespace shadowfs

namespace {

#define SAME_LAYOUT(ours, theirs)         \
  CHECK_EQ(sizeof(ours), sizeof(theirs)); \
  CHECK_EQ(alignof(ours), alignof(theirs))
#define SAME_FIELD(ours, of, theirs, tf) CHECK_EQ(offsetof(ours, of), offsetof(theirs, tf))

TEST(kernel_abi_matches_the_system_header_where_it_has_the_same_messages) {
  SAME_LAYOUT(abi::InHeader, struct fuse_in_header);
  SAME_FIELD(abi::InHeader, nodeid, struct fuse_in_header, nodeid);
  SAME_FIELD(abi::InHeader, pid, struct fuse_in_header, pid);
  SAME_LAYOUT(abi::OutHeader, struct fuse_out_header);
  SAME_LAYOUT(abi::Attr, struct fuse_attr);
  SAME_FIELD(abi::Attr, mode, struct fuse_attr, mode);
  SAME_FIELD(abi::Attr, blksize, struct fuse_attr, blksize);
  SAME_LAYOUT(abi::EntryOut, struct fuse_entry_out);
  SAME_FIELD(abi::EntryOut, attr, struct fuse_entry_out, attr);
  SAME_LAYOUT(abi::AttrOut, struct fuse_attr_out);
  SAME_LAYOUT(abi::GetattrIn, struct fuse_getattr_in);
  SAME_LAYOUT(abi::SetattrIn, struct fuse_setattr_in);
  SAME_FIELD(abi::SetattrIn, size, struct fuse_setattr_in, size);
  SAME_FIELD(abi::SetattrIn, mtimensec, struct fuse_setattr_in, mtimensec);
  SAME_FIELD(abi::SetattrIn, mode, struct fuse_setattr_in, mode);
  SAME_FIELD(abi::SetattrIn, gid, struct fuse_setattr_in, gid);
  SAME_LAYOUT(abi::MknodIn, struct fuse_mknod_in);
  SAME_LAYOUT(abi::MkdirIn, struct fuse_mkdir_in);
  SAME_LAYOUT(abi::Rename2In, struct fuse_rename2_in);
  SAME_LAYOUT(abi::OpenIn, struct fuse_open_in);
  SAME_LAYOUT(abi::CreateIn, struct fuse_create_in);
  SAME_LAYOUT(abi::OpenOut, struct fuse_open_out);
  SAME_LAYOUT(abi::ReleaseIn, struct fuse_release_in);
  SAME_LAYOUT(abi::FlushIn, struct fuse_flush_in);
  SAME_LAYOUT(abi::ReadIn, struct fuse_read_in);
  SAME_FIELD(abi::ReadIn, size, struct fuse_read_in, size);
  SAME_LAYOUT(abi::WriteIn, struct fuse_write_in);
  SAME_FIELD(abi::WriteIn, offset, struct fuse_write_in, offset);
  SAME_LAYOUT(abi::WriteOut, struct fuse_write_out);
  SAME_LAYOUT(abi::FsyncIn, struct fuse_fsync_in);
  CHECK_EQ(sizeof(abi::SetxattrIn), static_cast<size_t>(FUSE_COMPAT_SETXATTR_IN_SIZE));
  SAME_LAYOUT(abi::GetxattrIn, struct fuse_getxattr_in);
  SAME_LAYOUT(abi::GetxattrOut, struct fuse_getxattr_out);
  SAME_LAYOUT(abi::Kstatfs, struct fuse_kstatfs);
  SAME_FIELD(abi::Kstatfs, frsize, struct fuse_kstatfs, frsize);
  SAME_LAYOUT(abi::BatchForgetIn, struct fuse_batch_forget_in);
  SAME_LAYOUT(abi::ForgetOne, struct fuse_forget_one);
  SAME_LAYOUT(abi::FallocateIn, struct fuse_fallocate_in);
  SAME_LAYOUT(abi::InitIn, struct fuse_init_in);
  SAME_FIELD(abi::InitIn, flags2, struct fuse_init_in, flags2);
  SAME_LAYOUT(abi::InitOut, struct fuse_init_out);
  SAME_FIELD(abi::InitOut, maxWrite, struct fuse_init_out, max_write);
  SAME_FIELD(abi::InitOut, maxPages, struct fuse_init_out, max_pages);
  SAME_FIELD(abi::InitOut, flags2, struct fuse_init_out, flags2);
  SAME_LAYOUT(abi::Dirent, struct fuse_dirent);
  SAME_LAYOUT(abi::DirentPlus, struct fuse_direntplus);
  SAME_LAYOUT(abi::NotifyInvalInode, struct fuse_notify_inval_inode_out);
  SAME_LAYOUT(abi::NotifyInvalEntry, struct fuse_notify_inval_entry_out);
  // Numbers.
  CHECK_EQ(static_cast<uint32_t>(abi::LOOKUP), static_cast<uint32_t>(FUSE_LOOKUP));
  CHECK_EQ(static_cast<uint32_t>(abi::SETATTR), static_cast<uint32_t>(FUSE_SETATTR));
  CHECK_EQ(static_cast<uint32_t>(abi::SYMLINK), static_cast<uint32_t>(FUSE_SYMLINK));
  CHECK_EQ(static_cast<uint32_t>(abi::LINK), static_cast<uint32_t>(FUSE_LINK));
  CHECK_EQ(static_cast<uint32_t>(abi::STATFS), static_cast<uint32_t>(FUSE_STATFS));
  CHECK_EQ(static_cast<uint32_t>(abi::FLUSH), static_cast<uint32_t>(FUSE_FLUSH));
  CHECK_EQ(static_cast<uint32_t>(abi::INIT), static_cast<uint32_t>(FUSE_INIT));
  CHECK_EQ(static_cast<uint32_t>(abi::RELEASEDIR), static_cast<uint32_t>(FUSE_RELEASEDIR));
  CHECK_EQ(static_cast<uint32_t>(abi::CREATE), static_cast<uint32_t>(FUSE_CREATE));
  CHECK_EQ(static_cast<uint32_t>(abi::INTERRUPT), static_cast<uint32_t>(FUSE_INTERRUPT));
  CHECK_EQ(static_cast<uint32_t>(abi::DESTROY), static_cast<uint32_t>(FUSE_DESTROY));
  CHECK_EQ(static_cast<uint32_t>(abi::BATCH_FORGET), static_cast<uint32_t>(FUSE_BATCH_FORGET));
  CHECK_EQ(static_cast<uint32_t>(abi::FALLOCATE), static_cast<uint32_t>(FUSE_FALLOCATE));
  CHECK_EQ(static_cast<uint32_t>(abi::READDIRPLUS), static_cast<uint32_t>(FUSE_READDIRPLUS));
  CHECK_EQ(static_cast<uint32_t>(abi::RENAME2), static_cast<uint32_t>(FUSE_RENAME2));
  CHECK_EQ(abi::kAtomicOTrunc, static_cast<uint64_t>(FUSE_ATOMIC_O_TRUNC));
  CHECK_EQ(abi::kBigWrites, static_cast<uint64_t>(FUSE_BIG_WRITES));
  CHECK_EQ(abi::kAutoInvalData, static_cast<uint64_t>(FUSE_AUTO_INVAL_DATA));
  CHECK_EQ(abi::kDoReaddirplus, static_cast<uint64_t>(FUSE_DO_READDIRPLUS));
  CHECK_EQ(abi::kReaddirplusAuto, static_cast<uint64_t>(FUSE_READDIRPLUS_AUTO));
  CHECK_EQ(abi::kWritebackCache, static_cast<uint64_t>(FUSE_WRITEBACK_CACHE));
  CHECK_EQ(abi::kNoOpenSupport, static_cast<uint64_t>(FUSE_NO_OPEN_SUPPORT));
  CHECK_EQ(abi::kParallelDirops, static_cast<uint64_t>(FUSE_PARALLEL_DIROPS));
  CHECK_EQ(abi::kMaxPages, static_cast<uint64_t>(FUSE_MAX_PAGES));
  CHECK_EQ(abi::kCacheSymlinks, static_cast<uint64_t>(FUSE_CACHE_SYMLINKS));
  CHECK_EQ(abi::kNoOpendirSupport, static_cast<uint64_t>(FUSE_NO_OPENDIR_SUPPORT));
  CHECK_EQ(abi::kInitExt, static_cast<uint64_t>(FUSE_INIT_EXT));
  CHECK_EQ(abi::kOpenKeepCache, static_cast<uint32_t>(FOPEN_KEEP_CACHE));
  CHECK_EQ(abi::kOpenCacheDir, static_cast<uint32_t>(FOPEN_CACHE_DIR));
  CHECK_EQ(abi::kOpenNoflush, static_cast<uint32_t>(FOPEN_NOFLUSH));
  CHECK_EQ(abi::kSetSize, static_cast<uint32_t>(FATTR_SIZE));
  CHECK_EQ(abi::kSetFh, static_cast<uint32_t>(FATTR_FH));
  CHECK_EQ(abi::kSetMtimeNow, static_cast<uint32_t>(FATTR_MTIME_NOW));
  CHECK_EQ(abi::kSetCtime, static_cast<uint32_t>(FATTR_CTIME));
  CHECK_EQ(abi::kGetattrFh, static_cast<uint32_t>(FUSE_GETATTR_FH));
  CHECK_EQ(abi::kNotifyInvalInode, static_cast<int32_t>(FUSE_NOTIFY_INVAL_INODE));
  // The passthrough ioctls (protocol 7.40, newer than the system header) encoded as _IOW does.
  CHECK_EQ(abi::kIocBackingOpen, static_cast<unsigned long>(_IOW(FUSE_DEV_IOC_MAGIC, 1, abi::BackingMap)));
  CHECK_EQ(abi::kIocBackingClose, static_cast<unsigned long>(_IOW(FUSE_DEV_IOC_MAGIC, 2, uint32_t)));
  CHECK_EQ(static_cast<unsigned long>(FUSE_DEV_IOC_CLONE), static_cast<unsigned long>(_IOR(FUSE_DEV_IOC_MAGIC, 0, uint32_t)));
  CHECK_EQ(abi::kNotifyInvalEntry, static_cast<int32_t>(FUSE_NOTIFY_INVAL_ENTRY));
  CHECK_EQ(abi::direntSize(5), FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + 5));
  CHECK_EQ(abi::direntPlusSize(9), FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET_DIRENTPLUS + 9));
}

// A pipe in place of /dev/fuse: what the code under test writes is read back whole.
struct Pipe {
  int r = -1, w = -1;
  Pipe() {
    int fds[2];
    if (::pipe2(fds, O_NONBLOCK) != 0) throw unit::Abort{};
    r = fds[0];
    w = fds[1];
  }
  ~Pipe() {
    ::close(r);
    ::close(w);
  }
  std::vector<char> take() {
    std::vector<char> out(1 << 16);
    ssize_t n = ::read(r, out.data(), out.size());
    out.resize(n > 0 ? static_cast<size_t>(n) : 0);
    return out;
  }
};

abi::OutHeader headerOf(const std::vector<char>& msg) {
  abi::OutHeader h{};
  if (msg.size() >= sizeof h) std::memcpy(&h, msg.data(), sizeof h);
  return h;
}

TEST(wire_replies_carry_the_unique_the_length_and_the_negated_errno) {
  Pipe p;
  ll::Req r{nullptr, p.w, 77, 0, 0, 0};
  CHECK_EQ(ll::wire::replyErr(&r, ENOENT), 0);
  std::vector<char> m = p.take();
  REQUIRE_EQ(m.size(), sizeof(abi::OutHeader));
  CHECK_EQ(headerOf(m).unique, uint64_t{77});
  CHECK_EQ(headerOf(m).error, -ENOENT);
  CHECK_EQ(headerOf(m).len, static_cast<uint32_t>(sizeof(abi::OutHeader)));

  Attr a;
  a.ino = 9;
  a.type = FileType::Regular;
  a.perm = 0640;
  a.size = 12345;
  a.mtime = {1700000000, 123456789};
  CHECK_EQ(ll::wire::replyAttr(&r, a, 2.5), 0);
  m = p.take();
  REQUIRE_EQ(m.size(), sizeof(abi::OutHeader) + sizeof(abi::AttrOut));
  abi::AttrOut o;
  std::memcpy(&o, m.data() + sizeof(abi::OutHeader), sizeof o);
  CHECK_EQ(headerOf(m).error, 0);
  CHECK_EQ(o.attrValid, uint64_t{2});
  CHECK_EQ(o.attrValidNsec, 500000000u);
  CHECK_EQ(o.attr.ino, uint64_t{9});
  CHECK_EQ(o.attr.mode, 0100640u);
  CHECK_EQ(o.attr.size, uint64_t{12345});
  CHECK_EQ(o.attr.mtime, uint64_t{1700000000});
  CHECK_EQ(o.attr.mtimensec, 123456789u);

  // A write that fails: its errno comes back to the caller (as ENOENT does for an interrupted
  // request), not lost.
  int ro = ::open("/dev/null", O_RDONLY);
  ll::Req bad{nullptr, ro, 78, 0, 0, 0};
  CHECK_EQ(ll::wire::replyErr(&bad, 0), -EBADF);
  ::close(ro);
}

TEST(wire_directory_records_are_padded_to_eight_bytes_and_refuse_what_does_not_fit) {
  std::vector<char> buf(256, 'x');
  size_t n = ll::wire::addDirent(buf.data(), buf.size(), "abc", 42, 0040000, 7);
  CHECK_EQ(n, size_t{32});  // 24 + 3, rounded up
  abi::Dirent d;
  std::memcpy(&d, buf.data(), sizeof d);
  CHECK_EQ(d.ino, uint64_t{42});
  CHECK_EQ(d.off, uint64_t{7});
  CHECK_EQ(d.namelen, 3u);
  CHECK_EQ(d.type, 4u);  // DT_DIR
  CHECK_EQ(std::string(buf.data() + 24, 3), std::string("abc"));
  CHECK_EQ(buf[27], '\0');
  CHECK_EQ(buf[31], '\0');
  CHECK_EQ(buf[32], 'x');  // nothing written past the record
  std::vector<char> small(31, 'y');
  CHECK_EQ(ll::wire::addDirent(small.data(), small.size(), "abc", 42, 0040000, 7), size_t{32});
  CHECK_EQ(small[0], 'y');  // too small: the size it needs, nothing written

  abi::EntryOut e;
  Attr a;
  a.ino = 5;
  a.type = FileType::Symlink;
  ll::wire::fillEntry(&e, 11, a, 60, 30);
  n = ll::wire::addDirentPlus(buf.data(), buf.size(), "linkname", e, 3);
  CHECK_EQ(n, size_t{160});  // 152 + 8
  abi::DirentPlus dp;
  std::memcpy(&dp, buf.data(), sizeof dp);
  CHECK_EQ(dp.entry.nodeid, uint64_t{11});
  CHECK_EQ(dp.entry.entryValid, uint64_t{60});
  CHECK_EQ(dp.entry.attrValid, uint64_t{30});
  CHECK_EQ(dp.dirent.ino, uint64_t{5});
  CHECK_EQ(dp.dirent.type, 10u);  // DT_LNK
  CHECK_EQ(dp.dirent.namelen, 8u);
}

TEST(wire_timeouts_split_into_seconds_and_nanoseconds) {
  uint64_t s;
  uint32_t ns;
  ll::wire::splitTimeout(0, &s, &ns);
  CHECK_EQ(s, uint64_t{0});
  CHECK_EQ(ns, 0u);
  ll::wire::splitTimeout(-3, &s, &ns);
  CHECK_EQ(s, uint64_t{0});
  ll::wire::splitTimeout(0.25, &s, &ns);
  CHECK_EQ(s, uint64_t{0});
  CHECK_EQ(ns, 250000000u);
  ll::wire::splitTimeout(86400.0 * 365, &s, &ns);
  CHECK_EQ(s, uint64_t{31536000});
  ll::wire::splitTimeout(1e300, &s, &ns);
  CHECK_EQ(s, UINT64_MAX);
}

// A request as the kernel lays it out: header, then `args`.
std::vector<char> request(uint32_t opcode, uint64_t unique, uint64_t nodeid, const std::string& args,
                          uint32_t claimedLen = 0) {
  abi::InHeader h{};
  h.len = claimedLen ? claimedLen : static_cast<uint32_t>(sizeof h + args.size());
  h.opcode = opcode;
  h.unique = unique;
  h.nodeid = nodeid;
  std::vector<char> out(sizeof h + args.size());
  std::memcpy(out.data(), &h, sizeof h);
  std::memcpy(out.data() + sizeof h, args.data(), args.size());
  return out;
}

template <typename T>
std::string bytes(const T& v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof v);
}

struct Mounted {
  std::shared_ptr<Overlay> ov;
  std::unique_ptr<ll::LLMount> m;
  Mounted() {
    auto lo = std::make_unique<fake::FakeLower>();
    lo->addFile("hello.txt", "hello\n");
    ov = std::make_shared<Overlay>(std::move(lo));
    if (ov->createLayer("a") != 0 || ov->activate("a", nullptr) != 0) throw unit::Abort{};
    MountOptions o;
    o.ioUring = false;  // INIT must not set up rings on this machine's kernel from a unit test
    m = std::make_unique<ll::LLMount>(ov, nullptr, "/nonexistent-lower", "/nonexistent-mp", o);
  }
};

TEST(the_decoder_answers_malformed_requests_with_an_error_and_never_reads_past_them) {
  Mounted w;
  Pipe p;
  auto feed = [&](const std::vector<char>& req) {
    ll::WireTestAccess::feed(w.m.get(), p.w, req);
    return p.take();
  };
  // A LOOKUP whose name has no terminating NUL: EINVAL, with the request's unique.
  std::vector<char> m = feed(request(abi::LOOKUP, 5, abi::kRootId, std::string("hello.txt", 9)));
  CHECK_EQ(headerOf(m).unique, uint64_t{5});
  CHECK_EQ(headerOf(m).error, -EINVAL);
  // Too short for its fixed arguments.
  m = feed(request(abi::READ, 6, abi::kRootId, std::string(10, '\0')));
  CHECK_EQ(headerOf(m).error, -EINVAL);
  m = feed(request(abi::SETATTR, 7, abi::kRootId, std::string(87, '\0')));
  CHECK_EQ(headerOf(m).error, -EINVAL);
  // A WRITE claiming more data than it carries.
  abi::WriteIn wi{};
  wi.size = 100;
  m = feed(request(abi::WRITE, 8, abi::kRootId, bytes(wi) + std::string(10, 'z')));
  CHECK_EQ(headerOf(m).error, -EINVAL);
  // A RENAME with one name only.
  abi::RenameIn ri{abi::kRootId};
  m = feed(request(abi::RENAME, 9, abi::kRootId, bytes(ri) + std::string("a\0", 2)));
  CHECK_EQ(headerOf(m).error, -EINVAL);
  // An opcode this backend does not serve (FUSE_ACCESS) and one that does not exist.
  m = feed(request(abi::ACCESS, 10, abi::kRootId, std::string(8, '\0')));
  CHECK_EQ(headerOf(m).error, -ENOSYS);
  m = feed(request(9999, 11, abi::kRootId, ""));
  CHECK_EQ(headerOf(m).error, -ENOSYS);
  // A header whose length is not the request's: dropped, no reply (nothing to answer safely).
  CHECK_EQ(feed(request(abi::GETATTR, 12, abi::kRootId, std::string(16, '\0'), 4000)).size(), size_t{0});
  // FORGET never gets a reply, not even for a short one.
  CHECK_EQ(feed(request(abi::FORGET, 13, 99, std::string(3, '\0'))).size(), size_t{0});
  abi::BatchForgetIn bf{1000, 0};
  CHECK_EQ(feed(request(abi::BATCH_FORGET, 14, 0, bytes(bf))).size(), size_t{0});

  // And a well-formed LOOKUP still works after all that: an entry for the folder's file.
  m = feed(request(abi::LOOKUP, 15, abi::kRootId, std::string("hello.txt\0", 10)));
  REQUIRE_EQ(m.size(), sizeof(abi::OutHeader) + sizeof(abi::EntryOut));
  CHECK_EQ(headerOf(m).error, 0);
  abi::EntryOut e;
  std::memcpy(&e, m.data() + sizeof(abi::OutHeader), sizeof e);
  CHECK(e.nodeid > abi::kRootId);
  CHECK_EQ(e.attr.size, uint64_t{6});
  // A missing name: a negative entry (node id 0) the kernel may keep for negativeTimeout.
  m = feed(request(abi::LOOKUP, 16, abi::kRootId, std::string("missing\0", 8)));
  REQUIRE_EQ(m.size(), sizeof(abi::OutHeader) + sizeof(abi::EntryOut));
  CHECK_EQ(headerOf(m).error, 0);
  std::memcpy(&e, m.data() + sizeof(abi::OutHeader), sizeof e);
  CHECK_EQ(e.nodeid, uint64_t{0});
  CHECK_EQ(e.entryValid, uint64_t{1});
}

TEST(init_asks_for_what_the_mount_needs_of_what_the_kernel_offers_and_never_writeback) {
  Mounted w;
  Pipe p;
  abi::InitIn in{};
  in.major = 7;
  in.minor = 45;
  in.maxReadahead = 131072;
  const uint64_t offered = ~0ull;  // everything, writeback and passthrough included
  in.flags = static_cast<uint32_t>(offered);
  in.flags2 = static_cast<uint32_t>(offered >> 32);
  ll::WireTestAccess::feed(w.m.get(), p.w, request(abi::INIT, 1, 0, bytes(in)));
  std::vector<char> m = p.take();
  REQUIRE_EQ(m.size(), sizeof(abi::OutHeader) + sizeof(abi::InitOut));
  abi::InitOut out;
  std::memcpy(&out, m.data() + sizeof(abi::OutHeader), sizeof out);
  const uint64_t want = out.flags | static_cast<uint64_t>(out.flags2) << 32;
  CHECK_EQ(out.major, 7u);
  CHECK_EQ(out.minor, 45u);
  CHECK((want & abi::kWritebackCache) == 0);
  CHECK((want & abi::kNoOpenSupport) != 0);  // the default I/O mode: no open round trips
  CHECK((want & abi::kAtomicOTrunc) == 0);   // ... so O_TRUNC must come as SETATTR
  CHECK((want & abi::kDoReaddirplus) != 0);
  CHECK((want & abi::kOverIoUring) == 0);  // offered, but this mount's MountOptions::ioUring is off
  CHECK_EQ(out.maxWrite, 1u << 20);
  CHECK_EQ(out.maxReadahead, 131072u);

  // A kernel older than 7.31 is refused with EPROTO.
  in.minor = 26;
  ll::WireTestAccess::feed(w.m.get(), p.w, request(abi::INIT, 2, 0, bytes(in)));
  CHECK_EQ(headerOf(p.take()).error, -EPROTO);
}

// A ring entry as fs/fuse/dev_uring.c fills it (fuse_uring_args_to_ring): the in header in inOut,
// the request's first argument in opIn (nothing when the kernel made it zero-size), the other
// arguments in the payload buffer, payloadSz their length, commitId the unique.
struct RingEntry {
  abi::UringReqHeader hdr{};
  std::vector<char> region = std::vector<char>(ll::uring::kHeadroom + 8192, '\x5a');
  char* payload() { return region.data() + ll::uring::kHeadroom; }
  void fill(uint32_t opcode, uint64_t unique, uint64_t nodeid, const std::string& opIn,
            const std::string& rest) {
    std::memset(&hdr, 0x77, sizeof hdr);  // stale bytes from an earlier request
    abi::InHeader h{};
    h.len = static_cast<uint32_t>(sizeof h + opIn.size() + rest.size());
    h.opcode = opcode;
    h.unique = unique;
    h.nodeid = nodeid;
    std::memcpy(hdr.inOut, &h, sizeof h);
    std::memcpy(hdr.opIn, opIn.data(), opIn.size());
    abi::UringEntInOut io{};
    io.commitId = unique;
    io.payloadSz = static_cast<uint32_t>(rest.size());
    hdr.ringEntInOut = io;
    std::memcpy(payload(), rest.data(), rest.size());
  }
  abi::OutHeader out() const {
    abi::OutHeader o;
    std::memcpy(&o, hdr.inOut, sizeof o);
    return o;
  }
};

TEST(a_ring_entry_is_decoded_like_dev_fuse_and_its_reply_lands_where_the_kernel_reads_it) {
  Mounted w;
  RingEntry r;
  auto dispatch = ll::WireTestAccess::dispatcher(w.m.get());
  // LOOKUP: a zero-size first argument (fuse_set_zero_arg0), so opIn is empty and the name is in
  // the payload. The reply is the out header in inOut and the entry in the payload.
  r.fill(abi::LOOKUP, 20, abi::kRootId, "", std::string("hello.txt\0", 10));
  CHECK_EQ(ll::uring::serveEntry(&r.hdr, r.payload(), 8192, dispatch), uint64_t{20});
  CHECK_EQ(r.out().unique, uint64_t{20});
  CHECK_EQ(r.out().error, 0);
  CHECK_EQ(r.out().len, static_cast<uint32_t>(sizeof(abi::OutHeader) + sizeof(abi::EntryOut)));
  CHECK_EQ(r.hdr.ringEntInOut.payloadSz, static_cast<uint32_t>(sizeof(abi::EntryOut)));
  abi::EntryOut e;
  std::memcpy(&e, r.payload(), sizeof e);
  CHECK(e.nodeid > abi::kRootId);
  CHECK_EQ(e.attr.size, uint64_t{6});
  const uint64_t node = e.nodeid;

  // GETATTR: its fuse_getattr_in in opIn, nothing in the payload.
  abi::GetattrIn gi{};
  r.fill(abi::GETATTR, 22, node, bytes(gi), "");
  CHECK_EQ(ll::uring::serveEntry(&r.hdr, r.payload(), 8192, dispatch), uint64_t{22});
  CHECK_EQ(r.out().error, 0);
  CHECK_EQ(r.hdr.ringEntInOut.payloadSz, static_cast<uint32_t>(sizeof(abi::AttrOut)));
  abi::AttrOut ao;
  std::memcpy(&ao, r.payload(), sizeof ao);
  CHECK_EQ(ao.attr.size, uint64_t{6});

  // READ: fuse_read_in in opIn; the data comes back in the payload.
  abi::ReadIn ri{};
  ri.size = 4096;
  r.fill(abi::READ, 24, node, bytes(ri), "");
  ll::uring::serveEntry(&r.hdr, r.payload(), 8192, dispatch);
  CHECK_EQ(r.out().error, 0);
  CHECK_EQ(r.hdr.ringEntInOut.payloadSz, 6u);
  CHECK_EQ(std::string(r.payload(), 6), std::string("hello\n"));

  // An error reply carries no payload.
  r.fill(abi::LOOKUP, 26, abi::kRootId, "", std::string("missing\0", 8));
  ll::uring::serveEntry(&r.hdr, r.payload(), 8192, dispatch);
  CHECK_EQ(r.out().error, 0);  // a negative entry (negativeTimeout > 0)
  r.fill(abi::ACCESS, 28, abi::kRootId, std::string(8, '\0'), "");
  ll::uring::serveEntry(&r.hdr, r.payload(), 8192, dispatch);
  CHECK_EQ(r.out().error, -ENOSYS);
  CHECK_EQ(r.hdr.ringEntInOut.payloadSz, 0u);

  // Lengths that do not add up (more in opIn than its 128 bytes, a payload larger than the
  // buffer): EIO, and still an answer, so that the kernel gets the entry back.
  r.fill(abi::GETATTR, 30, node, bytes(gi), "");
  abi::InHeader h;
  std::memcpy(&h, r.hdr.inOut, sizeof h);
  h.len = static_cast<uint32_t>(sizeof h + 200);
  std::memcpy(r.hdr.inOut, &h, sizeof h);
  CHECK_EQ(ll::uring::serveEntry(&r.hdr, r.payload(), 8192, dispatch), uint64_t{30});
  CHECK_EQ(r.out().unique, uint64_t{30});
  CHECK_EQ(r.out().error, -EIO);
  r.fill(abi::LOOKUP, 32, abi::kRootId, "", std::string("hello.txt\0", 10));
  r.hdr.ringEntInOut.payloadSz = 9000;
  ll::uring::serveEntry(&r.hdr, r.payload(), 8192, dispatch);
  CHECK_EQ(r.out().error, -EIO);
  CHECK_EQ(r.hdr.ringEntInOut.payloadSz, 0u);
}

// A READ reply spliced from a file (splice_reply.h), sent to a pipe that stands in for
// /dev/fuse (splicing pipe to pipe moves the same bytes the kernel would take; unlike the
// kernel, a pipe takes part of a message, so it is made large enough for the whole one).
TEST(a_large_read_from_a_file_is_spliced_into_one_reply_with_its_header_and_ends_at_the_end) {
  char path[] = "/tmp/shadowfs-splice-XXXXXX";
  int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::unlink(path);
  std::string file(300000, '\0');
  for (size_t i = 0; i < file.size(); ++i) file[i] = static_cast<char>((i * 2654435761u) >> 13);
  REQUIRE_EQ(::pwrite(fd, file.data(), file.size(), 0), static_cast<ssize_t>(file.size()));
  Pipe dev;
  REQUIRE(::fcntl(dev.w, F_SETPIPE_SZ, 1 << 20) >= (1 << 20));
  auto take = [&dev](size_t want) {
    std::vector<char> out(want);
    size_t got = 0;
    while (got < want) {
      ssize_t n = ::read(dev.r, out.data() + got, want - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    out.resize(got);
    return out;
  };
  std::vector<char> buf(ll::LLMount::kMaxRead);
  ll::Req r{nullptr, dev.w, 91, 0, 0, 0};
  const size_t hs = sizeof(abi::OutHeader);

  // Past the start of a page, to the middle of the file: one reply, header first, sent by read.
  {
    ll::SpliceReply s(&r, buf.data(), 200000, 4096);
    REQUIRE(s.usable());
    size_t got = 0;
    CHECK_OK(s.read(fd, 4096, 200000, &got));
    CHECK_EQ(got, size_t{200000});
    CHECK(s.answered());
    CHECK(s.spliced());
    std::vector<char> m = take(hs + 200000);
    REQUIRE_EQ(m.size(), hs + 200000);
    CHECK_EQ(headerOf(m).len, static_cast<uint32_t>(hs + 200000));
    CHECK_EQ(headerOf(m).unique, uint64_t{91});
    CHECK_EQ(headerOf(m).error, 0);
    CHECK(std::memcmp(m.data() + hs, file.data() + 4096, 200000) == 0);
  }
  // Asking past the end: the reply holds what there is, and says so in its length.
  {
    ll::SpliceReply s(&r, buf.data(), 262144, 200704);
    REQUIRE(s.usable());
    size_t got = 0;
    CHECK_OK(s.read(fd, 200704, 262144, &got));
    CHECK_EQ(got, file.size() - 200704);
    CHECK(s.spliced());
    std::vector<char> m = take(hs + got);
    CHECK_EQ(headerOf(m).len, static_cast<uint32_t>(hs + got));
    CHECK(std::memcmp(m.data() + hs, file.data() + 200704, got) == 0);
    CHECK(take(1).empty());
  }
  // At the end exactly: nothing read, nothing sent; the caller sends the empty reply.
  {
    ll::SpliceReply s(&r, buf.data(), 65536, file.size());
    size_t got = 7;
    CHECK_OK(s.read(fd, file.size(), 65536, &got));
    CHECK_EQ(got, size_t{0});
    CHECK(!s.answered());
    CHECK(take(1).empty());
  }
  // A transport that refuses the reply before taking it (here EBADF): the bytes come back into
  // buf for the copy path, and the pipes are left empty, so the next spliced reply is whole.
  {
    int ro = ::open("/dev/null", O_RDONLY);
    ll::Req bad{nullptr, ro, 92, 0, 0, 0};
    {
      ll::SpliceReply s(&bad, buf.data(), 100000, 0);
      REQUIRE(s.usable());
      size_t got = 0;
      CHECK_OK(s.read(fd, 0, 100000, &got));
      CHECK_EQ(got, size_t{100000});
      CHECK(!s.answered());
      CHECK(!s.spliced());
      CHECK(std::memcmp(buf.data(), file.data(), 100000) == 0);
    }
    ::close(ro);
    ll::SpliceReply again(&r, buf.data(), 70000, 8192);
    REQUIRE(again.usable());
    size_t got = 0;
    CHECK_OK(again.read(fd, 8192, 70000, &got));
    CHECK(again.spliced());
    std::vector<char> m = take(hs + 70000);
    CHECK_EQ(headerOf(m).len, static_cast<uint32_t>(hs + 70000));
    CHECK_EQ(headerOf(m).unique, uint64_t{91});
    CHECK(std::memcmp(m.data() + hs, file.data() + 8192, 70000) == 0);
    CHECK(take(1).empty());
  }
  // What is not spliced: small reads, a largest READ that starts inside a page (one pipe
  // buffer more than a pipe of 1 MiB holds), replies through a ring entry, and a read that
  // finds every pair of the process's pipes in use.
  CHECK(!ll::SpliceReply(&r, buf.data(), ll::SpliceReply::kMinSplice - 1, 0).usable());
  CHECK(ll::SpliceReply(&r, buf.data(), ll::LLMount::kMaxRead, 0).usable());
  CHECK(!ll::SpliceReply(&r, buf.data(), ll::LLMount::kMaxRead, 100).usable());
  struct NoSink final : ll::ReplySink {
    int reply(const abi::OutHeader&, const struct iovec*, int) override { return 0; }
  } sink;
  ll::Req ring{nullptr, -1, 93, 0, 0, 0, &sink};
  CHECK(!ll::SpliceReply(&ring, buf.data(), 100000, 0).usable());
  {
    std::vector<std::unique_ptr<ll::SpliceReply>> held;
    for (int i = 0; i < ll::SpliceReply::kMaxPipes; ++i) {
      held.push_back(std::make_unique<ll::SpliceReply>(&r, buf.data(), 100000, 0));
      CHECK(held.back()->usable());
    }
    CHECK(!ll::SpliceReply(&r, buf.data(), 100000, 0).usable());
  }
  CHECK(ll::SpliceReply(&r, buf.data(), 100000, 0).usable());
  ::close(fd);
}

}  // namespace
