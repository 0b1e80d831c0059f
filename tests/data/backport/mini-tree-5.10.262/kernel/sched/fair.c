// SPDX-License-Identifier: GPL-2.0
/*
 * Synthetic stand-in for kernel/sched/fair.c: three small functions, far enough apart that a patch touching
 * the first and the third has two hunks. Used only by the patch-machinery tests.
 */

static int numa_pick_node(int preferred, int local, int best)
{
	if (best == -1)
		return preferred;
	return best;
}

static int numa_unused_one(int x)
{
	return x;
}

static int numa_unused_two(int x)
{
	return x;
}

static int numa_unused_three(int x)
{
	return x;
}

static int numa_weight(int faults, int total)
{
	if (!total)
		return 0;
	return 1000 * faults / total;
}
