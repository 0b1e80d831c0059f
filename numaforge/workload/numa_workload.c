/*
 * numaforge NUMA-balancing workload (shipped to hosts by `invoke validate`, built static with gcc).
 *
 * Makes the scheduler's "preferred node is full" path observable on hosts with >= 3 NUMA nodes:
 * PROCS independent processes (no shared memory, so no numa_group) each first-touch MB megabytes while
 * pinned to the CPUs of node 0 and keep touching them for WARM seconds (NUMA balancing scans a few times
 * and node 0 becomes the preferred node); then they alternate UNPINNED seconds on every CPU and PINNED
 * seconds back on node 0 until DURATION seconds have passed.
 * With -g (grouped) they are PROCS threads of one process sharing one MB buffer (every thread touches all of
 * it, so NUMA balancing puts them in one numa_group) instead of processes with private buffers.
 *
 * The unit of work is one pass over the task's buffer (one read-modify-write per page). Each task records the
 * duration of every unit it completes in an UNPINNED phase; the parent prints their mean and p99 at the end.
 *
 * Output (stdout, one line per event, parsed by numaforge.measure.metrics):
 *   phase pid=<tid> kind=<warm|unpinned|pinned|done> t=<CLOCK_MONOTONIC ns> preferred=<nid or -1>
 *   pref pid=<tid> t=<ns> nid=<nid>      whenever the task's numa_preferred_nid changes (sampled every unit)
 *   units n=<units> mean_ns=<mean> p99_ns=<p99> unpinned_ns=<sum of the tasks' unpinned time>
 * `preferred` is numa_preferred_nid from /proc/thread-self/sched (CONFIG_SCHED_DEBUG), -1 when unavailable.
 * A pinned phase's t is taken before the task pins itself, so the migration that pinning causes is in it.
 *
 * With -M MEMNODE the buffers are first-touched on MEMNODE (set_mempolicy MPOL_BIND for the first touch
 * only; the default policy after it, so NUMA balancing may migrate them) instead of the home node.
 *
 * Usage: numa_workload [-g] [-M MEMNODE] [-p PROCS] [-m MB] [-w WARM] [-u UNPINNED] [-r PINNED] [-d DURATION] [-n NODE]
 * Exit status: 0 ok, 2 bad usage, 3 setup failure (message on stderr).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
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
	FILE *f = fopen("/proc/thread-self/sched", "r");
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

#define MAX_UNITS 65536	/* per task; units past it are not recorded (a 16 MB pass takes >= 100 us) */

/* Shared with the parent (MAP_SHARED before fork, or plain memory for threads): unit durations per task. */
struct task_units {
	long long n;
	long long unpinned_ns;
	long long ns[MAX_UNITS];
};

struct task_args {
	unsigned char *buf;	/* NULL: the task maps and first-touches its own */
	size_t len;
	int warm, unpinned, pinned, duration, idx;
	cpu_set_t *home, *all;
	struct task_units *units;
};

static int mem_node = -1;	/* -M: first-touch node, -1 = the home node (local first touch) */

/* first touch of len bytes at buf, on mem_node when set (MPOL_BIND for the touch, then the default policy) */
static int first_touch(unsigned char *buf, size_t len)
{
	unsigned long mask[16] = { 0 };

	if (mem_node >= 0) {
		mask[mem_node / (8 * sizeof(long))] |= 1UL << (mem_node % (8 * sizeof(long)));
		if (syscall(SYS_set_mempolicy, 2 /* MPOL_BIND */, mask, 8 * sizeof(mask)) != 0) {
			fprintf(stderr, "numa_workload: set_mempolicy(bind %d): %s\n", mem_node, strerror(errno));
			return 3;
		}
	}
	memset(buf, 1, len);
	if (mem_node >= 0)
		syscall(SYS_set_mempolicy, 0 /* MPOL_DEFAULT */, NULL, 0);
	return 0;
}

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static int tid(void)
{
	return (int)syscall(SYS_gettid);
}

static void phase_at(const char *kind, long long t)
{
	pthread_mutex_lock(&out_lock);
	printf("phase pid=%d kind=%s t=%lld preferred=%d\n", tid(), kind, t, preferred_nid());
	fflush(stdout);
	pthread_mutex_unlock(&out_lock);
}

static void phase(const char *kind)
{
	phase_at(kind, now_ns());
}

/* Units of work (one read-modify-write per page, at a per-task offset) until `until` (monotonic ns). */
static void touch_until(struct task_args *a, long long until, int record, int *last_pref)
{
	long page = sysconf(_SC_PAGESIZE);
	volatile unsigned char *buf = a->buf;
	size_t off = ((size_t)a->idx * 64) % (size_t)page;
	long long t = now_ns(), start = t;

	while (t < until) {
		long long t1;
		int pref;

		for (size_t i = off; i < a->len; i += page)
			buf[i]++;
		t1 = now_ns();
		if (record && a->units->n < MAX_UNITS)
			a->units->ns[a->units->n++] = t1 - t;
		pref = preferred_nid();
		if (pref != *last_pref) {
			*last_pref = pref;
			pthread_mutex_lock(&out_lock);
			printf("pref pid=%d t=%lld nid=%d\n", tid(), t1, pref);
			fflush(stdout);
			pthread_mutex_unlock(&out_lock);
		}
		t = now_ns();	/* the next unit starts after the sample, which is not part of it */
	}
	if (record)
		a->units->unpinned_ns += t - start;
}

static int run_task(struct task_args *a)
{
	long long t0, end;
	int last_pref = -2;

	if (sched_setaffinity(0, sizeof(*a->home), a->home) != 0) {
		fprintf(stderr, "numa_workload: sched_setaffinity(home): %s\n", strerror(errno));
		return 3;
	}
	if (a->buf == NULL) {
		a->buf = mmap(NULL, a->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (a->buf == MAP_FAILED) {
			fprintf(stderr, "numa_workload: mmap %zu bytes: %s\n", a->len, strerror(errno));
			return 3;
		}
		if (first_touch(a->buf, a->len)) /* pages land on the home node (or -M) */
			return 3;
	}
	t0 = now_ns();
	end = t0 + (long long)a->duration * 1000000000LL;
	phase("warm");
	touch_until(a, t0 + (long long)a->warm * 1000000000LL, 0, &last_pref);
	while (now_ns() < end) {
		long long stop, t;

		sched_setaffinity(0, sizeof(*a->all), a->all);
		phase("unpinned");
		stop = now_ns() + (long long)a->unpinned * 1000000000LL;
		touch_until(a, stop < end ? stop : end, 1, &last_pref);
		if (now_ns() >= end)
			break;
		t = now_ns();
		sched_setaffinity(0, sizeof(*a->home), a->home);
		phase_at("pinned", t);
		stop = now_ns() + (long long)a->pinned * 1000000000LL;
		touch_until(a, stop < end ? stop : end, 0, &last_pref);
	}
	phase("done");
	return 0;
}

static void *thread_main(void *arg)
{
	return (void *)(long)run_task(arg);
}

static int cmp_ll(const void *x, const void *y)
{
	long long a = *(const long long *)x, b = *(const long long *)y;

	return a < b ? -1 : a > b;
}

static void print_units(struct task_units *u, int tasks)
{
	long long n = 0, sum = 0, unp = 0, k = 0;
	long long *all;

	for (int i = 0; i < tasks; i++) {
		n += u[i].n;
		unp += u[i].unpinned_ns;
	}
	all = malloc(sizeof(*all) * (n ? n : 1));
	if (!all) {
		fprintf(stderr, "numa_workload: out of memory for %lld samples\n", n);
		exit(3);
	}
	for (int i = 0; i < tasks; i++)
		for (long long j = 0; j < u[i].n; j++) {
			all[k++] = u[i].ns[j];
			sum += u[i].ns[j];
		}
	qsort(all, n, sizeof(*all), cmp_ll);
	printf("units n=%lld mean_ns=%lld p99_ns=%lld unpinned_ns=%lld\n", n, n ? sum / n : 0,
	       n ? all[(n * 99 + 99) / 100 - 1] : 0, unp);
	fflush(stdout);
	free(all);
}

int main(int argc, char **argv)
{
	int procs = 3, warm = 6, unpinned = 8, pinned = 4, duration = 60, node = 0, opt, grouped = 0;
	size_t mb = 32;
	cpu_set_t home, all;
	struct task_units *units;

	while ((opt = getopt(argc, argv, "gM:p:m:w:u:r:d:n:")) != -1) {
		switch (opt) {
		case 'g': grouped = 1; break;
		case 'M': mem_node = atoi(optarg); break;
		case 'p': procs = atoi(optarg); break;
		case 'm': mb = (size_t)atol(optarg); break;
		case 'w': warm = atoi(optarg); break;
		case 'u': unpinned = atoi(optarg); break;
		case 'r': pinned = atoi(optarg); break;
		case 'd': duration = atoi(optarg); break;
		case 'n': node = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-g] [-M MEMNODE] [-p PROCS] [-m MB] [-w WARM] [-u UNPINNED] [-r PINNED] "
					"[-d DURATION] [-n NODE]\n", argv[0]);
			return 2;
		}
	}
	if (mem_node >= 1024 || procs < 1 || mb < 1 || warm < 0 || unpinned < 1 || pinned < 0 || duration < 1 || node < 0) {
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
	printf("start procs=%d mb=%zu warm=%d unpinned=%d pinned=%d duration=%d node=%d grouped=%d mem=%d\n",
	       procs, mb, warm, unpinned, pinned, duration, node, grouped, mem_node);
	fflush(stdout);
	units = mmap(NULL, sizeof(*units) * procs, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (units == MAP_FAILED) {
		fprintf(stderr, "numa_workload: mmap units: %s\n", strerror(errno));
		return 3;
	}
	struct task_args base = { .len = mb << 20, .warm = warm, .unpinned = unpinned, .pinned = pinned,
				  .duration = duration, .home = &home, .all = &all };
	int rc = 0, status;

	if (grouped) {
		pthread_t th[procs];
		struct task_args args[procs];

		if (sched_setaffinity(0, sizeof(home), &home) != 0) {
			fprintf(stderr, "numa_workload: sched_setaffinity(home): %s\n", strerror(errno));
			return 3;
		}
		base.buf = mmap(NULL, base.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (base.buf == MAP_FAILED) {
			fprintf(stderr, "numa_workload: mmap %zu MB: %s\n", mb, strerror(errno));
			return 3;
		}
		if (first_touch(base.buf, base.len)) /* home node (or -M); every thread shares it */
			return 3;
		for (int i = 0; i < procs; i++) {
			args[i] = base;
			args[i].idx = i;
			args[i].units = &units[i];
			if (pthread_create(&th[i], NULL, thread_main, &args[i]) != 0) {
				fprintf(stderr, "numa_workload: pthread_create failed\n");
				return 3;
			}
		}
		for (int i = 0; i < procs; i++) {
			void *ret;

			pthread_join(th[i], &ret);
			if (ret != NULL)
				rc = 3;
		}
	} else {
		for (int i = 0; i < procs; i++) {
			pid_t pid = fork();

			if (pid < 0) {
				fprintf(stderr, "numa_workload: fork: %s\n", strerror(errno));
				return 3;
			}
			if (pid == 0) {
				struct task_args a = base;

				a.idx = i;
				a.units = &units[i];
				_exit(run_task(&a));
			}
		}
		while (wait(&status) > 0)
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
				rc = 3;
	}
	if (rc == 0)
		print_units(units, procs);
	return rc;
}
