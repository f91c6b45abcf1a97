/*
 * Stand-in for bcryptprimitives.dll, for wine releases that lack it (Debian 12 ships wine 8.0).
 * Rust's standard library (1.78 and later) imports ProcessPrng from this DLL on Windows, so
 * ffi-rs's Windows binary cannot load without it ("Module not found"). scripts/wine-node.sh
 * builds it with MinGW and puts it in the wine prefix's system32 only when wine has no
 * bcryptprimitives.dll of its own. It is never part of a Windows build of shadowfs.
 */
#include <windows.h>
#include <bcrypt.h>

/* Documented as: fills the buffer with random bytes and always returns TRUE. */
BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
  while (len > 0) {
    ULONG chunk = len > 0x10000000 ? 0x10000000 : (ULONG)len;
    if (!BCRYPT_SUCCESS(BCryptGenRandom(NULL, data, chunk, BCRYPT_USE_SYSTEM_PREFERRED_RNG))) {
      /* There is no error to return; failing loudly beats handing out predictable bytes. */
      RaiseFailFastException(NULL, NULL, 0);
    }
    data += chunk;
    len -= chunk;
  }
  return TRUE;
}
