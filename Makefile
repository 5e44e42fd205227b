# A thin wrapper around CMake (as neovim's is).  The two commands:
#   make demo   install missing dependencies, build, run one agent turn
#   make test   the same set-up, then the whole ctest suite
# CMake's own output goes to $(BUILD)/configure.log and, for `make demo`,
# $(BUILD)/build.log; either is shown when its step fails.
BUILD ?= build
CMAKE_FLAGS ?=
JOBS ?= 2
DEMO_PROMPT ?= Say hello, then tell me what 2 to the power 10 is.

.PHONY: all deps configure build demo test clean

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
	@cmake --build $(BUILD) -j$(JOBS) >$(BUILD)/build.log 2>&1 || \
	  { tail -n 40 $(BUILD)/build.log; \
	    echo "weir: the build failed; its whole output is in $(BUILD)/build.log" >&2; exit 1; }
	@id=demo-$$(date +%Y%m%d-%H%M%S) && \
	  $(BUILD)/bin/weir run -s $$id "$(DEMO_PROMPT)" && \
	  printf '\nnext: %-42s # your sessions, newest first\n      %-42s # this one, turn by turn\n' \
	    "$(BUILD)/bin/weir sessions" "$(BUILD)/bin/weir log $$id"

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

clean:
	rm -rf $(BUILD)
