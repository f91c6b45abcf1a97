// The Shadow's audit trails (shadow_object.h; core/audit.h): a layer's record read whole, put
// back (a checkpoint restored, a daemon that came back), and the limits every layer's record
// keeps within. Queries (since, path, limit) are TypeScript's (src/shadow/audit.ts).
#include <cmath>
#include <memory>
#include <string>

#include "shadow_object.h"

namespace shadowfs {

namespace {

// A whole non-negative number of a JS value (else `fallback`).
uint64_t countOf(const Napi::Value& v, uint64_t fallback) {
  if (!v.IsNumber()) return fallback;
  const double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 0) || d > 9007199254740991.0 || std::floor(d) != d) return fallback;
  return static_cast<uint64_t>(d);
}

std::string stringOf(const Napi::Object& o, const char* key) {
  Napi::Value v = o.Get(key);
  return v.IsString() ? v.As<Napi::String>().Utf8Value() : std::string();
}

}  // namespace

// JS thread: auditRead(layer) -> Promise<{ entries, dropped, nextSeq, maxEntries, maxBytes }>;
// each entry { seq, timeMs, op, write, pid, comm, bytes, path, to }.
Napi::Value Shadow::AuditRead(const Napi::CallbackInfo& info) {
  std::string layer;
  if (!stringArg(info, 0, &layer)) return rejected(info.Env(), EINVAL, "auditRead(layer)");
  return enqueue(info.Env(), [this, layer] {  // worker thread
    if (!live()) return notMounted();
    auto s = std::make_shared<AuditSnapshot>();
    if (int e = ov_->auditSnapshot(layer, s.get())) return fail(e, "no layer " + layer);
    return okValue([s](Napi::Env env) -> Napi::Value {  // JS thread
      Napi::Array list = Napi::Array::New(env, s->entries.size());
      for (size_t i = 0; i < s->entries.size(); ++i) {
        const AuditEntry& e = s->entries[i];
        Napi::Object o = Napi::Object::New(env);
        o.Set("seq", static_cast<double>(e.seq));
        o.Set("timeMs", static_cast<double>(e.timeMs));
        o.Set("op", auditOpName(e.op));
        o.Set("write", e.write);
        o.Set("pid", static_cast<double>(e.pid));
        o.Set("comm", e.comm);
        o.Set("bytes", static_cast<double>(e.bytes));
        o.Set("path", e.path);
        o.Set("to", e.to);
        list.Set(static_cast<uint32_t>(i), o);
      }
      Napi::Object out = Napi::Object::New(env);
      out.Set("entries", list);
      out.Set("dropped", static_cast<double>(s->dropped));
      out.Set("nextSeq", static_cast<double>(s->nextSeq));
      out.Set("maxEntries", static_cast<double>(s->limits.maxEntries));
      out.Set("maxBytes", static_cast<double>(s->limits.maxBytes));
      return out;
    });
  });
}

// JS thread: auditLoad(layer, { entries, dropped, nextSeq }) -> Promise<void>: the layer's record
// becomes this one (entries of an unknown op are left out; TypeScript checked the shape).
Napi::Value Shadow::AuditLoad(const Napi::CallbackInfo& info) {
  std::string layer;
  if (!stringArg(info, 0, &layer) || info.Length() < 2 || !info[1].IsObject())
    return rejected(info.Env(), EINVAL, "auditLoad(layer, record)");
  Napi::Object rec = info[1].As<Napi::Object>();
  auto s = std::make_shared<AuditSnapshot>();
  s->dropped = countOf(rec.Get("dropped"), 0);
  s->nextSeq = countOf(rec.Get("nextSeq"), 1);
  Napi::Value ev = rec.Get("entries");
  if (!ev.IsArray()) return rejected(info.Env(), EINVAL, "auditLoad(layer, record): entries");
  Napi::Array arr = ev.As<Napi::Array>();
  for (uint32_t i = 0; i < arr.Length(); ++i) {
    Napi::Value v = arr.Get(i);
    if (!v.IsObject()) continue;
    Napi::Object o = v.As<Napi::Object>();
    AuditEntry e;
    if (!auditOpFromName(stringOf(o, "op"), &e.op)) continue;
    e.seq = countOf(o.Get("seq"), 0);
    e.timeMs = static_cast<int64_t>(countOf(o.Get("timeMs"), 0));
    Napi::Value w = o.Get("write");
    e.write = w.IsBoolean() && w.As<Napi::Boolean>().Value();
    e.pid = static_cast<uint32_t>(countOf(o.Get("pid"), 0) & 0xffffffffu);
    e.bytes = countOf(o.Get("bytes"), 0);
    e.comm = stringOf(o, "comm");
    e.path = stringOf(o, "path");
    e.to = stringOf(o, "to");
    s->entries.push_back(std::move(e));
  }
  return enqueue(info.Env(), [this, layer, s] {  // worker thread
    if (!live()) return notMounted();
    if (int e = ov_->auditLoad(layer, *s)) return fail(e, "no layer " + layer);
    return ok();
  });
}

// JS thread: setAuditLimits(maxEntries, maxBytes) -> Promise<void>, for every layer.
Napi::Value Shadow::SetAuditLimits(const Napi::CallbackInfo& info) {
  if (info.Length() < 2 || !info[0].IsNumber() || !info[1].IsNumber())
    return rejected(info.Env(), EINVAL, "setAuditLimits(maxEntries, maxBytes)");
  AuditLimits l;
  l.maxEntries = static_cast<size_t>(countOf(info[0], l.maxEntries));
  l.maxBytes = static_cast<size_t>(countOf(info[1], l.maxBytes));
  return enqueue(info.Env(), [this, l] {  // worker thread
    if (!live()) return notMounted();
    ov_->setAuditLimits(l);
    return ok();
  });
}

}  // namespace shadowfs
