// The agent file tools of the Shadow (shadow_object.h): writeFile and editFile, each one job and
// one Overlay::updateFile, with the caller's `expect` checked inside it (file_tools.{h,cc}
// decide; this file takes the arguments and builds the results).
#include "shadow_object.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace shadowfs {

// --- The agent file tools, each one job and one Overlay::updateFile: atomic with respect
// to every other change of that file (API jobs, and programs writing through the mounts). ---

// JS thread: an `expect` argument ({ exists?, size?, mtimeMs?, hash? } or null/undefined).
bool Shadow::expectArg(const Napi::CallbackInfo& info, size_t i, Expect* out) {
  if (info.Length() <= i || info[i].IsNull() || info[i].IsUndefined()) return true;
  if (!info[i].IsObject()) return false;
  Napi::Object o = info[i].As<Napi::Object>();
  Napi::Value v = o.Get("exists");
  if (v.IsBoolean()) out->exists = v.As<Napi::Boolean>().Value();
  else if (!v.IsUndefined()) return false;
  for (auto [key, field] : {std::pair<const char*, std::optional<double>*>{"size", &out->size},
                            {"mtimeMs", &out->mtimeMs}}) {
    v = o.Get(key);
    if (v.IsNumber()) *field = v.As<Napi::Number>().DoubleValue();
    else if (!v.IsUndefined()) return false;
  }
  v = o.Get("hash");
  if (v.IsString()) out->hash = v.As<Napi::String>().Utf8Value();
  else if (!v.IsUndefined()) return false;
  return true;
}

Shadow::FileAfter Shadow::afterOf(const Attr& a, const std::string* content) {
  return FileAfter{static_cast<double>(a.size), mtimeMsOf(a), static_cast<double>(a.perm & 07777),
                   content ? hashHex(*content) : std::string()};
}

void Shadow::setAfter(Napi::Object o, const FileAfter& f) {
  o.Set("size", f.size);
  o.Set("mtimeMs", f.mtimeMs);
  o.Set("mode", f.mode);
  if (!f.hash.empty()) o.Set("hash", f.hash);
}

// JS thread: writeFile(layer, path, data: Buffer, mode: number | null, uid, gid, expect?) ->
// Promise<{ status: 'written', created, size, mtimeMs, mode, hash } |
//         { status: 'conflict', reason, exists, size?, mtimeMs?, mode?, hash? }>.
// A whole regular file, written with its mode in the same step: a new file gets `mode` (or
// 0644), an existing one keeps its own unless `mode` is given. With `expect`, only when the
// file is still what the caller saw (else 'conflict', nothing written). Parents are made.
Napi::Value Shadow::WriteFile(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string layer, path;
  Expect expect;
  if (!stringArg(info, 0, &layer)) return rejected(env, EINVAL, "writeFile: expected a layer name");
  if (!pathArg(info, 1, &path)) return rejectedPath(env, "writeFile: invalid path");
  if (info.Length() < 6 || !info[2].IsBuffer() || !(info[3].IsNumber() || info[3].IsNull()) ||
      !info[4].IsNumber() || !info[5].IsNumber() || !expectArg(info, 6, &expect))
    return rejected(env, EINVAL, "writeFile(layer, path, buffer, mode | null, uid, gid, expect?)");
  auto buf = info[2].As<Napi::Buffer<char>>();
  const char* data = buf.Data();
  size_t size = buf.Length();
  std::optional<uint32_t> mode;
  if (info[3].IsNumber()) mode = info[3].As<Napi::Number>().Uint32Value() & 07777;
  Caller who{info[4].As<Napi::Number>().Uint32Value(), info[5].As<Napi::Number>().Uint32Value()};
  std::vector<Napi::Reference<Napi::Value>> keep;
  keep.push_back(Napi::Persistent(info[2]));
  return enqueue(
      env,
      [this, layer, path, data, size, mode, who, expect] {  // worker thread
        if (!live()) return notMounted();
        std::string conflict;
        bool existed = false;
        FileAfter seen;
        FileUpdate u;
        u.mayCreate = true;
        u.readContent = expect.needsContent();
        u.change = [&](const FileNow& now, FileChange* ch) {  // the file's content lock held
          existed = now.exists;
          conflict.clear();
          if (!meets(expect, now, &conflict)) {
            if (now.exists) seen = afterOf(now.attr, now.content);
            return;
          }
          ch->write = true;
          ch->content.assign(data, size);
          ch->perm = mode;
        };
        FileUpdateResult r;
        int e = ov_->updateFile(layer, path, u, who, &r);
        if (e) return fail(e, "cannot write " + path);
        if (!r.written)
          return okValue([conflict, existed, seen](Napi::Env env) -> Napi::Value {  // JS thread
            Napi::Object o = Napi::Object::New(env);
            o.Set("status", "conflict");
            o.Set("reason", conflict);
            o.Set("exists", existed);
            if (existed) setAfter(o, seen);
            return o;
          });
        layerChanged(layer, {path}, false);
        FileAfter after = afterOf(r.attr, nullptr);
        after.hash = hashHex(std::string(data, size));
        bool created = r.created;
        return okValue([after, created](Napi::Env env) -> Napi::Value {  // JS thread
          Napi::Object o = Napi::Object::New(env);
          o.Set("status", "written");
          o.Set("created", created);
          setAfter(o, after);
          return o;
        });
      },
      std::move(keep));
}

// JS thread: editFile(layer, path, edits: { oldText, newText, replaceAll? }[], maxBytes,
// expect?) -> Promise<{ status, ... }>: the edits applied one after the other to the file's
// text in one step, or nothing written and a status that says why: 'written' (replacements:
// number[] per edit, size, mtimeMs, mode, hash), 'no-match' (edit), 'ambiguous' (edit, count,
// lines), 'binary', 'not-utf8', 'too-large' (size), 'conflict' (reason, as writeFile).
Napi::Value Shadow::EditFile(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string layer, path;
  uint64_t maxBytes = 0;
  Expect expect;
  const char* usage = "editFile(layer, path, [{ oldText, newText, replaceAll? }], maxBytes, expect?)";
  if (!stringArg(info, 0, &layer)) return rejected(env, EINVAL, "editFile: expected a layer name");
  if (!pathArg(info, 1, &path)) return rejectedPath(env, "editFile: invalid path");
  if (info.Length() < 4 || !info[2].IsArray() || !offsetArg(info, 3, &maxBytes) || !expectArg(info, 4, &expect))
    return rejected(env, EINVAL, usage);
  std::vector<TextEdit> edits;
  Napi::Array a = info[2].As<Napi::Array>();
  for (uint32_t i = 0; i < a.Length(); ++i) {
    Napi::Value v = a.Get(i);
    if (!v.IsObject()) return rejected(env, EINVAL, usage);
    Napi::Object o = v.As<Napi::Object>();
    Napi::Value ot = o.Get("oldText"), nt = o.Get("newText"), all = o.Get("replaceAll");
    if (!ot.IsString() || !nt.IsString() || !(all.IsBoolean() || all.IsUndefined()))
      return rejected(env, EINVAL, usage);
    TextEdit e{ot.As<Napi::String>().Utf8Value(), nt.As<Napi::String>().Utf8Value(),
               all.IsBoolean() && all.As<Napi::Boolean>().Value()};
    if (e.oldText.empty()) return rejected(env, EINVAL, "editFile: an edit's oldText must not be empty");
    edits.push_back(std::move(e));
  }
  if (edits.empty()) return rejected(env, EINVAL, "editFile: no edits");
  Caller who{0, 0};  // never creates
  return enqueue(env, [this, layer, path, edits = std::move(edits), maxBytes, expect, who] {  // worker thread
    if (!live()) return notMounted();
    EditResult er;
    std::string conflict, newHash;
    FileAfter seen;
    FileUpdate u;
    u.readContent = true;
    u.maxRead = maxBytes;
    u.change = [&](const FileNow& now, FileChange* ch) {  // the file's content lock held
      conflict.clear();
      seen = afterOf(now.attr, nullptr);
      if (!meets(expect, now, &conflict)) {
        seen.hash = hashHex(*now.content);
        return;
      }
      er = applyEdits(*now.content, edits, &ch->content);
      ch->write = er.status == EditResult::Ok;
      if (ch->write) newHash = hashHex(ch->content);
    };
    FileUpdateResult r;
    int e = ov_->updateFile(layer, path, u, who, &r);
    if (e == EFBIG) {
      double size = static_cast<double>(r.attr.size);
      return okValue([size](Napi::Env env) -> Napi::Value {  // JS thread
        Napi::Object o = Napi::Object::New(env);
        o.Set("status", "too-large");
        o.Set("size", size);
        return o;
      });
    }
    if (e) return fail(e, "cannot edit " + path);
    if (r.written) {
      layerChanged(layer, {path}, false);
      FileAfter after = afterOf(r.attr, nullptr);
      after.hash = newHash;
      return okValue([after, er](Napi::Env env) -> Napi::Value {  // JS thread
        Napi::Object o = Napi::Object::New(env);
        o.Set("status", "written");
        Napi::Array reps = Napi::Array::New(env, er.replacements.size());
        for (uint32_t i = 0; i < er.replacements.size(); ++i) reps.Set(i, er.replacements[i]);
        o.Set("replacements", reps);
        setAfter(o, after);
        return o;
      });
    }
    return okValue([er, conflict, seen](Napi::Env env) -> Napi::Value {  // JS thread
      Napi::Object o = Napi::Object::New(env);
      if (!conflict.empty()) {
        o.Set("status", "conflict");
        o.Set("reason", conflict);
        o.Set("exists", true);
        setAfter(o, seen);
        return o;
      }
      switch (er.status) {
        case EditResult::NoMatch: o.Set("status", "no-match"); break;
        case EditResult::Ambiguous: o.Set("status", "ambiguous"); break;
        case EditResult::Binary: o.Set("status", "binary"); break;
        case EditResult::NotUtf8: o.Set("status", "not-utf8"); break;
        default: o.Set("status", "unchanged"); break;
      }
      o.Set("edit", static_cast<double>(er.edit));
      o.Set("count", static_cast<double>(er.count));
      Napi::Array lines = Napi::Array::New(env, er.lines.size());
      for (uint32_t i = 0; i < er.lines.size(); ++i) lines.Set(i, er.lines[i]);
      o.Set("lines", lines);
      return o;
    });
  });
}

}  // namespace shadowfs
