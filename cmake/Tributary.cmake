# tb_folder_library(<name> [DEPS <targets...>] [EXCLUDE <file names...>] [SOURCES <files...>])
# One static library per source folder, from every .c file in the folder
# (minus EXCLUDE; or exactly SOURCES when given). New files are picked up
# without editing CMake (CONFIGURE_DEPENDS). Every library sees the project
# root on its include path, so headers are included by their path from the
# root: "gateway/broker/broker.h".
function(tb_folder_library name)
  cmake_parse_arguments(ARG "" "" "DEPS;EXCLUDE;SOURCES" ${ARGN})
  if(ARG_SOURCES)
    set(srcs ${ARG_SOURCES})
  else()
    file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.c)
    foreach(x ${ARG_EXCLUDE})
      list(FILTER srcs EXCLUDE REGEX "/${x}$")
    endforeach()
  endif()
  if(srcs)
    add_library(${name} STATIC ${srcs})
    target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
    target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  else()
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
    target_link_libraries(${name} INTERFACE ${ARG_DEPS})
  endif()
endfunction()
