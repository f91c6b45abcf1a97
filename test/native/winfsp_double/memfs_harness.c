/* Local check of the WinFsp test double against WinFsp's own memfs sample (issue 28).
 *
 * Compiled by run-memfs-check.sh against a WinFsp checkout (tst/memfs/memfs.h and memfs.cpp,
 * inc/winfsp) that stays outside the repository, and linked with the double's winfsp-x64.dll
 * instead of WinFsp's. It creates memfs the way memfs-main.c does (case-insensitive, a disk
 * volume), starts its dispatcher, sets a mount point, and asks the double to run a scenario
 * file: every step is checked against what WinFsp's driver would answer. Nothing here mounts
 * anything a program could see.
 *
 *   memfs-double.exe SCENARIO REPORT [FileInfoTimeout] [MountPoint]
 * Exit code: 0 when every scenario passed, 1 when one failed, 2 on a setup error. */
#include "memfs.h"
#include <stdio.h>
#include <stdlib.h>

/* The double's own export (not WinFsp's). */
__declspec(dllimport) NTSTATUS WinFspDoubleRun(FSP_FILE_SYSTEM *FileSystem, PCWSTR ScenarioFile, PCWSTR ReportFile);

/* WinFsp's fsctl.h declares _ReadWriteBarrier, an MSVC intrinsic MinGW spells as a macro; the
 * build's prelude renames it to this. */
void FspShimReadWriteBarrier(void) { __asm__ __volatile__("" ::: "memory"); }

int wmain(int argc, wchar_t **argv) {
  if (argc < 3) {
    fwprintf(stderr, L"usage: memfs-double SCENARIO REPORT [FileInfoTimeout] [MountPoint]\n");
    return 2;
  }
  ULONG timeout = argc > 3 ? wcstoul(argv[3], 0, 0) : 1000;
  PWSTR mountPoint = argc > 4 ? argv[4] : L"Q:";
  MEMFS *memfs = 0;
  NTSTATUS r = MemfsCreate(MemfsDisk | MemfsCaseInsensitive, timeout, 1024, 16 * 1024 * 1024, 0, 0, &memfs);
  if (!NT_SUCCESS(r)) { fwprintf(stderr, L"MemfsCreate: 0x%08lx\n", r); return 2; }
  r = MemfsStart(memfs);
  if (!NT_SUCCESS(r)) { fwprintf(stderr, L"MemfsStart: 0x%08lx\n", r); return 2; }
  r = FspFileSystemSetMountPoint(MemfsFileSystem(memfs), mountPoint);
  if (!NT_SUCCESS(r)) { fwprintf(stderr, L"SetMountPoint: 0x%08lx\n", r); return 2; }
  r = WinFspDoubleRun(MemfsFileSystem(memfs), argv[1], argv[2]);
  MemfsStop(memfs);
  MemfsDelete(memfs);
  fwprintf(stdout, L"WinFspDoubleRun: 0x%08lx\n", r);
  return NT_SUCCESS(r) ? 0 : 1;
}
