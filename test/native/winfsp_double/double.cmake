# The WinFsp test double (issue 28): winfsp-x64.dll with WinFsp's own export names, playing the
# driver's part for a file system in the same process. Built with MinGW only; output in
# <build>/winfsp_double/{bin,lib}, apart from the stand-in and from any real WinFsp.
# It includes no project header: only winfsp_decls.h, our own reading of WinFsp's headers.
add_library(winfsp_double SHARED
  ${CMAKE_CURRENT_LIST_DIR}/double_dll.cc
  ${CMAKE_CURRENT_LIST_DIR}/double_ops.cc
  ${CMAKE_CURRENT_LIST_DIR}/double_driver.cc
  ${CMAKE_CURRENT_LIST_DIR}/double_io.cc
  ${CMAKE_CURRENT_LIST_DIR}/double_run.cc)
set_target_properties(winfsp_double PROPERTIES PREFIX "" OUTPUT_NAME winfsp-x64
                      CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON
                      ARCHIVE_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/winfsp_double/lib
                      RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/winfsp_double/bin)
# Its own include directory only: nothing from native/ can be reached by accident.
target_include_directories(winfsp_double PRIVATE ${CMAKE_CURRENT_LIST_DIR})
target_compile_options(winfsp_double PRIVATE -Wall -Wno-unused-function -Wno-missing-field-initializers)
target_link_libraries(winfsp_double PRIVATE advapi32 ntdll)
target_link_options(winfsp_double PRIVATE -static -static-libgcc -static-libstdc++)
