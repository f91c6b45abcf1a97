# The "winfsp" backend (WinFsp's native API, issue #28): included from CMakeLists.txt inside
# if(WIN32), after the module's target exists. Nothing here links against WinFsp: its DLL is
# loaded at run time (native/platform/win32_winfsp.cc).
target_sources(${PROJECT_NAME} PRIVATE native/winfsp/winfsp_native.cc native/winfsp/winfsp_files.cc
               native/winfsp/winfsp_names.cc native/winfsp/winfsp_support.cc)
target_compile_definitions(${PROJECT_NAME} PRIVATE SHADOWFS_HAVE_WINFSP_NATIVE)
# ConvertStringSecurityDescriptorToSecurityDescriptorW and the token calls live in advapi32.
target_link_libraries(${PROJECT_NAME} PRIVATE advapi32)

# Its unit tests (names, errors, attributes and times, the security descriptor, directory
# entries and markers, notify batches, link data) are added with the other unit tests in
# CMakeLists.txt: a build from the npm package has no test/ folder.
