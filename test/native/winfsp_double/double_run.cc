// The scenario runner: the double's own export, WinFspDoubleRun, and the environment route.
//
//   NTSTATUS WinFspDoubleRun(FSP_FILE_SYSTEM *fs, PCWSTR scenarioFile, PCWSTR reportFile)
//     runs the scenario file (UTF-8 text, one step a line) against a file system created in this
//     process through FspFileSystemCreate and started with FspFileSystemStartDispatcher, and
//     writes a JSON report; returns STATUS_SUCCESS when every step matched.
//   WINFSP_DOUBLE_SCENARIO=<file> WINFSP_DOUBLE_REPORT=<file>
//     the same, started on its own thread once a file system has both a dispatcher and a mount
//     point; WINFSP_DOUBLE_DONE=<file> is created when the report is written.
//
// Scenario language (test/native/winfsp_double/scenarios/*.txt has examples):
//   scenario NAME                      starts a scenario; handles left open are closed at its end
//   open H PATH [disp=open|create|open_if|overwrite|overwrite_if|supersede] [access=LIST]
//        [share=rwd|none] [opts=dir,nondir,doc,reparse] [attrs=ro,hidden,system,archive]
//        [sddl=SDDL] [integrity=low] [expect=STATUS] [info=created|opened|overwritten|superseded]
//        (integrity=low: the opener's token is Low integrity; see runAccessCheck in double_dll.cc)
//   cleanup H | close H (cleanup if not yet, then close) | closeall
//   write H OFFSET TEXT | read H OFFSET LEN [data=TEXT] | truncate H SIZE
//   getinfo H [attrs=LIST] [noattrs=LIST] [size=N] [cached=yes|no] [created_after=YEAR]
//        [created=FILETIME]   (FILETIME: 100 ns units since 1601, as a decimal number)
//   setattr H [attrs=LIST] [created=FILETIME]   (SetFileInformationByHandle(FileBasicInfo);
//        what is not given is left as it is)
//   mapimage H | pagein H OFFSET LEN [data=TEXT] | unmapimage H   (an image section made from H:
//        see "Image sections" below)
//   delete H [undelete] [posix|classic] [ignore_ro]     (default: DeleteFileW's Ex-then-classic)
//   rename H NEWPATH [replace] [posix]
//   list H [pattern=P] [bufsize=N] [names=a,b,c|none] [cached=yes|no]   (. and .. not compared)
//        [attrsof=NAME:LIST] [noattrsof=NAME:LIST]   (the entry NAME has every / none of LIST)
//   getsec H [sddl~=TEXT] [lacks=SID,SID] | symlink PATH TARGET [relative] [dir] | junction PATH TARGET
//   notify PATH filter=N action=N | wait (for the notifications queued so far to be processed)
//   waitfor FILE [timeout=MS] | signal FILE   (host files: a meeting point with the program
//        hosting the file system, e.g. a test that writes through shadowfs's API between steps)
//   Every step takes expect=STATUS (default STATUS_SUCCESS): the status the real driver and DLL
//   give the program for a file system that keeps WinFsp's contracts.
//
// Image sections (what NtCreateSection(SEC_IMAGE) on a file of the volume leads to, from
// Microsoft's documentation of sections and file objects and WinFsp's driver, which has no
// special path for them: a page-in is a paging Read through the file object like any other).
// `mapimage H` needs H to have been opened with FILE_EXECUTE (ACCESS_DENIED otherwise, as
// NtCreateSection answers) and makes a section from H's file object: the section holds a
// reference to it, so `close H` (CloseHandle) brings the Cleanup at once but the Close only at
// `unmapimage H` (or the scenario's end); meanwhile `pagein H` reads through it with H's file
// system context, without an access check, as the memory manager's page-ins do at any time while
// the program runs. While the section exists the driver refuses write-opens and deletes of the
// file (MmFlushImageSection fails). Not modelled: the memory manager's caching of pages (a page
// read once is not read again until it is trimmed: here every pagein reads), the section's size
// taken from the file size at creation, and sections shared between file objects.
#include "double_driver.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

using namespace wfd;

namespace {
std::mutex reportLock;
std::vector<std::string> *stepCalls = nullptr;
std::vector<std::string> *stepProblems = nullptr;

std::string jsonString(const std::string &s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += (char)c;
    else if (c < 0x20) {
      char b[8];
      snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else o += (char)c;
  }
  return o + "\"";
}

#define S(x) {x, #x}
const struct { NTSTATUS s; const char *n; } statusNames[] = {
    S(STATUS_SUCCESS), S(STATUS_PENDING), S(STATUS_REPARSE), S(STATUS_BUFFER_OVERFLOW), S(STATUS_NO_MORE_FILES),
    S(STATUS_ACCESS_DENIED), S(STATUS_OBJECT_NAME_NOT_FOUND), S(STATUS_OBJECT_PATH_NOT_FOUND),
    S(STATUS_OBJECT_NAME_COLLISION), S(STATUS_OBJECT_NAME_INVALID), S(STATUS_SHARING_VIOLATION),
    S(STATUS_DELETE_PENDING), S(STATUS_CANNOT_DELETE), S(STATUS_DIRECTORY_NOT_EMPTY), S(STATUS_NOT_A_DIRECTORY),
    S(STATUS_FILE_IS_A_DIRECTORY), S(STATUS_INVALID_PARAMETER), S(STATUS_NO_SUCH_FILE), S(STATUS_END_OF_FILE),
    S(STATUS_INVALID_DEVICE_REQUEST), S(STATUS_NOT_IMPLEMENTED), S(STATUS_INTERNAL_ERROR), S(STATUS_FILE_DELETED),
    S(STATUS_NOT_SUPPORTED), S(STATUS_INVALID_SECURITY_DESCR), S(STATUS_REPARSE_POINT_NOT_RESOLVED),
    S(STATUS_NOT_A_REPARSE_POINT), S(STATUS_IO_REPARSE_TAG_MISMATCH), S(STATUS_IO_REPARSE_DATA_INVALID),
    S(STATUS_CANCELLED), S(STATUS_CANT_WAIT), S(STATUS_BUFFER_TOO_SMALL), S(STATUS_INSUFFICIENT_RESOURCES),
    S(STATUS_DISK_FULL), S(STATUS_MEDIA_WRITE_PROTECTED), S(STATUS_UNSUCCESSFUL), S(STATUS_INVALID_HANDLE),
    S(STATUS_REPARSE_ATTRIBUTE_CONFLICT), S(STATUS_NETWORK_ACCESS_DENIED), S(STATUS_PRIVILEGE_NOT_HELD),
};
#undef S

struct Step {
  int line;
  std::string text;
  std::string verdict;  // JSON
};

std::vector<std::string> tokenize(const std::string &line) {
  std::vector<std::string> t;
  std::string cur;
  bool q = false, has = false;
  for (char c : line) {
    if (c == '"') { q = !q; has = true; continue; }
    if (!q && (c == ' ' || c == '\t')) {
      if (has) t.push_back(cur), cur.clear(), has = false;
      continue;
    }
    cur += c;
    has = true;
  }
  if (has) t.push_back(cur);
  return t;
}

UINT32 parseAccess(const std::string &s) {
  if (s.rfind("0x", 0) == 0) return (UINT32)strtoul(s.c_str(), nullptr, 16);
  UINT32 a = 0;
  std::stringstream ss(s);
  std::string p;
  while (std::getline(ss, p, ',')) {
    if (p == "r") a |= FILE_GENERIC_READ;
    else if (p == "w") a |= FILE_GENERIC_WRITE;
    else if (p == "rw") a |= FILE_GENERIC_READ | FILE_GENERIC_WRITE;
    else if (p == "d" || p == "delete") a |= DELETE;
    else if (p == "attr") a |= FILE_READ_ATTRIBUTES;
    else if (p == "wattr") a |= FILE_WRITE_ATTRIBUTES;
    else if (p == "list") a |= FILE_LIST_DIRECTORY | FILE_READ_ATTRIBUTES | SYNCHRONIZE;
    else if (p == "readctl") a |= READ_CONTROL;
    else if (p == "max") a |= MAXIMUM_ALLOWED;
    else if (p == "all") a |= FILE_ALL_ACCESS;
    else if (p == "exec") a |= FILE_GENERIC_EXECUTE;
  }
  return a | SYNCHRONIZE;
}
UINT32 parseAttrs(const std::string &s) {
  UINT32 a = 0;
  std::stringstream ss(s);
  std::string p;
  while (std::getline(ss, p, ',')) {
    if (p == "ro" || p == "readonly") a |= FILE_ATTRIBUTE_READONLY;
    else if (p == "hidden") a |= FILE_ATTRIBUTE_HIDDEN;
    else if (p == "system") a |= FILE_ATTRIBUTE_SYSTEM;
    else if (p == "archive") a |= FILE_ATTRIBUTE_ARCHIVE;
    else if (p == "dir") a |= FILE_ATTRIBUTE_DIRECTORY;
    else if (p == "reparse") a |= FILE_ATTRIBUTE_REPARSE_POINT;
    else if (p == "normal") a |= FILE_ATTRIBUTE_NORMAL;
  }
  return a;
}

std::vector<UINT8> makeLink(ULONG tag, const std::wstring &target, ULONG flags) {
  size_t nameBytes = target.size() * sizeof(WCHAR);
  size_t pathOff = tag == IO_REPARSE_TAG_SYMLINK_ ? offsetof(ReparseData, SymbolicLink.PathBuffer)
                                                   : offsetof(ReparseData, MountPoint.PathBuffer);
  std::vector<UINT8> b(pathOff + 2 * nameBytes + 2 * sizeof(WCHAR), 0);
  auto *rd = (ReparseData *)b.data();
  rd->ReparseTag = tag;
  rd->ReparseDataLength = (USHORT)(b.size() - 8);
  WCHAR *path = (WCHAR *)(b.data() + pathOff);
  auto &hdr = rd->SymbolicLink;  // both forms start with the four name fields
  hdr.SubstituteNameOffset = 0;
  hdr.SubstituteNameLength = (USHORT)nameBytes;
  hdr.PrintNameOffset = (USHORT)(nameBytes + sizeof(WCHAR));
  hdr.PrintNameLength = (USHORT)nameBytes;
  if (tag == IO_REPARSE_TAG_SYMLINK_) rd->SymbolicLink.Flags = flags;
  memcpy(path, target.data(), nameBytes);
  memcpy(path + target.size() + 1, target.data(), nameBytes);
  return b;
}

struct Runner {
  Volume *v;
  std::map<std::string, Handle *> handles;
  std::map<std::string, Handle *> sectionsOnly;  // closed by the program, still held by a section
  std::vector<std::string> scenariosJson;
  std::string curName;
  std::vector<std::string> curSteps;
  bool curOk = true;
  int passed = 0, failed = 0;

  void unmapAll(Handle *h) {
    std::lock_guard<std::mutex> g(v->lock);
    h->node->mappedImage -= h->sections;
    h->sections = 0;
  }
  void closeAll() {
    for (auto &kv : sectionsOnly) {
      unmapAll(kv.second);
      ioClose(v, kv.second);
      delete kv.second;
    }
    sectionsOnly.clear();
    for (auto &kv : handles) {
      unmapAll(kv.second);
      ioCleanup(v, kv.second);
      ioClose(v, kv.second);
      delete kv.second;
    }
    handles.clear();
  }
  void endScenario() {
    if (curName.empty()) return;
    std::vector<std::string> calls, problems;
    {
      std::lock_guard<std::mutex> g(reportLock);
      stepCalls = &calls;
      stepProblems = &problems;
    }
    closeAll();
    {
      std::lock_guard<std::mutex> g(reportLock);
      stepCalls = stepProblems = nullptr;
    }
    std::string s = "{\"name\":" + jsonString(curName) + ",\"passed\":" + (curOk ? "true" : "false") + ",\"steps\":[";
    for (size_t i = 0; i < curSteps.size(); i++) s += (i ? "," : "") + curSteps[i];
    s += "]}";
    scenariosJson.push_back(s);
    (curOk ? passed : failed)++;
    curName.clear();
    curSteps.clear();
    curOk = true;
  }

  void step(int lineNo, const std::string &line) {
    auto t = tokenize(line);
    if (t.empty() || t[0][0] == '#') return;
    if (t[0] == "scenario") {
      endScenario();
      curName = t.size() > 1 ? t[1] : "unnamed";
      return;
    }
    std::map<std::string, std::string> kv;
    std::vector<std::string> pos;
    for (size_t i = 1; i < t.size(); i++) {
      size_t eq = t[i].find('=');
      if (eq != std::string::npos && eq > 0 && t[i][0] != '\\')
        kv[t[i].substr(0, eq)] = t[i].substr(eq + 1);
      else
        pos.push_back(t[i]);
    }
    auto has = [&](const char *w) {
      for (auto &p : pos)
        if (p == w) return true;
      return false;
    };
    std::vector<std::string> calls, problems;
    {
      std::lock_guard<std::mutex> g(reportLock);
      stepCalls = &calls;
      stepProblems = &problems;
    }
    NTSTATUS expect = STATUS_SUCCESS;
    if (kv.count("expect") && !parseStatus(kv["expect"], &expect)) problems.push_back("unknown status " + kv["expect"]);
    NTSTATUS got = STATUS_SUCCESS;
    std::string detail;
    std::vector<std::string> mismatches;
    const std::string &op = t[0];
    auto handle = [&](const std::string &id) -> Handle * {
      auto it = handles.find(id);
      if (it == handles.end() && (op == "pagein" || op == "unmapimage")) {
        it = sectionsOnly.find(id);
        if (it != sectionsOnly.end()) return it->second;
      }
      if (it == handles.end()) {
        mismatches.push_back("no open handle " + id);
        return nullptr;
      }
      return it->second;
    };
    Handle *h = nullptr;
    if (op == "open") {
      OpenArgs a;
      a.path = wide(pos.size() > 1 ? pos[1] : "\\");
      static const std::map<std::string, UINT32> disps = {{"supersede", 0}, {"open", 1},      {"create", 2},
                                                          {"open_if", 3},   {"overwrite", 4}, {"overwrite_if", 5}};
      if (kv.count("disp")) a.disposition = disps.at(kv["disp"]);
      if (kv.count("access")) a.access = parseAccess(kv["access"]);
      if (kv.count("share")) {
        a.share = 0;
        for (char c : kv["share"]) a.share |= c == 'r' ? FILE_SHARE_READ : c == 'w' ? FILE_SHARE_WRITE : c == 'd' ? FILE_SHARE_DELETE : 0;
      }
      if (kv.count("opts")) {
        std::stringstream ss(kv["opts"]);
        std::string p;
        while (std::getline(ss, p, ','))
          a.options |= p == "dir" ? FILE_DIRECTORY_FILE : p == "nondir" ? FILE_NON_DIRECTORY_FILE
                     : p == "doc" ? FILE_DELETE_ON_CLOSE : p == "reparse" ? FILE_OPEN_REPARSE_POINT : 0;
      }
      if (kv.count("attrs")) a.attributes = parseAttrs(kv["attrs"]);
      if (kv.count("sddl")) a.sddl = wide(kv["sddl"]);
      a.lowIntegrity = kv.count("integrity") && kv["integrity"] == "low";
      OpenResult r = ioOpen(v, a);
      got = r.status;
      if (!r.reparsedTo.empty()) detail = "\"reparsedTo\":" + jsonString(utf8(r.reparsedTo)) + ",";
      if (kv.count("reparse") && kv["reparse"] != utf8(r.reparsedTo))
        mismatches.push_back("reparsed to " + utf8(r.reparsedTo) + ", expected " + kv["reparse"]);
      static const char *infos[] = {"superseded", "opened", "created", "overwritten", "exists", "does_not_exist"};
      if (r.handle) {
        if (r.information < 6) detail += "\"information\":\"" + std::string(infos[r.information]) + "\",";
        if (kv.count("info") && (r.information >= 6 || kv["info"] != infos[r.information]))
          mismatches.push_back("information " + std::string(r.information < 6 ? infos[r.information] : "?") +
                               ", expected " + kv["info"]);
        r.handle->id = pos[0];
        auto old = handles.find(pos[0]);
        if (old != handles.end()) {
          ioClose(v, old->second);
          delete old->second;
        }
        handles[pos[0]] = r.handle;
      }
    } else if (op == "closeall") {
      closeAll();
    } else if (op == "waitfor" || op == "signal") {
      // Not WinFsp: a meeting point with the program that hosts the file system, so that a test
      // can change things behind the volume's back (an API write, a layer switch) between steps.
      std::wstring file = wide(pos.at(0));
      if (op == "signal") {
        HANDLE f = CreateFileW(file.c_str(), GENERIC_WRITE, 0, nullptr, CREATE_ALWAYS, 0, nullptr);
        if (f == INVALID_HANDLE_VALUE) got = STATUS_OBJECT_PATH_NOT_FOUND;
        else CloseHandle(f);
      } else {
        DWORD limit = kv.count("timeout") ? (DWORD)strtoul(kv["timeout"].c_str(), nullptr, 0) : 60000, spent = 0;
        while (GetFileAttributesW(file.c_str()) == INVALID_FILE_ATTRIBUTES && spent < limit) Sleep(20), spent += 20;
        if (spent >= limit) got = STATUS_CANCELLED;
      }
    } else if (op == "wait") {
      waitNotifications(v);
    } else if (op == "symlink" || op == "junction") {
      OpenArgs a;
      a.path = wide(pos.at(0));
      a.disposition = 2;
      a.access = FILE_WRITE_ATTRIBUTES | FILE_READ_ATTRIBUTES | DELETE | SYNCHRONIZE;
      a.options = FILE_OPEN_REPARSE_POINT | (has("dir") || op == "junction" ? FILE_DIRECTORY_FILE : 0);
      OpenResult r = ioOpen(v, a);
      got = r.status;
      if (r.handle) {
        auto data = op == "symlink" ? makeLink(IO_REPARSE_TAG_SYMLINK_, wide(pos.at(1)), has("relative") ? SYMLINK_FLAG_RELATIVE_ : 0)
                                    : makeLink(IO_REPARSE_TAG_MOUNT_POINT_, wide(pos.at(1)), 0);
        got = ioSetReparse(v, r.handle, data);
        ioClose(v, r.handle);
        delete r.handle;
      }
    } else if (op == "notify") {
      std::wstring name = wide(pos.at(0));
      std::vector<UINT8> buf(sizeof(FSP_FSCTL_NOTIFY_INFO) + name.size() * 2 + 8);
      auto *n = (FSP_FSCTL_NOTIFY_INFO *)buf.data();
      n->Size = (UINT16)(sizeof(FSP_FSCTL_NOTIFY_INFO) + name.size() * 2);
      n->Filter = (UINT32)strtoul(kv["filter"].c_str(), nullptr, 0);
      n->Action = (UINT32)strtoul(kv["action"].c_str(), nullptr, 0);
      memcpy(n->FileNameBuf, name.data(), name.size() * 2);
      got = FspFileSystemNotify(v->fs, n, n->Size);
    } else if ((h = handle(pos.empty() ? "" : pos[0])) != nullptr) {
      if (op == "cleanup") ioCleanup(v, h);
      else if (op == "close") {
        ioClose(v, h);
        handles.erase(pos[0]);
        if (h->sections > 0) sectionsOnly[pos[0]] = h;  // Cleanup done; the Close waits for the section
        else delete h;
      } else if (op == "write") got = ioWrite(v, h, strtoull(pos.at(1).c_str(), nullptr, 0), pos.at(2));
      else if (op == "read") {
        std::string data;
        got = ioRead(v, h, strtoull(pos.at(1).c_str(), nullptr, 0), (ULONG)strtoul(pos.at(2).c_str(), nullptr, 0), &data);
        detail = "\"data\":" + jsonString(data) + ",";
        if (NT_SUCCESS(got) && kv.count("data") && kv["data"] != data) mismatches.push_back("read " + data + ", expected " + kv["data"]);
      } else if (op == "truncate") got = ioSetSize(v, h, strtoull(pos.at(1).c_str(), nullptr, 0));
      else if (op == "getinfo") {
        FSP_FSCTL_FILE_INFO fi = {};
        bool cached = false;
        got = ioGetInfo(v, h, &fi, &cached);
        char b[256];
        snprintf(b, sizeof b,
                 "\"attributes\":%u,\"size\":%llu,\"creationTime\":%llu,\"lastWriteTime\":%llu,\"fromCache\":%s,",
                 fi.FileAttributes, (unsigned long long)fi.FileSize, (unsigned long long)fi.CreationTime,
                 (unsigned long long)fi.LastWriteTime, cached ? "true" : "false");
        detail = b;
        if (NT_SUCCESS(got) && kv.count("cached") && (kv["cached"] == "yes") != cached)
          mismatches.push_back(std::string("answered ") + (cached ? "from" : "without") + " the driver's FileInfo cache");
        if (NT_SUCCESS(got) && kv.count("created_after")) {
          // FILETIME of 1 January of that year, UTC.
          SYSTEMTIME st = {};
          st.wYear = (WORD)strtoul(kv["created_after"].c_str(), nullptr, 10);
          st.wMonth = 1;
          st.wDay = 1;
          FILETIME ft;
          SystemTimeToFileTime(&st, &ft);
          UINT64 t = ((UINT64)ft.dwHighDateTime << 32) | ft.dwLowDateTime;
          if (fi.CreationTime <= t) mismatches.push_back("creation time before " + kv["created_after"]);
        }
        if (NT_SUCCESS(got) && kv.count("created") && fi.CreationTime != strtoull(kv["created"].c_str(), nullptr, 10))
          mismatches.push_back("creation time " + std::to_string(fi.CreationTime) + ", expected " + kv["created"]);
        if (NT_SUCCESS(got) && kv.count("noattrs") && (fi.FileAttributes & parseAttrs(kv["noattrs"])))
          mismatches.push_back("attributes have one of " + kv["noattrs"]);
        if (NT_SUCCESS(got) && kv.count("attrs") && (fi.FileAttributes & parseAttrs(kv["attrs"])) != parseAttrs(kv["attrs"]))
          mismatches.push_back("attributes lack " + kv["attrs"]);
        if (NT_SUCCESS(got) && kv.count("size") && fi.FileSize != strtoull(kv["size"].c_str(), nullptr, 0))
          mismatches.push_back("size " + std::to_string(fi.FileSize) + ", expected " + kv["size"]);
      } else if (op == "setattr") {
        got = ioSetAttributes(v, h, kv.count("attrs") ? parseAttrs(kv["attrs"]) : 0,
                              kv.count("created") ? strtoull(kv["created"].c_str(), nullptr, 10) : 0);
      }
      else if (op == "mapimage") {
        if (!(h->granted & FILE_EXECUTE)) {
          got = STATUS_ACCESS_DENIED;
        } else {
          std::lock_guard<std::mutex> g(v->lock);
          h->sections++;
          h->node->mappedImage++;
        }
      } else if (op == "unmapimage") {
        if (h->sections == 0) {
          got = STATUS_INVALID_PARAMETER;
        } else {
          {
            std::lock_guard<std::mutex> g(v->lock);
            h->sections--;
            h->node->mappedImage--;
          }
          auto it = sectionsOnly.find(pos[0]);
          if (h->sections == 0 && it != sectionsOnly.end()) {
            ioClose(v, h);  // the last reference to the file object: now the Close
            sectionsOnly.erase(it);
            delete h;
          }
        }
      } else if (op == "pagein") {
        std::string data;
        got = ioRead(v, h, strtoull(pos.at(1).c_str(), nullptr, 0), (ULONG)strtoul(pos.at(2).c_str(), nullptr, 0), &data,
                     true);
        detail = "\"data\":" + jsonString(data) + ",";
        if (NT_SUCCESS(got) && kv.count("data") && kv["data"] != data) mismatches.push_back("paged in " + data + ", expected " + kv["data"]);
      }
      else if (op == "delete") {
        UINT32 flags = (has("undelete") ? 0 : 1) | (has("ignore_ro") ? 0x10 : 0) | (has("posix") ? 2 : 0);
        got = ioDisposition(v, h, flags, has("classic") ? 1 : has("posix") ? 2 : 0);
      } else if (op == "rename") got = ioRename(v, h, wide(pos.at(1)), has("replace"), has("posix"));
      else if (op == "list") {
        std::vector<std::wstring> names;
        std::vector<UINT32> entryAttrs;
        bool cached = false;
        got = ioList(v, h, wide(kv.count("pattern") ? kv["pattern"] : ""),
                     kv.count("bufsize") ? (ULONG)strtoul(kv["bufsize"].c_str(), nullptr, 0) : 65536, &names, &cached,
                     &entryAttrs);
        for (const char *key : {"attrsof", "noattrsof"}) {
          if (!kv.count(key)) continue;
          const std::string &spec = kv[key];
          const size_t colon = spec.find(':');
          const std::string entry = spec.substr(0, colon);
          const UINT32 want = colon == std::string::npos ? 0 : parseAttrs(spec.substr(colon + 1));
          bool found = false;
          for (size_t i = 0; i < names.size(); i++) {
            if (utf8(names[i]) != entry) continue;
            found = true;
            const bool none = std::string(key) == "noattrsof";
            if (none ? (entryAttrs[i] & want) != 0 : (entryAttrs[i] & want) != want)
              mismatches.push_back("listed " + entry + " with attributes " + std::to_string(entryAttrs[i]) +
                                   (none ? ", which have one of " : ", which lack ") + spec.substr(colon + 1));
          }
          if (!found) mismatches.push_back("listing has no " + entry);
        }
        std::vector<std::string> got8;
        for (auto &n : names)
          if (n != L"." && n != L"..") got8.push_back(utf8(n));
        std::string list;
        for (auto &n : got8) list += (list.empty() ? "" : ",") + n;
        detail = "\"names\":" + jsonString(list) + ",\"fromCache\":" + (cached ? "true," : "false,");
        if (kv.count("names")) {
          std::vector<std::string> want;
          std::stringstream ss(kv["names"] == "none" ? "" : kv["names"]);
          std::string p;
          while (std::getline(ss, p, ',')) want.push_back(p);
          auto a = got8, b = want;
          std::sort(a.begin(), a.end());
          std::sort(b.begin(), b.end());
          if (a != b) mismatches.push_back("listed " + list + ", expected " + kv["names"]);
        }
        if (kv.count("cached") && (kv["cached"] == "yes") != cached)
          mismatches.push_back(std::string("answered ") + (cached ? "from" : "without") + " the driver's cache");
      } else if (op == "getsec") {
        std::wstring sddl;
        got = ioGetSecurity(v, h, &sddl);
        detail = "\"sddl\":" + jsonString(utf8(sddl)) + ",";
        if (NT_SUCCESS(got) && kv.count("sddl~") && utf8(sddl).find(kv["sddl~"]) == std::string::npos)
          mismatches.push_back("descriptor " + utf8(sddl) + " lacks " + kv["sddl~"]);
        if (NT_SUCCESS(got) && kv.count("lacks")) {
          // Trustees that must not appear in any ACE (";;;SID)") nor as owner or group.
          std::stringstream ss(kv["lacks"]);
          std::string sid;
          std::string text = utf8(sddl);
          while (std::getline(ss, sid, ','))
            if (text.find(";;;" + sid + ")") != std::string::npos || text.find("O:" + sid + "G") != std::string::npos ||
                text.find("G:" + sid + "D") != std::string::npos)
              mismatches.push_back("descriptor " + text + " names " + sid);
        }
      } else if (op == "getreparse") {
        std::vector<UINT8> data;
        got = ioGetReparse(v, h, &data);
      } else {
        mismatches.push_back("unknown step " + op);
      }
    }
    {
      std::lock_guard<std::mutex> g(reportLock);
      stepCalls = stepProblems = nullptr;
    }
    if (got != expect) mismatches.push_back("status " + statusName(got) + ", expected " + statusName(expect));
    bool ok = mismatches.empty() && problems.empty();
    if (!ok) curOk = false;
    std::string s = "{\"line\":" + std::to_string(lineNo) + ",\"step\":" + jsonString(line) + ",\"status\":" +
                    jsonString(statusName(got)) + ",\"expect\":" + jsonString(statusName(expect)) + "," + detail +
                    "\"ok\":" + (ok ? "true" : "false") + ",\"requests\":[";
    for (size_t i = 0; i < calls.size(); i++) s += (i ? "," : "") + calls[i];
    s += "],\"problems\":[";
    std::vector<std::string> all = mismatches;
    all.insert(all.end(), problems.begin(), problems.end());
    for (size_t i = 0; i < all.size(); i++) s += (i ? "," : "") + jsonString(all[i]);
    s += "]}";
    if (curName.empty()) curName = "unnamed";
    curSteps.push_back(s);
  }
};

std::string flagsJson(const FSP_FSCTL_VOLUME_PARAMS &p) {
  std::string s = "{";
  auto f = [&](const char *n, unsigned b) { s += std::string(s.size() > 1 ? "," : "") + "\"" + n + "\":" + std::to_string(b); };
  f("CaseSensitiveSearch", p.CaseSensitiveSearch);
  f("PostCleanupWhenModifiedOnly", p.PostCleanupWhenModifiedOnly);
  f("PostDispositionWhenNecessaryOnly", p.PostDispositionWhenNecessaryOnly);
  f("PassQueryDirectoryPattern", p.PassQueryDirectoryPattern);
  f("PassQueryDirectoryFileName", p.PassQueryDirectoryFileName);
  f("ReparsePoints", p.ReparsePoints);
  f("SupportsPosixUnlinkRename", p.SupportsPosixUnlinkRename);
  f("UmFileContextIsUserContext2", p.UmFileContextIsUserContext2);
  f("FileInfoTimeout", p.FileInfoTimeout);
  return s + "}";
}

NTSTATUS run(FSP_FILE_SYSTEM *fs, const std::wstring &scenarioFile, const std::wstring &reportFile) {
  Volume *v = volumeOf(fs);
  if (!v || !v->started) return STATUS_INVALID_PARAMETER;
  std::ifstream in(utf8(scenarioFile));
  if (!in) return STATUS_OBJECT_NAME_NOT_FOUND;
  Runner r{v};
  std::string line;
  int no = 0;
  while (std::getline(in, line)) {
    no++;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    r.step(no, line);
  }
  r.endScenario();
  waitNotifications(v);
  std::string out = "{\"double\":\"winfsp-x64.dll test double (shadowfs issue 28), modelled on WinFsp 2026 Beta2\","
                    "\"volume\":" + flagsJson(v->params) + ",\"passed\":" + std::to_string(r.passed) +
                    ",\"failed\":" + std::to_string(r.failed) + ",\"notifications\":[";
  {
    std::lock_guard<std::mutex> g(v->lock);
    for (size_t i = 0; i < v->notifications.size(); i++) out += (i ? "," : "") + v->notifications[i];
  }
  out += "],\"scenarios\":[";
  for (size_t i = 0; i < r.scenariosJson.size(); i++) out += (i ? ",\n" : "\n") + r.scenariosJson[i];
  out += "]}\n";
  std::ofstream o(utf8(reportFile), std::ios::binary);
  o << out;
  return r.failed == 0 ? STATUS_SUCCESS : STATUS_UNSUCCESSFUL;
}
}  // namespace

namespace wfd {
void noteCall(const char *call, const wchar_t *name, NTSTATUS status) {
  std::lock_guard<std::mutex> g(reportLock);
  if (!stepCalls) return;
  std::string s = std::string("{\"call\":\"") + call + "\"";
  if (name) s += ",\"name\":" + jsonString(utf8(name));
  s += ",\"status\":" + jsonString(statusName(status)) + "}";
  stepCalls->push_back(s);
}
void problem(const std::wstring &what) {
  std::lock_guard<std::mutex> g(reportLock);
  if (stepProblems) stepProblems->push_back(utf8(what));
}
std::string utf8(const std::wstring &w) {
  if (w.empty()) return "";
  int n = WideCharToMultiByte(CP_UTF8, 0, w.data(), (int)w.size(), nullptr, 0, nullptr, nullptr);
  std::string s(n, '\0');
  WideCharToMultiByte(CP_UTF8, 0, w.data(), (int)w.size(), &s[0], n, nullptr, nullptr);
  return s;
}
std::wstring wide(const std::string &s) {
  if (s.empty()) return L"";
  int n = MultiByteToWideChar(CP_UTF8, 0, s.data(), (int)s.size(), nullptr, 0);
  std::wstring w(n, L'\0');
  MultiByteToWideChar(CP_UTF8, 0, s.data(), (int)s.size(), &w[0], n);
  return w;
}
std::string statusName(NTSTATUS s) {
  for (auto &e : statusNames)
    if (e.s == s) return e.n;
  char b[16];
  snprintf(b, sizeof b, "0x%08lX", (unsigned long)s);
  return b;
}
bool parseStatus(const std::string &name, NTSTATUS *out) {
  std::string n = name.rfind("STATUS_", 0) == 0 ? name : "STATUS_" + name;
  for (auto &e : statusNames)
    if (n == e.n) return *out = e.s, true;
  if (name.rfind("0x", 0) == 0) return *out = (NTSTATUS)strtoul(name.c_str(), nullptr, 16), true;
  return false;
}
}  // namespace wfd

extern "C" {
WFD_API NTSTATUS WinFspDoubleRun(FSP_FILE_SYSTEM *FileSystem, PCWSTR ScenarioFile, PCWSTR ReportFile) {
  return run(FileSystem, ScenarioFile, ReportFile);
}

void WinFspDoubleMaybeStartEnvScenario(FSP_FILE_SYSTEM *fs) {
  Volume *v = volumeOf(fs);
  if (!v || !v->started || !fs->MountPoint || v->scenarioStarted) return;
  WCHAR scen[MAX_PATH], rep[MAX_PATH], done[MAX_PATH];
  if (!GetEnvironmentVariableW(L"WINFSP_DOUBLE_SCENARIO", scen, MAX_PATH) ||
      !GetEnvironmentVariableW(L"WINFSP_DOUBLE_REPORT", rep, MAX_PATH))
    return;
  if (!GetEnvironmentVariableW(L"WINFSP_DOUBLE_DONE", done, MAX_PATH)) done[0] = 0;
  v->scenarioStarted = true;
  std::wstring s = scen, r = rep, d = done;
  std::thread([fs, s, r, d]() {
    run(fs, s, r);
    if (!d.empty()) {
      HANDLE h = CreateFileW(d.c_str(), GENERIC_WRITE, 0, nullptr, CREATE_ALWAYS, 0, nullptr);
      if (h != INVALID_HANDLE_VALUE) CloseHandle(h);
    }
  }).detach();
}
}  // extern "C"
