// One file or directory of a layer, as that layer shows it (shadow_object.h): whole-file and
// ranged reads and writes, truncate, stat, readdir, links, mkdir, chmod, remove and revert.
#include "shadow_object.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace shadowfs {

namespace {

// The largest file readFile returns: 4 GiB, what Node 20 can hold in one Buffer (later Node
// versions hold more). Larger files are refused with EFBIG.
constexpr uint64_t kMaxReadBytes = uint64_t(1) << 32;
// The most one readRange returns (callers read larger files in pieces).
constexpr uint64_t kMaxRangeBytes = uint64_t(64) << 20;

}  // namespace

// JS thread: write(layer, path, data: Buffer, mode, uid, gid) -> Promise<void>. The Buffer is
// kept alive and read by the worker (no copy on the JS thread).
Napi::Value Shadow::Write(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string layer, path;
  if (!stringArg(info, 0, &layer)) return rejected(env, EINVAL, "write: expected a layer name");
  if (!pathArg(info, 1, &path)) return rejectedPath(env, "write: invalid path");
  if (info.Length() < 6 || !info[2].IsBuffer() || !info[3].IsNumber() || !info[4].IsNumber() ||
      !info[5].IsNumber())
    return rejected(env, EINVAL, "write(layer, path, buffer, mode, uid, gid)");
  auto buf = info[2].As<Napi::Buffer<char>>();
  const char* data = buf.Data();
  size_t size = buf.Length();
  uint32_t mode = info[3].As<Napi::Number>().Uint32Value();
  Caller who{info[4].As<Napi::Number>().Uint32Value(), info[5].As<Napi::Number>().Uint32Value()};
  std::vector<Napi::Reference<Napi::Value>> keep;
  keep.push_back(Napi::Persistent(info[2]));
  return enqueue(
      env,
      [this, layer, path, data, size, mode, who] {  // worker thread
        if (!live()) return notMounted();
        int e = ov_->putFile(layer, path, std::string(data, size), mode, who);
        if (e) return fail(e, "cannot write " + path);
        layerChanged(layer, {path}, false);
        return ok();
      },
      std::move(keep));
}

// JS thread: remove(layer, path) -> Promise<void>.
Napi::Value Shadow::Remove(const Napi::CallbackInfo& info) {
  std::string layer, path;
  if (!stringArg(info, 0, &layer)) return rejected(info.Env(), EINVAL, "remove: expected a layer name");
  if (!pathArg(info, 1, &path)) return rejectedPath(info.Env(), "remove: invalid path");
  return enqueue(info.Env(), [this, layer, path] {  // worker thread
    if (!live()) return notMounted();
    int e = ov_->remove(layer, path);
    if (e) return fail(e, "cannot remove " + path);
    layerChanged(layer, {path}, false);
    return ok();
  });
}

// JS thread: readFile(layer, path) -> Promise<Buffer>. The worker reads; the Buffer wraps the
// bytes it read (no copy). A file larger than kMaxReadBytes is refused with EFBIG before any of
// it is read (and again after, should it have grown meanwhile), so no read can need a Buffer
// the runtime cannot make.
Napi::Value Shadow::ReadFile(const Napi::CallbackInfo& info) {
  std::string layer, path;
  if (!stringArg(info, 0, &layer)) return rejected(info.Env(), EINVAL, "readFile: expected a layer name");
  if (!pathArg(info, 1, &path)) return rejectedPath(info.Env(), "readFile: invalid path");
  return enqueue(info.Env(), [this, layer, path] {  // worker thread
    if (!live()) return notMounted();
    auto tooLarge = [&path](uint64_t size) {
      return Outcome{EFBIG,
                     "cannot read " + path + ": it holds " + std::to_string(size) + " bytes, more than the " +
                         std::to_string(kMaxReadBytes) + " one read can return",
                     {}};
    };
    Attr a;
    Outcome st = onLayer(layer, [&](Layer* L) -> Outcome {
      int e = ov_->getattr(L, path, &a);
      return e ? fail(e, "cannot read " + path) : ok();
    });
    if (st.err) return st;
    if (a.type == FileType::Regular && a.size > kMaxReadBytes) return tooLarge(a.size);
    auto data = std::make_shared<std::string>();
    int e = ov_->readFile(layer, path, data.get());
    if (e) return fail(e, "cannot read " + path);
    if (data->size() > kMaxReadBytes) return tooLarge(data->size());
    return okValue([data, path](Napi::Env env) -> Napi::Value {  // JS thread
      return bufferOf(env, data.get(), path);
    });
  });
}

// JS thread: a Buffer that takes over `data`'s bytes (no copy), or an exception pending and an
// empty value. Not Napi::Buffer::NewOrCopy: when the runtime refuses an external buffer, Node
// has already run the finalizer (freeing the bytes and the finalizer's data) and
// node-addon-api frees that data again, a double free. Callers keep sizes within what every
// supported Node accepts; should the call fail anyway, the bytes are left to whoever may
// still hold them (a leak, never a double free) and the read is rejected.
Napi::Value Shadow::bufferOf(Napi::Env env, std::string* data, const std::string& path) {
  if (data->empty()) return Napi::Buffer<char>::New(env, 0);
  auto* owned = new std::string(std::move(*data));
  napi_value buf;
  napi_status s = napi_create_external_buffer(
      env, owned->size(), owned->data(),
      [](napi_env, void*, void* hint) { delete static_cast<std::string*>(hint); }, owned, &buf);
  if (s != napi_ok) {
    if (env.IsExceptionPending()) env.GetAndClearPendingException();
    errnoError(env, ENOMEM, "cannot read " + path + ": the runtime could not make a buffer of " +
                                std::to_string(owned->size()) + " bytes")
        .ThrowAsJavaScriptException();
    return Napi::Value();
  }
  return Napi::Value(env, buf);
}

// JS thread: a whole number argument of at most 2^53 (a byte offset or count), or false.
bool Shadow::offsetArg(const Napi::CallbackInfo& info, size_t i, uint64_t* out) {
  if (info.Length() <= i || !info[i].IsNumber()) return false;
  double d = info[i].As<Napi::Number>().DoubleValue();
  if (!(d >= 0) || d > 9007199254740992.0 || d != static_cast<double>(static_cast<uint64_t>(d))) return false;
  *out = static_cast<uint64_t>(d);
  return true;
}

// JS thread: readRange(layer, path, offset, length) -> Promise<{ data: Buffer, size }>: at most
// `length` (<= kMaxRangeBytes) bytes at `offset` of a regular file as the layer shows it, and
// the file's size. Files of any size can be read this way, a piece at a time.
Napi::Value Shadow::ReadRange(const Napi::CallbackInfo& info) {
  std::string layer, path;
  uint64_t offset = 0, length = 0;
  if (!stringArg(info, 0, &layer)) return rejected(info.Env(), EINVAL, "readRange: expected a layer name");
  if (!pathArg(info, 1, &path)) return rejectedPath(info.Env(), "readRange: invalid path");
  if (!offsetArg(info, 2, &offset) || !offsetArg(info, 3, &length) || length > kMaxRangeBytes)
    return rejected(info.Env(), EINVAL,
                    "readRange(layer, path, offset, length): offset and length are whole numbers, length at most " +
                        std::to_string(kMaxRangeBytes));
  return enqueue(info.Env(), [this, layer, path, offset, length] {  // worker thread
    if (!live()) return notMounted();
    auto data = std::make_shared<std::string>();
    uint64_t total = 0;
    int e = ov_->readRange(layer, path, offset, static_cast<size_t>(length), data.get(), &total);
    if (e) return fail(e, "cannot read " + path);
    return okValue([data, path, total](Napi::Env env) -> Napi::Value {  // JS thread
      Napi::Value buf = bufferOf(env, data.get(), path);
      if (buf.IsEmpty()) return buf;
      Napi::Object o = Napi::Object::New(env);
      o.Set("data", buf);
      o.Set("size", static_cast<double>(total));
      return o;
    });
  });
}

// JS thread: dataExtents(layer, path) -> Promise<{ size, extents: [offset, length][] }>: where a
// regular file as the layer shows it holds data (the rest reads as zeros: holes).
Napi::Value Shadow::DataExtents(const Napi::CallbackInfo& info) {
  std::string layer, path;
  if (!stringArg(info, 0, &layer)) return rejected(info.Env(), EINVAL, "dataExtents: expected a layer name");
  if (!pathArg(info, 1, &path)) return rejectedPath(info.Env(), "dataExtents: invalid path");
  return enqueue(info.Env(), [this, layer, path] {  // worker thread
    if (!live()) return notMounted();
    auto list = std::make_shared<std::vector<Extent>>();
    uint64_t total = 0;
    int e = ov_->dataExtents(layer, path, list.get(), &total);
    if (e) return fail(e, "cannot read " + path);
    return okValue([list, total](Napi::Env env) -> Napi::Value {  // JS thread
      Napi::Array a = Napi::Array::New(env, list->size());
      for (uint32_t i = 0; i < list->size(); ++i) {
        Napi::Array pair = Napi::Array::New(env, 2);
        pair.Set(0u, static_cast<double>((*list)[i].off));
        pair.Set(1u, static_cast<double>((*list)[i].len));
        a.Set(i, pair);
      }
      Napi::Object o = Napi::Object::New(env);
      o.Set("size", static_cast<double>(total));
      o.Set("extents", a);
      return o;
    });
  });
}

// JS thread: writeAt(layer, path, data: Buffer, offset) -> Promise<void>: writes `data` at
// `offset` into an existing regular file of the layer (copied up first if it is the folder's),
// growing it as needed; what lies between its old end and `offset` reads as zeros (a hole in
// a spilled file). The Buffer is kept alive and read in place by the worker.
Napi::Value Shadow::WriteAt(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string layer, path;
  uint64_t offset = 0;
  if (!stringArg(info, 0, &layer)) return rejected(env, EINVAL, "writeAt: expected a layer name");
  if (!pathArg(info, 1, &path)) return rejectedPath(env, "writeAt: invalid path");
  if (info.Length() < 4 || !info[2].IsBuffer() || !offsetArg(info, 3, &offset))
    return rejected(env, EINVAL, "writeAt(layer, path, buffer, offset)");
  auto buf = info[2].As<Napi::Buffer<char>>();
  const char* data = buf.Data();
  size_t size = buf.Length();
  std::vector<Napi::Reference<Napi::Value>> keep;
  keep.push_back(Napi::Persistent(info[2]));
  return enqueue(
      env,
      [this, layer, path, data, size, offset] {  // worker thread
        Outcome o = onLayer(layer, [&](Layer* L) {
          Handle* h = nullptr;
          Attr a;
          OpenIntent intent;
          intent.write = true;
          int e = ov_->open(L, path, intent, &h, &a);
          if (e) return fail(e, "cannot write " + path);
          e = ov_->write(h, data, size, offset);
          ov_->release(h);
          return e ? fail(e, "cannot write " + path) : ok();
        });
        if (!o.err) layerChanged(layer, {path}, false);
        return o;
      },
      std::move(keep));
}

// JS thread: truncate(layer, path, size) -> Promise<void>: sets the size of a regular file of
// the layer (growing it leaves a hole where the content is spilled).
Napi::Value Shadow::Truncate(const Napi::CallbackInfo& info) {
  std::string layer, path;
  uint64_t size = 0;
  if (!stringArg(info, 0, &layer)) return rejected(info.Env(), EINVAL, "truncate: expected a layer name");
  if (!pathArg(info, 1, &path)) return rejectedPath(info.Env(), "truncate: invalid path");
  if (!offsetArg(info, 2, &size)) return rejected(info.Env(), EINVAL, "truncate(layer, path, size)");
  return enqueue(info.Env(), [this, layer, path, size] {  // worker thread
    Outcome o = onLayer(layer, [&](Layer* L) {
      Attr v, out;
      v.size = size;
      int e = ov_->setattr(L, path, nullptr, kSetSize, v, &out);
      return e ? fail(e, "cannot truncate " + path) : ok();
    });
    if (!o.err) layerChanged(layer, {path}, false);
    return o;
  });
}

Napi::Object Shadow::attrObject(Napi::Env env, const Attr& a) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("type", typeName(a.type));
  o.Set("mode", static_cast<double>(a.perm & 07777));
  o.Set("size", static_cast<double>(a.size));
  o.Set("mtimeMs", static_cast<double>(a.mtime.sec) * 1e3 + static_cast<double>(a.mtime.nsec) / 1e6);
  o.Set("ino", static_cast<double>(a.ino));
  o.Set("stamp", Overlay::stampOf(a));
  return o;
}

// JS thread: stat(layer, path) -> Promise<{ type, mode, size, mtimeMs, ino, stamp }> (symlinks
// not followed; stamp: Overlay::stampOf).
Napi::Value Shadow::Stat(const Napi::CallbackInfo& info) {
  std::string layer, path;
  if (!stringArg(info, 0, &layer)) return rejected(info.Env(), EINVAL, "stat: expected a layer name");
  if (!pathArg(info, 1, &path)) return rejectedPath(info.Env(), "stat: invalid path");
  return enqueue(info.Env(), [this, layer, path] {  // worker thread
    return onLayer(layer, [&](Layer* L) {
      Attr a;
      int e = ov_->getattr(L, path, &a);
      if (e) return fail(e, "cannot stat " + (path.empty() ? std::string(".") : path));
      return okValue([a](Napi::Env env) -> Napi::Value { return attrObject(env, a); });
    });
  });
}

// JS thread: readdir(layer, path) -> Promise<{ name, type }[]> (no "." or "..").
Napi::Value Shadow::Readdir(const Napi::CallbackInfo& info) {
  std::string layer, path;
  if (!stringArg(info, 0, &layer)) return rejected(info.Env(), EINVAL, "readdir: expected a layer name");
  if (!pathArg(info, 1, &path)) return rejectedPath(info.Env(), "readdir: invalid path");
  return enqueue(info.Env(), [this, layer, path] {  // worker thread
    return onLayer(layer, [&](Layer* L) {
      auto list = std::make_shared<std::vector<DirEntry>>();
      int e = ov_->readdir(L, path, list.get());
      if (e) return fail(e, "cannot list " + (path.empty() ? std::string(".") : path));
      return okValue([list](Napi::Env env) -> Napi::Value {  // JS thread
        Napi::Array a = Napi::Array::New(env);
        uint32_t i = 0;
        for (const DirEntry& d : *list) {
          if (d.name == "." || d.name == "..") continue;
          Napi::Object o = Napi::Object::New(env);
          o.Set("name", d.name);
          o.Set("type", typeName(d.type));
          a.Set(i++, o);
        }
        return a;
      });
    });
  });
}

// JS thread: readlink(layer, path) -> Promise<string>.
Napi::Value Shadow::Readlink(const Napi::CallbackInfo& info) {
  std::string layer, path;
  if (!stringArg(info, 0, &layer)) return rejected(info.Env(), EINVAL, "readlink: expected a layer name");
  if (!pathArg(info, 1, &path)) return rejectedPath(info.Env(), "readlink: invalid path");
  return enqueue(info.Env(), [this, layer, path] {  // worker thread
    return onLayer(layer, [&](Layer* L) {
      auto target = std::make_shared<std::string>();
      int e = ov_->readlink(L, path, target.get());
      if (e) return fail(e, "cannot read the link " + path);
      return okValue([target](Napi::Env env) -> Napi::Value { return Napi::String::New(env, *target); });
    });
  });
}

// JS thread: symlink(layer, target, path, uid, gid) -> Promise<void>.
Napi::Value Shadow::Symlink(const Napi::CallbackInfo& info) {
  std::string layer, target, path;
  if (!stringArg(info, 0, &layer) || !stringArg(info, 1, &target) || info.Length() < 5 ||
      !info[3].IsNumber() || !info[4].IsNumber())
    return rejected(info.Env(), EINVAL, "symlink(layer, target, path, uid, gid)");
  if (!pathArg(info, 2, &path)) return rejectedPath(info.Env(), "symlink: invalid path");
  Caller who{info[3].As<Napi::Number>().Uint32Value(), info[4].As<Napi::Number>().Uint32Value()};
  return enqueue(info.Env(), [this, layer, target, path, who] {  // worker thread
    Outcome o = onLayer(layer, [&](Layer* L) {
      Attr a;
      int e = ov_->symlink(L, target, path, who, &a);
      return e ? fail(e, "cannot make the link " + path) : ok();
    });
    if (!o.err) layerChanged(layer, {path}, false);
    return o;
  });
}

// JS thread: mkdir(layer, path, mode, uid, gid) -> Promise<void>.
Napi::Value Shadow::Mkdir(const Napi::CallbackInfo& info) {
  std::string layer, path;
  if (!stringArg(info, 0, &layer) || info.Length() < 5 || !info[2].IsNumber() ||
      !info[3].IsNumber() || !info[4].IsNumber())
    return rejected(info.Env(), EINVAL, "mkdir(layer, path, mode, uid, gid)");
  if (!pathArg(info, 1, &path)) return rejectedPath(info.Env(), "mkdir: invalid path");
  uint32_t mode = info[2].As<Napi::Number>().Uint32Value() & 07777;
  Caller who{info[3].As<Napi::Number>().Uint32Value(), info[4].As<Napi::Number>().Uint32Value()};
  return enqueue(info.Env(), [this, layer, path, mode, who] {  // worker thread
    Outcome o = onLayer(layer, [&](Layer* L) {
      Attr a;
      int e = ov_->mkdir(L, path, mode, who, &a);
      return e ? fail(e, "cannot make the directory " + path) : ok();
    });
    if (!o.err) layerChanged(layer, {path}, false);
    return o;
  });
}

// JS thread: chmod(layer, path, mode) -> Promise<void>.
Napi::Value Shadow::Chmod(const Napi::CallbackInfo& info) {
  std::string layer, path;
  if (!stringArg(info, 0, &layer) || info.Length() < 3 || !info[2].IsNumber())
    return rejected(info.Env(), EINVAL, "chmod(layer, path, mode)");
  if (!pathArg(info, 1, &path)) return rejectedPath(info.Env(), "chmod: invalid path");
  uint32_t mode = info[2].As<Napi::Number>().Uint32Value() & 07777;
  return enqueue(info.Env(), [this, layer, path, mode] {  // worker thread
    Outcome o = onLayer(layer, [&](Layer* L) {
      Attr values, out;
      values.perm = mode;
      int e = ov_->setattr(L, path, nullptr, kSetMode, values, &out);
      return e ? fail(e, "cannot change the mode of " + path) : ok();
    });
    if (!o.err) layerChanged(layer, {path}, false);
    return o;
  });
}

// JS thread: revert(layer, path, through?, stamp?) -> Promise<void>: with `stamp` (stat's), only
// if the layer's object there is still the one stamped, else EAGAIN. The folder shows through at `path`
// again (EXDEV under a deleted, opaque or moved directory of the layer; with `through`, only
// under a moved one: Overlay::revertThrough).
Napi::Value Shadow::Revert(const Napi::CallbackInfo& info) {
  std::string layer, path;
  if (!stringArg(info, 0, &layer)) return rejected(info.Env(), EINVAL, "revert: expected a layer name");
  if (!pathArg(info, 1, &path)) return rejectedPath(info.Env(), "revert: invalid path");
  const bool through = info.Length() > 2 && info[2].IsBoolean() && info[2].As<Napi::Boolean>().Value();
  std::string stamp;
  if (info.Length() > 3 && !info[3].IsUndefined() && !stringArg(info, 3, &stamp))
    return rejected(info.Env(), EINVAL, "revert: the stamp must be a string");
  return enqueue(info.Env(), [this, layer, path, through, stamp] {  // worker thread
    if (!live()) return notMounted();
    bool wasDir = false;
    int e = through ? ov_->revertThrough(layer, path, &wasDir)
                    : ov_->revert(layer, path, &wasDir, stamp.empty() ? nullptr : &stamp);
    if (e) return fail(e, "cannot give " + path + " back to the folder");
    // Through: directories above may have come back (deleted ones) or changed their listing.
    std::vector<std::string> paths{path};
    if (through)
      for (size_t at = path.find('/'); at != std::string::npos; at = path.find('/', at + 1))
        paths.push_back(path.substr(0, at));
    layerChanged(layer, paths, wasDir);
    return ok();
  });
}

}  // namespace shadowfs
