// Writes the codec fuzzer's seed corpus: one file per sample packet.
//   softmetaroce_seed_corpus <directory>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "sample_packets.h"
#include "softmetaroce/codec.h"

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: " << argv[0] << " <directory>\n";
        return 2;
    }
    const std::filesystem::path dir = argv[1];
    std::filesystem::create_directories(dir);
    int n = 0;
    for (const metaroce::Packet& packet : metaroce::fuzz::sample_packets()) {
        const std::vector<std::uint8_t> bytes = metaroce::encode(packet);
        char name[64];
        std::snprintf(name, sizeof name, "seed_%02d_%s", n++,
                      std::string(metaroce::to_string(packet.bth.opcode)).c_str());
        std::ofstream out(dir / name, std::ios::binary);
        out.write(reinterpret_cast<const char*>(bytes.data()),
                  static_cast<std::streamsize>(bytes.size()));
    }
    std::cout << "wrote " << n << " seeds to " << dir << "\n";
    return 0;
}
