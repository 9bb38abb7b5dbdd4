// SPDX-License-Identifier: GPL-2.0
/*
 * Naps for a test script's polling loops, without a process per nap.
 *
 *   napper ASK DONE
 *
 * ASK and DONE are FIFOs. For every byte a script writes to ASK, napper
 * sleeps 0.2 s and then writes a newline to DONE, which the script's
 * `read` waits for; bytes that came meanwhile are answered with it. In
 * the test VMs (TCG, debug kernel) a process start costs tens of
 * milliseconds of CPU or more: a VM of two vCPUs polling at a barrier
 * with `busybox sleep 0.2` kept about half a vCPU busy, on the host
 * cores the working VMs need, against 0.3 with napper. guest.sh starts
 * one napper per script; it ends when the last writer of ASK closes it
 * or the reader of DONE is gone.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	const struct timespec nap = { .tv_sec = 0, .tv_nsec = 200 * 1000 * 1000 };
	char asked[64];
	int ask, done;

	if (argc != 3) {
		fprintf(stderr, "usage: napper ASK DONE\n");
		return 2;
	}
	/* A reader that went away ends napper with EPIPE, not a signal. */
	signal(SIGPIPE, SIG_IGN);
	/* The script opens ASK for writing, then DONE for reading: same order. */
	ask = open(argv[1], O_RDONLY);
	if (ask < 0) {
		perror(argv[1]);
		return 1;
	}
	done = open(argv[2], O_WRONLY);
	if (done < 0) {
		perror(argv[2]);
		return 1;
	}
	for (;;) {
		struct pollfd more = { .fd = ask, .events = POLLIN };
		ssize_t got = read(ask, asked, 1), answers;

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return 0;
		while (nanosleep(&nap, NULL) < 0 && errno == EINTR)
			;
		/* Who asked meanwhile (another poller of the script) wakes now. */
		answers = 1;
		if (poll(&more, 1, 0) == 1 && (more.revents & POLLIN)) {
			got = read(ask, asked, sizeof(asked));
			if (got > 0)
				answers += got;
		}
		memset(asked, '\n', answers);
		if (write(done, asked, answers) != answers)
			return 0;
	}
}
