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
 * With -t N (the two-thread control of docs/numa-effect-protocol.md, amendment 5), N threads share the buffer:
 * the N-1 extra threads are created after the first touch and print "thread tid=<tid>" before the "touched"
 * line; every thread moves to SRC, all are let free at the same time, and every thread makes passes over the
 * whole buffer (shared pages: NUMA balancing puts them in one numa_group). "done" counts the passes of all.
 *
 * With -F, before step 1 a child preferring node SRC (set_mempolicy MPOL_PREFERRED) takes SRC's free memory down
 * to its zones' "low" watermarks (/proc/zoneinfo) and sleeps: migrate_misplaced_page() then refuses to move pages to
 * SRC (migrate_balanced_pgdat() wants the high watermark free), so the buffer stays on PREF while the probe runs
 * on SRC. It is killed with the hogs.
 *
 * Usage: numa_probe -P PREF -S SRC [-m MB] [-d SECONDS] [-t THREADS] [-B] [-F] -g GOFILE
 * Exit status: 0 ok, 2 bad usage, 3 setup failure (message on stderr).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_HOGS 1024
#define MAX_THREADS 16

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

/* sum of the "low" watermarks (pages) of node's zones, from /proc/zoneinfo */
static long node_low_pages(int node)
{
	char line[256];
	long low = 0, v;
	int n = -1;
	FILE *f = fopen("/proc/zoneinfo", "r");

	if (!f)
		die("/proc/zoneinfo");
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Node %d, zone", &n) == 1)
			continue;
		if (n == node && sscanf(line, " low %ld", &v) == 1)
			low += v;
	}
	fclose(f);
	return low;
}

static long node_free_pages(int node, long page)
{
	char path[128], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/meminfo", node);
	f = fopen(path, "r");
	if (!f)
		die(path);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "MemFree:"))
			sscanf(strstr(line, "MemFree:") + 8, "%ld", &kb);
	fclose(f);
	return kb * 1024 / page;
}

/*
 * -F: a child that prefers node (MPOL_PREFERRED, so nothing is ever OOM-killed: once node is at its low
 * watermarks the allocator falls back to other nodes) allocates until node's free memory is at its zones' low
 * watermarks, then sleeps.
 */
static void fill_node(int node, cpu_set_t *run_on, long page)
{
	unsigned long mask[16] = { 0 };
	int ready[2];
	char c;
	pid_t pid;

	if (pipe(ready))
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		long target = node_low_pages(node), n = 0;
		long limit = node_free_pages(node, page) + (64L << 20) / page;

		close(ready[0]);
		mask[node / (8 * sizeof(long))] = 1UL << (node % (8 * sizeof(long)));
		if (sched_setaffinity(0, sizeof(*run_on), run_on) ||
		    syscall(SYS_set_mempolicy, 1 /* MPOL_PREFERRED */, mask, 8 * sizeof(mask)))
			_exit(3);
		while (node_free_pages(node, page) > target + 32 && n < limit) {
			char *p = mmap(NULL, 64 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			long i;

			if (p == MAP_FAILED)
				break;
			for (i = 0; i < 64; i++)
				p[i * page] = 1;
			n += 64;
		}
		printf("filled node=%d pages=%ld free=%ld low=%ld\n", node, n, node_free_pages(node, page), target);
		fflush(stdout);
		if (write(ready[1], "x", 1) != 1)
			_exit(3);
		for (;;)
			pause();
	}
	hogs[nhogs++] = pid;
	close(ready[1]);
	if (read(ready[0], &c, 1) != 1) {
		fprintf(stderr, "numa_probe: the filler of node %d failed\n", node);
		stop_hogs();
		exit(3);
	}
	close(ready[0]);
}

/* the threads of -t: the buffer, SRC's CPUs, all CPUs and the end of the window, shared */
static unsigned char *buf;
static size_t len;
static long page;
static cpu_set_t sset, all;
static long long end;
static pthread_barrier_t ready, at_src, go_free;
static long passes[MAX_THREADS];

/*
 * 4. onto SRC; wait until every thread is there; free (all at once). The main thread (t0 != NULL) takes the
 * window's start and sets its end while the others wait.
 */
static void to_src_then_free(long long *t0, int secs)
{
	if (sched_setaffinity(0, sizeof(sset), &sset))
		die("sched_setaffinity(SRC)");
	while (!CPU_ISSET(sched_getcpu(), &sset))
		sched_yield();
	pthread_barrier_wait(&at_src);
	if (t0) {
		*t0 = now_ns();
		end = *t0 + (long long)secs * 1000000000LL;
	}
	pthread_barrier_wait(&go_free);
	if (sched_setaffinity(0, sizeof(all), &all))
		die("sched_setaffinity(all)");
}

/* 5. passes over the buffer until the window ends */
static void run_passes(int idx)
{
	size_t off;

	while (now_ns() < end) {
		for (off = 0; off < len; off += page)
			buf[off]++;
		passes[idx]++;
	}
}

static void *thread_main(void *arg)
{
	int idx = (int)(long)arg;

	printf("thread tid=%ld\n", (long)syscall(SYS_gettid));
	fflush(stdout);
	pthread_barrier_wait(&ready);
	pthread_barrier_wait(&ready); /* the main thread waited for GO and started the hogs */
	to_src_then_free(NULL, 0);
	run_passes(idx);
	return NULL;
}

static void on_signal(int sig)
{
	stop_hogs();
	signal(sig, SIG_DFL);
	raise(sig);
}

int main(int argc, char **argv)
{
	int pref = -1, src = -1, mb = 64, secs = 60, busy = 0, fill = 0, nthreads = 1, opt, i;
	const char *go = NULL;
	cpu_set_t pset;
	pthread_t threads[MAX_THREADS];
	long total = 0;
	size_t off;
	long long t0, waited;

	page = sysconf(_SC_PAGESIZE);
	while ((opt = getopt(argc, argv, "P:S:m:d:t:BFg:")) != -1) {
		switch (opt) {
		case 'P': pref = atoi(optarg); break;
		case 'S': src = atoi(optarg); break;
		case 'm': mb = atoi(optarg); break;
		case 'd': secs = atoi(optarg); break;
		case 't': nthreads = atoi(optarg); break;
		case 'B': busy = 1; break;
		case 'F': fill = 1; break;
		case 'g': go = optarg; break;
		default:
			fprintf(stderr,
				"usage: numa_probe -P PREF -S SRC [-m MB] [-d SECONDS] [-t THREADS] [-B] [-F] -g GOFILE\n");
			return 2;
		}
	}
	if (pref < 0 || src < 0 || pref == src || mb < 1 || secs < 1 || nthreads < 1 || nthreads > MAX_THREADS || !go) {
		fprintf(stderr,
			"numa_probe: need -P and -S (different nodes), -m >= 1, -d >= 1, -t 1..%d and -g GOFILE\n",
			MAX_THREADS);
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

	if (fill)
		fill_node(src, &pset, page);

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
	if (pthread_barrier_init(&ready, NULL, nthreads) || pthread_barrier_init(&at_src, NULL, nthreads) ||
	    pthread_barrier_init(&go_free, NULL, nthreads))
		die("pthread_barrier_init");
	for (i = 1; i < nthreads; i++) {
		errno = pthread_create(&threads[i], NULL, thread_main, (void *)(long)i);
		if (errno)
			die("pthread_create");
	}
	pthread_barrier_wait(&ready); /* every "thread" line is out before "touched" */
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

	/* 4. onto SRC (every thread), then free */
	pthread_barrier_wait(&ready);
	to_src_then_free(&t0, secs);
	printf("start t=%lld cpu=%d\n", t0, sched_getcpu());
	fflush(stdout);

	/* 5. passes over the buffer */
	run_passes(0);
	for (i = 1; i < nthreads; i++)
		pthread_join(threads[i], NULL);
	for (i = 0; i < nthreads; i++)
		total += passes[i];
	stop_hogs();
	printf("done t=%lld passes=%ld\n", now_ns(), total);
	return 0;
}
