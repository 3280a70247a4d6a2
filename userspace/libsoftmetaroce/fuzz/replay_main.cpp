// Runs the fuzz target without libFuzzer (any compiler, CTest): over the files or directories
// given, and over `--random N` seeded mutations of the sample packets.
//   softmetaroce_codec_replay [--random N] [--seed S] [corpus files or directories...]
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "sample_packets.h"
#include "softmetaroce/codec.h"
#include "softmetaroce/sim/rng.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

void run(const std::vector<std::uint8_t>& bytes) {
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
}

void replay_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    run(std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), {}));
}

// Flips, overwrites, truncates or extends a valid packet: most results are near-valid, which
// exercises each validation rule far better than uniformly random bytes.
std::vector<std::uint8_t> mutate(std::vector<std::uint8_t> bytes, metaroce::sim::SimRng& rng) {
    const unsigned edits = 1 + static_cast<unsigned>(rng.below(4));
    for (unsigned e = 0; e < edits; ++e) {
        switch (rng.below(5)) {
            case 0:
                if (!bytes.empty()) bytes[rng.below(bytes.size())] ^= 1u << rng.below(8);
                break;
            case 1:
                if (!bytes.empty())
                    bytes[rng.below(bytes.size())] = static_cast<std::uint8_t>(rng.next());
                break;
            case 2:
                bytes.resize(rng.below(bytes.size() + 1));
                break;
            case 3:
                bytes.resize(bytes.size() + rng.below(300), static_cast<std::uint8_t>(rng.next()));
                break;
            default:
                break;  // unchanged: the valid packet itself
        }
    }
    return bytes;
}

}  // namespace

int main(int argc, char** argv) {
    std::uint64_t random_runs = 0;
    std::uint64_t seed = 1;
    std::uint64_t files = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--random" && i + 1 < argc) {
            random_runs = std::strtoull(argv[++i], nullptr, 10);
        } else if (arg == "--seed" && i + 1 < argc) {
            seed = std::strtoull(argv[++i], nullptr, 10);
        } else if (std::filesystem::is_directory(arg)) {
            for (const auto& entry : std::filesystem::directory_iterator(arg)) {
                replay_file(entry.path());
                ++files;
            }
        } else {
            replay_file(arg);
            ++files;
        }
    }

    std::vector<std::vector<std::uint8_t>> samples;
    for (const metaroce::Packet& p : metaroce::fuzz::sample_packets()) {
        samples.push_back(metaroce::encode(p));
    }
    metaroce::sim::SimRng rng(seed);
    std::uint64_t decoded = 0;
    for (std::uint64_t i = 0; i < random_runs; ++i) {
        const std::vector<std::uint8_t> input = mutate(samples[rng.below(samples.size())], rng);
        run(input);
        if (metaroce::decode(input, {256})) ++decoded;
    }
    std::cout << "replayed " << files << " files and " << random_runs << " mutations (" << decoded
              << " valid at MTU 256)\n";
    return 0;
}
