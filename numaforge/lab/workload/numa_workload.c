/*
 * numaforge NUMA-balancing workload (shipped to hosts by `invoke validate`, built static with gcc).
 *
 * Makes the scheduler's "preferred node is full" path observable on hosts with >= 3 NUMA nodes:
 * PROCS independent processes (no shared memory, so no numa_group) each first-touch MB megabytes while
 * pinned to the CPUs of node 0 and keep touching them for WARM seconds (NUMA balancing scans a few times
 * and node 0 becomes the preferred node); then they alternate UNPINNED seconds on every CPU and PINNED
 * seconds back on node 0 until DURATION seconds have passed.
 *
 * Output (stdout, one line per event, parsed by numaforge.numa_effect.parse_phases):
 *   phase pid=<pid> kind=<warm|unpinned|pinned|done> t=<CLOCK_MONOTONIC ns> preferred=<nid or -1>
 * `preferred` is numa_preferred_nid from /proc/self/sched (CONFIG_SCHED_DEBUG), -1 when unavailable.
 *
 * Usage: numa_workload [-p PROCS] [-m MB] [-w WARM] [-u UNPINNED] [-r PINNED] [-d DURATION] [-n NODE]
 * Exit status: 0 ok, 2 bad usage, 3 setup failure (message on stderr).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int preferred_nid(void)
{
	char line[256];
	int nid = -1;
	FILE *f = fopen("/proc/self/sched", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "numa_preferred_nid", 18) == 0) {
			char *colon = strchr(line, ':');
			if (colon)
				nid = atoi(colon + 1);
		}
	}
	fclose(f);
	return nid;
}

/* Parse a sysfs cpulist ("0-3,8,10-11") into a cpu_set_t. Returns number of CPUs set. */
static int parse_cpulist(const char *text, cpu_set_t *set)
{
	int n = 0;
	const char *p = text;
	CPU_ZERO(set);
	while (*p && *p != '\n') {
		char *end;
		long a = strtol(p, &end, 10), b;
		if (end == p)
			return -1;
		b = a;
		if (*end == '-') {
			p = end + 1;
			b = strtol(p, &end, 10);
			if (end == p)
				return -1;
		}
		for (long c = a; c <= b && c < CPU_SETSIZE; c++) {
			CPU_SET(c, set);
			n++;
		}
		p = end;
		if (*p == ',')
			p++;
	}
	return n;
}

static int node_cpus(int node, cpu_set_t *set)
{
	char path[128], buf[4096];
	FILE *f;
	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", node);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	return parse_cpulist(buf, set);
}

static void phase(const char *kind)
{
	printf("phase pid=%d kind=%s t=%lld preferred=%d\n", getpid(), kind, now_ns(), preferred_nid());
	fflush(stdout);
}

/* Touch every page of the buffer (read-modify-write) until `until` (monotonic ns). */
static void touch_until(volatile unsigned char *buf, size_t len, long long until)
{
	long page = sysconf(_SC_PAGESIZE);
	while (now_ns() < until)
		for (size_t i = 0; i < len; i += page)
			buf[i]++;
}

static int child(size_t mb, int warm, int unpinned, int pinned, int duration, cpu_set_t *home, cpu_set_t *all)
{
	size_t len = mb << 20;
	long long t0, end;
	unsigned char *buf;

	if (sched_setaffinity(0, sizeof(*home), home) != 0) {
		fprintf(stderr, "numa_workload: sched_setaffinity(home): %s\n", strerror(errno));
		return 3;
	}
	buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED) {
		fprintf(stderr, "numa_workload: mmap %zu MB: %s\n", mb, strerror(errno));
		return 3;
	}
	memset(buf, 1, len); /* first touch: pages land on the home node */
	t0 = now_ns();
	end = t0 + (long long)duration * 1000000000LL;
	phase("warm");
	touch_until(buf, len, t0 + (long long)warm * 1000000000LL);
	while (now_ns() < end) {
		long long stop;
		sched_setaffinity(0, sizeof(*all), all);
		phase("unpinned");
		stop = now_ns() + (long long)unpinned * 1000000000LL;
		touch_until(buf, len, stop < end ? stop : end);
		if (now_ns() >= end)
			break;
		sched_setaffinity(0, sizeof(*home), home);
		phase("pinned");
		stop = now_ns() + (long long)pinned * 1000000000LL;
		touch_until(buf, len, stop < end ? stop : end);
	}
	phase("done");
	return 0;
}

int main(int argc, char **argv)
{
	int procs = 3, warm = 6, unpinned = 8, pinned = 4, duration = 60, node = 0, opt;
	size_t mb = 32;
	cpu_set_t home, all;

	while ((opt = getopt(argc, argv, "p:m:w:u:r:d:n:")) != -1) {
		switch (opt) {
		case 'p': procs = atoi(optarg); break;
		case 'm': mb = (size_t)atol(optarg); break;
		case 'w': warm = atoi(optarg); break;
		case 'u': unpinned = atoi(optarg); break;
		case 'r': pinned = atoi(optarg); break;
		case 'd': duration = atoi(optarg); break;
		case 'n': node = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-p PROCS] [-m MB] [-w WARM] [-u UNPINNED] [-r PINNED] "
					"[-d DURATION] [-n NODE]\n", argv[0]);
			return 2;
		}
	}
	if (procs < 1 || mb < 1 || warm < 0 || unpinned < 1 || pinned < 0 || duration < 1 || node < 0) {
		fprintf(stderr, "numa_workload: every value must be positive (warm/pinned may be 0)\n");
		return 2;
	}
	if (node_cpus(node, &home) <= 0) {
		fprintf(stderr, "numa_workload: node %d has no CPUs (no /sys/devices/system/node/node%d/cpulist)\n",
			node, node);
		return 3;
	}
	if (sched_getaffinity(0, sizeof(all), &all) != 0) {
		fprintf(stderr, "numa_workload: sched_getaffinity: %s\n", strerror(errno));
		return 3;
	}
	printf("start procs=%d mb=%zu warm=%d unpinned=%d pinned=%d duration=%d node=%d\n",
	       procs, mb, warm, unpinned, pinned, duration, node);
	fflush(stdout);
	for (int i = 0; i < procs; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			fprintf(stderr, "numa_workload: fork: %s\n", strerror(errno));
			return 3;
		}
		if (pid == 0)
			_exit(child(mb, warm, unpinned, pinned, duration, &home, &all));
	}
	int rc = 0, status;
	while (wait(&status) > 0)
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			rc = 3;
	return rc;
}
