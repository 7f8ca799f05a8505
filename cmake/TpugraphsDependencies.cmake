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
