//===- Npy.cpp - Reading and writing NumPy .npy files ---------------------===//
//
// The .npy format: the magic "\x93NUMPY", a major/minor version, a little-endian
// header length (2 bytes in 1.0, 4 in 2.0 and 3.0), and an ASCII Python dict
// literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded
// with spaces, followed by the raw array. Only the literal forms numpy itself
// writes are accepted; big-endian and Fortran-ordered arrays are rejected with a
// message saying how to convert them.
//
//===----------------------------------------------------------------------===//

#include "zrt/TensorFile.h"
#include "zrt/OutputFile.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace zrt {
namespace {

struct NpyDType {
  const char *descr; // without the byte-order character
  DType dtype;
};
constexpr NpyDType kNpyDTypes[] = {
    {"f4", DType::F32}, {"f8", DType::F64}, {"f2", DType::F16},
    {"i8", DType::I64}, {"i4", DType::I32}, {"i1", DType::I8},
    {"u1", DType::U8},  {"b1", DType::Bool},
};

/// A cursor over the header dict literal.
class DictParser {
public:
  explicit DictParser(const std::string &text) : s_(text) {}
  void skipSpace() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_])))
      ++i_;
  }
  bool consume(char c) {
    skipSpace();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool string(std::string &out) {
    skipSpace();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"'))
      return false;
    char q = s_[i_++];
    size_t end = s_.find(q, i_);
    if (end == std::string::npos)
      return false;
    out = s_.substr(i_, end - i_);
    i_ = end + 1;
    return true;
  }
  bool word(std::string &out) {
    skipSpace();
    size_t b = i_;
    while (i_ < s_.size() && std::isalnum(static_cast<unsigned char>(s_[i_])))
      ++i_;
    out = s_.substr(b, i_ - b);
    return !out.empty();
  }
  bool integer(int64_t &out) {
    skipSpace();
    size_t b = i_;
    out = 0;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
      if (out > (int64_t(1) << 55))
        return false;
      out = out * 10 + (s_[i_++] - '0');
    }
    if (i_ < s_.size() && s_[i_] == 'L') // Python 2 longs
      ++i_;
    return i_ > b;
  }

private:
  const std::string &s_;
  size_t i_ = 0;
};

} // namespace

Expected<NpyArray> readNpy(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error(path + ": cannot open: " + std::strerror(errno));
  const std::string bad = path + ": not a valid .npy file: ";
  unsigned char pre[10];
  if (!in.read(reinterpret_cast<char *>(pre), 8) ||
      std::memcmp(pre, "\x93NUMPY", 6) != 0)
    return Status::error(bad + "missing the \\x93NUMPY magic");
  int major = pre[6];
  uint32_t headerLen = 0;
  if (major == 1) {
    if (!in.read(reinterpret_cast<char *>(pre + 8), 2))
      return Status::error(bad + "truncated header");
    headerLen = uint32_t(pre[8]) | uint32_t(pre[9]) << 8;
  } else if (major == 2 || major == 3) {
    unsigned char len[4];
    if (!in.read(reinterpret_cast<char *>(len), 4))
      return Status::error(bad + "truncated header");
    headerLen = uint32_t(len[0]) | uint32_t(len[1]) << 8 |
                uint32_t(len[2]) << 16 | uint32_t(len[3]) << 24;
  } else {
    return Status::error(path + ": .npy format version " + std::to_string(major) +
                         " is not supported (1, 2 and 3 are)");
  }
  if (headerLen > (1u << 24))
    return Status::error(bad + "header of " + std::to_string(headerLen) +
                         " bytes");
  std::string header(headerLen, '\0');
  if (!in.read(header.data(), headerLen))
    return Status::error(bad + "truncated header");

  DictParser p(header);
  std::string descr;
  bool haveDescr = false, haveOrder = false, haveShape = false, fortran = false;
  NpyArray array;
  if (!p.consume('{'))
    return Status::error(bad + "header is not a dict");
  while (!p.consume('}')) {
    std::string key;
    if (!p.string(key) || !p.consume(':'))
      return Status::error(bad + "malformed header dict");
    if (key == "descr") {
      if (!p.string(descr))
        return Status::error(bad + "descr is not a string (structured arrays "
                                   "are not supported)");
      haveDescr = true;
    } else if (key == "fortran_order") {
      std::string value;
      if (!p.word(value) || (value != "True" && value != "False"))
        return Status::error(bad + "fortran_order is not True/False");
      fortran = value == "True";
      haveOrder = true;
    } else if (key == "shape") {
      if (!p.consume('('))
        return Status::error(bad + "shape is not a tuple");
      while (!p.consume(')')) {
        int64_t d;
        if (!p.integer(d))
          return Status::error(bad + "shape entries must be integers");
        array.shape.push_back(d);
        p.consume(',');
      }
      haveShape = true;
    } else {
      return Status::error(bad + "unexpected header key '" + key + "'");
    }
    p.consume(',');
  }
  if (!haveDescr || !haveOrder || !haveShape)
    return Status::error(bad + "header lacks descr, fortran_order or shape");
  if (fortran)
    return Status::error(path + ": Fortran-ordered arrays are not supported; "
                                "save np.ascontiguousarray(a) instead");
  if (descr.size() != 3)
    return Status::error(path + ": unsupported dtype '" + descr + "'");
  char order = descr[0];
  std::string code = descr.substr(1);
  bool found = false;
  for (const NpyDType &d : kNpyDTypes)
    if (code == d.descr) {
      array.dtype = d.dtype;
      found = true;
    }
  if (!found)
    return Status::error(path + ": unsupported dtype '" + descr +
                         "' (supported: f2 f4 f8 i1 i4 i8 u1 b1)");
  if (order == '>' && dtypeSize(array.dtype) > 1)
    return Status::error(path + ": big-endian dtype '" + descr +
                         "' is not supported; save a.astype('<" + code +
                         "') instead");
  if (order != '<' && order != '|' && order != '=' && order != '>')
    return Status::error(path + ": unsupported dtype '" + descr + "'");

  uint64_t numel = 1;
  for (int64_t d : array.shape)
    if (__builtin_mul_overflow(numel, uint64_t(d), &numel))
      return Status::error(bad + "shape is too large");
  uint64_t bytes;
  if (__builtin_mul_overflow(numel, uint64_t(dtypeSize(array.dtype)), &bytes))
    return Status::error(bad + "shape is too large");
  std::streampos dataStart = in.tellg();
  in.seekg(0, std::ios::end);
  uint64_t available = uint64_t(in.tellg() - dataStart);
  if (available < bytes)
    return Status::error(path + ": truncated: the header promises " +
                         std::to_string(bytes) + " data bytes, the file has " +
                         std::to_string(available));
  in.seekg(dataStart);
  array.data.resize(size_t(bytes));
  if (bytes > 0 && !in.read(reinterpret_cast<char *>(array.data.data()),
                            std::streamsize(bytes)))
    return Status::error(path + ": read failed");
  return array;
}

Status writeNpy(const std::string &path, DType dtype,
                const std::vector<int64_t> &shape, const void *data) {
  const char *code = nullptr;
  for (const NpyDType &d : kNpyDTypes)
    if (d.dtype == dtype)
      code = d.descr;
  if (!code)
    return Status::error(path + ": dtype " + std::string(dtypeName(dtype)) +
                         " has no .npy equivalent");
  std::string shapeText = "(";
  uint64_t numel = 1;
  for (int64_t d : shape) {
    shapeText += std::to_string(d) + (shape.size() == 1 ? ",)" : ", ");
    numel *= uint64_t(d);
  }
  if (shape.size() != 1) {
    if (shape.size() > 1)
      shapeText.resize(shapeText.size() - 2);
    shapeText += ")";
  }
  std::string header = std::string("{'descr': '") +
                       (dtypeSize(dtype) == 1 ? "|" : "<") + code +
                       "', 'fortran_order': False, 'shape': " + shapeText +
                       ", }";
  // Magic (6) + version (2) + length (2) + header + '\n', padded to 64 bytes.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  return writeFileAtomically(path, [&](int fd) {
    char len[2] = {char(header.size() & 0xff), char(header.size() >> 8)};
    return writeAllToFd(fd, "\x93NUMPY\x01\x00", 8) && writeAllToFd(fd, len, 2) &&
           writeAllToFd(fd, header.data(), header.size()) &&
           writeAllToFd(fd, data, numel * dtypeSize(dtype));
  });
}

} // namespace zrt
