/*
 * numa-audit's lab proof (tests/lab/test_lab_vm_audit.py): allocate MB megabytes of anonymous memory, write
 * every page (first touch: the pages come from the node of the CPU it runs on), create READY, then sleep
 * without touching them again (so NUMA balancing, which moves pages on access, leaves them where they are).
 * Usage: toucher MB READY.  Built static with gcc by the test; runs under the lab VM's busybox userland.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: toucher MB READY\n");
		return 2;
	}
	size_t len = (size_t)atol(argv[1]) << 20;
	long page = sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		return 3;
	}
	for (size_t off = 0; off < len; off += (size_t)page)
		p[off] = (char)(off / (size_t)page) | 1;
	FILE *f = fopen(argv[2], "w");
	if (!f) {
		perror(argv[2]);
		return 3;
	}
	fclose(f);
	for (;;)
		pause();
}
