//===- TensorFileTest.cpp - safetensors and .npy readers and writers ------===//
//
// Round trips through the writers, partial reads, and malformed files written
// byte by byte in the test (bad headers, truncation, unsupported layouts).
//
//===----------------------------------------------------------------------===//

#include "zrt/Checksum.h"
#include "zrt/TensorFile.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>

using namespace zrt;
using ::testing::HasSubstr;

namespace {

class TensorFiles : public ::testing::Test {
protected:
  void SetUp() override {
    char pattern[] = "/tmp/zrt-tensorfile-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    if (!HasFailure())
      std::filesystem::remove_all(dir_);
  }
  std::string path(const std::string &name) const { return dir_ + "/" + name; }
  void writeRaw(const std::string &name, const std::string &bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
  }
  /// A safetensors file with `header` as its JSON and `data` after it.
  void writeSafetensorsRaw(const std::string &name, const std::string &header,
                           const std::string &data) const {
    std::string len(8, '\0');
    for (int i = 0; i < 8; ++i)
      len[i] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
    writeRaw(name, len + header + data);
  }
  std::string dir_;
};

// The checksums kept while writing equal XXH3-64 (libxxhash's one-shot
// function, anchored by its published value for no bytes) of the file read
// back and of each tensor's data bytes.
TEST_F(TensorFiles, SafetensorsDigestIsXxh3OfWhatWasWritten) {
  EXPECT_EQ(XXH3_64bits("", 0), 0x2d06800538d394c2ull);
  EXPECT_EQ(checksumHex(0x2d06800538d394c2ull), "2d06800538d394c2");
  EXPECT_EQ(parseChecksumHex("2d06800538d394c2"), 0x2d06800538d394c2ull);
  EXPECT_FALSE(parseChecksumHex("2D06800538D394C2x").has_value());
  std::vector<float> a(1000);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = float(i) * 0.25f - 7.0f;
  std::vector<int64_t> b = {3, -4, 5};
  SafetensorsDigest digest;
  ASSERT_TRUE(writeSafetensors(path("d.safetensors"),
                               {{"a", DType::F32, {10, 100}, a.data()},
                                {"b", DType::I64, {3}, b.data()}},
                               &digest)
                  .isOk());
  std::ifstream in(path("d.safetensors"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(digest.fileBytes, bytes.size());
  EXPECT_EQ(digest.fileXxh3, XXH3_64bits(bytes.data(), bytes.size()));
  ASSERT_EQ(digest.tensorXxh3.size(), 2u);
  EXPECT_EQ(digest.tensorXxh3[0], XXH3_64bits(a.data(), a.size() * 4));
  EXPECT_EQ(digest.tensorXxh3[1], XXH3_64bits(b.data(), b.size() * 8));
  // Fed in uneven pieces, the stream gives the one-shot value.
  Xxh3Stream stream;
  stream.update(bytes.data(), 5);
  stream.update(bytes.data() + 5, bytes.size() - 5);
  EXPECT_EQ(stream.digest(), XXH3_64bits(bytes.data(), bytes.size()));
}

TEST_F(TensorFiles, SafetensorsRoundTripsEveryDType) {
  std::vector<float> f32 = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, 8.0f};
  std::vector<int64_t> i64 = {-1, 1ll << 40};
  std::vector<uint8_t> u8 = {1, 0, 255};
  std::vector<uint16_t> half = {0x3c00, 0xc000};
  std::vector<double> f64 = {3.141592653589793};
  std::vector<int32_t> i32 = {-7};
  std::vector<int8_t> i8 = {-128};
  ASSERT_TRUE(writeSafetensors(path("t.safetensors"),
                               {{"f32", DType::F32, {2, 3}, f32.data()},
                                {"i64", DType::I64, {2}, i64.data()},
                                {"bool", DType::Bool, {3}, u8.data()},
                                {"u8", DType::U8, {3}, u8.data()},
                                {"f16", DType::F16, {2}, half.data()},
                                {"bf16", DType::BF16, {2}, half.data()},
                                {"f64", DType::F64, {}, f64.data()},
                                {"i32", DType::I32, {1}, i32.data()},
                                {"i8", DType::I8, {1, 1}, i8.data()}})
                  .isOk());
  Expected<SafetensorsFile> f = SafetensorsFile::open(path("t.safetensors"));
  ASSERT_TRUE(f.isOk()) << f.status().message();
  ASSERT_EQ(f->entries().size(), 9u);
  const SafetensorsEntry *e = f->find("f32");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->dtype, DType::F32);
  EXPECT_EQ(e->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(e->bytes, 24u);
  std::vector<float> back(6);
  ASSERT_TRUE(f->read(*e, 0, 24, back.data()).isOk());
  EXPECT_EQ(back, f32);
  // A byte range from the middle, as a rank reading its shard does.
  float middle[2];
  ASSERT_TRUE(f->read(*e, 8, 8, middle).isOk());
  EXPECT_EQ(middle[0], 3.25f);
  EXPECT_EQ(middle[1], 0.0f);
  EXPECT_EQ(f->bytesRead(), 32u);
  Status outside = f->read(*e, 20, 8, middle);
  ASSERT_FALSE(outside.isOk());
  EXPECT_THAT(outside.message(), HasSubstr("tensor \"f32\": read of [20, 28) is "
                                           "outside its 24 bytes"));
  int64_t i64back[2];
  ASSERT_TRUE(f->read(*f->find("i64"), 0, 16, i64back).isOk());
  EXPECT_EQ(i64back[1], 1ll << 40);
  EXPECT_EQ(f->find("bool")->dtype, DType::Bool);
  EXPECT_EQ(f->find("bf16")->dtype, DType::BF16);
  EXPECT_TRUE(f->find("f64")->shape.empty());
  EXPECT_EQ(f->find("missing"), nullptr);
}

TEST_F(TensorFiles, SafetensorsAcceptsMetadataAndRejectsBadHeaders) {
  writeSafetensorsRaw("meta.safetensors",
                      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                      std::string(4, '\0'));
  EXPECT_TRUE(SafetensorsFile::open(path("meta.safetensors")).isOk());

  auto errorOf = [&](const std::string &header, const std::string &data) {
    writeSafetensorsRaw("bad.safetensors", header, data);
    Expected<SafetensorsFile> f = SafetensorsFile::open(path("bad.safetensors"));
    EXPECT_FALSE(f.isOk()) << header;
    return f.isOk() ? "" : f.status().message();
  };
  EXPECT_THAT(errorOf("{not json", ""), HasSubstr("the header is not a JSON object"));
  EXPECT_THAT(errorOf(R"({"a":{"dtype":"F8","shape":[1],"data_offsets":[0,1]}})", "x"),
              HasSubstr("tensor \"a\": unsupported dtype \"F8\""));
  EXPECT_THAT(errorOf(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})",
                      std::string(8, '\0')),
              HasSubstr("data_offsets [0, 4) do not hold 2 F32 elements"));
  EXPECT_THAT(errorOf(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                      std::string(4, '\0')),
              HasSubstr("lies past the end of the file"));
  EXPECT_THAT(errorOf(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})",
                      std::string(8, '\0')),
              HasSubstr("shape entries must be non-negative integers"));
  EXPECT_THAT(errorOf(R"({"a":{"dtype":"F32"}})", ""),
              HasSubstr("header entry needs dtype, shape and data_offsets"));

  writeRaw("short.safetensors", "abc");
  EXPECT_THAT(SafetensorsFile::open(path("short.safetensors")).status().message(),
              HasSubstr("not a safetensors file: only 3 bytes"));
  writeRaw("huge.safetensors", std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8) + "{}");
  EXPECT_THAT(SafetensorsFile::open(path("huge.safetensors")).status().message(),
              HasSubstr("exceeds the file size"));
  EXPECT_THAT(SafetensorsFile::open(path("none.safetensors")).status().message(),
              HasSubstr("none.safetensors: cannot open"));
}

TEST_F(TensorFiles, NpyRoundTripsAndReadsVersion2) {
  std::vector<float> data = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(writeNpy(path("a.npy"), DType::F32, {2, 3}, data.data()).isOk());
  Expected<NpyArray> a = readNpy(path("a.npy"));
  ASSERT_TRUE(a.isOk()) << a.status().message();
  EXPECT_EQ(a->dtype, DType::F32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(a->data.size(), 24u);
  EXPECT_EQ(std::memcmp(a->data.data(), data.data(), 24), 0);

  int64_t one[3] = {7, 8, 9};
  ASSERT_TRUE(writeNpy(path("v.npy"), DType::I64, {3}, one).isOk());
  Expected<NpyArray> v = readNpy(path("v.npy"));
  ASSERT_TRUE(v.isOk()) << v.status().message();
  EXPECT_EQ(v->shape, std::vector<int64_t>{3});
  EXPECT_EQ(v->dtype, DType::I64);

  double scalar = 2.5;
  ASSERT_TRUE(writeNpy(path("s.npy"), DType::F64, {}, &scalar).isOk());
  Expected<NpyArray> s = readNpy(path("s.npy"));
  ASSERT_TRUE(s.isOk()) << s.status().message();
  EXPECT_TRUE(s->shape.empty());
  EXPECT_EQ(s->data.size(), 8u);

  // Format 2.0 (4-byte header length), as numpy writes for huge headers, with
  // a bool array and the "|b1" descr.
  std::string header = "{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }";
  header.append(64 - (12 + header.size() + 1) % 64, ' ');
  header += '\n';
  std::string file = std::string("\x93NUMPY\x02\x00", 8);
  for (int i = 0; i < 4; ++i)
    file += char((header.size() >> (8 * i)) & 0xff);
  file += header + std::string("\x01\x00\x01\x01", 4);
  writeRaw("b.npy", file);
  Expected<NpyArray> b = readNpy(path("b.npy"));
  ASSERT_TRUE(b.isOk()) << b.status().message();
  EXPECT_EQ(b->dtype, DType::Bool);
  EXPECT_EQ(b->data, (std::vector<uint8_t>{1, 0, 1, 1}));
}

TEST_F(TensorFiles, NpyRejectsWhatItCannotRead) {
  auto npy = [&](const std::string &dict, const std::string &data) {
    std::string header = dict + "\n";
    std::string file = std::string("\x93NUMPY\x01\x00", 8);
    file += char(header.size() & 0xff);
    file += char(header.size() >> 8);
    writeRaw("x.npy", file + header + data);
    Expected<NpyArray> r = readNpy(path("x.npy"));
    EXPECT_FALSE(r.isOk()) << dict;
    return r.isOk() ? "" : r.status().message();
  };
  EXPECT_THAT(npy("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }",
                  std::string(4, '\0')),
              HasSubstr("big-endian dtype '>f4' is not supported; save "
                        "a.astype('<f4') instead"));
  EXPECT_THAT(npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
                  std::string(16, '\0')),
              HasSubstr("Fortran-ordered arrays are not supported"));
  EXPECT_THAT(npy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }",
                  std::string(8, '\0')),
              HasSubstr("unsupported dtype '<c8'"));
  EXPECT_THAT(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
                  std::string(8, '\0')),
              HasSubstr("truncated: the header promises 12 data bytes, the file has 8"));
  EXPECT_THAT(npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }",
                  std::string(4, '\0')),
              HasSubstr("structured arrays are not supported"));
  writeRaw("bad.npy", "PK\x03\x04 not an npy file");
  EXPECT_THAT(readNpy(path("bad.npy")).status().message(),
              HasSubstr("missing the \\x93NUMPY magic"));
}

TEST_F(TensorFiles, SurviveCorruptionOfAnyByte) {
  // Whatever one damaged byte does to a file, the readers answer with a value
  // or an error, and reads stay inside the file.
  std::vector<float> data = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(writeSafetensors(path("good.safetensors"),
                               {{"a", DType::F32, {2, 3}, data.data()},
                                {"b", DType::F32, {6}, data.data()}})
                  .isOk());
  ASSERT_TRUE(writeNpy(path("good.npy"), DType::F32, {2, 3}, data.data()).isOk());
  for (const char *name : {"good.safetensors", "good.npy"}) {
    std::ifstream in(path(name), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    bool npy = std::string(name).find(".npy") != std::string::npos;
    for (size_t i = 0; i < bytes.size(); ++i) {
      for (char value : {'\xff', '\0', '9', '}'}) {
        std::string damaged = bytes;
        damaged[i] = value;
        writeRaw("damaged", damaged);
        if (npy) {
          Expected<NpyArray> a = readNpy(path("damaged"));
          if (a.isOk()) {
            uint64_t numel = 1;
            for (int64_t d : a->shape)
              numel *= uint64_t(d);
            EXPECT_EQ(a->data.size(), numel * dtypeSize(a->dtype));
          }
          continue;
        }
        Expected<SafetensorsFile> f = SafetensorsFile::open(path("damaged"));
        if (!f.isOk())
          continue;
        for (const SafetensorsEntry &e : f->entries()) {
          std::vector<uint8_t> out(size_t(e.bytes));
          EXPECT_TRUE(f->read(e, 0, e.bytes, out.data()).isOk()) << i;
        }
      }
    }
  }
}

} // namespace
