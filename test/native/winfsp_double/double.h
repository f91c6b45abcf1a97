// Internal declarations shared by the double's sources (double_dll.cc, double_driver.cc,
// double_run.cc). Only winfsp_decls.h (our own reading of WinFsp's headers) and system headers.
#pragma once

#include "winfsp_decls.h"

#include <map>
#include <string>
#include <vector>

#define WFD_API __declspec(dllexport)

extern "C" {
ULONG WINAPI RtlNtStatusToDosError(NTSTATUS);
// Exports of the double that its own sources call.
__declspec(dllexport) BOOLEAN FspFileSystemAddDirInfo(FSP_FSCTL_DIR_INFO *, PVOID, ULONG, PULONG);
__declspec(dllexport) NTSTATUS FspCreateSecurityDescriptor(FSP_FILE_SYSTEM *, FSP_FSCTL_TRANSACT_REQ *,
                                                           PSECURITY_DESCRIPTOR, PSECURITY_DESCRIPTOR *);
__declspec(dllexport) VOID FspDeleteSecurityDescriptor(PSECURITY_DESCRIPTOR, NTSTATUS (*)());
__declspec(dllexport) NTSTATUS FspFileSystemNotify(FSP_FILE_SYSTEM *, FSP_FSCTL_NOTIFY_INFO *, SIZE_T);
__declspec(dllexport) FSP_FILE_SYSTEM_OPERATION_CONTEXT *FspFileSystemGetOperationContext(VOID);
}

namespace wfd {
// REPARSE_DATA_BUFFER's symlink and mount-point forms (ntifs.h), spelt for the double.
struct ReparseData {
  ULONG ReparseTag;
  USHORT ReparseDataLength;
  USHORT Reserved;
  union {
    struct {
      USHORT SubstituteNameOffset, SubstituteNameLength, PrintNameOffset, PrintNameLength;
      ULONG Flags;
      WCHAR PathBuffer[1];
    } SymbolicLink;
    struct {
      USHORT SubstituteNameOffset, SubstituteNameLength, PrintNameOffset, PrintNameLength;
      WCHAR PathBuffer[1];
    } MountPoint;
  };
};
const ULONG IO_REPARSE_TAG_SYMLINK_ = 0xA000000C, IO_REPARSE_TAG_MOUNT_POINT_ = 0xA0000003;
const ULONG SYMLINK_FLAG_RELATIVE_ = 1;

bool dirNameLess(const std::wstring &a, const std::wstring &b);
void setOperationContext(FSP_FILE_SYSTEM_OPERATION_CONTEXT *c);
GENERIC_MAPPING *genericMapping();
// CreatePrivateObjectSecurity by Windows' documented rules (double_dll.cc); HeapFree the result.
NTSTATUS newSecurityDescriptor(PSECURITY_DESCRIPTOR parent, PSECURITY_DESCRIPTOR creator, bool container,
                               HANDLE token, PSECURITY_DESCRIPTOR *out);
NTSTATUS getSecurityByName(FSP_FILE_SYSTEM *fs, PWSTR name, UINT32 *attrs, std::vector<UINT8> &sd);
// Mandatory integrity control (double_dll.cc, runAccessCheck): a token the double made for a
// Low-integrity opener (`open ... integrity=low`); every other token counts as Medium.
HANDLE lowIntegrityToken(HANDLE from);
void closeLowIntegrityToken(HANDLE token);
NTSTATUS accessCheck(FSP_FILE_SYSTEM *fs, FSP_FSCTL_TRANSACT_REQ *req, bool checkParent, UINT32 desired,
                     UINT32 *granted, UINT32 *reparseIndex, std::vector<UINT8> *sdOut);

// The report of the step being run: each interface call the DLL made, and problems the double
// found in the file system's answers (a contract of WinFsp's that the answer breaks).
void noteCall(const char *call, const wchar_t *name, NTSTATUS status);
void problem(const std::wstring &what);

std::string utf8(const std::wstring &w);
std::wstring wide(const std::string &s);
std::string statusName(NTSTATUS s);
bool parseStatus(const std::string &name, NTSTATUS *out);
}  // namespace wfd
