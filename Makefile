# A thin wrapper around CMake (as neovim's is).  The commands:
#   make demo   install missing dependencies, build, run one agent turn
#   make test   the same set-up, then the whole ctest suite
#   make bench  every bench in a Release tree, figures in bench/results.md
# CMake's own output goes to $(BUILD)/configure.log and, for `make demo` and
# `make test`, $(BUILD)/build.log (cmake/quiet-build.sh: one line on stderr,
# the build's percentage redrawn in place on a terminal); either is shown
# when its step fails.  `make test` then shows ctest's own progress.
BUILD ?= build
CMAKE_FLAGS ?=
JOBS ?= 2
DEMO_PROMPT ?= Say hello, then tell me what 2 to the power 10 is.

.PHONY: all deps configure build demo test bench clean

all: build

deps:
	@sh cmake/install-deps.sh

$(BUILD)/CMakeCache.txt:
	@mkdir -p $(BUILD)
	@echo "weir: configuring $(BUILD) (log: $(BUILD)/configure.log)"
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >$(BUILD)/configure.log 2>&1 || \
	  { cat $(BUILD)/configure.log; rm -f $(BUILD)/CMakeCache.txt; exit 1; }

configure: deps $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j$(JOBS)

# The demo builds quietly, then runs one turn in a new session and says
# what to try next.
demo: configure
	@sh cmake/quiet-build.sh $(BUILD) $(JOBS)
	@id=demo-$$(date +%Y%m%d-%H%M%S) && \
	  $(BUILD)/bin/weir run -s $$id "$(DEMO_PROMPT)" && \
	  printf '\nnext: %-42s # your sessions, newest first\n      %-42s # this one, turn by turn\n' \
	    "$(BUILD)/bin/weir sessions" "$(BUILD)/bin/weir log $$id"

test: configure
	@sh cmake/quiet-build.sh $(BUILD) $(JOBS)
	@ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

# Benchmarks measure, never assert: bench/run.sh builds them in its own
# Release tree (build-bench-release) and prints one line per bench;
# bench/report.sh writes those figures, the machine and the date to
# bench/results.md, each with its ratio to the floor of the same run.
bench:
	@sh bench/report.sh bench/results.md

clean:
	rm -rf $(BUILD)
