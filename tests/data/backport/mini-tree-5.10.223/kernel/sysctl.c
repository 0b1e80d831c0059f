// SPDX-License-Identifier: GPL-2.0
/* Synthetic stand-in for kernel/sysctl.c (patch-machinery tests only). */

static struct ctl_table kern_table[] = {
	{
		.procname	= "sched_child_runs_first",
		.mode		= 0644,
	},
	{ }
};
