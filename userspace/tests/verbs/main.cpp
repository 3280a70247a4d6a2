// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// metaroce-verbs-test: every verb and its error paths on a real MetaRoCE
// device. Exit status 77 when there is no device (every case skipped), so
// CTest on a host without one reports a skip.
#include <cstdio>

#include "verbs_env.hpp"

int main(int argc, char **argv)
{
	::testing::InitGoogleTest(&argc, argv);
	bool have = mrt::init_config();
	const mrt::Config &c = mrt::config();
	bool listing = GTEST_FLAG_GET(list_tests);

	if (!listing && have)
		printf("metaroce-verbs-test: device A %s, device B %s%s\n",
		       c.name_a.c_str(), c.name_b.c_str(),
		       c.dev_a == c.dev_b ? " (loopback only)" : "");
	else if (!listing)
		printf("metaroce-verbs-test: %s\n", c.why_none.c_str());
	fflush(stdout);

	int rc = RUN_ALL_TESTS();

	mrt::release_config();
	if (!have && !listing && rc == 0)
		return 77;
	return rc;
}
