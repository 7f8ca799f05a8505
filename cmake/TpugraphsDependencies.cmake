# All dependencies are Debian packages (tools/install-deps.sh); nothing is downloaded at build time.
# Every missing one is collected first, so that a fresh machine gets one error naming all the
# Debian packages to install (`pip install .` shows it as is: docs/python.md).
set(_tpugraphs_missing "")
set(_tpugraphs_missing_packages "")
# tpugraphs_require(WHAT "DEBIAN PACKAGES" FOUND): records WHAT as missing unless FOUND is true.
macro(tpugraphs_require what packages found)
  if(NOT ${found})
    list(APPEND _tpugraphs_missing "  ${what} (Debian: ${packages})")
    string(REPLACE " " ";" _tpugraphs_pkgs "${packages}")
    list(APPEND _tpugraphs_missing_packages ${_tpugraphs_pkgs})
  endif()
endmacro()

find_package(Threads REQUIRED)
find_package(Protobuf QUIET)
tpugraphs_require("protobuf (libraries and headers)" "libprotobuf-dev" Protobuf_FOUND)
set(_tpugraphs_have_protoc FALSE)
if(TARGET protobuf::protoc)
  set(_tpugraphs_have_protoc TRUE)
endif()
tpugraphs_require("protoc, the protobuf compiler" "protobuf-compiler" _tpugraphs_have_protoc)
find_package(Eigen3 3.3 QUIET NO_MODULE)
tpugraphs_require("Eigen 3.3 or later" "libeigen3-dev" Eigen3_FOUND)
find_package(CLI11 QUIET)
tpugraphs_require("CLI11" "libcli11-dev" CLI11_FOUND)
find_package(spdlog QUIET)
tpugraphs_require("spdlog" "libspdlog-dev libfmt-dev" spdlog_FOUND)
find_package(ZLIB QUIET)
tpugraphs_require("zlib" "zlib1g-dev" ZLIB_FOUND)
if(TPUGRAPHS_PYTHON_MODULE)
  tpugraphs_require("pybind11 (TPUGRAPHS_PYTHON_MODULE is on)" "pybind11-dev python3-dev"
                    pybind11_FOUND)
endif()
if(TPUGRAPHS_BUILD_TESTS)
  find_package(GTest QUIET)
  tpugraphs_require("GoogleTest (TPUGRAPHS_BUILD_TESTS is on)" "libgtest-dev libgmock-dev"
                    GTest_FOUND)
endif()
if(TPUGRAPHS_BUILD_BENCHMARKS)
  find_package(benchmark QUIET)
  tpugraphs_require("Google Benchmark (TPUGRAPHS_BUILD_BENCHMARKS is on)" "libbenchmark-dev"
                    benchmark_FOUND)
endif()
if(_tpugraphs_missing)
  list(REMOVE_DUPLICATES _tpugraphs_missing_packages)
  string(REPLACE ";" "\n" _tpugraphs_missing_lines "${_tpugraphs_missing}")
  string(REPLACE ";" " " _tpugraphs_missing_packages "${_tpugraphs_missing_packages}")
  message(FATAL_ERROR "tpugraphs: missing build dependencies:\n${_tpugraphs_missing_lines}\n"
    "Install them with\n  sudo apt-get install ${_tpugraphs_missing_packages}\n"
    "or everything the project uses with\n  sudo bash tools/install-deps.sh")
endif()
if(TPUGRAPHS_BUILD_TESTS)
  include(GoogleTest)
endif()
# libdeflate (Debian libdeflate-dev) inflates whole .npz/zip members about twice as fast as zlib
# (docs/npz.md, "Throughput"). Optional: without it every member is inflated with zlib.
option(TPUGRAPHS_LIBDEFLATE "Inflate .npz members with libdeflate when it is installed" ON)
set(TPUGRAPHS_HAVE_LIBDEFLATE OFF)
if(TPUGRAPHS_LIBDEFLATE)
  find_path(LIBDEFLATE_INCLUDE_DIR libdeflate.h)
  find_library(LIBDEFLATE_LIBRARY NAMES deflate)
  if(LIBDEFLATE_INCLUDE_DIR AND LIBDEFLATE_LIBRARY)
    add_library(tpugraphs_libdeflate UNKNOWN IMPORTED)
    set_target_properties(tpugraphs_libdeflate PROPERTIES
      IMPORTED_LOCATION "${LIBDEFLATE_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${LIBDEFLATE_INCLUDE_DIR}")
    set(TPUGRAPHS_HAVE_LIBDEFLATE ON)
    message(STATUS "libdeflate: ${LIBDEFLATE_LIBRARY} (.npz members inflate with libdeflate)")
  else()
    message(WARNING "libdeflate not found (install libdeflate-dev): .npz members inflate with "
                    "zlib, about half as fast")
  endif()
else()
  message(STATUS "libdeflate disabled (TPUGRAPHS_LIBDEFLATE=OFF): .npz members inflate with zlib")
endif()

# MPI (Debian's OpenMPI: libopenmpi-dev openmpi-bin) for data-parallel train/evaluate/predict
# (docs/distributed.md). On by default when found; without it the binary runs single-process.
# The C API through the CXX component (the project enables no C language); no C++ bindings.
set(MPI_CXX_SKIP_MPICXX TRUE)
find_package(MPI COMPONENTS CXX QUIET)
if(MPI_CXX_FOUND)
  set(TPUGRAPHS_MPI_DEFAULT ON)
else()
  set(TPUGRAPHS_MPI_DEFAULT OFF)
endif()
option(TPUGRAPHS_MPI "Build with MPI (data-parallel training, evaluation and prediction)"
       ${TPUGRAPHS_MPI_DEFAULT})
if(TPUGRAPHS_MPI AND NOT MPI_CXX_FOUND)
  message(FATAL_ERROR "TPUGRAPHS_MPI=ON but no MPI was found (install libopenmpi-dev)")
endif()
