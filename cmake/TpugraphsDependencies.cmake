# All dependencies are Debian packages (tools/install-deps.sh); nothing is downloaded at build time.
find_package(Threads REQUIRED)
find_package(Protobuf REQUIRED)
find_package(Eigen3 3.3 REQUIRED NO_MODULE)
find_package(CLI11 REQUIRED)
find_package(spdlog REQUIRED)
find_package(ZLIB REQUIRED)
if(TPUGRAPHS_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()
if(TPUGRAPHS_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
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
