// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Loads the provider plugin the way libibverbs does (dlopen, RTLD_NOW) and
 * checks that it resolves all its imports and exports none of its own
 * symbols.  Usage: metaroce_provider_dlopen_test /path/libmetaroce-rdmav34.so
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	static const char *const private_names[] = {
		"metaroce_dev_ops", "metaroce_alloc_context",
		"verbs_provider_metaroce", "metaroce_match_device",
		"metaroce_post_send", "metaroce_poll_cq",
		"metaroce_create_qp_ex", "metaroce_build_send_wqe",
		"metaroce_ring_map",
	};
	void *handle;
	unsigned int i;
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s <provider.so>\n", argv[0]);
		return 2;
	}

	handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!handle) {
		fprintf(stderr, "dlopen failed: %s\n", dlerror());
		return 1;
	}

	for (i = 0; i < sizeof(private_names) / sizeof(private_names[0]); i++) {
		if (dlsym(handle, private_names[i])) {
			fprintf(stderr, "provider exports %s\n",
				private_names[i]);
			bad = 1;
		}
	}

	/* Like libibverbs, never dlclose(): the registration made by the
	 * plugin's constructor keeps pointing into it. */
	if (!bad)
		printf("ok: %s loads and exports nothing\n", argv[1]);
	return bad;
}
