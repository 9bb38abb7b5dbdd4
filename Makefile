# SPDX-License-Identifier: GPL-2.0
#
# make check   build everything (installing what is missing) and run all tests
# make demo    boot a VM, create srnic0 and show it as users see it
# make modules build srnic.ko (KDIR=<kernel build dir> for another kernel)
# make install install srnic.ko and iblan.ko for KDIR's kernel, the man
#              pages, the boot-time unit and the DKMS source tree
#              (INSTALL_MOD_PATH=<root>: all of it under that root)
# make dkms-install  the same through DKMS, which rebuilds for new kernels
# make fuzz    the host fuzzer of rust/pure for FUZZ_SECONDS (default 300)
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

.PHONY: all setup kernel modules test-progs host-test fuzz fuzz-guest lint vm-test check demo
.PHONY: bench clean
.PHONY: install install-modules install-man install-units install-dkms-source install-iproute2
.PHONY: dkms-install uninstall dkms-uninstall

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

# Includes a bounded fuzz run of every target (FUZZ_TEST_SECONDS each,
# default 1.5; see Documentation/srnic/build.rst).
host-test:
	cd rust/pure && cargo test --quiet
	python3 -m unittest discover -s tests/bench -p 'test_*.py' -q

# The long fuzz run: every target in turn for FUZZ_SECONDS in all, built
# with SanitizerCoverage's edge counters (stable rustc, no libFuzzer).
# New inputs go to out/fuzz/corpus, failures to out/fuzz/crashes.
FUZZ_SECONDS ?= 300
FUZZ_TARGETS ?=
FUZZ_RUSTFLAGS := -Cpasses=sancov-module \
	-Cllvm-args=-sanitizer-coverage-level=3 \
	-Cllvm-args=-sanitizer-coverage-inline-8bit-counters
fuzz:
	cd rust/pure && RUSTFLAGS="$(FUZZ_RUSTFLAGS)" cargo run --quiet \
		--profile fuzz --target-dir target/fuzz --example fuzz -- \
		--seconds $(FUZZ_SECONDS) --corpus-out $(CURDIR)/out/fuzz/corpus \
		--crashes $(CURDIR)/out/fuzz/crashes $(FUZZ_TARGETS)

# rustfmt over every Rust file (the kernel's style: edition 2021, default
# width), clippy over the host crate, and clippy over the kernel crates
# (srnic, iblan, the in-kernel test) with the kernel's own lint set
# (Kbuild's CLIPPY=1, by the clippy of the rustc the kernel uses), warnings
# as errors; no `unsafe` or raw `bindings::` in drivers/.
# scripts/check-install checks what make install ships: man pages,
# dkms.conf, the unit.
lint: $(MODULES_NEED)
	rustfmt --edition 2021 --check $$(git ls-files '*.rs')
	@# Drivers reach the kernel only through rust/kapi's safe wrappers.
	@! git grep -n -e unsafe -e 'bindings::' -- 'drivers/*.rs' || \
		{ echo "make lint: unsafe code or raw bindings in drivers/ (move it behind rust/kapi)" >&2; exit 1; }
	cd rust/pure && cargo clippy --quiet --all-targets -- -D warnings
	$(MAKE) -C $(KDIR) M=$(CURDIR) $(KBUILD_ARGS) CLIPPY=1 CLIPPY_DRIVER=/usr/bin/clippy-driver modules
	scripts/check-install

vm-test: modules test-progs
	tests/run

check: setup lint host-test modules test-progs
	scripts/stack-frames *.ko
	tests/run

demo: modules
	qemu/demo

# Installation. The modules go through the kernel's own modules_install
# for external modules into /lib/modules/<KDIR's release>/$(INSTALL_MOD_DIR),
# under INSTALL_MOD_PATH when it is given, then depmod indexes them there.
# modules_install installs every module of the build (modules.order),
# the in-kernel test module too; that one is for the test VMs only, so it
# is taken out again before the index is made. DESTDIR (default:
# INSTALL_MOD_PATH) stages the rest under the same root. The package's
# version is dkms.conf's PACKAGE_VERSION (make lint checks they agree).
VERSION := 1.0
INSTALL_MOD_DIR ?= extra
# The kernel's make runs in KDIR: hand it an absolute root.
ifneq ($(INSTALL_MOD_PATH),)
override INSTALL_MOD_PATH := $(abspath $(INSTALL_MOD_PATH))
endif
PREFIX ?= /usr/local
DESTDIR ?= $(INSTALL_MOD_PATH)
MAN_DIR := $(or $(INSTALL_MAN_PATH),$(DESTDIR)$(PREFIX)/share/man)
UNIT_DIR := $(or $(INSTALL_UNIT_PATH),$(DESTDIR)$(PREFIX)/lib/systemd/system)
DKMS_SOURCE_DIR := $(DESTDIR)/usr/src/srnic-$(VERSION)
# Where `ip` looks for link plugins: its compiled-in IP_LIB_DIR, which is
# /usr/lib/<multiarch>/ip on Debian (not under PREFIX: ip looks nowhere else).
IP_LIB_DIR ?= $(DESTDIR)/usr/lib/$(shell gcc -print-multiarch 2>/dev/null)/ip
INSTALLED_MODULES := srnic iblan
# What DKMS needs to build the modules: no tests, no build products.
DKMS_SOURCES = Kbuild Makefile dkms.conf $$(find drivers rust include -path rust/pure/target -prune \
	-o -type f \( -name '*.rs' -o -name '*.c' -o -name '*.h' -o -name bindgen_parameters \) \
	! -name bindings_generated.rs -print)
DEPMOD := PATH=$$PATH:/usr/sbin:/sbin depmod
MODINFO := PATH=$$PATH:/usr/sbin:/sbin modinfo

install: install-modules install-man install-units install-dkms-source install-iproute2

install-modules:
	@release=$$(cat $(KDIR)/include/config/kernel.release) || exit 1; \
	for m in $(INSTALLED_MODULES); do \
		[ -f $$m.ko ] || { echo "make install: $$m.ko is not built (make modules)" >&2; exit 1; }; \
		built=$$($(MODINFO) -F vermagic $$m.ko | cut -d' ' -f1); \
		[ "$$built" = "$$release" ] || { echo "make install: $$m.ko is built for $$built," \
			"KDIR is $$release: build and install with the same KDIR" >&2; exit 1; }; \
	done
	$(MAKE) -C $(KDIR) M=$(CURDIR) $(KBUILD_ARGS) INSTALL_MOD_PATH="$(INSTALL_MOD_PATH)" \
		INSTALL_MOD_DIR=$(INSTALL_MOD_DIR) modules_install
	release=$$(cat $(KDIR)/include/config/kernel.release) && \
	rm -f "$(INSTALL_MOD_PATH)/lib/modules/$$release/$(INSTALL_MOD_DIR)"/srnic_verbs_test.ko* && \
	$(DEPMOD) $(if $(INSTALL_MOD_PATH),-b "$(INSTALL_MOD_PATH)") -a "$$release"

install-man:
	install -d "$(MAN_DIR)/man7" "$(MAN_DIR)/man4"
	install -m 644 Documentation/man/srnic.7 "$(MAN_DIR)/man7/"
	install -m 644 Documentation/man/iblan.4 "$(MAN_DIR)/man4/"

install-units:
	install -d "$(UNIT_DIR)"
	install -m 644 scripts/systemd/srnic@.service "$(UNIT_DIR)/"

install-dkms-source:
	rm -rf "$(DKMS_SOURCE_DIR)"
	install -d "$(DKMS_SOURCE_DIR)"
	cp --parents $(DKMS_SOURCES) "$(DKMS_SOURCE_DIR)/"

# DKMS builds and installs the modules for the running kernel and again
# for every kernel installed later (AUTOINSTALL in dkms.conf). DKMS_ARGS
# adds options to dkms install (for example -k RELEASE).
# `ip -d link show` for iblan netdevs: iproute2's plugin for kind iblan.
install-iproute2:
	install -d "$(IP_LIB_DIR)"
	$(CC) -std=gnu11 -Wall -Wextra -Werror -O2 -shared -fPIC \
		-o "$(IP_LIB_DIR)/link_iblan.so" tools/iproute2/link_iblan.c

dkms-install: install-dkms-source install-man install-units install-iproute2
	dkms status -m srnic -v $(VERSION) | grep -q . || dkms add -m srnic -v $(VERSION)
	dkms install -m srnic -v $(VERSION) $(DKMS_ARGS)

uninstall:
	release=$$(cat $(KDIR)/include/config/kernel.release) && \
	rm -f $(foreach m,$(INSTALLED_MODULES),"$(INSTALL_MOD_PATH)/lib/modules/$$release/$(INSTALL_MOD_DIR)"/$(m).ko*) && \
	$(DEPMOD) $(if $(INSTALL_MOD_PATH),-b "$(INSTALL_MOD_PATH)") -a "$$release"
	rm -f "$(MAN_DIR)/man7/srnic.7" "$(MAN_DIR)/man4/iblan.4" "$(UNIT_DIR)/srnic@.service"
	rm -f "$(IP_LIB_DIR)/link_iblan.so"
	rm -rf "$(DKMS_SOURCE_DIR)"

dkms-uninstall:
	dkms remove -m srnic -v $(VERSION) --all
	rm -rf "$(DKMS_SOURCE_DIR)"

# The guest fuzzer (tests/cases/guest_fuzz.sh) for FUZZ_SECONDS (default an
# hour) instead of the minute of `make check`; FUZZ_SEED=N replays a seed.
# FUZZ_SECONDS given on the command line or in the environment counts;
# the host fuzzer's default above does not.
GUEST_FUZZ_SECONDS = $(if $(filter file,$(origin FUZZ_SECONDS)),3600,$(FUZZ_SECONDS))
fuzz-guest: modules test-progs
	SRNIC_CASE_FUZZ_SECONDS=$(GUEST_FUZZ_SECONDS) \
		$(if $(FUZZ_SEED),SRNIC_CASE_FUZZ_SEED=$(FUZZ_SEED)) \
		SRNIC_TEST_TIMEOUT=$$(( $(GUEST_FUZZ_SECONDS) + 300 )) tests/run guest_fuzz

# The benchmark (scripts/bench): its own lean kernel and build of srnic.ko,
# both apart from the test ones. QUICK=1 for the short run.
bench:
	scripts/bench $(if $(filter-out 0,$(QUICK)),--quick)

clean:
	-$(MAKE) -C $(KDIR) M=$(CURDIR) $(KBUILD_ARGS) clean
	rm -rf rust/pure/target out
