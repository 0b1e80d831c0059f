// SPDX-License-Identifier: GPL-2.0
/*
 * Test live patch that completes its transition at once: replaces cmdline_proc_show() so /proc/cmdline reads
 * "numaforge livepatch nf_lp_cmdline active". Its LOADED check is nf_lp_cmdline-LOADED.test.
 */
#include <linux/kernel.h>
#include <linux/livepatch.h>
#include <linux/module.h>
#include <linux/seq_file.h>

static int nf_cmdline_proc_show(struct seq_file *m, void *v)
{
	seq_puts(m, "numaforge livepatch nf_lp_cmdline active\n");
	return 0;
}

static struct klp_func funcs[] = {
	{ .old_name = "cmdline_proc_show", .new_func = nf_cmdline_proc_show, },
	{ }
};

static struct klp_object objs[] = {
	{ .name = NULL /* vmlinux */, .funcs = funcs, },
	{ }
};

static struct klp_patch patch = { .mod = THIS_MODULE, .objs = objs, };

static int nf_lp_cmdline_init(void)
{
	return klp_enable_patch(&patch);
}

static void nf_lp_cmdline_exit(void)
{
}

module_init(nf_lp_cmdline_init);
module_exit(nf_lp_cmdline_exit);
MODULE_LICENSE("GPL");
MODULE_INFO(livepatch, "Y");
MODULE_DESCRIPTION("numaforge test live patch: /proc/cmdline");
