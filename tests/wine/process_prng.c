/* The one export of bcryptprimitives.dll that Rust's standard library needs and Wine 8.0
 * lacks: ProcessPrng, forwarded to RtlGenRandom (SystemFunction036 in advapi32).
 * Built by scripts/windows-env and placed beside the Windows test executables only; never
 * shipped. RtlGenRandom takes a 32-bit length, so a longer request is served in pieces. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
  const SIZE_T piece = 0x10000000;
  for (; len > piece; data += piece, len -= piece)
    if (!SystemFunction036(data, (ULONG)piece)) return FALSE;
  return SystemFunction036(data, (ULONG)len);
}
