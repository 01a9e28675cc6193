# The libraries megatron.cpp links that have no CMake package of their own
# (oneDNN's insists on OpenCL; utf8proc, SentencePiece, PCRE2 have none) and
# those that have one (CLI11, nlohmann_json, cpp-httplib through pkg-config).
# Read by the top-level CMakeLists.txt and, installed beside it, by
# megatron_cppConfig.cmake, so a project that uses the installed package
# finds the same targets. (OpenMP and MPI are found before this file.)
# Debian's dnnl-config.cmake insists on OpenCL, which a CPU build does not
# use; find the library and header directly instead.
find_library(DNNL_LIBRARY NAMES dnnl REQUIRED)
find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp REQUIRED)
if(NOT TARGET DNNL::dnnl)
  add_library(DNNL::dnnl UNKNOWN IMPORTED)
  set_target_properties(DNNL::dnnl PROPERTIES IMPORTED_LOCATION ${DNNL_LIBRARY}
                        INTERFACE_INCLUDE_DIRECTORIES ${DNNL_INCLUDE_DIR})
endif()
# Tokenizers: utf8proc (Unicode categories for GPT-2's pre-tokeniser),
# SentencePiece, and PCRE2 (the regular expressions a Hugging Face
# tokenizer.json carries: \p{L}, (?i:...), look-ahead; src/data/hf_regex.h),
# plain Debian libraries without CMake packages.
foreach(lib utf8proc sentencepiece pcre2-8)
  string(TOUPPER ${lib} LIB)
  find_library(${LIB}_LIBRARY NAMES ${lib} REQUIRED)
  if(NOT TARGET ext::${lib})
    add_library(ext::${lib} UNKNOWN IMPORTED)
    set_target_properties(ext::${lib} PROPERTIES IMPORTED_LOCATION ${${LIB}_LIBRARY})
  endif()
endforeach()
find_path(UTF8PROC_INCLUDE_DIR utf8proc.h REQUIRED)
find_path(SENTENCEPIECE_INCLUDE_DIR sentencepiece_processor.h REQUIRED)
find_path(PCRE2-8_INCLUDE_DIR pcre2.h REQUIRED)
set_target_properties(ext::utf8proc PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${UTF8PROC_INCLUDE_DIR})
set_target_properties(ext::sentencepiece PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${SENTENCEPIECE_INCLUDE_DIR})
set_target_properties(ext::pcre2-8 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${PCRE2-8_INCLUDE_DIR})
find_package(CLI11 REQUIRED)
find_package(nlohmann_json REQUIRED)
# cpp-httplib's pkg-config file carries the build's defines (OpenSSL, zlib,
# brotli), which change the layout of its classes: the header must see them too.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
if(NOT TARGET PkgConfig::HTTPLIB)
  pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
endif()
