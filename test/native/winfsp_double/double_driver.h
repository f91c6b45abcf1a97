// The driver model's state and entry points, shared by double_driver.cc and double_run.cc.
#pragma once

#include "double.h"

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace wfd {

// One open name in the driver's table (src/sys/file.c FSP_FILE_NODE): share access, delete
// state and the per-node caches live here; the file system's own context is kept from the first
// open in the default context mode.
struct Node {
  std::wstring name;  // as the driver stores it: the normalized name, else the opened name upper-cased
  int handles = 0;    // file objects not yet cleaned up
  int refs = 0;       // file objects not yet closed
  int openCount = 0, readers = 0, writers = 0, deleters = 0, sharedRead = 0, sharedWrite = 0, sharedDelete = 0;
  bool deletePending = false, posixDeleted = false, isDir = false, truncateOnClose = false;
  // Image sections of the file (the memory manager's, one per file; counted here per mapping the
  // scenario made): while any exists the driver refuses write-opens and deletes.
  int mappedImage = 0;
  bool inTable = true;
  UINT64 userContext = 0, userContext2 = 0;
  FSP_FSCTL_FILE_INFO info = {};
  // The node's FileInfo cache (file.c:1703-1721, 1795-1840): set from every answer that carries
  // a FileInfo, valid for FileInfoTimeout, dropped by a notify of the name (file.c:2372-2471).
  bool infoValid = false;
  DWORD infoTick = 0;
  bool dirCacheValid = false;
  std::vector<UINT8> dirCache;
  DWORD dirCacheTick = 0;
};

// One file object (FILE_OBJECT + FSP_FILE_DESC).
struct Handle {
  std::string id;
  Node *node = nullptr;
  UINT64 userContext = 0, userContext2 = 0;
  UINT32 granted = 0, share = 0;
  bool cleaned = false, closed = false, deleteOnClose = false, modified = false, setAttrs = false, posixDelete = false;
  NTSTATUS cachedDisposition = 0;
  bool patternSet = false, listedAny = false, listedAll = false;
  // Image sections made from this file object. The section holds a reference to it: the program's
  // CloseHandle brings the Cleanup, but the Close only comes once every section is gone, and page-ins
  // come through this file object (and so with its file system context) until then.
  int sections = 0;
  std::wstring pattern;
};

struct Volume {
  FSP_FILE_SYSTEM *fs = nullptr;
  FSP_FSCTL_VOLUME_PARAMS params = {};
  std::wstring devicePath;
  std::map<std::wstring, Node *> nodes;
  std::mutex lock;  // nodes, handles, dispatcher queue
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  std::vector<std::thread> threads;
  bool started = false, stopping = false;
  HANDLE token = nullptr;
  HANDLE lowToken = nullptr;  // made at the first `integrity=low` open (lowIntegrityToken)
  UINT64 nextHint = 1;
  std::map<UINT64, std::pair<FSP_FSCTL_TRANSACT_RSP *, bool *>> pending;
  int notifyDepth = 0;
  bool renameInFlight = false;
  std::vector<std::string> notifications;  // JSON objects, in the order the driver processed them
  bool scenarioStarted = false;

  std::wstring key(const std::wstring &name) const;
  DWORD dirInfoTimeout() const;
  // The mount directory the double made in SetMountPoint (see there), held open as WinFsp holds
  // its MountHandle; closing it removes the directory.
  HANDLE mountDirHandle = INVALID_HANDLE_VALUE;
  std::wstring mountDir;
};

Volume *volumeOf(FSP_FILE_SYSTEM *fs);

// The I/O a program does, as the I/O manager turns it into IRPs and WinFsp's driver into
// requests. Each returns what the program would see.
struct OpenArgs {
  std::wstring path;
  UINT32 disposition = 1, access = FILE_READ_ATTRIBUTES | SYNCHRONIZE, share = FILE_SHARE_READ | FILE_SHARE_WRITE,
         options = 0, attributes = 0;
  bool openTarget = false;
  bool lowIntegrity = false;  // the opener runs at Low integrity
  std::wstring sddl;
};
struct OpenResult {
  NTSTATUS status = 0;
  UINT32 information = 0;
  std::wstring reparsedTo;  // where the I/O manager went when the name led outside the volume
  Handle *handle = nullptr;
};
OpenResult ioOpen(Volume *v, const OpenArgs &a);
void ioCleanup(Volume *v, Handle *h);
void ioClose(Volume *v, Handle *h);
NTSTATUS ioWrite(Volume *v, Handle *h, UINT64 offset, const std::string &data);
// `paging`: a page-in through an image section (no handle-level access check; allowed after the
// Cleanup, until the Close).
NTSTATUS ioRead(Volume *v, Handle *h, UINT64 offset, ULONG length, std::string *data, bool paging = false);
NTSTATUS ioGetInfo(Volume *v, Handle *h, FSP_FSCTL_FILE_INFO *info, bool *fromCache = nullptr);
// attrs 0: no change; creationTime 0: no change (FILE_BASIC_INFORMATION's own rule).
NTSTATUS ioSetAttributes(Volume *v, Handle *h, UINT32 attrs, UINT64 creationTime = 0);
NTSTATUS ioSetSize(Volume *v, Handle *h, UINT64 size);
NTSTATUS ioDisposition(Volume *v, Handle *h, UINT32 flags, int mode);  // mode 0: Win32 DeleteFile retry, 1: legacy, 2: Ex
NTSTATUS ioRename(Volume *v, Handle *h, const std::wstring &newPath, bool replace, bool posix);
// `attrs` (optional) gets each listed name's FileAttributes, in the order of `names`.
NTSTATUS ioList(Volume *v, Handle *h, const std::wstring &pattern, ULONG length, std::vector<std::wstring> *names,
                bool *fromCache, std::vector<UINT32> *attrs = nullptr);
NTSTATUS ioGetSecurity(Volume *v, Handle *h, std::wstring *sddl);
NTSTATUS ioSetReparse(Volume *v, Handle *h, const std::vector<UINT8> &data);
NTSTATUS ioGetReparse(Volume *v, Handle *h, std::vector<UINT8> *data);
NTSTATUS ioVolumeInfo(Volume *v, FSP_FSCTL_VOLUME_INFO *vi);
void waitNotifications(Volume *v);

}  // namespace wfd
