// SPDX-License-Identifier: GPL-2.0
/*
 * The memory-copy limit of one CPU, for `make bench`: the bandwidth of
 * memcpy() between two buffers far larger than the caches, which bounds
 * what any soft RDMA device can move (an RDMA WRITE between two memory
 * regions of one machine copies every byte once).
 *
 *   memcpy_bw [MIB [SECONDS]]
 *
 * copies MIB mebibytes (default 64) from one buffer to another, over and
 * over for at least SECONDS (default 2) after one untimed warm-up copy,
 * and prints
 *
 *   memcpy_bw: <bytes> bytes x <copies> in <seconds> s: <MiB/s> MiB/s
 *
 * The program runs on whichever CPU the scheduler gives it; pin it with
 * taskset to choose.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 0) : 64;
	double seconds = argc > 2 ? strtod(argv[2], NULL) : 2.0;
	size_t bytes = mib << 20;
	unsigned long copies = 0;
	volatile unsigned char sink;
	unsigned char *src, *dst;
	double start, elapsed;

	if (mib == 0 || seconds <= 0) {
		fprintf(stderr, "usage: memcpy_bw [MIB [SECONDS]]\n");
		return 2;
	}
	src = aligned_alloc(4096, bytes);
	dst = aligned_alloc(4096, bytes);
	if (!src || !dst) {
		fprintf(stderr, "memcpy_bw: cannot allocate 2 x %zu MiB\n", mib);
		return 1;
	}
	/* Fault every page in, then one untimed copy. */
	memset(src, 0x5a, bytes);
	memset(dst, 0xa5, bytes);
	memcpy(dst, src, bytes);

	start = now();
	do {
		/* Alternate the direction so that no copy is of equal bytes. */
		if (copies & 1)
			memcpy(src, dst, bytes);
		else
			memcpy(dst, src, bytes);
		copies++;
		elapsed = now() - start;
	} while (elapsed < seconds);
	sink = dst[bytes / 2] ^ src[bytes / 3];
	(void)sink;

	printf("memcpy_bw: %zu bytes x %lu in %.3f s: %.1f MiB/s\n", bytes, copies, elapsed,
	       (double)bytes * copies / elapsed / (1 << 20));
	free(src);
	free(dst);
	return 0;
}
