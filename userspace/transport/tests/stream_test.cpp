// One stream's sender: segments delivered by any transmission, lost ones queued for resend first
// and on the path that lost them, the window the receiver's map allows.
#include <gtest/gtest.h>

#include <cstdint>

extern "C" {
#include "mrc_stream.h"
}

namespace {

TEST(StreamTx, DeliveredInAnyOrderCompletesInOrder) {
    mrc_stream_tx st;
    mrc_stream_tx_init(&st, 0xfffffffeu);  // across the wrap
    uint32_t a = mrc_stream_tx_open(&st), b = mrc_stream_tx_open(&st), c = mrc_stream_tx_open(&st);
    EXPECT_TRUE(mrc_stream_tx_acked(&st, c));
    EXPECT_TRUE(mrc_stream_tx_acked(&st, b));
    EXPECT_EQ(st.una, a);  // a holds back completion
    EXPECT_TRUE(mrc_stream_tx_acked(&st, a));
    EXPECT_EQ(st.una, c + 1);
    EXPECT_FALSE(mrc_stream_tx_acked(&st, a));  // a second transmission's ACK: nothing new
    EXPECT_EQ(st.delivered, 3u);
}

TEST(StreamTx, LostSegmentsComeBackFirstInLossOrderWithTheirPath) {
    mrc_stream_tx st;
    mrc_stream_tx_init(&st, 10);
    for (int i = 0; i < 4; i++) mrc_stream_tx_open(&st);
    mrc_stream_tx_lost(&st, 12, 3);
    mrc_stream_tx_lost(&st, 11, 5);
    mrc_stream_tx_lost(&st, 12, 6);  // already waiting: one resend at a time
    uint32_t ssn;
    int path;
    ASSERT_TRUE(mrc_stream_tx_next_resend(&st, &ssn, &path));
    EXPECT_EQ(ssn, 12u);
    EXPECT_EQ(path, 3);
    mrc_stream_tx_sent(&st, 12);
    ASSERT_TRUE(mrc_stream_tx_next_resend(&st, &ssn, &path));
    EXPECT_EQ(ssn, 11u);
    EXPECT_EQ(path, 5);
    EXPECT_EQ(st.resent, 1u);
}

TEST(StreamTx, ASegmentDeliveredWhileQueuedIsNotResent) {
    mrc_stream_tx st;
    mrc_stream_tx_init(&st, 0);
    mrc_stream_tx_open(&st);
    mrc_stream_tx_lost(&st, 0, 1);
    EXPECT_TRUE(mrc_stream_tx_acked(&st, 0));  // the lost copy arrived after all
    uint32_t ssn;
    int path;
    EXPECT_FALSE(mrc_stream_tx_next_resend(&st, &ssn, &path));
    mrc_stream_tx_lost(&st, 0, 1);  // and a late loss report for it changes nothing
    EXPECT_FALSE(mrc_stream_tx_next_resend(&st, &ssn, &path));
}

TEST(StreamTx, WindowIsTheReceiversMap) {
    mrc_stream_tx st;
    mrc_stream_tx_init(&st, 0);
    uint32_t n = 0;
    while (mrc_stream_tx_can_open(&st)) {
        mrc_stream_tx_open(&st);
        n++;
    }
    EXPECT_EQ(n, uint32_t{MRC_STREAM_WINDOW});
    mrc_stream_tx_acked(&st, 1);
    EXPECT_FALSE(mrc_stream_tx_can_open(&st));  // the oldest holds the window
    mrc_stream_tx_acked(&st, 0);
    EXPECT_TRUE(mrc_stream_tx_can_open(&st));
}

TEST(StreamTx, TheResendQueueNeverOverflows) {
    // Every segment lost, delivered while queued, and lost again after reuse of its slot.
    mrc_stream_tx st;
    mrc_stream_tx_init(&st, 0);
    for (int round = 0; round < 8; round++) {
        while (mrc_stream_tx_can_open(&st)) {
            uint32_t q = mrc_stream_tx_open(&st);
            mrc_stream_tx_lost(&st, q, 0);
        }
        for (uint32_t q = st.una; q != st.next_ssn; q++) mrc_stream_tx_acked(&st, q);
        ASSERT_LE(st.resend_len, uint32_t{MRC_STREAM_MAP_BITS});
    }
    uint32_t ssn;
    int path;
    EXPECT_FALSE(mrc_stream_tx_next_resend(&st, &ssn, &path));
}

TEST(StreamTx, ReportsOutsideTheWindowAreIgnored) {
    mrc_stream_tx st;
    mrc_stream_tx_init(&st, 100);
    mrc_stream_tx_open(&st);
    EXPECT_FALSE(mrc_stream_tx_acked(&st, 101));  // not opened yet
    EXPECT_FALSE(mrc_stream_tx_acked(&st, 99));   // before the stream
    mrc_stream_tx_lost(&st, 5000, 0);
    EXPECT_EQ(st.resend_len, 0u);
}

}  // namespace
