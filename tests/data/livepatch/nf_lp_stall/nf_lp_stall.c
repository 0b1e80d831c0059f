// SPDX-License-Identifier: GPL-2.0
/*
 * Test live patch whose transition never finishes: the module starts a kernel thread that sleeps in
 * msleep_interruptible() forever, then patches msleep_interruptible(). The thread always has the old function
 * on its stack, and the livepatch "signal" only wakes it into the same loop (kthreads have no signal to
 * handle), so /sys/kernel/livepatch/nf_lp_stall/transition stays 1 until the patch is reverted (enabled=0).
 * Reverting completes at once (the thread never switched), and module exit stops the thread.
 */
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/kthread.h>
#include <linux/livepatch.h>
#include <linux/module.h>
#include <linux/sched/signal.h>

static struct task_struct *sleeper;

/* same behaviour as the original: sleep interruptibly, return the milliseconds left */
static unsigned long nf_msleep_interruptible(unsigned int msecs)
{
	unsigned long timeout = msecs_to_jiffies(msecs) + 1;

	while (timeout && !signal_pending(current))
		timeout = schedule_timeout_interruptible(timeout);
	return jiffies_to_msecs(timeout);
}

static int nf_sleeper(void *unused)
{
	while (!kthread_should_stop())
		msleep_interruptible(200);
	return 0;
}

static struct klp_func funcs[] = {
	{ .old_name = "msleep_interruptible", .new_func = nf_msleep_interruptible, },
	{ }
};

static struct klp_object objs[] = {
	{ .name = NULL /* vmlinux */, .funcs = funcs, },
	{ }
};

static struct klp_patch patch = { .mod = THIS_MODULE, .objs = objs, };

static int nf_lp_stall_init(void)
{
	int ret;

	sleeper = kthread_run(nf_sleeper, NULL, "nf_lp_stall");
	if (IS_ERR(sleeper))
		return PTR_ERR(sleeper);
	msleep(50); /* let it reach msleep_interruptible() before the patch starts its transition */
	ret = klp_enable_patch(&patch);
	if (ret)
		kthread_stop(sleeper);
	return ret;
}

static void nf_lp_stall_exit(void)
{
	kthread_stop(sleeper);
}

module_init(nf_lp_stall_init);
module_exit(nf_lp_stall_exit);
MODULE_LICENSE("GPL");
MODULE_INFO(livepatch, "Y");
MODULE_DESCRIPTION("numaforge test live patch whose transition stalls");
