# SPDX-License-Identifier: GPL-2.0
#
# make check   build everything (installing what is missing) and run all tests
# make demo    boot a VM, create srnic0 and show it as users see it
# make modules build srnic.ko (KDIR=<kernel build dir> for another kernel)
# make fuzz-guest  the guest fuzzer for FUZZ_SECONDS (default 3600)
# make bench   srnic against rxe, siw and the VM's limits on a lean kernel
#              (QUICK=1: a short run); results in out/bench/
#
# The test kernel is built once from Debian's linux-source-6.12 and the
# fragments in qemu/config/, and cached in ~/.cache/srnic (SRNIC_CACHE).

SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)

# The project's test kernel unless KDIR is given: `make kernel` builds it
# (or finds it in the cache) and records where it is in out/kernel-dir.
KERNEL_RECORD := out/kernel-dir
KERNEL_CACHE := $(or $(SRNIC_CACHE),$(HOME)/.cache/srnic)
ifeq ($(origin KDIR),undefined)
KDIR = $$(cat $(CURDIR)/$(KERNEL_RECORD))/build
MODULES_NEED := kernel
endif

KBUILD_ARGS := LLVM=1 RUSTC=/usr/bin/rustc HOSTRUSTC=/usr/bin/rustc BINDGEN=bindgen

.PHONY: all setup kernel modules test-progs host-test lint vm-test check demo bench clean fuzz-guest

all: modules

setup:
	scripts/setup.sh

kernel: setup
	@mkdir -p out
	@mkdir -p $(KERNEL_CACHE)
	flock $(KERNEL_CACHE)/.lock scripts/build-kernel.sh > $(KERNEL_RECORD).tmp
	@# Mark the kernel as used, so the cache keeps it when pruning.
	touch "$$(cat $(KERNEL_RECORD).tmp)"
	mv $(KERNEL_RECORD).tmp $(KERNEL_RECORD)
	@echo "test kernel: $$(cat $(KERNEL_RECORD))"

modules: $(MODULES_NEED)
	$(MAKE) -C $(KDIR) M=$(CURDIR) $(KBUILD_ARGS) modules

# User-space programs the VM tests run (built on the host, whose userland
# the guests share).
test-progs: setup
	$(MAKE) -C tests/progs OUT=$(CURDIR)/out/progs

host-test:
	cd rust/pure && cargo test --quiet

# rustfmt over every Rust file (the kernel's style: edition 2021, default
# width) and clippy over the host crate. The modules themselves build with
# warnings as errors (Kbuild).
lint:
	rustfmt --edition 2021 --check $$(git ls-files '*.rs')
	cd rust/pure && cargo clippy --quiet --all-targets -- -D warnings

vm-test: modules test-progs
	tests/run

check: setup lint host-test modules test-progs
	scripts/stack-frames *.ko
	tests/run

demo: modules
	qemu/demo

# The guest fuzzer (tests/cases/guest_fuzz.sh) for FUZZ_SECONDS (default an
# hour) instead of the minute of `make check`; FUZZ_SEED=N replays a seed.
FUZZ_SECONDS ?= 3600
fuzz-guest: modules test-progs
	SRNIC_CASE_FUZZ_SECONDS=$(FUZZ_SECONDS) $(if $(FUZZ_SEED),SRNIC_CASE_FUZZ_SEED=$(FUZZ_SEED)) \
		SRNIC_TEST_TIMEOUT=$$(( $(FUZZ_SECONDS) + 300 )) tests/run guest_fuzz

# The benchmark (scripts/bench): its own lean kernel and build of srnic.ko,
# both apart from the test ones. QUICK=1 for the short run.
bench:
	scripts/bench $(if $(filter-out 0,$(QUICK)),--quick)

clean:
	-$(MAKE) -C $(KDIR) M=$(CURDIR) $(KBUILD_ARGS) clean
	rm -rf rust/pure/target out
