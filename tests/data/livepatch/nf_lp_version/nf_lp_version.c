// SPDX-License-Identifier: GPL-2.0
/*
 * Test live patch standing for "another vendor's live patch" (a CVE fix, say): replaces version_proc_show() so
 * /proc/version reads "numaforge livepatch nf_lp_version active". Non-replace (klp_patch.replace = false), so
 * a non-replace patch loaded after it leaves it enabled; a replace patch would disable it.
 */
#include <linux/kernel.h>
#include <linux/livepatch.h>
#include <linux/module.h>
#include <linux/seq_file.h>

static int nf_version_proc_show(struct seq_file *m, void *v)
{
	seq_puts(m, "numaforge livepatch nf_lp_version active\n");
	return 0;
}

static struct klp_func funcs[] = {
	{ .old_name = "version_proc_show", .new_func = nf_version_proc_show, },
	{ }
};

static struct klp_object objs[] = {
	{ .name = NULL /* vmlinux */, .funcs = funcs, },
	{ }
};

static struct klp_patch patch = { .mod = THIS_MODULE, .objs = objs, };

static int nf_lp_version_init(void)
{
	return klp_enable_patch(&patch);
}

static void nf_lp_version_exit(void)
{
}

module_init(nf_lp_version_init);
module_exit(nf_lp_version_exit);
MODULE_LICENSE("GPL");
MODULE_INFO(livepatch, "Y");
MODULE_DESCRIPTION("numaforge test live patch: /proc/version (the unrelated other patch)");
