# The "winfsp" backend (WinFsp's native API, issue #28): included from CMakeLists.txt inside
# if(WIN32), after the module's target exists. Nothing here links against WinFsp: its DLL is
# loaded at run time (native/platform/win32_winfsp.cc).
target_sources(${PROJECT_NAME} PRIVATE native/winfsp/winfsp_native.cc native/winfsp/winfsp_support.cc)
target_compile_definitions(${PROJECT_NAME} PRIVATE SHADOWFS_HAVE_WINFSP_NATIVE)
# ConvertStringSecurityDescriptorToSecurityDescriptorW and the token calls live in advapi32.
target_link_libraries(${PROJECT_NAME} PRIVATE advapi32)

# Unit tests of what needs no driver (names, errors, attributes and times, the security
# descriptor, directory entries and markers, notify batches, link data), run under wine.
if(TARGET shadowfs_unit_tests)
  target_sources(shadowfs_unit_tests PRIVATE native/winfsp/winfsp_support.cc
                 test/native/winfsp/winfsp_support_test.cc)
  target_link_libraries(shadowfs_unit_tests PRIVATE advapi32)
endif()
