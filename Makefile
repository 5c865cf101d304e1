# The two quick-start commands: `make run` (set-up, build, the main job) and `make test`.
# Each installs the Debian packages it lacks, configures and builds Release in build/.

BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
JOBS       ?= $(shell nproc)
RANKS      ?= 4
CMAKE_ARGS ?=

BUILD_PACKAGES = cmake ninja-build g++ make pkg-config libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev libucx-dev
# The install tests build the examples with pkg-config and make .debs (dpkg-shlibdeps, file).
# The netns tests make hosts of network namespaces with ip, tc, nft and sysctl; the perf tests read
# collie-perf's JSON and run perf/compare with python3, its peer drivers (OpenMPI, Gloo) and its
# plot (gnuplot). The PyTorch backend's tests need Debian's torch, its headers and pybind11,
# installed before CMake configures so that it builds them; Debian's torch multiplies matrices
# with whatever libblas.so.3 is, the reference BLAS unless an optimized one is installed. The
# launcher tests run OpenMPI's mpirun, MPICH's mpiexec (mpirun stays OpenMPI's: its alternative
# has the higher priority), across hosts through sshd, srun on a private Slurm with munge, and
# torchrun.
TORCH_PACKAGES = python3-torch libtorch-dev pybind11-dev python3-dev libopenblas0-pthread
PEER_PACKAGES = openmpi-bin libopenmpi-dev libgloo-dev gnuplot-nox python3
TEST_PACKAGES = iproute2 nftables procps python3 pkg-config dpkg-dev file $(TORCH_PACKAGES) \
  $(PEER_PACKAGES) mpich openssh-server openssh-client slurmctld slurmd slurm-client munge

BENCH_PACKAGES = $(PEER_PACKAGES)
BENCH_ARGS ?=
# libFuzzer comes with clang's runtime libraries.
FUZZ_PACKAGES = clang libclang-rt-14-dev

.PHONY: all deps build deb run demo bench bench-torch bench-micro chaos soak strangers test test-unit \
  test-multiproc test-sanitize test-slow test-fresh fuzz clean

all: build

deps:
	@bash tools/install_deps.sh $(BUILD_PACKAGES)

build: deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)
	cmake --build $(BUILD) -j $(JOBS)

# The Debian packages libcollie0, libcollie-dev, collie-tools and, where the PyTorch backend is
# built, python3-collie-torch, from the Release build, into $(BUILD)/deb/ (docs/packages.md).
deb:
	@bash tools/install_deps.sh $(BUILD_PACKAGES) dpkg-dev file
	$(MAKE) build
	cd $(BUILD) && cpack -G DEB

# The main job: the bus-bandwidth table of a 4-rank AllReduce, 8 B to 64 MiB, checked.
run: build
	$(BUILD)/bin/collie-run -n $(RANKS) $(BUILD)/bin/collie-perf -b 8 -e 64M -f 4 -c 1

# The training demo: 2 ranks train an MLP on Fashion-MNIST for 10 epochs (the data set and
# gnuplot, for the curves, are Debian packages), then print the test accuracy and throughput.
demo:
	@bash tools/install_deps.sh $(BUILD_PACKAGES) dataset-fashion-mnist gnuplot-nox
	$(MAKE) build
	$(BUILD)/bin/collie-run -n 2 $(BUILD)/bin/collie-train --epochs 10 --batch 128 --lr 0.1 \
	  --momentum 0.5 --metrics $(BUILD)/demo-metrics.csv --plot $(BUILD)/demo-curves.png

# Collie against OpenMPI and Gloo on this machine, with its physical limits: a table per size,
# the speed targets, CSV, JSON and a plot in build/bench/compare-*/. 2 ranks, 8 B to 256 MiB;
# BENCH_ARGS="--ranks 4 --max 64M" and the like change that.
bench:
	@bash tools/install_deps.sh $(BUILD_PACKAGES) $(BENCH_PACKAGES)
	$(MAKE) build
	python3 perf/compare --bin $(BUILD)/bin $(BENCH_ARGS)

# torch.distributed over the collie backend against gloo: all_reduce per size, the binding's
# cost per call and a DDP step of the demo's MLP, 2 ranks; the busbw plot in build/bench/.
bench-torch:
	@bash tools/install_deps.sh $(BUILD_PACKAGES) $(TORCH_PACKAGES) gnuplot-nox
	$(MAKE) build
	mkdir -p $(BUILD)/bench
	PYTHONPATH=$(BUILD)/python /usr/bin/python3 perf/torch_compare --plot $(BUILD)/bench/torch-busbw.png

# The chaos campaign: TRIALS jobs of random calls, each with a random fault, judged and
# counted (tests/chaos/chaos.py); CHAOS_ARGS pass through.
TRIALS ?= 1000
CHAOS_ARGS ?=
chaos:
	@bash tools/install_deps.sh $(BUILD_PACKAGES) python3 iproute2 nftables procps
	$(MAKE) build
	python3 tests/chaos/chaos.py --bin $(BUILD)/bin --trials $(TRIALS) $(CHAOS_ARGS)

# The soak: SOAK_CALLS random calls (every collective, size up to 16 MiB, dtype, op,
# algorithm) on 4 ranks under AddressSanitizer and UndefinedBehaviorSanitizer, every result
# checked bit for bit; descriptors, mappings and threads must not grow after the first 1,000.
SOAK_CALLS ?= 100000
soak: deps
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCOLLIE_SANITIZE=address,undefined $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target collie-run collie-chaos-rank
	export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 && \
	  $(ASAN_BUILD)/bin/collie-run -n 4 $(ASAN_BUILD)/bin/collie-chaos-rank --seed $$(date +%s) \
	  --ops $(SOAK_CALLS) --max-bytes 16777216 --soak-from 1000 --quiet

# Strangers under load: 10,000 connections (500 a second) of garbage, wrong secrets, replayed
# and half hellos to the job's ports while 4 ranks run checked AllReduces; prints the job's
# bus bandwidth before and during them.
strangers:
	@bash tools/install_deps.sh $(BUILD_PACKAGES) python3 iproute2 procps
	$(MAKE) build
	python3 tests/chaos/strangers.py --bin $(BUILD)/bin --total 10000 --rate 500

# Google Benchmark micro-benchmarks: reduction kernels vs memcpy, frame encode/decode, shm and
# TCP ping-pong latency and streaming bandwidth.
bench-micro: build
	$(BUILD)/bin/collie-micro --benchmark_counters_tabular=true $(MICRO_ARGS)

# Unit tests in parallel, multi-process tests one at a time (they time real deadlines), the GPU
# tests (they skip without a GPU), then the same under AddressSanitizer and
# UndefinedBehaviorSanitizer (host paths only: CUDA is off there), less the launcher tests, which
# test the launchers rather than Collie's memory. Every tool is installed, so a skipped test
# but a GPU one fails it, at the end of the phase it skipped in; the list comes at the end.
CTEST = ctest --output-on-failure --output-junit
SKIPS = python3 tools/test_skips.py
test:
	@bash tools/install_deps.sh $(BUILD_PACKAGES) $(TEST_PACKAGES)
	$(MAKE) build
	rm -f $(BUILD)/junit-*.xml $(ASAN_BUILD)/junit-*.xml
	cd $(BUILD) && $(CTEST) junit-unit.xml -L unit -j $(JOBS)
	@$(SKIPS) --quiet $(BUILD)/junit-unit.xml
	cd $(BUILD) && $(CTEST) junit-multiproc.xml -L multiproc
	@$(SKIPS) --quiet $(BUILD)/junit-multiproc.xml
	cd $(BUILD) && $(CTEST) junit-gpu.xml -L gpu --no-tests=ignore
	$(MAKE) test-sanitize
	@$(SKIPS) --may-skip $(BUILD)/junit-gpu.xml $(BUILD)/junit-unit.xml \
	  $(BUILD)/junit-multiproc.xml $(ASAN_BUILD)/junit-unit.xml $(ASAN_BUILD)/junit-multiproc.xml

test-sanitize: deps
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCOLLIE_SANITIZE=address,undefined $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 && \
	  $(CTEST) junit-unit.xml -L unit -j $(JOBS) && \
	  $(CTEST) junit-multiproc.xml -L multiproc -LE launcher

# The tests too long for make test (ctest label slow), among them test-fresh.
test-slow: build
	cd $(BUILD) && ctest -L slow --output-on-failure

# The quick start on a new machine: make run, make test and make run again in a fresh clone of
# this one's HEAD, inside a pristine Debian root (tools/pristine_root.sh), each timed; the
# machine itself is left as it was. The log is in $(BUILD)/fresh/.
test-fresh: build
	cd $(BUILD) && ctest -L fresh --output-on-failure

# The libFuzzer targets of tests/fuzz (the wire parsers, the unique id, the environment and
# collie-perf's options), built by clang with ASan and UBSan in $(FUZZ_BUILD), each run for
# FUZZ_SECONDS from its corpus; fails on any crash or sanitizer report. `make test` replays the
# corpora only.
fuzz:
	@bash tools/install_deps.sh $(BUILD_PACKAGES) $(FUZZ_PACKAGES)
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCOLLIE_FUZZ=ON -DCOLLIE_WITH_TORCH=OFF -DCOLLIE_WITH_CUDA=OFF -DCOLLIE_WITH_NCCL=OFF \
	  -DCOLLIE_WITH_MPI=OFF -DCOLLIE_WITH_GLOO=OFF -DCOLLIE_BUILD_DEMO=OFF $(CMAKE_ARGS)
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target collie-fuzz
	bash tools/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
