/*
 * numaforge NUMA probe: the "preferred node full, source node spare" scenario of docs/numa-effect-protocol.md.
 *
 * 1. Pins itself to the CPUs of node PREF and first-touches MB megabytes there (MADV_DONTFORK: the hogs
 *    forked later do not share the buffer, so no copy-on-write moves it).
 * 2. Prints "touched pid=<pid> t=<ns>" (CLOCK_BOOTTIME: the clock of trace_clock boot and /proc/uptime) and
 *    waits until the file GO exists (the caller sets up its trace filters on the pid first; 120 s at most).
 * 3. Forks one busy loop pinned to each CPU of PREF (and of SRC too with -B: the "source node busy" control).
 * 4. Pins itself to the CPUs of node SRC until it runs there, then allows every online CPU: from here on the
 *    scheduler decides. Prints "start t=<ns>".
 * 5. Makes passes over its buffer (one read-modify-write per page) for SECONDS, kills the hogs and prints
 *    "done t=<ns> passes=<n>".
 *
 * Usage: numa_probe -P PREF -S SRC [-m MB] [-d SECONDS] [-B] -g GOFILE
 * Exit status: 0 ok, 2 bad usage, 3 setup failure (message on stderr).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_HOGS 1024

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "numa_probe: %s: %s\n", what, strerror(errno));
	exit(3);
}

/* "0-3,8,10-11" from /sys/devices/system/node/nodeN/cpulist (or /sys/devices/system/cpu/online) */
static int read_cpulist(const char *path, cpu_set_t *set)
{
	char buf[4096];
	char *p, *tok, *save = NULL;
	FILE *f = fopen(path, "r");
	int n = 0;

	CPU_ZERO(set);
	if (!f)
		return -1;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return 0;
	}
	fclose(f);
	for (p = buf; (tok = strtok_r(p, ",\n", &save)); p = NULL) {
		int a, b;

		if (sscanf(tok, "%d-%d", &a, &b) == 2) {
			for (; a <= b; a++, n++)
				CPU_SET(a, set);
		} else if (sscanf(tok, "%d", &a) == 1) {
			CPU_SET(a, set);
			n++;
		}
	}
	return n;
}

static int node_cpus(int node, cpu_set_t *set)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", node);
	return read_cpulist(path, set);
}

static pid_t hogs[MAX_HOGS];
static int nhogs;

static void start_hogs(cpu_set_t *cpus)
{
	int c;

	for (c = 0; c < CPU_SETSIZE && nhogs < MAX_HOGS; c++) {
		cpu_set_t one;
		pid_t pid;

		if (!CPU_ISSET(c, cpus))
			continue;
		pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			volatile unsigned long spin = 0;

			CPU_ZERO(&one);
			CPU_SET(c, &one);
			if (sched_setaffinity(0, sizeof(one), &one))
				_exit(3);
			for (;;)
				spin++;
		}
		hogs[nhogs++] = pid;
	}
}

static void stop_hogs(void)
{
	int i;

	for (i = 0; i < nhogs; i++)
		kill(hogs[i], SIGKILL);
	for (i = 0; i < nhogs; i++)
		waitpid(hogs[i], NULL, 0);
	nhogs = 0;
}

static void on_signal(int sig)
{
	stop_hogs();
	signal(sig, SIG_DFL);
	raise(sig);
}

int main(int argc, char **argv)
{
	int pref = -1, src = -1, mb = 64, secs = 60, busy = 0, opt;
	const char *go = NULL;
	cpu_set_t pset, sset, all;
	long page = sysconf(_SC_PAGESIZE), passes = 0;
	size_t len, off;
	unsigned char *buf;
	long long t0, end, waited;

	while ((opt = getopt(argc, argv, "P:S:m:d:Bg:")) != -1) {
		switch (opt) {
		case 'P': pref = atoi(optarg); break;
		case 'S': src = atoi(optarg); break;
		case 'm': mb = atoi(optarg); break;
		case 'd': secs = atoi(optarg); break;
		case 'B': busy = 1; break;
		case 'g': go = optarg; break;
		default:
			fprintf(stderr, "usage: numa_probe -P PREF -S SRC [-m MB] [-d SECONDS] [-B] -g GOFILE\n");
			return 2;
		}
	}
	if (pref < 0 || src < 0 || pref == src || mb < 1 || secs < 1 || !go) {
		fprintf(stderr, "numa_probe: need -P and -S (different nodes), -m >= 1, -d >= 1 and -g GOFILE\n");
		return 2;
	}
	if (node_cpus(pref, &pset) < 1 || node_cpus(src, &sset) < 1) {
		fprintf(stderr, "numa_probe: node %d or %d has no CPUs (or does not exist)\n", pref, src);
		return 3;
	}
	if (read_cpulist("/sys/devices/system/cpu/online", &all) < 1)
		die("/sys/devices/system/cpu/online");
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);

	/* 1. first touch on PREF */
	if (sched_setaffinity(0, sizeof(pset), &pset))
		die("sched_setaffinity(PREF)");
	len = (size_t)mb << 20;
	buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		die("mmap");
	if (madvise(buf, len, MADV_DONTFORK))
		die("madvise(MADV_DONTFORK)");
	for (off = 0; off < len; off += page)
		buf[off] = 1;
	printf("touched pid=%d t=%lld\n", getpid(), now_ns());
	fflush(stdout);

	/* 2. wait for the caller's trace setup */
	for (waited = 0; access(go, F_OK) != 0; waited++) {
		if (waited > 12000) {
			fprintf(stderr, "numa_probe: %s did not appear within 120 s\n", go);
			return 3;
		}
		usleep(10000);
	}

	/* 3. hogs on PREF (and SRC with -B) */
	start_hogs(&pset);
	if (busy)
		start_hogs(&sset);

	/* 4. onto SRC, then free */
	if (sched_setaffinity(0, sizeof(sset), &sset))
		die("sched_setaffinity(SRC)");
	while (!CPU_ISSET(sched_getcpu(), &sset))
		sched_yield();
	if (sched_setaffinity(0, sizeof(all), &all))
		die("sched_setaffinity(all)");
	t0 = now_ns();
	printf("start t=%lld cpu=%d\n", t0, sched_getcpu());
	fflush(stdout);

	/* 5. passes over the buffer */
	end = t0 + (long long)secs * 1000000000LL;
	while (now_ns() < end) {
		for (off = 0; off < len; off += page)
			buf[off]++;
		passes++;
	}
	stop_hogs();
	printf("done t=%lld passes=%ld\n", now_ns(), passes);
	return 0;
}
