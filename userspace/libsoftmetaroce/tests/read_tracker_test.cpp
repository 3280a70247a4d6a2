#include "softmetaroce/read_tracker.h"

#include <gtest/gtest.h>

namespace metaroce {
namespace {

using Range = ReadTracker::Range;

// A reordering window long enough that only the count rule applies.
constexpr TimeUs kLongWindow = 1'000'000;

TEST(ReadTracker, PartsCoverTheReadInOrder) {
    ReadTracker t(10, 8);
    EXPECT_EQ(t.issue_part(4), (Range{0, 4}));
    EXPECT_EQ(t.issue_part(100), (Range{4, 10}));  // clamped to the READ
    EXPECT_TRUE(t.all_issued());
    EXPECT_EQ(t.part_containing(5), (Range{4, 10}));
    for (std::uint32_t i = 0; i < 10; ++i) {
        const auto a = t.on_response(i, 5, kLongWindow);
        EXPECT_TRUE(a.is_new);
        EXPECT_EQ(a.completed_part, i == 3 || i == 9);
    }
    EXPECT_TRUE(t.done());
    EXPECT_FALSE(t.on_response(3, 6, kLongWindow).is_new);
}

TEST(ReadTracker, HoleIsLostOnceAResponseAllowanceAfterItArrived) {
    ReadTracker t(20, 3);
    t.issue_part(20);
    for (std::uint32_t i = 0; i < 20; ++i) t.on_accepted(i, 0);
    t.on_response(0, 10, kLongWindow);
    t.on_response(2, 10, kLongWindow);
    t.on_response(3, 10, kLongWindow);
    EXPECT_TRUE(t.take_lost_runs(64).empty());  // the newest is 2 after the hole: not yet
    t.on_response(4, 10, kLongWindow);
    EXPECT_EQ(t.take_lost_runs(64), (std::vector<Range>{{1, 2}}));
    EXPECT_TRUE(t.take_lost_runs(64).empty());  // taken: re-read by the caller
}

TEST(ReadTracker, AfterABurstOfLossesTheOldestAreLostAtOnce) {
    ReadTracker t(8, 3);
    t.issue_part(8);
    for (std::uint32_t i = 0; i < 8; ++i) t.on_accepted(i, 0);
    t.on_response(0, 10, kLongWindow);
    t.on_response(5, 10, kLongWindow);  // 1..4 missing: 1 and 2 are 3 or more before 5
    EXPECT_EQ(t.take_lost_runs(64), (std::vector<Range>{{1, 3}}));
    t.on_reread({1, 3}, 10);
    t.on_response(6, 11, kLongWindow);
    EXPECT_EQ(t.take_lost_runs(64), (std::vector<Range>{{3, 4}}));
}

TEST(ReadTracker, InFlightCountsResponsesAskedForNeitherArrivedNorLost) {
    ReadTracker t(10, 3);
    t.issue_part(6);
    EXPECT_EQ(t.in_flight(), 6u);
    t.on_response(0, 10, kLongWindow);
    t.on_response(4, 10, kLongWindow);  // 1 is 3 before 4: lost
    EXPECT_EQ(t.in_flight(), 3u);       // 2, 3, 5
    EXPECT_FALSE(t.on_response(4, 11, kLongWindow).is_new);
    EXPECT_EQ(t.in_flight(), 3u);
    const auto runs = t.take_lost_runs(64, /*max_total=*/0);
    EXPECT_TRUE(runs.empty());  // no room: 1 stays lost
    ASSERT_EQ(t.take_lost_runs(64), (std::vector<Range>{{1, 2}}));
    EXPECT_EQ(t.requests_in_flight(), 1u);
    t.on_reread({1, 2}, 12);
    EXPECT_EQ(t.in_flight(), 4u);
    EXPECT_EQ(t.requests_in_flight(), 2u);  // the part (2, 3, 5) and the re-read (1)
    t.issue_part(4);
    EXPECT_EQ(t.in_flight(), 8u);
    EXPECT_EQ(t.requests_in_flight(), 3u);
    for (std::uint32_t i : {2u, 3u, 5u}) t.on_response(i, 14, kLongWindow);
    EXPECT_EQ(t.requests_in_flight(), 2u);  // the part is answered: its credit is free
}

TEST(ReadTracker, APartsCreditIsFreeOnceItsLastResponseArrives) {
    // The responder sends a part's responses in order: with the last one in, it holds the
    // part no more, whatever is still missing before it.
    ReadTracker t(8, 8);
    t.issue_part(4);
    t.issue_part(4);
    EXPECT_EQ(t.requests_in_flight(), 2u);
    t.on_response(3, 10, kLongWindow);
    EXPECT_EQ(t.requests_in_flight(), 1u);
    EXPECT_EQ(t.in_flight(), 7u);  // 0..2 still count against the window
    t.on_response(4, 10, kLongWindow);
    EXPECT_EQ(t.requests_in_flight(), 1u);
}

TEST(ReadTracker, APartsCreditIsFreeOnceItsLastResponseIsLost) {
    ReadTracker t(4, 8);
    t.issue_part(4);
    for (std::uint32_t i = 0; i < 4; ++i) t.on_accepted(i, 0);
    t.on_response(0, 10, kLongWindow);
    const auto deadline = t.deadline(1000, 8000);
    ASSERT_TRUE(deadline.has_value());
    t.on_timeout(*deadline);  // 1..3 lost, the last among them
    EXPECT_EQ(t.requests_in_flight(), 0u);
    ASSERT_EQ(t.take_lost_runs(64), (std::vector<Range>{{1, 4}}));
    t.on_reread({1, 4}, *deadline);
    EXPECT_EQ(t.requests_in_flight(), 1u);  // the re-read holds one
}

TEST(ReadTracker, ALostPartRequestHoldsNoCredit) {
    ReadTracker t(4, 8);
    t.issue_part(4);
    t.on_part_request_lost(0);
    EXPECT_EQ(t.requests_in_flight(), 0u);
    EXPECT_EQ(t.in_flight(), 0u);
    t.on_part_request_resent(0);
    EXPECT_EQ(t.requests_in_flight(), 1u);
    EXPECT_EQ(t.in_flight(), 4u);
}

TEST(ReadTracker, HoleIsLostOnceNoLaterResponseArrivedForTheGap) {
    ReadTracker t(6, 8);
    t.issue_part(6);
    for (std::uint32_t i = 0; i < 6; ++i) t.on_accepted(i, 100);
    t.on_response(0, 120, 300);
    EXPECT_EQ(t.reorder_deadline(300), std::nullopt);  // nothing later arrived: no time rule
    t.on_response(2, 130, 300);                        // 1 is missing behind 2
    EXPECT_EQ(t.reorder_deadline(300), 430u);          // the gap after the newest response
    t.on_response(3, 200, 300);                        // responses still flowing
    EXPECT_EQ(t.reorder_deadline(300), 500u);
    t.detect_losses(499, 300);
    EXPECT_TRUE(t.take_lost_runs(64).empty());
    t.detect_losses(500, 300);
    EXPECT_EQ(t.take_lost_runs(64), (std::vector<Range>{{1, 2}}));
    t.on_reread({1, 2}, 500);
    EXPECT_EQ(t.reorder_deadline(300), std::nullopt);  // 4 and 5: nothing after them arrived
}

TEST(ReadTracker, AllowanceFollowsTheSender) {
    ReadTracker t(20, 3);
    t.issue_part(20);
    for (std::uint32_t i = 0; i < 20; ++i) t.on_accepted(i, 0);
    t.set_reorder_allowance(5);  // the paths were seen to reorder more
    t.on_response(0, 10, kLongWindow);
    for (std::uint32_t i = 2; i < 6; ++i) t.on_response(i, 10, kLongWindow);
    EXPECT_TRUE(t.take_lost_runs(64).empty());  // the newest is 4 after the hole: not yet
    t.on_response(6, 10, kLongWindow);
    EXPECT_EQ(t.take_lost_runs(64), (std::vector<Range>{{1, 2}}));
}

TEST(ReadTracker, RunsAreSplitAtMaxRun) {
    ReadTracker t(12, 1);
    t.issue_part(12);
    t.on_response(11, 1, kLongWindow);  // 0..10 all lost
    EXPECT_EQ(t.take_lost_runs(4), (std::vector<Range>{{0, 4}, {4, 8}, {8, 11}}));
}

TEST(ReadTracker, ResponsesToAReReadAreNoEvidenceOfLoss) {
    ReadTracker t(12, 2);
    t.issue_part(12);
    for (std::uint32_t i = 0; i < 12; ++i) t.on_accepted(i, 0);
    t.on_response(10, 10, kLongWindow);
    t.on_response(11, 10, kLongWindow);
    ASSERT_EQ(t.take_lost_runs(64), (std::vector<Range>{{0, 10}}));
    t.on_reread({0, 10}, 20);
    // Late first answers and answers to the re-read arrive, in any order: 0..4 are missing
    // behind them, but only the timer may call them lost.
    t.on_response(5, 25, kLongWindow);
    t.on_response(9, 26, kLongWindow);
    t.on_response(6, 27, kLongWindow);
    t.on_response(7, 40, kLongWindow);
    t.on_response(8, 41, kLongWindow);
    t.detect_losses(41 + kLongWindow, kLongWindow);
    EXPECT_TRUE(t.take_lost_runs(64).empty());
    const auto deadline = t.deadline(1000, 8000);
    ASSERT_TRUE(deadline.has_value());
    t.on_timeout(*deadline);
    EXPECT_EQ(t.take_lost_runs(64), (std::vector<Range>{{0, 5}}));
}

TEST(ReadTracker, AResponseToALaterPartShowsAnEarlierPartsLosses) {
    // The responder executes parts in PSN order: part 2's responses follow part 1's.
    ReadTracker t(8, 3);
    t.issue_part(4);
    t.issue_part(4);
    t.on_response(0, 10, kLongWindow);
    t.on_response(4, 10, kLongWindow);  // 1 is 3 places before it: lost; 2, 3 not yet
    EXPECT_EQ(t.take_lost_runs(64), (std::vector<Range>{{1, 2}}));
    t.on_reread({1, 2}, 10);
    t.on_response(6, 11, kLongWindow);  // 2 and 3 are 4 and 3 places before it
    EXPECT_EQ(t.take_lost_runs(64), (std::vector<Range>{{2, 4}}));
}

TEST(ReadTracker, ReadsSharingAnOrderShowEachOthersLosses) {
    auto order = std::make_shared<ResponseOrder>();
    ReadTracker first(4, 3, order);
    ReadTracker second(4, 3, order);
    first.issue_part(4);   // places 0..3
    second.issue_part(4);  // places 4..7
    first.on_response(0, 10, 300);
    second.on_response(0, 20, 300);  // place 4: responses 1 (3 places before) lost at once
    first.detect_losses(20, 300);
    EXPECT_EQ(first.take_lost_runs(64), (std::vector<Range>{{1, 2}}));
    first.on_reread({1, 2}, 20);
    // 2 and 3 are lost by time, a gap after the newest response.
    EXPECT_EQ(first.reorder_deadline(300), 320u);
    first.detect_losses(319, 300);
    EXPECT_TRUE(first.take_lost_runs(64).empty());
    first.detect_losses(320, 300);
    EXPECT_EQ(first.take_lost_runs(64), (std::vector<Range>{{2, 4}}));
    EXPECT_EQ(second.reorder_deadline(300), std::nullopt);  // nothing of it behind the newest
}

TEST(ReadTracker, TimerRunsOnlyWhileAcceptedResponsesAreMissing) {
    ReadTracker t(3, 8);
    t.issue_part(3);
    EXPECT_EQ(t.deadline(1000, 8000), std::nullopt);  // the request is not known accepted
    t.on_accepted(0, 100);
    t.on_accepted(1, 100);
    t.on_accepted(2, 100);
    EXPECT_EQ(t.deadline(1000, 8000), 1100u);
    t.on_timeout(1100);
    EXPECT_EQ(t.take_lost_runs(64), (std::vector<Range>{{0, 3}}));
    t.on_reread({0, 3}, 1100);
    EXPECT_EQ(t.deadline(1000, 8000), 1100u + 2000);  // backed off
    t.on_response(1, 1500, kLongWindow);
    EXPECT_EQ(t.deadline(1000, 8000), 1500u + 1000);  // new data: backoff reset
    t.on_response(0, 1600, kLongWindow);
    t.on_response(2, 1600, kLongWindow);
    EXPECT_EQ(t.deadline(1000, 8000), std::nullopt);
}

}  // namespace
}  // namespace metaroce
