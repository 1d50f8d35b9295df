/* A stand-in dwmapi.dll for the Windows suite's second desktop test: Wine 8.0's
 * DwmGetWindowAttribute is a stub (E_NOTIMPL) for every attribute, and xcap drops every window
 * whose DWMWA_EXTENDED_FRAME_BOUNDS it cannot read, so under Wine the window list is empty.
 * This answers the two attributes xcap asks as Windows 10 does for a window without invisible
 * resize borders (the window rectangle; never cloaked), and the two functions the connector
 * imports (DwmIsCompositionEnabled: composition is always on since Windows 8).
 * Built by scripts/windows-env and placed beside a copy of the test's executables only, so the
 * first desktop test still meets Wine's own stub; never shipped. */
#include <windows.h>
#include <dwmapi.h>

__declspec(dllexport) HRESULT WINAPI DwmGetWindowAttribute(HWND hwnd, DWORD attribute,
                                                           PVOID value, DWORD size) {
  if (attribute == DWMWA_EXTENDED_FRAME_BOUNDS && size == sizeof(RECT))
    return GetWindowRect(hwnd, (RECT *)value) ? S_OK : HRESULT_FROM_WIN32(GetLastError());
  if (attribute == DWMWA_CLOAKED && size == sizeof(DWORD)) {
    *(DWORD *)value = 0;
    return S_OK;
  }
  return E_NOTIMPL;
}

__declspec(dllexport) HRESULT WINAPI DwmIsCompositionEnabled(BOOL *enabled) {
  *enabled = TRUE;
  return S_OK;
}
